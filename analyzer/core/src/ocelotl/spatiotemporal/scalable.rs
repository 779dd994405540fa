//! The scalable spatiotemporal mode: qualities from per-node prefix sums instead of the
//! exact mode's per-node tables of running sums, for the sizes where the exact mode's
//! quality tables do not fit in memory and recomputing them at every p costs most of the
//! time.
//!
//! What it changes against the exact mode, and so why it is a mode of its own:
//! - The sums of an interval are differences of compensated (double-double) prefix sums of
//!   the node's slice totals: O(T·U) per node instead of the exact mode's O(T²·U) table of
//!   running sums, and no table added child into parent. An interval's sums come out
//!   correctly rounded, so intervals with the same values get the same qualities wherever
//!   they are (as in the exact mode), but the qualities the DP compares differ from the
//!   exact ones in their last bits (measured: [`AlgorithmComparison`]). Where two partitions
//!   tie in real numbers, each mode decides by its own rounding, so they may pick different
//!   ones of equal quality (the shared vector v06 does this). The partitions' reported
//!   qualities are computed from the model in the exact arithmetic, so equal partitions
//!   report equal qualities.
//! - Consecutive leaf children are solved two at a time, one per core.
//!
//! The DP itself — the candidate rule, the bounded inner maximum, the tie order, the
//! aggregation flag — and the partition walk are the exact mode's.

use super::*;

/// One node's totals per slice and type (`[t * types + k]`): the sum of its leaves' values
/// and of their micro entropies, children added in order.
#[derive(Debug, Clone)]
pub(super) struct SliceTotals {
    sum: Vec<f64>,
    micro: Vec<f64>,
}

/// Every node's [`SliceTotals`], in node order (`|V|·T·U·16` bytes).
pub(super) fn slice_totals(model: &MicroscopicModel, h: &SpatialHierarchy) -> Vec<SliceTotals> {
    let (n, types) = (model.slices(), model.types());
    let mut out: Vec<Option<SliceTotals>> = vec![None; h.len()];
    for &v in h.post_order() {
        let totals = match h.leaf_producer(v) {
            Some(producer) => {
                let mut t = SliceTotals {
                    sum: vec![0.0; n * types],
                    micro: vec![0.0; n * types],
                };
                for slice in 0..n {
                    for k in 0..types {
                        let x = model.value(slice, producer, k);
                        t.sum[slice * types + k] = x;
                        t.micro[slice * types + k] = entropy_reduction(x, 0.0);
                    }
                }
                t
            }
            None => {
                let mut t = SliceTotals {
                    sum: vec![0.0; n * types],
                    micro: vec![0.0; n * types],
                };
                for &kid in h.children(v) {
                    let c = out[kid]
                        .as_ref()
                        .expect("children come first in post-order");
                    for (a, b) in t.sum.iter_mut().zip(&c.sum) {
                        *a += *b;
                    }
                    for (a, b) in t.micro.iter_mut().zip(&c.micro) {
                        *a += *b;
                    }
                }
                t
            }
        };
        out[v] = Some(totals);
    }
    out.into_iter()
        .map(|t| t.expect("post-order visits every node"))
        .collect()
}

/// A node's compensated prefix sums per type, `[k * (n + 1) + t]` for slices `0..t`: the
/// running sum and the running error of its additions (Knuth's two-sum), so that the
/// difference of two prefixes is the interval's sum to about one rounding of the interval
/// itself, not of the whole series.
struct Prefixes {
    stride: usize,
    sum_hi: Vec<f64>,
    sum_lo: Vec<f64>,
    micro_hi: Vec<f64>,
    micro_lo: Vec<f64>,
}

/// `(a + b, error)` with `a + b = sum + error` exactly.
#[inline]
fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    (s, (a - (s - bb)) + (b - bb))
}

impl Prefixes {
    fn new(t: &SliceTotals, n: usize, types: usize) -> Self {
        let stride = n + 1;
        let mut p = Prefixes {
            stride,
            sum_hi: vec![0.0; types * stride],
            sum_lo: vec![0.0; types * stride],
            micro_hi: vec![0.0; types * stride],
            micro_lo: vec![0.0; types * stride],
        };
        for k in 0..types {
            let b = k * stride;
            for slice in 0..n {
                let (hi, err) = two_sum(p.sum_hi[b + slice], t.sum[slice * types + k]);
                p.sum_hi[b + slice + 1] = hi;
                p.sum_lo[b + slice + 1] = p.sum_lo[b + slice] + err;
                let (hi, err) = two_sum(p.micro_hi[b + slice], t.micro[slice * types + k]);
                p.micro_hi[b + slice + 1] = hi;
                p.micro_lo[b + slice + 1] = p.micro_lo[b + slice] + err;
            }
        }
        p
    }

