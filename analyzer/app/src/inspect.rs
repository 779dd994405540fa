//! `ls`, `info`, `sql` and `repair`: what is in a catalog and in a trace, and closing a trace left live.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use socscope_collector::naming::{printable, printable_message};
use socscope_tracedb::{
    Catalog, Filter, INTERRUPTED_PARAM, ParamValue, RepairOutcome, TimeRange, TraceInfo,
};

use crate::format;
use crate::input::open_trace;
use crate::out::{errln, outln};
use socscope_tracedb::units;

/// The catalog's file name inside its directory.
const CATALOG_FILE: &str = "catalog.db";

pub fn ls(dir: &Path, json: bool) -> Result<ExitCode> {
    if !dir.join(CATALOG_FILE).exists() {
        bail!(
            "{}: no catalog here (capture with `socscope collect --dir {0}` or `socscope demo`)",
            dir.display()
        );
    }
    let catalog = Catalog::open(dir)
        .with_context(|| format!("while opening the catalog in {}", dir.display()))?;
    // What each trace file says now, not what the catalog noted when the trace was registered: a live
    // trace shows its current counts, one a crash left live shows as such, and `info` says the same.
    let traces: Vec<(socscope_tracedb::CatalogEntry, &'static str)> = catalog
        .traces()?
        .into_iter()
        .map(|mut t| {
            let path = catalog.resolve(&t);
            let st = match socscope_tracedb::TraceReader::open(&path).and_then(|r| r.info()) {
                Ok(info) => {
                    t.info = info;
                    state(&t.info, &path)
                }
                Err(_) if !path.exists() => "missing",
                Err(_) => "unreadable",
            };
            (t, st)
        })
        .collect();
    if json {
        let rows: Vec<Value> = traces
            .iter()
            .map(|(t, st)| {
                let i = &t.info;
                json!({
                    "id": t.id,
                    "file": catalog.resolve(t),
                    "board": i.meta.board,
                    "soc": i.meta.soc,
                    "os": i.meta.os,
                    "application": i.meta.application,
                    "trace_type": i.meta.trace_type,
                    "cpus": i.meta.cpus,
                    "start_unix_ns": i.meta.start_unix_ns,
                    "duration_ns": i.duration(),
                    "events": i.event_count,
                    "complete": i.complete,
                    "finished": i.finished,
                    "state": st,
                })
            })
            .collect();
        outln!(
            "{}",
            serde_json::to_string_pretty(&json!({ "dir": dir, "traces": rows }))?
        );
        return Ok(ExitCode::SUCCESS);
    }
    if traces.is_empty() {
        outln!("no traces in {}", dir.display());
        return Ok(ExitCode::SUCCESS);
    }
    let rows: Vec<Vec<String>> = traces
        .iter()
        .map(|(t, st)| {
            let i = &t.info;
            vec![
                t.id.to_string(),
                printable(&i.meta.board),
                printable(&i.meta.application),
                units::utc_date_time(i.meta.start_unix_ns),
                units::duration(i.duration()),
                i.event_count.to_string(),
                st.to_string(),
                printable(&t.db_file),
            ]
        })
        .collect();
    outln!(
        "{}",
        format::table(
            &[
                "ID",
                "BOARD",
                "APPLICATION",
                "START (UTC)",
                "DURATION",
                "EVENTS",
                "STATE",
                "FILE"
            ],
            &rows
        )
    );
    Ok(ExitCode::SUCCESS)
}

/// `complete`, `incomplete` (ended without `Bye`), `interrupted` (closed after the fact: the collector
/// stopped without closing it, or could not write), `live` (a writer holds it now) or `left live` (no
/// writer holds it, but none closed it: a crash; `socscope repair` or the next `collect` closes it).
/// `ls` and `info` both say it from the trace file itself.
fn state(info: &TraceInfo, path: &Path) -> &'static str {
    let interrupted = info
        .meta
        .params
        .iter()
        .any(|(name, _)| name == INTERRUPTED_PARAM);
    match (info.complete, info.finished) {
        (true, _) => "complete",
        (false, true) if interrupted => "interrupted",
        (false, true) => "incomplete",
        (false, false) if socscope_tracedb::is_being_written(path).unwrap_or(true) => "live",
        (false, false) => "left live",
    }
}

