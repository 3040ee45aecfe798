//! Throughput of NewReno, ADTCP and TCP-ELFN across mobility speeds (papers/004 §5.1, its
//! Figure 6): (a) mobility only, (b) mobility and channel error, (c) mobility, channel error
//! and competing traffic (on/off cross traffic where the paper had CBR flows). One TCP flow
//! per run; the three protocols see the same mobility and loss draws at each (speed, seed) —
//! a paired comparison: the ratios are taken per seed, then averaged, each with its 95 %
//! interval.

use super::{Params, json, kbit, run_path, run_seed};
use crate::report::plot::line_chart_of;
use crate::report::spread::Spread;
use crate::report::table::Table;
use crate::{ExpError, ExpOptions, Experiment, Report};
use adaptnet_sim::manet::Protocol;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// `adaptnet exp adtcp-throughput`.
pub struct Throughput;

/// The three cases: (name, channel error, competing cross traffic).
pub const CASES: [(&str, bool, bool); 3] = [
    ("mobility", false, false),
    ("mobility + channel error", true, false),
    ("mobility + channel error + cross traffic", true, true),
];

/// The protocols compared.
pub const PROTOCOLS: [Protocol; 3] = [Protocol::NewReno, Protocol::Adtcp, Protocol::Elfn];

/// One (case, speed) row: goodput per protocol over the seeds.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Case name.
    pub case: &'static str,
    /// Speed, m/s.
    pub speed_m_per_s: f64,
    /// Goodput, bit/s, in [`PROTOCOLS`] order.
    pub goodput_bps: [Spread; 3],
    /// ADTCP / NewReno, per seed.
    pub adtcp_over_newreno: Spread,
    /// ADTCP / ELFN, per seed.
    pub adtcp_over_elfn: Spread,
    /// ADTCP's reactions summed over the seeds.
    pub adtcp_reactions: BTreeMap<String, u64>,
    /// Mean path breaks per run: (route changes, disconnections).
    pub episodes: (f64, f64),
}

impl Experiment for Throughput {
    fn name(&self) -> &'static str {
        "adtcp-throughput"
    }

    fn summary(&self) -> &'static str {
        "papers/004 Fig. 6: NewReno vs ADTCP vs TCP-ELFN throughput vs mobility speed"
    }

    fn run(&self, opts: &ExpOptions, progress: &mut dyn FnMut(f64)) -> Result<Report, ExpError> {
        let p = Params::load(opts, "throughput.params")?;
        let seeds = p.seeds(opts);
        let speeds = p.speeds(opts.quick).to_vec();
        let duration = p.duration(opts.quick);
        let period = Duration::from_secs_f64(p.monitor_period_ms / 1e3);
        let total = (CASES.len() * speeds.len() * seeds.len() * PROTOCOLS.len()).max(1) as f64;
        let mut done = 0.0;
        let mut rows = Vec::new();
        for (case, err, cbr) in CASES {
            for &speed in &speeds {
                let cfg = p.path_config(speed, err, cbr, opts.quick);
                let mut samples: [Vec<f64>; 3] = Default::default();
                let mut reactions = BTreeMap::new();
                let mut episodes = (0.0, 0.0);
                for &seed in &seeds {
                    for (i, proto) in PROTOCOLS.iter().enumerate() {
                        let out =
                            run_path(&cfg, duration, run_seed(seed, speed), &[*proto], period)?;
                        if let Some(f) = out.flows.first() {
                            if let Some(s) = samples.get_mut(i) {
                                s.push(f.goodput_bps);
                            }
                            if *proto == Protocol::Adtcp {
                                for (k, v) in &f.policy {
                                    if k != "phase" {
                                        *reactions.entry(k.clone()).or_insert(0) += v;
                                    }
                                }
                            }
                        }
                        if i == 0 {
                            episodes.0 += out.episodes.0 as f64 / seeds.len() as f64;
                            episodes.1 += out.episodes.1 as f64 / seeds.len() as f64;
                        }
                        done += 1.0;
                        progress(done / total);
                    }
                }
                let ratio = |a: &[f64], b: &[f64]| {
                    let r: Vec<f64> = a.iter().zip(b).map(|(x, y)| x / y.max(1e-9)).collect();
                    Spread::of(&r)
                };
                rows.push(Row {
                    case,
                    speed_m_per_s: speed,
                    goodput_bps: [
                        Spread::of(&samples[0]),
                        Spread::of(&samples[1]),
                        Spread::of(&samples[2]),
                    ],
                    adtcp_over_newreno: ratio(&samples[1], &samples[0]),
                    adtcp_over_elfn: ratio(&samples[1], &samples[2]),
                    adtcp_reactions: reactions,
                    episodes,
                });
            }
        }
        report(&rows)
    }
}

