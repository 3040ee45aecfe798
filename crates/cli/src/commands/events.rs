//! `adaptnet events`: environment events of this host's interfaces as they happen (papers/001;
//! the runtime's [`adaptnet_runtime::env::EnvMonitor`]).
//!
//! Every followed interface gets Table 3's availability levels (low 10, high 20; the monitor's
//! default) and the bandwidth levels of [`bandwidth_levels`]; signal quality, where
//! `/proc/net/wireless` has the interface, gets [`signal_levels`]. One line per event: text, or
//! a JSON object with `--json`.
//!
//! `--subscribe dev:param[:levels][,…]` is the paper's `request_event` for a subset (§3.2):
//! only those devices are watched, and only events of those parameters that violate one of the
//! given levels are printed (coarser watermarks, §3: "an application may be interested only in
//! level A and level D"). Levels are indices into the levels above, joined by `+`
//! (`wlan0:signal:1+3`); without them every level counts. See [`parse_subscriptions`].

use adaptnet_core::env::{Delivery, Level, LevelMask, Param, Watermarks};
use adaptnet_runtime::env::linux::{LinuxSource, SourcePaths};
use adaptnet_runtime::env::{EnvMonitor, EnvOptions};
use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

/// The parameters this command has a source and levels for, with their levels described for
/// error messages and `--help`.
pub const SUBSCRIBABLE: [(Param, &str); 3] = [
    (
        Param::Availability,
        "availability (avail): 0 low 10 unavailable, 1 high 20 available",
    ),
    (
        Param::Bandwidth,
        "bandwidth (bw, bytes/s): 0 low 5e3, 1 high 1e4, 2 low 5e5, 3 high 1e6, 4 low 5e7, 5 high 1e8",
    ),
    (
        Param::SignalQuality,
        "signal (sq): 0 low 20, 1 high 30, 2 low 40, 3 high 50",
    ),
];

/// One `--subscribe` entry: events of `param` on `device` that violate one of `levels`.
#[derive(Clone, Debug, PartialEq)]
pub struct Subscription {
    /// The interface.
    pub device: String,
    /// The parameter.
    pub param: Param,
    /// The levels asked for ([`LevelMask::ALL`] when none were named).
    pub levels: LevelMask,
}

/// The number of levels this command gives `param`, if it has a source for it.
fn level_count(param: &Param) -> Result<usize> {
    Ok(match param {
        Param::Availability => 2,
        Param::Bandwidth => bandwidth_levels()?.levels().len(),
        Param::SignalQuality => signal_levels()?.levels().len(),
        other => bail!(
            "parameter {other:?} has no source in `adaptnet events`; use one of: {}",
            SUBSCRIBABLE.map(|(_, d)| d).join("; ")
        ),
    })
}

/// Parses `dev:param[:l+l…][,dev:param…]`. The same device and parameter named twice get the
/// union of their levels.
pub fn parse_subscriptions(spec: &str) -> Result<Vec<Subscription>> {
    let mut out: Vec<Subscription> = Vec::new();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let mut parts = item.split(':');
        let (Some(device), Some(param)) = (parts.next(), parts.next()) else {
            bail!(
                "--subscribe {item:?}: expected DEVICE:PARAM[:LEVELS], e.g. eth0:availability or wlan0:signal:1+3"
            );
        };
        let levels_spec = parts.next();
        if parts.next().is_some() {
            bail!("--subscribe {item:?}: too many ':'; expected DEVICE:PARAM[:LEVELS]");
        }
        if device.is_empty() {
            bail!("--subscribe {item:?}: empty device name");
        }
        adaptnet_core::env::Name::new(device)
            .with_context(|| format!("--subscribe {item:?}: device"))?;
        let param =
            Param::from_name(param).with_context(|| format!("--subscribe {item:?}: parameter"))?;
        let count = level_count(&param).with_context(|| format!("--subscribe {item:?}"))?;
        let levels = match levels_spec {
            None => LevelMask::ALL,
            Some(l) => {
                let mut idx = Vec::new();
                for n in l.split('+') {
                    let i: u16 = n.trim().parse().with_context(|| {
                        format!("--subscribe {item:?}: level {n:?} is not a level index (0, 1, …; join with '+')")
                    })?;
                    if usize::from(i) >= count {
                        bail!(
                            "--subscribe {item:?}: {} has levels 0..={} ({})",
                            param,
                            count - 1,
                            SUBSCRIBABLE
                                .iter()
                                .find(|(p, _)| *p == param)
                                .map_or("", |(_, d)| d)
                        );
                    }
                    idx.push(i);
                }
                LevelMask::of(&idx)
            }
        };
        match out
            .iter_mut()
            .find(|s| s.device == device && s.param == param)
        {
            Some(s) => {
                s.levels = LevelMask::of(&s.levels.iter().chain(levels.iter()).collect::<Vec<_>>())
            }
            None => out.push(Subscription {
                device: device.to_string(),
                param,
                levels,
            }),
        }
    }
    if out.is_empty() {
        bail!("--subscribe is empty; expected DEVICE:PARAM[:LEVELS][,…]");
    }
    Ok(out)
}

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

