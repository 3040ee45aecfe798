//! `adaptnet exp nai-endpoint`: Table 2's workloads (`papers/000_97f7680fd99dd928.txt` §5.4)
//! run twice on the same testbed, trace and seeds: by ATP wired directly (sender to receiver,
//! as `nai-table2` runs it) and by ATP through core's endpoint, as the runtime runs it over UDP
//! — handshake with a retry token before the application starts, keep-alive, the server's own
//! estimator on the return path, message bytes in every datagram, and a CLOSE at the end
//! (`adaptnet_sim::agents::atp_endpoint`). Both use the paper's estimator (`atp_config`).
//!
//! What it shows: the fraction of each priority delivered before its timer in both modes and
//! the difference, and for the endpoint: when the connection was up, that a retry token was
//! issued, how each side saw the end, and every delivery checked byte for byte.
//! `nai-table2` keeps the direct mode: the paper's ATP had no handshake (§4.1).

use super::net::{Implementation, Run, Session, Testbed, atp_config};
use super::params;
use super::table2::{CellResult, PARAMS, Table2Params, mean_fraction, run_cell, tally};
use super::traces;
use super::workloads::{self, level_name};
use crate::report::table::Table;
use crate::{ExpError, ExpOptions, Experiment, Report};
use adaptnet_core::Time;
use adaptnet_core::nai::Priority;
use adaptnet_core::session::LivenessConfig;
use adaptnet_sim::agents::nai_app::ScheduledApp;
use std::collections::BTreeSet;
use std::time::Duration;

/// `adaptnet exp nai-endpoint`.
pub struct EndpointExp;

/// How long the client's close waits for live messages (longer than Table 2's longest
/// timer, 16 s, so every message is final before the CLOSE).
const LINGER: Duration = Duration::from_secs(20);

/// The idle timeout of the main comparison: longer than any outage of Table 2's traces (the
/// synthetic trace has none for 30 s, exactly core's default idle timeout, which is run too).
const LONG_IDLE: Duration = Duration::from_secs(120);

/// What the endpoint run showed beyond the tallies.
#[derive(Clone, Debug, Default)]
struct Facts {
    /// When the server accepted, seconds (the application started then).
    connected_s: Option<f64>,
    /// RETRYs the server sent.
    retries: u64,
    /// How the server's side ended ("-" if it did not).
    server_end: String,
    /// How the client's side ended.
    client_end: String,
    /// Messages of the workload never submitted: their time came after the connection ended.
    unsent: u64,
}

/// One endpoint run.
struct EndpointResult {
    cell: CellResult,
    facts: Facts,
}

/// One trial in both modes: direct, and the endpoint with the long and the default idle
/// timeout.
struct Pair {
    direct: CellResult,
    long: EndpointResult,
    default: EndpointResult,
}

fn run_endpoint(
    testbed: &Testbed,
    w: &super::params::WorkloadParams,
    seed: u64,
    p: &Table2Params,
    idle_timeout: Duration,
) -> Result<EndpointResult, ExpError> {
    let specs = workloads::messages(w, seed)?;
    let mut per_level = vec![0u64; usize::from(w.levels.max(1))];
    for s in &specs {
        if let Some(n) = per_level.get_mut(usize::from(s.priority.0)) {
            *n += 1;
        }
    }
    let app = Box::new(ScheduledApp::new(specs));
    let config = atp_config(w.levels, 1);
    // Close once the table's longest drain is over, so outcomes settle as in `nai-table2`.
    let session = Session {
        close_at: Time::from_secs_f64(p.duration_s + p.max_drain_s),
        linger: LINGER,
        liveness: {
            // Riding out an outage takes both timeouts above it: the idle one and the
            // silent peer's (issue 18); the default run keeps core's defaults.
            let defaults = LivenessConfig::default();
            let silent_timeout = if idle_timeout > defaults.idle_timeout {
                idle_timeout
            } else {
                defaults.silent_timeout
            };
            LivenessConfig {
                idle_timeout,
                silent_timeout,
                ..defaults
            }
        },
    };
    let imp = Implementation::AtpEndpoint;
    let mut run = Run::with_session(testbed, imp, config, app, seed, &session)?;
    run.run_until(session.close_at + LINGER + Duration::from_secs(5));
    let ledger = run
        .ledger()
        .ok_or_else(|| ExpError::Input("the endpoint client has no ledger".into()))?;
    let mut result = tally(ledger, w.levels);
    result.live_at_end = ledger.pending();
    result.payload = run.payload_check();
    let mut facts = Facts::default();
    // Messages whose time came after the connection ended were never submitted: they count
    // as not delivered, as in the direct mode, where every message is submitted.
    for (t, &n) in result.tallies.iter_mut().zip(&per_level) {
        let unsent = n.saturating_sub(t.total);
        t.total += unsent;
        facts.unsent += unsent;
    }
    if let Some((client, server)) = run.endpoint() {
        let end = |e: Option<adaptnet_sim::agents::atp_endpoint::Ended>| {
            e.map_or("-".to_string(), |e| format!("{:?}", e.reason))
        };
        facts = Facts {
            connected_s: client.connected_at().map(Time::as_secs_f64),
            retries: server.endpoint_stats().retries_sent,
            server_end: end(server.connections().next().and_then(|c| c.ended)),
            client_end: end(client.ended()),
            unsent: facts.unsent,
        };
    }
    Ok(EndpointResult {
        cell: result,
        facts,
    })
}

