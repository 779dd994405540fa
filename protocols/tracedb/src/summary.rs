//! The multi-resolution summary: event counts and state time per producer and type, per time
//! bucket, at power-of-two bucket widths.
//!
//! Level `L` has buckets of `2^(base_shift + L)` ns; bucket `b` of level `L` covers
//! `[b << (base_shift + L), (b + 1) << (base_shift + L))`. An event counts in the bucket of its
//! start; a state adds the part of `[start, end)` inside a bucket to that bucket's `state_ns`.

use crate::model::{ProducerId, TimeRange, Timestamp, TypeId};
use rustc_hash::FxHashMap;

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
/// `(count, open, partial)` of a cell being accumulated (see [`RowCell`]).
type Totals = (u64, i64, i64);

/// What a summary row stores for one `(producer, type)`: the events starting in its bucket, and
/// the state starts and ends inside it, from which readers integrate the state time.
///
/// For a bucket `[s, e)`: a state `[a, z)` *starts* in it when `s ≤ a < e` and *ends* in it when
/// `s < z ≤ e`. With `A` the number of states of the pair open across `s` (started before `s`,
/// ending after it), the pair's state time inside the bucket is `A·(e − s) + partial`, and the
/// count open across `e` is `A + open`. So a state costs a cell where it starts and one where it
/// ends, whatever its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct RowCell {
    pub(crate) producer: ProducerId,
    pub(crate) type_id: TypeId,
    /// Events starting in the bucket.
    pub(crate) count: u64,
    /// States starting in the bucket minus states ending in it.
    pub(crate) open: i64,
    /// `Σ (e − a)` over the states starting in it minus `Σ (e − z)` over those ending in it
    /// (wrapping arithmetic: the integrated total is exact modulo 2^64).
    pub(crate) partial: i64,
}

/// Cells that add up per `(producer, type)`: a summary row's [`RowCell`] and a reported
/// [`SummaryCell`].
pub(crate) trait Additive: Copy {
    /// `(producer, type)`.
    fn key(&self) -> (u32, u32);
    /// Adds `other`'s totals (same key).
    fn add(&mut self, other: &Self);
    /// Nothing in it.
    fn is_zero(&self) -> bool;
}

impl Additive for RowCell {
    fn key(&self) -> (u32, u32) {
        (self.producer, self.type_id)
    }
    fn add(&mut self, o: &Self) {
        self.count += o.count;
        self.open = self.open.wrapping_add(o.open);
        self.partial = self.partial.wrapping_add(o.partial);
    }
    fn is_zero(&self) -> bool {
        self.count == 0 && self.open == 0 && self.partial == 0
    }
}

impl Additive for SummaryCell {
    fn key(&self) -> (u32, u32) {
        (self.producer, self.type_id)
    }
    fn add(&mut self, o: &Self) {
        self.count += o.count;
        self.state_ns = self.state_ns.wrapping_add(o.state_ns);
    }
    fn is_zero(&self) -> bool {
        self.count == 0 && self.state_ns == 0
    }
}

/// The end of bucket `b` of width `2^shift` (saturating at the end of time).
#[inline]
pub(crate) fn bucket_end(b: i64, shift: u32) -> i64 {
    ((i128::from(b) + 1) << shift).min(i128::from(i64::MAX)) as i64
}

