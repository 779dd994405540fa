//! The incremental trace writer used by the collector and the importers.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::{Connection, params};

use crate::codec::{self, ColumnBuffer, EncodeScratch};
use crate::error::{Result, SqlContext, StoreError};
use crate::model::{
    Event, EventCategory, EventKind, EventType, IngestStat, LossRecord, Producer, TraceHeader,
    TraceInfo,
};
use crate::recovery;
use crate::schema::{self, TRACE_APPLICATION_ID, TRACE_DDL};
use crate::summary::{self, SummaryAcc, summary_widening};
use rustc_hash::FxHashMap;

/// Tuning of a [`TraceWriter`]; the defaults are what the measurements in `ARCHITECTURE.md`
/// chose.
#[derive(Debug, Clone)]
pub struct WriterConfig {
    /// Events per chunk (at most 4096).
    pub chunk_events: usize,
    /// Longest time between two commits while events keep arriving.
    pub commit_interval: Duration,
    /// zstd level of the chunks.
    pub zstd_level: i32,
    /// Finest summary bucket is `2^summary_base_shift` ns.
    pub summary_base_shift: u32,
    /// Number of summary levels (each doubles the bucket width).
    pub summary_levels: u32,
    /// A chunk is also closed when its events span more trace time than this, so that a
    /// sparse stream does not make short queries decode a chunk covering minutes.
    pub max_chunk_span: i64,
    /// Maintain the summary (turn off only to measure the raw chunk-write rate).
    pub summary: bool,
    /// Most finest-level buckets the trace's time span may cover: beyond it the writer doubles
    /// the finest bucket width (and `trace_info.summary_base_shift`) until the span fits, so that
    /// long states cost a bounded number of summary rows. `0`: the width never changes.
    pub summary_max_buckets: i64,
    /// Train a zstd dictionary per stream on its first closed chunks and compress its later
    /// chunks with it, in smaller blocks (see [`DICT_SAMPLE_BYTES`]).
    pub dictionaries: bool,
    /// Train dictionaries on a background thread (one at a time per writer, at most
    /// [`MAX_TRAININGS`] in the process), so that ingest never waits for one (a few ms each, see `dict_train`);
    /// `false` trains them in the call that completes the samples, which makes the chunks that
    /// use one depend only on the events and the commits.
    pub train_in_background: bool,
    /// Events a stream must have stored before its dictionary is trained (on the samples of its
    /// first chunks, gathered meanwhile); `0`: as soon as the samples are there. Training takes
    /// a few ms of CPU (10–30 ms with zstd's default trainer) and stores up to 16 KiB: paid back only by a stream that goes on for many
    /// more chunks. A live capture cannot know how long a stream will last and trains early; an
    /// import trains only the streams that have shown they are long (see
    /// `IMPORT_DICT_MIN_EVENTS` in the collector).
    pub dict_min_events: i64,
    /// Make each commit durable (SQLite's `synchronous=NORMAL` in WAL mode): a crash or a power
    /// cut keeps every committed event, which a live capture needs. `false`: no WAL, the rollback
    /// journal in memory, nothing synced until [`TraceWriter::finish`], which syncs the finished
    /// file and its directory once; for a file that is worth nothing before it is finished (an
    /// import: removed when it fails, run again after a crash). A crash or a power cut while such
    /// a file is written may leave it unreadable (never once `finish` has returned).
    pub sync_commits: bool,
}

/// Block bodies a stream's closed chunks must have given before its dictionary is trained
/// (about 8 k events at the 16 bytes a set-top box's event takes decoded): enough for zstd to
/// find what the stream's blocks share, little enough that training takes a few ms (about 2 ms
/// each on an LTTng kernel stream, `dict_train`).
pub const DICT_SAMPLE_BYTES: usize = 128 << 10;

/// Summary cells the writer holds before it commits whatever the commit interval (about 50 bytes
/// each, twice that while a first commit widens the summary): a fast import, which commits seldom,
/// held all its 2 ms buckets until its end (570 MB for 2 M user-space events).
pub const MAX_PENDING_SUMMARY_CELLS: usize = 1 << 17;

/// Largest dictionary a stream gets.
pub const DICT_BYTES: usize = 16 << 10;

/// Dictionary trainings running at once in the process, whatever the number of writers (each
/// takes under 1 MB beside its samples while it runs): a collector storing many boards trains them in turn.
pub const MAX_TRAININGS: usize = 2;

/// Dictionaries trained by one writer, lent to the next writers of the same source: the windows a
/// flight recorder saves from one board's session are that board's stream, cut in pieces, so the
/// dictionary trained on its first window fits the later ones as well. A writer that has
/// dictionaries to share takes a stream's one when it opens the stream's first chunk that could use
/// it (stored in its own file as if trained there) instead of gathering samples and training again;
/// a stream the shelf has none for trains as usual and puts its dictionary on the shelf.
#[derive(Clone, Default)]
pub struct SharedDictionaries(
    std::sync::Arc<std::sync::Mutex<FxHashMap<i64, std::sync::Arc<[u8]>>>>,
);

impl std::fmt::Debug for SharedDictionaries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SharedDictionaries({} streams)", self.len())
    }
}

impl SharedDictionaries {
    /// An empty shelf.
    pub fn new() -> Self {
        Self::default()
    }

    /// Streams that have a dictionary on the shelf.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no dictionary has been put on the shelf yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FxHashMap<i64, std::sync::Arc<[u8]>>> {
        // A writer that panicked while holding the lock left a map that is still whole.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn get(&self, stream: i64) -> Option<std::sync::Arc<[u8]>> {
        self.lock().get(&stream).cloned()
    }

    fn put(&self, stream: i64, dict: &[u8]) {
        self.lock().entry(stream).or_insert_with(|| dict.into());
    }
}

/// Trainings running now (see [`MAX_TRAININGS`]).
static TRAININGS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A slot among the [`MAX_TRAININGS`], given back when dropped (also if training panics).
struct TrainingSlot;

impl TrainingSlot {
    fn take() -> Option<Self> {
        use std::sync::atomic::Ordering;
        TRAININGS
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_TRAININGS).then_some(n + 1)
            })
            .ok()
            .map(|_| Self)
    }
}

