//! The sender's packets in flight, indexed by packet number.
//!
//! Packet numbers are given out one after another, so the packets in flight are a window of
//! numbers from the oldest one not yet acknowledged or declared lost to the newest sent: a
//! ring of slots from that oldest number, where an acknowledged or lost packet leaves an empty
//! slot until every older one is gone too. Each operation the sender does per datagram —
//! record one sent, take the ones an acknowledgement covers, find the oldest — is then a
//! slot index, where a `BTreeMap` walked and rebalanced its tree (issue 18: "index packets in
//! flight by number"; quinn's `sent_packets` and picoquic's packet lists keep them in number
//! order for the same reason).
//!
//! The window is bounded by what the sender keeps in flight: a packet older than the newest
//! acknowledged by the loss threshold is declared lost (and leaves), so the empty slots in
//! front of the oldest live one never outnumber the packets sent in one round trip.

use std::collections::VecDeque;

/// Packets in flight by number; see the module documentation.
#[derive(Clone, Debug)]
pub(crate) struct SentPackets<T> {
    /// The number of the packet in `slots[0]`.
    base: u64,
    /// One slot per number from `base`; `None` once acknowledged or lost. Never starts or
    /// ends with `None`.
    slots: VecDeque<Option<T>>,
    /// Slots that hold a packet.
    len: usize,
}

impl<T> Default for SentPackets<T> {
    fn default() -> Self {
        SentPackets {
            base: 0,
            slots: VecDeque::new(),
            len: 0,
        }
    }
}

impl<T> SentPackets<T> {
    /// Packets in flight.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Records packet `pn`, numbered after every packet recorded before (the sender's next
    /// number); a number at or below one already recorded is ignored.
    pub(crate) fn push(&mut self, pn: u64, packet: T) {
        if self.slots.is_empty() {
            self.base = pn;
        }
        let Some(gap) = pn
            .checked_sub(self.base)
            .and_then(|i| i.checked_sub(self.slots.len() as u64))
        else {
            return;
        };
        // Numbers are consecutive in use; a gap (a number given out for nothing) is empty
        // slots.
        for _ in 0..gap {
            self.slots.push_back(None);
        }
        self.slots.push_back(Some(packet));
        self.len += 1;
    }

    fn index(&self, pn: u64) -> Option<usize> {
        let i = usize::try_from(pn.checked_sub(self.base)?).ok()?;
        (i < self.slots.len()).then_some(i)
    }

    /// Takes every packet numbered in `[start, end)` out, oldest first, into `out`.
    pub(crate) fn remove_range(&mut self, start: u64, end: u64, out: &mut Vec<(u64, T)>) {
        let from = start.max(self.base);
        let to = end.min(self.base.saturating_add(self.slots.len() as u64));
        for pn in from..to {
            if let Some(packet) = self
                .index(pn)
                .and_then(|i| self.slots.get_mut(i))
                .and_then(Option::take)
            {
                self.len -= 1;
                out.push((pn, packet));
            }
        }
        self.trim();
    }

    /// Takes every packet for which `lost` holds out, oldest first, into `out`.
    pub(crate) fn remove_where(&mut self, lost: impl Fn(&T) -> bool, out: &mut Vec<(u64, T)>) {
        for (pn, slot) in (self.base..).zip(self.slots.iter_mut()) {
            if slot.as_ref().is_some_and(&lost)
                && let Some(packet) = slot.take()
            {
                self.len -= 1;
                out.push((pn, packet));
            }
        }
        self.trim();
    }

    /// Drops empty slots at both ends.
    fn trim(&mut self) {
        while let Some(None) = self.slots.front() {
            self.slots.pop_front();
            self.base += 1;
        }
        while let Some(None) = self.slots.back() {
            self.slots.pop_back();
        }
    }

    /// The oldest packet in flight.
    pub(crate) fn oldest(&self) -> Option<&T> {
        self.slots.front().and_then(Option::as_ref)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// Every packet in flight, oldest first, with its number.
    fn contents<T: Copy>(s: &SentPackets<T>) -> Vec<(u64, T)> {
        (s.base..)
            .zip(s.slots.iter())
            .filter_map(|(pn, p)| p.map(|p| (pn, p)))
            .collect()
    }

    /// Takes packet `pn` out, if it is in flight.
    fn remove<T>(s: &mut SentPackets<T>, pn: u64) -> Option<T> {
        let mut out = Vec::new();
        s.remove_range(pn, pn.saturating_add(1), &mut out);
        out.pop().map(|(_, p)| p)
    }

    #[test]
    fn acknowledged_packets_leave_and_the_oldest_follows() {
        let mut s = SentPackets::default();
        for pn in 10..15 {
            s.push(pn, pn * 100);
        }
        assert_eq!((s.len(), s.oldest()), (5, Some(&1000)));
        let mut out = Vec::new();
        s.remove_range(11, 13, &mut out);
        assert_eq!(out, vec![(11, 1100), (12, 1200)]);
        assert_eq!(remove(&mut s, 10), Some(1000));
        assert_eq!((s.len(), s.oldest()), (2, Some(&1300)));
        assert_eq!(remove(&mut s, 10), None, "gone already");
        assert_eq!(contents(&s), vec![(13, 1300), (14, 1400)]);
        s.push(12, 0);
        assert_eq!(s.len(), 2, "a number below the newest is ignored");
    }

    #[derive(Clone, Debug)]
    enum Op {
        Push(u64),
        Remove(u64),
        RemoveRange(u64, u64),
        RemoveOdd,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u64..3).prop_map(Op::Push),
            (0u64..80).prop_map(Op::Remove),
            (0u64..80, 0u64..80).prop_map(|(a, b)| Op::RemoveRange(a, b)),
            Just(Op::RemoveOdd),
        ]
    }

    proptest! {
        /// Against a `BTreeMap` of the same packets: the same contents, the same answers.
        #[test]
        fn behaves_as_an_ordered_map(ops in proptest::collection::vec(op(), 0..120)) {
            let mut s = SentPackets::default();
            let mut m = BTreeMap::new();
            let mut next = 0u64;
            for op in ops {
                match op {
                    Op::Push(skip) => {
                        next += skip;
                        s.push(next, next);
                        m.insert(next, next);
                        next += 1;
                    }
                    Op::Remove(pn) => prop_assert_eq!(remove(&mut s, pn), m.remove(&pn)),
                    Op::RemoveRange(a, b) => {
                        let mut out = Vec::new();
                        s.remove_range(a, b, &mut out);
                        let want: Vec<(u64, u64)> = if a < b {
                            m.range(a..b).map(|(k, v)| (*k, *v)).collect()
                        } else {
                            Vec::new()
                        };
                        for (k, _) in &want {
                            m.remove(k);
                        }
                        prop_assert_eq!(out, want);
                    }
                    Op::RemoveOdd => {
                        let mut out = Vec::new();
                        s.remove_where(|v| v % 2 == 1, &mut out);
                        let want: Vec<(u64, u64)> =
                            m.iter().filter(|(_, v)| *v % 2 == 1).map(|(k, v)| (*k, *v)).collect();
                        for (k, _) in &want {
                            m.remove(k);
                        }
                        prop_assert_eq!(out, want);
                    }
                }
                prop_assert_eq!(s.len(), m.len());
                prop_assert_eq!(s.oldest(), m.values().next());
                let want: Vec<(u64, u64)> = m.iter().map(|(k, v)| (*k, *v)).collect();
                prop_assert_eq!(contents(&s), want);
            }
        }
    }
}
