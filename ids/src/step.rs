//! The dynamic step, as Leaf computes it: the step a node asks for in its next claim follows how
//! long its previous range lasted. One policy, two sets of thresholds: segment buffers (the
//! server's and the client library's) use Leaf's, [`StepPolicy::LEAF`]; the leader's sequencer of
//! monotonic tags (`src/services/monotonic/sequencer.rs`), which claims on the write path of a request, its
//! own, with ranges meant to last about a second.
//!
//! Which "max step" applies where: Leaf's `MAX_STEP`, 1,000,000, is how far the segment buffers'
//! dynamic step grows ([`StepPolicy::LEAF`]`.max_step`); `leafraft_state::tag::MAX_STEP`, 10,000,000, is the
//! largest step a tag may be configured with and the most one claim may ask for, which is also
//! where the sequencer's dynamic step stops.

use std::time::Duration;

/// How a changed step is kept within the tag's step and `max_step`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bounds {
    /// Leaf's: the previous step is first raised to the tag's; a doubling that would pass
    /// `max_step` keeps the step (so a tag configured above it keeps its own); a halving stops at
    /// the tag's step.
    Leaf,
    /// The changed step clamped into `[tag_step, max_step]`: a doubling past `max_step` gives
    /// `max_step`.
    Clamp,
}

/// When the step doubles, stays or halves, and its bounds; configurable so tests can shorten
/// the thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepPolicy {
    /// A range that lasted less than this doubles the step (Leaf's `SEGMENT_DURATION`).
    pub double_below: Duration,
    /// A range that lasted this long or longer halves it; in between, the step stays (Leaf:
    /// twice `SEGMENT_DURATION`).
    pub halve_from: Duration,
    /// Doubling stops here.
    pub max_step: u64,
    pub bounds: Bounds,
}

impl StepPolicy {
    /// Leaf's: `SEGMENT_DURATION` = 15 minutes, `MAX_STEP` = 1,000,000.
    pub const LEAF: StepPolicy = StepPolicy::leaf(Duration::from_secs(15 * 60), 1_000_000);

    /// Leaf's rule with another segment duration or cap: doubles below `segment_duration`,
    /// halves from twice it.
    pub const fn leaf(segment_duration: Duration, max_step: u64) -> StepPolicy {
        StepPolicy {
            double_below: segment_duration,
            halve_from: segment_duration.saturating_mul(2),
            max_step,
            bounds: Bounds::Leaf,
        }
    }

