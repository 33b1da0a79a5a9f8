//! The store's durable syncs (`storage::sync_latency`): a histogram encoded at scrape time from
//! the storage crate's bucket counters, as the request latencies are.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;

#[derive(Debug)]
pub(super) struct SyncLatency;

impl Collector for SyncLatency {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let syncs = storage::sync_latency();
        let count = syncs.counts.iter().sum();
        // Not cumulative yet: the encoder adds them up; `f64::MAX` is its `+Inf`.
        let buckets: Vec<(f64, u64)> =
            storage::SYNC_BOUNDS.iter().copied().chain([f64::MAX]).zip(syncs.counts.iter().copied()).collect();
        let mut metric = encoder.encode_descriptor(
            "storage_fsync_duration_seconds",
            "Time one durable sync of the store took (sled's flush, then fdatasync of its files); every Raft \
             append and vote waits for one",
            None,
            MetricType::Histogram,
        )?;
        metric.encode_histogram::<prometheus_client::encoding::NoLabelSet>(syncs.sum_seconds, count, &buckets, None)
    }
}
