//! `fleet sync`: every finished trace of one or more catalog directories into the dataset, writing only
//! what is new or changed, never a half-written file, and removing a trace's files only when asked.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use parquet::file::reader::{FileReader, SerializedFileReader};
use serde::Serialize;
use socscope_tracedb::{CATALOG_FILE, Catalog, TraceReader};

use crate::error::{FleetError, Result};
use crate::export::{self, META_CATALOG, META_FINGERPRINT, Source, Written};
use crate::layout::{Contents, Dataset, Placement, utc_date};
use crate::schema::Table;

/// What `sync` may do beyond exporting new and changed finished traces.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyncOptions {
    /// Export traces still being written too (their committed part; a later sync writes them again once
    /// they have changed).
    pub include_live: bool,
    /// Remove the files of traces that a synced catalog no longer lists.
    pub prune: bool,
    /// Traces exported at once, each on its own thread (0: one per core, at most [`MAX_AUTO_JOBS`]).
    pub jobs: usize,
}

/// The most traces `sync` exports at once when not told: each holds a row group being encoded (a few
/// tens of MB), so four keep a sync's memory near 256 MB on a machine of many cores.
pub const MAX_AUTO_JOBS: usize = 4;

impl SyncOptions {
    /// How many traces to export at once for `traces` traces.
    pub fn jobs_for(&self, traces: usize) -> usize {
        let wanted = if self.jobs == 0 {
            std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .min(MAX_AUTO_JOBS)
        } else {
            self.jobs
        };
        wanted.clamp(1, traces.max(1))
    }
}

/// What an exporting thread tells the thread that keeps the summary and the progress bar.
enum WorkerNews {
    /// Worker `worker` started on a trace.
    Started { worker: usize, trace_id: String },
    /// Worker `worker` has written `events` events of its current trace.
    Events { worker: usize, events: u64 },
    /// Worker `worker` finished the trace `index` of the list.
    Done {
        worker: usize,
        index: usize,
        outcome: Result<Outcome>,
    },
}

/// Where a sync is, for a progress bar.
#[derive(Debug, Clone, Default)]
pub struct SyncProgress {
    /// Traces looked at so far.
    pub traces_done: usize,
    /// Traces to look at.
    pub traces_total: usize,
    /// Events written so far.
    pub events_written: u64,
    /// The trace being exported.
    pub current: String,
}

/// A trace that could not be exported (the others are).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct SyncFailure {
    /// The trace file.
    pub trace: PathBuf,
    /// Why, in one line.
    pub error: String,
}

/// What a sync did (`--json` prints it).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct SyncSummary {
    /// The dataset directory.
    pub dataset: PathBuf,
    /// Traces whose file set was written (new or changed).
    pub traces_written: u64,
    /// Traces already in the dataset with the same content.
    pub traces_unchanged: u64,
    /// Traces still being written, left out (`--include-live` exports them).
    pub traces_live_skipped: u64,
    /// Processed traces (Ocelotl partitions saved as traces), left out: they are derived data.
    pub traces_processed_skipped: u64,
    /// Traces whose files were removed because their catalog no longer lists them (`--prune`).
    pub traces_pruned: u64,
    /// Traces in the dataset that a synced catalog no longer lists, kept (no `--prune`).
    pub traces_not_in_catalog: u64,
    /// Half-written files of an interrupted sync, removed.
    pub temporaries_removed: u64,
    /// Events written.
    pub events: u64,
    /// Bytes of the files written.
    pub bytes: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Traces that could not be exported.
    pub failures: Vec<SyncFailure>,
}

/// The footer metadata of a dataset file: (fingerprint, source catalog).
fn footer(path: &Path) -> Result<(Option<String>, Option<String>)> {
    let file = File::open(path).map_err(FleetError::io(path))?;
    let reader = SerializedFileReader::new(file).map_err(FleetError::parquet(path))?;
    let kv = reader.metadata().file_metadata().key_value_metadata();
    let get = |k: &str| {
        kv.and_then(|kv| kv.iter().find(|e| e.key == k))
            .and_then(|e| e.value.clone())
    };
    Ok((get(META_FINGERPRINT), get(META_CATALOG)))
}

