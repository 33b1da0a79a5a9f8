//! `leafraft tag import FILE [--dry-run]` against running clusters: a Leaf `leaf_alloc` export
//! creates tags, importing it again changes nothing, a row that would lower `max_id` or any bad
//! row rejects the whole file, and `--dry-run` only prints.

use std::path::Path;
use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

use crate::harness::new_tag;
use crate::harness::run_binary;
use crate::harness::ProcessCluster;

const TIMEOUT: Duration = Duration::from_secs(20);
const CLI_TIMEOUT: Duration = Duration::from_secs(60);

/// Writes `text` to a file in a fresh temporary directory (kept alive by the returned guard).
fn file(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("leaf_alloc.tsv");
    std::fs::write(&path, text).expect("write the export");
    (dir, path)
}

async fn import(cluster: &mut ProcessCluster, id: u64, path: &Path, dry_run: bool) -> Output {
    let server = cluster.url(id);
    let path = path.to_str().expect("a UTF-8 path");
    let mut args = vec!["tag", "import", path, "--server", &server];
    if dry_run {
        args.push("--dry-run");
    }
    run_binary(&args, CLI_TIMEOUT).await
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Every tag with all its replicated fields (buffers left out), read through the leader.
async fn tags(cluster: &mut ProcessCluster, id: u64) -> Vec<Value> {
    let (status, body) = cluster.request(id, Method::GET, "/v1/tags?consistent=true", None, None).await;
    assert_eq!(status.as_u16(), 200, "{body}");
    let mut tags = body["tags"].as_array().cloned().unwrap_or_default();
    for tag in &mut tags {
        tag.as_object_mut().map(|t| t.remove("buffers"));
    }
    tags
}

/// `(tag, max_id, step, description)` of every tag.
fn summary(tags: &[Value]) -> Vec<(String, String, u64, String)> {
    tags.iter()
        .map(|t| {
            let s = |k: &str| t[k].as_str().unwrap_or_default().to_string();
            (s("tag"), s("max_id"), t["step"].as_u64().unwrap_or(0), s("description"))
        })
        .collect()
}

/// `mysql -B` output of `leaf_alloc` (header, an escaped tab in a description, a NULL one, one
/// row without the description column) imported through a follower creates the three tags with
/// their `max_id`, step and description; importing the same file again prints `unchanged` for
/// every row and changes nothing, `updated_at` included; a file with a higher `max_id` and a new
/// step raises and updates; the first IDs served continue from the imported `max_id`.
#[tokio::test]
async fn an_export_creates_tags_and_importing_it_again_changes_nothing() {
    let mut cluster = ProcessCluster::start(3);
    let leader = cluster.wait_leader(TIMEOUT).await;
    let follower = [1, 2, 3].into_iter().find(|&id| id != leader).expect("a follower");
    let export = "biz_tag\tmax_id\tstep\tdescription\n\
                  leaf-segment-test\t2001\t2000\tTest leaf Segment Mode Get Id\n\
                  order\t9007199254740993\t1000\tcol1\\tcol2 <b>\n\
                  coupon\t5\t100\tNULL\n\
                  message\t77\t10\n";
    let (_dir, path) = file(export);

    let output = import(&mut cluster, follower, &path, false).await;
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "import failed: {stdout}{}", text(&output.stderr));
    assert_eq!(stdout.lines().filter(|l| l.starts_with("create ")).count(), 4, "{stdout}");
    assert!(stdout.contains("imported: 4 create, 0 raise, 0 update, 0 unchanged"), "{stdout}");
    let after_first = tags(&mut cluster, leader).await;
    assert_eq!(
        summary(&after_first),
        [
            ("coupon".into(), "5".into(), 100, "".into()),
            ("leaf-segment-test".into(), "2001".into(), 2000, "Test leaf Segment Mode Get Id".into()),
            ("message".into(), "77".into(), 10, "".into()),
            ("order".into(), "9007199254740993".into(), 1000, "col1\tcol2 <b>".into()),
        ]
    );

    let output = import(&mut cluster, leader, &path, false).await;
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "re-import failed: {stdout}{}", text(&output.stderr));
    assert_eq!(stdout.lines().filter(|l| l.starts_with("unchanged ")).count(), 4, "{stdout}");
    assert!(stdout.contains("imported: 0 create, 0 raise, 0 update, 4 unchanged"), "{stdout}");
    assert_eq!(tags(&mut cluster, leader).await, after_first, "a re-import changed something (updated_at?)");

    let (_dir2, raise) = file("coupon\t500\t100\nmessage\t77\t20\tnotes\n");
    let output = import(&mut cluster, follower, &raise, false).await;
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", text(&output.stderr));
    assert!(stdout.contains("raise     coupon: max_id 5 -> 500"), "{stdout}");
    assert!(stdout.contains("update    message: step 10 -> 20, description \"\" -> \"notes\""), "{stdout}");
    let ids = crate::harness::segment_ids_within(&cluster.client(follower), "coupon", 2, TIMEOUT).await;
    assert_eq!(ids, [500, 501], "IDs continue from the imported max_id");
}

