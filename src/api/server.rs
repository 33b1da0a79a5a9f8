//! Serving the router on the node's port, plain or TLS, with every connection held to
//! [`ConnectionLimits`]: the header-read timeout (from when a connection is admitted or its last
//! answer has been written until the next request's headers are complete; also the TLS
//! handshake's limit) and the idle timeout (no byte either way), both kept by the sweep of
//! `connections` rather than a timer per request ([`Guarded`]),
//! `--max-connections` (a place is taken before a connection is accepted, handshakes included;
//! at the cap the connections idle the longest are closed to make room) and
//! `--max-connections-per-source` (see `connections`). Counted in `leafraft_connections_*`.
//!
//! Why not `axum::serve`: the connections are [`Guarded`] sockets whose requests are marked
//! (`connections::RequestMarker`) from their headers until their answer is written. This is its
//! loop (accept, serve each connection in a task, drain on stop); hyper arms no timer (its own
//! header-read timer was a sleep made, registered and dropped on every request).

use std::convert::Infallible;
use std::pin::pin;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::connect_info::ConnectInfo;
use axum::extract::Request;
use axum::response::Response;
use axum::serve::Listener;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tower::Layer;
use tower::Service;

use crate::api::connections;
use crate::api::connections::Admission;
use crate::api::connections::Guarded;
use crate::api::connections::InRequest;
use crate::api::connections::Marked;
use crate::api::connections::RequestMarker;
use crate::api::refusals::RefusalLog;
use crate::api::tls::PeerInfo;
use crate::api::tls::Tls;
use crate::api::tls::TlsListener;
use crate::config::ConnectionLimits;
use crate::metrics::Metrics;

/// Serves `app` on `listener` (over TLS when `tls`) until `stop` turns true, then stops accepting
/// and lets the connections finish their requests; refused requests are summed up in the log
/// once per interval meanwhile.
pub fn serve(
    listener: TcpListener,
    app: axum::Router,
    tls: Option<Arc<Tls>>,
    limits: ConnectionLimits,
    (metrics, refusals): (Arc<Metrics>, Arc<RefusalLog>),
    stop: watch::Receiver<bool>,
) -> Result<JoinHandle<std::io::Result<()>>, String> {
    // The refusals' summaries are written while the node serves.
    tokio::spawn(refusals.clone().flush_every_interval(stop.clone()));
    deepen_backlog(&listener);
    let open_files = crate::api::connections::raise_open_file_limit();
    let max_connections = crate::api::connections::admitted_connections(limits.max_connections, open_files);
    if max_connections < limits.max_connections {
        tracing::warn!(
            max_connections = limits.max_connections,
            open_files,
            admitted = max_connections,
            "--max-connections is above what the open-file limit leaves for connections; admitting fewer (raise `ulimit -n`)"
        );
    }
    let per_source = connections::places_per_source(max_connections, limits.max_connections_per_source);
    let timeouts = (limits.idle_timeout, limits.header_read_timeout);
    let admission = Admission::new(max_connections, per_source, timeouts, metrics.clone());
    let mut http = hyper::server::conn::http1::Builder::new();
    // The sweep keeps the header-read timeout; hyper's (30 s by default once a timer is set)
    // stays off.
    http.header_read_timeout(None);
    Ok(match tls {
        None => {
            let listener = PlainListener { listener, admission };
            // The same `ConnectInfo` as over TLS (without a certificate): refusals log the
            // sender's address whichever listener it came through.
            let add_remote =
                move |remote| axum::Extension(ConnectInfo(PeerInfo { remote, certificate: None })).layer(app.clone());
            tokio::spawn(run(listener, http, stop, add_remote))
        }
        Some(tls) => {
            let handshake = limits.header_read_timeout;
            // Refused client certificates have a log of their own: the first of an interval is
            // logged at once whatever requests were refused before it.
            let refusals = Arc::new(RefusalLog::default());
            tokio::spawn(refusals.clone().flush_every_interval(stop.clone()));
            let listener = TlsListener::new(listener, tls, admission, handshake, refusals)
                .map_err(|e| format!("cannot serve TLS: {e}"))?;
            let add_peer = move |peer: PeerInfo| axum::Extension(ConnectInfo(peer)).layer(app.clone());
            tokio::spawn(run(listener, http, stop, add_peer))
        }
    })
}

