//! Fetching snowflake IDs over HTTP and judging them, for the snowflake tests.
//!
//! [`fetch`] asks `GET /v1/snowflake?count=N` or Leaf's `GET /api/snowflake/get/{key}` and
//! classifies the answer: IDs (checked for the shape `docs/api.md` promises: decimal strings,
//! `count` of them, strictly increasing, in `1..=2^63-1`), a documented error, no HTTP answer at
//! all, or anything else ([`Answer::Malformed`], which no test accepts). [`Layout`] takes IDs
//! apart on the test's side, independently of the server's decoder. [`FakeClock`] runs a node
//! under libfaketime with a clock the test can move.

use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;
use std::time::Instant;
use std::time::SystemTime;
use std::time::UNIX_EPOCH;

use reqwest::StatusCode;
use serde_json::Value;

use crate::harness::wait_until;
use crate::harness::ProcessCluster;
use crate::ids::clip;
use crate::ids::error_chain;

/// Debian's libfaketime (packages `faketime libfaketime`), the thread-safe flavour.
pub const FAKETIME_LIB: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

/// Leaf's `twepoch`, the default epoch.
pub const LEAF_EPOCH_MS: u64 = 1_288_834_974_657;

/// How IDs are laid out (the test's own copy; the server's decoder is checked against it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub epoch_ms: u64,
    pub worker_bits: u32,
    pub sequence_bits: u32,
}

/// An ID taken apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Parts {
    /// Unix milliseconds.
    pub timestamp_ms: u64,
    pub worker: u64,
    pub sequence: u64,
}

impl Layout {
    /// Leaf's: 41 bits of milliseconds since `twepoch`, 10 bits of worker, 12 of sequence.
    pub const LEAF: Layout = Layout { epoch_ms: LEAF_EPOCH_MS, worker_bits: 10, sequence_bits: 12 };

    pub fn parts(&self, id: u64) -> Parts {
        Parts {
            timestamp_ms: self.epoch_ms + (id >> (self.worker_bits + self.sequence_bits)),
            worker: (id >> self.sequence_bits) & ((1 << self.worker_bits) - 1),
            sequence: id & ((1 << self.sequence_bits) - 1),
        }
    }
}

/// One of the snowflake ID endpoints of `docs/api.md`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `GET /v1/snowflake?count=N`: a JSON list of IDs.
    Native(u64),
    /// `GET /api/snowflake/get/{key}`: one ID as text.
    Leaf,
}

impl Endpoint {
    pub fn path(self) -> String {
        match self {
            Endpoint::Native(count) => format!("/v1/snowflake?count={count}"),
            Endpoint::Leaf => "/api/snowflake/get/any-key".to_string(),
        }
    }
}

/// What one request to a snowflake endpoint gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Success: the IDs, strictly increasing.
    Ids(Vec<u64>),
    /// A documented error: native `{"error":{"code","message"}}` (`code` is its code), or Leaf's
    /// HTTP 500 `Result{id=-N, status=EXCEPTION}` (`code` is that body).
    Error { status: u16, code: String },
    /// No HTTP answer: refused or reset connection, or the client's timeout.
    Transport(String),
    /// An answer the spec does not allow on this path.
    Malformed(String),
}

/// Leaf's error body for code `id` (−1 not ready or clock still behind, −3 clock moved back).
pub fn leaf_error(id: i32) -> String {
    format!("Result{{id={id}, status=EXCEPTION}}")
}

/// An HTTP client for the tests' own requests (the harness's panics on transport errors).
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(10)).build().expect("HTTP client")
}

/// Asks `endpoint` of `base` (`http://host:port`) for IDs and judges the answer.
pub async fn fetch(http: &reqwest::Client, base: &str, endpoint: Endpoint) -> Answer {
    let url = format!("{base}{}", endpoint.path());
    let response = match http.get(&url).send().await {
        Ok(response) => response,
        Err(e) => return Answer::Transport(error_chain(&e)),
    };
    let status = response.status().as_u16();
    match response.text().await {
        Ok(body) => judge(endpoint, status, &body),
        Err(e) => Answer::Transport(error_chain(&e)),
    }
}

/// Whether `answer` says the node's committed window ran out before an extension committed
/// (native `WORKER_UNAVAILABLE`, Leaf −1): with short windows on a busy machine, a passing state.
pub fn is_worker_unavailable(answer: &Answer) -> bool {
    match answer {
        Answer::Error { status: 503, code } => code == "WORKER_UNAVAILABLE",
        Answer::Error { status: 500, code } => *code == leaf_error(-1),
        _ => false,
    }
}

