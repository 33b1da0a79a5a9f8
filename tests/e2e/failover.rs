//! Losing the leader: SIGKILL and SIGSTOP. A new leader is elected, writes go on through a
//! follower, the old leader comes back and catches up, and no `max_id` is ever seen to go down.

use std::collections::BTreeMap;
use std::time::Duration;
use std::time::Instant;

use leafraft_client::TagUpdate;
use reqwest::Method;

use crate::harness::new_tag;
use crate::harness::wait_until;
use crate::harness::ProcessCluster;

const TIMEOUT: Duration = Duration::from_secs(20);

/// Every `max_id` read during a run: per node (local reads may lag but never go back, restarts
/// included, `docs/semantics.md`) and the highest acknowledged or read through the leader (nothing may be
/// seen below it once all nodes caught up).
#[derive(Default)]
struct MaxIdHistory {
    per_node: BTreeMap<(u64, String), u64>,
    committed: BTreeMap<String, u64>,
}

impl MaxIdHistory {
    /// Records every tag's `max_id` as node `id` answers it; `consistent` reads go through the leader.
    async fn observe(&mut self, cluster: &mut ProcessCluster, id: u64, consistent: bool) {
        let path = if consistent { "/v1/tags?consistent=true" } else { "/v1/tags" };
        let (status, body) = cluster.request(id, Method::GET, path, None, None).await;
        if status.as_u16() == 503 {
            return; // NOT_READY: a restarting node answers nothing rather than an old state.
        }
        assert_eq!(status.as_u16(), 200, "GET {path} on node {id}: {body}");
        for tag in body["tags"].as_array().expect("tags") {
            let name = tag["tag"].as_str().expect("tag name").to_string();
            let max_id: u64 = tag["max_id"].as_str().expect("max_id string").parse().expect("decimal max_id");
            let seen = self.per_node.entry((id, name.clone())).or_insert(0);
            assert!(max_id >= *seen, "node {id}: max_id of '{name}' went down from {seen} to {max_id}");
            *seen = max_id;
            if consistent {
                self.commit(&name, max_id);
            }
        }
    }

    /// A `max_id` the cluster acknowledged (or a linearizable read saw): never seen lower again
    /// through the leader.
    fn commit(&mut self, tag: &str, max_id: u64) {
        let floor = self.committed.entry(tag.to_string()).or_insert(0);
        assert!(max_id >= *floor, "max_id of '{tag}' went down from committed {floor} to {max_id}");
        *floor = max_id;
    }

    /// Every node has caught up: each one's value of every tag is at least the committed one.
    fn check_caught_up(&self, ids: &[u64]) {
        for id in ids {
            for (tag, floor) in &self.committed {
                let seen = self.per_node.get(&(*id, tag.clone())).copied().unwrap_or(0);
                assert!(seen >= *floor, "node {id} shows max_id {seen} of '{tag}' below the committed {floor}");
            }
        }
    }
}

