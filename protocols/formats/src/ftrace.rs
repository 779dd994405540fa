//! ftrace and `trace-cmd report` text: `COMM-PID [(TGID)] [CPU] [FLAGS] SEC.FRAC: EVENT: ARGS`.
//!
//! Comms may hold spaces and dashes (the pid is after the *last* dash), the TGID column is optional, the
//! flags are 4 or 5 characters or absent (`trace-cmd report`), and the syscall tracer writes
//! `sys_x(arg: v, ...)` and `sys_x -> 0x...` instead of `event: args`.

use crate::{FormatError, LineReader, ParseError, offset_in, seconds_to_ns};

/// The registry's entry: ftrace text is told by its `# tracer:` or `cpus=` header, or its record
/// lines; Android's systrace (and catapult's trace2html) HTML pages wrap ftrace text in scripts.
pub const SPEC: crate::FormatSpec = crate::FormatSpec {
    name: "ftrace",
    title: "ftrace or trace-cmd report text",
    help: "ftrace text (`trace`, `trace_pipe`), `trace-cmd report` output, Android systrace HTML",
    detection: crate::Detection::Text {
        page: Some(|text| {
            let lower = text.to_ascii_lowercase();
            lower.contains("<html")
                && (lower.contains("android system trace")
                    || lower.contains("class=\"trace-data\"")
                    || lower.contains("<!-- begin trace -->"))
        }),
        line: |line| {
            if line.starts_with("# tracer:") || line.starts_with("cpus=") {
                crate::LineVote::Certain
            } else if parse_line(line).is_ok() {
                crate::LineVote::Likely
            } else {
                crate::LineVote::No
            }
        },
    },
};

/// What follows the timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body<'a> {
    /// `name: args`.
    Event {
        /// Event name, e.g. `sched_switch`.
        name: &'a str,
        /// Everything after `name: `.
        args: &'a str,
    },
    /// `sys_x(arg: v, ...)` from the syscall tracer.
    SyscallEnter {
        /// The function name, e.g. `sys_read`.
        name: &'a str,
        /// The text between the parentheses.
        args: &'a str,
    },
    /// `sys_x -> ret`.
    SyscallExit {
        /// The function name.
        name: &'a str,
        /// The return value text, e.g. `0x24`.
        ret: &'a str,
    },
}

/// One event line, borrowing from the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// Command name (`<...>` when ftrace did not know it).
    pub comm: &'a str,
    /// Thread id.
    pub pid: u64,
    /// Thread group id, when the TGID column is there and filled.
    pub tgid: Option<u64>,
    /// CPU.
    pub cpu: u16,
    /// Flag characters (irqs-off, need-resched, hardirq/softirq, preempt depth...), if present.
    pub flags: Option<&'a str>,
    /// Timestamp, nanoseconds.
    pub ts: i64,
    /// The event.
    pub body: Body<'a>,
}

impl Record<'_> {
    /// `key=value` pairs of an event's arguments (brackets are separators, as in `[action=TIMER]`).
    pub fn pairs(args: &str) -> impl Iterator<Item = (&str, &str)> {
        let mut rest = args;
        std::iter::from_fn(move || {
            loop {
                let eq = rest.find('=')?;
                // After the separator, whatever its width (U+0085 and U+3000 are whitespace too).
                let key_start = rest[..eq]
                    .char_indices()
                    .rev()
                    .find(|&(_, c)| c.is_whitespace() || c == '[' || c == ',')
                    .map_or(0, |(i, c)| i + c.len_utf8());
                let key = &rest[key_start..eq];
                let after = &rest[eq + 1..];
                // A value runs to the next ` key=` (values such as comms may contain spaces).
                let mut end = after.len();
                let mut search = 0;
                while let Some(sp) = after[search..].find(' ') {
                    let at = search + sp;
                    let next = &after[at + 1..];
                    let word_end = next.find([' ', '=']).unwrap_or(next.len());
                    if next[word_end..].starts_with('=') && word_end > 0 || next.starts_with("==>")
                    {
                        end = at;
                        break;
                    }
                    search = at + 1;
                }
                let value = trim(after[..end].trim_end_matches(']'));
                rest = &after[end..];
                if !key.is_empty() {
                    return Some((key, value));
                }
            }
        })
    }

    /// The value of `key` in an event's arguments.
    pub fn arg<'b>(args: &'b str, key: &str) -> Option<&'b str> {
        Self::pairs(args).find(|(k, _)| *k == key).map(|(_, v)| v)
    }
}

/// `char::is_whitespace` for an ASCII byte.
fn ascii_space(c: u8) -> bool {
    matches!(c, b'\t' | b'\n' | b'\x0B' | b'\x0C' | b'\r' | b' ')
}

/// `str::trim_start`, byte by byte while the text is ASCII (the hot path: a line's padding).
fn trim_start(s: &str) -> &str {
    let b = s.as_bytes();
    let n = b.iter().take_while(|&&c| ascii_space(c)).count();
    if b.get(n).is_some_and(|&c| !c.is_ascii()) {
        // Some non-ASCII characters are white space too.
        return s.trim_start();
    }
    &s[n..]
}

