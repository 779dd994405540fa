//! The bisection over p that lists every significantly different partition, and Ocelotl's
//! choice of the p shown first.

use serde::Serialize;

mod lines;
pub(crate) use lines::{LineCounts, bisect_by_lines};

/// Gain and loss of an aggregate or of a whole partition (sums of its aggregates).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Quality {
    pub gain: f64,
    pub loss: f64,
}

impl Quality {
    pub const ZERO: Quality = Quality {
        gain: 0.0,
        loss: 0.0,
    };

    /// lpaggreg's `Quality::compare` for the spatiotemporal list: equal, or both fields within
    /// a relative 1e-13 of the pair's magnitude.
    fn nearly_equal(self, other: Quality) -> bool {
        if self == other {
            return true;
        }
        let prec = (self.gain + other.gain).max(self.loss + other.loss) / 2.0 * 1e-13;
        (self.gain - other.gain).abs() < prec && (self.loss - other.loss).abs() < prec
    }
}

/// The two bisection variants of lpaggreg differ in when an interval is explored and in how
/// duplicate neighbours are recognised; both quirks shape the p list, so both are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bisection {
    /// `OLPAggreg`: explore unless both ends have the same (gain, loss); exact dedupe.
    Temporal,
    /// `DLPAggreg`: explore only if gain AND loss both differ; dedupe within 1e-13.
    Spatiotemporal,
}

impl Bisection {
    /// The p where the interval `[p1, p2]` with end qualities `qa` and `qb` is halved, or
    /// `None` if the rule leaves it unexplored; in the original's float arithmetic.
    pub(crate) fn midpoint(
        self,
        p1: f32,
        p2: f32,
        qa: Quality,
        qb: Quality,
        threshold: f32,
    ) -> Option<f32> {
        let width = p2 - p1;
        let go = match self {
            Bisection::Temporal => {
                !((qa.gain == qb.gain && qa.loss == qb.loss) || width <= threshold)
            }
            Bisection::Spatiotemporal => {
                qa.gain != qb.gain && qa.loss != qb.loss && width > threshold
            }
        };
        go.then(|| p1 + width / 2.0)
    }

    /// Whether an entry of quality `b` following one of quality `a` stays in the final list.
    pub(crate) fn distinct(self, a: Quality, b: Quality) -> bool {
        match self {
            Bisection::Temporal => !(a.gain == b.gain && a.loss == b.loss),
            Bisection::Spatiotemporal => !a.nearly_equal(b),
        }
    }
}

/// One significant p: the smallest evaluated p (a multiple of the threshold's power of two)
/// where its partition was optimal, with that partition's quality.
#[derive(Debug, Clone, PartialEq)]
pub struct PEntry<P> {
    /// lpaggreg works with a C float p; every value here is exactly representable.
    pub p: f32,
    pub quality: Quality,
    pub partition: P,
}

/// The list of significant p values found by the bisection, in increasing p.
#[derive(Debug, Clone, PartialEq)]
pub struct PList<P> {
    entries: Vec<PEntry<P>>,
}

/// How Ocelotl picks the p shown when an aggregation is first displayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InitialP {
    /// Ocelotl's default: the p after the largest `| |ΔG| − |ΔL| |` step along the list.
    #[default]
    LargestSumDiff,
    /// The p after the largest `max(|ΔG|, |ΔL|)` step.
    LargestDiff,
    /// The p before the largest `|ΔG − ΔL|` step; the last p if none.
    SumDiff2,
    Zero,
    One,
}

impl<P> PList<P> {
    /// A list of evaluated p in increasing order, deduplicated as the DLP does (for the
    /// overviews published while a bisection runs).
    pub(crate) fn from_entries(entries: Vec<PEntry<P>>) -> Self {
        let mut out: Vec<PEntry<P>> = Vec::with_capacity(entries.len());
        for e in entries {
            if out
                .last()
                .is_none_or(|l| !l.quality.nearly_equal(e.quality))
            {
                out.push(e);
            }
        }
        PList { entries: out }
    }

