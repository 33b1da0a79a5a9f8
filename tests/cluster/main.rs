//! The in-process cluster suite: several leafraft Raft nodes on real sled stores in temporary
//! directories, wired by a [`fixtures::Router`] that round-trips every message through the wire
//! codec and can isolate, partition, drop and delay.
//!
//! Files are numbered as in openraft's suite: `t10` basics, `t20` life cycle (restarts), `t30`
//! membership, `t40` snapshots, `t50` environment faults (partitions, lossy links). Every test
//! feeds each segment it is handed into one [`fixtures::Oracle`], which fails the test if two
//! handed-out segments share an ID or if two nodes ever led in the same term.
//!
//! Logs are quiet by default; `RUST_LOG=cluster=info,openraft=warn cargo test --test cluster --
//! --nocapture` shows the `---` phases of each test.

mod fixtures;

mod t10_election;
mod t20_restart;
mod t30_membership;
mod t40_snapshot;
mod t50_partition;
mod t51_lossy_network;
