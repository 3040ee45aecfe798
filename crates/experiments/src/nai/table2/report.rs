//! The report of `nai-table2`: Figure 7's fractions as tables and bar charts, the outcome
//! breakdown, and the paper's stated comparisons checked against ours.

use super::cells::{
    ABLATION, CellResult, IMPLEMENTATIONS, Table2Params, TraceResults, mean_fraction,
};
use crate::nai::net::Implementation;
use crate::nai::params::KB;
use crate::nai::traces;
use crate::nai::workloads::level_name;
use crate::report::plot::{Bars, Series, bar_chart, line_chart};
use crate::report::table::Table;
use crate::{ExpError, Report};
use adaptnet_core::nai::Priority;

fn pct(x: f64) -> String {
    format!("{:.1}", x * 100.0)
}

fn imp_index(imp: Implementation) -> usize {
    IMPLEMENTATIONS.iter().position(|i| *i == imp).unwrap_or(0)
}

/// Mean on-time fraction of `level` for workload `w` and `imp` in one trace's results.
pub fn fraction(r: &TraceResults, w: usize, imp: Implementation, level: usize) -> f64 {
    r.cells
        .get(w)
        .and_then(|row| row.get(imp_index(imp)))
        .map_or(0.0, |cells| mean_fraction(cells, level))
}

/// The rows of a per-level table of one trace: every level of every workload that has
/// messages, as (workload index, level, the row's first cells: workload and priority names).
fn level_rows<'a>(
    p: &'a Table2Params,
    r: &'a TraceResults,
) -> impl Iterator<Item = (usize, usize, Vec<String>)> + 'a {
    p.workloads.iter().enumerate().flat_map(move |(wi, w)| {
        (0..usize::from(w.levels))
            .filter(move |&level| {
                r.cells[wi][0]
                    .first()
                    .and_then(|c| c.tallies.get(level))
                    .is_some_and(|t| t.total > 0)
            })
            .map(move |level| {
                let names = vec![
                    w.name.clone(),
                    level_name(Priority(level as u8), w.levels).to_string(),
                ];
                (wi, level, names)
            })
    })
}

/// The fractions table of one trace: one row per workload and level, one column per
/// implementation (percent delivered before the timer, mean over trials).
pub fn fractions_table(p: &Table2Params, r: &TraceResults) -> Table {
    let mut header = vec!["workload".to_string(), "priority".to_string()];
    header.extend(IMPLEMENTATIONS.iter().map(|i| format!("{} %", i.label())));
    let mut t = Table::new(header);
    for (wi, level, mut row) in level_rows(p, r) {
        row.extend(
            IMPLEMENTATIONS
                .iter()
                .map(|&imp| pct(fraction(r, wi, imp, level))),
        );
        t.row(row);
    }
    t
}

fn outcomes_csv(p: &Table2Params, results: &[TraceResults]) -> Table {
    let mut t = Table::new([
        "trace",
        "workload",
        "implementation",
        "priority",
        "messages",
        "on_time",
        "late",
        "expired_early",
        "expired",
        "rejected",
        "cancelled",
        "pending",
        "violations",
        "live_at_end",
    ]);
    for r in results {
        for (wi, w) in p.workloads.iter().enumerate() {
            for (ii, imp) in IMPLEMENTATIONS.iter().enumerate() {
                let cells: &[CellResult] = &r.cells[wi][ii];
                let n = cells.len().max(1) as f64;
                for level in 0..usize::from(w.levels) {
                    let sum = |f: &dyn Fn(&super::cells::Tally) -> u64| {
                        cells
                            .iter()
                            .map(|c| c.tallies.get(level).map_or(0, f))
                            .sum::<u64>() as f64
                            / n
                    };
                    let total = sum(&|t| t.total);
                    if total == 0.0 {
                        continue;
                    }
                    t.row([
                        r.trace.name.clone(),
                        w.name.clone(),
                        imp.label(),
                        level_name(Priority(level as u8), w.levels).to_string(),
                        format!("{total:.1}"),
                        format!("{:.1}", sum(&|t| t.on_time)),
                        format!("{:.1}", sum(&|t| t.late)),
                        format!("{:.1}", sum(&|t| t.expired_early)),
                        format!("{:.1}", sum(&|t| t.expired)),
                        format!("{:.1}", sum(&|t| t.rejected)),
                        format!("{:.1}", sum(&|t| t.cancelled)),
                        format!("{:.1}", sum(&|t| t.pending)),
                        cells.iter().map(|c| c.violations).sum::<u64>().to_string(),
                        cells
                            .iter()
                            .map(|c| c.live_at_end)
                            .sum::<usize>()
                            .to_string(),
                    ]);
                }
            }
        }
    }
    t
}

