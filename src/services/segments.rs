//! `Segments`: Leaf-segment on this node. One `SegmentBuffer` per tag, refilled in the
//! background by Raft-committed claims, served without locks or I/O while a segment is ready.
//!
//! With `snowflakes` and `timeseq`, one of the three ID services: the only modules that put a
//! Raft-committed answer into an engine (`xtask`: `engine_installers`).
//!
//! Invariants:
//! 1. A range is installed in a buffer only from the `Response::Segment` of a committed and
//!    applied `ClaimSegment` (the leader answers after applying it).
//! 2. At most one claim per tag is in flight from this node (`SegmentBuffer::try_begin_load`).
//! 3. A tail is given back only after its buffer is closed (`SegmentBuffer::close` answers it,
//!    atomically with respect to takes), on shutdown or when the buffer went idle; each tail is
//!    proposed once (`Cluster::write` never resends a `ReleaseSegment`); see `give_back.rs`.
//! 4. A tag has at most one open buffer on this node: an idle one is taken out of the map and
//!    closed under the lock that creates buffers, before a fresh one can be created.

use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;
use std::time::Instant;

use leafraft_state::TagMode;
use tokio::sync::Notify;

use crate::cluster::Cluster;
use crate::error::Error;
use crate::error::ErrorCode;
use crate::metrics::Metrics;
use crate::services::claims::ClaimBatcher;
use crate::services::monotonic::Monotonic;
use leafraft_ids::scramble::IdScrambler;
use leafraft_ids::segment::Switch;
use leafraft_ids::IdRange;
use leafraft_ids::SegmentBuffer;
use leafraft_ids::StepPolicy;
use leafraft_ids::Take;

/// The largest `count` one request may ask for.
pub const MAX_COUNT: u64 = 10_000;

mod give_back;
mod load;
pub mod scramble;
mod view;

use self::give_back::Dropped;
use self::give_back::IdleMark;
pub use self::view::BufferState;
use self::view::RateSample;
use crate::services::sharded_map::ShardedMap;

/// How many times one request moves on to the tag's next buffer after the one it used was
/// dropped for idleness under it (once in practice: a buffer is dropped only after minutes idle).
const MAX_BUFFER_CHANGES: usize = 3;

/// How long a request waits for a buffer's first segment (or `SegmentConfig::wait` if longer).
/// That claim is not an exhaustion, which `docs/semantics.md#double-buffer-and-dynamic-step` bounds by `--segment-wait-ms`, but Leaf's
/// synchronous initial load; a busy cluster can take longer than 100 ms to commit it, and a new
/// tag's first ID then failed although nothing was wrong (first IDs of 100,000 tags).
const FIRST_SEGMENT_WAIT: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy)]
pub struct SegmentConfig {
    /// How long a request waits for the next segment when both buffers are used up.
    pub wait: Duration,
    pub step_policy: StepPolicy,
    /// Load a segment for every tag at start instead of on first request.
    pub preload: bool,
    /// A tag's buffers that served nothing for this long are dropped and their never-served tail
    /// given back; `None`: never.
    pub idle: Option<Duration>,
}

/// One tag's buffers on this node, and what the service keeps beside them.
struct TagBuffer {
    tag: String,
    buffer: SegmentBuffer,
    /// Woken when a load ends, successfully or not.
    loaded: Notify,
    /// The last committed claim, for the dynamic step and the buffer view.
    last_claim: Mutex<Option<LastClaim>>,
    exhausted: AtomicBool,
    issued: AtomicU64,
    claims: AtomicU64,
    /// Requests that found both segments used up and had to wait for a claim.
    waits: AtomicU64,
    /// Loads that ended without a segment: a waiting request gives up after the second instead of
    /// starting claim after claim (each failing at once when the cluster refuses it) until its
    /// deadline.
    failed_loads: AtomicU64,
    /// The last IDs/s sample.
    rate: Mutex<RateSample>,
    /// What the idle sweep saw last (`give_back.rs`).
    idle: Mutex<IdleMark>,
    /// Where this buffer's counters go once it is dropped, so totals over all tags stay true.
    dropped: Arc<Dropped>,
    /// The permutation a scrambled tag's IDs are served through (fixed at the tag's creation).
    scrambler: Option<Arc<IdScrambler>>,
}

