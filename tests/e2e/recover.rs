//! docs/operations.md "Losing a majority" and "Backups": `leafraft recover` from a survivor or a
//! backup builds a new cluster that never hands out an ID the old one did. Each test keeps its own
//! record of every ID clients received and checks that everything served after a recovery is
//! above everything served before it, for segment and snowflake IDs.

use std::collections::BTreeMap;
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

use leafraft_client::Client;

use crate::harness::files_below;
use crate::harness::new_tag;
use crate::harness::run_binary;
use crate::harness::wait_until;
use crate::harness::ProcessCluster;

const TIMEOUT: Duration = Duration::from_secs(30);
const SECRET: &str = "recover-secret";

/// The IDs clients received, by kind.
#[derive(Debug, Default)]
struct Served {
    segment: Vec<u64>,
    snowflake: Vec<u64>,
}

impl Served {
    /// Every ID of `later` is above every ID of `self`, kind by kind, and none repeats.
    #[track_caller]
    fn assert_below(&self, later: &Served, what: &str) {
        for (kind, before, after) in
            [("segment", &self.segment, &later.segment), ("snowflake", &self.snowflake, &later.snowflake)]
        {
            assert!(!before.is_empty() && !after.is_empty(), "{what}: no {kind} IDs to compare");
            let highest = before.iter().max().copied().unwrap_or(0);
            let lowest = after.iter().min().copied().unwrap_or(0);
            assert!(lowest > highest, "{what}: {kind} ID {lowest} served after, {highest} before");
        }
    }

    fn extend(&mut self, other: &Served) {
        self.segment.extend(&other.segment);
        self.snowflake.extend(&other.snowflake);
    }
}

/// `rounds` requests of `count` segment IDs of `tag` from `client`, and `count` snowflake IDs (once
/// the node holds a worker).
async fn take(client: &Client, tag: &str, rounds: usize, count: u64) -> Served {
    let mut served = Served::default();
    for _ in 0..rounds {
        // A refused request handed out nothing: asking again is safe (a first claim may take
        // longer than the 100 ms a request waits for it on a busy machine).
        let ids = wait_until(TIMEOUT, "segment IDs", || async {
            client.segment_ids(tag, count).await.map_err(|e| e.to_string())
        })
        .await;
        served.segment.extend(ids);
    }
    let snowflake =
        wait_until(TIMEOUT, "snowflake IDs", || async { client.snowflake_ids(count).await.map_err(|e| e.to_string()) })
            .await;
    served.snowflake.extend(snowflake);
    served
}

/// Every file below `dir` with its bytes.
fn contents(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    files_below(dir).into_iter().map(|file| (file.clone(), std::fs::read(&file).expect("read"))).collect()
}

/// Runs `leafraft recover ARGS`, which must succeed; answers its report.
async fn recover(args: &[&str]) -> String {
    let mut all = vec!["recover"];
    all.extend_from_slice(args);
    let output = run_binary(&all, TIMEOUT).await;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "recover {args:?}: {output:?}");
    assert!(stdout.contains("new cluster") && stdout.contains("next: leafraft serve"), "{stdout}");
    stdout
}

/// Starts the recovered member `id` on `dir`, then fresh, empty members `others` with `--join`,
/// and waits until all of them are voters.
async fn serve_recovered(cluster: &mut ProcessCluster, id: u64, dir: PathBuf, others: &[u64]) {
    cluster.set_data_dir(id, dir);
    cluster.start_node(id, &[]);
    cluster.wait_ready(id, TIMEOUT).await;
    let seed = cluster.addr(id);
    for &other in others {
        cluster.start_node(other, &["--join", &seed]);
    }
    let mut expected: Vec<u64> = others.iter().copied().chain([id]).collect();
    expected.sort_unstable();
    let all_voters = move |s: &leafraft_client::ClusterStatus| match s.voters == expected {
        true => Ok(()),
        false => Err("not every member is a voter yet".to_string()),
    };
    cluster.wait_status(id, TIMEOUT, "every member to be a voter", all_voters).await;
}

