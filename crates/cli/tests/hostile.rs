//! `adaptnet serve` against hostile and careless peers (loopback): thousands of idle TCP
//! connections on both TCP listeners while the server runs out of file descriptors
//! (`RLIMIT_NOFILE` lowered on the server process), garbage datagrams and garbage bytes on
//! every port, connections that say nothing. Afterwards the server still accepts and serves
//! on every transport, its resident memory is back within 20 % of where it started, it
//! logged the exhaustion, and it prints its summary on SIGTERM.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::process::Command;
use std::time::{Duration, Instant};
use support::{Server, json_of};

/// The server's descriptor limit: well under the connections the flood opens.
const SERVER_NOFILE: u64 = 1024;
/// Idle connections opened to each of TCP P and TCP P+1.
const FLOOD_PER_PORT: usize = 1500;
/// Idle timeout given to the server, seconds.
const IDLE_S: u64 = 3;

fn set_nofile(limit: u64) -> std::io::Result<()> {
    let lim = libc::rlimit {
        rlim_cur: limit,
        rlim_max: limit,
    };
    // SAFETY: setrlimit reads `lim`; it is async-signal-safe (used between fork and exec).
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Raises this process's descriptor limit to its hard limit (the flood needs thousands).
fn raise_own_nofile() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write `lim` only.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
    }
    lim.rlim_cur
}

/// Opens `n` TCP connections to `to` at once; those that connect within 3 s are returned
/// (a server out of descriptors stops taking them from its backlog, which then fills).
fn flood(to: SocketAddr, n: usize) -> Vec<std::net::TcpStream> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..n {
            set.spawn(tokio::time::timeout(
                Duration::from_secs(3),
                tokio::net::TcpStream::connect(to),
            ));
        }
        let mut out = Vec::new();
        while let Some(r) = set.join_next().await {
            if let Ok(Ok(Ok(s))) = r
                && let Ok(s) = s.into_std()
            {
                out.push(s);
            }
        }
        out
    })
}

/// A deterministic byte soup.
fn garbage(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// The server still serves every transport: kernel TCP and the stream transport to P+1,
/// ATP to UDP P (bulk messages), a NAI-TCP message workload to TCP P.
fn serves_everything(server: &Server, when: &str) {
    let to = server.to();
    for transport in ["tcp", "stream", "atp"] {
        let r = json_of(
            &format!("{when}: bulk {transport}"),
            &support::bulk(&to, transport, &["-t", "2", "--json"]),
        );
        let bytes: u64 = r["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|f| f["bytes"].as_u64().unwrap_or(0))
            .sum();
        assert!(bytes > 0, "{when}: bulk {transport}: {r}");
    }
    let r = json_of(
        &format!("{when}: send nai-tcp"),
        &support::send(&to, "nai-tcp", &["--json"]),
    );
    assert!(
        r["delivered_bytes"].as_u64().unwrap_or(0) > 0,
        "{when}: send nai-tcp: {r}"
    );
}

#[test]
fn serve_outlasts_descriptor_exhaustion_idle_floods_and_garbage() {
    let own = raise_own_nofile();
    if own < 2 * FLOOD_PER_PORT as u64 + 256 {
        eprintln!(
            "SKIPPED: this process may open {own} descriptors, the flood needs {}",
            2 * FLOOD_PER_PORT + 256
        );
        return;
    }
    let idle = IDLE_S.to_string();
    let mut server = Server::start(
        "hostile",
        &["--idle-timeout-s", &idle],
        |cmd: &mut Command| {
            use std::os::unix::process::CommandExt;
            // SAFETY: only setrlimit runs between fork and exec.
            unsafe {
                cmd.pre_exec(|| set_nofile(SERVER_NOFILE));
            }
        },
    );
    let fresh_kb = server.rss_kb();
    // Where it starts: after serving one client of each kind (buffers and tables a serving
    // process keeps).
    serves_everything(&server, "before");
    std::thread::sleep(Duration::from_millis(1500));
    let start_kb = server.rss_kb();

    // Thousands of idle connections on both TCP listeners, more than the server has
    // descriptors: its accept loops run into EMFILE.
    let p = server.addr.port();
    let naitcp = SocketAddr::new(server.addr.ip(), p);
    let sink = SocketAddr::new(server.addr.ip(), p + 1);
    let mut held = flood(naitcp, FLOOD_PER_PORT);
    held.extend(flood(sink, FLOOD_PER_PORT));
    std::thread::sleep(Duration::from_secs(1));
    let peak_kb = server.rss_kb();
    eprintln!(
        "idle connections held: {} of {}; server RSS fresh {fresh_kb} KB, start {start_kb} KB, \
         with the flood {peak_kb} KB",
        held.len(),
        2 * FLOOD_PER_PORT
    );
    assert!(
        held.len() >= SERVER_NOFILE as usize,
        "the flood got at least as many connections as the server has descriptors"
    );

    // Garbage on every port: datagrams to UDP P and P+1, bytes on some TCP connections.
    let udp = UdpSocket::bind("127.0.0.1:0").expect("udp");
    for i in 0..300u64 {
        let len = 1 + (i as usize * 37) % 1400;
        let _ = udp.send_to(&garbage(i, len), naitcp);
        let _ = udp.send_to(&garbage(i + 1000, len), sink);
    }
    for (i, s) in held.iter_mut().enumerate().step_by(20) {
        let _ = s.write_all(&garbage(i as u64, 1024));
    }
    drop(held);
    assert!(server.is_running(), "serve survived: {}", server.stderr());

    // The memory the flood took is given back (at the server's next second), and every
    // transport works again.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut after_kb = server.rss_kb();
    while after_kb * 5 > start_kb * 6 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
        after_kb = server.rss_kb();
    }
    eprintln!("server RSS after the flood closed: {after_kb} KB (start {start_kb} KB)");
    assert!(
        after_kb * 5 <= start_kb * 6,
        "RSS back within 20 %: start {start_kb} KB, peak {peak_kb} KB, after {after_kb} KB"
    );
    serves_everything(&server, "after");

    // Careless peers: connections that say nothing are closed at the idle timeout.
    let quiet: Vec<TcpStream> = [naitcp, sink]
        .iter()
        .flat_map(|&a| (0..5).map(move |_| TcpStream::connect(a).expect("connect")))
        .collect();
    for mut s in quiet {
        s.set_read_timeout(Some(Duration::from_secs(IDLE_S * 5)))
            .expect("timeout");
        let mut b = [0u8; 16];
        match s.read(&mut b) {
            Ok(0) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            other => panic!("an idle connection was closed by the server: {other:?}"),
        }
    }

    // The descriptors ran out (at least one accept loop says so; which ones meet EMFILE
    // depends on how the two loops interleave, since the kernel completes every handshake
    // of the flood before either accepts), and both listeners served afterwards (above).
    let log = server.stderr();
    let sink_logged = log.contains("TCP bulk sink: accepting failed");
    let naitcp_logged = log.contains("accepting a TCP connection failed");
    eprintln!("exhaustion logged by: TCP sink {sink_logged}, NAI-TCP listener {naitcp_logged}");
    assert!(
        sink_logged || naitcp_logged,
        "an accept loop logged the exhaustion: {log}"
    );
    let (status, summary) = server.stop_with(libc::SIGTERM);
    assert!(status.success(), "{status:?}");
    assert!(summary.contains("stopped (SIGTERM)"), "{summary}");
    assert!(
        !sink_logged || !summary.contains(" 0 failed accepts on the TCP sink"),
        "the exhaustion is counted: {summary}"
    );
}
