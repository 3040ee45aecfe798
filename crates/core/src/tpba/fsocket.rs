//! The flow pair and the fsocket API (`papers/002_ef8b8f60f6080824.txt` §5): one flow owns a
//! UDP data path, a TCP path and an RTCP-like control channel; `f_socket`, `f_dst`, `f_send`,
//! `f_recv` and `f_close` hide which transport carries the data (Fig. 6).
//!
//! # What the engine does
//!
//! [`FSocket`] is sans-IO: it does not own sockets or the TCP connection. The engine (the
//! simulator's agent or the real runtime) owns a TCP connection per flow and two UDP sockets
//! (data and control) and moves bytes:
//!
//! ```text
//! sender engine:
//!   while let Some(t) = fs.poll_transmit(now) {
//!       match t.path { Udp => send datagram, Control => send on control socket,
//!                      Tcp => conn.write(t.bytes.len()) and keep the bytes for the stream }
//!   }
//!   while let Some(c) = fs.poll_tcp_command() { SetCwnd → set TCP's window; NoDelay → Nagle }
//!   fs.handle_tcp_status(now, TcpStatus { bytes_acked, cwnd_bytes, smss, congestion_events })
//!       after every TCP input;
//!   fs.handle_control(now, &report) for each control datagram;
//! receiver engine:
//!   fs.handle_udp(now, &dgram)?; fs.handle_tcp_bytes(now, &in_order_stream_bytes)?;
//!   then drain poll_transmit (receiver reports go out on Control);
//! both:     handle_timeout(now) at poll_timeout(); drain poll_event(); the application calls
//!           f_send / f_recv.
//! ```
//!
//! # Switching and ADUs
//!
//! An ADU is what the application writes between two `adu_boundary = true` calls of `f_send`
//! (§5.2's `adu_ind`). ADUs are numbered from 0 and queued whole; all fragments of one ADU go
//! on one path, so every point between two ADUs is an ADU boundary and switching happens
//! only there (§4 "Timing of Switching Periods"). Towards the running period the sender also
//! waits until everything written to TCP has been acknowledged (the send buffer is
//! evacuated; a [`TcpCommand::NoDelay`] asks engines with Nagle to push the tail out), so no
//! UDP datagram of the new period overtakes TCP data of the old one.
//!
//! The receiver reassembles fragments from both paths into ADUs and delivers them strictly in
//! ADU order, each at most once, never a partial or mixed one. An ADU that cannot complete
//! (a UDP fragment lost) blocks later complete ones for at most
//! [`FsConfig::reorder_timeout`]; then it is abandoned ([`FsEvent::AduLost`]) and later
//! arrivals of it are dropped as duplicates.

use super::config::TpbaConfig;
use super::controller::{Controller, Period, TpbaEvent};
use super::report::{
    FragmentHeader, ReceiverReport, extend_adu_seq, low32, stamp_us, unwrap_stamp,
};
use crate::nai::RangeSet;
use crate::time::Time;
use crate::wire::WireError;
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::time::Duration;
use thiserror::Error;

/// Flow-pair configuration: TPBA's parameters and the flow's bounds.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct FsConfig {
    /// The controller's parameters (Table 2).
    pub tpba: TpbaConfig,
    /// ADU bytes per UDP datagram (§3 and §6: 512-byte RTP payloads).
    pub udp_payload_bytes: u32,
    /// Bytes written to TCP and not yet acknowledged, at most (the socket send buffer).
    pub tcp_buffer_bytes: u64,
    /// Bytes accepted by `f_send` and not yet transmitted, at most.
    pub send_queue_bytes: u64,
    /// Largest ADU, bytes.
    pub max_adu_bytes: u32,
    /// How long an incomplete ADU may hold back complete later ones at the receiver.
    pub reorder_timeout: Duration,
    /// ADUs ahead of the next one to deliver that the receiver accepts fragments for.
    pub reassembly_window_adus: u64,
    /// Bytes of incomplete or undelivered ADUs the receiver holds, at most.
    pub max_reassembly_bytes: u64,
    /// Complete ADUs waiting for `f_recv`, at most (beyond, they wait in reassembly).
    pub recv_queue_adus: usize,
}

