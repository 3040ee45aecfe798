//! A TCP-like byte stream, sans-IO: RFC 9293 connection handling (three-way handshake, FIN),
//! RFC 5681 congestion control events, RFC 6582 NewReno loss recovery, RFC 6298 retransmission
//! timer with exponential backoff and Karn's rule, optional RFC 5681 §4.2 delayed ACKs.
//!
//! How much may be in flight is decided by a pluggable
//! [`CongestionController`]; NewReno is the default.
//!
//! Application data is *virtual*: the stream counts bytes and positions, not their contents.
//! Engines that carry real bytes keep them in their own buffers, indexed by stream offset
//! ([`bytes`] has the two they need).
//!
//! Read in this order: [`seq`] (positions vs. wire numbers), `send.rs` (the sender's state
//! machine), `recv.rs` (the receiver's), then [`Connection`].
//!
//! # Driving a connection
//!
//! ```text
//! loop {
//!     conn.handle_segment(now, &repr, payload_len)   // for each arriving segment
//!     conn.handle_timeout(now)                       // when poll_timeout() has passed
//!     while let Some(seg) = conn.poll_transmit(now) { send(seg) }
//!     while let Some(ev) = conn.poll_event() { … }
//!     arm a timer at conn.poll_timeout()
//! }
//! ```
//! `poll_transmit` must be drained after *every* input, including `write` and timeouts.

pub mod bytes;
pub mod cookie;
pub mod endpoint;
pub mod options;
mod ranges;
mod recv;
mod scoreboard;
mod send;
pub mod seq;
pub mod wire;

pub use options::{SackBlock, SackBlocks, Timestamps};
pub use wire::{Flags, TcpRepr};

use crate::cc::{CongestionController, InitialWindow, NewReno};
use crate::rtt::{RtoConfig, RttEstimator};
use crate::time::Time;
use recv::RecvHalf;
use send::SendHalf;
use std::collections::VecDeque;
use std::time::Duration;

/// Stream configuration.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TcpConfig {
    /// Sender maximum segment size: payload bytes per segment.
    pub mss: u16,
    /// Retransmission timer bounds.
    pub rto: RtoConfig,
    /// Delayed-ACK timeout (RFC 5681 §4.2, at most 500 ms); `None` acknowledges every segment.
    pub delayed_ack: Option<Duration>,
    /// Receive buffer in bytes; the advertised window is what is free of it.
    pub recv_buffer: u64,
    /// Consecutive retransmission timeouts after which the connection is aborted.
    pub max_retries: u32,
    /// Initial congestion window of the NewReno controller built by [`Connection::newreno`].
    pub initial_window: InitialWindow,
    /// RFC 3042 limited transmit: send one new segment on each of the first two duplicate
    /// ACKs. Off by default (the papers' TCPs predate it).
    pub limited_transmit: bool,
    /// Offer SACK (RFC 2018); used when the peer offers it too, with RFC 6675 loss recovery.
    /// Off by default.
    pub sack: bool,
    /// Offer timestamps (RFC 7323); used when the peer offers them too, for RTT samples from
    /// every new ACK (RTTM). Off by default.
    pub timestamps: bool,
    /// Speak ADTCP (papers/004, [`crate::adtcp`]): stamp data segments with their sending
    /// time, identify the network state of arriving data and report it in every segment sent,
    /// and pass the peer's reports to the congestion controller. No negotiation: a
    /// conventional peer ignores the option. Off by default.
    pub adtcp: bool,
    /// Whether duplicate ACKs may start fast retransmit after a retransmission timeout
    /// (see [`RecoverAfterRto`]). [`RecoverAfterRto::Rfc6582`] by default.
    pub recover_after_rto: RecoverAfterRto,
}

