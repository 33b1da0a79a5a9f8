//! `Cluster`: this node's handle on the Raft group.
//!
//! It proposes writes (forwarded to the leader when this node is not it), changes the membership,
//! answers reads of the replicated state and says whether this node is ready. Every write any
//! node accepts ends up here; `api` only translates HTTP.
//!
//! - [`handle`]: the handle, the operations callers use and the retry loop that takes each one
//!   to the leader (this file only declares the parts and names what callers import);
//! - [`forward`]: the forwarding protocol, the [`Peers`] interface and its sending end over HTTP
//!   (the receiving end is the HTTP edge's, `api::forward`);
//! - [`leader`]: what the leader does with each operation;
//! - [`membership`]: membership changes that need more than one Raft call (learners that must
//!   catch up, identities that must match);
//! - [`readiness`]: whether this node may serve;
//! - [`view`]: the `/v1/cluster` view;
//! - [`versions`]: the cluster version, the commands it gates and how it rises (rolling upgrades).
//!
//! Retries: a write is retried only while it certainly was not appended anywhere, or when
//! applying it twice is harmless (a second claim only burns IDs; creates and updates are
//! idempotent). `ReleaseSegment` is submitted exactly once: see `leafraft_state::Request::ReleaseSegment`.

pub(crate) mod attempt;
mod catch_up;
mod fence;
pub mod forward;
mod handle;
mod incarnations;
mod leader;
mod membership;
mod readiness;
mod removal;
mod retry;
pub mod versions;
mod view;

pub use self::forward::check_addr;
pub use self::forward::BoxFuture;
pub use self::forward::ForwardError;
pub use self::forward::ForwardResult;
pub use self::forward::Forwarded;
pub use self::forward::ForwardedReply;
pub use self::forward::Hello;
pub use self::forward::HelloError;
pub use self::forward::HttpPeers;
pub use self::forward::MonotonicTake;
pub use self::forward::Peers;
pub use self::handle::Cluster;
pub use self::handle::Timeouts;
pub use self::incarnations::record_unknown_incarnations;
pub use self::membership::rejoin_refusal;
pub use self::membership::MAX_PROMOTION_LAG;
pub use self::removal::watch_membership;
pub use self::view::ClusterStatus;
pub use self::view::ReplicationStatus;
