//! Identifiers, per-message options, outcomes and events of the NAI
//! (`papers/000_97f7680fd99dd928.txt` §3).

use crate::time::Time;
use std::time::Duration;

/// Identifies a message for its whole life, including after it was rejected.
///
/// Ids are allocated in submission order, starting at 0, by one [`super::Scheduler`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct MessageId(pub u64);

/// Identifies a message queue (§3.2). Queue 0 is the default queue of the application.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct QueueId(pub u32);

/// Identifies a bandwidth-range registration (§3.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct NotificationId(pub u64);

/// A strict priority level: **0 is the most important**. Levels are strict (§3.1: "low-priority
/// messages wait for the high-priority messages ahead of them").
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct Priority(pub u8);

impl Priority {
    /// The highest level.
    pub const HIGH: Priority = Priority(0);
    /// The middle level of the default three.
    pub const MEDIUM: Priority = Priority(1);
    /// The lowest level of the default three.
    pub const LOW: Priority = Priority(2);
}

/// What the scheduler does on its own when a message's callback timer expires.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub enum OnExpiry {
    /// The paper's behaviour (§3.3): suspend the message, emit [`NaiEvent::TimerExpired`] and
    /// wait for the application to `resume` (continue), `defer` or `cancel` it.
    #[default]
    Suspend,
    /// Act as an application whose callback always cancels: the message is discarded and its
    /// outcome is [`Outcome::Expired`] (the experiments' workloads behave this way).
    Discard,
}

/// How a message is to be sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendOptions {
    /// Strict priority level.
    pub priority: Priority,
    /// Callback timer. The clock starts at submission and includes queueing time: the
    /// deadline is `submitted_at + timer`. `None` is an infinite timeout.
    pub timer: Option<Duration>,
    /// Automatic reaction to expiry.
    pub on_expiry: OnExpiry,
}

impl Default for SendOptions {
    fn default() -> Self {
        SendOptions {
            priority: Priority::HIGH,
            timer: None,
            on_expiry: OnExpiry::Suspend,
        }
    }
}

/// How far from its deadline a message was delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum DeadlineMargin {
    /// Delivered this long before the deadline (or exactly on it).
    Early(Duration),
    /// Delivered this long after the deadline.
    Late(Duration),
}

impl DeadlineMargin {
    /// The margin of a delivery at `at` for `deadline`.
    pub fn of(at: Time, deadline: Time) -> DeadlineMargin {
        if at <= deadline {
            DeadlineMargin::Early(deadline - at)
        } else {
            DeadlineMargin::Late(at - deadline)
        }
    }

    /// Seconds before the deadline; negative for a delivery after it.
    pub fn signed_secs(self) -> f64 {
        match self {
            DeadlineMargin::Early(d) => d.as_secs_f64(),
            DeadlineMargin::Late(d) => -d.as_secs_f64(),
        }
    }
}

/// Why admission control refused a message (§3.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum RejectReason {
    /// Under the current estimate the message itself cannot be sent before its deadline.
    CannotMeetDeadline,
    /// Admitting it would make this admitted (and so far deliverable) message miss its deadline.
    WouldJeopardize(MessageId),
    /// The scheduler holds its maximum number of live messages.
    Capacity,
}

/// The one final fate of every submitted message. Exactly one is reported per message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Outcome {
    /// Every byte was acknowledged by the receiver, which delivered the message once.
    Delivered {
        /// When the sender learned of it (the last acknowledgement).
        at: Time,
        /// Distance from the message's deadline, if it had one (the last deadline assigned).
        margin: Option<DeadlineMargin>,
    },
    /// The callback timer expired (`early`: the estimate said it could no longer make it) and
    /// the message was discarded; the receiver never delivers it.
    Expired {
        /// Expired by the bandwidth estimate before the deadline itself.
        early: bool,
    },
    /// The application cancelled the message; the receiver never delivers it.
    Cancelled,
    /// Admission control refused it at submission (or it was never admissible).
    Rejected(RejectReason),
    /// The connection ended (closed, or the peer went silent) before the message's fate was
    /// known: the receiver may or may not have delivered it. Only a real engine's
    /// connections end this way ([`Scheduler::abandon_all`](crate::nai::Scheduler::abandon_all)).
    Abandoned,
}

/// Where a live message stands (`state` query).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageState {
    /// Eligible for transmission (possibly waiting behind others, or awaiting acknowledgement).
    Scheduled,
    /// Suspended by `defer`.
    Deferred,
    /// Suspended because its callback timer expired; waiting for the application's decision.
    Expired {
        /// Expired early, on the bandwidth estimate.
        early: bool,
    },
    /// Cancelled (or discarded on expiry) after all its bytes were sent once; waiting for the
    /// receiver to say whether it had already delivered it.
    Cancelling,
}

/// Something the application should know; polled with `poll_event`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum NaiEvent {
    /// A callback timer expired. With [`OnExpiry::Suspend`] the message is now suspended and
    /// the application must `resume`, `defer` or `cancel` it.
    TimerExpired {
        /// The message.
        id: MessageId,
        /// Expired early because the estimate says it can no longer make its deadline.
        early: bool,
        /// Bytes not yet acknowledged.
        bytes_remaining: u64,
    },
    /// The transport has taken the whole message: its last byte was handed to the transport
    /// for the first time. A synchronous send (§3.1) returns here — the paper's synchronous
    /// calls block until the message is passed on, not until it is acknowledged (§5.3: with
    /// fast CPUs "the selection of synchronous or asynchronous sends made no difference");
    /// waiting for the [`NaiEvent::Outcome`] is a separate choice. At most once per message,
    /// never for a message cancelled, expired or rejected before all its bytes were sent.
    Taken {
        /// The message.
        id: MessageId,
    },
    /// The message's final outcome. Emitted exactly once per message.
    Outcome {
        /// The message.
        id: MessageId,
        /// Its fate.
        outcome: Outcome,
    },
    /// The bandwidth estimate left a registered `[low, high]` range. The registration is
    /// consumed; register a new range around the new value (§3.3, Odyssey-style upcall).
    Bandwidth {
        /// The registration that fired.
        id: NotificationId,
        /// The estimate given to the application.
        available_bytes_per_s: f64,
    },
}

/// A piece of a message the transport should transmit now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// The message.
    pub id: MessageId,
    /// Transport-level message number, assigned in order of first transmission.
    pub wire_seq: u64,
    /// First byte.
    pub offset: u64,
    /// Bytes.
    pub len: u32,
    /// Total message size.
    pub msg_len: u64,
    /// Priority (carried to the receiver for its report).
    pub priority: Priority,
    /// These bytes were sent before and are being retransmitted.
    pub retransmission: bool,
}

/// A message was discarded after some of its bytes were sent: the transport must tell the
/// receiver (which may hold partial data), and, when `confirm` is set, report back whether the
/// receiver had already delivered it (`Scheduler::resolve_cancel`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiscardNotice {
    /// The message.
    pub id: MessageId,
    /// Its transport-level number.
    pub wire_seq: u64,
    /// Every byte was transmitted at least once, so the receiver may already have delivered
    /// it; the outcome waits for the answer.
    pub confirm: bool,
}
