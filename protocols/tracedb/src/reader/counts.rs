//! Exact event counts, and state time, of many intervals in one pass: the aligned middle of each
//! interval from the summary, the unaligned ends from the chunks, walked per stream in time
//! order with one cursor per stream that moves on to the next interval when it is still in the
//! same chunk. No merge, no event values, no parameters: what the microscopic model's slice
//! edges need.

use std::collections::HashMap;

use rusqlite::params;

use super::{TraceReader, corrupt};
use crate::codec;
use crate::codec::ChunkCursor;
use crate::error::{Result, SqlContext};
use crate::filter::{CompiledFilter, Filter};
use crate::model::{EventCategory, TimeRange, Timestamp};
use crate::schema::parse_ids;
use crate::summary::{self, SummaryCell};
use rustc_hash::FxHashMap;

/// A stream's cursor between intervals: the chunk it holds, the time before which it has
/// passed every event (it sits on the first event at or after that time) and the time from
/// which its blocks were not loaded.
struct Slot {
    cursor: ChunkCursor,
    chunk: i64,
    passed: Timestamp,
    loaded_until: Timestamp,
}

impl TraceReader {
    /// For each of `ranges`, the number of events starting in it per `(producer, type)`
    /// (`state_ns` left at zero), sorted like a summary bucket's cells.
    ///
    /// Equal to counting the events of [`Self::events`] range by range, but far cheaper for
    /// many short ranges: the part of each range aligned to the finest summary buckets comes
    /// from the summary, and only its unaligned ends are read from the chunks, one stream at
    /// a time. Filters with parameter conditions are counted event by event.
    pub fn counts_in_ranges(
        &self,
        ranges: &[TimeRange],
        filter: &Filter,
    ) -> Result<Vec<Vec<SummaryCell>>> {
        let _snapshot = self.snapshot()?;
        let mut out: Vec<Vec<SummaryCell>> = vec![Vec::new(); ranges.len()];
        if filter.condition.is_some() {
            for (o, &r) in out.iter_mut().zip(ranges) {
                let mut tally: FxHashMap<(u32, u32), u64> = FxHashMap::default();
                if !r.is_empty() {
                    for e in self.events(r, filter)? {
                        let e = e?;
                        *tally.entry((e.producer, e.type_id)).or_insert(0) += 1;
                    }
                }
                flush(&mut tally, o);
            }
            return Ok(out);
        }
        // The summary cannot tell CPUs apart: with a CPU list, whole ranges come from chunks.
        let tf = if filter.cpus.is_none() {
            self.summary_filter(filter)?
        } else {
            None
        };
        let base = self.base_shift.get();
        let levels = self.levels.get();
        let w = 1i64 << base;
        let mut pieces: Vec<(u32, i64, usize)> = Vec::new();
        let mut parts: Vec<(TimeRange, usize)> = Vec::new();
        for (i, &r) in ranges.iter().enumerate() {
            if r.is_empty() {
                continue;
            }
            let (up, down) = summary::aligned_inside(r, w);
            if tf.is_none() || r.start == i64::MIN || r.end == i64::MAX || up >= down {
                parts.push((r, i));
                continue;
            }
            push_ends(&mut parts, r, (up, down), i);
            pieces.extend(
                summary::dyadic_pieces(up, down, base, levels)
                    .into_iter()
                    .map(|(level, bucket)| (level, bucket, i)),
            );
        }
        if let Some(tf) = &tf {
            // Each summary row once, added to every range it is a piece of.
            pieces.sort_unstable();
            let mut cells = Vec::new();
            let mut k = 0;
            while k < pieces.len() {
                let (level, bucket, _) = pieces[k];
                let j = k + pieces[k..]
                    .iter()
                    .take_while(|p| p.0 == level && p.1 == bucket)
                    .count();
                cells.clear();
                self.summary_rows(level, bucket, bucket, tf, |_, c| {
                    if c.count != 0 {
                        cells.push(SummaryCell {
                            producer: c.producer,
                            type_id: c.type_id,
                            count: c.count,
                            state_ns: 0,
                        });
                    }
                })?;
                for p in &pieces[k..j] {
                    summary::merge_cells(&mut out[p.2], &cells);
                }
                k = j;
            }
        }
        self.walk_parts(&mut parts, filter, Walk::Counts, &mut out)?;
        Ok(out)
    }

