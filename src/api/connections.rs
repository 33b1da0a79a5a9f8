//! The connections to the node's port: [`Admission`], which decides who gets one of the places
//! under `--max-connections`, [`Guarded`], a connection's socket with its place, and [`accept`],
//! which takes a place before it accepts (used by the plain listener in `server` and by
//! `tls::TlsListener`).
//!
//! No single client can take every place: one that kept idle connections open and
//! reopened each as it closed held every place, and nobody else, supervisors' health checks
//! included, got an answer. So:
//!
//! - **Per source**: one source address holds at most `--max-connections-per-source` places
//!   (a quarter of the places by default); a connection beyond that is closed as soon as it is
//!   accepted, so it never waits in front of others in the listen backlog.
//! - **At the cap**: idle connections (no request in progress: a kept-alive connection between
//!   requests, one that never sent a request, a TLS handshake that stalls) are closed to make
//!   room, a few at a time, before a new connection is left to wait: those that never sent a
//!   byte first, then those idle the longest. A connection answering a request is never closed
//!   for room.
//!
//! The timeouts and the bookkeeping above cost no timer, per connection or per request (issue
//! 42: hyper's header-read timer, armed and dropped on every request of a keep-alive connection,
//! was the largest per-request cost the connection safety added): one task sweeps every
//! connection on a coarse clock (a sixteenth of the shorter timeout, at most a second) and closes
//!
//! - a connection with no request in progress (a new one, one between requests, one whose
//!   request's headers are still arriving) once it has waited the **header-read timeout** since
//!   it was admitted or since its last answer was written, bytes or not (a slowloris sending a
//!   byte a second is closed all the same);
//! - any connection that moved no byte either way for the **idle timeout** (a request whose body
//!   stalls, an answer the client does not read).
//!
//! A read or write that moves bytes only stores the coarse clock's time (relaxed). A request
//! costs its in-request mark (an `Arc` clone, two atomic updates and a store of the clock when
//! its answer has been written), and a read or write that has to wait leaves its waker under an
//! uncontended lock (cloned only when it is not the one already left), so that a connection the
//! sweep (or the cap) closes is woken and fails that read or write.

use std::collections::HashMap;
use std::net::IpAddr;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::AtomicU8;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::PoisonError;
use std::task::Waker;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::api::refusals::RefusalLog;
use crate::metrics::Metrics;

/// How long accepting pauses after an error (say, out of file descriptors), so it never spins.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Failed accepts (out of file descriptors: keep `--max-connections` under `ulimit -n`), logged at
/// a bounded rate like refusals, since every retry would otherwise write a line.
static ACCEPT_ERRORS: std::sync::LazyLock<RefusalLog> =
    std::sync::LazyLock::new(|| RefusalLog::new("failed accepts", crate::api::refusals::INTERVAL));

/// The default `--max-connections-per-source`: this share of the places.
pub const PER_SOURCE_SHARE: usize = 4;

/// The places one source address may hold: `configured`, or a quarter of `max_connections`;
/// never more than every place, never none.
pub fn places_per_source(max_connections: usize, configured: Option<usize>) -> usize {
    configured.unwrap_or(max_connections / PER_SOURCE_SHARE).clamp(1, max_connections.max(1))
}

/// How long accepting waits at the cap before it looks again for idle connections to close
/// (when every connection was answering a request, or the last ones closed have not gone yet).
const EVICTION_RETRY: Duration = Duration::from_millis(100);

/// The longest tick of the coarse clock the idle timeout is checked on.
const MAX_SWEEP: Duration = Duration::from_secs(1);

/// The places under `--max-connections`, shared by everything that accepts on the node's port.
#[derive(Clone)]
pub struct Admission(Arc<Shared>);

struct Shared {
    places: Arc<Semaphore>,
    per_source: usize,
    /// How many idle connections one look at the cap closes (nginx closes up to 32): one scan of
    /// the table makes room for several new connections.
    eviction_batch: usize,
    idle_timeout: Duration,
    /// How long a connection may wait with no request in progress (`None`: as long as it is not
    /// idle).
    header_read_timeout: Option<Duration>,
    /// The tick of the coarse clock and of the sweep.
    sweep: Duration,
    epoch: Instant,
    /// The coarse clock: milliseconds since `epoch` at the last sweep (each slot holds it too).
    now_ms: Arc<AtomicU64>,
    table: Mutex<Table>,
    /// Connections closed for room whose sockets are not gone yet: until they are, closing more
    /// would only close more than needed.
    evicting: AtomicUsize,
    metrics: Arc<Metrics>,
    /// Connections refused or closed for room, logged at a bounded rate.
    log: RefusalLog,
}

#[derive(Default)]
struct Table {
    next_id: u64,
    open: HashMap<u64, Arc<Slot>>,
    by_source: HashMap<IpAddr, usize>,
}

