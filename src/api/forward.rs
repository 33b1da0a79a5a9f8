//! The receiving end of the protocol between nodes (`cluster::forward`): `POST /raft/forward`
//! runs a forwarded operation on this node's `Cluster`, `POST /raft/hello` says who this node is,
//! `POST /raft/confirm` answers the vote it has saved.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use leafraft_state::typ;

use crate::cluster::check_addr;
use crate::cluster::forward::CONFIRM_PATH;
use crate::cluster::forward::FORWARD_PATH;
use crate::cluster::forward::HELLO_PATH;
use crate::cluster::forward::MAX_FORWARD_BYTES;
use crate::cluster::Cluster;
use crate::cluster::ForwardError;
use crate::cluster::Forwarded;
use crate::cluster::ForwardedReply;

/// `POST /raft/forward`, `POST /raft/hello` and `POST /raft/confirm`, answering with the local `cluster`: the
/// receiving end of `cluster::HttpPeers`. The caller wraps them in the node's authentication and
/// identity check.
pub fn routes(cluster: Arc<Cluster>) -> Router {
    Router::new()
        .route(FORWARD_PATH, post(receive).layer(DefaultBodyLimit::max(MAX_FORWARD_BYTES)))
        .route(HELLO_PATH, post(hello))
        .route(CONFIRM_PATH, post(saved_vote))
        .with_state(cluster)
}

/// `POST /raft/confirm` (body: the asking leader's vote): the vote this node has saved, read now.
/// It answers no more than that: whether the read confirms the leader's term is the leader's
/// judgement (`monotonic::confirm`).
async fn saved_vote(State(cluster): State<Arc<Cluster>>, body: Bytes) -> Response {
    let leader: typ::Vote = match leafraft_state::codec::decode(&body) {
        Ok(leader) => leader,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("bad confirm request: {e}")).into_response(),
    };
    if leader.leader_id.node_id == cluster.node_id() {
        return (StatusCode::BAD_REQUEST, "the confirm request speaks for this node itself").into_response();
    }
    match leafraft_state::codec::encode(&cluster.saved_vote()) {
        Ok(bytes) => ([(CONTENT_TYPE, "application/octet-stream")], bytes).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("cannot encode the saved vote: {e}")).into_response(),
    }
}

/// `POST /raft/hello` (empty body): this node's identity, cluster ID, whether it has a Raft
/// state, and the members it knows, bincode-encoded.
async fn hello(State(cluster): State<Arc<Cluster>>) -> Response {
    match leafraft_state::codec::encode(&cluster.hello_answer()) {
        Ok(bytes) => ([(CONTENT_TYPE, "application/octet-stream")], bytes).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("cannot encode hello: {e}")).into_response(),
    }
}

async fn receive(State(cluster): State<Arc<Cluster>>, body: Bytes) -> Response {
    let op: Forwarded = match leafraft_state::codec::decode(&body) {
        Ok(op) => op,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("bad forwarded request: {e}")).into_response(),
    };
    if let Forwarded::AddLearner { addr, .. } = &op {
        if let Err(e) = check_addr(addr) {
            return (StatusCode::BAD_REQUEST, format!("bad forwarded request: {e}")).into_response();
        }
    }
    let reply: Result<ForwardedReply, ForwardError> = cluster.execute_forwarded(op).await;
    match leafraft_state::codec::encode(&reply) {
        Ok(bytes) => ([(CONTENT_TYPE, "application/octet-stream")], bytes).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("cannot encode reply: {e}")).into_response(),
    }
}
