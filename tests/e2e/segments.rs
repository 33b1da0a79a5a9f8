//! Segment IDs on a running cluster: the Leaf-compatible and native endpoints with their errors,
//! the last IDs of a tag, buffers and metrics, the CLI, the release of unused tails on SIGTERM,
//! and `--preload`.

use std::time::Duration;
use std::time::Instant;

use reqwest::Method;
use serde_json::Value;

use crate::harness::assert_error;
use crate::harness::new_tag;
use crate::harness::run_binary;
use crate::harness::wait_until;
use crate::harness::ProcessCluster;
use crate::ids::fetch;
use crate::ids::fetch_ok;
use crate::ids::is_segments_not_ready;
use crate::ids::leaf_error;
use crate::ids::metric;
use crate::ids::range_of;
use crate::ids::Answer;
use crate::ids::Endpoint;
use crate::ids::IdSet;
use crate::ids::LARGEST_ID;

const TIMEOUT: Duration = Duration::from_secs(20);

fn http() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(10)).build().expect("HTTP client")
}

/// `/v1/tags/{tag}` of `id` (a local read), or with `?consistent=true` through the leader.
async fn tag_view(cluster: &mut ProcessCluster, id: u64, tag: &str, consistent: bool) -> Value {
    let path = if consistent { format!("/v1/tags/{tag}?consistent=true") } else { format!("/v1/tags/{tag}") };
    let (status, body) = cluster.request(id, Method::GET, &path, None, None).await;
    assert_eq!(status.as_u16(), 200, "GET {path} on node {id}: {body}");
    body
}

/// `max_id` of `tag` read through the leader from node `id`, once a leader answers.
async fn consistent_max_id(cluster: &mut ProcessCluster, id: u64, tag: &str) -> u64 {
    let url = format!("{}/v1/tags/{tag}?consistent=true", cluster.url(id));
    let http = http();
    wait_until(TIMEOUT, &format!("a consistent read of '{tag}' on node {id}"), || async {
        let response = http.get(&url).send().await.map_err(|e| e.to_string())?;
        let status = response.status();
        let body: Value = response.json().await.map_err(|e| e.to_string())?;
        match body["max_id"].as_str().and_then(|max_id| max_id.parse().ok()) {
            Some(max_id) if status == 200 => Ok(max_id),
            _ => Err(format!("HTTP {status}: {body}")),
        }
    })
    .await
}

/// The IDs `id` holds for `tag` and has not handed out: `[cursor, current.end)` and `next`.
/// Waits until its background claim (if any) has landed, so the answer cannot change by itself.
async fn settled_buffers(cluster: &mut ProcessCluster, id: u64, tag: &str) -> Vec<(u64, u64)> {
    let url = format!("{}/v1/tags/{tag}", cluster.url(id));
    let http = http();
    wait_until(TIMEOUT, &format!("node {id} to hold its next segment of '{tag}'"), || async {
        let body: Value =
            http.get(&url).send().await.map_err(|e| e.to_string())?.json().await.map_err(|e| e.to_string())?;
        let buffers = &body["buffers"];
        let current = range_of(&buffers["current"]);
        let cursor: Option<u64> = buffers["cursor"].as_str().and_then(|c| c.parse().ok());
        match (current, cursor, range_of(&buffers["next"])) {
            (Some((_, end)), Some(cursor), Some(next)) if buffers["loading"] == false => {
                Ok([(cursor, end), next].into_iter().filter(|(start, end)| start < end).collect())
            }
            _ => Err(format!("buffers {buffers}")),
        }
    })
    .await
}

