//! The margin's promises, property-tested: nothing the old cluster could have handed out is left
//! at or above the new `max_id` or floor, arithmetic never wraps, and a later recovery from the same
//! copy starts at least as high as an earlier one (a backup restored twice).

use leafraft_state::WorkerLease;
use proptest::prelude::*;

use super::*;

fn record(max_id: u64) -> TagRecord {
    TagRecord {
        max_id,
        step: 1000,
        description: String::new(),
        created_at_ms: 5,
        updated_at_ms: 6,
        mode: leafraft_state::TagMode::Segment,
    }
}

fn lease(window_end_ms: u64) -> WorkerLease {
    WorkerLease { holder: Some(1), epoch: 1, window_end_ms, floor_ms: 0, last_extend_ms: 9, released_by: None }
}

fn old_state(max_ids: &[u64], windows: &[u64], floor_ms: u64) -> OldState {
    let tags = max_ids.iter().enumerate().map(|(i, &max_id)| (format!("t{i}"), record(max_id))).collect();
    let workers = (0u32..).zip(windows).map(|(id, &end)| (id, lease(end))).collect();
    let snowflake = SnowflakeRegistry { layout: Some(SnowflakeLayout::LEAF), workers, floor_ms };
    OldState { tags, snowflake, timeseq: leafraft_state::TimeseqRegistry::default(), scramble_keys: BTreeMap::new() }
}

/// `claims_per_sec × the tag's claim bound × seconds`, exact.
fn rate_bound(options: &MarginOptions, record: &TagRecord, elapsed_ms: u64) -> u128 {
    u128::from(options.claims_per_sec) * u128::from(claim_bound(record)) * u128::from(elapsed_ms) / 1000
}

fn options() -> impl Strategy<Value = MarginOptions> {
    (0u64..1 << 40, 0u64..1_000_000, 0u64..3_600_000, 0u64..600_000).prop_map(
        |(margin_ids, claims_per_sec, margin_ms, worker_lease_ms)| MarginOptions {
            margin_ids,
            claims_per_sec,
            margin_ms,
            worker_lease_ms,
        },
    )
}

/// A `max_id` anywhere in the ID space, often near its end.
fn max_id() -> impl Strategy<Value = u64> {
    prop_oneof![1u64..=MAX_ID_LIMIT, (MAX_ID_LIMIT - (1 << 50))..=MAX_ID_LIMIT, 1u64..1 << 40]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, failure_persistence: None, ..ProptestConfig::default() })]

    /// Every ID the old cluster could have handed out by the recovery — anything below the copy's
    /// `max_id` plus the rate bound over the time since the copy — is below the new `max_id`, or the
    /// tag is exhausted. The new `max_id` never goes below the old one and never passes the limit.
    #[test]
    fn every_id_the_old_cluster_could_have_served_is_below_the_new_max_id(
        max_ids in prop::collection::vec(max_id(), 1..6),
        copy_time in 0u64..1 << 42,
        since in 0u64..400 * 24 * 3_600_000,
        options in options(),
    ) {
        let old = old_state(&max_ids, &[], 0);
        let recover_time = copy_time.saturating_add(since);
        let raised = raise(&old, copy_time, recover_time, &options);
        for (name, before) in &old.tags {
            let could_have_served = rate_bound(&options, before, since) + u128::from(options.margin_ids);
            let after = raised.tags[name].max_id;
            prop_assert!(after >= before.max_id && after <= MAX_ID_LIMIT, "{name}: {} -> {after}", before.max_id);
            let highest_old = u128::from(before.max_id) + could_have_served;
            prop_assert!(
                after == MAX_ID_LIMIT || u128::from(after) >= highest_old,
                "{name}: old max_id {} + {could_have_served} not covered by {after}", before.max_id
            );
            prop_assert_eq!((&raised.tags[name].description, raised.tags[name].step), (&before.description, before.step));
        }
    }

    /// The floor is above every window the copy shows, above the registry's own floor, and above
    /// the recover time plus the longest window, the lease and twice the time since the copy.
    #[test]
    fn the_snowflake_floor_is_above_every_old_window(
        windows in prop::collection::vec(0u64..1 << 45, 0..8),
        old_floor in 0u64..1 << 45,
        recover_time in 0u64..1 << 45,
        since_copy in 0u64..1 << 40,
        options in options(),
    ) {
        let old = old_state(&[1], &windows, old_floor);
        let copy_time = recover_time.saturating_sub(since_copy);
        let floor = raise(&old, copy_time, recover_time, &options).snowflake_floor_ms;
        for end in &windows {
            prop_assert!(floor > *end);
        }
        prop_assert!(floor > old_floor);
        let since = recover_time - copy_time;
        prop_assert!(floor > recover_time + MAX_WINDOW_MS + options.worker_lease_ms + options.margin_ms + 2 * since);
    }

    /// Restoring the same copy later starts every tag and the floor at least as high: what a first
    /// restored cluster served before it was lost stays below what a second one serves.
    #[test]
    fn a_later_recovery_from_the_same_copy_starts_at_least_as_high(
        max_ids in prop::collection::vec(max_id(), 1..4),
        copy_time in 0u64..1 << 42,
        first in 0u64..1 << 30,
        later in 0u64..1 << 30,
        options in options(),
    ) {
        let old = old_state(&max_ids, &[copy_time + 10_000], 0);
        let one = raise(&old, copy_time, copy_time + first, &options);
        let two = raise(&old, copy_time, copy_time + first + later, &options);
        for (name, record) in &one.tags {
            let served_meanwhile = rate_bound(&options, &old.tags[name], later);
            let covered = u128::from(record.max_id) + served_meanwhile;
            prop_assert!(two.tags[name].max_id == MAX_ID_LIMIT || u128::from(two.tags[name].max_id) >= covered);
        }
        // What the first cluster's holdings can have reached: its floor plus, ahead of the clock,
        // a millisecond per millisecond at the layout's full rate (twice that is allowed for).
        prop_assert!(two.snowflake_floor_ms >= one.snowflake_floor_ms + 2 * later);
    }
}

