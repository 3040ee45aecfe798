//! What the emulator's tests share: bring a link up or skip loudly where this machine cannot
//! (not root, no iproute2, no /dev/net/tun) — except under `CI=true`, where a skip is a
//! failure — and run one timing-sensitive test at a time.
//!
//! Run these tests holding the machine's namespace lock, so no other namespace test overlaps:
//! `flock /tmp/adaptnet-netns.lock cargo test -p adaptnet-linkemu`.

#![allow(dead_code)] // each test file uses a different part

pub mod flows;

use adaptnet_linkemu::{EmulatedLink, EmulatorOptions, LinkEmuError};
use adaptnet_sim::scenario::link_table::LinkPair;
use std::sync::{Mutex, MutexGuard};

/// One measuring test at a time in a test binary: two links moving packets at once on two
/// cores would measure each other.
static SERIAL: Mutex<()> = Mutex::new(());

/// Holds the test binary's measuring slot (a failed test does not poison it for the rest).
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Where the shared traces live (never copied into the repository): `$ADAPTNET_TRACES`, else
/// `../shared/traces` beside the repository.
pub fn traces_dir() -> std::path::PathBuf {
    match std::env::var_os("ADAPTNET_TRACES") {
        Some(dir) => dir.into(),
        None => std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces"),
    }
}

/// Skips loudly (fails under CI=true).
pub fn skip(test: &str, why: &str) {
    let msg = format!("SKIPPED link emulator test {test}: {why}");
    eprintln!("\n*** {msg} ***\n");
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{msg} (CI must run the link emulator tests)"
    );
}

/// A link table from TOML text (trace paths relative to the shared traces directory).
pub fn links(text: &str) -> LinkPair {
    LinkPair::parse(text, "test link", &traces_dir()).expect("valid link table")
}

/// Brings up `links` between two namespaces, or `None` after saying why this machine cannot.
pub fn up(test: &str, links: LinkPair, opts: EmulatorOptions) -> Option<EmulatedLink> {
    match EmulatedLink::up(links, opts) {
        Ok(l) => Some(l),
        Err(e @ (LinkEmuError::NotRoot | LinkEmuError::NoIproute2 | LinkEmuError::NoTun)) => {
            skip(test, &e.to_string());
            None
        }
        Err(e) => panic!("{test}: bringing the link up: {e}"),
    }
}

/// Namespaces whose name starts with `prefix` (from `ip netns list`).
pub fn namespaces_named(prefix: &str) -> Vec<String> {
    let out = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(prefix))
        .map(str::to_string)
        .collect()
}

/// The simulator's goodput (bit/s) of one NewReno flow from the far side to the emulated side
/// over the same link table: a dumbbell whose bottleneck is the table's downlink and whose
/// reverse direction is its uplink (access links: 1 Gbit/s, no delay). `tcp_keys` are the
/// flow's TCP options (scenario syntax).
pub fn sim_goodput_bps(downlink: &str, uplink: &str, seconds: f64, tcp_keys: &str) -> f64 {
    let text = format!(
        "name = \"linkemu-compare\"\nduration_s = {seconds}\n[topology]\nkind = \"dumbbell\"\n\
         pairs = 1\n[topology.bottleneck]\n{downlink}\n[topology.bottleneck_reverse]\n{uplink}\n\
         [[flows]]\ntype = \"tcp\"\nfrom = \"s0\"\nto = \"r0\"\n{tcp_keys}\n"
    );
    let scenario = adaptnet_sim::scenario::Scenario::parse(&text, "compare", &traces_dir(), "c")
        .expect("valid scenario");
    let out = scenario.run(1, &mut |_| {}).expect("simulation");
    out.results.flows[0].bytes_delivered as f64 * 8.0 / seconds
}

/// A link table with `downlink` and `uplink` bodies (TOML keys of a scenario link table).
pub fn table(downlink: &str, uplink: &str) -> LinkPair {
    links(&format!("[downlink]\n{downlink}\n[uplink]\n{uplink}\n"))
}

/// Goodput (bit/s) of one kernel TCP connection with congestion control `cc`, sending from
/// the far side to the emulated side for `seconds`: bytes the receiver read by then.
pub fn kernel_tcp_goodput_bps(link: &EmulatedLink, cc: &'static str, seconds: f64) -> f64 {
    use std::io::{Read, Write};
    let far = std::net::SocketAddr::new(link.far_addr().into(), 5201);
    let listener = link
        .run_far(move || std::net::TcpListener::bind(far).expect("listen on the far side"))
        .expect("far side");
    let sender = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().expect("accept");
        set_congestion(&s, cc);
        let chunk = vec![0x5a; 64 * 1024];
        let t0 = std::time::Instant::now();
        while t0.elapsed().as_secs_f64() < seconds + 1.0 {
            if s.write_all(&chunk).is_err() {
                break;
            }
        }
    });
    let got = link
        .run_emulated(move || {
            let mut s = std::net::TcpStream::connect(far).expect("connect across the link");
            let t0 = std::time::Instant::now();
            s.set_read_timeout(Some(std::time::Duration::from_millis(100)))
                .ok();
            let mut buf = vec![0u8; 256 * 1024];
            let mut got = 0u64;
            while t0.elapsed().as_secs_f64() < seconds {
                match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => got += n as u64,
                    Err(_) => {}
                }
            }
            got
        })
        .expect("emulated side");
    sender.join().expect("sender");
    got as f64 * 8.0 / seconds
}

