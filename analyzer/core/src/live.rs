//! One live-loading model for every view: the lifecycle of a view's background load (start, follow a
//! growing trace, take new results, settle, stop) written once, over any snapshot type.
//!
//! A view owns a [`LiveLoad`] and says how it follows a growing trace ([`Growth`]): views whose result
//! depends on the whole interval (statistics, density, Ocelotl, TraceViz) reload it, at most once per
//! period, keeping the previous result on screen until the new one is complete; views that list
//! events (Gantt, table) load only what is new and append it. The view gives a closure that starts the
//! loader for a [`Step`]; everything else — when to start, what is new, what to show, whether frames
//! must go on — is decided here, so it is tested here without a window.
//!
//! The rules by which the view groups, their time bars and selections follow a growing trace are in
//! [`crate::sync::ViewGroups::trace_grew`] and [`crate::timebar::TimeBar::trace_grew`].
//!
//! Start here: [`LiveLoad`], [`Growth`], [`Step`].

use std::time::{Duration, Instant};

use socscope_tracedb::{TimeRange, Timestamp};

use crate::loader::{LoaderHandle, Progress};

/// How a view follows a growing trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Growth {
    /// The whole interval is loaded again, at most once per `every`; until the new load is finished
    /// its partial results are not shown (the previous complete result stays).
    Reload {
        /// The shortest time between two reloads.
        every: Duration,
    },
    /// Only the new part of the interval is loaded, and its results are appended to the view's.
    Append,
}

impl Growth {
    /// What the statistics and density views do: reload once a second at most.
    pub const RELOAD_EACH_SECOND: Growth = Growth::Reload {
        every: Duration::from_secs(1),
    };
}

/// What a load started by [`LiveLoad`] is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepKind {
    /// A new interval (the view's previous results are dropped).
    Fresh,
    /// The same interval, grown: the whole of it again ([`Growth::Reload`]).
    Reload,
    /// Only the part after what was loaded ([`Growth::Append`]); its results go after the loaded ones.
    Append,
}

/// One load to start: the interval to read and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// The interval to read.
    pub range: TimeRange,
    /// The whole interval the view will have loaded once this step is done.
    pub loaded: TimeRange,
    /// Why.
    pub kind: StepKind,
}

/// A view's background load over a possibly growing interval.
pub struct LiveLoad<S> {
    handle: Option<LoaderHandle<S>>,
    /// The generation of the last snapshot taken by [`LiveLoad::poll`].
    seen: u64,
    loaded: TimeRange,
    /// Where the running load started (its progress counts from there).
    load_start: Timestamp,
    growth: Growth,
    /// A reload runs: its partial results are withheld.
    refreshing: bool,
    last_reload: Option<Instant>,
    truncated: bool,
    /// Events and chunks the earlier steps of an appending view delivered: its results hold them too,
    /// so its progress counts them (a live Gantt's count is of what it shows, not of the last step).
    appended: (u64, u64),
}

impl<S: Clone> LiveLoad<S> {
    /// Nothing loaded yet; `range` is what the view will load first.
    pub fn new(range: TimeRange, growth: Growth) -> Self {
        Self {
            handle: None,
            seen: 0,
            loaded: range,
            load_start: range.start,
            growth,
            refreshing: false,
            last_reload: None,
            truncated: false,
            appended: (0, 0),
        }
    }

    /// The interval loaded (or being loaded).
    pub fn loaded(&self) -> TimeRange {
        self.loaded
    }

    /// The view stopped its load at a cap ([`LiveLoad::truncate`]); it does not follow growth any more.
    pub fn truncated(&self) -> bool {
        self.truncated
    }

    /// Loads `range` afresh (a new interval or filter).
    pub fn load(&mut self, range: TimeRange, start: impl FnOnce(Step) -> LoaderHandle<S>) {
        self.truncated = false;
        self.refreshing = false;
        self.begin(
            Step {
                range,
                loaded: range,
                kind: StepKind::Fresh,
            },
            start,
        );
    }

    fn begin(&mut self, step: Step, start: impl FnOnce(Step) -> LoaderHandle<S>) {
        self.appended = match (step.kind, self.progress()) {
            (StepKind::Append, Some(p)) => (p.events, p.chunks),
            _ => (0, 0),
        };
        self.seen = 0;
        self.loaded = step.loaded;
        self.load_start = step.range.start;
        self.handle = Some(start(step));
    }

    /// The interval grew to end at `end` (a live trace): starts what [`Growth`] says, unless a load is
    /// still running, nothing is new, the view was truncated, or (for a reload) the last one was less
    /// than the period ago. Returns the step started.
    pub fn extend(
        &mut self,
        end: Timestamp,
        start: impl FnOnce(Step) -> LoaderHandle<S>,
    ) -> Option<Step> {
        self.extend_at(Instant::now(), end, start)
    }

