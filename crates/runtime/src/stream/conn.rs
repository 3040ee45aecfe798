//! One stream as the application holds it ([`StreamConn`], `AsyncRead + AsyncWrite`) and the
//! driver's side of it ([`Port`]): two bounded byte queues — written and not yet taken by
//! the driver, read from core and not yet taken by the application — and the end.

use crate::driver;
use crate::error::{ConnectionError, ReadError, WriteError};
use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::watch;

/// The byte queues between one stream's handles and its driver.
#[derive(Debug, Default)]
pub(super) struct Buffers {
    /// Written by the application, not yet handed to core.
    pub(super) pending: VecDeque<u8>,
    /// Bytes core holds unacknowledged (the driver keeps it current): with `pending`, what
    /// the send bound counts.
    pub(super) unacked: usize,
    pub(super) send_cap: usize,
    /// In-order bytes for the reader.
    pub(super) rx: VecDeque<u8>,
    pub(super) rx_cap: usize,
    /// The peer's FIN has come and every byte before it is in `rx`.
    pub(super) eof: bool,
    /// The application shut its direction down.
    pub(super) shutdown: bool,
    /// The driver has passed the shutdown to core.
    pub(super) shutdown_sent: bool,
    /// Our FIN and every byte were acknowledged.
    pub(super) send_closed: bool,
    /// Why the connection ended, if it ended other than by both FINs.
    pub(super) end: Option<ConnectionError>,
    read_waker: Option<Waker>,
    write_waker: Option<Waker>,
}

impl Buffers {
    pub(super) fn wake_reader(&mut self) {
        if let Some(w) = self.read_waker.take() {
            w.wake();
        }
    }

    pub(super) fn wake_writer(&mut self) {
        if let Some(w) = self.write_waker.take() {
            w.wake();
        }
    }
}

pub(super) fn lock(b: &Mutex<Buffers>) -> MutexGuard<'_, Buffers> {
    // A panic while holding the lock leaves plain buffers; keep using them.
    b.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What every handle of one stream shares.
#[derive(Debug)]
struct ConnInner {
    id: u64,
    peer: SocketAddr,
    buffers: Arc<Mutex<Buffers>>,
    driver: Arc<driver::Shared>,
    end: watch::Receiver<Option<ConnectionError>>,
}

impl Drop for ConnInner {
    fn drop(&mut self) {
        // The last handle: the driver closes our direction gracefully (FIN after what was
        // written) and discards what the peer still sends.
        self.driver.dropped(self.id);
    }
}

/// One stream: [`AsyncRead`] gives the peer's bytes in order (then end of stream after its
/// FIN; an error saying why if the connection ended otherwise — the inner error is a
/// [`ReadError`]), [`AsyncWrite`] queues bytes (waiting while
/// [`StreamOptions::send_buffer_bytes`](super::StreamOptions::send_buffer_bytes) are written
/// and not yet acknowledged; the inner error of a failure is a [`WriteError`]), and
/// `poll_shutdown` sends our FIN and completes once everything was acknowledged.
///
/// Clones share the stream (cheap: one `Arc`); dropping the last one closes our direction
/// gracefully and discards what the peer still sends. Read from one clone at a time, and
/// write from one at a time: each direction wakes one waiting task.
#[derive(Clone, Debug)]
pub struct StreamConn(Arc<ConnInner>);

/// The driver's side of one stream.
#[derive(Debug)]
pub(super) struct Port {
    pub(super) buffers: Arc<Mutex<Buffers>>,
    end: watch::Sender<Option<ConnectionError>>,
    /// The application's handles are all gone.
    pub(super) dropped: bool,
    /// When the stream's emptied buffers give their storage back, if bytes stop moving
    /// (see the driver's `QUIET_BEFORE_TRIM`).
    pub(super) trim_at: Option<adaptnet_core::Time>,
}

