//! Arbitrary strings to every HTTP path, query and body through the real router of a node
//! (`api::router`, auth and fallback included). An answer may be anything but a panic, a hang, or
//! a 5xx other than 503 (and HTTP 500 with Leaf's body on Leaf's two ID paths).

use std::cell::RefCell;
use std::collections::BTreeMap;

use axum::body::Body;
use axum::http::Method;
use axum::http::Request;
use axum::http::StatusCode;
use leafraft_state::typ;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use proptest::test_runner::TestRunner;
use serde::de::DeserializeOwned;

use crate::config;
use crate::corpus;
use crate::mutate::hostile;
use crate::mutate::mutated;
use crate::node::Answer;
use crate::node::FuzzNode;
use crate::node::SECRET;

const CASES: u32 = 2000;

/// Every route, with `{}` where a path parameter goes.
const ROUTES: [&str; 25] = [
    "/healthz",
    "/readyz",
    "/metrics",
    "/",
    "/openapi.json",
    "/api/segment/get/{}",
    "/v1/segment/{}",
    "/v1/segment/{}/ranges",
    "/api/snowflake/get/{}",
    "/decodeSnowflakeId",
    "/v1/snowflake",
    "/v1/snowflake/decode/{}",
    "/v1/workers",
    "/v1/workers/{}/release",
    "/v1/clock",
    "/v1/tags",
    "/v1/tags/{}",
    "/v1/cluster",
    "/v1/cluster/learners",
    "/v1/cluster/voters",
    "/v1/cluster/members/{}",
    "/raft/forward",
    "/raft/append",
    "/raft/vote",
    "/raft/snapshot",
];

const QUERY_KEYS: [&str; 5] = ["count", "consistent", "snowflakeId", "bogus", ""];

/// Valid JSON bodies of the routes that take one, for mutation.
const JSON_BODIES: [&str; 8] = [
    r#"{"tag":"order2","max_id":"5000","step":1000,"description":"d"}"#,
    r#"{"tag":"order3","max_id":9223372036854775807}"#,
    r#"{"step":2000,"description":"orders","max_id":6000}"#,
    r#"{"max_id":"9223372036854775807"}"#,
    r#"{"node_id":1,"addr":"127.0.0.1:1"}"#,
    r#"{"node_id":2}"#,
    r#"{}"#,
    r#"[1,{"a":null},"x",-1.5e300]"#,
];

/// Leaf's ID paths answer HTTP 500 with Leaf's body, as Leaf does.
fn allowed(path: &str, status: StatusCode) -> bool {
    let leaf = path.starts_with("/api/segment/get/") || path.starts_with("/api/snowflake/get/");
    status.as_u16() < 500 || status == StatusCode::SERVICE_UNAVAILABLE || (leaf && status.as_u16() == 500)
}

/// Membership changes may wait for a learner that never comes (60 s): not a hang of the node.
fn may_wait(path: &str) -> bool {
    path.starts_with("/v1/cluster/") || path == "/raft/forward"
}

/// Percent-encodes all but unreserved characters; with `raw`, leaves the text as it is (then it
/// may not even be a valid URI, and the case is skipped: hyper would refuse it first).
fn segment(text: &str, raw: bool) -> String {
    if raw {
        return text.to_string();
    }
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

#[derive(Debug, Clone)]
struct Case {
    /// `Some(true)`: the node's secret; `Some(false)`: a wrong one; `None`: no header.
    secret: Option<bool>,
    method: Method,
    route: usize,
    param: String,
    raw: bool,
    query: Vec<(usize, String)>,
    body: Vec<u8>,
}

fn method() -> impl Strategy<Value = Method> {
    prop::sample::select(vec![Method::GET, Method::POST, Method::PATCH, Method::DELETE, Method::PUT, Method::HEAD])
}

fn param() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[a-z0-9_.:-]{0,130}",
        "-?[0-9]{1,25}",
        Just("order".to_string()),
        Just("9223372036854775807".to_string()),
    ]
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    let json: Vec<Vec<u8>> = JSON_BODIES.iter().map(|b| b.as_bytes().to_vec()).collect();
    prop_oneof![
        Just(Vec::new()),
        mutated(json),
        any::<String>().prop_map(String::into_bytes),
        hostile(corpus::forwarded()),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    let query = prop::collection::vec((0..QUERY_KEYS.len(), param()), 0..3);
    let secret = prop_oneof![4 => Just(Some(true)), 1 => Just(Some(false)), 1 => Just(None)];
    (secret, method(), 0..ROUTES.len(), param(), prop::bool::weighted(0.1), query, body()).prop_map(
        |(secret, method, route, param, raw, query, body)| Case { secret, method, route, param, raw, query, body },
    )
}

fn request(case: &Case) -> Option<(String, String, Request<Body>)> {
    let path = ROUTES[case.route].replace("{}", &segment(&case.param, case.raw));
    let query: Vec<String> =
        case.query.iter().map(|(key, value)| format!("{}={}", QUERY_KEYS[*key], segment(value, case.raw))).collect();
    let uri = if query.is_empty() { path.clone() } else { format!("{path}?{}", query.join("&")) };
    let mut request =
        Request::builder().method(case.method.clone()).uri(&uri).header("content-type", "application/json");
    if let Some(right) = case.secret {
        request = request.header("authorization", format!("Bearer {}", if right { SECRET } else { "wrong" }));
    }
    let label = format!("{} {}", case.method, ROUTES[case.route]);
    Some((label, path, request.body(Body::from(case.body.clone())).ok()?))
}

