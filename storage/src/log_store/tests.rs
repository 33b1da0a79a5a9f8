//! What the log store acknowledges, and when: nothing before `fdatasync` has completed.

use std::sync::mpsc;
use std::sync::Mutex;

use openraft::storage::RaftLogStorageExt;

use super::*;
use crate::engine::probe::Hook;
use crate::fixtures::*;

fn failing_sync() -> Hook {
    Arc::new(|| Err(io::Error::other("injected fdatasync failure")))
}

/// A hook that reports when a sync reaches it and then blocks until released.
fn stalling_sync() -> (Hook, mpsc::Receiver<()>, mpsc::Sender<()>) {
    let (entered_tx, entered_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (entered_tx, release_rx) = (Mutex::new(entered_tx), Mutex::new(release_rx));
    let hook: Hook = Arc::new(move || {
        entered_tx.lock().expect("lock").send(()).expect("test waits");
        release_rx.lock().expect("lock").recv().map_err(io::Error::other)
    });
    (hook, entered_rx, release_tx)
}

#[tokio::test]
async fn vote_append_truncate_and_purge_are_fdatasynced() {
    let (_dir, store) = temp_store(true);
    let mut log = store.log.clone();
    let probe = Arc::clone(&log.engine.probe);

    log.save_vote(&typ::Vote::new(1, 1)).await.expect("vote");
    assert_eq!(probe.syncs(), 1);
    log.blocking_append([blank(1, 1), blank(1, 2), blank(1, 3)]).await.expect("append");
    assert_eq!(probe.syncs(), 2);
    log.truncate(log_id(1, 3)).await.expect("truncate");
    assert_eq!(probe.syncs(), 3);
    log.purge(log_id(1, 1)).await.expect("purge");
    assert_eq!(probe.syncs(), 4);
    // A hint only: not synced.
    log.save_committed(Some(log_id(1, 2))).await.expect("committed");
    assert_eq!(probe.syncs(), 4);
}

#[tokio::test]
async fn fsync_off_skips_fdatasync() {
    let (_dir, store) = temp_store(false);
    let mut log = store.log.clone();
    log.save_vote(&typ::Vote::new(1, 1)).await.expect("vote");
    log.blocking_append([blank(1, 1)]).await.expect("append");
    assert_eq!(log.engine.probe.syncs(), 0);
}

/// The append is readable at once but not acknowledged while its fdatasync has not finished.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_is_acknowledged_only_after_fdatasync() {
    let (_dir, store) = temp_store(true);
    let mut log = store.log.clone();
    let (hook, entered, release) = stalling_sync();
    log.engine.probe.set_hook(Some(hook));

    let mut appender = log.clone();
    let append = tokio::spawn(async move { appender.blocking_append([blank(1, 1), blank(1, 2)]).await });
    // Wait (without a sleep) until the append's sync is inside fdatasync.
    tokio::task::spawn_blocking(move || entered.recv()).await.expect("join").expect("sync entered");

    let mut reader = log.get_log_reader().await;
    assert_eq!(reader.try_get_log_entries(0..10).await.expect("read"), [blank(1, 1), blank(1, 2)]);
    assert!(!append.is_finished(), "the append was acknowledged before its fdatasync completed");
    assert_eq!(log.engine.probe.syncs(), 0);

    release.send(()).expect("release the sync");
    append.await.expect("join").expect("append acknowledged after the sync");
    assert_eq!(log.engine.probe.syncs(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vote_returns_and_is_reported_only_after_fdatasync() {
    let (_dir, store) = temp_store(true);
    let log = store.log.clone();
    let (hook, entered, release) = stalling_sync();
    log.engine.probe.set_hook(Some(hook));

    let mut voter = log.clone();
    let vote = tokio::spawn(async move { voter.save_vote(&typ::Vote::new(2, 1)).await });
    tokio::task::spawn_blocking(move || entered.recv()).await.expect("join").expect("sync entered");
    assert!(!vote.is_finished(), "save_vote returned before its fdatasync completed");
    // A leader's term confirmation reads this: never a vote that is not on disk yet, and the
    // saved one as soon as openraft may act on it (when save_vote returns).
    assert_eq!(log.durability().saved_vote(), None, "the vote was reported before its fdatasync");
    release.send(()).expect("release the sync");
    vote.await.expect("join").expect("vote saved");
    assert_eq!(log.durability().saved_vote(), Some(typ::Vote::new(2, 1)));
    assert_eq!(log.engine.probe.syncs(), 1);
}

/// A failed fdatasync is reported: through the append callback, and as errors of the other calls.
#[tokio::test]
async fn failed_fdatasync_is_never_acknowledged() {
    let (_dir, store) = temp_store(true);
    let mut log = store.log.clone();
    log.engine.probe.set_hook(Some(failing_sync()));

    let err = log.blocking_append([blank(1, 1)]).await.expect_err("append must fail");
    assert!(err.to_string().contains("injected fdatasync failure"), "{err}");
    let err = log.save_vote(&typ::Vote::new(1, 1)).await.expect_err("vote must fail");
    assert!(err.to_string().contains("injected fdatasync failure"), "{err}");
    assert!(log.truncate(log_id(1, 1)).await.is_err());
    assert!(log.purge(log_id(1, 1)).await.is_err());
    assert_eq!(log.engine.probe.syncs(), 0);
}

#[tokio::test]
async fn entries_ranges_and_log_state() {
    let (_dir, store) = temp_store(false);
    let mut log = store.log.clone();
    assert_eq!(log.get_log_state().await.expect("state"), LogState { last_purged_log_id: None, last_log_id: None });

    let entries: Vec<typ::Entry> = (1..=300).map(|i| blank(1, i)).collect();
    log.blocking_append(entries.clone()).await.expect("append");
    assert_eq!(log.try_get_log_entries(255..=257).await.expect("read"), entries[254..257]);
    assert_eq!(log.try_get_log_entries(290..).await.expect("read"), entries[289..]);
    assert_eq!(log.try_get_log_entries(..3).await.expect("read"), entries[..2]);
    assert!(log.try_get_log_entries(7..7).await.expect("read").is_empty());
    assert!(log.try_get_log_entries((Bound::Included(9), Bound::Excluded(3))).await.expect("read").is_empty());
    assert_eq!(log.try_get_log_entries(300..=u64::MAX).await.expect("read"), entries[299..]);

    log.purge(log_id(1, 300)).await.expect("purge all");
    let state = log.get_log_state().await.expect("state");
    assert_eq!(state, LogState { last_purged_log_id: Some(log_id(1, 300)), last_log_id: Some(log_id(1, 300)) });
}

/// A crash between recording `last_purged` and deleting leaves entries below it; the log state
/// stays right and reopening deletes them.
#[tokio::test]
async fn interrupted_purge_is_finished_at_open() {
    let (dir, store) = temp_store(false);
    let mut log = store.log.clone();
    log.blocking_append((1..=5).map(|i| blank(1, i))).await.expect("append");
    // The first half of a purge only.
    log.put_meta(keys::LAST_PURGED, &log_id(1, 5)).expect("write last_purged");
    let state = log.get_log_state().await.expect("state");
    assert_eq!(state.last_log_id, Some(log_id(1, 5)));
    drop((log, store));

    let store = crate::open(dir.path(), &options(false)).expect("reopen");
    let mut log = store.log.clone();
    assert!(log.try_get_log_entries(..).await.expect("read").is_empty());
    let state = log.get_log_state().await.expect("state");
    assert_eq!(state, LogState { last_purged_log_id: Some(log_id(1, 5)), last_log_id: Some(log_id(1, 5)) });
}

/// A store opened as node 1's, with node 1 the committed leader of term 1.
async fn leader_store() -> (tempfile::TempDir, crate::Store) {
    let dir = tempfile::TempDir::new().expect("temp dir");
    let options = crate::StoreOptions { local_node: Some(1), ..options(true) };
    let store = crate::open(dir.path(), &options).expect("open");
    let mut vote = typ::Vote::new(1, 1);
    vote.commit();
    store.log.clone().save_vote(&vote).await.expect("vote");
    (dir, store)
}

/// The leader's own entries count at once (so openraft replicates them while they sync), but no
/// commit of them goes on (`save_committed`, which openraft calls before it applies) until they
/// are on disk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaders_own_append_counts_at_once_but_its_commit_waits_for_the_sync() {
    let (_dir, store) = leader_store().await;
    let mut log = store.log.clone();
    let (hook, entered, release) = stalling_sync();
    log.engine.probe.set_hook(Some(hook));

    // `blocking_append` returns when the callback fired: here while the sync is still stalled.
    log.blocking_append([blank(1, 1), blank(1, 2)]).await.expect("append counted at once");
    tokio::task::spawn_blocking(move || entered.recv()).await.expect("join").expect("sync entered");
    assert_eq!(log.durability().durable().end, 0, "nothing of the append is durable yet");

    let mut committer = log.clone();
    let mut commit = tokio::spawn(async move { committer.save_committed(Some(log_id(1, 2))).await });
    // A negative check needs a bound: unblocked, the commit returns within microseconds.
    let early = tokio::time::timeout(std::time::Duration::from_millis(300), &mut commit).await;
    assert!(early.is_err(), "a commit went on before the leader's entries were on disk");

    release.send(()).expect("release the sync");
    commit.await.expect("join").expect("the commit goes on after the sync");
    assert_eq!(log.durability().durable().end, 3);
}

/// Entries of another leader (this node follows node 2) are acknowledged only after their sync,
/// even though this store runs with the early path on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_followers_append_is_still_acknowledged_only_after_its_sync() {
    let dir = tempfile::TempDir::new().expect("temp dir");
    let store = crate::open(dir.path(), &crate::StoreOptions { local_node: Some(1), ..options(true) }).expect("open");
    let mut log = store.log.clone();
    let mut vote = typ::Vote::new(1, 2);
    vote.commit();
    log.save_vote(&vote).await.expect("vote");
    let (hook, entered, release) = stalling_sync();
    log.engine.probe.set_hook(Some(hook));

    let entries = [2, 3].map(|index| typ::Entry {
        log_id: typ::LogId::new(openraft::CommittedLeaderId::new(1, 2), index),
        payload: openraft::EntryPayload::Blank,
    });
    let mut appender = log.clone();
    let append = tokio::spawn(async move { appender.blocking_append(entries).await });
    tokio::task::spawn_blocking(move || entered.recv()).await.expect("join").expect("sync entered");
    assert!(!append.is_finished(), "a follower acknowledged entries before their fdatasync completed");
    release.send(()).expect("release the sync");
    append.await.expect("join").expect("acknowledged after the sync");
}

/// A background sync that fails stops every later commit: nothing it covered is ever applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_background_sync_fails_the_commit() {
    let (_dir, store) = leader_store().await;
    let mut log = store.log.clone();
    log.engine.probe.set_hook(Some(failing_sync()));
    log.blocking_append([blank(1, 1)]).await.expect("counted at once");
    let committed = log.save_committed(Some(log_id(1, 1))).await;
    assert!(committed.is_err(), "a commit went on although its entries never reached the disk");
    // And the next append is no longer counted early: it reports the failure itself.
    assert!(log.blocking_append([blank(1, 2)]).await.is_err());
}

