//! `leafraft-chaos`: tries hard to make a real leafraft cluster hand out an ID twice.
//!
//! It starts `leafraft serve` processes (each in its own network namespace when run as root, with
//! libfaketime preloaded when installed), drives concurrent clients against every node and every
//! ID endpoint, injects a seeded schedule of faults (kill -9, SIGSTOP, partitions, clock steps and
//! drift, membership churn, whole-cluster restarts, wiped disks, a majority lost for good and
//! recovered from a survivor, a busy tag moved from segment to monotonic; power cuts that drop
//! every unsynced write, asked for by name), heals
//! everything, and then judges what the
//! clients saw with the checker. The last line is `RESULT: PASS` or `RESULT: FAIL`.
//!
//! Every check says how many times what it checks happened; one whose event never happened is
//! NOT EXERCISED, which fails the run when a fault that makes that event was injected (a wipe-member
//! fault, and no wiped member was judged). Exit codes, one meaning each ([`exit`]): 0 the run
//! passed, 1 it failed (or could not be carried out), 2 the command line was refused (an unknown
//! flag or fault kind, a `--plant` the binary cannot honour), 77 this machine cannot inject a fault
//! kind asked for (power loss without FUSE; with `--strict`, any kind).
//!
//! ```text
//! leafraft-chaos --seed 7 --nodes 3 --duration 60s
//! leafraft-chaos --soak 30m                  # runs seed, seed+1, … alternating 3 and 5 nodes
//! leafraft-chaos --plant serve-twice …       # a leafraft built with `--features planted`
//! leafraft-chaos --faults power-loss,power-loss-all,kill-leader [--fsync false]
//! ```
//!
//! Code map: [`nodes`] (processes, clocks, membership calls), [`net`] (namespaces and cuts),
//! [`workload`] (clients and `max_id` poller), [`faults`] (schedule and injection; its children
//! `faults::disks`: wiped members and recovery from a survivor, `faults::power`: power cuts,
//! `faults::switch`: the move to monotonic), [`history`]
//! (what clients saw), [`checker`] (the verdict, pure).

mod checker;
mod faults;
mod history;
mod net;
mod nodes;
mod workload;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use anyhow::bail;
use anyhow::Context;
use clap::Parser;
use clap::ValueEnum;
use leafraft_ids::snowflake::Layout;
use serde_json::json;
use serde_json::Value;

use crate::checker::Check;
use crate::faults::FaultKind;
use crate::faults::Record;
use crate::history::History;
use crate::history::Tally;
use crate::net::Net;
use crate::nodes::Nodes;

/// The exit codes, one meaning each: a caller (`scripts/chaos.sh`) tells "cannot run here" from a
/// typo in a flag.
mod exit {
    pub const PASS: i32 = 0;
    /// A check failed, a check was not exercised although its fault was injected, or the run could
    /// not be carried out.
    pub const FAIL: i32 = 1;
    /// The command line was refused (clap's own code for a usage error).
    pub const REFUSED: i32 = 2;
    /// This machine lacks what a fault kind asked for needs (automake's "skipped" code).
    pub const CANNOT_RUN_HERE: i32 = 77;
}

/// This machine cannot inject a fault kind the run asked for: exits [`exit::CANNOT_RUN_HERE`].
#[derive(Debug)]
struct CannotRunHere(String);

