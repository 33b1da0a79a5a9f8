//! The protocol between nodes outside Raft's own RPCs: what one node asks the leader to do
//! ([`Forwarded`]) and what it answers, who a node is ([`Hello`]), and both ends of it. [`Peers`]
//! is how a node reaches a peer (forward an operation, ask who answers at an address, read a
//! clock, read the vote it has saved); [`HttpPeers`] is the production implementation over
//! `POST /raft/forward`, `POST /raft/hello`, `POST /raft/confirm` and `GET /v1/clock`, carrying
//! this node's identity headers. The receiving end of the three `/raft/` paths is the HTTP
//! edge's (`api::forward`). The in-process
//! cluster tests implement [`Peers`] with their fault-injecting router instead.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use leafraft_state::typ;
use leafraft_state::Node;
use leafraft_state::NodeId;
use raft::network::IdentityCheck;
use raft::network::PostError;
use raft::network::Sender;
use serde::Deserialize;
use serde::Serialize;
use tokio::time::Instant;

use crate::error::Error;

/// The path of the forwarding route on every node.
pub const FORWARD_PATH: &str = "/raft/forward";
/// The path where a node says who it is.
pub const HELLO_PATH: &str = "/raft/hello";
/// The path where a node answers the vote it has saved (`confirm`).
pub const CONFIRM_PATH: &str = "/raft/confirm";

/// The largest forwarded body accepted: the largest request a node proposes
/// (`MAX_REQUEST_BYTES`) with room for the `Forwarded` envelope. A larger entry in the log could
/// make `AppendEntries` grow past what peers accept.
pub const MAX_FORWARD_BYTES: usize = leafraft_state::codec::MAX_REQUEST_BYTES + 1024;

/// An operation a node sends to the leader over `/raft/forward`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Forwarded {
    Write(leafraft_state::Request),
    AddLearner {
        node_id: NodeId,
        addr: String,
        /// The joiner's disk incarnation; 0 when an operator adds it (the leader asks the node).
        incarnation: u64,
    },
    PromoteVoter {
        node_id: NodeId,
    },
    RemoveMember {
        node_id: NodeId,
    },
    /// Confirm leadership and answer the index a linearizable read must wait for.
    ReadIndex,
    /// `count` IDs of a monotonic tag, from the leader's sequencer.
    TakeMonotonic {
        tag: String,
        count: u64,
    },
    /// Every take a follower gathered while its previous batch was in flight, answered by the
    /// leader's sequencer as one unit, in this order (sent only from cluster version
    /// `Version::CLAIM_BATCHES`: an older leader cannot decode it).
    TakeMonotonicBatch {
        takes: Vec<MonotonicTake>,
    },
    /// Asked of every member, not only the leader: answer once this replica has applied
    /// `index`, or after `wait_ms` with what it applied (`cluster::fence`). A member of an older
    /// release cannot decode it and is named as not confirmed.
    Applied {
        index: u64,
        wait_ms: u64,
    },
    /// A follower's batch as in `TakeMonotonicBatch`, with the vote the follower had saved once
    /// the batch had formed: the leader counts it as that voter's confirmation of its term for
    /// these takes (`monotonic::confirm`), so a batch from a follower of three voters needs no
    /// further round. Sent only from cluster version `Version::CLAIM_BATCHES`.
    TakeMonotonicVouched {
        takes: Vec<MonotonicTake>,
        vouch: Vouch,
    },
}

/// What a forwarding follower vouches for a batch of takes: the vote it had saved (`saved`,
/// what `POST /raft/confirm` would have answered) read after every take of the batch had reached
/// it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vouch {
    pub voter: NodeId,
    pub saved: Option<typ::Vote>,
}

