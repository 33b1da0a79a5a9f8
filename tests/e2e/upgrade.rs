//! Rolling upgrades: a live cluster of the previous release (the baseline,
//! `releases/0.1.0`) upgraded member by member to the binary under test while clients take IDs;
//! one member rolled back; the cluster version moving only after the last member. And the data
//! directory of the baseline (`tests/golden/0.1.0/`) opened by this binary.
//!
//! The rolling upgrade needs the baseline's binary: `scripts/upgrade-test.sh` (run by `.ci/run`)
//! builds it and runs this test with `LEAFRAFT_BASELINE_BIN` pointing at it. Without that
//! variable (a plain `cargo test`) the test says it is skipped and passes.

use std::collections::BTreeSet;
use std::path::Path;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use leafraft_client::Client;
use leafraft_client::NewNamespace;
use reqwest::Method;
use reqwest::StatusCode;
use serde_json::Value;

use crate::harness::metric_present;
use crate::harness::new_tag;
use crate::harness::wait_until;
use crate::harness::ProcessCluster;

const TIMEOUT: Duration = Duration::from_secs(60);
const SEGMENT: &str = "upgrade-seg";
const MONOTONIC: &str = "upgrade-mono";
const NAMESPACE: &str = "upgrade-ts";
/// The release under test.
const NEW: &str = env!("CARGO_PKG_VERSION");
const BASELINE: &str = "0.1.0";
/// The release that introduced `POST /v1/cluster/noop`'s command, which the baseline cannot decode.
const NOOP_RELEASE: &str = "0.2.0";
/// Tags whose first IDs are asked for all at once once the cluster version moved: their claims
/// must share entries.
const BURST_TAGS: usize = 20;

/// A scrambled tag (`Request::CreateScrambledTag`), created once the cluster version allows it.
const SCRAMBLED: &str = "upgrade-scrambled";
/// The release that introduced scrambled tags.
const SCRAMBLE_RELEASE: &str = "0.3.0";

/// Every ID any client received, by kind: none may appear twice.
#[derive(Default)]
struct Seen {
    ids: Mutex<Vec<(&'static str, u64)>>,
}

impl Seen {
    fn add(&self, kind: &'static str, ids: impl IntoIterator<Item = u64>) {
        self.ids.lock().unwrap_or_else(|e| e.into_inner()).extend(ids.into_iter().map(|id| (kind, id)));
    }

