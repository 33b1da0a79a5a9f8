//! The security settings: credentials by role (`--secret` as the shorthand for peer and admin,
//! each value from its flag or its `-file`) and the TLS files.

use std::path::Path;
use std::path::PathBuf;

use super::Settings;
use crate::credentials::ClientToken;
use crate::credentials::Credentials;
use crate::credentials::Secret;

/// The PEM files of TLS. Read at start and again on SIGHUP or when they change (`crate::tls`).
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
/// a file to read (again on a reload: `CredentialSource::read`). Values are `Secret`s, so this
/// formats without them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CredentialSource {
    secret: Source,
    peer: Source,
    admin: Source,
    clients: Vec<String>,
    client_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
enum Source {
    #[default]
    None,
    Value(Secret),
    File(PathBuf),
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
        })
    }

    /// The files a reload reads again.
    pub fn files(&self) -> Vec<PathBuf> {
        let named = [&self.secret, &self.peer, &self.admin].into_iter().filter_map(|source| match source {
            Source::File(path) => Some(path.clone()),
            _ => None,
        });
        named.chain(self.client_file.clone()).collect()
    }

    /// The credentials as the values and files say now: `--secret` (peer and admin) under the
    /// role flags.
    pub fn read(&self) -> Result<Credentials, String> {
        let one = |source: &Source, flag: &str| -> Result<Option<Secret>, String> {
            let secret = match source {
                Source::None => return Ok(None),
                Source::Value(secret) => secret.clone(),
                Source::File(path) => Secret::new(&read_secret_file(path, flag)?),
            };
            Ok((!secret.expose().is_empty()).then_some(secret))
        };
        let secret = one(&self.secret, "secret")?;
        let peer = one(&self.peer, "peer-secret")?.or_else(|| secret.clone());
        let admin = one(&self.admin, "admin-token")?.or(secret);
        let mut lines = self.clients.clone();
        if let Some(path) = &self.client_file {
            let text = read_secret_file(path, "client-token")?;
            lines.extend(
                text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(str::to_string),
            );
        }
        let mut clients: Vec<ClientToken> = Vec::new();
        for line in &lines {
            let token = ClientToken::parse(line)?;
            if clients.iter().any(|c| c.name == token.name) {
                return Err(format!("--client-token {} is given twice", token.name));
            }
            clients.push(token);
        }
        Ok(Credentials { peer, admin, clients })
    }
}

fn read_secret_file(path: &Path, flag: &str) -> Result<String, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("cannot read --{flag}-file {}: {e}", path.display()))?;
    Ok(text.trim().to_string())
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
