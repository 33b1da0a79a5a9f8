//! `run`: one leafraft node from start to graceful stop.
//!
//! Order of start: load (or create) the member identity and open the store (a node that cannot,
//! or whose data dir belongs to another node ID, stops here with a clear error), assemble the node
//! over HTTP (`assembly`: Raft, amnesia guard, `Cluster`, ID services), serve HTTP, then
//! bootstrap (initialise, or ask to join; see `bootstrap`) if the data directory was
//! empty. A refusal (from bootstrap, or a membership that records this node ID with another
//! disk) stops the node with its one-line reason. Order of stop: give back segment tails and the
//! snowflake worker (while peers can still reach this node's Raft endpoints), stop accepting and
//! drain requests, shut Raft down, flush the store.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::api;
use crate::api::tls::Tls;
use crate::cluster::Cluster;
use crate::cluster::HttpPeers;
use crate::cluster::Timeouts;
use crate::config::Config;
use crate::metrics::Metrics;
use crate::node::assembly;
use crate::node::assembly::Assembled;
use crate::node::assembly::Parts;
use crate::node::bootstrap;
use crate::node::bootstrap::BootstrapRefusal;
use crate::node::reload::Reloadable;
use crate::services::segments::Segments;
use crate::services::IdServices;
use raft::network::identity::MembershipMark;
use raft::network::IdentityCheck;

/// How long stopping waits for in-flight requests before it goes on regardless.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a fail-stop waits for in-flight requests (which answer errors once Raft has stopped).
const FAIL_STOP_DRAIN: Duration = Duration::from_millis(500);

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
    for warning in &config.warnings {
        tracing::warn!("{warning}");
    }
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|e| RunError(format!("cannot listen on {}: {e}", config.listen)))?;
    let mut node = start(config, listener).await?;
    let refused = node.refused.take();
    let failure = node.storage_failure();
    let mut amnesia = node.amnesia.clone();
    let amnesiac = async move { amnesia.wait_for(Option::is_some).await.ok().and_then(|reason| reason.clone()) };
    let identity = node.cluster().identity().clone();
    tokio::select! {
        // A newer release's entries this binary cannot decode (`cluster::versions`).
        reason = async move { identity.versions().stopped().await } => {
            node.stop().await?;
            Err(RunError(reason))
        }
        () = shutdown => node.stop().await,
        Some(BootstrapRefusal(reason)) = async move { refused?.recv().await } => {
            node.stop().await?;
            Err(RunError(reason))
        }
        reason = failure => Err(node.fail_stop(reason).await),
        Some(reason) = amnesiac => Err(node.fail_stop(format!("this member must be rebuilt: {reason}")).await),
    }
}

/// A started node; `stop` takes it down in order.
pub struct RunningNode {
    cluster: Arc<Cluster>,
    segments: Arc<Segments>,
    local_addr: SocketAddr,
    /// The routes the listener serves, for driving the node in process (the fuzz tests).
    router: axum::Router,
    data_dir: std::path::PathBuf,
    /// Set on a fail-stop: requests in flight are answered with an error.
    failing: tokio::sync::watch::Sender<bool>,
    stop_tx: tokio::sync::watch::Sender<bool>,
    server: JoinHandle<std::io::Result<()>>,
    background: Vec<JoinHandle<()>>,
    snowflake_stop: tokio::sync::watch::Sender<bool>,
    /// Releases the snowflake worker when told to stop.
    snowflake_task: JoinHandle<()>,
    /// Answers if this node must not run as a member (see `bootstrap::BootstrapRefusal`).
    refused: Option<tokio::sync::mpsc::Receiver<BootstrapRefusal>>,
    /// Turns to the reason once this node found its own log gone back in time (`raft::amnesia`).
    amnesia: tokio::sync::watch::Receiver<Option<String>>,
}

