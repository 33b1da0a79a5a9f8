//! Rolling upgrades: the cluster version, what it gates, and how it moves.
//!
//! The cluster version (`IdStateMachine::cluster_version`, replicated) is the release every member
//! runs at least. A command an older release cannot decode (`leafraft_state::Request::needs`) is refused
//! before it is proposed while the cluster version is below what it needs, with 409
//! `FEATURE_NOT_ENABLED` naming that version and the members still behind: a member that cannot
//! decode an entry can neither store nor acknowledge it, and two such members of three leave
//! the cluster without a quorum.
//!
//! The leader raises the cluster version by itself ([`maintain_cluster_version`]) once every
//! member, voters and learners, reported a release at least that high within
//! `raft::network::versions::FRESH` in its answers to the leader (a member down longer may come
//! back on an older release). Automatic rather than an explicit `finalize` command: the last
//! member's restart is the operator's decision already, and a forgotten finalize would leave
//! every new command refused. `--hold-cluster-version` (CockroachDB's
//! `preserve_downgrade_option`) holds it back while an operator wants rollback to stay possible.
//! Once it moved, a member can no longer go back: the old release cannot decode the entry that
//! raised it (nor snapshots from then on, `storage::codec::encode_snapshot`), and this release
//! refuses a store whose cluster version is newer than itself.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request as HttpRequest;
use axum::http::StatusCode;
use axum::response::Response as HttpResponse;
use leafraft_state::Needs;
use leafraft_state::NodeId;
use leafraft_state::Request;
use leafraft_state::Version;
use openraft::ServerState;
use raft::network::versions::version_in;
use raft::network::versions::FRESH;
use raft::network::IdentityCheck;
use raft::network::PeerIdentity;

use crate::cluster::Cluster;
use crate::error::Error;
use crate::error::ErrorCode;

/// How often every node looks at the cluster version, and the leader at the members' releases:
/// often enough that a cluster founded by one release runs at it a heartbeat or two after its
/// first leader heard every member (the check reads memory only).
const CHECK_INTERVAL: Duration = Duration::from_millis(100);
/// How long a request that needs a newer cluster version waits for it when no member is known
/// to run an older release (a new cluster's first moments, a node that has not heard everyone
/// since it started) before it is refused.
const RAISE_WAIT: Duration = Duration::from_secs(2);

/// How a member's release is known to the node that judges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Judge {
    /// Anything this node heard, also what a leader relayed: good enough to refuse and to show.
    Any,
    /// Only what the member itself told this node within `FRESH`: what lets the version rise.
    Fresh,
}

impl Cluster {
    /// Refuses a request the cluster version does not allow yet (409 `FEATURE_NOT_ENABLED`).
    /// Raising the cluster version itself is judged only by a leader, which hears every member.
    pub(super) fn check_cluster_version(&self, request: &Request, as_leader: bool) -> Result<(), Error> {
        #[cfg(feature = "planted")]
        if crate::planted::feature_gate_off() {
            return Ok(());
        }
        match request.needs() {
            Needs::ClusterVersion(needed) => self.require_cluster_version(needed, "this command"),
            Needs::EveryMember(_) if !as_leader => Ok(()),
            Needs::EveryMember(version) => match self.members_behind(version, Judge::Fresh) {
                behind if behind.is_empty() => Ok(()),
                behind => Err(feature_not_enabled(format!(
                    "the cluster version can rise to {version} only once every member runs it; members not heard \
                     running {version} or newer in the last {FRESH:?}: {}",
                    describe(&behind)
                ))),
            },
        }
    }

    /// Refuses what needs cluster version `needed` while the cluster is below it (409
    /// `FEATURE_NOT_ENABLED`, naming the members still behind); `what` names it in the message.
    pub(super) fn require_cluster_version(&self, needed: Version, what: &str) -> Result<(), Error> {
        let current = self.cluster_version();
        if current >= needed {
            return Ok(());
        }
        self.refuse_below(needed, what)
    }

