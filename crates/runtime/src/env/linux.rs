//! The Linux parameter source: what the monitor reads, per interface, at every poll.
//!
//! Exactly these files, nothing else. A link change is seen at the next poll, so the poll
//! period bounds the delay; that is why availability comes from the kernel's pushed link
//! messages ([`super::netlink`]) whenever that listener runs, and from here only as the
//! fallback:
//!
//! * **availability** ([`Param::Availability`]) from `/sys/class/net/<if>/operstate` (one word,
//!   RFC 2863 `IF-MIB::ifOperStatus` as the kernel names it: `up`, `down`, `dormant`,
//!   `lowerlayerdown`, `notpresent`, `testing`, `unknown`) and `/sys/class/net/<if>/carrier`
//!   (`1` or `0`; reading it fails with `EINVAL` while the device is administratively down,
//!   taken as no carrier). The device is available when operstate is `up`, or `unknown` with
//!   carrier `1` (loopback and many virtual devices never report `up`). Values are on the scale
//!   of papers/001 Table 3 (§5.2): [`AVAILABLE`] (25) when available, [`UNAVAILABLE`] (0) when
//!   not, so Table 3's levels (low 10 "unavailable", high 20 "available") apply unchanged.
//! * **bandwidth** ([`Param::Bandwidth`], bytes/s) from
//!   `/sys/class/net/<if>/statistics/tx_bytes` plus `rx_bytes`: the change of the sum since the
//!   previous poll divided by the time between the two reads. It is the bytes the device
//!   carried (used bandwidth), not the capacity. The first poll of an interface, and a poll
//!   after the counters went backwards (device re-created, counter reset), report nothing.
//! * **signal** from `/proc/net/wireless`, when the interface has a line there: the `link`
//!   column (quality, driver scale, often 0..=70) as [`Param::SignalQuality`], the `level`
//!   column (dBm on most drivers) as the custom parameter [`SIGNAL_LEVEL`]. No line (a wired
//!   device, or no wireless extensions) → neither parameter is reported.

use adaptnet_core::env::{Name, Param};
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Availability value of an available device (above Table 3's high level 20).
pub const AVAILABLE: f64 = 25.0;
/// Availability value of an unavailable device (below Table 3's low level 10).
pub const UNAVAILABLE: f64 = 0.0;
/// The custom parameter carrying `/proc/net/wireless`'s `level` column.
pub const SIGNAL_LEVEL: &str = "signal_level";
/// Most interfaces one source follows (a bound on the work of one poll).
pub const MAX_INTERFACES: usize = 64;
/// Largest file the source reads (operstate, carrier and counters are a few bytes;
/// `/proc/net/wireless` a line per wireless device).
const MAX_FILE_BYTES: u64 = 64 * 1024;

/// The kernel's operational state of an interface (`operstate`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OperState {
    /// `up`.
    Up,
    /// `down`.
    Down,
    /// `dormant`.
    Dormant,
    /// `lowerlayerdown`.
    LowerLayerDown,
    /// `notpresent`.
    NotPresent,
    /// `testing`.
    Testing,
    /// `unknown` (also any word this parser does not know).
    Unknown,
}

/// Parses the text of `operstate`.
pub fn parse_operstate(text: &str) -> OperState {
    match text.trim() {
        "up" => OperState::Up,
        "down" => OperState::Down,
        "dormant" => OperState::Dormant,
        "lowerlayerdown" => OperState::LowerLayerDown,
        "notpresent" => OperState::NotPresent,
        "testing" => OperState::Testing,
        _ => OperState::Unknown,
    }
}

/// Parses the text of `carrier`: `Some(true)` for `1`, `Some(false)` for `0`, else `None`.
pub fn parse_carrier(text: &str) -> Option<bool> {
    match text.trim() {
        "1" => Some(true),
        "0" => Some(false),
        _ => None,
    }
}

/// The availability value of an interface in `state` with `carrier` (see the module doc).
pub fn availability(state: OperState, carrier: Option<bool>) -> f64 {
    match (state, carrier) {
        (OperState::Up, _) | (OperState::Unknown, Some(true)) => AVAILABLE,
        _ => UNAVAILABLE,
    }
}