/// Starts a node on an already bound listener (tests bind `127.0.0.1:0`).
pub async fn start(config: Config, listener: TcpListener) -> Result<RunningNode, RunError> {
    let (identity, store) = open_store(&config).await?;
    let (http, tls) = peer_client(&config)?;
    if tls.as_ref().is_some_and(|tls| tls.mutual()) {
        identity.require_certificate_names(|der, id| crate::api::tls::names_node(&der.into(), id));
    }
    let peer_secret: Option<Arc<str>> = config.credentials.peer.as_ref().map(|s| Arc::from(s.expose()));
    let network =
        raft::network::NetworkFactory::new(http.clone(), peer_secret.clone(), identity.clone()).with_tls(tls.is_some());
    let peers = Arc::new(HttpPeers::new(http, peer_secret, identity.clone()).with_tls(tls.is_some()));
    let Assembled { raft, amnesia, cluster, services, .. } = assembly::assemble(Parts {
        node_id: config.node_id,
        raft_config: Arc::new(config.raft_config().map_err(RunError)?),
        store,
        transport: network,
        peers,
        timeouts: Timeouts { write: config.write_timeout, learner: config.learner_timeout },
        identity,
        segments: config.segments,
        snowflake: config.snowflake,
        metrics: Arc::new(Metrics::with_tag_series(config.metrics_tag_series)),
    })
    .await
    .map_err(RunError)?;

    // Before the server runs, so nothing a peer replicates can make an empty directory look used.
    let was_empty = !raft.is_initialized().await.map_err(|e| RunError(format!("raft stopped at start: {e}")))?;
    let IdServices { metrics, segments, snowflakes, timeseq, .. } = services.clone();
    let (failing, failing_rx) = tokio::sync::watch::channel(false);
    let credentials = Arc::new(arc_swap::ArcSwap::from_pointee(config.credentials.clone()));
    let refusals = Arc::new(crate::api::refusals::RefusalLog::default());
    let app = api::router(
        api::Services {
            cluster: cluster.clone(),
            segments: segments.clone(),
            snowflakes: snowflakes.clone(),
            timeseq: timeseq.clone(),
            metrics: metrics.clone(),
            credentials: credentials.clone(),
            mutual_tls: tls.as_ref().is_some_and(|tls| tls.mutual()),
            refusals: refusals.clone(),
            amnesia: amnesia.clone(),
        },
        failing_rx,
    );
    let local_addr = listener.local_addr().map_err(|e| RunError(format!("listener has no address: {e}")))?;
    let router = app.clone();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let observers = (metrics.clone(), refusals.clone());
    let server = crate::api::server::serve(listener, app, tls.clone(), config.connections, observers, stop_rx.clone())
        .map_err(RunError)?;
    let incarnation = raft::network::identity::hex_id(cluster.identity().local().incarnation);
    let scheme = if tls.is_some() { "https" } else { "http" };
    tracing::info!(node_id = config.node_id, incarnation, listen = %local_addr, advertise = %config.advertise, scheme, "node started");

    let (mut background, refused) = spawn_background(&cluster, &segments, &config, was_empty);
    background.push(tokio::spawn(raft::amnesia::forget_removed_members(amnesia.clone(), cluster.raft().clone())));
    // Aborted first on stop, before every tail is given back.
    background.push(tokio::spawn(segments.clone().drop_idle_buffers(stop_rx.clone())));
    if let Some(addr) = config.probe_listen {
        let probes = TcpListener::bind(addr)
            .await
            .map_err(|e| RunError(format!("cannot listen on --probe-listen {addr}: {e}")))?;
        tracing::info!(probe_listen = %addr, "answering /healthz and /readyz apart from the node port");
        background.push(crate::api::probes::serve(probes, router.clone(), stop_rx.clone()));
    }
    let reloadable = Reloadable { tls, credentials, source: config.credential_source.clone() };
    background.push(crate::node::reload::spawn(reloadable, metrics, stop_rx));
    let (snowflake_stop, snowflake_stop_rx) = tokio::sync::watch::channel(false);
    let snowflake_task = services.maintain(snowflake_stop_rx);
    Ok(RunningNode {
        cluster,
        segments,
        local_addr,
        router,
        data_dir: config.data_dir.clone(),
        failing,
        stop_tx,
        server,
        background,
        snowflake_stop,
        snowflake_task,
        refused: Some(refused),
        amnesia: amnesia.tripped(),
    })
}

/// The process's one HTTP client towards peers (pooled, kept alive), with the node's TLS client
/// configuration when it has TLS, and that TLS state.
fn peer_client(config: &Config) -> Result<(reqwest::Client, Option<Arc<Tls>>), RunError> {
    let tls = config.tls.clone().map(Tls::load).transpose().map_err(RunError)?;
    // Idle connections are dropped before a peer with the same settings would close them (after
    // its header-read timeout), so a request never goes out on a connection being closed.
    let pool_idle = (config.connections.header_read_timeout / 2).min(Duration::from_secs(30));
    let mut http = reqwest::Client::builder().pool_idle_timeout(pool_idle).tcp_nodelay(true);
    if let Some(tls) = &tls {
        http = http.use_preconfigured_tls(tls.client_config().map_err(RunError)?).tls_info(true);
    }
    let http = http.build().map_err(|e| RunError(format!("cannot build the HTTP client: {e}")))?;
    Ok((http, tls))
}

