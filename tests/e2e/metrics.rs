//! `/metrics` after real traffic, parsed as the Prometheus text format (as `prometheus-client`
//! writes it: OpenMetrics-style `_total` counters and a closing `# EOF`), with every series
//! `docs/api.md` lists for `GET /metrics`.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::harness::new_tag;
use crate::harness::wait_until;
use crate::harness::ProcessCluster;

const TIMEOUT: Duration = Duration::from_secs(20);

/// One sample line: `name{labels} value`.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Parses the exposition strictly: every line is `# HELP name text`, `# TYPE name type`, a
/// trailing `# EOF`, blank, or a sample `name{label="value",...} value` of a family declared
/// before it (with the suffixes its type allows); answers the samples and each family's type.
fn parse(text: &str) -> Result<(Vec<Sample>, BTreeMap<String, String>), String> {
    let mut types: BTreeMap<String, String> = BTreeMap::new();
    let mut samples = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let at = |what: String| format!("line {}: {what}: {line:?}", i + 1);
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            let words: Vec<&str> = comment.trim_start().splitn(3, ' ').collect();
            match words.as_slice() {
                ["EOF"] if i + 1 == lines.len() => {}
                ["EOF"] => return Err(at("# EOF before the end".into())),
                ["HELP", name, _] => check_name(name).map_err(at)?,
                ["TYPE", name, kind] => {
                    check_name(name).map_err(at)?;
                    if !["counter", "gauge", "histogram", "summary", "untyped", "unknown", "info"].contains(kind) {
                        return Err(at(format!("unknown type {kind}")));
                    }
                    if types.insert(name.to_string(), kind.to_string()).is_some() {
                        return Err(at(format!("second TYPE for {name}")));
                    }
                }
                _ => {} // A plain comment.
            }
            continue;
        }
        let sample = parse_sample(line).map_err(at)?;
        family_of(&sample.name, &types).ok_or_else(|| at("a sample of no declared family".into()))?;
        samples.push(sample);
    }
    Ok((samples, types))
}

fn check_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':');
    if first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
        Ok(())
    } else {
        Err(format!("bad metric name {name:?}"))
    }
}

/// The declared family a sample belongs to: its own name, or its name less a suffix its type has.
fn family_of<'a>(name: &str, types: &'a BTreeMap<String, String>) -> Option<&'a str> {
    if let Some((family, _)) = types.get_key_value(name) {
        return Some(family);
    }
    for (suffix, kinds) in [
        ("_total", &["counter"][..]),
        ("_created", &["counter", "histogram", "summary"][..]),
        ("_bucket", &["histogram"][..]),
        ("_sum", &["histogram", "summary"][..]),
        ("_count", &["histogram", "summary"][..]),
    ] {
        if let Some(base) = name.strip_suffix(suffix) {
            if let Some((family, kind)) = types.get_key_value(base) {
                if kinds.contains(&kind.as_str()) {
                    return Some(family);
                }
            }
        }
    }
    None
}

fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line.find(['{', ' ']).ok_or("no value")?;
    let name = &line[..name_end];
    check_name(name)?;
    let mut labels = BTreeMap::new();
    let mut rest = &line[name_end..];
    if let Some(mut inner) = rest.strip_prefix('{') {
        // `key="value"` pairs separated by commas, up to the closing brace.
        loop {
            if let Some(after) = inner.strip_prefix('}') {
                rest = after;
                break;
            }
            let (key, after) = inner.split_once("=\"").ok_or("a label is not key=\"value\"")?;
            check_name(key).map_err(|e| format!("label name: {e}"))?;
            let mut value = String::new();
            let mut chars = after.char_indices();
            let end = loop {
                match chars.next() {
                    Some((_, '\\')) => match chars.next() {
                        Some((_, 'n')) => value.push('\n'),
                        Some((_, c @ ('\\' | '"'))) => value.push(c),
                        other => return Err(format!("bad escape {other:?} in label {key}")),
                    },
                    Some((i, '"')) => break i,
                    Some((_, c)) => value.push(c),
                    None => return Err(format!("unterminated label {key}")),
                }
            };
            if labels.insert(key.to_string(), value).is_some() {
                return Err(format!("label {key} twice"));
            }
            inner = &after[end + 1..];
            inner = inner.strip_prefix(',').unwrap_or(inner);
        }
    }
    let fields: Vec<&str> = rest.split_whitespace().collect();
    if !rest.starts_with(' ') || fields.is_empty() || fields.len() > 2 {
        return Err("expected ` value [timestamp]` after the name and labels".into());
    }
    if let [_, timestamp] = fields.as_slice() {
        timestamp.parse::<i64>().map_err(|_| format!("bad timestamp {timestamp}"))?;
    }
    let value = match fields[0] {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        v => v.parse::<f64>().map_err(|_| format!("bad value {v}"))?,
    };
    Ok(Sample { name: name.to_string(), labels, value })
}

