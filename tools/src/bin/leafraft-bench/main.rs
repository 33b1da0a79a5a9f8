//! `leafraft-bench` (also reached as `leafraft bench`): load generators and the baselines they are
//! compared with, kept out of the service build. `claims` measures Raft-committed segment claims
//! on a local cluster started in this process; `http` is a keep-alive HTTP load generator with a
//! latency histogram and a duplicate check; `etcd-claims` and `counter-server` are the baselines
//! `scripts/bench-claims.sh` and `scripts/bench.sh` measure in the same run; `namespaces` and
//! `first-ids` are the many-namespaces and many-tags scenarios of `scripts/bench-batching.sh`.

mod admin;
mod answers;
mod claims;
mod conn;
mod etcd;
mod failover;
mod first_ids;
mod http;
mod namespaces;
mod report;
mod scenarios;
mod sequences;

use std::process::ExitCode;
use std::time::Duration;

use clap::ArgAction;
use clap::Parser;

#[derive(Debug, Parser)]
#[command(name = "leafraft bench", version, about = "Load generators and baselines for leafraft")]
enum BenchCommand {
    /// Raft-committed segment claims per second and their latency on a local in-process cluster.
    Claims {
        /// Cluster size.
        #[arg(long, default_value_t = 3)]
        nodes: usize,
        /// Concurrent claimers, one run per value.
        #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
        concurrency: Vec<usize>,
        /// Seconds per run.
        #[arg(long, default_value_t = 5)]
        duration_secs: u64,
        /// fdatasync every log write (as in production).
        #[arg(long, default_value_t = true, action = ArgAction::Set)]
        fsync: bool,
        /// Where the claimers run: spread over every node (most claims forwarded), on the leader
        /// only (no forward hop), or on the followers only (every claim forwarded).
        #[arg(long, value_enum, default_value_t = claims::Placement::Spread)]
        claimers_on: claims::Placement,
        /// Run every node but node 1 as a `leafraft serve` process (one node per process, as
        /// deployed); the claimers run on node 1, the leader.
        #[arg(long)]
        followers_in_processes: bool,
    },
    /// HTTP load: keep-alive connections, fixed duration, latency histogram, duplicate check.
    Http {
        /// Target URLs (comma separated); workers are spread over them.
        #[arg(long = "url", value_delimiter = ',', required = true)]
        urls: Vec<String>,
        /// Concurrent connections.
        #[arg(long, default_value_t = 8)]
        concurrency: usize,
        #[arg(long, default_value_t = 10)]
        duration_secs: u64,
        /// Total requests per second (default: as fast as possible).
        #[arg(long)]
        rate: Option<f64>,
        /// Skip collecting IDs for the duplicate check.
        #[arg(long)]
        no_check: bool,
        /// Record when each request was sent and answered and its IDs, and check real-time order
        /// over the whole run (what a monotonic tag promises).
        #[arg(long)]
        history: bool,
        /// PEM CA certificates for https:// URLs (keep-alive TLS connections, rustls).
        #[arg(long)]
        ca: Option<std::path::PathBuf>,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The claims baseline: the same claim as a compare-and-swap transaction on etcd.
    EtcdClaims {
        /// etcd client URLs (comma separated), e.g. http://127.0.0.1:2379.
        #[arg(long = "endpoint", value_delimiter = ',', required = true)]
        endpoints: Vec<String>,
        #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
        concurrency: Vec<usize>,
        #[arg(long, default_value_t = 5)]
        duration_secs: u64,
    },
    /// How long a monotonic tag goes without service when its leader is killed: three `leafraft
    /// serve` processes, callers on every node, the leader killed (SIGKILL) and restarted
    /// `--kills` times.
    Failover {
        /// The leafraft binary.
        #[arg(long, default_value = "target/release/leafraft")]
        bin: std::path::PathBuf,
        #[arg(long, default_value_t = 20)]
        kills: usize,
        #[arg(long, default_value_t = 16)]
        callers: usize,
        /// Seconds of steady service before each kill.
        #[arg(long, default_value_t = 2)]
        settle_secs: u64,
        /// Extra `serve` flags, e.g. `--serve-flag=--election-timeout-ms --serve-flag=150`.
        #[arg(long = "serve-flag", allow_hyphen_values = true)]
        serve_flags: Vec<String>,
    },
    /// Many time-sequence namespaces, each asked for one ID per second on every node: requests answered and failed, latency, and Raft entries committed per second.
    Namespaces(scenarios::NamespacesArgs),
    /// The first ID of each of many imported segment tags, each asked once, spread over the nodes
    ///: time until all answered, latency, uniqueness, entries per second.
    FirstIds(scenarios::FirstIdsArgs),
    /// A trivial axum server answering an atomic counter: the baseline `scripts/bench.sh`
    /// compares leafraft against.
    CounterServer {
        #[arg(long, default_value = "127.0.0.1:8099")]
        listen: String,
        /// Serve TLS with this certificate (and --tls-key, --ca) through leafraft's own TLS
        /// listener: the baseline of the TLS benchmark.
        #[arg(long, requires_all = ["tls_key", "ca"])]
        tls_cert: Option<std::path::PathBuf>,
        #[arg(long)]
        tls_key: Option<std::path::PathBuf>,
        #[arg(long)]
        ca: Option<std::path::PathBuf>,
    },
}

fn main() -> ExitCode {
    let command = BenchCommand::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => return fail(format!("cannot start the async runtime: {e}")),
    };
    let result = runtime.block_on(async {
        match command {
            BenchCommand::Claims { nodes, concurrency, duration_secs, fsync, claimers_on, followers_in_processes } => {
                claims(claims::ClaimsOptions {
                    nodes,
                    concurrency,
                    duration: Duration::from_secs(duration_secs),
                    fsync,
                    step: 1000,
                    placement: claimers_on,
                    followers_in_processes,
                })
                .await
            }
            BenchCommand::Http { urls, concurrency, duration_secs, rate, no_check, history, ca, json } => {
                let options = http::HttpOptions {
                    urls,
                    concurrency,
                    duration: Duration::from_secs(duration_secs),
                    rate,
                    check_unique: !no_check,
                    history,
                    ca,
                };
                http_load(&options, json).await
            }
            BenchCommand::EtcdClaims { endpoints, concurrency, duration_secs } => {
                etcd_claims(endpoints, concurrency, duration_secs).await
            }
            BenchCommand::Failover { bin, kills, callers, settle_secs, serve_flags } => {
                let options = failover::FailoverOptions {
                    bin,
                    kills,
                    callers,
                    serve_flags,
                    settle: Duration::from_secs(settle_secs),
                };
                failover_report(&options).await
            }
            BenchCommand::Namespaces(args) => scenarios::namespaces(args).await,
            BenchCommand::FirstIds(args) => scenarios::first_ids(args).await,
            BenchCommand::CounterServer { listen, tls_cert, tls_key, ca } => {
                let tls = match (tls_cert, tls_key) {
                    (Some(cert), Some(key)) => Some(leafraft::config::TlsFiles { cert, key, peer_ca: None, ca }),
                    _ => None,
                };
                report::counter_server(&listen, tls).await.map(|()| ExitCode::SUCCESS)
            }
        }
    });
    result.unwrap_or_else(fail)
}

