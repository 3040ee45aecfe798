//! TCP/CM (papers/003 §3.2.1): the stock [`TcpSender`] whose congestion controller is a
//! [`CmController`] on its host's CM. The flow is opened (`cm_open`) when the connection
//! starts, seeded with the handshake's RTT sample, and closed (`cm_close`) when the transfer is
//! acknowledged or the flow stops.

use super::{ClosedFlow, CmHost, close_flow, flow_key, peer_addr};
use crate::agent::Agent;
use crate::agents::tcp::TcpSender;
use crate::packet::{Addr, Packet};
use adaptnet_core::Time;
use adaptnet_core::cc::CongestionController;
use adaptnet_core::cm::{CmController, FlowId, FlowOptions};
use adaptnet_core::tcp::{Connection, State, TcpConfig};
use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

/// A TCP sender whose congestion control is delegated to its host's CM.
pub struct TcpCmSender {
    inner: TcpSender,
    host: CmHost,
    /// The CM flow, set by the controller factory when the connection starts.
    flow: Rc<Cell<Option<FlowId>>>,
    /// `start`'s time, for the factory (which is not given one).
    now: Rc<Cell<Time>>,
    /// Whether `cm_open` failed (the connection then runs NewReno).
    open_failed: Rc<Cell<bool>>,
    seeded: bool,
    closed: Option<ClosedFlow>,
}

impl TcpCmSender {
    /// A TCP/CM sender from `local` to `remote` sending `bytes` (or unlimited), on `host`'s CM
    /// with `options` (weight; feedback is implicit: TCP's ACKs).
    pub fn new(
        host: CmHost,
        local: Addr,
        remote: Addr,
        config: TcpConfig,
        bytes: Option<u64>,
        isn: u32,
        options: FlowOptions,
    ) -> TcpCmSender {
        let flow = Rc::new(Cell::new(None));
        let now = Rc::new(Cell::new(Time::ZERO));
        let open_failed = Rc::new(Cell::new(false));
        let (f, n, failed) = (flow.clone(), now.clone(), open_failed.clone());
        let cm = host.cm().clone();
        let dest = peer_addr(remote.node);
        let key = flow_key(local.port, remote.port);
        let factory = move |cfg: &TcpConfig| -> Box<dyn CongestionController> {
            match CmController::open_with(&cm, n.get(), dest, key, options) {
                Ok((cc, id)) => {
                    f.set(Some(id));
                    cc
                }
                // Only `max_flows` can refuse a validated open; the connection still runs.
                Err(_) => {
                    failed.set(true);
                    Connection::newreno(cfg)
                }
            }
        };
        TcpCmSender {
            inner: TcpSender::new(local, remote, config, bytes, isn, Box::new(factory)),
            host,
            flow,
            now,
            open_failed,
            seeded: false,
            closed: None,
        }
    }

    /// The underlying TCP sender.
    pub fn tcp(&self) -> &TcpSender {
        &self.inner
    }

    /// The CM flow, while open.
    pub fn cm_flow(&self) -> Option<FlowId> {
        if self.closed.is_some() {
            None
        } else {
            self.flow.get()
        }
    }

    /// The shared host CM.
    pub fn host(&self) -> &CmHost {
        &self.host
    }

    fn close(&mut self, now: Time) {
        if self.closed.is_some() {
            return;
        }
        if let Some(flow) = self.flow.get() {
            self.closed = Some(close_flow(&self.host, now, flow).unwrap_or_default());
        }
    }

    /// Seeds the CM with the handshake's RTT (digest §5) and closes the flow when done.
    fn after_input(&mut self, now: Time) {
        if !self.seeded
            && let Some(conn) = self.inner.connection()
            && conn.is_established()
        {
            self.seeded = true;
            if let (Some(flow), Some(rtt)) = (self.flow.get(), conn.rtt().latest()) {
                let _ = CmController::seed_rtt(self.host.cm(), now, flow, rtt);
            }
        }
        let aborted = self
            .inner
            .connection()
            .is_some_and(|c| c.state() == State::Aborted);
        if self.inner.completed_at().is_some() || aborted {
            self.close(now);
        }
    }
}

impl Agent for TcpCmSender {
    fn start(&mut self, now: Time) {
        self.now.set(now);
        self.inner.start(now);
    }

    fn stop(&mut self, now: Time) {
        self.inner.stop(now);
        self.close(now);
    }

    fn handle_packet(&mut self, now: Time, packet: Packet) {
        self.inner.handle_packet(now, packet);
        self.after_input(now);
    }

    fn handle_timeout(&mut self, now: Time) {
        self.inner.handle_timeout(now);
        self.after_input(now);
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Packet> {
        self.inner.poll_transmit(now)
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.inner.poll_timeout()
    }

    fn take_rtt_samples(&mut self) -> Vec<(Time, Duration)> {
        self.inner.take_rtt_samples()
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let mut v = self.inner.counters();
        v.push((
            "cm_open_failed",
            f64::from(u8::from(self.open_failed.get())),
        ));
        v.extend(super::host_counters(&self.host));
        v
    }
}
