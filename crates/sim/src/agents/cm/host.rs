//! The host-wide CM agent: timers, probes and responses, events (see the [module docs](super)).

use super::{CM_PORT, CmHost, node_of, peer_addr};
use crate::agent::Agent;
use crate::packet::{Addr, Packet, Proto};
use adaptnet_core::Time;
use adaptnet_core::cm::CmEvent;
use adaptnet_core::cm::CmTransmit;
use adaptnet_core::cm::probe::{self, CmPacket};
use std::collections::VecDeque;

/// Most control packets waiting to leave (the CM and the receiver bound their own queues too).
const MAX_OUT: usize = 4096;

/// The agent of a host's CM, bound to UDP [`CM_PORT`]. Add it after every flow agent of its
/// host (see the [module docs](super)).
pub struct CmHostAgent {
    host: CmHost,
    out: VecDeque<Packet>,
    /// A wake-up at this instant was asked for, so that flows polled before this agent see
    /// the grants and rate changes it just drained.
    repoll_at: Option<Time>,
    malformed: u64,
    unroutable: u64,
    probes_answered: u64,
}

impl CmHostAgent {
    /// The agent of `host`.
    pub fn new(host: CmHost) -> CmHostAgent {
        CmHostAgent {
            host,
            out: VecDeque::new(),
            repoll_at: None,
            malformed: 0,
            unroutable: 0,
            probes_answered: 0,
        }
    }

    /// The shared host state.
    pub fn host(&self) -> &CmHost {
        &self.host
    }

    /// Control packets that did not parse.
    pub fn malformed(&self) -> u64 {
        self.malformed
    }

    fn queue(&mut self, t: CmTransmit) {
        let Some(node) = node_of(t.to) else {
            self.unroutable += 1;
            return;
        };
        if self.out.len() >= MAX_OUT {
            self.unroutable += 1;
            return;
        }
        let local = Addr {
            node: self.host.node(),
            port: CM_PORT,
        };
        let remote = Addr {
            node,
            port: CM_PORT,
        };
        let len = t.packet.buffer_len();
        match Packet::with_header(local, remote, Proto::Udp, len, 0, |buf| t.packet.emit(buf)) {
            Ok(p) => self.out.push_back(p),
            Err(_) => self.unroutable += 1,
        }
    }

    /// Runs due CM timers and drains the CM's and the receiver's outputs (the digest's "after
    /// any event on a host" step).
    fn service(&mut self, now: Time) {
        let mut transmits = Vec::new();
        let mut granted = Vec::new();
        let mut posted = false;
        {
            let mut cm = self.host.cm().borrow_mut();
            if cm.poll_timeout().is_some_and(|t| t <= now) {
                cm.handle_timeout(now);
            }
            while let Some(t) = cm.poll_transmit(now) {
                transmits.push(t);
            }
            while let Some(ev) = cm.poll_event() {
                match ev {
                    CmEvent::Grant { flow, .. } => granted.push(flow),
                    CmEvent::RateChange {
                        flow,
                        rate_bytes_per_s,
                        ..
                    } => posted |= self.host.post_rate_change(flow, rate_bytes_per_s),
                    // The simulator's CM applications make no requests with a latency.
                    CmEvent::RequestExpired { .. } => {}
                }
            }
        }
        {
            let mut rx = self.host.receiver().borrow_mut();
            while let Some(t) = rx.poll_transmit(now) {
                self.probes_answered += 1;
                transmits.push(t);
            }
        }
        for t in transmits {
            self.queue(t);
        }
        // A grant still unused, or a rate change not yet applied, belongs to a flow that may
        // have been polled before this agent: have the host polled again at this instant.
        let mut cm = self.host.cm().borrow_mut();
        let unused_grant = granted
            .iter()
            .any(|f| cm.grant_balance(now, *f).is_ok_and(|b| b > 0));
        drop(cm);
        if unused_grant || posted {
            self.repoll_at = Some(now);
        }
    }
}

impl Agent for CmHostAgent {
    fn handle_packet(&mut self, now: Time, packet: Packet) {
        let parsed = match probe::parse(&packet.header) {
            Ok(p) => p,
            Err(_) => {
                self.malformed += 1;
                return;
            }
        };
        let from = peer_addr(packet.src.node);
        match &parsed {
            CmPacket::Response(_) => self
                .host
                .cm()
                .borrow_mut()
                .handle_packet(now, from, &parsed),
            CmPacket::Probe(_) => self
                .host
                .receiver()
                .borrow_mut()
                .handle_packet(now, from, &parsed),
        }
    }

    fn handle_timeout(&mut self, now: Time) {
        if self.repoll_at.is_some_and(|t| t <= now) {
            self.repoll_at = None;
        }
        self.service(now);
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Packet> {
        if self.out.is_empty() {
            self.service(now);
        }
        self.out.pop_front()
    }

    fn poll_timeout(&self) -> Option<Time> {
        let cm = self.host.cm().borrow().poll_timeout();
        match (cm, self.repoll_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let mut v = super::host_counters(&self.host);
        v.push(("cm_malformed", self.malformed as f64));
        v.push(("cm_unroutable", self.unroutable as f64));
        v.push(("cm_responses_sent", self.probes_answered as f64));
        v
    }
}
