package io.leafraft.client;

/**
 * The conformance suite's planted bug (scripts/clients-test.sh). Package-private: only the
 * conformance program, compiled into this package, turns it on; off otherwise.
 *
 * <p>{@code reuseRangeAfterFailover}, on, makes a segment handle serve its previous range once
 * more when a range fetch was answered by another node than the previous fetch: exactly the bug a
 * client must never have, so that the suite shows it catches it.
 */
final class Plant {
    static volatile boolean reuseRangeAfterFailover = false;

    private Plant() {}
}