#[test]
fn a_tag_claims_at_most_its_claimers_largest_step() {
    let segment = record(1);
    assert_eq!(claim_bound(&segment), 1_000_000, "Leaf's largest dynamic step");
    let big = TagRecord { step: 5_000_000, ..record(1) };
    assert_eq!(claim_bound(&big), 5_000_000, "a tag configured above it claims its own step");
    let monotonic = TagRecord { mode: leafraft_state::TagMode::Monotonic, ..record(1) };
    assert_eq!(claim_bound(&monotonic), MAX_STEP, "the sequencer doubles up to the largest step");
}

#[test]
fn a_tag_that_would_pass_the_limit_is_exhausted_never_wrapped() {
    let old = old_state(&[MAX_ID_LIMIT - 5, MAX_ID_LIMIT, 1], &[], 0);
    let huge =
        MarginOptions { margin_ids: u64::MAX, claims_per_sec: u64::MAX, margin_ms: u64::MAX, worker_lease_ms: 0 };
    let raised = raise(&old, 0, u64::MAX, &huge);
    assert!(raised.tags.values().all(|record| record.max_id == MAX_ID_LIMIT));
    assert_eq!(raised.exhausted().count(), 3);
    assert!(raised.margins.values().all(|margin| *margin == u128::MAX));
    assert_eq!(raised.snowflake_floor_ms, u64::MAX, "the floor saturates too");
}

/// A segment tag with an ordinary step claims at most Leaf's largest dynamic step (1,000,000) at
/// a time, not the 10,000,000 only monotonic claims can ask for: three hours after the copy, its
/// IDs must still fit the 2^53 that JavaScript and many JSON stacks keep exactly.
#[test]
fn regression_a_recovery_hours_after_the_copy_keeps_ordinary_tags_below_2_pow_53() {
    let old = old_state(&[1_000_000], &[], 0);
    let three_hours = 3 * 3_600_000;
    let raised = raise(&old, 0, three_hours, &MarginOptions::default());
    assert!(raised.tags["t0"].max_id < 1 << 53, "{} passes 2^53", raised.tags["t0"].max_id);
}

#[test]
fn the_default_margin_over_a_day_leaves_most_of_the_id_space() {
    let day = 24 * 3_600_000;
    let margin = id_margin(0, day, MAX_STEP, &MarginOptions::default());
    // 100,000 claims/s × 10,000,000 IDs × (86,400 + 60) s: a monotonic tag, the largest claims.
    assert_eq!(margin, 100_000 * 10_000_000 * 86_460);
    assert!(margin < u128::from(MAX_ID_LIMIT) / 100, "a day's margin is under 1 % of the ID space");
}

#[test]
fn the_copy_time_is_the_latest_applied_clock() {
    let mut old = old_state(&[1, 2], &[50], 0);
    assert_eq!(latest_time_ms(&old.tags, &old.snowflake), Some(9));
    old.tags.get_mut("t1").expect("tag").updated_at_ms = 70;
    assert_eq!(latest_time_ms(&old.tags, &old.snowflake), Some(70));
    let empty = OldState::default();
    assert_eq!(latest_time_ms(&empty.tags, &empty.snowflake), None);
}

#[test]
fn the_restore_carries_the_raised_state() {
    let old = old_state(&[10], &[20], 0);
    let raised =
        raise(&old, 0, 0, &MarginOptions { margin_ids: 5, claims_per_sec: 0, margin_ms: 0, worker_lease_ms: 0 });
    let Request::Restore { tags, layout, snowflake_floor_ms } = raised.request() else { panic!("not a restore") };
    assert_eq!(tags["t0"].max_id, 15);
    assert_eq!(layout, Some(SnowflakeLayout::LEAF));
    assert_eq!(snowflake_floor_ms, 20 + MAX_WINDOW_MS + 1);
}

/// No second the old cluster can have claimed (up to its clock plus the lookahead, its clock at
/// most `margin_ms` ahead of this machine's) is claimable in the new cluster.
#[test]
fn the_timeseq_floor_is_above_every_second_the_old_cluster_can_have_claimed() {
    let options = MarginOptions::default();
    let recover_ms = 1_800_000_000_000;
    let mut old = leafraft_state::TimeseqRegistry { newest_now_ms: recover_ms - 5_000, ..Default::default() };
    let floor = timeseq_floor_s(&old, recover_ms, &options);
    let old_latest_claim_s = (recover_ms + options.margin_ms + leafraft_state::timeseq::LOOKAHEAD_MS) / 1000;
    assert!(floor > old_latest_claim_s, "{floor} <= {old_latest_claim_s}");
    // A copy whose clock ran ahead of the recovering machine's, or a floor from an earlier
    // recovery, raises it further.
    old.newest_now_ms = recover_ms + 3_600_000;
    assert!(
        timeseq_floor_s(&old, recover_ms, &options)
            > (old.newest_now_ms + leafraft_state::timeseq::LOOKAHEAD_MS) / 1000
    );
    old.newest_now_ms = 0;
    old.floor_s = recover_ms / 1000 + 7_200;
    assert!(timeseq_floor_s(&old, recover_ms, &options) > old.floor_s);
}
