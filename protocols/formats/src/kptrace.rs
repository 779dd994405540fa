//! KPTrace (STLinux kernel relay output): one file per CPU (`trace0`, `trace1`, ...), lines
//! `SEC.USEC PID MNEMONIC ARGS...`, and the post-processed form `SEC.USEC [CPU] TYPE ARGS...` whose types a
//! format-description file declares (`CS : OLDPID INTEGER, NEWPID INTEGER`, RT-427 §5.1.1).
//!
//! Raw relay files start every 256 KiB sub-buffer with a 4-byte padding count ([`RelayReader`] drops it
//! and the padding); `KC`/`Kc`/`KT`/`KD` are followed by blank lines; callstack lines may follow a record;
//! wake-ups `W` carry `0.000000` and take their neighbour's time; user-space lines with no mnemonic are
//! markers. [`KptraceMerge`] merges the per-CPU files in time order, in constant memory.

use std::collections::HashMap;
use std::io::{BufRead, Read};

use nom::bytes::complete::take_till1;
use nom::character::complete::{char, digit1, space1};
use nom::{IResult, Parser};

use crate::{FormatError, LineReader, ParseError, offset_in, seconds_to_ns};

/// The registry's entry: KPTrace is told by its record lines.
pub const SPEC: crate::FormatSpec = crate::FormatSpec {
    name: "kptrace",
    title: "KPTrace",
    help: "STLinux KPTrace relay files (per-CPU `trace0`, `trace1`, ... with System.map) or their \
           post-processed text",
    detection: crate::Detection::Text {
        page: None,
        line: |line| {
            if looks_like_record(line) {
                crate::LineVote::Likely
            } else {
                crate::LineVote::No
            }
        },
    },
};

/// Relay sub-buffer size of KPTrace captures.
pub const SUBBUF_SIZE: usize = 256 * 1024;

/// What socscope makes of a mnemonic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Semantics {
    /// `C prev next`.
    ContextSwitch,
    /// `I irq`.
    IrqEntry,
    /// `i`, `Ix`.
    IrqExit,
    /// `S addr`.
    SoftIrqEntry,
    /// `s`.
    SoftIrqExit,
    /// `E addr a0 a1 a2 a3 [text]`.
    SyscallEntry,
    /// `X addr ret`.
    SyscallExit,
    /// `W pid`.
    Wakeup,
    /// `Kc pid comm`.
    ThreadCreate,
    /// `KX pid`.
    ThreadExit,
    /// `K text`, and user-space lines.
    Marker,
    /// `KM id`.
    Mark,
    /// `U pc a0 a1 a2 a3`.
    UserEntry,
    /// `u ret addr`.
    UserExit,
    /// `MM ptr size`.
    Kmalloc,
    /// `MF ptr`.
    Kfree,
    /// A punctual event of its own type, its arguments as text.
    Punctual,
}

/// One row of the mnemonic table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mnemonic {
    /// As written in the trace.
    pub mnemonic: &'static str,
    /// The event type's name.
    pub name: &'static str,
    /// What it means.
    pub semantics: Semantics,
}

const fn m(mnemonic: &'static str, name: &'static str, semantics: Semantics) -> Mnemonic {
    Mnemonic {
        mnemonic,
        name,
        semantics,
    }
}

use Semantics as S;

