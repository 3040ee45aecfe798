//! TCP sender and receiver agents around [`adaptnet_core::tcp::Connection`].

use super::RttRecorder;
use crate::agent::Agent;
use crate::packet::{Addr, Packet, Proto};
use adaptnet_core::Time;
use adaptnet_core::cc::CongestionController;
use adaptnet_core::tcp::{Connection, Segment, TcpConfig, TcpRepr};
use std::time::Duration;

/// Builds the congestion controller of a connection when it opens.
pub type CcFactory = Box<dyn FnMut(&TcpConfig) -> Box<dyn CongestionController>>;

/// Turns a segment into a packet; `None` only if the header cannot be encoded, which the
/// header's own `buffer_len` rules out.
pub fn segment_packet(src: Addr, dst: Addr, seg: &Segment) -> Option<Packet> {
    Packet::with_header(
        src,
        dst,
        Proto::Tcp,
        seg.repr.buffer_len(),
        seg.payload_len,
        |buf| seg.repr.emit(buf),
    )
    .ok()
}

/// The active side of a bulk (or sized) TCP transfer.
pub struct TcpSender {
    local: Addr,
    remote: Addr,
    config: TcpConfig,
    cc_factory: CcFactory,
    /// Bytes to send; `None` sends until stopped.
    bytes: Option<u64>,
    isn: u32,
    conn: Option<Connection>,
    stopped: bool,
    completed_at: Option<Time>,
    rtt: RttRecorder,
    malformed: u64,
}

impl TcpSender {
    /// A sender from `local` to `remote` sending `bytes` (or unlimited), whose controller is
    /// made by `cc_factory` when the flow starts.
    pub fn new(
        local: Addr,
        remote: Addr,
        config: TcpConfig,
        bytes: Option<u64>,
        isn: u32,
        cc_factory: CcFactory,
    ) -> TcpSender {
        TcpSender {
            local,
            remote,
            config,
            cc_factory,
            bytes,
            isn,
            conn: None,
            stopped: false,
            completed_at: None,
            rtt: RttRecorder::default(),
            malformed: 0,
        }
    }

    /// A NewReno sender.
    pub fn newreno(
        local: Addr,
        remote: Addr,
        config: TcpConfig,
        bytes: Option<u64>,
        isn: u32,
    ) -> TcpSender {
        TcpSender::new(
            local,
            remote,
            config,
            bytes,
            isn,
            Box::new(Connection::newreno),
        )
    }

    /// The connection, once started.
    pub fn connection(&self) -> Option<&Connection> {
        self.conn.as_ref()
    }

    /// The connection, mutably (for environment actions in experiments).
    pub fn connection_mut(&mut self) -> Option<&mut Connection> {
        self.conn.as_mut()
    }

    /// When a sized transfer was fully acknowledged.
    pub fn completed_at(&self) -> Option<Time> {
        self.completed_at
    }
}

impl Agent for TcpSender {
    fn start(&mut self, _now: Time) {
        let cc = (self.cc_factory)(&self.config);
        let mut conn = Connection::connect(
            self.config.clone(),
            self.local.port,
            self.remote.port,
            self.isn,
            cc,
        );
        match self.bytes {
            Some(n) => {
                conn.write(n);
                conn.close();
            }
            // "Unlimited": more than any run can send; the flow goes quiet at `stop`.
            None => conn.write(1 << 50),
        }
        self.conn = Some(conn);
    }

    fn stop(&mut self, _now: Time) {
        self.stopped = true;
    }

    fn handle_packet(&mut self, now: Time, packet: Packet) {
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        let Ok(repr) = TcpRepr::parse(&packet.header) else {
            self.malformed += 1;
            return;
        };
        let before = conn.rtt().samples();
        conn.handle_segment(now, &repr, packet.payload_len);
        if conn.rtt().samples() > before
            && let Some(rtt) = conn.rtt().latest()
        {
            self.rtt.offer(now, rtt);
        }
        if self.completed_at.is_none() && self.bytes.is_some() && conn.send_complete() {
            self.completed_at = Some(now);
        }
        while conn.poll_event().is_some() {}
    }

