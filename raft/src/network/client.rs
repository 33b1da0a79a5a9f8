//! The sending side: [`post_bincode`], the one HTTP transport between nodes, and the Raft
//! transport ([`NetworkFactory`], [`Connection`]) built on it, which only carries the RPCs:
//! openraft's network is [`crate::GuardedNetwork`] over it.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::InstallSnapshotError;
use openraft::error::NetworkError;
use openraft::error::RPCError;
use openraft::error::RemoteError;
use openraft::error::Unreachable;
use openraft::network::RPCOption;
use reqwest::header::CONTENT_TYPE;
use reqwest::StatusCode;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::identity::Addressee;
use super::identity::IdentityCheck;
use super::identity::PeerIdentity;
use super::identity::MATCHED_HEADER;
use super::APPEND_PATH;
use super::SNAPSHOT_PATH;
use super::VOTE_PATH;
use crate::amnesia::AMNESIAC_CODE;
use crate::guarded::Appended;
use crate::guarded::Link;
use crate::guarded::Transport;
use leafraft_state::codec;
use leafraft_state::typ;
use leafraft_state::Node;
use leafraft_state::NodeId;

const OCTET_STREAM: &str = "application/octet-stream";

/// How much of a non-200 answer's body goes into [`PostError::Status`]: enough for the peer's
/// one-line reason, bounded so a misconfigured peer (say, an HTML error page) cannot flood logs.
const MAX_ERROR_BODY_CHARS: usize = 512;

/// Why a [`post_bincode`] call failed. The variants differ in what the caller may conclude about
/// delivery, which is what decides whether a write may be sent elsewhere.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PostError {
    /// No connection could be made: the request was certainly not delivered.
    #[error("cannot connect: {0}")]
    Connect(String),
    /// No complete answer within the timeout: the peer may or may not have acted on the request.
    #[error("timed out: {0}")]
    Timeout(String),
    /// The peer answered with a status other than 200 (e.g. 401 for a wrong secret, 400 for a
    /// body it could not decode, 413 for a body over its limit).
    #[error("peer answered HTTP {status}: {body}")]
    Status { status: u16, body: String },
    /// The peer refused this node's identity (409 `CLUSTER_MISMATCH`), or this node refused the
    /// identity the peer answered with: the two are not members of one cluster as each knows it.
    #[error("identity refused: {0}")]
    Refused(String),
    /// A 200 whose body is not the expected type: usually peers of incompatible versions.
    #[error("cannot decode the answer: {0}")]
    Decode(String),
    /// Anything else (request could not be encoded or built, connection lost mid-request, ...);
    /// delivery is unknown.
    #[error("{0}")]
    Other(String),
}

impl PostError {
    /// True when the request certainly did not reach the peer, so it is safe to send it again
    /// (to the same or another node) without risking that it is applied twice.
    pub fn is_connect(&self) -> bool {
        matches!(self, PostError::Connect(_))
    }
}

/// POSTs `body` encoded with [`codec::encode`] to `url` and decodes a 200 answer as `Resp`.
///
/// Sends `Authorization: Bearer <secret>` when `secret` is set; `timeout` bounds the whole
/// exchange, answer body included. Nothing is retried here, timeouts least of all: a timed-out
/// request may have been applied, and only the caller knows whether repeating it is safe.
pub async fn post_bincode<Req: Serialize, Resp: DeserializeOwned>(
    client: &reqwest::Client,
    url: &str,
    secret: Option<&str>,
    body: &Req,
    timeout: Duration,
) -> Result<Resp, PostError> {
    post(client, url, secret, None, &[], body, timeout).await.map(|exchanged| exchanged.answer)
}

/// Who sends a [`post_bincode_as`], and whom it means to reach.
#[derive(Debug, Clone, Copy)]
pub struct Sender<'a> {
    pub identity: &'a IdentityCheck,
    /// The node the sender means to reach and the incarnation its membership records for it (0:
    /// unknown), when it knows them; `None` for a peer known only by its address.
    pub target: Option<(NodeId, u64)>,
}

