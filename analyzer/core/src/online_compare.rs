//! Comparing a run with a reference while the run arrives (the collector's `reference:TRACE>SCORE`
//! trigger): the run's state time per (producer, type) is accumulated in the reference's slices, and
//! every slice, once it is complete, closes a sliding window of the last [`WINDOW_SLICES`] slices whose
//! score is [`compare`](crate::compare)'s dissimilarity against the same slices of the reference.
//!
//! Times are taken from each trace's first event, as `socscope compare` does. Past the reference's end,
//! the run is compared with the reference's mean slice (its steady state).
//!
//! **Lag**: a slice is scored once the stream has passed its end by one more slice (states arrive when
//! they close; one slice of grace lets the ones ending just after the slice in), so a departure is known
//! `WINDOW_SLICES + 1` slices after the window starts, at worst: 1.1 s for a 10 s reference cut into the
//! default 100 slices. A state longer than the grace that arrives after its slices were scored is not
//! counted in them.
//!
//! Start here: [`OnlineComparison`].

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use crate::compare::{ReferenceProfile, dissimilarity};

/// Slices in the sliding window that is scored.
pub const WINDOW_SLICES: usize = 10;

/// A departing window found online.
#[derive(Debug, Clone, PartialEq)]
pub struct OnlineDeparture {
    /// Window start, ns on the run's clock.
    pub start: i64,
    /// Window end, ns on the run's clock.
    pub end: i64,
    /// Its score.
    pub score: f64,
    /// The (producer, type) whose state time differs most, as `producer/type`.
    pub who: String,
}

/// The comparison of one run with a reference, fed as the run's states close.
pub struct OnlineComparison {
    profile: Arc<ReferenceProfile>,
    threshold: f64,
    /// Key index by producer then type name; reference keys first, then keys only the run has.
    index: HashMap<String, HashMap<String, usize>>,
    names: Vec<(String, String)>,
    /// State time per key in slices `base..`, ns.
    run: Vec<VecDeque<f64>>,
    base: usize,
    /// The run's first event time (its time origin).
    origin: Option<i64>,
    /// Next slice whose window is to be scored.
    next: usize,
    departing: bool,
    /// The reference's mean slice, per key (compared with past its end).
    mean: Vec<f64>,
}

impl OnlineComparison {
    /// Compares with `profile`; a window scoring `threshold` or more is a departure.
    pub fn new(profile: Arc<ReferenceProfile>, threshold: f64) -> Self {
        let mut index: HashMap<String, HashMap<String, usize>> = HashMap::new();
        for (i, (p, t)) in profile.keys.iter().enumerate() {
            index.entry(p.clone()).or_default().insert(t.clone(), i);
        }
        let n = profile.slices().max(1) as f64;
        let mean = profile
            .values
            .iter()
            .map(|v| v.iter().sum::<f64>() / n)
            .collect();
        Self {
            names: profile.keys.clone(),
            run: vec![VecDeque::new(); profile.keys.len()],
            profile,
            threshold,
            index,
            base: 0,
            origin: None,
            next: 0,
            departing: false,
            mean,
        }
    }

    fn key(&mut self, producer: &str, ty: &str) -> usize {
        if let Some(k) = self.index.get(producer).and_then(|m| m.get(ty)) {
            return *k;
        }
        let k = self.names.len();
        self.names.push((producer.to_string(), ty.to_string()));
        self.run.push(VecDeque::new());
        self.mean.push(0.0);
        self.index
            .entry(producer.to_string())
            .or_default()
            .insert(ty.to_string(), k);
        k
    }

    fn slice_of(&self, t: i64) -> usize {
        let origin = self.origin.unwrap_or(0);
        (((t - origin).max(0) as f64) / self.profile.slice_ns) as usize
    }

