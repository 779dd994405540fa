//! The multi-resolution summary: event counts and state time per producer and type, per time
//! bucket, at power-of-two bucket widths.
//!
//! Level `L` has buckets of `2^(base_shift + L)` ns; bucket `b` of level `L` covers
//! `[b << (base_shift + L), (b + 1) << (base_shift + L))`. An event counts in the bucket of its
//! start; a state adds the part of `[start, end)` inside a bucket to that bucket's `state_ns`.

use crate::fxhash::FxHashMap;
use crate::model::{ProducerId, TimeRange, Timestamp, TypeId};

/// Default finest bucket width: `2^24` ns ≈ 16.8 ms.
pub const DEFAULT_BASE_SHIFT: u32 = 24;

/// Default number of levels: the coarsest bucket is `2^(24 + 16)` ns ≈ 18 minutes.
pub const DEFAULT_LEVELS: u32 = 17;

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
#[derive(Default)]
pub(crate) struct SummaryAcc {
    pub(crate) shift: u32,
    pub(crate) map: FxHashMap<CellKey, CellTotals>,
}

impl SummaryAcc {
    pub(crate) fn new(shift: u32) -> Self {
        Self {
            shift,
            map: FxHashMap::default(),
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
        let s = self.shift;
        let b = ts >> s;
        self.map.entry((b, p, ty)).or_insert((0, 0)).0 += 1;
        if is_state && end > ts {
            let last = (end - 1) >> s;
            for bb in b..=last {
                let lo = ts.max(bb << s);
                let hi = end.min((bb + 1) << s);
                if hi > lo {
                    self.map.entry((bb, p, ty)).or_insert((0, 0)).1 += hi - lo;
                }
            }
        }
    }

    /// All rows `(level, bucket, producer, type, count, state_ns)` for `levels` levels, and clears.
    pub(crate) fn drain_rows(&mut self, levels: u32) -> Vec<(u32, i64, u32, u32, u64, i64)> {
        let mut rows = Vec::with_capacity(self.map.len() * 2);
        let mut cur: Vec<(CellKey, CellTotals)> = self.map.drain().collect();
        for level in 0..levels {
            if level > 0 {
                let mut next: FxHashMap<CellKey, CellTotals> = FxHashMap::default();
                for ((b, p, t), (c, s)) in cur.drain(..) {
                    let e = next.entry((b >> 1, p, t)).or_insert((0, 0));
                    e.0 += c;
                    e.1 += s;
                }
                cur = next.into_iter().collect();
            }
            rows.extend(
                cur.iter()
                    .map(|&((b, p, t), (c, s))| (level, b, p, t, c, s)),
            );
        }
        rows
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
        let rows = acc.drain_rows(1);
        let mut got: Vec<(i64, u64, i64)> = rows.iter().map(|r| (r.1, r.4, r.5)).collect();
        got.sort();
        assert_eq!(got, vec![(0, 1, 6), (1, 0, 16), (2, 0, 8)]);
    }
}
