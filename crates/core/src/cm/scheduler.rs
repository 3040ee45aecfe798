//! The macroflow scheduler: divides a macroflow's grants between its flows in proportion to
//! their weights (papers/003 §2.4: "apportions bandwidth among flows in proportion to
//! pre-configured weights, as well as receiver hints").
//!
//! The paper used Hierarchical Round Robin [17]; we use an equivalent fair-queueing scheme with
//! better scaling: self-clocked fair queueing (SCFQ, Golestani 1994). Each flow with a pending
//! request sits in a binary heap under the virtual finish tag of its next grant,
//! `F = max(F_prev, v) + len / weight`, where `v` is the tag of the grant last issued. The
//! smallest tag is served next. A grant costs O(log n) for n requesting flows, which keeps the
//! per-grant cost logarithmic up to 10,000 flows (issue 4 benchmark target).
//!
//! A flow whose grants must wait for something other than tokens (an implicit-feedback flow
//! while the macroflow's window is full, see `macroflow.rs`) is *parked*: taken out of the
//! heap with its request kept, so the flows behind it are served, and put back by
//! [`Scheduler::unpark_all`] when the window opens.

use super::FlowId;
use crate::time::Time;
use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

/// A virtual time, totally ordered (tags are finite and non-negative by construction).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Tag(f64);

impl Eq for Tag {}

impl PartialOrd for Tag {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Tag {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

#[derive(Clone, Debug)]
struct Entry {
    weight: f64,
    pending_bytes: u64,
    last_finish: f64,
    /// Sequence number of this flow's live heap entry, if queued.
    queued: Option<u64>,
    /// Parked: out of the heap until `unpark_all`, its request and its finish tag kept.
    parked: Option<f64>,
    /// `cm_request`'s `minbytes`: the flow's grants are at least this large (bounded by what
    /// it requested); 0 for grants of one MTU.
    min_bytes: u64,
    /// When the pending request stops being useful (`cm_request`'s `latency`).
    deadline: Option<Time>,
}

impl Entry {
    /// The size of the flow's next grant: one chunk (an MTU), or `min_bytes` if larger, never
    /// more than requested.
    fn chunk(&self, chunk_max: u64) -> u64 {
        self.pending_bytes.min(chunk_max.max(self.min_bytes))
    }
}

/// What one `cm_request` adds to a flow's pending request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PendingRequest {
    pub bytes: u64,
    pub min_bytes: u64,
    pub deadline: Option<Time>,
}

#[cfg(test)]
impl PendingRequest {
    /// `bytes` in grants of one MTU, with no deadline.
    pub(crate) fn bytes(bytes: u64) -> PendingRequest {
        PendingRequest {
            bytes,
            min_bytes: 0,
            deadline: None,
        }
    }
}

/// SCFQ over the flows of one macroflow.
#[derive(Clone, Debug, Default)]
pub(crate) struct Scheduler {
    heap: BinaryHeap<Reverse<(Tag, u64, FlowId)>>,
    entries: BTreeMap<FlowId, Entry>,
    vtime: f64,
    seq: u64,
    queued: usize,
    /// Parked flows (each at most once; removed or re-added flows are skipped).
    parked: Vec<FlowId>,
    /// Pending requests with a deadline, earliest first.
    deadlines: BTreeSet<(Time, FlowId)>,
}

impl Scheduler {
    pub(crate) fn add(&mut self, flow: FlowId, weight: f64) {
        self.entries.insert(
            flow,
            Entry {
                weight,
                pending_bytes: 0,
                last_finish: self.vtime,
                queued: None,
                parked: None,
                min_bytes: 0,
                deadline: None,
            },
        );
    }

    /// Forgets a flow; returns the bytes it had requested and not been granted.
    pub(crate) fn remove(&mut self, flow: FlowId) -> u64 {
        match self.entries.remove(&flow) {
            Some(e) => {
                if let Some(d) = e.deadline {
                    self.deadlines.remove(&(d, flow));
                }
                if e.queued.is_some() {
                    self.queued -= 1;
                }
                self.maybe_compact();
                e.pending_bytes
            }
            None => 0,
        }
    }

    /// Changes a flow's weight; takes effect from its next grant.
    pub(crate) fn set_weight(&mut self, flow: FlowId, weight: f64) {
        if let Some(e) = self.entries.get_mut(&flow) {
            e.weight = weight;
        }
    }

    pub(crate) fn pending(&self, flow: FlowId) -> u64 {
        self.entries.get(&flow).map_or(0, |e| e.pending_bytes)
    }

