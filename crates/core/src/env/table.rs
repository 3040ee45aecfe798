//! The host's parameter table: `set_dev_param`, `get_dev_params`, `set_dev_param_wms`
//! (papers/001 §3.4, §5.2) and the events they cause.
//!
//! > "The interface provided for applications as well as the kernel code checks watermark
//! > violations whenever a parameter value is set." (§3.4)
//!
//! Call order: feed values with [`EnvTable::set_dev_param`]; drain [`EnvTable::poll_event`];
//! if any parameter has a minimum dwell, arm a timer at [`EnvTable::poll_timeout`] and call
//! [`EnvTable::handle_timeout`] when it fires, then drain events again.
//!
//! Baselines: the first value of a parameter, and the value current when its watermarks are
//! (re)set, only establish on which side of each level the value lies; neither is a crossing,
//! so neither causes an event, and no level starts out violated.

use super::error::EnvError;
use super::events::EnvEvent;
use super::hysteresis::Hysteresis;
use super::params::{Name, Param, ParamReading, check_value};
use super::watermarks::{LevelMask, Watermarks, transition};
use crate::time::Time;
use std::collections::{BTreeMap, VecDeque};

/// Events kept for the engine by default before the oldest are dropped.
pub const DEFAULT_EVENT_QUEUE_EVENTS: usize = 1024;
/// Most devices one table holds.
pub const MAX_DEVICES: usize = 256;
/// Most parameters one device holds.
pub const MAX_PARAMS_PER_DEVICE: usize = 64;

/// A change of sides waiting out its minimum dwell.
#[derive(Clone, Copy, Debug)]
struct Pending {
    sides: LevelMask,
    since: Time,
}

/// The last value of a parameter.
#[derive(Clone, Copy, Debug)]
struct Reading {
    raw: f64,
    effective: f64,
    at: Time,
}

/// Everything the table keeps for one parameter of one device.
#[derive(Clone, Debug)]
struct ParamState {
    reading: Option<Reading>,
    watermarks: Watermarks,
    hysteresis: Hysteresis,
    /// Committed side bits (see [`Watermarks::sides`]).
    sides: LevelMask,
    /// Levels violated and not cleared.
    state: LevelMask,
    pending: Option<Pending>,
}

impl ParamState {
    fn new() -> ParamState {
        ParamState {
            reading: None,
            watermarks: Watermarks::none(),
            hysteresis: Hysteresis::NONE,
            sides: LevelMask::EMPTY,
            state: LevelMask::EMPTY,
            pending: None,
        }
    }

    fn due(&self) -> Option<Time> {
        self.pending
            .map(|p| p.since.saturating_add(self.hysteresis.min_dwell))
    }

    /// Makes `sides` the committed sides; returns the event's levels if any were violated.
    fn commit(&mut self, sides: LevelMask) -> Option<(LevelMask, LevelMask)> {
        self.pending = None;
        let w = &self.watermarks;
        let (t, state) = transition(self.sides, sides, self.state, w.highs(), w.lows());
        self.sides = sides;
        self.state = state;
        (!t.violated.is_empty()).then_some((t.violated, t.cleared))
    }
}

/// The parameters of every device of a host, their watermarks and hysteresis, and the
/// events their updates cause. See the module documentation for the call order.
#[derive(Clone, Debug)]
pub struct EnvTable {
    devices: BTreeMap<Name, BTreeMap<Param, ParamState>>,
    events: VecDeque<EnvEvent>,
    event_capacity: usize,
    events_lost: u64,
}

impl Default for EnvTable {
    fn default() -> Self {
        EnvTable {
            devices: BTreeMap::new(),
            events: VecDeque::new(),
            event_capacity: DEFAULT_EVENT_QUEUE_EVENTS,
            events_lost: 0,
        }
    }
}

impl EnvTable {
    /// An empty table keeping up to [`DEFAULT_EVENT_QUEUE_EVENTS`] undrained events.
    pub fn new() -> EnvTable {
        EnvTable::default()
    }

    /// An empty table keeping up to `events` undrained events (the oldest are dropped and
    /// counted in [`EnvTable::events_lost`]).
    pub fn with_event_capacity(events: usize) -> Result<EnvTable, EnvError> {
        if events == 0 {
            return Err(EnvError::ZeroCapacity("event queue capacity"));
        }
        Ok(EnvTable {
            event_capacity: events,
            ..EnvTable::default()
        })
    }

    /// The state of `param` on `device`, created if new (within the bounds).
    fn entry(&mut self, device: &Name, param: &Param) -> Result<&mut ParamState, EnvError> {
        if !self.devices.contains_key(device) && self.devices.len() >= MAX_DEVICES {
            return Err(EnvError::LimitExceeded {
                what: "devices per table",
                max: MAX_DEVICES,
            });
        }
        let params = self.devices.entry(device.clone()).or_default();
        if !params.contains_key(param) && params.len() >= MAX_PARAMS_PER_DEVICE {
            return Err(EnvError::LimitExceeded {
                what: "parameters per device",
                max: MAX_PARAMS_PER_DEVICE,
            });
        }
        Ok(params.entry(param.clone()).or_insert_with(ParamState::new))
    }

    fn state(&self, device: &Name, param: &Param) -> Option<&ParamState> {
        self.devices.get(device)?.get(param)
    }

    fn push_event(&mut self, event: EnvEvent) {
        if self.events.len() >= self.event_capacity {
            self.events.pop_front();
            self.events_lost = self.events_lost.saturating_add(1);
        }
        self.events.push_back(event);
    }

