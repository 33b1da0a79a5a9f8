//! The receiving side: axum routes that decode a peer's Raft RPC, hand it to the local `Raft`
//! and send the whole `Result` back.

use std::future::Future;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::http::HeaderMap;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use openraft::error::InstallSnapshotError;
use openraft::error::RaftError;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::identity::MATCHED_HEADER;
use super::snapshot_guard::SnapshotGuard;
use super::snapshot_guard::SnapshotRefusal;
use super::APPEND_PATH;
use super::SNAPSHOT_PATH;
use super::VOTE_PATH;
use crate::amnesia::Amnesia;
use crate::amnesia::AmnesiaGuard;
use crate::amnesia::AMNESIAC_CODE;
use crate::Raft;
use leafraft_state::codec;
use leafraft_state::typ;
use leafraft_state::NodeId;

/// The largest RPC body accepted: the largest legitimate message (see `codec::MAX_RPC_BYTES`).
/// axum's default (2 MiB) is below openraft's snapshot chunk (3 MiB); a body over the limit would
/// be refused with 413 on every retry and the peer could never catch up.
pub(super) const MAX_BODY_BYTES: usize = codec::MAX_RPC_BYTES;

/// `POST /raft/append`, `/raft/vote` and `/raft/snapshot`, answering with the local `raft`.
///
/// There is no authentication here: the node wraps all of `/raft/*` in its own auth layer.
/// Vote requests pass [`vote_from_member`] first: a candidate outside this node's membership
/// never reaches openraft.
///
/// Appends pass `amnesia` first: one whose leader saw this node match an index its log no longer
/// reaches is refused (409 `MEMBER_AMNESIAC`) and never reaches openraft ([`AmnesiaGuard::admit`]).
pub fn routes(raft: Raft, amnesia: Arc<AmnesiaGuard>) -> Router {
    router(Guarded { raft, amnesia: Some(amnesia) })
}

/// A `RaftRpc` whose votes come from members only and whose appends pass the amnesia check.
#[derive(Clone)]
struct Guarded<R> {
    raft: R,
    amnesia: Option<Arc<AmnesiaGuard>>,
}

impl<R: RaftRpc> RaftRpc for Guarded<R> {
    fn id(&self) -> NodeId {
        self.raft.id()
    }

    fn admit_append(&self, rpc: &typ::AppendEntriesRequest, matched: Option<u64>) -> Result<(), Amnesia> {
        self.amnesia.as_ref().map_or(Ok(()), |amnesia| amnesia.admit(&rpc.vote, matched))
    }

    fn append(
        &self,
        rpc: typ::AppendEntriesRequest,
    ) -> impl Future<Output = Result<typ::AppendEntriesResponse, typ::RaftError>> + Send {
        self.raft.append(rpc)
    }

    async fn vote(&self, rpc: typ::VoteRequest) -> Result<typ::VoteResponse, typ::RaftError> {
        let member = self.raft.may_ask_for_vote(rpc.vote.leader_id.node_id);
        vote_from_member(member, rpc, |rpc| self.raft.vote(rpc)).await
    }

    fn snapshot(
        &self,
        rpc: typ::InstallSnapshotRequest,
    ) -> impl Future<Output = Result<typ::InstallSnapshotResponse, typ::RaftError<typ::InstallSnapshotError>>> + Send
    {
        self.raft.snapshot(rpc)
    }
}

/// Answers a vote request with `vote` when the candidate is a `member`; otherwise with a refusal
/// that changes nothing on either side (the candidate's own vote, not granted). openraft 0.9 has
/// no PreVote: a vote request with a higher term makes even a member that refuses it adopt the
/// term, and a leader step down, so a node outside the membership (removed, or not added yet)
/// must not reach it at all. Shared with the in-process test network, so both refuse alike.
pub async fn vote_from_member<Fut>(
    member: bool,
    rpc: typ::VoteRequest,
    vote: impl FnOnce(typ::VoteRequest) -> Fut,
) -> Result<typ::VoteResponse, typ::RaftError>
where
    Fut: Future<Output = Result<typ::VoteResponse, typ::RaftError>>,
{
    if !member {
        tracing::info!(candidate = rpc.vote.leader_id.node_id, "vote refused: the candidate is not a member");
        return Ok(typ::VoteResponse::new(rpc.vote, None, false));
    }
    vote(rpc).await
}

/// Whether `candidate` may ask this node for its vote: it is a voter of a configuration in this
/// node's membership (either half of a joint one), or this node has no membership yet (a founding
/// member votes for the founder before it hears the first append). Shared with the in-process
/// test network.
pub fn may_ask_for_vote(raft: &Raft, candidate: NodeId) -> bool {
    let metrics = raft.metrics();
    let metrics = metrics.borrow();
    let membership = metrics.membership_config.membership();
    if membership.nodes().next().is_none() {
        return true;
    }
    membership.get_joint_config().iter().any(|config| config.contains(&candidate))
}

