//! The vote hold this node last promised its leaders: how long it holds its vote back after
//! accepting an append (openraft's `election_timeout_max`), reported with every answer to one and
//! counted by the leader's lease (`raft::lease`).
//!
//! A node restarted with a shorter election timeout would otherwise break the promise its previous
//! process made: openraft holds votes back for the *new* hold from its start. So the hold is
//! recorded here, and a node whose previous hold was longer keeps that one after it starts
//! (`raft::LeaderLease::restarted`).
//!
//! # File layout (`leafraft-vote-hold`)
//! `b"LFVH"` ++ [`VOTE_HOLD_FORMAT_VERSION`] ++ the hold in milliseconds (`u64`, little-endian) ++
//! CRC-32 (little-endian, over everything before it); replaced durably, like the identity file.

use std::fs;
use std::io;
use std::path::Path;
use std::time::Duration;

/// The file's name inside the data directory.
pub const VOTE_HOLD_FILE: &str = "leafraft-vote-hold";
const TEMP_FILE: &str = "leafraft-vote-hold.tmp";
const MAGIC: &[u8; 4] = b"LFVH";
/// The layout version of the file.
pub const VOTE_HOLD_FORMAT_VERSION: u8 = 1;

/// Records `hold` as the one this node now promises, durably, and answers the one its previous
/// process promised (`None` on a first start, or after a release that recorded none: its answers
/// carried no hold, so no leader counted them). A file that cannot be read is an error: the node
/// cannot know what it promised.
pub fn record_vote_hold(dir: &Path, hold: Duration) -> io::Result<Option<Duration>> {
    let previous = match fs::read(dir.join(VOTE_HOLD_FILE)) {
        Ok(bytes) => Some(decode(&bytes).map_err(|detail| {
            io::Error::new(io::ErrorKind::InvalidData, format!("{VOTE_HOLD_FILE} cannot be read: {detail}"))
        })?),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    if previous != Some(hold) {
        crate::identity::replace_durably(dir, VOTE_HOLD_FILE, TEMP_FILE, &encode(hold))?;
    }
    Ok(previous)
}

fn encode(hold: Duration) -> Vec<u8> {
    let millis = u64::try_from(hold.as_millis()).unwrap_or(u64::MAX);
    let mut bytes = MAGIC.to_vec();
    bytes.push(VOTE_HOLD_FORMAT_VERSION);
    bytes.extend_from_slice(&millis.to_le_bytes());
    let crc = crc32fast::hash(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    bytes
}

fn decode(bytes: &[u8]) -> Result<Duration, String> {
    let [magic @ .., v, m0, m1, m2, m3, m4, m5, m6, m7, c0, c1, c2, c3] = bytes else {
        return Err(format!("{} bytes is not the file's length", bytes.len()));
    };
    if magic != MAGIC {
        return Err("not a vote-hold file".into());
    }
    if *v != VOTE_HOLD_FORMAT_VERSION {
        return Err(format!("format version {v}, this build reads {VOTE_HOLD_FORMAT_VERSION}"));
    }
    if crc32fast::hash(&bytes[..bytes.len() - 4]) != u32::from_le_bytes([*c0, *c1, *c2, *c3]) {
        return Err("checksum mismatch".into());
    }
    Ok(Duration::from_millis(u64::from_le_bytes([*m0, *m1, *m2, *m3, *m4, *m5, *m6, *m7])))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_previous_hold_comes_back_once_and_the_new_one_is_kept() {
        let dir = tempfile::tempdir().expect("temp dir");
        assert_eq!(record_vote_hold(dir.path(), Duration::from_millis(2_000)).expect("first"), None);
        let previous = record_vote_hold(dir.path(), Duration::from_millis(600)).expect("second");
        assert_eq!(previous, Some(Duration::from_millis(2_000)));
        let previous = record_vote_hold(dir.path(), Duration::from_millis(600)).expect("third");
        assert_eq!(previous, Some(Duration::from_millis(600)));
    }

    /// Golden bytes: the layout only ever changes behind a new version byte.
    #[test]
    fn the_file_layout_is_stable() {
        let bytes = encode(Duration::from_millis(600));
        assert_eq!(&bytes[..13], &[b'L', b'F', b'V', b'H', 1, 0x58, 0x02, 0, 0, 0, 0, 0, 0]);
        assert_eq!(decode(&bytes), Ok(Duration::from_millis(600)));
        let mut torn = bytes.clone();
        torn[6] ^= 1;
        assert!(decode(&torn).is_err(), "a flipped bit is refused");
        assert!(decode(&bytes[..10]).is_err(), "a short file is refused");
    }
}
