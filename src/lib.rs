//! leafraft: a distributed ID service. Leaf's segment and snowflake IDs, with the `leaf_alloc`
//! table and the worker registry replicated by openraft among 3 or 5 nodes instead of MySQL and
//! ZooKeeper.
//!
//! # Layout
//! - [`cli`]: the command line: its arguments (clap; nothing else sees clap) and the commands,
//!   which talk to a cluster through the client library (`leafraft-client`).
//! - [`node`]: one node's lifecycle: `run` (start to graceful stop), `assembly` (the one place a
//!   node's Raft, lease, amnesia guard, network, `Cluster` and ID services are built), `bootstrap`,
//!   `failstop` (stopping a node whose storage fails) and `reload`.
//! - [`cluster`]: `Cluster`, this node's handle on the Raft group: writes forwarded to the
//!   leader, membership changes, reads, readiness.
//! - [`services`]: `IdServices`, the ID services of one node built in one place, and the services:
//!   `segments`, `monotonic`, `snowflakes`, `timeseq`, which feed the pure ID engines of the
//!   `leafraft-ids` crate (segment double buffer, dynamic step, snowflake generator,
//!   time-sequence layout and range holder; the client library shares it) with Raft-committed
//!   claims (`claims`, `batch_queue`) and worker leases.
//! - [`api`]: the HTTP edge: the routes (`/v1/*`, health, `/raft/*`), translating to `Cluster`
//!   calls, and the port they are served on (`server`, `connections`, `tls`, `refusals`, `probes`).
//! - [`offline`]: `import` (`leafraft tag import`, moving a Leaf `leaf_alloc` table over) and
//!   `recover` (`leafraft recover`, a new cluster from a survivor or a backup after a lost
//!   majority, with the pure safety margin).
//! - [`backup`]: the backup file of `GET /v1/backup`, `leafraft backup` and `leafraft recover`.
//! - [`config`]: `Config`, resolved from flags, `LEAFRAFT_*` variables and a TOML file, with the
//!   credentials by role.
//! - [`clock`]: the wall clock, read in one place, and the verdict of the peer clock check.
//! - [`metrics`]: the Prometheus series of `/metrics`.
//! - [`error`]: `Error` with the stable codes of the API.
//! - `planted`: bugs planted on purpose to prove the chaos checker fails (only with the cargo
//!   feature `planted`, which release builds never enable).
//!
//! Beside this crate: the commands, records and state machine are the `leafraft-state` crate
//! (`state/`), the Raft network between nodes is `raft`, sled is `storage`, the ID engines are
//! `leafraft-ids` (`ids/`); each is imported from the crate that defines it.

pub mod api;
pub mod backup;
pub mod cli;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod error;
pub mod metrics;
pub mod node;
pub mod offline;
#[cfg(feature = "planted")]
pub mod planted;
pub mod services;
