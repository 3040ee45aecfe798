//! The CM's packet, timer and event surface: probe responses in, probes out,
//! `poll_timeout`/`handle_timeout`, `poll_event`.

use super::{CmTransmit, CongestionManager, TimerKey};
use crate::cm::probe::{CmPacket, ResponseRepr};
use crate::cm::{CmEvent, Feedback, FlowKey, LossMode, MacroflowId, PeerAddr};
use crate::time::Time;
use std::collections::BTreeMap;

/// Most probe packets waiting in `poll_transmit`'s queue.
const MAX_TRANSMITS: usize = 1024;

impl CongestionManager {
    // ----- probes -----

    /// Handles a CM control packet from `from`. Probes are for a [`crate::cm::receiver::CmReceiver`]
    /// and are ignored here.
    pub fn handle_packet(&mut self, now: Time, from: PeerAddr, packet: &CmPacket) {
        if let CmPacket::Response(r) = packet {
            self.handle_response(now, from, r);
        }
    }

    /// Handles a probe response from `from` (papers/003 Figure 5, sender side).
    pub fn handle_response(&mut self, now: Time, from: PeerAddr, resp: &ResponseRepr) {
        let Some(outcome) = self
            .probes
            .get_mut(&from)
            .and_then(|s| s.on_response(now, resp))
        else {
            self.stats.responses_ignored += 1;
            return;
        };
        self.stats.responses_accepted += 1;
        self.rearm_probe(from);
        // Receiver hints.
        for rep in resp.reports.iter().filter(|r| r.hint > 0) {
            if let Some(id) = self.by_key.get(&(from, rep.key)).copied() {
                let _ = self.set_receiver_hint(now, id, f64::from(rep.hint));
            }
        }
        // Aggregate per macroflow; remember per-flow loss rates.
        let mut per_mf: BTreeMap<MacroflowId, (u64, u64)> = BTreeMap::new();
        for (key, sent, recd) in &outcome.per_flow {
            let Some(id) = self.by_key.get(&(from, *key)).copied() else {
                continue;
            };
            let Some(f) = self.flows.get_mut(&id) else {
                continue;
            };
            let Some(recd) = *recd else {
                continue;
            };
            let in_interval = recd.min(*sent);
            if *sent > 0 {
                f.loss_rate = Some(1.0 - in_interval as f64 / *sent as f64);
            }
            // More received than sent in an interval is data counted in another interval than
            // the one it was sent in: late (sent before the previous probe, reported to the
            // receiver CM after it) or early (counted before the probe that closes its own
            // interval was read: the sender's `cm_notify` lagged, or the receiving CM read its
            // probes late). Its interval's matching shortfall was, or will be, read as loss.
            // For the long-run count a late surplus is credited back against the loss already
            // counted, and an early one is kept (at most what has been sent since, so
            // duplicates cannot hide loss) and set against the next shortfalls: the count
            // stays sent minus received in either order. Dropping surpluses biased it upwards
            // (0.51-0.73 for a true 0.25 on loopback, where the receiving application reports
            // from its own thread; 0.30 over a short run whose receiving CM read its probes
            // late). The macroflow's feedback takes the late credit only, as before: it is
            // what the paper's experiments were reproduced with.
            let sent_after = outcome.sent_after.get(key).copied().unwrap_or(0);
            let (surplus, shortfall) = (recd.saturating_sub(*sent), sent - in_interval);
            let late = surplus.min(f.probe_lost_bytes);
            f.probe_lost_bytes -= late;
            f.probe_early_bytes = f
                .probe_early_bytes
                .saturating_add(surplus - late)
                .min(sent_after.saturating_add(shortfall));
            let early = shortfall.min(f.probe_early_bytes);
            f.probe_early_bytes -= early;
            f.probe_sent_bytes = f.probe_sent_bytes.saturating_add(*sent);
            f.probe_lost_bytes = f.probe_lost_bytes.saturating_add(shortfall - early);
            if *sent == 0 {
                // Counted without sends in the interval: long-run accounting only.
                continue;
            }
            let e = per_mf.entry(f.macroflow).or_insert((0, 0));
            e.0 = e.0.saturating_add(in_interval.saturating_add(late));
            e.1 = e.1.saturating_add(shortfall);
        }
        // An RTT sample alone (no measurable interval) still counts as feedback for every
        // macroflow that has probe-fed flows to this destination.
        if per_mf.is_empty() {
            for ((dest, _), id) in self.by_key.range((from, FlowKey(0))..) {
                if *dest != from {
                    break;
                }
                if let Some(f) = self.flows.get(id) {
                    per_mf.entry(f.macroflow).or_insert((0, 0));
                }
            }
        }
        for (mf, (nrecd, nlost)) in per_mf {
            let mode = if outcome.ce_packets > 0 {
                LossMode::Ecn
            } else if nlost > 0 {
                LossMode::Loss
            } else {
                LossMode::NoCongestion
            };
            let fb = Feedback {
                nrecd_bytes: nrecd,
                nlost_bytes: nlost,
                mode,
                rtt: outcome.rtt,
            };
            self.update_macroflow(now, mf, &fb, true);
        }
    }

