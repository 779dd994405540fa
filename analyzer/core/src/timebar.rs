//! The time management bar under every view (RT-460 §2.2): a double-range selection over the whole trace,
//! arrows that move it, "whole trace", numeric start and end, "resynchronise" (back to what the view
//! shows) and "load" (what the view should show next).
//!
//! Start here: [`TimeBar`].

use socscope_tracedb::TimeRange;

/// The state of one view's time bar.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimeBar {
    /// The whole trace; grows while a live trace is written.
    pub whole: TimeRange,
    /// What the user selected (the coloured part of the slider).
    pub selection: TimeRange,
    /// What the view displays (last loaded).
    pub displayed: TimeRange,
}

impl TimeBar {
    /// A bar over `whole` with everything selected and displayed.
    pub fn new(whole: TimeRange) -> Self {
        let whole = non_empty(whole);
        Self {
            whole,
            selection: whole,
            displayed: whole,
        }
    }

    /// The trace grew (or shrank, when reopened): a selection that covered the whole trace keeps covering
    /// it, others are clamped.
    pub fn set_whole(&mut self, whole: TimeRange) {
        let whole = non_empty(whole);
        let followed = self.selection == self.whole;
        self.whole = whole;
        if followed {
            self.selection = whole;
        } else {
            self.selection = self.clamp(self.selection);
        }
    }

    /// A live trace grew from `old` to `whole`: the bar spans the new whole trace; a view that displayed
    /// up to the old end keeps following the end, and a selection that was what the view displays grows
    /// with it (else "Load" would light up for no user action); anything else stays where the user put it.
    pub fn trace_grew(&mut self, old: TimeRange, whole: TimeRange) {
        let follow = self.displayed.end >= old.end;
        let selection_follows = self.selection == self.displayed;
        self.set_whole(whole);
        if follow {
            self.displayed = TimeRange::new(
                self.displayed.start,
                whole.end.max(self.displayed.start + 1),
            );
            if selection_follows {
                self.selection = self.displayed;
            }
        }
    }

    /// Whether the selection is the whole trace.
    pub fn is_whole(&self) -> bool {
        self.selection == self.whole
    }

    /// Selects the whole trace.
    pub fn select_whole(&mut self) {
        self.selection = self.whole;
    }

    /// Selects `[start, end)`, clamped to the trace, at least 1 ns long; start and end may come in either
    /// order.
    pub fn select(&mut self, start: i64, end: i64) {
        let (a, b) = if start <= end {
            (start, end)
        } else {
            (end, start)
        };
        self.selection = self.clamp(TimeRange::new(a, b.max(a + 1)));
    }

    /// Sets the start only (the numeric field).
    pub fn set_start(&mut self, start: i64) {
        self.select(start, self.selection.end);
    }

    /// Sets the end only (the numeric field).
    pub fn set_end(&mut self, end: i64) {
        self.select(self.selection.start, end);
    }

    /// Moves the selection by `fraction` of its own length (negative: to the left), keeping its length
    /// and stopping at the trace's ends.
    pub fn shift(&mut self, fraction: f64) {
        let len = self.selection.len();
        let by = (len as f64 * fraction) as i64;
        let max_start = self.whole.end - len;
        let start =
            (self.selection.start + by).clamp(self.whole.start, max_start.max(self.whole.start));
        self.selection = TimeRange::new(start, start + len);
    }

    /// Back to what the view displays.
    pub fn resync(&mut self) {
        self.selection = self.displayed;
    }

    /// The view is about to load the selection: returns it and marks it displayed.
    pub fn load(&mut self) -> TimeRange {
        self.displayed = self.selection;
        self.selection
    }

    /// Where `t` falls on the bar, 0 to 1.
    pub fn fraction_of(&self, t: i64) -> f64 {
        let len = self.whole.len().max(1) as f64;
        ((t - self.whole.start) as f64 / len).clamp(0.0, 1.0)
    }

    /// The time at `fraction` (0 to 1) of the bar.
    pub fn time_at(&self, fraction: f64) -> i64 {
        self.whole.start + (self.whole.len() as f64 * fraction.clamp(0.0, 1.0)).round() as i64
    }

