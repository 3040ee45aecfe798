//! The receiver-side CM (papers/003 §2.2.2, Figure 5, receiver half): counts what arrives per
//! flow from each sender host and answers each probe with
//! `<response, thisprobe, lastprobe, nrecd>`:
//!
//! ```text
//! message = <response, thisprobe, lastprobe, nrecd>; send(message);
//! lastprobe = thisprobe; nrecd = 0;
//! ```
//! It also carries the receiver's hints (papers/003 §3.2.1, `[o_1 : r_1, …]`): the client's
//! relative interest in each flow, which the sender's scheduler multiplies into the weights.
//!
//! # Driving a `CmReceiver` (one per receiving host)
//!
//! ```text
//! rx.handle_data(now, from, key, bytes, ce)     // every packet of a probe-fed CM flow
//! rx.handle_packet(now, from, &packet)          // CM probes
//! while let Some(t) = rx.poll_transmit(now) { send t.packet to t.to }
//! ```
//! It has no timers and no events.

use super::manager::CmTransmit;
use super::probe::{CmPacket, FlowReport, MAX_REPORTS, ProbeRepr, ResponseRepr};
use super::{FlowKey, PeerAddr};
use crate::time::Time;
use std::collections::{BTreeMap, VecDeque};

/// Most sender hosts tracked.
pub const MAX_PEERS: usize = 4096;
/// Most flows tracked per sender host.
pub const MAX_FLOWS_PER_PEER: usize = 1024;
/// Most responses waiting in `poll_transmit`'s queue.
pub const MAX_QUEUED: usize = 1024;

#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    bytes: u64,
    packets: u32,
}

#[derive(Clone, Debug, Default)]
struct Peer {
    last_probe: Option<u32>,
    counts: BTreeMap<FlowKey, Counts>,
    ce_packets: u32,
    hints: BTreeMap<FlowKey, u16>,
}

/// Counters of a receiver.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReceiverStats {
    /// Probes answered.
    pub responses_sent: u64,
    /// Probes ignored (older than one already answered, or queue full).
    pub probes_ignored: u64,
    /// Data packets not counted (too many peers or flows).
    pub data_ignored: u64,
}

/// The receiver-side CM of one host.
#[derive(Clone, Debug, Default)]
pub struct CmReceiver {
    peers: BTreeMap<PeerAddr, Peer>,
    out: VecDeque<CmTransmit>,
    stats: ReceiverStats,
}

impl CmReceiver {
    /// A receiver that has seen nothing.
    pub fn new() -> CmReceiver {
        CmReceiver::default()
    }

    fn peer(&mut self, from: PeerAddr) -> Option<&mut Peer> {
        if !self.peers.contains_key(&from) && self.peers.len() >= MAX_PEERS {
            return None;
        }
        Some(self.peers.entry(from).or_default())
    }

    /// A data packet of `bytes` from flow `key` of host `from` arrived; `ce` if it carried an
    /// ECN congestion-experienced mark.
    pub fn handle_data(&mut self, _now: Time, from: PeerAddr, key: FlowKey, bytes: u64, ce: bool) {
        let Some(peer) = self.peer(from) else {
            self.stats.data_ignored += 1;
            return;
        };
        if !peer.counts.contains_key(&key) && peer.counts.len() >= MAX_FLOWS_PER_PEER {
            self.stats.data_ignored += 1;
            return;
        }
        let c = peer.counts.entry(key).or_default();
        c.bytes = c.bytes.saturating_add(bytes);
        c.packets = c.packets.saturating_add(1);
        if ce {
            peer.ce_packets = peer.ce_packets.saturating_add(1);
        }
    }

    /// Sets the client's relative interest in flow `key` from `from` (0 clears it). Sent with
    /// the next responses.
    pub fn set_hint(&mut self, from: PeerAddr, key: FlowKey, hint: u16) {
        let Some(peer) = self.peer(from) else {
            return;
        };
        if hint == 0 {
            peer.hints.remove(&key);
        } else if peer.hints.len() < MAX_FLOWS_PER_PEER || peer.hints.contains_key(&key) {
            peer.hints.insert(key, hint);
        }
    }