    /// Tells every macroflow with flows to `dest` that a probe left (the aging trigger's
    /// anchor) and re-arms their timers.
    fn on_probe_sent(&mut self, now: Time, dest: PeerAddr) {
        let mut mfs: Vec<MacroflowId> = Vec::new();
        for ((d, _), id) in self.by_key.range((dest, FlowKey(0))..) {
            if *d != dest {
                break;
            }
            if let Some(f) = self.flows.get(id)
                && !mfs.contains(&f.macroflow)
            {
                mfs.push(f.macroflow);
            }
        }
        for id in mfs {
            if let Some(mf) = self.macroflows.get_mut(&id) {
                mf.rate.on_probe_sent(now);
            }
            self.rearm_macroflow(id);
        }
    }

    pub(super) fn rearm_probe(&mut self, dest: PeerAddr) {
        let Some(s) = self.probes.get_mut(&dest) else {
            return;
        };
        let next = s.next_probe_at();
        if s.armed == next {
            return;
        }
        if let Some(t) = s.armed.take() {
            self.timers.remove(&(t, TimerKey::Probe(dest)));
        }
        if let Some(t) = next {
            s.armed = Some(t);
            self.timers.insert((t, TimerKey::Probe(dest)));
        }
    }

    /// The next probe to send, if any. Drain after every input.
    pub fn poll_transmit(&mut self, _now: Time) -> Option<CmTransmit> {
        self.transmits.pop_front()
    }

    // ----- timers and events -----

    /// When `handle_timeout` should next be called.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.timers.first().map(|(t, _)| *t)
    }

    /// Runs every timer due by `now`: grants, aging halvings, probes.
    pub fn handle_timeout(&mut self, now: Time) {
        // Each key is processed once per call; re-armed keys due again wait for the next call.
        let due: Vec<(Time, TimerKey)> = self
            .timers
            .range(..=(now, TimerKey::Probe(PeerAddr(u128::MAX))))
            .copied()
            .collect();
        for (t, key) in due {
            self.timers.remove(&(t, key));
            match key {
                TimerKey::Macroflow(id) => {
                    if let Some(mf) = self.macroflows.get_mut(&id) {
                        mf.armed = None;
                        self.stats.aging_halvings += mf.advance(now);
                    }
                    self.after_change(now, id);
                }
                TimerKey::Probe(dest) => {
                    let Some(s) = self.probes.get_mut(&dest) else {
                        continue;
                    };
                    s.armed = None;
                    if self.transmits.len() < MAX_TRANSMITS
                        && let Some(p) = s.poll_transmit(now)
                    {
                        self.stats.probes_sent += 1;
                        self.transmits.push_back(CmTransmit {
                            to: dest,
                            packet: CmPacket::Probe(p),
                        });
                        self.on_probe_sent(now, dest);
                    }
                    self.rearm_probe(dest);
                }
            }
        }
    }

    /// The next application event (grant or rate change), if any.
    pub fn poll_event(&mut self) -> Option<CmEvent> {
        if let Some((flow, bytes)) = self.grants.pop_front() {
            return Some(CmEvent::Grant { flow, bytes });
        }
        if let Some((flow, bytes)) = self.expired_requests.pop_front() {
            return Some(CmEvent::RequestExpired { flow, bytes });
        }
        while let Some(id) = self.rate_events.pop_front() {
            let Some(f) = self.flows.get_mut(&id) else {
                continue;
            };
            f.rate_event_queued = false;
            if let Some(n) = f.notified {
                return Some(CmEvent::RateChange {
                    flow: id,
                    rate_bytes_per_s: n.rate,
                    srtt: n.srtt,
                    rttvar: n.rttvar,
                });
            }
        }
        None
    }
}