/// What the routes call. Production uses `Raft`; tests use a stub, because a real `Raft` needs
/// storage and this crate has none.
pub(super) trait RaftRpc: Clone + Send + Sync + 'static {
    /// This node's ID.
    fn id(&self) -> NodeId;

    /// Whether `candidate` may ask this node for its vote (see [`may_ask_for_vote`]).
    fn may_ask_for_vote(&self, _candidate: NodeId) -> bool {
        true
    }

    /// Whether an append whose leader saw this node match `matched` may reach openraft.
    fn admit_append(&self, _rpc: &typ::AppendEntriesRequest, _matched: Option<u64>) -> Result<(), Amnesia> {
        Ok(())
    }

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
    fn id(&self) -> NodeId {
        self.metrics().borrow().id
    }

    fn may_ask_for_vote(&self, candidate: NodeId) -> bool {
        may_ask_for_vote(self, candidate)
    }

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
    let guard = Arc::new(SnapshotGuard::default());
    Router::new()
        .route(APPEND_PATH, post(append::<R>))
        .route(VOTE_PATH, post(vote::<R>))
        .route(SNAPSHOT_PATH, post(move |State(raft): State<R>, body: Bytes| snapshot(raft, guard, body)))
        // `layer` only wraps the routes added above, so the raised limit stays local to Raft RPCs
        // when the node merges this router into its own.
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(raft)
}

async fn append<R: RaftRpc>(State(raft): State<R>, headers: HeaderMap, body: Bytes) -> Response {
    let rpc: typ::AppendEntriesRequest = match decode_body(&body, raft.id()) {
        Ok(rpc) => rpc,
        Err(reason) => return bad_request(APPEND_PATH, body.len(), reason),
    };
    let matched = headers.get(MATCHED_HEADER).and_then(|value| value.to_str().ok()?.parse().ok());
    if let Err(amnesia) = raft.admit_append(&rpc, matched) {
        let body = serde_json::json!({ "error": { "code": AMNESIAC_CODE, "message": amnesia.to_string() } });
        return (StatusCode::CONFLICT, axum::Json(body)).into_response();
    }
    reply(APPEND_PATH, &raft.append(rpc).await)
}

async fn vote<R: RaftRpc>(State(raft): State<R>, body: Bytes) -> Response {
    handle(VOTE_PATH, &body, raft.id(), |rpc| raft.vote(rpc)).await
}

/// A chunk passes the [`SnapshotGuard`] before openraft writes it into its buffer.
async fn snapshot<R: RaftRpc>(raft: R, guard: Arc<SnapshotGuard>, body: Bytes) -> Response {
    let rpc: typ::InstallSnapshotRequest = match decode_body(&body, raft.id()) {
        Ok(rpc) => rpc,
        Err(reason) => return bad_request(SNAPSHOT_PATH, body.len(), reason),
    };
    match guard.admit(&rpc) {
        Ok(()) => reply(SNAPSHOT_PATH, &raft.snapshot(rpc).await),
        Err(SnapshotRefusal::Mismatch(mismatch)) => {
            let answer: Result<typ::InstallSnapshotResponse, typ::RaftError<typ::InstallSnapshotError>> =
                Err(RaftError::APIError(InstallSnapshotError::SnapshotMismatch(mismatch)));
            reply(SNAPSHOT_PATH, &answer)
        }
        Err(SnapshotRefusal::Invalid(reason)) => bad_request(SNAPSHOT_PATH, body.len(), reason),
    }
}

/// Decodes the body, runs `call` and encodes its whole answer.
///
/// A body that does not decode is answered with 400 and a plain-text reason; the sender maps any
/// non-200 to a network error and retries, so nothing here may panic on hostile input.
async fn handle<Req, Fut>(path: &str, body: &[u8], own: NodeId, call: impl FnOnce(Req) -> Fut) -> Response
where
    Req: DeserializeOwned + FromPeer,
    Fut: Future<Output: Serialize>,
{
    match decode_body::<Req>(body, own) {
        Ok(rpc) => reply(path, &call(rpc).await),
        Err(reason) => bad_request(path, body.len(), reason),
    }
}

/// A body that decodes and does not speak for this node itself.
fn decode_body<Req: DeserializeOwned + FromPeer>(body: &[u8], own: NodeId) -> Result<Req, String> {
    let rpc = codec::decode::<Req>(body).map_err(|e| format!("cannot decode the request body: {e}"))?;
    if rpc.sender() == own {
        // No node sends Raft RPCs to itself; openraft, handed its own leader or candidate ID with
        // another vote, follows itself (a debug assertion fails, release builds go astray).
        return Err(format!("the request speaks for node {own}, which is this node itself"));
    }
    Ok(rpc)
}

/// The node a Raft RPC speaks for: the leader of an append or a snapshot, the candidate of a vote.
trait FromPeer {
    fn sender(&self) -> NodeId;
}

impl FromPeer for typ::AppendEntriesRequest {
    fn sender(&self) -> NodeId {
        self.vote.leader_id.node_id
    }
}

impl FromPeer for typ::VoteRequest {
    fn sender(&self) -> NodeId {
        self.vote.leader_id.node_id
    }
}

impl FromPeer for typ::InstallSnapshotRequest {
    fn sender(&self) -> NodeId {
        self.vote.leader_id.node_id
    }
}

fn bad_request(path: &str, len: usize, reason: String) -> Response {
    tracing::warn!(path, len, %reason, "refused a Raft RPC body");
    (StatusCode::BAD_REQUEST, format!("{path} ({len} bytes): {reason}")).into_response()
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