impl Default for FsConfig {
    fn default() -> Self {
        FsConfig {
            tpba: TpbaConfig::default(),
            udp_payload_bytes: 512,
            tcp_buffer_bytes: 64 * 1024,
            send_queue_bytes: 1 << 20,
            max_adu_bytes: 1 << 20,
            reorder_timeout: Duration::from_millis(500),
            reassembly_window_adus: 1024,
            max_reassembly_bytes: 4 << 20,
            recv_queue_adus: 1024,
        }
    }
}

/// Why an fsocket call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum FsError {
    /// `f_send` before `f_dst` registered the remote site.
    #[error("no destination: call f_dst before f_send")]
    NoDestination,
    /// `f_send` after `f_close`.
    #[error("the flow is closed")]
    Closed,
    /// The ADU would exceed `max_adu_bytes`.
    #[error("ADU of {len} bytes exceeds max_adu_bytes = {max}")]
    AduTooLarge {
        /// Bytes the ADU would have.
        len: u64,
        /// The bound.
        max: u32,
    },
    /// The send queue is full; retry after data has been sent.
    #[error("send queue full: {queued} bytes queued, send_queue_bytes = {limit}")]
    QueueFull {
        /// Bytes queued.
        queued: u64,
        /// The bound.
        limit: u64,
    },
    /// A packet or the TCP stream did not parse. On the TCP stream this is fatal: the
    /// framing is lost.
    #[error("malformed input: {0}")]
    Wire(#[from] WireError),
}

/// Which socket a transmit goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowPath {
    /// The UDP data socket: one datagram.
    Udp,
    /// Append to the TCP stream.
    Tcp,
    /// The control (RTCP-like) UDP socket: one datagram.
    Control,
}

/// Bytes to put on one path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowTransmit {
    /// Where.
    pub path: FlowPath,
    /// What.
    pub bytes: Vec<u8>,
}

/// An instruction to the engine about the flow's TCP connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpCommand {
    /// Set the congestion window to this many bytes (§4's `cwnd_new` when probing resumes;
    /// the engine must not restart slow start).
    SetCwnd(u64),
    /// Set or clear TCP_NODELAY (§4: set before the last write of a probing period, cleared
    /// when probing starts again). Our simulated TCP has no Nagle; kernel TCP does.
    NoDelay(bool),
}

/// The sender's TCP connection, as the engine reports it after each TCP input.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpStatus {
    /// Bytes acknowledged since the connection began (snd_una's movement).
    pub bytes_acked: u64,
    /// The congestion window, bytes.
    pub cwnd_bytes: u64,
    /// Maximum segment size (`t_maxseg`), bytes.
    pub smss: u64,
    /// Count of window reductions so far (fast retransmits plus timeouts).
    pub congestion_events: u64,
}

/// Something the application or the engine may want to know.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FsEvent {
    /// The TPBA controller did something.
    Tpba(TpbaEvent),
    /// An ADU is complete and queued for `f_recv` (for inter-arrival times `j_A`).
    AduReceived {
        /// ADU number.
        seq: u64,
        /// Its length.
        len: u32,
        /// Its data came on TCP.
        tcp: bool,
    },
    /// ADUs `first .. first + count` were abandoned (incomplete after `reorder_timeout`).
    AduLost {
        /// First ADU number.
        first: u64,
        /// How many.
        count: u64,
    },
    /// A receiver report arrived; the RTT it implies, if the echo was valid.
    Report {
        /// Loss ratio over the datagrams it covers.
        loss_ratio: f64,
        /// `now − echo − delay`.
        rtt: Option<Duration>,
    },
}

const MAX_EVENTS: usize = 4096;
/// Bound on the byte ranges one incomplete ADU may consist of.
const MAX_RANGES_PER_ADU: usize = 4096;

#[derive(Clone, Debug)]
struct QueuedAdu {
    seq: u64,
    data: Vec<u8>,
}

