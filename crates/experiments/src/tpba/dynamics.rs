//! Figures 10–12 (`tpba-fig10`, Topology 1, ≈ 12 ms RTT) and Figures 14–18 (`tpba-fig14`,
//! the long-RTT variant, ≈ 160 ms) of `papers/002` §6.1: flow 1 TCP from 0 s, flow 2 TCP from
//! 10 s to 25 s, flow 3 TPBA from 1 s. Rates over time (Figs. 10, 14, 17), Jain's fairness
//! over time (Figs. 11, 15, 18) and the ADU inter-arrival time `j_A` at the receiver around
//! the switching points (Figs. 12, 16). Scenarios: `experiments/tpba/topology{1,2}.toml`.

use super::{flow, jitter_starts, json, kbps_series, mean, run, scenario, seeds};
use crate::report::plot::line_chart_of;
use crate::report::spread::Spread;
use crate::report::table::Table;
use crate::{ExpError, ExpOptions, Experiment, Report};
use adaptnet_core::tpba::Period;
use adaptnet_sim::agents::tpba::{SwitchRecord, TpbaReceiver, TpbaSender};
use adaptnet_sim::media_metrics::{InterArrival, inter_arrivals, jain_series};
use adaptnet_sim::scenario::{FlowType, MediaFlow, Scenario};
use adaptnet_sim::world::FlowId;
use serde::Serialize;

/// `adaptnet exp tpba-fig10` or `tpba-fig14`.
pub struct Dynamics {
    name: &'static str,
    summary: &'static str,
    file: &'static str,
    /// Also run ADU1 (Figs. 17-18).
    adu1: bool,
    /// The paper's statements for this topology: (what, paper).
    paper: &'static [(&'static str, &'static str)],
}

impl Dynamics {
    /// Figures 10–12.
    pub fn topology1() -> Dynamics {
        Dynamics {
            name: "tpba-fig10",
            summary: "papers/002 Figs. 10-12: TPBA vs TCP flows joining/leaving, Topology 1 (1.2 Mbit/s, 12 ms): rates, fairness, j_A",
            file: "topology1.toml",
            adu1: false,
            paper: &[
                ("fairness when flow 2 starts (10 s)", "drops to 0.7"),
                ("flow 3 enters rate probing", "at 13.8 s"),
                ("fairness after that probing", "near 1"),
                (
                    "after flow 2 ends (25 s)",
                    "difference of flows 1 and 3 corrected at the next probing",
                ),
                ("j_A at switching points", "no significant jump (no loss)"),
                ("j_A fluctuation", "larger in probing than in running"),
            ],
        }
    }

    /// Figures 14–18.
    pub fn topology2() -> Dynamics {
        Dynamics {
            name: "tpba-fig14",
            summary: "papers/002 Figs. 14-18: the same with ~160 ms RTT (synthetic stand-in for the Keio-CMU path), ADU2 and ADU1",
            file: "topology2.toml",
            adu1: true,
            paper: &[
                (
                    "fairness",
                    "near 1 except while TCP flow 1 stalls (4-6 s, an Internet event)",
                ),
                (
                    "flow 2's effect",
                    "none (it did not share the bottleneck on the Internet path)",
                ),
                (
                    "j_A at switching points",
                    "no significant jump; one large j_A at 27 s from a UDP loss",
                ),
                ("ADU1 vs ADU2", "no key difference"),
            ],
        }
    }
}

/// One variant's measurements.
#[derive(Clone, Debug, Serialize)]
pub struct DynamicsRun {
    /// "ADU2" or "ADU1".
    pub adu: String,
    /// Seed.
    pub seed: u64,
    /// Rates (s, kbit/s) of flows 1, 2, 3.
    pub rates_kbps: Vec<Vec<(f64, f64)>>,
    /// Jain's index over the active flows.
    pub fairness: Vec<(f64, f64)>,
    /// Flow 3's switches.
    pub switches: Vec<SwitchRecord>,
    /// `j_A` of flow 3.
    pub j_a: Vec<InterArrival>,
    /// ADUs corrupted or out of order at the receiver (must be 0).
    pub bad_adus: u64,
}