/// The trace id of a trace file: its name without `.db`.
pub fn trace_id_of(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Checks that `dir` is a catalog directory and returns it canonical.
pub fn catalog_dir(dir: &Path) -> Result<PathBuf> {
    if !dir.join(CATALOG_FILE).is_file() {
        return Err(FleetError::NotACatalog {
            path: dir.to_path_buf(),
        });
    }
    dir.canonicalize().map_err(FleetError::io(dir))
}

/// Exports the traces of `catalogs` into the dataset at `dataset` (created if needed).
pub fn sync(
    catalogs: &[PathBuf],
    dataset: &Path,
    options: SyncOptions,
    progress: &mut dyn FnMut(&SyncProgress),
) -> Result<SyncSummary> {
    sync_only(catalogs, None, dataset, options, progress)
}

/// Exports the trace files `traces` of the catalog `catalog` (as `collect --dataset` does when a session
/// ends): the others are neither read nor pruned.
pub fn sync_traces(catalog: &Path, traces: &[PathBuf], dataset: &Path) -> Result<SyncSummary> {
    let dir = catalog_dir(catalog)?;
    let only: Vec<PathBuf> = traces
        .iter()
        .map(|t| dir.join(t.file_name().unwrap_or_default()))
        .collect();
    sync_only(
        &[dir],
        Some(&only),
        dataset,
        SyncOptions::default(),
        &mut |_| {},
    )
}

fn sync_only(
    catalogs: &[PathBuf],
    only: Option<&[PathBuf]>,
    dataset: &Path,
    options: SyncOptions,
    progress: &mut dyn FnMut(&SyncProgress),
) -> Result<SyncSummary> {
    let started = Instant::now();
    // Every argument is checked before anything is written.
    let dirs: Vec<PathBuf> = catalogs
        .iter()
        .map(|d| catalog_dir(d))
        .collect::<Result<_>>()?;
    let (ds, _lock) = Dataset::open_for_writing(dataset)?;
    let mut summary = SyncSummary {
        dataset: dataset.to_path_buf(),
        ..SyncSummary::default()
    };
    let contents = ds.contents()?;
    for tmp in &contents.temporaries {
        std::fs::remove_file(tmp).map_err(FleetError::io(tmp))?;
        summary.temporaries_removed += 1;
    }

    // The traces of every catalog, by id.
    let mut sources: BTreeMap<String, Source> = BTreeMap::new();
    for dir in &dirs {
        let catalog = Catalog::open(dir)?;
        for rec in catalog.traces()? {
            if let Some(only) = only
                && !only.iter().any(|f| *f == catalog.resolve(&rec))
            {
                continue;
            }
            if rec.info.meta.processed {
                summary.traces_processed_skipped += 1;
                continue;
            }
            let path = catalog.resolve(&rec);
            // A trace file removed by hand (`rm`) is a trace deleted from the catalog, as the GUI's delete
            // is: its dataset files stay unless --prune, instead of failing every later sync.
            if only.is_none() && !path.exists() {
                continue;
            }
            let trace_id = trace_id_of(&path);
            if let Some(first) = sources.get(&trace_id) {
                let e = FleetError::DuplicateTraceId {
                    trace_id: trace_id.clone(),
                    first: first.path.clone(),
                    second: path.clone(),
                };
                summary.failures.push(SyncFailure {
                    trace: path,
                    error: e.to_string(),
                });
                continue;
            }
            sources.insert(
                trace_id.clone(),
                Source {
                    path,
                    catalog: dir.clone(),
                    trace_id,
                },
            );
        }
    }

    let list: Vec<&Source> = sources.values().collect();
    let mut state = SyncProgress {
        traces_total: list.len(),
        ..SyncProgress::default()
    };
    progress(&state);
    let jobs = options.jobs_for(list.len());
    let next = AtomicUsize::new(0);
    let mut failures: Vec<(usize, SyncFailure)> = Vec::new();
    std::thread::scope(|scope| {
        let (tx, rx) = mpsc::channel::<WorkerNews>();
        for worker in 0..jobs {
            let tx = tx.clone();
            let (list, next, ds, contents) = (&list, &next, &ds, &contents);
            scope.spawn(move || {
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some(source) = list.get(index) else { break };
                    let _ = tx.send(WorkerNews::Started {
                        worker,
                        trace_id: source.trace_id.clone(),
                    });
                    let outcome = sync_one(ds, contents, source, options, &mut |events| {
                        let _ = tx.send(WorkerNews::Events { worker, events });
                    });
                    if tx
                        .send(WorkerNews::Done {
                            worker,
                            index,
                            outcome,
                        })
                        .is_err()
                    {
                        break;
                    }
                }
            });
        }
        drop(tx);
        // Events written by each worker in the trace it is on, shown in the bar before it finishes.
        let mut current = vec![0u64; jobs];
        for news in rx {
            match news {
                WorkerNews::Started { worker, trace_id } => {
                    current[worker] = 0;
                    state.current = trace_id;
                }
                WorkerNews::Events { worker, events } => current[worker] = events,
                WorkerNews::Done {
                    worker,
                    index,
                    outcome,
                } => {
                    current[worker] = 0;
                    match outcome {
                        Ok(Outcome::Written(w)) => {
                            summary.traces_written += 1;
                            summary.events += w.events;
                            summary.bytes += w.bytes;
                            state.events_written += w.events;
                        }
                        Ok(Outcome::Unchanged) => summary.traces_unchanged += 1,
                        Ok(Outcome::Live) => summary.traces_live_skipped += 1,
                        Err(e) => failures.push((
                            index,
                            SyncFailure {
                                trace: list[index].path.clone(),
                                error: e.to_string(),
                            },
                        )),
                    }
                    state.traces_done += 1;
                }
            }
            let mut shown = state.clone();
            shown.events_written += current.iter().sum::<u64>();
            progress(&shown);
        }
    });
    // In the order of the trace ids, whatever order the threads finished in.
    failures.sort_by_key(|(index, _)| *index);
    summary
        .failures
        .extend(failures.into_iter().map(|(_, f)| f));

    if only.is_some() {
        summary.seconds = started.elapsed().as_secs_f64();
        return Ok(summary);
    }
    // Traces of the dataset that no synced catalog lists any more.
    let synced: BTreeSet<&PathBuf> = dirs.iter().collect();
    for (trace_id, files) in &contents.files {
        if sources.contains_key(trace_id) {
            continue;
        }
        let from_synced_catalog = match contents.traces_file(trace_id) {
            Some(f) => footer(f)?
                .1
                .is_some_and(|c| synced.contains(&PathBuf::from(c))),
            // Files without their `traces` file: what an interrupted sync of a since-deleted trace left.
            None => true,
        };
        if !from_synced_catalog {
            continue;
        }
        if options.prune {
            for (_, f) in files {
                std::fs::remove_file(f).map_err(FleetError::io(f))?;
                remove_empty_parents(f, ds.root());
            }
            summary.traces_pruned += 1;
        } else {
            summary.traces_not_in_catalog += 1;
        }
    }
    summary.seconds = started.elapsed().as_secs_f64();
    Ok(summary)
}

