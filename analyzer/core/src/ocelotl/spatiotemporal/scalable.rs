//! The scalable spatiotemporal mode: the exact mode's arithmetic on a memory schedule for the
//! sizes where the exact mode's quality tables cannot be kept for the whole dichotomy.
//!
//! Every evaluation recomputes each node's per-type running sums and qualities in post-order:
//! a leaf's sums are its row-wise running sums (`sum[s][e] = sum[s][e − 1] + v[e]`), an
//! internal node's sums are accumulated child by child, in order, into a zero table
//! (`0 + x = x` exactly, then the original's additions in the original's order), and its
//! qualities come from those sums through the exact mode's kernel. So every area's gain and
//! loss, every pIC, every DP decision and every partition are the exact mode's, bit for bit
//! (tests: `reference_vectors`, `scalable_against_exact`). A node's sums live only until its
//! parent has added them: at any time one accumulator per level of the current path and the
//! two leaves in flight.
//!
//! What differs from the exact mode recomputing its qualities is only the schedule:
//! consecutive leaf children are solved two at a time, one per core, and added into their
//! parent in order once both are done. And its bisection (`dichotomy::lines`) runs a DP only
//! at the p where the quality lines of the partitions met so far cannot tell lpaggreg's
//! answer: the same p list, quality bits and partitions from far fewer evaluations.
//!
//! (Until session 8 this mode took the qualities from compensated prefix sums, which differ
//! from the running sums in their last bits, so near-ties were decided otherwise: 17 of the
//! 39 p of the shared vector v06, 3 of 400 random trees. The running sums cost a few percent
//! more per evaluation and remove that difference.)

use super::*;

/// Gain and loss of the node whose per-type sums are `sums`, by the exact mode's kernel.
fn qualities(q: &SpatiotemporalQualities, node: usize, sums: &Sums) -> NodeQualities {
    let h = &q.hierarchy;
    qualities_from_sums(
        sums,
        q.types,
        q.slices,
        h.leaf_count(node),
        h.is_leaf(node),
        &q.ln,
    )
}

/// A node's DP over `len` slices: the exact mode's kernel (rows in parallel blocks, the
/// bounded inner maximum, the original's tie order). Returns the best compromise and the cut
/// code of every local cell `at(e, k)`.
///
/// Knuth's monotone-cut window (the last cut of `[k, e]` between those of `[k, e − 1]` and
/// `[k + 1, e]`, O(T²) per node) was tried here in session 6 and dropped: pIC does not meet
/// the quadrangle inequality it needs, and on the shared vector v03 the windowed DP missed
/// the optimum at 23 of 1 025 grid p. Used only to seed the bounded search, it was no faster
/// than the exact kernel's own seed (the previous end's cut).
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

/// What a solved node hands its parent: its best compromise of every interval and its
/// per-type sums, both added into the parent's accumulators in child order.
pub(super) struct Solved {
    best: Table,
    sums: Sums,
}

impl SpatiotemporalQualities {
    /// Solves `node` at p after its children, keeping internal nodes' cut tables in `cuts`.
    /// Consecutive leaf children run two at a time, one per core.
    pub(super) fn solve_scalable(
        &self,
        model: &MicroscopicModel,
        ev: &Evaluation,
        node: usize,
        cuts: &mut [Vec<u32>],
    ) -> Result<Solved, Cancelled> {
        if ev.observer.cancelled() {
            return Err(Cancelled);
        }
        let h = &self.hierarchy;
        if h.is_leaf(node) {
            return Ok(self.leaf_solved(model, ev, node));
        }
        let n = self.slices;
        let cells = intervals(n);
        let mut split = Table::zeroed(cells);
        let mut sums = Sums::zeroed(cells * self.types);
        let mut add = |child: Solved| {
            add_into(&mut split, &child.best);
            sums.add(&child.sums);
        };
        let kids = h.children(node);
        let mut i = 0;
        while i < kids.len() {
            if h.is_leaf(kids[i]) && i + 1 < kids.len() && h.is_leaf(kids[i + 1]) {
                if ev.observer.cancelled() {
                    return Err(Cancelled);
                }
                let (a, b) = rayon::join(
                    || self.leaf_solved(model, ev, kids[i]),
                    || self.leaf_solved(model, ev, kids[i + 1]),
                );
                // In child order, whichever finished first.
                add(a);
                add(b);
                i += 2;
            } else {
                add(self.solve_scalable(model, ev, kids[i], cuts)?);
                i += 1;
            }
        }
        let q = qualities(self, node, &sums);
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
        Ok(Solved { best, sums })
    }

