//! The chaos checker can say FAIL: `leafraft-chaos` against nodes with a bug planted on
//! purpose must end `RESULT: FAIL`, naming the broken rule; the same run without the bug passes,
//! so the FAIL is the bug's doing and not the settings'.
//!
//! Planted bugs exist only in builds of leafraft with the cargo feature `planted` (`src/planted.rs`);
//! this crate's dev-dependency turns it on for `cargo test --workspace`. A build without it (every
//! `cargo build --release`) holds none of their code and the runner refuses `--plant` against it:
//! `a_build_without_the_feature_holds_no_planted_code_and_is_refused`.

use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

const CHAOS: &str = env!("CARGO_BIN_EXE_leafraft-chaos");

/// The `leafraft` binary of the same build. Cargo only gives a test the paths of its own
/// package's binaries, but `cargo test --workspace` builds every binary into the same directory
/// before any test runs.
fn leafraft_binary() -> PathBuf {
    let binary = PathBuf::from(CHAOS).with_file_name(format!("leafraft{}", std::env::consts::EXE_SUFFIX));
    assert!(
        binary.exists(),
        "{} is missing: run these tests with `cargo test --workspace` (or `cargo build -p leafraft` first)",
        binary.display()
    );
    binary
}

/// A short run on loopback with no faults: the planted bug alone must be enough.
///
/// One run at a time: the tests of this file would otherwise run their five clusters at once,
/// and on two cores each then serves so few requests that a shared worker's two holders may
/// never meet in one millisecond (CI saw 201 snowflake answers in a run and no collision; alone,
/// the same run answers ~620 and collides ~70 times).
async fn chaos(seed: u64, plant: Option<&str>) -> Output {
    static ONE_AT_A_TIME: std::sync::OnceLock<tokio::sync::Mutex<()>> = std::sync::OnceLock::new();
    let _alone = ONE_AT_A_TIME.get_or_init(|| tokio::sync::Mutex::new(())).lock().await;
    let mut command = tokio::process::Command::new(CHAOS);
    command.arg("--binary").arg(leafraft_binary());
    command.args(["--seed", &seed.to_string(), "--nodes", "3", "--duration", "6s"]);
    command.args(["--net", "loopback", "--faults", "none", "--clients", "4"]);
    if let Some(bug) = plant {
        command.args(["--plant", bug]);
    }
    command.kill_on_drop(true);
    match tokio::time::timeout(Duration::from_secs(150), command.output()).await {
        Ok(output) => output.expect("run leafraft-chaos"),
        Err(_) => panic!("leafraft-chaos did not finish within 150 s"),
    }
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

async fn assert_caught(bug: &str, check: &str) {
    assert_caught_by(bug, &[check]).await;
}

/// The run fails, and among the failing checks are all of `checks`; answers the report.
async fn assert_caught_by(bug: &str, checks: &[&str]) -> String {
    let output = chaos(11, Some(bug)).await;
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "a planted {bug} must fail the run:\n{text}");
    for check in checks {
        assert!(text.contains(&format!("FAIL {check}")), "{bug} must fail {check}:\n{text}");
    }
    assert!(text.lines().any(|line| line.starts_with("RESULT: FAIL")), "no FAIL verdict:\n{text}");
    text
}

