//! The Raft transport of leafraft: the HTTP + bincode network between nodes, the durability and
//! amnesia wrappers around it. The pure replicated state (commands, records, `apply`, codec) is
//! the `leafraft-state` crate; users import it from there.
//!
//! # Layout
//! - [`durability`]: `DurableCommitNetwork`, no commit sent before the leader's own log is on
//!   disk (what the local log has made durable is `leafraft_durability::LocalDurability`).
//! - [`amnesia`]: `AmnesiaGuard`, a member whose log went back in time stops instead of voting.
//! - [`guarded`]: `GuardedNetwork`, openraft's network: the amnesia check's rules on the sending
//!   side, over any [`guarded::Transport`] (HTTP, or the cluster tests' router).
//! - [`network`]: `NetworkFactory` (the HTTP transport) and the axum routes that serve `/raft/*`
//!   on the node's one port.
//!
//! This crate knows nothing about sled or about the ID engines: what the log store has on disk
//! reaches it through `leafraft_durability::LocalDurability`.

pub mod amnesia;
pub mod durability;
pub mod guarded;
pub mod network;

pub use amnesia::AmnesiaGuard;
pub use durability::DurableCommitNetwork;
pub use guarded::GuardedNetwork;

pub type Raft = openraft::Raft<leafraft_state::TypeConfig>;
