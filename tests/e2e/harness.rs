//! `ProcessCluster`: real `leafraft serve` processes on loopback ports, for the end-to-end tests.
//!
//! Every node gets a free port, its own data directory inside one temporary directory and one log
//! file per incarnation (stdout and stderr together). Dropping the cluster kills every child it
//! started, also when a test panics; a panicking test also prints the tail of every node's logs.
//!
//! Nothing here sleeps to "let things settle": waits poll a condition until a deadline
//! ([`wait_until`]) and fail with the last reason the condition gave.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::future::Future;
use std::net::TcpListener;
use std::path::Path;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::process::Output;
use std::process::Stdio;
use std::sync::Mutex;
use std::time::Duration;
use std::time::Instant;

use leafraft_client::Client;
use leafraft_client::ClusterStatus;
use leafraft_client::NewTag;
use leafraft_harness::Serve;
use leafraft_harness::ServeProcess;
use reqwest::Method;
use reqwest::StatusCode;
use serde_json::Value;
use tempfile::TempDir;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_leafraft");

/// How often waits poll.
const POLL: Duration = Duration::from_millis(25);

/// Raft timing that keeps the tests quick; [`Timing::Default`] leaves the binary's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timing {
    /// `--election-timeout-ms 300 --heartbeat-ms 50`.
    Fast,
    /// No timing flags: the defaults (300 ms election timeout, 50 ms heartbeat).
    Default,
}

/// Ports handed out in this test binary; tests run in parallel threads and must never share one.
static PORTS: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// The value of `series` in Prometheus text, `series` being its name and labels as `/metrics`
/// prints them (`leafraft_claim_events_total{kind="batches"}`). Present or fail: a series that is
/// missing (renamed, say) or whose value does not parse panics, naming it, rather than reading as 0,
/// which would pass every check that it stays 0.
pub fn metric_present(text: &str, series: &str) -> f64 {
    let value = text
        .lines()
        .filter(|line| !line.starts_with('#'))
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| {
            let family = series.split('{').next().unwrap_or(series);
            let near: Vec<&str> =
                text.lines().filter(|line| !line.starts_with('#') && line.starts_with(family)).take(5).collect();
            panic!("/metrics has no series {series} (lines of {family}: {near:?})")
        });
    value.trim().parse().unwrap_or_else(|e| panic!("/metrics: {series} is {value:?}, not a number ({e})"))
}

/// A loopback port nobody listens on (bound to `127.0.0.1:0`, read, released), never returned
/// twice by this process.
pub fn free_port() -> u16 {
    loop {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener.local_addr().expect("local address").port();
        drop(listener);
        if PORTS.lock().unwrap_or_else(|e| e.into_inner()).insert(port) {
            return port;
        }
    }
}

/// Polls `check` every 25 ms until it answers `Ok`, or panics after `timeout` with `what` and the
/// last reason `check` gave.
pub async fn wait_until<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        match check().await {
            Ok(value) => return value,
            Err(reason) if Instant::now() >= deadline => {
                panic!("timed out after {timeout:?} waiting for {what}; last: {reason}")
            }
            Err(_) => tokio::time::sleep(POLL).await,
        }
    }
}

/// `client.segment_ids(tag, count)`, asked again until it succeeds or `timeout` passes: a node's
/// first claim of a tag (or one past its buffers) can outlast its segment wait on a slow machine,
/// which answers the documented 503 `SEGMENTS_NOT_READY`; an error that lasts still fails.
pub async fn segment_ids_within(client: &Client, tag: &str, count: u64, timeout: Duration) -> Vec<u64> {
    wait_until(timeout, &format!("{count} IDs of {tag}"), || async {
        client.segment_ids(tag, count).await.map_err(|e| e.to_string())
    })
    .await
}

/// A client of exactly the node at `url` (no discovery, no failover, one attempt per call), as
/// tests that look at one node's answers need.
pub fn client_of(url: &str, secret: Option<String>) -> Client {
    client_with_ca(url, secret, None)
}

