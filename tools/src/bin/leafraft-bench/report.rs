//! What every load generator shares: the latency histogram and its percentiles, and the
//! counter server the HTTP numbers are compared with.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A latency histogram in microseconds, 1 µs to 60 s at 3 significant figures.
pub fn new_histogram() -> hdrhistogram::Histogram<u64> {
    // Both bounds and the precision are valid constants, so this cannot fail.
    hdrhistogram::Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid histogram bounds")
}

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

/// Serves `GET /{anything}` with the next value of an atomic counter: the least an HTTP ID
/// service can do, on the same stack as leafraft (`leafraft::api::server`, with its connection limits;
/// with `tls`, behind leafraft's own TLS listener and rustls configuration).
pub async fn counter_server(listen: &str, tls: Option<leafraft::config::TlsFiles>) -> Result<(), String> {
    let counter = Arc::new(AtomicU64::new(1));
    let app = axum::Router::new().route(
        "/{*path}",
        axum::routing::get(move || {
            let counter = counter.clone();
            async move { counter.fetch_add(1, Ordering::Relaxed).to_string() }
        }),
    );
    let listener =
        tokio::net::TcpListener::bind(listen).await.map_err(|e| format!("cannot listen on {listen}: {e}"))?;
    let tls = tls.map(leafraft::api::tls::Tls::load).transpose()?;
    let observers = (Arc::new(leafraft::metrics::Metrics::new()), Arc::default());
    // Never told to stop: the counter serves until the process ends.
    let (_serving, stop) = tokio::sync::watch::channel(false);
    let limits = leafraft::config::ConnectionLimits::default();
    let server = leafraft::api::server::serve(listener, app, tls, limits, observers, stop)?;
    server.await.map_err(|e| e.to_string())?.map_err(|e| e.to_string())
}
