//! The model driver: one thread moves packets between the two TUN devices through two
//! [`Link`]s (uplink and downlink), passing in the time since the link came up.
//!
//! Each turn of the loop: read what the devices hold (about [`READ_BATCH`] packets per
//! device, so neither direction starves the other; with offloads a read brings a whole GSO
//! super-packet, split into its packets) and offer each packet to its direction's link at the
//! time it was read; advance both links to now and write every packet the model has
//! delivered by now to the other device (with offloads in GRO batches), measuring how late it
//! is; then sleep in `ppoll` until a device is readable or the earliest deadline (the links'
//! `poll_timeout`, the next per-second report). The thread asks for 1 ns timer slack, so the
//! kernel does not round its wake-ups up by the default 50 µs; within `spin` of a deadline it
//! does not sleep at all.

use crate::LinkEmuError;
use crate::device_io::{Handed, Read, Reader, WRITE_BATCH, Writer};
use crate::lateness::Lateness;
use crate::packet::{HEADROOM, IpPacket};
use crate::schedule_log::{Fate, ScheduleLog};
use crate::stats::{DirectionReport, DirectionSecond, LinkReport, SecondStats};
use adaptnet_core::Time;
use adaptnet_sim::link::{DropReason, Link, LinkStats};
use adaptnet_sim::pcap::PcapStream;
use std::io::BufWriter;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::time::{Duration, Instant};

/// Packets read from one device per turn of the loop, at least (a read brings one packet,
/// or with offloads one super-packet of up to 64 KiB, which is read whole): what is read
/// waits for the turn's writes, so this bounds how late a busy link's packets get.
pub(crate) const READ_BATCH: usize = 64;
/// Longest sleep, so a stop request is seen within this long.
const MAX_SLEEP: Duration = Duration::from_millis(50);
/// SCHED_FIFO priority of the driver thread when it runs in real time (1-99): low, below the
/// kernel's threaded interrupt handlers (50), above every ordinary thread.
const REALTIME_PRIORITY: libc::c_int = 10;

/// One side's device and its capture.
pub(crate) struct Side {
    pub dev: tun_rs::SyncDevice,
    pub name: String,
    pub pcap: Option<PcapStream<BufWriter<std::fs::File>>>,
}

/// One direction: its link model and counters.
pub(crate) struct Direction {
    pub name: &'static str,
    pub link: Link<IpPacket>,
    next_id: u64,
    in_flight: usize,
    overload: u64,
    write_errors: u64,
    unsplittable: u64,
    reads: u64,
    lateness: Lateness,
    second_lateness: Lateness,
    /// The model's counters and our own at the last report.
    last: (LinkStats, u64),
}

impl Direction {
    pub(crate) fn new(name: &'static str, link: Link<IpPacket>, bound: Duration) -> Direction {
        Direction {
            name,
            link,
            next_id: 0,
            in_flight: 0,
            overload: 0,
            write_errors: 0,
            unsplittable: 0,
            reads: 0,
            lateness: Lateness::new(bound),
            second_lateness: Lateness::new(bound),
            last: (LinkStats::default(), 0),
        }
    }
}

/// Everything the thread owns.
pub(crate) struct Driver {
    pub sides: [Side; 2],
    pub dirs: [Direction; 2],
    pub start: Instant,
    pub stop: Arc<AtomicBool>,
    pub stats: SyncSender<SecondStats>,
    pub log: Option<ScheduleLog>,
    pub max_in_flight_packets: usize,
    /// The devices' MTU: the size of the read buffers.
    pub mtu: u16,
    pub spin: Duration,
    pub stats_dropped: u64,
    /// Wall-clock time (since 1970) when the link came up: captures carry real timestamps.
    pub pcap_epoch: Time,
    /// Ask for SCHED_FIFO; after start-up, whether it was granted.
    pub realtime: bool,
    /// How much of the time the loop may spend spinning.
    pub budget: SpinBudget,
}

/// Spinning is limited to [`SPIN_SHARE`] of every [`SPIN_WINDOW`]. A SCHED_FIFO thread that
/// never sleeps is throttled by the kernel for the rest of each second once it has used 95 %
/// of it (`sched_rt_runtime_us`): a 50-ms stall, measured at 300 Mbit/s before this bound,
/// where a deadline every 40 µs kept the loop spinning without end.
#[derive(Debug, Default)]
pub(crate) struct SpinBudget {
    window_start: Time,
    spent: Duration,
}

