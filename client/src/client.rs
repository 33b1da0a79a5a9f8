//! `Client` and its builder: the nodes, the secret, the time budget, and the handles per tag.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use leafraft_ids::IdRange;
use tokio::runtime::Handle;

use crate::batch::Batcher;
use crate::batch::MAX_PER_REQUEST;
use crate::segment::RangeSource;
use crate::segment::Sizing;
use crate::transport::base_url;
use crate::transport::Repeat;
use crate::transport::Settings;
use crate::transport::Transport;
use crate::ClientError;
use crate::ErrorCode;
use crate::Monotonic;
use crate::Segment;

/// A client of one leafraft cluster. Cheap to clone (clones share everything: nodes, buffers,
/// batches). Create one per process and keep it.
#[derive(Clone)]
pub struct Client {
    pub(crate) shared: Arc<Shared>,
}

pub(crate) struct Shared {
    pub(crate) transport: Arc<Transport>,
    runtime: Option<Handle>,
    sizing: Sizing,
    segments: Mutex<HashMap<String, Segment>>,
    snowflake: Arc<Batcher>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("nodes", &self.shared.transport.nodes()).finish()
    }
}

/// Settings of a [`Client`]; see [`Client::builder`]. Its `Debug` never shows the token.
#[derive(Clone)]
pub struct ClientBuilder {
    nodes: Vec<String>,
    secret: Option<String>,
    ca: Option<Ca>,
    timeout: Duration,
    attempt_timeout: Option<Duration>,
    discover: bool,
    retry_until_timeout: bool,
    refresh_every: Duration,
    sizing: Sizing,
    runtime: Option<Handle>,
    cluster_id: Option<u64>,
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("nodes", &self.nodes)
            .field("secret", &self.secret.as_ref().map(|_| "<redacted>"))
            .field("ca", &self.ca.is_some())
            .field("timeout", &self.timeout)
            .field("discover", &self.discover)
            .finish_non_exhaustive()
    }
}

impl Default for ClientBuilder {
    fn default() -> ClientBuilder {
        ClientBuilder {
            nodes: Vec::new(),
            secret: None,
            ca: None,
            timeout: Duration::from_secs(10),
            attempt_timeout: None,
            discover: true,
            retry_until_timeout: true,
            refresh_every: Duration::from_secs(30),
            sizing: Sizing { min: 1000, max: MAX_PER_REQUEST, duration: Duration::from_secs(60) },
            runtime: None,
            cluster_id: None,
        }
    }
}

