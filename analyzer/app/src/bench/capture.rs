//! `socscope bench capture`: the store on the shapes real boards produce. The simulated set-top
//! box streams about 20 k events/s for minutes to hours (and a slow board 200 events/s for two
//! hours); each capture is written as a `.wire` file, replayed through the collector in a child
//! process (so that its peak memory is its own), and measured: records/s, stored events, file and
//! summary bytes, bytes per event, peak RSS, and how bytes per event grow with the length.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use socscope_sim::SimConfig;

use super::{file_size, rss_max_bytes, scratch_dir};
use crate::out::outln;
use socscope_tracedb::units;

/// One realistic capture: `rate` records per simulated second for `seconds`.
#[derive(Debug, Clone, Copy)]
struct Shape {
    name: &'static str,
    rate: f64,
    seconds: f64,
}

const SHAPES: [Shape; 4] = [
    Shape {
        name: "20k-5min",
        rate: 20_000.0,
        seconds: 300.0,
    },
    Shape {
        name: "20k-30min",
        rate: 20_000.0,
        seconds: 1_800.0,
    },
    Shape {
        name: "20k-2h",
        rate: 20_000.0,
        seconds: 7_200.0,
    },
    Shape {
        name: "200-2h",
        rate: 200.0,
        seconds: 7_200.0,
    },
];

