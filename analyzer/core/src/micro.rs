//! The microscopic model of a trace interval (Ocelotl RR-8524 eq. 1; "Ocelotl: Large Trace
//! Overviews" §3.3): one value per (time slice, producer, event type) for one metric — event
//! count, state duration or time-weighted variable mean.
//!
//! Counts and durations come from the store's multi-resolution summary: the interval is read at
//! the coarsest power-of-two bucket width no longer than a slice, whole buckets go to their
//! slice, and a bucket cut by a slice edge is split exactly by asking the store for the shorter
//! side (the rest is the bucket minus that side). The cost grows with slices × producers ×
//! types plus one partial finest summary bucket of events per slice edge, not with the trace:
//! counts read only the events starting in that partial bucket, durations also the states that
//! began before it (all edges in one pass of the store, stream by stream:
//! [`TraceReader::counts_in_ranges`], [`TraceReader::cells_in_ranges`]).
//! A finished trace is read by two threads, each over half of the slices, under one read
//! snapshot each; values accumulate in dense per-slice rows. Variable means need the values,
//! so they read the variable events of the interval.
//!
//! Start here: [`SliceGrid`], [`Metric`], [`build`] (and [`build_direct`], the same model
//! computed event by event), [`TraceMicroscopicModel::to_model`] for the Ocelotl engine.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::str::FromStr;

use serde::Serialize;
use socscope_tracedb::{
    EventCategory, EventKind, EventType, Filter, Producer, ProducerId, Resolution, Result,
    StoreError, SummaryCell, TimeRange, Timestamp, TraceReader, TypeId,
};

use crate::hierarchy::ProducerTree;
use crate::ocelotl::{MicroscopicModel, ModelError, SpatialHierarchy};

/// What a cell of the model measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    /// Events starting in the slice (every category).
    #[default]
    Count,
    /// Nanoseconds of states inside the slice (state types).
    Duration,
    /// Time-weighted mean of a variable over the part of the slice where its value is known
    /// (variable types): a value holds until the next change of the same producer and type.
    Mean,
}

impl Metric {
    /// The event category the metric applies to (`None`: every category).
    pub fn category(self) -> Option<EventCategory> {
        match self {
            Metric::Count => None,
            Metric::Duration => Some(EventCategory::State),
            Metric::Mean => Some(EventCategory::Variable),
        }
    }
}

impl FromStr for Metric {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "count" => Ok(Metric::Count),
            "duration" => Ok(Metric::Duration),
            "mean" => Ok(Metric::Mean),
            _ => Err(format!(
                "unknown metric {s:?}: expected count, duration or mean"
            )),
        }
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Metric::Count => "count",
            Metric::Duration => "duration",
            Metric::Mean => "mean",
        })
    }
}

/// An interval cut into `slices` slices of (almost) equal length: slice `i` is
/// `[edge(i), edge(i + 1))` with `edge(i) = start + ⌊len · i / slices⌋`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SliceGrid {
    /// The whole interval.
    pub range: TimeRange,
    /// Number of slices.
    pub slices: usize,
}

impl SliceGrid {
    /// A grid; `None` if the interval is empty or unbounded or `slices` is 0.
    pub fn new(range: TimeRange, slices: usize) -> Option<Self> {
        if range.is_empty() || slices == 0 || range.start == i64::MIN || range.end == i64::MAX {
            return None;
        }
        Some(Self { range, slices })
    }

    /// Start of slice `i` (`edge(slices)` is the end of the interval).
    pub fn edge(&self, i: usize) -> Timestamp {
        let len = i128::from(self.range.len());
        self.range.start + (len * i as i128 / self.slices as i128) as i64
    }

    /// Slice `i`.
    pub fn slice(&self, i: usize) -> TimeRange {
        TimeRange::new(self.edge(i), self.edge(i + 1))
    }

    /// The slice holding `t`, if `t` is in the interval.
    pub fn slice_of(&self, t: Timestamp) -> Option<usize> {
        if !self.range.contains(t) {
            return None;
        }
        let len = i128::from(self.range.len());
        let mut i = (i128::from(t - self.range.start) * self.slices as i128 / len) as usize;
        i = i.min(self.slices - 1);
        while i + 1 < self.slices && self.edge(i + 1) <= t {
            i += 1;
        }
        while i > 0 && self.edge(i) > t {
            i -= 1;
        }
        Some(i)
    }

    /// Mean slice length in nanoseconds.
    pub fn slice_ns(&self) -> f64 {
        self.range.len() as f64 / self.slices as f64
    }

    /// Calls `f(slice, overlap_ns)` for every slice `[a, b)` overlaps.
    pub fn spread(&self, a: Timestamp, b: Timestamp, mut f: impl FnMut(usize, i64)) {
        let (lo, hi) = (a.max(self.range.start), b.min(self.range.end));
        if hi <= lo {
            return;
        }
        let Some(mut i) = self.slice_of(lo) else {
            return;
        };
        while i < self.slices {
            let s = self.slice(i);
            let o = s.overlap(lo, hi);
            if o > 0 {
                f(i, o);
            }
            if s.end >= hi {
                break;
            }
            i += 1;
        }
    }
}

/// What a node of a model's spatial hierarchy stands for (see [`TraceMicroscopicModel::hierarchy`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpatialNode {
    /// Display name (`all` for the root; `NAME (self)` for the leaf holding the events of a
    /// producer that also has children).
    pub name: String,
    /// The trace producer behind the node, if any (the root has none).
    pub producer: Option<ProducerId>,
}

/// The microscopic model of a trace interval, with the trace's names for its rows and columns; its numbers
/// go to the Ocelotl engine as a [`MicroscopicModel`] ([`TraceMicroscopicModel::to_model`]).
#[derive(Debug, Clone, PartialEq)]
pub struct TraceMicroscopicModel {
    /// The slices.
    pub grid: SliceGrid,
    /// What the values measure.
    pub metric: Metric,
    /// The producers of the model, in the leaf order of [`TraceMicroscopicModel::hierarchy`]: those with a
    /// non-zero value somewhere.
    pub producers: Vec<Producer>,
    /// The types of the model, by id: those with a non-zero value somewhere.
    pub types: Vec<EventType>,
    /// Every producer of the trace (for the ancestors in the hierarchy).
    all_producers: Vec<Producer>,
    /// `values[(t · P + p) · U + u]`.
    values: Vec<f64>,
}

