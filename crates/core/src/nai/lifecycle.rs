//! The scheduler's internals: lookups, share weights, admission of changes, expiry, discard,
//! and the `attach`/`detach` pair that keeps the service order and timer index in step with
//! each message's state (a child module of `scheduler`, so it sees the private fields).

use super::*;

impl Scheduler {
    pub(super) fn get(&self, id: MessageId) -> Result<&Message, NaiError> {
        self.messages.get(&id).ok_or(NaiError::UnknownMessage(id))
    }

    pub(super) fn queue_index(&self, queue: QueueId) -> Result<usize, NaiError> {
        let q = queue.0 as usize;
        if q < self.queues.len() {
            Ok(q)
        } else {
            Err(NaiError::UnknownQueue(queue))
        }
    }

    pub(super) fn check_priority(&self, p: Priority) -> Result<(), NaiError> {
        if p.0 < self.config.levels {
            Ok(())
        } else {
            Err(NaiError::BadPriority {
                priority: p.0,
                levels: self.config.levels,
            })
        }
    }

    /// Share weight of a queue whose most important level in use is `level` (§3.2): the most
    /// important level weighs `levels`, the least important 1.
    pub(super) fn weight_of_level(&self, level: Option<u8>) -> u64 {
        level.map_or(0, |l| {
            u64::from(self.config.levels.saturating_sub(l).max(1))
        })
    }

