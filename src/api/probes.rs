//! The probe port (`--probe-listen`): `/healthz` and `/readyz` on a listener of their own, plain
//! HTTP, outside the node port's `--max-connections`.
//!
//! A liveness probe that waits behind the clients' connection cap can get a busy member killed:
//! the kubelet sees a timeout where the process is fine. Here the probes have their own small cap
//! ([`PROBE_CONNECTIONS`]) that no client takes, and a connection that finds it full is closed at
//! once (a probe fails fast, it never queues). Each connection carries one request and is closed
//! after [`PROBE_TIMEOUT`] whatever it does. Plain HTTP so that a health check works the same
//! with TLS on (the Docker health check, the kubelet); the two routes say nothing the node port
//! does not already answer without a credential. Any other path is 404.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::connect_info::ConnectInfo;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use hyper_util::rt::TokioTimer;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tower::Layer;
use tower::ServiceExt;

use crate::api::tls::PeerInfo;

/// Probe connections served at once; a kubelet or Docker probes one at a time.
pub const PROBE_CONNECTIONS: usize = 8;
/// How long one probe connection may take, from accept to close.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// The paths the probe port answers.
const PROBE_PATHS: [&str; 2] = ["/healthz", "/readyz"];

/// Serves `app`'s `/healthz` and `/readyz` on `listener` until `stop` turns true.
pub fn serve(listener: TcpListener, app: axum::Router, mut stop: watch::Receiver<bool>) -> JoinHandle<()> {
    let places = Arc::new(Semaphore::new(PROBE_CONNECTIONS));
    tokio::spawn(async move {
        loop {
            let (stream, remote) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        tracing::debug!(%error, "probe port: accept failed");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                },
                changed = stop.changed() => {
                    if changed.is_err() || *stop.borrow() {
                        return;
                    }
                    continue;
                }
            };
            // Full: closed at once, so the prober sees a refusal now rather than a timeout later.
            let Ok(place) = places.clone().try_acquire_owned() else { continue };
            let app = axum::Extension(ConnectInfo(PeerInfo { remote, certificate: None })).layer(app.clone());
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                    let app = app.clone();
                    async move {
                        if !PROBE_PATHS.contains(&request.uri().path()) {
                            return Ok((StatusCode::NOT_FOUND, "the probe port answers /healthz and /readyz\n")
                                .into_response());
                        }
                        app.oneshot(request.map(Body::new)).await
                    }
                });
                let mut http = hyper::server::conn::http1::Builder::new();
                http.timer(TokioTimer::new()).header_read_timeout(PROBE_TIMEOUT).keep_alive(false);
                let connection = http.serve_connection(TokioIo::new(stream), service);
                let _ = tokio::time::timeout(PROBE_TIMEOUT, connection).await;
                drop(place);
            });
        }
    })
}
