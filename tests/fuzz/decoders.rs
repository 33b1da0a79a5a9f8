//! Every decoder on the wire and on disk, fed arbitrary and mutated bytes: it answers a value or
//! an error, never panics, and never allocates more at once than serde's cautious preallocation
//! (1 MiB) plus what the input's own length allows (see `leafraft_state::codec`).

use leafraft::cluster::ForwardError;
use leafraft::cluster::Forwarded;
use leafraft::cluster::ForwardedReply;
use leafraft_state::typ;
use leafraft_state::IdStateMachine;
use leafraft_state::SnowflakeRegistry;
use leafraft_state::TagRecord;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use proptest::test_runner::TestRunner;
use serde::de::DeserializeOwned;

use crate::alloc::largest_allocation;
use crate::config;
use crate::corpus;
use crate::mutate::hostile;

const CASES: u32 = 3000;

/// What one decode of `len` bytes may allocate at once.
fn allowed(len: usize) -> usize {
    (2 << 20) + 64 * len
}

fn decodes_within_bounds<T: DeserializeOwned>(bytes: &[u8]) -> Result<(), TestCaseError> {
    let ((), largest) = largest_allocation(|| drop(leafraft_state::codec::decode::<T>(bytes)));
    prop_assert!(largest <= allowed(bytes.len()), "{} bytes made the decoder allocate {largest} at once", bytes.len());
    Ok(())
}

/// Runs `CASES` hostile inputs built from `corpus` through the decoder of `T`.
fn fuzz<T: DeserializeOwned>(corpus: Vec<Vec<u8>>) {
    for valid in &corpus {
        if let Err(e) = leafraft_state::codec::decode::<T>(valid) {
            panic!("a corpus value does not decode as {}: {e}", std::any::type_name::<T>());
        }
    }
    let mut runner = TestRunner::new(config(CASES));
    runner.run(&hostile(corpus), |bytes| decodes_within_bounds::<T>(&bytes)).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn fuzz_raft_append_bodies() {
    fuzz::<typ::AppendEntriesRequest>(corpus::append_requests());
}

#[test]
fn fuzz_raft_vote_bodies() {
    fuzz::<typ::VoteRequest>(corpus::vote_requests());
}

#[test]
fn fuzz_raft_snapshot_bodies() {
    fuzz::<typ::InstallSnapshotRequest>(corpus::snapshot_requests());
}

#[test]
fn fuzz_raft_forward_bodies() {
    fuzz::<Forwarded>(corpus::forwarded());
}

/// What `post_bincode` decodes from a peer's 200.
#[test]
fn fuzz_raft_answers() {
    let (append, vote, snapshot) = corpus::raft_answers();
    fuzz::<Result<typ::AppendEntriesResponse, typ::RaftError>>(append);
    fuzz::<Result<typ::VoteResponse, typ::RaftError>>(vote);
    fuzz::<Result<typ::InstallSnapshotResponse, typ::RaftError<typ::InstallSnapshotError>>>(snapshot);
    fuzz::<Result<ForwardedReply, ForwardError>>(corpus::forward_answers());
}

#[test]
fn fuzz_persisted_values() {
    for (what, corpus) in corpus::persisted() {
        println!("fuzzing the stored {what}");
        match what {
            "vote" => fuzz::<typ::Vote>(corpus),
            "log id" => fuzz::<typ::LogId>(corpus),
            "log entry" => fuzz::<typ::Entry>(corpus),
            "membership" => fuzz::<typ::StoredMembership>(corpus),
            "tag record" => fuzz::<TagRecord>(corpus),
            "snowflake registry" => fuzz::<SnowflakeRegistry>(corpus),
            "snapshot" => fuzz::<IdStateMachine>(corpus),
            other => panic!("no decoder for {other}"),
        }
    }
}
