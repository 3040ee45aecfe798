//! Packet captures in the classic pcap format (nanosecond timestamps, `LINKTYPE_RAW`), readable
//! by Wireshark and tshark.
//!
//! [`PcapWriter`] captures simulated packets in memory: each record holds a synthesised IPv4
//! header, a UDP header for UDP packets, and the packet's transport header bytes, then its
//! payload when the packet carries real bytes ([`Packet::payload`]). Virtual payload is not
//! materialised: the record's captured length is shorter than its original length, as with a
//! snap length. [`PcapStream`] writes real IP packets (the link emulator's) to any
//! [`std::io::Write`] as they pass, in the same format.

use crate::packet::{IPV4_HEADER_LEN, Packet, Proto, UDP_HEADER_LEN};
use adaptnet_core::Time;

/// pcap magic for nanosecond-resolution timestamps.
const MAGIC_NANOS: u32 = 0xa1b2_3c4d;
/// LINKTYPE_RAW: each record starts with an IPv4 or IPv6 header.
const LINKTYPE_RAW: u32 = 101;
/// Length of the pcap file header.
const HEADER_LEN: usize = 24;
/// Snap length written in the file header.
const SNAPLEN: u32 = 65_535;

/// An in-memory pcap file. Records may be added slightly out of time order (the two
/// directions of a link are drained independently); [`PcapWriter::bytes`] orders them.
#[derive(Clone, Debug)]
pub struct PcapWriter {
    buf: Vec<u8>,
    /// (time, offset, length) of each record in `buf`.
    index: Vec<(Time, usize, usize)>,
}

impl Default for PcapWriter {
    fn default() -> Self {
        PcapWriter::new()
    }
}

/// The pcap file header.
fn file_header() -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[0..4].copy_from_slice(&MAGIC_NANOS.to_le_bytes());
    h[4..6].copy_from_slice(&2u16.to_le_bytes()); // version 2.4
    h[6..8].copy_from_slice(&4u16.to_le_bytes());
    // thiszone and sigfigs stay zero.
    h[16..20].copy_from_slice(&SNAPLEN.to_le_bytes());
    h[20..24].copy_from_slice(&LINKTYPE_RAW.to_le_bytes());
    h
}

/// A record's header: timestamp, captured and original lengths.
fn record_header(at: Time, captured: usize, orig_len: u32) -> [u8; 16] {
    let ns = at.as_nanos();
    let mut h = [0u8; 16];
    h[0..4].copy_from_slice(&adaptnet_core::convert::u32_sat(ns / 1_000_000_000).to_le_bytes());
    h[4..8].copy_from_slice(&((ns % 1_000_000_000) as u32).to_le_bytes());
    h[8..12].copy_from_slice(&adaptnet_core::convert::usize_u32_sat(captured).to_le_bytes());
    h[12..16].copy_from_slice(&orig_len.to_le_bytes());
    h
}

impl PcapWriter {
    /// A capture with its file header written.
    pub fn new() -> PcapWriter {
        let mut buf = Vec::with_capacity(4096);
        buf.extend_from_slice(&file_header());
        PcapWriter {
            buf,
            index: Vec::new(),
        }
    }

    /// Appends one packet seen at `at`.
    pub fn record(&mut self, at: Time, p: &Packet) {
        use crate::link::WireSize;
        let orig_len = p.wire_len();
        let udp = p.proto == Proto::Udp;
        let captured = IPV4_HEADER_LEN as usize
            + if udp { UDP_HEADER_LEN as usize } else { 0 }
            + p.header.len()
            + p.payload.as_ref().map_or(0, |b| b.len());
        let offset = self.buf.len();
        self.buf
            .extend_from_slice(&record_header(at, captured, orig_len));

        let mut ip = [0u8; IPV4_HEADER_LEN as usize];
        ip[0] = 0x45;
        let total = u16::try_from(orig_len).unwrap_or(u16::MAX);
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        ip[6] = 0x40; // don't fragment
        ip[8] = 64; // TTL
        ip[9] = p.proto.number();
        ip[12..16].copy_from_slice(&p.src.node.ipv4());
        ip[16..20].copy_from_slice(&p.dst.node.ipv4());
        let sum = ipv4_checksum(&ip);
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
        self.buf.extend_from_slice(&ip);
        if udp {
            let udp_len = u16::try_from(orig_len - IPV4_HEADER_LEN).unwrap_or(u16::MAX);
            self.buf.extend_from_slice(&p.src.port.to_be_bytes());
            self.buf.extend_from_slice(&p.dst.port.to_be_bytes());
            self.buf.extend_from_slice(&udp_len.to_be_bytes());
            self.buf.extend_from_slice(&0u16.to_be_bytes()); // checksum optional in IPv4
        }
        self.buf.extend_from_slice(&p.header);
        if let Some(b) = &p.payload {
            self.buf.extend_from_slice(b);
        }
        self.index.push((at, offset, self.buf.len() - offset));
    }

    /// Appends one real IP packet (`ip` starts with its IPv4 or IPv6 header) seen at `at`.
    pub fn record_ip(&mut self, at: Time, ip: &[u8]) {
        let offset = self.buf.len();
        let len = adaptnet_core::convert::usize_u32_sat(ip.len());
        self.buf
            .extend_from_slice(&record_header(at, ip.len(), len));
        self.buf.extend_from_slice(ip);
        self.index.push((at, offset, self.buf.len() - offset));
    }

