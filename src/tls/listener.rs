//! [`TlsListener`]: an `axum::serve::Listener` that hands axum finished TLS connections, each with
//! the peer's certificate ([`PeerInfo`], the connection's `ConnectInfo`).
//!
//! Handshakes run in their own tasks, so a slow or silent client holds up no other (each has
//! [`HANDSHAKE_TIMEOUT`]); the accepting task ends when axum drops the listener at shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;
use rustls::pki_types::CertificateDer;
use tokio::net::TcpListener;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use super::Tls;
use crate::metrics::Metrics;

/// How long a client may take to complete the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long accepting pauses after an error (say, out of file descriptors), so it never spins.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Who is at the other end of a TLS connection: its address, and the first certificate of the
/// chain it presented (verified against `--peer-ca`), if any.
#[derive(Debug, Clone)]
pub struct PeerInfo {
    pub remote: SocketAddr,
    pub certificate: Option<Arc<CertificateDer<'static>>>,
}

impl Connected<IncomingStream<'_, TlsListener>> for PeerInfo {
    fn connect_info(stream: IncomingStream<'_, TlsListener>) -> PeerInfo {
        stream.remote_addr().clone()
    }
}

/// Completed TLS connections, accepted and shaken hands with in the background.
pub struct TlsListener {
    connections: mpsc::Receiver<(TlsStream<TcpStream>, PeerInfo)>,
    local: SocketAddr,
}

impl TlsListener {
    /// Starts accepting on `listener`; each connection uses the configuration current when it
    /// arrives.
    pub fn new(listener: TcpListener, tls: Arc<Tls>, metrics: Arc<Metrics>) -> std::io::Result<TlsListener> {
        let local = listener.local_addr()?;
        let (tx, connections) = mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    accepted = listener.accept() => accepted,
                    () = tx.closed() => return,
                };
                let (tcp, remote) = match accepted {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        tracing::warn!(%error, "cannot accept a connection");
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                        continue;
                    }
                };
                let _ = tcp.set_nodelay(true);
                let acceptor = TlsAcceptor::from(tls.server_config());
                let (tx, metrics) = (tx.clone(), metrics.clone());
                tokio::spawn(async move {
                    let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(stream)) => stream,
                        Ok(Err(error)) => return handshake_failed(&metrics, remote, &error),
                        Err(_) => {
                            metrics.count_handshake_failure("timeout");
                            tracing::debug!(%remote, "TLS handshake timed out");
                            return;
                        }
                    };
                    let certificate = stream
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|chain| chain.first())
                        .map(|c| Arc::new(c.clone().into_owned()));
                    let _ = tx.send((stream, PeerInfo { remote, certificate })).await;
                });
            }
        });
        Ok(TlsListener { connections, local })
    }
}

/// Counts a failed handshake; one whose client presented a certificate the CA did not sign (a
/// would-be peer) is also logged as a warning.
fn handshake_failed(metrics: &Metrics, remote: SocketAddr, error: &std::io::Error) {
    let rustls_error = error.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>());
    if let Some(rustls::Error::InvalidCertificate(reason)) = rustls_error {
        metrics.count_handshake_failure("certificate");
        tracing::warn!(%remote, reason = ?reason, "refused a TLS client certificate");
    } else {
        metrics.count_handshake_failure("other");
        tracing::debug!(%remote, %error, "TLS handshake failed");
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = PeerInfo;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.connections.recv().await {
            Some(connection) => connection,
            // The accepting task ended (it never does while this listener lives).
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(PeerInfo { remote: self.local, certificate: None })
    }
}
