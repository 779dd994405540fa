//! Spatiotemporal aggregation (lpaggreg `DLPAggreg2`): areas are (hierarchy node, time
//! interval); each node either aggregates a time segment over all its leaves or hands the
//! segment down to its children, which partition it independently.

use rayon::prelude::*;

use super::complexity::{divergence, entropy_reduction, ln_table};
use super::dichotomy::{Bisection, PList, Quality, bisect};
use super::model::{MicroscopicModel, ProducerHierarchy};

/// Index of the interval `[start, end]` in a packed lower triangle, rows by end: the DP's
/// inner loop walks all starts of one end.
#[inline]
fn at(end: usize, start: usize) -> usize {
    end * (end + 1) / 2 + start
}

/// Cut tables of a subtree, by node id.
type SubtreeCuts = Vec<(usize, Vec<u32>)>;

/// The largest `values[i] + prefixes[i]`, NaN ignored. Max is order-independent (±0 compare
/// equal, NaN never wins), so lanes run side by side and the compiler vectorises them.
#[inline]
fn sum_max(values: &[f64], prefixes: &[f64]) -> f64 {
    // Eight lanes: four independent max chains of two, enough to hide maxpd's latency.
    let mut lanes = [f64::NEG_INFINITY; 8];
    let (mut vs, mut ps) = (values.chunks_exact(8), prefixes.chunks_exact(8));
    for (v8, p8) in (&mut vs).zip(&mut ps) {
        for l in 0..8 {
            let x = v8[l] + p8[l];
            if x > lanes[l] {
                lanes[l] = x;
            }
        }
    }
    for (l, (a, b)) in vs.remainder().iter().zip(ps.remainder()).enumerate() {
        let x = a + b;
        if x > lanes[l] {
            lanes[l] = x;
        }
    }
    lanes
        .into_iter()
        .fold(f64::NEG_INFINITY, |m, x| if x > m { x } else { m })
}

/// Indices where `values[i] + prefixes[i] == top`, in increasing order, tested four at a
/// time because matches are rare.
fn positions_of<'a>(
    values: &'a [f64],
    prefixes: &'a [f64],
    top: f64,
) -> impl Iterator<Item = usize> + 'a {
    let quads = values.len() / 4;
    (0..quads)
        .filter(move |&q| {
            let (v, p) = (&values[4 * q..4 * q + 4], &prefixes[4 * q..4 * q + 4]);
            (v[0] + p[0] == top)
                | (v[1] + p[1] == top)
                | (v[2] + p[2] == top)
                | (v[3] + p[3] == top)
        })
        .flat_map(|q| 4 * q..4 * q + 4)
        .chain(4 * quads..values.len())
        .filter(move |&i| values[i] + prefixes[i] == top)
}

/// Marks a cut whose last segment is aggregated at the node rather than delegated.
const AGGREGATED: u32 = 1 << 31;

/// Gain and loss of every (node, interval) area.
#[derive(Debug, Clone)]
pub struct SpatiotemporalQualities {
    slices: usize,
    hierarchy: ProducerHierarchy,
    /// Per node, packed by end (see [`at`]).
    gain: Vec<Vec<f64>>,
    loss: Vec<Vec<f64>>,
}

/// Per-type running sums of a node over every interval, handed to the parent and then dropped.
struct Sums {
    sum: Vec<f64>,
    micro: Vec<f64>,
}

struct QualityJob<'a> {
    model: &'a MicroscopicModel,
    hierarchy: &'a ProducerHierarchy,
    ln: Vec<f64>,
}

type NodeQualities = Vec<(usize, Vec<f64>, Vec<f64>)>;

