//! Converting trace files written by an older schema to the current one, in place, and giving
//! traces recorded before the CPU tracks existed their CPU tracks.

use std::path::Path;

use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use rustc_hash::FxHashMap;

use crate::codec::{self, ColumnBuffer, DecodedChunk, EncodeScratch};
use crate::error::{Result, SqlContext, StoreError};
use crate::model::{
    Cpu, Event, EventCategory, EventKind, ON_CPU_TYPE, ProducerId, ProducerKind, RUNNING_TYPE,
    cpu_track_slice, cpu_track_types,
};
use crate::schema::{SCHEMA_VERSION, TRACE_APPLICATION_ID};
use crate::summary::summary_widening;
use crate::summary::{self, SummaryAcc};

/// What [`upgrade_trace`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpgradeReport {
    /// The schema version the file had.
    pub from_version: i64,
    /// The version it has now ([`SCHEMA_VERSION`]).
    pub to_version: i64,
    /// Events whose summary was rebuilt (every event of the trace).
    pub events: u64,
    /// Summary rows written.
    pub summary_rows: u64,
    /// What became of the trace's CPU tracks.
    pub cpu_tracks: CpuTracks,
}

/// The CPU tracks of a trace being upgraded (`SCHEMA.md`, CPU tracks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuTracks {
    /// The trace has them (written with them, or upgraded before): left alone.
    Present,
    /// Derived now from the trace's `running` states, by the rule live ingest writes them with
    /// ([`cpu_track_slice`]): `slices` events appended under new ids (every earlier event keeps
    /// its id), on `cpus` CPU producers.
    Derived {
        /// Events appended (`on_cpu` and `cpu_idle` states).
        slices: u64,
        /// CPUs that got a track.
        cpus: u32,
    },
    /// The trace holds no `running` states (no context switches were recorded, or it is not a
    /// capture of the collector's): there is nothing to derive them from.
    NoSchedule,
}

/// The `ingest_stat` row that counts the CPU-track slices an upgrade derived.
pub const DERIVED_CPU_SLICES_STAT: &str = "cpu_track_slices_derived";

