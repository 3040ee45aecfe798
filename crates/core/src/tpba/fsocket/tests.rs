//! Flow-pair tests: the fsocket API's errors, ADU reassembly under any interleaving of the two
//! paths (property tests), and a sender and receiver joined by a toy network through whole
//! probing → running → probing cycles.

use super::*;
use proptest::prelude::*;
use std::collections::BTreeSet;

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// The content of ADU `seq` with `len` bytes: recognisable, so a mixed ADU is caught.
fn adu_bytes(seq: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seq.wrapping_mul(31).wrapping_add(i as u64 * 7) % 251) as u8)
        .collect()
}

#[test]
fn test_f_send_errors() {
    let config = FsConfig {
        send_queue_bytes: 1000,
        max_adu_bytes: 600,
        ..FsConfig::default()
    };
    let mut fs = FSocket::f_socket(Time::ZERO, addr(1), config);
    assert_eq!(
        fs.f_send(Time::ZERO, b"x", true),
        Err(FsError::NoDestination)
    );
    fs.f_dst(addr(2));
    assert_eq!(fs.remote(), Some(addr(2)));
    assert_eq!(fs.f_send(Time::ZERO, &[0; 400], false), Ok(400));
    assert_eq!(
        fs.f_send(Time::ZERO, &[0; 300], true),
        Err(FsError::AduTooLarge { len: 700, max: 600 })
    );
    assert_eq!(fs.f_send(Time::ZERO, &[0; 100], true), Ok(100));
    assert_eq!(fs.adus_sent(), 1);
    assert_eq!(fs.f_send(Time::ZERO, &[0; 500], true), Ok(500));
    assert_eq!(
        fs.f_send(Time::ZERO, &[0; 1], true),
        Err(FsError::QueueFull {
            queued: 1000,
            limit: 1000
        })
    );
    fs.f_close(Time::ZERO);
    assert_eq!(fs.f_send(Time::ZERO, b"x", true), Err(FsError::Closed));
}

#[test]
fn test_probing_writes_whole_adus_to_tcp_within_the_buffer() {
    let config = FsConfig {
        tcp_buffer_bytes: 1000,
        ..FsConfig::default()
    };
    let mut fs = FSocket::f_socket(Time::ZERO, addr(1), config);
    fs.f_dst(addr(2));
    for seq in 0..3 {
        fs.f_send(Time::ZERO, &adu_bytes(seq, 700), true).unwrap();
    }
    let t = fs.poll_transmit(Time::ZERO).unwrap();
    assert_eq!(t.path, FlowPath::Tcp);
    assert_eq!(t.bytes.len(), FragmentHeader::TCP_LEN + 700);
    let h = FragmentHeader::parse(&t.bytes).unwrap();
    assert!(h.tcp && h.adu_seq == 0 && h.offset == 0 && h.len == 700);
    // 710 bytes outstanding < 1000: one more ADU, then the buffer is full.
    assert!(fs.poll_transmit(Time::ZERO).is_some());
    assert!(fs.poll_transmit(Time::ZERO).is_none());
    fs.handle_tcp_status(
        Time::from_millis(10),
        TcpStatus {
            bytes_acked: 710,
            ..TcpStatus::default()
        },
    );
    assert!(fs.poll_transmit(Time::from_millis(10)).is_some());
}

#[test]
fn test_receiver_rejects_a_corrupt_stream() {
    let mut rx = FSocket::f_socket(Time::ZERO, addr(2), FsConfig::default());
    let garbage = [0xffu8; FragmentHeader::TCP_LEN];
    assert!(rx.handle_tcp_bytes(Time::ZERO, &garbage).is_err());
    assert!(
        rx.handle_tcp_bytes(Time::ZERO, &[]).is_err(),
        "framing is lost"
    );
    assert!(rx.handle_udp(Time::ZERO, &[1, 2, 3]).is_err());
    assert!(rx.handle_control(Time::ZERO, &[1, 2, 3]).is_err());
}

