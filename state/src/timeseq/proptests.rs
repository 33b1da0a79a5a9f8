//! Property test of the registry: whatever the order of claims and their clocks, no (namespace,
//! second, sequence) is in two claimed ranges, and replaying the same commands gives the same
//! bytes.

use std::collections::BTreeMap;
use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;
use crate::codec;
use crate::IdStateMachine;
use crate::Request;

const T0_S: u64 = 1_800_000_000;
const NAMESPACES: [&str; 3] = ["a", "b", "missing"];

fn namespace(seq_bits: u8) -> NamespaceRecord {
    NamespaceRecord {
        epoch_s: DEFAULT_EPOCH_S,
        utc_offset_s: 3600,
        shard_bits: if seq_bits < 11 { 20 } else { 63 - 32 - seq_bits },
        seq_bits,
        description: String::new(),
        created_at_ms: 1,
    }
}

/// A claim by a node whose clock is `skew_s` off, at real second `at_s`, for the second `ahead_s`
/// past its own clock (negative: a late refill, or a clock stepped back).
fn claim() -> impl Strategy<Value = Request> {
    (0..NAMESPACES.len(), 0u64..1500, -700i64..700, -3i64..15, 1u64..40, 0u64..1000).prop_map(
        |(ns, at_s, skew_s, ahead_s, count, ms)| {
            let clock_s = (T0_S + at_s).saturating_add_signed(skew_s);
            Request::ClaimTimeseq {
                namespace: NAMESPACES[ns].to_string(),
                second: clock_s.saturating_add_signed(ahead_s),
                count,
                now_ms: clock_s * 1000 + ms,
            }
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A registry read back from its bytes in the middle of a run (the forget mark starts over)
    /// ends in the same bytes as the run that kept it in memory.
    #[test]
    fn a_registry_read_back_mid_run_ends_in_the_same_bytes(
        claims in prop::collection::vec(claim(), 1..200),
        reload_at in 0usize..200,
    ) {
        let mut kept = IdStateMachine::default();
        for request in sm_creates() {
            kept.apply_request(&request);
        }
        let mut reloaded = kept.clone();
        for (i, request) in claims.iter().enumerate() {
            if i == reload_at {
                reloaded = codec::decode(&codec::encode(&reloaded).expect("encode")).expect("decode");
            }
            let answer = kept.apply_request(request);
            prop_assert_eq!(reloaded.apply_request(request), answer);
        }
        prop_assert_eq!(codec::encode(&reloaded).expect("encode"), codec::encode(&kept).expect("encode"));
    }

    #[test]
    fn no_sequence_is_claimed_twice_and_replay_is_byte_identical(claims in prop::collection::vec(claim(), 1..300)) {
        let mut sm = IdStateMachine::default();
        // Six sequence bits: seconds run out, so exhaustion is exercised too.
        for (name, seq_bits) in [("a", 6), ("b", 19)] {
            let create = Request::CreateNamespace { namespace: name.into(), record: namespace(seq_bits) };
            let created = matches!(sm.apply_request(&create), Response::Namespace { .. });
            prop_assert!(created);
        }
        let mut log: Vec<Request> = sm_creates();
        let mut handed_out: BTreeSet<(String, u64, u64)> = BTreeSet::new();
        let mut horizon = 0;
        for request in claims {
            let Request::ClaimTimeseq { namespace, second, count, now_ms } = &request else { unreachable!() };
            let before = sm.clone();
            let answer = sm.apply_request(&request);
            log.push(request.clone());
            prop_assert!(sm.timeseq.horizon_s() >= horizon, "the horizon went down");
            horizon = sm.timeseq.horizon_s();
            match answer {
                Response::TimeseqRange { second: s, start, end } => {
                    prop_assert_eq!(s, *second);
                    prop_assert!(start < end && end - start <= *count);
                    prop_assert!(s * 1000 <= now_ms + LOOKAHEAD_MS);
                    for seq in start..end {
                        prop_assert!(handed_out.insert((namespace.clone(), s, seq)), "{namespace} {s} {seq} twice");
                    }
                }
                Response::Rejected(_) => prop_assert_eq!(&sm, &before, "a rejection changed the state"),
                other => prop_assert!(false, "unexpected answer {:?}", other),
            }
        }
        let mut replayed = IdStateMachine::default();
        for request in &log {
            replayed.apply_request(request);
        }
        prop_assert_eq!(codec::encode(&replayed).expect("encode"), codec::encode(&sm).expect("encode"));
        // Nothing older than the horizon is kept.
        let kept: BTreeMap<_, _> = sm.timeseq.next_seq.iter().map(|(ns, s)| (ns.clone(), s.len())).collect();
        for seconds in sm.timeseq.next_seq.values() {
            prop_assert!(seconds.keys().all(|&s| s >= sm.timeseq.horizon_s()), "{kept:?}");
        }
    }
}

fn sm_creates() -> Vec<Request> {
    [("a", 6), ("b", 19)]
        .into_iter()
        .map(|(name, seq_bits)| Request::CreateNamespace { namespace: name.into(), record: namespace(seq_bits) })
        .collect()
}
