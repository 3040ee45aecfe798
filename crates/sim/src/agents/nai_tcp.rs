//! The paper's TCP baselines as agents (`papers/000_97f7680fd99dd928.txt` §5.2): NAI-TCP (one
//! blocking connection) and NAI-MTCPk (one connection per priority level, k for the highest),
//! over the simulator's NewReno ([`adaptnet_core::tcp::Connection`]).
//!
//! The decisions (queues, the half-timeout rule, early termination, acknowledgement matching)
//! are [`BaselineSender`]'s; the agents translate: records become stream bytes on connection
//! `i` (headers carried beside the stream by [`StreamTags`]), the receiver's 1-byte
//! acknowledgements come back as bytes read from the same connection.

use super::nai_app::{AppHost, Ledger, NaiApp};
use super::nai_flow::{DeliveryLog, NaiFlow};
use super::stream::{ConnSet, StreamTags};
use crate::agent::Agent;
use crate::packet::{Addr, NodeId, Packet, Proto};
use crate::world::{AgentId, World, WorldError};
use adaptnet_core::Time;
use adaptnet_core::nai::baseline::record::{RECORD_HEADER_LEN, RecordHeader, RecordReceiver};
use adaptnet_core::nai::baseline::{BaselineConfig, BaselineKind, BaselineSender};
use adaptnet_core::spp::Delivery;
use adaptnet_core::tcp::TcpConfig;

/// The sending side of NAI-TCP / NAI-MTCPk, hosting an application.
pub struct NaiTcpAgent {
    sender: BaselineSender,
    conns: ConnSet,
    tags: Vec<StreamTags>,
    host: AppHost,
    isn: u32,
    started: bool,
}

impl NaiTcpAgent {
    /// A sender whose connection `i` runs from `(local_node, local_port + i)` to
    /// `(remote_node, remote_port + i)`, with `tags[i]` shared with the receiver.
    pub fn new(
        config: BaselineConfig,
        tcp: TcpConfig,
        local: Addr,
        remote: Addr,
        tags: Vec<StreamTags>,
        app: Box<dyn NaiApp>,
    ) -> NaiTcpAgent {
        let sender = BaselineSender::new(config);
        let pairs = port_pairs(local, remote, sender.connections());
        NaiTcpAgent {
            conns: ConnSet::new(tcp, pairs),
            sender,
            tags,
            host: AppHost::new(app),
            isn: 1_000,
            started: false,
        }
    }

    /// The baseline state machine (statistics, connection count).
    pub fn sender(&self) -> &BaselineSender {
        &self.sender
    }

    /// Every submission and outcome.
    pub fn ledger(&self) -> &Ledger {
        self.host.ledger()
    }

    /// The application.
    pub fn app(&self) -> &dyn NaiApp {
        self.host.app()
    }

    /// TCP connections in use.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// Ends the run: messages still live get their final outcome now (see
    /// [`BaselineSender::finish_all`]); returns how many.
    pub fn finish_all(&mut self, now: Time) -> usize {
        let n = self.sender.finish_all(now);
        self.pump(now);
        n
    }

    /// Writes what the sender allows on every connection and routes events, until quiet.
    fn pump(&mut self, now: Time) {
        loop {
            let mut progress = false;
            for i in 0..self.conns.len() {
                let Some(slot) = self.conns.slot_mut(i) else {
                    continue;
                };
                let Some(conn) = slot.conn.as_mut() else {
                    continue;
                };
                while let Some(r) = self.sender.poll_transmit(now, i, conn.bytes_unacked()) {
                    let mut buf = [0u8; RECORD_HEADER_LEN];
                    if r.emit(&mut buf).is_err() {
                        continue;
                    }
                    conn.write(r.stream_len());
                    slot.written += r.stream_len();
                    if let Some(t) = self.tags.get(i) {
                        t.push(slot.written, &buf);
                    }
                    progress = true;
                }
            }
            while let Some(ev) = self.sender.poll_event() {
                self.host.on_event(now, &ev, &mut self.sender);
                progress = true;
            }
            if !progress {
                break;
            }
        }
    }
}

fn port_pairs(local: Addr, remote: Addr, n: usize) -> Vec<(Addr, Addr)> {
    (0..n)
        .map(|i| {
            let i = u16::try_from(i).unwrap_or(u16::MAX);
            (
                Addr {
                    node: local.node,
                    port: local.port.wrapping_add(i),
                },
                Addr {
                    node: remote.node,
                    port: remote.port.wrapping_add(i),
                },
            )
        })
        .collect()
}

impl Agent for NaiTcpAgent {
    fn start(&mut self, now: Time) {
        self.conns.connect_all(self.isn);
        self.started = true;
        self.host.start(now, &mut self.sender);
        self.pump(now);
    }

    fn stop(&mut self, _now: Time) {
        self.host.stop();
    }

    fn handle_packet(&mut self, now: Time, packet: Packet) {
        if let Some(i) = self.conns.handle_packet(now, &packet, self.isn)
            && let Some(conn) = self.conns.slot_mut(i).and_then(|s| s.conn.as_mut())
        {
            let acks = conn.bytes_unread();
            conn.read(acks);
            self.sender.handle_ack_bytes(now, i, acks);
        }
        self.pump(now);
    }

