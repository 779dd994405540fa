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

/// Copies every event of `trace` into a new plain SQLite file `out`; returns the file's size in bytes.
pub fn write(trace: &Path, out: &Path) -> Result<u64> {
    if out.exists() {
        std::fs::remove_file(out).with_context(|| format!("removing {}", out.display()))?;
    }
    let reader = TraceReader::open(trace)?;
    let info = reader.info()?;
    let mut conn = Connection::open(out).with_context(|| format!("creating {}", out.display()))?;
    conn.execute_batch("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;")?;
    conn.execute_batch(DDL)?;
    let tx = conn.transaction()?;
    {
        let mut insert = tx.prepare(
            "INSERT INTO event (ts, end_ts, type_id, producer, cpu, category, params)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )?;
        let mut it = reader.events(TimeRange::new(info.t_min, info.t_max), &Filter::all())?;
        let mut e = StoredEvent::default();
        let mut params_text = String::new();
        while it.next_into(&mut e)? {
            params_text.clear();
            for (i, p) in e.params.iter().enumerate() {
                use std::fmt::Write;
                if i > 0 {
                    params_text.push('\u{1f}');
                }
                let _ = write!(params_text, "{p}");
            }
            let end = (e.end() != e.ts).then_some(e.end());
            insert.execute(params![
                e.ts,
                end,
                i64::from(e.type_id),
                i64::from(e.producer),
                e.cpu.map(i64::from),
                i64::from(e.category().code()),
                params_text,
            ])?;
        }
    }
    tx.commit()?;
    drop(conn);
    Ok(std::fs::metadata(out)?.len())
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
