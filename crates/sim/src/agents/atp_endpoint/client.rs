//! The client agent: connects, runs the application, closes.

use super::host::{Host, socket_addr};
use super::port::Gone;
use super::{Ended, Faults};
use crate::agent::{Agent, InterfaceInfo};
use crate::agents::message_bytes::{MessageBytes, SenderHost};
use crate::agents::nai_app::{Ledger, NaiApp};
use crate::agents::nai_flow::DeliveryLog;
use crate::packet::{Addr, Packet};
use adaptnet_core::Time;
use adaptnet_core::atp::endpoint::{
    AtpConnection, ConnEvent, ConnectionId, EndpointConfig, EndpointEvent, EndpointStats,
};
use adaptnet_core::spp::SppEvent;

/// The client side: connects to the server at its start, runs an NAI application on the
/// connection once accepted, and closes gracefully at its stop (after
/// [`Faults::close_linger`]).
pub struct AtpClientAgent {
    host: Host,
    server: Addr,
    client_id: u64,
    conn: Option<ConnectionId>,
    app: SenderHost,
    started_app: bool,
    connected_at: Option<Time>,
    connect_failed_at: Option<Time>,
    ended: Option<Ended>,
    /// Messages the server sent this side (none in the experiments).
    inbox: DeliveryLog,
    /// (time, rate the scheduler plans with) at each change.
    rate_series: Vec<(Time, f64)>,
}

impl AtpClientAgent {
    /// A client on `local` for the server at `server`, running `app`; `client_id` names the
    /// connection on the wire (draw it from the run's seed). Messages carry `bytes`.
    pub fn new(
        local: Addr,
        server: Addr,
        config: EndpointConfig,
        client_id: u64,
        app: Box<dyn NaiApp>,
        bytes: MessageBytes,
        faults: Faults,
    ) -> AtpClientAgent {
        let mut host = SenderHost::new(app);
        host.set_bytes(bytes);
        AtpClientAgent {
            host: Host::new(local, config, faults),
            server,
            client_id,
            conn: None,
            app: host,
            started_app: false,
            connected_at: None,
            connect_failed_at: None,
            ended: None,
            inbox: DeliveryLog::default(),
            rate_series: Vec::new(),
        }
    }

    /// Every submission and outcome.
    pub fn ledger(&self) -> &Ledger {
        self.app.ledger()
    }

    /// The application.
    pub fn app(&self) -> &dyn NaiApp {
        self.app.app()
    }

    /// The message contents sent (digests by id).
    pub fn message_bytes(&self) -> Option<&MessageBytes> {
        self.app.message_bytes()
    }

    /// When the server accepted (the application started then).
    pub fn connected_at(&self) -> Option<Time> {
        self.connected_at
    }

    /// When the handshake failed, if it did.
    pub fn connect_failed_at(&self) -> Option<Time> {
        self.connect_failed_at
    }

    /// How the connection ended, if it has.
    pub fn ended(&self) -> Option<Ended> {
        self.ended
    }

    /// The connection, while open.
    pub fn connection(&self) -> Option<&AtpConnection> {
        self.host.endpoint.connection(self.conn?)
    }

    /// The endpoint's counters of dropped and statelessly answered datagrams.
    pub fn endpoint_stats(&self) -> &EndpointStats {
        self.host.endpoint.stats()
    }

    /// The rate NAI planned with, at each change.
    pub fn rate_series(&self) -> &[(Time, f64)] {
        &self.rate_series
    }

    /// Hands the endpoint's events to the application and the logs.
    fn pump(&mut self, now: Time) {
        while let Some(ev) = self.host.endpoint.poll_event() {
            match ev {
                EndpointEvent::Connected(id) => {
                    self.conn = Some(id);
                    self.connected_at = Some(now);
                    if let Some(c) = self.host.endpoint.connection_mut(id)
                        && !self.started_app
                    {
                        self.started_app = true;
                        self.app.start(now, c);
                    }
                }
                EndpointEvent::ConnectFailed(_) => {
                    self.connect_failed_at = Some(now);
                    self.app.stop();
                }
                EndpointEvent::Incoming(..) => {}
                EndpointEvent::Connection(id, ev) => self.connection_event(now, id, ev),
            }
        }
        if let Some(c) = self.connection() {
            let rate = c.bandwidth_bytes_per_s();
            if self.rate_series.last().is_none_or(|&(_, r)| r != rate) {
                self.rate_series.push((now, rate));
            }
        }
    }

    fn connection_event(&mut self, now: Time, id: ConnectionId, ev: ConnEvent) {
        match ev {
            ConnEvent::Nai(ev) => match self.host.endpoint.connection_mut(id) {
                Some(c) => self.app.on_event(now, &ev, c),
                None => self.app.on_event(now, &ev, &mut Gone),
            },
            ConnEvent::Delivered(d) => self.inbox.record(SppEvent::Delivered(d)),
            ConnEvent::Discarded(m) => self.inbox.record(SppEvent::Discarded { id: m }),
            ConnEvent::Closed(reason) => {
                self.ended = Some(Ended { at: now, reason });
                self.conn = None;
                self.app.stop();
            }
        }
    }
}

impl Agent for AtpClientAgent {
    fn start(&mut self, now: Time) {
        if self.host.dead {
            return;
        }
        let peer = socket_addr(self.server);
        // A fresh endpoint cannot refuse its first connection.
        if self
            .host
            .endpoint
            .connect(now, peer, self.client_id)
            .is_err()
        {
            self.connect_failed_at = Some(now);
        }
    }

    fn stop(&mut self, now: Time) {
        self.app.stop();
        if !self.host.dead {
            self.host.close_all(now);
            self.pump(now);
        }
    }

    fn handle_packet(&mut self, now: Time, packet: Packet) {
        self.host.handle_packet(now, &packet);
        self.pump(now);
    }

    fn handle_timeout(&mut self, now: Time) {
        self.host.handle_timeout(now);
        self.pump(now);
        if self.host.dead {
            return;
        }
        if let Some(c) = self
            .conn
            .and_then(|id| self.host.endpoint.connection_mut(id))
        {
            self.app.handle_timeout(now, c);
        }
        self.pump(now);
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Packet> {
        self.host.poll_transmit(now)
    }

    fn poll_timeout(&self) -> Option<Time> {
        let app = self.conn.and(self.app.poll_timeout());
        [self.host.poll_timeout(), app.filter(|_| !self.host.dead)]
            .into_iter()
            .flatten()
            .min()
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let mut v = Vec::new();
        if let Some(s) = self.connection().map(AtpConnection::stats) {
            v.extend([
                ("data_packets", s.spp.data_packets as f64),
                ("data_bytes", s.spp.data_bytes as f64),
                ("retransmitted_bytes", s.spp.retransmitted_bytes as f64),
                ("lost_packets", s.spp.lost_packets as f64),
                ("packet_pairs", s.packet_pairs as f64),
                ("malformed", s.malformed as f64),
            ]);
        }
        let e = self.endpoint_stats();
        v.push(("endpoint_malformed", e.malformed as f64));
        v
    }

    fn wants_interface_info(&self) -> bool {
        true
    }

    fn on_interface(&mut self, now: Time, info: &InterfaceInfo) {
        self.host.on_interface(now, info);
    }
}
