//! The node processes of a run: start, kill -9, SIGTERM, SIGSTOP/SIGCONT, clocks, membership.
//!
//! Every node runs in its own network namespace when [`Net`] is available (otherwise on
//! 127.0.0.1 with its own port, and partitions are skipped), with libfaketime preloaded and
//! reading its offset from a file the runner rewrites (so a clock can move while the node runs).
//! Every process is started with `PR_SET_PDEATHSIG`, so nodes die with the runner.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;
use std::time::Instant;

use anyhow::bail;
use anyhow::Context;
use leafraft_harness::Serve;
use leafraft_harness::ServeProcess;
use serde_json::Value;

use crate::history::Incarnation;
use crate::net::Net;
use leafraft_tools::lazyfs::LazyMount;
use leafraft_tools::lazyfs::Lost;

/// Debian's libfaketime, multi-threaded variant.
pub const FAKETIME_LIB: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

/// Where clients reach a node, and which of its processes is running (0 = none yet).
#[derive(Clone)]
pub struct Target {
    pub id: u64,
    pub url: Arc<str>,
    pub incarnation: Arc<AtomicU32>,
    /// Which data directory the node runs on: bumped when its directory is wiped, since a node
    /// rebuilt from an empty directory is a new member with nothing it read before.
    pub disk: Arc<AtomicU32>,
}

impl Target {
    /// The incarnation running now, if the node has been started.
    pub fn incarnation(&self) -> Option<Incarnation> {
        match self.incarnation.load(Ordering::SeqCst) {
            0 => None,
            start => Some(Incarnation { node: self.id, start }),
        }
    }
}

struct Node {
    slot: usize,
    addr: String,
    data_dir: PathBuf,
    clock_file: PathBuf,
    /// `--initial-cluster …` or `--join … [--learner]`; a restart passes them again (a node with
    /// data ignores them).
    args: Vec<String>,
    /// Flags a fault added for later starts (`Nodes::set_extra_args`).
    extra_args: Vec<String>,
    child: Option<ServeProcess>,
    target: Target,
    paused: bool,
    clock_offset_ms: i64,
}

/// `serve_args` (flag and value pairs) without the flags `extra` sets again: clap refuses a flag
/// given twice.
fn overridden<'a>(serve_args: &'a [String], extra: &'a [String]) -> impl Iterator<Item = &'a String> {
    serve_args.chunks(2).filter(|pair| !extra.iter().any(|flag| flag.starts_with("--") && *flag == pair[0])).flatten()
}

pub struct Nodes {
    binary: PathBuf,
    dir: PathBuf,
    secret: String,
    net: Option<Net>,
    faketime: bool,
    planted: Option<String>,
    /// Flags every node gets (the snowflake layout and lease of the run).
    serve_args: Vec<String>,
    /// Every node's data on its own power-loss file system (`leafraft_tools::lazyfs`).
    lazy_disks: bool,
    mounts: Mutex<BTreeMap<u64, LazyMount>>,
    nodes: Mutex<BTreeMap<u64, Node>>,
    /// Node IDs ever used; a new node always gets a fresh one.
    next_id: AtomicU32,
    http: reqwest::Client,
    started: Instant,
}

/// A leader as seen at one moment: which process, at which term.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Leader {
    pub term: u64,
    pub node: u64,
    pub incarnation: u32,
}

/// What a node says about the cluster (`GET /v1/cluster`).
#[derive(Debug, Clone)]
pub struct View {
    pub node: u64,
    /// The node's incarnation when it was asked.
    pub incarnation: u32,
    pub role: String,
    pub term: u64,
    pub voters: Vec<u64>,
    pub learners: Vec<u64>,
}

