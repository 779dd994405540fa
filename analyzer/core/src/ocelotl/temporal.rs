//! Temporal aggregation (lpaggreg `OLPAggreg3`): cut the time axis into consecutive parts,
//! every (producer, type) series aggregated over time on its own.

use rayon::prelude::*;

use super::complexity::{divergence, entropy_reduction, ln_table};
use super::dichotomy::{
    Bisection, Cancelled, Observer, PList, Quality, Schedule, bisect, bisect_observed,
};
use super::fastlog;
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

/// One (producer, type) series that is not all zero: its values and their `v·log2 v`, each
/// followed by [`LANES`]` − 1` zeros so that four consecutive starts can be loaded at once.
type Series = (Vec<f64>, Vec<f64>);

/// Interval starts handled together by the vector kernel.
const LANES: usize = 4;

/// An all-zero series adds exactly +0.0 to every interval (the original drops inactive
/// producers for the same reason), so skipping it changes no bit.
fn active_series(model: &MicroscopicModel) -> Vec<Series> {
    let n = model.slices();
    (0..model.producers())
        .flat_map(|s| (0..model.types()).map(move |u| (s, u)))
        .filter_map(|(s, u)| {
            let mut values: Vec<f64> = (0..n).map(|t| model.value(t, s, u)).collect();
            if values.iter().all(|&v| v == 0.0) {
                return None;
            }
            let mut micro: Vec<f64> = values.iter().map(|&v| entropy_reduction(v, 0.0)).collect();
            values.resize(n + LANES - 1, 0.0);
            micro.resize(n + LANES - 1, 0.0);
            Some((values, micro))
        })
        .collect()
}

/// Gains and losses of the intervals starting at `start`, by length − 1: the original's loop
/// for one start, one logarithm at a time.
fn row_qualities(start: usize, n: usize, series: &[Series], ln: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let len = n - start;
    let mut gain = vec![0.0; len];
    let mut loss = vec![0.0; len];
    for (values, micro) in series {
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
}

/// [`row_qualities`] for the [`LANES`] starts `first..first + LANES` at once, lane l holding
/// start `first + l`: gains and losses at `[i * LANES + l]`, by length − 1.
///
/// Each lane performs the scalar loop's operations in the scalar loop's order (running sums,
/// series in order, the same logarithm bits from [`fastlog::log4`]), so every interval gets
/// the same bits; lanes whose interval runs past the last slice compute on the zero padding
/// and are never read.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn block_qualities(first: usize, n: usize, series: &[Series], ln: &[f64]) -> (Vec<f64>, Vec<f64>) {
    use std::arch::x86_64::*;
    let len = n - first;
    let mut gain = vec![0.0; len * LANES];
    let mut loss = vec![0.0; len * LANES];
    let ln2 = _mm256_set1_pd(super::complexity::LN2);
    for (values, micro) in series {
        let (values, micro) = (&values[first..], &micro[first..]);
        // `values` and `micro` hold at least len + LANES − 1 doubles from here (the padding),
        // so every load below is in bounds; the asserts let the compiler see it.
        assert!(values.len() >= len + LANES - 1 && micro.len() >= len + LANES - 1);
        // SAFETY (every load and store in this loop): indices i..i + LANES with
        // i < len, inside `values`/`micro` (asserted above) and inside `gain`/`loss`
        // (len * LANES long) at i * LANES.
        let (mut sum, mut ent) = unsafe {
            (
                _mm256_loadu_pd(values.as_ptr()),
                _mm256_loadu_pd(micro.as_ptr()),
            )
        };
        for i in 1..len {
            unsafe {
                sum = _mm256_add_pd(sum, _mm256_loadu_pd(values.as_ptr().add(i)));
                ent = _mm256_add_pd(ent, _mm256_loadu_pd(micro.as_ptr().add(i)));
            }
            let positive = _mm256_cmp_pd::<_CMP_GT_OQ>(sum, _mm256_setzero_pd());
            let mut ln_sum = fastlog::log4(sum);
            // Lanes the vector log does not cover (sums near 1, subnormal…) and that
            // `entropy_reduction` will use: one scalar call each, as before.
            let scalar = fastlog::needs_scalar(sum) & _mm256_movemask_pd(positive);
            if scalar != 0 {
                let (mut s, mut l) = ([0.0; LANES], [0.0; LANES]);
                unsafe {
                    _mm256_storeu_pd(s.as_mut_ptr(), sum);
                    _mm256_storeu_pd(l.as_mut_ptr(), ln_sum);
                }
                for k in 0..LANES {
                    if scalar & (1 << k) != 0 {
                        l[k] = s[k].ln();
                    }
                }
                ln_sum = unsafe { _mm256_loadu_pd(l.as_ptr()) };
            }
            // entropy_reduction: (sum·ln sum)/ln 2 − ent where sum > 0, else exactly +0.0.
            let reduction = _mm256_and_pd(
                _mm256_sub_pd(_mm256_div_pd(_mm256_mul_pd(sum, ln_sum), ln2), ent),
                positive,
            );
            // divergence: (sum·ln |A|)/ln 2 − reduction.
            let divergence = _mm256_sub_pd(
                _mm256_div_pd(_mm256_mul_pd(sum, _mm256_set1_pd(ln[i + 1])), ln2),
                reduction,
            );
            unsafe {
                let g = gain.as_mut_ptr().add(i * LANES);
                let l = loss.as_mut_ptr().add(i * LANES);
                _mm256_storeu_pd(g, _mm256_add_pd(_mm256_loadu_pd(g), reduction));
                _mm256_storeu_pd(l, _mm256_add_pd(_mm256_loadu_pd(l), divergence));
            }
        }
    }
    (gain, loss)
}

