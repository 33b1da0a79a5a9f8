//! What changes without a restart: on SIGHUP, and within a second of a watched file changing
//! (its size or modification time), the TLS files (`Tls::reload`) and the admin and client tokens
//! (read again from their `-file`s; the peer secret stays what the node started with, since
//! peers must send the same). A reload that fails keeps what was in use, logs a warning and counts
//! `leafraft_reloads_total{what,result="error"}`; for the tokens also
//! `leafraft_credentials_reload_failures_total{role}`, and `leafraft_credentials_stale` stays 1
//! until a reload succeeds. A token file that became empty fails like an unreadable one: emptying
//! a file never opens a role (unless `--admin-open`/`--client-open`, see `config::security`).
//!
//! The SIGHUP handler is installed whatever is configured: SIGHUP's default action would end the
//! process.

use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use crate::config::CredentialSource;
use crate::credentials::Credentials;
use crate::metrics::Metrics;
use crate::tls::Tls;

/// How often the files are checked for a change.
const FILE_POLL: Duration = Duration::from_secs(1);

/// What a reload replaces.
pub struct Reloadable {
    pub tls: Option<Arc<Tls>>,
    pub credentials: Arc<ArcSwap<Credentials>>,
    pub source: CredentialSource,
}

impl Reloadable {
    fn paths(&self) -> Vec<PathBuf> {
        let tls = self.tls.as_ref().map(|tls| tls.paths()).unwrap_or_default();
        tls.into_iter().chain(self.source.files()).collect()
    }

    fn reload(&self, metrics: &Metrics, trigger: &str) {
        if let Some(tls) = &self.tls {
            let result = tls.reload();
            metrics.count_reload("tls", result.is_ok());
            match result {
                Ok(()) => tracing::info!(trigger, "TLS certificates reloaded"),
                Err(error) => {
                    tracing::warn!(trigger, %error, "TLS reload failed; the previous certificates stay in use")
                }
            }
        }
        if self.source.files().is_empty() {
            return;
        }
        match self.source.reread(self.credentials.load().peer.clone()) {
            Ok(credentials) => {
                let (admin, clients) = (credentials.admin.is_some(), credentials.clients.len());
                self.credentials.store(Arc::new(credentials));
                metrics.count_reload("credentials", true);
                metrics.set_credentials_stale(false);
                tracing::info!(trigger, admin, clients, "credentials reloaded");
            }
            Err(error) => {
                metrics.count_reload("credentials", false);
                for role in &error.roles {
                    metrics.count_credentials_reload_failure(role);
                }
                metrics.set_credentials_stale(true);
                let error = error.message;
                tracing::warn!(trigger, %error, "credentials reload failed; the last good tokens stay in use");
            }
        }
    }
}

/// A file's size and modification time, to notice a change.
fn stamp(path: &Path) -> Option<(u64, std::time::SystemTime)> {
    let metadata = std::fs::metadata(path).ok()?;
    Some((metadata.len(), metadata.modified().ok()?))
}

/// Reloads on SIGHUP and when a watched file changes, until `stop`.
pub fn spawn(
    reloadable: Reloadable,
    metrics: Arc<Metrics>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
    tokio::spawn(async move {
        let paths = reloadable.paths();
        let stamps = || paths.iter().map(|p| stamp(p)).collect::<Vec<_>>();
        let mut seen = stamps();
        loop {
            let hangup_received = async {
                match &mut hangup {
                    Some(signal) => signal.recv().await,
                    None => std::future::pending().await,
                }
            };
            let trigger = tokio::select! {
                _ = hangup_received => "SIGHUP",
                () = tokio::time::sleep(FILE_POLL), if !paths.is_empty() => {
                    if stamps() == seen {
                        continue;
                    }
                    "the files changed"
                }
                changed = stop.changed() => {
                    if changed.is_err() || *stop.borrow() {
                        return;
                    }
                    continue;
                }
            };
            seen = stamps();
            reloadable.reload(&metrics, trigger);
        }
    })
}
