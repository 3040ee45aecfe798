//! Bandwidth trace files.
//!
//! Two formats are read:
//!
//! * **Mahimahi** packet-delivery traces: one integer per line, the millisecond at which one
//!   1500-byte delivery opportunity occurs. Lines are non-decreasing; repeats mean several
//!   opportunities in the same millisecond. The trace repeats with a period equal to its last
//!   timestamp (as the Mahimahi emulator does).
//! * **Piecewise-constant** (Dummynet-style) traces: lines `time_seconds bandwidth_bytes_per_s`,
//!   with strictly increasing times starting at 0; the rate holds until the next line, and the
//!   last rate holds forever.
//!
//! Blank lines and lines starting with `#` are ignored in both. Every error names the line.

use std::path::Path;
use thiserror::Error;

/// Bytes one Mahimahi delivery opportunity can carry.
pub const MAHIMAHI_OPPORTUNITY_BYTES: u64 = 1500;

/// Why a trace could not be read.
#[derive(Debug, Error)]
pub enum TraceError {
    /// The file could not be opened or read.
    #[error("cannot read trace {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A line is not valid for the format.
    #[error("trace {path}, line {line}: {message}")]
    Line {
        /// The file (or `<inline>`).
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The trace has no data lines.
    #[error("trace {path} has no entries")]
    Empty {
        /// The file.
        path: String,
    },
}

/// A Mahimahi delivery-opportunity trace, in milliseconds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MahimahiTrace {
    /// Opportunity times in ms, non-decreasing.
    pub opportunities_ms: Vec<u64>,
}

impl MahimahiTrace {
    /// The repeat period in ms (the last timestamp; at least 1).
    pub fn period_ms(&self) -> u64 {
        self.opportunities_ms.last().copied().unwrap_or(1).max(1)
    }

    /// Mean capacity in bytes per second over one period.
    pub fn mean_rate_bytes_per_s(&self) -> f64 {
        self.opportunities_ms.len() as f64 * MAHIMAHI_OPPORTUNITY_BYTES as f64
            / (self.period_ms() as f64 / 1000.0)
    }

    /// Parses trace text; `origin` names the source in errors.
    pub fn parse(text: &str, origin: &str) -> Result<MahimahiTrace, TraceError> {
        let mut out = Vec::new();
        for (line_no, line) in data_lines(text) {
            let err = |message: String| TraceError::Line {
                path: origin.to_string(),
                line: line_no,
                message,
            };
            let ms: u64 = line.parse().map_err(|_| {
                err(format!(
                    "expected a whole number of milliseconds, got {line:?}"
                ))
            })?;
            if let Some(&prev) = out.last()
                && ms < prev
            {
                return Err(err(format!(
                    "timestamp {ms} is earlier than the previous {prev}"
                )));
            }
            out.push(ms);
        }
        if out.is_empty() {
            return Err(TraceError::Empty {
                path: origin.to_string(),
            });
        }
        if out.last() == Some(&0) {
            return Err(TraceError::Line {
                path: origin.to_string(),
                line: text.lines().count(),
                message: "the last timestamp (the trace period) must be positive".into(),
            });
        }
        Ok(MahimahiTrace {
            opportunities_ms: out,
        })
    }

    /// Reads a trace file.
    pub fn load(path: &Path) -> Result<MahimahiTrace, TraceError> {
        let text = read(path)?;
        MahimahiTrace::parse(&text, &path.display().to_string())
    }

    /// A trace of a constant rate: `rate_bytes_per_s` rounded to whole opportunities per
    /// second, spread evenly over a one-second period.
    pub fn constant(rate_bytes_per_s: f64) -> MahimahiTrace {
        let per_s = adaptnet_core::convert::f64_u64_sat(
            (rate_bytes_per_s / MAHIMAHI_OPPORTUNITY_BYTES as f64)
                .round()
                .max(1.0),
        );
        let opportunities_ms = (1..=per_s).map(|i| i * 1000 / per_s).collect();
        MahimahiTrace { opportunities_ms }
    }
}

/// A piecewise-constant bandwidth trace.
#[derive(Clone, Debug, PartialEq)]
pub struct PiecewiseTrace {
    /// `(start_seconds, rate_bytes_per_s)`, strictly increasing start times, first at 0.
    pub steps: Vec<(f64, f64)>,
}

