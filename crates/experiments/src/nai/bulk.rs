//! `adaptnet exp nai-bulk`: bulk data transfer (`papers/000_97f7680fd99dd928.txt` §5.3).
//!
//! "Message sizes starting at 1 KB, and increasing by powers of two up to 1 MB. Inter-arrival
//! spacing was negligible … each test transferred a total of 64 MB … bandwidth was set to
//! 512 KB/s … using only synchronous or only asynchronous sends. For comparison, the same
//! experiments were run using kernel TCP with a single connection." Result: both peak at
//! 512 KB/s; TCP reaches the peak within a second, ATP in about ten seconds.
//!
//! Our runs: ATP over SPP with asynchronous sends (the application keeps at least
//! `async_backlog_bytes` queued) and with synchronous sends (the next message is submitted
//! when the previous one's outcome arrives), ATP over TCP (asynchronous), and one NewReno
//! connection writing the 64 MB. Messages have no timer: with the estimate at zero before the
//! first packet pair, any finite timer would be refused at time 0, and "long enough never to
//! reject" is what no timer means. Throughput is measured at the receiver (message payload
//! bytes per second, 1-s windows every 100 ms); start-up time is when a window first reaches
//! `startup_fraction` of the link rate.
//!
//! No random element, on purpose: the paper's testbed for this test was deterministic — one
//! transfer through an otherwise idle Dummynet pipe of fixed rate, no cross traffic, no loss,
//! no trace — so every seed gives the same run and the output is one measurement, not a mean
//! over trials (`--seeds` changes nothing here).

use super::net::{Implementation, Run, Testbed, atp_config};
use super::params::{self, KB, TestbedParams};
use crate::report::plot::{Series, line_chart};
use crate::report::table::Table;
use crate::{ExpError, ExpOptions, Experiment, Report};
use adaptnet_core::Time;
use adaptnet_core::nai::{MessageId, NaiError, NaiEvent, Priority, SendOptions};
use adaptnet_sim::agents::nai_app::{NaiApp, NaiPort};
use adaptnet_sim::agents::tcp::{TcpReceiver, TcpSender};
use adaptnet_sim::link::{Bandwidth, LinkConfig, LossModel, QueueLimit};
use adaptnet_sim::packet::{Addr, Proto};
use adaptnet_sim::world::{FlowSpec, World};
use serde::Deserialize;
use std::time::Duration;

/// The parameter file.
pub const PARAMS: &str = "nai/bulk.params";

/// `experiments/nai/bulk.params`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BulkParams {
    /// Link rate.
    pub rate_kbytes_per_s: f64,
    /// Bytes per test.
    pub total_bytes: u64,
    /// Bytes per test with `--quick`.
    pub quick_total_bytes: u64,
    /// Message sizes.
    pub sizes_bytes: Vec<u64>,
    /// Sizes with `--quick`.
    pub quick_sizes_bytes: Vec<u64>,
    /// Asynchronous sends keep at least this much queued.
    pub async_backlog_bytes: u64,
    /// Start-up: first 1-s window at or above this fraction of the link rate.
    pub startup_fraction: f64,
    /// Give up after the ideal transfer time times this factor plus 30 s.
    pub time_limit_factor: f64,
    /// The testbed (delay, queue; the rate is constant here).
    pub testbed: TestbedParams,
}

/// How the bulk application submits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendMode {
    /// Keep a backlog queued.
    Async,
    /// Blocking sends (§3.1): the next message is submitted when the transport has taken the
    /// previous one whole ([`NaiEvent::Taken`]), not when it is acknowledged.
    Sync,
}

/// A closed-loop bulk sender: `total` bytes in messages of `size`.
#[derive(Debug)]
pub struct BulkApp {
    size: u64,
    total: u64,
    mode: SendMode,
    window: usize,
    submitted: u64,
    /// Messages without an outcome yet.
    outstanding: usize,
    /// A synchronous send in progress: the message the call is blocked on until it is taken.
    blocked_on: Option<MessageId>,
    finished: u64,
    /// When the last outcome arrived, once all bytes are done.
    pub done_at: Option<Time>,
}

