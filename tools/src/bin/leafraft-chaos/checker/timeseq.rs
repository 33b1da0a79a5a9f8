//! The checks of time-sequence IDs (`docs/semantics.md#time-sequence-ids`), from the clients' records alone. The run's
//! namespace has the default layout; every ID is read with it.

use std::collections::BTreeMap;

use leafraft_history::duplicates;
use leafraft_history::real_time_order;
use leafraft_ids::timeseq::Layout;
use leafraft_ids::timeseq::Parts;

use super::secs;
use super::where_;
use super::Check;
use super::Span;
use crate::faults::MAX_CLOCK_ERROR_MS;
use crate::history::History;
use crate::history::Incarnation;
use crate::history::Outcome;

/// The layout `leafraft-chaos` creates its namespace with (the server's defaults).
pub const LAYOUT: Layout = Layout { epoch_s: 1_577_836_800, utc_offset_s: 0, shard_bits: 12, seq_bits: 19 };

/// How far a served second may lie from the request's real time: the clock faults' reach, plus
/// the second an ID's time is rounded down to, plus the runner's own measuring slack.
const SECOND_SLACK_MS: u64 = MAX_CLOCK_ERROR_MS + 1_000 + 500;

/// Every (namespace, op index, ID, parts) of the history.
fn ids(history: &History) -> Vec<(&str, usize, u64, Option<Parts>)> {
    let mut all = Vec::new();
    for (index, op) in history.ops.iter().enumerate() {
        if let Outcome::Timeseq { namespace, ids, .. } = &op.outcome {
            all.extend(ids.iter().map(|&id| (namespace.as_str(), index, id, LAYOUT.decode(id).ok())));
        }
    }
    all
}

/// No (namespace, ID) was acknowledged twice, whatever node, endpoint or incarnation.
pub fn unique_ids(history: &History) -> Check {
    let mut check = Check::new("unique-timeseq-ids");
    let mut all: Vec<((&str, u64), usize)> = ids(history).into_iter().map(|(ns, op, id, _)| ((ns, id), op)).collect();
    check.checked = all.len() as u64;
    duplicates(&mut all, |(namespace, id), first, second| {
        check.violation(|| {
            format!(
                "namespace {namespace}: ID {id} handed out twice: by {} and by {}",
                where_(&history.ops[first]),
                where_(&history.ops[second])
            )
        });
    });
    check
}

/// Every ID decodes, to the shard its request asked for.
pub fn shard(history: &History) -> Check {
    let mut check = Check::new("timeseq-shard");
    for op in &history.ops {
        let Outcome::Timeseq { namespace, shard, ids } = &op.outcome else { continue };
        for &id in ids {
            check.checked += 1;
            match LAYOUT.decode(id) {
                Ok(parts) if parts.shard == *shard => {}
                Ok(parts) => check.violation(|| {
                    format!(
                        "namespace {namespace}: ID {id} of shard {} for shard {shard} from {}",
                        parts.shard,
                        where_(op)
                    )
                }),
                Err(e) => check.violation(|| format!("namespace {namespace}: ID {id} does not decode ({e:?})")),
            }
        }
    }
    check
}

/// The second inside every ID lies within the clock faults' reach of when its request was in
/// flight (the runner's clock): a node serves only its own clock's current second.
pub fn second(history: &History) -> Check {
    let mut check = Check::new("timeseq-second");
    let mut furthest = 0i64;
    for (_, index, id, parts) in ids(history) {
        let Some(parts) = parts else { continue };
        check.checked += 1;
        let op = &history.ops[index];
        let from = history.started_unix_ms + op.start_us / 1000;
        let to = history.started_unix_ms + op.end_us.div_ceil(1000);
        let second_ms = parts.second.saturating_mul(1000);
        let off = if second_ms < from { -((from - second_ms) as i64) } else { second_ms.saturating_sub(to) as i64 };
        furthest = if off.abs() > furthest.abs() { off } else { furthest };
        if off.unsigned_abs() > SECOND_SLACK_MS {
            check.violation(|| {
                format!(
                    "ID {id} carries second {} ({off:+} ms from the request's {from}..{to} ms), more than {SECOND_SLACK_MS} \
                     ms off, from {}",
                    parts.second,
                    where_(op)
                )
            });
        }
    }
    check.note = format!("furthest second from its request: {furthest:+} ms (allowed ±{SECOND_SLACK_MS})");
    check
}