/// The window of the spin budget.
const SPIN_WINDOW: Duration = Duration::from_millis(100);
/// The share of each window that may be spent spinning.
const SPIN_SHARE: f64 = 0.3;

impl SpinBudget {
    fn roll(&mut self, now: Time) {
        if now >= self.window_start + SPIN_WINDOW {
            self.window_start = now;
            self.spent = Duration::ZERO;
        }
    }

    fn allows(&mut self, now: Time) -> bool {
        self.roll(now);
        self.spent < SPIN_WINDOW.mul_f64(SPIN_SHARE)
    }

    fn spend(&mut self, at: Time, d: Duration) {
        self.roll(at);
        self.spent += d;
    }
}

fn since(start: Instant) -> Time {
    Time::from_nanos(u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX))
}

/// `t` as a duration since the link came up.
fn since_zero(t: Time) -> Duration {
    Duration::from_nanos(t.as_nanos())
}

fn pcap_err(side: &Side, source: std::io::Error) -> LinkEmuError {
    LinkEmuError::File {
        path: format!("capture of {}", side.name),
        source,
    }
}

impl Driver {
    /// Runs until `stop` is set; then flushes captures and the log and reports.
    pub(crate) fn run(mut self) -> Result<LinkReport, LinkEmuError> {
        // SAFETY: prctl(PR_SET_TIMERSLACK) only changes this thread's timer slack.
        unsafe {
            libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
        }
        if self.realtime {
            // A real-time thread is woken ahead of every ordinary one: on a machine busy with
            // other work this is what keeps wake-ups within tens of µs instead of ms. The
            // kernel's RT throttling still leaves ordinary threads their share should this
            // loop ever spin. Failure (no CAP_SYS_NICE) leaves the thread as it was.
            let param = libc::sched_param {
                sched_priority: REALTIME_PRIORITY,
            };
            // SAFETY: sched_setscheduler on this thread (tid 0) with a valid parameter.
            self.realtime = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0;
        }
        let mut reader = Reader::new(self.mtu);
        let mut writer = Writer::default();
        let mut next_report = Time::from_secs(1);
        while !self.stop.load(Ordering::Relaxed) {
            {
                let ctx = Ctx {
                    start: self.start,
                    pcap_epoch: self.pcap_epoch,
                    max_in_flight_packets: self.max_in_flight_packets,
                };
                let [emulated, far] = &mut self.sides;
                let [up, down] = &mut self.dirs;
                ingest(&ctx, up, emulated, &mut self.log, &mut reader)?;
                ingest(&ctx, down, far, &mut self.log, &mut reader)?;
                release(&ctx, up, far, &mut writer, &mut self.log)?;
                release(&ctx, down, emulated, &mut writer, &mut self.log)?;
            }
            let now = since(self.start);
            if now >= next_report {
                self.report(next_report, now);
                next_report += Duration::from_secs(1);
            }
            let deadline = self
                .dirs
                .iter()
                .filter_map(|d| d.link.poll_timeout())
                .fold(next_report, Time::min);
            self.wait(deadline);
        }
        self.finish()
    }

    /// Sends the report of the second ending at `at`.
    fn report(&mut self, at: Time, now: Time) {
        let mut second = SecondStats {
            t_s: at.as_nanos() / 1_000_000_000,
            ..SecondStats::default()
        };
        for (d, out) in self
            .dirs
            .iter_mut()
            .zip([&mut second.uplink, &mut second.downlink])
        {
            let s = *d.link.stats();
            let (last, last_overload) = d.last;
            *out = DirectionSecond {
                delivered_packets: s.delivered_packets - last.delivered_packets,
                delivered_bytes: s.delivered_bytes - last.delivered_bytes,
                delivered_mbps: (s.delivered_bytes - last.delivered_bytes) as f64 * 8.0 / 1e6,
                queue_packets: d.link.queue_packets(now),
                queue_bytes: d.link.queue_bytes(now),
                dropped_queue: s.dropped_queue - last.dropped_queue,
                dropped_random: s.dropped_random - last.dropped_random,
                dropped_outage: s.dropped_outage - last.dropped_outage,
                dropped_overload: d.overload - last_overload,
                lateness: d.second_lateness.summary(),
            };
            d.last = (s, d.overload);
            d.second_lateness.clear();
        }
        if self.stats.try_send(second).is_err() {
            self.stats_dropped += 1;
        }
    }

