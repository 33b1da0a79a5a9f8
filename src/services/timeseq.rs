//! `Timeseq`: sharded time-sequence IDs on this node. One `RangeHolder` per namespace, fed by
//! Raft-committed `ClaimTimeseq` answers (`claims.rs`), served without locks or I/O while a range
//! for the current second is held.
//!
//! Invariants:
//! 1. A sequence is handed out only from the `Response::TimeseqRange` of a committed and applied
//!    claim (`claims.rs` is the only installer), never from an unclaimed or random one.
//! 2. A range is served only during its own second on this node's clock (`RangeHolder`), and only
//!    while the clock verdict (`crate::clock::verdict`, shared with snowflake) confirms this
//!    node's clock.
//! 3. A request waits at most `MAX_WAIT` (one second) for a range, then fails clearly.
//! 4. Window claims (`claims.rs`) install a block for each second of their window, served under
//!    invariants 1 and 2 like any range; a request beyond the block takes one-second claims.
//! 5. A shared window's block (`shared.rs`) is installed only by the member it names, from its
//!    own apply of the entry, and only when the entry is past the fence this process learned:
//!    no process serves a block an earlier process of the same member may have served.

mod claims;
mod fence;
mod namespace;
mod schedule;
mod shared;

pub use schedule::home_member;
pub use schedule::window_phase;

use namespace::NamespaceHolder;

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use arc_swap::ArcSwapOption;

use crate::clock::now_ms;
use crate::clock::verdict::ClockCheck;
use crate::cluster::Cluster;
use crate::error::Error;
use crate::error::ErrorCode;
use crate::services::claims::ClaimBatcher;
use crate::services::sharded_map::ShardedMap;
use leafraft_ids::timeseq::Advance;
use leafraft_ids::timeseq::Layout;
use leafraft_ids::timeseq::Parts;
use leafraft_ids::timeseq::Take;

/// The largest `count` one request may ask for.
pub const MAX_COUNT: u64 = 10_000;

/// The longest a request waits for a range (the next second, or a claim).
pub const MAX_WAIT: Duration = Duration::from_secs(1);

/// The engine layout of a replicated namespace.
pub fn engine_layout(record: &leafraft_state::NamespaceRecord) -> Layout {
    Layout {
        epoch_s: record.epoch_s,
        utc_offset_s: record.utc_offset_s,
        shard_bits: record.shard_bits,
        seq_bits: record.seq_bits,
    }
}

/// Counters for `/metrics` and the status page.
#[derive(Debug, Default)]
pub struct TimeseqCounters {
    pub claims: AtomicU64,
    /// Window claims committed (each a block in every second of a window), shared ones included.
    pub window_claims: AtomicU64,
    /// Of those, claims this node sent as a namespace's home, a block for every member.
    pub shared_window_claims: AtomicU64,
    /// This node's blocks of shared windows, installed from its own apply (whoever claimed them).
    pub shared_blocks_installed: AtomicU64,
    /// This node's blocks of shared windows not served: their entry was committed before this
    /// process began (applied again after a restart) or before it learned its fence.
    pub shared_blocks_fenced: AtomicU64,
    pub waits: AtomicU64,
    pub exhausted_seconds: AtomicU64,
    pub refused_clocks: AtomicU64,
}

/// This node's view of one namespace, in numbers; `api` formats it.
#[derive(Debug, Clone, PartialEq)]
pub struct NamespaceState {
    pub current: Option<leafraft_ids::timeseq::SecondRange>,
    pub pending: Vec<leafraft_ids::timeseq::SecondRange>,
    pub ids_issued: u64,
    pub last_second_ids: u64,
}

pub struct Timeseq {
    cluster: Arc<Cluster>,
    /// Claims go through the node's batcher: the next second of every namespace in use shares
    /// an entry.
    claims: Arc<ClaimBatcher>,
    /// The clock verdict this node's snowflake upkeep checks: one peer clock check per node.
    clock: Arc<ClockCheck>,
    holders: ShardedMap<NamespaceHolder>,
    insert: Mutex<()>,
    /// The peer clock check's refusal, copied in by `maintain` so the hot path reads no lock.
    clock_refused: ArcSwapOption<Error>,
    /// Entries at or below it serve no shared window block here (`shared.rs`).
    fence: fence::Fence,
    pub counters: TimeseqCounters,
}

impl Timeseq {
    pub fn new(cluster: Arc<Cluster>, claims: Arc<ClaimBatcher>, clock: Arc<ClockCheck>) -> Timeseq {
        let unchecked = Error::new(
            ErrorCode::ClockUnchecked,
            "this node's clock has not been compared with its peers' yet; retry shortly",
        );
        Timeseq {
            cluster,
            claims,
            clock,
            holders: ShardedMap::default(),
            insert: Mutex::new(()),
            clock_refused: ArcSwapOption::from_pointee(unchecked),
            fence: fence::Fence::unknown(),
            counters: TimeseqCounters::default(),
        }
    }

