//! The checker: judges a [`History`] against `docs/semantics.md#the-one-rule`, `docs/semantics.md`. Pure: no I/O, no clock.
//!
//! Only acknowledged answers count as issued. A request that timed out or broke is "unknown": its
//! IDs may exist, so no check ever treats it as "not issued" (none of the checks below needs to).
//!
//! Checks, each with the first few counterexamples:
//! - `unique-segment-ids`: no segment ID of a tag was acknowledged twice (per tag, all endpoints);
//!   for the scrambled tag (`chaos-scrambled`) these are the served images themselves.
//! - `unique-snowflake-ids`: no snowflake ID was acknowledged twice (all nodes, all endpoints).
//! - `segment-order`: per node incarnation and tag, a request answered before another was sent got
//!   smaller IDs; inside one answer the IDs strictly increase. Not for the scrambled tag, whose
//!   IDs are in no order (nor `max-id-covers-served`: its `max_id` counts sequence numbers).
//! - `snowflake-order`: per worker, the same in real time, across holders too (a new holder starts
//!   above the old window).
//! - `worker-holders-disjoint`: no millisecond of a worker was used by two node incarnations.
//! - `max-id-covers-served`: a consistent (through the leader) `max_id` read is above every ID of
//!   the tag acknowledged before the read was sent (a committed claim is never lost, restarts and
//!   leader changes included). Local reads may lag other nodes, so they are not held to this.
//! - `max-id-monotonic`: per node and data directory, local `max_id` reads never go down, restarts
//!   included, and
//!   consistent reads never go down in real time, unless a node was stopped gracefully shortly
//!   before (giving back an unserved tail is the one legal decrease).
//! - `ids-in-range`: every ID is in 1..=2^63-1 and every answer parsed.
//! - `switch-real-time`: after the move of `chaos-switch` to monotonic was answered 200, every
//!   request of the tag sent later got IDs above every ID of the tag answered before it was sent,
//!   on any node, the segment IDs served before the move included.
//! - `unique-timeseq-ids`, `timeseq-shard`, `timeseq-second`, `timeseq-order`: time-sequence IDs
//!   ([`timeseq`]): unique per namespace, carrying the shard asked for and a second within the
//!   clock faults' reach of the request's real time, and per node incarnation never a second
//!   earlier than one it served before.
//!
//! The real-time order and the no-ID-twice sweeps are `leafraft-history`'s, which the tests share;
//! this module says what they run on and words what they find.

mod timeseq;

use std::collections::BTreeMap;
use std::collections::HashMap;

use leafraft_history::duplicates;
use leafraft_history::overlapping_ranges;
use leafraft_history::real_time_order;
use leafraft_history::Handed;
use leafraft_ids::snowflake::Layout;

use crate::history::History;
use crate::history::Incarnation;
use crate::history::Op;
use crate::history::Outcome;

/// How long after a graceful stop a node may still apply the release it sent.
const RELEASE_LAG_US: u64 = 60_000_000;

/// How many counterexamples a check keeps.
const EXAMPLES: usize = 5;

/// One check's result.
#[derive(Debug, Clone)]
pub struct Check {
    pub name: &'static str,
    /// How many times what it checks happened: the IDs, answers or reads it looked at, or the
    /// faults it judged (0: not exercised).
    pub checked: u64,
    pub violations: u64,
    pub examples: Vec<String>,
    /// What else is worth saying about what was checked.
    pub note: String,
}

impl Check {
    pub(crate) fn new(name: &'static str) -> Check {
        Check { name, checked: 0, violations: 0, examples: Vec::new(), note: String::new() }
    }

    /// Something it checks happened and broke the rule.
    pub fn failed(&self) -> bool {
        self.violations > 0
    }

    /// What it checks happened at least once: a check that looked at nothing proves nothing.
    pub fn exercised(&self) -> bool {
        self.checked > 0
    }

    /// Exercised and never violated.
    pub fn passed(&self) -> bool {
        self.exercised() && !self.failed()
    }

    /// A check decided outside the history (recovery deadlines); `failure` is its reason.
    pub fn outside(name: &'static str, checked: u64, failures: Vec<String>) -> Check {
        let mut check = Check::new(name);
        check.checked = checked;
        for failure in failures {
            check.violation(|| failure);
        }
        check
    }

    pub(crate) fn violation(&mut self, describe: impl FnOnce() -> String) {
        self.violations += 1;
        if self.examples.len() < EXAMPLES {
            self.examples.push(describe());
        }
    }
}

/// Runs every check.
pub fn check(history: &History, layout: &Layout) -> Vec<Check> {
    vec![
        unique_segment_ids(history),
        unique_snowflake_ids(history),
        segment_order(history),
        monotonic_real_time(history),
        snowflake_order(history, layout),
        worker_holders_disjoint(history, layout),
        max_id_covers_served(history),
        max_id_monotonic(history),
        ids_in_range(history),
        switch_real_time(history),
        timeseq::unique_ids(history),
        timeseq::shard(history),
        timeseq::second(history),
        timeseq::order(history),
    ]
}