/// Every mnemonic socscope knows. Any other becomes a punctual event of its own type (and is counted).
pub const MNEMONICS: &[Mnemonic] = &[
    m("C", "context_switch", S::ContextSwitch),
    m("I", "irq", S::IrqEntry),
    m("i", "irq_exit", S::IrqExit),
    m("Ix", "irq_exit", S::IrqExit),
    m("IP", "irq_pc", S::Punctual),
    m("ip", "irq_pc_exit", S::Punctual),
    m("S", "softirq", S::SoftIrqEntry),
    m("s", "softirq_exit", S::SoftIrqExit),
    m("E", "syscall", S::SyscallEntry),
    m("X", "syscall_exit", S::SyscallExit),
    m("W", "wakeup", S::Wakeup),
    m("KC", "kernel_context", S::Punctual),
    m("Kc", "thread_create", S::ThreadCreate),
    m("KT", "kernel_thread_list", S::Punctual),
    m("KD", "kernel_daemon", S::Punctual),
    m("KX", "thread_exit", S::ThreadExit),
    m("K", "marker", S::Marker),
    m("KM", "mark", S::Mark),
    m("KP", "kernel_probe", S::Punctual),
    m("KR", "kernel_return", S::Punctual),
    m("U", "user_function", S::UserEntry),
    m("u", "user_function_exit", S::UserExit),
    m("MM", "kmalloc", S::Kmalloc),
    m("MF", "kfree", S::Kfree),
    m("Mm", "kmem_cache_alloc", S::Punctual),
    m("MD", "kmem_cache_free", S::Punctual),
    m("MV", "vmalloc", S::Punctual),
    m("Mv", "vfree", S::Punctual),
    m("MQ", "page_alloc", S::Punctual),
    m("MG", "get_free_pages", S::Punctual),
    m("Mg", "free_pages", S::Punctual),
    m("MA", "bigphysarea_alloc", S::Punctual),
    m("Ma", "bigphysarea_free", S::Punctual),
    m("MZ", "zone_alloc", S::Punctual),
    m("MS", "shm_alloc", S::Punctual),
    m("Ms", "shm_free", S::Punctual),
    m("MX", "memory_other", S::Punctual),
    m("NR", "net_receive", S::Punctual),
    m("Nr", "net_receive_exit", S::Punctual),
    m("NX", "net_transmit", S::Punctual),
    m("Nx", "net_transmit_exit", S::Punctual),
    m("SS", "socket_send", S::Punctual),
    m("Ss", "socket_send_exit", S::Punctual),
    m("SR", "socket_receive", S::Punctual),
    m("Sr", "socket_receive_exit", S::Punctual),
    m("IS", "timer_start", S::Punctual),
    m("Is", "timer_stop", S::Punctual),
    m("IE", "timer_expire", S::Punctual),
    m("Ie", "timer_expire_exit", S::Punctual),
    m("HF", "hardware_fault", S::Punctual),
];

/// The table row of `mnemonic`; lock mnemonics (`Z*`) are punctual events named after themselves.
pub fn lookup(mnemonic: &str) -> Option<Mnemonic> {
    MNEMONICS.iter().find(|x| x.mnemonic == mnemonic).copied()
}

/// Drops the 4-byte padding count at the start of every relay sub-buffer and the padding it announces.
/// Text that does not start with a padding word (a post-processed or hand-written file) passes through.
pub struct RelayReader<R> {
    inner: R,
    relay: Option<bool>,
    /// Bytes of data left in the current sub-buffer.
    data_left: usize,
    /// Padding bytes to skip after the data.
    pad_left: usize,
    first: [u8; 4],
    first_len: usize,
}

impl<R: Read> RelayReader<R> {
    /// Wraps a raw relay file (or plain text).
    pub fn new(inner: R) -> Self {
        Self {
            inner,
            relay: None,
            data_left: 0,
            pad_left: 0,
            first: [0; 4],
            first_len: 0,
        }
    }

    fn read_word(&mut self) -> std::io::Result<Option<[u8; 4]>> {
        let mut w = [0u8; 4];
        let mut n = 0;
        while n < 4 {
            let k = self.inner.read(&mut w[n..])?;
            if k == 0 {
                break;
            }
            n += k;
        }
        if n == 0 {
            return Ok(None);
        }
        if n < 4 {
            // A truncated file: what is there is text.
            self.first[..n].copy_from_slice(&w[..n]);
            self.first_len = n;
            return Ok(Some([0xff; 4]));
        }
        Ok(Some(w))
    }

    fn padding(word: [u8; 4]) -> Option<usize> {
        let v = u32::from_le_bytes(word) as usize;
        // A padding count is below the sub-buffer size, so its high byte is zero: never text.
        (v <= SUBBUF_SIZE - 4 && word[3] == 0).then_some(v)
    }
}