/// Two of three members are killed and wiped while the third lags (it was
/// paused while the others claimed more); `leafraft recover` on the third, killed too, builds a new
/// cluster that two fresh nodes join. Nothing it serves is at or below anything served before, and
/// the survivor's directory is left exactly as it was.
#[tokio::test]
async fn a_majority_lost_for_good_is_recovered_from_a_lagging_survivor() {
    let mut cluster = ProcessCluster::start(3);
    cluster.wait_leader(TIMEOUT).await;
    cluster.client(1).create_tag(&new_tag("t", None, Some(10), None)).await.expect("create t");
    let mut before = Served::default();
    for id in 1..=3 {
        before.extend(&take(&cluster.client(id), "t", 3, 10).await);
    }
    // The survivor falls behind: claims commit on nodes 1 and 2 alone.
    cluster.signal(3, libc::SIGSTOP);
    for id in [1, 2] {
        before.extend(&take(&cluster.client(id), "t", 15, 10).await);
    }
    for id in [1, 2] {
        cluster.kill(id);
        std::fs::remove_dir_all(cluster.data_dir(id)).expect("wipe");
    }
    cluster.kill(3);

    let old = cluster.data_dir(3);
    let untouched = contents(&old);
    let new = cluster.temp_path("node3-recovered");
    let addr = cluster.addr(3);
    let old_text = old.display().to_string();
    let new_text = new.display().to_string();
    // A dry run prints the margin table and writes nothing.
    let dry =
        run_binary(&["recover", "--data-dir", &new_text, "--from-data-dir", &old_text, "--dry-run"], TIMEOUT).await;
    let dry_report = String::from_utf8_lossy(&dry.stdout).into_owned();
    assert!(dry.status.success(), "{dry:?}");
    assert!(dry_report.contains("dry run") && dry_report.contains("OLD MAX_ID"), "{dry_report}");
    assert!(dry_report.lines().any(|line| line.starts_with("t ") && line.contains("segment")), "{dry_report}");
    assert!(!new.exists(), "a dry run wrote {}", new.display());
    let report =
        recover(&["--data-dir", &new_text, "--from-data-dir", &old_text, "--node-id", "3", "--advertise", &addr]).await;
    assert!(report.lines().any(|line| line.starts_with("t ") && line.contains("segment")), "{report}");
    assert_eq!(contents(&old), untouched, "the survivor's directory was written to");

    serve_recovered(&mut cluster, 3, new, &[1, 2]).await;
    let mut after = Served::default();
    for id in 1..=3 {
        after.extend(&take(&cluster.client(id), "t", 3, 10).await);
    }
    before.assert_below(&after, "recovered from a survivor");
}

