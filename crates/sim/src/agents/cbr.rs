//! Constant-bit-rate UDP source and sink agents around [`adaptnet_core::cbr`].

use crate::agent::Agent;
use crate::packet::{Addr, Packet, Proto};
use adaptnet_core::Time;
use adaptnet_core::cbr::{CbrHeader, CbrSink, CbrSource};

/// A UDP datagram from `src` to `dst` carrying the CBR header (sequence number, send time)
/// and `payload_len` bytes after it.
pub(crate) fn cbr_packet(
    src: Addr,
    dst: Addr,
    header: &CbrHeader,
    payload_len: u32,
) -> Option<Packet> {
    Packet::with_header(src, dst, Proto::Udp, CbrHeader::LEN, payload_len, |buf| {
        header.emit(buf)
    })
    .ok()
}

/// Sends fixed-size UDP datagrams at a fixed rate between its start and stop.
pub struct CbrSender {
    local: Addr,
    remote: Addr,
    rate_bytes_per_s: f64,
    datagram_bytes: u32,
    source: Option<CbrSource>,
}

impl CbrSender {
    /// A source of `datagram_bytes`-byte UDP payloads at `rate_bytes_per_s` (payload rate).
    pub fn new(local: Addr, remote: Addr, rate_bytes_per_s: f64, datagram_bytes: u32) -> CbrSender {
        CbrSender {
            local,
            remote,
            rate_bytes_per_s,
            datagram_bytes,
            source: None,
        }
    }
}

impl Agent for CbrSender {
    fn start(&mut self, now: Time) {
        self.source = Some(CbrSource::new(
            self.rate_bytes_per_s,
            self.datagram_bytes,
            now,
            Time::MAX,
        ));
    }

    fn stop(&mut self, _now: Time) {
        self.source = None;
    }

    fn handle_packet(&mut self, _now: Time, _packet: Packet) {}

    fn handle_timeout(&mut self, _now: Time) {}

    fn poll_transmit(&mut self, now: Time) -> Option<Packet> {
        let d = self.source.as_mut()?.poll_transmit(now)?;
        cbr_packet(self.local, self.remote, &d.header, d.payload_len)
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.source.as_ref()?.poll_timeout()
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        vec![(
            "datagrams_sent",
            f64::from(self.source.as_ref().map_or(0, CbrSource::sent)),
        )]
    }
}

/// Counts CBR datagrams.
#[derive(Default)]
pub struct CbrReceiver {
    sink: CbrSink,
    malformed: u64,
}

impl CbrReceiver {
    /// A sink that has seen nothing.
    pub fn new() -> CbrReceiver {
        CbrReceiver::default()
    }

    /// The sink's counters.
    pub fn sink(&self) -> &CbrSink {
        &self.sink
    }

    /// Counts a datagram and returns its UDP payload bytes (CBR header included), or `None`
    /// if its header does not parse (it is counted as malformed).
    pub(crate) fn receive(&mut self, now: Time, packet: &Packet) -> Option<u64> {
        match CbrHeader::parse(&packet.header) {
            Ok(h) => {
                let bytes = packet.header.len() as u64 + u64::from(packet.payload_len);
                self.sink.handle_datagram(now, &h, bytes);
                Some(bytes)
            }
            Err(_) => {
                self.malformed += 1;
                None
            }
        }
    }
}

impl Agent for CbrReceiver {
    fn handle_packet(&mut self, now: Time, packet: Packet) {
        self.receive(now, &packet);
    }

    fn handle_timeout(&mut self, _now: Time) {}

    fn poll_transmit(&mut self, _now: Time) -> Option<Packet> {
        None
    }

    fn poll_timeout(&self) -> Option<Time> {
        None
    }

    fn delivered_bytes(&self) -> u64 {
        self.sink.received_bytes()
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("datagrams_received", self.sink.received() as f64),
            ("datagrams_lost", self.sink.lost() as f64),
            ("malformed", self.malformed as f64),
        ]
    }
}
