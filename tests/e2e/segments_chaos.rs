//! The one rule under load and faults: eight clients take segment IDs from all three nodes on
//! every path while the leader is killed and restarted, and later the next leader is paused.
//! Every answer is judged (only the spec's "not ready" errors may appear, and transport failures
//! only at a node that was down or paused), and no ID may ever be handed out twice.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use crate::harness::new_tag;
use crate::harness::wait_until;
use crate::harness::ProcessCluster;
use crate::ids::fetch;
use crate::ids::leaf_error;
use crate::ids::metric;
use crate::ids::Answer;
use crate::ids::Endpoint;
use crate::ids::IdSet;

const TAG: &str = "chaos";
const NODES: [u64; 3] = [1, 2, 3];
const CLIENTS: u64 = 8;
/// How long the clients run, from their start.
const LOAD: Duration = Duration::from_secs(21);
/// When the leader is killed, and for how long it stays down before its restart.
const KILL_AT: Duration = Duration::from_secs(4);
const DOWN_FOR: Duration = Duration::from_secs(2);
/// When the leader of the moment is paused, and for how long.
const PAUSE_AT: Duration = Duration::from_secs(11);
const PAUSE_FOR: Duration = Duration::from_secs(3);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// A client whose request failed waits this long before its next one, so a node that is down is
/// not hammered with refused connections (pacing, not synchronisation).
const BACKOFF: Duration = Duration::from_millis(20);
const TIMEOUT: Duration = Duration::from_secs(20);

/// The current incarnation of each node: bumped after a kill has been reaped and before the
/// restart, so a request that saw the same number before and after was served by that incarnation.
#[derive(Default)]
struct Incarnations([AtomicU32; 4]);

impl Incarnations {
    fn get(&self, node: u64) -> u32 {
        self.0[usize::try_from(node).expect("small")].load(Ordering::SeqCst)
    }

    fn bump(&self, node: u64) {
        self.0[usize::try_from(node).expect("small")].fetch_add(1, Ordering::SeqCst);
    }
}

/// One request and what came of it.
struct Sample {
    client: u64,
    node: u64,
    /// `None` when the node was restarted while the request was under way.
    incarnation: Option<u32>,
    sent: Instant,
    received: Instant,
    endpoint: Endpoint,
    answer: Answer,
}

impl Sample {
    /// The smallest and largest ID of a successful answer.
    fn bounds(&self) -> Option<(u64, u64)> {
        match &self.answer {
            Answer::Ids(ranges) => Some((ranges.first()?.0, ranges.last()?.1 - 1)),
            _ => None,
        }
    }
}

/// A node down (`from` the kill or SIGSTOP `to` the moment it served requests again).
struct Fault {
    node: u64,
    what: &'static str,
    from: Instant,
    to: Instant,
}

/// xorshift64: a fixed, seedable sequence of batch sizes.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// One client: its own keep-alive connection to `node`, one request at a time until `stop`,
/// cycling through Leaf's path, `count=1..=40` IDs and `count=1..=150` ranges (more than a
/// segment of step 100, so some answers span a switch).
async fn run_client(
    client: u64,
    node: u64,
    base: String,
    incarnations: Arc<Incarnations>,
    stop: Arc<AtomicBool>,
) -> Vec<Sample> {
    let http = reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .tcp_nodelay(true)
        .pool_max_idle_per_host(1)
        .build()
        .expect("HTTP client");
    let mut random = 0x9E37_79B9_7F4A_7C15 ^ (client + 1);
    let mut samples = Vec::new();
    let mut n = 0u64;
    while !stop.load(Ordering::SeqCst) {
        let endpoint = match n % 3 {
            0 => Endpoint::Leaf,
            1 => Endpoint::Ids(1 + next_random(&mut random) % 40),
            _ => Endpoint::Ranges(1 + next_random(&mut random) % 150),
        };
        n += 1;
        let before = incarnations.get(node);
        let sent = Instant::now();
        let answer = fetch(&http, &base, TAG, endpoint).await;
        let received = Instant::now();
        let incarnation = (incarnations.get(node) == before).then_some(before);
        let failed = !matches!(answer, Answer::Ids(_));
        samples.push(Sample { client, node, incarnation, sent, received, endpoint, answer });
        if failed {
            tokio::time::sleep(BACKOFF).await;
        }
    }
    samples
}

