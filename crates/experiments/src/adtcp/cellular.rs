//! Beyond the paper (issue 12): NewReno vs ADTCP over a cellular bandwidth trace with added
//! random or bursty loss — does loss differentiation help on a cellular link, not only on the
//! ad hoc path?
//!
//! The path is [`adaptnet_sim::manet::ManetPath`] with no mobility (speed 0: no route changes
//! or disconnections) and the data direction of its "mobile" hop replaced by the trace
//! ([`ManetConfig::mobile_hop_bandwidth`]); the added loss is that hop's channel error
//! (Gilbert-Elliott at speed 0). The global monitor gives every lost packet its true cause
//! (queue overflow or loss while a queue is over half full → congestion; the loss model →
//! channel error), so the ADTCP receiver's identifications are scored as in
//! `adtcp-accuracy`. TCP-ELFN is not run: with no disconnections it gets no notification and
//! is NewReno.
//!
//! Traces come from `experiments/adtcp/cellular.params` as in the NAI experiments
//! ([`crate::nai::traces`]): a seeded synthetic stand-in that always runs, and real Mahimahi
//! traces read from `../shared/traces/` (never copied), skipped with a note when absent.

use super::{json, mean, run_path};
use crate::nai::params::TraceParams;
use crate::nai::traces::{self, BuiltTrace};
use crate::report::plot::{Bars, bar_chart};
use crate::report::table::Table;
use crate::{ExpError, ExpOptions, Experiment, Report};
use adaptnet_core::Time;
use adaptnet_core::adtcp::receiver::Identification;
use adaptnet_sim::manet::mobility::ChannelErrorConfig;
use adaptnet_sim::manet::monitor::{Loss, TrueState};
use adaptnet_sim::manet::{ManetConfig, Protocol};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `adaptnet exp adtcp-cellular`.
pub struct Cellular;

/// Parameter file.
pub const PARAMS: &str = "cellular.params";

/// The protocols compared.
pub const PROTOCOLS: [Protocol; 2] = [Protocol::NewReno, Protocol::Adtcp];

/// Loss added on the cellular hop.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LossCase {
    /// Name in reports.
    pub name: String,
    /// Loss probability in the good state (0: no added loss at all).
    pub rate: f64,
    /// Loss probability in the bad (fade) state.
    pub burst_loss: f64,
    /// Mean fade length, packets.
    pub mean_burst_packets: f64,
}

impl LossCase {
    /// The channel error of this case, `None` for no loss.
    pub fn channel_error(&self) -> Option<ChannelErrorConfig> {
        (self.rate > 0.0 || self.burst_loss > 0.0).then(|| ChannelErrorConfig {
            rate: self.rate,
            burst_loss: self.burst_loss,
            mean_burst_packets: self.mean_burst_packets,
            ..ChannelErrorConfig::default()
        })
    }
}

/// `experiments/adtcp/cellular.params`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CellularParams {
    /// Run length, s.
    pub duration_s: f64,
    /// Run length with `--quick`, s.
    pub quick_duration_s: f64,
    /// Seeds per (trace, loss) cell.
    pub runs: u64,
    /// Seeds with `--quick`.
    pub quick_runs: u64,
    /// The monitor's sampling period, ms.
    pub monitor_period_ms: f64,
    /// Added loss cases.
    pub losses: Vec<LossCase>,
    /// Bandwidth traces.
    pub traces: Vec<TraceParams>,
    /// The path (mobility speed should be 0).
    pub path: ManetConfig,
}

impl CellularParams {
    /// Loads and checks a parameter file.
    pub fn load_path(path: &Path) -> Result<CellularParams, ExpError> {
        let p: CellularParams = super::read_params(
            path,
            "crates/experiments/src/adtcp/cellular.rs `CellularParams`",
        )?;
        let bad = |field: &str, why: &str| super::bad_field(path, field, why);
        super::check_common(
            path,
            [p.duration_s, p.quick_duration_s],
            [p.runs, p.quick_runs],
            "runs",
            p.monitor_period_ms,
        )?;
        if p.losses.is_empty() || p.traces.is_empty() {
            return Err(bad("losses/traces", "need at least one entry each"));
        }
        for l in &p.losses {
            if let Some(ce) = l.channel_error() {
                ce.loss_model(0.0)
                    .map_err(|e| bad("losses", &format!("{}: {e}", l.name)))?;
            }
        }
        Ok(p)
    }
}

