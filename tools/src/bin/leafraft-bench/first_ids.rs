//! `leafraft bench first-ids`: the first ID of each of many segment tags.
//! The tags are imported first (`POST /v1/import/tags`, batches of 500 rows, on the leader), tag
//! `i` starting at `1 + i × STRIDE`; then every tag is asked for one ID exactly once
//! (`GET /api/segment/get/{tag}`), tag `i` on node `i mod n`, `concurrency` requests in flight
//! spread evenly over the nodes. Each first ID costs its node a claim through Raft. The report:
//! the time until every request was answered, failures, latency percentiles, whether every ID is
//! distinct and inside its own tag's first range, and the Raft entries committed per second.
//! Tags not yet asked `give_up_after` the first request are not asked, and fail: a cluster that
//! cannot keep up ends the run instead of stretching it to hours.

use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::admin;
use crate::conn::decimal_id;
use crate::conn::duplicates;
use crate::conn::Conn;
use crate::conn::Failure;
use crate::conn::Failures;
use crate::http::micros_since;
use crate::namespaces::Latency;
use crate::report::new_histogram;

/// Tag `i` starts at `1 + i × STRIDE`: far enough apart that every tag's first claim (at most
/// `STRIDE` IDs) stays inside its own span, so IDs of different tags never coincide and an ID
/// outside its tag's span shows.
const STRIDE: u64 = 1_000_000;

/// Rows per import request (what `leafraft tag import` sends).
const IMPORT_BATCH: usize = 500;

#[derive(Debug, Clone)]
pub struct FirstIdsOptions {
    pub nodes: Vec<String>,
    pub tags: usize,
    pub concurrency: usize,
    /// Import requests in flight.
    pub import_concurrency: usize,
    pub step: u64,
    /// Tag names are `{prefix}-{index}`.
    pub prefix: String,
    pub timeout: Duration,
    pub give_up_after: Duration,
}

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct FirstIdsReport {
    pub tags: usize,
    pub import_secs: f64,
    /// From the first request to the last answer.
    pub total_secs: f64,
    pub sent: u64,
    pub answered: u64,
    pub failed: u64,
    pub failures: Vec<(String, u64)>,
    pub latency: Latency,
    pub duplicates: u64,
    /// IDs outside their tag's first range.
    pub out_of_range: u64,
    pub commits: admin::Commits,
    /// Segment claims the nodes proposed and saw succeed during the run.
    pub claims: f64,
}

pub fn tag_name(prefix: &str, index: usize) -> String {
    format!("{prefix}-{index:06}")
}

fn first_id_of(index: usize) -> u64 {
    1 + index as u64 * STRIDE
}

pub async fn run(options: &FirstIdsOptions) -> Result<FirstIdsReport, String> {
    if options.nodes.is_empty() || options.tags == 0 || options.concurrency == 0 {
        return Err("need nodes, tags and a concurrency above 0".into());
    }
    if options.step == 0 || options.step > STRIDE {
        return Err(format!("--step must be 1 to {STRIDE}"));
    }
    let http = admin::client()?;
    let import_secs = import(&http, options).await?;
    let claims_before = segment_claims(&http, &options.nodes).await;
    let sampler = admin::CommitSampler::start(http.clone(), options.nodes.clone());
    let began = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    // One queue per node: tag i belongs to node i mod n; node k's workers take its tags in order.
    let queues: Vec<Arc<AtomicUsize>> = options.nodes.iter().map(|_| Arc::new(AtomicUsize::new(0))).collect();
    for w in 0..options.concurrency {
        let node = w % options.nodes.len();
        let job = Job {
            node,
            queue: queues[node].clone(),
            addr: options.nodes[node].clone(),
            give_up_at: began + options.give_up_after,
            options: options.clone(),
        };
        workers.spawn(worker(job));
    }
    let mut report = FirstIdsReport { tags: options.tags, import_secs, ..FirstIdsReport::default() };
    let (mut histogram, mut failures, mut ids) = (new_histogram(), Failures::new(), Vec::new());
    while let Some(done) = workers.join_next().await {
        let done = done.map_err(|e| format!("a worker failed: {e}"))?;
        report.sent += done.sent;
        report.out_of_range += done.out_of_range;
        let _ = histogram.add(&done.histogram);
        for (failure, n) in done.failures {
            *failures.entry(failure).or_default() += n;
        }
        ids.extend(done.ids);
    }
    report.total_secs = began.elapsed().as_secs_f64();
    report.commits = sampler.finish(&http, &options.nodes).await;
    report.claims = segment_claims(&http, &options.nodes).await - claims_before;
    report.answered = ids.len() as u64;
    report.failed = options.tags as u64 - report.answered;
    report.failures = failures.into_iter().map(|(failure, n)| (failure.to_string(), n)).collect();
    if report.sent < options.tags as u64 {
        let unasked = format!("not asked within {} s", options.give_up_after.as_secs());
        report.failures.push((unasked, options.tags as u64 - report.sent));
    }
    report.latency = Latency::of(&histogram);
    report.duplicates = duplicates(&mut ids);
    Ok(report)
}

