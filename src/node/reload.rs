//! What changes without a restart: on SIGHUP, and within a second of a watched file changing
//! (its size or modification time), the TLS files (`Tls::reload`) and the admin and client tokens
//! (read again from their `-file`s; the peer secret stays what the node started with, since
//! peers must send the same, but its file is checked too). Every credential file is read by the
//! one format of `config::credentials::credential_entries`, and a reload accepts exactly what a start
//! accepts. A reload that fails keeps what was in use, logs a warning naming the file and counts
//! `leafraft_reloads_total{what,result="error"}`; for the tokens also
//! `leafraft_credentials_reload_failures_total{role}`, and `leafraft_credentials_stale` stays 1
//! until a reload succeeds. A token file that became empty (or only comments), or holds two
//! tokens, fails like an unreadable one: editing a file never opens a role or locks it with a
//! token nobody meant (unless `--admin-open`/`--client-open`, see `config::security`).
//!
//! The SIGHUP handler is installed whatever is configured: SIGHUP's default action would end the
//! process.

use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use crate::api::tls::Tls;
use crate::config::credentials::Credentials;
use crate::config::CredentialSource;
use crate::metrics::Metrics;

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
            metrics.set_certificates_not_after(&tls.not_after());
            match result {
                Ok(()) => tracing::info!(trigger, "TLS certificates reloaded"),
                Err(error) => {
                    tracing::warn!(trigger, %error, "TLS reload failed; the previous certificates stay in use")
                }
            }
        }
        if !self.source.files().is_empty() {
            self.reload_credentials(metrics, trigger);
        }
    }

    /// Reads the credential files again by the rules of the start (`config::security`): what the
    /// node would refuse to start with leaves the last good credentials in use, counted, marked
    /// stale and logged at WARN naming the file (never its content). Answers whether the files
    /// were taken.
    fn reload_credentials(&self, metrics: &Metrics, trigger: &str) -> bool {
        match self.source.reread(self.credentials.load().peer.clone()) {
            Ok(reread) => {
                let credentials = reread.credentials;
                let (admin, clients) = (credentials.admin.is_some(), credentials.clients.len());
                self.credentials.store(Arc::new(credentials));
                metrics.count_reload("credentials", true);
                metrics.set_credentials_stale(false);
                tracing::info!(trigger, admin, clients, "credentials reloaded");
                if reread.peer_differs {
                    tracing::warn!(
                        trigger,
                        "the peer secret in the files differs from the one in use, which changes only with a restart \
                         of every member (peers send it too); the one in use stays"
                    );
                }
                true
            }
            Err(error) => {
                metrics.count_reload("credentials", false);
                for role in &error.roles {
                    metrics.count_credentials_reload_failure(role);
                }
                metrics.set_credentials_stale(true);
                let error = error.message;
                tracing::warn!(trigger, %error, "credentials reload failed; the last good tokens stay in use");
                false
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
    if let Some(tls) = &reloadable.tls {
        metrics.expect_reloads("tls");
        metrics.set_certificates_not_after(&tls.not_after());
    }
    if !reloadable.source.files().is_empty() {
        metrics.expect_reloads("credentials");
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::config::Settings;

    /// The credential files, each with how a token line is written in it and where the token
    /// it gives ends up.
    #[derive(Clone, Copy, Debug)]
    enum File {
        Secret,
        Peer,
        Admin,
        Clients,
    }

    impl File {
        fn settings(self, path: PathBuf) -> Settings {
            let mut settings = Settings::default();
            match self {
                File::Secret => settings.secret_file = Some(path),
                File::Peer => settings.peer_secret_file = Some(path),
                File::Admin => settings.admin_token_file = Some(path),
                File::Clients => settings.client_token_file = Some(path),
            }
            settings
        }

        /// The entry line for `token` (the client-token file names its holder).
        fn line(self, name: &str, token: &str) -> String {
            match self {
                File::Clients => format!("{name}:{token}"),
                _ => token.to_string(),
            }
        }

        /// The tokens the credentials hold for this file's role.
        fn tokens(self, credentials: &Credentials) -> Vec<String> {
            let one = |secret: &Option<crate::config::credentials::Secret>| {
                secret.iter().map(|s| s.expose().to_string()).collect()
            };
            match self {
                File::Secret | File::Admin => one(&credentials.admin),
                File::Peer => one(&credentials.peer),
                File::Clients => credentials.clients.iter().map(|c| c.token.expose().to_string()).collect(),
            }
        }
    }

    /// What each content must give: refused, or these tokens (for single-token files, then for
    /// the client-token file).
    struct Case {
        what: &'static str,
        text: fn(File) -> String,
        single: Option<&'static [&'static str]>,
        clients: Option<&'static [&'static str]>,
    }

    const TABLE: &[Case] = &[
        Case { what: "empty", text: |_| String::new(), single: None, clients: None },
        Case { what: "whitespace", text: |_| " \n\t \n\n".into(), single: None, clients: None },
        Case { what: "comment only", text: |_| "# rotated by ops\n".into(), single: None, clients: None },
        Case {
            what: "comment then token",
            text: |f| format!("# admin token\n{}\n", f.line("team", "tok-1")),
            single: Some(&["tok-1"]),
            clients: Some(&["tok-1"]),
        },
        Case {
            what: "token then comment",
            text: |f| format!("{}\n  # rotated by ops\n", f.line("team", "tok-1")),
            single: Some(&["tok-1"]),
            clients: Some(&["tok-1"]),
        },
        Case {
            what: "two tokens",
            text: |f| format!("{}\n{}\n", f.line("team", "tok-1"), f.line("other", "tok-2")),
            single: None,
            clients: Some(&["tok-1", "tok-2"]),
        },
        Case {
            what: "CRLF",
            text: |f| format!("# c\r\n{}\r\n\r\n", f.line("team", "tok-1")),
            single: Some(&["tok-1"]),
            clients: Some(&["tok-1"]),
        },
        Case {
            what: "BOM",
            text: |f| format!("\u{feff}{}\n", f.line("team", "tok-1")),
            single: Some(&["tok-1"]),
            clients: Some(&["tok-1"]),
        },
        Case {
            what: "a comment after the token on its line",
            text: |f| format!("{} # rotated\n", f.line("team", "tok-1")),
            single: None,
            clients: None,
        },
        Case { what: "no NAME: part", text: |_| "tok-1\n".into(), single: Some(&["tok-1"]), clients: None },
    ];

    /// Every credential file gets the same table of contents; for each, a start and a reload
    /// give the same verdict (and the same tokens), and no refusal quotes the file.
    #[test]
    fn every_credential_file_gives_the_same_verdict_at_start_and_on_reload() {
        let dir = tempfile::tempdir().unwrap();
        for file in [File::Secret, File::Peer, File::Admin, File::Clients] {
            for case in TABLE {
                let path = dir.path().join(format!("{file:?}"));
                let expected = match file {
                    File::Clients => case.clients,
                    _ => case.single,
                };
                let what = format!("{file:?} file, {}", case.what);
                let text = (case.text)(file);
                let quoted = |message: &str| ["tok-", "rotated"].iter().any(|part| message.contains(part));

                // The start.
                std::fs::write(&path, &text).unwrap();
                let started = Config::resolve(file.settings(path.clone()));
                match (&started, expected) {
                    (Ok(config), Some(tokens)) => assert_eq!(file.tokens(&config.credentials), tokens, "{what}"),
                    (Err(error), None) => {
                        assert!(error.contains(&path.display().to_string()), "{what}: {error}");
                        assert!(!quoted(error) && !error.contains('\n'), "{what}: {error}");
                    }
                    (started, expected) => {
                        panic!("{what}: start gave {:?}, expected {expected:?}", started.as_ref().err())
                    }
                }

                // The reload, on a node that started with a good file.
                std::fs::write(&path, format!("{}\n", file.line("team", "good-0"))).unwrap();
                let config = Config::resolve(file.settings(path.clone())).unwrap();
                let reloadable = Reloadable {
                    tls: None,
                    credentials: Arc::new(ArcSwap::from_pointee(config.credentials.clone())),
                    source: config.credential_source.clone(),
                };
                std::fs::write(&path, &text).unwrap();
                let taken = reloadable.reload_credentials(&Metrics::new(), "test");
                let in_use = reloadable.credentials.load();
                match expected {
                    Some(tokens) => {
                        assert!(taken, "{what}: refused on reload, taken at start");
                        // The peer secret in use stays what the node started with.
                        let tokens: Vec<&str> = match file {
                            File::Peer => vec!["good-0"],
                            _ => tokens.to_vec(),
                        };
                        assert_eq!(file.tokens(&in_use), tokens, "{what}");
                    }
                    None => {
                        assert!(!taken, "{what}: taken on reload, refused at start");
                        assert_eq!(**in_use, config.credentials, "{what}: the last good credentials stay");
                        let error = reloadable.source.reread(None).unwrap_err().message;
                        assert!(error.contains(&path.display().to_string()) && !quoted(&error), "{what}: {error}");
                    }
                }
            }
        }
    }
}