/// Why a connection is being closed (`Slot::closing`).
const OPEN: u8 = 0;
const IDLE: u8 = 1;
const EVICTED: u8 = 2;
const HEADER_READ: u8 = 3;

/// One open connection as the table sees it.
struct Slot {
    id: u64,
    source: IpAddr,
    /// The coarse clock when a byte last moved either way.
    last_activity: AtomicU64,
    /// The coarse clock when the connection last had no request in progress: its admission, or
    /// the end of its last answer (written before `requests` goes back to 0).
    waiting_since: AtomicU64,
    /// The coarse clock (`Shared::now_ms`), for the end of an answer.
    clock: Arc<AtomicU64>,
    /// Whether the client has sent a byte yet (a request, a TLS hello).
    heard: AtomicBool,
    /// Requests being answered on it.
    requests: AtomicUsize,
    closing: AtomicU8,
    /// The task to wake when the connection is to close; set whenever a read or write waits.
    waker: Mutex<Option<Waker>>,
}

impl Slot {
    fn close(&self, why: u8) -> bool {
        if self.closing.compare_exchange(OPEN, why, Ordering::SeqCst, Ordering::SeqCst).is_err() {
            return false;
        }
        if let Some(waker) = self.waker.lock().unwrap_or_else(PoisonError::into_inner).take() {
            waker.wake();
        }
        true
    }

    fn evictable(&self) -> bool {
        self.closing.load(Ordering::Relaxed) == OPEN && self.requests.load(Ordering::Relaxed) == 0
    }
}

