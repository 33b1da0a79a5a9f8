//! Sending one request to the cluster: which node, how long, and whether it may be sent again.
//!
//! A request that may be repeated (every read, and every ID request: a range or a snowflake
//! batch fetched twice only burns IDs, gaps are allowed) fails over to the next node on a
//! transport error or a 5xx/transient answer, in rounds with a growing pause until the call's
//! deadline. A write that is not safe to repeat goes to the next node only when the previous one
//! refused the connection, so it surely sent nothing; any other failure is the caller's answer.
//! The node that answered last is asked first next time, so a dead or paused node costs one
//! attempt, not one per request.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::RwLock;
use std::time::Duration;
use std::time::Instant;

use reqwest::Method;
use serde::de::DeserializeOwned;

use crate::ClientError;
use crate::ErrorCode;

/// Whether a request may be sent again after an attempt that may have reached the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Repeat {
    /// Reads and ID requests: any node, again and again until the deadline.
    Safe,
    /// Reads that should answer for the first node that answers at all (status, probes): one
    /// round over the nodes.
    OneRound,
    /// Writes: another node only when nothing was sent.
    Never,
}

/// The settings of the transport, from the builder. Its `Debug` never shows the secret.
#[derive(Clone)]
pub(crate) struct Settings {
    pub seeds: Vec<String>,
    pub secret: Option<String>,
    /// PEM certificates of the CA(s) that sign the nodes' certificates: with them, only these are
    /// trusted (not the built-in roots) and a bare `host:port` means `https://`.
    pub ca_pem: Option<Vec<u8>>,
    pub timeout: Duration,
    pub attempt_timeout: Duration,
    pub discover: bool,
    pub retry_until_timeout: bool,
    pub refresh_every: Duration,
    /// The cluster given to the builder, if any (else learnt on first contact).
    pub cluster_id: Option<u64>,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("seeds", &self.seeds)
            .field("secret", &self.secret.as_ref().map(|_| "<redacted>"))
            .field("ca_pem", &self.ca_pem.is_some())
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
pub(crate) struct Transport {
    http: reqwest::Client,
    settings: Settings,
    nodes: RwLock<Arc<Vec<String>>>,
    preferred: AtomicUsize,
    last_refresh: Mutex<Option<Instant>>,
    requests: AtomicU64,
    /// The cluster this client talks to, 0 until the first node that answers names one. Sent with
    /// every request (`x-leafraft-cluster-id`): a node of another cluster serves nothing.
    cluster_id: AtomicU64,
}

/// The header that names a cluster (the node's `api::pin`).
const CLUSTER_ID_HEADER: &str = "x-leafraft-cluster-id";

/// `http://host:port` without a trailing slash (a bare `host:port` gets `http://`, or `https://`
/// when `tls`).
pub(crate) fn base_url(node: &str, tls: bool) -> String {
    let node = node.trim().trim_end_matches('/');
    if node.contains("://") {
        node.to_string()
    } else if tls {
        format!("https://{node}")
    } else {
        format!("http://{node}")
    }
}

/// An error and its causes on one line (reqwest's own message omits why a connection failed).
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// One attempt's failure, whether the request surely never left (or was refused unserved), and
/// whether the node belongs to another cluster (then the next node is asked).
struct Failure {
    error: ClientError,
    unsent: bool,
    foreign: bool,
}

impl Transport {
    pub fn new(settings: Settings) -> Result<Transport, ClientError> {
        if settings.seeds.is_empty() {
            return Err(ClientError::Config("no node given".into()));
        }
        let mut http = reqwest::Client::builder()
            .connect_timeout(settings.attempt_timeout)
            // Below a node's --header-read-timeout-ms (10 s by default), after which it closes an
            // idle kept-alive connection: a request sent on one the node is closing would fail,
            // and a write is not sent again.
            .pool_idle_timeout(Duration::from_secs(5));
        if let Some(pem) = &settings.ca_pem {
            let certificates = reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| ClientError::Config(format!("the CA is not PEM certificates: {}", chain(&e))))?;
            if certificates.is_empty() {
                return Err(ClientError::Config("the CA file holds no certificate".into()));
            }
            http = http.tls_built_in_root_certs(false);
            for certificate in certificates {
                http = http.add_root_certificate(certificate);
            }
        }
        let http = http.build().map_err(|e| ClientError::Config(chain(&e)))?;
        let nodes = RwLock::new(Arc::new(settings.seeds.clone()));
        let settings_cluster_id = settings.cluster_id.unwrap_or(0);
        Ok(Transport {
            http,
            settings,
            nodes,
            preferred: AtomicUsize::new(0),
            last_refresh: Mutex::new(None),
            requests: AtomicU64::new(0),
            cluster_id: AtomicU64::new(settings_cluster_id),
        })
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    pub fn requests(&self) -> u64 {
        self.requests.load(Relaxed)
    }