    fn handle_timeout(&mut self, now: Time) {
        self.conns.handle_timeout(now);
        self.sender.handle_timeout(now);
        self.pump(now);
        self.host.handle_timeout(now, &mut self.sender);
        self.pump(now);
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Packet> {
        self.conns.poll_transmit(now)
    }

    fn poll_timeout(&self) -> Option<Time> {
        if !self.started {
            return None;
        }
        [
            self.conns.poll_timeout(),
            self.sender.poll_timeout(),
            self.host.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let s = self.sender.stats();
        vec![
            ("connections", self.conns.len() as f64),
            ("half_timeout_discards", s.half_timeout_discards as f64),
            ("aborted_partial", s.aborted_partial as f64),
            ("expired_after_written", s.expired_after_written as f64),
            ("expired_queued", s.expired_queued as f64),
            ("bytes_written", s.bytes_written as f64),
            ("malformed", self.conns.malformed as f64),
        ]
    }
}

/// The receiving side of NAI-TCP / NAI-MTCPk: accepts the connections, reassembles records,
/// delivers messages and writes one acknowledgement byte per message.
pub struct NaiTcpSink {
    conns: ConnSet,
    tags: Vec<StreamTags>,
    rx: Vec<RecordReceiver>,
    log: DeliveryLog,
    malformed_records: u64,
}

impl NaiTcpSink {
    /// A receiver whose connection `i` is `(local_node, local_port + i)` ↔
    /// `(remote_node, remote_port + i)`.
    pub fn new(
        tcp: TcpConfig,
        local: Addr,
        remote: Addr,
        connections: usize,
        tags: Vec<StreamTags>,
    ) -> NaiTcpSink {
        NaiTcpSink {
            conns: ConnSet::new(tcp, port_pairs(local, remote, connections)),
            tags,
            rx: (0..connections).map(|_| RecordReceiver::new()).collect(),
            log: DeliveryLog::default(),
            malformed_records: 0,
        }
    }

    /// Messages delivered, in order of delivery.
    pub fn deliveries(&self) -> &[Delivery] {
        self.log.deliveries()
    }

    /// Partly received messages dropped on an ABORT record.
    pub fn discards(&self) -> u64 {
        self.log.discards()
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        (0..self.conns.len())
            .filter(|&i| self.conns.slot(i).is_some_and(|s| s.conn.is_some()))
            .count()
    }
}

impl Agent for NaiTcpSink {
    fn handle_packet(&mut self, now: Time, packet: Packet) {
        let Some(i) = self.conns.handle_packet(now, &packet, 7_000) else {
            return;
        };
        let (Some(slot), Some(tags), Some(rx)) =
            (self.conns.slot_mut(i), self.tags.get(i), self.rx.get_mut(i))
        else {
            return;
        };
        let Some(conn) = slot.conn.as_mut() else {
            return;
        };
        conn.read(conn.bytes_unread());
        for h in tags.take_through(conn.bytes_delivered()) {
            match RecordHeader::parse(&h) {
                Ok(r) => {
                    if rx.handle_record(now, &r).is_err() {
                        self.malformed_records += 1;
                    }
                }
                Err(_) => self.malformed_records += 1,
            }
        }
        let acks = rx.take_acks();
        if acks > 0 {
            conn.write(acks);
            slot.written += acks;
        }
        while let Some(ev) = rx.poll_event() {
            self.log.record(ev);
        }
    }

    fn handle_timeout(&mut self, now: Time) {
        self.conns.handle_timeout(now);
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Packet> {
        self.conns.poll_transmit(now)
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.conns.poll_timeout()
    }

    fn delivered_bytes(&self) -> u64 {
        self.log.message_bytes()
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("messages_delivered", self.log.deliveries().len() as f64),
            ("discards", self.log.discards() as f64),
            ("malformed_records", self.malformed_records as f64),
            ("malformed", self.conns.malformed as f64),
        ]
    }
}

/// Installs a baseline sender on `from` and its receiver on `to` (ports `port`, `port + 1`, …
/// on both), as one flow active over `[start, stop)`. Returns (sender, receiver).
#[allow(clippy::too_many_arguments)]
pub fn install(
    world: &mut World,
    name: &str,
    kind: BaselineKind,
    levels: u8,
    from: NodeId,
    to: NodeId,
    port: u16,
    app: Box<dyn NaiApp>,
    start: Time,
    stop: Time,
) -> Result<(AgentId, AgentId), WorldError> {
    let tcp = TcpConfig::default();
    let config = BaselineConfig::new(kind, levels);
    let n = BaselineSender::new(config.clone()).connections();
    let tags: Vec<StreamTags> = (0..n).map(|_| StreamTags::new()).collect();
    let flow = NaiFlow {
        name,
        kind: "nai-tcp",
        from,
        to,
        proto: Proto::Tcp,
        port,
        extra_ports: (1..n)
            .map(|i| {
                (
                    Proto::Tcp,
                    port.wrapping_add(u16::try_from(i).unwrap_or(u16::MAX)),
                )
            })
            .collect(),
        start,
        stop,
    };
    let (local, remote) = flow.addrs();
    let sender = NaiTcpAgent::new(config, tcp.clone(), local, remote, tags.clone(), app);
    let sink = NaiTcpSink::new(tcp, remote, local, n, tags);
    flow.install(world, Box::new(sender), Box::new(sink))
}
