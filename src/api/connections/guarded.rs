//! [`Guarded`], a connection's socket with its place, and the marks of the requests it answers.

use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::PoisonError;
use std::task::Context;
use std::task::Poll;

use tokio::io::AsyncRead;
use tokio::io::AsyncWrite;
use tokio::io::ReadBuf;
use tokio::sync::OwnedSemaphorePermit;

use super::Shared;
use super::Slot;
use super::EVICTED;
use super::HEADER_READ;
use super::IDLE;
use super::OPEN;
use crate::metrics::Metrics;

/// Marks the requests being answered on one connection ([`RequestMarker::begin`]), so that
/// making room at the cap never closes a connection in the middle of an answer.
#[derive(Clone)]
pub struct RequestMarker(Arc<Slot>);

impl RequestMarker {
    /// The connection is answering a request until the answer is dropped.
    pub fn begin(&self) -> InRequest {
        self.0.requests.fetch_add(1, Ordering::Relaxed);
        InRequest(self.0.clone())
    }
}

/// One request in progress on a connection (see [`RequestMarker`]), until its answer has been
/// written: from then on the connection waits for the next request's headers, under the
/// header-read timeout.
pub struct InRequest(Arc<Slot>);

impl Drop for InRequest {
    fn drop(&mut self) {
        let slot = &self.0;
        // The time first: the sweep that sees no request in progress sees when the last ended.
        slot.waiting_since.store(slot.clock.load(Ordering::Relaxed), Ordering::Relaxed);
        slot.requests.fetch_sub(1, Ordering::Release);
    }
}

/// A connection whose requests can be marked (the plain socket, or TLS over it).
pub trait Marked {
    fn request_marker(&self) -> RequestMarker;
}

/// A socket that gives up its place when dropped, and fails a read or write that would wait once
/// it has waited for a request's headers for the header-read timeout or been idle for the idle
/// timeout (`TimedOut`), or was closed to make room at the cap (`ConnectionAborted`).
pub struct Guarded<T> {
    pub(super) io: T,
    pub(super) slot: Arc<Slot>,
    pub(super) shared: Arc<Shared>,
    pub(super) _place: OwnedSemaphorePermit,
}

impl<T> Guarded<T> {
    /// The node's metrics (for what happens to the connection before it is served).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.shared.metrics
    }

    fn moved(&self, bytes: usize) {
        if bytes > 0 {
            self.slot.last_activity.store(self.shared.now_ms.load(Ordering::Relaxed), Ordering::Relaxed);
        }
    }

    /// Called when the socket has nothing to give yet: `Pending` (to be woken by the socket, or by
    /// the sweep or the cap closing the connection), or the error once the connection is closed.
    fn wait<R>(&self, cx: &mut Context<'_>) -> Poll<io::Result<R>> {
        if let Some(error) = self.closed() {
            return Poll::Ready(Err(error));
        }
        {
            let mut waker = self.slot.waker.lock().unwrap_or_else(PoisonError::into_inner);
            match &mut *waker {
                Some(known) if known.will_wake(cx.waker()) => {}
                other => *other = Some(cx.waker().clone()),
            }
        }
        // Closed between the check and the waker being set: the closer found no waker to wake.
        match self.closed() {
            Some(error) => Poll::Ready(Err(error)),
            None => Poll::Pending,
        }
    }

    pub(super) fn closed(&self) -> Option<io::Error> {
        match self.slot.closing.load(Ordering::SeqCst) {
            OPEN => None,
            IDLE => Some(io::Error::new(io::ErrorKind::TimedOut, "the connection was idle too long")),
            HEADER_READ => Some(io::Error::new(
                io::ErrorKind::TimedOut,
                "no complete request headers within the header-read timeout",
            )),
            EVICTED => Some(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "closed to make room for another connection at --max-connections",
            )),
            _ => Some(io::Error::other("the connection was closed")),
        }
    }
}

impl<T> Marked for Guarded<T> {
    fn request_marker(&self) -> RequestMarker {
        RequestMarker(self.slot.clone())
    }
}

impl<T> Drop for Guarded<T> {
    fn drop(&mut self) {
        self.shared.remove(&self.slot);
        self.shared.metrics.connections.open.dec();
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Guarded<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(result) => {
                let read = buf.filled().len().saturating_sub(before);
                this.moved(read);
                if read > 0 && !this.slot.heard.load(Ordering::Relaxed) {
                    this.slot.heard.store(true, Ordering::Relaxed);
                }
                Poll::Ready(result)
            }
            Poll::Pending => this.wait(cx),
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
            Poll::Pending => this.wait(cx),
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
            Poll::Pending => this.wait(cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match Pin::new(&mut this.io).poll_flush(cx) {
            Poll::Pending => this.wait(cx),
            ready => ready,
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}
