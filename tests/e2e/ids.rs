//! Fetching segment IDs over HTTP and judging the answers, for the segment tests.
//!
//! [`fetch`] asks one of the three segment endpoints and classifies what came back: IDs (checked
//! for the shape `docs/api.md` promises: decimal strings, strictly increasing, half-open ranges
//! totalling `count`, within `1..=2^63-2`), an error in the shape the spec documents, no HTTP
//! answer at all, or anything else ([`Answer::Malformed`], which no test accepts). [`IdSet`] keeps
//! IDs as ranges and finds duplicates; [`metric`] reads one series from `/metrics`.

use std::collections::BTreeMap;
use std::time::Duration;
use std::time::Instant;

use serde_json::Value;

/// The largest ID there is: `max_id` stops at `2^63 - 1`, IDs are below it.
pub const LARGEST_ID: u64 = i64::MAX as u64 - 1;

/// One of the segment endpoints of `docs/api.md`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `GET /api/segment/get/{tag}`: one ID as text.
    Leaf,
    /// `GET /v1/segment/{tag}?count=N`: a JSON list of IDs.
    Ids(u64),
    /// `GET /v1/segment/{tag}/ranges?count=N`: JSON half-open ranges.
    Ranges(u64),
}

impl Endpoint {
    pub fn path(self, tag: &str) -> String {
        match self {
            Endpoint::Leaf => format!("/api/segment/get/{tag}"),
            Endpoint::Ids(count) => format!("/v1/segment/{tag}?count={count}"),
            Endpoint::Ranges(count) => format!("/v1/segment/{tag}/ranges?count={count}"),
        }
    }

    pub fn is_leaf(self) -> bool {
        self == Endpoint::Leaf
    }
}

/// What one request to a segment endpoint gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Success: the IDs as increasing, non-overlapping half-open ranges.
    Ids(Vec<(u64, u64)>),
    /// An error in a documented shape: the native `{"error":{"code":...}}` (`code` is its code) or
    /// Leaf's `Result{id=-N, status=EXCEPTION}` with HTTP 500 (`code` is that body).
    Error { status: u16, code: String },
    /// No HTTP answer: refused or reset connection, or the client's timeout.
    Transport(String),
    /// An answer the spec does not allow on this path (a bare 5xx, a wrong shape, IDs out of order).
    Malformed(String),
}

impl Answer {
    /// How many IDs a successful answer holds (0 otherwise).
    pub fn count(&self) -> u64 {
        match self {
            Answer::Ids(ranges) => ranges.iter().map(|(start, end)| end - start).sum(),
            _ => 0,
        }
    }

    /// `(status, code)` of an error answer.
    pub fn error(&self) -> Option<(u16, &str)> {
        match self {
            Answer::Error { status, code } => Some((*status, code.as_str())),
            _ => None,
        }
    }
}

/// Leaf's error body for segment code `id` (−1 not ready, −2 unknown tag, −3 both segments not
/// ready, −5 exhausted).
pub fn leaf_error(id: i32) -> String {
    format!("Result{{id={id}, status=EXCEPTION}}")
}

/// Asks `endpoint` of `base` (`http://host:port`) for IDs of `tag` and judges the answer.
pub async fn fetch(http: &reqwest::Client, base: &str, tag: &str, endpoint: Endpoint) -> Answer {
    let url = format!("{base}{}", endpoint.path(tag));
    let response = match http.get(&url).send().await {
        Ok(response) => response,
        Err(e) => return Answer::Transport(error_chain(&e)),
    };
    let status = response.status().as_u16();
    match response.text().await {
        Ok(body) => judge(tag, endpoint, status, &body),
        Err(e) => Answer::Transport(error_chain(&e)),
    }
}

/// Like [`fetch`], but retries `SEGMENTS_NOT_READY` (a claim that took longer than the node's
/// bounded wait) until 10 s have passed, and panics on any other failure.
pub async fn fetch_ok(http: &reqwest::Client, base: &str, tag: &str, endpoint: Endpoint) -> Vec<(u64, u64)> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match fetch(http, base, tag, endpoint).await {
            Answer::Ids(ranges) => return ranges,
            answer if is_segments_not_ready(endpoint, &answer) && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(25)).await
            }
            answer => panic!("GET {base}{}: {answer:?}", endpoint.path(tag)),
        }
    }
}

/// Whether `answer` is "both segments not ready" in the shape of `endpoint`.
pub fn is_segments_not_ready(endpoint: Endpoint, answer: &Answer) -> bool {
    match answer.error() {
        Some((500, code)) if endpoint.is_leaf() => code == leaf_error(-3),
        Some((503, code)) => !endpoint.is_leaf() && code == "SEGMENTS_NOT_READY",
        _ => false,
    }
}