/// The sending half.
#[derive(Clone, Debug)]
struct TxHalf {
    ctl: Controller,
    building: Vec<u8>,
    queue: VecDeque<QueuedAdu>,
    queued_bytes: u64,
    next_adu_seq: u64,
    /// An ADU partly sent on UDP, and the offset of its next fragment.
    current: Option<(QueuedAdu, u32)>,
    tcp_written: u64,
    tcp_acked: u64,
    status: TcpStatus,
    next_udp_at: Time,
    dgram_seq: u32,
    tcp_cmds: VecDeque<TcpCommand>,
    nodelay_requested: bool,
    rr_highest: Option<u32>,
    rr_lost: u32,
    rtt: Option<Duration>,
}

#[derive(Clone, Debug)]
struct Partial {
    adu_len: u32,
    data: Vec<u8>,
    have: RangeSet,
    tcp: bool,
    /// When the last missing byte arrived.
    completed_at: Option<Time>,
}

impl Partial {
    fn complete(&self) -> bool {
        self.have.covers(0, u64::from(self.adu_len))
    }
}

/// The receiving half.
#[derive(Clone, Debug, Default)]
struct RxHalf {
    next_deliver: u64,
    partial: BTreeMap<u64, Partial>,
    partial_bytes: u64,
    ready: VecDeque<Vec<u8>>,
    stream: Vec<u8>,
    stream_broken: bool,
    blocked_since: Option<Time>,
    highest_dgram: Option<u32>,
    dgrams: u64,
    report_expected: u64,
    report_received: u64,
    jitter_s: f64,
    last_transit_s: Option<f64>,
    last_udp: Option<(Time, Time)>,
    received_bytes: u64,
    /// ADU payload bytes of the fragments accepted for reassembly, from either path.
    payload_bytes: u64,
    next_report_at: Option<Time>,
    reports_due: bool,
    dropped_fragments: u64,
}

/// One end of a TPBA flow. See the module docs for how engines drive it.
#[derive(Clone, Debug)]
pub struct FSocket {
    config: FsConfig,
    local: SocketAddr,
    remote: Option<SocketAddr>,
    closed: bool,
    tx: TxHalf,
    rx: RxHalf,
    events: VecDeque<FsEvent>,
}

