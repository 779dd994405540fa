//! SQL schema of the trace and catalog files, and opening them with version checks.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use crate::error::{Result, SqlContext, StoreError};

/// Version of the trace file schema, stored in `PRAGMA user_version`.
///
/// Bump it whenever a table, a column, the chunk or the summary encoding changes meaning, and
/// teach [`crate::upgrade_trace`] to convert the previous version. Version 2: summary rows hold
/// state starts and ends (format 2) instead of state time per bucket; chunk lookups use a
/// covering index. Version 3: table `chunk_dict`, the zstd dictionaries that format-3 chunks
/// name (version 2 files are read as they are: their chunks name none).
pub const SCHEMA_VERSION: i64 = 3;

/// The oldest trace schema version this build reads without converting it.
pub const OLDEST_READABLE_TRACE_VERSION: i64 = 2;

/// Version of the catalog schema, stored in its `PRAGMA user_version`.
pub const CATALOG_SCHEMA_VERSION: i64 = 1;

/// `PRAGMA application_id` of a trace file ("SoCt").
pub const TRACE_APPLICATION_ID: i32 = 0x536F_4374;

/// `PRAGMA application_id` of a catalog file ("SoCc").
pub const CATALOG_APPLICATION_ID: i32 = 0x536F_4363;

/// Tables of a trace file (see `SCHEMA.md`).
pub(crate) const TRACE_DDL: &str = r#"
CREATE TABLE trace_info (
    id              INTEGER PRIMARY KEY CHECK (id = 1),
    trace_type      TEXT    NOT NULL,
    board           TEXT    NOT NULL,
    soc             TEXT    NOT NULL,
    os              TEXT    NOT NULL,
    application     TEXT    NOT NULL,
    cpus            INTEGER NOT NULL,
    tick_rate_hz    INTEGER NOT NULL,
    start_unix_ns   INTEGER NOT NULL,
    description     TEXT    NOT NULL,
    processed       INTEGER NOT NULL,
    t_min           INTEGER NOT NULL,
    t_max           INTEGER NOT NULL,
    event_count     INTEGER NOT NULL,
    complete        INTEGER NOT NULL,
    finished        INTEGER NOT NULL,
    summary_base_shift INTEGER NOT NULL,
    summary_levels  INTEGER NOT NULL
);
CREATE TABLE trace_param (
    name            TEXT PRIMARY KEY,
    type            TEXT NOT NULL,
    value           TEXT NOT NULL
);
CREATE TABLE event_type (
    id              INTEGER PRIMARY KEY,
    name            TEXT    NOT NULL,
    category        INTEGER NOT NULL
);
CREATE TABLE event_param_type (
    id              INTEGER PRIMARY KEY,
    event_type_id   INTEGER NOT NULL REFERENCES event_type(id),
    position        INTEGER NOT NULL,
    name            TEXT    NOT NULL,
    type            TEXT    NOT NULL,
    UNIQUE (event_type_id, position)
);
CREATE TABLE producer (
    id              INTEGER PRIMARY KEY,
    parent_id       INTEGER,
    kind            TEXT    NOT NULL,
    local_id        INTEGER NOT NULL,
    name            TEXT    NOT NULL
);
CREATE INDEX producer_by_kind ON producer(kind, local_id);
CREATE TABLE file (
    id              INTEGER PRIMARY KEY,
    path            TEXT NOT NULL,
    description     TEXT NOT NULL
);
CREATE TABLE loss (
    id              INTEGER PRIMARY KEY,
    cpu             INTEGER,
    ts              INTEGER NOT NULL,
    count           INTEGER NOT NULL,
    seq_from        INTEGER,
    seq_to          INTEGER,
    reason          TEXT    NOT NULL
);
CREATE TABLE ingest_stat (
    name            TEXT PRIMARY KEY,
    value           INTEGER NOT NULL,
    description     TEXT    NOT NULL
);
CREATE TABLE stream (
    id              INTEGER PRIMARY KEY,
    category        INTEGER NOT NULL,
    duration_class  INTEGER NOT NULL,
    cpu             INTEGER,
    max_span        INTEGER NOT NULL,
    chunk_count     INTEGER NOT NULL,
    event_count     INTEGER NOT NULL
);
CREATE TABLE chunk (
    id              INTEGER PRIMARY KEY,
    stream          INTEGER NOT NULL,
    t_min           INTEGER NOT NULL,
    t_max           INTEGER NOT NULL,
    end_max         INTEGER NOT NULL,
    count           INTEGER NOT NULL,
    types           TEXT    NOT NULL,
    producers       TEXT    NOT NULL,
    data            BLOB    NOT NULL
);
CREATE INDEX chunk_by_stream_time ON chunk(stream, t_min, t_max, end_max);
CREATE INDEX chunk_by_time ON chunk(t_min);
CREATE TABLE chunk_dict (
    id              INTEGER PRIMARY KEY,
    stream          INTEGER NOT NULL,
    data            BLOB    NOT NULL
);
CREATE TABLE summary (
    level           INTEGER NOT NULL,
    bucket          INTEGER NOT NULL,
    data            BLOB    NOT NULL,
    PRIMARY KEY (level, bucket)
) WITHOUT ROWID;
"#;

