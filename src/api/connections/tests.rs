//! Unit tests of admission, the idle sweep and the open-file limit.

use std::io;

use tokio::io::AsyncReadExt;
use tokio::io::AsyncWriteExt;

use super::*;

/// The connections stay under the open-file limit with room for the node's own descriptors:
/// 256 of them, or half of a small limit; `--max-connections` below that is kept as it is.
#[test]
fn connections_are_admitted_only_as_far_as_the_open_file_limit_leaves_room() {
    assert_eq!(admitted_connections(10_000, Some(1_024)), 768);
    assert_eq!(admitted_connections(10_000, Some(128)), 64);
    assert_eq!(admitted_connections(10_000, Some(1_048_576)), 10_000);
    assert_eq!(admitted_connections(500, Some(1_024)), 500);
    assert_eq!(admitted_connections(10_000, Some(u64::MAX)), 10_000, "unlimited");
    assert_eq!(admitted_connections(10_000, None), 10_000, "unknown: as asked");
    assert_eq!(admitted_connections(10_000, Some(0)), 1, "never none at all");
}

/// The soft limit ends at the hard limit, and what is answered is what is in force.
#[test]
fn the_open_file_limit_is_raised_to_the_hard_limit() {
    let answered = raise_open_file_limit().expect("getrlimit works here");
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `getrlimit` only writes the struct passed.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) }, 0);
    assert_eq!(limit.rlim_cur, limit.rlim_max);
    #[allow(clippy::useless_conversion)]
    let in_force = u64::try_from(limit.rlim_cur).unwrap_or(u64::MAX);
    assert_eq!(answered, in_force);
}

fn remote(source: &str) -> SocketAddr {
    SocketAddr::new(source.parse().unwrap(), 40_000)
}

/// A connection from `source` over an in-memory pipe (the far end answered too), admitted
/// with a free place.
async fn connect(admission: &Admission, source: &str) -> (Guarded<tokio::io::DuplexStream>, tokio::io::DuplexStream) {
    let (near, far) = tokio::io::duplex(64);
    let place = admission.place().await;
    let guarded = admission.admit(near, place, &remote(source)).map_err(|_| "refused").unwrap();
    (guarded, far)
}

/// The clock moves only where the test sweeps, so the bounds are exact on any machine: a
/// connection that moves a byte every 200 ms outlives a 300 ms idle timeout, and one that
/// then moves none is closed one tick after the timeout, not before.
#[tokio::test]
async fn an_idle_socket_times_out_and_a_busy_one_does_not() {
    const IDLE_MS: u64 = 300;
    let metrics = Arc::new(Metrics::new());
    let admission = Admission::unswept(1, 1, Duration::from_millis(IDLE_MS), metrics.clone());
    let tick = u64::try_from(admission.0.sweep.as_millis()).unwrap();
    let (mut guarded, mut far) = connect(&admission, "10.0.0.1").await;
    assert!(admission.0.places.clone().try_acquire_owned().is_err(), "the one place is taken");
    let mut byte = [0u8; 1];
    let mut now = 0;
    for _ in 0..6 {
        now += 200;
        admission.0.sweep_at(now);
        assert!(guarded.closed().is_none(), "closed at {now} ms although busy");
        far.write_all(b"x").await.unwrap();
        guarded.read_exact(&mut byte).await.unwrap();
    }
    let reading = tokio::spawn(async move {
        let error = guarded.read_exact(&mut byte).await.unwrap_err();
        (error, guarded)
    });
    admission.0.sweep_at(now + IDLE_MS + tick - 1);
    assert_eq!(metrics.connections.open.get(), 1);
    assert!(!reading.is_finished());
    admission.0.sweep_at(now + IDLE_MS + tick);
    let (error, guarded) = reading.await.unwrap();
    assert_eq!(error.kind(), io::ErrorKind::TimedOut);
    assert_eq!(metrics.connections.open.get(), 1);
    drop(guarded);
    assert_eq!(metrics.connections.open.get(), 0);
    assert!(admission.0.places.clone().try_acquire_owned().is_ok(), "the place is given back");
}

/// One source holds its share of the places and no more; others still get theirs, and a
/// place given back can be taken again by the source.
#[tokio::test]
async fn one_source_holds_only_its_share_of_the_places() {
    let metrics = Arc::new(Metrics::new());
    let admission = Admission::unswept(8, places_per_source(8, None), Duration::from_secs(60), metrics.clone());
    assert_eq!(admission.0.per_source, 2, "a quarter of the places");
    let first = connect(&admission, "10.0.0.1").await;
    let _second = connect(&admission, "::ffff:10.0.0.1").await;
    let (near, _far) = tokio::io::duplex(64);
    let place = admission.place().await;
    let refused = admission.admit(near, place, &remote("10.0.0.1"));
    assert!(refused.is_err(), "a third connection from one source (its IPv4-mapped form counts too)");
    let _other = connect(&admission, "10.0.0.2").await;
    drop(first);
    let _again = connect(&admission, "10.0.0.1").await;
    assert_eq!(metrics.connections.open.get(), 3);
    assert_eq!(places_per_source(2, None), 1, "never none");
    assert_eq!(places_per_source(100, Some(500)), 100, "never more than every place");
}

