//! The analysis commands: `stats`, `density`, `aggregate`, `timeline` and `compare`, each a
//! thin shell over a view model of `socscope-analysis`, printing text or `--json` and drawing
//! `--png` pictures for reports.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow, bail};
use serde_json::json;
use socscope_analysis::compare::{self, CompareOptions};
use socscope_analysis::density;
use socscope_analysis::loader;
use socscope_analysis::micro::{self, Metric, SliceGrid};
use socscope_analysis::ocelotl::{
    self, AggregationMode, ModelFile, RunOptions, TemporalAggregation,
};
use socscope_analysis::stats::{
    self as statistics, Group, Operator, StatisticsConfig, StatsConsumer,
};
use socscope_analysis::traceviz::{self, GroupOp, Statistic};
use socscope_tracedb::{Filter, TimeRange, TraceReader};

use crate::format;
use crate::render;

/// Exit code of `compare` when a window departs from the reference past the threshold.
pub const DEPARTURE_EXIT: u8 = 3;

/// Options shared by the commands that read one trace.
#[derive(clap::Args, Debug)]
pub struct Common {
    /// The trace file (.db).
    pub trace: PathBuf,
    /// Only this interval, relative to the trace start (e.g. 1.5..3, 200ms..).
    #[arg(long, value_name = "A..B")]
    pub range: Option<String>,
    /// Only these event types (comma-separated names).
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub types: Vec<String>,
    /// Only these producers (comma-separated names).
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
    /// count-per-producer, count-per-type, state-duration-per-type or link-duration-per-type.
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
    socscope aggregate --model vectors/x.input.json --mode temporal --normalize --p 0.5 --json\n\n\
    JSON (trace): {\"trace\", \"range_ns\", \"slices\", \"slice_ns\", \"metric\", \"types\": [names],\n  \
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
    pub range: Option<String>,
    /// Only these event types (comma-separated names).
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub types: Vec<String>,
    /// Only these producers (comma-separated names).
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
    /// One JSON document instead of text.
    #[arg(long)]
    pub json: bool,
    /// Draw the partition (first --p, else Ocelotl's default p) into this PNG file.
    #[arg(long, value_name = "FILE")]
    pub png: Option<PathBuf>,
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
    /// Actors aggregated per bin: NAME=MEMBER,MEMBER[:max|min|average|median] (repeatable).
    #[arg(long, value_name = "GROUP")]
    pub group: Vec<String>,
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
}

/// `1.5`, `200ms`, `3s`, `12us`, `40ns` as nanoseconds.
fn parse_time(s: &str) -> Result<i64> {
    let s = s.trim();
    let (num, scale) = if let Some(n) = s.strip_suffix("ns") {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix("us") {
        (n, 1e3)
    } else if let Some(n) = s.strip_suffix("ms") {
        (n, 1e6)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1e9)
    } else {
        (s, 1e9)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| anyhow!("bad time {s:?} in the range"))?;
    if !v.is_finite() || v < 0.0 {
        bail!("bad time {s:?} in the range");
    }
    Ok((v * scale).round() as i64)
}

/// The interval of `spec` (relative to the trace start), or the whole trace.
fn resolve_range(reader: &TraceReader, spec: Option<&str>) -> Result<TimeRange> {
    let whole = micro::trace_range(reader).context("empty trace")?;
    let Some(spec) = spec else { return Ok(whole) };
    let (a, b) = spec
        .split_once("..")
        .ok_or_else(|| anyhow!("bad range {spec:?}: expected START..END"))?;
    let start = if a.trim().is_empty() {
        whole.start
    } else {
        whole.start + parse_time(a)?
    };
    let end = if b.trim().is_empty() {
        whole.end
    } else {
        whole.start + parse_time(b)?
    };
    if end <= start {
        bail!("empty range {spec:?}");
    }
    Ok(TimeRange::new(start, end))
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
                .ok_or_else(|| anyhow!("no event type {n:?} in the trace"))?;
            ids.push(t.id);
        }
        f = f.types(ids);
    }
    if !producers.is_empty() {
        f = f.producers(producer_ids(reader, producers)?);
    }
    Ok(f)
}