/// The start of bucket `b` of width `2^shift` (saturating).
#[inline]
pub(crate) fn bucket_start(b: i64, shift: u32) -> i64 {
    (i128::from(b) << shift).clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

/// Level-0 totals accumulated by the writer between two commits.
pub(crate) struct SummaryAcc {
    pub(crate) shift: u32,
    pub(crate) map: FxHashMap<CellKey, Totals>,
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
    /// Events added over the accumulator's life.
    pub(crate) events: u64,
}

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
            events: 0,
        }
    }

    /// The growth of the shift since the last call (rows written before must move down
    /// that many levels), and resets it.
    pub(crate) fn take_rebase(&mut self) -> u32 {
        std::mem::take(&mut self.rebase)
    }

    /// How many more times the finest width may double.
    pub(crate) fn headroom(&self) -> u32 {
        self.max_shift.saturating_sub(self.shift)
    }

    /// The time between the earliest start and the latest end added so far (at least 1).
    pub(crate) fn span(&self) -> i64 {
        if self.hi > self.lo {
            self.hi.saturating_sub(self.lo)
        } else {
            1
        }
    }

    /// Doubles the finest width `k` times, merging the accumulated cells into the wider
    /// buckets (their partial times move to the new bucket ends).
    pub(crate) fn coarsen(&mut self, k: u32) {
        let k = k.min(self.headroom());
        if k == 0 {
            return;
        }
        let s = self.shift;
        // Sized once (for half the cells: wider buckets merge neighbours) instead of grown
        // from empty through every doubling.
        let fresh = FxHashMap::with_capacity_and_hasher(self.map.len() / 2, Default::default());
        let old = std::mem::replace(&mut self.map, fresh);
        for ((b, p, t), (c, o, x)) in old {
            let nb = b >> k;
            let lift = bucket_end(nb, s + k).wrapping_sub(bucket_end(b, s));
            let e = self.map.entry((nb, p, t)).or_insert((0, 0, 0));
            e.0 += c;
            e.1 = e.1.wrapping_add(o);
            e.2 = e.2.wrapping_add(x).wrapping_add(o.wrapping_mul(lift));
        }
        self.shift += k;
        self.rebase += k;
    }

    /// Widens the span to `[ts, end)`; when it covers too many level-0 buckets, coarsens the
    /// finest level until it fits.
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
        self.coarsen(k);
    }

    /// Adds an event: it counts where it starts; a state (`is_state` and `end > ts`) also
    /// opens where it starts and closes where it ends.
    #[inline]
    pub(crate) fn add(
        &mut self,
        ts: Timestamp,
        end: Timestamp,
        is_state: bool,
        ty: TypeId,
        p: ProducerId,
    ) {
        let state = is_state && end > ts;
        let last = if state { end } else { ts.saturating_add(1) };
        if ts < self.lo || last > self.hi {
            self.widen(ts, last);
        }
        self.events += 1;
        let s = self.shift;
        let b = ts >> s;
        let e = self.map.entry((b, p, ty)).or_insert((0, 0, 0));
        e.0 += 1;
        if state {
            let start_rem = bucket_end(b, s).wrapping_sub(ts);
            let be = (end - 1) >> s;
            let end_rem = bucket_end(be, s).wrapping_sub(end);
            if be == b {
                e.2 = e.2.wrapping_add(start_rem.wrapping_sub(end_rem));
            } else {
                e.1 += 1;
                e.2 = e.2.wrapping_add(start_rem);
                let f = self.map.entry((be, p, ty)).or_insert((0, 0, 0));
                f.1 -= 1;
                f.2 = f.2.wrapping_sub(end_rem);
            }
        }
    }

    /// How many cells each of `levels` levels would hold if the accumulator were drained now
    /// (what the density rule counts once they are stored), the accumulator left as it is: the
    /// merges [`Self::drain_buckets`] makes, counted without building its rows.
    pub(crate) fn cells_per_level(&self, levels: u32) -> Vec<u64> {
        let mut cur: Vec<(CellKey, Totals)> = self.map.iter().map(|(k, v)| (*k, *v)).collect();
        cur.sort_unstable_by_key(|e| e.0);
        let mut next = Vec::with_capacity(cur.len());
        let mut cells = vec![0; levels as usize];
        for (level, n) in (0..levels).zip(cells.iter_mut()) {
            if level > 0 {
                merge_level(&cur, 1i64 << (self.shift + level - 1), &mut next);
                std::mem::swap(&mut cur, &mut next);
            }
            *n = cur.iter().filter(|(_, t)| *t != (0, 0, 0)).count() as u64;
        }
        cells
    }

    /// The accumulated totals of `levels` levels, grouped by bucket, and clears: for each
    /// `(level, bucket)` in order, its cells sorted by `(producer, type)`.
    pub(crate) fn drain_buckets(&mut self, levels: u32) -> Vec<BucketCells> {
        let mut out = Vec::new();
        let mut cur: Vec<(CellKey, Totals)> = self.map.drain().collect();
        cur.sort_unstable_by_key(|e| e.0);
        let mut next: Vec<(CellKey, Totals)> = Vec::with_capacity(cur.len());
        for level in 0..levels {
            if level > 0 {
                merge_level(&cur, 1i64 << (self.shift + level - 1), &mut next);
                std::mem::swap(&mut cur, &mut next);
            }
            let mut i = 0;
            while i < cur.len() {
                let b = cur[i].0.0;
                let mut j = i;
                while j < cur.len() && cur[j].0.0 == b {
                    j += 1;
                }
                let cells: Vec<RowCell> = cur[i..j]
                    .iter()
                    .map(|&((_, p, t), (c, o, x))| RowCell {
                        producer: p,
                        type_id: t,
                        count: c,
                        open: o,
                        partial: x,
                    })
                    .filter(|c| !c.is_zero())
                    .collect();
                if !cells.is_empty() {
                    out.push(BucketCells {
                        level,
                        bucket: b,
                        cells,
                    });
                }
                i = j;
            }
        }
        out
    }
}

