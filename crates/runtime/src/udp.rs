//! Batched UDP I/O for the drivers, through `quinn-udp` (the I/O layer of the quinn QUIC
//! stack): one `sendmsg` carries a run of equal-sized datagrams to one peer as a UDP GSO
//! super-packet (Linux `UDP_SEGMENT`), one `recvmmsg` reads up to [`quinn_udp::BATCH_SIZE`]
//! datagrams, and every datagram comes with the kernel's receive timestamp
//! (`SO_TIMESTAMPNS`).
//!
//! Why batch: a bulk ATP transfer on loopback spent 80 % of its time in the kernel's
//! per-datagram UDP path (EXPERIMENTS.md, "Bulk throughput on loopback"); GSO and recvmmsg
//! divide those syscalls by the batch size.
//!
//! Why timestamps: a batch is read at one instant, so the time of the read says nothing about
//! when each datagram arrived; ATP's packet-pair and packet-train measurements need the gap
//! between arrivals. The kernel stamps each datagram as it reaches the socket.
//!
//! Why no GRO, and GSO only where asked for: a GSO run or a GRO merge is one buffer in the
//! kernel with one timestamp. On a physical link a GSO run still leaves as separate frames,
//! spaced by the bottleneck, but on a virtual one (loopback, veth) it crosses as one buffer,
//! so two datagrams of a packet pair sent in one run arrive with a gap of zero and measure
//! nothing. Receive-side GRO is turned off; send-side GSO is the caller's choice
//! ([`UdpIo::new`]), and per datagram the protocol's ([`Datagram::coalesce`]): ATP's core
//! marks DATA as coalescable and its probes not.
//!
//! Except on loopback, where a caller may turn receive GRO back on
//! ([`UdpIo::gro_on_loopback`]): the loopback device has no GRO stage, so the only
//! datagrams the socket receives merged are those that were sent as one GSO run — which
//! share one kernel timestamp whether the kernel splits them before the socket (GRO off) or
//! the socket does (GRO on). Probes sent alone stay alone, with their own timestamps, and a
//! 44-datagram run costs one trip through the receive path instead of 44 (a bulk transfer
//! on loopback spent about half its samples in the per-datagram receive path: EXPERIMENTS.md,
//! "ATP's data path on loopback").
//!
//! The sender side never blocks the driver: when the socket's send buffer is full the unsent
//! datagrams stay queued here ([`UdpIo::stalled`]), the driver keeps reading acknowledgements
//! and waits for [`UdpIo::writable`] before asking core for more. Core has recorded them as
//! sent a moment early; they leave as soon as the kernel takes them.

use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use quinn_udp::{RecvMeta, Transmit, UdpSockRef, UdpSocketState};
use tokio::io::Interest;
use tokio::net::UdpSocket;

/// The default largest datagram (every ATP datagram is smaller).
pub const MAX_DATAGRAM_BYTES: usize = 2048;
/// Datagrams gathered from core before they are sent.
const TX_DATAGRAMS: usize = 64;
/// The largest GSO super-packet: the payload of one IPv4 datagram.
const MAX_GSO_BYTES: usize = 65_000;
/// The largest GRO buffer the kernel hands a socket (an IP datagram's payload).
const MAX_GRO_BYTES: usize = 65_535;

/// One datagram a driver hands [`UdpIo::send_from`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Datagram {
    /// Where it goes.
    pub to: SocketAddr,
    /// Its length, from the start of the buffer it was written into.
    pub len: usize,
    /// Whether it may share a GSO super-packet with neighbours of the same size to the same
    /// destination (when the socket was made with `gso`); false sends it alone.
    pub coalesce: bool,
}

/// A UDP socket with batched, non-blocking sends and batched, timestamped receives.
#[derive(Debug)]
pub struct UdpIo {
    socket: UdpSocket,
    state: UdpSocketState,
    tx: TxQueue,
    rx_buf: Box<[u8]>,
    rx_meta: Vec<RecvMeta>,
    /// Whether runs of equal-sized datagrams may be sent as one GSO super-packet.
    gso: bool,
    /// Largest datagram sent or received; longer ones are truncated (received) or cut
    /// (sent), so callers size it to their protocol.
    max_datagram: usize,
    /// Bytes of one receive slot: a datagram, or a GRO buffer of several.
    rx_slot: usize,
}

/// How to set up a [`UdpIo`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpIoConfig {
    /// Kernel send and receive buffer to ask for, bytes.
    pub buffer_bytes: usize,
    /// Whether runs of coalescable datagrams go out as GSO super-packets.
    pub gso: bool,
    /// Largest datagram the protocol sends or accepts, bytes (buffers are sized by it).
    pub max_datagram_bytes: usize,
}

