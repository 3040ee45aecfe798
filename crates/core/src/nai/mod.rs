//! NAI, the Network-Aware Interface (`papers/000_97f7680fd99dd928.txt` §3), as a sans-IO
//! message scheduler that any transport can drive: ATP over SPP ([`crate::atp::AtpSender`]),
//! ATP over one TCP connection ([`crate::atp::tcp`]). The paper's simpler implementations,
//! NAI-TCP and NAI-MTCPk (§5.2), are in [`baseline`]: they share the message types but not the
//! scheduler (no estimator, no admission control).
//!
//! Read in this order: [`message`] (ids, options, outcomes, events), [`app`] (applications, the
//! port they use and the ledger of outcomes, shared by both engines), `admission.rs` (the
//! deliverability test behind admission control and early expiry), [`Scheduler`].
//!
//! What the application gets (§3.1–§3.3):
//! * message-oriented sends with priorities (level 0 first), earliest deadline first within a
//!   level, and an optional callback timer whose clock starts at submission; priorities are
//!   strict as in the paper ([`ServiceOrder::Strict`]) or, by default, lend their slack to a
//!   less important message that would otherwise miss its deadline ([`ServiceOrder::Slack`]);
//! * admission control at the current bandwidth estimate; early expiry when the estimate says
//!   a message can no longer make it; suspension plus an event on expiry, after which the
//!   application resumes (continues), defers or cancels;
//! * state queries, abort (cancel), defer and restart (also of partly sent messages), changes
//!   of priority or deadline;
//! * bandwidth-range notifications;
//! * message queues sharing the bandwidth by the highest priority each uses (§3.2);
//! * exactly one [`Outcome`] per message, delivered as an event.
//!
//! The bandwidth the scheduler plans with is set from outside with
//! [`Scheduler::set_rate`]: ATP feeds its estimator's `available` value, an oracle feeds the true
//! link rate.
//!
//! Synchronous sends are an engine concern: a blocking `send` is `submit` followed by waiting
//! for that message's [`NaiEvent::Taken`] (the transport has taken it whole, §3.1/§5.3);
//! waiting for its [`NaiEvent::Outcome`] is a separate, explicit wait. Asynchronous sends
//! return after `submit`.

mod admission;
pub mod app;
pub mod baseline;
pub mod message;
mod notify;
pub mod payloads;
mod ranges;
mod scheduler;
#[cfg(test)]
mod slack_tests;
#[cfg(test)]
mod tests;

pub use message::{
    Chunk, DeadlineMargin, DiscardNotice, MessageId, MessageState, NaiEvent, NotificationId,
    OnExpiry, Outcome, Priority, QueueId, RejectReason, SendOptions,
};
pub use ranges::RangeSet;
pub use scheduler::Scheduler;

use thiserror::Error;

/// Most priority levels a scheduler supports.
pub const MAX_LEVELS: u8 = 8;

/// Scheduler limits and shape.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct NaiConfig {
    /// Number of priority levels, `1..=MAX_LEVELS` (the paper's experiments use 2 or 3).
    pub levels: u8,
    /// Most live (not yet final) messages; submissions beyond are rejected with
    /// [`RejectReason::Capacity`].
    pub max_messages: usize,
    /// Most message queues, the default one included.
    pub max_queues: usize,
    /// Most concurrent bandwidth-range registrations.
    pub max_notifications: usize,
    /// Largest message, in bytes.
    /// (At most `u32::MAX`: lengths travel in 32-bit wire fields; larger values are clamped.)
    pub max_message_bytes: u64,
    /// Which admitted messages admission control protects from a newcomer.
    pub admission: AdmissionScope,
    /// How a queue serves its priority levels: strictly (the paper) or letting a less
    /// important message use the slack of more important ones.
    pub service: ServiceOrder,
    /// Under [`ServiceOrder::Slack`], the share of the planned rate, in percent, at which
    /// every more important message must still make its deadline for a less important one
    /// to go ahead of it. Below 100 the lender keeps a margin against an estimate that is
    /// too high; 100 lends everything the estimate says is spare. Clamped to `1..=100`.
    /// Default 75: chosen from 100, 75 and 50 on `nai-estimators` (EXPERIMENTS.md,
    /// "Lending slack between priority levels").
    pub lend_at_percent: u8,
}

