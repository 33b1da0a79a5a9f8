//! The security settings: credentials by role (`--secret` as the shorthand for peer and admin,
//! each value from its flag or its `-file`) and the TLS files.

use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

use super::Settings;
use crate::config::credentials::credential_entries;
use crate::config::credentials::is_sendable_token;
use crate::config::credentials::single_token;
use crate::config::credentials::ClientToken;
use crate::config::credentials::Credentials;
use crate::config::credentials::NotOneToken;
use crate::config::credentials::Secret;
use crate::config::credentials::UNSENDABLE;

/// The PEM files of TLS. Read at start and again on SIGHUP or when they change (`crate::api::tls`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// This node's certificate chain: served on its port and presented to peers as its client
    /// certificate (it names the node as `node-<ID>.leafraft`, see docs/operations.md).
    pub cert: PathBuf,
    pub key: PathBuf,
    /// `--peer-ca`: `/raft/*` needs a client certificate chaining to these CAs and naming the member
    /// the request claims to come from.
    pub peer_ca: Option<PathBuf>,
    /// `--ca`: the CAs this node trusts for its peers' server certificates (with `--peer-ca`'s).
    pub ca: Option<PathBuf>,
}

/// A secret as a setting (a flag, a variable, a TOML string): `Debug` never shows it.
#[derive(Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(transparent)]
pub struct SecretText(pub String);

impl std::fmt::Debug for SecretText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

impl From<&str> for SecretText {
    fn from(text: &str) -> SecretText {
        SecretText(text.to_string())
    }
}

impl From<String> for SecretText {
    fn from(text: String) -> SecretText {
        SecretText(text)
    }
}

/// Where the credentials come from: a value given as a flag, variable or in the TOML file, or
/// a file to read (again on a reload: `CredentialSource::reread`). Values are `Secret`s, so this
/// formats without them.
///
/// A role is configured once a flag, variable or file names a credential for it, and then it
/// stays guarded: a value or file with no token in it (empty, only whitespace or comments) is an
/// error, at start and on a reload alike, unless `--admin-open`/`--client-open` say that an empty
/// file opens that role.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CredentialSource {
    secret: Source,
    peer: Source,
    admin: Source,
    clients: Vec<String>,
    client_file: Option<PathBuf>,
    admin_open: bool,
    client_open: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
enum Source {
    #[default]
    None,
    Value(Secret),
    File(PathBuf),
}

/// Why the credentials could not be read: one line naming each flag or file at fault (never a
/// token), and the roles they are for (`peer`, `admin`, `client`: the label of
/// `leafraft_credentials_reload_failures_total`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialError {
    pub roles: Vec<&'static str>,
    pub message: String,
}

impl CredentialSource {
    pub(super) fn of(layers: &Settings) -> Result<CredentialSource, String> {
        let one = |value: &Option<SecretText>, file: &Option<PathBuf>, flag: &str| match (value, file) {
            (Some(_), Some(_)) => Err(format!("--{flag} and --{flag}-file exclude each other")),
            (Some(value), None) => Ok(Source::Value(Secret::new(value.0.trim()))),
            (None, Some(path)) => Ok(Source::File(path.clone())),
            (None, None) => Ok(Source::None),
        };
        Ok(CredentialSource {
            secret: one(&layers.secret, &layers.secret_file, "secret")?,
            peer: one(&layers.peer_secret, &layers.peer_secret_file, "peer-secret")?,
            admin: one(&layers.admin_token, &layers.admin_token_file, "admin-token")?,
            clients: layers.client_token.iter().flatten().map(|token| token.0.clone()).collect(),
            client_file: layers.client_token_file.clone(),
            admin_open: layers.admin_open.unwrap_or(false),
            client_open: layers.client_open.unwrap_or(false),
        })
    }

    /// Whether `--admin-open` or `--client-open` was given.
    pub fn may_open(&self) -> bool {
        self.admin_open || self.client_open
    }

    /// The files a reload reads again. The peer secret's is among them although the peer secret
    /// in use stays what the node started with: a reload checks it by the same rules as at start,
    /// so that a file the node would refuse to start with is reported when it is written, not at
    /// the next restart.
    pub fn files(&self) -> Vec<PathBuf> {
        let named = [&self.secret, &self.peer, &self.admin].into_iter().filter_map(|source| match source {
            Source::File(path) => Some(path.clone()),
            _ => None,
        });
        named.chain(self.client_file.clone()).collect()
    }

    /// The credentials as the values and files say now: `--secret` (peer and admin) under the
    /// role flags.
    pub fn read(&self) -> Result<Credentials, CredentialError> {
        self.read_all().map(|read| read.credentials)
    }

    /// Every value and file read again, by the same rules as [`CredentialSource::read`] (a file
    /// refused at start is refused here, and only then), with `peer` kept as the peer secret in
    /// use: peers send it too, so it changes only with a restart of every member.
    pub fn reread(&self, peer: Option<Secret>) -> Result<Reread, CredentialError> {
        let read = self.read_all()?;
        let peer_differs = read.credentials.peer != peer;
        Ok(Reread { credentials: Credentials { peer, ..read.credentials }, peer_differs })
    }

    fn read_all(&self) -> Result<Reread, CredentialError> {
        let mut errors = Errors::default();
        let secret = errors.take(self.one(&self.secret, "secret", self.admin_open), "admin").flatten();
        let peer = errors.take(self.one(&self.peer, "peer-secret", false), "peer").flatten();
        let admin = errors.take(self.one(&self.admin, "admin-token", self.admin_open), "admin").flatten();
        let clients = errors.take(self.clients(), "client").unwrap_or_default();
        let credentials = Credentials { peer: peer.or_else(|| secret.clone()), admin: admin.or(secret), clients };
        errors.or(Reread { credentials, peer_differs: false })
    }

