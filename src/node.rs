//! One node's lifecycle: [`run`] takes it from start to graceful stop; [`assembly`] builds its
//! Raft, `Cluster` and ID services; [`bootstrap`] forms or joins a cluster on first start;
//! [`failstop`] stops it when its storage fails; [`reload`] rereads credentials and certificates
//! without a restart.

pub mod assembly;
pub mod bootstrap;
pub mod failstop;
pub mod reload;
pub mod run;
