//! `socscope bench`: the benchmarks of BENCHMARKS.md, reproducible by anyone.

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result, anyhow};
use serde_json::json;
use socscope_sim::SimConfig;
use socscope_tracedb::{Filter, TimeRange, TraceReader};

use crate::out::outln;
use socscope_tracedb::units;

mod aggregate;
mod capture;
mod fleet;
mod fuzz;
mod import;
mod overview;
mod plain_sqlite;
mod rig;
mod upgrade;

#[derive(clap::Subcommand, Debug)]
pub enum BenchCommand {
    /// Mutation fuzzing on stable Rust: N inputs through each decoder of outside data (wire, every
    /// importer, the chunk decoder); exit status 1 when any input panics.
    #[command(
        after_help = "Examples:\n  cargo run --release -p socscope-analyzer -- bench fuzz --inputs 10000000 --json\n  \
        socscope bench fuzz --inputs 1000000 --target wire --target chunk"
    )]
    Fuzz {
        /// Inputs per target.
        #[arg(long, default_value_t = 1_000_000)]
        inputs: u64,
        #[arg(
            long = "target",
            value_name = "NAME",
            help = format!("Only these targets ({}); repeatable", fuzz::target_names())
        )]
        targets: Vec<String>,
        /// Seed of the mutations (a run is reproducible from it).
        #[arg(long, default_value_t = 0x5eed_0010)]
        seed: u64,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Sim → TCP loopback → collector → trace, end to end; and the store's raw chunk-write rate.
    #[command(
        after_help = "Example:\n  cargo run --release -p socscope-analyzer -- bench ingest --events 100000000 --json"
    )]
    Ingest {
        /// Records the simulated board sends.
        #[arg(long, default_value_t = 10_000_000)]
        events: u64,
        /// Where to write the traces (a temporary directory by default).
        #[arg(long)]
        dir: Option<std::path::PathBuf>,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Random reads of 10 k consecutive events, and the first chunk of time-range queries.
    #[command(
        after_help = "Example:\n  cargo run --release -p socscope-analyzer -- bench read --events 100000000 --json"
    )]
    Read {
        /// Events in the synthetic trace.
        #[arg(long, default_value_t = 10_000_000)]
        events: u64,
        /// Random reads to time.
        #[arg(long, default_value_t = 200)]
        reads: usize,
        /// Read this trace (e.g. one kept by `bench capture --keep`) instead of a synthetic one.
        #[arg(long)]
        trace: Option<std::path::PathBuf>,
        /// Where to write the trace (a temporary directory by default).
        #[arg(long)]
        dir: Option<std::path::PathBuf>,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Text importers on generated gigabytes: ftrace (shifted copies of the real capture
    /// `shared/data/traces/ftrace/tci-ftrace_syscalls.txt`) and KPTrace (generated per-CPU relay
    /// files): parse alone (MB/s) and the whole import (events stored per second).
    #[command(
        after_help = "Example:\n  cargo run --release -p socscope-analyzer -- bench import --json"
    )]
    Import {
        /// Bytes of ftrace text to generate (and of KPTrace text, unless --kptrace-bytes).
        #[arg(long, default_value_t = 1 << 30)]
        bytes: u64,
        /// Bytes of KPTrace text to generate.
        #[arg(long)]
        kptrace_bytes: Option<u64>,
        /// Bytes of GStreamer tracer log to generate (a quarter of --bytes by default).
        #[arg(long)]
        gst_bytes: Option<u64>,
        /// The real ftrace capture to copy (found under shared/data/traces by default).
        #[arg(long, value_name = "PATH")]
        ftrace_sample: Option<std::path::PathBuf>,
        /// Where to write the files (a temporary directory by default).
        #[arg(long)]
        dir: Option<std::path::PathBuf>,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// The store on realistic captures: the simulated box at 20 k events/s for 5 min, 30 min and
    /// 2 h, and at 200 events/s for 2 h, replayed through the collector: records/s, size,
    /// summary share, bytes per event, peak RSS, and the growth of bytes per event with length.
    #[command(after_help = "Examples:\n  socscope bench capture --json\n  \
        socscope bench capture --only 20k-5min,200-2h\n  \
        socscope bench capture --only 20k-2h --keep --dir /tmp/cap   (then bench read/aggregate --trace)")]
    Capture {
        /// Only these captures (comma-separated): 20k-5min, 20k-30min, 20k-2h, 200-2h.
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
        /// Where to write the captures and traces (a temporary directory by default).
        #[arg(long)]
        dir: Option<std::path::PathBuf>,
        /// Keep the traces (and `.wire` files) for other benchmarks.
        #[arg(long)]
        keep: bool,
        /// One JSON object.
        #[arg(long)]
        json: bool,
        /// Internal: replay one `.wire` file into --dir and report (run by `bench capture` as a child).
        #[arg(long, hide = true, value_name = "WIRE")]
        replay_one: Option<std::path::PathBuf>,
    },
    /// Rigs: ingest with triggers and with the flight recorder against plain collect (same run,
    /// alternated), the recorder's memory for 1 and 16 boards, saved windows' completeness, trigger latency.
    #[command(
        after_help = "Example:\n  cargo run --release -p socscope-analyzer -- bench rig --json"
    )]
    Rig {
        /// Seconds of the 20 k events/s stream replayed in each round.
        #[arg(long, default_value_t = 180.0)]
        seconds: f64,
        /// Seconds of the stream each of the 16 boards replays.
        #[arg(long, default_value_t = 90.0)]
        boards_seconds: f64,
        /// Rounds of (plain, triggers, flight recorder saving every window, one, none), alternated.
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Where to write the stream and traces (a temporary directory by default).
        #[arg(long)]
        dir: Option<std::path::PathBuf>,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// The analysis numbers: microscopic model (T = 1000) of a whole trace, first partial
    /// statistics and density, temporal (T = 1000, S = 100, U = 5) and spatiotemporal (T = 200,
    /// 4×4×4 hierarchy, U = 4) qualities with the full bisection.
    #[command(
        after_help = "Examples:\n  cargo run --release -p socscope-analyzer -- bench aggregate --events 100000000 --json\n  \
        socscope bench aggregate --trace /tmp/socscope-bench-100000000.db --json"
    )]
    Aggregate {
        /// Events in the synthetic trace (ignored with --trace).
        #[arg(long, default_value_t = 10_000_000)]
        events: u64,
        /// Use this trace instead of writing a synthetic one.
        #[arg(long)]
        trace: Option<std::path::PathBuf>,
        /// Where to write the synthetic trace (a temporary directory by default).
        #[arg(long)]
        dir: Option<std::path::PathBuf>,
        /// One JSON object.
        #[arg(long)]
        json: bool,
        /// Instead: the large Ocelotl cases (spatiotemporal on a 10×10×10 producer tree, U = 4,
        /// and temporal S = 100, U = 5), each run as a child `socscope aggregate`, alternated
        /// with --anchor's build; wall, CPU and peak RSS of every run.
        #[arg(long)]
        scale: bool,
        /// With --scale: the previous build's socscope, measured in the same run.
        #[arg(long, requires = "scale", value_name = "SOCSCOPE")]
        anchor: Option<std::path::PathBuf>,
        /// With --scale: slice counts of the spatiotemporal case.
        #[arg(
            long,
            requires = "scale",
            value_delimiter = ',',
            default_value = "250,500,1000"
        )]
        st_slices: Vec<usize>,
        /// With --scale: runs of each spatiotemporal case per build.
        #[arg(long, requires = "scale", default_value_t = 2)]
        runs: usize,
        /// With --scale or --kernels: slice counts of the temporal case.
        #[arg(long, value_delimiter = ',', default_value = "1000,5000")]
        temporal_slices: Vec<usize>,
        /// With --scale or --kernels: runs of each temporal case per build (or kernel).
        #[arg(long, default_value_t = 5)]
        temporal_runs: usize,
        /// Instead: the temporal case (S = 100, U = 5, --temporal-slices) in this process,
        /// the vector quality kernel alternated with the scalar one of the build before it;
        /// wall and CPU time of qualities + bisection, and whether both gave the same list.
        #[arg(long, conflicts_with = "scale")]
        kernels: bool,
        /// With --scale: passed to this build's `aggregate --memory-budget`.
        #[arg(long, requires = "scale")]
        memory_budget: Option<String>,
        /// With --scale: passed to this build's `aggregate --algorithm` (auto, exact, scalable).
        #[arg(long, requires = "scale")]
        algorithm: Option<String>,
        /// Instead: the scalable algorithm against the exact one on the generated 10×10×10
        /// tree (U = 4) at these slice counts, in this process: both full bisections
        /// (threshold 0.001), the p values whose partition differs and the largest relative
        /// quality differences.
        #[arg(long, value_delimiter = ',', value_name = "T,...", conflicts_with_all = ["scale", "kernels"])]
        compare_algorithms: Vec<usize>,
    },
    /// The first picture of the Ocelotl and TraceViz views: the Ocelotl pipeline (T = 200, temporal,
    /// event count, cold cache) to its first published overview and to the whole one, and the TraceViz
    /// timeline of the whole trace at 1000 pixels.
    #[command(
        after_help = "Example:\n  cargo run --release -p socscope-analyzer -- bench overview --events 100000000 --dir /tmp/rb --json"
    )]
    Overview(OverviewArgs),
    /// Fleet scale: sync rate and dataset bytes/event of 12 boards × 5 min at 20 k events/s against CSV
    /// export and the store, and (feature `fleet`) three queries with DataFusion against DuckDB, Spark beside.
    #[command(
        after_help = "Example:\n  cargo run --release -p socscope-analyzer --features fleet -- bench fleet --dir /tmp/fb --json\n\
        DuckDB and Spark come from target/python-venv (scripts/install-test-deps.sh) or --python."
    )]
    Fleet(FleetArgs),
    /// `socscope upgrade` deriving the CPU tracks of a trace recorded before them, against the
    /// collector's ingest of the same capture (20 k events/s, a zap every 5 s), alternated.
    #[command(
        after_help = "Example:\n  cargo run --release -p socscope-analyzer -- bench upgrade --seconds 180 --rounds 4"
    )]
    Upgrade {
        /// Seconds of capture.
        #[arg(long, default_value_t = 180.0)]
        seconds: f64,
        /// Rounds (ingest and upgrade in each, their order alternated).
        #[arg(long, default_value_t = 4)]
        rounds: usize,
        /// Where to write the capture and traces (a temporary directory by default).
        #[arg(long)]
        dir: Option<std::path::PathBuf>,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
}

