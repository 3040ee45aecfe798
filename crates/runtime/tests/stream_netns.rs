//! Two hosts on one machine: the test runs stream senders in the root network namespace and
//! their receivers in a new namespace joined by a veth pair, with the sender's side shaped by a
//! `tbf` qdisc. Needs root, `ip` and `tc`; where they are missing the tests say so loudly and
//! pass — except under `CI=true`, where a skip is a failure (CI runs as root).

use adaptnet_runtime::stream::{StreamConn, StreamEndpoint, StreamOptions, jain_index};
use std::net::{SocketAddr, UdpSocket};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Runs a command; returns whether it succeeded (stderr shown on failure).
fn sh(args: &[&str]) -> bool {
    match Command::new(args[0]).args(&args[1..]).output() {
        Ok(o) if o.status.success() => true,
        Ok(o) => {
            eprintln!("{args:?}: {}", String::from_utf8_lossy(&o.stderr).trim());
            false
        }
        Err(e) => {
            eprintln!("{args:?}: {e}");
            false
        }
    }
}

/// A namespace `ns` with `peer` (at `b_ip`) linked by veth to `host` (at `a_ip`) in the root
/// namespace. Dropping it deletes the namespace (and so the veth pair), even on failure.
struct Link {
    ns: String,
    host: String,
    a_ip: String,
    b_ip: String,
}

impl Link {
    /// Sets up the link, or `None` (after saying why) where this machine cannot.
    fn new(tag: &str, subnet: u8) -> Option<Link> {
        let skip = |why: &str| {
            let msg = format!("SKIPPED netns test {tag}: {why}");
            eprintln!("\n*** {msg} ***\n");
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{msg} (CI must run the namespace tests)"
            );
            None
        };
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return skip("not root");
        }
        if !sh(&["ip", "-V"]) || !sh(&["tc", "-V"]) {
            return skip("ip/tc (iproute2) not installed");
        }
        let id = std::process::id() % 10_000;
        let link = Link {
            ns: format!("adn{tag}{id}"),
            host: format!("adh{tag}{id}"),
            a_ip: format!("10.{subnet}.0.1"),
            b_ip: format!("10.{subnet}.0.2"),
        };
        let peer = format!("adp{tag}{id}");
        let ok = sh(&["ip", "netns", "add", &link.ns])
            && sh(&[
                "ip", "link", "add", &link.host, "type", "veth", "peer", "name", &peer,
            ])
            && sh(&["ip", "link", "set", &peer, "netns", &link.ns])
            && sh(&[
                "ip",
                "addr",
                "add",
                &format!("{}/24", link.a_ip),
                "dev",
                &link.host,
            ])
            && sh(&["ip", "link", "set", &link.host, "up"])
            && sh(&[
                "ip",
                "-n",
                &link.ns,
                "addr",
                "add",
                &format!("{}/24", link.b_ip),
                "dev",
                &peer,
            ])
            && sh(&["ip", "-n", &link.ns, "link", "set", &peer, "up"])
            && sh(&["ip", "-n", &link.ns, "link", "set", "lo", "up"]);
        if !ok {
            drop(link);
            return skip("could not create the namespace and veth pair");
        }
        Some(link)
    }

    /// Shapes the host side (sender → receiver) to `rate` with `tc qdisc replace … tbf`.
    fn shape(&self, rate: &str) {
        assert!(
            sh(&[
                "tc", "qdisc", "replace", "dev", &self.host, "root", "tbf", "rate", rate, "burst",
                "16kb", "latency", "100ms",
            ]),
            "tc tbf on {}",
            self.host
        );
    }

    /// Runs `make` on a thread of our own that entered the namespace: a socket it creates
    /// stays in the namespace after the thread ends; the rest of the process stays outside.
    fn inside<T: Send + 'static>(&self, make: impl FnOnce(SocketAddr) -> T + Send + 'static) -> T {
        let path = format!("/var/run/netns/{}", self.ns);
        let addr: SocketAddr = format!("{}:0", self.b_ip).parse().expect("address");
        std::thread::spawn(move || {
            let f = std::fs::File::open(&path).expect("namespace file");
            use std::os::fd::AsRawFd;
            // SAFETY: setns on a namespace fd for this thread only.
            let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
            make(addr)
        })
        .join()
        .expect("namespace thread")
    }

    /// A UDP socket bound inside the namespace, at `b_ip:0`.
    fn socket_inside(&self) -> UdpSocket {
        self.inside(|addr| UdpSocket::bind(addr).expect("bind inside the namespace"))
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        sh(&["ip", "netns", "del", &self.ns]);
        // The veth pair goes with the namespace; delete the host end too in case it did not.
        let _ = Command::new("ip")
            .args(["link", "del", &self.host])
            .output();
    }
}

