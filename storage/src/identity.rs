//! The member identity: which node a data directory belongs to, and which incarnation of it.
//!
//! A node creates the identity file on the first start of an empty data directory, before the
//! store, and never changes it. The random `incarnation` is what the Raft membership records next
//! to the member's address (`leafraft_state::Node`): a member whose disk was wiped or swapped comes back
//! with another incarnation, and its peers refuse it instead of letting an amnesiac vote.
//!
//! # File layout (`leafraft-identity`)
//! `b"LFID"` ++ [`IDENTITY_FORMAT_VERSION`] ++ `leafraft_state::codec::encode(MemberIdentity)` ++ CRC-32
//! (little-endian, over everything before it). The file is written to a temporary name, synced,
//! renamed and its directory synced, so a crash leaves either no identity or a whole one.

use std::fs;
use std::fs::File;
use std::io;
use std::io::Write;
use std::path::Path;

use serde::Deserialize;
use serde::Serialize;
use tracing::info;

use crate::OpenError;
use crate::Store;
use crate::StoreOptions;

pub use crate::private::IDENTITY_FILE;
const TEMP_FILE: &str = "leafraft-identity.tmp";
const MAGIC: &[u8; 4] = b"LFID";
/// The layout version of the identity file, independent of the store's `FORMAT_VERSION`.
pub const IDENTITY_FORMAT_VERSION: u8 = 1;

/// Which node this data directory belongs to, and which incarnation of its disk it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberIdentity {
    pub node_id: u64,
    /// Random and nonzero, chosen when the directory was first used.
    pub incarnation: u64,
}

/// Loads the identity of `dir`, or creates one for `node_id` if `dir` holds nothing of leafraft
/// yet. Refuses a directory that belongs to another node, and a store whose identity is gone.
pub fn load_or_create_identity(dir: &Path, node_id: u64) -> Result<MemberIdentity, OpenError> {
    let io_error = |source| OpenError::Io { dir: dir.into(), source };
    let path = dir.join(IDENTITY_FILE);
    match fs::read(&path) {
        Ok(bytes) => {
            let identity = decode(&bytes).map_err(|detail| OpenError::Corrupt {
                dir: dir.into(),
                detail: format!("the identity file {IDENTITY_FILE} cannot be read ({detail})"),
            })?;
            if identity.node_id != node_id {
                return Err(OpenError::ForeignIdentity { dir: dir.into(), owner: identity.node_id, node_id });
            }
            Ok(identity)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if holds_a_store(dir) {
                return Err(OpenError::Corrupt {
                    dir: dir.into(),
                    detail: format!("the identity file {IDENTITY_FILE} is gone although the directory holds a store"),
                });
            }
            let identity = MemberIdentity { node_id, incarnation: random_nonzero_id().map_err(io_error)? };
            write_durably(dir, &encode(&identity)).map_err(io_error)?;
            info!(dir = %dir.display(), node_id, incarnation = identity.incarnation, "member identity created");
            Ok(identity)
        }
        Err(e) => Err(io_error(e)),
    }
}

/// Loads (or creates) the identity of `dir`, opens its store and binds the two: the store records
/// the incarnation it was created for, so a directory cannot come back as a member it no longer
/// holds the log of.
///
/// - A store recording another incarnation than the identity file is refused
///   ([`OpenError::IncarnationMismatch`]): the directory mixes two disks.
/// - A store created now next to an identity file that existed before (the store was deleted, the
///   identity kept) gets a new incarnation first, durably: the node is then, to its peers, what it
///   is, a member that lost its data, and takes the wiped-member path (refused by every member
///   that records its old disk, rebuilt with `cluster remove` and `--join`). Refusing to start
///   would only make the operator delete the identity file to reach the same state.
/// - A store from before stores recorded their incarnation records the identity's.
pub fn open_member(dir: &Path, node_id: u64, options: &StoreOptions) -> Result<(MemberIdentity, Store), OpenError> {
    let identity_existed = dir.join(IDENTITY_FILE).exists();
    let mut identity = load_or_create_identity(dir, node_id)?;
    let store = crate::open(dir, options)?;
    match store.recorded_incarnation(dir)? {
        Some(recorded) if recorded == identity.incarnation => return Ok((identity, store)),
        Some(recorded) => {
            return Err(OpenError::IncarnationMismatch {
                dir: dir.into(),
                store: recorded,
                identity: identity.incarnation,
            })
        }
        None if store.created_at_open() && identity_existed => {
            let old = identity.incarnation;
            identity = MemberIdentity { node_id, incarnation: random_nonzero_id().map_err(|e| io_error(dir, e))? };
            write_durably(dir, &encode(&identity)).map_err(|e| io_error(dir, e))?;
            tracing::warn!(
                dir = %dir.display(),
                node_id,
                old = %format!("{old:016x}"),
                new = %format!("{:016x}", identity.incarnation),
                "the store is new but the identity file is not (the store was deleted): new incarnation; \
                 members that recorded the old one refuse this node as a wiped member"
            );
        }
        None => {}
    }
    store.record_incarnation(dir, identity.incarnation)?;
    Ok((identity, store))
}