fn fail(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::FAILURE
}

const CLAIMS_HEADER: [&str; 7] = ["claimers", "claims", "claims/s", "errors", "p50 µs", "p99 µs", "max µs"];

fn claims_row(r: &claims::ClaimsResult) -> String {
    format!(
        "{:>11} {:>9} {:>10.0} {:>7} {:>9} {:>9} {:>9}",
        r.concurrency, r.claims, r.claims_per_sec, r.errors, r.latency_us.p50, r.latency_us.p99, r.latency_us.max
    )
}

fn claims_header() -> String {
    let [a, b, c, d, e, f, g] = CLAIMS_HEADER;
    format!("{a:>11} {b:>9} {c:>10} {d:>7} {e:>9} {f:>9} {g:>9}")
}

async fn claims(options: claims::ClaimsOptions) -> Result<ExitCode, String> {
    if options.nodes == 0 || options.concurrency.contains(&0) {
        eprintln!("error: --nodes and --concurrency must be above 0");
        return Ok(ExitCode::from(2));
    }
    if options.nodes == 1 && options.placement == claims::Placement::Followers {
        eprintln!("error: a 1-node cluster has no follower");
        return Ok(ExitCode::from(2));
    }
    if options.followers_in_processes && options.placement != claims::Placement::Leader {
        eprintln!("error: --followers-in-processes runs the claimers on node 1, the leader: add --claimers-on leader");
        return Ok(ExitCode::from(2));
    }
    let layout = if options.followers_in_processes { "one node per process" } else { "in-process cluster" };
    println!(
        "claims on a {}-node {layout}, loopback HTTP, fsync={}, claimers on {:?}, {} s per run",
        options.nodes,
        options.fsync,
        options.placement,
        options.duration.as_secs()
    );
    println!("{}", claims_header());
    for r in claims::run(&options).await? {
        println!("{}", claims_row(&r));
    }
    Ok(ExitCode::SUCCESS)
}

