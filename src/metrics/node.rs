//! The series the alert rules and the dashboard need beside the Raft and segment ones: readiness,
//! how far the tags closest to their end still have to go, the replication lag the leader sees,
//! and the process's memory and start time (read from `/proc/self` at scrape time).
//!
//! Bounded like the segment series: the tag families hold the `limit` tags with the highest
//! `max_id` only (the ones an alert about running out is about), the lag family one series per
//! other member, and every family is rebuilt at each scrape, so a tag or member that left them
//! leaves no stale series.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::registered;
use super::segments::TagLabels;
use super::to_i64;
use super::Scrape;

/// The largest `max_id` a tag can reach (`leafraft_state::tag::MAX_ID_LIMIT`, `i64::MAX`).
const MAX_ID_LIMIT: u64 = i64::MAX as u64;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PeerLabels {
    pub node_id: u64,
    /// `voter` or `learner`.
    pub role: &'static str,
}

/// What the node-wide series are copied from, gathered by the `/metrics` handler.
#[derive(Debug, Clone, Default)]
pub struct NodeScrape {
    /// `/readyz` would answer 200.
    pub ready: bool,
    /// Tags in the state machine.
    pub tag_count: u64,
    /// The tags with the highest `max_id`, at most the series limit (`tags_closest_to_end`).
    pub tag_max_ids: Vec<(String, u64)>,
}

pub(super) struct NodeSeries {
    ready: Gauge,
    tags: Gauge,
    tag_max_id: Family<TagLabels, Gauge>,
    tag_ids_remaining: Family<TagLabels, Gauge>,
    replication_lag: Family<PeerLabels, Gauge>,
    resident_memory: Gauge,
    start_time: Gauge,
}

impl NodeSeries {
    pub(super) fn register(r: &mut Registry) -> NodeSeries {
        NodeSeries {
            ready: registered(r, "ready", "1 while /readyz answers 200 (a leader known, caught up)", Gauge::default()),
            tags: registered(r, "tags", "Tags in the replicated state", Gauge::default()),
            tag_max_id: registered(
                r,
                "tag_max_id",
                "The first ID of a tag's next claim, for the tags with the highest max_id (--metrics-tag-series)",
                Family::default(),
            ),
            tag_ids_remaining: registered(
                r,
                "tag_ids_remaining",
                "IDs a tag can still claim before its end (2^63-1), for the tags with the highest max_id",
                Family::default(),
            ),
            replication_lag: registered(
                r,
                "raft_replication_lag_entries",
                "Log entries a member is behind the leader's last one, as the leader sees it (leader only), by \
                 member and role",
                Family::default(),
            ),
            resident_memory: registered(
                r,
                "process_resident_memory_bytes",
                "Resident memory of this process (VmRSS)",
                Gauge::default(),
            ),
            start_time: registered(
                r,
                "process_start_time_seconds",
                "When this process started, in seconds since the Unix epoch (changes on every restart)",
                Gauge::default(),
            ),
        }
    }

    pub(super) fn copy(&self, scrape: &Scrape) {
        let node = &scrape.node;
        self.ready.set(i64::from(node.ready));
        self.tags.set(to_i64(node.tag_count));
        self.tag_max_id.clear();
        self.tag_ids_remaining.clear();
        for (tag, max_id) in &node.tag_max_ids {
            let labels = TagLabels { tag: tag.clone() };
            self.tag_max_id.get_or_create(&labels).set(to_i64(*max_id));
            self.tag_ids_remaining.get_or_create(&labels).set(to_i64(MAX_ID_LIMIT.saturating_sub(*max_id)));
        }
        self.replication_lag.clear();
        let status = &scrape.cluster;
        for (node_id, replication) in status.replication.iter().flatten() {
            let role = if status.learners.contains(node_id) { "learner" } else { "voter" };
            self.replication_lag.get_or_create(&PeerLabels { node_id: *node_id, role }).set(to_i64(replication.lag));
        }
        if let Some(bytes) = resident_memory_bytes() {
            self.resident_memory.set(to_i64(bytes));
        }
        if let Some(seconds) = process_start_time_seconds() {
            self.start_time.set(to_i64(seconds));
        }
    }
}

/// The `limit` tags with the highest `max_id`, highest first (ties by name): the ones closest to
/// their end, and to 2^53. A bounded heap, so a scrape of many tags allocates `limit` entries.
pub fn tags_closest_to_end<'a>(tags: impl Iterator<Item = (&'a str, u64)>, limit: usize) -> Vec<(String, u64)> {
    use std::cmp::Reverse;
    let mut heap: std::collections::BinaryHeap<Reverse<(u64, Reverse<&'a str>)>> =
        std::collections::BinaryHeap::with_capacity(limit.saturating_add(1));
    if limit == 0 {
        return Vec::new();
    }
    for (tag, max_id) in tags {
        heap.push(Reverse((max_id, Reverse(tag))));
        if heap.len() > limit {
            heap.pop();
        }
    }
    let mut closest: Vec<(String, u64)> =
        heap.into_iter().map(|Reverse((max_id, Reverse(tag)))| (tag.to_string(), max_id)).collect();
    closest.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    closest
}

/// `VmRSS` of `/proc/self/status`, in bytes (None off Linux).
fn resident_memory_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// The process's start: boot time (`btime` of `/proc/stat`) plus its start in clock ticks since
/// boot (field 22 of `/proc/self/stat`). Ticks are `USER_HZ`, which Linux fixes at 100 for user
/// space on every architecture it runs this binary on.
fn process_start_time_seconds() -> Option<u64> {
    const USER_HZ: u64 = 100;
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces and parentheses: count fields after its last `)`.
    let after_name = &stat[stat.rfind(')')? + 1..];
    let start_ticks: u64 = after_name.split_whitespace().nth(19)?.parse().ok()?;
    let boot = std::fs::read_to_string("/proc/stat").ok()?;
    let btime: u64 = boot.lines().find_map(|line| line.strip_prefix("btime "))?.trim().parse().ok()?;
    Some(btime + start_ticks / USER_HZ)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tags_closest_to_their_end_are_the_highest_max_ids_and_no_more_than_the_limit() {
        let tags: [(&str, u64); 5] = [("a", 5), ("b", 900), ("c", 7), ("d", 900), ("e", 1 << 60)];
        let closest = tags_closest_to_end(tags.iter().map(|(t, m)| (*t, *m)), 3);
        let expected: Vec<(String, u64)> = vec![("e".into(), 1 << 60), ("b".into(), 900), ("d".into(), 900)];
        assert_eq!(closest, expected);
        assert!(tags_closest_to_end(tags.iter().map(|(t, m)| (*t, *m)), 0).is_empty());
        assert_eq!(tags_closest_to_end(tags.iter().map(|(t, m)| (*t, *m)), 10).len(), 5);
    }

    #[test]
    fn the_process_numbers_come_from_proc() {
        let rss = resident_memory_bytes().expect("VmRSS");
        assert!(rss > 1 << 20 && rss < 1 << 40, "{rss}");
        let started = process_start_time_seconds().expect("start time");
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        assert!(started <= now + 1 && started + 24 * 3600 > now, "started {started}, now {now}");
    }
}