    /// Waits until a device is readable or `deadline`: sleeps in `ppoll` up to `spin` before
    /// it, then spins (checking the devices) while the spin budget lasts.
    fn wait(&mut self, deadline: Time) {
        let now = since(self.start);
        let left = Duration::from_nanos(deadline.as_nanos().saturating_sub(now.as_nanos()));
        if left.is_zero() {
            return;
        }
        let may_spin = self.budget.allows(now);
        let sleep = if may_spin {
            left.saturating_sub(self.spin)
        } else {
            left
        };
        if !sleep.is_zero() {
            let readable = self.poll(sleep.min(MAX_SLEEP));
            if readable || !may_spin || sleep >= MAX_SLEEP {
                return;
            }
        }
        let spun_from = since(self.start);
        while since(self.start) < deadline && !self.poll(Duration::ZERO) {
            std::hint::spin_loop();
        }
        let spun_to = since(self.start);
        self.budget
            .spend(spun_from, spun_to.saturating_since(spun_from));
    }

    /// `ppoll` on both devices for up to `timeout`; whether one is readable.
    fn poll(&self, timeout: Duration) -> bool {
        let mut fds = [
            libc::pollfd {
                fd: self.sides[0].dev.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.sides[1].dev.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let ts = libc::timespec {
            tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(0),
            tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
        };
        // SAFETY: two valid pollfds, a valid timespec, no signal mask change.
        unsafe { libc::ppoll(fds.as_mut_ptr(), 2, &ts, std::ptr::null()) > 0 }
    }

    fn finish(mut self) -> Result<LinkReport, LinkEmuError> {
        for side in &mut self.sides {
            if let Some(p) = side.pcap.take() {
                let name = side.name.clone();
                p.finish().map_err(|source| LinkEmuError::File {
                    path: format!("capture of {name}"),
                    source,
                })?;
            }
        }
        if let Some(log) = self.log.as_mut() {
            log.flush()?;
        }
        let dir = |d: &Direction| DirectionReport {
            link: *d.link.stats(),
            dropped_overload: d.overload,
            write_errors: d.write_errors,
            unsplittable: d.unsplittable,
            reads: d.reads,
            ingress_dropped: 0,
            lateness: d.lateness.summary(),
        };
        Ok(LinkReport {
            duration_s: self.start.elapsed().as_secs_f64(),
            uplink: dir(&self.dirs[0]),
            downlink: dir(&self.dirs[1]),
            stats_dropped: self.stats_dropped,
            realtime: self.realtime,
            offload: self.sides.iter().all(|s| s.dev.tcp_gso()),
        })
    }
}

/// What the per-packet work needs from the driver besides the direction and the devices.
struct Ctx {
    start: Instant,
    pcap_epoch: Time,
    max_in_flight_packets: usize,
}

/// Reads from `side`'s device until it is empty or [`READ_BATCH`] packets came, and offers
/// each packet to `dir`'s link at the time it was read.
fn ingest(
    ctx: &Ctx,
    dir: &mut Direction,
    side: &mut Side,
    log: &mut Option<ScheduleLog>,
    reader: &mut Reader,
) -> Result<(), LinkEmuError> {
    let mut got = 0;
    while got < READ_BATCH {
        let n = match reader.read(&side.dev) {
            Ok(Read::Empty) => break,
            Ok(Read::Unsplittable) => {
                dir.unsplittable += 1;
                got += 1;
                continue;
            }
            Ok(Read::Packets(n)) => n,
            Err(source) => {
                return Err(LinkEmuError::Read {
                    dev: side.name.clone(),
                    source,
                });
            }
        };
        got += n.max(1);
        dir.reads += 1;
        // The packets of one super-packet were handed over together: all are offered now.
        let now = since(ctx.start);
        for i in 0..n {
            let bytes = reader.packet(i);
            if let Some(p) = side.pcap.as_mut() {
                p.record(ctx.pcap_epoch + since_zero(now), bytes)
                    .map_err(|e| pcap_err(side, e))?;
            }
            offer(ctx, dir, log, IpPacket::new(bytes, dir.next_id, now))?;
            dir.next_id += 1;
        }
    }
    Ok(())
}

/// Offers one packet read at `packet.offered` to `dir`'s link.
fn offer(
    ctx: &Ctx,
    dir: &mut Direction,
    log: &mut Option<ScheduleLog>,
    packet: IpPacket,
) -> Result<(), LinkEmuError> {
    let now = packet.offered;
    if dir.in_flight >= ctx.max_in_flight_packets {
        dir.overload += 1;
        if let Some(log) = log.as_mut() {
            let fate = Fate::Dropped {
                why: "overload",
                at: now,
            };
            log.write(dir.name, packet.id, now, packet.bytes().len(), fate)?;
        }
        return Ok(());
    }
    match dir.link.enqueue(now, packet) {
        Ok(()) => dir.in_flight += 1,
        Err((p, why)) => {
            if let Some(log) = log.as_mut() {
                let fate = Fate::Dropped {
                    why: reason(why),
                    at: now,
                };
                log.write(dir.name, p.id, p.offered, p.bytes().len(), fate)?;
            }
        }
    }
    Ok(())
}

/// Advances `dir`'s link to now and hands what it delivered to `to`'s device: in batches of
/// up to [`WRITE_BATCH`] packets when the device takes offloads (so GRO can coalesce them),
/// else one `write(2)` per packet.
fn release(
    ctx: &Ctx,
    dir: &mut Direction,
    to: &mut Side,
    writer: &mut Writer,
    log: &mut Option<ScheduleLog>,
) -> Result<(), LinkEmuError> {
    let now = since(ctx.start);
    dir.link.handle_timeout(now);
    while let Some((p, why)) = dir.link.poll_dropped() {
        dir.in_flight = dir.in_flight.saturating_sub(1);
        if let Some(log) = log.as_mut() {
            let fate = Fate::Dropped {
                why: reason(why),
                at: now,
            };
            log.write(dir.name, p.id, p.offered, p.bytes().len(), fate)?;
        }
    }
    let batch_max = if to.dev.tcp_gso() { WRITE_BATCH } else { 1 };
    loop {
        while writer.batch.len() < batch_max {
            let Some((model, p)) = dir.link.poll_arrival(now) else {
                break;
            };
            dir.in_flight = dir.in_flight.saturating_sub(1);
            writer.handed.push(Handed {
                model,
                id: p.id,
                offered: p.offered,
                len: p.bytes().len(),
            });
            writer.batch.push(p.into_buf());
        }
        let n = writer.batch.len();
        if n == 0 {
            return Ok(());
        }
        // A packet written alone is handed over when its write(2) starts: the kernel may
        // process it (and whatever it provokes) inside the call, which is not the link's
        // delay. Of a batch it is not known which write carries which packet (GRO merges
        // them), so all are counted as handed over when the last write returned: never
        // earlier than they were.
        let before = since(ctx.start);
        if let Some(pcap) = to.pcap.as_mut() {
            let at = ctx.pcap_epoch + since_zero(before);
            for b in &writer.batch {
                pcap.record(at, b.get(HEADROOM..).unwrap_or(&[]))
                    .map_err(|source| LinkEmuError::File {
                        path: format!("capture of {}", to.name),
                        source,
                    })?;
            }
        }
        if !writer.hand_over(&to.dev) {
            dir.write_errors += n as u64;
        }
        let actual = if n == 1 { before } else { since(ctx.start) };
        for h in writer.handed.drain(..) {
            let late = actual.as_nanos().saturating_sub(h.model.as_nanos());
            dir.lateness.record(late);
            dir.second_lateness.record(late);
            if let Some(log) = log.as_mut() {
                let fate = Fate::Delivered {
                    model: h.model,
                    actual,
                };
                log.write(dir.name, h.id, h.offered, h.len, fate)?;
            }
        }
    }
}

fn reason(why: DropReason) -> &'static str {
    match why {
        DropReason::QueueFull => "queue",
        DropReason::RandomLoss => "random",
        DropReason::Outage => "outage",
    }
}