    /// [`LiveLoad::extend`] at time `now` (tests give their own clock).
    pub fn extend_at(
        &mut self,
        now: Instant,
        end: Timestamp,
        start: impl FnOnce(Step) -> LoaderHandle<S>,
    ) -> Option<Step> {
        if self.busy() || self.truncated || end <= self.loaded.end {
            return None;
        }
        let grown = TimeRange::new(self.loaded.start, end);
        let step = match self.growth {
            Growth::Reload { every } => {
                if self
                    .last_reload
                    .is_some_and(|t| now.saturating_duration_since(t) < every)
                {
                    return None;
                }
                self.last_reload = Some(now);
                self.refreshing = true;
                Step {
                    range: grown,
                    loaded: grown,
                    kind: StepKind::Reload,
                }
            }
            Growth::Append => Step {
                range: TimeRange::new(self.loaded.end, end),
                loaded: grown,
                kind: StepKind::Append,
            },
        };
        self.begin(step, start);
        Some(step)
    }

    /// A result newer than the last one taken, to show; a reload's results only once it is finished.
    pub fn poll(&mut self) -> Option<S> {
        let l = self.handle.as_ref()?;
        let finished = l.progress().finished;
        if self.refreshing && !finished {
            return None;
        }
        let out = l.snapshot_if_newer(self.seen).map(|(g, s)| {
            self.seen = g;
            s
        });
        if finished {
            self.refreshing = false;
        }
        out
    }

    /// Loading, or finished with a result not yet taken by [`LiveLoad::poll`]: frames must go on.
    pub fn busy(&self) -> bool {
        self.handle.as_ref().is_some_and(|l| !l.settled(self.seen))
    }

    /// Whether the view has not yet loaded up to `end`, the end of its group's interval: a grown trace
    /// it will extend to on a later frame (reloads are throttled), so frames must go on.
    pub fn catching_up(&self, end: Timestamp) -> bool {
        !self.truncated && self.loaded.end < end
    }

    /// How far the running (or last) load has come: its interval (`loaded_ns`, `total_ns`) is the
    /// running step's, its `events` and `chunks` all that the view's results hold (for an appending
    /// view, every step since the last fresh load).
    pub fn progress(&self) -> Option<Progress> {
        self.handle.as_ref().map(|l| {
            let mut p = l.progress();
            p.events += self.appended.0;
            p.chunks += self.appended.1;
            p
        })
    }

    /// Stops the running load (the results so far stay).
    pub fn stop(&mut self) {
        if let Some(l) = &self.handle {
            l.cancel();
        }
    }

