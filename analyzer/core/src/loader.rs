//! Pipelined loading (Framesoc RT-460 §2.1): a background worker reads successive time chunks sized to
//! hold about `N` events, feeds them to a consumer, and publishes the consumer's snapshot after each chunk,
//! so a view draws partial results at once and never waits for the whole interval.
//!
//! The chunk length is `T = N / d` with `d` the **local** density, read from the store's multi-resolution
//! summary: bursty traces get short chunks where they are dense and long ones where they are quiet, so
//! every chunk costs about the same.
//!
//! Start here: [`Consumer`] (what a view computes from events), [`spawn`] and [`LoaderHandle`] (latest
//! snapshot, progress, cancel).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use socscope_tracedb::{Filter, Resolution, StoredEvent, TimeRange, TraceReader};

/// Events per chunk for each use, as in RT-460.
pub mod chunk_size {
    /// Gantt chart.
    pub const GANTT: u64 = 100_000;
    /// Event table.
    pub const TABLE: u64 = 20_000;
    /// Statistics.
    pub const STATISTICS: u64 = 100_000;
    /// Event density.
    pub const DENSITY: u64 = 1_000_000;
}

/// What a view computes from the events of an interval, chunk after chunk.
pub trait Consumer: Send + 'static {
    /// What the view draws; cloned out after every chunk.
    type Snapshot: Clone + Send + 'static;
    /// Runs once on the loader thread before the first chunk, with the loader's reader: what
    /// the consumer needs from the store besides the events (names, types) is read here, so
    /// that building a consumer needs no store access (none on a UI thread).
    fn prepare(&mut self, reader: &TraceReader) -> Result<(), String> {
        let _ = reader;
        Ok(())
    }
    /// Takes the events of one chunk, in timestamp order. The first chunk also holds the states and links
    /// that began before the interval but overlap it; every event is delivered once.
    fn consume(&mut self, events: &[StoredEvent]);
    /// The result so far.
    fn snapshot(&self) -> Self::Snapshot;
}

/// How far a load has come.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Progress {
    /// Nanoseconds of the interval loaded so far.
    pub loaded_ns: i64,
    /// Nanoseconds of the interval.
    pub total_ns: i64,
    /// Events delivered so far.
    pub events: u64,
    /// Chunks read so far.
    pub chunks: u64,
    /// The load ended (all read, cancelled or failed).
    pub finished: bool,
    /// The load was cancelled.
    pub cancelled: bool,
    /// Why the load failed, if it did.
    pub error: Option<String>,
    /// Milliseconds from the start to the first published snapshot.
    pub first_result_ms: Option<f64>,
}

impl Progress {
    /// Fraction loaded, 0 to 1.
    pub fn fraction(&self) -> f64 {
        if self.finished && !self.cancelled && self.error.is_none() {
            1.0
        } else if self.total_ns > 0 {
            (self.loaded_ns as f64 / self.total_ns as f64).clamp(0.0, 1.0)
        } else {
            0.0
        }
    }
}

struct Shared<S> {
    snapshot: Option<S>,
    progress: Progress,
    generation: u64,
}

/// The running (or finished) load; dropping it cancels the load.
pub struct LoaderHandle<S> {
    shared: Arc<Mutex<Shared<S>>>,
    cancel: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl<S: Clone> LoaderHandle<S> {
    /// The latest snapshot, if any chunk was read yet.
    pub fn snapshot(&self) -> Option<S> {
        self.shared.lock().ok().and_then(|s| s.snapshot.clone())
    }

    /// The latest snapshot with a number that grows each time a new one is published (so a view redraws
    /// only when something changed).
    pub fn snapshot_if_newer(&self, seen: u64) -> Option<(u64, S)> {
        let s = self.shared.lock().ok()?;
        if s.generation > seen {
            s.snapshot.clone().map(|snap| (s.generation, snap))
        } else {
            None
        }
    }

    /// Whether the load has finished and its last snapshot is no newer than `seen` (the number
    /// [`Self::snapshot_if_newer`] gave the caller): only then has a view shown the final result,
    /// and may stop asking for frames.
    pub fn settled(&self, seen: u64) -> bool {
        self.shared
            .lock()
            .map_or(true, |s| s.progress.finished && s.generation <= seen)
    }

    /// How far the load has come.
    pub fn progress(&self) -> Progress {
        self.shared
            .lock()
            .map(|s| s.progress.clone())
            .unwrap_or_default()
    }

    /// Stops the load at the next event batch; the last snapshot stays available.
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }

