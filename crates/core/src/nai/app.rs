//! Applications on top of an NAI implementation (`papers/000_97f7680fd99dd928.txt` §3), and
//! the ledger that records every message's one outcome.
//!
//! Every NAI sender agent (ATP over SPP, ATP over TCP, NAI-TCP, NAI-MTCPk) hosts an
//! [`NaiApp`] and offers it the same [`NaiPort`], so one workload runs unchanged on every
//! implementation. The agent records each submission and each [`Outcome`] in a [`Ledger`]
//! before the application sees the event; experiments read the ledger afterwards.

use crate::Time;
use crate::nai::{
    DeadlineMargin, MessageId, NaiError, NaiEvent, NotificationId, OnExpiry, Outcome, Priority,
    QueueId, Scheduler, SendOptions,
};
use std::any::Any;
use std::collections::BTreeMap;
use std::time::Duration;

/// What an application may ask of an NAI implementation.
pub trait NaiPort {
    /// Submits a message (§3.1). A refusal by admission control still allocates an id, whose
    /// `Rejected` outcome arrives as an event.
    fn submit(
        &mut self,
        now: Time,
        size_bytes: u64,
        opts: SendOptions,
    ) -> Result<MessageId, NaiError>;

    /// Registers a bandwidth range (§3.3); `None` if the implementation has no estimator or
    /// refused the range.
    fn register_bandwidth_range(&mut self, low: f64, high: f64) -> Option<NotificationId>;

    /// The bandwidth estimate given to applications, if the implementation has one.
    fn bandwidth_estimate(&self) -> Option<f64>;

    /// Messages not yet final.
    fn live_messages(&self) -> usize;
}

/// ATP's NAI scheduler (over SPP or over TCP) offers the application its queue 0: the agents
/// hand the app their sender's `nai_mut()`.
impl NaiPort for Scheduler {
    fn submit(
        &mut self,
        now: Time,
        size_bytes: u64,
        opts: SendOptions,
    ) -> Result<MessageId, NaiError> {
        Scheduler::submit(self, now, QueueId(0), size_bytes, opts)
    }

    fn register_bandwidth_range(&mut self, low: f64, high: f64) -> Option<NotificationId> {
        Scheduler::register_bandwidth_range(self, low, high).ok()
    }

    fn bandwidth_estimate(&self) -> Option<f64> {
        Some(self.rate_bytes_per_s())
    }

    fn live_messages(&self) -> usize {
        Scheduler::live_messages(self)
    }
}

/// The paper's TCP baselines offer the same port; they have no estimator.
impl NaiPort for crate::nai::baseline::BaselineSender {
    fn submit(
        &mut self,
        now: Time,
        size_bytes: u64,
        opts: SendOptions,
    ) -> Result<MessageId, NaiError> {
        crate::nai::baseline::BaselineSender::submit(self, now, size_bytes, opts)
    }

    fn register_bandwidth_range(&mut self, _low: f64, _high: f64) -> Option<NotificationId> {
        None
    }

    fn bandwidth_estimate(&self) -> Option<f64> {
        None
    }

    fn live_messages(&self) -> usize {
        crate::nai::baseline::BaselineSender::live_messages(self)
    }
}

/// An application driving an NAI sender. All calls come from the hosting agent.
pub trait NaiApp: Any {
    /// The flow starts.
    fn start(&mut self, _now: Time, _port: &mut dyn NaiPort) {}

    /// When the application next wants `handle_timeout` (its next submission).
    fn poll_timeout(&self) -> Option<Time>;

    /// The time from `poll_timeout` has come (the app tolerates early calls).
    fn handle_timeout(&mut self, now: Time, port: &mut dyn NaiPort);

    /// An event of the implementation: timer expiry, an outcome, a bandwidth notification.
    fn on_event(&mut self, _now: Time, _event: &NaiEvent, _port: &mut dyn NaiPort) {}
}

/// One message to submit at a given time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MessageSpec {
    /// Submission time.
    pub at: Time,
    /// Size in bytes.
    pub size_bytes: u64,
    /// Priority level.
    pub priority: Priority,
    /// Callback timer (`None`: infinite).
    pub timer: Option<Duration>,
}

impl MessageSpec {
    /// The send options of the experiments' workloads: on expiry the application cancels
    /// ([`OnExpiry::Discard`]).
    pub fn options(&self) -> SendOptions {
        SendOptions {
            priority: self.priority,
            timer: self.timer,
            on_expiry: OnExpiry::Discard,
        }
    }
}

/// An open-loop application: submits a fixed list of messages at their times (Table 2's
/// workloads are of this kind).
#[derive(Clone, Debug, Default)]
pub struct ScheduledApp {
    specs: Vec<MessageSpec>,
    next: usize,
    /// Submissions refused with an error other than `Rejected` (a bad spec).
    pub errors: u64,
}

impl ScheduledApp {
    /// An app that submits `specs` (sorted here by time, stably).
    pub fn new(mut specs: Vec<MessageSpec>) -> ScheduledApp {
        specs.sort_by_key(|s| s.at);
        ScheduledApp {
            specs,
            next: 0,
            errors: 0,
        }
    }

    /// Messages still to submit.
    pub fn remaining(&self) -> usize {
        self.specs.len() - self.next
    }
}

impl NaiApp for ScheduledApp {
    fn poll_timeout(&self) -> Option<Time> {
        self.specs.get(self.next).map(|s| s.at)
    }

