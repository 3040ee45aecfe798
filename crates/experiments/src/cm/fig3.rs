//! Figure 3 (papers/003 §2.1): TCP-friendliness. Independent runs over a range of bottleneck
//! bandwidths, one bulk test flow (TCP/CM or NewReno) against Web-like background traffic.
//! Per run, `n_r` = the test flow's packets received and `n_d` = its packets dropped; from
//! `λ = K/√p`, `n_r² = K²·(n_r/n_d) + K²`, so both protocols' points should lie on lines of
//! similar slope. We fit each protocol's points by least squares and report the slopes and
//! their ratio. Base scenario: `experiments/cm/fig3.toml`.

use super::plot::{PointSet, fit_line, scatter_with_fits};
use super::web::{WebLoad, add_background};
use super::{flow, json, mean, run, scenario, seeds, set_bottleneck};
use crate::report::spread::Spread;
use crate::report::table::Table;
use crate::{ExpError, ExpOptions, Experiment, Report};
use adaptnet_core::Time;
use adaptnet_core::tcp::TcpConfig;
use adaptnet_sim::link::QueueLimit;
use adaptnet_sim::scenario::FlowType;
use serde::Serialize;

/// Bottleneck rates swept, Mbit/s.
const FULL_MBPS: [f64; 10] = [0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0];
const QUICK_MBPS: [f64; 3] = [0.5, 1.0, 2.0];
/// Background load as a fraction of the bottleneck.
const WEB_LOAD: f64 = 0.3;
/// Round-trip propagation delay, s (for the BDP buffer).
const RTT_S: f64 = 0.12;
/// Bytes per packet on the wire (1000-byte segments + 40 bytes of headers).
const WIRE_PACKET: f64 = 1040.0;

/// `adaptnet exp cm-fig3`.
pub struct Fig3;

/// One run's point.
#[derive(Clone, Debug, Serialize)]
pub struct Fig3Point {
    /// "newreno" or "tcp-cm".
    pub protocol: String,
    /// Bottleneck, Mbit/s.
    pub mbps: f64,
    /// Seed.
    pub seed: u64,
    /// Test-flow packets received.
    pub n_r: u64,
    /// Test-flow packets dropped.
    pub n_d: u64,
    /// Test-flow goodput, bit/s.
    pub goodput_bps: f64,
    /// Test-flow retransmission timeouts.
    pub timeouts: f64,
}

impl Fig3Point {
    fn xy(&self) -> Option<(f64, f64)> {
        (self.n_d > 0).then(|| {
            let nr = self.n_r as f64;
            (nr / self.n_d as f64, nr * nr)
        })
    }
}

/// A protocol's fit.
#[derive(Clone, Debug, Serialize)]
pub struct Fig3Fit {
    /// Protocol.
    pub protocol: String,
    /// Slope (K²), packets².
    pub slope: f64,
    /// Intercept, packets².
    pub intercept: f64,
    /// Coefficient of determination.
    pub r2: f64,
    /// Points used (runs with at least one drop).
    pub points: usize,
}

fn one_run(
    opts: &ExpOptions,
    tcp_cm: bool,
    mbps: f64,
    seed: u64,
    progress: &mut dyn FnMut(f64),
    done: f64,
    share: f64,
) -> Result<Fig3Point, ExpError> {
    let mut s = scenario(opts, "fig3.toml")?;
    if opts.quick {
        s.duration = Time::from_secs(20);
    }
    let bdp_packets = (mbps * 1e6 * RTT_S / 8.0 / WIRE_PACKET).round().max(10.0) as u32;
    set_bottleneck(&mut s, mbps * 1e6, Some(QueueLimit::Packets(bdp_packets)))?;
    for f in &mut s.flows {
        f.stop = s.duration;
        if f.name == "test" && !tcp_cm {
            f.kind = FlowType::Tcp {
                bytes: None,
                config: TcpConfig {
                    mss: 1000,
                    ..TcpConfig::default()
                },
            };
        }
    }
    let pairs = (1..=4)
        .map(|i| (format!("s{i}"), format!("r{i}")))
        .collect();
    add_background(&mut s, seed, &WebLoad::new(WEB_LOAD * mbps * 1e6, pairs));
    let r = run(&s, seed, progress, done, share)?;
    let f = flow(&r, "test")?;
    Ok(Fig3Point {
        protocol: if tcp_cm { "tcp-cm" } else { "newreno" }.into(),
        mbps,
        seed,
        n_r: f.packets_received,
        n_d: f.packets_lost,
        goodput_bps: f.goodput_bps,
        timeouts: f.counters.get("timeouts").copied().unwrap_or(0.0),
    })
}

