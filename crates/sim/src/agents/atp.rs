//! ATP over SPP agents (`papers/000_97f7680fd99dd928.txt` §4): a sender hosting an NAI
//! application on [`AtpSender`], and the receiver ([`AtpReceiver`]).
//!
//! The sender's bandwidth figure comes from ATP's own estimator (Figure 3) fed with the host's
//! interface counters — the send-queue length and the bytes sent plus received, which the
//! world hands over before every input (§4.2: "polling the network card") — or, for the
//! oracle baseline, from the true capacity of the link it sends on ([`RateFeed::Oracle`]).
//! SPP datagrams travel as UDP packets whose header bytes are the emitted [`SppRepr`].

use super::nai_app::{AppHost, Ledger, NaiApp};
use super::nai_flow::{DeliveryLog, NaiFlow};
use crate::agent::{Agent, InterfaceInfo};
use crate::link::Bandwidth;
use crate::packet::{Addr, NodeId, Packet, Proto};
use crate::world::{AgentId, World, WorldError};
use adaptnet_core::Time;
use adaptnet_core::atp::{AtpConfig, AtpReceiver, AtpSender, RateSource};
use adaptnet_core::spp::{Delivery, SppDatagram, SppRepr};
use std::time::Duration;

/// Where an ATP sender agent gets its bandwidth figure.
#[derive(Clone, Debug)]
pub enum RateFeed {
    /// ATP's estimator, from the host's interface counters (the real protocol).
    Estimated,
    /// The true capacity of the sender's link over the coming `period`, scaled by
    /// `payload_fraction` (the share of link bytes that are UDP payload, e.g. 1472/1500):
    /// an oracle that knows the bandwidth trace.
    Oracle {
        /// The link's capacity model.
        bandwidth: Bandwidth,
        /// How often the rate is updated (and over what window it is averaged).
        period: Duration,
        /// UDP-payload share of link bytes.
        payload_fraction: f64,
    },
}

impl RateFeed {
    /// For the oracle, the payload rate over the coming period and when that period ends (the
    /// next update); `None` for the estimator.
    pub(crate) fn oracle_rate(&self, now: Time) -> Option<(f64, Time)> {
        let RateFeed::Oracle {
            bandwidth,
            period,
            payload_fraction,
        } = self
        else {
            return None;
        };
        let period = (*period).max(Duration::from_millis(1));
        let end = now + period;
        let bytes = bandwidth.capacity_bytes(end) - bandwidth.capacity_bytes(now);
        let rate = (bytes / period.as_secs_f64()).max(0.0) * payload_fraction;
        Some((rate, end))
    }
}

/// Turns an SPP datagram into a UDP packet.
pub fn datagram_packet(src: Addr, dst: Addr, d: &SppDatagram) -> Option<Packet> {
    Packet::with_header(
        src,
        dst,
        Proto::Udp,
        d.repr.buffer_len(),
        d.payload_len,
        |buf| d.repr.emit(buf),
    )
    .ok()
}

/// The SPP datagram in `packet`, if it comes from `peer` (others are ignored); one whose
/// header does not parse is counted in `malformed`.
fn datagram_from(peer: Addr, packet: &Packet, malformed: &mut u64) -> Option<SppRepr> {
    if packet.src != peer {
        return None;
    }
    let repr = SppRepr::parse(&packet.header);
    if repr.is_err() {
        *malformed += 1;
    }
    repr.ok()
}

/// The sending side of ATP over SPP, hosting an application.
pub struct AtpAgent {
    local: Addr,
    remote: Addr,
    config: AtpConfig,
    feed: RateFeed,
    sender: Option<AtpSender>,
    host: AppHost,
    next_oracle: Option<Time>,
    malformed: u64,
    /// (time, rate the scheduler plans with) at each change.
    rate_series: Vec<(Time, f64)>,
}

