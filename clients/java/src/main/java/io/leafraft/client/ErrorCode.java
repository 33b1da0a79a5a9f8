package io.leafraft.client;

/** The server's stable error codes (`docs/api.md#error-codes`), spelled as the server spells them. */
public enum ErrorCode {
    NOT_READY(true),
    TAG_NOT_FOUND(false),
    SEGMENTS_NOT_READY(true),
    CLOCK_BACKWARDS(true),
    WORKER_UNAVAILABLE(true),
    TAG_EXHAUSTED(false),
    NO_LEADER(true),
    INVALID_ARGUMENT(false),
    TAG_EXISTS(false),
    MAX_ID_DECREASE(false),
    NOT_A_LEARNER(false),
    LAST_VOTER(false),
    NODE_NOT_FOUND(false),
    UNAUTHORIZED(false),
    FORBIDDEN(false),
    NOT_FOUND(false),
    CLUSTER_MISMATCH(false),
    LEARNER_NOT_CAUGHT_UP(false),
    MODE_MISMATCH(false),
    NAMESPACE_EXISTS(false),
    NAMESPACE_NOT_FOUND(false),
    SECOND_EXHAUSTED(true),
    CLOCK_AHEAD(true),
    FEATURE_NOT_ENABLED(false),
    CLOCK_UNCHECKED(true),
    MEMBERS_BEHIND(true),
    /** A code this version does not know (a newer server): see {@link LeafraftApiException#rawCode()}. */
    UNKNOWN(false);

    private final boolean transientCode;

    ErrorCode(boolean transientCode) {
        this.transientCode = transientCode;
    }

    /** Another node, or the same one a little later, may serve what this refused: the 503 codes. */
    public boolean isTransient() {
        return transientCode;
    }

    /** The code as the server spells it; {@link #UNKNOWN} for one this version does not know. */
    public static ErrorCode parse(String code) {
        try {
            ErrorCode parsed = ErrorCode.valueOf(code);
            return parsed;
        } catch (IllegalArgumentException | NullPointerException e) {
            return UNKNOWN;
        }
    }
}