/// The cells of one level (sorted by key, buckets of width `child_width`) merged into the next
/// level's, in `next` (emptied first): buckets 2k and 2k+1 become bucket k, their two sorted runs
/// merged; the left child's partial times move to the parent's end, one child width later.
fn merge_level(cur: &[(CellKey, Totals)], child_width: i64, next: &mut Vec<(CellKey, Totals)>) {
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
        merge_runs(&cur[i..j], &cur[j..k], parent, child_width, next);
        i = k;
    }
}

/// Merges two runs sorted by `(producer, type)` into `out` under bucket `parent`; cells of an
/// even (left) child have their partial times moved `child_width` later.
fn merge_runs(
    a: &[(CellKey, Totals)],
    b: &[(CellKey, Totals)],
    parent: i64,
    child_width: i64,
    out: &mut Vec<(CellKey, Totals)>,
) {
    let (mut i, mut j) = (0, 0);
    let pt = |e: &(CellKey, Totals)| (e.0.1, e.0.2);
    while i < a.len() || j < b.len() {
        let take_a = j == b.len() || (i < a.len() && pt(&a[i]) <= pt(&b[j]));
        let mut e = if take_a {
            i += 1;
            a[i - 1]
        } else {
            j += 1;
            b[j - 1]
        };
        if e.0.0 & 1 == 0 {
            e.1.2 = e.1.2.wrapping_add(e.1.1.wrapping_mul(child_width));
        }
        match out.last_mut() {
            Some(l) if l.0.0 == parent && pt(l) == pt(&e) => {
                l.1.0 += e.1.0;
                l.1.1 = l.1.1.wrapping_add(e.1.1);
                l.1.2 = l.1.2.wrapping_add(e.1.2);
            }
            _ => out.push(((parent, e.0.1, e.0.2), e.1)),
        }
    }
}

/// Cells of buckets of width `2^from_shift` merged into the buckets of width `2^to_shift`
/// (`to_shift ≥ from_shift`) that hold them: `(bucket, cells)` sorted by bucket in, sorted by
/// bucket out, partial times moved to the wider buckets' ends.
pub(crate) fn merge_into_wider(
    rows: &[(i64, Vec<RowCell>)],
    from_shift: u32,
    to_shift: u32,
) -> Vec<(i64, Vec<RowCell>)> {
    let d = to_shift - from_shift;
    let mut out: Vec<(i64, Vec<RowCell>)> = Vec::new();
    let mut i = 0;
    while i < rows.len() {
        let parent = rows[i].0 >> d;
        let parent_end = bucket_end(parent, to_shift);
        let mut cells = Vec::new();
        while i < rows.len() && rows[i].0 >> d == parent {
            let lift = parent_end.wrapping_sub(bucket_end(rows[i].0, from_shift));
            cells.extend(rows[i].1.iter().map(|c| RowCell {
                partial: c.partial.wrapping_add(c.open.wrapping_mul(lift)),
                ..*c
            }));
            i += 1;
        }
        normalize(&mut cells);
        if !cells.is_empty() {
            out.push((parent, cells));
        }
    }
    out
}

