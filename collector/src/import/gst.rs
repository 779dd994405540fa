//! GStreamer `GST_DEBUG` logs: one process producer per pid, one thread producer per thread address;
//! every debug line a punctual event of its level, and each thread's level between its lines a state.
//!
//! Tracer records (`GST_TRACERS=...`, lines of `GST_TRACER :0::`) become structured events, on one
//! producer per element (named after it, under its process):
//! - `latency` (pipeline): a link from the source element to the sink element, from `ts - time` to `ts`,
//!   with the pads and the time;
//! - `element-latency`, `proctime`: a state of the element from `ts - time` to `ts` (overlapping ones,
//!   buffers in flight in a queue, on rows of their own: depth). RidgeRun's gst-shark writes
//!   `proctime, element=(string)identity0, time=(string)0:00:00.000051234;` when the element pushes a
//!   buffer, the time being how long it held it;
//! - `interlatency` (gst-shark): `interlatency, from_pad=(string)videotestsrc0_src,
//!   to_pad=(string)queue0_src, time=(string)0:00:00.000178232;` — how long a buffer took from the
//!   source's pad to a later pad — becomes a link from the source element to the pad's element, from
//!   `ts - time` to `ts`, with both pads and the time. A pad is written `element_pad`, and both names
//!   may hold `_`: the element is the longest element name already known that the pad starts with,
//!   else the part before the last `_src` or `_sink`, else before the last `_`;
//! - `element-reported-latency`: a punctual event of the element (live, min, max);
//! - `thread-rusage`, `proc-rusage` (rusage): variables `current-cpuload`, `average-cpuload` (‰) and
//!   `cpu-time` (ns) of the thread or process;
//! - the stats tracer's `new-element` and `new-pad` name elements and pads by index; its `buffer` is a
//!   link from element to peer element, `event`, `query`, `message`, `element-query` punctual events of
//!   the element, with pad names resolved;
//! - any other record: a punctual event of its own type on its thread, its whole structure kept. A
//!   record of a kind above that lacks a field its rule needs is kept the same way and counted
//!   (`tracer_uninterpreted`).

use std::collections::HashMap;
use std::path::Path;

use socscope_formats::gst;
use socscope_tracedb::{
    Event, EventCategory, EventKind, EventType, IngestStat, ParamDef, ParamType, ParamValue,
    Producer, ProducerId, ProducerKind, TraceWriter, TypeId,
};

use super::dictionary::StoreTypes;
use super::{Lines, display, open, stat};
use crate::Result;

/// Imports the GStreamer log `path`.
pub(super) fn run(
    path: &Path,
    writer: &mut TraceWriter,
    lines: &mut Lines<'_, '_>,
) -> Result<Vec<IngestStat>> {
    let mut reader = gst::GstReader::new(open(path)?, display(path));
    let mut importer = GstImporter::new(writer)?;
    loop {
        let r = match reader.next_record() {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                lines.bad(e)?;
                continue;
            }
        };
        importer.line(&r, writer)?;
        lines.progress(reader.bytes());
    }
    lines.bytes = reader.bytes();
    importer.finish(writer)
}

/// The store type of the level state `level` (index in [`gst::LEVELS`]).
const LEVEL_STATES: TypeId = 101;
/// The "level" of a thread that has logged no debug line yet (only tracer records name it).
const NO_LEVEL: TypeId = TypeId::MAX - LEVEL_STATES;

/// What a GStreamer import keeps from line to line.
struct GstImporter {
    processes: HashMap<u64, ProducerId>,
    /// (pid, thread) → (producer, since when in its level, level).
    threads: HashMap<(u64, String), (ProducerId, i64, TypeId)>,
    next: ProducerId,
    last_ts: i64,
    ev: Event,
    /// Types of the tracer records.
    store: StoreTypes,
    /// Elements by id (pointer) or stats index, and by name → producer.
    elements: HashMap<String, ProducerId>,
    /// Stats tracer indices → element name, pad index → (pad name, element index).
    element_ix: HashMap<u64, String>,
    pad_ix: HashMap<u64, String>,
    /// Per element: the end of each row's last state (overlapping states go on further rows).
    rows: HashMap<ProducerId, Vec<i64>>,
    /// Tracer records per kind.
    tracer_records: std::collections::BTreeMap<String, u64>,
    /// Tracer lines whose structure does not read (kept as debug lines).
    unreadable: u64,
    /// Records of a kind with a rule that lack what it needs (kept whole).
    uninterpreted: u64,
}