impl Port {
    /// A new stream's port and first handle.
    pub(super) fn open(
        id: u64,
        peer: SocketAddr,
        driver: Arc<driver::Shared>,
        send_cap: usize,
        rx_cap: usize,
    ) -> (Port, StreamConn) {
        let buffers = Arc::new(Mutex::new(Buffers {
            send_cap: send_cap.max(1),
            rx_cap: rx_cap.max(1),
            ..Buffers::default()
        }));
        let (end_tx, end_rx) = watch::channel(None);
        let port = Port {
            buffers: buffers.clone(),
            end: end_tx,
            dropped: false,
            trim_at: None,
        };
        let conn = StreamConn(Arc::new(ConnInner {
            id,
            peer,
            buffers,
            driver,
            end: end_rx,
        }));
        (port, conn)
    }

    /// The connection ended for `why`: every waiting call learns it.
    pub(super) fn end(&self, why: ConnectionError) {
        let mut b = lock(&self.buffers);
        if b.end.is_none() && !(b.eof && b.send_closed) {
            b.end = Some(why.clone());
        }
        b.wake_reader();
        b.wake_writer();
        drop(b);
        self.end.send_if_modified(|e| {
            if e.is_none() {
                *e = Some(why);
                return true;
            }
            false
        });
    }
}

impl StreamConn {
    /// The peer endpoint's address.
    pub fn peer(&self) -> SocketAddr {
        self.0.peer
    }

    /// Why the connection ended, once it has: [`ConnectionError::ClosedByPeer`] after both
    /// FINs, [`ConnectionError::EndpointClosed`] when our endpoint closed, a reset or a
    /// timeout otherwise.
    pub fn close_reason(&self) -> Option<ConnectionError> {
        self.0.end.borrow().clone()
    }

    /// Waits until the connection has ended and says why (see [`StreamConn::close_reason`]).
    pub async fn closed(&self) -> ConnectionError {
        let mut rx = self.0.end.clone();
        match rx.wait_for(Option::is_some).await {
            Ok(e) => e.clone().unwrap_or(ConnectionError::EndpointClosed),
            // The driver is gone without a word: its endpoint stopped.
            Err(_) => ConnectionError::EndpointClosed,
        }
    }

    fn buffers(&self) -> MutexGuard<'_, Buffers> {
        lock(&self.0.buffers)
    }
}

impl AsyncRead for StreamConn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let mut s = self.buffers();
        if !s.rx.is_empty() {
            let n = s.rx.len().min(buf.remaining());
            let (a, b) = s.rx.as_slices();
            let from_a = n.min(a.len());
            buf.put_slice(a.get(..from_a).unwrap_or_default());
            buf.put_slice(b.get(..n - from_a).unwrap_or_default());
            s.rx.drain(..n);
            drop(s);
            // Room was made: the driver reads on from core (and the window opens).
            self.0.driver.wake();
            return Poll::Ready(Ok(()));
        }
        if s.eof {
            return Poll::Ready(Ok(()));
        }
        if let Some(e) = &s.end {
            return Poll::Ready(Err(ReadError::ConnectionLost(e.clone()).into()));
        }
        s.read_waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl AsyncWrite for StreamConn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let mut s = self.buffers();
        if let Some(e) = &s.end {
            return Poll::Ready(Err(WriteError::ConnectionLost(e.clone()).into()));
        }
        if s.shutdown {
            return Poll::Ready(Err(WriteError::Finished.into()));
        }
        let room = s.send_cap.saturating_sub(s.pending.len() + s.unacked);
        if room == 0 {
            s.write_waker = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let n = room.min(buf.len());
        s.pending.extend(buf.get(..n).unwrap_or_default());
        drop(s);
        self.0.driver.wake();
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Written bytes are already with the driver; there is no lower buffer to flush.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut s = self.buffers();
        if s.send_closed {
            return Poll::Ready(Ok(()));
        }
        if let Some(e) = &s.end {
            return Poll::Ready(Err(WriteError::ConnectionLost(e.clone()).into()));
        }
        let first = !s.shutdown;
        s.shutdown = true;
        s.write_waker = Some(cx.waker().clone());
        drop(s);
        if first {
            self.0.driver.wake();
        }
        Poll::Pending
    }
}