    /// Waits for the load to end and returns its final snapshot and progress.
    pub fn wait(mut self) -> (Option<S>, Progress) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        (self.snapshot(), self.progress())
    }
}

impl<S> Drop for LoaderHandle<S> {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::Relaxed);
    }
}

/// What to load.
#[derive(Clone, Debug)]
pub struct LoadRequest {
    /// The trace file.
    pub trace: PathBuf,
    /// The interval.
    pub range: TimeRange,
    /// Which events.
    pub filter: Filter,
    /// About how many events per chunk (see [`chunk_size`]).
    pub chunk_events: u64,
}

/// Most events of the first chunk whatever `n`, so that every view (density reads big chunks)
/// shows a first partial result within a few milliseconds of reading.
pub const FIRST_CHUNK_EVENTS: u64 = chunk_size::TABLE;

/// Splits `range` into chunks holding about `n` events each (the first one at most
/// [`FIRST_CHUNK_EVENTS`]), from the local density of the summary (whole buckets, no
/// event read).
pub fn plan_chunks(
    reader: &TraceReader,
    range: TimeRange,
    filter: &Filter,
    n: u64,
) -> Vec<TimeRange> {
    let first = first_chunk(reader, range, filter, n);
    let mut chunks = vec![first];
    if first.end < range.end {
        chunks.extend(plan_rest(
            reader,
            TimeRange::new(first.end, range.end),
            filter,
            n,
        ));
    }
    chunks
}

/// The summary answers type, producer and category filters; for CPU or parameter filters it
/// over-estimates the density, which only makes chunks smaller.
fn density_filter(filter: &Filter) -> Filter {
    if filter.summary_compatible() {
        filter.clone()
    } else {
        Filter {
            cpus: None,
            condition: None,
            ..filter.clone()
        }
    }
}

/// Event counts of `range` per bucket of `width` (a power of two, at least the summary's
/// finest), from whole buckets only (the interval widened to bucket edges: exact edge buckets
/// would make the store read events from the chunks, and a plan needs no exact counts); each
/// bucket is clipped to `range` with its share of the count (even density).
fn bucket_counts(
    reader: &TraceReader,
    range: TimeRange,
    filter: &Filter,
    width: i64,
) -> Option<Vec<(TimeRange, u64)>> {
    let w = 1i64 << Resolution::BucketWidth(width).shift_for(range);
    let lo = range.start.div_euclid(w).checked_mul(w)?;
    let hi = range
        .end
        .checked_add(w - 1)
        .and_then(|e| e.div_euclid(w).checked_mul(w))?;
    let summary = reader
        .summary(
            TimeRange::new(lo, hi),
            Resolution::BucketWidth(w),
            &density_filter(filter),
        )
        .ok()?;
    Some(
        summary
            .buckets
            .iter()
            .filter_map(|b| {
                let inside = range.overlap(b.range.start, b.range.end);
                (inside > 0).then(|| {
                    let count = b.count();
                    let count = if inside == b.range.len() {
                        count
                    } else {
                        (u128::from(count) * inside as u128 / b.range.len().max(1) as u128) as u64
                    };
                    let r =
                        TimeRange::new(b.range.start.max(range.start), b.range.end.min(range.end));
                    (r, count)
                })
            })
            .collect(),
    )
}

