//! The scalable mode's bisection: lpaggreg's spatiotemporal dichotomy, with a dynamic
//! programme run only where the quality lines of the partitions met so far cannot tell its
//! answer.
//!
//! A partition of quality (g, l) has the compromise `V(p) = p·g − (1−p)·l`, a line in p; the
//! best compromise is the upper envelope of all partitions' lines. Given the partitions A and
//! B that the DP returned at `pa < pb`, any partition optimal somewhere between lies above
//! `max(V_A, V_B)` at their crossing `p*` (a line at most `V_A` at `pa` and at most `V_B` at
//! `pb` that rises above both in between is highest above them at `p*`), so it is optimal
//! on an interval around `p*`.
//!
//! The bisection runs as lpaggreg's does (same midpoints, same rule for exploring, same f32
//! arithmetic, same deduplication); all its midpoints are multiples of one step. Asked for a
//! midpoint between the evaluated `pa` and `pb`, it first evaluates the two midpoints around
//! `p*` (or `p*` itself if it is one). If they return A and B, anything else optimal lies
//! strictly between two consecutive midpoints, where the bisection never looks; otherwise
//! the new line splits the interval and the same is done again. Then the highest known line
//! answers if it beats every other known line there by more than [`LINE_MARGIN`] (the DP's
//! rounding, ties between partitions of equal value, and partitions of the same quality by
//! another structure all fall inside that margin); otherwise, and at every p already
//! evaluated, the DP's own answer is used. Where A and B are the same line within the margin,
//! nothing is searched. A breakpoint costs about the two DPs around it (which also give its
//! entry of the list) instead of the bisection's eight or so.
//!
//! Twins, partitions whose qualities lpaggreg's list counts as equal (1e-13) but whose last
//! bits differ (the same areas summed in another order), make the plain bisection halve
//! between them down to the threshold, since its rule compares bits; everything it meets
//! there is within rounding of them and is dropped from the list as equal to its left
//! neighbour, and so is the interval's right end. So an interval between twins is not
//! halved, and a midpoint where the leading lines are twins takes the leader.
//!
//! Two partitions of the same quality bits by different structures (symmetric producers)
//! pass every line test, and the DP may return either depending on p. So every p of the
//! final list not yet evaluated is evaluated for its own partition; if one of those DPs
//! returns another quality than the lines said, the bisection is replayed with it known.
//! What is left assumed: a partition the DP never returned is never its answer at a
//! midpoint where a known line leads by the margin, and nothing but twins is met between
//! twins, which both hold up to the DP's rounding by the argument above (a partition that
//! is not a twin would have to touch the envelope within rounding exactly at a midpoint). The tests compare the whole list (p, quality bits, partitions) with
//! the plain bisection's on random tie-heavy trees, every reference vector and the bench's
//! 10×10×10 tree.

use std::collections::BTreeMap;

use super::{Bisection, Cancelled, Observer, PEntry, PList, Quality};

/// How far ahead of the others, relative to `p·|g| + (1−p)·|l|`, the best known line must be
/// at a midpoint for its partition to be taken without a DP; also how far apart two lines
/// must be somewhere for their crossing to be searched. The DP's sums round at about 1e-16
/// per addition: a million areas stay below 1e-10.
pub(crate) const LINE_MARGIN: f64 = 1e-9;

/// An evaluation the search may ask for: the DP's partition at a double p, and its quality.
pub(crate) type LineEval<'a, P> = &'a (dyn Fn(f64) -> Result<(Quality, P), Cancelled> + Sync);

/// What a search by lines cost: the DPs it ran, and the midpoints it answered from lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct LineCounts {
    /// Every DP run (what the observer was told of).
    pub evaluations: usize,
    /// Of those, the DPs at the midpoints around line crossings.
    pub crossings: usize,
    /// Midpoints of the bisection answered by the known lines.
    pub predicted: usize,
    /// Midpoints where the lines were too close and a DP ran.
    pub checked: usize,
    /// p of the final list answered from the lines, then evaluated for their partition.
    pub verified: usize,
    /// Replays of the bisection after such a DP found another quality.
    pub replays: usize,
    /// Intervals between twins (see the module documentation) not halved.
    pub twin_intervals: usize,
}

