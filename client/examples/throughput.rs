//! How many segment IDs one process takes through one client, against a running cluster.
//!
//! ```text
//! cargo run --release -p leafraft-client --example throughput -- \
//!     127.0.0.1:8081,127.0.0.1:8082,127.0.0.1:8083 order 8 10
//! ```
//!
//! Arguments: nodes, tag (must exist), tasks, seconds. Every ID is kept and checked for
//! duplicates at the end; prints IDs/s, HTTP requests and IDs per request.

use std::collections::HashSet;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use leafraft_client::Client;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let nodes = args.get(1).map_or("127.0.0.1:8080", String::as_str);
    let tag = args.get(2).map_or("order", String::as_str).to_string();
    let tasks: usize = args.get(3).map_or(Ok(8), |n| n.parse())?;
    let seconds: u64 = args.get(4).map_or(Ok(10), |n| n.parse())?;

    let client = Client::builder().nodes(nodes.split(',')).timeout(Duration::from_secs(10)).build()?;
    let segment = client.segment(&tag);
    segment.next_ids(10).await?; // warm: the first range in
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let takers: Vec<_> = (0..tasks)
        .map(|_| {
            let (segment, stop) = (segment.clone(), stop.clone());
            tokio::spawn(async move {
                let mut ids = Vec::with_capacity(1 << 20);
                while !stop.load(Relaxed) {
                    for _ in 0..1024 {
                        match segment.next_id().await {
                            Ok(id) => ids.push(id),
                            Err(error) => return Err(error),
                        }
                    }
                    tokio::task::yield_now().await;
                }
                Ok(ids)
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    stop.store(true, Relaxed);
    let mut all = Vec::new();
    for taker in takers {
        all.extend(taker.await??);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let unique: HashSet<u64> = all.iter().copied().collect();
    let requests = client.http_requests();
    println!("tasks {tasks}, {elapsed:.1} s: {} IDs, {:.1} M IDs/s", all.len(), all.len() as f64 / elapsed / 1e6);
    println!("HTTP requests {requests} ({:.0} IDs per request)", all.len() as f64 / requests.max(1) as f64);
    println!("duplicates {}", all.len() - unique.len());
    Ok(())
}
