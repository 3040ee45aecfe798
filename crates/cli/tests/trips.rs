//! The trips a newcomer met with `serve`, `send` and `bulk`, each a regression test: host
//! names; a missing server reported as soon as the network says so (ICMP port unreachable on
//! loopback, and across a namespace link when root); `bulk --transport atp -P 2`; the last
//! port; the summary on Ctrl-C; the ports `serve --help` names; kernel TCP's congestion
//! control named and chosen; ATP's order between priority levels chosen.

mod support;

use std::time::{Duration, Instant};
use support::{Server, json_of, run};

/// A UDP and TCP port nothing listens on (it was free a moment ago).
fn closed_port() -> u16 {
    support::free_base_port()
}

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn host_names_are_accepted_by_serve_bulk_and_send() {
    let p = support::free_base_port();
    // `serve --listen localhost:P` and clients to `localhost:P`.
    let listen = format!("localhost:{p}");
    let mut child = support::adaptnet()
        .args(["serve", "--listen", &listen, "-t", "20"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("serve");
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", p + 1)).is_err() {
        assert!(
            Instant::now() < deadline,
            "serve on localhost did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let bulk = support::bulk(&listen, "tcp", &["--json"]);
    let send = support::send(&listen, "atp", &["-t", "2", "--json"]);
    let _ = child.kill();
    let _ = child.wait();
    let r = json_of("bulk to localhost", &bulk);
    assert!(r["total_mbit_per_s"].as_f64().unwrap_or(0.0) > 0.0, "{r}");
    let r = json_of("send to localhost", &send);
    assert!(r["delivered_bytes"].as_u64().unwrap_or(0) > 0, "{r}");
}

/// Each client against a port nothing listens on fails with "nothing listens" (UDP: the ICMP
/// port unreachable; TCP: the RST) well before any handshake timeout (ATP's is ~30 s, the
/// stream transport's 10 s).
#[test]
fn a_missing_server_is_reported_at_once_on_every_transport() {
    let to = format!("127.0.0.1:{}", closed_port());
    let cases = [
        ("bulk", "atp"),
        ("bulk", "stream"),
        ("bulk", "tcp"),
        ("send", "atp"),
        ("send", "nai-tcp"),
    ];
    for (command, transport) in cases {
        let start = Instant::now();
        let o = if command == "bulk" {
            support::bulk(&to, transport, &[])
        } else {
            support::send(&to, transport, &[])
        };
        let took = start.elapsed();
        let err = stderr_of(&o);
        let what = format!("{command} {transport}");
        assert!(!o.status.success(), "{what} failed");
        assert!(
            err.contains("nothing listens") || err.contains("refused"),
            "{what}: {err}"
        );
        assert!(took < Duration::from_secs(5), "{what} took {took:?}: {err}");
    }
}

/// The same across a namespace link: the ICMP error crosses a real (veth) path.
#[test]
fn a_missing_server_across_a_namespace_link_is_reported_at_once() {
    use adaptnet_testbed::netns::NetnsLink;
    let link = match NetnsLink::create("rst", 173) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("SKIPPED (needs root and iproute2): {e}");
            return;
        }
    };
    let to = std::net::SocketAddr::new(link.outside_addr().ip(), closed_port()).to_string();
    let exe = env!("CARGO_BIN_EXE_adaptnet");
    let started = Instant::now();
    let out = link
        .spawn_inside(move || {
            std::process::Command::new(exe)
                .args(["bulk", "--to", &to, "--transport", "atp", "-t", "1"])
                .output()
        })
        .and_then(|t| t.join())
        .expect("inside the namespace")
        .expect("run adaptnet");
    let took = started.elapsed();
    let err = stderr_of(&out);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("nothing listens"), "{err}");
    assert!(took < Duration::from_secs(5), "took {took:?}: {err}");
}

#[test]
fn bulk_atp_runs_parallel_flows() {
    let server = Server::start("atp-p2", &[], |_| {});
    let r = json_of(
        "bulk atp -P 2",
        &support::bulk(&server.to(), "atp", &["-P", "2", "-t", "3", "--json"]),
    );
    let results = r["results"].as_array().expect("results");
    assert_eq!(results.len(), 2, "{r}");
    let bytes: u64 = results
        .iter()
        .map(|f| f["bytes"].as_u64().unwrap_or(0))
        .sum();
    assert!(bytes > 0, "{r}");
}