/// Datagrams taken from core and not yet handed to the kernel, stored back to back.
#[derive(Debug)]
struct TxQueue {
    buf: Box<[u8]>,
    /// Each datagram, in order; offsets are the running sum of lengths.
    items: Vec<Datagram>,
    /// Bytes in `buf`.
    used: usize,
    /// Items already sent, and their bytes.
    sent_items: usize,
    sent_bytes: usize,
    /// The kernel refused the last send (`WouldBlock`).
    blocked: bool,
}

impl UdpIo {
    /// Wraps `socket` (made non-blocking; receive GRO turned off, kernel receive timestamps
    /// on), asking for `config.buffer_bytes` of kernel send and receive buffer; with
    /// `config.gso`, runs of coalescable equal-sized datagrams to one peer go out in one
    /// `sendmsg` (see the module docs for when not to).
    pub fn new(socket: UdpSocket, config: UdpIoConfig) -> io::Result<UdpIo> {
        let UdpIoConfig {
            buffer_bytes,
            gso,
            max_datagram_bytes,
        } = config;
        let max_datagram = max_datagram_bytes.clamp(1, 65_535);
        let state = UdpSocketState::new(UdpSockRef::from(&socket))?;
        // A smaller buffer than asked only costs throughput.
        let _ = crate::iface::grow_socket_buffers(
            std::os::fd::AsRawFd::as_raw_fd(&socket),
            buffer_bytes,
        );
        disable_gro(&socket);
        Ok(UdpIo {
            socket,
            state,
            tx: TxQueue {
                buf: vec![0u8; TX_DATAGRAMS * max_datagram].into_boxed_slice(),
                items: Vec::with_capacity(TX_DATAGRAMS),
                used: 0,
                sent_items: 0,
                sent_bytes: 0,
                blocked: false,
            },
            rx_buf: vec![0u8; quinn_udp::BATCH_SIZE * max_datagram].into_boxed_slice(),
            rx_meta: vec![RecvMeta::default(); quinn_udp::BATCH_SIZE],
            gso,
            max_datagram,
            rx_slot: max_datagram,
        })
    }

    /// Turns receive GRO back on if the socket is bound to a loopback address (see the
    /// module docs for why that keeps every datagram's timing) and the kernel supports it;
    /// returns whether it did. Receive slots grow to hold a whole GRO buffer (64 KB each).
    pub fn gro_on_loopback(&mut self) -> bool {
        let loopback = self.socket.local_addr().is_ok_and(|a| a.ip().is_loopback());
        if !loopback || !set_gro(&self.socket, true) || self.state.gro_segments() < 2 {
            return false;
        }
        self.rx_slot = MAX_GRO_BYTES.max(self.max_datagram);
        self.rx_buf = vec![0u8; quinn_udp::BATCH_SIZE * self.rx_slot].into_boxed_slice();
        true
    }

    /// The socket (for addresses and socket options).
    pub fn socket(&self) -> &UdpSocket {
        &self.socket
    }

    /// Whether datagrams wait for the socket to become writable.
    pub fn stalled(&self) -> bool {
        self.tx.blocked
    }

    /// Resolves when the socket may take more datagrams.
    pub async fn writable(&self) -> io::Result<()> {
        self.socket.writable().await
    }

    /// Resolves when the socket may have datagrams to read.
    pub async fn readable(&self) -> io::Result<()> {
        self.socket.readable().await
    }

    /// Resolves when the socket may have datagrams to read or, while sends are
    /// [`stalled`](UdpIo::stalled), may take the rest: what a driver waits on.
    pub async fn ready(&self) -> io::Result<()> {
        if self.stalled() {
            tokio::select! {
                r = self.socket.readable() => r,
                w = self.socket.writable() => w,
            }
        } else {
            self.socket.readable().await
        }
    }

    /// Hands the kernel what is queued, then asks `next` for more datagrams (it writes one
    /// into the buffer it is given and describes it, or returns `None` when it has nothing to
    /// send now) and sends them in batches, until `next` has nothing or the socket's buffer
    /// is full ([`UdpIo::stalled`]). Send errors other than a full buffer lose the datagram,
    /// as a network would; the protocol above recovers.
    pub fn send_from(
        &mut self,
        mut next: impl FnMut(&mut [u8]) -> Option<Datagram>,
    ) -> io::Result<()> {
        loop {
            if !self.send_queued()? {
                return Ok(());
            }
            let (tx, max) = (&mut self.tx, self.max_datagram);
            while tx.items.len() < TX_DATAGRAMS {
                let Some(slot) = tx.buf.get_mut(tx.used..tx.used + max) else {
                    break;
                };
                match next(slot) {
                    Some(d) => {
                        let len = d.len.min(max);
                        tx.items.push(Datagram { len, ..d });
                        tx.used += len;
                    }
                    None => break,
                }
            }
            if tx.items.is_empty() {
                return Ok(());
            }
            let full = tx.items.len() == TX_DATAGRAMS;
            if !self.send_queued()? || !full {
                return Ok(());
            }
        }
    }

