//! ATP over one TCP connection as agents (`papers/000_97f7680fd99dd928.txt` §4.1): the NAI
//! scheduler writes fixed-size, padded segments ([`AtpTcpSender`]) on one NewReno connection
//! while it holds few unacknowledged bytes, so messages stay preemptible at segment
//! granularity. Segment headers travel beside the virtual stream ([`StreamTags`]).
//!
//! The bandwidth figure for admission and early expiry comes from ATP's estimator run once a
//! second on the host's interface counters ([`EstimatorClock`]), with packet pairs sent as SPP
//! PROBE datagrams over UDP to the same port number when the estimate is zero (the receiver
//! answers with a REPORT), or from the link's true capacity ([`RateFeed::Oracle`]). TCP's
//! congestion control, not NAI, decides the sending rate.

use super::atp::{RateFeed, datagram_packet};
use super::nai_app::{AppHost, Ledger, NaiApp};
use super::nai_flow::{DeliveryLog, NaiFlow};
use super::stream::{ConnSet, StreamTags};
use crate::agent::{Agent, InterfaceInfo};
use crate::packet::{Addr, NodeId, Packet, Proto};
use crate::world::{AgentId, World, WorldError};
use adaptnet_core::Time;
use adaptnet_core::atp::tcp::{
    AtpTcpReceiver, AtpTcpSender, SEG_HEADER_LEN, SegHeader, TcpFramingConfig,
};
use adaptnet_core::atp::{EstimatorClock, EstimatorConfig};
use adaptnet_core::nai::NaiConfig;
use adaptnet_core::spp::{Delivery, SppConfig, SppDatagram, SppReceiver, SppRepr};
use adaptnet_core::tcp::TcpConfig;

/// An SPP datagram (packet-pair PROBE or REPORT) as a UDP packet between the two ends of the
/// TCP connection, on the same port numbers.
fn probe_packet(conns: &ConnSet, d: &SppDatagram) -> Option<Packet> {
    let slot = conns.slot(0)?;
    datagram_packet(slot.local, slot.remote, d)
}

/// The sending side of ATP over TCP, hosting an application.
pub struct AtpTcpAgent {
    atp: AtpTcpSender,
    conns: ConnSet,
    tags: StreamTags,
    host: AppHost,
    feed: RateFeed,
    clock: Option<EstimatorClock>,
    estimator: EstimatorConfig,
    next_oracle: Option<Time>,
    started: bool,
}

impl AtpTcpAgent {
    /// A sender on one connection `local` → `remote`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        framing: TcpFramingConfig,
        nai: NaiConfig,
        estimator: EstimatorConfig,
        feed: RateFeed,
        tcp: TcpConfig,
        local: Addr,
        remote: Addr,
        tags: StreamTags,
        app: Box<dyn NaiApp>,
    ) -> AtpTcpAgent {
        AtpTcpAgent {
            atp: AtpTcpSender::new(framing, nai),
            conns: ConnSet::new(tcp, vec![(local, remote)]),
            tags,
            host: AppHost::new(app),
            feed,
            clock: None,
            estimator,
            next_oracle: None,
            started: false,
        }
    }

    /// The ATP framer and scheduler.
    pub fn sender(&self) -> &AtpTcpSender {
        &self.atp
    }

    /// Every submission and outcome.
    pub fn ledger(&self) -> &Ledger {
        self.host.ledger()
    }

    /// The application.
    pub fn app(&self) -> &dyn NaiApp {
        self.host.app()
    }

    fn oracle(&mut self, now: Time) {
        if let Some((rate, next)) = self.feed.oracle_rate(now) {
            self.atp.set_rate(now, rate);
            self.next_oracle = Some(next);
        }
    }

    fn pump(&mut self, now: Time) {
        loop {
            let mut progress = false;
            if let Some(slot) = self.conns.slot_mut(0)
                && let Some(conn) = slot.conn.as_mut()
            {
                self.atp.handle_acked(now, conn.bytes_acked());
                while let Some(seg) = self.atp.poll_transmit(now, conn.bytes_unacked()) {
                    let mut buf = [0u8; SEG_HEADER_LEN];
                    if seg.header.emit(&mut buf).is_err() {
                        continue;
                    }
                    conn.write(u64::from(seg.bytes));
                    slot.written += u64::from(seg.bytes);
                    self.tags.push(slot.written, &buf);
                    progress = true;
                }
            }
            while let Some(ev) = self.atp.poll_event() {
                self.host.on_event(now, &ev, self.atp.nai_mut());
                progress = true;
            }
            if !progress {
                break;
            }
        }
    }
}

