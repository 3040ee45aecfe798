//! Scenario parsing and validation: good files load, bad ones get errors that name the field.

use super::*;

fn parse(text: &str) -> Result<Scenario, ScenarioError> {
    Scenario::parse(text, "test.toml", Path::new("."), "test")
}

const GOOD: &str = r#"
name = "demo"
duration_s = 10
[topology]
kind = "dumbbell"
pairs = 2
[topology.bottleneck]
bandwidth_mbps = 1
delay_ms = 20
queue_packets = 10
loss = { bernoulli = 0.01 }
outages = [{ at_s = 5, duration_s = 1 }]
[[flows]]
type = "tcp"
from = "s0"
to = "r0"
delayed_ack_ms = 200
[[flows]]
type = "cbr"
from = "s1"
to = "r1"
rate_kbps = 100
start_s = 2
[outputs]
pcap = ["bottleneck"]
"#;

#[test]
fn good_file_loads() {
    let s = parse(GOOD).expect("valid");
    assert_eq!(s.name, "demo");
    assert_eq!(s.flows.len(), 2);
    assert_eq!(s.flows[0].name, "tcp0");
    assert_eq!(s.flows[1].start, Time::from_secs(2));
    assert_eq!(s.flows[1].stop, Time::from_secs(10));
}

fn expect_invalid(text: &str, field: &str, needle: &str) {
    match parse(text) {
        Err(ScenarioError::Invalid {
            field: f, message, ..
        }) => {
            assert_eq!(f, field, "message: {message}");
            assert!(message.contains(needle), "{message:?} lacks {needle:?}");
        }
        other => panic!("expected Invalid({field}), got {other:?}"),
    }
}

#[test]
fn negative_bandwidth_is_named() {
    expect_invalid(
        &GOOD.replace("bandwidth_mbps = 1", "bandwidth_mbps = -1"),
        "topology.bottleneck.bandwidth_mbps",
        "> 0",
    );
}

#[test]
fn unknown_flow_type_lists_known_types() {
    expect_invalid(
        &GOOD.replace("type = \"cbr\"", "type = \"quic\""),
        "flows[1].type",
        "known types",
    );
}

#[test]
fn missing_trace_file_is_named() {
    let text = GOOD.replace(
        "bandwidth_mbps = 1",
        "trace = { format = \"mahimahi\", path = \"nope.trace\" }",
    );
    expect_invalid(&text, "topology.bottleneck.trace.path", "does not exist");
}

#[test]
fn unknown_host_and_bad_times_are_named() {
    expect_invalid(
        &GOOD.replace("to = \"r0\"", "to = \"r9\""),
        "flows[0].to",
        "no host",
    );
    expect_invalid(
        &GOOD.replace("start_s = 2", "start_s = 2\nstop_s = 1"),
        "flows[1].stop_s",
        "after start_s",
    );
    expect_invalid(
        &GOOD.replace("bernoulli = 0.01", "bernoulli = 1.5"),
        "topology.bottleneck.loss.bernoulli",
        "probability",
    );
    expect_invalid(
        &GOOD.replace("pcap = [\"bottleneck\"]", "pcap = [\"nowhere\"]"),
        "outputs.pcap[0]",
        "no link",
    );
}