pub(crate) fn where_(op: &Op) -> String {
    let who = op.incarnation.map(|inc| inc.to_string()).unwrap_or_else(|| format!("node {}", op.node));
    format!("{} on {who} at {:.3}s..{:.3}s", op.endpoint.name(), secs(op.start_us), secs(op.end_us))
}

pub(crate) fn secs(us: u64) -> f64 {
    us as f64 / 1e6
}

fn unique_segment_ids(history: &History) -> Check {
    let mut check = Check::new("unique-segment-ids");
    let mut by_tag: HashMap<&str, Vec<Handed>> = HashMap::new();
    for (index, op) in history.ops.iter().enumerate() {
        if let Outcome::Segment { tag, ranges } = &op.outcome {
            let all = by_tag.entry(tag).or_default();
            for &(start, end) in ranges {
                check.checked += end.saturating_sub(start);
                all.push(Handed { start, end, op: index });
            }
        }
    }
    for (tag, mut ranges) in by_tag {
        overlapping_ranges(&mut ranges, |earlier, later| {
            let (f_start, f_end, start, end) = (earlier.start, earlier.end, later.start, later.end);
            check.violation(|| {
                format!(
                    "tag {tag}: IDs {}..{} handed out twice: [{f_start}, {f_end}) by {} and [{start}, {end}) by {}",
                    start,
                    end.min(f_end),
                    where_(&history.ops[earlier.op]),
                    where_(&history.ops[later.op])
                )
            });
        });
    }
    check
}

fn unique_snowflake_ids(history: &History) -> Check {
    let mut check = Check::new("unique-snowflake-ids");
    let mut all: Vec<(u64, usize)> = Vec::new();
    for (index, op) in history.ops.iter().enumerate() {
        if let Outcome::Snowflake(ids) = &op.outcome {
            all.extend(ids.iter().map(|&id| (id, index)));
        }
    }
    check.checked = all.len() as u64;
    duplicates(&mut all, |id, first, second| {
        check.violation(|| {
            format!(
                "snowflake ID {id} handed out twice: by {} and by {}",
                where_(&history.ops[first]),
                where_(&history.ops[second])
            )
        });
    });
    check
}

/// A request's IDs within one sequence: its real-time interval (microseconds since the run
/// began) and smallest and largest ID.
pub(crate) type Span = leafraft_history::Span<u64>;

fn segment_order(history: &History) -> Check {
    let mut check = Check::new("segment-order");
    let mut groups: BTreeMap<(&str, Incarnation), Vec<Span>> = BTreeMap::new();
    for (index, op) in history.ops.iter().enumerate() {
        let Outcome::Segment { tag, ranges } = &op.outcome else { continue };
        // A scrambled tag promises uniqueness only: its IDs are in no order.
        if tag == crate::workload::SCRAMBLED_TAG {
            continue;
        }
        check.checked += 1;
        let increasing =
            ranges.iter().all(|(start, end)| start < end) && ranges.windows(2).all(|pair| pair[0].1 <= pair[1].0);
        if !increasing {
            check.violation(|| format!("tag {tag}: answer not increasing: {ranges:?} from {}", where_(op)));
            continue;
        }
        let (Some(first), Some(last), Some(incarnation)) = (ranges.first(), ranges.last(), op.incarnation) else {
            continue;
        };
        let span = Span { start: op.start_us, end: op.end_us, min: first.0, max: last.1.saturating_sub(1), op: index };
        groups.entry((tag.as_str(), incarnation)).or_default().push(span);
    }
    for ((tag, _), mut spans) in groups {
        real_time_order(&mut spans, |a, b| {
            check.violation(|| {
                format!(
                    "tag {tag}: {} answered up to {} before {} was sent, which got {}",
                    where_(&history.ops[a.op]),
                    a.max,
                    where_(&history.ops[b.op]),
                    b.min
                )
            })
        });
    }
    check
}

/// The monotonic tag's promise, across every node and incarnation: a request sent after another
/// was answered got only larger IDs (`docs/semantics.md#strictly-increasing-tags`).
fn monotonic_real_time(history: &History) -> Check {
    let mut check = Check::new("monotonic-real-time");
    let mut spans = Vec::new();
    for (index, op) in history.ops.iter().enumerate() {
        let Outcome::Segment { tag, ranges } = &op.outcome else { continue };
        if tag != crate::workload::MONOTONIC_TAG {
            continue;
        }
        let Some(span) = Span::of_ranges(index, op.start_us, op.end_us, ranges) else { continue };
        check.checked += 1;
        spans.push(span);
    }
    real_time_order(&mut spans, |a, b| {
        check.violation(|| {
            format!(
                "{} answered up to {} before {} was sent, which got {}",
                where_(&history.ops[a.op]),
                a.max,
                where_(&history.ops[b.op]),
                b.min
            )
        })
    });
    check
}