    /// Stops the load at a cap the view reached (too many events to hold): what is loaded then ends
    /// where the load had come when `reached_ns` (progress read before the last snapshot taken) was
    /// read, and the view no longer follows growth.
    pub fn truncate(&mut self, reached_ns: i64) {
        if self.truncated {
            return;
        }
        self.stop();
        self.truncated = true;
        let end = (self.load_start + reached_ns).clamp(self.loaded.start + 1, self.loaded.end);
        self.loaded = TimeRange::new(self.loaded.start, end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loader::spawn_task;
    use std::sync::mpsc;

    /// A task that publishes `value` then waits for the test to let it finish.
    fn gated(value: u32, gate: mpsc::Receiver<()>) -> LoaderHandle<u32> {
        spawn_task(10, move |p| {
            p.publish(value, 5, 1, 1)?;
            let _ = gate.recv();
            p.publish(value + 1, 10, 2, 2)
        })
    }

    fn wait_settled(l: &LiveLoad<u32>) {
        let t = Instant::now();
        while l.progress().is_some_and(|p| !p.finished) {
            assert!(t.elapsed() < Duration::from_secs(10));
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    #[test]
    fn a_fresh_load_shows_partial_results_then_settles() {
        let mut l = LiveLoad::new(TimeRange::new(0, 10), Growth::RELOAD_EACH_SECOND);
        let (tx, rx) = mpsc::channel();
        l.load(TimeRange::new(0, 10), |s| {
            assert_eq!(s.kind, StepKind::Fresh);
            gated(1, rx)
        });
        // The partial result is shown while the load runs.
        let t = Instant::now();
        let first = loop {
            if let Some(v) = l.poll() {
                break v;
            }
            assert!(t.elapsed() < Duration::from_secs(10));
            std::thread::sleep(Duration::from_millis(2));
        };
        assert_eq!(first, 1);
        assert!(l.busy());
        tx.send(()).unwrap();
        wait_settled(&l);
        assert!(l.busy(), "finished, but the last result is not taken yet");
        assert_eq!(l.poll(), Some(2));
        // The end of the load is one more generation without a new snapshot value.
        let _ = l.poll();
        assert!(!l.busy());
    }

    #[test]
    fn reload_is_throttled_and_withholds_partial_results() {
        let mut l = LiveLoad::new(TimeRange::new(0, 10), Growth::RELOAD_EACH_SECOND);
        l.load(TimeRange::new(0, 10), |_| {
            spawn_task(10, |p| p.publish(7, 10, 1, 1))
        });
        wait_settled(&l);
        assert_eq!(l.poll(), Some(7));
        let _ = l.poll();
        let t0 = Instant::now();
        // Nothing new: nothing starts.
        assert_eq!(l.extend_at(t0, 10, |_| unreachable!()), None);
        let (tx, rx) = mpsc::channel();
        let step = l.extend_at(t0, 20, |_| gated(10, rx)).unwrap();
        assert_eq!(step.kind, StepKind::Reload);
        assert_eq!(step.range, TimeRange::new(0, 20));
        assert_eq!(l.loaded(), TimeRange::new(0, 20));
        // The partial result of the reload is not shown: the old one stays.
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(l.poll(), None);
        tx.send(()).unwrap();
        wait_settled(&l);
        assert_eq!(l.poll(), Some(11));
        let _ = l.poll();
        // Within the period, a grown trace waits (and the view is catching up); after it, it reloads.
        assert_eq!(
            l.extend_at(t0 + Duration::from_millis(500), 30, |_| unreachable!()),
            None
        );
        assert!(l.catching_up(30));
        let s = l.extend_at(t0 + Duration::from_millis(1001), 30, |_| {
            spawn_task(10, |p| p.publish(0, 10, 1, 1))
        });
        assert_eq!(s.map(|s| s.range), Some(TimeRange::new(0, 30)));
        assert!(!l.catching_up(30));
    }

    #[test]
    fn append_loads_only_what_is_new_and_never_while_busy() {
        let mut l = LiveLoad::new(TimeRange::new(0, 10), Growth::Append);
        let (tx, rx) = mpsc::channel();
        l.load(TimeRange::new(0, 10), |_| gated(1, rx));
        // A load runs: a grown trace waits for it.
        assert_eq!(l.extend(20, |_| unreachable!()), None);
        tx.send(()).unwrap();
        wait_settled(&l);
        while l.poll().is_some() {}
        let step = l
            .extend(20, |_| spawn_task(10, |p| p.publish(3, 10, 1, 1)))
            .unwrap();
        assert_eq!(step.kind, StepKind::Append);
        assert_eq!(step.range, TimeRange::new(10, 20));
        assert_eq!(step.loaded, TimeRange::new(0, 20));
    }

    #[test]
    fn an_appending_view_counts_the_events_of_every_step_it_holds() {
        let mut l = LiveLoad::new(TimeRange::new(0, 10), Growth::Append);
        l.load(TimeRange::new(0, 10), |_| {
            spawn_task(10, |p| p.publish(1, 10, 5_000, 3))
        });
        wait_settled(&l);
        while l.poll().is_some() {}
        l.extend(20, |_| spawn_task(10, |p| p.publish(2, 10, 300, 1)))
            .unwrap();
        wait_settled(&l);
        let p = l.progress().unwrap();
        assert_eq!((p.events, p.chunks), (5_300, 4));
        // The step's own interval still measures how far it has come.
        assert_eq!((p.loaded_ns, p.total_ns), (10, 10));
        while l.poll().is_some() {}
        l.extend(25, |_| spawn_task(5, |p| p.publish(3, 5, 20, 1)))
            .unwrap();
        wait_settled(&l);
        assert_eq!(l.progress().unwrap().events, 5_320);
        // A fresh interval starts the count over.
        l.load(TimeRange::new(0, 5), |_| {
            spawn_task(5, |p| p.publish(4, 5, 7, 1))
        });
        wait_settled(&l);
        assert_eq!(l.progress().unwrap().events, 7);

        // A reloading view's load holds the whole interval itself.
        let mut r = LiveLoad::new(TimeRange::new(0, 10), Growth::RELOAD_EACH_SECOND);
        r.load(TimeRange::new(0, 10), |_| {
            spawn_task(10, |p| p.publish(1, 10, 50, 1))
        });
        wait_settled(&r);
        while r.poll().is_some() {}
        r.extend(20, |_| spawn_task(20, |p| p.publish(2, 20, 80, 1)))
            .unwrap();
        wait_settled(&r);
        assert_eq!(r.progress().unwrap().events, 80);
    }

    #[test]
    fn a_truncated_view_keeps_what_it_reached_and_stops_following() {
        let mut l = LiveLoad::new(TimeRange::new(100, 200), Growth::Append);
        let (tx, rx) = mpsc::channel();
        l.load(TimeRange::new(100, 200), |_| gated(1, rx));
        l.truncate(30);
        drop(tx);
        assert!(l.truncated());
        assert_eq!(l.loaded(), TimeRange::new(100, 130));
        wait_settled(&l);
        assert!(l.progress().unwrap().cancelled);
        assert_eq!(l.extend(300, |_| unreachable!()), None);
        assert!(!l.catching_up(300));
        // A new interval starts over.
        l.load(TimeRange::new(0, 50), |_| {
            spawn_task(50, |p| p.publish(1, 50, 1, 1))
        });
        assert!(!l.truncated());
    }
}
