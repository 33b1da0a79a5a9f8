//! TLS with rustls (ring; never OpenSSL): the node's port, its client side towards peers, and the
//! reload of both without a restart.
//!
//! [`Tls`] holds what the PEM files gave, each behind an `ArcSwap`: the server configuration
//! (certificate chain, key, and with `--peer-ca` a client-certificate verifier that lets clients
//! without a certificate through, since `/raft/*` is checked per request in `api::auth`), the
//! client certificate presented to peers (the same chain and key), and the verifier of the peers'
//! server certificates (`--ca` and `--peer-ca`). [`Tls::reload`] reads every file again and swaps
//! all of them only when all load; a failed reload keeps the previous ones, logs and counts.
//! `crate::node::reload` calls it on SIGHUP and when a file's size or modification time changes
//! (checked every second). New connections use the new files; open ones keep theirs.
//!
//! A member's certificate names it as the DNS name [`node_name`] (`node-<ID>.leafraft`), next to
//! the host of its address (which peers and clients verify as for any server).

mod listener;
mod validity;

use arc_swap::ArcSwap;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::client::danger::ServerCertVerified;
use rustls::client::danger::ServerCertVerifier;
use rustls::client::ResolvesClientCert;
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::PrivateKeyDer;
use rustls::pki_types::ServerName;
use rustls::pki_types::UnixTime;
use rustls::server::WebPkiClientVerifier;
use rustls::sign::CertifiedKey;
use rustls::DigitallySignedStruct;
use rustls::RootCertStore;
use rustls::ServerConfig;
use rustls::SignatureScheme;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;

use crate::config::TlsFiles;
use leafraft_state::NodeId;

pub use listener::PeerInfo;
pub use listener::TlsListener;

/// The DNS name a member's certificate carries to prove it is node `id`.
pub fn node_name(id: NodeId) -> String {
    format!("node-{id}.leafraft")
}

