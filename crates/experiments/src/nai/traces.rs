//! Bandwidth traces for the NAI/ATP experiments.
//!
//! The paper's traces are not recoverable (§5.1: "a simplified, synthetic bandwidth trace …
//! varies bandwidth between 0 and 200 KB/s, and lasts for five minutes", shown only in
//! Figure 4; §4.4: a sub-interval of the measured 802.11b trace of Figure 1). We build
//! documented stand-ins from the parameter files — never tuned to a result:
//!
//! * **piecewise-linear**: breakpoints read off the paper's description (see
//!   `docs/design/nai.md` §3), sampled every `step_s`;
//! * **random-walk**: a seeded mean-reverting walk of the log-rate, with outages:
//!   `x ← x + reversion·(ln median − x) + sigma·N(0,1)`, rate `= clamp(e^x, min, max)`, and
//!   with probability `outage_probability` per step an outage of U(min, max) seconds at rate 0.
//!   Output as a piecewise trace, or as Mahimahi opportunities (one per 1500 bytes of the
//!   integrated rate, so the opportunity trace carries exactly the walk's capacity);
//! * **mahimahi-file**: a real trace (e.g. `../shared/traces/mahimahi/…`, never copied into
//!   the repository), cut and scaled.

use super::params::{KB, TraceParams, WalkParams};
use crate::ExpError;
use crate::rng::SplitMix;
use adaptnet_core::Time;
use adaptnet_sim::link::Bandwidth;
use adaptnet_sim::trace::{MAHIMAHI_OPPORTUNITY_BYTES, MahimahiTrace, PiecewiseTrace};
use std::fmt::Write as _;
use std::path::Path;

/// A trace ready for a link, with its text for the output directory.
#[derive(Clone, Debug)]
pub struct BuiltTrace {
    /// Name in reports.
    pub name: String,
    /// The link's capacity model.
    pub bandwidth: Bandwidth,
    /// File name and contents (piecewise or Mahimahi format) for the report.
    pub file: (String, String),
    /// Mean rate over `[0, duration]`, bytes per second.
    pub mean_bytes_per_s: f64,
}

/// Longest trace generated or read, in seconds (bounds the work of a bad parameter file).
pub const MAX_DURATION_S: f64 = 86_400.0;

fn bad(trace: &str, field: &str, why: &str) -> ExpError {
    ExpError::Input(format!("trace {trace}: field {field}: {why}"))
}

fn check_range(trace: &str, field: &str, v: f64, lo: f64, hi: f64) -> Result<(), ExpError> {
    if v.is_finite() && (lo..=hi).contains(&v) {
        Ok(())
    } else {
        Err(bad(
            trace,
            field,
            &format!("must be within [{lo}, {hi}], got {v}"),
        ))
    }
}

/// Checks a trace's parameters; errors name the trace and the field.
pub fn validate(params: &TraceParams, duration_s: f64) -> Result<(), ExpError> {
    let name = params.name();
    check_range(name, "duration_s", duration_s, 0.001, MAX_DURATION_S)?;
    match params {
        TraceParams::PiecewiseLinear { points, step_s, .. } => {
            check_range(name, "step_s", *step_s, 0.001, MAX_DURATION_S)?;
            if points.is_empty() {
                return Err(bad(
                    name,
                    "points",
                    "needs at least one [time_s, KB/s] pair",
                ));
            }
            for (i, w) in points.iter().enumerate() {
                check_range(name, "points (time)", w[0], 0.0, MAX_DURATION_S)?;
                check_range(name, "points (KB/s)", w[1], 0.0, 1e9)?;
                if i > 0 && w[0] < points[i - 1][0] {
                    return Err(bad(name, "points", "times must not decrease"));
                }
            }
        }
        TraceParams::RandomWalk(w) => {
            check_range(name, "duration_s", w.duration_s, 0.001, MAX_DURATION_S)?;
            check_range(name, "step_s", w.step_s, 0.001, w.duration_s)?;
            check_range(
                name,
                "median_kbytes_per_s",
                w.median_kbytes_per_s,
                0.001,
                1e9,
            )?;
            check_range(name, "sigma", w.sigma, 0.0, 10.0)?;
            check_range(name, "reversion", w.reversion, 0.0, 1.0)?;
            check_range(name, "max_kbytes_per_s", w.max_kbytes_per_s, 0.0, 1e9)?;
            check_range(
                name,
                "min_kbytes_per_s",
                w.min_kbytes_per_s,
                0.0,
                w.max_kbytes_per_s,
            )?;
            check_range(name, "outage_probability", w.outage_probability, 0.0, 1.0)?;
            check_range(name, "outage_max_s", w.outage_max_s, 0.0, MAX_DURATION_S)?;
            check_range(name, "outage_min_s", w.outage_min_s, 0.0, w.outage_max_s)?;
        }
        TraceParams::MahimahiFile {
            duration_s, scale, ..
        } => {
            check_range(name, "duration_s", *duration_s, 0.001, MAX_DURATION_S)?;
            check_range(name, "scale", *scale, 1e-6, 1e3)?;
        }
        TraceParams::Constant { kbytes_per_s, .. } => {
            check_range(name, "kbytes_per_s", *kbytes_per_s, 0.0, 1e9)?;
        }
    }
    Ok(())
}

