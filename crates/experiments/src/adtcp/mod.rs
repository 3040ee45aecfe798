//! The ADTCP experiments (papers/004, Fu, Greenstein, Meng and Lu, ICNP '02): the metrics
//! against the queue (§3, Figure 3), identification accuracy (§3, Figure 4), throughput
//! against NewReno and TCP-ELFN (§5.1, Figure 6), TCP-friendliness (§5.2, Figure 7) and the
//! testbed's three scenarios (§6, Figure 9), each `adaptnet exp adtcp-<name>`, on the
//! simulated mobile ad hoc path of [`adaptnet_sim::manet`]. Parameters are in
//! `experiments/adtcp/*.params`. Every headline is a mean over seeds with its 95 % interval
//! ([`crate::report::spread`]).
//!
//! The paper's figures survive only as captions and axis labels: every number is lost from
//! its text. The reports therefore state the paper's claims as shapes and orderings beside
//! our numbers, never as values.

mod accuracy;
pub mod cellular;
mod friendliness;
mod metrics_fig;
mod testbed;
mod throughput;

pub use accuracy::{Accuracy, AccuracyCell, Judgement};
pub use friendliness::Friendliness;
pub use throughput::Throughput;

use crate::report::{json, mean};
use crate::{ExpError, ExpOptions, Experiment};
use adaptnet_core::Time;
use adaptnet_sim::agent::Agent;
use adaptnet_sim::agents::tcp::TcpSender;
use adaptnet_sim::manet::agents::{ElfnSender, IdLogReceiver};
use adaptnet_sim::manet::cross::CrossTraffic;
use adaptnet_sim::manet::monitor::Monitor;
use adaptnet_sim::manet::{CbrFlow, ManetConfig, ManetPath, Protocol, RsdParams};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// The ADTCP experiments.
pub fn all() -> Vec<Box<dyn Experiment>> {
    vec![
        Box::new(metrics_fig::MetricsFig),
        Box::new(accuracy::Accuracy),
        Box::new(throughput::Throughput),
        Box::new(friendliness::Friendliness),
        Box::new(testbed::Testbed),
        Box::new(cellular::Cellular),
    ]
}

/// Reads and parses an ADTCP parameter file; `fields` names the struct that documents them.
pub(crate) fn read_params<T: serde::de::DeserializeOwned>(
    path: &Path,
    fields: &str,
) -> Result<T, ExpError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ExpError::Input(format!("{}: {e}", path.display())))?;
    toml::from_str(&text).map_err(|e| {
        ExpError::Input(format!(
            "{}: {e}(fields and units: {fields})",
            path.display()
        ))
    })
}

/// An error naming the file, the field and what is wrong.
pub(crate) fn bad_field(path: &Path, field: &str, why: &str) -> ExpError {
    ExpError::Input(format!("{}: `{field}` {why}", path.display()))
}

/// The checks every ADTCP parameter file shares: the run lengths (full, quick), the runs
/// (full, quick; `runs_field` names them) and the monitor's period.
pub(crate) fn check_common(
    path: &Path,
    durations_s: [f64; 2],
    runs: [u64; 2],
    runs_field: &str,
    monitor_period_ms: f64,
) -> Result<(), ExpError> {
    for (field, v) in [
        ("duration_s", durations_s[0]),
        ("quick_duration_s", durations_s[1]),
    ] {
        if !(v.is_finite() && (1.0..=1e6).contains(&v)) {
            return Err(bad_field(path, field, "must be between 1 and 1e6 seconds"));
        }
    }
    if runs.contains(&0) {
        return Err(bad_field(path, runs_field, "must be at least 1"));
    }
    if !(monitor_period_ms.is_finite() && (1.0..=1e4).contains(&monitor_period_ms)) {
        return Err(bad_field(
            path,
            "monitor_period_ms",
            "must be between 1 and 10000",
        ));
    }
    Ok(())
}

