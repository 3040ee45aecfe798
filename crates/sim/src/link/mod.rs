//! The link model: one direction of a point-to-point link.
//!
//! A [`Link`] is a sans-IO component — it never reads a clock — so the same model serves the
//! simulator (virtual time) and the real-time emulator of `adaptnet link` (the
//! `adaptnet-linkemu` crate, which passes in the time since it started and carries real IP
//! packets). A packet's life on a link:
//!
//! 1. [`Link::enqueue`]: drop-tail admission to the queue (limited in packets or bytes; the
//!    packet being transmitted does not count, as in ns-2's DropTail — for Mahimahi links the
//!    partly sent head does, as in Mahimahi);
//! 2. transmission at the link's [`Bandwidth`] (fluid for constant and piecewise rates,
//!    1500-byte opportunities for Mahimahi traces), never while the link is in an outage; an
//!    outage beginning mid-transmission loses the packet;
//! 3. on leaving the transmitter, the [`LossModel`] may lose it;
//! 4. propagation for the one-way delay, plus the extra delay of a reordering burst if it
//!    departed during one; a packet on the wire when an outage begins is lost.
//!
//! Because the queue is FIFO and capacity and outages are scheduled, a packet's whole fate is
//! planned when it is accepted (`schedule.rs`); the link then only has to hand packets over
//! when they arrive. Drive it like the protocol state machines: call [`Link::handle_timeout`]
//! at [`Link::poll_timeout`], then drain [`Link::poll_delivered`], [`Link::poll_dropped`] and
//! (if enabled) [`Link::poll_departed`]. Occupancy queries take the time they are asked at.

mod bandwidth;
mod loss;
mod schedule;

pub use bandwidth::Bandwidth;
pub use loss::LossModel;

use adaptnet_core::Time;
use loss::LossState;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use schedule::{Fate, Transmitter};
use std::collections::VecDeque;
use std::time::Duration;

/// Anything a link can carry: it only needs a size.
pub trait WireSize {
    /// Bytes the packet occupies on the link (network-layer size).
    fn wire_len(&self) -> u32;
}

/// The queue's capacity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueLimit {
    /// At most this many packets waiting.
    Packets(u32),
    /// At most this many bytes waiting.
    Bytes(u64),
}

/// A scheduled period during which the link is down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outage {
    /// When the link goes down.
    pub start: Time,
    /// How long it stays down.
    pub duration: Duration,
}

impl Outage {
    fn end(&self) -> Time {
        self.start + self.duration
    }
}

/// The outage in force at `t`, if any (`outages` sorted and non-overlapping).
fn outage_at(outages: &[Outage], t: Time) -> Option<&Outage> {
    let idx = outages.partition_point(|o| o.start <= t);
    idx.checked_sub(1)
        .and_then(|i| outages.get(i))
        .filter(|o| t < o.end())
}

/// A scheduled reordering burst: packets leaving the transmitter in
/// `[start, start + duration)` take `extra_delay` longer to arrive, so later packets overtake
/// them (a path change that briefly lengthens the route).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reorder {
    /// Start of the burst.
    pub start: Time,
    /// Length of the burst.
    pub duration: Duration,
    /// Extra one-way delay for packets departing during the burst.
    pub extra_delay: Duration,
}

/// Configuration of one link direction.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkConfig {
    /// Capacity model.
    pub bandwidth: Bandwidth,
    /// One-way propagation delay.
    pub delay: Duration,
    /// Drop-tail queue capacity.
    pub queue: QueueLimit,
    /// Random loss.
    pub loss: LossModel,
    /// Outages, sorted by start and not overlapping.
    pub outages: Vec<Outage>,
    /// Reordering bursts, sorted by start and not overlapping.
    pub reorders: Vec<Reorder>,
}

impl LinkConfig {
    /// A loss-free link with a constant rate, a delay and a packet-limited queue.
    pub fn constant(rate_bits_per_s: f64, delay: Duration, queue_packets: u32) -> LinkConfig {
        LinkConfig {
            bandwidth: Bandwidth::bits_per_s(rate_bits_per_s),
            delay,
            queue: QueueLimit::Packets(queue_packets),
            loss: LossModel::None,
            outages: Vec::new(),
            reorders: Vec::new(),
        }
    }
}

