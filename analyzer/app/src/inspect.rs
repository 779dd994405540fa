//! `ls`, `info` and `sql`: what is in a catalog and in a trace.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use socscope_tracedb::{Catalog, Filter, TimeRange};

use crate::format;
use crate::input::open_trace;
use crate::out::{errln, outln};

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
    let traces = catalog.traces()?;
    if json {
        let rows: Vec<Value> = traces
            .iter()
            .map(|t| {
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
        .map(|t| {
            let i = &t.info;
            vec![
                t.id.to_string(),
                i.meta.board.clone(),
                i.meta.application.clone(),
                format::utc(i.meta.start_unix_ns),
                format::duration_ns(i.duration()),
                i.event_count.to_string(),
                state(i.complete, i.finished).to_string(),
                t.db_file.clone(),
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

fn state(complete: bool, finished: bool) -> &'static str {
    match (complete, finished) {
        (true, _) => "complete",
        (false, true) => "incomplete",
        (false, false) => "live",
    }
}

pub fn info(path: &Path, json: bool) -> Result<ExitCode> {
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
            "state": state(info.complete, info.finished),
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
    outln!(
        "  board        {} ({}, {}), application {}",
        m.board,
        m.soc,
        m.os,
        m.application
    );
    outln!(
        "  type         {}, {} CPUs, clock {} Hz",
        m.trace_type,
        m.cpus,
        m.tick_rate_hz
    );
    outln!("  started      {} UTC", format::utc(m.start_unix_ns));
    outln!(
        "  duration     {} ({} → {})",
        format::duration_ns(info.duration()),
        format::duration_ns(info.t_min),
        format::duration_ns(info.t_max)
    );
    outln!("  events       {}", info.event_count);
    outln!("  state        {}", state(info.complete, info.finished));
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
                t.name.clone(),
                t.category.name().to_string(),
                c.to_string(),
                t.params
                    .iter()
                    .map(|p| format!("{}:{}", p.name, p.ty.name()))
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
            .map(|s| vec![s.name.clone(), s.value.to_string(), s.description.clone()])
            .collect();
        outln!(
            "\n{}",
            format::table(&["INGEST", "VALUE", "MEANING"], &rows)
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn sql(path: &Path, query: &str, json: bool) -> Result<ExitCode> {
    let reader = open_trace(path)?;
    let conn = reader.connection();
    socscope_tracedb::register_events_table(conn, path)
        .with_context(|| format!("while registering the events table on {}", path.display()))?;
    let mut st = conn.prepare(query).map_err(|e| match e {
        // rusqlite's message already quotes the query; say it once, in our words.
        rusqlite::Error::SqlInputError { msg, offset, .. } => {
            anyhow::anyhow!("in query {query:?} at offset {offset}: {msg}")
        }
        e => anyhow::Error::new(e).context(format!("in query {query:?}")),
    })?;
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
        errln!("({} rows)", cells.len());
    }
    Ok(ExitCode::SUCCESS)
}

/// `socscope upgrade`: each file converted in place to the current trace schema; stops at the
/// first file that cannot be converted (those before it stay converted).
pub fn upgrade(paths: &[PathBuf], json: bool) -> Result<ExitCode> {
    for path in paths {
        crate::input::require_file(path)?;
        let r = socscope_tracedb::upgrade_trace(path)
            .with_context(|| format!("cannot upgrade {}", path.display()))?;
        if json {
            outln!(
                "{}",
                serde_json::json!({
                    "trace": path,
                    "from_version": r.from_version,
                    "to_version": r.to_version,
                    "events": r.events,
                    "summary_rows": r.summary_rows,
                })
            );
        } else if r.from_version == r.to_version {
            outln!(
                "{}: already at schema version {}",
                path.display(),
                r.to_version
            );
        } else {
            outln!(
                "{}: schema version {} -> {}, {} events kept, summary rebuilt ({} rows)",
                path.display(),
                r.from_version,
                r.to_version,
                r.events,
                r.summary_rows
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