impl FSocket {
    /// `f_socket`: a flow pair bound to `local`, its controller starting at `now` with a
    /// rate-probing period.
    #[allow(
        clippy::self_named_constructors,
        reason = "the paper's API name (§5.2, Fig. 6)"
    )]
    pub fn f_socket(now: Time, local: SocketAddr, config: FsConfig) -> FSocket {
        FSocket {
            tx: TxHalf {
                ctl: Controller::new(now, config.tpba.clone()),
                building: Vec::new(),
                queue: VecDeque::new(),
                queued_bytes: 0,
                next_adu_seq: 0,
                current: None,
                tcp_written: 0,
                tcp_acked: 0,
                status: TcpStatus::default(),
                next_udp_at: now,
                dgram_seq: 0,
                tcp_cmds: VecDeque::new(),
                nodelay_requested: false,
                rr_highest: None,
                rr_lost: 0,
                rtt: None,
            },
            rx: RxHalf::default(),
            config,
            local,
            remote: None,
            closed: false,
            events: VecDeque::new(),
        }
    }

    /// `f_dst`: registers the remote site.
    pub fn f_dst(&mut self, remote: SocketAddr) {
        self.remote = Some(remote);
    }

    /// The local address given to `f_socket`.
    pub fn local(&self) -> SocketAddr {
        self.local
    }

    /// The remote site, once registered.
    pub fn remote(&self) -> Option<SocketAddr> {
        self.remote
    }

    /// The configuration.
    pub fn config(&self) -> &FsConfig {
        &self.config
    }

    /// The TPBA controller (period, rate, samples).
    pub fn controller(&self) -> &Controller {
        &self.tx.ctl
    }

    /// `f_send`: appends `msg` to the current ADU; `adu_boundary` ends it (§5.2 `adu_ind`).
    /// Returns the bytes accepted (all of `msg`).
    pub fn f_send(&mut self, _now: Time, msg: &[u8], adu_boundary: bool) -> Result<usize, FsError> {
        if self.closed {
            return Err(FsError::Closed);
        }
        if self.remote.is_none() {
            return Err(FsError::NoDestination);
        }
        let adu_len = self.tx.building.len() as u64 + msg.len() as u64;
        if adu_len > u64::from(self.config.max_adu_bytes) {
            return Err(FsError::AduTooLarge {
                len: adu_len,
                max: self.config.max_adu_bytes,
            });
        }
        let queued = self.tx.queued_bytes + self.tx.building.len() as u64;
        if queued + msg.len() as u64 > self.config.send_queue_bytes {
            return Err(FsError::QueueFull {
                queued,
                limit: self.config.send_queue_bytes,
            });
        }
        self.tx.building.extend_from_slice(msg);
        if adu_boundary {
            let data = std::mem::take(&mut self.tx.building);
            self.tx.queued_bytes += data.len() as u64;
            let seq = self.tx.next_adu_seq;
            self.tx.next_adu_seq += 1;
            self.tx.queue.push_back(QueuedAdu { seq, data });
        }
        Ok(msg.len())
    }

    /// `f_recv`: the next complete ADU, in order.
    pub fn f_recv(&mut self) -> Option<Vec<u8>> {
        let adu = self.rx.ready.pop_front();
        if adu.is_some() {
            // Room in the ready queue: ADUs held back in reassembly may move up.
            self.deliver();
        }
        adu
    }

    /// `f_close`: no more `f_send`; an unterminated ADU is discarded, queued ADUs are still
    /// sent.
    pub fn f_close(&mut self, _now: Time) {
        self.closed = true;
        self.tx.building.clear();
    }

    /// Everything accepted by `f_send` has been handed to a transport (and, on TCP,
    /// acknowledged).
    pub fn is_drained(&self) -> bool {
        self.tx.queue.is_empty()
            && self.tx.current.is_none()
            && self.tx.tcp_written == self.tx.tcp_acked
    }

    /// ADUs handed to `f_send` and completed (numbered so far).
    pub fn adus_sent(&self) -> u64 {
        self.tx.next_adu_seq
    }

    /// The next ADU number the receiver will deliver.
    pub fn next_adu_to_deliver(&self) -> u64 {
        self.rx.next_deliver
    }

    /// Fragments the receiver dropped as duplicate, out of window, inconsistent or over a
    /// bound.
    pub fn dropped_fragments(&self) -> u64 {
        self.rx.dropped_fragments
    }

    /// ADU payload bytes that arrived on either path in fragments accepted for reassembly
    /// (not duplicates, not inconsistent), whether or not their ADU later completes: the flow's share of the link counted per
    /// packet, as §6.1 measured "Flow 3 (UDP)" plus "Flow 3 (TCP)" at the receiver's driver.
    /// ADUs delivered whole are counted by the application at `f_recv`.
    pub fn received_payload_bytes(&self) -> u64 {
        self.rx.payload_bytes
    }

    fn push_event(&mut self, e: FsEvent) {
        if self.events.len() >= MAX_EVENTS {
            self.events.pop_front();
        }
        self.events.push_back(e);
    }

    fn drain_controller_events(&mut self) {
        while let Some(e) = self.tx.ctl.poll_event() {
            self.push_event(FsEvent::Tpba(e));
        }
    }

    // -----------------------------------------------------------------------------------
    // Sender side.

    /// The sender's TCP connection changed (call after every TCP input).
    pub fn handle_tcp_status(&mut self, now: Time, status: TcpStatus) {
        if status.congestion_events > self.tx.status.congestion_events {
            self.tx.ctl.handle_cwnd_reduction(now);
        }
        self.tx.tcp_acked = status.bytes_acked.min(self.tx.tcp_written);
        self.tx.status = status;
        self.tx.ctl.handle_tcp_progress(now, status.bytes_acked);
        self.drain_controller_events();
    }

    /// A control datagram (a receiver report) arrived.
    pub fn handle_control(&mut self, now: Time, bytes: &[u8]) -> Result<(), FsError> {
        let rr = ReceiverReport::parse(bytes)?;
        let expected_now = u64::from(rr.highest_seq) + 1;
        let expected_before = self.tx.rr_highest.map_or(0, |h| u64::from(h) + 1);
        if expected_now < expected_before {
            return Ok(()); // an older report, reordered
        }
        let expected = expected_now - expected_before;
        let lost = u64::from(rr.cumulative_lost.saturating_sub(self.tx.rr_lost));
        self.tx.rr_highest = Some(rr.highest_seq);
        self.tx.rr_lost = self.tx.rr_lost.max(rr.cumulative_lost);
        // The echo is a 32-bit microsecond stamp (0: no datagram seen yet).
        let rtt = (rr.echo_sent_at > Time::ZERO).then(|| {
            let stamp = u32::try_from(rr.echo_sent_at.as_nanos() / 1_000).unwrap_or(u32::MAX);
            now.saturating_since(unwrap_stamp(now, stamp))
                .saturating_sub(rr.delay())
        });
        if rtt.is_some() {
            self.tx.rtt = rtt;
        }
        self.tx.ctl.handle_report(now, expected, lost);
        let loss_ratio = if expected == 0 {
            0.0
        } else {
            lost.min(expected) as f64 / expected as f64
        };
        self.push_event(FsEvent::Report { loss_ratio, rtt });
        Ok(())
    }

    /// The latest RTT measured from receiver reports.
    pub fn rtt(&self) -> Option<Duration> {
        self.tx.rtt
    }

    /// The next instruction for the TCP connection, if any.
    pub fn poll_tcp_command(&mut self) -> Option<TcpCommand> {
        self.tx.tcp_cmds.pop_front()
    }

    /// Makes a wanted switch if the sender is at an ADU boundary (and, towards running, the
    /// TCP send buffer is evacuated).
    fn try_switch(&mut self, now: Time) {
        let Some(to) = self.tx.ctl.switch_wanted() else {
            return;
        };
        if self.tx.current.is_some() {
            return; // mid-ADU on UDP
        }
        match to {
            Period::Running => {
                if !self.tx.nodelay_requested {
                    self.tx.nodelay_requested = true;
                    self.tx.tcp_cmds.push_back(TcpCommand::NoDelay(true));
                }
                if self.tx.tcp_written != self.tx.tcp_acked {
                    return; // not evacuated yet
                }
                self.tx
                    .ctl
                    .commit_switch(now, self.tx.status.cwnd_bytes, self.tx.status.smss);
                self.tx.next_udp_at = now;
            }
            Period::Probing => {
                if let Some(cwnd) =
                    self.tx
                        .ctl
                        .commit_switch(now, self.tx.status.cwnd_bytes, self.tx.status.smss)
                {
                    self.tx.tcp_cmds.push_back(TcpCommand::SetCwnd(cwnd));
                }
                self.tx.nodelay_requested = false;
                self.tx.tcp_cmds.push_back(TcpCommand::NoDelay(false));
            }
        }
        self.drain_controller_events();
    }

    fn next_tcp_write(&mut self) -> Option<FlowTransmit> {
        if self.tx.ctl.switch_wanted().is_some() {
            return None; // probing is over: stop at this boundary
        }
        let outstanding = self.tx.tcp_written - self.tx.tcp_acked;
        if outstanding >= self.config.tcp_buffer_bytes {
            return None;
        }
        let adu = self.tx.queue.pop_front()?;
        self.tx.queued_bytes -= adu.data.len() as u64;
        let len = crate::convert::usize_u32_sat(adu.data.len());
        let h = FragmentHeader {
            tcp: true,
            adu_seq: adu.seq,
            adu_len: len,
            offset: 0,
            len,
            dgram_seq: 0,
            sent_at_us: 0,
        };
        let bytes = h.to_bytes(&adu.data);
        self.tx.tcp_written += bytes.len() as u64;
        Some(FlowTransmit {
            path: FlowPath::Tcp,
            bytes,
        })
    }

    fn next_datagram(&mut self, now: Time) -> Option<FlowTransmit> {
        let rate = self.tx.ctl.rate_bytes_per_s()?;
        if now < self.tx.next_udp_at {
            return None;
        }
        if self.tx.current.is_none() {
            let adu = self.tx.queue.pop_front()?;
            self.tx.queued_bytes -= adu.data.len() as u64;
            self.tx.current = Some((adu, 0));
        }
        let (adu, offset) = self.tx.current.as_mut()?;
        let adu_len = crate::convert::usize_u32_sat(adu.data.len());
        let len = (adu_len - *offset).min(self.config.udp_payload_bytes.max(1));
        let start = *offset as usize;
        let payload = adu
            .data
            .get(start..start + len as usize)
            .unwrap_or_default();
        let h = FragmentHeader {
            tcp: false,
            adu_seq: adu.seq,
            adu_len,
            offset: *offset,
            len,
            dgram_seq: self.tx.dgram_seq,
            sent_at_us: stamp_us(now),
        };
        let bytes = h.to_bytes(payload);
        *offset += len;
        if *offset >= adu_len {
            self.tx.current = None;
        }
        self.tx.dgram_seq = self.tx.dgram_seq.wrapping_add(1);
        let ipi = crate::time::transmission_time(bytes.len() as u64, rate)
            .unwrap_or(Duration::from_secs(1));
        self.tx.next_udp_at = self.tx.next_udp_at.max(now.saturating_sub(ipi)) + ipi;
        Some(FlowTransmit {
            path: FlowPath::Udp,
            bytes,
        })
    }

    /// The next thing to put on a path, if any. Drain after every input and timeout.
    pub fn poll_transmit(&mut self, now: Time) -> Option<FlowTransmit> {
        if let Some(report) = self.poll_report(now) {
            return Some(report);
        }
        self.try_switch(now);
        let t = match self.tx.ctl.period() {
            Period::Probing => self.next_tcp_write(),
            Period::Running => self.next_datagram(now),
        };
        // An ADU just completed on UDP may let a wanted switch happen now.
        if t.is_some() {
            self.try_switch(now);
        }
        t
    }

    /// When [`handle_timeout`](Self::handle_timeout) (or `poll_transmit`) should next run.
    pub fn poll_timeout(&self) -> Option<Time> {
        // Only a sending end (one with a destination) runs the controller's timers.
        let mut t = self.remote.and(self.tx.ctl.poll_timeout());
        let mut take = |c: Option<Time>| {
            if let Some(c) = c {
                t = Some(t.map_or(c, |t| t.min(c)));
            }
        };
        if self.tx.ctl.period() == Period::Running
            && (self.tx.current.is_some() || !self.tx.queue.is_empty())
        {
            take(Some(self.tx.next_udp_at));
        }
        if self.rx.reports_due {
            take(self.rx.next_report_at);
        }
        take(
            self.rx
                .blocked_since
                .map(|b| b + self.config.reorder_timeout),
        );
        t
    }

    /// Fires whatever is due at `now`.
    pub fn handle_timeout(&mut self, now: Time) {
        if self.remote.is_some() {
            self.tx.ctl.handle_timeout(now);
        }
        self.drain_controller_events();
        self.try_switch(now);
        if self
            .rx
            .blocked_since
            .is_some_and(|b| now >= b + self.config.reorder_timeout)
        {
            self.abandon_blocking(now);
        }
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<FsEvent> {
        self.events.pop_front()
    }

    // -----------------------------------------------------------------------------------
    // Receiver side.

    /// A datagram arrived on the UDP data path.
    pub fn handle_udp(&mut self, now: Time, bytes: &[u8]) -> Result<(), FsError> {
        let (mut h, payload) = FragmentHeader::parse_datagram(bytes)?;
        h.adu_seq = extend_adu_seq(self.rx.next_deliver, low32(h.adu_seq));
        self.rx.received_bytes += bytes.len() as u64;
        // RFC 3550 §6.4.1 / A.8: loss from the highest sequence number, jitter from transit.
        if self.rx.highest_dgram.is_none_or(|hi| h.dgram_seq > hi) {
            self.rx.highest_dgram = Some(h.dgram_seq);
            self.rx.last_udp = Some((Time::from_micros(u64::from(h.sent_at_us)), now));
        }
        self.rx.dgrams += 1;
        // Transit in 32-bit microseconds, as RTP timestamps: only its differences count.
        let transit = f64::from(stamp_us(now).wrapping_sub(h.sent_at_us)) / 1e6;
        if let Some(last) = self.rx.last_transit_s {
            let d = (transit - last).abs();
            self.rx.jitter_s += (d - self.rx.jitter_s) / 16.0;
        }
        self.rx.last_transit_s = Some(transit);
        self.arm_reports(now);
        self.handle_fragment(now, &h, payload);
        Ok(())
    }

    /// In-order bytes of the TCP stream arrived (any split).
    pub fn handle_tcp_bytes(&mut self, now: Time, bytes: &[u8]) -> Result<(), FsError> {
        if self.rx.stream_broken {
            return Err(FsError::Wire(WireError::Malformed("tpba stream")));
        }
        self.rx.received_bytes += bytes.len() as u64;
        self.rx.stream.extend_from_slice(bytes);
        self.arm_reports(now);
        loop {
            if self.rx.stream.len() < FragmentHeader::TCP_LEN {
                return Ok(());
            }
            let mut h = match FragmentHeader::parse(&self.rx.stream) {
                Ok(h) if h.tcp && h.len <= self.config.max_adu_bytes => h,
                Ok(_) => {
                    self.rx.stream_broken = true;
                    return Err(FsError::Wire(WireError::Malformed("tpba stream length")));
                }
                Err(e) => {
                    self.rx.stream_broken = true;
                    return Err(FsError::Wire(e));
                }
            };
            let end = FragmentHeader::TCP_LEN + h.len as usize;
            if self.rx.stream.len() < end {
                return Ok(());
            }
            h.adu_seq = extend_adu_seq(self.rx.next_deliver, low32(h.adu_seq));
            let rest = self.rx.stream.split_off(end);
            let frame = std::mem::replace(&mut self.rx.stream, rest);
            let payload = frame.get(FragmentHeader::TCP_LEN..).unwrap_or_default();
            self.handle_fragment(now, &h, payload);
        }
    }

    fn arm_reports(&mut self, now: Time) {
        self.rx.reports_due = true;
        if self.rx.next_report_at.is_none() {
            self.rx.next_report_at = Some(now + self.config.tpba.t_rtcp);
        }
    }

    fn poll_report(&mut self, now: Time) -> Option<FlowTransmit> {
        if !self.rx.reports_due || self.rx.next_report_at.is_none_or(|t| now < t) {
            return None;
        }
        // Reports go out every T_rtcp while data arrives; an idle receiver stops reporting
        // after one report covering the last data.
        self.rx.next_report_at = Some(now + self.config.tpba.t_rtcp);
        self.rx.reports_due = false;
        let expected = self.rx.highest_dgram.map_or(0, |h| u64::from(h) + 1);
        let cumulative_lost = expected.saturating_sub(self.rx.dgrams);
        let exp_int = expected.saturating_sub(self.rx.report_expected);
        let rec_int = self.rx.dgrams.saturating_sub(self.rx.report_received);
        let lost_int = exp_int.saturating_sub(rec_int);
        self.rx.report_expected = expected;
        self.rx.report_received = self.rx.dgrams;
        let fraction_lost = (lost_int << 8)
            .checked_div(exp_int)
            .map_or(0, |f| u8::try_from(f).unwrap_or(u8::MAX));
        let (echo, arrived) = self.rx.last_udp.unwrap_or((Time::ZERO, now));
        let rr = ReceiverReport {
            highest_seq: self.rx.highest_dgram.unwrap_or(0),
            cumulative_lost: crate::convert::u32_sat(cumulative_lost),
            fraction_lost,
            jitter_us: crate::convert::u32_sat(crate::convert::f64_u64_sat(self.rx.jitter_s * 1e6)),
            echo_sent_at: echo,
            delay_us: ReceiverReport::delay_field(now.saturating_since(arrived)),
            received_bytes: self.rx.received_bytes,
            bottleneck_bytes_per_s: 0,
        };
        Some(FlowTransmit {
            path: FlowPath::Control,
            bytes: rr.to_bytes(),
        })
    }

    fn handle_fragment(&mut self, now: Time, h: &FragmentHeader, payload: &[u8]) {
        let rx = &mut self.rx;
        let window_end = rx
            .next_deliver
            .saturating_add(self.config.reassembly_window_adus);
        if h.adu_seq < rx.next_deliver
            || h.adu_seq >= window_end
            || h.adu_len > self.config.max_adu_bytes
            || payload.len() != h.len as usize
        {
            rx.dropped_fragments += 1;
            return;
        }
        if !rx.partial.contains_key(&h.adu_seq) {
            let need = u64::from(h.adu_len);
            if rx.partial_bytes + need > self.config.max_reassembly_bytes {
                rx.dropped_fragments += 1;
                return;
            }
            rx.partial_bytes += need;
            rx.partial.insert(
                h.adu_seq,
                Partial {
                    adu_len: h.adu_len,
                    data: vec![0; h.adu_len as usize],
                    have: RangeSet::new(),
                    tcp: h.tcp,
                    completed_at: None,
                },
            );
        }
        let Some(p) = rx.partial.get_mut(&h.adu_seq) else {
            return;
        };
        let start = u64::from(h.offset);
        let end = start + u64::from(h.len);
        if p.adu_len != h.adu_len
            || (h.len > 0 && p.have.covers(start, end))
            || p.have.range_count() >= MAX_RANGES_PER_ADU
        {
            // Inconsistent with earlier fragments, a duplicate, or too fragmented.
            rx.dropped_fragments += 1;
            return;
        }
        if let Some(dst) = p
            .data
            .get_mut(h.offset as usize..h.offset as usize + h.len as usize)
        {
            dst.copy_from_slice(payload);
        }
        p.have.insert(start, end);
        p.tcp |= h.tcp;
        rx.payload_bytes += u64::from(h.len);
        if p.complete() {
            p.completed_at.get_or_insert(now);
        }
        self.deliver();
        self.update_blocked(now);
    }

    /// Moves complete ADUs, in order, to the `f_recv` queue.
    fn deliver(&mut self) {
        while self.rx.ready.len() < self.config.recv_queue_adus {
            let seq = self.rx.next_deliver;
            if !self.rx.partial.get(&seq).is_some_and(Partial::complete) {
                break;
            }
            let Some(p) = self.rx.partial.remove(&seq) else {
                break;
            };
            self.rx.partial_bytes -= u64::from(p.adu_len);
            self.rx.next_deliver += 1;
            self.push_event(FsEvent::AduReceived {
                seq,
                len: p.adu_len,
                tcp: p.tcp,
            });
            self.rx.ready.push_back(p.data);
        }
    }

    /// The first complete ADU beyond the next one to deliver, when the next one is not, and
    /// when it completed: the gap before it has been blocking delivery since then.
    fn first_complete_beyond(&self) -> Option<(u64, Time)> {
        let next = self.rx.next_deliver;
        if self.rx.partial.get(&next).is_some_and(Partial::complete) {
            return None; // not blocked by a gap, only by a full ready queue
        }
        self.rx
            .partial
            .range(next + 1..)
            .find_map(|(&s, p)| p.completed_at.map(|t| (s, t)))
    }

    fn update_blocked(&mut self, now: Time) {
        self.rx.blocked_since = self.first_complete_beyond().map(|(_, t)| t.min(now));
    }

    /// Abandons every gap that has blocked a complete later ADU for `reorder_timeout`.
    fn abandon_blocking(&mut self, now: Time) {
        while let Some((first_complete, since)) = self.first_complete_beyond() {
            if now < since + self.config.reorder_timeout {
                break;
            }
            let first = self.rx.next_deliver;
            let dropped: Vec<u64> = self
                .rx
                .partial
                .range(first..first_complete)
                .map(|(&s, _)| s)
                .collect();
            for s in dropped {
                if let Some(p) = self.rx.partial.remove(&s) {
                    self.rx.partial_bytes -= u64::from(p.adu_len);
                }
            }
            self.rx.next_deliver = first_complete;
            self.push_event(FsEvent::AduLost {
                first,
                count: first_complete - first,
            });
            self.deliver();
        }
        self.update_blocked(now);
    }
}

#[cfg(test)]
mod tests;
