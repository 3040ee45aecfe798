//! Measurements and report of `nai-table1`: MB per level beside the paper's Table 1, and
//! Figure 6's graphs (true bandwidth, bandwidth used, the application's mode).

use super::net::Run;
use super::params::KB;
use super::table1::{AdaptiveApp, Scheme, Table1Params, Table1Row};
use super::traces::{self, BuiltTrace};
use crate::report::plot::{Series, line_chart};
use crate::report::table::Table;
use crate::{ExpError, Report};
use adaptnet_core::nai::Outcome;
use adaptnet_sim::agents::atp::AtpSink;

/// MB as in the paper's Table 1 (2^20 bytes).
const MB: f64 = 1024.0 * 1024.0;

/// The paper's Table 1: (scheme, poll delay, L1..L4, total, bw) in MB.
pub const PAPER: [(&str, u32, [f64; 4], f64, f64); 4] = [
    ("bandwidth", 1, [5.6, 18.7, 9.7, 7.4], 41.5, 44.0),
    ("callbacks", 1, [6.2, 19.9, 12.2, 10.2], 48.5, 54.1),
    ("bandwidth", 3, [5.8, 14.5, 6.9, 3.2], 30.4, 32.4),
    ("callbacks", 3, [6.6, 18.2, 9.4, 8.9], 43.1, 47.6),
];

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

/// Builds the report.
pub fn report(
    p: &Table1Params,
    trace: &BuiltTrace,
    rows: &[Table1Row],
    duration_s: f64,
) -> Result<Report, ExpError> {
    let mut t = Table::new([
        "scheme", "poll s", "source", "L1 MB", "L2 MB", "L3 MB", "L4 MB", "total MB", "bw MB",
    ]);
    for r in rows {
        let mut cells = vec![
            r.scheme.label().to_string(),
            r.poll_delay_s.to_string(),
            "ours".to_string(),
        ];
        cells.extend(r.level_bytes.iter().map(|b| format!("{:.1}", b / MB)));
        cells.push(format!("{:.1}", r.level_bytes.iter().sum::<f64>() / MB));
        cells.push(format!("{:.1}", r.sent_bytes / MB));
        t.row(cells);
        if let Some(paper) = PAPER
            .iter()
            .find(|x| x.0 == r.scheme.label() && x.1 == r.poll_delay_s)
        {
            let mut cells = vec![String::new(), String::new(), "paper".to_string()];
            cells.extend(paper.2.iter().map(|v| format!("{v:.1}")));
            cells.push(format!("{:.1}", paper.3));
            cells.push(format!("{:.1}", paper.4));
            t.row(cells);
        }
    }
    let mut report = Report::default();
    report.text(format!(
        "NAI/ATP Table 1 (paper 000 §4.4): MB delivered before the 1-s timer per level, total, and \
         bandwidth used (DATA payload bytes that crossed the link: incomplete messages and retransmissions included). \
         Trace {} (synthetic stand-in for the paper's measured 802.11b trace: mean {:.0} KB/s \
         over {:.0} s), so absolute MB are not comparable; the comparisons are.",
        trace.name,
        trace.mean_bytes_per_s / KB,
        duration_s
    ));
    report.table("Table 1", "table1", t);
    let total = |s: Scheme, poll: u32| {
        rows.iter()
            .find(|r| r.scheme == s && r.poll_delay_s == poll)
            .map(|r| (r.level_bytes.iter().sum::<f64>() / MB, r.sent_bytes / MB))
    };
    let mut checks = String::from("Paper's comparisons vs ours:\n");
    for poll in &p.poll_delays_s {
        if let (Some(b), Some(c)) = (
            total(Scheme::Notifications, *poll),
            total(Scheme::Callbacks, *poll),
        ) {
            checks.push_str(&format!(
                "- poll {poll} s: callbacks+priorities delivers more than notifications: {:.1} vs \
                 {:.1} MB ({}); wasted (bw - total): {:.1} vs {:.1} MB (paper: callbacks waste \
                 more)\n",
                c.0,
                b.0,
                if c.0 > b.0 {
                    "yes, as in the paper"
                } else {
                    "no"
                },
                c.1 - c.0,
                b.1 - b.0
            ));
        }
    }
    if let (Some(b1), Some(b3)) = (
        total(Scheme::Notifications, 1),
        total(Scheme::Notifications, 3),
    ) {
        checks.push_str(&format!(
            "- notifications, poll 3 s vs 1 s: {:.1} vs {:.1} MB (paper: 30.4 vs 41.5, the longer \
             poll delay reacts more slowly)\n",
            b3.0, b1.0
        ));
    }
    report.text(checks);
    let truth = traces::rate_series(&trace.bandwidth, duration_s, 1.0);
    for r in rows {
        let series = [
            Series {
                label: "true bandwidth",
                points: truth.clone(),
            },
            Series {
                label: "used (received)",
                points: r.used_series.clone(),
            },
            Series {
                label: "ATP estimate",
                points: r.estimate_series.clone(),
            },
            Series {
                label: "mode",
                points: r.mode_series.clone(),
            },
        ];
        let svg = line_chart(
            &format!(
                "Fig. 6: {} scheme, poll delay {} s",
                r.scheme.label(),
                r.poll_delay_s
            ),
            "time (s)",
            "KB/s",
            &series,
        )?;
        report.file(
            format!("fig6-{}-poll{}.svg", r.scheme.label(), r.poll_delay_s),
            svg.into_bytes(),
        );
    }
    report.file(trace.file.0.clone(), trace.file.1.clone().into_bytes());
    Ok(report)
}
