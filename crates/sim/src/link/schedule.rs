//! The transmitter's schedule: when an accepted packet leaves the queue and when it finishes
//! transmission, computed at enqueue time.
//!
//! Everything that decides a packet's fate on a link is known when it is accepted: the queue
//! is FIFO, the capacity (constant, piecewise trace or Mahimahi opportunities) and the outages
//! are scheduled in advance. Planning each packet once, instead of simulating the transmitter
//! event by event, removes the departure event from every packet's path; the resulting
//! timing is the same as an event-by-event transmitter's.

use super::bandwidth::{Bandwidth, Opportunities};
use super::{Outage, outage_at};
use crate::trace::MAHIMAHI_OPPORTUNITY_BYTES;
use adaptnet_core::Time;

/// What happens to a packet in the transmitter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fate {
    /// It leaves the transmitter at this time.
    Departs(Time),
    /// An outage beginning at this time kills it mid-transmission.
    KilledInService(Time),
    /// The rate is zero forever: it never leaves.
    Never,
}

/// A packet's plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Plan {
    /// When it stops counting as "waiting in the queue" (`Time::MAX`: never). For fluid
    /// links that is when the transmitter takes it; for opportunity links (as in Mahimahi)
    /// the head counts as queued until fully sent.
    pub leaves_queue: Time,
    /// Its fate.
    pub fate: Fate,
}

/// The transmitter state carried from one packet to the next.
#[derive(Clone, Debug)]
pub(super) enum Transmitter {
    /// Fluid service: free from this time (`None`: stalled forever by a zero rate).
    Fluid { free_at: Option<Time> },
    /// Mahimahi opportunities: where the previous packet completed (opportunity index and
    /// the credit left in it).
    Opportunities {
        opps: Opportunities,
        cursor: Option<(u64, u64)>,
    },
}

impl Transmitter {
    pub(super) fn new(bandwidth: &Bandwidth) -> Transmitter {
        match bandwidth {
            Bandwidth::Mahimahi(trace) => Transmitter::Opportunities {
                opps: Opportunities::new(trace),
                cursor: None,
            },
            _ => Transmitter::Fluid {
                free_at: Some(Time::ZERO),
            },
        }
    }

    /// The transmitter has nothing in service at `now` (so a new packet bypasses the queue
    /// limit, as with a drop-tail queue in front of an idle line). `queued` is the number of
    /// packets counted as waiting at `now`.
    pub(super) fn idle(&self, now: Time, queued: u64) -> bool {
        match self {
            Transmitter::Fluid { free_at } => free_at.is_some_and(|f| f <= now),
            Transmitter::Opportunities { .. } => queued == 0,
        }
    }

    /// Plans a packet of `size` bytes accepted at `now`.
    pub(super) fn plan(
        &mut self,
        now: Time,
        size: u64,
        bandwidth: &Bandwidth,
        outages: &[Outage],
    ) -> Plan {
        match self {
            Transmitter::Fluid { free_at } => plan_fluid(free_at, now, size, bandwidth, outages),
            Transmitter::Opportunities { opps, cursor } => {
                plan_opportunities(opps, cursor, now, size, outages)
            }
        }
    }
}

fn plan_fluid(
    free_at: &mut Option<Time>,
    now: Time,
    size: u64,
    bandwidth: &Bandwidth,
    outages: &[Outage],
) -> Plan {
    let Some(free) = *free_at else {
        return Plan {
            leaves_queue: Time::MAX,
            fate: Fate::Never,
        };
    };
    let taken = now.max(free);
    // Transmission cannot start during an outage (adjacent outages chain).
    let mut start = taken;
    while let Some(o) = outage_at(outages, start) {
        start = o.start + o.duration;
    }
    let Some(finish) = bandwidth.fluid_finish(start, size) else {
        *free_at = None;
        return Plan {
            leaves_queue: taken,
            fate: Fate::Never,
        };
    };
    // An outage starting after the transmission began, up to its last bit, kills it.
    let next = outages.partition_point(|o| o.start <= start);
    if let Some(o) = outages.get(next).filter(|o| o.start <= finish) {
        *free_at = Some(o.start);
        return Plan {
            leaves_queue: taken,
            fate: Fate::KilledInService(o.start),
        };
    }
    *free_at = Some(finish);
    Plan {
        leaves_queue: taken,
        fate: Fate::Departs(finish),
    }
}

fn plan_opportunities(
    opps: &Opportunities,
    cursor: &mut Option<(u64, u64)>,
    now: Time,
    size: u64,
    outages: &[Outage],
) -> Plan {
    // Leftover credit in the opportunity where the previous packet completed can carry this
    // one only if that opportunity comes after this packet arrived; otherwise it was unused
    // and is lost, as in Mahimahi.
    let (mut k, mut credit) = match *cursor {
        Some((k, left)) if left > 0 && opps.time(k) >= now => (k, left),
        Some((k, _)) => (
            (k + 1).max(opps.first_at_or_after(now)),
            MAHIMAHI_OPPORTUNITY_BYTES,
        ),
        None => (opps.first_at_or_after(now), MAHIMAHI_OPPORTUNITY_BYTES),
    };
    let mut remaining = size;
    loop {
        let t = opps.time(k);
        if let Some(o) = outage_at(outages, t) {
            // Opportunities during an outage are wasted.
            k = (k + 1).max(opps.first_at_or_after(o.start + o.duration));
            credit = MAHIMAHI_OPPORTUNITY_BYTES;
            continue;
        }
        if remaining <= credit {
            *cursor = Some((k, credit - remaining));
            return Plan {
                leaves_queue: t,
                fate: Fate::Departs(t),
            };
        }
        remaining -= credit;
        k += 1;
        credit = MAHIMAHI_OPPORTUNITY_BYTES;
        // Partly sent: an outage beginning before the next opportunity loses it.
        let next = outages.partition_point(|o| o.start <= t);
        if let Some(o) = outages.get(next).filter(|o| o.start <= opps.time(k)) {
            *cursor = Some((k.saturating_sub(1), 0));
            return Plan {
                leaves_queue: o.start,
                fate: Fate::KilledInService(o.start),
            };
        }
    }
}
