//! One established ATP connection over a real network: both directions of ATP (an
//! [`AtpSender`] for what this side sends, an [`AtpReceiver`] for what it receives) plus the
//! session's keep-alive, idle timeout and close, on one datagram path.
//!
//! Arriving SPP datagrams are routed by type: DATA, CANCEL and PROBE belong to the peer's
//! sender and go to the receiver half; ACK and REPORT answer this side's sender.
//!
//! # Outcomes when the connection ends
//! `Delivered` means the peer's endpoint holds the whole message for its application (with
//! flow control it was never over the peer's window, so it is never dropped for lack of
//! room). A callback timer fires at its deadline whatever the connection's state — the peer
//! may be silent or gone — with [`NaiEvent::TimerExpired`]; a message that was never sent
//! whole then ends `Expired` at once, and one that was (the peer may hold it) waits for the
//! peer's verdict on its cancel. When the connection ends, every message whose fate is still
//! unknown — sent and unacknowledged, or cancelled without a verdict — ends
//! [`Outcome::Abandoned`](crate::nai::Outcome::Abandoned): the peer may or may not have it.
//! That is the guarantee: never `Delivered` for a message the peer does not hold, never
//! `Expired`/`Cancelled` for one it may hand to its application.
//!
//! # A silent peer
//! See [`crate::session::Liveness`]: after one RTO without an answer only PINGs (10 bytes)
//! go out, backed off, and the connection ends after `silent_timeout`. A sender blocked by
//! the peer's window with nothing in flight also PINGs (backed off the same way), so a lost
//! window update costs at most `probe_interval_max`.

use crate::atp::{AtpConfig, AtpReceiver, AtpSender, RateSource};
use crate::nai::{MessageId, NaiEvent};
use crate::session::wire::is_session;
use crate::session::{CloseReason, Liveness, LivenessConfig, SessionRepr};
use crate::spp::{Delivery, SppDatagram, SppEvent, SppRepr};
use crate::time::Time;
use crate::wire::WireError;
use std::collections::VecDeque;
use std::time::Duration;

/// The longest wait for an answer before a peer counts as silent.
const MAX_SILENCE_BEFORE_PROBING: Duration = Duration::from_secs(1);

/// What a connection tells the application.
#[derive(Clone, Debug, PartialEq)]
pub enum ConnEvent {
    /// An event of this side's NAI scheduler: an outcome, a callback-timer expiry, a
    /// bandwidth notification, a message taken by the transport.
    Nai(NaiEvent),
    /// A whole message from the peer, with its bytes.
    Delivered(Delivery),
    /// The peer cancelled a message this side had partly received.
    Discarded(MessageId),
    /// The connection ended; nothing more will be sent or delivered. Reported once.
    Closed(CloseReason),
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    Open,
    /// Closing gracefully: sending what is live until it is final or the deadline passes.
    Draining {
        deadline: Time,
    },
    /// Ended; `close_pending` says whether a CLOSE still has to go out.
    Closed,
}

/// An established ATP connection (sans-IO): feed it every datagram from its peer, send what
/// `poll_transmit` writes, and call `handle_timeout` at `poll_timeout`. Engines reach it
/// through its [`Endpoint`](super::Endpoint), which calls these; the application's calls are
/// `send`, `control` (`cancel`, `defer`, `resume`, `set_priority`), `create_queue`, the
/// bandwidth ranges and the queries, each followed, like every input, by draining
/// `poll_transmit` and then `poll_event` (messages received, outcomes, `Closed`).
#[derive(Debug)]
pub struct AtpConnection {
    client_id: u64,
    /// This side's ATP sender; the application reaches it only through the calls of
    /// `app.rs`.
    pub(super) sender: AtpSender,
    receiver: AtpReceiver,
    liveness: Liveness,
    state: State,
    close_pending: Option<CloseReason>,
    events: VecDeque<ConnEvent>,
    malformed: u64,
    /// The latest time an input carried (for `poll_timeout`, which takes none).
    last_now: Time,
    /// Blocked by the peer's window with nothing in flight: when the next PING asking for
    /// a window update is due, and the interval after it.
    window_probe: Option<(Time, Duration)>,
    max_buffered_bytes: u64,
}

