//! A node whose open-file limit is below `--max-connections` (10,000 by default, while `ulimit -n`
//! is often 1,024) accepted connections until it ran out of file descriptors; then it could not
//! write its data directory, and the fail-stop check stopped it (exit 1). A client holding a few
//! hundred idle connections took the node down.

use std::time::Duration;
use std::time::Instant;

use tokio::net::TcpStream;

use crate::harness::ProcessCluster;
use crate::regression_credentials::series_sum;

const TIMEOUT: Duration = Duration::from_secs(30);
/// Low enough that the flood below would use up every descriptor.
const OPEN_FILES: u64 = 128;
const FLOOD: usize = 160;
/// How long the node is watched under the flood: several of its data directory probes (every
/// 500 ms), each of which needs a descriptor.
const UNDER_FLOOD: Duration = Duration::from_secs(3);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_a_connection_flood_under_a_low_open_file_limit_does_not_stop_the_node() {
    let mut cluster = ProcessCluster::new();
    cluster.set_open_files(1, OPEN_FILES);
    // The flood comes from one address: let it take every place (by default it would hold a
    // quarter of them, and the rest be refused as it arrives), as many clients together can.
    let mut cluster = cluster.start_members_with(&[1], &["--max-connections-per-source", "1000"]);
    cluster.wait_ready(1, TIMEOUT).await;
    let base = cluster.url(1);
    let limit = series_sum(&cluster.get_text(1, "/metrics").await.1, "leafraft_connections_limit ");
    assert!(limit >= 1.0, "no connection limit in /metrics");
    assert!(limit < OPEN_FILES as f64, "{limit} connections admitted under an open-file limit of {OPEN_FILES}");

    // Idle connections, more than the node has descriptors for. The kernel completes every
    // handshake (the listen backlog), whether or not the node accepts.
    let addr = cluster.addr(1);
    let mut flood = Vec::with_capacity(FLOOD);
    for _ in 0..FLOOD {
        flood.push(TcpStream::connect(&addr).await.expect("a connection (the listen backlog holds it)"));
    }
    // The node accepts until its places are taken (its descriptors, counted in /proc, reach the
    // limit of places at least); then it closes the connections idle the longest to make room
    // for the rest, never holding more than its places.
    let pid = cluster.pid(1);
    let files = || std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |dir| dir.count());
    let deadline = Instant::now() + TIMEOUT;
    while (files() as f64) < limit {
        assert!(cluster.is_running(1), "the node stopped under the flood:\n{}", cluster.log(1));
        assert!(Instant::now() < deadline, "the node did not fill its {limit} places: {} files open", files());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Every place is taken. The node goes on probing its data directory (every 500 ms, a file
    // created each time), which needs a descriptor: it must stay up through several probes.
    let began = Instant::now();
    while began.elapsed() < UNDER_FLOOD {
        assert!(cluster.is_running(1), "the node stopped under the flood:\n{}", cluster.log(1));
        assert!(files() < OPEN_FILES as usize, "{} files open, the limit is {OPEN_FILES}", files());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    drop(flood);
    let fresh = reqwest::Client::new();
    crate::harness::wait_until(TIMEOUT, "a new connection served after the flood", || {
        let request = fresh.get(format!("{base}/readyz"));
        async move {
            match request.send().await {
                Ok(answer) if answer.status().is_success() => Ok(()),
                Ok(answer) => Err(format!("answered {}", answer.status())),
                Err(e) => Err(e.to_string()),
            }
        }
    })
    .await;
    assert!(cluster.is_running(1), "the node stopped:\n{}", cluster.log(1));
    assert!(!cluster.log(1).contains("storage failed"), "the node's storage failed:\n{}", cluster.log(1));
}