impl BulkApp {
    /// An app sending `total` bytes as messages of `size`: asynchronously keeping `window`
    /// messages without an outcome, or synchronously (one blocking send at a time).
    pub fn new(size: u64, total: u64, mode: SendMode, window: usize) -> BulkApp {
        BulkApp {
            size: size.max(1),
            total,
            mode,
            window: window.max(1),
            submitted: 0,
            outstanding: 0,
            blocked_on: None,
            finished: 0,
            done_at: None,
        }
    }

    fn fill(&mut self, now: Time, port: &mut dyn NaiPort) {
        while self.submitted < self.total {
            let busy = match self.mode {
                SendMode::Sync => self.blocked_on.is_some(),
                SendMode::Async => self.outstanding >= self.window,
            };
            if busy {
                break;
            }
            let size = self.size.min(self.total - self.submitted);
            let opts = SendOptions {
                priority: Priority::HIGH,
                timer: None,
                ..SendOptions::default()
            };
            match port.submit(now, size, opts) {
                Ok(id) => {
                    self.submitted += size;
                    self.outstanding += 1;
                    if self.mode == SendMode::Sync {
                        self.blocked_on = Some(id);
                    }
                }
                // A rejection still brings an outcome event.
                Err(NaiError::Rejected { .. }) => {
                    self.submitted += size;
                    self.outstanding += 1;
                }
                Err(_) => break,
            }
        }
    }
}

impl NaiApp for BulkApp {
    fn start(&mut self, now: Time, port: &mut dyn NaiPort) {
        self.fill(now, port);
    }

    fn poll_timeout(&self) -> Option<Time> {
        None
    }

    fn handle_timeout(&mut self, _now: Time, _port: &mut dyn NaiPort) {}

    fn on_event(&mut self, now: Time, event: &NaiEvent, port: &mut dyn NaiPort) {
        match *event {
            NaiEvent::Taken { id } if self.blocked_on == Some(id) => {
                self.blocked_on = None;
                self.fill(now, port);
            }
            NaiEvent::Outcome { id, .. } => {
                if self.blocked_on == Some(id) {
                    self.blocked_on = None;
                }
                self.outstanding = self.outstanding.saturating_sub(1);
                self.finished += 1;
                if self.submitted >= self.total && self.outstanding == 0 {
                    self.done_at.get_or_insert(now);
                }
                self.fill(now, port);
            }
            _ => {}
        }
    }
}

/// One bulk test's measurements.
#[derive(Clone, Debug, PartialEq)]
pub struct BulkResult {
    /// Peak 1-s throughput at the receiver, bytes per second.
    pub peak_bytes_per_s: f64,
    /// Mean throughput from start-up (or 0) to the end of the transfer, bytes per second.
    pub steady_bytes_per_s: f64,
    /// Start-up time by receiver throughput (`None`: never reached).
    pub startup_s: Option<f64>,
    /// Start-up time by link use: the first 1-s window in which the link transmitted at least
    /// the start-up fraction of its capacity (wire bytes).
    pub link_startup_s: Option<f64>,
    /// When the transfer finished (`None`: not within the time limit).
    pub done_s: Option<f64>,
    /// 1-s throughput every 100 ms, KB/s, for the plot.
    pub series: Vec<(f64, f64)>,
}

const SAMPLE: Duration = Duration::from_millis(100);

/// The first 1-s window (ending at a multiple of 100 ms) whose bytes reach `threshold`, from
/// per-100-ms byte counts.
fn first_window(bytes: &[f64], threshold: f64) -> Option<f64> {
    let per_window = (1.0 / SAMPLE.as_secs_f64()).round() as usize;
    (per_window..=bytes.len())
        .find(|&end| bytes[end - per_window..end].iter().sum::<f64>() >= threshold)
        .map(|end| end as f64 * SAMPLE.as_secs_f64())
}

