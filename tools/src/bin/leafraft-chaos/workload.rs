//! The clients: concurrent loops calling every ID endpoint on every node, recording each request
//! into a [`History`]; and a poller reading each node's `max_id` of every tag.
//!
//! A client never retries: a request that times out or breaks is recorded as unknown and the
//! client moves on, so what the checker sees is exactly what a caller would have got.

use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use rand::Rng;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::Value;
use tokio::sync::watch;

use crate::history::Endpoint;
use crate::history::MaxIdRead;
use crate::history::Op;
use crate::history::Outcome;
use crate::nodes::Nodes;
use crate::nodes::Target;

/// The tags of a run: a small step, so claims (Raft writes) are frequent, Leaf's default, a
/// monotonic tag ([`MONOTONIC_TAG`]), served by the leader in real-time order, a segment tag
/// the `switch-to-monotonic` fault moves to monotonic during the run ([`SWITCH_TAG`]), and a
/// scrambled tag ([`SCRAMBLED_TAG`]).
pub const TAGS: [(&str, u64); 5] =
    [("chaos-small", 20), ("chaos-leaf", 1000), (MONOTONIC_TAG, 100), (SWITCH_TAG, 100), (SCRAMBLED_TAG, 50)];

/// The tag created with `"scramble":true`: its IDs are images under a permutation, so they are
/// judged for uniqueness as they are and have no `/ranges`; `max_id` counts sequence numbers,
/// not them.
pub const SCRAMBLED_TAG: &str = "chaos-scrambled";

/// The tag created with `"mode":"monotonic"`; it has no `/ranges`.
pub const MONOTONIC_TAG: &str = "chaos-monotonic";

/// Created as a segment tag and served from every node's buffers like the others, until the
/// `switch-to-monotonic` fault moves it (`crate::faults::switch`); every endpoint asks for it,
/// `/ranges` too, before and after.
pub const SWITCH_TAG: &str = "chaos-switch";

/// The time-sequence namespaces of a run (the default layout: 32 time, 12 shard, 19 sequence
/// bits). More than one, so that every node's prefetch of the next second is a claim batch of
/// several namespaces each second, which is where batches are most at risk.
pub const TIMESEQ_NAMESPACES: [&str; 3] = ["chaos-ts", "chaos-ts-b", "chaos-ts-c"];

/// The shards the clients ask for: both ends and a few between.
const SHARDS: [u64; 5] = [0, 1, 7, 1000, 4095];

/// How long a client waits for an answer before calling it unknown.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// Runs one client until `stop` turns true; answers what it saw.
pub async fn client(
    nodes: Arc<Nodes>,
    seed: u64,
    started: Instant,
    mut stop: watch::Receiver<bool>,
) -> anyhow::Result<Vec<Op>> {
    let http = reqwest::Client::builder().timeout(REQUEST_TIMEOUT).pool_max_idle_per_host(2).build()?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut ops = Vec::new();
    let mut targets = nodes.targets();
    let mut refreshed = Instant::now();
    while !*stop.borrow() {
        if refreshed.elapsed() > Duration::from_millis(200) {
            targets = nodes.targets();
            refreshed = Instant::now();
        }
        if targets.is_empty() {
            let _ = tokio::time::timeout(Duration::from_millis(50), stop.changed()).await;
            continue;
        }
        let target = &targets[rng.gen_range(0..targets.len())];
        let mut endpoint = Endpoint::ALL[rng.gen_range(0..Endpoint::ALL.len())];
        let tag = TAGS[rng.gen_range(0..TAGS.len())].0;
        if (tag == MONOTONIC_TAG || tag == SCRAMBLED_TAG) && endpoint == Endpoint::SegmentRanges {
            endpoint = Endpoint::SegmentList;
        }
        let count: u64 = match endpoint {
            Endpoint::SegmentList => [1, 1, 5, 100][rng.gen_range(0..4)],
            Endpoint::SegmentRanges => rng.gen_range(1..=1000),
            Endpoint::SnowflakeList => rng.gen_range(1..=50),
            Endpoint::TimeseqList => [1, 1, 10, 500][rng.gen_range(0..4)],
            Endpoint::LeafSegment | Endpoint::LeafSnowflake | Endpoint::LeafTimeseq => 1,
        };
        let (tag, shard) = match endpoint.is_timeseq() {
            true => {
                (TIMESEQ_NAMESPACES[rng.gen_range(0..TIMESEQ_NAMESPACES.len())], SHARDS[rng.gen_range(0..SHARDS.len())])
            }
            false => (tag, 0),
        };
        let op = call(&http, target, endpoint, (tag, shard), count, started).await;
        // A refused connection comes back at once; without a pause a client would spend the run
        // on a dead node instead of the live ones.
        if matches!(&op.outcome, Outcome::Failed(code) if code == "CONNECT") {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        ops.push(op);
    }
    Ok(ops)
}

fn micros(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX)
}

