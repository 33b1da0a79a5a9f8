//! The segment series stay bounded however many tags a node serves, and the totals count every
//! tag: rendered through `Metrics` and read back from the text.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::time::Duration;

use super::*;
use crate::metrics::Metrics;
use crate::metrics::Scrape;

/// The per-tag families and the sample names each writes.
const PER_TAG: [(&str, &[&str]); 5] = [
    ("segment_ids_issued", &["leafraft_segment_ids_issued_total"]),
    ("segment_waits", &["leafraft_segment_waits_total"]),
    ("segment_buffer_ids", &["leafraft_segment_buffer_ids"]),
    ("segment_claims", &["leafraft_segment_claims_total"]),
    (
        "segment_claim_duration_seconds",
        &[
            "leafraft_segment_claim_duration_seconds_bucket",
            "leafraft_segment_claim_duration_seconds_count",
            "leafraft_segment_claim_duration_seconds_sum",
        ],
    ),
];

fn scrape(stats: SegmentStats) -> Scrape {
    Scrape {
        now_ms: 0,
        cluster: crate::cluster::ClusterStatus {
            foreign_clusters: Default::default(),
            node_id: 1,
            role: "leader".into(),
            leader_id: Some(1),
            term: 1,
            voters: vec![1],
            learners: Vec::new(),
            nodes: BTreeMap::new(),
            cluster_id: None,
            incarnations: BTreeMap::new(),
            commit_index: None,
            applied_index: None,
            replication: None,
            version: String::new(),
            cluster_version: String::new(),
            versions: BTreeMap::new(),
        },
        last_log_index: None,
        tags: stats,
        snowflake: crate::metrics::SnowflakeScrape::default(),
        snowflake_years_left: 0.0,
        identity_refusals: Vec::new(),
        foreign_clusters: Default::default(),
        timeseq: Vec::new(),
        claims: Vec::new(),
        node: Default::default(),
    }
}

fn tag(name: &str, ids_issued: u64) -> TagStats {
    TagStats { tag: name.to_string(), ids_issued, waits: ids_issued / 10, ids_left: 7 }
}

/// `(name, tag label or "", value)` of every sample line.
fn samples(text: &str) -> Vec<(String, String, f64)> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (name, labels) = series.split_once('{').unwrap_or((series, ""));
            let tag = labels.split(',').find_map(|pair| pair.strip_prefix("tag=\"")).unwrap_or("");
            Some((name.to_string(), tag.trim_end_matches(['"', '}']).to_string(), value.parse().ok()?))
        })
        .collect()
}

/// Per per-tag family, the tags it has series of.
fn tags_by_family(text: &str) -> BTreeMap<&'static str, BTreeSet<String>> {
    let samples = samples(text);
    PER_TAG
        .iter()
        .map(|(family, names)| {
            let tags = samples.iter().filter(|(name, _, _)| names.contains(&name.as_str()));
            (*family, tags.map(|(_, tag, _)| tag.clone()).collect())
        })
        .collect()
}

fn value(text: &str, name: &str, tag: &str) -> Option<f64> {
    samples(text).into_iter().find(|(n, t, _)| n == name && t == tag).map(|(_, _, v)| v)
}

/// With ten tags and room for three, each per-tag family holds the three busiest (claims of
/// other tags count only in the totals), the totals hold the sum over all ten plus the dropped
/// buffers; when others become the busiest, the first three's series are gone, histograms too.
#[test]
fn more_tags_than_the_limit_keep_series_for_the_busiest_only_and_totals_count_all() {
    let metrics = Metrics::with_tag_series(3);
    let names: Vec<String> = (0..10).map(|i| format!("t{i}")).collect();
    for name in &names {
        metrics.observe_claim(name, Duration::from_millis(3), true);
    }
    let mut stats = SegmentStats {
        tags: names.iter().enumerate().map(|(i, name)| tag(name, 100 * i as u64)).collect(),
        dropped_ids_issued: 5,
        dropped_waits: 1,
        ..SegmentStats::default()
    };
    let text = metrics.render(&scrape(stats.clone()));
    let busiest: BTreeSet<String> = ["t7", "t8", "t9"].map(String::from).into();
    for (family, tags) in tags_by_family(&text) {
        match family {
            // Only tags that had a claim while shown have claim series: t0..t2 got them, and lost
            // them when they left the busiest.
            "segment_claims" | "segment_claim_duration_seconds" => assert!(tags.is_empty(), "{family}: {tags:?}"),
            _ => assert_eq!(tags, busiest, "{family}\n{text}"),
        }
    }
    assert_eq!(value(&text, "leafraft_segment_ids_issued_all_tags_total", ""), Some(4505.0), "{text}");
    assert_eq!(value(&text, "leafraft_segment_waits_all_tags_total", ""), Some(451.0), "{text}");
    assert_eq!(value(&text, "leafraft_segment_buffer_ids_all_tags", ""), Some(70.0));
    assert_eq!(value(&text, "leafraft_segment_buffers", ""), Some(10.0));
    assert_eq!(value(&text, "leafraft_segment_claim_duration_seconds_all_tags_count", ""), Some(10.0));

    // t0..t2 serve the most until the next scrape; a claim of t9 (shown) counts under its tag.
    for (i, tag) in stats.tags.iter_mut().enumerate() {
        tag.ids_issued += if i < 3 { 1000 } else { 1 };
    }
    metrics.observe_claim("t9", Duration::from_millis(3), true);
    metrics.observe_claim("t0", Duration::from_millis(3), false);
    let text = metrics.render(&scrape(stats));
    let now_busiest: BTreeSet<String> = ["t0", "t1", "t2"].map(String::from).into();
    for (family, tags) in tags_by_family(&text) {
        match family {
            "segment_claims" | "segment_claim_duration_seconds" => assert!(tags.is_empty(), "{family}: {tags:?}"),
            _ => assert_eq!(tags, now_busiest, "{family}\n{text}"),
        }
    }
    assert_eq!(value(&text, "leafraft_segment_ids_issued_all_tags_total", ""), Some(4505.0 + 3007.0));
    assert_eq!(value(&text, "leafraft_segment_ids_issued_total", "t0"), Some(1000.0));

    // Now shown, t0's next claims are its own.
    metrics.observe_claim("t0", Duration::from_millis(3), true);
    let text = metrics.render(&scrape(SegmentStats { tags: vec![tag("t0", 1000)], ..SegmentStats::default() }));
    assert_eq!(value(&text, "leafraft_segment_claim_duration_seconds_count", "t0"), Some(1.0), "{text}");
    assert_eq!(tags_by_family(&text)["segment_ids_issued"], ["t0".to_string()].into());
}