    fn clamp(&self, r: TimeRange) -> TimeRange {
        let start = r.start.clamp(self.whole.start, self.whole.end - 1);
        let end = r.end.clamp(start + 1, self.whole.end);
        TimeRange::new(start, end)
    }
}

fn non_empty(r: TimeRange) -> TimeRange {
    if r.is_empty() {
        TimeRange::new(r.start, r.start + 1)
    } else {
        r
    }
}

/// A timestamp in trace nanoseconds as the bar shows it: seconds with nanosecond precision.
pub fn format_ns(t: i64) -> String {
    let sign = if t < 0 { "-" } else { "" };
    let a = t.unsigned_abs();
    format!("{sign}{}.{:09}", a / 1_000_000_000, a % 1_000_000_000)
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
        let step = self.step;
        let first =
            start.div_euclid(step) * step + if start.rem_euclid(step) == 0 { 0 } else { step };
        (0..)
            .map(move |i: i64| first + i * step)
            .take_while(move |t| *t <= end)
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

/// Parses what [`format_ns`] prints, or plain nanoseconds with an `ns` suffix, or seconds with `s`,
/// milliseconds with `ms`, microseconds with `us`.
pub fn parse_ns(text: &str) -> Option<i64> {
    let t = text.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ns") {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix("us").or_else(|| t.strip_suffix("µs")) {
        (n, 1e3)
    } else if let Some(n) = t.strip_suffix("ms") {
        (n, 1e6)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1e9)
    } else {
        (t, 1e9)
    };
    let num = num.trim();
    if scale == 1e9 && !num.contains(['e', 'E']) {
        // Exact: seconds and up to nine decimals, no float rounding.
        let (neg, digits) = match num.strip_prefix('-') {
            Some(d) => (true, d),
            None => (false, num),
        };
        let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
        if int.is_empty() && frac.is_empty() || frac.len() > 9 {
            return None;
        }
        let int: i64 = if int.is_empty() { 0 } else { int.parse().ok()? };
        let frac_ns: i64 = if frac.is_empty() {
            0
        } else {
            format!("{frac:0<9}").parse().ok()?
        };
        let v = int.checked_mul(1_000_000_000)?.checked_add(frac_ns)?;
        return Some(if neg { -v } else { v });
    }
    let v: f64 = num.parse().ok()?;
    v.is_finite().then(|| (v * scale).round() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_tick_round_values_in_a_unit_that_fits() {
        let labels = |start: i64, end: i64, n: usize| -> Vec<String> {
            let a = TimeAxis::new(start, end, n);
            a.ticks(start, end).map(|t| a.label(t)).collect()
        };
        // A 7.5 s trace in a few ticks: seconds, half-seconds where the step needs them.
        assert_eq!(labels(0, 7_499_991_750, 4), ["0 s", "2 s", "4 s", "6 s"]);
        assert_eq!(labels(0, 7_500_000_000, 15).last().unwrap(), "7.5 s");
        // 120 ms and 35 µs spans in their own units.
        assert_eq!(
            labels(0, 120_000_000, 6),
            [
                "0 ms", "20 ms", "40 ms", "60 ms", "80 ms", "100 ms", "120 ms"
            ]
        );
        assert_eq!(labels(0, 35_000, 7).last().unwrap(), "35 µs");
        // Deep zoom far from the start: as many decimals as the step needs, no more.
        assert_eq!(
            labels(7_499_990_000, 7_500_010_000, 2),
            ["7.49999 s", "7.5 s", "7.50001 s"]
        );
        assert_eq!(
            labels(100, 140, 4),
            ["100 ns", "110 ns", "120 ns", "130 ns", "140 ns"]
        );
        // Ticks stay inside the interval, negative times included.
        let a = TimeAxis::new(-1_500, 1_500, 3);
        assert_eq!(
            a.ticks(-1_500, 1_500).collect::<Vec<_>>(),
            [-1_000, 0, 1_000]
        );
        assert_eq!(a.label(-1_000), "-1 µs");
    }

    #[test]
    fn shift_keeps_length_and_stops_at_the_ends() {
        let mut bar = TimeBar::new(TimeRange::new(0, 1000));
        bar.select(100, 300);
        bar.shift(0.5);
        assert_eq!(bar.selection, TimeRange::new(200, 400));
        bar.shift(10.0);
        assert_eq!(bar.selection, TimeRange::new(800, 1000));
        bar.shift(-100.0);
        assert_eq!(bar.selection, TimeRange::new(0, 200));
    }

    #[test]
    fn select_orders_clamps_and_is_never_empty() {
        let mut bar = TimeBar::new(TimeRange::new(0, 1000));
        bar.select(700, -50);
        assert_eq!(bar.selection, TimeRange::new(0, 700));
        bar.select(5000, 5000);
        assert_eq!(bar.selection, TimeRange::new(999, 1000));
        bar.set_start(400);
        assert_eq!(bar.selection, TimeRange::new(400, 1000));
        bar.set_end(600);
        assert_eq!(bar.selection, TimeRange::new(400, 600));
    }

    #[test]
    fn load_resync_and_whole() {
        let mut bar = TimeBar::new(TimeRange::new(0, 1000));
        bar.select(10, 20);
        assert_eq!(bar.load(), TimeRange::new(10, 20));
        bar.select(30, 40);
        bar.resync();
        assert_eq!(bar.selection, TimeRange::new(10, 20));
        bar.select_whole();
        assert!(bar.is_whole());
    }

    #[test]
    fn a_growing_trace_keeps_a_whole_selection_whole() {
        let mut bar = TimeBar::new(TimeRange::new(0, 1000));
        bar.set_whole(TimeRange::new(0, 2000));
        assert_eq!(bar.selection, TimeRange::new(0, 2000));
        bar.select(100, 200);
        bar.set_whole(TimeRange::new(0, 3000));
        assert_eq!(bar.selection, TimeRange::new(100, 200));
        assert_eq!(bar.whole, TimeRange::new(0, 3000));
    }

    #[test]
    fn a_bar_at_the_end_follows_a_growing_trace_and_one_in_the_past_stays() {
        let old = TimeRange::new(0, 1000);
        let mut bar = TimeBar::new(old);
        bar.trace_grew(old, TimeRange::new(0, 1500));
        assert_eq!(bar.displayed, TimeRange::new(0, 1500));
        assert_eq!(bar.selection, TimeRange::new(0, 1500));
        // Displaying the tail with another selection pending: the display follows, the selection stays.
        bar.displayed = TimeRange::new(500, 1500);
        bar.select(100, 200);
        bar.trace_grew(TimeRange::new(0, 1500), TimeRange::new(0, 2000));
        assert_eq!(bar.displayed, TimeRange::new(500, 2000));
        assert_eq!(bar.selection, TimeRange::new(100, 200));
        // A view on the past stays there.
        bar.displayed = TimeRange::new(100, 200);
        bar.trace_grew(TimeRange::new(0, 2000), TimeRange::new(0, 2500));
        assert_eq!(bar.displayed, TimeRange::new(100, 200));
        assert_eq!(bar.whole, TimeRange::new(0, 2500));
    }

    #[test]
    fn fractions_map_back_to_times() {
        let bar = TimeBar::new(TimeRange::new(1000, 2000));
        assert_eq!(bar.fraction_of(1500), 0.5);
        assert_eq!(bar.time_at(0.25), 1250);
        assert_eq!(bar.fraction_of(0), 0.0);
    }

    #[test]
    fn timestamps_print_and_parse_exactly() {
        assert_eq!(format_ns(1_234_567_891), "1.234567891");
        assert_eq!(format_ns(-5), "-0.000000005");
        for t in [0, 1, 999_999_999, 1_234_567_891, -5, 86_400_000_000_123] {
            assert_eq!(parse_ns(&format_ns(t)), Some(t));
        }
        assert_eq!(parse_ns("1.5"), Some(1_500_000_000));
        assert_eq!(parse_ns("250ms"), Some(250_000_000));
        assert_eq!(parse_ns("42ns"), Some(42));
        assert_eq!(parse_ns("3us"), Some(3000));
        assert_eq!(parse_ns("x"), None);
        assert_eq!(parse_ns("1.0000000001"), None);
    }
}