async fn call(
    http: &reqwest::Client,
    target: &Target,
    endpoint: Endpoint,
    (tag, shard): (&str, u64),
    count: u64,
    started: Instant,
) -> Op {
    let url = &target.url;
    let path = match endpoint {
        Endpoint::SegmentList => format!("{url}/v1/segment/{tag}?count={count}"),
        Endpoint::SegmentRanges => format!("{url}/v1/segment/{tag}/ranges?count={count}"),
        Endpoint::LeafSegment => format!("{url}/api/segment/get/{tag}"),
        Endpoint::SnowflakeList => format!("{url}/v1/snowflake?count={count}"),
        Endpoint::LeafSnowflake => format!("{url}/api/snowflake/get/chaos"),
        Endpoint::TimeseqList => format!("{url}/v1/timeseq/{tag}?shard={shard}&count={count}"),
        Endpoint::LeafTimeseq => format!("{url}/api/timeseq/get/{tag}?shard={shard}"),
    };
    let before = target.incarnation();
    let start_us = micros(started);
    let answer = http.get(path).send().await;
    let outcome = match answer {
        Err(e) => transport_outcome(&e),
        Ok(answer) => {
            let status = answer.status();
            match answer.text().await {
                Err(e) => transport_outcome(&e),
                Ok(body) => parse(endpoint, (tag, shard), status, &body),
            }
        }
    };
    let end_us = micros(started);
    let after = target.incarnation();
    Op {
        endpoint,
        node: target.id,
        incarnation: if before == after { before } else { None },
        start_us,
        end_us,
        outcome,
    }
}

/// A connection never made is a definite "not issued"; anything later is unknown.
fn transport_outcome(e: &reqwest::Error) -> Outcome {
    if e.is_connect() {
        Outcome::Failed("CONNECT".into())
    } else if e.is_timeout() {
        Outcome::Unknown("timeout".into())
    } else {
        Outcome::Unknown("broken connection".into())
    }
}

