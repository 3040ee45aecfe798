//! What the network says about the stream endpoint's datagrams: ICMP port unreachable for a
//! datagram sent to an address where nothing listens.
//!
//! Linux reports ICMP errors to a connected UDP socket only, unless the socket asks for them
//! with `IP_RECVERR` (ip(7)); the endpoint's socket serves many peers and is not connected.
//! With `IP_RECVERR` each error is queued on the socket's error queue, read with
//! `recvmsg(MSG_ERRQUEUE)`: a `sock_extended_err` says what happened, and the message's
//! address is the original destination (ip(7): "the original destination address of the
//! datagram that caused the error is supplied via msg_name") — the peer, port included. An
//! error also sets the socket's pending error, reported once by the next send or receive;
//! reading the queue clears it, and [`UdpIo`](crate::udp::UdpIo) counts a send it failed as
//! lost, as a network would.
//!
//! Only "port unreachable" (`ECONNREFUSED`: no socket at that port) is passed on: it is the
//! only answer that says the peer endpoint is not there. Host and network unreachable may be
//! transient (RFC 1122 §4.2.3.9 calls them soft errors); the handshake's own
//! retransmissions decide those.

use std::io;
use std::mem::{MaybeUninit, size_of};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::RawFd;

/// Asks the kernel to queue ICMP errors for the socket's datagrams (`IP_RECVERR`, and
/// `IPV6_RECVERR` on an IPv6 socket, which may carry IPv4 too).
pub(super) fn enable(fd: RawFd, ipv6: bool) -> io::Result<()> {
    if ipv6 {
        set_on(fd, libc::IPPROTO_IPV6, libc::IPV6_RECVERR)?;
        // A v6-only socket refuses the IPv4 option; it has no IPv4 errors to report.
        let _ = set_on(fd, libc::IPPROTO_IP, libc::IP_RECVERR);
        Ok(())
    } else {
        set_on(fd, libc::IPPROTO_IP, libc::IP_RECVERR)
    }
}

fn set_on(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: setsockopt reads one int of the given size from the pointer.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&on as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// One entry of the error queue read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Report {
    /// Nothing listens at this address (ICMP port unreachable).
    PortUnreachable(SocketAddr),
    /// Any other error (host unreachable, packet too big, a local error): not acted on.
    Other,
}

/// Reads one entry of `fd`'s error queue without blocking; `WouldBlock` when it is empty.
pub(super) fn recv_report(fd: RawFd) -> io::Result<Report> {
    let mut name = MaybeUninit::<libc::sockaddr_storage>::zeroed();
    // The original datagram's first bytes come as data; they are not needed.
    let mut data = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: data.as_mut_ptr().cast(),
        iov_len: data.len(),
    };
    // Aligned for cmsghdr; room for one sock_extended_err with its offender address.
    let mut control = [0u64; 64];
    // SAFETY: msghdr is plain data; zero is a valid empty header.
    let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
    hdr.msg_name = name.as_mut_ptr().cast();
    hdr.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    hdr.msg_iov = &mut iov;
    hdr.msg_iovlen = 1;
    hdr.msg_control = control.as_mut_ptr().cast();
    hdr.msg_controllen = size_of::<[u64; 64]>() as _;
    // SAFETY: every pointer in `hdr` points to a live buffer of the length given with it.
    let n = unsafe { libc::recvmsg(fd, &mut hdr, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut refused = false;
    // SAFETY: the kernel filled `hdr`'s control buffer; CMSG_* walk it within
    // `msg_controllen`.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&hdr);
        while !cmsg.is_null() {
            let c = &*cmsg;
            let is_err = (c.cmsg_level == libc::IPPROTO_IP && c.cmsg_type == libc::IP_RECVERR)
                || (c.cmsg_level == libc::IPPROTO_IPV6 && c.cmsg_type == libc::IPV6_RECVERR);
            let need = libc::CMSG_LEN(size_of::<libc::sock_extended_err>() as u32) as usize;
            #[allow(clippy::unnecessary_cast)] // cmsg_len is a size_t on glibc, u32 elsewhere
            if is_err && c.cmsg_len as usize >= need {
                let ee: libc::sock_extended_err =
                    std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                let icmp = ee.ee_origin == libc::SO_EE_ORIGIN_ICMP
                    || ee.ee_origin == libc::SO_EE_ORIGIN_ICMP6;
                refused |= icmp && ee.ee_errno == libc::ECONNREFUSED as u32;
            }
            cmsg = libc::CMSG_NXTHDR(&hdr, cmsg);
        }
    }
    if !refused {
        return Ok(Report::Other);
    }
    // SAFETY: the kernel wrote `msg_namelen` bytes of a socket address (zeroed before).
    let name = unsafe { name.assume_init() };
    Ok(socket_addr(&name).map_or(Report::Other, Report::PortUnreachable))
}

/// The address in `s`, if it is an IPv4 or IPv6 one.
fn socket_addr(s: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match i32::from(s.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in, which it is large
            // enough for.
            let sin = unsafe { &*(s as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
            Some(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6 =
                unsafe { &*(s as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    /// A datagram to a port where nothing listens comes back as a report naming it.
    #[test]
    fn test_port_unreachable_names_the_destination() {
        let closed = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        let to = closed.local_addr().expect("addr");
        drop(closed);
        let s = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        enable(s.as_raw_fd(), false).expect("IP_RECVERR");
        s.send_to(b"x", to).expect("send");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        let report = loop {
            match recv_report(s.as_raw_fd()) {
                Ok(r) => break r,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    assert!(std::time::Instant::now() < deadline, "no ICMP error came");
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                Err(e) => panic!("{e}"),
            }
        };
        assert_eq!(report, Report::PortUnreachable(to));
        let empty = recv_report(s.as_raw_fd()).expect_err("drained");
        assert_eq!(empty.kind(), io::ErrorKind::WouldBlock);
    }
}
