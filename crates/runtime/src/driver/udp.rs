//! The datagram side of a driver, for every protocol over one UDP socket ([`UdpIo`]): read a
//! few batches per wake-up, each datagram handed to core at its kernel arrival time; send
//! what core has in batches, each datagram stamped with the time it was taken.

use super::Timekeeper;
use crate::udp::{Datagram, UdpIo};
use adaptnet_core::Time;
use std::io;
use std::net::SocketAddr;

/// Reads up to `batches` batches (`recvmmsg` calls) and hands each datagram to `each` with
/// its arrival time and source. Receive errors are not fatal: on Linux an ICMP error for an
/// earlier send (port unreachable) surfaces here, and the protocol's own timers handle a peer
/// that does not answer.
pub(crate) fn receive(
    io: &mut UdpIo,
    time: &mut Timekeeper,
    batches: usize,
    mut each: impl FnMut(Time, SocketAddr, &[u8]),
) {
    for _ in 0..batches {
        match io.recv_batch(|peer, at, data| each(time.arrival(at), peer, data)) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(error = %e, "receive error");
                break;
            }
        }
    }
}

/// Sends what `next` writes (`next(now, buf)` fills `buf` with one datagram and describes it,
/// or returns `None` when core has nothing more now), in batches, until core has nothing, the
/// socket is full — then the rest waits in [`UdpIo`] ([`UdpIo::stalled`]) and the loop keeps
/// reading acknowledgements instead of blocking — or `budget` datagrams were taken. Returns
/// whether the budget ran out (core may have more: the driver should come back at once,
/// after it has looked at its commands, input and timers).
pub(crate) fn flush(
    io: &mut UdpIo,
    time: &mut Timekeeper,
    budget: usize,
    mut next: impl FnMut(Time, &mut [u8]) -> Option<Datagram>,
) -> io::Result<bool> {
    let mut taken = 0;
    io.send_from(|buf| {
        if taken == budget {
            return None;
        }
        let d = next(time.now(), buf)?;
        taken += 1;
        Some(d)
    })?;
    Ok(taken == budget)
}