/// What the sender does with duplicate ACKs for data sent before a retransmission timeout.
///
/// RFC 6582 §3.2 step 4: "After a retransmit timeout, record the highest sequence number
/// transmitted in the variable recover, and exit the fast recovery procedure if applicable";
/// step 2: "When the third duplicate ACK is received, the TCP sender first checks the value of
/// recover to see if the Cumulative Acknowledgment field covers more than recover. … If not,
/// the TCP does not enter fast retransmit and does not reset ssthresh." RFC 6582 §4 explains
/// why: after a timeout the sender may resend segments the receiver already holds, whose
/// duplicate ACKs say nothing about new loss.
///
/// papers/001 §5.4 relies on the opposite: a mobile receiver sends five duplicate ACKs when a
/// handoff is over so that a sender sitting in a backed-off RTO retransmits at once ("Three
/// duplicate ACKs are sufficient for this purpose … Every additional duplicate ACK opens up
/// the congestion window at the sender"). Its senders ran Linux 2.1.24 (1997), a Reno TCP:
/// NewReno and its `recover` variable came later (RFC 2582, April 1999). Under the RFC 6582
/// guard those duplicate ACKs change nothing once an RTO has fired.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub enum RecoverAfterRto {
    /// RFC 6582 (the default): an RTO sets `recover` to the highest position sent, and
    /// duplicate ACKs that do not cover it do not start fast retransmit.
    #[default]
    Rfc6582,
    /// Reno as the paper's 1997 senders had it: an RTO leaves nothing guarded, so a third
    /// duplicate ACK after a timeout starts fast retransmit and recovery (each further one
    /// inflates the window). For reproducing papers/001 Table 6; not for general use.
    Reno,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            mss: 1460,
            rto: RtoConfig::default(),
            delayed_ack: None,
            recv_buffer: 4 << 20,
            max_retries: 15,
            initial_window: InitialWindow::Rfc3390,
            limited_transmit: false,
            sack: false,
            timestamps: false,
            adtcp: false,
            recover_after_rto: RecoverAfterRto::Rfc6582,
        }
    }
}

/// Counters kept by a connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TcpStats {
    /// Segments carrying data or a FIN that were transmitted (including retransmissions).
    pub segments_sent: u64,
    /// Payload bytes transmitted (including retransmissions).
    pub bytes_sent: u64,
    /// Retransmitted segments.
    pub segments_retransmitted: u64,
    /// Fast retransmits (entries into fast recovery).
    pub fast_retransmits: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Bytes (positions) acknowledged by the peer.
    pub bytes_acked: u64,
    /// Duplicate ACKs received.
    pub dup_acks_received: u64,
    /// Pure ACKs sent.
    pub acks_sent: u64,
}

/// Something the application should know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpEvent {
    /// The handshake completed.
    Connected,
    /// New in-order data can be read (coalesced until the next `read`).
    Readable,
    /// The peer closed its direction (its FIN arrived, after all its data).
    PeerClosed,
    /// Our FIN and all our data were acknowledged.
    SendClosed,
    /// The connection was reset by the peer or gave up after `max_retries` timeouts.
    Aborted,
}

/// Connection state (a reduced RFC 9293 state diagram: closing is tracked per direction).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Active open: SYN sent, waiting for SYN-ACK.
    SynSent,
    /// Passive open: SYN received, SYN-ACK sent, waiting for its ACK.
    SynReceived,
    /// Data may flow.
    Established,
    /// Reset or timed out.
    Aborted,
}

/// One segment to transmit: a header and a count of (virtual) payload bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// The header.
    pub repr: TcpRepr,
    /// Payload bytes following the header.
    pub payload_len: u32,
}

