//! Table tests of `apply`; the property tests live in `state_machine/proptests.rs`.

use super::*;

fn create(sm: &mut IdStateMachine, tag: &str, max_id: u64, step: u64) -> Response {
    sm.apply_request(&Request::CreateTag { tag: tag.into(), max_id, step, description: String::new(), now_ms: 7 })
}

fn claim(sm: &mut IdStateMachine, tag: &str, step: u64) -> Response {
    sm.apply_request(&Request::ClaimSegment { tag: tag.into(), step })
}

#[test]
fn first_segment_of_a_new_tag_is_one_to_step() {
    let mut sm = IdStateMachine::default();
    assert!(matches!(create(&mut sm, "t", 1, 1000), Response::Tag { .. }));
    assert_eq!(claim(&mut sm, "t", 1000), Response::Segment { start: 1, end: 1001 });
    assert_eq!(claim(&mut sm, "t", 10), Response::Segment { start: 1001, end: 1011 });
    assert_eq!(sm.tags["t"].max_id, 1011);
}

#[test]
fn last_claim_is_short_and_then_exhausted() {
    let mut sm = IdStateMachine::default();
    create(&mut sm, "t", tag::MAX_ID_LIMIT - 5, 1000);
    assert_eq!(claim(&mut sm, "t", 1000), Response::Segment { start: tag::MAX_ID_LIMIT - 5, end: tag::MAX_ID_LIMIT });
    assert_eq!(claim(&mut sm, "t", 1000), Response::Rejected(Rejection::TagExhausted));
    assert_eq!(sm.tags["t"].max_id, tag::MAX_ID_LIMIT);
}

#[test]
fn create_twice_is_rejected_unless_identical_retry() {
    let mut sm = IdStateMachine::default();
    create(&mut sm, "t", 1, 1000);
    // Same command again (a retried forward): answered with the tag.
    assert!(matches!(create(&mut sm, "t", 1, 1000), Response::Tag { .. }));
    assert_eq!(create(&mut sm, "t", 5, 1000), Response::Rejected(Rejection::TagExists));
    let other_time =
        Request::CreateTag { tag: "t".into(), max_id: 1, step: 1000, description: String::new(), now_ms: 8 };
    assert_eq!(sm.apply_request(&other_time), Response::Rejected(Rejection::TagExists));
}

#[test]
fn bad_arguments_change_nothing() {
    let mut sm = IdStateMachine::default();
    for (tag, max_id, step) in [("bad tag", 1, 1), ("t", 0, 1), ("t", 1, 0), ("t", 1, tag::MAX_STEP + 1)] {
        assert!(matches!(create(&mut sm, tag, max_id, step), Response::Rejected(Rejection::InvalidArgument(_))));
    }
    assert!(sm.tags.is_empty());
    create(&mut sm, "t", 1, 1000);
    let before = sm.clone();
    assert!(matches!(claim(&mut sm, "t", 0), Response::Rejected(Rejection::InvalidArgument(_))));
    assert_eq!(claim(&mut sm, "nope", 10), Response::Rejected(Rejection::TagNotFound));
    assert_eq!(sm, before);
}

#[test]
fn update_raises_but_never_lowers_max_id() {
    let mut sm = IdStateMachine::default();
    create(&mut sm, "t", 100, 1000);
    let update = |max_id| Request::UpdateTag { tag: "t".into(), step: Some(5), description: None, max_id, now_ms: 9 };
    assert_eq!(sm.apply_request(&update(Some(99))), Response::Rejected(Rejection::MaxIdDecrease { current: 100 }));
    assert_eq!(sm.tags["t"].step, 1000, "a rejected update changes nothing");
    assert!(matches!(sm.apply_request(&update(Some(500))), Response::Tag { .. }));
    assert_eq!((sm.tags["t"].max_id, sm.tags["t"].step, sm.tags["t"].updated_at_ms), (500, 5, 9));
}

