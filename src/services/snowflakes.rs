//! `Snowflakes`: Leaf-snowflake on this node, with the worker ID leased from the Raft state
//! machine instead of ZooKeeper, and a committed time window instead of a local clock file.
//!
//! A background task (`maintain`) agrees on the layout, checks this node's clock against its
//! peers', acquires a worker and extends its window ahead of need, so the hot path (`next_ids`)
//! never waits on Raft. Uniqueness rests on the registry (see `leafraft_state::snowflake`), not on clocks:
//! this node issues only timestamps its committed window covers.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::MutexGuard;
use std::time::Duration;
use std::time::Instant;

use serde::Deserialize;
use serde::Serialize;

mod lease;

use crate::clock::millis;
use crate::clock::now_ms;
use crate::clock::verdict::ClockCheck;
use crate::clock::verdict::ClockVerdict;
use crate::cluster::Cluster;
use crate::error::Error;
use crate::error::ErrorCode;
use leafraft_ids::snowflake::Generator;
use leafraft_ids::snowflake::GeneratorRefusal;
use leafraft_ids::snowflake::Layout;
use leafraft_ids::snowflake::Layout as SnowflakeLayout;

/// The largest `count` one request may ask for.
pub const MAX_COUNT: u64 = 10_000;

#[derive(Debug, Clone, Copy)]
pub struct SnowflakeConfig {
    pub layout: SnowflakeLayout,
    /// How far ahead of the clock the committed window reaches.
    pub window: Duration,
    /// A holder that has not extended for this long loses its worker to whoever asks.
    pub lease: Duration,
    pub max_backward: Duration,
    pub max_skew: Duration,
    pub random_sequence: bool,
}

/// This node's snowflake state, for `/v1/workers`, `/readyz` and the status page.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SnowflakeStatus {
    pub worker_id: Option<u32>,
    pub epoch: Option<u64>,
    pub window_end_ms: Option<u64>,
    /// Why snowflake IDs are refused right now, if they are.
    pub refused: Option<String>,
    /// The (lower) median offset of the peers' clocks from this node's (peer minus local),
    /// RTT-compensated.
    pub clock_offset_ms: Option<i64>,
    pub peers_checked: usize,
    pub ids_issued: u64,
    /// Peer clock checks completed since start (each one's verdict applied).
    pub clock_checks: u64,
}

/// The held worker and the generator issuing from it.
struct Holding {
    worker: u32,
    epoch: u64,
    generator: Generator,
    /// On the monotonic clock: when another node could take the worker over, at the earliest, if
    /// no later extension commits. Issuing stops there whatever the wall clock says, because a wall
    /// clock stepped back makes the committed window look open long after the lease ran out.
    valid_until: Instant,
}

/// How long after asking for a lease (or an extension) its holder may issue from it, on its own
/// monotonic clock: others judge expiry by their wall clocks against the holder's `now_ms`, and two
/// clocks that passed the peer check differ by up to twice the allowed skew. Never shorter than the
/// window: with a lease under window + 2 × skew the window is the only bound (honest clocks still
/// end it before the lease), and the operator chose that.
fn lease_validity(lease: Duration, max_skew: Duration, window: Duration) -> Duration {
    lease.saturating_sub(max_skew.saturating_mul(2)).max(window)
}

#[derive(Default)]
struct State {
    holding: Option<Holding>,
    /// Set by the clock verdict or a layout mismatch: the hot path answers this error.
    refused: Option<Error>,
    layout_agreed: bool,
    stopped: bool,
}

impl State {
    /// The state of a node that has not compared its clock with its peers' yet: refused, so that
    /// a check nobody answers (`Keep`) does not let it acquire a worker with an unchecked clock.
    /// A single member is judged `Serve` by its first check, with no peer to ask.
    fn at_start() -> State {
        let unchecked = Error::new(
            ErrorCode::WorkerUnavailable,
            "this node's clock has not been confirmed by a majority of the members yet; no worker is acquired before",
        );
        State { refused: Some(unchecked), ..State::default() }
    }

    /// Applies the verdict of a clock check; answers whether a worker may be acquired or
    /// extended now.
    fn record_verdict(&mut self, verdict: ClockVerdict) -> bool {
        match verdict {
            ClockVerdict::Serve => self.refused = None,
            ClockVerdict::Refuse(error) => self.refused = Some(error),
            ClockVerdict::Keep => {}
        }
        !self.stopped && self.refused.is_none()
    }
}

