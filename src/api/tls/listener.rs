//! [`TlsListener`]: an `axum::serve::Listener` that hands axum finished TLS connections, each with
//! the peer's certificate ([`PeerInfo`], the connection's `ConnectInfo`).
//!
//! Each connection takes its place under `--max-connections` before it is accepted (within its
//! source's share) and runs under the idle timeout from its first byte; a stalled handshake
//! counts as idle when room is made at the cap ([`crate::api::connections`]). Handshakes run in their own
//! tasks, so a slow or silent client holds up no other (each has the header-read timeout); the
//! accepting task ends when the server drops the listener at shutdown. A client certificate the
//! CA did not sign is logged at a bounded rate ([`RefusalLog`]).

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
use crate::api::connections;
use crate::api::connections::Admission;
use crate::api::connections::Guarded;
use crate::api::connections::Marked;
use crate::api::connections::RequestMarker;
use crate::api::refusals::RefusalLog;
use crate::metrics::Metrics;

/// A TLS connection to the node's port.
pub type TlsConnection = TlsStream<Guarded<TcpStream>>;

impl Marked for TlsConnection {
    fn request_marker(&self) -> RequestMarker {
        self.get_ref().0.request_marker()
    }
}

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
    connections: mpsc::Receiver<(TlsConnection, PeerInfo)>,
    local: SocketAddr,
}

impl TlsListener {
    /// Starts accepting on `listener`; each connection uses the configuration current when it
    /// arrives and has `handshake_timeout` to finish its handshake.
    pub fn new(
        listener: TcpListener,
        tls: Arc<Tls>,
        admission: Admission,
        handshake_timeout: Duration,
        refusals: Arc<RefusalLog>,
    ) -> std::io::Result<TlsListener> {
        let local = listener.local_addr()?;
        let (tx, connections) = mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let (tcp, remote) = tokio::select! {
                    accepted = connections::accept(&listener, &admission) => accepted,
                    () = tx.closed() => return,
                };
                let acceptor = TlsAcceptor::from(tls.server_config());
                let (tx, refusals) = (tx.clone(), refusals.clone());
                tokio::spawn(async move {
                    let metrics = tcp.metrics().clone();
                    let stream = match tokio::time::timeout(handshake_timeout, acceptor.accept(tcp)).await {
                        Ok(Ok(stream)) => stream,
                        Ok(Err(error)) => return handshake_failed(&metrics, &refusals, remote, &error),
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
/// would-be peer) is also logged, at a bounded rate.
fn handshake_failed(metrics: &Metrics, refusals: &RefusalLog, remote: SocketAddr, error: &std::io::Error) {
    let rustls_error = error.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>());
    if let Some(rustls::Error::InvalidCertificate(reason)) = rustls_error {
        metrics.count_handshake_failure("certificate");
        if refusals.note("tls handshake", "certificate") {
            tracing::warn!(%remote, reason = ?reason, "refused a TLS client certificate (further refusals are summed up once per interval)");
        }
    } else {
        metrics.count_handshake_failure("other");
        tracing::debug!(%remote, %error, "TLS handshake failed");
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsConnection;
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