    /// One credential: `None` when not given, or given as a file with no token and `open`.
    fn one(&self, source: &Source, flag: &str, open: bool) -> Result<Option<Secret>, String> {
        match source {
            Source::None => Ok(None),
            Source::Value(secret) if secret.expose().is_empty() => Err(format!("--{flag} is empty")),
            Source::Value(secret) if !is_sendable_token(secret.expose()) => Err(format!("--{flag}: {UNSENDABLE}")),
            Source::Value(secret) => Ok(Some(secret.clone())),
            Source::File(path) => match single_token(&read_credential_file(path, flag)?) {
                Ok(token) => Ok(Some(Secret::new(token))),
                Err(NotOneToken::Empty) if open => Ok(None),
                Err(why) => Err(format!("--{flag}-file {} {why}", path.display())),
            },
        }
    }

    /// The client tokens of the flags and the file, each checked by itself; an error points at
    /// the flag or the line, never quoting it.
    fn clients(&self) -> Result<Vec<ClientToken>, String> {
        let mut clients: Vec<ClientToken> = Vec::new();
        let mut add = |token: ClientToken| {
            if clients.iter().any(|c| c.name == token.name) {
                return Err(format!("the client token {} is given twice", token.name));
            }
            clients.push(token);
            Ok(())
        };
        for (index, text) in self.clients.iter().enumerate() {
            add(ClientToken::parse(text).map_err(|e| format!("--client-token (value {}): {e}", index + 1))?)?;
        }
        if let Some(path) = &self.client_file {
            let text = read_credential_file(path, "client-token")?;
            let entries = credential_entries(&text);
            if entries.is_empty() && !self.client_open {
                return Err(format!("--client-token-file {} {}", path.display(), NotOneToken::Empty));
            }
            for (line, entry) in entries {
                let token = ClientToken::parse(entry)
                    .map_err(|e| format!("--client-token-file {} line {line}: {e}", path.display()))?;
                add(token)?;
            }
        }
        Ok(clients)
    }
}

/// The credentials a reload read, and whether the peer secret the files name now differs from
/// the one in use (which a reload never changes).
#[derive(Debug)]
pub struct Reread {
    pub credentials: Credentials,
    pub peer_differs: bool,
}

/// The errors of one read, gathered so that each role at fault is named and counted.
#[derive(Default)]
struct Errors(Vec<(&'static str, String)>);

impl Errors {
    fn take<T>(&mut self, result: Result<T, String>, role: &'static str) -> Option<T> {
        result.map_err(|message| self.0.push((role, message))).ok()
    }

    fn or<T>(self, value: T) -> Result<T, CredentialError> {
        if self.0.is_empty() {
            return Ok(value);
        }
        let mut roles: Vec<&'static str> = self.0.iter().map(|(role, _)| *role).collect();
        roles.dedup();
        let message = self.0.into_iter().map(|(_, message)| message).collect::<Vec<_>>().join("; ");
        Err(CredentialError { roles, message })
    }
}

/// The text of a credential file; the error names the file, never its content.
fn read_credential_file(path: &Path, flag: &str) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read --{flag}-file {}: {e}", path.display()))
}

/// The timeouts and the cap every connection to the node's port is held to (`crate::api::server`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// From when the node starts waiting for a request's headers (on a new connection, or on a
    /// kept-alive one after an answer) until they are complete; also the TLS handshake's limit.
    pub header_read_timeout: Duration,
    /// No byte moved either way for this long closes the connection.
    pub idle_timeout: Duration,
    /// Connections held at once, handshakes included.
    pub max_connections: usize,
    /// Connections one source address holds at once; `None`: a quarter of the connections the
    /// node admits (`connections::places_per_source`), decided once the open-file limit is known.
    pub max_connections_per_source: Option<usize>,
}

impl Default for ConnectionLimits {
    fn default() -> ConnectionLimits {
        ConnectionLimits {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            max_connections: 10_000,
            max_connections_per_source: None,
        }
    }
}

pub(super) fn resolve_connections(layers: &Settings) -> Result<ConnectionLimits, String> {
    let default = ConnectionLimits::default();
    let limits = ConnectionLimits {
        header_read_timeout: layers.header_read_timeout_ms.map_or(default.header_read_timeout, Duration::from_millis),
        idle_timeout: layers.idle_timeout_ms.map_or(default.idle_timeout, Duration::from_millis),
        max_connections: layers.max_connections.unwrap_or(default.max_connections),
        max_connections_per_source: layers.max_connections_per_source,
    };
    if limits.header_read_timeout.is_zero()
        || limits.idle_timeout.is_zero()
        || limits.max_connections == 0
        || limits.max_connections_per_source == Some(0)
    {
        return Err(
            "--header-read-timeout-ms, --idle-timeout-ms, --max-connections and --max-connections-per-source must be \
             above 0"
                .into(),
        );
    }
    Ok(limits)
}

pub(super) fn resolve_tls(layers: &Settings) -> Result<Option<TlsFiles>, String> {
    match (&layers.tls_cert, &layers.tls_key) {
        (Some(cert), Some(key)) => Ok(Some(TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
            peer_ca: layers.peer_ca.clone(),
            ca: layers.ca.clone(),
        })),
        (None, None) if layers.peer_ca.is_some() => Err("--peer-ca needs --tls-cert and --tls-key".into()),
        (None, None) => Ok(None),
        _ => Err("--tls-cert and --tls-key go together".into()),
    }
}
