//! Filler trains: while the application leaves the link idle, short trains of SPP PROBE
//! datagrams paced at a chosen rate above the estimate (§4.2's packet pair, sent at a rate
//! instead of back to back). The receiver reports the train's dispersion; compared with the
//! rate the train actually left at, it says whether the link took that rate or measured the
//! bottleneck (Keshav, SIGCOMM 1991; Dovrolis, Ramanathan and Moore, INFOCOM 2001: the
//! dispersion of a train sent faster than the bottleneck is the bottleneck's).
//!
//! A path that answers nothing gets no full trains. A train with no report at all (not even
//! a partial one: a lossy path still answers) before its grace ran out, or a stall of the
//! path's acknowledgements (see [`Filler::enter_silence`]), makes the filler *silent*: it
//! then sends only **pings** — trains of two PROBE datagrams without padding, whose report
//! proves the path carries datagrams again — at an interval that starts at the outage
//! interval and doubles per unanswered ping up to a cap, as TCP backs off its
//! retransmission timer (RFC 6298 §5.5) and the session's liveness its PINGs. A ping's
//! report ends the silence and the full train follows at once (one round trip later than
//! without the ping); if that train too gets no report (a path that passes small datagrams
//! but not full ones), the silence resumes where its backoff was, so full trains into a
//! path that never answers them go at most once per capped interval.

use crate::spp::wire::{MAX_PROBE_TRAIN, ProbeHeader, ProbeReport};
use crate::spp::{SppDatagram, SppRepr};
use crate::time::Time;
use std::time::Duration;

/// A train is given up once the application's DATA sent within it passes this many times the
/// train's own bytes. A train's datagrams go only when the application has nothing to send, so
/// a light application that uses most of the train's rate stretches it: 2 KB every 100 ms
/// with the train at 35 KB/s left one train datagram per message, and at one train's worth
/// of DATA (the bound this replaces) every train was given up before its end — the rise the
/// filler exists to find (51 KB/s after an outage, the estimate pinned at 28) was never
/// confirmed. A sender that is never idle sends no train datagram at all, and this bound
/// ends the train's pacing for it.
const DATA_PER_TRAIN: u64 = 4;

/// What a whole train's report says.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum TrainVerdict {
    /// It arrived as fast as it left: the link takes at least this rate (bytes/s).
    Taken(f64),
    /// It arrived slower: this is the bottleneck's rate (bytes/s).
    Bottleneck(f64),
}

/// A whole train's verdict, and whether it was judged by its tail alone (its second half, or
/// a confirming train's last quarter: see [`Filler::on_report`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Judged {
    pub(crate) verdict: TrainVerdict,
    pub(crate) tail: bool,
    /// The train left at the rate it was asked for (this host's pacing was not the limit).
    pub(crate) as_asked: bool,
    /// The rate the train left at, its DATA included (bytes/s).
    pub(crate) left: f64,
    /// The head (what the report of it covered) arrived as fast as the train left, and only
    /// the tail slower: a token bucket's signature (a FIFO bottleneck spaces the head too).
    pub(crate) head_taken: bool,
}

#[derive(Clone, Copy, Debug)]
struct Train {
    id: u32,
    rate: f64,
    packets: u8,
    sent: u8,
    first: Time,
    last: Time,
    /// DATA bytes sent between the train's first and last datagram: they crossed the
    /// bottleneck within the train's span, so they count in its dispersion.
    data_bytes: u64,
    /// `data_bytes` when each datagram of the train went: DATA sent after datagram `i`
    /// crossed the bottleneck after it, so a part of the train's dispersion can count the
    /// DATA within it.
    data_at: [u64; MAX_PROBE_TRAIN as usize],
    /// A ping: two unpadded datagrams that only ask whether the path answers.
    ping: bool,
    /// Some report of it arrived, even a partial one.
    answered: bool,
    /// The latest partial report that covers at most half the train (three quarters with
    /// `last_quarter`), as (bytes, gap): with the whole train's report it gives the
    /// dispersion of the train's tail.
    mid: Option<(u32, u64)>,
    /// When the latest partial report arrived, and what it covered (bytes, gap): a train
    /// whose reports are still coming is crossing a bottleneck slower than the estimate,
    /// not lost (see [`Filler::overdue_at`]).
    heard: Option<(Time, u32, u64)>,
    /// Judged by its last quarter instead of its second half (a confirming train: see
    /// `ControlConfig::filler_confirm_packets`).
    last_quarter: bool,
}

