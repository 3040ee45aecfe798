//! The link's schedule, one CSV line per packet: when it was offered, its size, and what the
//! model did with it — delivered at a model time (and written at an actual time), or dropped
//! and why. Replaying the offered times and sizes through the simulator's link model with the
//! same configuration and seed gives the same model times (a test checks this), so a run can
//! be set beside a simulation packet by packet.

use crate::LinkEmuError;
use adaptnet_core::Time;
use std::io::Write;

/// CSV header.
pub const HEADER: &str = "direction,id,offered_ns,bytes,fate,model_ns,actual_ns";

/// A packet's fate in the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fate {
    /// Delivered: the model's arrival time and when it was written.
    Delivered { model: Time, actual: Time },
    /// Dropped by the model (queue, random, outage) or the emulator (overload), noticed at
    /// this time.
    Dropped { why: &'static str, at: Time },
}

/// The log writer.
pub(crate) struct ScheduleLog {
    out: std::io::BufWriter<std::fs::File>,
    path: String,
}

impl ScheduleLog {
    pub(crate) fn create(path: &std::path::Path) -> Result<ScheduleLog, LinkEmuError> {
        let err = |source| LinkEmuError::File {
            path: path.display().to_string(),
            source,
        };
        let file = std::fs::File::create(path).map_err(err)?;
        let mut out = std::io::BufWriter::with_capacity(1 << 16, file);
        writeln!(out, "{HEADER}").map_err(err)?;
        Ok(ScheduleLog {
            out,
            path: path.display().to_string(),
        })
    }

    pub(crate) fn write(
        &mut self,
        direction: &str,
        id: u64,
        offered: Time,
        bytes: usize,
        fate: Fate,
    ) -> Result<(), LinkEmuError> {
        let r = match fate {
            Fate::Delivered { model, actual } => writeln!(
                self.out,
                "{direction},{id},{},{bytes},delivered,{},{}",
                offered.as_nanos(),
                model.as_nanos(),
                actual.as_nanos()
            ),
            Fate::Dropped { why, at } => writeln!(
                self.out,
                "{direction},{id},{},{bytes},{why},{},",
                offered.as_nanos(),
                at.as_nanos()
            ),
        };
        r.map_err(|source| LinkEmuError::File {
            path: self.path.clone(),
            source,
        })
    }

    pub(crate) fn flush(&mut self) -> Result<(), LinkEmuError> {
        self.out.flush().map_err(|source| LinkEmuError::File {
            path: self.path.clone(),
            source,
        })
    }
}
