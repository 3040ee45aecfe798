//! NAI/ATP agents and experiments, end to end in the simulator (`papers/000…` §4–§5): every
//! implementation delivers, the baselines follow §5.2's rules, every message gets exactly one
//! outcome, the paper's key comparison holds on a reduced Table 2, and runs are deterministic.

use adaptnet_core::Time;
use adaptnet_core::nai::{NaiEvent, Outcome, Priority};
use adaptnet_experiments::nai::net::{Implementation, Run, Testbed, atp_config};
use adaptnet_experiments::nai::params::{self, KB, TestbedParams};
use adaptnet_experiments::nai::table2::{
    self, CellResult, IMPLEMENTATIONS, Table2Params, run_cell,
};
use adaptnet_experiments::nai::traces;
use adaptnet_sim::agents::nai_app::{Ledger, MessageSpec, ScheduledApp};
use adaptnet_sim::agents::nai_tcp::{NaiTcpAgent, NaiTcpSink};
use adaptnet_sim::link::Bandwidth;
use std::path::PathBuf;
use std::time::Duration;

fn experiments_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../experiments")
}

fn table2_params() -> Table2Params {
    params::load(&experiments_dir(), table2::PARAMS).expect("table2.params loads")
}

fn testbed_params() -> TestbedParams {
    table2_params().testbed
}

fn constant(kbytes_per_s: f64) -> Testbed {
    Testbed::new(
        &testbed_params(),
        Bandwidth::Constant {
            rate_bytes_per_s: kbytes_per_s * KB,
        },
        "test",
    )
    .expect("testbed")
}

/// The paper's synthetic trace (the first in table2.params).
fn synthetic() -> Testbed {
    let p = table2_params();
    let trace = traces::build(&p.traces[0], &experiments_dir(), p.duration_s)
        .expect("builds")
        .expect("not optional");
    Testbed::new(&p.testbed, trace.bandwidth, "test").expect("testbed")
}

fn spec(at_ms: u64, size: u64, priority: u8, timer_ms: u64) -> MessageSpec {
    MessageSpec {
        at: Time::from_millis(at_ms),
        size_bytes: size,
        priority: Priority(priority),
        timer: Some(Duration::from_millis(timer_ms)),
    }
}

fn run(testbed: &Testbed, imp: Implementation, specs: Vec<MessageSpec>, end_s: u64) -> Run {
    let mut r = Run::new(
        testbed,
        imp,
        atp_config(2, 1),
        Box::new(ScheduledApp::new(specs)),
        1,
    )
    .expect("builds");
    r.run_until(Time::from_secs(end_s));
    r
}

fn outcomes(l: &Ledger, f: impl Fn(&Outcome) -> bool) -> usize {
    l.messages()
        .values()
        .filter(|m| m.outcome.as_ref().is_some_and(&f))
        .count()
}

fn receiver_delivered(r: &mut Run) -> f64 {
    let res = r.world.results("test");
    res.flows[0].counters["receiver_messages_delivered"]
}

/// One cell of Table 2: `imp` on workload `name` of table2.params over `tb`, with `seed`, for
/// the parameters' duration and drain.
fn cell(p: &Table2Params, tb: &Testbed, name: &str, imp: Implementation, seed: u64) -> CellResult {
    let w = p
        .workloads
        .iter()
        .find(|w| w.name == name)
        .expect("workload");
    run_cell(tb, w, imp, seed, p.duration_s, (p.drain_s, p.max_drain_s)).unwrap()
}

/// The on-time fraction of high-priority messages of `imp` on workload `name` (seed 1).
fn high_priority(p: &Table2Params, tb: &Testbed, name: &str, imp: Implementation) -> f64 {
    cell(p, tb, name, imp, 1).tallies[0].fraction()
}

#[test]
fn test_every_agent_delivers_messages_end_to_end() {
    let tb = constant(100.0);
    // From 100 ms: before ATP's first packet pair returns, its estimate is zero and a timed
    // message would be refused.
    let specs: Vec<MessageSpec> = (0..20)
        .map(|i| spec(100 + i * 500, 4096, (i % 2) as u8, 2000))
        .collect();
    for imp in [
        Implementation::Atp,
        Implementation::AtpTcp,
        Implementation::Oracle,
        Implementation::NaiTcp,
        Implementation::Mtcp(2),
    ] {
        let mut r = run(&tb, imp, specs.clone(), 15);
        let l = r.ledger().expect("ledger");
        assert_eq!(l.messages().len(), 20, "{imp:?}");
        let on_time = l.messages().values().filter(|m| m.on_time()).count();
        assert_eq!(on_time, 20, "{imp:?}: {:?}", l.messages());
        assert!(l.each_has_one_outcome(), "{imp:?}");
        assert_eq!(receiver_delivered(&mut r), 20.0, "{imp:?}");
        assert_eq!(r.payload_check(), None, "sizes only by default");
    }
}

