//! LDA and LDAF flow agents (`papers/002_ef8b8f60f6080824.txt` §3, Fig. 2; §6.2): an RTP-like
//! UDP sender paced at LDA's rate `r`, and a receiver that sends RTCP-like receiver reports
//! every `T_rtcp` with the loss count, an RTT echo and a packet-pair bottleneck estimate.
//!
//! Data datagrams carry the TPBA fragment header ([`FragmentHeader`], one fragment per
//! datagram) and reports are TPBA's [`ReceiverReport`]: the same wire formats as the TPBA
//! running period, so the two schemes differ only in their decisions.
//!
//! Packet pairs (LDA's bottleneck estimate `b`, Ref. 20 of the paper): when enabled the
//! sender sends its datagrams two at a time, back to back, at the same mean rate. The receiver
//! takes `payload / gap` for each pair that arrives back to back and reports the largest of the
//! last [`PAIR_WINDOW`] estimates (cross traffic queued between the two packets only widens
//! the gap, so the largest is the closest to the bottleneck's capacity). The estimate is a
//! payload rate, comparable with `r`.

use crate::agent::Agent;
use crate::packet::{Addr, Packet, Proto};
use adaptnet_core::Time;
use adaptnet_core::ratectl::lda::{Lda, LdaConfig, LdaInput};
use adaptnet_core::tpba::report::{FragmentHeader, ReceiverReport, stamp_us, unwrap_stamp};
use std::collections::VecDeque;
use std::time::Duration;

/// Packet-pair estimates the receiver keeps.
pub const PAIR_WINDOW: usize = 32;

/// How the LDA sender learns the bottleneck bandwidth `b`.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub enum Bottleneck {
    /// Packet pairs measured by the receiver (the paper's LDA).
    PacketPair,
    /// A configured value, bytes/s of payload.
    Fixed(f64),
    /// None: lines (A) never cap the rate.
    Unknown,
}

/// Parameters of an LDA/LDAF flow in the simulator.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct LdaFlowConfig {
    /// Figure 2's parameters (LDA or LDAF by `air_update`).
    pub lda: LdaConfig,
    /// Where `b` comes from.
    pub bottleneck: Bottleneck,
}

/// The RTP-like datagram of one LDA packet (header only; the payload is virtual).
fn datagram(src: Addr, dst: Addr, seq: u32, payload: u32, now: Time) -> Packet {
    let h = FragmentHeader {
        tcp: false,
        adu_seq: u64::from(seq),
        adu_len: payload,
        offset: 0,
        len: payload,
        dgram_seq: seq,
        sent_at_us: stamp_us(now),
    };
    let mut p = Packet::new(src, dst, Proto::Udp, payload);
    p.header.resize(FragmentHeader::UDP_LEN, 0);
    let n = h.emit(&mut p.header).unwrap_or(0);
    p.header.truncate(n);
    p
}

/// The LDA (or LDAF) sender.
pub struct LdaSender {
    local: Addr,
    remote: Addr,
    config: LdaFlowConfig,
    lda: Lda,
    running: bool,
    next_send: Time,
    /// The second packet of a pair is due now.
    pair_pending: bool,
    seq: u32,
    next_adapt: Option<Time>,
    highest: Option<u32>,
    cum_lost: u32,
    expected: u64,
    lost: u64,
    rtt: Option<Duration>,
    b: Option<f64>,
    rates: Vec<(f64, f64)>,
    lossy_points: u64,
    malformed: u64,
}

impl LdaSender {
    /// A sender from `local` to `remote`.
    pub fn new(local: Addr, remote: Addr, config: LdaFlowConfig) -> LdaSender {
        let b = match config.bottleneck {
            Bottleneck::Fixed(b) => Some(b),
            _ => None,
        };
        LdaSender {
            local,
            remote,
            lda: Lda::new(config.lda.clone()),
            config,
            running: false,
            next_send: Time::ZERO,
            pair_pending: false,
            seq: 0,
            next_adapt: None,
            highest: None,
            cum_lost: 0,
            expected: 0,
            lost: 0,
            rtt: None,
            b,
            rates: Vec::new(),
            lossy_points: 0,
            malformed: 0,
        }
    }

