//! Reads and writes on the TUN devices, one packet per system call or, when the devices
//! carry offloads (`IFF_VNET_HDR`), many.
//!
//! With offloads the kernel hands over TCP (TSO) and UDP (`UDP_SEGMENT`) bursts as one GSO
//! super-packet of up to 64 KiB behind a virtio-net header: one `read(2)` instead of one per
//! packet. [`Reader`] splits it (with `tun-rs`) into the MTU-sized packets it stands for —
//! those, each with its own IP and transport header and checksum, are what the link model
//! serialises, delays and drops, exactly as without offloads. [`Writer`] hands a batch of
//! packets to the other device with `tun-rs`'s GRO: consecutive segments of one flow go back
//! into the kernel as one super-packet, so one `write(2)` — and one pass through the
//! receiving stack — carries many packets.

use crate::packet::HEADROOM;
use adaptnet_core::Time;
use std::io;

/// Most packets one GSO super-packet may split into: 64 KiB of TCP segments at Linux's
/// smallest MSS (48 bytes) is 1,366. A super-packet that would split into more is dropped
/// and counted (`unsplittable`).
const MAX_SEGMENTS: usize = 1_400;
/// The read buffer: a virtio-net header and the largest IP packet.
const RAW_BYTES: usize = tun_rs::VIRTIO_NET_HDR_LEN + 65_536;
/// Most packets handed to one batched write: bounds how long one batch takes, and so how
/// late its first packet can be measured (see [`Writer::hand_over`]).
pub(crate) const WRITE_BATCH: usize = tun_rs::IDEAL_BATCH_SIZE;

/// What one read brought.
pub(crate) enum Read {
    /// Nothing to read.
    Empty,
    /// This many packets, in [`Reader::packet`] `0..n`.
    Packets(usize),
    /// A frame the kernel handed over that could not be split into packets (dropped).
    Unsplittable,
}

/// The buffers of reads from either device (one thread reads both).
pub(crate) struct Reader {
    raw: Vec<u8>,
    segments: Vec<Vec<u8>>,
    sizes: Vec<usize>,
}

impl Reader {
    /// Buffers for packets of up to `mtu` bytes.
    pub(crate) fn new(mtu: u16) -> Reader {
        let mtu = usize::from(mtu).max(1500);
        let mut segments = vec![vec![0u8; mtu]; MAX_SEGMENTS];
        // Without offloads the one packet of a read lands in the first buffer: give it room
        // for any packet, whatever the device's MTU is changed to while the link runs.
        if let Some(first) = segments.first_mut() {
            first.resize(65_536, 0);
        }
        Reader {
            raw: vec![0u8; RAW_BYTES],
            segments,
            sizes: vec![0; MAX_SEGMENTS],
        }
    }

    /// One read from `dev`: one packet, or with offloads one super-packet split into packets.
    pub(crate) fn read(&mut self, dev: &tun_rs::SyncDevice) -> io::Result<Read> {
        loop {
            match dev.recv_multiple(&mut self.raw, &mut self.segments, &mut self.sizes, 0) {
                Ok(n) => return Ok(Read::Packets(n)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Read::Empty),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // A system call's failure carries its errno; `tun-rs`'s complaints about the
                // frame it read (a header it cannot parse, too many segments) carry none.
                Err(e) if e.raw_os_error().is_some() => return Err(e),
                Err(_) => return Ok(Read::Unsplittable),
            }
        }
    }

    /// The `i`-th packet of the last read.
    pub(crate) fn packet(&self, i: usize) -> &[u8] {
        match (self.segments.get(i), self.sizes.get(i)) {
            (Some(b), Some(&n)) => b.get(..n).unwrap_or(&[]),
            _ => &[],
        }
    }
}

/// What is kept of a packet in a write batch, to account for it once written.
pub(crate) struct Handed {
    /// When the model delivered it.
    pub model: Time,
    /// Its number in its direction.
    pub id: u64,
    /// When it was offered.
    pub offered: Time,
    /// Its length, bytes.
    pub len: usize,
}

/// Batched writes (one thread writes both devices, one batch at a time).
#[derive(Default)]
pub(crate) struct Writer {
    gro: tun_rs::GROTable,
    /// Packets (each behind [`HEADROOM`] free bytes) to hand over together.
    pub batch: Vec<Vec<u8>>,
    /// The same packets' accounts, in the same order.
    pub handed: Vec<Handed>,
}

impl Writer {
    /// Writes the batch to `dev` — with offloads coalescing what GRO can — and empties it;
    /// whether every write succeeded.
    pub(crate) fn hand_over(&mut self, dev: &tun_rs::SyncDevice) -> bool {
        let ok = if dev.tcp_gso() {
            dev.send_multiple(&mut self.gro, &mut self.batch, HEADROOM)
                .is_ok()
        } else {
            let mut ok = true;
            for p in &self.batch {
                ok &= dev.send(p.get(HEADROOM..).unwrap_or(&[])).is_ok();
            }
            ok
        };
        self.batch.clear();
        ok
    }
}
