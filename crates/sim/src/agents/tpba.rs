//! TPBA flow agents (`papers/002_ef8b8f60f6080824.txt` §4–§5): the simulator's engine for
//! [`adaptnet_core::tpba::FSocket`].
//!
//! Each end owns one fsocket, one TCP connection (the rate-probing path) and UDP (the
//! running path and the RTCP-like control channel), all on the flow's port: TCP segments
//! arrive as [`Proto::Tcp`], data datagrams (at the receiver) and receiver reports (at the
//! sender) as [`Proto::Udp`]. The sender's application is greedy: it keeps the fsocket's
//! send queue (`send_queue_bytes`) full of ADUs of `adu_bytes`, written in
//! `write_bytes`-sized `f_send` calls with `adu_boundary` on the last (§6.1's ADU1 is one
//! 64-byte write, ADU2 ten 512-byte writes).
//!
//! The simulated TCP carries byte counts, not bytes: what the fsocket writes to TCP travels
//! beside the stream in a [`StreamTags`] and is handed to the receiving fsocket once TCP has
//! delivered it in order (see [`super::stream`]). UDP datagrams carry their real bytes in the
//! packet header.
//!
//! The engine obeys the fsocket's TCP commands: `SetCwnd` through
//! [`CongestionController::set_window`](adaptnet_core::cc::CongestionController::set_window)
//! (§4's `cwnd_new`); `NoDelay` needs nothing, as the simulated TCP has no Nagle algorithm.
//! The simulated TCP has no slow-start restart after idle either, so the window kept over a
//! running period is exactly what `cwnd_new` replaces.

use super::stream::StreamTags;
use super::tcp::segment_packet;
use crate::agent::Agent;
use crate::packet::{Addr, Header, Packet, Proto};
use adaptnet_core::Time;
use adaptnet_core::tcp::{Connection, TcpConfig, TcpRepr};
use adaptnet_core::tpba::{
    FSocket, FlowPath, FsConfig, FsEvent, Period, TcpCommand, TcpStatus, TpbaEvent,
};
use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

/// Parameters of a TPBA flow in the simulator.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TpbaFlowConfig {
    /// The flow pair and controller (Table 2).
    pub fs: FsConfig,
    /// The probing path's TCP.
    pub tcp: TcpConfig,
    /// Bytes per ADU (§6.1: ADU1 64, ADU2 5120).
    pub adu_bytes: u32,
    /// Bytes per `f_send` call (§6.1: ADU1 64, ADU2 512).
    pub write_bytes: u32,
}

/// The address an fsocket sees for a simulated endpoint.
fn sockaddr(a: Addr) -> SocketAddr {
    let [w, x, y, z] = a.node.ipv4();
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(w, x, y, z), a.port))
}

/// The byte at `offset` of ADU `seq`: a pattern the receiver checks, so a corrupted or mixed
/// ADU cannot go unnoticed.
pub fn adu_byte(seq: u64, offset: usize) -> u8 {
    #[allow(
        clippy::cast_possible_truncation,
        reason = "the pattern is the low byte of a mix of sequence number and offset"
    )]
    let b = (seq.wrapping_mul(31).wrapping_add(offset as u64 * 7)) as u8;
    b
}

/// A switch of period at the sender, for the ADU inter-arrival figures (§6.1, Fig. 12).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct SwitchRecord {
    /// When, seconds.
    pub at_s: f64,
    /// The period entered.
    pub to: Period,
    /// The running rate entered (bytes/s), for switches to running.
    pub rate_bytes_per_s: Option<f64>,
    /// The hand-over window, for switches to probing.
    pub cwnd_new_bytes: Option<u64>,
}