/// A tag whose buffer was dropped and created again counts from zero: its counter restarts
/// (Prometheus sees a reset) instead of standing at the old value, and the totals keep rising.
#[test]
fn a_recreated_buffer_restarts_its_tag_counter_and_the_total_keeps_rising() {
    let metrics = Metrics::with_tag_series(3);
    let text = metrics.render(&scrape(SegmentStats { tags: vec![tag("a", 50)], ..SegmentStats::default() }));
    assert_eq!(value(&text, "leafraft_segment_ids_issued_total", "a"), Some(50.0));
    let recreated = SegmentStats { tags: vec![tag("a", 5)], dropped_ids_issued: 50, ..SegmentStats::default() };
    let text = metrics.render(&scrape(recreated));
    assert_eq!(value(&text, "leafraft_segment_ids_issued_total", "a"), Some(5.0), "{text}");
    assert_eq!(value(&text, "leafraft_segment_ids_issued_all_tags_total", ""), Some(55.0));
    // A dropped buffer whose last request still holds it is counted nowhere for a moment: the
    // total stands still rather than going down.
    let text = metrics.render(&scrape(SegmentStats::default()));
    assert_eq!(value(&text, "leafraft_segment_ids_issued_all_tags_total", ""), Some(55.0));
    assert_eq!(tags_by_family(&text)["segment_ids_issued"], BTreeSet::new());
}

/// Without IDs issued since the previous scrape, the tags shown stay shown (no churn of series),
/// and the rest go by name; a limit of 0 shows none.
#[test]
fn ties_keep_the_tags_shown_then_go_by_name() {
    let tags = [tag("c", 9), tag("a", 9), tag("b", 9), tag("d", 9)];
    let previous: HashMap<String, u64> = tags.iter().map(|t| (t.tag.clone(), t.ids_issued)).collect();
    let names = |shown: &[&str], limit| {
        let shown: HashSet<String> = shown.iter().map(|s| s.to_string()).collect();
        let mut chosen: Vec<&str> =
            busiest(&tags, &previous, &shown, limit).into_iter().map(|t| t.tag.as_str()).collect();
        chosen.sort_unstable();
        chosen
    };
    assert_eq!(names(&[], 2), ["a", "b"]);
    assert_eq!(names(&["d"], 2), ["a", "d"]);
    assert_eq!(names(&["d"], 9), ["a", "b", "c", "d"]);
    assert!(names(&["d"], 0).is_empty());
    let mut busy = tags.clone();
    busy[0].ids_issued += 1;
    let chosen = busiest(&busy, &previous, &HashSet::new(), 1);
    assert_eq!(chosen.iter().map(|t| t.tag.as_str()).collect::<Vec<_>>(), ["c"]);
}

/// Issue 17's bar: at 100,000 served tags with names of the longest kind, each claiming between
/// scrapes, `/metrics` stays under 1 MiB, with the default 100 tags per per-tag family (claim
/// histograms included, once the busiest are shown when their claims come).
#[test]
fn a_hundred_thousand_tags_stay_under_a_mebibyte() {
    let metrics = Metrics::new();
    let name = |i: usize| format!("{i:06}-{}", "x".repeat(121));
    let mut stats =
        SegmentStats { tags: (0..100_000).map(|i| tag(&name(i), i as u64 % 977)).collect(), ..SegmentStats::default() };
    let mut text = String::new();
    for round in 0..3 {
        for i in 0..100_000 {
            metrics.observe_claim(&name(i), Duration::from_millis(2), true);
        }
        text = metrics.render(&scrape(stats.clone()));
        assert!(text.len() < 1 << 20, "round {round}: {} bytes", text.len());
        for (family, tags) in tags_by_family(&text) {
            assert!(tags.len() <= DEFAULT_TAG_SERIES, "{family}: {} tags", tags.len());
        }
        println!("round {round}: {} bytes for 100,000 tags", text.len());
        stats.tags.iter_mut().for_each(|tag| tag.ids_issued += 1);
    }
    for (family, tags) in tags_by_family(&text) {
        assert_eq!(tags.len(), DEFAULT_TAG_SERIES, "{family}: the worst case has every series");
    }
}
