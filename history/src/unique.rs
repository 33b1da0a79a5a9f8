//! No ID twice: over half-open ranges (segments, monotonic takes), or over single values
//! (snowflake IDs, a namespace's time sequences), whatever node, endpoint or incarnation answered.

/// A half-open range `[start, end)` of IDs handed out by the caller's request `op`. Ordered by
/// start, then end, then op.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Handed {
    pub start: u64,
    pub end: u64,
    pub op: usize,
}

/// Reports `report(earlier, later)` for every range `later` that starts below the end of the
/// range reaching furthest among those starting before it (or at the same start, ordered before
/// it): each overlapping range once, with the range it overlaps. The overlap itself is
/// `later.start..later.end.min(earlier.end)`. Sorts `ranges`.
pub fn overlapping_ranges(ranges: &mut [Handed], mut report: impl FnMut(&Handed, &Handed)) {
    ranges.sort_unstable();
    let mut furthest: Option<Handed> = None;
    for range in ranges.iter() {
        if let Some(earlier) = furthest {
            if range.start < earlier.end {
                report(&earlier, range);
            }
        }
        if furthest.is_none_or(|f| range.end > f.end) {
            furthest = Some(*range);
        }
    }
}

/// Reports `report(value, first op, second op)` for every value recorded twice (once per repeat,
/// in value order): `values` holds (value, the caller's op). Sorts `values`.
pub fn duplicates<K: Ord>(values: &mut [(K, usize)], mut report: impl FnMut(&K, usize, usize)) {
    values.sort_unstable();
    for pair in values.windows(2) {
        if pair[0].0 == pair[1].0 {
            report(&pair[0].0, pair[0].1, pair[1].1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overlaps(ranges: &[(u64, u64)]) -> Vec<((u64, u64), (u64, u64))> {
        let mut handed: Vec<Handed> =
            ranges.iter().enumerate().map(|(op, &(start, end))| Handed { start, end, op }).collect();
        let mut found = Vec::new();
        overlapping_ranges(&mut handed, |a, b| found.push(((a.start, a.end), (b.start, b.end))));
        found
    }

    #[test]
    fn disjoint_ranges_pass_in_any_order() {
        assert!(overlaps(&[(10, 20), (1, 10), (20, 21), (100, 200)]).is_empty());
        assert!(overlaps(&[]).is_empty());
    }

    #[test]
    fn a_planted_shared_id_fails() {
        assert_eq!(overlaps(&[(1, 11), (10, 12)]), vec![((1, 11), (10, 12))]);
        // The same range twice.
        assert_eq!(overlaps(&[(5, 6), (5, 6)]), vec![((5, 6), (5, 6))]);
    }

    #[test]
    fn a_range_inside_a_long_one_is_caught_past_shorter_ones() {
        assert_eq!(
            overlaps(&[(1, 100), (2, 3), (50, 60)]),
            vec![((1, 100), (2, 3)), ((1, 100), (50, 60))],
            "the furthest-reaching range is kept, not the last one"
        );
    }

    fn repeated<K: Ord + Clone>(values: &[K]) -> Vec<(K, usize, usize)> {
        let mut values: Vec<(K, usize)> = values.iter().cloned().enumerate().map(|(op, v)| (v, op)).collect();
        let mut found = Vec::new();
        duplicates(&mut values, |value, a, b| found.push((value.clone(), a, b)));
        found
    }

    #[test]
    fn distinct_values_pass() {
        assert!(repeated(&[3, 1, 2]).is_empty());
        assert!(repeated(&[("ns", 1), ("other", 1)]).is_empty(), "a key may hold a namespace");
    }

    #[test]
    fn a_planted_repeated_value_fails_once_per_repeat() {
        assert_eq!(repeated(&[7, 1, 7]), vec![(7, 0, 2)]);
        assert_eq!(repeated(&[7, 7, 7]), vec![(7, 0, 1), (7, 1, 2)]);
        assert_eq!(repeated(&[("ns", 2), ("ns", 2)]), vec![(("ns", 2), 0, 1)]);
    }
}