    /// A state of the run closed.
    pub fn state(&mut self, producer: &str, ty: &str, start: i64, end: i64) {
        let origin = *self.origin.get_or_insert(start);
        if end <= start {
            return;
        }
        let k = self.key(producer, ty);
        let slice = self.profile.slice_ns;
        let first = self.slice_of(start).max(self.base);
        let last = self.slice_of(end);
        for s in first..=last {
            let a = origin as f64 + s as f64 * slice;
            let overlap = (end as f64).min(a + slice) - (start as f64).max(a);
            if overlap <= 0.0 {
                continue;
            }
            let at = s - self.base;
            let v = &mut self.run[k];
            if v.len() <= at {
                v.resize(at + 1, 0.0);
            }
            v[at] += overlap;
        }
    }

    /// The stream reached `now`: scores every slice now complete; returns the departures that began.
    pub fn advance(&mut self, now: i64) -> Vec<OnlineDeparture> {
        let Some(origin) = self.origin else {
            return Vec::new();
        };
        let mut out = Vec::new();
        // Slice `next` is complete once the stream is a slice past its end.
        while self.slice_of(now) >= self.next + 2 {
            let last = self.next;
            let first = (last + 1).saturating_sub(WINDOW_SLICES).max(self.base);
            let (mut r, mut x) = (Vec::new(), Vec::new());
            let mut worst = (0.0f64, 0usize);
            for k in 0..self.names.len() {
                let mut rs = 0.0;
                let mut xs = 0.0;
                for s in first..=last {
                    rs += match self.profile.values.get(k) {
                        Some(v) => v.get(s).copied().unwrap_or(self.mean[k]),
                        None => 0.0,
                    };
                    xs += self.run[k].get(s - self.base).copied().unwrap_or(0.0);
                }
                if (xs - rs).abs() > worst.0 {
                    worst = ((xs - rs).abs(), k);
                }
                r.push(rs);
                x.push(xs);
            }
            let score = dissimilarity(&r, &x);
            let departs = score >= self.threshold;
            if departs && !self.departing {
                let slice = self.profile.slice_ns;
                let (p, t) = &self.names[worst.1];
                out.push(OnlineDeparture {
                    start: origin + (first as f64 * slice) as i64,
                    end: origin + ((last + 1) as f64 * slice) as i64,
                    score,
                    who: format!("{p}/{t}"),
                });
            }
            self.departing = departs;
            self.next += 1;
            // Keep only the slices a later window still needs.
            let keep_from = (self.next + 1).saturating_sub(WINDOW_SLICES);
            while self.base < keep_from {
                for v in &mut self.run {
                    v.pop_front();
                }
                self.base += 1;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(slices: usize) -> Arc<ReferenceProfile> {
        // Two threads each running half of every 100 ns slice.
        Arc::new(ReferenceProfile {
            slice_ns: 100.0,
            keys: vec![
                ("a".into(), "running".into()),
                ("b".into(), "running".into()),
            ],
            values: vec![vec![50.0; slices], vec![50.0; slices]],
        })
    }

    #[test]
    fn the_same_behaviour_never_departs_and_a_new_thread_does_once() {
        let mut c = OnlineComparison::new(profile(40), 0.3);
        let mut found = Vec::new();
        for s in 0..60i64 {
            let t = s * 100;
            c.state("a", "running", t, t + 50);
            if (20..30).contains(&s) {
                // Thread c takes b's time.
                c.state("c", "running", t + 50, t + 100);
            } else {
                c.state("b", "running", t + 50, t + 100);
            }
            found.extend(c.advance(t + 100));
        }
        assert_eq!(found.len(), 1, "{found:?}");
        let d = &found[0];
        assert!(d.score >= 0.3, "{d:?}");
        assert!(d.start <= 2000 && d.end > 2000 && d.end <= 2400, "{d:?}");
        assert!(d.who == "c/running" || d.who == "b/running", "{d:?}");
    }

    #[test]
    fn past_the_reference_the_mean_slice_is_the_reference() {
        let mut c = OnlineComparison::new(profile(10), 0.3);
        let mut found = Vec::new();
        for s in 0..50i64 {
            let t = s * 100;
            c.state("a", "running", t, t + 50);
            c.state("b", "running", t + 50, t + 100);
            found.extend(c.advance(t + 100));
        }
        assert!(found.is_empty(), "{found:?}");
    }
}
