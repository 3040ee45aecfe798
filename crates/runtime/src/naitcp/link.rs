//! One kernel TCP connection as a driver uses it (the baselines, TPBA's sender): non-blocking
//! reads, and the bytes core gave it to write (one record, acknowledgement bytes, a TPBA
//! transmit) until the socket has taken them — a full socket never blocks the driver.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::task::{Context, Poll};
use tokio::net::TcpStream;

#[derive(Debug)]
pub(crate) struct Link {
    stream: TcpStream,
    /// Bytes to write; the first `written` of them have been.
    out: Vec<u8>,
    written: usize,
}

impl Link {
    pub(crate) fn new(stream: TcpStream) -> Link {
        Link {
            stream,
            out: Vec::new(),
            written: 0,
        }
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }

    /// Sets `TCP_NODELAY` (Nagle off when `on`).
    pub(crate) fn set_nodelay(&self, on: bool) -> io::Result<()> {
        self.stream.set_nodelay(on)
    }

    /// Bytes waiting for the socket.
    pub(crate) fn pending_bytes(&self) -> usize {
        self.out.len() - self.written
    }

    /// Ready when the socket may be read (if `read`) or may take pending bytes.
    pub(crate) fn poll_ready(&self, cx: &mut Context<'_>, read: bool) -> Poll<()> {
        if read && self.stream.poll_read_ready(cx).is_ready() {
            return Poll::Ready(());
        }
        if self.pending_bytes() > 0 && self.stream.poll_write_ready(cx).is_ready() {
            return Poll::Ready(());
        }
        Poll::Pending
    }

    /// Reads what is waiting into `buf`: `Some(0)` at the peer's end of stream, `None` when
    /// nothing is waiting.
    pub(crate) fn read(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        match self.stream.try_read(buf) {
            Ok(n) => Ok(Some(n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The buffer for the next bytes to write (cleared), once the last ones are written.
    pub(crate) fn next_out(&mut self) -> Option<&mut Vec<u8>> {
        if self.pending_bytes() > 0 {
            return None;
        }
        self.out.clear();
        self.written = 0;
        Some(&mut self.out)
    }

    /// Appends bytes to write.
    pub(crate) fn queue(&mut self, bytes: impl IntoIterator<Item = u8>) {
        if self.pending_bytes() == 0 {
            self.out.clear();
            self.written = 0;
        }
        self.out.extend(bytes);
    }

    /// Writes pending bytes until the socket is full; returns whether all are written.
    pub(crate) fn write_pending(&mut self) -> io::Result<bool> {
        while let Some(rest) = self.out.get(self.written..).filter(|r| !r.is_empty()) {
            match self.stream.try_write(rest) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }
}
