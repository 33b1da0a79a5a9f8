//! `--statefulset-service`: a node's ID, its address and its peers derived from the stable names a
//! Kubernetes StatefulSet gives its pods, so every pod runs the same command line.
//!
//! Pod `NAME-i` of a StatefulSet whose headless Service is `SERVICE` is reached at
//! `NAME-i.SERVICE.NAMESPACE.svc.DOMAIN:PORT` (the port of `--listen`), whatever IP it has now:
//! peers keep the name, and every new connection resolves it again. Its node ID is `i + 1` (node
//! IDs start at 1). The first `--statefulset-initial N` ordinals are the initial members, the same
//! list on every pod (it is the formation size, never the live replica count, which changes with
//! scaling); ordinal `i >= N` joins through them.
//!
//! How a pod becomes a member, the same under every `kubectl apply` (no variable to flip between
//! the first formation and later; `crate::node::bootstrap` does it):
//! - a pod with an empty volume asks every pod that exists (the initial ordinals, and the higher
//!   ones whose names resolve) who they are. Only an initial pod founds, and only when every
//!   initial pod answers with an empty volume and no pod at all holds a cluster; while any pod
//!   does not answer it waits. So a lost volume never founds a second cluster, even when every
//!   initial volume is lost while a higher ordinal keeps the cluster;
//! - when a pod holds a cluster, the empty pod joins it through the pods that answered. If the
//!   cluster still lists this node ID with its lost volume's incarnation, it first has that old
//!   incarnation removed through Raft (which needs a quorum; until then it waits and logs why),
//!   then joins as a new incarnation: the identity checks keep the old one from ever voting
//!   again, and the new one is caught up as a learner before it is promoted;
//! - a pod that starts with the volume of a member the cluster removed (retained volumes, scaled
//!   up again) moves that data directory aside and exits, so that its restart joins empty;
//! - a scale-down needs no command either: the leader removes a member whose ordinal is at or
//!   above the formation size once its pod's name has not resolved for
//!   `--statefulset-scale-down-after-ms` (a pod that no longer exists has no DNS record), highest
//!   ordinal first, as the StatefulSet controller deletes them (`bootstrap::pods`);
//! - `--initial-cluster-state existing` still makes every pod join and never found; `new` is the
//!   default and changes nothing.

use std::collections::BTreeMap;
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

use leafraft_state::NodeId;

use super::founding::ClusterState;
use super::Bootstrap;
use super::Settings;

/// More initial members than this is a typo: Raft clusters have 3, 5, at most 7 voters.
const MAX_INITIAL: u32 = 99;
/// How long a higher ordinal's name must stay unresolvable before the leader takes its member for
/// scaled down: longer than a pod's usual absence while it is rescheduled (a new node attaching
/// its volume before the pod gets an address can take a minute or two). A member removed wrongly
/// (a pod Pending for longer) is not lost: its pod moves the removed data aside and rejoins.
pub const DEFAULT_SCALE_DOWN_AFTER: Duration = Duration::from_secs(300);

/// The StatefulSet's names, as the flags give them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatefulSet {
    /// The StatefulSet's name: the pod name without `-ORDINAL`.
    pub set: String,
    pub ordinal: u32,
    pub service: String,
    pub namespace: String,
    pub domain: String,
    pub initial: u32,
    /// `--statefulset-hosts`: names to reach at another `HOST:PORT` than `NAME:PORT` (tests, and
    /// runs outside Kubernetes; Kubernetes's DNS needs none).
    pub hosts: BTreeMap<String, String>,
    /// The file `hosts` came from: read again when a pod's absence is judged (tests delete pods).
    pub hosts_file: Option<PathBuf>,
    /// `--statefulset-scale-down-after-ms`: how long a higher ordinal's name must be absent
    /// before the leader removes its member.
    pub scale_down_after: Duration,
}

/// What the StatefulSet's names make of this pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Derived {
    pub node_id: NodeId,
    pub advertise: String,
    pub bootstrap: Bootstrap,
}