#[tokio::test(flavor = "multi_thread")]
async fn planted_serve_twice_is_caught() {
    assert_caught("serve-twice", "unique-segment-ids").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn planted_uncommitted_claim_is_caught() {
    assert_caught("uncommitted-claim", "unique-segment-ids").await;
}

/// One worker, two holders: the snowflake checks (not the segment ones) must fail.
#[tokio::test(flavor = "multi_thread")]
async fn planted_shared_worker_is_caught_by_the_snowflake_checks() {
    let text = assert_caught_by("shared-worker", &["unique-snowflake-ids", "worker-holders-disjoint"]).await;
    assert!(text.contains("PASS unique-segment-ids"), "the segment checks are not this bug's business:\n{text}");
}

/// A time-sequence range served twice: the time-sequence checks (not the segment ones) fail.
#[tokio::test(flavor = "multi_thread")]
async fn planted_timeseq_serve_twice_is_caught() {
    let text = assert_caught_by("timeseq-serve-twice", &["unique-timeseq-ids"]).await;
    assert!(text.contains("PASS unique-segment-ids"), "the segment checks are not this bug's business:\n{text}");
}

/// A claim batch that applies only its first claim: the ranges of the others are handed
/// out again by later claims, of segment tags and of the time-sequence namespace alike.
#[tokio::test(flavor = "multi_thread")]
async fn planted_batch_first_claim_only_is_caught() {
    let text = assert_caught_by("batch-first-claim-only", &[]).await;
    assert!(
        text.contains("FAIL unique-segment-ids") || text.contains("FAIL unique-timeseq-ids"),
        "IDs of a claim that was answered but not applied must be handed out twice:\n{text}"
    );
}

/// A scrambled tag served through a map that is not a permutation: two sequence numbers share
/// an image, and the uniqueness check sees the scrambled IDs themselves.
#[tokio::test(flavor = "multi_thread")]
async fn planted_scramble_not_bijective_is_caught() {
    let text = assert_caught_by("scramble-not-bijective", &["unique-segment-ids"]).await;
    assert!(text.contains("chaos-scrambled"), "the duplicate is the scrambled tag's:\n{text}");
}

/// Claims applied seeing only the window blocks of their very window: window blocks overlap the
/// one-second claims and the other nodes' windows of their seconds, and the time-sequence checks
/// fail.
#[tokio::test(flavor = "multi_thread")]
async fn planted_window_overlap_is_caught() {
    let text = assert_caught_by("window-overlap", &["unique-timeseq-ids"]).await;
    assert!(
        text.contains("PASS unique-segment-ids"),
        "the segment checks are not this bug's business:
{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_same_run_without_a_planted_bug_passes() {
    let output = chaos(11, None).await;
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "a clean run must pass:\n{text}");
    assert!(text.lines().any(|line| line == "RESULT: PASS seed=11 nodes=3"), "no PASS verdict:\n{text}");
}

/// Strings only the planted-bug code puts into a binary: the variable that arms a bug, and the
/// source file's name, which the line tables (`debug = "line-tables-only"` in release) carry for
/// any code compiled from it.
const PLANTED_MARKERS: [&str; 2] = ["LEAFRAFT_PLANTED_BUG", "planted.rs"];

fn planted_markers_in(binary: &std::path::Path) -> Vec<&'static str> {
    let bytes = std::fs::read(binary).expect("read the leafraft binary");
    PLANTED_MARKERS
        .into_iter()
        .filter(|marker| bytes.windows(marker.len()).any(|window| window == marker.as_bytes()))
        .collect()
}

/// Runs `leafraft-chaos --plant` against `binary`, which must be refused before any node starts.
fn assert_plant_refused(binary: &std::path::Path) {
    let output = std::process::Command::new(CHAOS)
        .arg("--binary")
        .arg(binary)
        .args(["--plant", "serve-twice", "--seed", "1", "--nodes", "3", "--duration", "1s", "--net", "loopback"])
        .output()
        .expect("run leafraft-chaos");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "--plant against {} must be refused: {stderr}", binary.display());
    assert!(output.stdout.is_empty(), "a refusal starts nothing: {}", String::from_utf8_lossy(&output.stdout));
    assert_eq!(stderr.lines().count(), 1, "the refusal is one line: {stderr}");
    assert!(stderr.contains("cannot plant bugs"), "the line says why: {stderr}");
}

/// A release build holds no planted-bug code, and `--plant` against a
/// binary that cannot plant is refused with one line. The binary of this test build (which has
/// the feature) shows the markers are there to be found; a stand-in that fails `planted-bugs`
/// is refused; and the release build `LEAFRAFT_RELEASE_BIN` names, when set, exists, holds no
/// marker, refuses `planted-bugs` and is refused too.
#[test]
fn a_build_without_the_feature_holds_no_planted_code_and_is_refused() {
    let own = leafraft_binary();
    assert_eq!(planted_markers_in(&own), PLANTED_MARKERS, "this test build of leafraft has the planted code");
    let stand_in_dir = tempfile::tempdir().expect("temporary directory");
    let stand_in = stand_in_dir.path().join("leafraft");
    std::fs::write(&stand_in, "#!/bin/sh\necho \"error: unrecognized subcommand '$1'\" >&2\nexit 2\n").expect("write");
    let mut permissions = std::fs::metadata(&stand_in).expect("stat").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&stand_in, permissions).expect("chmod");
    assert_plant_refused(&stand_in);

    // Only a binary named on purpose: a `target/release/leafraft` found lying around may predate
    // the sources under test (CI names the one `scripts/chaos.sh` has just built).
    let Some(release) = std::env::var_os("LEAFRAFT_RELEASE_BIN").map(PathBuf::from) else {
        eprintln!("skipped the release-binary half: set LEAFRAFT_RELEASE_BIN to a release build of leafraft");
        return;
    };
    if release == own {
        eprintln!(
            "skipped the release-binary half: this test runs in the release build, whose leafraft has the test feature"
        );
        return;
    }
    // Named but absent is a failure: `.ci/run` names the binary it means to check, and a path
    // that went stale (a moved target directory) must not read as a check that passed.
    assert!(
        release.exists(),
        "LEAFRAFT_RELEASE_BIN names {}, which does not exist (cargo build --release builds it)",
        release.display()
    );
    assert_eq!(planted_markers_in(&release), Vec::<&str>::new(), "{} holds planted-bug code", release.display());
    let listed = std::process::Command::new(&release).arg("planted-bugs").output().expect("run leafraft");
    assert!(!listed.status.success(), "{} answers planted-bugs", release.display());
    assert_plant_refused(&release);
}