async fn etcd_claims(endpoints: Vec<String>, concurrency: Vec<usize>, duration_secs: u64) -> Result<ExitCode, String> {
    let options =
        etcd::EtcdOptions { endpoints, concurrency, duration: Duration::from_secs(duration_secs), step: 1000 };
    println!("the same claim as a compare-and-swap transaction on etcd, {duration_secs} s per run");
    println!("{} {:>10}", claims_header(), "conflicts");
    for (r, conflicts) in etcd::run(&options).await? {
        println!("{} {conflicts:>10}", claims_row(&r));
    }
    Ok(ExitCode::SUCCESS)
}

async fn http_load(options: &http::HttpOptions, json: bool) -> Result<ExitCode, String> {
    let r = http::run(options).await?;
    if json {
        let text = serde_json::to_string_pretty(&r).map_err(|e| format!("cannot encode the report: {e}"))?;
        println!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{} ok of {} requests in {:.1} s: {:.0} req/s, {:.0} IDs/s",
        r.ok, r.requests, r.elapsed_secs, r.requests_per_sec, r.ids_per_sec
    );
    println!(
        "latency µs: p50 {} p99 {} p99.9 {} max {}; over 5 ms: {}",
        r.p50_us, r.p99_us, r.p999_us, r.max_us, r.over_5ms
    );
    if options.rate.is_some() {
        println!(
            "(from the scheduled send when the connection held it back; from the actual send: p99 {} p99.9 {}; \
             sends over 2 ms late: {})",
            r.service_p99_us, r.service_p999_us, r.late_sends
        );
    }
    println!("errors by status: {:?}; transport errors: {}", r.errors_by_status, r.transport_errors);
    match r.duplicates {
        Some(0) => println!("duplicates: 0 (all {} IDs unique)", r.ids),
        Some(n) => println!("DUPLICATES: {n}"),
        None => println!("duplicates: not checked"),
    }
    if let (Some(requests), Some(violations)) = (r.history_requests, r.real_time_violations) {
        println!("real-time order over {requests} recorded requests: {violations} violations");
    }
    let failed = r.duplicates.unwrap_or(0) > 0 || r.real_time_violations.unwrap_or(0) > 0;
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

async fn failover_report(options: &failover::FailoverOptions) -> Result<ExitCode, String> {
    println!(
        "monotonic tag, 3 nodes, {} callers on every node, the leader killed {} times; serve flags: {:?}",
        options.callers, options.kills, options.serve_flags
    );
    let r = failover::run(options).await?;
    let rounded: Vec<String> = r.downtime_ms.iter().map(|ms| format!("{ms:.0}")).collect();
    println!("ms without service per kill: {}", rounded.join(" "));
    let mut sorted = r.downtime_ms.clone();
    sorted.sort_by(f64::total_cmp);
    println!(
        "min {:.0} ms, p50 {:.0} ms, p90 {:.0} ms, max {:.0} ms; under 1 s: {} of {}",
        failover::quantile(&sorted, 0.0),
        failover::quantile(&sorted, 0.5),
        failover::quantile(&sorted, 0.9),
        failover::quantile(&sorted, 1.0),
        sorted.iter().filter(|ms| **ms < 1000.0).count(),
        sorted.len()
    );
    println!(
        "{} IDs, {} duplicates, {} real-time order violations per caller, {} failed requests",
        r.ids, r.duplicates, r.order_violations, r.errors
    );
    Ok(if r.duplicates > 0 || r.order_violations > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}