impl GstImporter {
    /// Declares the types: one punctual type per level, one state type per level.
    fn new(writer: &mut TraceWriter) -> Result<Self> {
        let params: Vec<ParamDef> = ["category", "file", "line", "function", "object", "message"]
            .iter()
            .map(|n| {
                ParamDef::new(
                    *n,
                    if *n == "line" {
                        ParamType::Unsigned
                    } else {
                        ParamType::String
                    },
                )
            })
            .collect();
        for (i, level) in gst::LEVELS.iter().enumerate() {
            writer.add_event_type(&EventType {
                id: i as TypeId + 1,
                name: (*level).into(),
                category: EventCategory::Punctual,
                params: params.clone(),
            })?;
            writer.add_event_type(&EventType {
                id: i as TypeId + LEVEL_STATES,
                name: format!("{level} level"),
                category: EventCategory::State,
                params: Vec::new(),
            })?;
        }
        Ok(Self {
            processes: HashMap::new(),
            threads: HashMap::new(),
            next: 1,
            last_ts: 0,
            ev: Event::punctual(0, 0, 0, None),
            store: StoreTypes::starting_at(LEVEL_STATES + 100),
            elements: HashMap::new(),
            element_ix: HashMap::new(),
            pad_ix: HashMap::new(),
            rows: HashMap::new(),
            tracer_records: std::collections::BTreeMap::new(),
            unreadable: 0,
            uninterpreted: 0,
        })
    }

    /// The producer of process `pid`, created on first use.
    fn process(&mut self, pid: u64, writer: &mut TraceWriter) -> Result<ProducerId> {
        if let Some(&p) = self.processes.get(&pid) {
            return Ok(p);
        }
        let id = self.next;
        self.next += 1;
        writer.add_producer(&Producer {
            id,
            parent: None,
            kind: ProducerKind::Process,
            local_id: pid as i64,
            name: format!("process {pid}"),
        })?;
        self.processes.insert(pid, id);
        Ok(id)
    }

    /// A line: a tracer record, or a debug line.
    fn line(&mut self, r: &gst::Record<'_>, writer: &mut TraceWriter) -> Result<()> {
        match r.tracer() {
            Some(Ok(s)) => self.tracer(r, &s, writer),
            Some(Err(_)) => {
                self.unreadable += 1;
                self.debug_line(r, writer)
            }
            None => self.debug_line(r, writer),
        }
    }

    /// A debug line: a punctual event of its level on its thread, and the thread's previous level
    /// closed as a state.
    fn debug_line(&mut self, r: &gst::Record<'_>, writer: &mut TraceWriter) -> Result<()> {
        let level = gst::LEVELS.iter().position(|l| *l == r.level).unwrap_or(0) as TypeId;
        let process = self.process(r.pid, writer)?;
        let key = (r.pid, r.thread.to_string());
        let producer = match self.threads.get_mut(&key) {
            Some(t) => {
                // The thread was in its previous line's level until now (if it had logged one).
                if t.2 != NO_LEVEL {
                    self.ev = Event::state(t.1, r.ts.max(t.1), 0, t.2 + LEVEL_STATES, t.0, None);
                    writer.push(&self.ev)?;
                }
                t.1 = r.ts;
                t.2 = level;
                t.0
            }
            None => {
                let id = self.next;
                self.next += 1;
                let local = u64::from_str_radix(r.thread.trim_start_matches("0x"), 16).unwrap_or(0);
                writer.add_producer(&Producer {
                    id,
                    parent: Some(process),
                    kind: ProducerKind::Thread,
                    local_id: local as i64,
                    name: r.thread.to_string(),
                })?;
                self.threads.insert(key, (id, r.ts, level));
                id
            }
        };
        self.last_ts = self.last_ts.max(r.ts);
        let ev = &mut self.ev;
        ev.ts = r.ts;
        ev.type_id = level + 1;
        ev.producer = producer;
        ev.cpu = None;
        ev.kind = EventKind::Punctual;
        ev.params.clear();
        ev.params.extend([
            ParamValue::String(r.category.into()),
            ParamValue::String(r.file.into()),
            ParamValue::Unsigned(u64::from(r.line)),
            ParamValue::String(r.function.into()),
            ParamValue::String(r.object.unwrap_or("").into()),
            ParamValue::String(r.message.into()),
        ]);
        writer.push(ev)?;
        Ok(())
    }

