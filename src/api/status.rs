//! `GET /`: the status page for people (it replaces Leaf's `/cache` and `/db` pages).
//!
//! Server-rendered HTML with inline CSS and no script, reloading itself every 2 s: this node and
//! its role, the members (with matched index and lag on the leader), the leader, term and log
//! indexes; every tag with `max_id`, step and this node's buffers and rate; the snowflake workers
//! and this node's clock check (`status/snowflake.rs`); the time-sequence namespaces and this
//! node's ranges (`status/timeseq.rs`). [`Page::gather`] reads the state, [`render`] is a pure function
//! of it (unit-tested). The page is a maud template: every value is escaped by construction, and
//! markup can only come from the template itself, so no tag description can break the page.

use axum::extract::Query;
use axum::extract::State;
use axum::http::header::CACHE_CONTROL;
use axum::http::header::CONTENT_SECURITY_POLICY;
use axum::http::header::X_CONTENT_TYPE_OPTIONS;
use axum::http::header::X_FRAME_OPTIONS;
use axum::response::Html;
use axum::response::IntoResponse;
use maud::html;
use maud::Markup;
use maud::PreEscaped;
use maud::DOCTYPE;

use crate::api::AppState;
use crate::cluster::ClusterStatus;
use crate::services::snowflakes::SnowflakeStatus;

mod snowflake;
mod tags;
pub mod timeseq;

pub use tags::TagRow;
pub use tags::MAX_TAG_ROWS;

/// Everything the page shows, read at one moment.
#[derive(Debug, Clone)]
pub struct Page {
    pub now_ms: u64,
    pub version: &'static str,
    pub cluster: ClusterStatus,
    /// `Err(reason)` while this node is not ready.
    pub ready: Result<(), String>,
    /// At most [`MAX_TAG_ROWS`]: every tag when there are no more, else the busiest on this node
    /// or the ones `tag_search` finds.
    pub tags: Vec<TagRow>,
    /// How many tags the cluster has.
    pub tag_count: usize,
    /// What the search box asked for (`?tag=`).
    pub tag_search: Option<String>,
    pub layout: Option<leafraft_ids::snowflake::Layout>,
    pub workers: Vec<(u32, leafraft_state::WorkerLease)>,
    pub snowflake: SnowflakeStatus,
    pub years_left: f64,
    pub timeseq: timeseq::Section,
}

impl Page {
    pub fn gather(state: &AppState, tag_search: Option<String>) -> Page {
        let (tags, tag_count) = tags::gather(state, tag_search.as_deref());
        let (layout, workers) = state.cluster.read(|sm| {
            let workers = sm.snowflake.workers.iter().map(|(id, lease)| (*id, lease.clone())).collect();
            (sm.snowflake.layout, workers)
        });
        Page {
            now_ms: crate::clock::now_ms(),
            version: env!("CARGO_PKG_VERSION"),
            cluster: state.cluster.status(),
            ready: state.cluster.readiness(),
            tags,
            tag_count,
            tag_search,
            layout,
            workers,
            snowflake: state.snowflakes.status(),
            years_left: state.snowflakes.years_left(),
            timeseq: timeseq::Section::gather(state),
        }
    }
}

/// The page for people: HTML that reloads itself every 2 s.
#[utoipa::path(
    get,
    path = "/",
    tag = "status",
    summary = "Status page (HTML)",
    description = "A page for people: members with role, address, matched index and lag (on the leader), the \
                   leader, term and log indexes; tags with max_id, step, this node's buffers and IDs/s; snowflake \
                   workers with holder, epoch and window, and this node's clock offset; time-sequence namespaces \
                   with their layout and this node's ranges. Reloads itself every 2 s. With more than 100 tags it \
                   shows this node's busiest, and `?tag=` finds others by name.",
    params(("tag" = Option<String>, Query, description = "Show the tags whose name contains this")),
    responses((status = 200, description = "The status page", content_type = "text/html; charset=utf-8", body = String))
)]
pub async fn page(
    State(state): State<AppState>,
    search: Result<Query<StatusParams>, axum::extract::rejection::QueryRejection>,
) -> impl IntoResponse {
    // A malformed query string shows the page without a search rather than an error page.
    let tag_search = search.ok().and_then(|Query(params)| params.tag).filter(|tag| !tag.is_empty());
    let headers = [
        (CACHE_CONTROL, "no-store"),
        (CONTENT_SECURITY_POLICY, CSP),
        (X_FRAME_OPTIONS, "DENY"),
        (X_CONTENT_TYPE_OPTIONS, "nosniff"),
    ];
    (headers, Html(render(&Page::gather(&state, tag_search))))
}

/// The page loads nothing (its CSS is inline, it has no script), submits its search box to itself
/// and is never framed: a browser refuses whatever else an injected value might ask for.
const CSP: &str =
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// `GET /?tag=...`: the search box.
#[derive(Debug, serde::Deserialize)]
pub struct StatusParams {
    tag: Option<String>,
}

/// Inline CSS, so the page needs no other request.
const STYLE: &str = include_str!("status/style.css");

