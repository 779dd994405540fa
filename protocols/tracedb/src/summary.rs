//! The multi-resolution summary: event counts and state time per producer and type, per time
//! bucket, at power-of-two bucket widths.
//!
//! Level `L` has buckets of `2^(base_shift + L)` ns; bucket `b` of level `L` covers
//! `[b << (base_shift + L), (b + 1) << (base_shift + L))`. An event counts in the bucket of its
//! start; a state adds the part of `[start, end)` inside a bucket to that bucket's `state_ns`.

use crate::fxhash::FxHashMap;
use crate::model::{ProducerId, TimeRange, Timestamp, TypeId};

/// Default finest bucket width: `2^21` ns ≈ 2.1 ms. An exact count over an arbitrary
/// interval reads the events of at most two partial finest buckets (one per end), so this
/// bounds the cost of a slice edge of the microscopic model; the summary stays a few percent
/// of the file.
pub const DEFAULT_BASE_SHIFT: u32 = 21;

/// Default number of levels: the coarsest bucket is `2^(21 + 19)` ns ≈ 18 minutes.
pub const DEFAULT_LEVELS: u32 = 20;

/// Default bound on the finest-level buckets a trace's time span may cover (≈ 9 minutes of
/// 2.1 ms buckets; a 1-hour trace gets 16.8 ms buckets): beyond it the finest width doubles until
/// the span fits, so that a state lasting hours (a Pajé container's) costs a bounded number of
/// summary rows instead of one per 2.1 ms.
pub const DEFAULT_MAX_BUCKETS: i64 = 1 << 18;

/// What a summary asks for: a bucket width or a number of buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// Buckets of at least this many nanoseconds (rounded up to a power of two).
    BucketWidth(i64),
    /// At most about this many buckets over the interval (the width is the smallest power
    /// of two that gives no more buckets than this, plus the two partial edge buckets).
    MaxBuckets(usize),
}

impl Resolution {
    /// The power-of-two exponent of the bucket width for `range`.
    pub fn shift_for(&self, range: TimeRange) -> u32 {
        let width = match *self {
            Resolution::BucketWidth(w) => w.max(1),
            Resolution::MaxBuckets(n) => {
                let n = n.max(1) as i64;
                let len = range.len().max(1);
                len / n + i64::from(len % n != 0)
            }
        };
        let w = width as u64;
        let shift = 64 - (w - 1).leading_zeros();
        if w <= 1 { 0 } else { shift.min(62) }
    }
}

/// Totals of one producer and type in one bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PartialOrd, Ord)]
pub struct SummaryCell {
    /// The producer.
    pub producer: ProducerId,
    /// The event type.
    pub type_id: TypeId,
    /// Events starting in the bucket.
    pub count: u64,
    /// Nanoseconds of states of this producer and type inside the bucket.
    pub state_ns: i64,
}

/// One bucket of a [`Summary`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SummaryBucket {
    /// The bucket's interval (edge buckets are clipped to the query interval).
    pub range: TimeRange,
    /// Non-empty cells, sorted by producer then type.
    pub cells: Vec<SummaryCell>,
}

impl SummaryBucket {
    /// Total event count.
    pub fn count(&self) -> u64 {
        self.cells.iter().map(|c| c.count).sum()
    }

    /// Total state time.
    pub fn state_ns(&self) -> i64 {
        self.cells.iter().map(|c| c.state_ns).sum()
    }
}

/// A summary of an interval at one resolution.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Summary {
    /// Bucket width in nanoseconds (a power of two).
    pub bucket_width: i64,
    /// The buckets, in time order, covering the query interval exactly.
    pub buckets: Vec<SummaryBucket>,
}

/// `(bucket, producer, type)`.
type CellKey = (i64, u32, u32);
/// `(count, state_ns)`.
type CellTotals = (u64, i64);