    pub fn nodes(&self) -> Arc<Vec<String>> {
        self.nodes.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The JSON answer of `path`, decoded.
    pub async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
        repeat: Repeat,
    ) -> Result<T, ClientError> {
        let bytes = self.send(method, path, body, repeat).await?;
        serde_json::from_slice(&bytes).map_err(|e| ClientError::Transport(format!("{path}: unexpected answer: {e}")))
    }

    /// The body of the first successful answer.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
        repeat: Repeat,
    ) -> Result<Vec<u8>, ClientError> {
        self.maybe_refresh().await;
        let started = Instant::now();
        let deadline = started + self.settings.timeout;
        let mut pause = Duration::from_millis(20);
        let mut last: Option<ClientError> = None;
        loop {
            let nodes = self.nodes();
            let first = self.preferred.load(Relaxed);
            // Whether every node asked in this round belongs to another cluster.
            let mut foreign_round = true;
            for offset in 0..nodes.len() {
                let at = (first + offset) % nodes.len();
                let remaining = deadline.saturating_duration_since(Instant::now());
                if remaining.is_zero() {
                    foreign_round = false;
                    break;
                }
                match self.attempt(&nodes[at], &method, path, body, remaining).await {
                    Ok(bytes) => {
                        self.preferred.store(at, Relaxed);
                        return Ok(bytes);
                    }
                    Err(failure) => {
                        let again = match repeat {
                            Repeat::Safe | Repeat::OneRound => failure.error.is_transient() || failure.foreign,
                            Repeat::Never => failure.unsent,
                        };
                        if !again {
                            return Err(failure.error);
                        }
                        foreign_round &= failure.foreign;
                        last = Some(failure.error);
                    }
                }
            }
            // Every node is of another cluster: that is the answer (`CLUSTER_MISMATCH`), at once,
            // not a wait until the timeout (which a taker waiting as long would see as `Timeout`).
            if foreign_round {
                if let Some(error) = last {
                    return Err(error);
                }
            }
            let keep_going = repeat == Repeat::Safe && self.settings.retry_until_timeout;
            let remaining = deadline.saturating_duration_since(Instant::now());
            if !keep_going || remaining.is_zero() {
                return Err(self.give_up(last, started, keep_going));
            }
            // Every node failed once: learn about members that joined (or moved), pause, go on.
            self.refresh().await;
            tokio::time::sleep(pause.min(remaining)).await;
            pause = (pause * 2).min(Duration::from_millis(500));
        }
    }

    fn give_up(&self, last: Option<ClientError>, started: Instant, timed_out: bool) -> ClientError {
        match last {
            // A node of another cluster is the answer, not a reason to wait longer.
            Some(error) if !timed_out || error.code() == Some(ErrorCode::ClusterMismatch) => error,
            Some(error) => ClientError::Timeout { waited: started.elapsed(), last: error.to_string() },
            None => ClientError::Timeout { waited: started.elapsed(), last: "no attempt fitted in the time".into() },
        }
    }