/// `str::trim_end`, byte by byte while the text is ASCII.
fn trim_end(s: &str) -> &str {
    let b = s.as_bytes();
    let end = b.len() - b.iter().rev().take_while(|&&c| ascii_space(c)).count();
    if end > 0 && !b[end - 1].is_ascii() {
        return s.trim_end();
    }
    &s[..end]
}

fn trim(s: &str) -> &str {
    trim_end(trim_start(s))
}

/// How many ASCII digits `b` starts with.
fn digits(b: &[u8]) -> usize {
    b.iter().take_while(|c| c.is_ascii_digit()).count()
}

/// `SEC.FRAC:`: what follows, and the two numbers.
fn timestamp(i: &str) -> Option<(&str, (&str, &str))> {
    let b = i.as_bytes();
    let s = digits(b);
    if s == 0 || b.get(s) != Some(&b'.') {
        return None;
    }
    let f = digits(&b[s + 1..]);
    if f == 0 || b.get(s + 1 + f) != Some(&b':') {
        return None;
    }
    Some((&i[s + f + 2..], (&i[..s], &i[s + 1..s + 1 + f])))
}

/// `[CPU]`: what follows, and the digits.
fn cpu_column(i: &str) -> Option<(&str, &str)> {
    let b = i.as_bytes();
    if b.first() != Some(&b'[') {
        return None;
    }
    let n = digits(&b[1..]);
    if n == 0 || b.get(1 + n) != Some(&b']') {
        return None;
    }
    Some((&i[n + 2..], &i[1..1 + n]))
}

/// An event or function name: what follows, and the name.
fn ident(i: &str) -> Option<(&str, &str)> {
    let n = i
        .bytes()
        .take_while(|&c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.')
        .count();
    (n > 0).then(|| (&i[n..], &i[..n]))
}

/// `COMM-PID [(TGID)]`, trimmed.
fn task(left: &str) -> Option<(&str, u64, Option<u64>)> {
    let mut left = trim(left);
    let mut tgid = None;
    if left.ends_with(')')
        && let Some(open) = left.rfind('(')
    {
        let inner = trim(&left[open + 1..left.len() - 1]);
        tgid = inner.parse().ok();
        left = trim_end(&left[..open]);
    }
    let dash = left.rfind('-')?;
    let pid = left[dash + 1..].parse().ok()?;
    Some((trim_start(&left[..dash]), pid, tgid))
}

/// Parses one event line; `Err` carries the byte offset where the grammar broke and what it wanted.
pub fn parse_line(line: &str) -> Result<Record<'_>, (usize, &'static str)> {
    let mut furthest = (0usize, "`COMM-PID [CPU]`");
    let mut search = 0;
    while let Some(p) = line[search..].find('[') {
        let at = search + p;
        search = at + 1;
        let Some((after_cpu, cpu)) = cpu_column(&line[at..]) else {
            continue;
        };
        let Some((comm, pid, tgid)) = task(&line[..at]) else {
            furthest = furthest.max((at, "`COMM-PID` before the CPU column"));
            continue;
        };
        let Ok(cpu) = cpu.parse::<u16>() else {
            continue;
        };
        let rest = trim_start(after_cpu);
        let (rest, flags) = match timestamp(rest) {
            Some(_) => (rest, None),
            None => {
                let end = rest.find(' ').unwrap_or(rest.len());
                (trim_start(&rest[end..]), Some(&rest[..end]))
            }
        };
        let Some((body, (s, f))) = timestamp(rest) else {
            furthest = furthest.max((offset_in(line, rest), "a timestamp `SEC.FRACTION:`"));
            continue;
        };
        let Some(ts) = seconds_to_ns(s, f) else {
            furthest = furthest.max((offset_in(line, rest), "a timestamp that fits in 64 bits"));
            continue;
        };
        let body = trim_start(body);
        let Some((after, name)) = ident(body) else {
            furthest = furthest.max((offset_in(line, body), "an event name"));
            continue;
        };
        let body = if let Some(args) = after.strip_prefix('(') {
            Body::SyscallEnter {
                name,
                args: args.strip_suffix(')').unwrap_or(args),
            }
        } else if let Some(ret) = after.strip_prefix(" -> ") {
            Body::SyscallExit {
                name,
                ret: trim(ret),
            }
        } else if let Some(args) = after.strip_prefix(':') {
            Body::Event {
                name,
                args: trim(args),
            }
        } else {
            Body::Event {
                name,
                args: trim(after),
            }
        };
        return Ok(Record {
            comm,
            pid,
            tgid,
            cpu,
            flags,
            ts,
            body,
        });
    }
    Err(furthest)
}

