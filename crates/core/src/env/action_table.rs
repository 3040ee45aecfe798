//! Per-socket action tables: simple actions and complex actions as two-level threshold
//! circuits (papers/001 §3.3.1, Table 1, Figure 4).
//!
//! > "parameter(p), watermark(w) => ACTION(a), arg — When parameter p violates watermark w,
//! > perform action a" (§3.3.1)
//!
//! > "A boolean combination is achieved by a two layer threshold circuit. … Any time an event
//! > occurs, output of the circuit is computed incrementally. … When a watermark is cleared,
//! > the output of the corresponding AND gates is decremented. Clearing watermarks allows us to
//! > take the action again when another violation is reported. … Once all the actions are
//! > decided, they are performed in order." (§3.3.1)
//!
//! Semantics, precisely:
//!
//! - A **simple action** fires on every event that violates its level (as §3.3.1 says; a
//!   signal-quality level with `TCP_RST_TIMERS` fires each time the signal comes back).
//! - A **complex action** is an OR over AND gates. A gate input `(parameter, level)` is true
//!   while that level is violated and not cleared; a gate is on while at least its threshold
//!   of inputs are true (`set_complex_action` makes an AND: threshold = fan-in); the action is
//!   *active* while at least one gate is on (the second level's threshold is 1). It fires when
//!   it becomes active; it is re-armed when a clearing makes it inactive, and fires again at
//!   the next activation. Work per event is proportional to the gate inputs that the event's
//!   levels feed, not to the size of the table.
//! - **Order**: the actions one event decides are performed in table order — the order in
//!   which the entries were added (a complex action takes the position of its first gate).
//! - **Conflicts**: two decided actions that set the same [`Knob`] conflict; only the later
//!   one in table order is kept, the way a later `setsockopt` overrides an earlier one. So an
//!   application orders its table from general to specific.
//! - **Device change** (§3.3.1: "all the entries of the action table are reexamined"):
//!   [`ActionTable::set_device`] takes the new device's violated levels from the
//!   [`EnvTable`]. If the table has UDP actions, it first decides [`UdpAction::Normal`], then
//!   every simple action whose level is violated on the new device and every complex action
//!   active there, in table order, with the same conflict rule.
//!
//! The table follows one device, the socket's; events of other devices are ignored.

use super::actions::{Action, Knob, UdpAction};
use super::error::EnvError;
use super::events::EnvEvent;
use super::params::{Name, Param};
use super::table::EnvTable;
use super::watermarks::{LevelMask, MAX_LEVELS};
use smallvec::SmallVec;
use std::collections::BTreeMap;

/// Most entries (simple actions plus complex actions) in one table.
pub const MAX_ENTRIES: usize = 1024;
/// Most AND gates one complex action ORs together.
pub const MAX_GATES: usize = 16;
/// Most inputs of one gate.
pub const MAX_FANIN: usize = 16;

/// An entry's handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntryId(u32);

/// One decided action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fired {
    /// The entry that decided it; `None` for the reset to normal of a device change.
    pub entry: Option<EntryId>,
    /// What to do.
    pub action: Action,
}

/// The actions one event decided, in the order to perform them.
pub type Decided = SmallVec<[Fired; 4]>;

#[derive(Clone, Debug)]
struct Gate {
    inputs: Vec<(Param, u16)>,
    threshold: u32,
    /// Inputs currently true.
    count: u32,
}

impl Gate {
    fn on(&self) -> bool {
        self.count >= self.threshold
    }
}

#[derive(Clone, Debug)]
enum Kind {
    Simple { param: Param, level: u16 },
    Complex { gates: Vec<Gate>, gates_on: u32 },
}

#[derive(Clone, Debug)]
struct Entry {
    id: EntryId,
    action: Action,
    kind: Kind,
}

impl Entry {
    fn active(&self) -> bool {
        matches!(self.kind, Kind::Complex { gates_on, .. } if gates_on > 0)
    }
}

/// Where an input `(parameter, level)` leads.
#[derive(Clone, Copy, Debug)]
enum Target {
    Simple(usize),
    Gate(usize, usize),
}

