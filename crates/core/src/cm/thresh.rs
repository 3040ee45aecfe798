//! Which flows of a macroflow crossed their `cm_thresh` bounds (RFC 3124 §3.2).
//!
//! A flow's rate is `weight × u`, where `u = macroflow rate / total weight` is common to every
//! flow of the macroflow, and all flows share the macroflow's srtt. So "rate below
//! `rate_down × last`" is "u below `rate_down × last / weight`": each flow has four trigger
//! points on two common axes (u and srtt), kept in ordered sets. A change of u or srtt finds the
//! flows to notify in O(k log n) for k notified flows, instead of scanning all n flows on every
//! acknowledgement.

use super::{FlowId, Thresholds};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Copy, Debug, PartialEq)]
struct Key(f64);

impl Eq for Key {}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// Trigger points of one flow: (low u, high u, low srtt, high srtt), in seconds for srtt.
type Triggers = [f64; 4];

/// The index of trigger points.
#[derive(Clone, Debug, Default)]
pub(crate) struct ThresholdIndex {
    sets: [BTreeSet<(Key, FlowId)>; 4],
    keys: BTreeMap<FlowId, Triggers>,
}

impl ThresholdIndex {
    /// (Re)arms a flow after it was told `last_rate` (bytes/s) and `last_srtt_s`, given its
    /// weight and thresholds.
    pub(crate) fn arm(
        &mut self,
        flow: FlowId,
        weight: f64,
        last_rate: f64,
        last_srtt_s: f64,
        th: &Thresholds,
    ) {
        self.remove(flow);
        let per_weight = last_rate / weight;
        let triggers = [
            th.rate_down * per_weight,
            th.rate_up * per_weight,
            th.rtt_down * last_srtt_s,
            th.rtt_up * last_srtt_s,
        ];
        for (set, k) in self.sets.iter_mut().zip(triggers) {
            set.insert((Key(k), flow));
        }
        self.keys.insert(flow, triggers);
    }

    /// Stops watching a flow.
    pub(crate) fn remove(&mut self, flow: FlowId) {
        if let Some(triggers) = self.keys.remove(&flow) {
            for (set, k) in self.sets.iter_mut().zip(triggers) {
                set.remove(&(Key(k), flow));
            }
        }
    }

    /// Flows whose bounds are crossed at rate-per-weight `u` and smoothed RTT `srtt_s`, at most
    /// `limit` of them. They stay armed; the caller re-arms them with new values.
    pub(crate) fn crossed(&self, u: f64, srtt_s: f64, limit: usize) -> BTreeSet<FlowId> {
        let mut out = BTreeSet::new();
        let below = |set: &BTreeSet<(Key, FlowId)>, v: f64, out: &mut BTreeSet<FlowId>| {
            // Low triggers strictly above the value fired.
            for (Key(k), f) in set.iter().rev() {
                if *k <= v || out.len() >= limit {
                    break;
                }
                out.insert(*f);
            }
        };
        let above = |set: &BTreeSet<(Key, FlowId)>, v: f64, out: &mut BTreeSet<FlowId>| {
            for (Key(k), f) in set.iter() {
                if *k >= v || out.len() >= limit {
                    break;
                }
                out.insert(*f);
            }
        };
        below(&self.sets[0], u, &mut out);
        above(&self.sets[1], u, &mut out);
        below(&self.sets[2], srtt_s, &mut out);
        above(&self.sets[3], srtt_s, &mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_only_flows_past_their_bounds_are_reported() {
        let mut idx = ThresholdIndex::default();
        let th = Thresholds {
            rate_down: 0.5,
            rate_up: 2.0,
            ..Thresholds::NEVER
        };
        idx.arm(FlowId(1), 1.0, 100.0, 0.1, &th);
        idx.arm(FlowId(2), 1.0, 100.0, 0.1, &Thresholds::DEFAULT);
        assert!(idx.crossed(100.0, 0.1, 10).is_empty());
        assert_eq!(
            idx.crossed(70.0, 0.1, 10).into_iter().collect::<Vec<_>>(),
            vec![FlowId(2)]
        );
        assert_eq!(idx.crossed(40.0, 0.1, 10).len(), 2);
        assert_eq!(
            idx.crossed(100.0, 0.2, 10).into_iter().collect::<Vec<_>>(),
            vec![FlowId(2)],
            "rtt bound of the default thresholds"
        );
        idx.remove(FlowId(2));
        assert!(idx.crossed(100.0, 0.2, 10).is_empty());
    }
}