/// Closes one trace left live and refreshes its catalog entry in `dir` (when it has one); says what
/// was done in a few words.
pub fn repair_one(path: &Path, dir: &Path, reason: &str) -> Result<String> {
    repair_one_outcome(path, dir, reason).map(|(said, _)| said)
}

/// [`repair_one`], with the outcome.
fn repair_one_outcome(path: &Path, dir: &Path, reason: &str) -> Result<(String, RepairOutcome)> {
    let outcome = socscope_tracedb::repair_checking_blocks(path, reason)
        .with_context(|| format!("while repairing {}", path.display()))?;
    let said = match &outcome {
        RepairOutcome::AlreadyFinished => "already finished: nothing to repair".to_string(),
        RepairOutcome::WalKept => {
            "already finished, but its WAL could not be folded in now (no room on \
             the disk yet, or another program holds it): run repair again later"
                .to_string()
        }
        RepairOutcome::WalFolded => {
            "already finished (closed on a full disk): its WAL is now folded into the file"
                .to_string()
        }
        RepairOutcome::BeingWritten => {
            "being written by a running collector: left alone".to_string()
        }
        RepairOutcome::Repaired(r) => {
            let mut said = if r.was_live {
                format!(
                    "was live: now interrupted, {} events in {} chunks ({} → {}); the last commit said {} events",
                    r.events,
                    r.chunks,
                    units::duration(r.t_min),
                    units::duration(r.t_max),
                    r.events_before
                )
            } else {
                format!(
                    "was finished; now {} events in {} chunks (the trace said {})",
                    r.events, r.chunks, r.events_before
                )
            };
            if r.unreadable_chunks > 0 {
                said.push_str(&format!(
                    "; {} unreadable chunks removed ({} events, recorded as a loss)",
                    r.unreadable_chunks, r.unreadable_events
                ));
            }
            said
        }
    };
    if matches!(outcome, RepairOutcome::Repaired(_))
        && dir.join(CATALOG_FILE).exists()
        && let Some(name) = path.file_name().and_then(|n| n.to_str())
    {
        let catalog = Catalog::open(dir)
            .with_context(|| format!("while opening the catalog in {}", dir.display()))?;
        // Registered under its file name when it lives in the catalog's directory (as the collector does).
        if catalog.trace_by_db_file(name)?.is_some() {
            catalog.register_file(name)?;
        }
    }
    Ok((said, outcome))
}

