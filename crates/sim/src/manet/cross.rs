//! Bursty cross traffic for the shared queue: dynamic congestion episodes (papers/004 §3 runs
//! "competing UDP CBR flows" over intervals of the run; its ns-2 queues come and go with
//! 802.11 contention, so congestion is a sequence of build-ups and drains, not a queue pinned
//! full).
//!
//! An [`OnOffSender`] alternates *on* and *off* periods of exponential length (means
//! `mean_on_s`, `mean_off_s`); while on, its datagrams leave as a Poisson process of rate
//! `peak_bits_per_s` (exponential gaps), so its mean load is
//! `peak × mean_on / (mean_on + mean_off)`. Each on-period builds a queue that the next
//! off-period drains: the delay *trend* that IDD measures (a queue that sits full has a
//! constant delay, and IDD cannot see it). With a peak above the hop's share left by TCP, an
//! on-period overflows the queue; with a mean load near the hop's capacity, the TCP flow's own
//! window growth overflows it too.
//!
//! The seeded random stream is the agent's own (derived from the world's seed and the flow's
//! index), so the same seed gives the same bursts whichever TCP shares the path.

use crate::agent::Agent;
use crate::agents::cbr::cbr_packet;
use crate::packet::{Addr, Packet};
use adaptnet_core::Time;
use adaptnet_core::cbr::CbrHeader;
use rand::RngExt;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::time::Duration;

/// One on/off Poisson cross-traffic source (see the module docs). Times are seconds from the
/// start of the run.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CrossTraffic {
    /// First possible on-period, s (the source starts in an off-period).
    pub start_s: f64,
    /// End of the source, s.
    pub stop_s: f64,
    /// Datagram rate while on, bit/s of UDP payload (Poisson arrivals).
    pub peak_bits_per_s: f64,
    /// Mean on-period, s (exponential).
    pub mean_on_s: f64,
    /// Mean off-period, s (exponential).
    pub mean_off_s: f64,
}

impl CrossTraffic {
    /// The long-run mean payload rate, bit/s.
    pub fn mean_bits_per_s(&self) -> f64 {
        self.peak_bits_per_s * self.mean_on_s / (self.mean_on_s + self.mean_off_s)
    }
}

/// Exponential with `mean_s` seconds (capped at 1e6 s), from a uniform draw.
fn exp_s(rng: &mut ChaCha8Rng, mean_s: f64) -> Duration {
    let u: f64 = rng.random();
    // 1 − u is in (0, 1], so the log is finite.
    Duration::from_secs_f64((-(1.0 - u).ln() * mean_s).clamp(0.0, 1e6))
}

/// The on/off Poisson source agent.
pub struct OnOffSender {
    local: Addr,
    remote: Addr,
    params: CrossTraffic,
    datagram_bytes: u32,
    rng: ChaCha8Rng,
    running: bool,
    on: bool,
    /// When the current period ends.
    switch_at: Time,
    /// The next datagram while on.
    next_at: Option<Time>,
    seq: u32,
    on_periods: u64,
}

impl OnOffSender {
    /// A source of `datagram_bytes`-byte payloads with its own random stream from `seed`.
    pub fn new(
        local: Addr,
        remote: Addr,
        params: CrossTraffic,
        datagram_bytes: u32,
        seed: u64,
    ) -> OnOffSender {
        OnOffSender {
            local,
            remote,
            params,
            datagram_bytes: datagram_bytes.max(1),
            rng: ChaCha8Rng::seed_from_u64(seed),
            running: false,
            on: false,
            switch_at: Time::ZERO,
            next_at: None,
            seq: 0,
            on_periods: 0,
        }
    }

    /// Mean gap between datagrams while on.
    fn mean_gap_s(&self) -> f64 {
        f64::from(self.datagram_bytes) * 8.0 / self.params.peak_bits_per_s.max(1e-9)
    }

    /// Moves through the periods that ended by `now`.
    fn advance(&mut self, now: Time) {
        // Bounded: every period lasts at least 1 µs, and a call only crosses the periods
        // between two wake-ups.
        while self.running && self.switch_at <= now {
            self.on = !self.on;
            let mean = if self.on {
                self.on_periods += 1;
                self.params.mean_on_s
            } else {
                self.params.mean_off_s
            };
            let start = self.switch_at;
            self.switch_at = start + exp_s(&mut self.rng, mean).max(Duration::from_micros(1));
            self.next_at = if self.on {
                let gap = self.mean_gap_s();
                Some(start + exp_s(&mut self.rng, gap))
            } else {
                None
            };
        }
    }
}

impl Agent for OnOffSender {
    fn start(&mut self, now: Time) {
        self.running = true;
        self.on = false;
        let mean_off = self.params.mean_off_s;
        self.switch_at = now + exp_s(&mut self.rng, mean_off);
    }

    fn stop(&mut self, _now: Time) {
        self.running = false;
        self.next_at = None;
    }

    fn handle_packet(&mut self, _now: Time, _packet: Packet) {}

    fn handle_timeout(&mut self, now: Time) {
        self.advance(now);
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Packet> {
        self.advance(now);
        let at = self.next_at.filter(|&t| t <= now && self.on)?;
        let header = CbrHeader {
            seq: self.seq,
            sent_at: at,
        };
        self.seq = self.seq.wrapping_add(1);
        let gap = self.mean_gap_s();
        let next = at + exp_s(&mut self.rng, gap);
        self.next_at = (next < self.switch_at).then_some(next);
        let header_len = u32::try_from(CbrHeader::LEN).unwrap_or(u32::MAX);
        let payload = self.datagram_bytes.saturating_sub(header_len);
        cbr_packet(self.local, self.remote, &header, payload)
    }

    fn poll_timeout(&self) -> Option<Time> {
        if !self.running {
            return None;
        }
        Some(
            self.next_at
                .map_or(self.switch_at, |t| t.min(self.switch_at)),
        )
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("datagrams_sent", f64::from(self.seq)),
            ("on_periods", self.on_periods as f64),
        ]
    }
}
