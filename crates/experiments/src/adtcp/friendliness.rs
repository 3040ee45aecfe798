//! TCP-friendliness (papers/004 §5.2, its Figure 7): two TCP flows share the mobile path with
//! channel error — NewReno + NewReno, NewReno + ADTCP, ADTCP + ADTCP. ADTCP is friendly if
//! the NewReno flow beside it gets no less than beside another NewReno flow. Means over seeds
//! with their 95 % intervals; the pairs see the same path at each (speed, seed).

use super::{Params, json, mean, run_path, run_seed};
use crate::report::plot::line_chart_of;
use crate::report::spread::Spread;
use crate::report::table::Table;
use crate::{ExpError, ExpOptions, Experiment, Report};
use adaptnet_sim::manet::Protocol;
use serde::Serialize;
use std::time::Duration;

/// `adaptnet exp adtcp-friendliness`.
pub struct Friendliness;

/// The pairs compared.
pub const PAIRS: [(&str, [Protocol; 2]); 3] = [
    ("NewReno + NewReno", [Protocol::NewReno, Protocol::NewReno]),
    ("NewReno + ADTCP", [Protocol::NewReno, Protocol::Adtcp]),
    ("ADTCP + ADTCP", [Protocol::Adtcp, Protocol::Adtcp]),
];

/// One (pair, speed) row.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Pair name.
    pub pair: &'static str,
    /// Speed, m/s.
    pub speed_m_per_s: f64,
    /// Mean goodput of each flow, bit/s.
    pub flow_bps: [f64; 2],
    /// Each flow's goodput per seed, bit/s.
    pub per_seed_bps: [Vec<f64>; 2],
}

impl Experiment for Friendliness {
    fn name(&self) -> &'static str {
        "adtcp-friendliness"
    }

    fn summary(&self) -> &'static str {
        "papers/004 Fig. 7: two flows sharing the path, NewReno/ADTCP mixes (TCP-friendliness)"
    }

    fn run(&self, opts: &ExpOptions, progress: &mut dyn FnMut(f64)) -> Result<Report, ExpError> {
        let p = Params::load(opts, "friendliness.params")?;
        let seeds = p.seeds(opts);
        let speeds = p.speeds(opts.quick).to_vec();
        let duration = p.duration(opts.quick);
        let period = Duration::from_secs_f64(p.monitor_period_ms / 1e3);
        let total = (PAIRS.len() * speeds.len() * seeds.len()).max(1) as f64;
        let mut done = 0.0;
        let mut rows = Vec::new();
        for (pair, protos) in PAIRS {
            for &speed in &speeds {
                let cfg = p.path_config(speed, true, false, opts.quick);
                let mut a = Vec::new();
                let mut b = Vec::new();
                for &seed in &seeds {
                    let out = run_path(&cfg, duration, run_seed(seed, speed), &protos, period)?;
                    if let [fa, fb] = out.flows.as_slice() {
                        a.push(fa.goodput_bps);
                        b.push(fb.goodput_bps);
                    }
                    done += 1.0;
                    progress(done / total);
                }
                rows.push(Row {
                    pair,
                    speed_m_per_s: speed,
                    flow_bps: [mean(&a), mean(&b)],
                    per_seed_bps: [a, b],
                });
            }
        }
        report(&rows, &speeds)
    }
}

fn report(rows: &[Row], speeds: &[f64]) -> Result<Report, ExpError> {
    let mut r = Report::default();
    r.text(
        "papers/004 §5.2, Figure 7: two flows on the mobile path with channel error. The \
         paper's numbers are lost from its text; its claims: the NewReno flow's throughput \
         does not fall when its peer is ADTCP instead of NewReno (ADTCP does not steal), and \
         the aggregate rises with ADTCP flows. The flow started first is flow 1.",
    );
    let mut t = Table::new([
        "pair",
        "speed m/s",
        "flow 1 kbit/s",
        "flow 2 kbit/s",
        "aggregate kbit/s",
        "paper's claim",
    ]);
    let kbit = |xs: &[f64]| {
        let s = Spread::of(xs);
        format!("{:.0} ± {:.0}", s.mean / 1e3, s.half_width_95 / 1e3)
    };
    for row in rows {
        let [a, b] = &row.per_seed_bps;
        let agg: Vec<f64> = a.iter().zip(b).map(|(x, y)| x + y).collect();
        t.row([
            row.pair.to_string(),
            format!("{:.0}", row.speed_m_per_s),
            kbit(a),
            kbit(b),
            kbit(&agg),
            match row.pair {
                "NewReno + ADTCP" => "NewReno flow ≈ its share beside NewReno",
                "ADTCP + ADTCP" => "aggregate ≥ NewReno + NewReno",
                _ => "baseline",
            }
            .to_string(),
        ]);
    }
    r.table(
        "Goodput per flow (mean ± 95 % interval over seeds)",
        "friendliness",
        t,
    );
    let mut f = Table::new([
        "speed m/s",
        "NewReno beside NewReno kbit/s",
        "NewReno beside ADTCP kbit/s",
        "ratio (per seed)",
    ]);
    for &s in speeds {
        let get = |pair: &str| {
            rows.iter()
                .find(|x| x.pair == pair && x.speed_m_per_s == s)
                .map(|x| &x.per_seed_bps)
        };
        if let (Some(nn), Some(na)) = (get("NewReno + NewReno"), get("NewReno + ADTCP")) {
            // NewReno + NewReno: the mean of its two flows, per seed (same path as the pair).
            let base: Vec<f64> = nn[0]
                .iter()
                .zip(&nn[1])
                .map(|(x, y)| (x + y) / 2.0)
                .collect();
            let ratio: Vec<f64> = na[0]
                .iter()
                .zip(&base)
                .map(|(x, b)| x / b.max(1e-9))
                .collect();
            f.row([
                format!("{s:.0}"),
                kbit(&base),
                kbit(&na[0]),
                format!("{:.2}", Spread::of(&ratio)),
            ]);
        }
    }
    r.table(
        "Does ADTCP take NewReno's share? (NewReno + NewReno: mean of its two flows)",
        "friendliness_newreno_share",
        f,
    );
    let series: Vec<(&str, Vec<(f64, f64)>)> = PAIRS
        .iter()
        .map(|(pair, _)| {
            (
                *pair,
                rows.iter()
                    .filter(|x| x.pair == *pair)
                    .map(|x| (x.speed_m_per_s, (x.flow_bps[0] + x.flow_bps[1]) / 1e3))
                    .collect(),
            )
        })
        .collect();
    r.file(
        "friendliness_aggregate.svg",
        line_chart_of(
            "Aggregate throughput of two flows vs speed",
            "speed (m/s)",
            "throughput (kbit/s)",
            &series,
        )?
        .into_bytes(),
    );
    r.file("friendliness.json", json(&rows)?);
    Ok(r)
}
