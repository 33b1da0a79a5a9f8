//! Tests of the Raft network against stub HTTP servers on 127.0.0.1 (a real `Raft` needs storage,
//! which this crate does not have): error mapping on the client, the wire format end to end, and
//! the server's handling of bad bodies and large snapshot chunks.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::header::AUTHORIZATION;
use axum::http::header::CONTENT_TYPE;
use axum::http::HeaderMap;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use openraft::error::Fatal;
use openraft::error::RPCError;
use openraft::error::RaftError;
use openraft::network::RPCOption;
use openraft::testing::log_id;
use openraft::EntryPayload;
use openraft::RaftNetwork;
use openraft::RaftNetworkFactory;
use openraft::Vote;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use super::server::router;
use super::server::RaftRpc;
use super::*;
use crate::guarded::GuardedConnection;
use crate::GuardedNetwork;
use leafraft_state::codec;
use leafraft_state::typ;
use leafraft_state::Request;

const TARGET: u64 = 2;

/// Serves `router` on a fresh loopback port. The listener is bound before this returns, so
/// connections made right after are queued by the kernel: no sleep is needed.
async fn serve(router: Router) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind a loopback port");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}

/// A stub server with one handler on `path`.
async fn serve_one<H, T>(path: &str, handler: H) -> SocketAddr
where
    H: axum::handler::Handler<T, ()>,
    T: 'static,
{
    serve(Router::new().route(path, post(handler))).await
}

/// openraft's client to node 2 at `addr` over HTTP, as a node without an amnesia guard
/// builds it.
async fn connect(addr: SocketAddr, secret: Option<&str>) -> GuardedConnection<Connection> {
    let identity = Arc::new(IdentityCheck::new(1, 11));
    let http = NetworkFactory::new(reqwest::Client::new(), secret.map(Arc::from), identity);
    let mut factory = GuardedNetwork::new(http, None);
    factory.new_client(TARGET, &leafraft_state::Node::new(addr.to_string(), 7)).await
}

fn option() -> RPCOption {
    RPCOption::new(Duration::from_secs(10))
}

fn vote_request() -> typ::VoteRequest {
    typ::VoteRequest::new(Vote::new(3, 1), Some(log_id(2, 1, 10)))
}

fn octet_stream(bytes: Vec<u8>) -> Response {
    ([(CONTENT_TYPE, "application/octet-stream")], bytes).into_response()
}

/// A stub peer that answers a vote by granting it, as `Raft::vote` would encode it.
async fn grant_vote(body: Bytes) -> Response {
    let rpc: typ::VoteRequest = codec::decode(&body).expect("a VoteRequest body");
    let answer: Result<typ::VoteResponse, typ::RaftError> = Ok(typ::VoteResponse::new(rpc.vote, rpc.last_log_id, true));
    octet_stream(codec::encode(&answer).expect("encode"))
}

/// A loopback port on which nothing listens: bound, then released.
fn closed_port() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    listener.local_addr().expect("local addr")
}

/// (a) A peer that is down must be `Unreachable`, so openraft backs off instead of hot-looping.
#[tokio::test]
async fn connect_refused_is_unreachable() {
    let addr = closed_port();
    let err = connect(addr, None).await.vote(vote_request(), option()).await.expect_err("nothing listens");
    assert!(matches!(err, RPCError::Unreachable(_)), "{err:?}");
    assert!(err.to_string().contains(&addr.to_string()), "names the peer: {err}");

    let url = format!("http://{addr}/raft/vote");
    let err = post_bincode::<_, typ::VoteResponse>(
        &reqwest::Client::new(),
        &url,
        None,
        &vote_request(),
        Duration::from_secs(10),
    )
    .await
    .expect_err("nothing listens");
    assert!(err.is_connect(), "{err:?}");
}

