//! `GET /`: the status page for people (it replaces Leaf's `/cache` and `/db` pages).
//!
//! Server-rendered HTML with inline CSS and no script, reloading itself every 2 s: this node and
//! its role, the members (with matched index and lag on the leader), the leader, term and log
//! indexes; every tag with `max_id`, step and this node's buffers and rate; the snowflake workers
//! and this node's clock check. [`Page::gather`] reads the state, [`render`] is a pure function
//! of it (unit-tested); every string put into the page goes through [`escape`].

use std::fmt::Write as _;

use axum::extract::State;
use axum::http::header::CACHE_CONTROL;
use axum::response::Html;
use axum::response::IntoResponse;

use crate::api::AppState;
use crate::cluster::ClusterStatus;
use crate::segments::BufferView;
use crate::snowflakes::SnowflakeStatus;

/// One tag as the page shows it.
#[derive(Debug, Clone)]
pub struct TagRow {
    pub tag: String,
    pub max_id: u64,
    pub step: u64,
    pub description: String,
    pub updated_at_ms: u64,
    /// This node's buffers (`None` until it has served the tag).
    pub buffers: Option<BufferView>,
}

/// Everything the page shows, read at one moment.
#[derive(Debug, Clone)]
pub struct Page {
    pub now_ms: u64,
    pub version: &'static str,
    pub cluster: ClusterStatus,
    /// `Err(reason)` while this node is not ready.
    pub ready: Result<(), String>,
    pub tags: Vec<TagRow>,
    pub layout: Option<raft::SnowflakeLayout>,
    pub workers: Vec<(u32, raft::WorkerLease)>,
    pub snowflake: SnowflakeStatus,
    pub years_left: f64,
}

