//! `Config`: everything `leafraft serve` needs, validated, with no clap types in sight.
//!
//! Values come from three layers, flags over `LEAFRAFT_*` environment variables over a TOML file
//! (`--config`). Each layer is a [`Settings`] (every value optional): `cli.rs` gives the flags and
//! the environment as one, [`Settings::load`] reads the file, [`Settings::over`] stacks them, and
//! [`Config::resolve`] applies the defaults and checks the result.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::net::ToSocketAddrs;
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::clock::millis;
use crate::config::credentials::Credentials;
use crate::services::segments::SegmentConfig;
use crate::services::snowflakes::SnowflakeConfig;
use leafraft_state::NodeId;

/// How a node with an empty data directory joins the world.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bootstrap {
    /// The embedded default on loopback, or `--initial-cluster-state new`: a single-node cluster
    /// that initialises itself.
    Single,
    /// No flag says how to start, and the node advertises an address other hosts reach: an empty
    /// data directory refuses to start (see `founding`); one with data runs as before.
    Undecided,
    /// `--initial-cluster-state existing`: never found a cluster; wait until one adds this node.
    Existing,
    /// Every listed member is a voter of the first membership (etcd's `--initial-cluster`).
    InitialCluster(BTreeMap<NodeId, String>),
    /// Ask these members of a running cluster to add this node.
    Join(Vec<String>),
    /// A StatefulSet pod (`--statefulset-service`): found with the other initial pods only when
    /// every pod answers without a cluster, otherwise join the running one, replacing this pod's
    /// old incarnation first if its volume was lost (`statefulset`, `crate::node::bootstrap`).
    StatefulSet(Box<statefulset::Pods>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub node_id: NodeId,
    pub listen: SocketAddr,
    /// Where `/healthz` and `/readyz` are answered apart from the node port (`crate::api::probes`).
    pub probe_listen: Option<SocketAddr>,
    /// The address peers and clients reach this node at (`host:port`).
    pub advertise: String,
    pub data_dir: PathBuf,
    pub bootstrap: Bootstrap,
    /// Stay a learner after joining instead of asking to be promoted.
    pub learner: bool,
    /// The peer secret, admin token and client tokens this node accepts (and the peer secret it
    /// sends to its peers).
    pub credentials: Credentials,
    /// Where they come from: the admin and client tokens are read again on SIGHUP or when their
    /// files change (the peer secret stays: peers send it too).
    pub credential_source: CredentialSource,
    /// TLS on the node's port, and for what it sends to peers; `None`: plain HTTP.
    pub tls: Option<TlsFiles>,
    /// The timeouts and the cap every connection to the node's port is held to.
    pub connections: ConnectionLimits,
    /// Warnings to log once logging is up (a secret given as a flag, visible in `ps`).
    pub warnings: Vec<String>,
    /// fdatasync sled's data file after every flush (power-loss safety). Off only for experiments.
    pub fsync: bool,
    pub heartbeat: Duration,
    /// The lower bound of the randomised election timeout; the upper bound is twice this.
    pub election_timeout: Duration,
    /// How long a write may take to reach a leader and commit before `NO_LEADER`.
    pub write_timeout: Duration,
    /// How long adding a learner waits for it to catch up before `NO_LEADER` (it stays a learner).
    pub learner_timeout: Duration,
    pub log_format: LogFormat,
    pub segments: SegmentConfig,
    pub snowflake: SnowflakeConfig,
    /// How many tags have series of their own in `/metrics` (the busiest); every tag counts in
    /// the totals.
    pub metrics_tag_series: usize,
    /// Never raise the cluster version as leader (`--hold-cluster-version`): keeps rolling back
    /// to the previous release possible after every member runs the new one (`crate::upgrade`).
    pub hold_cluster_version: bool,
}

