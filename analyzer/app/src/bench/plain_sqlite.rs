//! The anchor of `bench read`: the same events stored as plain SQLite rows (one row per event, an index
//! on time), the way a trace is kept without socscope's chunks and summaries, and read back the same way
//! at the same random times. It ships with every build, so a read figure is always a ratio to it.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use rusqlite::{Connection, params};
use socscope_tracedb::{Filter, StoredEvent, TimeRange, TraceReader};

/// The plain table: every column a stored event has, parameters as one text column.
const DDL: &str = "CREATE TABLE event (
    id INTEGER PRIMARY KEY,
    ts INTEGER NOT NULL,
    end_ts INTEGER,
    type_id INTEGER NOT NULL,
    producer INTEGER NOT NULL,
    cpu INTEGER,
    category INTEGER NOT NULL,
    params TEXT NOT NULL
);
CREATE INDEX event_ts ON event(ts);";

/// What copying a trace into a plain table took.
pub struct PlainCopy {
    /// Size of the plain file.
    pub bytes: u64,
    /// Rows inserted.
    pub rows: u64,
    /// Seconds spent inserting and committing (reading the trace back is not counted).
    pub insert_seconds: f64,
}

impl PlainCopy {
    /// Rows inserted per second.
    pub fn rows_per_second(&self) -> f64 {
        self.rows as f64 / self.insert_seconds.max(1e-9)
    }
}

/// Copies the first `limit` events (all with `None`) of `trace` into a new plain SQLite file `out`, in one
/// transaction with a prepared statement (SQLite's fastest way to insert rows).
pub fn write(trace: &Path, out: &Path, limit: Option<u64>) -> Result<PlainCopy> {
    if out.exists() {
        std::fs::remove_file(out).with_context(|| format!("removing {}", out.display()))?;
    }
    let reader = TraceReader::open(trace)?;
    let info = reader.info()?;
    let mut conn = Connection::open(out).with_context(|| format!("creating {}", out.display()))?;
    conn.execute_batch("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;")?;
    conn.execute_batch(DDL)?;
    let tx = conn.transaction()?;
    let (mut rows, mut insert_seconds) = (0u64, 0f64);
    {
        let mut insert = tx.prepare(
            "INSERT INTO event (ts, end_ts, type_id, producer, cpu, category, params)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )?;
        let mut it = reader.events(TimeRange::from(info.t_min), &Filter::all())?;
        let mut e = StoredEvent::default();
        let mut params_text = String::new();
        while rows < limit.unwrap_or(u64::MAX) && it.next_into(&mut e)? {
            params_text.clear();
            for (i, p) in e.params.iter().enumerate() {
                use std::fmt::Write;
                if i > 0 {
                    params_text.push('\u{1f}');
                }
                let _ = write!(params_text, "{p}");
            }
            let end = (e.end() != e.ts).then_some(e.end());
            let t = Instant::now();
            insert.execute(params![
                e.ts,
                end,
                i64::from(e.type_id),
                i64::from(e.producer),
                e.cpu.map(i64::from),
                i64::from(e.category().code()),
                params_text,
            ])?;
            insert_seconds += t.elapsed().as_secs_f64();
            rows += 1;
        }
    }
    let t = Instant::now();
    tx.commit()?;
    drop(conn);
    insert_seconds += t.elapsed().as_secs_f64();
    Ok(PlainCopy {
        bytes: std::fs::metadata(out)?.len(),
        rows,
        insert_seconds,
    })
}

/// An open plain table, to read `k` consecutive events from a time.
pub struct PlainReader {
    conn: Connection,
}

impl PlainReader {
    pub fn open(path: &Path) -> Result<Self> {
        let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .with_context(|| format!("opening {}", path.display()))?;
        Ok(Self { conn })
    }

    /// Microseconds to read the `k` events from time `t` on, every column of every row looked at
    /// (borrowed, as socscope's reused-event read does: no allocation per row).
    pub fn read_us(&self, t: i64, k: usize) -> Result<f64> {
        let start = Instant::now();
        let mut stmt = self.conn.prepare_cached(
            "SELECT ts, end_ts, type_id, producer, cpu, category, params FROM event
             WHERE ts >= ?1 ORDER BY ts LIMIT ?2",
        )?;
        let mut rows = stmt.query(params![t, k as i64])?;
        let mut checksum = 0i64;
        while let Some(row) = rows.next()? {
            checksum = checksum
                .wrapping_add(row.get::<_, i64>(0)?)
                .wrapping_add(row.get::<_, Option<i64>>(1)?.unwrap_or(0))
                .wrapping_add(row.get::<_, i64>(2)?)
                .wrapping_add(row.get::<_, i64>(3)?)
                .wrapping_add(row.get::<_, Option<i64>>(4)?.unwrap_or(0))
                .wrapping_add(row.get::<_, i64>(5)?)
                .wrapping_add(row.get_ref(6)?.as_str()?.len() as i64);
        }
        std::hint::black_box(checksum);
        Ok(start.elapsed().as_secs_f64() * 1e6)
    }
}

/// Microseconds to read the `k` events from time `t` on from the socscope trace, into one reused event.
pub fn socscope_read_us(
    reader: &TraceReader,
    e: &mut StoredEvent,
    t: i64,
    k: usize,
) -> Result<f64> {
    let start = Instant::now();
    let mut it = reader.events(TimeRange::from(t), &Filter::all())?;
    let mut n = 0;
    while n < k && it.next_into(e)? {
        n += 1;
    }
    std::hint::black_box(&e);
    Ok(start.elapsed().as_secs_f64() * 1e6)
}