    /// Sum and micro entropy of type `k` over slices `start..end1`.
    #[inline]
    fn interval(&self, k: usize, start: usize, end1: usize) -> (f64, f64) {
        let (b, e) = (k * self.stride + start, k * self.stride + end1);
        (
            difference(
                self.sum_hi[e],
                self.sum_lo[e],
                self.sum_hi[b],
                self.sum_lo[b],
            ),
            difference(
                self.micro_hi[e],
                self.micro_lo[e],
                self.micro_hi[b],
                self.micro_lo[b],
            ),
        )
    }
}

/// `(hi_e + lo_e) − (hi_s + lo_s)` rounded once: the high parts' difference is split into
/// its rounded value and its exact error, so the result is the interval's exact sum
/// correctly rounded (but for a distance to a rounding boundary of about 2^-100 of the
/// series' total). Intervals with the same values therefore get the same bits wherever they
/// are, as the exact mode's running sums do, which keeps the exact mode's ties.
#[inline]
fn difference(hi_e: f64, lo_e: f64, hi_s: f64, lo_s: f64) -> f64 {
    let (d, err) = two_sum(hi_e, -hi_s);
    d + (err + (lo_e - lo_s))
}

/// Gain and loss of the intervals `[from + s, from + e]` (`0 ≤ s ≤ e < len`, local cells
/// `at(e, s)`) of a node with `size` leaves; a leaf's single slices stay 0, as in the exact
/// mode. `parallel` spreads the ends over the threads (internal nodes; leaves run in pairs).
#[allow(clippy::too_many_arguments)]
fn node_qualities(
    pre: &Prefixes,
    types: usize,
    from: usize,
    len: usize,
    size: usize,
    leaf: bool,
    ln: &[f64],
    parallel: bool,
) -> NodeQualities {
    let cells = intervals(len);
    let mut gain = vec![0.0; cells];
    let mut loss = vec![0.0; cells];
    let parts = if parallel {
        4 * rayon::current_num_threads()
    } else {
        1
    };
    let ranges = end_ranges(len, parts);
    let gains = split_by_ends(&mut gain, &ranges, 1);
    let losses = split_by_ends(&mut loss, &ranges, 1);
    let work = |((ends, g), l): ((&Range<usize>, &mut [f64]), &mut [f64])| {
        let offset = intervals(ends.start);
        for end in ends.clone() {
            let starts = if leaf { end } else { end + 1 };
            let row = at(end, 0) - offset;
            let (g, l) = (&mut g[row..row + starts], &mut l[row..row + starts]);
            let mut done = 0;
            #[cfg(target_arch = "x86_64")]
            if fastlog::available() {
                // SAFETY: `fastlog::available` checked AVX2 and FMA.
                done = unsafe { row_avx2(pre, types, from, end, starts, size, ln, g, l) };
            }
            for s in done..starts {
                let (cg, cl) =
                    cell_quality(pre, types, from + s, from + end + 1, end - s, size, ln);
                g[s] = cg;
                l[s] = cl;
            }
        }
    };
    if parallel {
        ranges.par_iter().zip(gains).zip(losses).for_each(work);
    } else {
        ranges.iter().zip(gains).zip(losses).for_each(work);
    }
    NodeQualities { gain, loss }
}

/// One interval's gain and loss: slices `start..end1`, `span = end1 − start − 1`.
#[inline]
fn cell_quality(
    pre: &Prefixes,
    types: usize,
    start: usize,
    end1: usize,
    span: usize,
    size: usize,
    ln: &[f64],
) -> (f64, f64) {
    let ln_size = ln[(span + 1) * size];
    let (mut g, mut l) = (0.0, 0.0);
    for k in 0..types {
        let (s, m) = pre.interval(k, start, end1);
        let reduction = entropy_reduction(s, m);
        g += reduction;
        l += divergence(ln_size, s, reduction);
    }
    (g, l)
}

