//! The two engines compared (`../shared/DESIGN.md`, "The real engine"): Table 2's `overload`
//! workload (`experiments/nai/table2.params`, papers/000 §5.4) over ATP, run by the simulator
//! (core's endpoint in `adaptnet_sim::agents::atp_endpoint`) and by the runtime on a namespace
//! link shaped with `tbf`, with the same rate, queue and core configuration; the report puts
//! the two results side by side and a tolerance checks them. Needs root, `ip` and `tc` (skips
//! loudly otherwise, except under `CI=true`).
//!
//! What the two links share and what they do not:
//! * workload: 20 s of it (80 high, 40 low messages), to keep the test short;
//! * rate: 270 KB/s (tbf `rate 2212kbit`): the workload's 192 KB/s of messages are 202 KB/s
//!   of IP packets (SPP's 45-byte DATA header, UDP, IP), 75 % of it; the simulator's link
//!   the same in IP bytes (tbf also counts the 14-byte Ethernet header: 1 % more);
//! * queue: tbf's `latency 100ms` plus its 16 KB burst, 44,032 bytes; the simulator's
//!   drop-tail queue the same in bytes. tbf lets a 16 KB burst through at the veth's speed
//!   first, the simulator does not;
//! * delay: none added (no netem here): the veth's tens of microseconds, the simulator 25 µs;
//! * the estimator's interface counters: the simulator reads its link's queue, the runtime
//!   the veth's byte counters and its socket's send queue — the tbf queue is invisible to it.
//!
//! Why this rate: nearer the capacity the two engines part. At 200 KB/s (101 % load in IP
//! bytes, 102 % as tbf counts) the simulator delivers both levels on time and 192 KB/s, three
//! namespace runs 77–83 % of the low level and 183.5 KB/s; at 150 KB/s (overload) the low
//! level's share depends on how far below the capacity ATP's estimate settles, and four
//! namespace runs gave 15–37 % where the simulator gives 13 %: the links and the estimator's
//! inputs differ (above). See EXPERIMENTS.md.
//!
//! The tolerance, and how it was chosen: per priority the fractions on time may differ by at
//! most 0.15, and delivered throughput by at most 25 %. They are not fitted to a run (five
//! runs gave identical results in both engines); they are as wide as the measurement allows
//! and narrow enough to fail an engine whose link or pacing runs 40 % slow: the test runs
//! that mutant in the simulator (the link at 60 % of the rate: the low level falls to 38 %,
//! throughput to 115 KB/s) and checks the tolerance rejects it. Lost, altered or duplicated
//! messages are caught exactly (every message's outcome; the receiving application gets
//! exactly the messages reported delivered). Not caught: an engine running less than about
//! 25 % slow (the workload then still fits), or differences under 15 points.

use adaptnet_core::Time;
use adaptnet_core::atp::endpoint::EndpointConfig;
use adaptnet_core::nai::{DeadlineMargin, OnExpiry, Outcome, Priority, SendOptions};
use adaptnet_runtime::atp::InterfaceChoice;
use adaptnet_runtime::message::{Endpoint, EndpointOptions, Transport};
use adaptnet_sim::agents::atp_endpoint::{self, AtpClientAgent, Faults};
use adaptnet_sim::agents::nai_app::{MessageSpec, ScheduledApp};
use adaptnet_sim::link::{Bandwidth, LinkConfig, LossModel, QueueLimit};
use adaptnet_sim::world::World;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::time::timeout;

mod common;
use common::Link;

/// Table 2's KB.
const KB: u64 = 1024;
/// The link's rate: 270 KB/s, so that the workload (202 KB/s of IP packets) is 75 % of it.
const RATE_BYTES_PER_S: f64 = 270.0 * 1024.0;
/// tc's spelling of it (2211.84 kbit/s).
const TC_RATE: &str = "2212kbit";
/// tbf's queue: `latency 100ms` at the rate plus the 16 KB burst.
const QUEUE_BYTES: u64 = 27_648 + 16_384;
/// How long the workload runs.
const SPAN_S: u64 = 20;
/// Messages submitted before this are the connection's start (issue 18: ATP's estimate on a
/// real link can be poor at first); the report shows the rest apart too.
const WARMUP: Duration = Duration::from_secs(5);
/// The mutant's link runs at this share of the rate.
const MUTANT_RATE_SHARE: f64 = 0.6;
/// Largest allowed difference in the fraction on time, per priority.
const FRACTION_TOLERANCE: f64 = 0.15;
/// Largest allowed relative difference in delivered throughput.
const THROUGHPUT_TOLERANCE: f64 = 0.25;