/// Parses a byte counter (`tx_bytes`, `rx_bytes`).
pub fn parse_counter(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// One interface's line of `/proc/net/wireless`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WirelessLine {
    /// The `link` quality column.
    pub link: f64,
    /// The `level` column (signal level, dBm on most drivers).
    pub level: f64,
}

/// Parses `/proc/net/wireless`: after the two header lines, one line per interface,
/// `<if>: <status> <link> <level> <noise> …`, where the numbers may carry a trailing `.`
/// (updated since the last read). Malformed lines are skipped.
pub fn parse_wireless(text: &str) -> BTreeMap<String, WirelessLine> {
    let mut out = BTreeMap::new();
    for line in text.lines().skip(2) {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        let mut cols = rest.split_whitespace();
        let _status = cols.next();
        let num = |c: Option<&str>| -> Option<f64> {
            let v: f64 = c?.trim_end_matches('.').parse().ok()?;
            v.is_finite().then_some(v)
        };
        let (Some(link), Some(level)) = (num(cols.next()), num(cols.next())) else {
            continue;
        };
        let name = name.trim();
        if !name.is_empty() {
            out.insert(name.to_string(), WirelessLine { link, level });
        }
    }
    out
}

/// One value read from the host.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// The interface.
    pub device: Name,
    /// The parameter.
    pub param: Param,
    /// Its value.
    pub value: f64,
}

/// Where the files are, so tests can point the source at fixtures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourcePaths {
    /// The directory of interfaces (`/sys/class/net`).
    pub sys_class_net: PathBuf,
    /// The wireless table (`/proc/net/wireless`).
    pub proc_net_wireless: PathBuf,
}

impl Default for SourcePaths {
    fn default() -> Self {
        SourcePaths {
            sys_class_net: PathBuf::from("/sys/class/net"),
            proc_net_wireless: PathBuf::from("/proc/net/wireless"),
        }
    }
}

/// Reads the parameters of a set of interfaces; keeps the previous byte counts to turn them
/// into rates.
#[derive(Clone, Debug)]
pub struct LinuxSource {
    paths: SourcePaths,
    /// The interfaces to read; empty: every entry of `sys_class_net` at each poll.
    interfaces: Vec<String>,
    last_bytes: BTreeMap<String, (u64, Instant)>,
}

fn read_small(path: &Path) -> io::Result<String> {
    use std::io::Read;
    let mut s = String::new();
    std::fs::File::open(path)?
        .take(MAX_FILE_BYTES)
        .read_to_string(&mut s)?;
    Ok(s)
}

/// Why a poll could not read something (the poll goes on with the other interfaces).
#[derive(Debug, thiserror::Error)]
#[error("reading {path}: {source}")]
pub struct ReadError {
    /// The file.
    pub path: PathBuf,
    /// The cause.
    pub source: io::Error,
}

impl LinuxSource {
    /// A source over `interfaces` (empty: all of them) reading under `paths`.
    pub fn new(paths: SourcePaths, interfaces: Vec<String>) -> LinuxSource {
        LinuxSource {
            paths,
            interfaces,
            last_bytes: BTreeMap::new(),
        }
    }

    /// The interfaces the next poll reads (at most [`MAX_INTERFACES`], sorted when listed).
    pub fn interfaces(&self) -> io::Result<Vec<String>> {
        if !self.interfaces.is_empty() {
            return Ok(self
                .interfaces
                .iter()
                .take(MAX_INTERFACES)
                .cloned()
                .collect());
        }
        let mut names: Vec<String> = std::fs::read_dir(&self.paths.sys_class_net)?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect();
        names.sort();
        names.truncate(MAX_INTERFACES);
        Ok(names)
    }

