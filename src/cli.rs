//! The command line: [`args`] declares it (clap; nothing else sees clap), [`commands`] runs it.
//! `main.rs` only parses, sets up logging as [`Prepared::logging`] says, and calls [`run`].

pub mod args;
pub mod commands;
pub mod table;

use std::process::ExitCode;

pub use args::*;

use crate::config::Config;
use crate::config::LogFormat;
use crate::config::Settings;

/// How `main` sets up logging for a command: the filter when `RUST_LOG` is not set, and the
/// format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Logging {
    pub default_filter: &'static str,
    pub format: LogFormat,
}

/// A parsed command whose configuration is resolved, ready to run.
#[derive(Debug)]
pub struct Prepared {
    command: Command,
    /// `serve`'s configuration, resolved from flags, environment and file.
    config: Option<Box<Config>>,
}

impl Prepared {
    /// `Some` for the commands that log: `serve` (as configured) and `recover`.
    pub fn logging(&self) -> Option<Logging> {
        match (&self.command, &self.config) {
            (Command::Serve(_), Some(config)) => {
                Some(Logging { default_filter: "info,openraft=warn", format: config.log_format })
            }
            (Command::Recover(_), _) => {
                Some(Logging { default_filter: "warn,openraft=error", format: LogFormat::Text })
            }
            _ => None,
        }
    }
}

/// Resolves what a command needs before it runs; a bad configuration is a usage error (exit 2).
pub fn prepare(cli: Cli) -> Result<Prepared, ExitCode> {
    let config = match &cli.command {
        Command::Serve(args) => Some(Box::new(resolve(args).map_err(|e| commands::Failure::Usage(e).exit())?)),
        _ => None,
    };
    Ok(Prepared { command: cli.command, config })
}

fn resolve(args: &ServeArgs) -> Result<Config, String> {
    let file = match &args.config {
        Some(path) => Settings::load(path).map_err(|e| e.to_string())?,
        None => Settings::default(),
    };
    let mut config = Config::resolve(args.layer().over(file)).map_err(|e| e.to_string())?;
    for flag in secret_flags_given(std::env::args_os()) {
        config.warnings.push(format!(
            "{flag} was given on the command line, where other users of this host can read it (ps): \
             prefer LEAFRAFT_{} or {flag}-file",
            flag.trim_start_matches("--").replace('-', "_").to_uppercase()
        ));
    }
    Ok(config)
}

/// Runs a prepared command to its exit code.
pub fn run(prepared: Prepared) -> ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => return commands::Failure::Error(format!("cannot start the async runtime: {e}")).exit(),
    };
    let result = match (prepared.command, prepared.config) {
        (Command::Serve(_), Some(config)) => runtime.block_on(commands::serve::run(*config)),
        (command, _) => runtime.block_on(commands::run(command)),
    };
    // A node that stops after a storage failure may leave a blocking task stuck on the disk;
    // the exit must not wait for it.
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    match result {
        Ok(code) => code,
        Err(failure) => failure.exit(),
    }
}
