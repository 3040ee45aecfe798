//! Turning results into tables, CSV, JSON and SVG.

pub mod csv;
pub mod plot;
pub mod table;

use adaptnet_sim::metrics::RunResults;
use anyhow::{Context, Result};
use std::path::Path;
use table::Table;

/// The per-flow summary table of a run.
pub fn flow_table(r: &RunResults) -> Table {
    let mut t = Table::new([
        "flow",
        "type",
        "path",
        "goodput kbit/s",
        "delivered kB",
        "sent",
        "lost",
        "rtx",
        "RTOs",
        "RTT mean ms",
        "RTT p95 ms",
    ]);
    for f in &r.flows {
        let counter = |k: &str| {
            f.counters
                .get(k)
                .map_or("-".to_string(), |v| format!("{v:.0}"))
        };
        let rtt = |v: f64| {
            if f.rtt.count == 0 {
                "-".to_string()
            } else {
                format!("{v:.1}")
            }
        };
        t.row([
            f.name.clone(),
            f.kind.clone(),
            format!("{}->{}", f.from, f.to),
            format!("{:.1}", f.goodput_bps / 1e3),
            format!("{:.1}", f.bytes_delivered as f64 / 1e3),
            f.packets_sent.to_string(),
            f.packets_lost.to_string(),
            counter("retransmits"),
            counter("timeouts"),
            rtt(f.rtt.mean_ms),
            rtt(f.rtt.p95_ms),
        ]);
    }
    t
}

/// The link summary table (links that carried traffic).
pub fn link_table(r: &RunResults) -> Table {
    let mut t = Table::new([
        "link",
        "utilisation %",
        "delivered pkts",
        "queue drops",
        "random drops",
        "outage drops",
        "max queue pkts",
    ]);
    for l in r.links.iter().filter(|l| l.stats.offered_packets > 0) {
        t.row([
            l.name.clone(),
            format!("{:.1}", l.utilization * 100.0),
            l.stats.delivered_packets.to_string(),
            l.stats.dropped_queue.to_string(),
            l.stats.dropped_random.to_string(),
            l.stats.dropped_outage.to_string(),
            l.stats.max_queue_packets.to_string(),
        ]);
    }
    t
}

/// Writes results.json, summary.csv, goodput.csv and goodput.svg into `dir`.
pub fn write_run(dir: &Path, r: &RunResults) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let json = serde_json::to_string_pretty(r)?;
    write(&dir.join("results.json"), json.as_bytes())?;

    let mut summary = vec![vec![
        "flow".to_string(),
        "type".into(),
        "from".into(),
        "to".into(),
        "goodput_bps".into(),
        "bytes_delivered".into(),
        "packets_sent".into(),
        "packets_lost".into(),
        "rtt_mean_ms".into(),
        "rtt_p95_ms".into(),
    ]];
    for f in &r.flows {
        summary.push(vec![
            f.name.clone(),
            f.kind.clone(),
            f.from.clone(),
            f.to.clone(),
            format!("{:.1}", f.goodput_bps),
            f.bytes_delivered.to_string(),
            f.packets_sent.to_string(),
            f.packets_lost.to_string(),
            format!("{:.3}", f.rtt.mean_ms),
            format!("{:.3}", f.rtt.p95_ms),
        ]);
    }
    write(&dir.join("summary.csv"), csv::render(&summary).as_bytes())?;

    let mut series = vec![
        std::iter::once("time_s".to_string())
            .chain(r.flows.iter().map(|f| format!("{}_bps", f.name)))
            .collect::<Vec<_>>(),
    ];
    for (i, t) in r.sample_times_s.iter().enumerate() {
        let mut row = vec![format!("{t:.3}")];
        row.extend(r.flows.iter().map(|f| {
            f.goodput_series_bps
                .get(i)
                .map_or(String::new(), |v| format!("{v:.1}"))
        }));
        series.push(row);
    }
    write(&dir.join("goodput.csv"), csv::render(&series).as_bytes())?;

    let lines: Vec<plot::Series> = r
        .flows
        .iter()
        .map(|f| plot::Series {
            label: &f.name,
            points: r
                .sample_times_s
                .iter()
                .zip(&f.goodput_series_bps)
                .map(|(t, b)| (*t, b / 1e3))
                .collect(),
        })
        .collect();
    plot::line_chart(
        &dir.join("goodput.svg"),
        &format!("{}: goodput per flow", r.scenario),
        "time (s)",
        "goodput (kbit/s)",
        &lines,
    )?;
    Ok(())
}

/// Writes a file, naming it in any error.
pub fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}
