//! `Metrics`: the Prometheus series of SPEC.md §4, in the text format at `/metrics`.
//!
//! Hot-path numbers (IDs issued per tag) live in plain atomics next to the buffers and are copied
//! into the registry at scrape time, so serving an ID never touches the registry.

use std::sync::atomic::AtomicI64;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::exponential_buckets;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::cluster::Cluster;
use crate::segments::Segments;
use crate::snowflakes::Snowflakes;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// A route template (`/v1/segment/{tag}`): a small fixed set, interned once.
    pub route: &'static str,
    pub code: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TagLabels {
    pub tag: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClaimLabels {
    pub tag: String,
    pub result: &'static str,
}

/// The `&'static str` for a route template. Routes come from the router, a fixed set of about
/// thirty, so the leaked strings are bounded.
fn intern(route: &str) -> &'static str {
    static ROUTES: std::sync::OnceLock<std::sync::RwLock<std::collections::HashSet<&'static str>>> =
        std::sync::OnceLock::new();
    let routes = ROUTES.get_or_init(Default::default);
    if let Some(known) = routes.read().unwrap_or_else(|p| p.into_inner()).get(route) {
        return known;
    }
    let mut routes = routes.write().unwrap_or_else(|p| p.into_inner());
    if let Some(known) = routes.get(route) {
        return known;
    }
    let leaked: &'static str = Box::leak(route.to_string().into_boxed_str());
    routes.insert(leaked);
    leaked
}