/// Arguments of `socscope bench fleet`.
#[derive(clap::Args, Debug)]
pub struct FleetArgs {
    /// Simulated boards.
    #[arg(long, default_value_t = 12)]
    boards: usize,
    /// Simulated seconds per board (at 20 k events/s).
    #[arg(long, default_value_t = 300.0)]
    seconds: f64,
    /// Runs of each measure (anchor and measure alternate).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Where the boards' catalog and the dataset go (kept, and reused by a later run); a temporary
    /// directory by default.
    #[arg(long)]
    dir: Option<std::path::PathBuf>,
    /// The Python with duckdb and pyspark (default: target/python-venv/bin/python).
    #[arg(long)]
    python: Option<std::path::PathBuf>,
    /// One JSON document.
    #[arg(long)]
    json: bool,
    /// (Internal) sync this catalog into --dir and report, as the child process of the benchmark.
    #[arg(long, hide = true, value_name = "CATALOG")]
    sync_one: Option<std::path::PathBuf>,
    /// (Internal) run --query on this dataset with DataFusion and report.
    #[arg(long, hide = true, value_name = "DATASET")]
    sql_one: Option<std::path::PathBuf>,
    /// (Internal) the query of --sql-one.
    #[arg(long, hide = true)]
    query: Option<String>,
}

