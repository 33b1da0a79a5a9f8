//! The in-process cluster suite: several leafraft nodes on real sled stores in temporary
//! directories, each running leafraft's own `Cluster`, `Segments` and `Snowflakes`, wired by a
//! [`fixtures::Router`] that round-trips every message (Raft RPCs and forwards to the leader)
//! through the wire codec and applies composable filters (block, drop, delay; by sender,
//! receiver, kind or any predicate).
//!
//! Files are numbered as in openraft's suite: `t10` basics, `t20` life cycle (restarts, power cuts, idle buffers dropped), `t30`
//! membership, `t40` snapshots, `t50` environment faults (partitions, lossy links, one-way cuts, slow claims), `t60` monotonic tags (`t62`: with time sequences under a partition; `t63`: a follower's batched takes), `t70` time
//! sequences.
//! Every test feeds each segment it is handed, and every ID the nodes' services serve, into one
//! [`fixtures::Oracle`], which fails the test if an ID is handed out twice or if two nodes ever
//! led in the same term.
//!
//! Logs are quiet by default; `RUST_LOG=cluster=info,openraft=warn cargo test --test cluster --
//! --nocapture` shows the `---` phases of each test.

mod fixtures;

mod t10_election;
mod t20_restart;
mod t21_amnesia;
mod t22_idle_buffers;
mod t23_power_cut;
mod t30_membership;
mod t40_snapshot;
mod t50_partition;
mod t51_lossy_network;
mod t52_one_way;
mod t53_slow_claims;
mod t60_monotonic;
mod t61_operator_paths;
mod t62_partition_services;
mod t63_follower_batches;
mod t64_mode_switch;
mod t70_timeseq;
mod t71_batched_claims;
