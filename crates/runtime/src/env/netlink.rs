//! Pushed availability: the kernel's link notifications on a `NETLINK_ROUTE` socket.
//!
//! The poller ([`super::linux`]) sees a link change only at its next read of `/sys`; the kernel
//! announces every change at once as an `RTM_NEWLINK` message to the `RTMGRP_LINK` multicast
//! group (`rtnetlink(7)`). This listener subscribes to that group, asks for a dump of every
//! link when it starts (`RTM_GETLINK` + `NLM_F_DUMP`, the initial state), and sets
//! [`Param::Availability`] from each message the moment it is read — papers/001 §3.4's
//! "the kernel … can make a simple function call to set these parameters".
//!
//! Exactly what is read, per message (parsed by core's [`adaptnet_core::env::rtnetlink`],
//! which never panics and is fuzzed):
//!
//! * `IFLA_IFNAME`: which interface (messages for interfaces the monitor does not follow are
//!   ignored);
//! * `IFLA_OPERSTATE`: RFC 2863's operational state, mapped as the `operstate` file is
//!   ([`OperState::from_if_oper`]);
//! * carrier: `IFLA_CARRIER` (or the `IFF_LOWER_UP` flag when the attribute is absent), and
//!   none at all while `IFF_UP` is clear — the same as reading `/sys/…/carrier`, which fails
//!   with `EINVAL` on an administratively down device.
//!
//! The availability value is then [`linux::availability`], so polled and pushed readings agree.
//! `RTM_DELLINK` (the interface was removed) sets [`linux::UNAVAILABLE`].
//!
//! While the listener runs, the poller no longer reports availability (the pushed value is
//! authoritative and a poll racing a change could report the old state after the new one); it
//! still reads the byte counters and `/proc/net/wireless`. If the socket cannot be opened
//! (not Linux, a sandbox without netlink) or fails later, the poller takes availability back —
//! polling is the fallback. When the kernel had to drop notifications (`ENOBUFS`: our receive
//! buffer overflowed), the listener asks for a fresh dump, so the state converges again.
//!
//! Only messages from the kernel (sender port id 0) are used. The socket lives in the network
//! namespace of the thread that called [`LinkSocket::open`] — a monitor started on a thread
//! that entered another namespace (`setns`) follows that namespace's links.

use super::Shared;
use super::linux::{self, OperState};
use adaptnet_core::env::rtnetlink::{
    self, IFF_LOWER_UP, IFF_UP, LinkInfo, RTMGRP_LINK, RtnlMessage,
};
use adaptnet_core::env::{Name, Param};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// Receive buffer asked of the kernel (`SO_RCVBUF`), bytes: room for a burst of
/// notifications (a link message is ≈1–2 KB) before the kernel reports `ENOBUFS`.
pub const RCVBUF_BYTES: usize = 1 << 20;
/// Largest datagram read at once (a dump part is at most a few pages).
const RECV_BYTES: usize = 64 * 1024;

/// A `NETLINK_ROUTE` socket subscribed to link notifications.
#[derive(Debug)]
pub struct LinkSocket {
    fd: AsyncFd<OwnedFd>,
    seq: u32,
}

/// `size_of::<T>()` as a `socklen_t`.
fn socklen<T>() -> libc::socklen_t {
    libc::socklen_t::try_from(std::mem::size_of::<T>()).unwrap_or(libc::socklen_t::MAX)
}