/// Runs the spatiotemporal bisection of `threshold` with the lines described in the module
/// documentation; its list is the plain bisection's.
pub(crate) fn bisect_by_lines<P: Clone + PartialEq + Send>(
    threshold: f32,
    eval: LineEval<'_, P>,
    observer: &dyn Observer<P>,
) -> Result<(PList<P>, LineCounts), Cancelled> {
    let mut s = Search {
        eval,
        observer,
        lines: Vec::new(),
        evaluated: BTreeMap::new(),
        step: midpoint_step(threshold),
        counts: LineCounts::default(),
    };
    // p = 1 first: its partition is the coarsest, the first overview.
    let one = s.evaluate(1.0)?;
    let zero = s.evaluate(0.0)?;
    // The entries kept must be the DP's own answers at their p: a partition of the same
    // quality by another structure would pass every line test. So each kept p answered from
    // the lines is evaluated; if one turns out another quality, the bisection is replayed
    // with it known (each round evaluates new p, so this ends).
    let kept = loop {
        s.counts.predicted = 0;
        s.counts.twin_intervals = 0;
        let mut raw = vec![(0.0f32, zero)];
        s.explore(threshold, 0.0, 1.0, zero, one, &mut raw)?;
        raw.push((1.0, one));
        let rule = Bisection::Spatiotemporal;
        let kept: Vec<(f32, usize)> = (0..raw.len())
            .filter(|&i| {
                i == 0 || rule.distinct(s.lines[raw[i - 1].1].quality, s.lines[raw[i].1].quality)
            })
            .map(|i| raw[i])
            .collect();
        let mut replay = false;
        for &(p, line) in &kept {
            let p = f64::from(p);
            if s.evaluated_at(p).is_none() {
                s.counts.verified += 1;
                let got = s.evaluate(p)?;
                replay |= s.lines[got].quality != s.lines[line].quality;
            }
        }
        if !replay {
            break kept;
        }
        s.counts.replays += 1;
    };
    let entries = kept
        .into_iter()
        .map(|(p, line)| {
            let line = s.evaluated_at(f64::from(p)).unwrap_or(line);
            PEntry {
                p,
                quality: s.lines[line].quality,
                partition: s.lines[line].partition.clone(),
            }
        })
        .collect();
    Ok((PList { entries }, s.counts))
}

/// The spacing of the midpoints a bisection of `threshold` can visit: all are multiples of
/// it (1 if it halves nothing, where no midpoint is asked for).
fn midpoint_step(threshold: f32) -> f64 {
    let mut width = 1.0f32;
    let mut step = 1.0f32;
    while width > threshold && width > 0.0 {
        step = width / 2.0;
        width = step;
    }
    f64::from(step)
}

/// A partition the DP returned.
struct Line<P> {
    quality: Quality,
    partition: P,
}

impl<P> Line<P> {
    fn value(&self, p: f64) -> f64 {
        p * self.quality.gain - (1.0 - p) * self.quality.loss
    }

    fn scale(&self, p: f64) -> f64 {
        p * self.quality.gain.abs() + (1.0 - p) * self.quality.loss.abs()
    }
}

struct Search<'a, P> {
    eval: LineEval<'a, P>,
    observer: &'a dyn Observer<P>,
    /// Every distinct partition returned so far.
    lines: Vec<Line<P>>,
    /// Every p evaluated (its bits, which order as the values do for p ≥ 0) and the line
    /// returned there.
    evaluated: BTreeMap<u64, usize>,
    /// The spacing of the midpoints (all are its multiples).
    step: f64,
    counts: LineCounts,
}