    fn node_done(&self, ev: &Evaluation) {
        let done = ev
            .nodes_done
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        ev.observer
            .working(done as f64 / self.hierarchy.len() as f64);
    }

    /// A leaf's DP over the whole series, from its running sums.
    fn leaf_dp(&self, model: &MicroscopicModel, leaf: usize, p: f64) -> (Table, Vec<u32>, Sums) {
        let producer = self
            .hierarchy
            .leaf_producer(leaf)
            .expect("a node without children is a leaf");
        let sums = leaf_sums(model, producer, 0, self.slices);
        let q = qualities(self, leaf, &sums);
        let cells = intervals(self.slices);
        let mut cand = Table::with_capacity(cells);
        for i in 0..cells {
            cand.push(Compromise::pic(p, q.gain[i], q.loss[i]));
        }
        drop(q);
        let (best, cut) = dp_node(self.slices, p, &cand, None, self.cut_blocks);
        (best, cut, sums)
    }

    fn leaf_solved(&self, model: &MicroscopicModel, ev: &Evaluation, leaf: usize) -> Solved {
        let (best, _, sums) = self.leaf_dp(model, leaf, ev.p);
        self.node_done(ev);
        Solved { best, sums }
    }

    /// Every node's qualities as this mode computes them (the post-order sums above),
    /// handed to `visit` (node, qualities); returns the node's sums for its parent.
    fn each_node_qualities(
        &self,
        model: &MicroscopicModel,
        node: usize,
        visit: &mut dyn FnMut(usize, NodeQualities),
    ) -> Sums {
        let h = &self.hierarchy;
        let sums = match h.leaf_producer(node) {
            Some(producer) => leaf_sums(model, producer, 0, self.slices),
            None => {
                let mut acc = Sums::zeroed(intervals(self.slices) * self.types);
                for &kid in h.children(node) {
                    acc.add(&self.each_node_qualities(model, kid, visit));
                }
                acc
            }
        };
        visit(node, qualities(self, node, &sums));
        sums
    }
}

/// How the scalable algorithm's results compare with the exact ones on one model (what the
/// issue asks to report: partitions differing, and the largest relative quality difference).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AlgorithmComparison {
    /// Significant p values of each algorithm's bisection.
    pub exact_ps: usize,
    pub scalable_ps: usize,
    /// Both bisections gave the same p values with the same partitions and quality bits.
    pub same_p_list: bool,
    /// DPs run by each: the exact algorithm's plain bisection, one per visited p; the scalable
    /// one's search by lines (at line crossings, plus midpoints the lines could not tell).
    pub exact_evaluations: usize,
    pub scalable_evaluations: usize,
    /// Of the scalable algorithm's DPs, those at line crossings.
    pub scalable_crossing_evaluations: usize,
    /// Midpoints of the bisection the scalable algorithm answered from the lines.
    pub scalable_predicted_midpoints: usize,
    /// p values of the exact list whose scalable partition (at the same p) is not the exact one.
    pub differing_partitions: usize,
    /// The largest `|q_scalable − q_exact| / max(|q_scalable|, |q_exact|)` of the partitions'
    /// gains and losses at the exact list's p values (0 where the partitions are equal: both
    /// report qualities in the exact arithmetic).
    pub max_relative_partition_quality_difference: f64,
    /// The largest difference of one area's gain or loss between the scalable algorithm's
    /// post-order pass and the exact stored tables, relative to that area's
    /// `|gain| + |loss|`, over every node and interval: what the DPs compare. 0 since both
    /// use the same running sums in the same order (until session 8 the scalable algorithm
    /// used prefix sums, and this was up to ≈ 3e-15).
    pub max_relative_area_quality_difference: f64,
}

/// Counts the DPs of a bisection.
#[derive(Default)]
struct EvaluationCount(std::sync::atomic::AtomicUsize);

