//! `adaptnet monitor`: the daemon's macroflows, rates, clients, estimators and counters, live
//! (like `ss`/`ip monitor`); `--json` prints one status object per line for scripts.

use adaptnet_daemon::DaemonClient;
use anyhow::{Context, Result};
use serde_json::Value;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// What `adaptnet monitor` was given.
pub struct MonitorArgs {
    /// The daemon's socket (default: `$ADAPTNET_DAEMON_SOCKET` or the standard path).
    pub socket: Option<PathBuf>,
    /// Refresh period.
    pub interval: Duration,
    /// Snapshots to print (0: until interrupted).
    pub count: u64,
    /// Interfaces whose estimates to subscribe to (shown as they arrive).
    pub ifaces: Vec<String>,
    /// One JSON object per line.
    pub json: bool,
}

fn fmt_rate(v: &Value) -> String {
    v.as_f64()
        .map_or_else(|| "-".into(), |r| format!("{:.1} kB/s", r / 1e3))
}

fn fmt_ms(v: &Value) -> String {
    v.as_f64()
        .map_or_else(|| "-".into(), |r| format!("{r:.2} ms"))
}

fn render(doc: &Value) -> String {
    let mut s = String::new();
    let st = &doc["stats"];
    s += &format!(
        "t={:.1}s clients={} requests={} errors={} events delivered={} dropped={} flows reclaimed={}\n",
        doc["now_s"].as_f64().unwrap_or(0.0),
        doc["clients"].as_array().map_or(0, Vec::len),
        st["requests"],
        st["errors"],
        st["events_delivered"],
        st["events_dropped"],
        st["flows_reclaimed"],
    );
    let cm = &doc["cm"];
    s += &format!(
        "cm: granted={} B decreases={} restarts={} aging halvings={} probes={} responses={}\n",
        cm["granted_bytes"],
        cm["decreases"],
        cm["restarts"],
        cm["aging_halvings"],
        cm["probes_sent"],
        cm["responses_accepted"]
    );
    for mf in doc["macroflows"].as_array().into_iter().flatten() {
        s += &format!(
            "macroflow {:>3}  rate {:>14}  srtt {:>10}  min_rtt {:>10}{}\n",
            mf["id"],
            fmt_rate(&mf["rate_bytes_per_s"]),
            fmt_ms(&mf["srtt_ms"]),
            fmt_ms(&mf["min_rtt_ms"]),
            if mf["aging"].as_bool() == Some(true) {
                "  aging"
            } else {
                ""
            }
        );
        for f in mf["flows"].as_array().into_iter().flatten() {
            s += &format!(
                "  flow {:>5}  client {:>4}  share {:>14}  loss {}\n",
                f["flow"],
                f["client"],
                fmt_rate(&f["rate_bytes_per_s"]),
                f["loss"].as_f64().map_or("-".into(), |l| format!("{l:.3}"))
            );
        }
    }
    for c in doc["clients"].as_array().into_iter().flatten() {
        s += &format!(
            "client {:>4}  uid {:>5}  pid {:>7}  {:<16} flows {:>3}  subs {:>3}  events {} lost {}\n",
            c["id"],
            c["uid"],
            c["pid"],
            c["name"].as_str().unwrap_or(""),
            c["flows"],
            c["subscriptions"],
            c["delivered"],
            c["lost"]
        );
    }
    for e in doc["estimators"].as_array().into_iter().flatten() {
        s += &format!(
            "iface {:<12} {:>14}  counter {} B  subscribers {}\n",
            e["iface"].as_str().unwrap_or(""),
            fmt_rate(&e["bytes_per_s"]),
            e["total_bytes"]
                .as_u64()
                .map_or_else(|| "-".to_string(), |b| b.to_string()),
            e["subscribers"]
        );
    }
    s
}

/// Polls the daemon's status and prints it.
pub fn run(args: &MonitorArgs) -> Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    rt.block_on(async {
        let path = args
            .socket
            .clone()
            .unwrap_or_else(adaptnet_daemon::socket_path);
        let c = DaemonClient::connect(&path, "adaptnet monitor").await?;
        for iface in &args.ifaces {
            c.subscribe_estimator(iface)
                .await
                .with_context(|| format!("subscribing to {iface}"))?;
        }
        let mut n = 0u64;
        loop {
            let json = c.status().await?;
            let doc: Value = serde_json::from_str(&json).context("status is not JSON")?;
            if args.json {
                println!("{json}");
            } else {
                print!("{}", render(&doc));
                while let Some(ev) = c.try_next_event() {
                    println!("event: {ev:?}");
                }
                println!();
            }
            n += 1;
            if args.count > 0 && n >= args.count {
                break;
            }
            tokio::time::sleep(args.interval).await;
        }
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(ExitCode::SUCCESS)
}
