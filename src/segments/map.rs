//! `BufferMap`: a node's buffers by tag, read without locks on the hot path.
//!
//! Copy-on-write maps (`ArcSwap<HashMap>`) in 256 shards chosen by the tag's hash: a reader loads
//! one shard, and a new tag copies one shard's entries, not every tag's (one map copied whole
//! made the first IDs of 100,000 tags quadratic: about 5·10⁹ entry copies). A map is let go as
//! soon as no reader holds it, so a buffer taken out is dropped, and its counts added to the
//! totals of dropped buffers, when the last request lets go of it, as with one map. (A lock-free
//! map with deferred reclamation, papaya, kept removed buffers alive for an unbounded time and
//! their IDs out of `/metrics`' totals: `tests/e2e/segments.rs` caught it.)

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::TagBuffer;

const SHARDS: usize = 256;

type Shard = HashMap<String, Arc<TagBuffer>>;

pub(super) struct BufferMap {
    shards: Vec<ArcSwap<Shard>>,
    hasher: std::hash::BuildHasherDefault<std::collections::hash_map::DefaultHasher>,
}

impl BufferMap {
    pub(super) fn new() -> BufferMap {
        BufferMap { shards: (0..SHARDS).map(|_| ArcSwap::default()).collect(), hasher: Default::default() }
    }

    fn shard(&self, tag: &str) -> &ArcSwap<Shard> {
        let index = (self.hasher.hash_one(tag) % SHARDS as u64) as usize;
        &self.shards[index]
    }

    /// The shard that holds `tag`, as it is now (a reader's view: `.get(tag)` on it).
    pub(super) fn load(&self, tag: &str) -> arc_swap::Guard<Arc<Shard>> {
        self.shard(tag).load()
    }

    pub(super) fn get(&self, tag: &str) -> Option<Arc<TagBuffer>> {
        self.load(tag).get(tag).cloned()
    }

    /// Adds `buffer` under `tag`; the caller holds the segments' insert lock.
    pub(super) fn insert(&self, tag: &str, buffer: Arc<TagBuffer>) {
        let shard = self.shard(tag);
        let mut next = HashMap::clone(&shard.load());
        next.insert(tag.to_string(), buffer);
        shard.store(Arc::new(next));
    }

    /// Takes `buffer` out if it is still the one under its tag; the caller holds the insert lock.
    pub(super) fn remove_if_current(&self, buffer: &Arc<TagBuffer>) -> bool {
        let shard = self.shard(&buffer.tag);
        let current = shard.load();
        if !current.get(&buffer.tag).is_some_and(|held| Arc::ptr_eq(held, buffer)) {
            return false;
        }
        let mut next = HashMap::clone(&current);
        next.remove(&buffer.tag);
        shard.store(Arc::new(next));
        true
    }

    /// Every buffer, held (so none is dropped while the caller reads them).
    pub(super) fn values(&self) -> Vec<Arc<TagBuffer>> {
        self.shards.iter().flat_map(|shard| shard.load().values().cloned().collect::<Vec<_>>()).collect()
    }

    pub(super) fn tags(&self) -> Vec<String> {
        self.shards.iter().flat_map(|shard| shard.load().keys().cloned().collect::<Vec<_>>()).collect()
    }
}