/// Peak resident set size of this process, from /proc (0 where unavailable).
fn rss_max_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// Replays `wire` into `dir` as `collect` would (its disk reserve set aside first, not timed): the
/// sessions, the notices and the replay's wall seconds.
fn replay_wire(
    wire: &Path,
    dir: &Path,
) -> Result<(
    Vec<socscope_collector::SessionReport>,
    Vec<socscope_collector::Notice>,
    f64,
)> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let config = socscope_collector::IngestConfig::new(dir);
    config
        .disk_reserve
        .ensure()
        .with_context(|| format!("cannot set aside the disk reserve in {}", dir.display()))?;
    let started = Instant::now();
    let (sessions, notices) = socscope_collector::replay::replay_file(wire, config)
        .with_context(|| format!("while replaying {}", wire.display()))?;
    Ok((sessions, notices, started.elapsed().as_secs_f64()))
}

/// Runs the simulator with `config` and writes its wire stream to `wire` (a new file), for a replay.
fn record_sim(config: &SimConfig, wire: &Path) -> Result<socscope_sim::SimSummary> {
    let file =
        std::fs::File::create(wire).with_context(|| format!("cannot create {}", wire.display()))?;
    let mut link = socscope_sim::transport::WriterTransport::new(
        std::io::BufWriter::with_capacity(1 << 20, file),
    );
    let sim = socscope_sim::run(config, &mut link)?;
    if let Some(e) = link.error() {
        return Err(anyhow!("writing {}: {e}", wire.display()));
    }
    link.finish()?;
    Ok(sim)
}

