//! Scrambled tags (docs/api.md "Scrambled tags"): a tag created with `"scramble": true` serves
//! each sequence number's image under a keyed permutation of its ID space. The images are unique
//! (the one rule, seen from clients), show no order, are refused as ranges, and only an admin
//! turns one back into its sequence number; a backup carries the key, so a recovered cluster
//! serves no image it served before.

use std::collections::BTreeSet;
use std::time::Duration;
use std::time::Instant;

use reqwest::Method;
use reqwest::StatusCode;
use serde_json::Value;

use crate::harness::run_binary;
use crate::harness::ProcessCluster;

const TIMEOUT: Duration = Duration::from_secs(30);
const SECRET: &str = "scramble-secret";

/// The IDs of one `/v1/segment/{tag}` answer, as served (decimal strings or short forms). A
/// request refused while the tag's first claim commits (`SEGMENTS_NOT_READY`) handed out nothing
/// and is asked again, within the deadline.
async fn take(cluster: &mut ProcessCluster, id: u64, path: &str) -> Vec<String> {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let (status, body) = cluster.request(id, Method::GET, path, None, None).await;
        if status == StatusCode::OK {
            let ids = body["ids"].as_array().expect("ids");
            return ids.iter().map(|id| id.as_str().expect("a string").to_string()).collect();
        }
        assert!(status == StatusCode::SERVICE_UNAVAILABLE && Instant::now() < deadline, "{path} on node {id}: {body}");
    }
}

/// The sequence number behind `id`, asked as an admin.
async fn unscramble(cluster: &mut ProcessCluster, tag: &str, id: &str, format: &str) -> u64 {
    let path = format!("/v1/tags/{tag}/unscramble/{id}?format={format}");
    let (status, body) = cluster.request(1, Method::GET, &path, None, Some(SECRET)).await;
    assert_eq!(status, StatusCode::OK, "{path}: {body}");
    body["sequence"].as_str().expect("a sequence").parse().expect("a number")
}

