//! Regression: one client could take every connection place. Under a small
//! open-file limit (`ulimit -n 256`: 128 places), a client that kept idle connections open and
//! reopened each as the node closed it held every place, and another client's `GET /healthz`
//! waited in the listen backlog until the header-read timeout freed a place (10 s and more),
//! plain or TLS. Supervisors kill a node whose health check does not answer.
//!
//! Now one source address holds at most a share of the places (a quarter by default), and at the
//! cap the connections idle the longest make room. The attack here holds three times the places
//! from 127.0.0.2 while a client on 127.0.0.1 must be answered within a second, every time, on
//! a new connection.

use std::net::SocketAddr;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use tokio::io::AsyncReadExt;
use tokio::net::TcpSocket;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::certs::write_atomically;
use crate::certs::Ca;
use crate::harness::ProcessCluster;
use crate::regression_credentials::series_sum;

const TIMEOUT: Duration = Duration::from_secs(30);
/// The node's open-file limit (soft and hard): 128 connection places.
const OPEN_FILES: u64 = 256;
/// The attacker's address: the whole of 127.0.0.0/8 is loopback on Linux.
const ATTACKER: &str = "127.0.0.2:0";
/// How soon the other client must be answered.
const ANSWER_WITHIN: Duration = Duration::from_secs(1);
/// Requests of the other client per path while the attack goes on.
const ROUNDS: usize = 5;

/// Raises this process's open-file limit to its hard limit: the attack holds several hundred
/// connections (the node keeps its own, small limit).
fn raise_file_limit(needed: u64) {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `getrlimit` and `setrlimit` only read and write the struct passed.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0, "getrlimit");
        limit.rlim_cur = limit.rlim_max;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0, "setrlimit");
    }
    assert!(limit.rlim_cur >= needed, "the open-file limit {} is too low for this test", limit.rlim_cur);
}

