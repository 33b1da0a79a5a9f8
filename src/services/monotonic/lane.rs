//! The sequencer's ranges of one monotonic tag and how takes are cut from them, kept apart so the
//! cut rules are tested on their own.
//!
//! IDs leave in the order takes are cut, from the front: a take of `count` IDs in any ranges uses
//! what the front holds and goes on in the next range; a contiguous take (`/ranges`) needs one
//! range of `count` consecutive IDs, so front ranges too short for it are dropped first. Their
//! rest is a gap, never served: a later take gets only IDs above them, as real-time order needs.

use std::collections::VecDeque;

use tokio::time::Instant;

use leafraft_ids::IdRange;

/// This leader's ranges of one tag, all claimed in `term`.
pub(super) struct Lane {
    pub term: u64,
    pub ranges: VecDeque<IdRange>,
    /// What the next claim asks for.
    pub step: u64,
    pub claimed_at: Instant,
}

impl Lane {
    pub fn new(term: u64, step: u64) -> Lane {
        Lane { term, ranges: VecDeque::new(), step, claimed_at: Instant::now() }
    }

    /// The next `count` IDs, or `None` (and the lane untouched) when it cannot serve them.
    pub fn cut(&mut self, count: u64, contiguous: bool) -> Option<Vec<IdRange>> {
        cut(&mut self.ranges, count, contiguous)
    }
}

/// Cuts `count` IDs off the front of `ranges` (see the module): `None`, with `ranges` untouched,
/// when they do not hold them (in one range, for a `contiguous` take).
pub(super) fn cut(ranges: &mut VecDeque<IdRange>, mut count: u64, contiguous: bool) -> Option<Vec<IdRange>> {
    if contiguous {
        if !ranges.iter().any(|range| range.len() >= count) {
            return None;
        }
        // A gap: these IDs are never served (every later take is cut above them).
        while ranges.front().is_some_and(|front| front.len() < count) {
            ranges.pop_front();
        }
    } else if ranges.iter().map(IdRange::len).sum::<u64>() < count {
        return None;
    }
    let mut out = Vec::new();
    while count > 0 {
        let front = ranges.front_mut()?;
        let n = count.min(front.len());
        out.push(IdRange { start: front.start, end: front.start + n });
        front.start += n;
        count -= n;
        if front.is_empty() {
            ranges.pop_front();
        }
    }
    Some(out)
}

/// How many IDs one fresh range behind `ranges` must hold for `takes` (count, contiguous), cut
/// in order, to all be served: the total count from the first take `ranges` cannot serve on (0
/// when they serve every take). Enough: whatever the takes before take `j` use of the fresh
/// range is at most their counts, so at least take `j`'s count is left in it, in one piece.
pub(super) fn shortfall(ranges: &VecDeque<IdRange>, takes: &[(u64, bool)]) -> u64 {
    let mut scratch = ranges.clone();
    for (at, &(count, contiguous)) in takes.iter().enumerate() {
        if cut(&mut scratch, count, contiguous).is_none() {
            return takes[at..].iter().fold(0u64, |total, (count, _)| total.saturating_add(*count));
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges(list: &[(u64, u64)]) -> VecDeque<IdRange> {
        list.iter().map(|&(start, end)| IdRange { start, end }).collect()
    }

    fn range(start: u64, end: u64) -> IdRange {
        IdRange { start, end }
    }

    #[test]
    fn a_take_is_cut_in_order_across_ranges() {
        let mut lane = Lane { ranges: ranges(&[(10, 13), (20, 30)]), ..Lane::new(1, 10) };
        let available = |lane: &Lane| lane.ranges.iter().map(IdRange::len).sum::<u64>();
        assert_eq!(available(&lane), 13);
        assert_eq!(lane.cut(2, false), Some(vec![range(10, 12)]));
        assert_eq!(lane.cut(3, false), Some(vec![range(12, 13), range(20, 22)]));
        assert_eq!(lane.cut(9, false), None, "more than the lane holds");
        assert_eq!(lane.cut(8, false), Some(vec![range(22, 30)]));
        assert_eq!(available(&lane), 0);
    }

    #[test]
    fn a_contiguous_take_skips_front_ranges_too_short_and_never_serves_them() {
        let mut held = ranges(&[(10, 13), (20, 24), (40, 50)]);
        assert_eq!(cut(&mut held, 4, true), Some(vec![range(20, 24)]));
        assert_eq!(held, ranges(&[(40, 50)]), "the rest of the short front range is a gap");
        assert_eq!(cut(&mut held, 11, true), None);
        assert_eq!(held, ranges(&[(40, 50)]), "a refused take leaves the ranges as they were");
        assert_eq!(cut(&mut held, 3, false), Some(vec![range(40, 43)]));
        assert_eq!(cut(&mut held, 7, true), Some(vec![range(43, 50)]));
    }

    #[test]
    fn the_shortfall_counts_from_the_first_take_that_cannot_be_served() {
        let held = ranges(&[(10, 13), (20, 24)]);
        assert_eq!(shortfall(&held, &[(2, false), (5, false)]), 0);
        // The contiguous take of 4 skips (12, 13) and uses (20, 24): nothing is left for the 1.
        assert_eq!(shortfall(&held, &[(2, false), (4, true), (1, false), (6, true)]), 7);
        assert_eq!(shortfall(&VecDeque::new(), &[(3, true), (2, false)]), 5);
    }

    #[test]
    fn a_fresh_range_of_the_shortfall_serves_every_take() {
        let takes = [(3, false), (8, true), (1, false), (8, true), (2, true)];
        for held in [ranges(&[]), ranges(&[(0, 5)]), ranges(&[(0, 2), (100, 107)])] {
            let missing = shortfall(&held, &takes);
            let mut lane = held.clone();
            lane.push_back(range(1000, 1000 + missing));
            for (count, contiguous) in takes {
                let cut = cut(&mut lane, count, contiguous).expect("served");
                assert_eq!(cut.iter().map(IdRange::len).sum::<u64>(), count);
                assert!(!contiguous || cut.len() == 1, "{cut:?}");
            }
        }
    }
}
