//! `/healthz` (the process runs) and `/readyz` (this node knows a leader and has caught up).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::response::Response;
use axum::Json;
use serde_json::json;

use crate::api::AppState;
use crate::error::Error;

#[utoipa::path(
    get,
    path = "/healthz",
    tag = "operations",
    summary = "Liveness",
    responses((status = 200, description = "The process runs", body = crate::api::schemas::Health))
)]
pub async fn healthz() -> Json<serde_json::Value> {
    #[cfg_attr(not(feature = "planted"), allow(unused_mut))]
    let mut body = json!({"status": "ok"});
    #[cfg(feature = "planted")]
    if let Some(bug) = crate::planted::active() {
        body["planted"] = bug.name().into();
    }
    Json(body)
}

/// Ready means segment IDs and reads can be served; the body also says, kind by kind, whether
/// snowflake, time-sequence and monotonic IDs are, and why not (a refused clock does not take the
/// node out of a load balancer).
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "operations",
    summary = "Readiness",
    responses(
        (status = 200, description = "This node knows a leader and has caught up: it serves segment IDs and reads",
            body = crate::api::schemas::Ready),
        (status = 503, description = "`NOT_READY`, with the reason", body = crate::error::ErrorBody,
            example = json!({"error": {"code": "NOT_READY", "message": "no leader known"}})),
    )
)]
pub async fn readyz(State(state): State<AppState>) -> Response {
    // A cluster whose members all run a newer release than its version is about to raise it:
    // reported not ready until it has, so a new cluster answers at its founders' release from
    // its first ready moment (requests are served meanwhile; those that need the version wait).
    let settled = |()| state.cluster.cluster_version_settling().map_or(Ok(()), Err);
    match state.cluster.readiness().and_then(settled) {
        Ok(()) => {
            let snowflake = state.snowflakes.status();
            let snowflake = match (&snowflake.refused, snowflake.worker_id) {
                (Some(reason), _) => json!({"ready": false, "reason": reason}),
                (None, Some(worker)) => json!({"ready": true, "worker_id": worker}),
                (None, None) => json!({"ready": false, "reason": "no worker acquired yet"}),
            };
            let timeseq = match state.timeseq.clock().refusal() {
                None => json!({"ready": true}),
                Some(refused) => json!({"ready": false, "reason": refused.message}),
            };
            let monotonic = match state.cluster.metrics().current_leader {
                Some(_) => json!({"ready": true}),
                None => json!({"ready": false, "reason": "no leader known"}),
            };
            let body = json!({
                "status": "ready",
                "segment": {"ready": true},
                "snowflake": snowflake,
                "timeseq": timeseq,
                "monotonic": monotonic,
            });
            (StatusCode::OK, Json(body)).into_response()
        }
        Err(reason) => Error::not_ready(reason).into_response(),
    }
}
