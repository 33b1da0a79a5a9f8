//! Regression: a request body the node could not read was answered in
//! axum's `text/plain` (413 for a body over the limit, 400 for a body that stalled until the
//! idle timeout closed the connection) instead of the API's error shape.

use std::time::Duration;

use reqwest::Method;
use tokio::io::AsyncReadExt;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::harness::ProcessCluster;

const TIMEOUT: Duration = Duration::from_secs(20);
const IDLE: Duration = Duration::from_secs(1);

#[tokio::test]
async fn regression_unreadable_bodies_answer_the_json_error_shape() {
    let mut cluster = ProcessCluster::new();
    cluster.start_node(1, &["--idle-timeout-ms", &IDLE.as_millis().to_string()]);
    cluster.wait_ready(1, TIMEOUT).await;

    // Over the limit (2 MiB): 413 with INVALID_ARGUMENT, and nothing created.
    let name = "x".repeat(3 * 1024 * 1024);
    let body = format!(r#"{{"tag":"big","description":"{name}"}}"#);
    let url = cluster.url(1);
    let answer = reqwest::Client::new()
        .post(format!("{url}/v1/tags"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("an answer");
    let status = answer.status().as_u16();
    let content_type = answer.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let text = answer.text().await.expect("a body");
    assert_eq!((status, content_type.as_str()), (413, "application/json"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(json["error"]["code"], "INVALID_ARGUMENT", "{json}");
    let (status, _) = cluster.request(1, Method::GET, "/v1/tags/big", None, None).await;
    assert_eq!(status.as_u16(), 404, "the tag of a refused body was created");

    // A body that stalls: the idle timeout ends it, and the answer is in the error shape.
    let mut tcp = TcpStream::connect(cluster.addr(1)).await.expect("connect");
    let head = "POST /v1/tags HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n";
    tcp.write_all(format!("{head}{{\"tag\"").as_bytes()).await.expect("send");
    let mut answer = Vec::new();
    tokio::time::timeout(TIMEOUT, tcp.read_to_end(&mut answer))
        .await
        .expect("the connection closed within the idle timeout")
        .expect("read the answer");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.to_ascii_lowercase().contains("content-type: application/json"), "{answer}");
    assert!(answer.contains(r#"{"error":{"code":"INVALID_ARGUMENT""#), "{answer}");
}
