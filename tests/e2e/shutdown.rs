//! Graceful stop: SIGTERM makes a node stop in order and exit 0, and it rejoins on restart. A
//! whole cluster stopped (the last two members together, as `scripts/cluster.sh down` does) gives
//! back every segment tail and worker, and the script says which node could not when one could not.

use std::path::Path;
use std::process::Command;
use std::time::Duration;
use std::time::Instant;

use crate::harness::client_of;
use crate::harness::free_port;
use crate::harness::new_tag;
use crate::harness::wait_until;
use crate::harness::ProcessCluster;
use crate::harness::BIN;

const TIMEOUT: Duration = Duration::from_secs(20);

/// The order `node::run::RunningNode::stop` logs in.
const SHUTDOWN_LINES: [&str; 4] =
    ["shutting down: no new requests", "requests drained", "raft stopped", "store flushed; stopped"];

/// SIGTERM to the leader: it exits with status 0 within 5 s, its log shows the ordered shutdown
/// lines (stop accepting, drain, Raft down, store flushed), the others elect a new leader, and the
/// node restarted on its data directory rejoins and applies a tag written while it was down.
#[tokio::test]
async fn sigterm_stops_a_node_in_order_with_status_zero() {
    let mut cluster = ProcessCluster::start(3);
    let leader = cluster.wait_leader(TIMEOUT).await;
    cluster.client(leader).create_tag(&new_tag("order", None, None, None)).await.expect("create a tag");

    let took = cluster.terminate(leader, Duration::from_secs(5)).await;
    println!("node {leader} stopped {took:?} after SIGTERM");
    let log = cluster.log(leader);
    let mut from = 0;
    for line in SHUTDOWN_LINES {
        let at =
            log[from..].find(line).unwrap_or_else(|| panic!("'{line}' missing or out of order in the log:\n{log}"));
        from += at + line.len();
    }
    assert!(!log.contains("panicked"), "{log}");

    let next = cluster.wait_leader(TIMEOUT).await;
    assert_ne!(next, leader);
    cluster
        .client(next)
        .create_tag(&new_tag("while-down", None, None, None))
        .await
        .expect("write while the node is down");
    cluster.restart(leader);
    cluster.wait_ready(leader, TIMEOUT).await;
    let client = cluster.client(leader);
    crate::harness::wait_until(TIMEOUT, "the restarted node to apply the tag written while it was down", || async {
        client.get_tag("while-down").await.map(|_| ()).map_err(|e| e.to_string())
    })
    .await;
}

/// What a node logs when a give-back at its stop did not commit (a gap, not a duplicate).
const NOT_GIVEN_BACK: [&str; 3] =
    ["not released", "not every segment tail was given back", "unexpected answer to a release"];

/// The last two members stopped together: the leader's give-backs need the follower's vote and
/// the follower's need the leader, so neither may leave Raft the moment its own are done. Each
/// round every node holds segment buffers (a tail to give back) and a snowflake worker; one
/// follower stops alone, then the leader and the other follower at once. Either order of their
/// finishing must leave nothing unreleased; three rounds, since which finishes first varies.
#[tokio::test]
async fn the_last_two_members_stopped_together_both_give_everything_back() {
    let mut cluster = ProcessCluster::start(3);
    let leader = cluster.wait_leader(TIMEOUT).await;
    cluster.client(leader).create_tag(&new_tag("order", None, Some(1000), None)).await.expect("create a tag");
    for round in 1..=3 {
        for node in [1, 2, 3] {
            cluster.wait_ready(node, TIMEOUT).await;
            let client = cluster.client(node);
            wait_until(TIMEOUT, &format!("round {round}: IDs from node {node}"), || async {
                client.segment_ids("order", 5).await.map_err(|e| e.to_string())?;
                client.snowflake_ids(1).await.map_err(|e| e.to_string())
            })
            .await;
        }
        let leader = cluster.wait_leader(TIMEOUT).await;
        let followers: Vec<u64> = [1, 2, 3].into_iter().filter(|&node| node != leader).collect();
        cluster.terminate(followers[0], TIMEOUT).await;
        let sent = Instant::now();
        cluster.signal(followers[1], libc::SIGTERM);
        cluster.signal(leader, libc::SIGTERM);
        for node in [followers[1], leader] {
            let status = cluster.wait_exit(node, TIMEOUT).await;
            assert!(status.success(), "round {round}: node {node} stopped with {status}");
        }
        let took = sent.elapsed();
        println!("round {round}: leader {leader} and follower {} stopped together in {took:?}", followers[1]);
        for node in [1, 2, 3] {
            let log = cluster.log(node);
            for needle in NOT_GIVEN_BACK {
                assert!(!log.contains(needle), "round {round}: node {node} logged '{needle}':\n{log}");
            }
            assert!(log.contains("segment tail"), "round {round}: node {node} gave back no tail:\n{log}");
            assert!(log.contains("snowflake worker released"), "round {round}: node {node}:\n{log}");
        }
        // Nothing waited for a write timeout (5 s): both committed with the other still there.
        assert!(took < Duration::from_secs(4), "round {round}: the last two took {took:?} to stop");
        for node in [1, 2, 3] {
            cluster.restart(node);
        }
    }
}