/// Twice in a row the leader is killed with SIGKILL: the others elect a new leader (within the
/// the 2 s of `docs/bars.md#safety`; the measured time is printed), a tag is created and a `max_id` raised through a
/// follower, the old leader restarts on its data directory and catches up (it lists the new tag,
/// reaches the leader's applied index), and no `max_id` is ever seen going down.
#[tokio::test]
async fn a_killed_leader_is_replaced_and_catches_up_after_restart() {
    let mut cluster = ProcessCluster::start(3);
    let mut history = MaxIdHistory::default();
    let mut leader = cluster.wait_leader(TIMEOUT).await;
    let created =
        cluster.client(leader).create_tag(&new_tag("order", Some(1000), Some(100), None)).await.expect("create order");
    history.commit("order", created.max_id);

    let mut failovers = Vec::new();
    for round in 1..=2u64 {
        for id in [1, 2, 3] {
            history.observe(&mut cluster, id, false).await;
        }

        let killed_at = Instant::now();
        cluster.kill(leader);
        let old = leader;
        leader = cluster.wait_leader(TIMEOUT).await;
        let failover = killed_at.elapsed();
        println!("round {round}: leader {old} killed; node {leader} leads after {failover:?}");
        assert_ne!(leader, old);
        failovers.push(failover);

        // Writes go on, through the surviving follower.
        let follower = [1, 2, 3].into_iter().find(|&id| id != old && id != leader).expect("a follower");
        let client = cluster.client(follower);
        let name = format!("after-kill-{round}");
        let tag = client.create_tag(&new_tag(&name, None, None, None)).await.expect("create after the failover");
        history.commit(&name, tag.max_id);
        let raised = 1000 + 10_000 * round;
        let update = TagUpdate { max_id: Some(raised), ..Default::default() };
        let tag = client.update_tag("order", &update).await.expect("raise max_id after the failover");
        assert_eq!(tag.max_id, raised);
        history.commit("order", raised);
        for id in [leader, follower] {
            history.observe(&mut cluster, id, true).await;
        }
        let target = cluster.status(leader).await.unwrap().applied_index;

        // The old leader comes back on its data and catches up.
        cluster.restart(old);
        let client = cluster.client(old);
        wait_until(TIMEOUT, &format!("node {old} to catch up after its restart"), || async {
            let status = client.cluster_status().await.map_err(|e| e.to_string())?;
            if status.applied_index < target {
                return Err(format!("applied {:?} of {target:?}", status.applied_index));
            }
            let tags = client.list_tags().await.map_err(|e| e.to_string())?;
            let order = tags.iter().find(|t| t.tag == "order").map(|t| t.max_id);
            if tags.iter().any(|t| t.tag == name) && order == Some(raised) {
                Ok(())
            } else {
                Err(format!("tags {:?}", tags.iter().map(|t| (&t.tag, &t.max_id)).collect::<Vec<_>>()))
            }
        })
        .await;
        assert_eq!(cluster.wait_leader(TIMEOUT).await, leader, "the restarted node must not disturb the leader");
        for id in [1, 2, 3] {
            history.observe(&mut cluster, id, false).await;
            history.observe(&mut cluster, id, true).await;
        }
        history.check_caught_up(&[1, 2, 3]);
    }
    for (round, failover) in failovers.iter().enumerate() {
        assert!(
            *failover <= Duration::from_secs(2),
            "round {}: a new leader took {failover:?} (docs/bars.md: 2 s)",
            round + 1
        );
    }
}

/// A leader paused with SIGSTOP is replaced; when it resumes it follows the new leader, applies
/// what was written meanwhile, and a write it did not see while paused is never undone.
#[tokio::test]
async fn a_paused_leader_is_replaced_and_follows_when_resumed() {
    let mut cluster = ProcessCluster::start(3);
    let mut history = MaxIdHistory::default();
    let paused = cluster.wait_leader(TIMEOUT).await;
    cluster.client(paused).create_tag(&new_tag("order", Some(1000), None, None)).await.expect("create order");
    history.commit("order", 1000);

    cluster.signal(paused, libc::SIGSTOP);
    let others: Vec<u64> = [1, 2, 3].into_iter().filter(|&id| id != paused).collect();
    let mut clients = Vec::new();
    for &id in &others {
        clients.push((id, cluster.client(id)));
    }
    let leader = wait_until(TIMEOUT, "the running nodes to elect a new leader", || async {
        let mut leaders = Vec::new();
        for (id, client) in &clients {
            let status = client.cluster_status().await.map_err(|e| format!("node {id}: {e}"))?;
            leaders.push(status.leader_id);
        }
        match leaders.as_slice() {
            [Some(a), Some(b)] if a == b && *a != paused => Ok(*a),
            _ => Err(format!("leaders {leaders:?}")),
        }
    })
    .await;
    let update = TagUpdate { max_id: Some(50_000), ..Default::default() };
    cluster.client(leader).update_tag("order", &update).await.expect("raise max_id while the old leader sleeps");
    history.commit("order", 50_000);

    cluster.signal(paused, libc::SIGCONT);
    let agreed = cluster.wait_leader(TIMEOUT).await;
    let client = cluster.client(paused);
    wait_until(TIMEOUT, "the resumed node to apply the raise", || async {
        let tag = client.get_tag("order").await.map_err(|e| e.to_string())?;
        if tag.max_id == 50_000 {
            Ok(())
        } else {
            Err(format!("max_id {}", tag.max_id))
        }
    })
    .await;
    for id in [1, 2, 3] {
        history.observe(&mut cluster, id, false).await;
        history.observe(&mut cluster, id, true).await;
    }
    history.check_caught_up(&[1, 2, 3]);
    println!("leader {paused} paused; node {leader} took over; after SIGCONT node {agreed} leads");
}