#[test]
fn test_testbed_option_makes_every_message_carry_its_bytes() {
    let mut p = testbed_params();
    p.message_bytes = true;
    let bandwidth = Bandwidth::Constant {
        rate_bytes_per_s: 100.0 * KB,
    };
    let tb = Testbed::new(&p, bandwidth, "test").expect("testbed");
    let specs: Vec<MessageSpec> = (0..20)
        .map(|i| spec(100 + i * 500, 1 + i * 700, (i % 2) as u8, 2000))
        .collect();
    for imp in [
        Implementation::Atp,
        Implementation::AtpTcp,
        Implementation::NaiTcp,
        Implementation::Mtcp(2),
    ] {
        let r = run(&tb, imp, specs.clone(), 15);
        let c = r.payload_check().expect("bytes carried");
        assert!(c.all_match() && c.delivered == 20, "{imp:?}: {c:?}");
        let l = r.ledger().expect("ledger");
        assert_eq!(l.messages().values().filter(|m| m.on_time()).count(), 20);
    }
}

#[test]
fn test_naitcp_discards_messages_that_waited_half_their_timer() {
    // 16 KB messages on a 20 KB/s link take ~0.8 s each; all ten arrive at once with a 4 s
    // timer, so those still queued after 2 s are discarded when the connection frees up.
    let tb = constant(20.0);
    let specs: Vec<MessageSpec> = (0..10).map(|_| spec(0, 16 * 1024, 0, 4000)).collect();
    let r = run(&tb, Implementation::NaiTcp, specs, 30);
    let l = r.ledger().expect("ledger");
    let discarded = outcomes(l, |o| *o == Outcome::Expired { early: true });
    let delivered = outcomes(l, |o| matches!(o, Outcome::Delivered { .. }));
    let agent = r.world.agent::<NaiTcpAgent>(r.sender).expect("agent");
    assert_eq!(
        discarded as u64,
        agent.sender().stats().half_timeout_discards
    );
    assert!(
        delivered >= 2 && discarded >= 5,
        "{delivered} / {discarded}"
    );
    assert_eq!(delivered + discarded, 10);
    // Sends are one at a time: the n-th delivery needs n transmission times at least.
    let sink = r.world.agent::<NaiTcpSink>(r.receiver).expect("sink");
    assert_eq!(sink.deliveries().len(), delivered);
    for (n, d) in sink.deliveries().iter().enumerate() {
        assert!(d.at.as_secs_f64() >= 0.8 * (n + 1) as f64, "{d:?}");
        assert!(matches!(
            l.messages()[&d.id].outcome,
            Some(Outcome::Delivered { .. })
        ));
    }
}

#[test]
fn test_mtcp_uses_k_plus_one_connections_and_aborts_on_expiry() {
    let tb = constant(50.0);
    // A 200 KB high-priority message cannot make its 1 s timer at 50 KB/s: the application
    // stops writing it; a small one at each level keeps every connection in use.
    let mut specs = vec![spec(0, 200 * 1024, 0, 1000)];
    specs.extend((0..6).map(|i| spec(2000 + i * 100, 1000, (i % 2) as u8, 5000)));
    let r = run(&tb, Implementation::Mtcp(3), specs, 20);
    let agent = r.world.agent::<NaiTcpAgent>(r.sender).expect("agent");
    assert_eq!(agent.connections(), 4, "3 high-priority + 1 low-priority");
    let sink = r.world.agent::<NaiTcpSink>(r.receiver).expect("sink");
    assert_eq!(sink.accepted(), 4);
    let l = r.ledger().expect("ledger");
    let big = l.messages().keys().next().copied().expect("one message");
    assert_eq!(
        l.messages()[&big].outcome,
        Some(Outcome::Expired { early: false })
    );
    assert_eq!(agent.sender().stats().aborted_partial, 1);
    assert_eq!(
        sink.discards(),
        1,
        "the receiver dropped the partial message"
    );
    assert!(sink.deliveries().iter().all(|d| d.id != big));
    assert_eq!(sink.deliveries().len(), 6);
    assert!(l.each_has_one_outcome());
}