/// A tag created through node 1 is served by nodes 2 and 3 as soon as they applied it (no
/// polling interval as in Leaf). Unknown tags answer Leaf's `Result{id=-2, status=EXCEPTION}`
/// (HTTP 500) and native 404 `TAG_NOT_FOUND`; counts 0, 10001, -1 and "abc" are 400
/// `INVALID_ARGUMENT` and take no ID; `count=10000` and the ranges answers total exactly the count
/// as increasing half-open ranges; `/v1/tags/{tag}` shows the node's buffers and `/metrics` the
/// IDs issued and the claims; `leafraft id segment TAG -n 5` prints five increasing IDs; and
/// every ID handed out in all of this is unique.
#[tokio::test]
async fn segment_endpoints_answer_ids_and_the_spec_errors() {
    let mut cluster = ProcessCluster::start(3);
    cluster.wait_leader(TIMEOUT).await;
    let http = http();
    let urls: Vec<String> = (1..=3).map(|id| cluster.url(id)).collect();
    let url = |id: u64| urls[usize::try_from(id - 1).unwrap()].as_str();
    cluster.client(1).create_tag(&new_tag("ep", None, Some(100), None)).await.expect("create through node 1");
    let mut served = IdSet::default();

    // As soon as a node has applied the create (a linearizable read waits for exactly that), it
    // serves the tag: the first answer is IDs, or at worst "not ready" while the first claim
    // commits, but never "unknown tag".
    for id in [2, 3] {
        tag_view(&mut cluster, id, "ep", true).await;
        for endpoint in [Endpoint::Leaf, Endpoint::Ids(3), Endpoint::Ranges(3)] {
            let answer = fetch(&http, url(id), "ep", endpoint).await;
            match answer {
                Answer::Ids(ranges) => served.add(&ranges),
                answer if is_segments_not_ready(endpoint, &answer) => {
                    served.add(&fetch_ok(&http, url(id), "ep", endpoint).await)
                }
                answer => panic!("node {id}, {endpoint:?} right after the create applied: {answer:?}"),
            }
        }
    }

    // Unknown tags and bad tag names.
    for id in [1, 2, 3] {
        let (status, body) = cluster.get_text(id, "/api/segment/get/nope").await;
        assert_eq!((status.as_u16(), body.as_str()), (500, leaf_error(-2).as_str()), "Leaf path, unknown tag");
        let (status, body) = cluster.get_text(id, "/api/segment/get/bad%20name").await;
        assert_eq!((status.as_u16(), body.as_str()), (500, leaf_error(-2).as_str()), "Leaf path, bad tag name");
        for path in ["/v1/segment/nope", "/v1/segment/nope?count=5", "/v1/segment/nope/ranges?count=5"] {
            let answer = cluster.request(id, Method::GET, path, None, None).await;
            assert_error(&answer, 404, "TAG_NOT_FOUND", &format!("GET {path} on node {id}"));
        }
        for path in ["/v1/segment/bad%20name", "/v1/segment/bad%20name/ranges"] {
            let answer = cluster.request(id, Method::GET, path, None, None).await;
            assert_error(&answer, 400, "INVALID_ARGUMENT", &format!("GET {path} on node {id}"));
        }
    }

    // Bad counts take nothing.
    let issued = |view: &Value| view["buffers"]["ids_issued"].as_u64().expect("ids_issued");
    let before = issued(&tag_view(&mut cluster, 2, "ep", false).await);
    for count in ["0", "10001", "-1", "abc", "1.5", ""] {
        for path in [format!("/v1/segment/ep?count={count}"), format!("/v1/segment/ep/ranges?count={count}")] {
            let answer = cluster.request(2, Method::GET, &path, None, None).await;
            assert_error(&answer, 400, "INVALID_ARGUMENT", &format!("GET {path}"));
        }
    }
    assert_eq!(issued(&tag_view(&mut cluster, 2, "ep", false).await), before, "a rejected count took IDs");

    // Batches: several segments (step 100, doubling) in one answer, exactly `count` IDs.
    for (id, count) in [(2, 250), (3, 777), (1, 1)] {
        let ranges = fetch_ok(&http, url(id), "ep", Endpoint::Ranges(count)).await;
        println!("node {id}: ranges?count={count} -> {ranges:?}");
        served.add(&ranges);
    }
    let (status, body) =
        cluster.request(1, Method::POST, "/v1/tags", Some(r#"{"tag":"wide","step":20000}"#), None).await;
    assert_eq!(status.as_u16(), 201, "{body}");
    tag_view(&mut cluster, 3, "wide", true).await;
    let mut wide = IdSet::default();
    wide.add(&fetch_ok(&http, url(3), "wide", Endpoint::Ids(10_000)).await);
    wide.add(&fetch_ok(&http, url(3), "wide", Endpoint::Ranges(10_000)).await);
    assert_eq!((wide.len(), wide.duplicates()), (20_000, vec![]), "two batches of 10000");

    // Buffers and metrics of a node that served.
    let served_by_2 = issued(&tag_view(&mut cluster, 2, "ep", false).await);
    let view = tag_view(&mut cluster, 2, "ep", false).await;
    let buffers = &view["buffers"];
    let (start, end) = range_of(&buffers["current"]).unwrap_or_else(|| panic!("no current segment: {view}"));
    let cursor: u64 = buffers["cursor"].as_str().and_then(|c| c.parse().ok()).expect("cursor");
    assert!(start <= cursor && cursor <= end, "cursor outside the current segment: {buffers}");
    assert!(buffers["claims"].as_u64().is_some_and(|claims| claims >= 2), "claims: {buffers}");
    assert!(buffers["step"].as_u64().is_some_and(|step| step >= 100), "step: {buffers}");
    assert!(buffers.get("next").is_some() && buffers["last_claim_at"].is_string(), "{buffers}");
    let (_, text) = cluster.get_text(2, "/metrics").await;
    let series = |name: &str, labels: &[(&str, &str)]| {
        metric(&text, name, labels).unwrap_or_else(|| panic!("no {name}{labels:?} in /metrics:\n{text}"))
    };
    assert_eq!(series("leafraft_segment_ids_issued_total", &[("tag", "ep")]), served_by_2 as f64);
    assert!(series("leafraft_segment_claims_total", &[("tag", "ep"), ("result", "ok")]) >= 2.0);
    assert!(series("leafraft_segment_claim_duration_seconds_count", &[("tag", "ep")]) >= 2.0);
    println!("node 2 buffers of 'ep': {buffers}");

    // The CLI.
    let server = url(1).to_string();
    let output = run_binary(&["id", "segment", "ep", "-n", "5", "--server", &server], TIMEOUT).await;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "leafraft id segment: {}\n{stdout}", String::from_utf8_lossy(&output.stderr));
    let printed: Vec<u64> = stdout.lines().map(|line| line.parse().expect("one decimal ID per line")).collect();
    assert_eq!(printed.len(), 5, "{stdout}");
    assert!(printed.windows(2).all(|pair| pair[0] < pair[1]), "not increasing: {printed:?}");
    printed.iter().for_each(|&id| served.add_id(id));

    assert_eq!(served.duplicates(), vec![], "duplicate IDs of 'ep'");
    println!("'ep': {} unique IDs from three nodes and the CLI", served.len());
}

/// A tag created with `max_id = 2^63 - 1 - 25` and step 10 hands out exactly the 25 IDs up to
/// `9223372036854775806` (the last claim shorter than its step), then answers 409
/// `TAG_EXHAUSTED` on the native paths and HTTP 500 `Result{id=-5, status=EXCEPTION}` on Leaf's,
/// on this node and on another one: never a wrapped, negative or repeated ID.
#[tokio::test]
async fn a_tag_at_the_top_of_the_id_space_is_exhausted_not_wrapped() {
    let mut cluster = ProcessCluster::start(3);
    cluster.wait_leader(TIMEOUT).await;
    let http = http();
    let first = LARGEST_ID - 24;
    let create = format!(r#"{{"tag":"edge","max_id":"{first}","step":10}}"#);
    let (status, body) = cluster.request(1, Method::POST, "/v1/tags", Some(&create), None).await;
    assert_eq!(status.as_u16(), 201, "{body}");
    let url = cluster.url(2);
    tag_view(&mut cluster, 2, "edge", true).await;

    // One ID per request, alternating paths, so no request spans the end (which would lose the
    // part it took: a gap, allowed, but not what this test counts).
    let mut served = IdSet::default();
    let endpoints = [Endpoint::Leaf, Endpoint::Ids(1), Endpoint::Ranges(1)];
    let mut requests = 0;
    let exhausted = loop {
        let endpoint = endpoints[requests % endpoints.len()];
        requests += 1;
        assert!(requests < 200, "still no TAG_EXHAUSTED after {requests} requests; served {:?}", served.ids());
        match fetch(&http, &url, "edge", endpoint).await {
            Answer::Ids(ranges) => served.add(&ranges),
            answer if is_segments_not_ready(endpoint, &answer) => {}
            answer => break (endpoint, answer),
        }
    };
    let expected: Vec<u64> = (first..=LARGEST_ID).collect();
    assert_eq!(served.ids(), expected, "the IDs of 'edge'");
    assert_eq!(served.max(), Some(9_223_372_036_854_775_806));
    let exhausted_as = |endpoint: Endpoint| match endpoint {
        Endpoint::Leaf => Answer::Error { status: 500, code: leaf_error(-5) },
        _ => Answer::Error { status: 409, code: "TAG_EXHAUSTED".into() },
    };
    assert_eq!(exhausted.1, exhausted_as(exhausted.0), "the first answer after the last ID");

    for id in [2, 3] {
        let url = cluster.url(id);
        for endpoint in [Endpoint::Leaf, Endpoint::Ids(1), Endpoint::Ids(5), Endpoint::Ranges(3)] {
            // Node 3 learns it from its own first claim, which may outlast the bounded wait.
            let answer = wait_until(TIMEOUT, "TAG_EXHAUSTED", || async {
                match fetch(&http, &url, "edge", endpoint).await {
                    answer if is_segments_not_ready(endpoint, &answer) => Err(format!("{answer:?}")),
                    answer => Ok(answer),
                }
            })
            .await;
            assert_eq!(answer, exhausted_as(endpoint), "node {id}, {endpoint:?}");
        }
    }
    let max_id = consistent_max_id(&mut cluster, 3, "edge").await;
    assert_eq!(max_id, i64::MAX as u64, "max_id stops at 2^63 - 1");
}

/// SIGTERM gives back the never-served tail of a node's buffers. Node X serves a few IDs of
/// two tags: of `only-x` it holds the latest claim, so after it exits with status 0 `max_id` (read
/// through the leader on another node) is exactly one past the last ID it served; of `shared`
/// node Y claimed after it, so the release must not apply and `max_id` stays. Restarted, X's next
/// ID of `only-x` is the one after the last served (nothing reused, nothing wasted), and every ID
/// of both tags is unique. Done once with a follower as X and once with the leader.
#[tokio::test]
async fn sigterm_gives_back_the_unused_tail_and_the_restart_reuses_nothing() {
    let mut cluster = ProcessCluster::start(3);
    let http = http();
    for round in ["follower", "leader"] {
        let leader = cluster.wait_leader(TIMEOUT).await;
        let followers: Vec<u64> = [1, 2, 3].into_iter().filter(|&id| id != leader).collect();
        let (x, y) = if round == "follower" { (followers[0], followers[1]) } else { (leader, followers[0]) };
        let (only_x, shared) = (format!("only-x-{round}"), format!("shared-{round}"));
        for tag in [&only_x, &shared] {
            cluster.client(y).create_tag(&new_tag(tag, None, Some(100), None)).await.expect("create");
            tag_view(&mut cluster, x, tag, true).await;
        }
        let (url_x, url_y) = (cluster.url(x), cluster.url(y));

        // X: 15 IDs of `only-x` (its first segment is [1, 101); the 10 % mark loads the next).
        let mut only = IdSet::default();
        only.add(&fetch_ok(&http, &url_x, &only_x, Endpoint::Ids(15)).await);
        let held = settled_buffers(&mut cluster, x, &only_x).await;
        let last = only.max().expect("IDs");
        assert_eq!(held.first().map(|range| range.0), Some(last + 1), "X holds everything after its last ID");
        let claimed_to = consistent_max_id(&mut cluster, y, &only_x).await;
        assert_eq!(held.last().map(|range| range.1), Some(claimed_to), "X holds the latest claim");

        // `shared`: X claims, then Y claims after it.
        let mut both = IdSet::default();
        both.add(&fetch_ok(&http, &url_x, &shared, Endpoint::Ids(5)).await);
        both.add(&fetch_ok(&http, &url_y, &shared, Endpoint::Ids(5)).await);
        let shared_max = consistent_max_id(&mut cluster, y, &shared).await;

        let took = cluster.terminate(x, TIMEOUT).await;
        let released = consistent_max_id(&mut cluster, y, &only_x).await;
        println!(
            "{round} {x}: stopped in {took:?}; max_id of {only_x} {claimed_to} -> {released} (last served {last})"
        );
        assert_eq!(released, last + 1, "max_id of '{only_x}' after X gave its tail back");
        assert_eq!(consistent_max_id(&mut cluster, y, &shared).await, shared_max, "a stale release applied");

        cluster.restart(x);
        cluster.wait_ready(x, TIMEOUT).await;
        let after = fetch_ok(&http, &url_x, &only_x, Endpoint::Leaf).await;
        assert_eq!(after, vec![(last + 1, last + 2)], "X's first ID of '{only_x}' after the restart");
        only.add(&after);
        both.add(&fetch_ok(&http, &url_x, &shared, Endpoint::Ids(5)).await);
        both.add(&fetch_ok(&http, &url_y, &shared, Endpoint::Ids(5)).await);
        assert_eq!(only.duplicates(), vec![], "duplicates of '{only_x}'");
        assert_eq!(both.duplicates(), vec![], "duplicates of '{shared}': {:?}", both.ids());
    }
}

/// A node restarted with `--preload` loads a segment of every existing tag once it is ready,
/// before any ID request: its `/v1/tags/{tag}` shows a current or next range (a node without the
/// flag shows no buffers), and its first ID is the first of that preloaded range.
#[tokio::test]
async fn preload_loads_every_tag_before_the_first_request() {
    let mut cluster = ProcessCluster::start(3);
    let leader = cluster.wait_leader(TIMEOUT).await;
    let tags = ["pre-a", "pre-b", "pre-c"];
    for tag in tags {
        cluster.client(leader).create_tag(&new_tag(tag, None, Some(50), None)).await.expect("create");
    }
    // Another node takes IDs of one tag first, so a preloaded range need not start at 1.
    let http = http();
    let url_1 = cluster.url(1);
    tag_view(&mut cluster, 1, "pre-b", true).await;
    fetch_ok(&http, &url_1, "pre-b", Endpoint::Ids(1)).await;

    cluster.terminate(3, TIMEOUT).await;
    let mut args = cluster.args(3);
    args.push("--preload".into());
    let started = Instant::now();
    cluster.start_node(3, &args.iter().map(String::as_str).collect::<Vec<_>>());
    cluster.wait_ready(3, TIMEOUT).await;
    let url_3 = cluster.url(3);
    let mut preloaded = Vec::new();
    for tag in tags {
        let url = format!("{url_3}/v1/tags/{tag}");
        let range = wait_until(Duration::from_secs(10), &format!("node 3 to preload '{tag}'"), || async {
            let body: Value =
                http.get(&url).send().await.map_err(|e| e.to_string())?.json().await.map_err(|e| e.to_string())?;
            let buffers = &body["buffers"];
            match range_of(&buffers["current"]).or_else(|| range_of(&buffers["next"])) {
                Some(range) => Ok(range),
                None => Err(format!("buffers {buffers}")),
            }
        })
        .await;
        preloaded.push(range);
    }
    println!("node 3 preloaded {preloaded:?} within {:?} of its start", started.elapsed());
    assert_eq!(tag_view(&mut cluster, 2, "pre-a", false).await["buffers"], Value::Null, "node 2 has no --preload");
    for (tag, (start, _)) in tags.into_iter().zip(preloaded) {
        let first = fetch_ok(&http, &url_3, tag, Endpoint::Leaf).await;
        assert_eq!(first, vec![(start, start + 1)], "node 3's first ID of '{tag}' is the first preloaded one");
    }
}

/// Whether node `id` holds no buffers of `tag` (`/v1/tags/{tag}` shows `"buffers": null`).
async fn holds_no_buffers(http: &reqwest::Client, url: &str, tag: &str) -> Result<(), String> {
    let view: Value = http
        .get(format!("{url}/v1/tags/{tag}"))
        .send()
        .await
        .map_err(|e| e.to_string())?
        .json()
        .await
        .map_err(|e| e.to_string())?;
    if view["buffers"].is_null() {
        Ok(())
    } else {
        Err(format!("buffers {}", view["buffers"]))
    }
}

/// A node started with `--segment-idle-ms 2000` whose buffers of a tag serve nothing for 2 s
/// drops them and gives their tail back: `/v1/tags/{tag}` shows no buffers there, `/metrics`
/// counts the drop and the applied give-back, and the tag's `max_id` comes down to the ID after
/// the last one served. The next request creates a fresh buffer, which serves exactly from there.
/// Then bursts on two nodes, each followed by a pause that drops both nodes' buffers: every ID of
/// the whole run is unique, `max_id` covers them all, and the node's total of IDs issued over all
/// tags still counts every ID it served, dropped buffers included.
#[tokio::test]
async fn an_idle_buffer_is_dropped_with_its_tail_given_back_and_serving_resumes() {
    let mut cluster = ProcessCluster::new().start_members_with(&[1, 2, 3], &["--segment-idle-ms", "2000"]);
    let y = cluster.wait_leader(TIMEOUT).await;
    let x = [1, 2, 3].into_iter().find(|&id| id != y).expect("a follower");
    cluster.client(y).create_tag(&new_tag("quiet", None, Some(100), None)).await.expect("create");
    tag_view(&mut cluster, x, "quiet", true).await;
    let (http, url_x, url_y) = (http(), cluster.url(x), cluster.url(y));
    let mut all = IdSet::default();
    all.add(&fetch_ok(&http, &url_x, "quiet", Endpoint::Ids(15)).await);
    let last = all.max().expect("IDs");
    let held = settled_buffers(&mut cluster, x, "quiet").await;
    assert_eq!(held.first().map(|range| range.0), Some(last + 1), "X holds everything after its last ID");

    let metrics_x = format!("{url_x}/metrics");
    wait_until(TIMEOUT, "X to drop its idle buffers and give their tail back", || async {
        holds_no_buffers(&http, &url_x, "quiet").await?;
        let text =
            http.get(&metrics_x).send().await.map_err(|e| e.to_string())?.text().await.map_err(|e| e.to_string())?;
        match metric(&text, "leafraft_segment_idle_releases_total", &[("result", "applied")]) {
            Some(1.0) => Ok(text),
            other => Err(format!("applied releases {other:?}")),
        }
    })
    .await;
    let given_back = consistent_max_id(&mut cluster, y, "quiet").await;
    println!("X served up to {last}, held to {:?}, max_id now {given_back}", held.last());
    assert_eq!(given_back, last + 1, "max_id after X gave its idle tail back");

    let after = fetch_ok(&http, &url_x, "quiet", Endpoint::Leaf).await;
    assert_eq!(after, vec![(last + 1, last + 2)], "X's first ID from its fresh buffer");
    all.add(&after);
    let mut served_by_x = 16;
    for round in 0..3 {
        for _ in 0..5 {
            all.add(&fetch_ok(&http, &url_x, "quiet", Endpoint::Ids(7)).await);
            all.add(&fetch_ok(&http, &url_y, "quiet", Endpoint::Ranges(9)).await);
            served_by_x += 7;
        }
        for url in [&url_x, &url_y] {
            wait_until(TIMEOUT, &format!("round {round}: {url} to drop its idle buffers"), || {
                holds_no_buffers(&http, url, "quiet")
            })
            .await;
        }
    }
    all.add(&fetch_ok(&http, &url_x, "quiet", Endpoint::Ranges(50)).await);
    all.add(&fetch_ok(&http, &url_y, "quiet", Endpoint::Ids(50)).await);
    served_by_x += 50;
    assert_eq!(all.duplicates(), vec![], "duplicates of 'quiet': {:?}", all.ids());
    let max_id = consistent_max_id(&mut cluster, y, "quiet").await;
    assert!(all.max().is_some_and(|max| max < max_id), "max_id {max_id} below a served ID");
    wait_until(TIMEOUT, "X's total of IDs issued to count every ID it served", || async {
        let text =
            http.get(&metrics_x).send().await.map_err(|e| e.to_string())?.text().await.map_err(|e| e.to_string())?;
        let drops = metric(&text, "leafraft_segment_idle_drops_total", &[]);
        match metric(&text, "leafraft_segment_ids_issued_all_tags_total", &[]) {
            Some(total) if total == served_by_x as f64 && drops >= Some(4.0) => Ok(()),
            total => Err(format!("total {total:?} of {served_by_x}, drops {drops:?}")),
        }
    })
    .await;
}
