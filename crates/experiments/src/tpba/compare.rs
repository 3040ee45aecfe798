//! Beyond the paper (`papers/002` §8: "Implementation-based comparison with the congestion
//! manager is also within our future scope"; §2 argues TPBA "is more precise in measuring a
//! TCP-exact rate" than the CM's own probing protocol): TPBA (Table 2's ε and §7's z %), the
//! Congestion Manager's layered audio server (`papers/003` §3.2.2), TFRC (RFC 5348) and LDA,
//! one at a time, against TCP on the same bottleneck — rate over time, Jain's index, loss and
//! smoothness — on three paths: the paper's Topology 1 reconstruction (window-limited TCPs,
//! no loss), a loss-driven drop-tail bottleneck, and a cellular bandwidth trace.
//!
//! Parameters: `experiments/tpba/compare.params`; scenarios `compare-topology1.toml`,
//! `compare-droptail.toml` and `compare-cellular.toml`, each holding the TCP flows and every
//! media flow (a run keeps the TCP flows and one media flow). The cellular scenario's
//! bottleneck is replaced by each trace of the parameter file, built and resolved as
//! `adtcp-cellular` does ([`crate::adtcp::cellular::build_traces`]): a synthetic stand-in
//! that always runs and a real Mahimahi trace read from `../shared/traces/`, skipped with a
//! note when absent.

use super::{jitter_starts, json, kbps_series, mean, mean_from, seeds, smoothness};
use crate::adtcp::cellular::{build_traces, repo_root};
use crate::nai::params::{TraceParams, load, positive};
use crate::report::plot::line_chart_of;
use crate::report::table::Table;
use crate::{ExpError, ExpOptions, Experiment, Report};
use adaptnet_core::Time;
use adaptnet_sim::media_metrics::{active_series, jain_series};
use adaptnet_sim::metrics::{FlowResult, RunResults};
use adaptnet_sim::scenario::{FlowType, Scenario, TopologyDef};
use serde::{Deserialize, Serialize};

/// `adaptnet exp tpba-compare`.
pub struct Compare;

/// Parameter file, under `experiments/`.
pub const PARAMS: &str = "tpba/compare.params";

/// `experiments/tpba/compare.params`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompareParams {
    /// Run length, s.
    pub duration_s: f64,
    /// Run length with `--quick`, s.
    pub quick_duration_s: f64,
    /// Seeds per (path, scheme).
    pub runs: u64,
    /// Seeds with `--quick`.
    pub quick_runs: u64,
    /// Measurements start here, s.
    pub warmup_s: f64,
    /// Scenario files of the fixed-rate paths, under `experiments/tpba/`.
    pub scenarios: Vec<String>,
    /// The scenario whose bottleneck each trace replaces.
    pub cellular_scenario: String,
    /// Bandwidth traces for the cellular path.
    pub traces: Vec<TraceParams>,
}

impl CompareParams {
    /// Loads and checks the parameter file.
    pub fn load(opts: &ExpOptions) -> Result<CompareParams, ExpError> {
        let p: CompareParams = load(&opts.experiments_dir, PARAMS)?;
        positive(p.duration_s, "duration_s", PARAMS)?;
        positive(p.quick_duration_s, "quick_duration_s", PARAMS)?;
        let warm = p.warmup_s.is_finite()
            && p.warmup_s >= 0.0
            && p.warmup_s < p.duration_s.min(p.quick_duration_s);
        if !warm {
            return Err(ExpError::Input(format!(
                "{PARAMS}: field warmup_s: must be at least 0 and below both durations"
            )));
        }
        if p.runs == 0 || p.quick_runs == 0 {
            return Err(ExpError::Input(format!(
                "{PARAMS}: fields runs, quick_runs: must be at least 1"
            )));
        }
        Ok(p)
    }
}

/// A path: its name in reports and its scenario (duration set, every media flow in it).
#[derive(Clone, Debug)]
pub struct PathDef {
    /// "topology1", "droptail", "cellular lte-synth", …
    pub name: String,
    /// The scenario.
    pub scenario: Scenario,
}