impl TraceMicroscopicModel {
    /// A model built outside a trace file (the fleet overview builds one per dataset with SQL, its
    /// producers a hierarchy of hardware, firmware, boards and CPUs): `producers` are the leaves with
    /// values, in order; `all_producers` holds them and their ancestors (linked by `parent`); `values`
    /// is slice-major, then producer, then type.
    pub fn from_parts(
        grid: SliceGrid,
        metric: Metric,
        producers: Vec<Producer>,
        types: Vec<EventType>,
        all_producers: Vec<Producer>,
        values: Vec<f64>,
    ) -> std::result::Result<Self, String> {
        let cells = grid.slices * producers.len() * types.len();
        if values.len() != cells {
            return Err(format!(
                "{} values for {} slices × {} producers × {} types",
                values.len(),
                grid.slices,
                producers.len(),
                types.len()
            ));
        }
        Ok(Self {
            grid,
            metric,
            producers,
            types,
            all_producers,
            values,
        })
    }

    /// The value of slice `t`, producer `p`, type `u` (model indices).
    pub fn value(&self, t: usize, p: usize, u: usize) -> f64 {
        self.values[(t * self.producers.len() + p) * self.types.len() + u]
    }

    /// All values, slice-major, then producer, then type.
    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// Whether the model has no cell (no producer or no type had a value).
    pub fn is_empty(&self) -> bool {
        self.producers.is_empty() || self.types.is_empty()
    }

    /// The value of a (producer id, type id) pair in slice `t`, 0 when absent.
    pub fn get(&self, t: usize, producer: ProducerId, ty: TypeId) -> f64 {
        let p = self.producers.iter().position(|x| x.id == producer);
        let u = self.types.iter().position(|x| x.id == ty);
        match (p, u) {
            (Some(p), Some(u)) => self.value(t, p, u),
            _ => 0.0,
        }
    }

    /// The producer tree: a root `all`, then the trace's parent/child relations among the
    /// model's producers and their ancestors. Returns the Ocelotl hierarchy and one
    /// [`SpatialNode`] per node.
    pub fn hierarchy(&self) -> (SpatialHierarchy, Vec<SpatialNode>) {
        let (children, leaf, nodes) = tree(&self.producers, &self.all_producers);
        let h = SpatialHierarchy::new(children, leaf, self.producers.len())
            .expect("the tree of a model's producers has one leaf per producer");
        (h, nodes)
    }

    /// The Ocelotl microscopic model, with type names, the producer hierarchy and a slice
    /// duration that turns values into rates: nanoseconds for durations (so the views show
    /// the fraction of time), seconds for counts (events per second), 1 for means.
    pub fn to_model(&self) -> std::result::Result<MicroscopicModel, ModelError> {
        let d = match self.metric {
            Metric::Duration => self.grid.slice_ns(),
            Metric::Count => self.grid.slice_ns() * 1e-9,
            Metric::Mean => 1.0,
        };
        let model = MicroscopicModel::new(
            self.grid.slices,
            self.producers.len(),
            self.types.len(),
            self.values.clone(),
        )?
        .with_type_names(self.types.iter().map(|t| t.name.clone()).collect())?
        .with_rate_divisor(d);
        model.with_hierarchy(self.hierarchy().0)
    }
}

/// The leaf order and tree of `model` producers (see [`TraceMicroscopicModel::hierarchy`]): the
/// [`ProducerTree`] of the model's producers and their ancestors, siblings by id, under a root
/// `all`; a producer with events and children gets a leaf `NAME (self)` before its children.
fn tree(
    model: &[Producer],
    all: &[Producer],
) -> (Vec<Vec<usize>>, Vec<Option<usize>>, Vec<SpatialNode>) {
    let by_id: HashMap<ProducerId, &Producer> = all.iter().map(|p| (p.id, p)).collect();
    let in_model: HashMap<ProducerId, usize> =
        model.iter().enumerate().map(|(i, p)| (p.id, i)).collect();
    // The included producers: the model's and their ancestors. An ancestor the trace does
    // not describe still groups its children, as a root named after its id.
    let mut included: Vec<Producer> = Vec::new();
    let mut seen: HashSet<ProducerId> = HashSet::new();
    for p in model {
        let mut cur = Some(p.id);
        while let Some(id) = cur {
            if !seen.insert(id) {
                break;
            }
            let known = by_id.get(&id);
            included.push(known.map_or_else(
                || Producer {
                    id,
                    parent: None,
                    kind: socscope_tracedb::ProducerKind::Other,
                    local_id: 0,
                    name: format!("producer {id}"),
                },
                |p| (*p).clone(),
            ));
            cur = known.and_then(|p| p.parent);
        }
    }
    let producers = ProducerTree::with_sibling_order(&included, |p| p.id);
    let mut children: Vec<Vec<usize>> = vec![Vec::new()];
    let mut leaf: Vec<Option<usize>> = vec![None];
    let mut nodes = vec![SpatialNode {
        name: "all".into(),
        producer: None,
    }];
    let name = |id: ProducerId| {
        by_id
            .get(&id)
            .map_or_else(|| format!("producer {id}"), |p| p.name.clone())
    };
    // Depth first, children in the tree's order: (producer, its parent's node).
    let mut stack: Vec<(ProducerId, usize)> = producers
        .nodes()
        .iter()
        .filter(|n| n.parent.is_none())
        .rev()
        .map(|n| (n.id, 0))
        .collect();
    while let Some((id, parent)) = stack.pop() {
        let node = children.len();
        children.push(Vec::new());
        leaf.push(None);
        nodes.push(SpatialNode {
            name: name(id),
            producer: Some(id),
        });
        children[parent].push(node);
        let sub = producers
            .node(id)
            .map_or(&[][..], |n| n.children.as_slice());
        if sub.is_empty() {
            leaf[node] = in_model.get(&id).copied();
            continue;
        }
        if let Some(&m) = in_model.get(&id) {
            let own = children.len();
            children[node].push(own);
            children.push(Vec::new());
            leaf.push(Some(m));
            nodes.push(SpatialNode {
                name: format!("{} (self)", name(id)),
                producer: Some(id),
            });
        }
        stack.extend(sub.iter().rev().map(|&k| (k, node)));
    }
    (children, leaf, nodes)
}

