//! `socscope fleet`: every trace of a rig or a fleet as one Parquet dataset (`sync`, in every build), and
//! the queries over it with the embedded engine (`sql`, `report`, `overview`: the cargo feature `fleet`).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use socscope_fleet::sync::{SyncOptions, SyncProgress, SyncSummary};
use socscope_tracedb::units;

use crate::out::{errln, outln};

/// The fleet commands.
#[derive(clap::Subcommand, Debug)]
pub enum FleetCommand {
    /// Export every finished trace of catalog directories into a Parquet dataset (new and changed ones only).
    #[command(
        after_help = "Examples:\n  socscope fleet sync socscope-traces --out fleet\n  \
        socscope fleet sync rig1/traces rig2/traces --out /data/fleet --json\n  \
        socscope fleet sync traces --out fleet --prune        (also remove traces deleted from the catalog)\n\
        The dataset's tables and columns: docs/FLEET.md. Live traces wait for the next sync unless --include-live."
    )]
    Sync(SyncArgs),
    /// Run SQL over a dataset in process (Apache DataFusion): tables traces, events, producers, types, losses.
    #[command(
        after_help = "Examples:\n  socscope fleet sql fleet \"SELECT board, type, count(*) AS n FROM events GROUP BY board, type ORDER BY n DESC\"\n  \
        socscope fleet sql fleet \"SELECT trace_id, events, lost_records FROM traces WHERE date = '2026-03-02'\" --json\n  \
        socscope fleet sql fleet \"SELECT ts_ns, params_int['pid'] FROM events WHERE board = 'stb-3' LIMIT 10\" --csv\n\
        Filters on board and date skip whole partitions. Needs a build with the feature `fleet`."
    )]
    Sql(SqlArgs),
    /// The morning report: per board and night, events, losses, state durations, periodic-event gaps,
    /// and the runs that depart from a reference.
    #[command(after_help = "Examples:\n  socscope fleet report fleet\n  \
        socscope fleet report fleet --where \"date >= '2026-03-01'\" --reference sim-stb-0-20260302T220000Z-s1 --json\n  \
        socscope fleet report fleet --png nights.png --metric gaps\n\
        Needs a build with the feature `fleet`.")]
    Report(ReportArgs),
    /// Ocelotl's spatiotemporal aggregation of a fleet: boards as the producer hierarchy
    /// (hardware → firmware → board → CPU), over each run's time.
    #[command(
        after_help = "Examples:\n  socscope fleet overview fleet --metric duration --png overview.png\n  \
        socscope fleet overview fleet --where \"date = '2026-03-02'\" --metric count --p 0.4 --json\n\
        Needs a build with the feature `fleet`."
    )]
    Overview(OverviewArgs),
}

