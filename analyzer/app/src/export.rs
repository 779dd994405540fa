//! `socscope export`: a trace (or a time range of it) as Chrome trace-event JSON (Perfetto UI), Pajé or
//! CSV, streamed event by event (constant memory whatever the trace size).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::input::{RangeArg, open_trace};
use crate::out::outln;
use serde_json::{Map, Value, json};
use socscope_analysis::hierarchy::ProducerTree;
use socscope_tracedb::units;
use socscope_tracedb::{
    EventKind, EventType, Filter, ParamValue, Producer, ProducerId, StoredEvent, TimeRange,
    Timestamp, TraceReader, TypeId,
};

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    /// Chrome trace-event JSON (opens in ui.perfetto.dev and chrome://tracing).
    ChromeJson,
    /// Pajé (socscope, PajeNG, ViTE).
    Paje,
    /// One line per event.
    Csv,
}

#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    /// The trace file (.db).
    pub trace: PathBuf,
    /// Output format.
    #[arg(long, value_enum)]
    pub format: ExportFormat,
    /// Only events starting in START..END, relative to the trace start (e.g. `1.5s..3s`, `200ms..`).
    #[arg(long, value_name = "START..END")]
    pub range: Option<RangeArg>,
    /// The file to write.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: PathBuf,
}

pub struct Trace {
    reader: TraceReader,
    types: HashMap<TypeId, EventType>,
    producers: HashMap<ProducerId, Producer>,
    /// The producer hierarchy (roots are Chrome processes and Pajé top containers).
    tree: ProducerTree,
    range: TimeRange,
}

fn open(path: &Path, range: Option<RangeArg>) -> Result<Trace> {
    let reader = open_trace(path)?;
    let info = reader.info()?;
    let types = reader
        .event_types()?
        .into_iter()
        .map(|t| (t.id, t))
        .collect();
    let list = reader.producers()?;
    let tree = ProducerTree::new(&list);
    let producers = list.into_iter().map(|p| (p.id, p)).collect();
    let range = match range {
        None => TimeRange::all(),
        Some(r) => TimeRange::new(
            r.start.map_or(i64::MIN, |a| info.t_min.saturating_add(a)),
            r.end.map_or(i64::MAX, |b| info.t_min.saturating_add(b)),
        ),
    };
    Ok(Trace {
        reader,
        types,
        producers,
        tree,
        range,
    })
}

impl Trace {
    fn type_name(&self, id: TypeId) -> String {
        self.types
            .get(&id)
            .map_or_else(|| format!("type {id}"), |t| t.name.clone())
    }
    fn producer_name(&self, id: ProducerId) -> String {
        self.producers
            .get(&id)
            .map_or_else(|| format!("producer {id}"), |p| p.name.clone())
    }
    fn root(&self, id: ProducerId) -> ProducerId {
        self.tree.root(id)
    }
    fn depth(&self, id: ProducerId) -> usize {
        self.tree.depth(id)
    }
    fn param_names(&self, ty: TypeId) -> Vec<String> {
        self.types.get(&ty).map_or_else(Vec::new, |t| {
            t.params.iter().map(|p| p.name.clone()).collect()
        })
    }
    fn each(&self, mut f: impl FnMut(&StoredEvent) -> Result<()>) -> Result<u64> {
        let mut n = 0;
        for e in self.reader.events(self.range, &Filter::all())? {
            f(&e?)?;
            n += 1;
        }
        Ok(n)
    }
}

pub fn run(args: ExportArgs) -> Result<ExitCode> {
    let trace = open(&args.trace, args.range)?;
    let file = File::create(&args.output)
        .with_context(|| format!("creating {}", args.output.display()))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let n = match args.format {
        ExportFormat::ChromeJson => chrome_json(&trace, &mut out)?,
        ExportFormat::Paje => paje(&trace, &mut out)?,
        ExportFormat::Csv => csv(&trace, &mut out)?,
    };
    out.flush()
        .with_context(|| format!("writing {}", args.output.display()))?;
    outln!("exported {n} events -> {}", args.output.display());
    Ok(ExitCode::SUCCESS)
}

fn us(ns: Timestamp) -> f64 {
    ns as f64 / 1000.0
}

fn json_value(v: &ParamValue) -> Value {
    match v {
        ParamValue::Signed(x) => json!(x),
        ParamValue::Unsigned(x) => json!(x),
        ParamValue::Float(x) => json!(x),
        ParamValue::String(s) => json!(s),
        ParamValue::Address(a) => json!(format!("{a:#x}")),
    }
}

