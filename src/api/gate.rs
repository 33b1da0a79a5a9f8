//! The one middleware every routed request passes: it checks the caller's credential
//! ([`super::auth`]) and the cluster a request is pinned to ([`super::pin`]), stamps this node's
//! cluster ID on what the handler (or the pin) answers, counts the request by route and status once it is answered, and answers a
//! request still running when the node starts failing (`NO_LEADER`, see [`crate::failstop`]).
//!
//! Why one hand-written layer instead of three `from_fn` middlewares: each `from_fn` layer cloned
//! the whole state, boxed the inner service and two futures per request, and with three of them
//! the reference counts and allocations made up about a fifth of a node's CPU time in the
//! single-ID benchmark. Here a request costs one `Arc` clone and no allocation unless its handler
//! has to wait.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Context;
use std::task::Poll;

use axum::extract::MatchedPath;
use axum::extract::Request;
use axum::response::IntoResponse;
use axum::response::Response;
use pin_project_lite::pin_project;
use raft::network::identity::CLUSTER_ID_HEADER;
use tokio::sync::watch;
use tower::Layer;
use tower::Service;

use crate::api::auth;
use crate::error::Error;
use crate::metrics::RouteKey;

/// What the gate needs from the node.
pub struct Gatekeeper {
    /// Also holds the metrics the gate counts requests in.
    pub auth: auth::Checker,
    /// Turns true when the node's storage fails.
    pub failing: watch::Receiver<bool>,
    /// This node's cluster, which requests may be pinned to.
    pub pin: super::pin::ClusterPin,
}

#[derive(Clone)]
pub struct GateLayer {
    keeper: Arc<Gatekeeper>,
}

impl GateLayer {
    pub fn new(keeper: Gatekeeper) -> GateLayer {
        GateLayer { keeper: Arc::new(keeper) }
    }
}

impl<S> Layer<S> for GateLayer {
    type Service = Gate<S>;

    fn layer(&self, inner: S) -> Gate<S> {
        Gate { inner, keeper: self.keeper.clone() }
    }
}

#[derive(Clone)]
pub struct Gate<S> {
    inner: S,
    keeper: Arc<Gatekeeper>,
}

impl<S> Service<Request> for Gate<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = GateFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request) -> Self::Future {
        let keeper = self.keeper.clone();
        let route = request.extensions().get::<MatchedPath>().map(|path| keeper.auth.metrics.route_key(path.as_str()));
        // A request refused for its credential learns nothing of this node, its cluster included.
        let running = match keeper.auth.refusal(&mut request) {
            Some(refusal) => Running::Refused { response: Some(refusal), stamp: false },
            None => match keeper.pin.refusal(&request) {
                Some(refusal) => Running::Refused { response: Some(refusal), stamp: true },
                None => Running::Handler { future: self.inner.call(request) },
            },
        };
        GateFuture { running, failed: None, route, keeper, started: std::time::Instant::now() }
    }
}

pin_project! {
    #[project = RunningProjection]
    enum Running<F> {
        Handler { #[pin] future: F },
        Refused { response: Option<Response>, stamp: bool },
    }
}

pin_project! {
pub struct GateFuture<F> {
    #[pin]
    running: Running<F>,
    // Completes when the node starts failing; made only once the handler has had to wait, so an
    // answer ready at its first poll never registers with the watch channel (whose waiter list is
    // a lock every core shares).
    failed: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    route: Option<RouteKey>,
    keeper: Arc<Gatekeeper>,
    // For the request's latency in `leafraft_http_request_duration_seconds`.
    started: std::time::Instant,
}
}

impl<F: Future<Output = Result<Response, Infallible>>> Future for GateFuture<F> {
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let (mut response, stamp) = match this.running.project() {
            RunningProjection::Refused { response, stamp } => (
                response.take().unwrap_or_else(|| Error::no_leader("polled after it answered").into_response()),
                *stamp,
            ),
            RunningProjection::Handler { future } => match future.poll(cx) {
                Poll::Ready(Ok(response)) => (response, true),
                Poll::Ready(Err(never)) => match never {},
                Poll::Pending => {
                    let failing = &this.keeper.failing;
                    let failed = this.failed.get_or_insert_with(|| Box::pin(failed(failing.clone())));
                    if failed.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    let failed = Error::no_leader(
                        "this node stopped because its storage failed; the request may or may not have been applied",
                    );
                    (failed.into_response(), false)
                }
            },
        };
        if let Some(value) = stamp.then(|| this.keeper.pin.header()).flatten() {
            response.headers_mut().entry(CLUSTER_ID_HEADER).or_insert_with(|| value.clone());
        }
        if let Some(route) = *this.route {
            this.keeper.auth.metrics.count_request(route, response.status().as_u16(), this.started.elapsed());
        }
        Poll::Ready(Ok(response))
    }
}

async fn failed(mut failing: watch::Receiver<bool>) {
    // A dropped sender means the node was dropped, not that it fails: never fire then.
    if failing.wait_for(|failing| *failing).await.is_err() {
        std::future::pending::<()>().await;
    }
}