/// `s` cut (or stretched) to `duration_s`; flows that would start at or after the end are
/// left out.
fn with_duration(mut s: Scenario, duration_s: f64) -> Scenario {
    s.duration = Time::from_secs_f64(duration_s);
    let end = s.duration;
    s.flows.retain(|f| f.start < end);
    for f in &mut s.flows {
        f.stop = f.stop.min(end);
    }
    s
}

/// The paths: each fixed scenario, then the cellular scenario once per trace present. Also
/// returns a note for every trace skipped and a line describing every trace run.
pub fn paths(
    opts: &ExpOptions,
    p: &CompareParams,
    duration_s: f64,
) -> Result<(Vec<PathDef>, Vec<String>), ExpError> {
    let load_tpba = |file: &str| -> Result<Scenario, ExpError> {
        let s = Scenario::load(&opts.experiments_dir.join("tpba").join(file))?;
        Ok(with_duration(s, duration_s))
    };
    let short = |s: &Scenario| s.name.trim_start_matches("tpba-compare-").to_string();
    let mut out = Vec::new();
    for file in &p.scenarios {
        let scenario = load_tpba(file)?;
        out.push(PathDef {
            name: short(&scenario),
            scenario,
        });
    }
    let base = load_tpba(&p.cellular_scenario)?;
    let (built, mut notes) = build_traces(&p.traces, &repo_root(opts), duration_s)?;
    for t in built {
        let mut scenario = base.clone();
        let TopologyDef::Dumbbell { spec, .. } = &mut scenario.topology else {
            return Err(ExpError::Input(format!(
                "{}: the cellular scenario must be a dumbbell",
                p.cellular_scenario
            )));
        };
        spec.bottleneck.bandwidth = t.bandwidth.clone();
        notes.push(format!(
            "trace {}: mean {:.2} Mbit/s over {duration_s} s",
            t.name,
            t.mean_bytes_per_s * 8.0 / 1e6
        ));
        out.push(PathDef {
            name: format!("{} {}", short(&base), t.name),
            scenario,
        });
    }
    Ok((out, notes))
}

/// The media flows of a scenario: every flow that is not plain TCP, in file order.
pub fn schemes(s: &Scenario) -> Vec<String> {
    s.flows
        .iter()
        .filter(|f| !matches!(f.kind, FlowType::Tcp { .. }))
        .map(|f| f.name.clone())
        .collect()
}

/// `s` with its TCP flows and the one media flow `scheme`.
pub fn only(s: &Scenario, scheme: &str) -> Scenario {
    let mut s = s.clone();
    s.flows
        .retain(|f| matches!(f.kind, FlowType::Tcp { .. }) || f.name == scheme);
    s
}

/// One run's measurements, from `warmup_s` to the end.
#[derive(Clone, Debug, Serialize)]
pub struct CompareRun {
    /// Path name.
    pub path: String,
    /// Media flow name.
    pub scheme: String,
    /// Seed.
    pub seed: u64,
    /// The media flow's mean rate, kbit/s.
    pub media_kbps: f64,
    /// The mean over intervals of the active TCP flows' mean rate, kbit/s.
    pub tcp_kbps: f64,
    /// Jain's index over the active flows, mean over intervals.
    pub jain: f64,
    /// Share of the media flow's packets lost in the network (both paths for TPBA).
    pub media_loss: f64,
    /// Share of the TCP flows' packets lost.
    pub tcp_loss: f64,
    /// The media rate's coefficient of variation and mean relative step (1 s samples).
    pub smoothness: Option<(f64, f64)>,
    /// For TPBA: the share of its ADUs that came on TCP (rate-probing periods).
    pub tcp_share: Option<f64>,
    /// The media flow's rate series (s, kbit/s).
    pub media_series: Vec<(f64, f64)>,
    /// The active TCP flows' mean rate series (s, kbit/s).
    pub tcp_series: Vec<(f64, f64)>,
}

fn loss(flows: &[&FlowResult]) -> f64 {
    let sent: u64 = flows.iter().map(|f| f.packets_sent).sum();
    let lost: u64 = flows.iter().map(|f| f.packets_lost).sum();
    lost as f64 / sent.max(1) as f64
}