/// Whether the path answers the filler's trains.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Hearing {
    /// Trains get reports: full trains at their interval.
    Heard,
    /// No answer: only pings, the next one `interval` after the last.
    Silent { interval: Duration },
    /// A ping was answered: the next train is full; unanswered, the silence resumes with
    /// `interval` doubled.
    Answered { interval: Duration },
}

/// The silent filler's ping intervals: the first, and the cap the doubling stops at.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PingBackoff {
    pub(crate) first: Duration,
    pub(crate) max: Duration,
}

impl PingBackoff {
    /// The longest interval: the cap, or the first interval where that is longer.
    fn longest(self) -> Duration {
        self.max.max(self.first)
    }

    fn double(self, interval: Duration) -> Duration {
        interval.saturating_mul(2).min(self.longest())
    }
}

/// The filler's state: at most one train at a time.
#[derive(Clone, Debug)]
pub(crate) struct Filler {
    next_at: Time,
    train: Option<Train>,
    next_id: u32,
    /// Trains in a row the link took.
    successes: u32,
    datagram_bytes: u16,
    trains: u64,
    packets: u64,
    pings: u64,
    hearing: Hearing,
    backoff: PingBackoff,
    /// The latest train given up without a report, and whether it was a ping: a report of
    /// it that comes after all (a queue delayed it past its grace) still shows the path
    /// answers.
    overdue: Option<(u32, bool)>,
}

impl Filler {
    pub(crate) fn new(now: Time, datagram_bytes: u16, backoff: PingBackoff) -> Filler {
        Filler {
            next_at: now,
            train: None,
            // Distinct from the estimator clock's pair ids (which count up from 1).
            next_id: 1 << 31,
            successes: 0,
            datagram_bytes,
            trains: 0,
            packets: 0,
            pings: 0,
            hearing: Hearing::Heard,
            backoff,
            overdue: None,
        }
    }

    /// Datagram `index` of train `id`: padded to a full datagram, or bare for a ping.
    fn datagram(&self, id: u32, index: u8, ping: bool) -> SppDatagram {
        let repr = SppRepr::Probe(ProbeHeader {
            probe_id: id,
            index,
        });
        let pad = if ping {
            0
        } else {
            usize::from(self.datagram_bytes).saturating_sub(repr.buffer_len())
        };
        SppDatagram {
            repr,
            payload_len: crate::convert::usize_u32_sat(pad),
        }
    }

    /// Bytes of one datagram of train `t`.
    fn datagram_len(&self, t: &Train) -> u64 {
        self.datagram(t.id, 0, t.ping).wire_len() as u64
    }

    /// Whether only pings go (the path has not answered since its last silence).
    pub(crate) fn silent(&self) -> bool {
        matches!(self.hearing, Hearing::Silent { .. })
    }

    /// The path stopped answering (the control saw its acknowledgements stall): no full
    /// train until a ping is answered. A full train being sent or awaiting its report is
    /// given up — it went into the stall — and the first ping is due within the first
    /// backoff interval. Already silent: nothing changes (the backoff goes on).
    pub(crate) fn enter_silence(&mut self, now: Time) {
        let interval = match self.hearing {
            Hearing::Heard => self.backoff.first,
            Hearing::Answered { interval } => interval,
            Hearing::Silent { .. } => return,
        };
        self.hearing = Hearing::Silent { interval };
        if let Some(t) = self.train.filter(|t| !t.ping) {
            self.train = None;
            self.overdue = Some((t.id, false));
        }
        self.successes = 0;
        self.next_at = self.next_at.min(now.saturating_add(interval));
    }

    /// Whether a filler datagram is due at `now`.
    pub(crate) fn due(&self, now: Time) -> bool {
        match self.train {
            Some(t) => t.sent < t.packets,
            None => now >= self.next_at,
        }
    }

    /// The rate the current train is paced at, while it is being sent.
    pub(crate) fn sending_rate(&self) -> Option<f64> {
        self.train
            .filter(|t| t.sent > 0 && t.sent < t.packets)
            .map(|t| t.rate)
    }

    pub(crate) fn successes(&self) -> u32 {
        self.successes
    }

