//! `leafraft recover`'s arguments.

use std::path::PathBuf;

use clap::ArgGroup;
use clap::Args;

use crate::offline::recover::margin;

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("source").required(true).args(["from_data_dir", "from"])))]
pub struct RecoverArgs {
    /// The new cluster's data directory: must not exist, or be empty.
    #[arg(long)]
    pub data_dir: PathBuf,
    /// A survivor's data directory. Its process must be stopped (kill -9 is fine); it is only read,
    /// through a copy.
    #[arg(long)]
    pub from_data_dir: Option<PathBuf>,
    /// A file written by `leafraft backup`, or a directory of them (`--out-dir`): then the newest
    /// `leafraft-*.backup` in it.
    #[arg(long)]
    pub from: Option<PathBuf>,
    /// The node ID of the new cluster's one member; serve it with the same --node-id.
    #[arg(long, default_value_t = 1)]
    pub node_id: u64,
    /// The address the member serves at [default: the survivor's for --node-id, else 127.0.0.1:8080].
    #[arg(long)]
    pub advertise: Option<String>,
    /// IDs added to every tag on top of the computed margin.
    #[arg(long, default_value_t = 0)]
    pub margin: u64,
    /// The most claims the old cluster could commit per second: each tag is raised by this times the
    /// largest claim it can take (a segment tag: the larger of its step and 1,000,000; a monotonic
    /// tag: 10,000,000) per second since the copy.
    #[arg(long, default_value_t = margin::DEFAULT_CLAIMS_PER_SEC)]
    pub claims_per_sec: u64,
    /// How far the old cluster's clocks may have been ahead of this machine's; added to the time since
    /// the copy and to the snowflake floor.
    #[arg(long, default_value_t = margin::DEFAULT_MARGIN_MS)]
    pub margin_ms: u64,
    /// The longest --worker-lease-ms the old cluster ran with.
    #[arg(long, default_value_t = margin::DEFAULT_WORKER_LEASE_MS)]
    pub worker_lease_ms: u64,
    /// The time (Unix ms) after which the old cluster committed nothing the copy lacks, instead of the
    /// time the copy records (a backup's, or the survivor's latest committed clock).
    #[arg(long)]
    pub copy_time_ms: Option<u64>,
    /// Read the old state and print the margin table (old and new max_id per tag), writing
    /// nothing.
    #[arg(long)]
    pub dry_run: bool,
}

impl RecoverArgs {
    pub fn options(&self) -> crate::offline::recover::RecoverOptions {
        use crate::offline::recover::Source;
        let source = match (&self.from_data_dir, &self.from) {
            (Some(dir), _) => Source::DataDir(dir.clone()),
            (None, file) => Source::Backup(file.clone().unwrap_or_default()),
        };
        crate::offline::recover::RecoverOptions {
            data_dir: self.data_dir.clone(),
            source,
            node_id: self.node_id,
            advertise: self.advertise.clone(),
            margin: margin::MarginOptions {
                margin_ids: self.margin,
                claims_per_sec: self.claims_per_sec,
                margin_ms: self.margin_ms,
                worker_lease_ms: self.worker_lease_ms,
            },
            copy_time_ms: self.copy_time_ms,
            dry_run: self.dry_run,
        }
    }
}
