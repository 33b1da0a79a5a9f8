//! `GET /openapi.json` on a running node: every documented operation is really routed, and
//! answers with a status the document lists for it. (That every route of `src/api.rs` is
//! documented is the unit test in `src/api/openapi.rs`.)

use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

use crate::harness::ProcessCluster;

const TIMEOUT: Duration = Duration::from_secs(20);

/// A concrete path for a documented template: harmless values that change nothing (unknown tag,
/// unknown member and worker).
fn concrete(path: &str) -> String {
    path.replace("{tag}", "no-such-tag").replace("{key}", "any").replace("{id}", "99")
}

/// Asked with no body and no secret, each documented operation of a single node answers (never
/// the router's own 404 "no such route" or 405) with a status its entry documents; writes answer
/// 4xx and change nothing. The document is OpenAPI 3.1, says `/raft/*` is left out, and names
/// the error shape.
#[tokio::test]
async fn every_documented_operation_answers_with_a_documented_status() {
    let mut cluster = ProcessCluster::start(1);
    cluster.wait_leader(TIMEOUT).await;
    cluster.wait_ready(1, TIMEOUT).await;
    let (status, doc) = cluster.request(1, Method::GET, "/openapi.json", None, None).await;
    assert_eq!(status.as_u16(), 200);
    assert_eq!(doc["openapi"], "3.1.0");
    let description = doc["info"]["description"].as_str().expect("a description");
    assert!(description.contains("/raft/*") && description.contains("{\"error\""), "{description}");
    assert!(doc.pointer("/components/schemas/ErrorBody").is_some(), "ErrorBody schema");

    let http = reqwest::Client::new();
    let base = cluster.url(1);
    let mut checked = 0;
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("path item") {
            let method: Method = method.to_uppercase().parse().expect("an HTTP method");
            let url = format!("{base}{}", concrete(path));
            let response = http.request(method.clone(), &url).send().await.unwrap_or_else(|e| panic!("{url}: {e}"));
            let status = response.status().as_u16();
            let body = response.text().await.unwrap_or_default();
            let json: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
            assert!(
                status != 405 && json.pointer("/error/message") != Some(&Value::from("no such route")),
                "{method} {url}: documented but not routed ({status} {body})"
            );
            let documented: Vec<&String> = op["responses"].as_object().expect("responses").keys().collect();
            assert!(
                documented.iter().any(|s| s.as_str() == status.to_string()),
                "{method} {url} answered {status}, documented {documented:?}: {body}"
            );
            if status >= 400 && !path.starts_with("/api/") {
                assert!(json.pointer("/error/code").is_some(), "{method} {url}: error shape: {body}");
            }
            checked += 1;
        }
    }
    assert!(checked >= 23, "only {checked} operations documented");
    let (_, tags) = cluster.request(1, Method::GET, "/v1/tags", None, None).await;
    assert_eq!(tags["tags"], Value::Array(Vec::new()), "the writes changed something");
}
