//! Environment-aware sockets on a simulated host (papers/001 §3.3, §4, §5): a CBR sender whose
//! sends go through a [`UdpActionGate`], and TCP endpoints whose action table applies
//! [`TcpAction`]s through the one TCP's hooks. Each reads its host's event log
//! ([`super::env_host::EnvHost`]) through its own [`ActionTable`] before every input and
//! poll, so an event acts at the instant it happens.

use super::cbr::cbr_packet;
use super::env_host::EnvHost;
use super::tcp::{TcpReceiver, TcpSender};
use crate::agent::Agent;
use crate::packet::{Addr, Packet};
use adaptnet_core::Time;
use adaptnet_core::cbr::CbrHeader;
use adaptnet_core::env::{
    Action, ActionTable, GateEvent, SendVerdict, TcpAction, UdpActionGate, UdpMode,
};
use adaptnet_core::tcp::Connection;
use std::time::Duration;

/// A socket's action table and its cursor into the host's event log.
pub struct EnvActions {
    env: EnvHost,
    table: ActionTable,
    cursor: usize,
    performed: u64,
}

impl EnvActions {
    /// Reads `env`'s events from now on through `table`.
    pub fn new(env: EnvHost, table: ActionTable) -> EnvActions {
        EnvActions {
            env,
            table,
            cursor: 0,
            performed: 0,
        }
    }

    /// The actions decided by the events logged since the last call, in order.
    pub fn take(&mut self) -> Vec<Action> {
        let env = self.env.borrow();
        let mut out = Vec::new();
        for ev in env.log.get(self.cursor..).into_iter().flatten() {
            out.extend(self.table.handle_event(ev).into_iter().map(|f| f.action));
        }
        self.cursor = env.log.len();
        self.performed += out.len() as u64;
        out
    }

    /// Actions decided so far.
    pub fn performed(&self) -> u64 {
        self.performed
    }

    /// Host events read so far.
    pub fn events_seen(&self) -> usize {
        self.cursor
    }
}

/// Buffered datagrams leave one per `FLUSH_PACE` application intervals once the buffer is
/// released (1.2× the application's rate), so the backlog drains without flooding the link.
pub const FLUSH_PACE: f64 = 1.0 / 1.2;

/// A CBR sender whose datagrams pass a [`UdpActionGate`]. The application is a loop
/// `send(); wait(interval)` of `packets` datagrams (or until stopped): a send that the gate
/// answers `Wait` blocks the loop until the gate wakes it (§5.2's sleeping process), after
/// which the loop goes on one interval after the blocked send returned. Discarded, failed and
/// refused (buffer full) sends are counted and the loop goes on. While the gate holds
/// datagrams, new ones queue behind them (order is kept) and leave paced by [`FLUSH_PACE`].
pub struct EnvCbrSender {
    local: Addr,
    remote: Addr,
    interval: Duration,
    payload_len: u32,
    packets: Option<u32>,
    gate: UdpActionGate<CbrHeader>,
    actions: EnvActions,
    running: bool,
    next_send: Time,
    seq: u32,
    blocked: Option<(CbrHeader, Time)>,
    blocked_total: Duration,
    next_release: Time,
    offered: u64,
    completed_at: Option<Time>,
}

impl EnvCbrSender {
    /// A sender of `datagram_bytes`-byte payloads at `rate_bytes_per_s`, at most `packets`
    /// datagrams, through a gate holding up to `buffer_datagrams`.
    pub fn new(
        local: Addr,
        remote: Addr,
        rate_bytes_per_s: f64,
        datagram_bytes: u32,
        packets: Option<u32>,
        buffer_datagrams: usize,
        actions: EnvActions,
    ) -> Result<EnvCbrSender, adaptnet_core::env::EnvError> {
        let per_s = rate_bytes_per_s / f64::from(datagram_bytes.max(1));
        let interval = if per_s.is_finite() && per_s > 0.0 {
            Duration::from_secs_f64(1.0 / per_s)
        } else {
            Duration::MAX
        };
        let header = u32::try_from(CbrHeader::LEN).unwrap_or(0);
        Ok(EnvCbrSender {
            local,
            remote,
            interval,
            payload_len: datagram_bytes.saturating_sub(header),
            packets,
            gate: UdpActionGate::new(buffer_datagrams)?,
            actions,
            running: false,
            next_send: Time::MAX,
            seq: 0,
            blocked: None,
            blocked_total: Duration::ZERO,
            next_release: Time::ZERO,
            offered: 0,
            completed_at: None,
        })
    }