impl AtpConnection {
    /// A connection established at `now` for the handshake's `client_id`, with ATP's own
    /// estimator as its bandwidth source.
    pub fn new(config: AtpConfig, liveness: LivenessConfig, client_id: u64, now: Time) -> Self {
        let receiver = AtpReceiver::new(config.spp.clone());
        let max_buffered_bytes = config.max_buffered_bytes;
        AtpConnection {
            client_id,
            sender: AtpSender::new(config, RateSource::Estimated, now),
            receiver,
            liveness: Liveness::new(liveness, now),
            state: State::Open,
            close_pending: None,
            events: VecDeque::new(),
            malformed: 0,
            last_now: now,
            window_probe: None,
            max_buffered_bytes,
        }
    }

    /// The application took `messages` whole messages of `bytes` bytes from what this side
    /// delivered: with flow control their room goes back to the peer's window (see
    /// [`crate::spp::window`]). An engine whose configuration sets
    /// `receive_window_bytes` must call it, or the peer stops once the window is full.
    pub fn handle_consumed(&mut self, messages: u64, bytes: u64) {
        self.receiver.handle_consumed(messages, bytes);
    }

    /// The liveness tracker (last heard, probes sent to a silent peer).
    pub fn liveness(&self) -> &Liveness {
        &self.liveness
    }

    /// Whether the peer has left this side waiting past the RTO (only PINGs go out).
    pub fn is_peer_silent(&self, now: Time) -> bool {
        self.liveness.is_silent(now, self.rto())
    }

    /// How long this side waits for an answer before the peer counts as silent: one RTO,
    /// at most [`MAX_SILENCE_BEFORE_PROBING`] (an RTO inflated by a queue must not let a
    /// dead path eat seconds of full-size retransmissions).
    fn rto(&self) -> Duration {
        self.sender
            .spp()
            .rtt()
            .rto()
            .min(MAX_SILENCE_BEFORE_PROBING)
    }

    /// Whether this side has messages to send that the peer's window keeps back, with
    /// nothing in flight to bring a window update.
    fn window_blocked(&self) -> bool {
        let nai = self.sender.nai();
        let spp = self.sender.spp();
        spp.in_flight_packets() == 0
            && nai.has_sendable()
            && !nai.has_sendable_within(spp.new_message_max_len())
            && spp.peer_window_limit().is_some()
    }

    /// The handshake's client id, which names the connection on the wire.
    pub fn client_id(&self) -> u64 {
        self.client_id
    }

    /// This side's ATP sender, read-only (estimator state, for diagnostics). Application
    /// calls are the connection's own (`send`, `control`, …): engines never change the
    /// sender's parts.
    pub fn sender(&self) -> &AtpSender {
        &self.sender
    }

    /// The most bytes of submitted messages held at once ([`AtpConfig::max_buffered_bytes`]).
    pub fn max_buffered_bytes(&self) -> u64 {
        self.max_buffered_bytes
    }

    /// The receiving half.
    pub fn receiver(&self) -> &AtpReceiver {
        &self.receiver
    }

    /// Datagrams from the peer that did not parse.
    pub fn malformed(&self) -> u64 {
        self.malformed
    }

    /// Whether the connection is open: neither draining nor closed, so it takes new messages.
    pub fn is_open(&self) -> bool {
        self.state == State::Open
    }

    /// Whether the connection has ended.
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    /// Whether the connection has ended, its CLOSE is out and every event was polled: the
    /// engine may forget it.
    pub fn is_finished(&self) -> bool {
        self.is_closed() && self.close_pending.is_none() && self.events.is_empty()
    }

    /// Interface counters for the estimator (see [`AtpSender::handle_interface_bytes`] and
    /// [`AtpSender::handle_queue_len`]).
    pub fn handle_interface(&mut self, now: Time, total_bytes: u64, queue_packets: u32) {
        self.sender
            .handle_interface(now, total_bytes, queue_packets);
    }

    /// A datagram from the peer (session packet or SPP). A malformed one is counted and
    /// dropped, and the error returned for the engine's statistics.
    pub fn handle_datagram(&mut self, now: Time, bytes: &[u8]) -> Result<(), WireError> {
        self.last_now = self.last_now.max(now);
        if self.state == State::Closed {
            return Ok(());
        }
        let silent = self.is_peer_silent(now);
        let result = self.route(now, bytes);
        match result {
            Ok(()) => {
                self.liveness.on_heard(now);
                if silent {
                    self.sender.on_peer_back();
                }
            }
            Err(_) => self.malformed += 1,
        }
        result
    }