#[test]
fn release_applies_only_when_nobody_claimed_since() {
    let mut sm = IdStateMachine::default();
    create(&mut sm, "t", 1, 1000);
    claim(&mut sm, "t", 1000); // [1, 1001)
    let release = |from, expected| Request::ReleaseSegment { tag: "t".into(), from, expected_max_id: expected };
    assert_eq!(sm.apply_request(&release(501, 1001)), Response::Released { applied: true });
    assert_eq!(sm.tags["t"].max_id, 501);
    assert_eq!(claim(&mut sm, "t", 1000), Response::Segment { start: 501, end: 1501 });
    // Stale: max_id moved on.
    assert_eq!(sm.apply_request(&release(700, 1001)), Response::Released { applied: false });
    // Nonsense ranges never apply.
    assert_eq!(sm.apply_request(&release(1501, 1501)), Response::Released { applied: false });
    assert_eq!(sm.apply_request(&release(0, 1501)), Response::Released { applied: false });
    assert_eq!(sm.tags["t"].max_id, 1501);
}

#[test]
fn the_cluster_id_is_set_once() {
    let mut sm = IdStateMachine::default();
    assert_eq!(sm.apply_request(&Request::SetClusterId { cluster_id: 0 }), Response::ClusterId { cluster_id: 0 });
    assert_eq!(sm.apply_request(&Request::SetClusterId { cluster_id: 42 }), Response::ClusterId { cluster_id: 42 });
    // A second leader's proposal, or a retry, learns the recorded ID and changes nothing.
    assert_eq!(sm.apply_request(&Request::SetClusterId { cluster_id: 7 }), Response::ClusterId { cluster_id: 42 });
    assert_eq!(sm.cluster_id, 42);
}

/// Found by review: a raise forwarded to a leader that lost leadership before
/// answering is sent again to the next leader; both copies can commit. When claims moved
/// `max_id` past the raise in between, the second copy answered MAX_ID_DECREASE for a raise that
/// had taken effect. Its `now_ms` matches the tag's last update: it now answers the tag.
#[test]
fn regression_a_retried_raise_that_applied_answers_max_id_decrease() {
    let mut sm = IdStateMachine::default();
    create(&mut sm, "t", 1, 1000);
    let raise = Request::UpdateTag { tag: "t".into(), step: Some(10), description: None, max_id: Some(500), now_ms: 9 };
    assert!(matches!(sm.apply_request(&raise), Response::Tag { .. }));
    claim(&mut sm, "t", 10);
    let before = sm.clone();
    match sm.apply_request(&raise) {
        Response::Tag { record, .. } => assert_eq!(record, before.tags["t"]),
        other => panic!("the retried raise answered {other:?}"),
    }
    assert_eq!(sm, before, "the retry changes nothing");
    // Another update, or the same one at another time, is still a decrease.
    let later =
        Request::UpdateTag { tag: "t".into(), step: Some(10), description: None, max_id: Some(500), now_ms: 10 };
    assert_eq!(sm.apply_request(&later), Response::Rejected(Rejection::MaxIdDecrease { current: 510 }));
    let other = Request::UpdateTag { tag: "t".into(), step: Some(20), description: None, max_id: Some(500), now_ms: 9 };
    assert_eq!(sm.apply_request(&other), Response::Rejected(Rejection::MaxIdDecrease { current: 510 }));
}

/// Found by review: the same for a create, once a claim had moved `max_id`: the second
/// copy answered TAG_EXISTS. A create with the same `now_ms`, step and description whose `max_id`
/// is not above the tag's is its own earlier effect: it answers the tag.
#[test]
fn regression_a_retried_create_that_applied_answers_tag_exists() {
    let mut sm = IdStateMachine::default();
    create(&mut sm, "t", 1, 1000);
    claim(&mut sm, "t", 1000);
    let before = sm.clone();
    match create(&mut sm, "t", 1, 1000) {
        Response::Tag { record, .. } => assert_eq!(record, before.tags["t"]),
        other => panic!("the retried create answered {other:?}"),
    }
    assert_eq!(sm, before, "the retry changes nothing");
    assert_eq!(create(&mut sm, "t", 1, 999), Response::Rejected(Rejection::TagExists));
    assert_eq!(create(&mut sm, "t", 5000, 1000), Response::Rejected(Rejection::TagExists));
}

