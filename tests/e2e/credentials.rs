//! Credentials by role (`docs/semantics.md#credentials`): the peer secret for `/raft/*`, the admin token for writes,
//! client tokens (optionally scoped to tags) for IDs; 401 without a known credential, 403 with one
//! of another role or tag, Leaf's body on Leaf's paths; counted in `/metrics`.

use std::collections::BTreeSet;
use std::time::Duration;

use reqwest::Method;

use crate::harness::assert_error;
use crate::harness::run_binary;
use crate::harness::ProcessCluster;
use crate::snowflake_ids::wait_snowflake_ready;

const TIMEOUT: Duration = Duration::from_secs(20);
const PEER: &str = "peer-s3cret";
const ADMIN: &str = "admin-t0ken";
const ALPHA: &str = "alpha-t0ken";
const ANY: &str = "any-t0ken";

/// GETs `path` from `url` with `token` until the answer is not 503 `SEGMENTS_NOT_READY`, and
/// answers it: a node's first claim of a tag may take longer than its segment wait (100 ms) on a
/// slow machine, and that documented 503 is not what these tests are about.
async fn ids_when_ready(url: &str, path: &str, token: &str) -> (u16, serde_json::Value) {
    let http = reqwest::Client::new();
    crate::harness::wait_until(TIMEOUT, &format!("{path} to be served"), || {
        let request = http.get(format!("{url}{path}")).bearer_auth(token).send();
        async move {
            let response = request.await.map_err(|e| e.to_string())?;
            let status = response.status().as_u16();
            let body: serde_json::Value = response.json().await.map_err(|e| e.to_string())?;
            match body.pointer("/error/code").and_then(serde_json::Value::as_str) {
                Some("SEGMENTS_NOT_READY") => Err(format!("HTTP {status}: {body}")),
                _ => Ok((status, body)),
            }
        }
    })
    .await
}

/// Nodes 1 and 2 get their credentials as flags, node 3 from `LEAFRAFT_*` variables and files.
fn start() -> ProcessCluster {
    let mut cluster = ProcessCluster::new();
    let peer_file = cluster.temp_path("peer-secret");
    let clients_file = cluster.temp_path("client-tokens");
    std::fs::write(&peer_file, format!("{PEER}\n")).expect("write the peer secret");
    std::fs::write(&clients_file, format!("# teams\nteam-alpha:{ALPHA}:alpha\nanyone:{ANY}\n")).expect("write tokens");
    let env = vec![
        ("LEAFRAFT_PEER_SECRET_FILE".to_string(), peer_file.display().to_string()),
        ("LEAFRAFT_ADMIN_TOKEN".to_string(), ADMIN.to_string()),
        ("LEAFRAFT_CLIENT_TOKEN_FILE".to_string(), clients_file.display().to_string()),
    ];
    cluster.set_env(3, env);
    for id in [1, 2, 3] {
        cluster.reserve(id);
    }
    let initial = cluster.initial_cluster(&[1, 2, 3]);
    let alpha = format!("team-alpha:{ALPHA}:alpha");
    let any = format!("anyone:{ANY}");
    for id in [1, 2] {
        let args = ["--initial-cluster", &initial, "--peer-secret", PEER, "--admin-token", ADMIN];
        let mut args: Vec<&str> = args.to_vec();
        args.extend(["--client-token", &alpha, "--client-token", &any]);
        cluster.start_node(id, &args);
    }
    cluster.start_node(3, &["--initial-cluster", &initial]);
    cluster
}