/// `scripts/cluster.sh` on its own ports and directory, with this build's binary; its nodes are
/// killed (by their pid files) when the test ends, however it ends.
struct ScriptCluster {
    dir: tempfile::TempDir,
    ports: [u16; 3],
}

impl ScriptCluster {
    fn new() -> ScriptCluster {
        ScriptCluster { dir: tempfile::tempdir().expect("a temporary directory"), ports: [(); 3].map(|()| free_port()) }
    }

    fn run(&self, command: &str) -> std::process::Output {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/cluster.sh");
        let ports = self.ports.map(|port| port.to_string()).join(" ");
        Command::new("bash")
            .arg(script)
            .arg(command)
            .env("LEAFRAFT_BIN", BIN)
            .env("LEAFRAFT_CLUSTER_DIR", self.dir.path())
            .env("LEAFRAFT_CLUSTER_PORTS", ports)
            .output()
            .expect("run scripts/cluster.sh")
    }

    fn url(&self, node: usize) -> String {
        format!("http://127.0.0.1:{}", self.ports[node - 1])
    }

    /// Every node serves segment and snowflake IDs (so each holds a tail and a worker).
    async fn take_ids(&self) {
        let leader = client_of(&self.url(1), None);
        wait_until(TIMEOUT, "the tag", || async {
            match leader.create_tag(&new_tag("order", None, Some(1000), None)).await {
                Ok(_) => Ok(()),
                Err(e) if e.to_string().contains("TAG_EXISTS") => Ok(()),
                Err(e) => Err(e.to_string()),
            }
        })
        .await;
        for node in 1..=3 {
            let client = client_of(&self.url(node), None);
            wait_until(TIMEOUT, &format!("IDs from node {node}"), || async {
                client.segment_ids("order", 5).await.map_err(|e| e.to_string())?;
                client.snowflake_ids(1).await.map_err(|e| e.to_string())
            })
            .await;
        }
    }

    fn pid(&self, node: usize) -> Option<i32> {
        std::fs::read_to_string(self.dir.path().join(format!("node{node}.pid"))).ok()?.trim().parse().ok()
    }
}

impl Drop for ScriptCluster {
    fn drop(&mut self) {
        for node in 1..=3 {
            if let Some(pid) = self.pid(node) {
                // SAFETY: a signal to a process this test started (through the script).
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `scripts/cluster.sh down` says "cluster stopped" only when every node gave everything back
/// (four times, as the race between the last two varies), and when a node could not (the last one
/// alone, its peers killed), it names the node and what, and exits 1.
#[tokio::test]
async fn cluster_script_down_reports_every_tail_given_back_or_names_what_was_not() {
    let cluster = ScriptCluster::new();
    for round in 1..=4 {
        let up = cluster.run("up");
        assert!(up.status.success(), "round {round}: up: {}{}", text(&up.stdout), text(&up.stderr));
        cluster.take_ids().await;
        let started = Instant::now();
        let down = cluster.run("down");
        let (out, err) = (text(&down.stdout), text(&down.stderr));
        println!("round {round}: down took {:?}", started.elapsed());
        assert!(down.status.success(), "round {round}: down: {out}{err}");
        assert!(out.contains("cluster stopped; every node gave back"), "round {round}: {out}{err}");
    }

    // Two nodes killed: the last one cannot commit its give-backs, and the script says so.
    let up = cluster.run("up");
    assert!(up.status.success(), "up: {}{}", text(&up.stdout), text(&up.stderr));
    cluster.take_ids().await;
    let pids: Vec<i32> = (1..=3).map(|node| cluster.pid(node).expect("a pid file")).collect();
    for &pid in &pids[1..] {
        // SAFETY: processes this test started (through the script).
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let down = cluster.run("down");
    let (out, err) = (text(&down.stdout), text(&down.stderr));
    assert_eq!(down.status.code(), Some(1), "{out}{err}");
    assert!(!out.contains("cluster stopped;"), "{out}{err}");
    assert!(err.contains("not everything was given back") && err.contains("node 1: "), "{out}{err}");
    assert!(err.contains("not released") || err.contains("not every segment tail"), "{out}{err}");
}
