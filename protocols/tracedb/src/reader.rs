//! Read access to one trace file, also while a writer is still writing it.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::codec::{self, ChunkCursor, DecodedChunk, MAX_CHUNK_EVENTS};
use crate::error::{Result, SqlContext, StoreError};
use crate::filter::{CompiledFilter, Filter};
use crate::model::{
    EventCategory, EventId, EventType, IngestStat, LossRecord, ParamDef, ParamType, ParamValue,
    Producer, ProducerKind, StoredEvent, TimeRange, Timestamp, TraceFile, TraceHeader, TraceInfo,
    TypeId,
};
use crate::schema::parse_ids;
use crate::schema::{self, TRACE_APPLICATION_ID};
use crate::summary::{self, OpenStates, Resolution, RowCell, Summary, SummaryBucket, SummaryCell};

mod counts;

/// How many chunk rows one metadata page fetches.
const PAGE: i64 = 16;

/// A stream of the trace (see `SCHEMA.md`, table `stream`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamInfo {
    /// Stream id.
    pub id: i64,
    /// Category of its events.
    pub category: EventCategory,
    /// CPU of its events.
    pub cpu: Option<u16>,
    /// Largest `end_max - t_min` of its chunks: how far back a query must look.
    pub max_span: i64,
    /// Committed chunks.
    pub chunk_count: i64,
    /// Committed events.
    pub event_count: i64,
}

/// Metadata of a stored chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkInfo {
    /// `chunk.id`.
    pub id: i64,
    /// Its stream.
    pub stream: i64,
    /// Earliest start.
    pub t_min: Timestamp,
    /// Latest start.
    pub t_max: Timestamp,
    /// Latest end (end of its longest state).
    pub end_max: Timestamp,
    /// Events.
    pub count: u32,
    /// Types present.
    pub types: Vec<u32>,
    /// Producers present.
    pub producers: Vec<u32>,
}

fn chunk_info(row: &Row<'_>) -> rusqlite::Result<ChunkInfo> {
    chunk_info_with(row, true)
}

/// A chunk row; its type and producer lists are parsed only when `with_ids` (left empty
/// otherwise, for filters that do not look at them).
fn chunk_info_with(row: &Row<'_>, with_ids: bool) -> rusqlite::Result<ChunkInfo> {
    let ids = |i: usize| -> rusqlite::Result<Vec<u32>> {
        if with_ids {
            Ok(parse_ids(row.get_ref(i)?.as_str()?))
        } else {
            Ok(Vec::new())
        }
    };
    Ok(ChunkInfo {
        id: row.get(0)?,
        stream: row.get(1)?,
        t_min: row.get(2)?,
        t_max: row.get(3)?,
        end_max: row.get(4)?,
        count: row.get(5)?,
        types: ids(6)?,
        producers: ids(7)?,
    })
}

const CHUNK_COLS: &str = "id, stream, t_min, t_max, end_max, count, types, producers";

/// A read-only view of one trace file. Opened while a writer writes, it sees every commit
/// made so far, and each query sees one consistent snapshot.
pub struct TraceReader {
    conn: Connection,
    path: PathBuf,
    decompressor: RefCell<crate::codec::Decompressor>,
    /// The stream dictionaries chunks named so far, digested once.
    dictionaries: RefCell<rustc_hash::FxHashMap<u64, codec::ReadDictionary>>,
    /// The summary's finest bucket exponent and level count. The writer coarsens the finest bucket
    /// when a trace grows long, so these are re-read whenever another connection has committed.
    base_shift: Cell<u32>,
    levels: Cell<u32>,
    /// `PRAGMA data_version` under which `base_shift` and `levels` were read.
    levels_version: Cell<i64>,
    snapshot_depth: Cell<u32>,
    /// `PRAGMA data_version` of the outermost open snapshot: it changes whenever another
    /// connection commits, so what was read under one value stays valid under the same value.
    snapshot_version: Cell<i64>,
    /// The stream list, valid for the snapshot version it was read under.
    streams_cache: RefCell<Option<(i64, Vec<StreamInfo>)>>,
    /// A second reader of the file for helper threads, kept warm between uses.
    sibling: RefCell<Option<Box<TraceReader>>>,
    /// The states open at the last instant the summary was integrated to, so that queries
    /// moving forward in time continue from there instead of from the trace start.
    open_cache: RefCell<Option<OpenCache>>,
}

/// The open states at `at` under one snapshot, summary layout and filter.
struct OpenCache {
    version: i64,
    layout: (u32, u32),
    filter: SummaryFilter,
    at: Timestamp,
    open: OpenStates,
}

/// Keeps one read transaction open: every query made through the reader while it lives sees
/// the same committed state of the file. Iterators hold one, so an iteration never mixes two
/// commits of a live writer.
pub struct Snapshot<'r> {
    reader: &'r TraceReader,
}

impl Drop for Snapshot<'_> {
    fn drop(&mut self) {
        let d = self.reader.snapshot_depth.get().saturating_sub(1);
        self.reader.snapshot_depth.set(d);
        if d == 0 {
            // Nothing to roll back in a read transaction; an error only means it already ended.
            let _ = self
                .reader
                .conn
                .prepare_cached("COMMIT")
                .and_then(|mut st| st.execute([]));
        }
    }
}

impl std::fmt::Debug for TraceReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceReader")
            .field("path", &self.path)
            .finish()
    }
}

/// Whether an iteration returns events starting in the interval or events overlapping it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Starts,
    Overlaps,
}

