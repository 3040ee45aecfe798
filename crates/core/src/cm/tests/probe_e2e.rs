//! The probe protocol end to end: a sender CM with a probe-fed constant-rate flow, a receiver
//! CM, a FIFO path with a fixed delay and caller-chosen drops of data, probes and responses.

use super::*;
use crate::cm::audio::{AudioConfig, LayeredAudioSender};
use crate::cm::probe::{self, CmPacket};
use crate::cm::receiver::CmReceiver;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

const ONE_WAY: Duration = Duration::from_millis(50);
const SRC: PeerAddr = PeerAddr(1);
const KEY: FlowKey = FlowKey(5);

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Msg {
    Data(u64),
    ToReceiver(Vec<u8>),
    ToSender(Vec<u8>),
}

type Drop = fn(u64) -> bool;

struct Net {
    cm: CongestionManager,
    rx: CmReceiver,
    flow: FlowId,
    wire: BinaryHeap<Reverse<(Time, u64, Msg)>>,
    seq: u64,
    counts: [u64; 3],
    drops: [Drop; 3],
    /// When set, the audio server is the data source instead of the 100 kB/s CBR.
    audio: Option<LayeredAudioSender>,
    /// (time, encoding) after each switch.
    switches: Vec<(Time, u64)>,
}

impl Net {
    fn new(drops: [Drop; 3]) -> Net {
        let mut cm = cm();
        let flow = cm
            .open(Time::ZERO, DEST, KEY, FlowOptions::probed())
            .expect("open");
        Net {
            cm,
            rx: CmReceiver::new(),
            flow,
            wire: BinaryHeap::new(),
            seq: 0,
            counts: [0; 3],
            drops,
            audio: None,
            switches: Vec::new(),
        }
    }

    /// Sends `msg` unless the drop rule of its kind says otherwise.
    fn send(&mut self, now: Time, msg: Msg) {
        let kind = match msg {
            Msg::Data(_) => 0,
            Msg::ToReceiver(_) => 1,
            Msg::ToSender(_) => 2,
        };
        self.counts[kind] += 1;
        if (self.drops[kind])(self.counts[kind]) {
            return;
        }
        self.seq += 1;
        self.wire.push(Reverse((now + ONE_WAY, self.seq, msg)));
    }

    fn flush(&mut self, now: Time) {
        while let Some(t) = self.cm.poll_transmit(now) {
            assert_eq!(t.to, DEST);
            let mut buf = vec![0u8; t.packet.buffer_len()];
            t.packet.emit(&mut buf).expect("fits");
            self.send(now, Msg::ToReceiver(buf));
        }
        while let Some(t) = self.rx.poll_transmit(now) {
            let mut buf = vec![0u8; t.packet.buffer_len()];
            t.packet.emit(&mut buf).expect("fits");
            self.send(now, Msg::ToSender(buf));
        }
        while let Some(ev) = self.cm.poll_event() {
            if let (
                Some(a),
                CmEvent::RateChange {
                    flow,
                    rate_bytes_per_s,
                    ..
                },
            ) = (self.audio.as_mut(), ev)
                && flow == self.flow
            {
                let before = a.encoding_bps();
                a.handle_change_rate(now, rate_bytes_per_s);
                if a.encoding_bps() != before {
                    self.switches.push((now, a.encoding_bps()));
                }
            }
        }
    }

    /// A 1000-byte packet every 10 ms until `stop`, then runs until `until`.
    fn run(&mut self, stop: Time, until: Time) {
        let mut next_data = Time::ZERO;
        loop {
            if let Some(a) = &self.audio {
                next_data = a.poll_timeout().unwrap_or(Time::MAX);
            }
            let mut t = until;
            if next_data < stop {
                t = t.min(next_data);
            }
            if let Some(w) = self.wire.peek() {
                t = t.min(w.0.0);
            }
            if let Some(c) = self.cm.poll_timeout() {
                t = t.min(c);
            }
            if t >= until {
                return;
            }
            if next_data == t && next_data < stop {
                let bytes = match self.audio.as_mut() {
                    Some(a) => a.poll_transmit(t).map_or(0, |p| p.bytes),
                    None => 1000,
                };
                self.send(t, Msg::Data(bytes));
                self.cm.notify(t, self.flow, bytes).expect("open");
                next_data = t + ms(10);
            } else if self.wire.peek().is_some_and(|w| w.0.0 == t) {
                let Some(Reverse((_, _, msg))) = self.wire.pop() else {
                    return;
                };
                match msg {
                    Msg::Data(b) => self.rx.handle_data(t, SRC, KEY, b, false),
                    Msg::ToReceiver(bytes) => {
                        let p = probe::parse(&bytes).expect("valid");
                        assert!(matches!(p, CmPacket::Probe(_)));
                        self.rx.handle_packet(t, SRC, &p);
                    }
                    Msg::ToSender(bytes) => {
                        let p = probe::parse(&bytes).expect("valid");
                        self.cm.handle_packet(t, DEST, &p);
                    }
                }
            } else {
                self.cm.handle_timeout(t);
            }
            self.flush(t);
        }
    }

