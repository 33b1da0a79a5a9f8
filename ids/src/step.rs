//! The dynamic step, as Leaf computes it: the step a node asks for in its next claim follows how
//! long its previous segment lasted.

use std::time::Duration;

/// Leaf's thresholds (`SEGMENT_DURATION` = 15 minutes, `MAX_STEP` = 1,000,000: how far the dynamic
/// step grows), configurable so tests can shorten them. Not the limit on a tag's configured step,
/// `raft::tag::MAX_STEP` (10,000,000).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepPolicy {
    /// A segment that lasted less than this doubles the step; less than twice this keeps it;
    /// longer halves it.
    pub segment_duration: Duration,
    /// Doubling stops here.
    pub max_step: u64,
}

impl StepPolicy {
    pub const LEAF: StepPolicy = StepPolicy { segment_duration: Duration::from_secs(15 * 60), max_step: 1_000_000 };

    /// The step of the next claim.
    ///
    /// `previous` is the step of the last claim and `lasted` how long ago it completed (`None`
    /// for the first claim of this buffer). The result is never below `tag_step`, and doubling
    /// never goes past `max_step` (a tag configured above it keeps its own step).
    pub fn next_step(&self, tag_step: u64, previous: Option<(u64, Duration)>) -> u64 {
        let Some((previous, lasted)) = previous else {
            return tag_step;
        };
        let step = previous.max(tag_step);
        if lasted < self.segment_duration {
            match step.checked_mul(2) {
                Some(doubled) if doubled <= self.max_step => doubled,
                _ => step,
            }
        } else if lasted < self.segment_duration.saturating_mul(2) {
            step
        } else {
            (step / 2).max(tag_step)
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
}
