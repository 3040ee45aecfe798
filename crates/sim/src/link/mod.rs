//! The link model: one direction of a point-to-point link.
//!
//! A [`Link`] is a sans-IO component — it never reads a clock — so the same model serves the
//! simulator (virtual time) and a real-time emulator. A packet's life on a link:
//!
//! 1. [`Link::enqueue`]: drop-tail admission to the queue (limited in packets or bytes; the
//!    packet being transmitted does not count, as in ns-2's DropTail);
//! 2. transmission at the link's [`Bandwidth`] (fluid for constant and piecewise rates,
//!    1500-byte opportunities for Mahimahi traces), never while the link is in an outage;
//! 3. on leaving the transmitter, the [`LossModel`] may lose it;
//! 4. propagation for the one-way delay, plus the extra delay of a reordering burst if it
//!    departed during one; a packet on the wire when an outage begins is lost.
//!
//! Drive it like the protocol state machines: call [`Link::handle_timeout`] at
//! [`Link::poll_timeout`], then drain [`Link::poll_delivered`], [`Link::poll_dropped`] and (if
//! enabled) [`Link::poll_departed`].

mod bandwidth;
mod loss;

pub use bandwidth::Bandwidth;
pub use loss::LossModel;

use adaptnet_core::Time;
use bandwidth::Opportunities;
use loss::LossState;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
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

/// The transmitter's state.
#[derive(Debug)]
enum Transmitter<P> {
    /// Fluid service: at most one packet being transmitted, with the time its transmission
    /// started and the time it finishes (`None`: the rate is zero forever).
    Fluid {
        current: Option<(P, Time, Option<Time>)>,
    },
    /// Mahimahi service: the next opportunity index and, for a partly sent head packet, the
    /// bytes still to be served and when its transmission started.
    Opportunities {
        opps: Opportunities,
        next: u64,
        head_left: Option<(u64, Time)>,
    },
}

/// One direction of a link. See the module docs.
#[derive(Debug)]
pub struct Link<P> {
    config: LinkConfig,
    rng: ChaCha8Rng,
    loss: LossState,
    queue: VecDeque<P>,
    queue_bytes: u64,
    tx: Transmitter<P>,
    /// Packets propagating as (arrival, departure, packet), in arrival order (a constant
    /// delay keeps FIFO order).
    wire: VecDeque<(Time, Time, P)>,
    /// Packets delayed by a reordering burst, kept sorted by arrival time.
    detour: VecDeque<(Time, Time, P)>,
    dropped: VecDeque<(P, DropReason)>,
    departed: Option<VecDeque<(Time, P)>>,
    /// Index of the next outage whose start has not been processed.
    next_outage: usize,
    stats: LinkStats,
}

impl<P: WireSize + Clone> Link<P> {
    /// A link with its own random stream seeded from `seed`.
    pub fn new(config: LinkConfig, seed: u64) -> Link<P> {
        let tx = match &config.bandwidth {
            Bandwidth::Mahimahi(trace) => Transmitter::Opportunities {
                opps: Opportunities::new(trace),
                next: 0,
                head_left: None,
            },
            _ => Transmitter::Fluid { current: None },
        };
        Link {
            config,
            rng: ChaCha8Rng::seed_from_u64(seed),
            loss: LossState::default(),
            queue: VecDeque::new(),
            queue_bytes: 0,
            tx,
            wire: VecDeque::new(),
            detour: VecDeque::new(),
            dropped: VecDeque::new(),
            departed: None,
            next_outage: 0,
            stats: LinkStats::default(),
        }
    }

    /// Records a copy of every packet as it leaves the transmitter (for packet captures).
    pub fn enable_capture(&mut self) {
        self.departed.get_or_insert_with(VecDeque::new);
    }

    /// The configuration.
    pub fn config(&self) -> &LinkConfig {
        &self.config
    }

    /// Counters.
    pub fn stats(&self) -> &LinkStats {
        &self.stats
    }

    /// Packets waiting in the queue (not counting one being transmitted).
    pub fn queue_packets(&self) -> usize {
        self.queue.len()
    }

    /// Bytes waiting in the queue (not counting one being transmitted).
    pub fn queue_bytes(&self) -> u64 {
        self.queue_bytes
    }

    /// The outage in force at `t`, if any.
    fn outage_at(&self, t: Time) -> Option<&Outage> {
        let idx = self.config.outages.partition_point(|o| o.start <= t);
        self.config.outages[..idx].last().filter(|o| t < o.end())
    }

    /// The link is down at `t`.
    pub fn is_down(&self, t: Time) -> bool {
        self.outage_at(t).is_some()
    }

