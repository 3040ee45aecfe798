//! The metrics of `papers/002`'s experiments: §6.2's δR metrics ("Quantitative Comparison"),
//! exactly as defined there; §6.1's response time to a change in the available bandwidth
//! (Table 3, [`settle_time`], two readings of "stable"); the mean fairness after a given time (Figure 19, [`mean_from`]);
//! and a rate series' smoothness for the comparison beyond the paper ([`smoothness`]).
//!
//! ## δR
//!
//! `R_i(j)` is flow i's rate over `[S·j, S·(j+1)]` (`S = S_average`, 1 s); `n_cross` is the
//! least j with `R3(j) ≥ R1(j)` or `R3(j) ≥ R2(j)`; `n_join` the least j with
//! `R4(j) ≥ R1(j)` or `R4(j) ≥ R2(j)`; `n_change = 200 s/S − 1`, `n_final = 300 s/S − 1`.
//!
//! ```text
//! δR_intra = max_{i=1,2,3} ( max_{n_cross≤j≤n_change} R_i(j) − min_{n_cross≤j≤n_change} R_i(j) )
//! SR1_i = Σ_{j=n_cross..n_change} R_i(j) / (n_change − n_cross + 1)
//! SR2_i = Σ_{j=n_join..n_final} R_i(j) / (n_final − n_join + 1)
//! δR_ave1 = max_{i≠j} |SR1_i − SR1_j|,   δR_ave2 = max_{i≠j} |SR2_i − SR2_j|
//! ```
//!
//! The paper's special case for runs that never cross (LDA-3-1-10-3, LDA-3-1-10-6,
//! LDA-1-0.5-10-3): `n_cross` is replaced by the least n with
//! `∀ i, j ∈ [n − 10, n]: |R3(i) − R3(j)| < 20 kbit/s`. We apply it to any run without a
//! crossing. SR1 and δR_ave1 range over flows 1–3 (flow 4 is not running), SR2 and δR_ave2
//! over flows 1–4 (the paper's `i ≠ j` does not say; all four flows share the link then).

use serde::Serialize;

/// The metrics of one run, kbit/s (`None` where the run gives no `n_cross`/`n_join`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct DeltaR {
    /// `n_cross` (or the stability fallback), and whether it is the fallback.
    pub n_cross: Option<usize>,
    /// The fallback of the special case was used.
    pub fallback: bool,
    /// `n_join`.
    pub n_join: Option<usize>,
    /// δR_intra.
    pub intra: Option<f64>,
    /// δR_ave1.
    pub ave1: Option<f64>,
    /// δR_ave2.
    pub ave2: Option<f64>,
}

/// The stability fallback: least n ≥ 10 with all of `R3[n−10..=n]` within `tol` of each other.
fn stable_from(r3: &[f64], tol: f64, last: usize) -> Option<usize> {
    (10..=last.min(r3.len().saturating_sub(1))).find(|&n| {
        let w = r3.get(n - 10..=n).unwrap_or(&[]);
        let hi = w.iter().copied().fold(f64::MIN, f64::max);
        let lo = w.iter().copied().fold(f64::MAX, f64::min);
        !w.is_empty() && hi - lo < tol
    })
}

fn max_pair_diff(xs: &[f64]) -> Option<f64> {
    if xs.len() < 2 {
        return None;
    }
    let hi = xs.iter().copied().fold(f64::MIN, f64::max);
    let lo = xs.iter().copied().fold(f64::MAX, f64::min);
    Some(hi - lo)
}

fn window_mean(r: &[f64], from: usize, to: usize) -> Option<f64> {
    let w = r.get(from..=to)?;
    Some(w.iter().sum::<f64>() / w.len() as f64)
}

