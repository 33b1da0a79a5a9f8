//! The receiving side: axum routes that decode a peer's Raft RPC, hand it to the local `Raft`
//! and send the whole `Result` back.

use std::future::Future;

use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::APPEND_PATH;
use super::SNAPSHOT_PATH;
use super::VOTE_PATH;
use crate::codec;
use crate::typ;
use crate::Raft;

/// The largest RPC body accepted. axum's default (2 MiB) is below openraft's default snapshot
/// chunk (3 MiB), and a batch of `max_payload_entries` entries can be large too; a body over the
/// limit would be refused with 413 on every retry and the peer could never catch up.
pub(super) const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

/// `POST /raft/append`, `/raft/vote` and `/raft/snapshot`, answering with the local `raft`.
///
/// There is no authentication here: the node wraps all of `/raft/*` in its own auth layer.
pub fn routes(raft: Raft) -> Router {
    router(raft)
}

/// What the routes call. Production uses `Raft`; tests use a stub, because a real `Raft` needs
/// storage and this crate has none.
pub(super) trait RaftRpc: Clone + Send + Sync + 'static {
    fn append(
        &self,
        rpc: typ::AppendEntriesRequest,
    ) -> impl Future<Output = Result<typ::AppendEntriesResponse, typ::RaftError>> + Send;

    fn vote(&self, rpc: typ::VoteRequest) -> impl Future<Output = Result<typ::VoteResponse, typ::RaftError>> + Send;

    fn snapshot(
        &self,
        rpc: typ::InstallSnapshotRequest,
    ) -> impl Future<Output = Result<typ::InstallSnapshotResponse, typ::RaftError<typ::InstallSnapshotError>>> + Send;
}

impl RaftRpc for Raft {
    async fn append(&self, rpc: typ::AppendEntriesRequest) -> Result<typ::AppendEntriesResponse, typ::RaftError> {
        self.append_entries(rpc).await
    }

    async fn vote(&self, rpc: typ::VoteRequest) -> Result<typ::VoteResponse, typ::RaftError> {
        Raft::vote(self, rpc).await
    }

    async fn snapshot(
        &self,
        rpc: typ::InstallSnapshotRequest,
    ) -> Result<typ::InstallSnapshotResponse, typ::RaftError<typ::InstallSnapshotError>> {
        self.install_snapshot(rpc).await
    }
}

pub(super) fn router<R: RaftRpc>(raft: R) -> Router {
    Router::new()
        .route(APPEND_PATH, post(append::<R>))
        .route(VOTE_PATH, post(vote::<R>))
        .route(SNAPSHOT_PATH, post(snapshot::<R>))
        // `layer` only wraps the routes added above, so the raised limit stays local to Raft RPCs
        // when the node merges this router into its own.
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(raft)
}

async fn append<R: RaftRpc>(State(raft): State<R>, body: Bytes) -> Response {
    handle(APPEND_PATH, &body, |rpc| raft.append(rpc)).await
}

async fn vote<R: RaftRpc>(State(raft): State<R>, body: Bytes) -> Response {
    handle(VOTE_PATH, &body, |rpc| raft.vote(rpc)).await
}

async fn snapshot<R: RaftRpc>(State(raft): State<R>, body: Bytes) -> Response {
    handle(SNAPSHOT_PATH, &body, |rpc| raft.snapshot(rpc)).await
}

/// Decodes the body, runs `call` and encodes its whole answer.
///
/// A body that does not decode is answered with 400 and a plain-text reason; the sender maps any
/// non-200 to a network error and retries, so nothing here may panic on hostile input.
async fn handle<Req, Fut>(path: &str, body: &[u8], call: impl FnOnce(Req) -> Fut) -> Response
where
    Req: DeserializeOwned,
    Fut: Future<Output: Serialize>,
{
    match codec::decode::<Req>(body) {
        Ok(rpc) => reply(path, &call(rpc).await),
        Err(e) => {
            tracing::warn!(path, len = body.len(), error = %e, "undecodable Raft RPC body");
            let reason = format!("cannot decode the {path} request body ({} bytes): {e}", body.len());
            (StatusCode::BAD_REQUEST, reason).into_response()
        }
    }
}

/// The whole `Result` goes back in a 200, so the sender can tell a Raft error (remote) from a
/// transport failure (any other status).
fn reply<T: Serialize>(path: &str, answer: &T) -> Response {
    match codec::encode(answer) {
        Ok(bytes) => ([(CONTENT_TYPE, "application/octet-stream")], bytes).into_response(),
        Err(e) => {
            // Not reachable with openraft's types (they all encode); answered rather than
            // panicking, and the sender treats it as a network error.
            tracing::error!(path, error = %e, "cannot encode a Raft RPC answer");
            (StatusCode::INTERNAL_SERVER_ERROR, format!("cannot encode the {path} answer: {e}")).into_response()
        }
    }
}
