//! What a kernel TCP connection tells user space about itself: Linux `TCP_INFO`
//! (`getsockopt(IPPROTO_TCP, TCP_INFO)`, `struct tcp_info` in `linux/tcp.h`).
//!
//! TPBA's rate-probing period samples the movement of the acknowledged sequence number
//! (snd_una) every `T_TCP` (`papers/002_ef8b8f60f6080824.txt` §4); the authors changed the
//! FreeBSD kernel to expose it. Linux exposes it unchanged as `tcpi_bytes_acked` (RFC 4898
//! `tcpEStatsAppHCThruOctetsAcked`: data bytes acknowledged since the connection began,
//! Linux ≥ 4.1; it also counts the SYN, so it reads 1 on a fresh connection and users take
//! differences), so reading it here is the counterpart of that kernel change with none.

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

/// The fields of `struct tcp_info` the TPBA runtime uses.
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
}

impl TcpInfo {
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
    fn a_udp_socket_has_no_tcp_info() {
        let u = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        assert!(matches!(tcp_info(u.as_raw_fd()), Err(TcpInfoError::Io(_))));
    }
}
