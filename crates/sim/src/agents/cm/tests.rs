//! CM agents in the simulator, through scenario files: TCP/CM flows share a macroflow and
//! complete; the audio server follows its CM rate; weighted shares; determinism; malformed
//! control packets.

use super::*;
use crate::agent::Agent;
use crate::packet::{Addr, Packet, Proto};
use crate::scenario::Scenario;
use crate::world::{FlowId as SimFlow, World};
use adaptnet_core::Time;
use std::path::Path;

fn scenario(text: &str) -> Scenario {
    Scenario::parse(text, "test.toml", Path::new("."), "test").unwrap_or_else(|e| panic!("{e}"))
}

fn dumbbell(kbps: u32, one_way_ms: u32, queue: u32, duration_s: u32) -> String {
    format!(
        r#"
duration_s = {duration_s}
sample_period_s = 0.5
[topology]
kind = "dumbbell"
pairs = 2
[topology.bottleneck]
bandwidth_kbps = {kbps}
delay_ms = {one_way_ms}
queue_packets = {queue}
[cm]
mtu_bytes = 1000
"#
    )
}

fn flow(kind: &str, extra: &str) -> String {
    format!("[[flows]]\ntype = \"{kind}\"\nfrom = \"s0\"\nto = \"r0\"\n{extra}\n")
}

fn sender<T: Agent>(world: &World, flow: u32) -> &T {
    let (s, _) = world.flow_agents(SimFlow(flow)).expect("flow");
    world.agent::<T>(s).expect("sender type")
}

#[test]
fn test_tcp_cm_flows_share_one_macroflow_and_complete() {
    let mut text = dumbbell(2000, 30, 20, 40);
    for _ in 0..3 {
        text += &flow("tcp-cm", "bytes = 300000\nmss = 1000");
    }
    let s = scenario(&text);
    let mut world = s.build(1).expect("builds");
    world.run_until(Time::from_secs(3), &mut |_| {});
    let host = sender::<TcpCmSender>(&world, 0).host().clone();
    let flows: Vec<_> = (0..3)
        .map(|i| sender::<TcpCmSender>(&world, i).cm_flow().expect("open"))
        .collect();
    let cm = host.cm().borrow();
    let mf = cm.getmacroflow(flows[0]).expect("open");
    for f in &flows[1..] {
        assert_eq!(cm.getmacroflow(*f), Ok(mf), "one macroflow per destination");
    }
    assert_eq!(cm.macroflow_info(mf).expect("mf").flows, 3);
    drop(cm);
    world.run_until(s.duration, &mut |_| {});
    let r = world.results("t");
    let done: Vec<f64> = r
        .flows
        .iter()
        .map(|f| f.counters.get("completed_s").copied().expect("completed"))
        .collect();
    for f in &r.flows {
        assert_eq!(f.bytes_delivered, 300_000, "{}", f.name);
        assert_eq!(f.counters.get("cm_open_failed"), Some(&0.0));
    }
    let (lo, hi) = done
        .iter()
        .fold((f64::MAX, 0.0f64), |(l, h), d| (l.min(*d), h.max(*d)));
    assert!(hi / lo < 1.15, "finish times {done:?}");
    // The flows closed: the CM holds none, and most bytes went out under grants.
    for i in 0..3 {
        assert!(sender::<TcpCmSender>(&world, i).cm_flow().is_none());
    }
    let st = host.stats();
    assert!(st.granted_bytes >= 900_000, "{st:?}");
    assert!(st.ungranted_bytes < 100_000, "{st:?}");
}