/// [`cell_quality`] for the local starts `0..starts` of local end `end`, four starts per
/// vector with the same operations (and [`fastlog::log4`]'s bits, which are `f64::ln`'s);
/// returns how many starts it did.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
fn row_avx2(
    pre: &Prefixes,
    types: usize,
    from: usize,
    end: usize,
    starts: usize,
    size: usize,
    ln: &[f64],
    gain: &mut [f64],
    loss: &mut [f64],
) -> usize {
    use std::arch::x86_64::*;
    let whole = starts / 4 * 4;
    let end1 = from + end + 1;
    for first in (0..whole).step_by(4) {
        let ln_size: [f64; 4] = std::array::from_fn(|i| ln[(end - first - i + 1) * size]);
        // SAFETY (every load and store below): four doubles from or into a slice of at least
        // four (the prefixes hold `start + 4 ≤ from + starts ≤ end1` and more).
        let ln_size = unsafe { _mm256_loadu_pd(ln_size.as_ptr()) };
        let (mut cg, mut cl) = (_mm256_setzero_pd(), _mm256_setzero_pd());
        for k in 0..types {
            let b = k * pre.stride + from + first;
            let e = k * pre.stride + end1;
            let four = |t: &[f64]| unsafe { _mm256_loadu_pd(t[b..b + 4].as_ptr()) };
            let one = |t: &[f64]| _mm256_set1_pd(t[e]);
            // `difference`, lane by lane: two_sum(hi_e, −hi_s), then the low parts.
            let diff = |hi: &[f64], lo: &[f64]| {
                let (a, nb) = (one(hi), _mm256_sub_pd(_mm256_setzero_pd(), four(hi)));
                let d = _mm256_add_pd(a, nb);
                let bb = _mm256_sub_pd(d, a);
                let err = _mm256_add_pd(
                    _mm256_sub_pd(a, _mm256_sub_pd(d, bb)),
                    _mm256_sub_pd(nb, bb),
                );
                _mm256_add_pd(d, _mm256_add_pd(err, _mm256_sub_pd(one(lo), four(lo))))
            };
            let sum = diff(&pre.sum_hi, &pre.sum_lo);
            let micro = diff(&pre.micro_hi, &pre.micro_lo);
            let (reduction, divergence) = reduction_divergence4(sum, micro, ln_size);
            cg = _mm256_add_pd(cg, reduction);
            cl = _mm256_add_pd(cl, divergence);
        }
        unsafe { _mm256_storeu_pd(gain[first..first + 4].as_mut_ptr(), cg) };
        unsafe { _mm256_storeu_pd(loss[first..first + 4].as_mut_ptr(), cl) };
    }
    whole
}

/// A node's DP over `len` slices: the exact mode's kernel (rows in parallel blocks, the
/// bounded inner maximum, the original's tie order) over this mode's candidates. Returns the
/// best compromise and the cut code of every local cell `at(e, k)`.
///
/// Knuth's monotone-cut window (the last cut of `[k, e]` between those of `[k, e − 1]` and
/// `[k + 1, e]`, O(T²) per node) was tried here first and dropped: pIC does not meet the
/// quadrangle inequality it needs, and on the shared vector v03 the windowed DP missed the
/// optimum at 23 of 1 025 grid p (a partition with 5 % more gain and 550× the loss of the
/// exact one). Used only to seed the bounded search, it was no faster than the exact
/// kernel's own seed (the previous end's cut), and slower row by row, so it is not kept.
fn dp_node(
    len: usize,
    p: f64,
    cand: &Table,
    own: Option<(&[f64], &[f64])>,
    blocks: CutBlocks,
) -> (Table, Vec<u32>) {
    let cells = intervals(len);
    let bounds = (len > blocks.min_candidates).then(|| CutBounds::new(cand, len, blocks));
    let input = DpInput {
        n: len,
        p,
        cand,
        own,
        bounds: bounds.as_ref(),
    };
    let mut best = Table::zeroed(cells);
    let mut cut = vec![0u32; cells];
    for block in dp_all(&input) {
        for (r, (row_best, row_cut)) in block.rows.iter().enumerate() {
            let k = block.first + r;
            for e in k..len {
                let i = at(e, k);
                best.value[i] = row_best.value[e - k];
                best.gain[i] = row_best.gain[e - k];
                best.loss[i] = row_best.loss[e - k];
                cut[i] = row_cut[e - k];
            }
        }
    }
    (best, cut)
}