/// Resolves a relative trace file against the repository root, then against its ancestors
/// (a git worktree nested below the main checkout finds the same `../shared/`); the first
/// existing candidate, else the root-relative one (which `traces::build` then skips).
pub fn resolve_trace_path(repo_root: &Path, path: &str) -> PathBuf {
    let rel = Path::new(path);
    if rel.is_absolute() {
        return rel.to_path_buf();
    }
    let first = repo_root.join(rel);
    let abs = std::fs::canonicalize(repo_root).unwrap_or_else(|_| repo_root.to_path_buf());
    let mut dir = Some(abs.as_path());
    while let Some(d) = dir {
        let candidate = d.join(rel);
        if candidate.exists() {
            return candidate;
        }
        dir = d.parent();
    }
    first
}

/// The repository root: the parent of the experiments directory (trace paths in parameter
/// files are relative to it).
pub fn repo_root(opts: &ExpOptions) -> PathBuf {
    let exp_dir = std::fs::canonicalize(&opts.experiments_dir)
        .unwrap_or_else(|_| opts.experiments_dir.clone());
    exp_dir.parent().unwrap_or(&exp_dir).to_path_buf()
}

/// Builds the traces (file paths resolved by [`resolve_trace_path`]): the ones that exist,
/// and notes for the skipped.
pub fn build_traces(
    traces: &[TraceParams],
    repo_root: &Path,
    duration_s: f64,
) -> Result<(Vec<BuiltTrace>, Vec<String>), ExpError> {
    let mut built = Vec::new();
    let mut notes = Vec::new();
    for t in traces {
        let t = match t {
            TraceParams::MahimahiFile {
                name,
                path,
                duration_s,
                scale,
                optional,
            } => TraceParams::MahimahiFile {
                name: name.clone(),
                path: resolve_trace_path(repo_root, path)
                    .to_string_lossy()
                    .into_owned(),
                duration_s: *duration_s,
                scale: *scale,
                optional: *optional,
            },
            other => other.clone(),
        };
        match traces::build(&t, repo_root, duration_s)? {
            Ok(b) => built.push(b),
            Err(note) => notes.push(note),
        }
    }
    Ok((built, notes))
}

/// How the ADTCP receiver judged the losses of one cell (summed over seeds).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Breakdown {
    /// Losses whose true cause is congestion.
    pub congestion_losses: u64,
    /// Of those, called congestion (IDD high and STT low).
    pub congestion_called_congestion: u64,
    /// Losses whose true cause is channel error.
    pub channel_losses: u64,
    /// Of those, called congestion (the sender halves its window anyway).
    pub channel_called_congestion: u64,
    /// Of those, called channel error (PLR high) and not congestion.
    pub channel_called_channel: u64,
    /// Of those, called route change (POR high) and neither of the above.
    pub channel_called_route: u64,
    /// Losses no interval judged (none closed after them).
    pub unjudged: u64,
}

impl Breakdown {
    /// Scores losses against the identifications: each loss is judged by the first interval
    /// closing after it (as in `adtcp-accuracy`).
    pub fn add(&mut self, losses: &[Loss], ids: &[(Time, Identification)]) {
        for l in losses {
            let idx = ids.partition_point(|(t, _)| *t <= l.at);
            let Some((_, id)) = ids.get(idx) else {
                self.unjudged += 1;
                continue;
            };
            let r = id.report;
            match l.truth {
                TrueState::Congestion => {
                    self.congestion_losses += 1;
                    self.congestion_called_congestion += u64::from(r.congestion);
                }
                TrueState::ChannelError => {
                    self.channel_losses += 1;
                    if r.congestion {
                        self.channel_called_congestion += 1;
                    } else if r.channel_error {
                        self.channel_called_channel += 1;
                    } else if r.route_change {
                        self.channel_called_route += 1;
                    }
                }
                _ => {}
            }
        }
    }
}

/// One (trace, loss) cell.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Trace name.
    pub trace: String,
    /// The trace's mean capacity over the run, bit/s.
    pub trace_mean_bps: f64,
    /// Loss case name.
    pub loss: String,
    /// Its long-run loss probability.
    pub mean_loss: f64,
    /// Mean goodput, bit/s, in [`PROTOCOLS`] order.
    pub goodput_bps: [f64; 2],
    /// Per-seed goodput, bit/s, in [`PROTOCOLS`] order.
    pub per_seed_bps: [Vec<f64>; 2],
    /// Retransmission timeouts summed over seeds, in [`PROTOCOLS`] order.
    pub timeouts: [u64; 2],
    /// ADTCP's reactions summed over the seeds.
    pub adtcp_reactions: BTreeMap<String, u64>,
    /// The ADTCP receiver's judgements of its own flow's losses.
    pub breakdown: Breakdown,
}

