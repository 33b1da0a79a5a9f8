package io.leafraft.client;

/** A half-open range {@code [start, end)} of IDs. */
public record IdRange(long start, long end) {
    public long length() {
        return end - start;
    }
}