/// Converts a trace file of an older schema version to [`SCHEMA_VERSION`] in place, and derives
/// the CPU tracks of a trace recorded before them, in one transaction (an interrupted upgrade,
/// however it is interrupted, leaves the file as it was).
///
/// Version 1 → 2: the chunks are kept byte for byte (event ids, and the analysis results that
/// name them, stay valid); the summary is rebuilt from them in format 2 and the chunk lookup
/// index gains the columns it filters on. Version 2 → 3: the table of chunk dictionaries is
/// added (empty: version 2 chunks name none; this build also reads version 2 files as they
/// are).
///
/// CPU tracks: a trace whose `running` states hold its scheduling but that has no `on_cpu` type
/// gets one slice per `running` state, by the rule live ingest uses ([`cpu_track_slice`]), in
/// new chunks appended after the existing ones (every event keeps its id), with the stream
/// counts, the summary (rebuilt from every chunk) and the event count made to include them.
///
/// A file already at the current version with its CPU tracks (or nothing to derive them from) is
/// left alone, untouched; so a second upgrade changes nothing. A trace a writer holds now is
/// refused.
pub fn upgrade_trace(path: impl AsRef<Path>) -> Result<UpgradeReport> {
    let path = path.as_ref();
    if !path.is_file() {
        return Err(StoreError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
        });
    }
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .ctx(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .ctx(path)?;
    let not_store = |detail: String| StoreError::NotAStore {
        path: path.to_path_buf(),
        expected_kind: "trace",
        detail,
    };
    let app: i32 = conn
        .pragma_query_value(None, "application_id", |r| r.get(0))
        .map_err(|e| not_store(e.to_string()))?;
    if app != TRACE_APPLICATION_ID {
        return Err(not_store(format!(
            "application_id is {app:#x}, expected {TRACE_APPLICATION_ID:#x}"
        )));
    }
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(|e| not_store(e.to_string()))?;
    if !(1..=SCHEMA_VERSION).contains(&version) {
        return Err(StoreError::SchemaVersion {
            path: path.to_path_buf(),
            found: version,
            expected: SCHEMA_VERSION,
        });
    }
    let event_count = |conn: &Connection| -> Result<u64> {
        Ok(conn
            .query_row("SELECT event_count FROM trace_info WHERE id = 1", [], |r| {
                r.get::<_, i64>(0)
            })
            .map_err(|e| not_store(e.to_string()))? as u64)
    };
    let mut report = UpgradeReport {
        from_version: version,
        to_version: SCHEMA_VERSION,
        events: 0,
        summary_rows: 0,
        cpu_tracks: CpuTracks::NoSchedule,
    };
    // None: to derive.
    let tracks = cpu_tracks_of(&conn, path)?;
    if let Some(t) = tracks {
        report.cpu_tracks = t;
    }
    if version == SCHEMA_VERSION && tracks.is_some() {
        report.events = event_count(&conn)?;
        return Ok(report);
    }
    // Appending to a trace being captured would race its writer's chunk ids and summary.
    if crate::lock::is_being_written(path)? {
        return Err(StoreError::InvalidRequest(format!(
            "{} is being written (a capture or import holds it): upgrade it once it is finished",
            path.display()
        )));
    }
    conn.execute_batch("BEGIN IMMEDIATE").ctx(path)?;
    let done = (|| {
        if version == 1 {
            v1_to_v2(&conn, path, &mut report)?;
        }
        if version < 3 {
            v2_to_v3(&conn, path)?;
        }
        if tracks.is_none() {
            let (slices, cpus, rows) = derive_cpu_tracks(&conn, path)?;
            report.cpu_tracks = CpuTracks::Derived { slices, cpus };
            report.summary_rows = rows;
        }
        report.events = event_count(&conn)?;
        Ok(())
    })();
    match done {
        Ok(()) => conn.execute_batch("COMMIT").ctx(path)?,
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            return Err(e);
        }
    }
    // Leave one self-contained file behind.
    let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
    Ok(report)
}

