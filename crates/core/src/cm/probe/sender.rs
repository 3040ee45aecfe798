//! The sender side of Figure 5 (papers/003 §2.2.2), for one destination.
//!
//! ```text
//! send probe:        probe(probeseqnum) = {probeseqnum, now, nsent}; nsent = 0; probeseqnum++
//! on response <thisprobe, lastprobe, nrecd>:
//!                    nsent = Σ probe(i).nsent for i in lastprobe+1 ..= thisprobe
//!                    lossprob from nrecd / nsent; delete entries before thisprobe
//! ```
//! `nsent` is kept per flow key so per-flow loss rates can be computed. Every record since the
//! last answered probe is kept (bounded by [`MAX_RECORDS`]), which is what makes the protocol
//! robust to lost probes and lost responses: a lost probe or response only widens the interval
//! the next response covers, or leaves one interval unmeasured.

use super::super::FlowKey;
use super::{ProbeRepr, ResponseRepr};
use crate::rtt::{RtoConfig, RttEstimator};
use crate::time::Time;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Most unanswered probes remembered; older ones are forgotten (their interval becomes
/// unmeasurable).
pub(crate) const MAX_RECORDS: usize = 256;
/// Most distinct flow keys tracked per destination per interval.
pub(crate) const MAX_KEYS: usize = 1024;

#[derive(Clone, Debug)]
struct ProbeRecord {
    seq: u32,
    sent_at: Time,
    /// Bytes sent per flow since the previous probe.
    sent: BTreeMap<FlowKey, u64>,
}

/// What one accepted response measured.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ResponseOutcome {
    /// Round trip of the answered probe.
    pub rtt: Option<Duration>,
    /// Per flow: bytes sent in the interval and bytes received (None if unknown because the
    /// receiver truncated its list). Empty if the interval could not be measured.
    pub per_flow: Vec<(FlowKey, u64, Option<u64>)>,
    /// Per flow in `per_flow`: bytes sent after the answered probe (in probes not yet answered
    /// and since the last probe). A receiver that counted more than was sent in the interval
    /// can only have counted some of these early.
    pub sent_after: BTreeMap<FlowKey, u64>,
    /// ECN-marked packets in the interval.
    pub ce_packets: u32,
}

/// Probe state towards one destination.
#[derive(Clone, Debug)]
pub(crate) struct ProbeSession {
    next_seq: u32,
    records: VecDeque<ProbeRecord>,
    current: BTreeMap<FlowKey, u64>,
    last_answered: Option<u32>,
    rtt: RttEstimator,
    initial_rtt: Duration,
    probes_per_rtt: f64,
    /// The shortest round trip probes are spaced for ([`crate::cm::CmConfig::feedback_floor`]).
    feedback_floor: Duration,
    next_probe_at: Option<Time>,
    /// The deadline under which this session sits in the manager's timer set.
    pub armed: Option<Time>,
}

impl ProbeSession {
    pub(crate) fn new(
        initial_rtt: Duration,
        probes_per_rtt: f64,
        feedback_floor: Duration,
    ) -> ProbeSession {
        ProbeSession {
            next_seq: 0,
            records: VecDeque::new(),
            current: BTreeMap::new(),
            last_answered: None,
            rtt: RttEstimator::new(RtoConfig::default()),
            initial_rtt: initial_rtt.max(Duration::from_micros(2)),
            probes_per_rtt: if probes_per_rtt.is_nan() {
                2.0
            } else {
                probes_per_rtt.clamp(0.1, 100.0)
            },
            feedback_floor,
            next_probe_at: None,
            armed: None,
        }
    }

    /// papers/003 §2.2.1–2.2.2: "feedback should be obtained at least twice every round-trip"
    /// — probe every srtt/2 by default (srtt of the probes' own RTT estimate), with srtt
    /// taken as at least the feedback floor. Figure 5 counts data per interval between two
    /// probes, which is exact only if the receiver counts each packet before the next probe
    /// overtakes it; a receiving application that reports arrivals from its own thread lags
    /// by a scheduling delay, and intervals much shorter than that (25 µs on loopback) put a
    /// large share of the packets in the wrong interval.
    fn interval(&self) -> Duration {
        let srtt = self
            .rtt
            .srtt()
            .unwrap_or(self.initial_rtt)
            .max(self.feedback_floor);
        srtt.div_f64(self.probes_per_rtt)
            .max(Duration::from_micros(1))
    }