impl std::fmt::Display for CannotRunHere {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CannotRunHere {}

/// The fault kinds of `--faults`: comma-separated names, `all` or `none`.
#[derive(Debug, Clone)]
struct FaultSet(Vec<FaultKind>);

fn parse_faults(text: &str) -> Result<FaultSet, String> {
    let mut kinds: Vec<FaultKind> = Vec::new();
    for name in text.split(',').map(str::trim).filter(|name| *name != "none") {
        match name {
            "all" => kinds.extend(FaultKind::all()),
            name => kinds.push(FaultKind::parse(name).ok_or_else(|| {
                let known: Vec<&str> = FaultKind::every().map(FaultKind::name).collect();
                format!("unknown fault kind {name:?} (known: all, none, {})", known.join(", "))
            })?),
        }
    }
    kinds.sort();
    kinds.dedup();
    Ok(FaultSet(kinds))
}

/// Every node serves again this long after the last fault heals, or the run fails.
const FINAL_RECOVERY_DEADLINE: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum NetMode {
    /// Network namespaces when root with `ip` and `iptables`, else loopback.
    Auto,
    /// Network namespaces, or fail.
    Netns,
    /// 127.0.0.1 ports; partition faults are skipped.
    Loopback,
}

/// Seeded fault injection against a real leafraft cluster; prints PASS or FAIL.
#[derive(Debug, Parser)]
#[command(name = "leafraft-chaos", version)]
struct Args {
    /// Seeds the fault schedule and the clients (a soak runs seed, seed+1, …).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Voters in the cluster (the runner keeps it at this size or one more).
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// How long faults are injected (healing and checking come after).
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    duration: Duration,
    /// Runs one run after another for this long, alternating 3 and 5 nodes, each `--soak-run` long.
    #[arg(long, value_parser = parse_duration)]
    soak: Option<Duration>,
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    soak_run: Duration,
    /// The leafraft binary (default: `leafraft` next to this program).
    #[arg(long)]
    binary: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = NetMode::Auto)]
    net: NetMode,
    /// Comma-separated fault kinds, `all` or `none`. `all` is every kind but `power-loss` and
    /// `power-loss-all`, which are asked for by name (`all,power-loss`): they put every node's
    /// data directory on a FUSE mount that forgets unsynced writes.
    #[arg(long, default_value = "all", value_parser = parse_faults)]
    faults: FaultSet,
    /// For CI: a fault kind asked for that this machine cannot inject (no network namespaces, no
    /// libfaketime, no FUSE) ends the run with exit code 77 before it starts, instead of the run
    /// going on without it.
    #[arg(long)]
    strict: bool,
    /// Starts the nodes with `--fsync false` when false: unsafe on power loss, the comparison
    /// that shows the power-loss faults can fail a run.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    fsync: bool,
    /// Plants a bug in the nodes: serve-twice, uncommitted-claim, shared-worker,
    /// timeseq-serve-twice, batch-first-claim-only, window-overlap, feature-gate-off,
    /// scramble-not-bijective. Only a leafraft built with the cargo feature `planted` can (`leafraft
    /// planted-bugs` lists them); against any other binary the run is refused with one line.
    #[arg(long)]
    plant: Option<String>,
    /// Snowflake worker IDs (a power of two, 2 to 1024). The default, 0, gives fewer workers than
    /// nodes (2 for 3 nodes, 4 for 5), so leases expire and get taken over during the run.
    #[arg(long, default_value_t = 0)]
    snowflake_workers: u64,
    /// Every node's `--election-timeout-ms` (default: leafraft's own).
    #[arg(long)]
    election_timeout_ms: Option<u64>,
    /// Concurrent client loops.
    #[arg(long, default_value_t = 6)]
    clients: usize,
    /// Keeps the logs and data directories even when the run passes.
    #[arg(long)]
    keep: bool,
    /// Also writes the summary as Markdown to this file.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Prints the seed's schedule for `--duration` (each fault taking its hold time) and exits.
    #[arg(long)]
    dry_run: bool,
}

/// What one run does.
#[derive(Clone, Copy)]
struct RunPlan<'a> {
    clients: usize,
    kinds: &'a [FaultKind],
    seed: u64,
    /// Voters at the start.
    size: usize,
    /// How long faults are injected.
    duration: Duration,
    /// How many nodes must serve snowflake IDs after healing (fewer workers than nodes).
    snowflake_quota: usize,
}

/// What one run found.
struct Summary {
    seed: u64,
    nodes: usize,
    duration: Duration,
    passed: bool,
    checks: Vec<Check>,
    /// The checks whose event never happened although a fault that makes it was injected.
    unexercised: Vec<&'static str>,
    tally: Tally,
    faults: BTreeMap<FaultKind, u64>,
    recoveries: Vec<faults::Recovery>,
    final_recovery: Option<Duration>,
}

fn main() {
    let args = Args::parse();
    if let Some(bug) = &args.plant {
        if let Err(refusal) = leafraft_binary(&args).and_then(|binary| check_plantable(&binary, bug)) {
            eprintln!("leafraft-chaos: --plant refused: {refusal:#}");
            std::process::exit(exit::REFUSED);
        }
    }
    let code = match tokio::runtime::Runtime::new().map_err(anyhow::Error::from).and_then(|rt| rt.block_on(run(args))) {
        Ok(true) => exit::PASS,
        Ok(false) => exit::FAIL,
        Err(e) => match e.downcast_ref::<CannotRunHere>() {
            Some(why) => {
                println!("RESULT: CANNOT RUN HERE ({why})");
                exit::CANNOT_RUN_HERE
            }
            None => {
                eprintln!("leafraft-chaos: {e:#}");
                println!("RESULT: FAIL (the run could not be carried out: {e:#})");
                exit::FAIL
            }
        },
    };
    std::process::exit(code);
}

