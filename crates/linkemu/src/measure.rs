//! Measurements over an emulated link that tests, `adaptnet bench link` and scripts share: a
//! paced UDP sender (one datagram per send, or GSO bursts), a receiver that timestamps
//! arrivals, and the comparison of a saturating flow's deliveries with the capacity the link
//! model promises.

use adaptnet_core::Time;
use adaptnet_sim::link::LinkConfig;
use serde::Serialize;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

/// Most arrivals a receiver records (8 bytes each): 100 s at 1 Gbit/s of 1500-byte packets.
pub const MAX_ARRIVALS: usize = 10_000_000;
/// UDP payload that makes a 1500-byte IPv4 packet.
pub const FULL_PAYLOAD_BYTES: usize = 1472;

/// Sends `payload`-byte datagrams to `to` at `rate_bps` (IP packet bits per second) for
/// `duration`, in bursts of one millisecond's worth; returns the datagrams sent. Errors of
/// individual sends (a full socket buffer) are counted as not sent, not returned.
pub fn paced_udp(
    socket: &UdpSocket,
    to: SocketAddr,
    rate_bps: f64,
    payload: usize,
    duration: Duration,
) -> u64 {
    let wire_bits = ((payload + 28) * 8) as f64;
    let per_s = rate_bps / wire_bits;
    let buf = vec![0xa5u8; payload];
    let t0 = Instant::now();
    let mut sent = 0u64;
    while t0.elapsed() < duration {
        let due = (t0.elapsed().as_secs_f64() * per_s) as u64;
        while sent < due {
            if socket.send_to(&buf, to).is_err() {
                // Socket buffer full: this datagram is not sent; keep the pace.
            }
            sent += 1;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    sent
}

/// `UDP_SEGMENT` (linux/udp.h): the socket option that makes one send a GSO burst of
/// datagrams of the given size.
const UDP_SEGMENT: libc::c_int = 103;
/// Most datagrams of one GSO send: 44 × 1472 bytes fills the 64-KiB limit of one UDP send.
pub const MAX_GSO_DATAGRAMS: usize = 44;

/// As [`paced_udp`], but in GSO bursts (`UDP_SEGMENT`): whenever `burst` datagrams of
/// `payload` bytes are due (1 to [`MAX_GSO_DATAGRAMS`], and at most 64 KiB), one send carries
/// them, and the kernel hands them to a device that takes UDP segmentation offload (USO) as
/// one super-packet (and splits them before any other). Returns the datagrams sent; fails if
/// the socket refuses `UDP_SEGMENT` or the burst does not fit one send.
pub fn paced_udp_gso(
    socket: &UdpSocket,
    to: SocketAddr,
    rate_bps: f64,
    payload: usize,
    burst: usize,
    duration: Duration,
) -> std::io::Result<u64> {
    use std::os::fd::AsRawFd;
    if burst == 0 || burst > MAX_GSO_DATAGRAMS || payload * burst > 65_507 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{burst} datagrams of {payload} bytes do not fit one UDP_SEGMENT send"),
        ));
    }
    let size = libc::c_int::try_from(payload).map_err(std::io::Error::other)?;
    // SAFETY: setsockopt on an open socket with a pointer to a c_int and its size.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_UDP,
            UDP_SEGMENT,
            std::ptr::from_ref(&size).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let wire_bits = ((payload + 28) * 8) as f64;
    let per_s = rate_bps / wire_bits;
    let buf = vec![0xa5u8; payload * burst];
    let t0 = Instant::now();
    let mut sent = 0u64;
    while t0.elapsed() < duration {
        let due = (t0.elapsed().as_secs_f64() * per_s) as u64;
        while sent + burst as u64 <= due {
            if socket.send_to(&buf, to).is_err() {
                // Socket buffer full: these datagrams are not sent; keep the pace.
            }
            sent += burst as u64;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    Ok(sent)
}

/// Receives datagrams until `duration` has passed since `since`, recording each arrival's
/// time since `since` (at most [`MAX_ARRIVALS`]).
pub fn arrivals(socket: &UdpSocket, since: Instant, duration: Duration) -> Vec<Duration> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 65_536];
    socket
        .set_read_timeout(Some(Duration::from_millis(20)))
        .ok();
    while since.elapsed() < duration {
        if socket.recv(&mut buf).is_ok() && out.len() < MAX_ARRIVALS {
            out.push(since.elapsed());
        }
    }
    out
}

/// How a saturating flow's deliveries compare with the link's capacity.
#[derive(Clone, Debug, Serialize)]
pub struct ScheduleMatch {
    /// Start of the compared window, seconds of link time.
    pub from_s: f64,
    /// End of the compared window.
    pub to_s: f64,
    /// Packets received in the window.
    pub received: u64,
    /// Packets the model's capacity allows in the window (departures shifted by the delay).
    pub expected: f64,
    /// `received / expected - 1`.
    pub error: f64,
    /// Per-second received and expected counts.
    pub per_second: Vec<(f64, u64, f64)>,
}

/// Compares `arrivals` (times since the link came up, of `packet_bytes`-byte packets) in
/// `[from, to)` with what `link` can carry: with a saturated queue, the packets leaving the
/// transmitter in `[from − delay, to − delay)`.
pub fn schedule_match(
    link: &LinkConfig,
    packet_bytes: u64,
    arrivals: &[Duration],
    from: Duration,
    to: Duration,
) -> ScheduleMatch {
    let capacity_packets = |t: Duration| -> f64 {
        let at = t.saturating_sub(link.delay);
        link.bandwidth.capacity_bytes(Time::from_nanos(
            u64::try_from(at.as_nanos()).unwrap_or(u64::MAX),
        )) / packet_bytes as f64
    };
    let count =
        |a: Duration, b: Duration| arrivals.iter().filter(|&&t| t >= a && t < b).count() as u64;
    let mut per_second = Vec::new();
    let mut t = from;
    while t < to {
        let end = (t + Duration::from_secs(1)).min(to);
        per_second.push((
            t.as_secs_f64(),
            count(t, end),
            capacity_packets(end) - capacity_packets(t),
        ));
        t = end;
    }
    let received = count(from, to);
    let expected = capacity_packets(to) - capacity_packets(from);
    ScheduleMatch {
        from_s: from.as_secs_f64(),
        to_s: to.as_secs_f64(),
        received,
        expected,
        error: if expected > 0.0 {
            received as f64 / expected - 1.0
        } else {
            0.0
        },
        per_second,
    }
}