/// The δR metrics of `rates = [R1, R2, R3, R4]` (kbit/s per interval of `S`), with
/// `n_change`, `n_final` as defined above.
pub fn delta_r(rates: &[Vec<f64>; 4], n_change: usize, n_final: usize) -> DeltaR {
    let [r1, r2, r3, r4] = rates;
    let at = |r: &Vec<f64>, j: usize| r.get(j).copied().unwrap_or(0.0);
    let crossed = (0..=n_change).find(|&j| at(r3, j) >= at(r1, j) || at(r3, j) >= at(r2, j));
    let (n_cross, fallback) = match crossed {
        Some(n) => (Some(n), false),
        None => (stable_from(r3, 20.0, n_change), true),
    };
    let n_join = (n_change + 1..=n_final)
        .find(|&j| at(r4, j) > 0.0 && (at(r4, j) >= at(r1, j) || at(r4, j) >= at(r2, j)));
    let mut out = DeltaR {
        n_cross,
        fallback,
        n_join,
        ..DeltaR::default()
    };
    if let Some(nc) = n_cross {
        let spans: Option<Vec<f64>> = [r1, r2, r3]
            .iter()
            .map(|r| {
                let w = r.get(nc..=n_change)?;
                let hi = w.iter().copied().fold(f64::MIN, f64::max);
                let lo = w.iter().copied().fold(f64::MAX, f64::min);
                Some(hi - lo)
            })
            .collect();
        out.intra = spans.map(|s| s.into_iter().fold(0.0, f64::max));
        let sr1: Option<Vec<f64>> = [r1, r2, r3]
            .iter()
            .map(|r| window_mean(r, nc, n_change))
            .collect();
        out.ave1 = sr1.and_then(|s| max_pair_diff(&s));
    }
    if let Some(nj) = n_join {
        let sr2: Option<Vec<f64>> = [r1, r2, r3, r4]
            .iter()
            .map(|r| window_mean(r, nj, n_final))
            .collect();
        out.ave2 = sr2.and_then(|s| max_pair_diff(&s));
    }
    out
}

/// What "stable" means for [`settle_time`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub enum Stable {
    /// Within `tol` (kbit/s) of `target`, the new fair rate.
    At {
        /// The rate to reach, kbit/s.
        target: f64,
        /// Allowed distance from it, kbit/s.
        tol: f64,
    },
    /// Within `tol_fraction` of the mean over the hold, whatever that mean is.
    Anywhere {
        /// Allowed distance from the mean, as a fraction of it.
        tol_fraction: f64,
    },
}

impl Stable {
    fn holds(&self, window: &[(f64, f64)]) -> bool {
        match *self {
            Stable::At { target, tol } => window.iter().all(|(_, x)| (x - target).abs() <= tol),
            Stable::Anywhere { tol_fraction } => {
                let m = window.iter().map(|(_, x)| x).sum::<f64>() / window.len().max(1) as f64;
                window
                    .iter()
                    .all(|(_, x)| (x - m).abs() <= tol_fraction * m)
            }
        }
    }
}

/// §6.1's response to a change in the available bandwidth (Table 3): the time from the change
/// at `change_s` until flow 3's rate "becomes stable".
///
/// The paper gives no formula, only "the elapsed time from the beginning of Flow 2 until the
/// rate of Flow 3 becomes stable" with "rates … calculated every 400 ms". `rate` holds
/// `(end of interval s, kbit/s)` samples of one sampling period `S`; the answer is
/// `t_k − change_s` for the first sample `k` whose interval starts at or after the change and
/// from which the samples ending within `hold_s` are [`Stable`] (so the earliest possible
/// answer is `S`: one interval is needed to see a rate). `None` when no such sample exists, or
/// when the series ends before a candidate's hold is complete.
pub fn settle_time(
    rate: &[(f64, f64)],
    change_s: f64,
    period_s: f64,
    stable: Stable,
    hold_s: f64,
) -> Option<f64> {
    let last = rate.last()?.0;
    rate.iter()
        .enumerate()
        .filter(|(_, (t, _))| t - period_s >= change_s - 1e-9)
        .take_while(|(_, (t, _))| t + hold_s <= last + 1e-9)
        .find(|(k, (t, _))| {
            let rest = rate.get(*k..).unwrap_or(&[]);
            let n = rest
                .iter()
                .take_while(|(u, _)| *u <= t + hold_s + 1e-9)
                .count();
            stable.holds(rest.get(..n).unwrap_or(&[]))
        })
        .map(|(_, (t, _))| t - change_s)
}