/// The `leafraft` binary the nodes run: `--binary`, or the one beside this runner.
fn leafraft_binary(args: &Args) -> anyhow::Result<PathBuf> {
    let binary = match &args.binary {
        Some(binary) => binary.clone(),
        None => std::env::current_exe()?.with_file_name("leafraft"),
    };
    if !binary.exists() {
        bail!("no leafraft binary at {} (build it, or pass --binary)", binary.display());
    }
    Ok(binary)
}

/// Whether `binary` can plant `bug`: asked of the binary itself (`leafraft planted-bugs`, a
/// subcommand only builds with the `planted` feature have), so a release build is refused rather
/// than silently planting nothing.
fn check_plantable(binary: &std::path::Path, bug: &str) -> anyhow::Result<()> {
    let output = std::process::Command::new(binary)
        .arg("planted-bugs")
        .output()
        .with_context(|| format!("cannot run {}", binary.display()))?;
    if !output.status.success() {
        bail!(
            "{} cannot plant bugs (built without the cargo feature `planted`; build one with `cargo build --features planted` and pass it with --binary)",
            binary.display()
        );
    }
    let known = String::from_utf8_lossy(&output.stdout);
    let known: Vec<&str> = known.lines().map(str::trim).filter(|name| !name.is_empty()).collect();
    if !known.contains(&bug) {
        bail!("unknown planted bug {bug:?} (known: {})", known.join(", "));
    }
    Ok(())
}

async fn run(args: Args) -> anyhow::Result<bool> {
    let kinds = args.faults.0.clone();
    let binary = leafraft_binary(&args)?;
    if args.dry_run {
        let (main, clocks) = faults::lanes(args.seed, &kinds);
        let mut lines = Vec::new();
        for (lane, plans) in
            [("", Box::new(main) as Box<dyn Iterator<Item = faults::Plan>>), ("clock lane: ", Box::new(clocks))]
        {
            let mut at = Duration::ZERO;
            for plan in plans {
                at += plan.gap;
                if at >= args.duration {
                    break;
                }
                lines.push((at, format!("{lane}{} hold {:.1}s", plan.kind.name(), plan.hold.as_secs_f64())));
                at += plan.hold;
            }
        }
        if kinds.contains(&FaultKind::SwitchToMonotonic) {
            let (at, _) = faults::switch::planned(args.seed, args.duration);
            lines.push((
                at,
                format!("switch lane: {} of tag {}", FaultKind::SwitchToMonotonic.name(), workload::SWITCH_TAG),
            ));
        }
        lines.sort_by_key(|(at, _)| *at);
        for (at, line) in lines {
            println!("{:>8.3}s  {line}", at.as_secs_f64());
        }
        return Ok(true);
    }
    if kinds.iter().any(|kind| kind.needs_lazy_disks()) {
        // Decided by a probe that mounts a known-good FUSE file system, not LazyFS: a broken
        // LazyFS then fails the run instead of reading as a machine without FUSE.
        if let Some(why) = faults::power::unavailable() {
            println!("power loss unavailable: {why}");
            return Err(CannotRunHere(format!("the power-loss faults need FUSE: {why}")).into());
        }
    }
    net::cleanup_stale();
    faults::power::cleanup_stale_mounts();
    let Some(soak) = args.soak else {
        let summary = run_once(&args, &binary, &kinds, args.seed, args.nodes, args.duration).await?;
        if let Some(path) = &args.report {
            std::fs::write(path, markdown(std::slice::from_ref(&summary)))?;
        }
        return Ok(summary.passed);
    };
    let started = Instant::now();
    let mut summaries = Vec::new();
    for round in 0u64.. {
        let left = soak.saturating_sub(started.elapsed());
        if left < Duration::from_secs(30) {
            break;
        }
        let nodes = if round % 2 == 0 { 3 } else { 5 };
        let summary = run_once(&args, &binary, &kinds, args.seed + round, nodes, args.soak_run.min(left)).await?;
        summaries.push(summary);
    }
    let all_passed = summaries.iter().all(|s| s.passed);
    let text = markdown(&summaries);
    println!("\n{text}");
    if let Some(path) = &args.report {
        std::fs::write(path, &text)?;
    }
    println!("RESULT: {} soak of {} runs", if all_passed { "PASS" } else { "FAIL" }, summaries.len());
    Ok(all_passed)
}

