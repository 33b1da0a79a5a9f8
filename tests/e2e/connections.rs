//! Connections are held to their timeouts: 500 TLS connections left idle
//! after the handshake, 500 that sent half a request's headers and 50 that stalled in a body are
//! all closed within the documented timeouts (the header-read timeout, the idle timeout), while a
//! well-behaved client is served throughout, with a p99 within a few times its p99 before (a
//! bound relative to what this machine does, not a number of milliseconds).

use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::ServerName;
use tokio::io::AsyncReadExt;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::certs::write_atomically;
use crate::certs::Ca;
use crate::harness::ProcessCluster;
use crate::regression_credentials::series_sum;

const TIMEOUT: Duration = Duration::from_secs(30);
const HEADER_READ: Duration = Duration::from_secs(2);
const IDLE: Duration = Duration::from_secs(4);
/// How much later than its timeout a connection may be seen closed (the timer, the scheduler of
/// a loaded machine, this test's own reads).
const SLACK: Duration = Duration::from_millis(1500);

/// Raises this process's open-file limit to its hard limit, so 1,000 connections fit (the node
/// inherits it), and answers that limit.
fn raise_file_limit() -> u64 {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `getrlimit` and `setrlimit` only read and write the struct passed.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0, "getrlimit");
        limit.rlim_cur = limit.rlim_max;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0, "setrlimit");
    }
    assert!(limit.rlim_cur >= 2400, "the open-file limit {} is too low for this test", limit.rlim_cur);
    #[allow(clippy::useless_conversion)]
    u64::try_from(limit.rlim_cur).unwrap_or(u64::MAX)
}

/// The connections a node admits by default under an open-file limit of `open_files`: 10,000,
/// or the limit less the 256 descriptors kept for the node's own use (half of a small limit).
fn default_places(open_files: u64) -> f64 {
    let for_connections = open_files - 256.min(open_files / 2);
    10_000.min(for_connections) as f64
}

/// The 99th percentile of `latencies`.
fn p99(mut latencies: Vec<Duration>) -> Duration {
    latencies.sort();
    latencies[latencies.len() * 99 / 100]
}

fn connector(ca: &str) -> TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    for certificate in CertificateDer::pem_slice_iter(ca.as_bytes()) {
        roots.add(certificate.expect("a PEM certificate")).expect("a CA certificate");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    TlsConnector::from(Arc::new(config))
}

/// A TLS connection to `addr` that has finished its handshake and, when `first` is given, sent it.
async fn open(connector: &TlsConnector, addr: &str, first: &[u8]) -> TlsStream<TcpStream> {
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let name = ServerName::try_from("127.0.0.1").expect("a server name").to_owned();
    let mut tls = connector.connect(name, tcp).await.expect("a TLS handshake");
    if !first.is_empty() {
        tls.write_all(first).await.expect("send");
        tls.flush().await.expect("flush");
    }
    tls
}

/// Waits until the node closes `connection` (it answers EOF or an error, or a 408 it may send
/// first), and answers how long after `since` that was.
async fn closed(mut connection: TlsStream<TcpStream>, since: Instant) -> Duration {
    let mut buffer = [0u8; 1024];
    loop {
        match tokio::time::timeout(TIMEOUT, connection.read(&mut buffer)).await {
            Ok(Ok(0) | Err(_)) => return since.elapsed(),
            Ok(Ok(_)) => continue,
            Err(_) => panic!("a connection is still open after {TIMEOUT:?}"),
        }
    }
}