    /// For each of `ranges`, the events starting in it and the nanoseconds of states inside it
    /// per `(producer, type)`, sorted like a summary bucket's cells: what [`Self::summary`] gives
    /// for each range asked as one bucket, for many short ranges at once.
    ///
    /// The part of each range aligned to the finest summary buckets comes from the summary (the
    /// states open at its start carried on from the range before when the ranges come in time
    /// order); its unaligned ends from the chunks, one stream at a time, each stream's walk
    /// starting at most its duration class's longest state before the end it reads. Filters the
    /// summary cannot answer (CPUs, parameter conditions) are read range by range from the events.
    pub fn cells_in_ranges(
        &self,
        ranges: &[TimeRange],
        filter: &Filter,
    ) -> Result<Vec<Vec<SummaryCell>>> {
        let _snapshot = self.snapshot()?;
        let mut out: Vec<Vec<SummaryCell>> = vec![Vec::new(); ranges.len()];
        let Some(tf) = self.summary_filter(filter)? else {
            for (o, &r) in out.iter_mut().zip(ranges) {
                if !r.is_empty() {
                    *o = self.cells_from_chunks(r, filter)?;
                }
            }
            return Ok(out);
        };
        let w = 1i64 << self.base_shift.get();
        let mut parts: Vec<(TimeRange, usize)> = Vec::new();
        for (i, &r) in ranges.iter().enumerate() {
            if r.is_empty() {
                continue;
            }
            if r.start == i64::MIN || r.end == i64::MAX {
                out[i] = self.cells_from_chunks(r, filter)?;
                continue;
            }
            let (up, down) = summary::aligned_inside(r, w);
            if up >= down {
                parts.push((r, i));
                continue;
            }
            push_ends(&mut parts, r, (up, down), i);
            self.aligned_cells(up, down, &tf, &mut out[i])?;
        }
        self.walk_parts(&mut parts, filter, Walk::Cells, &mut out)?;
        for o in &mut out {
            summary::normalize(o);
        }
        Ok(out)
    }