    /// Sends queued datagrams as GSO runs. `Ok(true)`: the queue is empty; `Ok(false)`: the
    /// socket is full and the rest waits.
    fn send_queued(&mut self) -> io::Result<bool> {
        let max_segments = if self.gso {
            self.state.max_gso_segments().max(1)
        } else {
            1
        };
        let tx = &mut self.tx;
        while tx.sent_items < tx.items.len() {
            let first = tx.items[tx.sent_items];
            let (to, seg) = (first.to, first.len);
            // A run: datagrams that may coalesce, same destination, same size; the last may
            // be shorter (GSO's rule). One that may not coalesce is a run of its own.
            let mut count = 1;
            let mut bytes = seg;
            if first.coalesce {
                for d in &tx.items[tx.sent_items + 1..] {
                    if !d.coalesce
                        || d.to != to
                        || d.len > seg
                        || count == max_segments
                        || bytes + d.len > MAX_GSO_BYTES
                    {
                        break;
                    }
                    count += 1;
                    bytes += d.len;
                    if d.len < seg {
                        break;
                    }
                }
            }
            let contents = &tx.buf[tx.sent_bytes..tx.sent_bytes + bytes];
            let transmit = Transmit {
                destination: to,
                ecn: None,
                contents,
                segment_size: (count > 1).then_some(seg),
                src_ip: None,
            };
            let state = &self.state;
            let sock = &self.socket;
            match sock.try_io(Interest::WRITABLE, || {
                state.try_send(UdpSockRef::from(sock), &transmit)
            }) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    tx.blocked = true;
                    return Ok(false);
                }
                // Unreachable peer, message too long, no route: the run is lost, as on a
                // network. (quinn-udp turns GSO off by itself if the device refuses it.)
                Err(e) => tracing::debug!(%to, error = %e, "send failed; datagrams lost"),
            }
            tx.sent_items += count;
            tx.sent_bytes += bytes;
        }
        tx.blocked = false;
        tx.items.clear();
        tx.used = 0;
        tx.sent_items = 0;
        tx.sent_bytes = 0;
        Ok(true)
    }

    /// Reads one batch of datagrams (one `recvmmsg`) and hands each to `each` with its
    /// source and kernel receive timestamp (Unix time; `None` where the kernel gave none).
    /// Returns how many were read; `Ok(0)` when nothing is waiting.
    pub fn recv_batch(
        &mut self,
        mut each: impl FnMut(SocketAddr, Option<SystemTime>, &[u8]),
    ) -> io::Result<usize> {
        let mut iovs: Vec<IoSliceMut<'_>> = self
            .rx_buf
            .chunks_mut(self.rx_slot)
            .map(IoSliceMut::new)
            .collect();
        let state = &self.state;
        let sock = &self.socket;
        let meta = &mut self.rx_meta;
        let n = match sock.try_io(Interest::READABLE, || {
            state.recv(UdpSockRef::from(sock), &mut iovs, meta)
        }) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(0),
            Err(e) => return Err(e),
        };
        let mut datagrams = 0;
        for (m, iov) in self.rx_meta.iter().zip(iovs.iter()).take(n) {
            let at = m.timestamp.map(|d| SystemTime::UNIX_EPOCH + d);
            let data = iov.get(..m.len).unwrap_or_default();
            // With GRO off each buffer is one datagram; with it on (loopback) a buffer may
            // hold a GSO run: `stride` separates them (each at most `max_datagram`, as
            // without GRO).
            for d in data.chunks(m.stride.max(1)) {
                let d = d.get(..self.max_datagram).unwrap_or(d);
                each(m.addr, at, d);
                datagrams += 1;
            }
        }
        Ok(datagrams)
    }
}

/// Turns receive-side UDP GRO off (quinn-udp turns it on); see the module docs for why.
fn disable_gro(socket: &UdpSocket) {
    set_gro(socket, false);
}

/// Sets receive-side UDP GRO; returns whether the kernel took it.
fn set_gro(socket: &UdpSocket, on: bool) -> bool {
    const UDP_GRO: libc::c_int = 104; // linux/udp.h
    let value: libc::c_int = on.into();
    // SAFETY: setsockopt reads one int of the given size from the pointer.
    let r = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(socket),
            libc::IPPROTO_UDP,
            UDP_GRO,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    r == 0
}