/// A line of an ftrace text file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line<'a> {
    /// A header or comment line (`#...`, `cpus=N`, `version = 6`, `CPU 0 is empty`, blank).
    Header,
    /// An event.
    Record(Record<'a>),
    /// A frame of the kernel stack trace a `kernel_stack` event line announced (`trace-cmd report`
    /// prints one per line after it: `=> schedule (ffffffc0006f6628)`): the text after `=>`.
    StackFrame(&'a str),
}

/// Whether `line` is a kernel stack frame line (`=> schedule (ffffffc0006f6628)`); its frame.
fn stack_frame(line: &str) -> Option<&str> {
    trim_start(line).strip_prefix("=>").map(trim)
}

/// Whether `r` is a `kernel_stack` event (whose frames follow it on lines of their own).
fn is_kernel_stack(r: &Record<'_>) -> bool {
    matches!(
        r.body,
        Body::Event {
            name: "kernel_stack",
            ..
        }
    )
}

/// Reads an ftrace text file line by line.
pub struct FtraceReader<R> {
    lines: LineReader<R>,
    file: String,
    /// CPU count announced by `cpus=N` (trace-cmd) or `#P:N` (ftrace header).
    pub cpus: Option<u16>,
    /// Whether the last line read was a `kernel_stack` event or one of its frames (a frame line
    /// anywhere else is an error).
    in_stack: bool,
    /// A line [`FtraceReader::fill_batch`] read past a full batch, for the next one (a batch ends
    /// only where no stack frame follows): the bytes before it, its number, its text.
    carried: Option<(u64, u64, String)>,
}

impl<R: std::io::BufRead> FtraceReader<R> {
    /// Reads `inner`, which errors call `file`.
    pub fn new(inner: R, file: impl Into<String>) -> Self {
        let file = file.into();
        Self {
            lines: LineReader::new(inner, file.clone()),
            file,
            cpus: None,
            in_stack: false,
            carried: None,
        }
    }

    /// Bytes consumed so far.
    pub fn bytes(&self) -> u64 {
        self.lines.bytes()
    }

    /// The next line: `Ok(None)` at the end; a [`FormatError::Parse`] for a line that is neither
    /// header nor event (the reader stays usable).
    pub fn next_line(&mut self) -> Result<Option<Line<'_>>, FormatError> {
        let Some((line_no, line)) = self.lines.next_line()? else {
            return Ok(None);
        };
        let in_stack = std::mem::take(&mut self.in_stack);
        let line = classify(&self.file, &mut self.cpus, in_stack, line_no, line)?;
        self.in_stack = match line {
            Line::Record(r) => is_kernel_stack(&r),
            Line::StackFrame(_) => true,
            Line::Header => false,
        };
        Ok(Some(line))
    }

    /// Reads lines into `batch` (emptied first) until it holds `max_records` records or
    /// `max_bytes` of their text, the file ends or reading fails: the records, the bad lines' errors
    /// and the read error in file order, as [`FtraceReader::next_line`] would have returned them.
    /// Returns `false` once nothing is left to read (the end, or an I/O error, which is then the
    /// batch's last item).
    pub fn fill_batch(
        &mut self,
        batch: &mut RecordBatch,
        max_records: usize,
        max_bytes: usize,
    ) -> bool {
        batch.clear();
        let mut records = 0;
        if let Some((bytes, line_no, line)) = self.carried.take() {
            Self::push_into(
                &self.file,
                &mut self.cpus,
                &mut self.in_stack,
                batch,
                bytes,
                line_no,
                &line,
                &mut records,
            );
        }
        loop {
            let full = records >= max_records || batch.text.len() >= max_bytes;
            let bytes = self.lines.bytes();
            let (line_no, line) = match self.lines.next_line() {
                Ok(Some(l)) => l,
                Ok(None) => {
                    batch.bytes_read = self.lines.bytes();
                    return false;
                }
                Err(e) => {
                    batch.push_error(bytes, e);
                    batch.bytes_read = self.lines.bytes();
                    return false;
                }
            };
            // A full batch still takes the kernel stack that follows its last event (the importer
            // attaches a stack to the event before it, which must be in the same batch).
            if full
                && stack_frame(line).is_none()
                && !parse_line(line).is_ok_and(|r| is_kernel_stack(&r))
            {
                self.carried = Some((bytes, line_no, line.to_string()));
                batch.bytes_read = bytes;
                return true;
            }
            Self::push_into(
                &self.file,
                &mut self.cpus,
                &mut self.in_stack,
                batch,
                bytes,
                line_no,
                line,
                &mut records,
            );
        }
    }

    /// Classifies `line` into `batch`: a record, an error, or a stack frame folded into the
    /// `kernel_stack` record before it.
    #[allow(clippy::too_many_arguments)]
    fn push_into(
        file: &str,
        cpus: &mut Option<u16>,
        in_stack: &mut bool,
        batch: &mut RecordBatch,
        bytes: u64,
        line_no: u64,
        line: &str,
        records: &mut usize,
    ) {
        match classify(file, cpus, std::mem::take(in_stack), line_no, line) {
            Ok(Line::Header) => {}
            Ok(Line::Record(r)) => {
                *in_stack = is_kernel_stack(&r);
                batch.push_record(bytes, line, &r);
                *records += 1;
            }
            Ok(Line::StackFrame(frame)) => {
                *in_stack = true;
                batch.push_stack_frame(frame);
            }
            Err(e) => batch.push_error(bytes, e),
        }
    }
}

