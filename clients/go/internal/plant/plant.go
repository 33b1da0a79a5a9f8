// Package plant holds the conformance suite's planted bug. It is internal: only programs inside
// this module (the conformance program, the tests) can reach it, never an application that
// imports the client. Off unless one of them turns it on.
package plant

import "sync/atomic"

// ReuseRangeAfterFailover, on, makes a segment handle serve its previous range once more when a
// range fetch was answered by another node than the previous fetch (a failover): exactly the
// bug a client must never have. scripts/clients-test.sh turns it on (through the conformance
// program's LEAFRAFT_CONFORMANCE_PLANT=reuse-range) to show that the suite catches it.
var ReuseRangeAfterFailover atomic.Bool
