//! The analysis commands: `stats`, `density`, `aggregate`, `timeline` and `compare`, each a
//! thin shell over a view model of `socscope-analysis`, printing text or `--json` and drawing
//! `--png` pictures for reports.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow, bail};
use serde_json::json;
use socscope_analysis::compare::{self, CompareOptions};
use socscope_analysis::density;
use socscope_analysis::hierarchy;
use socscope_analysis::loader;
use socscope_analysis::micro::{self, Metric, SliceGrid};
use socscope_analysis::ocelotl::{
    self, AggregationMode, ModelFile, RunOptions, SpatiotemporalAggregation, TemporalAggregation,
};
use socscope_analysis::overview::Partition;
use socscope_analysis::processed;
use socscope_analysis::results as saved;
use socscope_analysis::stats::{
    self as statistics, Group, Operator, StatisticsConfig, StatsConsumer,
};
use socscope_analysis::traceviz::{self, GroupOp, Statistic};
use socscope_tracedb::{Filter, TimeRange, TraceReader};

use crate::input::{RangeArg, bad_argument, open_trace};
use crate::out::outln;
use crate::render;
use socscope_tracedb::units;

/// `--save` and its description, on the commands whose result can be kept in the trace.
#[derive(clap::Args, Debug)]
pub struct SaveArgs {
    /// Save the result in the trace (`socscope results TRACE` lists what was saved).
    #[arg(long)]
    pub save: bool,
    /// Description of the saved result (default: what was computed, on what).
    #[arg(long, value_name = "TEXT", requires = "save")]
    pub description: Option<String>,
}

impl SaveArgs {
    /// Saves `data` into `trace` if asked; the new id.
    fn save(
        &self,
        trace: &std::path::Path,
        command: &'static str,
        default_description: String,
        data: socscope_tracedb::AnalysisData,
    ) -> Result<Option<i64>> {
        if !self.save {
            return Ok(None);
        }
        let id = crate::results::save(
            trace,
            crate::results::ToSave {
                command,
                description: self.description.clone().unwrap_or(default_description),
                data,
            },
        )?;
        Ok(Some(id))
    }
}

/// The last lines of a command's text output when it saved results.
fn said_saved(ids: &[i64], kind: &str, trace: &std::path::Path) -> Result<()> {
    for id in ids {
        outln!("saved result {id} ({kind}) in {}", trace.display());
    }
    Ok(())
}

/// `1 part`, `3 parts`.
fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("{n} {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// Exit code of `compare` when a window departs from the reference past the threshold.
pub const DEPARTURE_EXIT: u8 = 3;

/// Options shared by the commands that read one trace.
#[derive(clap::Args, Debug)]
pub struct Common {
    /// The trace file (.db).
    pub trace: PathBuf,
    /// Only this interval, relative to the trace start (e.g. 1.5..3, 200ms..).
    #[arg(long, value_name = "A..B")]
    pub range: Option<RangeArg>,
    /// Only these event types (comma-separated names).
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub types: Vec<String>,
    /// Only these producers (comma-separated names; `NAME #ID`, as the outputs label producers
    /// sharing a name, picks one of them).
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub producers: Vec<String>,
    /// One JSON document instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also draw the result into this PNG file.
    #[arg(long, value_name = "FILE")]
    pub png: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  socscope stats TRACE\n  \
    socscope stats TRACE --operator state-duration-per-type --range 2..4 --json\n  \
    socscope stats TRACE --operator count-per-producer --exclude swapper --threshold 0.02 \
    --group 'video=vdec,vsync:#d62728' --png stats.png\n\n\
    JSON: {\"trace\", \"range_ns\": [a, b], \"operator\", \"unit\": \"events\"|\"ns\", \"total\",\n  \
    \"slices\": [{\"label\", \"value\", \"colour_key\", \"colour\": [r, g, b], \"members\": [ids]}],\n  \
    \"first_result_ms\", \"chunks\", \"events\"}\n\
    Slices by decreasing value; `others` (values under --threshold of the total) last.")]
pub struct StatsArgs {
    #[command(flatten)]
    pub common: Common,
    /// count-per-producer, count-per-type, state-duration-per-type, link-duration-per-type,
    /// count-per-syscall or syscall-duration (per syscall name: futex, read, ...).
    #[arg(long, default_value = "count-per-type")]
    pub operator: Operator,
    /// Producers or types (names) left out, total included (repeatable, comma-separated).
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub exclude: Vec<String>,
    /// A group shown as one slice: NAME=MEMBER,MEMBER[:#rrggbb] (repeatable).
    #[arg(long, value_name = "GROUP")]
    pub group: Vec<String>,
    /// Merge slices under this fraction of the total into `others`.
    #[arg(long, default_value_t = 0.0)]
    pub threshold: f64,
    #[command(flatten)]
    pub save: SaveArgs,
}

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  socscope density TRACE --bins 200\n  \
    socscope density TRACE --types irq,softirq --range 4..6 --json --png density.png\n\n\
    JSON: {\"trace\", \"start\", \"end\" (ns), \"types\": [names], \"max\", \"total\",\n  \
    \"bins\": [{\"start\", \"end\", \"count\", \"per_type\": [counts in the order of types]}]}")]
