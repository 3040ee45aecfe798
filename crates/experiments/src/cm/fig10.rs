//! Figure 10 (papers/003 §4.2): a layered audio server over the CM and a TCP/CM transfer on
//! the same host (one macroflow), against a TCP NewReno transfer and CBR cross traffic over a
//! 0.5 Mbit/s, 120 ms bottleneck. Scenario: `experiments/cm/fig10.toml`.
//!
//! Reported: each flow's mean throughput over the run, the audio + TCP/CM sum against
//! NewReno, and the share of time the audio spent at each encoding; plots of the encoding
//! over time and of the flows' throughput.

use super::plot::steps;
use super::{flow, jitter_starts, json, kbps, mean, scenario, seeds};
use crate::report::plot::{Series, line_chart, line_chart_of};
use crate::report::spread::Spread;
use crate::report::table::Table;
use crate::{ExpError, ExpOptions, Experiment, Report};
use adaptnet_core::Time;
use adaptnet_sim::agents::cm::{CmAudioSender, EncodingChange};
use adaptnet_sim::metrics::RunResults;
use adaptnet_sim::world::FlowId;
use serde::Serialize;
use std::time::Duration;

const TEST_FLOWS: [&str; 3] = ["audio", "tcp-cm", "newreno"];

/// `adaptnet exp cm-fig10`.
pub struct Fig10;

/// One run's numbers.
#[derive(Clone, Debug, Serialize)]
pub struct Fig10Run {
    /// Seed.
    pub seed: u64,
    /// Mean throughput over the run, bit/s.
    pub audio_bps: f64,
    /// Mean throughput of the TCP/CM transfer, bit/s.
    pub tcp_cm_bps: f64,
    /// Mean throughput of the NewReno transfer, bit/s.
    pub newreno_bps: f64,
    /// Mean throughput of the CBR cross traffic, bit/s.
    pub cbr_bps: f64,
    /// (encoding bit/s, fraction of the run's time at it).
    pub encoding_time: Vec<(u64, f64)>,
    /// Encoding switches.
    pub switches: usize,
    /// Simulated time, s.
    pub duration_s: f64,
    /// Encoding changes: (time s, encoding bit/s, CM rate share bit/s that chose it).
    pub history: Vec<(f64, u64, Option<f64>)>,
}

/// Runs Figure 10 once.
pub fn run_one(
    opts: &ExpOptions,
    seed: u64,
    progress: &mut dyn FnMut(f64),
    done: f64,
    share: f64,
) -> Result<(Fig10Run, RunResults), ExpError> {
    let mut s = scenario(opts, "fig10.toml")?;
    if opts.quick {
        s.duration = Time::from_secs(40);
        for f in &mut s.flows {
            f.stop = f.stop.min(s.duration);
        }
    }
    jitter_starts(&mut s, seed, &TEST_FLOWS, Duration::from_millis(100));
    let audio_index = s
        .flows
        .iter()
        .position(|f| f.name == "audio")
        .ok_or_else(|| ExpError::Input(format!("{}: no flow named \"audio\"", s.file)))?;
    let mut world = s.build(seed)?;
    let total = s.duration.as_secs_f64();
    world.run_until(s.duration, &mut |t: Time| {
        progress(done + share * (t.as_secs_f64() / total).min(1.0))
    });
    let history: Vec<EncodingChange> = world
        .flow_agents(FlowId(audio_index as u32))
        .and_then(|(sender, _)| world.agent::<CmAudioSender>(sender))
        .map(|a| a.history().to_vec())
        .ok_or_else(|| ExpError::Input("flow \"audio\" is not a cm-audio flow".into()))?;
    let r = world.results(&s.name);
    let bps = |name: &str| -> Result<f64, ExpError> {
        let f = flow(&r, name)?;
        Ok(f.bytes_delivered as f64 * 8.0 / (f.stop_s - f.start_s).max(1e-9))
    };
    let run = Fig10Run {
        seed,
        audio_bps: bps("audio")?,
        tcp_cm_bps: bps("tcp-cm")?,
        newreno_bps: bps("newreno")?,
        cbr_bps: bps("cross-cbr")?,
        encoding_time: time_at_encodings(&history, total),
        switches: history.len().saturating_sub(1),
        duration_s: total,
        history: history
            .iter()
            .map(|h| {
                (
                    h.at.as_secs_f64(),
                    h.encoding_bps,
                    h.rate_bytes_per_s.map(|r| r * 8.0),
                )
            })
            .collect(),
    };
    Ok((run, r))
}

/// Fraction of `[first change, end]` spent at each encoding, by encoding.
fn time_at_encodings(h: &[EncodingChange], end_s: f64) -> Vec<(u64, f64)> {
    let mut acc: std::collections::BTreeMap<u64, f64> = Default::default();
    let Some(first) = h.first() else {
        return Vec::new();
    };
    let span = (end_s - first.at.as_secs_f64()).max(1e-9);
    for (i, c) in h.iter().enumerate() {
        let until = h.get(i + 1).map_or(end_s, |n| n.at.as_secs_f64());
        *acc.entry(c.encoding_bps).or_default() += (until - c.at.as_secs_f64()) / span;
    }
    acc.into_iter().collect()
}

