//! Snowflake IDs over HTTP: Leaf's `/api/snowflake/get/{key}` and `/decodeSnowflakeId`, the
//! native `/v1/snowflake*`, the worker registry `/v1/workers` and `/v1/clock` for peer checks.

use axum::extract::rejection::PathRejection;
use axum::extract::rejection::QueryRejection;
use axum::extract::Path;
use axum::extract::Query;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::response::Response;
use axum::Json;
use serde::Deserialize;
use serde::Serialize;

use crate::api::body;
use crate::api::body::CountParams;
use crate::api::respond::leaf_error;
use crate::api::respond::leaf_text;
use crate::api::respond::push_id_list;
use crate::api::respond::rfc3339;
use crate::api::AppState;
use crate::clock::now_ms;
use crate::error::Error;
use crate::error::ErrorCode;
use crate::services::snowflakes::SnowflakeStatus;

/// Leaf's snowflake codes: −1 not ready (or the clock still behind after waiting), −3 the clock
/// moved back too far.
fn leaf_snowflake_code(error: &Error) -> i32 {
    error.leaf_code.unwrap_or(match error.code {
        ErrorCode::ClockBackwards => -3,
        _ => -1,
    })
}

/// One snowflake ID as text, as Leaf's `/api/snowflake/get/{key}`.
#[utoipa::path(
    get,
    path = "/api/snowflake/get/{key}",
    tag = "leaf",
    summary = "One snowflake ID (Leaf-compatible)",
    params(("key" = String, Path, description = "Accepted and ignored, as in Leaf")),
    responses(
        (status = 200, description = "The ID in decimal", content_type = "text/plain", body = String,
            example = "1858431170314878976"),
        (status = 500, description = "Leaf's error: -1 not ready or clock still behind after waiting, -3 clock moved \
            back too far", content_type = "text/plain", body = String, example = "Result{id=-3, status=EXCEPTION}"),
    )
)]
pub async fn leaf_get(State(state): State<AppState>, _key: Result<Path<String>, PathRejection>) -> Response {
    match state.snowflakes.next_ids(1).await {
        Ok(ids) => match ids.first() {
            Some(id) => leaf_text(id.to_string()),
            None => leaf_error(-1),
        },
        Err(e) => leaf_error(leaf_snowflake_code(&e)),
    }
}

/// `count` snowflake IDs from this node's worker (never forwarded).
#[utoipa::path(
    get,
    path = "/v1/snowflake",
    tag = "ids",
    summary = "Snowflake IDs",
    params(("count" = Option<u64>, Query, description = "How many IDs, 1 to 10000 (default 1)", minimum = 1,
        maximum = 10000)),
    responses(
        (status = 200, description = "Increasing IDs from this node's worker", body = crate::api::schemas::SnowflakeIds),
        (status = 400, description = "`INVALID_ARGUMENT`: bad count", body = crate::error::ErrorBody),
        (status = 503, description = "`CLOCK_BACKWARDS` (clock behind beyond the allowance, or skewed from peers), \
            `WORKER_UNAVAILABLE` (no worker, or the window cannot be extended) or `NOT_READY`",
            body = crate::error::ErrorBody,
            example = json!({"error": {"code": "CLOCK_BACKWARDS", "message": "clock is 1500 ms off the peers'"}})),
    )
)]
pub async fn ids(
    State(state): State<AppState>,
    params: Result<Query<CountParams>, QueryRejection>,
) -> Result<Response, Error> {
    let count = body::query(params)?.count.unwrap_or(1);
    let ids = state.snowflakes.next_ids(count).await?;
    let mut out = String::with_capacity(10 + ids.len() * 22);
    out.push('{');
    push_id_list(&mut out, ids.into_iter());
    out.push('}');
    Ok(([(CONTENT_TYPE, "application/json")], out).into_response())
}

#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Decoded {
    pub id: String,
    pub timestamp_ms: u64,
    pub time: String,
    pub worker_id: u64,
    pub sequence: u64,
}

fn parse_id(text: &str) -> Result<u64, Error> {
    text.trim()
        .parse::<i64>()
        .ok()
        .and_then(|id| u64::try_from(id).ok())
        .ok_or_else(|| Error::invalid(format!("'{text}' is not a non-negative 64-bit ID")))
}

