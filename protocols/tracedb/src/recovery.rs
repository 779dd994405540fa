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

pub use crate::lock::is_being_written;
pub(crate) use crate::lock::{WriterLock, lock_for_writing};

/// What [`repair`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RepairOutcome {
    /// The trace was finished already, every chunk readable, no WAL beside it: nothing changed.
    AlreadyFinished,
    /// The trace was finished already (closed on a full disk): its WAL, left beside it, is now folded
    /// into the file.
    WalFolded,
    /// The trace was finished already and keeps a WAL beside it that could not be folded in now (no
    /// room on the disk yet, or another program holds the file); it is consistent as it is.
    WalKept,
    /// A writer holds the trace now: it is live, not left behind, and was not touched.
    BeingWritten,
    /// The trace was left live and is now finished, incomplete and marked interrupted — or it was
    /// finished but held chunks that cannot be read, now removed ([`Repaired::was_live`] says which).
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
    /// Committed chunks (readable ones, after the repair).
    pub chunks: u64,
    /// Chunks that could not be read (a header that is not one, or naming a zstd dictionary the trace
    /// does not hold: what a full disk left before the writer stopped at its first failure), removed
    /// by the repair and recorded as a loss.
    pub unreadable_chunks: u64,
    /// Events those chunks said they held.
    pub unreadable_events: u64,
    /// Whether the trace was live (false: it was finished, the repair only removed unreadable chunks).
    pub was_live: bool,
}

/// Closes a trace left live by a writer that died: counts what the committed chunks hold, sets
/// `event_count`, `t_min`, `t_max`, `finished = 1`, `complete = 0`, records `reason` in the
/// [`INTERRUPTED_PARAM`] parameter, folds the WAL into the file and leaves it in rollback-journal
/// mode (no `-wal` or `-shm` beside it afterwards). What the writer had not committed is gone;
/// SQLite itself discards a torn last transaction when it opens the file.
///
/// A trace a writer holds now is left alone ([`RepairOutcome::BeingWritten`]).
///
/// A finished trace's chunks are checked by their headers only (the cost of a few reads whatever its
/// size): what the collector and the demo use when they close or settle a trace.
/// [`repair_checking_blocks`] also decodes every block of a finished trace.
pub fn repair(path: &Path, reason: &str) -> Result<RepairOutcome> {
    repair_with(path, reason, true, false)
}

/// [`repair`], and a finished trace is checked whole, every block decoded: nothing but damage to the
/// file can have broken one of its chunks, and one such chunk makes every read of the trace fail, so
/// such a chunk is removed with a loss row. What `socscope repair` runs; it reads the whole file (about
/// 50 ms per million events).
pub fn repair_checking_blocks(path: &Path, reason: &str) -> Result<RepairOutcome> {
    repair_with(path, reason, true, true)
}

/// [`repair`] on a disk that is full: the same closing transaction, but the WAL is left beside the
/// file (still consistent) instead of being folded in, and no checkpoint runs when the connection
/// closes — folding it in would grow the file by up to the WAL's size, room a full disk does not have
/// (and that other traces closing at the same time need). A later [`repair`] of the finished trace
/// folds the WAL in.
pub fn repair_on_full_disk(path: &Path, reason: &str) -> Result<RepairOutcome> {
    repair_with(path, reason, false, false)
}

fn repair_with(
    path: &Path,
    reason: &str,
    fold_wal: bool,
    check_blocks: bool,
) -> Result<RepairOutcome> {
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
    let had_wal = wal_path(path).exists();
    let conn = schema::open(path, "trace", TRACE_APPLICATION_ID, false)?;
    if !fold_wal {
        keep_wal_on_close(&conn).ctx(path)?;
    }
    let finished: bool = conn
        .query_row("SELECT finished FROM trace_info WHERE id = 1", [], |r| {
            r.get(0)
        })
        .ctx(path)?;
    // A finished trace is checked whole when asked (`check_blocks`); a live one only by its chunks'
    // headers: its repair runs when `collect` starts, on traces of any size.
    let unreadable = unreadable_chunks(&conn, path, finished && check_blocks)?;
    if finished && unreadable.is_empty() {
        // Opening it to write put it in WAL mode: back to one self-contained file in any case.
        if fold_wal {
            make_self_contained(&conn);
        }
        let kept = wal_path(path).exists();
        drop(conn);
        drop(lock);
        return Ok(match (had_wal, kept) {
            (true, false) if fold_wal => RepairOutcome::WalFolded,
            (true, true) => RepairOutcome::WalKept,
            _ => RepairOutcome::AlreadyFinished,
        });
    }
    let events_before: i64 = conn
        .query_row("SELECT event_count FROM trace_info WHERE id = 1", [], |r| {
            r.get(0)
        })
        .ctx(path)?;
    conn.execute_batch("BEGIN IMMEDIATE").ctx(path)?;
    let written = (|| -> Result<(i64, i64, Option<i64>, Option<i64>)> {
        if !unreadable.is_empty() {
            drop_chunks(&conn, path, &unreadable)?;
        }
        let (chunks, events, t_min, t_max): (i64, i64, Option<i64>, Option<i64>) = conn
            .query_row(
                "SELECT count(*), coalesce(sum(count), 0), min(t_min), max(end_max) FROM chunk",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .ctx(path)?;
        let (lo, hi) = (t_min.unwrap_or(0), t_max.unwrap_or(0));
        if finished {
            conn.execute(
                "UPDATE trace_info SET t_min = ?1, t_max = ?2, event_count = ?3 WHERE id = 1",
                params![lo, hi, events],
            )
            .ctx(path)?;
        } else {
            conn.execute(
                "UPDATE trace_info SET t_min = ?1, t_max = ?2, event_count = ?3, complete = 0, finished = 1
                 WHERE id = 1",
                params![lo, hi, events],
            )
            .ctx(path)?;
            conn.execute(
                "INSERT OR REPLACE INTO trace_param (name, type, value) VALUES (?1, 'string', ?2)",
                params![INTERRUPTED_PARAM, reason],
            )
            .ctx(path)?;
        }
        conn.execute_batch("COMMIT").ctx(path)?;
        Ok((chunks, events, t_min, t_max))
    })();
    let (chunks, events, t_min, t_max) = match written {
        Ok(v) => v,
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            return Err(e);
        }
    };
    if fold_wal {
        make_self_contained(&conn);
    }
    drop(conn);
    drop(lock);
    Ok(RepairOutcome::Repaired(Repaired {
        path: path.to_path_buf(),
        events: events.max(0) as u64,
        events_before: events_before.max(0) as u64,
        t_min: t_min.unwrap_or(0),
        t_max: t_max.unwrap_or(0),
        chunks: chunks.max(0) as u64,
        unreadable_chunks: unreadable.len() as u64,
        unreadable_events: unreadable.iter().map(|c| c.count).sum(),
        was_live: !finished,
    }))
}

