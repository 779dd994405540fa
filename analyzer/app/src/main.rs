//! The socscope program: capture, import, inspect and analyse SoC execution traces.
//!
//! Start here: [`Cli`] (every command and its options), then the module of each command.

mod analyze;
mod bench;
mod collect;
mod demo;
mod export;
mod fleet;
mod format;
mod import;
mod input;
mod inspect;
use socscope_analyzer::out::{self, errln};
mod render;
mod results;
mod rig;
mod trigger;
mod view;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The default catalog directory when `--dir` is not given.
pub const DEFAULT_DIR: &str = "socscope-traces";

/// socscope: execution traces from embedded SoCs, captured live and analysed.
#[derive(Parser, Debug)]
#[command(name = "socscope", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Simulated board → TCP → collector → trace, shown live in the GUI (or summarised with --headless).
    #[command(
        after_help = "Examples:\n  socscope demo\n  socscope demo --headless\n  socscope demo --headless --duration 30 --cpu-stress 10:5 --json"
    )]
    Demo(demo::DemoArgs),
    /// Capture traces from boards over TCP and serial ports (or replay .wire captures) into DIR.
    #[command(
        after_help = "Examples:\n  socscope collect --listen 127.0.0.1:7070 --dir traces\n  \
        socscope collect --serial /dev/ttyUSB0:921600 --dir traces\n  \
        socscope collect --replay capture.wire --dir traces\n\
        Ctrl-C or SIGTERM closes every open trace cleanly (marked incomplete unless the board said Bye);\n\
        traces a crash left live in DIR are closed as interrupted when collect starts."
    )]
    Collect(collect::CollectArgs),
    // Its description lists the formats of the registry (`import::about`).
    #[command(
        about = import::about(),
        after_help = "Examples:\n  socscope import trace.txt                      (format detected from the first lines)\n  \
        socscope import trace.dat                      (trace-cmd record's file, detected by its magic)\n  \
        socscope import ~/lttng-traces/session-20260101  (an LTTng session: its kernel/ and ust/ traces)\n  \
        socscope import trace0 trace1 System.map --format kptrace -o stb.db\n  \
        socscope import post.txt kptrace.fmt --format kptrace   (post-processed form + format description)\n  \
        socscope import gst.log --dir traces --strict\n\
        Bad lines are skipped, counted in ingest_stat (lines_skipped) and reported as warnings; --strict stops at the first."
    )]
    Import(import::ImportArgs),
    /// Export a trace (or a time range of it) as Chrome/Perfetto JSON, Pajé or CSV.
    #[command(
        after_help = "Examples:\n  socscope export TRACE.db --format chrome-json -o trace.json   (open in ui.perfetto.dev)\n  \
        socscope export TRACE.db --format paje -o trace.paje\n  \
        socscope export TRACE.db --format csv --range 1.5s..3s -o slice.csv\n  \
        socscope export TRACE.db --format csv --range 200ms.. -o tail.csv\n\
        A range is START..END relative to the trace start; either side may be empty; numbers are seconds\n\
        unless suffixed with ns, us, ms or s."
    )]
    Export(export::ExportArgs),
    /// List the traces of a catalog directory.
    #[command(after_help = "Examples:\n  socscope ls\n  socscope ls --dir traces --json")]
    Ls {
        /// Catalog directory.
        #[arg(long, default_value = DEFAULT_DIR)]
        dir: PathBuf,
        /// One JSON document instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Describe a trace: board, duration, types with counts, producers, losses, ingest statistics.
    #[command(
        after_help = "Examples:\n  socscope info traces/sim-stb-20261121T101500Z-s1.db\n  socscope info TRACE --json\n  socscope ls --dir traces && socscope info 3 --dir traces"
    )]
    Info {
        /// The trace: a file (.db), or the ID or FILE that `socscope ls` prints for the catalog in `--dir`.
        trace: PathBuf,
        /// Catalog directory where an ID or a catalog's FILE name is looked up.
        #[arg(long, default_value = DEFAULT_DIR)]
        dir: PathBuf,
        /// One JSON document instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Convert trace files written by an older socscope to this version's schema, in place
    /// (events, event ids and saved results are kept; a version 1 file's summary is rebuilt), and
    /// derive the CPU tracks of traces recorded before them from their context switches.
    #[command(
        after_help = "Examples:\n  socscope upgrade traces/old.db\n  socscope upgrade traces/*.db --json"
    )]
    Upgrade {
        /// The trace files (.db).
        #[arg(required = true)]
        traces: Vec<PathBuf>,
        /// One JSON line per file.
        #[arg(long)]
        json: bool,
    },
    /// Run SQL on a trace; the `events` virtual table exposes every event (filter on `ts` to read a range fast).
    #[command(
        after_help = "Examples:\n  socscope sql TRACE \"SELECT name, category FROM event_type\"\n  \
        socscope sql TRACE \"SELECT type, count(*) FROM events WHERE ts BETWEEN 0 AND 1000000000 GROUP BY type\"\n  \
        socscope sql TRACE \"SELECT * FROM events LIMIT 10\" --json"
    )]
    Sql {
        /// The trace file (.db).
        trace: PathBuf,
        /// The query.
        query: String,
        /// Rows as a JSON array of objects.
        #[arg(long)]
        json: bool,
    },
    /// Close traces left live by a crash (kill -9, power loss, full disk): mark them interrupted with
    /// the event count and time range they really hold.
    #[command(
        after_help = "Examples:\n  socscope repair traces/stb-20261121T101500Z-s1.db\n  socscope repair traces/*.db --json\n\
        A trace a running collector still writes is left alone; `socscope collect` repairs its directory when it starts."
    )]
    Repair {
        /// The trace files (.db).
        #[arg(required = true)]
        traces: Vec<PathBuf>,
        /// One JSON document instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Open the GUI on a trace, or on the trace browser of a catalog directory.
    #[command(
        after_help = "Examples:\n  socscope view\n  socscope view traces/sim-stb-20261121T101500Z-s1.db --view table\n  \
        socscope view TRACE --screenshot gantt.png\n  \
        socscope view TRACE --view ocelotl --screenshot ocelotl.png\n  \
        socscope view TRACE --view ocelotl --aggregation spatiotemporal"
    )]
    View(view::ViewArgs),
    /// Statistics of an interval: event count per producer or type, state or link duration per type.
    Stats(analyze::StatsArgs),
    /// Event density histogram of an interval, per type.
    Density(analyze::DensityArgs),
    /// Ocelotl aggregation of a trace's microscopic model (or of a reference-vector model file).
    Aggregate(analyze::AggregateArgs),
    /// TraceViz per-actor histograms, outline, groups and Slick Graph.
    Timeline(analyze::TimelineArgs),
    /// The Gantt chart as a PNG: the CPU section (which thread ran on each CPU) above the producers.
    Gantt(analyze::GanttArgs),
    /// Windows where RUN departs from REFERENCE (exit status 3 when one passes the threshold).
    Compare(analyze::CompareArgs),
    /// The analysis results saved in a trace: list them, show one, delete one.
    Results(results::ResultsArgs),
    /// Reproducible benchmarks (release build recommended).
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Fleet scale: every trace of a rig or a fleet as one Parquet dataset (sync), queried in process
    /// (sql, report, overview: built with the feature `fleet`) and by Spark, DuckDB, Trino.
    #[command(subcommand)]
    Fleet(fleet::FleetCommand),
    /// Fire an external trigger in a running collector (annotates its traces; saves a flight-recorder window).
    #[command(
        after_help = "Examples:\n  socscope trigger --dir traces --reason \"picture froze\"\n  socscope trigger --control /run/rig.sock --token-file secret.txt"
    )]
    Trigger(trigger::TriggerCmdArgs),
    /// Scripted runs with verdicts (JSON and JUnit XML) for stress-reproduction rigs.
    #[command(subcommand)]
    Rig(rig::RigCommand),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // --help and --version print and succeed.
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            // Bad arguments: clap's message up to its usage section, on one line (scripts read one line).
            let text = e.to_string();
            let message: Vec<&str> = text
                .lines()
                .take_while(|l| !l.trim().is_empty())
                .map(str::trim)
                .collect();
            errln!(
                "socscope: {} (see --help)",
                message.join(" ").trim_start_matches("error: ")
            );
            return ExitCode::from(input::EXIT_BAD_ARGUMENTS);
        }
    };
    let result = match cli.command {
        Command::Demo(args) => demo::run(args),
        Command::Collect(args) => collect::run(args),
        Command::Import(args) => import::run(args),
        Command::Export(args) => export::run(args),
        Command::Ls { dir, json } => inspect::ls(&dir, json),
        Command::Info { trace, dir, json } => inspect::info(&trace, &dir, json),
        Command::Sql { trace, query, json } => inspect::sql(&trace, &query, json),
        Command::Repair { traces, json } => inspect::repair(&traces, json),
        Command::Stats(args) => analyze::stats(args),
        Command::Density(args) => analyze::density(args),
        Command::Aggregate(args) => analyze::aggregate(args),
        Command::Timeline(args) => analyze::timeline(args),
        Command::Gantt(args) => analyze::gantt(args),
        Command::Compare(args) => analyze::compare(args),
        Command::Results(args) => results::run(args),
        Command::Bench(cmd) => bench::run(cmd),
        Command::Upgrade { traces, json } => inspect::upgrade(&traces, json),
        Command::View(args) => view::run(args),
        Command::Fleet(cmd) => fleet::run(cmd),
        Command::Trigger(args) => trigger::run_trigger(args),
        Command::Rig(cmd) => rig::run(cmd),
    };
    // A finished trace this command saved results into is one self-contained file again (issue 27).
    for path in socscope_tracedb::settle_written_traces() {
        errln!(
            "note: {} keeps its WAL beside it (another program holds it); the next command that saves into it folds it in",
            path.display()
        );
    }
    match result {
        Ok(code) => code,
        // Nobody reads the output any more (`socscope sql … | head -1`): end quietly, as a pipe expects.
        Err(_) if out::closed() => ExitCode::SUCCESS,
        Err(e) => {
            errln!("socscope: {}", format::error_chain(&e));
            ExitCode::from(input::exit_status(&e))
        }
    }
}