/// Header, record or error: what [`FtraceReader::next_line`] makes of line `line_no`.
fn classify<'l>(
    file: &str,
    cpus: &mut Option<u16>,
    in_stack: bool,
    line_no: u64,
    line: &'l str,
) -> Result<Line<'l>, FormatError> {
    if let Some(frame) = stack_frame(line) {
        if in_stack {
            return Ok(Line::StackFrame(frame));
        }
        let at = line.len() - trim_start(line).len();
        return Err(ParseError::at(
            file,
            line_no,
            line,
            at,
            "a stack frame `=> ...` only after a `kernel_stack` event line or another frame",
        )
        .into());
    }
    let t = trim_start(line);
    if t.is_empty() || t.starts_with('#') {
        if let Some(p) = t.find("#P:") {
            *cpus = t[p + 3..].trim().parse().ok().or(*cpus);
        }
        return Ok(Line::Header);
    }
    if let Some(n) = t.strip_prefix("cpus=") {
        *cpus = n.trim().parse().ok();
        return Ok(Line::Header);
    }
    if t.starts_with("version =") || (t.starts_with("CPU ") && t.ends_with("is empty")) {
        return Ok(Line::Header);
    }
    match parse_line(line) {
        Ok(r) => Ok(Line::Record(r)),
        Err((at, expected)) => Err(ParseError::at(file, line_no, line, at, expected).into()),
    }
}

/// A text span of a [`RecordBatch`]: byte offsets into its text.
#[derive(Debug, Clone, Copy)]
struct Span {
    start: usize,
    end: usize,
}

#[derive(Debug, Clone, Copy)]
enum BodyKind {
    Event,
    SyscallEnter,
    SyscallExit,
}

/// A record of a batch: a [`Record`] with spans instead of borrowed text.
#[derive(Debug, Clone, Copy)]
struct BatchRecord {
    comm: Span,
    pid: u64,
    tgid: Option<u64>,
    cpu: u16,
    flags: Option<Span>,
    ts: i64,
    kind: BodyKind,
    name: Span,
    args: Span,
}

#[derive(Debug, Clone, Copy)]
enum BatchItem {
    Record(BatchRecord),
    /// The next error of the batch's error list.
    Error,
}

/// Lines of an ftrace file read ahead by [`FtraceReader::fill_batch`]: the records (owning their
/// text) and the errors, in file order, each with the bytes read before its line. Made to be handed
/// from a reading thread to an importing one and back, its buffers reused.
#[derive(Debug, Default)]
pub struct RecordBatch {
    text: String,
    items: Vec<(u64, BatchItem)>,
    errors: Vec<FormatError>,
    bytes_read: u64,
}

/// An item of a [`RecordBatch`].
#[derive(Debug)]
pub enum BatchLine<'a> {
    /// An event line, read after `bytes` bytes of the file.
    Record {
        /// Bytes of the file before this line.
        bytes: u64,
        /// The record.
        record: Record<'a>,
    },
    /// A line that is neither header nor event, or the read error that ended the batch.
    Error(FormatError),
}

impl RecordBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    fn clear(&mut self) {
        self.text.clear();
        self.items.clear();
        self.errors.clear();
    }

    /// Records and errors in the batch.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the batch holds neither record nor error.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Bytes of the file read once the batch was filled.
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    fn push_error(&mut self, bytes: u64, e: FormatError) {
        self.errors.push(e);
        self.items.push((bytes, BatchItem::Error));
    }

    fn push_record(&mut self, bytes: u64, line: &str, r: &Record<'_>) {
        let base = self.text.len();
        self.text.push_str(line);
        let span = |s: &str| {
            let start = base + offset_in(line, s);
            Span {
                start,
                end: start + s.len(),
            }
        };
        let (kind, name, args) = match r.body {
            Body::Event { name, args } => (BodyKind::Event, name, args),
            Body::SyscallEnter { name, args } => (BodyKind::SyscallEnter, name, args),
            Body::SyscallExit { name, ret } => (BodyKind::SyscallExit, name, ret),
        };
        self.items.push((
            bytes,
            BatchItem::Record(BatchRecord {
                comm: span(r.comm),
                pid: r.pid,
                tgid: r.tgid,
                cpu: r.cpu,
                flags: r.flags.map(span),
                ts: r.ts,
                kind,
                name: span(name),
                args: span(args),
            }),
        ));
    }

    /// Folds a stack frame into the `kernel_stack` record the batch ends with: its arguments become
    /// `stack=FRAME <- FRAME...` (the `<stack trace >` text trace-cmd prints dropped).
    fn push_stack_frame(&mut self, frame: &str) {
        let Some((_, BatchItem::Record(r))) = self.items.last_mut() else {
            return;
        };
        let args = self.text.get(r.args.start..r.args.end).unwrap_or("");
        if args.starts_with("stack=") {
            self.text.truncate(r.args.end);
            self.text.push_str(" <- ");
        } else {
            self.text.truncate(r.args.start);
            self.text.push_str("stack=");
        }
        self.text.push_str(frame);
        r.args.end = self.text.len();
    }

    /// The records and errors in file order (errors are moved out; the batch is emptied by the next
    /// [`FtraceReader::fill_batch`]).
    pub fn drain(&mut self) -> impl Iterator<Item = BatchLine<'_>> {
        let text = self.text.as_str();
        let mut errors = self.errors.drain(..);
        self.items
            .iter()
            .filter_map(move |&(bytes, item)| match item {
                BatchItem::Record(r) => Some(BatchLine::Record {
                    bytes,
                    record: record_of(text, &r),
                }),
                BatchItem::Error => errors.next().map(BatchLine::Error),
            })
    }

    /// The records alone, in file order (the batch keeps them and its errors).
    pub fn records(&self) -> impl Iterator<Item = Record<'_>> {
        self.items.iter().filter_map(|(_, item)| match item {
            BatchItem::Record(r) => Some(record_of(&self.text, r)),
            BatchItem::Error => None,
        })
    }
}

