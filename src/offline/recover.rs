//! `leafraft recover`: a new single-member cluster from what is left of a lost one.
//!
//! Read the old state (a survivor's store through a temporary copy, or a backup file), raise it
//! with the pure safety margin, then form the new cluster in an empty directory: a Raft node in
//! this process initialises itself alone (new member identity, new random cluster ID), commits one
//! `Restore`, and stops. `leafraft serve --data-dir NEW` serves it; fresh nodes `--join` it.
//! docs/operations.md ("Losing a majority") says when and how, and what the margin covers.
//!
//! # Layout
//! - [`margin`]: the pure safety margin (raised `max_id`s, the snowflake floor).
//! - [`survivor`]: reading a survivor's data directory without writing into it.
//! - `form`: the in-process Raft node that commits the new cluster.

mod form;
pub mod margin;
pub mod survivor;

use std::path::Path;
use std::path::PathBuf;

use leafraft_state::NodeId;

use crate::backup;
use crate::offline::recover::margin::MarginOptions;
use crate::offline::recover::margin::OldState;
use crate::offline::recover::margin::Raised;

/// Why a recovery did not happen (or did not finish). `Display` is one line.
#[derive(Debug)]
pub struct RecoverError(pub String);

impl std::fmt::Display for RecoverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RecoverError {}

/// Where the old state comes from.
#[derive(Debug, Clone)]
pub enum Source {
    /// A survivor's data directory (its process must be stopped; it is only read).
    DataDir(PathBuf),
    /// A file written by `leafraft backup`.
    Backup(PathBuf),
}

#[derive(Debug, Clone)]
pub struct RecoverOptions {
    /// The new cluster's data directory: absent or empty.
    pub data_dir: PathBuf,
    pub source: Source,
    pub node_id: NodeId,
    /// The address the new member serves at (default: the survivor's for `node_id`, else
    /// 127.0.0.1:8080).
    pub advertise: Option<String>,
    pub margin: MarginOptions,
    /// Overrides the time the copy is known complete at (Unix ms).
    pub copy_time_ms: Option<u64>,
    /// Read and compute, print the margin table, write nothing.
    pub dry_run: bool,
}

/// What a recovery did, for the operator.
#[derive(Debug, Clone)]
pub struct Report {
    pub old: OldState,
    pub raised: Raised,
    pub old_cluster_id: u64,
    pub cluster_id: u64,
    pub copy_time_ms: u64,
    pub recover_time_ms: u64,
    pub node_id: NodeId,
    pub advertise: String,
    pub data_dir: PathBuf,
    /// Nothing was written (`--dry-run`); `cluster_id` is 0.
    pub dry_run: bool,
}

/// The old state, the time it is known complete at, its cluster ID, and the survivor's address
/// for `node_id` (if known).
struct Found {
    old: OldState,
    copy_time_ms: Option<u64>,
    cluster_id: u64,
    addr: Option<String>,
}

/// Runs a whole recovery.
pub async fn run(options: RecoverOptions) -> Result<Report, RecoverError> {
    if !options.dry_run {
        refuse_non_empty(&options.data_dir)?;
    }
    let found = match &options.source {
        Source::DataDir(dir) => {
            let survivor = survivor::read(dir).await?;
            let addr = survivor.members.get(&options.node_id).map(|node| node.addr.clone());
            let copy_time_ms = survivor.copy_time_ms;
            Found { old: survivor.state, copy_time_ms, cluster_id: survivor.cluster_id, addr }
        }
        Source::Backup(file) => {
            let bytes =
                std::fs::read(file).map_err(|e| RecoverError(format!("cannot read {}: {e}", file.display())))?;
            let backup = backup::decode(&bytes).map_err(|e| RecoverError(format!("{}: {e}", file.display())))?;
            let copy_time_ms = Some(backup.taken_at_ms);
            Found {
                old: OldState {
                    tags: backup.tags.clone(),
                    snowflake: backup.snowflake.clone(),
                    timeseq: backup.timeseq.clone(),
                    scramble_keys: backup.scramble_keys.clone(),
                },
                copy_time_ms,
                cluster_id: backup.cluster_id,
                addr: None,
            }
        }
    };
    let copy_time_ms = options.copy_time_ms.or(found.copy_time_ms).ok_or_else(|| {
        RecoverError(
            "the old state records no clock to measure the margin from; pass --copy-time-ms (the last time \
             the old cluster is known to have committed nothing the copy lacks)"
                .into(),
        )
    })?;
    let recover_time_ms = crate::clock::now_ms();
    let raised = margin::raise(&found.old, copy_time_ms, recover_time_ms, &options.margin);
    let advertise = options.advertise.clone().or(found.addr).unwrap_or_else(|| "127.0.0.1:8080".into());
    let mut report = Report {
        old: found.old,
        raised,
        old_cluster_id: found.cluster_id,
        cluster_id: 0,
        copy_time_ms,
        recover_time_ms,
        node_id: options.node_id,
        advertise,
        data_dir: options.data_dir,
        dry_run: options.dry_run,
    };
    if options.dry_run {
        return Ok(report);
    }
    report.cluster_id = new_cluster_id(found.cluster_id)?;
    refuse_non_empty(&report.data_dir)?;
    form::form(
        &report.data_dir,
        report.node_id,
        &report.advertise,
        report.cluster_id,
        [report.raised.request(), report.raised.timeseq_request()].into_iter().chain(report.raised.scramble_requests()),
    )
    .await
    .map_err(|e| RecoverError(format!("{e}; delete {} before trying again", report.data_dir.display())))?;
    Ok(report)
}

