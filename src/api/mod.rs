//! The HTTP API on the node's one port: the public `/v1/*` routes, health, and `/raft/*` for
//! peers. Handlers translate HTTP to `Cluster` calls and back; they hold no logic of their own.
//!
//! API Boundary: paths, JSON shapes and error codes are the contract of SPEC.md §4 and §6.

mod auth;
mod body;
mod cluster;
mod forward;
mod health;
pub mod openapi;
mod segments;
mod snowflake;
pub mod status;
mod tags;

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::extract::MatchedPath;
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
use crate::segments::Segments;
use crate::snowflakes::Snowflakes;

pub use body::MaxId;
pub use tags::CreateTag;
pub use tags::TagView;
pub use tags::UpdateTag;

pub use tags::rfc3339;

/// Everything handlers share.
#[derive(Clone)]
pub struct AppState {
    pub cluster: Arc<Cluster>,
    pub segments: Arc<Segments>,
    pub snowflakes: Arc<Snowflakes>,
    pub metrics: Arc<Metrics>,
}

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(metrics))
        .route("/", get(status::page))
        .route("/openapi.json", get(openapi::openapi_json))
        .route("/api/segment/get/{tag}", get(segments::leaf_get))
        .route("/v1/segment/{tag}", get(segments::ids))
        .route("/v1/segment/{tag}/ranges", get(segments::ranges))
        .route("/api/snowflake/get/{key}", get(snowflake::leaf_get))
        .route("/decodeSnowflakeId", get(snowflake::leaf_decode))
        .route("/v1/snowflake", get(snowflake::ids))
        .route("/v1/snowflake/decode/{id}", get(snowflake::decode))
        .route("/v1/workers", get(snowflake::workers))
        .route("/v1/workers/{id}/release", post(snowflake::release_worker))
        .route("/v1/clock", get(snowflake::clock))
        .route("/v1/tags", get(tags::list).post(tags::create))
        .route("/v1/tags/{tag}", get(tags::get).patch(tags::update))
        .route("/v1/cluster", get(cluster::status))
        .route("/v1/cluster/learners", post(cluster::add_learner))
        .route("/v1/cluster/voters", post(cluster::promote_voter))
        .route("/v1/cluster/members/{id}", axum::routing::delete(cluster::remove_member))
        .route("/raft/forward", post(forward::forward).layer(DefaultBodyLimit::max(16 << 20)))
        .with_state(state.clone())
        .merge(raft::network::routes(state.cluster.raft().clone()))
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), count_requests))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(state, auth::require_secret))
}

/// Counts every routed request by its route template and status code.
async fn count_requests(
    State(state): State<AppState>,
    path: MatchedPath,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let response = next.run(request).await;
    state.metrics.count_request(path.as_str(), response.status().as_u16());
    response
}

#[utoipa::path(
    get,
    path = "/metrics",
    tag = "operations",
    summary = "Prometheus metrics",
    description = "Requests by route and code, IDs issued per tag, claims and claim latency histogram, buffer fill, \
                   Raft term/leader/indexes, clock offset to peers, snowflake years left; all prefixed `leafraft_`.",
    responses((status = 200, description = "The Prometheus text format", content_type = "text/plain; version=0.0.4",
        body = String))
)]
async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    let text = state.metrics.render(&state.cluster, &state.segments, &state.snowflakes);
    ([(CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], text)
}

async fn not_found() -> Error {
    Error::new(ErrorCode::NotFound, "no such route")
}
