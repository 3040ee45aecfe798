//! A flow's outstanding grants, oldest first: what `cm_notify` counts sent bytes against, what
//! `notify(0)` declines, and what lapses (RFC 3124 §3.3).

use crate::time::Time;
use std::collections::VecDeque;

/// Most separate grants remembered per flow; beyond this a new grant is merged into the
/// newest one (its bytes are kept; it lapses with the newest grant, a little later than it
/// would alone).
const MAX_GRANTS_PER_FLOW: usize = 1024;

/// Outstanding grants: `(bytes left, issued at)`, oldest first, and their sum.
#[derive(Clone, Debug, Default)]
pub(super) struct GrantQueue {
    grants: VecDeque<(u64, Time)>,
    total_bytes: u64,
}

impl GrantQueue {
    /// Granted bytes not yet used.
    pub(super) fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// When the oldest outstanding grant was issued (it lapses first).
    pub(super) fn oldest_at(&self) -> Option<Time> {
        self.grants.front().map(|g| g.1)
    }

    /// A grant of `bytes` was issued at `at`.
    pub(super) fn push(&mut self, bytes: u64, at: Time) {
        if bytes == 0 {
            return;
        }
        self.total_bytes = self.total_bytes.saturating_add(bytes);
        let full = self.grants.len() >= MAX_GRANTS_PER_FLOW;
        match self.grants.back_mut() {
            Some(last) if full => {
                last.0 = last.0.saturating_add(bytes);
                last.1 = at;
            }
            _ => self.grants.push_back((bytes, at)),
        }
    }

    /// `nsent` bytes were sent: they use up grants, oldest first. Returns the bytes covered
    /// by grants (the rest were sent without one).
    pub(super) fn consume(&mut self, nsent: u64) -> u64 {
        let mut left = nsent;
        while left > 0 {
            let Some(front) = self.grants.front_mut() else {
                break;
            };
            let used = front.0.min(left);
            front.0 -= used;
            left -= used;
            self.total_bytes = self.total_bytes.saturating_sub(used);
            if front.0 == 0 {
                self.grants.pop_front();
            }
        }
        nsent - left
    }

    /// `notify(0)`: the oldest grant is declined. Returns its unused bytes.
    pub(super) fn decline_oldest(&mut self) -> u64 {
        let bytes = self.grants.pop_front().map_or(0, |g| g.0);
        self.total_bytes = self.total_bytes.saturating_sub(bytes);
        bytes
    }

    /// Grants issued more than `lifetime` before `now` lapse. Returns their unused bytes.
    pub(super) fn expire(&mut self, now: Time, lifetime: std::time::Duration) -> u64 {
        let mut expired = 0;
        while let Some(&(bytes, at)) = self.grants.front() {
            if now <= at + lifetime {
                break;
            }
            self.grants.pop_front();
            expired += bytes;
        }
        self.total_bytes = self.total_bytes.saturating_sub(expired);
        expired
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn test_sends_use_grants_oldest_first_and_partial_grants_stay() {
        let mut q = GrantQueue::default();
        q.push(1000, Time::ZERO);
        q.push(1000, Time::from_millis(10));
        assert_eq!(q.consume(1500), 1500);
        assert_eq!(q.total_bytes(), 500);
        assert_eq!(q.consume(800), 500, "300 bytes beyond the grants");
        assert_eq!(q.total_bytes(), 0);
    }

    #[test]
    fn test_decline_and_expiry_take_whole_grants() {
        let mut q = GrantQueue::default();
        q.push(1000, Time::ZERO);
        q.push(700, Time::from_millis(50));
        assert_eq!(q.decline_oldest(), 1000);
        assert_eq!(
            q.expire(Time::from_millis(100), Duration::from_millis(60)),
            0
        );
        assert_eq!(
            q.expire(Time::from_millis(111), Duration::from_millis(60)),
            700
        );
        assert_eq!(q.total_bytes(), 0);
    }
}
