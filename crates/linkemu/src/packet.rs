//! What the emulated link carries: a real IP packet read from a TUN device.

use adaptnet_core::Time;
use adaptnet_sim::link::WireSize;

/// Bytes kept free in front of every packet: a device with offloads takes each write behind
/// a virtio-net header, which is then filled in place instead of copying the packet.
pub(crate) const HEADROOM: usize = tun_rs::VIRTIO_NET_HDR_LEN;

/// One IP packet on the emulated link.
#[derive(Clone, Debug)]
pub(crate) struct IpPacket {
    /// [`HEADROOM`] bytes, then the packet from its IP header on.
    buf: Vec<u8>,
    /// Number in its direction, from 0, for the schedule log.
    pub id: u64,
    /// When it was offered to the link.
    pub offered: Time,
}

impl IpPacket {
    /// A copy of `bytes` (an IP packet), numbered `id`, offered at `offered`.
    pub(crate) fn new(bytes: &[u8], id: u64, offered: Time) -> IpPacket {
        let mut buf = Vec::with_capacity(HEADROOM + bytes.len());
        buf.resize(HEADROOM, 0);
        buf.extend_from_slice(bytes);
        IpPacket { buf, id, offered }
    }

    /// The packet, from its IP header on.
    pub(crate) fn bytes(&self) -> &[u8] {
        self.buf.get(HEADROOM..).unwrap_or(&[])
    }

    /// Its buffer, headroom included, for a write.
    pub(crate) fn into_buf(self) -> Vec<u8> {
        self.buf
    }
}

impl WireSize for IpPacket {
    /// The IP packet's length: what the model serialises, as the simulator's packets' network
    /// layer size.
    fn wire_len(&self) -> u32 {
        u32::try_from(self.bytes().len()).unwrap_or(u32::MAX)
    }
}
