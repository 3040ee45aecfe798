//! The metrics against the network's state (papers/004 §3, its Figure 3): IDD and STT
//! against the instantaneous maximum queue on the path, static and mobile (panels 1–2); POR
//! and PLR over time with the route changes (panel 3); PLR as channel error grows on a static
//! path (panel 4). `adaptnet exp adtcp-fig3`.
//!
//! The paper's claim for panels 1–2: "when the maximum network queue size exceeds half of the
//! buffer capacity, IDD is clearly high and STT clearly low"; with a small queue both vary,
//! more so with mobility. Panel 3: bursts of high POR go with route changes, PLR stays steady
//! without channel error bursts. Panel 4: PLR grows with the channel error rate. The TCP
//! sender is NewReno stamping ADTCP sending times, as in adtcp-accuracy; each sampling
//! interval is one point, placed at the queue the monitor saw when it closed.

use super::{CrossParams, json};
use crate::report::plot::line_chart_of;
use crate::report::spread::Spread;
use crate::report::table::Table;
use crate::{ExpError, ExpOptions, Experiment, Report};
use adaptnet_core::Time;
use adaptnet_core::adtcp::rsd::Level;
use adaptnet_sim::manet::mobility::ChannelErrorConfig;
use adaptnet_sim::manet::monitor::Monitor;
use adaptnet_sim::manet::{ManetConfig, Protocol};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

/// `adaptnet exp adtcp-fig3`.
pub struct MetricsFig;

/// How long after a route change's reordering burst its late packets may still arrive: the
/// largest default extra delay (100 ms) plus one packet time per hop and slack.
const RC_TAIL: Duration = Duration::from_millis(250);

/// `experiments/adtcp/metrics.params`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsParams {
    /// Run length, s.
    pub duration_s: f64,
    /// Run length with `--quick`, s.
    pub quick_duration_s: f64,
    /// Runs (seeds) per panel.
    pub runs: u64,
    /// Runs with `--quick`.
    pub quick_runs: u64,
    /// The monitor's sampling period, ms.
    pub monitor_period_ms: f64,
    /// Node speed of the mobile panels, m/s.
    pub mobile_speed_m_per_s: f64,
    /// Channel error of the mobile panels.
    pub channel_error: ChannelErrorConfig,
    /// Random-loss rates of panel 4 (static, no fades: `burst_loss = rate`).
    pub error_rates: Vec<f64>,
    /// Queue-size bin edges for panels 1–2, packets (ascending; the last bin is open).
    pub queue_bins: Vec<u64>,
    /// The path.
    pub path: ManetConfig,
    /// Cross traffic of panels 1–2.
    pub cross: Vec<CrossParams>,
}

impl MetricsParams {
    fn load(path: &Path) -> Result<MetricsParams, ExpError> {
        let p: MetricsParams = super::read_params(
            path,
            "crates/experiments/src/adtcp/metrics_fig.rs `MetricsParams`",
        )?;
        let bad = |field: &str, why: &str| super::bad_field(path, field, why);
        super::check_common(
            path,
            [p.duration_s, p.quick_duration_s],
            [p.runs, p.quick_runs],
            "runs",
            p.monitor_period_ms,
        )?;
        if p.error_rates.iter().any(|r| !(0.0..=1.0).contains(r)) {
            return Err(bad("error_rates", "must be probabilities in [0, 1]"));
        }
        if p.queue_bins.is_empty() || p.queue_bins.windows(2).any(|w| w[0] >= w[1]) {
            return Err(bad(
                "queue_bins",
                "must be non-empty and strictly ascending",
            ));
        }
        Ok(p)
    }

    fn duration(&self, quick: bool) -> Duration {
        Duration::from_secs_f64(if quick {
            self.quick_duration_s
        } else {
            self.duration_s
        })
    }