/// [`client_of`] verifying the node's certificate with the PEM CAs `ca`.
pub fn client_with_ca(url: &str, secret: Option<String>, ca: Option<&[u8]>) -> Client {
    let mut builder = Client::builder();
    if let Some(ca) = ca {
        builder = builder.ca_pem(ca.to_vec());
    }
    builder
        .nodes([url])
        .secret_opt(secret)
        .discover(false)
        .retry_until_timeout(false)
        .timeout(Duration::from_secs(90))
        .attempt_timeout(Duration::from_secs(90))
        .build()
        .expect("a client of one node")
}

/// The body of `POST /v1/tags`.
pub fn new_tag(tag: &str, max_id: Option<u64>, step: Option<u64>, description: Option<String>) -> NewTag {
    NewTag { tag: tag.to_string(), max_id, step, description, mode: None, scramble: None, scramble_bits: None }
}

/// One node of the cluster: where it lives and its current process, if any.
struct NodeProcess {
    port: u16,
    data_dir: PathBuf,
    /// The arguments of its latest start beyond the ones every node gets; reused by `restart`.
    args: Vec<String>,
    child: Option<ServeProcess>,
    /// One log file per incarnation, oldest first.
    logs: Vec<PathBuf>,
    /// The user (and group) the process runs as, when not the test's own.
    uid: Option<u32>,
}

/// A set of `leafraft serve` processes sharing one temporary directory.
pub struct ProcessCluster {
    dir: TempDir,
    nodes: BTreeMap<u64, NodeProcess>,
    secret: Option<String>,
    timing: Timing,
    http: reqwest::Client,
    /// Extra environment variables per node (e.g. `LD_PRELOAD` for libfaketime), for every start.
    env: BTreeMap<u64, Vec<(String, String)>>,
    /// TLS on every node (`with_tls`).
    tls: Option<TlsFiles>,
    /// The binary a node runs when it is not [`BIN`] (another release: `upgrade.rs`).
    binaries: BTreeMap<u64, PathBuf>,
    /// An open-file limit (soft and hard) per node, for every start.
    open_files: BTreeMap<u64, u64>,
}

/// Where the nodes' TLS files are: `node<ID>.pem`/`node<ID>.key` and the CA bundle `ca.pem` in
/// `dir`; clients trust `ca.pem` as it was when the cluster was set up (or as `set_client_ca`
/// says).
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub dir: PathBuf,
    /// `--peer-ca ca.pem` (mutual TLS) rather than `--ca ca.pem`.
    pub mutual: bool,
    pub client_ca: Vec<u8>,
}

impl ProcessCluster {
    /// No node yet; ports and directories are assigned as nodes are first mentioned.
    pub fn new() -> ProcessCluster {
        let dir = tempfile::Builder::new().prefix("leafraft-e2e-").tempdir().expect("temporary directory");
        let http = reqwest::Client::builder().timeout(Duration::from_secs(15)).build().expect("HTTP client");
        ProcessCluster {
            dir,
            nodes: BTreeMap::new(),
            secret: None,
            timing: Timing::Fast,
            http,
            env: BTreeMap::new(),
            open_files: BTreeMap::new(),
            tls: None,
            binaries: BTreeMap::new(),
        }
    }

    /// Runs `binary` for `id` from its next start on (`None`: the binary under test).
    pub fn set_binary(&mut self, id: u64, binary: Option<PathBuf>) {
        match binary {
            Some(binary) => self.binaries.insert(id, binary),
            None => self.binaries.remove(&id),
        };
    }

    /// Every node serves TLS with `dir/node<ID>.pem` and `.key` (the test writes them) and trusts
    /// `dir/ca.pem` (`--peer-ca` when `mutual`, else `--ca`); the cluster's clients trust
    /// `client_ca`.
    pub fn with_tls(mut self, mutual: bool, client_ca: &[u8]) -> ProcessCluster {
        let dir = self.dir.path().join("tls");
        std::fs::create_dir_all(&dir).expect("create the TLS directory");
        self.tls = Some(TlsFiles { dir, mutual, client_ca: client_ca.to_vec() });
        self.http = tls_http(client_ca);
        self
    }

