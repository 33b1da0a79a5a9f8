//! End-to-end tests: real `leafraft serve` processes on loopback ports, driven over HTTP and
//! through the CLI. One test binary; every test owns its own `harness::ProcessCluster`.

mod harness;
mod ids;
mod snowflake_ids;

mod chaos_planted;
mod failover;
mod formation;
mod membership;
mod no_quorum;
mod rebuild;
mod regression_deposed_holder_clock_back;
mod regression_paused_leader_stall;
mod regression_tied_clock_check;
mod security;
mod segments;
mod segments_chaos;
mod shutdown;
mod snowflake;
mod snowflake_clock;
mod snowflake_load;
mod snowflake_workers;
mod tags;

mod config;
mod import;
mod logs;
mod metrics;
mod openapi;
mod status;
