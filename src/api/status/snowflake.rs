//! The status page's snowflake section: this node's worker and clock check, the layout, and the
//! worker registry.

use maud::html;
use maud::Markup;

use super::instant;
use super::or_dash;
use super::Page;

pub fn section(page: &Page) -> Markup {
    let s = &page.snowflake;
    html! {
        h2 { "Snowflake" }
        div.kv #this-snowflake {
            span { "this node's worker " b { (s.worker_id.map_or("none".to_string(), |w| w.to_string())) } }
            span { "epoch " b { (or_dash(s.epoch)) } }
            span { "window end " b { (s.window_end_ms.map_or(html! { "–" }, |end| instant(page.now_ms, end))) } }
            span { "clock offset to peers " b {
                @match s.clock_offset_ms {
                    Some(ms) => { (format!("{ms:+} ms")) " " span.muted { "(median of " (s.peers_checked) " peers)" } },
                    None if s.peers_checked == 0 => span.muted { "no peer checked" },
                    None => "–",
                }
            } }
            @match &s.refused {
                Some(reason) => span { "snowflake " span.err #refused { "refused: " (reason) } },
                None if s.worker_id.is_some() => span { "snowflake " span.pill.ok { "serving" } },
                None => span { "snowflake " span.muted { "not serving yet" } },
            }
            span { "IDs issued " b { (s.ids_issued) } }
        }
        @match &page.layout {
            Some(layout) => p.muted {
                "Layout: epoch " (crate::api::respond::rfc3339(layout.epoch_ms)) " (" (layout.epoch_ms) " ms), "
                (layout.time_bits) " time bits, " (layout.worker_bits) " worker bits, "
                (layout.sequence_bits) " sequence bits; the time bits last "
                (format!("{:.1}", page.years_left)) " more years."
            },
            None => p.muted { "No layout recorded yet (the first node that serves snowflake records it)." },
        }
        (workers(page))
    }
}

fn workers(page: &Page) -> Markup {
    let me = page.cluster.node_id;
    html! {
        @if page.workers.is_empty() {
            p.muted { "No worker has been used yet." }
        } @else {
            div.scroll { table #workers {
                thead { tr {
                    th.num { "worker" } th { "holder" } th.num { "epoch" } th { "window end" } th { "floor" }
                    th { "last heartbeat" }
                } }
                tbody {
                    @for (worker, lease) in &page.workers {
                        tr data-worker=(worker) class=[(lease.holder == Some(me)).then_some("self")] {
                            td.num { (worker) }
                            td {
                                @match lease.holder {
                                    Some(node) if node == me => { "node " (node) " " span.muted { "(this node)" } },
                                    Some(node) => { "node " (node) },
                                    None => span.muted { "free" },
                                }
                            }
                            td.num { (lease.epoch) }
                            td { (instant(page.now_ms, lease.window_end_ms)) }
                            td { (instant(page.now_ms, lease.floor_ms)) }
                            td { (instant(page.now_ms, lease.last_extend_ms)) }
                        }
                    }
                }
            } }
        }
    }
}
