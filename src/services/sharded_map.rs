//! `ShardedMap`: a node's per-name holders (segment buffers by tag, time-sequence holders by
//! namespace), read without locks on the hot path.
//!
//! Copy-on-write maps (`ArcSwap<HashMap>`) in 256 shards chosen by the name's hash: a reader loads
//! one shard, and a new name copies one shard's entries, not every name's (one map copied whole
//! made the first IDs of 100,000 tags quadratic: about 5·10⁹ entry copies, and the first requests
//! of 10,000 time-sequence namespaces seconds of copying on each node). A map is let go as soon as
//! no reader holds it, so a value taken out is dropped, and a buffer's counts added to the totals
//! of dropped buffers, when the last request lets go of it, as with one map. (A lock-free map with
//! deferred reclamation, papaya, kept removed buffers alive for an unbounded time and their IDs
//! out of `/metrics`' totals: `tests/e2e/segments.rs` caught it.)

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Arc;

use arc_swap::ArcSwap;

const SHARDS: usize = 256;

type Shard<V> = HashMap<String, Arc<V>>;

/// Values by name; writers (`insert`, `remove_if_current`) are serialised by the owner's lock.
pub struct ShardedMap<V> {
    shards: Vec<ArcSwap<Shard<V>>>,
    hasher: std::hash::BuildHasherDefault<std::collections::hash_map::DefaultHasher>,
}

impl<V> Default for ShardedMap<V> {
    fn default() -> ShardedMap<V> {
        ShardedMap { shards: (0..SHARDS).map(|_| ArcSwap::default()).collect(), hasher: Default::default() }
    }
}

impl<V> ShardedMap<V> {
    fn shard(&self, name: &str) -> &ArcSwap<Shard<V>> {
        let index = (self.hasher.hash_one(name) % SHARDS as u64) as usize;
        &self.shards[index]
    }

    /// The shard that holds `name`, as it is now (a reader's view: `.get(name)` on it).
    pub fn load(&self, name: &str) -> arc_swap::Guard<Arc<Shard<V>>> {
        self.shard(name).load()
    }

    pub fn get(&self, name: &str) -> Option<Arc<V>> {
        self.load(name).get(name).cloned()
    }

    /// Adds `value` under `name`; the caller holds its insert lock.
    pub fn insert(&self, name: &str, value: Arc<V>) {
        let shard = self.shard(name);
        let mut next = HashMap::clone(&shard.load());
        next.insert(name.to_string(), value);
        shard.store(Arc::new(next));
    }

    /// Takes `value` out if it is still the one under `name`; the caller holds its insert lock.
    pub fn remove_if_current(&self, name: &str, value: &Arc<V>) -> bool {
        let shard = self.shard(name);
        let current = shard.load();
        if !current.get(name).is_some_and(|held| Arc::ptr_eq(held, value)) {
            return false;
        }
        let mut next = HashMap::clone(&current);
        next.remove(name);
        shard.store(Arc::new(next));
        true
    }

    /// Calls `f` with every value, one shard at a time, copying nothing: for walks that run
    /// often over many values (a shard's insert copies it, so `f` sees the shard as it was).
    pub fn for_each_value(&self, mut f: impl FnMut(&Arc<V>)) {
        for shard in &self.shards {
            shard.load().values().for_each(&mut f);
        }
    }

    /// Every value, held (so none is dropped while the caller reads them).
    pub fn values(&self) -> Vec<Arc<V>> {
        self.shards.iter().flat_map(|shard| shard.load().values().cloned().collect::<Vec<_>>()).collect()
    }

    /// Every (name, value), held.
    pub fn entries(&self) -> Vec<(String, Arc<V>)> {
        self.shards
            .iter()
            .flat_map(|shard| {
                shard.load().iter().map(|(name, value)| (name.clone(), value.clone())).collect::<Vec<_>>()
            })
            .collect()
    }

    pub fn names(&self) -> Vec<String> {
        self.shards.iter().flat_map(|shard| shard.load().keys().cloned().collect::<Vec<_>>()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_found_under_its_name_until_taken_out_while_current() {
        let map = ShardedMap::default();
        let (one, two) = (Arc::new(1), Arc::new(2));
        for i in 0..1000 {
            map.insert(&format!("n{i}"), Arc::new(i + 10));
        }
        map.insert("a", one.clone());
        assert_eq!(map.get("a"), Some(one.clone()));
        // A value no longer under its name is not taken out (a newer one replaced it).
        map.insert("a", two.clone());
        assert!(!map.remove_if_current("a", &one));
        assert!(map.remove_if_current("a", &two));
        assert_eq!(map.get("a"), None);
        assert_eq!(map.values().len(), 1000);
        assert_eq!(map.names().len(), 1000);
        assert_eq!(
            map.entries().iter().filter(|(name, value)| **value == name[1..].parse::<i32>().unwrap() + 10).count(),
            1000
        );
    }
}
