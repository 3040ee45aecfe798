//! Tests of the CM as a whole: API behaviour (`api.rs`), feedback delayed by the host
//! (`host_feedback.rs`), the probe protocol end to end
//! (`probe_e2e.rs`), the pacing invariant as a property test (`prop.rs`) and TCP/CM over a
//! small two-host pipe (`tcp_pair.rs`), and the window of ACK-fed flows with TCP/CM's
//! `cm_update` bookkeeping (`window.rs`).

mod api;
mod host_feedback;
mod probe_e2e;
mod prop;
mod tcp_pair;
mod window;

use super::*;
use crate::time::Time;
use std::time::Duration;

const MTU: u64 = 1000;
const DEST: PeerAddr = PeerAddr(7);

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn config() -> CmConfig {
    CmConfig {
        mtu_bytes: MTU,
        burst_bytes: 2 * MTU,
        ..CmConfig::default()
    }
}

fn cm() -> CongestionManager {
    CongestionManager::new(config())
}

fn rate(cm: &CongestionManager, flow: FlowId) -> f64 {
    cm.query(flow).expect("open").macroflow_rate_bytes_per_s
}

fn drain(cm: &mut CongestionManager) -> Vec<CmEvent> {
    std::iter::from_fn(|| cm.poll_event()).collect()
}

/// Runs every CM timer up to `until` (inclusive), collecting events.
fn run_until(cm: &mut CongestionManager, until: Time) -> Vec<(Time, CmEvent)> {
    let mut out = Vec::new();
    while let Some(t) = cm.poll_timeout() {
        if t > until {
            break;
        }
        cm.handle_timeout(t);
        out.extend(drain(cm).into_iter().map(|e| (t, e)));
    }
    out
}