/// A TCP connection. See the module docs for the calling pattern.
#[derive(Debug)]
pub struct Connection {
    config: TcpConfig,
    state: State,
    local_port: u16,
    remote_port: u16,
    /// Our initial sequence number.
    iss: u32,
    /// The peer's initial sequence number (valid once its SYN is seen).
    irs: u32,
    send: SendHalf,
    recv: RecvHalf,
    stats: TcpStats,
    /// Our SYN (or SYN-ACK) must be (re)transmitted.
    syn_due: bool,
    syn_sent_at: Option<Time>,
    syn_retransmitted: bool,
    /// Window-scale shifts (RFC 7323 §2.3); zero unless both sides sent the option.
    our_wscale: u8,
    peer_wscale: u8,
    last_peer_window: u16,
    /// Both SYNs carried SACK-permitted (RFC 2018 §2).
    sack_ok: bool,
    /// Both SYNs carried timestamps (RFC 7323 §3.2).
    ts_ok: bool,
    /// RFC 7323 §4.3 TS.Recent: the timestamp to echo.
    ts_recent: u32,
    /// RFC 7323 §4.3 Last.ACK.sent, as a stream position.
    last_ack_sent: u64,
    /// ADTCP network-state identification of arriving data (with `config.adtcp`).
    adtcp_rx: Option<crate::adtcp::Receiver>,
    readable_signalled: bool,
    send_closed_signalled: bool,
    peer_closed_signalled: bool,
    events: VecDeque<TcpEvent>,
    abort_reason: Option<AbortReason>,
}

/// Why a connection was aborted ([`TcpEvent::Aborted`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AbortReason {
    /// The peer sent a reset.
    Reset,
    /// `max_retries` retransmission timeouts in a row went unanswered (RFC 9293 §3.8.3's
    /// R2).
    TimedOut,
    /// The congestion controller asked to close (ELFN's or ADTCP's disconnection policy).
    Controller,
    /// The network said nothing listens at the peer (an ICMP port or host unreachable)
    /// while the handshake was under way ([`Connection::handle_unreachable`]).
    Unreachable,
}

/// The RFC 7323 §5.4 timestamp clock: milliseconds, wrapping modulo 2^32 (the truncation is
/// the point: timestamps compare in sequence space).
fn ts_clock(now: Time) -> u32 {
    u32::try_from((now.as_nanos() / 1_000_000) & u64::from(u32::MAX)).unwrap_or(0)
}

impl Connection {
    /// Active open: the connection will send a SYN on the first `poll_transmit`.
    pub fn connect(
        config: TcpConfig,
        local_port: u16,
        remote_port: u16,
        iss: u32,
        cc: Box<dyn CongestionController>,
    ) -> Connection {
        let mut c = Connection::new(config, local_port, remote_port, iss, cc);
        c.state = State::SynSent;
        c.syn_due = true;
        c
    }

    /// Passive open from a received SYN (`syn.flags.syn` must be set).
    pub fn accept(
        config: TcpConfig,
        syn: &TcpRepr,
        iss: u32,
        cc: Box<dyn CongestionController>,
    ) -> Connection {
        let mut c = Connection::new(config, syn.dst_port, syn.src_port, iss, cc);
        c.state = State::SynReceived;
        c.syn_due = true;
        c.on_peer_syn(syn);
        c
    }

    /// A NewReno controller sized for this configuration.
    pub fn newreno(config: &TcpConfig) -> Box<dyn CongestionController> {
        let iw = config.initial_window.bytes(u64::from(config.mss));
        Box::new(NewReno::with_initial_window(iw))
    }

    fn new(
        config: TcpConfig,
        local_port: u16,
        remote_port: u16,
        iss: u32,
        cc: Box<dyn CongestionController>,
    ) -> Connection {
        let mss = u64::from(config.mss.max(1));
        let mut send = SendHalf::new(mss, config.rto, cc);
        send.set_limited_transmit(config.limited_transmit);
        send.set_recover_after_rto(config.recover_after_rto);
        let recv = RecvHalf::new(config.recv_buffer, config.delayed_ack, mss);
        let adtcp_rx = if config.adtcp {
            crate::adtcp::Receiver::new(crate::adtcp::ReceiverConfig::default()).ok()
        } else {
            None
        };
        Connection {
            config,
            state: State::SynSent,
            local_port,
            remote_port,
            iss,
            irs: 0,
            send,
            recv,
            stats: TcpStats::default(),
            syn_due: false,
            syn_sent_at: None,
            syn_retransmitted: false,
            our_wscale: 0,
            peer_wscale: 0,
            last_peer_window: 0,
            sack_ok: false,
            ts_ok: false,
            ts_recent: 0,
            last_ack_sent: 0,
            adtcp_rx,
            readable_signalled: false,
            send_closed_signalled: false,
            peer_closed_signalled: false,
            events: VecDeque::new(),
            abort_reason: None,
        }
    }