/// Measurements from the receiver's 100-ms goodput samples and the link's per-100-ms wire
/// bytes.
fn measure(
    samples_bps: &[f64],
    link_bytes: &[f64],
    rate: f64,
    fraction: f64,
    done_s: Option<f64>,
) -> BulkResult {
    let per_window = (1.0 / SAMPLE.as_secs_f64()).round() as usize;
    let bytes: Vec<f64> = samples_bps
        .iter()
        .map(|b| b / 8.0 * SAMPLE.as_secs_f64())
        .collect();
    let mut series = Vec::new();
    let mut startup = None;
    let mut peak: f64 = 0.0;
    for end in per_window..=bytes.len() {
        let w: f64 = bytes[end - per_window..end].iter().sum();
        let t = end as f64 * SAMPLE.as_secs_f64();
        if done_s.is_none_or(|d| t <= d + 1e-9) {
            peak = peak.max(w);
            if startup.is_none() && w >= fraction * rate {
                startup = Some(t);
            }
        }
        series.push((t, w / KB));
    }
    let steady = match (startup.or(Some(0.0)), done_s) {
        (Some(s), Some(d)) if d > s => {
            let from = (s / SAMPLE.as_secs_f64()).round() as usize;
            let to = ((d / SAMPLE.as_secs_f64()).floor() as usize).min(bytes.len());
            let sum: f64 = bytes.get(from..to).map_or(0.0, |b| b.iter().sum());
            sum / ((to.saturating_sub(from)) as f64 * SAMPLE.as_secs_f64()).max(1e-9)
        }
        _ => 0.0,
    };
    BulkResult {
        peak_bytes_per_s: peak,
        steady_bytes_per_s: steady,
        startup_s: startup,
        link_startup_s: first_window(link_bytes, fraction * rate),
        done_s,
        series,
    }
}

/// The shaped direction of the testbed's link.
fn wlan(w: &World) -> Result<adaptnet_sim::world::LinkId, ExpError> {
    w.link_by_name("wlan:sender->receiver").ok_or_else(|| {
        ExpError::Input("bulk: the testbed has no link wlan:sender->receiver".into())
    })
}

/// Steps a transfer of `total` bytes `SAMPLE` at a time until it has finished or its time
/// limit has passed (`time_limit_factor` times its duration at `rate`, plus 30 s). `step(t)`
/// runs the world to `t` and returns the bytes the shaped link has transmitted so far and
/// when the transfer finished, if it has. Returns the link's bytes in each step and the
/// finish time.
fn step_transfer(
    p: &BulkParams,
    total: u64,
    rate: f64,
    mut step: impl FnMut(Time) -> (u64, Option<Time>),
) -> (Vec<f64>, Option<Time>) {
    let limit = total as f64 / rate * p.time_limit_factor + 30.0;
    let mut link_bytes = Vec::new();
    let mut last = 0u64;
    let mut n = 0u64;
    let done = loop {
        n += 1;
        let (tx, done) = step(Time::ZERO + SAMPLE * n as u32);
        link_bytes.push((tx - last) as f64);
        last = tx;
        if done.is_some() || n as f64 * SAMPLE.as_secs_f64() >= limit {
            break done;
        }
    };
    (link_bytes, done)
}

/// Measures a transfer from the receiver's goodput samples of the world's one flow (results
/// named `scenario`) and the link's bytes per step.
fn measure_flow(
    world: &mut World,
    scenario: &str,
    p: &BulkParams,
    rate: f64,
    (link_bytes, done): (Vec<f64>, Option<Time>),
) -> BulkResult {
    let results = world.results(scenario);
    let samples = results
        .flows
        .first()
        .map(|f| f.goodput_series_bps.clone())
        .unwrap_or_default();
    measure(
        &samples,
        &link_bytes,
        rate,
        p.startup_fraction,
        done.map(Time::as_secs_f64),
    )
}