/// The sending end of a TPBA flow.
pub struct TpbaSender {
    local: Addr,
    remote: Addr,
    config: TpbaFlowConfig,
    isn: u32,
    tags: StreamTags,
    fs: Option<FSocket>,
    conn: Option<Connection>,
    written: u64,
    next_adu: u64,
    /// Bytes of the ADU being written by the application.
    adu_offset: u32,
    out: VecDeque<Packet>,
    stopped: bool,
    switches: Vec<SwitchRecord>,
    samples: Vec<(f64, f64)>,
    decreases: u64,
    cwnd_handovers: u64,
    malformed: u64,
}

impl TpbaSender {
    /// A sender from `local` to `remote`; `tags` is shared with the receiver.
    pub fn new(
        local: Addr,
        remote: Addr,
        config: TpbaFlowConfig,
        isn: u32,
        tags: StreamTags,
    ) -> TpbaSender {
        TpbaSender {
            local,
            remote,
            config,
            isn,
            tags,
            fs: None,
            conn: None,
            written: 0,
            next_adu: 0,
            adu_offset: 0,
            out: VecDeque::new(),
            stopped: false,
            switches: Vec::new(),
            samples: Vec::new(),
            decreases: 0,
            cwnd_handovers: 0,
            malformed: 0,
        }
    }

    /// The flow pair, once started.
    pub fn fsocket(&self) -> Option<&FSocket> {
        self.fs.as_ref()
    }

    /// The probing path's TCP connection, once started.
    pub fn connection(&self) -> Option<&Connection> {
        self.conn.as_ref()
    }

    /// Every switch of period so far.
    pub fn switches(&self) -> &[SwitchRecord] {
        &self.switches
    }

    /// Probing samples `r[i]`: (time s, bytes/s).
    pub fn samples(&self) -> &[(f64, f64)] {
        &self.samples
    }

    /// Keeps the fsocket's send queue full (a greedy media source).
    fn fill(&mut self, now: Time) {
        let Some(fs) = self.fs.as_mut() else {
            return;
        };
        let adu = self.config.adu_bytes.max(1);
        let step = self.config.write_bytes.clamp(1, adu);
        loop {
            let len = step.min(adu - self.adu_offset);
            let start = self.adu_offset as usize;
            let msg: Vec<u8> = (start..start + len as usize)
                .map(|o| adu_byte(self.next_adu, o))
                .collect();
            let last = self.adu_offset + len >= adu;
            if fs.f_send(now, &msg, last).is_err() {
                return; // queue full (or closed): try again after the next transmission
            }
            if last {
                self.adu_offset = 0;
                self.next_adu += 1;
            } else {
                self.adu_offset += len;
            }
        }
    }

    fn status(&self) -> Option<TcpStatus> {
        let c = self.conn.as_ref()?;
        Some(TcpStatus {
            bytes_acked: c.bytes_acked(),
            cwnd_bytes: c.cc().window(),
            smss: u64::from(self.config.tcp.mss),
            congestion_events: c.stats().fast_retransmits + c.stats().timeouts,
        })
    }

    fn drain_events(&mut self, now: Time) {
        let Some(fs) = self.fs.as_mut() else {
            return;
        };
        while let Some(e) = fs.poll_event() {
            match e {
                FsEvent::Tpba(TpbaEvent::Switched { to, cwnd_new_bytes }) => {
                    self.switches.push(SwitchRecord {
                        at_s: now.as_secs_f64(),
                        to,
                        rate_bytes_per_s: fs.controller().rate_bytes_per_s(),
                        cwnd_new_bytes,
                    });
                }
                FsEvent::Tpba(TpbaEvent::Sample {
                    rate_bytes_per_s, ..
                }) => self.samples.push((now.as_secs_f64(), rate_bytes_per_s)),
                FsEvent::Tpba(TpbaEvent::Decreased { .. }) => self.decreases += 1,
                _ => {}
            }
        }
        while let Some(cmd) = fs.poll_tcp_command() {
            match cmd {
                TcpCommand::SetCwnd(bytes) => {
                    if let Some(c) = self.conn.as_mut()
                        && c.cc_mut().set_window(now, bytes)
                    {
                        self.cwnd_handovers += 1;
                    }
                }
                // The simulated TCP sends every segment as soon as the window allows.
                TcpCommand::NoDelay(_) => {}
            }
        }
    }