    /// The shift that makes our receive buffer fit the 16-bit window field.
    fn desired_wscale(&self) -> u8 {
        let mut shift = 0u8;
        while shift < 14 && (self.config.recv_buffer >> shift) > u64::from(u16::MAX) {
            shift += 1;
        }
        shift
    }

    fn on_peer_syn(&mut self, syn: &TcpRepr) {
        self.irs = syn.seq;
        self.recv.on_syn();
        match syn.window_scale {
            // RFC 7323 §2.2: scaling is used only if both SYNs carry the option.
            Some(shift) => {
                self.peer_wscale = shift.min(14);
                self.our_wscale = self.desired_wscale();
            }
            None => {
                self.peer_wscale = 0;
                self.our_wscale = 0;
            }
        }
        self.last_peer_window = syn.window;
        self.send.set_peer_window(u64::from(syn.window));
        // RFC 2018 §2 / RFC 7323 §3.2: an option is used only if both SYNs carry it (for an
        // active open, the SYN-ACK can only carry what our SYN offered).
        self.sack_ok = self.config.sack && syn.sack_permitted;
        self.send.set_sack(self.sack_ok);
        self.ts_ok = self.config.timestamps && syn.timestamps.is_some();
        if let Some(ts) = syn.timestamps.filter(|_| self.ts_ok) {
            self.ts_recent = ts.value;
        }
    }

    /// Appends `bytes` of application data to the send stream.
    pub fn write(&mut self, bytes: u64) {
        self.send.write(bytes);
    }

    /// Closes our direction: a FIN follows the data already written.
    pub fn close(&mut self) {
        self.send.close();
    }

    /// The application reads up to `bytes` of delivered data; returns how many it got.
    pub fn read(&mut self, bytes: u64) -> u64 {
        self.readable_signalled = false;
        self.recv.read(bytes)
    }