/// One source's connections count together whatever form its address takes.
fn source_of(remote: &SocketAddr) -> IpAddr {
    match remote.ip() {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

impl Admission {
    /// Places for `max_connections`, at most `per_source` of them for one source address, and
    /// the sweep that closes connections idle for `idle_timeout` (a task of the current runtime,
    /// which ends once the admission and every connection it admitted are gone).
    /// Connections with no request in progress are closed after `header_read_timeout`.
    pub fn new(
        max_connections: usize,
        per_source: usize,
        (idle_timeout, header_read_timeout): (Duration, Duration),
        metrics: Arc<Metrics>,
    ) -> Admission {
        let timeouts = (idle_timeout, Some(header_read_timeout));
        let admission = Admission::unswept_with(max_connections, per_source, timeouts, metrics);
        tokio::spawn(sweep::sweep_until_gone(Arc::downgrade(&admission.0)));
        admission
    }

    /// The admission without its sweep: its clock and the idle timeout move only when
    /// `Shared::sweep_at` is called (the unit tests call it with the times they choose). No
    /// header-read timeout.
    #[cfg(test)]
    fn unswept(max_connections: usize, per_source: usize, idle_timeout: Duration, metrics: Arc<Metrics>) -> Admission {
        Admission::unswept_with(max_connections, per_source, (idle_timeout, None), metrics)
    }

    fn unswept_with(
        max_connections: usize,
        per_source: usize,
        (idle_timeout, header_read_timeout): (Duration, Option<Duration>),
        metrics: Arc<Metrics>,
    ) -> Admission {
        let gauge = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        metrics.connections.limit.set(gauge(max_connections));
        metrics.connections.per_source_limit.set(gauge(per_source));
        let shortest = header_read_timeout.map_or(idle_timeout, |header_read| header_read.min(idle_timeout));
        let sweep = (shortest / 16).clamp(Duration::from_millis(1), MAX_SWEEP);
        let shared = Arc::new(Shared {
            places: Arc::new(Semaphore::new(max_connections)),
            per_source,
            eviction_batch: (max_connections / 64).clamp(1, 32),
            idle_timeout,
            header_read_timeout,
            sweep,
            epoch: Instant::now(),
            now_ms: Arc::new(AtomicU64::new(0)),
            table: Mutex::new(Table::default()),
            evicting: AtomicUsize::new(0),
            metrics,
            log: RefusalLog::new("connections refused or closed at the limit", crate::api::refusals::INTERVAL),
        });
        Admission(shared)
    }

    /// A place for one more connection. At the cap, closes the connections idle the longest and
    /// waits (counted) for a place to come free.
    async fn place(&self) -> OwnedSemaphorePermit {
        let shared = &self.0;
        if let Ok(place) = shared.places.clone().try_acquire_owned() {
            return place;
        }
        shared.metrics.connections.waited_at_limit.inc();
        loop {
            shared.evict_idle();
            tokio::select! {
                place = shared.places.clone().acquire_owned() => match place {
                    Ok(place) => return place,
                    // The semaphore is never closed.
                    Err(_) => std::future::pending().await,
                },
                () = tokio::time::sleep(EVICTION_RETRY) => {}
            }
        }
    }

    /// `io` from `remote` in `place`, unless its source holds its share of the places already
    /// (then `io` is answered back, to be closed, with the place for the next one).
    #[allow(clippy::result_large_err)]
    fn admit<T>(
        &self,
        io: T,
        place: OwnedSemaphorePermit,
        remote: &SocketAddr,
    ) -> Result<Guarded<T>, (T, OwnedSemaphorePermit)> {
        let shared = &self.0;
        let source = source_of(remote);
        let slot = {
            let mut table = shared.table.lock().unwrap_or_else(PoisonError::into_inner);
            let held = table.by_source.entry(source).or_default();
            if *held >= shared.per_source {
                drop(table);
                shared.metrics.connections.count_refused("per_source");
                if shared.log.note("connection", "per_source") {
                    tracing::warn!(
                        %remote,
                        per_source = shared.per_source,
                        "refused a connection: its source address holds its share of the connections \
                         (--max-connections-per-source; further refusals are summed up once per interval)"
                    );
                }
                return Err((io, place));
            }
            *held += 1;
            table.next_id += 1;
            let now = shared.now_ms.load(Ordering::Relaxed);
            let slot = Arc::new(Slot {
                id: table.next_id,
                source,
                last_activity: AtomicU64::new(now),
                waiting_since: AtomicU64::new(now),
                clock: shared.now_ms.clone(),
                heard: AtomicBool::new(false),
                requests: AtomicUsize::new(0),
                closing: AtomicU8::new(OPEN),
                waker: Mutex::new(None),
            });
            table.open.insert(slot.id, slot.clone());
            slot
        };
        shared.metrics.connections.open.inc();
        Ok(Guarded { io, slot, shared: shared.clone(), _place: place })
    }
}

impl Shared {
    /// Closes up to a batch of the connections idle the longest (none answering a request),
    /// unless the last batch is still closing.
    fn evict_idle(&self) {
        if self.evicting.load(Ordering::SeqCst) > 0 {
            return;
        }
        let table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        let mut idle: Vec<&Arc<Slot>> = table.open.values().filter(|slot| slot.evictable()).collect();
        let batch = self.eviction_batch.min(idle.len());
        if batch == 0 {
            return;
        }
        // Connections that never sent a byte first: a client that opens connections to hold
        // them sends nothing, while one that means to be served sends at once (its request, its
        // TLS hello), so a new client is not closed while its first bytes are on the way. Then
        // the least recent activity (on the coarse clock), then the oldest connection.
        idle.select_nth_unstable_by_key(batch - 1, |slot| {
            (slot.heard.load(Ordering::Relaxed), slot.last_activity.load(Ordering::Relaxed), slot.id)
        });
        let mut closed = 0u64;
        for slot in &idle[..batch] {
            if slot.close(EVICTED) {
                self.evicting.fetch_add(1, Ordering::SeqCst);
                closed += 1;
            }
        }
        drop(table);
        self.metrics.connections.evicted.inc_by(closed);
        if closed > 0 && self.log.note("connection", "closed_idle_at_limit") {
            tracing::warn!(
                closed,
                "every connection place is taken: closed the connections idle the longest to make room \
                 (further ones are summed up once per interval)"
            );
        }
    }

    fn remove(&self, slot: &Slot) {
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        table.open.remove(&slot.id);
        if let Some(held) = table.by_source.get_mut(&slot.source) {
            *held = held.saturating_sub(1);
            if *held == 0 {
                table.by_source.remove(&slot.source);
            }
        }
        drop(table);
        if slot.closing.load(Ordering::SeqCst) == EVICTED {
            self.evicting.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Takes a place, then accepts the next connection on `listener` (with `TCP_NODELAY`: a response
/// hyper writes in two parts must not wait for the peer's delayed ACK; Raft RPCs and ID requests
/// are small and latency-bound). A connection whose source holds its share already is closed at
/// once, and the place goes to the next one.
pub async fn accept(listener: &TcpListener, admission: &Admission) -> (Guarded<TcpStream>, SocketAddr) {
    let mut place = admission.place().await;
    loop {
        match listener.accept().await {
            Ok((tcp, remote)) => match admission.admit(tcp, place, &remote) {
                Ok(guarded) => {
                    let _ = guarded.io.set_nodelay(true);
                    return (guarded, remote);
                }
                Err((refused, kept)) => {
                    // A reset rather than a close: the node keeps no TIME_WAIT state for a
                    // client that reconnects as fast as it is refused.
                    let _ = refused.set_zero_linger();
                    drop(refused);
                    place = kept;
                }
            },
            Err(error) => {
                if ACCEPT_ERRORS.note("accept", "error") {
                    tracing::warn!(%error, "cannot accept a connection (further failures are summed up once per interval)");
                }
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
        }
    }
}

mod guarded;
mod open_files;
mod sweep;
#[cfg(test)]
mod tests;

pub use guarded::Guarded;
pub use guarded::InRequest;
pub use guarded::Marked;
pub use guarded::RequestMarker;
pub use open_files::admitted_connections;
pub use open_files::raise_open_file_limit;
