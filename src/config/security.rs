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

/// `--secret` (peer and admin) under the role flags; each value from its flag, else its file.
pub(super) fn resolve_credentials(layers: &Settings) -> Result<Credentials, String> {
    let one = |value: &Option<String>, file: &Option<PathBuf>, flag: &str| -> Result<Option<Secret>, String> {
        let text = match (value, file) {
            (Some(_), Some(_)) => return Err(format!("--{flag} and --{flag}-file exclude each other")),
            (Some(value), None) => value.trim().to_string(),
            (None, Some(path)) => read_secret_file(path, flag)?,
            (None, None) => return Ok(None),
        };
        Ok((!text.is_empty()).then(|| Secret::new(&text)))
    };
    let secret = one(&layers.secret, &layers.secret_file, "secret")?;
    let peer = one(&layers.peer_secret, &layers.peer_secret_file, "peer-secret")?.or_else(|| secret.clone());
    let admin = one(&layers.admin_token, &layers.admin_token_file, "admin-token")?.or(secret);
    let mut lines: Vec<String> = layers.client_token.clone().unwrap_or_default();
    if let Some(path) = &layers.client_token_file {
        let text = read_secret_file(path, "client-token")?;
        lines.extend(text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(str::to_string));
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
