//! `socscope bench fleet`: the dataset on a realistic fleet (12 simulated boards at 20 k events/s for 5 min
//! each, some under CPU or I/O stress). Measured against anchors in the same run: the sync rate against
//! `socscope export --format csv` of the same traces, the dataset's bytes per event against the store's, and
//! (with the feature `fleet`) three queries with DataFusion in process against DuckDB's Python package on
//! the same files, Spark local times beside them. Syncs and queries run in child processes, so that their
//! peak RSS is their own.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use socscope_sim::{Scenario, SimConfig};
use socscope_tracedb::units;

use super::{file_size, rss_max_bytes, scratch_dir};
use crate::out::outln;

/// The three queries, in SQL every engine here reads as it is (DataFusion, DuckDB, Spark).
#[cfg(feature = "fleet")]
pub fn queries(board: &str, hour_start_ns: i64) -> Vec<(&'static str, String)> {
    vec![
        (
            "events per type per board",
            "SELECT board, type, count(*) AS n FROM events GROUP BY board, type".to_owned(),
        ),
        (
            "p99 state duration per type",
            "WITH hist AS (SELECT type, duration_ns AS d, count(*) AS n FROM events WHERE category = 'state' GROUP BY type, duration_ns), \
             cum AS (SELECT type, d, sum(n) OVER (PARTITION BY type ORDER BY d ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS c, \
                            sum(n) OVER (PARTITION BY type) AS total FROM hist) \
             SELECT type, min(CASE WHEN c * 100 >= total * 99 THEN d END) AS p99_ns FROM cum GROUP BY type"
                .to_owned(),
        ),
        (
            "one board, one hour",
            format!(
                "SELECT type, count(*) AS n FROM events WHERE board = '{board}' AND time_unix_ns >= {hour_start_ns} \
                 AND time_unix_ns < {} GROUP BY type",
                hour_start_ns + 3_600_000_000_000
            ),
        ),
    ]
}

/// Runs the fleet benchmark.
pub fn run(
    boards: usize,
    seconds: f64,
    runs: usize,
    dir: Option<PathBuf>,
    python: Option<PathBuf>,
    json_out: bool,
) -> Result<ExitCode> {
    if boards == 0 || runs == 0 || seconds <= 0.0 {
        bail!("--boards, --runs and --seconds must be above zero");
    }
    let (dir, _guard) = scratch_dir(dir)?;
    let catalog = dir.join("rig");
    let exe = std::env::current_exe().context("cannot find the socscope executable")?;
    if !catalog.join("catalog.db").exists() {
        if !json_out {
            outln!(
                "capturing {boards} boards × {seconds} s at 20 k events/s into {}",
                catalog.display()
            );
        }
        capture(boards, seconds, &dir, &catalog, &exe)?;
    }
    let traces: Vec<PathBuf> = {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&catalog)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "db") && !p.ends_with("catalog.db"))
            .collect();
        v.sort();
        v
    };
    let mut events = 0u64;
    let mut store_bytes = 0u64;
    for t in &traces {
        events += socscope_tracedb::TraceReader::open(t)?.info()?.event_count;
        store_bytes += file_size(t);
    }
    let mut rows = Vec::new();
    let dataset = dir.join("fleet");
    for run in 0..runs {
        // Anchor and measure alternate: the CSV export of every trace, then a sync from scratch.
        let started = Instant::now();
        for t in &traces {
            let out = Command::new(&exe)
                .arg("export")
                .arg(t)
                .args(["--format", "csv", "-o", "/dev/null"])
                .output()
                .context("cannot run socscope export")?;
            if !out.status.success() {
                bail!(
                    "export failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
        }
        let csv_s = started.elapsed().as_secs_f64();
        if dataset.exists() {
            std::fs::remove_dir_all(&dataset)?;
        }
        let child = child_json(
            Command::new(&exe)
                .args(["bench", "fleet", "--sync-one"])
                .arg(&catalog)
                .arg("--dir")
                .arg(&dataset),
        )?;
        let sync_s = child["seconds"].as_f64().unwrap_or(f64::NAN);
        let row = json!({
            "run": run,
            "csv_export_s": csv_s,
            "csv_events_per_s": events as f64 / csv_s,
            "sync_s": sync_s,
            "sync_events_per_s": events as f64 / sync_s,
            "sync_over_csv": csv_s / sync_s,
            "sync_rss_max_bytes": child["rss_max_bytes"],
            "dataset_bytes": child["bytes"],
            "loadavg": loadavg(),
        });
        if !json_out {
            outln!(
                "run {run}: sync {} events/s ({:.1} s, peak RSS {}), csv export {} events/s ({:.1} s): sync/csv {:.2}×",
                units::count(events as f64 / sync_s),
                sync_s,
                units::bytes(child["rss_max_bytes"].as_u64().unwrap_or(0)),
                units::count(events as f64 / csv_s),
                csv_s,
                csv_s / sync_s
            );
        }
        rows.push(row);
    }
    let dataset_bytes = dir_bytes(&dataset);
    let doc_queries = query_section(&exe, &dataset, &traces, runs, python, json_out)?;
    let doc = json!({
        "boards": boards,
        "seconds_per_board": seconds,
        "events": events,
        "store_bytes": store_bytes,
        "store_bytes_per_event": store_bytes as f64 / events.max(1) as f64,
        "dataset_bytes": dataset_bytes,
        "dataset_bytes_per_event": dataset_bytes as f64 / events.max(1) as f64,
        "dataset_over_store": dataset_bytes as f64 / store_bytes.max(1) as f64,
        "syncs": rows,
        "queries": doc_queries,
    });
    if json_out {
        outln!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        outln!(
            "{} events; store {:.2} B/event, dataset {:.2} B/event ({:.2}× the store)",
            events,
            store_bytes as f64 / events.max(1) as f64,
            dataset_bytes as f64 / events.max(1) as f64,
            dataset_bytes as f64 / store_bytes.max(1) as f64
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        if let Ok(rd) = std::fs::read_dir(&d) {
            for e in rd.flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "parquet") {
                    total += e.metadata().map_or(0, |m| m.len());
                }
            }
        }
    }
    total
}