/// One layer of settings: the flags and environment variables, or the TOML file (`None`: not
/// given in this layer).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    pub node_id: Option<NodeId>,
    pub listen: Option<String>,
    pub probe_listen: Option<String>,
    pub advertise: Option<String>,
    pub data_dir: Option<PathBuf>,
    pub initial_cluster: Option<String>,
    pub join: Option<String>,
    /// `new` or `existing` (see `founding`).
    pub initial_cluster_state: Option<String>,
    pub learner: Option<bool>,
    /// The headless Service of a StatefulSet: derive node ID, address and peers (`statefulset`).
    pub statefulset_service: Option<String>,
    pub statefulset_pod: Option<String>,
    pub statefulset_initial: Option<u32>,
    pub statefulset_namespace: Option<String>,
    pub statefulset_domain: Option<String>,
    pub statefulset_hosts: Option<PathBuf>,
    pub statefulset_scale_down_after_ms: Option<u64>,
    pub secret: Option<SecretText>,
    pub secret_file: Option<PathBuf>,
    pub peer_secret: Option<SecretText>,
    pub peer_secret_file: Option<PathBuf>,
    pub admin_token: Option<SecretText>,
    pub admin_token_file: Option<PathBuf>,
    /// `NAME:TOKEN[:tag1,tag2]`, one per client.
    pub client_token: Option<Vec<SecretText>>,
    /// A file of client tokens, one `NAME:TOKEN[:tags]` a line (`#` comments).
    pub client_token_file: Option<PathBuf>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub peer_ca: Option<PathBuf>,
    pub ca: Option<PathBuf>,
    pub insecure: Option<bool>,
    pub admin_open: Option<bool>,
    pub client_open: Option<bool>,
    pub header_read_timeout_ms: Option<u64>,
    pub idle_timeout_ms: Option<u64>,
    pub max_connections: Option<usize>,
    pub max_connections_per_source: Option<usize>,
    pub fsync: Option<bool>,
    pub heartbeat_ms: Option<u64>,
    pub election_timeout_ms: Option<u64>,
    pub write_timeout_ms: Option<u64>,
    pub learner_timeout_ms: Option<u64>,
    pub log_format: Option<String>,
    pub segment_wait_ms: Option<u64>,
    pub preload: Option<bool>,
    pub segment_duration_ms: Option<u64>,
    pub segment_idle_ms: Option<u64>,
    pub metrics_tag_series: Option<usize>,
    pub snowflake_epoch_ms: Option<u64>,
    pub snowflake_time_bits: Option<u8>,
    pub snowflake_worker_bits: Option<u8>,
    pub snowflake_sequence_bits: Option<u8>,
    pub snowflake_window_ms: Option<u64>,
    pub worker_lease_ms: Option<u64>,
    pub max_clock_backward_ms: Option<u64>,
    pub max_clock_skew_ms: Option<u64>,
    pub snowflake_random_sequence: Option<bool>,
    pub hold_cluster_version: Option<bool>,
}