    /// Moves what the fsocket wants to send onto UDP packets and the TCP stream.
    fn pump(&mut self, now: Time) {
        loop {
            self.fill(now);
            let Some(t) = self.fs.as_mut().and_then(|fs| fs.poll_transmit(now)) else {
                break;
            };
            match t.path {
                FlowPath::Tcp => {
                    let Some(c) = self.conn.as_mut() else {
                        break;
                    };
                    let len = t.bytes.len() as u64;
                    self.written += len;
                    self.tags.push(self.written, &t.bytes);
                    c.write(len);
                }
                FlowPath::Udp | FlowPath::Control => {
                    let mut p = Packet::new(self.local, self.remote, Proto::Udp, 0);
                    p.header = Header::from_slice(&t.bytes);
                    self.out.push_back(p);
                }
            }
            self.drain_events(now);
        }
        self.drain_events(now);
    }

    fn after_tcp_input(&mut self, now: Time) {
        if let (Some(status), Some(fs)) = (self.status(), self.fs.as_mut()) {
            fs.handle_tcp_status(now, status);
        }
        if let Some(c) = self.conn.as_mut() {
            while c.poll_event().is_some() {}
        }
        self.drain_events(now);
    }
}

impl Agent for TpbaSender {
    fn start(&mut self, now: Time) {
        let mut fs = FSocket::f_socket(now, sockaddr(self.local), self.config.fs.clone());
        fs.f_dst(sockaddr(self.remote));
        self.fs = Some(fs);
        let cc = Connection::newreno(&self.config.tcp);
        self.conn = Some(Connection::connect(
            self.config.tcp.clone(),
            self.local.port,
            self.remote.port,
            self.isn,
            cc,
        ));
    }

    fn stop(&mut self, now: Time) {
        self.stopped = true;
        if let Some(fs) = self.fs.as_mut() {
            fs.f_close(now);
        }
    }

    fn handle_packet(&mut self, now: Time, packet: Packet) {
        match packet.proto {
            Proto::Tcp => {
                let Some(conn) = self.conn.as_mut() else {
                    return;
                };
                let Ok(repr) = TcpRepr::parse(&packet.header) else {
                    self.malformed += 1;
                    return;
                };
                conn.handle_segment(now, &repr, packet.payload_len);
                self.after_tcp_input(now);
            }
            Proto::Udp => {
                let Some(fs) = self.fs.as_mut() else {
                    return;
                };
                if fs.handle_control(now, &packet.header).is_err() {
                    self.malformed += 1;
                }
                self.drain_events(now);
            }
        }
    }

    fn handle_timeout(&mut self, now: Time) {
        if let Some(c) = self.conn.as_mut() {
            c.handle_timeout(now);
        }
        self.after_tcp_input(now);
        if let Some(fs) = self.fs.as_mut() {
            fs.handle_timeout(now);
        }
        self.drain_events(now);
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Packet> {
        if self.stopped {
            return None;
        }
        if self.out.is_empty() {
            self.pump(now);
        }
        if let Some(p) = self.out.pop_front() {
            return Some(p);
        }
        let seg = self.conn.as_mut()?.poll_transmit(now)?;
        segment_packet(self.local, self.remote, &seg)
    }

    fn poll_timeout(&self) -> Option<Time> {
        if self.stopped {
            return None;
        }
        let fs = self.fs.as_ref().and_then(FSocket::poll_timeout);
        let tcp = self.conn.as_ref().and_then(Connection::poll_timeout);
        match (fs, tcp) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let mut v = vec![
            ("adus_sent", self.next_adu as f64),
            ("switches", self.switches.len() as f64),
            (
                "probing_periods",
                self.switches
                    .iter()
                    .filter(|s| s.to == Period::Probing)
                    .count() as f64
                    + 1.0,
            ),
            ("running_decreases", self.decreases as f64),
            ("cwnd_handovers", self.cwnd_handovers as f64),
            ("tcp_bytes_written", self.written as f64),
            ("malformed", self.malformed as f64),
        ];
        if let Some(c) = self.conn.as_ref() {
            v.push(("tcp_fast_retransmits", c.stats().fast_retransmits as f64));
            v.push(("tcp_timeouts", c.stats().timeouts as f64));
        }
        v
    }
}

/// One complete ADU at the receiver (§4: `j_A` is the inter-arrival time of ADUs).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct AduArrival {
    /// When it completed, seconds.
    pub at_s: f64,
    /// Its number.
    pub seq: u64,
    /// Its data came on TCP (a rate-probing period).
    pub tcp: bool,
}