/// Table 2's `overload` for `SPAN_S`: high 16 KB every 250 ms, low 64 KB every 500 ms, both
/// with 1 s timers discarded on expiry; the low class starts 125 ms in.
fn workload() -> Vec<MessageSpec> {
    let class = |size: u64, every_ms: u64, offset_ms: u64, priority: u8| {
        (0..SPAN_S * 1000 / every_ms).map(move |i| MessageSpec {
            at: Time::from_millis(offset_ms + i * every_ms),
            size_bytes: size,
            priority: Priority(priority),
            timer: Some(Duration::from_secs(1)),
        })
    };
    let mut v: Vec<MessageSpec> = class(16 * KB, 250, 0, 0)
        .chain(class(64 * KB, 500, 125, 1))
        .collect();
    v.sort_by_key(|s| s.at);
    v
}

/// Both engines' ATP configuration: core's defaults (the bounded estimator) with the
/// runtime's 2 ms timer granularity, two levels.
fn core_config() -> EndpointConfig {
    let mut c = EndpointConfig::client();
    c.atp.nai.levels = 2;
    c.atp.timer_granularity = Duration::from_millis(2);
    c
}

/// Every message of a run and its outcome (`None`: refused at submission).
type Outcomes = Vec<(MessageSpec, Option<Outcome>)>;

/// One engine's result over the messages submitted from `from` on.
#[derive(Clone, Copy, Debug, Default)]
struct Result2 {
    total: [u32; 2],
    on_time: [u32; 2],
    delivered: u64,
    delivered_bytes: u64,
    span_s: f64,
}

impl Result2 {
    fn of(outcomes: &Outcomes, from: Duration) -> Result2 {
        let mut r = Result2 {
            span_s: SPAN_S as f64 - from.as_secs_f64(),
            ..Result2::default()
        };
        for (spec, o) in outcomes {
            if spec.at >= Time::ZERO + from {
                r.record(usize::from(spec.priority.0), spec.size_bytes, *o);
            }
        }
        r
    }

    fn fraction(&self, level: usize) -> f64 {
        f64::from(self.on_time[level]) / f64::from(self.total[level].max(1))
    }

    /// Delivered message bytes per second of the span.
    fn throughput(&self) -> f64 {
        self.delivered_bytes as f64 / self.span_s.max(1.0)
    }

    fn record(&mut self, level: usize, size: u64, outcome: Option<Outcome>) {
        self.total[level] += 1;
        if let Some(Outcome::Delivered { margin, .. }) = outcome {
            self.delivered += 1;
            self.delivered_bytes += size;
            if !matches!(margin, Some(DeadlineMargin::Late(_))) {
                self.on_time[level] += 1;
            }
        }
    }

    /// Why `other` is not within the tolerance of `self`, if it is not.
    fn differs(&self, other: &Result2) -> Option<String> {
        for level in 0..2 {
            let (a, b) = (self.fraction(level), other.fraction(level));
            if (a - b).abs() > FRACTION_TOLERANCE {
                return Some(format!("level {level}: {a:.3} vs {b:.3}"));
            }
        }
        let (a, b) = (self.throughput(), other.throughput());
        if (a - b).abs() > THROUGHPUT_TOLERANCE * a.max(b) {
            return Some(format!("throughput {a:.0} vs {b:.0} B/s"));
        }
        None
    }
}

/// The workload in the simulator, on a link of `rate_share` of the rate (1.0; less for the
/// mutant, an engine whose link or pacing runs slow).
fn simulate(seed: u64, rate_share: f64) -> Outcomes {
    let mut w = World::new(seed);
    let s = w.add_node("sender").expect("node");
    let r = w.add_node("receiver").expect("node");
    let fwd = LinkConfig {
        bandwidth: Bandwidth::Constant {
            rate_bytes_per_s: RATE_BYTES_PER_S * rate_share,
        },
        delay: Duration::from_micros(25),
        queue: QueueLimit::Bytes(QUEUE_BYTES),
        loss: LossModel::None,
        outages: Vec::new(),
        reorders: Vec::new(),
    };
    // The return path is the veth, unshaped.
    let rev = LinkConfig {
        bandwidth: Bandwidth::bits_per_s(10e9),
        queue: QueueLimit::Packets(1000),
        ..fwd.clone()
    };
    w.add_link("veth", s, r, fwd, rev).expect("link");
    let specs = workload();
    let stop = Time::from_secs(SPAN_S + 5);
    let faults = Faults {
        close_linger: Duration::from_secs(5),
        ..Faults::default()
    };
    let app = Box::new(ScheduledApp::new(specs.clone()));
    let (client, _) = atp_endpoint::install(
        &mut w,
        "atp",
        core_config(),
        s,
        r,
        7000,
        app,
        Time::ZERO,
        stop,
        faults,
        Faults::default(),
    )
    .expect("install");
    w.check_routes().expect("routes");
    w.run_until(stop + Duration::from_secs(10), &mut |_| {});
    let agent = w.agent::<AtpClientAgent>(client).expect("client");
    let records: Vec<_> = agent.ledger().messages().values().copied().collect();
    assert_eq!(records.len(), specs.len(), "every message submitted");
    // The ledger is in id order, which is submission order, which is the specs' order.
    specs
        .into_iter()
        .zip(records)
        .map(|(spec, rec)| (spec, rec.outcome))
        .collect()
}

