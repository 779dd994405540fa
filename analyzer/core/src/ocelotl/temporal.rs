//! Temporal aggregation (lpaggreg `OLPAggreg3`): cut the time axis into consecutive parts,
//! every (producer, type) series aggregated over time on its own.

use rayon::prelude::*;

use super::complexity::{divergence, entropy_reduction, ln_table};
use super::dichotomy::{
    Bisection, Cancelled, Observer, PList, Quality, Schedule, bisect, bisect_observed,
};
use super::model::MicroscopicModel;

/// Index of the interval `[start, end]` in the packed lower triangle, rows by end.
///
/// Rows by end make the DP's inner loop (all starts for one end) contiguous.
#[inline]
fn at(end: usize, start: usize) -> usize {
    end * (end + 1) / 2 + start
}

/// Gain and loss of every time interval of the model (RR-8524 eqs. 4-5), summed over all
/// (producer, type) series.
#[derive(Debug, Clone, PartialEq)]
pub struct TemporalQualities {
    slices: usize,
    gain: Vec<f64>,
    loss: Vec<f64>,
    normalized: bool,
}

impl TemporalQualities {
    /// Θ(S·U·T²) logarithms; intervals are independent, so starts are spread over threads.
    ///
    /// Every interval still accumulates its series in the original (producer-major,
    /// type-minor) order, so the sums are bit-identical to the sequential original.
    pub fn compute(model: &MicroscopicModel) -> Self {
        let n = model.slices();
        // An all-zero series adds exactly +0.0 to every interval (the original drops inactive
        // producers for the same reason), so skipping it changes no bit.
        let series: Vec<(Vec<f64>, Vec<f64>)> = (0..model.producers())
            .flat_map(|s| (0..model.types()).map(move |u| (s, u)))
            .filter_map(|(s, u)| {
                let values: Vec<f64> = (0..n).map(|t| model.value(t, s, u)).collect();
                if values.iter().all(|&v| v == 0.0) {
                    return None;
                }
                let micro = values.iter().map(|&v| entropy_reduction(v, 0.0)).collect();
                Some((values, micro))
            })
            .collect();
        let ln = ln_table(n);
        let rows: Vec<(Vec<f64>, Vec<f64>)> = (0..n)
            .into_par_iter()
            .map(|start| {
                let len = n - start;
                let mut gain = vec![0.0; len];
                let mut loss = vec![0.0; len];
                for (values, micro) in &series {
                    let (values, micro) = (&values[start..], &micro[start..]);
                    let (mut sum, mut ent) = (values[0], micro[0]);
                    for i in 1..len {
                        // Running sums left to right: the original's sum[i][j] = sum[i-1][j] + v[j+i].
                        sum += values[i];
                        ent += micro[i];
                        let reduction = entropy_reduction(sum, ent);
                        gain[i] += reduction;
                        loss[i] += divergence(ln[i + 1], sum, reduction);
                    }
                }
                (gain, loss)
            })
            .collect();
        let mut gain = vec![0.0; n * (n + 1) / 2];
        let mut loss = vec![0.0; n * (n + 1) / 2];
        for (start, (g, l)) in rows.into_iter().enumerate() {
            for (i, (g, l)) in g.into_iter().zip(l).enumerate() {
                gain[at(start + i, start)] = g;
                loss[at(start + i, start)] = l;
            }
        }
        Self {
            slices: n,
            gain,
            loss,
            normalized: false,
        }
    }

    /// Divides every gain and loss by those of the whole trace, as lpaggreg's optional
    /// normalisation does: with no zero guard, so a trace with zero whole-trace gain or loss
    /// gets NaN/inf qualities, as in the original.
    pub fn normalize(&mut self) {
        let whole = self.quality(0, self.slices - 1);
        for g in &mut self.gain {
            *g /= whole.gain;
        }
        for l in &mut self.loss {
            *l /= whole.loss;
        }
        self.normalized = true;
    }

    pub fn is_normalized(&self) -> bool {
        self.normalized
    }

    pub fn slices(&self) -> usize {
        self.slices
    }

    /// Gain and loss of aggregating slices `start..=end` (0 for a single slice).
    pub fn quality(&self, start: usize, end: usize) -> Quality {
        assert!(
            start <= end && end < self.slices,
            "interval [{start}, {end}] outside 0..{}",
            self.slices
        );
        Quality {
            gain: self.gain[at(end, start)],
            loss: self.loss[at(end, start)],
        }
    }