impl Drop for TagBuffer {
    /// Runs once nothing holds the buffer any more: no map, no request, no load. Its counts
    /// cannot change after that, so the totals take them exactly.
    fn drop(&mut self) {
        self.dropped.ids_issued.fetch_add(*self.issued.get_mut(), Ordering::Relaxed);
        self.dropped.waits.fetch_add(*self.waits.get_mut(), Ordering::Relaxed);
    }
}

/// What a request still needs and what it has taken so far.
struct Wanted {
    needed: u64,
    ranges: Vec<IdRange>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Taken {
    All,
    /// The buffer was closed before the request had all it needs.
    Closed,
    /// The tag moved to monotonic while the request waited for a segment: what it took so far
    /// is a gap, and the request is served as a monotonic take.
    Moved,
}

#[derive(Debug, Clone, Copy)]
struct LastClaim {
    step: u64,
    /// When it committed, on the monotonic clock (how long the segment lasted, for the step).
    at: Instant,
    /// When it committed, on the wall clock (for people).
    at_ms: u64,
}

pub struct Segments {
    cluster: Arc<Cluster>,
    /// Serves the tags whose mode is monotonic.
    monotonic: Arc<Monotonic>,
    /// Claims go through the node's batcher: refills that fall due together share an entry.
    claims: Arc<ClaimBatcher>,
    config: SegmentConfig,
    metrics: Arc<Metrics>,
    /// Readers never lock; a new tag copies one shard (see `map`).
    buffers: ShardedMap<TagBuffer>,
    /// Held to add a buffer to the map or take one out (then closed before it is let go).
    insert: Mutex<()>,
    /// Set once the node stops: a closed buffer then means "no more IDs", not "take the next".
    stopping: AtomicBool,
    /// Counters of the buffers dropped since start, and of the idle drops themselves.
    dropped: Arc<Dropped>,
}

impl Segments {
    pub fn new(
        cluster: Arc<Cluster>,
        monotonic: Arc<Monotonic>,
        claims: Arc<ClaimBatcher>,
        config: SegmentConfig,
        metrics: Arc<Metrics>,
    ) -> Segments {
        Segments {
            cluster,
            monotonic,
            claims,
            config,
            metrics,
            buffers: ShardedMap::default(),
            insert: Mutex::new(()),
            stopping: AtomicBool::new(false),
            dropped: Arc::default(),
        }
    }

    /// Hands out `count` IDs of `tag` as increasing half-open ranges: from this node's buffers,
    /// or, for a monotonic tag, from the leader (the moment this replica has applied the tag's
    /// move to monotonic, its buffers of the tag serve nothing more).
    pub async fn next_ids(self: &Arc<Self>, tag: &str, count: u64) -> Result<Vec<IdRange>, Error> {
        if count == 0 || count > MAX_COUNT {
            return Err(Error::invalid(format!("count must be between 1 and {MAX_COUNT}, got {count}")));
        }
        self.cluster.refuse_if_removed()?;
        if self.cluster.tag_mode(tag) == Some(TagMode::Monotonic) {
            return self.monotonic.take(tag, count).await;
        }
        self.next_buffered_ids(tag, count).await
    }

    /// The next ID of a segment tag when its buffer on this node has one ready: what
    /// [`Segments::next_id`] answers without waiting, and `None` when it would have to wait (or
    /// the tag is not a segment tag here). Like `next_id`, and unlike the ranges of `next_ids`,
    /// the ID as the client receives it: a scrambled tag's image of its sequence number. Not async, so that a handler's future stays small
    /// when the ID is ready (the boxed handler future was copied whole per request).
    pub fn ready_id(self: &Arc<Self>, tag: &str) -> Result<Option<u64>, Error> {
        self.cluster.refuse_if_removed()?;
        if self.cluster.tag_mode(tag) == Some(TagMode::Segment) {
            if let Some(buffer) = self.buffers.load(tag).get(tag) {
                if let Take::Ids { range, load_due } = buffer.buffer.take(1) {
                    if load_due {
                        self.start_load(buffer);
                    }
                    buffer.issued.fetch_add(1, Ordering::Relaxed);
                    return scramble::served(buffer.scrambler.as_deref(), range.start).map(Some);
                }
            }
        }
        Ok(None)
    }

