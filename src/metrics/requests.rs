//! Requests by route and status code, counted without a lock: every routed request passes here,
//! and a lock (or a hash map behind one) that both cores take for every ID request showed up in
//! profiles of the single-ID benchmark. Routes get a slot in a fixed table on first sight and are
//! counted in plain atomics; the registry's family is brought up to date at scrape time.
//! Latencies go the same way: per route, a fixed set of bucket counters in atomics, encoded as a
//! histogram at scrape time by a collector (`Latencies`) that reads the same slots.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::OnceLock;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::MetricType;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use super::intern;
use super::RequestLabels;

/// Room for the router's routes (about thirty) with space to spare; a route that finds the table
/// full is counted in the registry directly.
const SLOTS: usize = 64;

/// The status codes the API answers; any other is counted in the registry directly.
const CODES: [u16; 13] = [200, 201, 400, 401, 403, 404, 405, 409, 413, 415, 422, 500, 503];

/// Upper bounds of the latency buckets, in seconds: 50 µs to about 1.6 s by doubling (an ID from a
/// ready buffer answers in tens of microseconds, a forwarded write in milliseconds, a request that
/// waits for a leader up to seconds); slower ones land in `+Inf`.
const LATENCY_BOUNDS: [f64; 16] = [
    0.000_05, 0.000_1, 0.000_2, 0.000_4, 0.000_8, 0.001_6, 0.003_2, 0.006_4, 0.012_8, 0.025_6, 0.051_2, 0.102_4,
    0.204_8, 0.409_6, 0.819_2, 1.638_4,
];

/// Where a request's count goes: decided when the request arrives, used when it is answered.
#[derive(Debug, Clone, Copy)]
pub enum RouteKey {
    Slot(usize),
    /// The table was full: counted through the registry under this route.
    Registry(&'static str),
}

struct Slot {
    route: OnceLock<&'static str>,
    counts: [AtomicU64; CODES.len()],
    /// The largest count a copy has brought the registry up to: a copy adds only what lies
    /// beyond it, so copies that overlap add each request once.
    copied: [AtomicU64; CODES.len()],
    /// Answered requests by latency bucket (not cumulative; the last is `+Inf`), all codes.
    latency: [AtomicU64; LATENCY_BOUNDS.len() + 1],
    latency_sum_nanos: AtomicU64,
}

pub struct RequestCounts {
    slots: Arc<[Slot]>,
    family: Family<RequestLabels, Counter>,
}

/// The `http_request_duration_seconds` histogram per route, read from the slots at scrape time.
#[derive(Debug)]
pub struct Latencies {
    slots: Arc<[Slot]>,
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot").field("route", &self.route.get()).finish_non_exhaustive()
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: &'static str,
}

impl RequestCounts {
    pub fn new(family: Family<RequestLabels, Counter>) -> RequestCounts {
        let slots = (0..SLOTS)
            .map(|_| Slot {
                route: OnceLock::new(),
                counts: std::array::from_fn(|_| AtomicU64::new(0)),
                copied: std::array::from_fn(|_| AtomicU64::new(0)),
                latency: std::array::from_fn(|_| AtomicU64::new(0)),
                latency_sum_nanos: AtomicU64::new(0),
            })
            .collect();
        RequestCounts { slots, family }
    }

    /// The collector that encodes the slots' latencies.
    pub fn latencies(&self) -> Latencies {
        Latencies { slots: self.slots.clone() }
    }

    /// The slot of a route template, taking a free one on first sight (open addressing; a slot,
    /// once taken, never changes, so a lookup needs no lock).
    pub fn key(&self, route: &str) -> RouteKey {
        let start = fnv1a(route) % SLOTS;
        for probe in 0..SLOTS {
            let index = (start + probe) % SLOTS;
            let taken = *self.slots[index].route.get_or_init(|| intern(route));
            if taken == route {
                return RouteKey::Slot(index);
            }
        }
        RouteKey::Registry(intern(route))
    }

    /// Counts one answered request and how long it took (a route that found the table full has
    /// its count but no latency).
    pub fn count(&self, key: RouteKey, code: u16, took: Duration) {
        if let RouteKey::Slot(index) = key {
            let slot = &self.slots[index];
            let seconds = took.as_secs_f64();
            let bucket = LATENCY_BOUNDS.iter().position(|bound| seconds <= *bound).unwrap_or(LATENCY_BOUNDS.len());
            slot.latency[bucket].fetch_add(1, Ordering::Relaxed);
            let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
            slot.latency_sum_nanos.fetch_add(nanos, Ordering::Relaxed);
        }
        let position = CODES.iter().position(|known| *known == code);
        match (key, position) {
            (RouteKey::Slot(index), Some(position)) => {
                self.slots[index].counts[position].fetch_add(1, Ordering::Relaxed);
            }
            (RouteKey::Slot(index), None) => {
                if let Some(route) = self.slots[index].route.get() {
                    self.family.get_or_create(&RequestLabels { route, code }).inc();
                }
            }
            (RouteKey::Registry(route), _) => {
                self.family.get_or_create(&RequestLabels { route, code }).inc();
            }
        }
    }