#[test]
fn test_inconsistent_fragment_never_mixes_into_an_adu() {
    let mut rx = FSocket::f_socket(Time::ZERO, addr(2), FsConfig::default());
    let data = adu_bytes(0, 1024);
    let first = FragmentHeader {
        tcp: false,
        adu_seq: 0,
        adu_len: 1024,
        offset: 0,
        len: 512,
        dgram_seq: 0,
        sent_at_us: 0,
    };
    rx.handle_udp(Time::ZERO, &first.to_bytes(&data[..512]))
        .unwrap();
    // A fragment claiming another length for ADU 0 is dropped.
    let liar = FragmentHeader {
        adu_len: 2048,
        offset: 512,
        dgram_seq: 1,
        ..first
    };
    rx.handle_udp(Time::ZERO, &liar.to_bytes(&[9u8; 512]))
        .unwrap();
    assert_eq!(rx.f_recv(), None);
    assert_eq!(rx.dropped_fragments(), 1);
    let second = FragmentHeader {
        offset: 512,
        dgram_seq: 2,
        ..first
    };
    rx.handle_udp(Time::ZERO, &second.to_bytes(&data[512..]))
        .unwrap();
    assert_eq!(rx.f_recv(), Some(data));
    // The rate counts the accepted payload only: not the liar's 512 bytes, not a duplicate.
    assert_eq!(rx.received_payload_bytes(), 1024);
    rx.handle_udp(Time::ZERO, &second.to_bytes(&[0u8; 512]))
        .unwrap();
    assert_eq!(rx.received_payload_bytes(), 1024);
}

/// What the sender would put on the two paths for ADUs `lens`, with `tcp[i]` the path of ADU i.
fn encode(lens: &[usize], tcp: &[bool]) -> (Vec<u8>, Vec<Vec<u8>>) {
    let mut stream = Vec::new();
    let mut dgrams = Vec::new();
    let mut dgram_seq = 0u32;
    for (seq, (&len, &on_tcp)) in lens.iter().zip(tcp).enumerate() {
        let seq = seq as u64;
        let data = adu_bytes(seq, len);
        let adu_len = len as u32;
        if on_tcp {
            let h = FragmentHeader {
                tcp: true,
                adu_seq: seq,
                adu_len,
                offset: 0,
                len: adu_len,
                dgram_seq: 0,
                sent_at_us: 0,
            };
            stream.extend(h.to_bytes(&data));
        } else {
            let mut offset = 0usize;
            loop {
                let n = (len - offset).min(512);
                let h = FragmentHeader {
                    tcp: false,
                    adu_seq: seq,
                    adu_len,
                    offset: offset as u32,
                    len: n as u32,
                    dgram_seq,
                    sent_at_us: 0,
                };
                dgram_seq += 1;
                dgrams.push(h.to_bytes(&data[offset..offset + n]));
                offset += n;
                if offset >= len {
                    break;
                }
            }
        }
    }
    (stream, dgrams)
}

/// Periods as the sender makes them: runs of ADUs alternating between TCP and UDP.
fn paths(runs: &[usize]) -> Vec<bool> {
    runs.iter()
        .enumerate()
        .flat_map(|(i, &n)| std::iter::repeat_n(i % 2 == 0, n))
        .collect()
}

#[derive(Debug, Clone)]
struct Scenario {
    lens: Vec<usize>,
    runs: Vec<usize>,
    /// Per datagram: sort key (reordering), duplicate, drop.
    dgram_fate: Vec<(u32, bool, bool)>,
    /// Cut points of the TCP stream (fractions of its length).
    cuts: Vec<u16>,
    /// Interleaving: true takes the next TCP chunk, false the next datagram.
    picks: Vec<bool>,
    /// After which arrivals time jumps past the reorder timeout.
    jumps: Vec<bool>,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        prop::collection::vec(0usize..1500, 1..30),
        prop::collection::vec(1usize..6, 1..8),
        prop::collection::vec(
            (any::<u32>(), prop::bool::weighted(0.1), any::<bool>()),
            200,
        ),
        prop::collection::vec(any::<u16>(), 0..20),
        prop::collection::vec(any::<bool>(), 300),
        prop::collection::vec(prop::bool::weighted(0.1), 300),
    )
        .prop_map(|(lens, runs, dgram_fate, cuts, picks, jumps)| Scenario {
            lens,
            runs,
            dgram_fate,
            cuts,
            picks,
            jumps,
        })
}

