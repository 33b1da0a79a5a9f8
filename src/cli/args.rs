//! The command line's arguments (clap derive). Nothing else sees clap: `serve` arguments become a
//! `config::Settings` layer, the other subcommands run in `cli::commands`.

use std::path::PathBuf;

use clap::ArgAction;
use clap::Args;
use clap::Parser;
use clap::Subcommand;

use crate::config::Settings;

mod security;

pub use security::secret_flags_given;
pub use security::SecurityArgs;

mod timeseq;
pub use timeseq::*;

mod recover;
pub use recover::RecoverArgs;

mod statefulset;
pub use statefulset::StatefulSetArgs;

/// `leafraft --version`: the release and the commit it was built from (`build.rs`).
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("LEAFRAFT_COMMIT"), ")");

#[derive(Debug, Parser)]
#[command(name = "leafraft", version = VERSION, about = "A distributed ID service: Leaf's segment and snowflake IDs on Raft")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a node.
    Serve(Box<ServeArgs>),
    /// Inspect and change the cluster's membership.
    Cluster {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: ClusterCommand,
    },
    /// Create, list, inspect and change tags.
    Tag {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: TagCommand,
    },
    /// Fetch IDs.
    Id {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: IdCommand,
    },
    /// Explain a snowflake ID (time, worker, sequence) with the cluster's layout, or, with
    /// `--namespace`, a time-sequence ID of either form (time, shard, sequence).
    Decode {
        #[command(flatten)]
        client: ClientArgs,
        id: String,
        /// The time-sequence namespace the ID belongs to (a string-form ID needs it).
        #[arg(long)]
        namespace: Option<String>,
    },
    /// Sharded time-sequence namespaces.
    Timeseq {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: TimeseqCommand,
    },
    /// The snowflake worker registry.
    Worker {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: WorkerCommand,
    },
    /// Load generators and baselines (runs `leafraft-bench`, built from the `tools` crate, from
    /// beside this binary): `claims`, `http`, `etcd-claims`, `counter-server`.
    #[command(disable_help_flag = true)]
    Bench {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
    /// Probe `GET /readyz`: exit 0 when the node answers 200, 1 otherwise (a Docker HEALTHCHECK).
    Health {
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Write a consistent copy of the replicated state, read through the leader, to a file.
    Backup {
        #[command(flatten)]
        client: ClientArgs,
        /// The file to write (atomically: a temporary file beside it, synced, then renamed).
        #[arg(long, required_unless_present = "out_dir", conflicts_with = "out_dir")]
        out: Option<PathBuf>,
        /// A directory to write `leafraft-YYYYMMDDTHHMMSSZ.backup` into, named by the time the copy
        /// was taken (for a scheduler without a shell to make a name, such as a Kubernetes CronJob).
        #[arg(long)]
        out_dir: Option<PathBuf>,
        /// With --out-dir: then delete all but the newest N backups there (0 keeps every one).
        #[arg(long, default_value_t = 0, requires = "out_dir")]
        keep: usize,
    },
    /// After a lost majority: build a new one-member cluster from a survivor's data directory or a
    /// backup, with every max_id and the snowflake floor raised by a safety margin (docs/operations.md).
    Recover(Box<RecoverArgs>),
}

#[derive(Debug, Subcommand)]
pub enum IdCommand {
    /// Segment IDs of a tag, one per line.
    Segment {
        tag: String,
        #[arg(short = 'n', long = "count", default_value_t = 1)]
        count: u64,
    },
    /// Snowflake IDs from the server's worker, one per line.
    Snowflake {
        #[arg(short = 'n', long = "count", default_value_t = 1)]
        count: u64,
    },
    /// Time-sequence IDs of a namespace for one shard, one per line.
    Timeseq(TimeseqIdArgs),
}

#[derive(Debug, Subcommand)]
pub enum WorkerCommand {
    /// The worker registry: holders, epochs, windows; and the server's own snowflake state.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Free a worker whose holder is gone for good (the next holder starts above its window).
    Release { worker_id: u32 },
}

/// Every flag also reads `LEAFRAFT_<FLAG>` and the `--config` TOML file (flags > env > file).
#[derive(Debug, Args, Default)]
pub struct ServeArgs {
    /// TOML file with any of these settings (keys as the flags, with underscores).
    #[arg(long, env = "LEAFRAFT_CONFIG")]
    pub config: Option<PathBuf>,
    /// This node's ID [default: 1].
    #[arg(long, env = "LEAFRAFT_NODE_ID")]
    pub node_id: Option<u64>,
    /// Address to listen on for clients, operators and peers [default: 127.0.0.1:8080].
    #[arg(long, env = "LEAFRAFT_LISTEN")]
    pub listen: Option<String>,
    /// A second address answering only /healthz and /readyz, plain HTTP, outside --max-connections:
    /// for liveness probes and health checks that must not wait behind clients, TLS or not.
    #[arg(long, env = "LEAFRAFT_PROBE_LISTEN")]
    pub probe_listen: Option<String>,
    /// Address peers and clients reach this node at [default: the listen address].
    #[arg(long, env = "LEAFRAFT_ADVERTISE")]
    pub advertise: Option<String>,
    /// Where this node keeps its Raft log and state [default: ./leafraft-data].
    #[arg(long, env = "LEAFRAFT_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// The first members, `1=HOST:PORT,2=HOST:PORT,...`; the same on every member.
    #[arg(long, env = "LEAFRAFT_INITIAL_CLUSTER")]
    pub initial_cluster: Option<String>,
    /// Members of a running cluster to ask for admission, `HOST:PORT[,HOST:PORT]`.
    #[arg(long, env = "LEAFRAFT_JOIN")]
    pub join: Option<String>,
    /// On an empty data dir: `new` founds a cluster, `existing` waits to be added [default: new on
    /// a loopback address; elsewhere one must be given, or --join].
    #[arg(long, env = "LEAFRAFT_INITIAL_CLUSTER_STATE", value_name = "new|existing")]
    pub initial_cluster_state: Option<String>,
    /// Stay a learner after joining (serves IDs, does not vote).
    #[arg(long, env = "LEAFRAFT_LEARNER", action = ArgAction::SetTrue)]
    pub learner: bool,
    #[command(flatten)]
    pub statefulset: StatefulSetArgs,
    #[command(flatten)]
    pub security: SecurityArgs,
    /// Allow listening on a non-loopback address without TLS and credentials.
    #[arg(long, env = "LEAFRAFT_INSECURE", action = ArgAction::SetTrue)]
    pub insecure: bool,
    /// fdatasync after every flush [default: true]; false is unsafe on power loss.
    #[arg(long, env = "LEAFRAFT_FSYNC")]
    pub fsync: Option<bool>,
    /// Raft heartbeat interval [default: 50].
    #[arg(long, env = "LEAFRAFT_HEARTBEAT_MS")]
    pub heartbeat_ms: Option<u64>,
    /// Lower bound of the randomised election timeout; the upper is twice it [default: 300].
    #[arg(long, env = "LEAFRAFT_ELECTION_TIMEOUT_MS")]
    pub election_timeout_ms: Option<u64>,
    /// How long a write may take to commit before NO_LEADER [default: 5000].
    #[arg(long, env = "LEAFRAFT_WRITE_TIMEOUT_MS")]
    pub write_timeout_ms: Option<u64>,
    /// How long adding a learner waits for it to catch up before answering 503 [default: 60000].
    #[arg(long, env = "LEAFRAFT_LEARNER_TIMEOUT_MS")]
    pub learner_timeout_ms: Option<u64>,
    /// Log format: text or json [default: text].
    #[arg(long, env = "LEAFRAFT_LOG_FORMAT")]
    pub log_format: Option<String>,
    /// How long an ID request waits for the next segment when both buffers are empty [default: 100]
    /// (a tag's first segment on a node is waited for at least 1 s: Leaf's synchronous first load).
    #[arg(long, env = "LEAFRAFT_SEGMENT_WAIT_MS")]
    pub segment_wait_ms: Option<u64>,
    /// Load a segment for every tag at start instead of on its first request.
    #[arg(long, env = "LEAFRAFT_PRELOAD", action = ArgAction::SetTrue)]
    pub preload: bool,
    /// Dynamic step: a segment used up faster than this doubles the next step, slower than twice
    /// this halves it [default: 900000, Leaf's 15 minutes].
    #[arg(long, env = "LEAFRAFT_SEGMENT_DURATION_MS")]
    pub segment_duration_ms: Option<u64>,
    /// A tag's buffers that served nothing for this long are dropped and their unused tail given
    /// back; the next request loads anew (0: never) [default: 600000].
    #[arg(long, env = "LEAFRAFT_SEGMENT_IDLE_MS")]
    pub segment_idle_ms: Option<u64>,
    /// How many tags have series of their own in /metrics, the busiest since the previous scrape;
    /// every tag counts in the `_all_tags` totals [default: 100].
    #[arg(long, env = "LEAFRAFT_METRICS_TAG_SERIES")]
    pub metrics_tag_series: Option<usize>,
    /// Never raise the cluster version while this node leads, so that every member can still go
    /// back to the previous release; give it to every node (any may lead), remove it to finish an
    /// upgrade.
    #[arg(long, env = "LEAFRAFT_HOLD_CLUSTER_VERSION", action = ArgAction::SetTrue)]
    pub hold_cluster_version: bool,
    /// Snowflake: Unix ms of timestamp zero [default: 1288834974657, Leaf's twepoch].
    #[arg(long, env = "LEAFRAFT_SNOWFLAKE_EPOCH_MS")]
    pub snowflake_epoch_ms: Option<u64>,
    /// Snowflake: bits of milliseconds [default: 41].
    #[arg(long, env = "LEAFRAFT_SNOWFLAKE_TIME_BITS")]
    pub snowflake_time_bits: Option<u8>,
    /// Snowflake: bits of worker ID [default: 10].
    #[arg(long, env = "LEAFRAFT_SNOWFLAKE_WORKER_BITS")]
    pub snowflake_worker_bits: Option<u8>,
    /// Snowflake: bits of sequence [default: 12].
    #[arg(long, env = "LEAFRAFT_SNOWFLAKE_SEQUENCE_BITS")]
    pub snowflake_sequence_bits: Option<u8>,
    /// Snowflake: how far ahead of the clock the committed window reaches [default: 10000].
    #[arg(long, env = "LEAFRAFT_SNOWFLAKE_WINDOW_MS")]
    pub snowflake_window_ms: Option<u64>,
    /// A worker whose holder has not extended for this long can be taken over [default: 60000].
    #[arg(long, env = "LEAFRAFT_WORKER_LEASE_MS")]
    pub worker_lease_ms: Option<u64>,
    /// Serve from the last timestamp when the clock steps back at most this far [default: 1000].
    #[arg(long, env = "LEAFRAFT_MAX_CLOCK_BACKWARD_MS")]
    pub max_clock_backward_ms: Option<u64>,
    /// Refuse snowflake while this node's clock is further than this from its peers' [default: 1000].
    #[arg(long, env = "LEAFRAFT_MAX_CLOCK_SKEW_MS")]
    pub max_clock_skew_ms: Option<u64>,
    /// Start each millisecond's sequence at a small random number, as Leaf can.
    #[arg(long, env = "LEAFRAFT_SNOWFLAKE_RANDOM_SEQUENCE", action = ArgAction::SetTrue)]
    pub snowflake_random_sequence: bool,
}

impl ServeArgs {
    /// The flag-and-environment layer of the configuration.
    pub fn layer(&self) -> Settings {
        let security = &self.security;
        self.statefulset.layer(Settings {
            node_id: self.node_id,
            listen: self.listen.clone(),
            probe_listen: self.probe_listen.clone(),
            advertise: self.advertise.clone(),
            data_dir: self.data_dir.clone(),
            initial_cluster: self.initial_cluster.clone(),
            join: self.join.clone(),
            initial_cluster_state: self.initial_cluster_state.clone(),
            learner: self.learner.then_some(true),
            secret: security.secret.clone().map(Into::into),
            secret_file: security.secret_file.clone(),
            peer_secret: security.peer_secret.clone().map(Into::into),
            peer_secret_file: security.peer_secret_file.clone(),
            admin_token: security.admin_token.clone().map(Into::into),
            admin_token_file: security.admin_token_file.clone(),
            client_token: (!security.client_token.is_empty())
                .then(|| security.client_token.iter().map(|token| token.as_str().into()).collect()),
            client_token_file: security.client_token_file.clone(),
            tls_cert: security.tls_cert.clone(),
            tls_key: security.tls_key.clone(),
            peer_ca: security.peer_ca.clone(),
            ca: security.ca.clone(),
            admin_open: security.admin_open.then_some(true),
            client_open: security.client_open.then_some(true),
            header_read_timeout_ms: security.header_read_timeout_ms,
            idle_timeout_ms: security.idle_timeout_ms,
            max_connections: security.max_connections,
            max_connections_per_source: security.max_connections_per_source,
            insecure: self.insecure.then_some(true),
            fsync: self.fsync,
            heartbeat_ms: self.heartbeat_ms,
            election_timeout_ms: self.election_timeout_ms,
            write_timeout_ms: self.write_timeout_ms,
            learner_timeout_ms: self.learner_timeout_ms,
            log_format: self.log_format.clone(),
            segment_wait_ms: self.segment_wait_ms,
            preload: self.preload.then_some(true),
            segment_duration_ms: self.segment_duration_ms,
            segment_idle_ms: self.segment_idle_ms,
            metrics_tag_series: self.metrics_tag_series,
            hold_cluster_version: self.hold_cluster_version.then_some(true),
            snowflake_epoch_ms: self.snowflake_epoch_ms,
            snowflake_time_bits: self.snowflake_time_bits,
            snowflake_worker_bits: self.snowflake_worker_bits,
            snowflake_sequence_bits: self.snowflake_sequence_bits,
            snowflake_window_ms: self.snowflake_window_ms,
            worker_lease_ms: self.worker_lease_ms,
            max_clock_backward_ms: self.max_clock_backward_ms,
            max_clock_skew_ms: self.max_clock_skew_ms,
            snowflake_random_sequence: self.snowflake_random_sequence.then_some(true),
            ..Settings::default()
        })
    }
}

/// `Debug` never shows the secret or the token.
#[derive(Args, Clone)]
pub struct ClientArgs {
    /// The node to talk to.
    #[arg(long, env = "LEAFRAFT_SERVER", default_value = "http://127.0.0.1:8080", global = true)]
    pub server: String,
    /// Cluster secret, sent with writes.
    #[arg(long, env = "LEAFRAFT_SECRET", hide_env_values = true, global = true)]
    pub secret: Option<String>,
    /// An admin or client token, sent as `Authorization: Bearer` (instead of --secret). Prefer
    /// --token-file or the LEAFRAFT_TOKEN variable: a flag's value shows in `ps` and in shell history.
    #[arg(long, env = "LEAFRAFT_TOKEN", hide_env_values = true, global = true)]
    pub token: Option<String>,
    /// A file holding the token (its first line; surrounding whitespace is ignored), such as the
    /// admin-token file the nodes read: the token is never on a command line.
    #[arg(long, env = "LEAFRAFT_TOKEN_FILE", global = true, conflicts_with = "token")]
    pub token_file: Option<PathBuf>,
    /// CA certificates (PEM) to verify the node's TLS certificate with (give an https:// --server).
    #[arg(long, env = "LEAFRAFT_CA", global = true)]
    pub ca: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Members, roles, leader, term and log indexes.
    Status {
        #[arg(long)]
        json: bool,
    },
    /// Add a node (started with `--join` or empty): as a learner, then promote it once caught up.
    Add {
        #[arg(long)]
        node_id: u64,
        #[arg(long)]
        addr: String,
        /// Keep it a learner.
        #[arg(long)]
        learner: bool,
    },
    /// Take a node out of the membership.
    Remove {
        #[arg(long)]
        node_id: u64,
    },
}

#[derive(Debug, Subcommand)]
pub enum TagCommand {
    Create(TagFields),
    /// Every tag with its mode, max_id, step and the answering node's buffers.
    List {
        #[arg(long)]
        json: bool,
    },
    Get {
        name: String,
    },
    /// Change a tag's step or description, or raise its max_id.
    Update(TagFields),
    /// Move tags over from Leaf: FILE is the tab-separated output of
    /// `SELECT biz_tag, max_id, step, description FROM leaf_alloc` (header optional). New tags are
    /// created, existing ones raised (never lowered); any bad row, or one whose max_id is below
    /// the cluster's, rejects the whole file and nothing is applied.
    Import {
        file: PathBuf,
        /// Print what would change (create / raise / update / unchanged) and change nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

/// A tag and the fields `tag create` sets and `tag update` changes.
#[derive(Debug, Args)]
pub struct TagFields {
    pub name: String,
    #[arg(long)]
    pub step: Option<u64>,
    #[arg(long)]
    pub max_id: Option<u64>,
    #[arg(long)]
    pub description: Option<String>,
    /// `segment` (every node serves from its own ranges) or `monotonic` (the leader serves, in
    /// real-time order); a tag moves only from segment to monotonic.
    #[arg(long, value_parser = ["segment", "monotonic"])]
    pub mode: Option<String>,
    /// Serve the tag's IDs through a keyed permutation of its ID space, so that they show
    /// neither how many were handed out nor their order (creation only; segment tags only).
    #[arg(long)]
    pub scramble: bool,
    /// With --scramble: the width of the tag's ID space, 16 to 63 bits (default 63); IDs lie in
    /// [1, 2^BITS - 1), so fewer bits give shorter IDs and a tag exhausted sooner.
    #[arg(long, requires = "scramble")]
    pub scramble_bits: Option<u8>,
}