impl StatefulSet {
    /// The StatefulSet the settings name, or `None` without `--statefulset-service`. The pod's
    /// name comes from `--statefulset-pod`, else `hostname` (`$HOSTNAME`, which Kubernetes sets
    /// to the pod's name).
    pub fn of(layers: &Settings, hostname: Option<String>) -> Result<Option<StatefulSet>, String> {
        let Some(service) = layers.statefulset_service.clone() else {
            if let Some(flag) = statefulset_flag_given(layers) {
                return Err(format!("{flag} needs --statefulset-service"));
            }
            return Ok(None);
        };
        for (given, flag) in [
            (layers.node_id.is_some(), "--node-id"),
            (layers.initial_cluster.is_some(), "--initial-cluster"),
            (layers.join.is_some(), "--join"),
            (layers.advertise.is_some(), "--advertise"),
        ] {
            if given {
                return Err(format!("{flag} is derived from the pod's name with --statefulset-service: give only one"));
            }
        }
        let pod = layers.statefulset_pod.clone().or(hostname.filter(|name| !name.is_empty())).ok_or_else(|| {
            "--statefulset-service needs the pod's name: --statefulset-pod NAME, or $HOSTNAME".to_string()
        })?;
        let (set, ordinal) = parse_pod(&pod)?;
        check_label(&service, "--statefulset-service")?;
        let namespace = layers.statefulset_namespace.clone().unwrap_or_else(|| "default".to_string());
        check_label(&namespace, "--statefulset-namespace")?;
        let domain = layers.statefulset_domain.clone().unwrap_or_else(|| "cluster.local".to_string());
        for label in domain.split('.') {
            check_label(label, "--statefulset-domain")?;
        }
        let initial = layers.statefulset_initial.unwrap_or(3);
        if !(1..=MAX_INITIAL).contains(&initial) {
            return Err(format!("--statefulset-initial must be from 1 to {MAX_INITIAL}, got {initial}"));
        }
        let hosts = match &layers.statefulset_hosts {
            Some(path) => read_hosts(path)?,
            None => BTreeMap::new(),
        };
        let scale_down_after =
            layers.statefulset_scale_down_after_ms.map_or(DEFAULT_SCALE_DOWN_AFTER, Duration::from_millis);
        Ok(Some(StatefulSet {
            set: set.to_string(),
            ordinal,
            service,
            namespace,
            domain,
            initial,
            hosts,
            hosts_file: layers.statefulset_hosts.clone(),
            scale_down_after,
        }))
    }

    /// The DNS name of pod `ordinal`.
    pub fn host(&self, ordinal: u32) -> String {
        format!("{}-{ordinal}.{}.{}.svc.{}", self.set, self.service, self.namespace, self.domain)
    }

    /// Where peers reach pod `ordinal`: `--statefulset-hosts`' entry for its DNS name or pod
    /// name, else the DNS name and `port`.
    pub fn address(&self, ordinal: u32, port: u16) -> String {
        let host = self.host(ordinal);
        let pod = format!("{}-{ordinal}", self.set);
        match self.hosts.get(&host).or_else(|| self.hosts.get(&pod)) {
            Some(mapped) => mapped.clone(),
            None => format!("{host}:{port}"),
        }
    }

    /// This pod's node ID, address and way into the cluster (see the module's comment).
    pub fn derive(&self, port: u16, state: Option<ClusterState>) -> Derived {
        let node_id = node_id_of(self.ordinal);
        let advertise = self.address(self.ordinal, port);
        let pods = Pods { set: self.clone(), port };
        let seeds: Vec<String> =
            pods.initial().into_iter().filter(|(id, _)| *id != node_id).map(|(_, addr)| addr).collect();
        let bootstrap = if state != Some(ClusterState::Existing) {
            Bootstrap::StatefulSet(Box::new(pods))
        } else if seeds.is_empty() {
            // `existing` with one initial member, which is this pod: no one to ask; an operator's
            // `cluster add` lets it in.
            Bootstrap::Existing
        } else {
            Bootstrap::Join(seeds)
        };
        Derived { node_id, advertise, bootstrap }
    }
}

/// A pod's view of its StatefulSet, for `crate::node::bootstrap`: who the initial pods are and where
/// every pod is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pods {
    pub set: StatefulSet,
    /// The port of `--listen`, every pod's.
    pub port: u16,
}

impl Pods {
    /// This pod's node ID.
    pub fn node_id(&self) -> NodeId {
        node_id_of(self.set.ordinal)
    }

    /// Whether this pod is one of the initial ones, which may found the cluster.
    pub fn founds(&self) -> bool {
        self.set.ordinal < self.set.initial
    }