    /// A probe-fed flow sent `bytes`.
    pub(crate) fn on_sent(&mut self, now: Time, key: FlowKey, bytes: u64) {
        if bytes == 0 || (self.current.len() >= MAX_KEYS && !self.current.contains_key(&key)) {
            return;
        }
        let e = self.current.entry(key).or_insert(0);
        *e = e.saturating_add(bytes);
        if self.next_probe_at.is_none() {
            self.next_probe_at = Some(now + self.interval());
        }
    }

    pub(crate) fn next_probe_at(&self) -> Option<Time> {
        self.next_probe_at
    }

    /// Sends the due probe, if any. Probing continues while data keeps flowing and stops
    /// after the first interval without data.
    pub(crate) fn poll_transmit(&mut self, now: Time) -> Option<ProbeRepr> {
        if self.next_probe_at.is_none_or(|t| t > now) {
            return None;
        }
        if self.current.is_empty() || self.next_seq == u32::MAX {
            self.next_probe_at = None;
            return None;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.records.push_back(ProbeRecord {
            seq,
            sent_at: now,
            sent: std::mem::take(&mut self.current),
        });
        if self.records.len() > MAX_RECORDS {
            self.records.pop_front();
        }
        self.next_probe_at = Some(now + self.interval());
        Some(ProbeRepr { seq })
    }

    /// Handles a response; `None` if it is stale, duplicate or for a probe never sent.
    pub(crate) fn on_response(
        &mut self,
        now: Time,
        resp: &ResponseRepr,
    ) -> Option<ResponseOutcome> {
        let this = resp.this_probe;
        if this >= self.next_seq || self.last_answered.is_some_and(|l| this <= l) {
            return None;
        }
        if resp.last_probe.is_some_and(|l| l >= this) {
            return None;
        }
        self.last_answered = Some(this);
        let first_kept = self.records.front().map(|r| r.seq);
        let rtt = self
            .records
            .iter()
            .find(|r| r.seq == this)
            .map(|r| now - r.sent_at);
        if let Some(sample) = rtt {
            self.rtt.on_sample(sample);
            // The first samples shrink the interval from its initial-RTT guess at once
            // rather than after the long first interval.
            let soonest = now + self.interval();
            self.next_probe_at = self.next_probe_at.map(|t| t.min(soonest));
        }
        // Sum nsent over lastprobe+1 ..= thisprobe; measurable only if all those records are
        // still here (records form a contiguous run of sequence numbers).
        let from = resp.last_probe.map_or(0, |l| l + 1);
        let complete = first_kept.is_some_and(|f| f <= from);
        let recd: BTreeMap<FlowKey, u64> =
            resp.reports.iter().map(|r| (r.key, r.recd_bytes)).collect();
        let mut sums: BTreeMap<FlowKey, u64> = BTreeMap::new();
        if complete {
            // A flow that sent nothing in the interval but was counted in it (its packets
            // counted in a neighbouring interval) is measured too, as 0 sent.
            sums.extend(recd.keys().map(|k| (*k, 0)));
            for r in self
                .records
                .iter()
                .filter(|r| r.seq >= from && r.seq <= this)
            {
                for (k, b) in &r.sent {
                    let e = sums.entry(*k).or_insert(0);
                    *e = e.saturating_add(*b);
                }
            }
        }
        // "Delete all entries in probe less than thisprobe".
        while self.records.front().is_some_and(|r| r.seq < this) {
            self.records.pop_front();
        }
        let mut sent_after: BTreeMap<FlowKey, u64> = BTreeMap::new();
        for (k, b) in self
            .records
            .iter()
            .filter(|r| r.seq > this)
            .flat_map(|r| r.sent.iter())
            .chain(self.current.iter())
            .filter(|(k, _)| sums.contains_key(k))
        {
            let e = sent_after.entry(*k).or_insert(0);
            *e = e.saturating_add(*b);
        }
        let per_flow = sums
            .into_iter()
            .map(|(k, sent)| {
                let got = match recd.get(&k) {
                    Some(b) => Some(*b),
                    None if resp.truncated => None,
                    None => Some(0),
                };
                (k, sent, got)
            })
            .collect();
        Some(ResponseOutcome {
            rtt,
            per_flow,
            sent_after,
            ce_packets: resp.ce_packets,
        })
    }

    /// Forgets a flow's unsent counters (it closed).
    pub(crate) fn forget(&mut self, key: FlowKey) {
        self.current.remove(&key);
    }
}

#[cfg(test)]
mod tests {
    use super::super::FlowReport;
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn response(this: u32, last: Option<u32>, recd: u64) -> ResponseRepr {
        ResponseRepr {
            this_probe: this,
            last_probe: last,
            ce_packets: 0,
            truncated: false,
            reports: vec![FlowReport {
                key: FlowKey(1),
                recd_bytes: recd,
                recd_packets: 0,
                hint: 0,
            }],
        }
    }

