//! `catalog.db`: the list of traces (self-defining pattern for trace types) and of tools.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::error::{Result, SqlContext, StoreError};
use crate::model::{ParamType, ParamValue, TraceInfo};
use crate::reader::TraceReader;
use crate::schema::{self, CATALOG_APPLICATION_ID, CATALOG_DDL};

/// File name of the catalog inside its directory.
pub const CATALOG_FILE: &str = "catalog.db";

/// The WAL size at which an import, which leaves the catalog's WAL in place when it closes,
/// checkpoints and truncates it: a few dozen imports' rows (each writes 3-4 pages of 4 KiB), so
/// the next opener reads back at most about this much and the checkpoint's syncs are paid once
/// every few dozen imports.
const IMPORT_WAL_CHECKPOINT_BYTES: u64 = 256 * 1024;

/// One trace as listed in the catalog.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CatalogEntry {
    /// Identifier in the catalog (0 before registration).
    pub id: i64,
    /// The trace file, as given at registration (relative paths are relative to the catalog
    /// directory).
    pub db_file: String,
    /// Trace type and common attributes, as in the trace file.
    pub info: TraceInfo,
}

/// What a tool does (RT-427 §3.1.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolKind {
    /// Imports traces into the store.
    Import,
    /// Analyses traces.
    Analysis,
}

impl ToolKind {
    /// Stored name.
    pub const fn name(self) -> &'static str {
        match self {
            ToolKind::Import => "import",
            ToolKind::Analysis => "analysis",
        }
    }

    fn from_name(s: &str) -> Self {
        if s == "import" {
            ToolKind::Import
        } else {
            ToolKind::Analysis
        }
    }
}

/// A registered tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tool {
    /// Identifier (0 before registration).
    pub id: i64,
    /// Unique name.
    pub name: String,
    /// Kind.
    pub kind: ToolKind,
    /// Command that launches it.
    pub command: String,
    /// Free text.
    pub description: String,
}

/// The catalog of traces and tools of one directory.
pub struct Catalog {
    conn: Connection,
    dir: PathBuf,
    path: PathBuf,
}

const TRACE_COLS: &str = "t.id, t.db_file, tt.name, t.board, t.soc, t.os, t.application, t.cpus,
    t.tick_rate_hz, t.start_unix_ns, t.duration_ns, t.event_count, t.complete, t.processed, t.description";

fn trace_row(r: &Row<'_>) -> rusqlite::Result<CatalogEntry> {
    let mut info = TraceInfo::default();
    info.meta.trace_type = r.get(2)?;
    info.meta.board = r.get(3)?;
    info.meta.soc = r.get(4)?;
    info.meta.os = r.get(5)?;
    info.meta.application = r.get(6)?;
    info.meta.cpus = r.get(7)?;
    info.meta.tick_rate_hz = r.get::<_, i64>(8)? as u64;
    info.meta.start_unix_ns = r.get(9)?;
    info.t_max = r.get(10)?;
    info.event_count = r.get::<_, i64>(11)? as u64;
    info.complete = r.get(12)?;
    info.finished = true;
    info.meta.processed = r.get(13)?;
    info.meta.description = r.get(14)?;
    Ok(CatalogEntry {
        id: r.get(0)?,
        db_file: r.get(1)?,
        info,
    })
}

