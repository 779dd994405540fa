//! What every command checks the same way in its input: bad arguments (exit status 2, as clap's own), files
//! that do not exist (one wording, exit status 1), and the `START..END` time ranges.

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use anyhow::{Context, Result};
use socscope_tracedb::units;
use socscope_tracedb::{TimeRange, TraceReader};

/// Exit status of a command that failed (a file, a trace, the system).
pub const EXIT_FAILURE: u8 = 1;
/// Exit status of a command given bad arguments (clap's, and ours found after parsing).
pub const EXIT_BAD_ARGUMENTS: u8 = 2;

/// An argument that parsed but cannot be used: a value out of its range, a name the trace does not have.
/// `main` exits with [`EXIT_BAD_ARGUMENTS`] when it is anywhere in an error's chain.
#[derive(Debug)]
pub struct BadArgument(pub String);

impl fmt::Display for BadArgument {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadArgument {}

/// `bad_argument!("--slices must be ...")`: an `anyhow::Error` holding a [`BadArgument`].
macro_rules! bad_argument {
    ($($arg:tt)*) => {
        anyhow::Error::new($crate::input::BadArgument(format!($($arg)*)))
    };
}
pub(crate) use bad_argument;

/// The exit status for an error: [`EXIT_BAD_ARGUMENTS`] for a [`BadArgument`], else [`EXIT_FAILURE`].
pub fn exit_status(e: &anyhow::Error) -> u8 {
    if e.chain().any(|c| c.is::<BadArgument>()) {
        EXIT_BAD_ARGUMENTS
    } else {
        EXIT_FAILURE
    }
}

/// Fails with `PATH: no such file` (every command words a missing input file so).
pub fn require_file(path: &Path) -> Result<()> {
    if path.exists() {
        Ok(())
    } else {
        anyhow::bail!("{}: no such file", path.display())
    }
}

/// Opens a trace; errors name the file.
pub fn open_trace(path: &Path) -> Result<TraceReader> {
    require_file(path)?;
    TraceReader::open(path).with_context(|| format!("while opening {}", path.display()))
}

/// `HOST:PORT` with a port number that exists (`--listen`), checked before anything is created.
pub fn host_port(s: &str) -> Result<String, String> {
    let (host, port) = s
        .rsplit_once(':')
        .ok_or_else(|| format!("`{s}` is not HOST:PORT (e.g. 127.0.0.1:7070)"))?;
    if host.is_empty() {
        return Err(format!("`{s}` has no host (e.g. 127.0.0.1:7070)"));
    }
    port.parse::<u16>()
        .map_err(|_| format!("`{port}` in `{s}` is not a port number (0 to 65535)"))?;
    Ok(s.to_owned())
}

/// A duration argument, in seconds: a number of seconds or a time with its unit (`30`, `1.5s`,
/// `500ms`, `2min`; [`units::parse_time`]), not negative.
pub fn seconds(s: &str) -> Result<f64, String> {
    let ns = units::parse_time(s).map_err(|e| e.to_string())?;
    if ns < 0 {
        return Err(format!("`{}` is negative", s.trim()));
    }
    Ok(ns as f64 / 1e9)
}

/// A time in seconds that must be above zero (`0.1`, `100ms`).
/// A limit counted in connections or sessions: 1 or more (0 would refuse every board).
pub fn positive_count(s: &str) -> Result<usize, String> {
    let v: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("`{}` is not a whole number", s.trim()))?;
    if v == 0 {
        return Err("0 would refuse every board: give 1 or more".to_string());
    }
    Ok(v)
}

pub fn positive_seconds(s: &str) -> Result<f64, String> {
    let v = seconds(s)?;
    if v <= 0.0 {
        return Err(format!("`{}` is not above zero", s.trim()));
    }
    Ok(v)
}

/// `--range START..END`: offsets from the trace's start, either side optional (`1.5s..3s`, `200ms..`,
/// `..2`); numbers are seconds unless suffixed with a unit ([`units::parse_time`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RangeArg {
    /// Offset of the start from the trace's start, in ns.
    pub start: Option<i64>,
    /// Offset of the end from the trace's start, in ns.
    pub end: Option<i64>,
}