/// A chunk that cannot be read.
struct BadChunk {
    id: i64,
    stream: i64,
    count: u64,
    t_min: i64,
    why: String,
}

/// Chunks whose header is not one or that name a dictionary the trace does not hold (read from
/// their headers only: no block is decompressed), and with `whole`, chunks whose blocks do not decode
/// (a damaged zstd frame, columns that do not add up).
fn unreadable_chunks(conn: &Connection, path: &Path, whole: bool) -> Result<Vec<BadChunk>> {
    let stored = crate::upgrade::StoredDictionaries::new(conn);
    let mut decompressor = if whole {
        Some(
            crate::codec::Decompressor::new().map_err(|source| StoreError::Io {
                path: path.to_path_buf(),
                source,
            })?,
        )
    } else {
        None
    };
    let mut decoded = crate::codec::DecodedChunk::default();
    let dicts: std::collections::HashSet<i64> = {
        let mut st = conn.prepare("SELECT id FROM chunk_dict").ctx(path)?;
        st.query_map([], |r| r.get(0))
            .ctx(path)?
            .collect::<rusqlite::Result<_>>()
            .ctx(path)?
    };
    let mut st = conn
        .prepare("SELECT id, stream, count, t_min, data FROM chunk ORDER BY id")
        .ctx(path)?;
    let mut rows = st.query([]).ctx(path)?;
    let mut bad = Vec::new();
    while let Some(r) = rows.next().ctx(path)? {
        let data = r.get_ref(4).ctx(path)?;
        let why = match data.as_blob() {
            Err(_) => Some("its data is not a blob".to_string()),
            Ok(blob) => match crate::codec::chunk_dictionary(blob, blob.len()) {
                Err(e) => Some(e),
                Ok(d) if d != 0 && !i64::try_from(d).is_ok_and(|d| dicts.contains(&d)) => Some(
                    format!("it names dictionary {d}, which the trace does not hold"),
                ),
                Ok(_) => decompressor.as_mut().and_then(|dec| {
                    match crate::codec::decode_chunk(blob, dec, &stored, &mut decoded) {
                        Err(e) => Some(e),
                        Ok(()) => {
                            let row: i64 = r.get(2).unwrap_or(-1);
                            (i64::try_from(decoded.len()).ok() != Some(row)).then(|| {
                                format!("it holds {} events, its row says {row}", decoded.len())
                            })
                        }
                    }
                }),
            },
        };
        if let Some(why) = why {
            bad.push(BadChunk {
                id: r.get(0).ctx(path)?,
                stream: r.get(1).ctx(path)?,
                count: r.get::<_, i64>(2).ctx(path)?.max(0) as u64,
                t_min: r.get(3).ctx(path)?,
                why,
            });
        }
    }
    Ok(bad)
}

/// Removes unreadable chunks (inside the repair's transaction): a `loss` row says what each held,
/// the streams' counts are set from what is left, and the summary is rebuilt from the readable
/// chunks (it counted the removed ones).
fn drop_chunks(conn: &Connection, path: &Path, bad: &[BadChunk]) -> Result<()> {
    for c in bad {
        conn.execute("DELETE FROM chunk WHERE id = ?1", [c.id])
            .ctx(path)?;
        let cpu = crate::codec::split_stream(c.stream).and_then(|(_, _, cpu)| cpu);
        conn.execute(
            "INSERT INTO loss (cpu, ts, count, seq_from, seq_to, reason) VALUES (?1, ?2, ?3, NULL, NULL, ?4)",
            params![
                cpu,
                c.t_min,
                c.count as i64,
                format!("chunk {} could not be read ({}): removed by repair", c.id, c.why)
            ],
        )
        .ctx(path)?;
    }
    conn.execute_batch(
        "UPDATE stream SET
            chunk_count = (SELECT count(*) FROM chunk WHERE chunk.stream = stream.id),
            event_count = (SELECT coalesce(sum(count), 0) FROM chunk WHERE chunk.stream = stream.id);",
    )
    .ctx(path)?;
    crate::upgrade::rebuild_summary(conn, path)?;
    Ok(())
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