impl Agent for AtpTcpAgent {
    fn start(&mut self, now: Time) {
        self.conns.connect_all(3_000);
        self.started = true;
        match self.feed {
            RateFeed::Estimated => {
                self.clock = Some(EstimatorClock::new(self.estimator.clone(), now, 1472, true));
            }
            RateFeed::Oracle { .. } => self.oracle(now),
        }
        self.host.start(now, self.atp.nai_mut());
        self.pump(now);
    }

    fn stop(&mut self, _now: Time) {
        self.host.stop();
    }

    fn handle_packet(&mut self, now: Time, packet: Packet) {
        if packet.proto == Proto::Udp {
            // A packet-pair report (§4.2).
            if let Ok(SppRepr::Report(r)) = SppRepr::parse(&packet.header)
                && let Some(e) = self.clock.as_mut().and_then(|c| c.handle_report(&r))
            {
                self.atp.set_rate(now, e.available_bytes_per_s);
            }
        } else {
            self.conns.handle_packet(now, &packet, 3_000);
        }
        self.pump(now);
    }

    fn handle_timeout(&mut self, now: Time) {
        self.conns.handle_timeout(now);
        if let Some(e) = self.clock.as_mut().and_then(|c| c.handle_timeout(now)) {
            self.atp.set_rate(now, e.available_bytes_per_s);
        }
        if self.next_oracle.is_some_and(|t| t <= now) {
            self.oracle(now);
        }
        self.atp.handle_timeout(now);
        self.pump(now);
        self.host.handle_timeout(now, self.atp.nai_mut());
        self.pump(now);
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Packet> {
        if let Some(d) = self.clock.as_mut().and_then(EstimatorClock::poll_transmit)
            && let Some(p) = probe_packet(&self.conns, &d)
        {
            return Some(p);
        }
        self.conns.poll_transmit(now)
    }

    fn poll_timeout(&self) -> Option<Time> {
        if !self.started {
            return None;
        }
        [
            self.conns.poll_timeout(),
            self.atp.poll_timeout(),
            self.host.poll_timeout(),
            self.clock.as_ref().map(EstimatorClock::poll_timeout),
            self.next_oracle,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("bytes_written", self.atp.bytes_written() as f64),
            ("malformed", self.conns.malformed as f64),
        ]
    }

    fn wants_interface_info(&self) -> bool {
        matches!(self.feed, RateFeed::Estimated)
    }

    fn on_interface(&mut self, now: Time, info: &InterfaceInfo) {
        if let Some(e) = self.clock.as_mut().and_then(|c| {
            c.handle_interface(
                now,
                info.tx_bytes.saturating_add(info.rx_bytes),
                u32::try_from(info.queue_packets).unwrap_or(u32::MAX),
            )
        }) {
            self.atp.set_rate(now, e.available_bytes_per_s);
        }
    }
}

/// The receiving side of ATP over TCP.
pub struct AtpTcpSink {
    conns: ConnSet,
    /// Answers packet pairs (SPP PROBE → REPORT) on the same port number over UDP.
    probes: SppReceiver,
    tags: StreamTags,
    rx: AtpTcpReceiver,
    log: DeliveryLog,
    payload_bytes: u64,
    malformed_segments: u64,
}

impl AtpTcpSink {
    /// A receiver on `local` accepting the connection from `remote`.
    pub fn new(
        framing: TcpFramingConfig,
        tcp: TcpConfig,
        local: Addr,
        remote: Addr,
        tags: StreamTags,
    ) -> AtpTcpSink {
        AtpTcpSink {
            conns: ConnSet::new(tcp, vec![(local, remote)]),
            probes: SppReceiver::new(SppConfig::default()),
            tags,
            rx: AtpTcpReceiver::new(framing),
            log: DeliveryLog::default(),
            payload_bytes: 0,
            malformed_segments: 0,
        }
    }