impl AtpAgent {
    /// A sender from `local` to `remote` (UDP) running `app`.
    pub fn new(
        local: Addr,
        remote: Addr,
        config: AtpConfig,
        feed: RateFeed,
        app: Box<dyn NaiApp>,
    ) -> AtpAgent {
        AtpAgent {
            local,
            remote,
            config,
            feed,
            sender: None,
            host: AppHost::new(app),
            next_oracle: None,
            malformed: 0,
            rate_series: Vec::new(),
        }
    }

    /// The ATP sender, once started.
    pub fn sender(&self) -> Option<&AtpSender> {
        self.sender.as_ref()
    }

    /// Every submission and outcome.
    pub fn ledger(&self) -> &Ledger {
        self.host.ledger()
    }

    /// The application.
    pub fn app(&self) -> &dyn NaiApp {
        self.host.app()
    }

    /// The rate NAI planned with (ATP's `available`, or the oracle's), at each change.
    pub fn rate_series(&self) -> &[(Time, f64)] {
        &self.rate_series
    }

    /// Datagrams that did not parse.
    pub fn malformed(&self) -> u64 {
        self.malformed
    }

    /// Hands events to the ledger and the app until both are quiet.
    fn pump(&mut self, now: Time) {
        let Some(sender) = self.sender.as_mut() else {
            return;
        };
        while let Some(ev) = sender.poll_event() {
            self.host.on_event(now, &ev, sender.nai_mut());
        }
        let rate = sender.nai().rate_bytes_per_s();
        if self.rate_series.last().is_none_or(|&(_, r)| r != rate) {
            self.rate_series.push((now, rate));
        }
    }
}

impl Agent for AtpAgent {
    fn start(&mut self, now: Time) {
        let source = match self.feed {
            RateFeed::Estimated => RateSource::Estimated,
            RateFeed::Oracle { .. } => RateSource::External,
        };
        let mut sender = AtpSender::new(self.config.clone(), source, now);
        if let Some((rate, next)) = self.feed.oracle_rate(now) {
            sender.set_external_rate(now, rate);
            self.next_oracle = Some(next);
        }
        self.host.start(now, sender.nai_mut());
        self.sender = Some(sender);
        self.pump(now);
    }

    fn stop(&mut self, _now: Time) {
        self.host.stop();
    }

    fn handle_packet(&mut self, now: Time, packet: Packet) {
        let Some(repr) = datagram_from(self.remote, &packet, &mut self.malformed) else {
            return;
        };
        if let Some(s) = self.sender.as_mut() {
            s.handle_datagram(now, &repr, packet.payload_len);
        }
        self.pump(now);
    }

    fn handle_timeout(&mut self, now: Time) {
        if self.next_oracle.is_some_and(|t| t <= now)
            && let Some((rate, next)) = self.feed.oracle_rate(now)
        {
            if let Some(s) = self.sender.as_mut() {
                s.set_external_rate(now, rate);
            }
            self.next_oracle = Some(next);
        }
        let Some(sender) = self.sender.as_mut() else {
            return;
        };
        if sender.poll_timeout().is_some_and(|t| t <= now) {
            sender.handle_timeout(now);
        }
        self.pump(now);
        if let Some(sender) = self.sender.as_mut() {
            self.host.handle_timeout(now, sender.nai_mut());
        }
        self.pump(now);
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Packet> {
        let sender = self.sender.as_mut()?;
        std::iter::from_fn(|| sender.poll_transmit(now))
            .find_map(|d| datagram_packet(self.local, self.remote, &d))
    }

    fn poll_timeout(&self) -> Option<Time> {
        let s = self.sender.as_ref()?;
        [s.poll_timeout(), self.host.poll_timeout(), self.next_oracle]
            .into_iter()
            .flatten()
            .min()
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let Some(s) = self.sender.as_ref() else {
            return Vec::new();
        };
        let st = s.stats();
        vec![
            ("data_packets", st.data_packets as f64),
            ("data_bytes", st.data_bytes as f64),
            ("retransmitted_bytes", st.retransmitted_bytes as f64),
            ("lost_packets", st.lost_packets as f64),
            ("timeouts", st.timeouts as f64),
            ("cancel_packets", st.cancel_packets as f64),
            ("packet_pairs", s.packet_pairs() as f64),
            ("malformed", self.malformed as f64),
        ]
    }

    fn wants_interface_info(&self) -> bool {
        matches!(self.feed, RateFeed::Estimated)
    }

    fn on_interface(&mut self, now: Time, info: &InterfaceInfo) {
        if let Some(s) = self.sender.as_mut() {
            s.handle_queue_len(now, u32::try_from(info.queue_packets).unwrap_or(u32::MAX));
            s.handle_interface_bytes(now, info.tx_bytes.saturating_add(info.rx_bytes));
        }
    }
}

/// The receiving side of ATP over SPP: reassembles and delivers messages, acknowledges, and
/// measures packet pairs.
pub struct AtpSink {
    local: Addr,
    remote: Addr,
    rx: AtpReceiver,
    log: DeliveryLog,
    payload_bytes: u64,
    malformed: u64,
}

impl AtpSink {
    /// A receiver on `local` for the sender at `remote`.
    pub fn new(local: Addr, remote: Addr, config: &AtpConfig) -> AtpSink {
        AtpSink {
            local,
            remote,
            rx: AtpReceiver::new(config.spp.clone()),
            log: DeliveryLog::default(),
            payload_bytes: 0,
            malformed: 0,
        }
    }

