//! The sweep: one task that advances the connections' coarse clock every tick and closes those
//! past the header-read or the idle timeout (see the module above for why no timer per request).

use std::sync::atomic::Ordering;
use std::sync::PoisonError;
use std::sync::Weak;
use std::time::Duration;

use super::Shared;
use super::HEADER_READ;
use super::IDLE;

impl Shared {
    /// Advances the coarse clock and closes the connections that waited for a request's
    /// headers for the header-read timeout or were idle for the idle timeout.
    fn sweep(&self) {
        self.sweep_at(u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX));
    }

    /// [`Shared::sweep`] with the clock at `now` (milliseconds since `epoch`).
    pub(super) fn sweep_at(&self, now: u64) {
        self.now_ms.store(now, Ordering::Relaxed);
        self.log.flush();
        // Times are noted on the coarse clock, up to one tick before what they mark: waiting one
        // tick more never closes a connection before its timeout.
        let limit = |timeout: Duration| u64::try_from((timeout + self.sweep).as_millis()).unwrap_or(u64::MAX);
        let idle_limit = limit(self.idle_timeout);
        let header_limit = self.header_read_timeout.map_or(u64::MAX, limit);
        let table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        let (mut header_read, mut idle) = (0, 0);
        for slot in table.open.values() {
            // `requests` first (acquire): a zero seen here comes with the time its answer ended.
            let waiting = slot.requests.load(Ordering::Acquire) == 0
                && now.saturating_sub(slot.waiting_since.load(Ordering::Relaxed)) >= header_limit;
            if waiting && slot.close(HEADER_READ) {
                header_read += 1;
            } else if now.saturating_sub(slot.last_activity.load(Ordering::Relaxed)) >= idle_limit && slot.close(IDLE) {
                idle += 1;
            }
        }
        drop(table);
        for _ in 0..header_read {
            self.metrics.connections.count_timeout("header_read");
        }
        for _ in 0..idle {
            self.metrics.connections.count_timeout("idle");
        }
    }
}

/// Sweeps every tick until the admission and its connections are gone.
pub(super) async fn sweep_until_gone(shared: Weak<Shared>) {
    let Some(tick) = shared.upgrade().map(|shared| shared.sweep) else { return };
    let mut ticks = tokio::time::interval(tick);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        match shared.upgrade() {
            Some(shared) => shared.sweep(),
            None => return,
        }
    }
}