impl QualityJob<'_> {
    /// Post-order, children in parallel; each node's arithmetic is the original's sequence.
    fn node(&self, node: usize) -> (Sums, NodeQualities) {
        let n = self.model.slices();
        let types = self.model.types();
        let cells = n * (n + 1) / 2;
        let mut sum = vec![0.0; cells * types];
        let mut micro = vec![0.0; cells * types];
        let mut gain = vec![0.0; cells];
        let mut loss = vec![0.0; cells];
        let mut done = Vec::new();
        if let Some(producer) = self.hierarchy.leaf_producer(node) {
            let v = |t: usize, k: usize| self.model.value(t, producer, k);
            for start in 0..n {
                let first = at(start, start) * types;
                for k in 0..types {
                    sum[first + k] = v(start, k);
                    micro[first + k] = entropy_reduction(v(start, k), 0.0);
                }
                for end in start + 1..n {
                    let (prev, cur) = (at(end - 1, start) * types, at(end, start) * types);
                    let (mut g, mut l) = (0.0, 0.0);
                    for k in 0..types {
                        let s = sum[prev + k] + v(end, k);
                        let m = micro[prev + k] + entropy_reduction(v(end, k), 0.0);
                        sum[cur + k] = s;
                        micro[cur + k] = m;
                        let reduction = entropy_reduction(s, m);
                        g += reduction;
                        l += divergence(self.ln[end - start + 1], s, reduction);
                    }
                    gain[at(end, start)] = g;
                    loss[at(end, start)] = l;
                }
            }
        } else {
            let kids: Vec<(Sums, NodeQualities)> = self
                .hierarchy
                .children(node)
                .par_iter()
                .map(|&c| self.node(c))
                .collect();
            let size = self.hierarchy.leaf_count(node);
            for end in 0..n {
                for start in 0..=end {
                    let cell = at(end, start);
                    let (mut g, mut l) = (0.0, 0.0);
                    for k in 0..types {
                        let (mut s, mut m) = (0.0, 0.0);
                        for (kid, _) in &kids {
                            s += kid.sum[cell * types + k];
                            m += kid.micro[cell * types + k];
                        }
                        sum[cell * types + k] = s;
                        micro[cell * types + k] = m;
                        let reduction = entropy_reduction(s, m);
                        g += reduction;
                        l += divergence(self.ln[(end - start + 1) * size], s, reduction);
                    }
                    gain[cell] = g;
                    loss[cell] = l;
                }
            }
            for (_, q) in kids {
                done.extend(q);
            }
        }
        done.push((node, gain, loss));
        (Sums { sum, micro }, done)
    }
}

/// lpaggreg's `Compromise`: the pIC value with the gain and loss it came from, ordered by
/// value, then larger gain, then smaller loss.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Compromise {
    value: f64,
    gain: f64,
    loss: f64,
}

impl Compromise {
    const ZERO: Compromise = Compromise {
        value: 0.0,
        gain: 0.0,
        loss: 0.0,
    };

    #[inline]
    fn add(self, o: Compromise) -> Compromise {
        Compromise {
            value: self.value + o.value,
            gain: self.gain + o.gain,
            loss: self.loss + o.loss,
        }
    }

    #[inline]
    fn beats(self, o: Compromise) -> bool {
        self.value > o.value
            || (self.value == o.value && self.gain > o.gain)
            || (self.value == o.value && self.gain == o.gain && self.loss < o.loss)
    }

    /// `greatest(a, b)`: the second on a full tie, which the aggregation flag then attributes
    /// to the node itself (ties aggregate high).
    #[inline]
    fn greatest(a: Compromise, b: Compromise) -> Compromise {
        if a.beats(b) { a } else { b }
    }
}

/// Structure-of-arrays compromises over the packed triangle; the DP's hot loop only reads
/// values, so keeping them contiguous pays.
struct Table {
    value: Vec<f64>,
    gain: Vec<f64>,
    loss: Vec<f64>,
}

impl Table {
    fn zeroed(cells: usize) -> Self {
        Table {
            value: vec![0.0; cells],
            gain: vec![0.0; cells],
            loss: vec![0.0; cells],
        }
    }

    #[inline]
    fn get(&self, i: usize) -> Compromise {
        Compromise {
            value: self.value[i],
            gain: self.gain[i],
            loss: self.loss[i],
        }
    }

    #[inline]
    fn set(&mut self, i: usize, c: Compromise) {
        self.value[i] = c.value;
        self.gain[i] = c.gain;
        self.loss[i] = c.loss;
    }
}

