//! ftrace and `trace-cmd report` text: read ahead on a thread of its own, records through the
//! [`Reconstructor`] as live capture.

use std::io::BufRead;
use std::path::Path;

use rustc_hash::{FxHashMap, FxHashSet};
use socscope_formats::{FormatError, ftrace};
use socscope_tracedb::{IngestStat, TraceWriter};
use socscope_wire::dict::{self as wdict, Builtin, Category};

use super::dictionary::{ImportRecord, ImportTypes, pinfo};
use super::{Lines, display, open, recon_stats, stat};
use crate::reconstruct::Reconstructor;
use crate::syscalls::SyscallAbi;
use crate::{CollectorError, Result};

fn parse_num(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s
            .parse()
            .ok()
            .or_else(|| s.parse::<i64>().ok().map(|v| v as u64)),
    }
}

/// Event names the rules map to built-in types (whose parameters are fixed): a kernel stack that
/// follows one of them is stored as an event of its own.
const MAPPED: [&str; 14] = [
    "print",
    "tracing_mark_write",
    "sched_switch",
    "sched_wakeup",
    "sched_waking",
    "sched_wakeup_new",
    "irq_handler_entry",
    "irq_handler_exit",
    "softirq_entry",
    "softirq_exit",
    "sys_enter",
    "sys_exit",
    "funcgraph_entry",
    "funcgraph_exit",
];

/// Records per batch handed from the reading thread to the importing one, and the most line text a
/// batch holds (whatever the lines' length, memory stays bounded).
const BATCH_RECORDS: usize = 4096;
const BATCH_BYTES: usize = 1 << 20;
/// Batches in existence: one being filled, one being imported, the others waiting either way.
const BATCHES: usize = 4;

/// A batch of the reading thread: the lines, and what the rules need of them that takes no state.
#[derive(Default)]
struct ReadBatch {
    lines: ftrace::RecordBatch,
    prepared: Prepared,
}

/// The parts of the ftrace rules that need no state, worked out on the reading thread (the importing
/// thread, which reconstructs and stores, is the busier one): per record of a batch, the first four
/// values of a syscall's arguments and the `key=value` pairs of an event.
#[derive(Default)]
pub(super) struct Prepared {
    /// Per record, in batch order: its syscall values, and the range of its pairs in `pairs`.
    records: Vec<([u64; 4], usize, usize)>,
    /// Each pair's key and value, as byte ranges of its record's arguments.
    pairs: Vec<[usize; 4]>,
}

impl Prepared {
    fn prepare(&mut self, lines: &ftrace::RecordBatch) {
        self.records.clear();
        self.pairs.clear();
        for r in lines.records() {
            self.push(&r);
        }
    }

    /// Prepares `r` alone (a binary capture's importer hands its records one at a time); then
    /// `get(0, args)`.
    pub(super) fn prepare_one(&mut self, r: &ftrace::Record<'_>) {
        self.records.clear();
        self.pairs.clear();
        self.push(r);
    }

    /// Record `i = 0` given its `key=value` pairs directly, as byte ranges (key, then value) of its
    /// arguments: what [`Self::prepare_one`] would find in them, known without reading them back
    /// (a binary capture's importer that wrote the arguments from decoded fields); then `get(0, args)`.
    pub(super) fn set_one(&mut self, pairs: &[[usize; 4]]) {
        self.records.clear();
        self.pairs.clear();
        self.pairs.extend_from_slice(pairs);
        self.records.push(([0; 4], 0, self.pairs.len()));
    }

    fn push(&mut self, r: &ftrace::Record<'_>) {
        let start = self.pairs.len();
        let mut values = [0; 4];
        match r.body {
            ftrace::Body::SyscallEnter { args, .. } => values = syscall_values(args),
            ftrace::Body::Event { name, args } if name.starts_with("sys_enter_") => {
                values = syscall_values(args);
            }
            ftrace::Body::Event { args, .. } => {
                let at = |s: &str| (s.as_ptr() as usize).saturating_sub(args.as_ptr() as usize);
                self.pairs.extend(
                    ftrace::Record::pairs(args)
                        .map(|(k, v)| [at(k), at(k) + k.len(), at(v), at(v) + v.len()]),
                );
            }
            ftrace::Body::SyscallExit { .. } => {}
        }
        self.records.push((values, start, self.pairs.len()));
    }

    /// Record `i` of the batch, whose arguments are `args`.
    pub(super) fn get<'a>(&'a self, i: usize, args: &'a str) -> PreparedRecord<'a> {
        let (values, from, to) = self.records.get(i).copied().unwrap_or_default();
        PreparedRecord {
            values,
            args,
            pairs: self.pairs.get(from..to).unwrap_or_default(),
        }
    }
}

/// What the reading thread prepared for one record.
#[derive(Clone, Copy)]
pub(super) struct PreparedRecord<'a> {
    /// A syscall entry's first four argument values.
    values: [u64; 4],
    args: &'a str,
    pairs: &'a [[usize; 4]],
}

impl<'a> PreparedRecord<'a> {
    /// The event's `key=value` pairs, as [`ftrace::Record::pairs`] gives them.
    fn pairs(&self) -> impl Iterator<Item = (&'a str, &'a str)> + use<'a> {
        let args = self.args;
        self.pairs.iter().map(move |p| {
            (
                args.get(p[0]..p[1]).unwrap_or(""),
                args.get(p[2]..p[3]).unwrap_or(""),
            )
        })
    }

    /// The value of `key` (its first pair).
    fn arg(&self, key: &str) -> Option<&'a str> {
        self.pairs().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// The values of `keys` (the first pair of each key), in one pass.
    fn args_of<const N: usize>(&self, keys: [&str; N]) -> [Option<&'a str>; N] {
        let mut out = [None; N];
        let mut missing = N;
        for (k, v) in self.pairs() {
            for (slot, key) in out.iter_mut().zip(keys) {
                if slot.is_none() && k == key {
                    *slot = Some(v);
                    missing -= 1;
                }
            }
            if missing == 0 {
                break;
            }
        }
        out
    }
}

