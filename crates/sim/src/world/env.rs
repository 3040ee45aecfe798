//! Radio blackouts on a world's links, set by a scenario's environment (papers/001 §5).

use super::*;
use crate::link::Outage;

impl World {
    /// Sets the blackouts (sorted, not overlapping) of both directions of duplex link `name`:
    /// packets leaving a transmitter during one are lost (see [`Link::set_blackouts`]).
    pub fn set_blackouts(&mut self, name: &str, blackouts: &[Outage]) -> Result<(), WorldError> {
        let mut found = false;
        for slot in self.links.iter_mut().filter(|l| l.duplex == name) {
            slot.link.set_blackouts(blackouts.to_vec());
            found = true;
        }
        if found {
            Ok(())
        } else {
            Err(WorldError::UnknownLink(name.to_string()))
        }
    }
}
