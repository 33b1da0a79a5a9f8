//! The subcommands other than the argument parsing: each talks to a cluster through the client
//! library (`leafraft-client`) or runs a part of this crate, and answers `Ok` or a [`Failure`]
//! that [`super::run`] turns into one `error:` line and the exit code.

pub mod cluster;
pub mod ids;
pub mod ops;
pub mod serve;
pub mod tags;
pub mod timeseq;
pub mod workers;

use std::process::ExitCode;
use std::time::Duration;

use leafraft_client::Client;
use leafraft_client::ClientError;

use super::ClientArgs;
use super::Command;

/// Why a command failed: a usage error exits 2, anything else 1.
#[derive(Debug)]
pub enum Failure {
    Usage(String),
    Error(String),
}

impl Failure {
    pub fn exit(self) -> ExitCode {
        let (message, code) = match self {
            Failure::Usage(message) => (message, 2),
            Failure::Error(message) => (message, 1),
        };
        eprintln!("error: {message}");
        ExitCode::from(code)
    }
}

impl From<ClientError> for Failure {
    fn from(error: ClientError) -> Failure {
        Failure::Error(error.to_string())
    }
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure::Error(message)
    }
}

pub type Outcome = Result<ExitCode, Failure>;

/// Runs every command but `serve`.
pub async fn run(command: Command) -> Outcome {
    match command {
        Command::Serve(_) => Err(Failure::Error("serve runs through cli::run".into())),
        Command::Cluster { client, command } => cluster::run(&connect(&client)?, command).await,
        Command::Tag { client, command } => tags::run(&connect(&client)?, command).await,
        Command::Id { client, command } => ids::run(&connect(&client)?, command).await,
        Command::Decode { client, id, namespace } => ids::decode(&connect(&client)?, &id, namespace.as_deref()).await,
        Command::Timeseq { client, command } => timeseq::run(&connect(&client)?, command).await,
        Command::Worker { client, command } => workers::run(&connect(&client)?, command).await,
        Command::Health { client } => ops::health(&connect(&client)?).await,
        Command::Backup { client, out } => ops::backup(&connect(&client)?, &out).await,
        Command::Recover(args) => ops::recover(&args).await,
        Command::Bench { args } => ops::bench(args),
    }
}

/// A client of the one node `--server` names: the command answers for that node (no discovery,
/// no failover), and sends each write once. 90 s covers adding a learner, which answers once it
/// has caught up (the server's `--learner-timeout-ms`, 60 s by default).
pub fn connect(args: &ClientArgs) -> Result<Client, Failure> {
    let mut builder =
        Client::builder().nodes([args.server.as_str()]).secret_opt(args.token.clone().or(args.secret.clone()));
    if let Some(ca) = &args.ca {
        builder = builder.ca_file(ca);
    }
    builder
        .discover(false)
        .retry_until_timeout(false)
        .timeout(Duration::from_secs(90))
        .attempt_timeout(Duration::from_secs(90))
        .build()
        .map_err(|e| Failure::Usage(e.to_string()))
}

pub fn print_json(value: &impl serde::Serialize) -> Outcome {
    let text = serde_json::to_string_pretty(value).map_err(|e| Failure::Error(e.to_string()))?;
    println!("{text}");
    Ok(ExitCode::SUCCESS)
}
