//! The `leafraft` binary: parse the command line, set up logging, call the library.

use std::process::ExitCode;

use clap::Parser;

use leafraft::api::UpdateTag;
use leafraft::cli::Cli;
use leafraft::cli::ClientArgs;
use leafraft::cli::ClusterCommand;
use leafraft::cli::Command;
use leafraft::cli::IdCommand;
use leafraft::cli::ServeArgs;
use leafraft::cli::TagCommand;
use leafraft::cli::WorkerCommand;
use leafraft::client::Client;
use leafraft::cluster::ClusterStatus;
use leafraft::config::Config;
use leafraft::config::LogFormat;
use leafraft::config::Settings;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => return fail(format!("cannot start the async runtime: {e}")),
    };
    let code = match cli.command {
        Command::Serve(args) => runtime.block_on(serve(*args)),
        Command::Cluster { client, command } => runtime.block_on(cluster(client, command)),
        Command::Tag { client, command } => runtime.block_on(tag(client, command)),
        Command::Id { client, command } => runtime.block_on(id(client, command)),
        Command::Decode { client, id } => runtime.block_on(decode(client, id)),
        Command::Worker { client, command } => runtime.block_on(worker(client, command)),
        Command::Bench { args } => bench(args),
        Command::Health { client } => runtime.block_on(health(client)),
        Command::Backup { client, out } => runtime.block_on(backup(client, out)),
        Command::Recover(args) => runtime.block_on(recover(*args)),
    };
    // A node that stops after a storage failure may leave a blocking task stuck on the disk;
    // the exit must not wait for it.
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    code
}

/// `leafraft backup`: fetch, check, write atomically, and say what was written.
async fn backup(args: ClientArgs, out: std::path::PathBuf) -> ExitCode {
    let client = Client::new(&args.server, args.secret);
    let bytes = match client.backup().await {
        Ok(bytes) => bytes,
        Err(e) => return fail(e),
    };
    let backup = match leafraft::backup::decode(&bytes) {
        Ok(backup) => backup,
        Err(e) => return fail(format!("{} answered a backup this binary cannot use: {e}", client.base())),
    };
    if let Err(e) = leafraft::backup::write_file(&out, &bytes) {
        return fail(format!("cannot write {}: {e}", out.display()));
    }
    eprintln!(
        "backup of cluster {:016x} at log index {} ({} tags, taken at {} ms) written to {} ({} bytes)",
        backup.cluster_id,
        backup.applied_index,
        backup.tags.len(),
        backup.taken_at_ms,
        out.display(),
        bytes.len()
    );
    ExitCode::SUCCESS
}

