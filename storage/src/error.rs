//! Errors: [`OpenError`] for a store that cannot be opened, and [`Error`], the crate's internal error
//! that the openraft impls wrap into `StorageError` with openraft's subject/verb helpers
//! (`StorageIOError::read_vote(&e)`, `write_logs`, ...).

use std::io;
use std::path::PathBuf;

use crate::codec::CodecError;
use crate::codec::FORMAT_VERSION;
use crate::engine::EngineError;

/// What an operator must do when a node's data is unusable.
pub const REBUILD_HINT: &str = "The node cannot start; rebuild it: see docs/operations.md \
                                (remove the member, wipe this directory, add it back)";

/// Why [`crate::open`] failed. `Display` is one line that names the directory, the cause and what
/// to do.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// sled refused its files, or a stored value does not decode.
    #[error("cannot open the store in {}: {detail}. {REBUILD_HINT}", dir.display())]
    Corrupt { dir: PathBuf, detail: String },
    /// A stored value carries a format version this binary does not know (written by a newer one).
    #[error(
        "cannot open the store in {}: the stored {what} has format version {found}, but this binary \
         reads only version {FORMAT_VERSION}; it was written by a newer leafraft, run that version",
        dir.display()
    )]
    UnsupportedVersion { dir: PathBuf, what: &'static str, found: u8 },
    /// A stored value carries a format version older than this binary reads (version 1, before
    /// member identities, was never released and is not converted).
    #[error(
        "cannot open the store in {}: the stored {what} has format version {found}, written by an older \
         leafraft; this binary reads only version {FORMAT_VERSION} and does not convert it. {REBUILD_HINT}",
        dir.display()
    )]
    OutdatedVersion { dir: PathBuf, what: &'static str, found: u8 },
    /// The directory or its files cannot be read or written, or another process holds its lock.
    #[error("cannot open the store in {}: {source}", dir.display())]
    Io { dir: PathBuf, source: io::Error },
    /// Another store (another process, or a store in this process not yet dropped) holds the lock.
    #[error(
        "cannot open the store in {}: its lock is held by another leafraft process or a store still open \
         in this one; run one node per data directory",
        dir.display()
    )]
    Locked { dir: PathBuf },
    /// The data directory's identity names another node: starting would make this node an
    /// impostor with another member's log.
    #[error(
        "cannot start on the data dir {}: this data dir belongs to node {owner}, not node {node_id}; \
         start node {owner} on it, or give node {node_id} an empty directory and add it with --join",
        dir.display()
    )]
    ForeignIdentity { dir: PathBuf, owner: u64, node_id: u64 },
    /// The store was created for another incarnation than the identity file names: the directory
    /// mixes files of two disks (a store copied or restored next to another identity).
    #[error(
        "cannot start on the data dir {}: its store belongs to incarnation {store:016x}, its identity file names \
         incarnation {identity:016x}; the directory mixes two disks. Rebuild this member: run `leafraft cluster \
         remove --node-id <ID>`, empty the directory and start it with --join",
        dir.display()
    )]
    IncarnationMismatch { dir: PathBuf, store: u64, identity: u64 },
    /// The store's cluster version is newer than this binary: the cluster moved on to a release
    /// this binary is older than, and this member can no longer go back to it.
    #[error(
        "cannot open the store in {}: its cluster version is {found}, but this binary is leafraft {}; the \
         cluster was upgraded past this release, so run leafraft {found} or newer on this directory",
        dir.display(),
        leafraft_state::Version::OWN
    )]
    ClusterVersionAhead { dir: PathBuf, found: leafraft_state::Version },
    /// The log holds an entry of a command this binary does not know: a newer release wrote it
    /// (a member started on an older release than the cluster moved to), not corruption.
    #[error(
        "cannot open the store in {}: the stored {what} is a command this binary (leafraft {}) does not know, \
         written by a newer release; run the release the other members run (their /v1/cluster shows it) on \
         this directory, do not rebuild it",
        dir.display(),
        leafraft_state::Version::OWN
    )]
    UnknownCommand { dir: PathBuf, what: &'static str },
    /// sled failed for another reason (unsupported configuration, internal bug).
    #[error("cannot open the store in {}: {detail}", dir.display())]
    Engine { dir: PathBuf, detail: String },
}

impl OpenError {
    pub(crate) fn from_engine(dir: PathBuf, e: EngineError) -> OpenError {
        match e {
            EngineError::Corrupt(detail) => OpenError::Corrupt { dir, detail },
            EngineError::Io(source) => OpenError::Io { dir, source },
            EngineError::Engine(detail) => OpenError::Engine { dir, detail },
            EngineError::Locked(_) => OpenError::Locked { dir },
        }
    }

    /// A stored value named `what` failed to load.
    pub(crate) fn from_load(dir: PathBuf, what: &'static str, e: Error) -> OpenError {
        match e {
            Error::Engine(e) => OpenError::from_engine(dir, e),
            Error::Codec(CodecError::UnknownVersion { found }) if found < FORMAT_VERSION => {
                OpenError::OutdatedVersion { dir, what, found }
            }
            Error::Codec(CodecError::UnknownVersion { found }) => OpenError::UnsupportedVersion { dir, what, found },
            // bincode's words for an enum variant past the ones this binary knows: in a log entry,
            // a command appended by a newer release (`leafraft_state::Request` only ever gains variants).
            Error::Codec(CodecError::Decode(e))
                if what == "last log entry" && e.to_string().contains("variant index") =>
            {
                OpenError::UnknownCommand { dir, what }
            }
            e => OpenError::Corrupt { dir, detail: format!("the stored {what} cannot be read ({e})") },
        }
    }
}

/// Anything that goes wrong below the openraft impls.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// Stored or received data that decodes but is inconsistent.
    #[error("{0}")]
    Invalid(String),
}
