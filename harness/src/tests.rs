//! The harness on a stand-in for the binary (`sh`, which ignores `serve` as `$0`): the log gets
//! the output, the caller's `LEAFRAFT_*` variables do not reach the child, signals and exits are
//! seen, and a dropped process is gone.

use std::time::Duration;
use std::time::Instant;

use super::*;

/// `sh -c SCRIPT serve`: the harness appends `serve`, which `sh -c` takes as `$0`.
fn shell(script: &str) -> Serve {
    let mut serve = Serve::under(&["sh".to_string(), "-c".to_string()], script);
    serve.env("KEPT", "yes");
    serve
}

fn wait_exit(process: &mut ServeProcess) -> ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = process.try_exit() {
            return status;
        }
        assert!(Instant::now() < deadline, "the process did not exit");
        std::thread::yield_now();
    }
}

#[test]
fn output_goes_to_the_log_and_only_the_given_environment_reaches_the_node() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let log = dir.path().join("node.log");
    // Set in this test binary only; the harness must keep it from the child.
    std::env::set_var("LEAFRAFT_FROM_CALLER", "leaked");
    let mut serve = shell("echo \"$0 ${LEAFRAFT_FROM_CALLER:-clean} $KEPT $NO_COLOR\"; echo err >&2");
    let mut process = serve.log_to(&log).expect("log file").spawn().expect("spawn");
    assert!(wait_exit(&mut process).success());
    assert_eq!(std::fs::read_to_string(&log).expect("log"), "serve clean yes 1\nerr\n");
}

#[test]
fn signals_reach_the_process_and_a_dropped_process_is_killed() {
    let mut process = shell("sleep 30").spawn().expect("spawn");
    assert!(process.is_running());
    process.signal(libc::SIGTERM).expect("SIGTERM");
    let status = wait_exit(&mut process);
    assert!(!status.success());
    let process = shell("sleep 30").spawn().expect("spawn");
    let pid = libc::pid_t::try_from(process.pid()).expect("a pid");
    drop(process);
    // SAFETY: signal 0 only asks whether the (reaped, so gone) process exists.
    assert_eq!(unsafe { libc::kill(pid, 0) }, -1, "the dropped process still runs");
}