/// `acc += t`, cell by cell.
fn add_into(acc: &mut Table, t: &Table) {
    let pairs = [
        (&mut acc.value, &t.value),
        (&mut acc.gain, &t.gain),
        (&mut acc.loss, &t.loss),
    ];
    for (a, b) in pairs {
        for (x, y) in a.iter_mut().zip(b) {
            *x += *y;
        }
    }
}

impl SpatiotemporalQualities {
    /// Solves `node` at p after its children, keeping internal nodes' cut tables in `cuts`;
    /// returns the node's best compromise of every interval (what its parent adds up).
    /// Consecutive leaf children run two at a time, one per core.
    pub(super) fn solve_scalable(
        &self,
        totals: &[SliceTotals],
        ev: &Evaluation,
        node: usize,
        cuts: &mut [Vec<u32>],
    ) -> Result<Table, Cancelled> {
        if ev.observer.cancelled() {
            return Err(Cancelled);
        }
        let h = &self.hierarchy;
        if h.is_leaf(node) {
            return Ok(self.leaf_best(totals, ev, node));
        }
        let n = self.slices;
        let cells = intervals(n);
        let mut split = Table::zeroed(cells);
        let kids = h.children(node);
        let mut i = 0;
        while i < kids.len() {
            if h.is_leaf(kids[i]) && i + 1 < kids.len() && h.is_leaf(kids[i + 1]) {
                if ev.observer.cancelled() {
                    return Err(Cancelled);
                }
                let (a, b) = rayon::join(
                    || self.leaf_best(totals, ev, kids[i]),
                    || self.leaf_best(totals, ev, kids[i + 1]),
                );
                add_into(&mut split, &a);
                add_into(&mut split, &b);
                i += 2;
            } else {
                let best = self.solve_scalable(totals, ev, kids[i], cuts)?;
                add_into(&mut split, &best);
                i += 1;
            }
        }
        let pre = Prefixes::new(&totals[node], n, self.types);
        let q = node_qualities(
            &pre,
            self.types,
            0,
            n,
            h.leaf_count(node),
            false,
            &self.ln,
            true,
        );
        let p = ev.p;
        let mut cand = Table::with_capacity(cells);
        for i in 0..cells {
            cand.push(Compromise::greatest(
                Compromise::pic(p, q.gain[i], q.loss[i]),
                split.get(i),
            ));
        }
        drop(split);
        let (best, cut) = dp_node(n, p, &cand, Some((&q.gain, &q.loss)), self.cut_blocks);
        cuts[node] = cut;
        self.node_done(ev);
        Ok(best)
    }

    fn node_done(&self, ev: &Evaluation) {
        let done = ev
            .nodes_done
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        ev.observer
            .working(done as f64 / self.hierarchy.len() as f64);
    }

    /// A leaf's DP over the slices `from..from + len` (its qualities from the prefixes of
    /// the whole series, so every cell is the one the whole leaf's DP sees).
    fn leaf_dp(
        &self,
        totals: &[SliceTotals],
        leaf: usize,
        from: usize,
        len: usize,
        p: f64,
    ) -> (Table, Vec<u32>) {
        let pre = Prefixes::new(&totals[leaf], self.slices, self.types);
        let q = node_qualities(&pre, self.types, from, len, 1, true, &self.ln, false);
        let cells = intervals(len);
        let mut cand = Table::with_capacity(cells);
        for i in 0..cells {
            cand.push(Compromise::pic(p, q.gain[i], q.loss[i]));
        }
        dp_node(len, p, &cand, None, self.cut_blocks)
    }

    fn leaf_best(&self, totals: &[SliceTotals], ev: &Evaluation, leaf: usize) -> Table {
        let (best, _) = self.leaf_dp(totals, leaf, 0, self.slices, ev.p);
        self.node_done(ev);
        best
    }

    /// The cuts of a leaf's row `start` up to `end` (global slice numbers), as the leaf's
    /// DP in [`Self::solve_scalable`] made them: a row reads only its own cells, with the
    /// same qualities (prefixes of the whole series), so it is recomputed alone.
    pub(super) fn leaf_row_scalable(
        &self,
        totals: &[SliceTotals],
        leaf: usize,
        start: usize,
        end: usize,
        p: f64,
    ) -> Vec<u32> {
        let len = end - start + 1;
        let pre = Prefixes::new(&totals[leaf], self.slices, self.types);
        let q = node_qualities(&pre, self.types, start, len, 1, true, &self.ln, false);
        let cells = intervals(len);
        let mut cand = Table::with_capacity(cells);
        for i in 0..cells {
            cand.push(Compromise::pic(p, q.gain[i], q.loss[i]));
        }
        leaf_first_row(&cand, len, start, p)
    }
}