/// The receiving end of a TPBA flow.
pub struct TpbaReceiver {
    local: Addr,
    remote: Addr,
    config: TpbaFlowConfig,
    isn: u32,
    tags: StreamTags,
    fs: FSocket,
    conn: Option<Connection>,
    out: VecDeque<Packet>,
    delivered: u64,
    /// Stream bytes handed to the fsocket (whole records; TCP may have delivered more).
    tcp_handed: u64,
    arrivals: Vec<AduArrival>,
    /// Numbers of ADUs completed and not yet taken with `f_recv`.
    pending: VecDeque<u64>,
    last_seq: Option<u64>,
    corrupted: u64,
    out_of_order: u64,
    adus_lost: u64,
    malformed: u64,
}

impl TpbaReceiver {
    /// A receiver on `local` for the sender at `remote`; `tags` is shared with the sender.
    pub fn new(
        local: Addr,
        remote: Addr,
        config: TpbaFlowConfig,
        isn: u32,
        tags: StreamTags,
    ) -> TpbaReceiver {
        let fs = FSocket::f_socket(Time::ZERO, sockaddr(local), config.fs.clone());
        TpbaReceiver {
            local,
            remote,
            config,
            isn,
            tags,
            fs,
            conn: None,
            out: VecDeque::new(),
            delivered: 0,
            tcp_handed: 0,
            arrivals: Vec::new(),
            pending: VecDeque::new(),
            last_seq: None,
            corrupted: 0,
            out_of_order: 0,
            adus_lost: 0,
            malformed: 0,
        }
    }

    /// Every ADU that completed, in order of completion.
    pub fn arrivals(&self) -> &[AduArrival] {
        &self.arrivals
    }

    /// ADUs whose bytes did not match what the sender wrote (must stay 0).
    pub fn corrupted(&self) -> u64 {
        self.corrupted
    }

    /// ADUs delivered out of order or twice (must stay 0).
    pub fn out_of_order(&self) -> u64 {
        self.out_of_order
    }

    fn drain(&mut self, now: Time) {
        while let Some(e) = self.fs.poll_event() {
            match e {
                FsEvent::AduReceived { seq, tcp, .. } => {
                    self.pending.push_back(seq);
                    self.arrivals.push(AduArrival {
                        at_s: now.as_secs_f64(),
                        seq,
                        tcp,
                    });
                }
                FsEvent::AduLost { count, .. } => self.adus_lost += count,
                _ => {}
            }
        }
        while let Some(adu) = self.fs.f_recv() {
            // `AduReceived` comes in delivery order, one per ADU handed to `f_recv`.
            let Some(seq) = self.pending.pop_front() else {
                self.corrupted += 1;
                continue;
            };
            if self.last_seq.is_some_and(|l| seq <= l) {
                self.out_of_order += 1;
            }
            self.last_seq = Some(seq);
            let ok = adu.len() == self.config.adu_bytes as usize
                && adu.iter().enumerate().all(|(o, b)| *b == adu_byte(seq, o));
            if !ok {
                self.corrupted += 1;
            }
            self.delivered += adu.len() as u64;
        }
        while let Some(t) = self.fs.poll_transmit(now) {
            if t.path != FlowPath::Tcp {
                let mut p = Packet::new(self.local, self.remote, Proto::Udp, 0);
                p.header = Header::from_slice(&t.bytes);
                self.out.push_back(p);
            }
        }
    }
}