/// At the cap, a new connection gets the place of a connection that never sent a byte, the
/// one idle the longest among them, before one that did; one answering a request is never
/// closed for room, however long it has been quiet.
#[tokio::test]
async fn at_the_cap_silent_then_the_longest_idle_connections_make_room() {
    let metrics = Arc::new(Metrics::new());
    let admission = Admission::unswept(4, 4, Duration::from_secs(60), metrics.clone());
    let (busy, _busy_far) = connect(&admission, "10.0.0.1").await;
    let answering = busy.request_marker().begin();
    admission.0.sweep_at(1_000);
    let (mut talker, mut talker_far) = connect(&admission, "10.0.0.2").await;
    let mut byte = [0u8; 1];
    talker_far.write_all(b"x").await.unwrap();
    talker.read_exact(&mut byte).await.unwrap();
    admission.0.sweep_at(5_000);
    let (mut oldest, _oldest_far) = connect(&admission, "10.0.0.3").await;
    admission.0.sweep_at(10_000);
    let (mut newest, mut newest_far) = connect(&admission, "10.0.0.4").await;

    let making_room = tokio::spawn({
        let admission = admission.clone();
        async move { admission.place().await }
    });
    let error = oldest.read_exact(&mut byte).await.unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::ConnectionAborted, "the silent connection idle the longest");
    assert_eq!(metrics.connections.evicted.get(), 1);
    assert_eq!(metrics.connections.waited_at_limit.get(), 1);
    assert!(busy.closed().is_none(), "the connection answering a request stays");
    assert!(talker.closed().is_none(), "the connection that sent a byte stays, idle longer as it is");
    newest_far.write_all(b"x").await.unwrap();
    newest.read_exact(&mut byte).await.expect("the newer silent connection stays");
    drop(oldest);
    let place = making_room.await.unwrap();
    let (near, _far) = tokio::io::duplex(64);
    let admitted = admission.admit(near, place, &remote("10.0.0.5")).map_err(|_| "refused").unwrap();

    // With every connection answering a request, the next one waits for a place instead.
    // (However slow the machine, a wait cut short by the timeout is a wait.)
    let _answering = [&newest, &talker, &admitted].map(|connection| connection.request_marker().begin());
    let waited = tokio::time::timeout(3 * EVICTION_RETRY, admission.place()).await;
    assert!(waited.is_err(), "a connection answering a request was closed for room");
    assert_eq!(metrics.connections.evicted.get(), 1);
    drop(answering);
}

/// Issue 42: the header-read timeout is kept by the sweep, not by a timer per request. A
/// connection with no request in progress is closed one tick after the timeout since its
/// admission, however many bytes it sends meanwhile (a slowloris trickling a header).
#[tokio::test]
async fn a_connection_without_a_request_is_closed_after_the_header_read_timeout() {
    const HEADER_READ_MS: u64 = 300;
    let metrics = Arc::new(Metrics::new());
    let timeouts = (Duration::from_secs(60), Some(Duration::from_millis(HEADER_READ_MS)));
    let admission = Admission::unswept_with(1, 1, timeouts, metrics.clone());
    let tick = u64::try_from(admission.0.sweep.as_millis()).unwrap();
    assert_eq!(tick, HEADER_READ_MS / 16, "the sweep ticks on the shorter timeout");
    let (mut guarded, mut far) = connect(&admission, "10.0.0.1").await;
    let mut byte = [0u8; 1];
    for now in [100, 200, HEADER_READ_MS + tick - 1] {
        admission.0.sweep_at(now);
        assert!(guarded.closed().is_none(), "closed at {now} ms, before its header-read timeout");
        far.write_all(b"G").await.unwrap();
        guarded.read_exact(&mut byte).await.unwrap();
    }
    let reading = tokio::spawn(async move {
        let error = guarded.read_exact(&mut byte).await.unwrap_err();
        (error, guarded)
    });
    admission.0.sweep_at(HEADER_READ_MS + tick);
    let (error, _guarded) = reading.await.unwrap();
    assert_eq!(error.kind(), io::ErrorKind::TimedOut);
    assert!(error.to_string().contains("header-read timeout"), "{error}");
}

/// A request in progress (its headers read, its answer not yet written) is not held to the
/// header-read timeout, only to the idle timeout; the end of its answer starts the wait for the
/// next request's headers.
#[tokio::test]
async fn the_header_read_timeout_runs_from_the_end_of_the_last_answer() {
    const HEADER_READ_MS: u64 = 300;
    let metrics = Arc::new(Metrics::new());
    let timeouts = (Duration::from_secs(60), Some(Duration::from_millis(HEADER_READ_MS)));
    let admission = Admission::unswept_with(1, 1, timeouts, metrics.clone());
    let tick = u64::try_from(admission.0.sweep.as_millis()).unwrap();
    let (guarded, _far) = connect(&admission, "10.0.0.1").await;
    admission.0.sweep_at(100);
    let answering = guarded.request_marker().begin();
    admission.0.sweep_at(5_000);
    assert!(guarded.closed().is_none(), "closed while answering a request");
    drop(answering);
    admission.0.sweep_at(5_000 + HEADER_READ_MS + tick - 1);
    assert!(guarded.closed().is_none(), "closed before the header-read timeout after its answer");
    admission.0.sweep_at(5_000 + HEADER_READ_MS + tick);
    let error = guarded.closed().expect("closed after the header-read timeout");
    assert_eq!(error.kind(), io::ErrorKind::TimedOut);
}