    /// The rate after each adaptation point: (time s, bytes/s).
    pub fn rates(&self) -> &[(f64, f64)] {
        &self.rates
    }

    /// LDA's state.
    pub fn lda(&self) -> &Lda {
        &self.lda
    }

    fn adapt(&mut self, now: Time) {
        let loss_ratio = if self.expected == 0 {
            0.0
        } else {
            self.lost.min(self.expected) as f64 / self.expected as f64
        };
        if loss_ratio > 0.0 {
            self.lossy_points += 1;
        }
        self.expected = 0;
        self.lost = 0;
        let r = self.lda.adapt(LdaInput {
            loss_ratio,
            rtt: self.rtt,
            bottleneck_bytes_per_s: self.b,
        });
        self.rates.push((now.as_secs_f64(), r));
    }
}

impl Agent for LdaSender {
    fn start(&mut self, now: Time) {
        self.running = true;
        self.next_send = now;
        self.next_adapt = Some(now + self.config.lda.t_adapt);
        self.rates
            .push((now.as_secs_f64(), self.lda.rate_bytes_per_s()));
    }

    fn stop(&mut self, _now: Time) {
        self.running = false;
    }

    fn handle_packet(&mut self, now: Time, packet: Packet) {
        let Ok(rr) = ReceiverReport::parse(&packet.header) else {
            self.malformed += 1;
            return;
        };
        let before = self.highest.map_or(0, |h| u64::from(h) + 1);
        let now_expected = u64::from(rr.highest_seq) + 1;
        if now_expected < before {
            return; // reordered, older
        }
        self.expected += now_expected - before;
        self.lost += u64::from(rr.cumulative_lost.saturating_sub(self.cum_lost));
        self.cum_lost = self.cum_lost.max(rr.cumulative_lost);
        self.highest = Some(rr.highest_seq);
        // The echo is the datagram's 32-bit microsecond stamp (0: none yet).
        if rr.echo_sent_at > Time::ZERO {
            let stamp = u32::try_from(rr.echo_sent_at.as_nanos() / 1_000).unwrap_or(u32::MAX);
            self.rtt = Some(
                now.saturating_since(unwrap_stamp(now, stamp))
                    .saturating_sub(rr.delay()),
            );
        }
        if self.config.bottleneck == Bottleneck::PacketPair && rr.bottleneck_bytes_per_s > 0 {
            self.b = Some(rr.bottleneck_bytes_per_s as f64);
        }
    }

    fn handle_timeout(&mut self, now: Time) {
        while let Some(t) = self.next_adapt.filter(|t| now >= *t) {
            self.adapt(now);
            self.next_adapt = Some(t + self.config.lda.t_adapt);
        }
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Packet> {
        if !self.running || (now < self.next_send && !self.pair_pending) {
            return None;
        }
        let payload = self.config.lda.packet_bytes.max(1);
        let rate = self.lda.rate_bytes_per_s();
        let ipi = adaptnet_core::time::transmission_time(u64::from(payload), rate)
            .unwrap_or(Duration::from_secs(1));
        let pairs = self.config.bottleneck == Bottleneck::PacketPair;
        if pairs && !self.pair_pending {
            // First of a pair: the second goes right after it; the pair costs two intervals.
            self.pair_pending = true;
            self.next_send = self.next_send.max(now.saturating_sub(ipi * 2)) + ipi * 2;
        } else if pairs {
            self.pair_pending = false;
        } else {
            self.next_send = self.next_send.max(now.saturating_sub(ipi)) + ipi;
        }
        let p = datagram(self.local, self.remote, self.seq, payload, now);
        self.seq = self.seq.wrapping_add(1);
        Some(p)
    }

    fn poll_timeout(&self) -> Option<Time> {
        if !self.running {
            return None;
        }
        let send = if self.pair_pending {
            // The pair's second packet is sent with the first (the world re-polls at once).
            None
        } else {
            Some(self.next_send)
        };
        match (send, self.next_adapt) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("datagrams_sent", f64::from(self.seq)),
            ("rate_kbps", self.lda.rate_bytes_per_s() * 8.0 / 1e3),
            ("air_kbps", self.lda.air_bytes_per_s() * 8.0 / 1e3),
            ("adaptation_points", self.rates.len() as f64),
            ("lossy_adaptation_points", self.lossy_points as f64),
            ("bottleneck_kbps", self.b.map_or(0.0, |b| b * 8.0 / 1e3)),
            ("malformed", self.malformed as f64),
        ]
    }
}