/// What the node answered, by route template and status (`0`: no answer in time).
type Tally = BTreeMap<String, BTreeMap<u16, u64>>;

/// Sends `request`, checks the answer, and replaces the node when the case left it unable to
/// serve (see `node.rs`).
fn check(
    node: &mut FuzzNode,
    tally: &mut Tally,
    label: &str,
    path: &str,
    request: Request<Body>,
) -> Result<(), TestCaseError> {
    let status = match node.send(request) {
        Answer::Status(status, body) => {
            prop_assert!(allowed(path, status), "{path}: HTTP {status}: {}", String::from_utf8_lossy(&body));
            status.as_u16()
        }
        Answer::TimedOut => {
            prop_assert!(may_wait(path), "{path}: no answer within the timeout");
            0
        }
    };
    *tally.entry(label.to_string()).or_default().entry(status).or_default() += 1;
    node.raft_panicked().map_err(TestCaseError::fail)?;
    if !node.intact() {
        node.replace();
    }
    Ok(())
}

/// Runs the cases of `strategy` against one node; `build` makes each case's route label, path
/// and request (`None`: not a valid HTTP request at all, which hyper would refuse first).
fn run<V: std::fmt::Debug + Clone>(
    strategy: impl Strategy<Value = V>,
    build: impl Fn(&V) -> Option<(String, String, Request<Body>)>,
) {
    // The runner wants an `Fn`; cases run one after another.
    let state = RefCell::new((FuzzNode::start(), Tally::new()));
    // No shrinking: the node keeps state, so the failing case is the one that matters.
    let mut runner = TestRunner::new(proptest::test_runner::Config { max_shrink_iters: 0, ..config(CASES) });
    let result = runner.run(&strategy, |case| match build(&case) {
        Some((label, path, request)) => {
            let (node, tally) = &mut *state.borrow_mut();
            check(node, tally, &label, &path, request)
        }
        None => Ok(()),
    });
    let (node, tally) = state.into_inner();
    println!("answers by route and status (0: none in time), the node replaced {} times:", node.replaced);
    for (label, statuses) in &tally {
        println!("  {label}: {statuses:?}");
    }
    result.unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn fuzz_http_requests() {
    run(case(), request);
}

/// The routes that take a JSON body (and the ones that change the cluster), with mutated valid
/// bodies and arbitrary ones, always with the secret.
#[test]
fn fuzz_http_json_bodies() {
    let writes = prop::sample::select(vec![
        (Method::POST, "/v1/tags"),
        (Method::PATCH, "/v1/tags/order"),
        (Method::POST, "/v1/cluster/learners"),
        (Method::POST, "/v1/cluster/voters"),
        (Method::POST, "/v1/workers/0/release"),
        (Method::DELETE, "/v1/cluster/members/2"),
    ]);
    let json: Vec<Vec<u8>> = JSON_BODIES.iter().map(|b| b.as_bytes().to_vec()).collect();
    let body = prop_oneof![4 => mutated(json), 1 => any::<String>().prop_map(String::into_bytes)];
    run((writes, body), |((method, path), body)| {
        let request = Request::builder()
            .method(method.clone())
            .uri(*path)
            .header("content-type", "application/json")
            .header("authorization", format!("Bearer {SECRET}"))
            .body(Body::from(body.clone()))
            .ok()?;
        Some((format!("{method} {path}"), path.to_string(), request))
    });
}

/// Bincode bodies to every `/raft/*` route, with the secret. `/raft/forward` gets every hostile
/// body: what decodes is a write or membership change that `Cluster` checks like any other. The
/// Raft RPCs get hostile bodies that do not decode: one that decodes is a peer's word, which Raft
/// trusts (it tolerates crashed peers, not lying ones; the secret keeps others out), and a forged
/// leadership can trip openraft's own assertions (see docs/reliability.md).
#[test]
fn fuzz_http_raft_bodies() {
    let (append, vote, snapshot, forward) =
        (corpus::append_requests(), corpus::vote_requests(), corpus::snapshot_requests(), corpus::forwarded());
    let bodies = prop_oneof![
        hostile(append).prop_map(|body| ("/raft/append", undecodable::<typ::AppendEntriesRequest>(body))),
        hostile(vote).prop_map(|body| ("/raft/vote", undecodable::<typ::VoteRequest>(body))),
        hostile(snapshot).prop_map(|body| ("/raft/snapshot", undecodable::<typ::InstallSnapshotRequest>(body))),
        hostile(forward).prop_map(|body| ("/raft/forward", body)),
    ];
    run(bodies, |(path, body)| {
        let request = Request::builder()
            .method(Method::POST)
            .uri(*path)
            .header("authorization", format!("Bearer {SECRET}"))
            .body(Body::from(body.clone()))
            .ok()?;
        Some((format!("POST {path}"), path.to_string(), request))
    });
}

/// `body`, cut at the end until it no longer decodes as `T`.
fn undecodable<T: DeserializeOwned>(mut body: Vec<u8>) -> Vec<u8> {
    while leafraft_state::codec::decode::<T>(&body).is_ok() {
        body.pop();
    }
    body
}
