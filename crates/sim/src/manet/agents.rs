//! The MANET path's TCP agents: a TCP-ELFN sender that receives the network's link-failure
//! notifications, and a receiver that keeps the ADTCP identification of every sampling
//! interval for scoring against the monitor.

use crate::agent::Agent;
use crate::agents::tcp::{TcpReceiver, TcpSender};
use crate::packet::{Addr, Packet};
use adaptnet_core::Time;
use adaptnet_core::adtcp::receiver::Identification;
use adaptnet_core::adtcp::{Receiver, ReceiverConfig};
use adaptnet_core::tcp::{Connection, TcpConfig};
use std::collections::VecDeque;
use std::time::Duration;

/// Whether the connection's controller reports itself frozen (ELFN's `standby` counter).
fn in_standby(conn: &Connection) -> bool {
    conn.cc()
        .policy_counters()
        .iter()
        .any(|&(k, v)| k == "standby" && v > 0)
}

/// A TCP sender with an [`adaptnet_core::cc::Elfn`] controller, told of each link failure by
/// the simulated network (Holland and Vaidya's explicit link-failure notification, the
/// baseline of papers/004 §5).
///
/// At each notification time it calls
/// [`CongestionController::on_link_failure`](adaptnet_core::cc::CongestionController::on_link_failure);
/// while the controller is frozen it restarts the retransmission timer every
/// `probe_interval` ([`Connection::reset_rto`]), which sends the next probe at once and clears
/// the backoff: ELFN probes periodically rather than with exponential backoff.
pub struct ElfnSender {
    inner: TcpSender,
    /// Notification times not yet delivered, in order.
    notices: VecDeque<Time>,
    probe_interval: Duration,
    next_probe: Option<Time>,
    delivered: u64,
    probes: u64,
}

impl ElfnSender {
    /// Wraps `inner` (whose controller should be ELFN) with the notification times.
    pub fn new(inner: TcpSender, mut notices: Vec<Time>, probe_interval: Duration) -> ElfnSender {
        notices.sort_unstable();
        ElfnSender {
            inner,
            notices: notices.into(),
            probe_interval,
            next_probe: None,
            delivered: 0,
            probes: 0,
        }
    }

    /// The TCP sender.
    pub fn sender(&self) -> &TcpSender {
        &self.inner
    }

    /// Notifications delivered to the controller so far.
    pub fn notices_delivered(&self) -> u64 {
        self.delivered
    }

    fn act(&mut self, now: Time) {
        let Some(conn) = self.inner.connection_mut() else {
            return;
        };
        while self.notices.front().is_some_and(|&t| t <= now) {
            self.notices.pop_front();
            conn.cc_mut().on_link_failure(now);
            self.delivered += 1;
            self.next_probe.get_or_insert(now + self.probe_interval);
        }
        if !in_standby(conn) {
            self.next_probe = None;
            return;
        }
        match self.next_probe {
            Some(t) if t <= now => {
                conn.reset_rto(now);
                self.probes += 1;
                self.next_probe = Some(now + self.probe_interval);
            }
            None => self.next_probe = Some(now + self.probe_interval),
            Some(_) => {}
        }
    }
}

impl Agent for ElfnSender {
    fn start(&mut self, now: Time) {
        self.inner.start(now);
    }

    fn stop(&mut self, now: Time) {
        self.inner.stop(now);
    }

    fn handle_packet(&mut self, now: Time, packet: Packet) {
        self.inner.handle_packet(now, packet);
        self.act(now);
    }

