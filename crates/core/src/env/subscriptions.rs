//! Event subscriptions: `request_event` and bounded per-application queues (papers/001 §3.2).
//!
//! > "It is possible for applications to define coarser watermarks by choosing a subset of the
//! > levels supported by the system. … only violations of these levels will be reported to the
//! > application." (§3)
//!
//! A subscriber asks for `(device, parameter, levels)`. It receives an event when an update
//! violates at least one of its levels; the event it sees names only its levels. Clearing is
//! computed over the subscriber's subset as if those were the parameter's only levels: one of
//! its high levels is cleared by the violation of one of its low levels below it, and vice
//! versa, and a level is reported cleared only if this subscriber saw it violated.
//!
//! Each subscriber has a bounded queue. Publishing never blocks and never fails: when a queue
//! is full its oldest event is dropped, and the next [`Delivery`] says how many were lost.

use super::error::EnvError;
use super::events::EnvEvent;
use super::params::{Name, Param};
use super::watermarks::{LevelMask, clearing};
use std::collections::{BTreeMap, VecDeque};

/// Most subscribers one hub holds.
pub const MAX_SUBSCRIBERS: usize = 1024;
/// Most `(device, parameter)` requests one subscriber holds.
pub const MAX_REQUESTS_PER_SUBSCRIBER: usize = 256;
/// Largest queue one subscriber may ask for, in events.
pub const MAX_QUEUE_EVENTS: usize = 65_536;

/// A subscriber's handle in an [`EventHub`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SubscriberId(u32);

impl SubscriberId {
    /// The number behind the id.
    pub fn get(self) -> u32 {
        self.0
    }
}

/// An event handed to a subscriber.
#[derive(Clone, Debug, PartialEq)]
pub struct Delivery {
    /// The event, restricted to the subscriber's levels.
    pub event: EnvEvent,
    /// Events dropped from this subscriber's queue (oldest first) since its previous delivery.
    pub lost_before: u64,
}

/// One `(device, parameter, levels)` request and the subscriber's view of its levels.
#[derive(Clone, Debug)]
struct Request {
    levels: LevelMask,
    /// The subscriber's levels violated and not cleared.
    state: LevelMask,
}

#[derive(Clone, Debug)]
struct Subscriber {
    capacity: usize,
    queue: VecDeque<EnvEvent>,
    lost: u64,
    lost_total: u64,
    requests: BTreeMap<(Name, Param), Request>,
}

/// The table of applications' event requests and their queues.
#[derive(Clone, Debug, Default)]
pub struct EventHub {
    subscribers: BTreeMap<SubscriberId, Subscriber>,
    next_id: u32,
}

impl EventHub {
    /// A hub with no subscriber.
    pub fn new() -> EventHub {
        EventHub::default()
    }

    /// Registers a subscriber whose queue holds `queue_events` events.
    pub fn subscribe(&mut self, queue_events: usize) -> Result<SubscriberId, EnvError> {
        if queue_events == 0 {
            return Err(EnvError::ZeroCapacity("subscriber queue"));
        }
        if queue_events > MAX_QUEUE_EVENTS {
            return Err(EnvError::LimitExceeded {
                what: "subscriber queue events",
                max: MAX_QUEUE_EVENTS,
            });
        }
        if self.subscribers.len() >= MAX_SUBSCRIBERS {
            return Err(EnvError::LimitExceeded {
                what: "subscribers",
                max: MAX_SUBSCRIBERS,
            });
        }
        let id = SubscriberId(self.next_id);
        self.next_id = self.next_id.wrapping_add(1);
        self.subscribers.insert(
            id,
            Subscriber {
                capacity: queue_events,
                queue: VecDeque::new(),
                lost: 0,
                lost_total: 0,
                requests: BTreeMap::new(),
            },
        );
        Ok(id)
    }

    /// Removes a subscriber and its queue.
    pub fn unsubscribe(&mut self, id: SubscriberId) -> Result<(), EnvError> {
        self.subscribers
            .remove(&id)
            .map(|_| ())
            .ok_or(EnvError::UnknownSubscriber(id.0))
    }

    fn subscriber(&mut self, id: SubscriberId) -> Result<&mut Subscriber, EnvError> {
        self.subscribers
            .get_mut(&id)
            .ok_or(EnvError::UnknownSubscriber(id.0))
    }

