//! The Rust client's program for `scripts/clients-test.sh`: every client (Rust, Java, Go,
//! Python) has one that takes the same arguments and writes the same lines.
//!
//! ```text
//! conformance run --nodes A,B,C --tag T --mono M --out FILE --stop FILE
//!     takes IDs of T (segment, local ranges) and M (monotonic) until FILE exists; writes
//!     "s ID ID ..." per batch, "m SENT_US RECEIVED_US ID" per monotonic take, "e CODE" per error
//! conformance errors --nodes A,B,C --blackhole H:P
//!     prints "unknown-tag CODE", "cluster-mismatch CODE", "timeout TIMEOUT MS" (typed errors)
//! conformance tls --nodes https://H:P --ca FILE --token TOKEN --tag T
//!     prints "tls ok N" and "unauthorized CODE"
//! conformance kinds --nodes A,B,C --tag T --ns NS
//!     the start-up and pass-through calls: prints "create-tag true false none none",
//!     "create-namespace true false none none", "snowflake ok", "timeseq ok", "timeseq-string ok"
//! ```
//!
//! `LEAFRAFT_CONFORMANCE_PLANT=reuse-range` turns on the planted bug; it exists only in a build
//! with the `conformance-plant` feature (the suite's), and asking for it without is an error.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::time::Duration;
use std::time::Instant;
use std::time::SystemTime;

use leafraft_client::Client;
use leafraft_client::ClientError;
use leafraft_client::ErrorCode;
use leafraft_client::NewNamespace;
use leafraft_client::NewTag;
use leafraft_ids::snowflake::Layout;

fn now_micros() -> u128 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_micros())
}

/// An error named as every conformance program names it: the server's code, TIMEOUT, CLOSED.
fn kind<T>(result: &Result<T, ClientError>) -> String {
    match result {
        Ok(_) => "none".into(),
        Err(ClientError::Api { code, .. }) => code.to_string(),
        Err(ClientError::Timeout { .. }) => "TIMEOUT".into(),
        Err(ClientError::Closed) => "CLOSED".into(),
        Err(other) => format!("untyped:{}", other.to_string().replace(' ', "_")),
    }
}

type Failure = Box<dyn std::error::Error>;

#[tokio::main]
async fn main() -> Result<(), Failure> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mode = argv.first().cloned().unwrap_or_default();
    let args: HashMap<String, String> = argv
        .get(1..)
        .unwrap_or_default()
        .chunks(2)
        .filter(|pair| pair.len() == 2)
        .map(|pair| (pair[0].trim_start_matches("--").to_string(), pair[1].clone()))
        .collect();
    let arg = |name: &str| args.get(name).cloned().unwrap_or_default();
    if std::env::var("LEAFRAFT_CONFORMANCE_PLANT").as_deref() == Ok("reuse-range") {
        #[cfg(feature = "conformance-plant")]
        leafraft_client::plant::set_reuse_range_after_failover(true);
        #[cfg(not(feature = "conformance-plant"))]
        return Err("LEAFRAFT_CONFORMANCE_PLANT needs a build with --features conformance-plant".into());
    }
    let nodes: Vec<String> = arg("nodes").split(',').map(str::to_string).collect();
    match mode.as_str() {
        "run" => run(nodes, &arg("tag"), &arg("mono"), &arg("out"), &arg("stop")).await,
        "errors" => errors(nodes, &arg("blackhole")).await,
        "tls" => tls(nodes, &arg("ca"), &arg("token"), &arg("tag")).await,
        "kinds" => kinds(nodes, &arg("tag"), &arg("ns")).await,
        other => Err(format!("unknown mode {other:?}: run, errors, tls or kinds").into()),
    }
}

