//! Cluster pinning (issue 24, item 5): a client may say which cluster it means to reach, and every
//! answer says which cluster answered, so a client never takes IDs from a node of another cluster
//! at a member's address (a seed that founded a new cluster on a wiped directory, say).
//!
//! A request carrying `x-leafraft-cluster-id: <16 hex digits>` (the header members send each
//! other) is served only by a node of that cluster: any other node, one that knows no cluster yet
//! included, answers 409 `CLUSTER_MISMATCH` and serves nothing. Every answer carries this node's
//! cluster ID in the same header once it has one; `leafraft-client` (and so the CLI) learns it on
//! first contact and sends it from then on. `/raft/*` is left to the identity check (`peer`),
//! which reads the same header as the sender's cluster.
//!
//! On the hot path this costs an atomic load and one header insert of a value made once; the
//! request header is parsed only when present. A hand-written layer, like `gate`, so it adds no
//! clone of the state and no boxed future.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::OnceLock;
use std::task::Context;
use std::task::Poll;

use axum::extract::Request;
use axum::http::HeaderValue;
use axum::response::IntoResponse;
use axum::response::Response;
use pin_project_lite::pin_project;
use raft::network::identity::hex_id;
use raft::network::identity::CLUSTER_ID_HEADER;
use raft::network::IdentityCheck;
use tower::Layer;
use tower::Service;

use crate::error::Error;
use crate::error::ErrorCode;

/// This node's side of pinning: its cluster ID (known once committed, then fixed for the life of
/// the process) and the header value made from it once.
pub struct ClusterPin {
    identity: Arc<IdentityCheck>,
    header: OnceLock<HeaderValue>,
}

impl ClusterPin {
    pub fn new(identity: Arc<IdentityCheck>) -> ClusterPin {
        ClusterPin { identity, header: OnceLock::new() }
    }

    /// The header value of this node's cluster ID, once it has one.
    fn header(&self) -> Option<&HeaderValue> {
        if let Some(value) = self.header.get() {
            return Some(value);
        }
        let cluster_id = self.identity.cluster_id();
        if cluster_id == 0 {
            return None;
        }
        HeaderValue::from_str(&hex_id(cluster_id)).ok().map(|value| self.header.get_or_init(|| value))
    }

    /// The answer to a request pinned to another cluster than this node's, if it is one.
    fn refusal(&self, request: &Request) -> Option<Response> {
        let pinned = request.headers().get(CLUSTER_ID_HEADER)?;
        if request.uri().path().starts_with("/raft/") {
            return None;
        }
        let Some(pinned) = pinned.to_str().ok().and_then(|text| u64::from_str_radix(text, 16).ok()) else {
            let message = format!("header {CLUSTER_ID_HEADER} must be the cluster ID in hex");
            return Some(Error::invalid(message).into_response());
        };
        let local = self.identity.cluster_id();
        if pinned == local {
            return None;
        }
        let this = if local == 0 { "no cluster yet".to_string() } else { format!("cluster {}", hex_id(local)) };
        let message = format!("the request is for cluster {}, this node belongs to {this}", hex_id(pinned));
        Some(Error::new(ErrorCode::ClusterMismatch, message).into_response())
    }
}

#[derive(Clone)]
pub struct PinLayer {
    pin: Arc<ClusterPin>,
}

impl PinLayer {
    pub fn new(pin: ClusterPin) -> PinLayer {
        PinLayer { pin: Arc::new(pin) }
    }
}

impl<S> Layer<S> for PinLayer {
    type Service = Pinned<S>;

    fn layer(&self, inner: S) -> Pinned<S> {
        Pinned { inner, pin: self.pin.clone() }
    }
}

#[derive(Clone)]
pub struct Pinned<S> {
    inner: S,
    pin: Arc<ClusterPin>,
}

impl<S> Service<Request> for Pinned<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = PinnedFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let running = match self.pin.refusal(&request) {
            None => Running::Handler { future: self.inner.call(request) },
            Some(refusal) => Running::Refused { response: Some(refusal) },
        };
        PinnedFuture { running, pin: self.pin.clone() }
    }
}

pin_project! {
    #[project = RunningProjection]
    enum Running<F> {
        Handler { #[pin] future: F },
        Refused { response: Option<Response> },
    }
}

pin_project! {
pub struct PinnedFuture<F> {
    #[pin]
    running: Running<F>,
    pin: Arc<ClusterPin>,
}
}

impl<F: Future<Output = Result<Response, Infallible>>> Future for PinnedFuture<F> {
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let mut response = match this.running.project() {
            RunningProjection::Refused { response } => {
                response.take().unwrap_or_else(|| Error::no_leader("polled after it answered").into_response())
            }
            RunningProjection::Handler { future } => match future.poll(cx) {
                Poll::Ready(Ok(response)) => response,
                Poll::Ready(Err(never)) => match never {},
                Poll::Pending => return Poll::Pending,
            },
        };
        if let Some(value) = this.pin.header() {
            response.headers_mut().entry(CLUSTER_ID_HEADER).or_insert_with(|| value.clone());
        }
        Poll::Ready(Ok(response))
    }
}
