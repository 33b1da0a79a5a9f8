//! TLS on the node's port and mutual TLS between peers (acceptance 1 and 2).
//!
//! Certificates come from throwaway CAs (`certs`); a node's certificate names it
//! `node-<ID>.leafraft`, which is what `/raft/*` checks against the node the request claims.

use std::collections::BTreeSet;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use leafraft_client::Client;
use reqwest::Method;

use crate::certs::write_atomically;
use crate::certs::Ca;
use crate::harness::client_with_ca;
use crate::harness::new_tag;
use crate::harness::tls_http;
use crate::harness::wait_until;
use crate::harness::ProcessCluster;

const TIMEOUT: Duration = Duration::from_secs(30);

/// Writes node certificates of `ca` for `ids` and the peer CA bundle `bundle` into the cluster's
/// TLS directory.
fn write_files(cluster: &ProcessCluster, ca: &Ca, ids: &[u64], bundle: &str) {
    let dir = cluster.tls_dir();
    for &id in ids {
        ca.node(id).write(&dir.join(format!("node{id}.pem")), &dir.join(format!("node{id}.key")));
    }
    write_atomically(&dir.join("ca.pem"), bundle);
}

/// The value of `series` in `id`'s `/metrics` (0 when absent).
async fn metric(cluster: &mut ProcessCluster, id: u64, series: &str) -> f64 {
    let (_, text) = cluster.get_text(id, "/metrics").await;
    text.lines().find_map(|line| line.strip_prefix(series).and_then(|rest| rest.trim().parse().ok())).unwrap_or(0.0)
}

/// Takes IDs from every node until told to stop, recording each ID and every error.
fn spawn_takers(
    url: Vec<String>,
    ca: Vec<u8>,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<(Vec<u64>, Vec<String>)> {
    tokio::spawn(async move {
        let client = Client::builder()
            .nodes(&url)
            .ca_pem(ca)
            .timeout(Duration::from_secs(15))
            .build()
            .expect("a client of the cluster");
        let (mut ids, mut errors) = (Vec::new(), Vec::new());
        while !stop.load(Ordering::Relaxed) {
            match client.segment_ids("order", 5).await {
                Ok(taken) => ids.extend(taken),
                Err(e) => errors.push(e.to_string()),
            }
            tokio::task::yield_now().await;
        }
        (ids, errors)
    })
}

/// Acceptance 1: three nodes with TLS and mutual TLS form and serve; the certificates rotate by
/// SIGHUP to a new CA (first added to the peer trust bundle, then used for the nodes'
/// certificates) and the leader is killed, while a client takes IDs without one error; no ID
/// is handed out twice.
#[tokio::test]
async fn a_mutual_tls_cluster_serves_survives_a_leader_kill_and_rotates_its_certificates() {
    let (old_ca, new_ca) = (Ca::new("leafraft old CA"), Ca::new("leafraft new CA"));
    let both = format!("{}{}", old_ca.pem(), new_ca.pem());
    let mut cluster = ProcessCluster::new().with_tls(true, both.as_bytes());
    for id in [1, 2, 3] {
        cluster.reserve(id);
    }
    write_files(&cluster, &old_ca, &[1, 2, 3], &old_ca.pem());
    let initial = cluster.initial_cluster(&[1, 2, 3]);
    for id in [1, 2, 3] {
        cluster.start_node(id, &["--initial-cluster", &initial]);
    }
    let leader = cluster.wait_leader(TIMEOUT).await;
    cluster.client(leader).create_tag(&new_tag("order", None, Some(100), None)).await.expect("create a tag");
    cluster.wait_tag_known(&[1, 2, 3], "order", TIMEOUT).await;
    let urls: Vec<String> = [1, 2, 3].into_iter().map(|id| cluster.url(id)).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let takers = spawn_takers(urls, both.clone().into_bytes(), stop.clone());

    // Rotation 1: trust the new CA next to the old one.
    let dir = cluster.tls_dir();
    write_atomically(&dir.join("ca.pem"), &both);
    reload_all(&mut cluster, 1.0).await;
    // Rotation 2: the nodes' certificates from the new CA.
    write_files(&cluster, &new_ca, &[1, 2, 3], &both);
    let only_new = tls_http(new_ca.pem().as_bytes());
    let only_old = tls_http(old_ca.pem().as_bytes());
    for id in [1, 2, 3] {
        cluster.signal(id, libc::SIGHUP);
        let url = format!("{}/healthz", cluster.url(id));
        wait_until(TIMEOUT, &format!("node {id} to serve the new CA's certificate"), || {
            let request = only_new.get(&url).send();
            async move { request.await.map(drop).map_err(|e| e.to_string()) }
        })
        .await;
        assert!(only_old.get(&url).send().await.is_err(), "node {id} no longer serves the old certificate");
    }

    // A leader kill: the others elect a new one over fresh connections with the new certificates.
    let leader = cluster.wait_leader(TIMEOUT).await;
    cluster.kill(leader);
    let new_leader = cluster.wait_leader(TIMEOUT).await;
    assert_ne!(new_leader, leader);
    cluster.restart(leader);
    cluster.wait_ready(leader, TIMEOUT).await;
    let client = cluster.client(leader);
    let restarted = wait_until(TIMEOUT, "the restarted node to serve IDs", || async {
        client.segment_ids("order", 5).await.map_err(|e| e.to_string())
    })
    .await;

    stop.store(true, Ordering::Relaxed);
    let (mut ids, errors) = takers.await.expect("the takers");
    ids.extend(restarted);
    assert!(
        errors.is_empty(),
        "{} errors while rotating and failing over: {:?}",
        errors.len(),
        &errors[..errors.len().min(5)]
    );
    let unique: BTreeSet<u64> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "an ID was handed out twice");
    assert!(ids.len() > 100, "only {} IDs taken", ids.len());
}