impl Catalog {
    /// Opens `dir/catalog.db`, creating the directory and the file when missing.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        std::fs::create_dir_all(&dir).map_err(|source| StoreError::Io {
            path: dir.clone(),
            source,
        })?;
        let path = dir.join(CATALOG_FILE);
        if !path.exists() {
            // Several processes may create the catalog at once: build it aside and move it in
            // atomically, so nobody ever sees a half-created file.
            schema::create_atomically(
                &path,
                CATALOG_DDL,
                CATALOG_APPLICATION_ID,
                |_, _| Ok(()),
                || Ok(()),
            )?;
        }
        let conn = schema::open(&path, "catalog", CATALOG_APPLICATION_ID, false)?;
        conn.pragma_update(None, "foreign_keys", true).ctx(&path)?;
        Ok(Self { conn, dir, path })
    }

    /// The catalog's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where a registered trace file is on disk.
    pub fn resolve(&self, record: &CatalogEntry) -> PathBuf {
        let p = Path::new(&record.db_file);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.dir.join(p)
        }
    }

    /// Adds a trace, or updates the one with the same `db_file`; returns its id.
    pub fn register(&self, record: &CatalogEntry) -> Result<i64> {
        register_on(&self.conn, &self.path, record)
    }

    /// Reads the trace file `db_file`'s information and registers it in `dir`'s catalog, which is
    /// created when missing: then with the trace's row already in it, one file synced once (as
    /// [`Catalog::open`] creates it), instead of a catalog created, opened again and written in
    /// a second, durable transaction (four syncs more for an import into a new directory).
    pub fn register_file_in(dir: impl AsRef<Path>, db_file: &str) -> Result<i64> {
        let dir = dir.as_ref();
        let trace = if Path::new(db_file).is_absolute() {
            PathBuf::from(db_file)
        } else {
            dir.join(db_file)
        };
        let info = TraceReader::open(trace)?.info()?;
        Self::register_in(dir, db_file, info, || Ok(()))
    }

    /// [`Catalog::register_file_in`] for a trace its caller has just written: `info` is what
    /// [`crate::TraceWriter::finish`] returned, so the file is not opened again (opening it parses
    /// its whole schema: a tenth of a small import). The parameters are registered as the file
    /// stores them and [`TraceReader::info`] would read them back: one per name (the last one
    /// given), in name order, through their text form.
    ///
    /// `trace_named` gives the trace its name, whole and synced (it syncs and links it, or waits
    /// for the thread that does): it is called once, before the catalog names the trace on disk
    /// (before a new catalog is linked in, or an existing one written), while the new catalog is
    /// built and synced meanwhile. The name's own durability (its directory's sync) may still be
    /// under way: the row is made durable alongside it, not after it (a crash between the two can
    /// leave a row whose trace is listed `missing`, never a row naming a half-written file), and
    /// the caller waits for both before it reports the trace registered.
    pub fn register_written_in(
        dir: impl AsRef<Path>,
        db_file: &str,
        info: &TraceInfo,
        trace_named: impl FnOnce() -> Result<()>,
    ) -> Result<i64> {
        let mut info = info.clone();
        let params = &mut info.meta.params;
        // Stable: of equal names, the one given last stays last, and is the one kept.
        params.sort_by(|a, b| a.0.cmp(&b.0));
        let mut stored: Vec<(String, ParamValue)> = Vec::with_capacity(params.len());
        for (name, value) in params.drain(..) {
            let value = ParamValue::parse(value.param_type(), &value.to_string()).unwrap_or(value);
            match stored.last_mut() {
                Some(last) if last.0 == name => last.1 = value,
                _ => stored.push((name, value)),
            }
        }
        *params = stored;
        Self::register_in(dir.as_ref(), db_file, info, trace_named)
    }

    fn register_in(
        dir: &Path,
        db_file: &str,
        info: TraceInfo,
        trace_named: impl FnOnce() -> Result<()>,
    ) -> Result<i64> {
        let mut trace_named = Some(trace_named);
        let mut name_trace = || trace_named.take().map_or(Ok(()), |f| f());
        let record = CatalogEntry {
            id: 0,
            db_file: db_file.to_string(),
            info,
        };
        std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = dir.join(CATALOG_FILE);
        if !path.exists() {
            let mut id = None;
            let linked = schema::create_atomically(
                &path,
                CATALOG_DDL,
                CATALOG_APPLICATION_ID,
                |conn, tmp| {
                    conn.pragma_update(None, "foreign_keys", true).ctx(tmp)?;
                    id = Some(register_on(conn, tmp, &record)?);
                    Ok(())
                },
                &mut name_trace,
            )?;
            if let (true, Some(id)) = (linked, id) {
                return Ok(id);
            }
        }
        // An existing catalog is opened (its schema read) while the trace syncs: only the commit
        // that names the trace has to wait for it.
        // The sync is waited for even when the catalog cannot be opened: the caller then knows
        // whether the trace was published under its name (and removes it), and no thread is left
        // linking it in behind an error.
        let opened = Self::open(dir).and_then(|catalog| {
            catalog.commit_durably_leaving_wal()?;
            Ok(catalog)
        });
        name_trace()?;
        let catalog = opened?;
        let id = catalog.register(&record)?;
        catalog.fold_in_a_long_wal();
        Ok(id)
    }

    /// Sets this connection to make each commit durable by itself, with one sync of the WAL
    /// (`synchronous=FULL`), and to leave the WAL in place when it closes instead of
    /// checkpointing it into the file and deleting it. An import's one-row update of an existing
    /// catalog then costs one sync of the WAL (and, SQLite's rule for a journal it opens, one of
    /// the directory), where creating the WAL, syncing its header and the directory,
    /// checkpointing at close (syncing the WAL and the file) and deleting it cost four and a
    /// file created and removed; the next import appends to the WAL it finds. What stays in the
    /// WAL is durable (synced at commit) and read by every later opener (SQLite rebuilds its index
    /// from the WAL when no process has it open); the next connection that closes normally
    /// (`ls`, `collect`, ...) folds it into `catalog.db`, and so does
    /// [`Catalog::fold_in_a_long_wal`] once imports alone have made it long.
    fn commit_durably_leaving_wal(&self) -> Result<()> {
        let p = &self.path;
        self.conn
            .pragma_update(None, "synchronous", "FULL")
            .ctx(p)?;
        // SQLite's automatic checkpoint cannot bound a WAL left at close: an opener that rebuilds
        // the WAL's index counts every frame as not yet copied back, so the WAL would never be
        // restarted and every commit past the limit would copy it all again.
        self.conn
            .pragma_update(None, "wal_autocheckpoint", 0)
            .ctx(p)?;
        self.conn
            .set_db_config(
                rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
                true,
            )
            .ctx(p)?;
        Ok(())
    }

    /// Copies a WAL of [`IMPORT_WAL_CHECKPOINT_BYTES`] or more back into `catalog.db` and
    /// truncates it (two syncs, once every few dozen imports), so what the next opener reads back
    /// stays small. Best effort, without waiting: the row is already durable in the WAL, and
    /// when another process is reading or writing the catalog the checkpoint is left to it (a
    /// connection that closes normally checkpoints) or to the next import.
    fn fold_in_a_long_wal(&self) {
        let mut wal = self.path.clone().into_os_string();
        wal.push("-wal");
        let long = std::fs::metadata(&wal).is_ok_and(|m| m.len() >= IMPORT_WAL_CHECKPOINT_BYTES);
        if long && self.conn.busy_timeout(std::time::Duration::ZERO).is_ok() {
            let _ = self
                .conn
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                    r.get::<_, i64>(0)
                });
        }
    }

    /// Reads a trace file's information and registers (or refreshes) it under `db_file`.
    pub fn register_file(&self, db_file: &str) -> Result<i64> {
        let rec = CatalogEntry {
            id: 0,
            db_file: db_file.to_string(),
            info: TraceInfo::default(),
        };
        let info = TraceReader::open(self.resolve(&rec))?.info()?;
        self.register(&CatalogEntry { info, ..rec })
    }

    fn params_of(&self, id: i64) -> Result<Vec<(String, ParamValue)>> {
        let p = &self.path;
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT pt.name, pt.type, tp.value FROM trace_param tp
                 JOIN trace_param_type pt ON pt.id = tp.param_type_id
                 WHERE tp.trace_id = ?1 ORDER BY pt.name",
            )
            .ctx(p)?;
        let rows = st
            .query_map([id], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                ))
            })
            .ctx(p)?;
        let mut out = Vec::new();
        for row in rows {
            let (name, ty, value) = row.ctx(p)?;
            let v = ParamType::from_name(&ty)
                .and_then(|t| ParamValue::parse(t, &value))
                .unwrap_or(ParamValue::String(value));
            out.push((name, v));
        }
        Ok(out)
    }

    fn traces_where(&self, clause: &str, args: impl rusqlite::Params) -> Result<Vec<CatalogEntry>> {
        let p = &self.path;
        let sql = format!(
            "SELECT {TRACE_COLS} FROM trace t JOIN trace_type tt ON tt.id = t.trace_type_id {clause} ORDER BY t.id"
        );
        let mut st = self.conn.prepare(&sql).ctx(p)?;
        let rows = st.query_map(args, trace_row).ctx(p)?;
        let mut out = rows.collect::<rusqlite::Result<Vec<_>>>().ctx(p)?;
        for r in &mut out {
            r.info.meta.params = self.params_of(r.id)?;
        }
        Ok(out)
    }

    /// All traces, processed or not.
    pub fn traces(&self) -> Result<Vec<CatalogEntry>> {
        self.traces_where("", [])
    }

    /// The trace with this id.
    pub fn trace(&self, id: i64) -> Result<Option<CatalogEntry>> {
        Ok(self
            .traces_where("WHERE t.id = ?1", [id])?
            .into_iter()
            .next())
    }

    /// The trace stored in `db_file`.
    pub fn trace_by_db_file(&self, db_file: &str) -> Result<Option<CatalogEntry>> {
        Ok(self
            .traces_where("WHERE t.db_file = ?1", [db_file])?
            .into_iter()
            .next())
    }

    /// Traces whose start lies in `[from, to)` (Unix nanoseconds).
    pub fn traces_between_dates(
        &self,
        from_unix_ns: i64,
        to_unix_ns: i64,
    ) -> Result<Vec<CatalogEntry>> {
        self.traces_where(
            "WHERE t.start_unix_ns >= ?1 AND t.start_unix_ns < ?2",
            [from_unix_ns, to_unix_ns],
        )
    }

    /// Traces of an application.
    pub fn traces_by_application(&self, application: &str) -> Result<Vec<CatalogEntry>> {
        self.traces_where("WHERE t.application = ?1", [application])
    }

    /// Traces captured on a board.
    pub fn traces_by_board(&self, board: &str) -> Result<Vec<CatalogEntry>> {
        self.traces_where("WHERE t.board = ?1", [board])
    }

    /// Traces of an operating system.
    pub fn traces_by_os(&self, os: &str) -> Result<Vec<CatalogEntry>> {
        self.traces_where("WHERE t.os = ?1", [os])
    }

    /// Traces with this number of CPUs.
    pub fn traces_by_cpus(&self, cpus: u32) -> Result<Vec<CatalogEntry>> {
        self.traces_where("WHERE t.cpus = ?1", [cpus])
    }

    /// Traces with this description.
    pub fn traces_by_description(&self, description: &str) -> Result<Vec<CatalogEntry>> {
        self.traces_where("WHERE t.description = ?1", [description])
    }

    /// Traces of one type.
    pub fn traces_by_type(&self, trace_type: &str) -> Result<Vec<CatalogEntry>> {
        self.traces_where("WHERE tt.name = ?1", [trace_type])
    }

    /// Traces whose type is among `types`.
    pub fn traces_by_types(&self, types: &[&str]) -> Result<Vec<CatalogEntry>> {
        let mut out = Vec::new();
        for t in types {
            out.extend(self.traces_by_type(t)?);
        }
        out.sort_by_key(|r| r.id);
        out.dedup_by_key(|r| r.id);
        Ok(out)
    }

    /// Traces of a type whose parameters have the given values (compared as text).
    pub fn traces_by_type_params(
        &self,
        trace_type: &str,
        params: &[(&str, &str)],
    ) -> Result<Vec<CatalogEntry>> {
        Ok(self
            .traces_by_type(trace_type)?
            .into_iter()
            .filter(|r| {
                params.iter().all(|(name, value)| {
                    r.info
                        .meta
                        .params
                        .iter()
                        .any(|(n, v)| n == name && v.to_string() == *value)
                })
            })
            .collect())
    }

    /// Traces captured through an output device (the `output_device` trace parameter).
    pub fn traces_by_output_device(&self, device: &str) -> Result<Vec<CatalogEntry>> {
        Ok(self
            .traces()?
            .into_iter()
            .filter(|r| {
                r.info
                    .meta
                    .params
                    .iter()
                    .any(|(n, v)| n == "output_device" && v.to_string() == device)
            })
            .collect())
    }

    /// Raw (not processed) traces.
    pub fn raw_traces(&self) -> Result<Vec<CatalogEntry>> {
        self.traces_where("WHERE t.processed = 0", [])
    }

    /// Processed traces.
    pub fn processed_traces(&self) -> Result<Vec<CatalogEntry>> {
        self.traces_where("WHERE t.processed = 1", [])
    }

    /// Removes a trace from the catalog, and its file (with `-wal`, `-shm`) if `delete_file`.
    pub fn delete_trace(&self, id: i64, delete_file: bool) -> Result<bool> {
        let Some(rec) = self.trace(id)? else {
            return Ok(false);
        };
        let p = &self.path;
        self.conn
            .execute("DELETE FROM trace WHERE id = ?1", [id])
            .ctx(p)?;
        if delete_file {
            let f = self.resolve(&rec);
            for suffix in ["", "-wal", "-shm"] {
                let mut s = f.clone().into_os_string();
                s.push(suffix);
                let path = PathBuf::from(s);
                if path.exists() {
                    std::fs::remove_file(&path)
                        .map_err(|source| StoreError::Io { path, source })?;
                }
            }
        }
        Ok(true)
    }

    /// Adds or replaces a tool (by name); returns its id.
    pub fn add_tool(&self, tool: &Tool) -> Result<i64> {
        let p = &self.path;
        self.conn
            .execute(
                "INSERT INTO tool (name, kind, command, description) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (name) DO UPDATE SET kind = excluded.kind, command = excluded.command,
                    description = excluded.description",
                params![tool.name, tool.kind.name(), tool.command, tool.description],
            )
            .ctx(p)?;
        self.conn
            .query_row("SELECT id FROM tool WHERE name = ?1", [&tool.name], |r| {
                r.get(0)
            })
            .ctx(p)
    }

    fn tools_where(&self, clause: &str, args: impl rusqlite::Params) -> Result<Vec<Tool>> {
        let p = &self.path;
        let sql =
            format!("SELECT id, name, kind, command, description FROM tool {clause} ORDER BY id");
        let mut st = self.conn.prepare(&sql).ctx(p)?;
        let rows = st
            .query_map(args, |r| {
                Ok(Tool {
                    id: r.get(0)?,
                    name: r.get(1)?,
                    kind: ToolKind::from_name(&r.get::<_, String>(2)?),
                    command: r.get(3)?,
                    description: r.get(4)?,
                })
            })
            .ctx(p)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().ctx(p)
    }

    /// All tools.
    pub fn tools(&self) -> Result<Vec<Tool>> {
        self.tools_where("", [])
    }

    /// The tool with this name.
    pub fn tool_by_name(&self, name: &str) -> Result<Option<Tool>> {
        Ok(self
            .tools_where("WHERE name = ?1", [name])?
            .into_iter()
            .next())
    }

    /// All tools of a kind.
    pub fn tools_by_kind(&self, kind: ToolKind) -> Result<Vec<Tool>> {
        self.tools_where("WHERE kind = ?1", [kind.name()])
    }

    /// Removes a tool.
    pub fn delete_tool(&self, id: i64) -> Result<bool> {
        Ok(self
            .conn
            .execute("DELETE FROM tool WHERE id = ?1", [id])
            .ctx(&self.path)?
            > 0)
    }

    /// The id of a trace type, if any trace of that type was registered.
    pub fn trace_type_id(&self, name: &str) -> Result<Option<i64>> {
        self.conn
            .query_row("SELECT id FROM trace_type WHERE name = ?1", [name], |r| {
                r.get(0)
            })
            .optional()
            .ctx(&self.path)
    }
}

