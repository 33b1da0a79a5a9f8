//! Bounds on the chunks of a streamed snapshot, checked before openraft sees them.
//!
//! openraft 0.9 (`Streaming::receive`) seeks its snapshot buffer to whatever `offset` a chunk
//! names and writes the data there; our buffer is a `Cursor<Vec<u8>>`, which fills the gap with
//! zeros. One chunk at offset 2^60 would allocate an exabyte and abort the process. openraft's
//! sender only ever sends offset 0 (a new stream, or a restart after `SnapshotMismatch`), the
//! offset it sent last (a retry) or the end of what it sent (the next chunk). So a chunk is let
//! through when its end stays within [`MAX_SNAPSHOT_BYTES`] and its offset does not pass the end of
//! what was received for the same snapshot; a gap gets openraft's own `SnapshotMismatch`, which
//! makes a real sender start the stream again from 0.

use std::sync::Mutex;
use std::sync::PoisonError;

use openraft::error::SnapshotMismatch;
use openraft::SnapshotSegmentId;

use leafraft_state::typ;

/// The largest snapshot accepted: no chunk may end beyond it. Equal to the largest input the
/// codec decodes, since the whole snapshot is decoded as one value when it is installed.
pub const MAX_SNAPSHOT_BYTES: u64 = leafraft_state::codec::MAX_DECODE_BYTES as u64;

/// Why a chunk is not handed to openraft.
#[derive(Debug, PartialEq, Eq)]
pub enum SnapshotRefusal {
    /// The chunk can never be part of a legitimate snapshot: answered 400.
    Invalid(String),
    /// The chunk leaves a gap after what was received: answered as openraft would.
    Mismatch(SnapshotMismatch),
}

/// The stream being received: the snapshot id and the end of the data received for it.
#[derive(Default)]
pub struct SnapshotGuard {
    stream: Mutex<Option<(String, u64)>>,
}

impl SnapshotGuard {
    /// Admits `rpc` (and records its end) or says why not.
    pub fn admit(&self, rpc: &typ::InstallSnapshotRequest) -> Result<(), SnapshotRefusal> {
        let id = &rpc.meta.snapshot_id;
        let end = rpc.offset.checked_add(rpc.data.len() as u64).filter(|end| *end <= MAX_SNAPSHOT_BYTES).ok_or_else(
            || {
                SnapshotRefusal::Invalid(format!(
                    "snapshot chunk at offset {} with {} bytes ends beyond the {MAX_SNAPSHOT_BYTES}-byte limit",
                    rpc.offset,
                    rpc.data.len()
                ))
            },
        )?;
        let mut stream = self.stream.lock().unwrap_or_else(PoisonError::into_inner);
        if rpc.offset == 0 {
            *stream = Some((id.clone(), end));
            return Ok(());
        }
        match stream.as_mut() {
            Some((current, received)) if current == id && rpc.offset <= *received => {
                *received = (*received).max(end);
                Ok(())
            }
            _ => Err(SnapshotRefusal::Mismatch(SnapshotMismatch {
                expect: SnapshotSegmentId { id: id.clone(), offset: 0 },
                got: SnapshotSegmentId { id: id.clone(), offset: rpc.offset },
            })),
        }
    }
}

#[cfg(test)]
mod tests {
    use openraft::testing::log_id;
    use openraft::Vote;

    use super::*;

    fn chunk(id: &str, offset: u64, len: usize) -> typ::InstallSnapshotRequest {
        typ::InstallSnapshotRequest {
            vote: Vote::new_committed(2, 1),
            meta: typ::SnapshotMeta {
                last_log_id: Some(log_id(2, 1, 3)),
                last_membership: typ::StoredMembership::default(),
                snapshot_id: id.into(),
            },
            offset,
            data: vec![0; len],
            done: false,
        }
    }

    #[test]
    fn what_a_real_sender_sends_is_admitted() {
        let guard = SnapshotGuard::default();
        for (offset, len) in [(0, 10), (10, 10), (10, 10), (20, 5), (0, 10), (10, 10)] {
            assert_eq!(guard.admit(&chunk("a", offset, len)), Ok(()), "offset {offset}");
        }
        assert_eq!(guard.admit(&chunk("b", 0, 10)), Ok(()));
    }

    #[test]
    fn a_gap_is_a_mismatch_and_a_chunk_beyond_the_limit_is_invalid() {
        let guard = SnapshotGuard::default();
        assert!(matches!(guard.admit(&chunk("a", 5, 1)), Err(SnapshotRefusal::Mismatch(_))));
        assert_eq!(guard.admit(&chunk("a", 0, 10)), Ok(()));
        assert!(matches!(guard.admit(&chunk("a", 11, 1)), Err(SnapshotRefusal::Mismatch(_))));
        assert!(matches!(guard.admit(&chunk("b", 10, 1)), Err(SnapshotRefusal::Mismatch(_))));
        assert!(matches!(guard.admit(&chunk("a", 1 << 60, 1)), Err(SnapshotRefusal::Invalid(_))));
        assert!(matches!(guard.admit(&chunk("a", u64::MAX, 1)), Err(SnapshotRefusal::Invalid(_))));
        assert!(matches!(guard.admit(&chunk("a", 0, 0)), Ok(())));
        assert!(matches!(guard.admit(&chunk("c", MAX_SNAPSHOT_BYTES, 1)), Err(SnapshotRefusal::Invalid(_))));
    }
}