    fn handle_timeout(&mut self, now: Time) {
        self.inner.handle_timeout(now);
        self.act(now);
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Packet> {
        self.inner.poll_transmit(now)
    }

    fn poll_timeout(&self) -> Option<Time> {
        [
            self.inner.poll_timeout(),
            self.notices.front().copied(),
            self.next_probe,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn take_rtt_samples(&mut self) -> Vec<(Time, Duration)> {
        self.inner.take_rtt_samples()
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let mut v = self.inner.counters();
        v.push(("elfn_notices", self.delivered as f64));
        v.push(("elfn_periodic_probes", self.probes as f64));
        v
    }
}

/// A TCP receiver that records the ADTCP identification of every closed sampling interval
/// (one entry per interval, so the log is bounded by the run's length over the 1 ms minimum
/// interval).
pub struct IdLogReceiver {
    inner: TcpReceiver,
    log: Vec<(Time, Identification)>,
    seen: u64,
    /// A non-default ADTCP receiver configuration, installed when the connection opens.
    rsd: Option<ReceiverConfig>,
    /// One past the highest data byte received (sequence space), once data has arrived.
    highest: Option<u32>,
    /// When a data segment arrived above a gap (the receiver sees a loss, or reordering); at
    /// most one entry per data segment received, so bounded by the run like `log`.
    holes: Vec<Time>,
}

impl IdLogReceiver {
    /// A receiver on `local` accepting a connection from `remote`; `receiver`, if given,
    /// replaces the default ADTCP receiver configuration (an invalid one is ignored: the path
    /// validated it).
    pub fn new(
        local: Addr,
        remote: Addr,
        config: TcpConfig,
        isn: u32,
        receiver: Option<ReceiverConfig>,
    ) -> IdLogReceiver {
        IdLogReceiver {
            inner: TcpReceiver::new(local, remote, config, isn),
            log: Vec::new(),
            seen: 0,
            rsd: receiver,
            highest: None,
            holes: Vec::new(),
        }
    }

    /// When data segments arrived above a gap in the sequence space — the moments the receiver
    /// learns of a loss (its first duplicate ACK), or of reordering — in time order.
    pub fn hole_detections(&self) -> &[Time] {
        &self.holes
    }

    /// Notes a data segment's place in the sequence space before the stream takes it.
    fn note_segment(&mut self, now: Time, packet: &Packet) {
        if packet.payload_len == 0 {
            return;
        }
        let Ok(repr) = adaptnet_core::tcp::TcpRepr::parse(&packet.header) else {
            return;
        };
        let end = repr.seq.wrapping_add(packet.payload_len);
        // Serial-number comparison (RFC 1982): `a` after `b` within half the space.
        let after = |a: u32, b: u32| a != b && a.wrapping_sub(b) < 0x8000_0000;
        match self.highest {
            Some(high) if after(repr.seq, high) => {
                self.holes.push(now);
                self.highest = Some(end);
            }
            Some(high) if after(end, high) => self.highest = Some(end),
            Some(_) => {}
            None => self.highest = Some(end),
        }
    }

    /// Every identification, with the time its interval closed.
    pub fn identifications(&self) -> &[(Time, Identification)] {
        &self.log
    }

    /// The TCP receiver.
    pub fn receiver(&self) -> &TcpReceiver {
        &self.inner
    }
}

impl Agent for IdLogReceiver {
    fn handle_packet(&mut self, now: Time, packet: Packet) {
        self.note_segment(now, &packet);
        self.inner.handle_packet(now, packet);
        // Before the first data segment: the connection opens on the SYN.
        if let Some(cfg) = self.rsd
            && let Some(conn) = self.inner.connection_mut()
            && conn.adtcp_receiver().is_some()
        {
            conn.set_adtcp_receiver(Receiver::new(cfg).ok());
            self.rsd = None;
        }
        if let Some(rx) = self.inner.connection().and_then(Connection::adtcp_receiver)
            && rx.intervals() > self.seen
        {
            self.seen = rx.intervals();
            if let Some(id) = rx.last() {
                self.log.push((now, *id));
            }
        }
    }

    fn handle_timeout(&mut self, now: Time) {
        self.inner.handle_timeout(now);
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Packet> {
        self.inner.poll_transmit(now)
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.inner.poll_timeout()
    }

    fn delivered_bytes(&self) -> u64 {
        self.inner.delivered_bytes()
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let mut v = self.inner.counters();
        v.push(("identifications", self.log.len() as f64));
        v
    }
}