/// Bars of one level across the workloads that use it (Figure 7a/b), or of every level of
/// one workload (Figure 7c).
fn chart(
    title: &str,
    r: &TraceResults,
    groups: &[(String, usize, usize)],
) -> Result<String, ExpError> {
    let labels: Vec<String> = IMPLEMENTATIONS.iter().map(|i| i.label()).collect();
    let series = IMPLEMENTATIONS
        .iter()
        .zip(&labels)
        .map(|(&imp, label)| {
            (
                label.as_str(),
                groups
                    .iter()
                    .map(|&(_, w, level)| fraction(r, w, imp, level))
                    .collect(),
            )
        })
        .collect();
    let bars = Bars {
        categories: groups.iter().map(|g| g.0.clone()).collect(),
        series,
    };
    Ok(bar_chart(
        title,
        "fraction delivered before the timer",
        &bars,
        Some(1.0),
    )?)
}

/// The paper's comparisons (§5.4), computed on one trace's results.
fn claims(p: &Table2Params, r: &TraceResults) -> String {
    let find = |name: &str| p.workloads.iter().position(|w| w.name == name);
    let mut out = format!("Paper's statements vs ours on trace {}:\n", r.trace.name);
    for (name, claim) in [
        ("filesystem", "ATP ahead by 30 % or more"),
        ("overload", "ATP ahead by 30 % or more"),
        ("prioritised", "ATP best, by less"),
    ] {
        let Some(w) = find(name) else { continue };
        let atp = fraction(r, w, Implementation::Atp, 0);
        let best = (1..=3)
            .map(|k| fraction(r, w, Implementation::Mtcp(k), 0))
            .fold(0.0f64, f64::max);
        let gain = if best > 0.0 {
            format!("{:+.0} %", (atp / best - 1.0) * 100.0)
        } else {
            "n/a".into()
        };
        out.push_str(&format!(
            "- {name}, high priority: ATP {} % vs best NAI-MTCP {} % ({gain}; paper: {claim}), \
             NAI-TCP {} %, oracle {} %\n",
            pct(atp),
            pct(best),
            pct(fraction(r, w, Implementation::NaiTcp, 0)),
            pct(fraction(r, w, Implementation::Oracle, 0)),
        ));
    }
    for name in ["prioritised", "filesystem", "overload"] {
        let Some(w) = find(name) else { continue };
        let low = usize::from(p.workloads[w].levels.max(2) - 1);
        out.push_str(&format!(
            "- {name}, NAI-TCP high vs low: {} % vs {} % (paper: NAI-TCP ignores priorities); \
             ATP high vs low: {} % vs {} %\n",
            pct(fraction(r, w, Implementation::NaiTcp, 0)),
            pct(fraction(r, w, Implementation::NaiTcp, low)),
            pct(fraction(r, w, Implementation::Atp, 0)),
            pct(fraction(r, w, Implementation::Atp, low)),
        ));
    }
    for (name, trend) in [("reversed", "degrades"), ("overload", "improves")] {
        let Some(w) = find(name) else { continue };
        let ks: Vec<String> = (1..=3)
            .map(|k| pct(fraction(r, w, Implementation::Mtcp(k), 0)))
            .collect();
        out.push_str(&format!(
            "- {name}, high priority for NAI-MTCP1/2/3: {} % (paper: {trend} with more streams)\n",
            ks.join(" / ")
        ));
    }
    if let Some(w) = find("random") {
        out.push_str(&format!(
            "- random, high priority: NAI-TCP {} % vs ATP {} % (paper: NAI-TCP ahead by 2.5 %)\n",
            pct(fraction(r, w, Implementation::NaiTcp, 0)),
            pct(fraction(r, w, Implementation::Atp, 0)),
        ));
    }
    out
}

fn ablation_table(p: &Table2Params, r: &TraceResults, ablation: &[Vec<Vec<CellResult>>]) -> Table {
    let mut header = vec!["workload".to_string(), "priority".to_string()];
    for imp in ABLATION {
        header.push(format!("{} same-level %", imp.label()));
        header.push(format!("{} all-levels %", imp.label()));
    }
    let mut t = Table::new(header);
    for (wi, level, mut row) in level_rows(p, r) {
        for (ai, imp) in ABLATION.iter().enumerate() {
            row.push(pct(fraction(r, wi, *imp, level)));
            let cells = ablation.get(wi).and_then(|x| x.get(ai));
            row.push(pct(cells.map_or(0.0, |c| mean_fraction(c, level))));
        }
        t.row(row);
    }
    t
}