/// How the scalable algorithm's results compare with the exact ones on one model (what the
/// issue asks to report: partitions differing, and the largest relative quality difference).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AlgorithmComparison {
    /// Significant p values of each algorithm's bisection.
    pub exact_ps: usize,
    pub scalable_ps: usize,
    /// Both bisections gave the same p values with the same partitions.
    pub same_p_list: bool,
    /// p values of the exact list whose scalable partition (at the same p) is not the exact one.
    pub differing_partitions: usize,
    /// The largest `|q_scalable − q_exact| / max(|q_scalable|, |q_exact|)` of the partitions'
    /// gains and losses at the exact list's p values (0 where the partitions are equal: both
    /// report qualities in the exact arithmetic).
    pub max_relative_partition_quality_difference: f64,
    /// The largest difference of one area's gain or loss between the prefix sums and the
    /// exact running sums, relative to that area's `|gain| + |loss|`, over every node and
    /// interval: what the DP of the scalable algorithm compares.
    pub max_relative_area_quality_difference: f64,
}

fn relative(a: f64, b: f64, scale: f64) -> f64 {
    if a == b {
        0.0
    } else if scale > 0.0 {
        (a - b).abs() / scale
    } else {
        f64::INFINITY
    }
}

/// Runs both algorithms' full bisections on `model` (exact with its qualities kept) and
/// compares them p by p.
pub fn compare_algorithms(
    model: &MicroscopicModel,
    hierarchy: &SpatialHierarchy,
    threshold: f32,
) -> AlgorithmComparison {
    let exact = SpatiotemporalAggregation::with_store(model, hierarchy, QualityStore::Stored);
    let fast = SpatiotemporalAggregation::scalable(model, hierarchy);
    let exact_list = exact.significant_ps(threshold);
    let fast_list = fast.significant_ps(threshold);
    let same_p_list = exact_list.len() == fast_list.len()
        && exact_list
            .entries()
            .iter()
            .zip(fast_list.entries())
            .all(|(a, b)| {
                a.p == b.p
                    && a.partition.canonical_aggregates() == b.partition.canonical_aggregates()
            });
    let mut differing = 0;
    let mut worst = 0.0f64;
    for e in exact_list.entries() {
        let got = fast.best_partition(f64::from(e.p));
        if got.canonical_aggregates() != e.partition.canonical_aggregates() {
            differing += 1;
        }
        let (a, b) = (got.quality(), e.partition.quality());
        worst = worst
            .max(relative(a.gain, b.gain, a.gain.abs().max(b.gain.abs())))
            .max(relative(a.loss, b.loss, a.loss.abs().max(b.loss.abs())));
    }
    AlgorithmComparison {
        exact_ps: exact_list.len(),
        scalable_ps: fast_list.len(),
        same_p_list,
        differing_partitions: differing,
        max_relative_partition_quality_difference: worst,
        max_relative_area_quality_difference: exact
            .qualities()
            .largest_area_difference(fast.qualities()),
    }
}

