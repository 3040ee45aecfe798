//! Temporal sharing (RFC 9040 §6): when the last flow of a destination's macroflow closes, its
//! RTT estimates and rate are remembered; a new macroflow to that destination starts from them
//! instead of from the initial window and the initial RTT.
//!
//! RFC 9040 lets a new connection reuse cached RTT state freely but asks for caution with the
//! window. We reuse RTTs for `rtt_ttl` (10 min by default) and the window/ssthresh for the
//! much shorter `rate_ttl` (10 s): long enough for the back-to-back transfers of a Web page,
//! short enough that the path has probably not changed. The cache is bounded (`max_entries`)
//! and evicts the oldest entry.

use super::rate::RateSnapshot;
use super::{PeerAddr, TemporalConfig};
use crate::time::Time;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Copy, Debug)]
struct Entry {
    snap: RateSnapshot,
    saved_at: Time,
}

/// What a lookup found.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Cached {
    pub snap: RateSnapshot,
    /// The window and ssthresh are fresh enough to reuse too.
    pub with_rate: bool,
}

/// Per-destination snapshots.
#[derive(Clone, Debug)]
pub(crate) struct TemporalCache {
    config: TemporalConfig,
    entries: BTreeMap<PeerAddr, Entry>,
    by_age: BTreeSet<(Time, PeerAddr)>,
}

impl TemporalCache {
    pub(crate) fn new(config: TemporalConfig) -> TemporalCache {
        TemporalCache {
            config,
            entries: BTreeMap::new(),
            by_age: BTreeSet::new(),
        }
    }

    pub(crate) fn store(&mut self, now: Time, dest: PeerAddr, snap: RateSnapshot) {
        if self.config.max_entries == 0 {
            return;
        }
        if let Some(old) = self.entries.remove(&dest) {
            self.by_age.remove(&(old.saved_at, dest));
        }
        while self.entries.len() >= self.config.max_entries {
            let Some((t, d)) = self.by_age.pop_first() else {
                break;
            };
            let _ = t;
            self.entries.remove(&d);
        }
        self.entries.insert(
            dest,
            Entry {
                snap,
                saved_at: now,
            },
        );
        self.by_age.insert((now, dest));
    }

    pub(crate) fn lookup(&self, now: Time, dest: PeerAddr) -> Option<Cached> {
        let e = self.entries.get(&dest)?;
        let age = now - e.saved_at;
        (age <= self.config.rtt_ttl).then_some(Cached {
            snap: e.snap,
            with_rate: age <= self.config.rate_ttl,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn snap() -> RateSnapshot {
        RateSnapshot {
            cwnd_bytes: 10_000.0,
            ssthresh_bytes: 8000.0,
            srtt: Duration::from_millis(100),
            min_rtt: Duration::from_millis(90),
        }
    }

    #[test]
    fn test_entries_expire_and_evict_oldest() {
        let config = TemporalConfig {
            rtt_ttl: Duration::from_secs(60),
            rate_ttl: Duration::from_secs(5),
            max_entries: 2,
        };
        let mut c = TemporalCache::new(config);
        c.store(Time::ZERO, PeerAddr(1), snap());
        let hit = c.lookup(Time::from_secs(3), PeerAddr(1)).expect("cached");
        assert!(hit.with_rate);
        let hit = c
            .lookup(Time::from_secs(30), PeerAddr(1))
            .expect("rtt only");
        assert!(!hit.with_rate);
        assert_eq!(c.lookup(Time::from_secs(61), PeerAddr(1)), None);
        c.store(Time::from_secs(1), PeerAddr(2), snap());
        c.store(Time::from_secs(2), PeerAddr(3), snap());
        assert_eq!(c.lookup(Time::from_secs(2), PeerAddr(1)), None, "evicted");
        assert!(c.lookup(Time::from_secs(2), PeerAddr(3)).is_some());
    }
}
