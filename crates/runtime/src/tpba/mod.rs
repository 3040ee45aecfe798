//! TPBA over real sockets (`papers/002_ef8b8f60f6080824.txt` §4–§5): a sender that drives
//! core's [`FSocket`](adaptnet_core::tpba::FSocket) with a kernel TCP connection and a UDP
//! socket, and a receiver that accepts both and yields ADUs in order.
//!
//! Every decision — when probing ends, the running rate, when to switch, which ADU goes on
//! which path, reassembly — is core's. This module moves bytes and reports the kernel TCP
//! connection's state to core:
//!
//! * `FlowPath::Tcp` bytes are appended to the TCP stream (written by the driver itself, at
//!   most one of core's transmits waiting for the socket: core is asked for more only once
//!   the kernel has taken the last); `FlowPath::Udp` and `FlowPath::Control` bytes are
//!   datagrams to the peer's UDP socket;
//! * `TcpCommand::NoDelay` sets `TCP_NODELAY` in stream order, after the last write of a
//!   probing period (§4: Nagle off so the tail leaves and the buffer evacuates);
//! * `TcpStatus` comes from Linux `TCP_INFO` ([`crate::tcpinfo`]): `tcpi_bytes_acked` is the
//!   movement of snd_una the probing period samples every `T_TCP` — the counterpart of the
//!   paper's kernel change with none; window reductions are counted as entries into
//!   `TCP_CA_Recovery`/`TCP_CA_Loss` seen when `TCP_INFO` is read.
//! * `TcpCommand::SetCwnd` (§4's `cwnd_new`) cannot be applied: Linux lets user space
//!   neither read-modify nor set the congestion window. It is counted in
//!   [`SenderStats::cwnd_requests`] and otherwise ignored; running with
//!   `net.ipv4.tcp_slow_start_after_idle = 0` keeps the kernel from restarting slow start
//!   after the running period's silence, which is what `cwnd_new` is for.
//!
//! # Shape
//! Both ends run the crate's one driver loop on the caller's tokio runtime, with the API shape
//! of every other protocol: [`TpbaOptions`] with named bounds, the crate's error vocabulary
//! ([`ConnectError`](crate::ConnectError) to open, [`ConnectionError`] for why a flow ended),
//! bounded queues, cheap handles. Dropping the sender's last handle closes the flow
//! gracefully (complete ADUs are sent, then TCP's FIN); [`TpbaSender::finish`] does so and
//! waits; dropping the receiver closes its sockets. [`TpbaSender::wait_idle`] and
//! [`TpbaReceiver::wait_idle`] return once the driver has stopped.
//!
//! # Rendezvous
//! The receiver listens on one address for TCP and binds UDP on the same port. The sender
//! connects TCP, then writes a 6-byte preamble (`b"TPBA"` and its UDP port, big-endian)
//! before any flow byte, so the receiver knows where its receiver reports go before the
//! first datagram. One flow per receiver.
//!
//! ```no_run
//! use adaptnet_runtime::tpba::{TpbaOptions, TpbaReceiver, TpbaSender};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let mut rx = TpbaReceiver::bind("127.0.0.1:0".parse()?, TpbaOptions::default())?;
//! let tx = TpbaSender::connect(rx.local_addr(), TpbaOptions::default()).await?;
//! tx.send(b"frame 0".to_vec(), true).await?;
//! assert_eq!(rx.recv().await?, b"frame 0");
//! let stats = tx.finish().await?;
//! println!("probed rates: {:?}", stats.probed_rates_bytes_per_s);
//! # Ok(()) }
//! ```

mod receiver;
mod sender;

pub use receiver::TpbaReceiver;
pub use sender::TpbaSender;

use crate::error::ConnectionError;
use adaptnet_core::tpba::{FsConfig, FsError, Period};
use std::sync::Mutex;
use std::time::Duration;
use thiserror::Error;

/// The preamble's magic.
const MAGIC: &[u8; 4] = b"TPBA";
/// Preamble bytes: magic and the sender's UDP port.
const PREAMBLE_LEN: usize = 6;
/// Largest datagram either side reads.
const MAX_DATAGRAM: usize = 64 << 10;

