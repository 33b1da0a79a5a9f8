//! `scripts/chaos.sh --ci`, CI's chaos stage, judged against stand-in runners that answer as
//! `leafraft-chaos` does (its exit codes, its `faults:` line): the set fails on a refused command
//! line, on a run that cannot run on a CI machine, and on a fault kind it names but never injected;
//! it passes only a set in which every named kind was injected. The real runner's own exit codes
//! are at the end.

use std::path::Path;
use std::path::PathBuf;
use std::process::Command;
use std::process::Output;

const CHAOS: &str = env!("CARGO_BIN_EXE_leafraft-chaos");

/// A stand-in for `leafraft-chaos`: it records its arguments, names every kind of its `--faults`
/// as injected once (but `$STUB_NEVER`), then `$STUB_PADDING` made-up kinds, and exits 0; the
/// power-loss run exits `$STUB_POWER_EXIT`, printing what the runner prints for that code.
const STAND_IN: &str = r#"#!/usr/bin/env bash
echo "$*" >>"$STUB_CALLS"
faults=""
prev=""
for arg in "$@"; do
  [ "$prev" = --faults ] && faults=$arg
  prev=$arg
done
case $faults in
  power-loss*)
    case ${STUB_POWER_EXIT:-0} in
      2) echo "error: unexpected argument '--fsync-typo' found" >&2; exit 2 ;;
      77) echo "RESULT: CANNOT RUN HERE (the power-loss faults need FUSE: /dev/fuse cannot be opened)"; exit 77 ;;
    esac
    ;;
esac
line=""
for kind in ${faults//,/ }; do
  [ "$kind" = "${STUB_NEVER:-}" ] && continue
  # A kind a long run misses (as a loaded machine may), which a run of it alone injects.
  [ "$kind" = "${STUB_MISSED:-}" ] && [ "$kind" != "$faults" ] && continue
  line="${line:+$line, }$kind 1"
done
if [ "${STUB_PADDING:-0}" -gt 0 ]; then
  line="$line$(seq -f ', padding-%g 1' 1 "$STUB_PADDING" | tr -d '\n')"
fi
echo "faults: ${line:-none}"
echo "RESULT: PASS"
"#;

struct Set {
    _dir: tempfile::TempDir,
    runner: PathBuf,
    calls: PathBuf,
}

impl Set {
    fn new() -> Set {
        let dir = tempfile::tempdir().expect("temporary directory");
        let runner = dir.path().join("leafraft-chaos");
        std::fs::write(&runner, STAND_IN).expect("write the stand-in");
        let mut permissions = std::fs::metadata(&runner).expect("stat").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
        std::fs::set_permissions(&runner, permissions).expect("chmod");
        let calls = dir.path().join("calls");
        Set { _dir: dir, runner, calls }
    }

    /// `scripts/chaos.sh --ci` with the stand-in, `CI` as given, and the stand-in's settings.
    fn run(&self, ci: Option<&str>, vars: &[(&str, &str)]) -> Output {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/chaos.sh");
        let mut command = Command::new("timeout");
        command.arg("60").arg("bash").arg(script).arg("--ci");
        command.env("LEAFRAFT_CHAOS_RUNNER", &self.runner).env("STUB_CALLS", &self.calls).env_remove("CI");
        if let Some(ci) = ci {
            command.env("CI", ci);
        }
        command.envs(vars.iter().copied());
        let output = command.output().expect("run scripts/chaos.sh");
        assert_ne!(output.status.code(), Some(124), "scripts/chaos.sh --ci did not finish within 60 s");
        output
    }

    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(&self.calls).unwrap_or_default().lines().map(str::to_string).collect()
    }
}

fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// The set looked a kind up in what the runs injected with `printf ... | grep -q` under
/// `pipefail`: `grep -q` leaves at the first match, `printf` still writing then dies of SIGPIPE,
/// and the lookup read "not injected". A kind found early in a long list was then run again
/// (flaky with the real list; with one longer than a pipe's buffer, every time).
#[test]
fn regression_a_kind_found_early_in_a_long_list_counts_as_injected() {
    let set = Set::new();
    let output = set.run(Some("true"), &[("STUB_PADDING", "6000")]);
    assert!(output.status.success(), "{}", text(&output));
    let calls = set.calls();
    assert_eq!(calls.len(), 5, "no top-up run: every kind was injected: {calls:?}\n{}", text(&output));
}