fn restore(tags: &[(&str, u64)], layout: Option<SnowflakeLayout>, floor: u64) -> Request {
    let record = |max_id| TagRecord {
        max_id,
        step: 1000,
        description: "d".into(),
        created_at_ms: 1,
        updated_at_ms: 2,
        mode: TagMode::Segment,
    };
    let tags = tags.iter().map(|(name, max_id)| (name.to_string(), record(*max_id))).collect();
    Request::Restore { tags, layout, snowflake_floor_ms: floor }
}

#[test]
fn a_restore_fills_an_empty_state_with_tags_layout_and_floor() {
    let mut sm = IdStateMachine::default();
    let answer = sm.apply_request(&restore(&[("a", 5_000), ("b", tag::MAX_ID_LIMIT)], Some(SnowflakeLayout::LEAF), 77));
    assert_eq!(answer, Response::Restored { tags: 2 });
    assert_eq!((sm.tags["a"].max_id, sm.tags["b"].max_id), (5_000, tag::MAX_ID_LIMIT));
    assert_eq!((sm.snowflake.layout, sm.snowflake.floor_ms), (Some(SnowflakeLayout::LEAF), 77));
    assert_eq!(claim(&mut sm, "a", 10), Response::Segment { start: 5_000, end: 5_010 });
    assert_eq!(claim(&mut sm, "b", 10), Response::Rejected(Rejection::TagExhausted), "exhausted stays exhausted");
}

#[test]
fn a_restore_never_touches_a_state_that_holds_tags_or_workers() {
    let mut with_tag = IdStateMachine::default();
    create(&mut with_tag, "a", 1, 1000);
    claim(&mut with_tag, "a", 1000);
    let mut with_worker = IdStateMachine::default();
    with_worker.apply_request(&Request::SetSnowflakeLayout { layout: SnowflakeLayout::LEAF });
    with_worker.apply_request(&Request::AcquireWorker { node: 1, now_ms: 5, lease_ms: 10, window_ms: 10 });
    for mut sm in [with_tag, with_worker] {
        let before = sm.clone();
        let answer = sm.apply_request(&restore(&[("a", 2)], None, 1_000_000));
        assert!(matches!(answer, Response::Rejected(Rejection::InvalidArgument(_))), "{answer:?}");
        assert_eq!(sm, before);
    }
}

#[test]
fn a_restore_with_a_bad_tag_or_another_layout_changes_nothing() {
    let other = SnowflakeLayout { time_bits: 42, worker_bits: 9, ..SnowflakeLayout::LEAF };
    let mut recorded = IdStateMachine::default();
    recorded.apply_request(&Request::SetSnowflakeLayout { layout: SnowflakeLayout::LEAF });
    let cases = [
        (IdStateMachine::default(), restore(&[("bad tag", 2)], None, 0)),
        (IdStateMachine::default(), restore(&[("a", 0)], None, 0)),
        (IdStateMachine::default(), restore(&[("a", tag::MAX_ID_LIMIT + 1)], None, 0)),
        (IdStateMachine::default(), restore(&[("a", 2)], Some(SnowflakeLayout { worker_bits: 0, ..other }), 0)),
        (recorded, restore(&[("a", 2)], Some(other), 0)),
    ];
    for (mut sm, request) in cases {
        let before = sm.clone();
        let answer = sm.apply_request(&request);
        assert!(matches!(answer, Response::Rejected(Rejection::InvalidArgument(_))), "{request:?}: {answer:?}");
        assert_eq!(sm, before);
    }
}

fn claim_monotonic(sm: &mut IdStateMachine, tag: &str, step: u64) -> Response {
    sm.apply_request(&Request::ClaimMonotonic { tag: tag.into(), step })
}

fn set_mode(sm: &mut IdStateMachine, tag: &str, mode: TagMode) -> Response {
    sm.apply_request(&Request::SetTagMode { tag: tag.into(), mode, now_ms: 9 })
}

