//! Property test of the registry: whatever the order of claims and their clocks, no (namespace,
//! second, sequence) is in two claimed ranges, and replaying the same commands gives the same
//! bytes.

use std::collections::BTreeMap;
use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;
use crate::codec;
use crate::Claim;
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

/// A one-second claim or, as often, a window claim, alone or shared by up to three members (none
/// is refused): windows of up to 61 seconds (61 is refused) starting up to 12 seconds past the
/// claimer's clock (past 10 is refused) or behind it.
fn mixed_claim() -> impl Strategy<Value = Claim> {
    let shared = prop_oneof![Just(None), prop::collection::vec(0u64..40, 0..4).prop_map(Some)];
    let window = prop_oneof![Just(None), (1u64..62, -3i64..13, shared).prop_map(Some)];
    (claim(), window).prop_map(|(request, window)| {
        let Request::ClaimTimeseq { namespace, second, count, now_ms } = request else { unreachable!() };
        match window {
            None => Claim::Timeseq { namespace, second, count, now_ms },
            Some((seconds, ahead_s, None)) => Claim::TimeseqWindow {
                namespace,
                first_second: (now_ms / 1000).saturating_add_signed(ahead_s),
                seconds,
                count,
                now_ms,
            },
            Some((seconds, ahead_s, Some(counts))) => Claim::TimeseqSharedWindow {
                namespace,
                first_second: (now_ms / 1000).saturating_add_signed(ahead_s),
                seconds,
                now_ms,
                blocks: counts
                    .into_iter()
                    .enumerate()
                    .map(|(i, count)| SharedBlock { member: i as u64 + 1, count })
                    .collect(),
            },
        }
    })
}

/// A claim's answers one window claim at a time: a shared window's blocks each as the window
/// claim it applies as.
fn one_by_one(claim: &Claim, answer: Response) -> Vec<(Claim, Response)> {
    match (claim, answer) {
        (Claim::TimeseqSharedWindow { namespace, first_second, seconds, now_ms, blocks }, Response::Batch(answers)) => {
            blocks
                .iter()
                .zip(answers)
                .map(|(block, answer)| {
                    let window = Claim::TimeseqWindow {
                        namespace: namespace.clone(),
                        first_second: *first_second,
                        seconds: *seconds,
                        count: block.count,
                        now_ms: *now_ms,
                    };
                    (window, answer)
                })
                .collect()
        }
        (claim, answer) => vec![(claim.clone(), answer)],
    }
}

/// The state as the store keeps it: the baseline encoding and, beside it, the window blocks.
fn stored(sm: &IdStateMachine) -> Vec<u8> {
    codec::encode(&(sm, &sm.timeseq.windows)).expect("encode")
}

fn reloaded(sm: &IdStateMachine) -> IdStateMachine {
    let (mut state, windows): (IdStateMachine, BTreeMap<String, WindowBlocks>) =
        codec::decode(&stored(sm)).expect("decode");
    state.timeseq.windows = windows;
    state.cluster_version = sm.cluster_version;
    state
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Window claims and one-second claims of the same namespaces, in batches, under clocks that
    /// step back and forth, with the state reloaded from its stored form now and then: no
    /// (namespace, second, sequence) is in two claims, a refusal changes nothing, and replaying
    /// the same entries gives the same bytes.
    #[test]
    fn window_and_one_second_claims_never_share_a_sequence(
        batches in prop::collection::vec(prop::collection::vec(mixed_claim(), 1..4), 1..120),
        reloads in prop::collection::btree_set(0usize..120, 0..4),
    ) {
        let mut sm = IdStateMachine::default();
        let mut log = sm_creates();
        for request in &log {
            sm.apply_request(request);
        }
        let mut handed_out: BTreeSet<(String, u64, u64)> = BTreeSet::new();
        for (i, claims) in batches.into_iter().enumerate() {
            if reloads.contains(&i) {
                sm = reloaded(&sm);
            }
            let request = Request::ClaimBatch { claims: claims.clone() };
            log.push(request.clone());
            let Response::Batch(answers) = sm.apply_request(&request) else {
                return Err(TestCaseError::fail("a batch answers Batch"));
            };
            for (claim, answer) in claims.iter().zip(answers).flat_map(|(claim, answer)| one_by_one(claim, answer)) {
                let (namespace, seconds, start, end) = match (&claim, answer) {
                    (Claim::Timeseq { namespace, second, count, now_ms }, Response::TimeseqRange { second: s, start, end }) => {
                        prop_assert_eq!(s, *second);
                        prop_assert!(start < end && end - start <= *count);
                        prop_assert!(s * 1000 <= now_ms + LOOKAHEAD_MS);
                        (namespace.clone(), s..s + 1, start, end)
                    }
                    (
                        Claim::TimeseqWindow { namespace, first_second, seconds, count, now_ms },
                        Response::TimeseqWindow { first_second: f, seconds: n, start, end },
                    ) => {
                        prop_assert_eq!((f, n), (*first_second, *seconds));
                        prop_assert!((1..=MAX_WINDOW_S).contains(&n));
                        prop_assert!(start < end && end - start <= *count);
                        prop_assert!(f * 1000 <= now_ms + LOOKAHEAD_MS);
                        (namespace.clone(), f..f + n, start, end)
                    }
                    (_, Response::Rejected(_)) => continue,
                    (claim, other) => return Err(TestCaseError::fail(format!("{claim:?} answered {other:?}"))),
                };
                for second in seconds {
                    for seq in start..end {
                        prop_assert!(handed_out.insert((namespace.clone(), second, seq)), "{namespace} {second} {seq} twice");
                    }
                }
            }
            // Nothing kept below the horizon, of either kind.
            let horizon = sm.timeseq.horizon_s();
            for blocks in sm.timeseq.windows.values() {
                prop_assert!(blocks.keys().all(|&(last, first)| last >= horizon && first <= last && last - first < MAX_WINDOW_S));
            }
        }
        let mut replayed = IdStateMachine::default();
        for request in &log {
            replayed.apply_request(request);
        }
        prop_assert_eq!(stored(&replayed), stored(&sm));
        prop_assert_eq!(replayed, sm);
    }

    /// A refused claim of either kind, one by one, changes nothing.
    #[test]
    fn a_refused_window_claim_changes_nothing(claims in prop::collection::vec(mixed_claim(), 1..200)) {
        let mut sm = IdStateMachine::default();
        for request in sm_creates() {
            sm.apply_request(&request);
        }
        for claim in claims {
            let before = sm.clone();
            let Response::Batch(answers) = sm.apply_request(&Request::ClaimBatch { claims: vec![claim] }) else {
                return Err(TestCaseError::fail("a batch answers Batch"));
            };
            if matches!(answers[..], [Response::Rejected(_)]) {
                prop_assert_eq!(&sm, &before, "a rejection changed the state");
            }
        }
    }
}
