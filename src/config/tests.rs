//! Unit tests of configuration resolution: defaults, layers, validation.

use super::*;
use leafraft_ids::snowflake::Layout as SnowflakeLayout;

fn layers(f: impl FnOnce(&mut Settings)) -> Settings {
    let mut layers = Settings::default();
    f(&mut layers);
    layers
}

#[test]
fn embedded_default() {
    let config = Config::resolve(Settings::default()).unwrap();
    assert_eq!(config.node_id, 1);
    assert_eq!(config.listen.to_string(), "127.0.0.1:8080");
    assert_eq!(config.advertise, "127.0.0.1:8080");
    assert_eq!(config.bootstrap, Bootstrap::Single);
    assert!(config.fsync);
    let raft_config = config.raft_config().unwrap();
    assert_eq!(raft_config.snapshot_max_chunk_size, leafraft_state::codec::SNAPSHOT_CHUNK_BYTES);
    assert_eq!(raft_config.max_payload_entries, leafraft_state::codec::MAX_PAYLOAD_ENTRIES);
}

#[test]
fn initial_cluster_gives_advertise_and_must_list_self() {
    let config = Config::resolve(layers(|l| {
        l.node_id = Some(2);
        l.listen = Some("127.0.0.1:9002".into());
        l.initial_cluster = Some("1=127.0.0.1:9001, 2=127.0.0.1:9002".into());
    }))
    .unwrap();
    assert_eq!(config.advertise, "127.0.0.1:9002");
    let err = Config::resolve(layers(|l| {
        l.node_id = Some(3);
        l.initial_cluster = Some("1=127.0.0.1:9001".into());
    }))
    .unwrap_err();
    assert!(err.contains("does not list this node"), "{err}");
    for bad in ["1", "x=a:1", "1=a:1,1=b:2", "1=nohost", ""] {
        assert!(parse_initial_cluster(bad).is_err(), "{bad}");
    }
}

#[test]
fn non_loopback_needs_secret_or_insecure() {
    let public = |l: &mut Settings| {
        l.listen = Some("0.0.0.0:8080".into());
        l.advertise = Some("10.0.0.1:8080".into());
    };
    assert!(Config::resolve(layers(public)).unwrap_err().contains("--secret"));
    let err = Config::resolve(layers(|l| {
        public(l);
        l.secret = Some("s".into());
    }))
    .unwrap_err();
    assert!(err.contains("--tls-cert"), "a secret alone is sent in clear: {err}");
    assert!(Config::resolve(layers(|l| {
        public(l);
        l.secret = Some("s".into());
        l.tls_cert = Some("cert.pem".into());
        l.tls_key = Some("key.pem".into());
    }))
    .is_ok());
    assert!(Config::resolve(layers(|l| {
        public(l);
        l.insecure = Some(true);
    }))
    .is_ok());
}

#[test]
fn higher_layer_wins() {
    let flags = layers(|l| l.node_id = Some(3));
    let file = layers(|l| {
        l.node_id = Some(9);
        l.data_dir = Some("/x".into());
    });
    let merged = flags.over(file);
    assert_eq!(merged.node_id, Some(3));
    assert_eq!(merged.data_dir, Some(PathBuf::from("/x")));
}

#[test]
fn snowflake_layout_is_validated() {
    let config = Config::resolve(Settings::default()).unwrap();
    assert_eq!(config.snowflake.layout, SnowflakeLayout::LEAF);
    let err = Config::resolve(layers(|l| l.snowflake_worker_bits = Some(12))).unwrap_err();
    assert!(err.contains("63"), "{err}");
    let ok = Config::resolve(layers(|l| {
        l.snowflake_worker_bits = Some(8);
        l.snowflake_sequence_bits = Some(14);
    }));
    assert!(ok.is_ok());
    assert!(Config::resolve(layers(|l| l.worker_lease_ms = Some(5_000))).is_err());
}

#[test]
fn file_rejects_unknown_keys() {
    assert!(toml::from_str::<Settings>("node_id = 2\nbogus = 1").is_err());
    assert_eq!(toml::from_str::<Settings>("node_id = 2").unwrap().node_id, Some(2));
}

#[test]
fn secret_is_the_shorthand_for_peer_and_admin_and_role_flags_win() {
    let config = Config::resolve(layers(|l| l.secret = Some("s".into()))).unwrap();
    assert_eq!(config.credentials.peer.as_ref().map(|s| s.expose()), Some("s"));
    assert_eq!(config.credentials.admin.as_ref().map(|s| s.expose()), Some("s"));
    let config = Config::resolve(layers(|l| {
        l.secret = Some("s".into());
        l.admin_token = Some("a".into());
        l.client_token = Some(vec!["team:t:x,y".into(), "other:u".into()]);
    }))
    .unwrap();
    assert_eq!(config.credentials.peer.as_ref().map(|s| s.expose()), Some("s"));
    assert_eq!(config.credentials.admin.as_ref().map(|s| s.expose()), Some("a"));
    assert_eq!(config.credentials.clients.len(), 2);
    assert!(Config::resolve(layers(|l| l.client_token = Some(vec!["a:x".into(), "a:y".into()]))).is_err());
}

#[test]
fn secrets_come_from_files() {
    let dir = tempfile::tempdir().unwrap();
    let peer = dir.path().join("peer");
    std::fs::write(&peer, "from-file\n").unwrap();
    let clients = dir.path().join("clients");
    std::fs::write(&clients, "# teams\nteam:t:x\n\nother:u\n").unwrap();
    let config = Config::resolve(layers(|l| {
        l.peer_secret_file = Some(peer.clone());
        l.client_token_file = Some(clients.clone());
    }))
    .unwrap();
    assert_eq!(config.credentials.peer.as_ref().map(|s| s.expose()), Some("from-file"));
    assert_eq!(config.credentials.clients.len(), 2);
    assert!(Config::resolve(layers(|l| {
        l.peer_secret = Some("x".into());
        l.peer_secret_file = Some(peer.clone());
    }))
    .is_err());
    assert!(Config::resolve(layers(|l| l.admin_token_file = Some(dir.path().join("missing")))).is_err());
}

