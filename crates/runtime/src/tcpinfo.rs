//! What a kernel TCP connection tells user space about itself: Linux `TCP_INFO`
//! (`getsockopt(IPPROTO_TCP, TCP_INFO)`, `struct tcp_info` in `linux/tcp.h`).
//!
//! TPBA's rate-probing period samples the movement of the acknowledged sequence number
//! (snd_una) every `T_TCP` (`papers/002_ef8b8f60f6080824.txt` §4); the authors changed the
//! FreeBSD kernel to expose it. Linux exposes it unchanged as `tcpi_bytes_acked` (RFC 4898
//! `tcpEStatsAppHCThruOctetsAcked`: data bytes acknowledged since the connection began,
//! Linux ≥ 4.1; it also counts the SYN, so it reads 1 on a fresh connection and users take
//! differences), so reading it here is the counterpart of that kernel change with none.
//!
//! Which congestion control a kernel TCP socket runs is also read and chosen here
//! (`TCP_CONGESTION`: [`congestion_control`], [`set_congestion_control`]): a host's default
//! (`net.ipv4.tcp_congestion_control`, BBR on some distributions, CUBIC on most) decides what
//! a kernel-TCP baseline measures, so the tools name it and let the user choose.

use std::os::fd::RawFd;
use thiserror::Error;

/// `tcpi_ca_state` values that mean the sender reduced its window (`TCP_CA_Recovery`,
/// `TCP_CA_Loss` in `include/net/tcp.h`).
const TCP_CA_RECOVERY: u8 = 3;
const TCP_CA_LOSS: u8 = 4;

/// Why `TCP_INFO` could not be read.
#[derive(Debug, Error)]
pub enum TcpInfoError {
    /// `getsockopt` failed (not a TCP socket, closed descriptor …).
    #[error("getsockopt(TCP_INFO): {0}")]
    Io(#[from] std::io::Error),
    /// The kernel's `struct tcp_info` ends before `tcpi_bytes_acked` (a kernel older than 4.1).
    #[error("TCP_INFO returned {len} bytes, tcpi_bytes_acked needs {need}")]
    TooShort {
        /// Bytes the kernel wrote.
        len: usize,
        /// Bytes up to the end of `tcpi_bytes_acked`.
        need: usize,
    },
}

/// The fields of `struct tcp_info` the runtime uses (TPBA's rate probe; the baselines'
/// dead-peer check).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpInfo {
    /// `tcpi_bytes_acked`: data bytes acknowledged since the connection began.
    pub bytes_acked: u64,
    /// `tcpi_snd_cwnd`: the congestion window, segments.
    pub snd_cwnd_segments: u32,
    /// `tcpi_snd_mss`: the sender's segment size, bytes.
    pub snd_mss_bytes: u32,
    /// `tcpi_ca_state`: the congestion-avoidance state (0 Open … 4 Loss).
    pub ca_state: u8,
    /// `tcpi_total_retrans`: segments retransmitted since the connection began.
    pub total_retrans: u32,
    /// `tcpi_state`: the connection's state (1 `ESTABLISHED` … 7 `CLOSE`).
    pub state: u8,
    /// `tcpi_retransmits`: retransmission timeouts in a row without progress
    /// (`icsk_retransmits`; what `TCP_USER_TIMEOUT` is checked against on a timeout).
    pub retransmits: u8,
    /// `tcpi_probes`: unanswered zero-window or keep-alive probes (`icsk_probes_out`).
    pub probes: u8,
    /// `tcpi_backoff`: the retransmission timer's exponential backoff.
    pub backoff: u8,
    /// `tcpi_rto`: the retransmission timeout, µs.
    pub rto_us: u32,
    /// `tcpi_unacked`: segments sent and not yet acknowledged (`packets_out`).
    pub unacked_segments: u32,
    /// `tcpi_lost`: segments taken as lost.
    pub lost_segments: u32,
    /// `tcpi_last_data_recv`: ms since data last arrived.
    pub last_data_recv_ms: u32,
    /// `tcpi_last_ack_recv`: ms since an acknowledgement last arrived (`rcv_tstamp`:
    /// any ACK that is not older than the last, duplicates included).
    pub last_ack_recv_ms: u32,
}