    /// Handles an arriving segment addressed to this connection.
    pub fn handle_segment(&mut self, now: Time, repr: &TcpRepr, payload_len: u32) {
        if self.state == State::Aborted {
            return;
        }
        if repr.flags.rst {
            self.abort(AbortReason::Reset);
            return;
        }
        if repr.flags.syn {
            self.handle_syn(now, repr);
            if !repr.flags.ack || self.state != State::Established {
                return;
            }
        }
        if self.state == State::SynReceived {
            if !repr.flags.ack || seq::from_wire(self.iss, repr.ack, 0) == 0 {
                return;
            }
            self.establish(now);
        }
        if self.state != State::Established {
            return;
        }

        // Receiver side: data and FIN.
        let len = u64::from(payload_len);
        let seg_pos = seq::from_wire(self.irs, repr.seq, self.recv.nxt());
        if self.ts_ok
            && let Some(ts) = repr.timestamps
        {
            // RFC 7323 §4.3 (2): "If SEG.TSval >= TS.Recent and SEG.SEQ <= Last.ACK.sent,
            // then SEG.TSval is copied to TS.Recent" (timestamps compare modulo 2^32).
            if seq::wire_ge(ts.value, self.ts_recent) && seg_pos <= self.last_ack_sent {
                self.ts_recent = ts.value;
            }
        }
        if len > 0
            && let Some(rx) = self.adtcp_rx.as_mut()
        {
            let arrival = crate::adtcp::metrics::Arrival {
                at: now,
                seq: seg_pos,
                len,
                sent_us: repr.adtcp.and_then(|o| o.sent_us),
            };
            rx.on_arrival(&arrival, self.send.rtt().srtt());
        }
        if len > 0 || repr.flags.fin {
            let pos = seg_pos;
            let advanced = self.recv.on_segment(now, pos, len, repr.flags.fin);
            if advanced > 0 && !self.readable_signalled {
                self.readable_signalled = true;
                self.events.push_back(TcpEvent::Readable);
            }
            if self.recv.fin_delivered() && !self.peer_closed_signalled {
                self.peer_closed_signalled = true;
                self.events.push_back(TcpEvent::PeerClosed);
            }
        }

        // Sender side: the acknowledgement and the window.
        if repr.flags.ack {
            // ADTCP: the controller learns the receiver's report before the ACK's event.
            if self.config.adtcp
                && let Some(o) = repr.adtcp
            {
                self.send.cc_mut().on_network_state(now, o.report);
            }
            let ack = seq::from_wire(self.iss, repr.ack, self.send.una());
            let window_unchanged = repr.window == self.last_peer_window;
            self.last_peer_window = repr.window;
            self.send
                .set_peer_window(u64::from(repr.window) << self.peer_wscale);
            let dup_candidate = len == 0 && !repr.flags.syn && !repr.flags.fin && window_unchanged;
            let mut sack = [(0u64, 0u64); options::MAX_SACK_BLOCKS];
            let mut n_sack = 0;
            if self.sack_ok {
                for (slot, b) in sack.iter_mut().zip(repr.sack.as_slice()) {
                    let una = self.send.una();
                    *slot = (
                        seq::from_wire(self.iss, b.left, una),
                        seq::from_wire(self.iss, b.right, una),
                    );
                    n_sack += 1;
                }
            }
            // RFC 7323 §4.1 RTTM: the echoed timestamp times the round trip of the segment
            // that triggered this ACK.
            let ts_rtt = repr
                .timestamps
                .filter(|_| self.ts_ok)
                .map(|ts| Duration::from_millis(u64::from(ts_clock(now).wrapping_sub(ts.echo))));
            let input = send::AckInput {
                ack,
                dup_candidate,
                sack: sack.get(..n_sack).unwrap_or(&[]),
                ts_rtt,
            };
            self.send.on_ack(now, input, &mut self.stats);
            if self.send.all_acked() && !self.send_closed_signalled && self.fin_requested() {
                self.send_closed_signalled = true;
                self.events.push_back(TcpEvent::SendClosed);
            }
        }
    }

    fn fin_requested(&self) -> bool {
        self.send.fin_requested()
    }

    fn handle_syn(&mut self, now: Time, repr: &TcpRepr) {
        match self.state {
            State::SynSent if repr.flags.ack => {
                if seq::from_wire(self.iss, repr.ack, 0) != 1 {
                    return;
                }
                self.on_peer_syn(repr);
                self.establish(now);
            }
            // A retransmitted SYN or SYN-ACK: our answer was lost, send it again.
            State::SynReceived => self.syn_due = true,
            State::Established => self.recv.on_syn(),
            _ => {}
        }
    }

    fn establish(&mut self, now: Time) {
        let sample = match (self.syn_sent_at, self.syn_retransmitted) {
            (Some(t), false) => Some(now - t),
            _ => None,
        };
        self.send.on_syn_acked(now, sample);
        self.state = State::Established;
        self.syn_due = false;
        self.events.push_back(TcpEvent::Connected);
    }

    fn abort(&mut self, why: AbortReason) {
        if self.state != State::Aborted {
            self.state = State::Aborted;
            self.abort_reason = Some(why);
            self.events.push_back(TcpEvent::Aborted);
        }
    }