pub struct Snowflakes {
    cluster: Arc<Cluster>,
    config: SnowflakeConfig,
    layout: Layout,
    state: Mutex<State>,
    issued: AtomicU64,
    /// The clock verdict, which this service's upkeep checks and time sequences share.
    clock: Arc<ClockCheck>,
}

impl Snowflakes {
    pub fn new(cluster: Arc<Cluster>, config: SnowflakeConfig, clock: Arc<ClockCheck>) -> Snowflakes {
        Snowflakes {
            cluster,
            layout: config.layout,
            config,
            state: Mutex::new(State::at_start()),
            issued: AtomicU64::new(0),
            clock,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update of `State` is a plain field store, so a poisoned lock is still consistent.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The layout IDs are decoded with: the one the cluster recorded, else this node's.
    pub fn decode_layout(&self) -> Layout {
        self.cluster.read(|sm| sm.snowflake.layout).unwrap_or(self.layout)
    }

    pub fn layout(&self) -> Layout {
        self.layout
    }

    // --- The hot path

    /// Hands out `count` IDs from this node's worker.
    pub async fn next_ids(&self, count: u64) -> Result<Vec<u64>, Error> {
        if count == 0 || count > MAX_COUNT {
            return Err(Error::invalid(format!("count must be between 1 and {MAX_COUNT}, got {count}")));
        }
        self.cluster.ensure_serving()?;
        let mut ids = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
        let mut waited = false;
        while (ids.len() as u64) < count {
            let refusal = {
                let mut state = self.lock();
                if let Some(error) = &state.refused {
                    return Err(error.clone());
                }
                let Some(holding) = state.holding.as_mut() else {
                    return Err(Error::new(ErrorCode::WorkerUnavailable, "this node holds no snowflake worker yet"));
                };
                if Instant::now() >= holding.valid_until {
                    return Err(Error::new(
                        ErrorCode::WorkerUnavailable,
                        "no extension of this node's worker lease has committed in time; it may have been taken over",
                    ));
                }
                let mut refusal = None;
                while (ids.len() as u64) < count {
                    match holding.generator.next(now_ms()) {
                        Ok(id) => ids.push(id),
                        Err(r) => {
                            refusal = Some(r);
                            break;
                        }
                    }
                }
                refusal
            };
            match refusal {
                None => break,
                Some(GeneratorRefusal::Wait { ms }) if !waited => {
                    // Leaf waits out a small step back once; the lock is not held while waiting.
                    waited = true;
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                }
                Some(GeneratorRefusal::Wait { ms }) => {
                    return Err(Error::new(
                        ErrorCode::ClockBackwards,
                        format!("the clock is still {ms} ms behind the last ID after waiting"),
                    )
                    .with_leaf_code(-1));
                }
                Some(GeneratorRefusal::ClockBackwards { behind_ms }) => {
                    return Err(Error::new(
                        ErrorCode::ClockBackwards,
                        format!(
                            "the clock moved back {behind_ms} ms, more than --max-clock-backward-ms {}",
                            millis(self.config.max_backward)
                        ),
                    ));
                }
                Some(GeneratorRefusal::WindowExhausted) => {
                    return Err(Error::new(
                        ErrorCode::WorkerUnavailable,
                        "the committed time window is used up and could not be extended (no quorum?)",
                    ));
                }
            }
        }
        self.issued.fetch_add(count, Ordering::Relaxed);
        Ok(ids)
    }

    pub fn status(&self) -> SnowflakeStatus {
        let clock = self.clock.status();
        let state = self.lock();
        SnowflakeStatus {
            worker_id: state.holding.as_ref().map(|h| h.worker),
            epoch: state.holding.as_ref().map(|h| h.epoch),
            window_end_ms: state.holding.as_ref().map(|h| h.generator.window_end_ms()),
            refused: state.refused.as_ref().map(|e| e.message.clone()),
            clock_offset_ms: clock.offset_ms,
            peers_checked: clock.peers_checked,
            ids_issued: self.issued.load(Ordering::Relaxed),
            clock_checks: clock.checks,
        }
    }

    /// Years the layout's time bits still cover from now.
    pub fn years_left(&self) -> f64 {
        let ms_left = self.layout.last_timestamp_ms().saturating_sub(now_ms());
        ms_left as f64 / (365.25 * 24.0 * 3600.0 * 1000.0)
    }
}

#[cfg(test)]
mod tests;
