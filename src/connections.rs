//! The connections to the node's port: [`Guarded`], a connection's socket with its place under
//! `--max-connections` and its idle timeout, and [`accept`], which takes a place before it
//! accepts (used by the plain listener in `serve` and by `tls::TlsListener`).
//!
//! The idle timeout costs one timer per connection, armed once per timeout period rather than
//! moved on every read: a read or write that moves bytes only notes the time, and when the timer
//! fires it either closes the connection or sleeps again until the later deadline.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Context;
use std::task::Poll;
use std::time::Duration;

use tokio::io::AsyncRead;
use tokio::io::AsyncWrite;
use tokio::io::ReadBuf;
use tokio::net::TcpListener;
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio::time::Sleep;

use crate::metrics::Metrics;
use crate::refusals::RefusalLog;

/// How long accepting pauses after an error (say, out of file descriptors), so it never spins.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Failed accepts (out of file descriptors: keep `--max-connections` under `ulimit -n`), logged at
/// a bounded rate like refusals, since every retry would otherwise write a line.
static ACCEPT_ERRORS: std::sync::LazyLock<RefusalLog> =
    std::sync::LazyLock::new(|| RefusalLog::new("failed accepts", crate::refusals::INTERVAL));

/// Descriptors kept free of connections for the node's own use: the store's files and the
/// data-directory probe, the peers' connections, the runtime's (about 15 at rest). Half the limit
/// when the limit is small.
const RESERVED_FILES: u64 = 256;

/// Raises this process's soft open-file limit to its hard limit, as Go's runtime does, and
/// answers the soft limit then in force (`None`: it cannot be read). A soft limit of 1,024 is a
/// common default under a much higher hard one.
pub fn raise_open_file_limit() -> Option<u64> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `getrlimit` and `setrlimit` only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return None;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit = raised;
            }
        }
    }
    // `rlim_t` is `u64` on Linux, not on every target.
    #[allow(clippy::useless_conversion)]
    Some(u64::try_from(limit.rlim_cur).unwrap_or(u64::MAX))
}

/// The connections the node admits: `requested` (`--max-connections`), or fewer when the
/// open-file limit would run out first. A node out of descriptors cannot write its data
/// directory and stops (`failstop`), so a client holding idle connections could take it down.
pub fn admitted_connections(requested: usize, open_files: Option<u64>) -> usize {
    let Some(open_files) = open_files else { return requested };
    let for_connections = open_files.saturating_sub(RESERVED_FILES.min(open_files / 2));
    requested.min(usize::try_from(for_connections).unwrap_or(usize::MAX)).max(1)
}

/// The places under `--max-connections`, shared by everything that accepts on the node's port.
#[derive(Clone)]
pub struct Admission {
    places: Arc<Semaphore>,
    idle_timeout: Duration,
    metrics: Arc<Metrics>,
}

impl Admission {
    pub fn new(max_connections: usize, idle_timeout: Duration, metrics: Arc<Metrics>) -> Admission {
        metrics.connections.limit.set(i64::try_from(max_connections).unwrap_or(i64::MAX));
        Admission { places: Arc::new(Semaphore::new(max_connections)), idle_timeout, metrics }
    }

    /// A place for one more connection, waiting (and counting the wait) while every place is taken.
    async fn place(&self) -> OwnedSemaphorePermit {
        if let Ok(place) = self.places.clone().try_acquire_owned() {
            return place;
        }
        self.metrics.connections.waited_at_limit.inc();
        match self.places.clone().acquire_owned().await {
            Ok(place) => place,
            // The semaphore is never closed.
            Err(_) => std::future::pending().await,
        }
    }
}

