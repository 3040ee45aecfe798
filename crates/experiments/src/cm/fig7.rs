//! Figure 7 (papers/003 §2.4): flows of one macroflow started at different times converge to
//! the scheduler's allocation — equal shares (`experiments/cm/fig7.toml`) or shares in
//! proportion to pre-configured weights (`fig7-weighted.toml`, weights 1:2:3:4). For each
//! phase (after a flow joins, until the next one does) we report the active flows' shares of
//! the macroflow's throughput against their weights.

use super::{json, run, scenario, seeds};
use crate::report::plot::line_chart_of;
use crate::report::table::Table;
use crate::{ExpError, ExpOptions, Experiment, Report};
use adaptnet_sim::metrics::{RunResults, jain_index};
use adaptnet_sim::scenario::{FlowType, Scenario};
use serde::Serialize;

/// Seconds after a join before shares are measured (slow start of the newcomer).
const SETTLE_S: f64 = 5.0;

/// `adaptnet exp cm-fig7`.
pub struct Fig7;

/// The shares in one phase of one run.
#[derive(Clone, Debug, Serialize)]
pub struct Fig7Phase {
    /// "equal" or "weighted".
    pub variant: String,
    /// Seed.
    pub seed: u64,
    /// Measurement window, s.
    pub from_s: f64,
    /// End of the window, s.
    pub to_s: f64,
    /// Per active flow: (name, weight share, measured share).
    pub shares: Vec<(String, f64, f64)>,
    /// Largest |measured / weight share − 1|.
    pub max_rel_error: f64,
    /// Jain's index of throughput / weight.
    pub jain_normalised: f64,
}

fn weights(s: &Scenario) -> Vec<f64> {
    s.flows
        .iter()
        .map(|f| match f.kind {
            FlowType::TcpCm { weight, .. } => weight,
            _ => 1.0,
        })
        .collect()
}

fn phases(variant: &str, seed: u64, s: &Scenario, r: &RunResults) -> Vec<Fig7Phase> {
    let w = weights(s);
    let mut starts: Vec<f64> = s.flows.iter().map(|f| f.start.as_secs_f64()).collect();
    starts.sort_by(f64::total_cmp);
    starts.dedup();
    let end = r.duration_s;
    let mut out = Vec::new();
    for (k, start) in starts.iter().enumerate() {
        let (from, to) = (start + SETTLE_S, starts.get(k + 1).copied().unwrap_or(end));
        if to - from < 2.0 * r.sample_period_s {
            continue;
        }
        let in_window = |t: f64| t > from + 1e-9 && t <= to + 1e-9;
        let active: Vec<usize> = (0..r.flows.len())
            .filter(|i| r.flows[*i].start_s <= *start + 1e-9)
            .collect();
        let bytes: Vec<f64> = active
            .iter()
            .map(|i| {
                r.sample_times_s
                    .iter()
                    .zip(&r.flows[*i].goodput_series_bps)
                    .filter(|(t, _)| in_window(**t))
                    .map(|(_, b)| *b)
                    .sum()
            })
            .collect();
        let total: f64 = bytes.iter().sum();
        let wsum: f64 = active.iter().map(|i| w[*i]).sum();
        if total <= 0.0 || wsum <= 0.0 {
            continue;
        }
        let shares: Vec<(String, f64, f64)> = active
            .iter()
            .zip(&bytes)
            .map(|(i, b)| (r.flows[*i].name.clone(), w[*i] / wsum, b / total))
            .collect();
        let max_rel_error = shares
            .iter()
            .map(|(_, want, got)| (got / want - 1.0).abs())
            .fold(0.0, f64::max);
        let normalised: Vec<f64> = active.iter().zip(&bytes).map(|(i, b)| b / w[*i]).collect();
        out.push(Fig7Phase {
            variant: variant.into(),
            seed,
            from_s: from,
            to_s: to,
            shares,
            max_rel_error,
            jain_normalised: jain_index(&normalised),
        });
    }
    out
}

fn rate_plot(r: &RunResults, title: &str) -> Result<Vec<u8>, ExpError> {
    let series: Vec<(String, Vec<(f64, f64)>)> = r
        .flows
        .iter()
        .map(|f| {
            let pts = r
                .sample_times_s
                .iter()
                .zip(&f.goodput_series_bps)
                .filter(|(t, _)| **t > f.start_s)
                .map(|(t, b)| (*t, b / 1e3))
                .collect();
            (f.name.clone(), pts)
        })
        .collect();
    Ok(line_chart_of(title, "time (s)", "throughput (kbit/s)", &series)?.into_bytes())
}

impl Experiment for Fig7 {
    fn name(&self) -> &'static str {
        "cm-fig7"
    }

    fn summary(&self) -> &'static str {
        "papers/003 Fig. 7: staggered TCP/CM flows converge to equal (or weighted) shares"
    }

    fn run(&self, opts: &ExpOptions, progress: &mut dyn FnMut(f64)) -> Result<Report, ExpError> {
        let seeds = seeds(opts, 2, 1);
        let variants = [("equal", "fig7.toml"), ("weighted", "fig7-weighted.toml")];
        let n = (seeds.len() * variants.len()) as f64;
        let mut all = Vec::new();
        let mut report = Report::default();
        report.text(
            "papers/003 Figure 7: four TCP/CM bulk flows in one macroflow start 15 s apart \
             (1 Mbit/s, 120 ms RTT, 50-packet buffer; reconstructed). Shares are measured from \
             5 s after each join until the next join. Paper: flows \"eventually achieve the same \
             rate allocation\".",
        );
        let mut k = 0.0;
        for seed in &seeds {
            for (variant, file) in variants {
                let mut s = scenario(opts, file)?;
                if opts.quick {
                    // Flows 8 s apart, 40 s in all.
                    for (i, f) in s.flows.iter_mut().enumerate() {
                        f.start = adaptnet_core::Time::from_secs(8 * i as u64);
                    }
                    s.duration = adaptnet_core::Time::from_secs(40);
                    for f in &mut s.flows {
                        f.stop = s.duration;
                    }
                }
                let r = run(&s, *seed, progress, k / n, 1.0 / n)?;
                k += 1.0;
                if *seed == seeds[0] {
                    report.file(
                        format!("fig7-{variant}.svg"),
                        rate_plot(
                            &r,
                            &format!("Fig. 7 ({variant} weights): per-flow throughput"),
                        )?,
                    );
                }
                all.extend(phases(variant, *seed, &s, &r));
            }
        }
        let mut t = Table::new([
            "variant",
            "seed",
            "window s",
            "weight shares %",
            "measured shares %",
            "max error %",
            "Jain (per weight)",
        ]);
        for p in &all {
            let pct = |v: &dyn Fn(&(String, f64, f64)) -> f64| {
                p.shares
                    .iter()
                    .map(|s| format!("{:.1}", v(s) * 100.0))
                    .collect::<Vec<_>>()
                    .join(" / ")
            };
            t.row([
                p.variant.clone(),
                p.seed.to_string(),
                format!("{:.0}-{:.0}", p.from_s, p.to_s),
                pct(&|s| s.1),
                pct(&|s| s.2),
                format!("{:.1}", p.max_rel_error * 100.0),
                format!("{:.3}", p.jain_normalised),
            ]);
        }
        report.table("Figure 7: shares per phase", "fig7-phases", t);
        report.file("fig7.json", json(&all)?);
        Ok(report)
    }
}