/// Runs `n` streams from the root namespace to the namespace for `secs` seconds and returns
/// each stream's goodput (bytes/s) measured after the first second (slow start excluded).
async fn run_streams(link: &Link, n: usize, client: StreamOptions, secs: u64) -> Vec<f64> {
    let server =
        StreamEndpoint::from_std(link.socket_inside(), StreamOptions::server()).expect("server");
    let bind: SocketAddr = format!("{}:0", link.a_ip).parse().expect("address");
    let client = StreamEndpoint::bind(bind, client).expect("client");
    let mut conns: Vec<StreamConn> = Vec::new();
    for _ in 0..n {
        conns.push(
            tokio::time::timeout(Duration::from_secs(10), client.connect(server.local_addr()))
                .await
                .expect("connect in time")
                .expect("connect"),
        );
    }
    let mut tasks = Vec::new();
    let mut counters = Vec::new();
    for mut c in conns {
        tasks.push(tokio::spawn(async move {
            let chunk = vec![7u8; 64 << 10];
            while c.write_all(&chunk).await.is_ok() {}
        }));
        let mut s = tokio::time::timeout(Duration::from_secs(10), server.accept())
            .await
            .expect("accept in time")
            .expect("accept");
        let count = Arc::new(AtomicU64::new(0));
        counters.push(count.clone());
        tasks.push(tokio::spawn(async move {
            let mut buf = vec![0u8; 64 << 10];
            while let Ok(k) = s.read(&mut buf).await {
                if k == 0 {
                    break;
                }
                count.fetch_add(k as u64, Ordering::Relaxed);
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let start: Vec<u64> = counters.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    eprintln!("bytes after 1 s: {start:?}");
    tokio::time::sleep(Duration::from_secs(secs - 1)).await;
    let rates = counters
        .iter()
        .zip(start)
        .map(|(c, s)| (c.load(Ordering::Relaxed) - s) as f64 / (secs - 1) as f64)
        .collect();
    for t in tasks {
        t.abort();
    }
    rates
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "KNOWN FAILURE: CM-delegated streams stall after ~0.5 MB on the tbf link (see EXPERIMENTS.md, runtime stream note); run with --ignored"]
async fn two_cm_streams_share_a_shaped_link_fairly_and_fully() {
    let Some(link) = Link::new("sc", 81) else {
        return;
    };
    link.shape("10mbit");
    let one = run_streams(&link, 1, StreamOptions::client(), 8).await;
    let r1 = one[0];
    let two = run_streams(&link, 2, StreamOptions::client().with_cm(), 8).await;
    let (a, b) = (two[0], two[1]);
    let jain = jain_index(&[a, b]);
    let err = ((a + b) - r1).abs() / r1;
    println!(
        "stream over tbf 10 Mbit/s: one stream R1 = {:.2} Mbit/s; two under one CM: a = {:.2}, \
         b = {:.2}, sum = {:.2} Mbit/s; Jain = {jain:.4}; |a+b-R1|/R1 = {err:.4}",
        r1 * 8e-6,
        a * 8e-6,
        b * 8e-6,
        (a + b) * 8e-6
    );
    assert!(r1 > 0.5e6, "one stream got {r1} B/s");
    assert!(jain >= 0.95, "Jain {jain} < 0.95 (a = {a}, b = {b})");
    assert!(err <= 0.10, "sum {} vs one stream {r1}: {err}", a + b);
}