pub struct DensityArgs {
    #[command(flatten)]
    pub common: Common,
    /// Number of bins.
    #[arg(long, default_value_t = 100)]
    pub bins: usize,
}

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  socscope aggregate TRACE --slices 100 --metric duration --plist\n  \
    socscope aggregate TRACE --mode spatiotemporal --slices 50 --p 0.4 --json --png st.png\n  \
    socscope aggregate --model vectors/x.input.json --mode temporal --normalize --p 0.5 --json\n  \
    socscope aggregate TRACE --p 0.3 --save --processed-trace --description 'phases'\n\n\
    JSON (trace): {\"trace\", \"saved\": [result ids], \"processed_traces\": [files], \"range_ns\", \"slices\", \"slice_ns\", \"metric\", \"types\": [names],\n  \
    \"producers\": [names in model order], \"nodes\": [{\"name\", \"producer\"}] (hierarchy, node ids),\n  \
    \"report\": REPORT}\n\
    JSON (--model): REPORT alone, in the reference vectors' field names.\n\
    REPORT: {\"mode\", \"normalized\", \"threshold\", \"whole_gain\", \"whole_loss\", \"ocelotl_default_p\",\n  \
    \"dichotomy\": [the p list: {\"p\", \"gain\", \"loss\", \"n_parts\", \"ranges\": [[first, last] slices], \"parts\"}\n  \
    or spatiotemporal {\"p\", \"gain\", \"loss\", \"node_parts\", \"aggregates\": [[node, start, end]], ...}],\n  \
    \"at_p\": [the same for each --p, with \"p_used\"]}"
)]
pub struct AggregateArgs {
    /// The trace file (.db); omit with --model.
    pub trace: Option<PathBuf>,
    /// A reference-vector model file instead of a trace.
    #[arg(long, value_name = "FILE.json", conflicts_with = "trace")]
    pub model: Option<PathBuf>,
    /// temporal or spatiotemporal.
    #[arg(long, default_value = "temporal", value_parser = parse_mode)]
    pub mode: AggregationMode,
    /// Time slices of the microscopic model.
    #[arg(long, default_value_t = 100)]
    pub slices: usize,
    /// count, duration or mean.
    #[arg(long, default_value = "count")]
    pub metric: Metric,
    /// Only this interval, relative to the trace start.
    #[arg(long, value_name = "A..B")]
    pub range: Option<RangeArg>,
    /// Only these event types (comma-separated names).
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub types: Vec<String>,
    /// Only these producers (comma-separated names; `NAME #ID`, as the outputs label producers
    /// sharing a name, picks one of them).
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub producers: Vec<String>,
    /// Report the best partition at this p (repeatable).
    #[arg(long)]
    pub p: Vec<f64>,
    /// Print the list of significant p (always in the JSON).
    #[arg(long)]
    pub plist: bool,
    /// Normalise the temporal qualities (Ocelotl's "Normalize").
    #[arg(long)]
    pub normalize: bool,
    /// Bisection threshold of the p list.
    #[arg(long)]
    pub threshold: Option<f32>,
    /// Memory the aggregation may use (e.g. 512MiB, 4GiB): a spatiotemporal aggregation keeps
    /// its qualities when they fit and recomputes them at every p when not; a run that cannot
    /// fit is refused before it starts.
    #[arg(long, value_name = "SIZE", default_value = "1GiB", value_parser = parse_size)]
    pub memory_budget: u64,
    /// The spatiotemporal algorithm: `exact` (lpaggreg's results bit for bit), `scalable`
    /// (the same results bit for bit, on a memory schedule for long series of many
    /// producers: qualities recomputed at every p, two leaves at a time; the bisection runs a
    /// DP only where the partitions' quality lines met so far cannot tell its answer, so far
    /// fewer p are evaluated), or `auto`: exact while its qualities fit in the memory budget
    /// kept, scalable above that size.
    #[arg(long, value_enum, default_value = "auto")]
    pub algorithm: AlgorithmArg,
    /// One JSON document instead of text.
    #[arg(long)]
    pub json: bool,
    /// Draw the partition (first --p, else Ocelotl's default p) into this PNG file.
    #[arg(long, value_name = "FILE")]
    pub png: Option<PathBuf>,
    // With --save: one annotation result per --p (else at Ocelotl's default p), its parts as
    // intervals with their producers.
    #[command(flatten)]
    pub save: SaveArgs,
    /// With --save: keep each partition as a processed trace (a new trace file beside TRACE, one
    /// state per part and producer with its values, linked from TRACE) instead of annotations.
    #[arg(long, requires = "save")]
    pub processed_trace: bool,
}

/// `SIZE`: bytes, or a number with a unit of K, M, G (powers of 1024, with or without `iB`/`B`).
fn parse_size(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{s:?}: expected a size such as 1GiB, 512MiB or 2000000000"))?;
    let scale = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1u64,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        other => {
            return Err(format!(
                "{s:?}: unknown unit {other:?}; expected K, M, G or T (KiB, MiB, GiB, TiB)"
            ));
        }
    };
    let bytes = n * scale as f64;
    if !(1.0..2f64.powi(63)).contains(&bytes) {
        return Err(format!("{s:?}: expected a size of at least one byte"));
    }
    Ok(bytes as u64)
}

/// The progress of a long aggregation on stderr (when it is a terminal): each evaluated p and
/// how far the current evaluation is. Ctrl-C stops it.
struct AggregateProgress {
    bar: Option<indicatif::ProgressBar>,
}

impl AggregateProgress {
    fn new(json: bool) -> Self {
        let bar =
            crate::out::progress_bar(json, Some(1000), "{spinner} {elapsed} {msg} {wide_bar}");
        if let Some(b) = &bar {
            b.set_message("aggregating: first p");
        }
        Self { bar }
    }
}

impl Drop for AggregateProgress {
    fn drop(&mut self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl ocelotl::Observer<()> for AggregateProgress {
    fn evaluated(&self, p: f32, q: ocelotl::Quality, _: &(), evaluations: usize) {
        if let Some(b) = &self.bar {
            b.set_message(format!(
                "{evaluations} p evaluated, last p = {p} (gain {:.6e}, loss {:.6e})",
                q.gain, q.loss
            ));
        }
    }
    fn working(&self, fraction: f64) {
        if let Some(b) = &self.bar {
            b.set_position((fraction * 1000.0) as u64);
        }
    }
}

fn parse_mode(s: &str) -> std::result::Result<AggregationMode, String> {
    match s {
        "temporal" => Ok(AggregationMode::Temporal),
        "spatiotemporal" => Ok(AggregationMode::Spatiotemporal),
        _ => Err(format!(
            "unknown mode {s:?}: expected temporal or spatiotemporal"
        )),
    }
}

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  socscope timeline TRACE --width 800 --statistic density\n  \
    socscope timeline TRACE --statistic delay --group 'video=vdec,vsync:max' --sigma 4 --png tv.png\n\n\
    JSON: {\"trace\", \"start\", \"end\" (ns), \"statistic\", \"actors\": [{\"producer\", \"name\", \"values\": [W]}],\n  \
    \"groups\": [{\"name\", \"op\", \"members\", \"values\"}], \"outline\": [W], \"sigma\",\n  \
    \"smoothed\": [W] (Slick Graph, eq. 1), \"luminance\": [W] (eq. 2)}"
)]
pub struct TimelineArgs {
    #[command(flatten)]
    pub common: Common,
    /// Bins (the pixels of the view).
    #[arg(long, default_value_t = 800)]
    pub width: usize,
    /// density, activity or delay.
    #[arg(long, default_value = "density")]
    pub statistic: Statistic,
    /// Slick Graph smoothing σ, in bins.
    #[arg(long, default_value_t = 3.0)]
    pub sigma: f64,
    /// Actors aggregated per bin: NAME=MEMBER,MEMBER[:max|min|average|median] (repeatable); a
    /// member is a producer name or a `NAME #ID` label.
    #[arg(long, value_name = "GROUP")]
    pub group: Vec<String>,
    #[command(flatten)]
    pub save: SaveArgs,
}

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  socscope compare ref.db run.db\n  \
    socscope compare ref.db run.db --threshold 0.5 --json --png compare.png\n\n\
    Both traces are read from their first event over the same length. Exit status: 0 no window\n\
    departs, 3 a window's score reaches --threshold, 1 error, 2 bad arguments.\n\
    JSON: {\"reference\", \"run\", \"reference_s\", \"run_s\", \"slice_s\", \"p\", \"threshold\", \"departures\",\n  \
    \"windows\": [{\"start_s\", \"end_s\", \"slices\": [first, last], \"score\" (0..1), \"departure\",\n  \
    \"producers\"|\"types\": [{\"name\", \"reference\", \"run\", \"delta\"} (fractions of the window's time)]}]}")]