    /// The clock verdict time sequences are served under.
    pub fn clock(&self) -> &ClockCheck {
        &self.clock
    }

    /// The layout of namespace `name`: fixed at creation, so the copy a holder keeps answers
    /// without the state machine's lock (once per request on the hot path); else the replicated
    /// state.
    pub fn layout(&self, name: &str) -> Result<Layout, Error> {
        if let Some(ns) = self.holders.load(name).get(name) {
            return Ok(ns.layout);
        }
        self.cluster
            .read(|sm| sm.timeseq.namespaces.get(name).map(engine_layout))
            .ok_or_else(|| Error::namespace_not_found(name))
    }

    /// One ID of `namespace` for `shard`, with the layout that encodes it: Leaf's path, which
    /// takes it from the range held for this second without building a `Vec`, else waits as
    /// [`Timeseq::next_ids`] does.
    pub async fn next_id(self: &Arc<Self>, namespace: &str, shard: u64) -> Result<(Parts, Layout), Error> {
        self.await_first_clock_check().await;
        if let Some(ns) = self.holders.load(namespace).get(namespace) {
            let started_ms = self.begin(ns, shard)?;
            if let Take::Ids { range, refill_due } = ns.holder.take(started_ms / 1000, 1) {
                ns.taken.fetch_add(1, Ordering::Relaxed);
                if refill_due && ns.refill_wanted(range.second) {
                    self.start_claim(ns, range.second);
                }
                ns.issued.fetch_add(1, Ordering::Relaxed);
                return Ok((Parts { second: range.second, shard, sequence: range.start }, ns.layout));
            }
        }
        let parts = self.next_ids(namespace, shard, 1).await?;
        let first = parts.first().copied().ok_or_else(|| Error::no_leader("no time-sequence ID was ready"))?;
        Ok((first, self.layout(namespace)?))
    }

    /// Hands out `count` IDs of `namespace` for `shard`, as parts the caller formats.
    pub async fn next_ids(self: &Arc<Self>, namespace: &str, shard: u64, count: u64) -> Result<Vec<Parts>, Error> {
        if count == 0 || count > MAX_COUNT {
            return Err(Error::invalid(format!("count must be between 1 and {MAX_COUNT}, got {count}")));
        }
        let ns = match self.holders.get(namespace) {
            Some(ns) => ns,
            None => self.create_holder(namespace)?,
        };
        self.await_first_clock_check().await;
        let started_ms = self.begin(&ns, shard)?;
        let deadline = tokio::time::Instant::now() + MAX_WAIT;
        let mut ids = Vec::with_capacity(count as usize);
        let mut waited = false;
        let mut now = Some(started_ms);
        while (ids.len() as u64) < count {
            let now_s = now.take().unwrap_or_else(now_ms) / 1000;
            match ns.holder.take(now_s, count - ids.len() as u64) {
                Take::Ids { range, refill_due } => {
                    ns.taken.fetch_add(range.len(), Ordering::Relaxed);
                    if refill_due && ns.refill_wanted(range.second) {
                        self.start_claim(&ns, range.second);
                    }
                    ids.extend((range.start..range.end).map(|sequence| Parts {
                        second: range.second,
                        shard,
                        sequence,
                    }));
                    continue;
                }
                Take::Empty => {}
            }
            let notified = ns.claimed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            // Short of IDs of this second: claim more of it even when the next second's range
            // is already held (the prefetch), and wait for the next second only once this one
            // is used up cluster-wide (`docs/semantics.md#time-sequence-ids`).
            let wait_until = match ns.holder.advance(now_s) {
                Advance::Ready => continue,
                Advance::Closed => return Err(Error::not_ready("this node is shutting down")),
                Advance::Empty { second } => match self.failure_for(&ns, second) {
                    Some(error) if error.code == ErrorCode::SecondExhausted => Some(second + 1),
                    Some(error) => return Err(error),
                    None => {
                        ns.wanted.fetch_add(count - ids.len() as u64, Ordering::Relaxed);
                        // No window held yet (a first use, or after a restart): claim one from now.
                        if !self.start_first_window(&ns, second) {
                            self.start_claim(&ns, second);
                        }
                        None
                    }
                },
            };
            if !std::mem::replace(&mut waited, true) {
                self.counters.waits.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(namespace = %ns.name, now_ms = now_ms(), now_s, ?wait_until, state = ?ns.holder.state(), "time-sequence request waits");
            }
            let woke = match wait_until {
                Some(second) => {
                    let wait = Duration::from_millis((second * 1000).saturating_sub(now_ms()));
                    tokio::time::timeout_at(deadline, tokio::time::sleep(wait)).await.is_ok()
                }
                None => tokio::time::timeout_at(deadline, notified).await.is_ok(),
            };
            if !woke {
                return Err(self.gave_up(&ns, now_s));
            }
        }
        ns.issued.fetch_add(count, Ordering::Relaxed);
        Ok(ids)
    }

