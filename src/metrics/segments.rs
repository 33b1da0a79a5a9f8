//! The segment series, bounded however many tags a node serves: series of their own for the
//! `limit` busiest tags only (most IDs issued since the previous scrape; ties go to tags shown
//! already, then by name), and `_all_tags` totals that count every tag, dropped buffers included.
//!
//! A tag that leaves the busiest has its series removed, histograms included, so the text stays
//! about `limit` × 2 KB however many tags there are. The totals are families of their own rather
//! than a `tag="_other"` series: `_other` is a valid tag name, and a sum over a family that held
//! both the busiest tags and the rest would count nothing twice only by convention.

use std::collections::HashMap;
use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::RwLock;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::exponential_buckets;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::registered;
use super::to_i64;

/// How many tags have series of their own unless `--metrics-tag-series` says otherwise.
pub const DEFAULT_TAG_SERIES: usize = 100;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TagLabels {
    pub tag: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClaimLabels {
    pub tag: String,
    pub result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub result: &'static str,
}

/// One tag's counters on this node, for `/metrics`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagStats {
    pub tag: String,
    pub ids_issued: u64,
    pub waits: u64,
    pub ids_left: u64,
}

/// This node's segment numbers at one scrape.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SegmentStats {
    /// Every tag this node holds buffers of, in no particular order.
    pub tags: Vec<TagStats>,
    /// IDs issued and waits of the buffers dropped since start (idle ones, no longer in `tags`).
    pub dropped_ids_issued: u64,
    pub dropped_waits: u64,
    /// Buffers dropped for idleness since start.
    pub idle_drops: u64,
    /// Their tails given back, by outcome: `applied`, `refused` (claimed meanwhile), `failed`.
    pub idle_releases: Vec<(&'static str, u64)>,
}

