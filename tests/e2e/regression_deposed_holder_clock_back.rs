//! Regression, found by the chaos suite (`leafraft-chaos --seed 303 --nodes 3`, soak): the leader
//! holding worker 1 was cut off, so its lease ran out and another node took the worker over above
//! its window; meanwhile its wall clock was stepped 7 s back, which made its old committed window
//! look open again, and 6 s after the takeover it issued IDs from it. They were below the new
//! holder's, so unique, but worker 1's IDs went back in time. A holding now lasts a bounded time
//! on the holder's monotonic clock (the lease less twice the clock skew allowance, at least the
//! window) after the extension that renewed it, whatever its wall clock does.

use std::time::Duration;
use std::time::Instant;

use crate::snowflake_ids::start_three_with_fake_clock_on_node_3;
use crate::snowflake_ids::wait_snowflake_ready;

const TIMEOUT: Duration = Duration::from_secs(20);

#[tokio::test]
async fn regression_a_cut_off_holder_with_its_clock_stepped_back_stops_issuing() {
    // A 1 s window and a 3 s lease: with the default 1 s skew allowance, a holding lasts 1 s
    // (the window) past the extension that renewed it.
    let (mut cluster, clock) =
        start_three_with_fake_clock_on_node_3("+0", &["--snowflake-window-ms", "1000", "--worker-lease-ms", "3000"]);
    cluster.wait_leader(TIMEOUT).await;
    wait_snowflake_ready(&mut cluster, 3, TIMEOUT).await;

    // Node 3 loses its quorum (no extension can commit) and its clock goes 5 s back. Before the
    // fix, it answered CLOCK_BACKWARDS for 4 s, then issued again from its old window (borrowing
    // within the 1 s backward allowance), long after its lease could have been taken over.
    cluster.signal(1, libc::SIGSTOP);
    cluster.signal(2, libc::SIGSTOP);
    let cut_off = Instant::now();
    clock.set("-5s");
    let http = reqwest::Client::builder().timeout(Duration::from_secs(1)).build().expect("HTTP client");
    let url = format!("{}/v1/snowflake", cluster.url(3));
    let mut late = Vec::new();
    let mut answered = 0;
    let mut refused_late = 0;
    let mut unanswered = Vec::new();
    while cut_off.elapsed() < Duration::from_secs(7) {
        let response = match http.get(&url).send().await {
            Ok(response) => response,
            Err(e) => {
                unanswered.push(format!("{:?}: {e}", cut_off.elapsed()));
                continue;
            }
        };
        let at = cut_off.elapsed();
        // The last extension committed before the cut; 1 s of validity plus slack for the
        // request in flight.
        let after_validity = at > Duration::from_millis(1500);
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        if status.is_success() {
            answered += 1;
            if after_validity {
                late.push(format!("{at:?}: {body}"));
            }
        } else if after_validity {
            assert!(
                body.contains("WORKER_UNAVAILABLE") || body.contains("CLOCK_BACKWARDS"),
                "node 3 must refuse with a snowflake code, got {status}: {body}"
            );
            refused_late += 1;
        }
    }
    cluster.signal(1, libc::SIGCONT);
    cluster.signal(2, libc::SIGCONT);
    println!("node 3 answered {answered} snowflake requests and refused {refused_late} late ones");
    // The test proves something only if node 3 kept answering: a node that stopped answering
    // would issue nothing late and pass for the wrong reason.
    assert!(unanswered.is_empty(), "node 3 stopped answering, so nothing was checked: {unanswered:?}");
    assert!(refused_late > 0, "node 3 was never asked after its holding ran out");
    assert!(late.is_empty(), "node 3 issued long after its lease could have been taken over: {late:?}");
}
