//! The `leafraft` binary: parse the command line, set up logging, call the library.

use std::process::ExitCode;

use clap::Parser;
use leafraft::cli::Cli;
use leafraft::cli::Logging;
use leafraft::config::LogFormat;

/// mimalloc rather than glibc's malloc: see the dependency's comment in `Cargo.toml`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // `leafraft planted-bugs` exists only in builds that can plant them (the chaos runner asks
    // before `--plant`); elsewhere clap refuses it as an unknown subcommand.
    #[cfg(feature = "planted")]
    if std::env::args().nth(1).as_deref() == Some("planted-bugs") {
        println!("{}", leafraft::planted::PlantedBug::NAMES.join("\n"));
        return ExitCode::SUCCESS;
    }
    let prepared = match leafraft::cli::prepare(Cli::parse()) {
        Ok(prepared) => prepared,
        Err(code) => return code,
    };
    if let Some(logging) = prepared.logging() {
        init_logging(logging);
    }
    leafraft::cli::run(prepared)
}

fn init_logging(logging: Logging) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(logging.default_filter));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    match logging.format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}