/// Renders the page.
pub fn render(page: &Page) -> String {
    let c = &page.cluster;
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="refresh" content="2";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "leafraft · node " (c.node_id) " (" (c.role) ")" }
                style { (PreEscaped(STYLE)) }
            }
            body {
                (header(page))
                main {
                    (members(page))
                    (tags::section(page))
                    (snowflake::section(page))
                    (timeseq::section(&page.timeseq))
                }
            }
        }
    }
    .into_string()
}

fn header(page: &Page) -> Markup {
    let c = &page.cluster;
    html! {
        header {
            h1 { "leafraft" }
            span { "node " b { (c.node_id) } }
            (pill(&c.role))
            span { "leader: " b { (leader_name(c.leader_id)) } }
            span { "term " b { (c.term) } }
            @match &page.ready {
                Ok(()) => span.pill.ok #ready { "ready" },
                Err(reason) => { span.pill.bad #ready { "not ready" } span { (reason) } },
            }
            span.muted { "v" (page.version) " · " (crate::api::respond::rfc3339(page.now_ms)) " · reloads every 2 s" }
        }
    }
}

fn leader_name(leader: Option<u64>) -> String {
    leader.map_or("none known".to_string(), |id| format!("node {id}"))
}

fn pill(role: &str) -> Markup {
    let class = match role {
        "leader" | "follower" | "learner" | "candidate" => role,
        _ => "",
    };
    html! { span class={ "pill " (class) } { (role) } }
}

pub(super) fn or_dash(value: Option<impl std::fmt::Display>) -> String {
    value.map_or("–".to_string(), |v| v.to_string())
}

/// The role to show for member `id`, as seen from this node.
fn member_role(c: &ClusterStatus, id: u64) -> String {
    if id == c.node_id {
        c.role.clone()
    } else if Some(id) == c.leader_id {
        "leader".to_string()
    } else if c.voters.contains(&id) {
        if c.leader_id.is_some() { "follower" } else { "voter" }.to_string()
    } else {
        "learner".to_string()
    }
}

fn members(page: &Page) -> Markup {
    let c = &page.cluster;
    html! {
        h2 { "Cluster" }
        div.kv {
            span { "leader " b #leader { (leader_name(c.leader_id)) } }
            span { "term " b { (c.term) } }
            span { "commit index " b { (or_dash(c.commit_index)) } }
            span { "applied index " b { (or_dash(c.applied_index)) } }
            span { "voters " b { (c.voters.len()) } }
            span { "learners " b { (c.learners.len()) } }
            span { "cluster version " b #cluster-version { (c.cluster_version) } }
        }
        div.scroll { table #members {
            thead { tr {
                th { "node" } th { "address" } th { "role" } th.num { "matched index" } th.num { "lag" }
                th { "version" }
            } }
            tbody {
                @for (id, addr) in &c.nodes {
                    (member_row(c, *id, addr))
                }
            }
        } }
        @for (id, other) in &c.foreign_clusters {
            p.bad data-foreign=(id) {
                "Node " (id) "'s address answers as a node of another cluster (" (other) "): it is refused; \
                 was its data dir wiped and a new cluster founded there?"
            }
        }
        @if c.replication.is_none() {
            @match c.leader_id.and_then(|id| c.nodes.get(&id)) {
                Some(addr) => p.muted {
                    "Matched index and lag are known on the leader: "
                    a href={ "http://" (addr) "/" } { "open its page" } "."
                },
                None => p.muted { "Matched index and lag are known on the leader." },
            }
        }
    }
}

fn member_row(c: &ClusterStatus, id: u64, addr: &str) -> Markup {
    let role = member_role(c, id);
    let this = id == c.node_id;
    let replication = c.replication.as_ref().and_then(|r| r.get(&id));
    html! {
        tr data-node=(id) data-role=(role) class=[this.then_some("self")] {
            td { (id) @if this { " " span.muted { "(this node)" } } }
            td { a href={ "http://" (addr) "/" } { (addr) } }
            td { (pill(&role)) }
            td.num { (replication.map_or("–".to_string(), |r| or_dash(r.matched_index))) }
            td.num { (replication.map_or("–".to_string(), |r| r.lag.to_string())) }
            td.version { (c.versions.get(&id).map_or("unknown", String::as_str)) }
        }
    }
}

/// `[start, end)` of a range.
/// `in 9.8 s` / `3.2 s ago` for a Unix-ms instant.
fn relative(now_ms: u64, at_ms: u64) -> String {
    let secs = |ms: u64| {
        if ms >= 100_000 {
            format!("{} s", ms / 1000)
        } else {
            format!("{:.1} s", ms as f64 / 1000.0)
        }
    };
    if at_ms >= now_ms {
        format!("in {}", secs(at_ms - now_ms))
    } else {
        format!("{} ago", secs(now_ms - at_ms))
    }
}

/// A Unix-ms instant: relative when within a day of now, else the time itself; the exact time
/// on hover.
pub(super) fn instant(now_ms: u64, at_ms: u64) -> Markup {
    const DAY_MS: u64 = 24 * 3600 * 1000;
    let exact = crate::api::respond::rfc3339(at_ms);
    html! {
        @if at_ms == 0 {
            "–"
        } @else if now_ms.abs_diff(at_ms) < DAY_MS {
            span title=(exact) { (relative(now_ms, at_ms)) }
        } @else {
            (exact)
        }
    }
}

#[cfg(test)]
mod tests;
