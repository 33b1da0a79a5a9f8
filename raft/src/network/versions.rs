//! What release each member runs, as the `/raft/*` messages report it ([`PeerVersions`]), and
//! the one-way stop of a node that received something only a newer release can decode.
//!
//! Every request and answer between members carries the sender's release in
//! [`VERSION_HEADER`]; a member of the baseline release sends none and counts as
//! [`Version::BASELINE`]. A leader hears every member in the answers to its appends; it also sends
//! what it heard in [`MEMBER_VERSIONS_HEADER`] with its appends, so that a follower can show every
//! member's version and name the members behind when it refuses a command. Only the leader's own
//! observations (`heard`) decide whether the cluster version may rise.

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::sync::PoisonError;
use std::sync::RwLock;
use std::time::Duration;
use std::time::Instant;

use axum::http::HeaderMap;
use axum::http::HeaderValue;
use tokio::sync::Notify;

use leafraft_state::version::Version;
use leafraft_state::NodeId;

/// The release the sender runs (`0.2.0`).
pub const VERSION_HEADER: &str = "x-leafraft-version";
/// With an append: the release of each member as the leader last heard it (`1=0.2.0,2=0.1.0`).
pub const MEMBER_VERSIONS_HEADER: &str = "x-leafraft-member-versions";

/// The most members a [`MEMBER_VERSIONS_HEADER`] is read for (a membership holds far fewer).
const MAX_RELAYED: usize = 64;

/// How recently a member must have been heard for its report to let the cluster version rise:
/// a member down for longer may come back on an older release.
pub const FRESH: Duration = Duration::from_secs(5);

/// One member's reported release and when this node learned it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Report {
    pub version: Version,
    pub at: Instant,
    /// Heard from the member itself (`false`: relayed by a leader).
    pub direct: bool,
}

/// The releases members reported, and this node's stop when it met a newer release's entries.
#[derive(Debug, Default)]
pub struct PeerVersions {
    reports: RwLock<BTreeMap<NodeId, Report>>,
    stop: OnceLock<String>,
    stopped: Notify,
}

impl PeerVersions {
    /// Takes in the release `node` reports in `headers` (none: the baseline).
    pub fn heard(&self, node: NodeId, headers: &HeaderMap) {
        let version = version_in(headers).unwrap_or(Version::BASELINE);
        let report = Report { version, at: Instant::now(), direct: true };
        let before = self.reports.write().unwrap_or_else(PoisonError::into_inner).insert(node, report);
        if before.is_none_or(|before| !before.direct || before.version != version) {
            // Once per member and release: what an operator follows during an upgrade.
            tracing::info!(node, %version, "member runs leafraft {version}");
        }
    }

    /// Takes in what a leader (`leader`) relays about the other members; this node's own direct
    /// observations stay unless the relay is newer, and nothing is said about `own`.
    pub fn relayed(&self, own: NodeId, leader: NodeId, headers: &HeaderMap) {
        let Some(text) = headers.get(MEMBER_VERSIONS_HEADER).and_then(|value| value.to_str().ok()) else {
            return;
        };
        let now = Instant::now();
        let mut reports = self.reports.write().unwrap_or_else(PoisonError::into_inner);
        for (node, version) in parse_relay(text) {
            if node != own && node != leader {
                reports.insert(node, Report { version, at: now, direct: false });
            }
        }
    }