/// The stream transport's TCP with the options of [`STREAM_SIM_KEYS`]: SACK, timestamps,
/// IW10 and a 200 ms minimum RTO, as the simulator's flow it is compared with.
fn linux_like(
    o: adaptnet_runtime::stream::StreamOptions,
) -> adaptnet_runtime::stream::StreamOptions {
    let mut core = o.core;
    core.sack = true;
    core.timestamps = true;
    core.initial_window = adaptnet_core::cc::InitialWindow::Iw10;
    core.rto.min = std::time::Duration::from_millis(200);
    adaptnet_runtime::stream::StreamOptions { core, ..o }
}

/// The simulator's flow keys matching the stream transport of [`stream_goodput_bps`] (its
/// MSS is the runtime's 1400 bytes).
pub const STREAM_SIM_KEYS: &str =
    "sack = true\ntimestamps = true\ninitial_window = \"iw10\"\nmss = 1400\nrto_min_ms = 200";

/// Goodput (bit/s) of one stream-transport connection (core's TCP over UDP, NewReno; the
/// runtime's `StreamEndpoint`) from the far side to the emulated side for `seconds`.
pub fn stream_goodput_bps(link: &EmulatedLink, seconds: f64) -> f64 {
    use adaptnet_runtime::stream::{StreamEndpoint, StreamOptions};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let far = std::net::SocketAddr::new(link.far_addr().into(), 5300);
    let server_sock = link
        .run_far(move || std::net::UdpSocket::bind(far).expect("bind far side"))
        .expect("far side");
    let client_sock = link
        .run_emulated(|| std::net::UdpSocket::bind("0.0.0.0:0").expect("bind emulated side"))
        .expect("emulated side");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let server = StreamEndpoint::from_std(server_sock, linux_like(StreamOptions::server()))
            .expect("server");
        let client = StreamEndpoint::from_std(client_sock, linux_like(StreamOptions::client()))
            .expect("client");
        let mut down = client.connect(far).await.expect("connect across the link");
        let mut up = server.accept().await.expect("accept");
        let deadline = std::time::Duration::from_secs_f64(seconds);
        let writer = tokio::spawn(async move {
            let chunk = vec![0x42; 64 * 1024];
            let t0 = std::time::Instant::now();
            while t0.elapsed() < deadline + std::time::Duration::from_secs(1) {
                if up.write_all(&chunk).await.is_err() {
                    break;
                }
            }
        });
        let t0 = std::time::Instant::now();
        let mut buf = vec![0u8; 256 * 1024];
        let mut got = 0u64;
        while let Some(left) = deadline.checked_sub(t0.elapsed()) {
            match tokio::time::timeout(left, down.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
                Ok(Ok(n)) => got += n as u64,
            }
        }
        writer.abort();
        got as f64 * 8.0 / seconds
    })
}

/// Emulator options with a namespace name no other test (of this or another checkout running
/// at the same time) uses: `h-link-tests-WHAT-PID`. With `$ADAPTNET_LINKEMU_CAPTURE` set, each
/// side's packets are written to `$ADAPTNET_LINKEMU_CAPTURE/WHAT/{emulated,far}.pcap`.
pub fn named(what: &str) -> EmulatorOptions {
    let capture_dir = std::env::var_os("ADAPTNET_LINKEMU_CAPTURE").map(|d| {
        let dir = std::path::PathBuf::from(d).join(what);
        std::fs::create_dir_all(&dir).expect("capture directory");
        dir
    });
    EmulatorOptions {
        name: Some(format!("h-link-tests-{what}-{}", std::process::id())),
        capture_dir,
        ..EmulatorOptions::default()
    }
}

/// Sets the kernel's congestion control of `s` (`TCP_CONGESTION`, linux/tcp.h): `reno`,
/// `cubic`, `bbr`.
pub fn set_congestion(s: &std::net::TcpStream, cc: &str) {
    use std::os::fd::AsRawFd;
    // SAFETY: setsockopt with a valid buffer and its length.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            cc.as_ptr().cast(),
            cc.len() as libc::socklen_t,
        )
    };
    assert_eq!(
        rc,
        0,
        "TCP_CONGESTION {cc}: {}",
        std::io::Error::last_os_error()
    );
}

/// Whether this kernel lets a socket use congestion control `cc` (root may load its module
/// on the way): tried on a fresh, unconnected TCP socket.
pub fn kernel_has(cc: &str) -> bool {
    // SAFETY: a new socket, closed below; setsockopt with a valid buffer and its length.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        if fd < 0 {
            return false;
        }
        let rc = libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            cc.as_ptr().cast(),
            cc.len() as libc::socklen_t,
        );
        libc::close(fd);
        rc == 0
    }
}
