//! The keys of each keyspace.
//!
//! Log keys are big-endian `u64` so that the engine's byte order is index order. State-machine keys
//! are short ASCII prefixes; tag names are restricted to `[A-Za-z0-9_.:-]`, so `tag/<name>` sorts
//! the same way as the names themselves.

/// Log-store metadata (keyspace `Meta`).
pub const FORMAT: &[u8] = b"format";
pub const VOTE: &[u8] = b"vote";
pub const COMMITTED: &[u8] = b"committed";
pub const LAST_PURGED: &[u8] = b"last_purged";
/// The member incarnation (`u64`) the store was created for (see `identity::open_member`).
pub const INCARNATION: &[u8] = b"incarnation";

/// State-machine keys (keyspace `StateMachine`).
pub const LAST_APPLIED: &[u8] = b"last_applied";
pub const MEMBERSHIP: &[u8] = b"membership";
pub const TAG_PREFIX: &[u8] = b"tag/";
/// The snowflake layout and worker leases, one value (at most a few thousand leases).
pub const SNOWFLAKE: &[u8] = b"snowflake";
/// The cluster ID (`u64`), present once set.
pub const CLUSTER_ID: &[u8] = b"cluster_id";
/// The time-sequence registry, one value (its namespaces and the claimed seconds of the last ten
/// minutes).
pub const TIMESEQ: &[u8] = b"timeseq";
/// The cluster version (`raft::Version`), present once raised past the baseline (0.1.0, whose
/// binary ignores this key with a warning).
pub const CLUSTER_VERSION: &[u8] = b"cluster_version";
pub const SNAPSHOT_META: &[u8] = b"snapshot/meta";
pub const SNAPSHOT_DATA_PREFIX: &[u8] = b"snapshot/data/";

pub fn log_key(index: u64) -> [u8; 8] {
    index.to_be_bytes()
}

pub fn tag_key(name: &str) -> Vec<u8> {
    [TAG_PREFIX, name.as_bytes()].concat()
}

/// The tag name of a `tag/<name>` key, `None` for any other key.
pub fn tag_name(key: &[u8]) -> Option<&str> {
    std::str::from_utf8(key.strip_prefix(TAG_PREFIX)?).ok()
}

/// Chunk `n` of the current snapshot's data; big-endian so chunks scan in order.
pub fn snapshot_chunk_key(n: u32) -> Vec<u8> {
    [SNAPSHOT_DATA_PREFIX, &n.to_be_bytes()].concat()
}

#[cfg(test)]
mod tests;
