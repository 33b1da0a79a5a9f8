//! End-to-end tests: real `leafraft serve` processes on loopback ports, driven over HTTP and
//! through the CLI. One test binary; every test owns its own `harness::ProcessCluster`.

mod certs;
mod harness;
mod ids;
mod learner;
mod snowflake_ids;
mod stand_in;

mod cli_output;
mod client_library;
mod connections;
mod credentials;
mod fail_stop;
mod failover;
mod formation;
mod hostile;
mod identity;
mod idle_cpu;
mod membership;
mod monotonic;
mod no_quorum;
mod rebuild;
mod recover;
pub mod regression_credentials;
mod regression_deposed_holder_clock_back;
mod regression_incarnation_zero;
mod regression_paused_leader_stall;
mod regression_refounded_seed;
mod regression_restarted_follower_ready_too_early;
mod regression_restored_volume;
mod regression_retried_remove;
mod regression_store_deleted_identity_kept;
mod regression_tied_clock_check;
mod regression_wiped_member;
mod security;
mod segments;
mod segments_chaos;
mod shutdown;
mod snowflake;
mod snowflake_clock;
mod snowflake_load;
mod snowflake_workers;
mod statefulset;
mod tag_pages;
mod tags;
mod timeseq;
mod timeseq_cli;
mod timeseq_faults;
mod tls;
mod upgrade;

mod config;
mod import;
mod logs;
mod metrics;
mod openapi;
mod status;
