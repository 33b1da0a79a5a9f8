//! Real-time order: every request answered before another was sent holds only IDs below the
//! other's smallest. Checked in O(n log n) by sweeping requests in send order over the answers
//! completed before each, keeping only the largest ID seen so far.

/// One answered request's IDs: when it was sent (`start`) and answered (`end`), its smallest
/// and largest ID, and `op`, the caller's index of the request (to word a counterexample).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span<T> {
    pub start: T,
    pub end: T,
    pub min: u64,
    pub max: u64,
    pub op: usize,
}

impl<T> Span<T> {
    /// The span of a request answered with the half-open ranges `ranges` (its largest ID is the
    /// last one below a range's end); `None` when it holds no range.
    pub fn of_ranges(op: usize, start: T, end: T, ranges: &[(u64, u64)]) -> Option<Span<T>> {
        let min = ranges.iter().map(|range| range.0).min()?;
        let max = ranges.iter().map(|range| range.1.saturating_sub(1)).max()?;
        Some(Span { start, end, min, max, op })
    }

    /// The span of a request answered with the IDs `ids`; `None` when it holds none.
    pub fn of_ids(op: usize, start: T, end: T, ids: &[u64]) -> Option<Span<T>> {
        let min = ids.iter().copied().min()?;
        let max = ids.iter().copied().max()?;
        Some(Span { start, end, min, max, op })
    }
}

/// Reports `report(a, b)` for every request `b` (in send order) such that a request `a` was
/// answered strictly before `b` was sent and yet `b`'s smallest ID is not above `a`'s largest;
/// `a` is the one with the largest ID among those answered before. Concurrent requests (`a`
/// answered at or after `b` was sent) may come in any order. Sorts `spans` by send time.
pub fn real_time_order<T: Ord + Copy>(spans: &mut [Span<T>], mut report: impl FnMut(&Span<T>, &Span<T>)) {
    let mut by_end: Vec<Span<T>> = spans.to_vec();
    by_end.sort_unstable_by_key(|span| span.end);
    spans.sort_unstable_by_key(|span| span.start);
    let mut done = 0;
    let mut highest: Option<Span<T>> = None;
    for b in spans.iter() {
        while done < by_end.len() && by_end[done].end < b.start {
            if highest.is_none_or(|h| by_end[done].max > h.max) {
                highest = Some(by_end[done]);
            }
            done += 1;
        }
        if let Some(a) = highest {
            if a.max >= b.min {
                report(&a, b);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every reported pair, as (earlier op, later op).
    fn violations(spans: &[Span<u64>]) -> Vec<(usize, usize)> {
        let mut spans = spans.to_vec();
        let mut found = Vec::new();
        real_time_order(&mut spans, |a, b| found.push((a.op, b.op)));
        found
    }

    fn span(op: usize, start: u64, end: u64, min: u64, max: u64) -> Span<u64> {
        Span { start, end, min, max, op }
    }

    #[test]
    fn increasing_answers_in_real_time_pass() {
        assert!(violations(&[span(0, 0, 10, 5, 6), span(1, 20, 30, 7, 7), span(2, 40, 50, 8, 20)]).is_empty());
        assert!(violations(&[]).is_empty());
    }

    #[test]
    fn a_planted_older_answer_after_a_newer_one_fails() {
        // Op 1 was sent after op 0 was answered, yet got IDs below op 0's.
        assert_eq!(violations(&[span(0, 0, 10, 50, 50), span(1, 20, 30, 40, 40)]), vec![(0, 1)]);
        // The same ID again is a violation too (not above).
        assert_eq!(violations(&[span(0, 0, 10, 50, 60), span(1, 20, 30, 60, 61)]), vec![(0, 1)]);
    }

    #[test]
    fn the_largest_answer_before_counts_not_the_latest() {
        let spans = [span(0, 0, 10, 100, 100), span(1, 11, 15, 1, 2), span(2, 20, 30, 50, 50)];
        assert_eq!(violations(&spans), vec![(0, 1), (0, 2)]);
    }

    #[test]
    fn concurrent_requests_may_come_in_any_order() {
        // Op 1 was sent before op 0 was answered: they overlap in time.
        assert!(violations(&[span(0, 0, 30, 50, 50), span(1, 20, 40, 40, 40)]).is_empty());
        // Answered exactly when the other was sent: not strictly before, so concurrent.
        assert!(violations(&[span(0, 0, 20, 50, 50), span(1, 20, 40, 40, 40)]).is_empty());
    }

    #[test]
    fn spans_are_read_from_ranges_or_ids() {
        assert_eq!(Span::of_ranges(3, 1, 2, &[(10, 12), (5, 7)]), Some(span(3, 1, 2, 5, 11)));
        assert_eq!(Span::of_ids(4, 1, 2, &[9, 3, 7]), Some(span(4, 1, 2, 3, 9)));
        assert_eq!(Span::<u64>::of_ranges(0, 1, 2, &[]), None);
        assert_eq!(Span::<u64>::of_ids(0, 1, 2, &[]), None);
    }

    #[test]
    fn any_ordered_time_will_do() {
        let t0 = std::time::Instant::now();
        let at = |ms| t0 + std::time::Duration::from_millis(ms);
        let mut spans = [
            Span { start: at(20), end: at(30), min: 1, max: 1, op: 1 },
            Span { start: at(0), end: at(10), min: 2, max: 2, op: 0 },
        ];
        let mut found = Vec::new();
        real_time_order(&mut spans, |a, b| found.push((a.op, b.op)));
        assert_eq!(found, vec![(0, 1)]);
    }
}
