//! Figure 4 (papers/003 §2.2.1): packet loss probability of the CM's congestion control against
//! the feedback frequency. A greedy probe-fed CM sender competes with a NewReno bulk transfer
//! and Web-like background; the CM's probe rate (`probes_per_rtt`) is varied. The paper's
//! conclusion: feedback at least twice per RTT. Base scenario: `experiments/cm/fig4.toml`.
//!
//! Our CM keeps exponential aging on in every run (the paper does not say whether Figure 4 had
//! it): with probes rarer than once per RTT, aging halves the rate between responses, which
//! trades loss for throughput — both are reported.

use super::web::{WebLoad, add_background};
use super::{flow, json, mean, run, scenario, seeds};
use crate::report::plot::{Series, line_chart};
use crate::report::table::Table;
use crate::{ExpError, ExpOptions, Experiment, Report};
use adaptnet_core::Time;
use serde::Serialize;

const FULL_FREQS: [f64; 6] = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0];
const QUICK_FREQS: [f64; 3] = [0.5, 2.0, 8.0];

/// `adaptnet exp cm-fig4`.
pub struct Fig4;

/// One run.
#[derive(Clone, Debug, Serialize)]
pub struct Fig4Run {
    /// Probes per smoothed RTT.
    pub probes_per_rtt: f64,
    /// Seed.
    pub seed: u64,
    /// CM flow: packets sent.
    pub sent: u64,
    /// CM flow: packets lost in the network.
    pub lost: u64,
    /// CM flow goodput, bit/s.
    pub goodput_bps: f64,
    /// NewReno goodput, bit/s.
    pub newreno_bps: f64,
    /// Exponential-aging halvings on the CM host.
    pub aging_halvings: f64,
    /// Multiplicative decreases on the CM host.
    pub decreases: f64,
}

impl Fig4Run {
    fn loss(&self) -> f64 {
        self.lost as f64 / self.sent.max(1) as f64
    }
}

fn one_run(
    opts: &ExpOptions,
    freq: f64,
    seed: u64,
    progress: &mut dyn FnMut(f64),
    done: f64,
    share: f64,
) -> Result<Fig4Run, ExpError> {
    let mut s = scenario(opts, "fig4.toml")?;
    if opts.quick {
        s.duration = Time::from_secs(30);
        for f in &mut s.flows {
            f.stop = f.stop.min(s.duration);
        }
    }
    s.cm.probes_per_rtt = freq;
    let pairs = vec![("s2".into(), "r2".into()), ("s3".into(), "r3".into())];
    add_background(&mut s, seed, &WebLoad::new(0.2e6, pairs));
    let r = run(&s, seed, progress, done, share)?;
    let f = flow(&r, "cm")?;
    let c = |k: &str| f.counters.get(k).copied().unwrap_or(0.0);
    Ok(Fig4Run {
        probes_per_rtt: freq,
        seed,
        sent: f.packets_sent,
        lost: f.packets_lost,
        goodput_bps: f.goodput_bps,
        newreno_bps: flow(&r, "newreno")?.goodput_bps,
        aging_halvings: c("cm_host_aging_halvings"),
        decreases: c("cm_host_decreases"),
    })
}

impl Experiment for Fig4 {
    fn name(&self) -> &'static str {
        "cm-fig4"
    }

    fn summary(&self) -> &'static str {
        "papers/003 Fig. 4: CM packet loss probability vs feedback frequency (probes per RTT)"
    }

    fn run(&self, opts: &ExpOptions, progress: &mut dyn FnMut(f64)) -> Result<Report, ExpError> {
        let seeds = seeds(opts, 3, 1);
        let freqs: &[f64] = if opts.quick {
            &QUICK_FREQS
        } else {
            &FULL_FREQS
        };
        let n = (seeds.len() * freqs.len()) as f64;
        let mut runs = Vec::new();
        for seed in &seeds {
            for f in freqs {
                let done = runs.len() as f64 / n;
                runs.push(one_run(opts, *f, *seed, progress, done, 1.0 / n)?);
            }
        }
        let mut report = Report::default();
        report.text(
            "papers/003 Figure 4: a greedy probe-fed CM sender vs one NewReno bulk transfer and \
             Web-like background (20 %), 1 Mbit/s, 120 ms RTT, 50-packet buffer; the CM's probes \
             per RTT are varied (default 2). Paper: feedback should come at least twice per RTT \
             (its loss-probability values are not recoverable from the text).",
        );
        let mut t = Table::new([
            "probes/RTT",
            "loss % (CM flow)",
            "CM kbit/s",
            "NewReno kbit/s",
            "aging halvings",
            "decreases",
        ]);
        let mut loss_pts = Vec::new();
        let mut tput_pts = Vec::new();
        for f in freqs {
            let rs: Vec<&Fig4Run> = runs.iter().filter(|r| r.probes_per_rtt == *f).collect();
            let m =
                |g: &dyn Fn(&Fig4Run) -> f64| mean(&rs.iter().map(|r| g(r)).collect::<Vec<_>>());
            let loss = m(&|r| r.loss());
            loss_pts.push((*f, loss * 100.0));
            tput_pts.push((*f, m(&|r| r.goodput_bps) / 1e3));
            t.row([
                format!("{f}"),
                format!("{:.2}", loss * 100.0),
                format!("{:.0}", m(&|r| r.goodput_bps) / 1e3),
                format!("{:.0}", m(&|r| r.newreno_bps) / 1e3),
                format!("{:.0}", m(&|r| r.aging_halvings)),
                format!("{:.0}", m(&|r| r.decreases)),
            ]);
        }
        report.table(
            format!("Figure 4 (mean over seeds {seeds:?})"),
            "fig4-summary",
            t,
        );
        report.file(
            "fig4.svg",
            line_chart(
                "Fig. 4: CM packet loss probability vs feedback frequency",
                "probes per RTT",
                "packet loss (%)",
                &[Series {
                    label: "CM flow loss %",
                    points: loss_pts,
                }],
            )?
            .into_bytes(),
        );
        report.file(
            "fig4-throughput.svg",
            line_chart(
                "CM flow throughput vs feedback frequency",
                "probes per RTT",
                "kbit/s",
                &[Series {
                    label: "CM flow kbit/s",
                    points: tput_pts,
                }],
            )?
            .into_bytes(),
        );
        report.file("fig4.json", json(&runs)?);
        Ok(report)
    }
}