impl<P: PartialEq> Search<'_, P> {
    /// Runs the DP at `p`; the index of its partition among the known lines.
    fn evaluate(&mut self, p: f64) -> Result<usize, Cancelled> {
        if self.observer.cancelled() {
            return Err(Cancelled);
        }
        let (quality, partition) = (self.eval)(p)?;
        self.counts.evaluations += 1;
        self.observer
            .evaluated(p as f32, quality, &partition, self.counts.evaluations);
        let known = self
            .lines
            .iter()
            .position(|l| l.quality == quality && l.partition == partition);
        let line = match known {
            Some(i) => i,
            None => {
                self.lines.push(Line { quality, partition });
                self.lines.len() - 1
            }
        };
        self.evaluated.insert(p.to_bits(), line);
        Ok(line)
    }

    /// The line the DP returned at `p`, if it ran there.
    fn evaluated_at(&self, p: f64) -> Option<usize> {
        self.evaluated.get(&p.to_bits()).copied()
    }

    fn margin(&self, p: f64, lines: &[usize]) -> f64 {
        let scale = lines
            .iter()
            .map(|&i| self.lines[i].scale(p))
            .fold(0.0, f64::max);
        LINE_MARGIN * scale
    }

    /// The line of the DP's answer at the midpoint `pm`.
    ///
    /// Between the evaluated p nearest below and above it (`pa` with line A, `pb` with B),
    /// a line not yet met can only be optimal on an interval around their crossing p*. So the
    /// midpoints on either side of p* are evaluated (p* itself if it is one): if they return
    /// A and B, whatever else is optimal lies strictly between two consecutive midpoints,
    /// where the bisection never looks; otherwise the new line splits the interval and the
    /// same is done again. Then the highest known line answers if it leads every other known
    /// line by the margin; else the DP does. Where A and B are the same line within the
    /// margin (partitions differing in their last bits), nothing is searched: the DP answers.
    fn at_midpoint(&mut self, pm: f32) -> Result<usize, Cancelled> {
        let p = f64::from(pm);
        loop {
            if let Some(line) = self.evaluated_at(p) {
                return Ok(line);
            }
            let below = self.evaluated.range(..p.to_bits()).next_back();
            let above = self.evaluated.range(p.to_bits()..).next();
            let (Some((&lo, &a)), Some((&hi, &b))) = (below, above) else {
                // 0 and 1 are always evaluated; a p outside is asked to the DP.
                return self.evaluate(p);
            };
            let (pa, pb) = (f64::from_bits(lo), f64::from_bits(hi));
            let (la, lb) = (&self.lines[a], &self.lines[b]);
            let (qa, qb) = (la.quality, lb.quality);
            let apart = |q: f64| (la.value(q) - lb.value(q)).abs() > self.margin(q, &[a, b]);
            if qa == qb || !(apart(pa) || apart(pb)) {
                break;
            }
            let cross = (qa.loss - qb.loss) / ((qa.gain + qa.loss) - (qb.gain + qb.loss));
            if !(cross > pa && cross < pb) {
                // Parallel, or crossing outside: one of the two is the envelope throughout.
                break;
            }
            let left = (cross / self.step).floor() * self.step;
            let right = if left == cross {
                left
            } else {
                left + self.step
            };
            let mut evaluated = false;
            for q in [left, right] {
                if q > pa && q < pb && self.evaluated_at(q).is_none() {
                    self.counts.crossings += 1;
                    self.evaluate(q)?;
                    evaluated = true;
                }
            }
            if !evaluated {
                // p lies between the two midpoints around the crossing: only if the f32
                // midpoints are not multiples of the step (thresholds below 2^-24).
                self.counts.checked += 1;
                return self.evaluate(p);
            }
        }
        self.answer_from_lines(p)
    }

    /// The highest known line at `p` if it leads every other but its twins by the margin,
    /// else the DP's answer there.
    fn answer_from_lines(&mut self, p: f64) -> Result<usize, Cancelled> {
        let mut best: Option<(f64, usize)> = None;
        for (i, l) in self.lines.iter().enumerate() {
            let v = l.value(p);
            if best.is_none_or(|(bv, _)| v > bv) {
                best = Some((v, i));
            }
        }
        let Some((top, leader)) = best else {
            return self.evaluate(p);
        };
        // Partitions within the margin of the leader are fine if they are its twins (the
        // same quality to lpaggreg's 1e-13): the DP may return any of them, and which one
        // only matters where the list keeps it, and those p are evaluated.
        let leading = self.lines[leader].quality;
        let clear = self.lines.iter().enumerate().all(|(i, l)| {
            i == leader
                || top - l.value(p) > self.margin(p, &[leader, i])
                || l.quality.nearly_equal(leading)
        });
        if clear && top.is_finite() {
            self.counts.predicted += 1;
            Ok(leader)
        } else {
            self.counts.checked += 1;
            self.evaluate(p)
        }
    }

    /// lpaggreg's `DLPAggreg` recursion over `[p1, p2]`, appending the midpoints' entries in
    /// its order (left half, midpoint, right half).
    fn explore(
        &mut self,
        threshold: f32,
        p1: f32,
        p2: f32,
        a: usize,
        b: usize,
        out: &mut Vec<(f32, usize)>,
    ) -> Result<(), Cancelled> {
        let (qa, qb) = (self.lines[a].quality, self.lines[b].quality);
        let Some(pm) = Bisection::Spatiotemporal.midpoint(p1, p2, qa, qb, threshold) else {
            return Ok(());
        };
        if qa.nearly_equal(qb) {
            // Twins (the same quality to 1e-13, other last bits): lpaggreg halves on, but
            // whatever it meets inside is within rounding of them (no line rises above both
            // ends' DP answers), so every entry it adds there, and the right end, are
            // dropped from the list as equal to their left neighbours.
            self.counts.twin_intervals += 1;
            return Ok(());
        }
        let m = self.at_midpoint(pm)?;
        self.explore(threshold, p1, pm, a, m, out)?;
        out.push((pm, m));
        self.explore(threshold, pm, p2, m, b, out)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Unobserved, bisect};
    use super::*;
    use proptest::prelude::*;

    /// A fake DP over a fixed set of lines: the highest at p, ties to the larger gain, then
    /// the smaller loss, then the first.
    fn envelope(lines: &[(f64, f64)]) -> impl Fn(f64) -> (Quality, usize) + Sync + '_ {
        move |p| {
            let mut best = 0;
            for (i, &(g, l)) in lines.iter().enumerate() {
                let (bg, bl) = lines[best];
                let (v, bv) = (p * g - (1.0 - p) * l, p * bg - (1.0 - p) * bl);
                if v > bv || (v == bv && (g > bg || (g == bg && l < bl))) {
                    best = i;
                }
            }
            let (gain, loss) = lines[best];
            (Quality { gain, loss }, best)
        }
    }

    fn both(lines: &[(f64, f64)], threshold: f32) -> (PList<usize>, PList<usize>, LineCounts) {
        let dp = envelope(lines);
        let plain = bisect(threshold, Bisection::Spatiotemporal, &|p: f32| {
            dp(f64::from(p))
        });
        let (by_lines, counts) =
            bisect_by_lines(threshold, &|p: f64| Ok(dp(p)), &Unobserved).unwrap();
        (plain, by_lines, counts)
    }

    #[test]
    fn few_breakpoints_cost_few_evaluations() {
        // Gains rise and losses fall with the index: each line is optimal on a range of p.
        let lines = [
            (0.0, 0.0),
            (10.0, 1.0),
            (30.0, 5.0),
            (60.0, 20.0),
            (100.0, 50.0),
        ];
        let (plain, by_lines, counts) = both(&lines, 0.001);
        assert_eq!(plain, by_lines);
        assert!(plain.len() >= 3, "{plain:?}");
        // Two ends, a crossing per line found and one per final segment, and the kept p,
        // at most.
        assert!(
            counts.evaluations <= 2 + 2 * lines.len() + plain.len(),
            "{counts:?}"
        );
        assert_eq!(counts.checked, 0, "{counts:?}");
    }

    #[test]
    fn a_crossing_on_a_midpoint_is_evaluated_there() {
        // Lines 0 and 1 cross exactly at p = 0.5, a midpoint: the search's DP at the crossing
        // answers it, with the fake DP's tie rule (the larger gain).
        let lines = [(0.0, 1.0), (2.0, 3.0)];
        let (plain, by_lines, counts) = both(&lines, 0.001);
        assert_eq!(plain, by_lines);
        assert_eq!(by_lines.entries()[1].p, 0.5);
        assert_eq!(by_lines.entries()[1].partition, 1);
        assert_eq!(counts.crossings, 1, "{counts:?}");
    }

    #[test]
    fn a_crossing_between_midpoints_costs_the_two_around_it() {
        // They cross 1.25e-12 above 0.5: 0.5 and the next midpoint are evaluated, and the
        // kept p needs nothing more.
        let lines = [(0.0, 1.0), (2.0, 3.0 + 1e-11)];
        let (plain, by_lines, counts) = both(&lines, 0.001);
        assert_eq!(plain, by_lines);
        assert_eq!(by_lines.entries()[1].p, 0.5 + 1.0 / 1024.0);
        assert_eq!(counts.crossings, 2, "{counts:?}");
        assert_eq!(counts.evaluations, 4, "{counts:?}");
    }

    #[test]
    fn lines_within_the_margin_are_left_to_the_dp() {
        // Two partitions whose qualities differ in the 12th digit: the bisection halves down
        // to the threshold between them, and every midpoint is the DP's to answer.
        let lines = [(1.0, 1.0), (1.0 + 1e-12, 1.0 + 1e-12)];
        let (plain, by_lines, counts) = both(&lines, 0.001);
        assert_eq!(plain, by_lines);
        assert_eq!(counts.predicted, 0, "{counts:?}");
        assert!(counts.checked >= 10, "{counts:?}");
    }

    #[test]
    fn twins_are_not_halved_between() {
        // Two partitions of the same quality but for the last bits, crossing at 5/11: the
        // plain bisection halves between them down to the threshold, all of it dropped.
        let g = 3.0;
        let twin = (g * (1.0 + 2.0 * f64::EPSILON), 1.0 + 5.0 * f64::EPSILON);
        let lines = [(0.0, 0.0), (g, 1.0), twin];
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let dp = envelope(&lines);
        let plain = bisect(0.001, Bisection::Spatiotemporal, &|p: f32| {
            calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            dp(f64::from(p))
        });
        let (by_lines, counts) = bisect_by_lines(0.001, &|p: f64| Ok(dp(p)), &Unobserved).unwrap();
        assert_eq!(plain, by_lines);
        assert!(counts.twin_intervals >= 1, "{counts:?}");
        assert!(counts.evaluations < calls.into_inner(), "{counts:?}");
    }

    #[test]
    fn cancelling_stops_the_search() {
        struct StopAfter(std::sync::atomic::AtomicUsize);
        impl Observer<usize> for StopAfter {
            fn evaluated(&self, _: f32, _: Quality, _: &usize, _: usize) {
                self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            fn cancelled(&self) -> bool {
                self.0.load(std::sync::atomic::Ordering::Relaxed) >= 3
            }
        }
        let lines = [(0.0, 0.0), (10.0, 1.0), (30.0, 5.0), (60.0, 20.0)];
        let dp = envelope(&lines);
        let observer = StopAfter(0.into());
        let got = bisect_by_lines(0.001, &|p: f64| Ok(dp(p)), &observer);
        assert_eq!(got.unwrap_err(), Cancelled);
        assert_eq!(observer.0.into_inner(), 3);
    }

    #[test]
    fn first_evaluation_is_p_one() {
        struct First(std::sync::Mutex<Vec<f32>>);
        impl Observer<usize> for First {
            fn evaluated(&self, p: f32, _: Quality, _: &usize, _: usize) {
                self.0.lock().unwrap().push(p);
            }
        }
        let lines = [(0.0, 0.0), (10.0, 1.0)];
        let dp = envelope(&lines);
        let observer = First(Vec::new().into());
        bisect_by_lines(0.001, &|p: f64| Ok(dp(p)), &observer).unwrap();
        assert_eq!(observer.0.into_inner().unwrap()[..2], [1.0, 0.0]);
    }

    fn small_lines() -> impl Strategy<Value = Vec<(f64, f64)>> {
        // Small integers: many equal gains or losses, parallel lines and crossings on
        // midpoints, the cases the rules treat specially.
        let value = prop_oneof![0.0..8.0f64, (0u8..8).prop_map(f64::from)];
        prop::collection::vec((value.clone(), value), 1..12)
    }

    proptest! {
        #[test]
        fn the_list_is_the_plain_bisections(lines in small_lines(), coarse in any::<bool>()) {
            let threshold = if coarse { 0.1 } else { 0.001 };
            let (plain, by_lines, _) = both(&lines, threshold);
            prop_assert_eq!(plain.len(), by_lines.len());
            for (a, b) in plain.entries().iter().zip(by_lines.entries()) {
                prop_assert_eq!(a.p, b.p);
                prop_assert_eq!(a.quality.gain.to_bits(), b.quality.gain.to_bits());
                prop_assert_eq!(a.quality.loss.to_bits(), b.quality.loss.to_bits());
                prop_assert_eq!(a.partition, b.partition);
            }
        }
    }
}
