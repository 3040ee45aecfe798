//! The CM's scheduler at scale: grants per second and the cost of one grant with 1, 100 and
//! 10,000 backlogged flows in one macroflow, as ratios against the 1-flow baseline of the same
//! run. Target (issue 4): the per-grant cost grows at most logarithmically with the number of
//! flows (the SCFQ heap of `cm/scheduler.rs`).
//!
//! Each run drives a [`CongestionManager`] as an engine would: every flow has requested more
//! than it will ever be granted; the driver advances virtual time to `poll_timeout`, runs
//! `handle_timeout`, and answers the `Grant` events with `notify` (the application sends the
//! granted bytes at once, one notify per flow for the grants it holds), which may issue further
//! grants. A grant's cost thus includes the scheduler pick, the token bucket, the event queue
//! and the `notify` bookkeeping.

use super::{BenchOptions, Benchmark, median_by};
use crate::report::table::Table;
use crate::{ExpError, Report};
use adaptnet_core::Time;
use adaptnet_core::cm::{
    CmConfig, CmEvent, CongestionManager, Feedback, FlowKey, FlowOptions, PeerAddr,
};
use std::time::{Duration, Instant};

/// Flow counts measured; the first is the baseline.
const FLOWS: [usize; 3] = [1, 100, 10_000];
/// Grants timed per run (after a warm-up of a tenth as many).
const GRANTS: u64 = 400_000;
const MTU: u64 = 1000;

/// `adaptnet bench cm`.
pub struct CmGrants;

/// Opens `n` backlogged flows to one destination on a fast macroflow.
fn setup(n: usize) -> Result<CongestionManager, ExpError> {
    let err = |e: adaptnet_core::cm::CmError| ExpError::Input(format!("cm setup: {e}"));
    let mut cm = CongestionManager::new(CmConfig {
        mtu_bytes: MTU,
        burst_bytes: 64 * MTU,
        ..CmConfig::default()
    });
    let dest = PeerAddr(1);
    let now = Time::ZERO;
    let mut flows = Vec::with_capacity(n);
    for i in 0..n {
        let f = cm
            .open(now, dest, FlowKey(i as u64), FlowOptions::implicit())
            .map_err(err)?;
        flows.push(f);
    }
    // A 10 ms RTT and a large window: about 1 GB/s, so virtual time is never the limit.
    cm.update(
        now,
        flows[0],
        Feedback::received(0, Some(Duration::from_millis(10))),
    )
    .map_err(err)?;
    cm.update(now, flows[0], Feedback::received(10_000_000, None))
        .map_err(err)?;
    for f in &flows {
        cm.request(now, *f, 1 << 40).map_err(err)?;
    }
    Ok(cm)
}

/// Runs until `grants` more grants were issued; returns the virtual time reached.
fn drive(cm: &mut CongestionManager, mut now: Time, grants: u64) -> Time {
    let mut granted = 0;
    let mut batch = Vec::new();
    while granted < grants {
        match cm.poll_timeout() {
            Some(t) => now = now.max(t),
            None => now += Duration::from_millis(1),
        }
        cm.handle_timeout(now);
        loop {
            batch.extend(
                std::iter::from_fn(|| cm.poll_event()).filter_map(|ev| match ev {
                    CmEvent::Grant { flow, bytes } => Some((flow, bytes)),
                    CmEvent::RateChange { .. } | CmEvent::RequestExpired { .. } => None,
                }),
            );
            if batch.is_empty() {
                break;
            }
            granted += batch.len() as u64;
            // A flow may hold several grants; one notify covers what it sends for all of them
            // (notify ends the flow's grants, RFC 3124 §4.3).
            batch.sort_unstable_by_key(|g| g.0);
            let mut i = 0;
            while i < batch.len() {
                let flow = batch[i].0;
                let mut bytes = 0;
                while i < batch.len() && batch[i].0 == flow {
                    bytes += batch[i].1;
                    i += 1;
                }
                let _ = cm.notify(now, flow, bytes);
            }
            batch.clear();
        }
    }
    now
}

/// One measurement: (wall seconds, grants).
fn measure(n: usize) -> Result<(f64, u64), ExpError> {
    let mut cm = setup(n)?;
    let now = drive(&mut cm, Time::ZERO, GRANTS / 10);
    let before = cm.stats().granted_bytes;
    let start = Instant::now();
    drive(&mut cm, now, GRANTS);
    let wall = start.elapsed().as_secs_f64();
    let grants = (cm.stats().granted_bytes - before) / MTU;
    Ok((wall, grants))
}

impl Benchmark for CmGrants {
    fn name(&self) -> &'static str {
        "cm"
    }

    fn summary(&self) -> &'static str {
        "CM grants/s and per-grant cost with 1, 100, 10,000 flows in one macroflow (target: cost grows at most logarithmically)"
    }

    fn run(&self, opts: &BenchOptions) -> Result<Report, ExpError> {
        let mut rows = Vec::new();
        for n in FLOWS {
            let mut runs = Vec::new();
            for _ in 0..opts.repeat.max(1) {
                runs.push(measure(n)?);
            }
            let Some((wall, grants)) = median_by(&runs, |r| r.0 / r.1.max(1) as f64) else {
                return Err(ExpError::Input("no runs".into()));
            };
            rows.push((n, wall, grants));
        }
        let base_ns = rows
            .first()
            .map_or(1.0, |(_, w, g)| w * 1e9 / (*g).max(1) as f64);
        let mut t = Table::new([
            "flows",
            "grants",
            "wall s",
            "grants/s",
            "ns/grant",
            "cost vs 1 flow",
            "log2(flows)",
        ]);
        for (n, wall, grants) in &rows {
            let ns = wall * 1e9 / (*grants).max(1) as f64;
            t.row([
                n.to_string(),
                grants.to_string(),
                format!("{wall:.3}"),
                format!("{:.2e}", *grants as f64 / wall.max(1e-12)),
                format!("{ns:.0}"),
                format!("{:.2}x", ns / base_ns.max(1e-12)),
                format!("{:.1}", (*n as f64).log2()),
            ]);
        }
        let mut report = Report::default();
        report.table(
            format!(
                "median of {} runs, one macroflow, every flow backlogged, one core",
                opts.repeat.max(1)
            ),
            "bench-cm",
            t,
        );
        report.text(
            "A grant includes the SCFQ pick, the token bucket, the event queue and the \
             application's notify. Logarithmic growth: the 10,000-flow cost stays within a small \
             multiple of the 1-flow cost (log2 10,000 = 13.3).",
        );
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_driver_issues_grants_to_every_flow() {
        let mut cm = setup(100).expect("setup");
        drive(&mut cm, Time::ZERO, 1000);
        let s = cm.stats();
        assert!(s.granted_bytes >= 1000 * MTU, "{s:?}");
        assert_eq!(s.ungranted_bytes, 0);
    }
}