    /// Adds to `out[i]` what `walk` reads of each `(range, i)` of `parts` from the chunks: the
    /// events starting in the range, and with [`Walk::Cells`] the state time inside it.
    fn walk_parts(
        &self,
        parts: &mut [(TimeRange, usize)],
        filter: &Filter,
        walk: Walk,
        out: &mut [Vec<SummaryCell>],
    ) -> Result<()> {
        if parts.is_empty() {
            return Ok(());
        }
        parts.sort_by_key(|p| (p.0.start, p.0.end));
        let compiled = CompiledFilter::new(filter, &HashMap::new());
        let with_ids = compiled.needs_ids();
        let stream_ok: FxHashMap<i64, bool> = self
            .streams_cached()?
            .iter()
            .map(|s| (s.id, compiled.stream_ok(s.category, s.cpu)))
            .collect();
        let p = &self.path;
        // Every chunk of every stream that may hold an event starting in [?1, ?2) (or, for state
        // time, overlapping it): those starting in it and those starting before whose last event
        // (last end) reaches it. Their blobs are read through one incremental blob handle: the
        // header and the blocks the walk needs, never the whole chunk. Without id filters the
        // query reads the chunk index alone (the count is then checked against the header only).
        let reach = match walk {
            Walk::Counts => "t_max",
            Walk::Cells => "end_max",
        };
        let columns = if with_ids {
            "c.id, c.stream, c.count, c.types, c.producers"
        } else {
            "c.id, c.stream"
        };
        let sql = format!(
            "SELECT {columns}
             FROM stream s CROSS JOIN chunk c ON c.stream = s.id
             WHERE c.t_min < ?2 AND c.t_min >= max(?1 - s.max_span, ?3) AND c.{reach} >= ?1
             ORDER BY c.stream, c.t_min, c.id"
        );
        let mut st = self.conn.prepare_cached(&sql).ctx(p)?;
        // First every (part, chunk) the walk visits, then the visits stream by stream: one
        // stream's chunks, dictionary and decompression state stay in cache for all its parts
        // instead of the streams taking turns at every part (each part's chunks of every
        // stream, as the query returns them, made every block decompression a cold start).
        let mut visits: Vec<Visit> = Vec::new();
        for (k, &(r, _)) in parts.iter().enumerate() {
            let mut rows = st.query(params![r.start, r.end, i64::MIN]).ctx(p)?;
            while let Some(row) = rows.next().ctx(p)? {
                let id: i64 = row.get(0).ctx(p)?;
                let stream: i64 = row.get(1).ctx(p)?;
                if !stream_ok.get(&stream).copied().unwrap_or(false) {
                    continue;
                }
                let mut count = None;
                if with_ids {
                    let ids = |k: usize| -> Result<Vec<u32>> {
                        Ok(parse_ids(row.get_ref(k).ctx(p)?.as_str().map_err(|e| {
                            corrupt(p, id, &format!("chunk id list: {e}"))
                        })?))
                    };
                    if !compiled.chunk_ok(&ids(3)?, &ids(4)?) {
                        continue;
                    }
                    count = Some(row.get::<_, u32>(2).ctx(p)?);
                }
                visits.push(Visit {
                    stream,
                    part: k,
                    chunk: id,
                    count,
                });
            }
        }
        // Stable: within a stream, parts in time order and each part's chunks as queried.
        visits.sort_by_key(|v| v.stream);
        let ids = |table: &str| -> Result<Vec<u32>> {
            let mut st = self
                .conn
                .prepare_cached(&format!("SELECT id FROM {table} ORDER BY id"))
                .ctx(p)?;
            let rows = st.query_map([], |r| r.get::<_, u32>(0)).ctx(p)?;
            rows.collect::<rusqlite::Result<Vec<u32>>>().ctx(p)
        };
        let (producers, types) = (
            IdIndex::new(ids("producer")?),
            IdIndex::new(ids("event_type")?),
        );
        let mut tally = PartTally::new(parts.len(), producers, types, walk == Walk::Cells);
        let mut dec = self.decompressor.borrow_mut();
        let mut blob: Option<rusqlite::blob::Blob<'_>> = None;
        let mut slot = Slot {
            cursor: ChunkCursor::default(),
            chunk: i64::MIN,
            passed: Timestamp::MAX,
            loaded_until: Timestamp::MIN,
        };
        for (n, v) in visits.iter().enumerate() {
            let r = parts[v.part].0;
            let id = v.chunk;
            if n > 0 && visits[n - 1].stream != v.stream {
                slot.chunk = i64::MIN;
            }
            // Where the walk starts: a state overlapping the range starts at most its class's
            // longest duration before it (a class without a bound: the chunk's start).
            let from = match (walk, codec::split_stream(v.stream)) {
                (Walk::Counts, _)
                | (_, Some((EventCategory::Punctual | EventCategory::Variable, _, _))) => r.start,
                (Walk::Cells, Some((_, class, _))) => {
                    codec::longest_of_class(class).map_or(i64::MIN, |d| r.start.saturating_sub(d))
                }
                (Walk::Cells, None) => i64::MIN,
            };
            let cur = &mut slot.cursor;
            if slot.chunk == id && slot.passed <= from {
                // The same chunk further on: load the blocks this range also needs, and go on
                // from where the last range stopped (its blocks stay decoded).
                if r.end > slot.loaded_until {
                    let handle = self.chunk_blob(&mut blob, id)?;
                    cur.extend_to(handle, from, r.end, &mut dec)
                        .map_err(|d| corrupt(p, id, &d))?;
                    slot.loaded_until = cur.loaded_until();
                }
                cur.seek(from, &mut dec).map_err(|d| corrupt(p, id, d))?;
            } else {
                slot.chunk = i64::MIN;
                let handle = self.chunk_blob(&mut blob, id)?;
                cur.set_ignore_params(true);
                cur.load_from(id, handle, from, r.end, &mut dec, self)
                    .map_err(|d| corrupt(p, id, &d))?;
                let count = v.count.unwrap_or(cur.len() as u32);
                if cur.len() != count as usize {
                    return Err(corrupt(
                        p,
                        id,
                        &format!("{} events in the chunk, row says {count}", cur.len()),
                    ));
                }
                slot.chunk = id;
                slot.loaded_until = cur.loaded_until();
            }
            match walk {
                Walk::Counts => cur.tally_until(r.end, &mut dec, |ty, producer| {
                    if compiled.ids_ok(ty, producer) {
                        tally.add(v.part, producer, ty, 1, 0);
                    }
                }),
                Walk::Cells => {
                    let states = cur.category() == EventCategory::State;
                    let mut walked = Ok(());
                    while cur.valid() && cur.ts < r.end {
                        let (ts, ty, producer) = (cur.ts, cur.ty, cur.producer);
                        let count = u64::from(ts >= r.start);
                        let ns = if states { r.overlap(ts, cur.end()) } else { 0 };
                        if (count != 0 || ns != 0) && compiled.ids_ok(ty, producer) {
                            tally.add(v.part, producer, ty, count, ns);
                        }
                        walked = cur.advance(&mut dec);
                        if walked.is_err() {
                            break;
                        }
                    }
                    walked
                }
            }
            .map_err(|d| corrupt(p, id, d))?;
            slot.passed = r.end;
        }
        let mut cells = Vec::new();
        for (k, &(_, i)) in parts.iter().enumerate() {
            tally.cells_of(k, &mut cells);
            summary::merge_cells(&mut out[i], &cells);
        }
        Ok(())
    }
}

