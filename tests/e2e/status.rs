//! The status page `GET /` of a running 3-node cluster: leader, every member, a tag's buffers on
//! the node that served it, the snowflake worker it holds, replication on the leader's page, and
//! free text escaped.

use std::time::Duration;

use crate::harness::new_tag;
use crate::harness::wait_until;
use crate::harness::ProcessCluster;

const TIMEOUT: Duration = Duration::from_secs(20);

/// `GET /` of `url`: the content type and the HTML.
async fn page(url: &str) -> Result<(String, String), String> {
    let response = reqwest::get(format!("{url}/")).await.map_err(|e| format!("GET {url}/: {e}"))?;
    if response.status().as_u16() != 200 {
        return Err(format!("GET {url}/: HTTP {}", response.status()));
    }
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let html = response.text().await.map_err(|e| format!("GET {url}/: {e}"))?;
    Ok((content_type, html))
}

/// The table row that starts with `marker` (`<tr data-...`), up to its `</tr>`, if any.
fn row<'a>(html: &'a str, marker: &str) -> Option<&'a str> {
    let start = html.find(marker)?;
    let end = start + html[start..].find("</tr>")?;
    Some(&html[start..end])
}

/// A follower that served segment and snowflake IDs shows, on its page: the leader, all three
/// members with their addresses and roles, the tag with `max_id`, step, its current segment
/// `[1, 1001)` and cursor, its worker as held by itself, and the tag's HTML-laden description
/// escaped; the leader's page shows a matched index and lag for both followers.
#[tokio::test]
async fn the_status_page_shows_the_leader_every_member_and_a_tags_buffers() {
    let mut cluster = ProcessCluster::start(3);
    let leader = cluster.wait_leader(TIMEOUT).await;
    let follower = [1, 2, 3].into_iter().find(|&id| id != leader).expect("a follower");
    let client = cluster.client(follower);
    let description = "orders <script>alert('x')</script> & more";
    client.create_tag(&new_tag("order", None, Some(1000), Some(description.into()))).await.expect("create the tag");
    wait_until(TIMEOUT, "the follower to serve IDs of 'order'", || async {
        client.segment_ids("order", 5).await.map_err(|e| e.to_string())
    })
    .await;
    let worker: u64 = wait_until(TIMEOUT, "the follower to serve snowflake IDs", || async {
        client.snowflake_ids(1).await.map_err(|e| e.to_string())?;
        let workers = client.workers().await.map_err(|e| e.to_string())?;
        workers.this_node["worker_id"].as_u64().ok_or_else(|| format!("no worker: {workers:?}"))
    })
    .await;

    let url = cluster.url(follower);
    // The follower's lease came back from the leader; its own replica (which the page shows) may
    // apply the entry a moment later.
    let worker_row = format!("<tr data-worker=\"{worker}\"");
    let (content_type, html) = wait_until(TIMEOUT, "the follower's page to show its worker", || async {
        let (content_type, html) = page(&url).await?;
        match html.contains(&worker_row) {
            true => Ok((content_type, html)),
            false => Err(format!("no row of worker {worker} yet")),
        }
    })
    .await;
    assert!(content_type.starts_with("text/html"), "{content_type}");
    assert!(html.contains("<meta http-equiv=\"refresh\" content=\"2\">"), "it reloads itself");
    assert!(!html.contains("<script") && !html.contains("<link") && !html.contains("src="), "no script, no assets");

    assert!(html.contains(&format!("<b id=\"leader\">node {leader}</b>")), "the leader:\n{html}");
    for id in [1, 2, 3] {
        let addr = cluster.addr(id);
        let member = row(&html, &format!("<tr data-node=\"{id}\"")).unwrap_or_else(|| panic!("member {id}:\n{html}"));
        assert!(member.contains(&format!(">{addr}</a>")), "address of {id}: {member}");
        let role = if id == leader { "leader" } else { "follower" };
        assert!(member.contains(&format!("data-role=\"{role}\"")), "role of {id}: {member}");
        assert_eq!(member.contains("(this node)"), id == follower, "{member}");
    }

    let tag = row(&html, "<tr data-tag=\"order\">").unwrap_or_else(|| panic!("the tag row:\n{html}"));
    assert!(tag.contains("<td class=\"num\">1000</td>"), "step: {tag}");
    assert!(tag.contains("<td data-buffer=\"current\">[1, 1001)</td><td class=\"num\">6</td>"), "buffers: {tag}");
    assert!(tag.contains("orders &lt;script&gt;alert('x')&lt;/script&gt; &amp; more"), "escaped: {tag}");

    let held = row(&html, &format!("<tr data-worker=\"{worker}\"")).unwrap_or_else(|| panic!("worker:\n{html}"));
    assert!(held.contains(&format!("node {follower} <span class=\"muted\">(this node)</span>")), "{held}");
    assert!(html.contains("clock offset to peers"), "{html}");

    // Matched index and lag are known on the leader, for both followers.
    let leader_url = cluster.url(leader);
    wait_until(TIMEOUT, "the leader's page to show replication of both followers", || async {
        let (_, html) = page(&leader_url).await?;
        for id in [1, 2, 3].into_iter().filter(|&id| id != leader) {
            let member = row(&html, &format!("<tr data-node=\"{id}\"")).ok_or(format!("no row {id}"))?;
            let cells: Vec<&str> = member.split("<td class=\"num\">").skip(1).collect();
            let numbers = cells.iter().filter(|c| c.split('<').next().is_some_and(|v| v.parse::<u64>().is_ok()));
            if numbers.count() != 2 {
                return Err(format!("no matched index and lag for {id}: {member}"));
            }
        }
        Ok(())
    })
    .await;
}

/// The time-sequence section: a namespace created through the CLI's client library, served by
/// the node, shows its layout, its zone and this node's current range and count; the IDs served
/// are unique.
#[tokio::test]
async fn the_status_page_shows_time_sequence_namespaces_and_this_nodes_ranges() {
    let mut cluster = ProcessCluster::start(1);
    cluster.wait_leader(TIMEOUT).await;
    let client = cluster.client(1);
    let namespace = leafraft_client::NewNamespace {
        namespace: "orders".into(),
        time_zone: Some("+08:00".into()),
        description: Some("<i>orders</i>".into()),
        ..Default::default()
    };
    client.create_namespace(&namespace).await.expect("create the namespace");
    let ids = wait_until(TIMEOUT, "the node to serve time-sequence IDs", || async {
        client.timeseq_ids("orders", 9, 40).await.map_err(|e| e.to_string())
    })
    .await;
    let unique: std::collections::BTreeSet<u64> = ids.iter().copied().collect();
    assert_eq!(unique.len(), 40, "{ids:?}");

    let url = cluster.url(1);
    let (_, html) = page(&url).await.expect("the page");
    let ns = row(&html, "<tr data-namespace=\"orders\">").unwrap_or_else(|| panic!("the namespace row:\n{html}"));
    assert!(ns.contains("<td>2020-01-01T00:00:00.000Z</td><td>+08:00</td><td>32/12/19</td>"), "layout: {ns}");
    assert!(ns.contains("&lt;i&gt;orders&lt;/i&gt;"), "escaped: {ns}");
    assert!(ns.contains("<td class=\"num\">40</td>"), "IDs issued: {ns}");
    assert!(ns.contains("data-range=\"current\"") && ns.contains("data-range=\"pending\""), "ranges: {ns}");
    assert!(html.contains("id=\"timeseq-counters\""), "counters:\n{html}");
}