fn pct(x: f64) -> String {
    format!("{:.1}", x * 100.0)
}

impl Experiment for EndpointExp {
    fn name(&self) -> &'static str {
        "nai-endpoint"
    }

    fn summary(&self) -> &'static str {
        "NAI/ATP Table 2 workloads, ATP wired directly vs through core's endpoint (handshake, \
         retry token, keep-alive, CLOSE, message bytes) as the runtime runs it"
    }

    fn run(&self, opts: &ExpOptions, progress: &mut dyn FnMut(f64)) -> Result<Report, ExpError> {
        let p: Table2Params = params::load(&opts.experiments_dir, PARAMS)?;
        let file = PARAMS;
        params::positive(p.duration_s, "duration_s", file)?;
        let (seeds, trace_params, root) = params::run_plan(opts, &p.seeds, &p.traces, file)?;
        let mut report = Report::default();
        report.text(format!(
            "Table 2's workloads ({file}), ATP with the paper's estimator, wired directly \
             (as nai-table2) and through core's endpoint; seeds {seeds:?}. The endpoint's \
             client closes at {} s with a {} s linger.",
            p.duration_s + p.max_drain_s,
            LINGER.as_secs()
        ));
        let mut built = Vec::new();
        for t in &trace_params {
            match traces::build(t, &root, p.duration_s)? {
                Ok(b) => built.push(b),
                Err(note) => report.text(note),
            }
        }
        let total = (built.len() * p.workloads.len() * seeds.len()).max(1) as f64;
        let mut done = 0.0;
        for trace in built {
            let testbed = Testbed::new(&p.testbed, trace.bandwidth.clone(), file)?;
            let mut rows = Vec::new();
            for w in &p.workloads {
                let mut pairs = Vec::new();
                for &seed in &seeds {
                    let drain = (p.drain_s, p.max_drain_s);
                    let imp = Implementation::Atp;
                    let direct = run_cell(&testbed, w, imp, seed, p.duration_s, drain)?;
                    let long = run_endpoint(&testbed, w, seed, &p, LONG_IDLE)?;
                    let idle = LivenessConfig::default().idle_timeout;
                    let default = run_endpoint(&testbed, w, seed, &p, idle)?;
                    pairs.push(Pair {
                        direct,
                        long,
                        default,
                    });
                    done += 1.0;
                    progress(done / total);
                }
                rows.push((w, pairs));
            }
            let name = &trace.name;
            report.table(
                format!("Trace {name}: % delivered before the timer, direct vs endpoint"),
                &format!("endpoint-fractions-{name}"),
                fractions(&rows),
            );
            let long = LONG_IDLE.as_secs();
            report.table(
                format!("Trace {name}: the endpoint's connection, idle timeout {long} s"),
                &format!("endpoint-connection-{name}"),
                connection(&rows, |p| &p.long),
            );
            let idle = LivenessConfig::default().idle_timeout.as_secs();
            report.table(
                format!("Trace {name}: the same with core's default idle timeout, {idle} s"),
                &format!("endpoint-connection-default-idle-{name}"),
                connection(&rows, |p| &p.default),
            );
        }
        Ok(report)
    }
}

type Rows<'a> = [(&'a super::params::WorkloadParams, Vec<Pair>)];

