//! A namespace link with the *sender* inside the namespace: the benchmarks that compare ATP
//! with kernel-TCP baselines (`adaptnet bench urgent`, `adaptnet bench table2-netns`) set the
//! baselines' congestion control with the namespace's own
//! `net.ipv4.tcp_congestion_control` (a per-namespace sysctl), which leaves the machine's
//! default — and every other program's TCP — alone. The runtime's NAI-TCP baseline opens its
//! sockets itself and has no `TCP_CONGESTION` option to pass; the namespace default is what
//! its sockets get.
//!
//! The namespace's end of the veth is shaped with `tbf` (sender → receiver); the receivers
//! run in the root namespace. Code that must open the senders' sockets runs on the worker
//! threads of a tokio runtime built inside the namespace ([`SenderLink::runtime`]): threads
//! inherit the network namespace of the thread that creates them, and sockets keep theirs.

use adaptnet_runtime::message::{Endpoint, EndpointOptions, Transport};
use adaptnet_testbed::netns::{self, NetnsLink};
use anyhow::{Context, Result, anyhow};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::process::Command;
use std::time::Instant;
use tokio::sync::mpsc;

/// `tbf`'s queue bound: `latency 100ms`, as the runtime's namespace tests use.
const TBF_LATENCY: &str = "100ms";

/// The link, its shaping and its statistics.
pub(crate) struct SenderLink {
    link: NetnsLink,
}

/// `tc -s` statistics of the shaping qdisc.
#[derive(Clone, Copy, Debug, Default, serde::Deserialize)]
pub(crate) struct QdiscStats {
    /// Packets dropped (queue full).
    pub drops: u64,
    /// Bytes queued now.
    pub backlog: u64,
}

impl SenderLink {
    /// Creates the namespace and veth pair on `10.<subnet>.0.0/24` (names carry `tag`).
    pub(crate) fn create(tag: &str, subnet: u8) -> Result<SenderLink> {
        let link = NetnsLink::create(tag, subnet)
            .map_err(|e| anyhow!("{e} (this benchmark needs root and iproute2)"))?;
        Ok(SenderLink { link })
    }

    /// Shapes the namespace's end (the sender's egress) with
    /// `tc qdisc replace … tbf rate RATE burst BURST latency 100ms`.
    pub(crate) fn shape(&self, rate_bit_per_s: u64, burst_bytes: u32) -> Result<()> {
        self.tc("replace", rate_bit_per_s, burst_bytes)
    }

    /// Changes the rate in place (`tc qdisc change`), keeping the queue.
    pub(crate) fn change_rate(&self, rate_bit_per_s: u64, burst_bytes: u32) -> Result<()> {
        self.tc("change", rate_bit_per_s, burst_bytes)
    }

    fn tc(&self, verb: &str, rate: u64, burst: u32) -> Result<()> {
        let (rate, burst) = (format!("{rate}bit"), format!("{burst}b"));
        netns::run(&[
            "tc",
            "-n",
            &self.link.ns,
            "qdisc",
            verb,
            "dev",
            &self.link.peer,
            "root",
            "tbf",
            "rate",
            &rate,
            "burst",
            &burst,
            "latency",
            TBF_LATENCY,
        ])
        .map_err(|e| anyhow!("{e}"))
    }

    /// Sets the namespace's default TCP congestion control (`reno`, `bbr`, …; a namespace may default only to one in
    /// `net.ipv4.tcp_allowed_congestion_control`).
    pub(crate) fn set_congestion(&self, cc: &str) -> Result<()> {
        let setting = format!("net.ipv4.tcp_congestion_control={cc}");
        netns::run(&[
            "ip",
            "netns",
            "exec",
            &self.link.ns,
            "sysctl",
            "-qw",
            &setting,
        ])
        .map_err(|e| anyhow!("{e}"))
    }

    /// The shaping qdisc's counters (`tc -s -j qdisc show`).
    pub(crate) fn qdisc(&self) -> Result<QdiscStats> {
        let out = Command::new("tc")
            .args(["-s", "-j", "-n", &self.link.ns, "qdisc", "show", "dev"])
            .arg(&self.link.peer)
            .output()
            .context("running tc")?;
        let all: Vec<serde_json::Value> =
            serde_json::from_slice(&out.stdout).context("parsing `tc -s -j` output")?;
        let tbf = all
            .into_iter()
            .find(|q| q.get("kind").and_then(|k| k.as_str()) == Some("tbf"))
            .ok_or_else(|| anyhow!("no tbf qdisc on {}", self.link.peer))?;
        serde_json::from_value(tbf).context("reading the tbf counters")
    }

    /// The receivers' address (root namespace), port 0.
    pub(crate) fn receiver_bind(&self) -> SocketAddr {
        self.link.outside_addr()
    }

    /// The senders' address (inside the namespace), port 0.
    pub(crate) fn sender_bind(&self) -> SocketAddr {
        self.link.inside_addr()
    }

    /// A two-worker tokio runtime whose worker threads live in the namespace: sockets opened
    /// by tasks spawned on it are the sender's. (`block_on`'s own future runs on the calling
    /// thread, in the root namespace: open senders' sockets in spawned tasks.)
    pub(crate) fn runtime(&self) -> Result<tokio::runtime::Runtime> {
        self.link
            .inside(|| {
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
            })
            .map_err(|e| anyhow!("{e}"))?
            .context("starting the async runtime in the namespace")
    }
}

/// The `p`-quantile (0..=1) of sorted `v`, or `None` if empty.
pub(crate) fn quantile<T: Copy>(sorted: &[T], p: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let i = ((sorted.len() - 1) as f64 * p.clamp(0.0, 1.0)).round() as usize;
    sorted.get(i).copied()
}

/// The receiver's socket, bound in the root namespace: bind it on an ordinary thread (not a
/// worker of [`SenderLink::runtime`], whose sockets are the sender's).
pub(crate) enum ReceiverSocket {
    /// ATP's.
    Udp(UdpSocket),
    /// A baseline's.
    Tcp(TcpListener),
}

impl ReceiverSocket {
    /// Binds the socket `transport` receives on.
    pub(crate) fn bind(link: &SenderLink, transport: Transport) -> Result<ReceiverSocket> {
        let at = link.receiver_bind();
        Ok(match transport {
            Transport::Atp => {
                ReceiverSocket::Udp(UdpSocket::bind(at).context("binding the receiver")?)
            }
            _ => ReceiverSocket::Tcp(TcpListener::bind(at).context("binding the receiver")?),
        })
    }
}

/// A receiving endpoint with `options` on `socket`; every whole message's size and arrival
/// time goes to the returned channel, which the caller must drain (a full channel stops the
/// reading, and so the sender).
pub(crate) fn serve(
    socket: ReceiverSocket,
    options: EndpointOptions,
) -> Result<(Endpoint, mpsc::Receiver<(usize, Instant)>)> {
    let server = match socket {
        ReceiverSocket::Udp(s) => Endpoint::from_udp_socket(s, options)?,
        ReceiverSocket::Tcp(l) => Endpoint::from_tcp_listener(l, options)?,
    };
    let (tx, rx) = mpsc::channel(1024);
    let accepting = server.clone();
    tokio::spawn(async move {
        while let Some(conn) = accepting.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                while let Ok(m) = conn.recv().await {
                    if tx.send((m.data.len(), Instant::now())).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    Ok((server, rx))
}
