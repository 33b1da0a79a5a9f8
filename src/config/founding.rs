//! `--initial-cluster-state new|existing` (etcd's name): whether a node with an empty data
//! directory may found a cluster.
//!
//! Why it exists: a member of a cluster grown with `--join` from a node started with the default
//! flags keeps that command line. If its data directory is ever lost, the same command on the
//! empty directory would found a second, one-member cluster at the member's address: peers refuse
//! it, but clients reach it, find no tags (or tags someone re-creates, served from 1 again), and it
//! leases snowflake worker 0 at once. So founding on an address other hosts reach is an explicit
//! act; on loopback (the two-command quick start) it stays the default.

use super::Bootstrap;

/// The value of `--initial-cluster-state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterState {
    /// Found a new cluster on an empty data directory (alone, or with `--initial-cluster`).
    New,
    /// Never found one: an empty node waits until a running cluster adds it (`--join`, or an
    /// operator's `cluster add`).
    Existing,
}

impl ClusterState {
    pub fn parse(text: &str) -> Result<ClusterState, String> {
        match text {
            "new" => Ok(ClusterState::New),
            "existing" => Ok(ClusterState::Existing),
            other => Err(format!("--initial-cluster-state must be new or existing, got '{other}'")),
        }
    }
}

/// The bootstrap `--initial-cluster-state` makes of the one the other flags give, once the
/// advertised address is known.
pub(super) fn decide(bootstrap: Bootstrap, state: Option<ClusterState>, advertise: &str) -> Result<Bootstrap, String> {
    Ok(match (bootstrap, state) {
        (Bootstrap::Join(_), Some(ClusterState::New)) => {
            return Err("--initial-cluster-state new founds a cluster and --join joins one: give only one".into());
        }
        (Bootstrap::Single | Bootstrap::InitialCluster(_), Some(ClusterState::Existing)) => Bootstrap::Existing,
        (Bootstrap::Single, None) if !is_loopback(advertise) => Bootstrap::Undecided,
        (bootstrap, _) => bootstrap,
    })
}

/// Whether `addr` (`host:port`) names this host only: a loopback IP or `localhost`.
pub fn is_loopback(addr: &str) -> bool {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The one line a node gives when it would found a cluster on `advertise` without being told to.
pub fn undecided_refusal(node_id: leafraft_state::NodeId, advertise: &str) -> String {
    format!(
        "refusing to found a new cluster: node {node_id} has an empty data dir and advertises {advertise}, which is \
         not a loopback address; pass --initial-cluster-state new to found a one-member cluster, or \
         --initial-cluster-state existing (or --join) to wait until a running cluster adds this node"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_an_ip_of_127_8_or_1_or_localhost() {
        for addr in ["127.0.0.1:8080", "127.1.2.3:1", "[::1]:80", "localhost:8080", "LOCALHOST:1"] {
            assert!(is_loopback(addr), "{addr}");
        }
        for addr in ["10.0.0.1:8080", "[::2]:80", "node1.example:8080", "0.0.0.0:80", "127.0.0.1.example:1"] {
            assert!(!is_loopback(addr), "{addr}");
        }
    }

    #[test]
    fn founding_off_loopback_needs_the_flag() {
        let single = || Bootstrap::Single;
        assert_eq!(decide(single(), None, "127.0.0.1:8080"), Ok(Bootstrap::Single));
        assert_eq!(decide(single(), None, "10.0.0.1:8080"), Ok(Bootstrap::Undecided));
        assert_eq!(decide(single(), Some(ClusterState::New), "10.0.0.1:8080"), Ok(Bootstrap::Single));
        assert_eq!(decide(single(), Some(ClusterState::Existing), "127.0.0.1:1"), Ok(Bootstrap::Existing));
        let join = || Bootstrap::Join(vec!["h:1".into()]);
        assert!(decide(join(), Some(ClusterState::New), "10.0.0.1:1").is_err());
        assert_eq!(decide(join(), Some(ClusterState::Existing), "10.0.0.1:1"), Ok(join()));
        assert_eq!(decide(join(), None, "10.0.0.1:1"), Ok(join()));
        let initial = || Bootstrap::InitialCluster([(1, "10.0.0.1:1".to_string())].into());
        assert_eq!(decide(initial(), None, "10.0.0.1:1"), Ok(initial()));
        assert_eq!(decide(initial(), Some(ClusterState::Existing), "10.0.0.1:1"), Ok(Bootstrap::Existing));
        assert!(!undecided_refusal(1, "10.0.0.1:1").contains('\n'));
    }
}
