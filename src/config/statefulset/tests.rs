//! Unit tests of the StatefulSet derivation: pod names, flags, IDs, addresses and bootstrap.

use super::*;
use crate::config::Config;

fn layers(f: impl FnOnce(&mut Settings)) -> Settings {
    let mut layers = Settings { statefulset_service: Some("leafraft-peers".into()), ..Settings::default() };
    f(&mut layers);
    layers
}

fn set_of(pod: &str, initial: u32) -> StatefulSet {
    let settings = layers(|l| {
        l.statefulset_pod = Some(pod.into());
        l.statefulset_initial = Some(initial);
        l.statefulset_namespace = Some("ids".into());
    });
    StatefulSet::of(&settings, None).unwrap().unwrap()
}

#[test]
fn a_pod_name_is_its_set_and_ordinal() {
    assert_eq!(parse_pod("leafraft-0"), Ok(("leafraft", 0)));
    assert_eq!(parse_pod("leafraft-12"), Ok(("leafraft", 12)));
    assert_eq!(parse_pod("id-service-a-2"), Ok(("id-service-a", 2)));
    for (bad, why) in [
        ("leafraft", "no '-ORDINAL'"),
        ("-3", "not a DNS label"),
        ("leafraft-", "not a DNS label"),
        ("leafraft-x", "does not end in a number"),
        ("leafraft-01", "no leading zero"),
        ("leafraft-99999999999", "too large"),
        ("Leafraft-1", "not a DNS label"),
        ("leaf_raft-1", "not a DNS label"),
        ("", "not a DNS label"),
    ] {
        let err = parse_pod(bad).unwrap_err();
        assert!(err.contains(why), "{bad}: {err}");
        assert!(!err.contains('\n'));
    }
}

#[test]
fn the_node_id_is_the_ordinal_plus_one_and_the_address_the_pods_dns_name() {
    let set = set_of("leafraft-2", 3);
    assert_eq!(set.host(2), "leafraft-2.leafraft-peers.ids.svc.cluster.local");
    let derived = set.derive(8080, None);
    assert_eq!(derived.node_id, 3);
    assert_eq!(derived.advertise, "leafraft-2.leafraft-peers.ids.svc.cluster.local:8080");
}

#[test]
fn initial_ordinals_form_the_same_cluster_and_later_ones_join_through_it() {
    let members: BTreeMap<NodeId, String> = (0u32..3)
        .map(|i| (NodeId::from(i) + 1, format!("leafraft-{i}.leafraft-peers.ids.svc.cluster.local:7000")))
        .collect();
    let pods_of = |pod: &str, state| match set_of(pod, 3).derive(7000, state).bootstrap {
        Bootstrap::StatefulSet(pods) => *pods,
        other => panic!("{pod}: {other:?}"),
    };
    for pod in ["leafraft-0", "leafraft-1", "leafraft-2"] {
        // Unset and `new` are the same: the manifest never has to change between the first
        // formation and later.
        for state in [None, Some(ClusterState::New)] {
            let pods = pods_of(pod, state);
            assert!(pods.founds(), "{pod}");
            assert_eq!(pods.initial(), members, "{pod}");
        }
    }
    let all_initial: Vec<String> = members.values().cloned().collect();
    for pod in ["leafraft-3", "leafraft-4", "leafraft-17"] {
        for state in [None, Some(ClusterState::New)] {
            // A pod beyond the formation size never founds, whatever the StatefulSet says.
            let pods = pods_of(pod, state);
            assert!(!pods.founds(), "{pod}");
            assert_eq!(pods.initial(), members, "{pod}");
        }
        let derived = set_of(pod, 3).derive(7000, Some(ClusterState::Existing));
        assert_eq!(derived.bootstrap, Bootstrap::Join(all_initial.clone()), "{pod}");
    }
    let pods = pods_of("leafraft-4", None);
    assert_eq!(pods.node_id(), 5);
    assert_eq!(pods.pod(3), (4, "leafraft-3.leafraft-peers.ids.svc.cluster.local:7000".to_string()));
}

#[test]
fn existing_makes_every_pod_join_through_the_other_initial_members() {
    let derived = set_of("leafraft-1", 3).derive(8080, Some(ClusterState::Existing));
    let Bootstrap::Join(seeds) = &derived.bootstrap else { panic!("{derived:?}") };
    assert_eq!(seeds.len(), 2);
    assert!(seeds[0].starts_with("leafraft-0.") && seeds[1].starts_with("leafraft-2."), "{seeds:?}");
    // One initial member, which is this pod: nobody to ask, so it waits to be added.
    let alone = set_of("leafraft-0", 1).derive(8080, Some(ClusterState::Existing));
    assert_eq!(alone.bootstrap, Bootstrap::Existing);
    assert!(
        matches!(set_of("leafraft-0", 1).derive(8080, None).bootstrap, Bootstrap::StatefulSet(p) if p.initial().len() == 1)
    );
}