/// Producer ids by name (every producer of that name).
fn producer_ids(reader: &TraceReader, names: &[String]) -> Result<Vec<u32>> {
    let all = reader.producers()?;
    let mut ids = Vec::new();
    for n in names {
        let before = ids.len();
        ids.extend(all.iter().filter(|p| &p.name == n).map(|p| p.id));
        if ids.len() == before {
            bail!("no producer {n:?} in the trace");
        }
    }
    Ok(ids)
}

fn open(trace: &Path) -> Result<TraceReader> {
    TraceReader::open(trace).with_context(|| format!("cannot open {}", trace.display()))
}

fn print_json(v: &serde_json::Value) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

fn wrote(png: &Option<PathBuf>, json: bool) {
    if let (Some(p), false) = (png, json) {
        println!("wrote {}", p.display());
    }
}

pub fn stats(args: StatsArgs) -> Result<ExitCode> {
    let c = &args.common;
    let reader = open(&c.trace)?;
    let range = resolve_range(&reader, c.range.as_deref())?;
    let filter = name_filter(&reader, &c.types, &c.producers)?;
    // Names → ids as the operator counts them.
    let ids = |names: &[String]| -> Result<Vec<u32>> {
        if args.operator.per_producer() {
            producer_ids(&reader, names)
        } else {
            let all = reader.event_types()?;
            names
                .iter()
                .map(|n| {
                    all.iter()
                        .find(|t| &t.name == n)
                        .map(|t| t.id)
                        .ok_or_else(|| anyhow!("no event type {n:?} in the trace"))
                })
                .collect()
        }
    };
    let mut groups = Vec::new();
    for g in &args.group {
        let (name, rest) = g
            .split_once('=')
            .ok_or_else(|| anyhow!("bad group {g:?}: expected NAME=MEMBER,MEMBER[:#rrggbb]"))?;
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
        bail!("--threshold must be between 0 and 1");
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
    let snap = statistics::present(&config.settings(), &raw);
    if let Some(png) = &c.png {
        render::stats(png, &snap).with_context(|| format!("cannot draw {}", png.display()))?;
    }
    if c.json {
        print_json(&json!({
            "trace": c.trace,
            "range_ns": [range.start, range.end],
            "operator": snap.operator,
            "unit": snap.unit,
            "total": snap.total,
            "slices": snap.slices,
            "first_result_ms": progress.first_result_ms,
            "chunks": progress.chunks,
            "events": progress.events,
        }))?;
    } else {
        let unit = snap.unit;
        println!(
            "{:?} over {} ({} chunks, first result after {:.1} ms)",
            snap.operator,
            format::duration_ns(range.len()),
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
                format::duration_ns(s.value as i64)
            } else {
                format::si(s.value)
            };
            println!("  {:<32} {:>12}  {share:5.1} %", s.label, v);
        }
        wrote(&c.png, false);
    }
    Ok(ExitCode::SUCCESS)
}

fn parse_colour(s: &str) -> Result<[u8; 3]> {
    let h = s.trim_start_matches('#');
    if h.len() != 6 {
        bail!("bad colour {s:?}: expected #rrggbb");
    }
    let b =
        |i: usize| u8::from_str_radix(&h[i..i + 2], 16).map_err(|_| anyhow!("bad colour {s:?}"));
    Ok([b(0)?, b(2)?, b(4)?])
}

pub fn density(args: DensityArgs) -> Result<ExitCode> {
    let c = &args.common;
    if args.bins == 0 || args.bins > 100_000 {
        bail!("--bins must be between 1 and 100000");
    }
    let reader = open(&c.trace)?;
    let range = resolve_range(&reader, c.range.as_deref())?;
    let filter = name_filter(&reader, &c.types, &c.producers)?;
    let d = density::density(&reader, range, args.bins, &filter)?;
    if let Some(png) = &c.png {
        render::density(png, &d).with_context(|| format!("cannot draw {}", png.display()))?;
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
        println!(
            "{} events in {} bins of {} (max {} per bin)",
            d.total,
            args.bins,
            format::duration_ns(bin),
            d.max
        );
        let w = 50.0;
        for b in &d.bins {
            let bar = if d.max > 0 {
                (w * b.count as f64 / d.max as f64).round() as usize
            } else {
                0
            };
            println!(
                "  {:>12}  {:>9}  {}",
                format::duration_ns(b.start - range.start),
                b.count,
                "#".repeat(bar)
            );
        }
        wrote(&c.png, false);
    }
    Ok(ExitCode::SUCCESS)
}