/// The value of the one sample named `name` whose labels include `labels`.
fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Result<f64, String> {
    let found: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.name == name && labels.iter().all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v)))
        .collect();
    match found.as_slice() {
        [one] => Ok(one.value),
        [] => Err(format!("no sample {name}{labels:?}")),
        many => Err(format!("{} samples {name}{labels:?}", many.len())),
    }
}

/// The parser takes HELP, TYPE, `# EOF`, blank lines and escaped labels, and refuses samples of
/// undeclared families, unquoted labels, missing or non-numeric values, suffixes the type does
/// not allow, anything after `# EOF`, a second TYPE and bad names.
#[test]
fn the_parser_rejects_what_is_not_the_format() {
    let good = "# HELP a_b x y\n# TYPE a_b counter\na_b_total{k=\"v \\\"q\\\"\",z=\"\"} 3\n\n# TYPE g gauge\ng -1.5e3\n# EOF\n";
    let (samples, types) = parse(good).expect("good text");
    assert_eq!(samples.len(), 2);
    assert_eq!(samples[0].labels["k"], "v \"q\"");
    assert_eq!(types["g"], "gauge");
    for bad in [
        "undeclared 1\n",
        "# TYPE a gauge\na{k=v} 1\n",
        "# TYPE a gauge\na{k=\"v\"}\n",
        "# TYPE a gauge\na one\n",
        "# TYPE a gauge\na_total 1\n",
        "# TYPE a gauge\n# EOF\na 1\n",
        "# TYPE a gauge\n# TYPE a counter\n",
        "# TYPE 1a gauge\n",
        "# TYPE a gauge\na{k=\"v\"\n",
        "# TYPE a gauge\na{k=\"v\"}1\n",
    ] {
        assert!(parse(bad).is_err(), "{bad:?}");
    }
}