/// (b) A 200 whose body is not the expected answer is a transport failure, not a Raft answer.
#[tokio::test]
async fn garbage_answer_is_network_error() {
    let addr = serve_one(VOTE_PATH, || async { octet_stream(b"garbage, not bincode".to_vec()) }).await;
    let err = connect(addr, None).await.vote(vote_request(), option()).await.expect_err("garbage");
    assert!(matches!(err, RPCError::Network(_)), "{err:?}");
    assert!(err.to_string().contains("decode"), "{err}");
}

/// (c) A 401 (wrong or missing secret) is a network error whose message says what happened, so an
/// operator who misconfigured the secret sees it in the leader's log.
#[tokio::test]
async fn unauthorized_is_network_error_with_status_and_body() {
    let addr = serve_one(VOTE_PATH, || async { (StatusCode::UNAUTHORIZED, "missing or wrong secret") }).await;
    let err = connect(addr, Some("wrong")).await.vote(vote_request(), option()).await.expect_err("401");
    assert!(matches!(err, RPCError::Network(_)), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("401") && msg.contains("missing or wrong secret"), "{msg}");
}

/// (d) An error produced by the peer's Raft travels inside a 200 and comes back as a
/// `RemoteError` from the target, exactly as the peer's `Raft` returned it.
#[tokio::test]
async fn raft_error_from_peer_is_remote_error() {
    let addr = serve_one(VOTE_PATH, |body: Bytes| async move {
        let _rpc: typ::VoteRequest = codec::decode(&body).expect("a VoteRequest body");
        let answer: Result<typ::VoteResponse, typ::RaftError> = Err(RaftError::Fatal(Fatal::Stopped));
        octet_stream(codec::encode(&answer).expect("encode"))
    })
    .await;
    let err = connect(addr, None).await.vote(vote_request(), option()).await.expect_err("stopped");
    match err {
        RPCError::RemoteError(remote) => {
            assert_eq!(remote.target, TARGET);
            assert_eq!(remote.source, RaftError::Fatal(Fatal::Stopped));
        }
        other => panic!("expected RemoteError, got {other:?}"),
    }
}

/// (e) `post_bincode` round-trips a real openraft message and its answer; also checks the
/// content type a peer sees.
#[tokio::test]
async fn post_bincode_round_trips_vote() {
    let addr = serve_one(VOTE_PATH, |headers: HeaderMap, body: Bytes| async move {
        assert_eq!(headers[CONTENT_TYPE], "application/octet-stream");
        let rpc: typ::VoteRequest = codec::decode(&body).expect("a VoteRequest body");
        octet_stream(codec::encode(&typ::VoteResponse::new(rpc.vote, rpc.last_log_id, true)).expect("encode"))
    })
    .await;
    let url = format!("http://{addr}{VOTE_PATH}");
    let rpc = vote_request();
    let answer: typ::VoteResponse =
        post_bincode(&reqwest::Client::new(), &url, None, &rpc, Duration::from_secs(10)).await.expect("answer");
    assert_eq!(answer, typ::VoteResponse::new(rpc.vote, rpc.last_log_id, true));
}

/// (f) The secret goes out as a bearer token when configured, and no Authorization header is sent
/// otherwise.
#[tokio::test]
async fn secret_is_sent_as_bearer_token() {
    let (tx, mut rx) = mpsc::unbounded_channel::<Option<String>>();
    let handler = |State(tx): State<mpsc::UnboundedSender<Option<String>>>, headers: HeaderMap, body: Bytes| async move {
        let auth = headers.get(AUTHORIZATION).map(|v| v.to_str().expect("ascii header").to_string());
        tx.send(auth).expect("test still running");
        grant_vote(body).await
    };
    let addr = serve(Router::new().route(VOTE_PATH, post(handler)).with_state(tx)).await;

    connect(addr, Some("s3cret")).await.vote(vote_request(), option()).await.expect("vote");
    assert_eq!(rx.recv().await, Some(Some("Bearer s3cret".to_string())));

    connect(addr, None).await.vote(vote_request(), option()).await.expect("vote");
    assert_eq!(rx.recv().await, Some(None));
}

