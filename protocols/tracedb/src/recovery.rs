//! Crash recovery: a trace whose writer never finished (the collector was killed, the disk filled,
//! the machine lost power) is closed after the fact as *interrupted*, with the event count and time
//! range of what it really holds, and made one self-contained file again.
//!
//! A writer holds an advisory lock (`flock`) on its trace file for as long as it writes, so a trace
//! that is only *being* written — by this process or another one — is told apart from one left
//! behind: the kernel drops the lock when the writing process dies, however it dies.

use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};

use rusqlite::{Connection, params};

use crate::error::{Result, SqlContext, StoreError};
use crate::schema::{self, TRACE_APPLICATION_ID};

/// The `trace_param` (and catalog parameter) that marks a trace closed after the fact; its value
/// says why (see `SCHEMA.md`).
pub const INTERRUPTED_PARAM: &str = "interrupted";

/// The writer's lock on its trace file (released when dropped, or by the kernel when the process
/// dies).
#[derive(Debug)]
pub(crate) struct WriterLock {
    _file: File,
}

/// Takes the writer's lock on a trace file just created.
pub(crate) fn lock_for_writing(path: &Path) -> Result<WriterLock> {
    let io = |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(io)?;
    match file.try_lock() {
        Ok(()) => Ok(WriterLock { _file: file }),
        Err(TryLockError::WouldBlock) => Err(StoreError::InvalidRequest(format!(
            "{} is being written by another writer",
            path.display()
        ))),
        // A file system without advisory locks (some network ones): capture anyway; repair then
        // cannot tell a live trace from one left behind, and says so.
        Err(TryLockError::Error(_)) => Ok(WriterLock { _file: file }),
    }
}