    /// The TLS files' directory (`with_tls`).
    pub fn tls_dir(&self) -> PathBuf {
        self.tls.as_ref().map(|tls| tls.dir.clone()).expect("the cluster has TLS")
    }

    /// Every node is started with `--secret`, and clients send it.
    pub fn with_secret(mut self, secret: &str) -> ProcessCluster {
        self.secret = Some(secret.to_string());
        self
    }

    pub fn with_timing(mut self, timing: Timing) -> ProcessCluster {
        self.timing = timing;
        self
    }

    /// Sets the extra environment of `id` for its next starts, restarts included (replacing what
    /// was set before; empty to clear).
    pub fn set_env(&mut self, id: u64, vars: Vec<(String, String)>) {
        self.env.insert(id, vars);
    }

    /// Starts `id` with an open-file limit of `limit` (soft and hard, as `ulimit -n` sets).
    pub fn set_open_files(&mut self, id: u64, limit: u64) {
        self.open_files.insert(id, limit);
    }

    /// Starts nodes `1..=n` with one `--initial-cluster` listing them all.
    pub fn start(n: u64) -> ProcessCluster {
        let order: Vec<u64> = (1..=n).collect();
        ProcessCluster::new().start_members(&order)
    }

    /// Starts the initial members `ids` (in this order) with one `--initial-cluster` listing them.
    pub fn start_members(mut self, ids: &[u64]) -> ProcessCluster {
        for &id in ids {
            self.reserve(id);
        }
        for &id in ids {
            self.start_member(id, ids);
        }
        self
    }

    /// Starts `id` as one of the initial members `members`.
    pub fn start_member(&mut self, id: u64, members: &[u64]) {
        let initial = self.initial_cluster(members);
        self.start_node(id, &["--initial-cluster", &initial]);
    }

    /// As [`start_members`](Self::start_members), with `extra` after `--initial-cluster` on every
    /// node (kept for `restart`).
    pub fn start_members_with(mut self, ids: &[u64], extra: &[&str]) -> ProcessCluster {
        for &id in ids {
            self.reserve(id);
        }
        let initial = self.initial_cluster(ids);
        for &id in ids {
            let mut args = vec!["--initial-cluster", initial.as_str()];
            args.extend_from_slice(extra);
            self.start_node(id, &args);
        }
        self
    }

    /// The arguments of the latest start of `id` beyond the ones every node gets.
    pub fn args(&self, id: u64) -> Vec<String> {
        self.nodes.get(&id).map(|node| node.args.clone()).unwrap_or_default()
    }

    /// `1=127.0.0.1:P1,2=...` for `members`.
    pub fn initial_cluster(&mut self, members: &[u64]) -> String {
        members.iter().map(|&id| format!("{id}={}", self.addr(id))).collect::<Vec<_>>().join(",")
    }

    /// Gives `id` a port and a data directory if it has none yet; answers its port.
    pub fn reserve(&mut self, id: u64) -> u16 {
        let base = self.dir.path().to_path_buf();
        self.nodes
            .entry(id)
            .or_insert_with(|| NodeProcess {
                port: free_port(),
                data_dir: base.join(format!("node{id}")),
                args: Vec::new(),
                child: None,
                logs: Vec::new(),
                uid: None,
            })
            .port
    }

    pub fn port(&mut self, id: u64) -> u16 {
        self.reserve(id)
    }

    /// `127.0.0.1:PORT` of `id`.
    pub fn addr(&mut self, id: u64) -> String {
        format!("127.0.0.1:{}", self.port(id))
    }