    fn route(&mut self, now: Time, bytes: &[u8]) -> Result<(), WireError> {
        if is_session(bytes) {
            match SessionRepr::parse(bytes)? {
                SessionRepr::Close { client_id, reason } if client_id == self.client_id => {
                    self.finish(reason, false);
                }
                // A PING asks for an acknowledgement (which carries the window): the peer
                // probes a silent path, a closed window, or keeps the connection alive.
                // (A PING is not the peer's own traffic: two quiet sides would PING each
                // other forever.)
                SessionRepr::Ping { client_id } if client_id == self.client_id => {
                    self.receiver.request_ack();
                }
                // A repeated HELLO or ACCEPT is the endpoint's.
                _ => {}
            }
            return Ok(());
        }
        let repr = SppRepr::parse(bytes)?;
        let payload = bytes.get(repr.buffer_len()..).unwrap_or_default();
        match repr {
            SppRepr::Data(_) | SppRepr::Cancel(_) | SppRepr::Probe(_) => {
                self.liveness.on_activity(now);
                self.receiver.handle_datagram_payload(now, &repr, payload);
            }
            SppRepr::Ack(_) | SppRepr::Report(_) => {
                let len = crate::convert::usize_u32_sat(payload.len());
                self.sender.handle_datagram(now, &repr, len);
            }
        }
        Ok(())
    }

    /// Writes the next datagram to send into `buf` (at least the configured
    /// `max_datagram_bytes` long) and returns its length. Order: CLOSE, acknowledgements and
    /// probe reports, then this side's ATP output, then a keep-alive PING when quiet.
    pub fn poll_transmit(&mut self, now: Time, buf: &mut [u8]) -> Option<(usize, bool)> {
        self.last_now = self.last_now.max(now);
        if let Some(reason) = self.close_pending.take() {
            let p = SessionRepr::Close {
                client_id: self.client_id,
                reason,
            };
            return p.emit(buf).ok().map(|n| (n, false));
        }
        if self.state == State::Closed {
            return None;
        }
        let (n, coalesce, expects_answer) = self.next_datagram(now, buf)?;
        self.liveness.on_sent(now, expects_answer);
        Some((n, coalesce))
    }

    /// A PING (which asks the peer for an acknowledgement).
    fn ping(&self, buf: &mut [u8]) -> Option<(usize, bool, bool)> {
        SessionRepr::Ping {
            client_id: self.client_id,
        }
        .emit(buf)
        .ok()
        .map(|n| (n, false, true))
    }

    /// The next datagram, whether it may be coalesced with its neighbours (DATA only: see
    /// [`Transmit::coalesce`](super::Transmit::coalesce)), and whether it expects an answer.
    fn next_datagram(&mut self, now: Time, buf: &mut [u8]) -> Option<(usize, bool, bool)> {
        if let Some(d) = self.receiver.poll_transmit(now) {
            return emit_spp(&d, None, buf).map(|n| (n, false, false));
        }
        let rto = self.rto();
        if self.liveness.is_silent(now, rto) {
            // A silent peer gets small probes only (no data, retransmission or probe
            // train) until it answers.
            if self.liveness.probe_due(now, rto) {
                self.liveness.on_probe_sent(now, rto);
                return self.ping(buf);
            }
            return None;
        }
        while let Some(d) = self.sender.poll_transmit(now) {
            let payload = match &d.repr {
                SppRepr::Data(h) => self.sender.payload(h),
                _ => None,
            };
            let data = matches!(d.repr, SppRepr::Data(_));
            // A DATA piece of a message submitted by size only has no bytes to send; it
            // cannot happen through the endpoint's API, so such a piece is skipped (and
            // retransmitted as lost, to no avail, until its message ends).
            if data && payload.is_none() {
                continue;
            }
            // DATA, CANCEL and PROBE are answered (an ACK, a verdict, a report).
            return emit_spp(&d, payload, buf).map(|n| (n, data, true));
        }
        if self.window_blocked() {
            match self.window_probe {
                None => self.window_probe = Some((now + rto, rto)),
                Some((at, interval)) if now >= at => {
                    let max = self.liveness.config().probe_interval_max;
                    let next = interval.saturating_mul(2).min(max);
                    self.window_probe = Some((now + next, next));
                    return self.ping(buf);
                }
                Some(_) => {}
            }
        } else {
            self.window_probe = None;
        }
        if self.liveness.quiet_ping_due(now) {
            // The peer's traffic stopped: is it still there?
            self.liveness.on_quiet_ping(now);
            return self.ping(buf);
        }
        if self.liveness.ping_due(now) {
            return self.ping(buf);
        }
        None
    }

