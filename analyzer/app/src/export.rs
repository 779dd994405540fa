//! `socscope export`: a trace (or a time range of it) as Chrome trace-event JSON (Perfetto UI), Pajé or
//! CSV. The exporters are `socscope_formats::export`'s; this module has the command's arguments and the
//! trace store seen as their read-only [`TraceView`].

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::input::{RangeArg, open_trace};
use crate::out::outln;
use socscope_formats::export::{
    self, Category, ContainerTypeView, EventView, ExportError, Kind, ProducerView, TraceView,
    TypeView, Value,
};
use socscope_tracedb::{
    EventCategory, EventKind, Filter, ParamValue, TimeRange, Timestamp, TraceReader,
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

/// A stored trace, or a time range of it, as the exporters see it.
pub struct StoreView {
    reader: TraceReader,
    types: Vec<TypeView>,
    producers: Vec<ProducerView>,
    /// The Pajé container types an import kept, and each producer's.
    container_types: Vec<ContainerTypeView>,
    container_of: std::collections::HashMap<u32, String>,
    range: TimeRange,
    t_min: Timestamp,
    t_max: Timestamp,
}

fn category(c: EventCategory) -> Category {
    match c {
        EventCategory::Punctual => Category::Punctual,
        EventCategory::State => Category::State,
        EventCategory::Link => Category::Link,
        EventCategory::Variable => Category::Variable,
    }
}

fn value(v: &ParamValue) -> Value {
    match v {
        ParamValue::Signed(x) => Value::Signed(*x),
        ParamValue::Unsigned(x) => Value::Unsigned(*x),
        ParamValue::Float(x) => Value::Float(*x),
        ParamValue::String(s) => Value::String(s.clone()),
        ParamValue::Address(a) => Value::Address(*a),
    }
}

impl StoreView {
    /// The trace at `path`, limited to `range` (relative to its start).
    pub fn open(path: &Path, range: Option<RangeArg>) -> Result<Self> {
        let reader = open_trace(path)?;
        let info = reader.info()?;
        let types = reader
            .event_types()?
            .into_iter()
            .map(|t| TypeView {
                id: t.id,
                name: t.name,
                category: category(t.category),
                params: t.params.into_iter().map(|p| p.name).collect(),
            })
            .collect();
        let producers = reader
            .producers()?
            .into_iter()
            .map(|p| ProducerView {
                id: p.id,
                parent: p.parent,
                cpu: (p.kind == socscope_tracedb::ProducerKind::Cpu)
                    .then(|| u32::try_from(p.local_id).ok())
                    .flatten(),
                name: p.name,
            })
            .collect();
        let range = match range {
            None => TimeRange::all(),
            Some(r) => TimeRange::new(
                r.start.map_or(i64::MIN, |a| info.t_min.saturating_add(a)),
                r.end.map_or(i64::MAX, |b| info.t_min.saturating_add(b)),
            ),
        };
        let param = |name: &str| {
            info.meta.params.iter().find_map(|(n, v)| match v {
                ParamValue::String(s) if n == name => Some(s.as_str()),
                _ => None,
            })
        };
        let container_types = param(export::paje::CONTAINER_TYPES)
            .map(export::paje::decode_container_types)
            .unwrap_or_default();
        let container_of = param(export::paje::CONTAINERS)
            .map(export::paje::decode_containers)
            .unwrap_or_default()
            .into_iter()
            .collect();
        Ok(Self {
            reader,
            types,
            producers,
            container_types,
            container_of,
            range,
            t_min: info.t_min,
            t_max: info.t_max,
        })
    }
}

impl TraceView for StoreView {
    fn source(&self) -> String {
        self.reader.path().display().to_string()
    }
    fn t_min(&self) -> Timestamp {
        self.t_min
    }
    fn types(&self) -> &[TypeView] {
        &self.types
    }
    fn producers(&self) -> &[ProducerView] {
        &self.producers
    }
    fn container_types(&self) -> &[ContainerTypeView] {
        &self.container_types
    }
    fn container_type(&self, id: u32) -> Option<&str> {
        self.container_of.get(&id).map(String::as_str)
    }
    fn for_each_event(
        &self,
        each: &mut dyn FnMut(&EventView) -> Result<(), ExportError>,
    ) -> Result<u64, ExportError> {
        let read = |e: socscope_tracedb::StoreError| ExportError::Read(e.to_string());
        let mut view = EventView {
            ts: 0,
            type_id: 0,
            producer: 0,
            cpu: None,
            kind: Kind::Punctual,
            params: Vec::new(),
        };
        // Progress by trace time: how far into the exported interval the events have come.
        let (from, to) = (
            self.range.start.max(self.t_min),
            self.range.end.min(self.t_max.saturating_add(1)),
        );
        let bar = crate::out::progress_bar(
            false,
            Some(1000),
            "{spinner} {elapsed} exporting {msg} {wide_bar} eta {eta}",
        );
        let mut n = 0;
        for e in self
            .reader
            .events(self.range, &Filter::all())
            .map_err(read)?
        {
            let e = e.map_err(read)?.event;
            view.ts = e.ts;
            view.type_id = e.type_id;
            view.producer = e.producer;
            view.cpu = e.cpu;
            view.kind = match e.kind {
                EventKind::Punctual => Kind::Punctual,
                EventKind::State { end, depth } => Kind::State { end, depth },
                EventKind::Link { end, target } => Kind::Link { end, target },
                EventKind::Variable { value } => Kind::Variable { value },
            };
            view.params.clear();
            view.params.extend(e.params.iter().map(value));
            each(&view)?;
            n += 1;
            if let Some(b) = &bar
                && n % 65_536 == 0
            {
                let done = (e.ts - from) as f64 / (to - from).max(1) as f64;
                b.set_position((done.clamp(0.0, 1.0) * 1000.0) as u64);
                b.set_message(format!("{n} events"));
            }
        }
        if let Some(b) = bar {
            b.finish_and_clear();
        }
        Ok(n)
    }
}

pub fn run(args: ExportArgs) -> Result<ExitCode> {
    let trace = StoreView::open(&args.trace, args.range)?;
    let file = File::create(&args.output)
        .with_context(|| format!("creating {}", args.output.display()))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let n = match args.format {
        ExportFormat::ChromeJson => export::chrome_json::write(&trace, &mut out),
        ExportFormat::Paje => export::paje::write(&trace, &mut out),
        ExportFormat::Csv => export::csv::write(&trace, &mut out),
    }
    .with_context(|| format!("exporting {}", args.trace.display()))?;
    out.flush()
        .with_context(|| format!("writing {}", args.output.display()))?;
    outln!("exported {n} events -> {}", args.output.display());
    Ok(ExitCode::SUCCESS)
}