    /// Reads every parameter of every interface at `now`; the samples, and what could not be
    /// read (an interface whose `operstate` is missing is reported and skipped).
    pub fn poll(&mut self, now: Instant) -> (Vec<Sample>, Vec<ReadError>) {
        let mut samples = Vec::new();
        let mut errors = Vec::new();
        let names = match self.interfaces() {
            Ok(n) => n,
            Err(source) => {
                errors.push(ReadError {
                    path: self.paths.sys_class_net.clone(),
                    source,
                });
                return (samples, errors);
            }
        };
        // Absent file: no wireless device (or no wireless extensions), nothing reported.
        let wireless = read_small(&self.paths.proc_net_wireless)
            .map(|t| parse_wireless(&t))
            .unwrap_or_default();
        for name in names {
            let Ok(device) = Name::new(&name) else {
                continue;
            };
            let dir = self.paths.sys_class_net.join(&name);
            let op_path = dir.join("operstate");
            let state = match read_small(&op_path) {
                Ok(t) => parse_operstate(&t),
                Err(source) => {
                    self.last_bytes.remove(&name);
                    errors.push(ReadError {
                        path: op_path,
                        source,
                    });
                    continue;
                }
            };
            // EINVAL while the device is administratively down: no carrier.
            let carrier = read_small(&dir.join("carrier"))
                .ok()
                .and_then(|t| parse_carrier(&t));
            samples.push(Sample {
                device: device.clone(),
                param: Param::Availability,
                value: availability(state, carrier),
            });
            let stats = dir.join("statistics");
            let bytes = ["tx_bytes", "rx_bytes"].iter().try_fold(0u64, |sum, f| {
                let v = read_small(&stats.join(f))
                    .ok()
                    .and_then(|t| parse_counter(&t))?;
                Some(sum.saturating_add(v))
            });
            if let Some(bytes) = bytes {
                if let Some((prev, at)) = self.last_bytes.get(&name) {
                    let dt = now.saturating_duration_since(*at).as_secs_f64();
                    if bytes >= *prev && dt > 0.0 {
                        samples.push(Sample {
                            device: device.clone(),
                            param: Param::Bandwidth,
                            value: (bytes - prev) as f64 / dt,
                        });
                    }
                }
                self.last_bytes.insert(name.clone(), (bytes, now));
            }
            if let Some(w) = wireless.get(&name) {
                samples.push(Sample {
                    device: device.clone(),
                    param: Param::SignalQuality,
                    value: w.link,
                });
                if let Ok(level) = Param::from_name(SIGNAL_LEVEL) {
                    samples.push(Sample {
                        device,
                        param: level,
                        value: w.level,
                    });
                }
            }
        }
        (samples, errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const WIRELESS: &str = "\
Inter-| sta-|   Quality        |   Discarded packets               | Missed | WE
 face | tus | link level noise |  nwid  crypt   frag  retry   misc | beacon | 22
 wlan0: 0000   54.  -56.  -256        0      0      0      0      0        0
 wlp2s0: 0000   70   -40.  -256        0      0      0      0      0        0
 bad0: 0000   x   y
";

    #[test]
    fn test_wireless_fixture_parses_link_and_level() {
        let w = parse_wireless(WIRELESS);
        assert_eq!(w.len(), 2, "{w:?}");
        assert_eq!(
            w["wlan0"],
            WirelessLine {
                link: 54.0,
                level: -56.0
            }
        );
        assert_eq!(
            w["wlp2s0"],
            WirelessLine {
                link: 70.0,
                level: -40.0
            }
        );
        assert!(parse_wireless("").is_empty());
        assert!(parse_wireless("only\nheaders\n").is_empty());
    }

    #[test]
    fn test_operstate_and_carrier_give_availability() {
        assert_eq!(parse_operstate("up\n"), OperState::Up);
        assert_eq!(parse_operstate("down\n"), OperState::Down);
        assert_eq!(
            parse_operstate("lowerlayerdown\n"),
            OperState::LowerLayerDown
        );
        assert_eq!(parse_operstate("garbage"), OperState::Unknown);
        assert_eq!(parse_carrier("1\n"), Some(true));
        assert_eq!(parse_carrier("0\n"), Some(false));
        assert_eq!(parse_carrier(""), None);
        assert_eq!(availability(OperState::Up, None), AVAILABLE);
        assert_eq!(availability(OperState::Unknown, Some(true)), AVAILABLE);
        assert_eq!(availability(OperState::Unknown, Some(false)), UNAVAILABLE);
        assert_eq!(availability(OperState::Down, Some(true)), UNAVAILABLE);
        assert_eq!(availability(OperState::Dormant, Some(true)), UNAVAILABLE);
        assert_eq!(parse_counter("123456789012\n"), Some(123_456_789_012));
        assert_eq!(parse_counter("-1"), None);
    }

    /// A fake `/sys/class/net` with one wired and one wireless interface.
    struct Fixture(PathBuf);

    impl Fixture {
        fn new(tag: &str) -> Fixture {
            let root =
                std::env::temp_dir().join(format!("adaptnet-envsrc-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&root);
            for (ifname, state, carrier) in [("eth9", "up", "1"), ("wlan0", "dormant", "1")] {
                let d = root.join("net").join(ifname);
                std::fs::create_dir_all(d.join("statistics")).expect("fixture dir");
                std::fs::write(d.join("operstate"), format!("{state}\n")).expect("write");
                std::fs::write(d.join("carrier"), format!("{carrier}\n")).expect("write");
            }
            std::fs::write(root.join("wireless"), WIRELESS).expect("write");
            Fixture(root)
        }

        fn counters(&self, ifname: &str, tx: u64, rx: u64) {
            let s = self.0.join("net").join(ifname).join("statistics");
            std::fs::write(s.join("tx_bytes"), format!("{tx}\n")).expect("write");
            std::fs::write(s.join("rx_bytes"), format!("{rx}\n")).expect("write");
        }

        fn paths(&self) -> SourcePaths {
            SourcePaths {
                sys_class_net: self.0.join("net"),
                proc_net_wireless: self.0.join("wireless"),
            }
        }
    }

    impl Drop for Fixture {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn value(samples: &[Sample], dev: &str, param: &Param) -> Option<f64> {
        samples
            .iter()
            .find(|s| s.device.as_str() == dev && &s.param == param)
            .map(|s| s.value)
    }

    #[test]
    fn test_source_fixture_reports_rates_availability_and_signal() {
        let fx = Fixture::new("rates");
        fx.counters("eth9", 1000, 500);
        fx.counters("wlan0", 0, 0);
        let mut src = LinuxSource::new(fx.paths(), Vec::new());
        assert_eq!(src.interfaces().expect("list"), vec!["eth9", "wlan0"]);
        let t0 = Instant::now();
        let (s, errs) = src.poll(t0);
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(value(&s, "eth9", &Param::Availability), Some(AVAILABLE));
        assert_eq!(value(&s, "wlan0", &Param::Availability), Some(UNAVAILABLE));
        assert_eq!(
            value(&s, "eth9", &Param::Bandwidth),
            None,
            "first poll: no rate"
        );
        assert_eq!(
            value(&s, "eth9", &Param::SignalQuality),
            None,
            "wired: no signal"
        );
        assert_eq!(value(&s, "wlan0", &Param::SignalQuality), Some(54.0));
        let level = Param::from_name(SIGNAL_LEVEL).expect("name");
        assert_eq!(value(&s, "wlan0", &level), Some(-56.0));

        fx.counters("eth9", 3000, 1500); // +3000 bytes in 0.5 s
        let (s, _) = src.poll(t0 + Duration::from_millis(500));
        let bw = value(&s, "eth9", &Param::Bandwidth).expect("a rate");
        assert!((bw - 6000.0).abs() < 1e-6, "{bw}");

        fx.counters("eth9", 10, 10); // counters reset: no rate this time
        let (s, _) = src.poll(t0 + Duration::from_millis(1000));
        assert_eq!(value(&s, "eth9", &Param::Bandwidth), None);
    }

    #[test]
    fn test_source_missing_interface_is_an_error_not_a_panic() {
        let fx = Fixture::new("missing");
        let mut src = LinuxSource::new(fx.paths(), vec!["nosuch0".into(), "eth9".into()]);
        let (s, errs) = src.poll(Instant::now());
        assert_eq!(errs.len(), 1);
        assert!(errs[0].path.ends_with("nosuch0/operstate"), "{:?}", errs[0]);
        assert_eq!(value(&s, "eth9", &Param::Availability), Some(AVAILABLE));
    }
}