    /// One ID of `tag` (Leaf's path): from a ready buffer without building a list, else as
    /// [`Segments::next_ids`] with a count of one.
    pub async fn next_id(self: &Arc<Self>, tag: &str) -> Result<u64, Error> {
        if let Some(id) = self.ready_id(tag)? {
            return Ok(id);
        }
        let ranges = self.next_ids(tag, 1).await?;
        let id = ranges
            .first()
            .map(|range| range.start)
            .ok_or_else(|| Error::new(ErrorCode::SegmentsNotReady, format!("no ID of tag '{tag}' was ready")))?;
        scramble::served(self.scrambler(tag)?.as_deref(), id)
    }

    /// [`Segments::next_ids`] for clients that cache ranges; a monotonic tag has none to give
    /// (`MODE_MISMATCH`): IDs kept by a client would not stay in real-time order.
    pub async fn next_ranges(self: &Arc<Self>, tag: &str, count: u64) -> Result<Vec<IdRange>, Error> {
        if self.cluster.tag_mode(tag) == Some(TagMode::Monotonic) {
            return Err(Error::new(
                ErrorCode::ModeMismatch,
                format!(
                    "tag '{tag}' is monotonic: its IDs are served one request at a time by the leader, not as ranges"
                ),
            ));
        }
        self.next_ids(tag, count).await
    }

    /// Takes `count` IDs from this node's buffer of `tag`, created on first use. A request whose
    /// buffer was dropped for idleness under it goes on with the tag's next buffer: the drop closed
    /// the old one first, so what the request took before lies below its given-back tail, and the
    /// next buffer serves only later claims.
    async fn next_buffered_ids(self: &Arc<Self>, tag: &str, count: u64) -> Result<Vec<IdRange>, Error> {
        let mut wanted = Wanted { needed: count, ranges: Vec::new() };
        for _ in 0..MAX_BUFFER_CHANGES {
            let existing = self.buffers.get(tag);
            let buffer = match existing {
                Some(buffer) => buffer,
                None => self.create_buffer(tag)?,
            };
            match self.take_from(&buffer, tag, &mut wanted).await? {
                Taken::All => {
                    buffer.issued.fetch_add(count, Ordering::Relaxed);
                    return Ok(wanted.ranges);
                }
                Taken::Moved => return self.monotonic.take(tag, count).await,
                Taken::Closed => {}
            }
            if self.stopping.load(Ordering::Relaxed) {
                return Err(Error::new(ErrorCode::SegmentsNotReady, "this node is shutting down"));
            }
        }
        Err(Error::new(ErrorCode::SegmentsNotReady, format!("the buffers of tag '{tag}' were dropped while in use")))
    }

