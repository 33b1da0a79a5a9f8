//! The command line (clap derive). Nothing below this module sees clap: `serve` arguments become
//! a `config::FileConfig` layer, client subcommands call `client::Client`.

use std::path::PathBuf;

use clap::ArgAction;
use clap::Args;
use clap::Parser;
use clap::Subcommand;

use crate::config::FileConfig;

#[derive(Debug, Parser)]
#[command(name = "leafraft", version, about = "A distributed ID service: Leaf's segment and snowflake IDs on Raft")]
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
    /// Explain a snowflake ID (time, worker, sequence) with the cluster's layout.
    Decode {
        #[command(flatten)]
        client: ClientArgs,
        id: String,
    },
    /// The snowflake worker registry.
    Worker {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: WorkerCommand,
    },
    /// Built-in benchmarks.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Probe `GET /readyz`: exit 0 when the node answers 200, 1 otherwise (a Docker HEALTHCHECK).
    Health {
        #[command(flatten)]
        client: ClientArgs,
    },
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

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Raft-committed segment claims per second and their latency on a local in-process cluster.
    Claims {
        /// Cluster size.
        #[arg(long, default_value_t = 3)]
        nodes: usize,
        /// Concurrent claimers, one run per value.
        #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
        concurrency: Vec<usize>,
        /// Seconds per run.
        #[arg(long, default_value_t = 5)]
        duration_secs: u64,
        /// fdatasync every log write (as in production).
        #[arg(long, default_value_t = true, action = ArgAction::Set)]
        fsync: bool,
    },
    /// HTTP load: keep-alive connections, fixed duration, latency histogram, duplicate check.
    Http {
        /// Target URLs (comma separated); workers are spread over them.
        #[arg(long = "url", value_delimiter = ',', required = true)]
        urls: Vec<String>,
        /// Concurrent connections.
        #[arg(long, default_value_t = 8)]
        concurrency: usize,
        #[arg(long, default_value_t = 10)]
        duration_secs: u64,
        /// Total requests per second (default: as fast as possible).
        #[arg(long)]
        rate: Option<f64>,
        /// Skip collecting IDs for the duplicate check.
        #[arg(long)]
        no_check: bool,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The claims baseline: the same claim as a compare-and-swap transaction on etcd.
    #[command(hide = true)]
    EtcdClaims {
        /// etcd client URLs (comma separated), e.g. http://127.0.0.1:2379.
        #[arg(long = "endpoint", value_delimiter = ',', required = true)]
        endpoints: Vec<String>,
        #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
        concurrency: Vec<usize>,
        #[arg(long, default_value_t = 5)]
        duration_secs: u64,
    },
    /// A trivial axum server answering an atomic counter: the baseline `scripts/bench.sh`
    /// compares leafraft against.
    #[command(hide = true)]
    CounterServer {
        #[arg(long, default_value = "127.0.0.1:8099")]
        listen: String,
    },
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
    /// Stay a learner after joining (serves IDs, does not vote).
    #[arg(long, env = "LEAFRAFT_LEARNER", action = ArgAction::SetTrue)]
    pub learner: bool,
    /// Cluster secret: needed by peers (`/raft/*`) and for every write.
    #[arg(long, env = "LEAFRAFT_SECRET", hide_env_values = true)]
    pub secret: Option<String>,
    /// Allow listening on a non-loopback address without a secret.
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
    /// Log format: text or json [default: text].
    #[arg(long, env = "LEAFRAFT_LOG_FORMAT")]
    pub log_format: Option<String>,
    /// How long an ID request waits for the next segment when both buffers are empty [default: 100].
    #[arg(long, env = "LEAFRAFT_SEGMENT_WAIT_MS")]
    pub segment_wait_ms: Option<u64>,
    /// Load a segment for every tag at start instead of on its first request.
    #[arg(long, env = "LEAFRAFT_PRELOAD", action = ArgAction::SetTrue)]
    pub preload: bool,
    /// Dynamic step: a segment used up faster than this doubles the next step, slower than twice
    /// this halves it [default: 900000, Leaf's 15 minutes].
    #[arg(long, env = "LEAFRAFT_SEGMENT_DURATION_MS")]
    pub segment_duration_ms: Option<u64>,
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
    pub fn layer(&self) -> FileConfig {
        FileConfig {
            node_id: self.node_id,
            listen: self.listen.clone(),
            advertise: self.advertise.clone(),
            data_dir: self.data_dir.clone(),
            initial_cluster: self.initial_cluster.clone(),
            join: self.join.clone(),
            learner: self.learner.then_some(true),
            secret: self.secret.clone(),
            insecure: self.insecure.then_some(true),
            fsync: self.fsync,
            heartbeat_ms: self.heartbeat_ms,
            election_timeout_ms: self.election_timeout_ms,
            write_timeout_ms: self.write_timeout_ms,
            log_format: self.log_format.clone(),
            segment_wait_ms: self.segment_wait_ms,
            preload: self.preload.then_some(true),
            segment_duration_ms: self.segment_duration_ms,
            snowflake_epoch_ms: self.snowflake_epoch_ms,
            snowflake_time_bits: self.snowflake_time_bits,
            snowflake_worker_bits: self.snowflake_worker_bits,
            snowflake_sequence_bits: self.snowflake_sequence_bits,
            snowflake_window_ms: self.snowflake_window_ms,
            worker_lease_ms: self.worker_lease_ms,
            max_clock_backward_ms: self.max_clock_backward_ms,
            max_clock_skew_ms: self.max_clock_skew_ms,
            snowflake_random_sequence: self.snowflake_random_sequence.then_some(true),
        }
    }
}

#[derive(Debug, Args, Clone)]
pub struct ClientArgs {
    /// The node to talk to.
    #[arg(long, env = "LEAFRAFT_SERVER", default_value = "http://127.0.0.1:8080", global = true)]
    pub server: String,
    /// Cluster secret, sent with writes.
    #[arg(long, env = "LEAFRAFT_SECRET", hide_env_values = true, global = true)]
    pub secret: Option<String>,
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
    Create {
        name: String,
        #[arg(long)]
        step: Option<u64>,
        #[arg(long)]
        max_id: Option<u64>,
        #[arg(long)]
        description: Option<String>,
    },
    List,
    Get {
        name: String,
    },
    Update {
        name: String,
        #[arg(long)]
        step: Option<u64>,
        #[arg(long)]
        max_id: Option<u64>,
        #[arg(long)]
        description: Option<String>,
    },
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
