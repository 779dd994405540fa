//! GStreamer `GST_DEBUG` logs: one process producer per pid, one thread producer per thread address;
//! every line a punctual event of its level, and each thread's level between its lines a state.

use std::collections::HashMap;
use std::path::Path;

use socscope_formats::gst;
use socscope_tracedb::{
    Event, EventCategory, EventKind, EventType, IngestStat, ParamDef, ParamType, ParamValue,
    Producer, ProducerId, ProducerKind, TraceWriter, TypeId,
};

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
        importer.debug_line(&r, writer)?;
        lines.progress(reader.bytes());
    }
    lines.bytes = reader.bytes();
    importer.finish(writer)
}

/// The store type of the level state `level` (index in [`gst::LEVELS`]).
const LEVEL_STATES: TypeId = 101;

/// What a GStreamer import keeps from line to line.
struct GstImporter {
    processes: HashMap<u64, ProducerId>,
    /// (pid, thread) → (producer, since when in its level, level).
    threads: HashMap<(u64, String), (ProducerId, i64, TypeId)>,
    next: ProducerId,
    last_ts: i64,
    ev: Event,
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

    /// A debug line: a punctual event of its level on its thread, and the thread's previous level
    /// closed as a state.
    fn debug_line(&mut self, r: &gst::Record<'_>, writer: &mut TraceWriter) -> Result<()> {
        let level = gst::LEVELS.iter().position(|l| *l == r.level).unwrap_or(0) as TypeId;
        let process = self.process(r.pid, writer)?;
        let key = (r.pid, r.thread.to_string());
        let producer = match self.threads.get_mut(&key) {
            Some(t) => {
                // The thread was in its previous line's level until now.
                self.ev = Event::state(t.1, r.ts.max(t.1), 0, t.2 + LEVEL_STATES, t.0, None);
                writer.push(&self.ev)?;
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
        let mut open: Vec<&(ProducerId, i64, TypeId)> = self.threads.values().collect();
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
        Ok(vec![stat(
            "threads",
            self.threads.len() as u64,
            "GStreamer threads",
        )])
    }
}
