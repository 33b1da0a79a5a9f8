//! No loop spins (`docs/semantics.md#failure-behaviour`): a node left alone after its peers are killed (no quorum, elections
//! that cannot succeed, peers refusing connections) uses almost no CPU.

use std::time::Duration;
use std::time::Instant;

use crate::harness::new_tag;
use crate::harness::ProcessCluster;
use crate::snowflake_ids::wait_snowflake_ready;

const TIMEOUT: Duration = Duration::from_secs(20);
const WINDOW: Duration = Duration::from_secs(10);
/// The most of one core a lone node may use.
const LIMIT: f64 = 0.05;

/// User plus system CPU time of `pid` so far (`/proc/<pid>/stat` fields 14 and 15).
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc/<pid>/stat");
    // The command name (field 2) is in parentheses and may hold spaces: count from after it.
    let fields: Vec<&str> = stat[stat.rfind(')').expect("comm") + 2..].split(' ').collect();
    let ticks = |i: usize| fields[i].parse::<u64>().expect("a tick count");
    // SAFETY: `sysconf` has no preconditions.
    let per_second = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) }).expect("clock ticks");
    Duration::from_millis((ticks(11) + ticks(12)) * 1000 / per_second)
}

/// Kills `dead`, then measures the share of one core `alone` uses over [`WINDOW`].
async fn measure_alone(cluster: &mut ProcessCluster, dead: &[u64], alone: u64) -> f64 {
    for &id in dead {
        cluster.kill(id);
    }
    let pid = cluster.pid(alone);
    let (started, cpu_before) = (Instant::now(), cpu_time(pid));
    // A measurement window, not a wait for a condition.
    tokio::time::sleep(WINDOW).await;
    let share = (cpu_time(pid) - cpu_before).as_secs_f64() / started.elapsed().as_secs_f64();
    assert!(cluster.is_running(alone), "node {alone} exited");
    println!("node {alone} alone used {:.2} % of a core over {WINDOW:?}", share * 100.0);
    share
}

async fn serving_cluster() -> (ProcessCluster, u64, Vec<u64>) {
    let mut cluster = ProcessCluster::start(3);
    let leader = cluster.wait_leader(TIMEOUT).await;
    for id in [1, 2, 3] {
        wait_snowflake_ready(&mut cluster, id, TIMEOUT).await;
    }
    cluster.client(leader).create_tag(&new_tag("order", None, None, None)).await.expect("create a tag");
    let followers = [1, 2, 3].into_iter().filter(|&id| id != leader).collect();
    (cluster, leader, followers)
}

#[tokio::test]
async fn a_leader_left_alone_stays_idle() {
    let (mut cluster, leader, followers) = serving_cluster().await;
    let share = measure_alone(&mut cluster, &followers, leader).await;
    assert!(share < LIMIT, "the lone leader used {:.1} % of a core", share * 100.0);
}

#[tokio::test]
async fn a_follower_left_alone_stays_idle() {
    let (mut cluster, leader, followers) = serving_cluster().await;
    let share = measure_alone(&mut cluster, &[leader, followers[1]], followers[0]).await;
    assert!(share < LIMIT, "the lone follower used {:.1} % of a core", share * 100.0);
}