/// The mean of a series' values over the intervals starting at or after `from_s` (`points`
/// are `(end of interval s, value)`, intervals of `period_s`); `None` when there are none.
/// Figure 19 averages the fairness "after the first rate-probing period has finished".
pub fn mean_from(points: &[(f64, f64)], from_s: f64, period_s: f64) -> Option<f64> {
    let xs: Vec<f64> = points
        .iter()
        .filter(|(t, _)| t - period_s >= from_s - 1e-9)
        .map(|(_, v)| *v)
        .collect();
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

/// Smoothness of a rate series (`None` for fewer than two samples or a zero mean): the
/// coefficient of variation (population standard deviation / mean), the measure of the
/// equation-based congestion control literature behind RFC 5348 ("a much lower variation of
/// throughput over time compared with TCP", §1), and the mean absolute change between
/// successive samples relative to the mean, which shows short-term jumps that slow swings do
/// not hide.
pub fn smoothness(xs: &[f64]) -> Option<(f64, f64)> {
    if xs.len() < 2 {
        return None;
    }
    let n = xs.len() as f64;
    let m = xs.iter().sum::<f64>() / n;
    if m <= 0.0 {
        return None;
    }
    let var = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n;
    let steps: f64 = xs
        .iter()
        .zip(xs.iter().skip(1))
        .map(|(a, b)| (b - a).abs())
        .sum();
    Some((var.sqrt() / m, steps / (n - 1.0) / m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_delta_r_on_a_hand_made_run() {
        // 10 intervals, change after j = 5, final j = 9. Flow 3 climbs and crosses flow 2 at j = 2.
        let r1 = vec![
            500.0, 480.0, 420.0, 400.0, 410.0, 400.0, 300.0, 300.0, 300.0, 300.0,
        ];
        let r2 = vec![
            500.0, 450.0, 400.0, 400.0, 390.0, 400.0, 300.0, 300.0, 300.0, 300.0,
        ];
        let r3 = vec![
            10.0, 200.0, 400.0, 400.0, 400.0, 400.0, 350.0, 350.0, 350.0, 350.0,
        ];
        let r4 = vec![0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 100.0, 300.0, 250.0, 250.0];
        let d = delta_r(&[r1, r2, r3, r4], 5, 9);
        assert_eq!(d.n_cross, Some(2));
        assert!(!d.fallback);
        // j = 6: 100 < 300; j = 7: 300 ≥ 300.
        assert_eq!(d.n_join, Some(7));
        // Spans over j = 2..=5: flow 1 420-400 = 20, flow 2 400-390 = 10, flow 3 0.
        assert_eq!(d.intra, Some(20.0));
        // SR1: 407.5, 397.5, 400 → 10.
        assert!((d.ave1.unwrap_or(f64::NAN) - 10.0).abs() < 1e-9);
        // SR2 over j = 7..=9: 300, 300, 350, 266.67 → 83.33.
        assert!((d.ave2.unwrap_or(f64::NAN) - (350.0 - 800.0 / 3.0)).abs() < 1e-9);
    }

    #[test]
    fn test_delta_r_falls_back_to_stability_when_flow_3_never_crosses() {
        let n = 40;
        let r1 = vec![500.0; n];
        let r2 = vec![500.0; n];
        // Flow 3 climbs by 5 per interval until j = 15, then holds at 100.
        let r3: Vec<f64> = (0..n).map(|j| (j.min(15) as f64) * 5.0 + 25.0).collect();
        let r4 = vec![0.0; n];
        let d = delta_r(&[r1, r2, r3, r4], 30, 39);
        assert!(d.fallback);
        // Least n with R3[n−10..=n] spanning < 20: values 25+5·min(j,15); n = 18 spans j = 8..18:
        // 65..100 (35); n = 21: 80..100 (20, not < 20); n = 22: 85..100 (15).
        assert_eq!(d.n_cross, Some(22));
        assert_eq!(d.n_join, None);
        assert_eq!(d.ave2, None);
        assert!(d.ave1.is_some_and(|a| a > 390.0));
    }
    /// A 400 ms series: 600 kbit/s until `drop_at`, then 400 ± `noise` (alternating).
    fn step_series(drop_at: f64, noise: f64) -> Vec<(f64, f64)> {
        (1..=100)
            .map(|k| {
                let t = k as f64 * 0.4;
                let x = if t - 0.4 < drop_at - 1e-9 {
                    600.0
                } else if k % 2 == 0 {
                    400.0 + noise
                } else {
                    400.0 - noise
                };
                (t, x)
            })
            .collect()
    }

    fn at(tol: f64) -> Stable {
        Stable::At { target: 400.0, tol }
    }

    #[test]
    fn test_settle_time_is_the_first_held_sample_after_the_change() {
        // Change at 10 s, flow 3 comes down at 16 s: the first in-band interval is
        // [16.0, 16.4], seen at 16.4 s, 6.4 s after the change.
        let s = step_series(16.0, 10.0);
        let t = settle_time(&s, 10.0, 0.4, at(40.0), 4.0);
        assert!((t.unwrap_or(f64::NAN) - 6.4).abs() < 1e-9, "{t:?}");
        // Already at the target at the change: one interval.
        let t = settle_time(&s, 20.0, 0.4, at(40.0), 4.0);
        assert!((t.unwrap_or(f64::NAN) - 0.4).abs() < 1e-9, "{t:?}");
        // Noise beyond the tolerance never settles.
        assert_eq!(settle_time(&s, 10.0, 0.4, at(5.0), 4.0), None);
        // A hold longer than what is left of the series cannot be confirmed.
        assert_eq!(settle_time(&s, 10.0, 0.4, at(40.0), 30.0), None);
    }

    #[test]
    fn test_settle_time_needs_the_whole_hold_in_band() {
        // In band from 12 s, but one sample at 14.0 s leaves it: settled from the next one.
        let mut s = step_series(12.0, 0.0);
        if let Some(p) = s.iter_mut().find(|p| (p.0 - 14.0).abs() < 1e-9) {
            p.1 = 300.0;
        }
        let t = settle_time(&s, 10.0, 0.4, at(40.0), 4.0);
        assert!((t.unwrap_or(f64::NAN) - 4.4).abs() < 1e-9, "{t:?}");
        // With a 1 s hold, the samples ending in [12.4, 13.4] hold: 2.4 s.
        let t = settle_time(&s, 10.0, 0.4, at(40.0), 1.0);
        assert!((t.unwrap_or(f64::NAN) - 2.4).abs() < 1e-9, "{t:?}");
    }

    #[test]
    fn test_settle_time_anywhere_accepts_a_steady_rate_off_the_target() {
        // Flow 3 drops at 11 s but to 500 (not the 400 target), ± 10.
        let s: Vec<(f64, f64)> = step_series(11.0, 10.0)
            .into_iter()
            .map(|(t, x)| (t, if x < 600.0 { x + 100.0 } else { x }))
            .collect();
        assert_eq!(settle_time(&s, 10.0, 0.4, at(40.0), 4.0), None);
        let any = Stable::Anywhere { tol_fraction: 0.05 };
        // Samples ending up to 11.2 s are 600; from 11.6 s they are 500 ± 10. A hold that
        // starts on a 600 mixes both levels; the first one that does not starts at 11.6 s.
        let t = settle_time(&s, 10.0, 0.4, any, 4.0);
        assert!((t.unwrap_or(f64::NAN) - 1.6).abs() < 1e-9, "{t:?}");
        // Steady from the start: the first interval.
        let flat: Vec<(f64, f64)> = (1..=50).map(|k| (k as f64 * 0.4, 300.0)).collect();
        let t = settle_time(&flat, 10.0, 0.4, any, 4.0);
        assert!((t.unwrap_or(f64::NAN) - 0.4).abs() < 1e-9, "{t:?}");
    }

    #[test]
    fn test_mean_from_counts_intervals_starting_at_or_after() {
        let pts = [(1.0, 0.5), (2.0, 0.7), (3.0, 0.9), (4.0, 1.0)];
        // Intervals [1,2], [2,3], [3,4] start at or after 1.0.
        let m = mean_from(&pts, 1.0, 1.0).unwrap_or(f64::NAN);
        assert!((m - (0.7 + 0.9 + 1.0) / 3.0).abs() < 1e-12);
        assert_eq!(mean_from(&pts, 1.5, 1.0), Some((0.9 + 1.0) / 2.0));
        assert_eq!(mean_from(&pts, 5.0, 1.0), None);
    }

    #[test]
    fn test_smoothness_of_constant_and_alternating_series() {
        assert_eq!(smoothness(&[300.0; 5]), Some((0.0, 0.0)));
        // 100, 300, 100, 300: mean 200, std 100 → CoV 0.5; every step 200 → 1.0.
        let (cov, step) = smoothness(&[100.0, 300.0, 100.0, 300.0]).unwrap_or((0.0, 0.0));
        assert!((cov - 0.5).abs() < 1e-12 && (step - 1.0).abs() < 1e-12);
        // The same values sorted: same CoV, a third of the step measure.
        let (cov2, step2) = smoothness(&[100.0, 100.0, 300.0, 300.0]).unwrap_or((0.0, 0.0));
        assert!((cov2 - 0.5).abs() < 1e-12 && (step2 - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(smoothness(&[1.0]), None);
        assert_eq!(smoothness(&[0.0, 0.0]), None);
    }
}
