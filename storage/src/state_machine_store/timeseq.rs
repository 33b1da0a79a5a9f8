//! The time-sequence registry on disk, in one of two layouts:
//! - whole: the registry as one value under `timeseq`, rewritten whenever an apply touched it.
//!   Release 0.1.0 reads only this, so it stays the layout while a member may still be rolled
//!   back to it: until the cluster version reaches `Version::CLAIM_BATCHES`.
//! - split: `timeseq/clock`, one key per namespace, and per claimed second one value per shard
//!   of the namespaces (`keys::TIMESEQ_*`, [`shard_of`]): an apply rewrites only the shards of the
//!   seconds its claims named and removes the seconds it forgot, so its cost follows its claims,
//!   not the registry (10,000 namespaces claiming every second).
//!
//! Why shards of a second, not one key per (namespace, second): sled's cost is per key. A full
//! registry of 10,000 namespaces x 600 seconds is 6 M pairs; as 6 M keys, writing them in one
//! batch (an install, the switch) took over 20 GB and opening them about a minute. As shards it
//! is 600 x 64 values of about 150 namespaces (4 KiB, inline in sled's pages, like the snapshot
//! chunks), and a batch claiming one second for every namespace rewrites just that second's 64.
//!
//! A store switches from whole to split once, in the apply whose state is at
//! `Version::CLAIM_BATCHES` (the one that raised the cluster version, or the first after it for a
//! store that reached it before this layout existed): that batch removes `timeseq` and writes the
//! whole registry split. An installed snapshot is written in the layout of its cluster version.
//! Both layouts are read on open, never both at once.
//!
//! Window blocks (`TimeseqRegistry::windows`, a field the registry's own encoding skips) are kept
//! in either layout as records, `timeseq/win/<last second><record>` → (namespace, last second,
//! first second, highest end) of each: an apply writes one record of the windows its claims
//! named, keyed by the latest last second among them and its last entry's index, and removes the
//! records forgotten as one key range, like the seconds. One key per apply, not per window: the
//! first requests of 10,000 namespaces on three nodes are 30,000 window claims that every node
//! applies, and one sled key each (inserted among the others, splitting and copying sled's
//! nodes) was a fifth of the nodes' CPU while they lasted. A window appears in every record
//! written since it was first claimed; read back, each keeps its highest end, and those below
//! the horizon (in a record kept for a later window) are left out, as memory forgot them.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::collections::HashMap;

use leafraft_state::TimeseqRegistry;
use leafraft_state::Version;
use serde::Deserialize;
use serde::Serialize;

use crate::codec;
use crate::engine::Batch;
use crate::engine::Engine;
use crate::engine::Keyspace;
use crate::error::Error;
use crate::keys;

/// The registry's scalars, stored under `timeseq/clock` in the split layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeseqClock {
    pub newest_now_ms: u64,
    pub floor_s: u64,
}

impl TimeseqClock {
    fn of(registry: &TimeseqRegistry) -> TimeseqClock {
        TimeseqClock { newest_now_ms: registry.newest_now_ms, floor_s: registry.floor_s }
    }
}

/// The shards of each second's namespaces: enough for values of about 4 KiB at 10,000
/// namespaces, few enough that a full registry is 38,400 keys.
pub const SHARDS: u32 = 64;

/// The shard of a namespace's seconds: a fixed function of its name (CRC-32), the same on every
/// node and in every release, since it is part of the stored layout.
pub fn shard_of(name: &str) -> u8 {
    (crc32fast::hash(name.as_bytes()) % SHARDS) as u8
}

/// The stored value of one shard of one second: each namespace's next free sequence.
pub type ShardValue = BTreeMap<String, u64>;

/// Whether a state at `cluster_version` is stored split: only once no member can be rolled back
/// to a release that reads only the whole value.
pub fn split_at(cluster_version: Version) -> bool {
    cluster_version >= Version::CLAIM_BATCHES
}