    /// Adds `bytes` to the flow's outstanding request, capped at `max_pending`. The request's
    /// `min_bytes` and `deadline` apply to all the flow's pending bytes from now on.
    pub(crate) fn request(
        &mut self,
        flow: FlowId,
        req: PendingRequest,
        max_pending: u64,
        chunk_max: u64,
    ) {
        let Some(e) = self.entries.get_mut(&flow) else {
            return;
        };
        e.pending_bytes = e.pending_bytes.saturating_add(req.bytes).min(max_pending);
        e.min_bytes = req.min_bytes;
        if let Some(old) = e.deadline.take() {
            self.deadlines.remove(&(old, flow));
        }
        if let Some(d) = req.deadline.filter(|_| e.pending_bytes > 0) {
            e.deadline = Some(d);
            self.deadlines.insert((d, flow));
        }
        if e.queued.is_none() && e.parked.is_none() && e.pending_bytes > 0 {
            self.enqueue(flow, chunk_max);
        }
    }

    /// Drops a flow's outstanding request.
    pub(crate) fn cancel(&mut self, flow: FlowId) {
        if let Some(e) = self.entries.get_mut(&flow) {
            e.pending_bytes = 0;
            if let Some(d) = e.deadline.take() {
                self.deadlines.remove(&(d, flow));
            }
            if e.queued.take().is_some() {
                self.queued -= 1;
            }
        }
        self.maybe_compact();
    }

    fn enqueue(&mut self, flow: FlowId, chunk_max: u64) {
        let vtime = self.vtime;
        let Some(e) = self.entries.get_mut(&flow) else {
            return;
        };
        let len = e.chunk(chunk_max) as f64;
        let finish = e.last_finish.max(vtime) + len / e.weight;
        self.seq += 1;
        e.queued = Some(self.seq);
        self.queued += 1;
        self.heap.push(Reverse((Tag(finish), self.seq, flow)));
    }

    fn drop_stale_head(&mut self) {
        while let Some(Reverse((_, seq, flow))) = self.heap.peek() {
            let live = self
                .entries
                .get(flow)
                .is_some_and(|e| e.queued == Some(*seq));
            if live {
                return;
            }
            self.heap.pop();
        }
    }

    /// The flow served next and the size of its next grant.
    pub(crate) fn peek(&mut self, chunk_max: u64) -> Option<(FlowId, u64)> {
        self.drop_stale_head();
        let Reverse((_, _, flow)) = self.heap.peek()?;
        let e = self.entries.get(flow)?;
        Some((*flow, e.chunk(chunk_max)))
    }

    /// Serves the head flow: returns it and the bytes granted.
    pub(crate) fn grant_head(&mut self, chunk_max: u64) -> Option<(FlowId, u64)> {
        self.drop_stale_head();
        let Reverse((Tag(finish), _, flow)) = self.heap.pop()?;
        let e = self.entries.get_mut(&flow)?;
        let bytes = e.chunk(chunk_max);
        e.pending_bytes -= bytes;
        if e.pending_bytes == 0
            && let Some(d) = e.deadline.take()
        {
            self.deadlines.remove(&(d, flow));
        }
        e.last_finish = finish;
        e.queued = None;
        self.queued -= 1;
        // SCFQ: the system virtual time is the tag of the grant in service.
        self.vtime = self.vtime.max(finish);
        if e.pending_bytes > 0 {
            self.enqueue(flow, chunk_max);
        }
        Some((flow, bytes))
    }

    /// Takes the head flow out of the heap without serving it; its request waits for
    /// [`Scheduler::unpark_all`], which puts it back under the same finish tag (so a flow
    /// keeps its place in the fair order however often it is parked).
    pub(crate) fn park_head(&mut self) {
        self.drop_stale_head();
        let Some(Reverse((Tag(finish), _, flow))) = self.heap.pop() else {
            return;
        };
        if let Some(e) = self.entries.get_mut(&flow) {
            e.queued = None;
            e.parked = Some(finish);
            self.queued -= 1;
            self.parked.push(flow);
        }
    }

    /// The earliest deadline of a pending request.
    pub(crate) fn next_deadline(&self) -> Option<Time> {
        self.deadlines.first().map(|d| d.0)
    }

    /// Withdraws the pending requests whose deadline is at or before `now`; returns each flow
    /// with the bytes it had not been granted.
    pub(crate) fn expire(&mut self, now: Time) -> Vec<(FlowId, u64)> {
        let mut out = Vec::new();
        while let Some(&(d, flow)) = self.deadlines.first() {
            if d > now {
                break;
            }
            let bytes = self.pending(flow);
            self.cancel(flow);
            // `cancel` removed the deadline; guard against a stale one all the same.
            self.deadlines.remove(&(d, flow));
            if bytes > 0 {
                out.push((flow, bytes));
            }
        }
        out
    }