impl Drop for TrainingSlot {
    fn drop(&mut self) {
        TRAININGS.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

pub use crate::codec::DEFAULT_MAX_CHUNK_SPAN;

impl Default for WriterConfig {
    fn default() -> Self {
        Self {
            chunk_events: codec::MAX_CHUNK_EVENTS,
            commit_interval: Duration::from_millis(250),
            zstd_level: 1,
            summary_base_shift: summary::DEFAULT_BASE_SHIFT,
            summary_levels: summary::DEFAULT_LEVELS,
            max_chunk_span: DEFAULT_MAX_CHUNK_SPAN,
            summary: true,
            summary_max_buckets: summary::DEFAULT_MAX_BUCKETS,
            dictionaries: true,
            train_in_background: true,
            dict_min_events: 0,
            sync_commits: true,
        }
    }
}

struct StreamBuf {
    id: i64,
    category: EventCategory,
    class: u32,
    cpu: Option<u16>,
    buf: ColumnBuffer,
    max_span: i64,
    chunk_count: i64,
    event_count: i64,
    dirty: bool,
    /// The stream's open tail chunk, already stored: its row id and how many of the buffered
    /// events it holds. Commits rewrite it in place until it is full, so that a slow stream
    /// makes full chunks while readers still see its events within a commit interval.
    tail: Option<(i64, usize)>,
    /// The tail chunk's full blocks as last stored, reused by the next rewrite.
    tail_blocks: codec::TailBlocks,
    /// The stream's dictionary, or the samples it will be trained on.
    dict: StreamDict,
    /// Whether the open chunk is compressed with the dictionary (decided when it is first
    /// stored, kept while it is rewritten).
    chunk_dict: bool,
}

/// A stream's zstd dictionary: block bodies of its first closed chunks are gathered until there
/// are [`DICT_SAMPLE_BYTES`], then the dictionary is trained (see
/// [`WriterConfig::train_in_background`]), stored with the chunks of the moment it is ready, and
/// the stream's chunks opened after that are compressed with it.
enum StreamDict {
    Gathering {
        bytes: Vec<u8>,
        sizes: Vec<usize>,
    },
    /// Being trained by the writer's training thread.
    Training,
    Ready(codec::WriteDictionary),
    /// Dictionaries are off, or zstd could not train one on the samples: no dictionary.
    Off,
}

/// A dictionary being trained for a stream (its index) on another thread.
type Training = (usize, std::thread::JoinHandle<Option<Vec<u8>>>);

/// Writes one trace file incrementally: events go into per-stream column buffers, full
/// buffers become compressed chunks, and everything is committed at least every
/// [`WriterConfig::commit_interval`] so that readers follow a growing, consistent prefix.
///
/// Call [`TraceWriter::maybe_commit`] from time to time when events stop arriving, and
/// [`TraceWriter::finish`] at the end; dropping the writer commits what it holds.
pub struct TraceWriter {
    conn: Connection,
    path: PathBuf,
    config: WriterConfig,
    streams: Vec<StreamBuf>,
    stream_index: FxHashMap<i64, usize>,
    last_stream: Option<(i64, usize)>,
    in_tx: bool,
    last_commit: Instant,
    pushes_since_check: u32,
    summary: SummaryAcc,
    scratch: EncodeScratch,
    compressor: zstd::bulk::Compressor<'static>,
    decompressor: crate::codec::Decompressor,
    /// The one dictionary training under way, if any.
    training: Option<Training>,
    /// Dictionaries shared with other writers of the same source, if any (see
    /// [`TraceWriter::share_dictionaries`]).
    shared_dicts: Option<SharedDictionaries>,
    summary_scratch: Vec<u8>,
    /// Cells stored per summary level (what decides when the finest width doubles).
    stored_cells: Vec<u64>,
    committed: TraceInfo,
    pending_t_min: i64,
    pending_t_max: i64,
    pending_events: u64,
    finished: bool,
    /// The write that failed, if one did (and whether the disk was full): the writer rolled back
    /// what it had not committed and refuses every write since, so that the file keeps exactly its
    /// last commit. Writing on after a failure is what made a full disk leave chunks naming a
    /// dictionary that the failed transaction had held (SQLite rolls the whole transaction back on
    /// `SQLITE_FULL`, and the statements that followed ran outside any transaction).
    failed: Option<(String, bool)>,
    /// Last, so that it is released after the connection closes (see `recovery`).
    _lock: recovery::WriterLock,
}

impl TraceWriter {
    /// Creates a new trace file at `path` (which must not exist) with default tuning.
    pub fn create(path: impl AsRef<Path>, meta: &TraceHeader) -> Result<Self> {
        Self::create_with(path, meta, WriterConfig::default())
    }

    /// Creates a new trace file with explicit tuning.
    pub fn create_with(
        path: impl AsRef<Path>,
        meta: &TraceHeader,
        config: WriterConfig,
    ) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        if config.chunk_events == 0 || config.chunk_events > codec::MAX_CHUNK_EVENTS {
            return Err(StoreError::InvalidRequest(format!(
                "chunk_events must be in 1..={}",
                codec::MAX_CHUNK_EVENTS
            )));
        }
        if config.summary_levels == 0 || config.summary_base_shift + config.summary_levels > 62 {
            return Err(StoreError::InvalidRequest(
                "summary levels must be ≥ 1 and base_shift + levels ≤ 62".into(),
            ));
        }
        let conn = schema::create(&path, TRACE_DDL, TRACE_APPLICATION_ID, config.sync_commits)?;
        let lock = recovery::lock_for_writing(&path)?;
        conn.execute(
            "INSERT INTO trace_info (id, trace_type, board, soc, os, application, cpus, tick_rate_hz,
                start_unix_ns, description, processed, t_min, t_max, event_count, complete, finished,
                summary_base_shift, summary_levels)
             VALUES (1, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 0, 0, 0, 0, 0, ?11, ?12)",
            params![
                meta.trace_type,
                meta.board,
                meta.soc,
                meta.os,
                meta.application,
                meta.cpus,
                meta.tick_rate_hz as i64,
                meta.start_unix_ns,
                meta.description,
                meta.processed,
                config.summary_base_shift,
                config.summary_levels
            ],
        )
        .ctx(&path)?;
        {
            let mut st = conn
                .prepare_cached(
                    "INSERT OR REPLACE INTO trace_param (name, type, value) VALUES (?1, ?2, ?3)",
                )
                .ctx(&path)?;
            for (name, value) in &meta.params {
                st.execute(params![name, value.param_type().name(), value.to_string()])
                    .ctx(&path)?;
            }
        }
        let compressor =
            zstd::bulk::Compressor::new(config.zstd_level).map_err(|source| StoreError::Io {
                path: path.clone(),
                source,
            })?;
        let decompressor = crate::codec::Decompressor::new().map_err(|source| StoreError::Io {
            path: path.clone(),
            source,
        })?;
        Ok(Self {
            conn,
            decompressor,
            training: None,
            shared_dicts: None,
            summary_scratch: Vec::new(),
            stored_cells: vec![0; config.summary_levels as usize],
            summary: SummaryAcc::bounded(
                config.summary_base_shift,
                config.summary_levels,
                config.summary_max_buckets,
            ),
            config,
            streams: Vec::new(),
            stream_index: FxHashMap::default(),
            last_stream: None,
            in_tx: false,
            last_commit: Instant::now(),
            pushes_since_check: 0,
            scratch: EncodeScratch::default(),
            compressor,
            committed: TraceInfo {
                meta: meta.clone(),
                ..TraceInfo::default()
            },
            pending_t_min: i64::MAX,
            pending_t_max: i64::MIN,
            pending_events: 0,
            finished: false,
            failed: None,
            path,
            _lock: lock,
        })
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What readers can see now (the last commit).
    pub fn info(&self) -> &TraceInfo {
        &self.committed
    }

    /// Takes streams' dictionaries from `shelf` instead of training them, and puts the ones this
    /// writer trains on it (see [`SharedDictionaries`]). Without dictionaries
    /// ([`WriterConfig::dictionaries`] off) the shelf is not used.
    pub fn share_dictionaries(&mut self, shelf: SharedDictionaries) {
        if self.config.dictionaries {
            self.shared_dicts = Some(shelf);
        }
    }

    /// Runs one write: refused once a write has failed; a failure rolls back what was not committed
    /// and stops the writer (see [`TraceWriter::failed`]).
    #[inline]
    fn guarded<T>(&mut self, write: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        if let Some((first, disk_full)) = &self.failed {
            return Err(StoreError::WriterFailed {
                path: self.path.clone(),
                first: first.clone(),
                disk_full: *disk_full,
            });
        }
        match write(self) {
            Ok(v) => Ok(v),
            Err(e) => {
                self.stop(&e);
                Err(e)
            }
        }
    }

    /// A write failed: whatever SQLite kept of the open transaction is rolled back (on a full disk
    /// it may have rolled it back itself) and the writer writes nothing more.
    fn stop(&mut self, error: &StoreError) {
        if self.failed.is_some() {
            return;
        }
        if !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        self.in_tx = false;
        self.failed = Some((error.to_string(), error.is_disk_full()));
    }

    /// Why the writer stopped writing, if a write failed (the file holds its last commit).
    pub fn failed(&self) -> Option<&str> {
        self.failed.as_ref().map(|(why, _)| why.as_str())
    }

    /// Gives the trace up without committing what is buffered: what was not committed is rolled
    /// back, the file keeps its last commit (still live: [`crate::repair`] closes it). For a full
    /// disk, where the room left is kept for closing the traces rather than for their last events.
    pub fn abandon(mut self) {
        if !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        self.in_tx = false;
        self.failed = Some(("abandoned".into(), false));
    }

    fn begin(&mut self) -> Result<()> {
        if !self.in_tx {
            self.conn.execute_batch("BEGIN").ctx(&self.path)?;
            self.in_tx = true;
        }
        Ok(())
    }

    /// Registers or replaces an event type (at any time, also after its events).
    pub fn add_event_type(&mut self, ty: &EventType) -> Result<()> {
        self.guarded(|w| w.add_event_type_(ty))
    }

    fn add_event_type_(&mut self, ty: &EventType) -> Result<()> {
        self.begin()?;
        let p = &self.path;
        // Cached: an import registers dozens of types, and preparing a statement costs more than
        // running it.
        self.conn
            .prepare_cached(
                "INSERT OR REPLACE INTO event_type (id, name, category) VALUES (?1, ?2, ?3)",
            )
            .and_then(|mut st| st.execute(params![ty.id, ty.name, ty.category.code()]))
            .ctx(p)?;
        self.conn
            .prepare_cached("DELETE FROM event_param_type WHERE event_type_id = ?1")
            .and_then(|mut st| st.execute([ty.id]))
            .ctx(p)?;
        let mut st = self
            .conn
            .prepare_cached(
                "INSERT INTO event_param_type (event_type_id, position, name, type) VALUES (?1, ?2, ?3, ?4)",
            )
            .ctx(p)?;
        for (i, d) in ty.params.iter().enumerate() {
            st.execute(params![ty.id, i as i64, d.name, d.ty.name()])
                .ctx(p)?;
        }
        Ok(())
    }

    /// Registers or replaces a producer (at any time, also after its events).
    pub fn add_producer(&mut self, producer: &Producer) -> Result<()> {
        self.guarded(|w| w.add_producer_(producer))
    }

    fn add_producer_(&mut self, producer: &Producer) -> Result<()> {
        self.begin()?;
        self.conn
            .prepare_cached(
                "INSERT OR REPLACE INTO producer (id, parent_id, kind, local_id, name) VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .and_then(|mut st| {
                st.execute(params![
                    producer.id,
                    producer.parent,
                    producer.kind.name(),
                    producer.local_id,
                    producer.name
                ])
            })
            .ctx(&self.path)?;
        Ok(())
    }