    pub(crate) fn trains(&self) -> u64 {
        self.trains
    }

    pub(crate) fn packets(&self) -> u64 {
        self.packets
    }

    pub(crate) fn pings(&self) -> u64 {
        self.pings
    }

    /// The next datagram: a new train of `packets` at `rate` (a ping while silent), or the
    /// current one's next.
    pub(crate) fn poll(
        &mut self,
        now: Time,
        rate: f64,
        packets: u8,
        last_quarter: bool,
    ) -> Option<SppDatagram> {
        if !self.due(now) || packets < 2 || !(rate.is_finite() && rate > 0.0) {
            return None;
        }
        let ping = self.silent();
        let train = self.train.get_or_insert_with(|| {
            let id = self.next_id;
            self.next_id = self.next_id.wrapping_add(1) | (1 << 31);
            self.trains += 1;
            if ping {
                self.pings += 1;
            }
            Train {
                id,
                rate,
                packets: if ping { 2 } else { packets },
                sent: 0,
                first: now,
                last: now,
                data_bytes: 0,
                data_at: [0; MAX_PROBE_TRAIN as usize],
                ping,
                answered: false,
                mid: None,
                heard: None,
                last_quarter,
            }
        });
        let index = train.sent;
        if let Some(d) = train.data_at.get_mut(usize::from(index)) {
            *d = train.data_bytes;
        }
        train.sent += 1;
        train.last = now;
        let (id, ping) = (train.id, train.ping);
        self.packets += 1;
        Some(self.datagram(id, index, ping))
    }

    /// DATA of `bytes` went out. Within a train it joins the train's dispersion (a light
    /// application's message does not wait for a train, nor spoil it: it is paced at the
    /// train's rate, so train and data together left at that rate); more than
    /// [`DATA_PER_TRAIN`] times the train's own bytes of it means the application is no
    /// longer light, and the train is given up.
    /// Returns whether the train was given up.
    pub(crate) fn on_data_sent(&mut self, now: Time, bytes: u64, interval: Duration) -> bool {
        let Some(t) = self
            .train
            .as_mut()
            .filter(|t| t.sent > 0 && t.sent < t.packets)
        else {
            return false;
        };
        t.data_bytes = t.data_bytes.saturating_add(bytes);
        let t = *t;
        let own = u64::from(t.packets) * self.datagram_len(&t);
        if t.data_bytes > DATA_PER_TRAIN * own {
            self.train = None;
            if t.ping {
                self.overdue = Some((t.id, true));
            }
            self.successes = 0;
            self.next_at = now.saturating_add(interval);
            return true;
        }
        false
    }