/// A sync that began before a truncation cannot make the entries written after it count as
/// durable: they are other entries at the same indexes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_from_before_a_truncation_does_not_cover_what_replaced_it() {
    let (_dir, store) = leader_store().await;
    let log = store.log.clone();
    let durability = log.durability();
    durability.wrote(2);
    durability.synced(durability.ticket());
    durability.wrote(5);
    let stale = durability.ticket();
    durability.truncated(3);
    durability.wrote(4);
    durability.synced(stale);
    assert_eq!(durability.durable().end, 3, "a stale sync raised durability past a truncation");
}

/// A node that led when it stopped starts with its vote no longer committed, durably; any other
/// vote, and any vote of a store not opened as a member, comes back as it was saved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reopened_leader_starts_with_its_vote_not_committed() {
    let committed = |term, node| {
        let mut vote = typ::Vote::new(term, node);
        vote.commit();
        vote
    };
    for (saved, local_node, expected) in [
        (committed(3, 1), Some(1), typ::Vote::new(3, 1)),
        (committed(3, 2), Some(1), committed(3, 2)),
        (typ::Vote::new(3, 1), Some(1), typ::Vote::new(3, 1)),
        (committed(3, 1), None, committed(3, 1)),
    ] {
        let dir = tempfile::TempDir::new().expect("temp dir");
        let options = crate::StoreOptions { local_node, ..options(true) };
        let store = crate::open(dir.path(), &options).expect("open");
        store.log.clone().save_vote(&saved).await.expect("vote");
        drop(store);

        let store = crate::open(dir.path(), &options).expect("reopen");
        let vote = store.log.clone().read_vote().await.expect("read vote");
        assert_eq!(vote, Some(expected), "saved {saved} as node {local_node:?}");
        drop(store);
        // What the first reopen wrote is durable, not just in sled's cache: it survives a reopen
        // that changes nothing.
        let store = crate::open(dir.path(), &options).expect("reopen again");
        assert_eq!(store.log.clone().read_vote().await.expect("read vote"), Some(expected));
    }
}