/// Builds the report.
pub fn report(
    p: &Table2Params,
    seeds: &[u64],
    results: &[TraceResults],
    ablation: &[Vec<Vec<CellResult>>],
    notes: &[String],
) -> Result<Report, ExpError> {
    let mut report = Report::default();
    report.text(format!(
        "NAI/ATP Table 2 / Figure 7 (paper 000 §5.4): percent of messages of each priority \
         delivered before their callback timers expire, mean of {} trial(s) (seeds {:?}). The \
         paper gives Figure 7 only as bars, without numbers; its statements are checked below.",
        seeds.len(),
        seeds
    ));
    for n in notes {
        report.text(n.clone());
    }
    let mut violations = 0u64;
    let mut live = 0usize;
    let mut payloads: Option<(u64, u64)> = None;
    for r in results {
        let name = &r.trace.name;
        report.table(
            format!(
                "trace {name} (mean {:.0} KB/s over {:.0} s)",
                r.trace.mean_bytes_per_s / KB,
                p.duration_s
            ),
            &format!("table2-{name}"),
            fractions_table(p, r),
        );
        report.text(claims(p, r));
        let two: Vec<(String, usize)> = p
            .workloads
            .iter()
            .enumerate()
            .filter(|(_, w)| w.random.is_none())
            .map(|(i, w)| (w.name.clone(), i))
            .collect();
        let high: Vec<(String, usize, usize)> =
            two.iter().map(|(n, i)| (n.clone(), *i, 0)).collect();
        let low: Vec<(String, usize, usize)> = two
            .iter()
            .filter(|(n, _)| n != "uniform")
            .map(|(n, i)| (n.clone(), *i, usize::from(p.workloads[*i].levels) - 1))
            .collect();
        report.file(
            format!("fig7a-{name}.svg"),
            chart(&format!("Fig. 7a, high priority ({name})"), r, &high)?.into_bytes(),
        );
        report.file(
            format!("fig7b-{name}.svg"),
            chart(&format!("Fig. 7b, low priority ({name})"), r, &low)?.into_bytes(),
        );
        if let Some((wi, w)) = p
            .workloads
            .iter()
            .enumerate()
            .find(|(_, w)| w.random.is_some())
        {
            let levels: Vec<(String, usize, usize)> = (0..usize::from(w.levels))
                .map(|l| (level_name(Priority(l as u8), w.levels).to_string(), wi, l))
                .collect();
            report.file(
                format!("fig7c-{name}.svg"),
                chart(&format!("Fig. 7c, random workload ({name})"), r, &levels)?.into_bytes(),
            );
        }
        let rate = traces::rate_series(&r.trace.bandwidth, p.duration_s, 1.0);
        let svg = line_chart(
            &format!("trace {name}"),
            "time (s)",
            "KB/s",
            &[Series {
                label: name,
                points: rate,
            }],
        )?;
        report.file(format!("trace-{name}.svg"), svg.into_bytes());
        report.file(r.trace.file.0.clone(), r.trace.file.1.clone().into_bytes());
        for row in &r.cells {
            for cells in row {
                violations += cells.iter().map(|c| c.violations).sum::<u64>();
                live += cells.iter().map(|c| c.live_at_end).sum::<usize>();
                for c in cells.iter().filter_map(|c| c.payload) {
                    let (ok, all) = payloads.get_or_insert((0, 0));
                    *ok += u64::from(c.all_match()) * c.delivered;
                    *all += c.delivered + c.duplicates;
                }
            }
        }
    }
    if let (false, Some(first)) = (ablation.is_empty(), results.first()) {
        report.table(
            format!(
                "ablation on trace {}: admission protecting every level (literal §3.3) vs the \
                 newcomer's level only (default), % on time",
                first.trace.name
            ),
            "table2-ablation-admission",
            ablation_table(p, first, ablation),
        );
    }
    report.file(
        "table2-outcomes.csv",
        outcomes_csv(p, results).to_csv().into_bytes(),
    );
    report.text(format!(
        "Every message ended in exactly one outcome: {} ({violations} violations; {live} \
         messages still live when runs ended were finalised by the baselines' end-of-run rule).",
        if violations == 0 { "yes" } else { "NO" }
    ));
    if let Some((ok, all)) = payloads {
        report.text(format!(
            "Messages carried their bytes (testbed.message_bytes): every delivery had exactly \
             the bytes sent, once: {} ({ok} of {all} deliveries in runs without a fault, \
             checked by SHA-256).",
            if ok == all { "yes" } else { "NO" }
        ));
    }
    Ok(report)
}
