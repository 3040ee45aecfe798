//! The action vocabulary: what an action table may do to a UDP or TCP socket
//! (papers/001 §3.3.1, §4, §5).
//!
//! > "we restrict adaptation to mean choosing from a set of predefined actions provided by the
//! > transport layer. … actions should just set a few protocol specific parameters in the
//! > stack." (§3.3.1)
//!
//! The paper's integer argument is part of each variant here (a maximum sleep, a number of
//! duplicate ACKs), so an action cannot be given an argument it does not understand.

use std::time::Duration;

/// UDP actions (§4: "additional parameters *sleep*, *discard*, *buffer* and *fail*", and an
/// action "to set the behavior back to normal"; §5.2: `UDP_SLEEP`, `UDP_WAKEUP`). Their
/// effect on sends is defined by [`crate::env::UdpActionGate`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UdpAction {
    /// Sends wait until a wakeup; with `max_sleep`, at most that long (§5.2: "Applications may
    /// need to specify maximum time for which transmission can be deferred").
    Sleep {
        /// Longest the sleep may last; `None`: until a wakeup.
        max_sleep: Option<Duration>,
    },
    /// Ends a sleep or a buffering period (buffered datagrams are released); does not end
    /// discard or fail.
    Wakeup,
    /// Sends are dropped silently (§4: for real-time data when loss is very likely).
    Discard,
    /// Sends are held in a bounded buffer, released by a wakeup or normal.
    Buffer,
    /// Sends return an error, and the application decides (§4).
    Fail,
    /// Back to default behaviour from any mode (the paper's `UDP_NOP`, "Normal" in Table 1).
    Normal,
}

/// TCP actions (§4), applied through the hooks of the one TCP (see
/// [`crate::env::TcpAction::apply`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TcpAction {
    /// `TCP_RST_TIMERS`: clear the retransmission backoff and retransmit now (§4, §5.3).
    ResetTimers,
    /// `TCP_DUPACKS n`: the receiver sends `n` duplicate ACKs (§4, §5.4 uses 5).
    DupAcks(u32),
    /// Acknowledge every `n`-th segment (§4: "Increase the number of delayed ACKs").
    DelayedAckCount(u32),
    /// Delayed-ACK timeout; `None` acknowledges every segment at once (§4).
    DelayedAckTimer(Option<Duration>),
    /// Replace the RTT estimate on a device change (§4: "Change estimates").
    ReviseRtt(Duration),
    /// Replace the MSS (from the new device's MTU) on a device change (§4).
    ReviseMss(u16),
}

/// An action for one socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// On a UDP socket.
    Udp(UdpAction),
    /// On a TCP connection.
    Tcp(TcpAction),
}

/// The protocol setting an action changes. Two actions with the same knob conflict: when one
/// event triggers both, only the later one in table order is performed
/// ([`crate::env::ActionTable`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Knob {
    /// The UDP send mode (every UDP action sets it).
    UdpSendMode,
    /// The retransmission timer and backoff.
    TcpRetransmitTimer,
    /// Extra duplicate ACKs.
    TcpDupAcks,
    /// The delayed-ACK count.
    TcpDelayedAckCount,
    /// The delayed-ACK timer.
    TcpDelayedAckTimer,
    /// The RTT estimate.
    TcpRtt,
    /// The MSS.
    TcpMss,
}

impl Action {
    /// The setting this action changes.
    pub fn knob(&self) -> Knob {
        match self {
            Action::Udp(_) => Knob::UdpSendMode,
            Action::Tcp(TcpAction::ResetTimers) => Knob::TcpRetransmitTimer,
            Action::Tcp(TcpAction::DupAcks(_)) => Knob::TcpDupAcks,
            Action::Tcp(TcpAction::DelayedAckCount(_)) => Knob::TcpDelayedAckCount,
            Action::Tcp(TcpAction::DelayedAckTimer(_)) => Knob::TcpDelayedAckTimer,
            Action::Tcp(TcpAction::ReviseRtt(_)) => Knob::TcpRtt,
            Action::Tcp(TcpAction::ReviseMss(_)) => Knob::TcpMss,
        }
    }

    /// The paper's name of the action (`UDP_SLEEP`, `TCP_RST_TIMERS`, …).
    pub fn name(&self) -> &'static str {
        match self {
            Action::Udp(UdpAction::Sleep { .. }) => "UDP_SLEEP",
            Action::Udp(UdpAction::Wakeup) => "UDP_WAKEUP",
            Action::Udp(UdpAction::Discard) => "UDP_DISCARD",
            Action::Udp(UdpAction::Buffer) => "UDP_BUFFER",
            Action::Udp(UdpAction::Fail) => "UDP_FAIL",
            Action::Udp(UdpAction::Normal) => "UDP_NOP",
            Action::Tcp(TcpAction::ResetTimers) => "TCP_RST_TIMERS",
            Action::Tcp(TcpAction::DupAcks(_)) => "TCP_DUPACKS",
            Action::Tcp(TcpAction::DelayedAckCount(_)) => "TCP_DELACK_COUNT",
            Action::Tcp(TcpAction::DelayedAckTimer(_)) => "TCP_DELACK_TIMER",
            Action::Tcp(TcpAction::ReviseRtt(_)) => "TCP_REVISE_RTT",
            Action::Tcp(TcpAction::ReviseMss(_)) => "TCP_REVISE_MSS",
        }
    }
}

impl From<UdpAction> for Action {
    fn from(a: UdpAction) -> Action {
        Action::Udp(a)
    }
}

impl From<TcpAction> for Action {
    fn from(a: TcpAction) -> Action {
        Action::Tcp(a)
    }
}