impl<R: Read> Read for RelayReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if self.first_len > 0 {
                let n = self.first_len.min(buf.len());
                buf[..n].copy_from_slice(&self.first[..n]);
                self.first.copy_within(n..self.first_len, 0);
                self.first_len -= n;
                return Ok(n);
            }
            match self.relay {
                Some(false) => return self.inner.read(buf),
                None => {
                    let Some(w) = self.read_word()? else {
                        return Ok(0);
                    };
                    if self.first_len > 0 {
                        self.relay = Some(false);
                        continue;
                    }
                    match Self::padding(w) {
                        Some(p) => {
                            self.relay = Some(true);
                            self.data_left = SUBBUF_SIZE - 4 - p;
                            self.pad_left = p;
                        }
                        None => {
                            self.relay = Some(false);
                            self.first = w;
                            self.first_len = 4;
                        }
                    }
                }
                Some(true) => {
                    if self.data_left > 0 {
                        let want = buf.len().min(self.data_left);
                        let n = self.inner.read(&mut buf[..want])?;
                        self.data_left -= n;
                        return Ok(n);
                    }
                    while self.pad_left > 0 {
                        let mut sink = [0u8; 512];
                        let want = sink.len().min(self.pad_left);
                        let n = self.inner.read(&mut sink[..want])?;
                        if n == 0 {
                            return Ok(0);
                        }
                        self.pad_left -= n;
                    }
                    let Some(w) = self.read_word()? else {
                        return Ok(0);
                    };
                    let p = Self::padding(w).unwrap_or(0);
                    self.data_left = SUBBUF_SIZE - 4 - p;
                    self.pad_left = p;
                }
            }
        }
    }
}

/// A parameter type of a format-description file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParamKind {
    /// `INTEGER` (decimal, signed).
    Integer,
    /// `HEX` / `ADDRESS` (hexadecimal, `0x` optional).
    Hex,
    /// `FLOAT` / `DOUBLE`.
    Float,
    /// `STRING`: the rest of the line when it is the last parameter, else one word.
    String,
}

/// A type of the post-processed form: `NAME : PAR TYPE, PAR TYPE, ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeDescription {
    /// The type name as lines write it, e.g. `CS`.
    pub name: String,
    /// Its parameters, in line order.
    pub params: Vec<(String, ParamKind)>,
}

/// A format-description file: the types of the post-processed form.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FormatDescription {
    /// The types, by name.
    pub types: HashMap<String, TypeDescription>,
}

fn description_line(line: &str) -> Result<TypeDescription, (usize, &'static str)> {
    let (name, rest) = line
        .split_once(':')
        .ok_or((line.len(), "`NAME : PARAM TYPE, ...`"))?;
    let name = name.trim();
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err((0, "a type name before `:`"));
    }
    let mut params = Vec::new();
    if !rest.trim().is_empty() {
        for part in rest.split(',') {
            let mut words = part.split_whitespace();
            let (Some(p), Some(t), None) = (words.next(), words.next(), words.next()) else {
                return Err((offset_in(line, part), "`PARAM TYPE`"));
            };
            let kind = match t.to_ascii_uppercase().as_str() {
                "INTEGER" | "INT" | "LONG" => ParamKind::Integer,
                "HEX" | "ADDRESS" | "ADDR" => ParamKind::Hex,
                "FLOAT" | "DOUBLE" => ParamKind::Float,
                "STRING" | "TEXT" => ParamKind::String,
                _ => return Err((offset_in(line, t), "a type: INTEGER, HEX, FLOAT or STRING")),
            };
            params.push((p.to_string(), kind));
        }
    }
    Ok(TypeDescription {
        name: name.to_string(),
        params,
    })
}

impl FormatDescription {
    /// Reads a format-description file (blank lines and `#` comments allowed).
    pub fn read(reader: impl BufRead, file: &str) -> Result<Self, FormatError> {
        let mut lines = LineReader::new(reader, file);
        let mut d = Self::default();
        while let Some((line_no, line)) = lines.next_line()? {
            let t = line.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            let td = description_line(line)
                .map_err(|(at, e)| ParseError::at(file, line_no, line, at, e))?;
            d.types.insert(td.name.clone(), td);
        }
        Ok(d)
    }

    /// Whether `head` (a file's first bytes) looks like a format-description file.
    pub fn sniff(head: &str) -> bool {
        let mut any = false;
        for line in head.lines().take(16) {
            let t = line.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            if description_line(line).is_err() {
                return false;
            }
            any = true;
        }
        any
    }
}

/// Reads a `System.map` (`ADDRESS TYPE SYMBOL` lines) as address → symbol.
pub fn read_system_map(
    reader: impl BufRead,
    file: &str,
) -> Result<HashMap<u64, String>, FormatError> {
    let mut lines = LineReader::new(reader, file);
    let mut map = HashMap::new();
    while let Some((_, line)) = lines.next_line()? {
        let mut w = line.split_whitespace();
        if let (Some(a), Some(_), Some(sym)) = (w.next(), w.next(), w.next())
            && let Ok(addr) = u64::from_str_radix(a.trim_start_matches("0x"), 16)
        {
            map.insert(addr, sym.to_string());
        }
    }
    Ok(map)
}