/// [`fetch`] that must succeed; `WORKER_UNAVAILABLE` is retried for up to 10 s.
pub async fn fetch_ok(http: &reqwest::Client, base: &str, endpoint: Endpoint) -> Vec<u64> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match fetch(http, base, endpoint).await {
            Answer::Ids(ids) => return ids,
            answer if is_worker_unavailable(&answer) && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(10)).await
            }
            answer => panic!("GET {base}{}: {answer:?}", endpoint.path()),
        }
    }
}

fn judge(endpoint: Endpoint, status: u16, body: &str) -> Answer {
    let malformed = |why: &str| Answer::Malformed(format!("{why}: HTTP {status}: {}", clip(body)));
    let count = match endpoint {
        Endpoint::Leaf => {
            return match status {
                200 => match body.trim().parse::<u64>() {
                    Ok(id) if (1..=i64::MAX as u64).contains(&id) => Answer::Ids(vec![id]),
                    _ => malformed("not an ID in 1..=2^63-1"),
                },
                500 if body == leaf_error(-1) || body == leaf_error(-3) => {
                    Answer::Error { status, code: body.to_string() }
                }
                _ => malformed("not an answer of Leaf's snowflake path"),
            };
        }
        Endpoint::Native(count) => count,
    };
    let Ok(json) = serde_json::from_str::<Value>(body) else {
        return malformed("not JSON");
    };
    if status != 200 {
        return match json.pointer("/error/code").and_then(Value::as_str) {
            Some(code) if json.pointer("/error/message").is_some_and(Value::is_string) => {
                Answer::Error { status, code: code.to_string() }
            }
            _ => malformed("an error without {\"error\":{\"code\",\"message\"}}"),
        };
    }
    let Some(list) = json["ids"].as_array() else {
        return malformed("no \"ids\" list");
    };
    let mut ids = Vec::with_capacity(list.len());
    for id in list {
        let Some(id) = id.as_str().and_then(|s| s.parse::<u64>().ok()).filter(|id| (1..=i64::MAX as u64).contains(id))
        else {
            return malformed("an ID that is not a decimal string in 1..=2^63-1");
        };
        if ids.last().is_some_and(|&last| id <= last) {
            return malformed("IDs not strictly increasing");
        }
        ids.push(id);
    }
    if ids.len() as u64 != count {
        return malformed(&format!("{} IDs for count={count}", ids.len()));
    }
    Answer::Ids(ids)
}

/// This machine's wall clock, Unix ms.
pub fn now_ms() -> u64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970");
    u64::try_from(since.as_millis()).expect("ms fit u64")
}

/// `yyyy-MM-dd HH:mm:ss.SSS` of Unix ms `ms`, in UTC (civil-from-days, Howard Hinnant's).
pub fn utc_text(ms: u64) -> String {
    let days = i64::try_from(ms / 86_400_000).expect("days fit i64");
    let of_day = ms % 86_400_000;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s, milli) = (of_day / 3_600_000, of_day / 60_000 % 60, of_day / 1000 % 60, of_day % 1000);
    format!("{year:04}-{month:02}-{day:02} {h:02}:{m:02}:{s:02}.{milli:03}")
}

/// This node's snowflake state as `/readyz` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnowflakeReadiness {
    pub ready: bool,
    pub worker: Option<u64>,
    pub reason: String,
}

/// `/readyz` of the node at `base` (`http://host:port`): `Err` unless it answers 200 with a
/// `snowflake` object.
pub async fn readiness(http: &reqwest::Client, base: &str) -> Result<SnowflakeReadiness, String> {
    let url = format!("{base}/readyz");
    let response = http.get(&url).send().await.map_err(|e| format!("GET {url}: {}", error_chain(&e)))?;
    let status = response.status();
    let body: Value = response.json().await.map_err(|e| format!("GET {url}: {e}"))?;
    if status != StatusCode::OK {
        return Err(format!("GET {url}: {status} {body}"));
    }
    let snowflake = &body["snowflake"];
    Ok(SnowflakeReadiness {
        ready: snowflake["ready"].as_bool().ok_or_else(|| format!("no snowflake.ready in {body}"))?,
        worker: snowflake["worker_id"].as_u64(),
        reason: snowflake["reason"].as_str().unwrap_or_default().to_string(),
    })
}

/// Waits until `/readyz` of `id` says snowflake is served; answers the worker it holds.
pub async fn wait_snowflake_ready(cluster: &mut ProcessCluster, id: u64, timeout: Duration) -> u64 {
    let (http, base) = (http_client(), cluster.url(id));
    wait_until(timeout, &format!("node {id} to serve snowflake"), || async {
        let answer = readiness(&http, &base).await?;
        match answer.worker {
            Some(worker) if answer.ready => Ok(worker),
            _ => Err(format!("{answer:?}")),
        }
    })
    .await
}