impl TraceReader {
    /// Opens a trace file read-only; fails with [`StoreError::SchemaVersion`] on another version.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let conn = schema::open(&path, "trace", TRACE_APPLICATION_ID, true)?;
        Self::from_connection(conn, path)
    }

    pub(crate) fn from_connection(conn: Connection, path: PathBuf) -> Result<Self> {
        // Chunk blobs span several pages: map the file instead of copying each page through
        // a read() call, and keep a larger page cache for the chunk indexes. Both are hints
        // (SQLite caps the map at its compile-time limit); failing to set them is harmless.
        let _ = conn.pragma_update(None, "mmap_size", 1i64 << 31);
        let _ = conn.pragma_update(None, "cache_size", -16384i64);
        // The query planner stability guarantee: the chunk queries bind time bounds (and a
        // LIMIT) that the bundled SQLite (built with STAT4) would otherwise mark as
        // plan-relevant, re-preparing the cached statement whenever they change, i.e. on
        // every read. The plans here come from the indexes alone, so this changes none.
        let _ = conn.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
            true,
        );
        let (base_shift, levels): (u32, u32) = conn
            .query_row(
                "SELECT summary_base_shift, summary_levels FROM trace_info WHERE id = 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .ctx(&path)?
            .ok_or_else(|| StoreError::NotAStore {
                path: path.clone(),
                expected_kind: "trace",
                detail: "trace_info has no row".into(),
            })?;
        if levels == 0 || base_shift + levels > 62 {
            return Err(StoreError::InvalidValue {
                path,
                detail: format!("summary base shift {base_shift} with {levels} levels"),
            });
        }
        let decompressor = crate::codec::Decompressor::new().map_err(|source| StoreError::Io {
            path: path.clone(),
            source,
        })?;
        Ok(Self {
            conn,
            path,
            decompressor: RefCell::new(decompressor),
            dictionaries: RefCell::default(),
            base_shift: Cell::new(base_shift),
            levels: Cell::new(levels),
            levels_version: Cell::new(i64::MIN),
            snapshot_depth: Cell::new(0),
            snapshot_version: Cell::new(0),
            streams_cache: RefCell::new(None),
            sibling: RefCell::new(None),
            open_cache: RefCell::new(None),
        })
    }

    /// A second reader of the same file, for a helper thread (a reader is used by one thread
    /// at a time). The one given back with [`Self::put_sibling`] is reused, with its page
    /// cache, file mapping and prepared statements still warm; otherwise the file is opened
    /// again.
    pub fn take_sibling(&self) -> Result<TraceReader> {
        match self.sibling.borrow_mut().take() {
            Some(r) => Ok(*r),
            None => TraceReader::open(&self.path),
        }
    }

    /// Gives back a reader taken with [`Self::take_sibling`] for the next use.
    pub fn put_sibling(&self, sibling: TraceReader) {
        *self.sibling.borrow_mut() = Some(Box::new(sibling));
    }

    /// Pins the current committed state until the returned guard is dropped (nestable).
    pub fn snapshot(&self) -> Result<Snapshot<'_>> {
        let d = self.snapshot_depth.get();
        if d == 0 {
            let p = &self.path;
            self.conn
                .prepare_cached("BEGIN")
                .and_then(|mut st| st.execute([]))
                .ctx(p)?;
            // A deferred transaction takes its snapshot at the first read; reading the data
            // version starts it and tells whether another connection committed since the
            // cached metadata was read.
            let version = self
                .conn
                .prepare_cached("PRAGMA data_version")
                .and_then(|mut st| st.query_row([], |r| r.get::<_, i64>(0)));
            match version {
                Ok(v) => {
                    self.snapshot_version.set(v);
                    if v != self.levels_version.get() {
                        self.refresh_levels(v)?;
                    }
                }
                Err(e) => {
                    let _ = self
                        .conn
                        .prepare_cached("COMMIT")
                        .and_then(|mut st| st.execute([]));
                    return Err(e).ctx(p);
                }
            }
        }
        self.snapshot_depth.set(d + 1);
        Ok(Snapshot { reader: self })
    }

    /// Re-reads the summary's level layout (inside the snapshot being opened), which the writer changes when
    /// a growing trace outgrows its finest buckets.
    fn refresh_levels(&self, version: i64) -> Result<()> {
        let layout = self
            .conn
            .prepare_cached(
                "SELECT summary_base_shift, summary_levels FROM trace_info WHERE id = 1",
            )
            .and_then(|mut st| {
                st.query_row([], |r| Ok((r.get::<_, u32>(0)?, r.get::<_, u32>(1)?)))
            });
        match layout {
            Ok((base, levels)) if levels > 0 && base + levels <= 62 => {
                self.base_shift.set(base);
                self.levels.set(levels);
                self.levels_version.set(version);
                Ok(())
            }
            Ok((base, levels)) => {
                let _ = self
                    .conn
                    .prepare_cached("COMMIT")
                    .and_then(|mut st| st.execute([]));
                Err(self.invalid(format!("summary base shift {base} with {levels} levels")))
            }
            Err(e) => {
                let _ = self
                    .conn
                    .prepare_cached("COMMIT")
                    .and_then(|mut st| st.execute([]));
                Err(e).ctx(&self.path)
            }
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The underlying connection (read-only), for plain SQL on the non-event tables.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    fn invalid(&self, detail: String) -> StoreError {
        StoreError::InvalidValue {
            path: self.path.clone(),
            detail,
        }
    }

    /// The trace's metadata and what has been committed so far.
    pub fn info(&self) -> Result<TraceInfo> {
        let p = &self.path;
        let mut info = self
            .conn
            .query_row(
                "SELECT trace_type, board, soc, os, application, cpus, tick_rate_hz, start_unix_ns,
                        description, processed, t_min, t_max, event_count, complete, finished
                 FROM trace_info WHERE id = 1",
                [],
                |r| {
                    Ok(TraceInfo {
                        meta: TraceHeader {
                            trace_type: r.get(0)?,
                            board: r.get(1)?,
                            soc: r.get(2)?,
                            os: r.get(3)?,
                            application: r.get(4)?,
                            cpus: r.get(5)?,
                            tick_rate_hz: r.get::<_, i64>(6)? as u64,
                            start_unix_ns: r.get(7)?,
                            description: r.get(8)?,
                            processed: r.get(9)?,
                            params: Vec::new(),
                        },
                        t_min: r.get(10)?,
                        t_max: r.get(11)?,
                        event_count: r.get::<_, i64>(12)? as u64,
                        complete: r.get(13)?,
                        finished: r.get(14)?,
                    })
                },
            )
            .ctx(p)?;
        let rows = self.query_all(
            "SELECT name, type, value FROM trace_param ORDER BY name",
            |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                ))
            },
        )?;
        for (name, ty, value) in rows {
            let ty = ParamType::from_name(&ty)
                .ok_or_else(|| self.invalid(format!("trace parameter type {ty:?}")))?;
            let v = ParamValue::parse(ty, &value)
                .ok_or_else(|| self.invalid(format!("trace parameter {name} = {value:?}")))?;
            info.meta.params.push((name, v));
        }
        Ok(info)
    }

    /// All event types with their parameter types.
    pub fn event_types(&self) -> Result<Vec<EventType>> {
        let p = &self.path;
        let mut types: Vec<EventType> = Vec::new();
        let rows = self.query_all(
            "SELECT id, name, category FROM event_type ORDER BY id",
            |r| {
                Ok((
                    r.get::<_, u32>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, u8>(2)?,
                ))
            },
        )?;
        for (id, name, cat) in rows {
            let category = EventCategory::from_code(cat)
                .ok_or_else(|| self.invalid(format!("event type {id} has category {cat}")))?;
            types.push(EventType {
                id,
                name,
                category,
                params: Vec::new(),
            });
        }
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT event_type_id, name, type FROM event_param_type ORDER BY event_type_id, position",
            )
            .ctx(p)?;
        let rows = st
            .query_map([], |r| {
                Ok((
                    r.get::<_, u32>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                ))
            })
            .ctx(p)?;
        for row in rows {
            let (tid, name, ty) = row.ctx(p)?;
            let ty = ParamType::from_name(&ty)
                .ok_or_else(|| self.invalid(format!("parameter {name} has type {ty:?}")))?;
            if let Ok(i) = types.binary_search_by_key(&tid, |t| t.id) {
                types[i].params.push(ParamDef { name, ty });
            }
        }
        Ok(types)
    }

    pub(crate) fn type_map(&self) -> Result<HashMap<TypeId, EventType>> {
        Ok(self.event_types()?.into_iter().map(|t| (t.id, t)).collect())
    }

    /// The event type named `name`.
    pub fn event_type_by_name(&self, name: &str) -> Result<Option<EventType>> {
        Ok(self.event_types()?.into_iter().find(|t| t.name == name))
    }

    fn producers_where(&self, clause: &str, args: impl rusqlite::Params) -> Result<Vec<Producer>> {
        let p = &self.path;
        let sql = format!(
            "SELECT id, parent_id, kind, local_id, name FROM producer {clause} ORDER BY id"
        );
        let mut st = self.conn.prepare_cached(&sql).ctx(p)?;
        let rows = st
            .query_map(args, |r| {
                Ok(Producer {
                    id: r.get(0)?,
                    parent: r.get(1)?,
                    kind: ProducerKind::from_name(&r.get::<_, String>(2)?),
                    local_id: r.get(3)?,
                    name: r.get(4)?,
                })
            })
            .ctx(p)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().ctx(p)
    }

    /// All producers.
    pub fn producers(&self) -> Result<Vec<Producer>> {
        self.producers_where("", [])
    }

    /// The producer of a kind with a board-local id (RT-427 §4.1.4).
    pub fn producer_by_local_id(
        &self,
        kind: ProducerKind,
        local_id: i64,
    ) -> Result<Option<Producer>> {
        Ok(self
            .producers_where(
                "WHERE kind = ?1 AND local_id = ?2",
                params![kind.name(), local_id],
            )?
            .into_iter()
            .next())
    }

    /// All producers of a kind (RT-427 §4.1.4).
    pub fn producers_by_kind(&self, kind: ProducerKind) -> Result<Vec<Producer>> {
        self.producers_where("WHERE kind = ?1", [kind.name()])
    }

    /// Recorded losses, in time order.
    pub fn losses(&self) -> Result<Vec<LossRecord>> {
        self.query_all(
            "SELECT cpu, ts, count, seq_from, seq_to, reason FROM loss ORDER BY ts, id",
            |r| {
                Ok(LossRecord {
                    cpu: r.get(0)?,
                    ts: r.get(1)?,
                    count: r.get::<_, i64>(2)? as u64,
                    seq_from: r.get::<_, Option<i64>>(3)?.map(|v| v as u64),
                    seq_to: r.get::<_, Option<i64>>(4)?.map(|v| v as u64),
                    reason: r.get(5)?,
                })
            },
        )
    }

    /// Ingest counters, by name.
    pub fn ingest_stats(&self) -> Result<Vec<IngestStat>> {
        self.query_all(
            "SELECT name, value, description FROM ingest_stat ORDER BY name",
            |r| {
                Ok(IngestStat {
                    name: r.get(0)?,
                    value: r.get(1)?,
                    description: r.get(2)?,
                })
            },
        )
    }

    /// Files related to the trace (RT-427 §4.1.4).
    pub fn files(&self) -> Result<Vec<TraceFile>> {
        self.query_all("SELECT id, path, description FROM file ORDER BY id", |r| {
            Ok(TraceFile {
                id: r.get(0)?,
                path: r.get(1)?,
                description: r.get(2)?,
            })
        })
    }

    /// Every row of a parameterless query on the plain tables, mapped by `map`.
    fn query_all<T>(
        &self,
        sql: &str,
        map: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>> {
        let p = &self.path;
        let mut st = self.conn.prepare_cached(sql).ctx(p)?;
        let rows = st.query_map([], map).ctx(p)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().ctx(p)
    }

    /// The event streams.
    pub fn streams(&self) -> Result<Vec<StreamInfo>> {
        let p = &self.path;
        let mut st = self
            .conn
            .prepare_cached("SELECT id, max_span, chunk_count, event_count FROM stream ORDER BY id")
            .ctx(p)?;
        let rows = st
            .query_map([], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, i64>(3)?,
                ))
            })
            .ctx(p)?;
        let mut out = Vec::new();
        for row in rows {
            let (id, max_span, chunk_count, event_count) = row.ctx(p)?;
            let (category, _, cpu) = codec::split_stream(id)
                .ok_or_else(|| self.invalid(format!("stream id {id:#x}")))?;
            out.push(StreamInfo {
                id,
                category,
                cpu,
                max_span,
                chunk_count,
                event_count,
            });
        }
        Ok(out)
    }

    /// The stream list of the current snapshot (which must be open), read again only when
    /// another connection committed since it was cached.
    fn streams_cached(&self) -> Result<std::cell::Ref<'_, [StreamInfo]>> {
        let v = self.snapshot_version.get();
        let fresh = matches!(&*self.streams_cache.borrow(), Some((cv, _)) if *cv == v);
        if !fresh {
            let streams = self.streams()?;
            *self.streams_cache.borrow_mut() = Some((v, streams));
        }
        Ok(std::cell::Ref::map(
            self.streams_cache.borrow(),
            |c| match c {
                Some((_, s)) => s.as_slice(),
                None => &[],
            },
        ))
    }

    /// Metadata of all chunks overlapping `range` (by `[t_min, end_max]`), in `t_min` order.
    pub fn chunks_overlapping(&self, range: TimeRange) -> Result<Vec<ChunkInfo>> {
        let p = &self.path;
        let mut out = Vec::new();
        for s in self.streams()? {
            let mut st = self
                .conn
                .prepare_cached(&format!(
                    "SELECT {CHUNK_COLS} FROM chunk WHERE stream = ?1 AND t_min < ?2 AND t_min >= ?3 AND end_max >= ?4"
                ))
                .ctx(p)?;
            let rows = st
                .query_map(
                    params![
                        s.id,
                        range.end,
                        range.start.saturating_sub(s.max_span),
                        range.start
                    ],
                    chunk_info,
                )
                .ctx(p)?;
            for r in rows {
                out.push(r.ctx(p)?);
            }
        }
        out.sort_by_key(|c| (c.t_min, c.id));
        Ok(out)
    }

    /// Runs `f` on a chunk's stored bytes with the reader's decompressor; its error text, or a missing row,
    /// becomes a [`StoreError::CorruptChunk`] naming the chunk.
    fn with_chunk_blob<T>(
        &self,
        chunk_id: i64,
        f: impl FnOnce(&[u8], &mut crate::codec::Decompressor) -> std::result::Result<T, String>,
    ) -> Result<T> {
        let p = &self.path;
        let corrupt = |detail: String| StoreError::CorruptChunk {
            path: p.clone(),
            chunk_id,
            detail,
        };
        let mut st = self
            .conn
            .prepare_cached("SELECT data FROM chunk WHERE id = ?1")
            .ctx(p)?;
        let mut rows = st.query([chunk_id]).ctx(p)?;
        let row = rows
            .next()
            .ctx(p)?
            .ok_or_else(|| corrupt("chunk row vanished".into()))?;
        let blob = row
            .get_ref(0)
            .ctx(p)?
            .as_blob()
            .map_err(|e| corrupt(e.to_string()))?;
        let mut dec = self.decompressor.borrow_mut();
        f(blob, &mut dec).map_err(corrupt)
    }

    /// The chunk's event count must be the one its row announces.
    fn check_count(&self, info: &ChunkInfo, found: usize, what: &str) -> Result<()> {
        if found != info.count as usize {
            return Err(StoreError::CorruptChunk {
                path: self.path.clone(),
                chunk_id: info.id,
                detail: format!("{found} events {what}, row says {}", info.count),
            });
        }
        Ok(())
    }

    pub(crate) fn decode(&self, info: &ChunkInfo, out: &mut DecodedChunk) -> Result<()> {
        self.with_chunk_blob(info.id, |blob, dec| {
            codec::decode_chunk(blob, dec, self, out)
        })?;
        self.check_count(info, out.len(), "decoded")?;
        out.id = info.id;
        Ok(())
    }

    /// The incremental blob handle `handle` moved to chunk `id`'s data (opened on first use).
    pub(crate) fn chunk_blob<'c, 'h>(
        &'c self,
        handle: &'h mut Option<rusqlite::blob::Blob<'c>>,
        id: i64,
    ) -> Result<&'h mut rusqlite::blob::Blob<'c>> {
        let p = &self.path;
        Ok(match handle {
            Some(b) => {
                b.reopen(id).ctx(p)?;
                b
            }
            None => handle.insert(
                self.conn
                    .blob_open(rusqlite::MAIN_DB, "chunk", "data", id, true)
                    .ctx(p)?,
            ),
        })
    }

    /// Loads a chunk into a cursor positioned on its first event at or after `from`, keeping
    /// the blocks that start before `until`. The blob is read through `handle` (opened on
    /// first use, moved to each chunk after): only the header and those blocks are copied.
    pub(crate) fn load_cursor<'c>(
        &'c self,
        info: &ChunkInfo,
        from: Timestamp,
        until: Timestamp,
        handle: &mut Option<rusqlite::blob::Blob<'c>>,
        out: &mut ChunkCursor,
    ) -> Result<()> {
        let p = &self.path;
        let blob = self.chunk_blob(handle, info.id)?;
        let mut dec = self.decompressor.borrow_mut();
        out.load_from(info.id, blob, from, until, &mut dec, self)
            .map_err(|d| corrupt(p, info.id, &d))?;
        drop(dec);
        self.check_count(info, out.len(), "in the chunk")
    }

    /// Events whose timestamp is in `range`, in timestamp order (ties: write order per chunk).
    pub fn events(&self, range: TimeRange, filter: &Filter) -> Result<EventIter<'_>> {
        EventIter::new(self, range, filter, Mode::Starts)
    }

    /// Events that overlap `range` (`ts < range.end` and `end > range.start`, or a zero-length
    /// event inside it), in timestamp order: this includes states that started before.
    pub fn events_overlapping(&self, range: TimeRange, filter: &Filter) -> Result<EventIter<'_>> {
        EventIter::new(self, range, filter, Mode::Overlaps)
    }

    /// The states overlapping `range`, in start order.
    pub fn states_overlapping(&self, range: TimeRange, filter: &Filter) -> Result<EventIter<'_>> {
        let mut f = filter.clone();
        f.categories = Some(match &filter.categories {
            Some(c) if c.contains(&EventCategory::State) => vec![EventCategory::State],
            Some(_) => Vec::new(),
            None => vec![EventCategory::State],
        });
        EventIter::new(self, range, &f, Mode::Overlaps)
    }

    /// Events whose timestamp is in any of `ranges` (overlaps merged), in timestamp order.
    pub fn events_in_intervals(
        &self,
        ranges: &[TimeRange],
        filter: &Filter,
    ) -> Result<Vec<StoredEvent>> {
        let mut rs: Vec<TimeRange> = ranges.iter().copied().filter(|r| !r.is_empty()).collect();
        rs.sort_by_key(|r| r.start);
        let mut merged: Vec<TimeRange> = Vec::new();
        for r in rs {
            match merged.last_mut() {
                Some(l) if r.start <= l.end => l.end = l.end.max(r.end),
                _ => merged.push(r),
            }
        }
        let mut out = Vec::new();
        for r in merged {
            for e in self.events(r, filter)? {
                out.push(e?);
            }
        }
        Ok(out)
    }

    /// Number of events whose timestamp is in `range`; uses the summary for the aligned part
    /// when the filter allows it.
    pub fn count(&self, range: TimeRange, filter: &Filter) -> Result<u64> {
        if range.is_empty() {
            return Ok(0);
        }
        let _snapshot = self.snapshot()?;
        let tf = self.summary_filter(filter)?;
        match tf {
            Some(tf) => Ok(self
                .exact_cells(range, filter, &tf)?
                .iter()
                .map(|c| c.count)
                .sum()),
            None => {
                let mut n = 0;
                for e in self.events(range, filter)? {
                    e?;
                    n += 1;
                }
                Ok(n)
            }
        }
    }

    /// Resolves the category part of a summary-compatible filter to types. `None` when the
    /// summary cannot answer the filter.
    fn summary_filter(&self, filter: &Filter) -> Result<Option<SummaryFilter>> {
        if !filter.summary_compatible() {
            return Ok(None);
        }
        let mut types = filter.types.clone();
        if let Some(cats) = &filter.categories {
            let by_cat: Vec<u32> = self
                .event_types()?
                .into_iter()
                .filter(|t| cats.contains(&t.category))
                .map(|t| t.id)
                .collect();
            types = Some(match types {
                Some(t) => t.into_iter().filter(|x| by_cat.contains(x)).collect(),
                None => by_cat,
            });
        }
        Ok(Some(SummaryFilter {
            types,
            producers: filter.producers.clone(),
        }))
    }

    /// Summary cells of `range` computed directly from the chunks.
    fn cells_from_chunks(&self, range: TimeRange, filter: &Filter) -> Result<Vec<SummaryCell>> {
        let mut cells = Vec::new();
        for e in self.events_overlapping(range, filter)? {
            let e = e?;
            let count = u64::from(range.contains(e.ts));
            let state_ns = if e.category() == EventCategory::State {
                range.overlap(e.ts, e.end())
            } else {
                0
            };
            if count != 0 || state_ns != 0 {
                cells.push(SummaryCell {
                    producer: e.producer,
                    type_id: e.type_id,
                    count,
                    state_ns,
                });
            }
        }
        summary::normalize(&mut cells);
        Ok(cells)
    }

    fn summary_rows(
        &self,
        level: u32,
        b_from: i64,
        b_to: i64,
        tf: &SummaryFilter,
        mut f: impl FnMut(i64, RowCell),
    ) -> Result<()> {
        let p = &self.path;
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT bucket, data FROM summary
                 WHERE level = ?1 AND bucket >= ?2 AND bucket <= ?3",
            )
            .ctx(p)?;
        let mut rows = st.query(params![level, b_from, b_to]).ctx(p)?;
        let mut cells = Vec::new();
        let mut dec = self.decompressor.borrow_mut();
        while let Some(r) = rows.next().ctx(p)? {
            let bucket: i64 = r.get(0).ctx(p)?;
            let data = r
                .get_ref(1)
                .ctx(p)?
                .as_blob()
                .map_err(|e| self.invalid(format!("summary row: {e}")))?;
            cells.clear();
            summary::decode_cells(data, &mut dec, &mut cells)
                .map_err(|d| self.invalid(format!("summary row ({level}, {bucket}): {d}")))?;
            for &cell in &cells {
                if tf.ok(cell.type_id, cell.producer) {
                    f(bucket, cell);
                }
            }
        }
        Ok(())
    }

    /// The rows of `level` for buckets `b_from..=b_to`, in bucket order, filtered.
    fn summary_row_list(
        &self,
        level: u32,
        b_from: i64,
        b_to: i64,
        tf: &SummaryFilter,
    ) -> Result<Vec<(i64, Vec<RowCell>)>> {
        let mut rows: Vec<(i64, Vec<RowCell>)> = Vec::new();
        self.summary_rows(level, b_from, b_to, tf, |b, c| match rows.last_mut() {
            Some((last, cells)) if *last == b => cells.push(c),
            _ => rows.push((b, vec![c])),
        })?;
        Ok(rows)
    }

    /// The states open at `t` (a multiple of the finest bucket width), per pair the filter
    /// keeps: the open deltas of every summary row before `t`, summed over the dyadic pieces
    /// from the first coarsest bucket (at most a couple of rows per level), or continued from
    /// the last instant integrated to under the same snapshot and filter.
    fn open_states_at(&self, t: Timestamp, tf: &SummaryFilter) -> Result<OpenStates> {
        let layout = (self.base_shift.get(), self.levels.get());
        let version = self.snapshot_version.get();
        let cached = match &*self.open_cache.borrow() {
            Some(c)
                if c.version == version && c.layout == layout && c.filter == *tf && c.at <= t =>
            {
                Some((c.at, c.open.clone()))
            }
            _ => None,
        };
        let (base, levels) = layout;
        let (from, mut open) = match cached {
            Some(c) => c,
            None => {
                let top = levels - 1;
                let first: Option<i64> = self
                    .conn
                    .prepare_cached("SELECT min(bucket) FROM summary WHERE level = ?1")
                    .and_then(|mut st| st.query_row([top], |r| r.get(0)))
                    .ctx(&self.path)?;
                match first {
                    Some(b) => (summary::bucket_start(b, base + top), OpenStates::default()),
                    None => (t, OpenStates::default()),
                }
            }
        };
        if from < t {
            let mut row = Vec::new();
            for (level, bucket) in summary::dyadic_pieces(from, t, base, levels) {
                row.clear();
                self.summary_rows(level, bucket, bucket, tf, |_, c| row.push(c))?;
                open.pass(&row);
            }
        }
        self.remember_open(t.max(from), tf, &open);
        Ok(open)
    }

    fn remember_open(&self, at: Timestamp, tf: &SummaryFilter, open: &OpenStates) {
        *self.open_cache.borrow_mut() = Some(OpenCache {
            version: self.snapshot_version.get(),
            layout: (self.base_shift.get(), self.levels.get()),
            filter: tf.clone(),
            at,
            open: open.clone(),
        });
    }

    /// Exact cells of an arbitrary interval: aligned dyadic pieces from the summary, the
    /// unaligned rest from the chunks.
    fn exact_cells(
        &self,
        range: TimeRange,
        filter: &Filter,
        tf: &SummaryFilter,
    ) -> Result<Vec<SummaryCell>> {
        let base = self.base_shift.get();
        let w = 1i64 << base;
        let (a0, b0) = summary::aligned_inside(range, w);
        if range.start == i64::MIN || range.end == i64::MAX || a0 >= b0 {
            return self.cells_from_chunks(range, filter);
        }
        let mut cells = self.cells_from_chunks(TimeRange::new(range.start, a0), filter)?;
        cells.extend(self.cells_from_chunks(TimeRange::new(b0, range.end), filter)?);
        self.aligned_cells(a0, b0, tf, &mut cells)?;
        summary::normalize(&mut cells);
        Ok(cells)
    }

    /// Adds to `cells` (unsorted) the cells of `[a0, b0)`, whose ends are multiples of the finest
    /// bucket width, from the summary: its dyadic pieces' rows, the states open at `a0`
    /// integrated over them.
    fn aligned_cells(
        &self,
        a0: Timestamp,
        b0: Timestamp,
        tf: &SummaryFilter,
        cells: &mut Vec<SummaryCell>,
    ) -> Result<()> {
        let base = self.base_shift.get();
        let mut open = self.open_states_at(a0, tf)?;
        let mut row = Vec::new();
        for (level, bucket) in summary::dyadic_pieces(a0, b0, base, self.levels.get()) {
            row.clear();
            self.summary_rows(level, bucket, bucket, tf, |_, c| row.push(c))?;
            open.step(&row, 1i64 << (base + level), cells);
        }
        self.remember_open(b0, tf, &open);
        Ok(())
    }

    /// The summary of `range` at a resolution: buckets aligned to multiples of the (power of
    /// two) width, the first and last clipped to `range` and computed exactly.
    ///
    /// Filters with CPUs or parameter conditions are computed from the chunks (slower).
    pub fn summary(
        &self,
        range: TimeRange,
        resolution: Resolution,
        filter: &Filter,
    ) -> Result<Summary> {
        if range.is_empty() || range.start == i64::MIN || range.end == i64::MAX {
            return Err(StoreError::InvalidRequest(
                "a summary needs a bounded, non-empty interval".into(),
            ));
        }
        let _snapshot = self.snapshot()?;
        let shift = resolution.shift_for(range);
        let width = 1i64 << shift;
        let mut edges = vec![range.start];
        let mut t = range
            .start
            .div_euclid(width)
            .saturating_add(1)
            .saturating_mul(width);
        while t < range.end {
            edges.push(t);
            t = t.saturating_add(width);
        }
        edges.push(range.end);
        if edges.len() > 1_000_002 {
            return Err(StoreError::InvalidRequest(format!(
                "{} buckets asked for; use a coarser resolution",
                edges.len() - 1
            )));
        }
        let mut buckets: Vec<SummaryBucket> = edges
            .windows(2)
            .map(|w| SummaryBucket {
                range: TimeRange::new(w[0], w[1]),
                cells: Vec::new(),
            })
            .collect();
        let tf = self.summary_filter(filter)?;
        let n = buckets.len();
        match tf {
            Some(tf)
                if shift >= self.base_shift.get()
                    && shift < self.base_shift.get() + self.levels.get() =>
            {
                let level = shift - self.base_shift.get();
                // Interior buckets are exactly summary buckets of this level.
                let full: Vec<usize> = (0..n)
                    .filter(|&i| buckets[i].range.len() == width)
                    .collect();
                if let (Some(&first), Some(&last)) = (full.first(), full.last()) {
                    // Interior buckets in time order: each row's counts, and the state time
                    // integrated from the states open at the first bucket's start.
                    let b_first = buckets[first].range.start >> shift;
                    let b_last = buckets[last].range.start >> shift;
                    let mut open = self.open_states_at(buckets[first].range.start, &tf)?;
                    let rows = self.summary_row_list(level, b_first, b_last, &tf)?;
                    let mut k = 0;
                    for (i, b) in (b_first..=b_last).enumerate() {
                        let row: &[RowCell] = match rows.get(k) {
                            Some((rb, cells)) if *rb == b => {
                                k += 1;
                                cells
                            }
                            _ => &[],
                        };
                        open.step(row, width, &mut buckets[first + i].cells);
                    }
                    self.remember_open(buckets[last].range.end, &tf, &open);
                }
                for b in buckets.iter_mut().filter(|b| b.range.len() != width) {
                    b.cells = self.exact_cells(b.range, filter, &tf)?;
                }
            }
            Some(tf) if shift >= self.base_shift.get() + self.levels.get() => {
                for b in &mut buckets {
                    b.cells = self.exact_cells(b.range, filter, &tf)?;
                }
            }
            _ => {
                // Finer than the summary, or a filter it cannot answer: one pass over the chunks.
                for e in self.events_overlapping(range, filter)? {
                    let e = e?;
                    let first = if e.ts <= range.start {
                        0
                    } else {
                        edges.partition_point(|&x| x <= e.ts) - 1
                    };
                    let is_state = e.category() == EventCategory::State;
                    let mut i = first;
                    while i < n {
                        let r = buckets[i].range;
                        let count = u64::from(r.contains(e.ts));
                        let state_ns = if is_state {
                            r.overlap(e.ts, e.end())
                        } else {
                            0
                        };
                        if count == 0 && state_ns == 0 && r.start >= e.end() {
                            break;
                        }
                        if count != 0 || state_ns != 0 {
                            buckets[i].cells.push(SummaryCell {
                                producer: e.producer,
                                type_id: e.type_id,
                                count,
                                state_ns,
                            });
                        }
                        if !is_state {
                            break;
                        }
                        i += 1;
                    }
                }
                for b in &mut buckets {
                    summary::normalize(&mut b.cells);
                }
            }
        }
        Ok(Summary {
            bucket_width: width,
            buckets,
        })
    }

    /// Finest summary bucket width exponent and number of levels of this trace.
    pub fn summary_levels(&self) -> (u32, u32) {
        (self.base_shift.get(), self.levels.get())
    }

    /// The event with this id.
    pub fn event_by_id(&self, id: EventId) -> Result<Option<StoredEvent>> {
        let chunk_id = id.div_euclid(MAX_CHUNK_EVENTS as i64);
        let idx = id.rem_euclid(MAX_CHUNK_EVENTS as i64) as usize;
        let p = &self.path;
        let info = self
            .conn
            .query_row(
                &format!("SELECT {CHUNK_COLS} FROM chunk WHERE id = ?1"),
                [chunk_id],
                chunk_info,
            )
            .optional()
            .ctx(p)?;
        let Some(info) = info else { return Ok(None) };
        let mut d = DecodedChunk::default();
        self.decode(&info, &mut d)?;
        if idx >= d.len() {
            return Ok(None);
        }
        Ok(Some(StoredEvent {
            id,
            event: d.event(idx),
        }))
    }

    fn page(
        &self,
        range_end: Timestamp,
        after: (Timestamp, i64),
        with_ids: bool,
    ) -> Result<Vec<ChunkInfo>> {
        let p = &self.path;
        let mut st = self
            .conn
            .prepare_cached(&format!(
                "SELECT {CHUNK_COLS} FROM chunk
                 WHERE t_min >= ?1 AND t_min < ?2 AND (t_min > ?1 OR id > ?3)
                 ORDER BY t_min, id LIMIT ?4"
            ))
            .ctx(p)?;
        let rows = st
            .query_map(params![after.0, range_end, after.1, PAGE], |r| {
                chunk_info_with(r, with_ids)
            })
            .ctx(p)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().ctx(p)
    }

    /// The chunks of every stream that start before `start` and reach it (by their last
    /// start, or by their end in overlap mode), each stream bounded by its `max_span`: one
    /// statement walking the `(stream, t_min)` index once per stream.
    fn straddling(&self, start: Timestamp, mode: Mode, with_ids: bool) -> Result<Vec<ChunkInfo>> {
        let p = &self.path;
        let col = match mode {
            Mode::Starts => "t_max",
            Mode::Overlaps => "end_max",
        };
        let mut st = self
            .conn
            .prepare_cached(&format!(
                "SELECT c.id, c.stream, c.t_min, c.t_max, c.end_max, c.count, c.types, c.producers
                 FROM stream s CROSS JOIN chunk c ON c.stream = s.id
                 WHERE c.t_min < ?1 AND c.t_min >= max(?1 - s.max_span, ?2) AND c.{col} >= ?1"
            ))
            .ctx(p)?;
        let rows = st
            .query_map(params![start, i64::MIN], |r| chunk_info_with(r, with_ids))
            .ctx(p)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().ctx(p)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct SummaryFilter {
    types: Option<Vec<u32>>,
    producers: Option<Vec<u32>>,
}

impl SummaryFilter {
    fn ok(&self, ty: u32, producer: u32) -> bool {
        self.types.as_ref().is_none_or(|t| t.contains(&ty))
            && self
                .producers
                .as_ref()
                .is_none_or(|p| p.contains(&producer))
    }
}

/// What decides whether an event is returned: the part of an [`EventIter`] its chunk cursors
/// need while the iterator itself is borrowed.
struct Matcher {
    range: TimeRange,
    filter: CompiledFilter,
    mode: Mode,
    /// Start mode and a filter whose every part is decided per stream (or absent).
    all: bool,
}

impl Matcher {
    #[inline]
    fn matches(&self, c: &mut ChunkCursor) -> std::result::Result<bool, &'static str> {
        let ts = c.ts;
        let in_range = match self.mode {
            Mode::Starts => ts >= self.range.start,
            Mode::Overlaps => {
                let end = c.end();
                end > self.range.start || (end == ts && ts >= self.range.start)
            }
        };
        if !in_range || !self.filter.ids_ok(c.ty, c.producer) {
            return Ok(false);
        }
        if self.filter.has_condition() {
            let params = c.params()?;
            return Ok(self.filter.params_ok(c.ty, &params));
        }
        Ok(true)
    }

    /// Moves a cursor to the next matching event at or after its current one; false when it
    /// reaches the end of the chunk or of the range.
    #[inline]
    fn seek_match(
        &self,
        c: &mut ChunkCursor,
        dec: &mut crate::codec::Decompressor,
    ) -> std::result::Result<bool, &'static str> {
        // Common case: every event of the chunk's stream matches, and in start mode the
        // cursor is already past the range start (chunks are sorted by time).
        if self.all && c.valid() && c.ts < self.range.end && c.ts >= self.range.start {
            return Ok(true);
        }
        while c.valid() {
            if c.ts >= self.range.end {
                return Ok(false);
            }
            if self.matches(c)? {
                return Ok(true);
            }
            c.advance(dec)?;
        }
        Ok(false)
    }
}

