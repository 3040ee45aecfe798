//! One established ATP connection over a real network: both directions of ATP (an
//! [`AtpSender`] for what this side sends, an [`AtpReceiver`] for what it receives) plus the
//! session's keep-alive, idle timeout and close, on one datagram path.
//!
//! Arriving SPP datagrams are routed by type: DATA, CANCEL and PROBE belong to the peer's
//! sender and go to the receiver half; ACK and REPORT answer this side's sender.

use crate::atp::{AtpConfig, AtpReceiver, AtpSender, RateSource};
use crate::nai::{MessageId, NaiEvent};
use crate::session::wire::is_session;
use crate::session::{CloseReason, Liveness, LivenessConfig, SessionRepr};
use crate::spp::{Delivery, SppDatagram, SppEvent, SppRepr};
use crate::time::Time;
use crate::wire::WireError;
use std::collections::VecDeque;
use std::time::Duration;

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
            max_buffered_bytes,
        }
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
        if self.state == State::Closed {
            return Ok(());
        }
        let result = self.route(now, bytes);
        match result {
            Ok(()) => self.liveness.on_heard(now),
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
                // PING refreshes liveness; a repeated HELLO or ACCEPT is the endpoint's.
                _ => {}
            }
            return Ok(());
        }
        let repr = SppRepr::parse(bytes)?;
        let payload = bytes.get(repr.buffer_len()..).unwrap_or_default();
        match repr {
            SppRepr::Data(_) | SppRepr::Cancel(_) | SppRepr::Probe(_) => {
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
        let n = self.next_datagram(now, buf);
        if n.is_some() {
            self.liveness.on_sent(now);
        }
        n
    }

    /// The next datagram and whether it may be coalesced with its neighbours (DATA only:
    /// see [`Transmit::coalesce`](super::Transmit::coalesce)).
    fn next_datagram(&mut self, now: Time, buf: &mut [u8]) -> Option<(usize, bool)> {
        if let Some(d) = self.receiver.poll_transmit(now) {
            return emit_spp(&d, None, buf).map(|n| (n, false));
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
            return emit_spp(&d, payload, buf).map(|n| (n, data));
        }
        if self.liveness.ping_due(now) {
            return SessionRepr::Ping {
                client_id: self.client_id,
            }
            .emit(buf)
            .ok()
            .map(|n| (n, false));
        }
        None
    }

    /// When `handle_timeout` should next be called.
    pub fn poll_timeout(&self) -> Option<Time> {
        match self.state {
            State::Closed => None,
            State::Open => min_time(self.sender.poll_timeout(), self.liveness.poll_timeout()),
            State::Draining { deadline } => min_time(
                min_time(self.sender.poll_timeout(), self.liveness.poll_timeout()),
                deadline,
            ),
        }
    }

    /// Runs ATP's timers, the idle timeout and a graceful close's progress.
    pub fn handle_timeout(&mut self, now: Time) {
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