#[test]
fn a_set_that_injected_every_kind_it_names_passes_and_every_run_is_strict() {
    let set = Set::new();
    let output = set.run(Some("true"), &[]);
    assert!(output.status.success(), "{}", text(&output));
    let calls = set.calls();
    assert_eq!(
        calls.len(),
        5,
        "three runs of every kind, one of the isolated leader's quick restarts and one of power loss: {calls:?}"
    );
    assert!(
        calls.iter().any(|call| call.contains("--election-timeout-ms 1500 --faults isolated-leader-restarts")),
        "the isolated leader's quick restarts run alone, every node on 1500 ms: {calls:?}"
    );
    assert!(calls.iter().all(|call| call.contains("--strict")), "every run of the set is strict: {calls:?}");
    // Issue 35: the set moves a busy tag to monotonic and judges real-time order from the move on.
    let switching = calls.iter().filter(|call| call.contains("switch-to-monotonic")).count();
    assert_eq!(switching, 3, "every run of every kind moves chaos-switch to monotonic: {calls:?}");
}

/// The power-loss run's command line refused (exit 2, as clap refuses a mistyped flag) was read as
/// "FUSE unusable here" and skipped: the stage passed without a single power cut.
#[test]
fn regression_a_refused_command_line_fails_the_ci_set() {
    let set = Set::new();
    for ci in [Some("true"), None] {
        let output = set.run(ci, &[("STUB_POWER_EXIT", "2")]);
        let text = text(&output);
        assert_eq!(output.status.code(), Some(1), "CI={ci:?}: a refused command line must fail the set:\n{text}");
        assert!(text.contains("seed 1 (power loss): leafraft-chaos exited 2"), "the failure says which run:\n{text}");
        assert!(!text.contains("SKIPPED"), "nothing is skipped:\n{text}");
    }
}

#[test]
fn a_run_that_cannot_run_here_fails_in_ci_and_is_skipped_elsewhere() {
    let set = Set::new();
    let output = set.run(Some("true"), &[("STUB_POWER_EXIT", "77")]);
    let in_ci = text(&output);
    assert_eq!(output.status.code(), Some(1), "in CI a missing piece fails:\n{in_ci}");
    assert!(in_ci.contains("/dev/fuse cannot be opened"), "the failure names the missing piece:\n{in_ci}");
    let output = set.run(None, &[("STUB_POWER_EXIT", "77")]);
    let elsewhere = text(&output);
    assert!(output.status.success(), "outside CI the run is skipped:\n{elsewhere}");
    assert!(elsewhere.contains("SKIPPED seed 1 (power loss)"), "and says so:\n{elsewhere}");
}

/// "Between them, all fourteen fault kinds", said and never checked: a kind this machine cannot
/// inject, or that no seed rolls, must fail the set, named.
#[test]
fn a_fault_kind_the_set_names_but_never_injected_fails_it() {
    let set = Set::new();
    for never in ["bridge", "lose-majority", "power-loss-all"] {
        let output = set.run(Some("true"), &[("STUB_NEVER", never)]);
        let text = text(&output);
        assert_eq!(output.status.code(), Some(1), "{never} never injected must fail:\n{text}");
        assert!(text.contains(&format!("never injected: {never}")), "the failure names {never}:\n{text}");
    }
}

/// A kind the three runs missed gets a run of its own, which must inject it.
#[test]
fn a_kind_the_runs_missed_gets_a_run_of_its_own() {
    let set = Set::new();
    let output = set.run(Some("true"), &[("STUB_MISSED", "pause-follower")]);
    assert!(output.status.success(), "{}", text(&output));
    let calls = set.calls();
    assert_eq!(calls.len(), 6, "{calls:?}");
    assert!(calls[3].contains("--faults pause-follower --strict"), "the fourth run is the missed kind's: {calls:?}");
}

/// The runner's own codes: 2 for a command line it refuses (clap's code), never the code of a
/// machine that cannot run the faults (77); nothing starts.
#[test]
fn the_runner_refuses_a_bad_command_line_with_exit_2() {
    for args in [&["--no-such-flag"][..], &["--faults", "kill-leader,no-such-kind"], &["--nodes", "three"]] {
        let output = Command::new(CHAOS).args(args).output().expect("run leafraft-chaos");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?} must be refused: {stderr}");
        assert!(
            output.stdout.is_empty(),
            "{args:?}: a refusal starts nothing: {}",
            String::from_utf8_lossy(&output.stdout)
        );
    }
}