/// Whether the trace has its CPU tracks ([`CpuTracks::Present`]), has nothing to derive them
/// from ([`CpuTracks::NoSchedule`]), or needs them derived (`None`).
fn cpu_tracks_of(conn: &Connection, path: &Path) -> Result<Option<CpuTracks>> {
    // The collector declares `on_cpu` in every trace it writes since the CPU tracks exist (and an
    // upgrade declares it with the tracks it derives), whether or not a thread then ran.
    let declared: Option<i64> = conn
        .query_row(
            "SELECT 1 FROM event_type WHERE id = ?1",
            [ON_CPU_TYPE],
            |r| r.get(0),
        )
        .optional()
        .ctx(path)?;
    if declared.is_some() {
        return Ok(Some(CpuTracks::Present));
    }
    // `running` as the collector's reconstruction declares it (an importer of another format may
    // use the id for something else), with at least one chunk holding such states.
    let running: Option<(String, i64)> = conn
        .query_row(
            "SELECT name, category FROM event_type WHERE id = ?1",
            [RUNNING_TYPE],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .ctx(path)?;
    let is_running = running.is_some_and(|(name, category)| {
        name == "running" && category == i64::from(EventCategory::State.code())
    });
    if !is_running || !has_running_chunks(conn, path)? {
        return Ok(Some(CpuTracks::NoSchedule));
    }
    Ok(None)
}

/// Whether a chunk lists [`RUNNING_TYPE`] among its types.
fn has_running_chunks(conn: &Connection, path: &Path) -> Result<bool> {
    let mut st = conn
        .prepare("SELECT types FROM chunk WHERE stream >> 24 = ?1")
        .ctx(path)?;
    let mut rows = st.query([EventCategory::State.code()]).ctx(path)?;
    while let Some(r) = rows.next().ctx(path)? {
        let types: String = r.get(0).ctx(path)?;
        if crate::schema::parse_ids(&types).contains(&RUNNING_TYPE) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// One stream's CPU-track slices being gathered into chunks.
struct SliceStream {
    buf: ColumnBuffer,
    cpu: Cpu,
    class: u32,
    chunks: i64,
    events: i64,
    max_span: i64,
}

/// Appends the CPU-track slices of every `running` state (inside the caller's transaction) and
/// rebuilds the summary over the old and new events. Returns (slices, CPUs with a track, summary
/// rows).
fn derive_cpu_tracks(conn: &Connection, path: &Path) -> Result<(u64, u32, u64)> {
    let io = |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    };
    for ty in cpu_track_types() {
        conn.execute(
            "INSERT OR REPLACE INTO event_type (id, name, category) VALUES (?1, ?2, ?3)",
            params![ty.id, ty.name, ty.category.code()],
        )
        .ctx(path)?;
        conn.execute(
            "DELETE FROM event_param_type WHERE event_type_id = ?1",
            [ty.id],
        )
        .ctx(path)?;
        for (i, d) in ty.params.iter().enumerate() {
            conn.execute(
                "INSERT INTO event_param_type (event_type_id, position, name, type)
                 VALUES (?1, ?2, ?3, ?4)",
                params![ty.id, i as i64, d.name, d.ty.name()],
            )
            .ctx(path)?;
        }
    }
    // A thread's id on the board is its producer's local id (as the reconstruction stores it);
    // a CPU's track is its `cpu` producer.
    let mut local_ids: FxHashMap<ProducerId, u64> = FxHashMap::default();
    let mut tracks: FxHashMap<Cpu, ProducerId> = FxHashMap::default();
    let mut next_producer: ProducerId = 1;
    {
        let mut st = conn
            .prepare("SELECT id, kind, local_id FROM producer")
            .ctx(path)?;
        let mut rows = st.query([]).ctx(path)?;
        while let Some(r) = rows.next().ctx(path)? {
            let id: ProducerId = r.get(0).ctx(path)?;
            let kind: String = r.get(1).ctx(path)?;
            let local: i64 = r.get(2).ctx(path)?;
            next_producer = next_producer.max(id.saturating_add(1));
            local_ids.insert(id, local as u64);
            if ProducerKind::from_name(&kind) == ProducerKind::Cpu
                && let Ok(cpu) = Cpu::try_from(local)
            {
                tracks.entry(cpu).or_insert(id);
            }
        }
    }
    // New chunks take ids after every existing one, so no stored or saved event id changes.
    let last_chunk: i64 = conn
        .query_row("SELECT coalesce(max(id), 0) FROM chunk", [], |r| r.get(0))
        .ctx(path)?;
    let mut next_chunk = last_chunk + 1;
    let mut streams: FxHashMap<i64, SliceStream> = FxHashMap::default();
    let mut used_tracks: Vec<Cpu> = Vec::new();
    let mut slices = 0u64;
    let mut scratch = EncodeScratch::default();
    let mut compressor = zstd::bulk::Compressor::new(1).map_err(io)?;
    let mut slice = Event::punctual(0, 0, 0, None);
    let mut store = |s: &mut SliceStream, id: i64| -> Result<()> {
        let (blob, meta) = codec::encode_chunk(
            &s.buf,
            EventCategory::State,
            Some(s.cpu),
            &mut scratch,
            &mut compressor,
            None,
            None,
        )
        .map_err(io)?;
        conn.prepare_cached(
            "INSERT INTO chunk (id, stream, t_min, t_max, end_max, count, types, producers, data)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )
        .and_then(|mut st| {
            st.execute(params![
                id,
                codec::stream_id(EventCategory::State, s.class, Some(s.cpu)),
                meta.t_min,
                meta.t_max,
                meta.end_max,
                meta.count,
                crate::schema::join_ids(&meta.types),
                crate::schema::join_ids(&meta.producers),
                blob
            ])
        })
        .ctx(path)?;
        s.chunks += 1;
        s.events += s.buf.len() as i64;
        s.max_span = s.max_span.max(meta.end_max.saturating_sub(meta.t_min));
        s.buf.clear();
        Ok(())
    };
    let mut derive = |chunk: Option<&DecodedChunk>, acc: &mut SummaryAcc| -> Result<()> {
        let Some(chunk) = chunk else {
            // Every chunk read: what is still buffered becomes the last chunks, before the summary
            // is stored.
            let mut ids: Vec<i64> = streams.keys().copied().collect();
            ids.sort_unstable();
            for id in ids {
                if let Some(s) = streams.get_mut(&id).filter(|s| s.buf.len() > 0) {
                    store(s, next_chunk)?;
                    next_chunk += 1;
                }
            }
            return Ok(());
        };
        if chunk.category() != EventCategory::State || !chunk.ty.contains(&RUNNING_TYPE) {
            return Ok(());
        }
        // The reconstruction writes every `running` state with its CPU.
        let Some(cpu) = chunk.cpu else { return Ok(()) };
        let track = match tracks.get(&cpu) {
            Some(&t) => t,
            None => {
                // A CPU whose producer the trace lacks gets one, named as the collector names it.
                let id = next_producer;
                next_producer += 1;
                conn.execute(
                    "INSERT INTO producer (id, parent_id, kind, local_id, name)
                     VALUES (?1, NULL, ?2, ?3, ?4)",
                    params![id, ProducerKind::Cpu.name(), cpu, format!("cpu{cpu}")],
                )
                .ctx(path)?;
                tracks.insert(cpu, id);
                id
            }
        };
        for i in (0..chunk.len()).filter(|&i| chunk.ty[i] == RUNNING_TYPE) {
            let thread = chunk.producer[i];
            let tid = local_ids.get(&thread).copied().unwrap_or(u64::from(thread));
            if !cpu_track_slice(
                &mut slice,
                track,
                cpu,
                thread,
                tid,
                chunk.ts[i],
                chunk.end[i],
            ) {
                continue;
            }
            let EventKind::State { end, .. } = slice.kind else {
                continue;
            };
            acc.add(slice.ts, end, true, slice.type_id, slice.producer);
            let class = codec::duration_class(end.saturating_sub(slice.ts));
            let stream = codec::stream_id(EventCategory::State, class, Some(cpu));
            let s = streams.entry(stream).or_insert_with(|| SliceStream {
                buf: ColumnBuffer::default(),
                cpu,
                class,
                chunks: 0,
                events: 0,
                max_span: 0,
            });
            s.buf.push(&slice);
            slices += 1;
            if !used_tracks.contains(&cpu) {
                used_tracks.push(cpu);
            }
            if s.buf.len() >= codec::MAX_CHUNK_EVENTS
                || s.buf.span() > codec::DEFAULT_MAX_CHUNK_SPAN
            {
                store(s, next_chunk)?;
                next_chunk += 1;
            }
        }
        Ok(())
    };
    let dicts = StoredDictionaries {
        conn,
        cache: Default::default(),
    };
    let (_, rows) = summary_from_chunks_with(conn, path, &dicts, last_chunk, &mut derive)?;
    for (id, s) in &streams {
        let changed = conn
            .execute(
                "UPDATE stream SET chunk_count = chunk_count + ?2, event_count = event_count + ?3,
                     max_span = max(max_span, ?4) WHERE id = ?1",
                params![id, s.chunks, s.events, s.max_span],
            )
            .ctx(path)?;
        if changed == 0 {
            conn.execute(
                "INSERT INTO stream (id, category, duration_class, cpu, max_span, chunk_count, event_count)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    id,
                    EventCategory::State.code(),
                    s.class,
                    s.cpu,
                    s.max_span,
                    s.chunks,
                    s.events
                ],
            )
            .ctx(path)?;
        }
    }
    conn.execute(
        "UPDATE trace_info SET event_count = event_count + ?1 WHERE id = 1",
        [slices as i64],
    )
    .ctx(path)?;
    conn.execute(
        "INSERT OR REPLACE INTO ingest_stat (name, value, description) VALUES (?1, ?2, ?3)",
        params![
            DERIVED_CPU_SLICES_STAT,
            slices as i64,
            "CPU-track slices (on_cpu, cpu_idle) derived by `socscope upgrade` from the running \
             states of a trace recorded before the CPU tracks"
        ],
    )
    .ctx(path)?;
    Ok((slices, used_tracks.len() as u32, rows))
}

/// Adds the (empty) table of chunk dictionaries.
fn v2_to_v3(conn: &Connection, path: &Path) -> Result<()> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS chunk_dict (
            id              INTEGER PRIMARY KEY,
            stream          INTEGER NOT NULL,
            data            BLOB    NOT NULL
        );",
    )
    .ctx(path)?;
    conn.pragma_update(None, "user_version", SCHEMA_VERSION)
        .ctx(path)
}