/// Loss %, timeouts and goodput of each protocol per bottleneck rate (means over seeds; loss
/// from the summed packet counts), and TCP/CM's goodput relative to NewReno's.
fn by_rate(points: &[Fig3Point]) -> Table {
    let mut t = Table::new([
        "Mbit/s",
        "NewReno loss %",
        "TCP/CM loss %",
        "NewReno RTOs",
        "TCP/CM RTOs",
        "NewReno kbit/s",
        "TCP/CM kbit/s",
        "TCP/CM / NewReno",
    ]);
    let mut rates: Vec<f64> = points.iter().map(|p| p.mbps).collect();
    rates.sort_by(f64::total_cmp);
    rates.dedup();
    for mbps in rates {
        let stats = |protocol: &str| {
            let ps: Vec<&Fig3Point> = points
                .iter()
                .filter(|p| p.protocol == protocol && p.mbps == mbps)
                .collect();
            let (nr, nd) = ps.iter().fold((0, 0), |(r, d), p| (r + p.n_r, d + p.n_d));
            let loss = 100.0 * nd as f64 / (nr + nd).max(1) as f64;
            let rtos = mean(&ps.iter().map(|p| p.timeouts).collect::<Vec<_>>());
            let bps = mean(&ps.iter().map(|p| p.goodput_bps).collect::<Vec<_>>());
            (loss, rtos, bps)
        };
        let (nr, cm) = (stats("newreno"), stats("tcp-cm"));
        t.row([
            format!("{mbps}"),
            format!("{:.2}", nr.0),
            format!("{:.2}", cm.0),
            format!("{:.1}", nr.1),
            format!("{:.1}", cm.1),
            format!("{:.0}", nr.2 / 1e3),
            format!("{:.0}", cm.2 / 1e3),
            if nr.2 > 0.0 {
                format!("{:.2}", cm.2 / nr.2)
            } else {
                "-".into()
            },
        ]);
    }
    t
}

fn fit(protocol: &str, points: &[Fig3Point]) -> Option<Fig3Fit> {
    let xy: Vec<(f64, f64)> = points
        .iter()
        .filter(|p| p.protocol == protocol)
        .filter_map(Fig3Point::xy)
        .collect();
    let (slope, intercept) = fit_line(&xy)?;
    let my = xy.iter().map(|p| p.1).sum::<f64>() / xy.len() as f64;
    let ss_tot: f64 = xy.iter().map(|p| (p.1 - my).powi(2)).sum();
    let ss_res: f64 = xy
        .iter()
        .map(|p| (p.1 - (slope * p.0 + intercept)).powi(2))
        .sum();
    Some(Fig3Fit {
        protocol: protocol.into(),
        slope,
        intercept,
        r2: if ss_tot > 0.0 {
            1.0 - ss_res / ss_tot
        } else {
            1.0
        },
        points: xy.len(),
    })
}

