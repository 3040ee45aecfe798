//! A tiny deterministic pipe between TCP endpoints ([`Connection`]s), for state-machine tests
//! without the simulator: a fixed one-way delay, one serialisation slot per segment per
//! direction (so back-to-back segments arrive spaced out), and a caller-chosen rule that drops
//! data segments on their way to the server.
//!
//! A test's hosts implement [`Endpoints`] around a [`Pipe`]; [`Endpoints::run`] then advances
//! time to the earliest wake-up — a segment's arrival or an endpoint's timer — delivers what
//! is due, fires the timers and lets every endpoint send, until nothing is left to do.

use crate::tcp::wire::MAX_HEADER_LEN;
use crate::tcp::{Connection, Segment, TcpConfig, TcpRepr};
use crate::time::Time;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

/// Which way a segment travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Dir {
    /// Client to server: the direction the drop rule applies to.
    ToServer,
    /// Server to client.
    ToClient,
}

/// A `TcpRepr` cannot go in a heap (no `Ord`), so the pipe stores its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct SegKey([u8; MAX_HEADER_LEN], usize);

/// A segment in flight: arrival time, tie-breaker, direction, payload length, header bytes.
type InFlight = Reverse<(Time, u64, Dir, u32, SegKey)>;

/// Decides whether the n-th data segment towards the server (1-based) is dropped.
type DropRule = Box<dyn FnMut(u64, &Segment) -> bool>;

/// The two directions of the wire, and the current time.
pub(crate) struct Pipe {
    now: Time,
    delay: Duration,
    slot: Duration,
    wire: BinaryHeap<InFlight>,
    /// When each direction's "link" is next free.
    busy_until: [Time; 2],
    seq: u64,
    /// Data segments sent towards the server so far.
    data_sent: u64,
    drop: DropRule,
    dropped: u64,
}

impl Pipe {
    /// A pipe with one-way `delay` and `slot` of serialisation per segment, dropping the data
    /// segments towards the server that `drop(n, segment)` picks (`n` counts them from 1).
    pub(crate) fn new(
        delay: Duration,
        slot: Duration,
        drop: impl FnMut(u64, &Segment) -> bool + 'static,
    ) -> Pipe {
        Pipe {
            now: Time::ZERO,
            delay,
            slot,
            wire: BinaryHeap::new(),
            busy_until: [Time::ZERO; 2],
            seq: 0,
            data_sent: 0,
            drop: Box::new(drop),
            dropped: 0,
        }
    }

    /// The current time.
    pub(crate) fn now(&self) -> Time {
        self.now
    }

    /// Data segments the drop rule dropped.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Puts a segment on the wire, unless it is a data segment towards the server that the
    /// drop rule picks. It arrives `delay` after its serialisation slot ends.
    pub(crate) fn send(&mut self, dir: Dir, seg: Segment) {
        if dir == Dir::ToServer && seg.payload_len > 0 {
            self.data_sent += 1;
            if (self.drop)(self.data_sent, &seg) {
                self.dropped += 1;
                return;
            }
        }
        let mut buf = [0u8; MAX_HEADER_LEN];
        let n = seg.repr.emit(&mut buf).expect("header fits");
        self.seq += 1;
        let link = &mut self.busy_until[dir as usize];
        *link = (*link).max(self.now) + self.slot;
        let arrival = *link + self.delay;
        self.wire.push(Reverse((
            arrival,
            self.seq,
            dir,
            seg.payload_len,
            SegKey(buf, n),
        )));
    }

    /// When the next segment arrives.
    fn next_arrival(&self) -> Option<Time> {
        self.wire.peek().map(|Reverse(e)| e.0)
    }

    /// The next segment, if it has arrived by now: its direction, header and payload length.
    fn pop_arrived(&mut self) -> Option<(Dir, TcpRepr, u32)> {
        if self.next_arrival().is_none_or(|at| at > self.now) {
            return None;
        }
        let Reverse((_, _, dir, len, SegKey(buf, n))) = self.wire.pop()?;
        let repr = TcpRepr::parse(&buf[..n]).expect("valid header");
        Some((dir, repr, len))
    }
}

/// The endpoints at the two ends of a [`Pipe`].
pub(crate) trait Endpoints {
    /// The pipe.
    fn pipe(&mut self) -> &mut Pipe;

    /// Lets every endpoint send what it can into the pipe (and does the test's own
    /// bookkeeping of each step).
    fn pump(&mut self);

    /// A segment arrives at the end `dir` points to.
    fn receive(&mut self, dir: Dir, repr: &TcpRepr, payload_len: u32);

    /// Fires every endpoint's timers.
    fn handle_timeout(&mut self);

    /// The endpoints' earliest timer.
    fn poll_timeout(&self) -> Option<Time>;

    /// Runs until `until` or until nothing is scheduled: at each wake-up, delivers at most one
    /// arrived segment, fires the timers and pumps.
    fn run(&mut self, until: Time) {
        self.pump();
        while let Some(t) = [self.pipe().next_arrival(), self.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
        {
            if t > until {
                break;
            }
            let pipe = self.pipe();
            pipe.now = pipe.now.max(t);
            if let Some((dir, repr, len)) = self.pipe().pop_arrived() {
                self.receive(dir, &repr, len);
            }
            self.handle_timeout();
            self.pump();
        }
    }
}

/// A segment reaches a server (NewReno, reading everything it receives): `server`, if open,
/// takes it; otherwise a SYN is accepted (initial sequence number 7) and the new connection
/// returned.
pub(crate) fn serve(
    config: &TcpConfig,
    server: Option<&mut Connection>,
    now: Time,
    repr: &TcpRepr,
    payload_len: u32,
) -> Option<Connection> {
    match server {
        Some(s) => {
            s.handle_segment(now, repr, payload_len);
            let unread = s.bytes_unread();
            s.read(unread);
            None
        }
        None if repr.flags.syn => {
            let cc = Connection::newreno(config);
            Some(Connection::accept(config.clone(), repr, 7, cc))
        }
        None => None,
    }
}