/// [`post_bincode`] between members: sends this node's identity headers and refuses an answer
/// whose identity does not match (`PostError::Refused`, counted and logged once).
pub async fn post_bincode_as<Req: Serialize, Resp: DeserializeOwned>(
    client: &reqwest::Client,
    url: &str,
    secret: Option<&str>,
    sender: Sender<'_>,
    body: &Req,
    timeout: Duration,
) -> Result<Resp, PostError> {
    post(client, url, secret, Some(sender), &[], body, timeout).await.map(|exchanged| exchanged.answer)
}

/// A decoded answer and what its headers said beside it.
struct Exchanged<Resp> {
    answer: Resp,
}

async fn post<Req: Serialize, Resp: DeserializeOwned>(
    client: &reqwest::Client,
    url: &str,
    secret: Option<&str>,
    sender: Option<Sender<'_>>,
    extra: &[(&'static str, String)],
    body: &Req,
    timeout: Duration,
) -> Result<Exchanged<Resp>, PostError> {
    let bytes =
        codec::encode(body).map_err(|e| PostError::Other(format!("POST {url}: cannot encode the body: {e}")))?;
    let mut request = client.post(url).header(CONTENT_TYPE, OCTET_STREAM).body(bytes).timeout(timeout);
    if let Some(secret) = secret {
        request = request.bearer_auth(secret);
    }
    if let Some(sender) = &sender {
        let mut headers = reqwest::header::HeaderMap::new();
        sender.identity.local().write_headers(&mut headers);
        if let Some((node_id, incarnation)) = sender.target {
            Addressee { node_id, incarnation }.write_headers(&mut headers);
        }
        // Release versions: what this node knows of every member's (read by a follower
        // from its leader's appends).
        if let Some(relay) = sender.identity.versions().relay_header(sender.identity.local().node_id) {
            headers.insert(super::versions::MEMBER_VERSIONS_HEADER, relay);
        }
        request = request.headers(headers);
    }
    for (name, value) in extra {
        request = request.header(*name, value);
    }
    let response = request.send().await.map_err(|e| transport_error(url, &e))?;
    let status = response.status();
    if let Some(sender) = &sender {
        check_responder_certificate(url, sender, &response)?;
        check_responder(url, sender, response.headers())?;
    }
    if status != StatusCode::OK {
        let body = match read_at_most(response, 4 * MAX_ERROR_BODY_CHARS).await {
            Ok((bytes, _)) => truncate(String::from_utf8_lossy(&bytes).trim()),
            Err(e) => format!("(body unreadable: {})", error_chain(&e)),
        };
        // Only the identity check of a peer's `/raft/*` layer answers 409 there, with the API's
        // error body; its message is what an operator needs.
        if status == StatusCode::CONFLICT && sender.is_some() {
            let answer = serde_json::from_str::<serde_json::Value>(&body).ok();
            let field = |name: &str| answer.as_ref().and_then(|v| v.pointer(name)?.as_str().map(str::to_string));
            let message = field("/error/message").unwrap_or(body);
            // A follower that found its own log gone back in time (`crate::amnesia`) says so.
            let amnesiac = field("/error/code").filter(|code| code == AMNESIAC_CODE).map(|code| format!(" {code}:"));
            return Err(PostError::Refused(format!(
                "POST {url}: refused by the peer:{} {message}",
                amnesiac.unwrap_or_default()
            )));
        }
        return Err(PostError::Status { status: status.as_u16(), body });
    }
    let (answer, complete) =
        read_at_most(response, codec::MAX_RPC_BYTES).await.map_err(|e| transport_error(url, &e))?;
    if !complete {
        return Err(PostError::Decode(format!("POST {url}: the answer is over {} bytes", codec::MAX_RPC_BYTES)));
    }
    let answer = codec::decode(&answer).map_err(|e| PostError::Decode(format!("POST {url}: {e}")))?;
    Ok(Exchanged { answer })
}

/// With mutual TLS between members, refuses an answer over TLS whose certificate does not name the
/// node the request meant to reach (a certificate of the right CA at another member's address).
fn check_responder_certificate(url: &str, sender: &Sender<'_>, response: &reqwest::Response) -> Result<(), PostError> {
    let (Some((node_id, _)), Some(names)) = (sender.target, sender.identity.certificate_names()) else {
        return Ok(());
    };
    let Some(info) = response.extensions().get::<reqwest::tls::TlsInfo>() else {
        return Ok(());
    };
    if info.peer_certificate().is_some_and(|der| names(der, node_id)) {
        return Ok(());
    }
    tracing::warn!(
        url,
        node_id,
        "refused an answer: the peer's certificate does not name the node the request was for"
    );
    Err(PostError::Refused(format!("POST {url}: the peer's certificate does not name node {node_id}")))
}

/// Refuses an answer from a peer that is not who the sender meant to reach.
fn check_responder(url: &str, sender: &Sender<'_>, headers: &reqwest::header::HeaderMap) -> Result<(), PostError> {
    let peer = match PeerIdentity::from_headers(headers) {
        Ok(Some(peer)) => peer,
        Ok(None) => return Ok(()),
        Err(e) => return Err(PostError::Decode(format!("POST {url}: {e}"))),
    };
    sender.identity.check_responder(&peer, sender.target).map_err(|mismatch| {
        sender.identity.refused(&format!("the answer to POST {url}"), &mismatch);
        PostError::Refused(format!("POST {url}: {mismatch}"))
    })?;
    // Release versions: the leader hears every member in the answers to its appends.
    sender.identity.versions().heard(peer.node_id, headers);
    Ok(())
}

/// Reads the body up to `limit` bytes; `false` when there was more (then the rest is not read,
/// so a peer that is not leafraft cannot make this node buffer an unbounded answer).
async fn read_at_most(mut response: reqwest::Response, limit: usize) -> Result<(Vec<u8>, bool), reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len() + chunk.len() > limit {
            body.extend_from_slice(&chunk[..limit - body.len()]);
            return Ok((body, false));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, true))
}

