//! The backup file: a consistent copy of the replicated state, what `GET /v1/backup` answers,
//! `leafraft backup` writes and `leafraft recover --from` reads.
//!
//! Layout: [`MAGIC`] (16 bytes, readable with `head -c 15`), the format version (one byte), the
//! bincode encoding of [`Backup`] (the one configuration of `leafraft_state::codec`), then a CRC-32 (IEEE,
//! little endian) of everything before it. bincode is positional: [`Backup`] and the types in it
//! only gain fields at the end, and any change bumps [`FORMAT_VERSION`] (golden bytes in
//! `backup/tests.rs` fail first). A reader refuses a bad magic, an unknown version, a checksum
//! that does not match and trailing bytes, each with its own one-line error.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::io::Write;
use std::path::Path;

use leafraft_state::SnowflakeRegistry;
use leafraft_state::TagRecord;
use leafraft_state::TimeseqRegistry;
use serde::Deserialize;
use serde::Serialize;

/// The first bytes of every backup file.
pub const MAGIC: &[u8; 16] = b"leafraft backup\n";

/// The layout version this binary writes when some tag is scrambled (and reads, with versions 1
/// and 2). Version 2 added the time-sequence namespaces and every tag record's `mode`; version 3
/// the scrambled tags' keys. A state without scrambled tags is still written as version 2, which
/// the release before this one reads.
pub const FORMAT_VERSION: u8 = 3;

/// The layout of a backup without scrambled tags: [`Backup`] without its last field.
const WITHOUT_SCRAMBLE_KEYS: u8 = 2;

/// The `Content-Type` of `GET /v1/backup`.
pub const CONTENT_TYPE: &str = "application/vnd.leafraft.backup";

/// The replicated state at a known log index, with when and where it was taken.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Backup {
    /// The cluster the state belongs to (0: not recorded).
    pub cluster_id: u64,
    /// Wall clock (Unix ms) of the node that took it, read before it asked the leader for a read
    /// index: every claim committed before this time is in the state.
    pub taken_at_ms: u64,
    /// The log index and term of the last entry the state has applied.
    pub applied_index: u64,
    pub applied_term: u64,
    pub tags: BTreeMap<String, TagRecord>,
    pub snowflake: SnowflakeRegistry,
    /// Since version 2.
    pub timeseq: TimeseqRegistry,
    /// Since version 3: the key of each scrambled tag.
    pub scramble_keys: BTreeMap<String, leafraft_state::ScrambleKey>,
}

/// Version 2 of [`Backup`]: without scrambled tags' keys (it had none).
#[derive(Serialize, Deserialize)]
struct BackupV2 {
    cluster_id: u64,
    taken_at_ms: u64,
    applied_index: u64,
    applied_term: u64,
    tags: BTreeMap<String, TagRecord>,
    snowflake: SnowflakeRegistry,
    timeseq: TimeseqRegistry,
}

impl From<BackupV2> for Backup {
    fn from(v2: BackupV2) -> Backup {
        let BackupV2 { cluster_id, taken_at_ms, applied_index, applied_term, tags, snowflake, timeseq } = v2;
        Backup {
            cluster_id,
            taken_at_ms,
            applied_index,
            applied_term,
            tags,
            snowflake,
            timeseq,
            scramble_keys: BTreeMap::new(),
        }
    }
}

/// Version 1 of [`Backup`] (before time sequences and tag modes), still read: it had no
/// namespaces, and every tag was a segment tag.
#[derive(Deserialize)]
struct BackupV1 {
    cluster_id: u64,
    taken_at_ms: u64,
    applied_index: u64,
    applied_term: u64,
    tags: BTreeMap<String, TagRecordV1>,
    snowflake: SnowflakeRegistry,
}

/// A tag record as version 1 wrote it: without `mode`.
#[derive(Deserialize)]
struct TagRecordV1 {
    max_id: u64,
    step: u64,
    description: String,
    created_at_ms: u64,
    updated_at_ms: u64,
}

impl From<TagRecordV1> for TagRecord {
    fn from(v1: TagRecordV1) -> TagRecord {
        let TagRecordV1 { max_id, step, description, created_at_ms, updated_at_ms } = v1;
        TagRecord { max_id, step, description, created_at_ms, updated_at_ms, mode: leafraft_state::TagMode::Segment }
    }
}

impl From<BackupV1> for Backup {
    fn from(v1: BackupV1) -> Backup {
        Backup {
            cluster_id: v1.cluster_id,
            taken_at_ms: v1.taken_at_ms,
            applied_index: v1.applied_index,
            applied_term: v1.applied_term,
            tags: v1.tags.into_iter().map(|(name, record)| (name, record.into())).collect(),
            snowflake: v1.snowflake,
            timeseq: TimeseqRegistry::default(),
            scramble_keys: BTreeMap::new(),
        }
    }
}

