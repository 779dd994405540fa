//! Times, durations, dates, counts and sizes as people read and type them: the one parser and the one
//! family of formatters the collector, the CLI, the PNGs and the GUI share.
//!
//! It lives in the store's contract because both sides of it need it (the collector names trace files
//! by their UTC date; the analyzer prints and parses trace times) and the store defines what a time is:
//! [`Timestamp`](crate::Timestamp) nanoseconds in the trace's clock, dates in Unix nanoseconds.
//!
//! Two presentations of a magnitude, one rule for picking its unit (the largest unit in which the
//! value is at least 1, or the next one when rounding carries into it — so 999 999 ns is `1.0 ms`,
//! never `1000.0 µs`):
//! - aligned text for tables ([`duration`], [`count`], [`bytes`]): a fixed number of decimals per unit;
//! - labels for axes and charts ([`duration_compact`], [`count_compact`]): at most two decimals,
//!   trailing zeros dropped (`1.5 µs`, `2M`).
//!
//! Exact forms: [`timestamp`] (seconds with nine decimals) and [`time_literal`] (`500ms`) are read
//! back by [`parse_time`] to the nanosecond.

use std::fmt;

/// What [`parse_time`] could not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseTimeError {
    /// Nothing but blanks.
    Empty,
    /// The part before the unit is not a decimal number.
    NotANumber {
        /// The text as given.
        text: String,
    },
    /// More decimals than the unit has nanoseconds for (`1.5ns`, `0.0000000001s`).
    TooPrecise {
        /// The text as given.
        text: String,
        /// The unit, as written.
        unit: &'static str,
        /// Decimals the unit allows.
        max_decimals: u32,
    },
    /// Beyond ±292 years, what 64-bit nanoseconds hold.
    OutOfRange {
        /// The text as given.
        text: String,
    },
}

impl fmt::Display for ParseTimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseTimeError::Empty => write!(f, "empty time (e.g. 1.5s, 200ms, 30us, 42ns)"),
            ParseTimeError::NotANumber { text } => {
                write!(f, "`{text}` is not a time (e.g. 1.5s, 200ms, 30us, 42ns)")
            }
            ParseTimeError::TooPrecise {
                text,
                unit,
                max_decimals: 0,
            } => write!(
                f,
                "`{text}`: {unit} take no decimals (nanoseconds are the finest unit)"
            ),
            ParseTimeError::TooPrecise {
                text,
                unit,
                max_decimals,
            } => write!(
                f,
                "`{text}`: at most {max_decimals} decimals in {unit} (nanoseconds are the finest unit)"
            ),
            ParseTimeError::OutOfRange { text } => {
                write!(f, "`{text}` is out of range (at most ±292 years)")
            }
        }
    }
}

impl std::error::Error for ParseTimeError {}

/// Units a time may be written in, with their length in ns and the decimals that stay exact.
const TIME_UNITS: [(&str, i64, u32); 7] = [
    ("ns", 1, 0),
    ("us", 1_000, 3),
    ("µs", 1_000, 3),
    ("ms", 1_000_000, 6),
    ("s", 1_000_000_000, 9),
    ("min", 60_000_000_000, 10),
    ("h", 3_600_000_000_000, 11),
];

