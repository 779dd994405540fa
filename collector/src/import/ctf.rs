//! CTF traces (LTTng kernel and user space, perf's CTF): each event handed to the ftrace importer
//! ([`FtraceImporter`]) in the shape an ftrace capture gives it — LTTng's `sched_switch`,
//! `sched_waking`/`sched_wakeup`, `irq_handler_*`, `softirq_*` and syscalls become the same states and
//! links; statedump events name the processes and threads; every other event (user-space ones
//! included) is a punctual event with its fields, a user-space one on the thread that emitted it (its
//! `vtid` context) — and the tracer's discarded events and lost packets stored as losses.

use std::borrow::Cow;
use std::fmt::Write;

use socscope_formats::ctf::{CtfEvent, CtfReader, Value, field_name};
use socscope_formats::ftrace;
use socscope_tracedb::{IngestStat, LossRecord, TraceWriter};

use super::ftrace::{FtraceImporter, KernelRecord, Prepared, Task};
use super::{Lines, stat};
use crate::Result;

/// Soft-IRQ vector names (the kernel's `softirq_to_name`), as ftrace prints them.
const SOFTIRQS: [&str; 10] = [
    "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU",
];

/// Imports the CTF trace (or session) directory `dir`.
pub(super) fn run(
    mut reader: CtfReader,
    writer: &mut TraceWriter,
    lines: &mut Lines<'_, '_>,
) -> Result<Vec<IngestStat>> {
    for s in &reader.missing_streams {
        lines.damaged(socscope_formats::FormatError::Binary(
            socscope_formats::BinaryError::new(
                s,
                None,
                0,
                "stream missing: the trace's index names it, its file is not there",
            ),
        ))?;
    }
    // Kernel traces name events `system:event` (perf) or bare (LTTng): the system is dropped for the
    // rules; user-space `provider:event` names are kept whole.
    let kernel: Vec<bool> = reader
        .traces()
        .iter()
        .map(|t| t.metadata.env("domain") != Some("ust"))
        .collect();
    let mut imp = CtfImporter {
        ftrace: FtraceImporter::new(writer)?,
        prepared: Prepared::default(),
        args: String::new(),
        fields_pairs: Vec::new(),
        fields_direct: false,
        comm: String::new(),
        damaged: 0,
        discarded: 0,
        loss_reports: 0,
    };
    loop {
        let bytes = reader.bytes();
        let e = match reader.next_event() {
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
        imp.event(&e, kernel.get(e.trace).copied().unwrap_or(true), writer)?;
        reader.recycle(e);
        for loss in reader.take_losses() {
            imp.loss_reports += 1;
            imp.discarded += loss.count;
            let stream = reader
                .streams()
                .get(loss.stream)
                .map_or_else(String::new, |s| s.name.clone());
            let reason = if loss.packets > 0 {
                // How many events the lost packets held is unknown: the row counts none, says so.
                format!(
                    "{} packets lost (CTF packet_seq_num jump, stream {stream}; their events not \
                     counted) between {} and {} ns",
                    loss.packets, loss.from_ns, loss.to_ns
                )
            } else {
                format!(
                    "discarded by the tracer (CTF events_discarded, stream {stream}) between {} and \
                     {} ns",
                    loss.from_ns, loss.to_ns
                )
            };
            writer.add_loss(&LossRecord {
                cpu: loss.cpu.and_then(|c| u16::try_from(c).ok()),
                ts: loss.from_ns,
                count: loss.count,
                seq_from: None,
                seq_to: None,
                reason,
            })?;
        }
    }
    lines.bytes = reader.bytes();
    let missing_packets: u64 = reader.streams().iter().map(|s| s.missing_packets).sum();
    let packets: u64 = reader.streams().iter().map(|s| s.packets).sum();
    let mut stats = imp.ftrace.finish(writer)?;
    stats.extend([
        stat("ctf.streams", reader.streams().len() as u64, "CTF stream files read"),
        stat("ctf.packets", packets, "CTF packets read"),
        stat(
            "ctf.missing_packets",
            missing_packets,
            "packets the streams' packet_seq_num says are missing",
        ),
        stat(
            "ctf.missing_streams",
            reader.missing_streams.len() as u64,
            "streams named by the index but not in the directory",
        ),
        stat(
            "ctf.damaged",
            imp.damaged,
            "damaged packets or events (the events before kept; the rest of a damaged packet skipped)",
        ),
        stat(
            "ctf.discarded_events",
            imp.discarded,
            "events the tracer discarded (packet contexts' events_discarded), stored as losses",
        ),
    ]);
    Ok(stats)
}

struct CtfImporter {
    ftrace: FtraceImporter,
    prepared: Prepared,
    args: String,
    /// The `key=value` pairs [`CtfImporter::fields`] wrote in `args`, as byte ranges (see
    /// [`Prepared::set_one`]), when reading them back would give exactly these (`fields_direct`).
    fields_pairs: Vec<[usize; 4]>,
    fields_direct: bool,
    comm: String,
    damaged: u64,
    discarded: u64,
    loss_reports: u64,
}

/// `v` as text for a `key=value` pair: strings bare, arrays compact (`[1,2,3]`).
fn text(v: &Value, out: &mut String) {
    match v {
        Value::Str(s) => out.push_str(s),
        Value::Enum(n, Some(l)) => {
            let _ = write!(out, "{l}({n})");
        }
        Value::Enum(n, None) => {
            let _ = write!(out, "{n}");
        }
        Value::Array(items) => {
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                text(x, out);
            }
            out.push(']');
        }
        Value::Struct(f) => {
            out.push('{');
            for (i, (n, x)) in f.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let _ = write!(out, "{}:", field_name(n));
                text(x, out);
            }
            out.push('}');
        }
        Value::Variant(_, x) => text(x, out),
        other => {
            let _ = write!(out, "{other}");
        }
    }
}