/// Goodput as `mean ± half-width` in kbit/s.
pub(crate) fn kbit(s: &crate::report::spread::Spread) -> String {
    format!("{:.0} ± {:.0}", s.mean / 1e3, s.half_width_95 / 1e3)
}

/// A competing CBR flow, timed as fractions of the run.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompetingParams {
    /// Start, fraction of the run.
    pub start_frac: f64,
    /// Stop, fraction of the run.
    pub stop_frac: f64,
    /// Rate, bit/s.
    pub rate_bits_per_s: f64,
}

/// On/off Poisson cross traffic ([`adaptnet_sim::manet::cross`]), timed as fractions of the
/// run: the dynamic congestion episodes of the competing-traffic cases.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CrossParams {
    /// Start, fraction of the run.
    pub start_frac: f64,
    /// Stop, fraction of the run.
    pub stop_frac: f64,
    /// Datagram rate while on, bit/s.
    pub peak_bits_per_s: f64,
    /// Mean on-period, s.
    pub mean_on_s: f64,
    /// Mean off-period, s.
    pub mean_off_s: f64,
}

impl CrossParams {
    /// The source over a run of `run_s` seconds.
    pub fn traffic(&self, run_s: f64) -> CrossTraffic {
        CrossTraffic {
            start_s: self.start_frac * run_s,
            stop_s: self.stop_frac * run_s,
            peak_bits_per_s: self.peak_bits_per_s,
            mean_on_s: self.mean_on_s,
            mean_off_s: self.mean_off_s,
        }
    }
}

/// An `experiments/adtcp/*.params` file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Run length, s.
    pub duration_s: f64,
    /// Run length with `--quick`, s.
    pub quick_duration_s: f64,
    /// Node speeds, m/s.
    pub speeds_m_per_s: Vec<f64>,
    /// Node speeds with `--quick`.
    pub quick_speeds_m_per_s: Vec<f64>,
    /// Runs (seeds) per speed.
    pub runs_per_speed: u64,
    /// Runs per speed with `--quick`.
    pub quick_runs_per_speed: u64,
    /// The monitor's sampling period, ms.
    pub monitor_period_ms: f64,
    /// The path (its `mobility.speed_m_per_s` is overridden per run).
    pub path: ManetConfig,
    /// Competing CBR flows, for the cases that have them.
    #[serde(default)]
    pub competing: Vec<CompetingParams>,
    /// On/off cross traffic, for the cases with competing traffic.
    #[serde(default)]
    pub cross: Vec<CrossParams>,
    /// RSD settings to rerun the identification with (adtcp-accuracy's sensitivity table).
    #[serde(default)]
    pub rsd_sensitivity: Vec<RsdParams>,
    /// Speeds of the sensitivity runs, m/s (default: the quick speeds).
    #[serde(default)]
    pub sensitivity_speeds_m_per_s: Vec<f64>,
}

impl Params {
    /// Loads `experiments/adtcp/<file>`.
    pub fn load(opts: &ExpOptions, file: &str) -> Result<Params, ExpError> {
        Params::load_path(&opts.experiments_dir.join("adtcp").join(file))
    }

    /// Loads a parameter file.
    pub fn load_path(path: &Path) -> Result<Params, ExpError> {
        let p: Params = read_params(path, "crates/experiments/src/adtcp/mod.rs `Params`")?;
        let bad = |field: &str, why: &str| bad_field(path, field, why);
        check_common(
            path,
            [p.duration_s, p.quick_duration_s],
            [p.runs_per_speed, p.quick_runs_per_speed],
            "runs_per_speed",
            p.monitor_period_ms,
        )?;
        if p.speeds_m_per_s.is_empty() || p.quick_speeds_m_per_s.is_empty() {
            return Err(bad("speeds_m_per_s", "needs at least one speed"));
        }
        for c in &p.competing {
            if !(0.0..=1.0).contains(&c.start_frac) || !(c.start_frac..=1.0).contains(&c.stop_frac)
            {
                return Err(bad("competing", "needs 0 <= start_frac <= stop_frac <= 1"));
            }
        }
        for c in &p.cross {
            if !(0.0..=1.0).contains(&c.start_frac) || !(c.start_frac..=1.0).contains(&c.stop_frac)
            {
                return Err(bad("cross", "needs 0 <= start_frac <= stop_frac <= 1"));
            }
            for (field, v) in [
                ("cross.peak_bits_per_s", c.peak_bits_per_s),
                ("cross.mean_on_s", c.mean_on_s),
                ("cross.mean_off_s", c.mean_off_s),
            ] {
                if !(v.is_finite() && v > 0.0) {
                    return Err(bad(field, "must be a positive number"));
                }
            }
        }
        Ok(p)
    }