impl Agent for TpbaReceiver {
    fn handle_packet(&mut self, now: Time, packet: Packet) {
        match packet.proto {
            Proto::Udp => {
                if self.fs.handle_udp(now, &packet.header).is_err() {
                    self.malformed += 1;
                }
            }
            Proto::Tcp => {
                let Ok(repr) = TcpRepr::parse(&packet.header) else {
                    self.malformed += 1;
                    return;
                };
                if packet.src != self.remote {
                    return;
                }
                match self.conn.as_mut() {
                    Some(c) => c.handle_segment(now, &repr, packet.payload_len),
                    None if repr.flags.syn && !repr.flags.ack => {
                        let cc = Connection::newreno(&self.config.tcp);
                        self.conn = Some(Connection::accept(
                            self.config.tcp.clone(),
                            &repr,
                            self.isn,
                            cc,
                        ));
                    }
                    None => {}
                }
                if let Some(c) = self.conn.as_mut() {
                    let unread = c.bytes_unread();
                    c.read(unread);
                    while c.poll_event().is_some() {}
                    for h in self.tags.take_through(c.bytes_delivered()) {
                        self.tcp_handed += h.len() as u64;
                        if self.fs.handle_tcp_bytes(now, &h).is_err() {
                            self.malformed += 1;
                        }
                    }
                }
            }
        }
        self.drain(now);
    }

    fn handle_timeout(&mut self, now: Time) {
        if let Some(c) = self.conn.as_mut() {
            c.handle_timeout(now);
        }
        self.fs.handle_timeout(now);
        self.drain(now);
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Packet> {
        if let Some(p) = self.out.pop_front() {
            return Some(p);
        }
        self.drain(now);
        if let Some(p) = self.out.pop_front() {
            return Some(p);
        }
        let seg = self.conn.as_mut()?.poll_transmit(now)?;
        segment_packet(self.local, self.remote, &seg)
    }

    fn poll_timeout(&self) -> Option<Time> {
        let fs = self.fs.poll_timeout();
        let tcp = self.conn.as_ref().and_then(Connection::poll_timeout);
        match (fs, tcp) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The flow's rate series count data as it arrives, per packet, on either path — as §6.1
    /// measured "Flow 3 (UDP)" plus "Flow 3 (TCP)" at the receiver's driver, and as every other
    /// flow type counts: ADU payload of the fragments the fsocket accepted
    /// ([`FSocket::received_payload_bytes`]), plus the in-order TCP bytes not yet handed to it
    /// (the simulated stream hands over whole records; their few framing bytes count until
    /// then). Counting whole ADUs at completion would quantize a 5120-byte ADU2 flow's 400 ms
    /// rate in steps of 102 kbit/s. ADUs the application received whole are the
    /// `adu_bytes_delivered` counter.
    fn delivered_bytes(&self) -> u64 {
        let in_tcp = self
            .conn
            .as_ref()
            .map_or(0, |c| c.bytes_delivered().saturating_sub(self.tcp_handed));
        self.fs.received_payload_bytes() + in_tcp
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("adu_bytes_delivered", self.delivered as f64),
            ("adus_received", self.arrivals.len() as f64),
            (
                "adus_on_tcp",
                self.arrivals.iter().filter(|a| a.tcp).count() as f64,
            ),
            ("adus_lost", self.adus_lost as f64),
            ("adus_corrupted", self.corrupted as f64),
            ("adus_out_of_order", self.out_of_order as f64),
            ("dropped_fragments", self.fs.dropped_fragments() as f64),
            ("malformed", self.malformed as f64),
        ]
    }
}