fn file_size(path: &Path) -> u64 {
    let mut total = 0;
    for suffix in ["", "-wal", "-shm"] {
        let p = format!("{}{suffix}", path.display());
        total += std::fs::metadata(p).map_or(0, |m| m.len());
    }
    total
}

/// Arguments of `socscope bench overview`.
#[derive(clap::Args, Debug)]
pub struct OverviewArgs {
    /// Events in the synthetic trace (the one `bench read` writes; ignored with --trace).
    #[arg(long, default_value_t = 10_000_000)]
    events: u64,
    /// Use this trace instead of a synthetic one.
    #[arg(long)]
    trace: Option<std::path::PathBuf>,
    /// Where to write (or find) the synthetic trace (a temporary directory by default).
    #[arg(long)]
    dir: Option<std::path::PathBuf>,
    /// Runs of each measure.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Ocelotl time slices.
    #[arg(long, default_value_t = 200)]
    slices: usize,
    /// TraceViz pixels.
    #[arg(long, default_value_t = 1000)]
    width: usize,
    /// One JSON object (the output is JSON either way; this silences the progress note).
    #[arg(long)]
    json: bool,
}

pub fn run(cmd: BenchCommand) -> Result<ExitCode> {
    // Benchmarks run for minutes: a spinner with the elapsed time says they are alive (on a
    // terminal only; their results are JSON or text on stdout either way).
    let name = format!("{cmd:?}");
    let name = name
        .split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or_default()
        .to_lowercase();
    let spinner = crate::out::progress_bar(
        bench_json(&cmd),
        None,
        &format!("{{spinner}} {{elapsed}} bench {name}"),
    );
    let result = run_bench(cmd);
    if let Some(s) = spinner {
        s.finish_and_clear();
    }
    result
}

/// Whether a benchmark was asked for JSON.
fn bench_json(cmd: &BenchCommand) -> bool {
    match cmd {
        BenchCommand::Fuzz { json, .. }
        | BenchCommand::Ingest { json, .. }
        | BenchCommand::Read { json, .. }
        | BenchCommand::Rig { json, .. }
        | BenchCommand::Capture { json, .. }
        | BenchCommand::Import { json, .. }
        | BenchCommand::Aggregate { json, .. }
        | BenchCommand::Upgrade { json, .. } => *json,
        BenchCommand::Fleet(a) => a.json,
        BenchCommand::Overview(a) => a.json,
    }
}

