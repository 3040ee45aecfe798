//! Bandwidth notifications (`papers/000_97f7680fd99dd928.txt` §3.3, borrowed from Odyssey):
//! the application registers a `[low, high]` range and is told once when the estimate leaves
//! it; the registration is then consumed, and the application registers a new range.

use super::message::NotificationId;
use std::collections::BTreeMap;

/// Registered ranges, bounded in number.
#[derive(Debug)]
pub(super) struct Notifier {
    ranges: BTreeMap<u64, (f64, f64)>,
    next: u64,
    max: usize,
}

impl Notifier {
    pub(super) fn new(max: usize) -> Notifier {
        Notifier {
            ranges: BTreeMap::new(),
            next: 0,
            max,
        }
    }

    /// Adds a range; `None` if the bound is reached.
    pub(super) fn register(&mut self, low: f64, high: f64) -> Option<NotificationId> {
        if self.ranges.len() >= self.max {
            return None;
        }
        let id = self.next;
        self.next += 1;
        self.ranges.insert(id, (low, high));
        Some(NotificationId(id))
    }

    /// Removes a range; whether it existed.
    pub(super) fn unregister(&mut self, id: NotificationId) -> bool {
        self.ranges.remove(&id.0).is_some()
    }

    /// Consumes and returns every registration whose range excludes `available`.
    pub(super) fn fire(&mut self, available: f64) -> Vec<NotificationId> {
        let hit: Vec<u64> = self
            .ranges
            .iter()
            .filter(|(_, (lo, hi))| available < *lo || available > *hi)
            .map(|(id, _)| *id)
            .collect();
        for id in &hit {
            self.ranges.remove(id);
        }
        hit.into_iter().map(NotificationId).collect()
    }
}