/// Runs one NAI implementation's bulk test.
pub fn run_nai(
    p: &BulkParams,
    implementation: Implementation,
    mode: SendMode,
    size: u64,
    total: u64,
) -> Result<BulkResult, ExpError> {
    let rate = p.rate_kbytes_per_s * KB;
    let testbed = Testbed::new(
        &p.testbed,
        Bandwidth::Constant {
            rate_bytes_per_s: rate,
        },
        PARAMS,
    )?;
    let window = p.async_backlog_bytes.div_ceil(size.max(1)).max(2) as usize;
    let app = Box::new(BulkApp::new(size, total, mode, window));
    let mut run = Run::new(&testbed, implementation, atp_config(1, 1), app, 1)?;
    run.world.set_sample_period(SAMPLE);
    let link = wlan(&run.world)?;
    let steps = step_transfer(p, total, rate, |t| {
        run.run_until(t);
        let tx = run.world.link(link).stats().transmitted_bytes;
        (tx, run.app::<BulkApp>().and_then(|a| a.done_at))
    });
    Ok(measure_flow(&mut run.world, "bulk", p, rate, steps))
}

/// Runs the TCP comparison: one NewReno connection writing `total` bytes.
pub fn run_tcp(p: &BulkParams, total: u64) -> Result<BulkResult, ExpError> {
    let rate = p.rate_kbytes_per_s * KB;
    let delay = Duration::from_secs_f64(
        params::positive(p.testbed.delay_ms, "testbed.delay_ms", PARAMS)? / 1e3,
    );
    let mut w = World::new(1);
    let err = |e: adaptnet_sim::world::WorldError| ExpError::Input(format!("bulk testbed: {e}"));
    let s = w.add_node("sender").map_err(err)?;
    let r = w.add_node("receiver").map_err(err)?;
    let fwd = LinkConfig {
        bandwidth: Bandwidth::Constant {
            rate_bytes_per_s: rate,
        },
        delay,
        queue: QueueLimit::Packets(p.testbed.queue_packets.max(1)),
        loss: LossModel::None,
        outages: Vec::new(),
        reorders: Vec::new(),
    };
    let rev = LinkConfig {
        bandwidth: Bandwidth::Constant {
            rate_bytes_per_s: p.testbed.reverse_kbytes_per_s * KB,
        },
        ..fwd.clone()
    };
    w.add_link("wlan", s, r, fwd, rev).map_err(err)?;
    let local = Addr {
        node: s,
        port: 5000,
    };
    let remote = Addr {
        node: r,
        port: 5000,
    };
    let tcp = adaptnet_core::tcp::TcpConfig::default();
    let sender = TcpSender::newreno(local, remote, tcp.clone(), Some(total), 1);
    let receiver = TcpReceiver::new(remote, local, tcp, 2);
    let sa = w
        .add_agent(s, Proto::Tcp, 5000, Box::new(sender))
        .map_err(err)?;
    let ra = w
        .add_agent(r, Proto::Tcp, 5000, Box::new(receiver))
        .map_err(err)?;
    w.add_flow(FlowSpec {
        name: "tcp".into(),
        kind: "tcp".into(),
        sender: sa,
        receiver: ra,
        start: Time::ZERO,
        stop: Time::MAX,
    });
    w.set_sample_period(SAMPLE);
    let link = wlan(&w)?;
    let steps = step_transfer(p, total, rate, |t| {
        w.run_until(t, &mut |_| {});
        let tx = w.link(link).stats().transmitted_bytes;
        (
            tx,
            w.agent::<TcpSender>(sa).and_then(TcpSender::completed_at),
        )
    });
    Ok(measure_flow(&mut w, "bulk-tcp", p, rate, steps))
}

/// `adaptnet exp nai-bulk`.
pub struct Bulk;

fn fmt_opt(x: Option<f64>) -> String {
    x.map_or("never".into(), |v| format!("{v:.1}"))
}

