//! The Raft transport of leafraft: the HTTP + bincode network between nodes, the durability and
//! amnesia wrappers around it. The pure replicated state (commands, records,
//! `apply`, codec) is the `leafraft-state` crate, re-exported here so that `raft::Request`,
//! `raft::codec` and the rest keep their paths.
//!
//! # Layout
//! - [`durability`]: `DurableCommitNetwork`, no commit counted before the leader's own log is on
//!   disk; `LocalDurability`, what the local log has made durable.
//! - [`amnesia`]: `AmnesiaGuard`, a member whose log went back in time stops instead of voting.
//! - [`guarded`]: `GuardedNetwork`, openraft's network: the amnesia check's rules on the sending
//!   side, over any [`guarded::Transport`] (HTTP, or the cluster tests' router).
//! - [`network`]: `NetworkFactory` (the HTTP transport) and the axum routes that serve `/raft/*`
//!   on the node's one port.
//!
//! This crate knows nothing about sled or about the ID engines.

pub use leafraft_state::codec;
pub use leafraft_state::node;
#[cfg(feature = "planted")]
pub use leafraft_state::planted;
pub use leafraft_state::records;
pub use leafraft_state::request;
pub use leafraft_state::snowflake;
pub use leafraft_state::state_machine;
pub use leafraft_state::tag;
pub use leafraft_state::timeseq;
pub use leafraft_state::typ;
pub use leafraft_state::version;
pub use leafraft_state::Claim;
pub use leafraft_state::IdStateMachine;
pub use leafraft_state::ImportRow;
pub use leafraft_state::NamespaceRecord;
pub use leafraft_state::Needs;
pub use leafraft_state::Node;
pub use leafraft_state::NodeId;
pub use leafraft_state::Rejection;
pub use leafraft_state::Release;
pub use leafraft_state::Request;
pub use leafraft_state::Response;
pub use leafraft_state::SnowflakeLayout;
pub use leafraft_state::SnowflakeRegistry;
pub use leafraft_state::TagMode;
pub use leafraft_state::TagRecord;
pub use leafraft_state::TimeseqRegistry;
pub use leafraft_state::TypeConfig;
pub use leafraft_state::Version;
pub use leafraft_state::WorkerLease;

pub mod amnesia;
pub mod durability;
pub mod guarded;
pub mod network;

pub use amnesia::AmnesiaGuard;
pub use durability::DurableCommitNetwork;
pub use durability::LocalDurability;
pub use guarded::GuardedNetwork;

pub type Raft = openraft::Raft<TypeConfig>;
