//! `socscope results`: the analysis results saved in a trace (RT-427 §3.1.3) — list, show one, delete
//! one — and the `--save` of the analysis commands, which write them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use serde_json::{Value, json};
use socscope_analysis::results::{self as saved, Band};
use socscope_tracedb::{AnalysisData, AnalysisResult, ResultStore, TraceReader, units};

use crate::format;
use crate::input::{bad_argument, open_trace};
use crate::out::outln;

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  socscope results TRACE\n  \
    socscope results TRACE --show 3\n  socscope results TRACE --json\n  \
    socscope results TRACE --delete 3\n\n\
    Results are saved by `aggregate --save` (an Ocelotl partition as annotations, or with\n\
    --processed-trace as a new trace file of its parts), `compare --save`\n\
    (departing windows as annotations on the run), `timeline --save` and `stats --save` (groups as a\n\
    grouping), and by the GUI (pie groups, table filters).\n\
    JSON: {\"trace\", \"results\": [{\"id\", \"kind\", \"tool\", \"date_unix_ns\", \"date\", \"description\"}]};\n  \
    with --show: {\"trace\", \"result\": {...}, \"data\": KIND-SPECIFIC} where annotations list\n  \
    \"bands\": [{\"label\", \"start_ns\", \"end_ns\", \"producers\", \"who\", \"value\"}].")]
pub struct ResultsArgs {
    /// The trace file (.db).
    pub trace: PathBuf,
    /// Show one result (its id from the list).
    #[arg(long, value_name = "ID", conflicts_with = "delete")]
    pub show: Option<i64>,
    /// Delete one result.
    #[arg(long, value_name = "ID")]
    pub delete: Option<i64>,
    /// One JSON document instead of text.
    #[arg(long)]
    pub json: bool,
}

/// What `--save` writes: the command that saved, a description, the data.
pub struct ToSave {
    pub command: &'static str,
    pub description: String,
    pub data: AnalysisData,
}

/// Saves into `trace`; returns the new result's id.
pub fn save(trace: &Path, what: ToSave) -> Result<i64> {
    let store = ResultStore::open(trace)
        .with_context(|| format!("while opening {} to save a result", trace.display()))?;
    let header = AnalysisResult {
        id: 0,
        tool_id: None,
        tool_name: saved::tool_name(what.command),
        kind: what.data.kind(),
        date_unix_ns: now_unix_ns(),
        description: what.description,
    };
    store
        .save(&header, &what.data)
        .with_context(|| format!("while saving a result into {}", trace.display()))
}

fn now_unix_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

fn kind_row(r: &AnalysisResult) -> Value {
    json!({
        "id": r.id,
        "kind": r.kind.name(),
        "tool": r.tool_name,
        "date_unix_ns": r.date_unix_ns,
        "date": units::utc_date_time(r.date_unix_ns),
        "description": r.description,
    })
}

