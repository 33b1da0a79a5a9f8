//! Whether this node may serve: ready (it knows a leader, has applied at least what it had
//! applied before its last restart, and has caught up once through a linearizable read), or
//! serving from its buffers because it has been ready. Catching up is in `catch_up`.

use std::sync::atomic::Ordering;

use crate::cluster::Cluster;
use crate::error::Error;

impl Cluster {
    /// `Ok` when this node knows a leader and has applied at least what it had applied before
    /// its last restart (one linearizable read since start proves it); otherwise the reason.
    pub fn readiness(&self) -> Result<(), String> {
        if let Some(reason) = self.removed() {
            return Err(reason);
        }
        self.replica_readiness()?;
        if !self.has_caught_up() {
            return Err("catching up: waiting for one consistent read through the leader".into());
        }
        Ok(())
    }

    /// Readiness as this replica alone can judge it: a member that knows a leader and has applied
    /// what it found applied at open.
    pub(super) fn replica_readiness(&self) -> Result<(), String> {
        let metrics = self.raft.metrics().borrow().clone();
        if let Err(fatal) = &metrics.running_state {
            return Err(format!("raft stopped: {fatal}"));
        }
        if metrics.membership_config.membership().get_node(&self.node_id).is_none() {
            return Err("this node is not a member of a cluster yet".into());
        }
        if metrics.current_leader.is_none() {
            return Err("no leader known".into());
        }
        let applied = metrics.last_applied.map(|id| id.index);
        let needed = self.store.state_machine.applied_at_open().map(|id| id.index);
        if applied < needed {
            return Err(format!("replaying the log: applied {applied:?} of {needed:?}"));
        }
        Ok(())
    }

    pub fn ensure_ready(&self) -> Result<(), Error> {
        self.readiness().map_err(Error::not_ready)?;
        self.has_been_ready.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// For ID requests: ready now, or ready at some point since this process started. A node
    /// that lost its leader keeps serving from its buffers until they run out.
    pub fn ensure_serving(&self) -> Result<(), Error> {
        self.refuse_if_removed()?;
        if self.has_been_ready.load(Ordering::Relaxed) {
            return Ok(());
        }
        self.ensure_ready()
    }
}