/// Events in timestamp order: a k-way merge over the chunks that can hold matches, decoding
/// each chunk only when the merge reaches its first timestamp.
pub struct EventIter<'r> {
    reader: &'r TraceReader,
    _snapshot: Snapshot<'r>,
    m: Matcher,
    stream_ok: HashMap<i64, bool>,
    pending: VecDeque<ChunkInfo>,
    paged_until: Option<(Timestamp, i64)>,
    page_done: bool,
    /// Cursors of the active chunks (free ones keep their buffers for the next chunk).
    slots: Vec<ChunkCursor>,
    free: Vec<usize>,
    heap: MergeHeap,
    /// Incremental blob handle the chunks are read through.
    blob: Option<rusqlite::blob::Blob<'r>>,
    /// The merge head can be returned without looking at the pending chunks while its
    /// timestamp is below this (the smallest pending `t_min` when last computed).
    bound: Timestamp,
    failed: bool,
}

/// Merge order of a cursor's current event: timestamp, then event id (chunk id, index).
#[inline]
fn merge_key(ts: Timestamp, chunk_id: i64, index: usize) -> u128 {
    let id = chunk_id
        .wrapping_mul(MAX_CHUNK_EVENTS as i64)
        .wrapping_add(index as i64);
    (u128::from((ts as u64) ^ (1 << 63)) << 64) | u128::from((id as u64) ^ (1 << 63))
}