    fn measured(&self) -> (u64, u64) {
        let q = self.cm.query(self.flow).expect("open");
        (q.probe_sent_bytes, q.probe_lost_bytes)
    }
}

fn never(_: u64) -> bool {
    false
}

#[test]
fn test_probes_measure_rtt_and_no_loss_on_clean_path() {
    let mut net = Net::new([never, never, never]);
    net.run(Time::from_secs(10), Time::from_secs(11));
    let q = net.cm.query(net.flow).expect("open");
    assert_eq!(q.srtt, Some(2 * ONE_WAY));
    assert_eq!(q.loss_rate, Some(0.0));
    let (sent, lost) = net.measured();
    assert_eq!(lost, 0);
    assert!(sent >= 990_000, "every interval measured: {sent}");
    let s = net.cm.stats();
    // Twice per RTT over ~10 s (the first interval uses the 1 s initial RTT).
    assert!((175..=205).contains(&s.probes_sent), "{}", s.probes_sent);
    assert_eq!(s.responses_accepted, s.probes_sent);
    assert_eq!(s.decreases, 0);
    assert_eq!(
        s.aging_halvings, 0,
        "feedback every half RTT: never open-loop"
    );
    assert!(
        net.cm.poll_timeout().is_none(),
        "probing stops when data stops"
    );
}

#[test]
fn test_probes_measure_data_loss_rate() {
    let mut net = Net::new([|n| n % 10 == 0, never, never]);
    net.run(Time::from_secs(10), Time::from_secs(11));
    let (sent, lost) = net.measured();
    let p = lost as f64 / sent as f64;
    assert!((p - 0.1).abs() < 0.005, "loss {p}");
    assert!(net.cm.stats().decreases > 0);
}

#[test]
fn test_lost_probes_and_responses_cause_no_false_loss() {
    // A third of the probes and a quarter of the responses vanish; data all arrives.
    let mut net = Net::new([never, |n| n % 3 == 0, |n| n % 4 == 1]);
    net.run(Time::from_secs(10), Time::from_secs(11));
    let (sent, lost) = net.measured();
    assert_eq!(lost, 0, "no loss inferred from lost control packets");
    assert!(sent > 400_000, "most intervals still measured: {sent}");
    let s = net.cm.stats();
    assert_eq!(s.decreases, 0);
    // About 2/3 × 3/4 of ~180 probes are answered.
    assert!(s.responses_accepted > 80, "{}", s.responses_accepted);
}

#[test]
fn test_lost_control_packets_do_not_distort_loss_rate() {
    let mut net = Net::new([|n| n % 10 == 0, |n| n % 3 == 0, |n| n % 4 == 1]);
    net.run(Time::from_secs(10), Time::from_secs(11));
    let (sent, lost) = net.measured();
    let p = lost as f64 / sent as f64;
    assert!((p - 0.1).abs() < 0.01, "loss {p}");
}

#[test]
fn test_audio_follows_cm_rate_from_probes_alone() {
    // 5 % data loss: the CM rate saw-tooths; the audio server (no feedback of its own) must
    // leave the lowest encoding once the CM has estimates, and step down after losses.
    let mut net = Net::new([|n| n % 20 == 0, never, never]);
    let mut audio = LayeredAudioSender::new(net.flow, AudioConfig::paper());
    audio.start(
        Time::ZERO,
        net.cm.query(net.flow).expect("open").rate_bytes_per_s,
    );
    assert_eq!(
        audio.encoding_bps(),
        10_000,
        "no estimate yet: lowest encoding"
    );
    net.audio = Some(audio);
    net.run(Time::from_secs(30), Time::from_secs(31));
    let ups = net.switches.windows(2).filter(|w| w[1].1 > w[0].1).count();
    let downs = net.switches.windows(2).filter(|w| w[1].1 < w[0].1).count();
    assert!(
        net.switches.first().is_some_and(|s| s.1 > 10_000),
        "{:?}",
        net.switches
    );
    assert!(downs >= 1 && ups >= 1, "{:?}", net.switches);
    let a = net.audio.as_ref().expect("audio");
    assert!(a.stats().packets > 100);
    assert!(net.cm.stats().decreases > 0);
    // The encoding in use does not exceed the flow's current CM rate.
    let q = net.cm.query(net.flow).expect("open");
    let rate_bps = q.rate_bytes_per_s.expect("valid") * 8.0;
    assert!(
        a.encoding_bps() as f64 <= rate_bps / Thresholds::DEFAULT.rate_down,
        "{rate_bps}"
    );
}