    /// [`Cluster::require_cluster_version`], waiting up to [`RAISE_WAIT`] first while no member
    /// is known to run a release below `needed`: the leader raises the version within a check
    /// interval of hearing every member, so a new cluster's first requests are served, not
    /// refused.
    pub async fn await_cluster_version(&self, needed: Version, what: &str) -> Result<(), Error> {
        if self.cluster_version() >= needed {
            return Ok(());
        }
        let known_behind =
            |cluster: &Cluster| cluster.members_behind(needed, Judge::Any).iter().any(|(_, version)| version.is_some());
        if !self.version_held.load(Ordering::Relaxed) && !known_behind(self) {
            let mut metrics = self.raft.metrics();
            let raised = tokio::time::timeout(RAISE_WAIT, async {
                while self.cluster_version() < needed && !known_behind(self) {
                    if metrics.changed().await.is_err() {
                        break;
                    }
                }
            });
            let _ = raised.await;
        }
        self.require_cluster_version(needed, what)
    }

    /// The refusal of what needs `needed`, naming the members behind.
    fn refuse_below(&self, needed: Version, what: &str) -> Result<(), Error> {
        let current = self.cluster_version();
        let behind = self.members_behind(needed, Judge::Any);
        let why = match behind.is_empty() {
            true => format!(
                "every member runs {needed} or newer; the leader raises the cluster version within seconds unless \
                 --hold-cluster-version holds it"
            ),
            false => format!("members still below {needed}: {}", describe(&behind)),
        };
        Err(feature_not_enabled(format!("{what} needs cluster version {needed}, the cluster is at {current}; {why}")))
    }

    /// Why this node should not report ready yet: every member is known to run a release newer
    /// than the cluster version, so the leader is about to raise it (a cluster founded by one
    /// release answers at that release from its first ready moment).
    pub fn cluster_version_settling(&self) -> Option<String> {
        let current = self.cluster_version();
        let held = self.version_held.load(Ordering::Relaxed);
        if held || current >= Version::OWN || !self.members_behind(Version::OWN, Judge::Any).is_empty() {
            return None;
        }
        Some(format!("every member runs {} or newer; the cluster version ({current}) is being raised", Version::OWN))
    }

    /// The replicated cluster version as this replica applied it.
    pub fn cluster_version(&self) -> Version {
        self.read(|state| state.cluster_version)
    }

    /// Every member's release as this node knows it (`None`: not heard since it started).
    pub fn member_versions(&self) -> BTreeMap<NodeId, Option<Version>> {
        let reports = self.identity().versions().reports();
        let membership = self.metrics().membership_config.membership().clone();
        membership
            .nodes()
            .map(|(id, _)| {
                let version = match *id == self.node_id() {
                    true => Some(Version::OWN),
                    false => reports.get(id).map(|report| report.version),
                };
                (*id, version)
            })
            .collect()
    }

    /// The members not known (as `judge` counts it) to run `version` or newer.
    fn members_behind(&self, version: Version, judge: Judge) -> Vec<(NodeId, Option<Version>)> {
        let reports = self.identity().versions().reports();
        let known = |id: &NodeId| match reports.get(id) {
            Some(report) if judge == Judge::Fresh && (!report.direct || report.at.elapsed() > FRESH) => None,
            report => report.map(|report| report.version),
        };
        let membership = self.metrics().membership_config.membership().clone();
        membership
            .nodes()
            .filter(|(id, _)| **id != self.node_id())
            .map(|(id, _)| (*id, known(id)))
            .chain(std::iter::once((self.node_id(), Some(Version::OWN))))
            .filter(|(_, reported)| reported.is_none_or(|reported| reported < version))
            .collect()
    }

    /// The highest version every member ran within `FRESH` (as heard by this node), if every
    /// member was heard.
    fn version_every_member_runs(&self) -> Option<Version> {
        let reports = self.identity().versions().reports();
        let membership = self.metrics().membership_config.membership().clone();
        let mut lowest = Version::OWN;
        for (id, _) in membership.nodes().filter(|(id, _)| **id != self.node_id()) {
            let report = reports.get(id).filter(|report| report.direct && report.at.elapsed() <= FRESH)?;
            lowest = lowest.min(report.version);
        }
        Some(lowest)
    }