/// The move of a segment tag to monotonic (`docs/semantics.md#strictly-increasing-tags`): from the 200 on, every ID of the
/// tag is above every ID served before. Judged: every request of [`crate::workload::SWITCH_TAG`]
/// sent after the 200 arrived, against every answer of the tag (before the move or after, any
/// node) that arrived before it was sent. Before the 200 nothing is promised (segment IDs only
/// trend upwards across nodes), so requests sent earlier are judged by no one, though their IDs
/// count as served before the later ones. Not exercised without a 200.
fn switch_real_time(history: &History) -> Check {
    let mut check = Check::new("switch-real-time");
    let Some(switched) = history.switched_us else { return check };
    let mut spans = Vec::new();
    for (index, op) in history.ops.iter().enumerate() {
        let Outcome::Segment { tag, ranges } = &op.outcome else { continue };
        if tag != crate::workload::SWITCH_TAG {
            continue;
        }
        let Some(span) = Span::of_ranges(index, op.start_us, op.end_us, ranges) else { continue };
        if span.start > switched {
            check.checked += 1;
        }
        spans.push(span);
    }
    check.note = format!("switched at {:.3}s; the requests sent after it are judged", secs(switched));
    real_time_order(&mut spans, |a, b| {
        if b.start > switched {
            check.violation(|| {
                format!(
                    "tag {}: {} answered up to {} before {} was sent, which got {}",
                    crate::workload::SWITCH_TAG,
                    where_(&history.ops[a.op]),
                    a.max,
                    where_(&history.ops[b.op]),
                    b.min
                )
            })
        }
    });
    check
}

/// Per op and worker: the span of its IDs, plus its smallest and largest millisecond.
fn snowflake_spans(history: &History, layout: &Layout) -> BTreeMap<u64, Vec<(Span, u64, u64)>> {
    let mut by_worker: BTreeMap<u64, Vec<(Span, u64, u64)>> = BTreeMap::new();
    for (index, op) in history.ops.iter().enumerate() {
        let Outcome::Snowflake(ids) = &op.outcome else { continue };
        let mut per_worker: BTreeMap<u64, (Span, u64, u64)> = BTreeMap::new();
        for &id in ids {
            let parts = layout.decompose(id);
            let entry = per_worker.entry(parts.worker).or_insert((
                Span { start: op.start_us, end: op.end_us, min: id, max: id, op: index },
                parts.timestamp_ms,
                parts.timestamp_ms,
            ));
            entry.0.min = entry.0.min.min(id);
            entry.0.max = entry.0.max.max(id);
            entry.1 = entry.1.min(parts.timestamp_ms);
            entry.2 = entry.2.max(parts.timestamp_ms);
        }
        for (worker, span) in per_worker {
            by_worker.entry(worker).or_default().push(span);
        }
    }
    by_worker
}

fn snowflake_order(history: &History, layout: &Layout) -> Check {
    let mut check = Check::new("snowflake-order");
    for op in &history.ops {
        if let Outcome::Snowflake(ids) = &op.outcome {
            check.checked += 1;
            if !ids.windows(2).all(|pair| pair[0] < pair[1]) {
                check.violation(|| format!("answer not increasing: {ids:?} from {}", where_(op)));
            }
        }
    }
    for (worker, spans) in snowflake_spans(history, layout) {
        let mut spans: Vec<Span> = spans.into_iter().map(|(span, _, _)| span).collect();
        real_time_order(&mut spans, |a, b| {
            check.violation(|| {
                format!(
                    "worker {worker}: {} answered up to {} before {} was sent, which got {}",
                    where_(&history.ops[a.op]),
                    a.max,
                    where_(&history.ops[b.op]),
                    b.min
                )
            })
        });
    }
    check
}