    /// Fills `wanted` from `buffer`, waiting (boundedly) for its next segment when both are used
    /// up; `Taken::Closed` when the buffer was closed (dropped or shutting down).
    async fn take_from(
        self: &Arc<Self>,
        buffer: &Arc<TagBuffer>,
        tag: &str,
        wanted: &mut Wanted,
    ) -> Result<Taken, Error> {
        let mut deadline = None;
        let mut failed_before_waiting = None;
        loop {
            match buffer.buffer.take(wanted.needed) {
                Take::Ids { range, load_due } => {
                    if load_due {
                        self.start_load(buffer);
                    }
                    wanted.needed -= range.len();
                    wanted.ranges.push(range);
                    if wanted.needed == 0 {
                        return Ok(Taken::All);
                    }
                }
                Take::UsedUp => {
                    let notified = buffer.loaded.notified();
                    tokio::pin!(notified);
                    notified.as_mut().enable();
                    match buffer.buffer.switch() {
                        Switch::Switched => continue,
                        Switch::Closed => return Ok(Taken::Closed),
                        Switch::NotReady { .. } => {}
                    }
                    if buffer.exhausted.load(Ordering::Relaxed) {
                        return Err(Error::new(
                            ErrorCode::TagExhausted,
                            format!("tag '{tag}' has handed out its last ID"),
                        ));
                    }
                    // One failed claim may be a leader change; a second one while this request
                    // waits means claims fail as soon as they are made.
                    let failed_loads = buffer.failed_loads.load(Ordering::Relaxed);
                    if failed_loads - *failed_before_waiting.get_or_insert(failed_loads) >= 2 {
                        return Err(Error::new(
                            ErrorCode::SegmentsNotReady,
                            format!("both segments of tag '{tag}' are used up and the claim of the next one failed"),
                        ));
                    }
                    self.start_load(buffer);
                    let deadline = *deadline.get_or_insert_with(|| {
                        buffer.waits.fetch_add(1, Ordering::Relaxed);
                        let first_segment = buffer.claims.load(Ordering::Relaxed) == 0;
                        let wait =
                            if first_segment { self.config.wait.max(FIRST_SEGMENT_WAIT) } else { self.config.wait };
                        tokio::time::Instant::now() + wait
                    });
                    if tokio::time::timeout_at(deadline, notified).await.is_err() {
                        return Err(Error::new(
                            ErrorCode::SegmentsNotReady,
                            format!("both segments of tag '{tag}' are used up and the next claim has not committed"),
                        ));
                    }
                    // The tag's mode is read once before the first take; a request that waited may
                    // have outlived a move to monotonic (and the answer to it), so it looks again.
                    if self.cluster.tag_mode(tag) == Some(TagMode::Monotonic) {
                        return Ok(Taken::Moved);
                    }
                }
            }
        }
    }

    fn create_buffer(&self, tag: &str) -> Result<Arc<TagBuffer>, Error> {
        leafraft_state::tag::validate_tag(tag).map_err(Error::invalid)?;
        self.cluster.ensure_serving()?;
        // The key enters the state in the entry that creates the tag: a tag this replica holds
        // has its key here too, if it has one.
        let Some(key) = self.cluster.read(|sm| sm.tags.contains_key(tag).then(|| sm.scramble_keys.get(tag).copied()))
        else {
            return Err(Error::tag_not_found(tag));
        };
        let scrambler = key.map(|key| scramble::tag_scrambler(tag, key)).transpose()?;
        let _insert = self.insert.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if self.stopping.load(Ordering::SeqCst) {
            return Err(Error::new(ErrorCode::SegmentsNotReady, "this node is shutting down"));
        }
        if let Some(buffer) = self.buffers.get(tag) {
            return Ok(buffer);
        }
        let buffer = Arc::new(TagBuffer {
            tag: tag.to_string(),
            buffer: SegmentBuffer::new(),
            loaded: Notify::new(),
            last_claim: Mutex::new(None),
            exhausted: AtomicBool::new(false),
            issued: AtomicU64::new(0),
            claims: AtomicU64::new(0),
            waits: AtomicU64::new(0),
            failed_loads: AtomicU64::new(0),
            rate: Mutex::new(RateSample { issued: 0, at: Instant::now(), ids_per_sec: 0.0 }),
            idle: Mutex::new(IdleMark::new(tokio::time::Instant::now())),
            dropped: self.dropped.clone(),
            scrambler,
        });
        self.buffers.insert(tag, buffer.clone());
        Ok(buffer)
    }

    /// The service of the monotonic tags, to which this one hands their takes.
    pub fn monotonic(&self) -> &Arc<Monotonic> {
        &self.monotonic
    }

    /// The node's claim batcher (its counts are on `/metrics`).
    pub fn claim_batcher(&self) -> &ClaimBatcher {
        &self.claims
    }

    /// Creates buffers for every tag and starts their first loads (`--preload`).
    pub fn preload(self: &Arc<Self>) {
        let tags: Vec<String> = self.cluster.read(|sm| sm.tags.keys().cloned().collect());
        for tag in tags {
            if let Ok(buffer) = self.create_buffer(&tag) {
                self.start_load(&buffer);
            }
        }
    }
}
