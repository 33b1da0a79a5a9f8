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
    /// Nothing answered at the server's address (the reason in a few words);
    /// [`Failure::at_server`] names the server and says what to do.
    Unreachable(String),
}

impl Failure {
    pub fn exit(self) -> ExitCode {
        let (message, code) = match self {
            Failure::Usage(message) => (message, 2),
            Failure::Error(message) => (message, 1),
            Failure::Unreachable(reason) => (format!("no leafraft node answers ({reason})"), 1),
        };
        eprintln!("error: {message}");
        ExitCode::from(code)
    }
}

impl Failure {
    /// Names the server an unreachable failure was about, with what a user can do about it,
    /// instead of the HTTP library's chain of causes.
    pub fn at_server(self, server: &str) -> Failure {
        match self {
            Failure::Unreachable(reason) => Failure::Error(format!(
                "no leafraft node at {server} ({reason}); start one with `leafraft serve` or pass --server"
            )),
            other => other,
        }
    }
}

impl From<ClientError> for Failure {
    fn from(error: ClientError) -> Failure {
        let text = match &error {
            ClientError::Transport(text) | ClientError::Timeout { last: text, .. } => text.as_str(),
            _ => "",
        };
        match unreachable_reason(text) {
            Some(reason) => Failure::Unreachable(reason.to_string()),
            None => Failure::Error(error.to_string()),
        }
    }
}

/// The few words for a request that found nobody at the address, from the transport's text (the
/// client library reports connection failures as text); `None` for any other failure.
fn unreachable_reason(transport: &str) -> Option<&'static str> {
    if transport.contains("Connection refused") {
        Some("connection refused")
    } else if transport.contains("dns error") || transport.contains("failed to lookup address") {
        Some("its host name does not resolve")
    } else if transport.contains("tcp connect error") {
        Some("cannot connect")
    } else {
        None
    }
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure::Error(message)
    }
}

pub type Outcome = Result<ExitCode, Failure>;

/// Runs every command but `serve`; a failure to reach the server names it.
pub async fn run(command: Command) -> Outcome {
    let server = match &command {
        Command::Cluster { client, .. }
        | Command::Tag { client, .. }
        | Command::Id { client, .. }
        | Command::Decode { client, .. }
        | Command::Timeseq { client, .. }
        | Command::Worker { client, .. }
        | Command::Health { client }
        | Command::Backup { client, .. } => Some(client.server.clone()),
        _ => None,
    };
    let outcome = run_command(command).await;
    match server {
        Some(server) => outcome.map_err(|failure| failure.at_server(&server)),
        None => outcome,
    }
}

async fn run_command(command: Command) -> Outcome {
    match command {
        Command::Serve(_) => Err(Failure::Error("serve runs through cli::run".into())),
        Command::Cluster { client, command } => cluster::run(&connect(&client)?, command).await,
        Command::Tag { client, command } => tags::run(&connect(&client)?, command).await,
        Command::Id { client, command } => ids::run(&connect(&client)?, command).await,
        Command::Decode { client, id, namespace } => ids::decode(&connect(&client)?, &id, namespace.as_deref()).await,
        Command::Timeseq { client, command } => timeseq::run(&connect(&client)?, command).await,
        Command::Worker { client, command } => workers::run(&connect(&client)?, command).await,
        Command::Health { client } => ops::health(&connect(&client)?).await,
        Command::Backup { client, out, out_dir, keep } => {
            let target = match (out, out_dir) {
                (Some(file), _) => ops::BackupTarget::File(file),
                (None, Some(dir)) => ops::BackupTarget::Dir { dir, keep },
                (None, None) => return Err(Failure::Usage("give --out FILE or --out-dir DIR".into())),
            };
            ops::backup(&connect(&client)?, target).await
        }
        Command::Recover(args) => ops::recover(&args).await,
        Command::Bench { args } => ops::bench(args),
    }
}

/// A client of the one node `--server` names: the command answers for that node (no discovery,
/// no failover), and sends each write once. 90 s covers adding a learner, which answers once it
/// has caught up (the server's `--learner-timeout-ms`, 60 s by default).
pub fn connect(args: &ClientArgs) -> Result<Client, Failure> {
    let from_file = args.token_file.as_deref().map(read_token_file).transpose()?;
    let token = from_file.or(args.token.clone()).or(args.secret.clone());
    let mut builder = Client::builder().nodes([args.server.as_str()]).secret_opt(token);
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

/// The token in `path`: its first line, trimmed. An unreadable or empty file is a usage error
/// naming the file (never its content).
fn read_token_file(path: &std::path::Path) -> Result<String, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::Usage(format!("cannot read --token-file {}: {e}", path.display())))?;
    let token = text.lines().next().unwrap_or_default().trim();
    if token.is_empty() {
        return Err(Failure::Usage(format!("--token-file {} is empty", path.display())));
    }
    Ok(token.to_string())
}

pub fn print_json(value: &impl serde::Serialize) -> Outcome {
    let text = serde_json::to_string_pretty(value).map_err(|e| Failure::Error(e.to_string()))?;
    println!("{text}");
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_connection_is_one_line_naming_the_server_and_what_to_do() {
        let error = ClientError::Transport(
            "http://127.0.0.1:8080/v1/tags: error sending request for url (http://127.0.0.1:8080/v1/tags): client \
             error (Connect): tcp connect error: Connection refused (os error 111)"
                .into(),
        );
        let Failure::Error(message) = Failure::from(error).at_server("http://127.0.0.1:8080") else {
            panic!("not an error failure")
        };
        assert_eq!(
            message,
            "no leafraft node at http://127.0.0.1:8080 (connection refused); start one with `leafraft serve` or \
             pass --server"
        );
    }

    #[test]
    fn a_token_file_gives_its_first_line_trimmed_and_an_empty_one_is_refused() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("admin-token");
        std::fs::write(&path, "  s3cret-token \nignored\n").expect("write");
        assert_eq!(read_token_file(&path).ok().as_deref(), Some("s3cret-token"));
        std::fs::write(&path, "\n").expect("write");
        let Err(Failure::Usage(message)) = read_token_file(&path) else { panic!("an empty file was taken") };
        assert!(message.contains("is empty"), "{message}");
        let Err(Failure::Usage(message)) = read_token_file(&dir.path().join("missing")) else {
            panic!("a missing file was taken")
        };
        assert!(message.contains("cannot read --token-file"), "{message}");
    }

    #[test]
    fn other_failures_keep_their_text() {
        let error = ClientError::Api { status: 409, code: leafraft_client::ErrorCode::TagExists, message: "x".into() };
        let Failure::Error(message) = Failure::from(error).at_server("http://127.0.0.1:8080") else {
            panic!("not an error failure")
        };
        assert_eq!(message, "TAG_EXISTS (409): x");
    }
}