fn io_error(dir: &Path, source: io::Error) -> OpenError {
    OpenError::Io { dir: dir.into(), source }
}

/// Whether `dir` already holds a store (its marker or sled's data file).
fn holds_a_store(dir: &Path) -> bool {
    dir.join(crate::MARKER_FILE).exists() || dir.join(crate::engine::DATA_FILE).exists()
}

/// A random nonzero 64-bit ID from the operating system's generator: a data dir's incarnation,
/// or a new cluster's ID.
pub fn random_nonzero_id() -> io::Result<u64> {
    loop {
        let mut bytes = [0u8; 8];
        getrandom::getrandom(&mut bytes).map_err(io::Error::other)?;
        let incarnation = u64::from_le_bytes(bytes);
        if incarnation != 0 {
            return Ok(incarnation);
        }
    }
}

pub(crate) fn encode(identity: &MemberIdentity) -> Vec<u8> {
    let mut bytes = MAGIC.to_vec();
    bytes.push(IDENTITY_FORMAT_VERSION);
    // Two fixed-width integers: encoding cannot fail.
    bytes.extend_from_slice(&leafraft_state::codec::encode(identity).unwrap_or_default());
    let crc = crc32fast::hash(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    bytes
}

pub(crate) fn decode(bytes: &[u8]) -> Result<MemberIdentity, String> {
    let (content, crc) = bytes.split_at_checked(bytes.len().saturating_sub(4)).ok_or("too short")?;
    let crc: [u8; 4] = crc.try_into().map_err(|_| "too short")?;
    if crc32fast::hash(content) != u32::from_le_bytes(crc) {
        return Err("checksum mismatch".into());
    }
    let body = content.strip_prefix(MAGIC.as_slice()).ok_or("not an identity file")?;
    let (&version, body) = body.split_first().ok_or("no format version")?;
    if version != IDENTITY_FORMAT_VERSION {
        return Err(format!("format version {version}, this binary reads {IDENTITY_FORMAT_VERSION}"));
    }
    let identity: MemberIdentity = leafraft_state::codec::decode(body).map_err(|e| e.to_string())?;
    if identity.incarnation == 0 {
        return Err("incarnation 0".into());
    }
    Ok(identity)
}

/// Writes the identity file so that a crash leaves either none or the whole file, durable.
fn write_durably(dir: &Path, bytes: &[u8]) -> io::Result<()> {
    replace_durably(dir, IDENTITY_FILE, TEMP_FILE, bytes)
}

/// Writes `bytes` as `dir/name` through the temporary `dir/temp` (private: 0700 directory, 0600
/// file): synced, renamed, the directory synced, so a crash leaves either the old file or the
/// whole new one.
pub(crate) fn replace_durably(dir: &Path, name: &str, temp: &str, bytes: &[u8]) -> io::Result<()> {
    crate::private::create_dir(dir)?;
    let temp = dir.join(temp);
    let mut file = crate::private::create_file(&temp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    fs::rename(&temp, dir.join(name))?;
    File::open(dir)?.sync_all()?;
    // A directory just created must itself be durable in its parent.
    match dir.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => File::open(parent)?.sync_all(),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;