    fn leads(&self) -> bool {
        let metrics = self.metrics();
        metrics.state == ServerState::Leader && metrics.current_leader == Some(self.node_id())
    }
}

fn feature_not_enabled(message: String) -> Error {
    Error::new(ErrorCode::FeatureNotEnabled, message)
}

fn describe(members: &[(NodeId, Option<Version>)]) -> String {
    let one = |(id, version): &(NodeId, Option<Version>)| match version {
        Some(version) => format!("node {id} ({version})"),
        None => format!("node {id} (not heard)"),
    };
    members.iter().map(one).collect::<Vec<_>>().join(", ")
}

/// Every node: logs the cluster version when it moves, stops this node when the cluster moved
/// past its release, and, while it leads and `hold` is off, raises the cluster version to what
/// every member runs.
pub async fn maintain_cluster_version(cluster: Arc<Cluster>, hold: bool) {
    cluster.version_held.store(hold, Ordering::Relaxed);
    let mut ticks = tokio::time::interval(CHECK_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut seen = None;
    let mut held = None;
    loop {
        ticks.tick().await;
        let current = cluster.cluster_version();
        if seen != Some(current) {
            seen = Some(current);
            tracing::info!(cluster_version = %current, version = %Version::OWN, "cluster version");
        }
        if current > Version::OWN {
            cluster.identity().versions().stop(format!(
                "the cluster version is {current}, newer than this binary (leafraft {}): run leafraft {current} or \
                 newer on this node",
                Version::OWN
            ));
            return;
        }
        if !cluster.leads() {
            continue;
        }
        let Some(target) = cluster.version_every_member_runs().filter(|target| *target > current) else {
            continue;
        };
        if hold {
            if held != Some(target) {
                held = Some(target);
                tracing::info!(%target, %current, "every member runs {target}; the cluster version stays at {current} \
                     (--hold-cluster-version)");
            }
            continue;
        }
        match cluster.write(Request::SetClusterVersion { version: target }).await {
            Ok(response) => tracing::info!(?response, "cluster version raised: every member runs {target}"),
            Err(error) => tracing::info!(%error, "cluster version not raised yet"),
        }
    }
}

/// On every `/raft/*` request that passed the identity check: records the sender's release
/// (and, with an append, what its leader relays about the others). Answers the sender's release.
pub fn heard(identity: &IdentityCheck, peer: &PeerIdentity, request: &HttpRequest) -> Option<Version> {
    let versions = identity.versions();
    versions.heard(peer.node_id, request.headers());
    if request.uri().path() == "/raft/append" {
        versions.relayed(identity.local().node_id, peer.node_id, request.headers());
    }
    version_in(request.headers())
}

/// A node refuses (400) an append or snapshot it cannot decode, so nothing of it is stored or
/// acknowledged; when its sender runs a newer release, that is an entry of a command this
/// release does not know, and the node stops with one line naming the release it needs rather
/// than refusing the same append forever.
pub fn stop_on_undecodable(
    identity: &IdentityCheck,
    peer: &PeerIdentity,
    sender: Option<Version>,
    path: &str,
    response: &HttpResponse,
) {
    // Only a member's: a node that is none cannot be sending this cluster's entries.
    let carries_entries = (path == "/raft/append" || path == "/raft/snapshot")
        && identity.recorded_incarnation(peer.node_id) == peer.incarnation;
    let Some(sender) = sender.filter(|sender| *sender > Version::OWN) else { return };
    if !carries_entries || response.status() != StatusCode::BAD_REQUEST {
        return;
    }
    let reason = format!(
        "node {} (leafraft {sender}) sent {path} with entries this binary (leafraft {}) cannot decode; nothing \
         of it was stored: run leafraft {sender} or newer on this node",
        peer.node_id,
        Version::OWN
    );
    tracing::error!("{reason}");
    identity.versions().stop(reason);
}