/// §6.1's ADU1 (one 64-byte payload per ADU) for every TPBA flow of `s`.
pub(super) fn adu1(s: &mut Scenario) {
    for f in &mut s.flows {
        if let FlowType::Media(MediaFlow::Tpba(c)) = &mut f.kind {
            c.adu_bytes = 64;
            c.write_bytes = 64;
            c.fs.max_adu_bytes = 64;
            c.fs.send_queue_bytes = 64 * 64;
        }
    }
}

fn one(
    s: &Scenario,
    adu: &str,
    seed: u64,
    progress: &mut dyn FnMut(f64),
    done: f64,
    share: f64,
) -> Result<DynamicsRun, ExpError> {
    // Trials differ by when the flows were started by hand (each within 500 ms of its time).
    let mut s = s.clone();
    jitter_starts(&mut s, seed);
    let s = &s;
    let (w, r) = run(s, seed, progress, done, share)?;
    let rates = ["flow1", "flow2", "flow3"]
        .iter()
        .map(|n| flow(&r, n).map(|f| kbps_series(&r, f)))
        .collect::<Result<Vec<_>, _>>()?;
    let (snd, rcv) = w
        .flow_agents(FlowId(2))
        .ok_or_else(|| ExpError::Input(format!("{}: flow 3 missing", s.file)))?;
    let not_tpba = || ExpError::Input(format!("{}: flow 3 is not tpba", s.file));
    let sender = w.agent::<TpbaSender>(snd).ok_or_else(not_tpba)?;
    let receiver = w.agent::<TpbaReceiver>(rcv).ok_or_else(not_tpba)?;
    Ok(DynamicsRun {
        adu: adu.into(),
        seed,
        rates_kbps: rates,
        fairness: jain_series(&r, &["flow1", "flow2", "flow3"]),
        switches: sender.switches().to_vec(),
        j_a: inter_arrivals(receiver.arrivals()),
        bad_adus: receiver.corrupted() + receiver.out_of_order(),
    })
}

fn std_dev(xs: &[f64]) -> f64 {
    let m = mean(xs);
    mean(&xs.iter().map(|x| (x - m) * (x - m)).collect::<Vec<_>>()).sqrt()
}

/// The largest |j_A at a switch − mean of the five before it|, ms.
fn largest_switch_jump_ms(x: &DynamicsRun) -> f64 {
    let mut jump: f64 = 0.0;
    for (i, j) in x.j_a.iter().enumerate().filter(|(_, j)| j.switch) {
        let before: Vec<f64> = x.j_a[i.saturating_sub(5)..i]
            .iter()
            .map(|j| j.j_a_ms)
            .collect();
        if !before.is_empty() {
            jump = jump.max((j.j_a_ms - mean(&before)).abs());
        }
    }
    jump
}

/// `j_A`'s standard deviation in probing and in running periods, ms.
fn j_a_std_ms(x: &DynamicsRun) -> (f64, f64) {
    let probing: Vec<f64> = x.j_a.iter().filter(|j| j.tcp).map(|j| j.j_a_ms).collect();
    let running: Vec<f64> = x.j_a.iter().filter(|j| !j.tcp).map(|j| j.j_a_ms).collect();
    (std_dev(&probing), std_dev(&running))
}

/// Mean Jain's index over the samples ending in `(from, to]`.
fn jain_between(x: &DynamicsRun, from: f64, to: f64) -> Vec<f64> {
    x.fairness
        .iter()
        .filter(|p| p.0 > from && p.0 <= to)
        .map(|p| p.1)
        .collect()
}