impl PiecewiseTrace {
    /// Parses trace text; `origin` names the source in errors.
    pub fn parse(text: &str, origin: &str) -> Result<PiecewiseTrace, TraceError> {
        let mut steps: Vec<(f64, f64)> = Vec::new();
        for (line_no, line) in data_lines(text) {
            let err = |message: String| TraceError::Line {
                path: origin.to_string(),
                line: line_no,
                message,
            };
            let mut fields = line.split_whitespace();
            let (Some(t), Some(r), None) = (fields.next(), fields.next(), fields.next()) else {
                return Err(err(format!(
                    "expected `time_seconds bandwidth_bytes_per_second`, got {line:?}"
                )));
            };
            let t: f64 = t
                .parse()
                .map_err(|_| err(format!("time {t:?} is not a number")))?;
            let r: f64 = r
                .parse()
                .map_err(|_| err(format!("bandwidth {r:?} is not a number")))?;
            if !t.is_finite() || t < 0.0 {
                return Err(err(format!(
                    "time {t} must be a finite, non-negative number"
                )));
            }
            if !r.is_finite() || r < 0.0 {
                return Err(err(format!(
                    "bandwidth {r} must be a finite, non-negative number of bytes per second"
                )));
            }
            match steps.last() {
                None if t != 0.0 => {
                    return Err(err(format!(
                        "the first entry must start at time 0, not {t}"
                    )));
                }
                Some(&(prev, _)) if t <= prev => {
                    return Err(err(format!("time {t} does not increase (previous {prev})")));
                }
                _ => {}
            }
            steps.push((t, r));
        }
        if steps.is_empty() {
            return Err(TraceError::Empty {
                path: origin.to_string(),
            });
        }
        Ok(PiecewiseTrace { steps })
    }

    /// Reads a trace file.
    pub fn load(path: &Path) -> Result<PiecewiseTrace, TraceError> {
        let text = read(path)?;
        PiecewiseTrace::parse(&text, &path.display().to_string())
    }

    /// The rate in force at `t_s` seconds.
    pub fn rate_at(&self, t_s: f64) -> f64 {
        let idx = self.steps.partition_point(|&(start, _)| start <= t_s);
        self.steps.get(idx.saturating_sub(1)).map_or(0.0, |s| s.1)
    }
}

/// Non-blank, non-comment lines with their 1-based line numbers, trimmed.
fn data_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, raw)| (i + 1, raw.trim()))
        .filter(|(_, line)| !line.is_empty() && !line.starts_with('#'))
}

fn read(path: &Path) -> Result<String, TraceError> {
    std::fs::read_to_string(path).map_err(|source| TraceError::Io {
        path: path.display().to_string(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mahimahi_parses_repeats_and_comments() {
        let t = MahimahiTrace::parse("# c\n0\n0\n5\n\n10\n", "x").expect("valid");
        assert_eq!(t.opportunities_ms, vec![0, 0, 5, 10]);
        assert_eq!(t.period_ms(), 10);
    }

    #[test]
    fn mahimahi_errors_name_the_line() {
        let e = MahimahiTrace::parse("1\n2\nabc\n", "f.trace").expect_err("invalid");
        assert!(e.to_string().contains("line 3"), "{e}");
        let e = MahimahiTrace::parse("5\n3\n", "f").expect_err("decreasing");
        assert!(e.to_string().contains("line 2"), "{e}");
        assert!(MahimahiTrace::parse("", "f").is_err());
        assert!(MahimahiTrace::parse("0\n0\n", "f").is_err());
    }

    #[test]
    fn mahimahi_constant_trace_has_requested_rate() {
        let t = MahimahiTrace::constant(1_500_000.0);
        assert_eq!(t.opportunities_ms.len(), 1000);
        assert!((t.mean_rate_bytes_per_s() - 1_500_000.0).abs() < 1.0);
    }

    #[test]
    fn piecewise_parses_and_looks_up() {
        let t = PiecewiseTrace::parse("0 1000\n2.5 0\n4 500\n", "x").expect("valid");
        assert_eq!(t.rate_at(0.0), 1000.0);
        assert_eq!(t.rate_at(2.4), 1000.0);
        assert_eq!(t.rate_at(3.0), 0.0);
        assert_eq!(t.rate_at(100.0), 500.0);
    }

    #[test]
    fn piecewise_rejects_bad_lines() {
        for (text, needle) in [
            ("1 100\n", "start at time 0"),
            ("0 -5\n", "non-negative"),
            ("0 100\n0 200\n", "does not increase"),
            ("0 100 7\n", "expected"),
            ("0 fast\n", "not a number"),
        ] {
            let e = PiecewiseTrace::parse(text, "p").expect_err(text);
            assert!(e.to_string().contains(needle), "{text:?}: {e}");
        }
    }
}
