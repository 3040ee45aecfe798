//! NAI scheduler speed (`papers/000_97f7680fd99dd928.txt` §3): admissions and dispatches per
//! second with 10,000 messages queued across 100 queues, against a baseline of 100 messages in
//! one queue measured in the same run.
//!
//! One operation = one admission-checked `submit` (a 1500-byte message with a timer, three
//! priority levels, into the next queue in turn) + one dispatch (`next_chunk_at`, which also
//! runs the head-of-queue early-expiry check) whose chunk is then acknowledged, completing a
//! message, so the population stays constant.

use super::{BenchOptions, Benchmark, median_by};
use crate::report::table::Table;
use crate::{ExpError, Report};
use adaptnet_core::Time;
use adaptnet_core::nai::{NaiConfig, Priority, QueueId, Scheduler, SendOptions};
use std::time::{Duration, Instant};

/// `adaptnet bench nai`.
pub struct NaiSpeed;

/// Operations timed per run.
const OPS: u64 = 200_000;

fn opts(i: u64) -> SendOptions {
    SendOptions {
        priority: Priority((i % 3) as u8),
        timer: Some(Duration::from_millis(1_000 + (i * 7_919) % 100_000)),
        ..SendOptions::default()
    }
}

/// Fills a scheduler with `queued` messages over `queues` queues, then times `OPS`
/// operations; returns (seconds, admitted, dispatched).
fn measure(queues: usize, queued: u64) -> Result<(f64, u64, u64), ExpError> {
    let mut s = Scheduler::new(NaiConfig::default());
    let mut now = Time::ZERO;
    s.set_rate(now, 1e9);
    let mut ids = vec![QueueId(0)];
    for _ in 1..queues {
        ids.push(
            s.create_queue()
                .map_err(|e| ExpError::Input(format!("bench nai: {e}")))?,
        );
    }
    for i in 0..queued {
        s.submit(now, ids[(i as usize) % ids.len()], 1500, opts(i))
            .map_err(|e| ExpError::Input(format!("bench nai: setup refused: {e}")))?;
    }
    while s.poll_event().is_some() {}
    let (mut admitted, mut dispatched) = (0u64, 0u64);
    let start = Instant::now();
    for i in 0..OPS {
        now += Duration::from_micros(1);
        if s.submit(now, ids[(i as usize) % ids.len()], 1500, opts(queued + i))
            .is_ok()
        {
            admitted += 1;
        }
        if let Some(c) = s.next_chunk_at(now, 1500, true) {
            s.handle_acked(now, c.id, c.offset, u64::from(c.len));
            dispatched += 1;
        }
        while s.poll_event().is_some() {}
    }
    Ok((start.elapsed().as_secs_f64(), admitted, dispatched))
}

impl Benchmark for NaiSpeed {
    fn name(&self) -> &'static str {
        "nai"
    }

    fn summary(&self) -> &'static str {
        "NAI scheduler: admissions + dispatches per second, 10,000 messages queued across 100 \
         queues, vs 100 messages in 1 queue (target >= 200,000 admissions/s on one core)"
    }

    fn run(&self, opts: &BenchOptions) -> Result<Report, ExpError> {
        let configs: [(&str, usize, u64); 2] = [
            ("baseline: 1 queue, 100 queued", 1, 100),
            ("100 queues, 10,000 queued", 100, 10_000),
        ];
        let mut t = Table::new([
            "configuration",
            "operations",
            "wall s",
            "admissions/s",
            "dispatches/s",
            "time per op vs baseline",
        ]);
        let mut base_per_op = None;
        for (label, queues, queued) in configs {
            let mut runs = Vec::new();
            for _ in 0..opts.repeat.max(1) {
                runs.push(measure(queues, queued)?);
            }
            let Some((wall, admitted, dispatched)) = median_by(&runs, |r| r.0) else {
                return Err(ExpError::Input("no runs".into()));
            };
            let per_op = wall / OPS as f64;
            let base = *base_per_op.get_or_insert(per_op);
            t.row([
                label.to_string(),
                OPS.to_string(),
                format!("{wall:.3}"),
                format!("{:.0}", admitted as f64 / wall),
                format!("{:.0}", dispatched as f64 / wall),
                format!("{:.2}x", per_op / base),
            ]);
        }
        let mut report = Report::default();
        report.table(
            format!(
                "median of {} runs, one core; one operation = submit + dispatch + ack",
                opts.repeat.max(1)
            ),
            "bench-nai",
            t,
        );
        Ok(report)
    }
}