/// The cells of one summary bucket, sorted by `(producer, type)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BucketCells {
    pub(crate) level: u32,
    pub(crate) bucket: i64,
    pub(crate) cells: Vec<RowCell>,
}

/// The states open at one instant, per `(producer, type)`: walking buckets in time order, it
/// turns their rows' cells into counts and state times.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct OpenStates {
    /// Sorted by key, no zero.
    open: Vec<((u32, u32), i64)>,
}

impl OpenStates {
    /// Moves past a bucket (or an aligned piece) whose row is `row`, without reporting it.
    pub(crate) fn pass(&mut self, row: &[RowCell]) {
        self.walk(row, 0, None);
    }

    /// Reports the bucket of `width` ns whose row is `row` into `out` (sorted by key, only
    /// non-empty cells) and moves past it.
    pub(crate) fn step(&mut self, row: &[RowCell], width: i64, out: &mut Vec<SummaryCell>) {
        self.walk(row, width, Some(out));
    }

    /// Nothing open.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    fn walk(&mut self, row: &[RowCell], width: i64, mut out: Option<&mut Vec<SummaryCell>>) {
        if row.is_empty() {
            // Nothing starts or ends: every open pair is open across the whole bucket.
            if let Some(out) = out {
                for &((producer, type_id), a) in &self.open {
                    let state_ns = a.wrapping_mul(width);
                    if state_ns != 0 {
                        out.push(SummaryCell {
                            producer,
                            type_id,
                            count: 0,
                            state_ns,
                        });
                    }
                }
            }
            return;
        }
        let mut next = Vec::with_capacity(self.open.len() + row.len());
        let (mut i, mut j) = (0, 0);
        loop {
            let (key, a, cell) = match (self.open.get(i), row.get(j)) {
                (Some(&(k, a)), Some(c)) if k == c.key() => {
                    i += 1;
                    j += 1;
                    (k, a, Some(c))
                }
                (Some(&(k, a)), Some(c)) if k < c.key() => {
                    i += 1;
                    (k, a, None)
                }
                (Some(&(k, a)), None) => {
                    i += 1;
                    (k, a, None)
                }
                (_, Some(c)) => {
                    j += 1;
                    (c.key(), 0, Some(c))
                }
                (None, None) => break,
            };
            let (count, open, partial) = cell.map_or((0, 0, 0), |c| (c.count, c.open, c.partial));
            if let Some(out) = out.as_deref_mut() {
                let state_ns = a.wrapping_mul(width).wrapping_add(partial);
                if count != 0 || state_ns != 0 {
                    out.push(SummaryCell {
                        producer: key.0,
                        type_id: key.1,
                        count,
                        state_ns,
                    });
                }
            }
            let now = a.wrapping_add(open);
            if now != 0 {
                next.push((key, now));
            }
        }
        self.open = next;
    }
}

/// Version byte of a summary row's `data`.
pub(crate) const SUMMARY_FORMAT: u8 = 2;

/// Rows whose body is at most this long are stored without zstd (a frame's tables cost more
/// than they save).
const RAW_ROW_MAX_BYTES: usize = 96;

/// A longer row is stored as a zstd frame only when that saves at least `1 / RAW_ROW_SAVING` of
/// its body. A row's cells are mostly distinct varints that zstd shrinks by a few percent: on a
/// 2 h capture at 20 k records/s every row was compressed, 1–7 % smaller, and decompressing the
/// rows took 9 % of a microscopic model's instructions.
const RAW_ROW_SAVING: usize = 8;