/// The id of trace type `name` in the catalog open on `conn` (the file `p`), added when new.
fn type_id_on(conn: &Connection, p: &Path, name: &str) -> Result<i64> {
    conn.prepare_cached("INSERT OR IGNORE INTO trace_type (name) VALUES (?1)")
        .and_then(|mut st| st.execute([name]))
        .ctx(p)?;
    conn.prepare_cached("SELECT id FROM trace_type WHERE name = ?1")
        .and_then(|mut st| st.query_row([name], |r| r.get(0)))
        .ctx(p)
}

/// Adds a trace to the catalog open on `conn` (the file `p`), or updates the one with the same
/// `db_file`; returns its id.
fn register_on(conn: &Connection, p: &Path, record: &CatalogEntry) -> Result<i64> {
    let m = &record.info.meta;
    let tx = conn.unchecked_transaction().ctx(p)?;
    let type_id = type_id_on(conn, p, &m.trace_type)?;
    conn
        .execute(
            "INSERT INTO trace (trace_type_id, db_file, board, soc, os, application, cpus, tick_rate_hz,
                start_unix_ns, duration_ns, event_count, complete, processed, description)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)
             ON CONFLICT (db_file) DO UPDATE SET trace_type_id = excluded.trace_type_id,
                board = excluded.board, soc = excluded.soc, os = excluded.os,
                application = excluded.application, cpus = excluded.cpus,
                tick_rate_hz = excluded.tick_rate_hz, start_unix_ns = excluded.start_unix_ns,
                duration_ns = excluded.duration_ns, event_count = excluded.event_count,
                complete = excluded.complete, processed = excluded.processed,
                description = excluded.description",
            params![
                type_id,
                record.db_file,
                m.board,
                m.soc,
                m.os,
                m.application,
                m.cpus,
                m.tick_rate_hz as i64,
                m.start_unix_ns,
                record.info.duration(),
                record.info.event_count as i64,
                record.info.complete,
                m.processed,
                m.description
            ],
        )
        .ctx(p)?;
    let id: i64 = conn
        .query_row(
            "SELECT id FROM trace WHERE db_file = ?1",
            [&record.db_file],
            |r| r.get(0),
        )
        .ctx(p)?;
    conn.execute("DELETE FROM trace_param WHERE trace_id = ?1", [id])
        .ctx(p)?;
    // Three statements per parameter: prepared once (preparing costs more than running them).
    let mut add_type = conn
        .prepare_cached(
            "INSERT OR IGNORE INTO trace_param_type (trace_type_id, name, type) VALUES (?1, ?2, ?3)",
        )
        .ctx(p)?;
    let mut type_of = conn
        .prepare_cached("SELECT id FROM trace_param_type WHERE trace_type_id = ?1 AND name = ?2")
        .ctx(p)?;
    let mut set = conn
        .prepare_cached(
            "INSERT OR REPLACE INTO trace_param (trace_id, param_type_id, value) VALUES (?1, ?2, ?3)",
        )
        .ctx(p)?;
    for (name, value) in &m.params {
        add_type
            .execute(params![type_id, name, value.param_type().name()])
            .ctx(p)?;
        let pt: i64 = type_of
            .query_row(params![type_id, name], |r| r.get(0))
            .ctx(p)?;
        set.execute(params![id, pt, value.to_string()]).ctx(p)?;
    }
    drop((add_type, type_of, set));
    tx.commit().ctx(p)?;
    Ok(id)
}
