//! What the in-process benchmarks share: `N` calls timed per round, the median of the rounds.

use std::time::Instant;

/// Calls per timed round.
pub const N: u64 = 20_000_000;
/// Rounds per figure; the median is reported.
pub const ROUNDS: usize = 9;

pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Nanoseconds per call of `f`, over `N` calls.
pub fn ns_per_op(f: impl Fn()) -> f64 {
    let start = Instant::now();
    for _ in 0..N {
        f();
    }
    start.elapsed().as_nanos() as f64 / N as f64
}