/// Why a link discarded a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum DropReason {
    /// The drop-tail queue was full.
    QueueFull,
    /// The loss model lost it.
    RandomLoss,
    /// It was being transmitted or propagating when the link went down.
    Outage,
}

/// Counters of one link direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LinkStats {
    /// Packets offered to the link.
    pub offered_packets: u64,
    /// Bytes that left the transmitter (including ones then lost on the wire).
    pub transmitted_bytes: u64,
    /// Packets delivered to the far end.
    pub delivered_packets: u64,
    /// Bytes delivered to the far end.
    pub delivered_bytes: u64,
    /// Drops because the queue was full.
    pub dropped_queue: u64,
    /// Drops by the loss model.
    pub dropped_random: u64,
    /// Drops by outages.
    pub dropped_outage: u64,
    /// Largest number of packets ever waiting.
    pub max_queue_packets: u64,
    /// Largest number of bytes ever waiting.
    pub max_queue_bytes: u64,
}

/// A running count of events at non-decreasing times, answering "how many (and how many
/// bytes) by time t?" for any t not before the last pruning.
#[derive(Clone, Debug, Default)]
struct Tally {
    /// Events not yet pruned: (time, cumulative count, cumulative bytes) after each.
    pending: VecDeque<(Time, u64, u64)>,
    /// Totals of the pruned events.
    pruned: (u64, u64),
    /// Totals of all events.
    total: (u64, u64),
}

impl Tally {
    fn push(&mut self, at: Time, bytes: u64) {
        self.total = (self.total.0 + 1, self.total.1 + bytes);
        self.pending.push_back((at, self.total.0, self.total.1));
    }

    /// (count, bytes) of events at or before `t`.
    fn by(&self, t: Time) -> (u64, u64) {
        // Fast path: everything pending is later (the usual case right after a prune).
        if self.pending.front().is_none_or(|e| e.0 > t) {
            return self.pruned;
        }
        let idx = self.pending.partition_point(|e| e.0 <= t);
        if idx == 0 {
            self.pruned
        } else {
            self.pending
                .get(idx - 1)
                .map_or(self.pruned, |e| (e.1, e.2))
        }
    }

    /// Forgets the detail of events at or before `t`.
    fn prune(&mut self, t: Time) {
        while let Some(&(at, c, b)) = self.pending.front() {
            if at > t {
                break;
            }
            self.pruned = (c, b);
            self.pending.pop_front();
        }
    }
}

/// One direction of a link. See the module docs.
#[derive(Debug)]
pub struct Link<P> {
    config: LinkConfig,
    rng: ChaCha8Rng,
    loss: LossState,
    tx: Transmitter,
    /// Packets and bytes accepted into the queue, ever.
    accepted: (u64, u64),
    /// Packets that stopped counting as queued.
    left_queue: Tally,
    /// Packets that left the transmitter.
    departures: Tally,
    /// Packets propagating, by arrival time (a constant delay keeps FIFO order).
    wire: VecDeque<(Time, P)>,
    /// Packets delayed by a reordering burst, kept sorted by arrival time.
    detour: VecDeque<(Time, P)>,
    /// Losses still to be reported, sorted by the time they happen.
    losses: VecDeque<(Time, P, DropReason)>,
    /// Losses that have happened, to be drained.
    dropped: VecDeque<(P, DropReason)>,
    /// Captured departures (if enabled), in departure order.
    captures: Option<VecDeque<(Time, P)>>,
    /// Packets a zero-rate-forever link will never send.
    stuck: Vec<P>,
    /// Radio blackouts (see [`Link::set_blackouts`]), sorted and not overlapping.
    blackouts: Vec<Outage>,
    /// The latest time the link was advanced to.
    now: Time,
    stats: LinkStats,
}