    /// Messages delivered to the receiving application, in order of delivery.
    pub fn deliveries(&self) -> &[Delivery] {
        self.log.deliveries()
    }

    /// Bytes of delivered messages.
    pub fn delivered_message_bytes(&self) -> u64 {
        self.log.message_bytes()
    }

    /// DATA payload bytes received, duplicates and pieces of messages never completed
    /// included: the bandwidth the sender's messages used on the link.
    pub fn payload_bytes(&self) -> u64 {
        self.payload_bytes
    }

    /// Partly received messages dropped on a cancel notice.
    pub fn discards(&self) -> u64 {
        self.log.discards()
    }
}

impl Agent for AtpSink {
    fn handle_packet(&mut self, now: Time, packet: Packet) {
        let Some(repr) = datagram_from(self.remote, &packet, &mut self.malformed) else {
            return;
        };
        if matches!(repr, SppRepr::Data(_)) {
            self.payload_bytes += u64::from(packet.payload_len);
        }
        self.rx.handle_datagram(now, &repr, packet.payload_len);
        while let Some(ev) = self.rx.poll_event() {
            self.log.record(ev);
        }
    }

    fn handle_timeout(&mut self, _now: Time) {}

    fn poll_transmit(&mut self, now: Time) -> Option<Packet> {
        std::iter::from_fn(|| self.rx.poll_transmit(now))
            .find_map(|d| datagram_packet(self.local, self.remote, &d))
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.rx.poll_timeout()
    }

    /// Message payload bytes received (counted on arrival; messages are delivered whole).
    fn delivered_bytes(&self) -> u64 {
        self.payload_bytes
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("messages_delivered", self.log.deliveries().len() as f64),
            ("message_bytes_delivered", self.log.message_bytes() as f64),
            ("discards", self.log.discards() as f64),
            ("malformed", self.malformed as f64),
        ]
    }
}

/// Installs an ATP sender (with `feed` and `app`) on `from` and its receiver on `to`, both on
/// UDP `port`, as one flow active over `[start, stop)`. Returns (sender, receiver).
#[allow(clippy::too_many_arguments)]
pub fn install(
    world: &mut World,
    name: &str,
    config: AtpConfig,
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
        kind: "atp",
        from,
        to,
        proto: Proto::Udp,
        port,
        extra_ports: Vec::new(),
        start,
        stop,
    };
    let (local, remote) = flow.addrs();
    let sink = AtpSink::new(remote, local, &config);
    let sender = AtpAgent::new(local, remote, config, feed, app);
    flow.install(world, Box::new(sender), Box::new(sink))
}
