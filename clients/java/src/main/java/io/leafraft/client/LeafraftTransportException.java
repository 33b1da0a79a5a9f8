package io.leafraft.client;

/** No node could be reached, or one answered something that is not the API's shape. */
public class LeafraftTransportException extends LeafraftException {
    private static final long serialVersionUID = 1L;

    public LeafraftTransportException(String message) {
        super(message);
    }

    public LeafraftTransportException(String message, Throwable cause) {
        super(message, cause);
    }

    @Override
    public boolean isTransient() {
        return true;
    }
}