/// The measurements of a finished run of `scheme` against the TCP flows.
pub fn measure(
    r: &RunResults,
    path: &str,
    scheme: &str,
    seed: u64,
    warmup_s: f64,
) -> Result<CompareRun, ExpError> {
    let period = r.sample_period_s;
    let media = r
        .flow(scheme)
        .ok_or_else(|| ExpError::Input(format!("{path}: no flow {scheme:?}")))?;
    let tcps: Vec<&FlowResult> = r.flows.iter().filter(|f| f.kind == "tcp").collect();
    let media_series = kbps_series(r, media);
    let tcp_names: Vec<&str> = tcps.iter().map(|f| f.name.as_str()).collect();
    let tcp_series = active_series(r, &tcp_names, |xs| mean(xs) / 1e3);
    let names: Vec<&str> = r.flows.iter().map(|f| f.name.as_str()).collect();
    let after: Vec<f64> = media_series
        .iter()
        .filter(|(t, _)| t - period >= warmup_s - 1e-9)
        .map(|(_, x)| *x)
        .collect();
    Ok(CompareRun {
        path: path.to_string(),
        scheme: scheme.to_string(),
        seed,
        media_kbps: mean_from(&media_series, warmup_s, period).unwrap_or(0.0),
        tcp_kbps: mean_from(&tcp_series, warmup_s, period).unwrap_or(0.0),
        jain: mean_from(&jain_series(r, &names), warmup_s, period).unwrap_or(1.0),
        media_loss: loss(&[media]),
        tcp_loss: loss(&tcps),
        smoothness: smoothness(&after),
        tcp_share: media
            .counters
            .get("receiver_adus_on_tcp")
            .zip(media.counters.get("receiver_adus_received"))
            .map(|(tcp, all)| tcp / all.max(1.0)),
        media_series,
        tcp_series,
    })
}

/// Runs every (path, scheme, seed).
pub fn run_all(
    paths: &[PathDef],
    seeds: &[u64],
    warmup_s: f64,
    progress: &mut dyn FnMut(f64),
) -> Result<Vec<CompareRun>, ExpError> {
    let total: usize = paths.iter().map(|p| schemes(&p.scenario).len()).sum();
    let total = (total * seeds.len()).max(1) as f64;
    let mut runs = Vec::new();
    for p in paths {
        for scheme in schemes(&p.scenario) {
            let s = only(&p.scenario, &scheme);
            for seed in seeds {
                let done = runs.len() as f64 / total;
                // Every scheme meets the same start times for a seed (every flow starts
                // within 500 ms of its time).
                let mut s = s.clone();
                jitter_starts(&mut s, *seed);
                let r = crate::scenario_run::run(&s, *seed, progress, done, 1.0 / total)?;
                runs.push(measure(&r, &p.name, &scheme, *seed, warmup_s)?);
            }
        }
    }
    Ok(runs)
}

fn pct(x: f64) -> String {
    format!("{:.2}", 100.0 * x)
}