/// The listen backlog asked for; the kernel caps it at `net.core.somaxconn` (4096 by default
/// since Linux 5.4).
const LISTEN_BACKLOG: libc::c_int = 65_535;

/// Raises the listen backlog of `listener` (tokio's `bind` asks for 128). A client that
/// reconnects as fast as it is refused keeps as many connections in the backlog as it has
/// attempts under way; once they fill it, the kernel drops everyone's SYNs and a client's first
/// retry comes a second later. Linux changes the backlog of a listening socket on a second
/// `listen`.
fn deepen_backlog(listener: &TcpListener) {
    use std::os::fd::AsRawFd;
    // SAFETY: `listen` only reads its two integer arguments; the descriptor is the listener's,
    // open for as long as `listener` is borrowed.
    if unsafe { libc::listen(listener.as_raw_fd(), LISTEN_BACKLOG) } != 0 {
        let error = std::io::Error::last_os_error();
        tracing::warn!(%error, "cannot raise the listen backlog; a connection flood may delay other clients");
    }
}

/// Accepts until `stop`, serving each connection in its own task with the service `service`
/// makes for it; then waits for every connection to finish.
async fn run<L, S>(
    mut listener: L,
    http: hyper::server::conn::http1::Builder,
    mut stop: watch::Receiver<bool>,
    service: impl Fn(L::Addr) -> S,
) -> std::io::Result<()>
where
    L: Listener,
    L::Io: Marked,
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
{
    let (open_tx, open_rx) = watch::channel(());
    loop {
        let (io, remote) = tokio::select! {
            accepted = listener.accept() => accepted,
            () = stopping(&mut stop) => break,
        };
        let requests = io.request_marker();
        let connection = http.serve_connection(TokioIo::new(io), ToHyper { service: service(remote), requests });
        let (mut stop, open) = (stop.clone(), open_rx.clone());
        tokio::spawn(async move {
            let mut connection = pin!(connection);
            // A connection's end is no news: its timeouts are counted where they are kept.
            let _ = tokio::select! {
                result = connection.as_mut() => result,
                () = stopping(&mut stop) => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            drop(open);
        });
    }
    drop(listener);
    drop(open_rx);
    open_tx.closed().await;
    Ok(())
}

/// Completes once `stop` turns true (or its sender is gone).
async fn stopping(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

/// A tower service as hyper calls it: `Router` is always ready, so each request calls a clone
/// of it, as `axum::serve` does. The connection counts as answering a request from its headers
/// until its answer's body has been written (`connections::RequestMarker`: it is then neither
/// closed to make room nor held to the header-read timeout).
#[derive(Clone)]
struct ToHyper<S> {
    service: S,
    requests: RequestMarker,
}

impl<S> hyper::service::Service<hyper::Request<Incoming>> for ToHyper<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone,
{
    type Response = Response<AnswerBody>;
    type Error = Infallible;
    type Future = Answering<S::Future>;

    fn call(&self, request: hyper::Request<Incoming>) -> Self::Future {
        let in_request = Some(self.requests.begin());
        Answering { future: self.service.clone().call(request.map(Body::new)), in_request }
    }
}

pin_project_lite::pin_project! {
    /// A request's answer being made, with the mark that its connection is busy.
    struct Answering<F> {
        #[pin]
        future: F,
        in_request: Option<InRequest>,
    }
}

impl<F: std::future::Future<Output = Result<Response, Infallible>>> std::future::Future for Answering<F> {
    type Output = Result<Response<AnswerBody>, Infallible>;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        let this = self.project();
        let answer = std::task::ready!(this.future.poll(cx));
        let in_request = this.in_request.take();
        std::task::Poll::Ready(answer.map(|response| response.map(|body| AnswerBody { body, _in_request: in_request })))
    }
}

pin_project_lite::pin_project! {
    /// An answer's body with the mark that its connection is answering a request, which goes
    /// once hyper has written the body (or given up on it) and drops it.
    struct AnswerBody {
        #[pin]
        body: Body,
        _in_request: Option<InRequest>,
    }
}

impl hyper::body::Body for AnswerBody {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        self.project().body.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// Plain TCP: each connection under `--max-connections` and the idle timeout.
struct PlainListener {
    listener: TcpListener,
    admission: Admission,
}

impl Listener for PlainListener {
    type Io = Guarded<TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        connections::accept(&self.listener, &self.admission).await
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.listener.local_addr()
    }
}
