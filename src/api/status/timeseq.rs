//! The status page's time-sequence section: every namespace with its layout (fixed at creation)
//! and this node's ranges, and the node's claim counters. Read by [`Section::gather`], rendered
//! by [`section`], a pure function of it.

use maud::html;
use maud::Markup;

use crate::api::namespaces::time_zone_name;
use crate::api::respond::rfc3339;
use crate::api::AppState;
use crate::services::timeseq::NamespaceState;
use leafraft_ids::timeseq::SecondRange;

/// One namespace as the page shows it.
#[derive(Debug, Clone)]
pub struct NamespaceRow {
    pub name: String,
    pub record: leafraft_state::NamespaceRecord,
    /// This node's ranges (`None` until it has served the namespace).
    pub ranges: Option<NamespaceState>,
}

/// The section's data: the namespaces and this node's counters (claims, waits, ...) by kind.
#[derive(Debug, Clone, Default)]
pub struct Section {
    pub namespaces: Vec<NamespaceRow>,
    pub counters: Vec<(&'static str, u64)>,
}

impl Section {
    pub fn gather(state: &AppState) -> Section {
        let mut ranges = state.timeseq.states();
        let namespaces = state.cluster.read(|sm| {
            sm.timeseq
                .namespaces
                .iter()
                .map(|(name, record)| NamespaceRow { name: name.clone(), record: record.clone(), ranges: None })
                .collect::<Vec<_>>()
        });
        let namespaces = namespaces
            .into_iter()
            .map(|mut row| {
                row.ranges = ranges.remove(&row.name);
                row
            })
            .collect();
        Section { namespaces, counters: state.timeseq.event_counts() }
    }
}

/// `HH:MM:SS [start, end)` of a second's range (UTC), the full time on hover.
fn second_range(range: &SecondRange) -> Markup {
    let time = rfc3339(range.second.saturating_mul(1000));
    let clock = time.get(11..19).unwrap_or(&time).to_string();
    html! { span title=(time) { (clock) " [" (range.start) ", " (range.end) ")" } }
}

pub fn section(section: &Section) -> Markup {
    html! {
        h2 { "Time-sequence namespaces " span.muted { "(" (section.namespaces.len()) ")" } }
        @if section.namespaces.is_empty() {
            p.muted { "No namespaces yet: " code { "leafraft timeseq create NS" } "." }
        } @else {
            div.scroll { table #timeseq {
                thead { tr {
                    th { "namespace" } th { "epoch" } th { "zone" } th { "bits time/shard/seq" }
                    th { "description" } th { "current range" } th.num { "left" } th { "claimed ahead" }
                    th.num { "IDs issued" } th.num { "IDs last second" }
                } }
                tbody { @for row in &section.namespaces { (namespace_row(row)) } }
            } }
        }
        div.kv #timeseq-counters {
            @for (kind, count) in &section.counters {
                span { (kind.replace('_', " ")) " " b { (count) } }
            }
        }
    }
}

fn namespace_row(row: &NamespaceRow) -> Markup {
    let r = &row.record;
    html! {
        tr data-namespace=(row.name) {
            td { b { (row.name) } }
            td { (rfc3339(r.epoch_s.saturating_mul(1000))) }
            td { (time_zone_name(r.utc_offset_s)) }
            td { (r.time_bits()) "/" (r.shard_bits) "/" (r.seq_bits) }
            td.wrap { (r.description) }
            @match &row.ranges {
                None => td.muted colspan="5" { "no ranges on this node yet (claimed on the first request)" },
                Some(state) => {
                    td data-range="current" { @match &state.current { Some(c) => (second_range(c)), None => "–" } }
                    td.num { (state.current.map_or(0, |c| c.len())) }
                    td data-range="pending" {
                        @if state.pending.is_empty() { "–" }
                        @for (i, range) in state.pending.iter().enumerate() {
                            @if i > 0 { ", " }
                            (second_range(range))
                        }
                    }
                    td.num { (state.ids_issued) }
                    td.num { (state.last_second_ids) }
                }
            }
        }
    }
}