    /// Messages delivered, in order of delivery.
    pub fn deliveries(&self) -> &[Delivery] {
        self.log.deliveries()
    }
}

impl Agent for AtpTcpSink {
    fn handle_packet(&mut self, now: Time, packet: Packet) {
        if packet.proto == Proto::Udp {
            if let Ok(repr @ SppRepr::Probe(_)) = SppRepr::parse(&packet.header) {
                self.probes.handle_datagram(now, &repr, packet.payload_len);
            }
            return;
        }
        if self.conns.handle_packet(now, &packet, 9_000).is_none() {
            return;
        }
        let Some(conn) = self.conns.slot_mut(0).and_then(|s| s.conn.as_mut()) else {
            return;
        };
        conn.read(conn.bytes_unread());
        for h in self.tags.take_through(conn.bytes_delivered()) {
            let ok = SegHeader::parse(&h).and_then(|seg| {
                self.payload_bytes += u64::from(seg.len);
                self.rx.handle_header(now, &seg)
            });
            if ok.is_err() {
                self.malformed_segments += 1;
            }
        }
        while let Some(ev) = self.rx.poll_event() {
            self.log.record(ev);
        }
    }

    fn handle_timeout(&mut self, now: Time) {
        self.conns.handle_timeout(now);
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Packet> {
        if let Some(d) = self.probes.poll_transmit(now)
            && let Some(p) = probe_packet(&self.conns, &d)
        {
            return Some(p);
        }
        self.conns.poll_transmit(now)
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.conns.poll_timeout()
    }

    /// Message bytes received in order (segment headers and padding excluded).
    fn delivered_bytes(&self) -> u64 {
        self.payload_bytes
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("messages_delivered", self.log.deliveries().len() as f64),
            ("message_bytes_delivered", self.log.message_bytes() as f64),
            ("malformed_segments", self.malformed_segments as f64),
            ("malformed", self.conns.malformed as f64),
        ]
    }
}

/// Installs an ATP-over-TCP sender on `from` and its receiver on `to` (TCP `port` on both),
/// as one flow active over `[start, stop)`, with `estimator` when `feed` is the estimator.
/// Returns (sender, receiver).
#[allow(clippy::too_many_arguments)]
pub fn install(
    world: &mut World,
    name: &str,
    nai: NaiConfig,
    estimator: EstimatorConfig,
    feed: RateFeed,
    from: NodeId,
    to: NodeId,
    port: u16,
    app: Box<dyn NaiApp>,
    start: Time,
    stop: Time,
) -> Result<(AgentId, AgentId), WorldError> {
    let flow = NaiFlow {
        name,
        kind: "atp-tcp",
        from,
        to,
        proto: Proto::Tcp,
        port,
        // Packet pairs travel over UDP on the same port.
        extra_ports: vec![(Proto::Udp, port)],
        start,
        stop,
    };
    let (local, remote) = flow.addrs();
    let tcp = TcpConfig::default();
    let framing = TcpFramingConfig::default();
    let tags = StreamTags::new();
    let sender = AtpTcpAgent::new(
        framing.clone(),
        nai,
        estimator,
        feed,
        tcp.clone(),
        local,
        remote,
        tags.clone(),
        app,
    );
    let sink = AtpTcpSink::new(framing, tcp, remote, local, tags);
    flow.install(world, Box::new(sender), Box::new(sink))
}
