//! The planted bugs that live in `apply` (`leafraft-chaos --plant batch-first-claim-only`,
//! `--plant window-overlap`),
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

static WINDOW_OVER_ONE_SECOND_CLAIMS: AtomicBool = AtomicBool::new(false);

/// From now on, a claim sees only the window blocks of its very window: a window claim starts
/// above those alone (blind to one-second claims and to other nodes' overlapping windows), a
/// one-second claim above the one-second claims alone, so blocks and claims of one second overlap.
pub fn arm_window_overlap() {
    WINDOW_OVER_ONE_SECOND_CLAIMS.store(true, Ordering::Relaxed);
}

pub fn window_overlap() -> bool {
    WINDOW_OVER_ONE_SECOND_CLAIMS.load(Ordering::Relaxed)
}