    /// In a node's first moments, before its clock was first compared with its peers': waits
    /// (at most [`MAX_WAIT`], as a request waits for a range) for that check and copies its
    /// verdict, instead of refusing a request the next moment would serve. Afterwards one load.
    async fn await_first_clock_check(&self) {
        let unchecked = |refused: Option<&Error>| refused.is_some_and(|e| e.code == ErrorCode::ClockUnchecked);
        if !unchecked(self.clock_refused.load().as_deref()) {
            return;
        }
        let _ = tokio::time::timeout(MAX_WAIT, self.clock.first_checked()).await;
        let verdict = self.clock.refusal();
        if !unchecked(verdict.as_ref()) {
            self.clock_refused.store(verdict.map(Arc::new));
        }
    }

    /// What every request does before it takes IDs: checks its shard and this node's clock, and
    /// marks the namespace in use. Answers the time the request started, in Unix ms.
    fn begin(&self, ns: &NamespaceHolder, shard: u64) -> Result<u64, Error> {
        ns.layout.check_shard(shard).map_err(|e| Error::invalid(e.to_string()))?;
        if let Some(refused) = self.clock_refused.load().as_deref() {
            self.counters.refused_clocks.fetch_add(1, Ordering::Relaxed);
            return Err(refused.clone());
        }
        let started_ms = now_ms();
        // Written once a second at most: a store on every request would move the cache line
        // between the cores for a value only the idle check (seconds) reads.
        if started_ms / 1000 != ns.last_used_ms.load(Ordering::Relaxed) / 1000 {
            ns.last_used_ms.store(started_ms, Ordering::Relaxed);
        }
        Ok(started_ms)
    }

    /// The error a request answers when its wait ran out.
    fn gave_up(&self, ns: &NamespaceHolder, now_s: u64) -> Error {
        if let Some(error) = self.failure_for(ns, now_s) {
            return error;
        }
        Error::no_leader(format!(
            "namespace '{}': no range is held for this second and no claim committed within {} ms",
            ns.name,
            MAX_WAIT.as_millis()
        ))
    }

    /// The refusal of the last failed claim for `second` or later, if any.
    fn failure_for(&self, ns: &NamespaceHolder, second: u64) -> Option<Error> {
        let failure = ns.last_failure.lock().unwrap_or_else(|p| p.into_inner());
        failure.as_ref().filter(|(failed, _)| *failed >= second).map(|(_, error)| error.clone())
    }

    fn create_holder(&self, name: &str) -> Result<Arc<NamespaceHolder>, Error> {
        leafraft_state::tag::validate_tag(name).map_err(Error::invalid)?;
        self.cluster.ensure_serving()?;
        let layout = self.layout(name)?;
        let _insert = self.insert.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(ns) = self.holders.get(name) {
            return Ok(ns);
        }
        let ns = Arc::new(NamespaceHolder::new(name, layout));
        self.holders.insert(name, ns.clone());
        Ok(ns)
    }

    /// This node's view of each namespace it served.
    pub fn states(&self) -> HashMap<String, NamespaceState> {
        self.holders
            .entries()
            .into_iter()
            .map(|(name, ns)| {
                let state = ns.holder.state();
                let view = NamespaceState {
                    current: state.current,
                    pending: state.pending,
                    ids_issued: ns.issued.load(Ordering::Relaxed),
                    last_second_ids: ns.last_second_ids.load(Ordering::Relaxed),
                };
                (name, view)
            })
            .collect()
    }

    /// The counters for `/metrics`, by kind.
    pub fn event_counts(&self) -> Vec<(&'static str, u64)> {
        let c = &self.counters;
        vec![
            ("claims", c.claims.load(Ordering::Relaxed)),
            ("window_claims", c.window_claims.load(Ordering::Relaxed)),
            ("shared_window_claims", c.shared_window_claims.load(Ordering::Relaxed)),
            ("shared_blocks_installed", c.shared_blocks_installed.load(Ordering::Relaxed)),
            ("shared_blocks_fenced", c.shared_blocks_fenced.load(Ordering::Relaxed)),
            ("waits", c.waits.load(Ordering::Relaxed)),
            ("exhausted_seconds", c.exhausted_seconds.load(Ordering::Relaxed)),
            ("refused_clocks", c.refused_clocks.load(Ordering::Relaxed)),
        ]
    }

    /// Stops serving: what is held becomes a gap (sequences of a second are never given back).
    pub fn close_all(&self) {
        for ns in self.holders.values() {
            ns.holder.close();
        }
    }
}