    /// When `handle_timeout` should next be called.
    pub fn poll_timeout(&self) -> Option<Time> {
        let rto = self.rto();
        let liveness = self.liveness.poll_timeout(rto);
        let sender = if self.liveness.is_silent(self.last_now, rto) {
            // Silent peer: nothing is sent but PINGs, so pacing and the estimator's probes
            // wait; callback timers and the retransmission timer keep running.
            let nai = self.sender.nai().poll_timeout();
            let spp = self.sender.spp().poll_timeout();
            match (nai, spp) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        } else {
            self.sender.poll_timeout()
        };
        let window = self.window_probe.map(|(at, _)| at);
        let t = min_time(sender, liveness);
        let t = match window {
            Some(w) => min_time(t, w),
            None => t,
        };
        match self.state {
            State::Closed => None,
            State::Open => t,
            State::Draining { deadline } => min_time(t, deadline),
        }
    }

    /// Runs ATP's timers, the idle timeout and a graceful close's progress.
    pub fn handle_timeout(&mut self, now: Time) {
        self.last_now = self.last_now.max(now);
        if self.state == State::Closed {
            return;
        }
        if self.sender.poll_timeout().is_some_and(|t| t <= now) {
            self.sender.handle_timeout(now);
        }
        if self.liveness.is_dead(now) {
            self.finish(CloseReason::Idle, true);
            return;
        }
        self.check_drained(now);
    }

    /// Closes the connection: with `linger` zero at once, otherwise after every live message
    /// of this side is final or `linger` has passed, whichever comes first. Messages still
    /// live then are not reported again: the application is told the connection closed. A
    /// second close may shorten a graceful close's wait (an endpoint shutting down closes at
    /// once what its application was closing slowly), never lengthen it.
    pub fn close(&mut self, now: Time, linger: Duration) {
        let deadline = now + linger;
        match self.state {
            State::Open => self.state = State::Draining { deadline },
            State::Draining { deadline: d } if deadline < d => {
                self.state = State::Draining { deadline };
            }
            State::Draining { .. } | State::Closed => {}
        }
        self.check_drained(now);
    }

    fn check_drained(&mut self, now: Time) {
        if let State::Draining { deadline } = self.state
            && (self.sender.nai().live_messages() == 0 || now >= deadline)
        {
            self.finish(CloseReason::Application, true);
        }
    }

    /// Ends the connection, telling the peer if `tell_peer`.
    fn finish(&mut self, reason: CloseReason, tell_peer: bool) {
        if self.state == State::Closed {
            return;
        }
        self.state = State::Closed;
        self.sender.nai_mut().abandon_all();
        if tell_peer {
            self.close_pending = Some(reason);
        }
        self.pump();
        self.events.push_back(ConnEvent::Closed(reason));
    }

    /// Moves the halves' events into the connection's queue.
    fn pump(&mut self) {
        while let Some(ev) = self.sender.poll_event() {
            self.events.push_back(ConnEvent::Nai(ev));
        }
        while let Some(ev) = self.receiver.poll_event() {
            self.events.push_back(match ev {
                SppEvent::Delivered(d) => ConnEvent::Delivered(d),
                SppEvent::Discarded { id } => ConnEvent::Discarded(id),
            });
        }
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<ConnEvent> {
        if self.events.is_empty() && self.state != State::Closed {
            self.pump();
        }
        self.events.pop_front()
    }
}

fn min_time(a: Option<Time>, b: Time) -> Option<Time> {
    Some(a.map_or(b, |a| a.min(b)))
}

/// Writes an SPP datagram: header, then `payload` (DATA) or zero padding (PROBE).
fn emit_spp(d: &SppDatagram, payload: Option<&[u8]>, buf: &mut [u8]) -> Option<usize> {
    let n = d.repr.emit(buf).ok()?;
    let total = d.wire_len();
    let body = buf.get_mut(n..total)?;
    match payload {
        Some(p) if p.len() == body.len() => body.copy_from_slice(p),
        Some(_) => return None,
        None => body.fill(0),
    }
    Some(total)
}