impl SpatiotemporalQualities {
    /// Θ(|V|·U·T²); subtrees are computed in parallel.
    pub fn compute(model: &MicroscopicModel, hierarchy: &ProducerHierarchy) -> Self {
        let n = model.slices();
        let job = QualityJob {
            model,
            hierarchy,
            ln: ln_table(n * hierarchy.leaf_count(hierarchy.root())),
        };
        let (_, done) = job.node(hierarchy.root());
        let mut gain = vec![Vec::new(); hierarchy.len()];
        let mut loss = vec![Vec::new(); hierarchy.len()];
        for (node, g, l) in done {
            gain[node] = g;
            loss[node] = l;
        }
        Self {
            slices: n,
            hierarchy: hierarchy.clone(),
            gain,
            loss,
        }
    }

    pub fn slices(&self) -> usize {
        self.slices
    }

    pub fn hierarchy(&self) -> &ProducerHierarchy {
        &self.hierarchy
    }

    /// Gain and loss of aggregating `node` over slices `start..=end`.
    pub fn quality(&self, node: usize, start: usize, end: usize) -> Quality {
        assert!(
            start <= end && end < self.slices,
            "interval [{start}, {end}] outside 0..{}",
            self.slices
        );
        Quality {
            gain: self.gain[node][at(end, start)],
            loss: self.loss[node][at(end, start)],
        }
    }

    /// Best cuts of one node for `p`, after its children's (post-order, children in parallel).
    /// Returns the node's best compromises and the cut tables of its whole subtree.
    fn solve(&self, node: usize, p: f64) -> (Table, SubtreeCuts) {
        let n = self.slices;
        let cells = n * (n + 1) / 2;
        let (gain, loss) = (&self.gain[node], &self.loss[node]);
        let mut pic = Table::zeroed(cells);
        for i in 0..cells {
            pic.set(
                i,
                Compromise {
                    value: p * gain[i] - ((1.0 - p) * loss[i]),
                    gain: gain[i],
                    loss: loss[i],
                },
            );
        }
        let children = self.hierarchy.children(node);
        let mut cuts_below = Vec::new();
        // The candidate for a segment: the node's own pIC, or, for an internal node, the
        // better of that and the children's best partitions of the segment.
        let candidate = if children.is_empty() {
            None
        } else {
            let solved: Vec<(Table, SubtreeCuts)> =
                children.par_iter().map(|&c| self.solve(c, p)).collect();
            let mut best_of = Table::zeroed(cells);
            for i in 0..cells {
                let mut split = Compromise::ZERO;
                for (kid, _) in &solved {
                    split = split.add(kid.get(i));
                }
                best_of.set(i, Compromise::greatest(pic.get(i), split));
            }
            for (_, cuts) in solved {
                cuts_below.extend(cuts);
            }
            Some(best_of)
        };
        let cand = candidate.as_ref().unwrap_or(&pic);
        let leaf = candidate.is_none();
        let mut best = Table::zeroed(cells);
        let mut cut = vec![0u32; cells];
        let mut row = Table::zeroed(n);
        for k in (0..n).rev() {
            for j in 0..n - k {
                let e = k + j;
                let base = at(e, 0);
                let mut cur = cand.get(base + k);
                let mut cc = k;
                let mut agg = leaf || pic.get(base + k) == cur;
                // Strict improvement only, so the winner is the first candidate that is
                // greatest in (value, gain, −loss) order: it has the largest value. One
                // vectorisable pass finds that value; only if it can beat the current best is
                // a second pass made, looking at the candidates that reach it, in the
                // original's order and arithmetic.
                let values = &cand.value[base + k + 1..=base + k + j];
                let prefixes = &row.value[..j];
                let top = sum_max(values, prefixes);
                if top >= cur.value {
                    for c in positions_of(values, prefixes, top) {
                        let prefix = row.get(c);
                        let next = cand.get(base + k + 1 + c).add(prefix);
                        if next.beats(cur) {
                            cur = next;
                            cc = k + 1 + c;
                            agg = leaf || pic.get(base + k + 1 + c).add(prefix) == next;
                        }
                    }
                }
                row.set(j, cur);
                best.set(base + k, cur);
                cut[base + k] = cc as u32 | if agg { AGGREGATED } else { 0 };
            }
        }
        cuts_below.push((node, cut));
        (best, cuts_below)
    }

