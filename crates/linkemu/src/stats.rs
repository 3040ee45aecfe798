//! What the emulator reports: a line per second while it runs, and a summary at the end.

use crate::lateness::LatenessSummary;
use adaptnet_sim::link::LinkStats;
use serde::Serialize;

/// One second of one direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct DirectionSecond {
    /// Packets delivered during the second.
    pub delivered_packets: u64,
    /// Bytes delivered during the second (IP packets).
    pub delivered_bytes: u64,
    /// `delivered_bytes` as a rate, Mbit/s.
    pub delivered_mbps: f64,
    /// Packets waiting in the queue at the end of the second.
    pub queue_packets: u64,
    /// Bytes waiting in the queue at the end of the second.
    pub queue_bytes: u64,
    /// Drops by the drop-tail queue during the second.
    pub dropped_queue: u64,
    /// Drops by the loss model.
    pub dropped_random: u64,
    /// Drops by outages.
    pub dropped_outage: u64,
    /// Drops because the emulator held its limit of packets in flight.
    pub dropped_overload: u64,
    /// Lateness of the packets delivered during the second.
    pub lateness: LatenessSummary,
}

/// One second of both directions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct SecondStats {
    /// Seconds since the link came up, at the end of this second.
    pub t_s: u64,
    /// Emulated side → far side.
    pub uplink: DirectionSecond,
    /// Far side → emulated side.
    pub downlink: DirectionSecond,
}

/// The whole run of one direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct DirectionReport {
    /// The link model's counters.
    pub link: LinkStats,
    /// Packets refused because `max_in_flight_packets` were already on the link.
    pub dropped_overload: u64,
    /// Packets the far side's device would not take.
    pub write_errors: u64,
    /// Packets the kernel dropped before the emulator could read them (the ingress device's
    /// queue was full): the emulator fell behind. Not seen by the model.
    pub ingress_dropped: u64,
    /// Super-packets (with offloads) that could not be split into packets, dropped unseen
    /// by the model.
    pub unsplittable: u64,
    /// `read(2)`s that brought packets: one per packet without offloads, one per GSO
    /// super-packet with them (`link.offered_packets / reads` packets per read).
    pub reads: u64,
    /// How late packets were handed over.
    pub lateness: LatenessSummary,
}

/// The whole run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LinkReport {
    /// Seconds the link was up.
    pub duration_s: f64,
    /// Emulated side → far side.
    pub uplink: DirectionReport,
    /// Far side → emulated side.
    pub downlink: DirectionReport,
    /// Per-second reports dropped because nobody read them (the backlog is bounded).
    pub stats_dropped: u64,
    /// Whether the emulator thread ran with real-time (SCHED_FIFO) priority.
    pub realtime: bool,
    /// Whether both devices ran with offloads (GSO super-packets read and split, GRO
    /// batches written).
    pub offload: bool,
}