/// Builds a trace; `Ok(Err(note))` for an optional file trace that is absent (the note says why).
pub fn build(
    params: &TraceParams,
    repo_root: &Path,
    duration_s: f64,
) -> Result<Result<BuiltTrace, String>, ExpError> {
    validate(params, duration_s)?;
    let trace = match params {
        TraceParams::PiecewiseLinear {
            name,
            points,
            step_s,
        } => {
            let steps = piecewise_linear(points, *step_s, duration_s);
            piecewise(name, steps)
        }
        TraceParams::RandomWalk(w) => random_walk(w)?,
        TraceParams::Constant { name, kbytes_per_s } => {
            piecewise(name, vec![(0.0, kbytes_per_s * KB)])
        }
        TraceParams::MahimahiFile {
            name,
            path,
            duration_s,
            scale,
            optional,
        } => {
            let full = repo_root.join(path);
            if !full.exists() && *optional {
                return Ok(Err(format!(
                    "trace {name} skipped: {} is absent (real traces are not part of the \
                     repository)",
                    full.display()
                )));
            }
            let t = MahimahiTrace::load(&full)
                .map_err(|e| ExpError::Input(format!("trace {name}: {e}")))?;
            let cut = scale_opportunities(&t.opportunities_ms, *duration_s, *scale);
            mahimahi(name, cut)
        }
    };
    let mean = trace
        .bandwidth
        .capacity_bytes(Time::from_secs_f64(duration_s))
        / duration_s;
    Ok(Ok(BuiltTrace {
        mean_bytes_per_s: mean,
        ..trace
    }))
}

/// Piecewise-constant steps sampling the polyline `points` at the middle of each step.
pub fn piecewise_linear(points: &[[f64; 2]], step_s: f64, duration_s: f64) -> Vec<(f64, f64)> {
    let step = if step_s.is_finite() && step_s > 0.0 {
        step_s
    } else {
        1.0
    };
    let at = |x: f64| -> f64 {
        // The last segment whose start is at or before x (a repeated time is a jump).
        let i = points.partition_point(|p| p[0] <= x);
        match (i.checked_sub(1).and_then(|j| points.get(j)), points.get(i)) {
            (Some(a), Some(b)) if b[0] > a[0] => a[1] + (b[1] - a[1]) * (x - a[0]) / (b[0] - a[0]),
            (Some(a), _) => a[1],
            (None, Some(b)) => b[1],
            (None, None) => 0.0,
        }
    };
    let mut steps = Vec::new();
    let mut t = 0.0;
    while t < duration_s {
        steps.push((t, (at(t + step / 2.0) * KB).max(0.0)));
        t += step;
    }
    if steps.is_empty() {
        steps.push((0.0, 0.0));
    }
    steps
}

fn piecewise(name: &str, steps: Vec<(f64, f64)>) -> BuiltTrace {
    let mut text = format!("# {name}: time_s rate_bytes_per_s (adaptnet piecewise format)\n");
    for (t, r) in &steps {
        let _ = writeln!(text, "{t} {r:.0}");
    }
    BuiltTrace {
        name: name.to_string(),
        bandwidth: Bandwidth::Piecewise(PiecewiseTrace { steps }),
        file: (format!("trace-{name}.piecewise"), text),
        mean_bytes_per_s: 0.0,
    }
}

fn mahimahi(name: &str, opportunities_ms: Vec<u64>) -> BuiltTrace {
    let mut text = String::new();
    for ms in &opportunities_ms {
        let _ = writeln!(text, "{ms}");
    }
    BuiltTrace {
        name: name.to_string(),
        bandwidth: Bandwidth::Mahimahi(MahimahiTrace { opportunities_ms }),
        file: (format!("trace-{name}.mahimahi"), text),
        mean_bytes_per_s: 0.0,
    }
}

/// Keeps the opportunities before `duration_s`, each repeated or thinned by `scale` (a
/// running fractional count), and closes the period at exactly `duration_s`.
pub fn scale_opportunities(ms: &[u64], duration_s: f64, scale: f64) -> Vec<u64> {
    let end_ms = (duration_s * 1000.0).round().max(1.0) as u64;
    let scale = if scale.is_finite() && scale > 0.0 {
        scale
    } else {
        1.0
    };
    let mut out = Vec::new();
    let mut acc = 0.0f64;
    for &t in ms.iter().take_while(|&&t| t < end_ms) {
        let before = acc.floor();
        acc += scale;
        for _ in 0..(acc.floor() - before) as u64 {
            out.push(t);
        }
    }
    // Mahimahi's period is the last timestamp; an extra opportunity there keeps it exact.
    out.push(end_ms);
    out
}