#[inline]
fn key_ts(key: u128) -> Timestamp {
    (((key >> 64) as u64) ^ (1 << 63)) as i64
}

/// A binary min-heap of `(merge key, cursor slot)` (keys are distinct).
#[derive(Default)]
struct MergeHeap {
    v: Vec<(u128, usize)>,
}

impl MergeHeap {
    #[cfg(test)]
    fn len(&self) -> usize {
        self.v.len()
    }

    #[inline]
    fn top(&self) -> Option<(u128, usize)> {
        self.v.first().copied()
    }

    fn push(&mut self, key: u128, slot: usize) {
        let mut i = self.v.len();
        self.v.push((key, slot));
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.v[parent].0 <= key {
                break;
            }
            self.v[i] = self.v[parent];
            i = parent;
        }
        self.v[i] = (key, slot);
    }

    /// Gives the top entry a new key and slot, sifting it down to its place.
    #[inline]
    fn replace_top(&mut self, key: u128, slot: usize) {
        let n = self.v.len();
        let mut i = 0;
        loop {
            let l = 2 * i + 1;
            if l >= n {
                break;
            }
            let r = l + 1;
            // The smaller child, chosen without a branch (the comparison is unpredictable in
            // a merge: a quarter fewer branch misses per read).
            let c = l + usize::from(r < n && self.v[r].0 < self.v[l].0);
            if self.v[c].0 >= key {
                break;
            }
            self.v[i] = self.v[c];
            i = c;
        }
        self.v[i] = (key, slot);
    }

    fn pop_top(&mut self) {
        if let Some(last) = self.v.pop()
            && !self.v.is_empty()
        {
            self.replace_top(last.0, last.1);
        }
    }
}

