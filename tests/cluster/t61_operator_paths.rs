//! Real-time order of monotonic tags on the paths an operator takes: a leader removed from a
//! two-voter cluster, voters that run different election timeouts, a follower restarted twice on
//! a shorter one. Each once broke the leader lease that dcd6af4 still had; the confirmation that
//! replaced it rests on no timeout, and these stay as its regression tests. Each runs clients on every node taking
//! IDs of a monotonic tag and checks the recorded history for real-time order and duplicates.

use std::collections::BTreeSet;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use crate::fixtures;
use crate::fixtures::cluster::CATCH_UP_LIMIT;
use crate::fixtures::filter::Filter;
use crate::fixtures::filter::Kind;
use crate::fixtures::TestCluster;
use crate::t60_monotonic::create_monotonic;
use crate::t60_monotonic::real_time_violations;
use crate::t60_monotonic::spawn_clients;
use crate::t60_monotonic::Op;

/// Waits until `history` holds `more` takes beyond what it holds now.
async fn wait_for_takes(history: &Arc<Mutex<Vec<Op>>>, more: usize, what: &str) {
    let count = || history.lock().expect("history").len();
    let target = count() + more;
    fixtures::wait_until(CATCH_UP_LIMIT, what, || (count() >= target).then_some(())).await;
}

/// Stops the clients and checks the history they recorded.
async fn stop_and_check(
    cluster: &TestCluster,
    clients: Vec<tokio::task::JoinHandle<()>>,
    stop: &AtomicBool,
    history: &Arc<Mutex<Vec<Op>>>,
) {
    stop.store(true, Ordering::SeqCst);
    for client in clients {
        client.await.expect("client task");
    }
    let history = history.lock().expect("history").clone();
    let violations = real_time_violations(&history);
    tracing::info!(ops = history.len(), violations = violations.len(), "history checked");
    assert!(violations.is_empty(), "{} violations, first: {:?}", violations.len(), violations.first());
    cluster.assert_invariants();
}

/// Voters {L, A}; L is removed through A. openraft lets a lone voter elect itself at its next
/// tick, without an election timeout, so A leads and serves the moment the configuration {A}
/// reaches its log. Here L never learns that {A} was committed (A's answers are lost from the
/// moment A holds the joint configuration), so L keeps leading the new configuration: a lease
/// counted on A's earlier acknowledgements once let it answer below what A had already answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_a_leader_removed_from_two_voters_answers_nothing_below_its_successor() {
    fixtures::run(async {
        let cluster = TestCluster::new(2).await;
        let leader = cluster.leader().await;
        let other = 3 - leader;
        create_monotonic(&cluster, "ticks").await;
        let history = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let clients = spawn_clients(&cluster, "ticks", 6, Arc::clone(&history), Arc::clone(&stop));
        wait_for_takes(&history, 50, "takes answered before the removal").await;

        let other_raft = cluster.raft(other);
        let changing = move || {
            other_raft.metrics().borrow().membership_config.membership().get_joint_config().len() > 1
                || other_raft.metrics().borrow().membership_config.membership().voter_ids().collect::<BTreeSet<_>>()
                    == BTreeSet::from([other])
        };
        cluster.router.add_filter(
            "answers of the removed voter's peer are lost",
            Filter::lose_replies().from([leader]).to([other]).kinds([Kind::Append]).when(move |_| changing()),
        );
        tracing::info!(leader, other, "--- remove the leader through the other voter");
        let remover = cluster.cluster(other);
        let removal = tokio::spawn(async move {
            let _ = tokio::time::timeout(Duration::from_secs(5), remover.remove_member(leader)).await;
        });
        let new = cluster.leader_other_than(leader).await;
        assert_eq!(new, other);
        // Takes sent to the removed leader wait out their timeout now, so count the lone voter's.
        let by_other = || history.lock().expect("history").iter().filter(|op| op.node == other).count();
        let target = by_other() + 30;
        fixtures::wait_until(CATCH_UP_LIMIT, "takes answered by the lone voter", || {
            (by_other() >= target).then_some(())
        })
        .await;
        cluster.router.heal();
        removal.await.expect("removal task");
        stop_and_check(&cluster, clients, &stop, &history).await;
    })
    .await;
}