    /// Every member's report as this node knows it.
    pub fn reports(&self) -> BTreeMap<NodeId, Report> {
        self.reports.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The header a node sends with its requests: every member's release it knows.
    pub fn relay_header(&self, own: NodeId) -> Option<HeaderValue> {
        let reports = self.reports.read().unwrap_or_else(PoisonError::into_inner);
        let mut text = format!("{own}={}", Version::OWN);
        for (node, report) in reports.iter().filter(|(node, _)| **node != own).take(MAX_RELAYED - 1) {
            text.push_str(&format!(",{node}={}", report.version));
        }
        HeaderValue::from_str(&text).ok()
    }

    /// Stops this node for good: it met a message only a newer release can decode. The first
    /// reason stays; [`PeerVersions::stopped`] then completes with it.
    pub fn stop(&self, reason: String) {
        if self.stop.set(reason).is_ok() {
            self.stopped.notify_waiters();
        }
    }

    /// Whether this node was stopped, and why.
    pub fn stop_reason(&self) -> Option<&str> {
        self.stop.get().map(String::as_str)
    }

    /// Completes with the reason once [`PeerVersions::stop`] was called.
    pub async fn stopped(&self) -> String {
        loop {
            let notified = self.stopped.notified();
            if let Some(reason) = self.stop.get() {
                return reason.clone();
            }
            notified.await;
        }
    }
}

/// The release in [`VERSION_HEADER`], if the headers carry a well-formed one.
pub fn version_in(headers: &HeaderMap) -> Option<Version> {
    headers.get(VERSION_HEADER)?.to_str().ok()?.parse().ok()
}

/// Writes this binary's release into `headers`.
pub fn write_version(headers: &mut HeaderMap) {
    if let Ok(value) = HeaderValue::from_str(&Version::OWN.to_string()) {
        headers.insert(VERSION_HEADER, value);
    }
}

/// `node=version` pairs, ignoring malformed ones; at most [`MAX_RELAYED`].
fn parse_relay(text: &str) -> impl Iterator<Item = (NodeId, Version)> + '_ {
    text.split(',')
        .filter_map(|pair| {
            let (node, version) = pair.split_once('=')?;
            Some((node.trim().parse().ok()?, version.trim().parse().ok()?))
        })
        .take(MAX_RELAYED)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(*name, HeaderValue::from_str(value).expect("value"));
        }
        headers
    }

    #[test]
    fn a_member_without_a_version_header_runs_the_baseline() {
        let versions = PeerVersions::default();
        versions.heard(2, &HeaderMap::new());
        versions.heard(3, &headers(&[(VERSION_HEADER, "0.2.0")]));
        versions.heard(4, &headers(&[(VERSION_HEADER, "garbage")]));
        let reports = versions.reports();
        assert_eq!(reports[&2].version, Version::BASELINE);
        assert_eq!(reports[&3].version, Version::new(0, 2, 0));
        assert_eq!(reports[&4].version, Version::BASELINE, "a malformed header claims nothing newer");
        assert!(reports.values().all(|report| report.direct));
    }

    #[test]
    fn a_relay_never_speaks_for_this_node_or_the_leader_and_ignores_junk() {
        let versions = PeerVersions::default();
        versions.heard(1, &headers(&[(VERSION_HEADER, "0.2.0")]));
        let relay = headers(&[(MEMBER_VERSIONS_HEADER, "1=0.1.0,2=0.1.0,3=0.2.0,x=1.0.0,4=junk,5")]);
        versions.relayed(2, 1, &relay);
        let reports = versions.reports();
        assert_eq!(reports.keys().copied().collect::<Vec<_>>(), [1, 3]);
        assert_eq!(reports[&1].version, Version::new(0, 2, 0), "the leader's own header wins");
        assert_eq!(reports[&3], Report { version: Version::new(0, 2, 0), at: reports[&3].at, direct: false });

        let header = versions.relay_header(2).expect("header");
        assert_eq!(header.to_str().expect("ascii"), format!("2={},1=0.2.0,3=0.2.0", Version::OWN));
    }

    #[tokio::test]
    async fn a_stop_keeps_its_first_reason_and_wakes_every_waiter() {
        let versions = std::sync::Arc::new(PeerVersions::default());
        let waiter = tokio::spawn({
            let versions = versions.clone();
            async move { versions.stopped().await }
        });
        tokio::task::yield_now().await;
        versions.stop("needs 0.3.0".into());
        versions.stop("second".into());
        assert_eq!(waiter.await.expect("join"), "needs 0.3.0");
        assert_eq!(versions.stop_reason(), Some("needs 0.3.0"));
        assert_eq!(versions.stopped().await, "needs 0.3.0", "a later waiter completes at once");
    }
}