/// Whether `head` looks like a `System.map`.
pub fn sniff_system_map(head: &str) -> bool {
    let mut n = 0;
    for line in head.lines().take(8) {
        let mut w = line.split_whitespace();
        match (w.next(), w.next(), w.next(), w.next()) {
            (Some(a), Some(t), Some(_), None)
                if a.len() >= 8 && a.bytes().all(|b| b.is_ascii_hexdigit()) && t.len() == 1 =>
            {
                n += 1
            }
            _ => return false,
        }
    }
    n > 0
}

fn ts_pid_word(i: &str) -> IResult<&str, (&str, &str, &str, &str)> {
    let (i, (s, _, f, _, pid, _)) = (
        digit1,
        char('.'),
        digit1,
        space1,
        take_till1(char::is_whitespace),
        space1,
    )
        .parse(i)?;
    let (i, word) = take_till1(char::is_whitespace).parse(i)?;
    Ok((i, (s, f, pid, word)))
}

/// Whether `line` is a raw KPTrace record line (for format detection).
pub fn looks_like_record(line: &str) -> bool {
    ts_pid_word(line).is_ok_and(|(_, (_, f, pid, m))| {
        f.len() == 6
            && pid.bytes().all(|b| b.is_ascii_digit())
            && (lookup(m).is_some() || m.starts_with('Z'))
    })
}

/// One record, owned (the merge keeps one per file).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Record {
    /// CPU: the file's number, or the line's CPU in the post-processed form.
    pub cpu: u16,
    /// Nanoseconds (wake-ups and markers already carry their neighbour's time).
    pub ts: i64,
    /// The running thread's pid (raw form; 0 in the post-processed form).
    pub pid: u64,
    /// Mnemonic or type name; empty for a user-space marker line.
    pub mnemonic: String,
    /// The rest of the line (the marker's whole text for a user-space line).
    pub args: String,
}

enum Parsed<'a> {
    Skip,
    Callstack,
    Record {
        ts: Option<i64>,
        cpu: Option<u16>,
        pid: u64,
        mnemonic: &'a str,
        args: &'a str,
    },
}

fn parse<'a>(
    line: &'a str,
    post: Option<&FormatDescription>,
) -> Result<Parsed<'a>, (usize, &'static str)> {
    if line.trim().is_empty() {
        return Ok(Parsed::Skip);
    }
    let first = line.as_bytes()[0];
    if first == b' ' || first == b'\t' {
        let t = line.trim_start();
        if t.starts_with("[<") || t.starts_with("0x") || t.starts_with('<') || t.starts_with('[') {
            return Ok(Parsed::Callstack);
        }
    }
    if !first.is_ascii_digit() {
        // A raw user-space line: a marker with the whole line as its text — if it is text. Bytes
        // that are not (control bytes, invalid UTF-8 shown as U+FFFD) are no marker: random or
        // binary data is not read as a trace of markers. (Relay padding never gets here.)
        if let Some(at) = line
            .char_indices()
            .find(|&(_, c)| (c.is_control() && c != '\t') || c == '\u{fffd}')
            .map(|(i, _)| i)
        {
            return Err((at, "a record or a user-space text line, not binary bytes"));
        }
        return Ok(Parsed::Record {
            ts: None,
            cpu: None,
            pid: 0,
            mnemonic: "",
            args: line.trim(),
        });
    }
    let (i, (s, f)) = (digit1::<&str, nom::error::Error<&str>>, char('.'))
        .parse(line)
        .and_then(|(i, (s, _))| digit1(i).map(|(i, f)| (i, (s, f))))
        .map_err(|_| (0, "a timestamp `SEC.USEC`"))?;
    let ts = seconds_to_ns(s, f).ok_or((0, "a timestamp that fits in 64 bits"))?;
    let ts = (ts != 0).then_some(ts);
    let i = i.trim_start();
    if i.is_empty() {
        return Err((line.len(), "a pid and a mnemonic"));
    }
    match post {
        None => {
            let (rest, pid) = digit1::<&str, nom::error::Error<&str>>(i)
                .map_err(|_| (offset_in(line, i), "a pid"))?;
            let pid = pid
                .parse()
                .map_err(|_| (offset_in(line, i), "a pid that fits in 64 bits"))?;
            if !rest.starts_with([' ', '\t']) {
                return Err((offset_in(line, rest), "a space after the pid"));
            }
            let rest = rest.trim_start();
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            if end == 0 {
                return Err((offset_in(line, rest), "a mnemonic"));
            }
            Ok(Parsed::Record {
                ts,
                cpu: None,
                pid,
                mnemonic: &rest[..end],
                args: rest[end..].trim(),
            })
        }
        Some(desc) => {
            let mut rest = i;
            let mut cpu = None;
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            if rest[..end].bytes().all(|b| b.is_ascii_digit()) {
                cpu = Some(
                    rest[..end]
                        .parse()
                        .map_err(|_| (offset_in(line, rest), "a CPU number"))?,
                );
                rest = rest[end..].trim_start();
            }
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            let name = &rest[..end];
            if !desc.types.contains_key(name) {
                return Err((
                    offset_in(line, rest),
                    "a type declared in the format description",
                ));
            }
            Ok(Parsed::Record {
                ts,
                cpu,
                pid: 0,
                mnemonic: name,
                args: rest[end..].trim(),
            })
        }
    }
}

