//! The layered audio server over UDP using only the CM (papers/003 §3.2.2, §4.2), and the
//! receiving agent of probe-fed CM datagrams.
//!
//! The sender opens a probe-fed CM flow (`cm_open`), starts at the highest encoding not above
//! its `cm_query` rate, sends 1 KB packets at the encoding's rate and `cm_notify`s each one; it
//! never hears from its receiver — the CM's probes supply the feedback, and `change_rate`
//! switches the encoding. Datagrams carry the CBR header (sequence number, send time).

use super::{ClosedFlow, CmHost, close_flow, closing_counters, cm_datagram, flow_key, peer_addr};
use crate::agent::Agent;
use crate::agents::cbr::CbrReceiver;
use crate::packet::{Addr, Packet};
use adaptnet_core::Time;
use adaptnet_core::cbr::CbrSink;
use adaptnet_core::cm::audio::{AudioConfig, LayeredAudioSender};
use adaptnet_core::cm::{FlowId, FlowOptions};

/// Most encoding changes remembered for traces (later ones are counted, not stored).
const MAX_HISTORY: usize = 100_000;

/// An encoding in force from `at`, and the `change_rate` rate that chose it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EncodingChange {
    /// When.
    pub at: Time,
    /// The encoding, bit/s.
    pub encoding_bps: u64,
    /// The flow's CM rate share that chose it, bytes/s (`None`: no estimate yet).
    pub rate_bytes_per_s: Option<f64>,
}

/// The layered audio sender agent.
pub struct CmAudioSender {
    host: CmHost,
    local: Addr,
    remote: Addr,
    config: AudioConfig,
    options: FlowOptions,
    flow: Option<FlowId>,
    audio: Option<LayeredAudioSender>,
    history: Vec<EncodingChange>,
    rate_changes: u64,
    open_failed: bool,
    closed: Option<ClosedFlow>,
}

impl CmAudioSender {
    /// An audio sender from `local` to `remote` on `host`'s CM. `options.feedback` should be
    /// probes (the server has no feedback of its own).
    pub fn new(
        host: CmHost,
        local: Addr,
        remote: Addr,
        config: AudioConfig,
        options: FlowOptions,
    ) -> CmAudioSender {
        CmAudioSender {
            host,
            local,
            remote,
            config,
            options,
            flow: None,
            audio: None,
            history: Vec::new(),
            rate_changes: 0,
            open_failed: false,
            closed: None,
        }
    }

    /// The encodings in force over time (the first entry is the start).
    pub fn history(&self) -> &[EncodingChange] {
        &self.history
    }

    /// The audio state machine, once started.
    pub fn audio(&self) -> Option<&LayeredAudioSender> {
        self.audio.as_ref()
    }

    /// The CM flow, while open.
    pub fn cm_flow(&self) -> Option<FlowId> {
        if self.closed.is_some() {
            None
        } else {
            self.flow
        }
    }

    /// What the CM knew of the flow when it closed.
    pub fn closed(&self) -> Option<ClosedFlow> {
        self.closed
    }

    fn record(&mut self, at: Time, rate_bytes_per_s: Option<f64>) {
        let Some(a) = self.audio.as_ref() else {
            return;
        };
        let encoding_bps = a.encoding_bps();
        if self
            .history
            .last()
            .is_some_and(|h| h.encoding_bps == encoding_bps)
            || self.history.len() >= MAX_HISTORY
        {
            return;
        }
        self.history.push(EncodingChange {
            at,
            encoding_bps,
            rate_bytes_per_s,
        });
    }
}

impl Agent for CmAudioSender {
    fn start(&mut self, now: Time) {
        let dest = peer_addr(self.remote.node);
        let key = flow_key(self.local.port, self.remote.port);
        let opened = self
            .host
            .cm()
            .borrow_mut()
            .open(now, dest, key, self.options);
        let Ok(flow) = opened else {
            self.open_failed = true;
            return;
        };
        self.host.subscribe(flow);
        self.flow = Some(flow);
        // cm_query, then the highest encoding not above the rate (§3.2.2).
        let rate = self.host.query(flow).and_then(|q| q.rate_bytes_per_s);
        let mut audio = LayeredAudioSender::new(flow, self.config.clone());
        audio.start(now, rate);
        self.audio = Some(audio);
        self.record(now, rate);
    }

    fn stop(&mut self, now: Time) {
        if let Some(a) = self.audio.as_mut() {
            a.stop();
        }
        if let (Some(flow), None) = (self.flow, self.closed) {
            self.closed = Some(close_flow(&self.host, now, flow).unwrap_or_default());
        }
    }

    fn handle_packet(&mut self, _now: Time, _packet: Packet) {}

    fn handle_timeout(&mut self, _now: Time) {}

    fn poll_transmit(&mut self, now: Time) -> Option<Packet> {
        let flow = self.cm_flow()?;
        // change_rate(newrate), routed by the host agent.
        if let Some(rate) = self.host.take_rate_change(flow) {
            self.rate_changes += 1;
            if let Some(a) = self.audio.as_mut() {
                a.handle_change_rate(now, rate);
            }
            self.record(now, Some(rate));
        }
        let p = self.audio.as_mut()?.poll_transmit(now)?;
        // cm_notify right after the transmission (§3.2.2); the CM charges it to the rate.
        let _ = self.host.cm().borrow_mut().notify(now, flow, p.bytes);
        cm_datagram(self.local, self.remote, p.seq, now, p.bytes)
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.cm_flow()?;
        self.audio.as_ref()?.poll_timeout()
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let mut v = vec![
            ("cm_open_failed", f64::from(u8::from(self.open_failed))),
            ("rate_changes", self.rate_changes as f64),
        ];
        if let Some(a) = &self.audio {
            let s = a.stats();
            v.push(("audio_packets", s.packets as f64));
            v.push(("audio_switches", s.switches as f64));
            v.push(("audio_encoding_bps", a.encoding_bps() as f64));
        }
        v.extend(closing_counters(self.closed.as_ref(), &self.host));
        v
    }
}

/// Receives probe-fed CM datagrams (audio, greedy UDP): counts them like a CBR receiver and
/// reports each to its host's receiver CM, which answers the sender CM's probes.
pub struct CmDatagramReceiver {
    host: CmHost,
    cbr: CbrReceiver,
}

impl CmDatagramReceiver {
    /// A receiver on `host`.
    pub fn new(host: CmHost) -> CmDatagramReceiver {
        CmDatagramReceiver {
            host,
            cbr: CbrReceiver::new(),
        }
    }

    /// The sink's counters.
    pub fn sink(&self) -> &CbrSink {
        self.cbr.sink()
    }
}

impl Agent for CmDatagramReceiver {
    fn handle_packet(&mut self, now: Time, packet: Packet) {
        let Some(bytes) = self.cbr.receive(now, &packet) else {
            return;
        };
        let key = flow_key(packet.src.port, packet.dst.port);
        self.host.receiver().borrow_mut().handle_data(
            now,
            peer_addr(packet.src.node),
            key,
            bytes,
            false,
        );
    }

    fn handle_timeout(&mut self, _now: Time) {}

    fn poll_transmit(&mut self, _now: Time) -> Option<Packet> {
        None
    }

    fn poll_timeout(&self) -> Option<Time> {
        None
    }

    fn delivered_bytes(&self) -> u64 {
        self.cbr.delivered_bytes()
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        self.cbr.counters()
    }
}