/// Requests `/v1/cluster` until `stop` (and at least `at_least` times), answering each
/// request's latency.
fn well_behaved(
    url: String,
    ca: Vec<u8>,
    stop: Arc<AtomicBool>,
    at_least: usize,
) -> tokio::task::JoinHandle<Vec<Duration>> {
    tokio::spawn(async move {
        let http = crate::harness::tls_http(&ca);
        let mut latencies = Vec::new();
        while !stop.load(Ordering::Relaxed) || latencies.len() < at_least {
            let started = Instant::now();
            let answer = http.get(format!("{url}/v1/cluster")).send().await.expect("the node answers");
            assert_eq!(answer.status().as_u16(), 200);
            answer.bytes().await.expect("a body");
            latencies.push(started.elapsed());
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        latencies
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_half_sent_tls_connections_are_closed_and_others_served() {
    let open_files = raise_file_limit();
    let ca = Ca::new("leafraft CA");
    let mut cluster = ProcessCluster::new().with_tls(false, ca.pem().as_bytes());
    let dir = cluster.tls_dir();
    ca.node(1).write(&dir.join("node1.pem"), &dir.join("node1.key"));
    write_atomically(&dir.join("ca.pem"), &ca.pem());
    let (header_read, idle) = (HEADER_READ.as_millis().to_string(), IDLE.as_millis().to_string());
    // Every connection below comes from 127.0.0.1: let one address hold them all (its default
    // share is a quarter of the places, fewer than 1,050 under a hard limit below 4,456).
    let per_source = ["--max-connections-per-source", "10000"];
    cluster.start_node(
        1,
        &[&["--header-read-timeout-ms", &header_read, "--idle-timeout-ms", &idle][..], &per_source].concat(),
    );
    cluster.wait_ready(1, TIMEOUT).await;
    let (url, addr) = (cluster.url(1), cluster.addr(1));
    // What this machine answers with nothing else going on.
    let before = well_behaved(url.clone(), ca.pem().into_bytes(), Arc::new(AtomicBool::new(true)), 100);
    let p99_before = p99(before.await.expect("the well-behaved client"));
    let stop = Arc::new(AtomicBool::new(false));
    let client = well_behaved(url, ca.pem().into_bytes(), stop.clone(), 100);

    let connector = connector(&ca.pem());
    let mut waits = Vec::new();
    let body =
        b"POST /v1/tags HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"tag\"";
    let kinds: [(&str, &[u8], usize, Duration); 3] = [
        ("idle", b"", 500, HEADER_READ),
        ("half a request", b"GET /v1/tags HTTP/1.1\r\nhost: x\r\n", 500, HEADER_READ),
        ("a stalled body", body, 50, IDLE),
    ];
    for (what, first, count, timeout) in kinds {
        for _ in 0..count {
            let connection = open(&connector, &addr, first).await;
            waits.push(tokio::spawn(async move { (what, timeout, closed(connection, Instant::now()).await) }));
        }
    }
    for wait in waits {
        let (what, timeout, after) = wait.await.expect("a waiting task");
        assert!(after <= timeout + SLACK, "{what}: closed after {after:?}, its timeout is {timeout:?}");
    }
    stop.store(true, Ordering::Relaxed);
    let latencies = client.await.expect("the well-behaved client");
    let count = latencies.len();
    let p99_during = p99(latencies);
    // The held connections cost the others little: a p99 within ten times the one before (or
    // 50 ms, on a machine so fast that ten times its p99 is below what a scheduler guarantees).
    // Waiting for a place, as when idle connections held them all, costs seconds.
    let bound = (10 * p99_before).max(Duration::from_millis(50));
    assert!(p99_during <= bound, "p99 {p99_during:?} over {count} requests, {p99_before:?} before");

    let metrics = cluster.get_text(1, "/metrics").await.1;
    let timed_out =
        |reason: &str| series_sum(&metrics, &format!("leafraft_connections_timed_out_total{{reason=\"{reason}\"}}"));
    assert!(timed_out("header_read") >= 1000.0, "header-read timeouts:\n{metrics}");
    assert!(timed_out("idle") >= 50.0, "idle timeouts:\n{metrics}");
    assert!(series_sum(&metrics, "leafraft_connections_open ") <= 5.0, "open connections:\n{metrics}");
    assert_eq!(series_sum(&metrics, "leafraft_connections_limit "), default_places(open_files));
}

/// The same timeouts hold on plain HTTP: idle connections, half-sent headers and a stalled body
/// are closed, and the cap is shown on `/metrics`.
#[tokio::test]
async fn plain_connections_are_held_to_the_same_timeouts() {
    let mut cluster = ProcessCluster::new();
    let (header_read, idle) = (HEADER_READ.as_millis().to_string(), IDLE.as_millis().to_string());
    let args = [
        &["--header-read-timeout-ms", &header_read, "--idle-timeout-ms", &idle][..],
        // The 150 connections below all come from 127.0.0.1.
        &["--max-connections", "500", "--max-connections-per-source", "500"],
    ]
    .concat();
    cluster.start_node(1, &args);
    cluster.wait_ready(1, TIMEOUT).await;
    let addr = cluster.addr(1);
    let body = b"POST /v1/tags HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n{\"tag\"";
    let kinds: [(&str, &[u8], Duration); 3] = [
        ("idle", b"", HEADER_READ),
        ("half a request", b"GET /v1/tags HTTP/1.1\r\n", HEADER_READ),
        ("a stalled body", body, IDLE),
    ];
    let mut waits = Vec::new();
    for (what, first, timeout) in kinds {
        for _ in 0..50 {
            let mut tcp = TcpStream::connect(&addr).await.expect("connect");
            tcp.write_all(first).await.expect("send");
            let since = Instant::now();
            waits.push(tokio::spawn(async move {
                let mut buffer = [0u8; 1024];
                loop {
                    match tokio::time::timeout(TIMEOUT, tcp.read(&mut buffer)).await {
                        Ok(Ok(0) | Err(_)) => return (what, timeout, since.elapsed()),
                        Ok(Ok(_)) => continue,
                        Err(_) => panic!("{what}: still open after {TIMEOUT:?}"),
                    }
                }
            }));
        }
    }
    for wait in waits {
        let (what, timeout, after) = wait.await.expect("a waiting task");
        assert!(after <= timeout + SLACK, "{what}: closed after {after:?}, its timeout is {timeout:?}");
    }
    let metrics = cluster.get_text(1, "/metrics").await.1;
    assert_eq!(series_sum(&metrics, "leafraft_connections_limit "), 500.0);
    assert!(series_sum(&metrics, r#"leafraft_connections_timed_out_total{reason="idle"}"#) >= 50.0, "{metrics}");
}