/// Maps of the integer keys of the per-slice tables (SipHash dominated the model's assembly).
type FastMap<K, V> = rustc_hash::FxHashMap<K, V>;

/// `(producer, type) → V`.
type PairMap<V> = FastMap<(ProducerId, TypeId), V>;

/// One value per slice and `(producer, type)` pair, the pairs numbered as first seen: a dense
/// row per slice, so adding a summary cell costs one lookup of its pair.
#[derive(Debug, Clone)]
struct Table<V> {
    cols: PairMap<usize>,
    keys: Vec<(ProducerId, TypeId)>,
    rows: Vec<Vec<V>>,
    /// Columns of the cells last added with [`add_cells`], by position.
    hint: Vec<usize>,
}

impl<V: Copy + Default> Table<V> {
    fn new(slices: usize) -> Self {
        Self {
            cols: PairMap::default(),
            keys: Vec::new(),
            rows: vec![Vec::new(); slices],
            hint: Vec::new(),
        }
    }

    /// The column of a pair, created on first sight.
    #[inline]
    fn col(&mut self, key: (ProducerId, TypeId)) -> usize {
        let keys = &mut self.keys;
        *self.cols.entry(key).or_insert_with(|| {
            keys.push(key);
            keys.len() - 1
        })
    }

    /// The value of a pair in a slice.
    #[inline]
    fn at(&mut self, slice: usize, key: (ProducerId, TypeId)) -> &mut V {
        let c = self.col(key);
        self.at_col(slice, c)
    }

    /// The value of a column in a slice.
    #[inline]
    fn at_col(&mut self, slice: usize, c: usize) -> &mut V {
        let n = self.keys.len();
        let row = &mut self.rows[slice];
        if row.len() <= c {
            row.resize(n, V::default());
        }
        &mut row[c]
    }

    /// The same table with every value mapped.
    fn map<W>(self, f: impl Fn(V) -> W) -> Table<W> {
        Table {
            cols: self.cols,
            keys: self.keys,
            hint: self.hint,
            rows: self
                .rows
                .into_iter()
                .map(|r| r.into_iter().map(&f).collect())
                .collect(),
        }
    }

    /// Appends the slices of `other` after this table's (its pairs renumbered).
    fn append(&mut self, other: Table<V>) {
        let renumber: Vec<usize> = other.keys.iter().map(|&k| self.col(k)).collect();
        for row in other.rows {
            let mut r = vec![V::default(); self.keys.len()];
            for (c, v) in row.into_iter().enumerate() {
                r[renumber[c]] = v;
            }
            self.rows.push(r);
        }
    }
}

/// Per slice and pair, `(count, state_ns)` (wrapping: a cut bucket's rest is its cells minus
/// the pieces asked exactly, subtracted after they were added).
type SliceCells = Table<(u64, i64)>;

fn add_cells(into: &mut SliceCells, slice: usize, cells: &[SummaryCell], sign: i64) {
    // Summary cells come sorted and most buckets hold the same pairs: the column of the
    // previous call's k-th cell is usually this one's, checked without hashing.
    for (k, c) in cells.iter().enumerate() {
        let key = (c.producer, c.type_id);
        let col = match into.hint.get(k) {
            Some(&h) if into.keys[h] == key => h,
            _ => {
                let h = into.col(key);
                if k < into.hint.len() {
                    into.hint[k] = h;
                } else {
                    into.hint.push(h);
                }
                h
            }
        };
        let e = into.at_col(slice, col);
        if sign > 0 {
            e.0 = e.0.wrapping_add(c.count);
            e.1 = e.1.wrapping_add(c.state_ns);
        } else {
            e.0 = e.0.wrapping_sub(c.count);
            e.1 = e.1.wrapping_sub(c.state_ns);
        }
    }
}

/// The exact cells of an arbitrary interval, from the summary (aligned part) and the chunks.
fn exact_cells(reader: &TraceReader, r: TimeRange, filter: &Filter) -> Result<Vec<SummaryCell>> {
    if r.is_empty() {
        return Ok(Vec::new());
    }
    let s = reader.summary(r, Resolution::MaxBuckets(1), filter)?;
    Ok(s.buckets.into_iter().flat_map(|b| b.cells).collect())
}

/// The filter `metric` reads: `filter` narrowed to the metric's category.
fn metric_filter(filter: &Filter, metric: Metric) -> Filter {
    let mut f = filter.clone();
    if let Some(c) = metric.category() {
        f.categories = Some(match &filter.categories {
            Some(cs) if cs.contains(&c) => vec![c],
            Some(_) => Vec::new(),
            None => vec![c],
        });
    }
    f
}

/// Below this many slices, [`summary_slices`] stays on the calling thread.
const PARALLEL_MIN_SLICES: usize = 64;

/// Count and state time per slice from the summary, slice edges completed exactly.
///
/// With `counts_only`, the state time of the pieces completed at the edges is left out (the
/// pieces then read only the events starting in them, not the states that began before).
///
/// A finished trace is read by two threads, each over half of the slices (the second through
/// its own connection): the summary rows and the edges of one half do not depend on the other.
fn summary_slices(
    reader: &TraceReader,
    grid: &SliceGrid,
    filter: &Filter,
    counts_only: bool,
) -> Result<SliceCells> {
    // One read snapshot for the whole model (the store's calls below nest in it).
    let _snapshot = reader.snapshot()?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Only a finished trace: a second connection of a trace being written could see more
    // committed events than the caller's snapshot.
    if threads < 2 || grid.slices < PARALLEL_MIN_SLICES || !reader.info()?.finished {
        return summary_part(reader, grid, 0..grid.slices, filter, counts_only);
    }
    let mid = grid.slices / 2;
    let sibling = reader.take_sibling()?;
    std::thread::scope(|scope| {
        let other = scope.spawn(move || -> (TraceReader, Result<SliceCells>) {
            let cells = sibling.snapshot().and_then(|_snapshot| {
                summary_part(&sibling, grid, mid..grid.slices, filter, counts_only)
            });
            (sibling, cells)
        });
        let mine = summary_part(reader, grid, 0..mid, filter, counts_only);
        let (sibling, theirs) = other
            .join()
            .map_err(|_| StoreError::InvalidRequest("a summary reader thread panicked".into()))?;
        reader.put_sibling(sibling);
        let mut out = mine?;
        out.append(theirs?);
        Ok(out)
    })
}