/// Classifies a reqwest error by what it says about delivery.
fn transport_error(url: &str, e: &reqwest::Error) -> PostError {
    let msg = format!("POST {url}: {}", error_chain(e));
    // Connect is checked first: a connect attempt that timed out is both, and it still never
    // delivered the request.
    if e.is_connect() {
        PostError::Connect(msg)
    } else if e.is_timeout() {
        PostError::Timeout(msg)
    } else {
        PostError::Other(msg)
    }
}

/// reqwest's own message is only "error sending request for url (...)"; the cause that tells an
/// operator what happened ("Connection refused") is further down the source chain.
fn error_chain(e: &dyn StdError) -> String {
    let mut msg = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        msg.push_str(": ");
        msg.push_str(&cause.to_string());
        source = cause.source();
    }
    msg
}

fn truncate(text: &str) -> String {
    match text.char_indices().nth(MAX_ERROR_BODY_CHARS) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_string(),
    }
}

/// Creates a [`Connection`] per target: the HTTP [`Transport`] under openraft's network
/// ([`crate::GuardedNetwork`] adds the amnesia rules). Holds the process's one pooled
/// `reqwest::Client` (cloning it shares the pool), so every RPC to a peer reuses a kept-alive
/// connection instead of paying a TCP handshake.
#[derive(Clone)]
pub struct NetworkFactory {
    client: reqwest::Client,
    secret: Option<Arc<str>>,
    identity: Arc<IdentityCheck>,
    /// `http` or `https`: every member of a cluster speaks the same (the members' addresses are
    /// `host:port`).
    scheme: &'static str,
}

impl NetworkFactory {
    pub fn new(client: reqwest::Client, secret: Option<Arc<str>>, identity: Arc<IdentityCheck>) -> Self {
        Self { client, secret, identity, scheme: "http" }
    }

    /// Reach the peers over `https://` (the client must carry the TLS configuration).
    pub fn with_tls(mut self, tls: bool) -> Self {
        self.scheme = if tls { "https" } else { "http" };
        self
    }
}

// Hand-written so the secret never ends up in a log line.
impl fmt::Debug for NetworkFactory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NetworkFactory").field("secret", &self.secret.as_ref().map(|_| "<redacted>")).finish()
    }
}

impl Transport for NetworkFactory {
    type Link = Connection;

    /// Connects lazily: the first RPC opens (or reuses) a pooled connection, so a peer that is
    /// down when openraft asks for a client costs nothing until it is used.
    async fn link(&mut self, target: NodeId, node: &Node) -> Connection {
        let base = format!("{}://{}", self.scheme, node.addr);
        Connection {
            client: self.client.clone(),
            secret: self.secret.clone(),
            identity: Arc::clone(&self.identity),
            target,
            target_incarnation: node.incarnation,
            append_url: format!("{base}{APPEND_PATH}"),
            vote_url: format!("{base}{VOTE_PATH}"),
            snapshot_url: format!("{base}{SNAPSHOT_PATH}"),
        }
    }
}

