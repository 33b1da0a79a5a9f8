//! `run`: one leafraft node from start to graceful stop.
//!
//! Order of start: open the store (a node that cannot open it stops here with a clear error),
//! start Raft, serve HTTP, then bootstrap (initialise, or ask to join) if the data directory was
//! empty. Order of stop: give back segment tails and the snowflake worker (while peers can still
//! reach this node's Raft endpoints), stop accepting and drain requests, shut Raft down, flush
//! the store.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::api;
use crate::client::Client;
use crate::cluster::Cluster;
use crate::config::Bootstrap;
use crate::config::Config;
use crate::error::ErrorCode;
use crate::metrics::Metrics;
use crate::segments::Segments;
use crate::snowflakes::Snowflakes;
use raft::Node;

/// How long stopping waits for in-flight requests before it goes on regardless.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug)]
pub struct RunError(pub String);

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RunError {}

/// Binds `config.listen` and runs the node until `shutdown` completes.
pub async fn run(config: Config, shutdown: impl Future<Output = ()>) -> Result<(), RunError> {
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|e| RunError(format!("cannot listen on {}: {e}", config.listen)))?;
    let node = start(config, listener).await?;
    shutdown.await;
    node.stop().await
}

/// A started node; `stop` takes it down in order.
pub struct RunningNode {
    cluster: Arc<Cluster>,
    segments: Arc<Segments>,
    local_addr: SocketAddr,
    stop_tx: tokio::sync::watch::Sender<bool>,
    server: JoinHandle<std::io::Result<()>>,
    background: Vec<JoinHandle<()>>,
    snowflake_stop: tokio::sync::watch::Sender<bool>,
    /// Releases the snowflake worker when told to stop.
    snowflake_task: JoinHandle<()>,
}

/// Starts a node on an already bound listener (tests bind `127.0.0.1:0`).
pub async fn start(config: Config, listener: TcpListener) -> Result<RunningNode, RunError> {
    std::fs::create_dir_all(&config.data_dir)
        .map_err(|e| RunError(format!("cannot create data directory {}: {e}", config.data_dir.display())))?;
    let options = storage::StoreOptions { fsync: config.fsync, cache_capacity_bytes: 64 << 20 };
    // `open` may wait for sled's file lock; keep it off the async workers.
    let dir = config.data_dir.clone();
    let store = tokio::task::spawn_blocking(move || storage::open(&dir, &options))
        .await
        .map_err(|e| RunError(format!("opening the store failed: {e}")))?
        .map_err(|e| RunError(e.to_string()))?;

    let raft_config = Arc::new(config.raft_config().map_err(RunError)?);
    let http = reqwest::Client::builder()
        .pool_idle_timeout(Duration::from_secs(30))
        .tcp_nodelay(true)
        .build()
        .map_err(|e| RunError(format!("cannot build the HTTP client: {e}")))?;
    let secret: Option<Arc<str>> = config.secret.as_deref().map(Arc::from);
    let network = raft::network::NetworkFactory::new(http.clone(), secret.clone());
    let raft = raft::Raft::new(config.node_id, raft_config, network, store.log.clone(), store.state_machine.clone())
        .await
        .map_err(|e| RunError(format!("cannot start raft: {e}")))?;

    let cluster = Arc::new(Cluster::new(config.node_id, raft, store, http, secret, config.write_timeout));
    let metrics = Arc::new(Metrics::new());
    let segments = Arc::new(Segments::new(cluster.clone(), config.segments, metrics.clone()));
    let snowflakes = Arc::new(Snowflakes::new(cluster.clone(), config.snowflake));
    let app = api::router(api::AppState {
        cluster: cluster.clone(),
        segments: segments.clone(),
        snowflakes: snowflakes.clone(),
        metrics,
    });
    let local_addr = listener.local_addr().map_err(|e| RunError(format!("listener has no address: {e}")))?;

    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stop_rx.wait_for(|stop| *stop).await;
            })
            .await
    });
    tracing::info!(node_id = config.node_id, listen = %local_addr, advertise = %config.advertise, "node started");

    let mut background =
        vec![tokio::spawn(log_leadership(cluster.clone())), tokio::spawn(bootstrap(cluster.clone(), config.clone()))];
    if config.segments.preload {
        background.push(tokio::spawn(preload(cluster.clone(), segments.clone())));
    }
    let (snowflake_stop, snowflake_stop_rx) = tokio::sync::watch::channel(false);
    let snowflake_task = tokio::spawn(snowflakes.clone().maintain(snowflake_stop_rx));
    Ok(RunningNode { cluster, segments, local_addr, stop_tx, server, background, snowflake_stop, snowflake_task })
}

impl RunningNode {
    pub fn cluster(&self) -> &Arc<Cluster> {
        &self.cluster
    }