    /// Closes each thread's last level at the last time; the import's statistics.
    fn finish(self, writer: &mut TraceWriter) -> Result<Vec<IngestStat>> {
        let mut open: Vec<&(ProducerId, i64, TypeId)> =
            self.threads.values().filter(|t| t.2 != NO_LEVEL).collect();
        open.sort_by_key(|t| t.0);
        for t in open {
            writer.push(&Event::state(
                t.1,
                self.last_ts.max(t.1),
                0,
                t.2 + LEVEL_STATES,
                t.0,
                None,
            ))?;
        }
        let mut stats = vec![
            stat("threads", self.threads.len() as u64, "GStreamer threads"),
            stat(
                "elements",
                self.element_count(),
                "GStreamer elements named by tracer records",
            ),
            stat(
                "tracer_unreadable",
                self.unreadable,
                "tracer lines whose structure does not read, kept as debug lines",
            ),
            stat(
                "tracer_uninterpreted",
                self.uninterpreted,
                "tracer records lacking a field their kind needs, kept whole as `tracer KIND` events",
            ),
        ];
        for (kind, n) in &self.tracer_records {
            stats.push(stat(
                format!("tracer.{kind}"),
                *n,
                format!("`{kind}` tracer records"),
            ));
        }
        Ok(stats)
    }
}

/// The record kinds with a rule of their own (the others are kept whole, by design).
const RULES: &[&str] = &[
    "latency",
    "interlatency",
    "element-latency",
    "proctime",
    "element-reported-latency",
    "thread-rusage",
    "proc-rusage",
    "new-element",
    "new-pad",
    "buffer",
    "event",
    "query",
    "message",
    "element-query",
];

/// A time field: nanoseconds as an integer, or a clock time `H:MM:SS.NNNNNNNNN`.
fn nanoseconds(f: &gst::Field<'_>) -> Option<i64> {
    let v = f.value();
    let v = v.trim();
    if let Ok(n) = v.parse::<u64>() {
        return i64::try_from(n).ok();
    }
    let mut parts = v.splitn(3, ':');
    let (h, m, s) = (parts.next()?, parts.next()?, parts.next()?);
    let (sec, frac) = s.split_once('.').unwrap_or((s, ""));
    let frac: String = frac.chars().chain(std::iter::repeat('0')).take(9).collect();
    let total =
        h.parse::<i64>().ok()? * 3600 + m.parse::<i64>().ok()? * 60 + sec.parse::<i64>().ok()?;
    total
        .checked_mul(1_000_000_000)?
        .checked_add(frac.parse::<i64>().ok()?)
}

/// A field's value as text.
fn field_text(s: &gst::Structure<'_>, k: &str) -> Option<String> {
    s.get(k).map(|f| f.value().into_owned())
}

/// A field's value as an unsigned integer.
fn field_u64(s: &gst::Structure<'_>, k: &str) -> Option<u64> {
    s.get(k).and_then(|f| f.unsigned())
}

/// A time field in nanoseconds (see [`nanoseconds`]).
fn field_ns(s: &gst::Structure<'_>, k: &str) -> Option<i64> {
    s.get(k).and_then(nanoseconds)
}

impl GstImporter {
    fn element_count(&self) -> u64 {
        let mut ids: Vec<ProducerId> = self.elements.values().copied().collect();
        ids.sort_unstable();
        ids.dedup();
        ids.len() as u64
    }

