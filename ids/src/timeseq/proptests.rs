//! Property tests: both forms of an ID round-trip and order by second; a holder fed claimed
//! ranges and taken from by several threads hands out each sequence at most once, only from
//! those ranges, and per thread never a second older than one it already handed out.

use std::collections::BTreeSet;
use std::sync::Arc;

use proptest::prelude::*;

use super::*;

fn layout() -> impl Strategy<Value = Layout> {
    (0u8..=20, 1u8..=24, -1080i32..=1080, 0u64..2_000_000_000).prop_filter_map(
        "31 to 37 time bits",
        |(shard_bits, seq_bits, offset_min, epoch_s)| {
            let time_bits = 63 - i32::from(shard_bits) - i32::from(seq_bits);
            (31..=37).contains(&time_bits).then_some(Layout {
                epoch_s,
                utc_offset_s: offset_min * 60,
                shard_bits,
                seq_bits,
            })
        },
    )
}

fn parts(layout: Layout) -> impl Strategy<Value = Parts> {
    let max_offset = (1u64 << layout.time_bits()) - 1;
    (0..=max_offset, 0..=layout.max_shard(), 0..=layout.max_sequence())
        .prop_map(move |(offset, shard, sequence)| Parts { second: layout.epoch_s + offset, shard, sequence })
}

proptest! {
    #[test]
    fn both_forms_round_trip_and_a_later_second_is_larger(
        (layout, a, b) in layout().prop_flat_map(|layout| (Just(layout), parts(layout), parts(layout))),
        prefix in "[A-Za-z0-9_-]{0,32}",
    ) {
        let long_a = layout.encode(a).expect("encode");
        prop_assert!(long_a <= i64::MAX as u64);
        prop_assert_eq!(layout.decode(long_a), Ok(a));
        prop_assert_eq!(layout.parse_any(&long_a.to_string()), Ok(a));
        let string_a = layout.format(&prefix, a).expect("format");
        prop_assert_eq!(layout.parse(&string_a), Ok((prefix.clone(), a)));
        prop_assert_eq!(layout.parse_any(&string_a), Ok(a));
        let long_b = layout.encode(b).expect("encode");
        if a.second < b.second {
            prop_assert!(long_a < long_b);
        }
        // Equal strings only for equal parts (a fixed offset never repeats a local time).
        let string_b = layout.format(&prefix, b).expect("format");
        prop_assert_eq!(string_a == string_b, a == b);
    }
}

#[derive(Debug, Clone)]
enum Step {
    /// A committed claim of `len` sequences of `now + ahead` and, for a window, as many of each
    /// of the `seconds - 1` seconds after it (the same block in each).
    Install { ahead: u64, seconds: u64, len: u64 },
    /// The clock moves on by this many seconds.
    Tick(u64),
    /// Every thread takes this many times.
    Take(u64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0u64..3, prop_oneof![Just(1u64), 1u64..6], 1u64..50).prop_map(|(ahead, seconds, len)| Step::Install {
            ahead,
            seconds,
            len
        }),
        (0u64..2).prop_map(Step::Tick),
        (1u64..20).prop_map(Step::Take),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn threads_never_share_a_sequence_and_never_go_back_a_second(steps in prop::collection::vec(step(), 1..60)) {
        let holder = Arc::new(RangeHolder::new());
        let mut now_s = 1_000;
        let mut next_seq = std::collections::BTreeMap::<u64, u64>::new();
        let mut installed = BTreeSet::new();
        let mut handed_out = BTreeSet::new();
        let mut last_second = [0u64; 3];
        for step in steps {
            match step {
                Step::Install { ahead, seconds, len } => {
                    // As the registry gives a block: above everything given in any of its seconds.
                    let first = now_s + ahead;
                    let window = first..first + seconds;
                    let start = window.clone().map(|second| next_seq.get(&second).copied().unwrap_or(0)).max().unwrap_or(0);
                    for second in window.clone() {
                        next_seq.insert(second, start + len);
                        installed.extend((start..start + len).map(|seq| (second, seq)));
                    }
                    if seconds == 1 {
                        holder.install_range(SecondRange { second: first, start, end: start + len });
                    } else {
                        holder.install_block(first, window.end - 1, start, start + len);
                    }
                }
                Step::Tick(seconds) => now_s += seconds,
                Step::Take(times) => {
                    let threads: Vec<_> = (0..3).map(|_| {
                        let holder = holder.clone();
                        std::thread::spawn(move || {
                            let mut got = Vec::new();
                            for _ in 0..times {
                                match holder.take(now_s, 3) {
                                    Take::Ids { range, .. } => got.extend((range.start..range.end).map(|seq| (range.second, seq))),
                                    Take::Empty => { holder.advance(now_s); }
                                }
                            }
                            got
                        })
                    }).collect();
                    for (thread, handle) in threads.into_iter().enumerate() {
                        for (second, seq) in handle.join().expect("thread") {
                            prop_assert!(installed.contains(&(second, seq)), "never installed: {second} {seq}");
                            prop_assert!(handed_out.insert((second, seq)), "twice: {second} {seq}");
                            prop_assert!(second >= last_second[thread]);
                            prop_assert!(second >= now_s, "served after its second passed");
                            last_second[thread] = second;
                        }
                    }
                }
            }
        }
    }
}
