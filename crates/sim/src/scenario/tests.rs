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