/// Encodes cells sorted by `(producer, type)` as a summary row's `data` (see `SCHEMA.md`).
pub(crate) fn encode_cells(
    cells: &[RowCell],
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
        let has_state = c.open != 0 || c.partial != 0;
        put_uvarint(scratch, u64::from(c.type_id) << 1 | u64::from(has_state));
        put_uvarint(scratch, c.count);
        if has_state {
            put_uvarint(scratch, zigzag(c.open));
            put_uvarint(scratch, zigzag(c.partial));
        }
    }
    let mut out = Vec::with_capacity(scratch.len() + 8);
    out.push(SUMMARY_FORMAT);
    put_uvarint(&mut out, scratch.len() as u64);
    let frame = if scratch.len() > RAW_ROW_MAX_BYTES {
        Some(compressor.compress(scratch)?)
            .filter(|f| f.len() + scratch.len() / RAW_ROW_SAVING <= scratch.len())
    } else {
        None
    };
    match frame {
        Some(f) => {
            put_uvarint(&mut out, f.len() as u64);
            out.extend_from_slice(&f);
        }
        None => {
            put_uvarint(&mut out, scratch.len() as u64);
            out.extend_from_slice(scratch);
        }
    }
    Ok(out)
}

/// Decodes a summary row's `data`, appending its cells to `out`.
pub(crate) fn decode_cells(
    data: &[u8],
    decompressor: &mut crate::codec::Decompressor,
    out: &mut Vec<RowCell>,
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
    let stored_len = head.uvarint()?;
    if raw_len > 64 << 20 {
        return Err(format!(
            "declared summary body of {raw_len} bytes is too large"
        ));
    }
    let stored = head.bytes(usize::try_from(stored_len).map_err(|_| "stored length overflows")?)?;
    if !head.is_empty() {
        return Err("trailing bytes after a summary row's body".into());
    }
    let unpacked;
    let body: &[u8] = if stored_len == raw_len {
        stored
    } else {
        unpacked = decompressor
            .decompress(stored, raw_len as usize)
            .map_err(|e| format!("zstd: {e}"))?;
        if unpacked.len() as u64 != raw_len {
            return Err(format!(
                "summary body is {} bytes, header says {raw_len}",
                unpacked.len()
            ));
        }
        &unpacked
    };
    let mut p = 0usize;
    let n = get_uvarint(body, &mut p)?;
    // Every cell takes at least three bytes.
    out.reserve(usize::try_from(n).unwrap_or(usize::MAX).min(body.len() / 3));
    let mut producer = 0u32;
    for _ in 0..n {
        let dp = u32::try_from(get_uvarint(body, &mut p)?).map_err(|_| "producer overflows u32")?;
        producer = producer.wrapping_add(dp);
        let tag = get_uvarint(body, &mut p)?;
        let type_id = u32::try_from(tag >> 1).map_err(|_| "type overflows u32")?;
        let count = get_uvarint(body, &mut p)?;
        let (open, partial) = if tag & 1 == 1 {
            (
                unzigzag(get_uvarint(body, &mut p)?),
                unzigzag(get_uvarint(body, &mut p)?),
            )
        } else {
            (0, 0)
        };
        out.push(RowCell {
            producer,
            type_id,
            count,
            open,
            partial,
        });
    }
    if p != body.len() {
        return Err("trailing bytes in a summary row".into());
    }
    Ok(())
}

