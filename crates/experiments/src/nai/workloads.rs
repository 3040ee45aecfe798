//! Table 2's workloads (`papers/000_97f7680fd99dd928.txt` §5.4) as message schedules.
//!
//! Each class sends `n` messages every `delay_s`. The seed sets where each class starts within
//! its first interval (uniform in `[0, delay)`), so trials differ by phase the way the paper's
//! five trials differed by timing noise; the random workload draws priority, size and timer
//! uniformly (§5.4: "distributed uniformly within the ranges indicated").

use super::params::{ClassParams, WorkloadParams};
use crate::ExpError;
use crate::rng::SplitMix;
use adaptnet_core::Time;
use adaptnet_core::nai::Priority;
use adaptnet_sim::agents::nai_app::MessageSpec;
use std::time::Duration;

/// The level of a named priority in a workload with `levels` levels (0 is the highest).
pub fn level(name: &str, levels: u8) -> Result<Priority, ExpError> {
    match (name, levels) {
        ("high", _) => Ok(Priority(0)),
        ("low", l) if l >= 2 => Ok(Priority(l - 1)),
        ("medium", l) if l >= 3 => Ok(Priority(1)),
        _ => Err(ExpError::Input(format!(
            "priority {name:?} is not one of high/medium/low for a workload with {levels} levels"
        ))),
    }
}

/// Display name of a level in a workload with `levels` levels.
pub fn level_name(p: Priority, levels: u8) -> &'static str {
    match p.0 {
        0 => "high",
        l if l + 1 == levels => "low",
        _ => "medium",
    }
}

fn secs(s: f64, field: &str) -> Result<Duration, ExpError> {
    if s.is_finite() && (0.0..=1e6).contains(&s) {
        Ok(Duration::from_secs_f64(s))
    } else {
        Err(ExpError::Input(format!(
            "field {field}: must be a number of seconds in [0, 1e6], got {s}"
        )))
    }
}

fn class(c: &ClassParams, levels: u8, rng: &mut SplitMix) -> Result<Vec<MessageSpec>, ExpError> {
    let priority = level(&c.priority, levels)?;
    let delay = secs(c.delay_s, "delay_s")?;
    let timer = secs(c.timer_s, "timer_s")?;
    let offset = delay.mul_f64(rng.unit());
    Ok((0..c.n)
        .map(|i| MessageSpec {
            at: Time::ZERO + offset + delay * i,
            size_bytes: c.size_bytes,
            priority,
            timer: Some(timer),
        })
        .collect())
}

/// Most messages a workload may define (bounds the memory of a bad parameter file).
pub const MAX_MESSAGES: u64 = 1_000_000;

/// The messages of workload `w` for trial `seed`, sorted by submission time.
pub fn messages(w: &WorkloadParams, seed: u64) -> Result<Vec<MessageSpec>, ExpError> {
    let n: u64 = w.classes.iter().map(|c| u64::from(c.n)).sum::<u64>()
        + w.random.as_ref().map_or(0, |r| u64::from(r.n));
    if n > MAX_MESSAGES {
        return Err(ExpError::Input(format!(
            "workload {}: {n} messages, more than the limit of {MAX_MESSAGES}",
            w.name
        )));
    }
    let mut rng = SplitMix::new(seed, 0x776f_726b);
    let mut out = Vec::new();
    for c in &w.classes {
        out.extend(class(c, w.levels, &mut rng)?);
    }
    if let Some(r) = &w.random {
        let delay = secs(r.delay_s, "random.delay_s")?;
        let offset = delay.mul_f64(rng.unit());
        for i in 0..r.n {
            let p = rng.int(0, u64::from(w.levels.max(1) - 1)) as u8;
            let size = rng.int(r.size_min_bytes.max(1), r.size_max_bytes.max(1));
            let timer = rng.range(r.timer_min_s, r.timer_max_s);
            out.push(MessageSpec {
                at: Time::ZERO + offset + delay * i,
                size_bytes: size,
                priority: Priority(p),
                timer: Some(secs(timer, "random.timer_*_s")?),
            });
        }
    }
    out.sort_by_key(|m| m.at);
    Ok(out)
}

/// The offered load of a workload, in bytes per second over its span.
pub fn offered_bytes_per_s(msgs: &[MessageSpec]) -> f64 {
    let span = msgs.last().map_or(0.0, |m| m.at.as_secs_f64()).max(1e-9);
    msgs.iter().map(|m| m.size_bytes as f64).sum::<f64>() / span
}