impl ClientBuilder {
    /// The nodes to start from, `http://host:port` or `host:port`. With discovery on (the default)
    /// the members `/v1/cluster` names are added.
    pub fn nodes<I, S>(mut self, nodes: I) -> ClientBuilder
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.nodes = nodes.into_iter().map(|node| node.as_ref().to_string()).collect();
        self
    }

    /// The cluster secret, sent as `Authorization: Bearer` (needed by admin writes).
    pub fn secret(mut self, secret: impl Into<String>) -> ClientBuilder {
        self.secret = Some(secret.into());
        self
    }

    /// The same, from an `Option` (no secret when `None`).
    pub fn secret_opt(mut self, secret: Option<String>) -> ClientBuilder {
        self.secret = secret;
        self
    }

    /// A token (`--admin-token`, or a `--client-token` of the node), sent as `Authorization:
    /// Bearer`: the same header as [`secret`](Self::secret), which it replaces.
    pub fn token(self, token: impl Into<String>) -> ClientBuilder {
        self.secret(token)
    }

    /// The same, from an `Option` (no token when `None`).
    pub fn token_opt(self, token: Option<String>) -> ClientBuilder {
        self.secret_opt(token)
    }

    /// Verify the nodes' TLS certificates against these PEM CA certificates (only these: not the
    /// built-in roots); a node given as a bare `host:port`, and every member discovery finds, is
    /// then reached over `https://`.
    pub fn ca_pem(mut self, pem: impl Into<Vec<u8>>) -> ClientBuilder {
        self.ca = Some(Ca::Pem(pem.into()));
        self
    }

    /// The same, read from a PEM file when [`build`](Self::build) runs (a file that cannot be read
    /// or holds no certificate is a [`ClientError::Config`]).
    pub fn ca_file(mut self, path: impl Into<std::path::PathBuf>) -> ClientBuilder {
        self.ca = Some(Ca::File(path.into()));
        self
    }

    /// The most one call may take, failover and waiting for a range included [default: 10 s].
    /// A call that runs out answers [`ClientError::Timeout`].
    pub fn timeout(mut self, timeout: Duration) -> ClientBuilder {
        self.timeout = timeout;
        self
    }

    /// The most one HTTP attempt on one node may take before the next node is tried
    /// [default: the smaller of the timeout and 2 s]: a paused node costs this, once.
    pub fn attempt_timeout(mut self, timeout: Duration) -> ClientBuilder {
        self.attempt_timeout = Some(timeout);
        self
    }

    /// Whether to add the members `/v1/cluster` names to the given nodes [default: true]. Off,
    /// the client talks to exactly the given nodes.
    pub fn discover(mut self, discover: bool) -> ClientBuilder {
        self.discover = discover;
        self
    }

    /// The cluster to talk to (its ID, as `/v1/cluster` shows it in hex). Without it the client
    /// learns the ID from the first node that answers; either way, a node of another cluster is
    /// refused (`CLUSTER_MISMATCH`) and the next node asked.
    pub fn cluster_id(mut self, cluster_id: u64) -> ClientBuilder {
        self.cluster_id = Some(cluster_id);
        self
    }

    /// Whether ID requests and reads keep going round the nodes until the timeout [default:
    /// true]. Off, each is tried once per node and the last failure is the answer (what a probe or
    /// a test of one node wants).
    pub fn retry_until_timeout(mut self, retry: bool) -> ClientBuilder {
        self.retry_until_timeout = retry;
        self
    }

    /// The bounds of the range a segment handle fetches at a time [default: 1,000 to 10,000,
    /// the server's most per request], and how long a range should last: used up faster, the next
    /// is twice as large; slower than twice this, half (Leaf's dynamic step) [default: 60 s].
    pub fn range_size(mut self, min: u64, max: u64, lasting: Duration) -> ClientBuilder {
        let min = min.clamp(1, MAX_PER_REQUEST);
        self.sizing = Sizing { min, max: max.clamp(min, MAX_PER_REQUEST), duration: lasting };
        self
    }

    /// The runtime that refills buffers in the background [default: the one `build` runs in,
    /// else the one each call runs in].
    pub fn runtime(mut self, runtime: Handle) -> ClientBuilder {
        self.runtime = Some(runtime);
        self
    }

    pub fn build(self) -> Result<Client, ClientError> {
        if self.timeout.is_zero() {
            return Err(ClientError::Config("the timeout must be above zero".into()));
        }
        let ca_pem = match self.ca {
            None => None,
            Some(Ca::Pem(pem)) => Some(pem),
            Some(Ca::File(path)) => Some(
                std::fs::read(&path)
                    .map_err(|e| ClientError::Config(format!("cannot read the CA file {}: {e}", path.display())))?,
            ),
        };
        let tls = ca_pem.is_some();
        let settings = Settings {
            seeds: self.nodes.iter().map(|node| base_url(node, tls)).collect(),
            secret: self.secret,
            ca_pem,
            timeout: self.timeout,
            attempt_timeout: self.attempt_timeout.unwrap_or(Duration::from_secs(2)).min(self.timeout),
            discover: self.discover,
            retry_until_timeout: self.retry_until_timeout,
            refresh_every: self.refresh_every,
            cluster_id: self.cluster_id,
        };
        let transport = Arc::new(Transport::new(settings)?);
        let shared = Shared {
            transport,
            runtime: self.runtime.or_else(|| Handle::try_current().ok()),
            sizing: self.sizing,
            segments: Mutex::new(HashMap::new()),
            snowflake: Batcher::new("/v1/snowflake?"),
        };
        Ok(Client { shared: Arc::new(shared) })
    }
}

/// Where the CA certificates come from.
#[derive(Debug, Clone)]
enum Ca {
    Pem(Vec<u8>),
    File(std::path::PathBuf),
}

/// Fetches ranges over HTTP: the `RangeSource` of every handle of a client.
///
/// A scrambled tag's IDs form no ranges (the server answers `/ranges` with `MODE_MISMATCH`), so
/// for it the source asks Leaf's list path instead and hands each ID back as a range of one: the
/// handle serves them in the order they came, each once, as it serves any range.
struct HttpRanges {
    transport: Arc<Transport>,
    /// The tag answered `MODE_MISMATCH` on `/ranges` once: ask for lists from then on.
    lists: std::sync::atomic::AtomicBool,
}

impl HttpRanges {
    async fn ranges(&self, tag: &str, count: u64) -> Result<Vec<IdRange>, ClientError> {
        #[derive(serde::Deserialize)]
        struct Ranges {
            ranges: Vec<crate::views::Range>,
        }
        let path = format!("/v1/segment/{tag}/ranges?count={count}");
        // Safe to repeat: a range fetched and lost is only a gap.
        let answer: Ranges = self.transport.call(reqwest::Method::GET, &path, None, Repeat::Safe).await?;
        let ranges: Vec<IdRange> = answer.ranges.into_iter().map(IdRange::from).collect();
        fitting(&path, count, ranges)
    }