    /// The network reports the peer unreachable (an ICMP destination unreachable for one of
    /// our segments: port, protocol or host). A hard error (RFC 1122 §4.2.3.9: "Destination
    /// Unreachable -- codes 2-4 … are hard error conditions, so TCP SHOULD abort the
    /// connection"; RFC 5461 §4.1 and RFC 5927 §5.2 restrict the abort to where it cannot
    /// cost data, as an ICMP message is easily forged): an active open still waiting for its
    /// SYN-ACK, and a connection whose only business left is the acknowledgement of our FIN
    /// (the peer's FIN arrived and every byte we wrote was acknowledged — a peer that went
    /// away after closing would otherwise keep it through the FIN's retransmissions) are
    /// aborted ([`AbortReason::Unreachable`]). Any other connection ignores it (a soft
    /// error: the retransmission timer decides). Returns whether the connection was aborted.
    pub fn handle_unreachable(&mut self) -> bool {
        let only_our_fin_left = self.state == State::Established
            && self.recv.fin_delivered()
            && self.fin_requested()
            && self.send.unacked_bytes() == 0;
        if self.state != State::SynSent && !only_our_fin_left {
            return false;
        }
        self.abort(AbortReason::Unreachable);
        true
    }

    /// SACK is in use: both SYNs offered it (RFC 2018 §2).
    pub fn sack_enabled(&self) -> bool {
        self.sack_ok
    }

    /// Timestamps are in use: both SYNs carried them (RFC 7323 §3.2).
    pub fn timestamps_enabled(&self) -> bool {
        self.ts_ok
    }

    /// The next segment to transmit, if any. Drain until `None` after every input.
    pub fn poll_transmit(&mut self, now: Time) -> Option<Segment> {
        match self.state {
            State::Aborted => None,
            State::SynSent | State::SynReceived => self.poll_handshake(now),
            State::Established => {
                if let Some(seg) = self.send.next_segment(now, &mut self.stats) {
                    let mut repr = self.header(now, seq::to_wire(self.iss, seg.pos));
                    repr.flags.fin = seg.fin;
                    if self.config.adtcp && seg.len > 0 {
                        let mut o = repr.adtcp.unwrap_or_default();
                        o.sent_us = Some(crate::adtcp::option::send_clock_us(now));
                        repr.adtcp = Some(o);
                    }
                    repr.flags.psh = seg.len > 0;
                    self.recv.on_ack_sent(now);
                    return Some(Segment {
                        repr,
                        payload_len: seg.len,
                    });
                }
                if self.recv.ack_due(now) {
                    let repr = self.header(now, seq::to_wire(self.iss, self.send.max_sent()));
                    self.recv.on_ack_sent(now);
                    self.stats.acks_sent += 1;
                    return Some(Segment {
                        repr,
                        payload_len: 0,
                    });
                }
                None
            }
        }
    }

    fn poll_handshake(&mut self, now: Time) -> Option<Segment> {
        if !self.syn_due {
            return None;
        }
        self.syn_due = false;
        if self.syn_sent_at.is_some() {
            self.syn_retransmitted = true;
        }
        self.syn_sent_at = Some(now);
        self.send.arm_rto(now);
        let passive = self.state == State::SynReceived;
        if passive {
            // The SYN-ACK acknowledges the peer's SYN (RFC 7323 §4.3 Last.ACK.sent).
            self.last_ack_sent = self.recv.nxt();
        }
        let offer_wscale = !passive || self.our_wscale > 0 || self.peer_wscale > 0;
        // RFC 7323 §2.2: the window in a SYN is never scaled.
        let window = crate::convert::u16_sat(self.config.recv_buffer);
        if passive {
            self.recv.on_window_sent(u64::from(window));
        }
        let repr = TcpRepr {
            src_port: self.local_port,
            dst_port: self.remote_port,
            seq: self.iss,
            ack: if passive {
                seq::to_wire(self.irs, self.recv.nxt())
            } else {
                0
            },
            flags: Flags {
                syn: true,
                ack: passive,
                ..Flags::default()
            },
            window,
            mss: Some(self.config.mss),
            window_scale: offer_wscale.then(|| self.desired_wscale()),
            // A SYN-ACK offers only what the SYN offered (`*_ok` are set from the peer's SYN).
            sack_permitted: if passive {
                self.sack_ok
            } else {
                self.config.sack
            },
            sack: SackBlocks::EMPTY,
            timestamps: (if passive {
                self.ts_ok
            } else {
                self.config.timestamps
            })
            .then(|| Timestamps {
                value: ts_clock(now),
                echo: if passive { self.ts_recent } else { 0 },
            }),
            adtcp: None,
        };
        Some(Segment {
            repr,
            payload_len: 0,
        })
    }

