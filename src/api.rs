//! The HTTP API on the node's one port: the public `/v1/*` routes, health, and `/raft/*` for
//! peers. Handlers translate HTTP to `Cluster` calls and back; they hold no logic of their own.
//!
//! API Boundary: paths, JSON shapes and error codes are the contract `docs/api.md` states.
//!
//! Beside the routes, the rest of the HTTP edge: [`server`] serves them on the port, plain or
//! TLS ([`tls`]), every connection under the limits of [`connections`]; [`refusals`] logs refused
//! requests at a bounded rate; [`probes`] answers `/healthz` and `/readyz` on a port of its own.

mod auth;
mod backup;
mod body;
mod cluster;
pub mod connections;
mod forward;
mod gate;
mod health;
mod import;
mod namespaces;
pub mod openapi;
mod path_tag;
mod peer;
mod pin;
pub mod probes;
pub mod refusals;
mod respond;
mod schemas;
mod scramble;
mod segments;
pub mod server;
mod snowflakes;
pub mod status;
mod tags;
mod timeseq;
pub mod tls;

use std::sync::Arc;

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::routing::post;
use axum::Router;

use crate::cluster::Cluster;
use crate::error::Error;
use crate::error::ErrorCode;
use crate::metrics::Metrics;
use crate::services::segments::Segments;
use crate::services::snowflakes::Snowflakes;
use crate::services::timeseq::Timeseq;

pub use body::MaxId;
pub use namespaces::CreateNamespace;
pub use namespaces::NamespaceList;
pub use namespaces::NamespaceView;
pub use tags::CreateTag;
pub use tags::TagView;
pub use tags::UpdateTag;
pub use timeseq::DecodedTimeseqId;
pub use timeseq::TimeseqIds;

/// Everything handlers share, behind one `Arc`: each request's `State` extraction clones it, and
/// one reference count is cheaper to move between cores than one per service.
#[derive(Clone)]
pub struct AppState(Arc<Services>);

impl std::ops::Deref for AppState {
    type Target = Services;

    fn deref(&self) -> &Services {
        &self.0
    }
}

pub struct Services {
    pub cluster: Arc<Cluster>,
    pub segments: Arc<Segments>,
    pub snowflakes: Arc<Snowflakes>,
    pub timeseq: Arc<Timeseq>,
    pub metrics: Arc<Metrics>,
    /// The peer secret, admin token and client tokens this node accepts (`auth`).
    /// (Swapped by `reload` when the token files change.)
    pub credentials: Arc<arc_swap::ArcSwap<crate::config::credentials::Credentials>>,
    /// `--peer-ca`: `/raft/*` needs a client certificate naming the member it claims to be.
    pub mutual_tls: bool,
    /// Where refused requests are logged, at a bounded rate.
    pub refusals: Arc<crate::api::refusals::RefusalLog>,
    /// Refuses appends to a log that went back in time, and counts such refusals as leader.
    pub amnesia: Arc<raft::AmnesiaGuard>,
}