/// The keys one request may change, named by the request itself (no registry walk).
#[derive(Debug, Default)]
pub struct TimeseqKeys<'a> {
    pub namespaces: Vec<&'a str>,
    pub seconds: Vec<(u64, &'a str)>,
    /// (last second, namespace) of each window claimed.
    pub windows: Vec<(u64, &'a str)>,
}

impl<'a> TimeseqKeys<'a> {
    pub fn namespaces(names: impl IntoIterator<Item = &'a str>) -> TimeseqKeys<'a> {
        TimeseqKeys { namespaces: names.into_iter().collect(), ..TimeseqKeys::default() }
    }

    pub fn second(second: u64, name: &'a str) -> TimeseqKeys<'a> {
        TimeseqKeys { seconds: vec![(second, name)], ..TimeseqKeys::default() }
    }

    /// The (second, namespace) of every time-sequence claim of a batch, and the (last second,
    /// namespace) of every window claim.
    pub fn claims(claims: &'a [leafraft_state::Claim]) -> TimeseqKeys<'a> {
        let mut keys = TimeseqKeys::default();
        for claim in claims {
            match claim {
                leafraft_state::Claim::Timeseq { namespace, second, .. } => {
                    keys.seconds.push((*second, namespace.as_str()))
                }
                leafraft_state::Claim::TimeseqWindow { namespace, first_second, seconds, .. }
                | leafraft_state::Claim::TimeseqSharedWindow { namespace, first_second, seconds, .. } => {
                    // A window whose last second overflows is refused: nothing to write.
                    if let Some(last) = first_second.checked_add(seconds.saturating_sub(1)) {
                        keys.windows.push((last, namespace.as_str()));
                    }
                }
                leafraft_state::Claim::Segment { .. } | leafraft_state::Claim::Monotonic { .. } => {}
            }
        }
        keys
    }

    pub fn is_empty(&self) -> bool {
        self.namespaces.is_empty() && self.seconds.is_empty() && self.windows.is_empty()
    }
}

/// What the entries of one apply named in the registry, and the registry's scalars before them.
pub struct TimeseqChanges<'a> {
    touched: bool,
    clock_before: TimeseqClock,
    forgotten_below_before: u64,
    namespaces: BTreeSet<&'a str>,
    seconds: BTreeSet<(u64, &'a str)>,
    windows: BTreeSet<(u64, &'a str)>,
}

impl<'a> TimeseqChanges<'a> {
    pub fn before(registry: &TimeseqRegistry) -> TimeseqChanges<'a> {
        TimeseqChanges {
            touched: false,
            clock_before: TimeseqClock::of(registry),
            forgotten_below_before: registry.forgotten_below.horizon_s(),
            namespaces: BTreeSet::new(),
            seconds: BTreeSet::new(),
            windows: BTreeSet::new(),
        }
    }

    pub fn note(&mut self, keys: TimeseqKeys<'a>) {
        self.touched = true;
        self.namespaces.extend(keys.namespaces);
        self.seconds.extend(keys.seconds);
        self.windows.extend(keys.windows);
    }

    /// Adds to `batch` what the applied entries changed, in the layout the store is in
    /// (`split`). In the split layout: each named namespace's record, each shard of a second a
    /// claim named, read back and updated from memory (only the namespaces named: nothing else of
    /// a second changes), the clock if it moved, and the removal of every stored second below
    /// the horizon the registry forgot below, if it forgot since `before`.
    pub fn write(
        &self,
        registry: &TimeseqRegistry,
        split: bool,
        record: u64,
        engine: &Engine,
        batch: &mut Batch,
    ) -> Result<(), Error> {
        if !self.touched {
            return Ok(());
        }
        let forgotten_below = registry.forgotten_below.horizon_s();
        // In either layout (a window claim needs a cluster version that splits, but nothing here
        // relies on it): one record of the windows of each (last second, namespace) a claim named...
        let mut windows: Vec<StoredWindow> = Vec::new();
        for &(last, name) in self.windows.range((forgotten_below, "")..) {
            let Some(blocks) = registry.windows.get(name) else { continue };
            let ending = blocks.range((last, 0)..=(last, u64::MAX));
            windows.extend(ending.map(|(&(_, first), &end)| (name, last, first, end)));
        }
        if let Some(latest) = windows.iter().map(|&(_, last, _, _)| last).max() {
            batch.put(keys::timeseq_window_key(latest, record), codec::encode(&windows)?);
        }
        // ... and the removal of those forgotten since `before`.
        if forgotten_below != self.forgotten_below_before {
            let below = keys::TIMESEQ_WINDOW_PREFIX.to_vec()..keys::timeseq_window_start(forgotten_below);
            for kv in engine.range(Keyspace::StateMachine, below) {
                batch.remove(kv?.0);
            }
        }
        if !split {
            batch.put(keys::TIMESEQ, codec::encode(registry)?);
            return Ok(());
        }
        for &name in &self.namespaces {
            if let Some(record) = registry.namespaces.get(name) {
                batch.put(keys::timeseq_namespace_key(name), codec::encode(record)?);
            }
        }
        let mut shards: BTreeMap<(u64, u8), Vec<&str>> = BTreeMap::new();
        // A second below the horizon is gone from memory and is removed below.
        for &(second, name) in self.seconds.range((forgotten_below, "")..) {
            shards.entry((second, shard_of(name))).or_default().push(name);
        }
        for ((second, shard), names) in shards {
            let key = keys::timeseq_second_key(second, shard);
            let stored = engine.get(Keyspace::StateMachine, &key)?;
            // Read in place: a shard holds about 150 names at 10,000 namespaces, and an apply
            // rewrites every shard its claims named; decoding each name into a `String` was
            // most of an apply's time (the 10,000 namespaces).
            let mut value = match &stored {
                Some(bytes) => codec::decode_borrowed::<BorrowedShard>(bytes)?,
                None => BorrowedShard::default(),
            };
            let mut changed = false;
            for name in names {
                // Absent from memory at or above the horizon: never claimed (a refused claim).
                let Some(&next) = registry.next_seq.get(name).and_then(|seconds| seconds.get(&second)) else {
                    continue;
                };
                changed |= value.set(name, next);
            }
            if changed {
                batch.put(key, codec::encode(&SortedShard(&value.0))?);
            }
        }
        let clock = TimeseqClock::of(registry);
        if clock != self.clock_before {
            batch.put(keys::TIMESEQ_CLOCK, codec::encode(&clock)?);
        }
        if forgotten_below != self.forgotten_below_before {
            // Every stored second is at or above the previous mark, so this reads only the
            // seconds just forgotten.
            let below = keys::TIMESEQ_SECOND_PREFIX.to_vec()..keys::timeseq_second_start(forgotten_below);
            for kv in engine.range(Keyspace::StateMachine, below) {
                batch.remove(kv?.0);
            }
        }
        Ok(())
    }
}

/// One window in a stored record: (namespace, last second, first second, highest end).
pub type StoredWindow<'a> = (&'a str, u64, u64, u64);

/// A stored record of windows, as read back (the same bytes as a `Vec<StoredWindow>`).
pub type WindowRecord = Vec<(String, u64, u64, u64)>;

/// Adds every window block of the registry to `batch` (the caller removed what the keyspace
/// held): in either layout, one record per last second, numbered 0 (no entry at index 0 claims).
pub fn put_windows(registry: &TimeseqRegistry, batch: &mut Batch) -> Result<(), Error> {
    let mut by_last: BTreeMap<u64, Vec<StoredWindow>> = BTreeMap::new();
    for (name, blocks) in &registry.windows {
        for (&(last, first), &end) in blocks {
            by_last.entry(last).or_default().push((name, last, first, end));
        }
    }
    for (last, windows) in by_last {
        batch.put(keys::timeseq_window_key(last, 0), codec::encode(&windows)?);
    }
    Ok(())
}

/// Adds the whole registry in the split layout to `batch` (a switch-over or an install; the
/// caller removed what the keyspace held). Shard by shard, so that no name is copied: each
/// shard's namespaces are visited in name order, which is the order of every value it stores.
pub fn put_split(registry: &TimeseqRegistry, batch: &mut Batch) -> Result<(), Error> {
    put_windows(registry, batch)?;
    batch.put(keys::TIMESEQ_CLOCK, codec::encode(&TimeseqClock::of(registry))?);
    for (name, record) in &registry.namespaces {
        batch.put(keys::timeseq_namespace_key(name), codec::encode(record)?);
    }
    let mut by_shard: Vec<Vec<(&str, &BTreeMap<u64, u64>)>> = vec![Vec::new(); SHARDS as usize];
    for (name, seconds) in &registry.next_seq {
        by_shard[usize::from(shard_of(name))].push((name, seconds));
    }
    for (shard, namespaces) in (0u8..).zip(by_shard) {
        let mut values: BTreeMap<u64, Vec<(&str, u64)>> = BTreeMap::new();
        for (name, seconds) in namespaces {
            for (&second, &next) in seconds {
                values.entry(second).or_default().push((name, next));
            }
        }
        for (second, value) in values {
            batch.put(keys::timeseq_second_key(second, shard), codec::encode(&SortedShard(&value))?);
        }
    }
    Ok(())
}

/// A shard's value built in name order, encoded exactly as the [`ShardValue`] it decodes to
/// (serde's map, as `BTreeMap` serializes itself), without building one.
pub struct SortedShard<'a>(pub &'a [(&'a str, u64)]);

impl Serialize for SortedShard<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(name, next)| (name, next)))
    }
}

/// A stored shard read without copying its names: its (namespace, next) pairs in name order, as
/// a [`ShardValue`] stores them.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct BorrowedShard<'a>(pub Vec<(&'a str, u64)>);

impl<'a> BorrowedShard<'a> {
    /// Sets `name`'s next sequence (keeping name order); answers whether that changed the value.
    fn set(&mut self, name: &'a str, next: u64) -> bool {
        match self.0.binary_search_by(|(stored, _)| (*stored).cmp(name)) {
            Ok(at) if self.0[at].1 == next => false,
            Ok(at) => {
                self.0[at].1 = next;
                true
            }
            Err(at) => {
                self.0.insert(at, (name, next));
                true
            }
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for BorrowedShard<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<BorrowedShard<'a>, D::Error> {
        struct Pairs;

        impl<'de> serde::de::Visitor<'de> for Pairs {
            type Value = BorrowedShard<'de>;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map of namespace names to sequences")
            }

            fn visit_map<M: serde::de::MapAccess<'de>>(self, mut map: M) -> Result<BorrowedShard<'de>, M::Error> {
                // The claimed length is only a hint: never reserve more than a shard can hold.
                let mut pairs = Vec::with_capacity(map.size_hint().unwrap_or(0).min(4096));
                while let Some(pair) = map.next_entry::<&'de str, u64>()? {
                    pairs.push(pair);
                }
                // A `ShardValue` is written in name order; one that is not (none is) must still
                // be searched correctly, and a name twice would be a corrupt value.
                if !pairs.is_sorted_by(|a, b| a.0 < b.0) {
                    pairs.sort_unstable_by(|a, b| a.0.cmp(b.0));
                    if pairs.windows(2).any(|w| w[0].0 == w[1].0) {
                        return Err(serde::de::Error::custom("a namespace appears twice in one shard"));
                    }
                }
                Ok(BorrowedShard(pairs))
            }
        }

        deserializer.deserialize_map(Pairs)
    }
}

