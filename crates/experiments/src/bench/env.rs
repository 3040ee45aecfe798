//! Environment-event speed (`papers/001_29e98b27f5aac5c3.txt`; issue: ≥ 1,000,000 parameter
//! updates per second on one core with 100 levels and 1,000 action-table entries, cost
//! independent of the entries an update does not affect).
//!
//! One operation = one `set_dev_param` on a parameter with 100 alternating high/low levels
//! (the value walks so that a level is crossed on about one update in fifty) followed by handing
//! every event it raised to an action table. The baseline is the same walk with an empty
//! action table; the loaded run has 1,000 simple actions, all on *another* parameter except
//! ten on this one, so the ratio shows what entries an update does not touch cost.

use super::{BenchOptions, Benchmark, median_by};
use crate::report::table::Table;
use crate::{ExpError, Report};
use adaptnet_core::Time;
use adaptnet_core::env::{ActionTable, EnvTable, Level, Name, Param, UdpAction, Watermarks};
use std::time::{Duration, Instant};

/// `adaptnet bench env`.
pub struct EnvSpeed;

/// Updates timed per run.
const OPS: u64 = 2_000_000;
/// Levels on the measured parameter.
const LEVELS: usize = 100;

fn err(e: impl std::fmt::Display) -> ExpError {
    ExpError::Input(format!("bench env: {e}"))
}

/// Times `OPS` updates with `entries` action-table entries (ten of them on the measured
/// parameter); returns (seconds, events).
fn measure(entries: usize) -> Result<(f64, u64), ExpError> {
    let dev = Name::new("wlan0").map_err(err)?;
    let bw = Param::Bandwidth;
    let other = Param::Custom(Name::new("other").map_err(err)?);
    let levels: Vec<Level> = (0..LEVELS)
        .map(|i| {
            let v = 10.0 * (i as f64 + 1.0);
            if i % 2 == 0 {
                Level::high(v)
            } else {
                Level::low(v)
            }
        })
        .collect();
    let mut env = EnvTable::with_event_capacity(1024).map_err(err)?;
    env.set_dev_param_wms(&dev, &bw, Watermarks::new(levels).map_err(err)?)
        .map_err(err)?;
    let mut table = ActionTable::new(dev.clone());
    for i in 0..entries {
        let (param, level) = if i < 10 {
            (bw.clone(), (i * 10) as u16)
        } else {
            (other.clone(), (i % LEVELS) as u16)
        };
        table
            .set_simple_action(param, level, UdpAction::Sleep { max_sleep: None })
            .map_err(err)?;
    }
    let mut now = Time::ZERO;
    env.set_dev_param(now, &dev, &bw, 5.0).map_err(err)?;
    let mut events = 0u64;
    let start = Instant::now();
    for i in 0..OPS {
        now += Duration::from_micros(1);
        // A triangle wave over 0..1010 in steps of 0.2: a level (10 apart) every 50 updates.
        let phase = (i % 10_100) as f64;
        let value = if phase < 5_050.0 {
            phase / 5.0
        } else {
            (10_100.0 - phase) / 5.0
        };
        env.set_dev_param(now, &dev, &bw, value).map_err(err)?;
        while let Some(ev) = env.poll_event() {
            events += 1;
            let _ = table.handle_event(&ev);
        }
    }
    Ok((start.elapsed().as_secs_f64(), events))
}

impl Benchmark for EnvSpeed {
    fn name(&self) -> &'static str {
        "env"
    }

    fn summary(&self) -> &'static str {
        "environment events: parameter updates per second with 100 levels, empty vs 1,000-entry \
         action table (target >= 1,000,000 updates/s on one core, cost independent of \
         unaffected entries)"
    }

    fn run(&self, opts: &BenchOptions) -> Result<Report, ExpError> {
        let mut t = Table::new([
            "configuration",
            "updates",
            "events",
            "wall s",
            "updates/s",
            "time per update vs baseline",
        ]);
        let mut base = None;
        for (label, entries) in [
            ("baseline: empty action table", 0usize),
            ("1,000 entries (10 on this parameter)", 1000),
        ] {
            let mut runs = Vec::new();
            for _ in 0..opts.repeat.max(1) {
                runs.push(measure(entries)?);
            }
            let Some((wall, events)) = median_by(&runs, |r| r.0) else {
                return Err(ExpError::Input("no runs".into()));
            };
            let per = wall / OPS as f64;
            let b = *base.get_or_insert(per);
            t.row([
                label.to_string(),
                OPS.to_string(),
                events.to_string(),
                format!("{wall:.3}"),
                format!("{:.0}", OPS as f64 / wall),
                format!("{:.2}x", per / b),
            ]);
        }
        let mut report = Report::default();
        report.table(
            format!(
                "median of {} runs, one core; 100 levels, value crosses a level every ~50 updates",
                opts.repeat.max(1)
            ),
            "bench-env",
            t,
        );
        Ok(report)
    }
}