impl TemporalQualities {
    /// Θ(S·U·T²) logarithms; intervals are independent, so starts are spread over threads,
    /// and where [`fastlog`] reproduces this host's `log`, four starts share each vector
    /// instruction.
    ///
    /// Every interval still accumulates its series in the original (producer-major,
    /// type-minor) order with the same logarithms, so the sums are bit-identical to the
    /// sequential original whichever kernel runs.
    pub fn compute(model: &MicroscopicModel) -> Self {
        #[cfg(target_arch = "x86_64")]
        if fastlog::available() {
            let n = model.slices();
            let series = active_series(model);
            let ln = ln_table(n);
            let blocks: Vec<(Vec<f64>, Vec<f64>)> = (0..n)
                .step_by(LANES)
                .collect::<Vec<_>>()
                .into_par_iter()
                // SAFETY: `fastlog::available` checked AVX2 and FMA.
                .map(|first| unsafe { block_qualities(first, n, &series, &ln) })
                .collect();
            let mut q = Self::zero(n);
            for (b, (g, l)) in blocks.into_iter().enumerate() {
                for lane in 0..LANES {
                    let start = b * LANES + lane;
                    for i in 0..n.saturating_sub(start) {
                        q.gain[at(start + i, start)] = g[i * LANES + lane];
                        q.loss[at(start + i, start)] = l[i * LANES + lane];
                    }
                }
            }
            return q;
        }
        Self::compute_scalar(model)
    }

    /// [`Self::compute`] with one logarithm call per interval and series, rows in parallel:
    /// the kernel of the build before the vector one (kept for hosts whose `log` the vector
    /// path does not reproduce, and as the anchor of `socscope bench ocelotl`).
    pub fn compute_scalar(model: &MicroscopicModel) -> Self {
        let n = model.slices();
        let series = active_series(model);
        let ln = ln_table(n);
        let rows: Vec<(Vec<f64>, Vec<f64>)> = (0..n)
            .into_par_iter()
            .map(|start| row_qualities(start, n, &series, &ln))
            .collect();
        let mut q = Self::zero(n);
        for (start, (g, l)) in rows.into_iter().enumerate() {
            for (i, (g, l)) in g.into_iter().zip(l).enumerate() {
                q.gain[at(start + i, start)] = g;
                q.loss[at(start + i, start)] = l;
            }
        }
        q
    }

    fn zero(n: usize) -> Self {
        Self {
            slices: n,
            gain: vec![0.0; n * (n + 1) / 2],
            loss: vec![0.0; n * (n + 1) / 2],
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

    /// [`Self::new`] with [`TemporalQualities::compute_scalar`]: the same aggregation through
    /// the scalar kernel, for measuring one against the other in one process.
    pub fn new_scalar(model: &MicroscopicModel, normalize: bool) -> Self {
        let mut qualities = TemporalQualities::compute_scalar(model);
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

    /// Slices past the last multiple of four, sums near 1 (the log's separate path), zeros,
    /// negatives and subnormals: the vector kernel must agree with the scalar one everywhere.
    #[test]
    fn vector_and_scalar_kernels_give_the_same_bits() {
        let (t, s, u) = (131, 3, 2);
        let mut state = 0x1234_5678_9abc_def0_u64;
        let values: Vec<f64> = (0..t * s * u)
            .map(|i| {
                crate::ocelotl::xorshift(&mut state);
                let x = (state >> 11) as f64 / (1u64 << 53) as f64;
                match i % 7 {
                    0 => 0.0,
                    1 => x * 0.05,
                    2 => -x,
                    3 => 1e-310 * x,
                    _ => 1000.0 * x,
                }
            })
            .collect();
        let m = MicroscopicModel::new(t, s, u, values).unwrap();
        let (a, b) = (
            TemporalQualities::compute(&m),
            TemporalQualities::compute_scalar(&m),
        );
        for start in 0..t {
            for end in start..t {
                let (x, y) = (a.quality(start, end), b.quality(start, end));
                assert_eq!(
                    (x.gain.to_bits(), x.loss.to_bits()),
                    (y.gain.to_bits(), y.loss.to_bits()),
                    "[{start}, {end}]"
                );
            }
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