/// One take of a monotonic tag in a [`Forwarded::TakeMonotonicBatch`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MonotonicTake {
    pub tag: String,
    pub count: u64,
    /// One range of `count` consecutive IDs (`/ranges`), rather than `count` IDs in any ranges.
    pub contiguous: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ForwardedReply {
    Written(leafraft_state::Response),
    Done,
    ReadIndex(Option<u64>),
    /// IDs of a monotonic tag as increasing half-open ranges `(start, end)`.
    Taken(Vec<(u64, u64)>),
    /// The answer to [`Forwarded::TakeMonotonicBatch`]: one result per take, in its order.
    TakenBatch(Vec<Result<Vec<(u64, u64)>, Error>>),
    /// The answer to [`Forwarded::Applied`]: the index the member has applied.
    Applied(u64),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ForwardError {
    /// The receiving node is not the leader: ask again elsewhere.
    NotLeader,
    Failed(Error),
}

/// What a node says about itself on `POST /raft/hello`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub node_id: NodeId,
    pub incarnation: u64,
    /// 0 until the cluster ID is committed.
    pub cluster_id: u64,
    /// Whether this node has a membership (openraft's "initialized" also counts a vote it cast).
    pub initialized: bool,
    /// The latest membership this node knows, with every member's address and incarnation.
    pub members: std::collections::BTreeMap<NodeId, Node>,
}

/// Why a `hello` got no usable answer.
#[derive(Debug)]
pub enum HelloError {
    /// The node at the address refused this node's identity, or answered as someone else.
    Refused(String),
    /// Nothing answered in time (or something else went wrong on the way).
    Unanswered(String),
}

/// What one forward answers: the leader's reply, or why no reply came back ([`PostError`] says
/// whether the operation may have reached the peer).
pub type ForwardResult = Result<Result<ForwardedReply, ForwardError>, PostError>;

/// A boxed future, so [`Peers`] can be used as a trait object.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// How this node reaches its peers outside Raft's own RPCs.
pub trait Peers: Send + Sync + 'static {
    /// Sends `op` to node `to` (reached at `node`), bounded by `timeout`. Nothing is retried:
    /// only the caller knows whether sending `op` again is safe.
    fn forward<'a>(
        &'a self,
        to: NodeId,
        node: &'a Node,
        op: &'a Forwarded,
        timeout: Duration,
    ) -> BoxFuture<'a, ForwardResult>;

    /// Node `to`'s wall clock (Unix ms), or `None` when it does not answer within `timeout`.
    fn clock<'a>(&'a self, to: NodeId, node: &'a Node, timeout: Duration) -> BoxFuture<'a, Option<u64>>;

    /// The vote node `to` has saved, read when the request arrives there (a leader confirming its
    /// term, `confirm`). `leader` is the asking leader's vote, for the receiver's logs and checks.
    fn saved_vote<'a>(
        &'a self,
        to: NodeId,
        node: &'a Node,
        leader: &'a typ::Vote,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Option<typ::Vote>, PostError>>;

    /// Asks the node at `addr` who it is. `expected` is the member that should answer there and
    /// the incarnation this node records for it, checked by the receiver as with any message.
    fn hello<'a>(
        &'a self,
        addr: &'a str,
        expected: Option<(NodeId, u64)>,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Hello, HelloError>>;
}

/// What serves the monotonic takes that reach this node while it leads
/// (`Forwarded::TakeMonotonic` and `Forwarded::TakeMonotonicBatch`, its own clients' or a
/// follower's): the monotonic service's sequencer (`monotonic::LeaderTakes`). `Cluster` hands
/// them over and knows nothing of how they are served.
pub trait TakeServer: Send + Sync + 'static {
    /// Serves a take operation by `deadline`; `ForwardError::NotLeader` when this node turns out
    /// not to lead.
    fn execute(&self, op: Forwarded, deadline: Instant) -> BoxFuture<'_, Result<ForwardedReply, ForwardError>>;
}

/// [`Peers`] over HTTP: bincode to `/raft/forward` and `/raft/hello` with this node's identity
/// headers (checked on both sides), JSON from `/v1/clock`, on the process's one pooled
/// `reqwest::Client`, with the cluster secret when there is one.
pub struct HttpPeers {
    http: reqwest::Client,
    secret: Option<Arc<str>>,
    identity: Arc<IdentityCheck>,
    /// `http` or `https`, the same for every member.
    scheme: &'static str,
}

