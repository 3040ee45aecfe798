//! What ATP's estimator reads on a Linux host.
//!
//! The paper's ATP (FreeBSD, §4.2) polled the network card for "the amount of data sent and
//! received" and read "the length of the interface's send queue". Here:
//!
//! * **bytes through the interface**: `/sys/class/net/<if>/statistics/tx_bytes` plus
//!   `rx_bytes`, the kernel's per-device counters (the same numbers `ip -s link` prints and
//!   FreeBSD's `ifmib` `ifi_obytes`/`ifi_ibytes` give). They count every protocol's traffic on
//!   the device, as the paper's counters did, so other applications' use lowers the estimate.
//! * **send-queue backlog**: `SIOCOUTQ` on ATP's own UDP socket — the bytes the socket has
//!   handed to the kernel that the device has not yet sent. A UDP datagram stays charged to its
//!   socket until the driver frees it, so this counts the datagrams waiting in the qdisc (a
//!   `tbf` shaper's queue included) and the device ring: the part of the interface queue that
//!   is ATP's. Other flows' backlog in the qdisc is not seen (reading it needs rtnetlink qdisc
//!   statistics; not done). Converted to packets at the datagram size.
//!
//! The interface is the one holding the source address the kernel picks for the peer (a
//! connected probe socket's local address, looked up with `getifaddrs`).

use std::ffi::CStr;
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::path::PathBuf;

/// The source address the kernel's routing picks to reach `peer` (no packet is sent).
pub fn route_source(peer: SocketAddr) -> io::Result<IpAddr> {
    let any: SocketAddr = if peer.is_ipv4() {
        "0.0.0.0:0".parse().map_err(io::Error::other)?
    } else {
        "[::]:0".parse().map_err(io::Error::other)?
    };
    let probe = UdpSocket::bind(any)?;
    probe.connect(peer)?;
    Ok(probe.local_addr()?.ip())
}

/// The name of the interface that holds `addr`, if any.
pub fn interface_with(addr: IpAddr) -> Option<String> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` with a linked list we free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return None;
    }
    let mut found = None;
    let mut cur = list;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_addr points to a sockaddr whose family says how to read it.
        let ip = unsafe {
            match i32::from((*ifa.ifa_addr).sa_family) {
                libc::AF_INET => {
                    let sin = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                    Some(IpAddr::from(
                        u32::from_be(sin.sin_addr.s_addr).to_be_bytes(),
                    ))
                }
                libc::AF_INET6 => {
                    let sin6 = &*(ifa.ifa_addr as *const libc::sockaddr_in6);
                    Some(IpAddr::from(sin6.sin6_addr.s6_addr))
                }
                _ => None,
            }
        };
        if ip == Some(addr) {
            // SAFETY: ifa_name is a NUL-terminated string owned by the list.
            let name = unsafe { CStr::from_ptr(ifa.ifa_name) };
            found = Some(name.to_string_lossy().into_owned());
            break;
        }
    }
    // SAFETY: `list` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(list) };
    found
}

/// The byte counters of one network interface.
#[derive(Clone, Debug)]
pub struct InterfaceCounters {
    name: String,
    dir: PathBuf,
}

impl InterfaceCounters {
    /// Counters of interface `name` (e.g. `eth0`); fails if the device has no statistics.
    pub fn new(name: &str) -> io::Result<InterfaceCounters> {
        if name.is_empty() || name.contains('/') || name.starts_with('.') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bad interface name {name:?}"),
            ));
        }
        let c = InterfaceCounters {
            name: name.to_owned(),
            dir: PathBuf::from("/sys/class/net")
                .join(name)
                .join("statistics"),
        };
        c.total_bytes()?;
        Ok(c)
    }

    /// The counters of the interface used to reach `peer`.
    pub fn for_peer(peer: SocketAddr) -> io::Result<InterfaceCounters> {
        let src = route_source(peer)?;
        let name = interface_with(src).ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("no interface holds {src}"))
        })?;
        InterfaceCounters::new(&name)
    }

    /// The interface's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Bytes sent plus received by the interface since it came up.
    pub fn total_bytes(&self) -> io::Result<u64> {
        let read = |f: &str| -> io::Result<u64> {
            let s = std::fs::read_to_string(self.dir.join(f))?;
            s.trim()
                .parse()
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
        };
        Ok(read("tx_bytes")?.saturating_add(read("rx_bytes")?))
    }
}

/// Bytes queued in a socket's send path (`SIOCOUTQ`): handed to the kernel, not yet sent by
/// the device.
#[cfg(target_os = "linux")]
pub fn send_queue_bytes(fd: std::os::fd::RawFd) -> io::Result<u64> {
    let mut value: libc::c_int = 0;
    // SAFETY: SIOCOUTQ (== TIOCOUTQ) writes one int through the pointer.
    let rc = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut value) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(u64::try_from(value).unwrap_or(0))
}

/// Asks for `bytes` of socket receive and send buffer. A UDP transport that paces at its
/// estimate rather than a window needs room for bursts the application reads late; the
/// kernel's default (about 208 KB, `net.core.rmem_max`) overflows at loopback rates. Tries the
/// privileged `SO_*BUFFORCE` first (root may exceed the sysctl cap), then the plain option;
/// returns the receive buffer the kernel granted.
#[cfg(target_os = "linux")]
pub fn grow_socket_buffers(fd: std::os::fd::RawFd, bytes: usize) -> io::Result<usize> {
    let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    let set = |opt: libc::c_int| -> bool {
        // SAFETY: setsockopt reads one int of the given size from the pointer.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            ) == 0
        }
    };
    for (force, plain) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        if !set(force) {
            set(plain);
        }
    }
    let mut granted: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `granted`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&mut granted as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(usize::try_from(granted).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_found_and_counts() {
        let peer: SocketAddr = "127.0.0.1:9".parse().expect("address");
        let c = InterfaceCounters::for_peer(peer).expect("loopback interface");
        assert_eq!(c.name(), "lo");
        let before = c.total_bytes().expect("counters");
        let s = UdpSocket::bind("127.0.0.1:0").expect("bind");
        s.send_to(&[0u8; 1000], peer).expect("send");
        let after = c.total_bytes().expect("counters");
        assert!(after >= before + 1000, "{before} -> {after}");
    }

    #[test]
    fn bad_names_are_refused() {
        assert!(InterfaceCounters::new("../etc").is_err());
        assert!(InterfaceCounters::new("").is_err());
        assert!(InterfaceCounters::new("no-such-if0").is_err());
    }

    #[test]
    fn send_queue_of_an_idle_socket_is_empty() {
        use std::os::fd::AsRawFd;
        let s = UdpSocket::bind("127.0.0.1:0").expect("bind");
        assert_eq!(send_queue_bytes(s.as_raw_fd()).expect("ioctl"), 0);
    }
}
