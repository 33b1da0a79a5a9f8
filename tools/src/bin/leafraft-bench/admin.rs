//! What the scenario benchmarks ask a cluster besides IDs: the leader, the Raft commit index
//! (`GET /v1/cluster`) sampled once a second during a run, `/metrics` totals, and the admin
//! writes that set a scenario up (namespaces, tag imports) with bounded concurrency.

use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;
use tokio::time::Instant;

pub fn client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder().timeout(Duration::from_secs(30)).build().map_err(|e| e.to_string())
}

async fn cluster_status(http: &reqwest::Client, node: &str) -> Result<Value, String> {
    let answer = http.get(format!("http://{node}/v1/cluster")).send().await.map_err(|e| format!("{node}: {e}"))?;
    answer.json().await.map_err(|e| format!("{node}: /v1/cluster: {e}"))
}

/// The leader's address as the first node that knows one names it.
pub async fn leader(http: &reqwest::Client, nodes: &[String]) -> Result<String, String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        for node in nodes {
            let Ok(status) = cluster_status(http, node).await else { continue };
            let Some(id) = status["leader_id"].as_u64() else { continue };
            if let Some(addr) = status["nodes"][id.to_string()].as_str() {
                return Ok(addr.to_string());
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err("no node named a leader within 30 s".into())
}

/// The highest commit index any node reports: the leader's (a follower's is never above it).
pub async fn commit_index(http: &reqwest::Client, nodes: &[String]) -> Option<u64> {
    let answers = futures::future::join_all(nodes.iter().map(|node| cluster_status(http, node))).await;
    answers.iter().filter_map(|status| status.as_ref().ok()?["commit_index"].as_u64()).max()
}

/// Waits until every node has applied what was committed when the wait began.
pub async fn wait_applied(http: &reqwest::Client, nodes: &[String]) -> Result<(), String> {
    let target = commit_index(http, nodes).await.ok_or("no node reports a commit index")?;
    let deadline = Instant::now() + Duration::from_secs(120);
    for node in nodes {
        loop {
            let applied = cluster_status(http, node).await.ok().and_then(|s| s["applied_index"].as_u64());
            if applied.is_some_and(|applied| applied >= target) {
                break;
            }
            if Instant::now() >= deadline {
                return Err(format!("{node} did not apply index {target} within 120 s"));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(())
}

/// The sum over `nodes` of every `/metrics` series whose line starts with `prefix`.
pub async fn metric_total(http: &reqwest::Client, nodes: &[String], prefix: &str) -> f64 {
    let mut total = 0.0;
    for node in nodes {
        let Ok(answer) = http.get(format!("http://{node}/metrics")).send().await else { continue };
        let Ok(text) = answer.text().await else { continue };
        total += text
            .lines()
            .filter(|line| line.starts_with(prefix))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>();
    }
    total
}

/// Committed Raft entries over a run, from the commit index sampled once a second.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Commits {
    pub entries: u64,
    pub secs: f64,
    pub per_sec: f64,
    /// The most entries committed between two samples, per second.
    pub busiest_per_sec: f64,
}

/// Samples the commit index once a second until `stop` is dropped or set.
pub struct CommitSampler {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<Vec<(Instant, u64)>>,
}

impl CommitSampler {
    pub fn start(http: reqwest::Client, nodes: Vec<String>) -> CommitSampler {
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(async move {
            let mut samples = Vec::new();
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stopped.changed() => break,
                }
                let at = Instant::now();
                if let Some(index) = commit_index(&http, &nodes).await {
                    samples.push((at, index));
                }
            }
            samples
        });
        CommitSampler { stop, task }
    }

    /// Takes a last sample and answers the entries committed from the first sample to it.
    pub async fn finish(self, http: &reqwest::Client, nodes: &[String]) -> Commits {
        let _ = self.stop.send(true);
        let mut samples = self.task.await.unwrap_or_default();
        if let Some(index) = commit_index(http, nodes).await {
            samples.push((Instant::now(), index));
        }
        commits(&samples)
    }
}

fn commits(samples: &[(Instant, u64)]) -> Commits {
    let (Some(first), Some(last)) = (samples.first(), samples.last()) else { return Commits::default() };
    let secs = last.0.duration_since(first.0).as_secs_f64();
    let entries = last.1.saturating_sub(first.1);
    let busiest_per_sec = samples
        .windows(2)
        .map(|pair| pair[1].1.saturating_sub(pair[0].1) as f64 / pair[1].0.duration_since(pair[0].0).as_secs_f64())
        .filter(|rate| rate.is_finite())
        .fold(0.0, f64::max);
    Commits { entries, secs, per_sec: if secs > 0.0 { entries as f64 / secs } else { 0.0 }, busiest_per_sec }
}

/// POSTs every body to `url`, `concurrency` at a time. A status in `accept` is success; 503
/// (`NO_LEADER`: the write may or may not have applied, and every write here is idempotent) is
/// tried again up to 5 times; anything else fails the whole setup.
pub async fn post_all(
    http: &reqwest::Client,
    url: &str,
    bodies: Vec<Value>,
    concurrency: usize,
    accept: &[u16],
) -> Result<(), String> {
    let mut posts =
        futures::stream::iter(bodies).map(|body| post_one(http, url, body, accept)).buffer_unordered(concurrency);
    while let Some(result) = posts.next().await {
        result?;
    }
    Ok(())
}

async fn post_one(http: &reqwest::Client, url: &str, body: Value, accept: &[u16]) -> Result<(), String> {
    for _ in 0..5 {
        let answer = http.post(url).json(&body).send().await.map_err(|e| format!("POST {url}: {e}"))?;
        let status = answer.status().as_u16();
        if accept.contains(&status) {
            return Ok(());
        }
        let text = answer.text().await.unwrap_or_default();
        if status != 503 {
            return Err(format!("POST {url}: {status} {text}"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(format!("POST {url}: still 503 after 5 tries"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_are_the_first_to_last_delta_and_the_busiest_interval() {
        let t0 = Instant::now();
        let samples = [(t0, 100), (t0 + Duration::from_secs(1), 150), (t0 + Duration::from_secs(3), 400)];
        let c = commits(&samples);
        assert_eq!(c.entries, 300);
        assert!((c.per_sec - 100.0).abs() < 1e-9);
        assert!((c.busiest_per_sec - 125.0).abs() < 1e-9);
        assert_eq!(commits(&[]).entries, 0);
    }
}