    /// Sends 1000 bytes then a probe, `n` times from `start`, 100 ms apart.
    fn send_rounds(s: &mut ProbeSession, start: Time, n: u64) -> Vec<u32> {
        (0..n)
            .filter_map(|i| {
                let t = start + ms(100 * i);
                s.on_sent(t, FlowKey(1), 1000);
                s.poll_transmit(t + ms(1000)).map(|p| p.seq)
            })
            .collect()
    }

    #[test]
    fn test_lost_probe_widens_next_interval() {
        let mut s = ProbeSession::new(ms(200), 2.0, Duration::ZERO);
        let seqs = send_rounds(&mut s, Time::ZERO, 3);
        assert_eq!(seqs, vec![0, 1, 2]);
        // Probe 1 lost: the receiver answers probe 0, then probe 2 covering 1..=2.
        let now = Time::from_secs(2);
        let out = s.on_response(now, &response(0, None, 1000)).expect("fresh");
        assert_eq!(out.per_flow, vec![(FlowKey(1), 1000, Some(1000))]);
        let out = s
            .on_response(now, &response(2, Some(0), 1500))
            .expect("fresh");
        assert_eq!(out.per_flow, vec![(FlowKey(1), 2000, Some(1500))]);
    }

    #[test]
    fn test_lost_response_leaves_interval_unmeasured_but_next_is_exact() {
        let mut s = ProbeSession::new(ms(200), 2.0, Duration::ZERO);
        send_rounds(&mut s, Time::ZERO, 3);
        let now = Time::from_secs(2);
        // The response to probe 1 (covering probe 1 only) was lost.
        s.on_response(now, &response(0, None, 1000)).expect("fresh");
        let out = s
            .on_response(now, &response(2, Some(1), 1000))
            .expect("fresh");
        assert_eq!(out.per_flow, vec![(FlowKey(1), 1000, Some(1000))]);
        assert!(out.rtt.is_some());
    }

    #[test]
    fn test_stale_duplicate_and_future_responses_are_ignored() {
        let mut s = ProbeSession::new(ms(200), 2.0, Duration::ZERO);
        send_rounds(&mut s, Time::ZERO, 2);
        let now = Time::from_secs(2);
        assert!(
            s.on_response(now, &response(5, Some(1), 0)).is_none(),
            "never sent"
        );
        assert!(s.on_response(now, &response(1, None, 2000)).is_some());
        assert!(
            s.on_response(now, &response(1, None, 2000)).is_none(),
            "duplicate"
        );
        assert!(
            s.on_response(now, &response(0, None, 0)).is_none(),
            "reordered, old"
        );
    }

    #[test]
    fn test_a_flow_counted_without_sends_is_measured_and_later_sends_are_reported() {
        let mut s = ProbeSession::new(ms(200), 2.0, Duration::ZERO);
        send_rounds(&mut s, Time::ZERO, 3);
        s.on_sent(Time::from_secs(1), FlowKey(2), 700);
        let now = Time::from_secs(2);
        let mut resp = response(0, None, 1000);
        resp.reports.push(FlowReport {
            key: FlowKey(2),
            recd_bytes: 300,
            recd_packets: 1,
            hint: 0,
        });
        let out = s.on_response(now, &resp).expect("fresh");
        // Flow 2 sent nothing in probe 0's interval but was counted in it (early).
        assert_eq!(
            out.per_flow,
            vec![(FlowKey(1), 1000, Some(1000)), (FlowKey(2), 0, Some(300))]
        );
        // After probe 0: probes 1 and 2 carried 1000 B each of flow 1; flow 2's 700 B are
        // not yet probed.
        assert_eq!(out.sent_after.get(&FlowKey(1)), Some(&2000));
        assert_eq!(out.sent_after.get(&FlowKey(2)), Some(&700));
    }
}