async fn run(nodes: Vec<String>, tag: &str, mono: &str, out: &str, stop: &str) -> Result<(), Failure> {
    let client = Client::builder()
        .nodes(nodes)
        .timeout(Duration::from_secs(5))
        .attempt_timeout(Duration::from_secs(1))
        .range_size(100, 1000, Duration::from_secs(1))
        .build()?;
    let segment = client.segment(tag);
    let monotonic = client.monotonic(mono);
    let mut file = std::io::BufWriter::new(std::fs::File::create(out)?);
    let (mut segments, mut monotonics, mut failures) = (0u64, 0u64, 0u64);
    while !Path::new(stop).exists() {
        let mut line = String::from("s");
        for _ in 0..50 {
            let taken = segment.next_id().await;
            match taken {
                Ok(id) => {
                    line.push(' ');
                    line.push_str(&id.to_string());
                    segments += 1;
                }
                Err(_) => {
                    failures += 1;
                    writeln!(file, "e {}", kind(&taken))?;
                    break;
                }
            }
        }
        writeln!(file, "{line}")?;
        let sent = now_micros();
        let taken = monotonic.next_id().await;
        match taken {
            Ok(id) => {
                monotonics += 1;
                writeln!(file, "m {sent} {} {id}", now_micros() + 1)?;
            }
            Err(_) => {
                failures += 1;
                writeln!(file, "e {}", kind(&taken))?;
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    client.close();
    file.flush()?;
    println!("rust: segment={segments} monotonic={monotonics} errors={failures} requests={}", client.http_requests());
    Ok(())
}

async fn errors(nodes: Vec<String>, blackhole: &str) -> Result<(), Failure> {
    let client = Client::builder().nodes(&nodes).timeout(Duration::from_secs(5)).build()?;
    println!("unknown-tag {}", kind(&client.segment("conformance-no-such-tag").next_id().await));
    client.close();
    let wrong =
        Client::builder().nodes(&nodes).timeout(Duration::from_secs(5)).cluster_id(0x0123_4567_89ab_cdef).build()?;
    println!("cluster-mismatch {}", kind(&wrong.segment("conformance-no-such-tag").next_id().await));
    wrong.close();
    let hole = Client::builder().nodes([blackhole]).timeout(Duration::from_secs(1)).build()?;
    let started = Instant::now();
    let answer = hole.segment("anything").next_id().await;
    println!("timeout {} {}", kind(&answer), started.elapsed().as_millis());
    hole.close();
    Ok(())
}

async fn tls(nodes: Vec<String>, ca: &str, token: &str, tag: &str) -> Result<(), Failure> {
    let client = Client::builder().nodes(&nodes).ca_file(ca).token(token).timeout(Duration::from_secs(5)).build()?;
    match client.segment(tag).next_ids(10).await {
        Ok(ids) => println!("tls ok {}", ids.len()),
        Err(error) => println!("tls {}", kind::<()>(&Err(error))),
    }
    client.close();
    let anonymous = Client::builder().nodes(&nodes).ca_file(ca).timeout(Duration::from_secs(5)).build()?;
    println!("unauthorized {}", kind(&anonymous.segment(tag).next_id().await));
    anonymous.close();
    Ok(())
}

/// "true"/"false" and the error's kind of a create that may answer "exists" (`TAG_EXISTS`,
/// `NAMESPACE_EXISTS`): the Rust client has no create-if-missing call, so this is it.
fn created<T>(answer: Result<T, ClientError>, exists: ErrorCode) -> (bool, String) {
    match answer {
        Ok(_) => (true, "none".into()),
        Err(ClientError::Api { code, .. }) if code == exists => (false, "none".into()),
        Err(error) => (false, kind::<()>(&Err(error))),
    }
}

async fn kinds(nodes: Vec<String>, tag: &str, ns: &str) -> Result<(), Failure> {
    let client = Client::builder().nodes(&nodes).timeout(Duration::from_secs(5)).build()?;
    // Apart by more than a millisecond: two identical creates within one are answered alike.
    let pause = || tokio::time::sleep(Duration::from_millis(10));
    let new_tag = NewTag { tag: tag.to_string(), step: Some(100), ..NewTag::default() };
    let first = created(client.create_tag(&new_tag).await, ErrorCode::TagExists);
    pause().await;
    let second = created(client.create_tag(&new_tag).await, ErrorCode::TagExists);
    println!("create-tag {} {} {} {}", first.0, second.0, first.1, second.1);
    let new_ns = NewNamespace { namespace: ns.to_string(), ..NewNamespace::default() };
    let first = created(client.create_namespace(&new_ns).await, ErrorCode::NamespaceExists);
    pause().await;
    let second = created(client.create_namespace(&new_ns).await, ErrorCode::NamespaceExists);
    println!("create-namespace {} {} {} {}", first.0, second.0, first.1, second.1);

    match client.snowflake(3).await {
        Err(error) => println!("snowflake {}", kind::<()>(&Err(error))),
        Ok(ids) if !(ids.len() == 3 && ids[0] < ids[1] && ids[1] < ids[2]) => {
            println!("snowflake not-increasing {ids:?}")
        }
        Ok(ids) => {
            let local = leafraft_client::decode::snowflake(&Layout::LEAF, ids[0]);
            match client.decode_snowflake(&ids[0].to_string()).await {
                Ok(d)
                    if (d.timestamp_ms, d.worker_id, d.sequence)
                        == (local.timestamp_ms, local.worker, local.sequence) =>
                {
                    println!("snowflake ok")
                }
                other => println!("snowflake decode-differs {other:?} {local:?}"),
            }
        }
    }

    match client.timeseq_ids(ns, 3, 3).await {
        Err(error) => println!("timeseq {}", kind::<()>(&Err(error))),
        Ok(ids) if !(ids.len() == 3 && ids[0] < ids[1] && ids[1] < ids[2]) => {
            println!("timeseq not-increasing {ids:?}")
        }
        Ok(ids) => match client.decode_timeseq(ns, &ids[0].to_string()).await {
            Ok(decoded) if decoded.shard == 3 => println!("timeseq ok"),
            other => println!("timeseq decode {other:?}"),
        },
    }

    match client.timeseq_strings(ns, 3, 2, "AB").await {
        Err(error) => println!("timeseq-string {}", kind::<()>(&Err(error))),
        Ok(texts) if !(texts.len() == 2 && texts[0].starts_with("AB") && texts[0] != texts[1]) => {
            println!("timeseq-string unexpected {texts:?}")
        }
        Ok(texts) => match client.decode_timeseq(ns, &texts[0]).await {
            Ok(decoded) if decoded.shard == 3 => println!("timeseq-string ok"),
            other => println!("timeseq-string decode {other:?}"),
        },
    }
    client.close();
    Ok(())
}
