//! trace-cmd `.dat` captures: each record rendered as `trace-cmd report` prints it and handed to the
//! ftrace importer ([`FtraceImporter`]), so a capture imported as `.dat` or as its report's text gives
//! the same trace; `kernel_stack` records attached to the event they follow; kernel ring-buffer losses
//! stored as losses.

use std::fmt::Write;
use std::fs::File;
use std::io::BufReader;

use socscope_formats::ftrace;
use socscope_formats::tracecmd::{DatEvent, DatReader};
use socscope_tracedb::{IngestStat, LossRecord, TraceWriter};

use super::ftrace::{FtraceImporter, Prepared};
use super::{Lines, stat};
use crate::Result;

/// An event read but not yet imported: a `kernel_stack` record may follow it.
#[derive(Default)]
struct Held {
    cpu: u16,
    ts: i64,
    pid: u64,
    comm: String,
    name: String,
    args: String,
    full: bool,
}

/// Imports the `.dat` file `path`.
pub(super) fn run(
    mut reader: DatReader<BufReader<File>>,
    writer: &mut TraceWriter,
    lines: &mut Lines<'_, '_>,
) -> Result<Vec<IngestStat>> {
    let mut imp = DatImporter {
        ftrace: FtraceImporter::new(writer)?,
        prepared: Prepared::default(),
        held: Held::default(),
        stack: Held::default(),
        unparsed: 0,
        stacks_attached: 0,
        stacks_alone: 0,
        damaged: 0,
        losses: 0,
        lost_events: 0,
    };
    loop {
        let bytes = reader.bytes();
        let event = match reader.next_event() {
            Ok(Some(e)) => {
                lines.progress(bytes);
                e
            }
            Ok(None) => break,
            Err(e) => {
                imp.damaged += 1;
                lines.damaged(e)?;
                continue;
            }
        };
        imp.event(&event, writer)?;
        for loss in reader.take_losses() {
            imp.losses += 1;
            imp.lost_events += loss.count.unwrap_or(0);
            writer.add_loss(&LossRecord {
                cpu: u16::try_from(loss.cpu).ok(),
                ts: i64::try_from(loss.ts).unwrap_or(i64::MAX),
                count: loss.count.unwrap_or(0),
                seq_from: None,
                seq_to: None,
                reason: match loss.count {
                    Some(_) => "kernel ring buffer full (trace-cmd page flag)".into(),
                    None => {
                        "kernel ring buffer full (trace-cmd page flag; count not stored)".into()
                    }
                },
            })?;
        }
    }
    imp.flush(writer)?;
    lines.bytes = reader.bytes();
    let mut stats = imp.ftrace.finish(writer)?;
    let info = reader.info();
    stats.extend([
        stat(
            "dat.unparsed_print_formats",
            imp.unparsed,
            "records whose print format could not be applied: stored as their fields, name=value",
        ),
        stat(
            "dat.stacks_attached",
            imp.stacks_attached,
            "kernel_stack records stored as the `stack` parameter of the event they follow",
        ),
        stat(
            "dat.stacks_alone",
            imp.stacks_alone,
            "kernel_stack records stored as events of their own (they follow a mapped event)",
        ),
        stat(
            "dat.damaged_cpu_streams",
            imp.damaged,
            "CPU streams cut short by damage (their events before it kept)",
        ),
        stat(
            "dat.lost_pages",
            imp.losses,
            "ring-buffer pages flagged as following lost events",
        ),
        stat(
            "dat.lost_events",
            imp.lost_events,
            "events the kernel counted as lost",
        ),
        stat(
            "dat.other_instances",
            info.other_instances.len() as u64,
            "buffer instances besides the one read (not imported)",
        ),
    ]);
    Ok(stats)
}

struct DatImporter {
    ftrace: FtraceImporter,
    prepared: Prepared,
    held: Held,
    /// Buffers of the stack being rendered.
    stack: Held,
    unparsed: u64,
    stacks_attached: u64,
    stacks_alone: u64,
    damaged: u64,
    losses: u64,
    lost_events: u64,
}

