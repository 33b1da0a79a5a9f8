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
/// minutes): the layout until the cluster version reaches `Version::CLAIM_BATCHES`, which
/// release 0.1.0 reads.
pub const TIMESEQ: &[u8] = b"timeseq";
/// The time-sequence registry split into small values, so an apply writes only what its claims
/// changed (the layout from `Version::CLAIM_BATCHES` on, which replaces `timeseq`):
/// `timeseq/clock` → its `newest_now_ms` and `floor_s`, `timeseq/ns/<name>` → a namespace's
/// record, `timeseq/seq/<second><shard>` → the next free sequence of each namespace of that shard
/// that claimed that second.
pub const TIMESEQ_CLOCK: &[u8] = b"timeseq/clock";
pub const TIMESEQ_NAMESPACE_PREFIX: &[u8] = b"timeseq/ns/";
pub const TIMESEQ_SECOND_PREFIX: &[u8] = b"timeseq/seq/";
/// `timeseq/win/<last second><record>` → window blocks, as (namespace, last second, first second,
/// highest end): those one apply changed (the record is its last entry's log index; the last
/// second the latest of them), or in an install those ending at that second (record 0). Written
/// in either layout (window claims exist only from `Version::CLAIM_BATCHES` on); the last second
/// first and big-endian, so the records forgotten below a horizon are one range at the start of
/// the prefix.
pub const TIMESEQ_WINDOW_PREFIX: &[u8] = b"timeseq/win/";
/// The cluster version (`leafraft_state::Version`), present once raised past the baseline (0.1.0, whose
/// binary ignores this key with a warning).
pub const CLUSTER_VERSION: &[u8] = b"cluster_version";
/// `scramble/<tag>`: a scrambled tag's key (a `u128`), written with the tag and never changed.
/// The baseline release writes none (it cannot create scrambled tags).
pub const SCRAMBLE_PREFIX: &[u8] = b"scramble/";
/// The current snapshot, in one of two layouts: `snapshot/meta` → `SnapshotRecord` with its data
/// in `snapshot/data/<n>` chunks (while the cluster version is the baseline's, which reads them),
/// or `snapshot/file` → `SnapshotFile`, naming a file of `snapshot_files` (from 0.3.0 on).
pub const SNAPSHOT_META: &[u8] = b"snapshot/meta";
pub const SNAPSHOT_FILE: &[u8] = b"snapshot/file";
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

pub fn scramble_key(name: &str) -> Vec<u8> {
    [SCRAMBLE_PREFIX, name.as_bytes()].concat()
}

/// The tag name of a `scramble/<name>` key, `None` for any other key.
pub fn scramble_tag(key: &[u8]) -> Option<&str> {
    std::str::from_utf8(key.strip_prefix(SCRAMBLE_PREFIX)?).ok()
}

pub fn timeseq_namespace_key(name: &str) -> Vec<u8> {
    [TIMESEQ_NAMESPACE_PREFIX, name.as_bytes()].concat()
}

/// The namespace of a `timeseq/ns/<name>` key, `None` for any other key.
pub fn timeseq_namespace_name(key: &[u8]) -> Option<&str> {
    std::str::from_utf8(key.strip_prefix(TIMESEQ_NAMESPACE_PREFIX)?).ok()
}

/// The key of one shard of a second: the second first and big-endian, so the keys of every
/// second below a horizon are one range at the start of the prefix (forgetting them reads only
/// them).
pub fn timeseq_second_key(second: u64, shard: u8) -> Vec<u8> {
    [TIMESEQ_SECOND_PREFIX, &second.to_be_bytes(), &[shard]].concat()
}

/// The first key of `second`: every key of an earlier second sorts below it.
pub fn timeseq_second_start(second: u64) -> Vec<u8> {
    [TIMESEQ_SECOND_PREFIX, &second.to_be_bytes()].concat()
}

/// The (second, shard) of a `timeseq/seq/...` key, `None` for any other key.
pub fn timeseq_second(key: &[u8]) -> Option<(u64, u8)> {
    let rest = key.strip_prefix(TIMESEQ_SECOND_PREFIX)?;
    let (second, shard) = rest.split_first_chunk::<8>()?;
    match shard {
        [shard] => Some((u64::from_be_bytes(*second), *shard)),
        _ => None,
    }
}

pub fn timeseq_window_key(last_second: u64, record: u64) -> Vec<u8> {
    [TIMESEQ_WINDOW_PREFIX, &last_second.to_be_bytes(), &record.to_be_bytes()].concat()
}

/// The first window key of `last_second`: every window ending earlier sorts below it.
pub fn timeseq_window_start(last_second: u64) -> Vec<u8> {
    [TIMESEQ_WINDOW_PREFIX, &last_second.to_be_bytes()].concat()
}

/// The (last second, record) of a `timeseq/win/...` key, `None` for any other key.
pub fn timeseq_window(key: &[u8]) -> Option<(u64, u64)> {
    let rest = key.strip_prefix(TIMESEQ_WINDOW_PREFIX)?;
    let (last, record) = rest.split_first_chunk::<8>()?;
    let record: [u8; 8] = record.try_into().ok()?;
    Some((u64::from_be_bytes(*last), u64::from_be_bytes(record)))
}

/// Chunk `n` of the current snapshot's data; big-endian so chunks scan in order.
pub fn snapshot_chunk_key(n: u32) -> Vec<u8> {
    [SNAPSHOT_DATA_PREFIX, &n.to_be_bytes()].concat()
}

#[cfg(test)]
mod tests;