    /// The partition maximising `p·gain − (1−p)·loss` over the hierarchy, with the
    /// original's tie rules and part numbering.
    pub fn best_partition(&self, p: f64) -> SpatiotemporalPartition {
        let h = &self.hierarchy;
        let (_, solved) = self.solve(h.root(), p);
        let mut cuts = vec![Vec::new(); h.len()];
        for (node, cut) in solved {
            cuts[node] = cut;
        }
        let mut walk = Walk {
            q: self,
            cuts: &cuts,
            node_parts: vec![vec![-1; self.slices]; h.len()],
            aggregates: Vec::new(),
            counter: 0,
            quality: Quality::ZERO,
        };
        walk.fill(h.root(), 0, self.slices - 1);
        walk.accumulate(h.root(), 0, self.slices - 1);
        let Walk {
            node_parts,
            mut aggregates,
            quality,
            ..
        } = walk;
        aggregates.sort_by_key(|a| (a.start, a.node));
        let mut canonical: Vec<Area> = aggregates
            .iter()
            .map(|a| Area {
                node: h.canonical(a.node),
                ..*a
            })
            .collect();
        canonical.sort_by_key(|a| (a.start, a.node));
        SpatiotemporalPartition {
            node_parts,
            aggregates,
            canonical,
            quality,
        }
    }
}

/// Reads a solved cut table back into parts, in lpaggreg's traversal orders.
struct Walk<'a> {
    q: &'a SpatiotemporalQualities,
    cuts: &'a [Vec<u32>],
    node_parts: Vec<Vec<i32>>,
    aggregates: Vec<Area>,
    counter: i32,
    quality: Quality,
}

impl Walk<'_> {
    fn cut(&self, node: usize, start: usize, end: usize) -> (usize, bool) {
        let code = self.cuts[node][at(end, start)];
        ((code & !AGGREGATED) as usize, code & AGGREGATED != 0)
    }

    /// Ids go from the end of time backwards, depth first, as `fillPartition` numbers them.
    fn fill(&mut self, node: usize, start: usize, mut end: usize) {
        loop {
            let (c, agg) = self.cut(node, start, end);
            if agg {
                self.mark(node, c, end, self.counter);
                self.aggregates.push(Area {
                    node,
                    start: c,
                    end,
                });
                self.counter += 1;
            } else {
                self.node_parts[node][c..=end].fill(-1);
                for &kid in self.q.hierarchy.children(node) {
                    self.fill(kid, c, end);
                }
            }
            if c == start {
                break;
            }
            end = c - 1;
        }
    }

    fn mark(&mut self, node: usize, start: usize, end: usize, id: i32) {
        self.node_parts[node][start..=end].fill(id);
        for &kid in self.q.hierarchy.children(node) {
            self.mark(kid, start, end, id);
        }
    }

    /// `fillQuality`'s order: aggregated segments add after the earlier segments, delegated
    /// ones visit the children first. The order decides the last bits of the reported sums.
    fn accumulate(&mut self, node: usize, start: usize, end: usize) {
        let (c, agg) = self.cut(node, start, end);
        if agg {
            if c > start {
                self.accumulate(node, start, c - 1);
            }
            let q = self.q.quality(node, c, end);
            self.quality.gain += q.gain;
            self.quality.loss += q.loss;
        } else {
            for &kid in self.q.hierarchy.children(node) {
                self.accumulate(kid, c, end);
            }
            if c > start {
                self.accumulate(node, start, c - 1);
            }
        }
    }
}

/// An area of the spatiotemporal partition: all leaves under `node` × slices `start..=end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Area {
    pub node: usize,
    pub start: usize,
    pub end: usize,
}

/// A partition of leaves × slices into hierarchy-aligned areas.
#[derive(Debug, Clone, PartialEq)]
pub struct SpatiotemporalPartition {
    node_parts: Vec<Vec<i32>>,
    aggregates: Vec<Area>,
    canonical: Vec<Area>,
    quality: Quality,
}

impl SpatiotemporalPartition {
    /// Per node, per slice: the id of the area covering it, or -1 where the node is split
    /// into its children. Ids are lpaggreg's (0 = the last area in time of the root's walk).
    pub fn node_parts(&self) -> &[Vec<i32>] {
        &self.node_parts
    }

    /// The areas, sorted by (start, node); they tile leaves × slices.
    pub fn aggregates(&self) -> &[Area] {
        &self.aggregates
    }