    #[allow(
        clippy::indexing_slicing,
        reason = "queue indices come from `add_queue` and queues are never removed; levels are \
                  checked against `levels` <= MAX_LEVELS, the arrays' length, at submission"
    )]
    pub(super) fn queue_weight(&self, q: usize) -> u64 {
        self.weight_of_level(self.queues[q].top_level())
    }

    /// Queue `q`'s share of the rate, as if a message at `extra_level` had joined it.
    #[allow(
        clippy::indexing_slicing,
        reason = "queue indices come from `add_queue` and queues are never removed; levels are \
                  checked against `levels` <= MAX_LEVELS, the arrays' length, at submission"
    )]
    pub(super) fn queue_rate(&self, q: usize, extra_level: Option<u8>) -> f64 {
        let top = self.queues[q].top_level();
        let old = self.weight_of_level(top);
        let new_top = match (top, extra_level) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let mine = self.weight_of_level(new_top);
        let total = self.weight_sum - old + mine;
        if total == 0 {
            self.rate_bytes_per_s
        } else {
            self.rate_bytes_per_s * mine as f64 / total as f64
        }
    }

    #[allow(
        clippy::indexing_slicing,
        reason = "queue indices come from `add_queue` and queues are never removed; levels are \
                  checked against `levels` <= MAX_LEVELS, the arrays' length, at submission"
    )]
    pub(super) fn admissible(
        &self,
        now: Time,
        q: usize,
        key: OrderKey,
        unsent: u64,
    ) -> Result<(), RejectReason> {
        let rate = self.queue_rate(q, Some(key.0));
        let queue = &self.queues[q];
        admission::check(
            &queue.order,
            &queue.level_unsent,
            key,
            unsent,
            rate,
            now,
            &self.config,
        )
    }

    /// Applies `f` to a live, not-cancelling message; re-admits it if it ends up scheduled.
    pub(super) fn change(
        &mut self,
        now: Time,
        id: MessageId,
        f: impl FnOnce(&mut Message),
    ) -> Result<(), NaiError> {
        let state = self.get(id)?.state;
        if state == MessageState::Cancelling {
            return Err(NaiError::InvalidState { id, state });
        }
        self.detach(id);
        let Some(m) = self.messages.get_mut(&id) else {
            return Err(NaiError::UnknownMessage(id));
        };
        let saved = (m.priority, m.deadline, m.report_deadline, m.state);
        f(m);
        let (q, key, unsent, scheduled) = (
            m.queue,
            m.key(),
            m.unsent(),
            m.state == MessageState::Scheduled,
        );
        let verdict = if scheduled {
            self.admissible(now, q, key, unsent)
        } else {
            Ok(())
        };
        if let Err(reason) = verdict
            && let Some(m) = self.messages.get_mut(&id)
        {
            (m.priority, m.deadline, m.report_deadline, m.state) = saved;
            self.attach(id);
            return Err(NaiError::NotAdmissible(reason));
        }
        self.attach(id);
        Ok(())
    }

    /// A callback timer fired (`early`: on the estimate).
    pub(super) fn expire(&mut self, now: Time, id: MessageId, early: bool) {
        self.detach(id);
        let Some(m) = self.messages.get_mut(&id) else {
            return;
        };
        m.deadline = None;
        m.state = MessageState::Expired { early };
        let policy = m.on_expiry;
        let bytes_remaining = m.size - m.acked.len();
        self.events.push_back(NaiEvent::TimerExpired {
            id,
            early,
            bytes_remaining,
        });
        match policy {
            OnExpiry::Suspend => self.attach(id),
            OnExpiry::Discard => self.discard(now, id, Outcome::Expired { early }),
        }
    }

    /// Takes a message out of service for good, reporting `kind` now or after confirmation.
    pub(super) fn discard(&mut self, _now: Time, id: MessageId, kind: Outcome) {
        self.detach(id);
        let Some(m) = self.messages.get_mut(&id) else {
            return;
        };
        let all_sent_once = m.next_offset == m.size;
        if let Some(wire_seq) = m.wire_seq {
            self.notices.push_back(DiscardNotice {
                id,
                wire_seq,
                confirm: all_sent_once,
            });
        }
        if all_sent_once {
            m.state = MessageState::Cancelling;
            m.discard_as = kind;
            m.retx = RangeSet::new();
        } else {
            self.finish(id, kind);
        }
    }

    /// Removes a (detached) message and reports its outcome.
    pub(super) fn finish(&mut self, id: MessageId, outcome: Outcome) {
        self.detach(id);
        if self.messages.remove(&id).is_some() {
            self.events.push_back(NaiEvent::Outcome { id, outcome });
        }
    }

    pub(super) fn fire_notifications(&mut self) {
        for id in self.notifier.fire(self.rate_bytes_per_s) {
            self.events.push_back(NaiEvent::Bandwidth {
                id,
                available_bytes_per_s: self.rate_bytes_per_s,
            });
        }
    }

    /// Puts a message into the service order and timer index as its state requires.
    #[allow(
        clippy::indexing_slicing,
        reason = "queue indices come from `add_queue` and queues are never removed; levels are \
                  checked against `levels` <= MAX_LEVELS, the arrays' length, at submission"
    )]
    pub(super) fn attach(&mut self, id: MessageId) {
        let Some(m) = self.messages.get_mut(&id) else {
            return;
        };
        if m.state == MessageState::Scheduled && m.unsent() > 0 && m.in_order.is_none() {
            let key = m.key();
            let unsent = m.unsent();
            m.in_order = Some(key);
            let qi = m.queue;
            let old_w = self.queue_weight(qi);
            let q = &mut self.queues[qi];
            if q.order.is_empty() {
                q.pass = q.pass.max(self.vtime);
            }
            q.order.insert(key, Entry { id, unsent });
            q.ahead_stale = true;
            q.level_unsent[usize::from(key.0)] += unsent;
            q.level_count[usize::from(key.0)] += 1;
            let new_w = self.queue_weight(qi);
            self.weight_sum = self.weight_sum - old_w + new_w;
        }
        let Some(m) = self.messages.get_mut(&id) else {
            return;
        };
        let timed = matches!(m.state, MessageState::Scheduled | MessageState::Deferred);
        if let (true, Some(d), None) = (timed, m.deadline, m.timer) {
            m.timer = Some(d);
            self.timers.insert((d, id));
        }
    }

    /// A message's unsent bytes changed (a piece was sent, acknowledged or found lost) and
    /// nothing else did: its service-order entry follows in place. The same result as
    /// `detach` then `attach` (which it falls back to when the message joins or leaves the
    /// order), without taking the entry out of the order and the timer index and putting it
    /// back — twice per datagram, about 4 % of a loopback sender's CPU.
    pub(super) fn unsent_changed(&mut self, id: MessageId) {
        let Some(m) = self.messages.get(&id) else {
            return;
        };
        let unsent = m.unsent();
        let wanted = m.state == MessageState::Scheduled && unsent > 0;
        match (m.in_order, wanted) {
            (Some(key), true) => {
                let Some(q) = self.queues.get_mut(m.queue) else {
                    return;
                };
                if let Some(e) = q.order.get_mut(&key)
                    && let Some(level) = q.level_unsent.get_mut(usize::from(key.0))
                {
                    // More bytes to send (a loss) can take slack a lent message relied on.
                    q.ahead_stale |= unsent > e.unsent;
                    *level = *level - e.unsent + unsent;
                    e.unsent = unsent;
                }
            }
            (None, false) => {}
            _ => {
                self.detach(id);
                self.attach(id);
            }
        }
    }

    /// Takes a message out of the service order and timer index.
    #[allow(
        clippy::indexing_slicing,
        reason = "queue indices come from `add_queue` and queues are never removed; levels are \
                  checked against `levels` <= MAX_LEVELS, the arrays' length, at submission"
    )]
    pub(super) fn detach(&mut self, id: MessageId) {
        let Some(m) = self.messages.get_mut(&id) else {
            return;
        };
        if let Some(d) = m.timer.take() {
            self.timers.remove(&(d, id));
        }
        if let Some(key) = m.in_order.take() {
            let qi = m.queue;
            let old_w = self.queue_weight(qi);
            let q = &mut self.queues[qi];
            if let Some(e) = q.order.remove(&key) {
                q.ahead_stale = true;
                q.level_unsent[usize::from(key.0)] -= e.unsent;
                q.level_count[usize::from(key.0)] -= 1;
            }
            let new_w = self.queue_weight(qi);
            self.weight_sum = self.weight_sum - old_w + new_w;
        }
    }
}