/// Waits until `/readyz` of `id` answers 200 but refuses snowflake with a reason containing
/// `needle`; answers the reason.
pub async fn wait_snowflake_refused(cluster: &mut ProcessCluster, id: u64, needle: &str, timeout: Duration) -> String {
    let (http, base) = (http_client(), cluster.url(id));
    wait_until(timeout, &format!("node {id} to refuse snowflake because of '{needle}'"), || async {
        let answer = readiness(&http, &base).await?;
        if !answer.ready && answer.reason.contains(needle) {
            Ok(answer.reason)
        } else {
            Err(format!("{answer:?}"))
        }
    })
    .await
}

/// One lease of `/v1/workers`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    pub worker: u64,
    pub holder: Option<u64>,
    pub epoch: u64,
    pub window_end_ms: u64,
    pub floor_ms: u64,
    pub last_heartbeat_ms: u64,
}

/// The leases of a `/v1/workers` answer read through the client library.
pub fn leases(view: &leafraft_client::Workers) -> Vec<Lease> {
    view.workers
        .iter()
        .map(|w| Lease {
            worker: w.worker_id.into(),
            holder: w.holder,
            epoch: w.epoch,
            window_end_ms: w.window_end_ms,
            floor_ms: w.floor_ms,
            last_heartbeat_ms: w.last_heartbeat_ms,
        })
        .collect()
}

/// The worker registry as node `id` has applied it.
pub async fn workers(cluster: &mut ProcessCluster, id: u64) -> Vec<Lease> {
    let (status, body) = cluster.request(id, reqwest::Method::GET, "/v1/workers", None, None).await;
    assert_eq!(status, StatusCode::OK, "GET /v1/workers on node {id}: {body}");
    parse_workers(&body)
}

/// The leases of a `/v1/workers` body.
pub fn parse_workers(body: &Value) -> Vec<Lease> {
    let list = body["workers"].as_array().unwrap_or_else(|| panic!("no \"workers\" list in {body}"));
    list.iter()
        .map(|w| {
            let field = |name: &str| w[name].as_u64().unwrap_or_else(|| panic!("no {name} in worker {w}"));
            Lease {
                worker: field("worker_id"),
                holder: w["holder"].as_u64(),
                epoch: field("epoch"),
                window_end_ms: field("window_end_ms"),
                floor_ms: field("floor_ms"),
                last_heartbeat_ms: field("last_heartbeat_ms"),
            }
        })
        .collect()
}

/// The lease of `worker` in `leases`.
pub fn lease_of(leases: &[Lease], worker: u64) -> Lease {
    *leases.iter().find(|l| l.worker == worker).unwrap_or_else(|| panic!("no worker {worker} in {leases:?}"))
}

/// Waits until node `observer` has applied a lease of `worker` that `check` accepts (a node's
/// registry is its own replica: it may lag a write another node made, or even its own) and
/// answers it.
pub async fn wait_lease(
    cluster: &mut ProcessCluster,
    observer: u64,
    worker: u64,
    what: &str,
    check: impl Fn(&Lease) -> bool,
) -> Lease {
    let client = cluster.client(observer);
    wait_until(Duration::from_secs(20), &format!("node {observer} to show worker {worker} {what}"), || async {
        let view = client.workers().await.map_err(|e| e.to_string())?;
        let leases = leases(&view);
        match leases.iter().find(|l| l.worker == worker) {
            Some(lease) if check(lease) => Ok(*lease),
            _ => Err(format!("{leases:?}")),
        }
    })
    .await
}

/// Waits until every node of `nodes` shows the same lease of `worker` (nothing about it is in
/// flight any more) and answers it.
pub async fn settled_lease(cluster: &mut ProcessCluster, nodes: &[u64], worker: u64) -> Lease {
    let clients: Vec<_> = nodes.iter().map(|&id| cluster.client(id)).collect();
    wait_until(Duration::from_secs(20), &format!("nodes {nodes:?} to agree on worker {worker}"), || async {
        let mut seen = Vec::new();
        for client in &clients {
            let view = client.workers().await.map_err(|e| e.to_string())?;
            seen.push(leases(&view).into_iter().find(|l| l.worker == worker));
        }
        match seen.as_slice() {
            [Some(first), rest @ ..] if rest.iter().all(|l| l.as_ref() == Some(first)) => Ok(*first),
            _ => Err(format!("{seen:?}")),
        }
    })
    .await
}

