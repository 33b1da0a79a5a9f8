//! `leafraft bench namespaces`: many time-sequence namespaces, each asked
//! for one ID per second on every node (or `ids_per_second` IDs: fewer namespaces asked more often
//! send the same requests with fewer claims, which measures the request path's own floor). The
//! namespaces are created first (`POST /v1/timeseq`, bounded concurrency, on the leader); then,
//! for `duration` seconds, every node gets `GET /api/timeseq/get/{ns}?shard=0` that many times
//! per namespace per second, its requests spread evenly over
//! the second on keep-alive connections (open loop: a request is due at its time whatever the
//! answers before it did, and its latency counts from that time when its connection held it
//! back). A connection still behind `grace` after the last second sends nothing more: a server
//! that cannot keep up would otherwise stretch the run by the whole backlog (64 connections
//! each owing hundreds of requests a second of 1 s waits), and the requests it never sent are
//! failures too. The report: requests due, sent, answered and failed (a non-2xx answer fails, and
//! so does a request never sent), latency percentiles of the sent ones (all, and from `settle`
//! seconds on), duplicates within each namespace, and the Raft entries committed per second
//! during the run, next to the claims the nodes counted.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::admin;
use crate::conn::decimal_id;
use crate::conn::duplicates;
use crate::conn::Conn;
use crate::conn::Failures;
use crate::http::micros_since;
use crate::report::new_histogram;
use crate::report::Percentiles;

#[derive(Debug, Clone)]
pub struct NamespacesOptions {
    /// `host:port` of every node.
    pub nodes: Vec<String>,
    pub namespaces: usize,
    /// IDs each namespace is asked for per second on every node.
    pub ids_per_second: usize,
    /// IDs per request: above 1, `GET /v1/timeseq/{ns}?shard=0&count=N` instead of Leaf's path,
    /// and `ids_per_second / count` requests (rounded up) per namespace per second on every node.
    pub count: usize,
    pub duration: Duration,
    /// Keep-alive connections per node.
    pub connections: usize,
    /// Namespace creations in flight.
    pub create_concurrency: usize,
    /// Requests due before this much of the run are left out of the settled percentiles.
    pub settle: Duration,
    /// Namespace names are `{prefix}-{index}`.
    pub prefix: String,
    /// A request unanswered this long fails.
    pub timeout: Duration,
    /// Requests still unsent this long after the last second are not sent (they fail).
    pub grace: Duration,
}

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Latency {
    pub requests: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
}

impl Latency {
    pub fn of(histogram: &hdrhistogram::Histogram<u64>) -> Latency {
        let p = Percentiles::of(histogram);
        Latency { requests: histogram.len(), p50_us: p.p50, p99_us: p.p99, p999_us: p.p999, max_us: p.max }
    }
}

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct NamespacesReport {
    pub namespaces: usize,
    pub ids_per_second: usize,
    pub count: usize,
    pub nodes: usize,
    pub duration_secs: u64,
    pub create_secs: f64,
    /// From the first request due to the last answer.
    pub run_secs: f64,
    /// Namespaces × IDs per second × nodes × seconds.
    pub due: u64,
    pub sent: u64,
    pub answered: u64,
    pub failed: u64,
    /// `"<status> <body>"` or the transport failure, with counts.
    pub failures: Vec<(String, u64)>,
    pub latency: Latency,
    pub settled_latency: Latency,
    pub duplicates: u64,
    pub commits: admin::Commits,
    /// Time-sequence claims the nodes committed during the run, one-second and window claims
    /// (`leafraft_timeseq_events_total`).
    pub claims: f64,
    /// Of those, the claims committed after the first `settle` of the run, and the answers to
    /// requests due in that time: the steady cost of claims, without the first wave.
    pub settled_claims: f64,
    pub settled_answered: u64,
    /// Requests that waited for a claim.
    pub waits: f64,
    /// Per second of the run (by when its requests were due): where a tail comes from.
    pub seconds: Vec<SecondStats>,
    /// How much of a second's sequence space the namespaces used, from the IDs answered.
    pub sequences: crate::sequences::SequenceUse,
}

