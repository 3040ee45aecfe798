//! Topology builders and real cellular traces.

use adaptnet_core::Time;
use adaptnet_core::tcp::TcpConfig;
use adaptnet_sim::agents::tcp::{TcpReceiver, TcpSender};
use adaptnet_sim::link::{Bandwidth, LinkConfig, QueueLimit};
use adaptnet_sim::packet::{Addr, NodeId, Proto};
use adaptnet_sim::topology::{DumbbellSpec, chain, dumbbell};
use adaptnet_sim::trace::MahimahiTrace;
use adaptnet_sim::world::{FlowSpec, World};
use std::path::Path;
use std::time::Duration;

/// Adds a TCP flow of `bytes` (or unlimited) from `a` to `b`.
fn tcp_flow(w: &mut World, a: NodeId, b: NodeId, bytes: Option<u64>, stop: Time) {
    let s = Addr {
        node: a,
        port: 1000,
    };
    let r = Addr {
        node: b,
        port: 2000,
    };
    let cfg = TcpConfig::default();
    let snd = TcpSender::newreno(s, r, cfg.clone(), bytes, 11);
    let rcv = TcpReceiver::new(r, s, cfg, 22);
    let sender = w
        .add_agent(a, Proto::Tcp, 1000, Box::new(snd))
        .expect("port free");
    let receiver = w
        .add_agent(b, Proto::Tcp, 2000, Box::new(rcv))
        .expect("port free");
    w.add_flow(FlowSpec {
        name: "f".into(),
        kind: "tcp".into(),
        sender,
        receiver,
        start: Time::ZERO,
        stop,
    });
}

#[test]
fn chain_routes_across_every_hop_and_rtt_adds_up() {
    let mut w = World::new(1);
    let hop = LinkConfig::constant(10e6, Duration::from_millis(10), 100);
    let nodes = chain(&mut w, &[hop.clone(), hop.clone(), hop]).expect("chain");
    assert_eq!(nodes.len(), 4);
    tcp_flow(
        &mut w,
        nodes[0],
        nodes[3],
        Some(1_000_000),
        Time::from_secs(30),
    );
    w.run_until(Time::from_secs(30), &mut |_| {});
    let r = w.results("chain");
    assert_eq!(r.flows[0].bytes_delivered, 1_000_000);
    // Six 10 ms propagation legs plus store-and-forward serialisation at every hop.
    let min = r.flows[0].rtt.min_ms;
    assert!((60.0..65.0).contains(&min), "min RTT {min} ms");
    for name in ["hop0:n0->n1", "hop1:n1->n2", "hop2:n2->n3"] {
        let l = r.link(name).expect("link");
        assert!(
            l.stats.delivered_bytes >= 1_000_000,
            "{name} carried the data"
        );
    }
}

#[test]
fn newreno_over_recorded_cellular_traces_stays_within_capacity() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces/mahimahi");
    if !dir.is_dir() {
        eprintln!("skipping: {} not present", dir.display());
        return;
    }
    for name in ["Verizon-LTE-short.down", "ATT-LTE-driving-2016.down"] {
        let trace = MahimahiTrace::load(&dir.join(name)).expect("valid trace");
        let mut w = World::new(1);
        let mut bottleneck = LinkConfig::constant(1.0, Duration::from_millis(20), 100);
        bottleneck.bandwidth = Bandwidth::Mahimahi(trace);
        let mut reverse = LinkConfig::constant(10e6, Duration::from_millis(20), 100);
        reverse.queue = QueueLimit::Packets(1000);
        let d = dumbbell(
            &mut w,
            &DumbbellSpec {
                pairs: 1,
                bottleneck,
                bottleneck_reverse: reverse,
                sender_access: vec![],
                receiver_access: vec![],
            },
        )
        .expect("dumbbell");
        tcp_flow(
            &mut w,
            d.senders[0],
            d.receivers[0],
            None,
            Time::from_secs(60),
        );
        w.run_until(Time::from_secs(60), &mut |_| {});
        let r = w.results(name);
        let link = r.link("bottleneck:left->right").expect("bottleneck");
        assert!(
            link.utilization <= 1.0 + 1e-9,
            "{name}: delivered more than the trace allows ({})",
            link.utilization
        );
        assert!(
            link.utilization > 0.3,
            "{name}: one NewReno flow should use a fair part of the trace ({:.2})",
            link.utilization
        );
        assert!(r.flows[0].bytes_delivered > 0);
    }
}