/// Runs a scenario through a receiver; returns (delivered seqs in order, ADUs that lost a
/// datagram). Checks the content of every delivered ADU.
fn run(s: &Scenario, allow_drops: bool, allow_jumps: bool) -> (Vec<u64>, BTreeSet<u64>) {
    let mut tcp = paths(&s.runs);
    tcp.resize(s.lens.len(), tcp.last().copied().unwrap_or(true));
    let (stream, dgrams) = encode(&s.lens, &tcp);
    // The network: datagrams reordered, duplicated, dropped.
    let mut order: Vec<(u32, usize)> = Vec::new();
    let mut lost_adus = BTreeSet::new();
    for (i, d) in dgrams.iter().enumerate() {
        let (key, dup, drop) = s.dgram_fate.get(i).copied().unwrap_or((0, false, false));
        if allow_drops && drop {
            lost_adus.insert(FragmentHeader::parse(d).unwrap().adu_seq);
            continue;
        }
        order.push((key, i));
        if dup {
            order.push((key.wrapping_add(7), i));
        }
    }
    order.sort();
    let mut udp: VecDeque<&Vec<u8>> = order.iter().map(|&(_, i)| &dgrams[i]).collect();
    // The TCP stream, cut anywhere.
    let mut cut_at: Vec<usize> = s
        .cuts
        .iter()
        .map(|&c| stream.len() * c as usize / u16::MAX as usize)
        .collect();
    cut_at.push(stream.len());
    cut_at.sort();
    let mut chunks = VecDeque::new();
    let mut prev = 0;
    for c in cut_at {
        chunks.push_back(&stream[prev..c]);
        prev = c;
    }
    let config = FsConfig {
        reorder_timeout: Duration::from_millis(100),
        ..FsConfig::default()
    };
    let mut rx = FSocket::f_socket(Time::ZERO, addr(2), config);
    let mut now = Time::ZERO;
    let mut delivered = Vec::new();
    let check = |rx: &mut FSocket, delivered: &mut Vec<u64>| {
        while let Some(e) = rx.poll_event() {
            if let FsEvent::AduReceived { seq, len, .. } = e {
                let data = rx.f_recv().expect("an ADU for every AduReceived event");
                assert_eq!(data, adu_bytes(seq, len as usize), "ADU {seq} corrupted");
                assert_eq!(len as usize, s.lens[seq as usize]);
                delivered.push(seq);
            }
        }
    };
    let mut step = 0;
    while !chunks.is_empty() || !udp.is_empty() {
        let take_tcp = s.picks.get(step).copied().unwrap_or(true);
        if (take_tcp && !chunks.is_empty()) || udp.is_empty() {
            let c = chunks.pop_front().unwrap();
            rx.handle_tcp_bytes(now, c).unwrap();
        } else {
            rx.handle_udp(now, udp.pop_front().unwrap()).unwrap();
        }
        check(&mut rx, &mut delivered);
        if allow_jumps && s.jumps.get(step).copied().unwrap_or(false) {
            now += Duration::from_secs(1);
            rx.handle_timeout(now);
            check(&mut rx, &mut delivered);
        }
        step += 1;
    }
    // Let every remaining wait expire (one per gap at most), and the last report go out.
    for _ in 0..=s.lens.len() {
        now += Duration::from_secs(1);
        rx.handle_timeout(now);
        while rx.poll_transmit(now).is_some() {}
        check(&mut rx, &mut delivered);
    }
    assert_eq!(rx.poll_timeout(), None, "an idle receiver sleeps");
    assert_eq!(rx.f_recv(), None);
    (delivered, lost_adus)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Any interleaving of the TCP stream (cut anywhere) with reordered and duplicated
    /// datagrams delivers every ADU exactly once, in order, intact.
    #[test]
    fn prop_interleaved_paths_deliver_each_adu_once_in_order(s in scenario()) {
        let (delivered, _) = run(&s, false, false);
        let want: Vec<u64> = (0..s.lens.len() as u64).collect();
        prop_assert_eq!(delivered, want);
    }

    /// With datagram loss and time passing mid-flight, what is delivered is still in order,
    /// without duplicates, intact (checked in `run`), never an ADU that lost a piece, and —
    /// once every wait has expired — every ADU that lost nothing.
    #[test]
    fn prop_losses_never_corrupt_duplicate_or_reorder(s in scenario()) {
        let (delivered, lost) = run(&s, true, true);
        prop_assert!(delivered.windows(2).all(|w| w[0] < w[1]));
        for seq in &delivered {
            prop_assert!(!lost.contains(seq));
        }
        let (all, lost) = run(&s, true, false);
        let want: Vec<u64> = (0..s.lens.len() as u64).filter(|q| !lost.contains(q)).collect();
        prop_assert_eq!(all, want);
    }
}