/// Takes a place, then accepts the next connection on `listener` (with `TCP_NODELAY`: a response
/// hyper writes in two parts must not wait for the peer's delayed ACK; Raft RPCs and ID requests
/// are small and latency-bound).
pub async fn accept(listener: &TcpListener, admission: &Admission) -> (Guarded<TcpStream>, SocketAddr) {
    let place = admission.place().await;
    loop {
        match listener.accept().await {
            Ok((tcp, remote)) => {
                let _ = tcp.set_nodelay(true);
                return (Guarded::new(tcp, place, admission), remote);
            }
            Err(error) => {
                if ACCEPT_ERRORS.note("accept", "error") {
                    tracing::warn!(%error, "cannot accept a connection (further failures are summed up once per interval)");
                }
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
        }
    }
}

/// A socket that gives up its place when dropped and fails its reads and writes with
/// `TimedOut` once no byte has moved either way for the idle timeout.
pub struct Guarded<T> {
    io: T,
    idle_timeout: Duration,
    last_activity: Instant,
    timer: Pin<Box<Sleep>>,
    timed_out: bool,
    _place: OwnedSemaphorePermit,
    metrics: Arc<Metrics>,
}

impl<T> Guarded<T> {
    fn new(io: T, place: OwnedSemaphorePermit, admission: &Admission) -> Guarded<T> {
        let now = Instant::now();
        admission.metrics.connections.open.inc();
        Guarded {
            io,
            idle_timeout: admission.idle_timeout,
            last_activity: now,
            timer: Box::pin(tokio::time::sleep_until(now + admission.idle_timeout)),
            timed_out: false,
            _place: place,
            metrics: admission.metrics.clone(),
        }
    }

    /// Called when the socket has nothing to give: `Pending` (the timer will wake the task), or
    /// the timeout error once the connection has been idle for the whole timeout.
    fn idle<R>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<R>> {
        loop {
            if self.timed_out {
                return Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "the connection was idle too long")));
            }
            if self.timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            let deadline = self.last_activity + self.idle_timeout;
            if Instant::now() >= deadline {
                self.timed_out = true;
                self.metrics.connections.count_timeout("idle");
            } else {
                self.timer.as_mut().reset(deadline);
            }
        }
    }

    /// The node's metrics (for what happens to the connection before it is served).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    fn moved(&mut self, bytes: usize) {
        if bytes > 0 {
            self.last_activity = Instant::now();
        }
    }
}

impl<T> Drop for Guarded<T> {
    fn drop(&mut self) {
        self.metrics.connections.open.dec();
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Guarded<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(result) => {
                this.moved(buf.filled().len().saturating_sub(before));
                Poll::Ready(result)
            }
            Poll::Pending => this.idle(cx),
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Guarded<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.io).poll_write(cx, buf) {
            Poll::Ready(Ok(written)) => {
                this.moved(written);
                Poll::Ready(Ok(written))
            }
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => this.idle(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.io).poll_write_vectored(cx, bufs) {
            Poll::Ready(Ok(written)) => {
                this.moved(written);
                Poll::Ready(Ok(written))
            }
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => this.idle(cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match Pin::new(&mut this.io).poll_flush(cx) {
            Poll::Pending => this.idle(cx),
            ready => ready,
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
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

    #[tokio::test]
    async fn an_idle_socket_times_out_and_a_busy_one_does_not() {
        let metrics = Arc::new(Metrics::new());
        let admission = Admission::new(1, Duration::from_millis(300), metrics.clone());
        let (near, mut far) = tokio::io::duplex(64);
        let mut guarded = Guarded::new(near, admission.places.clone().try_acquire_owned().unwrap(), &admission);
        assert!(admission.places.clone().try_acquire_owned().is_err(), "the one place is taken");
        let mut byte = [0u8; 1];
        for _ in 0..4 {
            tokio::time::sleep(Duration::from_millis(200)).await;
            far.write_all(b"x").await.unwrap();
            guarded.read_exact(&mut byte).await.unwrap();
        }
        let waiting = Instant::now();
        let error = guarded.read_exact(&mut byte).await.unwrap_err();
        assert!(waiting.elapsed() >= Duration::from_millis(250), "{:?}", waiting.elapsed());
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert_eq!(metrics.connections.open.get(), 1);
        drop(guarded);
        assert_eq!(metrics.connections.open.get(), 0);
        assert!(admission.places.clone().try_acquire_owned().is_ok(), "the place is given back");
    }
}