#[test]
fn test_oracle_at_least_atp_on_high_priority_under_contention() {
    let p = table2_params();
    let tb = synthetic();
    for name in ["filesystem", "prioritised"] {
        let a = high_priority(&p, &tb, name, Implementation::Atp);
        let o = high_priority(&p, &tb, name, Implementation::Oracle);
        assert!(o >= a, "{name}: oracle {o} < ATP {a}");
    }
}

#[test]
fn test_every_message_has_exactly_one_outcome_for_every_implementation() {
    let p = table2_params();
    let tb = synthetic();
    let imps = IMPLEMENTATIONS
        .iter()
        .copied()
        .chain([Implementation::AtpTcp]);
    for imp in imps {
        let c = cell(&p, &tb, "random", imp, 2);
        let total: u64 = c.tallies.iter().map(|t| t.total).sum();
        let pending: u64 = c.tallies.iter().map(|t| t.pending).sum();
        assert_eq!(total, 600, "{imp:?}");
        assert_eq!(c.violations, 0, "{imp:?}");
        assert_eq!(pending, 0, "{imp:?}");
    }
}

#[test]
fn test_reduced_table2_atp_beats_naitcp_on_high_priority() {
    let p = table2_params();
    let tb = synthetic();
    for name in ["filesystem", "overload"] {
        let a = high_priority(&p, &tb, name, Implementation::Atp);
        let t = high_priority(&p, &tb, name, Implementation::NaiTcp);
        // Both deliver (a comparison of two zeros would pass), and ATP's priorities put it
        // clearly ahead on these two workloads (papers/000 §5.4; 89 vs 64 % and 81 vs 53 %
        // over five seeds in EXPERIMENTS.md).
        assert!(
            t > 0.2,
            "{name}: NAI-TCP delivered {t} of high priority on time"
        );
        assert!(
            a >= t + 0.1,
            "{name}: ATP {a} not 10 points above NAI-TCP {t}"
        );
    }
}

#[test]
fn test_same_seed_same_table() {
    use adaptnet_experiments::{ExpOptions, Experiment};
    let opts = ExpOptions {
        experiments_dir: experiments_dir(),
        seeds: vec![3],
        quick: true,
    };
    let a = table2::Table2
        .run(&opts, &mut |_| {})
        .expect("runs")
        .render();
    let b = table2::Table2
        .run(&opts, &mut |_| {})
        .expect("runs")
        .render();
    assert_eq!(a, b);
    assert!(a.contains("filesystem") && a.contains("exactly one outcome: yes"));
}

#[test]
fn test_atp_events_reach_the_application() {
    // Bandwidth notifications flow from ATP's estimator to the app through the agent.
    use adaptnet_core::nai::NotificationId;
    use adaptnet_sim::agents::nai_app::{NaiApp, NaiPort};
    struct Watcher {
        registered: Option<NotificationId>,
        fired: u32,
    }
    impl NaiApp for Watcher {
        fn start(&mut self, _now: Time, port: &mut dyn NaiPort) {
            self.registered = port.register_bandwidth_range(0.0, 1.0);
        }
        fn poll_timeout(&self) -> Option<Time> {
            None
        }
        fn handle_timeout(&mut self, _now: Time, _port: &mut dyn NaiPort) {}
        fn on_event(&mut self, _now: Time, e: &NaiEvent, _port: &mut dyn NaiPort) {
            if matches!(e, NaiEvent::Bandwidth { id, .. } if Some(*id) == self.registered) {
                self.fired += 1;
            }
        }
    }
    let tb = constant(100.0);
    let app = Watcher {
        registered: None,
        fired: 0,
    };
    let mut r = Run::new(&tb, Implementation::Atp, atp_config(2, 1), Box::new(app), 1).unwrap();
    r.run_until(Time::from_secs(3));
    let w = r.app::<Watcher>().expect("app");
    assert!(w.registered.is_some());
    assert_eq!(
        w.fired, 1,
        "the packet pair moves the estimate out of [0, 1]"
    );
}
