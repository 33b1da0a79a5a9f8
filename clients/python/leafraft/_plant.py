"""The conformance suite's planted bug (scripts/clients-test.sh). Private: off unless the
conformance program turns it on; the package never reads the environment for it.

REUSE_RANGE_AFTER_FAILOVER, on, makes a segment handle serve its previous range once more when a
range fetch was answered by another node than the previous fetch: exactly the bug a client must
never have, so that the suite shows it catches it.
"""

REUSE_RANGE_AFTER_FAILOVER = False