fn run_bench(cmd: BenchCommand) -> Result<ExitCode> {
    match cmd {
        BenchCommand::Fuzz {
            inputs,
            targets,
            seed,
            json,
        } => fuzz::run(inputs, &targets, seed, json),
        BenchCommand::Ingest { events, dir, json } => ingest(events, dir, json),
        BenchCommand::Upgrade {
            seconds,
            rounds,
            dir,
            json,
        } => upgrade::run(seconds, rounds, dir, json),
        BenchCommand::Read {
            events,
            reads,
            trace,
            dir,
            json,
        } => read(events, reads, trace, dir, json),
        BenchCommand::Rig {
            seconds,
            boards_seconds,
            rounds,
            dir,
            json,
        } => rig::run(seconds, boards_seconds, rounds, dir, json),
        BenchCommand::Capture {
            replay_one: Some(wire),
            dir,
            ..
        } => {
            let dir = dir.ok_or_else(|| anyhow!("--replay-one needs --dir"))?;
            capture::replay_one(&wire, &dir)
        }
        BenchCommand::Capture {
            only,
            dir,
            keep,
            json,
            replay_one: None,
        } => capture::run(&only, dir, keep, json),
        BenchCommand::Import {
            bytes,
            kptrace_bytes,
            gst_bytes,
            ftrace_sample,
            dir,
            json,
        } => import::run(bytes, kptrace_bytes, gst_bytes, ftrace_sample, dir, json),
        BenchCommand::Aggregate {
            scale: true,
            anchor,
            st_slices,
            runs,
            temporal_slices,
            temporal_runs,
            memory_budget,
            algorithm,
            dir,
            ..
        } => aggregate::scale(aggregate::ScaleArgs {
            slices: st_slices,
            anchor,
            runs,
            temporal_slices,
            temporal_runs,
            memory_budget,
            algorithm,
            dir,
        }),
        BenchCommand::Aggregate {
            compare_algorithms, ..
        } if !compare_algorithms.is_empty() => aggregate::compare(&compare_algorithms),
        BenchCommand::Aggregate {
            kernels: true,
            temporal_slices,
            temporal_runs,
            ..
        } => aggregate::kernels(&temporal_slices, temporal_runs),
        BenchCommand::Aggregate {
            events,
            trace,
            dir,
            json,
            ..
        } => aggregate::run(events, trace, dir, json),
        BenchCommand::Fleet(a) => {
            if let Some(catalog) = a.sync_one {
                let out = a.dir.ok_or_else(|| anyhow!("--sync-one needs --dir"))?;
                return fleet::sync_one(&catalog, &out);
            }
            if let Some(ds) = a.sql_one {
                #[cfg(feature = "fleet")]
                return fleet::sql_one(&ds, a.query.as_deref().unwrap_or_default());
                #[cfg(not(feature = "fleet"))]
                anyhow::bail!(
                    "--sql-one {} needs a build with the feature `fleet`",
                    ds.display()
                );
            }
            fleet::run(a.boards, a.seconds, a.runs, a.dir, a.python, a.json)
        }
        BenchCommand::Overview(a) => {
            overview::run(a.events, a.trace, a.dir, a.runs, a.slices, a.width, a.json)
        }
    }
}

/// `dir` (created), or a temporary directory removed when the guard drops (the benchmarks write gigabytes).
/// The first path `rel` names above the executable or above this crate's sources that `keep`
/// accepts (benchmarks find the shared trace files from an installed binary or a checkout).
pub(crate) fn find_above(rel: &str, keep: impl Fn(&Path) -> bool) -> Option<std::path::PathBuf> {
    let mut roots: Vec<std::path::PathBuf> = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        roots.extend(exe.ancestors().skip(1).map(Path::to_path_buf));
    }
    roots.extend(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .map(Path::to_path_buf),
    );
    roots.iter().map(|r| r.join(rel)).find(|p| keep(p))
}

fn scratch_dir(
    dir: Option<std::path::PathBuf>,
) -> Result<(std::path::PathBuf, Option<tempfile::TempDir>)> {
    match dir {
        Some(d) => {
            std::fs::create_dir_all(&d)
                .with_context(|| format!("cannot create {}", d.display()))?;
            Ok((d, None))
        }
        None => {
            let t = tempfile::Builder::new()
                .prefix("socscope-bench-")
                .tempdir()
                .context("cannot create a temporary directory")?;
            Ok((t.path().to_path_buf(), Some(t)))
        }
    }
}

