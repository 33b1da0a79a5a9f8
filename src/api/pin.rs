//! Cluster pinning: a client may say which cluster it means to reach, and every
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
//! The gate ([`super::gate`]) runs it after the credential check, so a pinned request is refused
//! and counted like any answer. On the hot path this costs an atomic load and one header insert of
//! a value made once; the request header is parsed only when present.

use std::sync::Arc;
use std::sync::OnceLock;

use axum::extract::Request;
use axum::http::HeaderName;
use axum::http::HeaderValue;
use axum::response::IntoResponse;
use axum::response::Response;
use raft::network::identity::hex_id;
use raft::network::identity::CLUSTER_ID_HEADER;
use raft::network::IdentityCheck;

use crate::error::Error;
use crate::error::ErrorCode;

/// [`CLUSTER_ID_HEADER`] as a header name made once (a `&str` is parsed into one on every use).
pub(super) static CLUSTER_ID: HeaderName = HeaderName::from_static(CLUSTER_ID_HEADER);

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
    pub(super) fn header(&self) -> Option<&HeaderValue> {
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
    pub(super) fn refusal(&self, request: &Request) -> Option<Response> {
        let pinned = request.headers().get(&CLUSTER_ID)?;
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