fn int(e: &CtfEvent, name: &str) -> Option<i128> {
    e.field(name).and_then(Value::as_i128)
}

fn string<'e>(e: &'e CtfEvent, name: &str) -> Option<&'e str> {
    match e.field(name)? {
        Value::Str(s) => Some(s),
        _ => None,
    }
}

impl CtfImporter {
    fn event(&mut self, e: &CtfEvent, kernel: bool, writer: &mut TraceWriter) -> Result<()> {
        let full = &*e.name;
        let name = if kernel {
            full.rsplit_once(':').map_or(full, |(_, n)| n)
        } else {
            full
        };
        self.args.clear();
        self.fields_direct = false;
        self.comm.clear();
        // The thread: user-space contexts name it, and a user-space event belongs to it (the thread that
        // emitted it); a kernel event belongs to the CPU's running thread (its `tid` context, when
        // added, is only the thread an interrupt interrupted).
        let context_tid = e
            .context_field("vtid")
            .or_else(|| e.context_field("tid"))
            .and_then(Value::as_i128);
        let emitted_by_thread = !kernel && context_tid.is_some();
        let mut pid = context_tid.unwrap_or(0) as u64;
        let mut tgid = e
            .context_field("vpid")
            .or_else(|| e.context_field("pid"))
            .and_then(Value::as_i128)
            .map(|v| v as u64);
        if let Some(Value::Str(p)) = e.context_field("procname") {
            self.comm.push_str(p);
        }
        let tid = |e: &CtfEvent, lttng: &str, perf: &str| int(e, lttng).or_else(|| int(e, perf));
        let cpu = e.cpu.and_then(|c| u16::try_from(c).ok()).unwrap_or(0);
        // The busiest kernel events go to the ftrace rules with their decoded values; the rest as
        // the `key=value` text of an ftrace line (their fields become the event's parameters).
        let direct = if !kernel || emitted_by_thread {
            None
        } else {
            match name {
                "sched_switch" => Some(KernelRecord::Switch {
                    prev: tid(e, "prev_tid", "prev_pid").unwrap_or(0) as u64,
                    prev_comm: string(e, "prev_comm").unwrap_or(""),
                    next: tid(e, "next_tid", "next_pid").unwrap_or(0) as u64,
                    next_comm: string(e, "next_comm").unwrap_or(""),
                }),
                "sched_wakeup" | "sched_waking" | "sched_wakeup_new" => {
                    let woken = tid(e, "tid", "pid").unwrap_or(0) as u64;
                    // A duplicate report is stored with its fields: the text way.
                    (!self.ftrace.wakeup_is_duplicate(name, woken)).then(|| KernelRecord::Wakeup {
                        name,
                        pid: woken,
                        comm: string(e, "comm").unwrap_or(""),
                    })
                }
                "irq_handler_entry" => Some(KernelRecord::IrqEntry {
                    irq: int(e, "irq").unwrap_or(0) as u64,
                    name: string(e, "name").unwrap_or(""),
                }),
                "irq_handler_exit" => Some(KernelRecord::IrqExit),
                "softirq_entry" => {
                    let vec = int(e, "vec").unwrap_or(0);
                    Some(KernelRecord::SoftIrqEntry {
                        vec: vec as u64,
                        action: usize::try_from(vec)
                            .ok()
                            .and_then(|v| SOFTIRQS.get(v))
                            .copied(),
                    })
                }
                "softirq_exit" => Some(KernelRecord::SoftIrqExit),
                "exit_syscall" => Some(KernelRecord::SyscallExit {
                    name: "",
                    ret: int(e, "ret").unwrap_or(0) as i64,
                }),
                n if n.starts_with("syscall_exit_") => Some(KernelRecord::SyscallExit {
                    name: &n["syscall_exit_".len()..],
                    ret: int(e, "ret").unwrap_or(0) as i64,
                }),
                n if n.starts_with("syscall_entry_") || is_lttng_syscall(n) => {
                    self.syscall_args(e);
                    let call = n
                        .strip_prefix("syscall_entry_")
                        .or_else(|| n.strip_prefix("sys_"))
                        .unwrap_or(n);
                    Some(KernelRecord::SyscallEnter {
                        name: call,
                        args: self.args.trim(),
                    })
                }
                _ => None,
            }
        };
        if let Some(record) = direct {
            let task = Task {
                cpu,
                ts: e.ns.max(0) as u64,
                pid,
                comm: &self.comm,
                tgid,
            };
            return self.ftrace.kernel_record(&task, record, writer);
        }
        let a = &mut self.args;
        let mut body_name = Cow::Borrowed(name);
        let mut exit_ret: Option<i128> = None;
        match name {
            "sched_switch" => {
                let _ = write!(
                    a,
                    "prev_comm={} prev_pid={} prev_prio={} prev_state={} ==> next_comm={} \
                     next_pid={} next_prio={}",
                    string(e, "prev_comm").unwrap_or(""),
                    tid(e, "prev_tid", "prev_pid").unwrap_or(0),
                    int(e, "prev_prio").unwrap_or(0),
                    int(e, "prev_state").unwrap_or(0),
                    string(e, "next_comm").unwrap_or(""),
                    tid(e, "next_tid", "next_pid").unwrap_or(0),
                    int(e, "next_prio").unwrap_or(0),
                );
            }
            "sched_wakeup" | "sched_waking" | "sched_wakeup_new" => {
                let _ = write!(
                    a,
                    "comm={} pid={} prio={} target_cpu={}",
                    string(e, "comm").unwrap_or(""),
                    tid(e, "tid", "pid").unwrap_or(0),
                    int(e, "prio").unwrap_or(0),
                    int(e, "target_cpu").unwrap_or(0),
                );
            }
            "irq_handler_entry" => {
                let _ = write!(
                    a,
                    "irq={} name={}",
                    int(e, "irq").unwrap_or(0),
                    string(e, "name").unwrap_or("")
                );
            }
            "irq_handler_exit" => {
                let _ = write!(
                    a,
                    "irq={} ret={}",
                    int(e, "irq").unwrap_or(0),
                    int(e, "ret").unwrap_or(0)
                );
            }
            "softirq_entry" | "softirq_exit" | "softirq_raise" => {
                let vec = int(e, "vec").unwrap_or(0);
                let _ = write!(a, "vec={vec}");
                if let Some(n) = usize::try_from(vec).ok().and_then(|v| SOFTIRQS.get(v)) {
                    let _ = write!(a, " [action={n}]");
                }
            }
            "lttng_statedump_process_state" => {
                // Names the thread (and its process) as an ftrace line's task column would.
                if let (Some(t), Some(n)) = (int(e, "tid"), string(e, "name")) {
                    pid = t as u64;
                    tgid = int(e, "pid").map(|p| p as u64);
                    self.comm.clear();
                    self.comm.push_str(n);
                }
                self.fields(e);
            }
            "exit_syscall" => exit_ret = Some(int(e, "ret").unwrap_or(0)),
            n if n.starts_with("syscall_exit_") => {
                body_name = Cow::Owned(format!("sys_exit_{}", &n["syscall_exit_".len()..]));
                let _ = write!(a, "0x{:x}", int(e, "ret").unwrap_or(0) as i64);
            }
            n if n.starts_with("syscall_entry_") || (kernel && is_lttng_syscall(n)) => {
                let call = n
                    .strip_prefix("syscall_entry_")
                    .or_else(|| n.strip_prefix("sys_"))
                    .unwrap_or(n);
                body_name = Cow::Owned(format!("sys_enter_{call}"));
                self.syscall_args(e);
            }
            _ => self.fields(e),
        }
        // `exit_syscall` names no call: its exit closes the thread's open syscall.
        let ret = exit_ret.map(|r| (r as i64).to_string());
        let a = self.args.trim();
        let body = match &ret {
            Some(ret) => ftrace::Body::SyscallExit { name: "", ret },
            None => ftrace::Body::Event {
                name: &body_name,
                args: a,
            },
        };
        let record = ftrace::Record {
            comm: &self.comm,
            pid,
            tgid,
            cpu,
            flags: None,
            ts: e.ns,
            body,
        };
        // Events of no rule (most of a kernel trace: kmem, RCU, timers, workqueues) have their
        // pairs from `fields`; the text is read back only where a value would make it ambiguous.
        let direct = self.fields_direct
            && ret.is_none()
            && !body_name.starts_with("sys_enter_")
            && a.len() == self.args.len();
        if direct {
            self.prepared.set_one(&self.fields_pairs);
        } else {
            self.prepared.prepare_one(&record);
        }
        let prepared = self.prepared.get(0, ret.as_deref().unwrap_or(a));
        self.ftrace
            .record_by(&record, &prepared, emitted_by_thread, writer)
    }