    /// The receiver's report. Only a whole train's report gives a verdict; any report of a
    /// ping (even one past its grace) ends a silence, and the full train is due at once.
    pub(crate) fn on_report(
        &mut self,
        now: Time,
        report: &ProbeReport,
        taken_fraction: f64,
        interval: Duration,
    ) -> Option<Judged> {
        if let Some((id, ping)) = self.overdue
            && id == report.probe_id
        {
            self.overdue = None;
            self.hear(now, ping);
            return None;
        }
        let t = self.train.as_mut()?;
        if report.probe_id != t.id {
            return None;
        }
        t.answered = true;
        let t = *t;
        if t.ping {
            self.train = None;
            self.hear(now, true);
            return None;
        }
        // Any report of a full train, a partial one too: the path carries full datagrams.
        self.hear(now, false);
        let size = self.datagram_len(&t);
        let whole = u64::from(t.packets - 1) * size;
        if u64::from(report.bytes) < whole {
            if let Some(cur) = self.train.as_mut() {
                cur.heard = Some((now, report.bytes, report.gap_ns));
            }
            let (num, den) = if t.last_quarter { (3, 4) } else { (1, 2) };
            if den * u64::from(report.bytes) <= num * whole
                && let Some(cur) = self.train.as_mut()
            {
                cur.mid = Some((report.bytes, report.gap_ns));
            }
            return None;
        }
        if t.sent < t.packets || report.gap_ns == 0 {
            return None;
        }
        self.train = None;
        let bytes = f64::from(report.bytes) + t.data_bytes as f64;
        let mut received = bytes * 1e9 / report.gap_ns as f64;
        let mut tail = false;
        let mut head_rate = None;
        // The tail's dispersion (the second half; a confirming train's last quarter), where a
        // report of the head came (with the DATA sent within the tail): a token bucket passes
        // a train's head at line rate and its tail at the bucket's rate, so the whole train's
        // dispersion overstates the rate the link sustains; the tail's is closer to it (on a
        // FIFO bottleneck both are its rate).
        if let Some((b, g)) = t.mid
            && report.gap_ns > g
            && report.bytes > b
        {
            // The report of the head covered datagrams 1 ..= m.
            let m = usize::try_from(u64::from(b) / size.max(1)).unwrap_or(usize::MAX);
            // DATA sent within the head (before datagram m left), and within the tail.
            let head_data = t.data_at.get(m).copied().unwrap_or(t.data_bytes);
            let data = t.data_bytes.saturating_sub(head_data);
            let tail_rate =
                (f64::from(report.bytes - b) + data as f64) * 1e9 / (report.gap_ns - g) as f64;
            head_rate = Some((f64::from(b) + head_data as f64) * 1e9 / g.max(1) as f64);
            tail = true;
            received = received.min(tail_rate);
        }
        let span = t.last.saturating_since(t.first).as_secs_f64();
        let left = if span > 0.0 {
            (whole + t.data_bytes) as f64 / span
        } else {
            f64::INFINITY
        };
        let as_asked = left >= taken_fraction * t.rate;
        let head_taken = head_rate.is_some_and(|h| h >= taken_fraction * left);
        if received >= taken_fraction * left {
            self.successes += 1;
            // The link took it: the next train follows at once, at a higher gain.
            self.next_at = now;
            Some(Judged {
                verdict: TrainVerdict::Taken(received.min(left)),
                tail,
                as_asked,
                left,
                head_taken,
            })
        } else {
            self.successes = 0;
            self.next_at = now.saturating_add(interval);
            Some(Judged {
                verdict: TrainVerdict::Bottleneck(received),
                tail,
                as_asked,
                left,
                head_taken,
            })
        }
    }

    /// The next train waits `interval` from `now` (what the last one showed needs no
    /// following up).
    pub(crate) fn wait(&mut self, now: Time, interval: Duration) {
        if self.train.is_none() {
            self.next_at = now.saturating_add(interval);
        }
    }

    /// What the last train showed is followed up at `at`, not before, at the first gain
    /// again.
    pub(crate) fn restart_at(&mut self, at: Time) {
        self.successes = 0;
        if self.train.is_none() {
            self.next_at = at;
        }
    }

    /// The next train goes at once (to confirm what the last one showed).
    pub(crate) fn follow_at_once(&mut self, now: Time) {
        if self.train.is_none() {
            self.next_at = self.next_at.min(now);
        }
    }

    /// DATA was acknowledged: like a ping's report, the path answers again (after an outage
    /// the first acknowledgement of a retransmission often comes before any ping's report).
    pub(crate) fn on_acked(&mut self, now: Time) {
        self.hear(now, true);
    }

    /// A report of a ping (`ping`) or of a full train arrived. A ping's ends a silence, and
    /// the full train is due at once; a full train's shows the path carries full datagrams.
    fn hear(&mut self, now: Time, ping: bool) {
        self.hearing = match (self.hearing, ping) {
            (Hearing::Silent { interval }, true) => {
                self.next_at = now;
                Hearing::Answered { interval }
            }
            (Hearing::Silent { .. } | Hearing::Answered { .. }, false) => Hearing::Heard,
            (h, _) => h,
        };
    }

    /// When a sent train's report is overdue: two smoothed RTTs after its last datagram (at
    /// least 10 ms, at most the silent filler's longest ping interval), plus the time its
    /// bytes take at `drain_rate` (bytes/s, the estimate): a train sent faster than the
    /// bottleneck queues, and its last datagram arrives that much later (a train that filled
    /// a token bucket's queue missed a shorter grace).
    pub(crate) fn poll_timeout(&self, srtt: Duration, drain_rate: f64) -> Option<Time> {
        self.train
            .filter(|t| t.sent >= t.packets)
            .map(|t| self.overdue_at(&t, srtt, drain_rate))
    }

    /// When the next filler datagram may go (the pacer decides within a train); `None` while
    /// a sent train awaits its report.
    pub(crate) fn next_due(&self) -> Option<Time> {
        match self.train {
            Some(t) if t.sent >= t.packets => None,
            Some(t) => Some(t.last),
            None => Some(self.next_at),
        }
    }