/// Level-0 totals accumulated by the writer between two commits.
pub(crate) struct SummaryAcc {
    pub(crate) shift: u32,
    pub(crate) map: FxHashMap<CellKey, CellTotals>,
    /// Earliest start and latest end ever added (kept across drains: the trace's span).
    lo: Timestamp,
    hi: Timestamp,
    /// Most level-0 buckets the span may cover (`0`: no bound).
    max_buckets: i64,
    /// The shift never grows beyond this (`shift + levels ≤ 62`).
    max_shift: u32,
    /// How much the shift grew since the last [`SummaryAcc::take_rebase`]: rows already
    /// written at the old width must be renumbered.
    rebase: u32,
    /// Per `(producer, type)`, inclusive ranges of level-0 buckets that states cover whole:
    /// a long state is one entry here instead of one map update per bucket, expanded into
    /// `map` when the buckets are drained (or re-bucketed).
    full: FxHashMap<(u32, u32), Vec<(i64, i64)>>,
}

/// A state covering more than this many whole buckets has them counted as a range.
const RANGE_MIN_BUCKETS: i64 = 8;

impl SummaryAcc {
    /// An accumulator whose finest width never changes.
    #[cfg(test)]
    pub(crate) fn new(shift: u32) -> Self {
        Self::bounded(shift, 62 - shift, 0)
    }

    /// An accumulator of `levels` levels whose finest width doubles whenever the span would
    /// cover more than `max_buckets` level-0 buckets (`0`: never).
    pub(crate) fn bounded(shift: u32, levels: u32, max_buckets: i64) -> Self {
        Self {
            shift,
            map: FxHashMap::default(),
            lo: Timestamp::MAX,
            hi: Timestamp::MIN,
            max_buckets,
            max_shift: 62u32.saturating_sub(levels).max(shift),
            rebase: 0,
            full: FxHashMap::default(),
        }
    }

    /// The growth of the shift since the last call (rows written before must move down
    /// that many levels), and resets it.
    pub(crate) fn take_rebase(&mut self) -> u32 {
        std::mem::take(&mut self.rebase)
    }

    /// Widens the span to `[ts, end)`; when it covers too many level-0 buckets, coarsens the
    /// finest level (merging the accumulated cells) until it fits.
    #[cold]
    fn widen(&mut self, ts: Timestamp, end: Timestamp) {
        self.lo = self.lo.min(ts);
        self.hi = self.hi.max(end);
        if self.max_buckets <= 0 {
            return;
        }
        let mut k = 0;
        while self.shift + k < self.max_shift
            && i128::from((self.hi - 1) >> (self.shift + k))
                - i128::from(self.lo >> (self.shift + k))
                >= i128::from(self.max_buckets)
        {
            k += 1;
        }
        if k == 0 {
            return;
        }
        self.expand_full();
        self.shift += k;
        self.rebase += k;
        let old = std::mem::take(&mut self.map);
        for ((b, p, t), (c, s)) in old {
            let e = self.map.entry((b >> k, p, t)).or_insert((0, 0));
            e.0 += c;
            e.1 += s;
        }
    }

    #[inline]
    pub(crate) fn add(
        &mut self,
        ts: Timestamp,
        end: Timestamp,
        is_state: bool,
        ty: TypeId,
        p: ProducerId,
    ) {
        let last = if is_state && end > ts {
            end
        } else {
            ts.saturating_add(1)
        };
        if ts < self.lo || last > self.hi {
            self.widen(ts, last);
        }
        let s = self.shift;
        let b = ts >> s;
        self.map.entry((b, p, ty)).or_insert((0, 0)).0 += 1;
        if is_state && end > ts {
            let last = (end - 1) >> s;
            if last - b - 1 > RANGE_MIN_BUCKETS {
                // The partial first and last buckets here, the whole ones in between as a range.
                self.map.entry((b, p, ty)).or_insert((0, 0)).1 += ((b + 1) << s) - ts;
                self.map.entry((last, p, ty)).or_insert((0, 0)).1 += end - (last << s);
                self.full
                    .entry((p, ty))
                    .or_default()
                    .push((b + 1, last - 1));
                return;
            }
            for bb in b..=last {
                let lo = ts.max(bb << s);
                let hi = end.min((bb + 1) << s);
                if hi > lo {
                    self.map.entry((bb, p, ty)).or_insert((0, 0)).1 += hi - lo;
                }
            }
        }
    }

