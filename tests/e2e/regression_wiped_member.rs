//! Regression: a member that lost its data directory came back with the same flags,
//! initialised itself again (or was told "already a voter" through `--join`), and with a stale
//! member elected a leader whose state lacked committed claims: IDs were handed out twice.
//!
//! The six steps of the issue, on three real nodes: create a tag and take IDs everywhere; SIGSTOP
//! the stale member; take many IDs through a second member (claims commit on the two running
//! ones); kill -9 both, wipe (or replace) one's data dir and start it again; SIGCONT the stale one.
//! Now the restarted member must refuse to start, naming the fix, and the stale one alone must
//! not serve new claims. Then the intact member comes back, the cluster serves above everything
//! served before, and the documented fix (remove, then `--join`) brings the wiped member back.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use leafraft_client::ClusterStatus;

use crate::harness::files_below;
use crate::harness::new_tag;
use crate::harness::run_binary;
use crate::harness::wait_until;
use crate::harness::ProcessCluster;
use crate::ids::metric;

const TIMEOUT: Duration = Duration::from_secs(30);

/// Who plays which part in the six steps (the leader may be any node, so roles follow it).
#[derive(Debug, Clone, Copy)]
struct Roles {
    /// Serves the many IDs of step 3, then dies with its data intact.
    served: u64,
    /// Dies and loses its data dir.
    wiped: u64,
    /// Paused through step 3: its state lacks those claims.
    stale: u64,
}

struct Run {
    cluster: ProcessCluster,
    roles: Roles,
    /// Every ID any client received, in this test.
    seen: BTreeSet<u64>,
    /// The tag's `max_id` once step 3's claims committed.
    max_after_step_3: u64,
}

impl Run {
    fn record(&mut self, node: u64, ids: Vec<u64>) {
        for id in ids {
            assert!(self.seen.insert(id), "ID {id} handed out twice (the second time by node {node})");
        }
    }

    /// Takes `count` IDs from `node`; `false` when it could not serve them.
    async fn take(&mut self, node: u64, count: u64) -> bool {
        match self.cluster.client(node).segment_ids("t", count).await {
            Ok(ids) => {
                self.record(node, ids);
                true
            }
            Err(_) => false,
        }
    }

