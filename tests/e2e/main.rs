//! End-to-end tests: real `leafraft serve` processes on loopback ports, driven over HTTP and
//! through the CLI. One test binary; every test owns its own `harness::ProcessCluster`.

mod harness;

mod failover;
mod formation;
mod membership;
mod rebuild;
mod security;
mod shutdown;
mod tags;