    /// When train `t`'s report is overdue: its grace after its last datagram — or, while
    /// partial reports keep arriving, the reply time (two smoothed RTTs, as in the grace)
    /// or two of the datagram spacings the reports show, whichever is longer, after the
    /// latest. The grace counts the train's bytes at the estimate, and a confirming train
    /// exists to find a rate below it: one sent at four times an 8 Mbit/s estimate into a
    /// link fallen to 2 queued four times longer than its grace, was given up every time
    /// with its tail still arriving, and the fall went unseen for two seconds.
    fn overdue_at(&self, t: &Train, srtt: Duration, drain_rate: f64) -> Time {
        let sent = t.last.saturating_add(self.grace(t, srtt, drain_rate));
        let Some((at, bytes, gap_ns)) = t.heard else {
            return sent;
        };
        let size = self.datagram_len(t).max(1);
        let arrived = (u64::from(bytes) / size).max(1);
        let spacing = Duration::from_nanos(gap_ns / arrived);
        let wait = Self::reply_time(srtt, self.backoff)
            .max(spacing.saturating_mul(2))
            .min(self.backoff.longest());
        sent.max(at.saturating_add(wait))
    }

    /// Two smoothed RTTs, at least 10 ms and at most the silent filler's longest ping
    /// interval (see [`Filler::grace`]).
    fn reply_time(srtt: Duration, backoff: PingBackoff) -> Duration {
        srtt.saturating_mul(2)
            .max(Duration::from_millis(10))
            .min(backoff.longest())
    }

    fn grace(&self, t: &Train, srtt: Duration, drain_rate: f64) -> Duration {
        // The smoothed RTT after an outage can be the outage's length: a link that held
        // packets through it (the emulator's queue at a trace's zero rate, a base station's
        // buffer) returns them with 30-s RTTs, and one such sample raised it to 22 s. A lost
        // ping's grace then held the filler 44 s with the path back and every message refused
        // (the emulated synthetic trace's 43-kbit/s plateau). A report later than the silent
        // filler's longest ping interval gains nothing by being waited for: the next ping
        // would have gone, and a late report still ends a silence (`overdue`). Those samples
        // stay in the smoothed RTT itself: the RTO needs them (the held packets are still
        // arriving), and the simulator's fading traces lost 2–3 points without them.
        let rtts = Self::reply_time(srtt, self.backoff);
        let bytes = (u64::from(t.packets) * self.datagram_len(t)) as f64;
        let drain = Duration::try_from_secs_f64(bytes / drain_rate).unwrap_or(Duration::ZERO);
        // At most a second of it: a collapsed estimate would otherwise hold a lost train
        // for minutes.
        rtts.saturating_add(drain.min(Duration::from_secs(1)))
    }

    /// Gives up a train whose report is overdue (a datagram or the report was lost). With
    /// no report at all the path may not answer: the filler goes (or stays) silent, and the
    /// next ping is due a backoff interval after this train began.
    pub(crate) fn handle_timeout(
        &mut self,
        now: Time,
        srtt: Duration,
        drain_rate: f64,
        interval: Duration,
    ) {
        let Some(t) = self.train else {
            return;
        };
        if t.sent < t.packets || now < self.overdue_at(&t, srtt, drain_rate) {
            return;
        }
        self.train = None;
        self.successes = 0;
        if !t.answered {
            self.overdue = Some((t.id, t.ping));
        }
        if t.answered {
            // A lossy path: it answers, so the usual interval.
            self.next_at = now.saturating_add(interval);
            return;
        }
        let backoff = self.backoff;
        let (wait, next) = match self.hearing {
            // The first unanswered train: a ping at the usual time (not sooner: a lost first
            // datagram is not an outage), and within the first backoff interval.
            Hearing::Heard => {
                let first = backoff.first;
                self.next_at = now.saturating_add(interval.min(first));
                self.hearing = Hearing::Silent { interval: first };
                return;
            }
            Hearing::Silent { interval } | Hearing::Answered { interval } => {
                (interval, backoff.double(interval))
            }
        };
        self.next_at = t.first.saturating_add(wait).max(now);
        self.hearing = Hearing::Silent { interval: next };
    }
}
