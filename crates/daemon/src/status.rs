//! The daemon's state as JSON, for `adaptnet monitor` (and scripts, with `--json`).
//!
//! ```text
//! { "now_s": f64, "stats": {...}, "cm": {...CmStats}, "cm_receiver": {...ReceiverStats},
//!   "clients": [{"id", "uid", "pid", "name", "flows", "subscriptions", "lost", "delivered"}],
//!   "macroflows": [{"id", "rate_bytes_per_s", "srtt_ms", "min_rtt_ms", "aging",
//!                   "flows": [{"flow", "client", "rate_bytes_per_s", "loss"}]}],
//!   "estimators": [{"iface", "bytes_per_s", "total_bytes", "subscribers"}],
//!   "env": {"events_lost"} }
//! ```
//! The snapshot must fit one frame; lists are cut (and `"truncated": true` set) if not.

use crate::engine::Engine;
use adaptnet_core::Time;
use adaptnet_core::cm::{FlowId, MacroflowId};
use adaptnet_core::daemon::MAX_FRAME_LEN;
use serde_json::{Value, json};
use std::collections::BTreeMap;

fn ms(d: Option<std::time::Duration>) -> Value {
    d.map_or(Value::Null, |d| json!(d.as_secs_f64() * 1e3))
}

/// The snapshot, at most one frame long.
pub(crate) fn snapshot_json(engine: &Engine, now: Time) -> Result<String, String> {
    let mut flow_client: BTreeMap<FlowId, u32> = BTreeMap::new();
    let clients: Vec<Value> = engine
        .clients()
        .map(|(id, caller, name, flows, subs, lost, delivered)| {
            for f in flows {
                flow_client.insert(*f, id);
            }
            json!({
                "id": id, "uid": caller.uid, "pid": caller.pid, "name": name,
                "flows": flows.len(), "subscriptions": subs, "lost": lost,
                "delivered": delivered,
            })
        })
        .collect();
    let cm = engine.cm();
    let mut by_mf: BTreeMap<MacroflowId, Vec<Value>> = BTreeMap::new();
    for (flow, client) in &flow_client {
        let Ok(mf) = cm.getmacroflow(*flow) else {
            continue;
        };
        let q = cm.query(*flow).ok();
        by_mf.entry(mf).or_default().push(json!({
            "flow": flow.0, "client": client,
            "rate_bytes_per_s": q.and_then(|q| q.rate_bytes_per_s),
            "loss": q.and_then(|q| q.loss_rate),
        }));
    }
    let macroflows: Vec<Value> = by_mf
        .into_iter()
        .filter_map(|(id, flows)| {
            let info = cm.macroflow_info(id).ok()?;
            Some(json!({
                "id": id.0, "rate_bytes_per_s": info.rate_bytes_per_s,
                "srtt_ms": ms(info.srtt), "min_rtt_ms": ms(info.min_rtt),
                "aging": info.aging, "flows": flows,
            }))
        })
        .collect();
    let estimators: Vec<Value> = engine
        .estimates()
        .map(|(iface, e)| {
            json!({
                "iface": iface, "bytes_per_s": e.rate(), "total_bytes": e.total_bytes(),
                "subscribers": e.subscribers.len(),
            })
        })
        .collect();
    let mut doc = json!({
        "now_s": now.as_secs_f64(),
        "stats": engine.stats(),
        "cm": cm.stats(),
        "cm_receiver": engine.receiver().stats(),
        "clients": clients,
        "macroflows": macroflows,
        "estimators": estimators,
        "env": { "events_lost": engine.env().events_lost() },
    });
    let budget = MAX_FRAME_LEN - 64;
    for _ in 0..64 {
        let text = serde_json::to_string(&doc).map_err(|e| e.to_string())?;
        if text.len() <= budget {
            return Ok(text);
        }
        // Halve the longest lists until it fits.
        for key in ["clients", "macroflows", "estimators"] {
            if let Some(Value::Array(a)) = doc.get_mut(key) {
                a.truncate(a.len() / 2);
            }
        }
        doc["truncated"] = json!(true);
    }
    Err("status does not fit a frame".into())
}