impl Page {
    pub fn gather(state: &AppState) -> Page {
        let (tags, layout, workers) = state.cluster.read(|sm| {
            let tags: Vec<TagRow> = sm
                .tags
                .iter()
                .map(|(tag, record)| TagRow {
                    tag: tag.clone(),
                    max_id: record.max_id,
                    step: record.step,
                    description: record.description.clone(),
                    updated_at_ms: record.updated_at_ms,
                    buffers: None,
                })
                .collect();
            let workers = sm.snowflake.workers.iter().map(|(id, lease)| (*id, lease.clone())).collect();
            (tags, sm.snowflake.layout, workers)
        });
        let tags = tags
            .into_iter()
            .map(|mut row| {
                row.buffers = state.segments.view(&row.tag);
                row
            })
            .collect();
        Page {
            now_ms: crate::clock::now_ms(),
            version: env!("CARGO_PKG_VERSION"),
            cluster: state.cluster.status(),
            ready: state.cluster.readiness(),
            tags,
            layout,
            workers,
            snowflake: state.snowflakes.status(),
            years_left: state.snowflakes.years_left(),
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
                   workers with holder, epoch and window, and this node's clock offset. Reloads itself every 2 s.",
    responses((status = 200, description = "The status page", content_type = "text/html; charset=utf-8", body = String))
)]
pub async fn page(State(state): State<AppState>) -> impl IntoResponse {
    ([(CACHE_CONTROL, "no-store")], Html(render(&Page::gather(&state))))
}

/// Escapes text for HTML element content and quoted attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

const STYLE: &str = "\
:root{--fg:#1f2328;--muted:#656d76;--line:#d0d7de;--bg:#f6f8fa;--accent:#0969da}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,'Noto Sans',sans-serif;color:var(--fg);background:#fff}
header{display:flex;flex-wrap:wrap;gap:.6em 1.2em;align-items:center;padding:12px 20px;background:#24292f;color:#fff}
header h1{font-size:18px;margin:0 .4em 0 0}
header .muted{color:#b7bdc5}
main{padding:8px 20px 24px}
h2{font-size:15px;margin:22px 0 8px;padding-bottom:4px;border-bottom:1px solid var(--line)}
table{border-collapse:collapse;width:100%;font-size:13px;font-variant-numeric:tabular-nums}
th,td{text-align:left;padding:5px 7px;border-bottom:1px solid var(--line);vertical-align:top;white-space:nowrap}
.scroll{overflow-x:auto}
th{background:var(--bg);font-weight:600;font-size:11px;color:var(--muted);text-transform:uppercase;letter-spacing:.03em}
td.num,th.num{text-align:right}
td.wrap{white-space:normal;min-width:110px;max-width:200px;overflow-wrap:anywhere}
tr.self td{background:#fff8c5}
.pill{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600;background:#eaeef2;color:var(--fg)}
.leader{background:#1f883d;color:#fff}.follower{background:#ddf4ff;color:#0550ae}.learner{background:#eaeef2;color:#57606a}
.candidate{background:#fff1e5;color:#bc4c00}.ok{background:#1f883d;color:#fff}.bad{background:#cf222e;color:#fff}
.muted{color:var(--muted)}.err{color:#cf222e;font-weight:600}
.bar{display:inline-block;width:60px;height:8px;background:#eaeef2;border-radius:4px;overflow:hidden;vertical-align:middle;margin-right:6px}
.bar span{display:block;height:100%;background:var(--accent)}
.kv{display:flex;flex-wrap:wrap;gap:4px 22px;margin:6px 0 10px}.kv b{font-weight:600}
a{color:var(--accent);text-decoration:none}a:hover{text-decoration:underline}
code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace}
";

/// Renders the page; every string from the state is escaped.
pub fn render(page: &Page) -> String {
    let c = &page.cluster;
    let mut h = String::with_capacity(8192 + page.tags.len() * 600);
    let role = escape(&c.role);
    let _ = write!(
        h,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"2\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>leafraft · node {} ({role})</title><style>{STYLE}</style></head><body>\n",
        c.node_id
    );
    let _ = write!(
        h,
        "<header><h1>leafraft</h1><span>node <b>{}</b></span>{}<span>leader: <b>{}</b></span>\
         <span>term <b>{}</b></span>{}<span class=\"muted\">v{} · {} · reloads every 2 s</span></header>\n<main>\n",
        c.node_id,
        pill(&c.role),
        c.leader_id.map_or("none known".to_string(), |id| format!("node {id}")),
        c.term,
        match &page.ready {
            Ok(()) => "<span class=\"pill ok\" id=\"ready\">ready</span>".to_string(),
            Err(reason) =>
                format!("<span class=\"pill bad\" id=\"ready\">not ready</span><span>{}</span>", escape(reason)),
        },
        escape(page.version),
        escape(&crate::api::rfc3339(page.now_ms)),
    );
    members(&mut h, page);
    tags(&mut h, page);
    snowflake(&mut h, page);
    h.push_str("</main></body></html>\n");
    h
}

fn pill(role: &str) -> String {
    let class = match role {
        "leader" | "follower" | "learner" | "candidate" => role,
        _ => "",
    };
    format!("<span class=\"pill {class}\">{}</span>", escape(role))
}

fn or_dash(value: Option<u64>) -> String {
    value.map_or("–".to_string(), |v| v.to_string())
}

fn members(h: &mut String, page: &Page) {
    let c = &page.cluster;
    h.push_str("<h2>Cluster</h2>\n<div class=\"kv\">");
    let _ = write!(
        h,
        "<span>leader <b id=\"leader\">{}</b></span><span>term <b>{}</b></span>\
         <span>commit index <b>{}</b></span><span>applied index <b>{}</b></span>\
         <span>voters <b>{}</b></span><span>learners <b>{}</b></span>",
        c.leader_id.map_or("none known".to_string(), |id| format!("node {id}")),
        c.term,
        or_dash(c.commit_index),
        or_dash(c.applied_index),
        c.voters.len(),
        c.learners.len()
    );
    h.push_str(
        "</div>\n<div class=\"scroll\"><table id=\"members\"><thead><tr><th>node</th><th>address</th><th>role</th>\
         <th class=\"num\">matched index</th><th class=\"num\">lag</th></tr></thead><tbody>\n",
    );
    for (id_text, addr) in &c.nodes {
        let id: Option<u64> = id_text.parse().ok();
        let role = if id == Some(c.node_id) {
            c.role.clone()
        } else if id.is_some() && id == c.leader_id {
            "leader".to_string()
        } else if id.is_some_and(|id| c.voters.contains(&id)) {
            if c.leader_id.is_some() { "follower" } else { "voter" }.to_string()
        } else {
            "learner".to_string()
        };
        let replication = c.replication.as_ref().and_then(|r| r.get(id_text));
        let this = id == Some(c.node_id);
        let _ = writeln!(
            h,
            "<tr data-node=\"{id}\" data-role=\"{role_attr}\"{class}><td>{id}{this_label}</td>\
             <td><a href=\"http://{addr}/\">{addr}</a></td><td>{pill}</td>\
             <td class=\"num\">{matched}</td><td class=\"num\">{lag}</td></tr>",
            id = escape(id_text),
            role_attr = escape(&role),
            class = if this { " class=\"self\"" } else { "" },
            this_label = if this { " <span class=\"muted\">(this node)</span>" } else { "" },
            addr = escape(addr),
            pill = pill(&role),
            matched = replication.map_or("–".to_string(), |r| or_dash(r.matched_index)),
            lag = replication.map_or("–".to_string(), |r| r.lag.to_string()),
        );
    }
    h.push_str("</tbody></table></div>\n");
    if c.replication.is_none() {
        let leader_addr = c.leader_id.and_then(|id| c.nodes.get(&id.to_string()));
        match leader_addr {
            Some(addr) => {
                let _ = writeln!(
                    h,
                    "<p class=\"muted\">Matched index and lag are known on the leader: \
                     <a href=\"http://{0}/\">open its page</a>.</p>",
                    escape(addr)
                );
            }
            None => h.push_str("<p class=\"muted\">Matched index and lag are known on the leader.</p>\n"),
        }
    }
}

/// `[start, end)` of a range view.
fn range(range: Option<&crate::segments::RangeView>) -> String {
    range.map_or("–".to_string(), |r| format!("[{}, {})", escape(&r.start), escape(&r.end)))
}

/// How much of the current segment is used, in percent.
fn used_percent(buffers: &BufferView) -> Option<f64> {
    let current = buffers.current.as_ref()?;
    let start: u64 = current.start.parse().ok()?;
    let end: u64 = current.end.parse().ok()?;
    let cursor: u64 = buffers.cursor.as_deref()?.parse().ok()?;
    let len = end.checked_sub(start).filter(|len| *len > 0)?;
    Some((cursor.saturating_sub(start) as f64 / len as f64 * 100.0).clamp(0.0, 100.0))
}

fn tags(h: &mut String, page: &Page) {
    let _ = writeln!(h, "<h2>Tags <span class=\"muted\">({})</span></h2>", page.tags.len());
    if page.tags.is_empty() {
        h.push_str("<p class=\"muted\">No tags yet: <code>leafraft tag create NAME</code>.</p>\n");
        return;
    }
    h.push_str(
        "<div class=\"scroll\"><table id=\"tags\"><thead><tr><th>tag</th><th class=\"num\">max_id</th><th class=\"num\">step</th>\
         <th>description</th><th>current segment</th><th class=\"num\">cursor</th><th>used</th><th>next segment</th>\
         <th class=\"num\">claim step</th><th class=\"num\">claims</th><th class=\"num\">waits</th>\
         <th class=\"num\">IDs issued</th><th class=\"num\">IDs/s</th><th>last claim</th></tr></thead><tbody>\n",
    );
    for row in &page.tags {
        let _ = write!(
            h,
            "<tr data-tag=\"{tag}\"><td><b>{tag}</b></td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"wrap\">{}</td>",
            row.max_id,
            row.step,
            escape(&row.description),
            tag = escape(&row.tag),
        );
        match &row.buffers {
            None => h.push_str(
                "<td colspan=\"10\" class=\"muted\">no buffers on this node yet (loaded on the first request)</td>",
            ),
            Some(b) => {
                let used = used_percent(b);
                let next = match (&b.next, b.loading) {
                    (Some(next), _) => range(Some(next)),
                    (None, true) => "<span class=\"muted\">loading…</span>".to_string(),
                    (None, false) => "–".to_string(),
                };
                let _ = write!(
                    h,
                    "<td data-buffer=\"current\">{}</td><td class=\"num\">{}</td><td>{}</td>\
                     <td data-buffer=\"next\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
                     <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{:.1}</td><td>{}</td>",
                    range(b.current.as_ref()),
                    b.cursor.as_deref().map_or("–".to_string(), escape),
                    used.map_or("–".to_string(), |p| format!(
                        "<span class=\"bar\"><span style=\"width:{p:.0}%\"></span></span>{p:.0} %"
                    )),
                    next,
                    or_dash(b.step),
                    b.claims,
                    b.waits,
                    b.ids_issued,
                    b.ids_per_sec,
                    b.last_claim_at.as_deref().map_or("–".to_string(), |at| rfc3339_instant(page.now_ms, at)),
                );
            }
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody></table></div>\n");
}

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
fn instant(now_ms: u64, at_ms: u64) -> String {
    const DAY_MS: u64 = 24 * 3600 * 1000;
    let exact = escape(&crate::api::rfc3339(at_ms));
    if at_ms == 0 {
        "–".to_string()
    } else if now_ms.abs_diff(at_ms) < DAY_MS {
        format!("<span title=\"{exact}\">{}</span>", relative(now_ms, at_ms))
    } else {
        exact
    }
}

/// An RFC 3339 time from the API as [`instant`] shows it (as it is when it does not parse).
fn rfc3339_instant(now_ms: u64, text: &str) -> String {
    let at_ms = humantime::parse_rfc3339(text)
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .and_then(|d| u64::try_from(d.as_millis()).ok());
    at_ms.map_or_else(|| escape(text), |at_ms| instant(now_ms, at_ms))
}

fn snowflake(h: &mut String, page: &Page) {
    let s = &page.snowflake;
    h.push_str("<h2>Snowflake</h2>\n<div class=\"kv\" id=\"this-snowflake\">");
    let _ = write!(
        h,
        "<span>this node's worker <b>{}</b></span><span>epoch <b>{}</b></span><span>window end <b>{}</b></span>",
        s.worker_id.map_or("none".to_string(), |w| w.to_string()),
        or_dash(s.epoch),
        s.window_end_ms.map_or("–".to_string(), |end| instant(page.now_ms, end)),
    );
    let offset = match s.clock_offset_ms {
        Some(ms) => format!("{ms:+} ms <span class=\"muted\">(median of {} peers)</span>", s.peers_checked),
        None if s.peers_checked == 0 => "<span class=\"muted\">no peer checked</span>".to_string(),
        None => "–".to_string(),
    };
    let _ = write!(h, "<span>clock offset to peers <b>{offset}</b></span>");
    match &s.refused {
        Some(reason) => {
            let _ = write!(
                h,
                "<span>snowflake <span class=\"err\" id=\"refused\">refused: {}</span></span>",
                escape(reason)
            );
        }
        None if s.worker_id.is_some() => h.push_str("<span>snowflake <span class=\"pill ok\">serving</span></span>"),
        None => h.push_str("<span>snowflake <span class=\"muted\">not serving yet</span></span>"),
    }
    let _ = writeln!(h, "<span>IDs issued <b>{}</b></span></div>", s.ids_issued);
    match &page.layout {
        Some(layout) => {
            let _ = writeln!(
                h,
                "<p class=\"muted\">Layout: epoch {} ({} ms), {} time bits, {} worker bits, {} sequence bits; \
                 the time bits last {:.1} more years.</p>",
                escape(&crate::api::rfc3339(layout.epoch_ms)),
                layout.epoch_ms,
                layout.time_bits,
                layout.worker_bits,
                layout.sequence_bits,
                page.years_left
            );
        }
        None => h.push_str(
            "<p class=\"muted\">No layout recorded yet (the first node that serves snowflake records it).</p>\n",
        ),
    }
    if page.workers.is_empty() {
        h.push_str("<p class=\"muted\">No worker has been used yet.</p>\n");
        return;
    }
    h.push_str(
        "<div class=\"scroll\"><table id=\"workers\"><thead><tr><th class=\"num\">worker</th><th>holder</th><th class=\"num\">epoch</th>\
         <th>window end</th><th>floor</th><th>last heartbeat</th></tr></thead><tbody>\n",
    );
    let me = page.cluster.node_id;
    for (worker, lease) in &page.workers {
        let holder = match lease.holder {
            Some(node) if node == me => format!("node {node} <span class=\"muted\">(this node)</span>"),
            Some(node) => format!("node {node}"),
            None => "<span class=\"muted\">free</span>".to_string(),
        };
        let _ = writeln!(
            h,
            "<tr data-worker=\"{worker}\"{}><td class=\"num\">{worker}</td><td>{holder}</td><td class=\"num\">{}</td>\
             <td>{}</td><td>{}</td><td>{}</td></tr>",
            if lease.holder == Some(me) { " class=\"self\"" } else { "" },
            lease.epoch,
            instant(page.now_ms, lease.window_end_ms),
            instant(page.now_ms, lease.floor_ms),
            instant(page.now_ms, lease.last_extend_ms),
        );
    }
    h.push_str("</tbody></table></div>\n");
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::cluster::ReplicationStatus;
    use crate::segments::RangeView;

    fn cluster(node_id: u64, leader: Option<u64>, replication: bool) -> ClusterStatus {
        let nodes: BTreeMap<String, String> =
            [1, 2, 3, 4].iter().map(|id| (id.to_string(), format!("127.0.0.1:900{id}"))).collect();
        ClusterStatus {
            node_id,
            role: if leader == Some(node_id) { "leader" } else { "follower" }.to_string(),
            leader_id: leader,
            term: 7,
            voters: vec![1, 2, 3],
            learners: vec![4],
            nodes,
            commit_index: Some(42),
            applied_index: Some(41),
            replication: replication.then(|| {
                [("1", 42), ("3", 40), ("4", 12)]
                    .iter()
                    .map(|(id, matched)| {
                        (id.to_string(), ReplicationStatus { matched_index: Some(*matched), lag: 42 - matched })
                    })
                    .collect()
            }),
        }
    }

    fn page(cluster: ClusterStatus) -> Page {
        Page {
            now_ms: 1_800_000_000_000,
            version: "0.1.0",
            cluster,
            ready: Ok(()),
            tags: vec![
                TagRow {
                    tag: "order".into(),
                    max_id: 3001,
                    step: 1000,
                    description: "<script>alert('x')</script> & \"friends\"".into(),
                    updated_at_ms: 1_800_000_000_000,
                    buffers: Some(BufferView {
                        current: Some(RangeView { start: "1001".into(), end: "2001".into() }),
                        cursor: Some("1251".into()),
                        next: Some(RangeView { start: "2001".into(), end: "3001".into() }),
                        loading: false,
                        step: Some(1000),
                        last_claim_at: Some("2027-01-15T07:59:56.800Z".into()),
                        ids_issued: 250,
                        claims: 2,
                        waits: 1,
                        ids_per_sec: 12.5,
                    }),
                },
                TagRow {
                    tag: "idle".into(),
                    max_id: 1,
                    step: 10,
                    description: String::new(),
                    updated_at_ms: 0,
                    buffers: None,
                },
            ],
            layout: Some(raft::SnowflakeLayout::LEAF),
            workers: vec![(
                0,
                raft::WorkerLease {
                    holder: Some(2),
                    epoch: 3,
                    window_end_ms: 1_800_000_009_800,
                    floor_ms: 1_799_999_000_000,
                    last_extend_ms: 1_799_999_998_000,
                    released_by: None,
                },
            )],
            snowflake: SnowflakeStatus {
                worker_id: Some(0),
                epoch: Some(3),
                window_end_ms: Some(1_800_000_009_800),
                refused: Some("clock <off> by 2000 ms".into()),
                clock_offset_ms: Some(-3),
                peers_checked: 2,
                ids_issued: 9,
                clock_checks: 40,
            },
            years_left: 52.9,
        }
    }

    #[test]
    fn escape_covers_the_five_html_specials() {
        assert_eq!(escape(r#"<a href="x">'&'</a>"#), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
        assert_eq!(escape("order_v2:a.b-c"), "order_v2:a.b-c");
    }

    #[test]
    fn the_page_shows_leader_members_buffers_and_workers_and_escapes_free_text() {
        let html = render(&page(cluster(2, Some(2), true)));
        assert!(html.contains("<meta http-equiv=\"refresh\" content=\"2\">"));
        assert!(html.contains("<b id=\"leader\">node 2</b>"), "{html}");
        for id in 1..=4 {
            assert!(html.contains(&format!("<tr data-node=\"{id}\"")), "member {id}");
            assert!(html.contains(&format!(">127.0.0.1:900{id}</a>")), "address of {id}");
        }
        assert!(html.contains("<tr data-node=\"2\" data-role=\"leader\" class=\"self\">"), "{html}");
        assert!(html.contains("<tr data-node=\"4\" data-role=\"learner\">"), "{html}");
        // Matched index and lag of node 3, on the leader.
        assert!(html.contains("<td class=\"num\">40</td><td class=\"num\">2</td>"), "{html}");
        assert!(html.contains("<td data-buffer=\"current\">[1001, 2001)</td><td class=\"num\">1251</td>"), "{html}");
        assert!(html.contains("<td data-buffer=\"next\">[2001, 3001)</td>"), "{html}");
        assert!(html.contains("25 %"), "used share of the current segment");
        assert!(html.contains("no buffers on this node yet"));
        assert!(html.contains("<tr data-worker=\"0\" class=\"self\">"), "{html}");
        assert!(html.contains("in 9.8 s"), "window end relative to now");
        assert!(html.contains("<span title=\"2027-01-15T07:59:56.800Z\">3.2 s ago</span>"), "last claim: {html}");
        assert!(html.contains("-3 ms"), "clock offset");
        // Free text is escaped, never markup.
        assert!(!html.contains("<script>"));
        assert!(html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;friends&quot;"));
        assert!(html.contains("refused: clock &lt;off&gt; by 2000 ms"));
        assert!(!html.contains("src=") && !html.contains("<link") && !html.contains("@import"), "no external assets");
    }

    #[test]
    fn a_follower_links_to_the_leader_for_replication() {
        let html = render(&page(cluster(1, Some(2), false)));
        assert!(html.contains("<tr data-node=\"1\" data-role=\"follower\" class=\"self\">"), "{html}");
        assert!(html.contains("<a href=\"http://127.0.0.1:9002/\">open its page</a>"), "{html}");
        let mut not_ready = page(cluster(1, None, false));
        not_ready.ready = Err("no leader known".into());
        let html = render(&not_ready);
        assert!(html.contains("not ready</span><span>no leader known"), "{html}");
        assert!(html.contains("<tr data-node=\"2\" data-role=\"voter\">"), "{html}");
    }
}