/// Cuts `range` into chunks of about `n` events from per-bucket counts, the first of about
/// `first` events.
fn cut(range: TimeRange, buckets: &[(TimeRange, u64)], first: u64, n: u64) -> Vec<TimeRange> {
    let target = |chunks: usize| if chunks == 0 { first.max(1) } else { n.max(1) };
    let mut chunks = Vec::new();
    let mut start = range.start;
    let mut acc = 0u64;
    for &(br, count) in buckets {
        if acc + count < target(chunks.len()) {
            acc += count;
            continue;
        }
        // Cut inside the bucket where the running count reaches n, assuming even density in the bucket.
        let mut t0 = br.start;
        let mut left = count;
        let mut need = target(chunks.len()) - acc;
        while left >= need && need > 0 {
            let span = br.end - t0;
            let cut = t0 + ((span as u128 * need as u128) / left.max(1) as u128) as i64;
            let cut = cut.clamp(t0 + 1, br.end).max(start + 1);
            chunks.push(TimeRange::new(start, cut));
            start = cut;
            left -= need;
            t0 = cut;
            need = target(chunks.len());
        }
        acc = left;
    }
    if start < range.end {
        chunks.push(TimeRange::new(start, range.end));
    }
    chunks
}

/// The first chunk of `range`: about [`FIRST_CHUNK_EVENTS`] events (at most `n`), planned
/// from the finest summary buckets of a prefix of the interval that grows until it holds
/// them, so that the first result does not wait for a plan of the whole interval.
fn first_chunk(reader: &TraceReader, range: TimeRange, filter: &Filter, n: u64) -> TimeRange {
    let target = n.clamp(1, FIRST_CHUNK_EVENTS);
    let base = 1i64 << reader.summary_levels().0;
    let mut span = base.saturating_mul(16);
    loop {
        let prefix = TimeRange::new(range.start, range.start.saturating_add(span).min(range.end));
        let whole = prefix.end >= range.end;
        let width = (prefix.len() / 64).max(base);
        let Some(counts) = bucket_counts(reader, prefix, filter, width) else {
            return range;
        };
        let chunks = cut(prefix, &counts, target, target);
        if chunks.len() > 1 || whole {
            return chunks.first().copied().unwrap_or(range);
        }
        span = span.saturating_mul(4);
    }
}

/// Chunks of about `n` events over `range` (the rest of the interval after the first chunk).
fn plan_rest(reader: &TraceReader, range: TimeRange, filter: &Filter, n: u64) -> Vec<TimeRange> {
    // No finer than the summary's own buckets: a finer resolution would make the store count
    // every event of the interval from the chunks just to plan the load.
    let base = 1i64 << reader.summary_levels().0;
    let width = (range.len() / 1024).max(base);
    match bucket_counts(reader, range, filter, width) {
        Some(counts) => cut(range, &counts, n, n),
        None => vec![range],
    }
}

/// What a background task hands its results through: it publishes snapshots and progress, and reads
/// whether it was asked to stop.
pub struct Publisher<'a, S> {
    shared: &'a Mutex<Shared<S>>,
    cancel: &'a AtomicBool,
    started: Instant,
}

impl<S> Publisher<'_, S> {
    /// Publishes a new result: `loaded_ns` of the interval done, `events` read so far, `chunks` steps.
    pub fn publish(
        &self,
        snapshot: S,
        loaded_ns: i64,
        events: u64,
        chunks: u64,
    ) -> Result<(), String> {
        let mut sh = self
            .shared
            .lock()
            .map_err(|_| "loader state poisoned".to_string())?;
        sh.snapshot = Some(snapshot);
        sh.generation += 1;
        sh.progress.loaded_ns = loaded_ns;
        sh.progress.events = events;
        sh.progress.chunks = chunks;
        if sh.progress.first_result_ms.is_none() {
            sh.progress.first_result_ms = Some(self.started.elapsed().as_secs_f64() * 1e3);
        }
        Ok(())
    }

    /// Whether the task was asked to stop (by [`LoaderHandle::cancel`] or by dropping the handle).
    pub fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
}