    /// Adds the whole-bucket ranges to the map: per `(producer, type)`, a sweep over the range
    /// ends gives each covered bucket its depth (how many states cover it) at once.
    fn expand_full(&mut self) {
        if self.full.is_empty() {
            return;
        }
        let w = 1i64 << self.shift;
        let mut ends: Vec<(i64, i64)> = Vec::new();
        for ((p, t), ranges) in std::mem::take(&mut self.full) {
            ends.clear();
            for (a, z) in ranges {
                ends.push((a, 1));
                ends.push((z + 1, -1));
            }
            ends.sort_unstable();
            let mut depth = 0i64;
            let mut i = 0;
            while i < ends.len() {
                let from = ends[i].0;
                while i < ends.len() && ends[i].0 == from {
                    depth += ends[i].1;
                    i += 1;
                }
                // While a range is open its end is still ahead, so `ends[i]` exists.
                if depth > 0
                    && let Some(&(to, _)) = ends.get(i)
                {
                    for b in from..to {
                        self.map.entry((b, p, t)).or_insert((0, 0)).1 += depth * w;
                    }
                }
            }
        }
    }

    /// The accumulated totals of `levels` levels, grouped by bucket, and clears: for each
    /// `(level, bucket)` in order, its cells sorted by `(producer, type)`.
    pub(crate) fn drain_buckets(&mut self, levels: u32) -> Vec<BucketCells> {
        self.expand_full();
        let mut out = Vec::new();
        let mut cur: Vec<(CellKey, CellTotals)> = self.map.drain().collect();
        cur.sort_unstable_by_key(|e| e.0);
        let mut next: Vec<(CellKey, CellTotals)> = Vec::with_capacity(cur.len());
        for level in 0..levels {
            if level > 0 {
                // Buckets 2k and 2k+1 become bucket k: merge their two sorted runs.
                next.clear();
                let mut i = 0;
                while i < cur.len() {
                    let parent = cur[i].0.0 >> 1;
                    let mut j = i;
                    while j < cur.len() && cur[j].0.0 == cur[i].0.0 {
                        j += 1;
                    }
                    let mut k = j;
                    while k < cur.len() && cur[k].0.0 >> 1 == parent {
                        k += 1;
                    }
                    merge_runs(&cur[i..j], &cur[j..k], parent, &mut next);
                    i = k;
                }
                std::mem::swap(&mut cur, &mut next);
            }
            let mut i = 0;
            while i < cur.len() {
                let b = cur[i].0.0;
                let mut j = i;
                while j < cur.len() && cur[j].0.0 == b {
                    j += 1;
                }
                out.push(BucketCells {
                    level,
                    bucket: b,
                    cells: cur[i..j]
                        .iter()
                        .map(|&((_, p, t), (c, s))| SummaryCell {
                            producer: p,
                            type_id: t,
                            count: c,
                            state_ns: s,
                        })
                        .collect(),
                });
                i = j;
            }
        }
        out
    }
}

/// Merges two runs sorted by `(producer, type)` into `out` under bucket `parent`.
fn merge_runs(
    a: &[(CellKey, CellTotals)],
    b: &[(CellKey, CellTotals)],
    parent: i64,
    out: &mut Vec<(CellKey, CellTotals)>,
) {
    let (mut i, mut j) = (0, 0);
    let pt = |e: &(CellKey, CellTotals)| (e.0.1, e.0.2);
    while i < a.len() || j < b.len() {
        let take_a = j == b.len() || (i < a.len() && pt(&a[i]) <= pt(&b[j]));
        let e = if take_a {
            i += 1;
            a[i - 1]
        } else {
            j += 1;
            b[j - 1]
        };
        match out.last_mut() {
            Some(l) if l.0.0 == parent && pt(l) == pt(&e) => {
                l.1.0 += e.1.0;
                l.1.1 += e.1.1;
            }
            _ => out.push(((parent, e.0.1, e.0.2), e.1)),
        }
    }
}

/// The cells of one summary bucket, sorted by `(producer, type)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BucketCells {
    pub(crate) level: u32,
    pub(crate) bucket: i64,
    pub(crate) cells: Vec<SummaryCell>,
}

/// Version byte of a summary row's `data`.
pub(crate) const SUMMARY_FORMAT: u8 = 1;

