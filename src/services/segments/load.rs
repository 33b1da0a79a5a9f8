//! Claiming a tag's next segment: the one background load per tag, through the node's claim
//! batcher, and the answer's way into the double buffer (the one seam planted bugs use).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::LastClaim;
use super::Segments;
use super::TagBuffer;
use crate::clock::now_ms;
use leafraft_ids::IdRange;

impl Segments {
    /// Starts the one background claim of this tag, unless one runs or a next segment waits.
    pub(super) fn start_load(self: &Arc<Self>, buffer: &Arc<TagBuffer>) {
        if !buffer.buffer.try_begin_load() {
            return;
        }
        let segments = Arc::clone(self);
        let buffer = Arc::clone(buffer);
        tokio::spawn(async move {
            if !segments.load(&buffer).await {
                buffer.failed_loads.fetch_add(1, Ordering::Relaxed);
            }
            buffer.loaded.notify_waiters();
        });
    }

    /// Claims the next segment; `false` when none was installed.
    pub(super) async fn load(&self, buffer: &TagBuffer) -> bool {
        let tag_step = self.cluster.read(|sm| sm.tags.get(&buffer.tag).map(|record| record.step));
        let Some(tag_step) = tag_step else {
            buffer.buffer.load_failed();
            return false;
        };
        let previous = *buffer.last_claim.lock().unwrap_or_else(|p| p.into_inner());
        let step = self.config.step_policy.next_step(tag_step, previous.map(|last| (last.step, last.at.elapsed())));
        #[cfg(feature = "planted")]
        if let Some(range) = crate::planted::segment_without_claim(
            || self.is_follower(),
            || self.cluster.read(|sm| sm.tags.get(&buffer.tag).map(|record| record.max_id)),
            step,
        ) {
            buffer.buffer.install_next(range);
            return true;
        }
        let started = Instant::now();
        let res = self.claims.claim(leafraft_state::Claim::Segment { tag: buffer.tag.clone(), step }).await;
        self.metrics.observe_claim(&buffer.tag, started.elapsed(), res.is_ok());
        match res {
            Ok(leafraft_state::Response::Segment { start, end }) => {
                *buffer.last_claim.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some(LastClaim { step, at: Instant::now(), at_ms: now_ms() });
                buffer.claims.fetch_add(1, Ordering::Relaxed);
                tracing::info!(new_max_id = end, tag = %buffer.tag, start, step, "segment claim committed");
                let range = IdRange { start, end };
                #[cfg(feature = "planted")]
                let range = crate::planted::segment_to_install(|| self.is_follower(), &buffer.tag, range);
                if !buffer.buffer.install_next(range) {
                    tracing::info!(tag = %buffer.tag, start, end, "claim arrived after close; its range stays unused");
                }
                return true;
            }
            Ok(leafraft_state::Response::Rejected(leafraft_state::Rejection::TagExhausted)) => {
                buffer.exhausted.store(true, Ordering::Relaxed);
                buffer.buffer.load_failed();
            }
            Ok(other) => {
                tracing::warn!(tag = %buffer.tag, answer = ?other, "unexpected answer to a claim");
                buffer.buffer.load_failed();
            }
            Err(e) => {
                tracing::warn!(tag = %buffer.tag, error = %e, "segment claim failed");
                buffer.buffer.load_failed();
            }
        }
        false
    }

    /// Whether this node is not the leader (asked only by planted bugs).
    #[cfg(feature = "planted")]
    pub(super) fn is_follower(&self) -> bool {
        self.cluster.metrics().current_leader != Some(self.cluster.node_id())
    }
}