    /// Asks for the events of `param` on `device` that violate one of `levels`
    /// ([`LevelMask::ALL`] for every level); replaces an earlier request for the same pair.
    pub fn request_event(
        &mut self,
        id: SubscriberId,
        device: &Name,
        param: &Param,
        levels: LevelMask,
    ) -> Result<(), EnvError> {
        let sub = self.subscriber(id)?;
        let key = (device.clone(), param.clone());
        if !sub.requests.contains_key(&key) && sub.requests.len() >= MAX_REQUESTS_PER_SUBSCRIBER {
            return Err(EnvError::LimitExceeded {
                what: "requests per subscriber",
                max: MAX_REQUESTS_PER_SUBSCRIBER,
            });
        }
        sub.requests.insert(
            key,
            Request {
                levels,
                state: LevelMask::EMPTY,
            },
        );
        Ok(())
    }

    /// Withdraws the request for `param` on `device`; true if there was one.
    pub fn cancel_event(
        &mut self,
        id: SubscriberId,
        device: &Name,
        param: &Param,
    ) -> Result<bool, EnvError> {
        let key = (device.clone(), param.clone());
        Ok(self.subscriber(id)?.requests.remove(&key).is_some())
    }

    /// Hands `event` to every subscriber that asked for one of its violated levels. Never
    /// blocks: a full queue loses its oldest event. Costs one map lookup per subscriber.
    pub fn publish(&mut self, event: &EnvEvent) {
        let key = (event.device.clone(), event.param.clone());
        let lows = LevelMask::ALL.minus(event.highs);
        for sub in self.subscribers.values_mut() {
            let Some(req) = sub.requests.get_mut(&key) else {
                continue;
            };
            let violated = event.violated.intersect(req.levels);
            if violated.is_empty() {
                continue;
            }
            let highs = event.highs.intersect(req.levels);
            let cleared = clearing(req.state, violated, highs, lows.intersect(req.levels));
            req.state = req.state.minus(cleared).union(violated);
            if sub.queue.len() >= sub.capacity {
                sub.queue.pop_front();
                sub.lost = sub.lost.saturating_add(1);
                sub.lost_total = sub.lost_total.saturating_add(1);
            }
            sub.queue.push_back(EnvEvent {
                violated,
                cleared,
                ..event.clone()
            });
        }
    }

    /// The subscriber's next event, oldest first, with the count of events it lost before it.
    pub fn poll(&mut self, id: SubscriberId) -> Result<Option<Delivery>, EnvError> {
        let sub = self.subscriber(id)?;
        Ok(sub.queue.pop_front().map(|event| Delivery {
            event,
            lost_before: std::mem::take(&mut sub.lost),
        }))
    }

    /// Events waiting in the subscriber's queue.
    pub fn pending(&self, id: SubscriberId) -> Result<usize, EnvError> {
        self.subscribers
            .get(&id)
            .map(|s| s.queue.len())
            .ok_or(EnvError::UnknownSubscriber(id.0))
    }

    /// Events the subscriber has lost since it subscribed.
    pub fn lost_total(&self, id: SubscriberId) -> Result<u64, EnvError> {
        self.subscribers
            .get(&id)
            .map(|s| s.lost_total)
            .ok_or(EnvError::UnknownSubscriber(id.0))
    }

    /// Number of subscribers.
    pub fn len(&self) -> usize {
        self.subscribers.len()
    }