/// Adds the unaligned ends of range `i`, `r` around its aligned middle `[up, down)`, to `parts`.
fn push_ends(parts: &mut Vec<(TimeRange, usize)>, r: TimeRange, (up, down): (i64, i64), i: usize) {
    if r.start < up {
        parts.push((TimeRange::new(r.start, up), i));
    }
    if down < r.end {
        parts.push((TimeRange::new(down, r.end), i));
    }
}

/// What [`TraceReader::walk_parts`] reads of each part.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Walk {
    /// The events starting in it.
    Counts,
    /// The events starting in it and the state time inside it.
    Cells,
}

/// Positions of a table's ids (`0..n` in id order): a direct lookup for small ids, a binary
/// search beyond (user-defined event types have ids from 100 000 on).
struct IdIndex {
    ids: Vec<u32>,
    /// `small[id]` is the position of `id` plus one, or 0 when the table does not hold it.
    small: Vec<u32>,
}

impl IdIndex {
    const SMALL: u32 = 4096;

    fn new(ids: Vec<u32>) -> Self {
        let below = ids.iter().filter(|&&i| i < Self::SMALL).max();
        let mut small = vec![0; below.map_or(0, |&m| m as usize + 1)];
        for (k, &id) in ids.iter().enumerate() {
            if id < Self::SMALL {
                small[id as usize] = k as u32 + 1;
            }
        }
        Self { ids, small }
    }

    #[inline]
    fn position(&self, id: u32) -> Option<usize> {
        match self.small.get(id as usize) {
            Some(&k) => k.checked_sub(1).map(|k| k as usize),
            None if id < Self::SMALL => None,
            None => self.ids.binary_search(&id).ok(),
        }
    }
}

/// Event counts (and state time) per part and `(producer, type)`: a dense table over the trace's
/// producers and types (an addition per event, no hashing) when it is small enough, a hash map for
/// the rest (and for ids the tables do not hold).
struct PartTally {
    producers: IdIndex,
    types: IdIndex,
    /// `(part · producers + producer) · types + type`, empty when too large.
    dense: Vec<u64>,
    /// State nanoseconds, laid out as `dense` (empty when only counting).
    dense_ns: Vec<i64>,
    sparse: FxHashMap<PartPair, (u64, i64)>,
    /// The sparse cells sorted by part, once the walk is done, and the next one to hand out.
    sorted: Vec<(PartPair, (u64, i64))>,
    next: usize,
}

/// `(part, producer, type)`.
type PartPair = (usize, u32, u32);

/// Largest dense table [`PartTally`] allocates (entries of 8 bytes).
const DENSE_TALLY_MAX: usize = 1 << 21;

impl PartTally {
    fn new(parts: usize, producers: IdIndex, types: IdIndex, with_ns: bool) -> Self {
        let size = parts
            .saturating_mul(producers.ids.len())
            .saturating_mul(types.ids.len());
        let dense = size <= DENSE_TALLY_MAX;
        Self {
            producers,
            types,
            dense: if dense { vec![0; size] } else { Vec::new() },
            dense_ns: if dense && with_ns {
                vec![0; size]
            } else {
                Vec::new()
            },
            sparse: FxHashMap::default(),
            sorted: Vec::new(),
            next: 0,
        }
    }

    #[inline]
    fn add(&mut self, part: usize, producer: u32, ty: u32, count: u64, ns: i64) {
        if !self.dense.is_empty()
            && let (Some(pr), Some(t)) =
                (self.producers.position(producer), self.types.position(ty))
        {
            let (np, nt) = (self.producers.ids.len(), self.types.ids.len());
            let k = (part * np + pr) * nt + t;
            self.dense[k] += count;
            if let Some(v) = self.dense_ns.get_mut(k) {
                *v += ns;
            }
            return;
        }
        let e = self.sparse.entry((part, producer, ty)).or_insert((0, 0));
        e.0 += count;
        e.1 += ns;
    }