/// How long ago `at` was, for a kernel timestamp (zero if in the future).
pub fn age_of(at: SystemTime) -> Duration {
    SystemTime::now()
        .duration_since(at)
        .unwrap_or(Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(buffer_bytes: usize, gso: bool) -> UdpIoConfig {
        UdpIoConfig {
            buffer_bytes,
            gso,
            max_datagram_bytes: MAX_DATAGRAM_BYTES,
        }
    }

    async fn pair(gro: bool) -> (UdpIo, UdpIo) {
        let a = UdpSocket::bind("127.0.0.1:0").await.expect("bind");
        let b = UdpSocket::bind("127.0.0.1:0").await.expect("bind");
        let a = UdpIo::new(a, config(1 << 20, true)).expect("io");
        let mut b = UdpIo::new(b, config(1 << 20, true)).expect("io");
        if gro {
            assert!(b.gro_on_loopback(), "GRO on a loopback socket");
        }
        (a, b)
    }

    /// Every datagram arrives whole, once, in order (loopback does not reorder), whatever
    /// mix of sizes and runs the sender produced; each carries a plausible timestamp.
    #[tokio::test]
    async fn test_batches_arrive_whole_and_in_order() {
        batches_arrive_whole_and_in_order(false).await;
    }

    /// The same with receive GRO on (loopback): runs arrive merged and are split again.
    #[tokio::test]
    async fn test_batches_arrive_whole_and_in_order_with_gro_on_loopback() {
        batches_arrive_whole_and_in_order(true).await;
    }

    /// GRO stays off on a socket that is not bound to loopback.
    #[tokio::test]
    async fn test_no_gro_off_loopback() {
        let s = UdpSocket::bind("0.0.0.0:0").await.expect("bind");
        let mut io = UdpIo::new(s, config(1 << 20, true)).expect("io");
        assert!(!io.gro_on_loopback());
    }

    async fn batches_arrive_whole_and_in_order(gro: bool) {
        let (mut a, mut b) = pair(gro).await;
        let to = b.socket().local_addr().expect("addr");
        // 200 datagrams: runs of 1200-byte ones broken by shorter ones.
        let sizes: Vec<usize> = (0..200)
            .map(|i| if i % 17 == 16 { 100 + i } else { 1200 })
            .collect();
        let mut k = 0;
        // Until tokio has seen the socket writable, a send reports a stall; then it resumes.
        while k < sizes.len() || a.stalled() {
            a.writable().await.expect("writable");
            a.send_from(|buf| {
                let n = *sizes.get(k)?;
                buf[..n].fill((k % 251) as u8);
                buf[..2].copy_from_slice(&(k as u16).to_be_bytes());
                k += 1;
                Some(Datagram {
                    to,
                    len: n,
                    coalesce: k % 5 != 0,
                })
            })
            .expect("send");
        }
        let mut got = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while got.len() < sizes.len() && tokio::time::Instant::now() < deadline {
            let _ = tokio::time::timeout(Duration::from_millis(100), b.readable()).await;
            b.recv_batch(|_, at, d| {
                let age = at.map(age_of).expect("kernel timestamp");
                assert!(age < Duration::from_secs(5), "timestamp {age:?} old");
                got.push(d.to_vec());
            })
            .expect("recv");
        }
        assert_eq!(got.len(), sizes.len());
        for (i, d) in got.iter().enumerate() {
            assert_eq!(d.len(), sizes[i], "datagram {i}");
            assert_eq!(u16::from_be_bytes([d[0], d[1]]) as usize, i);
        }
    }

    /// A flood far beyond both buffers neither blocks nor fails the sender: a full socket
    /// stalls the queue (resumed when writable), and what the receiver's buffer held arrives.
    #[tokio::test]
    async fn test_flood_stalls_and_resumes_without_error() {
        let a = UdpSocket::bind("127.0.0.1:0").await.expect("bind");
        let b = UdpSocket::bind("127.0.0.1:0").await.expect("bind");
        let mut a = UdpIo::new(a, config(4096, false)).expect("io");
        let mut b = UdpIo::new(b, config(4096, false)).expect("io");
        let to = b.socket().local_addr().expect("addr");
        let mut offered = 0u64;
        while offered < 10_000 || a.stalled() {
            a.writable().await.expect("writable");
            a.send_from(|buf| {
                if offered == 10_000 {
                    return None;
                }
                offered += 1;
                buf[..1000].fill(1);
                Some(Datagram {
                    to,
                    len: 1000,
                    coalesce: true,
                })
            })
            .expect("send never fails on a full buffer");
        }
        b.readable().await.expect("readable");
        let mut read = 0;
        while b.recv_batch(|_, _, _| read += 1).expect("recv") > 0 {}
        assert!(read > 0 && read < 10_000, "read {read}");
    }
}