    /// The producer of the element `name` (known also by `id`), under process `pid`.
    fn element(
        &mut self,
        pid: u64,
        id: Option<&str>,
        name: &str,
        writer: &mut TraceWriter,
    ) -> Result<ProducerId> {
        let by_name = format!("name:{name}");
        if let Some(&p) = id
            .and_then(|i| self.elements.get(i))
            .or_else(|| self.elements.get(&by_name))
        {
            if let Some(i) = id {
                self.elements.insert(i.to_string(), p);
            }
            return Ok(p);
        }
        let process = self.process(pid, writer)?;
        let p = self.next;
        self.next += 1;
        writer.add_producer(&Producer {
            id: p,
            parent: Some(process),
            kind: ProducerKind::Other,
            local_id: i64::from(p),
            name: name.to_string(),
        })?;
        self.elements.insert(by_name, p);
        if let Some(i) = id {
            self.elements.insert(i.to_string(), p);
        }
        Ok(p)
    }

    /// The producer of thread `thread` (its address as the log prints it) of process `pid`.
    fn thread(
        &mut self,
        pid: u64,
        thread: &str,
        ts: i64,
        writer: &mut TraceWriter,
    ) -> Result<ProducerId> {
        if let Some(t) = self.threads.get(&(pid, thread.to_string())) {
            return Ok(t.0);
        }
        let process = self.process(pid, writer)?;
        let id = self.next;
        self.next += 1;
        let local = u64::from_str_radix(thread.trim_start_matches("0x"), 16).unwrap_or(0);
        writer.add_producer(&Producer {
            id,
            parent: Some(process),
            kind: ProducerKind::Thread,
            local_id: local as i64,
            name: thread.to_string(),
        })?;
        // In no debug level until it logs a debug line: its level state starts then.
        self.threads
            .insert((pid, thread.to_string()), (id, ts, NO_LEVEL));
        Ok(id)
    }