    /// Sets `param` of `device` to `value` at `now` and checks its watermarks (§3.4's
    /// `set_dev_param`). Unknown devices and parameters are created.
    pub fn set_dev_param(
        &mut self,
        now: Time,
        device: &Name,
        param: &Param,
        value: f64,
    ) -> Result<(), EnvError> {
        let raw = check_value(value)?;
        let st = self.entry(device, param)?;
        let h = st.hysteresis;
        let effective = h.smooth(st.reading.map(|r| r.effective), raw);
        let first = st.reading.is_none();
        st.reading = Some(Reading {
            raw,
            effective,
            at: now,
        });
        if first {
            st.sides = st.watermarks.plain_sides(effective);
            return Ok(());
        }
        let base = st.pending.map_or(st.sides, |p| p.sides);
        let target = st.watermarks.sides(base, effective, h.dead_band);
        let decided = if h.min_dwell.is_zero() {
            st.commit(target)
        } else {
            if target == st.sides {
                st.pending = None;
            } else if st.pending.is_none_or(|p| p.sides != target) {
                st.pending = Some(Pending {
                    sides: target,
                    since: now,
                });
            }
            None
        };
        if let Some((violated, cleared)) = decided {
            let highs = st.watermarks.highs();
            self.push_event(EnvEvent {
                at: now,
                device: device.clone(),
                param: param.clone(),
                value: effective,
                violated,
                cleared,
                highs,
            });
        }
        Ok(())
    }

    /// Replaces the levels of `param` on `device` (§5.2's `set_dev_param_wms`). The current
    /// value becomes the baseline: no event, no level violated, any pending change dropped.
    pub fn set_dev_param_wms(
        &mut self,
        device: &Name,
        param: &Param,
        watermarks: Watermarks,
    ) -> Result<(), EnvError> {
        let st = self.entry(device, param)?;
        st.sides = st
            .reading
            .map_or(LevelMask::EMPTY, |r| watermarks.plain_sides(r.effective));
        st.watermarks = watermarks;
        st.state = LevelMask::EMPTY;
        st.pending = None;
        Ok(())
    }

    /// Sets the hysteresis of `param` on `device`. A change waiting out a dwell keeps its
    /// start time and is judged against the new dwell at the next timeout.
    pub fn set_hysteresis(
        &mut self,
        device: &Name,
        param: &Param,
        hysteresis: Hysteresis,
    ) -> Result<(), EnvError> {
        hysteresis.validate()?;
        self.entry(device, param)?.hysteresis = hysteresis;
        Ok(())
    }

    /// Every parameter of `device` that has a value (§3.4's `get_dev_params`), in a fixed
    /// order (well-known parameters first, then custom ones by name).
    pub fn get_dev_params(&self, device: &Name) -> Vec<ParamReading> {
        self.devices.get(device).map_or_else(Vec::new, |params| {
            params
                .iter()
                .filter_map(|(p, st)| Self::reading(p, st))
                .collect()
        })
    }

    /// One parameter of `device`, if it has a value.
    pub fn get_dev_param(&self, device: &Name, param: &Param) -> Option<ParamReading> {
        Self::reading(param, self.state(device, param)?)
    }

    fn reading(param: &Param, st: &ParamState) -> Option<ParamReading> {
        st.reading.map(|r| ParamReading {
            param: param.clone(),
            raw: r.raw,
            effective: r.effective,
            updated_at: r.at,
            violated: st.state,
        })
    }

    /// The levels of `param` on `device` currently violated and not cleared.
    pub fn violated(&self, device: &Name, param: &Param) -> LevelMask {
        self.state(device, param)
            .map_or(LevelMask::EMPTY, |st| st.state)
    }

    /// The watermarks of `param` on `device`, if any were set.
    pub fn watermarks(&self, device: &Name, param: &Param) -> Option<&Watermarks> {
        self.state(device, param).map(|st| &st.watermarks)
    }

    /// The parameters of `device` that have watermarks, with their violated levels.
    pub fn violated_params(&self, device: &Name) -> Vec<(Param, LevelMask)> {
        self.devices.get(device).map_or_else(Vec::new, |params| {
            params
                .iter()
                .filter(|(_, st)| !st.watermarks.is_empty())
                .map(|(p, st)| (p.clone(), st.state))
                .collect()
        })
    }

    /// The next event, oldest first.
    pub fn poll_event(&mut self) -> Option<EnvEvent> {
        self.events.pop_front()
    }

    /// Events dropped because the engine did not drain [`EnvTable::poll_event`] in time.
    pub fn events_lost(&self) -> u64 {
        self.events_lost
    }

    /// When the earliest pending change ends its minimum dwell.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.devices
            .values()
            .flat_map(BTreeMap::values)
            .filter_map(ParamState::due)
            .min()
    }

    /// Commits every pending change whose dwell has ended by `now`.
    pub fn handle_timeout(&mut self, now: Time) {
        let mut fired = Vec::new();
        for (device, params) in &mut self.devices {
            for (param, st) in params.iter_mut() {
                if st.due().is_none_or(|t| t > now) {
                    continue;
                }
                let Some(target) = st.pending.map(|p| p.sides) else {
                    continue;
                };
                if let Some((violated, cleared)) = st.commit(target) {
                    fired.push(EnvEvent {
                        at: now,
                        device: device.clone(),
                        param: param.clone(),
                        value: st.reading.map_or(0.0, |r| r.effective),
                        violated,
                        cleared,
                        highs: st.watermarks.highs(),
                    });
                }
            }
        }
        for ev in fired {
            self.push_event(ev);
        }
    }
}