    /// The areas with every node replaced by its highest single-child ancestor, so that
    /// representations of the same cells compare equal. Sorted by (start, node).
    pub fn canonical_aggregates(&self) -> &[Area] {
        &self.canonical
    }

    pub fn quality(&self) -> Quality {
        self.quality
    }

    /// A partition given only by its part ids, for exercising the views on hand-made cases.
    #[cfg(test)]
    pub(crate) fn from_parts_for_tests(node_parts: Vec<Vec<i32>>) -> Self {
        Self {
            node_parts,
            aggregates: Vec::new(),
            canonical: Vec::new(),
            quality: Quality::ZERO,
        }
    }
}

/// The spatiotemporal aggregation of one model over its producer hierarchy.
#[derive(Debug, Clone)]
pub struct SpatiotemporalAggregation {
    qualities: SpatiotemporalQualities,
}

impl SpatiotemporalAggregation {
    /// Computes the qualities. There is no normalisation: Ocelotl's spatiotemporal path
    /// always disables it.
    pub fn new(model: &MicroscopicModel, hierarchy: &ProducerHierarchy) -> Self {
        Self {
            qualities: SpatiotemporalQualities::compute(model, hierarchy),
        }
    }

    pub fn qualities(&self) -> &SpatiotemporalQualities {
        &self.qualities
    }

    /// Best partition for a user-chosen p (a double here, unlike the temporal case).
    pub fn best_partition(&self, p: f64) -> SpatiotemporalPartition {
        self.qualities.best_partition(p)
    }