/// `socscope repair TRACE…`: closes traces left live by a crash. A catalog among them (`DIR/*.db`) is
/// skipped; a file that is not a trace is said and the others are repaired all the same (exit status
/// 1 at the end); one summary line.
pub fn repair(traces: &[std::path::PathBuf], json: bool) -> Result<ExitCode> {
    let mut docs = Vec::new();
    let (mut repaired, mut unchanged, mut busy, mut skipped, mut failed) = (0, 0, 0, 0, 0);
    for path in traces {
        let is_catalog = path
            .file_name()
            .is_some_and(|n| n == std::ffi::OsStr::new(CATALOG_FILE));
        let result = if !path.exists() {
            Err(anyhow::anyhow!("no such trace file"))
        } else if is_catalog {
            skipped += 1;
            Ok(("the catalog, not a trace: skipped".to_string(), None))
        } else {
            let dir = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            repair_one_outcome(
                path,
                dir,
                "left live by a writer that stopped without closing it (killed, crashed, or the disk was full); closed by `socscope repair`",
            )
            .map(|(said, outcome)| (said, Some(outcome)))
        };
        let said = match result {
            Ok((said, outcome)) => {
                match outcome {
                    Some(RepairOutcome::Repaired(_) | RepairOutcome::WalFolded) => repaired += 1,
                    Some(RepairOutcome::AlreadyFinished | RepairOutcome::WalKept) => unchanged += 1,
                    Some(RepairOutcome::BeingWritten) => busy += 1,
                    None => {}
                }
                said
            }
            Err(e) => {
                failed += 1;
                let why = crate::format::error_chain(&e);
                if !json {
                    errln!("socscope: {}: {}", path.display(), printable_message(&why));
                }
                docs.push(json!({"file": path, "error": why}));
                continue;
            }
        };
        if json {
            docs.push(json!({"file": path, "outcome": said}));
        } else {
            outln!("{}: {said}", printable(&path.display().to_string()));
        }
    }
    let summary = format!(
        "{} files: {repaired} repaired, {unchanged} already finished, {busy} being written, {skipped} catalog skipped, {failed} failed",
        traces.len()
    );
    if json {
        outln!("{}", serde_json::to_string_pretty(&docs)?);
    } else {
        outln!("{summary}");
    }
    if failed > 0 {
        if json {
            errln!("socscope: {summary}");
        }
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// The trace file `socscope info` names: `arg` itself when it is a file, else what `ls` prints for the
/// catalog in `dir` (an ID or a FILE, relative to that directory).
fn trace_in_catalog(arg: &Path, dir: &Path) -> Result<PathBuf> {
    if arg.exists() || !dir.join(CATALOG_FILE).exists() {
        return Ok(arg.to_path_buf());
    }
    let catalog = Catalog::open(dir)
        .with_context(|| format!("while opening the catalog in {}", dir.display()))?;
    let name = arg.to_string_lossy();
    let record = match name.parse::<i64>() {
        Ok(id) => catalog.trace(id)?.ok_or_else(|| {
            anyhow::anyhow!(
                "{name}: no such file, and no trace with that ID in the catalog in {} (`socscope ls --dir {0}` lists them)",
                dir.display()
            )
        })?,
        Err(_) => match catalog.trace_by_db_file(&name)? {
            Some(record) => record,
            // A missing file is worded as every command words it.
            None => return Ok(arg.to_path_buf()),
        },
    };
    Ok(catalog.resolve(&record))
}

pub fn info(arg: &Path, dir: &Path, json: bool) -> Result<ExitCode> {
    let path_buf = trace_in_catalog(arg, dir)?;
    let path = path_buf.as_path();
    let reader = open_trace(path)?;
    let _snapshot = reader.snapshot()?;
    let info = reader.info()?;
    let types = reader.event_types()?;
    let producers = reader.producers()?;
    let losses = reader.losses()?;
    let stats = reader.ingest_stats()?;
    let mut counts = Vec::with_capacity(types.len());
    for t in &types {
        counts.push(reader.count(TimeRange::all(), &Filter::all().types([t.id]))?);
    }
    let mut by_kind: BTreeMap<&str, usize> = BTreeMap::new();
    for p in &producers {
        *by_kind.entry(p.kind.name()).or_insert(0) += 1;
    }
    let lost: u64 = losses.iter().map(|l| l.count).sum();
    if json {
        let doc = json!({
            "file": path,
            "trace_type": info.meta.trace_type,
            "board": info.meta.board,
            "soc": info.meta.soc,
            "os": info.meta.os,
            "application": info.meta.application,
            "cpus": info.meta.cpus,
            "tick_rate_hz": info.meta.tick_rate_hz,
            "start_unix_ns": info.meta.start_unix_ns,
            "t_min_ns": info.t_min,
            "t_max_ns": info.t_max,
            "duration_ns": info.duration(),
            "events": info.event_count,
            "complete": info.complete,
            "finished": info.finished,
            "state": state(&info, path),
            "params": info.meta.params.iter().map(|(k, v)| (k.clone(), json!(v.to_string()))).collect::<serde_json::Map<_, _>>(),
            "types": types.iter().zip(&counts).map(|(t, c)| json!({
                "id": t.id,
                "name": t.name,
                "category": t.category.name(),
                "params": t.params.iter().map(|p| json!({"name": p.name, "type": p.ty.name()})).collect::<Vec<_>>(),
                "count": c,
            })).collect::<Vec<_>>(),
            "producers": { "total": producers.len(), "by_kind": by_kind },
            "losses": {
                "records": lost,
                "entries": losses.iter().map(|l| json!({
                    "cpu": l.cpu, "ts_ns": l.ts, "count": l.count,
                    "seq_from": l.seq_from, "seq_to": l.seq_to, "reason": l.reason,
                })).collect::<Vec<_>>(),
            },
            "ingest_stats": stats.iter().map(|s| (s.name.clone(), json!(s.value))).collect::<serde_json::Map<_, _>>(),
        });
        outln!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(ExitCode::SUCCESS);
    }
    let m = &info.meta;
    outln!("{}", path.display());
    // What the trace does not say is left out (an imported capture often names no board).
    let details: Vec<String> = [&m.soc, &m.os]
        .into_iter()
        .filter(|s| !s.is_empty())
        .map(|s| printable(s).to_string())
        .collect();
    let mut board = printable(&m.board).to_string();
    if !details.is_empty() {
        board = format!("{board} ({})", details.join(", "))
            .trim_start()
            .to_string();
    }
    if board.is_empty() {
        outln!("  application  {}", printable(&m.application));
    } else {
        outln!(
            "  board        {board}, application {}",
            printable(&m.application)
        );
    }
    let tracer = m
        .params
        .iter()
        .find(|(n, _)| n == "tracer")
        .map_or_else(String::new, |(_, v)| {
            format!(" (tracer {})", printable(&v.to_string()))
        });
    outln!(
        "  type         {}{tracer}, {} CPU{}, clock {} Hz",
        m.trace_type,
        m.cpus,
        if m.cpus == 1 { "" } else { "s" },
        m.tick_rate_hz
    );
    outln!(
        "  started      {} UTC",
        units::utc_date_time(m.start_unix_ns)
    );
    outln!(
        "  duration     {} ({} → {})",
        units::duration(info.duration()),
        units::duration(info.t_min),
        units::duration(info.t_max)
    );
    outln!("  events       {}", info.event_count);
    let st = state(&info, path);
    if st == "left live" {
        outln!("  state        left live (no writer holds it: `socscope repair` closes it)");
    } else {
        outln!("  state        {st}");
    }
    if let Some((_, why)) = m.params.iter().find(|(n, _)| n == INTERRUPTED_PARAM) {
        let why = match why {
            ParamValue::String(s) => s.clone(),
            other => other.to_string(),
        };
        outln!("  interrupted  {}", printable_message(&why));
    }
    outln!(
        "  producers    {} ({})",
        producers.len(),
        by_kind
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    outln!("  losses       {lost} records in {} reports", losses.len());
    let mut rows: Vec<Vec<String>> = types
        .iter()
        .zip(&counts)
        .filter(|(_, c)| **c > 0)
        .map(|(t, c)| {
            vec![
                printable(&t.name),
                t.category.name().to_string(),
                c.to_string(),
                t.params
                    .iter()
                    .map(|p| format!("{}:{}", printable(&p.name), p.ty.name()))
                    .collect::<Vec<_>>()
                    .join(" "),
            ]
        })
        .collect();
    rows.sort_by(|a, b| {
        b[2].parse::<u64>()
            .unwrap_or(0)
            .cmp(&a[2].parse::<u64>().unwrap_or(0))
    });
    outln!(
        "\n{}",
        format::table(&["TYPE", "CATEGORY", "EVENTS", "PARAMETERS"], &rows)
    );
    if !stats.is_empty() {
        let rows: Vec<Vec<String>> = stats
            .iter()
            .filter(|s| s.value != 0 || !s.name.contains('.'))
            .map(|s| {
                vec![
                    printable(&s.name),
                    s.value.to_string(),
                    printable(&s.description),
                ]
            })
            .collect();
        outln!(
            "\n{}",
            format::table(&["INGEST", "VALUE", "MEANING"], &rows)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Pragmas `socscope sql` runs with an argument (it names a table or limits a check; none writes).
const PRAGMAS_WITH_ARGUMENT: &[&str] = &[
    "table_info",
    "table_xinfo",
    "index_list",
    "index_info",
    "index_xinfo",
    "foreign_key_list",
    "integrity_check",
    "quick_check",
];

/// Pragmas `socscope sql` runs only without a value (with one, most of them write).
const PRAGMAS_READ_ONLY: &[&str] = &[
    "application_id",
    "user_version",
    "schema_version",
    "page_count",
    "page_size",
    "freelist_count",
    "encoding",
    "table_list",
    "database_list",
    "collation_list",
    "compile_options",
    "function_list",
    "module_list",
    "pragma_list",
    "data_version",
    "journal_mode",
    "integrity_check",
    "quick_check",
];

/// SQL functions that reach outside the trace (files, extensions); refused even when they exist.
const FUNCTIONS_REFUSED: &[&str] = &[
    "load_extension",
    "readfile",
    "writefile",
    "edit",
    "fts3_tokenizer",
];

/// The authorizer of `socscope sql`: reading only. It allows SELECT, reading columns, functions (but
/// those of [`FUNCTIONS_REFUSED`]), recursive CTEs and the pragmas that only read; it refuses every
/// write, schema change, ATTACH/DETACH, transaction, VACUUM and pragma assignment. `refused` keeps the
/// first refusal for the error message.
/// What a refused statement would do, in SQL's words (`DELETE FROM producer`), not rusqlite's
/// (`Delete { table_name: "producer" }`).
fn sql_action(action: &rusqlite::hooks::AuthAction<'_>) -> String {
    use rusqlite::hooks::AuthAction as A;
    match action {
        A::Delete { table_name } => format!("DELETE FROM {table_name}"),
        A::Insert { table_name } => format!("INSERT INTO {table_name}"),
        A::Update {
            table_name,
            column_name,
        } => format!("UPDATE {table_name} (column {column_name})"),
        A::DropTable { table_name } | A::DropTempTable { table_name } => {
            format!("DROP TABLE {table_name}")
        }
        A::CreateTable { table_name } | A::CreateTempTable { table_name } => {
            format!("CREATE TABLE {table_name}")
        }
        A::AlterTable { table_name, .. } => format!("ALTER TABLE {table_name}"),
        A::CreateIndex { index_name, .. } | A::CreateTempIndex { index_name, .. } => {
            format!("CREATE INDEX {index_name}")
        }
        A::DropIndex { index_name, .. } | A::DropTempIndex { index_name, .. } => {
            format!("DROP INDEX {index_name}")
        }
        A::CreateView { view_name } | A::CreateTempView { view_name } => {
            format!("CREATE VIEW {view_name}")
        }
        A::DropView { view_name } | A::DropTempView { view_name } => {
            format!("DROP VIEW {view_name}")
        }
        A::CreateTrigger { trigger_name, .. } | A::CreateTempTrigger { trigger_name, .. } => {
            format!("CREATE TRIGGER {trigger_name}")
        }
        A::DropTrigger { trigger_name, .. } | A::DropTempTrigger { trigger_name, .. } => {
            format!("DROP TRIGGER {trigger_name}")
        }
        A::Attach { filename } => format!("ATTACH {filename:?}"),
        A::Detach { database_name } => format!("DETACH {database_name}"),
        A::Transaction { .. } => "a transaction statement".into(),
        A::Savepoint { .. } => "a savepoint".into(),
        A::Reindex { .. } => "REINDEX".into(),
        A::Analyze { .. } => "ANALYZE".into(),
        A::CreateVtable { table_name, .. } => format!("CREATE VIRTUAL TABLE {table_name}"),
        A::DropVtable { table_name, .. } => format!("DROP VIRTUAL TABLE {table_name}"),
        _ => "a statement that writes".into(),
    }
}

fn reading_only(
    refused: std::sync::Arc<std::sync::Mutex<Option<String>>>,
) -> impl for<'r> FnMut(rusqlite::hooks::AuthContext<'r>) -> rusqlite::hooks::Authorization
+ Send
+ 'static {
    use rusqlite::hooks::{AuthAction as A, Authorization};
    move |ctx| {
        let verdict = match ctx.action {
            A::Select | A::Read { .. } | A::Recursive => None,
            A::Function { function_name } => FUNCTIONS_REFUSED
                .iter()
                .any(|f| f.eq_ignore_ascii_case(function_name))
                .then(|| format!("the function {function_name}()")),
            A::Pragma {
                pragma_name,
                pragma_value,
            } => {
                let name = pragma_name.to_ascii_lowercase();
                let allowed = PRAGMAS_WITH_ARGUMENT.contains(&name.as_str())
                    || (pragma_value.is_none() && PRAGMAS_READ_ONLY.contains(&name.as_str()));
                (!allowed).then(|| match pragma_value {
                    Some(v) => format!("PRAGMA {pragma_name} = {v}"),
                    None => format!("PRAGMA {pragma_name}"),
                })
            }
            other => Some(sql_action(&other)),
        };
        match verdict {
            None => Authorization::Allow,
            Some(what) => {
                if let Ok(mut first) = refused.lock() {
                    first.get_or_insert(what);
                }
                Authorization::Deny
            }
        }
    }
}

pub fn sql(path: &Path, query: &str, json: bool) -> Result<ExitCode> {
    // Checks that this is a trace of this schema (with the usual messages), then queries through a
    // read-only connection of its own under an authorizer that allows nothing but reading.
    drop(open_trace(path)?);
    let mut conn = rusqlite::Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .with_context(|| format!("while opening {}", path.display()))?;
    socscope_tracedb::register_events_table(&conn, path)
        .with_context(|| format!("while registering the events table on {}", path.display()))?;
    let refused = std::sync::Arc::new(std::sync::Mutex::new(None::<String>));
    conn.authorizer(Some(reading_only(refused.clone())))
        .context("while installing the read-only authorizer")?;
    let refusal = |what: &str| {
        anyhow::anyhow!(
            "refused: `socscope sql` only reads (SELECT and read-only PRAGMAs); {what} is not allowed \
             (query {query:?}); to change a trace, use sqlite3 on a copy"
        )
    };
    let mut st = match conn.prepare(query) {
        Ok(st) => st,
        Err(e) => {
            if let Some(what) = refused.lock().ok().and_then(|mut r| r.take()) {
                return Err(refusal(&what));
            }
            return Err(match e {
                // rusqlite's message already quotes the query; say it once, in our words.
                rusqlite::Error::SqlInputError { msg, offset, .. } => {
                    anyhow::anyhow!("in query {query:?} at offset {offset}: {msg}")
                }
                e => anyhow::Error::new(e).context(format!("in query {query:?}")),
            });
        }
    };
    if !st.readonly() {
        // VACUUM (INTO a file) and journal-mode changes pass no authorizer check: SQLite says the
        // statement would write.
        return Err(refusal(
            "a statement that writes (VACUUM, a journal mode change…)",
        ));
    }
    let names: Vec<String> = st.column_names().map(str::to_string).collect();
    let mut rows = st
        .query([])
        .with_context(|| format!("in query {query:?}"))?;
    let mut out: Vec<Vec<rusqlite::types::Value>> = Vec::new();
    while let Some(row) = rows.next().with_context(|| format!("in query {query:?}"))? {
        let mut r = Vec::with_capacity(names.len());
        for i in 0..names.len() {
            r.push(row.get::<_, rusqlite::types::Value>(i)?);
        }
        out.push(r);
    }
    use rusqlite::types::Value as V;
    if json {
        let rows: Vec<Value> = out
            .iter()
            .map(|r| {
                let obj: serde_json::Map<String, Value> = names
                    .iter()
                    .zip(r)
                    .map(|(n, v)| {
                        let j = match v {
                            V::Null => Value::Null,
                            V::Integer(i) => json!(i),
                            V::Real(f) => json!(f),
                            V::Text(s) => json!(s),
                            V::Blob(b) => json!(format!("<{} bytes>", b.len())),
                        };
                        (n.clone(), j)
                    })
                    .collect();
                Value::Object(obj)
            })
            .collect();
        outln!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        let cells: Vec<Vec<String>> = out
            .iter()
            .map(|r| {
                r.iter()
                    .map(|v| match v {
                        V::Null => "NULL".to_string(),
                        V::Integer(i) => i.to_string(),
                        V::Real(f) => f.to_string(),
                        V::Text(s) => s.clone(),
                        V::Blob(b) => format!("<{} bytes>", b.len()),
                    })
                    .collect()
            })
            .collect();
        let header: Vec<&str> = names.iter().map(String::as_str).collect();
        outln!("{}", format::table(&header, &cells));
        errln!(
            "({} {})",
            cells.len(),
            if cells.len() == 1 { "row" } else { "rows" }
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `socscope upgrade`: each file converted in place to the current trace schema, with the CPU
/// tracks of a trace recorded before them derived from its context switches; stops at the first
/// file that cannot be converted (those before it stay converted). A catalog beside a file that
/// lists it is told its new event count.
pub fn upgrade(paths: &[PathBuf], json: bool) -> Result<ExitCode> {
    use socscope_tracedb::CpuTracks;
    for path in paths {
        crate::input::require_file(path)?;
        // Rebuilding the summary reads every chunk: seconds on a long capture.
        let spinner = crate::out::progress_bar(json, None, "{spinner} {elapsed} {msg}");
        if let Some(b) = &spinner {
            b.set_message(format!("upgrading {}", path.display()));
        }
        let r = socscope_tracedb::upgrade_trace(path)
            .with_context(|| format!("cannot upgrade {}", path.display()));
        if let Some(b) = spinner {
            b.finish_and_clear();
        }
        let r = r?;
        if matches!(r.cpu_tracks, CpuTracks::Derived { .. }) {
            refresh_catalog_entry(path)?;
        }
        let (tracks, slices) = match r.cpu_tracks {
            CpuTracks::Present => ("present", 0),
            CpuTracks::Derived { slices, .. } => ("derived", slices),
            CpuTracks::NoSchedule => ("no_context_switches", 0),
        };
        if json {
            outln!(
                "{}",
                serde_json::json!({
                    "trace": path,
                    "from_version": r.from_version,
                    "to_version": r.to_version,
                    "events": r.events,
                    "summary_rows": r.summary_rows,
                    "cpu_tracks": tracks,
                    "cpu_track_slices": slices,
                })
            );
            continue;
        }
        let schema = if r.from_version == r.to_version {
            format!("already at schema version {}", r.to_version)
        } else {
            format!("schema version {} -> {}", r.from_version, r.to_version)
        };
        let events = r.events.to_string();
        let line = match r.cpu_tracks {
            CpuTracks::Present if r.from_version == r.to_version => {
                format!("{schema}, with its CPU tracks: nothing to do ({events} events)")
            }
            CpuTracks::Derived { slices, cpus } => format!(
                "{schema}; CPU tracks derived from the context switches: {} slices on {cpus} {} \
                 added ({events} events now, every earlier event keeps its id), summary rebuilt \
                 ({} rows)",
                slices,
                if cpus == 1 { "CPU" } else { "CPUs" },
                r.summary_rows
            ),
            CpuTracks::NoSchedule => format!(
                "{schema}, {events} events kept; no context switches recorded: no CPU tracks to \
                 derive"
            ),
            CpuTracks::Present if r.summary_rows == 0 => {
                format!("{schema}, {events} events kept (chunks and summary as they were)")
            }
            CpuTracks::Present => format!(
                "{schema}, {events} events kept, summary rebuilt ({} rows)",
                r.summary_rows
            ),
        };
        outln!("{}: {line}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Tells the catalog beside an upgraded trace (if there is one and it lists the trace) the trace's
/// new event count, so that `ls` and `info N` agree with the file.
fn refresh_catalog_entry(path: &Path) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !dir.join(socscope_tracedb::CATALOG_FILE).is_file() {
        return Ok(());
    }
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return Ok(());
    };
    let catalog = socscope_tracedb::Catalog::open(&dir)
        .with_context(|| format!("cannot open the catalog in {}", dir.display()))?;
    if let Some(entry) = catalog.trace_by_db_file(name)? {
        catalog.register_file(&entry.db_file).with_context(|| {
            format!("cannot refresh {name} in the catalog of {}", dir.display())
        })?;
    }
    Ok(())
}