    fn seeds(&self, opts: &ExpOptions) -> Vec<u64> {
        if !opts.seeds.is_empty() {
            return opts.seeds.clone();
        }
        (1..=if opts.quick {
            self.quick_runs
        } else {
            self.runs
        })
            .collect()
    }

    fn config(
        &self,
        speed: f64,
        error: Option<ChannelErrorConfig>,
        cross: bool,
        d: f64,
    ) -> ManetConfig {
        let mut cfg = self.path.clone();
        cfg.mobility.speed_m_per_s = speed;
        cfg.channel_error = error;
        cfg.cbr = Vec::new();
        cfg.cross = if cross {
            self.cross.iter().map(|c| c.traffic(d)).collect()
        } else {
            Vec::new()
        };
        cfg
    }
}

/// One sampling interval as a point of panels 1–2.
#[derive(Clone, Copy, Debug, Serialize)]
struct Point {
    seed: u64,
    at_s: f64,
    max_queue_packets: u64,
    idd_ms: Option<f64>,
    stt_kbytes_per_s: f64,
    idd_high: bool,
    stt_low: bool,
}

/// The fullest queue the monitor saw at or just before `t`.
fn queue_at(m: &Monitor, t: Time) -> u64 {
    let idx = m.moments().partition_point(|x| x.at <= t);
    idx.checked_sub(1)
        .and_then(|i| m.moments().get(i))
        .map_or(0, |x| x.max_queue_packets)
}

/// Per-bin summary of panels 1–2.
#[derive(Clone, Debug, Serialize)]
struct Bin {
    panel: &'static str,
    label: String,
    mid: f64,
    intervals: usize,
    idd_ms_mean: f64,
    stt_kbytes_per_s_mean: f64,
    idd_high_pct: f64,
    stt_low_pct: f64,
    both_pct: f64,
}

fn pct(n: usize, of: usize) -> f64 {
    if of == 0 {
        f64::NAN
    } else {
        100.0 * n as f64 / of as f64
    }
}

fn bins(panel: &'static str, edges: &[u64], pts: &[Point]) -> Vec<Bin> {
    let mut out = Vec::new();
    for (i, &lo) in edges.iter().enumerate() {
        let hi = edges.get(i + 1).copied();
        let inside: Vec<&Point> = pts
            .iter()
            .filter(|p| p.max_queue_packets >= lo && hi.is_none_or(|h| p.max_queue_packets < h))
            .collect();
        let n = inside.len();
        let idds: Vec<f64> = inside.iter().filter_map(|p| p.idd_ms).collect();
        let stts: Vec<f64> = inside.iter().map(|p| p.stt_kbytes_per_s).collect();
        out.push(Bin {
            panel,
            label: match hi {
                Some(h) => format!("{lo}–{}", h - 1),
                None => format!("≥ {lo}"),
            },
            mid: hi.map_or(lo as f64 + 2.0, |h| (lo + h - 1) as f64 / 2.0),
            intervals: n,
            idd_ms_mean: crate::report::mean(&idds),
            stt_kbytes_per_s_mean: crate::report::mean(&stts),
            idd_high_pct: pct(inside.iter().filter(|p| p.idd_high).count(), n),
            stt_low_pct: pct(inside.iter().filter(|p| p.stt_low).count(), n),
            both_pct: pct(inside.iter().filter(|p| p.idd_high && p.stt_low).count(), n),
        });
    }
    out
}

/// The shares of "congestion" calls above and at-or-below half the buffer, per seed.
#[derive(Clone, Debug, Serialize)]
struct Split {
    panel: &'static str,
    above_idd_high: Spread,
    above_stt_low: Spread,
    above_both: Spread,
    below_idd_high: Spread,
    below_stt_low: Spread,
    below_both: Spread,
}