/// The action table of one socket; see the module documentation.
#[derive(Clone, Debug)]
pub struct ActionTable {
    device: Name,
    entries: Vec<Entry>,
    /// Violated levels of the followed device, per parameter the table uses.
    state: BTreeMap<Param, LevelMask>,
    index: BTreeMap<(Param, u16), Vec<Target>>,
    next_id: u32,
}

impl ActionTable {
    /// An empty table following `device`. It knows no violated level until events arrive or
    /// [`ActionTable::set_device`] reads them from the [`EnvTable`].
    pub fn new(device: Name) -> ActionTable {
        ActionTable {
            device,
            entries: Vec::new(),
            state: BTreeMap::new(),
            index: BTreeMap::new(),
            next_id: 0,
        }
    }

    /// The device the table follows.
    pub fn device(&self) -> &Name {
        &self.device
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn check_room(&self) -> Result<(), EnvError> {
        if self.entries.len() >= MAX_ENTRIES {
            return Err(EnvError::LimitExceeded {
                what: "action table entries",
                max: MAX_ENTRIES,
            });
        }
        Ok(())
    }

    fn check_level(level: u16) -> Result<(), EnvError> {
        if usize::from(level) >= MAX_LEVELS {
            return Err(EnvError::NoSuchLevel {
                level,
                count: MAX_LEVELS,
            });
        }
        Ok(())
    }

    fn new_id(&mut self) -> EntryId {
        let id = EntryId(self.next_id);
        self.next_id = self.next_id.wrapping_add(1);
        id
    }

    /// Adds `param, level => action` (§3.3.1's `set_simple_action`).
    pub fn set_simple_action(
        &mut self,
        param: Param,
        level: u16,
        action: impl Into<Action>,
    ) -> Result<EntryId, EnvError> {
        self.check_room()?;
        Self::check_level(level)?;
        let id = self.new_id();
        self.index
            .entry((param.clone(), level))
            .or_default()
            .push(Target::Simple(self.entries.len()));
        self.state.entry(param.clone()).or_default();
        self.entries.push(Entry {
            id,
            action: action.into(),
            kind: Kind::Simple { param, level },
        });
        Ok(id)
    }

    /// Adds an AND gate over `inputs` to the complex action `action` (§3.3.1's
    /// `set_complex_action`): the action becomes active when all inputs are violated. Gates
    /// for the same action are ORed (Figure 4); the action's [`EntryId`] is returned.
    pub fn set_complex_action(
        &mut self,
        action: impl Into<Action>,
        inputs: &[(Param, u16)],
    ) -> Result<EntryId, EnvError> {
        let all = u32::try_from(inputs.len()).unwrap_or(u32::MAX);
        self.add_gate(action, all, inputs)
    }

    /// Adds a gate that is on when at least `threshold` of `inputs` are violated (a threshold
    /// gate; [`ActionTable::set_complex_action`] is the case threshold = fan-in).
    pub fn add_gate(
        &mut self,
        action: impl Into<Action>,
        threshold: u32,
        inputs: &[(Param, u16)],
    ) -> Result<EntryId, EnvError> {
        let action = action.into();
        if inputs.is_empty() || inputs.len() > MAX_FANIN {
            return Err(EnvError::InvalidGate("a gate has 1 to 16 inputs"));
        }
        if threshold == 0 || usize::try_from(threshold).map_or(true, |t| t > inputs.len()) {
            return Err(EnvError::InvalidGate("threshold must be 1 ..= fan-in"));
        }
        for (i, (p, l)) in inputs.iter().enumerate() {
            Self::check_level(*l)?;
            if inputs.iter().take(i).any(|(q, m)| q == p && m == l) {
                return Err(EnvError::InvalidGate("an input appears twice"));
            }
        }
        let existing = self
            .entries
            .iter()
            .position(|e| e.action == action && matches!(e.kind, Kind::Complex { .. }));
        let e = match existing {
            Some(e) => e,
            None => {
                self.check_room()?;
                let id = self.new_id();
                self.entries.push(Entry {
                    id,
                    action,
                    kind: Kind::Complex {
                        gates: Vec::new(),
                        gates_on: 0,
                    },
                });
                self.entries.len() - 1
            }
        };
        let count = inputs
            .iter()
            .filter(|(p, l)| self.violated(p).contains(*l))
            .count();
        let gate = Gate {
            inputs: inputs.to_vec(),
            threshold,
            count: u32::try_from(count).unwrap_or(u32::MAX),
        };
        let Some(entry) = self.entries.get_mut(e) else {
            return Err(EnvError::InvalidGate("entry vanished"));
        };
        let id = entry.id;
        let Kind::Complex { gates, gates_on } = &mut entry.kind else {
            return Err(EnvError::InvalidGate("not a complex action"));
        };
        if gates.len() >= MAX_GATES {
            return Err(EnvError::LimitExceeded {
                what: "gates per complex action",
                max: MAX_GATES,
            });
        }
        // A gate that is already on makes the action active without firing it: actions
        // respond to events, and adding an entry is not one.
        *gates_on += u32::from(gate.on());
        let g = gates.len();
        gates.push(gate);
        for (p, l) in inputs {
            self.index
                .entry((p.clone(), *l))
                .or_default()
                .push(Target::Gate(e, g));
            self.state.entry(p.clone()).or_default();
        }
        Ok(id)
    }

    /// Removes an entry (a complex action with all its gates); true if it existed.
    pub fn remove_action(&mut self, id: EntryId) -> bool {
        let before = self.entries.len();
        self.entries.retain(|e| e.id != id);
        if self.entries.len() == before {
            return false;
        }
        self.rebuild_index();
        true
    }

    fn rebuild_index(&mut self) {
        self.index.clear();
        for (e, entry) in self.entries.iter().enumerate() {
            match &entry.kind {
                Kind::Simple { param, level } => self
                    .index
                    .entry((param.clone(), *level))
                    .or_default()
                    .push(Target::Simple(e)),
                Kind::Complex { gates, .. } => {
                    for (g, gate) in gates.iter().enumerate() {
                        for (p, l) in &gate.inputs {
                            self.index
                                .entry((p.clone(), *l))
                                .or_default()
                                .push(Target::Gate(e, g));
                        }
                    }
                }
            }
        }
    }

    fn violated(&self, param: &Param) -> LevelMask {
        self.state.get(param).copied().unwrap_or_default()
    }

    /// Whether the complex action `id` is active (false for simple actions and unknown ids).
    pub fn is_active(&self, id: EntryId) -> bool {
        self.entries.iter().any(|e| e.id == id && e.active())
    }

    /// Moves gate `g` of entry `e` by one input; returns nothing, updates `gates_on`.
    fn bump(&mut self, e: usize, g: usize, up: bool) {
        let Some(Entry {
            kind: Kind::Complex { gates, gates_on },
            ..
        }) = self.entries.get_mut(e)
        else {
            return;
        };
        let Some(gate) = gates.get_mut(g) else {
            return;
        };
        let was = gate.on();
        gate.count = if up {
            gate.count.saturating_add(1)
        } else {
            gate.count.saturating_sub(1)
        };
        match (was, gate.on()) {
            (false, true) => *gates_on += 1,
            (true, false) => *gates_on = gates_on.saturating_sub(1),
            _ => {}
        }
    }

    /// Decides the actions an event triggers (see the module documentation for order and
    /// conflicts). Events of other devices decide nothing.
    pub fn handle_event(&mut self, ev: &EnvEvent) -> Decided {
        let mut fired: SmallVec<[(usize, Action); 4]> = SmallVec::new();
        if ev.device != self.device {
            return Decided::new();
        }
        let Some(old) = self.state.get(&ev.param).copied() else {
            return Decided::new(); // no entry uses this parameter
        };
        let new = old.minus(ev.cleared).union(ev.violated);
        if let Some(s) = self.state.get_mut(&ev.param) {
            *s = new;
        }
        // Simple actions: every violation of their level.
        for l in ev.violated.iter() {
            for t in self.index.get(&(ev.param.clone(), l)).into_iter().flatten() {
                if let Target::Simple(e) = *t
                    && let Some(entry) = self.entries.get(e)
                {
                    fired.push((e, entry.action));
                }
            }
        }
        // Complex actions: move the gates whose inputs changed, then compare activity.
        let mut touched: SmallVec<[(usize, bool); 8]> = SmallVec::new();
        let changes = new.minus(old).iter().map(|l| (l, true));
        let changes = changes.chain(old.minus(new).iter().map(|l| (l, false)));
        let changes: SmallVec<[(u16, bool); 8]> = changes.collect();
        for (l, up) in changes {
            let targets: SmallVec<[Target; 8]> = self
                .index
                .get(&(ev.param.clone(), l))
                .into_iter()
                .flatten()
                .copied()
                .collect();
            for t in targets {
                if let Target::Gate(e, g) = t {
                    if !touched.iter().any(|(x, _)| *x == e) {
                        let was = self.entries.get(e).is_some_and(Entry::active);
                        touched.push((e, was));
                    }
                    self.bump(e, g, up);
                }
            }
        }
        for (e, was) in touched {
            if let Some(entry) = self.entries.get(e)
                && !was
                && entry.active()
            {
                fired.push((e, entry.action));
            }
        }
        fired.sort_by_key(|(e, _)| *e);
        self.resolve(None, fired)
    }

    /// Switches the table to `device` and re-examines every entry against its violated levels
    /// in `env` (§3.3.1); returns the actions to perform for the new device.
    pub fn set_device(&mut self, device: Name, env: &EnvTable) -> Decided {
        self.device = device;
        let params: Vec<Param> = self.state.keys().cloned().collect();
        for p in params {
            let v = env.violated(&self.device, &p);
            self.state.insert(p, v);
        }
        let state = &self.state;
        let mut fired: SmallVec<[(usize, Action); 4]> = SmallVec::new();
        let mut has_udp = false;
        for (e, entry) in self.entries.iter_mut().enumerate() {
            has_udp |= matches!(entry.action, Action::Udp(_));
            match &mut entry.kind {
                Kind::Simple { param, level } => {
                    if state.get(param).is_some_and(|m| m.contains(*level)) {
                        fired.push((e, entry.action));
                    }
                }
                Kind::Complex { gates, gates_on } => {
                    for gate in gates.iter_mut() {
                        let n = gate
                            .inputs
                            .iter()
                            .filter(|(p, l)| state.get(p).is_some_and(|m| m.contains(*l)))
                            .count();
                        gate.count = u32::try_from(n).unwrap_or(u32::MAX);
                    }
                    let on = gates.iter().filter(|g| g.on()).count();
                    *gates_on = u32::try_from(on).unwrap_or(u32::MAX);
                    if *gates_on > 0 {
                        fired.push((e, entry.action));
                    }
                }
            }
        }
        let reset = has_udp.then_some(Action::Udp(UdpAction::Normal));
        self.resolve(reset, fired)
    }

    /// Turns entry positions into [`Fired`]s in table order, keeping only the last action per
    /// knob; `first` (a device change's reset) goes before all of them.
    fn resolve(&self, first: Option<Action>, fired: SmallVec<[(usize, Action); 4]>) -> Decided {
        let all = first.map(|a| (None, a)).into_iter().chain(
            fired
                .into_iter()
                .map(|(e, a)| (self.entries.get(e).map(|entry| entry.id), a)),
        );
        let all: SmallVec<[(Option<EntryId>, Action); 8]> = all.collect();
        let mut out = Decided::new();
        for (i, (entry, action)) in all.iter().enumerate() {
            let knob: Knob = action.knob();
            let overridden = all.iter().skip(i + 1).any(|(_, a)| a.knob() == knob);
            if !overridden {
                out.push(Fired {
                    entry: *entry,
                    action: *action,
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::actions::TcpAction;
    use super::super::tests::{dev, t, table3};
    use super::super::udp_gate::{GateEvent, SendVerdict, UdpActionGate};
    use super::super::{Level, Watermarks};
    use super::*;
    use crate::time::Time;

    const SLEEP: Action = Action::Udp(UdpAction::Sleep { max_sleep: None });
    const WAKEUP: Action = Action::Udp(UdpAction::Wakeup);

    /// Feeds one value and hands the events to the table; returns the decided actions.
    fn step(
        env: &mut EnvTable,
        table: &mut ActionTable,
        now: Time,
        d: &Name,
        p: &Param,
        v: f64,
    ) -> Vec<Action> {
        env.set_dev_param(now, d, p, v).unwrap();
        let mut out = Vec::new();
        while let Some(ev) = env.poll_event() {
            out.extend(table.handle_event(&ev).iter().map(|f| f.action));
        }
        out
    }

    #[test]
    fn test_udp_sleep_wakeup_over_the_table3_handoff_cycle() {
        // §5.2: set_simple_action(sd, SOL_UDP, "avail", 3, UDP_SLEEP, 0);
        //       set_simple_action(sd, SOL_UDP, "avail", 4, UDP_WAKEUP, 0);
        let (d, p) = (dev("wlan0"), Param::Availability);
        let mut env = EnvTable::new();
        env.set_dev_param_wms(&d, &p, table3()).unwrap();
        let mut table = ActionTable::new(d.clone());
        table.set_simple_action(p.clone(), 3, SLEEP).unwrap();
        table.set_simple_action(p.clone(), 4, WAKEUP).unwrap();
        let mut gate: UdpActionGate<u32> = UdpActionGate::new(8).unwrap();
        let mut now = t(0);
        let mut run = |gate: &mut UdpActionGate<u32>, v: f64| {
            now += std::time::Duration::from_millis(100);
            let acts = step(&mut env, &mut table, now, &d, &p, v);
            for a in &acts {
                if let Action::Udp(u) = a {
                    gate.apply(now, *u);
                }
            }
            (acts, now)
        };
        assert!(run(&mut gate, 0.0).0.is_empty());
        assert!(run(&mut gate, 25.0).0.is_empty());
        for cycle in 0..3u32 {
            let (acts, now) = run(&mut gate, 45.0);
            assert_eq!(acts, vec![SLEEP], "cycle {cycle}");
            assert_eq!(gate.offer(now, cycle), SendVerdict::Wait(cycle));
            let (acts, now) = run(&mut gate, 55.0);
            assert_eq!(acts, vec![WAKEUP]);
            assert_eq!(
                gate.poll_event(),
                Some(GateEvent::Woken { timed_out: false })
            );
            assert_eq!(gate.offer(now, cycle), SendVerdict::Send(cycle));
            assert!(run(&mut gate, 25.0).0.is_empty());
        }
    }

    /// Levels for the parameters of Table 1: LOW_1 = 0, LOW_2 = 1, HIGH_1 = 2, HIGH_2 = 3.
    fn four_levels() -> Watermarks {
        Watermarks::new(vec![
            Level::low(10.0),
            Level::low(20.0),
            Level::high(30.0),
            Level::high(40.0),
        ])
        .unwrap()
    }

    /// Table 1 / Figure 4: sleep if cost is high and loss is high, or if latency is high and
    /// bandwidth is low; discard when energy is low, normal when it is high again.
    fn table1(env: &mut EnvTable, d: &Name) -> (ActionTable, EntryId) {
        let params = [
            Param::Cost,
            Param::Loss,
            Param::Latency,
            Param::Bandwidth,
            Param::Energy,
        ];
        for p in &params {
            env.set_dev_param_wms(d, p, four_levels()).unwrap();
            env.set_dev_param(t(0), d, p, 25.0).unwrap();
        }
        let w = four_levels();
        let (low1, low2, high1, high2) = (
            w.low(1).unwrap(),
            w.low(2).unwrap(),
            w.high(1).unwrap(),
            w.high(2).unwrap(),
        );
        let mut table = ActionTable::new(d.clone());
        table
            .set_simple_action(Param::Energy, low1, UdpAction::Discard)
            .unwrap();
        table
            .set_simple_action(Param::Energy, high2, UdpAction::Normal)
            .unwrap();
        let sleep = UdpAction::Sleep { max_sleep: None };
        let id = table
            .set_complex_action(sleep, &[(Param::Cost, high1), (Param::Loss, high2)])
            .unwrap();
        let same = table
            .set_complex_action(sleep, &[(Param::Latency, high2), (Param::Bandwidth, low2)])
            .unwrap();
        assert_eq!(id, same, "gates of one action are ORed in one entry");
        assert_eq!(table.len(), 3);
        (table, id)
    }

    #[test]
    fn test_figure4_threshold_circuit_fires_and_rearms() {
        let d = dev("wlan0");
        let mut env = EnvTable::new();
        let (mut table, sleep) = table1(&mut env, &d);
        let mut s = |p: Param, v: f64, ms: u64| step(&mut env, &mut table, t(ms), &d, &p, v);
        // Cost becomes high: gate 1 has 1 of 2 inputs, below its threshold.
        assert!(s(Param::Cost, 35.0, 1).is_empty());
        // Loss high too (crossing HIGH_1 and HIGH_2): gate 1 on, OR at threshold: sleep.
        assert_eq!(s(Param::Loss, 45.0, 2), vec![SLEEP]);
        // Latency high and bandwidth low: gate 2 on as well, but the action is already active.
        assert!(s(Param::Latency, 45.0, 3).is_empty());
        assert!(s(Param::Bandwidth, 15.0, 4).is_empty());
        // Cost falls to LOW_2: HIGH_1 cleared, gate 1 off; gate 2 keeps the action active.
        assert!(s(Param::Cost, 15.0, 5).is_empty());
        // Bandwidth recovers past HIGH_1: LOW_2 cleared, gate 2 off; the action is re-armed.
        assert!(s(Param::Bandwidth, 35.0, 6).is_empty());
        // Cost high again with loss still high: sleep again ("take the action again").
        assert_eq!(s(Param::Cost, 35.0, 7), vec![SLEEP]);
        assert!(table.is_active(sleep));
        // Energy: simple actions.
        let mut s = |p: Param, v: f64, ms: u64| step(&mut env, &mut table, t(ms), &d, &p, v);
        assert_eq!(
            s(Param::Energy, 5.0, 8),
            vec![Action::Udp(UdpAction::Discard)]
        );
        assert_eq!(
            s(Param::Energy, 45.0, 9),
            vec![Action::Udp(UdpAction::Normal)]
        );
    }

    #[test]
    fn test_simple_action_fires_on_every_violation() {
        // §5.3: TCP_RST_TIMERS on a signal-quality high watermark with no low to clear it.
        let (d, p) = (dev("wlan0"), Param::SignalQuality);
        let mut env = EnvTable::new();
        env.set_dev_param_wms(&d, &p, Watermarks::new(vec![Level::high(14.0)]).unwrap())
            .unwrap();
        let mut table = ActionTable::new(d.clone());
        table
            .set_simple_action(p.clone(), 0, TcpAction::ResetTimers)
            .unwrap();
        let rst = Action::Tcp(TcpAction::ResetTimers);
        let mut fired = 0;
        for (i, v) in [13.0, 15.0, 13.0, 14.0, 13.0, 15.0].iter().enumerate() {
            fired += step(&mut env, &mut table, t(i as u64), &d, &p, *v)
                .iter()
                .filter(|a| **a == rst)
                .count();
        }
        assert_eq!(fired, 3);
    }

    #[test]
    fn test_order_is_table_order_and_later_entry_wins_a_conflict() {
        let (d, p) = (dev("wlan0"), Param::Availability);
        let mut env = EnvTable::new();
        env.set_dev_param_wms(&d, &p, table3()).unwrap();
        env.set_dev_param(t(0), &d, &p, 25.0).unwrap();
        let mut table = ActionTable::new(d.clone());
        let dupacks = table
            .set_simple_action(p.clone(), 3, TcpAction::DupAcks(3))
            .unwrap();
        let discard = table
            .set_simple_action(p.clone(), 3, UdpAction::Discard)
            .unwrap();
        let rst = table
            .set_simple_action(p.clone(), 3, TcpAction::ResetTimers)
            .unwrap();
        let sleep = table.set_simple_action(p.clone(), 3, SLEEP).unwrap();
        let more = table
            .set_simple_action(p.clone(), 3, TcpAction::DupAcks(5))
            .unwrap();
        env.set_dev_param(t(1), &d, &p, 45.0).unwrap();
        let ev = env.poll_event().unwrap();
        let got: Vec<Fired> = table.handle_event(&ev).into_iter().collect();
        let _ = (dupacks, discard);
        assert_eq!(
            got,
            vec![
                Fired {
                    entry: Some(rst),
                    action: Action::Tcp(TcpAction::ResetTimers)
                },
                Fired {
                    entry: Some(sleep),
                    action: SLEEP
                },
                Fired {
                    entry: Some(more),
                    action: Action::Tcp(TcpAction::DupAcks(5))
                },
            ]
        );
        // After removing the later sleep, the earlier discard decides the UDP mode.
        assert!(table.remove_action(sleep));
        assert!(!table.remove_action(sleep));
        env.set_dev_param(t(2), &d, &p, 25.0).unwrap();
        env.set_dev_param(t(3), &d, &p, 45.0).unwrap();
        let mut acts = Vec::new();
        while let Some(ev) = env.poll_event() {
            acts.extend(table.handle_event(&ev).into_iter().map(|f| f.action));
        }
        assert!(acts.contains(&Action::Udp(UdpAction::Discard)));
        assert!(!acts.contains(&SLEEP));
    }

    #[test]
    fn test_device_change_reexamines_every_entry() {
        let p = Param::Availability;
        let (wlan, cdpd) = (dev("wlan0"), dev("cdpd0"));
        let mut env = EnvTable::new();
        for (d, v) in [(&wlan, 25.0), (&cdpd, 25.0)] {
            env.set_dev_param_wms(d, &p, table3()).unwrap();
            env.set_dev_param(t(0), d, &p, 0.0).unwrap();
            env.set_dev_param(t(1), d, &p, v).unwrap();
        }
        // cdpd0 is about to hand off.
        env.set_dev_param(t(2), &cdpd, &p, 45.0).unwrap();
        while env.poll_event().is_some() {}
        let mut table = ActionTable::new(wlan.clone());
        table.set_simple_action(p.clone(), 3, SLEEP).unwrap();
        table.set_simple_action(p.clone(), 4, WAKEUP).unwrap();
        // Events of a device the socket does not use decide nothing.
        env.set_dev_param(t(3), &cdpd, &p, 55.0).unwrap();
        env.set_dev_param(t(4), &cdpd, &p, 25.0).unwrap();
        env.set_dev_param(t(5), &cdpd, &p, 45.0).unwrap();
        while let Some(ev) = env.poll_event() {
            assert!(table.handle_event(&ev).is_empty());
        }
        // Moving to cdpd0 in the middle of its handoff: reset to normal, then sleep; the
        // reset is overridden by the later sleep.
        let got = table.set_device(cdpd.clone(), &env);
        assert_eq!(
            got.iter().map(|f| f.action).collect::<Vec<_>>(),
            vec![SLEEP]
        );
        // Back to wlan0, where nothing is violated at level 3 or 4: normal.
        let got = table.set_device(wlan.clone(), &env);
        assert_eq!(
            got.as_slice(),
            &[Fired {
                entry: None,
                action: Action::Udp(UdpAction::Normal)
            }]
        );
        assert_eq!(table.device(), &wlan);
    }

    #[test]
    fn test_device_change_recomputes_gates() {
        let d = dev("wlan0");
        let other = dev("ppp0");
        let mut env = EnvTable::new();
        let (mut table, sleep) = table1(&mut env, &d);
        for p in [Param::Cost, Param::Loss] {
            env.set_dev_param_wms(&other, &p, four_levels()).unwrap();
            env.set_dev_param(t(0), &other, &p, 25.0).unwrap();
            env.set_dev_param(t(1), &other, &p, 45.0).unwrap();
        }
        let got = table.set_device(other.clone(), &env);
        assert!(table.is_active(sleep));
        assert_eq!(
            got.iter().map(|f| f.entry).collect::<Vec<_>>(),
            vec![Some(sleep)]
        );
        // Clearing cost on the new device re-arms it.
        env.set_dev_param(t(2), &other, &Param::Cost, 15.0).unwrap();
        while let Some(ev) = env.poll_event() {
            assert!(table.handle_event(&ev).is_empty());
        }
        assert!(!table.is_active(sleep));
    }

    #[test]
    fn test_invalid_gates_are_refused() {
        let mut table = ActionTable::new(dev("wlan0"));
        assert!(table.set_complex_action(SLEEP, &[]).is_err());
        let twice = [(Param::Cost, 1), (Param::Cost, 1)];
        assert!(table.set_complex_action(SLEEP, &twice).is_err());
        assert!(
            table
                .add_gate(SLEEP, 3, &[(Param::Cost, 1), (Param::Loss, 1)])
                .is_err()
        );
        assert!(table.set_simple_action(Param::Cost, 128, SLEEP).is_err());
        // A 2-of-3 threshold gate.
        let k = table.add_gate(
            SLEEP,
            2,
            &[(Param::Cost, 0), (Param::Loss, 0), (Param::Energy, 0)],
        );
        assert!(k.is_ok());
    }
}