#[derive(clap::Args, Debug)]
pub struct SyncArgs {
    /// Catalog directories (each holds catalog.db).
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// The dataset directory (created if needed; must be empty or a dataset).
    #[arg(long, value_name = "DATASET")]
    pub out: PathBuf,
    /// Also export traces still being written (their committed part).
    #[arg(long)]
    pub include_live: bool,
    /// Remove the files of traces a synced catalog no longer lists.
    #[arg(long)]
    pub prune: bool,
    /// Traces exported at once, each on its own thread (default: one per core, at most 4).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub jobs: Option<u16>,
    /// One JSON document instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
pub struct SqlArgs {
    /// The dataset directory.
    pub dataset: PathBuf,
    /// The query.
    pub query: String,
    /// Rows as a JSON array of objects.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Rows as CSV with a header line.
    #[arg(long)]
    pub csv: bool,
}

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// The dataset directory.
    pub dataset: PathBuf,
    /// The runs to report on: a condition on the traces table (and board, date).
    #[arg(long = "where", value_name = "SQL")]
    pub where_sql: Option<String>,
    /// The reference run (a trace id): each run's departure score against it.
    #[arg(long, value_name = "TRACE_ID")]
    pub reference: Option<String>,
    /// The periodic event whose intervals are checked: a producer or type name.
    #[arg(long, default_value = "vsync", value_name = "NAME")]
    pub periodic: String,
    /// An interval of the periodic event longer than this is a gap (seconds, or 25ms).
    #[arg(long, default_value = "25ms", value_name = "TIME", value_parser = crate::input::positive_seconds)]
    pub gap_bound: f64,
    /// Slices of the comparison with the reference.
    #[arg(long, default_value_t = 100)]
    pub slices: usize,
    /// Window score from which a run departs.
    #[arg(long, default_value_t = 0.25)]
    pub threshold: f64,
    /// p of the comparison's temporal aggregation.
    #[arg(long, default_value_t = 0.5)]
    pub p: f64,
    /// Draw a boards × nights heat map of --metric into FILE.
    #[arg(long, value_name = "FILE")]
    pub png: Option<PathBuf>,
    /// The heat map's metric: events, lost, gaps, departures or max-score.
    #[arg(long, default_value = "events")]
    pub metric: String,
    /// One JSON document instead of tables.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
pub struct OverviewArgs {
    /// The dataset directory.
    pub dataset: PathBuf,
    /// What to aggregate: count (events per type) or duration (time in each state type).
    #[arg(long, default_value = "count")]
    pub metric: String,
    /// The runs: a condition on the traces table (and board, date).
    #[arg(long = "where", value_name = "SQL")]
    pub where_sql: Option<String>,
    /// Slices of the time axis (each run from its first event).
    #[arg(long, default_value_t = 100)]
    pub slices: usize,
    /// The p of the partition drawn and listed (default: Ocelotl's first choice).
    #[arg(long)]
    pub p: Option<f64>,
    /// The trace tag naming the firmware version, the hierarchy's second level.
    #[arg(long, default_value = "agent_version", value_name = "TAG")]
    pub firmware_tag: String,
    /// Draw the spatiotemporal overview into FILE.
    #[arg(long, value_name = "FILE")]
    pub png: Option<PathBuf>,
    /// One JSON document (the Ocelotl report and the hierarchy).
    #[arg(long)]
    pub json: bool,
}

/// Runs a fleet command.
pub fn run(cmd: FleetCommand) -> Result<ExitCode> {
    match cmd {
        FleetCommand::Sync(args) => sync(args),
        #[cfg(feature = "fleet")]
        FleetCommand::Sql(args) => engine::sql(args),
        #[cfg(feature = "fleet")]
        FleetCommand::Report(args) => engine::report(args),
        #[cfg(feature = "fleet")]
        FleetCommand::Overview(args) => engine::overview(args),
        #[cfg(not(feature = "fleet"))]
        FleetCommand::Sql(_) | FleetCommand::Report(_) | FleetCommand::Overview(_) => {
            anyhow::bail!(
                "this socscope was built without the embedded query engine (Apache DataFusion); build it with \
                 `cargo build --release -p socscope-analyzer --features fleet` (DataFusion compiles for about 10 to \
                 20 minutes), or query the dataset with any Parquet engine (Spark, DuckDB: docs/FLEET.md)"
            )
        }
    }
}

fn sync(args: SyncArgs) -> Result<ExitCode> {
    for d in &args.dirs {
        crate::input::require_file(d)?;
    }
    let bar = (!args.json && std::io::stderr().is_terminal()).then(|| {
        let b = indicatif::ProgressBar::new(0);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} {pos}/{len} traces {wide_bar} {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    });
    let mut on_progress = |p: &SyncProgress| {
        if let Some(b) = &bar {
            b.set_length(p.traces_total as u64);
            b.set_position(p.traces_done as u64);
            b.set_message(format!(
                "{} events  {}",
                units::count(p.events_written as f64),
                p.current
            ));
        }
    };
    let summary = socscope_fleet::sync::sync(
        &args.dirs,
        &args.out,
        SyncOptions {
            include_live: args.include_live,
            prune: args.prune,
            jobs: args.jobs.map_or(0, usize::from),
        },
        &mut on_progress,
    )
    .with_context(|| format!("while syncing into {}", args.out.display()))?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    report_sync(&summary, args.json)?;
    Ok(if summary.failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn report_sync(s: &SyncSummary, json: bool) -> Result<()> {
    for f in &s.failures {
        errln!("socscope: {}: {}", f.trace.display(), f.error);
    }
    if json {
        outln!("{}", serde_json::to_string_pretty(s)?);
        return Ok(());
    }
    let rate = s.events as f64 / s.seconds.max(1e-9);
    outln!(
        "{}: {} traces written ({} events, {}, {} events/s), {} unchanged, {} live skipped, {} processed skipped",
        s.dataset.display(),
        s.traces_written,
        units::count(s.events as f64),
        units::bytes(s.bytes),
        units::count(rate),
        s.traces_unchanged,
        s.traces_live_skipped,
        s.traces_processed_skipped,
    );
    if s.traces_pruned > 0 || s.traces_not_in_catalog > 0 {
        outln!(
            "{} traces pruned, {} no longer in their catalog kept (--prune removes them)",
            s.traces_pruned,
            s.traces_not_in_catalog
        );
    }
    if s.temporaries_removed > 0 {
        outln!(
            "{} half-written files of an interrupted sync removed",
            s.temporaries_removed
        );
    }
    if !s.failures.is_empty() {
        outln!(
            "{} traces could not be exported (see above)",
            s.failures.len()
        );
    }
    Ok(())
}

/// Validates `--dataset` for `collect` before any board is accepted.
pub fn check_dataset(path: &std::path::Path) -> Result<()> {
    socscope_fleet::Dataset::open_for_writing(path)
        .map(drop)
        .with_context(|| format!("--dataset {}", path.display()))
}

/// Exports the traces `collect` has closed, one at a time, on a thread of its own so that capture never
/// waits for it.
pub struct DatasetExporter {
    tx: Option<std::sync::mpsc::Sender<PathBuf>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl DatasetExporter {
    /// Starts the exporter of traces of `catalog` into `dataset`; `json` words its lines as JSON.
    pub fn start(catalog: PathBuf, dataset: PathBuf, json: bool) -> Self {
        let (tx, rx) = std::sync::mpsc::channel::<PathBuf>();
        let thread = std::thread::spawn(move || {
            for trace in rx {
                match socscope_fleet::sync::sync_traces(
                    &catalog,
                    std::slice::from_ref(&trace),
                    &dataset,
                ) {
                    Ok(s) if s.failures.is_empty() => {
                        if json {
                            let _ = crate::out::line(format_args!(
                                "{}",
                                serde_json::json!({"event": "exported", "trace": trace, "dataset": dataset,
                                    "traces_written": s.traces_written, "events": s.events, "bytes": s.bytes})
                            ));
                        } else {
                            let _ = crate::out::line(format_args!(
                                "exported:        {} -> {} ({} events, {})",
                                trace.display(),
                                dataset.display(),
                                s.events,
                                units::bytes(s.bytes)
                            ));
                        }
                    }
                    Ok(s) => {
                        for f in s.failures {
                            errln!(
                                "warning: {} not exported to {}: {}",
                                f.trace.display(),
                                dataset.display(),
                                f.error
                            );
                        }
                    }
                    Err(e) => errln!(
                        "warning: {} not exported to {}: {e}",
                        trace.display(),
                        dataset.display()
                    ),
                }
            }
        });
        Self {
            tx: Some(tx),
            thread: Some(thread),
        }
    }

    /// Queues a closed trace.
    pub fn export(&self, trace: PathBuf) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(trace);
        }
    }

    /// Exports what is queued and stops.
    pub fn finish(mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(feature = "fleet")]
mod engine {
    use std::process::ExitCode;

    use anyhow::{Context, Result};
    use serde_json::{Value, json};
    use socscope_analysis::compare::CompareOptions;
    use socscope_analysis::micro::Metric;
    use socscope_analysis::ocelotl::{self, AggregationMode, ModelFile, RunOptions};
    use socscope_fleet::query::{Engine, cell_json, cell_text};
    use socscope_fleet::report::{self, ReportOptions};
    use socscope_fleet::{Dataset, overview};
    use socscope_tracedb::units;

    use super::{OverviewArgs, ReportArgs, SqlArgs};
    use crate::format;
    use crate::input::bad_argument;
    use crate::out::outln;

    fn open(path: &std::path::Path) -> Result<Engine> {
        if !path.is_dir() {
            return Err(bad_argument!(
                "{}: no such dataset directory",
                path.display()
            ));
        }
        let ds = Dataset::open(path)?;
        Ok(Engine::open(&ds)?)
    }

    fn csv_field(s: &str) -> String {
        if s.contains([',', '"', '\n', '\r']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_owned()
        }
    }

    pub fn sql(args: SqlArgs) -> Result<ExitCode> {
        let engine = open(&args.dataset)?;
        let mut header_done = false;
        let mut table_rows: Vec<Vec<String>> = Vec::new();
        let mut first_json = true;
        if args.json {
            outln!("[");
        }
        let schema = engine.query(&args.query, |b| {
            let names: Vec<String> = b
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect();
            for r in 0..b.num_rows() {
                if args.json {
                    let obj: serde_json::Map<String, Value> = names
                        .iter()
                        .enumerate()
                        .map(|(c, n)| (n.clone(), cell_json(b.column(c).as_ref(), r)))
                        .collect();
                    let sep = if first_json { "" } else { "," };
                    first_json = false;
                    crate::out::line(format_args!("{sep}{}", Value::Object(obj)))
                        .map_err(|e| socscope_fleet::FleetError::Query(e.to_string()))?;
                } else if args.csv {
                    if !header_done {
                        header_done = true;
                        crate::out::line(format_args!(
                            "{}",
                            names
                                .iter()
                                .map(|n| csv_field(n))
                                .collect::<Vec<_>>()
                                .join(",")
                        ))
                        .map_err(|e| socscope_fleet::FleetError::Query(e.to_string()))?;
                    }
                    let cells: Vec<String> = (0..b.num_columns())
                        .map(|c| csv_field(&cell_text(b.column(c).as_ref(), r)))
                        .collect();
                    crate::out::line(format_args!("{}", cells.join(",")))
                        .map_err(|e| socscope_fleet::FleetError::Query(e.to_string()))?;
                } else {
                    table_rows.push(
                        (0..b.num_columns())
                            .map(|c| cell_text(b.column(c).as_ref(), r))
                            .collect(),
                    );
                }
            }
            Ok(())
        })?;
        if args.json {
            outln!("]");
        } else if args.csv {
            if !header_done {
                let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
                outln!("{}", names.join(","));
            }
        } else {
            let header: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
            outln!("{}", format::table(&header, &table_rows));
            outln!("({} rows)", table_rows.len());
        }
        Ok(ExitCode::SUCCESS)
    }

    pub fn report(args: ReportArgs) -> Result<ExitCode> {
        if args.slices == 0 || args.slices > 10_000 {
            return Err(bad_argument!("--slices must be between 1 and 10000"));
        }
        if !(0.0..=1.0).contains(&args.p) {
            return Err(bad_argument!("--p must be between 0 and 1"));
        }
        if !report::HEATMAP_METRICS.contains(&args.metric.as_str()) {
            return Err(bad_argument!(
                "--metric {:?}: choose among {}",
                args.metric,
                report::HEATMAP_METRICS.join(", ")
            ));
        }
        if matches!(args.metric.as_str(), "departures" | "max-score") && args.reference.is_none() {
            return Err(bad_argument!(
                "--metric {} needs --reference TRACE_ID",
                args.metric
            ));
        }
        let engine = open(&args.dataset)?;
        let options = ReportOptions {
            where_sql: args.where_sql.clone(),
            reference: args.reference.clone(),
            periodic: args.periodic.clone(),
            gap_bound_ns: (args.gap_bound * 1e9).round() as i64,
            compare: CompareOptions {
                slices: args.slices,
                threshold: args.threshold,
                p: args.p,
                ..CompareOptions::default()
            },
        };
        let r = report::report(&engine, &options).map_err(|e| match &e {
            socscope_fleet::FleetError::Query(m) if m.starts_with("--reference") => {
                bad_argument!("{m}")
            }
            _ => anyhow::Error::new(e),
        })?;
        if let Some(png) = &args.png {
            let map = report::heatmap(&r, &args.metric)?;
            crate::render::heatmap(png, &map)
                .with_context(|| format!("cannot draw {}", png.display()))?;
        }
        if args.json {
            outln!("{}", serde_json::to_string_pretty(&r)?);
            return Ok(ExitCode::SUCCESS);
        }
        let rows: Vec<Vec<String>> = r
            .nights
            .iter()
            .map(|n| {
                vec![
                    n.board.clone(),
                    n.date.clone(),
                    n.runs.to_string(),
                    n.events.to_string(),
                    n.lost_records.to_string(),
                    units::duration(n.duration_ns),
                ]
            })
            .collect();
        outln!("Nights ({} boards × nights)", rows.len());
        outln!(
            "{}",
            format::table(
                &["board", "date", "runs", "events", "lost", "duration"],
                &rows
            )
        );
        outln!();
        let rows: Vec<Vec<String>> = r
            .states
            .iter()
            .map(|s| {
                vec![
                    s.board.clone(),
                    s.date.clone(),
                    s.type_name.clone(),
                    s.states.to_string(),
                    units::duration(s.p50_ns),
                    units::duration(s.p99_ns),
                    units::duration(s.max_ns),
                ]
            })
            .collect();
        outln!("State durations per type");
        outln!(
            "{}",
            format::table(
                &["board", "date", "type", "states", "p50", "p99", "max"],
                &rows
            )
        );
        outln!();
        let rows: Vec<Vec<String>> = r
            .gaps
            .iter()
            .map(|g| {
                vec![
                    g.board.clone(),
                    g.date.clone(),
                    g.intervals.to_string(),
                    g.beyond_bound.to_string(),
                    units::duration(g.max_interval_ns),
                ]
            })
            .collect();
        outln!(
            "Intervals of {} beyond {}",
            r.periodic,
            units::duration(r.gap_bound_ns)
        );
        outln!(
            "{}",
            format::table(&["board", "date", "intervals", "beyond", "longest"], &rows)
        );
        if let Some(d) = &r.departures {
            outln!();
            let rows: Vec<Vec<String>> = d
                .runs
                .iter()
                .map(|x| {
                    vec![
                        x.trace_id.clone(),
                        x.board.clone(),
                        x.date.clone(),
                        x.windows.to_string(),
                        x.departures.to_string(),
                        format!("{:.3}", x.max_score),
                    ]
                })
                .collect();
            let departing = d.runs.iter().filter(|x| x.departures > 0).count();
            outln!(
                "Runs against {} ({} of {} depart, threshold {})",
                d.reference,
                departing,
                d.runs.len(),
                d.threshold
            );
            outln!(
                "{}",
                format::table(
                    &["run", "board", "date", "windows", "departing", "max score"],
                    &rows
                )
            );
        }
        if let Some(png) = &args.png {
            outln!("wrote {}", png.display());
        }
        Ok(ExitCode::SUCCESS)
    }

    pub fn overview(args: OverviewArgs) -> Result<ExitCode> {
        let metric = match args.metric.as_str() {
            "count" => Metric::Count,
            "duration" => Metric::Duration,
            other => {
                return Err(bad_argument!(
                    "--metric {other:?}: choose count (events per type) or duration (time in each state type)"
                ));
            }
        };
        if args.slices == 0 || args.slices > 2_000 {
            return Err(bad_argument!("--slices must be between 1 and 2000"));
        }
        if let Some(p) = args.p
            && !(0.0..=1.0).contains(&p)
        {
            return Err(bad_argument!("--p must be between 0 and 1"));
        }
        let engine = open(&args.dataset)?;
        let options = overview::OverviewOptions {
            where_sql: args.where_sql.clone(),
            metric,
            slices: args.slices,
            firmware_tag: args.firmware_tag.clone(),
        };
        let m = overview::model(&engine, &options)?;
        let model = m.to_model()?;
        let file = ModelFile {
            model: model.clone(),
            threshold: ocelotl::DEFAULT_THRESHOLD,
            p_values: args.p.into_iter().collect(),
        };
        let report = ocelotl::run_model(
            &file,
            &RunOptions {
                mode: AggregationMode::Spatiotemporal,
                normalize: false,
                ps: args.p.into_iter().collect(),
                threshold: None,
            },
        )?;
        let p = args.p.unwrap_or(report.ocelotl_default_p);
        let (_, nodes) = m.hierarchy();
        if let Some(png) = &args.png {
            // The model's producers are the fleet's boards and CPUs: labelled by the same rule.
            let labels = socscope_analysis::hierarchy::producer_labels(&m.producers);
            crate::render::spatiotemporal(png, &m, &labels, &model, p)
                .with_context(|| format!("cannot draw {}", png.display()))?;
        }
        if args.json {
            let mut v = serde_json::to_value(&report)?;
            v["hierarchy"] = json!(nodes.iter().map(|n| n.name.clone()).collect::<Vec<_>>());
            v["types"] = json!(model.type_names());
            v["slice_ns"] = json!(m.grid.slice_ns());
            v["metric"] = json!(args.metric);
            outln!("{}", serde_json::to_string_pretty(&v)?);
            return Ok(ExitCode::SUCCESS);
        }
        let agg = ocelotl::SpatiotemporalAggregation::new(&model, &m.hierarchy().0);
        let part = agg.best_partition(p);
        outln!(
            "{} boards' CPUs, {} types, {} slices of {}; p = {p:.4}: {} areas ({} significant p values)",
            m.producers.len(),
            model.type_names().len(),
            m.grid.slices,
            units::duration(m.grid.slice_ns().round() as i64),
            part.aggregates().len(),
            report.dichotomy.len()
        );
        // Which boards behave alike: the nodes aggregated over the whole run (one area from start to end).
        for a in part.aggregates() {
            if a.start == 0 && a.end + 1 == m.grid.slices && a.node < nodes.len() {
                outln!("  alike all along: {}", nodes[a.node].name);
            }
        }
        if let Some(png) = &args.png {
            outln!("wrote {}", png.display());
        }
        Ok(ExitCode::SUCCESS)
    }
}