fn v1_to_v2(conn: &Connection, path: &Path, report: &mut UpgradeReport) -> Result<()> {
    conn.execute_batch(
        "DROP INDEX IF EXISTS chunk_by_stream_time;
         CREATE INDEX chunk_by_stream_time ON chunk(stream, t_min, t_max, end_max);",
    )
    .ctx(path)?;
    let (events, rows) = summary_from_chunks(conn, path, &codec::NoDictionaries)?;
    report.events = events;
    report.summary_rows = rows;
    conn.pragma_update(None, "user_version", 2).ctx(path)?;
    Ok(())
}

/// The stored dictionaries of a trace being rewritten (or checked by a repair), read on demand.
pub(crate) struct StoredDictionaries<'c> {
    conn: &'c Connection,
    cache: std::cell::RefCell<std::collections::HashMap<u64, codec::ReadDictionary>>,
}

impl<'c> StoredDictionaries<'c> {
    pub(crate) fn new(conn: &'c Connection) -> Self {
        Self {
            conn,
            cache: Default::default(),
        }
    }
}

impl codec::Dictionaries for StoredDictionaries<'_> {
    fn dictionary(&self, id: u64) -> std::result::Result<codec::ReadDictionary, String> {
        if let Some(d) = self.cache.borrow().get(&id) {
            return Ok(d.clone());
        }
        let key = i64::try_from(id).map_err(|_| format!("dictionary id {id} out of range"))?;
        let bytes: Vec<u8> = self
            .conn
            .query_row("SELECT data FROM chunk_dict WHERE id = ?1", [key], |r| {
                r.get(0)
            })
            .map_err(|e| format!("dictionary {id}: {e}"))?;
        let d = codec::DictionaryData::new(id, &bytes)?;
        self.cache.borrow_mut().insert(id, d.clone());
        Ok(d)
    }
}