/// Why bytes are not a backup this binary can use. `Display` is one line.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("not a leafraft backup file (it does not start with {:?})", String::from_utf8_lossy(MAGIC).trim_end())]
    NotABackup,
    #[error("the backup has format version {found}; this binary reads versions 1 to {FORMAT_VERSION} (use the leafraft that wrote it)")]
    UnknownVersion { found: u8 },
    #[error("the backup is damaged: its checksum is {stored:08x}, its content sums to {computed:08x}")]
    Checksum { stored: u32, computed: u32 },
    #[error("the backup is damaged: {0}")]
    Damaged(String),
    #[error("cannot encode the backup: {0}")]
    Encode(String),
}

/// The file's bytes.
pub fn encode(backup: &Backup) -> Result<Vec<u8>, BackupError> {
    let encode_error = |e: bincode::error::EncodeError| BackupError::Encode(e.to_string());
    let (version, body) = if backup.scramble_keys.is_empty() {
        let v2 = BackupV2 {
            cluster_id: backup.cluster_id,
            taken_at_ms: backup.taken_at_ms,
            applied_index: backup.applied_index,
            applied_term: backup.applied_term,
            tags: backup.tags.clone(),
            snowflake: backup.snowflake.clone(),
            timeseq: backup.timeseq.clone(),
        };
        (WITHOUT_SCRAMBLE_KEYS, leafraft_state::codec::encode(&v2).map_err(encode_error)?)
    } else {
        (FORMAT_VERSION, leafraft_state::codec::encode(backup).map_err(encode_error)?)
    };
    let mut bytes = Vec::with_capacity(MAGIC.len() + 1 + body.len() + 4);
    bytes.extend_from_slice(MAGIC);
    bytes.push(version);
    bytes.extend_from_slice(&body);
    let checksum = crc32fast::hash(&bytes);
    bytes.extend_from_slice(&checksum.to_le_bytes());
    Ok(bytes)
}

/// Reads a file's bytes, checking magic, version and checksum before decoding anything.
pub fn decode(bytes: &[u8]) -> Result<Backup, BackupError> {
    let rest = bytes.strip_prefix(MAGIC.as_slice()).ok_or(BackupError::NotABackup)?;
    let (&version, _) = rest.split_first().ok_or_else(|| BackupError::Damaged("it ends after its magic".into()))?;
    if !(1..=FORMAT_VERSION).contains(&version) {
        return Err(BackupError::UnknownVersion { found: version });
    }
    let Some(split) = bytes.len().checked_sub(4).filter(|&at| at > MAGIC.len()) else {
        return Err(BackupError::Damaged("it is too short to hold a checksum".into()));
    };
    let (content, stored) = bytes.split_at(split);
    let stored = u32::from_le_bytes([stored[0], stored[1], stored[2], stored[3]]);
    let computed = crc32fast::hash(content);
    if stored != computed {
        return Err(BackupError::Checksum { stored, computed });
    }
    let body = &content[MAGIC.len() + 1..];
    let damaged = |e: bincode::error::DecodeError| BackupError::Damaged(e.to_string());
    if version == 1 {
        return leafraft_state::codec::decode::<BackupV1>(body).map(Backup::from).map_err(damaged);
    }
    if version == WITHOUT_SCRAMBLE_KEYS {
        return leafraft_state::codec::decode::<BackupV2>(body).map(Backup::from).map_err(damaged);
    }
    leafraft_state::codec::decode(body).map_err(damaged)
}

/// Writes `bytes` to `path` so that a crash leaves either the old file or the whole new one: a
/// temporary file beside it, synced, renamed over it, then the directory synced. The file is
/// its owner's only (0600) from its creation, whatever the umask: a backup holds every tag, and
/// a mode changed after the write would leave a moment in which others could open it.
pub fn write_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let name = path.file_name().ok_or_else(|| io::Error::other(format!("{} names no file", path.display())))?;
    let temp = path.with_file_name(format!(".{}.tmp-{}", name.to_string_lossy(), std::process::id()));
    // A temporary file a crashed run of this process ID left behind (`create_new` below never
    // opens an existing file, which could be another user's link).
    let _ = std::fs::remove_file(&temp);
    let written = (|| {
        let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written?;
    let dir = path.parent().filter(|dir| !dir.as_os_str().is_empty()).unwrap_or(Path::new("."));
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests;