/// How to open either end of a TPBA flow: core's flow configuration and the runtime's bounds.
#[derive(Clone, Debug)]
pub struct TpbaOptions {
    /// Core's flow configuration (TPBA's periods and agreement, bounds of the send queue and
    /// of reassembly, `reorder_timeout`).
    pub fs: FsConfig,
    /// Sender: requests from handles queued for the driver; callers wait beyond.
    pub command_queue_len: usize,
    /// Sender: `send` calls waiting for room in the flow's send queue
    /// (`fs.send_queue_bytes`); one more is refused with [`TpbaError::TooManyWaiting`].
    pub waiting_sends_max: usize,
    /// Receiver: whole ADUs delivered and not yet read; beyond, the receiver stops taking
    /// them from core (which holds at most `fs.recv_queue_adus` more).
    pub adu_queue_len: usize,
    /// Sender: how often `TCP_INFO` is read while TCP data is unacknowledged or sends wait
    /// (evacuation before a switch and room in `fs.tcp_buffer_bytes` are seen this late).
    pub tcp_status_poll: Duration,
    /// Receiver: how long an accepted connection may take to send its preamble.
    pub preamble_timeout: Duration,
    /// How long a closing end keeps running to send what it owes; past it, it stops anyway.
    pub shutdown_timeout: Duration,
}

impl Default for TpbaOptions {
    fn default() -> TpbaOptions {
        TpbaOptions::with_fs(FsConfig::default())
    }
}

impl TpbaOptions {
    /// The default bounds around core's flow configuration `fs`.
    pub fn with_fs(fs: FsConfig) -> TpbaOptions {
        TpbaOptions {
            adu_queue_len: fs.recv_queue_adus.max(1),
            fs,
            command_queue_len: 64,
            waiting_sends_max: 64,
            tcp_status_poll: Duration::from_millis(2),
            preamble_timeout: Duration::from_secs(10),
            shutdown_timeout: Duration::from_secs(5),
        }
    }
}

/// Why a call on a TPBA sender was refused.
#[derive(Debug, Error)]
pub enum TpbaError {
    /// The flow refused the ADU (too large, the flow closed …).
    #[error(transparent)]
    Fs(#[from] FsError),
    /// More `send`s are waiting for room than [`TpbaOptions::waiting_sends_max`].
    #[error("{0} sends already wait for room in the flow's send queue")]
    TooManyWaiting(usize),
    /// The flow has ended, for this reason.
    #[error("the flow ended: {0}")]
    ConnectionLost(#[from] ConnectionError),
}

/// What the sender has done so far.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SenderStats {
    /// The period in force.
    pub period: Option<Period>,
    /// Each probing period's result `rs`, bytes/s, in order.
    pub probed_rates_bytes_per_s: Vec<f64>,
    /// Probing samples `r[i]` taken, bytes/s, in order (all periods).
    pub samples_bytes_per_s: Vec<f64>,
    /// Switches made to the running period.
    pub switches_to_running: u32,
    /// Switches made back to probing.
    pub switches_to_probing: u32,
    /// Running-rate decreases.
    pub decreases: u32,
    /// `SetCwnd` commands core issued that the kernel cannot apply.
    pub cwnd_requests: u32,
    /// `tcpi_bytes_acked` of the flow's bytes at the last `TCP_INFO` reading.
    pub tcp_bytes_acked: u64,
    /// Window reductions seen in `TCP_INFO`.
    pub congestion_events: u64,
    /// Datagrams sent on UDP (data and control).
    pub datagrams_sent: u64,
    /// Datagrams the socket did not take (its buffer full): lost like any datagram.
    pub datagrams_dropped: u64,
    /// Control datagrams that did not parse.
    pub bad_control: u64,
}

/// What the receiver has done so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReceiverStats {
    /// ADUs delivered whose data came on TCP.
    pub adus_tcp: u64,
    /// ADUs delivered whose data came on UDP.
    pub adus_udp: u64,
    /// ADUs abandoned as incomplete.
    pub adus_lost: u64,
    /// Datagrams that did not parse.
    pub bad_datagrams: u64,
    /// Receiver reports sent.
    pub reports_sent: u64,
}

/// A copy of what `m` holds (a poisoned lock is taken over: the data stays valid).
fn snapshot<T: Clone>(m: &Mutex<T>) -> T {
    m.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Changes what `m` holds.
fn update<T>(m: &Mutex<T>, f: impl FnOnce(&mut T)) {
    f(&mut m.lock().unwrap_or_else(|p| p.into_inner()));
}

/// What a TPBA flow's framing error means for the connection.
fn violation(e: FsError) -> ConnectionError {
    match e {
        FsError::Wire(w) => ConnectionError::ProtocolViolation(w),
        other => ConnectionError::Io(std::sync::Arc::new(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            other,
        ))),
    }
}
