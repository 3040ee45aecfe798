//! The UDP send gate: what a UDP sender asks before each datagram (papers/001 §4, §5.2).
//!
//! > "These parameters can be checked just before sending out a new datagram." (§4)
//!
//! The gate holds the socket's send mode, set by [`UdpAction`]s, and answers each
//! [`UdpActionGate::offer`] with a [`SendVerdict`]:
//!
//! | mode         | verdict on offer                                                     |
//! |--------------|----------------------------------------------------------------------|
//! | `Normal`     | `Send(d)` — or `Queued` behind still-held datagrams, to keep order   |
//! | `Sleeping`   | `Wait(d)`: the sender keeps `d` and waits for [`GateEvent::Woken`]   |
//! | `Discarding` | `Discarded`: dropped, counted                                         |
//! | `Buffering`  | `Queued`, or `BufferFull(d)` when the bound is reached (never silent) |
//! | `Failing`    | `Failed(d)`: the send is an error the application handles             |
//!
//! Held datagrams leave through [`UdpActionGate::poll_transmit`], oldest first, only in
//! `Normal` mode. `Wakeup` ends `Sleeping` and `Buffering`; `Normal` ends any mode. A sleep
//! with a maximum ends by itself at [`UdpActionGate::poll_timeout`]. Leaving `Sleeping`
//! always emits [`GateEvent::Woken`].
//!
//! Call order: `apply` actions as an [`crate::env::ActionTable`] decides them; `offer` each
//! new datagram; drain `poll_transmit` and `poll_event`; arm a timer at `poll_timeout`.

use super::actions::UdpAction;
use super::error::EnvError;
use crate::time::Time;
use std::collections::VecDeque;

/// The send mode of a UDP socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UdpMode {
    /// Datagrams go out.
    Normal,
    /// Senders wait; `until` is the end of a sleep with a maximum.
    Sleeping {
        /// When the sleep ends by itself.
        until: Option<Time>,
    },
    /// Datagrams are dropped.
    Discarding,
    /// Datagrams are held.
    Buffering,
    /// Sends fail.
    Failing,
}

/// The gate's answer to one datagram.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SendVerdict<D> {
    /// Send it now.
    Send(D),
    /// The gate holds it; it will come out of `poll_transmit`.
    Queued,
    /// Dropped by the discard action.
    Discarded,
    /// The socket sleeps: keep the datagram and offer it again after [`GateEvent::Woken`].
    Wait(D),
    /// The fail action is in force: the send is an error.
    Failed(D),
    /// The buffer is at its bound: the send is an error, the datagram is returned.
    BufferFull(D),
}

/// Something the sender should know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GateEvent {
    /// The socket left `Sleeping`; `timed_out` when its maximum sleep ran out.
    Woken {
        /// The sleep ended by its maximum rather than by an action.
        timed_out: bool,
    },
}

/// Counters of a gate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GateStats {
    /// `Send` verdicts plus datagrams released by `poll_transmit`.
    pub sent: u64,
    /// Datagrams taken into the buffer.
    pub queued: u64,
    /// Datagrams dropped by discard.
    pub discarded: u64,
    /// `Wait` verdicts.
    pub waits: u64,
    /// `Failed` verdicts.
    pub failed: u64,
    /// `BufferFull` verdicts.
    pub buffer_full: u64,
}

/// The sans-IO UDP send gate; see the module documentation.
#[derive(Clone, Debug)]
pub struct UdpActionGate<D> {
    mode: UdpMode,
    held: VecDeque<D>,
    held_capacity: usize,
    events: VecDeque<GateEvent>,
    stats: GateStats,
}

impl<D> UdpActionGate<D> {
    /// A gate in `Normal` mode that holds at most `buffer_datagrams` datagrams.
    pub fn new(buffer_datagrams: usize) -> Result<UdpActionGate<D>, EnvError> {
        if buffer_datagrams == 0 {
            return Err(EnvError::ZeroCapacity("UDP buffer"));
        }
        Ok(UdpActionGate {
            mode: UdpMode::Normal,
            held: VecDeque::new(),
            held_capacity: buffer_datagrams,
            events: VecDeque::new(),
            stats: GateStats::default(),
        })
    }

