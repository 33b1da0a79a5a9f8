//! `Metrics`: the Prometheus series of `docs/api.md`, in the text format at `/metrics`.
//!
//! Hot-path numbers (IDs issued per tag) live in plain atomics next to the buffers and are copied
//! into the registry at scrape time, so serving an ID never touches the registry. Per-tag series
//! are kept for the busiest tags only, beside totals over all tags (`segments.rs`).

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

mod disk;
mod events;
mod node;
mod requests;
mod security;
mod segments;

pub use node::tags_closest_to_end;
pub use node::NodeScrape;

pub use requests::RouteKey;
pub use security::ConnectionMetrics;
use security::SecurityMetrics;
pub use segments::SegmentStats;
pub use segments::TagStats;
pub use segments::DEFAULT_TAG_SERIES;

use crate::cluster::ClusterStatus;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// A route template (`/v1/segment/{tag}`): a small fixed set, interned once.
    pub route: &'static str,
    pub code: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusalLabels {
    /// A route template, as in `http_requests`.
    pub route: &'static str,
    /// One of `config::credentials::AuthRefusal::reason`'s few values.
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    pub version: &'static str,
    pub commit: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MemberLabels {
    pub node_id: u64,
}

/// The `&'static str` for a route template. Routes come from the router, a fixed set of about
/// thirty, so the leaked strings are bounded.
pub(crate) fn intern(route: &str) -> &'static str {
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

/// What the snowflake series copy of this node's snowflake state (`Snowflakes::status`).
#[derive(Debug, Clone, Default)]
pub struct SnowflakeScrape {
    pub worker_id: Option<u32>,
    pub window_end_ms: Option<u64>,
    pub clock_offset_ms: Option<i64>,
    /// Whether snowflake IDs are refused right now.
    pub refused: bool,
    pub ids_issued: u64,
}

/// What one scrape of `/metrics` copies into the registry, gathered by the caller from the
/// services (so this module depends on their views, never on the services themselves).
#[derive(Debug, Clone)]
pub struct Scrape {
    pub now_ms: u64,
    pub cluster: ClusterStatus,
    pub last_log_index: Option<u64>,
    pub tags: SegmentStats,
    pub snowflake: SnowflakeScrape,
    pub snowflake_years_left: f64,
    /// Messages between nodes refused for a mismatched identity, by kind, since start.
    pub identity_refusals: Vec<(&'static str, u64)>,
    /// Members at whose address a node of another cluster answered, with its cluster ID.
    pub foreign_clusters: std::collections::BTreeMap<u64, u64>,
    /// Time-sequence events since start, by kind (`claims`, `waits`, `exhausted_seconds`,
    /// `refused_clocks`).
    pub timeseq: Vec<(&'static str, u64)>,
    /// Claims this node sent and the Raft entries they took, by kind (`claims`, `entries`).
    pub claims: Vec<(&'static str, u64)>,
    /// Readiness and the tags closest to their end.
    pub node: NodeScrape,
}

pub struct Metrics {
    registry: Registry,
    requests: requests::RequestCounts,
    /// Held while a scrape copies counts into the registry: two scrapes copying at once would add
    /// the same difference twice.
    scraping: std::sync::Mutex<()>,
    segments: segments::SegmentSeries,
    /// How many tags have series of their own (`--metrics-tag-series`).
    tag_series: usize,
    node: node::NodeSeries,
    raft: RaftGauges,
    snowflake_ids_issued: Counter,
    snowflake_worker: Gauge,
    snowflake_window_headroom_ms: Gauge,
    snowflake_clock_offset_ms: Gauge,
    snowflake_refused: Gauge,
    snowflake_years_left: Gauge<f64, std::sync::atomic::AtomicU64>,
    identity_refusals: Family<KindLabels, Counter>,
    member_foreign_cluster: Family<MemberLabels, Gauge>,
    events: events::EventSeries,
    security: SecurityMetrics,
    /// The connections to the node's port (`crate::api::server`).
    pub connections: ConnectionMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// The series with the default number of tags that have series of their own.
    pub fn new() -> Metrics {
        Metrics::with_tag_series(DEFAULT_TAG_SERIES)
    }

    /// The series, with series of their own for the `tag_series` busiest tags
    /// (`--metrics-tag-series`).
    pub fn with_tag_series(tag_series: usize) -> Metrics {
        let mut registry = Registry::with_prefix("leafraft");
        let r = &mut registry;
        let requests = registered(r, "http_requests", "HTTP requests by route and status code", Family::default());
        let segments = segments::SegmentSeries::register(r, tag_series);
        let node = node::NodeSeries::register(r);
        let raft = RaftGauges::register(r);
        let snowflake_ids_issued =
            registered(r, "snowflake_ids_issued", "Snowflake IDs handed out by this node", Counter::default());
        let snowflake_worker =
            registered(r, "snowflake_worker_id", "The worker ID this node holds (-1 when none)", Gauge::default());
        let snowflake_window_headroom_ms = registered(
            r,
            "snowflake_window_headroom_ms",
            "How far the committed window reaches past the clock",
            Gauge::default(),
        );
        let snowflake_clock_offset_ms = registered(
            r,
            "snowflake_clock_offset_ms",
            "Median offset of the peers' clocks from this node's, RTT-compensated",
            Gauge::default(),
        );
        let snowflake_refused =
            registered(r, "snowflake_refused", "1 while snowflake IDs are refused", Gauge::default());
        let snowflake_years_left = registered(
            r,
            "snowflake_time_bits_years_left",
            "Years the layout's time bits still cover",
            Gauge::<f64, std::sync::atomic::AtomicU64>::default(),
        );
        let identity_refusals = registered(
            r,
            "identity_refusals",
            "Messages between nodes refused because the peer's cluster ID or data dir identity did not match, by kind",
            Family::default(),
        );
        let member_foreign_cluster = registered(
            r,
            "member_foreign_cluster",
            "1 while a node of another cluster answers at this member's address (a wiped member that founded a new \
             cluster, say), by the member's node ID",
            Family::default(),
        );
        let events = events::EventSeries::register(r);
        let security = SecurityMetrics::register(r);
        let connections = ConnectionMetrics::register(r);
        let requests = requests::RequestCounts::new(requests);
        registry.register_collector(Box::new(requests.latencies()));
        registry.register_collector(Box::new(disk::SyncLatency));
        let build_info: Family<BuildLabels, Gauge> = registered(
            &mut registry,
            "build_info",
            "Always 1, labelled with the version and commit of this binary (two values across members: a rolling \
             upgrade, or one left behind)",
            Family::default(),
        );
        build_info
            .get_or_create(&BuildLabels { version: env!("CARGO_PKG_VERSION"), commit: env!("LEAFRAFT_COMMIT") })
            .set(1);
        Metrics {
            registry,
            requests,
            scraping: std::sync::Mutex::new(()),
            segments,
            tag_series,
            node,
            raft,
            snowflake_ids_issued,
            snowflake_worker,
            snowflake_window_headroom_ms,
            snowflake_clock_offset_ms,
            snowflake_refused,
            snowflake_years_left,
            identity_refusals,
            member_foreign_cluster,
            events,
            security,
            connections,
        }
    }

    /// Where requests of a route template are counted (a slot taken on first sight).
    pub fn route_key(&self, route: &str) -> RouteKey {
        self.requests.key(route)
    }

    /// Counts one answered request and its latency, without a lock or an allocation.
    pub fn count_request(&self, key: RouteKey, code: u16, took: Duration) {
        self.requests.count(key, code, took);
    }

    /// How many tags have series of their own: also how many tags `tags_closest_to_end` keeps.
    pub fn tag_series(&self) -> usize {
        self.tag_series
    }

    /// Counts one segment claim of `tag` and how long it took to commit.
    pub fn observe_claim(&self, tag: &str, took: Duration, ok: bool) {
        self.segments.observe_claim(tag, took, ok);
    }

    /// Copies one scrape's state into the registry and encodes it.
    pub fn render(&self, scrape: &Scrape) -> String {
        let _scraping = self.scraping.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        self.requests.copy_into_registry();
        let status = &scrape.cluster;
        self.raft.term.set(to_i64(status.term));
        self.raft.leader.set(status.leader_id.map_or(-1, to_i64));
        self.raft.is_leader.set(i64::from(status.leader_id == Some(status.node_id)));
        self.raft.last_log_index.set(scrape.last_log_index.map_or(0, to_i64));
        self.raft.applied_index.set(status.applied_index.map_or(0, to_i64));
        self.raft.commit_index.set(status.commit_index.map_or(0, to_i64));
        self.raft.voters.set(to_i64(status.voters.len() as u64));
        self.raft.learners.set(to_i64(status.learners.len() as u64));
        self.segments.copy(&scrape.tags);
        self.node.copy(scrape);
        let snowflake = &scrape.snowflake;
        self.snowflake_ids_issued.inc_by(snowflake.ids_issued.saturating_sub(self.snowflake_ids_issued.get()));
        self.snowflake_worker.set(snowflake.worker_id.map_or(-1, i64::from));
        let headroom = snowflake
            .window_end_ms
            .map_or(0, |end| i64::try_from(end).unwrap_or(i64::MAX) - i64::try_from(scrape.now_ms).unwrap_or(0));
        self.snowflake_window_headroom_ms.set(headroom);
        self.snowflake_clock_offset_ms.set(snowflake.clock_offset_ms.unwrap_or(0));
        self.snowflake_refused.set(i64::from(snowflake.refused));
        self.snowflake_years_left.set(scrape.snowflake_years_left);
        for (kind, count) in &scrape.identity_refusals {
            let counter = self.identity_refusals.get_or_create(&KindLabels { kind });
            counter.inc_by(count.saturating_sub(counter.get()));
        }
        for node_id in status.nodes.keys().chain(scrape.foreign_clusters.keys()) {
            let foreign = i64::from(scrape.foreign_clusters.contains_key(node_id));
            self.member_foreign_cluster.get_or_create(&MemberLabels { node_id: *node_id }).set(foreign);
        }
        self.events.update(scrape);
        let mut text = String::new();
        if prometheus_client::encoding::text::encode(&mut text, &self.registry).is_err() {
            text.clear();
        }
        text
    }
}

/// The Raft gauges: term, leader, log indexes and membership size, copied in at scrape time.
#[derive(Debug)]
struct RaftGauges {
    term: Gauge,
    leader: Gauge,
    is_leader: Gauge,
    last_log_index: Gauge,
    applied_index: Gauge,
    commit_index: Gauge,
    voters: Gauge,
    learners: Gauge,
}

impl RaftGauges {
    fn register(r: &mut Registry) -> RaftGauges {
        let term = registered(r, "raft_term", "Current Raft term", Gauge::default());
        let leader = registered(r, "raft_leader_id", "Node ID of the known leader (-1 when none)", Gauge::default());
        let is_leader = registered(r, "raft_is_leader", "1 when this node is the leader", Gauge::default());
        let last_log_index = registered(r, "raft_last_log_index", "Index of the last log entry", Gauge::default());
        let applied_index = registered(r, "raft_applied_index", "Index of the last applied entry", Gauge::default());
        let commit_index = registered(r, "raft_commit_index", "Index of the last committed entry", Gauge::default());
        let voters = registered(r, "raft_voters", "Voters in the membership", Gauge::default());
        let learners = registered(r, "raft_learners", "Learners in the membership", Gauge::default());
        RaftGauges { term, leader, is_leader, last_log_index, applied_index, commit_index, voters, learners }
    }
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Registers `metric` under `name` and hands it back, so each series takes one statement.
fn registered<M: prometheus_client::registry::Metric + Clone>(
    registry: &mut Registry,
    name: &str,
    help: &str,
    metric: M,
) -> M {
    registry.register(name, help, metric.clone());
    metric
}
