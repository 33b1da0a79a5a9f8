//! Requests by route and status code, counted without a lock: every routed request passes here,
//! and a lock (or a hash map behind one) that both cores take for every ID request showed up in
//! profiles of the single-ID benchmark. Routes get a slot in a fixed table on first sight and are
//! counted in plain atomics; the registry's family is brought up to date at scrape time.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use super::intern;
use super::RequestLabels;

/// Room for the router's routes (about thirty) with space to spare; a route that finds the table
/// full is counted in the registry directly.
const SLOTS: usize = 64;

/// The status codes the API answers; any other is counted in the registry directly.
const CODES: [u16; 13] = [200, 201, 400, 401, 403, 404, 405, 409, 413, 415, 422, 500, 503];

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
}

pub struct RequestCounts {
    slots: Box<[Slot]>,
    family: Family<RequestLabels, Counter>,
}

impl RequestCounts {
    pub fn new(family: Family<RequestLabels, Counter>) -> RequestCounts {
        let slots = (0..SLOTS)
            .map(|_| Slot {
                route: OnceLock::new(),
                counts: std::array::from_fn(|_| AtomicU64::new(0)),
                copied: std::array::from_fn(|_| AtomicU64::new(0)),
            })
            .collect();
        RequestCounts { slots, family }
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

    pub fn count(&self, key: RouteKey, code: u16) {
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
            counts.count(leaf, 200);
        }
        counts.count(counts.key("/api/segment/get/{tag}"), 500);
        counts.count(counts.key("/v1/tags"), 418);
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
                        counts.count(key, 200);
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
            counts.count(counts.key(route), 200);
            counts.count(counts.key(route), 200);
        }
        counts.copy_into_registry();
        let text = encoded(&family);
        for route in &routes {
            assert!(text.contains(&format!(r#"requests_total{{route="{route}",code="200"}} 2"#)), "{route}: {text}");
        }
    }
}