    async fn list(&self, tag: &str, count: u64) -> Result<Vec<IdRange>, ClientError> {
        let path = format!("/v1/segment/{tag}?");
        let ranges = crate::batch::fetch(&self.transport, &path, count)
            .await?
            .into_iter()
            .map(|id| id.checked_add(1).map(|end| IdRange { start: id, end }))
            .collect::<Option<Vec<IdRange>>>()
            .ok_or_else(|| ClientError::Transport(format!("{path}count={count}: an ID at the end of u64")))?;
        fitting(&path, count, ranges)
    }
}

/// `ranges` when they hold no more than `count` IDs and none is empty.
fn fitting(path: &str, count: u64, ranges: Vec<IdRange>) -> Result<Vec<IdRange>, ClientError> {
    let total = ranges.iter().try_fold(0u64, |sum, range| sum.checked_add(range.len()));
    match total {
        Some(total) if total <= count && ranges.iter().all(|r| r.start < r.end) => Ok(ranges),
        _ => Err(ClientError::Transport(format!("{path}: ranges that do not fit the request: {ranges:?}"))),
    }
}

impl RangeSource for HttpRanges {
    fn fetch(
        &self,
        tag: &str,
        count: u64,
    ) -> Pin<Box<dyn Future<Output = Result<Vec<IdRange>, ClientError>> + Send + '_>> {
        let tag = tag.to_string();
        Box::pin(async move {
            use std::sync::atomic::Ordering;
            if self.lists.load(Ordering::Relaxed) {
                return self.list(&tag, count).await;
            }
            match self.ranges(&tag, count).await {
                Err(error) if error.code() == Some(ErrorCode::ModeMismatch) => {
                    self.lists.store(true, Ordering::Relaxed);
                    self.list(&tag, count).await
                }
                answer => answer,
            }
        })
    }

    #[cfg(feature = "conformance-plant")]
    fn last_node(&self) -> Option<String> {
        self.transport.last_node()
    }
}

impl Client {
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// The cluster this client talks to: given to the builder, or learnt from the first node that
    /// answered (`None` until then).
    pub fn cluster_id(&self) -> Option<u64> {
        self.shared.transport.cluster_id()
    }

    /// The handle on `tag`'s IDs: every call for the same tag answers the same buffer.
    pub fn segment(&self, tag: &str) -> Segment {
        let mut segments = self.shared.segments.lock().unwrap_or_else(|e| e.into_inner());
        segments
            .entry(tag.to_string())
            .or_insert_with(|| {
                let source =
                    Arc::new(HttpRanges { transport: self.shared.transport.clone(), lists: Default::default() });
                let wait = self.shared.transport.settings().timeout;
                Segment::new(tag, source, self.shared.runtime.clone(), self.shared.sizing, wait)
            })
            .clone()
    }

    /// The handle on the monotonic `tag`'s IDs (`docs/semantics.md#strictly-increasing-tags`): one request per call, nothing kept.
    pub fn monotonic(&self, tag: &str) -> Monotonic {
        Monotonic::new(tag, self.shared.transport.clone())
    }

    /// One snowflake ID, fetched together with those other tasks ask for at the same time.
    pub async fn snowflake_id(&self) -> Result<u64, ClientError> {
        let ids = self.snowflake(1).await?;
        ids.first().copied().ok_or_else(|| ClientError::Transport("an empty snowflake answer".into()))
    }

    /// `count` snowflake IDs, batched with concurrent callers (never cached: they carry time).
    pub async fn snowflake(&self, count: u64) -> Result<Vec<u64>, ClientError> {
        let mut ids = Vec::with_capacity(count.min(MAX_PER_REQUEST) as usize);
        while (ids.len() as u64) < count {
            let ask = (count - ids.len() as u64).min(MAX_PER_REQUEST);
            let runtime = self.shared.runtime.as_ref();
            ids.extend(self.shared.snowflake.take(&self.shared.transport, runtime, ask).await?);
        }
        Ok(ids)
    }

    /// Closes every segment handle: their unused IDs are dropped (gaps, never served).
    pub fn close(&self) {
        let segments = std::mem::take(&mut *self.shared.segments.lock().unwrap_or_else(|e| e.into_inner()));
        for segment in segments.values() {
            segment.close();
        }
    }

    /// HTTP requests sent so far (every attempt on every node counts).
    pub fn http_requests(&self) -> u64 {
        self.shared.transport.requests()
    }

    /// The nodes the client knows now, as base URLs.
    pub fn nodes(&self) -> Vec<String> {
        self.shared.transport.nodes().to_vec()
    }

    /// The first node's base URL (for messages).
    pub fn base(&self) -> String {
        self.nodes().first().cloned().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_builder_never_shows_the_token() {
        let builder = super::Client::builder().nodes(["127.0.0.1:1"]).token("hunter2");
        let shown = format!("{builder:?}");
        assert!(!shown.contains("hunter2") && shown.contains("<redacted>"), "{shown}");
    }
}
