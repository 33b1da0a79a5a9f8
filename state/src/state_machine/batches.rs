//! Property tests of `ClaimBatch`: a batch is its claims applied one by one, answer for answer
//! and byte for byte, whatever the mix of valid and refused claims; and no batch hands out a
//! range twice.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::codec;
use crate::records::NamespaceRecord;
use crate::request::Release;
use crate::timeseq::DEFAULT_EPOCH_S;

const T0_S: u64 = 1_800_000_000;
/// Two segment tags (one near the end of the ID space), a monotonic tag, a name never created.
const TAGS: [&str; 4] = ["orders", "last", "ticks", "missing"];
const NAMESPACES: [&str; 3] = ["a", "b", "missing"];

fn start_state() -> IdStateMachine {
    let mut sm = IdStateMachine::default();
    for (tag, max_id) in [("orders", 1), ("last", tag::MAX_ID_LIMIT - 2_500), ("ticks", 1)] {
        let created = sm.apply_request(&Request::CreateTag {
            tag: tag.into(),
            max_id,
            step: 1000,
            description: String::new(),
            now_ms: 1,
        });
        assert!(matches!(created, Response::Tag { .. }), "{created:?}");
    }
    let moved = sm.apply_request(&Request::SetTagMode { tag: "ticks".into(), mode: TagMode::Monotonic, now_ms: 2 });
    assert!(matches!(moved, Response::Tag { .. }), "{moved:?}");
    for (name, seq_bits) in [("a", 19), ("b", 6)] {
        let record = NamespaceRecord {
            epoch_s: DEFAULT_EPOCH_S,
            utc_offset_s: 0,
            shard_bits: if seq_bits < 11 { 20 } else { 63 - 32 - seq_bits },
            seq_bits,
            description: String::new(),
            created_at_ms: 1,
        };
        let created = sm.apply_request(&Request::CreateNamespace { namespace: name.into(), record });
        assert!(matches!(created, Response::Namespace { .. }), "{created:?}");
    }
    sm
}

/// Claims of every kind, valid and not: unknown names, a segment claim of the monotonic tag and
/// the other way round, step 0 and steps past the limit, the tag near the end, seconds far behind
/// or ahead of the claimer's clock, a namespace whose seconds hold 64 sequences.
fn claim() -> impl Strategy<Value = Claim> {
    let step = prop_oneof![Just(0u64), 1u64..3000, Just(tag::MAX_STEP), Just(tag::MAX_STEP + 1)];
    let tagged = (0..TAGS.len(), step, any::<bool>()).prop_map(|(tag, step, segment)| {
        let tag = TAGS[tag].to_string();
        if segment {
            Claim::Segment { tag, step }
        } else {
            Claim::Monotonic { tag, step }
        }
    });
    let timeseq = (0..NAMESPACES.len(), 0u64..1500, -700i64..12, 0u64..40, 0u64..1000).prop_map(
        |(ns, at_s, ahead_s, count, ms)| {
            let clock_s = T0_S + at_s;
            Claim::Timeseq {
                namespace: NAMESPACES[ns].to_string(),
                second: clock_s.saturating_add_signed(ahead_s),
                count,
                now_ms: clock_s * 1000 + ms,
            }
        },
    );
    prop_oneof![tagged, timeseq]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn a_batch_is_its_claims_one_by_one(batches in proptest::collection::vec(proptest::collection::vec(claim(), 0..12), 1..6)) {
        let mut batched = start_state();
        let mut one_by_one = start_state();
        let mut handed_out: BTreeMap<String, Vec<(u64, u64)>> = BTreeMap::new();
        for claims in &batches {
            let Response::Batch(answers) = batched.apply_request(&Request::ClaimBatch { claims: claims.clone() }) else {
                return Err(TestCaseError::fail("a batch answers Batch"));
            };
            prop_assert_eq!(answers.len(), claims.len());
            for (claim, answer) in claims.iter().zip(&answers) {
                prop_assert_eq!(answer, &one_by_one.apply_request(&claim.request().expect("a claim of its own")), "{:?}", claim);
                let key = match (claim, answer) {
                    (Claim::Segment { tag, .. } | Claim::Monotonic { tag, .. }, Response::Segment { start, end }) => {
                        Some((tag.clone(), (*start, *end)))
                    }
                    (Claim::Timeseq { namespace, .. }, Response::TimeseqRange { second, start, end }) => {
                        Some((format!("{namespace}@{second}"), (*start, *end)))
                    }
                    _ => None,
                };
                if let Some((name, range)) = key {
                    let ranges = handed_out.entry(name.clone()).or_default();
                    for earlier in ranges.iter() {
                        prop_assert!(range.1 <= earlier.0 || earlier.1 <= range.0, "{} handed out {:?} and {:?}", name, earlier, range);
                    }
                    ranges.push(range);
                }
            }
            prop_assert_eq!(codec::encode(&batched).expect("encode"), codec::encode(&one_by_one).expect("encode"));
        }
    }
}

/// A refused claim refuses only itself: the claims after it still apply.
#[test]
fn a_refused_claim_refuses_only_itself() {
    let mut sm = start_state();
    let claims = vec![
        Claim::Segment { tag: "missing".into(), step: 10 },
        Claim::Segment { tag: "ticks".into(), step: 10 },
        Claim::Segment { tag: "orders".into(), step: 10 },
        Claim::Monotonic { tag: "ticks".into(), step: 10 },
    ];
    let Response::Batch(answers) = sm.apply_request(&Request::ClaimBatch { claims }) else { panic!("a batch answer") };
    assert_eq!(answers[0], Response::Rejected(Rejection::TagNotFound));
    assert!(matches!(answers[1], Response::Rejected(Rejection::ModeMismatch(_))), "{:?}", answers[1]);
    assert_eq!(answers[2], Response::Segment { start: 1, end: 11 });
    assert_eq!(answers[3], Response::Segment { start: 1, end: 11 });
    assert_eq!(sm.tags["orders"].max_id, 11);
    assert_eq!(sm.tags["ticks"].max_id, 11);
}

