//! `cargo bench --bench timeseq`: one time-sequence ID from a ready range (`RangeHolder::take`,
//! what `Timeseq::next_ids` does per request while the current second's range lasts) against a
//! bare `AtomicU64::fetch_add`, measured in the same run, reported as a ratio (bar: within 3×,
//! `docs/bars.md#speed`). Encoding the long form (`Layout::encode`) is timed separately, since
//! the server does it once per ID when it writes the answer.

use std::hint::black_box;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

use leafraft_ids::timeseq::Layout;
use leafraft_ids::timeseq::Parts;
use leafraft_ids::timeseq::RangeHolder;
use leafraft_ids::timeseq::SecondRange;
use leafraft_ids::timeseq::Take;

mod common;

use common::median;
use common::ns_per_op;
use common::N;
use common::ROUNDS;

/// A fixed "now": the holder reads no clock, the caller passes the second.
const SECOND: u64 = 1_800_000_000;

fn main() {
    let counter = AtomicU64::new(0);
    let holder = RangeHolder::new();
    // One range large enough for every round (the engine does not bound a range's length; the
    // server's claims are at most 2^seq_bits).
    holder.install_range(SecondRange { second: SECOND, start: 0, end: 1 << 40 });
    holder.advance(SECOND);
    // Opaque to the optimiser, as a layout read from the replicated state is.
    let layout = black_box(Layout { epoch_s: 1_577_836_800, utc_offset_s: 0, shard_bits: 12, seq_bits: 19 });

    let (mut baseline, mut take, mut take_encode) = (Vec::new(), Vec::new(), Vec::new());
    // Interleave the rounds so all see the same machine load.
    for _ in 0..ROUNDS {
        baseline.push(ns_per_op(|| {
            black_box(counter.fetch_add(1, Ordering::Relaxed));
        }));
        take.push(ns_per_op(|| match holder.take(black_box(SECOND), 1) {
            Take::Ids { range, .. } => {
                black_box(range.start);
            }
            Take::Empty => unreachable!("the range holds 2^40 sequences"),
        }));
        take_encode.push(ns_per_op(|| match holder.take(black_box(SECOND), 1) {
            Take::Ids { range, .. } => {
                let parts = Parts { second: range.second, shard: 7, sequence: range.start & ((1 << 19) - 1) };
                black_box(layout.encode(parts).ok());
            }
            Take::Empty => unreachable!("the range holds 2^40 sequences"),
        }));
    }
    let (baseline, take, take_encode) = (median(baseline), median(take), median(take_encode));
    println!("AtomicU64::fetch_add                {baseline:6.2} ns/op (median of {ROUNDS} rounds of {N})");
    println!("RangeHolder::take(now, 1)           {take:6.2} ns/op");
    println!("take + Layout::encode (long form)   {take_encode:6.2} ns/op");
    println!("ratio take / fetch_add              {:6.2}x (bar: <= 3x)", take / baseline);
    println!("ratio take+encode / fetch_add       {:6.2}x", take_encode / baseline);
}