/// The requests due in one second of the run.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct SecondStats {
    pub sent: u64,
    /// Sent requests whose latency (from when they were due) exceeded 5 ms.
    pub over_5ms: u64,
    pub max_us: u64,
}

pub fn namespace_name(prefix: &str, index: usize) -> String {
    format!("{prefix}-{index:05}")
}

/// The moment request `index` of a second (of `per_second` on each node) is due on node `node` in
/// second `second` of a run starting at `start`: the requests in order over the second, the nodes
/// offset within a request's slot.
fn due(start: Instant, second: u64, index: usize, per_second: usize, node: usize, nodes: usize) -> Instant {
    let slot = (index * nodes + node) as f64 / (per_second * nodes) as f64;
    start + Duration::from_secs(second) + Duration::from_secs_f64(slot)
}

pub async fn run(options: &NamespacesOptions) -> Result<NamespacesReport, String> {
    if options.nodes.is_empty()
        || options.namespaces == 0
        || options.connections == 0
        || options.ids_per_second == 0
        || options.count == 0
    {
        return Err("need nodes, namespaces, IDs per second, IDs per request and connections above 0".into());
    }
    let per_second =
        options.namespaces.checked_mul(requests_per_namespace(options)).ok_or("too many requests a second")?;
    let http = admin::client()?;
    let create_secs = create(&http, options).await?;
    let names: Arc<Vec<String>> = Arc::new(
        (0..options.namespaces).map(|i| request_path(&namespace_name(&options.prefix, i), options.count)).collect(),
    );
    let (claims_before, waits_before) = timeseq_counters(&http, &options.nodes).await;
    let sampler = admin::CommitSampler::start(http.clone(), options.nodes.clone());
    let start = Instant::now() + Duration::from_millis(200);
    let at_settle = {
        let (http, nodes, settle_at) = (http.clone(), options.nodes.clone(), start + options.settle);
        tokio::spawn(async move {
            tokio::time::sleep_until(settle_at).await;
            timeseq_counters(&http, &nodes).await.0
        })
    };
    let mut workers = tokio::task::JoinSet::new();
    for (node, addr) in options.nodes.iter().enumerate() {
        for connection in 0..options.connections {
            let plan = Plan {
                addr: addr.clone(),
                node,
                paths: names.clone(),
                mine: (connection..per_second).step_by(options.connections).collect(),
                start,
                options: options.clone(),
            };
            workers.spawn(worker(plan));
        }
    }
    let mut report = NamespacesReport {
        namespaces: options.namespaces,
        ids_per_second: options.ids_per_second,
        count: options.count,
        nodes: options.nodes.len(),
        duration_secs: options.duration.as_secs(),
        create_secs,
        ..NamespacesReport::default()
    };
    let (mut all, mut settled, mut failures, mut ids) = (new_histogram(), new_histogram(), Failures::new(), Vec::new());
    while let Some(done) = workers.join_next().await {
        let done = done.map_err(|e| format!("a worker failed: {e}"))?;
        report.due += done.due;
        report.sent += done.sent;
        report.answered += done.answered;
        let _ = all.add(&done.all);
        let _ = settled.add(&done.settled);
        for (failure, n) in done.failures {
            *failures.entry(failure).or_default() += n;
        }
        ids.extend(done.ids);
        if report.seconds.len() < done.seconds.len() {
            report.seconds.resize(done.seconds.len(), SecondStats::default());
        }
        for (total, stats) in report.seconds.iter_mut().zip(&done.seconds) {
            total.sent += stats.sent;
            total.over_5ms += stats.over_5ms;
            total.max_us = total.max_us.max(stats.max_us);
        }
    }
    report.run_secs = start.elapsed().as_secs_f64();
    report.commits = sampler.finish(&http, &options.nodes).await;
    let (claims_after, waits_after) = timeseq_counters(&http, &options.nodes).await;
    (report.claims, report.waits) = (claims_after - claims_before, waits_after - waits_before);
    report.settled_claims = claims_after - at_settle.await.map_err(|e| format!("the settle sample failed: {e}"))?;
    report.settled_answered = settled.len();
    report.failed = report.due - report.answered;
    report.failures = failures.into_iter().map(|(failure, n)| (failure.to_string(), n)).collect();
    if report.due > report.sent {
        let unsent = format!("not sent: its connection was still behind {} s after the end", options.grace.as_secs());
        report.failures.push((unsent, report.due - report.sent));
    }
    report.latency = Latency::of(&all);
    report.settled_latency = Latency::of(&settled);
    report.duplicates = duplicates(&mut ids);
    let layout = crate::sequences::layout(&http, &options.nodes[0], &namespace_name(&options.prefix, 0)).await?;
    report.sequences = crate::sequences::SequenceUse::of(&ids, layout, &report.failures);
    Ok(report)
}