impl<P> Observer<P> for EvaluationCount {
    fn evaluated(&self, _: f32, _: Quality, _: &P, _: usize) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
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
    let exact_count = EvaluationCount::default();
    let fast_count = EvaluationCount::default();
    let run = |agg: &SpatiotemporalAggregation, count: &EvaluationCount| match agg
        .significant_ps_counted(threshold, count)
    {
        Ok(got) => got,
        Err(Cancelled) => unreachable!("a counting observer never cancels"),
    };
    let (exact_list, _) = run(&exact, &exact_count);
    let (fast_list, lines) = run(&fast, &fast_count);
    let lines = lines.unwrap_or_default();
    let bits = |q: Quality| (q.gain.to_bits(), q.loss.to_bits());
    let same_p_list = exact_list.len() == fast_list.len()
        && exact_list
            .entries()
            .iter()
            .zip(fast_list.entries())
            .all(|(a, b)| {
                a.p == b.p && bits(a.quality) == bits(b.quality) && a.partition == b.partition
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
        exact_evaluations: exact_count.0.into_inner(),
        scalable_evaluations: fast_count.0.into_inner(),
        scalable_crossing_evaluations: lines.crossings,
        scalable_predicted_midpoints: lines.predicted,
        differing_partitions: differing,
        max_relative_partition_quality_difference: worst,
        max_relative_area_quality_difference: exact
            .qualities()
            .largest_area_difference(fast.qualities()),
    }
}

impl SpatiotemporalQualities {
    /// See [`AlgorithmComparison::max_relative_area_quality_difference`]; `self` holds the
    /// exact qualities (stored), `fast` the scalable ones (recomputed by its own pass).
    fn largest_area_difference(&self, fast: &SpatiotemporalQualities) -> f64 {
        let (Store::Stored { gain, loss }, Store::Recomputed { model }) =
            (&self.store, &fast.store)
        else {
            return f64::NAN;
        };
        let mut worst = 0.0f64;
        fast.each_node_qualities(model, fast.hierarchy.root(), &mut |v, q| {
            for i in 0..q.gain.len() {
                let scale = gain[v][i].abs() + loss[v][i].abs();
                worst = worst
                    .max(relative(q.gain[i], gain[v][i], scale))
                    .max(relative(q.loss[i], loss[v][i], scale));
            }
        });
        worst
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

    /// Every node's qualities as this mode's post-order pass makes them.
    fn all_qualities(q: &SpatiotemporalQualities, m: &MicroscopicModel) -> Vec<NodeQualities> {
        let mut out: Vec<Option<NodeQualities>> = (0..q.hierarchy.len()).map(|_| None).collect();
        q.each_node_qualities(m, q.hierarchy.root(), &mut |v, nq| out[v] = Some(nq));
        out.into_iter().map(Option::unwrap).collect()
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
            let q = SpatiotemporalQualities::scalable(&m, &h);
            let all = all_qualities(&q, &m);
            for node in [h.root(), h.children(h.root())[0]] {
                let nq = &all[node];
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

        /// The leaf rows the walk recomputes are those of this mode's whole leaf DP.
        #[test]
        fn leaf_rows_are_the_whole_leaf_dp(
            t in 1usize..=40,
            u in 1usize..=2,
            seed in any::<u64>(),
            p in 0.0..=1.0f64,
        ) {
            let (m, h) = model(&[2], t, u, seed, &[1.0, 4.0]);
            let q = SpatiotemporalQualities::scalable(&m, &h);
            let leaf = h.children(h.root())[1];
            let (_, whole, _) = q.leaf_dp(&m, leaf, p);
            for k in 0..t {
                for end in k..t {
                    let row = q.leaf_row(leaf, k, end, p);
                    for x in k..=end {
                        prop_assert_eq!(row[x - k], whole[at(x, k)], "[{}, {}] of [{}, {}]", k, x, k, end);
                    }
                }
            }
        }

        /// Every area's gain and loss are the exact mode's stored ones, bit for bit (large
        /// magnitudes, repeats and zeros, where prefix sums used to differ).
        #[test]
        fn qualities_are_the_exact_ones_bit_for_bit(
            t in 1usize..=30,
            u in 1usize..=3,
            seed in any::<u64>(),
            levels in prop::collection::vec(0.0..1e6f64, 1..=3),
        ) {
            let (m, h) = model(&[3, 2], t, u, seed, &levels);
            let exact = SpatiotemporalQualities::compute(&m, &h);
            let Store::Stored { gain, loss } = &exact.store else { unreachable!() };
            let fast = SpatiotemporalQualities::scalable(&m, &h);
            for (v, nq) in all_qualities(&fast, &m).iter().enumerate() {
                let bits = |x: &[f64]| x.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                prop_assert_eq!(bits(&nq.gain), bits(&gain[v]), "gain of node {}", v);
                prop_assert_eq!(bits(&nq.loss), bits(&loss[v]), "loss of node {}", v);
            }
            prop_assert_eq!(exact.largest_area_difference(&fast), 0.0);
        }
    }
}
