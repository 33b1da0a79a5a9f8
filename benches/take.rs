//! `cargo bench --bench take`: one ID from a ready segment buffer against a bare
//! `AtomicU64::fetch_add`, measured in the same run, reported as a ratio (bar: within 3×).

use std::hint::black_box;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

use leafraft_ids::IdRange;
use leafraft_ids::SegmentBuffer;
use leafraft_ids::Take;

mod common;

use common::median;
use common::ns_per_op;
use common::N;
use common::ROUNDS;

fn main() {
    let counter = AtomicU64::new(0);
    let buffer = SegmentBuffer::new();
    buffer.try_begin_load();
    buffer.install_next(IdRange { start: 1, end: 1 << 62 });
    buffer.switch();

    let mut baseline = Vec::new();
    let mut take = Vec::new();
    // Interleave the rounds so both see the same machine load.
    for _ in 0..ROUNDS {
        baseline.push(ns_per_op(|| {
            black_box(counter.fetch_add(1, Ordering::Relaxed));
        }));
        take.push(ns_per_op(|| match buffer.take(1) {
            Take::Ids { range, .. } => {
                black_box(range.start);
            }
            Take::UsedUp => unreachable!("the segment holds 2^62 IDs"),
        }));
    }
    let (baseline, take) = (median(baseline), median(take));
    println!("AtomicU64::fetch_add       {baseline:6.2} ns/op (median of {ROUNDS} rounds of {N})");
    println!("SegmentBuffer::take(1)     {take:6.2} ns/op");
    println!("ratio take / fetch_add     {:6.2}x (bar: <= 3x)", take / baseline);
}
