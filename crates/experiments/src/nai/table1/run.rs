//! One run of `nai-table1` and what is measured from it: MB per level, and Figure 6's
//! series.

use super::app::{AdaptiveApp, PARAMS, Scheme, Table1Params};
use crate::ExpError;
use crate::nai::net::{Implementation, Run, Testbed, atp_config};
use crate::nai::params::{self, KB};
use crate::nai::traces::BuiltTrace;
use adaptnet_core::Time;
use adaptnet_core::nai::Outcome;
use adaptnet_sim::agents::atp::AtpSink;
use std::time::Duration;

/// One run's results.
#[derive(Clone, Debug)]
pub struct Table1Row {
    /// The scheme.
    pub scheme: Scheme,
    /// Estimator poll delay.
    pub poll_delay_s: u32,
    /// Bytes delivered before the timer, per level.
    pub level_bytes: Vec<f64>,
    /// DATA payload bytes that crossed the link (the paper's "bw").
    pub sent_bytes: f64,
    /// (time s, KB/s received) per second.
    pub used_series: Vec<(f64, f64)>,
    /// (time s, KB/s) of the mode's usage (notifications) or of the highest level delivered
    /// on time in each second (callbacks): Figure 6's mode lines.
    pub mode_series: Vec<(f64, f64)>,
    /// (time s, KB/s) of ATP's advertised estimate.
    pub estimate_series: Vec<(f64, f64)>,
}

/// Runs one scheme with one poll delay.
pub fn run_one(
    p: &Table1Params,
    trace: &BuiltTrace,
    scheme: Scheme,
    poll_delay_s: u32,
    duration_s: f64,
) -> Result<Table1Row, ExpError> {
    let testbed = Testbed::new(&p.testbed, trace.bandwidth.clone(), PARAMS)?;
    let levels: Vec<(f64, f64)> = p
        .levels
        .iter()
        .map(|l| {
            (
                l.upper_kbytes_per_s.map_or(f64::MAX, |u| u * KB),
                l.usage_kbytes_per_s * KB,
            )
        })
        .collect();
    let end = Time::from_secs_f64(duration_s);
    let app = AdaptiveApp::new(
        scheme,
        levels.clone(),
        Duration::from_secs_f64(params::positive(p.period_s, "period_s", PARAMS)?),
        Duration::from_secs_f64(params::positive(p.timer_s, "timer_s", PARAMS)?),
        end,
    );
    let n = levels.len().clamp(1, 8) as u8;
    let mut run = Run::new(
        &testbed,
        Implementation::Atp,
        atp_config(n, poll_delay_s),
        Box::new(app),
        p.seed,
    )?;
    run.run_until(end + Duration::from_secs_f64(p.timer_s + 1.0));
    collect(&mut run, scheme, poll_delay_s, duration_s)
}

/// Step series sampled once a second over `[0, duration)` from `(time s, value)` changes.
fn per_second(changes: &[(f64, f64)], duration_s: f64) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    let mut i = 0;
    let mut value = 0.0;
    let mut t = 0.0;
    while t < duration_s {
        while changes.get(i).is_some_and(|c| c.0 <= t) {
            value = changes[i].1;
            i += 1;
        }
        out.push((t, value));
        t += 1.0;
    }
    out
}

/// Collects one run's Table 1 row and Figure 6 series.
pub fn collect(
    run: &mut Run,
    scheme: Scheme,
    poll_delay_s: u32,
    duration_s: f64,
) -> Result<Table1Row, ExpError> {
    let mut world = run.world.results("table1");
    let run = &*run;
    let missing = || ExpError::Input("table1: the ATP sender or its application is missing".into());
    let app = run.app::<AdaptiveApp>().ok_or_else(missing)?;
    let ledger = run.ledger().ok_or_else(missing)?;
    let atp = run.atp().ok_or_else(missing)?;
    let n = app.levels_count();
    let mut level_bytes = vec![0.0; n];
    let seconds = duration_s.ceil().max(1.0) as usize + 2;
    let mut top_level = vec![0usize; seconds];
    for (id, r) in ledger.messages() {
        let Some(&level) = app.level_of.get(id) else {
            continue;
        };
        if r.on_time()
            && let Some(b) = level_bytes.get_mut(usize::from(level))
        {
            *b += r.size_bytes as f64;
            if let Some(Outcome::Delivered { at, .. }) = r.outcome
                && let Some(s) = top_level.get_mut(at.as_secs_f64() as usize)
            {
                *s = (*s).max(usize::from(level) + 1);
            }
        }
    }
    let sent_bytes = run
        .world
        .agent::<AtpSink>(run.receiver)
        .map_or(0.0, |s| s.payload_bytes() as f64);
    let used_series: Vec<(f64, f64)> = world
        .flows
        .first_mut()
        .map(|f| std::mem::take(&mut f.goodput_series_bps))
        .unwrap_or_default()
        .into_iter()
        .zip(&world.sample_times_s)
        .map(|(bps, t)| (t - 1.0, bps / 8.0 / KB))
        .filter(|(t, _)| *t < duration_s)
        .collect();
    let mode_series = match scheme {
        Scheme::Notifications => {
            let changes: Vec<(f64, f64)> = app
                .modes
                .iter()
                .map(|&(t, m)| (t.as_secs_f64(), app.mode_usage(m) / KB))
                .collect();
            per_second(&changes, duration_s)
        }
        Scheme::Callbacks => top_level
            .iter()
            .enumerate()
            .take(duration_s as usize)
            .map(|(s, &m)| (s as f64, app.mode_usage(m) / KB))
            .collect(),
    };
    let est: Vec<(f64, f64)> = atp
        .rate_series()
        .iter()
        .map(|&(t, r)| (t.as_secs_f64(), r / KB))
        .collect();
    Ok(Table1Row {
        scheme,
        poll_delay_s,
        level_bytes,
        sent_bytes,
        used_series,
        mode_series,
        estimate_series: per_second(&est, duration_s),
    })
}