    /// The gate (mode, held datagrams, counters).
    pub fn gate(&self) -> &UdpActionGate<CbrHeader> {
        &self.gate
    }

    /// Total time the application spent blocked in a sleeping send.
    pub fn blocked(&self) -> Duration {
        self.blocked_total
    }

    /// When the last datagram was handed to the gate (sized runs).
    pub fn completed_at(&self) -> Option<Time> {
        self.completed_at
    }

    fn packet(&self, h: &CbrHeader) -> Option<Packet> {
        cbr_packet(self.local, self.remote, h, self.payload_len)
    }

    fn apply_actions(&mut self, now: Time) {
        for a in self.actions.take() {
            if let Action::Udp(u) = a {
                self.gate.apply(now, u);
            }
        }
        self.gate.handle_timeout(now);
        while let Some(GateEvent::Woken { .. }) = self.gate.poll_event() {}
    }

    fn done(&self) -> bool {
        self.packets.is_some_and(|n| self.seq >= n)
    }
}

impl Agent for EnvCbrSender {
    fn start(&mut self, now: Time) {
        self.running = true;
        self.next_send = now;
    }

    fn stop(&mut self, _now: Time) {
        self.running = false;
    }

    fn handle_packet(&mut self, _now: Time, _packet: Packet) {}

    fn handle_timeout(&mut self, now: Time) {
        self.apply_actions(now);
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Packet> {
        self.apply_actions(now);
        if self.gate.held() > 0 {
            // Drain the buffer paced, not in one burst that the radio's queue would drop.
            if now < self.next_release {
                return None;
            }
            if let Some(h) = self.gate.poll_transmit() {
                self.next_release = now.saturating_add(self.interval.mul_f64(FLUSH_PACE));
                return self.packet(&h);
            }
        }
        if let Some((h, since)) = self.blocked {
            if matches!(self.gate.mode(), UdpMode::Sleeping { .. }) {
                return None;
            }
            self.blocked = None;
            self.blocked_total += now - since;
            self.next_send = now.saturating_add(self.interval);
            return match self.gate.offer(now, h) {
                SendVerdict::Send(h) => self.packet(&h),
                _ => None, // queued, dropped or refused by the mode the wakeup left
            };
        }
        while self.running && !self.done() && self.next_send <= now {
            let h = CbrHeader {
                seq: self.seq,
                sent_at: now,
            };
            self.seq += 1;
            self.offered += 1;
            if self.done() {
                self.completed_at = Some(now);
            }
            self.next_send = self.next_send.saturating_add(self.interval);
            match self.gate.offer(now, h) {
                SendVerdict::Send(h) => return self.packet(&h),
                SendVerdict::Wait(h) => {
                    self.blocked = Some((h, now));
                    return None;
                }
                SendVerdict::Queued
                | SendVerdict::Discarded
                | SendVerdict::Failed(_)
                | SendVerdict::BufferFull(_) => {}
            }
        }
        None
    }

    fn poll_timeout(&self) -> Option<Time> {
        if self.gate.held() > 0 && self.gate.mode() == UdpMode::Normal {
            return Some(self.next_release);
        }
        let gate = self.gate.poll_timeout();
        let send =
            (self.running && !self.done() && self.blocked.is_none()).then_some(self.next_send);
        match (gate, send) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let s = self.gate.stats();
        let mut v = vec![
            ("datagrams_offered", self.offered as f64),
            ("datagrams_sent", s.sent as f64),
            ("datagrams_buffered", s.queued as f64),
            ("datagrams_discarded", s.discarded as f64),
            ("sends_failed", s.failed as f64),
            ("sends_buffer_full", s.buffer_full as f64),
            ("sends_blocked", s.waits as f64),
            ("blocked_s", self.blocked_total.as_secs_f64()),
            ("env_actions", self.actions.performed() as f64),
            ("env_events", self.actions.events_seen() as f64),
        ];
        if let Some(t) = self.completed_at {
            v.push(("completed_s", t.as_secs_f64()));
        }
        v
    }
}

/// A TCP endpoint whose connection is retuned by an action table.
pub trait TcpEndpoint: Agent {
    /// The connection, once open.
    fn conn_mut(&mut self) -> Option<&mut Connection>;
}

impl TcpEndpoint for TcpSender {
    fn conn_mut(&mut self) -> Option<&mut Connection> {
        self.connection_mut()
    }
}

impl TcpEndpoint for TcpReceiver {
    fn conn_mut(&mut self) -> Option<&mut Connection> {
        self.connection_mut()
    }
}

/// A TCP sender or receiver plus an action table: before each input and poll, the actions
/// decided by new events are applied with [`TcpAction::apply`]. An action decided before the
/// connection opens, or one the TCP has no hook for, is counted and skipped.
pub struct EnvTcp<T> {
    inner: T,
    actions: EnvActions,
    applied: u64,
    skipped: u64,
    rst_timers: u64,
    dup_acks: u64,
}

impl<T: TcpEndpoint> EnvTcp<T> {
    /// Wraps `inner`.
    pub fn new(inner: T, actions: EnvActions) -> EnvTcp<T> {
        EnvTcp {
            inner,
            actions,
            applied: 0,
            skipped: 0,
            rst_timers: 0,
            dup_acks: 0,
        }
    }