    /// Whether any flow is parked.
    pub(crate) fn has_parked(&self) -> bool {
        !self.parked.is_empty()
    }

    /// Puts every parked flow that still has a request back into the heap.
    pub(crate) fn unpark_all(&mut self) {
        for flow in std::mem::take(&mut self.parked) {
            let Some(e) = self.entries.get_mut(&flow) else {
                continue;
            };
            let Some(finish) = e.parked.take() else {
                continue;
            };
            if e.queued.is_none() && e.pending_bytes > 0 {
                self.seq += 1;
                e.queued = Some(self.seq);
                self.queued += 1;
                self.heap.push(Reverse((Tag(finish), self.seq, flow)));
            }
        }
    }

    /// Rebuilds the heap when stale entries (from cancels and removals) outnumber live ones,
    /// so its size stays bounded by about twice the number of requesting flows.
    fn maybe_compact(&mut self) {
        if self.heap.len() <= 2 * self.queued + 64 {
            return;
        }
        let entries = &self.entries;
        self.heap.retain(|Reverse((_, seq, flow))| {
            entries.get(flow).is_some_and(|e| e.queued == Some(*seq))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scheduler whose flows `0..` have these weights and never-ending requests.
    fn backlogged(weights: &[f64]) -> Scheduler {
        let mut s = Scheduler::default();
        for (i, w) in weights.iter().enumerate() {
            s.add(FlowId(i as u32), *w);
            s.request(
                FlowId(i as u32),
                PendingRequest::bytes(u64::MAX),
                u64::MAX,
                1000,
            );
        }
        s
    }

    #[test]
    fn test_weighted_shares_follow_weights() {
        let mut s = backlogged(&[1.0, 2.0, 5.0]);
        let mut got = [0u64; 3];
        for _ in 0..8000 {
            let (f, b) = s.grant_head(1000).expect("backlogged");
            got[f.0 as usize] += b;
        }
        assert_eq!(got, [1_000_000, 2_000_000, 5_000_000]);
    }

    #[test]
    fn test_cancel_and_remove_leave_no_live_entry() {
        let mut s = Scheduler::default();
        s.add(FlowId(1), 1.0);
        s.add(FlowId(2), 1.0);
        s.request(FlowId(1), PendingRequest::bytes(3000), u64::MAX, 1000);
        s.request(FlowId(2), PendingRequest::bytes(500), u64::MAX, 1000);
        s.cancel(FlowId(1));
        assert_eq!(s.grant_head(1000), Some((FlowId(2), 500)));
        assert_eq!(s.grant_head(1000), None);
        s.request(FlowId(1), PendingRequest::bytes(10), u64::MAX, 1000);
        assert_eq!(s.remove(FlowId(1)), 10);
        assert_eq!(s.peek(1000), None);
    }

    #[test]
    fn test_parked_flow_lets_others_through_and_keeps_its_request() {
        let mut s = Scheduler::default();
        s.add(FlowId(1), 1.0);
        s.add(FlowId(2), 1.0);
        s.request(FlowId(1), PendingRequest::bytes(2000), u64::MAX, 1000);
        s.request(FlowId(2), PendingRequest::bytes(1000), u64::MAX, 1000);
        assert_eq!(s.peek(1000), Some((FlowId(1), 1000)));
        s.park_head();
        assert!(s.has_parked());
        // A new request of a parked flow does not requeue it.
        s.request(FlowId(1), PendingRequest::bytes(500), u64::MAX, 1000);
        assert_eq!(s.grant_head(1000), Some((FlowId(2), 1000)));
        assert_eq!(s.peek(1000), None);
        s.unpark_all();
        assert!(!s.has_parked());
        assert_eq!(s.pending(FlowId(1)), 2500);
        assert_eq!(s.grant_head(1000), Some((FlowId(1), 1000)));
    }

    #[test]
    fn test_weighted_shares_survive_parking_before_every_grant() {
        // A window that admits one grant at a time: every flow but the one served is parked
        // and unparked around each grant. Shares must still follow the weights.
        let mut s = backlogged(&[1.0, 2.0, 5.0]);
        let mut got = [0u64; 3];
        for _ in 0..8000 {
            let (f, b) = s.grant_head(1000).expect("backlogged");
            got[f.0 as usize] += b;
            while s.peek(1000).is_some() {
                s.park_head();
            }
            s.unpark_all();
        }
        assert_eq!(got, [1_000_000, 2_000_000, 5_000_000]);
    }
}