/// Each role's token works for its routes only; a scoped client token gets 403 on another tag
/// (also on Leaf's path, with Leaf's body); every ID handed out is unique; refusals are counted.
#[tokio::test]
async fn each_roles_token_works_only_for_its_routes() {
    let mut cluster = start();
    let leader = cluster.wait_leader(TIMEOUT).await;
    let follower = [1, 2, 3].into_iter().find(|&id| id != leader).expect("a follower");

    // Admin routes: the admin token, through a follower too (its forward carries the peer secret).
    for (tag, node) in [("alpha", follower), ("beta", 3)] {
        let body = format!(r#"{{"tag":"{tag}"}}"#);
        let answer = cluster.request(node, Method::POST, "/v1/tags", Some(&body), None).await;
        assert_error(&answer, 401, "UNAUTHORIZED", "create without a token");
        let answer = cluster.request(node, Method::POST, "/v1/tags", Some(&body), Some("nobody")).await;
        assert_error(&answer, 401, "UNAUTHORIZED", "create with an unknown token");
        for other in [PEER, ALPHA, ANY] {
            let answer = cluster.request(node, Method::POST, "/v1/tags", Some(&body), Some(other)).await;
            assert_error(&answer, 403, "FORBIDDEN", "create with a token of another role");
        }
        let (status, created) = cluster.request(node, Method::POST, "/v1/tags", Some(&body), Some(ADMIN)).await;
        assert_eq!(status.as_u16(), 201, "create {tag} with the admin token on node {node}: {created}");
    }
    let answer = cluster.request(leader, Method::GET, "/v1/backup", None, Some(ALPHA)).await;
    assert_error(&answer, 403, "FORBIDDEN", "a backup with a client token");

    // Peer routes: the peer secret only.
    for (token, status, code) in
        [(None, 401, "UNAUTHORIZED"), (Some(ADMIN), 403, "FORBIDDEN"), (Some(ANY), 403, "FORBIDDEN")]
    {
        for path in ["/raft/vote", "/raft/append", "/raft/forward"] {
            let answer = cluster.request(follower, Method::POST, path, Some("x"), token).await;
            assert_error(&answer, status, code, path);
        }
    }
    let (status, _) = cluster.request(follower, Method::POST, "/raft/vote", Some("x"), Some(PEER)).await;
    assert_eq!(status.as_u16(), 400, "the peer secret passes (the body is not a vote)");

    // Client routes, once every node has applied both tags.
    for node in [1, 2, 3] {
        let url = cluster.url(node);
        crate::harness::wait_until(TIMEOUT, &format!("node {node} to know both tags"), || {
            let requests = ["alpha", "beta"].map(|tag| reqwest::get(format!("{url}/v1/tags/{tag}")));
            async move {
                for request in requests {
                    let status = request.await.map_err(|e| e.to_string())?.status().as_u16();
                    if status != 200 {
                        return Err(format!("HTTP {status}"));
                    }
                }
                Ok(())
            }
        })
        .await;
    }
    let mut ids = BTreeSet::new();
    for node in [1, 2, 3] {
        let answer = cluster.request(node, Method::GET, "/v1/segment/alpha?count=5", None, None).await;
        assert_error(&answer, 401, "UNAUTHORIZED", "IDs without a token");
        let answer = cluster.request(node, Method::GET, "/v1/segment/beta?count=5", None, Some(ALPHA)).await;
        assert_error(&answer, 403, "FORBIDDEN", "IDs of another team's tag");
        let answer = cluster.request(node, Method::GET, "/v1/segment/alpha", None, Some(PEER)).await;
        assert_error(&answer, 403, "FORBIDDEN", "IDs with the peer secret");
        for (tag, token) in [("alpha", ALPHA), ("alpha", ANY), ("beta", ANY), ("beta", ADMIN)] {
            let (status, body) = ids_when_ready(&cluster.url(node), &format!("/v1/segment/{tag}?count=5"), token).await;
            assert_eq!(status, 200, "{tag} on node {node}: {body}");
            for id in body["ids"].as_array().expect("ids") {
                assert!(ids.insert(format!("{tag}:{id}")), "{tag} ID {id} handed out twice");
            }
        }
        // A node holds a worker only once its registration has committed: wait for that, so a
        // slow machine does not turn the documented 503 WORKER_UNAVAILABLE into a failure here.
        wait_snowflake_ready(&mut cluster, node, TIMEOUT).await;
        let (status, body) = cluster.request(node, Method::GET, "/v1/snowflake?count=3", None, Some(ALPHA)).await;
        assert_eq!(status.as_u16(), 200, "snowflake with a scoped token: {body}");

        // Leaf's path: Leaf's body, with HTTP 403 for another tag and 401 without a token.
        let (status, text) = cluster.get_text_as(node, "/api/segment/get/beta", Some(ALPHA)).await;
        assert_eq!((status.as_u16(), text.as_str()), (403, "Result{id=-4, status=EXCEPTION}"));
        let (status, text) = cluster.get_text_as(node, "/api/segment/get/alpha", None).await;
        assert_eq!((status.as_u16(), text.as_str()), (401, "Result{id=-4, status=EXCEPTION}"));
        let (status, text) = cluster.get_text_as(node, "/api/segment/get/alpha", Some(ALPHA)).await;
        assert_eq!(status.as_u16(), 200, "{text}");
        assert!(ids.insert(format!("alpha:\"{text}\"")), "alpha ID {text} handed out twice");
    }

    // Reads of state stay open.
    for path in ["/v1/tags", "/v1/cluster", "/healthz"] {
        let (status, body) = cluster.request(follower, Method::GET, path, None, None).await;
        assert_eq!(status.as_u16(), 200, "GET {path}: {body}");
    }

    // Counted by route and reason (node 3 saw every kind of refusal above).
    let metrics = cluster.get_text(3, "/metrics").await.1;
    for series in [
        r#"leafraft_auth_refusals_total{route="/v1/segment/{tag}",reason="tag"}"#,
        r#"leafraft_auth_refusals_total{route="/v1/tags",reason="role"}"#,
        r#"leafraft_auth_refusals_total{route="/v1/segment/{tag}",reason="missing"}"#,
    ] {
        assert!(metrics.contains(series), "{series} missing from /metrics:\n{metrics}");
    }

    let url = cluster.url(leader);
    // The CLI takes --token; node 1 warned about the secrets on its command line, never showing them.
    let ok = run_binary(&["id", "segment", "alpha", "-n", "3", "--server", &url, "--token", ALPHA], TIMEOUT).await;
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    for line in String::from_utf8_lossy(&ok.stdout).lines() {
        assert!(ids.insert(format!("alpha:\"{line}\"")), "alpha ID {line} handed out twice");
    }
    let refused = run_binary(&["id", "segment", "beta", "--server", &url, "--token", ALPHA], TIMEOUT).await;
    assert_eq!(refused.status.code(), Some(1), "{}", String::from_utf8_lossy(&refused.stderr));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("FORBIDDEN"));
    let log = cluster.log(1);
    assert!(log.contains("--peer-secret was given on the command line"), "{log}");
    assert!(log.contains("--client-token was given on the command line"), "{log}");
    for id in [1, 2, 3] {
        let log = cluster.log(id);
        for secret in [PEER, ADMIN, ALPHA, ANY] {
            assert!(!log.contains(secret), "node {id} logged a secret");
        }
        assert!(id != 3 || !log.contains("given on the command line"), "node 3 had no secret flags: {log}");
    }
}