/// Chrome trace-event JSON: producers as processes (roots of the hierarchy) and threads, states as
/// complete events, punctual events as instants, links as flow events, variables as counters.
pub fn chrome_json(trace: &Trace, out: &mut impl Write) -> Result<u64> {
    out.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")?;
    let mut first = true;
    let mut emit = |out: &mut dyn Write, v: Value| -> Result<()> {
        if !first {
            out.write_all(b",\n")?;
        }
        first = false;
        serde_json::to_writer(&mut *out, &v)?;
        Ok(())
    };
    let mut producers: Vec<&Producer> = trace.producers.values().collect();
    producers.sort_by_key(|p| p.id);
    for p in &producers {
        let pid = trace.root(p.id);
        if pid == p.id {
            emit(
                out,
                json!({"ph": "M", "name": "process_name", "pid": pid, "tid": p.id, "args": {"name": p.name}}),
            )?;
        }
        emit(
            out,
            json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": p.id, "args": {"name": p.name}}),
        )?;
    }
    let mut flow_id = 0u64;
    let n = trace.each(|s| {
        let e = &s.event;
        let mut name = trace.type_name(e.type_id);
        let pid = trace.root(e.producer);
        let mut args = Map::new();
        for (k, v) in trace.param_names(e.type_id).into_iter().zip(&e.params) {
            // A state named by a parameter (a syscall's `futex`, a user function's label) shows as that
            // name in Perfetto, its type kept in the arguments.
            if k == "name"
                && let ParamValue::String(n) = v
                && !n.is_empty()
                && matches!(e.kind, EventKind::State { .. })
            {
                args.insert("type".into(), json!(name));
                name = n.clone();
            }
            args.insert(k, json_value(v));
        }
        if let Some(cpu) = e.cpu {
            args.insert("cpu".into(), json!(cpu));
        }
        match e.kind {
            EventKind::State { end, depth } => {
                args.insert("depth".into(), json!(depth));
                emit(out, json!({"ph": "X", "name": name, "cat": "state", "ts": us(e.ts), "dur": us(end - e.ts), "pid": pid, "tid": e.producer, "args": args}))
            }
            EventKind::Punctual => emit(out, json!({"ph": "i", "s": "t", "name": name, "cat": "event", "ts": us(e.ts), "pid": pid, "tid": e.producer, "args": args})),
            EventKind::Link { end, target } => {
                flow_id += 1;
                emit(out, json!({"ph": "s", "name": name, "cat": "link", "id": flow_id, "ts": us(e.ts), "pid": pid, "tid": e.producer, "args": args}))?;
                emit(out, json!({"ph": "f", "bp": "e", "name": name, "cat": "link", "id": flow_id, "ts": us(end), "pid": trace.root(target), "tid": target}))
            }
            EventKind::Variable { value } => {
                let series = trace.producer_name(e.producer);
                emit(out, json!({"ph": "C", "name": name, "cat": "variable", "ts": us(e.ts), "pid": pid, "tid": e.producer, "args": {series: value}}))
            }
        }
    })?;
    out.write_all(b"\n]}\n")?;
    Ok(n)
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// One line per event: time, end, category, type, producer, CPU, depth, link target, value, parameters.
pub fn csv(trace: &Trace, out: &mut impl Write) -> Result<u64> {
    writeln!(
        out,
        "ts_ns,end_ns,category,type,producer,cpu,depth,target,value,params"
    )?;
    trace.each(|s| {
        let e = &s.event;
        let (depth, target, value) = match e.kind {
            EventKind::State { depth, .. } => (depth.to_string(), String::new(), String::new()),
            EventKind::Link { target, .. } => {
                (String::new(), trace.producer_name(target), String::new())
            }
            EventKind::Variable { value } => (String::new(), String::new(), value.to_string()),
            EventKind::Punctual => Default::default(),
        };
        let params: Vec<String> = trace
            .param_names(e.type_id)
            .into_iter()
            .zip(&e.params)
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{}",
            e.ts,
            e.end(),
            e.category().name(),
            csv_field(&trace.type_name(e.type_id)),
            csv_field(&trace.producer_name(e.producer)),
            e.cpu.map_or_else(String::new, |c| c.to_string()),
            depth,
            csv_field(&target),
            value,
            csv_field(&params.join(";"))
        )?;
        Ok(())
    })
}

fn quoted(s: &str) -> String {
    format!("\"{}\"", s.replace(['"', '\n', '\r'], "'"))
}

const PAJE_HEADER: &str = "\
%EventDef PajeDefineContainerType 0\n% Alias string\n% Type string\n% Name string\n%EndEventDef
%EventDef PajeDefineStateType 1\n% Alias string\n% Type string\n% Name string\n%EndEventDef
%EventDef PajeDefineEventType 2\n% Alias string\n% Type string\n% Name string\n%EndEventDef
%EventDef PajeDefineVariableType 3\n% Alias string\n% Type string\n% Name string\n%EndEventDef
%EventDef PajeDefineLinkType 4\n% Alias string\n% Type string\n% StartContainerType string\n% EndContainerType string\n% Name string\n%EndEventDef
%EventDef PajeCreateContainer 5\n% Time date\n% Alias string\n% Type string\n% Container string\n% Name string\n%EndEventDef
%EventDef PajePushState 6\n% Time date\n% Type string\n% Container string\n% Value string\n%EndEventDef
%EventDef PajePopState 7\n% Time date\n% Type string\n% Container string\n%EndEventDef
%EventDef PajeNewEvent 8\n% Time date\n% Type string\n% Container string\n% Value string\n%EndEventDef
%EventDef PajeSetVariable 9\n% Time date\n% Type string\n% Container string\n% Value double\n%EndEventDef
%EventDef PajeStartLink 10\n% Time date\n% Type string\n% Container string\n% StartContainer string\n% Value string\n% Key string\n%EndEventDef
%EventDef PajeEndLink 11\n% Time date\n% Type string\n% Container string\n% EndContainer string\n% Value string\n% Key string\n%EndEventDef
";