enum Outcome {
    Written(Written),
    Unchanged,
    Live,
}

fn sync_one(
    ds: &Dataset,
    contents: &Contents,
    source: &Source,
    options: SyncOptions,
    on_events: &mut dyn FnMut(u64),
) -> Result<Outcome> {
    let reader = TraceReader::open(&source.path)?;
    let info = reader.info()?;
    if !info.finished && !options.include_live {
        return Ok(Outcome::Live);
    }
    let fp = export::fingerprint(&reader, &info)?;
    let placement = Placement {
        trace_id: source.trace_id.clone(),
        board: info.meta.board.clone(),
        date: utc_date(info.meta.start_unix_ns),
    };
    let existing = contents.files.get(&source.trace_id);
    let complete_here = existing.is_some_and(|files| {
        Table::ALL.iter().all(|t| {
            files
                .iter()
                .any(|(ft, p)| ft == t && *p == placement.file(ds.root(), *t))
        }) && files.len() == Table::ALL.len()
    });
    if complete_here
        && let Some(f) = contents.traces_file(&source.trace_id)
        && footer(f)?.0.as_deref() == Some(fp.as_str())
    {
        return Ok(Outcome::Unchanged);
    }
    let written = export::write_trace(
        &reader,
        &info,
        &fp,
        source,
        &placement,
        ds.root(),
        on_events,
    )?;
    // Files of an earlier version of the trace at another place (its board or date changed).
    if let Some(files) = existing {
        for (t, f) in files {
            if *f != placement.file(ds.root(), *t) {
                std::fs::remove_file(f).map_err(FleetError::io(f))?;
                remove_empty_parents(f, ds.root());
            }
        }
    }
    Ok(Outcome::Written(written))
}

/// Removes the date and board directories a removed file leaves empty.
fn remove_empty_parents(file: &Path, root: &Path) {
    let mut dir = file.parent();
    for _ in 0..2 {
        match dir {
            Some(d) if d != root && std::fs::remove_dir(d).is_ok() => dir = d.parent(),
            _ => break,
        }
    }
}