/// [`summary_slices`] for the slices `part` of the grid (row `k` of the result is slice
/// `part.start + k`).
fn summary_part(
    reader: &TraceReader,
    grid: &SliceGrid,
    part: std::ops::Range<usize>,
    filter: &Filter,
    counts_only: bool,
) -> Result<SliceCells> {
    let mut out = SliceCells::new(part.len());
    if part.is_empty() {
        return Ok(out);
    }
    let range = TimeRange::new(grid.edge(part.start), grid.edge(part.end));
    let min_slice = grid.range.len() / grid.slices as i64;
    // The coarsest power of two no longer than the shortest slice: a bucket holds at most one
    // slice edge.
    let w = 1i64 << (63 - (min_slice.max(1) as u64).leading_zeros());
    let (base, _) = reader.summary_levels();
    let base_w = 1i64 << base;
    let summary = reader.summary(range, Resolution::BucketWidth(w), filter)?;
    // Pieces of cut buckets asked exactly: (interval, its row, the row of the bucket's rest).
    let mut asks: Vec<(TimeRange, usize, usize)> = Vec::new();
    for b in summary.buckets {
        let r = b.range;
        let (Some(i0), Some(i1)) = (grid.slice_of(r.start), grid.slice_of(r.end - 1)) else {
            continue;
        };
        let (i0, i1) = (i0 - part.start, i1 - part.start);
        if i0 == i1 {
            add_cells(&mut out, i0, &b.cells, 1);
            continue;
        }
        // Pieces cut by the edges inside the bucket; all but one are asked exactly, the one
        // whose unaligned part is longest is the bucket minus the others.
        let mut cuts = vec![r.start];
        cuts.extend((i0 + 1..=i1).map(|i| grid.edge(part.start + i)));
        cuts.push(r.end);
        let cost = |a: i64, z: i64| -> i64 {
            // Nanoseconds the store reads from chunks for [a, z): the unaligned ends.
            let up = a
                .div_euclid(base_w)
                .saturating_add(i64::from(a.rem_euclid(base_w) != 0))
                * base_w;
            let down = z.div_euclid(base_w) * base_w;
            if up >= down {
                z - a
            } else {
                (up - a) + (z - down)
            }
        };
        let skip = (0..cuts.len() - 1)
            .max_by_key(|&k| cost(cuts[k], cuts[k + 1]))
            .unwrap_or(0);
        // The whole bucket goes to the skipped piece's row; the asked pieces move from there
        // to their own rows below.
        add_cells(&mut out, i0 + skip, &b.cells, 1);
        for k in (0..cuts.len() - 1).filter(|&k| k != skip) {
            asks.push((TimeRange::new(cuts[k], cuts[k + 1]), i0 + k, i0 + skip));
        }
    }
    let pieces: Vec<TimeRange> = asks.iter().map(|a| a.0).collect();
    let cells = if counts_only {
        // All edges in one pass over the summary rows and the chunks they cut.
        reader.counts_in_ranges(&pieces, filter)?
    } else {
        // State time too: all edges in one pass as well.
        reader.cells_in_ranges(&pieces, filter)?
    };
    for (&(_, to, from), c) in asks.iter().zip(&cells) {
        add_cells(&mut out, to, c, 1);
        add_cells(&mut out, from, c, -1);
    }
    Ok(out)
}

/// Count and state time per slice, event by event.
fn direct_slices(reader: &TraceReader, grid: &SliceGrid, filter: &Filter) -> Result<SliceCells> {
    let mut out = SliceCells::new(grid.slices);
    for e in reader.events_overlapping(grid.range, filter)? {
        let e = e?;
        if let Some(i) = grid.slice_of(e.ts) {
            out.at(i, (e.producer, e.type_id)).0 += 1;
        }
        if let EventKind::State { end, .. } = e.kind {
            grid.spread(e.ts, end, |i, ns| {
                out.at(i, (e.producer, e.type_id)).1 += ns;
            });
        }
    }
    Ok(out)
}

/// Per slice, `(producer, type) → (Σ value·ns, ns covered)`.
type MeanCells = Table<(f64, i64)>;