#[test]
fn tls_files_go_together() {
    assert!(Config::resolve(layers(|l| l.tls_cert = Some("c".into()))).is_err());
    assert!(Config::resolve(layers(|l| l.peer_ca = Some("c".into()))).is_err());
    let config = Config::resolve(layers(|l| {
        l.tls_cert = Some("c".into());
        l.tls_key = Some("k".into());
    }))
    .unwrap();
    assert!(config.tls.is_some());
}

#[test]
fn settings_never_show_a_secret() {
    let settings = layers(|l| {
        l.secret = Some("hunter2".into());
        l.client_token = Some(vec!["team:hunter3".into()]);
    });
    let shown = format!("{settings:?}");
    assert!(!shown.contains("hunter2") && !shown.contains("hunter3"), "{shown}");
    let file: Settings = toml::from_str("admin_token = \"hunter4\"\nclient_token = [\"a:b\"]").unwrap();
    assert_eq!(file.admin_token, Some("hunter4".into()));
}

#[test]
fn idle_buffers_drop_after_ten_minutes_and_a_hundred_tags_have_series_unless_set() {
    let config = Config::resolve(Settings::default()).unwrap();
    assert_eq!(config.segments.idle, Some(Duration::from_secs(600)));
    assert_eq!(config.metrics_tag_series, 100);
    let config = Config::resolve(layers(|l| {
        l.segment_idle_ms = Some(0);
        l.metrics_tag_series = Some(0);
    }))
    .unwrap();
    assert_eq!((config.segments.idle, config.metrics_tag_series), (None, 0), "0: never drop, no per-tag series");
    let file: Settings = toml::from_str("segment_idle_ms = 1500\nmetrics_tag_series = 7").unwrap();
    let config = Config::resolve(file).unwrap();
    assert_eq!((config.segments.idle, config.metrics_tag_series), (Some(Duration::from_millis(1500)), 7));
}

#[test]
fn an_empty_token_file_is_refused_unless_its_role_may_open() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::write(&empty, " \n\t\n").unwrap();
    let comments = dir.path().join("comments");
    std::fs::write(&comments, "# nobody yet\n").unwrap();
    let err = Config::resolve(layers(|l| l.admin_token_file = Some(empty.clone()))).unwrap_err();
    assert!(err.contains(&empty.display().to_string()) && !err.contains('\n'), "{err}");
    assert!(Config::resolve(layers(|l| l.client_token_file = Some(comments.clone()))).is_err());
    assert!(Config::resolve(layers(|l| l.admin_token = Some("  ".into()))).is_err());
    let open = Config::resolve(layers(|l| {
        l.admin_token_file = Some(empty.clone());
        l.client_token_file = Some(comments.clone());
        l.admin_open = Some(true);
        l.client_open = Some(true);
    }))
    .unwrap();
    assert!(open.credentials.is_empty());
    let err = Config::resolve(layers(|l| {
        l.listen = Some("0.0.0.0:8080".into());
        l.advertise = Some("10.0.0.1:8080".into());
        l.secret = Some("s".into());
        l.tls_cert = Some("c.pem".into());
        l.tls_key = Some("k.pem".into());
        l.admin_open = Some(true);
    }))
    .unwrap_err();
    assert!(err.contains("--admin-open"), "{err}");
    // A reload reads the same way, keeping the peer secret it is given.
    let source = CredentialSource::of(&layers(|l| l.admin_token_file = Some(empty.clone()))).unwrap();
    let failed = source.reread(None).unwrap_err();
    assert_eq!(failed.roles, ["admin"]);
}

#[test]
fn connections_have_timeouts_and_a_cap_unless_set() {
    let config = Config::resolve(Settings::default()).unwrap();
    assert_eq!(config.connections, ConnectionLimits::default());
    assert_eq!(config.connections.header_read_timeout, Duration::from_secs(10));
    let config = Config::resolve(layers(|l| {
        l.header_read_timeout_ms = Some(2000);
        l.idle_timeout_ms = Some(4000);
        l.max_connections = Some(5);
    }))
    .unwrap();
    assert_eq!(config.connections.idle_timeout, Duration::from_secs(4));
    assert!(Config::resolve(layers(|l| l.max_connections = Some(0))).is_err());
    // The share of one source address: a quarter of the places unless set (decided by
    // `connections::places_per_source` once the open-file limit is known); never 0.
    assert_eq!(config.connections.max_connections_per_source, None);
    let file: Settings = toml::from_str("max_connections_per_source = 7").unwrap();
    assert_eq!(Config::resolve(file).unwrap().connections.max_connections_per_source, Some(7));
    assert!(Config::resolve(layers(|l| l.max_connections_per_source = Some(0))).is_err());
}

#[test]
fn members_snapshot_at_different_indexes() {
    let intervals: Vec<u64> = (1..=5).map(super::snapshot_interval).collect();
    let distinct: std::collections::BTreeSet<u64> = intervals.iter().copied().collect();
    assert_eq!(distinct.len(), intervals.len(), "{intervals:?}");
    assert!(intervals.iter().all(|n| (1000..2000).contains(n)), "{intervals:?}");
    let config = Config::resolve(layers(|l| l.node_id = Some(2))).unwrap();
    let policy = config.raft_config().unwrap().snapshot_policy;
    assert_eq!(policy, openraft::SnapshotPolicy::LogsSinceLast(super::snapshot_interval(2)));
}