#[test]
fn misspelt_keys_are_rejected_not_ignored() {
    match parse(&GOOD.replace("delay_ms = 20", "delay_msec = 20")) {
        Err(ScenarioError::Parse { message, .. }) => {
            assert!(message.contains("delay_msec"), "{message}");
            assert!(message.contains("line"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    expect_invalid(
        &GOOD.replace("rate_kbps = 100", "rate_kbps = 100\nrate_kbsp = 3"),
        "flows[1]",
        "rate_kbsp",
    );
}

#[test]
fn errors_never_panic_on_garbage() {
    for text in [
        "",
        "duration_s = \"x\"",
        "[[flows]]\n",
        "duration_s = 1\n[topology]\nkind=\"ring\"",
    ] {
        assert!(parse(text).is_err(), "{text:?}");
    }
}

const CM: &str = r#"
duration_s = 10
[topology]
kind = "dumbbell"
pairs = 2
[topology.bottleneck]
bandwidth_kbps = 500
delay_ms = 60
queue_packets = 20
[cm]
probes_per_rtt = 4
aging_half_life = "srtt"
[[flows]]
type = "tcp-cm"
from = "s0"
to = "r0"
mss = 1000
weight = 2
[[flows]]
type = "cm-audio"
from = "s0"
to = "r0"
encodings_kbps = [16, 32, 64]
[[flows]]
type = "cm-udp"
from = "s0"
to = "r1"
packet_bytes = 500
"#;

#[test]
fn cm_flow_types_load_with_their_parameters_and_run() {
    let s = parse(CM).expect("valid");
    assert_eq!(s.flows[0].name, "tcp-cm0");
    assert!(matches!(
        s.flows[0].kind,
        FlowType::TcpCm { weight: 2.0, ref config, .. } if config.mss == 1000
    ));
    assert!(matches!(
        &s.flows[1].kind,
        FlowType::CmAudio { encodings_bps, packet_bytes: 1000, weight: 1.0, .. }
            if encodings_bps == &vec![16_000, 32_000, 64_000]
    ));
    assert!(matches!(
        s.flows[2].kind,
        FlowType::CmUdp {
            bytes: None,
            packet_bytes: 500,
            ..
        }
    ));
    // The MTU defaults to the largest tcp-cm MSS; the burst to two of them.
    assert_eq!(s.cm.mtu_bytes, 1000);
    assert_eq!(s.cm.burst_bytes, 2000);
    assert_eq!(s.cm.probes_per_rtt, 4.0);
    assert_eq!(s.cm.aging_half_life, adaptnet_core::cm::AgingHalfLife::Srtt);
    let r = s.run(1, &mut |_| {}).expect("runs").results;
    let kinds: Vec<&str> = r.flows.iter().map(|f| f.kind.as_str()).collect();
    assert_eq!(kinds, ["tcp-cm", "cm-audio", "cm-udp"]);
    assert!(
        r.flows.iter().all(|f| f.bytes_delivered > 0),
        "{:?}",
        r.flows
    );
    // s0 talks to two destinations: two macroflows, and r1 answered probes too.
    assert!(r.flows[2].counters["cm_host_probes_sent"] > 0.0);
}

#[test]
fn bad_cm_values_are_named() {
    expect_invalid(
        &CM.replace("weight = 2", "weight = -1"),
        "flows[0].weight",
        "[1e-6, 1e6]",
    );
    expect_invalid(
        &CM.replace("aging_half_life = \"srtt\"", "aging_half_life = \"mean\""),
        "cm.aging_half_life",
        "\"min-rtt\" or \"srtt\"",
    );
    expect_invalid(
        &CM.replace("probes_per_rtt = 4", "probes_per_rtt = 0"),
        "cm.probes_per_rtt",
        "[0.1, 100]",
    );
    expect_invalid(
        &CM.replace("probes_per_rtt = 4", "mtu_bytes = 10"),
        "cm.mtu_bytes",
        "64..=65535",
    );
    expect_invalid(
        &CM.replace("[16, 32, 64]", "[16, -32]"),
        "flows[1].encodings_kbps[1]",
        "> 0",
    );
    expect_invalid(
        &CM.replace("[16, 32, 64]", "[]"),
        "flows[1].encodings_kbps",
        "at least one",
    );
    expect_invalid(
        &CM.replace("packet_bytes = 500", "packet_bytes = 4"),
        "flows[2].packet_bytes",
        "12..=65507",
    );
    expect_invalid(
        &CM.replace("mss = 1000\nweight = 2", "mss = 10"),
        "flows[0].mss",
        "64..=9000",
    );
    expect_invalid(
        &CM.replace("weight = 2", "wieght = 2"),
        "flows[0]",
        "wieght",
    );
    match parse(&CM.replace("probes_per_rtt = 4", "probes_per_rt = 4")) {
        Err(ScenarioError::Parse { message, .. }) => assert!(message.contains("probes_per_rt")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn unknown_flow_type_lists_the_cm_types() {
    expect_invalid(
        &CM.replace("type = \"cm-udp\"", "type = \"cm\""),
        "flows[2].type",
        "\"tcp-cm\", \"cm-audio\" and \"cm-udp\"",
    );
}

#[test]
fn tcp_options_are_per_flow() {
    let text = GOOD.replace(
        "delayed_ack_ms = 200",
        "delayed_ack_ms = 200\ninitial_window = \"iw10\"\nlimited_transmit = true\n\
         recover_after_rto = \"reno\"",
    );
    let s = parse(&text).expect("valid");
    match &s.flows[0].kind {
        FlowType::Tcp { config, .. } => {
            assert_eq!(
                config.initial_window,
                adaptnet_core::cc::InitialWindow::Iw10
            );
            assert!(config.limited_transmit);
            assert_eq!(
                config.recover_after_rto,
                adaptnet_core::tcp::RecoverAfterRto::Reno
            );
        }
        other => panic!("expected a tcp flow, got {other:?}"),
    }
    let text = GOOD.replace("delayed_ack_ms = 200", "initial_window = 4");
    match &parse(&text).expect("valid").flows[0].kind {
        FlowType::Tcp { config, .. } => assert_eq!(
            config.initial_window,
            adaptnet_core::cc::InitialWindow::Segments(4)
        ),
        other => panic!("expected a tcp flow, got {other:?}"),
    }
}

#[test]
fn bad_recover_after_rto_names_the_field_and_the_choices() {
    expect_invalid(
        &GOOD.replace("delayed_ack_ms = 200", "recover_after_rto = \"tahoe\""),
        "flows[0].recover_after_rto",
        "\"rfc6582\" or \"reno\"",
    );
}

#[test]
fn bad_initial_window_names_the_field() {
    expect_invalid(
        &GOOD.replace("delayed_ack_ms = 200", "initial_window = \"iw100\""),
        "flows[0].initial_window",
        "unknown initial window",
    );
    expect_invalid(
        &GOOD.replace("delayed_ack_ms = 200", "initial_window = 0"),
        "flows[0].initial_window",
        "1..=1000",
    );
}

/// Regression: `duration_s = 1e12` was silently clamped to the clock's limit and run.
#[test]
fn times_beyond_the_clock_are_rejected_with_the_limit() {
    expect_invalid(
        &GOOD.replace("duration_s = 10", "duration_s = 1e12"),
        "duration_s",
        "at most 18446744073 s",
    );
    expect_invalid(
        &GOOD.replace("start_s = 2", "start_s = 1e11"),
        "flows[1].start_s",
        "at most 18446744073 s",
    );
    expect_invalid(
        &GOOD.replace("delay_ms = 20", "delay_ms = 1e20"),
        "topology.bottleneck.delay_ms",
        "ms (the simulator's clock",
    );
}

#[test]
fn cm_aging_trigger_and_change_rate_are_settable() {
    let text = CM.replace("[cm]", "[cm]\naging_trigger = \"rto\"").replace(
        "type = \"cm-audio\"",
        "type = \"cm-audio\"\nchange_rate = \"every-change\"",
    );
    let s = parse(&text).expect("valid");
    assert_eq!(s.cm.aging_trigger, adaptnet_core::cm::AgingTrigger::Rto);
    assert!(s.flows.iter().any(|f| matches!(
        f.kind,
        FlowType::CmAudio { thresholds, .. }
            if thresholds == adaptnet_core::cm::Thresholds::EVERY_RATE_CHANGE
    )));
    expect_invalid(
        &CM.replace("[cm]", "[cm]\naging_trigger = \"never\""),
        "cm.aging_trigger",
        "unknown value",
    );
}
