//! Property tests of the refill logic: real threads taking through one handle while the source
//! answers in pieces, slowly or not at all for a while.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::tests::fixed;
use super::tests::segment;
use super::tests::FakeSource;
use super::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Whatever the takers, batch sizes, range sizes and answer shapes: no ID twice, every ID
    /// from an answered range, and each taker's IDs increase (ranges used in the order they came).
    #[test]
    fn takers_never_share_an_id_and_use_ranges_in_order(
        takers in 1usize..8,
        rounds in 1u64..120,
        batch in 1u64..40,
        size in 1u64..200,
        pieces in 1u64..4,
        slow_ms in 0u64..3,
    ) {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
        let mut fake = FakeSource::new(1);
        Arc::get_mut(&mut fake).expect("unshared").pieces = pieces;
        *fake.delay.lock().unwrap() = Duration::from_millis(slow_ms);
        let handle = segment(&fake, fixed(size), Duration::from_secs(20));
        let taken: Vec<Vec<u64>> = runtime.block_on(async {
            let tasks: Vec<_> = (0..takers).map(|t| {
                let handle = handle.clone();
                tokio::spawn(async move {
                    let mut ids = Vec::new();
                    for round in 0..rounds {
                        let n = 1 + (round * 7 + t as u64) % batch;
                        ids.extend(handle.next_ids(n).await.expect("IDs"));
                    }
                    ids
                })
            }).collect();
            let mut all = Vec::new();
            for task in tasks {
                all.push(task.await.expect("taker"));
            }
            all
        });
        let answered = fake.answered();
        let mut seen = BTreeSet::new();
        for ids in &taken {
            prop_assert!(ids.windows(2).all(|w| w[0] < w[1]), "a taker's IDs go backwards");
            for &id in ids {
                prop_assert!(seen.insert(id), "ID {} handed out twice", id);
                prop_assert!(answered.iter().any(|r| r.start <= id && id < r.end), "ID {} was never answered", id);
            }
        }
    }
}
