//! TFRC flow agents (RFC 5348) around [`adaptnet_core::ratectl::tfrc`]: a greedy sender paced
//! at the allowed rate `X`, and a receiver that returns feedback about once per RTT. TFRC is
//! not in `papers/002`; it is today's standard TCP-friendly rate control, run beside TPBA and
//! LDA for comparison (issue 11).
//!
//! Each data datagram carries a [`TfrcData`] header and `segment_bytes` of virtual payload;
//! feedback datagrams carry a [`TfrcFeedback`].

use crate::agent::Agent;
use crate::packet::{Addr, Packet, Proto};
use adaptnet_core::Time;
use adaptnet_core::ratectl::tfrc::{
    TfrcConfig, TfrcData, TfrcFeedback, TfrcReceiver as Rx, TfrcSender as Tx,
};

/// The TFRC sender.
pub struct TfrcSender {
    local: Addr,
    remote: Addr,
    config: TfrcConfig,
    tx: Option<Tx>,
    feedbacks: u64,
    malformed: u64,
}

impl TfrcSender {
    /// A sender from `local` to `remote`.
    pub fn new(local: Addr, remote: Addr, config: TfrcConfig) -> TfrcSender {
        TfrcSender {
            local,
            remote,
            config,
            tx: None,
            feedbacks: 0,
            malformed: 0,
        }
    }

    /// The core sender, once started.
    pub fn sender(&self) -> Option<&Tx> {
        self.tx.as_ref()
    }
}

impl Agent for TfrcSender {
    fn start(&mut self, now: Time) {
        self.tx = Some(Tx::new(now, self.config.clone()));
    }

    fn stop(&mut self, _now: Time) {
        self.tx = None;
    }

    fn handle_packet(&mut self, now: Time, packet: Packet) {
        let Some(tx) = self.tx.as_mut() else {
            return;
        };
        match TfrcFeedback::parse(&packet.header) {
            Ok(fb) => {
                self.feedbacks += 1;
                // A greedy source is never data-limited.
                tx.handle_feedback(now, &fb, false);
            }
            Err(_) => self.malformed += 1,
        }
    }

    fn handle_timeout(&mut self, now: Time) {
        if let Some(tx) = self.tx.as_mut() {
            tx.handle_timeout(now);
        }
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Packet> {
        let h = self.tx.as_mut()?.poll_transmit(now)?;
        let mut p = Packet::new(
            self.local,
            self.remote,
            Proto::Udp,
            self.config.segment_bytes,
        );
        p.header.resize(TfrcData::LEN, 0);
        let n = h.emit(&mut p.header).unwrap_or(0);
        p.header.truncate(n);
        Some(p)
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.tx.as_ref()?.poll_timeout()
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let mut v = vec![
            ("feedbacks", self.feedbacks as f64),
            ("malformed", self.malformed as f64),
        ];
        if let Some(tx) = self.tx.as_ref() {
            v.push(("rate_kbps", tx.rate_bytes_per_s() * 8.0 / 1e3));
            v.push(("loss_event_rate", tx.loss_event_rate()));
        }
        v
    }
}

/// The TFRC receiver.
pub struct TfrcReceiver {
    local: Addr,
    remote: Addr,
    rx: Rx,
    bytes: u64,
    malformed: u64,
}

impl TfrcReceiver {
    /// A receiver on `local` sending feedback to `remote`.
    pub fn new(local: Addr, remote: Addr) -> TfrcReceiver {
        TfrcReceiver {
            local,
            remote,
            rx: Rx::new(),
            bytes: 0,
            malformed: 0,
        }
    }

    /// The core receiver.
    pub fn receiver(&self) -> &Rx {
        &self.rx
    }
}

impl Agent for TfrcReceiver {
    fn handle_packet(&mut self, now: Time, packet: Packet) {
        match TfrcData::parse(&packet.header) {
            Ok(h) => {
                self.bytes += u64::from(packet.payload_len);
                self.rx.handle_data(now, &h, packet.payload_len);
            }
            Err(_) => self.malformed += 1,
        }
    }

    fn handle_timeout(&mut self, _now: Time) {}

    fn poll_transmit(&mut self, now: Time) -> Option<Packet> {
        let fb = self.rx.poll_feedback(now)?;
        let mut p = Packet::new(self.local, self.remote, Proto::Udp, 0);
        p.header.resize(TfrcFeedback::LEN, 0);
        let n = fb.emit(&mut p.header).unwrap_or(0);
        p.header.truncate(n);
        Some(p)
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.rx.poll_timeout()
    }

    fn delivered_bytes(&self) -> u64 {
        self.bytes
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("packets_received", self.rx.packets() as f64),
            ("losses", self.rx.losses() as f64),
            ("loss_event_rate", self.rx.loss_event_rate()),
            ("malformed", self.malformed as f64),
        ]
    }
}