/// Tokens rotate without a restart: the admin and client token files are read again on SIGHUP
/// (or when they change); the old token stops working, the new one works, and the node never
/// stopped serving.
#[tokio::test]
async fn token_files_are_read_again_on_sighup() {
    let mut cluster = ProcessCluster::new();
    let (admin_file, clients_file) = (cluster.temp_path("admin"), cluster.temp_path("clients"));
    crate::certs::write_atomically(&admin_file, "old-admin\n");
    crate::certs::write_atomically(&clients_file, "team:old-client:alpha\n");
    let (admin, clients) = (admin_file.display().to_string(), clients_file.display().to_string());
    cluster.start_node(1, &["--admin-token-file", &admin, "--client-token-file", &clients]);
    cluster.wait_ready(1, TIMEOUT).await;
    let (status, _) = cluster.request(1, Method::POST, "/v1/tags", Some(r#"{"tag":"alpha"}"#), Some("old-admin")).await;
    assert_eq!(status.as_u16(), 201);
    let (status, body) = ids_when_ready(&cluster.url(1), "/v1/segment/alpha", "old-client").await;
    assert_eq!(status, 200, "{body}");

    crate::certs::write_atomically(&admin_file, "new-admin\n");
    crate::certs::write_atomically(&clients_file, "team:new-client:alpha\n");
    cluster.signal(1, libc::SIGHUP);
    let url = cluster.url(1);
    crate::harness::wait_until(TIMEOUT, "the new client token to work", || {
        let request = reqwest::Client::new().get(format!("{url}/v1/segment/alpha")).bearer_auth("new-client").send();
        async move {
            let status = request.await.map_err(|e| e.to_string())?.status().as_u16();
            (status == 200).then_some(()).ok_or(format!("HTTP {status}"))
        }
    })
    .await;
    let answer = cluster.request(1, Method::GET, "/v1/segment/alpha", None, Some("old-client")).await;
    assert_error(&answer, 401, "UNAUTHORIZED", "the old client token");
    let answer = cluster.request(1, Method::POST, "/v1/tags", Some(r#"{"tag":"beta"}"#), Some("old-admin")).await;
    assert_error(&answer, 401, "UNAUTHORIZED", "the old admin token");
    let (status, _) = cluster.request(1, Method::POST, "/v1/tags", Some(r#"{"tag":"beta"}"#), Some("new-admin")).await;
    assert_eq!(status.as_u16(), 201);
    assert!(cluster.is_running(1), "SIGHUP does not stop a node");
    assert!(cluster.log(1).contains("credentials reloaded"));
}
