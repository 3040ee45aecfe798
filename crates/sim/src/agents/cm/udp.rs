//! A greedy UDP sender on the CM's asynchronous API (papers/003 §3.1): `cm_request` for all it
//! has, a datagram per `app_notify` grant, `cm_notify` after each. Its feedback comes from the
//! CM's probes (§2.2.2), so it exercises the rate control, the probe protocol and exponential
//! aging without any transport of its own (Figures 4 and 6). Datagrams carry the CBR header.

use super::{ClosedFlow, CmHost, close_flow, closing_counters, cm_datagram, flow_key, peer_addr};
use crate::agent::Agent;
use crate::packet::{Addr, Packet};
use adaptnet_core::Time;
use adaptnet_core::cbr::CbrHeader;
use adaptnet_core::cm::{FlowId, FlowOptions};

/// What "unlimited" requests: more than any run can send.
const UNLIMITED_BYTES: u64 = 1 << 40;

/// The greedy CM datagram sender.
pub struct CmUdpSender {
    host: CmHost,
    local: Addr,
    remote: Addr,
    packet_bytes: u32,
    options: FlowOptions,
    /// Bytes left to send.
    remaining: u64,
    flow: Option<FlowId>,
    seq: u32,
    sent_bytes: u64,
    open_failed: bool,
    closed: Option<ClosedFlow>,
}

impl CmUdpSender {
    /// A sender of `packet_bytes`-byte datagrams (UDP payload, at least the 12-byte header)
    /// from `local` to `remote`, `bytes` in all (or unlimited), on `host`'s CM with `options`.
    pub fn new(
        host: CmHost,
        local: Addr,
        remote: Addr,
        packet_bytes: u32,
        bytes: Option<u64>,
        options: FlowOptions,
    ) -> CmUdpSender {
        CmUdpSender {
            host,
            local,
            remote,
            packet_bytes: packet_bytes.max(adaptnet_core::convert::usize_u32_sat(CbrHeader::LEN)),
            options,
            remaining: bytes.unwrap_or(UNLIMITED_BYTES),
            flow: None,
            seq: 0,
            sent_bytes: 0,
            open_failed: false,
            closed: None,
        }
    }

    /// The CM flow, while open.
    pub fn cm_flow(&self) -> Option<FlowId> {
        if self.closed.is_some() {
            None
        } else {
            self.flow
        }
    }

    /// What the CM knew of the flow when it closed (probe-measured bytes sent and lost).
    pub fn closed(&self) -> Option<ClosedFlow> {
        self.closed
    }

    /// Bytes sent.
    pub fn sent_bytes(&self) -> u64 {
        self.sent_bytes
    }

    fn close(&mut self, now: Time) {
        if let (Some(flow), None) = (self.flow, self.closed) {
            self.closed = Some(close_flow(&self.host, now, flow).unwrap_or_default());
        }
    }
}

impl Agent for CmUdpSender {
    fn start(&mut self, now: Time) {
        let dest = peer_addr(self.remote.node);
        let key = flow_key(self.local.port, self.remote.port);
        let mut cm = self.host.cm().borrow_mut();
        match cm.open(now, dest, key, self.options) {
            Ok(flow) => {
                self.flow = Some(flow);
                // cm_request for everything; grants of up to one MTU follow.
                let _ = cm.request(now, flow, self.remaining);
            }
            Err(_) => self.open_failed = true,
        }
    }

    fn stop(&mut self, now: Time) {
        self.close(now);
    }

    fn handle_packet(&mut self, _now: Time, _packet: Packet) {}

    fn handle_timeout(&mut self, _now: Time) {}

    fn poll_transmit(&mut self, now: Time) -> Option<Packet> {
        let flow = self.cm_flow()?;
        if self.remaining == 0 {
            self.close(now);
            return None;
        }
        let size = u64::from(self.packet_bytes).min(self.remaining);
        {
            let mut cm = self.host.cm().borrow_mut();
            // app_notify: send only within granted bytes.
            if cm.grant_balance(now, flow).ok()? < size {
                return None;
            }
            let _ = cm.notify(now, flow, size);
        }
        self.remaining -= size;
        self.sent_bytes += size;
        let seq = self.seq;
        self.seq = self.seq.wrapping_add(1);
        cm_datagram(self.local, self.remote, seq, now, size)
    }

    fn poll_timeout(&self) -> Option<Time> {
        // Grants arrive through the host agent, which has the host polled again.
        None
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let mut v = vec![
            ("cm_open_failed", f64::from(u8::from(self.open_failed))),
            ("sent_bytes", self.sent_bytes as f64),
        ];
        v.extend(closing_counters(self.closed.as_ref(), &self.host));
        v
    }
}