/// The HTTP [`Link`] to one peer.
pub struct Connection {
    client: reqwest::Client,
    secret: Option<Arc<str>>,
    identity: Arc<IdentityCheck>,
    target: NodeId,
    /// What the membership openraft replicates with records for the target (0: unknown).
    target_incarnation: u64,
    append_url: String,
    vote_url: String,
    snapshot_url: String,
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("target", &self.target)
            .field("vote_url", &self.vote_url)
            .field("secret", &self.secret.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// One RPC's outcome: the answer, and the reason when the peer refused as amnesiac.
type Called<Resp, E> = (Result<Resp, typ::RPCError<E>>, Option<String>);

impl Connection {
    /// One RPC: the answer is the peer's `Result<Resp, RaftError<E>>`, unwrapped into openraft's
    /// error taxonomy.
    async fn call<Req, Resp, E>(&self, url: &str, rpc: &Req, option: &RPCOption) -> Result<Resp, typ::RPCError<E>>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: StdError + DeserializeOwned,
    {
        self.call_with(url, rpc, &[], option).await.0
    }

    /// [`Connection::call`], with `extra` headers and the reason of an amnesiac refusal.
    async fn call_with<Req, Resp, E>(
        &self,
        url: &str,
        rpc: &Req,
        extra: &[(&'static str, String)],
        option: &RPCOption,
    ) -> Called<Resp, E>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: StdError + DeserializeOwned,
    {
        let sender = Sender { identity: &self.identity, target: Some((self.target, self.target_incarnation)) };
        let exchanged =
            post(&self.client, url, self.secret.as_deref(), Some(sender), extra, rpc, option.hard_ttl()).await;
        let exchanged: Exchanged<Result<Resp, typ::RaftError<E>>> = match exchanged {
            Ok(exchanged) => exchanged,
            Err(e) => {
                // A follower that found its own log gone back in time says so in its refusal.
                let amnesiac = match &e {
                    PostError::Refused(reason) if reason.contains(AMNESIAC_CODE) => Some(reason.clone()),
                    _ => None,
                };
                return (Err(rpc_error(e)), amnesiac);
            }
        };
        // The peer's Raft answered with an error (e.g. it has stopped): the transport worked, so
        // it is a remote error, which openraft handles differently from a lost message.
        let answer = exchanged.answer.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)));
        (answer, None)
    }
}

/// openraft's view of a failed exchange.
fn rpc_error<E: StdError>(e: PostError) -> typ::RPCError<E> {
    if e.is_connect() || matches!(e, PostError::Refused(_)) {
        // A peer that refuses connections is down or not started yet. `Unreachable` makes
        // openraft wait `backoff()` before the next attempt; `Network` would make it retry at
        // once, hot-looping and flooding the log with errors for as long as the peer stays down.
        RPCError::Unreachable(Unreachable::new(&e))
    } else {
        // Timeouts, non-200 answers and undecodable bodies: the peer is up but this attempt
        // failed, so openraft may retry without backing off.
        RPCError::Network(NetworkError::new(&e))
    }
}

impl Link for Connection {
    async fn append(&mut self, rpc: &typ::AppendEntriesRequest, matched: Option<u64>, option: &RPCOption) -> Appended {
        let extra: Vec<_> = matched.map(|index| (MATCHED_HEADER, index.to_string())).into_iter().collect();
        let (answer, amnesiac) = self.call_with(&self.append_url, rpc, &extra, option).await;
        Appended { answer, amnesiac }
    }

    async fn snapshot(
        &mut self,
        rpc: typ::InstallSnapshotRequest,
        option: RPCOption,
    ) -> Result<typ::InstallSnapshotResponse, typ::RPCError<InstallSnapshotError>> {
        self.call(&self.snapshot_url, &rpc, &option).await
    }

    async fn vote(&mut self, rpc: typ::VoteRequest, option: RPCOption) -> Result<typ::VoteResponse, typ::RPCError> {
        self.call(&self.vote_url, &rpc, &option).await
    }
}
