//! The Raft network over HTTP with bincode bodies: the transport under openraft's client
//! ([`NetworkFactory`], [`Connection`]; `crate::GuardedNetwork` wraps it), the axum routes that
//! answer it ([`routes`]), and the one transport both the Raft client and the node's write
//! forwarding use ([`post_bincode`]).
//!
//! # Wire format
//! Every request is `POST http://{addr}/raft/{append|vote|snapshot}` with the RPC encoded by
//! [`leafraft_state::codec::encode`] as an `application/octet-stream` body, and `Authorization: Bearer
//! <secret>` when the cluster has a secret. The answer is a 200 whose body is the encoded
//! `Result<Response, RaftError<E>>` exactly as `Raft::{append_entries, vote, install_snapshot}`
//! returned it: the peer's Raft errors travel inside a 200, so any other status means the request
//! never reached the peer's Raft (bad body, wrong secret, body too large).
//!
//! Between members, requests and answers also carry the sender's cluster ID, node ID and disk
//! incarnation in headers, checked on both sides ([`identity`]); a refused request is answered
//! with 409 `CLUSTER_MISMATCH`, and a refused answer is treated as an unreachable peer.
//! They also carry the sender's release ([`versions`]).

mod client;
pub mod identity;
mod server;
mod snapshot_guard;
pub mod versions;

#[cfg(test)]
mod tests;

pub use client::post_bincode;
pub use client::post_bincode_as;
pub use client::Connection;
pub use client::NetworkFactory;
pub use client::PostError;
pub use client::Sender;
pub use identity::IdentityCheck;
pub use identity::PeerIdentity;
pub use server::may_ask_for_vote;
pub use server::routes;
pub use server::vote_from_member;
pub use snapshot_guard::MAX_SNAPSHOT_BYTES;
pub use versions::PeerVersions;

/// The paths of the Raft RPCs, shared by the client and the server so they cannot drift apart.
const APPEND_PATH: &str = "/raft/append";
const VOTE_PATH: &str = "/raft/vote";
const SNAPSHOT_PATH: &str = "/raft/snapshot";