#[test]
fn the_last_port_is_refused_instead_of_wrapping() {
    for o in [
        run(&["serve", "--listen", "127.0.0.1:65535", "-t", "1"]),
        support::bulk("127.0.0.1:65535", "tcp", &[]),
    ] {
        assert!(!o.status.success());
        assert!(stderr_of(&o).contains("at most 65534"), "{}", stderr_of(&o));
    }
}

#[test]
fn serve_prints_its_summary_on_interrupt_and_terminate() {
    for (signal, name) in [(libc::SIGINT, "SIGINT"), (libc::SIGTERM, "SIGTERM")] {
        let server = Server::start("signal", &[], |_| {});
        let (status, out) = server.stop_with(signal);
        assert!(status.success(), "{name}: {status:?}");
        assert!(out.contains(&format!("stopped ({name})")), "{name}: {out}");
        assert!(out.contains("connections:"), "{name}: {out}");
    }
}

#[test]
fn serve_help_names_all_four_ports_and_the_limits() {
    let o = run(&["serve", "--help"]);
    let help = String::from_utf8_lossy(&o.stdout);
    for port in ["UDP P (ATP)", "TCP P (NAI-TCP", "UDP P+1", "TCP P+1"] {
        assert!(help.contains(port), "{port}: {help}");
    }
    assert!(help.contains("--max-connections") && help.contains("--idle-timeout-s"));
}

#[test]
fn kernel_tcp_names_its_congestion_control_and_takes_a_choice() {
    let server = Server::start("congestion", &[], |_| {});
    let to = server.to();
    let default = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
        .expect("the host's default")
        .trim()
        .to_owned();
    let r = json_of("default", &support::bulk(&to, "tcp", &["--json"]));
    assert_eq!(r["congestion"], default.as_str(), "{r}");
    // reno is in every kernel and allowed to every user.
    let o = support::bulk(&to, "tcp", &["--congestion", "reno", "--json"]);
    assert!(
        stderr_of(&o).contains("congestion control reno"),
        "{}",
        stderr_of(&o)
    );
    assert_eq!(json_of("reno", &o)["congestion"], "reno");
    let o = support::bulk(&to, "tcp", &["--congestion", "no-such-cc"]);
    assert!(!o.status.success());
    assert!(stderr_of(&o).contains("not available"), "{}", stderr_of(&o));
    let o = support::send(&to, "nai-tcp", &["--congestion", "reno"]);
    assert!(o.status.success(), "{}", stderr_of(&o));
    assert!(
        stderr_of(&o).contains("congestion control reno"),
        "{}",
        stderr_of(&o)
    );
}

/// Asserts that `o` is a failed run whose error says `why`.
fn assert_refused(o: &std::process::Output, why: &str) {
    assert!(!o.status.success());
    assert!(stderr_of(o).contains(why), "{}", stderr_of(o));
}

/// Asserts that `o` is a `send --json` run that delivered something.
fn assert_delivered(what: &str, o: &std::process::Output) {
    let r = json_of(what, o);
    assert!(r["delivered_bytes"].as_u64().unwrap_or(0) > 0, "{r}");
}

/// `send --priorities` picks ATP's order between levels, is refused for the baselines (their
/// levels are connections) and names the choices when given a wrong one.
#[test]
fn send_takes_an_order_between_priority_levels_for_atp() {
    let server = Server::start("priorities", &[], |_| {});
    let to = server.to();
    let o = support::send(&to, "atp", &["--priorities", "strict", "-t", "2", "--json"]);
    assert_delivered("strict", &o);
    let o = support::send(&to, "atp", &["--priorities", "fifo"]);
    assert_refused(&o, "expected strict or slack");
    let o = support::send(&to, "nai-tcp", &["--priorities", "slack"]);
    assert_refused(&o, "applies to ATP");
    let o = support::send(
        &to,
        "atp",
        &["--lend-at-percent", "50", "-t", "2", "--json"],
    );
    assert_delivered("lend at 50 %", &o);
    for bad in ["0", "101", "half"] {
        let o = support::send(&to, "atp", &["--lend-at-percent", bad]);
        assert!(!o.status.success(), "--lend-at-percent {bad} was taken");
    }
    let o = support::send(
        &to,
        "atp",
        &["--priorities", "strict", "--lend-at-percent", "50"],
    );
    assert_refused(&o, "under --priorities slack");
}
