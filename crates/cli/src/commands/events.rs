//! `adaptnet events`: environment events of this host's interfaces as they happen (papers/001;
//! the runtime's [`adaptnet_runtime::env::EnvMonitor`]).
//!
//! Every followed interface gets Table 3's availability levels (low 10, high 20; the monitor's
//! default) and the bandwidth levels of [`bandwidth_levels`]; signal quality, where
//! `/proc/net/wireless` has the interface, gets [`signal_levels`]. One line per event: text, or
//! a JSON object with `--json`.

use adaptnet_core::env::{Delivery, Level, LevelMask, Param, Watermarks};
use adaptnet_runtime::env::linux::{LinuxSource, SourcePaths};
use adaptnet_runtime::env::{EnvConfig, EnvMonitor};
use anyhow::{Context, Result, bail};
use std::process::ExitCode;
use std::time::Duration;

/// Bandwidth levels (bytes/s): a low and a high level around 10 kB/s, 1 MB/s and 100 MB/s,
/// each pair 2× apart so a rate hovering at one value does not flap.
pub fn bandwidth_levels() -> Result<Watermarks> {
    Ok(Watermarks::new(vec![
        Level::low(5e3),
        Level::high(1e4),
        Level::low(5e5),
        Level::high(1e6),
        Level::low(5e7),
        Level::high(1e8),
    ])?)
}

/// Signal-quality levels (`/proc/net/wireless` link quality): low 20 / high 30 ("poor"),
/// low 40 / high 50 ("good").
pub fn signal_levels() -> Result<Watermarks> {
    Ok(Watermarks::new(vec![
        Level::low(20.0),
        Level::high(30.0),
        Level::low(40.0),
        Level::high(50.0),
    ])?)
}

/// Runs until `time` has passed (or forever), printing events.
pub fn run(
    interface: Option<String>,
    period_ms: u64,
    time: Option<Duration>,
    json: bool,
) -> Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    rt.block_on(watch(interface, period_ms, time, json))
}

async fn watch(
    interface: Option<String>,
    period_ms: u64,
    time: Option<Duration>,
    json: bool,
) -> Result<ExitCode> {
    let interfaces = match interface {
        Some(i) => vec![i],
        None => LinuxSource::new(SourcePaths::default(), Vec::new())
            .interfaces()
            .context("listing /sys/class/net")?,
    };
    if interfaces.is_empty() {
        bail!("no interface to watch");
    }
    let monitor = EnvMonitor::start(EnvConfig {
        interfaces: interfaces.clone(),
        period: Duration::from_millis(period_ms),
        ..EnvConfig::default()
    })?;
    let mut stream = None;
    for dev in &interfaces {
        monitor.set_watermarks(dev, Param::Bandwidth, bandwidth_levels()?)?;
        monitor.set_watermarks(dev, Param::SignalQuality, signal_levels()?)?;
        for p in [Param::Availability, Param::Bandwidth, Param::SignalQuality] {
            match &stream {
                None => stream = Some(monitor.subscribe(dev, p, LevelMask::ALL)?),
                Some(s) => s.also(dev, p, LevelMask::ALL)?,
            }
        }
    }
    let Some(mut stream) = stream else {
        bail!("no interface to watch");
    };
    eprintln!(
        "watching {} every {period_ms} ms (availability: low 10 / high 20, Table 3)",
        interfaces.join(", ")
    );
    let deadline = time.map(|d| tokio::time::Instant::now() + d);
    loop {
        let next = match deadline {
            Some(end) => match tokio::time::timeout_at(end, stream.recv()).await {
                Ok(d) => d,
                Err(_) => break,
            },
            None => stream.recv().await,
        };
        let Some(d) = next else { break };
        println!("{}", render(&d, json));
    }
    let s = monitor.stats();
    eprintln!(
        "{} polls, {} read errors, {} events lost",
        s.polls,
        s.read_errors,
        stream.lost_total()
    );
    Ok(ExitCode::SUCCESS)
}

fn levels(m: LevelMask) -> Vec<u16> {
    m.iter().collect()
}

/// One line for a delivery.
fn render(d: &Delivery, json: bool) -> String {
    let e = &d.event;
    if json {
        serde_json::json!({
            "t_s": e.at.as_secs_f64(),
            "device": e.device.as_str(),
            "param": e.param.name(),
            "value": e.value,
            "violated": levels(e.violated),
            "cleared": levels(e.cleared),
            "lost_before": d.lost_before,
        })
        .to_string()
    } else {
        let lost = if d.lost_before > 0 {
            format!(" ({} earlier events lost)", d.lost_before)
        } else {
            String::new()
        };
        format!(
            "{:>9.3} s  {} {} = {}  violated {:?} cleared {:?}{lost}",
            e.at.as_secs_f64(),
            e.device,
            e.param,
            e.value,
            levels(e.violated),
            levels(e.cleared)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use adaptnet_core::Time;
    use adaptnet_core::env::{EnvEvent, Name};

    #[test]
    fn json_line_names_device_param_and_levels() {
        let d = Delivery {
            event: EnvEvent {
                at: Time::from_millis(1500),
                device: Name::new("eth0").expect("name"),
                param: Param::Availability,
                value: 0.0,
                violated: LevelMask::of(&[0]),
                cleared: LevelMask::of(&[1]),
                highs: LevelMask::of(&[1]),
            },
            lost_before: 2,
        };
        let v: serde_json::Value = serde_json::from_str(&render(&d, true)).expect("json");
        assert_eq!(v["device"], "eth0");
        assert_eq!(v["param"], "availability");
        assert_eq!(v["violated"], serde_json::json!([0]));
        assert_eq!(v["cleared"], serde_json::json!([1]));
        assert_eq!(v["lost_before"], 2);
        assert_eq!(v["t_s"], 1.5);
        assert!(render(&d, false).contains("2 earlier events lost"));
        assert!(bandwidth_levels().is_ok() && signal_levels().is_ok());
    }
}