impl LinkSocket {
    /// Opens the socket in the calling thread's network namespace and joins `RTMGRP_LINK`.
    /// Must be called inside a tokio runtime with I/O enabled.
    pub fn open() -> io::Result<LinkSocket> {
        // SAFETY: plain socket(2); the result is checked before use.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                libc::NETLINK_ROUTE,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a socket we just opened and own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: sockaddr_nl is plain data; all-zero is valid (port id chosen by the kernel).
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        addr.nl_groups = RTMGRP_LINK;
        // SAFETY: a valid sockaddr_nl of the size given.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_nl).cast(),
                socklen::<libc::sockaddr_nl>(),
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        let want = libc::c_int::try_from(RCVBUF_BYTES).unwrap_or(libc::c_int::MAX);
        // SAFETY: SO_RCVBUF with an int; failure only leaves the default size.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                (&want as *const libc::c_int).cast(),
                socklen::<libc::c_int>(),
            );
        }
        // SAFETY: `fd` is an open socket owned by the `AsyncFd` from here on, and an `OwnedFd`
        // always returns the same descriptor.
        let fd = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }?;
        Ok(LinkSocket { fd, seq: 0 })
    }

    /// Asks the kernel for every link's current state (answered as `RTM_NEWLINK` messages
    /// on this socket, then `NLMSG_DONE`).
    pub fn request_dump(&mut self) -> io::Result<()> {
        self.seq = self.seq.wrapping_add(1);
        let req = rtnetlink::getlink_dump_request(self.seq);
        // SAFETY: sockaddr_nl is plain data; zero port id and groups address the kernel.
        let mut to: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        to.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: the buffer and address are valid for the lengths given.
        let n = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                req.as_ptr().cast(),
                req.len(),
                0,
                (&to as *const libc::sockaddr_nl).cast(),
                socklen::<libc::sockaddr_nl>(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Waits for the next datagram; returns its length and the sender's port id (0: the
    /// kernel). `ENOBUFS` means the kernel dropped notifications (see the module doc).
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<(usize, u32)> {
        loop {
            let mut guard = self.fd.readable().await?;
            let r = guard.try_io(|fd| {
                // SAFETY: sockaddr_nl is plain data, filled by recvfrom.
                let mut from: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
                let mut from_len = socklen::<libc::sockaddr_nl>();
                // SAFETY: buffer and address valid for the lengths given.
                let n = unsafe {
                    libc::recvfrom(
                        fd.as_raw_fd(),
                        buf.as_mut_ptr().cast(),
                        buf.len(),
                        0,
                        (&mut from as *mut libc::sockaddr_nl).cast(),
                        &mut from_len,
                    )
                };
                if n < 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok((usize::try_from(n).unwrap_or(0), from.nl_pid))
            });
            match r {
                Ok(result) => return result,
                Err(_would_block) => continue,
            }
        }
    }
}

impl OperState {
    /// The state named by an `IFLA_OPERSTATE` byte (`IF_OPER_*` of `linux/if.h`, RFC 2863
    /// order); numbers the kernel does not define are [`OperState::Unknown`].
    pub fn from_if_oper(v: u8) -> OperState {
        match v {
            1 => OperState::NotPresent,
            2 => OperState::Down,
            3 => OperState::LowerLayerDown,
            4 => OperState::Testing,
            5 => OperState::Dormant,
            6 => OperState::Up,
            _ => OperState::Unknown,
        }
    }
}

/// The availability value one `RTM_NEWLINK` reports (see the module doc).
pub fn link_availability(info: &LinkInfo) -> f64 {
    let state = info
        .operstate
        .map_or(OperState::Unknown, OperState::from_if_oper);
    let carrier = if info.flags & IFF_UP == 0 {
        None
    } else {
        Some(info.carrier.unwrap_or(info.flags & IFF_LOWER_UP != 0))
    };
    linux::availability(state, carrier)
}

/// Reads notifications until the socket fails (then hands availability back to the poller)
/// or the monitor closes. `interfaces`: the names to follow; empty: all.
pub(super) async fn listen(
    shared: Arc<Shared>,
    mut socket: LinkSocket,
    interfaces: Vec<String>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; RECV_BYTES];
    loop {
        let Some(received) = super::until_stopped(&mut stop, socket.recv(&mut buf)).await else {
            return;
        };
        let (len, from) = match received {
            Ok(r) => r,
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                shared.lock().stats.link_overruns += 1;
                if let Err(e) = socket.request_dump() {
                    tracing::debug!("rtnetlink: dump after overrun: {e}");
                }
                continue;
            }
            Err(e) => {
                tracing::warn!("rtnetlink: {e}; availability falls back to polling");
                let mut st = shared.lock();
                st.availability_pushed = false;
                return;
            }
        };
        if from != 0 {
            continue; // not the kernel
        }
        let datagram = buf.get(..len).unwrap_or_default();
        let mut st = shared.lock();
        for m in rtnetlink::messages(datagram) {
            let (info, value) = match m {
                Ok(RtnlMessage::NewLink(info)) => {
                    let v = link_availability(&info);
                    (info, v)
                }
                Ok(RtnlMessage::DelLink(info)) => (info, linux::UNAVAILABLE),
                Ok(_) => continue,
                Err(e) => {
                    st.stats.link_malformed += 1;
                    tracing::debug!("rtnetlink: {e}");
                    continue;
                }
            };
            let Some(name) = info.name else { continue };
            if !interfaces.is_empty() && !interfaces.contains(&name) {
                continue;
            }
            let Ok(device) = Name::new(&name) else {
                continue;
            };
            st.stats.link_messages += 1;
            if let Err(e) = st.set(&device, &Param::Availability, value) {
                tracing::debug!("rtnetlink: {device}: {e}");
            }
        }
        st.drain();
        drop(st);
        shared.kick.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use adaptnet_core::env::rtnetlink::IFF_RUNNING;

    fn info(flags: u32, operstate: Option<u8>, carrier: Option<bool>) -> LinkInfo {
        LinkInfo {
            index: 3,
            flags,
            name: Some("veth0".into()),
            operstate,
            carrier,
        }
    }

    #[test]
    fn test_link_availability_matches_the_sysfs_rule() {
        let up = IFF_UP | IFF_RUNNING | IFF_LOWER_UP;
        assert_eq!(
            link_availability(&info(up, Some(6), Some(true))),
            linux::AVAILABLE
        );
        // Admin down: operstate down, carrier unknown.
        assert_eq!(
            link_availability(&info(0, Some(2), Some(false))),
            linux::UNAVAILABLE
        );
        // Peer down: lowerlayerdown.
        assert_eq!(
            link_availability(&info(IFF_UP, Some(3), Some(false))),
            linux::UNAVAILABLE
        );
        // Loopback: operstate unknown, carrier from the attribute, or from IFF_LOWER_UP.
        assert_eq!(
            link_availability(&info(up, Some(0), Some(true))),
            linux::AVAILABLE
        );
        assert_eq!(link_availability(&info(up, None, None)), linux::AVAILABLE);
        assert_eq!(
            link_availability(&info(IFF_UP, Some(0), None)),
            linux::UNAVAILABLE
        );
        // Unknown and administratively down: no carrier, unavailable.
        assert_eq!(
            link_availability(&info(0, Some(0), Some(true))),
            linux::UNAVAILABLE
        );
        assert_eq!(OperState::from_if_oper(5), OperState::Dormant);
        assert_eq!(OperState::from_if_oper(200), OperState::Unknown);
    }
}