pub fn run(args: ResultsArgs) -> Result<ExitCode> {
    let reader = open_trace(&args.trace)?;
    let list = reader.analysis_results(None, None)?;
    let find = |id: i64| -> Result<&AnalysisResult> {
        list.iter().find(|r| r.id == id).ok_or_else(|| {
            bad_argument!(
                "no result {id} in {} (`socscope results {0}` lists them)",
                args.trace.display()
            )
        })
    };
    if let Some(id) = args.delete {
        let r = find(id)?.clone();
        // A processed trace is a trace of its own: deleting the link keeps its file.
        let kept = match reader.analysis_data(id)? {
            Some(AnalysisData::ProcessedTrace { trace_db }) => Some(
                socscope_analysis::processed::resolve(&args.trace, &trace_db),
            ),
            _ => None,
        };
        drop(reader);
        let store = ResultStore::open(&args.trace)?;
        store.delete(id)?;
        if args.json {
            outln!("{}", json!({"trace": args.trace, "deleted": kind_row(&r)}));
        } else {
            outln!("deleted result {id} ({}, {})", r.kind.name(), r.description);
            if let Some(file) = kept {
                outln!("the processed trace itself is kept: {}", file.display());
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(id) = args.show {
        let r = find(id)?;
        let data = reader
            .analysis_data(id)?
            .with_context(|| format!("result {id} has no data"))?;
        return show(&args, &reader, r, &data);
    }
    if args.json {
        let rows: Vec<Value> = list.iter().map(kind_row).collect();
        outln!(
            "{}",
            serde_json::to_string_pretty(&json!({"trace": args.trace, "results": rows}))?
        );
        return Ok(ExitCode::SUCCESS);
    }
    if list.is_empty() {
        outln!(
            "no saved results in {} (save some with --save on aggregate, compare, timeline or stats)",
            args.trace.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|r| {
            vec![
                r.id.to_string(),
                r.kind.name().to_owned(),
                r.tool_name.clone(),
                units::utc_date_time(r.date_unix_ns),
                r.description.clone(),
            ]
        })
        .collect();
    outln!(
        "{}",
        format::table(&["ID", "KIND", "TOOL", "DATE (UTC)", "DESCRIPTION"], &rows)
    );
    Ok(ExitCode::SUCCESS)
}

fn show(
    args: &ResultsArgs,
    reader: &TraceReader,
    r: &AnalysisResult,
    data: &AnalysisData,
) -> Result<ExitCode> {
    // The one naming rule of every output: `NAME #ID` only where the trace shares the name.
    let labels = socscope_analysis::hierarchy::producer_labels(&reader.producers()?);
    let types: HashMap<u32, String> = reader
        .event_types()?
        .into_iter()
        .map(|t| (t.id, t.name))
        .collect();
    let t0 = reader.info()?.t_min;
    let member = |target: socscope_tracedb::TargetEntity, id: i64| -> String {
        let id32 = u32::try_from(id).ok();
        match target {
            socscope_tracedb::TargetEntity::Producer => id32
                .and_then(|i| labels.get(&i).cloned())
                .unwrap_or_else(|| format!("#{id}")),
            socscope_tracedb::TargetEntity::EventType => id32
                .and_then(|i| types.get(&i).cloned())
                .unwrap_or_else(|| format!("type {id}")),
            _ => id.to_string(),
        }
    };
    let band_json = |b: &Band| {
        json!({
            "label": b.label,
            "start_ns": b.start,
            "end_ns": b.end,
            "producers": b.producers,
            "who": b.who,
            "value": b.value,
        })
    };
    // A processed trace: its file, read back into the bands of its parts.
    let processed = match data {
        AnalysisData::ProcessedTrace { trace_db } => {
            let path = socscope_analysis::processed::resolve(&args.trace, trace_db);
            let read = TraceReader::open(&path)
                .and_then(|r| {
                    Ok((
                        r.info()?,
                        socscope_analysis::processed::partition_bands(&r)?,
                    ))
                })
                .map_err(|e| format!("{e:#}"));
            Some((path, read))
        }
        _ => None,
    };
    let band_rows = |bands: &[Band]| -> Vec<Vec<String>> {
        bands
            .iter()
            .map(|b| {
                vec![
                    b.label.clone(),
                    units::timestamp(b.start - t0),
                    units::timestamp(b.end - t0),
                    units::duration(b.end - b.start),
                    format!("{:.4}", b.value),
                    b.who.clone(),
                ]
            })
            .collect()
    };
    const BAND_HEADER: [&str; 6] = ["LABEL", "START", "END", "LENGTH", "VALUE", "WHO"];
    let data_json = match data {
        AnalysisData::Annotation { types, .. } => json!({
            "types": types.iter().map(|t| json!({
                "name": t.name,
                "params": t.params.iter().map(|p| json!({"name": p.name, "type": p.ty.name()})).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "bands": saved::bands(data).iter().map(band_json).collect::<Vec<_>>(),
        }),
        AnalysisData::Grouping { groups } => json!({
            "groups": groups.iter().map(|g| json!({
                "id": g.id,
                "parent": g.parent,
                "name": g.name,
                "target": g.target.name(),
                "members": g.members,
                "member_names": g.members.iter().map(|&m| member(g.target, m)).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        }),
        AnalysisData::Search {
            command,
            target,
            ids,
        } => json!({"command": command, "target": target.name(), "ids": ids}),
        AnalysisData::ResultFiles { paths } => json!({"paths": paths}),
        AnalysisData::ProcessedTrace { trace_db } => match &processed {
            Some((path, Ok((info, bands)))) => json!({
                "trace_db": trace_db,
                "path": path,
                "processed": info.meta.processed,
                "event_count": info.event_count,
                "bands": bands.iter().map(band_json).collect::<Vec<_>>(),
            }),
            Some((path, Err(e))) => json!({"trace_db": trace_db, "path": path, "error": e}),
            None => json!({"trace_db": trace_db}),
        },
    };
    // A result whose processed trace cannot be read is shown, and the command fails.
    let status = match &processed {
        Some((_, Err(_))) => ExitCode::FAILURE,
        _ => ExitCode::SUCCESS,
    };
    if args.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(
                &json!({"trace": args.trace, "result": kind_row(r), "data": data_json})
            )?
        );
        return Ok(status);
    }
    outln!(
        "result {}: {} by {} on {} UTC",
        r.id,
        r.kind.name(),
        r.tool_name,
        units::utc_date_time(r.date_unix_ns)
    );
    if !r.description.is_empty() {
        outln!("  {}", r.description);
    }
    match data {
        AnalysisData::Annotation { annotations, .. } => {
            let bands = saved::bands(data);
            outln!(
                "{} annotations, {} of them intervals (times from the trace start):",
                annotations.len(),
                bands.len()
            );
            outln!("{}", format::table(&BAND_HEADER, &band_rows(&bands)));
        }
        AnalysisData::Grouping { groups } => {
            for g in groups {
                let depth = std::iter::successors(g.parent, |p| {
                    groups.iter().find(|x| x.id == *p).and_then(|x| x.parent)
                })
                .count();
                let members: Vec<String> = g.members.iter().map(|&m| member(g.target, m)).collect();
                outln!(
                    "{}{} ({}){}{}",
                    "  ".repeat(depth + 1),
                    g.name,
                    g.target.name(),
                    if members.is_empty() { "" } else { ": " },
                    members.join(", ")
                );
            }
        }
        AnalysisData::Search {
            command,
            target,
            ids,
        } => {
            outln!("  command: {command}");
            let shown: Vec<String> = ids.iter().take(20).map(i64::to_string).collect();
            outln!(
                "  {} {}s found{}{}",
                ids.len(),
                target.name(),
                if ids.is_empty() { "" } else { ": " },
                shown.join(", ") + if ids.len() > 20 { ", …" } else { "" }
            );
        }
        AnalysisData::ResultFiles { paths } => {
            for p in paths {
                outln!("  {p}");
            }
        }
        AnalysisData::ProcessedTrace { trace_db } => {
            outln!("  processed trace: {trace_db}");
            match &processed {
                Some((path, Ok((info, bands)))) => {
                    outln!(
                        "  {}: {} events, {} parts (times from this trace's start):",
                        path.display(),
                        info.event_count,
                        bands.len()
                    );
                    outln!("{}", format::table(&BAND_HEADER, &band_rows(bands)));
                }
                Some((path, Err(e))) => {
                    crate::out::errln!("socscope: cannot read {}: {e}", path.display());
                }
                None => {}
            }
        }
    }
    Ok(status)
}
