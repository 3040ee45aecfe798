//! The library API: bring a link up, learn its addresses, run code or commands on either
//! side, read its statistics, tear it down (on drop, too).

use crate::LinkEmuError;
use crate::driver::{Direction, Driver, Side};
use crate::netns::{self, InsideThread, Namespace};
use crate::stats::{LinkReport, SecondStats};
use adaptnet_core::Time;
use adaptnet_sim::link::Link;
use adaptnet_sim::pcap::PcapStream;
use adaptnet_sim::scenario::link_table::LinkPair;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc::{Receiver, sync_channel};
use std::time::{Duration, Instant};

/// Per-second reports kept for a reader who falls behind; older ones are dropped and counted.
pub const STATS_BACKLOG_SECONDS: usize = 64;
/// Name of the TUN device on the emulated side (inside its namespace).
pub const EMULATED_DEV: &str = "adl-emu";
/// Name of the TUN device on the far side when the far side is a namespace.
pub const FAR_DEV: &str = "adl-far";

/// Where the far end of the link is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FarSide {
    /// A namespace of its own (`NAME-far`), so the link is all there is between the two
    /// sides: what tests and `adaptnet link up` use.
    #[default]
    Namespace,
    /// This host's own namespace (a TUN device `adlhN` in it), as Mahimahi's shells: servers
    /// on the host answer the emulated side.
    Host,
}

/// How to run the emulator (the link itself is a [`LinkPair`]).
#[derive(Clone, Debug)]
pub struct EmulatorOptions {
    /// Name of the emulated side's namespace (the far side's is `NAME-far`); default
    /// `adl<pid>-<n>`.
    pub name: Option<String>,
    /// Where the far end is.
    pub far: FarSide,
    /// The link's subnet `10.250.N.0/24` (far side `.1`, emulated side `.2`); default 0
    /// between namespaces, the first free one when the far side is the host.
    pub subnet: Option<u8>,
    /// MTU of both devices, bytes.
    pub mtu_bytes: u16,
    /// Write `emulated.pcap` and `far.pcap` here: what each side's device sent and received.
    pub capture_dir: Option<PathBuf>,
    /// Write the per-packet schedule (CSV) here.
    pub schedule_log: Option<PathBuf>,
    /// A packet handed over later than this after its model time counts as not served in
    /// time.
    pub late_bound: Duration,
    /// Packets on the link (queued or propagating) per direction before the emulator refuses
    /// more (counted as `dropped_overload`): bounds its memory on a long, fast delay line.
    pub max_in_flight_packets: usize,
    /// Within this long of a deadline the driver does not sleep (trading CPU for exactness):
    /// a sleeping thread's wake-up takes tens of µs, a spinning one's about one. The default,
    /// 100 µs, costs at most that much CPU per deadline.
    pub spin: Duration,
    /// Run the emulator thread with real-time (SCHED_FIFO) priority when allowed, so other
    /// work on the machine does not delay its wake-ups.
    pub realtime: bool,
    /// Open both devices with offloads (`IFF_VNET_HDR`, TSO and USO): the kernel hands over
    /// TCP and `UDP_SEGMENT` bursts as one super-packet per read, which the emulator splits
    /// into MTU-sized packets for the model, and packets due together are written as GRO
    /// batches. The model sees the same packets either way; off, each packet costs one
    /// `read(2)` and one `write(2)`.
    pub offload: bool,
}

impl Default for EmulatorOptions {
    fn default() -> Self {
        EmulatorOptions {
            name: None,
            far: FarSide::Namespace,
            subnet: None,
            mtu_bytes: 1500,
            capture_dir: None,
            schedule_log: None,
            late_bound: Duration::from_millis(1),
            max_in_flight_packets: 100_000,
            spin: Duration::from_micros(100),
            realtime: true,
            offload: true,
        }
    }
}

/// An emulated link between two network namespaces (or a namespace and this host), running
/// until dropped or [`EmulatedLink::shutdown`]. Dropping it stops the emulator and deletes
/// the namespaces and devices.
///
/// ```no_run
/// use adaptnet_linkemu::{EmulatedLink, EmulatorOptions};
/// use adaptnet_sim::scenario::link_table::LinkPair;
/// let links = LinkPair::parse("[link]\nbandwidth_mbps = 10\ndelay_ms = 20\n", "inline", ".".as_ref())?;
/// let link = EmulatedLink::up(links, EmulatorOptions::default())?;
/// let far = std::net::SocketAddr::new(link.far_addr().into(), 9000);
/// let server = link.run_far(move || std::net::UdpSocket::bind(far))??;
/// // Sockets opened on the emulated side send across the link.
/// let client = link.run_emulated(|| std::net::UdpSocket::bind("0.0.0.0:0"))??;
/// client.send_to(b"hello", far)?;
/// let report = link.shutdown()?; // or drop it: the namespaces go either way
/// # drop(server);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct EmulatedLink {
    driver: Option<std::thread::JoinHandle<Result<LinkReport, LinkEmuError>>>,
    stop: Arc<AtomicBool>,
    stats: Receiver<SecondStats>,
    emulated: Namespace,
    far: Option<Namespace>,
    subnet: u8,
    /// The far side's device name.
    far_dev: String,
    /// Time zero of the link model (and of its traces).
    started: Instant,
}