/// Explains a snowflake ID with the cluster's layout.
#[utoipa::path(
    get,
    path = "/v1/snowflake/decode/{id}",
    tag = "ids",
    summary = "Decode a snowflake ID",
    params(("id" = String, Path, description = "A snowflake ID in decimal")),
    responses(
        (status = 200, description = "Time, worker and sequence of the ID", body = Decoded),
        (status = 400, description = "`INVALID_ARGUMENT`: not a non-negative 64-bit integer", body = crate::error::ErrorBody),
    )
)]
pub async fn decode(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<Decoded>, Error> {
    let id = parse_id(&body::path(id)?)?;
    let parts = state.snowflakes.decode_layout().decompose(id);
    Ok(Json(Decoded {
        id: id.to_string(),
        timestamp_ms: parts.timestamp_ms,
        time: rfc3339(parts.timestamp_ms),
        worker_id: parts.worker,
        sequence: parts.sequence,
    }))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeafDecodeParams {
    snowflake_id: String,
}

/// Leaf's shape: `{"timestamp":"<ms>(<time>)","workerId":"…","sequenceId":"…"}`. The time is
/// written `yyyy-MM-dd HH:mm:ss.SSS` in UTC (Leaf used the server's zone).
#[utoipa::path(
    get,
    path = "/decodeSnowflakeId",
    tag = "leaf",
    summary = "Decode a snowflake ID (Leaf-compatible)",
    params(("snowflakeId" = String, Query, description = "A snowflake ID in decimal")),
    responses(
        (status = 200, description = "Leaf's shape", body = crate::api::schemas::LeafDecoded),
        (status = 400, description = "`INVALID_ARGUMENT`: missing or bad snowflakeId", body = crate::error::ErrorBody),
    )
)]
pub async fn leaf_decode(
    State(state): State<AppState>,
    params: Result<Query<LeafDecodeParams>, QueryRejection>,
) -> Result<Json<serde_json::Value>, Error> {
    let id = parse_id(&body::query(params)?.snowflake_id)?;
    let parts = state.snowflakes.decode_layout().decompose(id);
    let time = rfc3339(parts.timestamp_ms);
    let time = time.trim_end_matches('Z').replacen('T', " ", 1);
    Ok(Json(serde_json::json!({
        "timestamp": format!("{}({time})", parts.timestamp_ms),
        "workerId": parts.worker.to_string(),
        "sequenceId": parts.sequence.to_string(),
    })))
}

#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct WorkerView {
    pub worker_id: u32,
    pub holder: Option<u64>,
    pub epoch: u64,
    pub window_end_ms: u64,
    pub floor_ms: u64,
    pub last_heartbeat_ms: u64,
}

#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct WorkersView {
    /// The layout recorded in the cluster (null until the first node serving snowflake records it).
    #[schema(value_type = Option<crate::api::schemas::SnowflakeLayout>)]
    #[serde(with = "leafraft_state::records::optional_snowflake_layout")]
    pub layout: Option<leafraft_ids::snowflake::Layout>,
    pub workers: Vec<WorkerView>,
    /// This node's snowflake state (its worker, window, clock check).
    pub this_node: SnowflakeStatus,
}

/// The worker registry, and this node's own snowflake state.
#[utoipa::path(
    get,
    path = "/v1/workers",
    tag = "snowflake",
    summary = "Worker registry",
    responses((status = 200, description = "Every worker ever used: holder, epoch, window; and this node's state",
        body = WorkersView))
)]
pub async fn workers(State(state): State<AppState>) -> Json<WorkersView> {
    let (layout, workers) = state.cluster.read(|sm| {
        let workers = sm
            .snowflake
            .workers
            .iter()
            .map(|(id, lease)| WorkerView {
                worker_id: *id,
                holder: lease.holder,
                epoch: lease.epoch,
                window_end_ms: lease.window_end_ms,
                floor_ms: lease.floor_ms,
                last_heartbeat_ms: lease.last_extend_ms,
            })
            .collect();
        (sm.snowflake.layout, workers)
    });
    Json(WorkersView { layout, workers, this_node: state.snowflakes.status() })
}

/// An operator frees a worker (its holder is gone for good); the next holder starts above the
/// window the old one committed.
#[utoipa::path(
    post,
    path = "/v1/workers/{id}/release",
    tag = "snowflake",
    summary = "Release a worker",
    params(("id" = u32, Path, description = "The worker ID")),
    responses(
        (status = 200, description = "Released; the registry after the release", body = WorkersView),
        (status = 400, description = "`INVALID_ARGUMENT`: bad worker ID", body = crate::error::ErrorBody),
        (status = 401, description = "`UNAUTHORIZED`: missing or wrong secret", body = crate::error::ErrorBody),
        (status = 404, description = "`NOT_FOUND`: the worker was never used", body = crate::error::ErrorBody),
        (status = 503, description = "`WORKER_UNAVAILABLE` (not held, nothing released) or `NO_LEADER`",
            body = crate::error::ErrorBody),
    )
)]
pub async fn release_worker(
    State(state): State<AppState>,
    id: Result<Path<u32>, PathRejection>,
) -> Result<Json<WorkersView>, Error> {
    let worker = body::path(id)?;
    state.snowflakes.release_for_operator(worker).await?;
    Ok(workers(State(state)).await)
}

#[utoipa::path(
    get,
    path = "/v1/clock",
    tag = "snowflake",
    summary = "This node's wall clock",
    responses((status = 200, description = "For peer clock checks (RTT-compensated by the caller)",
        body = crate::api::schemas::Clock))
)]
pub async fn clock(State(state): State<AppState>) -> Json<serde_json::Value> {
    Json(serde_json::json!({ "node_id": state.cluster.node_id(), "now_ms": now_ms() }))
}
