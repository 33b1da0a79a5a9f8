//! The decoding limits: hostile claimed lengths are refused before anything is allocated, and
//! the largest legitimate messages still fit.

use std::collections::BTreeMap;
use std::collections::BTreeSet;

use bincode::error::DecodeError;
use openraft::testing::log_id;
use openraft::EntryPayload;
use openraft::Membership;
use openraft::SnapshotMeta;
use openraft::StoredMembership;
use openraft::Vote;

use super::*;
use crate::tag;
use crate::typ;
use crate::Node;
use crate::Request;

/// `len` as bincode writes a length: a little-endian `u64`.
fn claimed_len(len: u64) -> [u8; 8] {
    len.to_le_bytes()
}

/// The fuzzed `/raft/forward` body minus the `Forwarded` variant: `Request::CreateTag` (variant 0) whose tag
/// claims 2^50 bytes. Without a limit bincode allocates the claim and the process aborts.
#[test]
fn a_huge_claimed_string_length_is_refused_by_the_limit() {
    let mut body = vec![0, 0, 0, 0];
    body.extend_from_slice(&claimed_len(1 << 50));
    let err = decode::<Request>(&body).unwrap_err();
    assert!(matches!(err, DecodeError::LimitExceeded), "{err:?}");
    let err = decode::<String>(&claimed_len(u64::MAX)).unwrap_err();
    assert!(matches!(err, DecodeError::LimitExceeded), "{err:?}");
}

/// bincode's serde path reads `Vec<u8>` (a snapshot chunk's data) as a sequence, which serde
/// preallocates only cautiously; a claim of 2^60 bytes ends at the input's end, not in an abort.
#[test]
fn a_huge_claimed_byte_vector_is_refused() {
    let mut body = claimed_len(1 << 60).to_vec();
    body.extend_from_slice(&[7; 16]);
    let err = decode::<Vec<u8>>(&body).unwrap_err();
    assert!(matches!(err, DecodeError::LimitExceeded | DecodeError::UnexpectedEnd { .. }), "{err:?}");
}

/// A claim just above what the input holds is refused at every tier, and a value exactly
/// filling a tier decodes.
#[test]
fn every_tier_decodes_values_that_fill_it_and_refuses_claims_beyond_it() {
    for limit in LIMITS[..3].iter().copied() {
        let fits = "x".repeat(limit - 8);
        let bytes = encode(&fits).expect("encode");
        assert_eq!(bytes.len(), limit);
        assert_eq!(decode::<String>(&bytes).expect("decode a value filling its tier"), fits);
        let over = "x".repeat(limit - 7);
        assert_eq!(decode::<String>(&encode(&over).expect("encode")).expect("the next tier"), over);

        let mut hostile = claimed_len(limit as u64 * 64 + 1).to_vec();
        hostile.resize(limit, b'x');
        let err = decode::<String>(&hostile).unwrap_err();
        assert!(matches!(err, DecodeError::LimitExceeded), "{err:?}");
    }
}

#[test]
fn inputs_over_the_decoding_limit_are_refused_unread() {
    // Zeroed pages are mapped lazily: this costs no real memory.
    let huge = vec![0u8; MAX_DECODE_BYTES + 1];
    let err = decode::<Vec<u8>>(&huge).unwrap_err();
    assert!(err.to_string().contains("decoding limit"), "{err}");
}

fn longest_addr(id: u64) -> String {
    let host = "h".repeat(MAX_ADDR_LEN - 6);
    format!("{host}:{:05}", 10_000 + id)
}

fn largest_membership() -> typ::Membership {
    let nodes: BTreeMap<u64, Node> = (0..64).map(|id| (id, Node::new(longest_addr(id), u64::MAX))).collect();
    let voters: BTreeSet<u64> = (0..5).collect();
    Membership::new(vec![voters], nodes)
}

/// An import of as many of the longest rows as `MAX_REQUEST_BYTES` holds.
fn largest_request() -> Request {
    let row = crate::ImportRow {
        tag: "t".repeat(tag::MAX_TAG_LEN),
        max_id: tag::MAX_ID_LIMIT,
        step: tag::MAX_STEP,
        description: Some("d".repeat(tag::MAX_DESCRIPTION_LEN)),
    };
    let mut rows = vec![row.clone()];
    loop {
        rows.push(row.clone());
        let request = Request::ImportTags { rows: rows.clone(), now_ms: u64::MAX };
        if encode(&request).expect("encode").len() > MAX_REQUEST_BYTES {
            rows.pop();
            return Request::ImportTags { rows, now_ms: u64::MAX };
        }
    }
}

#[test]
fn the_largest_request_fits_its_limit() {
    let create = Request::CreateTag {
        tag: "t".repeat(tag::MAX_TAG_LEN),
        max_id: tag::MAX_ID_LIMIT,
        step: tag::MAX_STEP,
        description: "d".repeat(tag::MAX_DESCRIPTION_LEN),
        now_ms: u64::MAX,
    };
    let namespace = Request::CreateNamespace {
        namespace: "n".repeat(tag::MAX_TAG_LEN),
        record: crate::NamespaceRecord {
            epoch_s: u64::MAX,
            utc_offset_s: i32::MIN,
            shard_bits: u8::MAX,
            seq_bits: u8::MAX,
            description: "d".repeat(tag::MAX_DESCRIPTION_LEN),
            created_at_ms: u64::MAX,
        },
    };
    let claim = Request::ClaimTimeseq {
        namespace: "n".repeat(tag::MAX_TAG_LEN),
        second: u64::MAX,
        count: u64::MAX,
        now_ms: u64::MAX,
    };
    for request in [create, largest_request(), namespace, claim] {
        let len = encode(&request).expect("encode").len();
        assert!(len <= MAX_REQUEST_BYTES, "{len} bytes");
    }
}

/// The worst legitimate `/raft/*` bodies stay under `MAX_RPC_BYTES` and decode.
#[test]
fn the_largest_raft_messages_fit_the_rpc_limit() {
    let membership = largest_membership();
    let meta = SnapshotMeta {
        last_log_id: Some(log_id(9, 1, 9)),
        last_membership: StoredMembership::new(Some(log_id(9, 1, 8)), membership.clone()),
        snapshot_id: "9-1-9-123456789".to_string(),
    };
    let chunk = typ::InstallSnapshotRequest {
        vote: Vote::new_committed(9, 1),
        meta,
        offset: u64::MAX,
        data: vec![0xa5; SNAPSHOT_CHUNK_BYTES as usize],
        done: false,
    };
    let bytes = encode(&chunk).expect("encode");
    assert!(bytes.len() <= MAX_RPC_BYTES, "{} bytes", bytes.len());
    assert_eq!(decode::<typ::InstallSnapshotRequest>(&bytes).expect("decode").data.len(), chunk.data.len());

    for payload in [EntryPayload::Normal(largest_request()), EntryPayload::Membership(membership)] {
        let entries: Vec<typ::Entry> = (0..MAX_PAYLOAD_ENTRIES)
            .map(|index| typ::Entry { log_id: log_id(9, 1, index), payload: payload.clone() })
            .collect();
        let append = typ::AppendEntriesRequest {
            vote: Vote::new_committed(9, 1),
            prev_log_id: Some(log_id(9, 1, 0)),
            entries,
            leader_commit: Some(log_id(9, 1, 0)),
        };
        let bytes = encode(&append).expect("encode");
        assert!(bytes.len() <= MAX_RPC_BYTES, "{} bytes", bytes.len());
        assert_eq!(decode::<typ::AppendEntriesRequest>(&bytes).expect("decode").entries, append.entries);
    }
}
