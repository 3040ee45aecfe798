//! Flows that run side by side over one emulated link, each counting the bytes its receiver
//! read, and a sampler of those counts: what the tests of competing flows share.
//!
//! Every flow sends from the far side to the emulated side (over the link table's downlink)
//! until a deadline; its receiver adds what it reads to a [`Count`].

use adaptnet_linkemu::EmulatedLink;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Bytes a flow's receiver has read so far.
pub type Count = Arc<AtomicU64>;

/// A new zero count.
pub fn count() -> Count {
    Arc::new(AtomicU64::new(0))
}

/// One kernel TCP connection with congestion control `cc` (`reno`, `cubic`, `bbr`) from the
/// far side to the emulated side on `port`, running in background threads until `until`.
pub fn kernel_tcp(link: &EmulatedLink, cc: &'static str, port: u16, until: Instant) -> Count {
    use std::io::{Read, Write};
    let got = count();
    let far = SocketAddr::new(link.far_addr().into(), port);
    let listener = link
        .run_far(move || std::net::TcpListener::bind(far).expect("listen on the far side"))
        .expect("far side");
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().expect("accept");
        super::set_congestion(&s, cc);
        s.set_write_timeout(Some(Duration::from_millis(200))).ok();
        let chunk = vec![0x5a; 64 * 1024];
        while Instant::now() < until {
            match s.write(&chunk) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(_) => break,
            }
        }
    });
    let counter = got.clone();
    link.spawn_emulated(move || {
        let mut s = std::net::TcpStream::connect(far).expect("connect across the link");
        s.set_read_timeout(Some(Duration::from_millis(100))).ok();
        let mut buf = vec![0u8; 256 * 1024];
        while Instant::now() < until {
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    counter.fetch_add(n as u64, Ordering::Relaxed);
                }
                Err(_) => {}
            }
        }
    })
    .expect("emulated side");
    got
}

/// Cumulative byte counts of some flows, taken every `step` until `end_s`.
pub struct Samples {
    /// Seconds since the origin (the link's time zero), per sample.
    pub t: Vec<f64>,
    /// `bytes[i][k]`: flow `i`'s count at sample `k`.
    pub bytes: Vec<Vec<u64>>,
}

impl Samples {
    /// Samples `counts` every `step` until `end_s` seconds after `origin`, calling `each`
    /// with the time after every sample (to drain the link's statistics, or act at a time).
    pub fn take(
        counts: &[&Count],
        origin: Instant,
        step: Duration,
        end_s: f64,
        mut each: impl FnMut(f64),
    ) -> Samples {
        let mut s = Samples {
            t: Vec::new(),
            bytes: vec![Vec::new(); counts.len()],
        };
        loop {
            std::thread::sleep(step);
            let t = origin.elapsed().as_secs_f64();
            if t > end_s {
                return s;
            }
            s.t.push(t);
            for (i, c) in counts.iter().enumerate() {
                s.bytes[i].push(c.load(Ordering::Relaxed));
            }
            each(t);
        }
    }

    /// Flow `i`'s mean rate (bit/s) between the samples nearest `from` and `to` seconds.
    pub fn rate_bps(&self, i: usize, from: f64, to: f64) -> f64 {
        let at = |x: f64| {
            self.t
                .iter()
                .position(|&t| t >= x - 1e-3)
                .unwrap_or(self.t.len() - 1)
        };
        let (a, b) = (at(from), at(to));
        if b <= a {
            return 0.0;
        }
        (self.bytes[i][b] - self.bytes[i][a]) as f64 * 8.0 / (self.t[b] - self.t[a])
    }

    /// Flow `i`'s rate (Mbit/s) in each whole second, for reports.
    pub fn per_second_mbps(&self, i: usize) -> Vec<f64> {
        let first = self.t.first().copied().unwrap_or(0.0).ceil() as usize;
        let last = self.t.last().copied().unwrap_or(0.0).floor() as usize;
        (first..last)
            .map(|s| self.rate_bps(i, s as f64, s as f64 + 1.0) / 1e6)
            .collect()
    }
}

/// Rounds a vector of rates for printing.
pub fn fmt_rates(v: &[f64]) -> String {
    let parts: Vec<String> = v.iter().map(|x| format!("{x:.1}")).collect();
    parts.join(" ")
}