/// The report: per path a table of means over seeds and two SVGs of the first seed.
fn report(
    runs: &[CompareRun],
    paths: &[PathDef],
    notes: &[String],
    warmup_s: f64,
    n_seeds: usize,
) -> Result<Report, ExpError> {
    let mut rep = Report::default();
    rep.text(format!(
        "Beyond papers/002 (§8): each media flow alone against the TCP flows of a path, {n_seeds} \
         seed(s) (every start within 500 ms of its time, drawn from the seed); measured from {warmup_s} s to \
         the end, 1 s samples. media/TCP is the media flow's mean rate over the TCP flows' \
         mean (1 = TCP-friendly); Jain over all active flows; loss = share of the flow's \
         packets lost in the network; CoV and step = the media rate's coefficient of variation \
         and mean |r(j) - r(j-1)| / mean (lower is smoother). The paper has no numbers here: \
         §2 claims TPBA measures a TCP-exact rate \"more precise[ly]\" than the CM's probing \
         protocol, and §8 plans this comparison."
    ));
    for n in notes {
        rep.text(n.clone());
    }
    let mut claim = Table::new([
        "path",
        "paper (§2)",
        "TPBA",
        "TPBA §7 (z 5 %, 6 samples)",
        "CM audio",
        "TFRC",
        "LDA",
    ]);
    for p in paths {
        let mut t = Table::new([
            "scheme",
            "media kbit/s",
            "TCP kbit/s",
            "media/TCP",
            "Jain",
            "media loss %",
            "TCP loss %",
            "CoV",
            "step",
            "TPBA ADUs on TCP %",
        ]);
        let mut ratios: Vec<(String, f64)> = Vec::new();
        let mut media_lines: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
        let mut tcp_lines: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
        for scheme in schemes(&p.scenario) {
            let rs: Vec<&CompareRun> = runs
                .iter()
                .filter(|x| x.path == p.name && x.scheme == scheme)
                .collect();
            let m = |g: fn(&CompareRun) -> f64| mean(&rs.iter().map(|&x| g(x)).collect::<Vec<_>>());
            let sm: Vec<(f64, f64)> = rs.iter().filter_map(|x| x.smoothness).collect();
            let (cov, step) = (
                mean(&sm.iter().map(|s| s.0).collect::<Vec<_>>()),
                mean(&sm.iter().map(|s| s.1).collect::<Vec<_>>()),
            );
            let (media, tcp) = (m(|x| x.media_kbps), m(|x| x.tcp_kbps));
            let ratio = media / tcp.max(1e-9);
            let jain = m(|x| x.jain);
            t.row([
                scheme.clone(),
                format!("{media:.0}"),
                format!("{tcp:.0}"),
                format!("{ratio:.2}"),
                format!("{jain:.3}"),
                pct(m(|x| x.media_loss)),
                pct(m(|x| x.tcp_loss)),
                format!("{cov:.3}"),
                format!("{step:.3}"),
                rs.iter()
                    .filter_map(|x| x.tcp_share)
                    .reduce(f64::max)
                    .map_or("-".into(), |_| {
                        pct(mean(
                            &rs.iter().filter_map(|x| x.tcp_share).collect::<Vec<_>>(),
                        ))
                    }),
            ]);
            ratios.push((scheme.clone(), ratio));
            if let Some(first) = rs.first() {
                media_lines.push((scheme.clone(), first.media_series.clone()));
                tcp_lines.push((format!("TCP beside {scheme}"), first.tcp_series.clone()));
            }
        }
        let ratio_of = |name: &str| {
            ratios
                .iter()
                .find(|r| r.0 == name)
                .map_or("-".to_string(), |r| format!("{:.2}", r.1))
        };
        claim.row([
            p.name.clone(),
            "TPBA nearer 1 than the CM".to_string(),
            ratio_of("tpba"),
            ratio_of("tpba-s7"),
            ratio_of("cm-audio"),
            ratio_of("tfrc"),
            ratio_of("lda"),
        ]);
        let stem = format!("compare-{}", p.name.replace(' ', "-"));
        rep.table(format!("{}: means over seeds", p.name), &stem, t);
        rep.file(
            format!("{stem}-media.svg"),
            line_chart_of(
                &format!("{}: the media flow's rate (first seed)", p.name),
                "time (s)",
                "kbit/s",
                &media_lines,
            )?
            .into_bytes(),
        );
        rep.file(
            format!("{stem}-tcp.svg"),
            line_chart_of(
                &format!(
                    "{}: the TCP flows' mean rate beside each scheme (first seed)",
                    p.name
                ),
                "time (s)",
                "kbit/s",
                &tcp_lines,
            )?
            .into_bytes(),
        );
    }
    rep.table(
        "paper vs ours: the media flow's rate over TCP's (1 = TCP-exact)",
        "compare-summary",
        claim,
    );
    rep.file("compare.json", json(&runs)?);
    Ok(rep)
}

impl Experiment for Compare {
    fn name(&self) -> &'static str {
        "tpba-compare"
    }

    fn summary(&self) -> &'static str {
        "beyond papers/002 (its §8): TPBA vs the CM's layered audio vs TFRC vs LDA against TCP, on Topology 1, a drop-tail bottleneck and a cellular trace"
    }

    fn run(&self, opts: &ExpOptions, progress: &mut dyn FnMut(f64)) -> Result<Report, ExpError> {
        let p = CompareParams::load(opts)?;
        let duration_s = if opts.quick {
            p.quick_duration_s
        } else {
            p.duration_s
        };
        let seeds = seeds(opts, p.runs, p.quick_runs);
        let (paths, notes) = paths(opts, &p, duration_s)?;
        let runs = run_all(&paths, &seeds, p.warmup_s, progress)?;
        report(&runs, &paths, &notes, p.warmup_s, seeds.len())
    }
}
