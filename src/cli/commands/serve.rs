//! `leafraft serve`: one node until Ctrl-C or SIGTERM.

use std::process::ExitCode;

use super::Failure;
use super::Outcome;
use crate::config::Config;

pub async fn run(config: Config) -> Outcome {
    crate::node::run::run(config, shutdown_signal()).await.map_err(|e| Failure::Error(e.to_string()))?;
    Ok(ExitCode::SUCCESS)
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