    pub fn entries(&self) -> &[PEntry<P>] {
        &self.entries
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The p Ocelotl selects first ([`InitialP::LargestSumDiff`]).
    pub fn default_p(&self) -> f64 {
        self.initial_p(InitialP::LargestSumDiff)
    }

    pub fn initial_p(&self, strategy: InitialP) -> f64 {
        let e = &self.entries;
        let p = |i: usize| e.get(i).map_or(0.0, |x| f64::from(x.p));
        let step = |i: usize| {
            (
                (e[i - 1].quality.gain - e[i].quality.gain).abs(),
                (e[i - 1].quality.loss - e[i].quality.loss).abs(),
            )
        };
        match strategy {
            InitialP::Zero => 0.0,
            InitialP::One => 1.0,
            InitialP::LargestSumDiff => {
                let (mut best, mut at) = (0.0, 0);
                for i in 1..e.len() {
                    let (dg, dl) = step(i);
                    let d = (dg - dl).abs();
                    if d > best {
                        best = d;
                        at = i;
                    }
                }
                p(at)
            }
            InitialP::LargestDiff => {
                let (mut best, mut at) = (0.0, 0);
                for i in 1..e.len() {
                    let (dg, dl) = step(i);
                    for d in [dg, dl] {
                        if d > best {
                            best = d;
                            at = i;
                        }
                    }
                }
                p(at)
            }
            InitialP::SumDiff2 => {
                let (mut best, mut at) = (0.0, e.len().saturating_sub(1));
                for i in 0..e.len().saturating_sub(1) {
                    let dg = e[i + 1].quality.gain - e[i].quality.gain;
                    let dl = e[i + 1].quality.loss - e[i].quality.loss;
                    let d = (dg - dl).abs();
                    if d > best {
                        best = d;
                        at = i;
                    }
                }
                p(at)
            }
        }
    }
}

/// What a long bisection tells whoever waits for it, and how they can stop it.
///
/// The GUI and `socscope aggregate` use it for a progress bar, a Cancel button and a first,
/// coarse overview: every evaluated p is handed over with its partition as soon as it is known.
pub trait Observer<P>: Sync {
    /// One more p was evaluated (`evaluations` so far, this one included).
    fn evaluated(&self, _p: f32, _quality: Quality, _partition: &P, _evaluations: usize) {}
    /// Progress inside the current evaluation, as a fraction in [0, 1].
    fn working(&self, _fraction: f64) {}
    /// Polled between evaluations and between steps of one; `true` stops the bisection.
    fn cancelled(&self) -> bool {
        false
    }
}

/// The observer of a run nobody watches.
pub struct Unobserved;

impl<P> Observer<P> for Unobserved {}

/// The bisection was stopped by its observer before it finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the aggregation was cancelled")]
pub struct Cancelled;

/// How the evaluations of a bisection are scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Schedule {
    /// The two halves of an interval side by side: for cheap evaluations.
    Parallel,
    /// One evaluation at a time, in the original's order, each using every core itself: for
    /// evaluations whose working memory must not be held twice.
    Sequential,
}

/// Runs lpaggreg's dichotomy: evaluate p = 0 and p = 1, then recursively halve every interval
/// whose ends differ until it is no wider than `threshold`, all in float arithmetic.
///
/// With [`Schedule::Parallel`] the two halves of an interval are evaluated side by side; the
/// list is still assembled in the original in-order sequence, so the result does not depend
/// on the schedule.
pub(crate) fn bisect<P, F>(threshold: f32, rule: Bisection, eval: &F) -> PList<P>
where
    P: Send,
    F: Fn(f32) -> (Quality, P) + Sync,
{
    let run = Run {
        threshold,
        rule,
        schedule: Schedule::Parallel,
        eval: &|p| Ok(eval(p)),
        observer: &Unobserved,
        evaluations: std::sync::atomic::AtomicUsize::new(0),
    };
    match run.list() {
        Ok(list) => list,
        Err(Cancelled) => unreachable!("an unobserved bisection is never cancelled"),
    }
}

/// [`bisect`] with a schedule, an observer, and evaluations that can be stopped.
pub(crate) fn bisect_observed<P, F>(
    threshold: f32,
    rule: Bisection,
    schedule: Schedule,
    eval: &F,
    observer: &dyn Observer<P>,
) -> Result<PList<P>, Cancelled>
where
    P: Send,
    F: Fn(f32) -> Result<(Quality, P), Cancelled> + Sync,
{
    Run {
        threshold,
        rule,
        schedule,
        eval,
        observer,
        evaluations: std::sync::atomic::AtomicUsize::new(0),
    }
    .list()
}

type Eval<'a, P> = &'a (dyn Fn(f32) -> Result<(Quality, P), Cancelled> + Sync);

struct Run<'a, P> {
    threshold: f32,
    rule: Bisection,
    schedule: Schedule,
    eval: Eval<'a, P>,
    observer: &'a dyn Observer<P>,
    evaluations: std::sync::atomic::AtomicUsize,
}