/// A row whose `max_id` is below the cluster's rejects the whole file before anything is applied:
/// exit status 1, the row's line number and "never lowered" on stderr, the new tag in the same file
/// not created, and the existing tag untouched.
#[tokio::test]
async fn a_row_that_would_lower_max_id_rejects_the_whole_file() {
    let mut cluster = ProcessCluster::start(1);
    cluster.wait_leader(TIMEOUT).await;
    cluster.client(1).create_tag(&new_tag("order", Some(5000), Some(100), Some("kept".into()))).await.expect("create");
    let before = tags(&mut cluster, 1).await;

    let (_dir, path) = file("fresh\t1\t1000\tnew\norder\t4000\t100\tkept\n");
    let output = import(&mut cluster, 1, &path, false).await;
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("line 2: tag 'order': max_id 4000 is below the cluster's 5000; max_id is never lowered"),
        "{stderr}"
    );
    assert!(stderr.contains("1 bad row(s); nothing applied"), "{stderr}");
    assert_eq!(tags(&mut cluster, 1).await, before, "something was applied");

    // A dry run refuses it the same way.
    let output = import(&mut cluster, 1, &path, true).await;
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    assert_eq!(tags(&mut cluster, 1).await, before);
}

/// One bad row among good ones rejects the file (exit 1, every bad row named by line, nothing
/// created); `--dry-run` of a good file prints create, raise and unchanged lines, exits 0 and
/// changes nothing.
#[tokio::test]
async fn one_bad_row_rejects_the_whole_file_and_a_dry_run_changes_nothing() {
    let mut cluster = ProcessCluster::start(1);
    cluster.wait_leader(TIMEOUT).await;
    let (_dir, bad) = file("biz_tag\tmax_id\tstep\tdescription\na\t1\t1000\t\nb\t1\t0\t\nc\t1\t1000\t\nd d\t1\t1\t\n");
    let output = import(&mut cluster, 1, &bad, false).await;
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("line 3: step must be between 1 and 10000000, got 0"), "{stderr}");
    assert!(stderr.contains("line 5: tag 'd d' may only contain"), "{stderr}");
    assert!(stderr.contains("2 bad row(s); nothing applied"), "{stderr}");
    assert!(tags(&mut cluster, 1).await.is_empty(), "a rejected file created tags");

    cluster.client(1).create_tag(&new_tag("old", Some(10), Some(5), None)).await.expect("create");
    cluster.client(1).create_tag(&new_tag("same", Some(7), Some(5), None)).await.expect("create");
    let before = tags(&mut cluster, 1).await;
    let (_dir2, good) = file("new\t1\t1000\t\nold\t20\t5\t\nsame\t7\t5\n");
    let output = import(&mut cluster, 1, &good, true).await;
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", text(&output.stderr));
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [
            "create    new: max_id 1, step 1000",
            "raise     old: max_id 10 -> 20",
            "unchanged same",
            "dry run, nothing changed: 1 create, 1 raise, 0 update, 1 unchanged",
        ]
    );
    assert_eq!(tags(&mut cluster, 1).await, before, "a dry run changed something");
}
