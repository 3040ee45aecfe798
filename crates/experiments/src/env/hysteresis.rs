//! Hysteresis (papers/001 §6, the paper's open issue): a signal flapping around its levels
//! floods a socket with events; smoothing, a dead band and a minimum dwell (core's
//! [`adaptnet_core::env::Hysteresis`]) cut the events to the slow changes that matter. The
//! trace is synthetic: signal quality 13 + 0.6·sin(2πt/20 s) + Gaussian noise (σ 0.4), sampled
//! every 100 ms for 300 s; levels low 12.5 and high 13.5 (a TCP_RST_TIMERS socket acts on
//! every violation of the high level). The noise-free signal crosses each level once per 20 s
//! period: 30 events are "right".

use super::{json, mean, seeds};
use crate::report::plot::{Bars, bar_chart};
use crate::report::table::Table;
use crate::rng::SplitMix;
use crate::{ExpError, ExpOptions, Experiment, Report};
use adaptnet_core::Time;
use adaptnet_core::env::{self as core_env, EnvTable, Level, Name, Param, Watermarks};
use serde::Serialize;
use std::time::Duration;

/// `adaptnet exp env-hysteresis`.
pub struct Hysteresis;

/// The settings compared.
fn settings() -> Vec<(&'static str, core_env::Hysteresis)> {
    let none = core_env::Hysteresis::NONE;
    vec![
        ("none (§3 as written)", none),
        (
            "dead band 0.3",
            core_env::Hysteresis {
                dead_band: 0.3,
                ..none
            },
        ),
        (
            "smoothing w=0.2",
            core_env::Hysteresis {
                smoothing_weight: Some(0.2),
                ..none
            },
        ),
        (
            "min dwell 1 s",
            core_env::Hysteresis {
                min_dwell: Duration::from_secs(1),
                ..none
            },
        ),
        (
            "all three",
            core_env::Hysteresis {
                smoothing_weight: Some(0.2),
                dead_band: 0.3,
                min_dwell: Duration::from_secs(1),
            },
        ),
    ]
}

/// One run.
#[derive(Clone, Debug, Serialize)]
pub struct HysteresisRun {
    /// Setting.
    pub setting: String,
    /// Seed.
    pub seed: u64,
    /// Events.
    pub events: u64,
    /// Violations of the high level (timer resets a TCP_RST_TIMERS socket would do).
    pub high_violations: u64,
    /// Mean delay from a noise-free crossing of 13.5 upward to the next high violation, s.
    pub mean_lag_s: f64,
}

/// Counts events of the flapping trace under `h`.
pub fn count_events(seed: u64, h: core_env::Hysteresis) -> Result<HysteresisRun, ExpError> {
    let e = |e: core_env::EnvError| ExpError::Input(e.to_string());
    let dev = Name::new("wlan0").map_err(e)?;
    let sq = Param::SignalQuality;
    let mut table = EnvTable::new();
    let wms = Watermarks::new(vec![Level::low(12.5), Level::high(13.5)]).map_err(e)?;
    table.set_dev_param_wms(&dev, &sq, wms).map_err(e)?;
    table.set_hysteresis(&dev, &sq, h).map_err(e)?;
    let mut rng = SplitMix::new(seed, 0x4859_5354);
    let (mut events, mut highs) = (0u64, 0u64);
    let mut clean_ups = Vec::new();
    let mut high_times = Vec::new();
    let mut prev_clean = 13.0;
    for i in 0..3000u64 {
        let now = Time::from_millis(100 * i);
        let t = now.as_secs_f64();
        let clean = 13.0 + 0.6 * (2.0 * std::f64::consts::PI * t / 20.0).sin();
        if prev_clean < 13.5 && clean >= 13.5 {
            clean_ups.push(t);
        }
        prev_clean = clean;
        table.handle_timeout(now);
        table
            .set_dev_param(now, &dev, &sq, clean + 0.4 * rng.normal())
            .map_err(e)?;
        while let Some(ev) = table.poll_event() {
            events += 1;
            if ev.violated.contains(1) {
                highs += 1;
                high_times.push(ev.at.as_secs_f64());
            }
        }
    }
    let lags: Vec<f64> = clean_ups
        .iter()
        .filter_map(|c| {
            high_times
                .iter()
                .find(|&&h| h >= *c - 2.0)
                .map(|h| (h - c).max(0.0))
        })
        .collect();
    Ok(HysteresisRun {
        setting: String::new(),
        seed,
        events,
        high_violations: highs,
        mean_lag_s: mean(&lags),
    })
}

impl Experiment for Hysteresis {
    fn name(&self) -> &'static str {
        "env-hysteresis"
    }

    fn summary(&self) -> &'static str {
        "papers/001 §6: hysteresis (smoothing, dead band, dwell) against a flapping signal"
    }

    fn run(&self, opts: &ExpOptions, progress: &mut dyn FnMut(f64)) -> Result<Report, ExpError> {
        let seeds = seeds(opts, 10, 3);
        let settings = settings();
        let mut runs = Vec::new();
        for (i, (name, h)) in settings.iter().enumerate() {
            for &seed in &seeds {
                let mut r = count_events(seed, *h)?;
                r.setting = name.to_string();
                runs.push(r);
            }
            progress((i + 1) as f64 / settings.len() as f64);
        }
        let mut report = Report::default();
        report.text(format!(
            "Hysteresis (papers/001 §6; the paper has no numbers): events from 300 s of a \
             flapping signal-quality trace (mean of {} seeds); 30 events would follow the \
             noise-free signal. Lag: from the noise-free signal crossing 13.5 to the next \
             high-level violation.",
            seeds.len()
        ));
        let mut t = Table::new(["setting", "events", "high violations", "mean lag s"]);
        let mut bars = Vec::new();
        for (name, _) in &settings {
            let of = |k: &dyn Fn(&HysteresisRun) -> f64| {
                mean(
                    &runs
                        .iter()
                        .filter(|r| r.setting == *name)
                        .map(k)
                        .collect::<Vec<_>>(),
                )
            };
            let ev = of(&|r| r.events as f64);
            t.row([
                name.to_string(),
                format!("{ev:.1}"),
                format!("{:.1}", of(&|r| r.high_violations as f64)),
                format!("{:.2}", of(&|r| r.mean_lag_s)),
            ]);
            bars.push(ev);
        }
        report.table("Events on a flapping signal", "hysteresis", t);
        let svg = bar_chart(
            "Events from a flapping signal, by hysteresis setting",
            "events in 300 s",
            &Bars {
                categories: settings.iter().map(|(n, _)| n.to_string()).collect(),
                series: vec![("events", bars)],
            },
            None,
        )?;
        report.file("hysteresis.svg", svg.into_bytes());
        report.file("hysteresis.json", json(&runs)?);
        Ok(report)
    }
}