    /// The significant p values and their partitions (DLP dichotomy, float p).
    pub fn significant_ps(&self, threshold: f32) -> PList<SpatiotemporalPartition> {
        bisect(threshold, Bisection::Spatiotemporal, &|p| {
            let part = self.qualities.best_partition(f64::from(p));
            (part.quality(), part)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two leaves under a root, one type.
    fn pair(values: &[f64]) -> (MicroscopicModel, ProducerHierarchy) {
        let t = values.len() / 2;
        let h = ProducerHierarchy::new(
            vec![vec![1, 2], vec![], vec![]],
            vec![None, Some(0), Some(1)],
            2,
        )
        .unwrap();
        let m = MicroscopicModel::new(t, 2, 1, values.to_vec()).unwrap();
        (m, h)
    }

    #[test]
    fn root_quality_counts_every_leaf_slice_cell() {
        // Leaves 1,1 and 1,3 over two slices: the root aggregates the four cells 1,1,1,3.
        let (m, h) = pair(&[1.0, 1.0, 1.0, 3.0]);
        let q = SpatiotemporalQualities::compute(&m, &h);
        let root = q.quality(0, 0, 1);
        let expected_gain = 6.0 * 6f64.log2() - 3.0 * 3f64.log2();
        assert!((root.gain - expected_gain).abs() < 1e-12);
        // loss = Σ v log2(v·|A|/S) with |A| = 4, S = 6.
        let expected_loss = 3.0 * (4.0f64 / 6.0).log2() + 3.0 * (12.0f64 / 6.0).log2();
        assert!((root.loss - expected_loss).abs() < 1e-12);
        // A root singleton slice is a 2-cell aggregate, a leaf singleton is trivial.
        assert_eq!(
            q.quality(0, 0, 0),
            Quality {
                gain: 2.0,
                loss: 0.0
            }
        );
        assert_eq!(q.quality(1, 1, 1), Quality::ZERO);
    }

    #[test]
    fn zero_loss_ties_aggregate_as_high_as_possible() {
        // All ones: every area has loss exactly 0, so at p = 0 the root's single area wins
        // (value tie, larger gain) — the opposite of the temporal tie rule.
        let (m, h) = pair(&[1.0; 8]);
        let part = SpatiotemporalAggregation::new(&m, &h).best_partition(0.0);
        assert_eq!(
            part.aggregates(),
            &[Area {
                node: 0,
                start: 0,
                end: 3
            }]
        );
        assert_eq!(part.node_parts()[2], vec![0; 4]);
    }

    #[test]
    fn heterogeneous_leaves_split_at_low_p_and_merge_at_p_one() {
        let (m, h) = pair(&[1.0, 8.0, 1.0, 8.0, 1.0, 8.0]);
        let agg = SpatiotemporalAggregation::new(&m, &h);
        let fine = agg.best_partition(0.1);
        let areas: Vec<(usize, usize, usize)> = fine
            .aggregates()
            .iter()
            .map(|a| (a.node, a.start, a.end))
            .collect();
        assert_eq!(areas, vec![(1, 0, 2), (2, 0, 2)]);
        assert_eq!(fine.node_parts()[0], vec![-1; 3]);
        // Ids are numbered from the end of the root's walk: leaf 1 first, then leaf 2.
        assert_eq!(fine.node_parts()[1], vec![0; 3]);
        assert_eq!(fine.node_parts()[2], vec![1; 3]);
        assert_eq!(
            agg.best_partition(1.0).aggregates(),
            &[Area {
                node: 0,
                start: 0,
                end: 2
            }]
        );
    }

    /// The DP transcribed literally from the original's description (no blocks, no
    /// vectorised pre-pass, square tables), to check the fast one against.
    fn literal_cuts(q: &SpatiotemporalQualities, p: f64) -> Vec<Vec<u32>> {
        let (n, h) = (q.slices, &q.hierarchy);
        let mut best: Vec<Vec<Vec<Compromise>>> = vec![Vec::new(); h.len()];
        let mut cuts = vec![Vec::new(); h.len()];
        for &node in h.post_order() {
            let pic = |i: usize, j: usize| {
                let (g, l) = (q.gain[node][at(i + j, i)], q.loss[node][at(i + j, i)]);
                Compromise {
                    value: p * g - ((1.0 - p) * l),
                    gain: g,
                    loss: l,
                }
            };
            let kids = h.children(node);
            let cs = |i: usize, j: usize| {
                kids.iter()
                    .fold(Compromise::ZERO, |a, &c| a.add(best[c][i][j]))
            };
            let mut b = vec![vec![Compromise::ZERO; n]; n];
            let mut cut = vec![0u32; n * (n + 1) / 2];
            for k in (0..n).rev() {
                for j in 0..n - k {
                    let (mut cur, mut cc, mut agg) = if kids.is_empty() {
                        (pic(k, j), k, true)
                    } else {
                        let g = Compromise::greatest(pic(k, j), cs(k, j));
                        (g, k, pic(k, j) == g)
                    };
                    for c in 1..=j {
                        if kids.is_empty() {
                            let cand = b[k][c - 1].add(pic(k + c, j - c));
                            if cand.beats(cur) {
                                (cur, cc) = (cand, k + c);
                            }
                        } else {
                            let cand = Compromise::greatest(pic(k + c, j - c), cs(k + c, j - c))
                                .add(b[k][c - 1]);
                            if cand.beats(cur) {
                                (cur, cc) = (cand, k + c);
                                agg = pic(k + c, j - c).add(b[k][c - 1]) == cand;
                            }
                        }
                    }
                    b[k][j] = cur;
                    cut[at(k + j, k)] = cc as u32 | if agg { AGGREGATED } else { 0 };
                }
            }
            best[node] = b;
            cuts[node] = cut;
        }
        cuts
    }

    fn tree_model() -> impl Strategy<Value = (MicroscopicModel, ProducerHierarchy)> {
        (
            prop::collection::vec(1usize..=3, 1..=3),
            1usize..=14,
            1usize..=3,
        )
            .prop_flat_map(|(fan_out, t, u)| {
                let h = ProducerHierarchy::balanced(&fan_out);
                let s = h.leaf_count(h.root());
                let value = prop_oneof![Just(0.0), Just(1.0), Just(3.0), 0.0..5.0f64];
                prop::collection::vec(value, t * s * u)
                    .prop_map(move |v| (MicroscopicModel::new(t, s, u, v).unwrap(), h.clone()))
            })
    }

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn fast_dp_is_the_literal_dp((m, h) in tree_model(), p in prop_oneof![Just(0.0), Just(1.0), Just(0.0009765625), 0.0..=1.0f64]) {
            let q = SpatiotemporalQualities::compute(&m, &h);
            let (_, fast) = q.solve(h.root(), p);
            let literal = literal_cuts(&q, p);
            for (node, cut) in fast {
                prop_assert_eq!(&cut, &literal[node], "node {}", node);
            }
        }
    }
}