/// A peer that accepts the request but never answers: the timeout fires and the outcome is
/// reported as unknown (`Timeout`), never as "not delivered", and openraft sees `Network`.
#[tokio::test]
async fn no_answer_is_timeout() {
    let addr = serve_one(VOTE_PATH, std::future::pending::<Response>).await;
    let url = format!("http://{addr}{VOTE_PATH}");
    let short = Duration::from_millis(100);
    let err = post_bincode::<_, typ::VoteResponse>(&reqwest::Client::new(), &url, None, &vote_request(), short)
        .await
        .expect_err("no answer");
    assert!(matches!(err, PostError::Timeout(_)), "{err:?}");
    assert!(!err.is_connect());

    let err = connect(addr, None).await.vote(vote_request(), RPCOption::new(short)).await.expect_err("no answer");
    assert!(matches!(err, RPCError::Network(_)), "{err:?}");
}

/// Stands in for `Raft` behind the real routes; records what it received so tests can compare.
#[derive(Clone, Default)]
struct StubRaft {
    appended: Arc<Mutex<Vec<typ::Entry>>>,
    snapshot_chunks: Arc<Mutex<Vec<(u64, usize, bool)>>>,
}

impl RaftRpc for StubRaft {
    fn id(&self) -> u64 {
        TARGET
    }

    async fn append(&self, rpc: typ::AppendEntriesRequest) -> Result<typ::AppendEntriesResponse, typ::RaftError> {
        let last = rpc.entries.last().map(|e| e.log_id);
        self.appended.lock().expect("lock").extend(rpc.entries);
        Ok(typ::AppendEntriesResponse::PartialSuccess(last))
    }

    async fn vote(&self, rpc: typ::VoteRequest) -> Result<typ::VoteResponse, typ::RaftError> {
        // Term 0 never occurs in a real vote request: the stub uses it to ask for an error.
        if rpc.vote.leader_id.term == 0 {
            return Err(RaftError::Fatal(Fatal::Stopped));
        }
        Ok(typ::VoteResponse::new(rpc.vote, rpc.last_log_id, true))
    }

    async fn snapshot(
        &self,
        rpc: typ::InstallSnapshotRequest,
    ) -> Result<typ::InstallSnapshotResponse, typ::RaftError<typ::InstallSnapshotError>> {
        self.snapshot_chunks.lock().expect("lock").push((rpc.offset, rpc.data.len(), rpc.done));
        Ok(typ::InstallSnapshotResponse { vote: rpc.vote })
    }
}

/// The real routes and the real client agree on paths and encoding for all three RPCs, with
/// every kind of log entry on the wire, and a peer's Raft error comes back as `RemoteError`.
#[tokio::test]
async fn client_and_routes_round_trip_all_rpcs() {
    let stub = StubRaft::default();
    let addr = serve(router(stub.clone())).await;
    let mut conn = connect(addr, None).await;

    let nodes: BTreeMap<u64, leafraft_state::Node> =
        (1..=3).map(|id| (id, leafraft_state::Node::new(format!("127.0.0.1:{id}"), id))).collect();
    let membership = typ::Membership::new(vec![BTreeSet::from([1, 2, 3])], nodes);
    let entries = vec![
        typ::Entry { log_id: log_id(1, 1, 1), payload: EntryPayload::Membership(membership) },
        typ::Entry { log_id: log_id(2, 1, 2), payload: EntryPayload::Blank },
        typ::Entry {
            log_id: log_id(2, 1, 3),
            payload: EntryPayload::Normal(Request::ClaimSegment { tag: "order".into(), step: 1000 }),
        },
    ];
    let rpc = typ::AppendEntriesRequest {
        vote: Vote::new_committed(2, 1),
        prev_log_id: None,
        entries: entries.clone(),
        leader_commit: Some(log_id(1, 1, 1)),
    };
    let answer = conn.append_entries(rpc, option()).await.expect("append");
    assert_eq!(answer, typ::AppendEntriesResponse::PartialSuccess(Some(log_id(2, 1, 3))));
    assert_eq!(*stub.appended.lock().expect("lock"), entries);

    let answer = conn.vote(vote_request(), option()).await.expect("vote");
    assert_eq!(answer, typ::VoteResponse::new(Vote::new(3, 1), Some(log_id(2, 1, 10)), true));

    let err = conn.vote(typ::VoteRequest::new(Vote::new(0, 1), None), option()).await.expect_err("stopped");
    assert!(matches!(&err, RPCError::RemoteError(r) if r.source == RaftError::Fatal(Fatal::Stopped)), "{err:?}");
}