/// The analysis-result tables of a trace file (see `SCHEMA.md`), created with the first result
/// saved: a trace that has none does not pay their pages (a dozen tables are most of a small
/// import's file).
pub(crate) const RESULTS_DDL: &str = r#"
CREATE TABLE IF NOT EXISTS analysis_result (
    id              INTEGER PRIMARY KEY,
    tool_id         INTEGER,
    tool_name       TEXT    NOT NULL,
    kind            TEXT    NOT NULL,
    date_unix_ns    INTEGER NOT NULL,
    description     TEXT    NOT NULL
);
CREATE TABLE IF NOT EXISTS search_result (
    result_id       INTEGER PRIMARY KEY REFERENCES analysis_result(id),
    command         TEXT NOT NULL,
    target_entity   TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS search_mapping (
    result_id       INTEGER NOT NULL REFERENCES analysis_result(id),
    target_id       INTEGER NOT NULL,
    PRIMARY KEY (result_id, target_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS result_group (
    result_id       INTEGER NOT NULL REFERENCES analysis_result(id),
    group_id        INTEGER NOT NULL,
    parent_group_id INTEGER,
    name            TEXT    NOT NULL,
    target_entity   TEXT    NOT NULL,
    operator        TEXT    NOT NULL,
    ordered         INTEGER NOT NULL,
    sequence        INTEGER NOT NULL,
    PRIMARY KEY (result_id, group_id)
);
CREATE TABLE IF NOT EXISTS group_mapping (
    result_id       INTEGER NOT NULL,
    group_id        INTEGER NOT NULL,
    target_id       INTEGER NOT NULL,
    position        INTEGER NOT NULL,
    PRIMARY KEY (result_id, group_id, target_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS annotation_type (
    result_id       INTEGER NOT NULL REFERENCES analysis_result(id),
    id              INTEGER NOT NULL,
    name            TEXT    NOT NULL,
    PRIMARY KEY (result_id, id)
);
CREATE TABLE IF NOT EXISTS annotation_param_type (
    result_id       INTEGER NOT NULL,
    annotation_type_id INTEGER NOT NULL,
    position        INTEGER NOT NULL,
    name            TEXT    NOT NULL,
    type            TEXT    NOT NULL,
    PRIMARY KEY (result_id, annotation_type_id, position)
);
CREATE TABLE IF NOT EXISTS annotation (
    result_id       INTEGER NOT NULL,
    id              INTEGER NOT NULL,
    annotation_type_id INTEGER NOT NULL,
    name            TEXT    NOT NULL,
    PRIMARY KEY (result_id, id)
);
CREATE TABLE IF NOT EXISTS annotation_param (
    result_id       INTEGER NOT NULL,
    annotation_id   INTEGER NOT NULL,
    position        INTEGER NOT NULL,
    value           TEXT    NOT NULL,
    PRIMARY KEY (result_id, annotation_id, position)
);
CREATE TABLE IF NOT EXISTS result_file (
    result_id       INTEGER NOT NULL REFERENCES analysis_result(id),
    position        INTEGER NOT NULL,
    path            TEXT    NOT NULL,
    PRIMARY KEY (result_id, position)
);
CREATE TABLE IF NOT EXISTS processed_trace (
    result_id       INTEGER PRIMARY KEY REFERENCES analysis_result(id),
    trace_db        TEXT NOT NULL
);
"#;

/// Tables of `catalog.db` (see `SCHEMA.md`).
pub(crate) const CATALOG_DDL: &str = r#"
CREATE TABLE trace_type (
    id              INTEGER PRIMARY KEY,
    name            TEXT NOT NULL UNIQUE
);
CREATE TABLE trace_param_type (
    id              INTEGER PRIMARY KEY,
    trace_type_id   INTEGER NOT NULL REFERENCES trace_type(id),
    name            TEXT NOT NULL,
    type            TEXT NOT NULL,
    UNIQUE (trace_type_id, name)
);
CREATE TABLE trace (
    id              INTEGER PRIMARY KEY,
    trace_type_id   INTEGER NOT NULL REFERENCES trace_type(id),
    db_file         TEXT    NOT NULL UNIQUE,
    board           TEXT    NOT NULL,
    soc             TEXT    NOT NULL,
    os              TEXT    NOT NULL,
    application     TEXT    NOT NULL,
    cpus            INTEGER NOT NULL,
    tick_rate_hz    INTEGER NOT NULL,
    start_unix_ns   INTEGER NOT NULL,
    duration_ns     INTEGER NOT NULL,
    event_count     INTEGER NOT NULL,
    complete        INTEGER NOT NULL,
    processed       INTEGER NOT NULL,
    description     TEXT    NOT NULL
);
CREATE TABLE trace_param (
    trace_id        INTEGER NOT NULL REFERENCES trace(id) ON DELETE CASCADE,
    param_type_id   INTEGER NOT NULL REFERENCES trace_param_type(id),
    value           TEXT    NOT NULL,
    PRIMARY KEY (trace_id, param_type_id)
);
CREATE TABLE tool (
    id              INTEGER PRIMARY KEY,
    name            TEXT NOT NULL UNIQUE,
    kind            TEXT NOT NULL,
    command         TEXT NOT NULL,
    description     TEXT NOT NULL
);
"#;

fn set_pragmas(conn: &Connection, path: &Path) -> Result<()> {
    conn.pragma_update(None, "journal_mode", "WAL").ctx(path)?;
    conn.pragma_update(None, "synchronous", "NORMAL")
        .ctx(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .ctx(path)?;
    Ok(())
}

/// The schema version this build writes for files of this `application_id`.
pub(crate) fn schema_version_of(application_id: i32) -> i64 {
    if application_id == CATALOG_APPLICATION_ID {
        CATALOG_SCHEMA_VERSION
    } else {
        SCHEMA_VERSION
    }
}

/// The empty trace and catalog files that [`create`] builds unsynced (`durable = false`: page size,
/// vacuum mode, tables, application id and version), zstd-compressed. [`create`] writes one of
/// them instead of running the DDL: parsing and executing twenty `CREATE` statements was about a
/// tenth of the CPU of a small import. The test `schema::tests::images_are_what_the_ddl_builds`
/// builds both files from the DDL again and fails when an image differs by a byte (a table
/// changed, or the bundled SQLite writes its header differently); run it with
/// `SOCSCOPE_WRITE_SCHEMA_IMAGES=1` to rewrite them.
const TRACE_IMAGE: &[u8] = include_bytes!("schema_images/trace.db.zst");
const CATALOG_IMAGE: &[u8] = include_bytes!("schema_images/catalog.db.zst");

/// The prebuilt empty file for `ddl` written unsynced (see [`TRACE_IMAGE`]).
fn image_of(ddl: &str, application_id: i32) -> Option<&'static [u8]> {
    match application_id {
        TRACE_APPLICATION_ID if ddl == TRACE_DDL => Some(TRACE_IMAGE),
        CATALOG_APPLICATION_ID if ddl == CATALOG_DDL => Some(CATALOG_IMAGE),
        _ => None,
    }
    .filter(|image| !image.is_empty())
}

/// The largest image [`create`] expands (both are far smaller: a few dozen pages).
const MAX_IMAGE_BYTES: usize = 1 << 20;

/// Creates a new store file of the given kind with its tables.
/// `durable`: each commit is made durable as SQLite's `synchronous=NORMAL` does in WAL mode; `false`
/// syncs nothing (`synchronous=OFF`, the rollback journal in memory), for a file that is worth nothing
/// until its writer finishes it and syncs it once (an import, see
/// [`crate::WriterConfig::sync_commits`]; a catalog built aside, see [`create_atomically`]).
pub(crate) fn create(
    path: &Path,
    ddl: &str,
    application_id: i32,
    durable: bool,
) -> Result<Connection> {
    // A durable file is built transaction by transaction through its WAL; an image written
    // unsynced would need a sync of its own first.
    let image = if durable {
        None
    } else {
        image_of(ddl, application_id)
    };
    create_from(path, ddl, application_id, durable, image)
}

/// [`create`], from `image` (a zstd-compressed empty file, see [`TRACE_IMAGE`]) when given.
fn create_from(
    path: &Path,
    ddl: &str,
    application_id: i32,
    durable: bool,
    image: Option<&[u8]>,
) -> Result<Connection> {
    // Exclusive creation: two writers choosing the same name at the same moment (two boards
    // of the same name) must not both build tables in one file. SQLite opens the empty file
    // this leaves as a new database.
    let created = match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(StoreError::AlreadyExists {
                path: path.to_path_buf(),
            });
        }
        Err(source) => {
            return Err(StoreError::Io {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let built = (|| {
        if let Some(image) = image {
            use std::io::Write;
            let io = |source| StoreError::Io {
                path: path.to_path_buf(),
                source,
            };
            let bytes = zstd::bulk::decompress(image, MAX_IMAGE_BYTES).map_err(io)?;
            (&created).write_all(&bytes).map_err(io)?;
        }
        drop(created);
        let conn = Connection::open(path).ctx(path)?;
        if !durable {
            // Nothing synced, and no WAL: its pages would be written twice (in the WAL, then by the
            // checkpoint into the file) for a file nobody reads before it is finished. The journal
            // kept in memory still rolls back a failed transaction (a full disk); a crash leaves
            // a file that was worth nothing anyway. Set first: `auto_vacuum` below writes the
            // file's header in a transaction of its own, which would otherwise go through a
            // journal on disk and four syncs (journal twice, directory, file).
            conn.pragma_update(None, "synchronous", "OFF").ctx(path)?;
            conn.pragma_update(None, "journal_mode", "MEMORY")
                .ctx(path)?;
            conn.busy_timeout(std::time::Duration::from_secs(5))
                .ctx(path)?;
        }
        if image.is_some() {
            // Page size, vacuum mode, tables, id and version: all in the image.
            return Ok(conn);
        }
        conn.pragma_update(None, "page_size", 4096).ctx(path)?;
        // Pages freed while a trace grows (tail chunks and summary rows rewritten) are given
        // back when the writer finishes (`PRAGMA incremental_vacuum`); set before any table.
        conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")
            .ctx(path)?;
        if durable {
            // After `page_size`: a file in WAL mode keeps the page size it has.
            set_pragmas(&conn, path)?;
        }
        let version = schema_version_of(application_id);
        conn.execute_batch(&format!(
            "BEGIN; {ddl} PRAGMA application_id = {application_id}; PRAGMA user_version = {version}; COMMIT;"
        ))
        .ctx(path)?;
        Ok(conn)
    })();
    if built.is_err() {
        // Nothing but this call's own empty or half-built file is there (a full disk, say).
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut p = path.as_os_str().to_owned();
            p.push(suffix);
            let _ = std::fs::remove_file(p);
        }
    }
    built
}

/// Creates a complete store file at `path` unless one is already there, without ever
/// exposing a partly created file: the schema is written to a temporary file of the same
/// directory, which is then hard-linked to `path` (linking fails if `path` exists, so a file
/// that another process created first is kept). Returns once `path` holds a complete file
/// (made by this call or by another one): `true` when this call's file was linked in.
///
/// `fill` writes the new file's first rows before it is synced and linked (a catalog created by an
/// import holds its trace's row from the start); when another process's file is kept instead,
/// what `fill` wrote is not in it, and the caller writes it again through that file.
/// `before_link` runs after the new file is synced, just before it is linked in (not when the
/// build failed): what must be durable before the file names it on disk.
pub(crate) fn create_atomically(
    path: &Path,
    ddl: &str,
    application_id: i32,
    fill: impl FnOnce(&Connection, &Path) -> Result<()>,
    before_link: impl FnOnce() -> Result<()>,
) -> Result<bool> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let io = |source: std::io::Error| StoreError::Io {
        path: path.to_path_buf(),
        source,
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(
        ".{name}.tmp-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let remove_tmp = || {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut p = tmp.clone().into_os_string();
            p.push(suffix);
            let _ = std::fs::remove_file(p);
        }
    };
    remove_tmp();
    // Built unsynced (nobody sees the temporary file), then synced once before it is linked in:
    // a dozen syncs fewer than building it durably, transaction by transaction.
    let built = create(&tmp, ddl, application_id, false).and_then(|conn| {
        fill(&conn, &tmp)?;
        // Left in WAL mode, as every opening sets it: the first one then has no header to rewrite.
        conn.pragma_update(None, "journal_mode", "WAL").ctx(&tmp)?;
        // Closing the only connection checkpoints the WAL into the file and deletes it.
        conn.close().map_err(|(_, e)| e).ctx(&tmp)?;
        std::fs::File::open(&tmp)
            .and_then(|f| f.sync_all())
            .map_err(|source| StoreError::Io {
                path: tmp.clone(),
                source,
            })
    });
    if let Err(e) = built.and_then(|()| before_link()) {
        remove_tmp();
        return Err(e);
    }
    let linked = std::fs::hard_link(&tmp, path);
    remove_tmp();
    match linked {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(false),
        Err(e) => return Err(io(e)),
    }
    // The new name made durable too.
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|source| StoreError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
    Ok(true)
}

/// Opens an existing store file, checking that it is of the expected kind and version.
pub(crate) fn open(
    path: &Path,
    kind: &'static str,
    application_id: i32,
    read_only: bool,
) -> Result<Connection> {
    if !path.is_file() {
        return Err(StoreError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
        });
    }
    let flags = if read_only {
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI
    };
    let conn = Connection::open_with_flags(path, flags).ctx(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .ctx(path)?;
    let not_store = |detail: String| StoreError::NotAStore {
        path: path.to_path_buf(),
        expected_kind: kind,
        detail,
    };
    let app: i32 = conn
        .pragma_query_value(None, "application_id", |r| r.get(0))
        .map_err(|e| not_store(e.to_string()))?;
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(|e| not_store(e.to_string()))?;
    if app != application_id {
        return Err(not_store(format!(
            "application_id is {app:#x}, expected {application_id:#x}"
        )));
    }
    let expected = schema_version_of(application_id);
    let readable = version == expected
        || (application_id == TRACE_APPLICATION_ID
            && (OLDEST_READABLE_TRACE_VERSION..SCHEMA_VERSION).contains(&version));
    if !readable {
        return Err(StoreError::SchemaVersion {
            path: path.to_path_buf(),
            found: version,
            expected,
        });
    }
    if !read_only {
        set_pragmas(&conn, path)?;
    }
    // Touch the schema so that a truncated file fails here rather than in the middle of a query.
    let check = if kind == "trace" {
        "SELECT count(*) FROM trace_info"
    } else {
        "SELECT count(*) FROM trace"
    };
    conn.query_row(check, [], |r| r.get::<_, i64>(0))
        .map_err(|e| not_store(e.to_string()))?;
    Ok(conn)
}

/// The comma-separated id list stored in a chunk row's `types`/`producers` columns.
pub(crate) fn join_ids(ids: &[u32]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(ids.len() * 4);
    for (i, id) in ids.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(s, "{id}");
    }
    s
}

/// The ids of a comma-separated id column (see [`join_ids`]); a malformed item is left out.
pub(crate) fn parse_ids(s: &str) -> Vec<u32> {
    s.split(',').filter_map(|x| x.trim().parse().ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file [`create`] builds unsynced from the DDL alone.
    fn built_from_ddl(dir: &Path, name: &str, ddl: &str, application_id: i32) -> Vec<u8> {
        let path = dir.join(name);
        let conn = create_from(&path, ddl, application_id, false, None).unwrap();
        drop(conn);
        std::fs::read(&path).unwrap()
    }

    #[test]
    fn images_are_what_the_ddl_builds() {
        let dir = tempfile::tempdir().unwrap();
        let images = [
            ("trace.db", TRACE_DDL, TRACE_APPLICATION_ID, TRACE_IMAGE),
            (
                "catalog.db",
                CATALOG_DDL,
                CATALOG_APPLICATION_ID,
                CATALOG_IMAGE,
            ),
        ];
        let rewrite = std::env::var_os("SOCSCOPE_WRITE_SCHEMA_IMAGES").is_some();
        for (name, ddl, app, image) in images {
            let built = built_from_ddl(dir.path(), name, ddl, app);
            if rewrite {
                let out = Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("src/schema_images")
                    .join(format!("{name}.zst"));
                std::fs::write(&out, zstd::bulk::compress(&built, 19).unwrap()).unwrap();
                continue;
            }
            let expanded = zstd::bulk::decompress(image, MAX_IMAGE_BYTES).unwrap();
            assert!(
                expanded == built,
                "src/schema_images/{name}.zst is not what the DDL builds ({} bytes against {}, \
                 first difference at byte {:?}): rewrite it with SOCSCOPE_WRITE_SCHEMA_IMAGES=1 \
                 cargo test --workspace --all-features --lib -- images_are_what_the_ddl_builds",
                expanded.len(),
                built.len(),
                expanded.iter().zip(&built).position(|(a, b)| a != b)
            );
        }
    }

    #[test]
    fn a_file_created_from_its_image_is_a_writable_store_of_its_kind() {
        let dir = tempfile::tempdir().unwrap();
        for (name, ddl, app, kind) in [
            ("t.db", TRACE_DDL, TRACE_APPLICATION_ID, "trace"),
            ("catalog.db", CATALOG_DDL, CATALOG_APPLICATION_ID, "catalog"),
        ] {
            assert!(image_of(ddl, app).is_some(), "{name}: no image");
            let path = dir.path().join(name);
            let conn = create(&path, ddl, app, false).unwrap();
            let journal: String = conn
                .pragma_query_value(None, "journal_mode", |r| r.get(0))
                .unwrap();
            assert_eq!(journal, "memory");
            let synchronous: i64 = conn
                .pragma_query_value(None, "synchronous", |r| r.get(0))
                .unwrap();
            assert_eq!(synchronous, 0);
            drop(conn);
            let conn = open(&path, kind, app, false).unwrap();
            for (pragma, expected) in [("page_size", 4096), ("auto_vacuum", 2)] {
                let v: i64 = conn.pragma_query_value(None, pragma, |r| r.get(0)).unwrap();
                assert_eq!(v, expected, "{name}: {pragma}");
            }
            let check: String = conn
                .query_row("PRAGMA integrity_check", [], |r| r.get(0))
                .unwrap();
            assert_eq!(check, "ok");
        }
        // A durable file, and a DDL of no image, are built from their DDL.
        assert!(image_of(RESULTS_DDL, TRACE_APPLICATION_ID).is_none());
        // An existing name is refused before anything is written.
        let err = create(
            &dir.path().join("t.db"),
            TRACE_DDL,
            TRACE_APPLICATION_ID,
            false,
        )
        .err()
        .unwrap();
        assert!(matches!(err, StoreError::AlreadyExists { .. }), "{err}");
    }
}