pub fn aggregate(args: AggregateArgs) -> Result<ExitCode> {
    if let Some(model) = &args.model {
        let report = ocelotl::run_model_file(
            model,
            &RunOptions {
                mode: args.mode,
                normalize: args.normalize,
                ps: args.p.clone(),
                threshold: args.threshold,
            },
        )?;
        if args.png.is_some() {
            bail!("--png needs a trace (a model file has no time axis)");
        }
        if args.json {
            print_json(&serde_json::to_value(&report)?)?;
        } else {
            print_report_text(&report, true);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let trace = args
        .trace
        .as_ref()
        .ok_or_else(|| anyhow!("give a TRACE or --model FILE.json"))?;
    if args.slices == 0 || args.slices > 10_000 {
        bail!("--slices must be between 1 and 10000");
    }
    if args.p.iter().any(|p| !(0.0..=1.0).contains(p)) {
        bail!("--p must be between 0 and 1");
    }
    let reader = open(trace)?;
    let range = resolve_range(&reader, args.range.as_deref())?;
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
    let report = ocelotl::run_model(
        &file,
        &RunOptions {
            mode: args.mode,
            normalize: args.normalize,
            ps: args.p.clone(),
            threshold: args.threshold,
        },
    )?;
    let (_, nodes) = m.hierarchy();
    if let Some(png) = &args.png {
        let p = args.p.first().copied().unwrap_or(report.ocelotl_default_p);
        match args.mode {
            AggregationMode::Temporal => {
                let agg = TemporalAggregation::new(&model, args.normalize);
                render::temporal(png, &m, &model, &agg, p)
            }
            AggregationMode::Spatiotemporal => render::spatiotemporal(png, &m, &model, p),
        }
        .with_context(|| format!("cannot draw {}", png.display()))?;
    }
    if args.json {
        print_json(&json!({
            "trace": trace,
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
        println!(
            "{} model: {} slices of {} × {} producers × {} types",
            args.metric,
            args.slices,
            format::duration_ns(grid.slice_ns() as i64),
            m.producers.len(),
            m.types.len()
        );
        print_report_text(&report, args.plist || args.p.is_empty());
        wrote(&args.png, false);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_report_text(report: &ocelotl::AggregationReport, plist: bool) {
    let describe = |e: &serde_json::Value| -> String {
        if let Some(r) = e.get("ranges").and_then(|r| r.as_array()) {
            let parts: Vec<String> = r.iter().map(|x| format!("{}-{}", x[0], x[1])).collect();
            format!("{} parts: {}", r.len(), parts.join(" "))
        } else if let Some(a) = e.get("aggregates").and_then(|r| r.as_array()) {
            format!("{} areas", a.len())
        } else {
            String::new()
        }
    };
    if plist {
        println!(
            "significant p ({}; Ocelotl's default p = {}):",
            report.dichotomy.len(),
            report.ocelotl_default_p
        );
        for e in &report.dichotomy {
            let v = serde_json::to_value(e).unwrap_or_default();
            println!(
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
        println!(
            "at p={}: gain={:.6} loss={:.6} {}",
            v["p"],
            v["gain"].as_f64().unwrap_or(0.0),
            v["loss"].as_f64().unwrap_or(0.0),
            describe(&v)
        );
    }
}

pub fn timeline(args: TimelineArgs) -> Result<ExitCode> {
    let c = &args.common;
    if args.width == 0 || args.width > 100_000 {
        bail!("--width must be between 1 and 100000");
    }
    if !(args.sigma >= 0.0 && args.sigma.is_finite()) {
        bail!("--sigma must be a non-negative number");
    }
    let reader = open(&c.trace)?;
    let range = resolve_range(&reader, c.range.as_deref())?;
    let filter = name_filter(&reader, &c.types, &c.producers)?;
    let t = traceviz::timeline(&reader, range, args.width, args.statistic, &filter)?;
    let mut groups = Vec::new();
    for g in &args.group {
        let (name, rest) = g
            .split_once('=')
            .ok_or_else(|| anyhow!("bad group {g:?}: expected NAME=MEMBER,MEMBER[:op]"))?;
        let (members, op) = match rest.rsplit_once(':') {
            Some((m, op)) => (m, op.parse::<GroupOp>().map_err(|e| anyhow!(e))?),
            None => (rest, GroupOp::Max),
        };
        let names: Vec<&str> = members.split(',').map(str::trim).collect();
        for n in &names {
            if !reader.producers()?.iter().any(|p| p.name == *n) {
                bail!("no producer {n:?} in the trace");
            }
        }
        let hists: Vec<&[f64]> = t
            .actors
            .iter()
            .filter(|a| names.contains(&a.name.as_str()))
            .map(|a| a.values.as_slice())
            .collect();
        let values = if hists.is_empty() {
            vec![0.0; args.width]
        } else {
            traceviz::group(&hists, op)
        };
        groups.push(json!({"name": name, "op": op, "members": names, "values": values}));
    }
    let smoothed = traceviz::slick(&t.outline, args.sigma);
    let lum = traceviz::luminance(&t.outline, &smoothed);
    if let Some(png) = &c.png {
        render::timeline(png, &t, &groups, &smoothed, &lum)
            .with_context(|| format!("cannot draw {}", png.display()))?;
    }
    if c.json {
        let mut v = serde_json::to_value(&t)?;
        v["trace"] = json!(c.trace);
        v["groups"] = json!(groups);
        v["sigma"] = json!(args.sigma);
        v["smoothed"] = json!(smoothed);
        v["luminance"] = json!(lum);
        print_json(&v)?;
    } else {
        println!(
            "{:?} of {} actors over {} in {} bins",
            t.statistic,
            t.actors.len(),
            format::duration_ns(range.len()),
            args.width
        );
        let mut rows: Vec<(&str, f64, f64)> = t
            .actors
            .iter()
            .map(|a| {
                (
                    a.name.as_str(),
                    a.values.iter().sum::<f64>(),
                    a.values.iter().copied().fold(0.0, f64::max),
                )
            })
            .collect();
        rows.sort_by(|a, b| b.1.total_cmp(&a.1));
        println!("  {:<32} {:>14} {:>14}", "actor", "sum", "max bin");
        for (n, s, m) in rows {
            println!("  {n:<32} {:>14} {:>14}", format::si(s), format::si(m));
        }
        wrote(&c.png, false);
    }
    Ok(ExitCode::SUCCESS)
}

pub fn compare(args: CompareArgs) -> Result<ExitCode> {
    if args.slices == 0 || args.slices > 10_000 {
        bail!("--slices must be between 1 and 10000");
    }
    if !(0.0..=1.0).contains(&args.p) {
        bail!("--p must be between 0 and 1");
    }
    let reference = open(&args.reference)?;
    let run = open(&args.run)?;
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
    if args.json {
        let mut v = serde_json::to_value(&c)?;
        v["reference"] = json!(args.reference);
        v["run"] = json!(args.run);
        print_json(&v)?;
    } else {
        println!(
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
                .map(|d| format!("{} {:+.2}", d.name, d.delta))
                .collect();
            println!(
                "  {} {:>8.3}..{:<8.3} s  score {:.3}  {}",
                if w.departure { "!" } else { " " },
                w.start_s,
                w.end_s,
                w.score,
                who.join(", ")
            );
        }
        wrote(&args.png, false);
    }
    Ok(if c.departures > 0 {
        ExitCode::from(DEPARTURE_EXIT)
    } else {
        ExitCode::SUCCESS
    })
}

/// Milliseconds until the loader publishes its first snapshot (then the load is cancelled).
fn first_result_ms<S: Clone>(h: loader::LoaderHandle<S>) -> Result<f64> {
    let started = std::time::Instant::now();
    loop {
        let p = h.progress();
        if let Some(ms) = p.first_result_ms {
            h.cancel();
            return Ok(ms);
        }
        if let Some(e) = p.error {
            bail!("loading failed: {e}");
        }
        if p.finished || started.elapsed().as_secs() > 60 {
            bail!("the loader published no result");
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

/// `socscope bench aggregate`.
pub fn bench(
    events: u64,
    trace: Option<PathBuf>,
    dir: Option<PathBuf>,
    json_out: bool,
) -> Result<ExitCode> {
    use std::time::Instant;
    let (dir, _guard) = crate::bench::scratch_dir(dir)?;
    let (path, written) = match trace {
        Some(t) => (t, None),
        None => {
            let p = dir.join(format!("socscope-bench-{events}.db"));
            if !p.exists() {
                if !json_out {
                    eprintln!(
                        "writing a synthetic trace of {events} events in {}",
                        dir.display()
                    );
                }
                let r = socscope_tracedb::bench::write_synthetic(&p, events)?;
                (p, Some(r.seconds))
            } else {
                (p, None)
            }
        }
    };
    let reader = open(&path)?;
    let info = reader.info()?;
    let range = micro::trace_range(&reader)?;
    let grid = SliceGrid::new(range, 1000).ok_or_else(|| anyhow!("empty trace"))?;
    // Microscopic model T = 1000 over the whole trace: best of three (the first also warms
    // the page cache).
    let mut micro_ms = Vec::new();
    let mut shape = (0, 0);
    for metric in [Metric::Count, Metric::Duration] {
        let mut best = f64::INFINITY;
        for _ in 0..3 {
            let t = Instant::now();
            let m = micro::build(&reader, grid, metric, &Filter::all())?;
            best = best.min(t.elapsed().as_secs_f64() * 1e3);
            shape = (m.producers.len(), m.types.len());
        }
        micro_ms.push(best);
    }
    let stats_consumer = StatsConsumer::new(range);
    let req = stats_consumer.request(&path, &Filter::all());
    let stats_first = first_result_ms(loader::spawn(req, stats_consumer))?;
    let density_consumer = density::DensityConsumer::new(range, 1000).with_types();
    let req = density_consumer.request(&path, &Filter::all());
    let density_first = first_result_ms(loader::spawn(req, density_consumer))?;
    let t = Instant::now();
    let d = density::density(&reader, range, 1000, &Filter::all())?;
    let density_summary_ms = t.elapsed().as_secs_f64() * 1e3;
    let temporal = socscope_analysis::bench::temporal(1000, 100, 5);
    let spatio = socscope_analysis::bench::spatiotemporal(200, &[4, 4, 4], 4);
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    let v = json!({
        "trace": path,
        "events": info.event_count,
        "trace_s": range.len() as f64 * 1e-9,
        "write_s": written,
        "micro_t1000_count_ms": micro_ms[0],
        "micro_t1000_duration_ms": micro_ms[1],
        "micro_shape": {"slices": 1000, "producers": shape.0, "types": shape.1},
        "stats_first_result_ms": stats_first,
        "density_first_result_ms": density_first,
        "density_1000_bins_from_summary_ms": density_summary_ms,
        "density_total": d.total,
        "temporal_t1000_s100_u5": {
            "qualities_ms": ms(temporal.qualities),
            "bisection_ms": ms(temporal.bisection),
            "total_ms": ms(temporal.total()),
            "significant_ps": temporal.significant_ps,
        },
        "spatiotemporal_t200_4x4x4_u4": {
            "qualities_ms": ms(spatio.qualities),
            "bisection_ms": ms(spatio.bisection),
            "total_ms": ms(spatio.total()),
            "significant_ps": spatio.significant_ps,
        },
    });
    if json_out {
        print_json(&v)?;
    } else {
        println!("{}", serde_json::to_string_pretty(&v)?);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_colours_parse() {
        assert_eq!(parse_time("1.5").unwrap(), 1_500_000_000);
        assert_eq!(parse_time("200ms").unwrap(), 200_000_000);
        assert_eq!(parse_time("3s").unwrap(), 3_000_000_000);
        assert_eq!(parse_time("12us").unwrap(), 12_000);
        assert_eq!(parse_time("40ns").unwrap(), 40);
        assert!(parse_time("-1").is_err());
        assert!(parse_time("x").is_err());
        assert_eq!(parse_colour("#01ff10").unwrap(), [1, 255, 16]);
        assert!(parse_colour("#01ff1").is_err());
    }
}