    fn handle_timeout(&mut self, now: Time) {
        if let Some(conn) = self.conn.as_mut() {
            conn.handle_timeout(now);
        }
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Packet> {
        if self.stopped {
            return None;
        }
        let seg = self.conn.as_mut()?.poll_transmit(now)?;
        segment_packet(self.local, self.remote, &seg)
    }

    fn poll_timeout(&self) -> Option<Time> {
        if self.stopped {
            return None;
        }
        self.conn.as_ref()?.poll_timeout()
    }

    fn take_rtt_samples(&mut self) -> Vec<(Time, Duration)> {
        self.rtt.take()
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let Some(c) = self.conn.as_ref() else {
            return Vec::new();
        };
        let s = c.stats();
        let mut v = vec![
            ("segments_sent", s.segments_sent as f64),
            ("retransmits", s.segments_retransmitted as f64),
            ("fast_retransmits", s.fast_retransmits as f64),
            ("timeouts", s.timeouts as f64),
            ("rtt_samples", c.rtt().samples() as f64),
            ("cwnd_bytes", c.cc().window() as f64),
            ("malformed", self.malformed as f64),
        ];
        if let Some(srtt) = c.rtt().srtt() {
            v.push(("srtt_ms", srtt.as_secs_f64() * 1e3));
        }
        if let Some(t) = self.completed_at {
            v.push(("completed_s", t.as_secs_f64()));
        }
        v
    }
}

/// The passive side: accepts one connection from its peer and reads everything.
pub struct TcpReceiver {
    local: Addr,
    remote: Addr,
    config: TcpConfig,
    isn: u32,
    conn: Option<Connection>,
    malformed: u64,
}

impl TcpReceiver {
    /// A receiver on `local` accepting a connection from `remote`.
    pub fn new(local: Addr, remote: Addr, config: TcpConfig, isn: u32) -> TcpReceiver {
        TcpReceiver {
            local,
            remote,
            config,
            isn,
            conn: None,
            malformed: 0,
        }
    }

    /// The accepted connection.
    pub fn connection(&self) -> Option<&Connection> {
        self.conn.as_ref()
    }

    /// The accepted connection, mutably (for environment actions in experiments).
    pub fn connection_mut(&mut self) -> Option<&mut Connection> {
        self.conn.as_mut()
    }
}

impl Agent for TcpReceiver {
    fn handle_packet(&mut self, now: Time, packet: Packet) {
        let Ok(repr) = TcpRepr::parse(&packet.header) else {
            self.malformed += 1;
            return;
        };
        if packet.src != self.remote {
            return;
        }
        match self.conn.as_mut() {
            Some(conn) => conn.handle_segment(now, &repr, packet.payload_len),
            None if repr.flags.syn && !repr.flags.ack => {
                let cc = Connection::newreno(&self.config);
                self.conn = Some(Connection::accept(self.config.clone(), &repr, self.isn, cc));
            }
            None => {}
        }
        if let Some(conn) = self.conn.as_mut() {
            let unread = conn.bytes_unread();
            conn.read(unread);
            while conn.poll_event().is_some() {}
        }
    }

    fn handle_timeout(&mut self, now: Time) {
        if let Some(conn) = self.conn.as_mut() {
            conn.handle_timeout(now);
        }
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Packet> {
        let seg = self.conn.as_mut()?.poll_transmit(now)?;
        segment_packet(self.local, self.remote, &seg)
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.conn.as_ref()?.poll_timeout()
    }

    fn delivered_bytes(&self) -> u64 {
        self.conn.as_ref().map_or(0, Connection::bytes_delivered)
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let acks = self.conn.as_ref().map_or(0, |c| c.stats().acks_sent);
        vec![
            ("acks_sent", acks as f64),
            ("malformed", self.malformed as f64),
        ]
    }
}
