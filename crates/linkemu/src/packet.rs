//! What the emulated link carries: a real IP packet read from a TUN device.

use adaptnet_core::Time;
use adaptnet_sim::link::WireSize;

/// One IP packet on the emulated link.
#[derive(Clone, Debug)]
pub(crate) struct IpPacket {
    /// The packet, from its IP header on.
    pub bytes: Vec<u8>,
    /// Number in its direction, from 0, for the schedule log.
    pub id: u64,
    /// When it was offered to the link.
    pub offered: Time,
}

impl WireSize for IpPacket {
    /// The IP packet's length: what the model serialises, as the simulator's packets' network
    /// layer size.
    fn wire_len(&self) -> u32 {
        u32::try_from(self.bytes.len()).unwrap_or(u32::MAX)
    }
}
