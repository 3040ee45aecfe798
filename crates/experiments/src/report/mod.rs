//! Report formats shared by every command: terminal tables, CSV, JSON, SVG plots. Renderers
//! return bytes; the CLI decides where to write them.

pub mod csv;
pub mod plot;
pub mod spread;
pub mod table;

use adaptnet_sim::metrics::RunResults;
use table::Table;
use thiserror::Error;

/// Why a report could not be produced.
#[derive(Debug, Error)]
pub enum ReportError {
    /// Plot rendering failed.
    #[error("plot: {0}")]
    Plot(String),
    /// JSON encoding failed.
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
}

/// A named output file.
pub type OutputFile = (String, Vec<u8>);

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

/// results.json, summary.csv, goodput.csv, rtt.csv, queue.csv and goodput.svg for a run.
pub fn run_files(r: &RunResults) -> Result<Vec<OutputFile>, ReportError> {
    let mut files = vec![("results.json".to_string(), serde_json::to_vec_pretty(r)?)];
    let mut summary = vec![
        [
            "flow",
            "type",
            "from",
            "to",
            "goodput_bps",
            "bytes_delivered",
            "packets_sent",
            "packets_lost",
            "rtt_mean_ms",
            "rtt_p95_ms",
        ]
        .map(String::from)
        .to_vec(),
    ];
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
    files.push(("summary.csv".into(), csv::render(&summary).into_bytes()));

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
    files.push(("goodput.csv".into(), csv::render(&series).into_bytes()));

    let mut rtt = vec![["flow", "time_s", "rtt_ms"].map(String::from).to_vec()];
    for f in &r.flows {
        for &(t, ms) in &f.rtt_samples {
            rtt.push(vec![f.name.clone(), format!("{t:.6}"), format!("{ms:.3}")]);
        }
    }
    files.push(("rtt.csv".into(), csv::render(&rtt).into_bytes()));

    let mut queue = vec![
        std::iter::once("time_s".to_string())
            .chain(r.links.iter().map(|l| format!("{}_packets", l.name)))
            .collect::<Vec<_>>(),
    ];
    for (i, t) in r.sample_times_s.iter().enumerate() {
        let mut row = vec![format!("{t:.3}")];
        row.extend(r.links.iter().map(|l| {
            l.queue_series_packets
                .get(i)
                .map_or(String::new(), |v| v.to_string())
        }));
        queue.push(row);
    }
    files.push(("queue.csv".into(), csv::render(&queue).into_bytes()));

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
    let svg = plot::line_chart(
        &format!("{}: goodput per flow", r.scenario),
        "time (s)",
        "goodput (kbit/s)",
        &lines,
    )?;
    files.push(("goodput.svg".into(), svg.into_bytes()));
    Ok(files)
}

/// Pretty JSON of a serialisable value.
pub fn json<T: serde::Serialize>(v: &T) -> Result<Vec<u8>, crate::ExpError> {
    Ok(serde_json::to_vec_pretty(v).map_err(ReportError::from)?)
}

/// Mean of a slice (0 if empty).
pub fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}