    /// Panics on any ID received twice; answers how many were received.
    fn assert_unique(&self, step: &str) -> usize {
        let ids = self.ids.lock().unwrap_or_else(|e| e.into_inner());
        let mut unique = BTreeSet::new();
        let twice: Vec<_> = ids.iter().filter(|id| !unique.insert(**id)).take(10).collect();
        assert!(twice.is_empty(), "{step}: IDs served twice: {twice:?}");
        ids.len()
    }
}

/// A client of exactly one node that gives up quickly (the node may be stopping).
fn quick_client(url: &str) -> Client {
    Client::builder()
        .nodes([url])
        .discover(false)
        .retry_until_timeout(false)
        .timeout(Duration::from_secs(5))
        .attempt_timeout(Duration::from_secs(5))
        .build()
        .expect("a client of one node")
}

/// One round of every kind of ID from `client`, each recorded; the first error, if any.
async fn take_every_kind(client: &Client, seen: &Seen) -> Result<(), String> {
    let mut first_error = None;
    let mut note = |e: leafraft_client::ClientError| first_error.get_or_insert(e.to_string()).clone();
    match client.segment_ids(SEGMENT, 20).await {
        Ok(ids) => seen.add("segment", ids),
        Err(e) => drop(note(e)),
    }
    match client.segment_ids(MONOTONIC, 5).await {
        Ok(ids) => seen.add("monotonic", ids),
        Err(e) => drop(note(e)),
    }
    match client.snowflake_ids(20).await {
        Ok(ids) => seen.add("snowflake", ids),
        Err(e) => drop(note(e)),
    }
    match client.timeseq_ids(NAMESPACE, 1, 20).await {
        Ok(ids) => seen.add("timeseq", ids),
        Err(e) => drop(note(e)),
    }
    first_error.map_or(Ok(()), Err)
}

/// Waits until every node in `ids` serves every kind of ID.
async fn every_node_serves(cluster: &mut ProcessCluster, ids: &[u64], seen: &Seen, step: &str) {
    for &id in ids {
        let client = quick_client(&cluster.url(id));
        wait_until(TIMEOUT, &format!("{step}: node {id} to serve every kind of ID"), || take_every_kind(&client, seen))
            .await;
    }
}

/// `/v1/cluster` of `id` as JSON.
async fn cluster_json(cluster: &mut ProcessCluster, id: u64) -> Value {
    let (status, body) = cluster.request(id, Method::GET, "/v1/cluster", None, None).await;
    assert_eq!(status, StatusCode::OK, "node {id}: /v1/cluster {body}");
    body
}

fn leader_of(status: &Value) -> Option<u64> {
    status["leader_id"].as_u64()
}

/// Restarts `id` with SIGTERM on `binary` (`None`: the binary under test), on the same directory,
/// and waits until it is ready.
async fn restart_on(cluster: &mut ProcessCluster, id: u64, binary: Option<PathBuf>) {
    cluster.terminate(id, TIMEOUT).await;
    cluster.set_binary(id, binary);
    cluster.restart(id);
    cluster.wait_ready(id, TIMEOUT).await;
}

/// The new command on `id`: its status and error body.
async fn noop(cluster: &mut ProcessCluster, id: u64) -> (StatusCode, Value) {
    cluster.request(id, Method::POST, "/v1/cluster/noop", None, None).await
}

#[tokio::test]
async fn rolling_upgrade_from_the_baseline_keeps_every_id_unique() {
    let Some(baseline) = std::env::var_os("LEAFRAFT_BASELINE_BIN").map(PathBuf::from) else {
        eprintln!(
            "skipped: LEAFRAFT_BASELINE_BIN is not set (scripts/upgrade-test.sh builds the baseline and sets it)"
        );
        return;
    };
    assert!(baseline.is_file(), "LEAFRAFT_BASELINE_BIN={} is not a file", baseline.display());
    let mut cluster = ProcessCluster::new();
    for id in 1..=3 {
        cluster.set_binary(id, Some(baseline.clone()));
    }
    let mut cluster = cluster.start_members(&[1, 2, 3]);
    let leader = cluster.wait_leader(TIMEOUT).await;
    for id in 1..=3 {
        cluster.wait_ready(id, TIMEOUT).await;
    }
    set_up_every_kind(&mut cluster, leader).await;
    let seen = Arc::new(Seen::default());
    every_node_serves(&mut cluster, &[1, 2, 3], &seen, "the baseline cluster").await;

    // Clients on every node take IDs throughout, failing while their node restarts.
    let running = Arc::new(AtomicBool::new(true));
    let clients: Vec<_> = (1..=3)
        .map(|id| {
            let (client, seen, running) = (quick_client(&cluster.url(id)), seen.clone(), running.clone());
            tokio::spawn(async move {
                while running.load(Ordering::Relaxed) {
                    if take_every_kind(&client, &seen).await.is_err() {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            })
        })
        .collect();

    // Followers first, one at a time; the member leading when only it is left goes last.
    let mut upgraded = BTreeSet::new();
    while upgraded.len() < 3 {
        let leader = cluster.wait_leader(TIMEOUT).await;
        let next = (1..=3).find(|id| !upgraded.contains(id) && *id != leader).unwrap_or(leader);
        restart_on(&mut cluster, next, None).await;
        upgraded.insert(next);
        let step = format!("after node {next} runs {NEW}");
        every_node_serves(&mut cluster, &[1, 2, 3], &seen, &step).await;
        let count = seen.assert_unique(&step);
        eprintln!("{step}: every node serves, {count} IDs so far, none twice");
        if upgraded.len() == 3 {
            // Every member runs this release now: the leader may raise the cluster version (and
            // batching with it) at any moment, so the mixed-cluster check ends here.
            break;
        }
        for &id in &upgraded {
            let (claims, _, batches) = claim_events(&mut cluster, id).await;
            assert_eq!(
                batches, 0,
                "{step}: node {id} batched claims before the cluster version allowed it ({claims} claims)"
            );
            assert_eq!(
                window_claims(&mut cluster, id).await,
                0,
                "{step}: node {id} claimed a time-sequence window before the cluster version allowed it"
            );
        }
        check_refused_in_mixed_cluster(&mut cluster, next, &upgraded).await;
        if upgraded.len() == 2 {
            // Roll this member back to the baseline on its directory, then forward again.
            restart_on(&mut cluster, next, Some(baseline.clone())).await;
            every_node_serves(&mut cluster, &[1, 2, 3], &seen, "after a member went back to the baseline").await;
            seen.assert_unique("after a member went back to the baseline");
            let status = cluster_json(&mut cluster, next).await;
            assert!(status.get("cluster_version").is_none(), "node {next} runs the baseline again: {status}");
            restart_on(&mut cluster, next, None).await;
            check_refused_in_mixed_cluster(&mut cluster, next, &upgraded).await;
        }
    }

    // The last member is upgraded: the leader raises the cluster version by itself.
    for id in 1..=3 {
        wait_until(TIMEOUT, &format!("node {id} to apply cluster version {NEW}"), || {
            let url = format!("{}/v1/cluster", cluster.url(id));
            async move {
                let status: Value =
                    reqwest::get(&url).await.map_err(|e| e.to_string())?.json().await.map_err(|e| e.to_string())?;
                match status["cluster_version"].as_str() == Some(NEW) {
                    true => Ok(status),
                    false => Err(format!("{status}")),
                }
            }
        })
        .await;
    }
    let status = cluster_json(&mut cluster, 1).await;
    for id in 1..=3 {
        assert_eq!(status["versions"][id.to_string()], NEW, "every member reports {NEW}: {status}");
    }
    for id in 1..=3 {
        let (code, body) = noop(&mut cluster, id).await;
        assert_eq!(code, StatusCode::OK, "node {id}: the new command is accepted now: {body}");
    }
    running.store(false, Ordering::Relaxed);
    for client in clients {
        client.await.expect("client task");
    }
    every_node_serves(&mut cluster, &[1, 2, 3], &seen, "after the cluster version moved").await;
    scrambled_tag_served_now(&mut cluster, &seen).await;
    // Time-sequence IDs are served from window claims now: every node in use claims one.
    for id in 1..=3 {
        let client = quick_client(&cluster.url(id));
        let deadline = std::time::Instant::now() + TIMEOUT;
        while window_claims(&mut cluster, id).await == 0 {
            assert!(std::time::Instant::now() < deadline, "node {id} claimed no time-sequence window at {NEW}");
            if let Ok(ids) = client.timeseq_ids(NAMESPACE, 1, 20).await {
                seen.add("timeseq", ids);
            }
        }
    }
    every_node_serves(&mut cluster, &[1, 2, 3], &seen, "with window claims").await;
    shared_windows_now(&mut cluster).await;
    claims_share_entries_now(&mut cluster).await;
    let count = seen.assert_unique("the whole upgrade");
    eprintln!("the whole upgrade: {count} IDs, none twice");
}

/// A namespace renewed soon (its windows start 20–29 s from now): its home renews every
/// member's window with one shared claim, which travels in batches only, and every node serves
/// its own block. Its IDs are checked apart: they are unique per namespace.
async fn shared_windows_now(cluster: &mut ProcessCluster) {
    let (name, renewed_at_s) = crate::timeseq_shared::namespace_renewed_soon();
    let namespace = NewNamespace { namespace: name.clone(), ..Default::default() };
    cluster.client(1).create_namespace(&namespace).await.expect("create a namespace renewed soon");
    let mut seen = std::collections::BTreeSet::new();
    crate::timeseq_shared::serve_until_every_member_installed_a_shared_block(cluster, &name, renewed_at_s, &mut seen)
        .await;
    eprintln!("shared windows: every node served from its own block, {} IDs of {name}, none twice", seen.len());
}

/// Tags (a segment tag and a monotonic one), a time-sequence namespace; every node takes a
/// snowflake worker when it first serves one.
async fn set_up_every_kind(cluster: &mut ProcessCluster, leader: u64) {
    let client = cluster.client(leader);
    client.create_tag(&new_tag(SEGMENT, None, Some(100), None)).await.expect("create the segment tag");
    let mut monotonic = new_tag(MONOTONIC, None, Some(100), None);
    monotonic.mode = Some("monotonic".into());
    client.create_tag(&monotonic).await.expect("create the monotonic tag");
    let namespace = NewNamespace { namespace: NAMESPACE.into(), ..Default::default() };
    client.create_namespace(&namespace).await.expect("create the namespace");
    cluster.wait_tag_known(&[1, 2, 3], SEGMENT, TIMEOUT).await;
    cluster.wait_tag_known(&[1, 2, 3], MONOTONIC, TIMEOUT).await;
}

/// `leafraft_timeseq_events_total{kind="window_claims"}` of node `id`, which runs this release: a
/// missing series fails rather than reading 0.
async fn window_claims(cluster: &mut ProcessCluster, id: u64) -> u64 {
    let text = cluster.get_text(id, "/metrics").await.1;
    let prefix = "leafraft_timeseq_events_total{kind=\"window_claims\"}";
    let line = text.lines().find(|line| line.starts_with(prefix));
    let count = line.and_then(|line| line.rsplit(' ').next()?.parse().ok());
    count.unwrap_or_else(|| panic!("node {id} lists no window claims in /metrics"))
}

/// `leafraft_claim_events_total` of node `id`: the claims it sent, the entries they took and the
/// claim batches among those.
async fn claim_events(cluster: &mut ProcessCluster, id: u64) -> (u64, u64, u64) {
    let text = reqwest::get(format!("{}/metrics", cluster.url(id)))
        .await
        .expect("scrape /metrics")
        .text()
        .await
        .expect("read /metrics");
    (claim_event(&text, "claims"), claim_event(&text, "entries"), claim_event(&text, "batches"))
}

/// One kind of `leafraft_claim_events_total` in `/metrics` text: present or the test fails (this
/// release exports every kind from the first scrape, at 0 until it happens).
fn claim_event(text: &str, kind: &str) -> u64 {
    metric_present(text, &format!("leafraft_claim_events_total{{kind=\"{kind}\"}}")) as u64
}

/// The mixed cluster's check is `batches == 0`: a missing series read as 0 passed it whatever the
/// node did, so a renamed series (or kind) must fail the read instead.
#[test]
fn regression_a_missing_claim_series_fails_instead_of_reading_0() {
    let scrape = "# TYPE leafraft_claim_events_total counter\n\
                  leafraft_claim_events_total{kind=\"claims\"} 12\n\
                  leafraft_claim_events_total{kind=\"entries\"} 7\n\
                  leafraft_claim_events_total{kind=\"batches\"} 0\n";
    assert_eq!(
        [claim_event(scrape, "claims"), claim_event(scrape, "entries"), claim_event(scrape, "batches")],
        [12, 7, 0]
    );
    let renamed = scrape.replace("leafraft_claim_events_total{kind=\"batches\"}", "leafraft_claim_batches_total");
    let read = std::panic::catch_unwind(|| claim_event(&renamed, "batches"));
    assert!(read.is_err(), "a missing batches series read as {:?}", read.ok());
}

/// With every member on this release, the first IDs of many new tags asked for at once on a
/// follower go out in shared entries. (Each new tag's first ID is its own; they are not added to
/// `seen`, whose segment IDs are those of one tag.)
async fn claims_share_entries_now(cluster: &mut ProcessCluster) {
    let leader = cluster.wait_leader(TIMEOUT).await;
    let follower = (1..=3).find(|id| *id != leader).unwrap_or(1);
    let admin = cluster.client(leader);
    let tags: Vec<String> = (0..BURST_TAGS).map(|i| format!("upgrade-burst-{i}")).collect();
    for tag in &tags {
        admin.create_tag(&new_tag(tag, None, Some(100), None)).await.expect("create a burst tag");
    }
    for tag in &tags {
        cluster.wait_tag_known(&[follower], tag, TIMEOUT).await;
    }
    let before = claim_events(cluster, follower).await;
    let client = quick_client(&cluster.url(follower));
    let mut firsts = tokio::task::JoinSet::new();
    for tag in tags {
        let client = client.clone();
        firsts.spawn(async move { client.segment_ids(&tag, 1).await });
    }
    while let Some(ids) = firsts.join_next().await {
        let ids = ids.expect("a request task").expect("a first ID of a burst tag");
        assert_eq!(ids, [1], "a new tag's first ID");
    }
    let after = claim_events(cluster, follower).await;
    let (claims, entries, batches) = (after.0 - before.0, after.1 - before.1, after.2 - before.2);
    eprintln!(
        "{BURST_TAGS} first IDs at once on node {follower}: {claims} claims in {entries} entries, {batches} batches"
    );
    assert!(claims >= BURST_TAGS as u64, "{claims} claims for {BURST_TAGS} new tags");
    assert!(
        batches >= 1 && entries < claims,
        "{claims} claims took {entries} entries: not batched at cluster version {NEW}"
    );
}

/// In the mixed cluster, the command only the new release knows is refused on an upgraded node,
/// naming the version it needs and the members still on the baseline.
async fn check_refused_in_mixed_cluster(cluster: &mut ProcessCluster, upgraded: u64, done: &BTreeSet<u64>) {
    let behind: Vec<u64> = (1..=3).filter(|id| !done.contains(id)).collect();
    let (code, body) = wait_until(TIMEOUT, "a refusal naming every member behind", || {
        let url = format!("{}/v1/cluster/noop", cluster.url(upgraded));
        let behind = behind.clone();
        async move {
            let response = reqwest::Client::new().post(&url).send().await.map_err(|e| e.to_string())?;
            let code = response.status();
            let body: Value = response.json().await.map_err(|e| e.to_string())?;
            let message = body["error"]["message"].as_str().unwrap_or_default().to_string();
            // A member is named with the release it reported, or as not heard: behind a baseline
            // leader, which relays nothing, a follower hears only the leader.
            let names_all = behind.iter().all(|id| message.contains(&format!("node {id} (")));
            match names_all {
                true => Ok((code, body)),
                false => Err(format!("{code} {body}")),
            }
        }
    })
    .await;
    assert_eq!(code, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "FEATURE_NOT_ENABLED", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!("needs cluster version {NOOP_RELEASE}, the cluster is at {BASELINE}")),
        "{message}"
    );
    // A scrambled tag's key is state a baseline member could not decode: refused too.
    let create = format!(r#"{{"tag":"{SCRAMBLED}","scramble":true}}"#);
    let (code, body) = cluster.request(upgraded, Method::POST, "/v1/tags", Some(&create), None).await;
    assert_eq!((code, body["error"]["code"].as_str()), (StatusCode::CONFLICT, Some("FEATURE_NOT_ENABLED")), "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(&format!("needs cluster version {SCRAMBLE_RELEASE}")), "{message}");
    let status = cluster_json(cluster, upgraded).await;
    assert_eq!(status["cluster_version"], BASELINE, "the cluster version has not moved: {status}");
    assert!(leader_of(&status).is_some(), "{status}");
}

/// Once the cluster version allows it, a scrambled tag is created and every node serves it;
/// its IDs join `seen`.
async fn scrambled_tag_served_now(cluster: &mut ProcessCluster, seen: &Seen) {
    let create = format!(r#"{{"tag":"{SCRAMBLED}","scramble":true,"step":50}}"#);
    let (code, body) = cluster.request(1, Method::POST, "/v1/tags", Some(&create), None).await;
    assert_eq!(code, StatusCode::CREATED, "a scrambled tag at cluster version {NEW}: {body}");
    cluster.wait_tag_known(&[1, 2, 3], SCRAMBLED, TIMEOUT).await;
    for id in 1..=3 {
        let client = quick_client(&cluster.url(id));
        let ids = wait_until(TIMEOUT, &format!("node {id} to serve the scrambled tag"), || {
            let ids = client.segment_ids(SCRAMBLED, 30);
            async move { ids.await.map_err(|e| e.to_string()) }
        })
        .await;
        seen.add("scrambled", ids);
    }
}

/// `tests/golden/0.1.0/node1`: a one-node store the baseline wrote (tags, a snowflake worker, a
/// time-sequence namespace; `tests/golden/README.md` says how it was made). This binary opens it,
/// reads it at cluster version 0.1.0, and serves above what the baseline handed out.
#[tokio::test]
async fn the_new_binary_opens_a_data_directory_of_the_baseline() {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/0.1.0/node1");
    let mut cluster = ProcessCluster::new();
    let dir = cluster.temp_path("node1-from-0.1.0");
    copy_dir(&golden, &dir);
    cluster.set_data_dir(1, dir);
    // Held first: a member alone runs 0.2.0 at once, and the version would move before it is seen.
    cluster.start_node(1, &["--hold-cluster-version"]);
    cluster.wait_ready(1, TIMEOUT).await;
    let status = cluster_json(&mut cluster, 1).await;
    assert_eq!(status["cluster_version"], BASELINE, "a baseline store is at the baseline: {status}");
    assert_eq!(status["version"], NEW, "{status}");
    let (code, body) = noop(&mut cluster, 1).await;
    assert_eq!(code, StatusCode::CONFLICT, "held at the baseline: {body}");
    assert!(body["error"]["message"].as_str().is_some_and(|m| m.contains("--hold-cluster-version")), "{body}");
    let client = cluster.client(1);
    let tag = client.get_tag("golden-orders").await.expect("the baseline's tag");
    assert!(tag.max_id > GOLDEN_SERVED_MAX, "{tag:?}");
    let ids = crate::harness::segment_ids_within(&client, "golden-orders", 5, TIMEOUT).await;
    assert!(ids.iter().all(|id| *id > GOLDEN_SERVED_MAX), "IDs above what the baseline served: {ids:?}");
    client.get_tag("golden-coupons").await.expect("the baseline's second tag");
    client.get_namespace("golden-ts").await.expect("the baseline's namespace");
    // Ready means segments and Raft; the worker lease commits after it (WORKER_UNAVAILABLE until then).
    let snowflakes =
        wait_until(TIMEOUT, "snowflake IDs", || async { client.snowflake_ids(3).await.map_err(|e| e.to_string()) })
            .await;
    assert_eq!(snowflakes.len(), 3);
    // Without the hold, a one-member cluster's only member runs this release: the version moves.
    cluster.terminate(1, TIMEOUT).await;
    cluster.start_node(1, &[]);
    cluster.wait_ready(1, TIMEOUT).await;
    wait_until(TIMEOUT, "the cluster version to move", || {
        let url = format!("{}/v1/cluster", cluster.url(1));
        async move {
            let status: Value =
                reqwest::get(&url).await.map_err(|e| e.to_string())?.json().await.map_err(|e| e.to_string())?;
            (status["cluster_version"] == NEW).then_some(()).ok_or(format!("{status}"))
        }
    })
    .await;
    let (code, body) = noop(&mut cluster, 1).await;
    assert_eq!(code, StatusCode::OK, "{body}");
}

/// The largest segment ID of `golden-orders` the baseline served when the directory was made.
const GOLDEN_SERVED_MAX: u64 = 30;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create the copy");
    for entry in std::fs::read_dir(from).unwrap_or_else(|e| panic!("read {}: {e}", from.display())) {
        let entry = entry.expect("directory entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy a file");
        }
    }
}

/// With the cluster-version check switched off (`--plant feature-gate-off`, builds with the `planted` feature), the
/// new command reaches a member of the baseline: it refuses the append it cannot decode (400)
/// again and again and never applies it; the two members of the new release commit without it.
/// This is what the check prevents: with two such members of three, nothing would commit.
#[tokio::test]
async fn with_the_gate_off_a_baseline_member_refuses_the_appends_it_cannot_decode() {
    let Some(baseline) = std::env::var_os("LEAFRAFT_BASELINE_BIN").map(PathBuf::from) else {
        eprintln!(
            "skipped: LEAFRAFT_BASELINE_BIN is not set (scripts/upgrade-test.sh builds the baseline and sets it)"
        );
        return;
    };
    if !cfg!(feature = "planted") {
        eprintln!("skipped: planted bugs exist only in builds with the cargo feature `planted`");
        return;
    }
    let mut cluster = ProcessCluster::new();
    for id in 1..=3 {
        cluster.set_binary(id, Some(baseline.clone()));
        cluster.set_env(id, vec![("LEAFRAFT_PLANTED_BUG".into(), "feature-gate-off".into())]);
    }
    let mut cluster = cluster.start_members(&[1, 2, 3]);
    let old = cluster.wait_leader(TIMEOUT).await;
    for id in (1..=3).filter(|id| *id != old) {
        cluster.wait_ready(id, TIMEOUT).await;
        restart_on(&mut cluster, id, None).await;
    }
    // The baseline member steps down: while it is stopped the two of the new release elect one
    // of them (a leader restarted at once may take its leadership back), then it follows.
    cluster.terminate(old, TIMEOUT).await;
    let leader = cluster.wait_leader(TIMEOUT).await;
    cluster.restart(old);
    cluster.wait_ready(old, TIMEOUT).await;
    assert_eq!(cluster.wait_leader(TIMEOUT).await, leader, "a member of the new release leads");
    let (code, body) = noop(&mut cluster, leader).await;
    assert_eq!(code, StatusCode::OK, "the unchecked command commits on the new members: {body}");
    let committed = body["applied_index"].as_u64().expect("applied index");
    wait_until(TIMEOUT, "the baseline member to refuse the append", || {
        let log = cluster.log(old);
        async move {
            match log.contains("refused a Raft RPC body") && log.contains("cannot decode the request body") {
                true => Ok(()),
                false => Err("no refusal logged yet".to_string()),
            }
        }
    })
    .await;
    let status = cluster_json(&mut cluster, old).await;
    let applied = status["applied_index"].as_u64().unwrap_or(0);
    assert!(applied < committed, "the baseline member never applies it: applied {applied}, committed {committed}");
    eprintln!(
        "gate off: node {old} (baseline) refuses appends from index {committed}: {}",
        last_refusal(&cluster.log(old))
    );
}

fn last_refusal(log: &str) -> &str {
    log.lines().rfind(|line| line.contains("refused a Raft RPC body")).unwrap_or_default()
}

/// A member that receives an append it cannot decode from a member of a newer release stops with
/// one line naming that release, and answers 400: nothing of it is stored or acknowledged.
#[tokio::test]
async fn a_node_stops_on_an_append_of_a_newer_release_it_cannot_decode() {
    let mut cluster = ProcessCluster::start(2);
    cluster.wait_leader(TIMEOUT).await;
    cluster.wait_ready(1, TIMEOUT).await;
    let status = cluster
        .wait_status(1, TIMEOUT, "the cluster ID", |s| s.cluster_id.as_ref().map(drop).ok_or_else(String::new))
        .await;
    let cluster_id = status.cluster_id.expect("cluster id");
    let status = cluster_json(&mut cluster, 1).await;
    let incarnation = status["incarnations"]["2"].as_str().expect("incarnation of node 2").to_string();
    let response = reqwest::Client::new()
        .post(format!("{}/raft/append", cluster.url(1)))
        .header("x-leafraft-cluster-id", cluster_id)
        .header("x-leafraft-node-id", "2")
        .header("x-leafraft-incarnation", incarnation)
        .header("x-leafraft-version", "9.0.0")
        .header("content-type", "application/octet-stream")
        .body(vec![0xff_u8; 64])
        .send()
        .await
        .expect("POST /raft/append");
    assert_eq!(response.status(), StatusCode::BAD_REQUEST, "never answered as stored");
    let exit = cluster.wait_exit(1, TIMEOUT).await;
    assert!(!exit.success(), "node 1 stops with an error: {exit}");
    let log = cluster.log(1);
    let line = log.lines().find(|line| line.contains("run leafraft 9.0.0 or newer on this node"));
    assert!(line.is_some_and(|line| line.contains("leafraft 9.0.0") && line.contains(NEW)), "{log}");
}
