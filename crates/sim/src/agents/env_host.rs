//! A simulated host's environment (papers/001 §3): its [`EnvTable`] fed by a scenario
//! timeline, the event log the host's environment-aware sockets read, and optional
//! subscribers standing in for applications that `request_event` and read every event.
//!
//! The [`EnvSource`] agent plays the part of the device drivers and daemons of §3.4 (the
//! Wavelan driver setting signal quality, the mobile IP daemon setting availability): at each
//! timeline point it calls [`EnvTable::set_dev_param`], then drains the table's events into
//! the shared [`EnvHost`] log and publishes them to the subscribers' [`EventHub`]. The world
//! re-polls every agent of a host after any input to one of them, so the host's sockets see
//! an event at the instant it happens (the in-kernel upcall of §3.1).

use crate::agent::Agent;
use crate::packet::Packet;
use adaptnet_core::Time;
use adaptnet_core::env::{EnvEvent, EnvTable, EventHub, LevelMask, Name, Param, SubscriberId};
use std::cell::RefCell;
use std::rc::Rc;

/// Events each simulated subscriber queues before the oldest are dropped.
pub const SUBSCRIBER_QUEUE_EVENTS: usize = 64;

/// One value the source sets: `param` of `device` becomes `value` at `at`.
#[derive(Clone, Debug, PartialEq)]
pub struct EnvPoint {
    /// When.
    pub at: Time,
    /// The device.
    pub device: Name,
    /// The parameter.
    pub param: Param,
    /// The new value.
    pub value: f64,
}

/// What a host's environment holds: the table, the log of its events, the subscribers.
#[derive(Debug)]
pub struct EnvState {
    /// The host's parameter table.
    pub table: EnvTable,
    /// Every event so far, in order (sockets keep a cursor into it).
    pub log: Vec<EnvEvent>,
    /// Simulated applications that asked for every event of the host.
    pub hub: EventHub,
    subscribers: Vec<SubscriberId>,
    /// Events the subscribers read.
    pub delivered: u64,
    /// Values the table refused (non-finite, over a bound).
    pub rejected: u64,
}

/// A host's environment, shared by its source and its sockets (one simulated thread).
pub type EnvHost = Rc<RefCell<EnvState>>;

impl EnvState {
    /// A host environment around `table` with `subscribers` applications subscribed to every
    /// level of every parameter in `params` of `device`.
    pub fn new(
        table: EnvTable,
        device: &Name,
        params: &[Param],
        subscribers: usize,
    ) -> Result<EnvHost, adaptnet_core::env::EnvError> {
        let mut hub = EventHub::new();
        let mut ids = Vec::with_capacity(subscribers);
        for _ in 0..subscribers {
            let id = hub.subscribe(SUBSCRIBER_QUEUE_EVENTS)?;
            for p in params {
                hub.request_event(id, device, p, LevelMask::ALL)?;
            }
            ids.push(id);
        }
        Ok(Rc::new(RefCell::new(EnvState {
            table,
            log: Vec::new(),
            hub,
            subscribers: ids,
            delivered: 0,
            rejected: 0,
        })))
    }

    /// Sets one value and moves the resulting events to the log and the subscribers.
    pub fn set(&mut self, now: Time, device: &Name, param: &Param, value: f64) {
        if self.table.set_dev_param(now, device, param, value).is_err() {
            self.rejected += 1;
        }
        self.drain(now);
    }

    /// Ends due minimum dwells and moves the events to the log and the subscribers, who read
    /// them at once.
    pub fn drain(&mut self, now: Time) {
        self.table.handle_timeout(now);
        while let Some(ev) = self.table.poll_event() {
            self.hub.publish(&ev);
            self.log.push(ev);
        }
        for id in &self.subscribers {
            while let Ok(Some(_)) = self.hub.poll(*id) {
                self.delivered += 1;
            }
        }
    }
}

/// The agent that sets a host's parameters from a timeline (see the module documentation).
pub struct EnvSource {
    env: EnvHost,
    points: Vec<EnvPoint>,
    next: usize,
}

impl EnvSource {
    /// A source setting `points` (sorted here by time, stable) into `env`.
    pub fn new(env: EnvHost, mut points: Vec<EnvPoint>) -> EnvSource {
        points.sort_by_key(|p| p.at);
        EnvSource {
            env,
            points,
            next: 0,
        }
    }

    /// The shared environment.
    pub fn env(&self) -> &EnvHost {
        &self.env
    }
}

impl Agent for EnvSource {
    fn handle_packet(&mut self, _now: Time, _packet: Packet) {}

    fn handle_timeout(&mut self, now: Time) {
        let mut env = self.env.borrow_mut();
        while let Some(p) = self.points.get(self.next).filter(|p| p.at <= now) {
            env.set(now, &p.device, &p.param, p.value);
            self.next += 1;
        }
        env.drain(now);
    }

    fn poll_transmit(&mut self, _now: Time) -> Option<Packet> {
        None
    }

    fn poll_timeout(&self) -> Option<Time> {
        let point = self.points.get(self.next).map(|p| p.at);
        let dwell = self.env.borrow().table.poll_timeout();
        match (point, dwell) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let env = self.env.borrow();
        vec![
            ("env_points_applied", self.next as f64),
            ("env_events", env.log.len() as f64),
            ("env_events_delivered", env.delivered as f64),
            ("env_values_rejected", env.rejected as f64),
        ]
    }
}
