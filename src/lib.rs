//! leafraft: a distributed ID service. Leaf's segment and snowflake IDs, with the `leaf_alloc`
//! table and the worker registry replicated by openraft among 3 or 5 nodes instead of MySQL and
//! ZooKeeper.
//!
//! # Layout
//! - [`config`]: `Config`, resolved from flags, `LEAFRAFT_*` variables and a TOML file.
//! - [`cli`]: the command line: its arguments (clap; nothing else sees clap) and the commands,
//!   which talk to a cluster through the client library (`leafraft-client`).
//! - [`node`]: `run`, one node from start to graceful stop (store, Raft, HTTP, bootstrap).
//! - [`assembly`]: `assemble`, the one place a node's Raft, lease, amnesia guard, network,
//!   `Cluster` and ID services are built (serve, the in-process suite; `recover` its raft core).
//! - [`cluster`]: `Cluster`, this node's handle on the Raft group: writes forwarded to the
//!   leader, membership changes, reads, readiness.
//! - [`api`]: the HTTP routes (`/v1/*`, health, `/raft/*`), translating to `Cluster` calls.
//! - [`segments`], [`monotonic`], [`snowflakes`], [`timeseq`]: the ID services that feed the pure ID engines of
//!   the `leafraft-ids` crate (segment double buffer, dynamic step, snowflake generator,
//!   time-sequence layout and range holder; the client library shares it) with Raft-committed
//!   claims and worker leases.
//! - [`services`]: `IdServices`, the ID services of one node built in one place (serve and the
//!   in-process suite).
//! - [`metrics`]: the Prometheus series of `/metrics`.
//! - [`error`]: `Error` with the stable codes of the API.
//! - [`failstop`]: the watchers that stop a node whose storage fails.
//! - [`import`]: `leafraft tag import`, moving a Leaf `leaf_alloc` table over.
//! - `planted`: bugs planted on purpose to prove the chaos checker fails (only with the cargo
//!   feature `planted`, which release builds never enable).
//! - [`backup`]: the backup file of `GET /v1/backup` and `leafraft backup`.
//! - [`recover`]: `leafraft recover`, a new cluster from a survivor or a backup after a lost
//!   majority, with the pure safety margin.
//!
//! Beside this crate: the commands, records and state machine are the `leafraft-state` crate
//! (`state/`), the Raft network between nodes is `raft`, sled is `storage`, the ID engines are
//! `leafraft-ids` (`ids/`); each is imported from the crate that defines it.

pub mod api;
pub mod assembly;
pub mod backup;
pub mod batch_queue;
pub mod bootstrap;
pub mod claims;
pub mod cli;
pub mod clock;
pub mod clock_verdict;
pub mod cluster;
pub mod config;
pub mod connections;
pub mod credentials;
pub mod error;
pub mod failstop;
pub mod import;
pub mod metrics;
pub mod monotonic;
pub mod node;
#[cfg(feature = "planted")]
pub mod planted;
pub mod probes;
pub mod recover;
pub mod refusals;
pub mod reload;
pub mod segments;
pub mod serve;
pub mod services;
pub mod sharded_map;
pub mod snowflakes;
pub mod timeseq;
pub mod tls;