/// Runs every (trace, loss, seed, protocol); the protocols of one (trace, loss, seed) see the
/// same loss draws (the same world seed).
pub fn run_cells(
    p: &CellularParams,
    traces: &[BuiltTrace],
    seeds: &[u64],
    duration: Duration,
    progress: &mut dyn FnMut(f64),
) -> Result<Vec<Row>, ExpError> {
    let period = Duration::from_secs_f64(p.monitor_period_ms / 1e3);
    let total = (traces.len() * p.losses.len() * seeds.len() * PROTOCOLS.len()).max(1) as f64;
    let mut done = 0.0;
    let mut rows = Vec::new();
    for (ti, trace) in traces.iter().enumerate() {
        let trace_mean_bps = trace.bandwidth.capacity_bytes(Time::ZERO + duration)
            / duration.as_secs_f64().max(1e-9)
            * 8.0;
        for (li, loss) in p.losses.iter().enumerate() {
            let mut cfg = p.path.clone();
            cfg.channel_error = loss.channel_error();
            cfg.cbr = Vec::new();
            cfg.mobile_hop_bandwidth = Some(trace.bandwidth.clone());
            let mean_loss = match &cfg.channel_error {
                Some(ce) => ce
                    .loss_model(cfg.mobility.speed_m_per_s)
                    .map_or(0.0, |m| m.mean_loss()),
                None => 0.0,
            };
            let mut per_seed: [Vec<f64>; 2] = Default::default();
            let mut timeouts = [0u64; 2];
            let mut reactions = BTreeMap::new();
            let mut breakdown = Breakdown::default();
            for &seed in seeds {
                let world_seed =
                    adaptnet_sim::world::mix_seed(seed, 0x0ce1_0000 + 100 * ti as u64 + li as u64);
                for (i, proto) in PROTOCOLS.iter().enumerate() {
                    let out = run_path(&cfg, duration, world_seed, &[*proto], period)?;
                    if let Some(f) = out.flows.first() {
                        if let Some(s) = per_seed.get_mut(i) {
                            s.push(f.goodput_bps);
                        }
                        if let Some(t) = timeouts.get_mut(i) {
                            *t += f.timeouts;
                        }
                        if *proto == Protocol::Adtcp {
                            for (k, v) in &f.policy {
                                if k != "phase" {
                                    *reactions.entry(k.clone()).or_insert(0) += v;
                                }
                            }
                            breakdown.add(out.monitor.losses(), &out.identifications);
                        }
                    }
                    done += 1.0;
                    progress(done / total);
                }
            }
            rows.push(Row {
                trace: trace.name.clone(),
                trace_mean_bps,
                loss: loss.name.clone(),
                mean_loss,
                goodput_bps: [mean(&per_seed[0]), mean(&per_seed[1])],
                per_seed_bps: per_seed,
                timeouts,
                adtcp_reactions: reactions,
                breakdown,
            });
        }
    }
    Ok(rows)
}

impl Experiment for Cellular {
    fn name(&self) -> &'static str {
        "adtcp-cellular"
    }

    fn summary(&self) -> &'static str {
        "beyond papers/004: NewReno vs ADTCP over cellular traces with added random/bursty loss"
    }

    fn run(&self, opts: &ExpOptions, progress: &mut dyn FnMut(f64)) -> Result<Report, ExpError> {
        let p = CellularParams::load_path(&opts.experiments_dir.join("adtcp").join(PARAMS))?;
        let seeds: Vec<u64> = if opts.seeds.is_empty() {
            (1..=if opts.quick { p.quick_runs } else { p.runs }).collect()
        } else {
            opts.seeds.clone()
        };
        let duration_s = if opts.quick {
            p.quick_duration_s
        } else {
            p.duration_s
        };
        let (built, notes) = build_traces(&p.traces, &repo_root(opts), duration_s)?;
        let rows = run_cells(
            &p,
            &built,
            &seeds,
            Duration::from_secs_f64(duration_s),
            progress,
        )?;
        report(&rows, &notes, &built)
    }
}

fn pct(n: u64, d: u64) -> String {
    if d == 0 {
        "-".into()
    } else {
        format!("{:.1}", 100.0 * n as f64 / d as f64)
    }
}