    fn set_mode(&mut self, mode: UdpMode, timed_out: bool) {
        if matches!(self.mode, UdpMode::Sleeping { .. })
            && !matches!(mode, UdpMode::Sleeping { .. })
        {
            // At most one Woken is pending: the sender needs to know once.
            if !self.events.contains(&GateEvent::Woken { timed_out }) {
                self.events.push_back(GateEvent::Woken { timed_out });
            }
        }
        self.mode = mode;
    }

    /// Performs a UDP action at `now`.
    pub fn apply(&mut self, now: Time, action: UdpAction) {
        let next = match action {
            UdpAction::Sleep { max_sleep } => UdpMode::Sleeping {
                until: max_sleep.map(|d| now.saturating_add(d)),
            },
            UdpAction::Wakeup => match self.mode {
                UdpMode::Sleeping { .. } | UdpMode::Buffering => UdpMode::Normal,
                other => other,
            },
            UdpAction::Discard => UdpMode::Discarding,
            UdpAction::Buffer => UdpMode::Buffering,
            UdpAction::Fail => UdpMode::Failing,
            UdpAction::Normal => UdpMode::Normal,
        };
        self.set_mode(next, false);
    }

    /// Asks whether datagram `d` may be sent at `now`.
    pub fn offer(&mut self, now: Time, d: D) -> SendVerdict<D> {
        self.handle_timeout(now);
        match self.mode {
            UdpMode::Normal if self.held.is_empty() => {
                self.stats.sent += 1;
                SendVerdict::Send(d)
            }
            UdpMode::Normal | UdpMode::Buffering => {
                if self.held.len() >= self.held_capacity {
                    self.stats.buffer_full += 1;
                    SendVerdict::BufferFull(d)
                } else {
                    self.stats.queued += 1;
                    self.held.push_back(d);
                    SendVerdict::Queued
                }
            }
            UdpMode::Sleeping { .. } => {
                self.stats.waits += 1;
                SendVerdict::Wait(d)
            }
            UdpMode::Discarding => {
                self.stats.discarded += 1;
                SendVerdict::Discarded
            }
            UdpMode::Failing => {
                self.stats.failed += 1;
                SendVerdict::Failed(d)
            }
        }
    }

    /// The next held datagram to send (only in `Normal` mode), oldest first.
    pub fn poll_transmit(&mut self) -> Option<D> {
        if self.mode != UdpMode::Normal {
            return None;
        }
        let d = self.held.pop_front()?;
        self.stats.sent += 1;
        Some(d)
    }

    /// The next event for the sender.
    pub fn poll_event(&mut self) -> Option<GateEvent> {
        self.events.pop_front()
    }

    /// When a sleep with a maximum ends.
    pub fn poll_timeout(&self) -> Option<Time> {
        match self.mode {
            UdpMode::Sleeping { until } => until,
            _ => None,
        }
    }

    /// Ends a sleep whose maximum has run out by `now`.
    pub fn handle_timeout(&mut self, now: Time) {
        if let UdpMode::Sleeping { until: Some(t) } = self.mode
            && t <= now
        {
            self.set_mode(UdpMode::Normal, true);
        }
    }

    /// The current mode.
    pub fn mode(&self) -> UdpMode {
        self.mode
    }

    /// Datagrams held.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Counters.
    pub fn stats(&self) -> GateStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn t(ms: u64) -> Time {
        Time::from_millis(ms)
    }

    fn gate() -> UdpActionGate<u32> {
        UdpActionGate::new(3).unwrap()
    }

    #[test]
    fn test_normal_sends() {
        let mut g = gate();
        assert_eq!(g.offer(t(0), 1), SendVerdict::Send(1));
        assert_eq!(g.poll_event(), None);
    }