fn child_json(cmd: &mut Command) -> Result<Value> {
    let out = cmd.output().context("cannot start the child")?;
    if !out.status.success() {
        bail!(
            "the child failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    serde_json::from_slice(&out.stdout).context("the child's report")
}

/// The boards: `.wire` captures of the simulator replayed by `socscope collect`.
fn capture(boards: usize, seconds: f64, dir: &Path, catalog: &Path, exe: &Path) -> Result<()> {
    let wires = dir.join("wires");
    std::fs::create_dir_all(&wires)?;
    let mut args: Vec<String> = vec!["collect".into(), "--no-listen".into()];
    for i in 0..boards {
        let wire = wires.join(format!("stb-{i:02}.wire"));
        let window = |on: bool| {
            if on {
                vec![Scenario {
                    at: seconds * 0.3,
                    duration: seconds * 0.3,
                }]
            } else {
                Vec::new()
            }
        };
        let config = SimConfig {
            seed: 100 + i as u64,
            duration_s: seconds,
            board: Box::leak(format!("stb-{i:02}").into_boxed_str()),
            cpu_stress: window(i % 3 == 2),
            io_stress: window(i % 4 == 3),
            zap_every_s: Some(30.0),
            ..SimConfig::default()
        };
        super::record_sim(&config, &wire)?;
        args.push("--replay".into());
        args.push(wire.display().to_string());
    }
    args.push("--dir".into());
    args.push(catalog.display().to_string());
    let out = Command::new(exe).args(&args).output()?;
    if !out.status.success() {
        bail!(
            "collect failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    std::fs::remove_dir_all(&wires)?;
    Ok(())
}

/// The child's side of a sync: syncs `catalog` into `dataset` and prints what it measured as JSON.
pub fn sync_one(catalog: &Path, dataset: &Path) -> Result<ExitCode> {
    let started = Instant::now();
    let s = socscope_fleet::sync::sync(
        &[catalog.to_path_buf()],
        dataset,
        socscope_fleet::sync::SyncOptions::default(),
        &mut |_| {},
    )?;
    if !s.failures.is_empty() {
        bail!("{:?}", s.failures);
    }
    let doc = json!({
        "seconds": started.elapsed().as_secs_f64(),
        "events": s.events,
        "bytes": s.bytes,
        "rss_max_bytes": rss_max_bytes(),
    });
    outln!("{doc}");
    Ok(ExitCode::SUCCESS)
}

#[cfg(not(feature = "fleet"))]
fn query_section(
    _exe: &Path,
    _dataset: &Path,
    _traces: &[PathBuf],
    _runs: usize,
    _python: Option<PathBuf>,
    json_out: bool,
) -> Result<Value> {
    if !json_out {
        outln!("queries: not measured (this socscope was built without the feature `fleet`)");
    }
    Ok(Value::Null)
}

/// The child's side of a query: runs `sql` on `dataset` with DataFusion and prints its seconds, rows and
/// peak RSS.
#[cfg(feature = "fleet")]
pub fn sql_one(dataset: &Path, sql: &str) -> Result<ExitCode> {
    let ds = socscope_fleet::Dataset::open(dataset)?;
    let engine = socscope_fleet::query::Engine::open(&ds)?;
    // Twice: the first run is what one `fleet sql` pays (the engine's code paged in, nothing cached); the
    // second is a query of a session that already ran one (a report, the GUI).
    let mut seconds = [0.0; 2];
    let mut rows = 0usize;
    for s in &mut seconds {
        let started = Instant::now();
        rows = 0;
        engine.query(sql, |b| {
            rows += b.num_rows();
            Ok(())
        })?;
        *s = started.elapsed().as_secs_f64();
    }
    let doc = json!({
        "seconds": seconds[0],
        "hot_seconds": seconds[1],
        "rows": rows,
        "rss_max_bytes": rss_max_bytes(),
    });
    outln!("{doc}");
    Ok(ExitCode::SUCCESS)
}

#[cfg(feature = "fleet")]
fn query_section(
    exe: &Path,
    dataset: &Path,
    traces: &[PathBuf],
    runs: usize,
    python: Option<PathBuf>,
    json_out: bool,
) -> Result<Value> {
    let first = socscope_tracedb::TraceReader::open(&traces[0])?.info()?;
    let board = first.meta.board.clone();
    let hour = first.meta.start_unix_ns - first.meta.start_unix_ns.rem_euclid(3_600_000_000_000);
    let qs = queries(&board, hour);
    let python = python.unwrap_or_else(|| {
        super::find_above("target/python-venv/bin/python", |p| p.exists())
            .unwrap_or_else(|| PathBuf::from("python3"))
    });
    let script = super::find_above("scripts/fleet/bench_queries.py", |p| p.exists())
        .context("scripts/fleet/bench_queries.py not found (run from a checkout)")?;
    let mut out = Vec::new();
    for (name, sql) in &qs {
        let mut df = Vec::new();
        let mut duck = Vec::new();
        let mut df_hot = Vec::new();
        let mut duck_hot = Vec::new();
        let mut spark = Vec::new();
        let mut rss = 0u64;
        for _ in 0..runs {
            let d = child_json(
                Command::new(&python)
                    .arg(&script)
                    .args(["--engine", "duckdb"])
                    .arg(dataset)
                    .arg(sql),
            )?;
            duck.push(d["seconds"].as_f64().unwrap_or(f64::NAN));
            duck_hot.push(d["hot_seconds"].as_f64().unwrap_or(f64::NAN));
            let c = child_json(
                Command::new(exe)
                    .args(["bench", "fleet", "--sql-one"])
                    .arg(dataset)
                    .arg("--query")
                    .arg(sql),
            )?;
            df.push(c["seconds"].as_f64().unwrap_or(f64::NAN));
            df_hot.push(c["hot_seconds"].as_f64().unwrap_or(f64::NAN));
            rss = rss.max(c["rss_max_bytes"].as_u64().unwrap_or(0));
        }
        let s = child_json(
            Command::new(&python)
                .arg(&script)
                .args(["--engine", "spark"])
                .arg(dataset)
                .arg(sql),
        )?;
        spark.push(s["seconds"].as_f64().unwrap_or(f64::NAN));
        let range = |v: &[f64]| {
            let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            (lo, hi)
        };
        let ratios: Vec<f64> = df.iter().zip(&duck).map(|(a, b)| a / b).collect();
        let (rlo, rhi) = range(&ratios);
        let hot_ratios: Vec<f64> = df_hot.iter().zip(&duck_hot).map(|(a, b)| a / b).collect();
        let (hlo, hhi) = range(&hot_ratios);
        if !json_out {
            let (a, b) = range(&df);
            let (c, d) = range(&duck);
            outln!(
                "{name}: DataFusion {a:.3}–{b:.3} s (peak RSS {}), DuckDB {c:.3}–{d:.3} s, DataFusion/DuckDB {rlo:.2}–{rhi:.2}×, Spark local {:.2} s; load {}",
                units::bytes(rss),
                spark[0],
                loadavg()
            );
            let (a, b) = range(&df_hot);
            let (c, d) = range(&duck_hot);
            outln!(
                "  run again in the same process: DataFusion {a:.3}–{b:.3} s, DuckDB {c:.3}–{d:.3} s, {hlo:.2}–{hhi:.2}×"
            );
        }
        out.push(json!({
            "query": name,
            "sql": sql,
            "datafusion_s": df,
            "duckdb_s": duck,
            "datafusion_over_duckdb": ratios,
            "datafusion_hot_s": df_hot,
            "duckdb_hot_s": duck_hot,
            "hot_datafusion_over_duckdb": hot_ratios,
            "datafusion_rss_max_bytes": rss,
            "spark_local_s": spark,
            "loadavg": loadavg(),
        }));
    }
    Ok(Value::Array(out))
}