fn plots(run: &Fig10Run, r: &RunResults) -> Result<(Vec<u8>, Vec<u8>), ExpError> {
    let changes: Vec<(f64, f64)> = run
        .history
        .iter()
        .map(|(t, e, _)| (*t, *e as f64 / 1e3))
        .collect();
    let rates: Vec<(f64, f64)> = run
        .history
        .iter()
        .filter_map(|(t, _, rate)| rate.map(|v| (*t, v / 1e3)))
        .collect();
    let enc = line_chart(
        "Fig. 10: audio encoding over time",
        "time (s)",
        "kbit/s",
        &[
            Series {
                label: "encoding",
                points: steps(&changes, r.duration_s),
            },
            Series {
                label: "CM rate share at change_rate",
                points: rates,
            },
        ],
    )?;
    let mut series = Vec::new();
    for name in TEST_FLOWS {
        let f = flow(r, name)?;
        let pts = r
            .sample_times_s
            .iter()
            .zip(&f.goodput_series_bps)
            .map(|(t, b)| (*t, b / 1e3))
            .collect::<Vec<_>>();
        series.push((name, pts));
    }
    let tput = line_chart_of(
        "Fig. 10: throughput per flow",
        "time (s)",
        "kbit/s",
        &series,
    )?;
    Ok((enc.into_bytes(), tput.into_bytes()))
}

impl Experiment for Fig10 {
    fn name(&self) -> &'static str {
        "cm-fig10"
    }

    fn summary(&self) -> &'static str {
        "papers/003 Fig. 10: layered audio + TCP/CM vs NewReno, 0.5 Mbit/s, 120 ms"
    }

    fn run(&self, opts: &ExpOptions, progress: &mut dyn FnMut(f64)) -> Result<Report, ExpError> {
        let seeds = seeds(opts, 10, 2);
        let share = 1.0 / seeds.len() as f64;
        let mut runs = Vec::new();
        let mut first = None;
        for (i, seed) in seeds.iter().enumerate() {
            let (run, r) = run_one(opts, *seed, progress, i as f64 * share, share)?;
            if first.is_none() {
                first = Some(plots(&run, &r)?);
            }
            runs.push(run);
        }
        let mut report = Report::default();
        report.text(
            "papers/003 Figure 10: audio (CM probes only) + TCP/CM on one host vs TCP NewReno, \
             200 kbit/s CBR cross traffic (reconstructed), 0.5 Mbit/s, 120 ms RTT, 50-packet \
             buffer. Throughput = bytes delivered / run time. Seeds differ by the test flows' \
             start times (within 100 ms) and the cross traffic's; the ratio is given as the mean \
             of each seed's ratio ± the half-width of its 95 % interval (Student's t).",
        );
        let m = |f: &dyn Fn(&Fig10Run) -> f64| mean(&runs.iter().map(f).collect::<Vec<_>>());
        let at = |enc: u64| {
            m(&|r: &Fig10Run| {
                r.encoding_time
                    .iter()
                    .find(|(e, _)| *e == enc)
                    .map_or(0.0, |(_, f)| *f)
            })
        };
        let mut t = Table::new(["metric", "paper", "ours"]);
        let (audio, tcp, nr) = (
            m(&|r| r.audio_bps),
            m(&|r| r.tcp_cm_bps),
            m(&|r| r.newreno_bps),
        );
        t.row(["TCP NewReno kbit/s", "~150", &kbps(nr)]);
        t.row(["audio kbit/s", "~50", &kbps(audio)]);
        t.row(["TCP/CM kbit/s", "~85", &kbps(tcp)]);
        t.row(["audio + TCP/CM kbit/s", "~135", &kbps(audio + tcp)]);
        // The headline as a mean over seeds of each seed's ratio, with its 95 % interval.
        let ratios: Vec<f64> = runs
            .iter()
            .map(|r| (r.audio_bps + r.tcp_cm_bps) / r.newreno_bps.max(1.0))
            .collect();
        t.row([
            "(audio + TCP/CM) / NewReno, mean ± 95 % over seeds",
            "~0.9",
            &Spread::of(&ratios).fmt_with(2),
        ]);
        t.row(["CBR cross traffic kbit/s", "-", &kbps(m(&|r| r.cbr_bps))]);
        for (enc, paper) in [
            (40_000, "occasionally"),
            (80_000, "primarily"),
            (160_000, "occasionally"),
        ] {
            t.row([
                format!("time at {} kbit/s encoding", enc / 1000),
                paper.to_string(),
                format!("{:.0} %", at(enc) * 100.0),
            ]);
        }
        t.row([
            "time at other encodings".to_string(),
            "-".into(),
            format!(
                "{:.0} %",
                (1.0 - at(40_000) - at(80_000) - at(160_000)).max(0.0) * 100.0
            ),
        ]);
        t.row([
            "encoding switches per minute".to_string(),
            "-".into(),
            format!(
                "{:.1}",
                m(&|r| r.switches as f64 * 60.0 / r.duration_s.max(1e-9))
            ),
        ]);
        report.table(
            format!("Figure 10, paper vs ours (mean over seeds {seeds:?})"),
            "fig10-summary",
            t,
        );
        if let Some((enc, tput)) = first {
            report.file("fig10-encoding.svg", enc);
            report.file("fig10-throughput.svg", tput);
        }
        report.file("fig10.json", json(&runs)?);
        Ok(report)
    }
}