fn atp_options(server: bool, interface: InterfaceChoice) -> EndpointOptions {
    let mut options = if server {
        EndpointOptions::server(Transport::Atp)
    } else {
        EndpointOptions::client(Transport::Atp)
    };
    let atp = options.atp_mut().expect("ATP");
    atp.interface = interface;
    let defaults = atp.core.clone();
    atp.core = EndpointConfig {
        server: defaults.server,
        ..core_config()
    };
    options
}

/// The workload on the namespace link; returns the result and the messages the receiving
/// application got.
async fn run_real(link: &Link) -> (Outcomes, u64) {
    let server = Endpoint::from_udp_socket(
        link.socket_inside(),
        atp_options(true, InterfaceChoice::Off),
    )
    .expect("server");
    let bind: SocketAddr = format!("{}:0", link.a_ip).parse().expect("address");
    let client_opts = atp_options(false, InterfaceChoice::Named(link.host.clone()));
    let client = Endpoint::bind(bind, client_opts).expect("client");
    let c = timeout(Duration::from_secs(10), client.connect(server.local_addr()))
        .await
        .expect("in time")
        .expect("connected");
    let s = timeout(Duration::from_secs(10), server.accept())
        .await
        .expect("in time")
        .expect("accepted");
    let receiver = tokio::spawn(async move {
        let mut n = 0u64;
        // Every outcome is known long before 2 s of silence: the last messages have 1 s timers.
        while let Ok(Ok(_)) = timeout(Duration::from_secs(2), s.recv()).await {
            n += 1;
        }
        n
    });
    let specs = workload();
    let start = Instant::now();
    let mut pending = Vec::new();
    let mut out = Outcomes::new();
    for spec in &specs {
        let at = start + (spec.at - Time::ZERO);
        tokio::time::sleep_until(at.into()).await;
        let opts = SendOptions {
            priority: spec.priority,
            timer: spec.timer,
            on_expiry: OnExpiry::Discard,
        };
        let len = usize::try_from(spec.size_bytes).expect("size");
        match c.send(vec![spec.priority.0; len], opts).await {
            Ok(h) => pending.push((*spec, h)),
            // Refused by admission control (or a bound): submitted, not delivered.
            Err(_) => out.push((*spec, None)),
        }
    }
    for (spec, h) in pending {
        let o = timeout(Duration::from_secs(30), h.outcome())
            .await
            .expect("every message gets an outcome");
        out.push((spec, Some(o)));
    }
    let received = receiver.await.expect("receiver");
    (out, received)
}

fn row(name: &str, r: &Result2) -> String {
    format!(
        "{name:<22} {:>5.1} % of {:>3}   {:>5.1} % of {:>3}   {:>6.1} KB/s",
        r.fraction(0) * 100.0,
        r.total[0],
        r.fraction(1) * 100.0,
        r.total[1],
        r.throughput() / 1024.0
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn table2_overload_in_the_simulator_and_on_a_namespace_link() {
    let Some(link) = Link::new("simatp", 97) else {
        return;
    };
    link.shape(TC_RATE);
    let (real_outcomes, received) = run_real(&link).await;
    let (sim_outcomes, mutant_outcomes) = (simulate(1, 1.0), simulate(1, MUTANT_RATE_SHARE));
    // The whole run is compared; the start is also shown apart (issue 18).
    let mut results = Vec::new();
    for from in [Duration::ZERO, WARMUP] {
        let r = [&sim_outcomes, &real_outcomes, &mutant_outcomes].map(|o| Result2::of(o, from));
        results.push(r);
    }
    let [sim, real, mutant] = results[0];
    let [sim_late, real_late, mutant_late] = results[1];
    eprintln!(
        "\nTable 2 `overload` over ATP, 270 KB/s, {QUEUE_BYTES} B queue, {SPAN_S} s \
         (on time: high, low; delivered throughput)\nwhole run:\n{}\n{}\n{}\n\
         messages submitted after the first {} s:\n{}\n{}\n{}",
        row("simulator", &sim),
        row("namespace link (tbf)", &real),
        row("sim, link at 60 %", &mutant),
        WARMUP.as_secs(),
        row("simulator", &sim_late),
        row("namespace link (tbf)", &real_late),
        row("sim, link at 60 %", &mutant_late),
    );
    let delivered = real.delivered;
    assert_eq!(
        received, delivered,
        "the receiving application got exactly the messages reported delivered"
    );
    if let Some(why) = sim.differs(&real) {
        panic!("the engines differ beyond the tolerance: {why}");
    }
    assert!(
        sim.differs(&mutant).is_some(),
        "the tolerance cannot tell a link at 60 % of the rate from the real one"
    );
}