    /// The header of a non-SYN segment; records Last.ACK.sent (RFC 7323 §4.3).
    fn header(&mut self, now: Time, seq_wire: u32) -> TcpRepr {
        let window = crate::convert::u16_sat(self.recv.window() >> self.our_wscale);
        self.recv
            .on_window_sent(u64::from(window) << self.our_wscale);
        self.last_ack_sent = self.recv.nxt();
        let mut sack = SackBlocks::EMPTY;
        if self.sack_ok {
            for &(start, end) in self.recv.sack_ranges() {
                sack.push(SackBlock {
                    left: seq::to_wire(self.irs, start),
                    right: seq::to_wire(self.irs, end),
                });
            }
        }
        TcpRepr {
            src_port: self.local_port,
            dst_port: self.remote_port,
            seq: seq_wire,
            ack: seq::to_wire(self.irs, self.recv.nxt()),
            flags: Flags {
                ack: true,
                ..Flags::default()
            },
            window,
            mss: None,
            window_scale: None,
            sack_permitted: false,
            sack,
            timestamps: self.ts_ok.then(|| Timestamps {
                value: ts_clock(now),
                echo: self.ts_recent,
            }),
            // ADTCP: the latest identified state, repeated in every segment (papers/004 §4);
            // the option without a report says "cannot judge now".
            adtcp: self.adtcp_rx.as_ref().map(|rx| crate::adtcp::AdtcpOption {
                report: rx.report(),
                sent_us: None,
            }),
        }
    }

