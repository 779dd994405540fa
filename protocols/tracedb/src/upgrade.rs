//! Converting trace files written by an older schema to the current one, in place.

use std::path::Path;

use rusqlite::{Connection, OpenFlags, params};

use crate::codec::{self, DecodedChunk};
use crate::error::{Result, SqlContext, StoreError};
use crate::model::EventCategory;
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
}

/// Converts a trace file of an older schema version to [`SCHEMA_VERSION`] in place, in one
/// transaction (an interrupted upgrade leaves the file as it was).
///
/// Version 1 → 2: the chunks are kept byte for byte (event ids, and the analysis results that
/// name them, stay valid); the summary is rebuilt from them in format 2 and the chunk lookup
/// index gains the columns it filters on. Version 2 → 3: the table of chunk dictionaries is
/// added (empty: version 2 chunks name none; this build also reads version 2 files as they
/// are). A file already at the current version is left alone.
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
    let mut report = UpgradeReport {
        from_version: version,
        to_version: SCHEMA_VERSION,
        events: 0,
        summary_rows: 0,
    };
    if version == SCHEMA_VERSION {
        report.events = conn
            .query_row("SELECT event_count FROM trace_info WHERE id = 1", [], |r| {
                r.get::<_, i64>(0)
            })
            .map_err(|e| not_store(e.to_string()))? as u64;
        return Ok(report);
    }
    if !(1..SCHEMA_VERSION).contains(&version) {
        return Err(StoreError::SchemaVersion {
            path: path.to_path_buf(),
            found: version,
            expected: SCHEMA_VERSION,
        });
    }
    conn.execute_batch("BEGIN IMMEDIATE").ctx(path)?;
    let done = (|| {
        if version == 1 {
            v1_to_v2(&conn, path, &mut report)?;
        } else {
            report.events = conn
                .query_row("SELECT event_count FROM trace_info WHERE id = 1", [], |r| {
                    r.get::<_, i64>(0)
                })
                .ctx(path)? as u64;
        }
        v2_to_v3(&conn, path)
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

/// The stored dictionaries of a trace being rewritten, read on demand.
struct StoredDictionaries<'c> {
    conn: &'c Connection,
    cache: std::cell::RefCell<std::collections::HashMap<u64, codec::ReadDictionary>>,
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
            .prepare("SELECT id, data FROM chunk ORDER BY id")
            .ctx(path)?;
        let mut rows = st.query([]).ctx(path)?;
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
        }
    }
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