    /// The initial pods (this one too if it is one): node ID to address.
    pub fn initial(&self) -> BTreeMap<NodeId, String> {
        (0..self.set.initial).map(|ordinal| (node_id_of(ordinal), self.set.address(ordinal, self.port))).collect()
    }

    /// Pod `ordinal`'s node ID and address.
    pub fn pod(&self, ordinal: u32) -> (NodeId, String) {
        (node_id_of(ordinal), self.set.address(ordinal, self.port))
    }

    /// The highest ordinal a pod asks about (`MAX_INITIAL` is also the most a StatefulSet of
    /// Raft members plausibly has).
    pub fn last_ordinal(&self) -> u32 {
        MAX_INITIAL
    }
}

/// Node IDs start at 1; ordinals at 0.
pub fn node_id_of(ordinal: u32) -> NodeId {
    NodeId::from(ordinal) + 1
}

/// `leafraft-2` → (`leafraft`, 2): a pod name is its StatefulSet's name, `-` and its ordinal.
pub fn parse_pod(pod: &str) -> Result<(&str, u32), String> {
    let bad = |why: &str| format!("--statefulset-pod '{pod}' is not a StatefulSet pod name (NAME-ORDINAL): {why}");
    check_label(pod, "--statefulset-pod")?;
    let (set, ordinal) = pod.rsplit_once('-').ok_or_else(|| bad("no '-ORDINAL' at its end"))?;
    if set.is_empty() {
        return Err(bad("no NAME before the ordinal"));
    }
    if ordinal.is_empty() || !ordinal.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad("it does not end in a number"));
    }
    if ordinal.len() > 1 && ordinal.starts_with('0') {
        return Err(bad("an ordinal has no leading zero"));
    }
    let ordinal = ordinal.parse::<u32>().map_err(|_| bad("the ordinal is too large"))?;
    Ok((set, ordinal))
}

/// A DNS label as Kubernetes names pods, Services and namespaces: 1–63 of `a-z`, `0-9` and `-`,
/// starting and ending with a letter or digit.
fn check_label(label: &str, flag: &str) -> Result<(), String> {
    let fits = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let ok = (1..=63).contains(&label.len())
        && label.bytes().all(|b| fits(b) || b == b'-')
        && label.bytes().next().is_some_and(fits)
        && label.bytes().last().is_some_and(fits);
    if ok {
        Ok(())
    } else {
        Err(format!("{flag} '{label}' is not a DNS label (1-63 of a-z, 0-9 and '-', not starting or ending with '-')"))
    }
}

/// The first derivation flag given without `--statefulset-service`.
fn statefulset_flag_given(layers: &Settings) -> Option<&'static str> {
    [
        (layers.statefulset_pod.is_some(), "--statefulset-pod"),
        (layers.statefulset_initial.is_some(), "--statefulset-initial"),
        (layers.statefulset_namespace.is_some(), "--statefulset-namespace"),
        (layers.statefulset_domain.is_some(), "--statefulset-domain"),
        (layers.statefulset_hosts.is_some(), "--statefulset-hosts"),
        (layers.statefulset_scale_down_after_ms.is_some(), "--statefulset-scale-down-after-ms"),
    ]
    .into_iter()
    .find_map(|(given, flag)| given.then_some(flag))
}

/// `--statefulset-hosts FILE`: one `NAME HOST:PORT` a line (`#` comments), as `/etc/hosts` with
/// a port, since a hosts file cannot give one.
pub fn read_hosts(path: &Path) -> Result<BTreeMap<String, String>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read --statefulset-hosts {}: {e}", path.display()))?;
    parse_hosts(&text).map_err(|e| format!("bad --statefulset-hosts {}: {e}", path.display()))
}

pub fn parse_hosts(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut hosts = BTreeMap::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [name, addr] = fields[..] else {
            return Err(format!("line {} is not NAME HOST:PORT", number + 1));
        };
        let port = addr.rsplit_once(':').map(|(_, port)| port.parse::<u16>());
        if !matches!(port, Some(Ok(_))) {
            return Err(format!("line {}: '{addr}' is not HOST:PORT", number + 1));
        }
        if hosts.insert(name.to_string(), addr.to_string()).is_some() {
            return Err(format!("line {}: {name} appears twice", number + 1));
        }
    }
    Ok(hosts)
}

#[cfg(test)]
mod tests;