/// A sender and a receiver joined by a toy network: the TCP path delivers in order after
/// `one_way` and is acknowledged one RTT after the write; UDP datagrams take `one_way` and
/// every `drop_every`-th is lost; reports take `one_way` back.
struct Pair {
    tx: FSocket,
    rx: FSocket,
    now: Time,
    one_way: Duration,
    drop_every: Option<u32>,
    to_rx: VecDeque<(Time, FlowPath, Vec<u8>)>,
    to_tx: VecDeque<(Time, Vec<u8>)>,
    acks: VecDeque<(Time, u64)>,
    written: u64,
    acked: u64,
    cwnd: u64,
    udp_sent: u32,
    commands: Vec<TcpCommand>,
    delivered: Vec<u64>,
    lost: u64,
    switches: Vec<(Time, Period)>,
    /// (from, to, loss ratio) of each decrease.
    decreases: Vec<(f64, f64, f64)>,
}

impl Pair {
    fn new(config: FsConfig, one_way: Duration, drop_every: Option<u32>) -> Pair {
        let mut tx = FSocket::f_socket(Time::ZERO, addr(1), config.clone());
        tx.f_dst(addr(2));
        let rx = FSocket::f_socket(Time::ZERO, addr(2), config);
        Pair {
            tx,
            rx,
            now: Time::ZERO,
            one_way,
            drop_every,
            to_rx: VecDeque::new(),
            to_tx: VecDeque::new(),
            acks: VecDeque::new(),
            written: 0,
            acked: 0,
            cwnd: 20_000,
            udp_sent: 0,
            commands: Vec::new(),
            delivered: Vec::new(),
            lost: 0,
            switches: Vec::new(),
            decreases: Vec::new(),
        }
    }

    fn step(&mut self) {
        let now = self.now;
        while self.acks.front().is_some_and(|(t, _)| *t <= now) {
            let (_, upto) = self.acks.pop_front().unwrap();
            self.acked = upto;
        }
        self.tx.handle_tcp_status(
            now,
            TcpStatus {
                bytes_acked: self.acked,
                cwnd_bytes: self.cwnd,
                smss: 1000,
                congestion_events: 0,
            },
        );
        while self.to_tx.front().is_some_and(|(t, _)| *t <= now) {
            let (_, b) = self.to_tx.pop_front().unwrap();
            self.tx.handle_control(now, &b).unwrap();
        }
        while self.to_rx.front().is_some_and(|(t, _, _)| *t <= now) {
            let (_, path, b) = self.to_rx.pop_front().unwrap();
            match path {
                FlowPath::Tcp => self.rx.handle_tcp_bytes(now, &b).unwrap(),
                FlowPath::Udp => self.rx.handle_udp(now, &b).unwrap(),
                FlowPath::Control => unreachable!(),
            }
        }
        for fs in [&mut self.tx, &mut self.rx] {
            if fs.poll_timeout().is_some_and(|t| t <= now) {
                fs.handle_timeout(now);
            }
        }
        while let Some(t) = self.tx.poll_transmit(now) {
            match t.path {
                FlowPath::Tcp => {
                    self.written += t.bytes.len() as u64;
                    self.acks.push_back((now + self.one_way * 2, self.written));
                    self.to_rx.push_back((now + self.one_way, t.path, t.bytes));
                }
                FlowPath::Udp => {
                    self.udp_sent += 1;
                    if self
                        .drop_every
                        .is_none_or(|n| !self.udp_sent.is_multiple_of(n))
                    {
                        self.to_rx.push_back((now + self.one_way, t.path, t.bytes));
                    }
                }
                FlowPath::Control => unreachable!("the sender receives no data"),
            }
        }
        while let Some(c) = self.tx.poll_tcp_command() {
            if let TcpCommand::SetCwnd(w) = c {
                self.cwnd = w;
            }
            self.commands.push(c);
        }
        while let Some(t) = self.rx.poll_transmit(now) {
            assert_eq!(t.path, FlowPath::Control);
            self.to_tx.push_back((now + self.one_way, t.bytes));
        }
        while let Some(e) = self.tx.poll_event() {
            match e {
                FsEvent::Tpba(TpbaEvent::Switched { to, .. }) => self.switches.push((now, to)),
                FsEvent::Tpba(TpbaEvent::Decreased {
                    from_bytes_per_s,
                    to_bytes_per_s,
                    loss_ratio,
                }) => self
                    .decreases
                    .push((from_bytes_per_s, to_bytes_per_s, loss_ratio)),
                _ => {}
            }
        }
        while let Some(e) = self.rx.poll_event() {
            match e {
                FsEvent::AduReceived { seq, len, .. } => {
                    let data = self.rx.f_recv().unwrap();
                    assert_eq!(data, adu_bytes(seq, len as usize));
                    self.delivered.push(seq);
                }
                FsEvent::AduLost { count, .. } => self.lost += count,
                _ => {}
            }
        }
    }