impl TcpInfo {
    /// How long ago the peer was last heard from at all (an acknowledgement or data), ms.
    pub fn last_heard_ms(&self) -> u32 {
        self.last_ack_recv_ms.min(self.last_data_recv_ms)
    }

    /// The congestion window in bytes (`snd_cwnd × snd_mss`).
    pub fn cwnd_bytes(&self) -> u64 {
        u64::from(self.snd_cwnd_segments) * u64::from(self.snd_mss_bytes)
    }

    /// The sender is in a window reduction (fast recovery or a retransmission timeout).
    pub fn in_reduction(&self) -> bool {
        self.ca_state == TCP_CA_RECOVERY || self.ca_state == TCP_CA_LOSS
    }
}

/// Reads `TCP_INFO` of the TCP socket `fd`, checking that the kernel's answer covers
/// `tcpi_bytes_acked`.
pub fn tcp_info(fd: RawFd) -> Result<TcpInfo, TcpInfoError> {
    // SAFETY: tcp_info is plain old data; all-zero is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::tcp_info>();
    let mut len = libc::socklen_t::try_from(size).unwrap_or(libc::socklen_t::MAX);
    // SAFETY: the kernel writes at most `len` bytes into `info` and stores the count in `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(TcpInfoError::Io(std::io::Error::last_os_error()));
    }
    let need = std::mem::offset_of!(libc::tcp_info, tcpi_bytes_acked) + std::mem::size_of::<u64>();
    let len = usize::try_from(len).unwrap_or(0);
    if len < need {
        return Err(TcpInfoError::TooShort { len, need });
    }
    Ok(TcpInfo {
        bytes_acked: info.tcpi_bytes_acked,
        snd_cwnd_segments: info.tcpi_snd_cwnd,
        snd_mss_bytes: info.tcpi_snd_mss,
        ca_state: info.tcpi_ca_state,
        total_retrans: info.tcpi_total_retrans,
        state: info.tcpi_state,
        retransmits: info.tcpi_retransmits,
        probes: info.tcpi_probes,
        backoff: info.tcpi_backoff,
        rto_us: info.tcpi_rto,
        unacked_segments: info.tcpi_unacked,
        lost_segments: info.tcpi_lost,
        last_data_recv_ms: info.tcpi_last_data_recv,
        last_ack_recv_ms: info.tcpi_last_ack_recv,
    })
}

/// Longest congestion control name the kernel keeps (`TCP_CA_NAME_MAX`).
const TCP_CA_NAME_MAX: usize = 16;

/// Why a socket's congestion control could not be read or set.
#[derive(Debug, Error)]
pub enum CongestionControlError {
    /// The name is empty or longer than the kernel keeps.
    #[error("{0:?} is not a congestion control name (1 to 15 bytes)")]
    BadName(String),
    /// The kernel has no such algorithm loaded.
    #[error(
        "congestion control {0:?} is not available on this host (see \
         /proc/sys/net/ipv4/tcp_available_congestion_control; `modprobe tcp_{0}` may load it)"
    )]
    Unavailable(String),
    /// The kernel has it but this user may not choose it.
    #[error(
        "congestion control {0:?} is not allowed for this user (see \
         /proc/sys/net/ipv4/tcp_allowed_congestion_control, or run as root)"
    )]
    NotAllowed(String),
    /// Another socket error.
    #[error("TCP_CONGESTION: {0}")]
    Io(#[from] std::io::Error),
}