impl<P: WireSize + Clone> Link<P> {
    /// A link with its own random stream seeded from `seed`.
    pub fn new(config: LinkConfig, seed: u64) -> Link<P> {
        Link {
            tx: Transmitter::new(&config.bandwidth),
            config,
            rng: ChaCha8Rng::seed_from_u64(seed),
            loss: LossState::default(),
            accepted: (0, 0),
            left_queue: Tally::default(),
            departures: Tally::default(),
            wire: VecDeque::new(),
            detour: VecDeque::new(),
            losses: VecDeque::new(),
            dropped: VecDeque::new(),
            captures: None,
            stuck: Vec::new(),
            blackouts: Vec::new(),
            now: Time::ZERO,
            stats: LinkStats::default(),
        }
    }

    /// Sets radio blackouts (sorted, not overlapping): a packet leaving the transmitter during
    /// one is lost, as a radio out of range sends into the void — unlike an outage, which stops
    /// the transmitter and keeps the queue. Used for handoffs (papers/001 §5).
    pub fn set_blackouts(&mut self, blackouts: Vec<Outage>) {
        self.blackouts = blackouts;
    }

    /// Records a copy of every packet as it leaves the transmitter (for packet captures).
    pub fn enable_capture(&mut self) {
        self.captures.get_or_insert_with(VecDeque::new);
    }

    /// The configuration.
    pub fn config(&self) -> &LinkConfig {
        &self.config
    }

    /// Counters, as of the last `handle_timeout` or `enqueue`.
    pub fn stats(&self) -> &LinkStats {
        &self.stats
    }

    /// Packets waiting in the queue at `now` (not counting one being transmitted).
    pub fn queue_packets(&self, now: Time) -> u64 {
        self.accepted.0 - self.left_queue.by(now).0
    }

    /// Bytes waiting in the queue at `now`.
    pub fn queue_bytes(&self, now: Time) -> u64 {
        self.accepted.1 - self.left_queue.by(now).1
    }

    /// Bytes that have left the transmitter by `now` (including ones lost on the wire).
    pub fn transmitted_bytes(&self, now: Time) -> u64 {
        self.departures.by(now).1
    }

    /// The link is down at `t`.
    pub fn is_down(&self, t: Time) -> bool {
        outage_at(&self.config.outages, t).is_some()
    }

    /// Offers a packet to the link at `now`. A packet refused by the drop-tail queue is
    /// returned to the caller with [`DropReason::QueueFull`].
    pub fn enqueue(&mut self, now: Time, packet: P) -> Result<(), (P, DropReason)> {
        self.advance(now);
        self.stats.offered_packets += 1;
        let size = u64::from(packet.wire_len());
        let queued = self.queue_packets(now);
        let full = match self.config.queue {
            QueueLimit::Packets(n) => queued >= u64::from(n),
            QueueLimit::Bytes(n) => self.queue_bytes(now) + size > n,
        };
        if full && !self.tx.idle(now, queued) {
            self.stats.dropped_queue += 1;
            return Err((packet, DropReason::QueueFull));
        }
        let plan = self
            .tx
            .plan(now, size, &self.config.bandwidth, &self.config.outages);
        self.accepted = (self.accepted.0 + 1, self.accepted.1 + size);
        self.left_queue.push(plan.leaves_queue, size);
        self.stats.max_queue_packets = self.stats.max_queue_packets.max(self.queue_packets(now));
        self.stats.max_queue_bytes = self.stats.max_queue_bytes.max(self.queue_bytes(now));
        match plan.fate {
            Fate::Never => self.stuck.push(packet),
            Fate::KilledInService(at) => self.lose(at, packet, DropReason::Outage),
            Fate::Departs(at) => self.depart(at, packet),
        }
        Ok(())
    }