/// The random-walk generator (see the module docs).
pub fn random_walk(w: &WalkParams) -> Result<BuiltTrace, ExpError> {
    let step = w.step_s.max(0.001);
    let mut rng = SplitMix::new(w.seed, 0x0074_7261_6365);
    let target = (w.median_kbytes_per_s * KB).max(1.0).ln();
    let mut x = target;
    let mut outage_left = 0.0f64;
    let mut steps: Vec<(f64, f64)> = Vec::new();
    let mut t = 0.0;
    while t < w.duration_s {
        x += w.reversion * (target - x) + w.sigma * rng.normal();
        let rate = if outage_left > 0.0 {
            outage_left -= step;
            0.0
        } else if rng.unit() < w.outage_probability {
            outage_left = rng.range(w.outage_min_s, w.outage_max_s) - step;
            0.0
        } else {
            x.exp()
                .clamp(w.min_kbytes_per_s * KB, w.max_kbytes_per_s * KB)
        };
        steps.push((t, rate));
        t += step;
    }
    match w.format.as_str() {
        "piecewise" => Ok(piecewise(&w.name, steps)),
        "mahimahi" => Ok(mahimahi(&w.name, opportunities(&steps, w.duration_s))),
        other => Err(ExpError::Input(format!(
            "trace {}: field format: expected \"piecewise\" or \"mahimahi\", got {other:?}",
            w.name
        ))),
    }
}

/// Mahimahi opportunities carrying the capacity of piecewise `steps` over `[0, duration_s)`:
/// one each time the integrated rate crosses a multiple of 1500 bytes.
fn opportunities(steps: &[(f64, f64)], duration_s: f64) -> Vec<u64> {
    let per = MAHIMAHI_OPPORTUNITY_BYTES as f64;
    let mut out = Vec::new();
    let mut carried = 0.0f64; // bytes accumulated towards the next opportunity
    for (i, &(start, rate)) in steps.iter().enumerate() {
        let end = steps.get(i + 1).map_or(duration_s, |s| s.0).min(duration_s);
        if rate <= 0.0 || end <= start {
            continue;
        }
        let mut t = start + (per - carried) / rate;
        while t < end {
            out.push((t * 1000.0).floor() as u64);
            t += per / rate;
        }
        carried = per - (t - end) * rate;
    }
    out.push((duration_s * 1000.0).round().max(1.0) as u64);
    out
}

/// The trace's rate per `period_s` over `[0, duration_s)`, in KB/s, for plots and tables.
pub fn rate_series(bandwidth: &Bandwidth, duration_s: f64, period_s: f64) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    let mut t = 0.0;
    while t < duration_s {
        let a = bandwidth.capacity_bytes(Time::from_secs_f64(t));
        let b = bandwidth.capacity_bytes(Time::from_secs_f64(t + period_s));
        out.push((t, (b - a) / period_s / KB));
        t += period_s;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polyline_with_jump_is_sampled_mid_step() {
        let pts = [[0.0, 100.0], [10.0, 0.0], [10.0, 50.0], [20.0, 50.0]];
        let s = piecewise_linear(&pts, 1.0, 20.0);
        assert_eq!(s.len(), 20);
        assert_eq!(s[0], (0.0, 95.0 * KB));
        assert_eq!(s[9], (9.0, 5.0 * KB));
        assert_eq!(s[10], (10.0, 50.0 * KB));
    }

    #[test]
    fn opportunities_carry_the_integrated_rate() {
        let steps = vec![(0.0, 150_000.0), (1.0, 0.0), (2.0, 15_000.0)];
        let o = opportunities(&steps, 3.0);
        // ~100 in the first second, none in the second, ~10 in the third (an opportunity on
        // a boundary may fall either side), 110 in all, plus the closing one.
        let first = o.iter().filter(|&&t| t < 1000).count();
        assert!((99..=100).contains(&first));
        assert_eq!(o.iter().filter(|&&t| (1000..2000).contains(&t)).count(), 0);
        assert!((109..=110).contains(&(o.len() - 1)));
        assert_eq!(o.last(), Some(&3000));
    }

    #[test]
    fn bad_parameters_name_the_trace_and_field() {
        let t = TraceParams::PiecewiseLinear {
            name: "x".into(),
            points: vec![[0.0, 10.0], [5.0, f64::NAN]],
            step_s: 1.0,
        };
        let e = validate(&t, 300.0).unwrap_err().to_string();
        assert!(e.contains("trace x") && e.contains("points (KB/s)"), "{e}");
        let t = TraceParams::PiecewiseLinear {
            name: "y".into(),
            points: vec![[0.0, 10.0]],
            step_s: 0.0,
        };
        assert!(
            validate(&t, 300.0)
                .unwrap_err()
                .to_string()
                .contains("step_s")
        );
    }

    #[test]
    fn scaling_thins_and_repeats() {
        let ms: Vec<u64> = (0..100).collect();
        assert_eq!(scale_opportunities(&ms, 0.05, 1.0).len(), 51);
        assert_eq!(scale_opportunities(&ms, 1.0, 0.5).len(), 51);
        assert_eq!(scale_opportunities(&ms, 1.0, 2.0).len(), 201);
    }
}
