//! `/healthz` (the process runs) and `/readyz` (this node knows a leader and has caught up).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::response::Response;
use axum::Json;
use serde_json::json;

use crate::api::AppState;
use crate::error::Error;

pub async fn healthz() -> Json<serde_json::Value> {
    Json(json!({"status": "ok"}))
}

pub async fn readyz(State(state): State<AppState>) -> Response {
    match state.cluster.readiness() {
        Ok(()) => (StatusCode::OK, Json(json!({"status": "ready"}))).into_response(),
        Err(reason) => Error::not_ready(reason).into_response(),
    }
}