/// `leafraft recover`: the report on stdout, one error line otherwise.
async fn recover(args: leafraft::cli::RecoverArgs) -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,openraft=error"));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    match leafraft::recover::run(args.options()).await {
        Ok(report) => {
            println!("{report}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

fn fail(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::FAILURE
}

fn usage(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(2)
}

async fn serve(args: ServeArgs) -> ExitCode {
    let file = match &args.config {
        Some(path) => match Settings::load(path) {
            Ok(file) => file,
            Err(e) => return usage(e),
        },
        None => Settings::default(),
    };
    let config = match Config::resolve(args.layer().over(file)) {
        Ok(config) => config,
        Err(e) => return usage(e),
    };
    init_logging(config.log_format);
    match leafraft::node::run(config, shutdown_signal()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,openraft=warn"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Completes on Ctrl-C or SIGTERM. The SIGTERM handler is installed when this is called, not
/// when the future is first polled (after the node already serves): a SIGTERM that comes as
/// soon as the node answers must stop it in order, not kill it.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    let terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    async move {
        let ctrl_c = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        #[cfg(unix)]
        let terminate = async move {
            match terminate {
                Some(mut signal) => {
                    signal.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        #[cfg(not(unix))]
        let terminate = std::future::pending::<()>();
        tokio::select! {
            () = ctrl_c => {},
            () = terminate => {},
        }
    }
}

fn print_json(value: &impl serde::Serialize) -> ExitCode {
    match serde_json::to_string_pretty(value) {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

async fn cluster(args: ClientArgs, command: ClusterCommand) -> ExitCode {
    let client = Client::new(&args.server, args.secret);
    let res = match command {
        ClusterCommand::Status { json } => match client.cluster_status().await {
            Ok(status) if json => return print_json(&status),
            Ok(status) => {
                print_status(&status);
                return ExitCode::SUCCESS;
            }
            Err(e) => Err(e),
        },
        ClusterCommand::Add { node_id, addr, learner } => {
            eprintln!(
                "adding node {node_id} at {addr} as a learner: waiting until it answers there and has replicated the \
                 leader's log (the server's --learner-timeout-ms, 60 s by default; the voters do not change meanwhile)"
            );
            match client.add_learner(node_id, &addr).await {
                Ok(status) if learner => Ok(status),
                Ok(_) => {
                    eprintln!(
                        "node {node_id} has caught up; promoting it to voter (only while it is at most {} entries \
                         behind the leader)",
                        leafraft::cluster::MAX_PROMOTION_LAG
                    );
                    client.promote_voter(node_id).await
                }
                Err(e) => Err(e),
            }
        }
        ClusterCommand::Remove { node_id } => client.remove_member(node_id).await,
    };
    match res {
        Ok(status) => {
            print_status(&status);
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

fn print_status(status: &ClusterStatus) {
    println!(
        "node {} is {}; leader {}; term {}; commit {}; applied {}",
        status.node_id,
        status.role,
        status.leader_id.map_or("unknown".to_string(), |id| id.to_string()),
        status.term,
        status.commit_index.map_or("-".to_string(), |i| i.to_string()),
        status.applied_index.map_or("-".to_string(), |i| i.to_string()),
    );
    println!("{:<8} {:<24} {:<8} {:<10} {:<8}", "NODE", "ADDRESS", "ROLE", "MATCHED", "LAG");
    for (id, addr) in &status.nodes {
        let node_id: u64 = id.parse().unwrap_or(0);
        let role = if status.leader_id == Some(node_id) {
            "leader"
        } else if status.voters.contains(&node_id) {
            "voter"
        } else {
            "learner"
        };
        let replication = status.replication.as_ref().and_then(|r| r.get(id));
        let matched = replication.and_then(|r| r.matched_index).map_or("-".to_string(), |i| i.to_string());
        let lag = replication.map_or("-".to_string(), |r| r.lag.to_string());
        println!("{id:<8} {addr:<24} {role:<8} {matched:<10} {lag:<8}");
    }
}

async fn tag(args: ClientArgs, command: TagCommand) -> ExitCode {
    let client = Client::new(&args.server, args.secret);
    match command {
        TagCommand::Create { name, step, max_id, description } => {
            match client.create_tag(&name, max_id, step, description).await {
                Ok(tag) => print_json(&tag),
                Err(e) => fail(e),
            }
        }
        TagCommand::List => match client.list_tags().await {
            Ok(tags) => print_json(&serde_json::json!({ "tags": tags })),
            Err(e) => fail(e),
        },
        TagCommand::Get { name } => match client.get_tag(&name).await {
            Ok(tag) => print_json(&tag),
            Err(e) => fail(e),
        },
        TagCommand::Update { name, step, max_id, description } => {
            if step.is_none() && max_id.is_none() && description.is_none() {
                return usage("tag update needs at least one of --step, --max-id, --description");
            }
            let update = UpdateTag { step, description, max_id: max_id.map(leafraft::api::MaxId), mode: None };
            match client.update_tag(&name, &update).await {
                Ok(tag) => print_json(&tag),
                Err(e) => fail(e),
            }
        }
        TagCommand::Import { file, dry_run } => match leafraft::import::run(&client, &file, dry_run).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(e),
        },
    }
}

/// `leafraft bench ...` runs the load generators, which live in the `tools` crate so that
/// nothing of them is linked into the service: the `leafraft-bench` binary next to this one.
fn bench(args: Vec<std::ffi::OsString>) -> ExitCode {
    let tool = match std::env::current_exe() {
        Ok(exe) => exe.with_file_name("leafraft-bench"),
        Err(e) => return fail(format!("cannot find this executable to locate leafraft-bench: {e}")),
    };
    if !tool.exists() {
        return fail(format!("{} not found: build it with `cargo build --release -p leafraft-tools`", tool.display()));
    }
    match std::process::Command::new(&tool).args(args).status() {
        Ok(status) if status.success() => ExitCode::SUCCESS,
        Ok(status) => ExitCode::from(u8::try_from(status.code().unwrap_or(1)).unwrap_or(1)),
        Err(e) => fail(format!("cannot run {}: {e}", tool.display())),
    }
}

async fn id(args: ClientArgs, command: IdCommand) -> ExitCode {
    let client = Client::new(&args.server, args.secret);
    match command {
        IdCommand::Segment { tag, count } => print_lines(client.segment_ids(&tag, count).await),
        IdCommand::Snowflake { count } => print_lines(client.snowflake_ids(count).await),
    }
}

fn print_lines(res: Result<Vec<String>, leafraft::client::ClientError>) -> ExitCode {
    match res {
        Ok(lines) => {
            let mut out = String::new();
            for line in lines {
                out.push_str(&line);
                out.push('\n');
            }
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

async fn decode(args: ClientArgs, id: String) -> ExitCode {
    let client = Client::new(&args.server, args.secret);
    match client.decode_snowflake(&id).await {
        Ok(decoded) => print_json(&decoded),
        Err(e) => fail(e),
    }
}

/// `leafraft health`: exit 0 when `/readyz` answers 200 within 5 s, 1 otherwise; one line on
/// stderr either way (a HEALTHCHECK for images without curl or a shell).
async fn health(args: ClientArgs) -> ExitCode {
    let client = Client::new(&args.server, args.secret);
    match tokio::time::timeout(std::time::Duration::from_secs(5), client.ready()).await {
        Ok(Ok(())) => {
            eprintln!("ready: {}", client.base());
            ExitCode::SUCCESS
        }
        Ok(Err(e)) => fail(format!("not ready: {e}")),
        Err(_) => fail(format!("not ready: {}/readyz did not answer within 5 s", client.base())),
    }
}

async fn worker(args: ClientArgs, command: WorkerCommand) -> ExitCode {
    let client = Client::new(&args.server, args.secret);
    let res = match command {
        WorkerCommand::List { json: true } => client.workers().await,
        WorkerCommand::List { json: false } => match client.workers().await {
            Ok(view) => {
                print_workers(&view);
                return ExitCode::SUCCESS;
            }
            Err(e) => Err(e),
        },
        WorkerCommand::Release { worker_id } => client.release_worker(worker_id).await,
    };
    match res {
        Ok(view) => print_json(&view),
        Err(e) => fail(e),
    }
}

fn print_workers(view: &serde_json::Value) {
    println!("{:<8} {:<8} {:<8} {:<16} {:<16}", "WORKER", "HOLDER", "EPOCH", "WINDOW END", "LAST HEARTBEAT");
    for worker in view["workers"].as_array().into_iter().flatten() {
        println!(
            "{:<8} {:<8} {:<8} {:<16} {:<16}",
            worker["worker_id"].to_string(),
            worker["holder"].as_u64().map_or("-".to_string(), |h| h.to_string()),
            worker["epoch"].to_string(),
            worker["window_end_ms"].to_string(),
            worker["last_heartbeat_ms"].to_string(),
        );
    }
    let this = &view["this_node"];
    println!(
        "this node: worker {}, clock offset to peers {} ms, refused: {}",
        this["worker_id"], this["clock_offset_ms"], this["refused"]
    );
}