impl FromStr for RangeArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (a, b) = s
            .split_once("..")
            .ok_or_else(|| format!("`{s}` is not a range START..END (e.g. 1.5s..3s, 200ms..)"))?;
        let side = |t: &str| -> Result<Option<i64>, String> {
            let t = t.trim();
            if t.is_empty() {
                return Ok(None);
            }
            let ns = units::parse_time(t).map_err(|e| e.to_string())?;
            if ns < 0 {
                return Err(format!("`{t}` is before the trace's start"));
            }
            Ok(Some(ns))
        };
        let (start, end) = (side(a)?, side(b)?);
        if let (Some(a), Some(b)) = (start, end)
            && b <= a
        {
            return Err(format!("range `{s}` is empty: it ends before it starts"));
        }
        Ok(Self { start, end })
    }
}

impl RangeArg {
    /// The interval within `whole` (the trace from its first to its last event).
    pub fn within(self, whole: TimeRange) -> Result<TimeRange> {
        let start = self
            .start
            .map_or(whole.start, |a| whole.start.saturating_add(a));
        let end = self
            .end
            .map_or(whole.end, |b| whole.start.saturating_add(b));
        if end <= start {
            return Err(bad_argument!(
                "--range {self} holds no time of this trace (it lasts {})",
                units::duration(whole.len())
            ));
        }
        Ok(TimeRange::new(start, end))
    }
}

impl fmt::Display for RangeArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let side = |v: Option<i64>| v.map_or(String::new(), units::time_literal);
        write!(f, "{}..{}", side(self.start), side(self.end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_parse_with_units_and_open_sides() {
        let r = |s: &str| s.parse::<RangeArg>();
        assert_eq!(
            r("1.5s..3s"),
            Ok(RangeArg {
                start: Some(1_500_000_000),
                end: Some(3_000_000_000)
            })
        );
        assert_eq!(
            r("200ms.."),
            Ok(RangeArg {
                start: Some(200_000_000),
                end: None
            })
        );
        assert_eq!(
            r("..12us"),
            Ok(RangeArg {
                start: None,
                end: Some(12_000)
            })
        );
        assert_eq!(r("1..2").map(|r| r.end), Ok(Some(2_000_000_000)));
        assert_eq!(r("40ns..50µs").map(|r| r.start), Ok(Some(40)));
        for bad in ["", "1", "x..2", "3..1", "2..2", "-1..2", "1s..xs"] {
            assert!(r(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn durations_take_seconds_or_units() {
        assert_eq!(seconds("30"), Ok(30.0));
        assert_eq!(seconds("1.5s"), Ok(1.5));
        assert_eq!(seconds("500ms"), Ok(0.5));
        assert_eq!(seconds("2min"), Ok(120.0));
        assert_eq!(seconds("0"), Ok(0.0));
        assert_eq!(seconds("-1"), Err("`-1` is negative".to_owned()));
        assert!(seconds("soon").unwrap_err().contains("is not a time"));
    }

    #[test]
    fn listen_addresses_need_a_real_port() {
        assert_eq!(host_port("127.0.0.1:7070").as_deref(), Ok("127.0.0.1:7070"));
        assert!(host_port("[::1]:0").is_ok());
        assert!(host_port("localhost:65535").is_ok());
        for bad in [
            "127.0.0.1:99999",
            "127.0.0.1",
            ":7070",
            "host:port",
            "127.0.0.1:",
        ] {
            assert!(host_port(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_range_past_the_trace_is_a_bad_argument() {
        let whole = TimeRange::new(100, 1_000_000_100);
        let r: RangeArg = "0.5..".parse().unwrap();
        assert_eq!(
            r.within(whole).unwrap(),
            TimeRange::new(500_000_100, 1_000_000_100)
        );
        assert_eq!(r.to_string(), "500ms..");
        let e = "2s.."
            .parse::<RangeArg>()
            .unwrap()
            .within(whole)
            .unwrap_err();
        assert_eq!(exit_status(&e), EXIT_BAD_ARGUMENTS);
    }
}