/// Reads the registry from the keys of either layout, as `StateMachineStore::open` scans them.
#[derive(Default)]
pub struct TimeseqLoader {
    whole: Option<TimeseqRegistry>,
    split: TimeseqRegistry,
    /// Each namespace's (second, next) in key order, which is ascending by second: hashed while
    /// millions are read, sorted by name once at the end.
    seconds: HashMap<String, Vec<(u64, u64)>>,
    split_found: bool,
    /// The window blocks, in either layout.
    windows: BTreeMap<String, leafraft_state::timeseq::WindowBlocks>,
}

impl TimeseqLoader {
    /// Takes `key` if it is one of the registry's; answers whether it was.
    pub fn load(&mut self, key: &[u8], value: &[u8]) -> Result<bool, (&'static str, Error)> {
        if key == keys::TIMESEQ {
            self.whole = Some(codec::decode(value).map_err(|e| ("time-sequence registry", e.into()))?);
        } else if key == keys::TIMESEQ_CLOCK {
            let clock: TimeseqClock = codec::decode(value).map_err(|e| ("time-sequence clock", e.into()))?;
            self.split.newest_now_ms = clock.newest_now_ms;
            self.split.floor_s = clock.floor_s;
        } else if let Some(name) = keys::timeseq_namespace_name(key) {
            let record = codec::decode(value).map_err(|e| ("time-sequence namespace", e.into()))?;
            self.split.namespaces.insert(name.to_string(), record);
        } else if keys::timeseq_window(key).is_some() {
            let record: WindowRecord = codec::decode(value).map_err(|e| ("time-sequence window", e.into()))?;
            for (name, last, first, end) in record {
                let top = self.windows.entry(name).or_default().entry((last, first)).or_insert(end);
                *top = (*top).max(end);
            }
            return Ok(true);
        } else if let Some((second, _)) = keys::timeseq_second(key) {
            let shard: ShardValue = codec::decode(value).map_err(|e| ("time-sequence second", e.into()))?;
            for (name, next) in shard {
                self.seconds.entry(name).or_default().push((second, next));
            }
        } else {
            return Ok(false);
        }
        self.split_found |= key != keys::TIMESEQ;
        Ok(true)
    }

    /// The registry, and whether the store holds it split (or, holding none, is at the cluster
    /// version that writes it split).
    pub fn finish(self, cluster_version: Version) -> Result<(TimeseqRegistry, bool), (&'static str, Error)> {
        let windows = self.windows;
        let (mut registry, split) = match (self.whole, self.split_found) {
            (Some(_), true) => Err((
                "time-sequence registry",
                Error::Invalid("the store holds the time-sequence registry in both layouts".into()),
            )),
            (Some(whole), false) => Ok((whole, false)),
            (None, true) => {
                let mut split = self.split;
                split.next_seq =
                    self.seconds.into_iter().map(|(name, seconds)| (name, seconds.into_iter().collect())).collect();
                Ok((split, true))
            }
            (None, false) => Ok((TimeseqRegistry::default(), split_at(cluster_version))),
        }?;
        // A record is kept while any of its windows is; memory forgot the others.
        let horizon_s = registry.horizon_s();
        registry.windows = windows
            .into_iter()
            .filter_map(|(name, mut blocks)| {
                blocks.retain(|&(last, _), _| last >= horizon_s);
                (!blocks.is_empty()).then_some((name, blocks))
            })
            .collect();
        Ok((registry, split))
    }
}

#[cfg(test)]
mod tests;
