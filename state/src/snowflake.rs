//! The snowflake worker registry: the layout in use and the worker leases, replicated like the
//! tags (the role ZooKeeper's `leaf_forever` nodes play in Leaf).
//!
//! Invariants (tested in `snowflake/tests.rs`):
//! 1. A lease changes holder only through `acquire` or `release`, and every change bumps its
//!    epoch, so an `extend` proposed under an older epoch never applies.
//! 2. A new holding starts above the worker's previous `window_end_ms` (`floor_ms`), and
//!    `window_end_ms` only goes down on a release by the current holder, never below what that
//!    holding may have used. Together: no two holdings' timestamp ranges overlap, whatever the
//!    clocks say.
//! 3. Everything time-like (`now_ms`, the lease and window lengths) comes in the command.
//! 4. No holding starts below the registry's `floor_ms`, which only a restore sets: a recovered
//!    cluster's holdings, of every worker ID, start above any window the old cluster committed.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::Serialize;

use crate::request::Rejection;
use crate::request::Response;
use crate::NodeId;
use leafraft_ids::snowflake::Layout as SnowflakeLayout;

/// The longest window an extension may ask for beyond the proposer's clock: a bound on how many
/// time bits one bad request can burn.
pub const MAX_WINDOW_MS: u64 = 10 * 60 * 1000;

/// One worker ID's lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerLease {
    /// `None` after a release: free for anyone.
    pub holder: Option<NodeId>,
    /// Bumped on every acquire and release.
    pub epoch: u64,
    /// Unix ms: the holder issues no ID with a later timestamp.
    pub window_end_ms: u64,
    /// Unix ms: the holder issues no ID with an earlier timestamp (above the previous holding).
    pub floor_ms: u64,
    /// The holder's clock at its last acquire or extend, for lease expiry.
    pub last_extend_ms: u64,
    /// Who released it last, so that node gets its own worker back after a clean restart.
    pub released_by: Option<NodeId>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnowflakeRegistry {
    /// Recorded by the first node that asks; never changes afterwards.
    #[serde(with = "crate::records::optional_snowflake_layout")]
    pub layout: Option<SnowflakeLayout>,
    pub workers: BTreeMap<u32, WorkerLease>,
    /// Unix ms: no holding of any worker, used before or not, starts below this. 0 except in a
    /// cluster built by `leafraft recover`, whose old windows are not all known (`Request::Restore`).
    pub floor_ms: u64,
}

impl SnowflakeRegistry {
    pub fn set_layout(&mut self, layout: SnowflakeLayout) -> Response {
        if let Err(msg) = layout.validate() {
            return Response::Rejected(Rejection::InvalidArgument(msg));
        }
        let recorded = *self.layout.get_or_insert(layout);
        Response::SnowflakeLayout(recorded)
    }

    /// Gives `node` a worker: the one it holds, else the one it released, else a never-used one,
    /// else a released one, else one whose holder has not extended for `lease_ms` (by `now_ms`).
    pub fn acquire(&mut self, node: NodeId, now_ms: u64, lease_ms: u64, window_ms: u64) -> Response {
        let Some(layout) = self.layout else {
            return Response::Rejected(Rejection::LayoutMissing);
        };
        if window_ms == 0 || window_ms > MAX_WINDOW_MS {
            return Response::Rejected(Rejection::InvalidArgument(format!(
                "window must be 1 to {MAX_WINDOW_MS} ms, got {window_ms}"
            )));
        }
        let n_workers = layout.n_workers();
        let own = self.workers.iter().find(|(_, lease)| lease.holder == Some(node)).map(|(id, _)| *id);
        let released_by_node = || {
            self.workers
                .iter()
                .find(|(_, lease)| lease.holder.is_none() && lease.released_by == Some(node))
                .map(|(id, _)| *id)
        };
        let never_used =
            || (0..n_workers).filter_map(|id| u32::try_from(id).ok()).find(|id| !self.workers.contains_key(id));
        let released = || self.workers.iter().find(|(_, lease)| lease.holder.is_none()).map(|(id, _)| *id);
        let expired = || {
            self.workers
                .iter()
                .find(|(_, lease)| now_ms.saturating_sub(lease.last_extend_ms) >= lease_ms)
                .map(|(id, _)| *id)
        };
        let Some(worker) = own.or_else(released_by_node).or_else(never_used).or_else(released).or_else(expired) else {
            return Response::Rejected(Rejection::NoWorkerAvailable);
        };
        let previous = self.workers.get(&worker);
        let floor_ms = previous.map_or(0, |lease| lease.window_end_ms.saturating_add(1)).max(self.floor_ms);
        let epoch = previous.map_or(1, |lease| lease.epoch + 1);
        let window_end_ms = now_ms.max(floor_ms).saturating_add(window_ms);
        let lease = WorkerLease {
            holder: Some(node),
            epoch,
            window_end_ms,
            floor_ms,
            last_extend_ms: now_ms,
            released_by: None,
        };
        self.workers.insert(worker, lease);
        Response::WorkerAcquired { worker, epoch, floor_ms, window_end_ms }
    }

    /// Moves the window of `worker` forward to `window_end_ms`, only while `epoch` holds.
    pub fn extend(&mut self, worker: u32, epoch: u64, window_end_ms: u64, now_ms: u64) -> Response {
        if window_end_ms > now_ms.saturating_add(MAX_WINDOW_MS) {
            return Response::Rejected(Rejection::InvalidArgument(format!(
                "a window may reach at most {MAX_WINDOW_MS} ms past the proposer's clock"
            )));
        }
        match self.workers.get_mut(&worker) {
            Some(lease) if lease.holder.is_some() && lease.epoch == epoch => {
                lease.window_end_ms = lease.window_end_ms.max(window_end_ms);
                lease.last_extend_ms = lease.last_extend_ms.max(now_ms);
                Response::WorkerExtended { window_end_ms: lease.window_end_ms }
            }
            _ => Response::Rejected(Rejection::LeaseLost),
        }
    }

    /// Frees `worker` if `epoch` holds. `used_until_ms` (a holder stopping cleanly) lowers the
    /// window to what it used, so the next holding starts right after it.
    pub fn release(&mut self, worker: u32, epoch: u64, used_until_ms: Option<u64>) -> Response {
        match self.workers.get_mut(&worker) {
            Some(lease) if lease.holder.is_some() && lease.epoch == epoch => {
                lease.released_by = lease.holder.take();
                lease.epoch += 1;
                if let Some(used) = used_until_ms {
                    let lowest = lease.floor_ms.saturating_sub(1);
                    lease.window_end_ms = used.max(lowest).min(lease.window_end_ms);
                }
                Response::WorkerReleased { applied: true }
            }
            _ => Response::WorkerReleased { applied: false },
        }
    }
}

#[cfg(test)]
mod tests;
