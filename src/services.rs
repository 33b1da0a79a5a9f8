//! The ID services of one node over its `Cluster`, built in one place: `node::assembly::assemble`
//! calls [`IdServices::new`] for `node::run::start` (`serve`) and the in-process suite
//! (`tests/cluster/fixtures/cluster.rs`), which both call [`IdServices::maintain`], so the
//! services the tests drive are wired as the ones that ship, time sequences included.

pub mod batch_queue;
pub mod claims;
pub mod monotonic;
pub mod segments;
pub mod sharded_map;
pub mod snowflakes;
pub mod timeseq;

use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::clock::verdict::ClockCheck;
use crate::cluster::Cluster;
use crate::metrics::Metrics;
use crate::services::claims::ClaimBatcher;
use crate::services::monotonic::Monotonic;
use crate::services::segments::SegmentConfig;
use crate::services::segments::Segments;
use crate::services::snowflakes::SnowflakeConfig;
use crate::services::snowflakes::Snowflakes;
use crate::services::timeseq::Timeseq;

/// Segments, monotonic tags, snowflakes and time sequences, each fed by the same `Cluster`.
#[derive(Clone)]
pub struct IdServices {
    pub metrics: Arc<Metrics>,
    pub segments: Arc<Segments>,
    /// Monotonic tags (`Segments` hands it the tags of that mode).
    pub monotonic: Arc<Monotonic>,
    pub snowflakes: Arc<Snowflakes>,
    pub timeseq: Arc<Timeseq>,
    /// The one queue segment refills and time-sequence claims are committed through, batched.
    pub claims: Arc<ClaimBatcher>,
}

impl IdServices {
    pub fn new(
        cluster: &Arc<Cluster>,
        segments: SegmentConfig,
        snowflake: SnowflakeConfig,
        metrics: Arc<Metrics>,
    ) -> IdServices {
        let claims = Arc::new(ClaimBatcher::start(cluster.clone()));
        let monotonic = Arc::new(Monotonic::new(cluster.clone()));
        let segments =
            Arc::new(Segments::new(cluster.clone(), monotonic.clone(), claims.clone(), segments, metrics.clone()));
        // One clock verdict, which snowflake's upkeep checks and time sequences read.
        let clock = Arc::new(ClockCheck::new(cluster.clone(), snowflake.max_skew));
        let snowflakes = Arc::new(Snowflakes::new(cluster.clone(), snowflake, clock.clone()));
        let timeseq = Arc::new(Timeseq::new(cluster.clone(), claims.clone(), clock));
        timeseq.watch_applied();
        IdServices { metrics, segments, monotonic, snowflakes, timeseq, claims }
    }

    /// Starts the upkeep of the snowflake worker (agree on the layout, acquire, extend) and of the
    /// time sequences (prefetch, clock verdict) until `stop` turns true or its sender is dropped.
    /// Answers the snowflake task, which gives the worker back on a stop; the time-sequence task
    /// needs no waiting for.
    pub fn maintain(&self, stop: watch::Receiver<bool>) -> JoinHandle<()> {
        tokio::spawn(self.timeseq.clone().maintain(stop.clone()));
        tokio::spawn(self.snowflakes.clone().maintain(stop))
    }
}