/// How a queue orders its priority levels when it serves them. See `docs/design/nai.md` §4.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub enum ServiceOrder {
    /// Strict priorities (§3.1: "Priorities are strict, so that low-priority messages wait for
    /// the high-priority messages ahead of them"), earliest deadline first within a level.
    /// Admission and early expiry count every more important byte ahead of a message. The
    /// paper's ATP; the reproductions run it.
    Strict,
    /// Strict priorities, except that more important messages lend their slack: the first
    /// message of a less important level is served before more important ones when, in
    /// strict order, it would miss its deadline, served first it would not, and no more
    /// important message that can make its deadline now would then miss it, even at
    /// [`NaiConfig::lend_at_percent`] (by default three quarters) of the planned rate (slack stealing, from fixed-priority real-time
    /// scheduling). A more important message that arrives
    /// meanwhile is checked the same way and takes the link back if it needs it. Admission and
    /// early expiry judge a message against its own level only: it is refused or expired
    /// early when it could not make its deadline even if every more important message lent
    /// it the link, and otherwise left to its timer (or to the dispatch check, which expires
    /// a message about to be served that can no longer make it on its own). The default.
    #[default]
    Slack,
}

/// Which admitted messages a new (or changed) message must not make miss their deadlines
/// (§3.3: "without causing a message which was deliverable under the current bandwidth to
/// exceed its timeout value"). See `docs/design/nai.md` §4.4.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub enum AdmissionScope {
    /// Messages of the newcomer's own level only (behind it in EDF order). A more important
    /// message is admitted even if a less important one will then miss its deadline; that one
    /// is expired early at the next rate update. This matches the paper's account of ATP
    /// "able to devote all available bandwidth to sending high-priority messages" and
    /// interrupting low-priority transmissions (§5.4). The default.
    #[default]
    SameLevel,
    /// Every admitted message behind the newcomer, less important levels included (the
    /// literal reading of §3.3): a high-priority message can be refused to protect a
    /// low-priority one. Under [`ServiceOrder::Slack`], which judges each message against its
    /// own level, this is the same as `SameLevel`.
    AllLevels,
}

impl Default for NaiConfig {
    fn default() -> Self {
        NaiConfig {
            levels: 3,
            max_messages: 65_536,
            max_queues: 1024,
            max_notifications: 64,
            max_message_bytes: u64::from(u32::MAX),
            admission: AdmissionScope::SameLevel,
            service: ServiceOrder::Slack,
            lend_at_percent: 75,
        }
    }
}

/// Why an application call failed. No call panics on bad input.
#[derive(Clone, Copy, Debug, PartialEq, Error)]
pub enum NaiError {
    /// The message was refused by admission control; its id still gets an
    /// [`Outcome::Rejected`] event.
    #[error("message {id:?} rejected: {reason:?}")]
    Rejected {
        /// The id allocated to the rejected message.
        id: MessageId,
        /// Why.
        reason: RejectReason,
    },
    /// A change (resume, new priority, new deadline) was refused by admission control; the
    /// message is left as it was.
    #[error("change not admissible: {0:?}")]
    NotAdmissible(RejectReason),
    /// No live message has this id (never existed, or already final).
    #[error("unknown message {0:?}")]
    UnknownMessage(MessageId),
    /// No such queue.
    #[error("unknown queue {0:?}")]
    UnknownQueue(QueueId),
    /// The priority is not below the configured number of levels.
    #[error("priority {priority} out of range (levels: {levels})")]
    BadPriority {
        /// Requested level.
        priority: u8,
        /// Configured levels.
        levels: u8,
    },
    /// Messages must hold at least one byte.
    #[error("empty message")]
    EmptyMessage,
    /// The message exceeds `max_message_bytes`.
    #[error("message of {bytes} bytes exceeds the limit of {max}")]
    TooLarge {
        /// Requested size.
        bytes: u64,
        /// Limit.
        max: u64,
    },
    /// The sender already holds `buffered` bytes of submitted messages, and `bytes` more
    /// would exceed its `max` (a real engine's memory bound; retry after outcomes arrive).
    #[error("message of {bytes} bytes does not fit: {buffered} of {max} bytes already held")]
    BufferFull {
        /// The message's size.
        bytes: u64,
        /// Bytes already held.
        buffered: u64,
        /// Limit.
        max: u64,
    },
    /// `max_queues` reached.
    #[error("too many queues")]
    TooManyQueues,
    /// `max_notifications` reached.
    #[error("too many bandwidth notifications")]
    TooManyNotifications,
    /// A bandwidth range must satisfy `0 <= low <= high` and contain no NaN.
    #[error("bad bandwidth range")]
    BadRange,
    /// The call does not apply to the message in its current state.
    #[error("message {id:?} is {state:?}")]
    InvalidState {
        /// The message.
        id: MessageId,
        /// Its state.
        state: MessageState,
    },
}