    /// The partition maximising `p·gain − (1−p)·loss`, computed as the original does: p is a
    /// C float and `1 − p` is rounded to float too; on equal values the shorter last part wins.
    pub fn best_partition(&self, p: f32) -> TemporalPartition {
        let n = self.slices;
        let pd = f64::from(p);
        let q1 = f64::from(1.0f32 - p);
        let mut best = vec![0.0f64; n];
        let mut cut = vec![0usize; n];
        for end in 1..n {
            let row = at(end, 0);
            let gain = &self.gain[row..=row + end];
            let loss = &self.loss[row..=row + end];
            let mut cq = pd * gain[0] - q1 * loss[0];
            let mut cc = 0;
            for k in 1..=end {
                let val = (best[k - 1] + pd * gain[k]) - q1 * loss[k];
                if val >= cq {
                    cc = k;
                    cq = val;
                }
            }
            cut[end] = cc;
            best[end] = cq;
        }
        let mut ranges = Vec::new();
        let mut end = n;
        while end > 0 {
            let start = cut[end - 1];
            ranges.push((start, end - 1));
            end = start;
        }
        ranges.reverse();
        // The original sums part qualities in time order, from 0.0.
        let mut quality = Quality::ZERO;
        for &(s, e) in &ranges {
            let q = self.quality(s, e);
            quality.gain += q.gain;
            quality.loss += q.loss;
        }
        TemporalPartition { ranges, quality }
    }
}

/// A partition of the time axis into consecutive parts.
#[derive(Debug, Clone, PartialEq)]
pub struct TemporalPartition {
    ranges: Vec<(usize, usize)>,
    quality: Quality,
}

impl TemporalPartition {
    /// Inclusive slice ranges of the parts, in time order.
    pub fn ranges(&self) -> &[(usize, usize)] {
        &self.ranges
    }

    pub fn n_parts(&self) -> usize {
        self.ranges.len()
    }

    /// Part id of every slice, numbered 0, 1, 2… in time order as lpaggreg returns them.
    pub fn parts(&self) -> Vec<usize> {
        self.ranges
            .iter()
            .enumerate()
            .flat_map(|(id, &(s, e))| std::iter::repeat_n(id, e - s + 1))
            .collect()
    }

    /// Sum of the parts' gains and losses.
    pub fn quality(&self) -> Quality {
        self.quality
    }
}

/// The temporal aggregation of one model: its qualities, and the partitions they lead to.
#[derive(Debug, Clone)]
pub struct TemporalAggregation {
    qualities: TemporalQualities,
}

impl TemporalAggregation {
    /// Computes the qualities; `normalize` is Ocelotl's "Normalize" setting (off by default).
    pub fn new(model: &MicroscopicModel, normalize: bool) -> Self {
        let mut qualities = TemporalQualities::compute(model);
        if normalize {
            qualities.normalize();
        }
        Self { qualities }
    }

    pub fn qualities(&self) -> &TemporalQualities {
        &self.qualities
    }

    /// Best partition for a user-chosen p; Ocelotl hands it to lpaggreg as a float, so the
    /// p really used is `p as f32`.
    pub fn best_partition(&self, p: f64) -> TemporalPartition {
        self.qualities.best_partition(p as f32)
    }

    /// The significant p values and their partitions (the original's dichotomy with the given
    /// threshold, 0.001 in Ocelotl).
    pub fn significant_ps(&self, threshold: f32) -> PList<TemporalPartition> {
        bisect(threshold, Bisection::Temporal, &|p| {
            let part = self.qualities.best_partition(p);
            (part.quality(), part)
        })
    }