fn claim_histogram() -> Histogram {
    // 0.5 ms to about 16 s.
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    ids_issued: Family<TagLabels, Counter>,
    claims: Family<ClaimLabels, Counter>,
    claim_seconds: Family<TagLabels, Histogram, fn() -> Histogram>,
    buffer_ids_left: Family<TagLabels, Gauge>,
    waits: Family<TagLabels, Counter>,
    raft_term: Gauge,
    raft_leader: Gauge,
    raft_is_leader: Gauge,
    raft_last_log_index: Gauge,
    raft_applied_index: Gauge,
    raft_commit_index: Gauge,
    raft_voters: Gauge,
    raft_learners: Gauge,
    snowflake_ids_issued: Counter,
    snowflake_worker: Gauge,
    snowflake_window_headroom_ms: Gauge,
    snowflake_clock_offset_ms: Gauge,
    snowflake_refused: Gauge,
    snowflake_years_left: Gauge<f64, std::sync::atomic::AtomicU64>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("leafraft");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register("http_requests", "HTTP requests by route and status code", requests.clone());
        let ids_issued = Family::<TagLabels, Counter>::default();
        registry.register("segment_ids_issued", "Segment IDs handed out by this node", ids_issued.clone());
        let claims = Family::<ClaimLabels, Counter>::default();
        registry.register("segment_claims", "Segment claims proposed by this node, by result", claims.clone());
        let claim_seconds = Family::<TagLabels, Histogram, fn() -> Histogram>::new_with_constructor(claim_histogram);
        registry.register(
            "segment_claim_duration_seconds",
            "Time from proposing a claim to having it committed and applied",
            claim_seconds.clone(),
        );
        let buffer_ids_left = Family::<TagLabels, Gauge>::default();
        registry.register("segment_buffer_ids", "IDs left in this node's two buffers", buffer_ids_left.clone());
        let waits = Family::<TagLabels, Counter>::default();
        registry.register(
            "segment_waits",
            "Requests that found both segments used up and waited for a claim",
            waits.clone(),
        );
        let gauge = |registry: &mut Registry, name: &str, help: &str| {
            let gauge = Gauge::<i64, AtomicI64>::default();
            registry.register(name, help, gauge.clone());
            gauge
        };
        let raft_term = gauge(&mut registry, "raft_term", "Current Raft term");
        let raft_leader = gauge(&mut registry, "raft_leader_id", "Node ID of the known leader (-1 when none)");
        let raft_is_leader = gauge(&mut registry, "raft_is_leader", "1 when this node is the leader");
        let raft_last_log_index = gauge(&mut registry, "raft_last_log_index", "Index of the last log entry");
        let raft_applied_index = gauge(&mut registry, "raft_applied_index", "Index of the last applied entry");
        let raft_commit_index = gauge(&mut registry, "raft_commit_index", "Index of the last committed entry");
        let raft_voters = gauge(&mut registry, "raft_voters", "Voters in the membership");
        let raft_learners = gauge(&mut registry, "raft_learners", "Learners in the membership");
        let snowflake_ids_issued = Counter::default();
        registry.register(
            "snowflake_ids_issued",
            "Snowflake IDs handed out by this node",
            snowflake_ids_issued.clone(),
        );
        let snowflake_worker =
            gauge(&mut registry, "snowflake_worker_id", "The worker ID this node holds (-1 when none)");
        let snowflake_window_headroom_ms =
            gauge(&mut registry, "snowflake_window_headroom_ms", "How far the committed window reaches past the clock");
        let snowflake_clock_offset_ms = gauge(
            &mut registry,
            "snowflake_clock_offset_ms",
            "Median offset of the peers' clocks from this node's, RTT-compensated",
        );
        let snowflake_refused = gauge(&mut registry, "snowflake_refused", "1 while snowflake IDs are refused");
        let snowflake_years_left = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
        registry.register(
            "snowflake_time_bits_years_left",
            "Years the layout's time bits still cover",
            snowflake_years_left.clone(),
        );
        Metrics {
            registry,
            requests,
            ids_issued,
            claims,
            claim_seconds,
            buffer_ids_left,
            waits,
            raft_term,
            raft_leader,
            raft_is_leader,
            raft_last_log_index,
            raft_applied_index,
            raft_commit_index,
            raft_voters,
            raft_learners,
            snowflake_ids_issued,
            snowflake_worker,
            snowflake_window_headroom_ms,
            snowflake_clock_offset_ms,
            snowflake_refused,
            snowflake_years_left,
        }
    }

    /// Counts one request without allocating: route templates are interned on first sight.
    pub fn count_request(&self, route: &str, code: u16) {
        self.requests.get_or_create(&RequestLabels { route: intern(route), code }).inc();
    }

    pub fn observe_claim(&self, tag: &str, took: Duration, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        self.claims.get_or_create(&ClaimLabels { tag: tag.to_string(), result }).inc();
        if ok {
            self.claim_seconds.get_or_create(&TagLabels { tag: tag.to_string() }).observe(took.as_secs_f64());
        }
    }

    /// Copies the current state into the registry and encodes it.
    pub fn render(&self, cluster: &Cluster, segments: &Segments, snowflakes: &Snowflakes) -> String {
        let status = cluster.status();
        let to_i64 = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        self.raft_term.set(to_i64(status.term));
        self.raft_leader.set(status.leader_id.map_or(-1, to_i64));
        self.raft_is_leader.set(i64::from(status.leader_id == Some(status.node_id)));
        self.raft_last_log_index.set(cluster.metrics().last_log_index.map_or(0, to_i64));
        self.raft_applied_index.set(status.applied_index.map_or(0, to_i64));
        self.raft_commit_index.set(status.commit_index.map_or(0, to_i64));
        self.raft_voters.set(to_i64(status.voters.len() as u64));
        self.raft_learners.set(to_i64(status.learners.len() as u64));
        for stats in segments.stats() {
            let labels = TagLabels { tag: stats.tag };
            let issued = self.ids_issued.get_or_create(&labels);
            issued.inc_by(stats.ids_issued.saturating_sub(issued.get()));
            let waits = self.waits.get_or_create(&labels);
            waits.inc_by(stats.waits.saturating_sub(waits.get()));
            self.buffer_ids_left.get_or_create(&labels).set(to_i64(stats.ids_left));
        }
        let snowflake = snowflakes.status();
        self.snowflake_ids_issued.inc_by(snowflake.ids_issued.saturating_sub(self.snowflake_ids_issued.get()));
        self.snowflake_worker.set(snowflake.worker_id.map_or(-1, i64::from));
        let headroom = snowflake.window_end_ms.map_or(0, |end| {
            i64::try_from(end).unwrap_or(i64::MAX) - i64::try_from(crate::clock::now_ms()).unwrap_or(0)
        });
        self.snowflake_window_headroom_ms.set(headroom);
        self.snowflake_clock_offset_ms.set(snowflake.clock_offset_ms.unwrap_or(0));
        self.snowflake_refused.set(i64::from(snowflake.refused.is_some()));
        self.snowflake_years_left.set(snowflakes.years_left());
        let mut text = String::new();
        if prometheus_client::encoding::text::encode(&mut text, &self.registry).is_err() {
            text.clear();
        }
        text
    }
}