/// Time-weighted variable means: every value holds from its event to the next event of the
/// same producer and type (the last one to the end of the interval); the value current at
/// the start of the interval is looked up before it.
fn mean_slices(reader: &TraceReader, grid: &SliceGrid, filter: &Filter) -> Result<MeanCells> {
    let mut out = MeanCells::new(grid.slices);
    let mut current: PairMap<(f64, Timestamp)> = PairMap::default();
    // Values set before the interval: look back over doubling windows until every pair the
    // summary knows before the interval has a value, or the trace start is reached.
    let t_min = reader.info()?.t_min;
    if t_min < grid.range.start {
        let before = TimeRange::new(t_min, grid.range.start);
        let wanted: HashSet<(ProducerId, TypeId)> = if filter.summary_compatible() {
            exact_cells(reader, before, filter)?
                .into_iter()
                .filter(|c| c.count > 0)
                .map(|c| (c.producer, c.type_id))
                .collect()
        } else {
            HashSet::new()
        };
        let mut found: PairMap<f64> = PairMap::default();
        let mut width = grid.range.len().max(1);
        let mut hi = grid.range.start;
        loop {
            let lo = hi.saturating_sub(width).max(t_min);
            // Windows go back in time: a later window's value wins over an earlier one's.
            let mut last: PairMap<f64> = PairMap::default();
            for e in reader.events(TimeRange::new(lo, hi), filter)? {
                let e = e?;
                if let EventKind::Variable { value } = e.kind {
                    last.insert((e.producer, e.type_id), value);
                }
            }
            for (key, v) in last {
                found.entry(key).or_insert(v);
            }
            let complete = !wanted.is_empty() && wanted.iter().all(|k| found.contains_key(k));
            if lo <= t_min || complete {
                break;
            }
            hi = lo;
            width = width.saturating_mul(2);
        }
        for (key, v) in found {
            current.insert(key, (v, grid.range.start));
        }
    }
    let close = |out: &mut MeanCells, key: (ProducerId, TypeId), v: f64, a: i64, b: i64| {
        grid.spread(a, b, |i, ns| {
            let e = out.at(i, key);
            e.0 += v * ns as f64;
            e.1 += ns;
        });
    };
    for e in reader.events(grid.range, filter)? {
        let e = e?;
        if let EventKind::Variable { value } = e.kind {
            let key = (e.producer, e.type_id);
            if let Some((v, since)) = current.insert(key, (value, e.ts)) {
                close(&mut out, key, v, since, e.ts);
            }
        }
    }
    for (key, (v, since)) in current {
        close(&mut out, key, v, since, grid.range.end);
    }
    Ok(out)
}

/// Assembles the model from per-slice cells: keeps the pairs with a non-zero value, orders
/// producers as the leaves of their tree.
fn assemble(
    reader: &TraceReader,
    grid: SliceGrid,
    metric: Metric,
    per_slice: Table<f64>,
) -> Result<TraceMicroscopicModel> {
    let all_types = reader.event_types()?;
    let all_producers = reader.producers()?;
    // The pairs with a non-zero value somewhere.
    let mut present = vec![false; per_slice.keys.len()];
    for row in &per_slice.rows {
        for (c, &v) in row.iter().enumerate() {
            if v != 0.0 {
                present[c] = true;
            }
        }
    }
    let mut p_ids: HashSet<ProducerId> = HashSet::new();
    let mut t_ids: HashSet<TypeId> = HashSet::new();
    for (&(p, t), _) in per_slice.keys.iter().zip(&present).filter(|(_, on)| **on) {
        p_ids.insert(p);
        t_ids.insert(t);
    }
    let mut model_producers: Vec<Producer> = all_producers
        .iter()
        .filter(|p| p_ids.contains(&p.id))
        .cloned()
        .collect();
    // Unknown producer ids (events of producers not declared) still get a row.
    let known: HashSet<ProducerId> = model_producers.iter().map(|p| p.id).collect();
    let mut unknown: Vec<ProducerId> = p_ids.difference(&known).copied().collect();
    unknown.sort_unstable();
    model_producers.extend(unknown.into_iter().map(|id| Producer {
        id,
        parent: None,
        kind: socscope_tracedb::ProducerKind::Other,
        local_id: i64::from(id),
        name: format!("producer {id}"),
    }));
    // Leaf order of the tree.
    let (_, leaf, _) = tree(&model_producers, &all_producers);
    let ordered: Vec<Producer> = leaf
        .iter()
        .flatten()
        .map(|&i| model_producers[i].clone())
        .collect();
    let mut types: Vec<EventType> = all_types
        .into_iter()
        .filter(|t| t_ids.contains(&t.id))
        .collect();
    types.sort_by_key(|t| t.id);
    let known_t: HashSet<TypeId> = types.iter().map(|t| t.id).collect();
    let mut unknown_t: Vec<TypeId> = t_ids.difference(&known_t).copied().collect();
    unknown_t.sort_unstable();
    types.extend(unknown_t.into_iter().map(|id| EventType {
        id,
        name: format!("type {id}"),
        category: metric.category().unwrap_or(EventCategory::Punctual),
        params: Vec::new(),
    }));
    let p_index: FastMap<ProducerId, usize> =
        ordered.iter().enumerate().map(|(i, p)| (p.id, i)).collect();
    let u_index: FastMap<TypeId, usize> =
        types.iter().enumerate().map(|(i, t)| (t.id, i)).collect();
    let (np, nu) = (ordered.len(), types.len());
    // Each column's place in a slice's block of the model.
    let place: Vec<Option<usize>> = per_slice
        .keys
        .iter()
        .map(|(p, u)| match (p_index.get(p), u_index.get(u)) {
            (Some(&p), Some(&u)) => Some(p * nu + u),
            _ => None,
        })
        .collect();
    let mut values = vec![0.0; grid.slices * np * nu];
    for (t, row) in per_slice.rows.iter().enumerate() {
        let block = &mut values[t * np * nu..(t + 1) * np * nu];
        for (c, &v) in row.iter().enumerate() {
            if let Some(i) = place[c] {
                block[i] = v;
            }
        }
    }
    let all_with_unknown = {
        let mut a = all_producers;
        for p in &ordered {
            if !a.iter().any(|q| q.id == p.id) {
                a.push(p.clone());
            }
        }
        a
    };
    Ok(TraceMicroscopicModel {
        grid,
        metric,
        producers: ordered,
        types,
        all_producers: all_with_unknown,
        values,
    })
}

fn finish_counts(
    reader: &TraceReader,
    grid: SliceGrid,
    metric: Metric,
    cells: SliceCells,
) -> Result<TraceMicroscopicModel> {
    let values = cells.map(|(n, ns)| {
        if metric == Metric::Duration {
            ns as f64
        } else {
            n as f64
        }
    });
    assemble(reader, grid, metric, values)
}

fn finish_means(
    reader: &TraceReader,
    grid: SliceGrid,
    cells: MeanCells,
) -> Result<TraceMicroscopicModel> {
    let values = cells.map(|(sum, ns)| if ns > 0 { sum / ns as f64 } else { 0.0 });
    assemble(reader, grid, Metric::Mean, values)
}

