//! After every input: issue grants, raise change_rate events, re-arm timers.

use super::{CongestionManager, Notified, TimerKey};
use crate::cm::macroflow::Macroflow;
use crate::cm::{FlowId, MacroflowId};
use crate::time::Time;

/// Most grants issued per macroflow per call (bounds the work of one call).
const MAX_GRANTS_PER_CALL: usize = 256;

impl CongestionManager {
    // ----- grants, change_rate and timers after an input -----

    /// After any input touching macroflow `mf_id`: issue the grants its tokens allow, raise
    /// the change_rate events its thresholds call for, and re-arm its timer.
    pub(super) fn after_change(&mut self, now: Time, mf_id: MacroflowId) {
        self.lapse_grants(now, mf_id);
        self.issue_grants(now, mf_id);
        self.expire_requests(now, mf_id);
        self.check_thresholds(mf_id);
        self.rearm_macroflow(mf_id);
    }

    /// Withdraws requests whose `latency` has passed (after granting what could be granted
    /// at this instant) and queues a `RequestExpired` event for each.
    fn expire_requests(&mut self, now: Time, mf_id: MacroflowId) {
        let Some(mf) = self.macroflows.get_mut(&mf_id) else {
            return;
        };
        for (flow, bytes) in mf.sched.expire(now) {
            self.stats.expired_request_bytes =
                self.stats.expired_request_bytes.saturating_add(bytes);
            if self.expired_requests.len() < self.config.max_events {
                self.expired_requests.push_back((flow, bytes));
            }
        }
    }

    pub(super) fn issue_grants(&mut self, now: Time, mf_id: MacroflowId) {
        let Some(mf) = self.macroflows.get_mut(&mf_id) else {
            return;
        };
        mf.unpark_if_window_open();
        for _ in 0..MAX_GRANTS_PER_CALL {
            if self.grants.len() >= self.config.max_events {
                break;
            }
            let flows = &self.flows;
            let window_limited = |id: FlowId| flows.get(&id).is_some_and(|f| f.window_limited());
            let Some((flow, bytes)) = mf.try_grant(window_limited) else {
                break;
            };
            self.stats.granted_bytes = self.stats.granted_bytes.saturating_add(bytes);
            if let Some(f) = self.flows.get_mut(&flow) {
                f.grants.push(bytes, now);
                f.sync_lapse(flow, mf);
            }
            self.grants.push_back((flow, bytes));
        }
    }

    pub(super) fn rearm_macroflow(&mut self, mf_id: MacroflowId) {
        let events_full = self.grants.len() >= self.config.max_events;
        let Some(mf) = self.macroflows.get_mut(&mf_id) else {
            return;
        };
        let mut next = mf.next_deadline();
        if events_full {
            // Grants wait for the engine to drain events; keep only the aging and lapse
            // deadlines.
            next = [mf.rate.next_aging_at(), mf.next_lapse_at()]
                .into_iter()
                .flatten()
                .min();
        }
        if mf.armed == next {
            return;
        }
        if let Some(t) = mf.armed.take() {
            self.timers.remove(&(t, TimerKey::Macroflow(mf_id)));
        }
        if let Some(t) = next {
            mf.armed = Some(t);
            self.timers.insert((t, TimerKey::Macroflow(mf_id)));
        }
    }

    pub(super) fn current_values(mf: &Macroflow, weight: f64) -> Option<Notified> {
        Some(Notified {
            rate: mf.flow_rate(weight),
            srtt: mf.rate.srtt()?,
            rttvar: mf.rate.rttvar()?,
        })
    }

    /// Re-arms a flow's thresholds around its last notified values (after a weight or
    /// threshold change).
    pub(super) fn rearm_thresholds(&mut self, flow: FlowId) {
        let Some(f) = self.flows.get(&flow) else {
            return;
        };
        let Some(n) = f.notified else {
            return;
        };
        if let Some(mf) = self.macroflows.get_mut(&f.macroflow) {
            mf.thresh.arm(
                flow,
                f.effective_weight(),
                n.rate,
                n.srtt.as_secs_f64(),
                &f.thresholds,
            );
        }
    }

    pub(super) fn check_thresholds(&mut self, mf_id: MacroflowId) {
        let Some(mf) = self.macroflows.get_mut(&mf_id) else {
            return;
        };
        let Some(srtt) = mf.rate.srtt() else {
            return;
        };
        let limit = self.config.max_events.max(1);
        let mut due = mf
            .thresh
            .crossed(mf.rate_per_weight(), srtt.as_secs_f64(), limit);
        // Flows never told a rate get one as soon as estimates are valid.
        while due.len() < limit {
            let Some(f) = mf.unnotified.pop_first() else {
                break;
            };
            due.insert(f);
        }
        for id in due {
            let Some(f) = self.flows.get_mut(&id) else {
                continue;
            };
            let w = f.effective_weight();
            let Some(values) = Self::current_values(mf, w) else {
                continue;
            };
            f.notified = Some(values);
            mf.thresh
                .arm(id, w, values.rate, values.srtt.as_secs_f64(), &f.thresholds);
            if !f.rate_event_queued {
                f.rate_event_queued = true;
                self.rate_events.push_back(id);
            }
        }
    }
}