    /// `http://127.0.0.1:PORT` of `id` (`https://` with TLS).
    pub fn url(&mut self, id: u64) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.addr(id))
    }

    pub fn data_dir(&mut self, id: u64) -> PathBuf {
        self.reserve(id);
        self.nodes[&id].data_dir.clone()
    }

    /// Points `id` at another data directory for its next starts (a recovered cluster's, say).
    pub fn set_data_dir(&mut self, id: u64, dir: PathBuf) {
        self.reserve(id);
        if let Some(node) = self.nodes.get_mut(&id) {
            node.data_dir = dir;
        }
    }

    /// A path inside the cluster's temporary directory (removed with it).
    pub fn temp_path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Starts `leafraft serve` for `id` with `--node-id` (unless `args` derive it), `--data-dir`,
    /// `--listen 127.0.0.1:PORT` (unless `args` has `--listen`), the timing flags and `--secret` of
    /// the cluster, then `args`.
    pub fn start_node(&mut self, id: u64, args: &[&str]) {
        self.reserve(id);
        let timing = self.timing;
        let secret = self.secret.clone();
        let log_dir = self.dir.path().to_path_buf();
        let env = self.env.get(&id).cloned().unwrap_or_default();
        let node = self.nodes.get_mut(&id).expect("reserved");
        if let Some(child) = &mut node.child {
            assert!(!child.is_running(), "node {id} is already running");
        }
        let mut command = Serve::new(self.binaries.get(&id).map_or(Path::new(BIN), PathBuf::as_path));
        command.arg("--data-dir").arg(&node.data_dir);
        // A StatefulSet pod derives its node ID from its name (`statefulset.rs`).
        if !args.contains(&"--statefulset-service") {
            command.arg("--node-id").arg(id.to_string());
        }
        if !args.contains(&"--listen") {
            command.arg("--listen").arg(format!("127.0.0.1:{}", node.port));
        }
        if timing == Timing::Fast {
            command.args(["--election-timeout-ms", "300", "--heartbeat-ms", "50"]);
        }
        if let Some(secret) = &secret {
            command.arg("--secret").arg(secret);
        }
        if let Some(tls) = &self.tls {
            command.arg("--tls-cert").arg(tls.dir.join(format!("node{id}.pem")));
            command.arg("--tls-key").arg(tls.dir.join(format!("node{id}.key")));
            command.arg(if tls.mutual { "--peer-ca" } else { "--ca" }).arg(tls.dir.join("ca.pem"));
        }
        command.args(args);
        let log = log_dir.join(format!("node{id}.{}.log", node.logs.len() + 1));
        command.log_to(&log).expect("log file");
        for (key, value) in env {
            command.env(key, value);
        }
        // `E2E_NODE_LOG` sets the nodes' filter when a failure needs their debug lines.
        command.env("RUST_LOG", std::env::var("E2E_NODE_LOG").unwrap_or_else(|_| "info,openraft=warn".into()));
        if let Some(&limit) = self.open_files.get(&id) {
            command.open_files(limit);
        }
        if let Some(uid) = node.uid {
            command.run_as(uid);
        }
        let child = command.spawn().unwrap_or_else(|e| panic!("cannot start {BIN}: {e}"));
        node.child = Some(child);
        node.args = args.iter().map(|s| s.to_string()).collect();
        node.logs.push(log);
    }

    /// Starts `id` again on the same data directory and port, with the arguments of its last start.
    pub fn restart(&mut self, id: u64) {
        let args = self.nodes[&id].args.clone();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.start_node(id, &args);
    }

    /// SIGKILL, then reap.
    pub fn kill(&mut self, id: u64) {
        let mut child =
            self.nodes.get_mut(&id).and_then(|n| n.child.take()).unwrap_or_else(|| panic!("node {id} runs no process"));
        child.kill().expect("wait for a killed node");
    }

    /// Sends `signal` to the process of `id` (which must be running).
    pub fn signal(&mut self, id: u64, signal: libc::c_int) {
        let child = self
            .nodes
            .get_mut(&id)
            .and_then(|n| n.child.as_mut())
            .unwrap_or_else(|| panic!("node {id} runs no process"));
        if let Err(e) = child.signal(signal) {
            panic!("signal {signal} to node {id} ({}) failed: {e}", child.pid());
        }
    }

    /// SIGTERM, then waits for the exit, which must be status 0 within `timeout`; answers how long
    /// the node took to stop.
    pub async fn terminate(&mut self, id: u64, timeout: Duration) -> Duration {
        let sent = Instant::now();
        self.signal(id, libc::SIGTERM);
        let status = self.wait_exit(id, timeout).await;
        assert!(status.success(), "node {id} exited with {status} after SIGTERM");
        sent.elapsed()
    }

    /// Waits until the process of `id` exits by itself, at most `timeout` (then kills it and panics).
    pub async fn wait_exit(&mut self, id: u64, timeout: Duration) -> ExitStatus {
        let node = self.nodes.get_mut(&id).unwrap_or_else(|| panic!("no node {id}"));
        let child = node.child.as_mut().unwrap_or_else(|| panic!("node {id} runs no process"));
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = child.try_exit() {
                node.child = None;
                return status;
            }
            if Instant::now() >= deadline {
                node.child = None;
                panic!("node {id} did not exit within {timeout:?}");
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The process ID of `id` (which must be running).
    pub fn pid(&mut self, id: u64) -> u32 {
        self.nodes
            .get(&id)
            .and_then(|n| n.child.as_ref())
            .map(ServeProcess::pid)
            .unwrap_or_else(|| panic!("node {id} runs no process"))
    }

    /// Runs `id`'s next starts as the user and group `uid` (so that file permissions apply to it
    /// even when the tests run as root); its data directory is created and handed to that user.
    pub fn run_as(&mut self, id: u64, uid: u32) {
        use std::os::unix::fs::PermissionsExt;
        let dir = self.data_dir(id);
        std::fs::create_dir_all(&dir).expect("create the data directory");
        std::os::unix::fs::chown(&dir, Some(uid), Some(uid)).expect("chown the data directory");
        // The temporary directory is private to its owner; the node must be able to reach its own
        // data directory and to open the directory above it (it fsyncs it after creating a file
        // in the data directory for the first time).
        std::fs::set_permissions(self.dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
        self.nodes.get_mut(&id).expect("reserved").uid = Some(uid);
    }

    /// Whether `id` has a process that has not exited.
    pub fn is_running(&mut self, id: u64) -> bool {
        self.nodes.get_mut(&id).and_then(|n| n.child.as_mut()).is_some_and(ServeProcess::is_running)
    }

    /// The nodes whose process runs.
    pub fn live(&mut self) -> Vec<u64> {
        let ids: Vec<u64> = self.nodes.keys().copied().collect();
        ids.into_iter().filter(|&id| self.is_running(id)).collect()
    }

    /// The whole log of `id`'s latest incarnation.
    pub fn log(&self, id: u64) -> String {
        self.nodes[&id].logs.last().map(|path| std::fs::read_to_string(path).unwrap_or_default()).unwrap_or_default()
    }

    /// A typed client of `id` (with the cluster's secret, and its CA with TLS).
    pub fn client(&mut self, id: u64) -> Client {
        let url = self.url(id);
        let ca = self.tls.as_ref().map(|tls| tls.client_ca.clone());
        client_with_ca(&url, self.secret.clone(), ca.as_deref())
    }

    /// `/v1/cluster` of `id`.
    pub async fn status(&mut self, id: u64) -> Result<ClusterStatus, String> {
        self.client(id).cluster_status().await.map_err(|e| format!("node {id}: {e}"))
    }

    /// One HTTP request to `id`, answered as status and JSON body (`Null` when not JSON).
    /// `bearer` is sent as `Authorization: Bearer ...`; `body` is sent as is, as JSON.
    pub async fn request(
        &mut self,
        id: u64,
        method: Method,
        path: &str,
        body: Option<&str>,
        bearer: Option<&str>,
    ) -> (StatusCode, Value) {
        let url = format!("{}{path}", self.url(id));
        let mut request = self.http.request(method.clone(), &url);
        if let Some(secret) = bearer {
            request = request.bearer_auth(secret);
        }
        if let Some(body) = body {
            request = request.header("content-type", "application/json").body(body.to_string());
        }
        let response = request.send().await.unwrap_or_else(|e| panic!("{method} {url}: {e}"));
        let status = response.status();
        let bytes = response.bytes().await.unwrap_or_else(|e| panic!("{method} {url}: {e}"));
        (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }

    /// One GET to `id`, answered as status and the body as text (for Leaf's `text/plain` paths).
    pub async fn get_text(&mut self, id: u64, path: &str) -> (StatusCode, String) {
        self.get_text_as(id, path, None).await
    }

    /// [`get_text`](Self::get_text) with `Authorization: Bearer <bearer>`.
    pub async fn get_text_as(&mut self, id: u64, path: &str, bearer: Option<&str>) -> (StatusCode, String) {
        let url = format!("{}{path}", self.url(id));
        let mut request = self.http.get(&url);
        if let Some(bearer) = bearer {
            request = request.bearer_auth(bearer);
        }
        let response = request.send().await.unwrap_or_else(|e| panic!("GET {url}: {e}"));
        let status = response.status();
        let text = response.text().await.unwrap_or_else(|e| panic!("GET {url}: {e}"));
        (status, text)
    }

    /// Waits until every live node reports the same leader and term, and that leader (a live
    /// node) reports itself as leader; answers the leader.
    pub async fn wait_leader(&mut self, timeout: Duration) -> u64 {
        let live = self.live();
        assert!(!live.is_empty(), "no node runs");
        let clients: Vec<(u64, Client)> = live.iter().map(|&id| (id, self.client(id))).collect();
        wait_until(timeout, "all live nodes to agree on one leader", || agreed_leader(&clients)).await
    }

    /// Waits until `/readyz` of `id` answers 200.
    pub async fn wait_ready(&mut self, id: u64, timeout: Duration) {
        let client = self.client(id);
        wait_until(timeout, &format!("node {id} to be ready"), || async {
            client.ready().await.map_err(|e| e.to_string())
        })
        .await
    }

    /// Waits until each node of `ids` has applied the creation of `tag` (until then a node answers
    /// TAG_NOT_FOUND), so that load started afterwards sees only the errors its faults cause.
    pub async fn wait_tag_known(&mut self, ids: &[u64], tag: &str, timeout: Duration) {
        for &id in ids {
            let client = self.client(id);
            wait_until(timeout, &format!("node {id} to know tag {tag}"), || async {
                client.get_tag(tag).await.map(drop).map_err(|e| e.to_string())
            })
            .await;
        }
    }

    /// Waits until the status of `id` satisfies `check`, which explains what it misses.
    pub async fn wait_status(
        &mut self,
        id: u64,
        timeout: Duration,
        what: &str,
        check: impl Fn(&ClusterStatus) -> Result<(), String>,
    ) -> ClusterStatus {
        let client = self.client(id);
        wait_until(timeout, what, || async {
            let status = client.cluster_status().await.map_err(|e| format!("node {id}: {e}"))?;
            check(&status).map_err(|reason| format!("node {id}: {reason}; status {status:?}"))?;
            Ok(status)
        })
        .await
    }

    /// The last `lines` lines of every log of every node, for a failing test.
    pub fn log_tails(&self, lines: usize) -> String {
        let mut out = String::new();
        for (id, node) in &self.nodes {
            for path in &node.logs {
                let text = std::fs::read_to_string(path).unwrap_or_default();
                let all: Vec<&str> = text.lines().collect();
                let tail = &all[all.len().saturating_sub(lines)..];
                let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                out.push_str(&format!("----- node {id}: {name} (last {} of {} lines)\n", tail.len(), all.len()));
                for line in tail {
                    out.push_str(line);
                    out.push('\n');
                }
            }
        }
        out
    }
}

impl Default for ProcessCluster {
    fn default() -> Self {
        ProcessCluster::new()
    }
}

impl Drop for ProcessCluster {
    fn drop(&mut self) {
        for node in self.nodes.values_mut() {
            // Dropping a process kills and reaps it.
            node.child = None;
        }
        if std::thread::panicking() {
            eprintln!("===== logs of the failed test's nodes in {}\n{}", self.dir.path().display(), self.log_tails(40));
        }
    }
}

/// `Ok(leader)` when every client's node names the same leader and term and the leader is among
/// them and says it leads.
async fn agreed_leader(clients: &[(u64, Client)]) -> Result<u64, String> {
    let mut seen = BTreeMap::new();
    for (id, client) in clients {
        let status = client.cluster_status().await.map_err(|e| format!("node {id}: {e}"))?;
        seen.insert(*id, status);
    }
    let views: BTreeSet<(Option<u64>, u64)> = seen.values().map(|s| (s.leader_id, s.term)).collect();
    let summary = || format!("{:?}", seen.iter().map(|(id, s)| (id, s.leader_id, s.term, &s.role)).collect::<Vec<_>>());
    match views.into_iter().collect::<Vec<_>>().as_slice() {
        [(Some(leader), _)] if seen.get(leader).is_some_and(|s| s.role == "leader") => Ok(*leader),
        _ => Err(format!("(node, leader, term, role): {}", summary())),
    }
}

/// An HTTP client of the tests that trusts the PEM CAs `ca` (only them).
pub fn tls_http(ca: &[u8]) -> reqwest::Client {
    let mut builder = reqwest::Client::builder().timeout(Duration::from_secs(15)).tls_built_in_root_certs(false);
    for certificate in reqwest::Certificate::from_pem_bundle(ca).expect("PEM CA certificates") {
        builder = builder.add_root_certificate(certificate);
    }
    builder.build().expect("HTTP client")
}

/// Runs the binary with `args` to completion (killed and a panic after `timeout`).
pub async fn run_binary(args: &[&str], timeout: Duration) -> Output {
    let mut command = tokio::process::Command::new(BIN);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("LEAFRAFT_") {
            command.env_remove(&key);
        }
    }
    command
        .args(args)
        .env("RUST_LOG", "info,openraft=warn")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    match tokio::time::timeout(timeout, command.output()).await {
        Ok(Ok(output)) => output,
        Ok(Err(e)) => panic!("cannot run {BIN} {args:?}: {e}"),
        Err(_) => panic!("{BIN} {args:?} did not finish within {timeout:?}"),
    }
}

/// Runs a client subcommand of the binary against the node at `server` (a URL), as a user would.
pub async fn run_cli(server: &str, args: &[&str]) -> Output {
    let mut all = args.to_vec();
    all.extend_from_slice(&["--server", server]);
    run_binary(&all, Duration::from_secs(30)).await
}

/// A `wait_status` check: the voters are exactly `expected` and there is no learner.
pub fn voters_are(expected: &'static [u64]) -> impl Fn(&ClusterStatus) -> Result<(), String> {
    move |s: &ClusterStatus| {
        if s.voters == expected && s.learners.is_empty() {
            Ok(())
        } else {
            Err(format!("voters {:?}, learners {:?}", s.voters, s.learners))
        }
    }
}

/// The `error.code` of an API error body.
pub fn error_code(body: &Value) -> &str {
    body.pointer("/error/code").and_then(Value::as_str).unwrap_or("<no error code>")
}

/// Asserts an answer is the API error `code` with HTTP `status`.
#[track_caller]
pub fn assert_error(answer: &(StatusCode, Value), status: u16, code: &str, what: &str) {
    let (got_status, body) = answer;
    assert_eq!((got_status.as_u16(), error_code(body)), (status, code), "{what}: body {body}");
}

/// Every file below `dir` (for corrupting a store).
pub fn files_below(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out
}