/// Imports the tags on the leader and waits until every node applied them. Answers the import time.
async fn import(http: &reqwest::Client, options: &FirstIdsOptions) -> Result<f64, String> {
    let leader = admin::leader(http, &options.nodes).await?;
    let began = Instant::now();
    let indexes: Vec<usize> = (0..options.tags).collect();
    let bodies = indexes
        .chunks(IMPORT_BATCH)
        .map(|chunk| {
            let rows: Vec<serde_json::Value> = chunk
                .iter()
                .map(|&i| {
                    let tag = tag_name(&options.prefix, i);
                    serde_json::json!({ "tag": tag, "max_id": first_id_of(i), "step": options.step })
                })
                .collect();
            serde_json::json!({ "tags": rows })
        })
        .collect();
    admin::post_all(http, &format!("http://{leader}/v1/import/tags"), bodies, options.import_concurrency, &[200])
        .await?;
    let import_secs = began.elapsed().as_secs_f64();
    admin::wait_applied(http, &options.nodes).await?;
    Ok(import_secs)
}

async fn segment_claims(http: &reqwest::Client, nodes: &[String]) -> f64 {
    admin::metric_total(http, nodes, "leafraft_segment_claims_all_tags_total{result=\"ok\"}").await
}

struct Job {
    node: usize,
    /// How many of this node's tags were taken; the next is `node + taken × nodes`.
    queue: Arc<AtomicUsize>,
    addr: String,
    give_up_at: Instant,
    options: FirstIdsOptions,
}

struct WorkerResult {
    sent: u64,
    out_of_range: u64,
    failures: Failures,
    histogram: hdrhistogram::Histogram<u64>,
    ids: Vec<u64>,
}

async fn worker(job: Job) -> WorkerResult {
    let options = &job.options;
    let nodes = options.nodes.len();
    let mut conn = Conn::new(&job.addr, options.timeout);
    let mut result = WorkerResult {
        sent: 0,
        out_of_range: 0,
        failures: Failures::new(),
        histogram: new_histogram(),
        ids: Vec::new(),
    };
    loop {
        let index = job.node + job.queue.fetch_add(1, Ordering::Relaxed) * nodes;
        if index >= options.tags || Instant::now() >= job.give_up_at {
            return result;
        }
        let path = format!("/api/segment/get/{}", tag_name(&options.prefix, index));
        result.sent += 1;
        let sent = Instant::now();
        let answer = conn.get(&path).await;
        result.histogram.saturating_record(micros_since(sent));
        match answer.map(|body| (decimal_id(&body), body)) {
            Ok((Some(id), _)) => {
                let first = first_id_of(index);
                if !(first..first + STRIDE).contains(&id) {
                    result.out_of_range += 1;
                }
                result.ids.push(id);
            }
            Ok((None, body)) => {
                let text = String::from_utf8_lossy(&body).chars().take(60).collect();
                *result.failures.entry(Failure::Status(200, text)).or_default() += 1;
            }
            Err(failure) => *result.failures.entry(failure).or_default() += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_start_a_stride_apart() {
        assert_eq!(first_id_of(0), 1);
        assert_eq!(first_id_of(99_999), 99_999_000_001);
        assert_eq!(tag_name("first", 42), "first-000042");
    }
}