    /// Runs for `secs` seconds with an application writing ADU2 (ten 512-byte payloads) every
    /// `adu_interval`.
    fn run(&mut self, secs: u64, adu_interval: Duration) {
        let mut next_adu = Time::ZERO;
        let mut seq = 0;
        let end = Time::from_secs(secs);
        while self.now < end {
            if self.now >= next_adu {
                for k in 0..10 {
                    let piece = adu_bytes(seq, 5120);
                    self.tx
                        .f_send(self.now, &piece[k * 512..(k + 1) * 512], k == 9)
                        .unwrap();
                }
                seq += 1;
                next_adu += adu_interval;
            }
            self.step();
            self.now += Duration::from_millis(1);
        }
        // Drain: stop writing, let the sender empty its queue and the network empty.
        let deadline = self.now + Duration::from_secs(120);
        while !self.tx.is_drained() && self.now < deadline {
            self.step();
            self.now += Duration::from_millis(1);
        }
        for _ in 0..3000 {
            self.step();
            self.now += Duration::from_millis(1);
        }
    }
}

#[test]
fn test_full_cycles_switch_at_boundaries_and_deliver_every_adu_in_order() {
    let mut pair = Pair::new(FsConfig::default(), Duration::from_millis(6), None);
    // 20 ADUs/s of 5120 bytes: 102 400 B/s offered; the toy TCP never limits it.
    pair.run(30, Duration::from_millis(50));
    let n = pair.tx.adus_sent();
    assert_eq!(pair.delivered, (0..n).collect::<Vec<_>>());
    assert_eq!(pair.lost, 0);
    // Probing → running after three agreeing samples; back to probing after T_running = 10 s.
    let periods: Vec<Period> = pair.switches.iter().map(|s| s.1).collect();
    assert_eq!(
        periods.get(..3),
        Some(&[Period::Running, Period::Probing, Period::Running][..])
    );
    let (t_run, _) = pair.switches[0];
    let (t_probe, _) = pair.switches[1];
    assert!(
        t_run >= Time::from_secs(3) && t_run < Time::from_secs(5),
        "{t_run}"
    );
    let running = t_probe - t_run;
    assert!(running >= Duration::from_secs(10) && running < Duration::from_millis(10_200));
    // The running rate is what probing measured (the application's rate, headers included).
    assert!(pair.commands.contains(&TcpCommand::NoDelay(true)));
    assert!(pair.commands.contains(&TcpCommand::NoDelay(false)));
    // No loss, no decrease: cwnd_new = cwnd_old.
    assert!(pair.commands.contains(&TcpCommand::SetCwnd(20_000)));
}

#[test]
fn test_udp_loss_decreases_the_rate_and_loses_no_adu_silently() {
    let mut pair = Pair::new(FsConfig::default(), Duration::from_millis(6), Some(50));
    pair.run(14, Duration::from_millis(50));
    // Reports showed 2 % loss: r × (1 − 0.02 × 3) at each adaptation point of the running
    // period (three in 10 s with T_adapt = 3 s).
    assert_eq!(pair.decreases.len(), 3, "{:?}", pair.decreases);
    for &(from, to, p) in &pair.decreases {
        assert!((p - 0.02).abs() < 0.005, "{p}");
        assert!((to - from * (1.0 - 3.0 * p)).abs() < 1e-6);
    }
    assert!(
        pair.tx
            .rtt()
            .is_some_and(|r| r >= Duration::from_millis(12))
    );
    // Delivered ADUs are in order; the others were reported lost.
    assert!(pair.delivered.windows(2).all(|w| w[0] < w[1]));
    assert!(pair.lost > 0);
    // Every ADU is accounted for, except that a last ADU missing a datagram has no later
    // one to be abandoned for.
    let accounted = pair.delivered.len() as u64 + pair.lost;
    assert!(pair.tx.is_drained());
    assert!(
        pair.tx.adus_sent() - accounted <= 1,
        "{accounted} of {}",
        pair.tx.adus_sent()
    );
}
