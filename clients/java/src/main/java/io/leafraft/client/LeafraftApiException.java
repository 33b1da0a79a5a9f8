package io.leafraft.client;

/** A node answered an error in the API's shape: {@code {"error":{"code","message"}}}. */
public class LeafraftApiException extends LeafraftException {
    private static final long serialVersionUID = 1L;
    private final int status;
    private final ErrorCode code;
    private final String rawCode;
    private final String serverMessage;

    public LeafraftApiException(int status, String rawCode, String message) {
        super(rawCode + " (" + status + "): " + message);
        this.status = status;
        this.rawCode = rawCode;
        this.code = ErrorCode.parse(rawCode);
        this.serverMessage = message;
    }

    public int status() {
        return status;
    }

    public ErrorCode code() {
        return code;
    }

    /** The code as the server wrote it (the one to show when {@link #code()} is UNKNOWN). */
    public String rawCode() {
        return rawCode;
    }

    public String serverMessage() {
        return serverMessage;
    }

    @Override
    public boolean isTransient() {
        return code.isTransient() || status >= 500;
    }
}
