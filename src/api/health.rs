//! `/healthz` (the process runs) and `/readyz` (this node knows a leader and has caught up; with
//! `?mode=serving`, or it can still serve IDs from what it holds: the client Service's probe).

use axum::extract::Query;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::response::Response;
use axum::Json;
use serde::Deserialize;
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

/// `?mode=`: `strict` (the default) or `serving`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ReadyQuery {
    /// `strict` (default): knows a leader and has caught up. `serving`: also ready while it has
    /// been ready since start, is not removed, and holds segment IDs or a snowflake window to
    /// serve from (the degraded mode at quorum loss; the client Service's readiness probe).
    mode: Option<String>,
}

/// Ready means segment IDs and reads can be served; the body also says, kind by kind, whether
/// snowflake, time-sequence and monotonic IDs are, and why not (a refused clock does not take the
/// node out of a load balancer).
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "operations",
    summary = "Readiness",
    params(ReadyQuery),
    responses(
        (status = 200, description = "This node knows a leader and has caught up: it serves segment IDs and reads \
            (with `mode=serving`: or it still serves IDs from its buffers and window, `status` `degraded`)",
            body = crate::api::schemas::Ready),
        (status = 503, description = "`NOT_READY`, with the reason", body = crate::error::ErrorBody,
            example = json!({"error": {"code": "NOT_READY", "message": "no leader known"}})),
    )
)]
pub async fn readyz(State(state): State<AppState>, Query(query): Query<ReadyQuery>) -> Response {
    let serving = match query.mode.as_deref() {
        None | Some("strict") => false,
        Some("serving") => true,
        Some(other) => {
            return Error::invalid(format!("mode must be strict or serving, got '{other}'")).into_response();
        }
    };
    // A cluster whose members all run a newer release than its version is about to raise it:
    // reported not ready until it has, so a new cluster answers at its founders' release from
    // its first ready moment (requests are served meanwhile; those that need the version wait).
    let settled = |()| state.cluster.cluster_version_settling().map_or(Ok(()), Err);
    let (status, degraded) = match state.cluster.readiness().and_then(settled) {
        Ok(()) => ("ready", None),
        Err(reason) if serving => match still_serving(&state, &reason) {
            Ok(()) => ("degraded", Some(reason)),
            Err(reason) => return Error::not_ready(reason).into_response(),
        },
        Err(reason) => return Error::not_ready(reason).into_response(),
    };
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
    let mut body = json!({
        "status": status,
        "segment": {"ready": true},
        "snowflake": snowflake,
        "timeseq": timeseq,
        "monotonic": monotonic,
    });
    if let Some(reason) = degraded {
        body["reason"] = reason.into();
    }
    (StatusCode::OK, Json(body)).into_response()
}

/// `mode=serving` when the strict readiness failed for `reason`: `Ok` while this node serves IDs
/// from what it holds (it has been ready since it started, is still a member as far as it knows,
/// and has segment IDs buffered or a snowflake window open), so that a quorum loss does not take
/// every pod out of the client Service (docs/operations.md, "Without quorum").
fn still_serving(state: &AppState, reason: &str) -> Result<(), String> {
    state.cluster.ensure_serving().map_err(|e| e.to_string())?;
    let buffered: u64 = state.segments.stats().tags.iter().map(|tag| tag.ids_left).sum();
    let snowflake = state.snowflakes.status();
    let window_open =
        snowflake.refused.is_none() && snowflake.window_end_ms.is_some_and(|end| end > crate::clock::now_ms());
    if buffered > 0 || window_open {
        Ok(())
    } else {
        Err(format!("{reason}; nothing left to serve from (no buffered segment IDs, no snowflake window)"))
    }
}