    /// The payload as `key=value` pairs, and their byte ranges in `fields_pairs`: `fields_direct`
    /// says whether they are those [`ftrace::Record::pairs`] would read from the text.
    fn fields(&mut self, e: &CtfEvent) {
        self.fields_pairs.clear();
        self.fields_direct = true;
        let Some(Value::Struct(fields)) = &e.fields else {
            return;
        };
        for (i, (n, v)) in fields.iter().enumerate() {
            if i > 0 {
                self.args.push(' ');
            }
            let key = field_name(n);
            let k = self.args.len();
            self.args.push_str(key);
            self.args.push('=');
            let v_start = self.args.len();
            text(v, &mut self.args);
            match plain_pair(key, &self.args[v_start..]) {
                Some(len) => self
                    .fields_pairs
                    .push([k, k + key.len(), v_start, v_start + len]),
                None => self.fields_direct = false,
            }
        }
    }

    /// A syscall's arguments as the syscall tracer prints them (`a: 0x1, b: 0x2`).
    fn syscall_args(&mut self, e: &CtfEvent) {
        let Some(Value::Struct(fields)) = &e.fields else {
            return;
        };
        for (i, (n, v)) in fields.iter().enumerate() {
            if i > 0 {
                self.args.push_str(", ");
            }
            self.args.push_str(field_name(n));
            self.args.push_str(": ");
            match v.as_i128() {
                Some(x) => {
                    let _ = write!(self.args, "{:x}", x as u64);
                }
                None => text(v, &mut self.args),
            }
        }
    }
}

