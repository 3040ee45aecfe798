//! The per-interface bandwidth estimator (papers/000 §5): ATP's estimator read "the amount of
//! data sent and received" from the network card. The daemon reads each subscribed
//! interface's kernel counters (`/sys/class/net/<if>/statistics/{tx,rx}_bytes`, the counters
//! of every protocol on the device, as the paper's were) once per period, turns the
//! difference into a smoothed rate and sends it to the subscribers — one measurement per
//! interface for the whole host, instead of one per application.

use adaptnet_core::Time;
use std::collections::BTreeSet;

/// One interface's estimate and its subscribers.
#[derive(Clone, Debug)]
pub struct Estimator {
    /// Subscribed clients.
    pub subscribers: BTreeSet<u32>,
    gain: f64,
    last: Option<(Time, u64)>,
    rate: Option<f64>,
}

impl Estimator {
    /// An estimator with smoothing gain `gain` (0 < gain ≤ 1).
    pub fn new(gain: f64) -> Estimator {
        Estimator {
            subscribers: BTreeSet::new(),
            gain: gain.clamp(1e-3, 1.0),
            last: None,
            rate: None,
        }
    }

    /// The interface's byte counter read `total` at `now`; the new estimate (bytes/s) once two
    /// readings are known. A counter that went backwards (device reset) restarts the estimate.
    pub fn on_counters(&mut self, now: Time, total: u64) -> Option<f64> {
        let prev = self.last.replace((now, total));
        let (t0, b0) = prev?;
        if total < b0 || now <= t0 {
            self.rate = None;
            return None;
        }
        let sample = (total - b0) as f64 / now.saturating_since(t0).as_secs_f64();
        let r = match self.rate {
            Some(r) => r + self.gain * (sample - r),
            None => sample,
        };
        self.rate = Some(r);
        Some(r)
    }

    /// The current estimate, bytes/s.
    pub fn rate(&self) -> Option<f64> {
        self.rate
    }

    /// The last counter reading.
    pub fn total_bytes(&self) -> Option<u64> {
        self.last.map(|(_, b)| b)
    }
}

/// Whether `name` can be a Linux interface name (and so a safe path component).
pub fn valid_iface_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() < 16
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'@'))
}

/// Reads `iface`'s transmitted plus received bytes from sysfs.
pub fn read_counters(iface: &str) -> std::io::Result<u64> {
    if !valid_iface_name(iface) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not an interface name",
        ));
    }
    let read = |which: &str| -> std::io::Result<u64> {
        let path = format!("/sys/class/net/{iface}/statistics/{which}");
        std::fs::read_to_string(path)?
            .trim()
            .parse::<u64>()
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    };
    Ok(read("tx_bytes")?.saturating_add(read("rx_bytes")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_rate_from_counter_differences_is_smoothed() {
        let mut e = Estimator::new(0.5);
        assert_eq!(e.on_counters(Time::ZERO, 1000), None);
        assert_eq!(
            e.on_counters(Time::from_millis(100), 11_000),
            Some(100_000.0)
        );
        // Next period at 300 kB/s: halfway there with gain 0.5.
        assert_eq!(
            e.on_counters(Time::from_millis(200), 41_000),
            Some(200_000.0)
        );
        // A reset counter restarts.
        assert_eq!(e.on_counters(Time::from_millis(300), 5), None);
        assert_eq!(e.rate(), None);
    }

    #[test]
    fn test_interface_names_are_checked() {
        assert!(valid_iface_name("veth-dmn0"));
        assert!(!valid_iface_name("../etc"));
        assert!(!valid_iface_name(".."));
        assert!(!valid_iface_name("a_very_long_interface_name"));
        assert!(read_counters("lo").is_ok() || !std::path::Path::new("/sys/class/net/lo").exists());
    }
}