impl<'r> EventIter<'r> {
    fn new(reader: &'r TraceReader, range: TimeRange, filter: &Filter, mode: Mode) -> Result<Self> {
        let snapshot = reader.snapshot()?;
        let types = if filter.condition.is_some() {
            reader.type_map()?
        } else {
            HashMap::new()
        };
        let compiled = CompiledFilter::new(filter, &types);
        let mut stream_ok = HashMap::new();
        let mut pending = Vec::new();
        if !range.is_empty() {
            for s in reader.streams_cached()?.iter() {
                stream_ok.insert(s.id, compiled.stream_ok(s.category, s.cpu));
            }
            if range.start > i64::MIN && stream_ok.values().any(|&ok| ok) {
                pending.extend(
                    reader
                        .straddling(range.start, mode, compiled.needs_ids())?
                        .into_iter()
                        .filter(|c| {
                            stream_ok.get(&c.stream).copied().unwrap_or(false)
                                && compiled.chunk_ok(&c.types, &c.producers)
                        }),
                );
            }
        }
        pending.sort_by_key(|c| (c.t_min, c.id));
        Ok(Self {
            reader,
            _snapshot: snapshot,
            m: Matcher {
                range,
                all: mode == Mode::Starts && !compiled.needs_ids() && !compiled.has_condition(),
                filter: compiled,
                mode,
            },
            stream_ok,
            pending: pending.into(),
            paged_until: Some((range.start, i64::MIN)),
            page_done: range.is_empty(),
            slots: Vec::new(),
            free: Vec::new(),
            heap: MergeHeap::default(),
            blob: None,
            bound: Timestamp::MIN,
            failed: false,
        })
    }