struct Source<R> {
    lines: LineReader<R>,
    /// The file name errors carry (a copy: the line read borrows `lines`).
    name: String,
    cpu: u16,
    last_ts: Option<i64>,
    last_pid: u64,
    /// Wake-ups and markers read before any timestamp: they take the next record's time.
    waiting: std::collections::VecDeque<Record>,
    /// Records ready to come out, in file order.
    ready: std::collections::VecDeque<Record>,
    head: Option<Record>,
    done: bool,
}

/// Counters of a merge.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MergeStats {
    /// Lines read.
    pub lines: u64,
    /// Callstack lines (skipped).
    pub callstack_lines: u64,
    /// Blank lines.
    pub blank_lines: u64,
    /// Records that took a neighbour's time (`W` with `0.000000`, user-space markers).
    pub neighbour_times: u64,
}

/// The records of every per-CPU file, merged in time order, in constant memory.
pub struct KptraceMerge<R> {
    sources: Vec<Source<R>>,
    post: Option<FormatDescription>,
    stats: MergeStats,
    /// Records handed back by [`KptraceMerge::recycle`], their strings reused.
    pool: Vec<Record>,
}

impl<R: BufRead> KptraceMerge<R> {
    /// Merges `(cpu, reader, file name)` sources; `post` selects the post-processed form.
    pub fn new(files: Vec<(u16, R, String)>, post: Option<FormatDescription>) -> Self {
        Self {
            sources: files
                .into_iter()
                .map(|(cpu, r, name)| Source {
                    lines: LineReader::new(r, name.clone()),
                    name,
                    cpu,
                    last_ts: None,
                    last_pid: 0,
                    waiting: Default::default(),
                    ready: Default::default(),
                    head: None,
                    done: false,
                })
                .collect(),
            post,
            stats: MergeStats::default(),
            pool: Vec::new(),
        }
    }

