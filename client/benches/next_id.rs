//! `cargo bench -p leafraft-client --bench next_id`: `Segment::next_id()` from a warm client
//! against a bare `AtomicU64::fetch_add`, measured in the same run, reported as a ratio (bar:
//! within 3x).
//!
//! The client talks to a stand-in server on loopback that answers `/ranges` as leafraft does
//! (consecutive ranges, at most 10,000 IDs per request). "Warm" means the buffer holds IDs and
//! the next range is already in: the timed stretches stay inside the current range (what crosses
//! into the next one, and so starts a refill, is not timed). A second figure, `sustained`, times
//! everything, the refills' HTTP included: on a 2-core machine that CPU (client and stand-in
//! server, about 10,000 IDs' worth per request) competes with the taker, so it is reported as the
//! IDs/s one thread sustains rather than compared with the bar.

use std::hint::black_box;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use axum::extract::Path;
use axum::extract::Query;
use axum::extract::State;
use axum::routing::get;
use axum::Json;
use axum::Router;

const N: u64 = 20_000_000;
const ROUNDS: usize = 9;
const CHUNK: u64 = 5_000;

#[derive(serde::Deserialize)]
struct Count {
    count: u64,
}

async fn ranges(
    State(next): State<Arc<AtomicU64>>,
    Path(tag): Path<String>,
    Query(Count { count }): Query<Count>,
) -> Json<serde_json::Value> {
    let count = count.clamp(1, 10_000);
    let start = next.fetch_add(count, Ordering::Relaxed);
    let end = start + count;
    Json(serde_json::json!({"tag": tag, "ranges": [{"start": start.to_string(), "end": end.to_string()}]}))
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let addr = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let app = Router::new().route("/v1/segment/{tag}/ranges", get(ranges)).with_state(Arc::new(AtomicU64::new(1)));
        tokio::spawn(async move { axum::serve(listener, app).await });
        addr
    });
    let client = leafraft_client::Client::builder()
        .nodes([addr.to_string()])
        .discover(false)
        .range_size(10_000, 10_000, Duration::from_secs(60))
        .runtime(runtime.handle().clone())
        .build()
        .expect("client");
    let segment = client.segment("bench");
    // Warm: the first range in, the next one fetched.
    runtime.block_on(segment.next_ids(2_000)).expect("warm-up");

    let counter = AtomicU64::new(0);
    let (mut baseline, mut next_id, mut try_next, mut sustained) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let start = Instant::now();
        for _ in 0..N {
            black_box(counter.fetch_add(1, Ordering::Relaxed));
        }
        baseline.push(start.elapsed().as_nanos() as f64 / N as f64);
        let warm = runtime.block_on(async {
            let (mut timed, mut try_timed, mut taken) = (Duration::ZERO, Duration::ZERO, 0);
            while taken < N {
                // Untimed: the next range is in and no refill runs; the stretch stays inside the
                // current range, so it triggers none.
                let (stretch, next_ready) = loop {
                    let state = segment.buffer_state();
                    let left = state.current.map_or(0, |range| range.end - state.cursor);
                    if state.next.is_some() && !state.loading && left > 1 {
                        break (left.min(CHUNK) / 2, state.next.is_some());
                    }
                    black_box(segment.next_id().await.expect("an ID"));
                    tokio::task::yield_now().await;
                };
                debug_assert!(next_ready);
                let start = Instant::now();
                for _ in 0..stretch {
                    black_box(segment.next_id().await.expect("an ID"));
                }
                timed += start.elapsed();
                let start = Instant::now();
                for _ in 0..stretch {
                    black_box(segment.try_next_id());
                }
                try_timed += start.elapsed();
                taken += stretch;
            }
            (timed.as_nanos() as f64 / taken as f64, try_timed.as_nanos() as f64 / taken as f64)
        });
        next_id.push(warm.0);
        try_next.push(warm.1);
        let all = runtime.block_on(async {
            let start = Instant::now();
            for _ in 0..N {
                black_box(segment.next_id().await.expect("an ID"));
            }
            start.elapsed()
        });
        sustained.push(all.as_nanos() as f64 / N as f64);
    }
    let sustained = median(sustained);
    let try_next = median(try_next);
    let (baseline, next_id) = (median(baseline), median(next_id));
    println!("AtomicU64::fetch_add       {baseline:6.2} ns/op (median of {ROUNDS} rounds of {N})");
    println!("Segment::next_id().await   {next_id:6.2} ns/op (warm: the buffer holds IDs)");
    println!("Segment::try_next_id()     {try_next:6.2} ns/op (warm, the same way)");
    println!("ratio next_id / fetch_add  {:6.2}x (bar: <= 3x)", next_id / baseline);
    println!(
        "sustained, refills waited  {sustained:6.2} ns/op = {:.1} M IDs/s; {} HTTP requests in all",
        1e3 / sustained,
        client.http_requests()
    );
}