    /// Fetches the next page of chunks starting in the range; false when there are no more.
    fn fetch_page(&mut self) -> Result<bool> {
        if self.page_done {
            return Ok(false);
        }
        let Some(after) = self.paged_until else {
            self.page_done = true;
            return Ok(false);
        };
        let page = self
            .reader
            .page(self.m.range.end, after, self.m.filter.needs_ids())?;
        if (page.len() as i64) < PAGE {
            self.page_done = true;
        }
        if let Some(last) = page.last() {
            self.paged_until = Some((last.t_min, last.id));
        }
        for c in page {
            let ok = match self.stream_ok.get(&c.stream) {
                Some(&ok) => ok,
                None => {
                    // A stream created after the iterator started.
                    let ok = codec::split_stream(c.stream)
                        .is_some_and(|(cat, _, cpu)| self.m.filter.stream_ok(cat, cpu));
                    self.stream_ok.insert(c.stream, ok);
                    ok
                }
            };
            if ok && self.m.filter.chunk_ok(&c.types, &c.producers) {
                // Pages arrive in t_min order, after the straddling chunks (which start earlier).
                self.pending.push_back(c);
            }
        }
        Ok(true)
    }

    /// The smallest t_min of chunks not yet activated (fetching pages as needed).
    fn next_pending_t_min(&mut self) -> Result<Option<Timestamp>> {
        loop {
            if let Some(c) = self.pending.front() {
                // Paged chunks are sorted, and every unfetched chunk starts at or after the
                // last fetched one, so the front is the minimum once it precedes that bound.
                if self.page_done || self.paged_until.is_some_and(|(t, _)| c.t_min <= t) {
                    return Ok(Some(c.t_min));
                }
            } else if self.page_done {
                return Ok(None);
            }
            if !self.fetch_page()? {
                return Ok(self.pending.front().map(|c| c.t_min));
            }
        }
    }

