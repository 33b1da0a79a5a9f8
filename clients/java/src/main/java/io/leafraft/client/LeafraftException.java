package io.leafraft.client;

/**
 * Everything the client throws (unchecked). The subclasses: {@link LeafraftApiException} (a node
 * answered one of the server's codes), {@link LeafraftTimeoutException} (the call's time budget
 * ran out), {@link LeafraftClosedException} (the handle or client was closed) and
 * {@link LeafraftTransportException} (no node could be reached, or an answer not in the API's shape).
 */
public class LeafraftException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public LeafraftException(String message) {
        super(message);
    }

    public LeafraftException(String message, Throwable cause) {
        super(message, cause);
    }

    /** Another node, or a later attempt, may succeed where this failed. */
    public boolean isTransient() {
        return false;
    }
}