    fn handle_timeout(&mut self, now: Time, port: &mut dyn NaiPort) {
        while let Some(s) = self.specs.get(self.next) {
            if s.at > now {
                break;
            }
            self.next += 1;
            match port.submit(now, s.size_bytes, s.options()) {
                Ok(_) | Err(NaiError::Rejected { .. }) => {}
                Err(_) => self.errors += 1,
            }
        }
    }
}

/// One message as the ledger saw it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MessageRecord {
    /// Submission time.
    pub submitted: Time,
    /// Size in bytes.
    pub size_bytes: u64,
    /// Priority level.
    pub priority: Priority,
    /// Callback timer.
    pub timer: Option<Duration>,
    /// The final outcome, once known.
    pub outcome: Option<Outcome>,
    /// How many outcomes were reported (exactly one is correct).
    pub outcomes_reported: u32,
}

impl MessageRecord {
    /// Delivered before its timer expired (or delivered, with no timer): the paper's success.
    pub fn on_time(&self) -> bool {
        matches!(
            self.outcome,
            Some(Outcome::Delivered {
                margin: None | Some(DeadlineMargin::Early(_)),
                ..
            })
        )
    }
}

/// Every submission and outcome of one sender.
#[derive(Clone, Debug, Default)]
pub struct Ledger {
    messages: BTreeMap<MessageId, MessageRecord>,
    /// Outcomes for ids never submitted.
    pub unknown_outcomes: u64,
}

impl Ledger {
    /// Records a submission (accepted or rejected).
    pub fn submitted(&mut self, id: MessageId, now: Time, size_bytes: u64, opts: &SendOptions) {
        self.messages.entry(id).or_insert(MessageRecord {
            submitted: now,
            size_bytes,
            priority: opts.priority,
            timer: opts.timer,
            outcome: None,
            outcomes_reported: 0,
        });
    }

    /// Records an event; outcomes are attached to their message.
    pub fn on_event(&mut self, event: &NaiEvent) {
        if let NaiEvent::Outcome { id, outcome } = event {
            match self.messages.get_mut(id) {
                Some(r) => {
                    r.outcomes_reported += 1;
                    r.outcome.get_or_insert(*outcome);
                }
                None => self.unknown_outcomes += 1,
            }
        }
    }

    /// The records, by id.
    pub fn messages(&self) -> &BTreeMap<MessageId, MessageRecord> {
        &self.messages
    }

    /// Whether every message has exactly one outcome and no outcome is unattributed.
    pub fn each_has_one_outcome(&self) -> bool {
        self.unknown_outcomes == 0 && self.messages.values().all(|r| r.outcomes_reported == 1)
    }

    /// Messages without an outcome yet.
    pub fn pending(&self) -> usize {
        self.messages
            .values()
            .filter(|r| r.outcome.is_none())
            .count()
    }
}

/// Records submissions into a ledger on the way to the real port.
pub(crate) struct Recording<'a> {
    pub(crate) port: &'a mut dyn NaiPort,
    pub(crate) ledger: &'a mut Ledger,
}

impl NaiPort for Recording<'_> {
    fn submit(
        &mut self,
        now: Time,
        size_bytes: u64,
        opts: SendOptions,
    ) -> Result<MessageId, NaiError> {
        let r = self.port.submit(now, size_bytes, opts);
        match r {
            Ok(id) | Err(NaiError::Rejected { id, .. }) => {
                self.ledger.submitted(id, now, size_bytes, &opts);
            }
            Err(_) => {}
        }
        r
    }

    fn register_bandwidth_range(&mut self, low: f64, high: f64) -> Option<NotificationId> {
        self.port.register_bandwidth_range(low, high)
    }

    fn bandwidth_estimate(&self) -> Option<f64> {
        self.port.bandwidth_estimate()
    }

    fn live_messages(&self) -> usize {
        self.port.live_messages()
    }
}

/// The application half of every NAI sender agent: the app, its ledger, and the plumbing
/// that routes events to both.
pub struct AppHost {
    app: Box<dyn NaiApp>,
    ledger: Ledger,
    stopped: bool,
}

impl AppHost {
    /// Hosts `app`.
    pub fn new(app: Box<dyn NaiApp>) -> AppHost {
        AppHost {
            app,
            ledger: Ledger::default(),
            stopped: false,
        }
    }

    /// The ledger.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// The application, for typed inspection.
    pub fn app(&self) -> &dyn NaiApp {
        self.app.as_ref()
    }

    /// Starts the app.
    pub fn start(&mut self, now: Time, port: &mut dyn NaiPort) {
        let mut rec = Recording {
            port,
            ledger: &mut self.ledger,
        };
        self.app.start(now, &mut rec);
    }

    /// Stops the app: it submits nothing more (events are still recorded).
    pub fn stop(&mut self) {
        self.stopped = true;
    }

    /// The app's next wake-up.
    pub fn poll_timeout(&self) -> Option<Time> {
        if self.stopped {
            None
        } else {
            self.app.poll_timeout()
        }
    }

    /// Runs the app if its wake-up is due.
    pub fn handle_timeout(&mut self, now: Time, port: &mut dyn NaiPort) {
        if self.poll_timeout().is_some_and(|t| t <= now) {
            let mut rec = Recording {
                port,
                ledger: &mut self.ledger,
            };
            self.app.handle_timeout(now, &mut rec);
        }
    }

    /// Records an event and hands it to the app.
    pub fn on_event(&mut self, now: Time, event: &NaiEvent, port: &mut dyn NaiPort) {
        self.ledger.on_event(event);
        if self.stopped {
            return;
        }
        let mut rec = Recording {
            port,
            ledger: &mut self.ledger,
        };
        self.app.on_event(now, event, &mut rec);
    }
}