/// For a pair written `key=value` between single spaces: the length of the value that
/// [`ftrace::Record::pairs`] reads back (its trailing `]` dropped), when it reads back this key and this
/// value whatever pairs surround it: a key of no separator (white space, `=`, `[`, `,`) and a value of
/// no white space. `None`: the text must be read.
fn plain_pair(key: &str, value: &str) -> Option<usize> {
    let plain_key = !key.is_empty()
        && !key.contains(|c: char| c.is_whitespace() || matches!(c, '=' | '[' | ','));
    (plain_key && !value.contains(char::is_whitespace)).then(|| value.trim_end_matches(']').len())
}

/// LTTng 2.5's syscall entries: `sys_<name>` (and `sys_unknown`).
fn is_lttng_syscall(name: &str) -> bool {
    name.starts_with("sys_") && !name.starts_with("sys_enter") && !name.starts_with("sys_exit")
}

/// What a CTF directory's metadata says, for the trace's description.
pub(super) struct CtfHeader {
    pub(super) board: String,
    pub(super) os: String,
    pub(super) cpus: u32,
    pub(super) params: Vec<(String, String)>,
}

/// What the metadata of every trace the reader holds says.
pub(super) fn header(r: &CtfReader) -> CtfHeader {
    let mut h = CtfHeader {
        board: String::new(),
        os: String::new(),
        cpus: 1,
        params: Vec::new(),
    };
    for t in r.traces() {
        let m = &t.metadata;
        if h.board.is_empty() {
            h.board = m
                .env("hostname")
                .or(m.env("host"))
                .unwrap_or("")
                .to_string();
        }
        if h.os.is_empty()
            && let Some(sys) = m.env("sysname")
        {
            let rel = m.env("kernel_release").or(m.env("release")).unwrap_or("");
            h.os = format!("{sys} {rel}").trim().to_string();
        }
        for k in ["domain", "tracer_name", "tracer_major", "tracer_minor"] {
            if let Some(v) = m.env(k) {
                h.params
                    .push((format!("ctf.{}.{k}", t.dir.display()), v.to_string()));
            }
        }
    }
    // Per-CPU stream files end in `_N`.
    let cpus = r
        .streams()
        .iter()
        .filter_map(|s| {
            s.name
                .rsplit_once('_')
                .and_then(|(_, n)| n.parse::<u32>().ok())
        })
        .max()
        .map_or(1, |m| m + 1);
    h.cpus = cpus.clamp(1, 65_536);
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where `plain_pair` says the pairs need no reading back, they are exactly what the text's
    /// reader finds, in every combination of neighbours.
    #[test]
    fn plain_pairs_are_those_the_text_reader_finds() {
        let values = [
            "1",
            "-42",
            "",
            "0x7f",
            "[1,2,3]",
            "[[1,2],[3]]",
            "{a:1,b:[2]}",
            "RUNNING(0)",
            "a=b",
            "]",
            "==>",
            "x]]",
            "caf\u{e9}",
            "two words",
            "tab\there",
            "nel\u{85}x",
            " lead",
        ];
        let keys = ["irq", "ptr", "_x", "a.b", "bad key", "k=v", "k[", ""];
        let mut checked = 0;
        for k1 in keys {
            for v1 in values {
                for k2 in keys {
                    for v2 in values {
                        let text = format!("{k1}={v1} {k2}={v2}");
                        let (Some(l1), Some(l2)) = (plain_pair(k1, v1), plain_pair(k2, v2)) else {
                            continue;
                        };
                        let expected = [(k1, &v1[..l1]), (k2, &v2[..l2])];
                        let read: Vec<_> = ftrace::Record::pairs(&text).collect();
                        assert_eq!(read, expected, "{text:?}");
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 1000, "{checked}");
        assert_eq!(plain_pair("irq", "two words"), None);
        assert_eq!(plain_pair("bad key", "1"), None);
        assert_eq!(plain_pair("", "1"), None);
        assert_eq!(plain_pair("a", "[[1],[2]]"), Some("[[1],[2".len()));
    }
}