/// Runs until `time` has passed (or forever), printing events: of every followed interface's
/// parameters, or only those of `subscribe` (`dev:param[:levels],…`).
pub fn run(
    interface: Option<String>,
    subscribe: Option<&str>,
    period_ms: u64,
    time: Option<Duration>,
    json: bool,
) -> Result<ExitCode> {
    let subs = subscribe.map(parse_subscriptions).transpose()?;
    if interface.is_some() && subs.is_some() {
        bail!("--interface and --subscribe together: name the devices in --subscribe only");
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    rt.block_on(watch(interface, subs, period_ms, time, json))
}

async fn watch(
    interface: Option<String>,
    subs: Option<Vec<Subscription>>,
    period_ms: u64,
    time: Option<Duration>,
    json: bool,
) -> Result<ExitCode> {
    let interfaces = match (&interface, &subs) {
        (Some(i), _) => vec![i.clone()],
        (None, Some(subs)) => {
            let set: BTreeMap<&str, ()> = subs.iter().map(|s| (s.device.as_str(), ())).collect();
            set.into_keys().map(str::to_string).collect()
        }
        (None, None) => LinuxSource::new(SourcePaths::default(), Vec::new())
            .interfaces()
            .context("listing /sys/class/net")?,
    };
    let subs = subs.unwrap_or_else(|| {
        interfaces
            .iter()
            .flat_map(|d| {
                [Param::Availability, Param::Bandwidth, Param::SignalQuality].map(|p| {
                    Subscription {
                        device: d.clone(),
                        param: p,
                        levels: LevelMask::ALL,
                    }
                })
            })
            .collect()
    });
    if interfaces.is_empty() {
        bail!("no interface to watch");
    }
    let monitor = EnvMonitor::start(EnvOptions {
        interfaces: interfaces.clone(),
        period: Duration::from_millis(period_ms),
        ..EnvOptions::default()
    })?;
    for dev in &interfaces {
        monitor.set_watermarks(dev, Param::Bandwidth, bandwidth_levels()?)?;
        monitor.set_watermarks(dev, Param::SignalQuality, signal_levels()?)?;
    }
    let mut stream = None;
    for s in &subs {
        match &stream {
            None => stream = Some(monitor.subscribe(&s.device, s.param.clone(), s.levels)?),
            Some(st) => st.also(&s.device, s.param.clone(), s.levels)?,
        }
    }
    let Some(mut stream) = stream else {
        bail!("no interface to watch");
    };
    let pushed = if monitor.stats().availability_pushed {
        "availability pushed by rtnetlink"
    } else {
        "availability polled (no rtnetlink)"
    };
    eprintln!(
        "watching {} every {period_ms} ms, {pushed} (levels: availability low 10 / high 20, Table 3)",
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

    #[test]
    fn subscribe_parses_devices_params_and_levels() {
        let s = parse_subscriptions("eth0:availability, wlan0:sq:1+3,eth0:bw:0").expect("valid");
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].device, "eth0");
        assert_eq!(s[0].param, Param::Availability);
        assert_eq!(s[0].levels, LevelMask::ALL);
        assert_eq!(s[1].param, Param::SignalQuality);
        assert_eq!(s[1].levels, LevelMask::of(&[1, 3]));
        assert_eq!(s[2].param, Param::Bandwidth);
        assert_eq!(s[2].levels, LevelMask::of(&[0]));
        // The same pair twice: the union of the levels.
        let s = parse_subscriptions("eth0:bw:0,eth0:bw:5").expect("valid");
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].levels, LevelMask::of(&[0, 5]));
    }

    #[test]
    fn subscribe_errors_name_the_fix() {
        for (spec, needle) in [
            ("eth0", "DEVICE:PARAM"),
            ("eth0:availability:2", "levels 0..=1"),
            ("eth0:signal:x", "not a level index"),
            ("eth0:cost", "no source"),
            ("eth0:bw:1:2", "too many"),
            (":bw", "empty device"),
            ("", "empty"),
        ] {
            let e = format!("{:#}", parse_subscriptions(spec).expect_err(spec));
            assert!(e.contains(needle), "{spec:?}: {e}");
        }
    }
}
