//! Unit tests of the status page: what it shows, and that free text stays text.

use std::collections::BTreeMap;

use super::*;
use crate::cluster::ReplicationStatus;
use crate::services::segments::BufferState;
use leafraft_ids::timeseq::SecondRange;
use leafraft_ids::IdRange;

fn cluster(node_id: u64, leader: Option<u64>, replication: bool) -> ClusterStatus {
    let nodes: BTreeMap<u64, String> = [1, 2, 3, 4].iter().map(|id| (*id, format!("127.0.0.1:900{id}"))).collect();
    ClusterStatus {
        foreign_clusters: Default::default(),
        node_id,
        role: if leader == Some(node_id) { "leader" } else { "follower" }.to_string(),
        leader_id: leader,
        term: 7,
        voters: vec![1, 2, 3],
        learners: vec![4],
        nodes,
        cluster_id: None,
        incarnations: BTreeMap::new(),
        commit_index: Some(42),
        applied_index: Some(41),
        replication: replication.then(|| {
            [(1, 42), (3, 40), (4, 12)]
                .iter()
                .map(|(id, matched)| (*id, ReplicationStatus { matched_index: Some(*matched), lag: 42 - matched }))
                .collect()
        }),
        version: "0.2.0".into(),
        cluster_version: "0.1.0".into(),
        versions: [(1, "0.2.0".to_string()), (3, "0.1.0".to_string())].into(),
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
                monotonic: false,
                buffers: Some(BufferState {
                    current: Some(IdRange { start: 1001, end: 2001 }),
                    cursor: Some(1251),
                    next: Some(IdRange { start: 2001, end: 3001 }),
                    loading: false,
                    step: Some(1000),
                    last_claim_at_ms: Some(1_799_999_996_800),
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
                monotonic: false,
                buffers: None,
            },
        ],
        tag_count: 2,
        tag_search: None,
        layout: Some(leafraft_ids::snowflake::Layout::LEAF),
        workers: vec![(
            0,
            leafraft_state::WorkerLease {
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
        timeseq: timeseq::Section {
            namespaces: vec![
                timeseq::NamespaceRow {
                    name: "orders".into(),
                    record: leafraft_state::NamespaceRecord {
                        epoch_s: 1_577_836_800,
                        utc_offset_s: 28_800,
                        shard_bits: 12,
                        seq_bits: 19,
                        description: "<b>orders</b>".into(),
                        created_at_ms: 1_799_000_000_000,
                    },
                    ranges: Some(crate::services::timeseq::NamespaceState {
                        current: Some(SecondRange { second: 1_800_000_000, start: 40, end: 100 }),
                        pending: vec![SecondRange { second: 1_800_000_001, start: 0, end: 200 }],
                        ids_issued: 1234,
                        last_second_ids: 77,
                    }),
                },
                timeseq::NamespaceRow {
                    name: "idle-ns".into(),
                    record: leafraft_state::NamespaceRecord {
                        epoch_s: 1_577_836_800,
                        utc_offset_s: 0,
                        shard_bits: 10,
                        seq_bits: 20,
                        description: String::new(),
                        created_at_ms: 1_799_000_000_000,
                    },
                    ranges: None,
                },
            ],
            counters: vec![("claims", 5), ("exhausted_seconds", 1)],
        },
    }
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
    // Rolling upgrades: the cluster version and each member's release ("unknown": not heard).
    assert!(html.contains("cluster version <b id=\"cluster-version\">0.1.0</b>"), "{html}");
    assert!(html.contains("<td class=\"version\">0.1.0</td></tr>"), "member 3's release: {html}");
    assert!(html.contains("<td class=\"version\">unknown</td></tr>"), "member 4 not heard: {html}");
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
    assert!(html.contains("&lt;script&gt;alert('x')&lt;/script&gt; &amp; &quot;friends&quot;"), "{html}");
    assert!(html.contains("refused: clock &lt;off&gt; by 2000 ms"));
    assert!(!html.contains("src=") && !html.contains("<link") && !html.contains("@import"), "no external assets");
}

#[test]
fn free_text_cannot_open_an_element_or_leave_an_attribute() {
    let mut hostile = page(cluster(2, Some(2), true));
    hostile.tags[0].description = "\"><img src=x onerror=alert(1)>".into();
    hostile.ready = Err("</span><script>x</script>".into());
    hostile.cluster.role = "leader\" onclick=\"x".into();
    let html = render(&hostile);
    assert!(!html.contains("<img") && !html.contains("<script>"), "{html}");
    assert!(html.contains("&quot;&gt;&lt;img src=x onerror=alert(1)&gt;"), "{html}");
    assert!(!html.contains("\" onclick=\""), "an attribute value broke out: {html}");
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

#[test]
fn the_page_shows_time_sequence_namespaces_with_layout_and_this_nodes_ranges() {
    let html = render(&page(cluster(2, Some(2), true)));
    assert!(html.contains("<tr data-namespace=\"orders\">"), "{html}");
    assert!(html.contains("<td>2020-01-01T00:00:00.000Z</td><td>+08:00</td><td>32/12/19</td>"), "{html}");
    assert!(html.contains("&lt;b&gt;orders&lt;/b&gt;"), "escaped description: {html}");
    let current = "<td data-range=\"current\"><span title=\"2027-01-15T08:00:00.000Z\">08:00:00 [40, 100)</span></td>";
    assert!(html.contains(current), "{html}");
    assert!(html.contains("<td class=\"num\">60</td>"), "left in the current range: {html}");
    assert!(html.contains("08:00:01 [0, 200)"), "the prefetched range: {html}");
    assert!(html.contains("<td class=\"num\">1234</td><td class=\"num\">77</td>"), "{html}");
    assert!(html.contains("<tr data-namespace=\"idle-ns\">"), "{html}");
    assert!(html.contains("33/10/20"), "{html}");
    assert!(html.contains("no ranges on this node yet"), "{html}");
    assert!(html.contains("claims <b>5</b>") && html.contains("exhausted seconds <b>1</b>"), "{html}");
    let mut empty = page(cluster(2, Some(2), true));
    empty.timeseq = timeseq::Section::default();
    assert!(render(&empty).contains("No namespaces yet"));
}

/// 100,000 tags: the page shows the busiest [`MAX_TAG_ROWS`] with a summary and a search box, and
/// stays small (it was 23 MB with every row).
#[test]
fn many_tags_show_the_busiest_rows_a_summary_and_a_search_box() {
    let mut many = page(cluster(1, Some(1), true));
    let idle = many.tags[1].clone();
    many.tags = (0..MAX_TAG_ROWS).map(|i| TagRow { tag: format!("biz-{i:06}"), ..idle.clone() }).collect();
    many.tag_count = 100_000;
    let html = render(&many);
    assert!(html.contains("(100000)"), "the count of every tag");
    assert!(html.contains("busiest of 100000 tags"), "the summary");
    assert!(html.contains(r#"name="tag""#), "the search box");
    assert_eq!(html.matches("data-tag=").count(), MAX_TAG_ROWS);
    assert!(html.len() < 256 * 1024, "{} bytes", html.len());

    many.tag_search = Some("<img src=x>".into());
    many.tags.truncate(3);
    let html = render(&many);
    assert!(html.contains("3 tags whose name contains"), "the search's summary");
    assert!(!html.contains("<img") && html.contains("&lt;img src=x&gt;"), "the search is text, not markup");
}

#[test]
fn a_monotonic_tag_says_the_leader_serves_it_instead_of_no_buffers() {
    let monotonic = |node_id: u64, leader: Option<u64>, max_id: u64| {
        let mut page = page(cluster(node_id, leader, false));
        page.tags = vec![TagRow {
            tag: "ticket".into(),
            max_id,
            step: 1000,
            description: String::new(),
            updated_at_ms: 0,
            monotonic: true,
            buffers: None,
        }];
        render(&page)
    };
    let on_leader = monotonic(2, Some(2), 1001);
    assert!(!on_leader.contains("no buffers on this node yet"), "{on_leader}");
    assert!(
        on_leader.contains("data-mode=\"monotonic\">monotonic: served by the leader's sequencer (node 2, this node)"),
        "{on_leader}"
    );
    assert!(on_leader.contains("every ID served so far is below max_id 1001"), "{on_leader}");
    let on_follower = monotonic(3, Some(2), 1001);
    assert!(on_follower.contains("(node 2; this node forwards requests to it)"), "{on_follower}");
    assert!(monotonic(3, None, 1).contains("(no leader known right now)"));
    assert!(monotonic(2, Some(2), 1).contains("no ID served yet"));
}
