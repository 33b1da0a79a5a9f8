//! A web handler that gives every new order an ID from a local range.
//!
//! ```text
//! leafraft tag create order --server http://127.0.0.1:8081 --secret s3cret
//! cargo run -p leafraft-client --example order_ids -- 127.0.0.1:8081,127.0.0.1:8082,127.0.0.1:8083
//! curl -X POST http://127.0.0.1:3000/orders
//! ```
//!
//! `POST /orders` answers `{"order_id":"..."}`. The handler never waits on the cluster while the
//! local range lasts; the next range is fetched in the background. If no node answers within the
//! client's timeout, the handler answers 503 with the client's error, and the server's error code
//! (e.g. `TAG_NOT_FOUND`) when there is one.

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::Json;
use axum::Router;
use leafraft_client::Client;
use leafraft_client::ClientError;
use leafraft_client::Segment;
use serde_json::json;
use serde_json::Value;

async fn new_order(State(orders): State<Segment>) -> Result<Json<Value>, (StatusCode, Json<Value>)> {
    match orders.next_id().await {
        // Decimal strings: a JSON number loses precision above 2^53 in JavaScript.
        Ok(id) => Ok(Json(json!({ "order_id": id.to_string() }))),
        Err(error) => Err(unavailable(&error)),
    }
}

fn unavailable(error: &ClientError) -> (StatusCode, Json<Value>) {
    let code = error.code().map(|code| code.to_string()).unwrap_or_else(|| "ID_SERVICE_UNAVAILABLE".into());
    (StatusCode::SERVICE_UNAVAILABLE, Json(json!({ "error": { "code": code, "message": error.to_string() } })))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let nodes = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:8080".to_string());
    let client = Client::builder().nodes(nodes.split(',')).timeout(Duration::from_secs(3)).build()?;
    let orders = client.segment("order");
    // Fetch the first range now, so the first order does not wait for it.
    orders.preload();

    let app = Router::new().route("/orders", post(new_order)).with_state(orders);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    println!("taking orders on http://{}/orders", listener.local_addr()?);
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    // The IDs left in the local range are dropped: a gap, never handed out by anyone.
    client.close();
    Ok(())
}