impl Settings {
    pub fn load(path: &Path) -> Result<Settings, String> {
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("cannot read config file {}: {e}", path.display()))?;
        toml::from_str(&text).map_err(|e| {
            // One line (`docs/semantics.md#command-line`): the message and where, without toml's multi-line snippet.
            let line = e
                .span()
                .map(|span| text.as_bytes()[..span.start.min(text.len())].iter().filter(|b| **b == b'\n').count() + 1);
            let at = line.map_or(String::new(), |line| format!(" (line {line})"));
            format!("bad config file {}: {}{at}", path.display(), e.message().trim().replace('\n', " "))
        })
    }

    /// `self` wins where it has a value; `lower` fills the rest.
    pub fn over(self, lower: Settings) -> Settings {
        Settings {
            node_id: self.node_id.or(lower.node_id),
            listen: self.listen.or(lower.listen),
            probe_listen: self.probe_listen.or(lower.probe_listen),
            advertise: self.advertise.or(lower.advertise),
            data_dir: self.data_dir.or(lower.data_dir),
            initial_cluster: self.initial_cluster.or(lower.initial_cluster),
            join: self.join.or(lower.join),
            initial_cluster_state: self.initial_cluster_state.or(lower.initial_cluster_state),
            learner: self.learner.or(lower.learner),
            statefulset_service: self.statefulset_service.or(lower.statefulset_service),
            statefulset_pod: self.statefulset_pod.or(lower.statefulset_pod),
            statefulset_initial: self.statefulset_initial.or(lower.statefulset_initial),
            statefulset_namespace: self.statefulset_namespace.or(lower.statefulset_namespace),
            statefulset_domain: self.statefulset_domain.or(lower.statefulset_domain),
            statefulset_hosts: self.statefulset_hosts.or(lower.statefulset_hosts),
            statefulset_scale_down_after_ms: self
                .statefulset_scale_down_after_ms
                .or(lower.statefulset_scale_down_after_ms),
            secret: self.secret.or(lower.secret),
            secret_file: self.secret_file.or(lower.secret_file),
            peer_secret: self.peer_secret.or(lower.peer_secret),
            peer_secret_file: self.peer_secret_file.or(lower.peer_secret_file),
            admin_token: self.admin_token.or(lower.admin_token),
            admin_token_file: self.admin_token_file.or(lower.admin_token_file),
            client_token: self.client_token.or(lower.client_token),
            client_token_file: self.client_token_file.or(lower.client_token_file),
            tls_cert: self.tls_cert.or(lower.tls_cert),
            tls_key: self.tls_key.or(lower.tls_key),
            peer_ca: self.peer_ca.or(lower.peer_ca),
            ca: self.ca.or(lower.ca),
            insecure: self.insecure.or(lower.insecure),
            admin_open: self.admin_open.or(lower.admin_open),
            client_open: self.client_open.or(lower.client_open),
            header_read_timeout_ms: self.header_read_timeout_ms.or(lower.header_read_timeout_ms),
            idle_timeout_ms: self.idle_timeout_ms.or(lower.idle_timeout_ms),
            max_connections: self.max_connections.or(lower.max_connections),
            max_connections_per_source: self.max_connections_per_source.or(lower.max_connections_per_source),
            fsync: self.fsync.or(lower.fsync),
            heartbeat_ms: self.heartbeat_ms.or(lower.heartbeat_ms),
            election_timeout_ms: self.election_timeout_ms.or(lower.election_timeout_ms),
            write_timeout_ms: self.write_timeout_ms.or(lower.write_timeout_ms),
            learner_timeout_ms: self.learner_timeout_ms.or(lower.learner_timeout_ms),
            log_format: self.log_format.or(lower.log_format),
            segment_wait_ms: self.segment_wait_ms.or(lower.segment_wait_ms),
            preload: self.preload.or(lower.preload),
            segment_duration_ms: self.segment_duration_ms.or(lower.segment_duration_ms),
            segment_idle_ms: self.segment_idle_ms.or(lower.segment_idle_ms),
            metrics_tag_series: self.metrics_tag_series.or(lower.metrics_tag_series),
            hold_cluster_version: self.hold_cluster_version.or(lower.hold_cluster_version),
            snowflake_epoch_ms: self.snowflake_epoch_ms.or(lower.snowflake_epoch_ms),
            snowflake_time_bits: self.snowflake_time_bits.or(lower.snowflake_time_bits),
            snowflake_worker_bits: self.snowflake_worker_bits.or(lower.snowflake_worker_bits),
            snowflake_sequence_bits: self.snowflake_sequence_bits.or(lower.snowflake_sequence_bits),
            snowflake_window_ms: self.snowflake_window_ms.or(lower.snowflake_window_ms),
            worker_lease_ms: self.worker_lease_ms.or(lower.worker_lease_ms),
            max_clock_backward_ms: self.max_clock_backward_ms.or(lower.max_clock_backward_ms),
            max_clock_skew_ms: self.max_clock_skew_ms.or(lower.max_clock_skew_ms),
            snowflake_random_sequence: self.snowflake_random_sequence.or(lower.snowflake_random_sequence),
        }
    }
}

impl Config {
    /// Applies the defaults to the merged layers and validates the result.
    pub fn resolve(layers: Settings) -> Result<Config, String> {
        let listen_text = layers.listen.clone().unwrap_or_else(|| "127.0.0.1:8080".to_string());
        let listen = resolve_addr(&listen_text)?;
        let (node_id, advertise, bootstrap) = resolve_membership(&layers, listen)?;
        let credential_source = CredentialSource::of(&layers)?;
        let credentials = credential_source.read().map_err(|e| e.message)?;
        let tls = resolve_tls(&layers)?;
        let peer_guarded = credentials.peer.is_some() || tls.as_ref().is_some_and(|t| t.peer_ca.is_some());
        let secured = tls.is_some() && peer_guarded && credentials.admin.is_some();
        let private = listen.ip().is_loopback() || layers.insecure.unwrap_or(false);
        if !private && !secured {
            return Err(format!(
                "--listen {listen} is reachable from other hosts: give --tls-cert/--tls-key, --peer-secret or \
                 --peer-ca, and --admin-token (--secret sets both), or --insecure to run without"
            ));
        }
        if !private && credential_source.may_open() {
            return Err(format!(
                "--admin-open and --client-open need a loopback --listen (not {listen}) or --insecure"
            ));
        }
        let (heartbeat, election_timeout, write_timeout) = resolve_timing(&layers)?;
        let learner_timeout = Duration::from_millis(layers.learner_timeout_ms.unwrap_or(60_000));
        if learner_timeout.is_zero() {
            return Err("--learner-timeout-ms must be above 0".into());
        }
        let log_format = match layers.log_format.as_deref() {
            None | Some("text") => LogFormat::Text,
            Some("json") => LogFormat::Json,
            Some(other) => return Err(format!("--log-format must be text or json, got '{other}'")),
        };
        let probe_listen = layers.probe_listen.as_deref().map(resolve_addr).transpose()?;
        Ok(Config {
            node_id,
            listen,
            probe_listen,
            advertise,
            data_dir: layers.data_dir.clone().unwrap_or_else(|| PathBuf::from("./leafraft-data")),
            bootstrap,
            learner: layers.learner.unwrap_or(false),
            credentials,
            credential_source,
            tls,
            connections: resolve_connections(&layers)?,
            warnings: Vec::new(),
            fsync: layers.fsync.unwrap_or(true),
            heartbeat,
            election_timeout,
            write_timeout,
            learner_timeout,
            log_format,
            segments: resolve_segments(&layers)?,
            snowflake: resolve_snowflake(&layers)?,
            metrics_tag_series: layers.metrics_tag_series.unwrap_or(crate::metrics::DEFAULT_TAG_SERIES),
            hold_cluster_version: layers.hold_cluster_version.unwrap_or(false),
        })
    }