async fn run_once(
    args: &Args,
    binary: &std::path::Path,
    wanted: &[FaultKind],
    seed: u64,
    size: usize,
    duration: Duration,
) -> anyhow::Result<Summary> {
    let pid = std::process::id();
    let dir = std::env::temp_dir().join(format!("leafraft-chaos-{pid}-{seed}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let net = match (args.net, Net::available()) {
        (NetMode::Loopback, _) => None,
        (NetMode::Auto, Err(why)) => {
            eprintln!("chaos: network namespaces unavailable ({why}): loopback, no partitions");
            None
        }
        (NetMode::Netns, Err(why)) => bail!("network namespaces unavailable: {why}"),
        (mode, Ok(())) => match Net::create(&format!("lc{pid}"), (1 + pid % 250) as u8, size + 2) {
            Ok(net) => Some(net),
            Err(e) if mode == NetMode::Auto => {
                eprintln!("chaos: could not build network namespaces ({e:#}): loopback, no partitions");
                None
            }
            Err(e) => return Err(e),
        },
    };
    let network = if net.is_some() { "netns" } else { "loopback" };
    let faketime = std::path::Path::new(nodes::FAKETIME_LIB).exists();
    let workers = match args.snowflake_workers {
        // The largest power of two below the node count, at least 2.
        0 => std::iter::successors(Some(2u64), |w| Some(w * 2)).take_while(|w| *w < size as u64).last().unwrap_or(2),
        n => n,
    };
    if !workers.is_power_of_two() || !(2..=1024).contains(&workers) {
        bail!("--snowflake-workers must be a power of two from 2 to 1024, got {workers}");
    }
    // At most 10 (workers is at most 1024): fits the layout's `u8`.
    let worker_bits = workers.trailing_zeros() as u8;
    let layout = Layout { epoch_ms: 1_288_834_974_657, time_bits: 41, worker_bits, sequence_bits: 22 - worker_bits };
    // Short leases, so a paused or cut-off holder loses its worker within a run and a node without
    // one takes it over: the path where two holders could overlap.
    let serve_args: Vec<String> = [
        "--snowflake-worker-bits".to_string(),
        worker_bits.to_string(),
        "--snowflake-sequence-bits".into(),
        (22 - worker_bits).to_string(),
        "--worker-lease-ms".into(),
        "4000".into(),
        "--snowflake-window-ms".into(),
        "1500".into(),
    ]
    .into();
    let mut serve_args = serve_args;
    if !args.fsync {
        serve_args.extend(["--fsync".to_string(), "false".to_string()]);
    }
    if let Some(timeout) = args.election_timeout_ms {
        serve_args.extend(["--election-timeout-ms".to_string(), timeout.to_string()]);
    }
    let lazy_disks = wanted.iter().any(|kind| kind.needs_lazy_disks());
    let nodes = Arc::new(Nodes::new(
        binary.to_path_buf(),
        dir.clone(),
        net,
        faketime,
        args.plant.clone(),
        serve_args,
        lazy_disks,
    )?);
    let (kinds, skipped) = faults::available_kinds(&nodes, wanted);
    println!(
        "leafraft-chaos seed={seed} nodes={size} duration={}s network={network} clocks={} workers={workers} clients={}{}{}{}",
        duration.as_secs(),
        if faketime { "libfaketime" } else { "real" },
        args.clients,
        if lazy_disks { " disks=lazyfs" } else { "" },
        if args.fsync { "" } else { " fsync=false" },
        args.plant.as_ref().map(|bug| format!(" planted-bug={bug}")).unwrap_or_default()
    );
    if !skipped.is_empty() {
        if args.strict {
            drop(nodes);
            let _ = std::fs::remove_dir_all(&dir);
            return Err(CannotRunHere(format!("cannot inject {}", skipped.join(", "))).into());
        }
        println!("skipped fault kinds: {}", skipped.join(", "));
    }
    let record = Arc::new(Record::default());
    let quota = workers.min(size as u64) as usize;
    let plan = RunPlan { clients: args.clients, kinds: &kinds, seed, size, duration, snowflake_quota: quota };
    let outcome = drive(&nodes, &record, &plan).await;
    let (history, final_recovery) = match outcome {
        Ok(found) => found,
        Err(e) => {
            nodes.kill_all();
            println!("setup failed: {e:#}; logs in {}", dir.display());
            return Err(e);
        }
    };
    nodes.kill_all();
    let mut checks = checker::check(&history, &layout);
    if let Some(switch) = record.switch.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
        if let Some(check) = checks.iter_mut().find(|check| check.name == "switch-real-time") {
            check.note = match check.note.is_empty() {
                true => switch.describe(),
                false => format!("{}; {}", switch.describe(), check.note),
            };
        }
    }
    let recoveries = record.recoveries.lock().unwrap_or_else(|e| e.into_inner()).clone();
    checks.push(Check::outside(
        "leader-recovery",
        recoveries.len() as u64,
        recoveries
            .iter()
            .filter(|r| r.took.is_none())
            .map(|r| {
                format!(
                    "no new leader within {:?} of {} at {:.3}s",
                    faults::LEADER_DEADLINE,
                    r.kind.name(),
                    r.at.as_secs_f64()
                )
            })
            .collect(),
    ));
    let final_failures = match &final_recovery {
        Ok(_) => Vec::new(),
        Err(why) => vec![why.clone()],
    };
    checks.push(Check::outside("final-recovery", 1, final_failures));
    for (name, outcomes) in
        [("wiped-member-refused", &record.wipes), ("majority-recovered", &record.recoveries_from_survivors)]
    {
        let outcomes = outcomes.lock().unwrap_or_else(|e| e.into_inner()).clone();
        checks.push(Check::outside(name, outcomes.len() as u64, outcomes.into_iter().flatten().collect()));
    }
    let injected = record.counts.lock().unwrap_or_else(|e| e.into_inner()).clone();
    // A check whose event never happened proves nothing; when a fault that makes that event was
    // injected (or the check needs none: the clients' own requests), that fails the run.
    let unexercised: Vec<&'static str> = checks
        .iter()
        .filter(|check| !check.exercised())
        .filter(|check| {
            let makers = exercised_by(check.name);
            makers.is_empty() || makers.iter().any(|kind| injected.contains_key(kind))
        })
        .map(|check| check.name)
        .collect();
    let passed = !checks.iter().any(Check::failed) && unexercised.is_empty();
    let summary = Summary {
        seed,
        nodes: size,
        duration,
        passed,
        unexercised,
        tally: history.tally(),
        checks,
        faults: injected,
        recoveries,
        final_recovery: final_recovery.ok(),
    };
    print_report(&summary, &record);
    drop(nodes);
    if passed && !args.keep {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        println!("logs and data: {}", dir.display());
    }
    let unexercised = match summary.unexercised.is_empty() {
        true => String::new(),
        false => format!(" (not exercised: {})", summary.unexercised.join(", ")),
    };
    println!("RESULT: {} seed={seed} nodes={size}{unexercised}", if passed { "PASS" } else { "FAIL" });
    Ok(summary)
}