    /// Run length.
    pub fn duration(&self, quick: bool) -> Duration {
        Duration::from_secs_f64(if quick {
            self.quick_duration_s
        } else {
            self.duration_s
        })
    }

    /// Speeds to run.
    pub fn speeds(&self, quick: bool) -> &[f64] {
        if quick {
            &self.quick_speeds_m_per_s
        } else {
            &self.speeds_m_per_s
        }
    }

    /// The seeds of one speed: the user's, or `1..=runs`.
    pub fn seeds(&self, opts: &ExpOptions) -> Vec<u64> {
        if !opts.seeds.is_empty() {
            return opts.seeds.clone();
        }
        let n = if opts.quick {
            self.quick_runs_per_speed
        } else {
            self.runs_per_speed
        };
        (1..=n).collect()
    }

    /// The path at a speed, with or without channel error and competing flows.
    pub fn path_config(
        &self,
        speed: f64,
        channel_error: bool,
        competing: bool,
        quick: bool,
    ) -> ManetConfig {
        let mut cfg = self.path.clone();
        cfg.mobility.speed_m_per_s = speed;
        if !channel_error {
            cfg.channel_error = None;
        }
        let d = self.duration(quick).as_secs_f64();
        cfg.cbr = if competing {
            self.competing
                .iter()
                .map(|c| CbrFlow {
                    start_s: c.start_frac * d,
                    stop_s: c.stop_frac * d,
                    rate_bits_per_s: c.rate_bits_per_s,
                })
                .collect()
        } else {
            Vec::new()
        };
        cfg.cross = if competing {
            self.cross.iter().map(|c| c.traffic(d)).collect()
        } else {
            Vec::new()
        };
        cfg
    }

    /// Speeds of the RSD sensitivity runs.
    pub fn sensitivity_speeds(&self) -> &[f64] {
        if self.sensitivity_speeds_m_per_s.is_empty() {
            &self.quick_speeds_m_per_s
        } else {
            &self.sensitivity_speeds_m_per_s
        }
    }
}

/// One TCP flow's outcome.
#[derive(Clone, Debug, serde::Serialize)]
pub struct FlowOut {
    /// Its protocol.
    pub protocol: &'static str,
    /// Goodput over the run, bit/s.
    pub goodput_bps: f64,
    /// The sender's policy counters (ADTCP reactions, ELFN notifications).
    pub policy: BTreeMap<String, u64>,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Goodput in each sampling period of the run (see [`RunOut::sample_period_s`]), bit/s.
    pub goodput_series_bps: Vec<f64>,
}

/// One run's outcome.
pub struct RunOut {
    /// The TCP flows, in the order given.
    pub flows: Vec<FlowOut>,
    /// The monitor.
    pub monitor: Monitor,
    /// The first flow's identifications.
    pub identifications: Vec<(Time, adaptnet_core::adtcp::receiver::Identification)>,
    /// When the first flow's receiver saw data arrive above a gap (a loss detected).
    pub hole_detections: Vec<Time>,
    /// Path breaks drawn: (route changes, disconnections).
    pub episodes: (usize, usize),
    /// Each route change: from its gap's start to the end of its reordering burst.
    pub route_changes: Vec<(Time, Time)>,
    /// The goodput series' sampling period, s.
    pub sample_period_s: f64,
}