pub struct CompareArgs {
    /// The reference trace.
    pub reference: PathBuf,
    /// The run to compare with it.
    pub run: PathBuf,
    /// Slices of the common time axis.
    #[arg(long, default_value_t = 100)]
    pub slices: usize,
    /// Score (0..1) from which a window is a departure.
    #[arg(long, default_value_t = 0.25)]
    pub threshold: f64,
    /// p of the temporal aggregation that cuts the windows.
    #[arg(long, default_value_t = 0.5)]
    pub p: f64,
    /// One JSON document instead of text.
    #[arg(long)]
    pub json: bool,
    /// Draw the scores into this PNG file.
    #[arg(long, value_name = "FILE")]
    pub png: Option<PathBuf>,
    // With --save: the departing windows as annotations on RUN.
    #[command(flatten)]
    pub save: SaveArgs,
}

/// The interval of `range` (relative to the trace start), or the whole trace.
fn resolve_range(reader: &TraceReader, range: Option<RangeArg>) -> Result<TimeRange> {
    let whole = micro::trace_range(reader).context("empty trace")?;
    match range {
        Some(r) => r.within(whole),
        None => Ok(whole),
    }
}

/// A filter on type and producer names.
fn name_filter(reader: &TraceReader, types: &[String], producers: &[String]) -> Result<Filter> {
    let mut f = Filter::all();
    if !types.is_empty() {
        let all = reader.event_types()?;
        let mut ids = Vec::new();
        for n in types {
            let t = all
                .iter()
                .find(|t| &t.name == n)
                .ok_or_else(|| bad_argument!("no event type {n:?} in the trace"))?;
            ids.push(t.id);
        }
        f = f.types(ids);
    }
    if !producers.is_empty() {
        f = f.producers(producer_ids(&reader.producers()?, producers)?);
    }
    Ok(f)
}

/// Producer ids by name (every producer of that name) or by the label the outputs print for a
/// producer sharing its name (`demux #39`: that one).
fn producer_ids(all: &[socscope_tracedb::Producer], names: &[String]) -> Result<Vec<u32>> {
    let mut ids = Vec::new();
    for n in names {
        let before = ids.len();
        ids.extend(all.iter().filter(|p| &p.name == n).map(|p| p.id));
        if ids.len() == before {
            ids.extend(hierarchy::producer_by_label(all, n));
        }
        if ids.len() == before {
            return Err(bad_argument!("no producer {n:?} in the trace"));
        }
    }
    Ok(ids)
}

