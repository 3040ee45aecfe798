//! §6.2's δR metrics (`papers/002`, "Quantitative Comparison"), exactly as defined there.
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
}