fn ingest(events: u64, dir: Option<std::path::PathBuf>, json_out: bool) -> Result<ExitCode> {
    let (dir, _guard) = scratch_dir(dir)?;
    // The board at full speed: ~5 M records per simulated second, for as long as it takes to send `events`.
    let rate = 5_000_000.0;
    let config = SimConfig {
        duration_s: (events as f64 / rate).max(0.01),
        rate,
        board: "bench-stb",
        ..SimConfig::default()
    };
    let started = Instant::now();
    let c = crate::demo::capture(config, dir.join("ingest"), true)?;
    let wall = started.elapsed().as_secs_f64();
    let sim = c
        .sim
        .as_ref()
        .ok_or_else(|| anyhow!("the capture was stopped before the board finished"))?;
    let rss = rss_max_bytes();
    let trace_bytes = file_size(&c.session.path);
    // The store alone, same machine, same run: how fast chunks can be written without the link.
    let store_events = events.min(20_000_000);
    let store_path = dir.join("store-limit.db");
    // A rerun in the same --dir writes it afresh.
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", store_path.display()));
    }
    let store = socscope_tracedb::bench::write_synthetic(&store_path, store_events)
        .map_err(|e| anyhow!("store benchmark: {e}"))?;
    let records = c.session.records;
    // The anchor: the same events (read back from the trace) inserted as plain SQLite rows.
    let plain_path = dir.join("ingest-plain-sqlite.db");
    let plain = plain_sqlite::write(&c.session.path, &plain_path, Some(store_events))?;
    std::fs::remove_file(&plain_path).ok();
    let doc = json!({
        "events": records,
        "anchor": "plain SQLite row inserts of the same events (one transaction, prepared statement, index on time)",
        "anchor_rows": plain.rows,
        "anchor_rows_per_s": plain.rows_per_second(),
        "ratio_to_anchor": (c.session.events as f64 / wall) / plain.rows_per_second(),
        "anchor_bytes_per_event": plain.bytes as f64 / plain.rows.max(1) as f64,
        "stored_events": c.session.events,
        "sim_events": sim.events,
        "wall_s": wall,
        "events_per_s": records as f64 / wall,
        "store_limit_events_per_s": store.events_per_second,
        "store_limit_events": store_events,
        "ratio_to_store_limit": (records as f64 / wall) / store.events_per_second,
        "rss_max_bytes": rss,
        "trace_bytes": trace_bytes,
        "bytes_per_event_on_disk": trace_bytes as f64 / c.session.events.max(1) as f64,
        "bytes_per_record_on_disk": trace_bytes as f64 / records.max(1) as f64,
        "wire_bytes_per_event": sim.bytes_per_event,
        "lost": c.session.lost_on_board + c.session.lost_in_transit,
    });
    if json_out {
        outln!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        outln!(
            "ingest: {} records ({} events stored) in {:.2} s = {} records/s end to end; store alone {} events/s; \
             peak RSS {}; {:.2} bytes/event on disk",
            records,
            c.session.events,
            wall,
            units::count(records as f64 / wall),
            units::count(store.events_per_second),
            units::bytes(rss),
            trace_bytes as f64 / c.session.events.max(1) as f64,
        );
        outln!(
            "anchor, plain SQLite row inserts of the same events: {} rows/s, {:.2} bytes/event; end to end here {:.2}x its rate, {:.1}x smaller",
            units::count(plain.rows_per_second()),
            plain.bytes as f64 / plain.rows.max(1) as f64,
            (c.session.events as f64 / wall) / plain.rows_per_second(),
            (plain.bytes as f64 / plain.rows.max(1) as f64)
                / (trace_bytes as f64 / c.session.events.max(1) as f64),
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn read(
    events: u64,
    reads: usize,
    trace: Option<std::path::PathBuf>,
    dir: Option<std::path::PathBuf>,
    json_out: bool,
) -> Result<ExitCode> {
    let (dir, _guard) = scratch_dir(dir)?;
    let path = trace.unwrap_or_else(|| dir.join(format!("read-{events}.db")));
    if !path.exists() {
        socscope_tracedb::bench::write_synthetic(&path, events)
            .map_err(|e| anyhow!("writing the trace: {e}"))?;
    }
    let report = socscope_tracedb::bench::read_random(&path, reads, 10_000)
        .map_err(|e| anyhow!("reading: {e}"))?;
    // First chunk of time-range queries at random places: open, query, first event.
    let reader = TraceReader::open(&path)?;
    let info = reader.info()?;
    let events = info.event_count;
    let mut rng = socscope_tracedb::bench::SplitMix::new(7);
    let mut firsts = Vec::new();
    for _ in 0..50 {
        let span = info.duration().max(1) as u64;
        let start = info.t_min + rng.below(span) as i64;
        let t = Instant::now();
        let mut it = reader.events(TimeRange::new(start, info.t_max), &Filter::all())?;
        let _ = it.next();
        firsts.push(t.elapsed().as_secs_f64() * 1e3);
    }
    firsts.sort_by(f64::total_cmp);
    // The anchor: the same events as plain SQLite rows with a time index, read at the same random
    // times, alternating which goes first.
    let plain_path = dir.join("read-plain-sqlite.db");
    let plain_bytes = plain_sqlite::write(&path, &plain_path, None)?.bytes;
    let trace_bytes = std::fs::metadata(&path)?.len();
    let plain = plain_sqlite::PlainReader::open(&plain_path)?;
    let mut buf = socscope_tracedb::StoredEvent::default();
    let span = info.duration().max(1) as u64;
    let (mut ours, mut theirs) = (Vec::with_capacity(reads), Vec::with_capacity(reads));
    for i in 0..reads + 10 {
        let t = info.t_min + rng.below(span) as i64;
        let (a, b) = if i % 2 == 0 {
            let a = plain_sqlite::socscope_read_us(&reader, &mut buf, t, 10_000)?;
            (a, plain.read_us(t, 10_000)?)
        } else {
            let b = plain.read_us(t, 10_000)?;
            (
                plain_sqlite::socscope_read_us(&reader, &mut buf, t, 10_000)?,
                b,
            )
        };
        // The first ten warm both caches.
        if i >= 10 {
            ours.push(a / 1e3);
            theirs.push(b / 1e3);
        }
    }
    ours.sort_by(f64::total_cmp);
    theirs.sort_by(f64::total_cmp);
    let (ours_median, theirs_median) = (ours[ours.len() / 2], theirs[theirs.len() / 2]);
    drop(plain);
    std::fs::remove_file(&plain_path).ok();
    let doc = json!({
        "events": events,
        "reads": reads,
        "anchor": "plain SQLite rows (one per event, index on time), same events, same random times",
        "anchor_read_10k_ms_median": theirs_median,
        "paired_read_10k_ms_median": ours_median,
        "read_speedup_vs_anchor": theirs_median / ours_median,
        "trace_bytes": trace_bytes,
        "anchor_bytes": plain_bytes,
        "size_ratio_anchor_over_trace": plain_bytes as f64 / trace_bytes.max(1) as f64,
        "read_10k_ms_median": report.reused.p50_us / 1e3,
        "read_10k_ms_p99": report.reused.p99_us / 1e3,
        "read_10k_ms_max": report.reused.max_us / 1e3,
        "read_10k_owned_ms_median": report.owned.p50_us / 1e3,
        "read_10k_owned_ms_p99": report.owned.p99_us / 1e3,
        "first_chunk_ms_median": firsts[firsts.len() / 2],
        "first_chunk_ms_max": firsts[firsts.len() - 1],
    });
    if json_out {
        outln!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        outln!(
            "read: 10 k consecutive events at random times in {} events: median {:.3} ms, p99 {:.3} ms (one reused event; {:.3} ms / {:.3} ms as owned events); first chunk of a range query: median {:.2} ms, max {:.2} ms",
            units::count(events as f64),
            report.reused.p50_us / 1e3,
            report.reused.p99_us / 1e3,
            report.owned.p50_us / 1e3,
            report.owned.p99_us / 1e3,
            firsts[firsts.len() / 2],
            firsts[firsts.len() - 1]
        );
        outln!(
            "anchor, plain SQLite rows with a time index, same events and times: 10 k events in {:.3} ms median against {:.3} ms here ({:.1}x faster); {} against {} on disk ({:.1}x smaller)",
            theirs_median,
            ours_median,
            theirs_median / ours_median,
            units::bytes(plain_bytes),
            units::bytes(trace_bytes),
            plain_bytes as f64 / trace_bytes.max(1) as f64
        );
    }
    Ok(ExitCode::SUCCESS)
}