impl Experiment for Bulk {
    fn name(&self) -> &'static str {
        "nai-bulk"
    }

    fn summary(&self) -> &'static str {
        "NAI/ATP §5.3 bulk transfer: 1 KB-1 MB messages, 64 MB each at 512 KB/s, ATP (async, \
         sync), ATP/TCP and TCP: peak throughput and start-up time"
    }

    fn run(&self, opts: &ExpOptions, progress: &mut dyn FnMut(f64)) -> Result<Report, ExpError> {
        let p: BulkParams = params::load(&opts.experiments_dir, PARAMS)?;
        let rate = params::positive(p.rate_kbytes_per_s, "rate_kbytes_per_s", PARAMS)? * KB;
        params::positive(p.time_limit_factor, "time_limit_factor", PARAMS)?;
        for (field, v) in [
            ("total_bytes", p.total_bytes),
            ("quick_total_bytes", p.quick_total_bytes),
        ] {
            if v == 0 || v > 1 << 32 {
                return Err(ExpError::Input(format!(
                    "{PARAMS}: field {field}: must be 1 byte to 4 GiB, got {v}"
                )));
            }
        }
        let (sizes, total) = if opts.quick {
            (p.quick_sizes_bytes.clone(), p.quick_total_bytes)
        } else {
            (p.sizes_bytes.clone(), p.total_bytes)
        };
        let variants: [(&str, Implementation, SendMode); 3] = [
            ("ATP async", Implementation::Atp, SendMode::Async),
            ("ATP sync", Implementation::Atp, SendMode::Sync),
            ("ATP/TCP async", Implementation::AtpTcp, SendMode::Async),
        ];
        let runs = (sizes.len() * variants.len() + 1) as f64;
        let mut done = 0.0;
        let mut t = Table::new([
            "sender",
            "message size",
            "peak KB/s",
            "mean KB/s",
            "start-up s (receiver)",
            "start-up s (link)",
            "finished at s",
        ]);
        let mut lines: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
        let tcp = run_tcp(&p, total)?;
        done += 1.0;
        progress(done / runs);
        let row = |t: &mut Table, who: &str, size: &str, r: &BulkResult| {
            t.row([
                who.to_string(),
                size.to_string(),
                format!("{:.1}", r.peak_bytes_per_s / KB),
                format!("{:.1}", r.steady_bytes_per_s / KB),
                fmt_opt(r.startup_s),
                fmt_opt(r.link_startup_s),
                fmt_opt(r.done_s),
            ]);
        };
        row(&mut t, "TCP (NewReno)", "stream", &tcp);
        lines.push(("TCP".into(), tcp.series.clone()));
        for (label, imp, mode) in variants {
            for &size in &sizes {
                let r = run_nai(&p, imp, mode, size, total)?;
                row(&mut t, label, &size_label(size), &r);
                if size == 64 * 1024 {
                    lines.push((format!("{label} 64 KB"), r.series.clone()));
                }
                done += 1.0;
                progress(done / runs);
            }
        }
        let mut report = Report::default();
        report.text(format!(
            "NAI/ATP bulk transfer (paper 000 §5.3): {:.0} KB/s link, {} MB per test, start-up = \
             first 1-s window >= {:.0} % of the link rate. Paper: ATP and TCP both peak at 512 \
             KB/s; TCP reaches the peak within 1 s, ATP in about 10 s; sync vs async made no \
             difference. Deterministic, as the paper's testbed (one transfer through an idle \
             fixed-rate pipe, no cross traffic, no loss): one run per cell, identical for every \
             seed.",
            rate / KB,
            total / (1 << 20),
            p.startup_fraction * 100.0
        ));
        report.table("throughput at the receiver (message payload)", "bulk", t);
        let series: Vec<Series> = lines
            .iter()
            .map(|(l, pts)| Series {
                label: l,
                points: pts.iter().copied().filter(|(x, _)| *x <= 40.0).collect(),
            })
            .collect();
        let svg = line_chart(
            "bulk transfer start-up (1-s throughput)",
            "time (s)",
            "KB/s",
            &series,
        )?;
        report.file("bulk-startup.svg", svg.into_bytes());
        Ok(report)
    }
}

/// "1 KB", "64 KB", "1 MB".
pub fn size_label(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MB", bytes >> 20)
    } else if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{} KB", bytes >> 10)
    } else {
        format!("{bytes} B")
    }
}
