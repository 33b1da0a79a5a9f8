//! The client library (`leafraft-client`) against real processes: eight tasks take IDs through one
//! client while the leader is killed (and restarted) and then a follower is paused. As long as a
//! majority runs, the takers see no error at all; no ID is handed out twice; and the client makes
//! about one HTTP request per range, not one per ID.

use std::collections::HashSet;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use leafraft_client::Client;

use crate::harness::new_tag;
use crate::harness::wait_until;
use crate::harness::ProcessCluster;

const TAKERS: u64 = 8;
/// The size of every range the client fetches (fixed, so the request count has one expectation).
const RANGE: u64 = 500;
/// IDs the takers must take after each fault before the next step: proof that they kept going.
const PROGRESS: u64 = 20 * RANGE;
const TIMEOUT: Duration = Duration::from_secs(30);

/// What the takers saw.
#[derive(Default)]
struct Taken {
    count: AtomicU64,
    ids: Mutex<Vec<u64>>,
    errors: Mutex<Vec<String>>,
}

impl Taken {
    /// Waits until the takers have taken `more` IDs beyond what they had when called.
    async fn progress(&self, more: u64, what: &str) {
        let mark = self.count.load(SeqCst);
        wait_until(TIMEOUT, what, || async {
            let now = self.count.load(SeqCst);
            if now >= mark + more {
                Ok(())
            } else {
                Err(format!("{} IDs since the mark, errors {:?}", now - mark, self.errors.lock().unwrap()))
            }
        })
        .await;
    }
}

fn spawn_takers(client: &Client, taken: &Arc<Taken>, stop: &Arc<AtomicBool>) -> Vec<tokio::task::JoinHandle<()>> {
    (0..TAKERS)
        .map(|taker| {
            let (segment, taken, stop) = (client.segment("order"), taken.clone(), stop.clone());
            tokio::spawn(async move {
                let mut mine = Vec::new();
                let mut round = 0u64;
                while !stop.load(SeqCst) {
                    round += 1;
                    let answer = if (round + taker).is_multiple_of(10) {
                        segment.next_ids(7).await
                    } else {
                        segment.next_id().await.map(|id| vec![id])
                    };
                    match answer {
                        Ok(ids) => {
                            taken.count.fetch_add(ids.len() as u64, SeqCst);
                            mine.extend(ids);
                        }
                        Err(error) => taken.errors.lock().unwrap().push(error.to_string()),
                    }
                    // Let the other tasks (and the refill) run on this worker too.
                    tokio::task::yield_now().await;
                }
                taken.ids.lock().unwrap().extend(mine);
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn takers_see_no_error_and_no_duplicate_while_the_leader_dies_and_a_follower_sleeps() {
    let mut cluster = ProcessCluster::start(3);
    let leader = cluster.wait_leader(TIMEOUT).await;
    cluster.client(leader).create_tag(&new_tag("order", None, Some(100), None)).await.expect("create the tag");
    cluster.wait_tag_known(&[1, 2, 3], "order", TIMEOUT).await;
    let urls: Vec<String> = (1..=3).map(|id| cluster.url(id)).collect();
    let client = Client::builder()
        .nodes(&urls)
        .timeout(Duration::from_secs(15))
        .attempt_timeout(Duration::from_secs(1))
        .range_size(RANGE, RANGE, Duration::from_secs(60))
        .build()
        .expect("client");
    let (taken, stop) = (Arc::new(Taken::default()), Arc::new(AtomicBool::new(false)));
    let takers = spawn_takers(&client, &taken, &stop);
    taken.progress(PROGRESS, "IDs before any fault").await;

    cluster.kill(leader);
    taken.progress(PROGRESS, "IDs after the leader was killed").await;
    cluster.restart(leader);
    cluster.wait_ready(leader, TIMEOUT).await;

    let now_leader = cluster.wait_leader(TIMEOUT).await;
    let follower = (1..=3).find(|id| *id != now_leader).expect("a follower");
    cluster.signal(follower, libc::SIGSTOP);
    taken.progress(PROGRESS, "IDs while a follower is paused").await;
    cluster.signal(follower, libc::SIGCONT);

    stop.store(true, SeqCst);
    for taker in takers {
        taker.await.expect("a taker");
    }
    let errors = taken.errors.lock().unwrap().clone();
    assert!(
        errors.is_empty(),
        "takers saw {} errors while a majority ran: {:?}",
        errors.len(),
        &errors[..errors.len().min(5)]
    );
    let ids = std::mem::take(&mut *taken.ids.lock().unwrap());
    let unique: HashSet<u64> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "{} IDs handed out twice", ids.len() - unique.len());

    // One range request per RANGE IDs, plus the failed attempts at the dead and the paused node,
    // the node-list refreshes and the ranges still in the buffer at the end.
    let requests = client.http_requests();
    let ranges = (ids.len() as u64).div_ceil(RANGE);
    assert!(
        requests <= ranges + ranges / 10 + 40,
        "{requests} HTTP requests for {} IDs ({ranges} ranges of {RANGE})",
        ids.len()
    );
    eprintln!("{} IDs, {requests} HTTP requests, {ranges} ranges' worth", ids.len());
}