    /// The wrapped endpoint.
    pub fn inner(&self) -> &T {
        &self.inner
    }

    fn apply_actions(&mut self, now: Time) {
        for a in self.actions.take() {
            let Action::Tcp(t) = a else {
                self.skipped += 1;
                continue;
            };
            match self.inner.conn_mut().map(|c| t.apply(now, c)) {
                Some(Ok(())) => {
                    self.applied += 1;
                    match t {
                        TcpAction::ResetTimers => self.rst_timers += 1,
                        TcpAction::DupAcks(n) => self.dup_acks += u64::from(n),
                        _ => {}
                    }
                }
                _ => self.skipped += 1,
            }
        }
    }
}

impl<T: TcpEndpoint> Agent for EnvTcp<T> {
    fn start(&mut self, now: Time) {
        self.inner.start(now);
    }

    fn stop(&mut self, now: Time) {
        self.inner.stop(now);
    }

    fn handle_packet(&mut self, now: Time, packet: Packet) {
        self.apply_actions(now);
        self.inner.handle_packet(now, packet);
    }

    fn handle_timeout(&mut self, now: Time) {
        self.apply_actions(now);
        self.inner.handle_timeout(now);
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Packet> {
        self.apply_actions(now);
        self.inner.poll_transmit(now)
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.inner.poll_timeout()
    }

    fn delivered_bytes(&self) -> u64 {
        self.inner.delivered_bytes()
    }

    fn take_rtt_samples(&mut self) -> Vec<(Time, Duration)> {
        self.inner.take_rtt_samples()
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let mut v = self.inner.counters();
        v.push(("env_events", self.actions.events_seen() as f64));
        v.push(("env_actions_applied", self.applied as f64));
        v.push(("env_actions_skipped", self.skipped as f64));
        v.push(("env_rst_timers", self.rst_timers as f64));
        v.push(("env_dup_acks_requested", self.dup_acks as f64));
        v
    }
}
