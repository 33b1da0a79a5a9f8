//! The one middleware every routed request passes: it checks the caller's credential
//! ([`super::auth`]) and the cluster a request is pinned to ([`super::pin`]), stamps this node's
//! cluster ID on what the handler (or the pin) answers, counts the request by route and status once it is answered, and answers a
//! request still running when the node starts failing (`NO_LEADER`, see [`crate::node::failstop`]).
//!
//! Why one hand-written layer instead of three `from_fn` middlewares: each `from_fn` layer cloned
//! the whole state, boxed the inner service and two futures per request, and with three of them
//! the reference counts and allocations made up about a fifth of a node's CPU time in the
//! single-ID benchmark. Here a request costs one `Arc` clone and no allocation unless its handler
//! has to wait (or an ID route's tag goes to the handler, see `auth`).
//!
//! What a route needs is worked out once per route, not per request: the router gives
//! each route its own `Gate` (`route_layer`), which keeps the route's template, its slot in the
//! request counts and its [`auth::Rule`]s the first time it is called, and afterwards only checks
//! that the request's route template is still that one (a different one, which axum never sends,
//! would be worked out again, not mistaken for the first).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::OnceLock;
use std::task::Context;
use std::task::Poll;

use axum::extract::MatchedPath;
use axum::extract::Request;
use axum::response::IntoResponse;
use axum::response::Response;
use pin_project_lite::pin_project;
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
        Gate { inner, route: Arc::new(RouteGate { keeper: self.keeper.clone(), known: OnceLock::new() }) }
    }
}

#[derive(Clone)]
pub struct Gate<S> {
    inner: S,
    route: Arc<RouteGate>,
}

/// The gate of one route: the node's [`Gatekeeper`] and what the route needs, once known.
pub struct RouteGate {
    keeper: Arc<Gatekeeper>,
    known: OnceLock<Route>,
}

/// What the gate needs to know of a route template, worked out on its first request.
#[derive(Clone, Copy)]
struct Route {
    template: &'static str,
    key: RouteKey,
    /// For methods that only read (`auth::reads`), and for the others.
    reads: Option<auth::Rule>,
    writes: Option<auth::Rule>,
}

impl RouteGate {
    fn route(&self, template: &str) -> Route {
        if let Some(known) = self.known.get().filter(|known| known.template == template) {
            return *known;
        }
        let route = Route {
            template: crate::metrics::intern(template),
            key: self.keeper.auth.metrics.route_key(template),
            reads: auth::rule(true, template),
            writes: auth::rule(false, template),
        };
        let _ = self.known.set(route);
        route
    }
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
        let gate = self.route.clone();
        let keeper = &gate.keeper;
        let route = request.extensions().get::<MatchedPath>().map(|path| gate.route(path.as_str()));
        let rule = route.and_then(|route| if auth::reads(request.method()) { route.reads } else { route.writes });
        // A request refused for its credential learns nothing of this node, its cluster included.
        let refused = match (route, rule) {
            (Some(route), Some(rule)) => keeper.auth.refusal(&mut request, route.template, rule),
            _ => None,
        };
        let running = match refused {
            Some(refusal) => Running::Refused { response: Some(refusal), stamp: false },
            None => match keeper.pin.refusal(&request) {
                Some(refusal) => Running::Refused { response: Some(refusal), stamp: true },
                None => Running::Handler { future: self.inner.call(request) },
            },
        };
        let key = route.map(|route| route.key);
        GateFuture { running, failed: None, route: key, gate, started: std::time::Instant::now() }
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
    gate: Arc<RouteGate>,
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
                    let failing = &this.gate.keeper.failing;
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
        let keeper = &this.gate.keeper;
        if let Some(value) = stamp.then(|| keeper.pin.header()).flatten() {
            response.headers_mut().entry(&super::pin::CLUSTER_ID).or_insert_with(|| value.clone());
        }
        if let Some(route) = *this.route {
            keeper.auth.metrics.count_request(route, response.status().as_u16(), this.started.elapsed());
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