/// Whether `certificate` (already verified against `--peer-ca` by the handshake) names node `id`.
pub fn names_node(certificate: &CertificateDer<'_>, id: NodeId) -> bool {
    let Ok(certificate) = webpki::EndEntityCert::try_from(certificate) else {
        return false;
    };
    let Ok(name) = ServerName::try_from(node_name(id)) else {
        return false;
    };
    certificate.verify_is_valid_for_subject_name(&name).is_ok()
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// What one reading of the files gave.
struct Loaded {
    server: Arc<ServerConfig>,
    key: Arc<CertifiedKey>,
    verifier: Arc<WebPkiServerVerifier>,
    not_after: Arc<Vec<(&'static str, i64)>>,
}

/// The node's TLS state; see the module documentation.
pub struct Tls {
    files: TlsFiles,
    server: ArcSwap<ServerConfig>,
    key: ArcSwap<CertifiedKey>,
    verifier: ArcSwap<WebPkiServerVerifier>,
    /// When the certificates in use stop being valid, by file ([`Tls::not_after`]).
    not_after: ArcSwap<Vec<(&'static str, i64)>>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("files", &self.files).finish()
    }
}

impl Tls {
    /// Reads the files; an error names the file and what is wrong with it.
    pub fn load(files: TlsFiles) -> Result<Arc<Tls>, String> {
        let loaded = load(&files)?;
        Ok(Arc::new(Tls {
            files,
            server: ArcSwap::new(loaded.server),
            key: ArcSwap::new(loaded.key),
            verifier: ArcSwap::new(loaded.verifier),
            not_after: ArcSwap::new(loaded.not_after),
        }))
    }

    /// Reads every file again and uses them from the next connection on; on an error nothing
    /// changes.
    pub fn reload(&self) -> Result<(), String> {
        let loaded = load(&self.files)?;
        self.server.store(loaded.server);
        self.key.store(loaded.key);
        self.verifier.store(loaded.verifier);
        self.not_after.store(loaded.not_after);
        Ok(())
    }

    /// When the certificates in use stop being valid, in Unix seconds, by file: `tls_cert` (the
    /// node's own, which it presents to clients and peers alike), `peer_ca` and `ca` (the earliest
    /// of the file's certificates). A certificate that cannot be read for a date is left out.
    pub fn not_after(&self) -> Arc<Vec<(&'static str, i64)>> {
        self.not_after.load_full()
    }

    /// The server configuration for the next connection.
    pub fn server_config(&self) -> Arc<ServerConfig> {
        self.server.load_full()
    }

    /// Whether `/raft/*` needs a client certificate (`--peer-ca`).
    pub fn mutual(&self) -> bool {
        self.files.peer_ca.is_some()
    }

    /// The rustls client configuration of the node's requests to peers (and join seeds): verifies
    /// their server certificates against `--ca`/`--peer-ca` and presents this node's certificate,
    /// both as they are at each handshake.
    pub fn client_config(self: &Arc<Tls>) -> Result<rustls::ClientConfig, String> {
        let mut config = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(CurrentVerifier(self.clone())))
            .with_client_cert_resolver(Arc::new(CurrentKey(self.clone())));
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }

    /// The files to watch for changes.
    pub fn paths(&self) -> Vec<PathBuf> {
        let f = &self.files;
        [Some(&f.cert), Some(&f.key), f.peer_ca.as_ref(), f.ca.as_ref()].into_iter().flatten().cloned().collect()
    }
}

fn read_certificates(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certificates: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("cannot read {what} {}: {e}", path.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{what} {} is not PEM: {e}", path.display()))?;
    if certificates.is_empty() {
        return Err(format!("{what} {} holds no certificate", path.display()));
    }
    Ok(certificates)
}

fn roots(paths: &[&PathBuf], what: &str) -> Result<Arc<RootCertStore>, String> {
    let mut roots = RootCertStore::empty();
    for path in paths {
        for certificate in read_certificates(path, what)? {
            roots.add(certificate).map_err(|e| format!("{what} {}: {e}", path.display()))?;
        }
    }
    Ok(Arc::new(roots))
}

fn load(files: &TlsFiles) -> Result<Loaded, String> {
    let chain = read_certificates(&files.cert, "--tls-cert")?;
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .map_err(|e| format!("cannot read a private key from --tls-key {}: {e}", files.key.display()))?;
    let provider = provider();
    let signing_key = provider
        .key_provider
        .load_private_key(key.clone_key())
        .map_err(|e| format!("--tls-key {}: {e}", files.key.display()))?;
    let certified = Arc::new(CertifiedKey::new(chain.clone(), signing_key));
    certified.keys_match().map_err(|e| format!("--tls-key does not belong to --tls-cert: {e}"))?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    let builder = match &files.peer_ca {
        Some(path) => {
            let verifier = WebPkiClientVerifier::builder_with_provider(roots(&[path], "--peer-ca")?, provider.clone())
                .allow_unauthenticated()
                .build()
                .map_err(|e| format!("--peer-ca {}: {e}", path.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut server = builder.with_single_cert(chain, key).map_err(|e| format!("--tls-cert/--tls-key: {e}"))?;
    // HTTP/1.1 only: axum serves it (its http2 feature is off), and ALPN must not promise h2.
    server.alpn_protocols = vec![b"http/1.1".to_vec()];
    let trusted: Vec<&PathBuf> = [files.ca.as_ref(), files.peer_ca.as_ref()].into_iter().flatten().collect();
    if trusted.is_empty() {
        return Err("TLS needs --ca or --peer-ca: the CA of the members' certificates, to verify peers".into());
    }
    let verifier = WebPkiServerVerifier::builder_with_provider(roots(&trusted, "--ca")?, provider)
        .build()
        .map_err(|e| format!("--ca: {e}"))?;
    let mut not_after = Vec::new();
    if let Some(date) = certified.end_entity_cert().ok().and_then(|cert| validity::not_after(cert)) {
        not_after.push(("tls_cert", date));
    }
    for (file, path) in [("peer_ca", &files.peer_ca), ("ca", &files.ca)] {
        let Some(path) = path else { continue };
        let dates = read_certificates(path, file)?.iter().filter_map(|cert| validity::not_after(cert)).min();
        not_after.extend(dates.map(|date| (file, date)));
    }
    Ok(Loaded { server: Arc::new(server), key: certified, verifier, not_after: Arc::new(not_after) })
}

/// Verifies a peer's server certificate with the verifier of the latest load.
#[derive(Debug)]
struct CurrentVerifier(Arc<Tls>);

impl ServerCertVerifier for CurrentVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.0.verifier.load().verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verifier.load().verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verifier.load().verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.verifier.load().supported_verify_schemes()
    }
}

/// Presents the node's certificate of the latest load to a peer that asks for one.
#[derive(Debug)]
struct CurrentKey(Arc<Tls>);

impl ResolvesClientCert for CurrentKey {
    fn resolve(&self, _hints: &[&[u8]], schemes: &[SignatureScheme]) -> Option<Arc<CertifiedKey>> {
        let key = self.0.key.load_full();
        key.key.choose_scheme(schemes).is_some().then_some(key)
    }

    fn has_certs(&self) -> bool {
        true
    }
}