/// Rebuilds a current-version trace's summary from its chunks (inside the caller's transaction):
/// after chunks were removed by a repair. Returns (events, summary rows).
pub(crate) fn rebuild_summary(conn: &Connection, path: &Path) -> Result<(u64, u64)> {
    let dicts = StoredDictionaries {
        conn,
        cache: Default::default(),
    };
    summary_from_chunks(conn, path, &dicts)
}

/// Replaces the summary by one computed from every chunk, at the finest width the writer would
/// have reached. Returns (events, summary rows).
fn summary_from_chunks(
    conn: &Connection,
    path: &Path,
    dicts: &dyn codec::Dictionaries,
) -> Result<(u64, u64)> {
    summary_from_chunks_with(conn, path, dicts, i64::MAX, &mut |_, _| Ok(()))
}

/// [`summary_from_chunks`] over the chunks up to id `last_chunk`, showing each decoded chunk to
/// `visit` (which may add events of its own to the summary, and store chunks after `last_chunk`),
/// and `None` once every chunk was read, before the summary is stored.
fn summary_from_chunks_with(
    conn: &Connection,
    path: &Path,
    dicts: &dyn codec::Dictionaries,
    last_chunk: i64,
    visit: &mut dyn FnMut(Option<&DecodedChunk>, &mut SummaryAcc) -> Result<()>,
) -> Result<(u64, u64)> {
    let mut rows_written = 0u64;
    let levels: u32 = conn
        .query_row(
            "SELECT summary_levels FROM trace_info WHERE id = 1",
            [],
            |r| r.get(0),
        )
        .ctx(path)?;
    if levels == 0 || levels > 40 {
        return Err(StoreError::InvalidValue {
            path: path.to_path_buf(),
            detail: format!("{levels} summary levels"),
        });
    }
    let base = summary::DEFAULT_BASE_SHIFT.min(62 - levels);
    let mut acc = SummaryAcc::bounded(base, levels, summary::DEFAULT_MAX_BUCKETS);
    let mut dec = crate::codec::Decompressor::new().map_err(|source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut chunk = DecodedChunk::default();
    {
        let mut st = conn
            .prepare("SELECT id, data FROM chunk WHERE id <= ?1 ORDER BY id")
            .ctx(path)?;
        let mut rows = st.query([last_chunk]).ctx(path)?;
        while let Some(r) = rows.next().ctx(path)? {
            let id: i64 = r.get(0).ctx(path)?;
            let corrupt = |detail: String| StoreError::CorruptChunk {
                path: path.to_path_buf(),
                chunk_id: id,
                detail,
            };
            let blob = r
                .get_ref(1)
                .ctx(path)?
                .as_blob()
                .map_err(|e| corrupt(e.to_string()))?;
            codec::decode_chunk(blob, &mut dec, dicts, &mut chunk).map_err(corrupt)?;
            let is_state = chunk.category() == EventCategory::State;
            for i in 0..chunk.len() {
                let end = if is_state { chunk.end[i] } else { chunk.ts[i] };
                acc.add(chunk.ts[i], end, is_state, chunk.ty[i], chunk.producer[i]);
            }
            visit(Some(&chunk), &mut acc)?;
        }
    }
    visit(None, &mut acc)?;
    let events = acc.events;
    // The finest width the writer would have reached (levels beyond are computed to choose it).
    let extra = acc.headroom().min(levels - 1);
    let rows = acc.drain_buckets(levels + extra);
    let mut cells = vec![0u64; (levels + extra) as usize];
    for r in &rows {
        cells[r.level as usize] += r.cells.len() as u64;
    }
    let k = summary_widening(acc.events, &cells, acc.shift, acc.span(), extra);
    conn.execute_batch("DELETE FROM summary;").ctx(path)?;
    let mut compressor = zstd::bulk::Compressor::new(1).map_err(|source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut scratch = Vec::new();
    {
        let mut put = conn
            .prepare("INSERT INTO summary (level, bucket, data) VALUES (?1, ?2, ?3)")
            .ctx(path)?;
        for r in rows.iter().filter(|r| r.level >= k && r.level < k + levels) {
            let data = summary::encode_cells(&r.cells, &mut scratch, &mut compressor).map_err(
                |source| StoreError::Io {
                    path: path.to_path_buf(),
                    source,
                },
            )?;
            put.execute(params![r.level - k, r.bucket, data])
                .ctx(path)?;
            rows_written += 1;
        }
    }
    conn.execute(
        "UPDATE trace_info SET summary_base_shift = ?1 WHERE id = 1",
        [acc.shift + k],
    )
    .ctx(path)?;
    Ok((events, rows_written))
}