/// A time or a duration in nanoseconds from what a person typed: a decimal number with an optional
/// unit (`ns`, `us` or `µs`, `ms`, `s`, `min`, `h`; seconds when there is none), blanks allowed around
/// it and before the unit, a sign allowed. Exact: `1.000000001` is 1 000 000 001 ns, and every
/// [`timestamp`] and [`time_literal`] reads back to the nanosecond. Scientific notation (`1e-3s`) is
/// read too, rounded to the nearest nanosecond.
pub fn parse_time(text: &str) -> Result<i64, ParseTimeError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(ParseTimeError::Empty);
    }
    // Longest suffix first: `ms` before `s`, `min` before nothing.
    let (num, unit, scale, max_decimals) = TIME_UNITS
        .iter()
        .filter_map(|&(u, scale, dec)| t.strip_suffix(u).map(|n| (n, u, scale, dec)))
        .max_by_key(|(_, u, _, _)| u.len())
        .unwrap_or((t, "s", 1_000_000_000, 9));
    let num = num.trim_end();
    let not_a_number = || ParseTimeError::NotANumber {
        text: text.trim().to_owned(),
    };
    let out_of_range = || ParseTimeError::OutOfRange {
        text: text.trim().to_owned(),
    };
    if num.contains(['e', 'E']) {
        let v: f64 = num.parse().map_err(|_| not_a_number())?;
        if !v.is_finite() {
            return Err(not_a_number());
        }
        let ns = (v * scale as f64).round();
        // i64::MAX as f64 rounds up to 2^63, itself out of range.
        if !ns.is_finite() || ns.abs() >= i64::MAX as f64 {
            return Err(out_of_range());
        }
        return Ok(ns as i64);
    }
    let (negative, digits) = match num.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, num.strip_prefix('+').unwrap_or(num)),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (int.is_empty() && frac.is_empty()) || !all_digits(int) || !all_digits(frac) {
        return Err(not_a_number());
    }
    let kept = frac.trim_end_matches('0');
    if kept.len() > max_decimals as usize {
        return Err(ParseTimeError::TooPrecise {
            text: text.trim().to_owned(),
            unit,
            max_decimals,
        });
    }
    let whole: i64 = if int.is_empty() {
        0
    } else {
        int.parse().map_err(|_| out_of_range())?
    };
    // The fraction in units of scale / 10^max_decimals (exact: scale is a multiple of it).
    let frac_value: i64 = if kept.is_empty() {
        0
    } else {
        format!("{kept:0<width$}", width = max_decimals as usize)
            .parse()
            .map_err(|_| out_of_range())?
    };
    let step = scale / 10i64.pow(max_decimals);
    let ns = whole
        .checked_mul(scale)
        .and_then(|w| w.checked_add(frac_value * step))
        .ok_or_else(out_of_range)?;
    Ok(if negative { -ns } else { ns })
}

/// A trace time as the time bar and the event table show it: seconds with all nine decimals
/// (`1.234567891`, `-0.000000005`). [`parse_time`] reads it back exactly.
pub fn timestamp(t: i64) -> String {
    let sign = if t < 0 { "-" } else { "" };
    let a = t.unsigned_abs();
    format!("{sign}{}.{:09}", a / 1_000_000_000, a % 1_000_000_000)
}

