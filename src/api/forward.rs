//! `POST /raft/forward`: a write or membership change another node forwards to this one, the
//! leader it believes in. Bodies are bincode, like every `/raft/*` route.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::response::Response;

use crate::api::AppState;
use crate::cluster::ForwardError;
use crate::cluster::Forwarded;

pub async fn forward(State(state): State<AppState>, body: Bytes) -> Response {
    let op: Forwarded = match raft::codec::decode(&body) {
        Ok(op) => op,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("bad forwarded request: {e}")).into_response(),
    };
    let reply: Result<_, ForwardError> = state.cluster.execute_forwarded(op).await;
    match raft::codec::encode(&reply) {
        Ok(bytes) => ([(CONTENT_TYPE, "application/octet-stream")], bytes).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("cannot encode reply: {e}")).into_response(),
    }
}