/// A random nonzero cluster ID other than the old one.
fn new_cluster_id(old: u64) -> Result<u64, RecoverError> {
    loop {
        let id = storage::identity::random_nonzero_id()
            .map_err(|e| RecoverError(format!("cannot draw a random cluster ID: {e}")))?;
        if id != old {
            return Ok(id);
        }
    }
}

/// Recovery writes only into a directory that does not exist or is empty.
fn refuse_non_empty(dir: &Path) -> Result<(), RecoverError> {
    match std::fs::read_dir(dir).map(|mut entries| entries.next().is_some()) {
        Ok(true) => Err(RecoverError(format!(
            "{} is not empty; recover writes a new cluster only into a new or empty directory",
            dir.display()
        ))),
        Ok(false) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(RecoverError(format!("cannot read {}: {e}", dir.display()))),
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let since_s = self.recover_time_ms.saturating_sub(self.copy_time_ms) as f64 / 1000.0;
        if self.dry_run {
            writeln!(
                f,
                "dry run: {} tags of cluster {:016x}, nothing written",
                self.old.tags.len(),
                self.old_cluster_id
            )?;
        } else {
            writeln!(
                f,
                "recovered {} tags from cluster {:016x} into {}",
                self.old.tags.len(),
                self.old_cluster_id,
                self.data_dir.display()
            )?;
            writeln!(f, "new cluster {:016x}: node {} at {}", self.cluster_id, self.node_id, self.advertise)?;
        }
        writeln!(f, "copy complete at {} ms, {since_s:.1} s before this recovery", self.copy_time_ms)?;
        margin_table(f, &self.old, &self.raised)?;
        writeln!(f, "snowflake: no worker holding starts before {} ms", self.raised.snowflake_floor_ms)?;
        if self.dry_run {
            return write!(f, "run again without --dry-run to write the new cluster into {}", self.data_dir.display());
        }
        write!(
            f,
            // `existing`: this command line, run again on an empty directory, must never found a
            // cluster of its own at the member's address.
            "next: leafraft serve --node-id {} --advertise {} --data-dir {} --initial-cluster-state existing; then \
             start new members with --join {}",
            self.node_id,
            self.advertise,
            self.data_dir.display(),
            self.advertise
        )
    }
}

/// One row per tag: what one claim of it can take, its old and new `max_id` and the margin
/// between them; a new `max_id` past 2^53 is marked (JavaScript and many JSON stacks lose IDs
/// above it), as is an exhausted tag.
fn margin_table(f: &mut std::fmt::Formatter<'_>, old: &OldState, raised: &Raised) -> std::fmt::Result {
    writeln!(
        f,
        "{:<24} {:<10} {:>14} {:>20} {:>20} {:>20}",
        "TAG", "MODE", "LARGEST CLAIM", "OLD MAX_ID", "MARGIN", "NEW MAX_ID"
    )?;
    for (name, record) in &raised.tags {
        let before = old.tags.get(name).map_or(0, |old| old.max_id);
        let largest = old.tags.get(name).map_or(0, margin::claim_bound);
        let margin = raised.margins.get(name).copied().unwrap_or(0);
        let note = if record.max_id >= leafraft_state::tag::MAX_ID_LIMIT {
            " exhausted"
        } else if record.max_id > 1 << 53 {
            " above 2^53"
        } else {
            ""
        };
        writeln!(
            f,
            "{name:<24} {:<10} {largest:>14} {before:>20} {margin:>20} {:>20}{note}",
            record.mode.as_str(),
            record.max_id
        )?;
    }
    Ok(())
}
