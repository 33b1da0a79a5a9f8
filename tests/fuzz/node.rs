//! `FuzzNode`: one single-node leafraft node in process (its own runtime, temporary directory and
//! loopback listener), driven through its router with `tower::ServiceExt::oneshot`.
//!
//! Some fuzzed requests legitimately leave the node unable to serve for the rest of a run: a
//! Raft RPC from a phantom leader can append a membership of absent voters, an added voter takes
//! the quorum away, a snapshot of garbage stops Raft on a storage error (it fails-stop). After
//! such a case the node is replaced by a fresh one, so every case meets a working node.

use std::time::Duration;
use std::time::Instant;

use axum::body::Body;
use axum::body::Bytes;
use axum::http::Request;
use axum::http::StatusCode;
use leafraft::config::Config;
use leafraft::config::Settings;
use leafraft::node::run::RunningNode;
use openraft::error::Fatal;
use tempfile::TempDir;
use tower::ServiceExt;

/// A request that takes longer has hung (writes time out after `--write-timeout-ms` 1000).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// The node's `--secret`: requests carry it or not, so both sides of the auth layer are fuzzed.
pub const SECRET: &str = "fuzz-secret";

pub struct FuzzNode {
    runtime: tokio::runtime::Runtime,
    node: RunningNode,
    _dir: TempDir,
    /// How many times the node was replaced.
    pub replaced: u32,
}

/// What the node answered, or that it did not within [`REQUEST_TIMEOUT`].
pub enum Answer {
    Status(StatusCode, Bytes),
    TimedOut,
}

impl FuzzNode {
    pub fn start() -> FuzzNode {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime for the node");
        let dir = tempfile::tempdir().expect("a data directory");
        let node = runtime.block_on(start_node(&dir));
        FuzzNode { runtime, node, _dir: dir, replaced: 0 }
    }

    pub fn send(&self, request: Request<Body>) -> Answer {
        let router = self.node.router();
        self.runtime.block_on(async move {
            let answer = tokio::time::timeout(REQUEST_TIMEOUT, async {
                let response = router.oneshot(request).await.expect("the router is infallible");
                let status = response.status();
                let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap_or_default();
                (status, body)
            });
            match answer.await {
                Ok((status, body)) => Answer::Status(status, body),
                Err(_) => Answer::TimedOut,
            }
        })
    }

    /// `Err` when Raft's core panicked: a request made the node panic. A core that panics drops
    /// its metrics without a last update, so it is asked directly once its metrics channel closed.
    pub fn raft_panicked(&self) -> Result<(), String> {
        let raft = self.node.cluster().raft().clone();
        if raft.metrics().has_changed().is_ok() {
            return Ok(());
        }
        match self.runtime.block_on(raft.is_initialized()) {
            Err(fatal @ Fatal::Panicked) => Err(format!("raft stopped: {fatal}")),
            _ => Ok(()),
        }
    }

    /// Whether the node can still serve as it did at start: Raft runs, node 1 is the only member.
    pub fn intact(&self) -> bool {
        let raft = self.node.cluster().raft();
        let metrics = raft.metrics().borrow().clone();
        let membership = metrics.membership_config.membership();
        raft.metrics().has_changed().is_ok()
            && metrics.running_state.is_ok()
            && membership.voter_ids().eq([1])
            && membership.learner_ids().count() == 0
    }

    /// Replaces the node with a fresh one; the old one's tasks are dropped with its runtime.
    pub fn replace(&mut self) {
        let replaced = self.replaced + 1;
        let old = std::mem::replace(self, FuzzNode { replaced, ..FuzzNode::start() });
        old.runtime.shutdown_background();
    }
}

async fn start_node(dir: &TempDir) -> RunningNode {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind a loopback port");
    let addr = listener.local_addr().expect("local address").to_string();
    let file = Settings {
        data_dir: Some(dir.path().to_path_buf()),
        listen: Some(addr),
        fsync: Some(false),
        write_timeout_ms: Some(1000),
        secret: Some(SECRET.into()),
        ..Settings::default()
    };
    let config = Config::resolve(file).expect("a valid configuration");
    let node = leafraft::node::run::start(config, listener).await.expect("the node starts");
    let deadline = Instant::now() + Duration::from_secs(20);
    while node.cluster().ensure_ready().is_err() {
        assert!(Instant::now() < deadline, "the fuzz node did not become ready");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let create = leafraft_state::Request::CreateTag {
        tag: "order".into(),
        max_id: 1,
        step: 1000,
        description: String::new(),
        now_ms: leafraft::clock::now_ms(),
    };
    node.cluster().write(create).await.expect("create a tag");
    node
}