fn print_json(v: &serde_json::Value) -> Result<()> {
    outln!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

fn wrote(png: &Option<PathBuf>, json: bool) -> Result<()> {
    if let (Some(p), false) = (png, json) {
        outln!("wrote {}", p.display());
    }
    Ok(())
}

pub fn stats(args: StatsArgs) -> Result<ExitCode> {
    let c = &args.common;
    let reader = open_trace(&c.trace)?;
    let range = resolve_range(&reader, c.range)?;
    let filter = name_filter(&reader, &c.types, &c.producers)?;
    // Names → ids as the operator counts them.
    let ids = |names: &[String]| -> Result<Vec<u32>> {
        if args.operator.per_syscall() && !names.is_empty() {
            // Syscalls get their ids as the load meets them: no names to resolve beforehand.
            return Err(bad_argument!(
                "--exclude and --group name types or producers, not syscalls"
            ));
        }
        if args.operator.per_producer() {
            producer_ids(&reader.producers()?, names)
        } else {
            let all = reader.event_types()?;
            names
                .iter()
                .map(|n| {
                    all.iter()
                        .find(|t| &t.name == n)
                        .map(|t| t.id)
                        .ok_or_else(|| bad_argument!("no event type {n:?} in the trace"))
                })
                .collect()
        }
    };
    let mut groups = Vec::new();
    for g in &args.group {
        let (name, rest) = g.split_once('=').ok_or_else(|| {
            bad_argument!("bad group {g:?}: expected NAME=MEMBER,MEMBER[:#rrggbb]")
        })?;
        let (members, colour) = match rest.rsplit_once(':') {
            Some((m, c)) if c.starts_with('#') => (m, Some(parse_colour(c)?)),
            _ => (rest, None),
        };
        let names: Vec<String> = members.split(',').map(|s| s.trim().to_owned()).collect();
        groups.push(Group {
            name: name.to_owned(),
            colour,
            members: ids(&names)?,
        });
    }
    if !(0.0..=1.0).contains(&args.threshold) {
        return Err(bad_argument!("--threshold must be between 0 and 1"));
    }
    if args.save.save && groups.is_empty() {
        return Err(bad_argument!(
            "--save keeps the pie's groups: give at least one --group"
        ));
    }
    let config = StatisticsConfig {
        operator: args.operator,
        range,
        exclude: ids(&args.exclude)?,
        groups,
        threshold: args.threshold,
    };
    let consumer = StatsConsumer::new(range);
    let request = consumer.request(&c.trace, &config.operator.filter(&filter));
    let (snapshot, progress) = loader::spawn(request, consumer).wait();
    if let Some(e) = progress.error {
        bail!("loading failed: {e}");
    }
    let raw = snapshot.ok_or_else(|| anyhow!("the loader published no result"))?;
    let settings = config.settings();
    let grouping = if args.save.save {
        Some(saved::pie_grouping(args.operator, &settings.groups).ok_or_else(|| {
            bad_argument!("--save: syscall slices are names, not producers or types of the trace; nothing to keep")
        })?)
    } else {
        None
    };
    let mut snap = statistics::present(&settings, &raw);
    // Types and producers in the colours the user picked in the GUI (the palette's otherwise).
    for sl in &mut snap.slices {
        let group = args
            .group
            .iter()
            .any(|g| g.split('=').next() == Some(&sl.colour_key));
        if sl.colour_key != "others" && !group {
            sl.colour = if args.operator.per_producer() {
                render::user().producer_colour(&sl.colour_key)
            } else {
                render::user().type_colour(&sl.colour_key)
            };
        }
    }
    let cpu = socscope_analysis::cpu::cpu_utilisation(&reader, range)?;
    let before_tracks = socscope_tracedb::recorded_before_cpu_tracks(&reader.event_types()?);
    if let Some(png) = &c.png {
        render::stats(png, &snap).with_context(|| format!("cannot draw {}", png.display()))?;
    }
    let saved_id = match grouping {
        Some(data) => {
            let names: Vec<&str> = settings.groups.iter().map(|g| g.name.as_str()).collect();
            args.save.save(
                &c.trace,
                "stats",
                format!(
                    "pie groups ({}): {}",
                    serde_json::to_value(args.operator)?
                        .as_str()
                        .unwrap_or_default(),
                    names.join(", ")
                ),
                data,
            )?
        }
        None => None,
    };
    if c.json {
        print_json(&json!({
            "trace": c.trace,
            "saved": saved_id,
            "range_ns": [range.start, range.end],
            "operator": snap.operator,
            "unit": snap.unit,
            "total": snap.total,
            "slices": snap.slices,
            "cpu_utilisation": cpu,
            "first_result_ms": progress.first_result_ms,
            "chunks": progress.chunks,
            "events": progress.events,
        }))?;
    } else {
        let unit = snap.unit;
        outln!(
            "{} over {} ({} chunks, first result after {:.1} ms)",
            snap.operator.label(),
            units::duration(range.len()),
            progress.chunks,
            progress.first_result_ms.unwrap_or(0.0)
        );
        for s in &snap.slices {
            let share = if snap.total > 0.0 {
                100.0 * s.value / snap.total
            } else {
                0.0
            };
            let v = if unit == "ns" {
                units::duration(s.value as i64)
            } else {
                units::count(s.value)
            };
            outln!(
                "  {:<32} {:>12}  {share:5.1} %",
                crate::out::one_line(&s.label),
                v
            );
        }
        let trace_arg = c.trace.display().to_string();
        print_cpu_utilisation(&cpu, before_tracks.then_some(trace_arg.as_str()))?;
        wrote(&c.png, false)?;
        said_saved(saved_id.as_slice(), "grouping", &c.trace)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The CPU section of `stats`: each CPU's busy share, then the threads that used the most CPU.
/// `recorded_before_tracks`: the trace argument of a trace whose context switches were recorded
/// before the CPU tracks existed (what to upgrade).
fn print_cpu_utilisation(
    cpu: &socscope_analysis::cpu::CpuUtilisation,
    recorded_before_tracks: Option<&str>,
) -> Result<()> {
    if cpu.cpus.iter().all(|c| c.busy_ns + c.idle_ns == 0) {
        match recorded_before_tracks {
            Some(trace) => outln!(
                "CPU utilisation: no CPU tracks in this trace (recorded before them; \
                 `socscope upgrade {trace}` derives them from its context switches)"
            ),
            None => outln!("CPU utilisation: no CPU tracks in this trace (no context switches)"),
        }
        return Ok(());
    }
    outln!("CPU utilisation over {}", units::duration(cpu.interval_ns));
    for c in &cpu.cpus {
        outln!(
            "  {:<32} {:>12}  {:5.1} % busy",
            c.cpu,
            units::duration(c.busy_ns),
            c.busy_percent
        );
    }
    const TOP: usize = 10;
    outln!(
        "Threads by CPU time (top {} of {})",
        TOP.min(cpu.threads.len()),
        cpu.threads.len()
    );
    for t in cpu.threads.iter().take(TOP) {
        let label = match &t.process {
            Some(p) => format!("{} ({p})", t.thread),
            None => t.thread.clone(),
        };
        outln!(
            "  {:<32} {:>12}  {:5.1} % of a CPU",
            label,
            units::duration(t.cpu_ns),
            t.percent
        );
    }
    Ok(())
}

fn parse_colour(s: &str) -> Result<[u8; 3]> {
    let h = s.trim_start_matches('#');
    if h.len() != 6 {
        return Err(bad_argument!("bad colour {s:?}: expected #rrggbb"));
    }
    let b = |i: usize| {
        u8::from_str_radix(&h[i..i + 2], 16).map_err(|_| bad_argument!("bad colour {s:?}"))
    };
    Ok([b(0)?, b(2)?, b(4)?])
}

pub fn density(args: DensityArgs) -> Result<ExitCode> {
    let c = &args.common;
    if args.bins == 0 || args.bins > 100_000 {
        return Err(bad_argument!("--bins must be between 1 and 100000"));
    }
    let reader = open_trace(&c.trace)?;
    let range = resolve_range(&reader, c.range)?;
    // `--range` counts from the trace's start, and so do the bins' labels.
    let origin = resolve_range(&reader, None)?.start;
    let filter = name_filter(&reader, &c.types, &c.producers)?;
    let d = density::density(&reader, range, args.bins, &filter)?;
    if let Some(png) = &c.png {
        render::density(png, &d, origin)
            .with_context(|| format!("cannot draw {}", png.display()))?;
    }
    if c.json {
        let mut v = serde_json::to_value(&d)?;
        v["trace"] = json!(c.trace);
        if let Some(o) = v.as_object_mut() {
            o.remove("loaded_until");
        }
        print_json(&v)?;
    } else {
        let bin = range.len() / args.bins as i64;
        outln!(
            "{} events in {} bins of {} (max {} per bin)",
            d.total,
            args.bins,
            units::duration(bin),
            d.max
        );
        let w = 50.0;
        for b in &d.bins {
            let bar = if d.max > 0 {
                (w * b.count as f64 / d.max as f64).round() as usize
            } else {
                0
            };
            outln!(
                "  {:>12}  {:>9}  {}",
                units::duration(b.start - origin),
                b.count,
                "#".repeat(bar)
            );
        }
        wrote(&c.png, false)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `--algorithm` of `socscope aggregate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AlgorithmArg {
    Auto,
    Exact,
    Scalable,
}

impl From<AlgorithmArg> for ocelotl::AlgorithmChoice {
    fn from(a: AlgorithmArg) -> Self {
        match a {
            AlgorithmArg::Auto => ocelotl::AlgorithmChoice::Auto,
            AlgorithmArg::Exact => ocelotl::AlgorithmChoice::Exact,
            AlgorithmArg::Scalable => ocelotl::AlgorithmChoice::Scalable,
        }
    }
}

pub fn aggregate(args: AggregateArgs) -> Result<ExitCode> {
    if let Some(model) = &args.model {
        if args.png.is_some() {
            return Err(bad_argument!(
                "--png needs a trace (a model file has no time axis)"
            ));
        }
        if args.save.save {
            return Err(bad_argument!(
                "--save keeps results in a trace file: give a TRACE, not --model"
            ));
        }
        crate::input::require_file(model)?;
        let progress = AggregateProgress::new(args.json);
        let report = ocelotl::run_model_file_with(
            model,
            &RunOptions {
                mode: args.mode,
                normalize: args.normalize,
                ps: args.p.clone(),
                threshold: args.threshold,
            },
            &ocelotl::RunControl {
                memory_budget: args.memory_budget,
                observer: &progress,
                algorithm: args.algorithm.into(),
            },
        )?;
        drop(progress);
        if args.json {
            print_json(&serde_json::to_value(&report)?)?;
        } else {
            print_report_text(&report, true)?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let trace = args
        .trace
        .as_ref()
        .ok_or_else(|| bad_argument!("give a TRACE or --model FILE.json"))?;
    if args.slices == 0 || args.slices > 10_000 {
        return Err(bad_argument!("--slices must be between 1 and 10000"));
    }
    if args.p.iter().any(|p| !(0.0..=1.0).contains(p)) {
        return Err(bad_argument!("--p must be between 0 and 1"));
    }
    let reader = open_trace(trace)?;
    let range = resolve_range(&reader, args.range)?;
    let filter = name_filter(&reader, &args.types, &args.producers)?;
    let grid = SliceGrid::new(range, args.slices).ok_or_else(|| anyhow!("empty range"))?;
    let m = micro::build(&reader, grid, args.metric, &filter)?;
    if m.is_empty() {
        bail!(
            "nothing to aggregate: no {} value in this interval",
            args.metric
        );
    }
    let model = m.to_model()?;
    let file = ModelFile {
        model: model.clone(),
        threshold: args.threshold.unwrap_or(ocelotl::DEFAULT_THRESHOLD),
        p_values: args.p.clone(),
    };
    let progress = AggregateProgress::new(args.json);
    let report = ocelotl::run_model_with(
        &file,
        &RunOptions {
            mode: args.mode,
            normalize: args.normalize,
            ps: args.p.clone(),
            threshold: args.threshold,
        },
        &ocelotl::RunControl {
            memory_budget: args.memory_budget,
            observer: &progress,
            algorithm: args.algorithm.into(),
        },
    )?;
    drop(progress);
    let (_, nodes) = m.hierarchy();
    if let Some(png) = &args.png {
        let p = args.p.first().copied().unwrap_or(report.ocelotl_default_p);
        match args.mode {
            AggregationMode::Temporal => {
                let agg = TemporalAggregation::new(&model, args.normalize);
                render::temporal(png, &m, &model, &agg, p)
            }
            AggregationMode::Spatiotemporal => render::spatiotemporal(
                png,
                &m,
                &hierarchy::producer_labels(&reader.producers()?),
                &model,
                p,
            ),
        }
        .with_context(|| format!("cannot draw {}", png.display()))?;
    }
    let mut saved_ids = Vec::new();
    let mut processed_files: Vec<PathBuf> = Vec::new();
    if args.save.save {
        let ps = if args.p.is_empty() {
            vec![report.ocelotl_default_p]
        } else {
            args.p.clone()
        };
        for p in ps {
            let (what, part) = match args.mode {
                AggregationMode::Temporal => {
                    let agg = TemporalAggregation::new(&model, args.normalize);
                    ("temporal", Partition::Temporal(agg.best_partition(p)))
                }
                AggregationMode::Spatiotemporal => {
                    let (h, _) = m.hierarchy();
                    let part = SpatiotemporalAggregation::new(&model, &h).best_partition(p);
                    ("spatiotemporal", Partition::Spatiotemporal(part))
                }
            };
            let bands = saved::partition_bands(&m, &part);
            let default = format!(
                "Ocelotl {what} partition at p={p}: {} ({} metric, {} slices of {})",
                plural(
                    bands.len(),
                    if what == "temporal" { "part" } else { "area" }
                ),
                args.metric,
                args.slices,
                units::duration(grid.slice_ns() as i64)
            );
            if args.processed_trace {
                let description = args.save.description.clone().unwrap_or(default);
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
                let (file, id) = processed::save_partition_trace(
                    trace,
                    &m,
                    &part,
                    &saved::tool_name("aggregate"),
                    now,
                    &description,
                )
                .with_context(|| {
                    format!("while saving a processed trace of {}", trace.display())
                })?;
                saved_ids.push(id);
                processed_files.push(file);
            } else {
                let data = saved::interval_annotations(&format!("ocelotl {what} part"), &bands);
                saved_ids.extend(args.save.save(trace, "aggregate", default, data)?);
            }
        }
    }
    if args.json {
        print_json(&json!({
            "trace": trace,
            "saved": saved_ids,
            "processed_traces": processed_files,
            "range_ns": [range.start, range.end],
            "slices": args.slices,
            "slice_ns": grid.slice_ns(),
            "metric": args.metric,
            "types": m.types.iter().map(|t| &t.name).collect::<Vec<_>>(),
            "producers": m.producers.iter().map(|p| &p.name).collect::<Vec<_>>(),
            "nodes": nodes,
            "report": report,
        }))?;
    } else {
        outln!(
            "{} model: {} slices of {} × {} producers × {} types",
            args.metric,
            args.slices,
            units::duration(grid.slice_ns() as i64),
            m.producers.len(),
            m.types.len()
        );
        print_report_text(&report, args.plist || args.p.is_empty())?;
        wrote(&args.png, false)?;
        if args.processed_trace {
            for (id, file) in saved_ids.iter().zip(&processed_files) {
                outln!(
                    "saved result {id} (processed_trace) in {}: {}",
                    trace.display(),
                    file.display()
                );
            }
        } else {
            said_saved(&saved_ids, "annotation", trace)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Parts listed in full by the text report; beyond, the first and last ones (`--json` lists all).
const PARTS_SHOWN: usize = 12;

/// A partition's parts (`[first, last]` slice ranges) as text: all of them when they are few, else
/// the first and last few and how many in all.
fn parts_text(ranges: &[serde_json::Value]) -> String {
    let part = |x: &serde_json::Value| format!("{}-{}", x[0], x[1]);
    let n = ranges.len();
    if n <= PARTS_SHOWN {
        let parts: Vec<String> = ranges.iter().map(part).collect();
        let noun = if n == 1 { "part" } else { "parts" };
        return format!("{n} {noun}: {}", parts.join(" "));
    }
    let head: Vec<String> = ranges[..PARTS_SHOWN - 2].iter().map(part).collect();
    let tail: Vec<String> = ranges[n - 2..].iter().map(part).collect();
    format!(
        "{n} parts: {} ... {} ({} more; --json lists every part)",
        head.join(" "),
        tail.join(" "),
        n - PARTS_SHOWN
    )
}

fn print_report_text(report: &ocelotl::AggregationReport, plist: bool) -> Result<()> {
    let describe = |e: &serde_json::Value| -> String {
        if let Some(r) = e.get("ranges").and_then(|r| r.as_array()) {
            parts_text(r)
        } else if let Some(a) = e.get("aggregates").and_then(|r| r.as_array()) {
            format!("{} areas", a.len())
        } else {
            String::new()
        }
    };
    let e = &report.engine;
    outln!(
        "engine: {} algorithm, qualities {}, {} p evaluated, estimated peak {} MiB of a {} MiB budget",
        e.algorithm,
        e.qualities,
        e.evaluations,
        e.memory_estimate_bytes.div_ceil(1 << 20),
        e.memory_budget_bytes.div_ceil(1 << 20)
    );
    if plist {
        outln!(
            "significant p ({}; Ocelotl's default p = {}):",
            report.dichotomy.len(),
            report.ocelotl_default_p
        );
        for e in &report.dichotomy {
            let v = serde_json::to_value(e).unwrap_or_default();
            outln!(
                "  p={:<10} gain={:<12.6} loss={:<12.6} {}",
                v["p"],
                v["gain"].as_f64().unwrap_or(0.0),
                v["loss"].as_f64().unwrap_or(0.0),
                describe(&v)
            );
        }
    }
    for e in &report.at_p {
        let v = serde_json::to_value(e).unwrap_or_default();
        outln!(
            "at p={}: gain={:.6} loss={:.6} {}",
            v["p"],
            v["gain"].as_f64().unwrap_or(0.0),
            v["loss"].as_f64().unwrap_or(0.0),
            describe(&v)
        );
    }
    Ok(())
}

pub fn timeline(args: TimelineArgs) -> Result<ExitCode> {
    let c = &args.common;
    if args.width == 0 || args.width > 100_000 {
        return Err(bad_argument!("--width must be between 1 and 100000"));
    }
    if !(args.sigma >= 0.0 && args.sigma.is_finite()) {
        return Err(bad_argument!("--sigma must be a non-negative number"));
    }
    let reader = open_trace(&c.trace)?;
    let range = resolve_range(&reader, c.range)?;
    let filter = name_filter(&reader, &c.types, &c.producers)?;
    let t = traceviz::timeline(&reader, range, args.width, args.statistic, &filter)?;
    let mut groups = Vec::new();
    let mut actor_groups = Vec::new();
    let producers = reader.producers()?;
    let labels = hierarchy::producer_labels(&producers);
    for g in &args.group {
        let (name, rest) = g
            .split_once('=')
            .ok_or_else(|| bad_argument!("bad group {g:?}: expected NAME=MEMBER,MEMBER[:op]"))?;
        let (members, op) = match rest.rsplit_once(':') {
            Some((m, op)) => (m, op.parse::<GroupOp>().map_err(|e| bad_argument!("{e}"))?),
            None => (rest, GroupOp::Max),
        };
        let names: Vec<String> = members.split(',').map(|m| m.trim().to_owned()).collect();
        // A member is a name (every producer of it) or a label `NAME #ID` (that one producer).
        let ids = producer_ids(&producers, &names)?;
        actor_groups.push((name.to_owned(), op, ids.clone()));
        let hists: Vec<&[f64]> = t
            .actors
            .iter()
            .filter(|a| ids.contains(&a.producer))
            .map(|a| a.values.as_slice())
            .collect();
        let values = if hists.is_empty() {
            vec![0.0; args.width]
        } else {
            traceviz::group(&hists, op)
        };
        groups.push(json!({"name": name, "op": op, "members": names, "values": values}));
    }
    if args.save.save && actor_groups.is_empty() {
        return Err(bad_argument!(
            "--save keeps the actor groups: give at least one --group"
        ));
    }
    let smoothed = traceviz::slick(&t.outline, args.sigma);
    let lum = traceviz::luminance(&t.outline, &smoothed);
    if let Some(png) = &c.png {
        render::timeline(png, &t, &labels, &groups, &smoothed, &lum)
            .with_context(|| format!("cannot draw {}", png.display()))?;
    }
    let description = format!(
        "TraceViz actor groups: {}",
        actor_groups
            .iter()
            .map(|(n, _, _)| n.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let saved_id = args.save.save(
        &c.trace,
        "timeline",
        description,
        saved::actor_grouping(&actor_groups),
    )?;
    if c.json {
        let mut v = serde_json::to_value(&t)?;
        v["trace"] = json!(c.trace);
        v["saved"] = json!(saved_id);
        v["groups"] = json!(groups);
        v["sigma"] = json!(args.sigma);
        v["smoothed"] = json!(smoothed);
        v["luminance"] = json!(lum);
        print_json(&v)?;
    } else {
        outln!(
            "{:?} of {} actors over {} in {} bins of {}",
            t.statistic,
            t.actors.len(),
            units::duration(range.len()),
            args.width,
            units::duration_compact(range.len() as f64 / args.width as f64)
        );
        // The groups first (as in the PNG), each named with its operator and members, then the
        // actors, largest first; every value with its unit.
        let mut rows: Vec<(String, [f64; 2])> = groups
            .iter()
            .map(|g| {
                let values: Vec<f64> = g["values"]
                    .as_array()
                    .map(|a| a.iter().filter_map(serde_json::Value::as_f64).collect())
                    .unwrap_or_default();
                let members: Vec<&str> = g["members"]
                    .as_array()
                    .map(|a| a.iter().filter_map(serde_json::Value::as_str).collect())
                    .unwrap_or_default();
                (
                    format!(
                        "{} = {}({})",
                        g["name"].as_str().unwrap_or_default(),
                        g["op"].as_str().unwrap_or_default(),
                        members.join(", ")
                    ),
                    timeline_columns(t.statistic, &values),
                )
            })
            .collect();
        let mut actors: Vec<(String, [f64; 2])> = t
            .actors
            .iter()
            .map(|a| {
                (
                    labels
                        .get(&a.producer)
                        .cloned()
                        .unwrap_or_else(|| a.name.clone()),
                    timeline_columns(t.statistic, &a.values),
                )
            })
            .collect();
        actors.sort_by(|a, b| b.1[0].total_cmp(&a.1[0]).then_with(|| a.0.cmp(&b.0)));
        let n_groups = rows.len();
        rows.extend(actors);
        let headers = timeline_headers(t.statistic);
        let width = rows
            .iter()
            .map(|r| crate::out::one_line(&r.0).chars().count())
            .chain([5])
            .max()
            .unwrap_or(5);
        outln!(
            "  {:<width$}  {:>16}  {:>16}",
            if n_groups > 0 {
                "group / actor"
            } else {
                "actor"
            },
            headers[0],
            headers[1]
        );
        for (n, v) in &rows {
            outln!(
                "  {:<width$}  {:>16}  {:>16}",
                crate::out::one_line(n),
                timeline_value(t.statistic, v[0]),
                timeline_value(t.statistic, v[1])
            );
        }
        wrote(&c.png, false)?;
        said_saved(saved_id.as_slice(), "grouping", &c.trace)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The two columns of `timeline`'s text for a statistic: what the row adds up to and its largest
/// bin (events, or time in states); for delays, which do not add up, the longest delay and the
/// median of the bins that have one.
fn timeline_headers(s: Statistic) -> [&'static str; 2] {
    match s {
        Statistic::Density => ["events", "most in a bin"],
        Statistic::Activity => ["time in states", "most in a bin"],
        Statistic::Delay => ["longest delay", "median bin"],
    }
}

fn timeline_columns(s: Statistic, values: &[f64]) -> [f64; 2] {
    let max = values.iter().copied().fold(0.0, f64::max);
    match s {
        Statistic::Density | Statistic::Activity => [values.iter().sum(), max],
        Statistic::Delay => {
            let mut some: Vec<f64> = values.iter().copied().filter(|v| *v > 0.0).collect();
            some.sort_by(f64::total_cmp);
            [max, some.get(some.len() / 2).copied().unwrap_or(0.0)]
        }
    }
}

/// A `timeline` value with its unit: `1.23 M events`, `29.950 s`.
fn timeline_value(s: Statistic, v: f64) -> String {
    match s {
        Statistic::Density => format!("{} events", units::count(v)),
        Statistic::Activity | Statistic::Delay => units::duration(v.round() as i64),
    }
}

pub fn compare(args: CompareArgs) -> Result<ExitCode> {
    if args.slices == 0 || args.slices > 10_000 {
        return Err(bad_argument!("--slices must be between 1 and 10000"));
    }
    if !(0.0..=1.0).contains(&args.p) {
        return Err(bad_argument!("--p must be between 0 and 1"));
    }
    let reference = open_trace(&args.reference)?;
    let run = open_trace(&args.run)?;
    let c = compare::compare(
        &reference,
        &run,
        &CompareOptions {
            slices: args.slices,
            threshold: args.threshold,
            p: args.p,
            ..CompareOptions::default()
        },
    )?;
    if let Some(png) = &args.png {
        render::compare(png, &c).with_context(|| format!("cannot draw {}", png.display()))?;
    }
    let saved_id = if args.save.save {
        let run_start = micro::trace_range(&run)?.start;
        let producers = run.producers()?;
        let bands = saved::departure_bands(&c, run_start, |name| {
            producers
                .iter()
                .filter(|p| p.name == name)
                .map(|p| p.id)
                .collect()
        });
        let description = format!(
            "{} departing from {} (threshold {}, p {})",
            plural(bands.len(), "window"),
            args.reference.display(),
            args.threshold,
            args.p
        );
        let data = saved::interval_annotations("departure", &bands);
        drop(run);
        args.save.save(&args.run, "compare", description, data)?
    } else {
        None
    };
    if args.json {
        let mut v = serde_json::to_value(&c)?;
        v["saved"] = json!(saved_id);
        v["reference"] = json!(args.reference);
        v["run"] = json!(args.run);
        print_json(&v)?;
    } else {
        outln!(
            "{} windows, {} departing (threshold {}):",
            c.windows.len(),
            c.departures,
            c.threshold
        );
        for w in &c.windows {
            let who: Vec<String> = w
                .producers
                .iter()
                .take(3)
                .map(|d| format!("{} {:+.2}", crate::out::one_line(&d.name), d.delta))
                .collect();
            outln!(
                "  {} {:>8.3}..{:<8.3} s  score {:.3}  {}",
                if w.departure { "!" } else { " " },
                w.start_s,
                w.end_s,
                w.score,
                who.join(", ")
            );
        }
        wrote(&args.png, false)?;
        said_saved(saved_id.as_slice(), "annotation", &args.run)?;
    }
    Ok(if c.departures > 0 {
        ExitCode::from(DEPARTURE_EXIT)
    } else {
        ExitCode::SUCCESS
    })
}

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  socscope gantt TRACE --png gantt.png\n  \
    socscope gantt TRACE --range 4..6 --width 1600 --png zap.png\n\n\
    The chart as the GUI's Gantt draws it: the CPU section first (one row per CPU: the thread\n\
    that ran, in its process's colour, the idle task dimmed; the IRQs and soft IRQs it served on\n\
    rows below it), then the producers. Rows without an event in the interval are left out\n\
    unless --all-rows.")]
pub struct GanttArgs {
    /// The trace file (.db).
    pub trace: PathBuf,
    /// The PNG file to draw.
    #[arg(long, value_name = "FILE")]
    pub png: PathBuf,
    /// Only this interval, relative to the trace start (e.g. 1.5..3, 200ms..).
    #[arg(long, value_name = "A..B")]
    pub range: Option<RangeArg>,
    /// Width of the picture in pixels.
    #[arg(long, default_value_t = 1400)]
    pub width: u32,
    /// At most this many rows (the CPU section first).
    #[arg(long, default_value_t = 80)]
    pub rows: usize,
    /// Also the rows that have no event in the interval.
    #[arg(long)]
    pub all_rows: bool,
}

pub fn gantt(args: GanttArgs) -> Result<ExitCode> {
    use socscope_analysis::gantt::{CpuTracks, GanttConsumer, GanttModel, GanttRow};
    use socscope_analysis::loader::Consumer;
    if !(400..=20_000).contains(&args.width) {
        return Err(bad_argument!("--width must be between 400 and 20000"));
    }
    if args.rows == 0 {
        return Err(bad_argument!("--rows must be at least 1"));
    }
    let reader = open_trace(&args.trace)?;
    let range = resolve_range(&reader, args.range)?;
    let origin = micro::trace_range(&reader).context("empty trace")?.start;
    let producers = reader.producers()?;
    let types = reader.event_types()?;
    let tracks = CpuTracks::new(&producers, &types);
    let mut model = GanttModel::new();
    model.set_cpu_tracks(tracks.clone());
    let mut consumer = GanttConsumer::new();
    let mut batch = Vec::with_capacity(4096);
    for e in reader.events_overlapping(range, &Filter::all())? {
        batch.push(e?);
        if batch.len() == 4096 {
            consumer.consume(&batch);
            batch.clear();
        }
    }
    consumer.consume(&batch);
    model.absorb(&consumer.snapshot());
    // Rows in the GUI's order: the producer tree depth first (the CPUs first), each producer's row
    // followed by its lanes (a CPU's IRQ and soft IRQ lanes).
    let tree = hierarchy::ProducerTree::new(&producers);
    let with_events = model.producers_with_events();
    let labels = hierarchy::producer_labels(&producers);
    let mut rows = Vec::new();
    let mut lines = Vec::new();
    for node in tree.nodes() {
        if !args.all_rows && !with_events.contains(&node.id) {
            continue;
        }
        let cpu = tracks.is_track(node.id);
        let name = labels.get(&node.id).cloned().unwrap_or_default();
        rows.push(GanttRow::producer(node.id));
        lines.push(render::GanttLine {
            label: format!("{}{name}", "  ".repeat(node.depth)),
            cpu,
        });
        for lane in model.lanes(node.id) {
            rows.push(GanttRow::lane(node.id, lane));
            lines.push(render::GanttLine {
                label: format!(
                    "{}  {}",
                    "  ".repeat(node.depth),
                    socscope_analysis::gantt::Lanes::default().name(lane)
                ),
                cpu,
            });
        }
    }
    let hidden = rows.len().saturating_sub(args.rows);
    rows.truncate(args.rows);
    lines.truncate(args.rows);
    let plot_w = render::gantt_plot_width(args.width);
    let frame = model.frame(&rows, range, plot_w);
    let cpu_rows = lines.iter().filter(|l| l.cpu).count();
    render::gantt(
        &args.png,
        &render::GanttPicture {
            trace: &args.trace.display().to_string(),
            width: args.width,
            frame: &frame,
            lines: &lines,
            hidden_rows: hidden,
            producers: &producers,
            types: &types,
            from_start_ns: range.start - origin,
        },
    )
    .with_context(|| format!("cannot draw {}", args.png.display()))?;
    outln!(
        "Gantt of {} over {}: {} rows ({} in the CPU section){}",
        args.trace.display(),
        units::duration(range.len()),
        rows.len(),
        cpu_rows,
        if hidden > 0 {
            format!(", {hidden} more left out (--rows)")
        } else {
            String::new()
        }
    );
    wrote(&Some(args.png.clone()), false)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_sizes_parse_with_binary_units() {
        assert_eq!(parse_size("1GiB").unwrap(), 1 << 30);
        assert_eq!(parse_size("512MiB").unwrap(), 512 << 20);
        assert_eq!(parse_size("1.5G").unwrap(), 3 << 29);
        assert_eq!(parse_size("2000").unwrap(), 2000);
        assert!(
            parse_size("12parsecs")
                .unwrap_err()
                .contains("unknown unit")
        );
        assert!(parse_size("GiB").is_err());
        assert!(parse_size("0").is_err());
    }

    #[test]
    fn colours_parse() {
        assert_eq!(parse_colour("#01ff10").unwrap(), [1, 255, 16]);
        assert!(parse_colour("#01ff1").is_err());
    }

    #[test]
    fn long_partitions_print_their_ends_and_how_many_parts() {
        let ranges = |n: usize| -> Vec<serde_json::Value> {
            (0..n).map(|i| json!([2 * i, 2 * i + 1])).collect()
        };
        assert_eq!(parts_text(&ranges(1)), "1 part: 0-1");
        assert_eq!(parts_text(&ranges(2)), "2 parts: 0-1 2-3");
        let all = parts_text(&ranges(PARTS_SHOWN));
        assert!(
            all.ends_with("20-21 22-23") && !all.contains("..."),
            "{all}"
        );
        let long = parts_text(&ranges(1000));
        assert_eq!(
            long,
            "1000 parts: 0-1 2-3 4-5 6-7 8-9 10-11 12-13 14-15 16-17 18-19 ... \
             1996-1997 1998-1999 (988 more; --json lists every part)"
        );
    }
}