impl SpatiotemporalQualities {
    /// See [`AlgorithmComparison::max_relative_area_quality_difference`]; `self` holds the
    /// exact qualities (stored), `fast` the scalable ones.
    fn largest_area_difference(&self, fast: &SpatiotemporalQualities) -> f64 {
        let (Store::Stored { gain, loss }, Some(totals)) = (&self.store, &fast.scalable) else {
            return f64::NAN;
        };
        let h = &self.hierarchy;
        (0..h.len())
            .into_par_iter()
            .map(|v| {
                let pre = Prefixes::new(&totals[v], self.slices, self.types);
                let q = node_qualities(
                    &pre,
                    self.types,
                    0,
                    self.slices,
                    h.leaf_count(v),
                    h.is_leaf(v),
                    &self.ln,
                    false,
                );
                let mut worst = 0.0f64;
                for i in 0..q.gain.len() {
                    let scale = gain[v][i].abs() + loss[v][i].abs();
                    worst = worst
                        .max(relative(q.gain[i], gain[v][i], scale))
                        .max(relative(q.loss[i], loss[v][i], scale));
                }
                worst
            })
            .reduce(|| 0.0, f64::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn model(
        fan_out: &[usize],
        t: usize,
        u: usize,
        seed: u64,
        levels: &[f64],
    ) -> (MicroscopicModel, SpatialHierarchy) {
        let h = SpatialHierarchy::balanced(fan_out);
        let s = h.leaf_count(h.root());
        let mut state = seed | 1;
        let values = (0..t * s * u)
            .map(|i| {
                crate::ocelotl::xorshift(&mut state);
                let phase = levels[(i / (s * u)) * levels.len() / t];
                match state % 6 {
                    0 => 0.0,
                    1 => phase,
                    _ => (phase + (state >> 11) as f64 / (1u64 << 53) as f64 * 2.0).floor(),
                }
            })
            .collect();
        (MicroscopicModel::new(t, s, u, values).unwrap(), h)
    }

    fn blocks(outer: usize, inner: usize, min_candidates: usize) -> CutBlocks {
        CutBlocks {
            outer,
            inner,
            min_candidates,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

        /// The DP's bounded maximum over this mode's candidates is the full scan's on every
        /// cell, whatever the block shape (tiny blocks cross many edges and skip often).
        #[test]
        fn node_dp_is_the_full_scan(
            t in 2usize..=70,
            u in 1usize..=3,
            seed in any::<u64>(),
            levels in prop::collection::vec(0.0..6.0f64, 1..=4),
            p in prop_oneof![Just(0.0), Just(1.0), Just(0.5), 0.0..=1.0f64],
        ) {
            let (m, h) = model(&[2, 2], t, u, seed, &levels);
            let totals = slice_totals(&m, &h);
            let q = SpatiotemporalQualities::scalable(&m, &h);
            for node in [h.root(), h.children(h.root())[0]] {
                let pre = Prefixes::new(&totals[node], t, u);
                let nq = node_qualities(&pre, u, 0, t, h.leaf_count(node), false, &q.ln, false);
                let cells = intervals(t);
                let mut cand = Table::with_capacity(cells);
                for i in 0..cells {
                    cand.push(Compromise::pic(p, nq.gain[i], nq.loss[i]));
                }
                let own = Some((&nq.gain[..], &nq.loss[..]));
                let full = dp_node(t, p, &cand, own, blocks(8, 8, usize::MAX));
                for b in [blocks(4, 2, 2), blocks(2, 1, 1), blocks(32, 8, 64), blocks(8, 4, 3)] {
                    let got = dp_node(t, p, &cand, own, b);
                    prop_assert_eq!(&got.1, &full.1);
                    prop_assert_eq!(&got.0.value, &full.0.value);
                }
            }
        }

        /// The leaf rows the walk recomputes are those of the leaf's whole DP.
        #[test]
        fn leaf_rows_are_the_whole_leaf_dp(
            t in 1usize..=40,
            u in 1usize..=2,
            seed in any::<u64>(),
            p in 0.0..=1.0f64,
        ) {
            let (m, h) = model(&[2], t, u, seed, &[1.0, 4.0]);
            let q = SpatiotemporalQualities::scalable(&m, &h);
            let totals = q.scalable.as_ref().unwrap();
            let leaf = h.children(h.root())[1];
            let (_, whole) = q.leaf_dp(totals, leaf, 0, t, p);
            for k in 0..t {
                for end in k..t {
                    let row = q.leaf_row_scalable(totals, leaf, k, end, p);
                    for x in k..=end {
                        prop_assert_eq!(row[x - k], whole[at(x, k)], "[{}, {}] of [{}, {}]", k, x, k, end);
                    }
                }
            }
        }

        /// Prefix sums change only the last bits of an area's quality.
        #[test]
        fn prefix_qualities_are_close_to_the_exact_ones(
            t in 1usize..=30,
            u in 1usize..=3,
            seed in any::<u64>(),
            levels in prop::collection::vec(0.0..1e6f64, 1..=3),
        ) {
            let (m, h) = model(&[3, 2], t, u, seed, &levels);
            let exact = SpatiotemporalQualities::compute(&m, &h);
            let fast = SpatiotemporalQualities::scalable(&m, &h);
            let d = exact.largest_area_difference(&fast);
            prop_assert!(d < 1e-12, "{}", d);
        }
    }
}