fn record_of<'a>(text: &'a str, r: &BatchRecord) -> Record<'a> {
    let at = |s: Span| text.get(s.start..s.end).unwrap_or("");
    let (name, args) = (at(r.name), at(r.args));
    let body = match r.kind {
        BodyKind::Event => Body::Event { name, args },
        BodyKind::SyscallEnter => Body::SyscallEnter { name, args },
        BodyKind::SyscallExit => Body::SyscallExit { name, ret: args },
    };
    Record {
        comm: at(r.comm),
        pid: r.pid,
        tgid: r.tgid,
        cpu: r.cpu,
        flags: r.flags.map(at),
        ts: r.ts,
        body,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn pairs_split_after_multibyte_whitespace() {
        // Found by `socscope bench fuzz` (ftrace, 1 M inputs): U+0085 before a key panicked.
        let args = "prev_pi\u{85}d=8 a\u{3000}b=2 next_comm=swapper/2";
        let pairs: Vec<(&str, &str)> = super::Record::pairs(args).collect();
        assert_eq!(pairs, [("d", "8"), ("b", "2"), ("next_comm", "swapper/2")]);
    }

    use super::*;

    #[test]
    fn android_line_with_flags() {
        let r = parse_line(
            "   Binder:1579_9-2418  [000] d.h1   108.255707: softirq_raise: vec=1 [action=TIMER]",
        )
        .unwrap();
        assert_eq!(
            (r.comm, r.pid, r.cpu, r.flags),
            ("Binder:1579_9", 2418, 0, Some("d.h1"))
        );
        assert_eq!(r.ts, 108_255_707_000);
        let Body::Event { name, args } = r.body else {
            panic!()
        };
        assert_eq!(name, "softirq_raise");
        let pairs: Vec<_> = Record::pairs(args).collect();
        assert_eq!(pairs, vec![("vec", "1"), ("action", "TIMER")]);
    }

    #[test]
    fn comm_with_spaces_dashes_and_tgid_five_flags() {
        let r = parse_line(
            "  Chrome_IO - thr-77 (   70) [003] d..2. 5.000000001: sched_waking: comm=a b pid=3",
        )
        .unwrap();
        assert_eq!(
            (r.comm, r.pid, r.tgid, r.cpu),
            ("Chrome_IO - thr", 77, Some(70), 3)
        );
        assert_eq!(r.flags, Some("d..2."));
        assert_eq!(r.ts, 5_000_000_001);
        let Body::Event { args, .. } = r.body else {
            panic!()
        };
        assert_eq!(Record::arg(args, "comm"), Some("a b"));
        assert_eq!(Record::arg(args, "pid"), Some("3"));
    }

    #[test]
    fn trace_cmd_without_flags_and_syscalls() {
        let r = parse_line("bash-1234 [001] 1234.567890: sys_read(fd: 3, buf: 7ff)").unwrap();
        assert_eq!(r.flags, None);
        assert_eq!(
            r.body,
            Body::SyscallEnter {
                name: "sys_read",
                args: "fd: 3, buf: 7ff"
            }
        );
        let r =
            parse_line("<...>-4083  [004] ....   395.705673: sys_rt_sigprocmask -> 0x0").unwrap();
        assert_eq!(r.comm, "<...>");
        assert_eq!(
            r.body,
            Body::SyscallExit {
                name: "sys_rt_sigprocmask",
                ret: "0x0"
            }
        );
    }

    #[test]
    fn sched_switch_pairs_stop_at_arrow() {
        let args = "prev_comm=Binder:1579_9 prev_pid=2418 prev_prio=118 prev_state=R+ ==> next_comm=lmkd next_pid=1295 next_prio=98";
        assert_eq!(Record::arg(args, "prev_state"), Some("R+"));
        assert_eq!(Record::arg(args, "next_comm"), Some("lmkd"));
        assert_eq!(Record::arg(args, "next_pid"), Some("1295"));
    }

    /// What `next_line` gives for `text`: (bytes before the line, the record or the error), in order.
    fn by_line(text: &str) -> (Vec<(u64, String)>, u64) {
        let mut r = FtraceReader::new(text.as_bytes(), "f.txt");
        let mut out = Vec::new();
        loop {
            let bytes = r.bytes();
            match r.next_line() {
                Ok(Some(Line::Record(rec))) => out.push((bytes, format!("{rec:?}"))),
                // The texts compared here hold no `kernel_stack` event, so no frame line either.
                Ok(Some(Line::Header | Line::StackFrame(_))) => {}
                Ok(None) => break,
                Err(e) => out.push((bytes, e.to_string())),
            }
        }
        (out, r.bytes())
    }

    fn by_batch(text: &str, records: usize, max_bytes: usize) -> (Vec<(u64, String)>, u64) {
        let mut r = FtraceReader::new(text.as_bytes(), "f.txt");
        let mut batch = RecordBatch::new();
        let mut out = Vec::new();
        loop {
            let more = r.fill_batch(&mut batch, records, max_bytes);
            let kept: Vec<String> = batch.records().map(|r| format!("{r:?}")).collect();
            let mut in_batch = 0;
            for item in batch.drain() {
                out.push(match item {
                    BatchLine::Record { bytes, record } => {
                        in_batch += 1;
                        (bytes, format!("{record:?}"))
                    }
                    BatchLine::Error(e) => (0, e.to_string()),
                });
            }
            assert!(in_batch <= records);
            assert_eq!(kept.len(), in_batch);
            let drained = out
                .iter()
                .rev()
                .filter(|(_, l)| !l.starts_with("f.txt:"))
                .take(in_batch);
            assert!(kept.iter().rev().eq(drained.map(|(_, l)| l)));
            if !more {
                return (out, batch.bytes_read());
            }
        }
    }

    #[test]
    fn batches_hold_what_line_by_line_reading_gives() {
        let text = "# tracer: nop\n\
            cpus=4\n\
            \x20 <idle>-0 [000] d..2 1.000001: sched_switch: prev_comm=swapper/0 prev_pid=0 ==> next_comm=a next_pid=5\n\
            garbage\n\
            \x20  Chrome_IO - thr-77 (   70) [003] d..2. 5.000000001: sched_waking: comm=a b pid=3\n\
            bash-1234 [001] 1234.567890: sys_read(fd: 3, buf: 7ff)\n\
            \n\
            foo-12 [001] d..1 12.x: e: a\n\
            <...>-4083  [004] ....   395.705673: sys_rt_sigprocmask -> 0x0\n\
            \x20 x-1 [002] 2.5: tracing_mark_write: B|1|draw\n\
            tail-9 [000] 3.0: no_newline_at_the_end";
        let (lines, total) = by_line(text);
        assert_eq!(lines.len(), 8, "{lines:#?}");
        // Errors keep their position (line, column, text); records their bytes.
        let errors: Vec<&String> = lines
            .iter()
            .filter(|(_, l)| l.starts_with("f.txt:"))
            .map(|(_, l)| l)
            .collect();
        assert_eq!(errors.len(), 2);
        assert!(errors[0].starts_with("f.txt:4:1: "), "{}", errors[0]);
        assert!(errors[1].starts_with("f.txt:8:19: "), "{}", errors[1]);
        for records in [1, 2, 3, 1000] {
            for max_bytes in [1, 60, 1 << 20] {
                let (batched, bytes) = by_batch(text, records, max_bytes);
                let strip = |v: &[(u64, String)]| -> Vec<(u64, String)> {
                    v.iter()
                        .map(|(b, l)| (if l.starts_with("f.txt:") { 0 } else { *b }, l.clone()))
                        .collect()
                };
                assert_eq!(
                    strip(&batched),
                    strip(&lines),
                    "{records} records, {max_bytes} bytes"
                );
                assert_eq!(bytes, total);
            }
        }
    }

    #[test]
    fn kernel_stack_frames_fold_into_their_event_which_stays_in_the_batch_before() {
        let text = "cpus=1\n\
            a-1 [000] 1.000000: cpu_frequency: state=1 cpu_id=0\n\
            a-1 [000] 1.000000: kernel_stack:         <stack trace >\n\
            => schedule (ffff0001)\n\
            => tracing_mark_write (ffff0002)\n\
            a-1 [000] 2.000000: kernel_stack:         <stack trace >\n\
            => f (1)\n\
            b-2 [000] 3.000000: e: x=1\n\
            => orphan (2)\n";
        let mut r = FtraceReader::new(text.as_bytes(), "f.txt");
        let (mut frames, mut errors) = (Vec::new(), Vec::new());
        loop {
            match r.next_line() {
                Ok(Some(Line::StackFrame(f))) => frames.push(f.to_string()),
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(e) => errors.push(e.to_string()),
            }
        }
        assert_eq!(
            frames,
            [
                "schedule (ffff0001)",
                "tracing_mark_write (ffff0002)",
                "f (1)"
            ]
        );
        assert_eq!(errors.len(), 1);
        assert!(errors[0].starts_with("f.txt:9:1: "), "{}", errors[0]);
        for records in [1, 2, 3, 100] {
            let mut r = FtraceReader::new(text.as_bytes(), "f.txt");
            let mut batch = RecordBatch::new();
            let (mut got, mut errors) = (Vec::new(), 0);
            loop {
                let more = r.fill_batch(&mut batch, records, 1 << 20);
                let mut first = true;
                for item in batch.drain() {
                    match item {
                        BatchLine::Record { record, .. } => {
                            let Body::Event { name, args } = record.body else {
                                panic!("{record:?}");
                            };
                            // A batch ends where no stack follows its last event.
                            assert!(!(first && name == "kernel_stack"), "{records}");
                            first = false;
                            got.push(format!("{name}: {args}"));
                        }
                        BatchLine::Error(_) => errors += 1,
                    }
                }
                if !more {
                    break;
                }
            }
            assert_eq!(
                got,
                [
                    "cpu_frequency: state=1 cpu_id=0",
                    "kernel_stack: stack=schedule (ffff0001) <- tracing_mark_write (ffff0002)",
                    "kernel_stack: stack=f (1)",
                    "e: x=1"
                ],
                "{records} records a batch"
            );
            assert_eq!(errors, 1);
        }
    }

    #[test]
    fn a_read_error_ends_the_batch_after_the_lines_before_it() {
        struct FailsAfter(&'static [u8]);
        impl std::io::Read for FailsAfter {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                if self.0.is_empty() {
                    return Err(std::io::Error::other("disk on fire"));
                }
                let n = buf.len().min(self.0.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let input = std::io::BufReader::new(FailsAfter(
            b"a-1 [000] 1.0: e: x=1\nbad\nb-2 [001] 2.0: e: x=2\n",
        ));
        let mut r = FtraceReader::new(input, "f.txt");
        let mut batch = RecordBatch::new();
        assert!(!r.fill_batch(&mut batch, 100, 1 << 20));
        let items: Vec<String> = batch
            .drain()
            .map(|i| match i {
                BatchLine::Record { bytes, record } => format!("{bytes} {}", record.comm),
                BatchLine::Error(e) => e.to_string(),
            })
            .collect();
        assert_eq!(items.len(), 4, "{items:?}");
        assert_eq!(items[0], "0 a");
        assert!(items[1].starts_with("f.txt:2:1: "));
        assert_eq!(items[2], "26 b");
        assert_eq!(items[3], "f.txt: disk on fire");
        assert_eq!(batch.bytes_read(), 48);
    }

    /// The grammar as first written with nom combinators and `str` trims: the byte-level version must
    /// agree with it on every line.
    mod reference {
        use super::super::{Body, Record, offset_in, seconds_to_ns};
        use nom::bytes::complete::take_while1;
        use nom::character::complete::{char, digit1};
        use nom::{IResult, Parser};

        fn timestamp(i: &str) -> IResult<&str, (&str, &str)> {
            let (i, (s, _, f, _)) = (digit1, char('.'), digit1, char(':')).parse(i)?;
            Ok((i, (s, f)))
        }

        fn cpu_column(i: &str) -> IResult<&str, &str> {
            let (i, (_, c, _)) = (char('['), digit1, char(']')).parse(i)?;
            Ok((i, c))
        }

        fn ident(i: &str) -> IResult<&str, &str> {
            take_while1(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.').parse(i)
        }

        fn task(left: &str) -> Option<(&str, u64, Option<u64>)> {
            let mut left = left.trim();
            let mut tgid = None;
            if left.ends_with(')')
                && let Some(open) = left.rfind('(')
            {
                let inner = left[open + 1..left.len() - 1].trim();
                tgid = inner.parse().ok();
                left = left[..open].trim_end();
            }
            let dash = left.rfind('-')?;
            let pid = left[dash + 1..].parse().ok()?;
            Some((left[..dash].trim_start(), pid, tgid))
        }

        pub fn parse_line(line: &str) -> Result<Record<'_>, (usize, &'static str)> {
            let mut furthest = (0usize, "`COMM-PID [CPU]`");
            let mut search = 0;
            while let Some(p) = line[search..].find('[') {
                let at = search + p;
                search = at + 1;
                let Ok((after_cpu, cpu)) = cpu_column(&line[at..]) else {
                    continue;
                };
                let Some((comm, pid, tgid)) = task(&line[..at]) else {
                    furthest = furthest.max((at, "`COMM-PID` before the CPU column"));
                    continue;
                };
                let Ok(cpu) = cpu.parse::<u16>() else {
                    continue;
                };
                let rest = after_cpu.trim_start();
                let (rest, flags) = match timestamp(rest) {
                    Ok(_) => (rest, None),
                    Err(_) => {
                        let end = rest.find(' ').unwrap_or(rest.len());
                        (rest[end..].trim_start(), Some(&rest[..end]))
                    }
                };
                let Ok((body, (s, f))) = timestamp(rest) else {
                    furthest = furthest.max((offset_in(line, rest), "a timestamp `SEC.FRACTION:`"));
                    continue;
                };
                let Some(ts) = seconds_to_ns(s, f) else {
                    furthest =
                        furthest.max((offset_in(line, rest), "a timestamp that fits in 64 bits"));
                    continue;
                };
                let body = body.trim_start();
                let Ok((after, name)) = ident(body) else {
                    furthest = furthest.max((offset_in(line, body), "an event name"));
                    continue;
                };
                let body = if let Some(args) = after.strip_prefix('(') {
                    Body::SyscallEnter {
                        name,
                        args: args.strip_suffix(')').unwrap_or(args),
                    }
                } else if let Some(ret) = after.strip_prefix(" -> ") {
                    Body::SyscallExit {
                        name,
                        ret: ret.trim(),
                    }
                } else if let Some(args) = after.strip_prefix(':') {
                    Body::Event {
                        name,
                        args: args.trim(),
                    }
                } else {
                    Body::Event {
                        name,
                        args: after.trim(),
                    }
                };
                return Ok(Record {
                    comm,
                    pid,
                    tgid,
                    cpu,
                    flags,
                    ts,
                    body,
                });
            }
            Err(furthest)
        }
    }

    /// Real lines of every shape the grammar knows.
    const SHAPES: [&str; 8] = [
        "   Binder:1579_9-2418  [000] d.h1   108.255707: softirq_raise: vec=1 [action=TIMER]",
        "  Chrome_IO - thr-77 (   70) [003] d..2. 5.000000001: sched_waking: comm=a b pid=3",
        "bash-1234 [001] 1234.567890: sys_read(fd: 3, buf: 7ff)",
        "<...>-4083  [004] ....   395.705673: sys_rt_sigprocmask -> 0x0",
        "foo-12 [001] d..1 12.x: e: a",
        "  <idle>-0     [000] d..2   100.000001: sched_switch: prev_comm=swapper/0 prev_pid=0 ==> next_comm=bash next_pid=1234",
        "bash-1234 [000] 100.000028: sys_getpid()",
        "x-1 (-) [2] [0] 1.5: print: tracing_mark_write: B|1|a [b]",
    ];

    proptest::proptest! {
        #[test]
        fn parse_line_agrees_with_the_nom_grammar(
            shape in 0..SHAPES.len(),
            edits in proptest::collection::vec(
                (0usize..200, proptest::sample::select(vec![
                    "", " ", "\t", "\u{b}", "\u{a0}", "\u{2003}", "é", "[", "]", "(", ")", "-",
                    ".", ":", "0", "9", "x", "_", " -> ", "=", "\u{85}",
                ]), 0usize..3),
                0..6,
            ),
            noise in ".{0,40}",
        ) {
            let mut line = SHAPES[shape].to_string();
            for (at, text, cut) in edits {
                let mut at = at % (line.len() + 1);
                while !line.is_char_boundary(at) {
                    at -= 1;
                }
                let mut end = (at + cut).min(line.len());
                while !line.is_char_boundary(end) {
                    end += 1;
                }
                line.replace_range(at..end, text);
            }
            proptest::prop_assert_eq!(parse_line(&line), reference::parse_line(&line), "{:?}", line);
            proptest::prop_assert_eq!(parse_line(&noise), reference::parse_line(&noise), "{:?}", noise);
        }
    }

    #[test]
    fn real_lines_agree_with_the_nom_grammar() {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/data/traces/ftrace"
        );
        let mut n = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            for line in text.lines() {
                assert_eq!(parse_line(line), reference::parse_line(line), "{line:?}");
                n += 1;
            }
        }
        assert!(n > 1000);
    }

    #[test]
    fn trims_are_str_trims() {
        for s in [
            "",
            " ",
            "  a b  ",
            "\t\u{b}x\u{c}\r\n",
            "\u{a0}x\u{a0}",
            " \u{2003} é ",
            "é",
            "x\u{85}",
        ] {
            assert_eq!(trim(s), s.trim(), "{s:?}");
            assert_eq!(trim_start(s), s.trim_start(), "{s:?}");
            assert_eq!(trim_end(s), s.trim_end(), "{s:?}");
        }
    }

    #[test]
    fn errors_point_at_the_column() {
        let (at, what) = parse_line("foo-12 [001] d..1 12.x: e: a").unwrap_err();
        assert_eq!(at, 18);
        assert!(what.contains("timestamp"));
    }
}
