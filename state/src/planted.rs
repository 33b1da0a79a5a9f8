//! The planted bugs that live in `apply` (`leafraft-chaos --plant batch-first-claim-only`,
//! `--plant window-over-one-second`),
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

/// From now on, a window claim starts above the window blocks only, not above the one-second
/// claims of its seconds: a window block can overlap a one-second claim.
pub fn arm_window_over_one_second_claims() {
    WINDOW_OVER_ONE_SECOND_CLAIMS.store(true, Ordering::Relaxed);
}

pub fn window_over_one_second_claims() -> bool {
    WINDOW_OVER_ONE_SECOND_CLAIMS.load(Ordering::Relaxed)
}