fn worker_holders_disjoint(history: &History, layout: &Layout) -> Check {
    let mut check = Check::new("worker-holders-disjoint");
    let by_worker = snowflake_spans(history, layout);
    let holdings: std::collections::BTreeSet<(u64, Option<Incarnation>)> = by_worker
        .iter()
        .flat_map(|(worker, spans)| spans.iter().map(|(span, _, _)| (*worker, history.ops[span.op].incarnation)))
        .collect();
    check.note = format!("{} workers used by {} node incarnations in all", by_worker.len(), holdings.len());
    for (worker, spans) in by_worker {
        // (first ms, last ms, holder, op) sorted by first ms; two holders overlap when one starts
        // at or before the furthest millisecond another has reached.
        let mut intervals: Vec<(u64, u64, Option<Incarnation>, usize)> = spans
            .iter()
            .map(|(span, first, last)| (*first, *last, history.ops[span.op].incarnation, span.op))
            .collect();
        check.checked += intervals.len() as u64;
        intervals.sort_unstable_by_key(|interval| (interval.0, interval.1));
        // The furthest-reaching interval per holder, keeping the two furthest distinct holders.
        let mut top: Vec<(u64, Option<Incarnation>, usize)> = Vec::new();
        for (first, last, holder, op) in intervals {
            if holder.is_none() {
                continue;
            }
            if let Some(&(reach, _, other_op)) = top.iter().find(|(_, h, _)| *h != holder) {
                if first <= reach {
                    check.violation(|| {
                        format!(
                            "worker {worker}: millisecond {first} used by {} and by {} (up to {reach})",
                            where_(&history.ops[op]),
                            where_(&history.ops[other_op])
                        )
                    });
                }
            }
            match top.iter_mut().find(|(_, h, _)| *h == holder) {
                Some(entry) if last > entry.0 => *entry = (last, holder, op),
                Some(_) => {}
                None => top.push((last, holder, op)),
            }
            top.sort_unstable_by_key(|entry| std::cmp::Reverse(entry.0));
            top.truncate(2);
        }
    }
    check
}

fn max_id_covers_served(history: &History) -> Check {
    let mut check = Check::new("max-id-covers-served");
    // Per tag: (answered at, largest ID of the answer, op), by answer time.
    let mut served: HashMap<&str, Vec<(u64, u64, usize)>> = HashMap::new();
    for (index, op) in history.ops.iter().enumerate() {
        if let Outcome::Segment { tag, ranges } = &op.outcome {
            // A scrambled tag's IDs are images of sequence numbers, which `max_id` counts.
            if tag == crate::workload::SCRAMBLED_TAG {
                continue;
            }
            if let Some(largest) = ranges.iter().map(|(_, end)| end.saturating_sub(1)).max() {
                served.entry(tag).or_default().push((op.end_us, largest, index));
            }
        }
    }
    for answers in served.values_mut() {
        answers.sort_unstable();
    }
    let mut reads: Vec<_> = history.max_id_reads.iter().filter(|read| read.consistent).collect();
    reads.sort_unstable_by_key(|read| read.start_us);
    // Per tag: how many answers the sweep has passed, and the largest ID among them with its op.
    type Sweep = (usize, Option<(u64, usize)>);
    let mut cursor: HashMap<&str, Sweep> = HashMap::new();
    for read in reads {
        check.checked += 1;
        let Some(answers) = served.get(read.tag.as_str()) else { continue };
        let (done, highest) = cursor.entry(read.tag.as_str()).or_insert((0, None));
        while *done < answers.len() && answers[*done].0 < read.start_us {
            let (_, largest, op) = answers[*done];
            if highest.is_none_or(|(h, _)| largest > h) {
                *highest = Some((largest, op));
            }
            *done += 1;
        }
        if let Some((largest, op)) = *highest {
            if read.max_id <= largest {
                check.violation(|| {
                    format!(
                        "tag {}: node {} read max_id {} at {:.3}s, but ID {largest} was served before by {}",
                        read.tag,
                        read.node,
                        read.max_id,
                        secs(read.start_us),
                        where_(&history.ops[op])
                    )
                });
            }
        }
    }
    check
}

fn max_id_monotonic(history: &History) -> Check {
    let mut check = Check::new("max-id-monotonic");
    // Local reads per node and data directory (a wiped node rebuilt from nothing is a new member
    // that never read what its old disk did); consistent reads all together (node `None`).
    // (node, disk) of local reads; `None` for consistent ones.
    type Reader = Option<(u64, u32)>;
    let mut by_node: BTreeMap<(Reader, &str), Vec<_>> = BTreeMap::new();
    for read in &history.max_id_reads {
        let node = (!read.consistent).then_some((read.node, read.disk));
        by_node.entry((node, read.tag.as_str())).or_default().push(read);
    }
    let mut stops = history.graceful_stops_us.clone();
    stops.sort_unstable();
    for ((node, tag), mut reads) in by_node {
        reads.sort_unstable_by_key(|read| read.start_us);
        for pair in reads.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            check.checked += 1;
            if a.end_us >= b.start_us || b.max_id >= a.max_id {
                continue;
            }
            // A release lowers `max_id` between SIGTERM and exit; a lagging node may apply it
            // later (after a partition heals, say), so a stop that began up to a minute before
            // counts too. Consistent reads are what `max-id-covers-served` holds to the strict rule.
            let released_between = stops.iter().any(|&(from, _)| from < b.end_us && b.end_us - from < RELEASE_LAG_US);
            if !released_between {
                check.violation(|| {
                    format!(
                        "tag {tag}: {} read max_id {} at {:.3}s, then {} at {:.3}s with no graceful stop between",
                        node.map(|(node, disk)| format!("node {node} (disk {disk})"))
                            .unwrap_or_else(|| "consistent reads".into()),
                        a.max_id,
                        secs(a.start_us),
                        b.max_id,
                        secs(b.start_us)
                    )
                });
            }
        }
    }
    check
}