#[tokio::test]
async fn a_scrambled_tag_serves_unique_unordered_ids_that_only_an_admin_unscrambles() {
    let mut cluster = ProcessCluster::new().with_secret(SECRET).start_members(&[1, 2, 3]);
    cluster.wait_leader(TIMEOUT).await;
    // Ready means at the founders' release: scrambled tags need 0.3.0.
    for id in 1..=3 {
        cluster.wait_ready(id, TIMEOUT).await;
    }
    let create = r#"{"tag":"coupons","scramble":true,"step":100}"#;
    let (status, body) = cluster.request(1, Method::POST, "/v1/tags", Some(create), Some(SECRET)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["scramble"], Value::Bool(true), "{body}");
    let monotonic = r#"{"tag":"ticks","scramble":true,"mode":"monotonic"}"#;
    let (status, body) = cluster.request(1, Method::POST, "/v1/tags", Some(monotonic), Some(SECRET)).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::BAD_REQUEST, Some("INVALID_ARGUMENT")), "{body}");
    cluster.wait_tag_known(&[1, 2, 3], "coupons", TIMEOUT).await;

    // Through every node, in batches and one at a time on Leaf's path.
    let mut served: Vec<u64> = Vec::new();
    for round in 0..4 {
        for id in 1..=3 {
            let ids = take(&mut cluster, id, &format!("/v1/segment/coupons?count={}", 37 + round)).await;
            served.extend(ids.iter().map(|id| id.parse::<u64>().expect("decimal")));
            let (status, text) = cluster.get_text(id, "/api/segment/get/coupons").await;
            assert_eq!(status, StatusCode::OK, "{text}");
            served.push(text.trim().parse().expect("Leaf's path answers a decimal ID"));
        }
    }
    let unique: BTreeSet<u64> = served.iter().copied().collect();
    assert_eq!(unique.len(), served.len(), "a scrambled ID was served twice");
    assert!(served.iter().all(|&id| (1..i64::MAX as u64).contains(&id)), "an ID outside the tag's space");
    // In order, about half of neighbouring pairs rise; sequence numbers would all rise.
    let rising = served.windows(2).filter(|pair| pair[0] < pair[1]).count();
    assert!(rising < served.len() * 3 / 4, "{rising} of {} neighbouring IDs rise: {served:?}", served.len());

    // Only an admin unscrambles; each ID maps back to a distinct sequence number the tag handed out.
    let first = served[0].to_string();
    let (status, _) =
        cluster.request(1, Method::GET, &format!("/v1/tags/coupons/unscramble/{first}"), None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (_, tag) = cluster.request(1, Method::GET, "/v1/tags/coupons?consistent=true", None, None).await;
    assert_eq!(tag["scramble"], Value::Bool(true), "{tag}");
    let max_id: u64 = tag["max_id"].as_str().expect("max_id").parse().expect("a number");
    let mut sequences = BTreeSet::new();
    for id in &served {
        let sequence = unscramble(&mut cluster, "coupons", &id.to_string(), "long").await;
        assert!((1..max_id).contains(&sequence), "{id} unscrambles to {sequence}, max_id is {max_id}");
        sequences.insert(sequence);
    }
    assert_eq!(sequences.len(), served.len());

    // The Rust client's handle, which caches ranges, serves a scrambled tag from lists instead:
    // unique IDs, none served before, each a sequence number the tag handed out.
    let urls: Vec<String> = (1..=3).map(|id| cluster.url(id)).collect();
    let client = leafraft_client::Client::builder().nodes(&urls).build().expect("client");
    let handle = client.segment("coupons");
    let mut cached = BTreeSet::new();
    for _ in 0..250 {
        let id = handle.next_id().await.expect("a scrambled ID through the client");
        assert!(cached.insert(id) && !unique.contains(&id), "the client handed out {id} twice");
    }
    let batch = handle.next_ids(120).await.expect("a batch through the client");
    assert!(batch.iter().all(|id| cached.insert(*id) && !unique.contains(id)), "a batch repeated an ID");
    for id in cached.iter().step_by(37) {
        let sequence = unscramble(&mut cluster, "coupons", &id.to_string(), "long").await;
        assert!(!sequences.contains(&sequence), "{id} unscrambles to a sequence served before");
    }
    client.close();

    // The short form: fixed length, and it unscrambles like the decimal form.
    let short = take(&mut cluster, 2, "/v1/segment/coupons?count=5&format=short").await;
    assert_eq!(short.len(), 5);
    for id in &short {
        assert_eq!(id.len(), 13, "{id}");
        assert!(id.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_uppercase()), "{id}");
        let sequence = unscramble(&mut cluster, "coupons", id, "short").await;
        assert!(!sequences.contains(&sequence), "a short-form ID repeats an earlier one");
    }

    // A scrambled tag has no ranges, never becomes monotonic, and bad input is a 4xx.
    let refusals = [
        (Method::GET, "/v1/segment/coupons/ranges?count=3", None, StatusCode::CONFLICT, "MODE_MISMATCH"),
        (Method::PATCH, "/v1/tags/coupons", Some(r#"{"mode":"monotonic"}"#), StatusCode::CONFLICT, "MODE_MISMATCH"),
        (Method::GET, "/v1/segment/coupons?format=hex", None, StatusCode::BAD_REQUEST, "INVALID_ARGUMENT"),
        (Method::GET, "/v1/tags/coupons/unscramble/0", None, StatusCode::BAD_REQUEST, "INVALID_ARGUMENT"),
        (Method::GET, "/v1/tags/coupons/unscramble/x?format=short", None, StatusCode::BAD_REQUEST, "INVALID_ARGUMENT"),
        (Method::GET, "/v1/tags/missing/unscramble/7", None, StatusCode::NOT_FOUND, "TAG_NOT_FOUND"),
    ];
    for (method, path, body, expected_status, code) in refusals {
        let (status, answer) = cluster.request(1, method.clone(), path, body, Some(SECRET)).await;
        assert_eq!(
            (status, answer["error"]["code"].as_str()),
            (expected_status, Some(code)),
            "{method} {path}: {answer}"
        );
    }
    // A narrower ID space: shorter IDs, all inside it, and a max_id outside it is refused.
    let narrow = r#"{"tag":"narrow","scramble":true,"scramble_bits":32}"#;
    let (status, body) = cluster.request(1, Method::POST, "/v1/tags", Some(narrow), Some(SECRET)).await;
    assert_eq!((status, body["scramble_bits"].as_u64()), (StatusCode::CREATED, Some(32)), "{body}");
    cluster.wait_tag_known(&[1], "narrow", TIMEOUT).await;
    let ids = take(&mut cluster, 1, "/v1/segment/narrow?count=200").await;
    let ids: BTreeSet<u64> = ids.iter().map(|id| id.parse().expect("decimal")).collect();
    assert_eq!(ids.len(), 200);
    assert!(ids.iter().all(|&id| (1..u64::from(u32::MAX)).contains(&id)), "an ID outside 32 bits: {ids:?}");
    let short = take(&mut cluster, 1, "/v1/segment/narrow?count=3&format=short").await;
    assert!(short.iter().all(|id| id.len() == 7), "{short:?}");
    let outside = r#"{"tag":"outside","scramble":true,"scramble_bits":32,"max_id":"4294967295"}"#;
    for bad in
        [outside, r#"{"tag":"wide","scramble":true,"scramble_bits":64}"#, r#"{"tag":"loose","scramble_bits":32}"#]
    {
        let (status, body) = cluster.request(1, Method::POST, "/v1/tags", Some(bad), Some(SECRET)).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (StatusCode::BAD_REQUEST, Some("INVALID_ARGUMENT")),
            "{bad}: {body}"
        );
    }

    let (_, plain) = cluster.request(1, Method::POST, "/v1/tags", Some(r#"{"tag":"plain"}"#), Some(SECRET)).await;
    assert_eq!(plain.get("scramble"), None, "a plain tag shows no scramble field: {plain}");
    assert_eq!(plain.get("scramble_bits"), None, "{plain}");
    cluster.wait_tag_known(&[1], "plain", TIMEOUT).await;
    let (status, answer) = cluster.request(1, Method::GET, "/v1/tags/plain/unscramble/7", None, Some(SECRET)).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (StatusCode::CONFLICT, Some("MODE_MISMATCH")), "{answer}");
    let (status, answer) = cluster.request(1, Method::GET, "/v1/segment/plain?format=short", None, None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
}

/// `backup` then `recover --from`: the recovered cluster serves the tag through the same
/// permutation (the key travels in the backup), above everything served before the loss.
#[tokio::test]
async fn a_recovered_cluster_never_serves_a_scrambled_id_again() {
    let mut old = ProcessCluster::new().with_secret(SECRET).start_members(&[1]);
    old.wait_ready(1, TIMEOUT).await;
    let create = r#"{"tag":"coupons","scramble":true,"step":10}"#;
    let (status, body) = old.request(1, Method::POST, "/v1/tags", Some(create), Some(SECRET)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let mut before = take(&mut old, 1, "/v1/segment/coupons?count=25").await;
    let file = old.temp_path("scrambled.backup");
    let file_text = file.display().to_string();
    let url = old.url(1);
    let output = run_binary(&["backup", "--server", &url, "--secret", SECRET, "--out", &file_text], TIMEOUT).await;
    assert!(output.status.success(), "backup: {output:?}");
    // Served after the backup: the copy does not show these claims.
    before.extend(take(&mut old, 1, "/v1/segment/coupons?count=25").await);
    let highest_before = {
        let mut highest = 0;
        for id in &before {
            highest = highest.max(unscramble(&mut old, "coupons", id, "long").await);
        }
        highest
    };
    old.kill(1);

    let mut fresh = ProcessCluster::new().with_secret(SECRET);
    let dir = fresh.temp_path("node1-restored");
    let (dir_text, addr) = (dir.display().to_string(), fresh.addr(1));
    let output = run_binary(
        &["recover", "--data-dir", &dir_text, "--from", &file_text, "--node-id", "1", "--advertise", &addr],
        TIMEOUT,
    )
    .await;
    assert!(output.status.success(), "recover: {output:?}");
    fresh.set_data_dir(1, dir);
    fresh.start_node(1, &[]);
    fresh.wait_ready(1, TIMEOUT).await;
    let after = take(&mut fresh, 1, "/v1/segment/coupons?count=50").await;
    let old_ids: BTreeSet<&String> = before.iter().collect();
    for id in &after {
        assert!(!old_ids.contains(id), "the recovered cluster served {id} again");
        let sequence = unscramble(&mut fresh, "coupons", id, "long").await;
        assert!(sequence > highest_before, "{id} is sequence {sequence}, at or below {highest_before} served before");
    }
}
