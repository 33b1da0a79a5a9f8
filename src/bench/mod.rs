//! `leafraft bench`: built-in load generators. `claims` measures Raft-committed segment claims
//! on a local cluster started in this process.

pub mod claims;

/// Latency percentiles of a run, in microseconds.
#[derive(Debug, Clone, Copy)]
pub struct Percentiles {
    pub p50: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

impl Percentiles {
    pub fn of(histogram: &hdrhistogram::Histogram<u64>) -> Percentiles {
        Percentiles {
            p50: histogram.value_at_quantile(0.50),
            p99: histogram.value_at_quantile(0.99),
            p999: histogram.value_at_quantile(0.999),
            max: histogram.max(),
        }
    }
}