/// The congestion control TCP socket `fd` runs (`cubic`, `reno`, `bbr` …).
pub fn congestion_control(fd: RawFd) -> Result<String, CongestionControlError> {
    let mut name = [0u8; TCP_CA_NAME_MAX];
    let mut len = libc::socklen_t::try_from(name.len()).unwrap_or(0);
    // SAFETY: the kernel writes at most `len` bytes into `name` and stores the count in `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    let len = usize::try_from(len).unwrap_or(0).min(name.len());
    let bytes = name.get(..len).unwrap_or_default();
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    Ok(String::from_utf8_lossy(bytes.get(..end).unwrap_or_default()).into_owned())
}

/// Makes TCP socket `fd` run congestion control `name` (before `connect`, so the first
/// window is the algorithm's own).
pub fn set_congestion_control(fd: RawFd, name: &str) -> Result<(), CongestionControlError> {
    if name.is_empty() || name.len() >= TCP_CA_NAME_MAX {
        return Err(CongestionControlError::BadName(name.to_owned()));
    }
    let len = libc::socklen_t::try_from(name.len()).unwrap_or(0);
    // SAFETY: the kernel reads `len` bytes of `name`.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            len,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    Err(match e.raw_os_error() {
        Some(libc::ENOENT) => CongestionControlError::Unavailable(name.to_owned()),
        Some(libc::EPERM) => CongestionControlError::NotAllowed(name.to_owned()),
        _ => CongestionControlError::Io(e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;
    use std::time::{Duration, Instant};

    #[test]
    fn bytes_acked_grows_after_writes_on_loopback() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let reader = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().expect("accept");
            let mut total = 0usize;
            let mut buf = [0u8; 16 << 10];
            while let Ok(n) = s.read(&mut buf) {
                if n == 0 {
                    break;
                }
                total += n;
            }
            total
        });
        let mut s = TcpStream::connect(addr).expect("connect");
        let before = tcp_info(s.as_raw_fd()).expect("TCP_INFO");
        // Linux counts the SYN's sequence number: 1 before any data.
        assert!(
            before.bytes_acked <= 1,
            "no data acknowledged yet: {before:?}"
        );
        assert!(before.snd_mss_bytes > 0 && before.cwnd_bytes() > 0);
        let chunk = vec![7u8; 64 << 10];
        for _ in 0..4 {
            s.write_all(&chunk).expect("write");
        }
        let written = 4 * chunk.len() as u64;
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut after = tcp_info(s.as_raw_fd()).expect("TCP_INFO");
        while after.bytes_acked < before.bytes_acked + written && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
            after = tcp_info(s.as_raw_fd()).expect("TCP_INFO");
        }
        assert_eq!(
            after.bytes_acked - before.bytes_acked,
            written,
            "every written byte acknowledged, once"
        );
        drop(s);
        assert_eq!(reader.join().expect("reader") as u64, written);
    }

    #[test]
    fn congestion_control_is_named_and_chosen_per_socket() {
        let s = unconnected_tcp_socket();
        let default = congestion_control(s.as_raw_fd()).expect("TCP_CONGESTION");
        assert!(!default.is_empty() && default.is_ascii(), "{default:?}");
        // reno is built into every Linux kernel and allowed for every user.
        set_congestion_control(s.as_raw_fd(), "reno").expect("reno");
        assert_eq!(
            congestion_control(s.as_raw_fd()).expect("read back"),
            "reno"
        );
        assert!(matches!(
            set_congestion_control(s.as_raw_fd(), "no-such-cc"),
            Err(CongestionControlError::Unavailable(_))
        ));
        assert!(matches!(
            set_congestion_control(s.as_raw_fd(), ""),
            Err(CongestionControlError::BadName(_))
        ));
    }

    /// A TCP socket that is neither bound nor connected (a listener's is enough).
    fn unconnected_tcp_socket() -> TcpListener {
        TcpListener::bind("127.0.0.1:0").expect("bind")
    }

    #[test]
    fn a_udp_socket_has_no_tcp_info() {
        let u = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        assert!(matches!(tcp_info(u.as_raw_fd()), Err(TcpInfoError::Io(_))));
    }
}
