//! The cluster secret (`docs/api.md`): writes and `/raft/*` need `Authorization: Bearer <secret>`,
//! reads stay open; a node on a non-loopback address refuses to start without a secret.

use std::time::Duration;

use reqwest::Method;

use crate::harness::assert_error;
use crate::harness::new_tag;
use crate::harness::ProcessCluster;

const TIMEOUT: Duration = Duration::from_secs(20);
const SECRET: &str = "s3cret";

/// With `--secret s3cret` on every node: tag writes without `Authorization` or with the wrong
/// secret get 401 UNAUTHORIZED and change nothing, with `Bearer s3cret` they succeed (also through
/// a follower, whose forward to the leader carries the secret); `/raft/vote` and membership
/// changes without it get 401; GET reads stay open.
#[tokio::test]
async fn writes_and_raft_rpcs_need_the_secret_and_reads_stay_open() {
    let mut cluster = ProcessCluster::new().with_secret(SECRET).start_members(&[1, 2, 3]);
    let leader = cluster.wait_leader(TIMEOUT).await;
    let follower = [1, 2, 3].into_iter().find(|&id| id != leader).expect("a follower");
    let body = Some(r#"{"tag":"order"}"#);

    for id in [leader, follower] {
        let answer = cluster.request(id, Method::POST, "/v1/tags", body, None).await;
        assert_error(&answer, 401, "UNAUTHORIZED", "create without Authorization");
        let answer = cluster.request(id, Method::POST, "/v1/tags", body, Some("wrong")).await;
        assert_error(&answer, 401, "UNAUTHORIZED", "create with the wrong secret");
        let answer = cluster.request(id, Method::POST, "/v1/tags", body, Some("s3cret-and-more")).await;
        assert_error(&answer, 401, "UNAUTHORIZED", "create with a longer secret");
    }
    let (status, tags) = cluster.request(leader, Method::GET, "/v1/tags?consistent=true", None, None).await;
    assert_eq!((status.as_u16(), tags["tags"].as_array().map(Vec::len)), (200, Some(0)), "{tags}");

    let (status, created) = cluster.request(follower, Method::POST, "/v1/tags", body, Some(SECRET)).await;
    assert_eq!(status.as_u16(), 201, "create with the secret through a follower: {created}");
    let answer = cluster.request(leader, Method::PATCH, "/v1/tags/order", Some(r#"{"max_id":99}"#), None).await;
    assert_error(&answer, 401, "UNAUTHORIZED", "update without Authorization");
    let answer = cluster.request(leader, Method::DELETE, &format!("/v1/cluster/members/{follower}"), None, None).await;
    assert_error(&answer, 401, "UNAUTHORIZED", "remove a member without Authorization");
    let answer = cluster.request(leader, Method::POST, "/v1/cluster/voters", Some(r#"{"node_id":9}"#), None).await;
    assert_error(&answer, 401, "UNAUTHORIZED", "promote without Authorization");
    for path in ["/raft/vote", "/raft/append", "/raft/forward"] {
        let answer = cluster.request(follower, Method::POST, path, Some("x"), None).await;
        assert_error(&answer, 401, "UNAUTHORIZED", path);
        let answer = cluster.request(follower, Method::POST, path, Some("x"), Some("wrong")).await;
        assert_error(&answer, 401, "UNAUTHORIZED", path);
    }

    // Reads stay open, and the rejected update changed nothing. (A new cluster reports ready once
    // its version has risen to the founders' release, a moment after it first serves.)
    for id in [1, 2, 3] {
        cluster.wait_ready(id, TIMEOUT).await;
        for path in ["/v1/tags/order?consistent=true", "/v1/tags", "/v1/cluster", "/healthz", "/readyz"] {
            let (status, body) = cluster.request(id, Method::GET, path, None, None).await;
            assert_eq!(status.as_u16(), 200, "GET {path} on node {id} without a secret: {body}");
        }
    }
    let (_, order) = cluster.request(leader, Method::GET, "/v1/tags/order?consistent=true", None, None).await;
    assert_eq!(order["max_id"], "1", "{order}");
    let status = cluster.status(leader).await.unwrap();
    assert_eq!(status.voters, [1, 2, 3], "{status:?}");
}

/// `--listen 0.0.0.0:PORT --advertise 127.0.0.1:PORT` without `--secret` is a usage error (exit
/// status 2, the message names `--secret`); with `--insecure` the same node starts and serves.
#[tokio::test]
async fn a_non_loopback_listener_needs_a_secret_or_insecure() {
    let mut cluster = ProcessCluster::new();
    let port = cluster.port(1);
    let listen = format!("0.0.0.0:{port}");
    let advertise = format!("127.0.0.1:{port}");

    cluster.start_node(1, &["--listen", &listen, "--advertise", &advertise]);
    let status = cluster.wait_exit(1, Duration::from_secs(10)).await;
    let log = cluster.log(1);
    assert_eq!(status.code(), Some(2), "a usage error; log:\n{log}");
    assert_eq!(log.lines().count(), 1, "one line on stderr: {log}");
    assert!(log.starts_with("error: ") && log.contains("--secret"), "{log}");

    cluster.start_node(1, &["--listen", &listen, "--advertise", &advertise, "--insecure"]);
    assert!(cluster.is_running(1));
    let client = crate::harness::client_of(&advertise, None);
    crate::harness::wait_until(TIMEOUT, "the insecure node to be ready", || async {
        client.ready().await.map_err(|e| e.to_string())
    })
    .await;
    client
        .create_tag(&new_tag("open", None, None, None))
        .await
        .expect("an insecure node takes writes without a secret");
}
