//! The event heap: what can happen, ordered by `(time, sequence)`.

use adaptnet_core::Time;
use std::cmp::Reverse;

use super::World;

/// What a heap entry wakes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Event {
    Link(u32),
    Agent(u32),
    Start(u32),
    Stop(u32),
    Sample,
}

/// A heap entry: ordered by time, then by insertion sequence (both packed in one integer, so
/// the heap compares a single `u128`); the event rides along.
#[derive(Clone, Copy, Debug)]
pub(super) struct Scheduled {
    pub(super) key: u128,
    pub(super) event: Event,
}

impl Scheduled {
    pub(super) fn time(&self) -> Time {
        Time::from_nanos((self.key >> 64) as u64)
    }
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl Eq for Scheduled {}

impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Scheduled {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key.cmp(&other.key)
    }
}

impl World {
    /// Schedules `event` at `at`, after everything already scheduled for that time.
    pub(super) fn push(&mut self, at: Time, event: Event) {
        self.seq += 1;
        let key = (u128::from(at.as_nanos()) << 64) | u128::from(self.seq);
        self.heap.push(Reverse(Scheduled { key, event }));
    }
}