/// Adds the sorted cells `add` into the sorted cells `into` (both by `(producer, type)`, each
/// pair at most once), in one linear pass; empty cells are dropped.
pub(crate) fn merge_cells<C: Additive>(into: &mut Vec<C>, add: &[C]) {
    if add.is_empty() {
        return;
    }
    let old = std::mem::take(into);
    into.reserve(old.len() + add.len());
    let (mut i, mut j) = (0, 0);
    while i < old.len() || j < add.len() {
        let c = match (old.get(i), add.get(j)) {
            (Some(a), Some(b)) if a.key() == b.key() => {
                i += 1;
                j += 1;
                let mut c = *a;
                c.add(b);
                c
            }
            (Some(a), Some(b)) if a.key() < b.key() => {
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
        if !c.is_zero() {
            into.push(c);
        }
    }
}

/// Sorts cells and merges duplicates, dropping empty ones.
pub(crate) fn normalize<C: Additive>(cells: &mut Vec<C>) {
    cells.sort_unstable_by_key(|c| c.key());
    let mut out: Vec<C> = Vec::with_capacity(cells.len());
    for c in cells.drain(..) {
        match out.last_mut() {
            Some(l) if l.key() == c.key() => l.add(&c),
            _ => out.push(c),
        }
    }
    out.retain(|c| !c.is_zero());
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

/// The summary's finest width doubles while its finest level holds more than one cell per this
/// many events: the summary then stays a small fraction of the chunks whatever the event rate
/// (a bucket holds enough events that its cells are shared by many of them).
pub const SUMMARY_EVENTS_PER_CELL: u64 = 64;

/// Traces with fewer events keep their finest width (their summary is small anyway).
pub(crate) const SUMMARY_DENSITY_MIN_EVENTS: u64 = 4096;

/// ... but never so far that a finest bucket would hold more than this many events on average:
/// an interval's unaligned ends are counted from the chunks, so this bounds what a slice edge
/// of the microscopic model reads (half a chunk's worth, spread over the streams). A dense
/// trace (a million events a second) keeps its 2 ms buckets. Measured on a 2 h capture at 20 k
/// records/s: 4096 settles at 2^28 ns (summary 3.8 % of the file); 2048 at 2^27 ns (6.6 %, a
/// fifth fewer blocks decompressed per microscopic model); 1024 at 2^26 ns (11.6 %) saves
/// nothing more, since every stream's block at an edge is read anyway.
pub const SUMMARY_MAX_EVENTS_PER_BUCKET: u64 = 2048;

/// How many times a summary whose finest buckets are `2^base` ns should double its finest
/// width (at most `most`): the fewest that leave at most one finest cell per
/// [`SUMMARY_EVENTS_PER_CELL`] events (`cells[k]`: cells stored at level `k`), without making a
/// finest bucket hold more than [`SUMMARY_MAX_EVENTS_PER_BUCKET`] events on average over `span`
/// ns; 0 while the trace has fewer than 4096 events.
pub(crate) fn summary_widening(events: u64, cells: &[u64], base: u32, span: i64, most: u32) -> u32 {
    let fits = |k: u32| {
        cells
            .get(k as usize)
            .is_some_and(|&n| n.saturating_mul(SUMMARY_EVENTS_PER_CELL) <= events)
    };
    if events < SUMMARY_DENSITY_MIN_EVENTS || fits(0) {
        return 0;
    }
    let small_enough = |k: u32| {
        events as f64 * 2f64.powi((base + k) as i32) / span.max(1) as f64
            <= SUMMARY_MAX_EVENTS_PER_BUCKET as f64
    };
    let most = (0..=most)
        .take_while(|&k| small_enough(k))
        .last()
        .unwrap_or(0);
    (1..=most).find(|&k| fits(k)).unwrap_or(most)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// The counted levels are those a drain stores, cell for cell (states across buckets, whose
    /// opens and closes cancel out in wider buckets, included).
    #[test]
    fn cells_per_level_counts_what_a_drain_stores() {
        let mut acc = SummaryAcc::new(4);
        let mut x: u64 = 7;
        for _ in 0..5_000 {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let ts = (x >> 20) as i64 % 100_000;
            let len = (x >> 50) as i64 % 3_000;
            let is_state = x & 1 == 0;
            acc.add(
                ts,
                ts + len,
                is_state,
                (x >> 8) as u32 % 5,
                (x >> 12) as u32 % 3,
            );
        }
        let counted = acc.cells_per_level(12);
        let mut drained = vec![0u64; 12];
        for b in acc.drain_buckets(12) {
            drained[b.level as usize] += b.cells.len() as u64;
        }
        assert_eq!(counted, drained);
        assert!(drained[0] > drained[11], "{drained:?}");
    }

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

    /// `(count, state_ns)` per `(bucket, producer, type)` at width `2^shift`, event by event.
    type Direct = BTreeMap<(i64, u32, u32), (u64, i64)>;

    fn direct(shift: u32, events: &[(i64, i64, bool, u32, u32)]) -> Direct {
        let mut m = Direct::new();
        for &(ts, end, is_state, ty, p) in events {
            m.entry((ts >> shift, p, ty)).or_default().0 += 1;
            if is_state && end > ts {
                for b in (ts >> shift)..=((end - 1) >> shift) {
                    let ns = end.min((b + 1) << shift) - ts.max(b << shift);
                    m.entry((b, p, ty)).or_default().1 += ns;
                }
            }
        }
        m.retain(|_, v| *v != (0, 0));
        m
    }

    /// Integrates the rows of one level (sorted by bucket) over every bucket from the first
    /// row on, as a reader does.
    fn integrate(rows: &[(i64, Vec<RowCell>)], shift: u32) -> Direct {
        let mut m = Direct::new();
        let Some(first) = rows.first().map(|r| r.0) else {
            return m;
        };
        let last = rows.last().map_or(first, |r| r.0);
        let mut open = OpenStates::default();
        let mut k = 0;
        let mut out = Vec::new();
        for b in first..=last {
            let row: &[RowCell] = match rows.get(k) {
                Some((rb, cells)) if *rb == b => {
                    k += 1;
                    cells
                }
                _ => &[],
            };
            out.clear();
            open.step(row, 1 << shift, &mut out);
            for c in &out {
                m.insert((b, c.producer, c.type_id), (c.count, c.state_ns));
            }
        }
        assert!(open.is_empty(), "every state closes");
        m
    }

    fn level_rows(rows: &[BucketCells], level: u32) -> Vec<(i64, Vec<RowCell>)> {
        rows.iter()
            .filter(|r| r.level == level)
            .map(|r| (r.bucket, r.cells.clone()))
            .collect()
    }

    fn random_events(seed: u64, n: usize) -> Vec<(i64, i64, bool, u32, u32)> {
        let mut rng = crate::bench::SplitMix::new(seed);
        (0..n)
            .map(|_| {
                let ts = rng.below(5_000) as i64 - 1_000;
                let len = match rng.below(4) {
                    0 => 1 + rng.below(4_000) as i64,
                    1 => 0,
                    _ => 1 + rng.below(100) as i64,
                };
                let is_state = rng.below(3) != 0;
                (
                    ts,
                    ts + len,
                    is_state,
                    rng.below(2) as u32,
                    rng.below(3) as u32,
                )
            })
            .collect()
    }

    #[test]
    fn a_state_costs_a_cell_where_it_starts_and_one_where_it_ends() {
        let mut acc = SummaryAcc::new(4);
        acc.add(10, 40, true, 1, 2);
        let rows = acc.drain_buckets(1);
        let got: Vec<(i64, u64, i64, i64)> = rows
            .iter()
            .map(|r| {
                (
                    r.bucket,
                    r.cells[0].count,
                    r.cells[0].open,
                    r.cells[0].partial,
                )
            })
            .collect();
        assert_eq!(got, vec![(0, 1, 1, 6), (2, 0, -1, -8)]);
        let direct = direct(4, &[(10, 40, true, 1, 2)]);
        assert_eq!(integrate(&level_rows(&rows, 0), 4), direct);
        // A state lasting a million buckets is still two cells per level.
        let mut acc = SummaryAcc::new(4);
        acc.add(5, 16 << 20, true, 1, 2);
        let rows = acc.drain_buckets(8);
        assert_eq!(rows.iter().map(|r| r.cells.len()).sum::<usize>(), 16);
    }

    /// Every level's rows, integrated, equal the direct computation at that level's width,
    /// also after the finest width was coarsened half way.
    #[test]
    fn integrated_rows_equal_the_direct_computation_at_every_level() {
        for seed in 0..20 {
            let events = random_events(seed, 300);
            let mut acc = SummaryAcc::new(4);
            for &(ts, end, s, ty, p) in &events {
                acc.add(ts, end, s, ty, p);
            }
            let rows = acc.drain_buckets(6);
            for level in 0..6 {
                assert_eq!(
                    integrate(&level_rows(&rows, level), 4 + level),
                    direct(4 + level, &events),
                    "seed {seed} level {level}"
                );
            }
            let mut acc = SummaryAcc::bounded(4, 3, 200);
            for &(ts, end, s, ty, p) in &events[..150] {
                acc.add(ts, end, s, ty, p);
            }
            acc.add(0, 1, false, 0, 0);
            acc.add(20_000, 20_001, false, 0, 0);
            let shift = acc.shift;
            assert!(shift > 4);
            assert_eq!(acc.take_rebase(), shift - 4);
            for &(ts, end, s, ty, p) in &events[150..] {
                acc.add(ts, end, s, ty, p);
            }
            let mut all = events.clone();
            all.push((0, 1, false, 0, 0));
            all.push((20_000, 20_001, false, 0, 0));
            let rows = acc.drain_buckets(3);
            for level in 0..3 {
                assert_eq!(
                    integrate(&level_rows(&rows, level), shift + level),
                    direct(shift + level, &all),
                    "seed {seed} coarsened, level {level}"
                );
            }
        }
    }

    #[test]
    fn merging_into_wider_buckets_equals_accumulating_at_that_width() {
        let events = random_events(77, 400);
        let mut fine = SummaryAcc::new(4);
        let mut wide = SummaryAcc::new(7);
        for &(ts, end, s, ty, p) in &events {
            fine.add(ts, end, s, ty, p);
            wide.add(ts, end, s, ty, p);
        }
        let fine = level_rows(&fine.drain_buckets(1), 0);
        let wide = level_rows(&wide.drain_buckets(1), 0);
        assert_eq!(merge_into_wider(&fine, 4, 7), wide);
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
        let rows = acc.drain_buckets(1);
        let events = [
            (0, 10, true, 1, 2),
            (40, 50, false, 1, 2),
            (60, 200, true, 1, 2),
        ];
        assert_eq!(integrate(&level_rows(&rows, 0), 6), direct(6, &events));
        // The span is kept across drains, and the shift stops at 62 - levels.
        acc.add(-1000, -999, false, 1, 2);
        assert_eq!((acc.take_rebase(), acc.shift), (3, 9));
        let mut capped = SummaryAcc::bounded(4, 56, 1);
        capped.add(0, 1 << 20, true, 1, 2);
        assert_eq!(capped.shift, 6);
        assert_eq!(capped.drain_buckets(1).len(), 2);
    }

    #[test]
    fn rows_round_trip_raw_and_compressed() {
        let mut comp = zstd::bulk::Compressor::new(1).unwrap();
        let mut dec = crate::codec::Decompressor::new().unwrap();
        let small = vec![RowCell {
            producer: 3,
            type_id: 9,
            count: 2,
            open: -1,
            partial: -77,
        }];
        let big: Vec<RowCell> = (0..200u32)
            .map(|i| RowCell {
                producer: i / 4,
                type_id: i % 4,
                count: u64::from(i % 7),
                open: i64::from(i % 3) - 1,
                partial: i64::from(i) * 1000,
            })
            .collect();
        // Mostly distinct values, a few repeated: zstd shrinks the body by about 5 % (320 to
        // 304 bytes), less than an eighth, so it is stored as is.
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        let noisy: Vec<RowCell> = (0..60u32)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let (type_id, count) = if i < 12 {
                    (1, 5)
                } else {
                    ((x % 50) as u32, x >> 40)
                };
                RowCell {
                    producer: i,
                    type_id,
                    count,
                    open: 0,
                    partial: 0,
                }
            })
            .collect();
        for (cells, compressed) in [(small, false), (big, true), (noisy, false)] {
            let blob = encode_cells(&cells, &mut Vec::new(), &mut comp).unwrap();
            let mut head = crate::codec::ByteReader::new(&blob[1..]);
            let (body, stored) = (head.uvarint().unwrap(), head.uvarint().unwrap());
            assert_eq!(stored != body, compressed, "{} cells", cells.len());
            let mut back = Vec::new();
            decode_cells(&blob, &mut dec, &mut back).unwrap();
            assert_eq!(back, cells);
            // Any truncation is an error, never a panic.
            for cut in 0..blob.len() {
                assert!(decode_cells(&blob[..cut], &mut dec, &mut Vec::new()).is_err());
            }
        }
        assert!(decode_cells(&[1, 9, 0], &mut dec, &mut Vec::new()).is_err());
    }
}
