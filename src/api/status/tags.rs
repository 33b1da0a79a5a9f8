//! The tags section of the status page. With many tags (100,000 made a 23 MB page) it
//! shows at most [`MAX_TAG_ROWS`]: the busiest on this node, or the ones the search box finds.

use maud::html;
use maud::Markup;

use super::instant;
use super::or_dash;
use super::Page;
use crate::api::AppState;
use crate::services::segments::BufferState;
use leafraft_ids::IdRange;

/// The most tag rows the page shows.
pub const MAX_TAG_ROWS: usize = 100;

/// One tag as the page shows it.
#[derive(Debug, Clone)]
pub struct TagRow {
    pub tag: String,
    pub max_id: u64,
    pub step: u64,
    pub description: String,
    pub updated_at_ms: u64,
    /// Served only by the leader's sequencer (`leafraft_state::TagMode::Monotonic`): no node keeps buffers
    /// of it, and `max_id` bounds every ID the leaders have served.
    pub monotonic: bool,
    /// This node's buffers (`None` until it has served the tag).
    pub buffers: Option<BufferState>,
}

/// The rows to show and how many tags there are: every tag when there are at most
/// [`MAX_TAG_ROWS`]; with a search, the first that many whose name contains it; else this
/// node's busiest (by IDs/s, then IDs issued), then other tags by name to fill the table.
pub fn gather(state: &AppState, search: Option<&str>) -> (Vec<TagRow>, usize) {
    let mut busiest: Vec<(String, BufferState)> = state
        .segments
        .served_tags()
        .into_iter()
        .filter_map(|tag| Some((tag.clone(), state.segments.view(&tag)?)))
        .collect();
    busiest.sort_by(|a, b| b.1.ids_per_sec.total_cmp(&a.1.ids_per_sec).then(b.1.ids_issued.cmp(&a.1.ids_issued)));
    state.cluster.read(|sm| {
        let row = |tag: &str| {
            sm.tags.get(tag).map(|record| TagRow {
                tag: tag.to_string(),
                max_id: record.max_id,
                step: record.step,
                description: record.description.clone(),
                updated_at_ms: record.updated_at_ms,
                monotonic: record.mode == leafraft_state::TagMode::Monotonic,
                buffers: None,
            })
        };
        let names: Vec<&str> = match search {
            Some(search) => {
                sm.tags.keys().filter(|tag| tag.contains(search)).take(MAX_TAG_ROWS).map(String::as_str).collect()
            }
            None if sm.tags.len() <= MAX_TAG_ROWS => sm.tags.keys().map(String::as_str).collect(),
            None => {
                let mut names: Vec<&str> = busiest.iter().take(MAX_TAG_ROWS).map(|(tag, _)| tag.as_str()).collect();
                let chosen: std::collections::HashSet<&str> = names.iter().copied().collect();
                let fill = MAX_TAG_ROWS.saturating_sub(names.len());
                names.extend(sm.tags.keys().map(String::as_str).filter(|tag| !chosen.contains(tag)).take(fill));
                names
            }
        };
        let views: std::collections::HashMap<&str, &BufferState> =
            busiest.iter().map(|(tag, view)| (tag.as_str(), view)).collect();
        let rows = names
            .into_iter()
            .filter_map(|tag| {
                let mut row = row(tag)?;
                row.buffers = views.get(tag).map(|view| (*view).clone());
                Some(row)
            })
            .collect();
        (rows, sm.tags.len())
    })
}

fn range(range: Option<IdRange>) -> String {
    range.map_or("–".to_string(), |r| format!("[{}, {})", r.start, r.end))
}