#[test]
fn each_mode_is_claimed_only_by_its_own_claim() {
    let mut sm = IdStateMachine::default();
    let create_monotonic = Request::CreateTagInMode {
        tag: "m".into(),
        max_id: 10,
        step: 100,
        description: String::new(),
        now_ms: 7,
        mode: TagMode::Monotonic,
    };
    assert!(
        matches!(sm.apply_request(&create_monotonic), Response::Tag { record, .. } if record.mode == TagMode::Monotonic)
    );
    // A copy of the create (a resent forward) is answered with the tag and changes nothing.
    let before = sm.clone();
    assert!(matches!(sm.apply_request(&create_monotonic), Response::Tag { .. }));
    assert_eq!(sm, before);
    assert!(matches!(claim(&mut sm, "m", 100), Response::Rejected(Rejection::ModeMismatch(_))));
    assert_eq!(claim_monotonic(&mut sm, "m", 100), Response::Segment { start: 10, end: 110 });

    create(&mut sm, "s", 1, 1000);
    assert!(matches!(claim_monotonic(&mut sm, "s", 10), Response::Rejected(Rejection::ModeMismatch(_))));
    assert_eq!(claim(&mut sm, "s", 10), Response::Segment { start: 1, end: 11 });
}

#[test]
fn a_tag_moves_to_monotonic_and_never_back() {
    let mut sm = IdStateMachine::default();
    create(&mut sm, "t", 1, 1000);
    assert_eq!(claim(&mut sm, "t", 1000), Response::Segment { start: 1, end: 1001 });
    assert!(
        matches!(set_mode(&mut sm, "t", TagMode::Monotonic), Response::Tag { record, .. } if record.mode == TagMode::Monotonic)
    );
    // Claims of the monotonic leader start above every segment ever claimed.
    assert_eq!(claim_monotonic(&mut sm, "t", 5), Response::Segment { start: 1001, end: 1006 });
    let before = sm.clone();
    assert!(matches!(set_mode(&mut sm, "t", TagMode::Segment), Response::Rejected(Rejection::ModeMismatch(_))));
    assert!(matches!(set_mode(&mut sm, "t", TagMode::Monotonic), Response::Tag { .. }));
    assert_eq!(set_mode(&mut sm, "nope", TagMode::Monotonic), Response::Rejected(Rejection::TagNotFound));
    assert_eq!(sm.tags, before.tags);
}

fn scramble_key(key: u128) -> ScrambleKey {
    ScrambleKey { key, bits: ScrambleKey::MAX_BITS }
}

fn create_scrambled(sm: &mut IdStateMachine, tag: &str, key: u128) -> Response {
    sm.apply_request(&Request::CreateScrambledTag {
        tag: tag.into(),
        max_id: 1,
        step: 1000,
        description: String::new(),
        now_ms: 7,
        key: scramble_key(key),
    })
}

#[test]
fn a_scrambled_tag_has_its_key_from_its_creation_and_no_other_tag_gains_one() {
    let mut sm = IdStateMachine::default();
    assert!(matches!(create_scrambled(&mut sm, "s", 42), Response::Tag { .. }));
    assert_eq!(sm.scramble_keys, BTreeMap::from([("s".to_string(), scramble_key(42))]));
    // The same create committed twice: answered with the tag, nothing changes.
    let before = sm.clone();
    assert!(matches!(create_scrambled(&mut sm, "s", 42), Response::Tag { .. }));
    assert_eq!(sm, before);
    assert_eq!(sm.scramble_keys, before.scramble_keys);
    // Another key for the same tag, or a key for a plain tag that served plain IDs: refused.
    assert_eq!(create_scrambled(&mut sm, "s", 43), Response::Rejected(Rejection::TagExists));
    create(&mut sm, "plain", 1, 1000);
    assert_eq!(create_scrambled(&mut sm, "plain", 42), Response::Rejected(Rejection::TagExists));
    // Nor does a plain create of the scrambled tag's name change anything.
    assert_eq!(create(&mut sm, "s", 5, 1000), Response::Rejected(Rejection::TagExists));
    assert_eq!(sm.scramble_keys, BTreeMap::from([("s".to_string(), scramble_key(42))]));
    // Its claims are a segment tag's.
    assert_eq!(claim(&mut sm, "s", 1000), Response::Segment { start: 1, end: 1001 });
    // A bad create changes nothing, key included.
    let bad = Request::CreateScrambledTag {
        tag: "bad tag".into(),
        max_id: 1,
        step: 1000,
        description: String::new(),
        now_ms: 7,
        key: scramble_key(1),
    };
    assert!(matches!(sm.apply_request(&bad), Response::Rejected(Rejection::InvalidArgument(_))));
    assert!(!sm.scramble_keys.contains_key("bad tag"));
}

