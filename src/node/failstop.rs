//! Fail-stop: a node whose storage fails stops and exits non-zero, so a supervisor (systemd,
//! Docker, Kubernetes) restarts or replaces it instead of leaving a process that answers HTTP
//! with nothing behind it.
//!
//! Two watchers, whichever fires first: openraft stops its core on any storage error (a failed
//! append, apply or read, a value that does not decode), which shows in its metrics; and a probe
//! of the data directory, because a node that writes nothing (no claims, no snowflake extension)
//! would not notice that its directory vanished or turned read-only until much later.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

use raft::Raft;

/// How often the data directory is probed: a lost directory is noticed within this time.
pub const PROBE_INTERVAL: Duration = Duration::from_millis(500);

/// A probe that takes longer than this (a hung disk) counts as a failure.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// The file a probe creates and removes again.
const PROBE_FILE: &str = ".leafraft-probe";

/// Completes with the reason once Raft has stopped on its own or the data directory cannot be
/// written; never completes while both are fine. Dropped (cancelled) on a graceful stop.
pub async fn storage_failure(raft: Raft, data_dir: PathBuf) -> String {
    tokio::select! {
        reason = raft_stopped(raft) => reason,
        reason = data_dir_unusable(data_dir) => reason,
    }
}

/// Completes when openraft reports its core stopped (`running_state` is an error).
async fn raft_stopped(raft: Raft) -> String {
    let mut metrics = raft.metrics();
    loop {
        if let Err(fatal) = &metrics.borrow_and_update().running_state {
            return format!("raft stopped: {fatal}");
        }
        if metrics.changed().await.is_err() {
            return match &metrics.borrow().running_state {
                Err(fatal) => format!("raft stopped: {fatal}"),
                Ok(()) => "raft stopped".to_string(),
            };
        }
    }
}

/// Completes when a probe of `dir` fails: it is gone, was replaced by another directory, or a
/// file cannot be created in it.
async fn data_dir_unusable(dir: PathBuf) -> String {
    let identity = match std::fs::metadata(&dir) {
        Ok(meta) => (meta.dev(), meta.ino()),
        Err(e) => return format!("data directory {} cannot be read: {e}", dir.display()),
    };
    let mut ticks = tokio::time::interval(PROBE_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let probed = dir.clone();
        let probe = tokio::task::spawn_blocking(move || probe(&probed, identity));
        match tokio::time::timeout(PROBE_TIMEOUT, probe).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(reason))) => return reason,
            Ok(Err(e)) => return format!("probing the data directory failed: {e}"),
            Err(_) => return format!("data directory {} did not answer within {PROBE_TIMEOUT:?}", dir.display()),
        }
    }
}

fn probe(dir: &Path, identity: (u64, u64)) -> Result<(), String> {
    let meta = std::fs::metadata(dir).map_err(|e| format!("data directory {} is gone: {e}", dir.display()))?;
    if (meta.dev(), meta.ino()) != identity {
        return Err(format!("data directory {} was replaced by another directory", dir.display()));
    }
    let file = dir.join(PROBE_FILE);
    std::fs::write(&file, b"probe")
        .and_then(|()| std::fs::remove_file(&file))
        .map_err(|e| format!("data directory {} cannot be written: {e}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_fails_when_the_directory_goes_or_is_replaced() {
        let parent = tempfile::tempdir().expect("temp dir");
        let dir = parent.path().join("data");
        std::fs::create_dir(&dir).expect("create");
        let meta = std::fs::metadata(&dir).expect("stat");
        let identity = (meta.dev(), meta.ino());
        assert_eq!(probe(&dir, identity), Ok(()));
        assert!(!dir.join(PROBE_FILE).exists(), "the probe file is removed again");

        let moved = parent.path().join("moved");
        std::fs::rename(&dir, &moved).expect("move away");
        assert!(probe(&dir, identity).unwrap_err().contains("is gone"));
        std::fs::create_dir(&dir).expect("create another");
        assert!(probe(&dir, identity).unwrap_err().contains("replaced"));
    }
}