/// The LDA receiver: counts datagrams, measures packet pairs, sends receiver reports.
pub struct LdaReceiver {
    local: Addr,
    remote: Addr,
    t_rtcp: Duration,
    highest: Option<u32>,
    received: u64,
    bytes: u64,
    last: Option<(Time, Time)>,
    /// The first packet of a pair: (seq, arrival).
    pair_first: Option<(u32, Time)>,
    estimates: VecDeque<f64>,
    next_report: Option<Time>,
    reports: u64,
    malformed: u64,
}

impl LdaReceiver {
    /// A receiver on `local` reporting to `remote` every `t_rtcp`.
    pub fn new(local: Addr, remote: Addr, t_rtcp: Duration) -> LdaReceiver {
        LdaReceiver {
            local,
            remote,
            t_rtcp,
            highest: None,
            received: 0,
            bytes: 0,
            last: None,
            pair_first: None,
            estimates: VecDeque::new(),
            next_report: None,
            reports: 0,
            malformed: 0,
        }
    }

    /// The bottleneck estimate reported now, bytes/s of payload (0: none yet).
    pub fn bottleneck_estimate(&self) -> f64 {
        self.estimates.iter().copied().fold(0.0, f64::max)
    }
}

impl Agent for LdaReceiver {
    fn handle_packet(&mut self, now: Time, packet: Packet) {
        let Ok(h) = FragmentHeader::parse(&packet.header) else {
            self.malformed += 1;
            return;
        };
        self.received += 1;
        self.bytes += u64::from(packet.payload_len);
        if self.highest.is_none_or(|hi| h.dgram_seq > hi) {
            self.highest = Some(h.dgram_seq);
            self.last = Some((Time::from_micros(u64::from(h.sent_at_us)), now));
        }
        match self.pair_first {
            Some((first, t)) if h.dgram_seq == first.wrapping_add(1) && first % 2 == 0 => {
                let gap = now.saturating_since(t).as_secs_f64();
                if gap > 0.0 {
                    if self.estimates.len() == PAIR_WINDOW {
                        self.estimates.pop_front();
                    }
                    self.estimates
                        .push_back(f64::from(packet.payload_len) / gap);
                }
                self.pair_first = None;
            }
            _ => self.pair_first = Some((h.dgram_seq, now)),
        }
        if self.next_report.is_none() {
            self.next_report = Some(now + self.t_rtcp);
        }
    }

    fn handle_timeout(&mut self, _now: Time) {}

    fn poll_transmit(&mut self, now: Time) -> Option<Packet> {
        let due = self.next_report.filter(|t| now >= *t)?;
        self.next_report = Some((due + self.t_rtcp).max(now));
        let highest = self.highest?;
        let (sent_at, arrived) = self.last?;
        let expected = u64::from(highest) + 1;
        let lost = expected.saturating_sub(self.received);
        let rr = ReceiverReport {
            highest_seq: highest,
            cumulative_lost: u32::try_from(lost).unwrap_or(u32::MAX),
            fraction_lost: 0,
            jitter_us: 0,
            echo_sent_at: sent_at,
            delay_us: ReceiverReport::delay_field(now.saturating_since(arrived)),
            received_bytes: self.bytes,
            bottleneck_bytes_per_s: adaptnet_core::convert::f64_u64_sat(self.bottleneck_estimate()),
        };
        self.reports += 1;
        let mut p = Packet::new(self.local, self.remote, Proto::Udp, 0);
        p.header.resize(ReceiverReport::LEN, 0);
        let n = rr.emit(&mut p.header).unwrap_or(0);
        p.header.truncate(n);
        Some(p)
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.next_report
    }

    fn delivered_bytes(&self) -> u64 {
        self.bytes
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("datagrams_received", self.received as f64),
            ("reports_sent", self.reports as f64),
            ("malformed", self.malformed as f64),
        ]
    }
}
