//! Measurements for media-flow experiments (`papers/002` §4, §6): Jain's fairness over time
//! among the flows active in each sampling interval (Figs. 11, 15, 18), and the ADU
//! inter-arrival times `j_A` at a TPBA receiver (Figs. 12, 16).
//!
//! The per-flow rate series at a chosen `S_average` (§6.2) is the run's goodput series with
//! `sample_period_s = S_average` in the scenario.

use crate::agents::tpba::AduArrival;
use crate::metrics::{RunResults, jain_index};

/// Jain's index at each sample time, over the named flows active during that interval
/// (started before its end and not stopped before its start). Intervals with no active flow
/// are skipped. Returns `(time s, index)`.
pub fn jain_series(r: &RunResults, flows: &[&str]) -> Vec<(f64, f64)> {
    active_series(r, flows, jain_index)
}

/// `f` of the rates (bit/s) of the named flows active during each sampling interval, as
/// [`jain_series`] counts them; `(time s, value)`, intervals with no active flow skipped.
pub fn active_series(r: &RunResults, flows: &[&str], f: impl Fn(&[f64]) -> f64) -> Vec<(f64, f64)> {
    let period = r.sample_period_s;
    let chosen: Vec<_> = r
        .flows
        .iter()
        .filter(|f| flows.contains(&f.name.as_str()))
        .collect();
    r.sample_times_s
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            let rates: Vec<f64> = chosen
                .iter()
                .filter(|f| f.start_s < *t && f.stop_s > *t - period)
                .map(|f| f.goodput_series_bps.get(i).copied().unwrap_or(0.0))
                .collect();
            (!rates.is_empty()).then(|| (*t, f(&rates)))
        })
        .collect()
}

/// One ADU's inter-arrival time `j_A`.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct InterArrival {
    /// Arrival of the later ADU, seconds.
    pub at_s: f64,
    /// Time since the previous ADU, milliseconds.
    pub j_a_ms: f64,
    /// The later ADU came on TCP (a rate-probing period).
    pub tcp: bool,
    /// The previous ADU came on the other path: a switching point.
    pub switch: bool,
}

/// `j_A` for each ADU after the first.
pub fn inter_arrivals(arrivals: &[AduArrival]) -> Vec<InterArrival> {
    arrivals
        .windows(2)
        .filter_map(|w| match w {
            [a, b] => Some(InterArrival {
                at_s: b.at_s,
                j_a_ms: (b.at_s - a.at_s) * 1e3,
                tcp: b.tcp,
                switch: a.tcp != b.tcp,
            }),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::FlowResult;

    fn flow(name: &str, start_s: f64, stop_s: f64, series_kbps: &[f64]) -> FlowResult {
        FlowResult {
            name: name.into(),
            kind: "tcp".into(),
            from: "s".into(),
            to: "r".into(),
            start_s,
            stop_s,
            bytes_delivered: 0,
            goodput_bps: 0.0,
            goodput_series_bps: series_kbps.iter().map(|k| k * 1e3).collect(),
            packets_sent: 0,
            packets_received: 0,
            packets_lost: 0,
            reverse_packets_lost: 0,
            rtt: Default::default(),
            rtt_samples: Vec::new(),
            counters: Default::default(),
        }
    }

    #[test]
    fn test_jain_series_counts_only_the_named_flows_active_in_each_interval() {
        let r = RunResults {
            scenario: "t".into(),
            seed: 1,
            duration_s: 4.0,
            sample_period_s: 1.0,
            sample_times_s: vec![1.0, 2.0, 3.0, 4.0],
            flows: vec![
                flow("a", 0.0, 4.0, &[400.0, 400.0, 300.0, 300.0]),
                // Joins at 2 s (not active in (1, 2]), leaves at 3 s (not in (3, 4]).
                flow("b", 2.0, 3.0, &[0.0, 0.0, 100.0, 0.0]),
                flow("ignored", 0.0, 4.0, &[1.0, 1.0, 1.0, 1.0]),
            ],
            links: Vec::new(),
            jain_index: 1.0,
            events: 0,
        };
        let j = jain_series(&r, &["a", "b"]);
        let t: Vec<f64> = j.iter().map(|p| p.0).collect();
        assert_eq!(t, [1.0, 2.0, 3.0, 4.0]);
        // (1, 2]: a alone; (2, 3]: a 300 and b 100 → 400² / (2 · 100,000) = 0.8.
        assert_eq!(j[0].1, 1.0);
        assert_eq!(j[1].1, 1.0);
        assert!((j[2].1 - 0.8).abs() < 1e-12, "{j:?}");
        assert_eq!(j[3].1, 1.0);
        // No named flow active: no point.
        assert!(jain_series(&r, &["b"]).iter().all(|p| p.0 == 3.0));
    }

    #[test]
    fn test_inter_arrivals_mark_switches() {
        let a = |at_s, seq, tcp| AduArrival { at_s, seq, tcp };
        let j = inter_arrivals(&[a(1.0, 0, true), a(1.1, 1, true), a(1.25, 2, false)]);
        assert_eq!(j.len(), 2);
        assert!((j[0].j_a_ms - 100.0).abs() < 1e-9 && !j[0].switch && j[0].tcp);
        assert!((j[1].j_a_ms - 150.0).abs() < 1e-9 && j[1].switch && !j[1].tcp);
    }
}