/// A leader on a longer election timeout than its followers (a rolling change of
/// `--election-timeout-ms`): a lease counted on its own timeout outlived the followers' vote hold.
/// Cut off, it must answer nothing once the followers can have elected a leader that serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_a_leader_on_a_longer_timeout_than_its_followers_stops_in_time() {
    fixtures::run(async {
        let slow =
            openraft::Config { election_timeout_min: 1_000, election_timeout_max: 2_000, ..fixtures::test_config() };
        let cluster = TestCluster::with_config(3, slow.validate().expect("valid")).await;
        let leader = cluster.leader().await;
        let followers: Vec<u64> = [1, 2, 3].into_iter().filter(|id| *id != leader).collect();
        for &id in &followers {
            cluster.kill(id).await;
            cluster.restart_with_config(id, fixtures::test_config()).await;
        }
        assert_eq!(cluster.agreed_leader(&[1, 2, 3]).await, leader, "the slow leader still leads");
        create_monotonic(&cluster, "ticks").await;
        let history = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let clients = spawn_clients(&cluster, "ticks", 6, Arc::clone(&history), Arc::clone(&stop));
        wait_for_takes(&history, 50, "takes answered before the cut").await;

        tracing::info!(leader, "--- cut the slow leader off; the fast followers elect");
        let cut_at = tokio::time::Instant::now();
        cluster.router.add_filter("cut", Filter::block().between(&[leader], &followers));
        let new = cluster.leader_other_than(leader).await;
        tracing::info!(new, after = ?cut_at.elapsed(), "--- new leader");
        wait_for_takes(&history, 50, "takes answered by the new leader").await;
        tracing::info!(after = ?cut_at.elapsed(), "--- heal");
        cluster.router.remove_filter("cut");
        wait_for_takes(&history, 20, "takes answered after healing").await;
        stop_and_check(&cluster, clients, &stop, &history).await;
    })
    .await;
}

/// Three voters on a long election timeout; follower A was restarted earlier on a short one.
/// The leader L is cut off from both followers (its clients still reach it), and follower B is
/// restarted twice on the short timeout. A and B elect a new leader after about one short
/// timeout, and nothing may let L answer a take after that: dcd6af4 kept B's longer vote hold
/// across one restart only (the file held the last process's hold, the longer promise lived in
/// memory), so after the second restart B voted early while L still answered from a lease
/// counted on B's first, longer hold (reproduced against release binaries; this in-process run
/// does not reach it on dcd6af4, and stays as the scenario's check on the confirmation).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_a_follower_restarted_twice_lets_no_cut_off_leader_answer_below_its_successor() {
    fixtures::run(async {
        let slow =
            openraft::Config { election_timeout_min: 1_500, election_timeout_max: 3_000, ..fixtures::test_config() };
        let fast = openraft::Config { election_timeout_min: 150, election_timeout_max: 300, ..fixtures::test_config() };
        let cluster = TestCluster::with_config(3, slow.validate().expect("valid")).await;
        let fast = fast.validate().expect("valid");
        let leader = cluster.leader().await;
        let followers: Vec<u64> = [1, 2, 3].into_iter().filter(|id| *id != leader).collect();
        let (a, b) = (followers[0], followers[1]);
        cluster.kill(a).await;
        cluster.restart_with_config(a, fast.clone()).await;
        assert_eq!(cluster.agreed_leader(&[1, 2, 3]).await, leader, "the slow leader still leads");
        create_monotonic(&cluster, "ticks").await;
        let history = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let clients = spawn_clients(&cluster, "ticks", 6, Arc::clone(&history), Arc::clone(&stop));
        wait_for_takes(&history, 50, "takes answered before the cut").await;

        tracing::info!(leader, a, b, "--- cut the leader off; restart B twice on the short timeout");
        cluster.router.add_filter("cut", Filter::block().between(&[leader], &followers));
        cluster.kill(b).await;
        cluster.restart_with_config(b, fast.clone()).await;
        // The scenario's pace, not a synchronisation: the second restart comes 0.4 s after the first.
        tokio::time::sleep(std::time::Duration::from_millis(400)).await;
        cluster.kill(b).await;
        cluster.restart(b).await;
        let new = cluster.leader_other_than(leader).await;
        tracing::info!(new, "--- new leader");
        wait_for_takes(&history, 50, "takes answered by the new leader").await;
        cluster.router.remove_filter("cut");
        wait_for_takes(&history, 20, "takes answered after healing").await;
        stop_and_check(&cluster, clients, &stop, &history).await;
    })
    .await;
}