    /// [`Self::significant_ps`], telling `observer` of every evaluated p and stopping when it
    /// asks.
    pub fn significant_ps_observed(
        &self,
        threshold: f32,
        observer: &dyn Observer<TemporalPartition>,
    ) -> Result<PList<TemporalPartition>, Cancelled> {
        bisect_observed(
            threshold,
            Bisection::Temporal,
            Schedule::Parallel,
            &|p| {
                let part = self.qualities.best_partition(p);
                Ok((part.quality(), part))
            },
            observer,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(t: usize, s: usize, values: &[f64]) -> MicroscopicModel {
        MicroscopicModel::new(t, s, 1, values.to_vec()).unwrap()
    }

    #[test]
    fn singletons_have_zero_quality_and_pairs_follow_the_formulas() {
        // One series 1, 3, 0.
        let q = TemporalQualities::compute(&model(3, 1, &[1.0, 3.0, 0.0]));
        assert_eq!(q.quality(1, 1), Quality::ZERO);
        let pair = q.quality(0, 1);
        // gain = 4 log2 4 − 3 log2 3, loss = 1·log2(1·2/4) + 3·log2(3·2/4).
        assert!((pair.gain - (8.0 - 3.0 * 3f64.log2())).abs() < 1e-12);
        assert!((pair.loss - (-1.0 + 3.0 * 1.5f64.log2())).abs() < 1e-12);
        // Appending a zero slice: same sum, |A| grows to 3, so loss grows by 4·log2(3/2).
        let triple = q.quality(0, 2);
        assert_eq!(triple.gain, pair.gain);
        assert!((triple.loss - pair.loss - 4.0 * 1.5f64.log2()).abs() < 1e-12);
    }

    #[test]
    fn series_qualities_add_up() {
        let both = TemporalQualities::compute(&model(2, 2, &[1.0, 2.0, 3.0, 2.0]));
        let first = TemporalQualities::compute(&model(2, 1, &[1.0, 3.0]));
        let second = TemporalQualities::compute(&model(2, 1, &[2.0, 2.0]));
        let q = both.quality(0, 1);
        assert_eq!(q.gain, first.quality(0, 1).gain + second.quality(0, 1).gain);
        assert_eq!(
            second.quality(0, 1),
            Quality {
                gain: 4.0,
                loss: 0.0
            }
        );
    }

    #[test]
    fn p_zero_keeps_singletons_on_exact_ties_and_p_one_merges_all() {
        // A series of ones: every aggregate's loss is exactly 0 (the same two products are
        // subtracted), so at p = 0 aggregates tie with singletons and the finer cut wins.
        let q = TemporalQualities::compute(&model(4, 1, &[1.0, 1.0, 1.0, 1.0]));
        assert_eq!(q.quality(0, 3).loss, 0.0);
        assert_eq!(q.best_partition(0.0).n_parts(), 4);
        assert_eq!(q.best_partition(1.0).ranges(), &[(0, 3)]);
    }

    #[test]
    fn normalisation_makes_the_whole_trace_one() {
        let mut q = TemporalQualities::compute(&model(3, 1, &[1.0, 3.0, 5.0]));
        q.normalize();
        assert_eq!(
            q.quality(0, 2),
            Quality {
                gain: 1.0,
                loss: 1.0
            }
        );
        assert_eq!(q.quality(1, 1), Quality::ZERO);
    }

    /// The original's loop, one interval at a time: the reference `compute` (rows in
    /// parallel, running sums shared along a row) must match bit for bit.
    fn literal_qualities(m: &MicroscopicModel) -> Vec<(u64, u64)> {
        let n = m.slices();
        let ln = ln_table(n);
        let mut out = Vec::new();
        for start in 0..n {
            for end in start..n {
                let (mut gain, mut loss) = (0.0, 0.0);
                if end > start {
                    for s in 0..m.producers() {
                        for u in 0..m.types() {
                            let values: Vec<f64> =
                                (start..=end).map(|t| m.value(t, s, u)).collect();
                            if (0..n).all(|t| m.value(t, s, u) == 0.0) {
                                continue;
                            }
                            let (mut sum, mut ent) = (values[0], entropy_reduction(values[0], 0.0));
                            for &v in &values[1..] {
                                sum += v;
                                ent += entropy_reduction(v, 0.0);
                            }
                            let reduction = entropy_reduction(sum, ent);
                            gain += reduction;
                            loss += divergence(ln[end - start + 1], sum, reduction);
                        }
                    }
                }
                out.push((gain.to_bits(), loss.to_bits()));
            }
        }
        out
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 200, failure_persistence: None, ..proptest::prelude::ProptestConfig::default() })]
        /// Zero, negative and tiny values included: the branch-free pass selects 0 where the
        /// original's test does.
        #[test]
        fn qualities_are_the_literal_loops_bit_for_bit(
            t in 1usize..24,
            s in 1usize..4,
            u in 1usize..3,
            seed in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::strategy::Just(0.0),
                    -3.0..3.0f64,
                    0.0..1e6f64,
                    1e-300..1e-290f64,
                ],
                24 * 4 * 3,
            ),
        ) {
            let values: Vec<f64> = seed[..t * s * u].to_vec();
            let m = MicroscopicModel::new(t, s, u, values).unwrap();
            let q = TemporalQualities::compute(&m);
            let mut got = Vec::new();
            for start in 0..t {
                for end in start..t {
                    let x = q.quality(start, end);
                    got.push((x.gain.to_bits(), x.loss.to_bits()));
                }
            }
            proptest::prop_assert_eq!(got, literal_qualities(&m));
        }
    }

    #[test]
    fn parts_number_slices_in_time_order() {
        let q = TemporalQualities::compute(&model(6, 1, &[1.0, 1.0, 1.0, 9.0, 9.0, 9.0]));
        let part = q.best_partition(0.5);
        assert_eq!(part.ranges(), &[(0, 2), (3, 5)]);
        assert_eq!(part.parts(), vec![0, 0, 0, 1, 1, 1]);
    }
}