    /// Handles a CM control packet; responses are for the sender's CM and are ignored.
    pub fn handle_packet(&mut self, now: Time, from: PeerAddr, packet: &CmPacket) {
        if let CmPacket::Probe(p) = packet {
            self.handle_probe(now, from, p);
        }
    }

    /// Answers probe `probe` from `from`.
    pub fn handle_probe(&mut self, _now: Time, from: PeerAddr, probe: &ProbeRepr) {
        if self.out.len() >= MAX_QUEUED {
            self.stats.probes_ignored += 1;
            return;
        }
        let Some(peer) = self.peer(from) else {
            self.stats.probes_ignored += 1;
            return;
        };
        // A probe older than one already answered (reordered or duplicated): answering it
        // would report an interval that does not exist.
        if peer.last_probe.is_some_and(|l| probe.seq <= l) {
            self.stats.probes_ignored += 1;
            return;
        }
        let counts = std::mem::take(&mut peer.counts);
        let mut reports: Vec<FlowReport> = Vec::new();
        let mut truncated = false;
        for (key, c) in &counts {
            if reports.len() == MAX_REPORTS {
                truncated = true;
                break;
            }
            reports.push(FlowReport {
                key: *key,
                recd_bytes: c.bytes,
                recd_packets: c.packets,
                hint: peer.hints.get(key).copied().unwrap_or(0),
            });
        }
        // Hints for flows that sent nothing in this interval still travel, space permitting.
        for (key, hint) in &peer.hints {
            if reports.len() == MAX_REPORTS {
                break;
            }
            if !counts.contains_key(key) {
                reports.push(FlowReport {
                    key: *key,
                    recd_bytes: 0,
                    recd_packets: 0,
                    hint: *hint,
                });
            }
        }
        let resp = ResponseRepr {
            this_probe: probe.seq,
            last_probe: peer.last_probe,
            ce_packets: std::mem::take(&mut peer.ce_packets),
            truncated,
            reports,
        };
        peer.last_probe = Some(probe.seq);
        self.stats.responses_sent += 1;
        self.out.push_back(CmTransmit {
            to: from,
            packet: CmPacket::Response(resp),
        });
    }

    /// The next response to send, if any.
    pub fn poll_transmit(&mut self, _now: Time) -> Option<CmTransmit> {
        self.out.pop_front()
    }

    /// Counters.
    pub fn stats(&self) -> &ReceiverStats {
        &self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_response_reports_interval_since_last_probe() {
        let mut rx = CmReceiver::new();
        let a = PeerAddr(1);
        rx.handle_data(Time::ZERO, a, FlowKey(7), 1000, false);
        rx.handle_data(Time::ZERO, a, FlowKey(7), 1000, true);
        rx.handle_probe(Time::ZERO, a, &ProbeRepr { seq: 3 });
        let Some(CmTransmit {
            to,
            packet: CmPacket::Response(r),
        }) = rx.poll_transmit(Time::ZERO)
        else {
            panic!("expected a response");
        };
        assert_eq!(to, a);
        assert_eq!((r.this_probe, r.last_probe, r.ce_packets), (3, None, 1));
        assert_eq!(r.reports[0].recd_bytes, 2000);
        rx.handle_data(Time::ZERO, a, FlowKey(7), 500, false);
        rx.handle_probe(Time::ZERO, a, &ProbeRepr { seq: 5 });
        let Some(CmTransmit {
            packet: CmPacket::Response(r),
            ..
        }) = rx.poll_transmit(Time::ZERO)
        else {
            panic!("expected a response");
        };
        assert_eq!((r.this_probe, r.last_probe), (5, Some(3)));
        assert_eq!(r.reports[0].recd_bytes, 500);
        // A reordered old probe is not answered.
        rx.handle_probe(Time::ZERO, a, &ProbeRepr { seq: 4 });
        assert!(rx.poll_transmit(Time::ZERO).is_none());
    }
}