/// Mean rate of flow `k` (0-based) over the samples ending in `(from, to]`, kbit/s.
fn rate_between(x: &DynamicsRun, k: usize, from: f64, to: f64) -> f64 {
    mean(
        &x.rates_kbps[k]
            .iter()
            .filter(|p| p.0 > from && p.0 <= to)
            .map(|p| p.1)
            .collect::<Vec<_>>(),
    )
}

/// `mean ± half-width` of `f` over `runs`.
fn over(runs: &[&DynamicsRun], decimals: usize, f: impl Fn(&DynamicsRun) -> Option<f64>) -> String {
    let v: Vec<f64> = runs.iter().filter_map(|x| f(x)).collect();
    if v.is_empty() {
        return "-".into();
    }
    let s = Spread::of(&v);
    let undefined = runs.len() - v.len();
    if undefined > 0 {
        format!("{} ({undefined} undefined)", s.fmt_with(decimals))
    } else {
        s.fmt_with(decimals)
    }
}

/// `j_A` summary: mean/std in each period, and around switches.
fn j_a_table(runs: &[DynamicsRun]) -> Table {
    let mut t = Table::new([
        "ADU",
        "seed",
        "periods",
        "mean j_A probing ms",
        "std probing",
        "mean j_A running ms",
        "std running",
        "max |j_A(switch) - mean of 5 before| ms",
        "bad ADUs",
    ]);
    for x in runs {
        let probing: Vec<f64> = x.j_a.iter().filter(|j| j.tcp).map(|j| j.j_a_ms).collect();
        let running: Vec<f64> = x.j_a.iter().filter(|j| !j.tcp).map(|j| j.j_a_ms).collect();
        let jump = largest_switch_jump_ms(x);
        t.row([
            x.adu.clone(),
            x.seed.to_string(),
            (x.switches.len() + 1).to_string(),
            format!("{:.1}", mean(&probing)),
            format!("{:.1}", std_dev(&probing)),
            format!("{:.1}", mean(&running)),
            format!("{:.1}", std_dev(&running)),
            format!("{jump:.1}"),
            x.bad_adus.to_string(),
        ]);
    }
    t
}