/// Encodes cells sorted by `(producer, type)` as a summary row's `data` (see `SCHEMA.md`).
pub(crate) fn encode_cells(
    cells: &[SummaryCell],
    scratch: &mut Vec<u8>,
    compressor: &mut zstd::bulk::Compressor<'static>,
) -> std::io::Result<Vec<u8>> {
    use crate::codec::{put_uvarint, zigzag};
    scratch.clear();
    put_uvarint(scratch, cells.len() as u64);
    let mut prev = 0u32;
    for c in cells {
        put_uvarint(scratch, u64::from(c.producer.wrapping_sub(prev)));
        prev = c.producer;
        put_uvarint(scratch, u64::from(c.type_id));
        put_uvarint(scratch, c.count);
        put_uvarint(scratch, zigzag(c.state_ns));
    }
    let mut out = Vec::with_capacity(scratch.len() / 2 + 16);
    out.push(SUMMARY_FORMAT);
    put_uvarint(&mut out, scratch.len() as u64);
    out.extend_from_slice(&compressor.compress(scratch)?);
    Ok(out)
}

/// Decodes a summary row's `data`, appending its cells to `out`.
pub(crate) fn decode_cells(
    data: &[u8],
    decompressor: &mut zstd::bulk::Decompressor<'static>,
    out: &mut Vec<SummaryCell>,
) -> Result<(), String> {
    use crate::codec::{ByteReader, get_uvarint, unzigzag};
    let mut head = ByteReader::new(data);
    let format = head.u8()?;
    if format != SUMMARY_FORMAT {
        return Err(format!(
            "summary format {format}, expected {SUMMARY_FORMAT}"
        ));
    }
    let raw_len = head.uvarint()?;
    if raw_len > 64 << 20 {
        return Err(format!(
            "declared summary body of {raw_len} bytes is too large"
        ));
    }
    let body = decompressor
        .decompress(&data[head.pos()..], raw_len as usize)
        .map_err(|e| format!("zstd: {e}"))?;
    if body.len() as u64 != raw_len {
        return Err(format!(
            "summary body is {} bytes, header says {raw_len}",
            body.len()
        ));
    }
    let mut p = 0usize;
    let n = get_uvarint(&body, &mut p)?;
    // Every cell takes at least four bytes.
    out.reserve(usize::try_from(n).unwrap_or(usize::MAX).min(body.len() / 4));
    let mut producer = 0u32;
    for _ in 0..n {
        let dp =
            u32::try_from(get_uvarint(&body, &mut p)?).map_err(|_| "producer overflows u32")?;
        producer = producer.wrapping_add(dp);
        let type_id =
            u32::try_from(get_uvarint(&body, &mut p)?).map_err(|_| "type overflows u32")?;
        let count = get_uvarint(&body, &mut p)?;
        let state_ns = unzigzag(get_uvarint(&body, &mut p)?);
        out.push(SummaryCell {
            producer,
            type_id,
            count,
            state_ns,
        });
    }
    if p != body.len() {
        return Err("trailing bytes in a summary row".into());
    }
    Ok(())
}

/// Adds the sorted cells `add` into the sorted cells `into` (both by `(producer, type)`, each
/// pair at most once), in one linear pass; empty cells are dropped.
pub(crate) fn merge_cells(into: &mut Vec<SummaryCell>, add: &[SummaryCell]) {
    if add.is_empty() {
        return;
    }
    let key = |c: &SummaryCell| (c.producer, c.type_id);
    let old = std::mem::take(into);
    into.reserve(old.len() + add.len());
    let (mut i, mut j) = (0, 0);
    while i < old.len() || j < add.len() {
        let c = match (old.get(i), add.get(j)) {
            (Some(a), Some(b)) if key(a) == key(b) => {
                i += 1;
                j += 1;
                SummaryCell {
                    count: a.count + b.count,
                    state_ns: a.state_ns + b.state_ns,
                    ..*a
                }
            }
            (Some(a), Some(b)) if key(a) < key(b) => {
                i += 1;
                *a
            }
            (Some(a), None) => {
                i += 1;
                *a
            }
            (_, Some(b)) => {
                j += 1;
                *b
            }
            (None, None) => break,
        };
        if c.count != 0 || c.state_ns != 0 {
            into.push(c);
        }
    }
}

/// Sorts cells and merges duplicates, dropping empty ones.
pub(crate) fn normalize(cells: &mut Vec<SummaryCell>) {
    cells.sort_unstable_by_key(|c| (c.producer, c.type_id));
    let mut out: Vec<SummaryCell> = Vec::with_capacity(cells.len());
    for c in cells.drain(..) {
        match out.last_mut() {
            Some(l) if l.producer == c.producer && l.type_id == c.type_id => {
                l.count += c.count;
                l.state_ns += c.state_ns;
            }
            _ => out.push(c),
        }
    }
    out.retain(|c| c.count != 0 || c.state_ns != 0);
    *cells = out;
}

