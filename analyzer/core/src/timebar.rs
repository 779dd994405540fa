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

#[cfg(test)]
mod tests {
    use super::*;

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
}
