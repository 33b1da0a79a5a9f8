//! Unit tests of how the clock verdict is applied and of the lease validity.

use super::*;
use crate::clock::verdict::clock_verdict;
use crate::services::snowflakes::lease::needs_extension;

const SKEW: i64 = 1000;

/// Found by the chaos suite (seed 303, 3 nodes): the leader holding worker 1 was cut off, so
/// its lease ran out and another node took the worker over; meanwhile its wall clock was
/// stepped 7 s back, which made its old committed window look open again, and 6 s after the
/// takeover it issued IDs from that window: below the new holder's, so unique, but the worker's
/// IDs went back in time. A holding is now valid for a bounded time on the monotonic clock.
#[test]
fn regression_a_holding_expires_on_the_monotonic_clock_before_any_takeover() {
    let s = Duration::from_secs;
    let ms = Duration::from_millis;
    // The chaos settings: 4 s lease, 1 s skew, 1.5 s window: stop 2 s after asking.
    assert_eq!(lease_validity(s(4), s(1), ms(1500)), s(2));
    // The defaults: 60 s lease, 1 s skew, 10 s window.
    assert_eq!(lease_validity(s(60), s(1), s(10)), s(58));
    // A skew allowance as long as the lease: the window is all that bounds it.
    assert_eq!(lease_validity(s(60), s(60), s(10)), s(10));
}

/// Found by review: a node whose peers did not answer its first clock check got
/// `Keep` from the initial "not refused" state and acquired a worker with a clock nobody had
/// checked. In a cluster of several members it now starts refused until a verdict agrees.
#[test]
fn regression_an_unanswered_first_clock_check_acquires_a_worker() {
    let mut state = State::at_start();
    assert!(!state.record_verdict(clock_verdict(&[], 3, SKEW)), "nobody answered");
    assert!(!state.record_verdict(clock_verdict(&[12], 5, SKEW)), "one of four peers answered");
    assert!(state.refused.as_ref().is_some_and(|e| e.code == ErrorCode::WorkerUnavailable));
    assert!(state.record_verdict(clock_verdict(&[12, -40], 5, SKEW)), "a majority agrees");
    assert!(state.record_verdict(clock_verdict(&[], 5, SKEW)), "then silence keeps serving");
    assert!(!state.record_verdict(clock_verdict(&[6000, 6000], 3, SKEW)), "a majority disagrees");
}

/// The embedded default (one member) is served at its first check, with no peer to ask.
#[test]
fn a_single_member_acquires_at_its_first_check() {
    assert!(State::at_start().record_verdict(clock_verdict(&[], 1, SKEW)));
}

/// Found by `leafraft recover`: a recovered cluster's holdings start minutes ahead
/// of the clock (above every window the lost cluster could have committed), so the window never
/// came within half a window of the clock, no extension was asked, and the holding ran out on
/// the monotonic clock a lease after it began: snowflake answered WORKER_UNAVAILABLE for the ten
/// minutes until the clock caught up.
#[test]
fn regression_a_window_far_ahead_is_still_extended_before_the_holding_runs_out() {
    let s = Duration::from_secs;
    let (now, window, validity) = (1_000_000, s(10), s(58));
    let far_ahead = now + 11 * 60 * 1000;
    assert!(needs_extension(far_ahead, now, window, s(20), validity), "under half the validity left");
    assert!(!needs_extension(far_ahead, now, window, s(50), validity), "a fresh holding far ahead waits");
    // The usual trigger is unchanged: the window comes within half a window of the clock.
    assert!(needs_extension(now + 4_000, now, window, s(58), validity));
    assert!(!needs_extension(now + 6_000, now, window, s(58), validity));
}