/// Runs `task` on a background thread: what it publishes is read through the returned handle, exactly as
/// for an event load ([`spawn`] is this with a chunked read of the store). `total_ns` is the length of
/// the interval the task works on (for [`Progress::fraction`]).
pub fn spawn_task<S, F>(total_ns: i64, task: F) -> LoaderHandle<S>
where
    S: Clone + Send + 'static,
    F: FnOnce(&Publisher<'_, S>) -> Result<(), String> + Send + 'static,
{
    let shared = Arc::new(Mutex::new(Shared {
        snapshot: None,
        progress: Progress {
            total_ns,
            ..Progress::default()
        },
        generation: 0,
    }));
    let cancel = Arc::new(AtomicBool::new(false));
    let (s, c) = (shared.clone(), cancel.clone());
    let thread = std::thread::Builder::new()
        .name("socscope-loader".into())
        .spawn(move || {
            let publisher = Publisher {
                shared: &s,
                cancel: &c,
                started: Instant::now(),
            };
            let result = task(&publisher);
            if let Ok(mut sh) = s.lock() {
                sh.progress.finished = true;
                sh.progress.cancelled = c.load(Ordering::Relaxed);
                if let Err(e) = result {
                    sh.progress.error = Some(e);
                }
                sh.generation += 1;
            }
        })
        .ok();
    if thread.is_none()
        && let Ok(mut sh) = shared.lock()
    {
        sh.progress.finished = true;
        sh.progress.error = Some("cannot start a loader thread".into());
    }
    LoaderHandle {
        shared,
        cancel,
        thread,
    }
}

/// Starts loading `request` into `consumer` on a background thread.
pub fn spawn<C: Consumer>(request: LoadRequest, consumer: C) -> LoaderHandle<C::Snapshot> {
    let total = request.range.len();
    spawn_task(total, move |publisher| run(&request, consumer, publisher))
}

/// How many events go to the consumer at once (and how often cancellation is checked).
const BATCH: usize = 4096;

fn run<C: Consumer>(
    request: &LoadRequest,
    mut consumer: C,
    publisher: &Publisher<'_, C::Snapshot>,
) -> Result<(), String> {
    let reader = TraceReader::open(&request.trace).map_err(|e| e.to_string())?;
    consumer.prepare(&reader)?;
    // The first chunk is planned alone (from a prefix of the interval) and the rest once its
    // result is published: the first result waits for no plan of the whole interval.
    let range = request.range;
    let first = first_chunk(&reader, range, &request.filter, request.chunk_events);
    let mut chunks = vec![first];
    let mut batch: Vec<StoredEvent> = Vec::with_capacity(BATCH);
    let mut events = 0u64;
    let mut i = 0;
    while i < chunks.len() {
        let chunk = chunks[i];
        if publisher.cancelled() {
            return Ok(());
        }
        let iter = if i == 0 {
            // The first chunk also catches what began before the interval and is still going on.
            reader.events_overlapping(chunk, &request.filter)
        } else {
            reader.events(chunk, &request.filter)
        }
        .map_err(|e| e.to_string())?;
        for e in iter {
            let e = e.map_err(|e| e.to_string())?;
            batch.push(e);
            if batch.len() == BATCH {
                if publisher.cancelled() {
                    return Ok(());
                }
                consumer.consume(&batch);
                events += batch.len() as u64;
                batch.clear();
            }
        }
        consumer.consume(&batch);
        events += batch.len() as u64;
        batch.clear();
        publisher.publish(
            consumer.snapshot(),
            chunk.end - request.range.start,
            events,
            i as u64 + 1,
        )?;
        if i == 0 && first.end < range.end {
            chunks.extend(plan_rest(
                &reader,
                TimeRange::new(first.end, range.end),
                &request.filter,
                request.chunk_events,
            ));
        }
        i += 1;
    }
    Ok(())
}