/// The microscopic model of `grid` for `metric` and the events `filter` selects, counts and
/// durations from the summary (see the module documentation). Filters on CPUs or parameters
/// fall back to [`build_direct`].
pub fn build(
    reader: &TraceReader,
    grid: SliceGrid,
    metric: Metric,
    filter: &Filter,
) -> Result<TraceMicroscopicModel> {
    let f = metric_filter(filter, metric);
    match metric {
        Metric::Mean => {
            let cells = mean_slices(reader, &grid, &f)?;
            finish_means(reader, grid, cells)
        }
        _ if !f.summary_compatible() => build_direct(reader, grid, metric, filter),
        _ => {
            let cells = summary_slices(reader, &grid, &f, metric == Metric::Count)?;
            finish_counts(reader, grid, metric, cells)
        }
    }
}

/// The same model as [`build`], computed from every event of the interval (the reference the
/// summary path is tested against; also right for filters the summary cannot answer).
pub fn build_direct(
    reader: &TraceReader,
    grid: SliceGrid,
    metric: Metric,
    filter: &Filter,
) -> Result<TraceMicroscopicModel> {
    let f = metric_filter(filter, metric);
    match metric {
        Metric::Mean => {
            let cells = mean_slices(reader, &grid, &f)?;
            finish_means(reader, grid, cells)
        }
        _ => {
            let cells = direct_slices(reader, &grid, &f)?;
            finish_counts(reader, grid, metric, cells)
        }
    }
}

/// A microscopic model built a few slices at a time, so that a view shows the first slices while the
/// rest is read, a live trace's model grows by its new slices without reading the past again, and a
/// model for narrower filters is cut out of a wider one instead of read again.
///
/// The values are the same as [`build`]'s: each step reads its slices from the summary exactly as
/// [`build`] does (whole buckets, exact edges). Variable means, and filters the summary cannot answer,
/// are read in one step.
#[derive(Debug, Clone)]
pub struct PartialModel {
    grid: SliceGrid,
    metric: Metric,
    /// The metric's filter.
    filter: Filter,
    /// The rows of the slices done.
    cells: Table<f64>,
}

impl PartialModel {
    /// Nothing read yet of `grid`.
    pub fn new(grid: SliceGrid, metric: Metric, filter: &Filter) -> Self {
        Self {
            grid,
            metric,
            filter: metric_filter(filter, metric),
            cells: Table::new(0),
        }
    }

    /// The grid the model is built on.
    pub fn grid(&self) -> SliceGrid {
        self.grid
    }

    /// What the values measure.
    pub fn metric(&self) -> Metric {
        self.metric
    }

    /// Slices read so far (the first ones).
    pub fn done(&self) -> usize {
        self.cells.rows.len()
    }

    /// Whether every slice was read.
    pub fn is_complete(&self) -> bool {
        self.done() >= self.grid.slices
    }

    /// Reads up to `n` more slices (all of them for means and filters the summary cannot answer).
    pub fn step(&mut self, reader: &TraceReader, n: usize) -> Result<()> {
        let done = self.done();
        if done >= self.grid.slices {
            return Ok(());
        }
        let one_pass = self.metric == Metric::Mean || !self.filter.summary_compatible();
        if one_pass {
            self.cells = match self.metric {
                Metric::Mean => mean_slices(reader, &self.grid, &self.filter)?
                    .map(|(sum, ns)| if ns > 0 { sum / ns as f64 } else { 0.0 }),
                m => direct_slices(reader, &self.grid, &self.filter)?.map(|(c, ns)| {
                    if m == Metric::Duration {
                        ns as f64
                    } else {
                        c as f64
                    }
                }),
            };
            return Ok(());
        }
        let end = (done + n.max(1)).min(self.grid.slices);
        let _snapshot = reader.snapshot()?;
        let count = self.metric == Metric::Count;
        let part = summary_part(reader, &self.grid, done..end, &self.filter, count)?;
        let duration = self.metric == Metric::Duration;
        self.cells
            .append(part.map(|(c, ns)| if duration { ns as f64 } else { c as f64 }));
        Ok(())
    }

    /// The model of the slices read so far (the whole grid once complete; before that, the first
    /// slices as a grid of their own, whose edges may differ from the whole grid's by a nanosecond).
    pub fn model(&self, reader: &TraceReader) -> Result<TraceMicroscopicModel> {
        let done = self.done();
        let grid = if done >= self.grid.slices {
            self.grid
        } else {
            SliceGrid::new(
                TimeRange::new(self.grid.range.start, self.grid.edge(done)),
                done,
            )
            .ok_or_else(|| StoreError::InvalidRequest("no slice read yet".into()))?
        };
        let mut cells = self.cells.clone();
        cells.rows.truncate(grid.slices);
        assemble(reader, grid, self.metric, cells)
    }

    /// This model continued on `grid`, a longer grid whose slices read so far are the same (same
    /// start and the same edges up to them: a live trace's grid of fixed-width slices grown by new
    /// slices), or `None` if they are not; the slices read stay read.
    pub fn extended(&self, grid: SliceGrid) -> Option<Self> {
        let done = self.done();
        let same = grid.slices >= done
            && grid.range.start == self.grid.range.start
            && (0..=done).all(|i| grid.edge(i) == self.grid.edge(i))
            // Means carry values across slices: only a complete model of the same grid is kept.
            && (self.metric != Metric::Mean || grid == self.grid);
        same.then(|| Self {
            grid,
            ..self.clone()
        })
    }

    /// The same slices for fewer producers and types (those `keep` accepts), as a model built with a
    /// narrower `filter` would read them: exact, since every value is one (producer, type) pair's.
    /// Means are kept only whole ([`None`]): the value current before the interval depends on the
    /// filter's look-back.
    pub fn restricted(
        &self,
        filter: &Filter,
        keep: impl Fn(ProducerId, TypeId) -> bool,
    ) -> Option<Self> {
        if self.metric == Metric::Mean {
            return None;
        }
        let mut cells = Table::new(0);
        let cols: Vec<Option<usize>> = self
            .cells
            .keys
            .iter()
            .map(|&(p, t)| keep(p, t).then(|| cells.col((p, t))))
            .collect();
        for row in &self.cells.rows {
            let mut r = vec![0.0; cells.keys.len()];
            for (c, v) in row.iter().enumerate() {
                if let Some(Some(to)) = cols.get(c) {
                    r[*to] = *v;
                }
            }
            cells.rows.push(r);
        }
        Some(Self {
            grid: self.grid,
            metric: self.metric,
            filter: metric_filter(filter, self.metric),
            cells,
        })
    }
}

