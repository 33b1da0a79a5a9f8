//! The planted bug that lives in `apply` (`leafraft-chaos --plant batch-first-claim-only`),
//! compiled only with the cargo feature `planted` (see the service's `src/planted.rs`).
//!
//! The service arms it at start from `LEAFRAFT_PLANTED_BUG`; `apply` reads it, which is the one
//! thing `apply` may read besides its arguments, and only in a build made to be broken.

use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;

static APPLY_ONLY_FIRST_CLAIM: AtomicBool = AtomicBool::new(false);

/// From now on, a `ClaimBatch` applies only its first claim and answers the others as if applied.
pub fn arm_apply_only_first_claim() {
    APPLY_ONLY_FIRST_CLAIM.store(true, Ordering::Relaxed);
}

pub fn apply_only_first_claim() -> bool {
    APPLY_ONLY_FIRST_CLAIM.load(Ordering::Relaxed)
}