/// `backup`, then `recover --from` on fresh machines. The backup is old
/// by then (more IDs were served after it), and it is restored twice: into a cluster that serves
/// and is lost, then into another. Each serves only above everything served before it.
#[tokio::test]
async fn a_backup_restored_twice_on_fresh_machines_never_reissues() {
    let mut old = ProcessCluster::new().with_secret(SECRET).start_members(&[1, 2, 3]);
    old.wait_leader(TIMEOUT).await;
    old.client(1).create_tag(&new_tag("t", None, Some(10), None)).await.expect("create t");
    let mut served = take(&old.client(2), "t", 3, 10).await;

    let file = old.temp_path("cluster.backup");
    let file_text = file.display().to_string();
    let url = old.url(3);
    let unauthorised = run_binary(&["backup", "--server", &url, "--out", &file_text], TIMEOUT).await;
    assert_eq!(unauthorised.status.code(), Some(1), "{unauthorised:?}");
    assert!(String::from_utf8_lossy(&unauthorised.stderr).contains("UNAUTHORIZED"), "{unauthorised:?}");
    let output = run_binary(&["backup", "--server", &url, "--secret", SECRET, "--out", &file_text], TIMEOUT).await;
    assert!(output.status.success(), "backup: {output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("1 tags"), "{output:?}");
    // Served after the backup: the copy does not show these claims.
    for id in 1..=3 {
        served.extend(&take(&old.client(id), "t", 5, 10).await);
    }
    // The old cluster is gone for good (its directory, holding the backup, stays).
    for id in 1..=3 {
        old.kill(id);
    }

    // The second restore names the backups' directory, as the recovery Job does: the newest
    // `leafraft-*.backup` in it is used (an older, damaged one beside it would be refused).
    let backups = old.temp_path("backups");
    std::fs::create_dir_all(&backups).expect("create the backups directory");
    std::fs::copy(&file, backups.join("leafraft-20990101T000000Z.backup")).expect("copy the backup");
    std::fs::write(backups.join("leafraft-20000101T000000Z.backup"), b"an older, damaged copy").expect("write");
    let backups_text = backups.display().to_string();
    for (round, from) in [("first", &file_text), ("second", &backups_text)] {
        let mut fresh = ProcessCluster::new().with_secret(SECRET);
        let dir = fresh.temp_path("node1-restored");
        let (dir_text, addr) = (dir.display().to_string(), fresh.addr(1));
        recover(&["--data-dir", &dir_text, "--from", from, "--node-id", "1", "--advertise", &addr]).await;
        serve_recovered(&mut fresh, 1, dir, &[2, 3]).await;
        let mut after = Served::default();
        for id in 1..=3 {
            after.extend(&take(&fresh.client(id), "t", 3, 10).await);
        }
        served.assert_below(&after, &format!("the {round} restore of an old backup"));
        served.extend(&after);
    }
}

/// What `recover` cannot use it refuses with exit status 1 and one line on stderr, and writes
/// nothing: a target that is not empty, a damaged or newer backup, a survivor a process still runs
/// on. A missing source is a usage error (2).
#[tokio::test]
async fn recover_refuses_what_it_cannot_use() {
    let mut cluster = ProcessCluster::start(1);
    cluster.wait_leader(TIMEOUT).await;
    cluster.client(1).create_tag(&new_tag("t", None, None, None)).await.expect("create t");
    let (file, url) = (cluster.temp_path("good.backup"), cluster.url(1));
    let file_text = file.display().to_string();
    assert!(run_binary(&["backup", "--server", &url, "--out", &file_text], TIMEOUT).await.status.success());
    let good = std::fs::read(&file).expect("backup");
    let write = |name: &str, bytes: &[u8]| {
        let path = cluster.temp_path(name);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("create dir");
        std::fs::write(&path, bytes).expect("write");
        path.display().to_string()
    };
    let mut damaged = good.clone();
    let middle = damaged.len() / 2;
    damaged[middle] ^= 1;
    let damaged = write("damaged.backup", &damaged);
    let mut newer = good.clone();
    newer[leafraft::backup::MAGIC.len()] = 9;
    let newer = write("newer.backup", &newer);
    let busy = write("busy/file", b"x");
    let busy = Path::new(&busy).parent().expect("dir").display().to_string();
    let running = cluster.data_dir(1).display().to_string();
    let target = cluster.temp_path("target").display().to_string();
    let no_backups = cluster.temp_path("no-backups");
    std::fs::create_dir_all(&no_backups).expect("create dir");
    let no_backups = no_backups.display().to_string();

    let cases: [(&[&str], &str); 5] = [
        (&["--data-dir", &target, "--from", &no_backups], "no backup (leafraft-*.backup) in"),
        (&["--data-dir", &busy, "--from", &file_text], "is not empty"),
        (&["--data-dir", &target, "--from", &damaged], "checksum"),
        (&["--data-dir", &target, "--from", &newer], "format version 9"),
        (&["--data-dir", &target, "--from-data-dir", &running], "in use by a running leafraft process"),
    ];
    for (args, expected) in cases {
        let mut all = vec!["recover"];
        all.extend_from_slice(args);
        let output = run_binary(&all, TIMEOUT).await;
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {output:?}");
        let lines: Vec<&str> = stderr.lines().collect();
        assert!(
            lines.len() == 1 && lines[0].starts_with("error: ") && lines[0].contains(expected),
            "{args:?}: {stderr}"
        );
        assert!(!Path::new(&target).exists(), "{args:?} wrote the target");
    }
    let usage = run_binary(&["recover", "--data-dir", &target], TIMEOUT).await;
    assert_eq!(usage.status.code(), Some(2), "{usage:?}");
}