impl DatImporter {
    fn event(&mut self, e: &DatEvent<'_>, writer: &mut TraceWriter) -> Result<()> {
        let name = e.name();
        if name == "kernel_stack" {
            let text = &mut self.stack.args;
            text.clear();
            for (i, a) in e.stack().into_iter().enumerate() {
                if i > 0 {
                    text.push_str(" <- ");
                }
                // As `trace-cmd report` prints a frame (`=> schedule (ffffffc0006f6628)`), so that
                // the report's text gives the same parameter.
                match e.symbol(a) {
                    Some((f, _)) => {
                        let _ = write!(text, "{f} ({a:x})");
                    }
                    None => {
                        let _ = write!(text, "{a:x}");
                    }
                }
            }
            // Attached as a `stack` parameter where the event's type has or will have one (the
            // ftrace text importer's rule for the same stack in the report's text).
            let h = &self.held;
            let follows =
                h.full && h.cpu == e.cpu as u16 && self.ftrace.takes_stack(&h.name, h.args.trim());
            if follows {
                self.held.args.push_str(" stack=");
                self.held.args.push_str(&self.stack.args);
                self.stacks_attached += 1;
                return Ok(());
            }
            // Kept, beside the event it follows.
            self.flush(writer)?;
            self.stacks_alone += 1;
            let h = &mut self.held;
            h.full = true;
            h.cpu = e.cpu as u16;
            h.ts = e.ts as i64;
            h.pid = e.pid as u64;
            h.comm.clear();
            h.comm.push_str(e.comm());
            h.name.clear();
            h.name.push_str("kernel_stack");
            h.args.clear();
            h.args.push_str("stack=");
            h.args.push_str(&self.stack.args);
            return Ok(());
        }
        self.flush(writer)?;
        let h = &mut self.held;
        h.full = true;
        h.cpu = e.cpu as u16;
        h.ts = e.ts as i64;
        h.pid = e.pid as u64;
        h.comm.clear();
        h.comm.push_str(e.comm());
        h.name.clear();
        h.name.push_str(&name);
        h.args.clear();
        match &*name {
            // The function_graph tracer's records, in the shapes the ftrace importer reads (trace-cmd's
            // plugin joins entries and exits with a look-ahead instead).
            "funcgraph_entry" => {
                let func = e.field("func").map_or(0, |v| v.as_u64());
                let depth = e.field("depth").map_or(0, |v| v.as_u64() as i64);
                match e.symbol(func) {
                    Some((f, _)) => {
                        let _ = write!(h.args, "func={f} depth={depth}");
                    }
                    None => {
                        let _ = write!(h.args, "func=0x{func:x} depth={depth}");
                    }
                }
            }
            "funcgraph_exit" => {
                let (Some(call), Some(ret)) = (e.field("calltime"), e.field("rettime")) else {
                    h.args.push('}');
                    return Ok(());
                };
                let ns = ret.as_u64().saturating_sub(call.as_u64());
                let _ = write!(h.args, "{}.{:03} us |  }}", ns / 1000, ns % 1000);
            }
            _ => {
                if !e.render(&mut h.args) {
                    self.unparsed += 1;
                }
            }
        }
        Ok(())
    }

    /// Imports the held event.
    fn flush(&mut self, writer: &mut TraceWriter) -> Result<()> {
        let h = &mut self.held;
        if !h.full {
            return Ok(());
        }
        h.full = false;
        let record = ftrace::Record {
            comm: &h.comm,
            pid: h.pid,
            tgid: None,
            cpu: h.cpu,
            flags: None,
            ts: h.ts,
            body: ftrace::Body::Event {
                name: &h.name,
                args: h.args.trim(),
            },
        };
        self.prepared.prepare_one(&record);
        let prepared = self.prepared.get(0, h.args.trim());
        self.ftrace.record(&record, &prepared, writer)
    }
}

/// What a `.dat` file's header says, for the trace's description.
pub(super) struct DatHeader {
    pub(super) board: String,
    pub(super) os: String,
    pub(super) cpus: u32,
    pub(super) params: Vec<(String, String)>,
}

/// Reads the header and options of `path`.
pub(super) fn header(r: &DatReader<BufReader<File>>) -> DatHeader {
    let i = r.info();
    // `Linux host 6.1.0 #1 SMP ... x86_64`.
    let mut uname = i.uname.as_deref().unwrap_or("").split_whitespace();
    let (sys, host, release) = (uname.next(), uname.next(), uname.next());
    let os = match (sys, release) {
        (Some(s), Some(r)) => format!("{s} {r}"),
        _ => String::new(),
    };
    let mut params = vec![
        ("dat_version".to_string(), i.version.to_string()),
        ("compression".to_string(), i.compression_text.clone()),
    ];
    if let Some(c) = &i.clock {
        params.push(("trace_clock".into(), c.clone()));
    }
    if let Some(v) = &i.tracer_version {
        params.push(("trace_cmd_version".into(), v.clone()));
    }
    if let Some(u) = &i.uname {
        params.push(("uname".into(), u.clone()));
    }
    DatHeader {
        board: host.unwrap_or("").to_string(),
        os,
        cpus: i.cpus.max(1),
        params,
    }
}