    async fn attempt(
        &self,
        node: &str,
        method: &Method,
        path: &str,
        body: Option<&serde_json::Value>,
        remaining: Duration,
    ) -> Result<Vec<u8>, Failure> {
        let url = format!("{node}{path}");
        let mut request = self.http.request(method.clone(), &url).timeout(remaining.min(self.settings.attempt_timeout));
        if let Some(secret) = &self.settings.secret {
            request = request.bearer_auth(secret);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let pinned = self.cluster_id.load(Relaxed);
        if pinned != 0 {
            request = request.header(CLUSTER_ID_HEADER, format!("{pinned:016x}"));
        }
        self.requests.fetch_add(1, Relaxed);
        let transport = |e: reqwest::Error| Failure {
            unsent: e.is_connect(),
            foreign: false,
            error: ClientError::Transport(format!("{url}: {}", chain(&e))),
        };
        let response = request.send().await.map_err(transport)?;
        let status = response.status();
        self.check_cluster(&url, pinned, status.as_u16(), response.headers())?;
        let bytes = response.bytes().await.map_err(transport)?;
        if status.is_success() {
            return Ok(bytes.to_vec());
        }
        let error = api_error(&url, status.as_u16(), &bytes);
        // A node that knows no cluster yet refuses a pinned request without naming one.
        let foreign = pinned != 0 && error.code() == Some(ErrorCode::ClusterMismatch) && status.as_u16() == 409;
        Err(Failure { unsent: foreign, foreign, error })
    }

    /// Learns the cluster from the first answer that names one, and refuses an answer of another
    /// cluster (a node of a second cluster at a member's address).
    fn check_cluster(
        &self,
        url: &str,
        pinned: u64,
        status: u16,
        headers: &reqwest::header::HeaderMap,
    ) -> Result<(), Failure> {
        let Some(answered) = headers
            .get(CLUSTER_ID_HEADER)
            .and_then(|value| value.to_str().ok())
            .and_then(|text| u64::from_str_radix(text, 16).ok())
            .filter(|id| *id != 0)
        else {
            return Ok(());
        };
        let expected = match self.cluster_id.compare_exchange(0, answered, Relaxed, Relaxed) {
            Ok(_) => return Ok(()),
            Err(expected) => expected,
        };
        if answered == expected {
            return Ok(());
        }
        let message = format!("{url} belongs to cluster {answered:016x}, this client talks to cluster {expected:016x}");
        // Refused unserved when the node saw the pin (409); an answer without it is dropped.
        let unsent = pinned == expected && status == 409;
        Err(Failure {
            unsent,
            foreign: true,
            error: ClientError::Api { status: 409, code: ErrorCode::ClusterMismatch, message },
        })
    }

    /// The node asked first now: the one that answered last (the planted bug's cue).
    #[cfg(feature = "conformance-plant")]
    pub fn last_node(&self) -> Option<String> {
        self.nodes().get(self.preferred.load(Relaxed)).cloned()
    }

    /// The cluster this client talks to, once known.
    pub fn cluster_id(&self) -> Option<u64> {
        Some(self.cluster_id.load(Relaxed)).filter(|id| *id != 0)
    }

    /// Refreshes the node list when it is older than the refresh period.
    async fn maybe_refresh(&self) {
        if !self.settings.discover {
            return;
        }
        let due = {
            let mut last = self.last_refresh.lock().unwrap_or_else(|e| e.into_inner());
            let due = last.is_none_or(|at| at.elapsed() >= self.settings.refresh_every);
            if due {
                *last = Some(Instant::now());
            }
            due
        };
        if due {
            self.refresh().await;
        }
    }

    /// The seeds and every member `/v1/cluster` names, from the first node that answers it. The
    /// preferred node stays preferred where it still is in the list.
    pub async fn refresh(&self) {
        if !self.settings.discover {
            return;
        }
        #[derive(serde::Deserialize)]
        struct Members {
            nodes: std::collections::BTreeMap<String, String>,
        }
        let nodes = self.nodes();
        let first = self.preferred.load(Relaxed);
        for offset in 0..nodes.len() {
            let node = &nodes[(first + offset) % nodes.len()];
            let Ok(bytes) = self.attempt(node, &Method::GET, "/v1/cluster", None, self.settings.attempt_timeout).await
            else {
                continue;
            };
            let Ok(members) = serde_json::from_slice::<Members>(&bytes) else { continue };
            let mut list = self.settings.seeds.clone();
            for addr in members.nodes.values() {
                let url = base_url(addr, self.settings.ca_pem.is_some());
                if !list.contains(&url) {
                    list.push(url);
                }
            }
            let preferred = nodes.get(first).and_then(|p| list.iter().position(|n| n == p)).unwrap_or(0);
            *self.nodes.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(list);
            self.preferred.store(preferred, Relaxed);
            return;
        }
    }
}

/// An error answer: the API's shape when it is one, a transport error otherwise.
fn api_error(url: &str, status: u16, bytes: &[u8]) -> ClientError {
    #[derive(serde::Deserialize)]
    struct Body {
        error: Inner,
    }
    #[derive(serde::Deserialize)]
    struct Inner {
        code: String,
        message: String,
    }
    match serde_json::from_slice::<Body>(bytes) {
        Ok(body) => ClientError::Api { status, code: ErrorCode::parse(&body.error.code), message: body.error.message },
        Err(_) => ClientError::Transport(format!(
            "{url}: HTTP {status}: {}",
            String::from_utf8_lossy(bytes).chars().take(200).collect::<String>()
        )),
    }
}