/// The whole trace as a range (`[t_min, t_max + 1)`), or an error for an empty trace.
pub fn trace_range(reader: &TraceReader) -> Result<TimeRange> {
    let info = reader.info()?;
    if info.event_count == 0 || info.t_max < info.t_min {
        return Err(StoreError::InvalidRequest("the trace has no events".into()));
    }
    Ok(info.range())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testutil::{self, Spec};
    use proptest::prelude::*;

    #[test]
    fn a_model_built_in_steps_equals_the_whole_build() {
        let (_dir, path) = testutil::write_spec(&Spec::small());
        let reader = TraceReader::open(&path).unwrap();
        for metric in [Metric::Count, Metric::Duration, Metric::Mean] {
            let grid = SliceGrid::new(TimeRange::new(0, 1000), 10).unwrap();
            let whole = build(&reader, grid, metric, &Filter::all()).unwrap();
            let mut p = PartialModel::new(grid, metric, &Filter::all());
            p.step(&reader, 3).unwrap();
            if metric != Metric::Mean {
                assert_eq!(p.done(), 3);
                let first = p.model(&reader).unwrap();
                assert_eq!(first.grid.slices, 3);
                let direct = build(
                    &reader,
                    SliceGrid::new(TimeRange::new(0, 300), 3).unwrap(),
                    metric,
                    &Filter::all(),
                )
                .unwrap();
                assert_eq!(as_map(&first), as_map(&direct), "{metric}");
            }
            while !p.is_complete() {
                p.step(&reader, 3).unwrap();
            }
            assert_eq!(
                as_map(&p.model(&reader).unwrap()),
                as_map(&whole),
                "{metric}"
            );
        }
    }

    #[test]
    fn a_grown_grid_keeps_its_slices_and_a_narrower_filter_is_cut_out() {
        let (_dir, path) = testutil::write_spec(&Spec::small());
        let reader = TraceReader::open(&path).unwrap();
        // Fixed-width slices of 100 ns: 5, then 10 (a live trace that grew).
        let short = SliceGrid::new(TimeRange::new(0, 500), 5).unwrap();
        let long = SliceGrid::new(TimeRange::new(0, 1000), 10).unwrap();
        let mut p = PartialModel::new(short, Metric::Count, &Filter::all());
        p.step(&reader, 5).unwrap();
        let mut grown = p.extended(long).expect("same edges");
        assert_eq!(grown.done(), 5);
        grown.step(&reader, 10).unwrap();
        let whole = build(&reader, long, Metric::Count, &Filter::all()).unwrap();
        assert_eq!(as_map(&grown.model(&reader).unwrap()), as_map(&whole));
        // Other edges: not continued.
        let other = SliceGrid::new(TimeRange::new(0, 1000), 7).unwrap();
        assert!(p.extended(other).is_none());
        // Without one type: the same as reading with that filter.
        let types: Vec<TypeId> = reader.event_types().unwrap().iter().map(|t| t.id).collect();
        let dropped = types[0];
        let narrow = Filter::all().types(types.iter().copied().filter(|t| *t != dropped));
        let cut = grown
            .restricted(&narrow, |_, t| t != dropped)
            .unwrap()
            .model(&reader)
            .unwrap();
        let read = build(&reader, long, Metric::Count, &narrow).unwrap();
        assert_eq!(as_map(&cut), as_map(&read));
        assert_eq!(cut.producers, read.producers);
    }

    #[test]
    fn grid_edges_and_slices() {
        let g = SliceGrid::new(TimeRange::new(10, 20), 3).unwrap();
        assert_eq!(
            (0..=3).map(|i| g.edge(i)).collect::<Vec<_>>(),
            [10, 13, 16, 20]
        );
        assert_eq!(g.slice_of(9), None);
        assert_eq!(g.slice_of(10), Some(0));
        assert_eq!(g.slice_of(12), Some(0));
        assert_eq!(g.slice_of(13), Some(1));
        assert_eq!(g.slice_of(19), Some(2));
        assert_eq!(g.slice_of(20), None);
        let mut got = Vec::new();
        g.spread(5, 17, |i, ns| got.push((i, ns)));
        assert_eq!(got, [(0, 3), (1, 3), (2, 1)]);
        assert!(SliceGrid::new(TimeRange::new(5, 5), 3).is_none());
        assert!(SliceGrid::new(TimeRange::new(0, 5), 0).is_none());
    }

    /// Counts, durations and time-weighted means straight from the event list (no store).
    pub(crate) fn naive(
        events: &[socscope_tracedb::Event],
        grid: &SliceGrid,
        metric: Metric,
    ) -> HashMap<(usize, ProducerId, TypeId), f64> {
        let mut out = HashMap::new();
        for t in 0..grid.slices {
            let s = grid.slice(t);
            for e in events {
                let key = (t, e.producer, e.type_id);
                match (metric, e.kind) {
                    (Metric::Count, _) if s.contains(e.ts) => {
                        *out.entry(key).or_insert(0.0) += 1.0;
                    }
                    (Metric::Duration, EventKind::State { end, .. }) => {
                        let o = s.overlap(e.ts, end);
                        if o > 0 {
                            *out.entry(key).or_insert(0.0) += o as f64;
                        }
                    }
                    _ => {}
                }
            }
            if metric == Metric::Mean {
                let mut pairs: Vec<(ProducerId, TypeId)> = events
                    .iter()
                    .filter(|e| matches!(e.kind, EventKind::Variable { .. }))
                    .map(|e| (e.producer, e.type_id))
                    .collect();
                pairs.sort_unstable();
                pairs.dedup();
                for (p, ty) in pairs {
                    let mut vs: Vec<(i64, f64)> = events
                        .iter()
                        .filter(|e| e.producer == p && e.type_id == ty)
                        .filter_map(|e| match e.kind {
                            EventKind::Variable { value } => Some((e.ts, value)),
                            _ => None,
                        })
                        .collect();
                    vs.sort_by_key(|x| x.0);
                    let (mut sum, mut ns) = (0.0, 0i64);
                    for (k, &(ts, v)) in vs.iter().enumerate() {
                        let next = vs
                            .get(k + 1)
                            .map_or(grid.range.end, |x| x.0.min(grid.range.end));
                        let o = s.overlap(ts, next.max(ts));
                        sum += v * o as f64;
                        ns += o;
                    }
                    if ns > 0 {
                        out.insert((t, p, ty), sum / ns as f64);
                    }
                }
            }
        }
        out.retain(|_, v| *v != 0.0);
        out
    }

    fn as_map(m: &TraceMicroscopicModel) -> HashMap<(usize, ProducerId, TypeId), f64> {
        let mut out = HashMap::new();
        for t in 0..m.grid.slices {
            for (p, prod) in m.producers.iter().enumerate() {
                for (u, ty) in m.types.iter().enumerate() {
                    let v = m.value(t, p, u);
                    if v != 0.0 {
                        out.insert((t, prod.id, ty.id), v);
                    }
                }
            }
        }
        out
    }

    fn close(
        a: &HashMap<(usize, ProducerId, TypeId), f64>,
        b: &HashMap<(usize, ProducerId, TypeId), f64>,
    ) -> bool {
        a.len() == b.len()
            && a.iter().all(|(k, v)| {
                b.get(k)
                    .is_some_and(|w| (v - w).abs() <= 1e-9 * v.abs().max(w.abs()).max(1.0))
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        #[test]
        fn summary_model_equals_direct_computation(
            spec in testutil::spec_strategy(),
            start_frac in 0.0f64..0.6,
            len_frac in 0.05f64..1.0,
            // Up to twice the parallel threshold: one thread and two (halves of the slices).
            slices in 1usize..(2 * PARALLEL_MIN_SLICES),
        ) {
            let (dir, path) = testutil::write_spec(&spec);
            let reader = TraceReader::open(&path).unwrap();
            let span = spec.span();
            let start = (span as f64 * start_frac) as i64 - 50;
            let len = ((span as f64 * len_frac) as i64).max(slices as i64);
            let grid = SliceGrid::new(TimeRange::new(start, start + len), slices).unwrap();
            for metric in [Metric::Count, Metric::Duration, Metric::Mean] {
                let fast = build(&reader, grid, metric, &Filter::all()).unwrap();
                let direct = build_direct(&reader, grid, metric, &Filter::all()).unwrap();
                let want = naive(&spec.events, &grid, metric);
                if metric == Metric::Mean {
                    prop_assert!(close(&as_map(&fast), &want), "{metric}: {:?} vs {:?}", as_map(&fast), want);
                } else {
                    prop_assert_eq!(&as_map(&fast), &want, "{}", metric);
                }
                prop_assert_eq!(as_map(&direct), as_map(&fast));
                let _ = fast.to_model().map(|m| assert_eq!(m.slices(), slices));
            }
            drop(dir);
        }
    }

    /// The model's tree (built on `ProducerTree`) keeps the order the aggregation results
    /// were computed with: siblings by id (not by kind and local id), a `(self)` leaf first
    /// under a producer that has events and children, an undescribed ancestor as a root.
    #[test]
    fn model_tree_orders_siblings_by_id() {
        use socscope_tracedb::ProducerKind;
        let p = |id, parent, kind, local_id, name: &str| Producer {
            id,
            parent,
            kind,
            local_id,
            name: name.into(),
        };
        let all = vec![
            p(5, None, ProducerKind::Process, 1, "p5"),
            p(2, Some(5), ProducerKind::Thread, 900, "t2"),
            p(3, Some(5), ProducerKind::Thread, 100, "t3"),
            p(1, None, ProducerKind::Cpu, 0, "cpu1"),
            p(7, Some(99), ProducerKind::Thread, 7, "t7"),
        ];
        let (children, leaf, nodes) = tree(&all, &all);
        let c: Vec<Vec<usize>> = vec![
            vec![1, 2, 6],
            vec![],
            vec![3, 4, 5],
            vec![],
            vec![],
            vec![],
            vec![7],
            vec![],
        ];
        assert_eq!(children, c);
        assert_eq!(
            leaf,
            [
                None,
                Some(3),
                None,
                Some(0),
                Some(1),
                Some(2),
                None,
                Some(4)
            ]
        );
        let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "all",
                "cpu1",
                "p5",
                "p5 (self)",
                "t2",
                "t3",
                "producer 99",
                "t7"
            ]
        );
        let ids: Vec<Option<ProducerId>> = nodes.iter().map(|n| n.producer).collect();
        assert_eq!(
            ids,
            [
                None,
                Some(1),
                Some(5),
                Some(5),
                Some(2),
                Some(3),
                Some(99),
                Some(7)
            ]
        );
    }

    #[test]
    fn model_has_hierarchy_names_and_rates() {
        let spec = Spec::small();
        let (_dir, path) = testutil::write_spec(&spec);
        let reader = TraceReader::open(&path).unwrap();
        let grid = SliceGrid::new(TimeRange::new(0, 1000), 4).unwrap();
        let m = build(&reader, grid, Metric::Duration, &Filter::all()).unwrap();
        // Only state types, only producers with states.
        assert!(m.types.iter().all(|t| t.category == EventCategory::State));
        let (h, nodes) = m.hierarchy();
        assert_eq!(nodes[0].name, "all");
        assert_eq!(h.leaf_count(h.root()), m.producers.len());
        let model = m.to_model().unwrap();
        assert_eq!(model.rate_divisor(), 250.0);
        assert_eq!(model.type_names()[0], m.types[0].name);
        // Thread 11 (child of process 10) ran [100, 400): 150 ns in slice 0, 150 in slice 1.
        assert_eq!(m.get(0, 11, 1), 150.0);
        assert_eq!(m.get(1, 11, 1), 150.0);
        assert_eq!(m.get(2, 11, 1), 0.0);
    }
}