/// One client (one source address) holding `connections` idle connections, each reopened as
/// soon as the node closes it, until dropped. It runs on a thread and runtime of its own, as
/// another process would: on the test's runtime its hundreds of tasks would delay the other
/// client's requests in this process, not in the node.
struct Attack {
    opened: Arc<AtomicUsize>,
    stop: Option<watch::Sender<bool>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Attack {
    fn start(target: SocketAddr, connections: usize) -> Attack {
        let opened = Arc::new(AtomicUsize::new(0));
        let (stop_tx, stop) = watch::channel(false);
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        let counted = opened.clone();
        let thread = std::thread::spawn(move || {
            runtime.block_on(async move {
                let tasks: Vec<JoinHandle<()>> =
                    (0..connections).map(|_| tokio::spawn(hold_one(target, counted.clone(), stop.clone()))).collect();
                for task in tasks {
                    let _ = task.await;
                }
            })
        });
        Attack { opened, stop: Some(stop_tx), thread: Some(thread) }
    }

    fn opened(&self) -> usize {
        self.opened.load(Ordering::Relaxed)
    }
}

impl Drop for Attack {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One of the attack's connections: open, send nothing, wait until the node closes it, open
/// again; until `stop` changes or is dropped. Counts in `opened` every connection the node
/// accepted, including those it refused at once: a refusal resets the connection, often before
/// this task polls its connect, which then fails with `ConnectionReset` (counting only successful
/// connects left the count stuck at the share while the node refused thousands a second).
async fn hold_one(target: SocketAddr, opened: Arc<AtomicUsize>, mut stop: watch::Receiver<bool>) {
    loop {
        let connected = async {
            let socket = TcpSocket::new_v4()?;
            socket.bind(ATTACKER.parse().expect("an address"))?;
            socket.connect(target).await
        };
        let mut tcp = tokio::select! {
            connected = connected => match connected {
                Ok(tcp) => tcp,
                // Refused by the node (closed with a reset) before this task saw its connect
                // complete: the node took it all the same, so it counts.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                    opened.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                // Anything else (a full backlog, say): try again.
                Err(_) => continue,
            },
            _ = stop.changed() => return,
        };
        opened.fetch_add(1, Ordering::Relaxed);
        let mut buffer = [0u8; 256];
        loop {
            tokio::select! {
                read = tcp.read(&mut buffer) => match read {
                    Ok(0) | Err(_) => break,
                    Ok(_) => continue,
                },
                _ = stop.changed() => return,
            }
        }
    }
}

/// A client that opens a new connection for every request (from 127.0.0.1) and gives up after
/// [`ANSWER_WITHIN`].
fn other_client(ca: Option<&[u8]>) -> reqwest::Client {
    let mut builder = reqwest::Client::builder().timeout(ANSWER_WITHIN).pool_max_idle_per_host(0);
    if let Some(ca) = ca {
        builder = builder.tls_built_in_root_certs(false);
        for certificate in reqwest::Certificate::from_pem_bundle(ca).expect("PEM CA certificates") {
            builder = builder.add_root_certificate(certificate);
        }
    }
    builder.build().expect("an HTTP client")
}

/// Starts a node under [`OPEN_FILES`] (with TLS when `tls`) with `args`, attacks it with three
/// times its places from one address, and checks that another client is answered within
/// [`ANSWER_WITHIN`] throughout. Answers the node's `/metrics` after the attack and the slowest
/// answer.
async fn attacked(tls: bool, args: &[&str]) -> (String, Duration) {
    let ca = Ca::new("leafraft CA");
    let mut cluster = ProcessCluster::new();
    if tls {
        cluster = cluster.with_tls(false, ca.pem().as_bytes());
        let dir = cluster.tls_dir();
        ca.node(1).write(&dir.join("node1.pem"), &dir.join("node1.key"));
        write_atomically(&dir.join("ca.pem"), &ca.pem());
    }
    cluster.set_open_files(1, OPEN_FILES);
    cluster.start_node(1, args);
    cluster.wait_ready(1, TIMEOUT).await;
    let what = format!("{} {args:?}", if tls { "TLS" } else { "plain" });
    let places = series_sum(&cluster.get_text(1, "/metrics").await.1, "leafraft_connections_limit ") as usize;
    assert!((1..OPEN_FILES as usize).contains(&places), "{what}: {places} places under {OPEN_FILES} files");

    let target: SocketAddr = cluster.addr(1).parse().expect("the node's address");
    let attack = Attack::start(target, 3 * places);
    // Under way: every attacking connection opened, and as many again reopened after the node
    // closed them (refused, or closed to make room; on 0.3.0, after the header-read timeout).
    crate::harness::wait_until(TIMEOUT, "the attack to be under way", || {
        let opened = attack.opened();
        async move { (opened >= 4 * places).then_some(()).ok_or(format!("{opened} opened")) }
    })
    .await;

    let client = other_client(tls.then(|| ca.pem().into_bytes()).as_deref());
    let url = cluster.url(1);
    let mut slowest = Duration::ZERO;
    for _ in 0..ROUNDS {
        for path in ["/healthz", "/readyz", "/v1/cluster"] {
            let started = Instant::now();
            let answer = client.get(format!("{url}{path}")).send().await;
            let took = started.elapsed();
            let status = answer.map(|a| a.status().as_u16()).map_err(|e| e.to_string());
            assert_eq!(
                status,
                Ok(200),
                "{what}: GET {path} under the attack ({} attacking connections opened so far, after {took:?})",
                attack.opened()
            );
            assert!(took < ANSWER_WITHIN, "{what}: GET {path} took {took:?} under the attack");
            slowest = slowest.max(took);
        }
    }
    let reopened = attack.opened();
    let metrics = cluster.get_text(1, "/metrics").await.1;
    drop(attack);
    assert!(cluster.is_running(1), "{what}: the node stopped under the attack:\n{}", cluster.log(1));
    eprintln!("{what}: {places} places, {reopened} attacking connections opened, slowest answer {slowest:?}");
    (metrics, slowest)
}

/// The default: the attacker's address holds a quarter of the places, the rest is refused as it
/// arrives, and everyone else is served at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_one_address_cannot_take_every_connection_place() {
    raise_file_limit(4 * OPEN_FILES);
    for tls in [false, true] {
        let (metrics, _) = attacked(tls, &[]).await;
        let refused = series_sum(&metrics, r#"leafraft_connections_refused_total{reason="per_source"}"#);
        assert!(refused >= 1.0, "tls {tls}: no connection refused for its source:\n{metrics}");
        let share = series_sum(&metrics, "leafraft_connections_per_source_limit ");
        let places = series_sum(&metrics, "leafraft_connections_limit ");
        assert_eq!(share, (places / 4.0).floor(), "tls {tls}: a quarter of the places per source");
    }
}

/// With the share raised to every place, the attacker fills the cap: the connections idle the
/// longest are closed to make room, and everyone else is still served at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_at_the_cap_idle_connections_make_room() {
    raise_file_limit(4 * OPEN_FILES);
    for tls in [false, true] {
        let (metrics, _) = attacked(tls, &["--max-connections-per-source", "100000"]).await;
        let evicted = series_sum(&metrics, "leafraft_connections_evicted_total ");
        assert!(evicted >= 1.0, "tls {tls}: no idle connection closed to make room:\n{metrics}");
        assert_eq!(series_sum(&metrics, r#"leafraft_connections_refused_total{reason="per_source"}"#), 0.0);
    }
}