/// The errors `docs/api.md#error-codes` allows on the segment paths while nodes die, pause and elect.
fn allowed_error(endpoint: Endpoint, status: u16, code: &str) -> bool {
    if endpoint.is_leaf() {
        status == 500 && (code == leaf_error(-1) || code == leaf_error(-3))
    } else {
        status == 503 && ["SEGMENTS_NOT_READY", "NOT_READY", "NO_LEADER"].contains(&code)
    }
}

/// `leafraft_segment_claims_total{tag="chaos",result="ok"}` of node `id`'s current incarnation.
async fn claims_of(cluster: &mut ProcessCluster, id: u64) -> u64 {
    let (status, text) = cluster.get_text(id, "/metrics").await;
    assert_eq!(status.as_u16(), 200, "/metrics of node {id}");
    metric(&text, "leafraft_segment_claims_total", &[("tag", TAG), ("result", "ok")]).unwrap_or(0.0) as u64
}

/// Eight clients (three per node on nodes 1 and 2, two on node 3), each with its own keep-alive
/// connection and 2 s timeouts, take IDs of a step-100 tag for 21 s over all three paths, while
/// the leader is SIGKILLed at 4 s and restarted on its data 2 s later, and the leader of the
/// moment is SIGSTOPped at 11 s for 3 s. Proves: no ID is handed out twice; per node incarnation
/// IDs strictly increase in real time (an answer received before another request was sent holds
/// only smaller IDs), so also per client; the only errors are the spec's 503
/// `SEGMENTS_NOT_READY`/`NOT_READY`/`NO_LEADER` and Leaf's `Result{id=-1|-3, status=EXCEPTION}`;
/// transport failures happen only at the node that was down or paused; both faulted nodes serve
/// again afterwards; `max_id` lies above every served ID; and the run made real progress (IDs,
/// claims, i.e. segment switches).
#[tokio::test]
async fn no_id_is_handed_out_twice_under_load_while_leaders_are_killed_and_paused() {
    // Segments used up within 50 ms double the next step, slower ones keep or halve it: the step
    // moves around the tag's 100, so there are many claims and switches.
    let mut cluster = ProcessCluster::new().start_members_with(&NODES, &["--segment-duration-ms", "50"]);
    let first_leader = cluster.wait_leader(TIMEOUT).await;
    cluster.client(first_leader).create_tag(&new_tag(TAG, None, Some(100), None)).await.expect("create the tag");
    for id in NODES {
        let (status, body) =
            cluster.request(id, reqwest::Method::GET, "/v1/tags/chaos?consistent=true", None, None).await;
        assert_eq!(status.as_u16(), 200, "node {id}: {body}");
    }
    let term_before = cluster.status(first_leader).await.expect("status").term;

    let incarnations = Arc::new(Incarnations::default());
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for client in 0..CLIENTS {
        let node = NODES[usize::try_from(client).expect("small") % NODES.len()];
        let base = cluster.url(node);
        clients.push(tokio::spawn(run_client(client, node, base, incarnations.clone(), stop.clone())));
    }
    let start = Instant::now();
    let mut faults = Vec::new();
    let mut leaders = vec![first_leader];

    // Fault 1: SIGKILL the leader; restart it on its data after a while.
    tokio::time::sleep_until((start + KILL_AT).into()).await;
    let killed = cluster.wait_leader(TIMEOUT).await;
    let from = Instant::now();
    cluster.kill(killed);
    incarnations.bump(killed);
    let elected = cluster.wait_leader(TIMEOUT).await;
    let election = from.elapsed();
    leaders.push(elected);
    tokio::time::sleep_until((from + DOWN_FOR).into()).await;
    cluster.restart(killed);
    cluster.wait_ready(killed, TIMEOUT).await;
    faults.push(Fault { node: killed, what: "SIGKILL + restart", from, to: Instant::now() });
    println!(
        "node {killed} killed at {:?}; node {elected} led after {election:?}; back at {:?}",
        from - start,
        start.elapsed()
    );

    // Fault 2: SIGSTOP the leader of the moment for a while, then SIGCONT.
    tokio::time::sleep_until((start + PAUSE_AT).into()).await;
    let paused = cluster.wait_leader(TIMEOUT).await;
    let from = Instant::now();
    cluster.signal(paused, libc::SIGSTOP);
    tokio::time::sleep_until((from + PAUSE_FOR).into()).await;
    cluster.signal(paused, libc::SIGCONT);
    let client = cluster.client(paused);
    wait_until(TIMEOUT, "the resumed node to answer", || async { client.ready().await.map_err(|e| e.to_string()) })
        .await;
    faults.push(Fault { node: paused, what: "SIGSTOP + SIGCONT", from, to: Instant::now() });
    let after_pause = cluster.wait_leader(TIMEOUT).await;
    leaders.push(after_pause);
    println!("node {paused} paused at {:?} for {PAUSE_FOR:?}; node {after_pause} leads after SIGCONT", from - start);

    tokio::time::sleep_until((start + LOAD).into()).await;
    stop.store(true, Ordering::SeqCst);
    let mut samples = Vec::new();
    for client in clients {
        samples.extend(client.await.expect("client task"));
    }
    let elapsed = start.elapsed();

    // Judge every answer.
    let mut all = IdSet::default();
    let mut ok_requests = 0u64;
    let mut errors: BTreeMap<(u16, String), u64> = BTreeMap::new();
    let mut unknown: BTreeMap<u64, u64> = BTreeMap::new();
    let mut violations: Vec<String> = Vec::new();
    let during_fault = |sample: &Sample| {
        faults.iter().any(|f| f.node == sample.node && sample.sent <= f.to && sample.received >= f.from)
    };
    for sample in &samples {
        let at = sample.sent - start;
        match &sample.answer {
            Answer::Ids(ranges) => {
                ok_requests += 1;
                all.add(ranges);
            }
            Answer::Error { status, code } => {
                *errors.entry((*status, code.clone())).or_default() += 1;
                if !allowed_error(sample.endpoint, *status, code) {
                    violations.push(format!("node {} at {at:?}, {:?}: {status} {code}", sample.node, sample.endpoint));
                }
            }
            Answer::Transport(error) => {
                *unknown.entry(sample.node).or_default() += 1;
                if !during_fault(sample) {
                    violations.push(format!(
                        "node {} (not down) at {at:?}, {:?}: no answer: {error}",
                        sample.node, sample.endpoint
                    ));
                }
            }
            Answer::Malformed(what) => {
                violations.push(format!("node {} at {at:?}, {:?}: {what}", sample.node, sample.endpoint))
            }
        }
    }

    // Per client, per incarnation of its node: each answer above the previous one.
    let mut previous: BTreeMap<(u64, u32), u64> = BTreeMap::new();
    for sample in &samples {
        let (Some(incarnation), Some((low, high))) = (sample.incarnation, sample.bounds()) else {
            continue;
        };
        if let Some(last) = previous.insert((sample.client, incarnation), high) {
            if low <= last {
                violations.push(format!(
                    "client {} (node {} incarnation {incarnation}): {low}..={high} after {last}",
                    sample.client, sample.node
                ));
            }
        }
    }

    // Per node incarnation, in real time: an answer received before a request was sent holds
    // only IDs below that request's.
    let mut by_incarnation: BTreeMap<(u64, u32), Vec<&Sample>> = BTreeMap::new();
    for sample in samples.iter().filter(|s| s.bounds().is_some()) {
        if let Some(incarnation) = sample.incarnation {
            by_incarnation.entry((sample.node, incarnation)).or_default().push(sample);
        }
    }
    for ((node, incarnation), mut group) in by_incarnation {
        group.sort_by_key(|s| s.received);
        let mut highest_so_far = Vec::with_capacity(group.len());
        for sample in &group {
            let high = sample.bounds().expect("IDs").1;
            highest_so_far.push(highest_so_far.last().map_or(high, |&h: &u64| h.max(high)));
        }
        let mut out_of_order = 0;
        for sample in &group {
            let earlier = group.partition_point(|s| s.received < sample.sent);
            let low = sample.bounds().expect("IDs").0;
            if earlier > 0 && highest_so_far[earlier - 1] >= low {
                out_of_order += 1;
                if out_of_order == 1 {
                    violations.push(format!(
                        "node {node} incarnation {incarnation}: an answer from {low} sent at {:?} after IDs up to {} were received",
                        sample.sent - start,
                        highest_so_far[earlier - 1]
                    ));
                }
            }
        }
        if out_of_order > 1 {
            violations.push(format!("node {node} incarnation {incarnation}: {out_of_order} answers out of order"));
        }
    }

    // Both faulted nodes served again.
    for fault in &faults {
        let served_after =
            samples.iter().filter(|s| s.node == fault.node && s.sent >= fault.to && s.bounds().is_some());
        if served_after.count() == 0 {
            violations.push(format!("node {} served nothing after {}", fault.node, fault.what));
        }
    }

    // Progress and the state after the run.
    let mut claims = 0;
    for id in NODES {
        claims += claims_of(&mut cluster, id).await;
    }
    let (status, view) = cluster.request(1, reqwest::Method::GET, "/v1/tags/chaos?consistent=true", None, None).await;
    assert_eq!(status.as_u16(), 200, "{view}");
    let max_id: u64 = view["max_id"].as_str().and_then(|m| m.parse().ok()).expect("max_id");
    let term_after = cluster.status(1).await.expect("status").term;
    let duplicates = all.duplicates();
    let per_node: BTreeMap<u64, u64> =
        NODES.iter().map(|&id| (id, samples.iter().filter(|s| s.node == id).map(|s| s.answer.count()).sum())).collect();

    // For each fault, the longest stretch each other node went without handing out an ID.
    let mut stalls: Vec<String> = Vec::new();
    for fault in &faults {
        for id in NODES.into_iter().filter(|&id| id != fault.node) {
            let mut answered: Vec<Instant> =
                samples.iter().filter(|s| s.node == id && s.bounds().is_some()).map(|s| s.received).collect();
            answered.sort_unstable();
            let longest = answered
                .windows(2)
                .filter(|pair| pair[1] >= fault.from && pair[0] <= fault.to)
                .map(|pair| pair[1] - pair[0])
                .max()
                .unwrap_or(fault.to - fault.from);
            stalls.push(format!("node {id} {longest:?} while node {} was {}", fault.node, fault.what));
        }
    }

    println!("----- chaos summary over {elapsed:?}");
    println!("requests: {} ({ok_requests} with IDs); IDs: {} (by node {per_node:?})", samples.len(), all.len());
    println!("errors by (status, code): {errors:?}");
    println!("no answer (unknown) by node: {unknown:?}");
    println!("claims committed (current incarnations): {claims}; max_id {max_id}; largest ID {:?}", all.max());
    println!("leaders seen: {leaders:?}; term {term_before} -> {term_after}; first failover took {election:?}");
    for fault in &faults {
        println!("fault: node {} {} from {:?} to {:?}", fault.node, fault.what, fault.from - start, fault.to - start);
    }
    println!("longest stretch without an ID: {}", stalls.join("; "));
    println!("duplicates: {}", duplicates.len());

    assert_eq!(duplicates, vec![], "IDs handed out twice");
    assert!(violations.is_empty(), "{} violations:\n{}", violations.len(), violations.join("\n"));
    assert!(all.max().is_some_and(|largest| largest < max_id), "max_id {max_id} is not above every served ID");
    assert!(all.len() >= 5_000, "only {} IDs in {elapsed:?}", all.len());
    assert!(claims >= 20, "only {claims} claims: too few segment switches");
    assert!(per_node.values().all(|&ids| ids >= 500), "a node served too few IDs: {per_node:?}");
    assert!(term_after > term_before, "no leader change");
}
