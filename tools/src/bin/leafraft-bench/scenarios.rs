//! The command lines and printed reports of the scenario benchmarks (`namespaces`, `first-ids`):
//! one line per figure, or the report as JSON for scripts.

use std::process::ExitCode;
use std::time::Duration;

use crate::first_ids;
use crate::namespaces;
use crate::namespaces::Latency;

#[derive(Debug, clap::Args)]
pub struct NamespacesArgs {
    /// Every node, `host:port` (comma separated).
    #[arg(long, value_delimiter = ',', required = true)]
    nodes: Vec<String>,
    #[arg(long, default_value_t = 1000)]
    namespaces: usize,
    /// IDs each namespace is asked for per second on every node: fewer namespaces at a higher
    /// rate give the same requests with fewer claims (the request path's own floor).
    #[arg(long, default_value_t = 1)]
    ids_per_second: usize,
    /// IDs per request: above 1, the list path (`/v1/timeseq/{ns}?shard=0&count=N`) and
    /// `ids-per-second / count` requests per namespace per second on every node.
    #[arg(long, default_value_t = 1)]
    count: usize,
    /// Seconds of load.
    #[arg(long, default_value_t = 60)]
    duration: u64,
    /// Keep-alive connections per node.
    #[arg(long, default_value_t = 64)]
    connections: usize,
    /// Namespace creations in flight.
    #[arg(long, default_value_t = 64)]
    create_concurrency: usize,
    /// Seconds at the start left out of the settled percentiles.
    #[arg(long, default_value_t = 5)]
    settle: u64,
    #[arg(long, default_value = "bench-ns")]
    prefix: String,
    /// A request unanswered this long fails.
    #[arg(long, default_value_t = 10_000)]
    timeout_ms: u64,
    /// Requests still unsent this many seconds after the last second are not sent (they fail).
    #[arg(long, default_value_t = 10)]
    grace: u64,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
pub struct FirstIdsArgs {
    /// Every node, `host:port` (comma separated).
    #[arg(long, value_delimiter = ',', required = true)]
    nodes: Vec<String>,
    #[arg(long, default_value_t = 100_000)]
    tags: usize,
    /// Requests in flight, spread evenly over the nodes.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Import requests (500 tags each) in flight.
    #[arg(long, default_value_t = 4)]
    import_concurrency: usize,
    /// The imported tags' step: the size of each first claim.
    #[arg(long, default_value_t = 1000)]
    step: u64,
    #[arg(long, default_value = "first")]
    prefix: String,
    /// A request unanswered this long fails.
    #[arg(long, default_value_t = 30_000)]
    timeout_ms: u64,
    /// Tags not asked for this many seconds after the first request are not asked (they fail).
    #[arg(long, default_value_t = 120)]
    give_up_after: u64,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// Node addresses as `host:port`, with or without `http://`.
fn addrs(nodes: Vec<String>) -> Vec<String> {
    nodes.into_iter().map(|n| n.trim().trim_start_matches("http://").trim_end_matches('/').to_string()).collect()
}

fn latency_line(name: &str, l: &Latency) -> String {
    format!(
        "{name}: {} requests, p50 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms, max {:.2} ms",
        l.requests,
        l.p50_us as f64 / 1000.0,
        l.p99_us as f64 / 1000.0,
        l.p999_us as f64 / 1000.0,
        l.max_us as f64 / 1000.0
    )
}

fn json<T: serde::Serialize>(report: &T) -> Result<(), String> {
    let text = serde_json::to_string_pretty(report).map_err(|e| format!("cannot encode the report: {e}"))?;
    println!("{text}");
    Ok(())
}

pub async fn namespaces(args: NamespacesArgs) -> Result<ExitCode, String> {
    let options = namespaces::NamespacesOptions {
        nodes: addrs(args.nodes),
        namespaces: args.namespaces,
        ids_per_second: args.ids_per_second,
        count: args.count,
        duration: Duration::from_secs(args.duration),
        connections: args.connections,
        create_concurrency: args.create_concurrency,
        settle: Duration::from_secs(args.settle),
        prefix: args.prefix,
        timeout: Duration::from_millis(args.timeout_ms),
        grace: Duration::from_secs(args.grace),
    };
    let r = namespaces::run(&options).await?;
    let clean = r.failed == 0 && r.duplicates == 0;
    if args.json {
        json(&r)?;
        return Ok(if clean { ExitCode::SUCCESS } else { ExitCode::FAILURE });
    }
    println!(
        "{} time-sequence namespaces, {} ID(s) per namespace per second on each of {} nodes, {} s, {} connections per node",
        r.namespaces, r.ids_per_second, r.nodes, r.duration_secs, options.connections
    );
    println!("created in {:.1} s ({:.0} namespaces/s)", r.create_secs, r.namespaces as f64 / r.create_secs.max(1e-9));
    println!(
        "requests: {} due, {} sent, {} answered, {} failed; run {:.1} s",
        r.due, r.sent, r.answered, r.failed, r.run_secs
    );
    for (failure, n) in &r.failures {
        println!("  failed: {n} × {failure}");
    }
    let s = &r.sequences;
    println!(
        "sequences: at most {} of {} in any (namespace, second) ({:.1} %), over {} of them; SECOND_EXHAUSTED {}",
        s.most_used,
        s.limit,
        s.most_used as f64 * 100.0 / s.limit.max(1) as f64,
        s.seconds,
        s.second_exhausted
    );
    println!("{}", latency_line("latency (all)", &r.latency));
    println!("{}", latency_line(&format!("latency (due after {} s)", options.settle.as_secs()), &r.settled_latency));
    println!(
        "committed Raft entries: {} in {:.1} s = {:.0}/s (busiest second {:.0}/s); time-sequence claims {:.0} ({:.0}/s), waits {:.0}",
        r.commits.entries,
        r.commits.secs,
        r.commits.per_sec,
        r.commits.busiest_per_sec,
        r.claims,
        r.claims / r.commits.secs.max(1e-9),
        r.waits
    );
    println!("duplicates within a namespace: {}", r.duplicates);
    Ok(if clean { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

pub async fn first_ids(args: FirstIdsArgs) -> Result<ExitCode, String> {
    let options = first_ids::FirstIdsOptions {
        nodes: addrs(args.nodes),
        tags: args.tags,
        concurrency: args.concurrency,
        import_concurrency: args.import_concurrency,
        step: args.step,
        prefix: args.prefix,
        timeout: Duration::from_millis(args.timeout_ms),
        give_up_after: Duration::from_secs(args.give_up_after),
    };
    let r = first_ids::run(&options).await?;
    let clean = r.failed == 0 && r.duplicates == 0 && r.out_of_range == 0;
    if args.json {
        json(&r)?;
        return Ok(if clean { ExitCode::SUCCESS } else { ExitCode::FAILURE });
    }
    println!(
        "the first ID of each of {} tags, {} in flight over {} nodes (round robin)",
        r.tags,
        options.concurrency,
        options.nodes.len()
    );
    println!("imported in {:.1} s ({:.0} tags/s)", r.import_secs, r.tags as f64 / r.import_secs.max(1e-9));
    println!(
        "done in {:.1} s ({:.0} first IDs/s): {} sent, {} answered, {} failed",
        r.total_secs,
        r.answered as f64 / r.total_secs.max(1e-9),
        r.sent,
        r.answered,
        r.failed
    );
    for (failure, n) in &r.failures {
        println!("  failed: {n} × {failure}");
    }
    println!("{}", latency_line("latency", &r.latency));
    println!(
        "committed Raft entries: {} in {:.1} s = {:.0}/s (busiest second {:.0}/s); segment claims {:.0}",
        r.commits.entries, r.commits.secs, r.commits.per_sec, r.commits.busiest_per_sec, r.claims
    );
    println!("IDs: {} duplicates, {} outside their tag's first range", r.duplicates, r.out_of_range);
    Ok(if clean { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