#[test]
fn test_audio_picks_encodings_within_its_cm_rate() {
    let mut text = dumbbell(500, 60, 8, 60);
    text += &flow("cm-audio", "");
    text += &flow("tcp-cm", "mss = 1000");
    let s = scenario(&text);
    let mut world = s.build(3).expect("builds");
    world.run_until(s.duration, &mut |_| {});
    let audio = sender::<CmAudioSender>(&world, 0);
    let h = audio.history();
    assert_eq!(h[0].encoding_bps, 10_000, "no estimate at start: lowest");
    assert!(h.len() >= 3, "the encoding follows change_rate: {h:?}");
    assert!(h.iter().any(|c| c.encoding_bps >= 40_000), "{h:?}");
    for c in &h[1..] {
        let rate_bps = c.rate_bytes_per_s.expect("change_rate carries a rate") * 8.0;
        assert!(
            c.encoding_bps as f64 <= rate_bps || c.encoding_bps == 10_000,
            "{c:?}"
        );
    }
    let r = world.results("t");
    let a = &r.flows[0];
    assert!(a.bytes_delivered > 100_000, "{}", a.bytes_delivered);
    assert!(a.counters["cm_host_probes_sent"] > 100.0);
    assert!(a.counters["cm_host_responses_accepted"] > 50.0);
}

#[test]
fn test_weighted_cm_flows_get_shares_within_5_percent_of_weights() {
    let mut text = dumbbell(1000, 60, 15, 40);
    for w in [1, 2, 3] {
        text += &flow("cm-udp", &format!("weight = {w}"));
    }
    let s = scenario(&text);
    let r = s.run(1, &mut |_| {}).expect("runs").results;
    // Every flow is backlogged from 0 s.
    assert_shares_follow_weights(&r, &[1.0, 2.0, 3.0], 10.0);
}

#[test]
fn test_same_seed_gives_identical_cm_results() {
    let mut text = dumbbell(500, 60, 8, 20);
    text += &flow("cm-audio", "");
    text += &flow("tcp-cm", "mss = 1000");
    text += &flow("cm-udp", "weight = 0.5");
    text += "[[flows]]\ntype = \"tcp\"\nfrom = \"s1\"\nto = \"r1\"\n";
    let s = scenario(&text);
    let a = s.run(9, &mut |_| {}).expect("runs").results;
    let b = s.run(9, &mut |_| {}).expect("runs").results;
    assert_eq!(a, b);
    assert!(a.flows.iter().all(|f| f.bytes_delivered > 0));
}

#[test]
fn test_malformed_control_packets_are_counted_not_fatal() {
    let host = CmHost::new(NodeId(0), adaptnet_core::cm::CmConfig::default());
    let mut agent = CmHostAgent::new(host);
    let a = Addr {
        node: NodeId(1),
        port: CM_PORT,
    };
    for bytes in [
        &[][..],
        &[1u8][..],
        &[9, 9, 9, 9, 9][..],
        &[1, 2, 0, 0, 0, 0, 0][..],
    ] {
        let p = Packet::with_header(a, a, Proto::Udp, bytes.len(), 0, |buf| {
            buf.copy_from_slice(bytes);
            Ok::<usize, ()>(bytes.len())
        })
        .expect("header");
        agent.handle_packet(Time::ZERO, p);
    }
    assert_eq!(agent.malformed(), 4);
    assert!(agent.poll_transmit(Time::ZERO).is_none());
}

/// Asserts that the flows' goodput after `after_s` is split in proportion to `weights`, each
/// share within 5 % of its weight share.
pub(super) fn assert_shares_follow_weights(
    r: &crate::metrics::RunResults,
    weights: &[f64],
    after_s: f64,
) {
    let from = r
        .sample_times_s
        .iter()
        .position(|t| *t > after_s)
        .expect("samples");
    let bytes: Vec<f64> = r
        .flows
        .iter()
        .map(|f| f.goodput_series_bps[from..].iter().sum::<f64>())
        .collect();
    let total: f64 = bytes.iter().sum();
    let weight_total: f64 = weights.iter().sum();
    assert!(total > 0.0);
    assert_eq!(bytes.len(), weights.len());
    for (i, (b, w)) in bytes.iter().zip(weights).enumerate() {
        let (share, want) = (b / total, w / weight_total);
        assert!(
            (share / want - 1.0).abs() < 0.05,
            "flow {i}: share {share:.3}, weight share {want:.3}"
        );
    }
}