    /// Offers a packet to the link at `now`. A packet refused by the drop-tail queue is
    /// returned to the caller with [`DropReason::QueueFull`].
    pub fn enqueue(&mut self, now: Time, packet: P) -> Result<(), (P, DropReason)> {
        // Outages that began while the link was idle have had no effect yet; note them so
        // the service below starts after the one in force.
        while let Some(o) = self.config.outages.get(self.next_outage)
            && o.start <= now
        {
            let start = o.start;
            self.begin_outage(start);
        }
        self.stats.offered_packets += 1;
        let size = u64::from(packet.wire_len());
        let idle = self.transmitter_idle();
        let full = match self.config.queue {
            QueueLimit::Packets(n) => self.queue.len() as u64 >= u64::from(n),
            QueueLimit::Bytes(n) => self.queue_bytes + size > n,
        };
        if full && !idle {
            self.stats.dropped_queue += 1;
            return Err((packet, DropReason::QueueFull));
        }
        self.queue.push_back(packet);
        self.queue_bytes += size;
        self.stats.max_queue_packets = self.stats.max_queue_packets.max(self.queue.len() as u64);
        self.stats.max_queue_bytes = self.stats.max_queue_bytes.max(self.queue_bytes);
        if idle {
            self.start_service(now);
        }
        Ok(())
    }

    fn transmitter_idle(&self) -> bool {
        match &self.tx {
            Transmitter::Fluid { current } => current.is_none(),
            Transmitter::Opportunities { .. } => self.queue.is_empty(),
        }
    }

    /// Starts serving the queue at `at` (or when the current outage ends).
    fn start_service(&mut self, at: Time) {
        let at = self.outage_at(at).map_or(at, Outage::end);
        match &mut self.tx {
            Transmitter::Fluid { current } => {
                if current.is_some() {
                    return;
                }
                if let Some(p) = self.queue.pop_front() {
                    let size = u64::from(p.wire_len());
                    self.queue_bytes -= size;
                    let finish = self.config.bandwidth.fluid_finish(at, size);
                    *current = Some((p, at, finish));
                }
            }
            Transmitter::Opportunities { opps, next, .. } => {
                if !self.queue.is_empty() {
                    *next = (*next).max(opps.first_at_or_after(at));
                }
            }
        }
    }

    /// When the link next needs `handle_timeout`.
    pub fn poll_timeout(&self) -> Option<Time> {
        let mut t = self.next_internal_event();
        let arrivals = [self.wire.front(), self.detour.front()];
        for (at, _, _) in arrivals.into_iter().flatten() {
            t = Some(t.map_or(*at, |x| x.min(*at)));
        }
        t
    }