    /// [`Run::take`] until it succeeds or `TIMEOUT` passes: with step 10, a request often needs a
    /// new claim, which on a slow machine can outlast the node's segment wait (503
    /// `SEGMENTS_NOT_READY`) although the node serves.
    async fn take_within(&mut self, node: u64, count: u64) -> bool {
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        loop {
            if self.take(node, count).await {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

/// Steps 1 to 3, then kills the `served` and `wiped` members (SIGKILL), leaving `stale` paused.
async fn steps_one_to_three() -> Run {
    let mut cluster = ProcessCluster::start(3);
    let leader = cluster.wait_leader(TIMEOUT).await;
    let followers: Vec<u64> = [1, 2, 3].into_iter().filter(|&id| id != leader).collect();
    let roles = Roles { served: leader, wiped: followers[0], stale: followers[1] };
    cluster.client(leader).create_tag(&new_tag("t", None, Some(10), None)).await.expect("create tag t with step 10");
    let mut run = Run { cluster, roles, seen: BTreeSet::new(), max_after_step_3: 0 };
    // 1. A few IDs on every node.
    for id in [1, 2, 3] {
        let client = run.cluster.client(id);
        let ids = wait_until(TIMEOUT, &format!("node {id} to serve"), || async {
            client.segment_ids("t", 3).await.map_err(|e| e.to_string())
        })
        .await;
        run.record(id, ids);
    }
    // 2. The stale member stops.
    run.cluster.signal(roles.stale, libc::SIGSTOP);
    // 3. Many IDs through the served member; its claims commit with the wiped one's votes.
    for _ in 0..30 {
        assert!(run.take_within(roles.served, 10).await, "node {} must serve while two of three run", roles.served);
    }
    let tag = run.cluster.client(roles.served).get_tag("t").await.expect("read t");
    run.max_after_step_3 = tag.max_id;
    // 4. Both die.
    run.cluster.kill(roles.served);
    run.cluster.kill(roles.wiped);
    run
}

/// Steps 5 and 6 and what follows, once the wiped member has been started again: SIGCONT the
/// stale member; the restarted one must exit non-zero with one line containing `refusal`, while
/// the stale one serves no new claim. Then the intact member returns and the documented fix
/// brings the wiped one back, with no ID ever handed out twice.
///
/// `stale_counts`: the refusal kind the stale member must have counted (its identity check is
/// what turned the restarted member away), if any.
async fn steps_five_and_six(mut run: Run, refusal: &[&str], stale_counts: Option<&str>) {
    let Roles { served, wiped, stale } = run.roles;
    run.cluster.signal(stale, libc::SIGCONT);
    // Until the restarted member gives up, keep asking the stale one: with the bug it serves
    // claims from its stale `max_id`, which `record` reports as duplicates.
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    while run.cluster.is_running(wiped) {
        assert!(tokio::time::Instant::now() < deadline, "node {wiped} neither refused nor stopped within {TIMEOUT:?}");
        run.take(stale, 10).await;
    }
    let status = run.cluster.wait_exit(wiped, TIMEOUT).await;
    let log = run.cluster.log(wiped);
    assert!(!status.success(), "node {wiped} must exit non-zero, got {status}; log:\n{log}");
    let errors: Vec<&str> = log.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 1, "one error line expected; log:\n{log}");
    for part in refusal {
        assert!(errors[0].contains(part), "the refusal must contain {part:?}: {}", errors[0]);
    }
    if let Some(kind) = stale_counts {
        let counted = refusals(&mut run.cluster, stale, kind).await;
        assert!(counted >= 1.0, "node {stale} must count its refusal of node {wiped} ({kind}): {counted}");
    }
    // The stale member alone serves nothing beyond the ranges it held before: no new claim.
    while run.take(stale, 10).await {}
    let consistent = run.cluster.client(stale).list_tags_consistent().await;
    assert!(consistent.is_err(), "one member of three must not answer a consistent read: {consistent:?}");

    // The intact member returns: the cluster serves above everything committed before.
    run.cluster.restart(served);
    run.cluster.wait_leader(TIMEOUT).await;
    let client = run.cluster.client(served);
    let max_id: u64 = wait_until(TIMEOUT, "a consistent read of t", || async {
        let tags = client.list_tags_consistent().await.map_err(|e| e.to_string())?;
        tags.iter().find(|t| t.tag == "t").map(|t| t.max_id).ok_or("no tag t".into())
    })
    .await;
    assert!(max_id >= run.max_after_step_3, "max_id went back: {max_id} < {}", run.max_after_step_3);
    for node in [served, stale] {
        let client = run.cluster.client(node);
        let took = wait_until(TIMEOUT, &format!("node {node} to serve again"), || async {
            client.segment_ids("t", 10).await.map_err(|e| e.to_string())
        })
        .await;
        run.record(node, took);
    }

    // The fix the refusal names: remove the member, then start it empty with --join.
    let id = wiped.to_string();
    let server = run.cluster.url(served);
    let output = run_binary(&["cluster", "remove", "--node-id", &id, "--server", &server], TIMEOUT).await;
    assert!(output.status.success(), "cluster remove: {output:?}");
    wipe(&run.cluster.data_dir(wiped));
    let seed = run.cluster.addr(served);
    run.cluster.start_node(wiped, &["--join", &seed]);
    let back = |s: &ClusterStatus| match s.voters == [1, 2, 3] {
        true => Ok(()),
        false => Err("not a voter again yet".into()),
    };
    run.cluster.wait_status(wiped, TIMEOUT, "the wiped member to be a voter again", back).await;
    run.cluster.wait_ready(wiped, TIMEOUT).await;
    for node in [1, 2, 3] {
        assert!(run.take_within(node, 10).await, "node {node} serves once all three are back");
    }
}

fn wipe(dir: &Path) {
    if dir.exists() {
        std::fs::remove_dir_all(dir).expect("wipe the data directory");
    }
}

/// How many identity refusals of `kind` node `id` counted.
async fn refusals(cluster: &mut ProcessCluster, id: u64, kind: &str) -> f64 {
    let (_, text) = cluster.get_text(id, "/metrics").await;
    metric(&text, "leafraft_identity_refusals_total", &[("kind", kind)]).unwrap_or(0.0)
}

/// The six steps with the same `--initial-cluster` flags: the wiped member refuses to
/// initialise again, because the stale member lists it with its old disk's incarnation.
#[tokio::test]
async fn regression_wiped_member_rejoins_with_same_flags() {
    let mut run = steps_one_to_three().await;
    let wiped = run.roles.wiped;
    wipe(&run.cluster.data_dir(wiped));
    run.cluster.restart(wiped);
    let remove = format!("leafraft cluster remove --node-id {wiped}");
    steps_five_and_six(run, &["refusing to start", &remove, "--join"], Some("incarnation")).await;
}

/// The same through `--join`: the wiped member used to be told "already a voter"; now the seed
/// refuses its new identity and it exits with the same fix.
#[tokio::test]
async fn regression_wiped_member_rejoins_through_join() {
    let mut run = steps_one_to_three().await;
    let Roles { served, wiped, stale } = run.roles;
    wipe(&run.cluster.data_dir(wiped));
    let seeds = format!("{},{}", run.cluster.addr(served), run.cluster.addr(stale));
    run.cluster.start_node(wiped, &["--join", &seeds]);
    let remove = format!("leafraft cluster remove --node-id {wiped}");
    steps_five_and_six(run, &["refusing to start", &remove, "--join"], Some("incarnation")).await;
}

/// The same with the wiped member's data dir replaced by a copy of the stale member's: the
/// directory belongs to another node ID, and the node refuses it before opening the store.
#[tokio::test]
async fn regression_data_dir_replaced_by_another_members() {
    let mut run = steps_one_to_three().await;
    let Roles { wiped, stale, .. } = run.roles;
    let (from, to) = (run.cluster.data_dir(stale), run.cluster.data_dir(wiped));
    wipe(&to);
    for file in files_below(&from) {
        let target = to.join(file.strip_prefix(&from).expect("below"));
        std::fs::create_dir_all(target.parent().expect("parent")).expect("create directory");
        std::fs::copy(&file, &target).expect("copy file");
    }
    run.cluster.restart(wiped);
    let belongs = format!("this data dir belongs to node {stale}");
    steps_five_and_six(run, &[&belongs], None).await;
}

/// The everyday case: a follower's disk is wiped while the other two run, and a supervisor
/// restarts it with its original flags. Whether it first asks a member (refused) or first receives
/// the leader's membership (which records its old disk), it exits at once with the fix, and the
/// other two keep serving.
#[tokio::test]
async fn a_wiped_follower_restarted_beside_a_healthy_majority_exits_with_the_fix() {
    let mut cluster = ProcessCluster::start(3);
    let leader = cluster.wait_leader(TIMEOUT).await;
    let wiped = [1, 2, 3].into_iter().find(|&id| id != leader).expect("a follower");
    cluster.client(leader).create_tag(&new_tag("t", None, None, None)).await.expect("create t");
    cluster.kill(wiped);
    wipe(&cluster.data_dir(wiped));
    cluster.restart(wiped);
    let status = cluster.wait_exit(wiped, TIMEOUT).await;
    let log = cluster.log(wiped);
    assert!(!status.success(), "node {wiped} must exit non-zero; log:\n{log}");
    let errors: Vec<&str> = log.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 1, "one error line expected; log:\n{log}");
    assert!(errors[0].contains(&format!("leafraft cluster remove --node-id {wiped}")), "{}", errors[0]);
    crate::harness::segment_ids_within(&cluster.client(leader), "t", 5, TIMEOUT).await;
}
