package io.leafraft.client;

import java.time.Duration;

/** The call's time budget ran out; {@link #last()} is the last failure seen on the way. */
public class LeafraftTimeoutException extends LeafraftException {
    private static final long serialVersionUID = 1L;
    private final Duration waited;
    private final String last;

    public LeafraftTimeoutException(Duration waited, String last) {
        super("no answer within " + waited.toMillis() + " ms; last: " + last);
        this.waited = waited;
        this.last = last;
    }

    public Duration waited() {
        return waited;
    }

    public String last() {
        return last;
    }

    @Override
    public boolean isTransient() {
        return true;
    }
}
