//! Counts of what the ID services did, by kind: time-sequence events and claim batching.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::registered;
use super::KindLabels;
use super::Scrape;

pub(super) struct EventSeries {
    timeseq: Family<KindLabels, Counter>,
    claims: Family<KindLabels, Counter>,
}

impl EventSeries {
    pub(super) fn register(r: &mut Registry) -> EventSeries {
        let timeseq = registered(
            r,
            "timeseq_events",
            "Time-sequence claims committed, requests that waited, seconds found exhausted and clocks refused, by kind",
            Family::default(),
        );
        let claims = registered(
            r,
            "claim_events",
            "Segment and time-sequence claims this node sent, the Raft entries they took (a batch is one) and the claim batches among those entries, by kind",
            Family::default(),
        );
        EventSeries { timeseq, claims }
    }

    /// Moves each counter up to the count the services report (they only rise).
    pub(super) fn update(&self, scrape: &Scrape) {
        for (family, counts) in [(&self.timeseq, &scrape.timeseq), (&self.claims, &scrape.claims)] {
            for (kind, count) in counts {
                let counter = family.get_or_create(&KindLabels { kind });
                counter.inc_by(count.saturating_sub(counter.get()));
            }
        }
    }
}
