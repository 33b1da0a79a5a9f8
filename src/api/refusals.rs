//! [`RefusalLog`]: refused requests and TLS client certificates, logged at a bounded rate. The
//! first refusal of an interval is logged at once, with its details; the rest of that interval
//! are counted by route and reason and written as one summary line when the interval ends. An
//! unauthenticated client can thus add at most two lines per interval to the log, however fast
//! it sends; every refusal is still counted one by one on `/metrics` (`leafraft_auth_refusals`,
//! `leafraft_tls_handshake_failures`).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;
use std::time::Instant;

/// How long one interval lasts.
pub const INTERVAL: Duration = Duration::from_secs(10);

/// The refusals of the current interval (a lock taken only on a refusal, never on a request that
/// passes).
pub struct RefusalLog {
    /// What is counted, for the summary line ("refusals", "failed accepts").
    what: &'static str,
    interval: Duration,
    current: Mutex<Interval>,
}

struct Interval {
    started: Instant,
    /// Refusals by (route, reason) since `started`, the first one (logged at once) included.
    counts: BTreeMap<(&'static str, &'static str), u64>,
}

impl Default for RefusalLog {
    fn default() -> RefusalLog {
        RefusalLog::new("refusals", INTERVAL)
    }
}

impl RefusalLog {
    pub fn new(what: &'static str, interval: Duration) -> RefusalLog {
        let current = Mutex::new(Interval { started: Instant::now(), counts: BTreeMap::new() });
        RefusalLog { what, interval, current }
    }

    /// Notes one refusal; answers whether it is the first of its interval, which the caller then
    /// logs with its details. Ends the interval first if it is over.
    pub fn note(&self, route: &'static str, reason: &'static str) -> bool {
        self.note_at(route, reason, Instant::now())
    }

    fn note_at(&self, route: &'static str, reason: &'static str, now: Instant) -> bool {
        let mut current = self.current.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if now.saturating_duration_since(current.started) >= self.interval {
            summarise(self.what, &std::mem::take(&mut current.counts), self.interval);
            current.started = now;
        }
        let first = current.counts.is_empty();
        *current.counts.entry((route, reason)).or_default() += 1;
        first
    }

    /// Ends the interval if it is over (called every [`INTERVAL`], so the summary of the last
    /// burst is not held back until the next refusal).
    pub fn flush(&self) {
        let now = Instant::now();
        let mut current = self.current.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if now.saturating_duration_since(current.started) >= self.interval && !current.counts.is_empty() {
            summarise(self.what, &std::mem::take(&mut current.counts), self.interval);
            current.started = now;
        }
    }

    /// Ends intervals until `stop`.
    pub async fn flush_every_interval(self: std::sync::Arc<Self>, mut stop: tokio::sync::watch::Receiver<bool>) {
        let mut ticks = tokio::time::interval(self.interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticks.tick() => self.flush(),
                changed = stop.changed() => if changed.is_err() || *stop.borrow() { return },
            }
        }
    }
}

/// One line for the refusals of an interval beyond its first (which was logged at once).
fn summarise(what: &str, counts: &BTreeMap<(&'static str, &'static str), u64>, interval: Duration) {
    let Some(text) = summary(counts) else {
        return;
    };
    let total: u64 = counts.values().sum();
    tracing::warn!(total, counts = %text, "{total} {what} in the last {interval:?}");
}

/// `route reason=count, ...`; `None` when only the first refusal (already logged) happened.
fn summary(counts: &BTreeMap<(&'static str, &'static str), u64>) -> Option<String> {
    if counts.values().sum::<u64>() <= 1 {
        return None;
    }
    let mut text = String::new();
    for ((route, reason), count) in counts {
        let separator = if text.is_empty() { "" } else { ", " };
        let _ = write!(text, "{separator}{route} {reason}={count}");
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_first_refusal_of_an_interval_is_logged_at_once() {
        let log = RefusalLog::new("refusals", Duration::from_secs(10));
        let start = Instant::now();
        let firsts =
            (0..1000).filter(|i| log.note_at("/raft/vote", "missing", start + Duration::from_millis(*i))).count();
        assert_eq!(firsts, 1);
        assert!(log.note_at("/v1/tags", "unknown", start + Duration::from_secs(11)), "a new interval");
        assert!(!log.note_at("/v1/tags", "unknown", start + Duration::from_secs(12)));
    }

    #[test]
    fn the_summary_counts_by_route_and_reason() {
        let mut counts = BTreeMap::new();
        counts.insert(("/raft/vote", "missing"), 1);
        assert_eq!(summary(&counts), None, "the one refusal was logged already");
        counts.insert(("/raft/vote", "missing"), 998);
        counts.insert(("tls", "certificate"), 2);
        assert_eq!(summary(&counts).as_deref(), Some("/raft/vote missing=998, tls certificate=2"));
    }
}