    fn activate(&mut self) -> Result<()> {
        let Some(info) = self.pending.pop_front() else {
            return Ok(());
        };
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push(ChunkCursor::default());
                self.slots.len() - 1
            }
        };
        let c = &mut self.slots[slot];
        let m = &self.m;
        // Where the walk may start in the chunk: events overlapping the range start at most
        // the stream's longest duration before it (a chunk may span a minute: its earlier
        // blocks are not even loaded).
        let from = match (m.mode, codec::split_stream(info.stream)) {
            (Mode::Starts, _) => m.range.start,
            (Mode::Overlaps, Some((EventCategory::Punctual | EventCategory::Variable, _, _))) => {
                m.range.start
            }
            (Mode::Overlaps, Some((_, class, _))) => {
                codec::longest_of_class(class).map_or(i64::MIN, |d| m.range.start.saturating_sub(d))
            }
            (Mode::Overlaps, None) => i64::MIN,
        };
        let found = self
            .reader
            .load_cursor(&info, from, m.range.end, &mut self.blob, c)
            .and_then(|()| {
                let mut dec = self.reader.decompressor.borrow_mut();
                m.seek_match(c, &mut dec)
                    .map_err(|d| corrupt(&self.reader.path, info.id, d))
            });
        match found {
            Ok(true) => self.heap.push(merge_key(c.ts, c.id, c.index()), slot),
            Ok(false) => self.free.push(slot),
            Err(e) => {
                self.free.push(slot);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Activates the pending chunks that start before the merge head (fetching pages as
    /// needed); false when there is nothing left.
    #[inline(never)]
    fn refill(&mut self) -> Result<bool> {
        loop {
            let head = self.heap.top().map(|(k, _)| key_ts(k));
            let pending_min = self.next_pending_t_min()?;
            match (head, pending_min) {
                (None, None) => return Ok(false),
                (None, Some(_)) => self.activate()?,
                (Some(h), Some(p)) if p <= h => self.activate()?,
                (Some(_), p) => {
                    // Nothing pending changes until the next activation or page.
                    self.bound = p.unwrap_or(Timestamp::MAX);
                    return Ok(true);
                }
            }
        }
    }

    /// Moves to the next event and writes it into `out` (its parameter vector reused);
    /// false at the end.
    #[inline]
    fn step(&mut self, out: &mut StoredEvent) -> Result<bool> {
        let (key, slot) = match self.heap.top() {
            Some((k, s)) if key_ts(k) < self.bound => (k, s),
            _ => {
                if !self.refill()? {
                    return Ok(false);
                }
                match self.heap.top() {
                    Some(t) => t,
                    None => return Ok(false),
                }
            }
        };
        let c = &mut self.slots[slot];
        let chunk_id = c.id;
        let i = c.index();
        out.id = chunk_id * MAX_CHUNK_EVENTS as i64 + i as i64;
        let e = &mut out.event;
        (e.ts, e.type_id, e.producer, e.cpu, e.kind) = (c.ts, c.ty, c.producer, c.cpu(), c.kind());
        if let Err(d) = c.params_into(&mut e.params) {
            return Err(corrupt(&self.reader.path, chunk_id, d));
        }
        let m = &self.m;
        // Common case first: the next event is in the same block and matches without a look
        // at its parameters; the decompressor is borrowed only to enter another block.
        let next = match c.advance_in_block() {
            Ok(true) if m.all && c.valid() && c.ts < m.range.end && c.ts >= m.range.start => {
                Ok(true)
            }
            Ok(in_block) => {
                let mut dec = self.reader.decompressor.borrow_mut();
                let entered = if in_block {
                    Ok(())
                } else {
                    c.next_block(&mut dec)
                };
                entered.and_then(|()| m.seek_match(c, &mut dec))
            }
            Err(d) => Err(d),
        };
        match next {
            Ok(true) => {
                // Replace the head in place: one sift instead of a pop and a push.
                let k = merge_key(c.ts, chunk_id, c.index());
                debug_assert!(k > key);
                self.heap.replace_top(k, slot);
            }
            Ok(false) => {
                self.heap.pop_top();
                self.free.push(slot);
            }
            Err(d) => return Err(corrupt(&self.reader.path, chunk_id, d)),
        }
        Ok(true)
    }

    /// The next event written into `out`, whose parameter vector is reused: the way to walk
    /// many events without an allocation per event. False at the end (then, and after an
    /// error, `out` is unspecified and the iterator is finished).
    pub fn next_into(&mut self, out: &mut StoredEvent) -> Result<bool> {
        if self.failed {
            return Ok(false);
        }
        self.step(out).inspect_err(|_| self.failed = true)
    }
}

impl codec::Dictionaries for TraceReader {
    fn dictionary(&self, id: u64) -> std::result::Result<codec::ReadDictionary, String> {
        if let Some(d) = self.dictionaries.borrow().get(&id) {
            return Ok(d.clone());
        }
        let key = i64::try_from(id).map_err(|_| format!("dictionary id {id} out of range"))?;
        let bytes: Option<Vec<u8>> = self
            .conn
            .prepare_cached("SELECT data FROM chunk_dict WHERE id = ?1")
            .and_then(|mut st| st.query_row([key], |r| r.get(0)).optional())
            .map_err(|e| format!("reading dictionary {id}: {e}"))?;
        let bytes = bytes.ok_or_else(|| {
            format!("the chunk names dictionary {id}, which the trace does not hold")
        })?;
        let d = codec::DictionaryData::new(id, &bytes)?;
        self.dictionaries.borrow_mut().insert(id, d.clone());
        Ok(d)
    }
}

#[cold]
fn corrupt(path: &Path, chunk_id: i64, detail: &str) -> StoreError {
    StoreError::CorruptChunk {
        path: path.to_path_buf(),
        chunk_id,
        detail: detail.to_string(),
    }
}

impl Iterator for EventIter<'_> {
    type Item = Result<StoredEvent>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let mut e = StoredEvent::default();
        match self.step(&mut e) {
            Ok(true) => Some(Ok(e)),
            Ok(false) => None,
            Err(err) => {
                self.failed = true;
                Some(Err(err))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::MergeHeap;

    /// The merge heap pops keys in increasing order under any mix of pushes, replacements
    /// of the top and pops (checked against a sorted list).
    #[test]
    fn merge_heap_keeps_order() {
        let mut rng = crate::bench::SplitMix::new(5);
        for _ in 0..200 {
            let mut h = MergeHeap::default();
            let mut model: Vec<(u128, usize)> = Vec::new();
            let next_key = |rng: &mut crate::bench::SplitMix| {
                u128::from(rng.below(1 << 40)) << 20 | u128::from(rng.below(1 << 20))
            };
            for step in 0..300usize {
                match rng.below(4) {
                    0 | 1 => {
                        let k = next_key(&mut rng);
                        if !model.iter().any(|e| e.0 == k) {
                            h.push(k, step);
                            model.push((k, step));
                        }
                    }
                    2 if !model.is_empty() => {
                        let k = next_key(&mut rng);
                        if !model.iter().any(|e| e.0 == k) {
                            model.sort_unstable();
                            model[0] = (k, step);
                            h.replace_top(k, step);
                        }
                    }
                    _ => {
                        model.sort_unstable();
                        if !model.is_empty() {
                            model.remove(0);
                        }
                        h.pop_top();
                    }
                }
                model.sort_unstable();
                assert_eq!(h.len(), model.len());
                assert_eq!(h.top(), model.first().copied());
            }
        }
    }
}