impl std::fmt::Debug for EmulatedLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmulatedLink")
            .field("emulated", &self.emulated.name())
            .field("far", &self.far.as_ref().map(Namespace::name))
            .field("subnet", &self.subnet)
            .finish()
    }
}

/// Links made by this process, for default names.
static LINKS_MADE: AtomicU32 = AtomicU32::new(0);

impl EmulatedLink {
    /// Creates the namespaces and devices and starts the emulator.
    pub fn up(links: LinkPair, opts: EmulatorOptions) -> Result<EmulatedLink, LinkEmuError> {
        netns::check_prerequisites()?;
        let name = opts.name.clone().unwrap_or_else(|| {
            let n = LINKS_MADE.fetch_add(1, Ordering::Relaxed);
            format!("adl{}-{n}", std::process::id())
        });
        let far_name = format!("{name}-far");
        if netns::exists(&far_name) {
            return Err(LinkEmuError::Exists(far_name));
        }
        let emulated = Namespace::create(&name)?;
        let (far, subnet) = match opts.far {
            FarSide::Namespace => (
                Some(Namespace::create(&far_name)?),
                opts.subnet.unwrap_or(0),
            ),
            FarSide::Host => (None, opts.subnet.map_or_else(netns::free_host_subnet, Ok)?),
        };
        let emulated_ip = Ipv4Addr::new(10, 250, subnet, 2);
        let far_ip = Ipv4Addr::new(10, 250, subnet, 1);
        let mtu = opts.mtu_bytes;
        let offload = opts.offload;
        let emu_dev =
            emulated.run(move || netns::open_tun(EMULATED_DEV, mtu, emulated_ip, offload))??;
        netns::run(
            "ip",
            &["-n", &name, "route", "add", "default", "dev", EMULATED_DEV],
        )?;
        let far_dev_name = match far {
            Some(_) => FAR_DEV.to_string(),
            None => format!("adlh{subnet}"),
        };
        let far_dev = match &far {
            Some(ns) => {
                let dev = far_dev_name.clone();
                ns.run(move || netns::open_tun(&dev, mtu, far_ip, offload))??
            }
            None => netns::open_tun(&far_dev_name, mtu, far_ip, offload)?,
        };
        let capture = |file: &str| -> Result<Option<PcapStream<_>>, LinkEmuError> {
            let Some(dir) = &opts.capture_dir else {
                return Ok(None);
            };
            let path = dir.join(file);
            let err = |source| LinkEmuError::File {
                path: path.display().to_string(),
                source,
            };
            std::fs::create_dir_all(dir).map_err(err)?;
            let f = std::fs::File::create(&path).map_err(err)?;
            PcapStream::new(std::io::BufWriter::with_capacity(1 << 16, f))
                .map(Some)
                .map_err(err)
        };
        let sides = [
            Side {
                dev: emu_dev,
                name: format!("{name}/{EMULATED_DEV}"),
                pcap: capture("emulated.pcap")?,
            },
            Side {
                dev: far_dev,
                name: match &far {
                    Some(ns) => format!("{}/{far_dev_name}", ns.name()),
                    None => far_dev_name.clone(),
                },
                pcap: capture("far.pcap")?,
            },
        ];
        let log = match &opts.schedule_log {
            Some(path) => Some(crate::schedule_log::ScheduleLog::create(path)?),
            None => None,
        };
        let bound = opts.late_bound;
        let dirs = [
            Direction::new("uplink", Link::new(links.uplink, links.seed), bound),
            Direction::new(
                "downlink",
                Link::new(links.downlink, links.seed.wrapping_add(1)),
                bound,
            ),
        ];
        let (tx, stats) = sync_channel(STATS_BACKLOG_SECONDS);
        let stop = Arc::new(AtomicBool::new(false));
        let pcap_epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| Time::from_nanos(u64::try_from(d.as_nanos()).unwrap_or(0)))
            .unwrap_or(Time::ZERO);
        let started = Instant::now();
        let driver = Driver {
            sides,
            dirs,
            start: started,
            stop: Arc::clone(&stop),
            stats: tx,
            log,
            max_in_flight_packets: opts.max_in_flight_packets,
            mtu,
            spin: opts.spin,
            stats_dropped: 0,
            pcap_epoch,
            realtime: opts.realtime,
            budget: Default::default(),
        };
        let handle = std::thread::Builder::new()
            .name("adaptnet-link".into())
            .spawn(move || driver.run())
            .map_err(|e| LinkEmuError::Thread(format!("starting the emulator: {e}")))?;
        Ok(EmulatedLink {
            driver: Some(handle),
            stop,
            stats,
            emulated,
            far,
            subnet,
            far_dev: far_dev_name,
            started,
        })
    }

    /// The instant that is time zero of the link model: traces and outages count from it.
    pub fn started_at(&self) -> Instant {
        self.started
    }

    /// The emulated side's address (`10.250.N.2`).
    pub fn emulated_addr(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 250, self.subnet, 2)
    }

    /// The far side's address (`10.250.N.1`): what `ADAPTNET_LINK_PEER` holds.
    pub fn far_addr(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 250, self.subnet, 1)
    }

    /// The emulated side's namespace.
    pub fn emulated_ns(&self) -> &str {
        self.emulated.name()
    }

    /// The far side's namespace (`None`: the far side is this host).
    pub fn far_ns(&self) -> Option<&str> {
        self.far.as_ref().map(Namespace::name)
    }

    /// Runs `f` on a thread on the emulated side and waits for its result.
    pub fn run_emulated<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, LinkEmuError> {
        self.emulated.run(f)
    }

    /// Runs `f` on a thread on the emulated side.
    pub fn spawn_emulated<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<InsideThread<T>, LinkEmuError> {
        self.emulated.spawn(f)
    }

    /// Runs `f` on a thread on the far side and waits for its result.
    pub fn run_far<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, LinkEmuError> {
        match &self.far {
            Some(ns) => ns.run(f),
            None => std::thread::spawn(f)
                .join()
                .map_err(|_| LinkEmuError::Thread("a far-side thread panicked".into())),
        }
    }

    /// Runs `f` on a thread on the far side (a namespace link only; on a host link, spawn an
    /// ordinary thread).
    pub fn spawn_far<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<InsideThread<T>, LinkEmuError> {
        match &self.far {
            Some(ns) => ns.spawn(f),
            None => Err(LinkEmuError::Thread(
                "the far side is this host: spawn an ordinary thread".into(),
            )),
        }
    }

    /// A command that runs `program` on the emulated side, with `ADAPTNET_LINK_PEER` (the far
    /// side's address) and `ADAPTNET_LINK_ADDR` (its own) set.
    pub fn command_emulated(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = self.emulated.command(program);
        c.env("ADAPTNET_LINK_PEER", self.far_addr().to_string())
            .env("ADAPTNET_LINK_ADDR", self.emulated_addr().to_string());
        c
    }

    /// A command that runs `program` on the far side, with `ADAPTNET_LINK_PEER` (the emulated
    /// side's address) and `ADAPTNET_LINK_ADDR` (its own) set.
    pub fn command_far(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = match &self.far {
            Some(ns) => ns.command(program),
            None => Command::new(program),
        };
        c.env("ADAPTNET_LINK_PEER", self.emulated_addr().to_string())
            .env("ADAPTNET_LINK_ADDR", self.far_addr().to_string());
        c
    }

    /// The next per-second report, waiting up to `timeout`.
    pub fn next_second(&self, timeout: Duration) -> Option<SecondStats> {
        self.stats.recv_timeout(timeout).ok()
    }

    /// Whether the emulator thread has stopped on its own (an error; `shutdown` says which).
    pub fn has_failed(&self) -> bool {
        self.driver.as_ref().is_none_or(|d| d.is_finished())
    }

    /// Stops the emulator, deletes the namespaces and devices, and reports the run.
    pub fn shutdown(mut self) -> Result<LinkReport, LinkEmuError> {
        self.stop_driver()
            .unwrap_or_else(|| Err(LinkEmuError::Thread("the emulator already stopped".into())))
    }

    fn stop_driver(&mut self) -> Option<Result<LinkReport, LinkEmuError>> {
        let handle = self.driver.take()?;
        // The devices' counters, while they still exist (they go with the driver's fds).
        let up = netns::tx_dropped(Some(self.emulated.name()), EMULATED_DEV).unwrap_or(0);
        let down = netns::tx_dropped(self.far_ns(), &self.far_dev).unwrap_or(0);
        self.stop.store(true, Ordering::Relaxed);
        Some(
            handle
                .join()
                .unwrap_or_else(|_| {
                    Err(LinkEmuError::Thread("the emulator thread panicked".into()))
                })
                .map(|mut r| {
                    r.uplink.ingress_dropped = up;
                    r.downlink.ingress_dropped = down;
                    r
                }),
        )
    }
}

impl Drop for EmulatedLink {
    fn drop(&mut self) {
        // The devices close with the driver; the namespaces go when their fields drop.
        let _ = self.stop_driver();
    }
}