/// A time as one would type it, in the largest unit that holds it exactly: `500ms`, `3s`, `40ns`,
/// `-2us` ([`parse_time`] reads it back exactly).
pub fn time_literal(ns: i64) -> String {
    let (div, unit) = [(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us")]
        .into_iter()
        .find(|(d, _)| ns % d == 0)
        .unwrap_or((1, "ns"));
    format!("{}{unit}", ns / div)
}

/// One unit of a scale: its size, its name, the decimals shown in aligned text.
type Unit = (f64, &'static str, usize);

const DURATION_UNITS: [Unit; 4] = [
    (1.0, "ns", 0),
    (1e3, "µs", 1),
    (1e6, "ms", 1),
    (1e9, "s", 3),
];

const COUNT_UNITS: [Unit; 4] = [(1.0, "", 0), (1e3, "k", 1), (1e6, "M", 2), (1e9, "G", 2)];

const BYTE_UNITS: [Unit; 4] = [
    (1.0, "B", 0),
    (1024.0, "KiB", 1),
    (1_048_576.0, "MiB", 1),
    (1_073_741_824.0, "GiB", 2),
];

fn round_to(x: f64, decimals: usize) -> f64 {
    let m = 10f64.powi(decimals as i32);
    (x * m).round() / m
}

/// The largest unit in which `|v|` is at least 1 (the smallest for 0), or the next one up when the
/// value, rounded to `decimals(unit)`, reaches it (999.96 µs shows as `1.0 ms`, not `1000.0 µs`).
fn pick(v: f64, units: &[Unit], decimals: impl Fn(&Unit) -> usize) -> Unit {
    let a = v.abs();
    let i = units.iter().rposition(|u| a >= u.0).unwrap_or(0);
    match units.get(i + 1) {
        Some(next) if round_to(a / units[i].0, decimals(&units[i])) * units[i].0 >= next.0 => *next,
        _ => units[i],
    }
}

fn aligned(v: f64, units: &[Unit], space: &str) -> String {
    if !v.is_finite() {
        return v.to_string();
    }
    let u = pick(v, units, |u| u.2);
    let sep = if u.1.is_empty() { "" } else { space };
    format!("{:.*}{sep}{}", u.2, v / u.0, u.1)
}

fn compact(v: f64, units: &[Unit], space: &str) -> String {
    if !v.is_finite() {
        return v.to_string();
    }
    let u = pick(v, units, |_| 2);
    let s = format!("{:.2}", v / u.0);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    let s = if s == "-0" { "0" } else { s };
    let sep = if u.1.is_empty() { "" } else { space };
    format!("{s}{sep}{}", u.1)
}

/// A duration in ns for aligned text: `1.234 s`, `12.3 ms`, `45.0 µs`, `789 ns`.
pub fn duration(ns: i64) -> String {
    aligned(ns as f64, &DURATION_UNITS, " ")
}

/// A duration in ns for a label: `1.5 µs`, `2 s`, `12.25 ms`, `0 ns`.
pub fn duration_compact(ns: f64) -> String {
    compact(ns, &DURATION_UNITS, " ")
}

/// A count for aligned text: `1.23 M`, `45.6 k`, `789`.
pub fn count(v: f64) -> String {
    aligned(v, &COUNT_UNITS, " ")
}

/// A count for a label: `1.5k`, `2M`, `12.5`.
pub fn count_compact(v: f64) -> String {
    compact(v, &COUNT_UNITS, "")
}

/// A size: `12.3 MiB`, `512 B`.
pub fn bytes(b: u64) -> String {
    aligned(b as f64, &BYTE_UNITS, " ")
}

/// A proleptic Gregorian date (year, month 1-12, day 1-31) from days since 1970-01-01 (Howard
/// Hinnant's `civil_from_days`).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Date and time of day (UTC) of Unix nanoseconds, to the second.
fn utc_parts(unix_ns: i64) -> ((i64, u32, u32), i64) {
    let secs = unix_ns.div_euclid(1_000_000_000);
    (
        civil_from_days(secs.div_euclid(86_400)),
        secs.rem_euclid(86_400),
    )
}

/// `YYYY-mm-dd HH:MM:SS` (UTC) of Unix nanoseconds.
pub fn utc_date_time(unix_ns: i64) -> String {
    let ((y, m, d), s) = utc_parts(unix_ns);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// `YYYYmmddTHHMMSSZ` (UTC) of Unix nanoseconds: the compact form for file names.
pub fn utc_stamp(unix_ns: i64) -> String {
    let ((y, m, d), s) = utc_parts(unix_ns);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// A time axis: tick positions at round multiples of 1, 2 or 5 × 10^k ns, labelled in the one unit
/// (s, ms, µs, ns) that fits the axis (`7.5 s`, `120 ms`, `35 µs`), the same in the GUI and the PNGs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeAxis {
    /// Distance between ticks, ns.
    pub step: i64,
    /// Nanoseconds per label unit (1, 10^3, 10^6 or 10^9).
    unit_ns: i64,
    /// Decimals a label needs in that unit for the step to show.
    decimals: u32,
}

impl TimeAxis {
    /// An axis over `start..end` (ns) with at most about `max_ticks` ticks.
    pub fn new(start: i64, end: i64, max_ticks: usize) -> Self {
        let span = end.saturating_sub(start).max(1);
        let target = (span as f64 / max_ticks.max(1) as f64).max(1.0);
        let mut pow = 1i64;
        let mut exp = 0u32;
        let step = loop {
            if let Some(m) = [1, 2, 5].iter().find(|&&m| (m * pow) as f64 >= target) {
                break m * pow;
            }
            match pow.checked_mul(10) {
                Some(p) => {
                    pow = p;
                    exp += 1;
                }
                None => break pow,
            }
        };
        let largest = start.unsigned_abs().max(end.unsigned_abs());
        let unit_exp = if largest >= 1_000_000_000 || step >= 1_000_000_000 {
            9
        } else if largest >= 1_000_000 {
            6
        } else if largest >= 1_000 {
            3
        } else {
            0
        };
        Self {
            step,
            unit_ns: 10i64.pow(unit_exp),
            decimals: unit_exp.saturating_sub(exp),
        }
    }

    /// The ticks in `start..=end`: every multiple of the step.
    pub fn ticks(&self, start: i64, end: i64) -> impl Iterator<Item = i64> + use<> {
        // In i128: the first multiple at or after `start` may lie past the ends of i64.
        let step = i128::from(self.step);
        let start = i128::from(start);
        let first =
            start.div_euclid(step) * step + if start.rem_euclid(step) == 0 { 0 } else { step };
        (0..)
            .map(move |i: i128| first + i * step)
            .take_while(move |t| *t <= i128::from(end))
            .filter_map(|t| i64::try_from(t).ok())
    }

    /// `t` in the axis' unit, with the decimals the step needs and no trailing zeros: `7.5 s`.
    pub fn label(&self, t: i64) -> String {
        let unit = match self.unit_ns {
            1_000_000_000 => "s",
            1_000_000 => "ms",
            1_000 => "µs",
            _ => "ns",
        };
        let sign = if t < 0 { "-" } else { "" };
        let a = t.unsigned_abs();
        let unit_ns = self.unit_ns as u64;
        let whole = a / unit_ns;
        let mut frac = String::new();
        if self.decimals > 0 {
            let digits = unit_ns.ilog10();
            let f = format!("{:0width$}", a % unit_ns, width = digits as usize);
            frac = f[..self.decimals.min(digits) as usize]
                .trim_end_matches('0')
                .to_string();
        }
        if frac.is_empty() {
            format!("{sign}{whole} {unit}")
        } else {
            format!("{sign}{whole}.{frac} {unit}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_and_literals_read_back_exactly() {
        assert_eq!(timestamp(1_234_567_891), "1.234567891");
        assert_eq!(timestamp(-5), "-0.000000005");
        assert_eq!(timestamp(0), "0.000000000");
        assert_eq!(timestamp(i64::MIN), "-9223372036.854775808");
        for t in [
            0,
            1,
            -1,
            999,
            1_000,
            999_999_999,
            1_234_567_891,
            -5,
            86_400_000_000_123,
            i64::MAX,
            i64::MIN + 1,
        ] {
            assert_eq!(parse_time(&timestamp(t)), Ok(t), "{t}");
            assert_eq!(parse_time(&time_literal(t)), Ok(t), "{t}");
        }
        assert_eq!(time_literal(500_000_000), "500ms");
        assert_eq!(time_literal(3_000_000_000), "3s");
        assert_eq!(time_literal(-2_000), "-2us");
        assert_eq!(time_literal(0), "0s");
        assert_eq!(time_literal(41), "41ns");
    }

    #[test]
    fn times_parse_in_every_unit() {
        let ok = |s: &str| parse_time(s).unwrap();
        assert_eq!(ok("1.5"), 1_500_000_000);
        assert_eq!(ok("1.5s"), 1_500_000_000);
        assert_eq!(ok(" 250 ms "), 250_000_000);
        assert_eq!(ok("1.5ms"), 1_500_000);
        assert_eq!(ok("42ns"), 42);
        assert_eq!(ok("3us"), 3_000);
        assert_eq!(ok("3.001µs"), 3_001);
        assert_eq!(ok("2min"), 120_000_000_000);
        assert_eq!(ok("1.5h"), 5_400_000_000_000);
        assert_eq!(ok(".5"), 500_000_000);
        assert_eq!(ok("2."), 2_000_000_000);
        assert_eq!(ok("+7ms"), 7_000_000);
        assert_eq!(ok("-0.25s"), -250_000_000);
        assert_eq!(ok("-0"), 0);
        assert_eq!(ok("1e-3s"), 1_000_000);
        assert_eq!(ok("2.5E3ns"), 2_500);
        // Trailing zeros past the finest unit are not precision.
        assert_eq!(ok("1.0000000000s"), 1_000_000_000);
        assert_eq!(ok("7.000ns"), 7);
    }

    #[test]
    fn bad_times_say_what_is_wrong() {
        assert_eq!(parse_time("  "), Err(ParseTimeError::Empty));
        for bad in [
            "x", "s", "1.2.3", "1,5s", "--1", "1 s s", "ms", "1e", "nan", "inf",
        ] {
            assert!(
                matches!(parse_time(bad), Err(ParseTimeError::NotANumber { .. })),
                "{bad:?}: {:?}",
                parse_time(bad)
            );
        }
        let e = parse_time("1.0000000001").unwrap_err();
        assert_eq!(
            e.to_string(),
            "`1.0000000001`: at most 9 decimals in s (nanoseconds are the finest unit)"
        );
        assert_eq!(
            parse_time("1.5ns").unwrap_err().to_string(),
            "`1.5ns`: ns take no decimals (nanoseconds are the finest unit)"
        );
        for huge in ["9223372037", "99999999999999999999ns", "1e300", "-3000000h"] {
            assert!(
                matches!(parse_time(huge), Err(ParseTimeError::OutOfRange { .. })),
                "{huge:?}: {:?}",
                parse_time(huge)
            );
        }
        assert_eq!(parse_time("9223372036.854775807"), Ok(i64::MAX));
    }

    #[test]
    fn durations_pick_the_unit_after_rounding() {
        assert_eq!(duration(0), "0 ns");
        assert_eq!(duration(999), "999 ns");
        assert_eq!(duration(1_000), "1.0 µs");
        assert_eq!(duration(45_000), "45.0 µs");
        assert_eq!(duration(12_345_678), "12.3 ms");
        assert_eq!(duration(1_234_567_891), "1.235 s");
        // Never `1000.0 µs`: rounding carries into the next unit.
        assert_eq!(duration(999_960), "1.0 ms");
        assert_eq!(duration(999_999_999), "1.000 s");
        assert_eq!(duration(-1_500_000), "-1.5 ms");
        assert_eq!(duration(i64::MAX), "9223372036.855 s");
        assert_eq!(duration(i64::MIN), "-9223372036.855 s");
        assert_eq!(duration_compact(1_500.0), "1.5 µs");
        assert_eq!(duration_compact(2.5e9), "2.5 s");
        assert_eq!(duration_compact(2e9), "2 s");
        assert_eq!(duration_compact(0.0), "0 ns");
        assert_eq!(duration_compact(12_250_000.0), "12.25 ms");
        assert_eq!(duration_compact(999_999.0), "1 ms");
        assert_eq!(duration_compact(-3_000.0), "-3 µs");
        assert_eq!(duration_compact(f64::NAN), "NaN");
    }

    #[test]
    fn counts_and_sizes() {
        assert_eq!(count(0.0), "0");
        assert_eq!(count(789.0), "789");
        assert_eq!(count(45_600.0), "45.6 k");
        assert_eq!(count(1_234_567.0), "1.23 M");
        assert_eq!(count(999_960.0), "1.00 M");
        assert_eq!(count(999.6), "1.0 k");
        assert_eq!(count(3.2e12), "3200.00 G");
        assert_eq!(count(-2_500.0), "-2.5 k");
        assert_eq!(count(f64::INFINITY), "inf");
        assert_eq!(count_compact(1_500.0), "1.5k");
        assert_eq!(count_compact(2_000_000.0), "2M");
        assert_eq!(count_compact(12.5), "12.5");
        assert_eq!(count_compact(0.0), "0");
        assert_eq!(count_compact(-0.001), "0");
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1024), "1.0 KiB");
        assert_eq!(bytes(12 * 1_048_576 + 300_000), "12.3 MiB");
        assert_eq!(bytes(u64::MAX), "17179869184.00 GiB");
    }

    #[test]
    fn dates_in_utc() {
        assert_eq!(utc_stamp(0), "19700101T000000Z");
        assert_eq!(utc_stamp(1_795_218_170 * 1_000_000_000), "20261120T234250Z");
        assert_eq!(utc_stamp(951_782_400 * 1_000_000_000), "20000229T000000Z");
        assert_eq!(utc_date_time(0), "1970-01-01 00:00:00");
        assert_eq!(
            utc_date_time(1_795_218_170 * 1_000_000_000 + 999_999_999),
            "2026-11-20 23:42:50"
        );
        // Before the epoch: the second that holds it, not the one after.
        assert_eq!(utc_date_time(-1), "1969-12-31 23:59:59");
        assert_eq!(utc_date_time(i64::MIN), "1677-09-21 00:12:43");
        assert_eq!(utc_date_time(i64::MAX), "2262-04-11 23:47:16");
        // Leap years: 2000 yes, 1900 and 2100 no.
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(-25_508), (1900, 3, 1));
        assert_eq!(civil_from_days(47_541), (2100, 3, 1));
    }

    #[test]
    fn axes_tick_round_values_in_a_unit_that_fits() {
        let labels = |start: i64, end: i64, n: usize| -> Vec<String> {
            let a = TimeAxis::new(start, end, n);
            a.ticks(start, end).map(|t| a.label(t)).collect()
        };
        assert_eq!(labels(0, 7_499_991_750, 4), ["0 s", "2 s", "4 s", "6 s"]);
        assert_eq!(labels(0, 7_500_000_000, 15).last().unwrap(), "7.5 s");
        assert_eq!(
            labels(0, 120_000_000, 6),
            [
                "0 ms", "20 ms", "40 ms", "60 ms", "80 ms", "100 ms", "120 ms"
            ]
        );
        assert_eq!(labels(0, 35_000, 7).last().unwrap(), "35 µs");
        assert_eq!(
            labels(7_499_990_000, 7_500_010_000, 2),
            ["7.49999 s", "7.5 s", "7.50001 s"]
        );
        assert_eq!(
            labels(100, 140, 4),
            ["100 ns", "110 ns", "120 ns", "130 ns", "140 ns"]
        );
        let a = TimeAxis::new(-1_500, 1_500, 3);
        assert_eq!(
            a.ticks(-1_500, 1_500).collect::<Vec<_>>(),
            [-1_000, 0, 1_000]
        );
        assert_eq!(a.label(-1_000), "-1 µs");
        // The whole clock: ticks stop before overflowing.
        let a = TimeAxis::new(i64::MIN, i64::MAX, 4);
        let ticks: Vec<i64> = a.ticks(i64::MIN, i64::MAX).collect();
        assert!(!ticks.is_empty() && ticks.len() <= 5, "{ticks:?}");
        assert_eq!(a.label(0), "0 s");
    }
}