/// The tags table: every tag up to [`MAX_TAG_ROWS`], else the busiest on this node, with a search
/// box over all of them (100,000 tags made a 23 MB page).
pub fn section(page: &Page) -> Markup {
    let shown = page.tags.len();
    html! {
        h2 { "Tags " span.muted { "(" (page.tag_count) ")" } }
        @if page.tag_count > MAX_TAG_ROWS || page.tag_search.is_some() {
            form.search method="get" action="/" {
                input type="search" name="tag" placeholder="find a tag" value=(page.tag_search.as_deref().unwrap_or(""));
                " "
                button type="submit" { "find" }
                @if page.tag_search.is_some() { " " a href="/" { "clear" } }
            }
            p.muted #tag-summary {
                @match &page.tag_search {
                    Some(search) => { (shown) " tags whose name contains “" (search) "”" @if shown == MAX_TAG_ROWS { " (the first " (MAX_TAG_ROWS) ")" } "." },
                    None => { "The " (shown) " busiest of " (page.tag_count) " tags on this node (by IDs/s, then IDs issued); find the others by name." },
                }
            }
        }
        @if page.tags.is_empty() {
            @if page.tag_count == 0 {
                p.muted { "No tags yet: " code { "leafraft tag create NAME" } "." }
            } @else {
                p.muted { "No tag matches." }
            }
        } @else {
            div.scroll { table #tags {
                thead { tr {
                    th { "tag" } th.num { "max_id" } th.num { "step" } th { "description" }
                    th { "current segment" } th.num { "cursor" } th { "used" } th { "next segment" }
                    th.num { "claim step" } th.num { "claims" } th.num { "waits" } th.num { "IDs issued" }
                    th.num { "IDs/s" } th { "last claim" }
                } }
                tbody { @for row in &page.tags { (tag_row(page, row)) } }
            } }
        }
    }
}

fn tag_row(page: &Page, row: &TagRow) -> Markup {
    html! {
        tr data-tag=(row.tag) {
            td { b { (row.tag) } }
            td.num { (row.max_id) }
            td.num { (row.step) }
            td.wrap { (row.description) }
            @if row.monotonic {
                td.muted colspan="10" data-mode="monotonic" { (monotonic(page, row)) }
            } @else {
                @match &row.buffers {
                    None => td.muted colspan="10" { "no buffers on this node yet (loaded on the first request)" },
                    Some(b) => (buffer_cells(page.now_ms, b)),
                }
            }
        }
    }
}

/// What is true of a monotonic tag on any node: no node buffers it; the leader's sequencer serves
/// it in real-time order from ranges it claims, so every ID served so far lies below `max_id`.
fn monotonic(page: &Page, row: &TagRow) -> String {
    let c = &page.cluster;
    let server = match c.leader_id {
        Some(leader) if leader == c.node_id => format!("node {leader}, this node"),
        Some(leader) => format!("node {leader}; this node forwards requests to it"),
        None => "no leader known right now".to_string(),
    };
    let served = if row.max_id > 1 {
        format!("every ID served so far is below max_id {}", row.max_id)
    } else {
        "no ID served yet".to_string()
    };
    format!("monotonic: served by the leader's sequencer ({server}) in real-time order, not from buffers; {served}")
}

fn buffer_cells(now_ms: u64, b: &BufferState) -> Markup {
    html! {
        td data-buffer="current" { (range(b.current)) }
        td.num { (or_dash(b.cursor)) }
        td {
            @match b.used_percent() {
                Some(p) => { span.bar { span style={ "width:" (format!("{p:.0}")) "%" } {} } (format!("{p:.0} %")) },
                None => "–",
            }
        }
        td data-buffer="next" {
            @match (b.next, b.loading) {
                (Some(next), _) => (range(Some(next))),
                (None, true) => span.muted { "loading…" },
                (None, false) => "–",
            }
        }
        td.num { (or_dash(b.step)) }
        td.num { (b.claims) }
        td.num { (b.waits) }
        td.num { (b.ids_issued) }
        td.num { (format!("{:.1}", b.ids_per_sec)) }
        td { (b.last_claim_at_ms.map_or(html! { "–" }, |at| instant(now_ms, at))) }
    }
}