#[test]
fn a_narrow_scrambled_tag_is_exhausted_at_the_end_of_its_space() {
    let mut sm = IdStateMachine::default();
    let create = |name: &str, max_id, bits| Request::CreateScrambledTag {
        tag: name.into(),
        max_id,
        step: 1000,
        description: String::new(),
        now_ms: 7,
        key: ScrambleKey { key: 9, bits },
    };
    let limit = (1u64 << 16) - 1;
    assert!(matches!(sm.apply_request(&create("n", limit - 10, 16)), Response::Tag { .. }));
    assert_eq!(claim(&mut sm, "n", 1000), Response::Segment { start: limit - 10, end: limit });
    assert_eq!(claim(&mut sm, "n", 1000), Response::Rejected(Rejection::TagExhausted));
    // Widths outside 16..=63, and a max_id outside the space, change nothing.
    let before = sm.clone();
    for (name, max_id, bits) in [("a", 1, 15), ("b", 1, 64), ("c", limit, 16), ("d", 1, 0)] {
        let answer = sm.apply_request(&create(name, max_id, bits));
        assert!(matches!(answer, Response::Rejected(Rejection::InvalidArgument(_))), "{name}: {answer:?}");
    }
    assert_eq!(sm, before);
}

#[test]
fn a_scrambled_tag_never_becomes_monotonic() {
    let mut sm = IdStateMachine::default();
    create_scrambled(&mut sm, "s", 42);
    let before = sm.clone();
    let to_monotonic = Request::SetTagMode { tag: "s".into(), mode: TagMode::Monotonic, now_ms: 8 };
    assert!(matches!(sm.apply_request(&to_monotonic), Response::Rejected(Rejection::ModeMismatch(_))));
    assert_eq!(sm, before);
}

#[test]
fn scramble_keys_are_restored_once_and_only_for_existing_segment_tags() {
    let mut sm = IdStateMachine::default();
    create(&mut sm, "a", 1, 1000);
    sm.apply_request(&Request::CreateTagInMode {
        tag: "m".into(),
        max_id: 1,
        step: 1000,
        description: String::new(),
        now_ms: 7,
        mode: TagMode::Monotonic,
    });
    let restore = |keys: &[(&str, u128)]| Request::RestoreScrambleKeys {
        keys: keys.iter().map(|(tag, key)| (tag.to_string(), scramble_key(*key))).collect(),
    };
    let before = sm.clone();
    assert_eq!(sm.apply_request(&restore(&[("a", 1), ("missing", 2)])), Response::Rejected(Rejection::TagNotFound));
    assert!(matches!(sm.apply_request(&restore(&[("m", 1)])), Response::Rejected(Rejection::ModeMismatch(_))));
    assert_eq!(sm, before);
    assert_eq!(sm.scramble_keys, before.scramble_keys);
    assert_eq!(sm.apply_request(&restore(&[("a", 1)])), Response::Empty);
    assert_eq!(sm.scramble_keys, BTreeMap::from([("a".to_string(), scramble_key(1))]));
    assert!(matches!(sm.apply_request(&restore(&[("a", 2)])), Response::Rejected(Rejection::InvalidArgument(_))));
    assert_eq!(sm.scramble_keys, BTreeMap::from([("a".to_string(), scramble_key(1))]));
}