/// Per node incarnation and namespace: a request answered before another was sent carried no
/// later second than the other's earliest (a holder's second never goes down).
pub fn order(history: &History) -> Check {
    let mut check = Check::new("timeseq-order");
    let mut groups: BTreeMap<(&str, Incarnation), Vec<Span>> = BTreeMap::new();
    for (index, op) in history.ops.iter().enumerate() {
        let Outcome::Timeseq { namespace, ids, .. } = &op.outcome else { continue };
        let seconds: Vec<u64> = ids.iter().filter_map(|&id| LAYOUT.decode(id).ok()).map(|p| p.second).collect();
        let (Some(&min), Some(&max), Some(incarnation)) = (seconds.iter().min(), seconds.iter().max(), op.incarnation)
        else {
            continue;
        };
        check.checked += 1;
        // `real_time_order` reports `a.max >= b.min`: an equal second is fine, so `min` is one up.
        let span = Span { start: op.start_us, end: op.end_us, min: min + 1, max, op: index };
        groups.entry((namespace.as_str(), incarnation)).or_default().push(span);
    }
    for ((namespace, _), mut spans) in groups {
        real_time_order(&mut spans, |a, b| {
            check.violation(|| {
                format!(
                    "namespace {namespace}: {} answered second {} before {} was sent (at {:.3}s), which got second {}",
                    where_(&history.ops[a.op]),
                    a.max,
                    where_(&history.ops[b.op]),
                    secs(b.start),
                    b.min - 1
                )
            })
        });
    }
    check
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Endpoint;
    use crate::history::Op;

    const START_MS: u64 = 1_800_000_000_000;

    /// A request on node 1 (first start) at `at_ms` into the run, answered 5 ms later, with IDs of
    /// (second offset from the run's start, shard, sequence) for `shard`.
    fn take(at_ms: u64, shard: u64, parts: &[(i64, u64, u64)]) -> Op {
        let ids = parts
            .iter()
            .map(|&(offset_s, shard, sequence)| {
                let second = (START_MS / 1000).saturating_add_signed(offset_s);
                LAYOUT.encode(Parts { second, shard, sequence }).expect("fits the layout")
            })
            .collect();
        Op {
            endpoint: Endpoint::TimeseqList,
            node: 1,
            incarnation: Some(Incarnation { node: 1, start: 1 }),
            start_us: at_ms * 1000,
            end_us: at_ms * 1000 + 5000,
            outcome: Outcome::Timeseq { namespace: "ns".into(), shard, ids },
        }
    }

    fn history(ops: Vec<Op>) -> History {
        History { ops, started_unix_ms: START_MS, ..Default::default() }
    }

    #[test]
    fn a_repeated_id_fails_and_other_namespaces_or_shards_do_not_collide() {
        let good = history(vec![take(0, 7, &[(0, 7, 1), (0, 7, 2)]), take(10, 8, &[(0, 8, 1)])]);
        assert!(unique_ids(&good).passed() && shard(&good).passed());
        let mut other_ns = take(20, 7, &[(0, 7, 1)]);
        if let Outcome::Timeseq { namespace, .. } = &mut other_ns.outcome {
            *namespace = "other".into();
        }
        assert!(unique_ids(&history(vec![take(0, 7, &[(0, 7, 1)]), other_ns])).passed());
        let twice = history(vec![take(0, 7, &[(0, 7, 1), (0, 7, 2)]), take(10, 7, &[(0, 7, 2)])]);
        let check = unique_ids(&twice);
        assert_eq!((check.checked, check.violations), (3, 1), "{:?}", check.examples);
    }

    #[test]
    fn an_id_of_another_shard_fails() {
        let check = shard(&history(vec![take(0, 7, &[(0, 7, 1), (0, 9, 2)])]));
        assert_eq!((check.checked, check.violations), (2, 1), "{:?}", check.examples);
    }

    #[test]
    fn a_second_beyond_the_clock_faults_reach_fails() {
        let near = history(vec![take(3_000, 1, &[(3, 1, 1), (12, 1, 2), (-6, 1, 3)])]);
        assert!(second(&near).passed(), "{:?}", second(&near).examples);
        let far = history(vec![take(3_000, 1, &[(3 + 12, 1, 1), (3 - 12, 1, 2)])]);
        assert_eq!(second(&far).violations, 2);
    }

    #[test]
    fn per_incarnation_a_later_request_never_gets_an_earlier_second() {
        let ordered = history(vec![take(0, 1, &[(0, 1, 5)]), take(10, 1, &[(0, 1, 1), (1, 1, 0)])]);
        assert!(order(&ordered).passed(), "the same second again, in any sequence order, is fine");
        let back = history(vec![take(0, 1, &[(2, 1, 5)]), take(10, 1, &[(1, 1, 9)])]);
        assert_eq!(order(&back).violations, 1);
        let mut restarted = take(10, 1, &[(1, 1, 9)]);
        restarted.incarnation = Some(Incarnation { node: 1, start: 2 });
        assert!(order(&history(vec![take(0, 1, &[(2, 1, 5)]), restarted])).passed(), "another incarnation");
    }

    /// A repeated ID's line keeps its words (the sweep is `leafraft-history`'s).
    #[test]
    fn a_repeated_id_keeps_its_words() {
        let twice = history(vec![take(0, 7, &[(0, 7, 1)]), take(10, 7, &[(0, 7, 1)])]);
        let id = LAYOUT.encode(Parts { second: START_MS / 1000, shard: 7, sequence: 1 }).expect("fits");
        assert_eq!(
            unique_ids(&twice).examples,
            [format!(
                "namespace ns: ID {id} handed out twice: by /v1/timeseq on node 1#1 at 0.000s..0.005s and by \
                 /v1/timeseq on node 1#1 at 0.010s..0.015s"
            )]
        );
    }
}