    /// The next transmitter event (departure or opportunity) or outage start that matters.
    fn next_internal_event(&self) -> Option<Time> {
        let tx = match &self.tx {
            Transmitter::Fluid { current } => current.as_ref().and_then(|(_, _, f)| *f),
            Transmitter::Opportunities { opps, next, .. } => {
                (!self.queue.is_empty()).then(|| opps.time(*next))
            }
        };
        // An outage start only matters if something is on the wire or being sent.
        let busy = !self.wire.is_empty()
            || !self.detour.is_empty()
            || matches!(&self.tx, Transmitter::Fluid { current: Some(_) })
            || matches!(
                &self.tx,
                Transmitter::Opportunities {
                    head_left: Some(_),
                    ..
                }
            );
        let outage = self
            .config
            .outages
            .get(self.next_outage)
            .filter(|_| busy)
            .map(|o| o.start);
        match (tx, outage) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Advances the link to `now`: departures, losses, outages and arrivals up to `now`.
    pub fn handle_timeout(&mut self, now: Time) {
        loop {
            // Outage starts that are due, in order, before anything later.
            let outage_due = self
                .config
                .outages
                .get(self.next_outage)
                .map(|o| o.start)
                .filter(|&s| s <= now);
            let tx_due = match &self.tx {
                Transmitter::Fluid { current } => current.as_ref().and_then(|(_, _, f)| *f),
                Transmitter::Opportunities { opps, next, .. } => {
                    (!self.queue.is_empty()).then(|| opps.time(*next))
                }
            }
            .filter(|&t| t <= now);
            match (outage_due, tx_due) {
                (Some(o), Some(t)) if o <= t => self.begin_outage(o),
                (Some(o), None) => self.begin_outage(o),
                (_, Some(t)) => self.transmit_at(t),
                (None, None) => break,
            }
        }
    }

    /// The outage beginning at `start` takes effect: whatever was on the wire or being
    /// transmitted at `start` is lost. Safe to call late: packets that left (or started
    /// transmission) after `start` are untouched.
    fn begin_outage(&mut self, start: Time) {
        self.next_outage += 1;
        let lost_wire = take_in_flight_at(&mut self.wire, start);
        let lost_detour = take_in_flight_at(&mut self.detour, start);
        let mut lost: Vec<P> = lost_wire.into_iter().chain(lost_detour).collect();
        match &mut self.tx {
            Transmitter::Fluid { current } => {
                if current.as_ref().is_some_and(|(_, began, _)| *began < start)
                    && let Some((p, _, _)) = current.take()
                {
                    lost.push(p);
                }
            }
            Transmitter::Opportunities { head_left, .. } => {
                if head_left.is_some_and(|(_, began)| began < start) {
                    *head_left = None;
                    if let Some(p) = self.queue.pop_front() {
                        self.queue_bytes -= u64::from(p.wire_len());
                        lost.push(p);
                    }
                }
            }
        }
        for p in lost {
            self.stats.dropped_outage += 1;
            self.dropped.push_back((p, DropReason::Outage));
        }
        if !self.queue.is_empty() {
            self.start_service(start);
        }
    }

    /// Processes the transmitter event at `t`.
    fn transmit_at(&mut self, t: Time) {
        let down_until = self.outage_at(t).map(Outage::end);
        match &mut self.tx {
            Transmitter::Fluid { current } => {
                if let Some((p, _, _)) = current.take() {
                    self.depart(t, p);
                }
                self.start_service(t);
            }
            Transmitter::Opportunities {
                opps,
                next,
                head_left,
            } => {
                *next += 1;
                if let Some(end) = down_until {
                    // Opportunities during an outage are wasted; skip to the first after it.
                    *next = (*next).max(opps.first_at_or_after(end));
                    return;
                }
                let mut credit = crate::trace::MAHIMAHI_OPPORTUNITY_BYTES;
                let mut departed = Vec::new();
                while credit > 0 {
                    let Some(head) = self.queue.front() else {
                        break;
                    };
                    let (left, began) = head_left.unwrap_or((u64::from(head.wire_len()), t));
                    if left <= credit {
                        credit -= left;
                        *head_left = None;
                        if let Some(p) = self.queue.pop_front() {
                            self.queue_bytes -= u64::from(p.wire_len());
                            departed.push(p);
                        }
                    } else {
                        *head_left = Some((left - credit, began));
                        credit = 0;
                    }
                }
                for p in departed {
                    self.depart(t, p);
                }
            }
        }
    }

    /// A packet leaves the transmitter at `t`: capture, loss, then propagation.
    fn depart(&mut self, t: Time, p: P) {
        self.stats.transmitted_bytes += u64::from(p.wire_len());
        if let Some(cap) = self.departed.as_mut() {
            cap.push_back((t, p.clone()));
        }
        if self.loss.lose(&self.config.loss, &mut self.rng) {
            self.stats.dropped_random += 1;
            self.dropped.push_back((p, DropReason::RandomLoss));
            return;
        }
        let idx = self.config.reorders.partition_point(|r| r.start <= t);
        let extra = self.config.reorders[..idx]
            .last()
            .filter(|r| t < r.start + r.duration)
            .map(|r| r.extra_delay);
        match extra {
            None => self.wire.push_back((t + self.config.delay, t, p)),
            Some(extra) => {
                let at = t + self.config.delay + extra;
                let pos = self.detour.partition_point(|(a, _, _)| *a <= at);
                self.detour.insert(pos, (at, t, p));
            }
        }
    }

    /// The next packet that has arrived at the far end by `now` (call after
    /// `handle_timeout(now)`).
    pub fn poll_delivered(&mut self, now: Time) -> Option<P> {
        let w = self.wire.front().map(|(a, _, _)| *a).filter(|&a| a <= now);
        let d = self
            .detour
            .front()
            .map(|(a, _, _)| *a)
            .filter(|&a| a <= now);
        let queue = match (w, d) {
            (Some(a), Some(b)) if b < a => &mut self.detour,
            (Some(_), _) => &mut self.wire,
            (None, Some(_)) => &mut self.detour,
            (None, None) => return None,
        };
        let (_, _, p) = queue.pop_front()?;
        self.stats.delivered_packets += 1;
        self.stats.delivered_bytes += u64::from(p.wire_len());
        Some(p)
    }

    /// The next packet lost inside the link (random loss or outage).
    pub fn poll_dropped(&mut self) -> Option<(P, DropReason)> {
        self.dropped.pop_front()
    }

    /// The next captured departure, if capture is enabled.
    pub fn poll_departed(&mut self) -> Option<(Time, P)> {
        self.departed.as_mut().and_then(VecDeque::pop_front)
    }
}

/// Removes and returns the packets of a wire queue that were propagating at `t`: departed
/// before `t` and arriving after it.
fn take_in_flight_at<P>(q: &mut VecDeque<(Time, Time, P)>, t: Time) -> Vec<P> {
    let mut lost = Vec::new();
    let mut kept = VecDeque::with_capacity(q.len());
    for (arrival, departure, p) in q.drain(..) {
        if departure < t && arrival > t {
            lost.push(p);
        } else {
            kept.push_back((arrival, departure, p));
        }
    }
    *q = kept;
    lost
}

#[cfg(test)]
mod tests;
