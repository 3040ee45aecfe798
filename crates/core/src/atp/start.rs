//! ATP's first flight, with the default estimator: a window on packets in flight until the
//! path has been measured by something sturdier than the connection's one packet pair.
//!
//! The pair measures the bottleneck's capacity only where the bottleneck spaces the two
//! datagrams (Dovrolis, Ramanathan and Moore, INFOCOM 2001). A token-bucket shaper (tbf, a
//! cellular scheduler's grant) passes them within its burst at the line rate, so ATP — which
//! has no congestion window, only a pacing rate (§4.2) — paced its first flight at gigabits
//! into a 10 Mbit/s link and lost thousands of datagrams before the estimator's between-tick
//! drain reaction cut the rate (EXPERIMENTS.md, runtime section). Until the first of
//!
//! * the estimator's first tick (usage measured over a second),
//! * a drain-rate sample (the interface queue built up on a busy link), or
//! * a loss,
//!
//! the packets in flight are limited by a window that starts at RFC 6928's initial window of
//! ten and grows by one per acknowledged packet — RFC 5681's slow start, doubling per round
//! trip — the standard way for a sender that has not measured a path to probe it. After that
//! ATP is paced only, as the paper has it. [`EstimatorMode::Paper`](super::EstimatorMode)
//! (Figure 3 as printed) has no such window.

/// RFC 6928's initial window, in packets.
pub const INITIAL_WINDOW_PACKETS: u32 = 10;

/// The first-flight window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StartWindow {
    /// Packets allowed in flight; `None` once the first flight is over (or never used).
    window: Option<u32>,
}

impl StartWindow {
    /// A window of `initial_packets` (at least 1), or none at all when `active` is false.
    pub fn new(active: bool, initial_packets: u32) -> StartWindow {
        StartWindow {
            window: active.then_some(initial_packets.max(1)),
        }
    }

    /// Whether another packet may go out with `in_flight` already out.
    pub fn allows(&self, in_flight: usize) -> bool {
        self.window
            .is_none_or(|w| in_flight < usize::try_from(w).unwrap_or(usize::MAX))
    }

    /// `packets` were acknowledged: slow start grows the window by as many.
    pub fn on_acked(&mut self, packets: u32) {
        if let Some(w) = self.window.as_mut() {
            *w = w.saturating_add(packets);
        }
    }

    /// The path has been measured (a tick, a drain sample) or has lost a packet: the first
    /// flight is over and pacing alone limits ATP.
    pub fn end(&mut self) {
        self.window = None;
    }

    /// Whether the window still limits the sender.
    pub fn is_active(&self) -> bool {
        self.window.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_window_doubles_per_round_and_ends() {
        let mut s = StartWindow::new(true, INITIAL_WINDOW_PACKETS);
        assert!(s.allows(9) && !s.allows(10));
        // A round trip acknowledges the ten in flight: twenty may be out next.
        s.on_acked(10);
        assert!(s.allows(19) && !s.allows(20));
        s.end();
        assert!(!s.is_active() && s.allows(1_000_000));
    }

    #[test]
    fn test_inactive_window_never_limits() {
        let mut s = StartWindow::new(false, INITIAL_WINDOW_PACKETS);
        s.on_acked(5);
        assert!(!s.is_active() && s.allows(usize::MAX - 1));
    }
}