    /// The openraft configuration these settings give, validated.
    pub fn raft_config(&self) -> Result<openraft::Config, String> {
        let config = openraft::Config {
            cluster_name: "leafraft".to_string(),
            heartbeat_interval: millis(self.heartbeat),
            election_timeout_min: millis(self.election_timeout),
            election_timeout_max: millis(self.election_timeout).saturating_mul(2),
            install_snapshot_timeout: 2000,
            snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(snapshot_interval(self.node_id)),
            max_in_snapshot_log_to_keep: 1000,
            purge_batch_size: 256,
            // The largest `/raft/*` body follows from these two (`leafraft_state::codec::MAX_RPC_BYTES`).
            snapshot_max_chunk_size: leafraft_state::codec::SNAPSHOT_CHUNK_BYTES,
            max_payload_entries: leafraft_state::codec::MAX_PAYLOAD_ENTRIES,
            ..Default::default()
        };
        config.validate().map_err(|e| format!("invalid Raft timing: {e}"))
    }
}

/// The entries a node applies between its snapshots: about a thousand, a different count on each
/// member. All members apply the same entries, so with one count they would all pause to build a
/// snapshot at the same index, together; with node IDs 1 to 5 the counts are 1,125 to 1,625 and
/// two members meet again only after thousands of entries.
pub fn snapshot_interval(node_id: NodeId) -> u64 {
    1000 + (node_id % 8) * 125
}

/// Heartbeat, election timeout and write timeout.
fn resolve_timing(layers: &Settings) -> Result<(Duration, Duration, Duration), String> {
    let heartbeat = Duration::from_millis(layers.heartbeat_ms.unwrap_or(50));
    // Measured: a new leader takes about 3.5 election timeouts after the old one dies; 300 ms
    // keeps that well inside the 2 s of `docs/bars.md#safety`.
    let election_timeout = Duration::from_millis(layers.election_timeout_ms.unwrap_or(300));
    if heartbeat.is_zero() || election_timeout <= heartbeat {
        return Err("--election-timeout-ms must be larger than --heartbeat-ms (and both above 0)".into());
    }
    let write_timeout = Duration::from_millis(layers.write_timeout_ms.unwrap_or(5000));
    if write_timeout.is_zero() {
        return Err("--write-timeout-ms must be above 0".into());
    }
    Ok((heartbeat, election_timeout, write_timeout))
}

fn resolve_addr(text: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    text.to_socket_addrs()
        .ok()
        .and_then(|mut addrs| addrs.next())
        .ok_or_else(|| format!("'{text}' is not a HOST:PORT address"))
}

pub mod credentials;
pub mod founding;
mod id_settings;
mod initial_cluster;
mod security;
pub mod statefulset;
#[cfg(test)]
mod tests;

use id_settings::resolve_segments;
use id_settings::resolve_snowflake;
pub use initial_cluster::parse_initial_cluster;
use initial_cluster::resolve_membership;
use security::resolve_connections;
use security::resolve_tls;
pub use security::ConnectionLimits;
pub use security::CredentialError;
pub use security::CredentialSource;
pub use security::Reread;
pub use security::SecretText;
pub use security::TlsFiles;