impl Experiment for Fig3 {
    fn name(&self) -> &'static str {
        "cm-fig3"
    }

    fn summary(&self) -> &'static str {
        "papers/003 Fig. 3: TCP-friendliness, n_r^2 vs n_r/n_d for TCP/CM and NewReno"
    }

    fn run(&self, opts: &ExpOptions, progress: &mut dyn FnMut(f64)) -> Result<Report, ExpError> {
        let seeds = seeds(opts, 10, 2);
        let rates: &[f64] = if opts.quick { &QUICK_MBPS } else { &FULL_MBPS };
        let n = (seeds.len() * rates.len() * 2) as f64;
        let mut points = Vec::new();
        for seed in &seeds {
            for mbps in rates {
                for tcp_cm in [false, true] {
                    let done = points.len() as f64 / n;
                    points.push(one_run(
                        opts,
                        tcp_cm,
                        *mbps,
                        *seed,
                        progress,
                        done,
                        1.0 / n,
                    )?);
                }
            }
        }
        let mut report = Report::default();
        report.text(
            "papers/003 Figure 3: one bulk test flow (NewReno or TCP/CM) against Web-like \
             background (NewReno transfers, Poisson arrivals, Pareto sizes, 30 % of the \
             bottleneck; reconstructed), 120 ms RTT, buffer = 1 BDP (>= 10 packets), bottleneck \
             swept. n_r = test packets received, n_d = test packets dropped.",
        );
        let mut t = Table::new([
            "protocol", "Mbit/s", "seed", "n_r", "n_d", "loss %", "n_r/n_d", "kbit/s", "RTOs",
        ]);
        for p in &points {
            t.row([
                p.protocol.clone(),
                format!("{}", p.mbps),
                p.seed.to_string(),
                p.n_r.to_string(),
                p.n_d.to_string(),
                format!(
                    "{:.2}",
                    100.0 * p.n_d as f64 / (p.n_r + p.n_d).max(1) as f64
                ),
                p.xy().map_or("-".into(), |(x, _)| format!("{x:.1}")),
                format!("{:.0}", p.goodput_bps / 1e3),
                format!("{:.0}", p.timeouts),
            ]);
        }
        report.table("per run", "fig3-points", t);
        report.table(
            "per bottleneck, mean over seeds (TCP/CM should emulate NewReno, papers/003 Fig. 2)",
            "fig3-by-rate",
            by_rate(&points),
        );
        let fits: Vec<Fig3Fit> = ["newreno", "tcp-cm"]
            .iter()
            .filter_map(|p| fit(p, &points))
            .collect();
        let mut ft = Table::new(["protocol", "slope K^2", "intercept", "R^2", "points"]);
        for f in &fits {
            ft.row([
                f.protocol.clone(),
                format!("{:.4e}", f.slope),
                format!("{:.3e}", f.intercept),
                format!("{:.3}", f.r2),
                f.points.to_string(),
            ]);
        }
        report.table(
            "least-squares fits of n_r^2 = a (n_r/n_d) + b",
            "fig3-fits",
            ft,
        );
        let ratio = match fits.as_slice() {
            [nr, cm] if nr.slope != 0.0 => Some(cm.slope / nr.slope),
            _ => None,
        };
        // Each seed's own fit gives one ratio: the headline as a mean over seeds with its 95 %
        // interval.
        let per_seed: Vec<f64> = seeds
            .iter()
            .filter_map(|&sd| {
                let mine: Vec<Fig3Point> =
                    points.iter().filter(|p| p.seed == sd).cloned().collect();
                let (nr, cm) = (fit("newreno", &mine)?, fit("tcp-cm", &mine)?);
                (nr.slope != 0.0).then(|| cm.slope / nr.slope)
            })
            .collect();
        let mut pt = Table::new(["metric", "paper", "ours"]);
        pt.row([
            "slope TCP/CM / slope NewReno, all seeds' points in one fit",
            "similar (~1)",
            &ratio.map_or("-".into(), |r| format!("{r:.2}")),
        ]);
        pt.row([
            "the same ratio per seed: mean ± 95 % interval".to_string(),
            "similar (~1)".to_string(),
            format!(
                "{} ({} seeds; 1 inside: {})",
                Spread::of(&per_seed).fmt_with(2),
                per_seed.len(),
                if Spread::of(&per_seed).contains(1.0) {
                    "yes"
                } else {
                    "no"
                }
            ),
        ]);
        report.table("Figure 3, paper vs ours", "fig3-summary", pt);
        let sets: Vec<PointSet> = ["newreno", "tcp-cm"]
            .iter()
            .map(|proto| PointSet {
                label: proto,
                points: points
                    .iter()
                    .filter(|p| p.protocol == *proto)
                    .filter_map(Fig3Point::xy)
                    .collect(),
                fit: fits
                    .iter()
                    .find(|f| f.protocol == *proto)
                    .map(|f| (f.slope, f.intercept)),
            })
            .collect();
        report.file(
            "fig3.svg",
            scatter_with_fits(
                "Fig. 3: n_r^2 vs n_r/n_d (least-squares lines)",
                "n_r / n_d",
                "n_r^2",
                &sets,
            )?
            .into_bytes(),
        );
        report.file("fig3.json", json(&(&points, &fits, ratio))?);
        Ok(report)
    }
}