    /// The cells of each part in turn (`part` increasing from 0) sorted by `(producer, type)`,
    /// into `out` (cleared).
    fn cells_of(&mut self, part: usize, out: &mut Vec<SummaryCell>) {
        out.clear();
        if !self.dense.is_empty() {
            let (np, nt) = (self.producers.ids.len(), self.types.ids.len());
            let at = part * np * nt;
            for (pr, &producer) in self.producers.ids.iter().enumerate() {
                for (t, &type_id) in self.types.ids.iter().enumerate() {
                    let k = at + pr * nt + t;
                    let (count, state_ns) = (self.dense[k], self.dense_ns.get(k).copied());
                    if count != 0 || state_ns.is_some_and(|n| n != 0) {
                        out.push(SummaryCell {
                            producer,
                            type_id,
                            count,
                            state_ns: state_ns.unwrap_or(0),
                        });
                    }
                }
            }
        }
        if part == 0 && !self.sparse.is_empty() {
            self.sorted = self.sparse.drain().collect();
            self.sorted.sort_unstable_by_key(|e| e.0);
            self.next = 0;
        }
        let before = out.len();
        while let Some(&((k, producer, type_id), (count, state_ns))) = self.sorted.get(self.next) {
            if k > part {
                break;
            }
            self.next += 1;
            out.push(SummaryCell {
                producer,
                type_id,
                count,
                state_ns,
            });
        }
        if out.len() > before && before > 0 {
            out.sort_unstable_by_key(|c| (c.producer, c.type_id));
        }
    }
}

/// A chunk the walk reads for one part: `count` is the chunk row's event count when the query
/// read it (checked against the chunk's header).
struct Visit {
    stream: i64,
    part: usize,
    chunk: i64,
    count: Option<u32>,
}

/// Adds a tally to sorted cells, keeping them sorted.
fn flush(tally: &mut FxHashMap<(u32, u32), u64>, into: &mut Vec<SummaryCell>) {
    if tally.is_empty() {
        return;
    }
    let mut cells: Vec<SummaryCell> = tally
        .drain()
        .map(|((producer, type_id), count)| SummaryCell {
            producer,
            type_id,
            count,
            state_ns: 0,
        })
        .collect();
    cells.sort_unstable_by_key(|c| (c.producer, c.type_id));
    summary::merge_cells(into, &cells);
}

#[cfg(test)]
mod tests {
    use super::{IdIndex, PartTally};
    use crate::summary::SummaryCell;

    #[test]
    fn id_positions_small_and_large() {
        let ix = IdIndex::new(vec![0, 3, 4095, 4096, 100_000, 100_003]);
        let got: Vec<Option<usize>> = [0, 1, 3, 4095, 4096, 4097, 100_000, 100_003, 7]
            .iter()
            .map(|&id| ix.position(id))
            .collect();
        assert_eq!(
            got,
            [
                Some(0),
                None,
                Some(1),
                Some(2),
                Some(3),
                None,
                Some(4),
                Some(5),
                None
            ]
        );
        assert_eq!(IdIndex::new(Vec::new()).position(0), None);
    }

    /// The dense table, the hash map alone and a mix (ids the tables do not hold) count the
    /// same cells (counts and state time), sorted, part by part.
    #[test]
    fn dense_and_sparse_tallies_agree() {
        let producers = || IdIndex::new(vec![1, 2, 5, 9]);
        let types = || IdIndex::new(vec![0, 7, 100_001]);
        let parts = 5;
        let mut dense = PartTally::new(parts, producers(), types(), true);
        let mut sparse = PartTally::new(parts, producers(), types(), true);
        sparse.dense = Vec::new();
        sparse.dense_ns = Vec::new();
        let mut want = std::collections::BTreeMap::new();
        let mut x = 0x2545_f491_u64;
        for _ in 0..2_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let part = (x % parts as u64) as usize;
            // Mostly ids the tables hold, some they do not (producer 4, type 3).
            let producer = [1, 2, 5, 9, 4][(x >> 8) as usize % 5];
            let ty = [0, 7, 100_001, 3][(x >> 16) as usize % 4];
            // A state's time without its start (it began in an earlier part) counts no event.
            let count = u64::from(!x.is_multiple_of(3));
            let ns = (x >> 24) as i64 % 1000 + i64::from(count == 0);
            dense.add(part, producer, ty, count, ns);
            sparse.add(part, producer, ty, count, ns);
            let w = want.entry((part, producer, ty)).or_insert((0u64, 0i64));
            w.0 += count;
            w.1 += ns;
        }
        assert!(!dense.sparse.is_empty(), "the mix reaches the hash map");
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for part in 0..parts {
            dense.cells_of(part, &mut a);
            sparse.cells_of(part, &mut b);
            let expect: Vec<SummaryCell> = want
                .range((part, 0, 0)..(part + 1, 0, 0))
                .filter(|&(_, &(count, ns))| count != 0 || ns != 0)
                .map(
                    |(&(_, producer, type_id), &(count, state_ns))| SummaryCell {
                        producer,
                        type_id,
                        count,
                        state_ns,
                    },
                )
                .collect();
            assert_eq!(a, expect, "dense, part {part}");
            assert_eq!(b, expect, "sparse, part {part}");
        }
    }
}