    pub fn segments(&self) -> &Arc<Segments> {
        &self.segments
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Gives back the unused tails of the buffers and the snowflake worker, stops accepting and
    /// drains in-flight requests, shuts Raft down and flushes the store.
    pub async fn stop(self) -> Result<(), RunError> {
        tracing::info!("shutting down: giving back segment tails and the snowflake worker");
        // Awaiting the aborted tasks drops their handles on the store, so the data directory
        // can be opened again in this process once `stop` returns.
        for task in self.background {
            task.abort();
            let _ = task.await;
        }
        // Release while the listener still serves `/raft/*`: the releases are Raft writes that
        // may need this node's own vote to commit (a follower of two, or of three with one
        // down). Closing a buffer or the worker stops it issuing IDs, also to requests in flight.
        let _ = self.snowflake_stop.send(true);
        let (_, snowflake) = tokio::join!(self.segments.release_all(), self.snowflake_task);
        if let Err(e) = snowflake {
            tracing::warn!(error = %e, "the snowflake task failed");
        }
        tracing::info!("shutting down: no new requests");
        let _ = self.stop_tx.send(true);
        match tokio::time::timeout(DRAIN_TIMEOUT, self.server).await {
            Ok(Ok(Ok(()))) => tracing::info!("requests drained"),
            Ok(Ok(Err(e))) => tracing::warn!(error = %e, "HTTP server ended with an error"),
            Ok(Err(e)) => tracing::warn!(error = %e, "HTTP server task failed"),
            Err(_) => tracing::warn!("requests still running after the drain timeout; stopping anyway"),
        }
        if let Err(e) = self.cluster.raft().shutdown().await {
            tracing::warn!(error = %e, "raft shutdown reported an error");
        }
        tracing::info!("raft stopped");
        self.cluster.store().flush().await.map_err(|e| RunError(format!("cannot flush the store: {e}")))?;
        tracing::info!("store flushed; stopped");
        Ok(())
    }
}

/// Makes a node with an empty data directory part of a cluster: initialise (alone or with the
/// initial members) or ask a running cluster to add it. A node with data does nothing here.
async fn bootstrap(cluster: Arc<Cluster>, config: Config) {
    match cluster.raft().is_initialized().await {
        Ok(false) => {}
        Ok(true) => {
            tracing::info!("data directory holds a cluster membership; rejoining with it");
            return;
        }
        Err(e) => {
            tracing::error!(error = %e, "raft stopped before bootstrap");
            return;
        }
    }
    let members = match &config.bootstrap {
        Bootstrap::Single => [(config.node_id, config.advertise.clone())].into_iter().collect(),
        Bootstrap::InitialCluster(members) => members.clone(),
        Bootstrap::Join(seeds) => return join(&cluster, &config, seeds).await,
    };
    let nodes: std::collections::BTreeMap<u64, Node> =
        members.into_iter().map(|(id, addr)| (id, Node::new(addr))).collect();
    // Every initial member initialises with the same membership: openraft documents this as
    // safe, and it means the cluster forms whatever order the members start in.
    match cluster.raft().initialize(nodes.clone()).await {
        Ok(()) => tracing::info!(members = ?nodes.keys().collect::<Vec<_>>(), "cluster initialised"),
        Err(openraft::error::RaftError::APIError(openraft::error::InitializeError::NotAllowed(_))) => {
            tracing::info!("cluster already initialised")
        }
        Err(e) => tracing::error!(error = %e, "cannot initialise the cluster"),
    }
}

/// Asks the members in `seeds` to add this node as a learner (which answers once it has caught
/// up), then to promote it, retrying until the cluster answers.
async fn join(cluster: &Cluster, config: &Config, seeds: &[String]) {
    let mut backoff = Duration::from_millis(200);
    let mut added = false;
    loop {
        // An operator may have added (or promoted) this node meanwhile with `cluster add`.
        let status = cluster.status();
        if status.voters.contains(&config.node_id) || (config.learner && status.learners.contains(&config.node_id)) {
            tracing::info!("join: already a member");
            return;
        }
        added |= status.learners.contains(&config.node_id);
        for seed in seeds {
            let client = Client::new(&format!("http://{seed}"), config.secret.clone());
            if !added {
                match client.add_learner(config.node_id, &config.advertise).await {
                    Ok(_) => {
                        tracing::info!(seed = %seed, "joined the cluster as a learner");
                        added = true;
                    }
                    Err(e) => {
                        tracing::warn!(seed = %seed, error = %e, "join: cannot be added yet");
                        continue;
                    }
                }
            }
            if config.learner {
                return;
            }
            match client.promote_voter(config.node_id).await {
                Ok(_) => {
                    tracing::info!("join: promoted to voter");
                    return;
                }
                Err(e)
                    if e.code() == Some(ErrorCode::NotALearner)
                        && cluster.status().voters.contains(&config.node_id) =>
                {
                    return;
                }
                Err(e) => tracing::warn!(seed = %seed, error = %e, "join: cannot be promoted yet"),
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// Loads a segment for every tag once this node is ready (`--preload`).
async fn preload(cluster: Arc<Cluster>, segments: Arc<Segments>) {
    let mut rx = cluster.raft().metrics();
    loop {
        if cluster.ensure_ready().is_ok() {
            segments.preload();
            return;
        }
        if rx.changed().await.is_err() {
            return;
        }
    }
}

/// Logs every leader and membership change once: they are durable decisions operators look for.
async fn log_leadership(cluster: Arc<Cluster>) {
    let mut rx = cluster.raft().metrics();
    let mut leader = None;
    let mut membership = None;
    loop {
        {
            let metrics = rx.borrow_and_update();
            if metrics.current_leader != leader {
                leader = metrics.current_leader;
                tracing::info!(leader = ?leader, term = metrics.current_term, "leader changed");
            }
            let log_id = metrics.membership_config.log_id().map(|id| id.index);
            if log_id != membership {
                membership = log_id;
                let m = metrics.membership_config.membership();
                tracing::info!(
                    voters = ?m.voter_ids().collect::<Vec<_>>(),
                    learners = ?m.learner_ids().collect::<Vec<_>>(),
                    log_index = ?log_id,
                    "membership changed"
                );
            }
        }
        if rx.changed().await.is_err() {
            return;
        }
    }
}