fn split(panel: &'static str, half: u64, pts: &[Point], seeds: &[u64]) -> Split {
    let share = |above: bool, f: fn(&Point) -> bool| {
        let per: Vec<f64> = seeds
            .iter()
            .map(|&s| {
                let v: Vec<&Point> = pts
                    .iter()
                    .filter(|p| p.seed == s && (p.max_queue_packets > half) == above)
                    .collect();
                pct(v.iter().filter(|p| f(p)).count(), v.len())
            })
            .collect();
        Spread::of(&per)
    };
    Split {
        panel,
        above_idd_high: share(true, |p| p.idd_high),
        above_stt_low: share(true, |p| p.stt_low),
        above_both: share(true, |p| p.idd_high && p.stt_low),
        below_idd_high: share(false, |p| p.idd_high),
        below_stt_low: share(false, |p| p.stt_low),
        below_both: share(false, |p| p.idd_high && p.stt_low),
    }
}

impl Experiment for MetricsFig {
    fn name(&self) -> &'static str {
        "adtcp-fig3"
    }

    fn summary(&self) -> &'static str {
        "papers/004 Fig. 3: IDD/STT vs the path's maximum queue (static, mobile); POR/PLR over time; PLR vs channel error"
    }

    fn run(&self, opts: &ExpOptions, progress: &mut dyn FnMut(f64)) -> Result<Report, ExpError> {
        let p = MetricsParams::load(&opts.experiments_dir.join("adtcp").join("metrics.params"))?;
        let seeds = p.seeds(opts);
        let duration = p.duration(opts.quick);
        let d = duration.as_secs_f64();
        let period = Duration::from_secs_f64(p.monitor_period_ms / 1e3);
        let total = (seeds.len() * (3 + p.error_rates.len())).max(1) as f64;
        let mut done = 0.0;
        let mut tick = |progress: &mut dyn FnMut(f64)| {
            done += 1.0;
            progress(done / total);
        };
        let v = p.mobile_speed_m_per_s;
        let panels: [(&'static str, ManetConfig); 2] = [
            ("static, no channel error", p.config(0.0, None, true, d)),
            (
                "mobile, channel error",
                p.config(v, Some(p.channel_error.clone()), true, d),
            ),
        ];
        let mut points: Vec<(&'static str, Vec<Point>)> = Vec::new();
        for (panel, cfg) in &panels {
            let mut pts = Vec::new();
            for &seed in &seeds {
                let out = super::run_path(
                    cfg,
                    duration,
                    super::run_seed(seed, cfg.mobility.speed_m_per_s),
                    &[Protocol::NewRenoObserved],
                    period,
                )?;
                for (t, id) in &out.identifications {
                    pts.push(Point {
                        seed,
                        at_s: t.as_secs_f64(),
                        max_queue_packets: queue_at(&out.monitor, *t),
                        idd_ms: id.sample.idd_us.map(|x| x / 1e3),
                        stt_kbytes_per_s: id.sample.stt_bytes_per_s / 1e3,
                        idd_high: id.levels.idd == Level::High,
                        stt_low: id.levels.stt == Level::Low,
                    });
                }
                tick(progress);
            }
            points.push((panel, pts));
        }
        // Panel 3: one flow, mobility and channel error, no competing traffic.
        let cfg3 = p.config(v, Some(p.channel_error.clone()), false, d);
        let mut por_in = Vec::new();
        let mut por_out = Vec::new();
        let mut series3: Vec<(f64, f64, f64, f64)> = Vec::new();
        for &seed in &seeds {
            let out = super::run_path(
                &cfg3,
                duration,
                super::run_seed(seed, v),
                &[Protocol::NewRenoObserved],
                period,
            )?;
            let rc_starts: Vec<Time> = out.route_changes.iter().map(|r| r.0).collect();
            let (mut hi_in, mut n_in, mut hi_out, mut n_out) = (0, 0, 0, 0);
            for (t, id) in &out.identifications {
                // The packets a route change reorders are the last of its burst, overtaken
                // by the first after it: they arrive up to the burst's extra delay (≤ 100 ms
                // by default) after the episode ends, so an interval touches a route change
                // if it overlaps the episode or the `RC_TAIL` after it.
                let start = id.sample.start;
                let in_rc = out
                    .route_changes
                    .iter()
                    .any(|&(s, e)| start <= e + RC_TAIL && *t >= s);
                let high = id.levels.por == Level::High;
                if in_rc {
                    n_in += 1;
                    hi_in += usize::from(high);
                } else {
                    n_out += 1;
                    hi_out += usize::from(high);
                }
                if seed == seeds[0] {
                    let changes = rc_starts.partition_point(|&x| x <= *t);
                    series3.push((
                        t.as_secs_f64(),
                        id.sample.por.unwrap_or(0.0),
                        id.sample.plr,
                        changes as f64,
                    ));
                }
            }
            por_in.push(pct(hi_in, n_in));
            por_out.push(pct(hi_out, n_out));
            tick(progress);
        }
        // Panel 4: static, growing random loss.
        let mut plr_rows = Vec::new();
        for &rate in &p.error_rates {
            let err = ChannelErrorConfig {
                rate,
                burst_loss: rate,
                mean_burst_packets: 1.0,
                ..p.channel_error.clone()
            };
            let cfg4 = p.config(0.0, (rate > 0.0).then_some(err), false, d);
            let mut plr = Vec::new();
            for &seed in &seeds {
                let out = super::run_path(
                    &cfg4,
                    duration,
                    super::run_seed(seed, 0.0),
                    &[Protocol::NewRenoObserved],
                    period,
                )?;
                let xs: Vec<f64> = out
                    .identifications
                    .iter()
                    .map(|(_, id)| 100.0 * id.sample.plr)
                    .collect();
                plr.push(crate::report::mean(&xs));
                tick(progress);
            }
            plr_rows.push((rate, Spread::of(&plr)));
        }
        report(&p, &seeds, &points, (por_in, por_out), &series3, &plr_rows)
    }
}

fn report(
    p: &MetricsParams,
    seeds: &[u64],
    points: &[(&'static str, Vec<Point>)],
    por: (Vec<f64>, Vec<f64>),
    series3: &[(f64, f64, f64, f64)],
    plr_rows: &[(f64, Spread)],
) -> Result<Report, ExpError> {
    let mut r = Report::default();
    r.text(
        "papers/004 §3, Figure 3. Paper: when the maximum queue on the path exceeds half the \
         buffer, IDD is clearly high and STT clearly low; with a small queue both vary (more \
         with mobility); high-POR bursts go with route changes; PLR grows with channel error. \
         Each sampling interval (half an RTT) is a point, at the fullest queue the monitor saw \
         when it closed; high/low are the receiver's own RSD levels.",
    );
    let half = u64::from(p.path.queue_packets) / 2;
    let mut t = Table::new([
        "panel",
        "max queue (pkts)",
        "intervals",
        "mean IDD ms",
        "mean STT kB/s",
        "IDD high %",
        "STT low %",
        "both %",
    ]);
    let mut all_bins = Vec::new();
    let mut splits = Vec::new();
    for (panel, pts) in points {
        for b in bins(panel, &p.queue_bins, pts) {
            t.row([
                panel.to_string(),
                b.label.clone(),
                b.intervals.to_string(),
                format!("{:.2}", b.idd_ms_mean),
                format!("{:.1}", b.stt_kbytes_per_s_mean),
                format!("{:.1}", b.idd_high_pct),
                format!("{:.1}", b.stt_low_pct),
                format!("{:.1}", b.both_pct),
            ]);
            all_bins.push(b);
        }
        splits.push(split(panel, half, pts, seeds));
    }
    r.table(
        "Panels 1–2: IDD and STT against the path's maximum queue (all seeds)",
        "fig3_queue_bins",
        t,
    );
    let mut s = Table::new([
        "panel",
        "queue",
        "IDD high %",
        "STT low %",
        "IDD high and STT low %",
    ]);
    for x in &splits {
        s.row([
            x.panel.to_string(),
            format!("> {half} (over half)"),
            format!("{:.1}", x.above_idd_high),
            format!("{:.1}", x.above_stt_low),
            format!("{:.1}", x.above_both),
        ]);
        s.row([
            x.panel.to_string(),
            format!("≤ {half}"),
            format!("{:.1}", x.below_idd_high),
            format!("{:.1}", x.below_stt_low),
            format!("{:.1}", x.below_both),
        ]);
    }
    r.table(
        "Panels 1–2 in two halves (mean ± 95 % interval over seeds; the RSD's own high/low \
         are the top/bottom 30 % of each history)",
        "fig3_queue_halves",
        s,
    );
    let (por_in, por_out) = por;
    let mut q = Table::new(["intervals", "POR high % (mean ± 95 % over seeds)"]);
    q.row([
        "touching a route change".to_string(),
        format!("{:.1}", Spread::of(&por_in)),
    ]);
    q.row([
        "elsewhere".to_string(),
        format!("{:.1}", Spread::of(&por_out)),
    ]);
    r.table(
        "Panel 3: POR high with and without a route change (mobile, channel error, one flow)",
        "fig3_por_route_change",
        q,
    );
    let mut l = Table::new(["random loss %", "mean PLR % (mean ± 95 % over seeds)"]);
    for (rate, sp) in plr_rows {
        l.row([format!("{:.1}", rate * 100.0), format!("{sp:.2}")]);
    }
    r.table(
        "Panel 4: PLR against the channel error rate (static, one flow)",
        "fig3_plr_vs_error",
        l,
    );
    // Plots: shares against the queue, and panel 3's time series.
    let mut lines: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for (panel, _) in points {
        let of: Vec<&Bin> = all_bins.iter().filter(|b| b.panel == *panel).collect();
        lines.push((
            format!("IDD high %, {panel}"),
            of.iter()
                .filter(|b| b.intervals > 0)
                .map(|b| (b.mid, b.idd_high_pct))
                .collect(),
        ));
        lines.push((
            format!("STT low %, {panel}"),
            of.iter()
                .filter(|b| b.intervals > 0)
                .map(|b| (b.mid, b.stt_low_pct))
                .collect(),
        ));
    }
    r.file(
        "fig3_levels_vs_queue.svg",
        line_chart_of(
            "IDD high and STT low against the path's maximum queue",
            "maximum queue (packets)",
            "% of sampling intervals",
            &lines,
        )?
        .into_bytes(),
    );
    let ts = [
        (
            "POR %".to_string(),
            series3
                .iter()
                .map(|x| (x.0, 100.0 * x.1))
                .collect::<Vec<_>>(),
        ),
        (
            "PLR %".to_string(),
            series3.iter().map(|x| (x.0, 100.0 * x.2)).collect(),
        ),
        (
            "route changes so far".to_string(),
            series3.iter().map(|x| (x.0, x.3)).collect(),
        ),
    ];
    r.file(
        "fig3_por_plr.svg",
        line_chart_of(
            "POR and PLR over time, mobile with channel error (first seed)",
            "time (s)",
            "% / count",
            &ts,
        )?
        .into_bytes(),
    );
    let mut csv = String::from(
        "panel,seed,time_s,max_queue_packets,idd_ms,stt_kbytes_per_s,idd_high,stt_low\n",
    );
    for (panel, pts) in points {
        for x in pts {
            csv.push_str(&format!(
                "{panel},{},{:.4},{},{},{:.3},{},{}\n",
                x.seed,
                x.at_s,
                x.max_queue_packets,
                x.idd_ms.map_or(String::new(), |v| format!("{v:.4}")),
                x.stt_kbytes_per_s,
                x.idd_high,
                x.stt_low
            ));
        }
    }
    r.file("fig3_points.csv", csv.into_bytes());
    r.file("fig3.json", json(&(all_bins, splits))?);
    Ok(r)
}
