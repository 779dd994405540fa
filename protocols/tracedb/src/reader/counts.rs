//! Exact event counts of many intervals in one pass: the aligned middle of each interval from
//! the summary (each summary row read once), the unaligned ends from the chunks, walked per
//! stream in time order with one cursor per stream that moves on to the next interval when it
//! is still in the same chunk. No merge, no event values, no parameters: what the
//! microscopic model's slice edges need.

use std::collections::HashMap;

use rusqlite::params;

use super::{TraceReader, corrupt};
use crate::codec::ChunkCursor;
use crate::error::{Result, SqlContext};
use crate::filter::{CompiledFilter, Filter};
use crate::model::{TimeRange, Timestamp};
use crate::summary::{self, SummaryCell};
use crate::writer::parse_ids;
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
            if r.start < up {
                parts.push((TimeRange::new(r.start, up), i));
            }
            if down < r.end {
                parts.push((TimeRange::new(down, r.end), i));
            }
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
        self.count_parts(&mut parts, filter, &mut out)?;
        Ok(out)
    }

    /// Adds to `out[i]` the events starting in each `(range, i)` of `parts`, from the chunks.
    fn count_parts(
        &self,
        parts: &mut [(TimeRange, usize)],
        filter: &Filter,
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
        // Every chunk of every stream that may hold an event starting in [?1, ?2): those
        // starting in it and those starting before whose last event reaches it. Their blobs
        // are read through one incremental blob handle: the header and the blocks the walk
        // needs, never the whole chunk. Without id filters the query reads the chunk index
        // alone (the count is then checked against the header only).
        let sql = if with_ids {
            "SELECT c.id, c.stream, c.count, c.types, c.producers
             FROM stream s CROSS JOIN chunk c ON c.stream = s.id
             WHERE c.t_min < ?2 AND c.t_min >= max(?1 - s.max_span, ?3) AND c.t_max >= ?1
             ORDER BY c.stream, c.t_min, c.id"
        } else {
            "SELECT c.id, c.stream
             FROM stream s CROSS JOIN chunk c ON c.stream = s.id
             WHERE c.t_min < ?2 AND c.t_min >= max(?1 - s.max_span, ?3) AND c.t_max >= ?1
             ORDER BY c.stream, c.t_min, c.id"
        };
        let mut st = self.conn.prepare_cached(sql).ctx(p)?;
        let mut slots: FxHashMap<i64, Slot> = FxHashMap::default();
        let mut tally: FxHashMap<(u32, u32), u64> = FxHashMap::default();
        let mut dec = self.decompressor.borrow_mut();
        let mut blob: Option<rusqlite::blob::Blob<'_>> = None;
        for &(r, i) in parts.iter() {
            let mut rows = st.query(params![r.start, r.end, i64::MIN]).ctx(p)?;
            while let Some(row) = rows.next().ctx(p)? {
                let id: i64 = row.get(0).ctx(p)?;
                let stream: i64 = row.get(1).ctx(p)?;
                if !stream_ok.get(&stream).copied().unwrap_or(false) {
                    continue;
                }
                if with_ids {
                    let ids = |k: usize| -> Result<Vec<u32>> {
                        Ok(parse_ids(row.get_ref(k).ctx(p)?.as_str().map_err(|e| {
                            corrupt(p, id, &format!("chunk id list: {e}"))
                        })?))
                    };
                    if !compiled.chunk_ok(&ids(3)?, &ids(4)?) {
                        continue;
                    }
                }
                let slot = slots.entry(stream).or_insert_with(|| Slot {
                    cursor: ChunkCursor::default(),
                    chunk: i64::MIN,
                    passed: Timestamp::MAX,
                    loaded_until: Timestamp::MIN,
                });
                let cur = &mut slot.cursor;
                if slot.chunk == id && slot.passed <= r.start {
                    // The same chunk further on: load the blocks this range also needs, and
                    // go on from where the last range stopped (its blocks stay decoded).
                    if r.end > slot.loaded_until {
                        let handle = self.chunk_blob(&mut blob, id)?;
                        cur.extend_to(handle, r.start, r.end, &mut dec)
                            .map_err(|d| corrupt(p, id, &d))?;
                        slot.loaded_until = cur.loaded_until();
                    }
                    cur.seek(r.start, &mut dec).map_err(|d| corrupt(p, id, d))?;
                } else {
                    slot.chunk = i64::MIN;
                    let handle = self.chunk_blob(&mut blob, id)?;
                    cur.set_ignore_params(true);
                    cur.load_from(id, handle, r.start, r.end, &mut dec, self)
                        .map_err(|d| corrupt(p, id, &d))?;
                    let count: u32 = if with_ids {
                        row.get(2).ctx(p)?
                    } else {
                        cur.len() as u32
                    };
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
                cur.tally_until(r.end, &mut dec, |ty, producer| {
                    if compiled.ids_ok(ty, producer) {
                        *tally.entry((producer, ty)).or_insert(0) += 1;
                    }
                })
                .map_err(|d| corrupt(p, id, d))?;
                slot.passed = r.end;
            }
            flush(&mut tally, &mut out[i]);
        }
        Ok(())
    }
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