/// A link table whose downlink follows the piecewise trace `steps` (seconds, Mbit/s) with
/// the other downlink keys `down_rest`, and whose uplink is `up`. The trace is written to a
/// temporary file, read, and removed.
pub fn stepped_table(
    name: &str,
    steps: &[(f64, f64)],
    down_rest: &str,
    up: &str,
) -> adaptnet_sim::scenario::link_table::LinkPair {
    let path = std::env::temp_dir().join(format!(
        "adaptnet-linkemu-{name}-{}.trace",
        std::process::id()
    ));
    let text: String = steps
        .iter()
        .map(|(t, mbps)| format!("{t} {}\n", mbps * 1e6 / 8.0))
        .collect();
    std::fs::write(&path, text).expect("write the trace");
    let down = format!(
        "trace = {{ format = \"piecewise\", path = {:?} }}\n{down_rest}",
        path.display().to_string()
    );
    let table = super::table(&down, up);
    std::fs::remove_file(&path).ok();
    table
}

/// `n` streams of the stream transport from one endpoint on the far side (`sender`
/// options) to one on the emulated side (`receiver` options, listening on `port`), each
/// writing as fast as it may until `until`. Call inside a tokio runtime.
pub async fn streams(
    link: &EmulatedLink,
    n: usize,
    sender: adaptnet_runtime::stream::StreamOptions,
    receiver: adaptnet_runtime::stream::StreamOptions,
    port: u16,
    until: Instant,
) -> Vec<Count> {
    use adaptnet_runtime::stream::StreamEndpoint;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let to = SocketAddr::new(link.emulated_addr().into(), port);
    let rx_sock = link
        .run_emulated(move || {
            std::net::UdpSocket::bind(("0.0.0.0", port)).expect("bind emulated side")
        })
        .expect("emulated side");
    let tx_sock = link
        .run_far(|| std::net::UdpSocket::bind("0.0.0.0:0").expect("bind far side"))
        .expect("far side");
    let rx = Arc::new(StreamEndpoint::from_std(rx_sock, receiver).expect("receiver endpoint"));
    let tx = Arc::new(StreamEndpoint::from_std(tx_sock, sender).expect("sender endpoint"));
    let left = move || until.saturating_duration_since(Instant::now());
    let mut counts = Vec::new();
    for _ in 0..n {
        let mut w = tokio::time::timeout(Duration::from_secs(10), tx.connect(to))
            .await
            .expect("connect in time")
            .expect("connect");
        let mut r = tokio::time::timeout(Duration::from_secs(10), rx.accept())
            .await
            .expect("accept in time")
            .expect("accept");
        let tx = tx.clone();
        tokio::spawn(async move {
            let _keep = tx;
            let chunk = vec![7u8; 64 << 10];
            let _ =
                tokio::time::timeout(left(), async { while w.write_all(&chunk).await.is_ok() {} })
                    .await;
        });
        let got = count();
        counts.push(got.clone());
        let rx = rx.clone();
        tokio::spawn(async move {
            let _keep = rx;
            let mut buf = vec![0u8; 64 << 10];
            let _ = tokio::time::timeout(left(), async {
                while let Ok(k) = r.read(&mut buf).await {
                    if k == 0 {
                        break;
                    }
                    got.fetch_add(k as u64, Ordering::Relaxed);
                }
            })
            .await;
        });
    }
    counts
}

/// One TPBA flow (papers/002) from the far side to a receiver on the emulated side listening
/// on `port`, its source writing `adu_bytes`-byte ADUs as fast as the flow takes them until
/// `until`. Each side runs its own runtime on a thread inside its namespace (the sender opens
/// its sockets itself). Returns the ADU bytes received and the sender's statistics at the end.
pub fn tpba(
    link: &EmulatedLink,
    port: u16,
    options: adaptnet_runtime::tpba::TpbaOptions,
    adu_bytes: usize,
    until: Instant,
) -> (
    Count,
    adaptnet_linkemu::netns::InsideThread<adaptnet_runtime::tpba::SenderStats>,
) {
    use adaptnet_runtime::tpba::{TpbaReceiver, TpbaSender};
    let to = SocketAddr::new(link.emulated_addr().into(), port);
    let got = count();
    let counter = got.clone();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let rx_options = options.clone();
    link.spawn_emulated(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let mut rx = TpbaReceiver::bind(to, rx_options).expect("bind the TPBA receiver");
            ready_tx.send(()).expect("the sender waits");
            let left = || until.saturating_duration_since(Instant::now());
            while let Ok(Ok(adu)) = tokio::time::timeout(left(), rx.recv()).await {
                counter.fetch_add(adu.len() as u64, Ordering::Relaxed);
            }
        });
    })
    .expect("emulated side");
    let sender = link
        .spawn_far(move || {
            ready_rx.recv().expect("the receiver is bound");
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let tx = TpbaSender::connect(to, options)
                    .await
                    .expect("connect the TPBA flow");
                let adu = vec![0x33u8; adu_bytes];
                let left = || until.saturating_duration_since(Instant::now());
                let _ = tokio::time::timeout(left(), async {
                    while tx.send(adu.clone(), true).await.is_ok() {}
                })
                .await;
                tx.stats()
            })
        })
        .expect("far side");
    (got, sender)
}