impl Nodes {
    pub fn new(
        binary: PathBuf,
        dir: PathBuf,
        net: Option<Net>,
        faketime: bool,
        planted: Option<String>,
        serve_args: Vec<String>,
        lazy_disks: bool,
    ) -> anyhow::Result<Nodes> {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(2)).build()?;
        Ok(Nodes {
            binary,
            dir,
            secret: "chaos-secret".into(),
            net,
            faketime,
            planted,
            serve_args,
            lazy_disks,
            mounts: Mutex::new(BTreeMap::new()),
            nodes: Mutex::new(BTreeMap::new()),
            next_id: AtomicU32::new(1),
            http,
            started: Instant::now(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Node>> {
        self.nodes.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn partitions_available(&self) -> bool {
        self.net.is_some()
    }

    pub fn clocks_available(&self) -> bool {
        self.faketime
    }

    pub fn lazy_disks(&self) -> bool {
        self.lazy_disks
    }

    /// Mounts `id`'s own power-loss file system and answers where.
    fn mount_disk(&self, id: u64) -> anyhow::Result<PathBuf> {
        let root = self.dir.join(format!("node{id}.disk"));
        let mount = LazyMount::mount(&root, &self.dir.join(format!("node{id}.backing")))
            .with_context(|| format!("mount the power-loss file system of node {id}"))?;
        self.mounts.lock().unwrap_or_else(|e| e.into_inner()).insert(id, mount);
        Ok(root)
    }

    /// A power cut on `id`'s disk, whose process must be dead: what it never synced is gone.
    pub fn power_cut(&self, id: u64) -> anyhow::Result<Lost> {
        if self.is_running(id) {
            bail!("node {id} still runs");
        }
        let mounts = self.mounts.lock().unwrap_or_else(|e| e.into_inner());
        let Some(mount) = mounts.get(&id) else { bail!("node {id} has no power-loss mount") };
        // The kernel closes a killed process's files a moment after it is reaped.
        Ok(tokio::task::block_in_place(|| mount.power_cut(Duration::from_secs(5))))
    }

    /// A directory for `id`'s data recovered by `leafraft recover` (round `round`): on its disk.
    pub fn recovery_dir(&self, id: u64, round: u32) -> PathBuf {
        if self.lazy_disks {
            self.dir.join(format!("node{id}.disk")).join(format!("recovered{round}"))
        } else {
            self.dir.join(format!("node{id}.recovered{round}"))
        }
    }

    /// Gives a new node an ID, a slot (namespace or port) and a directory; does not start it.
    fn reserve(&self, args_for: impl FnOnce(&str) -> Vec<String>) -> anyhow::Result<u64> {
        let id = u64::from(self.next_id.fetch_add(1, Ordering::SeqCst));
        let mut nodes = self.lock();
        let used: Vec<usize> = nodes.values().map(|node| node.slot).collect();
        let slot = (0..).find(|slot| !used.contains(slot)).unwrap_or(0);
        let addr = match &self.net {
            Some(net) if slot < net.slots() => format!("{}:7000", net.addr(slot)),
            Some(_) => bail!("no free network namespace for node {id}"),
            None => format!("127.0.0.1:{}", free_port()?),
        };
        let data_dir =
            if self.lazy_disks { self.mount_disk(id)?.join("data") } else { self.dir.join(format!("node{id}")) };
        let clock_file = self.dir.join(format!("node{id}.faketime"));
        std::fs::write(&clock_file, "+0\n")?;
        let target = Target {
            id,
            url: Arc::from(format!("http://{addr}").as_str()),
            incarnation: Arc::new(AtomicU32::new(0)),
            disk: Arc::new(AtomicU32::new(0)),
        };
        let args = args_for(&addr);
        nodes.insert(
            id,
            Node {
                slot,
                addr,
                data_dir,
                clock_file,
                args,
                extra_args: Vec::new(),
                child: None,
                target,
                paused: false,
                clock_offset_ms: 0,
            },
        );
        Ok(id)
    }

    /// Reserves and starts the `n` initial members with one `--initial-cluster`.
    pub fn start_initial(&self, n: usize) -> anyhow::Result<Vec<u64>> {
        let mut ids = Vec::new();
        for _ in 0..n {
            ids.push(self.reserve(|_| Vec::new())?);
        }
        let initial = {
            let nodes = self.lock();
            ids.iter().map(|id| format!("{id}={}", nodes[id].addr)).collect::<Vec<_>>().join(",")
        };
        for id in &ids {
            if let Some(node) = self.lock().get_mut(id) {
                node.args = vec!["--initial-cluster".into(), initial.clone()];
            }
            self.start(*id)?;
        }
        Ok(ids)
    }

    /// Reserves and starts a brand-new node that asks the members to add it (`--join`).
    pub fn start_joining(&self, learner: bool) -> anyhow::Result<u64> {
        let members: Vec<String> = self.lock().values().filter(|n| n.child.is_some()).map(|n| n.addr.clone()).collect();
        let id = self.reserve(|_| {
            let mut args = vec!["--join".into(), members.join(",")];
            if learner {
                args.push("--learner".into());
            }
            args
        })?;
        self.start(id)?;
        Ok(id)
    }

    /// Starts a stopped node on its data directory (a new incarnation).
    pub fn start(&self, id: u64) -> anyhow::Result<()> {
        let mut nodes = self.lock();
        let Some(node) = nodes.get_mut(&id) else { bail!("no node {id}") };
        if node.child.is_some() {
            return Ok(());
        }
        let incarnation = node.target.incarnation.load(Ordering::SeqCst) + 1;
        let mut command = match &self.net {
            Some(net) => Serve::under(&net.exec_prefix(node.slot), &self.binary),
            None => Serve::new(&self.binary),
        };
        command.log_to(&self.dir.join(format!("node{id}.{incarnation}.log")))?;
        command
            .args(["--node-id", &id.to_string(), "--listen", &node.addr, "--advertise", &node.addr])
            .arg("--data-dir")
            .arg(&node.data_dir)
            .args(["--secret", &self.secret])
            // The nodes listen on the bridge's (non-loopback) addresses over plain HTTP.
            .arg("--insecure")
            .args(overridden(&self.serve_args, &node.extra_args))
            .args(&node.args)
            .args(&node.extra_args)
            .env("RUST_LOG", "info");
        if let Some(bug) = &self.planted {
            command.env("LEAFRAFT_PLANTED_BUG", bug);
        }
        if self.faketime {
            command
                .env("LD_PRELOAD", FAKETIME_LIB)
                .env("FAKETIME_TIMESTAMP_FILE", &node.clock_file)
                .env("FAKETIME_CACHE_DURATION", "1")
                .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        }
        let child = command.spawn().with_context(|| format!("start node {id}"))?;
        node.target.incarnation.store(incarnation, Ordering::SeqCst);
        node.child = Some(child);
        node.paused = false;
        Ok(())
    }

    /// Sends `signal` to `id`'s process, if it runs.
    fn signal(&self, id: u64, signal: i32) -> bool {
        let nodes = self.lock();
        let Some(child) = nodes.get(&id).and_then(|node| node.child.as_ref()) else { return false };
        child.signal(signal).is_ok()
    }

    /// kill -9, and reaps the process.
    pub fn kill(&self, id: u64) {
        self.signal(id, libc::SIGKILL);
        let child = self.lock().get_mut(&id).and_then(|node| node.child.take());
        if let Some(mut child) = child {
            let _ = child.kill();
        }
    }

    /// SIGTERM (the node gives back its buffer tails and worker), then waits for it to exit;
    /// kill -9 after `grace`. Answers whether it exited by itself.
    pub fn terminate(&self, id: u64, grace: Duration) -> bool {
        self.resume(id);
        if !self.signal(id, libc::SIGTERM) {
            return false;
        }
        let deadline = Instant::now() + grace;
        loop {
            let exited = {
                let mut nodes = self.lock();
                match nodes.get_mut(&id).and_then(|node| node.child.as_mut()) {
                    Some(child) => !child.is_running(),
                    None => true,
                }
            };
            if exited {
                if let Some(node) = self.lock().get_mut(&id) {
                    node.child = None;
                }
                return true;
            }
            if Instant::now() >= deadline {
                self.kill(id);
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn pause(&self, id: u64) {
        if self.signal(id, libc::SIGSTOP) {
            if let Some(node) = self.lock().get_mut(&id) {
                node.paused = true;
            }
        }
    }

    pub fn resume(&self, id: u64) {
        if self.signal(id, libc::SIGCONT) {
            if let Some(node) = self.lock().get_mut(&id) {
                node.paused = false;
            }
        }
    }

    /// Moves `id`'s wall clock to `offset_ms` from the real one (libfaketime rereads its file
    /// at most once a second).
    pub fn set_clock(&self, id: u64, offset_ms: i64) -> anyhow::Result<()> {
        let mut nodes = self.lock();
        let Some(node) = nodes.get_mut(&id) else { bail!("no node {id}") };
        let tmp = node.clock_file.with_extension("tmp");
        let sign = if offset_ms < 0 { "-" } else { "+" };
        let abs = offset_ms.unsigned_abs();
        std::fs::write(&tmp, format!("{sign}{}.{:03}\n", abs / 1000, abs % 1000))?;
        std::fs::rename(&tmp, &node.clock_file)?;
        node.clock_offset_ms = offset_ms;
        Ok(())
    }

    pub fn clock(&self, id: u64) -> i64 {
        self.lock().get(&id).map(|node| node.clock_offset_ms).unwrap_or(0)
    }

    /// Deletes the data directory of `id`, whose process must not run; it counts as a new disk.
    pub fn wipe(&self, id: u64) -> anyhow::Result<()> {
        let nodes = self.lock();
        let Some(node) = nodes.get(&id) else { bail!("no node {id}") };
        if node.child.is_some() {
            bail!("node {id} still runs");
        }
        match std::fs::remove_dir_all(&node.data_dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        }
        if self.lazy_disks {
            // The operator's wipe is done for good: a later power cut must not bring it back.
            if let Some(parent) = node.data_dir.parent() {
                File::open(parent)?.sync_all()?;
            }
        }
        node.target.disk.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// Flags `id` starts with from now on after every other one (a later `--election-timeout-ms`
    /// overrides the runner's): replaces what an earlier call set.
    pub fn set_extra_args(&self, id: u64, extra: Vec<String>) {
        if let Some(node) = self.lock().get_mut(&id) {
            node.extra_args = extra;
        }
    }

    /// The arguments `id` starts with from now on (`--initial-cluster …` or `--join …`).
    pub fn set_args(&self, id: u64, args: Vec<String>) {
        if let Some(node) = self.lock().get_mut(&id) {
            node.args = args;
        }
    }

    pub fn addr(&self, id: u64) -> Option<String> {
        self.lock().get(&id).map(|node| node.addr.clone())
    }

    /// Waits up to `timeout` for the process of `id` to exit by itself; reaps it and answers its
    /// status and the last line of its log, or `None` if it still runs.
    pub async fn wait_exit(&self, id: u64, timeout: Duration) -> Option<(std::process::ExitStatus, String)> {
        let deadline = Instant::now() + timeout;
        loop {
            let exited = {
                let mut nodes = self.lock();
                let node = nodes.get_mut(&id)?;
                match node.child.as_mut().map(|child| (child.try_exit(), child.is_running())) {
                    Some((Some(status), _)) => {
                        node.child = None;
                        let incarnation = node.target.incarnation.load(Ordering::SeqCst);
                        Some((status, incarnation))
                    }
                    Some((None, true)) => None,
                    _ => return None,
                }
            };
            if let Some((status, incarnation)) = exited {
                let log =
                    std::fs::read_to_string(self.dir.join(format!("node{id}.{incarnation}.log"))).unwrap_or_default();
                let last = log.lines().rev().find(|line| !line.trim().is_empty()).unwrap_or("").to_string();
                return Some((status, last));
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn data_dir(&self, id: u64) -> Option<PathBuf> {
        self.lock().get(&id).map(|node| node.data_dir.clone())
    }

    /// Points `id` at another data directory (a recovered cluster's) for its next starts.
    pub fn set_data_dir(&self, id: u64, dir: PathBuf) {
        if let Some(node) = self.lock().get_mut(&id) {
            node.data_dir = dir;
        }
    }

    /// The leafraft binary the nodes run.
    pub fn binary(&self) -> &std::path::Path {
        &self.binary
    }

    /// The run's directory: logs, data directories, clock files.
    pub fn run_dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// Forgets a removed node: kills it and deletes its data (its slot may host a new node).
    pub fn forget(&self, id: u64) {
        self.kill(id);
        if let Some(node) = self.lock().remove(&id) {
            let _ = std::fs::remove_dir_all(&node.data_dir);
        }
        self.mounts.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
    }

    pub fn ids(&self) -> Vec<u64> {
        self.lock().keys().copied().collect()
    }

    /// Nodes whose process runs and is not paused.
    pub fn running(&self) -> Vec<u64> {
        self.lock().iter().filter(|(_, n)| n.child.is_some() && !n.paused).map(|(id, _)| *id).collect()
    }

    pub fn is_running(&self, id: u64) -> bool {
        self.lock().get(&id).is_some_and(|node| node.child.is_some())
    }

    pub fn targets(&self) -> Vec<Target> {
        self.lock().values().map(|node| node.target.clone()).collect()
    }

    pub fn slot(&self, id: u64) -> Option<usize> {
        self.lock().get(&id).map(|node| node.slot)
    }

    pub fn url(&self, id: u64) -> Option<Arc<str>> {
        self.lock().get(&id).map(|node| node.target.url.clone())
    }

    pub fn net(&self) -> Option<&Net> {
        self.net.as_ref()
    }

    /// When the run started: the origin of every time in the history and the timeline.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// Time since the run started, for the timeline.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// `GET /v1/cluster` of `id`.
    pub async fn view(&self, id: u64) -> Option<View> {
        let url = self.url(id)?;
        let incarnation = self.incarnation(id);
        let answer =
            self.http.get(format!("{url}/v1/cluster")).timeout(Duration::from_millis(500)).send().await.ok()?;
        let body: Value = answer.json().await.ok()?;
        let ids = |key: &str| -> Vec<u64> {
            body[key].as_array().map(|a| a.iter().filter_map(Value::as_u64).collect()).unwrap_or_default()
        };
        Some(View {
            node: id,
            incarnation,
            role: body["role"].as_str().unwrap_or("?").to_string(),
            term: body["term"].as_u64().unwrap_or(0),
            voters: ids("voters"),
            learners: ids("learners"),
        })
    }

    /// What every running node says, asked in parallel.
    pub async fn views(&self) -> Vec<View> {
        let asks = self.running().into_iter().map(|id| self.view(id));
        futures::future::join_all(asks).await.into_iter().flatten().collect()
    }

    /// How many times `id` has been started (0: never, or forgotten).
    pub fn incarnation(&self, id: u64) -> u32 {
        self.lock().get(&id).map(|node| node.target.incarnation.load(Ordering::SeqCst)).unwrap_or(0)
    }

    /// The leader of the highest term any running node reports itself leader of.
    pub async fn leader(&self) -> Option<Leader> {
        self.views()
            .await
            .into_iter()
            .filter(|v| v.role == "leader")
            .map(|v| Leader { term: v.term, node: v.node, incarnation: v.incarnation })
            .max()
    }

    /// The membership as the leader sees it.
    pub async fn membership(&self) -> Option<(Vec<u64>, Vec<u64>)> {
        let leader = self.leader().await?;
        let view = self.view(leader.node).await?;
        Some((view.voters, view.learners))
    }

    /// A membership write sent to any running node (it forwards to the leader).
    pub async fn admin(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> anyhow::Result<()> {
        let mut last = String::from("no running node");
        for id in self.running() {
            let Some(url) = self.url(id) else { continue };
            let mut request = self
                .http
                .request(method.clone(), format!("{url}{path}"))
                .bearer_auth(&self.secret)
                .timeout(Duration::from_secs(10));
            if let Some(body) = &body {
                request = request.json(body);
            }
            match request.send().await {
                Ok(answer) if answer.status().is_success() => return Ok(()),
                Ok(answer) => {
                    let status = answer.status();
                    last = format!("{status}: {}", answer.text().await.unwrap_or_default());
                    if status.is_client_error() {
                        break;
                    }
                }
                Err(e) => last = e.to_string(),
            }
        }
        bail!("{method} {path}: {last}")
    }

    /// An operator call to node `id` alone, answered with its status, when the answer's head
    /// arrived (since the run started, the history's clock) and its JSON body (`Null` when the body
    /// is not JSON); or the transport error. No retry, no other node.
    pub async fn admin_at(
        &self,
        id: u64,
        method: reqwest::Method,
        path: &str,
        body: Value,
        timeout: Duration,
    ) -> anyhow::Result<(reqwest::StatusCode, Duration, Value)> {
        let Some(url) = self.url(id) else { bail!("node {id} is not part of the run") };
        let answer = self
            .http
            .request(method, format!("{url}{path}"))
            .bearer_auth(&self.secret)
            .timeout(timeout)
            .json(&body)
            .send()
            .await?;
        let answered = self.elapsed();
        let status = answer.status();
        Ok((status, answered, answer.json().await.unwrap_or(Value::Null)))
    }

    /// Kills every process (nodes must be gone before their namespaces are deleted).
    pub fn kill_all(&self) {
        for id in self.ids() {
            self.resume(id);
            self.kill(id);
        }
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        self.kill_all();
    }
}

fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}