/// A snapshot chunk of openraft's default size (3 MiB) is larger than axum's default body limit
/// (2 MiB); without the raised limit every chunk would get 413 and a lagging follower could never
/// be caught up by snapshot.
#[tokio::test]
async fn snapshot_chunk_larger_than_axum_default_limit_is_accepted() {
    let stub = StubRaft::default();
    let addr = serve(router(stub.clone())).await;
    let mut conn = connect(addr, None).await;

    let len = 3 * 1024 * 1024 + 1;
    let rpc = typ::InstallSnapshotRequest {
        vote: Vote::new_committed(2, 1),
        meta: typ::SnapshotMeta {
            last_log_id: Some(log_id(2, 1, 3)),
            last_membership: typ::StoredMembership::default(),
            snapshot_id: "2-1-3".into(),
        },
        offset: 0,
        data: vec![7; len],
        done: true,
    };
    let answer = conn.install_snapshot(rpc, option()).await.expect("install_snapshot");
    assert_eq!(answer.vote, Vote::new_committed(2, 1));
    assert_eq!(*stub.snapshot_chunks.lock().expect("lock"), vec![(0, len, true)]);
}

/// A body that does not decode gets a 400 with a plain-text reason (and the server survives to
/// answer the next request); `post_bincode` reports it as `Status` with that text.
#[tokio::test]
async fn undecodable_body_is_400_with_reason() {
    let addr = serve(router(StubRaft::default())).await;
    let client = reqwest::Client::new();
    for path in [APPEND_PATH, VOTE_PATH, SNAPSHOT_PATH] {
        let response = client.post(format!("http://{addr}{path}")).body(vec![0xff; 5]).send().await.expect("an answer");
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{path}");
        let content_type = response.headers()[CONTENT_TYPE].to_str().expect("ascii").to_string();
        assert!(content_type.starts_with("text/plain"), "{path}: {content_type}");
        let text = response.text().await.expect("body");
        assert!(text.contains("cannot decode"), "{path}: {text}");
    }

    // A well-formed value of the wrong type is refused too, not misread.
    let url = format!("http://{addr}{APPEND_PATH}");
    let err =
        post_bincode::<_, typ::AppendEntriesResponse>(&client, &url, None, &vote_request(), Duration::from_secs(10))
            .await
            .expect_err("a vote is not an append");
    assert!(matches!(&err, PostError::Status { status: 400, body } if body.contains("cannot decode")), "{err:?}");

    let answer = connect(addr, None).await.vote(vote_request(), option()).await.expect("server still serves");
    assert!(answer.vote_granted);
}

fn snapshot_chunk(offset: u64, data: Vec<u8>) -> typ::InstallSnapshotRequest {
    typ::InstallSnapshotRequest {
        vote: Vote::new_committed(2, 1),
        meta: typ::SnapshotMeta {
            last_log_id: Some(log_id(2, 1, 3)),
            last_membership: typ::StoredMembership::default(),
            snapshot_id: "2-1-3".into(),
        },
        offset,
        data,
        done: false,
    }
}