fn ids_in_range(history: &History) -> Check {
    let mut check = Check::new("ids-in-range");
    for op in &history.ops {
        match &op.outcome {
            Outcome::Segment { tag, ranges } => {
                for &(start, end) in ranges {
                    check.checked += 1;
                    if start == 0 || end > i64::MAX as u64 || start >= end {
                        check.violation(|| format!("tag {tag}: bad range [{start}, {end}) from {}", where_(op)));
                    }
                }
            }
            Outcome::Snowflake(ids) => {
                for &id in ids {
                    check.checked += 1;
                    if id == 0 || id > i64::MAX as u64 {
                        check.violation(|| format!("bad snowflake ID {id} from {}", where_(op)));
                    }
                }
            }
            Outcome::Timeseq { namespace, ids, .. } => {
                for &id in ids {
                    check.checked += 1;
                    if id == 0 || id > i64::MAX as u64 {
                        check.violation(|| format!("namespace {namespace}: bad ID {id} from {}", where_(op)));
                    }
                }
            }
            Outcome::Malformed(answer) => {
                check.checked += 1;
                check.violation(|| format!("unparseable answer {answer:?} from {}", where_(op)));
            }
            Outcome::Failed(_) | Outcome::Unknown(_) => {}
        }
    }
    check
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Endpoint;
    use crate::history::MaxIdRead;

    const LAYOUT: Layout = Layout { epoch_ms: 1_288_834_974_657, time_bits: 41, worker_bits: 10, sequence_bits: 12 };

    fn inc(node: u64, start: u32) -> Option<Incarnation> {
        Some(Incarnation { node, start })
    }

    fn segment(node: u64, at: u64, ranges: &[(u64, u64)]) -> Op {
        Op {
            endpoint: Endpoint::SegmentList,
            node,
            incarnation: inc(node, 1),
            start_us: at,
            end_us: at + 10,
            outcome: Outcome::Segment { tag: "t".into(), ranges: ranges.to_vec() },
        }
    }

    fn monotonic(node: u64, at: u64, end: u64, ranges: &[(u64, u64)]) -> Op {
        let tag = crate::workload::MONOTONIC_TAG.to_string();
        Op { end_us: end, outcome: Outcome::Segment { tag, ranges: ranges.to_vec() }, ..segment(node, at, ranges) }
    }

    /// Across nodes (unlike `segment-order`): a later request with a smaller ID fails, concurrent
    /// ones in any order pass, and only the monotonic tag is judged.
    #[test]
    fn monotonic_real_time_spans_every_node() {
        let ordered = History {
            ops: vec![monotonic(1, 0, 10, &[(5, 7)]), monotonic(2, 20, 30, &[(7, 8)])],
            ..Default::default()
        };
        assert!(monotonic_real_time(&ordered).passed());
        let late = History {
            ops: vec![monotonic(2, 0, 10, &[(50, 51)]), monotonic(1, 20, 30, &[(40, 41)])],
            ..Default::default()
        };
        let check = monotonic_real_time(&late);
        assert_eq!((check.checked, check.violations), (2, 1), "{:?}", check.examples);
        let overlapping = History {
            ops: vec![monotonic(2, 0, 30, &[(50, 51)]), monotonic(1, 20, 40, &[(40, 41)])],
            ..Default::default()
        };
        assert!(monotonic_real_time(&overlapping).passed());
        let segment_tags =
            History { ops: vec![segment(2, 0, &[(50, 51)]), segment(1, 20, &[(40, 41)])], ..Default::default() };
        assert_eq!(monotonic_real_time(&segment_tags).checked, 0);
    }

    fn switching(node: u64, at: u64, end: u64, ranges: &[(u64, u64)]) -> Op {
        let tag = crate::workload::SWITCH_TAG.to_string();
        Op { end_us: end, outcome: Outcome::Segment { tag, ranges: ranges.to_vec() }, ..segment(node, at, ranges) }
    }

    /// The first `PATCH` sent at 100 µs: node 1 served 1000.. from its segment buffer, node 2
    /// (a follower that applies the move late) serves 10.. from its own until its answer at 150;
    /// the 200 arrives at 200. Node 2's answer before the 200 is no violation, but what it served counts: a
    /// request sent after the 200 that gets an ID below 1000 fails, on any node.
    fn switched_history(switched_us: Option<u64>, after: &[(u64, u64)]) -> History {
        History {
            ops: vec![
                switching(1, 0, 50, &[(1000, 1005)]),
                switching(2, 60, 70, &[(5, 6)]),
                switching(2, 140, 150, &[(10, 12)]),
                switching(3, 250, 260, after),
                // Sent before the 200, answered after it: not judged.
                switching(2, 190, 300, &[(20, 21)]),
                // Other tags are not judged.
                segment(2, 400, &[(1, 2)]),
            ],
            switched_us,
            ..History::default()
        }
    }

    #[test]
    fn switch_real_time_judges_the_requests_sent_after_the_200() {
        let above = switched_history(Some(200), &[(2000, 2003)]);
        let check = switch_real_time(&above);
        assert!(check.passed(), "{:?}", check.examples);
        assert_eq!(check.checked, 1, "one request of the tag was sent after the 200");
        let below = switched_history(Some(200), &[(900, 901)]);
        let check = switch_real_time(&below);
        assert_eq!((check.checked, check.violations), (1, 1), "{:?}", check.examples);
        assert_eq!(
            check.examples,
            ["tag chaos-switch: /v1/segment on node 1#1 at 0.000s..0.000s answered up to 1004 before /v1/segment \
              on node 3#1 at 0.000s..0.000s was sent, which got 900"]
        );
        assert_eq!(failing(&below), vec!["switch-real-time"], "the other checks pass it");
        // No 200: nothing to judge, not a pass.
        let check = switch_real_time(&switched_history(None, &[(900, 901)]));
        assert!(!check.exercised() && !check.failed());
    }

    /// The move recorded at the first `PATCH`'s send instead of its 200: the follower that had
    /// not applied it yet served 10..12 from its buffer after the send, below 1000 answered
    /// before. A correct cluster, judged from too early, fails; judged from its 200, it passes.
    #[test]
    fn switch_real_time_from_the_send_instead_of_the_200_fails_a_lagging_follower() {
        let too_early = switch_real_time(&switched_history(Some(100), &[(2000, 2003)]));
        assert_eq!((too_early.checked, too_early.violations), (3, 2), "{:?}", too_early.examples);
        assert!(switch_real_time(&switched_history(Some(200), &[(2000, 2003)])).passed());
    }

    fn snowflake(holder: Option<Incarnation>, at: u64, parts: &[(u64, u64, u64)]) -> Op {
        let ids = parts
            .iter()
            .map(|&(ms, worker, sequence)| {
                LAYOUT
                    .compose(leafraft_ids::snowflake::Parts { timestamp_ms: LAYOUT.epoch_ms + ms, worker, sequence })
                    .expect("fits the layout")
            })
            .collect();
        Op {
            endpoint: Endpoint::SnowflakeList,
            node: holder.map(|h| h.node).unwrap_or(0),
            incarnation: holder,
            start_us: at,
            end_us: at + 10,
            outcome: Outcome::Snowflake(ids),
        }
    }

    fn read(node: u64, at: u64, max_id: u64) -> MaxIdRead {
        MaxIdRead { node, disk: 0, consistent: true, tag: "t".into(), start_us: at, end_us: at + 10, max_id }
    }

    fn failing(history: &History) -> Vec<&'static str> {
        check(history, &LAYOUT).into_iter().filter(Check::failed).map(|c| c.name).collect()
    }

    /// A check that looked at nothing proves nothing: `wiped-member-refused` passed runs in which
    /// no member was wiped. Not exercised is neither a pass nor a failure.
    #[test]
    fn regression_a_check_that_looked_at_nothing_does_not_pass() {
        for check in check(&History::default(), &LAYOUT) {
            assert!(!check.exercised() && !check.passed() && !check.failed(), "{} on an empty history", check.name);
        }
        let no_wipe = Check::outside("wiped-member-refused", 0, Vec::new());
        assert!(!no_wipe.passed(), "no wiped member was judged: not a pass");
        let refused = Check::outside("wiped-member-refused", 1, Vec::new());
        assert!(refused.passed());
        let not_refused = Check::outside("wiped-member-refused", 1, vec!["it ran".into()]);
        assert!(not_refused.failed() && !not_refused.passed());
    }

    #[test]
    fn a_clean_history_passes_every_check() {
        let history = History {
            ops: vec![
                segment(1, 0, &[(1, 11)]),
                segment(2, 5, &[(1001, 1002)]),
                segment(1, 100, &[(11, 20), (2001, 2002)]),
                snowflake(inc(1, 1), 0, &[(10, 1, 0), (10, 1, 1)]),
                snowflake(inc(2, 1), 0, &[(10, 2, 0)]),
                snowflake(inc(3, 1), 200, &[(50, 1, 0)]),
            ],
            max_id_reads: vec![read(1, 300, 2002), read(1, 400, 3000)],
            graceful_stops_us: vec![],
            started_unix_ms: 0,
            switched_us: None,
        };
        assert_eq!(failing(&history), Vec::<&str>::new());
    }

    #[test]
    fn ids_outside_the_positive_i64_range_and_unparsed_answers_fail_ids_in_range() {
        let cases = [
            ("an ID of 0", segment(1, 0, &[(0, 3)])),
            ("an ID above 2^63 - 1", segment(1, 0, &[(i64::MAX as u64, i64::MAX as u64 + 2)])),
            ("an empty range", segment(1, 0, &[(9, 9)])),
            ("a reversed range", segment(1, 0, &[(9, 4)])),
        ];
        for (what, op) in cases {
            let history = History { ops: vec![op], ..History::default() };
            assert!(failing(&history).contains(&"ids-in-range"), "{what} must fail ids-in-range");
        }
        let mut malformed = segment(1, 0, &[]);
        malformed.outcome = Outcome::Malformed("{\"ids\":[\"x\"]}".into());
        let history = History { ops: vec![malformed], ..History::default() };
        assert_eq!(failing(&history), vec!["ids-in-range"]);
        let mut snowflake_zero = snowflake(inc(1, 1), 0, &[]);
        snowflake_zero.outcome = Outcome::Snowflake(vec![0, u64::MAX]);
        let check = check(&History { ops: vec![snowflake_zero], ..History::default() }, &LAYOUT);
        let in_range = check.iter().find(|c| c.name == "ids-in-range").expect("the check runs");
        assert!(in_range.failed(), "snowflake IDs 0 and 2^64 - 1 must fail ids-in-range");
        // The largest legal ID passes.
        let history =
            History { ops: vec![segment(1, 0, &[(i64::MAX as u64 - 1, i64::MAX as u64)])], ..History::default() };
        assert!(!failing(&history).contains(&"ids-in-range"));
    }

    #[test]
    fn a_segment_id_served_by_two_nodes_fails() {
        let history =
            History { ops: vec![segment(1, 0, &[(1, 11)]), segment(2, 50, &[(10, 12)])], ..History::default() };
        assert_eq!(failing(&history), vec!["unique-segment-ids"]);
    }

    #[test]
    fn the_same_answer_twice_on_one_node_fails_uniqueness_and_order() {
        let history = History { ops: vec![segment(1, 0, &[(5, 6)]), segment(1, 100, &[(5, 6)])], ..History::default() };
        assert_eq!(failing(&history), vec!["unique-segment-ids", "segment-order"]);
    }

    #[test]
    fn a_node_going_backwards_fails_order_even_without_a_duplicate() {
        let history =
            History { ops: vec![segment(1, 0, &[(50, 51)]), segment(1, 100, &[(7, 8)])], ..History::default() };
        assert_eq!(failing(&history), vec!["segment-order"]);
        // Concurrent requests may be answered in either order.
        let history = History { ops: vec![segment(1, 0, &[(50, 51)]), segment(1, 5, &[(7, 8)])], ..History::default() };
        assert_eq!(failing(&history), Vec::<&str>::new());
    }

    #[test]
    fn a_restarted_node_may_start_lower_than_its_last_incarnation() {
        let mut restarted = segment(1, 100, &[(7, 8)]);
        restarted.incarnation = inc(1, 2);
        let history = History { ops: vec![segment(1, 0, &[(50, 51)]), restarted], ..History::default() };
        assert_eq!(failing(&history), Vec::<&str>::new());
    }

    #[test]
    fn a_duplicate_snowflake_fails() {
        let history = History {
            ops: vec![snowflake(inc(1, 1), 0, &[(10, 1, 0)]), snowflake(inc(2, 1), 100, &[(10, 1, 0)])],
            ..History::default()
        };
        assert_eq!(failing(&history), vec!["unique-snowflake-ids", "snowflake-order", "worker-holders-disjoint"]);
    }

    #[test]
    fn two_holders_in_one_millisecond_of_a_worker_fail_without_a_duplicate() {
        let history = History {
            ops: vec![snowflake(inc(1, 1), 0, &[(10, 1, 0)]), snowflake(inc(1, 2), 5, &[(10, 1, 1)])],
            ..History::default()
        };
        assert_eq!(failing(&history), vec!["worker-holders-disjoint"]);
        // A later holder above the earlier one's milliseconds is a clean handover.
        let history = History {
            ops: vec![snowflake(inc(1, 1), 0, &[(10, 1, 0)]), snowflake(inc(2, 1), 50, &[(11, 1, 0)])],
            ..History::default()
        };
        assert_eq!(failing(&history), Vec::<&str>::new());
    }

    #[test]
    fn a_worker_going_backwards_in_real_time_fails() {
        let history = History {
            ops: vec![snowflake(inc(1, 1), 0, &[(20, 1, 0)]), snowflake(inc(1, 1), 100, &[(19, 1, 0)])],
            ..History::default()
        };
        assert_eq!(failing(&history), vec!["snowflake-order"]);
    }

    #[test]
    fn max_id_below_a_served_id_fails() {
        let history = History {
            ops: vec![segment(1, 0, &[(1, 11)])],
            max_id_reads: vec![read(2, 100, 10)],
            graceful_stops_us: vec![],
            started_unix_ms: 0,
            switched_us: None,
        };
        assert_eq!(failing(&history), vec!["max-id-covers-served"]);
        // A read sent before the answer arrived may not see it yet.
        let history = History {
            ops: vec![segment(1, 0, &[(1, 11)])],
            max_id_reads: vec![read(2, 5, 1)],
            graceful_stops_us: vec![],
            started_unix_ms: 0,
            switched_us: None,
        };
        assert_eq!(failing(&history), Vec::<&str>::new());
        // A local read may lag behind what another node served.
        let mut local = read(2, 100, 10);
        local.consistent = false;
        let history = History {
            ops: vec![segment(1, 0, &[(1, 11)])],
            max_id_reads: vec![local],
            graceful_stops_us: vec![],
            started_unix_ms: 0,
            switched_us: None,
        };
        assert_eq!(failing(&history), Vec::<&str>::new());
    }

    #[test]
    fn max_id_going_down_fails_unless_a_node_gave_its_tail_back() {
        let reads = vec![read(1, 0, 2000), read(1, 100, 1500)];
        let history = History {
            ops: vec![],
            max_id_reads: reads.clone(),
            graceful_stops_us: vec![],
            started_unix_ms: 0,
            switched_us: None,
        };
        assert_eq!(failing(&history), vec!["max-id-monotonic"]);
        let history = History {
            ops: vec![],
            max_id_reads: reads,
            graceful_stops_us: vec![(50, 60)],
            started_unix_ms: 0,
            switched_us: None,
        };
        assert_eq!(failing(&history), Vec::<&str>::new());
    }

    /// A node rebuilt on a wiped directory is a new member: its local reads start over, lagging
    /// while it catches up, and are judged apart from its old disk's. The same drop on one disk
    /// fails.
    #[test]
    fn local_reads_are_judged_per_data_directory() {
        let local = |disk, at, max_id| MaxIdRead { consistent: false, disk, ..read(1, at, max_id) };
        let rebuilt = vec![local(0, 0, 2000), local(1, 100, 1)];
        let history = History {
            ops: vec![],
            max_id_reads: rebuilt,
            graceful_stops_us: vec![],
            started_unix_ms: 0,
            switched_us: None,
        };
        assert_eq!(failing(&history), Vec::<&str>::new());
        let same_disk = vec![local(1, 0, 2000), local(1, 100, 1)];
        let history = History {
            ops: vec![],
            max_id_reads: same_disk,
            graceful_stops_us: vec![],
            started_unix_ms: 0,
            switched_us: None,
        };
        assert_eq!(failing(&history), vec!["max-id-monotonic"]);
    }

    #[test]
    fn unknown_and_failed_requests_count_as_nothing() {
        let mut unknown = segment(1, 0, &[]);
        unknown.outcome = Outcome::Unknown("timeout".into());
        let mut failed = segment(1, 0, &[]);
        failed.outcome = Outcome::Failed("SEGMENTS_NOT_READY".into());
        let history = History { ops: vec![unknown, failed], ..History::default() };
        assert_eq!(failing(&history), Vec::<&str>::new());
    }

    /// The violation lines CI and the docs read keep their words (the sweeps are shared with the
    /// tests through `leafraft-history`; the wording is the checker's own).
    #[test]
    fn violation_lines_keep_their_words() {
        let history =
            History { ops: vec![segment(1, 0, &[(1, 11)]), segment(2, 50, &[(10, 12)])], ..History::default() };
        assert_eq!(
            unique_segment_ids(&history).examples,
            ["tag t: IDs 10..11 handed out twice: [1, 11) by /v1/segment on node 1#1 at 0.000s..0.000s and \
              [10, 12) by /v1/segment on node 2#1 at 0.000s..0.000s"]
        );
        let history = History {
            ops: vec![snowflake(None, 0, &[(10, 1, 0)]), snowflake(None, 2_000, &[(10, 1, 0)])],
            ..History::default()
        };
        assert_eq!(
            unique_snowflake_ids(&history).examples,
            ["snowflake ID 41947136 handed out twice: by /v1/snowflake on node 0 at 0.000s..0.000s and by \
              /v1/snowflake on node 0 at 0.002s..0.002s"]
        );
        let late = History {
            ops: vec![monotonic(2, 0, 10, &[(50, 51)]), monotonic(1, 20, 30, &[(40, 41)])],
            ..Default::default()
        };
        assert_eq!(
            monotonic_real_time(&late).examples,
            ["/v1/segment on node 2#1 at 0.000s..0.000s answered up to 50 before /v1/segment on node 1#1 at \
              0.000s..0.000s was sent, which got 40"]
        );
    }
}
