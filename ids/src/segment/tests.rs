//! Unit tests of the double buffer; the concurrent property tests are in `proptests.rs`.

use super::*;

fn ids(take: Take) -> IdRange {
    match take {
        Take::Ids { range, .. } => range,
        Take::UsedUp => panic!("expected IDs, got UsedUp"),
    }
}

#[test]
fn a_fresh_buffer_is_used_up_until_a_segment_arrives() {
    let buffer = SegmentBuffer::new();
    assert_eq!(buffer.take(1), Take::UsedUp);
    assert_eq!(buffer.switch(), Switch::NotReady { loading: false });
    assert!(buffer.try_begin_load());
    assert!(!buffer.try_begin_load(), "exactly one load at a time");
    assert!(buffer.install_next(IdRange { start: 1, end: 11 }));
    assert!(!buffer.try_begin_load(), "no load while a next segment waits");
    assert_eq!(buffer.switch(), Switch::Switched);
    assert_eq!(ids(buffer.take(1)), IdRange { start: 1, end: 2 });
}

#[test]
fn load_is_due_once_when_ten_percent_is_used() {
    let buffer = SegmentBuffer::new();
    buffer.try_begin_load();
    buffer.install_next(IdRange { start: 100, end: 200 });
    buffer.switch();
    let mut due = 0;
    for expected in 100..200 {
        match buffer.take(1) {
            Take::Ids { range, load_due } => {
                assert_eq!(range, IdRange { start: expected, end: expected + 1 });
                if load_due {
                    assert_eq!(expected, 109, "the take that reaches 10 % used");
                    due += 1;
                }
            }
            Take::UsedUp => panic!("used up early"),
        }
    }
    assert_eq!(due, 1);
    assert_eq!(buffer.take(1), Take::UsedUp);
}

#[test]
fn a_batch_stops_at_the_segment_end_and_continues_in_the_next() {
    let buffer = SegmentBuffer::new();
    buffer.try_begin_load();
    buffer.install_next(IdRange { start: 1, end: 6 });
    buffer.switch();
    assert_eq!(ids(buffer.take(4)), IdRange { start: 1, end: 5 });
    assert_eq!(ids(buffer.take(4)), IdRange { start: 5, end: 6 });
    assert_eq!(buffer.take(4), Take::UsedUp);
    buffer.try_begin_load();
    buffer.install_next(IdRange { start: 20, end: 30 });
    assert_eq!(buffer.switch(), Switch::Switched);
    assert_eq!(ids(buffer.take(4)), IdRange { start: 20, end: 24 });
}

#[test]
fn close_reports_the_unserved_tail_and_stops_serving() {
    let buffer = SegmentBuffer::new();
    buffer.try_begin_load();
    buffer.install_next(IdRange { start: 1, end: 11 });
    buffer.switch();
    buffer.take(3);
    buffer.try_begin_load();
    buffer.install_next(IdRange { start: 11, end: 21 });
    let unserved = buffer.close();
    assert_eq!(unserved, vec![IdRange { start: 4, end: 11 }, IdRange { start: 11, end: 21 }]);
    assert_eq!(releasable_tail(&unserved), Some((4, 21)));
    assert_eq!(buffer.take(1), Take::UsedUp);
    assert_eq!(buffer.switch(), Switch::Closed);
    assert!(!buffer.try_begin_load());
    assert!(!buffer.install_next(IdRange { start: 30, end: 40 }), "a claim landing after close is not served");
}

#[test]
fn releasable_tail_stops_at_a_gap() {
    assert_eq!(releasable_tail(&[]), None);
    let gap = [IdRange { start: 4, end: 11 }, IdRange { start: 50, end: 60 }];
    assert_eq!(releasable_tail(&gap), Some((50, 60)));
}