/// Requests per namespace per second on every node.
fn requests_per_namespace(options: &NamespacesOptions) -> usize {
    options.ids_per_second.div_ceil(options.count)
}

/// Leaf's path for one ID; the API's list path for more.
fn request_path(namespace: &str, count: usize) -> String {
    if count == 1 {
        format!("/api/timeseq/get/{namespace}?shard=0")
    } else {
        format!("/v1/timeseq/{namespace}?shard=0&count={count}")
    }
}

/// Creates the namespaces and a probe namespace on the leader, waits until every node applied
/// them and serves the probe (its first peer clock check done). Answers the creation time.
async fn create(http: &reqwest::Client, options: &NamespacesOptions) -> Result<f64, String> {
    let leader = admin::leader(http, &options.nodes).await?;
    let began = Instant::now();
    let probe = format!("{}-probe", options.prefix);
    let bodies = (0..options.namespaces)
        .map(|i| namespace_name(&options.prefix, i))
        .chain(std::iter::once(probe.clone()))
        .map(|name| serde_json::json!({ "namespace": name }))
        .collect();
    // 201 created, 409 NAMESPACE_EXISTS: a namespace of an earlier run is as good.
    admin::post_all(http, &format!("http://{leader}/v1/timeseq"), bodies, options.create_concurrency, &[201, 409])
        .await?;
    let create_secs = began.elapsed().as_secs_f64();
    admin::wait_applied(http, &options.nodes).await?;
    for addr in &options.nodes {
        let mut conn = Conn::new(addr, options.timeout);
        let deadline = Instant::now() + Duration::from_secs(30);
        while let Err(failure) = conn.get(&format!("/api/timeseq/get/{probe}?shard=0")).await {
            if Instant::now() >= deadline {
                return Err(format!("{addr} serves no time-sequence ID within 30 s: {failure}"));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(create_secs)
}

async fn timeseq_counters(http: &reqwest::Client, nodes: &[String]) -> (f64, f64) {
    // One-second claims and window claims alike: each is one claim of the registry.
    let claims = admin::metric_total(http, nodes, "leafraft_timeseq_events_total{kind=\"claims\"}").await
        + admin::metric_total(http, nodes, "leafraft_timeseq_events_total{kind=\"window_claims\"}").await;
    let waits = admin::metric_total(http, nodes, "leafraft_timeseq_events_total{kind=\"waits\"}").await;
    (claims, waits)
}

struct Plan {
    addr: String,
    node: usize,
    /// The request path of every namespace, by index.
    paths: Arc<Vec<String>>,
    /// The requests of each second this connection sends, in increasing order (so in order of
    /// their time); request `i` asks for namespace `i % namespaces`.
    mine: Vec<usize>,
    start: Instant,
    options: NamespacesOptions,
}

struct WorkerResult {
    due: u64,
    sent: u64,
    answered: u64,
    failures: Failures,
    all: hdrhistogram::Histogram<u64>,
    settled: hdrhistogram::Histogram<u64>,
    /// (namespace index, ID) of every answer.
    ids: Vec<(u32, u64)>,
    seconds: Vec<SecondStats>,
}

async fn worker(plan: Plan) -> WorkerResult {
    let options = &plan.options;
    let mut conn = Conn::new(&plan.addr, options.timeout);
    let mut result = WorkerResult {
        due: 0,
        sent: 0,
        answered: 0,
        failures: Failures::new(),
        all: new_histogram(),
        settled: new_histogram(),
        ids: Vec::with_capacity(plan.mine.len() * options.count * options.duration.as_secs() as usize),
        seconds: vec![SecondStats::default(); options.duration.as_secs() as usize],
    };
    let settle_at = plan.start + options.settle;
    let cutoff = plan.start + options.duration + options.grace;
    for second in 0..options.duration.as_secs() {
        for &request in &plan.mine {
            let index = request % options.namespaces;
            let per_second = options.namespaces * requests_per_namespace(options);
            let scheduled = due(plan.start, second, request, per_second, plan.node, options.nodes.len());
            result.due += 1;
            if Instant::now() >= cutoff {
                continue;
            }
            // Behind schedule: an earlier answer held this connection past this request's time,
            // which the request's latency must carry (coordinated omission).
            let charged_from = if Instant::now() < scheduled {
                tokio::time::sleep_until(scheduled).await;
                Instant::now()
            } else {
                scheduled
            };
            result.sent += 1;
            let answer = conn.get(&plan.paths[index]).await;
            let micros = micros_since(charged_from);
            result.all.saturating_record(micros);
            if scheduled >= settle_at {
                result.settled.saturating_record(micros);
            }
            if let Some(stats) = result.seconds.get_mut(second as usize) {
                stats.sent += 1;
                stats.over_5ms += u64::from(micros > 5_000);
                stats.max_us = stats.max_us.max(micros);
            }
            match answer.map(|body| (answered_ids(&body, options.count), body)) {
                Ok((Some(ids), _)) => {
                    result.answered += 1;
                    result.ids.extend(ids.into_iter().map(|id| (index as u32, id)));
                }
                Ok((None, body)) => {
                    let text = String::from_utf8_lossy(&body).chars().take(60).collect();
                    *result.failures.entry(crate::conn::Failure::Status(200, text)).or_default() += 1;
                }
                Err(failure) => *result.failures.entry(failure).or_default() += 1,
            }
        }
    }
    result
}

/// The IDs of a 200 answer: Leaf's one decimal, or the list path's `ids`, exactly `count` of them.
fn answered_ids(body: &[u8], count: usize) -> Option<Vec<u64>> {
    if count == 1 {
        return decimal_id(body).map(|id| vec![id]);
    }
    #[derive(serde::Deserialize)]
    struct Ids {
        ids: Vec<String>,
    }
    let ids: Vec<u64> =
        serde_json::from_slice::<Ids>(body).ok()?.ids.iter().map(|id| id.parse().ok()).collect::<Option<_>>()?;
    (ids.len() == count).then_some(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_spread_over_the_second_and_the_nodes() {
        let start = Instant::now();
        let at = |second, index, node| due(start, second, index, 4, node, 2).duration_since(start).as_secs_f64();
        let slots: Vec<f64> = (0..4).flat_map(|i| (0..2).map(move |n| (i, n))).map(|(i, n)| at(0, i, n)).collect();
        assert_eq!(slots, vec![0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875]);
        assert!((at(3, 2, 1) - 3.625).abs() < 1e-9);
    }

    /// At R IDs a second, request `i` of a second asks for namespace `i % namespaces`: each
    /// namespace R times, at evenly spaced moments.
    #[test]
    fn a_namespace_asked_several_times_a_second_is_asked_at_even_intervals() {
        let start = Instant::now();
        let (namespaces, ids_per_second) = (3, 4);
        let per_second = namespaces * ids_per_second;
        let moments: Vec<f64> = (0..per_second)
            .filter(|request| request % namespaces == 1)
            .map(|request| due(start, 0, request, per_second, 0, 1).duration_since(start).as_secs_f64())
            .collect();
        assert_eq!(moments.len(), ids_per_second);
        let expected = [1.0 / 12.0, 4.0 / 12.0, 7.0 / 12.0, 10.0 / 12.0];
        assert!(moments.iter().zip(expected).all(|(at, want)| (at - want).abs() < 1e-9), "{moments:?}");
    }
}