    /// Brings the registry's series up to the atomics. Safe to call from overlapping scrapes:
    /// reading the registry's value and adding the difference would let two copies add it twice.
    pub fn copy_into_registry(&self) {
        for slot in self.slots.iter() {
            let Some(route) = slot.route.get() else { continue };
            for (position, code) in CODES.iter().enumerate() {
                let count = slot.counts[position].load(Ordering::Relaxed);
                let before = slot.copied[position].fetch_max(count, Ordering::Relaxed);
                if count > before {
                    self.family.get_or_create(&RequestLabels { route, code: *code }).inc_by(count - before);
                }
            }
        }
    }
}

impl Collector for Latencies {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut metric = encoder.encode_descriptor(
            "http_request_duration_seconds",
            "Time from routing a request to its answer, by route template (all status codes)",
            None,
            MetricType::Histogram,
        )?;
        for slot in self.slots.iter() {
            let Some(route) = slot.route.get() else { continue };
            // Each bucket read once: the count is their sum, so `+Inf` always equals `_count`.
            let counts: Vec<u64> = slot.latency.iter().map(|bucket| bucket.load(Ordering::Relaxed)).collect();
            let count = counts.iter().sum();
            let sum = slot.latency_sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
            // The encoder makes the buckets cumulative; `f64::MAX` is its `+Inf`.
            let buckets: Vec<(f64, u64)> =
                LATENCY_BOUNDS.iter().copied().chain([f64::MAX]).zip(counts.iter().copied()).collect();
            let labels = RouteLabels { route };
            metric.encode_family(&labels)?.encode_histogram::<RouteLabels>(sum, count, &buckets, None)?;
        }
        Ok(())
    }
}

/// FNV-1a: a few dozen cycles for a route template, and the table needs no better spread.
fn fnv1a(text: &str) -> usize {
    let hash = text
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3));
    hash as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(family: &Family<RequestLabels, Counter>) -> String {
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register("requests", "", family.clone());
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap_or_default();
        text
    }

    #[test]
    fn counts_by_route_and_code_and_copies_each_count_once() {
        let family = Family::default();
        let counts = RequestCounts::new(family.clone());
        let leaf = counts.key("/api/segment/get/{tag}");
        for _ in 0..3 {
            counts.count(leaf, 200, Duration::ZERO);
        }
        counts.count(counts.key("/api/segment/get/{tag}"), 500, Duration::ZERO);
        counts.count(counts.key("/v1/tags"), 418, Duration::ZERO);
        counts.copy_into_registry();
        counts.copy_into_registry();
        let text = encoded(&family);
        assert!(text.contains(r#"requests_total{route="/api/segment/get/{tag}",code="200"} 3"#), "{text}");
        assert!(text.contains(r#"requests_total{route="/api/segment/get/{tag}",code="500"} 1"#), "{text}");
        assert!(text.contains(r#"requests_total{route="/v1/tags",code="418"} 1"#), "{text}");
    }

    /// Two scrapes that copied at once both added the same difference, and the series showed
    /// more requests than were served (until the true count caught up). Each copy must show at
    /// most what was counted by the time it ends.
    #[test]
    fn regression_overlapping_copies_never_show_more_than_was_counted() {
        const THREADS: usize = 2;
        const REQUESTS_PER_THREAD: usize = 200_000;
        let family = Family::default();
        let counts = RequestCounts::new(family.clone());
        let route = "/api/segment/get/{tag}";
        let key = counts.key(route);
        let RouteKey::Slot(index) = key else { panic!("a fresh table has a free slot") };
        let counted = &counts.slots[index].counts[0];
        let series = family.get_or_create(&RequestLabels { route: intern(route), code: 200 }).clone();
        let over = std::sync::atomic::AtomicU64::new(0);
        std::thread::scope(|threads| {
            for _ in 0..THREADS {
                threads.spawn(|| {
                    for _ in 0..REQUESTS_PER_THREAD {
                        counts.count(key, 200, Duration::ZERO);
                        counts.copy_into_registry();
                        let shown = series.get();
                        if shown > counted.load(Ordering::SeqCst) {
                            over.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert_eq!(over.load(Ordering::Relaxed), 0, "copies that showed more requests than were counted");
        counts.copy_into_registry();
        assert_eq!(series.get(), (THREADS * REQUESTS_PER_THREAD) as u64);
    }

    #[test]
    fn a_full_table_still_counts_every_route() {
        let family = Family::default();
        let counts = RequestCounts::new(family.clone());
        let routes: Vec<String> = (0..SLOTS + 5).map(|i| format!("/route/{i}")).collect();
        for route in &routes {
            counts.count(counts.key(route), 200, Duration::ZERO);
            counts.count(counts.key(route), 200, Duration::ZERO);
        }
        counts.copy_into_registry();
        let text = encoded(&family);
        for route in &routes {
            assert!(text.contains(&format!(r#"requests_total{{route="{route}",code="200"}} 2"#)), "{route}: {text}");
        }
    }
}
