//! Measurements and report of `nai-table1`: MB per level beside the paper's Table 1, and
//! Figure 6's graphs (true bandwidth, bandwidth used, the application's mode).

use super::app::{Scheme, Table1Params};
use super::run::Table1Row;
use crate::nai::params::KB;
use crate::nai::traces::{self, BuiltTrace};
use crate::report::plot::{Series, line_chart};
use crate::report::spread::Spread;
use crate::report::table::Table;
use crate::{ExpError, Report};

/// MB as in the paper's Table 1 (2^20 bytes).
const MB: f64 = 1024.0 * 1024.0;

/// The paper's Table 1: (scheme, poll delay, L1..L4, total, bw) in MB.
pub const PAPER: [(&str, u32, [f64; 4], f64, f64); 4] = [
    ("bandwidth", 1, [5.6, 18.7, 9.7, 7.4], 41.5, 44.0),
    ("callbacks", 1, [6.2, 19.9, 12.2, 10.2], 48.5, 54.1),
    ("bandwidth", 3, [5.8, 14.5, 6.9, 3.2], 30.4, 32.4),
    ("callbacks", 3, [6.6, 18.2, 9.4, 8.9], 43.1, 47.6),
];

/// One trial: (seed, its trace's mean rate in bytes/s, its four rows).
pub type Trial = (u64, f64, Vec<Table1Row>);

/// `mean ± half-width` in MB of `xs` (bytes).
fn mb(xs: &[f64]) -> String {
    Spread::of(&xs.iter().map(|x| x / MB).collect::<Vec<_>>()).fmt_with(1)
}

/// Builds the report: every cell a mean over the trials with its 95 % interval; Figure 6 from
/// the first trial.
pub fn report(
    p: &Table1Params,
    trace: &BuiltTrace,
    trials: &[Trial],
    duration_s: f64,
) -> Result<Report, ExpError> {
    let mut t = Table::new([
        "scheme", "poll s", "source", "L1 MB", "L2 MB", "L3 MB", "L4 MB", "total MB", "bw MB",
    ]);
    let cell_rows = |s: Scheme, poll: u32| -> Vec<&Table1Row> {
        trials
            .iter()
            .filter_map(|(_, _, rows)| {
                rows.iter()
                    .find(|r| r.scheme == s && r.poll_delay_s == poll)
            })
            .collect()
    };
    let total_of = |r: &Table1Row| r.level_bytes.iter().sum::<f64>();
    for &poll in &p.poll_delays_s {
        for scheme in [Scheme::Notifications, Scheme::Callbacks] {
            let rs = cell_rows(scheme, poll);
            let Some(first) = rs.first() else { continue };
            let mut cells = vec![
                scheme.label().to_string(),
                poll.to_string(),
                "ours".to_string(),
            ];
            for k in 0..first.level_bytes.len() {
                let v: Vec<f64> = rs
                    .iter()
                    .map(|r| r.level_bytes.get(k).copied().unwrap_or(0.0))
                    .collect();
                cells.push(mb(&v));
            }
            cells.push(mb(&rs.iter().map(|r| total_of(r)).collect::<Vec<_>>()));
            cells.push(mb(&rs.iter().map(|r| r.sent_bytes).collect::<Vec<_>>()));
            t.row(cells);
            if let Some(paper) = PAPER.iter().find(|x| x.0 == scheme.label() && x.1 == poll) {
                let mut cells = vec![String::new(), String::new(), "paper".to_string()];
                cells.extend(paper.2.iter().map(|v| format!("{v:.1}")));
                cells.push(format!("{:.1}", paper.3));
                cells.push(format!("{:.1}", paper.4));
                t.row(cells);
            }
        }
    }
    let means: Vec<f64> = trials.iter().map(|x| x.1 / KB).collect();
    let mut report = Report::default();
    report.text(format!(
        "NAI/ATP Table 1 (paper 000 §4.4): MB delivered before the 1-s timer per level, total, and \
         bandwidth used (DATA payload bytes that crossed the link: incomplete messages and retransmissions included). \
         {} trials, each over its own synthetic stand-in for a sub-interval of the paper's \
         measured 802.11b trace (trace {}: mean {} KB/s over the trials; trial seeds {:?}), so \
         absolute MB are not comparable; the comparisons are. Cells: mean ± the half-width of \
         the 95 % interval over the trials (Student's t); first trial's trace: mean {:.0} KB/s \
         over {:.0} s.",
        trials.len(),
        trace.name,
        Spread::of(&means).fmt_with(0),
        trials.iter().map(|x| x.0).collect::<Vec<_>>(),
        trace.mean_bytes_per_s / KB,
        duration_s
    ));
    report.table("Table 1", "table1", t);
    // The paper's comparisons, each as a per-trial difference with its interval.
    let diff = |a: Scheme, pa: u32, b: Scheme, pb: u32, f: &dyn Fn(&Table1Row) -> f64| {
        let v: Vec<f64> = trials
            .iter()
            .filter_map(|(_, _, rows)| {
                let x = rows
                    .iter()
                    .find(|r| r.scheme == a && r.poll_delay_s == pa)?;
                let y = rows
                    .iter()
                    .find(|r| r.scheme == b && r.poll_delay_s == pb)?;
                Some((f(x) - f(y)) / MB)
            })
            .collect();
        Spread::of(&v)
    };
    let verdict = |d: Spread| {
        if d.low() > 0.0 {
            "yes (interval above 0)"
        } else if d.high() < 0.0 {
            "no (interval below 0)"
        } else {
            "undecided (interval contains 0)"
        }
    };
    let waste = |r: &Table1Row| r.sent_bytes - total_of(r);
    let mut checks = String::from("Paper's comparisons vs ours (per-trial differences, MB):\n");
    for &poll in &p.poll_delays_s {
        let d = diff(
            Scheme::Callbacks,
            poll,
            Scheme::Notifications,
            poll,
            &total_of,
        );
        let w = diff(Scheme::Callbacks, poll, Scheme::Notifications, poll, &waste);
        checks.push_str(&format!(
            "- poll {poll} s: callbacks+priorities delivers more than notifications: {} MB \
             ({}); wastes more (bw - total): {} MB ({})\n",
            d.fmt_with(1),
            verdict(d),
            w.fmt_with(1),
            verdict(w)
        ));
    }
    let d = diff(
        Scheme::Notifications,
        1,
        Scheme::Notifications,
        3,
        &total_of,
    );
    checks.push_str(&format!(
        "- notifications, poll 1 s minus 3 s: {} MB ({}; paper: 41.5 − 30.4 = 11.1, the longer \
         poll delay reacts more slowly)\n",
        d.fmt_with(1),
        verdict(d)
    ));
    report.text(checks);
    let rows: Vec<&Table1Row> = trials
        .first()
        .map(|x| x.2.iter().collect())
        .unwrap_or_default();
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