/// Pajé: the producer hierarchy as containers (one container type per level), states as Push/Pop on
/// one state type per nesting depth, events, variables and links with their store type as value, so
/// that importing the file back gives the same events per type.
pub fn paje(trace: &Trace, out: &mut impl Write) -> Result<u64> {
    writeln!(
        out,
        "# socscope export of {}",
        trace.reader.path().display()
    )?;
    out.write_all(PAJE_HEADER.as_bytes())?;
    let t0 = trace.reader.info()?.t_min;
    let mut producers: Vec<&Producer> = trace.producers.values().collect();
    producers.sort_by_key(|p| (trace.depth(p.id), p.id));
    let mut levels = 0;
    for p in &producers {
        let d = trace.depth(p.id);
        while levels <= d {
            let parent = if levels == 0 {
                "0".to_string()
            } else {
                format!("L{}", levels - 1)
            };
            writeln!(
                out,
                "0 L{levels} {parent} {}",
                quoted(&format!("level {levels}"))
            )?;
            levels += 1;
        }
        let parent = p
            .parent
            .filter(|q| trace.producers.contains_key(q))
            .map_or_else(|| "0".to_string(), |q| format!("p{q}"));
        writeln!(
            out,
            "5 {} p{} L{d} {parent} {}",
            units::timestamp(t0),
            p.id,
            quoted(&p.name)
        )?;
    }
    let mut declared: std::collections::HashSet<String> = std::collections::HashSet::new();
    // Ends to write once the events before them are out: (time, order, line).
    let mut pending: BinaryHeap<Reverse<(Timestamp, u64, String)>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut key = 0u64;
    let n = trace.each(|s| {
        let e = &s.event;
        while let Some(Reverse((t, _, _))) = pending.peek() {
            if *t > e.ts {
                break;
            }
            if let Some(Reverse((_, _, line))) = pending.pop() {
                writeln!(out, "{line}")?;
            }
        }
        let level = trace.depth(e.producer);
        let c = format!("p{}", e.producer);
        let value = quoted(&trace.type_name(e.type_id));
        let time = units::timestamp(e.ts);
        let mut declare = |out: &mut dyn Write, alias: String, line: String| -> Result<String> {
            if declared.insert(alias.clone()) {
                writeln!(out, "{line}")?;
            }
            Ok(alias)
        };
        match e.kind {
            EventKind::State { end, depth } => {
                let a = format!("L{level}s{depth}");
                let ty = declare(
                    out,
                    a.clone(),
                    format!("1 {a} L{level} {}", quoted(&format!("depth {depth}"))),
                )?;
                writeln!(out, "6 {time} {ty} {c} {value}")?;
                seq += 1;
                pending.push(Reverse((
                    end,
                    seq,
                    format!("7 {} {ty} {c}", units::timestamp(end)),
                )));
            }
            EventKind::Punctual => {
                let a = format!("L{level}e");
                let ty = declare(out, a.clone(), format!("2 {a} L{level} \"event\""))?;
                writeln!(out, "8 {time} {ty} {c} {value}")?;
            }
            EventKind::Variable { value: v } => {
                let a = format!("L{level}v{}", e.type_id);
                let ty = declare(out, a.clone(), format!("3 {a} L{level} {value}"))?;
                writeln!(out, "9 {time} {ty} {c} {v}")?;
            }
            EventKind::Link { end, target } => {
                let tl = trace.depth(target);
                let a = format!("link{level}_{tl}");
                let ty = declare(
                    out,
                    a.clone(),
                    format!("4 {a} 0 L{level} L{tl} {}", quoted(&a)),
                )?;
                key += 1;
                writeln!(out, "10 {time} {ty} 0 {c} {value} k{key}")?;
                seq += 1;
                pending.push(Reverse((
                    end,
                    seq,
                    format!(
                        "11 {} {ty} 0 p{target} {value} k{key}",
                        units::timestamp(end)
                    ),
                )));
            }
        }
        Ok(())
    })?;
    while let Some(Reverse((_, _, line))) = pending.pop() {
        writeln!(out, "{line}")?;
    }
    Ok(n)
}
