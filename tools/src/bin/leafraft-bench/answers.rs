//! What `leafraft bench http` reads in the answers: the IDs of every answer shape, as runs, and
//! the checks over all of them (no ID twice; with `--history`, real-time order).

use std::collections::BTreeMap;

use leafraft_history::real_time_order;
use leafraft_history::Span;
use tokio::time::Instant;

/// IDs seen, as sorted-later runs `[start, end)` per sequence (a tag, or snowflake).
pub type Seen = BTreeMap<String, Vec<(u64, u64)>>;

/// Adds `[start, end)` to `runs`, merged into the last run when it continues it.
pub fn push_run(runs: &mut Vec<(u64, u64)>, start: u64, end: u64) {
    match runs.last_mut() {
        Some(last) if last.1 == start => last.1 = end,
        _ => runs.push((start, end)),
    }
}

/// Collects the IDs of one answer as runs: a bare decimal (Leaf's paths), `"ids":["1",...]`, or
/// `"ranges":[{"start":"1","end":"5"}]`. Answers the number of IDs.
pub fn parse_ids(body: &[u8], runs: &mut Vec<(u64, u64)>) -> u64 {
    let push = push_run;
    if let Ok(text) = std::str::from_utf8(body) {
        if let Ok(id) = text.trim().parse::<u64>() {
            push(runs, id, id + 1);
            return 1;
        }
    }
    // Scan only the list: a tag name may itself be all digits.
    let (list, is_ranges) = match (find(body, b"\"ranges\""), find(body, b"\"ids\"")) {
        (Some(at), _) => (&body[at..], true),
        (None, Some(at)) => (&body[at..], false),
        (None, None) => return 0,
    };
    let numbers = quoted_numbers(list);
    if is_ranges {
        let mut n = 0;
        for pair in numbers.chunks_exact(2) {
            if pair[0] < pair[1] {
                push(runs, pair[0], pair[1]);
                n += pair[1] - pair[0];
            }
        }
        return n;
    }
    for &id in &numbers {
        push(runs, id, id + 1);
    }
    numbers.len() as u64
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}

/// Every `"<digits>"` in the body, in order.
fn quoted_numbers(body: &[u8]) -> Vec<u64> {
    let mut numbers = Vec::new();
    let mut i = 0;
    while i < body.len() {
        if body[i] == b'"' {
            let mut j = i + 1;
            let mut value: u64 = 0;
            let mut digits = 0;
            while j < body.len() && body[j].is_ascii_digit() {
                value = value.saturating_mul(10).saturating_add(u64::from(body[j] - b'0'));
                digits += 1;
                j += 1;
            }
            if digits > 0 && j < body.len() && body[j] == b'"' {
                numbers.push(value);
                i = j + 1;
                continue;
            }
        }
        i += 1;
    }
    numbers
}

/// Sorts each sequence's runs and counts IDs covered twice.
pub fn count_duplicates(seen: &mut Seen) -> u64 {
    let mut duplicates = 0;
    for runs in seen.values_mut() {
        runs.sort_unstable();
        let mut covered_to = 0u64;
        for &(start, end) in runs.iter() {
            if start < covered_to {
                duplicates += covered_to.min(end) - start;
            }
            covered_to = covered_to.max(end);
        }
    }
    duplicates
}

/// Requests answered with IDs below those of a request answered before they were sent
/// (`leafraft_history::real_time_order`, the sweep the tests and the chaos checker run).
pub fn real_time_violations(spans: &mut [Span<Instant>]) -> u64 {
    let mut violations = 0;
    real_time_order(spans, |_, _| violations += 1);
    violations
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn parses_every_answer_shape() {
        let mut runs = Vec::new();
        assert_eq!(parse_ids(b"42", &mut runs), 1);
        assert_eq!(parse_ids(br#"{"tag":"t","ids":["43","44","46"]}"#, &mut runs), 3);
        assert_eq!(parse_ids(br#"{"tag":"t","ranges":[{"start":"100","end":"110"}]}"#, &mut runs), 10);
        assert_eq!(parse_ids(br#"{"tag":"77","ids":["50"]}"#, &mut runs), 1);
        assert_eq!(runs, vec![(42, 45), (46, 47), (100, 110), (50, 51)]);
    }

    #[test]
    fn counts_duplicates_across_workers() {
        let mut seen = Seen::new();
        seen.insert("segment:t".into(), vec![(1, 10), (20, 30), (5, 12), (29, 30)]);
        seen.insert("segment:u".into(), vec![(1, 10)]);
        assert_eq!(count_duplicates(&mut seen), 5 + 1);
    }

    #[test]
    fn an_answer_below_one_answered_before_the_request_was_sent_is_a_violation() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let span = |op, sent, answered, min, max| Span { start: at(sent), end: at(answered), min, max, op };
        let mut in_order = vec![span(0, 0, 5, 10, 12), span(1, 6, 9, 13, 13), span(2, 1, 7, 1, 2)];
        assert_eq!(real_time_violations(&mut in_order), 0, "concurrent requests may come in any order");
        let mut late = vec![span(0, 0, 5, 10, 12), span(1, 6, 9, 11, 11)];
        assert_eq!(real_time_violations(&mut late), 1);
    }
}