fn claim_histogram() -> Histogram {
    // 0.5 ms to about 16 s.
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

/// Which tags have series of their own: chosen at each scrape, and meanwhile a claim of a tag
/// not chosen gets them while there is room (a new node's first tags before the first scrape).
struct Shown {
    tags: HashSet<String>,
}

pub(super) struct SegmentSeries {
    limit: usize,
    /// Held for writing while a scrape changes which tags are shown and removes series, and for
    /// reading while a claim is observed, so no claim recreates the series of a tag just removed.
    shown: RwLock<Shown>,
    /// IDs issued per tag at the previous scrape: the rate the busiest are chosen by.
    previous: Mutex<HashMap<String, u64>>,
    ids_issued: Family<TagLabels, Counter>,
    claims: Family<ClaimLabels, Counter>,
    claim_seconds: Family<TagLabels, Histogram, fn() -> Histogram>,
    buffer_ids_left: Family<TagLabels, Gauge>,
    waits: Family<TagLabels, Counter>,
    totals: Totals,
}

/// The `_all_tags` series and the buffers' own.
struct Totals {
    ids_issued: Counter,
    claims: Family<ResultLabels, Counter>,
    claim_seconds: Histogram,
    buffer_ids_left: Gauge,
    waits: Counter,
    buffers: Gauge,
    idle_drops: Counter,
    idle_releases: Family<ResultLabels, Counter>,
}

impl Totals {
    fn register(r: &mut Registry) -> Totals {
        Totals {
            ids_issued: registered(
                r,
                "segment_ids_issued_all_tags",
                "Segment IDs handed out by this node, all tags",
                Counter::default(),
            ),
            claims: registered(
                r,
                "segment_claims_all_tags",
                "Segment claims proposed by this node, all tags, by result",
                Family::default(),
            ),
            claim_seconds: registered(
                r,
                "segment_claim_duration_seconds_all_tags",
                "Time from proposing a claim to having it committed and applied, all tags",
                claim_histogram(),
            ),
            buffer_ids_left: registered(
                r,
                "segment_buffer_ids_all_tags",
                "IDs left in this node's buffers, all tags",
                Gauge::default(),
            ),
            waits: registered(
                r,
                "segment_waits_all_tags",
                "Requests that found both segments used up and waited for a claim, all tags",
                Counter::default(),
            ),
            buffers: registered(
                r,
                "segment_buffers",
                "Tags this node holds buffers of (created on first use, dropped when idle)",
                Gauge::default(),
            ),
            idle_drops: registered(
                r,
                "segment_idle_drops",
                "Buffers dropped after serving nothing for --segment-idle-ms",
                Counter::default(),
            ),
            idle_releases: registered(
                r,
                "segment_idle_releases",
                "Give-backs of dropped buffers' tails, by result (applied, refused: claimed meanwhile, failed)",
                Family::default(),
            ),
        }
    }
}

impl SegmentSeries {
    pub(super) fn register(r: &mut Registry, limit: usize) -> SegmentSeries {
        let ids_issued =
            registered(r, "segment_ids_issued", "Segment IDs handed out by this node, busiest tags", Family::default());
        let claims = registered(
            r,
            "segment_claims",
            "Segment claims proposed by this node, busiest tags, by result",
            Family::default(),
        );
        let claim_seconds = registered(
            r,
            "segment_claim_duration_seconds",
            "Time from proposing a claim to having it committed and applied, busiest tags",
            Family::<TagLabels, Histogram, fn() -> Histogram>::new_with_constructor(claim_histogram),
        );
        let buffer_ids_left =
            registered(r, "segment_buffer_ids", "IDs left in this node's two buffers, busiest tags", Family::default());
        let waits = registered(
            r,
            "segment_waits",
            "Requests that found both segments used up and waited for a claim, busiest tags",
            Family::default(),
        );
        SegmentSeries {
            limit,
            shown: RwLock::new(Shown { tags: HashSet::new() }),
            previous: Mutex::new(HashMap::new()),
            ids_issued,
            claims,
            claim_seconds,
            buffer_ids_left,
            waits,
            totals: Totals::register(r),
        }
    }

    /// Counts one claim in the totals, and in the tag's own series if it has them (or there is
    /// room for them).
    pub(super) fn observe_claim(&self, tag: &str, took: Duration, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        self.totals.claims.get_or_create(&ResultLabels { result }).inc();
        if ok {
            self.totals.claim_seconds.observe(took.as_secs_f64());
        }
        let shown = self.shown.read().unwrap_or_else(|p| p.into_inner());
        if shown.tags.contains(tag) {
            self.observe_tag_claim(tag, took, result);
            return;
        }
        drop(shown);
        let mut shown = self.shown.write().unwrap_or_else(|p| p.into_inner());
        if shown.tags.contains(tag) || shown.tags.len() < self.limit {
            shown.tags.insert(tag.to_string());
            self.observe_tag_claim(tag, took, result);
        }
    }

    fn observe_tag_claim(&self, tag: &str, took: Duration, result: &'static str) {
        self.claims.get_or_create(&ClaimLabels { tag: tag.to_string(), result }).inc();
        if result == "ok" {
            self.claim_seconds.get_or_create(&TagLabels { tag: tag.to_string() }).observe(took.as_secs_f64());
        }
    }

    /// Copies one scrape into the series: the busiest tags' own, the others' removed, the totals.
    pub(super) fn copy(&self, stats: &SegmentStats) {
        let mut previous = self.previous.lock().unwrap_or_else(|p| p.into_inner());
        let mut shown = self.shown.write().unwrap_or_else(|p| p.into_inner());
        let busiest = busiest(&stats.tags, &previous, &shown.tags, self.limit);
        let now_shown: HashSet<String> = busiest.iter().map(|stats| stats.tag.clone()).collect();
        for tag in shown.tags.difference(&now_shown) {
            self.remove(tag);
        }
        for tag in busiest {
            let labels = TagLabels { tag: tag.tag.clone() };
            set_counter(&self.ids_issued, &labels, tag.ids_issued);
            set_counter(&self.waits, &labels, tag.waits);
            self.buffer_ids_left.get_or_create(&labels).set(to_i64(tag.ids_left));
        }
        shown.tags = now_shown;
        *previous = stats.tags.iter().map(|tag| (tag.tag.clone(), tag.ids_issued)).collect();
        drop(shown);
        let sum = |f: fn(&TagStats) -> u64| stats.tags.iter().map(f).fold(0u64, u64::saturating_add);
        let totals = &self.totals;
        raise(&totals.ids_issued, sum(|t| t.ids_issued).saturating_add(stats.dropped_ids_issued));
        raise(&totals.waits, sum(|t| t.waits).saturating_add(stats.dropped_waits));
        totals.buffer_ids_left.set(to_i64(sum(|t| t.ids_left)));
        totals.buffers.set(to_i64(stats.tags.len() as u64));
        raise(&totals.idle_drops, stats.idle_drops);
        for (result, count) in &stats.idle_releases {
            raise(&totals.idle_releases.get_or_create(&ResultLabels { result }), *count);
        }
    }

    /// Removes every series of `tag`.
    fn remove(&self, tag: &str) {
        let labels = TagLabels { tag: tag.to_string() };
        self.ids_issued.remove(&labels);
        self.waits.remove(&labels);
        self.buffer_ids_left.remove(&labels);
        self.claim_seconds.remove(&labels);
        for result in ["ok", "error"] {
            self.claims.remove(&ClaimLabels { tag: tag.to_string(), result });
        }
    }
}

/// The `limit` tags with the most IDs issued since the previous scrape (all of them for a tag
/// whose buffer is new or was recreated); ties go to tags in `shown` (fewer series come and go),
/// then by name.
fn busiest<'a>(
    tags: &'a [TagStats],
    previous: &HashMap<String, u64>,
    shown: &HashSet<String>,
    limit: usize,
) -> Vec<&'a TagStats> {
    let recent = |tag: &TagStats| match previous.get(&tag.tag) {
        Some(&before) if before <= tag.ids_issued => tag.ids_issued - before,
        _ => tag.ids_issued,
    };
    let mut ranked: Vec<(std::cmp::Reverse<u64>, bool, &TagStats)> =
        tags.iter().map(|tag| (std::cmp::Reverse(recent(tag)), !shown.contains(&tag.tag), tag)).collect();
    let order = |a: &(std::cmp::Reverse<u64>, bool, &TagStats), b: &(std::cmp::Reverse<u64>, bool, &TagStats)| {
        (a.0, a.1, &a.2.tag).cmp(&(b.0, b.1, &b.2.tag))
    };
    if limit == 0 {
        return Vec::new();
    }
    if ranked.len() > limit {
        ranked.select_nth_unstable_by(limit - 1, order);
        ranked.truncate(limit);
    }
    ranked.into_iter().map(|(_, _, tag)| tag).collect()
}

/// Brings a tag's counter to `value`; a lower value means the tag's buffer was recreated (after an
/// idle drop), which Prometheus sees as a counter reset.
fn set_counter(family: &Family<TagLabels, Counter>, labels: &TagLabels, value: u64) {
    if family.get(labels).is_some_and(|counter| counter.get() > value) {
        family.remove(labels);
    }
    raise(&family.get_or_create(labels), value);
}

/// Raises `counter` to `value` (a counter never goes down).
fn raise(counter: &Counter, value: u64) {
    counter.inc_by(value.saturating_sub(counter.get()));
}

#[cfg(test)]
mod tests;