/// After segment IDs (native and Leaf paths), a create and snowflake IDs on a follower of a
/// 3-node cluster, its `/metrics` parses line by line and holds: requests by route and code, IDs
/// issued for the tag, an ok claim and a claim latency histogram with cumulative buckets that end
/// at `+Inf` = `_count`, the buffer fill, Raft term, leader and indexes, the clock offset to peers
/// and the snowflake years left.
#[tokio::test]
async fn metrics_parse_and_hold_every_series_the_spec_lists() {
    let mut cluster = ProcessCluster::start(3);
    let leader = cluster.wait_leader(TIMEOUT).await;
    let f = [1, 2, 3].into_iter().find(|&id| id != leader).expect("a follower");
    let client = cluster.client(f);
    client.create_tag(&new_tag("order", None, Some(1000), None)).await.expect("create");
    wait_until(TIMEOUT, "IDs of 'order' on the follower", || async {
        client.segment_ids("order", 10).await.map_err(|e| e.to_string())
    })
    .await;
    let (status, _) = cluster.get_text(f, "/api/segment/get/order").await;
    assert_eq!(status.as_u16(), 200);
    wait_until(TIMEOUT, "snowflake IDs on the follower", || async {
        client.snowflake_ids(3).await.map_err(|e| e.to_string())
    })
    .await;

    let url = format!("{}/metrics", cluster.url(f));
    let response = reqwest::get(&url).await.expect("GET /metrics");
    assert_eq!(response.status().as_u16(), 200);
    let content_type = response.headers()[reqwest::header::CONTENT_TYPE].to_str().unwrap_or_default().to_string();
    assert!(content_type.starts_with("application/openmetrics-text"), "{content_type}");
    let text = response.text().await.expect("the body");
    let (samples, types) = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let get =
        |name: &str, labels: &[(&str, &str)]| value(&samples, name, labels).unwrap_or_else(|e| panic!("{e}\n{text}"));

    assert!(get("leafraft_http_requests_total", &[("route", "/v1/segment/{tag}"), ("code", "200")]) >= 1.0);
    assert!(get("leafraft_http_requests_total", &[("route", "/api/segment/get/{tag}"), ("code", "200")]) >= 1.0);
    assert!(get("leafraft_http_requests_total", &[("route", "/v1/tags"), ("code", "201")]) >= 1.0);
    assert!(get("leafraft_segment_ids_issued_total", &[("tag", "order")]) >= 11.0);
    assert!(get("leafraft_segment_claims_total", &[("tag", "order"), ("result", "ok")]) >= 1.0);
    assert_eq!(types["leafraft_segment_claim_duration_seconds"], "histogram");
    let count = get("leafraft_segment_claim_duration_seconds_count", &[("tag", "order")]);
    assert!(count >= 1.0 && get("leafraft_segment_claim_duration_seconds_sum", &[("tag", "order")]) > 0.0);
    let mut buckets: Vec<(f64, f64)> = samples
        .iter()
        .filter(|s| s.name == "leafraft_segment_claim_duration_seconds_bucket" && s.labels["tag"] == "order")
        .map(|s| (if s.labels["le"] == "+Inf" { f64::INFINITY } else { s.labels["le"].parse().expect("le") }, s.value))
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert!(buckets.len() >= 2 && buckets.windows(2).all(|w| w[0].1 <= w[1].1), "cumulative: {buckets:?}");
    assert_eq!(buckets.last().copied(), Some((f64::INFINITY, count)), "+Inf bucket is the count");
    let left = get("leafraft_segment_buffer_ids", &[("tag", "order")]);
    assert!(left > 0.0 && left <= 2000.0, "buffer fill {left}");

    assert!(get("leafraft_raft_term", &[]) >= 1.0);
    assert_eq!(get("leafraft_raft_leader_id", &[]), leader as f64);
    assert_eq!(get("leafraft_raft_is_leader", &[]), 0.0);
    let applied = get("leafraft_raft_applied_index", &[]);
    assert!(applied >= 1.0 && get("leafraft_raft_commit_index", &[]) >= applied);
    assert!(get("leafraft_raft_last_log_index", &[]) >= applied);
    assert_eq!(get("leafraft_raft_voters", &[]), 3.0);

    assert!(get("leafraft_snowflake_clock_offset_ms", &[]).abs() < 1000.0);
    assert!(get("leafraft_snowflake_ids_issued_total", &[]) >= 3.0);
    assert!(get("leafraft_snowflake_worker_id", &[]) >= 0.0);
    let years = get("leafraft_snowflake_time_bits_years_left", &[]);
    assert!(years > 30.0 && years < 70.0, "years left {years}");

    // The scrape itself is counted, under its route.
    let (_, text) = cluster.get_text(f, "/metrics").await;
    let (samples, _) = parse(&text).expect("a second scrape");
    assert!(value(&samples, "leafraft_http_requests_total", &[("route", "/metrics"), ("code", "200")]).is_ok());

    the_series_the_alert_rules_use_are_there(&mut cluster, leader, f).await;
}

/// The series `deploy/prometheus` needs beside the ones above: readiness, the tags closest to
/// their end, request latency per route (a histogram whose `+Inf` bucket is its count), the
/// process's memory and start time, and, on the leader only, each other member's lag.
async fn the_series_the_alert_rules_use_are_there(cluster: &mut ProcessCluster, leader: u64, f: u64) {
    let (_, text) = cluster.get_text(f, "/metrics").await;
    let (samples, types) = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let get =
        |name: &str, labels: &[(&str, &str)]| value(&samples, name, labels).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(get("leafraft_ready", &[]), 1.0);
    assert!(get("leafraft_tags", &[]) >= 1.0);
    let max_id = get("leafraft_tag_max_id", &[("tag", "order")]);
    assert!(max_id > 11.0, "max_id {max_id}");
    assert_eq!(get("leafraft_tag_ids_remaining", &[("tag", "order")]), i64::MAX as f64 - max_id);
    let route = [("route", "/api/segment/get/{tag}")];
    assert_eq!(types["leafraft_http_request_duration_seconds"], "histogram");
    let count = get("leafraft_http_request_duration_seconds_count", &route);
    assert!(count >= 1.0, "{count}");
    let inf = [("route", "/api/segment/get/{tag}"), ("le", "+Inf")];
    assert_eq!(get("leafraft_http_request_duration_seconds_bucket", &inf), count);
    assert!(get("leafraft_http_request_duration_seconds_sum", &route) > 0.0);
    let rss = get("leafraft_process_resident_memory_bytes", &[]);
    assert!(rss > 1e6 && rss < 1e10, "resident memory {rss}");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970").as_secs_f64();
    let started = get("leafraft_process_start_time_seconds", &[]);
    assert!(started <= now + 1.0 && started > now - 600.0, "started {started}, now {now}");
    assert!(
        !samples.iter().any(|s| s.name == "leafraft_raft_replication_lag_entries"),
        "a follower knows no lag\n{text}"
    );

    let (_, text) = cluster.get_text(leader, "/metrics").await;
    let (samples, _) = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let lags: BTreeMap<String, (String, f64)> = samples
        .iter()
        .filter(|s| s.name == "leafraft_raft_replication_lag_entries")
        .map(|s| (s.labels["node_id"].clone(), (s.labels["role"].clone(), s.value)))
        .collect();
    let others: Vec<String> = [1u64, 2, 3].into_iter().filter(|id| *id != leader).map(|id| id.to_string()).collect();
    assert_eq!(lags.keys().cloned().collect::<Vec<_>>(), others, "{text}");
    assert!(lags.values().all(|(role, lag)| role == "voter" && *lag >= 0.0), "{lags:?}");
}