/// The fault kinds whose injection makes the event a check judges; empty for the checks of the
/// clients' own requests, which every run makes.
fn exercised_by(check: &str) -> &'static [FaultKind] {
    match check {
        "wiped-member-refused" => &[FaultKind::WipeMember],
        "majority-recovered" => &[FaultKind::LoseMajority],
        "switch-real-time" => &[FaultKind::SwitchToMonotonic],
        // The kinds that take the leader away whenever there is one (the others only sometimes).
        "leader-recovery" => &[
            FaultKind::KillLeader,
            FaultKind::PauseLeader,
            FaultKind::IsolateLeader,
            FaultKind::IsolatedLeaderRestarts,
            FaultKind::WholeRestart,
            FaultKind::PowerLossAll,
        ],
        _ => &[],
    }
}

/// Starts the cluster, runs clients and faults, heals, waits for every node to serve again and
/// answers the history with how long that final recovery took (or why it failed).
async fn drive(
    nodes: &Arc<Nodes>,
    record: &Arc<Record>,
    run: &RunPlan<'_>,
) -> anyhow::Result<(History, Result<Duration, String>)> {
    let RunPlan { clients: n_clients, kinds, seed, size, duration, snowflake_quota } = *run;
    nodes.start_initial(size)?;
    record.event(nodes, format!("started {size} nodes"));
    wait_serving(nodes, Duration::from_secs(60), false, false, 0)
        .await
        .map_err(anyhow::Error::msg)
        .context("cluster formation")?;
    for (tag, step) in workload::TAGS {
        let mode = if tag == workload::MONOTONIC_TAG { "monotonic" } else { "segment" };
        nodes
            .admin(
                reqwest::Method::POST,
                "/v1/tags",
                Some(json!({"tag": tag, "step": step, "mode": mode, "scramble": tag == workload::SCRAMBLED_TAG})),
            )
            .await
            .with_context(|| format!("create tag {tag}"))?;
    }
    for namespace in workload::TIMESEQ_NAMESPACES {
        nodes
            .admin(reqwest::Method::POST, "/v1/timeseq", Some(json!({"namespace": namespace})))
            .await
            .with_context(|| format!("create the time-sequence namespace {namespace}"))?;
    }
    wait_serving(nodes, Duration::from_secs(60), true, true, snowflake_quota)
        .await
        .map_err(anyhow::Error::msg)
        .context("first IDs")?;
    record.event(nodes, "every node serves: clients start, faults begin");

    let started = nodes.started();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut clients = Vec::new();
    for client in 0..n_clients {
        let client_seed = seed.wrapping_mul(1000).wrapping_add(client as u64);
        clients.push(tokio::spawn(workload::client(Arc::clone(nodes), client_seed, started, stop_rx.clone())));
    }
    let poller = tokio::spawn(workload::max_id_poller(Arc::clone(nodes), started, stop_rx.clone()));

    faults::run(Arc::clone(nodes), Arc::clone(record), seed, kinds, size, Instant::now() + duration).await;

    record.event(nodes, "heal everything: SIGCONT, network, clocks, restart stopped nodes");
    for id in nodes.ids() {
        nodes.resume(id);
        let _ = nodes.set_clock(id, 0);
    }
    if let Some(net) = nodes.net() {
        net.heal_all()?;
    }
    for id in nodes.ids() {
        if !nodes.is_running(id) {
            nodes.start(id)?;
        }
    }
    let healed = Instant::now();
    // A cluster recovered from a survivor claims no second before its floor, about 70 s after the
    // recovery (`leafraft recover`'s default margin): time-sequence IDs are awaited only without one.
    let timeseq = record.recoveries_from_survivors.lock().unwrap_or_else(|e| e.into_inner()).is_empty();
    if !timeseq {
        record.event(nodes, "time-sequence IDs not awaited: a recovered cluster refuses seconds below its floor");
    }
    let final_recovery =
        wait_serving(nodes, FINAL_RECOVERY_DEADLINE, true, timeseq, snowflake_quota).await.map(|()| healed.elapsed());
    match &final_recovery {
        Ok(took) => record.event(nodes, format!("every node serves again, {:.3}s after healing", took.as_secs_f64())),
        Err(why) => record.event(nodes, format!("FINAL RECOVERY FAILED: {why}")),
    }
    let _ = stop_tx.send(true);
    let mut history = History::default();
    let since_start = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let now_unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    history.started_unix_ms = now_unix_ms.saturating_sub(since_start);
    let switch = record.switch.lock().unwrap_or_else(|e| e.into_inner()).clone();
    history.switched_us = switch.and_then(|switch| switch.confirmed).map(|at| at.as_micros() as u64);
    for client in clients {
        history.ops.extend(client.await??);
    }
    history.max_id_reads = poller.await??;
    history.graceful_stops_us = record
        .graceful_stops
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|(from, to)| (from.as_micros() as u64, to.as_micros() as u64))
        .collect();
    Ok((history, final_recovery))
}

