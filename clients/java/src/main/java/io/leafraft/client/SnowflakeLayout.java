package io.leafraft.client;

/** A snowflake layout: milliseconds since {@code epochMs}, then worker, then sequence bits. */
public record SnowflakeLayout(long epochMs, int timeBits, int workerBits, int sequenceBits) {
    /** Leaf's and Twitter's layout, leafraft's default: epoch 1288834974657, 41/10/12 bits. */
    public static final SnowflakeLayout LEAF = new SnowflakeLayout(1288834974657L, 41, 10, 12);

    /** A snowflake ID taken apart locally. */
    public record Parts(long timestampMs, long worker, long sequence) {}

    public Parts decode(long id) {
        long sequence = id & ((1L << sequenceBits) - 1);
        long worker = (id >>> sequenceBits) & ((1L << workerBits) - 1);
        long elapsed = (id >>> (workerBits + sequenceBits)) & ((1L << timeBits) - 1);
        return new Parts(elapsed + epochMs, worker, sequence);
    }
}