/// SIGHUPs every node and waits until each counted `reloads` successful reloads.
async fn reload_all(cluster: &mut ProcessCluster, reloads: f64) {
    for id in [1, 2, 3] {
        cluster.signal(id, libc::SIGHUP);
    }
    for id in [1, 2, 3] {
        let series = r#"leafraft_reloads_total{what="tls",result="ok"}"#;
        let url = cluster.url(id);
        let http = tls_http(cluster_ca(cluster).as_bytes());
        wait_until(TIMEOUT, &format!("node {id} to reload its certificates"), || {
            let (http, url) = (http.clone(), url.clone());
            async move {
                let text = http.get(format!("{url}/metrics")).send().await.map_err(|e| e.to_string())?;
                let text = text.text().await.map_err(|e| e.to_string())?;
                let count: f64 = text
                    .lines()
                    .find_map(|line| line.strip_prefix(series).and_then(|rest| rest.trim().parse().ok()))
                    .unwrap_or(0.0);
                (count >= reloads).then_some(()).ok_or(format!("{count} reloads"))
            }
        })
        .await;
    }
}

fn cluster_ca(cluster: &ProcessCluster) -> String {
    std::fs::read_to_string(cluster.tls_dir().join("ca.pem")).expect("the CA bundle")
}

/// Acceptance 2: with `--peer-ca`, a would-be peer whose certificate comes from another CA cannot
/// even connect, and one whose certificate (from the right CA) names another member than the one
/// its request claims gets 403 on append, vote and forward; no certificate is 401. Each refusal
/// is logged and counted; the cluster keeps working.
#[tokio::test]
async fn a_peer_with_a_foreign_or_mismatched_certificate_cannot_append_vote_or_forward() {
    let (ca, rogue_ca) = (Ca::new("leafraft CA"), Ca::new("rogue CA"));
    let mut cluster = ProcessCluster::new().with_tls(true, ca.pem().as_bytes());
    for id in [1, 2, 3] {
        cluster.reserve(id);
    }
    write_files(&cluster, &ca, &[1, 2, 3], &ca.pem());
    let initial = cluster.initial_cluster(&[1, 2, 3]);
    for id in [1, 2, 3] {
        cluster.start_node(id, &["--initial-cluster", &initial]);
    }
    let leader = cluster.wait_leader(TIMEOUT).await;
    let target = [1, 2, 3].into_iter().find(|&id| id != leader).expect("a follower");
    let claimed = [1, 2, 3].into_iter().find(|&id| id != target).expect("another member");
    let status = cluster.status(target).await.expect("status");
    let headers = [
        ("x-leafraft-cluster-id", "0000000000000000".to_string()),
        ("x-leafraft-node-id", claimed.to_string()),
        ("x-leafraft-incarnation", "0000000000000001".to_string()),
    ];
    let with_identity = |identity: Option<&crate::certs::Issued>| {
        let mut builder = reqwest::Client::builder().tls_built_in_root_certs(false).timeout(Duration::from_secs(10));
        for certificate in reqwest::Certificate::from_pem_bundle(ca.pem().as_bytes()).expect("CA") {
            builder = builder.add_root_certificate(certificate);
        }
        if let Some(issued) = identity {
            builder =
                builder.identity(reqwest::Identity::from_pem(issued.identity_pem().as_bytes()).expect("identity"));
        }
        builder.build().expect("a client")
    };
    let foreign = with_identity(Some(&rogue_ca.node(claimed)));
    let third = [1, 2, 3].into_iter().find(|&id| id != target && id != claimed).expect("a third member");
    let impostor = with_identity(Some(&ca.node(third)));
    let anonymous = with_identity(None);
    let url = cluster.url(target);
    for path in ["/raft/append", "/raft/vote", "/raft/forward"] {
        let send = |client: &reqwest::Client| {
            let mut request = client.post(format!("{url}{path}")).body(vec![0u8; 8]);
            for (name, value) in &headers {
                request = request.header(*name, value);
            }
            request.send()
        };
        assert!(send(&foreign).await.is_err(), "{path}: a certificate of another CA is refused in the handshake");
        let answer = send(&impostor).await.expect("an answer");
        assert_eq!(answer.status().as_u16(), 403, "{path}: a certificate naming another member");
        let body: serde_json::Value = answer.json().await.expect("JSON");
        assert_eq!(body["error"]["code"], "FORBIDDEN", "{body}");
        let answer = send(&anonymous).await.expect("an answer");
        assert_eq!(answer.status().as_u16(), 401, "{path}: no client certificate");
    }

    let mismatch = r#"leafraft_auth_refusals_total{route="/raft/append",reason="certificate_mismatch"}"#;
    assert!(metric(&mut cluster, target, mismatch).await >= 1.0, "{mismatch}");
    let handshake = r#"leafraft_tls_handshake_failures_total{reason="certificate"}"#;
    assert!(metric(&mut cluster, target, handshake).await >= 3.0, "{handshake}");
    let log = cluster.log(target);
    assert!(log.contains("refused a request"), "{log}");
    assert!(log.contains("refused a TLS client certificate"), "{log}");

    // The members still agree and serve.
    let (status_code, _) = cluster.request(leader, Method::POST, "/v1/tags", Some(r#"{"tag":"t"}"#), None).await;
    assert_eq!(status_code.as_u16(), 201);
    let after = cluster.status(target).await.expect("status");
    assert_eq!(after.voters, status.voters);
    let client = client_with_ca(&cluster.url(target), None, Some(ca.pem().as_bytes()));
    // The follower serves the tag once it has applied its creation.
    let ids = wait_until(TIMEOUT, "the follower to serve IDs over TLS", || async {
        client.segment_ids("t", 10).await.map_err(|e| e.to_string())
    })
    .await;
    assert_eq!(ids.iter().collect::<BTreeSet<_>>().len(), 10);
}

/// A node joins a TLS + mutual TLS cluster with `--join`: it asks the seed over https with the
/// admin token, the leader greets it over https with its own client certificate, and it ends a
/// voter that serves IDs.
#[tokio::test]
async fn a_node_joins_a_mutual_tls_cluster_with_the_admin_token() {
    let ca = Ca::new("leafraft CA");
    let mut cluster = ProcessCluster::new().with_tls(true, ca.pem().as_bytes());
    for id in [1, 2] {
        cluster.reserve(id);
    }
    write_files(&cluster, &ca, &[1, 2], &ca.pem());
    let initial = cluster.initial_cluster(&[1]);
    cluster.start_node(1, &["--initial-cluster", &initial, "--admin-token", "adm1n"]);
    cluster.wait_leader(TIMEOUT).await;
    let seed = cluster.addr(1);
    cluster.start_node(2, &["--join", &seed, "--admin-token", "adm1n"]);
    cluster
        .wait_status(1, Duration::from_secs(60), "node 2 to join as a voter", |s| match s.voters.as_slice() {
            [1, 2] => Ok(()),
            other => Err(format!("voters {other:?}")),
        })
        .await;
    let client = cluster.client(2);
    let answer = client.create_tag(&new_tag("joined", None, None, None)).await;
    assert!(answer.is_err(), "a write without the admin token is refused");
    let admin = client_with_ca(&cluster.url(2), Some("adm1n".into()), Some(ca.pem().as_bytes()));
    admin.create_tag(&new_tag("joined", None, None, None)).await.expect("a write with the admin token, forwarded");
    let ids = wait_until(TIMEOUT, "node 2 to serve IDs", || async {
        client.segment_ids("joined", 10).await.map_err(|e| e.to_string())
    })
    .await;
    assert_eq!(ids.iter().collect::<BTreeSet<_>>().len(), 10);
}

/// The sending side: an answer must come from a certificate naming the member the request was
/// for. Node 3's certificate (from the right CA, valid for its address) names node 1: nodes 1 and 2
/// refuse to form a cluster with it, each with one line naming the reason, as for any identity
/// refusal at formation.
#[tokio::test]
async fn members_refuse_to_form_with_a_member_whose_certificate_names_another() {
    let ca = Ca::new("leafraft CA");
    let mut cluster = ProcessCluster::new().with_tls(true, ca.pem().as_bytes());
    for id in [1, 2, 3] {
        cluster.reserve(id);
    }
    write_files(&cluster, &ca, &[1, 2], &ca.pem());
    let dir = cluster.tls_dir();
    ca.issue(&["node-1.leafraft".to_string(), "127.0.0.1".to_string()])
        .write(&dir.join("node3.pem"), &dir.join("node3.key"));
    let initial = cluster.initial_cluster(&[1, 2, 3]);
    for id in [1, 2, 3] {
        cluster.start_node(id, &["--initial-cluster", &initial]);
    }
    for id in [1, 2] {
        let status = cluster.wait_exit(id, TIMEOUT).await;
        let log = cluster.log(id);
        assert_eq!(status.code(), Some(1), "node {id}: {log}");
        assert!(log.contains("the peer's certificate does not name node 3"), "node {id}: {log}");
    }
}