/// Waits until every node answers `/readyz` (and, with `ids`, a segment ID of every tag, and
/// `snowflake_quota` nodes a snowflake ID: there may be fewer workers than nodes; with `timeseq`,
/// a time-sequence ID), or answers what was still missing.
async fn wait_serving(
    nodes: &Nodes,
    deadline: Duration,
    ids: bool,
    timeseq: bool,
    snowflake_quota: usize,
) -> Result<(), String> {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(1)).build().map_err(|e| e.to_string())?;
    let until = Instant::now() + deadline;
    let mut paths = vec!["/readyz".to_string()];
    if ids {
        paths.extend(workload::TAGS.iter().map(|(tag, _)| format!("/v1/segment/{tag}")));
    }
    if timeseq {
        paths.extend(workload::TIMESEQ_NAMESPACES.iter().map(|namespace| format!("/v1/timeseq/{namespace}?shard=0")));
    }
    let mut serving = std::collections::BTreeSet::new();
    let mut snowflake = std::collections::BTreeSet::new();
    let mut last = String::new();
    loop {
        let targets = nodes.targets();
        for target in &targets {
            if !serving.contains(&target.id) {
                match get_ok(&http, &target.url, &paths).await {
                    Ok(()) => {
                        serving.insert(target.id);
                    }
                    Err(why) => last = format!("node {} {why}", target.id),
                }
            }
            if ids && !snowflake.contains(&target.id) && snowflake.len() < snowflake_quota {
                match get_ok(&http, &target.url, &["/v1/snowflake".to_string()]).await {
                    Ok(()) => {
                        snowflake.insert(target.id);
                    }
                    Err(why) => last = format!("node {} {why}", target.id),
                }
            }
        }
        let quota = snowflake_quota.min(targets.len());
        if targets.iter().all(|target| serving.contains(&target.id)) && (!ids || snowflake.len() >= quota) {
            return Ok(());
        }
        if Instant::now() >= until {
            return Err(format!(
                "within {deadline:?}, {} of {} nodes served segment IDs and {} of the {quota} needed snowflake IDs; last: {last}",
                serving.len(),
                targets.len(),
                snowflake.len()
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// GETs every path in turn; the first that fails says why.
async fn get_ok(http: &reqwest::Client, url: &str, paths: &[String]) -> Result<(), String> {
    for path in paths {
        match http.get(format!("{url}{path}")).send().await {
            Ok(answer) if answer.status().is_success() => {}
            Ok(answer) => {
                let status = answer.status();
                let body: Value = answer.json().await.unwrap_or(Value::Null);
                return Err(format!("{path}: {status} {body}"));
            }
            Err(e) => return Err(format!("{path}: {e}")),
        }
    }
    Ok(())
}

/// `90`, `90s`, `5m`, `1h30m`: a bare number is seconds.
fn parse_duration(text: &str) -> Result<Duration, String> {
    match text.parse::<u64>() {
        Ok(secs) => Ok(Duration::from_secs(secs)),
        Err(_) => humantime::parse_duration(text).map_err(|e| e.to_string()),
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn recovery_line(recoveries: &[faults::Recovery]) -> String {
    let mut took: Vec<Duration> = recoveries.iter().filter_map(|r| r.took).collect();
    took.sort();
    let missing = recoveries.len() - took.len();
    if took.is_empty() {
        return format!(
            "none measured{}",
            if missing > 0 { format!(", {missing} without a new leader") } else { String::new() }
        );
    }
    format!(
        "n={} p50={:.3}s p99={:.3}s max={:.3}s{}",
        took.len(),
        percentile(&took, 0.5).as_secs_f64(),
        percentile(&took, 0.99).as_secs_f64(),
        took.last().copied().unwrap_or_default().as_secs_f64(),
        if missing > 0 { format!(", {missing} without a new leader") } else { String::new() }
    )
}

fn print_report(summary: &Summary, record: &Record) {
    println!("timeline:");
    for (at, text) in record.timeline.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        println!("  {:>8.3}s  {text}", at.as_secs_f64());
    }
    let faults: Vec<String> = summary.faults.iter().map(|(kind, n)| format!("{} {n}", kind.name())).collect();
    println!("faults: {}", if faults.is_empty() { "none".into() } else { faults.join(", ") });
    println!("requests (ok / failed / unknown):");
    for (endpoint, row) in &summary.tally.by_endpoint {
        println!("  {endpoint:<22} {:>9} / {:>7} / {:>6}", row.ok, row.failed, row.unknown);
    }
    let t = &summary.tally;
    println!("IDs acknowledged: segment {}, snowflake {}, timeseq {}", t.segment_ids, t.snowflake_ids, t.timeseq_ids);
    let errors: Vec<String> = summary.tally.errors.iter().map(|(code, n)| format!("{code} {n}")).collect();
    println!("errors by code: {}", if errors.is_empty() { "none".into() } else { errors.join(", ") });
    let unknown: Vec<String> = summary.tally.unknown.iter().map(|(why, n)| format!("{why} {n}")).collect();
    println!("unknown (may have been issued): {}", if unknown.is_empty() { "none".into() } else { unknown.join(", ") });
    println!("new leader after leader loss: {}", recovery_line(&summary.recoveries));
    for recovery in &summary.recoveries {
        let took = recovery.took.map(|t| format!("{:.3}s", t.as_secs_f64())).unwrap_or_else(|| "none".into());
        println!("  {:>8.3}s  {:<16} {took}", recovery.at.as_secs_f64(), recovery.kind.name());
    }
    match summary.final_recovery {
        Some(took) => println!("after the last heal every node served again in {:.3}s", took.as_secs_f64()),
        None => println!("after the last heal NOT every node served again"),
    }
    println!("checks (how many times what each checks happened, and how often it broke):");
    for check in &summary.checks {
        let verdict = match () {
            () if check.failed() => "FAIL",
            () if check.passed() => "PASS",
            () if summary.unexercised.contains(&check.name) => "NOT EXERCISED",
            // Nothing in this run makes its event: neither a pass nor a failure.
            () => "not exercised",
        };
        let why = match (check.exercised(), exercised_by(check.name)) {
            (true, _) => String::new(),
            (false, []) => " (the clients' requests never made it happen)".into(),
            (false, kinds) => {
                let kinds: Vec<&str> = kinds.iter().map(|kind| kind.name()).collect();
                match summary.unexercised.contains(&check.name) {
                    true => format!(" (although {} was injected)", kinds.join(" or ")),
                    false => format!(" (no {} fault in this run)", kinds.join(" or ")),
                }
            }
        };
        println!("  {verdict} {:<24} {} checked, {} violations{why}", check.name, check.checked, check.violations);
        if !check.note.is_empty() {
            println!("       ({})", check.note);
        }
        for example in &check.examples {
            println!("       {example}");
        }
    }
}

/// The Markdown summary of runs (the soak report of `docs/reliability.md`).
fn markdown(summaries: &[Summary]) -> String {
    let mut out = String::new();
    let passed = summaries.iter().filter(|s| s.passed).count();
    out.push_str(&format!(
        "### {} runs, {} passed, {:.0} min of faults\n\n",
        summaries.len(),
        passed,
        summaries.iter().map(|s| s.duration.as_secs_f64()).sum::<f64>() / 60.0
    ));
    out.push_str(
        "| seed | nodes | faults injected | segment IDs | snowflake IDs | timeseq IDs | new leader p50 / max | result |\n",
    );
    out.push_str("| ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |\n");
    for s in summaries {
        let mut took: Vec<Duration> = s.recoveries.iter().filter_map(|r| r.took).collect();
        took.sort();
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {:.2} s / {:.2} s | {} |\n",
            s.seed,
            s.nodes,
            s.faults.values().sum::<u64>(),
            s.tally.segment_ids,
            s.tally.snowflake_ids,
            s.tally.timeseq_ids,
            percentile(&took, 0.5).as_secs_f64(),
            took.last().copied().unwrap_or_default().as_secs_f64(),
            if s.passed { "PASS" } else { "FAIL" }
        ));
    }
    let mut faults: BTreeMap<FaultKind, u64> = BTreeMap::new();
    let mut tally = Tally::default();
    let mut recoveries = Vec::new();
    for s in summaries {
        for (kind, n) in &s.faults {
            *faults.entry(*kind).or_default() += n;
        }
        tally.add(&s.tally);
        recoveries.extend(s.recoveries.iter().cloned());
    }
    out.push_str("\n**Faults:** ");
    out.push_str(&faults.iter().map(|(k, n)| format!("{} {n}", k.name())).collect::<Vec<_>>().join(", "));
    out.push_str(&format!(
        "\n\n**IDs checked:** {} segment, {} snowflake, {} time-sequence.\n\n**Requests (ok / failed / unknown):** ",
        tally.segment_ids, tally.snowflake_ids, tally.timeseq_ids
    ));
    out.push_str(
        &tally
            .by_endpoint
            .iter()
            .map(|(e, r)| format!("`{e}` {} / {} / {}", r.ok, r.failed, r.unknown))
            .collect::<Vec<_>>()
            .join(", "),
    );
    out.push_str("\n\n**Errors by code:** ");
    out.push_str(&tally.errors.iter().map(|(c, n)| format!("`{c}` {n}")).collect::<Vec<_>>().join(", "));
    out.push_str("\n\n**Unknown outcomes:** ");
    out.push_str(&tally.unknown.iter().map(|(c, n)| format!("{c} {n}")).collect::<Vec<_>>().join(", "));
    out.push_str(&format!("\n\n**New leader after a leader loss:** {}\n", recovery_line(&recoveries)));
    let mut by_kind: BTreeMap<FaultKind, Vec<Duration>> = BTreeMap::new();
    for r in &recoveries {
        if let Some(took) = r.took {
            by_kind.entry(r.kind).or_default().push(took);
        }
    }
    for (kind, mut took) in by_kind {
        took.sort();
        out.push_str(&format!(
            "- {}: n={} p50={:.3}s p99={:.3}s max={:.3}s\n",
            kind.name(),
            took.len(),
            percentile(&took, 0.5).as_secs_f64(),
            percentile(&took, 0.99).as_secs_f64(),
            took.last().copied().unwrap_or_default().as_secs_f64()
        ));
    }
    let mut finals: Vec<Duration> = summaries.iter().filter_map(|s| s.final_recovery).collect();
    finals.sort();
    out.push_str(&format!(
        "\n**Every node serving again after the last heal:** p50={:.3}s max={:.3}s\n",
        percentile(&finals, 0.5).as_secs_f64(),
        finals.last().copied().unwrap_or_default().as_secs_f64()
    ));
    out
}