/// The tags each per-tag segment family has series of, by family.
fn tags_by_family(samples: &[Sample]) -> BTreeMap<&'static str, std::collections::BTreeSet<String>> {
    let families = [
        "leafraft_segment_ids_issued",
        "leafraft_segment_waits",
        "leafraft_segment_buffer_ids",
        "leafraft_segment_claims",
        "leafraft_segment_claim_duration_seconds",
    ];
    families
        .into_iter()
        .map(|family| {
            let tags = samples
                .iter()
                .filter(|s| s.name.strip_prefix(family).is_some_and(|rest| !rest.starts_with("_all_tags")))
                .filter_map(|s| s.labels.get("tag").cloned());
            (family, tags.collect())
        })
        .collect()
}

/// A node started with `--metrics-tag-series 3` that serves six tags has series of their own for
/// three tags only in every per-tag family (the busiest since the previous scrape, here the three
/// that served most), while the `_all_tags` totals count all six; once another tag serves the
/// most, it gets series and the least busy of the three (by name among equals) loses them.
#[tokio::test]
async fn metrics_keep_series_for_the_busiest_tags_and_totals_for_all() {
    let mut cluster = ProcessCluster::new().start_members_with(&[1], &["--metrics-tag-series", "3"]);
    cluster.wait_leader(TIMEOUT).await;
    let client = cluster.client(1);
    let mut issued = 0;
    for i in 0..6u64 {
        let tag = format!("m{i}");
        client.create_tag(&new_tag(&tag, None, Some(100), None)).await.expect("create");
        let count = 10 * (i + 1);
        wait_until(TIMEOUT, &format!("{count} IDs of {tag}"), || async {
            client.segment_ids(&tag, count).await.map_err(|e| e.to_string())
        })
        .await;
        issued += count;
    }
    let scrape = |cluster: &mut ProcessCluster| {
        let url = format!("{}/metrics", cluster.url(1));
        async move {
            let text = reqwest::get(&url).await.expect("GET /metrics").text().await.expect("the body");
            let (samples, _) = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
            (samples, text)
        }
    };
    let (samples, text) = scrape(&mut cluster).await;
    let names = |tags: &[&str]| tags.iter().map(|t| t.to_string()).collect::<std::collections::BTreeSet<String>>();
    for (family, tags) in tags_by_family(&samples) {
        assert!(tags.len() <= 3, "{family} has series of {tags:?}\n{text}");
        if !family.contains("claim") {
            assert_eq!(tags, names(&["m3", "m4", "m5"]), "{family}\n{text}");
        }
    }
    let get =
        |name: &str, labels: &[(&str, &str)]| value(&samples, name, labels).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(get("leafraft_segment_ids_issued_all_tags_total", &[]), issued as f64);
    assert_eq!(get("leafraft_segment_buffers", &[]), 6.0);
    assert!(get("leafraft_segment_claims_all_tags_total", &[("result", "ok")]) >= 6.0);
    assert!(get("leafraft_segment_claim_duration_seconds_all_tags_count", &[]) >= 6.0);
    let left = get("leafraft_segment_buffer_ids_all_tags", &[]);
    assert!(left >= 6.0 * 100.0 - issued as f64, "IDs left in all buffers: {left}");

    // Past both segments (step 100): a failed try hands out and counts nothing, so asking again
    // keeps the totals below exact.
    crate::harness::segment_ids_within(&client, "m0", 500, TIMEOUT).await;
    let (samples, text) = scrape(&mut cluster).await;
    for (family, tags) in tags_by_family(&samples) {
        if !family.contains("claim") {
            assert_eq!(tags, names(&["m0", "m3", "m4"]), "{family}\n{text}");
        }
    }
    assert_eq!(value(&samples, "leafraft_segment_ids_issued_all_tags_total", &[]), Ok(issued as f64 + 500.0));
    assert_eq!(value(&samples, "leafraft_segment_ids_issued_total", &[("tag", "m0")]), Ok(510.0));
}