fn report(rows: &[Row]) -> Result<Report, ExpError> {
    let mut r = Report::default();
    r.text(
        "papers/004 §5.1, Figure 6: TCP throughput vs node speed. The paper's numbers are lost \
         from its text; its claims are orderings: ADTCP well above NewReno in every case and \
         close to ELFN; NewReno more sensitive to speed than ADTCP; channel error widens the \
         ADTCP–ELFN gap a little (identification errors); with competing flows the gap \
         shrinks (congestion is identified accurately).",
    );
    let mut t = Table::new([
        "case",
        "speed m/s",
        "breaks (rte/disc)",
        "NewReno kbit/s",
        "ADTCP kbit/s",
        "ELFN kbit/s",
        "ADTCP/NewReno",
        "ADTCP/ELFN",
        "paper's claim",
    ]);
    for row in rows {
        let [nr, ad, el] = &row.goodput_bps;
        t.row([
            row.case.to_string(),
            format!("{:.0}", row.speed_m_per_s),
            format!("{:.1}/{:.1}", row.episodes.0, row.episodes.1),
            kbit(nr),
            kbit(ad),
            kbit(el),
            format!("{:.2}", row.adtcp_over_newreno),
            format!("{:.2}", row.adtcp_over_elfn),
            "ADTCP >> NewReno, ADTCP ≈ ELFN".to_string(),
        ]);
    }
    r.table(
        "Goodput per run and paired ratios (mean ± 95 % interval over seeds)",
        "throughput",
        t,
    );
    let mut re = Table::new([
        "case",
        "speed m/s",
        "congestion",
        "channel error",
        "route change",
        "disconnection",
        "probe failures",
        "reconnections",
    ]);
    for row in rows {
        let g = |k: &str| row.adtcp_reactions.get(k).copied().unwrap_or(0).to_string();
        re.row([
            row.case.to_string(),
            format!("{:.0}", row.speed_m_per_s),
            g("congestion"),
            g("channel_error"),
            g("route_change"),
            g("disconnection"),
            g("probe_failures"),
            g("reconnections"),
        ]);
    }
    r.table(
        "ADTCP sender reactions (sum over seeds)",
        "throughput_adtcp_reactions",
        re,
    );
    for (i, (case, _, _)) in CASES.iter().enumerate() {
        let series: Vec<(&str, Vec<(f64, f64)>)> = PROTOCOLS
            .iter()
            .enumerate()
            .map(|(j, p)| {
                (
                    p.name(),
                    rows.iter()
                        .filter(|x| x.case == *case)
                        .map(|x| {
                            (
                                x.speed_m_per_s,
                                x.goodput_bps.get(j).map_or(0.0, |s| s.mean) / 1e3,
                            )
                        })
                        .collect(),
                )
            })
            .collect();
        let svg = line_chart_of(
            &format!("TCP throughput vs speed: {case}"),
            "speed (m/s)",
            "throughput (kbit/s)",
            &series,
        )?;
        r.file(
            format!("throughput_{}.svg", ["a", "b", "c"][i]),
            svg.into_bytes(),
        );
    }
    r.file("throughput.json", json(&rows)?);
    Ok(r)
}