/// The part of `range` aligned to multiples of `w`: `(first multiple at or after the start,
/// last multiple at or before the end)`; empty when the first is not below the second.
pub(crate) fn aligned_inside(range: TimeRange, w: i64) -> (i64, i64) {
    let up = range
        .start
        .div_euclid(w)
        .saturating_add(i64::from(range.start.rem_euclid(w) != 0))
        .saturating_mul(w);
    let down = range.end.div_euclid(w).saturating_mul(w);
    (up, down)
}

/// Splits `[a, b)` (both multiples of `2^base`) into aligned dyadic pieces `(level, bucket)`.
pub(crate) fn dyadic_pieces(a: i64, b: i64, base: u32, levels: u32) -> Vec<(u32, i64)> {
    let mut out = Vec::new();
    let mut pos = a;
    while pos < b {
        let mut level = 0u32;
        while level + 1 < levels {
            let w = 1i64 << (base + level + 1);
            if pos.rem_euclid(w) == 0 && pos.checked_add(w).is_some_and(|e| e <= b) {
                level += 1;
            } else {
                break;
            }
        }
        out.push((level, pos >> (base + level)));
        pos += 1i64 << (base + level);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolution_shift() {
        let r = TimeRange::new(0, 1000);
        assert_eq!(Resolution::BucketWidth(1).shift_for(r), 0);
        assert_eq!(Resolution::BucketWidth(1024).shift_for(r), 10);
        assert_eq!(Resolution::BucketWidth(1025).shift_for(r), 11);
        assert_eq!(Resolution::MaxBuckets(10).shift_for(r), 7);
    }

    #[test]
    fn dyadic_covers_exactly() {
        let base = 4;
        let p = dyadic_pieces(16, 16 * 37, base, 10);
        let mut pos = 16;
        for (l, b) in p {
            assert_eq!(b << (base + l), pos);
            pos += 1 << (base + l);
        }
        assert_eq!(pos, 16 * 37);
    }

    #[test]
    fn acc_splits_states() {
        let mut acc = SummaryAcc::new(4);
        acc.add(10, 40, true, 1, 2);
        let rows = acc.drain_buckets(1);
        let got: Vec<(i64, u64, i64)> = rows
            .iter()
            .map(|r| (r.bucket, r.cells[0].count, r.cells[0].state_ns))
            .collect();
        assert_eq!(got, vec![(0, 1, 6), (1, 0, 16), (2, 0, 8)]);
    }

    /// Long states (their whole buckets counted as ranges, expanded at the drain or before a
    /// coarsening) give the same rows as adding every bucket one by one.
    #[test]
    fn acc_ranges_of_long_states_equal_bucket_by_bucket() {
        fn naive(shift: u32, states: &[(i64, i64, u32, u32)]) -> FxHashMap<CellKey, CellTotals> {
            let mut m: FxHashMap<CellKey, CellTotals> = FxHashMap::default();
            for &(ts, end, ty, p) in states {
                m.entry((ts >> shift, p, ty)).or_insert((0, 0)).0 += 1;
                for b in (ts >> shift)..=((end - 1) >> shift) {
                    let ns = end.min((b + 1) << shift) - ts.max(b << shift);
                    m.entry((b, p, ty)).or_insert((0, 0)).1 += ns;
                }
            }
            m
        }
        let mut rng = crate::bench::SplitMix::new(11);
        let mut states = Vec::new();
        for _ in 0..300 {
            let ts = rng.below(5_000) as i64;
            let len = if rng.below(3) == 0 {
                1 + rng.below(4_000) as i64
            } else {
                1 + rng.below(100) as i64
            };
            states.push((ts, ts + len, rng.below(2) as u32, rng.below(3) as u32));
        }
        let rows = |acc: &mut SummaryAcc| -> Vec<BucketCells> { acc.drain_buckets(3) };
        let mut acc = SummaryAcc::new(4);
        for &(ts, end, ty, p) in &states {
            acc.add(ts, end, true, ty, p);
        }
        let mut direct = SummaryAcc::new(4);
        direct.map = naive(4, &states);
        assert_eq!(rows(&mut acc), rows(&mut direct));
        // A coarsening half way: the ranges added before are expanded at the old width.
        let mut acc = SummaryAcc::bounded(4, 3, 200);
        for &(ts, end, ty, p) in &states[..150] {
            acc.add(ts, end, true, ty, p);
        }
        acc.add(0, 1, false, 0, 0);
        acc.add(20_000, 20_001, false, 0, 0);
        let shift = acc.shift;
        assert!(shift > 4);
        for &(ts, end, ty, p) in &states[150..] {
            acc.add(ts, end, true, ty, p);
        }
        let mut direct = SummaryAcc::new(shift);
        direct.map = naive(shift, &states);
        for (ts, p) in [(0, 0), (20_000, 0)] {
            direct.map.entry((ts >> shift, p, 0)).or_insert((0, 0)).0 += 1;
        }
        assert_eq!(rows(&mut acc), rows(&mut direct));
    }

    #[test]
    fn acc_coarsens_when_the_span_outgrows_the_bound() {
        let mut acc = SummaryAcc::bounded(4, 5, 4);
        acc.add(0, 10, true, 1, 2);
        acc.add(40, 50, false, 1, 2);
        assert_eq!((acc.take_rebase(), acc.shift), (0, 4));
        // [0, 200) covers 13 buckets of 16 ns, 4 of 64 ns.
        acc.add(60, 200, true, 1, 2);
        assert_eq!((acc.take_rebase(), acc.shift), (2, 6));
        assert_eq!(acc.take_rebase(), 0);
        let got: Vec<(i64, u64, i64)> = acc
            .drain_buckets(1)
            .iter()
            .map(|r| (r.bucket, r.cells[0].count, r.cells[0].state_ns))
            .collect();
        assert_eq!(got, vec![(0, 3, 14), (1, 0, 64), (2, 0, 64), (3, 0, 8)]);
        // The span is kept across drains, and the shift stops at 62 - levels.
        acc.add(-1000, -999, false, 1, 2);
        assert_eq!((acc.take_rebase(), acc.shift), (3, 9));
        let mut capped = SummaryAcc::bounded(4, 56, 1);
        capped.add(0, 1 << 20, true, 1, 2);
        assert_eq!(capped.shift, 6);
        assert_eq!(capped.drain_buckets(1).len(), 1 << 14);
    }

    #[test]
    fn acc_levels_and_cells_round_trip() {
        let mut acc = SummaryAcc::new(4);
        // Buckets 0..8 at level 0, two producers, two types.
        for i in 0..64i64 {
            acc.add(
                i * 2,
                i * 2 + 20,
                i % 3 == 0,
                (i % 2) as u32,
                (i % 5) as u32,
            );
        }
        let mut direct: FxHashMap<(u32, i64, u32, u32), (u64, i64)> = FxHashMap::default();
        let mut acc2 = SummaryAcc::new(4);
        for i in 0..64i64 {
            acc2.add(
                i * 2,
                i * 2 + 20,
                i % 3 == 0,
                (i % 2) as u32,
                (i % 5) as u32,
            );
        }
        for ((b, p, t), (c, s)) in acc2.map.drain() {
            for level in 0..4u32 {
                let e = direct.entry((level, b >> level, p, t)).or_default();
                e.0 += c;
                e.1 += s;
            }
        }
        let mut comp = zstd::bulk::Compressor::new(1).unwrap();
        let mut dec = zstd::bulk::Decompressor::new().unwrap();
        let mut n = 0;
        for bc in acc.drain_buckets(4) {
            let mut sorted = bc.cells.clone();
            normalize(&mut sorted);
            assert_eq!(sorted, bc.cells);
            let blob = encode_cells(&bc.cells, &mut Vec::new(), &mut comp).unwrap();
            let mut back = Vec::new();
            decode_cells(&blob, &mut dec, &mut back).unwrap();
            assert_eq!(back, bc.cells);
            for c in bc.cells {
                assert_eq!(
                    direct[&(bc.level, bc.bucket, c.producer, c.type_id)],
                    (c.count, c.state_ns)
                );
                n += 1;
            }
        }
        assert_eq!(n, direct.len());
        assert!(decode_cells(&[1, 9, 0], &mut dec, &mut Vec::new()).is_err());
    }
}
