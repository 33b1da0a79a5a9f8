//! The monotonic handle against a stand-in server on loopback that answers `/ranges` as
//! leafraft's leader does: one range of the count asked for, above the last.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::sync::Mutex;

use axum::extract::Path;
use axum::extract::Query;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::response::Response;
use axum::routing::get;
use axum::Json;
use serde_json::json;

use crate::Client;
use crate::ClientError;
use crate::ErrorCode;

#[derive(Default)]
struct StandIn {
    next: AtomicU64,
    asked: Mutex<Vec<u64>>,
}

#[derive(serde::Deserialize)]
struct Count {
    count: u64,
}

async fn ranges(
    State(stand_in): State<Arc<StandIn>>,
    Path(tag): Path<String>,
    Query(Count { count }): Query<Count>,
) -> Response {
    stand_in.asked.lock().unwrap().push(count);
    let error = |status: StatusCode, code: &str| (status, Json(json!({"error": {"code": code, "message": code}})));
    if tag == "gone" {
        return error(StatusCode::NOT_FOUND, "TAG_NOT_FOUND").into_response();
    }
    if count == 0 || count > 10_000 {
        return error(StatusCode::BAD_REQUEST, "INVALID_ARGUMENT").into_response();
    }
    let start = stand_in.next.fetch_add(count + 7, SeqCst) + 7;
    let range = |start: u64, end: u64| json!({"start": start.to_string(), "end": end.to_string()});
    let ranges = match tag.as_str() {
        // A server that answers two pieces: not what a monotonic range is.
        "split" => vec![range(start, start + 1), range(start + 2, start + count + 1)],
        _ => vec![range(start, start + count)],
    };
    Json(json!({"tag": tag, "ranges": ranges})).into_response()
}

async fn stand_in() -> (Client, Arc<StandIn>) {
    let state = Arc::new(StandIn::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let app = axum::Router::new().route("/v1/segment/{tag}/ranges", get(ranges)).with_state(state.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let client = Client::builder()
        .nodes([addr.to_string()])
        .discover(false)
        .timeout(std::time::Duration::from_secs(5))
        .build()
        .expect("client");
    (client, state)
}

#[tokio::test]
async fn each_call_is_one_request_for_one_range_above_the_last_and_nothing_is_kept() {
    let (client, stand_in) = stand_in().await;
    let ticks = client.monotonic("ticks");
    let first = ticks.next_range(5).await.expect("a range");
    assert_eq!(first.len(), 5);
    let second = ticks.next_range(1).await.expect("a range");
    let ids = ticks.next_ids(3).await.expect("IDs");
    let id = ticks.next_id().await.expect("an ID");
    assert!(second.start >= first.end, "{second:?} after {first:?}");
    assert_eq!(ids.len(), 3);
    assert!(ids[0] >= second.end && ids.windows(2).all(|pair| pair[1] == pair[0] + 1), "{ids:?}");
    assert!(id > ids[2], "{id} after {ids:?}");
    assert_eq!(*stand_in.asked.lock().unwrap(), vec![5, 1, 3, 1], "one request per call, for what the call asked");
    assert_eq!(client.http_requests(), 4);
}

#[tokio::test]
async fn errors_keep_the_server_code_and_anything_but_one_range_is_refused() {
    let (client, _stand_in) = stand_in().await;
    let gone = client.monotonic("gone").next_range(2).await;
    assert_eq!(gone.as_ref().map_err(ClientError::code), Err(Some(ErrorCode::TagNotFound)), "{gone:?}");
    let zero = client.monotonic("ticks").next_ids(0).await;
    assert_eq!(zero.as_ref().map_err(ClientError::code), Err(Some(ErrorCode::InvalidArgument)), "{zero:?}");
    let split = client.monotonic("split").next_range(4).await;
    assert!(matches!(split, Err(ClientError::Transport(_))), "{split:?}");
}