/// A chunk whose data claims 2^60 bytes, and one that asks openraft to write at offset 2^60 of
/// its buffer (which would allocate the gap and abort), get 400 and never reach Raft; a chunk
/// that leaves a smaller gap gets openraft's own `SnapshotMismatch`.
#[tokio::test]
async fn hostile_snapshot_chunks_never_reach_raft() {
    let stub = StubRaft::default();
    let addr = serve(router(stub.clone())).await;
    let client = reqwest::Client::new();
    let url = format!("http://{addr}{SNAPSHOT_PATH}");

    let mut claims_2_60 = codec::encode(&snapshot_chunk(0, vec![])).expect("encode");
    let data_len_at = claims_2_60.len() - 9;
    claims_2_60[data_len_at..data_len_at + 8].copy_from_slice(&(1u64 << 60).to_le_bytes());
    let response = client.post(&url).body(claims_2_60).send().await.expect("an answer");
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);

    let mut conn = connect(addr, None).await;
    conn.install_snapshot(snapshot_chunk(0, vec![1; 10]), option()).await.expect("first chunk");
    let far = codec::encode(&snapshot_chunk(1 << 60, vec![1])).expect("encode");
    let response = client.post(&url).body(far).send().await.expect("an answer");
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert!(response.text().await.expect("text").contains("beyond"));

    let err = conn.install_snapshot(snapshot_chunk(11, vec![1]), option()).await.expect_err("a gap");
    assert!(
        matches!(&err, RPCError::RemoteError(r) if matches!(r.source, RaftError::APIError(typ::InstallSnapshotError::SnapshotMismatch(_)))),
        "{err:?}"
    );
    conn.install_snapshot(snapshot_chunk(10, vec![1; 5]), option()).await.expect("the next chunk");
    assert_eq!(*stub.snapshot_chunks.lock().expect("lock"), vec![(0, 10, false), (10, 5, false)]);
}

/// An answer longer than any legitimate one is not buffered: the client stops reading.
#[tokio::test]
async fn an_oversized_answer_is_refused() {
    let addr = serve_one(VOTE_PATH, |_: Bytes| async { octet_stream(vec![0; codec::MAX_RPC_BYTES + 1]) }).await;
    let url = format!("http://{addr}{VOTE_PATH}");
    let err = post_bincode::<_, typ::VoteResponse>(
        &reqwest::Client::new(),
        &url,
        None,
        &vote_request(),
        Duration::from_secs(10),
    )
    .await
    .expect_err("too long");
    assert!(matches!(&err, PostError::Decode(msg) if msg.contains("over")), "{err:?}");
}

/// Found by the fuzz tests: an append, vote or snapshot that speaks for the receiving
/// node itself (its own ID as leader or candidate, another term) made openraft follow itself and
/// trip a debug assertion, which stopped its core. No peer sends those: they get 400.
#[tokio::test]
async fn regression_an_rpc_in_the_receivers_own_name_stops_its_raft() {
    let stub = StubRaft::default();
    let addr = serve(router(stub.clone())).await;
    let client = reqwest::Client::new();
    let own = Vote::new_committed(7, TARGET);
    let append = typ::AppendEntriesRequest { vote: own, prev_log_id: None, entries: vec![], leader_commit: None };
    let bodies = [
        (APPEND_PATH, codec::encode(&append).expect("encode")),
        (VOTE_PATH, codec::encode(&typ::VoteRequest::new(Vote::new(7, TARGET), None)).expect("encode")),
        (
            SNAPSHOT_PATH,
            codec::encode(&typ::InstallSnapshotRequest { vote: own, ..snapshot_chunk(0, vec![]) }).expect("encode"),
        ),
    ];
    for (path, body) in bodies {
        let response = client.post(format!("http://{addr}{path}")).body(body).send().await.expect("an answer");
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{path}");
        assert!(response.text().await.expect("text").contains("this node itself"), "{path}");
    }
    assert!(stub.appended.lock().expect("lock").is_empty());
    assert!(stub.snapshot_chunks.lock().expect("lock").is_empty());
}