/// A record, or an error, of an ftrace file read ahead.
enum ReadItem<'a> {
    Record {
        /// Bytes of the file before the record's line.
        bytes: u64,
        record: ftrace::Record<'a>,
        prepared: PreparedRecord<'a>,
        /// The frames of the `kernel_stack` event right after it on its CPU (`stack=F <- F...`),
        /// which the callee attaches to it (returning `true`: the stack is not handed on) or not.
        stack: Option<&'a str>,
    },
    /// A bad line, or the read error that ends the file.
    Error(FormatError),
}

/// Reads and parses `reader` on a thread of its own while `each` is called here, in file order, with
/// every record and every error (a bad line, or the read error that ends the file); returns the bytes
/// read. A `kernel_stack` record that `each` attached to the record before it (returning `true`) is
/// not handed on. An error of `each` stops both threads and is returned.
fn ftrace_read_ahead<R: BufRead + Send>(
    mut reader: ftrace::FtraceReader<R>,
    mut each: impl FnMut(ReadItem<'_>) -> Result<bool>,
) -> Result<u64> {
    use std::sync::mpsc;
    std::thread::scope(|scope| {
        let (full_tx, full_rx) = mpsc::sync_channel::<ReadBatch>(BATCHES);
        let (free_tx, free_rx) = mpsc::channel::<ReadBatch>();
        for _ in 0..BATCHES {
            // Cannot fail: the receiver is right here.
            let _ = free_tx.send(ReadBatch::default());
        }
        let reading = std::thread::Builder::new()
            .name("ftrace-reader".into())
            .spawn_scoped(scope, move || {
                // Ends at the end of the file, or when the importing side stopped (its ends of the
                // channels are gone).
                while let Ok(mut batch) = free_rx.recv() {
                    let more = reader.fill_batch(&mut batch.lines, BATCH_RECORDS, BATCH_BYTES);
                    batch.prepared.prepare(&batch.lines);
                    if full_tx.send(batch).is_err() || !more {
                        break;
                    }
                }
            })
            .map_err(|e| {
                CollectorError::Invalid(format!("cannot start the ftrace reading thread: {e}"))
            })?;
        let mut bytes = 0;
        for mut batch in full_rx.iter() {
            let ReadBatch { lines, prepared } = &mut batch;
            let mut i = 0;
            // The reader keeps a `kernel_stack` event in the batch of the event before it.
            let mut items = lines.drain().peekable();
            while let Some(item) = items.next() {
                match item {
                    ftrace::BatchLine::Record { bytes, record } => {
                        let args = match record.body {
                            ftrace::Body::Event { args, .. }
                            | ftrace::Body::SyscallEnter { args, .. } => args,
                            ftrace::Body::SyscallExit { ret, .. } => ret,
                        };
                        let prepared = prepared.get(i, args);
                        i += 1;
                        let stack = match items.peek() {
                            Some(ftrace::BatchLine::Record {
                                record:
                                    ftrace::Record {
                                        cpu,
                                        body:
                                            ftrace::Body::Event {
                                                name: "kernel_stack",
                                                args,
                                            },
                                        ..
                                    },
                                ..
                            }) if *cpu == record.cpu && args.starts_with("stack=") => {
                                Some(&args["stack=".len()..])
                            }
                            _ => None,
                        };
                        let attached = each(ReadItem::Record {
                            bytes,
                            record,
                            prepared,
                            stack,
                        })?;
                        if attached && stack.is_some() {
                            items.next();
                            i += 1;
                        }
                    }
                    ftrace::BatchLine::Error(e) => {
                        each(ReadItem::Error(e))?;
                    }
                }
            }
            drop(items);
            bytes = lines.bytes_read();
            // The reading thread may have finished already: nothing to hand back then.
            let _ = free_tx.send(batch);
        }
        reading
            .join()
            .map_err(|_| CollectorError::Invalid("the ftrace reading thread panicked".into()))?;
        Ok(bytes)
    })
}

/// Imports the ftrace file `path`.
pub(super) fn run(
    path: &Path,
    writer: &mut TraceWriter,
    lines: &mut Lines<'_, '_>,
) -> Result<Vec<IngestStat>> {
    let reader = ftrace::FtraceReader::new(open(path)?, display(path));
    let mut importer = FtraceImporter::new(writer)?;
    lines.bytes = ftrace_read_ahead(reader, |item| match item {
        ReadItem::Record {
            bytes,
            record,
            prepared,
            stack,
        } => {
            lines.progress(bytes);
            let attached = importer.record_with_stack(&record, &prepared, stack, writer)?;
            if attached {
                // The `kernel_stack` line is a record read too.
                lines.progress(bytes);
            }
            Ok(attached)
        }
        ReadItem::Error(e) => lines.bad(e).map(|()| false),
    })?;
    importer.finish(writer)
}

/// What an ftrace import keeps from line to line (the trace-cmd `.dat` importer hands it its records
/// too, rendered as `trace-cmd report` prints them, so both give the same trace).
pub(super) struct FtraceImporter {
    types: ImportTypes,
    recon: Reconstructor,
    names: FxHashMap<u64, (String, Option<u64>)>,
    /// Names each thread had before its current one.
    earlier: FxHashMap<u64, Vec<String>>,
    waking: FxHashSet<u64>,
    rec: ImportRecord,
    unknown_events: u64,
    /// Per custom punctual type: its parameter names, to place `key=value` pairs.
    keys: FxHashMap<u16, Vec<String>>,
    /// `key=value` pairs of the current line, reused from line to line.
    pairs_buf: Vec<(&'static str, &'static str)>,
    user_enter: u16,
    user_exit: u16,
    /// `function` states (function_graph tracer) and their exits.
    func_enter: u16,
    func_exit: u16,
    /// Per CPU: the end of a leaf call (`funcgraph_entry: 0.123 us | f();`) still to be written.
    leaf_ends: FxHashMap<u16, u64>,
    /// An event's arguments with the kernel stack that follows it, and what the rules need of
    /// them (buffers reused from stack to stack).
    stack_args: String,
    stack_prepared: Prepared,
}

impl FtraceImporter {
    pub(super) fn new(writer: &mut TraceWriter) -> Result<Self> {
        let mut types = ImportTypes::new();
        let mut recon = Reconstructor::new(1_000_000_000, 0, 1);
        recon.start(&types, writer)?;
        let user_enter = types
            .custom(
                "user_state",
                Category::StateEnter,
                || vec![pinfo("name", wdict::ParamType::String)],
                &mut recon,
                writer,
            )?
            .unwrap_or(0);
        let user_exit = types
            .custom(
                "user_state_exit",
                Category::StateExit { enter: user_enter },
                Vec::new,
                &mut recon,
                writer,
            )?
            .unwrap_or(0);
        let func_enter = types
            .custom(
                "function",
                Category::StateEnter,
                || vec![pinfo("name", wdict::ParamType::String)],
                &mut recon,
                writer,
            )?
            .unwrap_or(0);
        let func_exit = types
            .custom(
                "function_exit",
                Category::StateExit { enter: func_enter },
                || vec![pinfo("duration_ns", wdict::ParamType::Unsigned)],
                &mut recon,
                writer,
            )?
            .unwrap_or(0);
        Ok(Self {
            types,
            recon,
            names: FxHashMap::default(),
            earlier: FxHashMap::default(),
            waking: FxHashSet::default(),
            rec: ImportRecord::default(),
            unknown_events: 0,
            keys: FxHashMap::default(),
            pairs_buf: Vec::new(),
            user_enter,
            user_exit,
            func_enter,
            func_exit,
            leaf_ends: FxHashMap::default(),
            stack_args: String::new(),
            stack_prepared: Prepared::default(),
        })
    }

    /// Writes the end of the leaf call pending on `cpu`, at `ts` at the latest (the next record of the
    /// CPU comes after the call returned).
    fn end_leaf(&mut self, cpu: u16, ts: u64, writer: &mut TraceWriter) -> Result<()> {
        if let Some(end) = self.leaf_ends.remove(&cpu) {
            self.rec.set_id(self.func_exit).u(0);
            self.recon
                .record_at(cpu, end.min(ts), &self.rec, &self.types, writer)?;
        }
        Ok(())
    }

    /// `funcgraph_entry` / `funcgraph_exit`, as `trace-cmd report` prints them (`0.123 us | f();`,
    /// `| f() {`, `1.234 us | }`) or raw (`func=0xffffffff81234567 depth=1`): nested `function` states;
    /// a leaf call (`f();`) ends after its duration. `Some(end)` of a leaf call.
    fn funcgraph(&mut self, entry: bool, args: &str, ts: u64) -> Option<u64> {
        let (duration, call) = match args.split_once('|') {
            Some((d, c)) => (d.trim(), c.trim()),
            None => ("", args.trim()),
        };
        let duration_ns = {
            // `0.123 us`, possibly with an overhead mark (`+`, `!`, `#`...) before it.
            let d = duration.trim_start_matches(|c: char| !c.is_ascii_digit());
            let mut w = d.split_whitespace();
            match (w.next().and_then(|v| v.parse::<f64>().ok()), w.next()) {
                (Some(v), Some("us")) => Some((v * 1e3).round() as u64),
                (Some(v), Some("ms")) => Some((v * 1e6).round() as u64),
                (Some(v), Some("s")) => Some((v * 1e9).round() as u64),
                (Some(v), Some("ns")) => Some(v.round() as u64),
                _ => None,
            }
        };
        if !entry {
            self.rec.set_id(self.func_exit).u(duration_ns.unwrap_or(0));
            return None;
        }
        let name = match ftrace::Record::arg(call, "func") {
            Some(f) => f,
            None => call
                .trim_end_matches(['{', ';'])
                .trim()
                .trim_end_matches("()")
                .trim(),
        };
        self.rec.set_id(self.func_enter).s(name);
        if call.ends_with(';') {
            return Some(ts + duration_ns.unwrap_or(0));
        }
        None
    }

    fn name_thread(
        &mut self,
        pid: u64,
        comm: &str,
        tgid: Option<u64>,
        w: &mut TraceWriter,
    ) -> Result<()> {
        if comm.is_empty() || comm == "<...>" {
            return Ok(());
        }
        let known = self.names.get(&pid);
        if known.is_none_or(|(n, g)| n != comm || (tgid.is_some() && *g != tgid)) {
            // A name the thread had before (pid 0 is `<idle>` on event lines and `swapper/N` in
            // sched_switch fields): keep the current one instead of rewriting the producer at
            // every line that flips between the two.
            let same_group = known.is_some_and(|(_, g)| tgid.is_none() || *g == tgid);
            if same_group
                && self
                    .earlier
                    .get(&pid)
                    .is_some_and(|v| v.iter().any(|x| x == comm))
            {
                return Ok(());
            }
            let tgid = tgid.or(known.and_then(|k| k.1));
            if let Some((old, _)) = self.names.insert(pid, (comm.to_string(), tgid)) {
                let e = self.earlier.entry(pid).or_default();
                if e.len() < 8 && !e.contains(&old) {
                    e.push(old);
                }
            }
            self.recon.name_thread(pid, comm, tgid, w)?;
        }
        Ok(())
    }

    /// A `name: key=value ...` event of no rule (see [`punctual_kv`]).
    fn punctual(
        &mut self,
        name: &str,
        args: &str,
        prepared: &PreparedRecord<'_>,
        writer: &mut TraceWriter,
    ) -> Result<()> {
        self.pairs_buf = punctual_kv(
            name,
            args,
            prepared.pairs(),
            std::mem::take(&mut self.pairs_buf),
            &mut self.types,
            &mut self.keys,
            &mut self.rec,
            &mut self.recon,
            writer,
        )?;
        Ok(())
    }

    /// [`Self::record`], with the frames of the `kernel_stack` event that follows it, if any: attached
    /// as a `stack` parameter where [`Self::takes_stack`] says so (returns whether it was).
    fn record_with_stack(
        &mut self,
        line: &ftrace::Record<'_>,
        prepared: &PreparedRecord<'_>,
        stack: Option<&str>,
        writer: &mut TraceWriter,
    ) -> Result<bool> {
        let Some(stack) = stack else {
            self.record(line, prepared, writer)?;
            return Ok(false);
        };
        let ftrace::Body::Event { name, args } = line.body else {
            self.record(line, prepared, writer)?;
            return Ok(false);
        };
        if !self.takes_stack(name, args) {
            self.record(line, prepared, writer)?;
            return Ok(false);
        }
        let mut with_stack = std::mem::take(&mut self.stack_args);
        with_stack.clear();
        with_stack.push_str(args);
        with_stack.push_str(" stack=");
        with_stack.push_str(stack);
        let record = ftrace::Record {
            body: ftrace::Body::Event {
                name,
                args: &with_stack,
            },
            ..*line
        };
        let mut prepared = std::mem::take(&mut self.stack_prepared);
        prepared.prepare_one(&record);
        let done = self.record(&record, &prepared.get(0, &with_stack), writer);
        self.stack_prepared = prepared;
        self.stack_args = with_stack;
        done.map(|()| true)
    }

    /// Whether an event `name` with arguments `args` takes the kernel stack that follows it as a
    /// `stack` parameter: an event with `key=value` fields, of no built-in type (whose parameters
    /// are fixed), whose type was not declared without one. Otherwise the stack is an event of its
    /// own (`kernel_stack`, beside it).
    pub(super) fn takes_stack(&self, name: &str, args: &str) -> bool {
        !MAPPED.contains(&name)
            && !name.starts_with("sys_enter_")
            && !name.starts_with("sys_exit_")
            && ftrace::Record::pairs(args).next().is_some()
            && self
                .params_of(name)
                .is_none_or(|p| p.iter().any(|k| k == "stack"))
    }

    /// One line: its thread named, its record made by the method of its kind, then reconstructed.
    pub(super) fn record(
        &mut self,
        line: &ftrace::Record<'_>,
        prepared: &PreparedRecord<'_>,
        writer: &mut TraceWriter,
    ) -> Result<()> {
        self.record_by(line, prepared, false, writer)
    }

    /// [`Self::record`]; with `emitted_by_pid`, the record belongs to the line's thread (`pid`) rather
    /// than to the CPU's running thread (a user-space tracer's event names the thread that emitted
    /// it; a kernel event's task is only the thread it interrupted).
    pub(super) fn record_by(
        &mut self,
        line: &ftrace::Record<'_>,
        prepared: &PreparedRecord<'_>,
        emitted_by_pid: bool,
        writer: &mut TraceWriter,
    ) -> Result<()> {
        self.name_thread(line.pid, line.comm, line.tgid, writer)?;
        let ts = line.ts.max(0) as u64;
        if !self.leaf_ends.is_empty() {
            self.end_leaf(line.cpu, ts, writer)?;
        }
        let mut leaf_end = None;
        match line.body {
            ftrace::Body::Event { name, args }
                if name == "funcgraph_entry" || name == "funcgraph_exit" =>
            {
                leaf_end = self.funcgraph(name == "funcgraph_entry", args, ts);
            }
            ftrace::Body::Event { name, args } => self.event(line, name, args, prepared, writer)?,
            ftrace::Body::SyscallEnter { name, args } => self.syscall_enter(name, args, prepared),
            ftrace::Body::SyscallExit { name, ret } => self.syscall_exit(name, ret),
        }
        if emitted_by_pid {
            self.recon
                .record_by(line.cpu, ts, line.pid, &self.rec, &self.types, writer)?;
        } else {
            self.recon
                .record_at(line.cpu, ts, &self.rec, &self.types, writer)?;
        }
        if let Some(end) = leaf_end {
            self.leaf_ends.insert(line.cpu, end);
        }
        // An exiting thread leaves what it had open (decided in issue 11: see `thread_exited`).
        if let ftrace::Body::Event {
            name: "sched_process_exit",
            ..
        } = line.body
        {
            let pid = prepared.arg("pid").and_then(parse_num).unwrap_or(line.pid);
            self.recon.thread_exited(pid, ts, writer)?;
        }
        Ok(())
    }

    /// `sys_x(a: 1, b: 2)` of the syscall tracer.
    fn syscall_enter(&mut self, name: &str, args: &str, prepared: &PreparedRecord<'_>) {
        let name = name.strip_prefix("sys_").unwrap_or(name);
        syscall_enter(&mut self.rec, name, args, prepared.values);
    }

    /// `sys_x -> 0x24` of the syscall tracer.
    fn syscall_exit(&mut self, name: &str, ret: &str) {
        let ret = parse_num(ret).map_or(0, |v| v as i64);
        let name = name.strip_prefix("sys_").unwrap_or(name);
        syscall_exit(&mut self.rec, name, ret);
    }

    /// `sched_switch`: both threads named from its fields, then the switch.
    fn switch(
        &mut self,
        prev: u64,
        prev_comm: Option<&str>,
        next: u64,
        next_comm: Option<&str>,
        writer: &mut TraceWriter,
    ) -> Result<()> {
        if let Some(c) = prev_comm {
            self.name_thread(prev, c, None, writer)?;
        }
        if let Some(c) = next_comm {
            self.name_thread(next, c, None, writer)?;
        }
        self.rec.set(Builtin::ContextSwitch).u(prev).u(next);
        Ok(())
    }

    /// `sched_waking` / `sched_wakeup` / `sched_wakeup_new` of thread `pid`: a wake-up, unless it is
    /// the second report of one (`true`: the caller stores it as a punctual event).
    fn wakeup(
        &mut self,
        name: &str,
        pid: u64,
        comm: Option<&str>,
        writer: &mut TraceWriter,
    ) -> Result<bool> {
        if let Some(c) = comm {
            self.name_thread(pid, c, None, writer)?;
        }
        let duplicate = self.wakeup_is_duplicate(name, pid);
        // A kernel with both tracepoints reports one wake-up twice: waking, then wakeup.
        if duplicate {
            self.waking.remove(&pid);
        }
        if name == "sched_waking" {
            self.waking.insert(pid);
        }
        if !duplicate {
            self.rec.set(Builtin::Wakeup).u(pid);
        }
        Ok(duplicate)
    }

    /// Whether a `name` event waking `pid` reports again a wake-up a `sched_waking` reported.
    pub(super) fn wakeup_is_duplicate(&self, name: &str, pid: u64) -> bool {
        name == "sched_wakeup" && self.waking.contains(&pid)
    }

    fn irq_entry(&mut self, irq: u64, name: Option<&str>) {
        if let Some(n) = name {
            self.recon.name_hint(false, irq, format!("irq {irq} {n}"));
        }
        self.rec.set(Builtin::IrqEntry).u(irq);
    }

    fn softirq_entry(&mut self, vec: u64, action: Option<&str>) {
        if let Some(n) = action {
            self.recon.name_hint(true, vec, n);
        }
        self.rec.set(Builtin::SoftIrqEntry).a(vec);
    }

    /// A kernel event a binary capture decoded, mapped by the rules the text of its line would go
    /// through without being rendered and read back (the CTF importer's busiest events). Wake-ups
    /// that [`Self::wakeup_is_duplicate`] says are duplicates go the text way (they are stored
    /// with all their fields).
    pub(super) fn kernel_record(
        &mut self,
        task: &Task<'_>,
        record: KernelRecord<'_>,
        writer: &mut TraceWriter,
    ) -> Result<()> {
        self.name_thread(task.pid, task.comm, task.tgid, writer)?;
        if !self.leaf_ends.is_empty() {
            self.end_leaf(task.cpu, task.ts, writer)?;
        }
        match record {
            KernelRecord::Switch {
                prev,
                prev_comm,
                next,
                next_comm,
            } => self.switch(prev, Some(prev_comm), next, Some(next_comm), writer)?,
            KernelRecord::Wakeup { name, pid, comm } => {
                // Duplicates are the caller's to send the text way; one here is kept as a wake-up.
                let _ = self.wakeup(name, pid, Some(comm), writer)?;
            }
            KernelRecord::IrqEntry { irq, name } => self.irq_entry(irq, Some(name)),
            KernelRecord::IrqExit => {
                self.rec.set(Builtin::IrqExit);
            }
            KernelRecord::SoftIrqEntry { vec, action } => self.softirq_entry(vec, action),
            KernelRecord::SoftIrqExit => {
                self.rec.set(Builtin::SoftIrqExit);
            }
            KernelRecord::SyscallEnter { name, args } => {
                syscall_enter(&mut self.rec, name, args, syscall_values(args));
            }
            KernelRecord::SyscallExit { name, ret } => syscall_exit(&mut self.rec, name, ret),
        }
        self.recon
            .record_at(task.cpu, task.ts, &self.rec, &self.types, writer)?;
        Ok(())
    }

    /// A `name: args` event line.
    fn event(
        &mut self,
        line: &ftrace::Record<'_>,
        name: &str,
        args: &str,
        prepared: &PreparedRecord<'_>,
        writer: &mut TraceWriter,
    ) -> Result<()> {
        let rec = &mut self.rec;
        {
            {
                let arg = |k: &str| prepared.arg(k);
                match name {
                    "sched_switch" => {
                        let [prev_pid, next_pid, mut prev_comm, mut next_comm] =
                            prepared.args_of(["prev_pid", "next_pid", "prev_comm", "next_comm"]);
                        let mut prev = prev_pid.and_then(parse_num).unwrap_or(line.pid);
                        let mut next = next_pid.and_then(parse_num).unwrap_or(0);
                        // trace-cmd's plugin: `prev:1 [120] S ==> next:2 [120]`.
                        if prev_pid.is_none()
                            && next_pid.is_none()
                            && let Some((p, n)) = args.split_once(" ==> ")
                            && let (Some((pc, pp)), Some((nc, np))) =
                                (plugin_task(p), plugin_task(n))
                        {
                            (prev, next, prev_comm, next_comm) = (pp, np, Some(pc), Some(nc));
                        }
                        self.switch(prev, prev_comm, next, next_comm, writer)?;
                    }
                    "sched_wakeup" | "sched_waking" | "sched_wakeup_new"
                        if arg("pid").and_then(parse_num).is_some()
                            || plugin_task(args).is_some() =>
                    {
                        // `comm=a pid=1 ...`, or trace-cmd's plugin: `a:1 [120] success=1 CPU:002`.
                        let (comm, pid) = match arg("pid").and_then(parse_num) {
                            Some(pid) => (arg("comm"), pid),
                            None => plugin_task(args).map_or((None, 0), |(c, p)| (Some(c), p)),
                        };
                        if self.wakeup(name, pid, comm, writer)? {
                            self.punctual(name, args, prepared, writer)?;
                        }
                    }
                    "irq_handler_entry" => {
                        let irq = arg("irq").and_then(parse_num).unwrap_or(0);
                        self.irq_entry(irq, arg("name"));
                    }
                    "irq_handler_exit" => {
                        rec.set(Builtin::IrqExit);
                    }
                    "softirq_entry" => {
                        let vec = arg("vec").and_then(parse_num).unwrap_or(0);
                        self.softirq_entry(vec, arg("action"));
                    }
                    "softirq_exit" => {
                        rec.set(Builtin::SoftIrqExit);
                    }
                    "sys_enter" => {
                        // `NR 0 (3, 7ffe..., 10, 0, 0, 0)`
                        let mut w = args
                            .split(|c: char| c.is_whitespace() || c == '(' || c == ')' || c == ',')
                            .filter(|s| !s.is_empty());
                        let nr = w.nth(1).and_then(parse_num).unwrap_or(0);
                        rec.set(Builtin::SyscallEntry).u(nr);
                        for _ in 0..4 {
                            let v = w
                                .next()
                                .and_then(|x| u64::from_str_radix(x, 16).ok())
                                .unwrap_or(0);
                            rec.u(v);
                        }
                        // Raw events carry only the number: named from the x86-64 table (ftrace
                        // captures come from desktops and servers far more than from ARM boards).
                        rec.s(SyscallAbi::X86_64.name(nr).unwrap_or("")).s("");
                    }
                    "sys_exit" => {
                        // `NR 0 = 12`
                        let mut w = args.split_whitespace();
                        let nr = w.nth(1).and_then(parse_num).unwrap_or(0);
                        let ret = w.nth(1).and_then(|x| x.parse::<i64>().ok()).unwrap_or(0);
                        rec.set(Builtin::SyscallExit)
                            .u(nr)
                            .i(ret)
                            .s(SyscallAbi::X86_64.name(nr).unwrap_or(""));
                    }
                    n if n.starts_with("sys_enter_") => {
                        syscall_enter(rec, &n["sys_enter_".len()..], args, prepared.values);
                    }
                    n if n.starts_with("sys_exit_") => {
                        let ret = parse_num(args).map_or(0, |v| v as i64);
                        syscall_exit(rec, &n["sys_exit_".len()..], ret);
                    }
                    "tracing_mark_write" | "print" => {
                        let text = args.trim();
                        let text = text.strip_prefix("tracing_mark_write: ").unwrap_or(text);
                        if let Some(rest) = text.strip_prefix("B|") {
                            let label = rest.split_once('|').map_or("", |(_, n)| n);
                            rec.set_id(self.user_enter).s(label);
                        } else if text == "E" || text.starts_with("E|") {
                            rec.set_id(self.user_exit);
                        } else {
                            rec.set(Builtin::Marker).s(text);
                        }
                    }
                    _ => {
                        self.unknown_events += 1;
                        self.punctual(name, args, prepared, writer)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The parameter names of the punctual type of events `name`, once it is declared (on first sight,
    /// from that event's `key=value` pairs).
    pub(super) fn params_of(&self, name: &str) -> Option<&[String]> {
        let id = self.types.id_of(name)?;
        self.keys.get(&id).map(Vec::as_slice)
    }

    /// Closes what is still open; the import's statistics.
    pub(super) fn finish(mut self, writer: &mut TraceWriter) -> Result<Vec<IngestStat>> {
        let mut cpus: Vec<u16> = self.leaf_ends.keys().copied().collect();
        cpus.sort_unstable();
        for cpu in cpus {
            self.end_leaf(cpu, u64::MAX, writer)?;
        }
        self.recon.finish(writer)?;
        let mut stats = recon_stats(&self.recon, &self.types);
        stats.push(stat(
            "events_without_rule",
            self.unknown_events,
            "ftrace events stored as punctual events of their own type",
        ));
        stats.push(stat(
            "custom_types",
            self.types.custom_count() as u64,
            "event types declared for event names without a rule",
        ));
        Ok(stats)
    }
}

/// The task a binary capture's kernel event ran in, as an ftrace line's columns give it.
pub(super) struct Task<'a> {
    pub(super) cpu: u16,
    pub(super) ts: u64,
    pub(super) pid: u64,
    pub(super) comm: &'a str,
    pub(super) tgid: Option<u64>,
}

/// The values the ftrace rules read from a mapped kernel event's `key=value` text, decoded instead
/// (see [`FtraceImporter::kernel_record`]).
pub(super) enum KernelRecord<'a> {
    Switch {
        prev: u64,
        prev_comm: &'a str,
        next: u64,
        next_comm: &'a str,
    },
    Wakeup {
        name: &'a str,
        pid: u64,
        comm: &'a str,
    },
    IrqEntry {
        irq: u64,
        name: &'a str,
    },
    IrqExit,
    SoftIrqEntry {
        vec: u64,
        action: Option<&'a str>,
    },
    SoftIrqExit,
    /// `name` without `sys_enter_`; `args` as the syscall tracer prints them (`a: 0x1, b: 0x2`).
    SyscallEnter {
        name: &'a str,
        args: &'a str,
    },
    SyscallExit {
        name: &'a str,
        ret: i64,
    },
}

/// A syscall's exit: the call `name` returned `ret`.
fn syscall_exit(rec: &mut ImportRecord, name: &str, ret: i64) {
    let nr = SyscallAbi::X86_64.number(name).unwrap_or(0);
    rec.set(Builtin::SyscallExit).u(nr).i(ret).s(name);
}

/// `comm:pid [prio]...` of trace-cmd's `sched_switch` plugin (the comm may hold `:` and spaces): the
/// comm and the pid.
fn plugin_task(s: &str) -> Option<(&str, u64)> {
    let head = &s[..s.rfind(" [")?];
    let (comm, pid) = head.trim().rsplit_once(':')?;
    Some((comm, pid.parse().ok()?))
}

/// A syscall entry, `sys_x(a: 1, b: 2)` or `sys_enter_x: a: 0x1, b: 0x2`, whose first four argument
/// values are `values` ([`syscall_values`]).
fn syscall_enter(rec: &mut ImportRecord, name: &str, args: &str, values: [u64; 4]) {
    // The syscall tracer names the call; its x86-64 number is kept beside the name (0 when unknown).
    let nr = SyscallAbi::X86_64.number(name).unwrap_or(0);
    rec.set(Builtin::SyscallEntry).u(nr);
    for v in values {
        rec.u(v);
    }
    rec.s(name).s(args);
}

/// The first four values of a syscall's `a: 1, b: 2` arguments, in hex (0 for those missing): what
/// [`hex_value`] reads of each comma-separated part, on bytes for ASCII parts (the reading thread's
/// busiest rule: four values per syscall entry; a third fewer instructions than splitting `str`s).
fn syscall_values(args: &str) -> [u64; 4] {
    let mut out = [0; 4];
    let mut rest = args.as_bytes();
    for slot in &mut out {
        let end = rest.iter().position(|&b| b == b',').unwrap_or(rest.len());
        let part = &rest[..end];
        *slot = if part.is_ascii() {
            let value = match part.iter().rposition(|&b| b == b':') {
                Some(i) => &part[i + 1..],
                None => part,
            };
            ascii_hex_value(value)
        } else {
            // Unicode whitespace around the value: the `str` path trims it.
            std::str::from_utf8(part).map_or(0, hex_value)
        };
        if end == rest.len() {
            break;
        }
        rest = &rest[end + 1..];
    }
    out
}

/// [`hex_value`] of the ASCII value of a part (what follows its last `:`).
fn ascii_hex_value(v: &[u8]) -> u64 {
    // `str::trim`'s ASCII whitespace (vertical tab included, unlike `trim_ascii`).
    let ws = |b: &u8| matches!(b, b' ' | b'\t'..=b'\r');
    let from = v.iter().position(|b| !ws(b)).unwrap_or(v.len());
    let to = v.iter().rposition(|b| !ws(b)).map_or(from, |i| i + 1);
    let mut v = &v[from..to];
    while let Some(rest) = v.strip_prefix(b"0x") {
        v = rest;
    }
    // `u64::from_str_radix` takes one leading `+`.
    let digits = v.strip_prefix(b"+").unwrap_or(v);
    if digits.is_empty() {
        return 0;
    }
    let mut n: u64 = 0;
    for &b in digits {
        let d = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            b'A'..=b'F' => b - b'A' + 10,
            _ => return 0,
        };
        n = match n.checked_mul(16) {
            Some(m) => m | u64::from(d),
            None => return 0,
        };
    }
    n
}

/// The value of an `arg: value` pair read in hex (`0x` prefixes dropped), 0 when it is none.
fn hex_value(kv: &str) -> u64 {
    let mut v = kv.rsplit_once(':').map_or(kv, |(_, v)| v).trim();
    // A loop of `strip_prefix` rather than `trim_start_matches("0x")`, which sets up a substring
    // searcher at every call: four times a syscall.
    while let Some(rest) = v.strip_prefix("0x") {
        v = rest;
    }
    u64::from_str_radix(v, 16).unwrap_or(0)
}

/// An empty vector of pairs of any lifetime, keeping `v`'s allocation (collecting an emptied vector's
/// iterator into one of the same layout reuses its buffer).
fn recycle_pairs<'b>(mut v: Vec<(&str, &str)>) -> Vec<(&'b str, &'b str)> {
    v.clear();
    v.into_iter().map(|_| ("", "")).collect()
}

/// A `name: key=value ...` event of no rule as a punctual event of its own type; `pairs` is a buffer
/// (returned, emptied) so that no line allocates once the type is known.
#[allow(clippy::too_many_arguments)]
fn punctual_kv<'a>(
    name: &str,
    args: &'a str,
    arg_pairs: impl Iterator<Item = (&'a str, &'a str)>,
    pairs: Vec<(&'static str, &'static str)>,
    types: &mut ImportTypes,
    keys: &mut FxHashMap<u16, Vec<String>>,
    rec: &mut ImportRecord,
    recon: &mut Reconstructor,
    writer: &mut TraceWriter,
) -> Result<Vec<(&'static str, &'static str)>> {
    let mut pairs = recycle_pairs(pairs);
    pairs.extend(arg_pairs);
    let declared = |pairs: &[(&str, &str)]| -> Vec<String> {
        if pairs.is_empty() {
            vec!["text".to_string()]
        } else {
            pairs.iter().map(|(k, _)| k.to_string()).collect()
        }
    };
    let id = types.custom(
        name,
        Category::Punctual,
        || {
            declared(&pairs)
                .iter()
                .map(|k| pinfo(k, wdict::ParamType::String))
                .collect()
        },
        recon,
        writer,
    )?;
    let id = match id {
        Some(id) => id,
        None => {
            rec.set(Builtin::Marker).s(&format!("{name}: {args}"));
            return Ok(recycle_pairs(pairs));
        }
    };
    let names = keys.entry(id).or_insert_with(|| declared(&pairs));
    rec.set_id(id);
    for k in names.iter() {
        if k == "text" && pairs.is_empty() {
            rec.s(args);
        } else {
            let v = pairs.iter().find(|(pk, _)| pk == k).map_or("", |(_, v)| *v);
            rec.s(v);
        }
    }
    Ok(recycle_pairs(pairs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prepared_pairs_and_values_are_those_of_the_records() {
        let text = "a-1 [000] 1.0: sched_switch: prev_comm=a b prev_pid=1 ==> next_comm=c next_pid=2\n\
                    bad line\n\
                    a-1 [000] 1.5: sys_read(fd: 3, buf: 0x7ff, count: 10, x: 1, y: 2)\n\
                    a-1 [000] 2.0: sys_enter_openat: dfd: 0xffffff9c, filename: 0x7ffe2000\n\
                    a-1 [000] 2.5: sys_read -> 0x24\n\
                    a-1 [000] 3.0: softirq_raise: vec=1 [action=TIMER]\n";
        let mut reader = ftrace::FtraceReader::new(text.as_bytes(), "t");
        let mut lines = ftrace::RecordBatch::new();
        reader.fill_batch(&mut lines, 100, 1 << 20);
        let mut prepared = Prepared::default();
        prepared.prepare(&lines);
        let mut seen = 0;
        for (i, r) in lines.records().enumerate() {
            let (args, values) = match r.body {
                ftrace::Body::Event { name, args } if name.starts_with("sys_enter_") => {
                    (args, syscall_values(args))
                }
                ftrace::Body::SyscallEnter { args, .. } => (args, syscall_values(args)),
                ftrace::Body::Event { args, .. } => (args, [0; 4]),
                ftrace::Body::SyscallExit { ret, .. } => (ret, [0; 4]),
            };
            let p = prepared.get(i, args);
            assert_eq!(p.values, values);
            if let ftrace::Body::Event { name, .. } = r.body
                && !name.starts_with("sys_enter_")
            {
                assert!(p.pairs().eq(ftrace::Record::pairs(args)), "{args}");
                assert_eq!(
                    p.args_of(["next_pid", "prev_comm", "vec"]),
                    ["next_pid", "prev_comm", "vec"].map(|k| ftrace::Record::arg(args, k))
                );
            }
            seen += 1;
        }
        assert_eq!(seen, 5);
        assert_eq!(prepared.get(1, "").values, [3, 0x7ff, 0x10, 1]);
        assert_eq!(prepared.get(2, "").values, [0xffff_ff9c, 0x7ffe_2000, 0, 0]);
        assert_eq!(prepared.get(0, "").pairs.len(), 4);
    }

    #[test]
    fn syscall_values_read_in_hex() {
        for (kv, v) in [
            ("fd: ff", 0xff),
            (" buf: 0x7ffe0babe8fc", 0x7ffe_0bab_e8fc),
            ("0x0x1f", 0x1f),
            ("a: b: 10 ", 0x10),
            ("count", 0),
            ("x: ", 0),
            ("x: +a", 0xa),
            ("x: -1", 0),
            ("x: 1ffffffffffffffff", 0),
            ("x:\u{a0}c\u{2003}", 0xc),
        ] {
            let old = {
                let v = kv.rsplit(':').next().unwrap_or("").trim();
                u64::from_str_radix(v.trim_start_matches("0x"), 16).unwrap_or(0)
            };
            assert_eq!((hex_value(kv), old), (v, v), "{kv:?}");
        }
    }

    /// The split-and-trim reading the byte scan replaced.
    fn syscall_values_by_str(args: &str) -> [u64; 4] {
        let mut values = args.split(',').map(hex_value);
        std::array::from_fn(|_| values.next().unwrap_or(0))
    }

    #[test]
    fn syscall_values_scan_reads_what_the_str_split_reads() {
        for args in [
            "fd: ff, cmd: 5410, arg: 7ffe0babe8fc",
            "how: 2, nset: 7ffe0babe990, oset: 0, sigsetsize: 8, extra: 1",
            "",
            ",",
            ",,,,",
            "a: 0x0x1f,b: +a,c: -1,d: 1ffffffffffffffff",
            "x:\u{a0}c\u{2003}, y: 10",
            "a: 10:, b: :, c: FFFF, d: fF",
            "a: 1 2, b: 0x, c: +, d: ++1",
            "a: \t\n1f\r, b: 0X10, c: \x0b7\x0c",
            "no colon at all",
            "é: 12, b: 3",
        ] {
            assert_eq!(
                syscall_values(args),
                syscall_values_by_str(args),
                "{args:?}"
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn syscall_values_scan_agrees_on_any_text(args in "[ -~\t\x0b\x1f\u{a0}\u{2003}é]{0,60}") {
            proptest::prop_assert_eq!(syscall_values(&args), syscall_values_by_str(&args));
        }
    }
}