/// Whether a writer (of this process or another) holds `path` now.
pub fn is_being_written(path: &Path) -> Result<bool> {
    let file = File::open(path).map_err(|source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    match file.try_lock_shared() {
        Ok(()) => Ok(false),
        Err(TryLockError::WouldBlock) => Ok(true),
        Err(TryLockError::Error(source)) => Err(StoreError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// What [`repair`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RepairOutcome {
    /// The trace was finished already: nothing changed (besides folding a leftover WAL in).
    AlreadyFinished,
    /// A writer holds the trace now: it is live, not left behind, and was not touched.
    BeingWritten,
    /// The trace was left live and is now finished, incomplete and marked interrupted.
    Repaired(Repaired),
}

/// A trace closed by [`repair`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repaired {
    /// The file.
    pub path: PathBuf,
    /// Events in the committed chunks (what the trace now says it holds).
    pub events: u64,
    /// What `trace_info.event_count` said before (the last commit the writer made).
    pub events_before: u64,
    /// Earliest event start (0 when empty).
    pub t_min: i64,
    /// Latest event end (0 when empty).
    pub t_max: i64,
    /// Committed chunks.
    pub chunks: u64,
}

/// Closes a trace left live by a writer that died: counts what the committed chunks hold, sets
/// `event_count`, `t_min`, `t_max`, `finished = 1`, `complete = 0`, records `reason` in the
/// [`INTERRUPTED_PARAM`] parameter, folds the WAL into the file and leaves it in rollback-journal
/// mode (no `-wal` or `-shm` beside it afterwards). What the writer had not committed is gone;
/// SQLite itself discards a torn last transaction when it opens the file.
///
/// A trace a writer holds now is left alone ([`RepairOutcome::BeingWritten`]).
pub fn repair(path: &Path, reason: &str) -> Result<RepairOutcome> {
    repair_with(path, reason, true)
}

/// [`repair`] on a disk that is full: the same closing transaction, but the WAL is left beside the
/// file (still consistent) instead of being folded in, and no checkpoint runs when the connection
/// closes — folding it in would grow the file by up to the WAL's size, room a full disk does not have
/// (and that other traces closing at the same time need). A later [`repair`] of the finished trace
/// folds the WAL in.
pub fn repair_on_full_disk(path: &Path, reason: &str) -> Result<RepairOutcome> {
    repair_with(path, reason, false)
}

fn repair_with(path: &Path, reason: &str, fold_wal: bool) -> Result<RepairOutcome> {
    // Held for the whole repair: a writer cannot start on the file meanwhile, and the descriptor
    // outlives the SQLite connection (closing it earlier would drop SQLite's own POSIX locks).
    let lock = File::open(path).map_err(|source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => return Ok(RepairOutcome::BeingWritten),
        Err(TryLockError::Error(source)) => {
            return Err(StoreError::Io {
                path: path.to_path_buf(),
                source,
            });
        }
    }
    let conn = schema::open(path, "trace", TRACE_APPLICATION_ID, false)?;
    if !fold_wal {
        keep_wal_on_close(&conn).ctx(path)?;
    }
    let finished: bool = conn
        .query_row("SELECT finished FROM trace_info WHERE id = 1", [], |r| {
            r.get(0)
        })
        .ctx(path)?;
    if finished {
        if fold_wal {
            make_self_contained(&conn);
        }
        drop(conn);
        drop(lock);
        return Ok(RepairOutcome::AlreadyFinished);
    }
    let (chunks, events, t_min, t_max): (i64, i64, Option<i64>, Option<i64>) = conn
        .query_row(
            "SELECT count(*), coalesce(sum(count), 0), min(t_min), max(end_max) FROM chunk",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .ctx(path)?;
    let events_before: i64 = conn
        .query_row("SELECT event_count FROM trace_info WHERE id = 1", [], |r| {
            r.get(0)
        })
        .ctx(path)?;
    let (t_min, t_max) = (t_min.unwrap_or(0), t_max.unwrap_or(0));
    conn.execute_batch("BEGIN IMMEDIATE").ctx(path)?;
    let written = (|| {
        conn.execute(
            "UPDATE trace_info SET t_min = ?1, t_max = ?2, event_count = ?3, complete = 0, finished = 1
             WHERE id = 1",
            params![t_min, t_max, events],
        )?;
        conn.execute(
            "INSERT OR REPLACE INTO trace_param (name, type, value) VALUES (?1, 'string', ?2)",
            params![INTERRUPTED_PARAM, reason],
        )?;
        conn.execute_batch("COMMIT")
    })();
    if let Err(e) = written {
        let _ = conn.execute_batch("ROLLBACK");
        return Err(StoreError::Sqlite {
            path: path.to_path_buf(),
            source: e,
        });
    }
    if fold_wal {
        make_self_contained(&conn);
    }
    drop(conn);
    drop(lock);
    Ok(RepairOutcome::Repaired(Repaired {
        path: path.to_path_buf(),
        events: events.max(0) as u64,
        events_before: events_before.max(0) as u64,
        t_min,
        t_max,
        chunks: chunks.max(0) as u64,
    }))
}

/// Makes `conn` leave the WAL as it is: no automatic checkpoint after a commit, none when it closes.
pub(crate) fn keep_wal_on_close(conn: &Connection) -> rusqlite::Result<()> {
    conn.pragma_update(None, "wal_autocheckpoint", 0)?;
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
        true,
    )?;
    Ok(())
}

/// Folds the WAL into the main file and switches it to rollback-journal mode, so that the finished
/// file stands alone and later read-only opens create no `-wal`/`-shm` beside it. Best effort: a
/// reader holding the file keeps it in WAL mode (it is still consistent; the next repair or
/// checkpoint finishes the job).
pub(crate) fn make_self_contained(conn: &Connection) {
    let _ = conn.busy_timeout(std::time::Duration::from_millis(200));
    let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
    let _ = conn.pragma_update(None, "journal_mode", "DELETE");
    let _ = conn.busy_timeout(std::time::Duration::from_secs(5));
}

/// Trace files of a catalog directory that a writer left live and nobody writes now: what
/// [`repair`] would close. Files that are not traces of this schema version are skipped.
pub fn left_live(dir: &Path) -> Result<Vec<PathBuf>> {
    traces_where(dir, |finished, _| !finished)
}

/// Finished trace files of a catalog directory that nobody writes now but that still have their WAL
/// beside them (closed on a full disk by [`repair_on_full_disk`]): what [`repair`] would fold into a
/// self-contained file.
pub fn left_with_wal(dir: &Path) -> Result<Vec<PathBuf>> {
    traces_where(dir, |finished, has_wal| finished && has_wal)
}

/// The WAL file SQLite keeps beside `path`.
pub fn wal_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push("-wal");
    PathBuf::from(p)
}

/// Trace files of `dir` that nobody writes now, whose `(finished, has a WAL beside it)` pass `keep`.
fn traces_where(dir: &Path, keep: impl Fn(bool, bool) -> bool) -> Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir).map_err(|source| StoreError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let is_trace = path.extension().is_some_and(|e| e == "db")
            && path.file_name().is_some_and(|n| {
                n != crate::catalog::CATALOG_FILE && !n.to_string_lossy().starts_with('.')
            });
        if !is_trace || !path.is_file() {
            continue;
        }
        if is_being_written(&path).unwrap_or(true) {
            continue;
        }
        // Looked at before opening: a read-only open itself may make an empty WAL.
        let has_wal = wal_path(&path).exists();
        let Ok(conn) = schema::open(&path, "trace", TRACE_APPLICATION_ID, true) else {
            continue;
        };
        let finished: rusqlite::Result<bool> =
            conn.query_row("SELECT finished FROM trace_info WHERE id = 1", [], |r| {
                r.get(0)
            });
        if let Ok(finished) = finished {
            drop(conn);
            if keep(finished, has_wal) {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}