#[test]
fn the_pod_name_defaults_to_the_hostname() {
    let settings = layers(|_| {});
    let set = StatefulSet::of(&settings, Some("leafraft-4".into())).unwrap().unwrap();
    assert_eq!((set.set.as_str(), set.ordinal, set.initial), ("leafraft", 4, 3));
    assert_eq!(set.host(0), "leafraft-0.leafraft-peers.default.svc.cluster.local");
    let err = StatefulSet::of(&settings, None).unwrap_err();
    assert!(err.contains("--statefulset-pod NAME, or $HOSTNAME"), "{err}");
    assert!(StatefulSet::of(&settings, Some(String::new())).is_err());
    let flagged = layers(|l| l.statefulset_pod = Some("leafraft-1".into()));
    assert_eq!(StatefulSet::of(&flagged, Some("other-7".into())).unwrap().unwrap().ordinal, 1);
}

#[test]
fn derivation_excludes_the_flags_it_derives_and_needs_its_service() {
    assert_eq!(StatefulSet::of(&Settings::default(), Some("leafraft-0".into())), Ok(None));
    let orphan = Settings { statefulset_initial: Some(5), ..Settings::default() };
    assert!(StatefulSet::of(&orphan, None).unwrap_err().contains("--statefulset-initial needs --statefulset-service"));
    for (flag, set) in [
        ("--node-id", (|l: &mut Settings| l.node_id = Some(1)) as fn(&mut Settings)),
        ("--initial-cluster", |l| l.initial_cluster = Some("1=a:1".into())),
        ("--join", |l| l.join = Some("a:1".into())),
        ("--advertise", |l| l.advertise = Some("a:1".into())),
    ] {
        let err = StatefulSet::of(&layers(set), Some("leafraft-0".into())).unwrap_err();
        assert!(err.starts_with(flag) && err.contains("derived"), "{err}");
    }
    for (bad, flag) in [
        (
            (|l: &mut Settings| l.statefulset_service = Some("Peers".into())) as fn(&mut Settings),
            "--statefulset-service",
        ),
        (|l| l.statefulset_namespace = Some("a.b".into()), "--statefulset-namespace"),
        (|l| l.statefulset_domain = Some("cluster..local".into()), "--statefulset-domain"),
        (|l| l.statefulset_initial = Some(0), "--statefulset-initial must be from 1"),
        (|l| l.statefulset_initial = Some(100), "--statefulset-initial must be from 1"),
    ] {
        let err = StatefulSet::of(&layers(bad), Some("leafraft-0".into())).unwrap_err();
        assert!(err.starts_with(flag), "{err}");
    }
}

#[test]
fn a_hosts_file_maps_dns_or_pod_names_to_host_and_port() {
    let hosts = parse_hosts(
        "# tests\nleafraft-0.leafraft-peers.ids.svc.cluster.local 127.0.0.1:4001\n\nleafraft-1 127.0.0.1:4002 # pod\n",
    )
    .unwrap();
    let mut set = set_of("leafraft-1", 3);
    set.hosts = hosts;
    assert_eq!(set.address(0, 8080), "127.0.0.1:4001");
    assert_eq!(set.address(1, 8080), "127.0.0.1:4002");
    assert_eq!(set.address(2, 8080), "leafraft-2.leafraft-peers.ids.svc.cluster.local:8080");
    assert_eq!(set.derive(8080, None).advertise, "127.0.0.1:4002");
    for (bad, why) in [("a", "line 1 is not NAME HOST:PORT"), ("a b:x", "not HOST:PORT"), ("a b:1\na c:2", "twice")] {
        let err = parse_hosts(bad).unwrap_err();
        assert!(err.contains(why), "{bad}: {err}");
    }
    let missing = layers(|l| {
        l.statefulset_pod = Some("leafraft-0".into());
        l.statefulset_hosts = Some("/nonexistent/leafraft-hosts".into());
    });
    assert!(StatefulSet::of(&missing, None).unwrap_err().contains("cannot read --statefulset-hosts"));
}

#[test]
fn serve_takes_its_id_address_and_bootstrap_from_the_derivation() {
    let pod = |state: Option<&str>| {
        layers(|l| {
            l.statefulset_pod = Some("leafraft-1".into());
            l.listen = Some("127.0.0.1:8080".into());
            l.initial_cluster_state = state.map(str::to_string);
        })
    };
    let config = Config::resolve(pod(None)).unwrap();
    assert_eq!(config.node_id, 2);
    assert_eq!(config.advertise, "leafraft-1.leafraft-peers.default.svc.cluster.local:8080");
    assert!(matches!(&config.bootstrap, Bootstrap::StatefulSet(pods) if pods.initial().len() == 3), "{config:?}");
    let existing = Config::resolve(pod(Some("existing"))).unwrap();
    assert!(matches!(&existing.bootstrap, Bootstrap::Join(seeds) if seeds.len() == 2), "{existing:?}");
    let err = Config::resolve(pod(Some("later"))).unwrap_err();
    assert!(err.contains("--initial-cluster-state must be new or existing"), "{err}");
    // Listening on every interface still needs TLS and credentials.
    let open = layers(|l| {
        l.statefulset_pod = Some("leafraft-0".into());
        l.listen = Some("0.0.0.0:8080".into());
    });
    assert!(Config::resolve(open).unwrap_err().contains("--tls-cert"));
}
