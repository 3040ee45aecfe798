//! Measurements and report of `nai-table1`: MB per level beside the paper's Table 1, and
//! Figure 6's graphs (true bandwidth, bandwidth used, the application's mode).

use super::app::{Scheme, Table1Params};
use super::run::Table1Row;
use crate::nai::params::KB;
use crate::nai::traces::{self, BuiltTrace};
use crate::report::plot::{Series, line_chart};
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