    /// Whether there is no subscriber.
    pub fn is_empty(&self) -> bool {
        self.subscribers.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{FIGURE1_VALUES, dev, figure1, set, t, table3};
    use super::super::{EnvTable, Watermarks};
    use super::*;

    fn run(env: &mut EnvTable, hub: &mut EventHub, d: &Name, p: &Param, values: &[f64]) {
        for (i, v) in values.iter().enumerate() {
            if let Some(ev) = set(env, t(i as u64), d, p, *v) {
                hub.publish(&ev);
            }
        }
    }

    fn setup(w: Watermarks) -> (EnvTable, EventHub, Name, Param) {
        let (d, p) = (dev("wlan0"), Param::SignalQuality);
        let mut env = EnvTable::new();
        env.set_dev_param_wms(&d, &p, w).unwrap();
        (env, EventHub::new(), d, p)
    }

    fn drain(hub: &mut EventHub, id: SubscriberId) -> Vec<(LevelMask, LevelMask, u64)> {
        let mut out = Vec::new();
        while let Some(dl) = hub.poll(id).unwrap() {
            out.push((dl.event.violated, dl.event.cleared, dl.lost_before));
        }
        out
    }

    #[test]
    fn test_subscriber_to_all_levels_sees_every_event() {
        let (mut env, mut hub, d, p) = setup(figure1());
        let id = hub.subscribe(16).unwrap();
        hub.request_event(id, &d, &p, LevelMask::ALL).unwrap();
        run(&mut env, &mut hub, &d, &p, &FIGURE1_VALUES);
        let m = LevelMask::of;
        assert_eq!(
            drain(&mut hub, id),
            vec![
                (m(&[0, 2]), LevelMask::EMPTY, 0),
                (m(&[3]), LevelMask::EMPTY, 0),
                (m(&[1, 3]), m(&[2]), 0),
                (m(&[2]), m(&[1]), 0),
            ]
        );
    }

    #[test]
    fn test_coarser_watermarks_a_and_d_only() {
        // §3: "an application may be interested only in level A and level D".
        let (mut env, mut hub, d, p) = setup(figure1());
        let coarse = hub.subscribe(16).unwrap();
        let other_dev = hub.subscribe(16).unwrap();
        hub.request_event(coarse, &d, &p, LevelMask::of(&[0, 1]))
            .unwrap();
        hub.request_event(other_dev, &dev("eth0"), &p, LevelMask::ALL)
            .unwrap();
        run(&mut env, &mut hub, &d, &p, &FIGURE1_VALUES);
        let m = LevelMask::of;
        // A (0) at v1 -> v2; D (1) at v5 -> v6, which over {A, D} clears nothing because A
        // is below D. v7 -> v8 violates only C: not reported.
        assert_eq!(
            drain(&mut hub, coarse),
            vec![
                (m(&[0]), LevelMask::EMPTY, 0),
                (m(&[1]), LevelMask::EMPTY, 0)
            ]
        );
        assert_eq!(drain(&mut hub, other_dev), vec![]);
    }

    #[test]
    fn test_coarser_watermarks_clear_over_the_subset() {
        // Table 3 levels, an application that wants only "about to handoff" (3) and
        // "device is unavailable" (0): the system's clearing of 3 by the dummy low 2 is not
        // its business, but 3 must be reported cleared when 0 is violated.
        let (d, p) = (dev("wlan0"), Param::Availability);
        let mut env = EnvTable::new();
        env.set_dev_param_wms(&d, &p, table3()).unwrap();
        let mut hub = EventHub::new();
        let id = hub.subscribe(16).unwrap();
        hub.request_event(id, &d, &p, LevelMask::of(&[0, 3]))
            .unwrap();
        run(
            &mut env,
            &mut hub,
            &d,
            &p,
            &[0.0, 25.0, 45.0, 55.0, 25.0, 5.0],
        );
        let m = LevelMask::of;
        assert_eq!(
            drain(&mut hub, id),
            vec![(m(&[3]), LevelMask::EMPTY, 0), (m(&[0]), m(&[3]), 0)]
        );
    }

    #[test]
    fn test_slow_subscriber_loses_oldest_and_is_told() {
        let (d, p) = (dev("wlan0"), Param::Availability);
        let mut env = EnvTable::new();
        env.set_dev_param_wms(&d, &p, table3()).unwrap();
        let mut hub = EventHub::new();
        let slow = hub.subscribe(2).unwrap();
        let fast = hub.subscribe(64).unwrap();
        for id in [slow, fast] {
            hub.request_event(id, &d, &p, LevelMask::ALL).unwrap();
        }
        // 1 + 3 * 3 = 10 events.
        let mut values = vec![0.0, 25.0];
        for _ in 0..3 {
            values.extend([45.0, 55.0, 25.0]);
        }
        run(&mut env, &mut hub, &d, &p, &values);
        assert_eq!(hub.pending(fast).unwrap(), 10);
        assert_eq!(hub.pending(slow).unwrap(), 2);
        let got = drain(&mut hub, slow);
        let m = LevelMask::of;
        assert_eq!(
            got,
            vec![(m(&[4]), LevelMask::EMPTY, 8), (m(&[2]), m(&[3, 4]), 0)]
        );
        assert_eq!(hub.lost_total(slow).unwrap(), 8);
        assert_eq!(hub.lost_total(fast).unwrap(), 0);
    }

    #[test]
    fn test_subscription_bounds_and_unknown_ids() {
        let mut hub = EventHub::new();
        assert!(hub.subscribe(0).is_err());
        assert!(hub.subscribe(MAX_QUEUE_EVENTS + 1).is_err());
        let id = hub.subscribe(1).unwrap();
        let (d, p) = (dev("wlan0"), Param::Cost);
        hub.request_event(id, &d, &p, LevelMask::ALL).unwrap();
        assert_eq!(hub.cancel_event(id, &d, &p), Ok(true));
        assert_eq!(hub.cancel_event(id, &d, &p), Ok(false));
        hub.unsubscribe(id).unwrap();
        assert_eq!(hub.poll(id), Err(EnvError::UnknownSubscriber(id.get())));
        assert!(hub.is_empty());
    }
}