/// Runs the captures named in `only` (all by default) and prints one report.
pub fn run(only: &[String], dir: Option<PathBuf>, keep: bool, json_out: bool) -> Result<ExitCode> {
    for name in only {
        if !SHAPES.iter().any(|s| s.name == name) {
            let names: Vec<&str> = SHAPES.iter().map(|s| s.name).collect();
            bail!(
                "unknown capture {name:?}; choose among {}",
                names.join(", ")
            );
        }
    }
    let (dir, _guard) = scratch_dir(dir)?;
    let mut rows = Vec::new();
    for shape in SHAPES
        .iter()
        .filter(|s| only.is_empty() || only.iter().any(|n| n == s.name))
    {
        let row = capture(shape, &dir, keep)
            .with_context(|| format!("while measuring the {} capture", shape.name))?;
        if !json_out {
            print_row(&row)?;
        }
        rows.push(row);
    }
    // Linear in events: bytes per event of the longest 20 k capture against the shortest.
    let bpe = |name: &str| {
        rows.iter()
            .find(|r| r["capture"] == name)
            .and_then(|r| r["bytes_per_event"].as_f64())
    };
    let growth = match (bpe("20k-5min"), bpe("20k-2h")) {
        (Some(a), Some(b)) if a > 0.0 => Some(b / a - 1.0),
        _ => None,
    };
    if json_out {
        let doc = json!({ "captures": rows, "bytes_per_event_growth_5min_to_2h": growth });
        outln!("{}", serde_json::to_string_pretty(&doc)?);
    } else if let Some(g) = growth {
        outln!(
            "bytes/event from 5 min to 2 h at 20 k events/s: {:+.1} %",
            g * 100.0
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn print_row(r: &Value) -> Result<()> {
    let f = |k: &str| r[k].as_f64().unwrap_or(0.0);
    outln!(
        "{:<10} {} records in {:.1} s = {} records/s; {} events stored; file {} (summary {}, {:.1} %); \
         {:.2} B/event (wire {:.2} B/record); peak RSS {}",
        r["capture"].as_str().unwrap_or(""),
        f("records") as u64,
        f("replay_s"),
        units::count(f("records_per_s")),
        f("stored_events") as u64,
        units::bytes(f("file_bytes") as u64),
        units::bytes(f("summary_bytes") as u64),
        f("summary_share") * 100.0,
        f("bytes_per_event"),
        f("wire_bytes_per_record"),
        units::bytes(f("replay_rss_max_bytes") as u64),
    );
    outln!(
        "{:<10} anchor, plain SQLite row inserts of the same events: {} rows/s ({} rows), {:.2} B/event; \
         here {:.2}x its rate, {:.1}x smaller",
        "",
        units::count(f("anchor_rows_per_s")),
        f("anchor_rows") as u64,
        f("anchor_bytes_per_event"),
        f("ratio_to_anchor"),
        f("size_ratio_anchor_over_trace"),
    );
    Ok(())
}

/// The most events the anchor inserts as plain rows.
const ANCHOR_ROWS: u64 = 10_000_000;

fn capture(shape: &Shape, dir: &Path, keep: bool) -> Result<Value> {
    let wire = dir.join(format!("{}.wire", shape.name));
    let out = dir.join(shape.name);
    if out.exists() {
        std::fs::remove_dir_all(&out).with_context(|| format!("cannot clear {}", out.display()))?;
    }
    let config = SimConfig {
        duration_s: shape.seconds,
        rate: shape.rate,
        board: "bench-stb",
        ..SimConfig::default()
    };
    let sim = super::record_sim(&config, &wire)?;
    // The replay in a child process: its peak RSS is the collector's alone.
    let exe = std::env::current_exe().context("cannot find the socscope executable")?;
    let output = Command::new(exe)
        .args(["bench", "capture", "--replay-one"])
        .arg(&wire)
        .arg("--dir")
        .arg(&out)
        .output()
        .context("cannot start the replay")?;
    if !keep {
        let _ = std::fs::remove_file(&wire);
    }
    if !output.status.success() {
        bail!(
            "the replay failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let child: Value = serde_json::from_slice(&output.stdout).context("the replay's report")?;
    let trace = PathBuf::from(child["trace"].as_str().unwrap_or_default());
    let file_bytes = file_size(&trace);
    let (summary_bytes, chunk_bytes, chunks) = table_bytes(&trace)?;
    let stored = child["stored_events"].as_u64().unwrap_or(0);
    let records = child["records"].as_u64().unwrap_or(0);
    // The anchor: the same events inserted as plain SQLite rows (at most ANCHOR_ROWS of them, so that
    // the longest capture's anchor takes a minute, not an hour).
    let plain_path = dir.join(format!("{}-plain-sqlite.db", shape.name));
    let plain = super::plain_sqlite::write(&trace, &plain_path, Some(ANCHOR_ROWS))?;
    let _ = std::fs::remove_file(&plain_path);
    let events_per_s = stored as f64 / child["wall_s"].as_f64().unwrap_or(f64::NAN);
    let anchor_bpe = plain.bytes as f64 / plain.rows.max(1) as f64;
    let row = json!({
        "capture": shape.name,
        "anchor": "plain SQLite row inserts of the same events (one transaction, prepared statement, index on time)",
        "anchor_rows": plain.rows,
        "anchor_rows_per_s": plain.rows_per_second(),
        "anchor_bytes_per_event": anchor_bpe,
        "stored_events_per_s": events_per_s,
        "ratio_to_anchor": events_per_s / plain.rows_per_second(),
        "size_ratio_anchor_over_trace": anchor_bpe / (file_bytes as f64 / stored.max(1) as f64),
        "rate": shape.rate,
        "simulated_s": shape.seconds,
        "records": records,
        "stored_events": stored,
        "replay_s": child["wall_s"],
        "records_per_s": child["records_per_s"],
        "replay_rss_max_bytes": child["rss_max_bytes"],
        "file_bytes": file_bytes,
        "summary_bytes": summary_bytes,
        "summary_share": summary_bytes as f64 / file_bytes.max(1) as f64,
        "chunk_bytes": chunk_bytes,
        "chunks": chunks,
        "events_per_chunk": stored as f64 / chunks.max(1) as f64,
        "bytes_per_event": file_bytes as f64 / stored.max(1) as f64,
        "bytes_per_record": file_bytes as f64 / records.max(1) as f64,
        "wire_bytes_per_record": sim.bytes_per_event,
        "trace": trace,
    });
    if !keep {
        let _ = std::fs::remove_dir_all(&out);
    }
    Ok(row)
}

/// Bytes the summary and chunk tables take in the file (pages, from SQLite's `dbstat`), and the
/// chunk count.
fn table_bytes(trace: &Path) -> Result<(u64, u64, u64)> {
    let conn =
        rusqlite::Connection::open_with_flags(trace, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .with_context(|| format!("cannot open {}", trace.display()))?;
    let pages = |names: &str| -> Result<u64> {
        let sql = format!("SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name IN ({names})");
        Ok(conn.query_row(&sql, [], |r| r.get::<_, i64>(0))? as u64)
    };
    let summary = pages("'summary'")?;
    let chunks_bytes = pages("'chunk', 'chunk_by_stream_time', 'chunk_by_time'")?;
    let chunks: i64 = conn.query_row("SELECT count(*) FROM chunk", [], |r| r.get(0))?;
    Ok((summary, chunks_bytes, chunks as u64))
}

/// The child's side: replays one `.wire` file into `dir` and prints what it measured as JSON.
pub fn replay_one(wire: &Path, dir: &Path) -> Result<ExitCode> {
    let (sessions, notices, wall) = super::replay_wire(wire, dir)?;
    let session = match sessions.as_slice() {
        [s] => s,
        _ => bail!(
            "{} sessions in {} ({} notices), expected one",
            sessions.len(),
            wire.display(),
            notices.len()
        ),
    };
    let doc = json!({
        "trace": session.path,
        "records": session.records,
        "stored_events": session.events,
        "wall_s": wall,
        "records_per_s": session.records as f64 / wall.max(1e-9),
        "rss_max_bytes": rss_max_bytes(),
        "lost": session.lost_on_board + session.lost_in_transit,
    });
    outln!("{doc}");
    Ok(ExitCode::SUCCESS)
}