/// Derives a run's world seed from the user's seed and the speed, so each speed draws its own
/// mobility (the same for every protocol at that speed and seed: a paired comparison).
pub fn run_seed(seed: u64, speed: f64) -> u64 {
    adaptnet_sim::world::mix_seed(seed, (speed * 1000.0).round() as u64)
}

/// Runs one path with TCP flows of `protocols` (started 10 ms apart) to its end.
pub fn run_path(
    cfg: &ManetConfig,
    duration: Duration,
    seed: u64,
    protocols: &[Protocol],
    monitor_period: Duration,
) -> Result<RunOut, ExpError> {
    let flows: Vec<(Protocol, Duration)> = protocols
        .iter()
        .enumerate()
        .map(|(i, &p)| (p, Duration::from_millis(10 * i as u64)))
        .collect();
    run_path_starts(cfg, duration, seed, &flows, monitor_period)
}

/// [`run_path`] with each flow's start time given.
pub fn run_path_starts(
    cfg: &ManetConfig,
    duration: Duration,
    seed: u64,
    flows: &[(Protocol, Duration)],
    monitor_period: Duration,
) -> Result<RunOut, ExpError> {
    let err = |e: adaptnet_sim::manet::ManetError| ExpError::Input(e.to_string());
    let mut path = ManetPath::build(cfg, duration, seed).map_err(err)?;
    for (i, &(p, start)) in flows.iter().enumerate() {
        path.add_tcp(&format!("tcp{i}"), p, Time::ZERO + start)
            .map_err(err)?;
    }
    let monitor = Monitor::run(&mut path, monitor_period, &mut |_| {});
    let results = path.world.results("adtcp");
    let mut flows = Vec::new();
    let mut identifications = Vec::new();
    let mut hole_detections = Vec::new();
    for (i, f) in path.tcp.iter().enumerate() {
        let Some((tx, rx)) = path.world.flow_agents(f.flow) else {
            continue;
        };
        let rx = path
            .world
            .agent::<IdLogReceiver>(rx)
            .ok_or_else(|| ExpError::Input("MANET receiver agent missing".into()))?;
        if i == 0 {
            identifications = rx.identifications().to_vec();
            hole_detections = rx.hole_detections().to_vec();
        }
        let sender = match f.protocol {
            Protocol::Elfn => path.world.agent::<ElfnSender>(tx).map(ElfnSender::sender),
            _ => path.world.agent::<TcpSender>(tx),
        };
        let conn = sender.and_then(TcpSender::connection);
        flows.push(FlowOut {
            protocol: f.protocol.name(),
            goodput_bps: rx.delivered_bytes() as f64 * 8.0 / duration.as_secs_f64().max(1e-9),
            policy: conn
                .map(|c| {
                    c.cc()
                        .policy_counters()
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), v))
                        .collect()
                })
                .unwrap_or_default(),
            timeouts: conn.map_or(0, |c| c.stats().timeouts),
            goodput_series_bps: results
                .flows
                .iter()
                .find(|r| r.name == format!("tcp{i}"))
                .map(|r| r.goodput_series_bps.clone())
                .unwrap_or_default(),
        });
    }
    use adaptnet_sim::manet::mobility::EpisodeKind;
    let episodes = (
        path.schedule.count(EpisodeKind::RouteChange),
        path.schedule.count(EpisodeKind::Disconnection),
    );
    let route_changes = path
        .schedule
        .episodes()
        .iter()
        .filter(|e| e.kind == EpisodeKind::RouteChange)
        .map(|e| (e.outage.start, e.end()))
        .collect();
    Ok(RunOut {
        flows,
        monitor,
        identifications,
        hole_detections,
        episodes,
        route_changes,
        sample_period_s: results.sample_period_s,
    })
}

#[cfg(test)]
mod tests;