    /// When `handle_timeout` should next be called.
    pub fn poll_timeout(&self) -> Option<Time> {
        if self.state == State::Aborted {
            return None;
        }
        match (self.send.poll_timeout(), self.recv.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Fires whatever timers have expired by `now`.
    pub fn handle_timeout(&mut self, now: Time) {
        let rto_fired = self.send.rto_deadline().is_some_and(|t| t <= now);
        if !rto_fired {
            return;
        }
        if self.send.backoffs() >= self.config.max_retries {
            self.abort(AbortReason::TimedOut);
            return;
        }
        match self.state {
            State::SynSent | State::SynReceived => {
                self.stats.timeouts += 1;
                self.send.note_backoff();
                self.syn_due = true;
            }
            State::Established => {
                self.send.on_rto(now, &mut self.stats);
                if self.send.cc().close_requested() {
                    self.abort(AbortReason::Controller);
                }
            }
            State::Aborted => {}
        }
    }

    /// The next application event, if any.
    pub fn poll_event(&mut self) -> Option<TcpEvent> {
        self.events.pop_front()
    }

    // ----- environment-action hooks -----

    /// Changes the delayed-ACK timeout (`None`: acknowledge every segment).
    pub fn set_delayed_ack(&mut self, delay: Option<Duration>) {
        self.config.delayed_ack = delay;
        self.recv.set_delayed_ack(delay);
    }

    /// Acknowledges every `segments`-th in-order segment (RFC 5681's 2 by default; at least 1)
    /// — the environment action "increase the number of delayed ACKs" (papers/001 §4).
    pub fn set_delayed_ack_count(&mut self, segments: u32) {
        self.recv.set_ack_every(segments);
    }

    /// Replaces the RTT estimate with `rtt`, as a first measurement (RFC 6298 §2.2: SRTT = R,
    /// RTTVAR = R/2) — the environment action on a device change (papers/001 §4).
    pub fn revise_rtt(&mut self, rtt: Duration) {
        let config = *self.rtt().config();
        *self.rtt_mut() = RttEstimator::seeded(config, rtt, rtt / 2, rtt);
    }

    /// Replaces the maximum segment size (from a new device's MTU, papers/001 §4); segments
    /// already sent keep their size.
    pub fn set_mss(&mut self, mss: u16) {
        let mss = mss.max(1);
        self.config.mss = mss;
        self.send.set_smss(u64::from(mss));
    }

    /// Sends `n` extra (duplicate) ACKs as soon as possible.
    pub fn request_extra_acks(&mut self, n: u32) {
        self.recv.request_extra_acks(n);
    }

    /// Clears RTO backoff and retransmits the first unacknowledged segment now: for use when
    /// the application learns that connectivity is back.
    pub fn reset_rto(&mut self, now: Time) {
        if self.state == State::Established {
            self.send.reset_rto(now);
        }
    }

    /// Replaces (or, with `None`, removes) the ADTCP receiver that identifies the network
    /// state of arriving data — e.g. one with a non-default [`crate::adtcp::ReceiverConfig`].
    /// Its reports go out in every segment whether or not `config.adtcp` is set.
    pub fn set_adtcp_receiver(&mut self, rx: Option<crate::adtcp::Receiver>) {
        self.adtcp_rx = rx;
    }

    // ----- queries -----

    /// The ADTCP receiver, if this connection identifies network states.
    pub fn adtcp_receiver(&self) -> Option<&crate::adtcp::Receiver> {
        self.adtcp_rx.as_ref()
    }

    /// Connection state.
    pub fn state(&self) -> State {
        self.state
    }

    /// Why the connection was aborted, once it was.
    pub fn abort_reason(&self) -> Option<AbortReason> {
        self.abort_reason
    }

    /// The handshake has completed and the connection is not aborted.
    pub fn is_established(&self) -> bool {
        self.state == State::Established
    }

    /// Counters.
    pub fn stats(&self) -> &TcpStats {
        &self.stats
    }

    /// Application bytes acknowledged by the peer.
    pub fn bytes_acked(&self) -> u64 {
        self.send.acked_bytes()
    }

    /// Application bytes written but not yet acknowledged.
    pub fn bytes_unacked(&self) -> u64 {
        self.send.unacked_bytes()
    }

    /// Application bytes delivered to us in order.
    pub fn bytes_delivered(&self) -> u64 {
        self.recv.delivered()
    }

    /// Delivered bytes not yet read.
    pub fn bytes_unread(&self) -> u64 {
        self.recv.unread()
    }

    /// The peer's FIN has been received.
    pub fn peer_closed(&self) -> bool {
        self.recv.fin_delivered()
    }

    /// Everything we wrote (and our FIN, if we closed) has been acknowledged.
    pub fn send_complete(&self) -> bool {
        self.send.all_acked()
    }

    /// RTT estimator of the sending direction.
    pub fn rtt(&self) -> &RttEstimator {
        self.send.rtt()
    }

    /// Mutable RTT estimator (to seed it from cached path state).
    pub fn rtt_mut(&mut self) -> &mut RttEstimator {
        self.send.rtt_mut()
    }

    /// The congestion controller.
    pub fn cc(&self) -> &dyn CongestionController {
        self.send.cc()
    }

    /// The congestion controller, mutably (for controllers with external inputs).
    pub fn cc_mut(&mut self) -> &mut dyn CongestionController {
        self.send.cc_mut()
    }

    /// The sender is in NewReno fast recovery.
    pub fn in_recovery(&self) -> bool {
        self.send.in_recovery()
    }

    /// Local port.
    pub fn local_port(&self) -> u16 {
        self.local_port
    }

    /// Remote port.
    pub fn remote_port(&self) -> u16 {
        self.remote_port
    }

    /// A pacing wake-up is due (used by engines that coalesce timers).
    pub fn pacing_due(&self, now: Time) -> bool {
        self.send.pacing_due(now)
    }
}

#[cfg(test)]
mod tests;