    /// A packet leaves the transmitter at `t`: capture, loss, then propagation.
    fn depart(&mut self, t: Time, p: P) {
        self.departures.push(t, u64::from(p.wire_len()));
        if let Some(cap) = self.captures.as_mut() {
            cap.push_back((t, p.clone()));
        }
        if outage_at(&self.blackouts, t).is_some() {
            self.lose(t, p, DropReason::Outage);
            return;
        }
        if self.loss.lose(&self.config.loss, &mut self.rng) {
            self.lose(t, p, DropReason::RandomLoss);
            return;
        }
        let idx = self.config.reorders.partition_point(|r| r.start <= t);
        let extra = idx
            .checked_sub(1)
            .and_then(|i| self.config.reorders.get(i))
            .filter(|r| t < r.start + r.duration)
            .map(|r| r.extra_delay);
        let arrival = t + self.config.delay + extra.unwrap_or(Duration::ZERO);
        // On the wire when an outage begins: lost.
        let next = self.config.outages.partition_point(|o| o.start <= t);
        if let Some(o) = self.config.outages.get(next).filter(|o| o.start < arrival) {
            let at = o.start;
            self.lose(at, p, DropReason::Outage);
            return;
        }
        match extra {
            None => self.wire.push_back((arrival, p)),
            Some(_) => {
                let pos = self.detour.partition_point(|(a, _)| *a <= arrival);
                self.detour.insert(pos, (arrival, p));
            }
        }
    }

    fn lose(&mut self, at: Time, p: P, why: DropReason) {
        let pos = self.losses.partition_point(|(t, _, _)| *t <= at);
        self.losses.insert(pos, (at, p, why));
    }

    /// When the link next needs `handle_timeout`: the next arrival or loss.
    pub fn poll_timeout(&self) -> Option<Time> {
        let mut next = self.wire.front().map(|e| e.0);
        for t in [
            self.detour.front().map(|e| e.0),
            self.losses.front().map(|e| e.0),
        ]
        .into_iter()
        .flatten()
        {
            next = Some(next.map_or(t, |n| n.min(t)));
        }
        next
    }

    /// Advances the link to `now`: losses up to `now` become reportable, counters update.
    pub fn handle_timeout(&mut self, now: Time) {
        self.advance(now);
    }

    fn advance(&mut self, now: Time) {
        self.now = self.now.max(now);
        while let Some((t, _, _)) = self.losses.front() {
            if *t > self.now {
                break;
            }
            if let Some((_, p, why)) = self.losses.pop_front() {
                match why {
                    DropReason::RandomLoss => self.stats.dropped_random += 1,
                    DropReason::Outage => self.stats.dropped_outage += 1,
                    DropReason::QueueFull => self.stats.dropped_queue += 1,
                }
                self.dropped.push_back((p, why));
            }
        }
        self.stats.transmitted_bytes = self.transmitted_bytes(self.now);
        self.left_queue.prune(self.now);
        self.departures.prune(self.now);
    }

    /// The next packet that has arrived at the far end by `now` (call after
    /// `handle_timeout(now)`).
    pub fn poll_delivered(&mut self, now: Time) -> Option<P> {
        self.poll_arrival(now).map(|(_, p)| p)
    }

    /// Like [`Link::poll_delivered`], with the time the model says the packet arrived (at or
    /// before `now`). A real-time driver compares it with the clock to measure its lateness.
    pub fn poll_arrival(&mut self, now: Time) -> Option<(Time, P)> {
        let w = self.wire.front().map(|(a, _)| *a).filter(|&a| a <= now);
        let d = self.detour.front().map(|(a, _)| *a).filter(|&a| a <= now);
        let queue = match (w, d) {
            (Some(a), Some(b)) if b < a => &mut self.detour,
            (Some(_), _) => &mut self.wire,
            (None, Some(_)) => &mut self.detour,
            (None, None) => return None,
        };
        let (at, p) = queue.pop_front()?;
        self.stats.delivered_packets += 1;
        self.stats.delivered_bytes += u64::from(p.wire_len());
        Some((at, p))
    }

    /// The next packet lost inside the link (random loss or outage) by the last
    /// `handle_timeout`.
    pub fn poll_dropped(&mut self) -> Option<(P, DropReason)> {
        self.dropped.pop_front()
    }

    /// The next captured departure up to the last `handle_timeout`, if capture is enabled.
    pub fn poll_departed(&mut self) -> Option<(Time, P)> {
        let cap = self.captures.as_mut()?;
        if cap.front().is_some_and(|(t, _)| *t <= self.now) {
            cap.pop_front()
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests;