/// Loads (or creates) this data dir's identity, then opens its store, bound to that identity
/// (`storage::identity::open_member`). The identity comes first: a directory that belongs to
/// another node is refused before its store is touched, and a new store is bound to its disk from
/// the first entry. Both may wait on the disk (and `open` on
/// sled's file lock), so they run off the async workers.
async fn open_store(config: &Config) -> Result<(Arc<IdentityCheck>, storage::Store), RunError> {
    // Before anything is applied: a planted bug of `apply` acts from the first entry on.
    #[cfg(feature = "planted")]
    crate::planted::arm_in_apply();
    storage::private::create_dir(&config.data_dir)
        .map_err(|e| RunError(format!("cannot create data directory {}: {e}", config.data_dir.display())))?;
    let options =
        storage::StoreOptions { fsync: config.fsync, cache_capacity_bytes: 64 << 20, local_node: Some(config.node_id) };
    let (dir, node_id) = (config.data_dir.clone(), config.node_id);
    let (identity, store) =
        tokio::task::spawn_blocking(move || storage::identity::open_member(&dir, node_id, &options))
            .await
            .map_err(|e| RunError(format!("opening the store failed: {e}")))?
            .map_err(|e| RunError(e.to_string()))?;
    let identity = Arc::new(IdentityCheck::new(config.node_id, identity.incarnation));
    let (cluster_id, mark, membership) = store.state_machine.read(|s| {
        (s.cluster_id, MembershipMark::of(s.membership.log_id().as_ref()), s.membership.membership().clone())
    });
    identity.observe(cluster_id, mark, &membership);
    Ok((identity, store))
}

/// The node's background tasks: leadership logging, keeping the identity view current, committing the
/// cluster ID, bootstrap (which answers a refusal on the returned channel), the one catch-up read
/// before the first ready, and `--preload`.
fn spawn_background(
    cluster: &Arc<Cluster>,
    segments: &Arc<Segments>,
    config: &Config,
    was_empty: bool,
) -> (Vec<JoinHandle<()>>, tokio::sync::mpsc::Receiver<BootstrapRefusal>) {
    let (refusal_tx, refused) = tokio::sync::mpsc::channel(2);
    let (bootstrap_cluster, bootstrap_config) = (cluster.clone(), config.clone());
    let catch_up = cluster.clone();
    let mut background = vec![
        tokio::spawn(log_leadership(cluster.clone())),
        tokio::spawn(bootstrap::keep_identity_current(cluster.clone())),
        tokio::spawn(bootstrap::commit_cluster_id(cluster.clone())),
        tokio::spawn(crate::cluster::record_unknown_incarnations(cluster.clone())),
        tokio::spawn(async move {
            if let Err(refusal) = bootstrap::bootstrap(bootstrap_cluster, bootstrap_config, was_empty).await {
                let _ = refusal_tx.try_send(refusal);
            }
        }),
        tokio::spawn(async move { catch_up.catch_up().await }),
        tokio::spawn(crate::cluster::watch_membership(cluster.clone())),
        tokio::spawn(crate::cluster::versions::maintain_cluster_version(cluster.clone(), config.hold_cluster_version)),
    ];
    if config.segments.preload {
        background.push(tokio::spawn(preload(cluster.clone(), segments.clone())));
    }
    if let crate::config::Bootstrap::StatefulSet(pods) = &config.bootstrap {
        background.push(tokio::spawn(bootstrap::remove_scaled_down(cluster.clone(), pods.as_ref().clone())));
    }
    (background, refused)
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

    /// The node's routes, the same the listener serves (`tower::ServiceExt::oneshot` on a clone).
    pub fn router(&self) -> axum::Router {
        self.router.clone()
    }

    /// Completes with the reason once this node's storage has failed (see [`crate::node::failstop`]).
    pub fn storage_failure(&self) -> impl Future<Output = String> + 'static {
        crate::node::failstop::storage_failure(self.cluster.raft().clone(), self.data_dir.clone())
    }

    /// Stops at once after a storage failure: logs why, answers the requests in flight with
    /// `NO_LEADER`, stops accepting, and answers the error the process exits with. Nothing is
    /// handed back or flushed: the storage is what failed.
    pub async fn fail_stop(self, reason: String) -> RunError {
        tracing::error!(%reason, "storage failed: stopping this node (exit status 1)");
        let _ = self.failing.send(true);
        let _ = self.stop_tx.send(true);
        let _ = self.snowflake_stop.send(true);
        for task in self.background.into_iter().chain([self.snowflake_task]) {
            task.abort();
        }
        if tokio::time::timeout(FAIL_STOP_DRAIN, self.server).await.is_err() {
            tracing::warn!("requests still running after {FAIL_STOP_DRAIN:?}; exiting anyway");
        }
        RunError(format!("storage failed: {reason}"))
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
        linger_for_peers_stopping_too(&self.cluster).await;
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

/// Stays in Raft 300 ms after the give-backs: a peer stopped with it may need it to commit its own.
async fn linger_for_peers_stopping_too(cluster: &Cluster) {
    let metrics = cluster.raft().metrics().borrow().clone();
    if metrics.membership_config.membership().nodes().any(|(&id, _)| id != metrics.id) {
        tracing::info!(linger_ms = 300, "given back; staying in Raft a moment for members stopping too");
        tokio::time::sleep(Duration::from_millis(300)).await;
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
