//! `leafraft bench etcd-claims`: the baseline for claims. The same claim leafraft commits as one
//! Raft entry (`max_id += step`), done against etcd as Leaf-on-etcd would: read the key, then a
//! compare-and-swap transaction on its `mod_revision`, retried on conflict. It talks to etcd's
//! JSON gateway (`/v3/kv/range`, `/v3/kv/txn`), so no gRPC stack is needed.

use std::time::Duration;
use std::time::Instant;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde_json::json;
use serde_json::Value;

use crate::claims::ClaimsResult;
use crate::report::new_histogram;
use crate::report::Percentiles;

const KEY: &str = "leafraft-bench-max-id";

#[derive(Debug, Clone)]
pub struct EtcdOptions {
    pub endpoints: Vec<String>,
    pub concurrency: Vec<usize>,
    pub duration: Duration,
    pub step: u64,
}

/// Results per concurrency level, and the CAS conflicts (retries) each level needed.
pub async fn run(options: &EtcdOptions) -> Result<Vec<(ClaimsResult, u64)>, String> {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().map_err(|e| e.to_string())?;
    let first = options.endpoints.first().ok_or("no etcd endpoint")?;
    post(&http, first, "/v3/kv/put", json!({"key": b64(KEY), "value": b64("1")})).await?;
    let mut results = Vec::new();
    for &concurrency in &options.concurrency {
        let deadline = Instant::now() + options.duration;
        let started = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..concurrency {
            let endpoint = options.endpoints[i % options.endpoints.len()].clone();
            let http = http.clone();
            let step = options.step;
            tasks.spawn(async move {
                let mut histogram = new_histogram();
                let (mut errors, mut conflicts) = (0u64, 0u64);
                while Instant::now() < deadline {
                    let t0 = Instant::now();
                    match claim(&http, &endpoint, step, &mut conflicts).await {
                        Ok(()) => {
                            histogram.saturating_record(u64::try_from(t0.elapsed().as_micros()).unwrap_or(u64::MAX))
                        }
                        Err(_) => errors += 1,
                    }
                }
                (histogram, errors, conflicts)
            });
        }
        let mut histogram = new_histogram();
        let (mut errors, mut conflicts) = (0, 0);
        while let Some(res) = tasks.join_next().await {
            let (h, e, c) = res.map_err(|e| e.to_string())?;
            let _ = histogram.add(h);
            errors += e;
            conflicts += c;
        }
        let claims = histogram.len();
        let result = ClaimsResult {
            concurrency,
            claims,
            errors,
            claims_per_sec: claims as f64 / started.elapsed().as_secs_f64(),
            latency_us: Percentiles::of(&histogram),
        };
        results.push((result, conflicts));
    }
    Ok(results)
}

/// One claim: read, then CAS until it wins.
async fn claim(http: &reqwest::Client, endpoint: &str, step: u64, conflicts: &mut u64) -> Result<(), String> {
    loop {
        let range = post(http, endpoint, "/v3/kv/range", json!({"key": b64(KEY)})).await?;
        let kv = &range["kvs"][0];
        let revision = kv["mod_revision"].as_str().ok_or("no mod_revision")?.to_string();
        let value = STANDARD.decode(kv["value"].as_str().ok_or("no value")?).map_err(|e| e.to_string())?;
        let max_id: u64 = String::from_utf8_lossy(&value).parse().map_err(|_| "max_id is not a number")?;
        let next = max_id.checked_add(step).ok_or("max_id overflow")?;
        let txn = json!({
            "compare": [{"key": b64(KEY), "result": "EQUAL", "target": "MOD", "mod_revision": revision}],
            "success": [{"request_put": {"key": b64(KEY), "value": b64(&next.to_string())}}],
        });
        let answer = post(http, endpoint, "/v3/kv/txn", txn).await?;
        if answer["succeeded"].as_bool() == Some(true) {
            return Ok(());
        }
        *conflicts += 1;
    }
}

fn b64(text: &str) -> String {
    STANDARD.encode(text)
}

async fn post(http: &reqwest::Client, endpoint: &str, path: &str, body: Value) -> Result<Value, String> {
    let response = http.post(format!("{endpoint}{path}")).json(&body).send().await.map_err(|e| e.to_string())?;
    if !response.status().is_success() {
        return Err(format!("etcd answered {}", response.status()));
    }
    response.json().await.map_err(|e| e.to_string())
}