/// The node's routes. `failing` turns true when the node's storage fails (see
/// [`crate::node::failstop`]): requests still running are then answered `NO_LEADER`.
pub fn router(services: Services, failing: tokio::sync::watch::Receiver<bool>) -> Router {
    let gate = gate::GateLayer::new(gate::Gatekeeper {
        auth: auth::Checker {
            credentials: services.credentials.clone(),
            mutual_tls: services.mutual_tls,
            metrics: services.metrics.clone(),
            refusals: services.refusals.clone(),
        },
        failing,
        pin: pin::ClusterPin::new(services.cluster.identity().clone()),
    });
    let state = AppState(Arc::new(services));
    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(metrics))
        .route("/", get(status::page))
        .route("/openapi.json", get(openapi::openapi_json))
        .route("/api/segment/get/{tag}", get(segments::leaf_get))
        .route("/v1/segment/{tag}", get(segments::ids))
        .route("/v1/segment/{tag}/ranges", get(segments::ranges))
        .route("/api/snowflake/get/{key}", get(snowflakes::leaf_get))
        .route("/decodeSnowflakeId", get(snowflakes::leaf_decode))
        .route("/v1/snowflake", get(snowflakes::ids))
        .route("/v1/snowflake/decode/{id}", get(snowflakes::decode))
        .route("/v1/workers", get(snowflakes::workers))
        .route("/v1/workers/{id}/release", post(snowflakes::release_worker))
        .route("/v1/clock", get(snowflakes::clock))
        .route("/v1/tags", get(tags::list).post(tags::create))
        .route("/v1/tags/{tag}", get(tags::get).patch(tags::update))
        .route("/v1/tags/{tag}/unscramble/{id}", get(scramble::unscramble))
        // Not under /v1/tags/: a tag may be called "import".
        .route("/v1/import/tags", post(import::import))
        .route("/v1/cluster", get(cluster::status))
        .route("/v1/cluster/learners", post(cluster::add_learner))
        .route("/v1/cluster/voters", post(cluster::promote_voter))
        .route("/v1/cluster/members/{id}", axum::routing::delete(cluster::remove_member))
        .route("/v1/cluster/noop", post(cluster::noop))
        .route("/v1/backup", get(backup::backup))
        .route("/v1/timeseq", get(namespaces::list).post(namespaces::create))
        .route("/v1/timeseq/{ns}", get(timeseq::ids))
        .route("/v1/timeseq/{ns}/decode/{id}", get(timeseq::decode))
        .route("/api/timeseq/get/{ns}", get(timeseq::leaf_get))
        .with_state(state.clone())
        .merge(peer_routes(state.clone()))
        .route_layer(gate)
        .fallback(not_found)
}

/// `/raft/*`: the Raft RPCs, forwarded writes and `hello`, each behind the identity check.
fn peer_routes(state: AppState) -> Router {
    forward::routes(state.cluster.clone())
        .merge(raft::network::routes(state.cluster.raft().clone(), state.amnesia.clone()))
        .route_layer(axum::middleware::from_fn_with_state(state, peer::check_identity))
}

#[utoipa::path(
    get,
    path = "/metrics",
    tag = "operations",
    summary = "Prometheus metrics",
    description = "Requests by route and code; IDs issued, waits, buffer fill, claims and claim latency histogram per tag \
                   for the busiest tags (--metrics-tag-series, 100) and over all tags (`_all_tags`); idle buffers dropped; \
                   Raft term/leader/indexes, clock offset to peers, snowflake years left; all prefixed `leafraft_`.",
    responses((status = 200, description = "OpenMetrics text, which Prometheus scrapes",
        content_type = "application/openmetrics-text; version=1.0.0; charset=utf-8", body = String))
)]
async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    let scrape = crate::metrics::Scrape {
        now_ms: crate::clock::now_ms(),
        cluster: state.cluster.status(),
        last_log_index: state.cluster.metrics().last_log_index,
        tags: state.segments.stats(),
        snowflake: {
            let status = state.snowflakes.status();
            crate::metrics::SnowflakeScrape {
                worker_id: status.worker_id,
                window_end_ms: status.window_end_ms,
                clock_offset_ms: status.clock_offset_ms,
                refused: status.refused.is_some(),
                ids_issued: status.ids_issued,
            }
        },
        snowflake_years_left: state.snowflakes.years_left(),
        identity_refusals: [state.cluster.identity().refusals(), vec![("amnesiac", state.amnesia.refusals())]].concat(),
        foreign_clusters: state.cluster.identity().foreign_clusters(),
        timeseq: state.timeseq.event_counts(),
        claims: state.segments.claim_batcher().event_counts(),
        node: {
            // One read of the replica: the count and the tags nearest their end agree.
            let (tag_count, tag_max_ids) = state.cluster.read(|machine| {
                let tags = machine.tags.iter().map(|(tag, record)| (tag.as_str(), record.max_id));
                (machine.tags.len() as u64, crate::metrics::tags_closest_to_end(tags, state.metrics.tag_series()))
            });
            crate::metrics::NodeScrape { ready: state.cluster.readiness().is_ok(), tag_count, tag_max_ids }
        },
    };
    let text = state.metrics.render(&scrape);
    ([(CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], text)
}

async fn not_found() -> Error {
    Error::new(ErrorCode::NotFound, "no such route")
}