fn judge(tag: &str, endpoint: Endpoint, status: u16, body: &str) -> Answer {
    let malformed = |why: &str| Answer::Malformed(format!("{why}: HTTP {status}: {}", clip(body)));
    if endpoint.is_leaf() {
        return match status {
            200 => match body.trim().parse::<u64>() {
                Ok(id) if (1..=LARGEST_ID).contains(&id) => Answer::Ids(vec![(id, id + 1)]),
                _ => malformed("not an ID in 1..=2^63-2"),
            },
            500 if is_leaf_error(body) => Answer::Error { status, code: body.to_string() },
            _ => malformed("not an answer of Leaf's segment path"),
        };
    }
    let Ok(json) = serde_json::from_str::<Value>(body) else {
        return malformed("not JSON");
    };
    if status != 200 {
        return match json.pointer("/error/code").and_then(Value::as_str) {
            Some(code) if json.pointer("/error/message").is_some_and(Value::is_string) => {
                Answer::Error { status, code: code.to_string() }
            }
            _ => malformed("an error without {\"error\":{\"code\",\"message\"}}"),
        };
    }
    if json["tag"] != tag {
        return malformed("wrong or missing \"tag\"");
    }
    let ranges = match endpoint {
        Endpoint::Leaf => unreachable!("handled above"),
        Endpoint::Ids(_) => {
            let Some(ids) = json["ids"].as_array() else {
                return malformed("no \"ids\" list");
            };
            let mut ranges: Vec<(u64, u64)> = Vec::new();
            for id in ids {
                let Some(id) = decimal(id) else {
                    return malformed("an ID that is not a decimal string in 1..=2^63-2");
                };
                match ranges.last_mut() {
                    Some((_, end)) if id == *end => *end += 1,
                    Some((_, end)) if id < *end => return malformed("IDs not strictly increasing"),
                    _ => ranges.push((id, id + 1)),
                }
            }
            ranges
        }
        Endpoint::Ranges(_) => {
            let Some(list) = json["ranges"].as_array() else {
                return malformed("no \"ranges\" list");
            };
            let mut ranges: Vec<(u64, u64)> = Vec::new();
            for range in list {
                let (Some(start), Some(end)) = (decimal(&range["start"]), decimal_end(&range["end"])) else {
                    return malformed("a range whose start or end is not a decimal string in range");
                };
                if start >= end {
                    return malformed("an empty or reversed range");
                }
                if ranges.last().is_some_and(|&(_, previous_end)| start < previous_end) {
                    return malformed("ranges overlap or go back");
                }
                ranges.push((start, end));
            }
            ranges
        }
    };
    let count = match endpoint {
        Endpoint::Ids(count) | Endpoint::Ranges(count) => count,
        Endpoint::Leaf => 1,
    };
    let total: u64 = ranges.iter().map(|(start, end)| end - start).sum();
    if total != count {
        return malformed(&format!("{total} IDs for count={count}"));
    }
    Answer::Ids(ranges)
}

/// `Result{id=-N, status=EXCEPTION}` for some N.
fn is_leaf_error(body: &str) -> bool {
    body.strip_prefix("Result{id=-")
        .and_then(|rest| rest.strip_suffix(", status=EXCEPTION}"))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// An ID in JSON: a decimal string in `1..=LARGEST_ID`.
fn decimal(value: &Value) -> Option<u64> {
    value.as_str()?.parse::<u64>().ok().filter(|id| (1..=LARGEST_ID).contains(id))
}

/// The exclusive end of a range: a decimal string in `2..=2^63-1`.
fn decimal_end(value: &Value) -> Option<u64> {
    value.as_str()?.parse::<u64>().ok().filter(|end| (2..=LARGEST_ID + 1).contains(end))
}

pub fn clip(text: &str) -> String {
    text.chars().take(300).collect()
}

/// A reqwest error with its sources, on one line.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// `(start, end)` of a range as `/v1/tags/{tag}` shows it in `buffers` (`current`, `next`).
pub fn range_of(value: &Value) -> Option<(u64, u64)> {
    Some((value["start"].as_str()?.parse().ok()?, value["end"].as_str()?.parse().ok()?))
}

/// IDs as half-open ranges, duplicates allowed in, found by [`duplicates`](IdSet::duplicates).
#[derive(Debug, Default, Clone)]
pub struct IdSet {
    ranges: Vec<(u64, u64)>,
}

impl IdSet {
    pub fn add(&mut self, ranges: &[(u64, u64)]) {
        self.ranges.extend_from_slice(ranges);
    }

    pub fn add_id(&mut self, id: u64) {
        self.ranges.push((id, id + 1));
    }

    /// How many IDs were added, duplicates counted as often as they were added.
    pub fn len(&self) -> u64 {
        self.ranges.iter().map(|(start, end)| end - start).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The largest ID added.
    pub fn max(&self) -> Option<u64> {
        self.ranges.iter().map(|&(_, end)| end - 1).max()
    }

    /// Every ID that was added more than once, as ranges (an ID added three times shows twice).
    pub fn duplicates(&self) -> Vec<(u64, u64)> {
        let mut sorted = self.ranges.clone();
        sorted.sort_unstable();
        let mut duplicates = Vec::new();
        let mut covered_to = 0;
        for (start, end) in sorted {
            if start < covered_to {
                duplicates.push((start, end.min(covered_to)));
            }
            covered_to = covered_to.max(end);
        }
        duplicates
    }

    /// Every ID, ascending (for small sets).
    pub fn ids(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self.ranges.iter().flat_map(|&(start, end)| start..end).collect();
        ids.sort_unstable();
        ids
    }

    /// Whether every ID lies in one of `allowed` (half-open ranges).
    pub fn within(&self, allowed: &[(u64, u64)]) -> bool {
        self.ranges.iter().all(|&(start, end)| allowed.iter().any(|&(from, to)| from <= start && end <= to))
    }
}

/// The value of the series `name` whose labels include `labels`, from Prometheus text; `None`
/// when no line matches.
pub fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines().filter(|line| !line.starts_with('#')).find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        let (series_name, series_labels) = match series.split_once('{') {
            Some((series_name, rest)) => (series_name, parse_labels(rest.strip_suffix('}')?)),
            None => (series, BTreeMap::new()),
        };
        let wanted = series_name == name
            && labels.iter().all(|(key, value)| series_labels.get(*key).map(String::as_str) == Some(*value));
        wanted.then(|| value.parse().ok()).flatten()
    })
}

fn parse_labels(text: &str) -> BTreeMap<String, String> {
    text.split(',')
        .filter_map(|pair| {
            let (key, value) = pair.split_once('=')?;
            Some((key.trim().to_string(), value.trim().trim_matches('"').to_string()))
        })
        .collect()
}