fn report(rows: &[Row], notes: &[String], built: &[BuiltTrace]) -> Result<Report, ExpError> {
    let mut r = Report::default();
    r.text(
        "Beyond papers/004 (issue 12): one bulk TCP flow over a cellular trace (the data \
         direction of the path's middle hop) with added loss on that hop; NewReno vs ADTCP, \
         paired per (trace, loss, seed). The question: does ADTCP's loss differentiation help \
         on a cellular link? TCP-ELFN is not run (no disconnections, so no notifications: it \
         is NewReno here).",
    );
    for n in notes {
        r.text(n.clone());
    }
    let mut t = Table::new([
        "trace",
        "trace mean Mbit/s",
        "added loss",
        "mean loss %",
        "NewReno kbit/s",
        "ADTCP kbit/s",
        "ADTCP/NewReno",
        "RTOs NR/AD",
    ]);
    for row in rows {
        let [nr, ad] = row.goodput_bps;
        t.row([
            row.trace.clone(),
            format!("{:.2}", row.trace_mean_bps / 1e6),
            row.loss.clone(),
            format!("{:.2}", 100.0 * row.mean_loss),
            format!("{:.0}", nr / 1e3),
            format!("{:.0}", ad / 1e3),
            format!("{:.2}", ad / nr.max(1e-9)),
            format!("{}/{}", row.timeouts[0], row.timeouts[1]),
        ]);
    }
    r.table("Mean goodput per run", "cellular", t);
    let mut b = Table::new([
        "trace",
        "added loss",
        "congestion losses",
        "called congestion %",
        "channel-error losses",
        "called congestion %",
        "called channel error %",
        "called route change %",
        "called normal %",
        "unjudged",
    ]);
    for row in rows {
        let k = row.breakdown;
        let normal = k.channel_losses
            - k.channel_called_congestion
            - k.channel_called_channel
            - k.channel_called_route;
        b.row([
            row.trace.clone(),
            row.loss.clone(),
            k.congestion_losses.to_string(),
            pct(k.congestion_called_congestion, k.congestion_losses),
            k.channel_losses.to_string(),
            pct(k.channel_called_congestion, k.channel_losses),
            pct(k.channel_called_channel, k.channel_losses),
            pct(k.channel_called_route, k.channel_losses),
            pct(normal, k.channel_losses),
            k.unjudged.to_string(),
        ]);
    }
    r.table(
        "ADTCP receiver's identification of its lost packets (true cause from the monitor)",
        "cellular_identification",
        b,
    );
    let mut re = Table::new([
        "trace",
        "added loss",
        "congestion",
        "channel error",
        "route change",
        "disconnection",
        "probe failures",
    ]);
    for row in rows {
        let g = |k: &str| row.adtcp_reactions.get(k).copied().unwrap_or(0).to_string();
        re.row([
            row.trace.clone(),
            row.loss.clone(),
            g("congestion"),
            g("channel_error"),
            g("route_change"),
            g("disconnection"),
            g("probe_failures"),
        ]);
    }
    r.table(
        "ADTCP sender reactions (sum over seeds)",
        "cellular_adtcp_reactions",
        re,
    );
    let mut trace_names: Vec<&str> = Vec::new();
    for row in rows {
        if !trace_names.contains(&row.trace.as_str()) {
            trace_names.push(&row.trace);
        }
    }
    for name in trace_names {
        let cells: Vec<&Row> = rows.iter().filter(|x| x.trace == name).collect();
        let bars = Bars {
            categories: cells.iter().map(|x| x.loss.clone()).collect(),
            series: PROTOCOLS
                .iter()
                .enumerate()
                .map(|(j, p)| {
                    (
                        p.name(),
                        cells
                            .iter()
                            .map(|x| x.goodput_bps.get(j).copied().unwrap_or(0.0) / 1e3)
                            .collect(),
                    )
                })
                .collect(),
        };
        let svg = bar_chart(
            &format!("Goodput over {name} vs added loss"),
            "goodput (kbit/s)",
            &bars,
            None,
        )?;
        r.file(format!("cellular_{name}.svg"), svg.into_bytes());
    }
    for t in built {
        r.text(format!(
            "trace {}: mean {:.2} Mbit/s over the run",
            t.name,
            t.mean_bytes_per_s * 8.0 / 1e6
        ));
    }
    r.file("cellular.json", json(&rows)?);
    Ok(r)
}