    /// The step of the next claim.
    ///
    /// `previous` is the step of the last claim and `lasted` how long ago it completed (`None`
    /// for the first claim of this buffer). The result is never below `tag_step`, and doubling
    /// never goes past `max_step` (with [`Bounds::Leaf`], a tag configured above it keeps its own
    /// step).
    pub fn next_step(&self, tag_step: u64, previous: Option<(u64, Duration)>) -> u64 {
        let Some((previous, lasted)) = previous else {
            return tag_step;
        };
        match self.bounds {
            Bounds::Leaf => {
                let step = previous.max(tag_step);
                if lasted < self.double_below {
                    match step.checked_mul(2) {
                        Some(doubled) if doubled <= self.max_step => doubled,
                        _ => step,
                    }
                } else if lasted < self.halve_from {
                    step
                } else {
                    (step / 2).max(tag_step)
                }
            }
            Bounds::Clamp => {
                let step = if lasted < self.double_below {
                    previous.saturating_mul(2)
                } else if lasted < self.halve_from {
                    previous
                } else {
                    previous / 2
                };
                step.min(self.max_step).max(tag_step)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(60);

    fn check(tag_step: u64, previous: Option<(u64, Duration)>, expected: u64) {
        assert_eq!(StepPolicy::LEAF.next_step(tag_step, previous), expected, "{tag_step} {previous:?}");
    }

    #[test]
    fn first_claim_uses_the_tag_step() {
        check(1000, None, 1000);
    }

    #[test]
    fn boundaries_follow_leaf() {
        let just_under = 15 * MIN - Duration::from_millis(1);
        check(1000, Some((1000, Duration::ZERO)), 2000);
        check(1000, Some((1000, just_under)), 2000);
        check(1000, Some((4000, 15 * MIN)), 4000);
        check(1000, Some((4000, 30 * MIN - Duration::from_millis(1))), 4000);
        check(1000, Some((4000, 30 * MIN)), 2000);
        check(1000, Some((4000, 10 * 60 * MIN)), 2000);
    }

    #[test]
    fn never_below_the_tag_step_nor_doubled_past_the_cap() {
        check(1000, Some((1000, 60 * MIN)), 1000);
        check(1000, Some((1500, 60 * MIN)), 1000);
        check(3000, Some((1000, 60 * MIN)), 3000);
        check(1000, Some((600_000, MIN)), 600_000);
        check(1000, Some((500_000, MIN)), 1_000_000);
        check(5_000_000, Some((5_000_000, MIN)), 5_000_000);
    }

    /// The sequencer's rule as it was written before it used this policy: the reference the
    /// `Clamp` bounds must reproduce exactly.
    fn sequencer_before(configured: u64, previous: u64, lasted: Duration) -> u64 {
        const FAST: Duration = Duration::from_secs(1);
        const SLOW: Duration = Duration::from_secs(30);
        match lasted {
            lasted if lasted < FAST => previous.saturating_mul(2),
            lasted if lasted > SLOW => previous / 2,
            _ => previous,
        }
        .clamp(configured, 10_000_000)
    }

    /// The sequencer's thresholds: doubles below 1 s, halves only past 30 s.
    const SEQUENCER: StepPolicy = StepPolicy {
        double_below: Duration::from_secs(1),
        halve_from: Duration::from_nanos(30_000_000_001),
        max_step: 10_000_000,
        bounds: Bounds::Clamp,
    };

    #[test]
    fn clamp_bounds_double_to_the_cap_and_halve_to_the_tag_step() {
        let s = Duration::from_secs(1);
        assert_eq!(SEQUENCER.next_step(10, None), 10);
        assert_eq!(SEQUENCER.next_step(10, Some((10, Duration::ZERO))), 20);
        assert_eq!(SEQUENCER.next_step(10, Some((6_000_000, Duration::ZERO))), 10_000_000);
        assert_eq!(SEQUENCER.next_step(10, Some((80, s))), 80);
        assert_eq!(SEQUENCER.next_step(10, Some((80, 30 * s))), 80);
        assert_eq!(SEQUENCER.next_step(10, Some((80, 30 * s + Duration::from_nanos(1)))), 40);
        assert_eq!(SEQUENCER.next_step(50, Some((80, 60 * s))), 50);
        // A tag step raised above the previous one: the doubled previous, at least the tag's.
        assert_eq!(SEQUENCER.next_step(150, Some((100, Duration::ZERO))), 200);
    }

    #[test]
    fn leaf_with_another_duration_halves_from_twice_it() {
        let policy = StepPolicy::leaf(Duration::from_secs(10), 1_000);
        assert_eq!(policy.next_step(10, Some((40, Duration::from_secs(19)))), 40);
        assert_eq!(policy.next_step(10, Some((40, Duration::from_secs(20)))), 20);
        assert_eq!(policy.next_step(10, Some((600, Duration::ZERO))), 600);
    }

    proptest::proptest! {
        #[test]
        fn clamp_bounds_are_the_sequencers_rule(
            configured in 1u64..=10_000_000,
            previous in 1u64..=10_000_000,
            nanos in proptest::prop_oneof![0u64..2_000_000_000, 29_999_999_990u64..30_000_000_010, 0u64..100_000_000_000],
        ) {
            let lasted = Duration::from_nanos(nanos);
            proptest::prop_assert_eq!(
                SEQUENCER.next_step(configured, Some((previous, lasted))),
                sequencer_before(configured, previous, lasted)
            );
        }
    }
}