fn fractions(rows: &Rows<'_>) -> Table {
    let long = format!("ATP-endpoint % (idle {} s)", LONG_IDLE.as_secs());
    let idle = LivenessConfig::default().idle_timeout.as_secs();
    let mut t = Table::new([
        "workload".to_string(),
        "priority".to_string(),
        "ATP %".to_string(),
        long,
        "difference (points)".to_string(),
        format!("ATP-endpoint % (idle {idle} s)"),
    ]);
    for (w, pairs) in rows {
        let direct: Vec<CellResult> = pairs.iter().map(|p| p.direct.clone()).collect();
        let endpoint: Vec<CellResult> = pairs.iter().map(|p| p.long.cell.clone()).collect();
        let default: Vec<CellResult> = pairs.iter().map(|p| p.default.cell.clone()).collect();
        for level in 0..usize::from(w.levels) {
            if direct
                .first()
                .and_then(|c| c.tallies.get(level))
                .is_none_or(|t| t.total == 0)
            {
                continue;
            }
            let (d, e) = (
                mean_fraction(&direct, level),
                mean_fraction(&endpoint, level),
            );
            let level_u8 = u8::try_from(level).unwrap_or(u8::MAX);
            t.row([
                w.name.clone(),
                level_name(Priority(level_u8), w.levels).to_string(),
                pct(d),
                pct(e),
                format!("{:+.1}", (e - d) * 100.0),
                pct(mean_fraction(&default, level)),
            ]);
        }
    }
    t
}

fn connection(rows: &Rows<'_>, of: impl Fn(&Pair) -> &EndpointResult) -> Table {
    let mut t = Table::text([
        "workload",
        "connected at (ms, mean)",
        "retries",
        "server saw the end",
        "client's end",
        "bytes checked",
        "outcome violations",
        "no outcome",
        "never sent",
    ]);
    for (w, pairs) in rows {
        let runs: Vec<&EndpointResult> = pairs.iter().map(&of).collect();
        let connected: Vec<f64> = runs.iter().filter_map(|r| r.facts.connected_s).collect();
        let mean_ms = connected.iter().sum::<f64>() / connected.len().max(1) as f64 * 1e3;
        let retries: u64 = runs.iter().map(|r| r.facts.retries).sum();
        let joined = |f: &dyn Fn(&Facts) -> &str| {
            let set: BTreeSet<&str> = runs.iter().map(|r| f(&r.facts)).collect();
            set.into_iter().collect::<Vec<_>>().join("; ")
        };
        let (mut matched, mut delivered) = (0, 0);
        for r in &runs {
            if let Some(c) = r.cell.payload {
                matched += c.matched;
                delivered += c.delivered + c.duplicates;
            }
        }
        let violations: u64 = runs.iter().map(|r| r.cell.violations).sum();
        let pending: usize = runs.iter().map(|r| r.cell.live_at_end).sum();
        let unsent: u64 = runs.iter().map(|r| r.facts.unsent).sum();
        t.row([
            w.name.clone(),
            format!("{mean_ms:.1}"),
            retries.to_string(),
            joined(&|f| f.server_end.as_str()),
            joined(&|f| f.client_end.as_str()),
            format!("{matched} of {delivered}"),
            violations.to_string(),
            pending.to_string(),
            unsent.to_string(),
        ]);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use adaptnet_sim::link::Bandwidth;

    fn params() -> Table2Params {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
        params::load(&dir, PARAMS).expect("table2.params loads")
    }

    /// The uniform workload on a constant 100 KB/s link: through the endpoint, every message
    /// has one outcome, every delivery its bytes, the CLOSE reaches the server, and the result
    /// is the direct mode's within a few points (the handshake delays the start by ~10 ms).
    #[test]
    fn test_endpoint_mode_matches_direct_and_closes() {
        let mut p = params();
        p.duration_s = 60.0;
        p.max_drain_s = 20.0;
        let bw = Bandwidth::Constant {
            rate_bytes_per_s: 100.0 * 1024.0,
        };
        let testbed = Testbed::new(&p.testbed, bw, PARAMS).expect("testbed");
        let mut w = p.workloads[0].clone();
        // Every message within the 60 s, so none comes after the close.
        for c in &mut w.classes {
            c.n = c.n.min((p.duration_s / c.delay_s) as u32 - 1);
        }
        let direct = run_cell(
            &testbed,
            &w,
            Implementation::Atp,
            1,
            p.duration_s,
            (5.0, 20.0),
        )
        .expect("direct");
        let ep = run_endpoint(&testbed, &w, 1, &p, LONG_IDLE).expect("endpoint");
        assert_eq!(ep.cell.violations, 0);
        assert_eq!(ep.facts.unsent, 0);
        assert_eq!(ep.facts.retries, 1);
        assert_eq!(ep.facts.server_end, "Application");
        let check = ep.cell.payload.expect("bytes carried");
        assert!(check.all_match() && check.delivered > 0, "{check:?}");
        for level in 0..usize::from(w.levels) {
            let (d, e) = (
                mean_fraction(std::slice::from_ref(&direct), level),
                mean_fraction(std::slice::from_ref(&ep.cell), level),
            );
            assert!(
                (d - e).abs() < 0.05,
                "level {level}: direct {d}, endpoint {e}"
            );
        }
    }
}