impl<P: Send> Run<'_, P> {
    fn eval(&self, p: f32) -> Result<(Quality, P), Cancelled> {
        if self.observer.cancelled() {
            return Err(Cancelled);
        }
        let (q, part) = (self.eval)(p)?;
        let n = self
            .evaluations
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        self.observer.evaluated(p, q, &part, n);
        Ok((q, part))
    }

    fn both<A: Send, B: Send>(
        &self,
        a: impl FnOnce() -> A + Send,
        b: impl FnOnce() -> B + Send,
    ) -> (A, B) {
        match self.schedule {
            Schedule::Parallel => rayon::join(a, b),
            Schedule::Sequential => (a(), b()),
        }
    }

    fn list(&self) -> Result<PList<P>, Cancelled> {
        // p = 1 first when one at a time: its partition is the coarsest, the first overview.
        let (r0, r1) = match self.schedule {
            Schedule::Parallel => rayon::join(|| self.eval(0.0), || self.eval(1.0)),
            Schedule::Sequential => {
                let r1 = self.eval(1.0);
                (self.eval(0.0), r1)
            }
        };
        let ((q0, part0), (q1, part1)) = (r0?, r1?);
        let mut raw = vec![PEntry {
            p: 0.0,
            quality: q0,
            partition: part0,
        }];
        raw.extend(self.explore(0.0, 1.0, q0, q1)?);
        raw.push(PEntry {
            p: 1.0,
            quality: q1,
            partition: part1,
        });
        // Each entry is compared with its original left neighbour, and dropped if equal: that
        // keeps the smallest p of every run, as the original's backward deletion loop does.
        let keep: Vec<bool> = (0..raw.len())
            .map(|i| i == 0 || self.rule.distinct(raw[i - 1].quality, raw[i].quality))
            .collect();
        let entries = raw
            .into_iter()
            .zip(keep)
            .filter_map(|(e, k)| k.then_some(e))
            .collect();
        Ok(PList { entries })
    }

    fn explore(
        &self,
        p1: f32,
        p2: f32,
        qa: Quality,
        qb: Quality,
    ) -> Result<Vec<PEntry<P>>, Cancelled> {
        let Some(pm) = self.rule.midpoint(p1, p2, qa, qb, self.threshold) else {
            return Ok(Vec::new());
        };
        let (qm, part) = self.eval(pm)?;
        let (left, right) = self.both(
            || self.explore(p1, pm, qa, qm),
            || self.explore(pm, p2, qm, qb),
        );
        let mut left = left?;
        left.push(PEntry {
            p: pm,
            quality: qm,
            partition: part,
        });
        left.extend(right?);
        Ok(left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake optimiser whose partition changes at the given breakpoints.
    fn steps(breaks: &'static [f32]) -> impl Fn(f32) -> (Quality, usize) + Sync {
        move |p| {
            let k = breaks.iter().filter(|&&b| p >= b).count();
            (
                Quality {
                    gain: k as f64 * 10.0,
                    loss: k as f64,
                },
                k,
            )
        }
    }

    #[test]
    fn reports_the_first_grid_point_after_each_breakpoint() {
        let list = bisect(0.001, Bisection::Temporal, &steps(&[0.3, 0.7]));
        let ps: Vec<f32> = list.entries().iter().map(|e| e.p).collect();
        // 0.3 lies in (307/1024, 308/1024], 0.7 in (716/1024, 717/1024].
        assert_eq!(ps, vec![0.0, 308.0 / 1024.0, 717.0 / 1024.0]);
        assert_eq!(list.entries()[2].partition, 2);
    }

    #[test]
    fn identical_ends_are_not_explored() {
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let eval = |_p: f32| {
            calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            (
                Quality {
                    gain: 1.0,
                    loss: 1.0,
                },
                (),
            )
        };
        let list = bisect(0.001, Bisection::Temporal, &eval);
        assert_eq!(list.len(), 1);
        assert_eq!(calls.into_inner(), 2);
    }

    #[test]
    fn spatiotemporal_rule_needs_both_fields_to_differ() {
        let eval = |p: f32| {
            let q = if p < 0.5 {
                Quality {
                    gain: 1.0,
                    loss: 1.0,
                }
            } else {
                Quality {
                    gain: 2.0,
                    loss: 1.0,
                }
            };
            (q, ())
        };
        let list = bisect(0.001, Bisection::Spatiotemporal, &eval);
        // Loss is equal at both ends, so nothing between 0 and 1 is looked at.
        let ps: Vec<f32> = list.entries().iter().map(|e| e.p).collect();
        assert_eq!(ps, vec![0.0, 1.0]);
    }

    #[test]
    fn default_p_follows_the_largest_sum_difference() {
        let mk = |p: f32, gain: f64, loss: f64| PEntry {
            p,
            quality: Quality { gain, loss },
            partition: (),
        };
        let list = PList {
            entries: vec![
                mk(0.0, 10.0, 0.0),
                mk(0.25, 30.0, 1.0),
                mk(0.5, 35.0, 6.0),
                mk(1.0, 50.0, 6.5),
            ],
        };
        // | |ΔG| − |ΔL| | = 19, 0, 14.5
        assert_eq!(list.default_p(), 0.25);
        assert_eq!(list.initial_p(InitialP::One), 1.0);
        let flat = PList {
            entries: vec![mk(0.0, 1.0, 1.0), mk(0.5, 2.0, 2.0)],
        };
        assert_eq!(flat.default_p(), 0.0);
    }
}