impl Experiment for Dynamics {
    fn name(&self) -> &'static str {
        self.name
    }

    fn summary(&self) -> &'static str {
        self.summary
    }

    fn run(&self, opts: &ExpOptions, progress: &mut dyn FnMut(f64)) -> Result<Report, ExpError> {
        let base = scenario(opts, self.file)?;
        let seeds = seeds(opts, 10, 2);
        let mut variants = vec![("ADU2", base.clone())];
        if self.adu1 {
            let mut s = base.clone();
            adu1(&mut s);
            variants.push(("ADU1", s));
        }
        let n = (seeds.len() * variants.len()) as f64;
        let mut runs = Vec::new();
        for (adu, s) in &variants {
            for seed in &seeds {
                let done = runs.len() as f64 / n;
                runs.push(one(s, adu, *seed, progress, done, 1.0 / n)?);
            }
        }
        let mut report = Report::default();
        report.text(format!(
            "papers/002 §6.1 ({}): flow 1 TCP 0-40 s, flow 2 TCP 10-25 s, flow 3 TPBA from 1 s \
             (T_running 10 s, T_adapt 3 s, T_rtcp 1 s, T_TCP 1 s, ε 30 kbit/s, R_f 3). Rates \
             averaged over S_average = 1 s at the receivers (flow 3: ADU bytes delivered on either \
             path). The paper's figures are lost in the text; its sentences are quoted. {} \
             trials (every start delayed by a draw in [0, 500 ms)); \"ours\" is the mean \
             over them ± the half-width of its 95 % interval (Student's t), the time series are \
             the first trial's. Scenario: experiments/tpba/{}.",
            base.description
                .as_deref()
                .unwrap_or("")
                .lines()
                .next()
                .unwrap_or(""),
            seeds.len(),
            self.file
        ));
        let first_seed = seeds.first().copied();
        for x in runs.iter().filter(|x| Some(x.seed) == first_seed) {
            let mut t = Table::new([
                "time s",
                "flow1 kbit/s",
                "flow2 kbit/s",
                "flow3 kbit/s",
                "Jain",
                "flow3 period",
            ]);
            for (i, (tm, _)) in x.rates_kbps[0].iter().enumerate() {
                let v = |k: usize| x.rates_kbps[k].get(i).map_or(0.0, |p| p.1);
                let jain = x
                    .fairness
                    .iter()
                    .find(|p| (p.0 - tm).abs() < 1e-9)
                    .map_or("-".into(), |p| format!("{:.3}", p.1));
                let period = x.switches.iter().rev().find(|s| s.at_s <= *tm).map_or(
                    "probing",
                    |s| match s.to {
                        Period::Probing => "probing",
                        Period::Running => "running",
                    },
                );
                t.row([
                    format!("{tm:.0}"),
                    format!("{:.0}", v(0)),
                    format!("{:.0}", v(1)),
                    format!("{:.0}", v(2)),
                    jain,
                    period.into(),
                ]);
            }
            let stem = format!("{}-{}-rates", self.name, x.adu.to_lowercase());
            report.table(
                format!("{}, seed {}: rates and fairness", x.adu, x.seed),
                &stem,
                t,
            );
            let mut sw = Table::new(["at s", "to", "rate kbit/s", "cwnd_new bytes"]);
            for s in &x.switches {
                sw.row([
                    format!("{:.2}", s.at_s),
                    format!("{:?}", s.to),
                    s.rate_bytes_per_s
                        .filter(|_| s.to == Period::Running)
                        .map_or("-".into(), |r| format!("{:.0}", r * 8.0 / 1e3)),
                    s.cwnd_new_bytes.map_or("-".into(), |c| c.to_string()),
                ]);
            }
            report.table(
                format!("{}: flow 3's switches", x.adu),
                &format!("{}-{}-switches", self.name, x.adu.to_lowercase()),
                sw,
            );
        }
        report.table(
            "ADU inter-arrival times j_A at the receiver",
            &format!("{}-ja-summary", self.name),
            j_a_table(&runs),
        );
        // Paper vs ours: every headline as a mean over the trials with its interval.
        let adu2: Vec<&DynamicsRun> = runs.iter().filter(|x| x.adu == "ADU2").collect();
        let min_jain = |x: &DynamicsRun| jain_between(x, 10.0, 14.0).into_iter().reduce(f64::min);
        let probe_after_join = |x: &DynamicsRun| {
            x.switches
                .iter()
                .find(|s| s.to == Period::Probing && s.at_s > 10.0)
                .map(|s| s.at_s)
        };
        let mean_jain = |from: f64, to: f64| {
            move |x: &DynamicsRun| {
                let v = jain_between(x, from, to);
                (!v.is_empty()).then(|| mean(&v))
            }
        };
        let jumps = over(&adu2, 0, |x| Some(largest_switch_jump_ms(x)));
        let stds = format!(
            "std of j_A {} ms probing vs {} running",
            over(&adu2, 1, |x| Some(j_a_std_ms(x).0)),
            over(&adu2, 1, |x| Some(j_a_std_ms(x).1))
        );
        let mut pt = Table::new(["", "paper", "ours"]);
        let ours: Vec<String> = if self.adu1 {
            let by_adu =
                |adu: &str| -> Vec<&DynamicsRun> { runs.iter().filter(|x| x.adu == adu).collect() };
            vec![
                format!("mean {} over 5-40 s", over(&adu2, 3, mean_jain(5.0, 40.0))),
                format!(
                    "flow 3 {} kbit/s in 18-25 s (flow 2 active) vs {} in 35-40 s",
                    over(&adu2, 0, |x| Some(rate_between(x, 2, 18.0, 25.0))),
                    over(&adu2, 0, |x| Some(rate_between(x, 2, 35.0, 40.0)))
                ),
                format!("largest jump at a switch {jumps} ms; {stds}"),
                ["ADU2", "ADU1"]
                    .iter()
                    .map(|a| {
                        format!(
                            "{a} flow 3 {} kbit/s",
                            over(&by_adu(a), 0, |x| Some(rate_between(x, 2, 0.0, 40.0)))
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
            ]
        } else {
            vec![
                format!("min {} in 10-14 s", over(&adu2, 2, min_jain)),
                format!("at {} s", over(&adu2, 1, probe_after_join)),
                format!(
                    "mean {} over 18-25 s",
                    over(&adu2, 3, mean_jain(18.0, 25.0))
                ),
                format!(
                    "flow 1 / flow 3: {} / {} kbit/s (26-30 s), {} / {} (35-40 s)",
                    over(&adu2, 0, |x| Some(rate_between(x, 0, 26.0, 30.0))),
                    over(&adu2, 0, |x| Some(rate_between(x, 2, 26.0, 30.0))),
                    over(&adu2, 0, |x| Some(rate_between(x, 0, 35.0, 40.0))),
                    over(&adu2, 0, |x| Some(rate_between(x, 2, 35.0, 40.0)))
                ),
                format!("largest jump at a switch {jumps} ms"),
                stds,
            ]
        };
        for (i, (what, paper)) in self.paper.iter().enumerate() {
            let o = ours.get(i).cloned().unwrap_or_else(|| "-".into());
            pt.row([what.to_string(), paper.to_string(), o]);
        }
        report.table("paper vs ours", &format!("{}-summary", self.name), pt);
        for x in runs.iter().filter(|x| Some(x.seed) == first_seed) {
            let adu = x.adu.to_lowercase();
            let labels = ["flow 1 (TCP)", "flow 2 (TCP)", "flow 3 (TPBA)"];
            let lines: Vec<(&str, Vec<(f64, f64)>)> = labels
                .iter()
                .copied()
                .zip(x.rates_kbps.iter().cloned())
                .collect();
            report.file(
                format!("{}-{adu}-rates.svg", self.name),
                line_chart_of(
                    &format!("{}: measured rates ({})", self.name, x.adu),
                    "time (s)",
                    "kbit/s",
                    &lines,
                )?
                .into_bytes(),
            );
            report.file(
                format!("{}-{adu}-fairness.svg", self.name),
                line_chart_of(
                    &format!("{}: fairness f ({})", self.name, x.adu),
                    "time (s)",
                    "Jain's index",
                    &[("f", x.fairness.clone())],
                )?
                .into_bytes(),
            );
            let tcp: Vec<(f64, f64)> = x
                .j_a
                .iter()
                .filter(|j| j.tcp)
                .map(|j| (j.at_s, j.j_a_ms))
                .collect();
            let udp: Vec<(f64, f64)> = x
                .j_a
                .iter()
                .filter(|j| !j.tcp)
                .map(|j| (j.at_s, j.j_a_ms))
                .collect();
            report.file(
                format!("{}-{adu}-ja.svg", self.name),
                line_chart_of(
                    &format!("{}: ADU inter-arrival j_A ({})", self.name, x.adu),
                    "time (s)",
                    "ms",
                    &[("probing (TCP)", tcp), ("running (UDP)", udp)],
                )?
                .into_bytes(),
            );
            let mut ja = Table::new(["at s", "j_A ms", "path", "switch"]);
            for j in &x.j_a {
                ja.row([
                    format!("{:.4}", j.at_s),
                    format!("{:.2}", j.j_a_ms),
                    if j.tcp { "tcp" } else { "udp" }.into(),
                    if j.switch { "yes" } else { "" }.into(),
                ]);
            }
            report.file(
                format!("{}-{adu}-ja.csv", self.name),
                ja.to_csv().into_bytes(),
            );
        }
        report.file(format!("{}.json", self.name), json(&runs)?);
        Ok(report)
    }
}