impl HttpPeers {
    pub fn new(http: reqwest::Client, secret: Option<Arc<str>>, identity: Arc<IdentityCheck>) -> HttpPeers {
        HttpPeers { http, secret, identity, scheme: "http" }
    }

    /// Reach the peers over `https://` (`http` must carry the TLS configuration).
    pub fn with_tls(mut self, tls: bool) -> HttpPeers {
        self.scheme = if tls { "https" } else { "http" };
        self
    }
}

impl Peers for HttpPeers {
    fn forward<'a>(
        &'a self,
        to: NodeId,
        node: &'a Node,
        op: &'a Forwarded,
        timeout: Duration,
    ) -> BoxFuture<'a, ForwardResult> {
        Box::pin(async move {
            let url = format!("{}://{}{FORWARD_PATH}", self.scheme, node.addr);
            let sender = Sender { identity: &self.identity, target: Some((to, node.incarnation)) };
            raft::network::post_bincode_as(&self.http, &url, self.secret.as_deref(), sender, op, timeout).await
        })
    }

    fn saved_vote<'a>(
        &'a self,
        to: NodeId,
        node: &'a Node,
        leader: &'a typ::Vote,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Option<typ::Vote>, PostError>> {
        Box::pin(async move {
            let url = format!("{}://{}{CONFIRM_PATH}", self.scheme, node.addr);
            let sender = Sender { identity: &self.identity, target: Some((to, node.incarnation)) };
            raft::network::post_bincode_as(&self.http, &url, self.secret.as_deref(), sender, leader, timeout).await
        })
    }

    fn hello<'a>(
        &'a self,
        addr: &'a str,
        expected: Option<(NodeId, u64)>,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Hello, HelloError>> {
        Box::pin(async move {
            let url = format!("{}://{addr}{HELLO_PATH}", self.scheme);
            let sender = Sender { identity: &self.identity, target: expected };
            match raft::network::post_bincode_as(&self.http, &url, self.secret.as_deref(), sender, &(), timeout).await {
                Ok(hello) => Ok(hello),
                Err(PostError::Refused(reason)) => Err(HelloError::Refused(reason)),
                Err(e) => Err(HelloError::Unanswered(e.to_string())),
            }
        })
    }

    fn clock<'a>(&'a self, _to: NodeId, node: &'a Node, timeout: Duration) -> BoxFuture<'a, Option<u64>> {
        #[derive(Deserialize)]
        struct Clock {
            now_ms: u64,
        }
        Box::pin(async move {
            let url = format!("{}://{}/v1/clock", self.scheme, node.addr);
            let response = self.http.get(url).timeout(timeout).send().await.ok()?;
            let clock: Clock = response.json().await.ok()?;
            Some(clock.now_ms)
        })
    }
}

/// A member address: `HOST:PORT`, at most `leafraft_state::codec::MAX_ADDR_LEN` bytes (it travels in every
/// membership entry and snapshot).
pub fn check_addr(addr: &str) -> Result<(), Error> {
    let valid = addr.rsplit_once(':').is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
    if !valid {
        return Err(Error::invalid(format!("addr '{}' is not HOST:PORT", addr.escape_debug())));
    }
    if addr.len() > leafraft_state::codec::MAX_ADDR_LEN {
        return Err(Error::invalid(format!("addr is longer than {} bytes", leafraft_state::codec::MAX_ADDR_LEN)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_addresses_are_host_port_of_bounded_length() {
        let longest = format!("{}:65535", "h".repeat(leafraft_state::codec::MAX_ADDR_LEN - 6));
        for ok in ["127.0.0.1:8080", "[::1]:9000", "node-1.example.com:1", longest.as_str()] {
            assert!(check_addr(ok).is_ok(), "{ok}");
        }
        let too_long = format!("h{longest}");
        for bad in ["", ":80", "host", "host:", "host:65536", "host:x", too_long.as_str()] {
            assert!(check_addr(bad).is_err(), "{bad}");
        }
    }
}