    #[test]
    fn test_sleeping_waits_until_wakeup() {
        let mut g = gate();
        g.apply(t(0), UdpAction::Sleep { max_sleep: None });
        assert_eq!(g.offer(t(1), 1), SendVerdict::Wait(1));
        assert_eq!(g.poll_timeout(), None);
        g.apply(t(5), UdpAction::Wakeup);
        assert_eq!(g.poll_event(), Some(GateEvent::Woken { timed_out: false }));
        assert_eq!(g.offer(t(6), 1), SendVerdict::Send(1));
        assert_eq!(g.stats().waits, 1);
    }

    #[test]
    fn test_max_sleep_ends_the_sleep() {
        let mut g = gate();
        let max = Some(Duration::from_millis(500));
        g.apply(t(100), UdpAction::Sleep { max_sleep: max });
        assert_eq!(g.poll_timeout(), Some(t(600)));
        g.handle_timeout(t(599));
        assert!(matches!(g.mode(), UdpMode::Sleeping { .. }));
        assert_eq!(g.offer(t(599), 7), SendVerdict::Wait(7));
        g.handle_timeout(t(600));
        assert_eq!(g.mode(), UdpMode::Normal);
        assert_eq!(g.poll_event(), Some(GateEvent::Woken { timed_out: true }));
        // Offering past the deadline without a timer call also wakes first.
        g.apply(t(700), UdpAction::Sleep { max_sleep: max });
        assert_eq!(g.offer(t(1_300), 8), SendVerdict::Send(8));
        assert_eq!(g.poll_event(), Some(GateEvent::Woken { timed_out: true }));
    }

    #[test]
    fn test_buffer_is_bounded_and_flushed_in_order_on_wakeup() {
        let mut g = gate();
        g.apply(t(0), UdpAction::Buffer);
        for i in 0..3 {
            assert_eq!(g.offer(t(1), i), SendVerdict::Queued);
        }
        assert_eq!(g.offer(t(1), 3), SendVerdict::BufferFull(3));
        assert_eq!(g.poll_transmit(), None, "held while buffering");
        g.apply(t(2), UdpAction::Wakeup);
        // New datagrams queue behind the held ones, so order is kept.
        assert_eq!(g.offer(t(2), 9), SendVerdict::BufferFull(9));
        assert_eq!(g.poll_transmit(), Some(0));
        assert_eq!(g.offer(t(2), 9), SendVerdict::Queued);
        let rest: Vec<u32> = std::iter::from_fn(|| g.poll_transmit()).collect();
        assert_eq!(rest, vec![1, 2, 9]);
        assert_eq!(g.offer(t(3), 10), SendVerdict::Send(10));
        let s = g.stats();
        assert_eq!((s.queued, s.buffer_full, s.sent), (4, 2, 5));
    }

    #[test]
    fn test_discard_and_fail() {
        let mut g = gate();
        g.apply(t(0), UdpAction::Discard);
        assert_eq!(g.offer(t(1), 1), SendVerdict::Discarded);
        g.apply(t(2), UdpAction::Wakeup);
        assert_eq!(
            g.mode(),
            UdpMode::Discarding,
            "wakeup ends only sleep and buffer"
        );
        g.apply(t(3), UdpAction::Fail);
        assert_eq!(g.offer(t(4), 2), SendVerdict::Failed(2));
        g.apply(t(5), UdpAction::Normal);
        assert_eq!(g.offer(t(6), 3), SendVerdict::Send(3));
        let s = g.stats();
        assert_eq!((s.discarded, s.failed, s.sent), (1, 1, 1));
    }

    #[test]
    fn test_sleep_then_buffer_keeps_the_sender_informed() {
        let mut g = gate();
        g.apply(t(0), UdpAction::Sleep { max_sleep: None });
        assert_eq!(g.offer(t(1), 1), SendVerdict::Wait(1));
        g.apply(t(2), UdpAction::Buffer);
        assert_eq!(g.poll_event(), Some(GateEvent::Woken { timed_out: false }));
        assert_eq!(g.offer(t(3), 1), SendVerdict::Queued);
        assert!(UdpActionGate::<u32>::new(0).is_err());
    }
}
