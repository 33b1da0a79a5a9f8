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
    claim(&mut sm, "t", 1000);
    assert_eq!(create(&mut sm, "t", 1, 1000), Response::Rejected(Rejection::TagExists));
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