    /// Hands a record back once used: its buffers serve a later record (no allocation per line).
    pub fn recycle(&mut self, r: Record) {
        if self.pool.len() < 64 {
            self.pool.push(r);
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> MergeStats {
        self.stats
    }

    /// Bytes consumed so far, over all files.
    pub fn bytes(&self) -> u64 {
        self.sources.iter().map(|s| s.lines.bytes()).sum()
    }

    /// The format description of the post-processed form, if any.
    pub fn description(&self) -> Option<&FormatDescription> {
        self.post.as_ref()
    }

    /// Fills source `k`'s head; a bad line is returned as an error (the source stays usable).
    fn fill(&mut self, k: usize) -> Result<(), FormatError> {
        let post = self.post.as_ref();
        let pool = &mut self.pool;
        let s = &mut self.sources[k];
        while s.head.is_none() {
            if let Some(r) = s.ready.pop_front() {
                s.head = Some(r);
                break;
            }
            if s.done {
                break;
            }
            let Some((line_no, line)) = s.lines.next_line()? else {
                s.done = true;
                // Nothing timed after them: they keep the last time known (or 0).
                for mut w in s.waiting.drain(..) {
                    w.ts = s.last_ts.unwrap_or(0);
                    s.ready.push_back(w);
                }
                continue;
            };
            self.stats.lines += 1;
            match parse(line, post) {
                Err((at, expected)) => {
                    return Err(ParseError::at(&s.name, line_no, line, at, expected).into());
                }
                Ok(Parsed::Skip) => self.stats.blank_lines += 1,
                Ok(Parsed::Callstack) => self.stats.callstack_lines += 1,
                Ok(Parsed::Record {
                    ts,
                    cpu,
                    pid,
                    mnemonic,
                    args,
                }) => {
                    let pid = if mnemonic.is_empty() { s.last_pid } else { pid };
                    let mut r = pool.pop().unwrap_or_default();
                    r.cpu = cpu.unwrap_or(s.cpu);
                    r.ts = 0;
                    r.pid = pid;
                    r.mnemonic.clear();
                    r.mnemonic.push_str(mnemonic);
                    r.args.clear();
                    r.args.push_str(args);
                    match ts {
                        Some(t) => {
                            r.ts = t;
                            s.last_ts = Some(t);
                            if !mnemonic.is_empty() {
                                s.last_pid = pid;
                            }
                            for mut w in s.waiting.drain(..) {
                                w.ts = t;
                                s.ready.push_back(w);
                            }
                            s.ready.push_back(r);
                        }
                        None => {
                            self.stats.neighbour_times += 1;
                            match s.last_ts {
                                Some(t) => {
                                    r.ts = t;
                                    s.ready.push_back(r);
                                }
                                None => s.waiting.push_back(r),
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// The next record in time order (ties: lower CPU first); `Ok(None)` at the end of every file.
    pub fn next_record(&mut self) -> Result<Option<Record>, FormatError> {
        for k in 0..self.sources.len() {
            self.fill(k)?;
        }
        let best = self
            .sources
            .iter()
            .enumerate()
            .filter_map(|(k, s)| s.head.as_ref().map(|h| (h.ts, h.cpu, k)))
            .min();
        Ok(best.and_then(|(_, _, k)| self.sources[k].head.take()))
    }
}

/// The CPU a per-CPU file is for: the number its name ends with (`trace3` → 3).
pub fn cpu_of_file(name: &str) -> Option<u16> {
    let stem = name.rsplit(['/', '\\']).next().unwrap_or(name);
    let stem = stem.split('.').next().unwrap_or(stem);
    let digits: String = stem
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.chars().rev().collect::<String>().parse().ok()
}

/// Splits `args` into whitespace-separated words, the last parameter taking the rest when it is text.
pub fn words(args: &str) -> impl Iterator<Item = &str> + '_ {
    args.split_whitespace()
}

/// Parses a hexadecimal word (`0x` optional).
pub fn hex(word: &str) -> Option<u64> {
    let w = word.trim_start_matches("0x").trim_start_matches("0X");
    u64::from_str_radix(w, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relay_padding_words_are_dropped() {
        let mut raw = Vec::new();
        let text1 = b"1.000001 5 C 0 5\n";
        let pad = SUBBUF_SIZE - 4 - text1.len();
        raw.extend_from_slice(&(pad as u32).to_le_bytes());
        raw.extend_from_slice(text1);
        raw.resize(SUBBUF_SIZE, 0);
        raw.extend_from_slice(&0u32.to_le_bytes());
        raw.extend_from_slice(b"1.000002 5 K hi\n");
        let mut out = String::new();
        RelayReader::new(&raw[..]).read_to_string(&mut out).unwrap();
        assert_eq!(out, "1.000001 5 C 0 5\n1.000002 5 K hi\n");
        let mut out = String::new();
        RelayReader::new(&b"1.0 x\n"[..])
            .read_to_string(&mut out)
            .unwrap();
        assert_eq!(out, "1.0 x\n");
    }

    #[test]
    fn description_lines() {
        let d = FormatDescription::read(
            &b"CS : OLDPID INTEGER, NEWPID INTEGER\nMK : TEXT STRING\n"[..],
            "f",
        )
        .unwrap();
        assert_eq!(
            d.types["CS"].params,
            vec![
                ("OLDPID".into(), ParamKind::Integer),
                ("NEWPID".into(), ParamKind::Integer)
            ]
        );
        assert!(FormatDescription::sniff("CS : OLDPID INTEGER\n"));
        assert!(!FormatDescription::sniff("1.000000 1 C 0 1\n"));
    }

    #[test]
    fn file_numbers() {
        assert_eq!(cpu_of_file("dir/trace12"), Some(12));
        assert_eq!(cpu_of_file("trace"), None);
    }
}