/// How many Raft entries node `id` applies during `period` of wall time (for catching a node
/// that proposes in a loop).
pub async fn entries_applied_during(cluster: &mut ProcessCluster, id: u64, period: Duration) -> u64 {
    let applied = |status: leafraft_client::ClusterStatus| status.applied_index.unwrap_or(0);
    let before = applied(cluster.status(id).await.expect("cluster status"));
    tokio::time::sleep(period).await;
    let after = applied(cluster.status(id).await.expect("cluster status"));
    after - before
}

/// `now_ms` of `/v1/clock` of `id`, and this machine's clock halfway through the request.
pub async fn clock_of(cluster: &mut ProcessCluster, id: u64) -> (u64, u64) {
    let before = now_ms();
    let (status, body) = cluster.request(id, reqwest::Method::GET, "/v1/clock", None, None).await;
    let after = now_ms();
    assert_eq!(status, StatusCode::OK, "GET /v1/clock on node {id}: {body}");
    assert_eq!(body["node_id"].as_u64(), Some(id), "/v1/clock of node {id}: {body}");
    (body["now_ms"].as_u64().unwrap_or_else(|| panic!("no now_ms in {body}")), before + (after - before) / 2)
}

/// Panics, saying what to install, when libfaketime is missing (the clock tests fail rather
/// than skip).
fn require_faketime() {
    assert!(
        Path::new(FAKETIME_LIB).exists(),
        "{FAKETIME_LIB} is missing: the clock tests need libfaketime; install it with \
         `apt-get install -y faketime libfaketime`"
    );
}

/// Three members, 1 to 3, started with `flags`; node 3's clock runs under libfaketime from
/// `offset` (e.g. `"+0"`, `"-6s"`, `"+1h"`) and moves with the returned [`FakeClock`].
pub fn start_three_with_fake_clock_on_node_3(offset: &str, flags: &[&str]) -> (ProcessCluster, FakeClock) {
    let mut cluster = ProcessCluster::new();
    let members = [1, 2, 3];
    for id in members {
        cluster.reserve(id);
    }
    let clock = FakeClock::new(&cluster.data_dir(3).with_extension("faketime"), offset);
    cluster.set_env(3, clock.env());
    (cluster.start_members_with(&members, flags), clock)
}

/// A clock for one node under libfaketime, read from a file the test rewrites
/// (`FAKETIME_TIMESTAMP_FILE` with `FAKETIME_NO_CACHE=1`); monotonic clocks are left alone
/// (`FAKETIME_DONT_FAKE_MONOTONIC=1`), so the node's timers and `Instant`s run true.
pub struct FakeClock {
    file: PathBuf,
}

impl FakeClock {
    /// A clock offset by `spec` (libfaketime's syntax: `+1h`, `-10s`, `+0`), kept in `file`.
    /// Panics with what to install when libfaketime is missing.
    pub fn new(file: &Path, spec: &str) -> FakeClock {
        require_faketime();
        let clock = FakeClock { file: file.to_path_buf() };
        clock.set(spec);
        clock
    }

    /// Moves the clock: every later reading of the node's wall clock is offset by `spec`.
    pub fn set(&self, spec: &str) {
        let tmp = self.file.with_extension("tmp");
        std::fs::write(&tmp, format!("{spec}\n")).expect("write the faketime file");
        std::fs::rename(&tmp, &self.file).expect("replace the faketime file");
    }

    /// The environment of a node on this clock.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("LD_PRELOAD".into(), FAKETIME_LIB.into()),
            ("FAKETIME_TIMESTAMP_FILE".into(), self.file.display().to_string()),
            ("FAKETIME_NO_CACHE".into(), "1".into()),
            ("FAKETIME_DONT_FAKE_MONOTONIC".into(), "1".into()),
        ]
    }
}

/// The environment of a node whose clock is fixed at offset `spec` (`FAKETIME`).
pub fn fixed_offset_env(spec: &str) -> Vec<(String, String)> {
    require_faketime();
    vec![
        ("LD_PRELOAD".into(), FAKETIME_LIB.into()),
        ("FAKETIME".into(), spec.into()),
        ("FAKETIME_DONT_FAKE_MONOTONIC".into(), "1".into()),
    ]
}

/// Asserts that the clock of `id` is `expected_ms` off this machine's, within a second; the
/// message says libfaketime did not take if it is not.
pub async fn assert_clock_offset(cluster: &mut ProcessCluster, id: u64, expected_ms: i64) -> i64 {
    let (node, local) = clock_of(cluster, id).await;
    let offset = i64::try_from(node).unwrap() - i64::try_from(local).unwrap();
    assert!(
        (offset - expected_ms).abs() < 1000,
        "node {id}'s clock is {offset} ms off this machine's, not {expected_ms} ms: libfaketime ({FAKETIME_LIB}) \
         did not take"
    );
    offset
}