    /// The element of a gst-shark pad name `element_pad` (see the module documentation).
    fn pad_element<'p>(&self, pad: &'p str) -> &'p str {
        let known = self
            .elements
            .keys()
            .filter_map(|k| k.strip_prefix("name:"))
            .filter(|e| {
                pad.len() > e.len() + 1 && pad.starts_with(e) && pad.as_bytes()[e.len()] == b'_'
            })
            .map(str::len)
            .max();
        let end = known
            .or_else(|| {
                let src = pad.rfind("_src");
                let sink = pad.rfind("_sink");
                src.max(sink)
            })
            .or_else(|| pad.rfind('_'))
            .filter(|&i| i > 0);
        end.map_or(pad, |i| &pad[..i])
    }

    /// The first free row of `producer` for a state from `start` to `end`.
    fn row(&mut self, producer: ProducerId, start: i64, end: i64) -> u16 {
        let rows = self.rows.entry(producer).or_default();
        let i = match rows.iter().position(|&e| e <= start) {
            Some(i) => i,
            None => {
                rows.push(i64::MIN);
                rows.len() - 1
            }
        };
        rows[i] = end;
        u16::try_from(i).unwrap_or(u16::MAX)
    }

    fn push(
        &mut self,
        category: EventCategory,
        type_name: &str,
        params: Vec<(&str, ParamValue)>,
        at: (i64, ProducerId),
        kind: EventKind,
        writer: &mut TraceWriter,
    ) -> Result<()> {
        let defs: Vec<ParamDef> = params
            .iter()
            .map(|(n, v)| {
                ParamDef::new(
                    *n,
                    match v {
                        ParamValue::Signed(_) => ParamType::Signed,
                        ParamValue::Unsigned(_) => ParamType::Unsigned,
                        ParamValue::Float(_) => ParamType::Float,
                        ParamValue::String(_) => ParamType::String,
                        ParamValue::Address(_) => ParamType::Address,
                    },
                )
            })
            .collect();
        let ty = self.store.id(category, type_name, &defs, writer)?;
        self.last_ts = self.last_ts.max(at.0).max(match kind {
            EventKind::State { end, .. } | EventKind::Link { end, .. } => end,
            _ => at.0,
        });
        writer.push(&Event {
            ts: at.0,
            type_id: ty,
            producer: at.1,
            cpu: None,
            kind,
            params: params.into_iter().map(|(_, v)| v).collect(),
        })?;
        Ok(())
    }

    /// A tracer record: its structured event(s), or a punctual event of its own type.
    fn tracer(
        &mut self,
        r: &gst::Record<'_>,
        s: &gst::Structure<'_>,
        writer: &mut TraceWriter,
    ) -> Result<()> {
        *self.tracer_records.entry(s.name.to_string()).or_default() += 1;
        let ts = field_ns(s, "ts").unwrap_or(r.ts);
        let done = match s.name {
            "latency" => self.latency(r, s, ts, writer)?,
            "interlatency" => self.interlatency(r, s, ts, writer)?,
            "element-latency" | "proctime" => self.element_time(r, s, ts, writer)?,
            "element-reported-latency" => self.reported_latency(r, s, ts, writer)?,
            "thread-rusage" | "proc-rusage" => self.rusage(r, s, ts, writer)?,
            "new-element" => self.new_element(r, s, ts, writer)?,
            "new-pad" => self.new_pad(r, s, ts, writer)?,
            "buffer" | "event" | "query" | "message" | "element-query" => {
                self.element_record(r, s, ts, writer)?
            }
            _ => false,
        };
        if !done {
            if RULES.contains(&s.name) {
                self.uninterpreted += 1;
            }
            // A record of no rule (or lacking what its rule needs): its own punctual type on its
            // thread, the structure kept whole.
            let thread = self.thread(r.pid, r.thread, r.ts, writer)?;
            let name = format!("tracer {}", s.name);
            self.push(
                EventCategory::Punctual,
                &name,
                vec![("structure", ParamValue::String(r.message.to_string()))],
                (r.ts, thread),
                EventKind::Punctual,
                writer,
            )?;
        }
        Ok(())
    }

    /// A `latency` record: a link from the source to the sink element, over the measured time.
    /// Whether the record had what the rule needs.
    fn latency(
        &mut self,
        r: &gst::Record<'_>,
        s: &gst::Structure<'_>,
        ts: i64,
        writer: &mut TraceWriter,
    ) -> Result<bool> {
        let interpreted = match (
            field_text(s, "src-element"),
            field_text(s, "sink-element"),
            field_ns(s, "time"),
        ) {
            (Some(src), Some(sink), Some(t)) => {
                let from = self.element(
                    r.pid,
                    field_text(s, "src-element-id").as_deref(),
                    &src,
                    writer,
                )?;
                let to = self.element(
                    r.pid,
                    field_text(s, "sink-element-id").as_deref(),
                    &sink,
                    writer,
                )?;
                let params = vec![
                    (
                        "src",
                        ParamValue::String(field_text(s, "src").unwrap_or_default()),
                    ),
                    (
                        "sink",
                        ParamValue::String(field_text(s, "sink").unwrap_or_default()),
                    ),
                    ("time", ParamValue::Unsigned(t as u64)),
                ];
                let start = ts.saturating_sub(t);
                self.push(
                    EventCategory::Link,
                    "latency",
                    params,
                    (start, from),
                    EventKind::Link {
                        end: ts,
                        target: to,
                    },
                    writer,
                )?;
                true
            }
            _ => false,
        };
        Ok(interpreted)
    }

    /// An `interlatency` record: a link between the elements of two pads, over the measured time.
    /// Whether the record had what the rule needs.
    fn interlatency(
        &mut self,
        r: &gst::Record<'_>,
        s: &gst::Structure<'_>,
        ts: i64,
        writer: &mut TraceWriter,
    ) -> Result<bool> {
        let interpreted = match (
            field_text(s, "from_pad"),
            field_text(s, "to_pad"),
            field_ns(s, "time"),
        ) {
            (Some(from_pad), Some(to_pad), Some(t)) => {
                let from_name = self.pad_element(&from_pad).to_string();
                let to_name = self.pad_element(&to_pad).to_string();
                let from = self.element(r.pid, None, &from_name, writer)?;
                let to = self.element(r.pid, None, &to_name, writer)?;
                let params = vec![
                    ("from_pad", ParamValue::String(from_pad)),
                    ("to_pad", ParamValue::String(to_pad)),
                    ("time", ParamValue::Unsigned(t as u64)),
                ];
                self.push(
                    EventCategory::Link,
                    "interlatency",
                    params,
                    (ts.saturating_sub(t), from),
                    EventKind::Link {
                        end: ts,
                        target: to,
                    },
                    writer,
                )?;
                true
            }
            _ => false,
        };
        Ok(interpreted)
    }

    /// An `element-latency` or `proctime` record: a state of the element, over the measured time.
    /// Whether the record had what the rule needs.
    fn element_time(
        &mut self,
        r: &gst::Record<'_>,
        s: &gst::Structure<'_>,
        ts: i64,
        writer: &mut TraceWriter,
    ) -> Result<bool> {
        let interpreted = match (field_text(s, "element"), field_ns(s, "time")) {
            (Some(name), Some(t)) => {
                let el =
                    self.element(r.pid, field_text(s, "element-id").as_deref(), &name, writer)?;
                let start = ts.saturating_sub(t);
                let depth = self.row(el, start, ts);
                let mut params = Vec::new();
                if let Some(src) = field_text(s, "src") {
                    params.push(("src", ParamValue::String(src)));
                }
                params.push(("time", ParamValue::Unsigned(t as u64)));
                self.push(
                    EventCategory::State,
                    s.name,
                    params,
                    (start, el),
                    EventKind::State { end: ts, depth },
                    writer,
                )?;
                true
            }
            _ => false,
        };
        Ok(interpreted)
    }

    /// An `element-reported-latency` record: a punctual event of the element with its bounds.
    /// Whether the record had what the rule needs.
    fn reported_latency(
        &mut self,
        r: &gst::Record<'_>,
        s: &gst::Structure<'_>,
        ts: i64,
        writer: &mut TraceWriter,
    ) -> Result<bool> {
        let interpreted = match field_text(s, "element") {
            Some(name) => {
                let el =
                    self.element(r.pid, field_text(s, "element-id").as_deref(), &name, writer)?;
                let params = vec![
                    (
                        "live",
                        ParamValue::String(field_text(s, "live").unwrap_or_default()),
                    ),
                    (
                        "min",
                        ParamValue::Unsigned(field_u64(s, "min").unwrap_or(0)),
                    ),
                    (
                        "max",
                        ParamValue::Unsigned(field_u64(s, "max").unwrap_or(0)),
                    ),
                ];
                self.push(
                    EventCategory::Punctual,
                    s.name,
                    params,
                    (ts, el),
                    EventKind::Punctual,
                    writer,
                )?;
                true
            }
            None => false,
        };
        Ok(interpreted)
    }

    /// A `thread-rusage` or `proc-rusage` record: the thread's or process's three CPU variables.
    /// Whether the record had what the rule needs.
    fn rusage(
        &mut self,
        r: &gst::Record<'_>,
        s: &gst::Structure<'_>,
        ts: i64,
        writer: &mut TraceWriter,
    ) -> Result<bool> {
        let producer = if s.name == "thread-rusage" {
            match field_u64(s, "thread-id") {
                Some(t) => Some(self.thread(r.pid, &format!("{t:#x}"), ts, writer)?),
                None => None,
            }
        } else {
            let pid = field_u64(s, "process-id").unwrap_or(r.pid);
            Some(self.process(pid, writer)?)
        };
        let values = [
            ("current-cpuload", field_u64(s, "current-cpuload")),
            ("average-cpuload", field_u64(s, "average-cpuload")),
            ("cpu-time", field_u64(s, "time")),
        ];
        let interpreted = match producer {
            Some(p) if values.iter().all(|v| v.1.is_some()) => {
                for (name, v) in values {
                    let value = v.unwrap_or(0) as f64;
                    self.push(
                        EventCategory::Variable,
                        name,
                        Vec::new(),
                        (ts, p),
                        EventKind::Variable { value },
                        writer,
                    )?;
                }
                true
            }
            _ => false,
        };
        Ok(interpreted)
    }

    /// A `new-element` record (stats tracer): the element, its index kept for later records.
    /// Whether the record had what the rule needs.
    fn new_element(
        &mut self,
        r: &gst::Record<'_>,
        s: &gst::Structure<'_>,
        ts: i64,
        writer: &mut TraceWriter,
    ) -> Result<bool> {
        let interpreted = match (field_u64(s, "ix"), field_text(s, "name")) {
            (Some(ix), Some(name)) => {
                self.element_ix.insert(ix, name.clone());
                let el = self.element(r.pid, Some(&format!("ix:{ix}")), &name, writer)?;
                let params = vec![
                    (
                        "type",
                        ParamValue::String(field_text(s, "type").unwrap_or_default()),
                    ),
                    (
                        "is-bin",
                        ParamValue::String(field_text(s, "is-bin").unwrap_or_default()),
                    ),
                ];
                self.push(
                    EventCategory::Punctual,
                    s.name,
                    params,
                    (ts, el),
                    EventKind::Punctual,
                    writer,
                )?;
                true
            }
            _ => false,
        };
        Ok(interpreted)
    }

    /// A `new-pad` record: the pad's full name, kept by its index; a punctual event of its element.
    /// Whether the record had what the rule needs.
    fn new_pad(
        &mut self,
        r: &gst::Record<'_>,
        s: &gst::Structure<'_>,
        ts: i64,
        writer: &mut TraceWriter,
    ) -> Result<bool> {
        let interpreted = match (
            field_u64(s, "ix"),
            field_text(s, "name"),
            field_u64(s, "parent-ix"),
        ) {
            (Some(ix), Some(name), Some(parent)) => {
                let element = self.element_ix.get(&parent).cloned();
                let el = match &element {
                    Some(e) => self.element(r.pid, Some(&format!("ix:{parent}")), e, writer)?,
                    None => self.thread(r.pid, r.thread, r.ts, writer)?,
                };
                let full = match &element {
                    Some(e) => format!("{e}:{name}"),
                    None => name.clone(),
                };
                self.pad_ix.insert(ix, full.clone());
                let params = vec![
                    ("pad", ParamValue::String(full)),
                    (
                        "direction",
                        ParamValue::String(field_text(s, "pad-direction").unwrap_or_default()),
                    ),
                ];
                self.push(
                    EventCategory::Punctual,
                    s.name,
                    params,
                    (ts, el),
                    EventKind::Punctual,
                    writer,
                )?;
                true
            }
            _ => false,
        };
        Ok(interpreted)
    }

    /// A `buffer`, `event`, `query`, `message` or `element-query` record of a known element: a link
    /// to the peer element for a buffer that has one, else a punctual event.
    /// Whether the record had what the rule needs.
    fn element_record(
        &mut self,
        r: &gst::Record<'_>,
        s: &gst::Structure<'_>,
        ts: i64,
        writer: &mut TraceWriter,
    ) -> Result<bool> {
        let interpreted = match field_u64(s, "element-ix")
            .and_then(|ix| self.element_ix.get(&ix).cloned().map(|n| (ix, n)))
        {
            Some((ix, name)) => {
                let el = self.element(r.pid, Some(&format!("ix:{ix}")), &name, writer)?;
                let pad = |k: &str| {
                    field_u64(s, k)
                        .and_then(|p| self.pad_ix.get(&p).cloned())
                        .unwrap_or_default()
                };
                let mut params = vec![("pad", ParamValue::String(pad("pad-ix")))];
                if let Some(n) = field_text(s, "name") {
                    params.push(("name", ParamValue::String(n)));
                }
                let peer = field_u64(s, "peer-element-ix")
                    .and_then(|p| self.element_ix.get(&p).cloned().map(|n| (p, n)));
                match (s.name, peer) {
                    ("buffer", Some((pix, pname))) => {
                        params.push(("peer-pad", ParamValue::String(pad("peer-pad-ix"))));
                        params.push((
                            "size",
                            ParamValue::Unsigned(field_u64(s, "buffer-size").unwrap_or(0)),
                        ));
                        let target =
                            self.element(r.pid, Some(&format!("ix:{pix}")), &pname, writer)?;
                        self.push(
                            EventCategory::Link,
                            "buffer",
                            params,
                            (ts, el),
                            EventKind::Link { end: ts, target },
                            writer,
                        )?;
                    }
                    _ => {
                        if s.name == "buffer" {
                            params.push((
                                "size",
                                ParamValue::Unsigned(field_u64(s, "buffer-size").unwrap_or(0)),
                            ));
                        }
                        self.push(
                            EventCategory::Punctual,
                            s.name,
                            params,
                            (ts, el),
                            EventKind::Punctual,
                            writer,
                        )?;
                    }
                }
                true
            }
            None => false,
        };
        Ok(interpreted)
    }
}