    /// Records written.
    pub fn records(&self) -> usize {
        self.index.len()
    }

    /// The file contents, records in time order (ties in the order they were recorded).
    pub fn bytes(&self) -> Vec<u8> {
        let mut order: Vec<&(Time, usize, usize)> = self.index.iter().collect();
        order.sort_by_key(|&&(t, off, _)| (t, off));
        let mut out = Vec::with_capacity(self.buf.len());
        out.extend_from_slice(self.buf.get(..HEADER_LEN).unwrap_or_default());
        for &&(_, off, len) in &order {
            out.extend_from_slice(self.buf.get(off..off + len).unwrap_or_default());
        }
        out
    }
}

/// A pcap file written as packets pass, for real IP packets in time order (the link
/// emulator's captures): nothing is held in memory beyond `W`'s own buffer.
#[derive(Debug)]
pub struct PcapStream<W: std::io::Write> {
    out: W,
    records: u64,
}

impl<W: std::io::Write> PcapStream<W> {
    /// Writes the file header to `out`.
    pub fn new(mut out: W) -> std::io::Result<PcapStream<W>> {
        out.write_all(&file_header())?;
        Ok(PcapStream { out, records: 0 })
    }

    /// Writes one IP packet (`ip` starts with its IPv4 or IPv6 header) seen at `at`, which is
    /// the time since the capture began (Wireshark shows it as seconds since 1970).
    pub fn record(&mut self, at: Time, ip: &[u8]) -> std::io::Result<()> {
        let len = adaptnet_core::convert::usize_u32_sat(ip.len());
        self.out.write_all(&record_header(at, ip.len(), len))?;
        self.out.write_all(ip)?;
        self.records += 1;
        Ok(())
    }

    /// Records written.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Flushes and returns the writer.
    pub fn finish(mut self) -> std::io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// RFC 791 header checksum.
fn ipv4_checksum(header: &[u8]) -> u16 {
    let mut sum: u32 = header
        .chunks(2)
        .map(|c| match *c {
            [a, b] => u32::from(u16::from_be_bytes([a, b])),
            [a] => u32::from(u16::from_be_bytes([a, 0])),
            _ => 0,
        })
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !adaptnet_core::convert::u16_sat(u64::from(sum))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{Addr, NodeId};

    #[test]
    fn file_header_and_record_layout() {
        let mut w = PcapWriter::new();
        assert_eq!(w.bytes().len(), HEADER_LEN);
        let mut p = Packet::new(
            Addr {
                node: NodeId(0),
                port: 1,
            },
            Addr {
                node: NodeId(1),
                port: 2,
            },
            Proto::Udp,
            1000,
        );
        p.header.extend_from_slice(&[1, 2, 3, 4]);
        w.record(Time::from_millis(1500), &p);
        let b = &w.bytes();
        assert_eq!(&b[24..28], &1u32.to_le_bytes());
        assert_eq!(&b[28..32], &500_000_000u32.to_le_bytes());
        assert_eq!(&b[32..36], &(20u32 + 8 + 4).to_le_bytes());
        assert_eq!(&b[36..40], &(20u32 + 8 + 4 + 1000).to_le_bytes());
        // The IPv4 header checksum verifies to zero.
        assert_eq!(ipv4_checksum(&b[40..60]), 0);
        assert_eq!(&b[52..56], &[10, 0, 0, 1]);
        // A packet that carries its bytes is captured whole.
        let mut w = PcapWriter::new();
        assert!(
            !p.set_payload(&[7; 999]),
            "the payload must be payload_len long"
        );
        assert!(p.set_payload(&[7; 1000]));
        w.record(Time::ZERO, &p);
        let b = &w.bytes();
        assert_eq!(&b[32..36], &(20u32 + 8 + 4 + 1000).to_le_bytes());
        assert_eq!(b.len(), HEADER_LEN + 16 + 20 + 8 + 4 + 1000);
        assert_eq!(b.last(), Some(&7));
    }

    #[test]
    fn streamed_ip_packets_match_the_in_memory_writer() {
        let ip = [
            0x45u8, 0, 0, 24, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2, 1, 2, 3, 4,
        ];
        let mut mem = PcapWriter::new();
        mem.record_ip(Time::from_millis(2500), &ip);
        let mut stream = PcapStream::new(Vec::new()).expect("vec");
        stream.record(Time::from_millis(2500), &ip).expect("vec");
        assert_eq!(stream.records(), 1);
        let bytes = stream.finish().expect("vec");
        assert_eq!(bytes, mem.bytes());
        assert_eq!(&bytes[24..28], &2u32.to_le_bytes());
        assert_eq!(&bytes[32..36], &24u32.to_le_bytes());
        assert_eq!(&bytes[40..], &ip);
    }

    #[test]
    fn records_come_out_in_time_order() {
        let mut w = PcapWriter::new();
        let p = Packet::new(
            Addr {
                node: NodeId(0),
                port: 1,
            },
            Addr {
                node: NodeId(1),
                port: 2,
            },
            Proto::Udp,
            0,
        );
        w.record(Time::from_secs(2), &p);
        w.record(Time::from_secs(1), &p);
        let b = w.bytes();
        assert_eq!(&b[24..28], &1u32.to_le_bytes());
        assert_eq!(&b[24 + 16 + 28..24 + 16 + 28 + 4], &2u32.to_le_bytes());
    }
}