/// One step of [`a_release_batch_is_its_releases_one_by_one`]: a claim batch of segment tags, or
/// a release batch of tails of earlier claims (each picked by an index among the claims so far,
/// with how much of its range was served).
#[derive(Debug, Clone)]
enum Step {
    Claims(Vec<(usize, u64)>),
    Releases(Vec<(usize, u64)>),
}

fn step() -> impl Strategy<Value = Step> {
    let claims = proptest::collection::vec((0..TAGS.len(), 1u64..3000), 0..6).prop_map(Step::Claims);
    let releases = proptest::collection::vec((any::<usize>(), 0u64..3000), 0..6).prop_map(Step::Releases);
    prop_oneof![claims, releases]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A `ReleaseBatch` is its releases applied one by one, answer for answer and byte for byte;
    /// and with releases made as nodes make them (each claim's tail at most once, from the part
    /// it did not serve), no claim after them overlaps what any claim served.
    #[test]
    fn a_release_batch_is_its_releases_one_by_one(steps in proptest::collection::vec(step(), 1..12)) {
        let mut batched = start_state();
        let mut one_by_one = start_state();
        // Every claim answered: (tag, start, end, released).
        let mut claimed: Vec<(String, u64, u64, bool)> = Vec::new();
        // What each tag's claims served: a claim serves its range up to where its tail was given back.
        let mut served: BTreeMap<String, Vec<(u64, u64)>> = BTreeMap::new();
        for step in &steps {
            match step {
                Step::Claims(claims) => {
                    let claims: Vec<Claim> =
                        claims.iter().map(|&(tag, step)| Claim::Segment { tag: TAGS[tag].to_string(), step }).collect();
                    let Response::Batch(answers) = batched.apply_request(&Request::ClaimBatch { claims: claims.clone() }) else {
                        return Err(TestCaseError::fail("a claim batch answers Batch"));
                    };
                    for (claim, answer) in claims.iter().zip(answers) {
                        prop_assert_eq!(&answer, &one_by_one.apply_request(&claim.request().expect("a claim of its own")));
                        if let (Claim::Segment { tag, .. }, Response::Segment { start, end }) = (claim, answer) {
                            for earlier in served.get(tag).into_iter().flatten() {
                                prop_assert!(end <= earlier.0 || earlier.1 <= start, "{} claimed {:?} over served {:?}", tag, (start, end), earlier);
                            }
                            claimed.push((tag.clone(), start, end, false));
                            served.entry(tag.clone()).or_default().push((start, end));
                        }
                    }
                }
                Step::Releases(picks) => {
                    let mut releases = Vec::new();
                    for &(pick, served_len) in picks {
                        if claimed.is_empty() {
                            break;
                        }
                        let at = pick % claimed.len();
                        let (tag, start, end, released) = &mut claimed[at];
                        if *released {
                            continue;
                        }
                        *released = true;
                        let from = (*start + served_len).min(*end - 1).max(*start);
                        releases.push(Release { tag: tag.clone(), from, expected_max_id: *end });
                        // The claim served [start, from) only.
                        let ranges = served.get_mut(tag.as_str()).expect("a claimed tag");
                        if let Some(range) = ranges.iter_mut().find(|range| **range == (*start, *end)) {
                            range.1 = from;
                        }
                    }
                    let Response::Batch(answers) = batched.apply_request(&Request::ReleaseBatch { releases: releases.clone() }) else {
                        return Err(TestCaseError::fail("a release batch answers Batch"));
                    };
                    prop_assert_eq!(answers.len(), releases.len());
                    for (release, answer) in releases.iter().zip(&answers) {
                        let single = Request::ReleaseSegment {
                            tag: release.tag.clone(),
                            from: release.from,
                            expected_max_id: release.expected_max_id,
                        };
                        prop_assert_eq!(answer, &one_by_one.apply_request(&single), "{:?}", release);
                    }
                }
            }
            prop_assert_eq!(codec::encode(&batched).expect("encode"), codec::encode(&one_by_one).expect("encode"));
        }
    }
}

/// A release that no longer matches refuses only itself: the next one of the same batch applies.
#[test]
fn a_refused_release_refuses_only_itself() {
    let mut sm = start_state();
    let claims =
        vec![Claim::Segment { tag: "orders".into(), step: 100 }, Claim::Segment { tag: "orders".into(), step: 100 }];
    let Response::Batch(_) = sm.apply_request(&Request::ClaimBatch { claims }) else { panic!("a batch answer") };
    let releases = vec![
        // The first claim's tail: a claim came after it, so it stays a gap.
        Release { tag: "orders".into(), from: 50, expected_max_id: 101 },
        Release { tag: "missing".into(), from: 2, expected_max_id: 10 },
        Release { tag: "orders".into(), from: 150, expected_max_id: 201 },
    ];
    let Response::Batch(answers) = sm.apply_request(&Request::ReleaseBatch { releases }) else {
        panic!("a batch answer")
    };
    assert_eq!(
        answers,
        vec![
            Response::Released { applied: false },
            Response::Rejected(Rejection::TagNotFound),
            Response::Released { applied: true }
        ]
    );
    assert_eq!(sm.tags["orders"].max_id, 150);
}
