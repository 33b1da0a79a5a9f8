//! The pure replicated state of leafraft: the commands proposed through Raft (`Request`) and the
//! answers applying them gives (`Response`, `Rejection`), the records they carry, the state
//! machine `IdStateMachine` with its deterministic `apply`, the snowflake and time-sequence
//! registries, tag limits, the member type `Node`, release numbers, the openraft type config and
//! the one bincode configuration (`codec`) of the wire and the disk.
//!
//! Nothing here does I/O, reads a clock, or runs async code: no axum, hyper, reqwest or sled in
//! its dependency graph (`xtask`: `linked_crates`). The network and the durability
//! wrappers are the `raft` crate; every crate imports this one's items from here.
//!
//! # Layout
//! - [`request`]: `Request` (what is proposed through Raft) and `Response` (what applying it
//!   answers). The variant order of `Request` is persisted in the log: append only.
//! - [`records`]: the records the state keeps and the commands carry (`TagRecord`, `TagMode`,
//!   `NamespaceRecord`; the snowflake layout is `leafraft_ids::snowflake::Layout`), below every module that names them.
//! - [`state_machine`]: `IdStateMachine`, the replicated state (tags with their `max_id`, the
//!   applied log id and the membership) and its deterministic `apply`.
//! - [`snowflake`]: the snowflake layout and worker leases, part of the state machine.
//! - [`timeseq`]: time-sequence namespaces and per-second sequence claims, part of the state
//!   machine.
//! - [`node`]: `Node`, a member as the membership records it (address and disk incarnation).
//! - [`tag`]: tag names and the numeric limits every layer checks.
//! - [`version`]: release numbers (`Version`): this binary's, the baseline's.
//! - [`codec`]: the one bincode configuration used on the wire and on disk.

use std::io::Cursor;

pub mod codec;
pub mod node;
#[cfg(feature = "planted")]
pub mod planted;
pub mod records;
pub mod request;
pub mod snowflake;
pub mod state_machine;
pub mod tag;
pub mod timeseq;
pub mod version;

pub use node::Node;
pub use records::NamespaceRecord;
pub use records::ScrambleKey;
pub use records::TagMode;
pub use records::TagRecord;
pub use request::Claim;
pub use request::ImportRow;
pub use request::Needs;
pub use request::Rejection;
pub use request::Release;
pub use request::Request;
pub use request::Response;
pub use request::SharedBlock;
pub use snowflake::SnowflakeRegistry;
pub use snowflake::WorkerLease;
pub use state_machine::IdStateMachine;
pub use timeseq::TimeseqRegistry;
pub use version::Version;

pub type NodeId = u64;

openraft::declare_raft_types!(
    /// The openraft type configuration of leafraft.
    pub TypeConfig:
        D = Request,
        R = Response,
        NodeId = NodeId,
        Node = Node,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

/// Short names for the openraft generics instantiated with [`TypeConfig`].
pub mod typ {
    use crate::Node;
    use crate::NodeId;
    use crate::TypeConfig;

    pub type Entry = openraft::Entry<TypeConfig>;
    pub type LogId = openraft::LogId<NodeId>;
    pub type Vote = openraft::Vote<NodeId>;
    pub type LeaderId = openraft::LeaderId<NodeId>;
    pub type StoredMembership = openraft::StoredMembership<NodeId, Node>;
    pub type Membership = openraft::Membership<NodeId, Node>;
    pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, Node>;
    pub type Snapshot = openraft::Snapshot<TypeConfig>;
    pub type StorageError = openraft::StorageError<NodeId>;
    pub type RaftMetrics = openraft::RaftMetrics<NodeId, Node>;

    pub type RaftError<E = openraft::error::Infallible> = openraft::error::RaftError<NodeId, E>;
    pub type RPCError<E = openraft::error::Infallible> = openraft::error::RPCError<NodeId, Node, RaftError<E>>;
    pub type ClientWriteError = openraft::error::ClientWriteError<NodeId, Node>;
    pub type CheckIsLeaderError = openraft::error::CheckIsLeaderError<NodeId, Node>;
    pub type ForwardToLeader = openraft::error::ForwardToLeader<NodeId, Node>;
    pub type InitializeError = openraft::error::InitializeError<NodeId, Node>;
    pub type InstallSnapshotError = openraft::error::InstallSnapshotError;
    pub type ClientWriteResponse = openraft::raft::ClientWriteResponse<TypeConfig>;
    pub type AppendEntriesRequest = openraft::raft::AppendEntriesRequest<TypeConfig>;
    pub type AppendEntriesResponse = openraft::raft::AppendEntriesResponse<NodeId>;
    pub type VoteRequest = openraft::raft::VoteRequest<NodeId>;
    pub type VoteResponse = openraft::raft::VoteResponse<NodeId>;
    pub type InstallSnapshotRequest = openraft::raft::InstallSnapshotRequest<TypeConfig>;
    pub type InstallSnapshotResponse = openraft::raft::InstallSnapshotResponse<NodeId>;
}
