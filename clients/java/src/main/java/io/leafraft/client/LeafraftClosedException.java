package io.leafraft.client;

/** The handle or the client was closed: its unused IDs were dropped (a gap, never served). */
public class LeafraftClosedException extends LeafraftException {
    private static final long serialVersionUID = 1L;

    public LeafraftClosedException() {
        super("closed: no more IDs are handed out by this handle");
    }
}