fn parse(endpoint: Endpoint, (tag, shard): (&str, u64), status: reqwest::StatusCode, body: &str) -> Outcome {
    let leaf = matches!(endpoint, Endpoint::LeafSegment | Endpoint::LeafSnowflake | Endpoint::LeafTimeseq);
    if !status.is_success() {
        if leaf {
            // Leaf's errors: `Result{id=-3, status=EXCEPTION}`.
            let code = body.split("id=").nth(1).and_then(|rest| rest.split(',').next()).unwrap_or("?");
            let kind = match endpoint {
                Endpoint::LeafSegment => "LEAF_SEGMENT",
                Endpoint::LeafTimeseq => "LEAF_TIMESEQ",
                _ => "LEAF_SNOWFLAKE",
            };
            return Outcome::Failed(format!("{kind}_{code}"));
        }
        let code = serde_json::from_str::<Value>(body)
            .ok()
            .and_then(|v| v["error"]["code"].as_str().map(str::to_string))
            .unwrap_or_else(|| format!("HTTP_{}", status.as_u16()));
        return Outcome::Failed(code);
    }
    let malformed = || Outcome::Malformed(body.chars().take(200).collect());
    match endpoint {
        Endpoint::LeafSegment => match body.trim().parse::<u64>() {
            Ok(id) => Outcome::Segment { tag: tag.into(), ranges: vec![(id, id.saturating_add(1))] },
            Err(_) => malformed(),
        },
        Endpoint::LeafSnowflake => match body.trim().parse::<u64>() {
            Ok(id) => Outcome::Snowflake(vec![id]),
            Err(_) => malformed(),
        },
        Endpoint::SegmentList => {
            let Some(ids) = id_list(body) else { return malformed() };
            // Consecutive IDs as runs: ranges are what the checker compares.
            let mut ranges: Vec<(u64, u64)> = Vec::new();
            for id in ids {
                match ranges.last_mut() {
                    Some(last) if last.1 == id => last.1 = id.saturating_add(1),
                    _ => ranges.push((id, id.saturating_add(1))),
                }
            }
            Outcome::Segment { tag: tag.into(), ranges }
        }
        Endpoint::SegmentRanges => {
            let json = serde_json::from_str::<Value>(body).ok();
            let ranges = json.as_ref().and_then(|json| json["ranges"].as_array()).and_then(|ranges| {
                ranges.iter().map(|r| Some((decimal(&r["start"])?, decimal(&r["end"])?))).collect::<Option<Vec<_>>>()
            });
            match ranges {
                Some(ranges) => Outcome::Segment { tag: tag.into(), ranges },
                None => malformed(),
            }
        }
        Endpoint::SnowflakeList => match id_list(body) {
            Some(ids) => Outcome::Snowflake(ids),
            None => malformed(),
        },
        Endpoint::TimeseqList => match id_list(body) {
            Some(ids) => Outcome::Timeseq { namespace: tag.into(), shard, ids },
            None => malformed(),
        },
        Endpoint::LeafTimeseq => match body.trim().parse::<u64>() {
            Ok(id) => Outcome::Timeseq { namespace: tag.into(), shard, ids: vec![id] },
            Err(_) => malformed(),
        },
    }
}

/// An ID as the API writes it: a decimal string.
fn decimal(value: &Value) -> Option<u64> {
    value.as_str().and_then(|s| s.parse().ok())
}

/// The `ids` of a `{"ids": ["1", ...]}` answer, if every one parses.
fn id_list(body: &str) -> Option<Vec<u64>> {
    let json = serde_json::from_str::<Value>(body).ok()?;
    json["ids"].as_array()?.iter().map(decimal).collect()
}

/// Reads every tag's `max_id` from every node, locally and through the leader, every 100 ms, until
/// `stop`.
pub async fn max_id_poller(
    nodes: Arc<Nodes>,
    started: Instant,
    mut stop: watch::Receiver<bool>,
) -> anyhow::Result<Vec<MaxIdRead>> {
    let http = reqwest::Client::builder().timeout(Duration::from_millis(500)).build()?;
    let mut reads = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    while !*stop.borrow() {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => continue,
        }
        for target in nodes.targets() {
            for ((tag, _), consistent) in TAGS.into_iter().flat_map(|tag| [(tag, false), (tag, true)]) {
                let disk = target.disk.load(std::sync::atomic::Ordering::SeqCst);
                let start_us = micros(started);
                let url = format!("{}/v1/tags/{tag}?consistent={consistent}", target.url);
                let Ok(answer) = http.get(url).send().await else { continue };
                if !answer.status().is_success() {
                    continue;
                }
                let Ok(body) = answer.json::<Value>().await else { continue };
                let Some(max_id) = body["max_id"].as_str().and_then(|s| s.parse::<u64>().ok()) else { continue };
                if target.disk.load(std::sync::atomic::Ordering::SeqCst) != disk {
                    continue; // wiped while asked: which directory answered is unknown
                }
                reads.push(MaxIdRead {
                    node: target.id,
                    disk,
                    consistent,
                    tag: tag.into(),
                    start_us,
                    end_us: micros(started),
                    max_id,
                });
            }
        }
    }
    Ok(reads)
}