    /// Records lost events.
    pub fn add_loss(&mut self, loss: &LossRecord) -> Result<()> {
        self.guarded(|w| w.add_loss_(loss))
    }

    fn add_loss_(&mut self, loss: &LossRecord) -> Result<()> {
        self.begin()?;
        self.conn
            .prepare_cached(
                "INSERT INTO loss (cpu, ts, count, seq_from, seq_to, reason) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .and_then(|mut st| {
                st.execute(params![
                    loss.cpu,
                    loss.ts,
                    loss.count as i64,
                    loss.seq_from.map(|v| v as i64),
                    loss.seq_to.map(|v| v as i64),
                    loss.reason
                ])
            })
            .ctx(&self.path)?;
        Ok(())
    }

    /// Sets an ingest counter (replacing its previous value).
    pub fn set_ingest_stat(&mut self, stat: &IngestStat) -> Result<()> {
        self.guarded(|w| w.set_ingest_stat_(stat))
    }

    fn set_ingest_stat_(&mut self, stat: &IngestStat) -> Result<()> {
        self.begin()?;
        self.conn
            .prepare_cached(
                "INSERT OR REPLACE INTO ingest_stat (name, value, description) VALUES (?1, ?2, ?3)",
            )
            .and_then(|mut st| st.execute(params![stat.name, stat.value, stat.description]))
            .ctx(&self.path)?;
        Ok(())
    }

    /// Sets a trace parameter (replacing its previous value): what the catalog lists for the trace
    /// when it is registered next, e.g. the collector's `trigger` tag once a trigger fired.
    pub fn set_param(&mut self, name: &str, value: &crate::model::ParamValue) -> Result<()> {
        self.begin()?;
        self.conn
            .execute(
                "INSERT OR REPLACE INTO trace_param (name, type, value) VALUES (?1, ?2, ?3)",
                params![name, value.param_type().name(), value.to_string()],
            )
            .ctx(&self.path)?;
        let params = &mut self.committed.meta.params;
        match params.iter_mut().find(|(n, _)| n == name) {
            Some((_, v)) => *v = value.clone(),
            None => params.push((name.to_string(), value.clone())),
        }
        Ok(())
    }

    /// Saves an analysis result in the trace being written (committed with its events): what the
    /// collector found while capturing, e.g. the firings of its triggers.
    pub fn save_result(
        &mut self,
        header: &crate::results::AnalysisResult,
        data: &crate::results::AnalysisData,
    ) -> Result<i64> {
        self.begin()?;
        self.conn
            .execute_batch(schema::RESULTS_DDL)
            .ctx(&self.path)?;
        crate::results::insert_result(&self.conn, &self.path, header, data)
    }

    /// Records a file related to the trace; returns its id.
    pub fn add_file(&mut self, path: &str, description: &str) -> Result<i64> {
        self.guarded(|w| w.add_file_(path, description))
    }

    fn add_file_(&mut self, path: &str, description: &str) -> Result<i64> {
        self.begin()?;
        self.conn
            .execute(
                "INSERT INTO file (path, description) VALUES (?1, ?2)",
                params![path, description],
            )
            .ctx(&self.path)?;
        Ok(self.conn.last_insert_rowid())
    }

    #[inline]
    fn stream_for(&mut self, e: &Event) -> usize {
        let category = e.kind.category();
        let class = match e.kind {
            EventKind::State { end, .. } | EventKind::Link { end, .. } => {
                codec::duration_class(end.saturating_sub(e.ts))
            }
            _ => 0,
        };
        let id = codec::stream_id(category, class, e.cpu);
        if let Some((last, idx)) = self.last_stream
            && last == id
        {
            return idx;
        }
        let idx = match self.stream_index.get(&id) {
            Some(&i) => i,
            None => {
                self.streams.push(StreamBuf {
                    id,
                    category,
                    class,
                    cpu: e.cpu,
                    buf: ColumnBuffer::default(),
                    max_span: 0,
                    chunk_count: 0,
                    event_count: 0,
                    dirty: false,
                    tail: None,
                    tail_blocks: codec::TailBlocks::default(),
                    dict: if self.config.dictionaries {
                        StreamDict::Gathering {
                            bytes: Vec::new(),
                            sizes: Vec::new(),
                        }
                    } else {
                        StreamDict::Off
                    },
                    chunk_dict: false,
                });
                let i = self.streams.len() - 1;
                self.stream_index.insert(id, i);
                i
            }
        };
        self.last_stream = Some((id, idx));
        idx
    }

    /// Appends one event. States and links may arrive in any order (typically by end time).
    #[inline]
    pub fn push(&mut self, event: &Event) -> Result<()> {
        self.guarded(|w| w.push_(event))
    }

    #[inline]
    fn push_(&mut self, event: &Event) -> Result<()> {
        if self.config.summary {
            let (end, is_state) = match event.kind {
                EventKind::State { end, .. } => (end, true),
                _ => (event.ts, false),
            };
            self.summary
                .add(event.ts, end, is_state, event.type_id, event.producer);
        }
        let idx = self.stream_for(event);
        let s = &mut self.streams[idx];
        s.buf.push(event);
        if s.buf.len() >= self.config.chunk_events || s.buf.span() > self.config.max_chunk_span {
            self.flush_stream(idx, true)?;
        }
        self.pushes_since_check += 1;
        if self.pushes_since_check >= 256 {
            self.pushes_since_check = 0;
            self.maybe_commit_()?;
        }
        Ok(())
    }

    /// Makes this writer leave its WAL as it is from now on (no checkpoint after a commit or when it is
    /// dropped): on a full disk, folding the WAL in would take room that traces being closed need.
    pub fn keep_wal_on_close(&self) -> Result<()> {
        crate::recovery::keep_wal_on_close(&self.conn).ctx(&self.path)
    }

    /// Commits if the commit interval has passed since the last commit.
    pub fn maybe_commit(&mut self) -> Result<bool> {
        self.guarded(Self::maybe_commit_)
    }

    fn maybe_commit_(&mut self) -> Result<bool> {
        if self.last_commit.elapsed() >= self.config.commit_interval
            || self.summary.map.len() >= MAX_PENDING_SUMMARY_CELLS
        {
            self.commit_()?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Stores the stream's buffered events as its tail chunk (inserted, or rewritten in place
    /// when an earlier commit stored part of them); `close` ends the chunk: the buffer starts
    /// a new one.
    fn flush_stream(&mut self, idx: usize, close: bool) -> Result<()> {
        let s = &mut self.streams[idx];
        let written = s.tail.map_or(0, |t| t.1);
        if s.buf.len() == written {
            if close {
                self.gather_samples(idx)?;
                let s = &mut self.streams[idx];
                s.buf.clear();
                s.tail = None;
                s.tail_blocks.clear();
            }
            return Ok(());
        }
        self.begin()?;
        if self.streams[idx].tail.is_none() {
            // A new chunk: take a dictionary that has become ready, or one another writer of the
            // same source trained.
            self.poll_training()?;
            self.take_shared_dictionary(idx)?;
        }
        let s = &mut self.streams[idx];
        if s.tail.is_none() {
            s.chunk_dict = matches!(s.dict, StreamDict::Ready(_));
        }
        let dict = match &s.dict {
            StreamDict::Ready(d) if s.chunk_dict => Some(d),
            _ => None,
        };
        let (blob, meta) = codec::encode_chunk(
            &s.buf,
            s.category,
            s.cpu,
            &mut self.scratch,
            &mut self.compressor,
            dict,
            Some(&mut s.tail_blocks),
        )
        .map_err(|source| StoreError::Io {
            path: self.path.clone(),
            source,
        })?;
        let types = schema::join_ids(&meta.types);
        let producers = schema::join_ids(&meta.producers);
        let p = &self.path;
        // The tail chunk's row is replaced under the same id; a new chunk gets the next id.
        self.conn
            .prepare_cached(
                "INSERT OR REPLACE INTO chunk (id, stream, t_min, t_max, end_max, count, types, producers, data)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )
            .and_then(|mut st| {
                st.execute(params![
                    s.tail.map(|t| t.0),
                    s.id,
                    meta.t_min,
                    meta.t_max,
                    meta.end_max,
                    meta.count,
                    types,
                    producers,
                    blob
                ])
            })
            .ctx(p)?;
        if s.tail.is_none() {
            s.chunk_count += 1;
        }
        let added = s.buf.len() - written;
        s.max_span = s.max_span.max(meta.end_max.saturating_sub(meta.t_min));
        s.event_count += added as i64;
        s.dirty = true;
        let (t_min, end_max) = (meta.t_min, meta.end_max);
        if close {
            self.gather_samples(idx)?;
            let s = &mut self.streams[idx];
            s.buf.clear();
            s.tail = None;
            s.tail_blocks.clear();
        } else {
            let id = match s.tail {
                Some((id, _)) => id,
                None => self.conn.last_insert_rowid(),
            };
            s.tail = Some((id, s.buf.len()));
        }
        self.pending_t_min = self.pending_t_min.min(t_min);
        self.pending_t_max = self.pending_t_max.max(end_max);
        self.pending_events += added as u64;
        Ok(())
    }

    /// Adds the events of stream `idx`'s chunk being closed to its dictionary samples; once
    /// there are enough, the dictionary is trained (see [`Self::poll_training`]).
    fn gather_samples(&mut self, idx: usize) -> Result<()> {
        let s = &mut self.streams[idx];
        let StreamDict::Gathering { bytes, sizes } = &mut s.dict else {
            return Ok(());
        };
        let limit = DICT_SAMPLE_BYTES;
        if bytes.len() < limit {
            codec::sample_bodies(&s.buf, s.category, &mut self.scratch, bytes, sizes);
            // A bounded sample (a chunk gives up to 4 096 events' bodies): training time grows
            // with it. The block that reaches the bound is the last one kept.
            let mut total = 0;
            let keep = sizes
                .iter()
                .position(|&n| {
                    total += n;
                    total >= limit
                })
                .map_or(sizes.len(), |i| i + 1);
            sizes.truncate(keep);
            bytes.truncate(sizes.iter().sum());
        }
        if bytes.len() >= limit {
            self.poll_training()?;
        }
        Ok(())
    }

    /// Stores the dictionary the training thread has made (or gives up on that stream's when
    /// zstd could not train one), and starts training the next stream whose samples are
    /// complete when the process has a training slot free (else a later call does). Training
    /// inline (no background) finishes here.
    fn poll_training(&mut self) -> Result<()> {
        if let Some((_, handle)) = &self.training
            && !handle.is_finished()
        {
            return Ok(());
        }
        if let Some((idx, handle)) = self.training.take() {
            let dict = handle.join().ok().flatten();
            self.adopt_dictionary(idx, dict)?;
        }
        let min_events = self.config.dict_min_events;
        let ready = self.streams.iter().position(|s| {
            s.event_count >= min_events
                && matches!(&s.dict, StreamDict::Gathering { bytes, .. } if bytes.len() >= DICT_SAMPLE_BYTES)
        });
        let Some(idx) = ready else {
            return Ok(());
        };
        let slot = if self.config.train_in_background {
            match TrainingSlot::take() {
                Some(slot) => Some(slot),
                None => return Ok(()),
            }
        } else {
            None
        };
        let StreamDict::Gathering { bytes, sizes } =
            std::mem::replace(&mut self.streams[idx].dict, StreamDict::Training)
        else {
            return Ok(());
        };
        let train = move || crate::dict_train::train(&bytes, &sizes, DICT_BYTES);
        if let Some(slot) = slot {
            let spawned = std::thread::Builder::new()
                .name("socscope-dict".into())
                .spawn(move || {
                    let _slot = slot;
                    train()
                });
            match spawned {
                Ok(handle) => self.training = Some((idx, handle)),
                // No thread to spare: this stream goes without a dictionary.
                Err(_) => self.streams[idx].dict = StreamDict::Off,
            }
        } else {
            self.adopt_dictionary(idx, train())?;
        }
        Ok(())
    }

    /// Stream `idx` still gathering samples: adopts the dictionary the shelf holds for it, if any.
    fn take_shared_dictionary(&mut self, idx: usize) -> Result<()> {
        let Some(shelf) = &self.shared_dicts else {
            return Ok(());
        };
        let s = &self.streams[idx];
        if !matches!(s.dict, StreamDict::Gathering { .. }) {
            return Ok(());
        }
        if let Some(dict) = shelf.get(s.id) {
            self.adopt_dictionary(idx, Some(dict.to_vec()))?;
        }
        Ok(())
    }

    /// Stores stream `idx`'s trained dictionary (in the open transaction) and makes it the one
    /// its next chunks use; without one, the stream keeps none.
    fn adopt_dictionary(&mut self, idx: usize, dict: Option<Vec<u8>>) -> Result<()> {
        let made = dict.and_then(|d| {
            let cdict = zstd::zstd_safe::CDict::try_create(&d, self.config.zstd_level)?;
            Some((d, cdict))
        });
        let Some((data, cdict)) = made else {
            self.streams[idx].dict = StreamDict::Off;
            return Ok(());
        };
        if let Some(shelf) = &self.shared_dicts {
            shelf.put(self.streams[idx].id, &data);
        }
        self.begin()?;
        let stream = self.streams[idx].id;
        self.conn
            .prepare_cached("INSERT INTO chunk_dict (stream, data) VALUES (?1, ?2)")
            .and_then(|mut st| st.execute(params![stream, data]))
            .ctx(&self.path)?;
        let id = self.conn.last_insert_rowid() as u64;
        self.streams[idx].dict = StreamDict::Ready(codec::WriteDictionary { id, cdict });
        Ok(())
    }

    /// Writes every buffered event as (possibly partial) chunks and commits, so that readers
    /// see everything pushed so far.
    pub fn commit(&mut self) -> Result<()> {
        self.guarded(Self::commit_)
    }

    fn commit_(&mut self) -> Result<()> {
        for i in 0..self.streams.len() {
            self.flush_stream(i, false)?;
        }
        self.begin()?;
        if self.config.summary && self.stored_cells.iter().all(|&n| n == 0) {
            self.widen_summary_before_storing();
        }
        let p = self.path.clone();
        let rebase = self.summary.take_rebase();
        if rebase > 0 {
            self.rebase_summary(rebase)?;
        }
        let buckets = self.summary.drain_buckets(self.config.summary_levels);
        {
            // One row per (level, bucket); a bucket already written by an earlier commit
            // (events arriving late, or a commit inside a bucket) is read back and merged.
            let mut get = self
                .conn
                .prepare_cached("SELECT data FROM summary WHERE level = ?1 AND bucket = ?2")
                .ctx(&p)?;
            let mut put = self
                .conn
                .prepare_cached(
                    "INSERT OR REPLACE INTO summary (level, bucket, data) VALUES (?1, ?2, ?3)",
                )
                .ctx(&p)?;
            let mut old = Vec::new();
            for b in buckets {
                old.clear();
                let mut rows = get.query(params![b.level, b.bucket]).ctx(&p)?;
                if let Some(r) = rows.next().ctx(&p)? {
                    let data =
                        r.get_ref(0)
                            .ctx(&p)?
                            .as_blob()
                            .map_err(|e| StoreError::InvalidValue {
                                path: p.clone(),
                                detail: format!("summary row: {e}"),
                            })?;
                    summary::decode_cells(data, &mut self.decompressor, &mut old).map_err(
                        |detail| StoreError::InvalidValue {
                            path: p.clone(),
                            detail: format!("summary row ({}, {}): {detail}", b.level, b.bucket),
                        },
                    )?;
                }
                drop(rows);
                let before = old.len() as u64;
                let cells = if old.is_empty() {
                    &b.cells
                } else {
                    summary::merge_cells(&mut old, &b.cells);
                    &old
                };
                if let Some(n) = self.stored_cells.get_mut(b.level as usize) {
                    *n = (*n + cells.len() as u64).saturating_sub(before);
                }
                let data =
                    summary::encode_cells(cells, &mut self.summary_scratch, &mut self.compressor)
                        .map_err(|source| StoreError::Io {
                        path: p.clone(),
                        source,
                    })?;
                put.execute(params![b.level, b.bucket, data]).ctx(&p)?;
            }
            let mut st = self
                .conn
                .prepare_cached(
                    "INSERT OR REPLACE INTO stream (id, category, duration_class, cpu, max_span, chunk_count, event_count)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )
                .ctx(&p)?;
            for s in self.streams.iter_mut().filter(|s| s.dirty) {
                st.execute(params![
                    s.id,
                    s.category.code(),
                    s.class,
                    s.cpu,
                    s.max_span,
                    s.chunk_count,
                    s.event_count
                ])
                .ctx(&p)?;
                s.dirty = false;
            }
        }
        let k = self.density_coarsening();
        if k > 0 {
            self.summary.coarsen(k);
            let k = self.summary.take_rebase();
            self.rebase_summary(k)?;
        }
        let mut info = self.committed.clone();
        if self.pending_events > 0 {
            if info.event_count == 0 {
                info.t_min = self.pending_t_min;
                info.t_max = self.pending_t_max;
            } else {
                info.t_min = info.t_min.min(self.pending_t_min);
                info.t_max = info.t_max.max(self.pending_t_max);
            }
            info.event_count += self.pending_events;
        }
        self.conn
            .execute(
                "UPDATE trace_info SET t_min = ?1, t_max = ?2, event_count = ?3 WHERE id = 1",
                params![info.t_min, info.t_max, info.event_count as i64],
            )
            .ctx(&p)?;
        self.conn.execute_batch("COMMIT").ctx(&p)?;
        self.in_tx = false;
        self.committed = info;
        self.pending_events = 0;
        self.pending_t_min = i64::MAX;
        self.pending_t_max = i64::MIN;
        self.last_commit = Instant::now();
        Ok(())
    }

    /// Before any summary row is stored (an import's one commit, at its end): the finest width
    /// doubles now as often as the density rule ([`Self::density_coarsening`]) would make it
    /// double once the rows are stored, so that they are written once at that width. Stored
    /// first, a 600 k-event import's some hundred thousand rows of 2 ms buckets were written,
    /// then moved down and merged into a few hundred: a sixth of its CPU time.
    fn widen_summary_before_storing(&mut self) {
        if self.summary.events < summary::SUMMARY_DENSITY_MIN_EVENTS || self.summary.map.is_empty()
        {
            return;
        }
        let levels = self.config.summary_levels;
        let most = self.summary.headroom().min(levels.saturating_sub(1));
        let cells = self.summary.cells_per_level(levels);
        // The accumulator's width (a pending rebase included), which the stored rows will have.
        let k = summary_widening(
            self.summary.events,
            &cells,
            self.summary.shift,
            self.summary.span(),
            most,
        );
        if k > 0 {
            self.summary.coarsen(k);
        }
    }

    /// How many times the finest summary width should double so that the finest level holds
    /// at most one cell per [`summary::SUMMARY_EVENTS_PER_CELL`] events (0 while it does, or while the
    /// trace is small).
    fn density_coarsening(&self) -> u32 {
        if !self.config.summary {
            return 0;
        }
        let most = self
            .summary
            .headroom()
            .min(self.config.summary_levels.saturating_sub(1));
        summary_widening(
            self.summary.events,
            &self.stored_cells,
            self.config.summary_base_shift,
            self.summary.span(),
            most,
        )
    }

    /// The finest summary width grew by `k` levels: rows written at the old width move down `k`
    /// levels (the `k` finest disappear) and the `k` new coarsest levels are merged from the old
    /// coarsest one. Inside the commit's transaction.
    fn rebase_summary(&mut self, k: u32) -> Result<()> {
        let p = self.path.clone();
        let levels = self.config.summary_levels;
        let top = i64::from(levels) - 1;
        let old_top_shift = self.config.summary_base_shift + levels - 1;
        let mut old_top: Vec<(i64, Vec<summary::RowCell>)> = Vec::new();
        {
            let mut st = self
                .conn
                .prepare("SELECT bucket, data FROM summary WHERE level = ?1 ORDER BY bucket")
                .ctx(&p)?;
            let mut rows = st.query([top]).ctx(&p)?;
            while let Some(r) = rows.next().ctx(&p)? {
                let bucket: i64 = r.get(0).ctx(&p)?;
                let data =
                    r.get_ref(1)
                        .ctx(&p)?
                        .as_blob()
                        .map_err(|e| StoreError::InvalidValue {
                            path: p.clone(),
                            detail: format!("summary row: {e}"),
                        })?;
                let mut cells = Vec::new();
                summary::decode_cells(data, &mut self.decompressor, &mut cells).map_err(
                    |detail| StoreError::InvalidValue {
                        path: p.clone(),
                        detail: format!("summary row ({top}, {bucket}): {detail}"),
                    },
                )?;
                old_top.push((bucket, cells));
            }
        }
        self.conn
            .execute("DELETE FROM summary WHERE level < ?1", [k])
            .ctx(&p)?;
        // Level by level upwards, so that a row never lands on one not yet moved.
        for level in i64::from(k)..=top {
            self.conn
                .execute(
                    "UPDATE summary SET level = ?1 WHERE level = ?2",
                    params![level - i64::from(k), level],
                )
                .ctx(&p)?;
        }
        let mut stored = vec![0u64; levels as usize];
        for (j, n) in stored.iter_mut().enumerate() {
            if let Some(&m) = self.stored_cells.get(j + k as usize) {
                *n = m;
            }
        }
        // The old coarsest level is now level `top - k` (negative when every old level went):
        // new level `j` merges its buckets `>> (j - (top - k))`.
        let mut put = self
            .conn
            .prepare("INSERT OR REPLACE INTO summary (level, bucket, data) VALUES (?1, ?2, ?3)")
            .ctx(&p)?;
        for j in (top + 1 - i64::from(k)).max(0)..=top {
            let d = (j - (top - i64::from(k))) as u32;
            let mut n = 0u64;
            for (bucket, cells) in
                summary::merge_into_wider(&old_top, old_top_shift, old_top_shift + d)
            {
                n += cells.len() as u64;
                let data =
                    summary::encode_cells(&cells, &mut self.summary_scratch, &mut self.compressor)
                        .map_err(|source| StoreError::Io {
                            path: p.clone(),
                            source,
                        })?;
                put.execute(params![j, bucket, data]).ctx(&p)?;
            }
            stored[j as usize] = n;
        }
        drop(put);
        self.stored_cells = stored;
        self.config.summary_base_shift += k;
        self.conn
            .execute(
                "UPDATE trace_info SET summary_base_shift = ?1 WHERE id = 1",
                [self.config.summary_base_shift],
            )
            .ctx(&p)?;
        Ok(())
    }

    /// Commits everything, marks the trace finished (and complete or not), checkpoints the
    /// WAL and returns the final information.
    pub fn finish(mut self, complete: bool) -> Result<TraceInfo> {
        self.guarded(|w| w.finish_(complete, true))
    }

    /// [`TraceWriter::finish`] for a writer of unsynced commits
    /// ([`WriterConfig::sync_commits`] false) whose caller syncs the file itself, possibly on
    /// another thread while it does something else (an import builds its catalog meanwhile): the
    /// file is whole and closed, but durable only once [`UnsyncedTrace::sync`] returned.
    pub fn finish_unsynced(mut self, complete: bool) -> Result<(TraceInfo, UnsyncedTrace)> {
        let info = self.guarded(|w| w.finish_(complete, false))?;
        let pending = UnsyncedTrace {
            path: self.path.clone(),
            synced: self.config.sync_commits,
        };
        Ok((info, pending))
    }

    fn finish_(&mut self, complete: bool, sync: bool) -> Result<TraceInfo> {
        self.commit_()?;
        self.conn
            .execute(
                "UPDATE trace_info SET complete = ?1, finished = 1 WHERE id = 1",
                [complete],
            )
            .ctx(&self.path)?;
        // Give back the pages freed while the trace grew (rewritten tail chunks and summary
        // rows), so the file holds what it stores and nothing more.
        // (Each step of the statement frees one page: run it to the end.)
        self.conn
            .prepare("PRAGMA incremental_vacuum")
            .and_then(|mut st| {
                let mut rows = st.query([])?;
                while rows.next()?.is_some() {}
                Ok(())
            })
            .ctx(&self.path)?;
        // One self-contained file from now on; readers may hold it busy, which is fine.
        recovery::make_self_contained(&self.conn);
        if !self.config.sync_commits && sync {
            // Nothing was synced while the file was written (and it had no WAL): sync it once, and
            // its directory, now that it is whole.
            sync_files(&self.path)?;
        }
        self.finished = true;
        self.committed.complete = complete;
        self.committed.finished = true;
        Ok(self.committed.clone())
    }
}

/// A trace file finished by [`TraceWriter::finish_unsynced`], not yet synced.
#[derive(Debug, Clone)]
#[must_use = "the trace is durable only once synced"]
pub struct UnsyncedTrace {
    path: PathBuf,
    /// Its writer synced every commit: nothing is left to sync.
    synced: bool,
}

impl UnsyncedTrace {
    /// Syncs the file and its directory (which names it), as [`TraceWriter::finish`] does.
    pub fn sync(self) -> Result<()> {
        if self.synced {
            return Ok(());
        }
        sync_files(&self.path)
    }

    /// Syncs the file, then gives it its final name `name` (a hard link in the same directory,
    /// refused when `name` exists: [`StoreError::AlreadyExists`]), drops the name it was written
    /// under, and syncs the directory: a file built under a temporary name appears under `name`
    /// only whole and durable, and a process killed at any moment leaves no file named `name`, or a
    /// whole one. Same number of syncs as [`UnsyncedTrace::sync`].
    pub fn sync_as(self, name: &Path) -> Result<()> {
        let dir = self.sync_and_link(name)?;
        dir.sync()
    }

    /// [`UnsyncedTrace::sync_as`] up to the directory's sync, which is left to the caller (the
    /// returned [`UnsyncedName`]): the file is synced and linked under `name`, so a process killed
    /// from now on leaves it whole under `name`; the name itself is durable once the directory is
    /// synced. Lets the caller sync the directory alongside other work that waits on the disk.
    pub fn sync_and_link(self, name: &Path) -> Result<UnsyncedName> {
        let io = |path: &Path, source| StoreError::Io {
            path: path.to_path_buf(),
            source,
        };
        if !self.synced {
            std::fs::File::open(&self.path)
                .and_then(|f| f.sync_all())
                .map_err(|e| io(&self.path, e))?;
        }
        match std::fs::hard_link(&self.path, name) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(StoreError::AlreadyExists {
                    path: name.to_path_buf(),
                });
            }
            Err(e) => return Err(io(name, e)),
        }
        std::fs::remove_file(&self.path).map_err(|e| io(&self.path, e))?;
        let dir = name
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        Ok(UnsyncedName {
            dir: dir.to_path_buf(),
        })
    }
}

/// A name given by [`UnsyncedTrace::sync_and_link`] to a synced trace file, durable once its
/// directory is synced.
#[derive(Debug)]
#[must_use = "the name is durable only once its directory is synced"]
pub struct UnsyncedName {
    dir: PathBuf,
}

impl UnsyncedName {
    /// Syncs the directory that holds the name.
    pub fn sync(self) -> Result<()> {
        std::fs::File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(|source| StoreError::Io {
                path: self.dir,
                source,
            })
    }
}

/// Syncs the file, its WAL if one is left, and its directory (which names them).
fn sync_files(path: &Path) -> Result<()> {
    let wal = recovery::wal_path(path);
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    for f in [path, wal.as_path(), dir] {
        match std::fs::File::open(f) {
            Ok(file) => file.sync_all().map_err(|source| StoreError::Io {
                path: f.to_path_buf(),
                source,
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(StoreError::Io {
                    path: f.to_path_buf(),
                    source,
                });
            }
        }
    }
    Ok(())
}

impl Drop for TraceWriter {
    fn drop(&mut self) {
        if !self.finished && self.failed.is_none() {
            // Best effort: a writer dropped on an error path keeps what it had.
            let _ = self.commit();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::Filter;
    use crate::model::{EventType, TimeRange};
    use crate::reader::TraceReader;
    use crate::summary::Resolution;

    fn write(path: &Path, events: &[Event], max_buckets: i64, commit_every: usize) {
        let config = WriterConfig {
            chunk_events: 8,
            summary_base_shift: 4,
            summary_levels: 5,
            summary_max_buckets: max_buckets,
            ..WriterConfig::default()
        };
        let mut w = TraceWriter::create_with(path, &TraceHeader::default(), config).unwrap();
        for (id, category) in [(1, EventCategory::State), (2, EventCategory::Punctual)] {
            w.add_event_type(&EventType {
                id,
                name: format!("t{id}"),
                category,
                params: Vec::new(),
            })
            .unwrap();
        }
        for (i, e) in events.iter().enumerate() {
            w.push(e).unwrap();
            if (i + 1) % commit_every == 0 {
                w.commit().unwrap();
            }
        }
        w.finish(true).unwrap();
    }

    /// At most `MAX_TRAININGS` training slots are out at once, and a slot is given back when
    /// dropped, also by a training thread that panics. (No other test of this binary trains in
    /// the background: their traces are too small to gather the samples.)
    #[test]
    fn training_slots_are_bounded_and_given_back() {
        let slots: Vec<TrainingSlot> = std::iter::from_fn(TrainingSlot::take).take(10).collect();
        assert_eq!(slots.len(), MAX_TRAININGS);
        assert!(TrainingSlot::take().is_none());
        let mut slots = slots.into_iter();
        let (one, _kept) = (slots.next().unwrap(), slots.next().unwrap());
        let panicking = std::thread::spawn(move || {
            let _slot = one;
            panic!("a training that fails");
        });
        assert!(panicking.join().is_err());
        let again = TrainingSlot::take().expect("the panicking thread's slot came back");
        assert!(TrainingSlot::take().is_none());
        drop(again);
    }

    /// A long state makes the writer coarsen the finest level (also over rows committed
    /// before), and every summary still equals the one of a writer that never coarsens.
    #[test]
    fn long_states_coarsen_the_finest_level_exactly() {
        let mut events = Vec::new();
        for i in 0..200i64 {
            let ts = 1000 + i * 37;
            events.push(Event::punctual(ts, 2, (i % 3) as u32, Some(0)));
            if i % 7 == 0 {
                events.push(Event::state(
                    ts,
                    ts + 5 + i * 11,
                    0,
                    1,
                    (i % 2) as u32,
                    Some(1),
                ));
            }
        }
        // Late, long states: the span grows from ~7 k to ~1.3 M ns, in three steps.
        events.push(Event::state(2000, 80_000, 0, 1, 0, Some(1)));
        events.push(Event::state(5000, 1_300_000, 0, 1, 1, Some(1)));
        events.push(Event::punctual(1_299_999, 2, 2, Some(0)));
        let dir = std::env::temp_dir().join(format!("socscope-rebase-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (dir.join("bounded.db"), dir.join("plain.db"));
        let _ = std::fs::remove_file(&a);
        let _ = std::fs::remove_file(&b);
        write(&a, &events, 64, 50);
        write(&b, &events, 0, 50);
        let (ra, rb) = (
            TraceReader::open(&a).unwrap(),
            TraceReader::open(&b).unwrap(),
        );
        let (base_a, levels) = ra.summary_levels();
        assert_eq!(rb.summary_levels(), (4, 5));
        assert!(base_a > 4, "the finest width grew");
        assert!((1_300_000 - 1000) >> base_a < 64, "the span fits the bound");
        let rows: i64 = ra
            .connection()
            .query_row("SELECT count(*) FROM summary WHERE level = 0", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert!(rows <= 64, "{rows} finest rows");
        let f = Filter::all();
        for range in [
            TimeRange::new(0, 1 << 21),
            TimeRange::new(1000, 1_300_000),
            TimeRange::new(3333, 777_777),
        ] {
            for shift in base_a..base_a + levels + 2 {
                let want = rb.summary(range, Resolution::BucketWidth(1 << shift), &f);
                let got = ra.summary(range, Resolution::BucketWidth(1 << shift), &f);
                assert_eq!(got.unwrap(), want.unwrap(), "{range:?} at 2^{shift}");
            }
            assert_eq!(ra.count(range, &f).unwrap(), rb.count(range, &f).unwrap());
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// An unsynced file (an import's) is laid out like a durable one: its journal settings are
    /// taken before its header is first written (so that first write is not synced), and the page
    /// size and incremental vacuum set after them still hold; finished, it is a rollback-journal
    /// file like a durable one.
    #[test]
    fn an_unsynced_file_keeps_its_page_size_and_vacuum_mode() {
        let dir = std::env::temp_dir().join(format!("socscope-unsynced-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for sync_commits in [false, true] {
            let path = dir.join(format!("t-{sync_commits}.db"));
            let config = WriterConfig {
                sync_commits,
                ..WriterConfig::default()
            };
            let w = TraceWriter::create_with(&path, &TraceHeader::default(), config).unwrap();
            w.finish(true).unwrap();
            let conn = Connection::open(&path).unwrap();
            let pragma = |name: &str| -> String {
                conn.query_row(&format!("PRAGMA {name}"), [], |r| {
                    r.get::<_, rusqlite::types::Value>(0)
                })
                .map(|v| format!("{v:?}"))
                .unwrap()
            };
            assert_eq!(
                pragma("page_size"),
                "Integer(4096)",
                "sync_commits {sync_commits}"
            );
            assert_eq!(
                pragma("auto_vacuum"),
                "Integer(2)",
                "sync_commits {sync_commits}"
            );
            assert_eq!(
                pragma("journal_mode"),
                "Text(\"delete\")",
                "sync_commits {sync_commits}"
            );
            assert_eq!(
                pragma("application_id"),
                format!("Integer({TRACE_APPLICATION_ID})")
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
