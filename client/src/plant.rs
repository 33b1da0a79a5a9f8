//! The conformance suite's planted bug, compiled in only with the `conformance-plant` feature
//! (`scripts/clients-test.sh` builds `examples/conformance.rs` with it): off until the
//! conformance program turns it on from `LEAFRAFT_CONFORMANCE_PLANT=reuse-range`.

use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;

static REUSE_RANGE_AFTER_FAILOVER: AtomicBool = AtomicBool::new(false);

/// Makes segment handles serve their previous range once more after a failover: the bug a
/// client must never have, so that the suite shows it catches it.
pub fn set_reuse_range_after_failover(on: bool) {
    REUSE_RANGE_AFTER_FAILOVER.store(on, Relaxed);
}

pub(crate) fn reuse_range_after_failover() -> bool {
    REUSE_RANGE_AFTER_FAILOVER.load(Relaxed)
}
