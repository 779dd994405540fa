//! trace-cmd's binary `trace.dat` (file versions 6 and 7, uncompressed or with zstd/zlib sections): the
//! header and its sections (event format files, kallsyms, trace_printk formats, saved cmdlines, options),
//! then the per-CPU ring-buffer pages read page by page (constant memory whatever the file's size) and
//! merged in time order, each record decoded by the embedded `format` of its event and rendered as
//! `trace-cmd report` prints it (its `print fmt`, [`printfmt`]).
//!
//! Start here: [`DatReader`] (open, [`DatReader::next_event`]), [`DatEvent`] (one record: its fields by
//! name, [`DatEvent::render`]). Byte layouts: trace-cmd.dat(5) v6 and v7, and the kernel's ring buffer
//! (`type_len`: 29 padding, 30 time extend, 31 absolute time stamp, 0 length word, 1..28 length / 4).

mod printfmt;
pub mod rewrite;

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use crate::{BinaryError, FormatError};

/// The registry's entry: a `.dat` file is told by its magic.
pub const SPEC: crate::FormatSpec = crate::FormatSpec {
    name: "trace-cmd",
    title: "trace-cmd .dat",
    help: "trace-cmd's binary `trace.dat` (versions 6 and 7, compressed or not)",
    detection: crate::Detection::Binary { sniff },
};

pub use printfmt::PrintFmt;

/// The magic a `.dat` file starts with.
pub const MAGIC: &[u8] = b"\x17\x08\x44tracing";

/// Whether `head` (a file's first bytes) is a trace-cmd `.dat` file.
pub fn sniff(head: &[u8]) -> bool {
    head.starts_with(MAGIC)
}

/// The most a metadata section may take once decompressed (kallsyms of a big kernel is some tens of
/// MB): a corrupt size is refused rather than allocated.
const MAX_SECTION: u64 = 512 << 20;
/// The most one compressed chunk of ring-buffer pages may take once decompressed.
const MAX_CHUNK: u64 = 64 << 20;

/// How a file's sections and ring-buffer data are compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Not compressed.
    None,
    /// zstd.
    Zstd,
    /// zlib (deflate with zlib framing).
    Zlib,
}

impl Compression {
    fn decompress(self, data: &[u8], size: usize) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(size);
        match self {
            Compression::None => out.extend_from_slice(data),
            Compression::Zstd => {
                zstd::stream::read::Decoder::new(data)?
                    .take(size as u64 + 1)
                    .read_to_end(&mut out)?;
            }
            Compression::Zlib => {
                flate2::read::ZlibDecoder::new(data)
                    .take(size as u64 + 1)
                    .read_to_end(&mut out)?;
            }
        }
        if out.len() != size {
            return Err(std::io::Error::other(format!(
                "decompressed to {} bytes, the header said {size}",
                out.len()
            )));
        }
        Ok(out)
    }
}

/// What the file's header and options say about the capture.
#[derive(Debug, Clone)]
pub struct DatInfo {
    /// File version (6 or 7).
    pub version: u32,
    /// Whether the target was big-endian.
    pub big_endian: bool,
    /// Size of the target's `long` in bytes (4 or 8).
    pub long_size: u8,
    /// Ring-buffer page size.
    pub page_size: u32,
    /// Compression of the sections and data.
    pub compression: Compression,
    /// The compression's name and version as the file gives them (`none`, `zstd 1.5.7`).
    pub compression_text: String,
    /// CPUs announced by the file.
    pub cpus: u32,
    /// CPUs that have ring-buffer data, with the bytes of data each has.
    pub cpu_data: Vec<(u32, u64)>,
    /// The trace clock (`local`, `global`, `counter`, `x86-tsc`...).
    pub clock: Option<String>,
    /// `uname` of the traced system.
    pub uname: Option<String>,
    /// The trace-cmd version that wrote the file.
    pub tracer_version: Option<String>,
    /// Per CPU, the kernel's statistics text (`entries`, `overrun`, `read events`...).
    pub cpustat: Vec<String>,
    /// Names of buffer instances other than the one read (their data is not read).
    pub other_instances: Vec<String>,
    /// Event formats known.
    pub event_formats: usize,
}

/// The kind of a field, from its C declaration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// An integer of the field's size.
    Int,
    /// A fixed `char x[N]` string.
    Chars,
    /// A fixed array of `count` elements of `elem` bytes.
    Array {
        /// Element size.
        elem: u32,
    },
    /// `__data_loc` (offset and length in a 32-bit word) of a string (`char[]`) or an array.
    DataLoc {
        /// Whether it holds characters.
        chars: bool,
        /// Element size.
        elem: u32,
        /// `__rel_loc`: the offset counts from the end of the field.
        relative: bool,
    },
    /// Size 0: the rest of the record (ftrace's `char buf`, `u32 buf`, `unsigned long caller`).
    Rest {
        /// Whether it holds characters.
        chars: bool,
        /// Element size.
        elem: u32,
    },
}

/// A field of an event format.
#[derive(Debug, Clone)]
pub struct Field {
    /// Its name.
    pub name: String,
    /// Its C type as written (`unsigned long`, `__data_loc char[]`).
    pub ctype: String,
    /// Byte offset in the record.
    pub offset: u32,
    /// Size in bytes.
    pub size: u32,
    /// Whether it is signed.
    pub signed: bool,
    /// What it holds.
    pub kind: FieldKind,
    /// Whether the C type is a pointer (printed in hex).
    pub pointer: bool,
}

/// An event's `format` file.
#[derive(Debug, Clone)]
pub struct EventFormat {
    /// Its id (`common_type` of its records).
    pub id: u16,
    /// Its system (`sched`, `ftrace`...).
    pub system: String,
    /// Its name.
    pub name: String,
    /// Its fields, `common_*` included, in order.
    pub fields: Vec<Field>,
    /// Its `print fmt`, parsed; `None` when the parser does not know its syntax (the record is then
    /// rendered as `name=value` fields).
    pub print: Option<PrintFmt>,
    /// Where the fields after the common ones start.
    first_own: usize,
}

impl EventFormat {
    /// Parses a `format` file of system `system`.
    pub fn parse(system: &str, text: &str, long_size: u8) -> Option<Self> {
        let mut name = None;
        let mut id = None;
        let mut fields = Vec::new();
        let mut print = None;
        let mut first_own = None;
        let mut in_format = false;
        for line in text.lines() {
            let t = line.trim();
            if let Some(n) = t.strip_prefix("name:") {
                name = Some(n.trim().to_string());
            } else if let Some(n) = t.strip_prefix("ID:") {
                id = n.trim().parse::<u16>().ok();
            } else if t.starts_with("format:") {
                in_format = true;
            } else if let Some(p) = t.strip_prefix("print fmt:") {
                print = Some(p.trim().to_string());
                in_format = false;
            } else if in_format && t.is_empty() && !fields.is_empty() && first_own.is_none() {
                first_own = Some(fields.len());
            } else if in_format
                && t.starts_with("field:")
                && let Some(f) = parse_field(t, long_size)
            {
                fields.push(f);
            }
        }
        let first_own = first_own.unwrap_or_else(|| {
            fields
                .iter()
                .position(|f| !f.name.starts_with("common_"))
                .unwrap_or(fields.len())
        });
        let mut f = Self {
            id: id?,
            system: system.to_string(),
            name: name?,
            fields,
            print: None,
            first_own,
        };
        f.print = print.and_then(|p| PrintFmt::parse(&p).ok());
        Some(f)
    }

    /// The field `name`.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The fields after the common ones.
    pub fn own_fields(&self) -> &[Field] {
        self.fields.get(self.first_own..).unwrap_or_default()
    }
}

/// `field:TYPE NAME[N];\toffset:O;\tsize:S;\tsigned:X;`
fn parse_field(line: &str, long_size: u8) -> Option<Field> {
    let mut decl = None;
    let (mut offset, mut size, mut signed) = (None, None, None);
    for part in line.split(';') {
        let part = part.trim();
        if let Some(d) = part.strip_prefix("field:") {
            decl = Some(d.trim());
        } else if let Some(v) = part.strip_prefix("offset:") {
            offset = v.trim().parse::<u32>().ok();
        } else if let Some(v) = part.strip_prefix("size:") {
            size = v.trim().parse::<u32>().ok();
        } else if let Some(v) = part.strip_prefix("signed:") {
            signed = Some(v.trim() == "1");
        }
    }
    let decl = decl?;
    let (offset, size) = (offset?, size?);
    // The name is the last identifier, before any `[N]`.
    let (head, array) = match decl.find('[') {
        Some(i) => (decl[..i].trim_end(), Some(&decl[i..])),
        None => (decl, None),
    };
    let (split, c) = head
        .char_indices()
        .rev()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || *c == '_'))?;
    let split = split + c.len_utf8();
    let name = head[split..].to_string();
    let ctype = head[..split].trim().to_string();
    let data_loc = ctype.starts_with("__data_loc") || ctype.starts_with("__rel_loc");
    let relative = ctype.starts_with("__rel_loc");
    let pointer = ctype.contains('*');
    let base = ctype
        .trim_start_matches("__data_loc")
        .trim_start_matches("__rel_loc")
        .trim();
    let chars = base.starts_with("char") || base.starts_with("const char");
    let elem = elem_size(base, long_size).max(1);
    let kind = if data_loc {
        FieldKind::DataLoc {
            chars,
            elem,
            relative,
        }
    } else if size == 0 {
        FieldKind::Rest { chars, elem }
    } else if array.is_some() && chars && !pointer {
        FieldKind::Chars
    } else if array.is_some() {
        FieldKind::Array { elem }
    } else {
        FieldKind::Int
    };
    Some(Field {
        name,
        ctype,
        offset,
        size,
        signed: signed.unwrap_or(false),
        kind,
        pointer,
    })
}

/// The size of one element of C type `base`.
fn elem_size(base: &str, long_size: u8) -> u32 {
    let b = base.trim_end_matches("[]").trim();
    if b.contains('*') {
        return u32::from(long_size);
    }
    let words: Vec<&str> = b
        .split_whitespace()
        .filter(|w| !matches!(*w, "const" | "volatile" | "signed" | "unsigned"))
        .collect();
    match words.as_slice() {
        [] | ["int"] => 4,
        ["char"] | ["u8"] | ["s8"] | ["__u8"] | ["__s8"] | ["bool"] => 1,
        ["short"] | ["short", "int"] | ["u16"] | ["s16"] | ["__u16"] | ["__s16"] => 2,
        ["long", "long"] | ["long", "long", "int"] | ["u64"] | ["s64"] | ["__u64"] | ["__s64"] => 8,
        ["long"] | ["long", "int"] => u32::from(long_size),
        ["u32"] | ["s32"] | ["__u32"] | ["__s32"] | ["pid_t"] => 4,
        _ => 0,
    }
}

/// A field's value in a record.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FieldValue<'a> {
    /// An integer (sign-extended when the field is signed).
    Int(i64),
    /// An unsigned integer.
    Uint(u64),
    /// Characters (up to the first NUL).
    Str(&'a [u8]),
    /// The raw bytes of an array of `elem`-byte elements.
    Array {
        /// The bytes.
        bytes: &'a [u8],
        /// Element size.
        elem: u32,
        /// Whether the elements are signed.
        signed: bool,
    },
}

impl FieldValue<'_> {
    /// The value as an integer (0 for strings).
    pub fn as_u64(&self) -> u64 {
        match *self {
            FieldValue::Int(v) => v as u64,
            FieldValue::Uint(v) => v,
            _ => 0,
        }
    }
}

/// Reads an integer of `size` bytes at `at` of `data`.
fn read_uint(data: &[u8], at: usize, size: usize, big: bool) -> Option<u64> {
    let b = data.get(at..at.checked_add(size)?)?;
    let mut v = 0u64;
    if big {
        for &x in b {
            v = (v << 8) | u64::from(x);
        }
    } else {
        for &x in b.iter().rev() {
            v = (v << 8) | u64::from(x);
        }
    }
    Some(v)
}

fn sign_extend(v: u64, size: usize) -> i64 {
    if size >= 8 || size == 0 {
        return v as i64;
    }
    let shift = 64 - 8 * size as u32;
    ((v << shift) as i64) >> shift
}

/// Up to the first NUL.
fn until_nul(b: &[u8]) -> &[u8] {
    match b.iter().position(|&c| c == 0) {
        Some(i) => &b[..i],
        None => b,
    }
}

/// The value of `f` in the record `data`.
pub(crate) fn field_value<'a>(data: &'a [u8], f: &Field, big: bool) -> Option<FieldValue<'a>> {
    let off = f.offset as usize;
    let size = f.size as usize;
    Some(match f.kind {
        FieldKind::Int => {
            let v = read_uint(data, off, size, big)?;
            if f.signed {
                FieldValue::Int(sign_extend(v, size))
            } else {
                FieldValue::Uint(v)
            }
        }
        FieldKind::Chars => FieldValue::Str(until_nul(data.get(off..off + size)?)),
        FieldKind::Array { elem } => FieldValue::Array {
            bytes: data.get(off..off + size)?,
            elem,
            signed: f.signed,
        },
        FieldKind::DataLoc {
            chars,
            elem,
            relative,
        } => {
            let word = read_uint(data, off, size.min(4), big)?;
            let mut start = (word & 0xffff) as usize;
            let len = (word >> 16) as usize;
            if relative {
                start += off + size;
            }
            let bytes = data.get(start..start.checked_add(len)?)?;
            if chars {
                FieldValue::Str(until_nul(bytes))
            } else {
                FieldValue::Array {
                    bytes,
                    elem,
                    signed: f.signed,
                }
            }
        }
        FieldKind::Rest { chars, elem } => {
            let bytes = data.get(off..)?;
            if chars {
                FieldValue::Str(until_nul(bytes))
            } else {
                FieldValue::Array {
                    bytes,
                    elem,
                    signed: f.signed,
                }
            }
        }
    })
}

/// Kernel symbols (`/proc/kallsyms`): the section's text as read, its function symbols indexed by
/// address on the first lookup, so that a capture whose events print no kernel address never pays
/// for the index (the section of a distribution kernel is megabytes).
#[derive(Debug, Default)]
pub struct Kallsyms {
    text: String,
    /// Address, then the name's start and length in `text`, sorted by address.
    index: std::sync::OnceLock<Vec<(u64, u32, u32)>>,
}

impl Kallsyms {
    fn parse(text: &[u8]) -> Self {
        Self {
            text: String::from_utf8_lossy(text).into_owned(),
            index: std::sync::OnceLock::new(),
        }
    }

    /// The function symbols (`T`, `t`, `W`, `w`: what `%ps` wants) of `text`'s lines
    /// `ADDRESS KIND NAME [MODULE]`, sorted by address (symbols at one address in file order).
    fn index_of(text: &str) -> Vec<(u64, u32, u32)> {
        let mut out = Vec::new();
        let bytes = text.as_bytes();
        let mut at = 0;
        while at < bytes.len() {
            let end = bytes[at..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(bytes.len(), |i| at + i);
            let line = &bytes[at..end];
            let line_start = at;
            at = end + 1;
            // Words separated by spaces and tabs.
            let mut words = [(0usize, 0usize); 3];
            let mut n = 0;
            let mut i = 0;
            while i < line.len() && n < 3 {
                while i < line.len() && (line[i] == b' ' || line[i] == b'\t') {
                    i += 1;
                }
                let start = i;
                while i < line.len() && line[i] != b' ' && line[i] != b'\t' {
                    i += 1;
                }
                if i > start {
                    words[n] = (start, i);
                    n += 1;
                }
            }
            if n < 3 || !matches!(&line[words[1].0..words[1].1], b"T" | b"t" | b"W" | b"w") {
                continue;
            }
            let Some(addr) = std::str::from_utf8(&line[words[0].0..words[0].1])
                .ok()
                .and_then(|a| u64::from_str_radix(a, 16).ok())
            else {
                continue;
            };
            let (Ok(start), Ok(len)) = (
                u32::try_from(line_start + words[2].0),
                u32::try_from(words[2].1 - words[2].0),
            ) else {
                // Past 4 GiB of text (the section is bounded far below): not indexed.
                continue;
            };
            out.push((addr, start, len));
        }
        out.sort_by_key(|e| e.0);
        out
    }

    fn index(&self) -> &[(u64, u32, u32)] {
        self.index.get_or_init(|| Self::index_of(&self.text))
    }

    /// The function containing `addr`, and the offset of `addr` in it.
    pub fn lookup(&self, addr: u64) -> Option<(&str, u64)> {
        let index = self.index();
        let i = index.partition_point(|e| e.0 <= addr).checked_sub(1)?;
        let (at, start, len) = index[i];
        // Past the last symbol is not in any function.
        if i + 1 == index.len() && addr - at > 1 << 20 {
            return None;
        }
        let name = self.text.get(start as usize..start as usize + len as usize)?;
        Some((name, addr - at))
    }

    /// Function symbols known.
    pub fn len(&self) -> usize {
        self.index().len()
    }

    /// Whether none is known.
    pub fn is_empty(&self) -> bool {
        self.index().is_empty()
    }
}

/// `trace_printk` formats: address → format string.
fn parse_printk(text: &[u8]) -> HashMap<u64, String> {
    let mut out = HashMap::new();
    for line in String::from_utf8_lossy(text).lines() {
        let Some((addr, fmt)) = line.split_once(" : ") else {
            continue;
        };
        let Ok(addr) = u64::from_str_radix(addr.trim().trim_start_matches("0x"), 16) else {
            continue;
        };
        let fmt = fmt.trim();
        let fmt = fmt
            .strip_prefix('"')
            .and_then(|f| f.strip_suffix('"'))
            .unwrap_or(fmt);
        out.insert(addr, printfmt::unescape(fmt));
    }
    out
}

/// What the reader knows besides the ring buffers: the formats and the names.
#[derive(Debug)]
pub struct DatMeta {
    file: String,
    info: DatInfo,
    formats: HashMap<u16, EventFormat>,
    /// The `common_type` field (its offset and size), the same for every event.
    common_type: (usize, usize),
    common_pid: (usize, usize),
    cmdlines: HashMap<i32, String>,
    kallsyms: Kallsyms,
    printk: HashMap<u64, String>,
    /// Page layout from `header_page`: where the commit word is and its size, where the data starts.
    commit: (usize, usize),
    data_offset: usize,
    /// trace-cmd's `sched_switch` plugin names pids from the records it prints: the reader does too.
    sched_switch: Option<u16>,
    sched_wakeups: Vec<u16>,
    /// Time conversion: multiplier, shift and offset (TSC2NSEC), and an added offset (OFFSET).
    tsc2nsec: Option<(u32, u32, u64)>,
    ts_offset: i64,
}

impl DatMeta {
    /// The file's header and options.
    pub fn info(&self) -> &DatInfo {
        &self.info
    }

    /// The event format of id `id`.
    pub fn format(&self, id: u16) -> Option<&EventFormat> {
        self.formats.get(&id)
    }

    /// Every event format.
    pub fn formats(&self) -> impl Iterator<Item = &EventFormat> {
        self.formats.values()
    }

    /// The kernel symbols.
    pub fn kallsyms(&self) -> &Kallsyms {
        &self.kallsyms
    }

    /// The name of thread `pid` (`<idle>` for 0, `<...>` when unknown), as `trace-cmd report` prints it.
    pub fn comm(&self, pid: i32) -> &str {
        if pid == 0 {
            return "<idle>";
        }
        self.cmdlines.get(&pid).map_or("<...>", String::as_str)
    }

    fn big(&self) -> bool {
        self.info.big_endian
    }

    fn to_ns(&self, ts: u64) -> u64 {
        let ts = match self.tsc2nsec {
            Some((mult, shift, offset)) => {
                ((u128::from(ts) * u128::from(mult)) >> shift.min(127)) as u64 + offset
            }
            None => ts,
        };
        ts.wrapping_add_signed(self.ts_offset)
    }

    /// Records the names a `sched_switch` or `sched_wakeup` record gives to pids the saved cmdlines do
    /// not name (as trace-cmd's `sched_switch` plugin does).
    fn learn_comms(&mut self, id: u16, data: &[u8]) {
        let pairs: &[(&str, &str)] = if Some(id) == self.sched_switch {
            &[("prev_comm", "prev_pid"), ("next_comm", "next_pid")]
        } else if self.sched_wakeups.contains(&id) {
            &[("comm", "pid")]
        } else {
            return;
        };
        let Some(fmt) = self.formats.get(&id) else {
            return;
        };
        let big = self.info.big_endian;
        let mut learnt = [None, None];
        for (slot, (c, p)) in learnt.iter_mut().zip(pairs) {
            let comm = fmt.field(c).and_then(|f| field_value(data, f, big));
            let pid = fmt.field(p).and_then(|f| field_value(data, f, big));
            if let (Some(FieldValue::Str(comm)), Some(pid)) = (comm, pid) {
                let pid = pid.as_u64() as i32;
                if pid != 0 && !comm.is_empty() {
                    *slot = Some((pid, String::from_utf8_lossy(comm).into_owned()));
                }
            }
        }
        // Like libtraceevent's `tep_register_comm`, a known pid keeps its saved name.
        for (pid, comm) in learnt.into_iter().flatten() {
            self.cmdlines.entry(pid).or_insert(comm);
        }
    }
}

/// A reader of the file's bytes, in its byte order, that names the offset of what it could not read.
struct Bytes<'a> {
    data: &'a [u8],
    at: usize,
    big: bool,
    /// File offset of `data[0]` (for messages), or `None` when `data` is a decompressed section.
    base: u64,
    section: &'static str,
}

impl<'a> Bytes<'a> {
    fn err(&self, file: &str, what: impl Into<String>) -> FormatError {
        let what = what.into();
        BinaryError::new(
            file,
            Some(self.section.to_string()),
            self.base + self.at as u64,
            what,
        )
        .into()
    }
    fn take(&mut self, n: usize, file: &str, what: &str) -> Result<&'a [u8], FormatError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.data.len());
        match end {
            Some(end) => {
                let s = &self.data[self.at..end];
                self.at = end;
                Ok(s)
            }
            None => Err(self.err(
                file,
                format!(
                    "expected {what} ({n} bytes), found the end of the data ({} bytes left)",
                    self.data.len() - self.at
                ),
            )),
        }
    }
    fn uint(&mut self, n: usize, file: &str, what: &str) -> Result<u64, FormatError> {
        let b = self.take(n, file, what)?;
        Ok(read_uint(b, 0, n, self.big).unwrap_or(0))
    }
    fn cstr(&mut self, file: &str, what: &str) -> Result<&'a [u8], FormatError> {
        match self.data[self.at..].iter().position(|&b| b == 0) {
            Some(i) => {
                let s = &self.data[self.at..self.at + i];
                self.at += i + 1;
                Ok(s)
            }
            None => Err(self.err(file, format!("expected {what} ending in NUL"))),
        }
    }
    fn sized(&mut self, len_bytes: usize, file: &str, what: &str) -> Result<&'a [u8], FormatError> {
        let n = self.uint(len_bytes, file, what)?;
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        self.take(n, file, what)
    }
}

/// One CPU's ring-buffer data: where it is, the current page and what is decoded of it.
struct CpuStream {
    cpu: u32,
    /// File offset and size of the data (for compressed data: of the chunks).
    offset: u64,
    size: u64,
    /// Bytes of the data read so far (uncompressed data) or chunks left (compressed).
    pos: u64,
    chunks_left: u32,
    /// The decompressed chunk being read, and where in it the next page starts.
    chunk: Vec<u8>,
    chunk_pos: usize,
    chunk_offset: u64,
    /// The current page.
    page: Vec<u8>,
    page_offset: u64,
    page_len: usize,
    /// Next record in the page (from the data start) and the running timestamp.
    next: usize,
    ts: u64,
    /// The current record: its payload range in `page` and timestamp.
    current: Option<(usize, usize, u64)>,
    done: bool,
    /// Events the kernel lost before pages of this CPU (`None` count when not stored).
    lost: u64,
    lost_pages: u64,
}

/// The reader: open it on a `.dat` file, then take its events in time order.
pub struct DatReader<R> {
    inner: R,
    meta: DatMeta,
    cpus: Vec<CpuStream>,
    compressed_data: bool,
    bytes_read: u64,
    /// Set when a CPU's data ended in damage: returned once, the other CPUs go on.
    pending_error: Vec<FormatError>,
    losses: Vec<DatLoss>,
}

/// Events the kernel lost on a CPU before a page (its ring buffer was full).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatLoss {
    /// The CPU.
    pub cpu: u32,
    /// The page's timestamp (ns): the loss happened before it.
    pub ts: u64,
    /// How many, when the kernel stored the count.
    pub count: Option<u64>,
}

impl DatReader<BufReader<File>> {
    /// Opens `path`.
    pub fn open(path: &Path) -> Result<Self, FormatError> {
        let file = path.display().to_string();
        let f = File::open(path).map_err(|source| FormatError::Io {
            file: file.clone(),
            source,
        })?;
        Self::new(BufReader::with_capacity(64 * 1024, f), file)
    }
}

fn io(file: &str) -> impl Fn(std::io::Error) -> FormatError + '_ {
    move |source| FormatError::Io {
        file: file.to_string(),
        source,
    }
}

impl<R: Read + Seek> DatReader<R> {
    /// Reads the header and sections of `inner` (which errors call `file`).
    pub fn new(mut inner: R, file: impl Into<String>) -> Result<Self, FormatError> {
        let file = file.into();
        let len = inner.seek(SeekFrom::End(0)).map_err(io(&file))?;
        inner.seek(SeekFrom::Start(0)).map_err(io(&file))?;
        let mut head = [0u8; 10];
        read_exact_at(
            &mut inner,
            0,
            &mut head,
            &file,
            "the magic `\\x17\\x08\\x44tracing`",
        )?;
        if !sniff(&head) {
            return Err(BinaryError::new(
                &file,
                None,
                0,
                "expected the trace-cmd magic `\\x17\\x08\\x44tracing`: not a trace-cmd .dat file",
            )
            .into());
        }
        // Version string, endianness, long size, page size.
        let mut buf = vec![0u8; 64];
        let n = read_some_at(&mut inner, 10, &mut buf).map_err(io(&file))?;
        buf.truncate(n);
        let nul = buf.iter().position(|&b| b == 0).ok_or_else(|| {
            FormatError::from(BinaryError::new(
                &file,
                None,
                10,
                "expected the file version as a NUL-terminated string",
            ))
        })?;
        let version_text = String::from_utf8_lossy(&buf[..nul]).into_owned();
        let version: u32 = version_text.parse().unwrap_or(0);
        if version != 6 && version != 7 {
            return Err(BinaryError::new(
                &file,
                None,
                10,
                format!(
                    "file version `{}` is not one socscope reads (6 or 7); `trace-cmd convert \
                     --file-version 7` writes a version it reads",
                    crate::ParseError::at("", 0, &version_text, 0, "").text
                ),
            )
            .into());
        }
        let mut at = 10 + nul + 1;
        let fixed = buf.get(nul + 1..nul + 7).ok_or_else(|| {
            FormatError::from(BinaryError::new(
                &file,
                None,
                at as u64,
                "expected endianness, long size and page size, found the end of the file",
            ))
        })?;
        let big = fixed[0] != 0;
        let long_size = fixed[1];
        if long_size != 4 && long_size != 8 {
            return Err(BinaryError::new(
                &file,
                None,
                at as u64 + 1,
                format!("expected a long size of 4 or 8 bytes, found {long_size}"),
            )
            .into());
        }
        let page_size = read_uint(fixed, 2, 4, big).unwrap_or(0) as u32;
        if !(64..=1 << 24).contains(&page_size) {
            return Err(BinaryError::new(
                &file,
                None,
                at as u64 + 2,
                format!("expected a page size of 64 B to 16 MiB, found {page_size}"),
            )
            .into());
        }
        at += 6;
        let info = DatInfo {
            version,
            big_endian: big,
            long_size,
            page_size,
            compression: Compression::None,
            compression_text: "none".into(),
            cpus: 0,
            cpu_data: Vec::new(),
            clock: None,
            uname: None,
            tracer_version: None,
            cpustat: Vec::new(),
            other_instances: Vec::new(),
            event_formats: 0,
        };
        let meta = DatMeta {
            file: file.clone(),
            info,
            formats: HashMap::new(),
            common_type: (0, 2),
            common_pid: (4, 4),
            cmdlines: HashMap::new(),
            kallsyms: Kallsyms::default(),
            printk: HashMap::new(),
            commit: (8, 8),
            data_offset: 16,
            sched_switch: None,
            sched_wakeups: Vec::new(),
            tsc2nsec: None,
            ts_offset: 0,
        };
        let mut r = Self {
            inner,
            meta,
            cpus: Vec::new(),
            compressed_data: false,
            bytes_read: 0,
            pending_error: Vec::new(),
            losses: Vec::new(),
        };
        if version == 6 {
            r.read_v6(at as u64, len)?;
        } else {
            r.read_v7(at as u64, len)?;
        }
        r.finish_meta();
        Ok(r)
    }

    fn read_v6(&mut self, at: u64, len: u64) -> Result<(), FormatError> {
        let file = self.meta.file.clone();
        // Version 6 is one run of parts; read it in pieces from the file, in order.
        let mut pos = at;
        let mut piece = |r: &mut Self, n: u64, what: &str| -> Result<Vec<u8>, FormatError> {
            if n > len.saturating_sub(pos) || n > MAX_SECTION {
                return Err(BinaryError::new(
                    &file,
                    None,
                    pos,
                    format!("{what}: {n} bytes announced, more than the file holds"),
                )
                .into());
            }
            let mut b = vec![0u8; n as usize];
            read_exact_at(&mut r.inner, pos, &mut b, &file, what)?;
            pos += n;
            Ok(b)
        };
        let big = self.meta.info.big_endian;
        let u = |b: &[u8]| read_uint(b, 0, b.len(), big).unwrap_or(0);
        // header_page, header_event.
        for label in ["header_page", "header_event"] {
            let name = piece(self, label.len() as u64 + 1, label)?;
            if name.get(..label.len()) != Some(label.as_bytes()) {
                return Err(BinaryError::new(
                    &file,
                    None,
                    pos - name.len() as u64,
                    format!("expected `{label}`"),
                )
                .into());
            }
            let n = u(&piece(self, 8, label)?);
            let text = piece(self, n, label)?;
            if label == "header_page" {
                self.header_page(&text);
            }
        }
        let count = u(&piece(self, 4, "the number of ftrace event formats")?);
        for _ in 0..count {
            let n = u(&piece(self, 8, "the size of an ftrace event format")?);
            let text = piece(self, n, "an ftrace event format")?;
            self.add_format("ftrace", &text);
        }
        let systems = u(&piece(self, 4, "the number of event systems")?);
        for _ in 0..systems {
            let mut name = Vec::new();
            loop {
                let b = piece(self, 1, "an event system's name")?;
                if b[0] == 0 || name.len() > 4096 {
                    break;
                }
                name.push(b[0]);
            }
            let system = String::from_utf8_lossy(&name).into_owned();
            let count = u(&piece(self, 4, "the number of events of a system")?);
            for _ in 0..count {
                let n = u(&piece(self, 8, "the size of an event format")?);
                let text = piece(self, n, "an event format")?;
                self.add_format(&system, &text);
            }
        }
        let n = u(&piece(self, 4, "the size of kallsyms")?);
        let k = piece(self, n, "kallsyms")?;
        self.meta.kallsyms = Kallsyms::parse(&k);
        drop(k);
        let n = u(&piece(self, 4, "the size of the trace_printk formats")?);
        self.meta.printk = parse_printk(&piece(self, n, "the trace_printk formats")?);
        let n = u(&piece(self, 8, "the size of the saved cmdlines")?);
        let c = piece(self, n, "the saved cmdlines")?;
        self.parse_cmdlines(&c);
        let cpus = u(&piece(self, 4, "the number of CPUs")?) as u32;
        self.meta.info.cpus = cpus;
        loop {
            let tag = piece(self, 10, "`options`, `latency` or `flyrecord`")?;
            match &tag[..] {
                b"options  \0" => loop {
                    let id = u(&piece(self, 2, "an option id")?) as u16;
                    if id == 0 {
                        break;
                    }
                    let n = u(&piece(self, 4, "an option size")?);
                    let data = piece(self, n, "an option")?;
                    self.option(id, &data)?;
                },
                b"latency  \0" => {
                    return Err(BinaryError::new(
                        &file,
                        None,
                        pos - 10,
                        "a latency-tracer capture (text, not ring-buffer data): export it with \
                         `trace-cmd report` and import the text",
                    )
                    .into());
                }
                b"flyrecord\0" => {
                    for cpu in 0..cpus {
                        let p = piece(self, 16, "a CPU's data offset and size")?;
                        let offset = read_uint(&p, 0, 8, big).unwrap_or(0);
                        let size = read_uint(&p, 8, 8, big).unwrap_or(0);
                        self.add_cpu(cpu, offset, size)?;
                    }
                    // A TRACECLOCK option of no data: the clock file follows the CPU table.
                    if self.meta.info.clock.as_deref() == Some("") {
                        let n = u(&piece(self, 8, "the size of the trace clock text")?);
                        let text = piece(self, n, "the trace clock text")?;
                        self.option(4, &text)?;
                    }
                    return Ok(());
                }
                _ => {
                    return Err(BinaryError::new(
                        &file,
                        None,
                        pos - 10,
                        format!(
                            "expected `options`, `latency` or `flyrecord`, found `{}`",
                            String::from_utf8_lossy(until_nul(&tag)).escape_default()
                        ),
                    )
                    .into());
                }
            }
        }
    }

    fn read_v7(&mut self, at: u64, len: u64) -> Result<(), FormatError> {
        let file = self.meta.file.clone();
        let mut buf = vec![0u8; 256];
        let n = read_some_at(&mut self.inner, at, &mut buf).map_err(io(&file))?;
        buf.truncate(n);
        let mut b = Bytes {
            data: &buf,
            at: 0,
            big: self.meta.info.big_endian,
            base: at,
            section: "header",
        };
        let name = String::from_utf8_lossy(b.cstr(&file, "the compression's name")?).into_owned();
        let ver = String::from_utf8_lossy(b.cstr(&file, "the compression's version")?).into_owned();
        let first_options = b.uint(8, &file, "the offset of the first options section")?;
        self.meta.info.compression = match name.as_str() {
            "none" => Compression::None,
            "zstd" => Compression::Zstd,
            "zlib" => Compression::Zlib,
            other => {
                return Err(BinaryError::new(
                    &file,
                    None,
                    at,
                    format!(
                        "compression `{}` is not one socscope reads (none, zstd, zlib); \
                         `trace-cmd convert --compression zstd` rewrites the file with one it reads",
                        other.escape_default()
                    ),
                )
                .into());
            }
        };
        self.meta.info.compression_text = if name == "none" {
            name
        } else {
            format!("{name} {ver}")
        };
        // Options sections, chained by their DONE option; then the sections they point to.
        let mut next = first_options;
        let mut seen = 0;
        let mut sections: Vec<(u16, u64)> = Vec::new();
        let mut buffers: Vec<Vec<u8>> = Vec::new();
        while next != 0 {
            seen += 1;
            if seen > 64 {
                return Err(
                    BinaryError::new(&file, None, next, "options sections form a loop").into(),
                );
            }
            let (id, data) = self.section(next, len)?;
            if id != 0 {
                return Err(BinaryError::new(
                    &file,
                    None,
                    next,
                    format!("expected an options section (id 0), found section id {id}"),
                )
                .into());
            }
            let mut o = Bytes {
                data: &data,
                at: 0,
                big: self.meta.info.big_endian,
                base: 0,
                section: "options",
            };
            next = 0;
            while o.at < data.len() {
                let id = o.uint(2, &file, "an option id")? as u16;
                let body = o.sized(4, &file, "an option")?;
                match id {
                    0 => {
                        next = read_uint(body, 0, 8, o.big).unwrap_or(0);
                        break;
                    }
                    3 => buffers.push(body.to_vec()),
                    16..=21 => sections.push((id, read_uint(body, 0, 8, o.big).unwrap_or(0))),
                    _ => self.option(id, body)?,
                }
            }
        }
        for (id, offset) in sections {
            let (sid, data) = self.section(offset, len)?;
            if sid != id {
                return Err(BinaryError::new(
                    &file,
                    None,
                    offset,
                    format!("option {id} points to a section of id {sid}"),
                )
                .into());
            }
            self.v7_section(id, &data)?;
        }
        // The top instance's buffer (the first when none is the top one).
        let top = buffers
            .iter()
            .position(|b| b.get(8) == Some(&0))
            .unwrap_or(0);
        for (i, body) in buffers.iter().enumerate() {
            if i != top {
                let name = body.get(8..).map(until_nul).unwrap_or_default();
                self.meta
                    .info
                    .other_instances
                    .push(String::from_utf8_lossy(name).into_owned());
            }
        }
        if let Some(body) = buffers.get(top) {
            let body = body.clone();
            let mut o = Bytes {
                data: &body,
                at: 0,
                big: self.meta.info.big_endian,
                base: 0,
                section: "BUFFER option",
            };
            let section = o.uint(8, &file, "the buffer's section offset")?;
            let _name = o.cstr(&file, "the instance name")?;
            let clock = String::from_utf8_lossy(o.cstr(&file, "the trace clock")?).into_owned();
            if !clock.is_empty() {
                self.meta.info.clock = Some(clock);
            }
            let _page = o.uint(4, &file, "the page size")?;
            let count = o.uint(4, &file, "the CPU count")?;
            // The flyrecord section's flags say whether its data is compressed.
            let mut h = [0u8; 16];
            read_exact_at(
                &mut self.inner,
                section,
                &mut h,
                &file,
                "the flyrecord section header",
            )?;
            let flags = read_uint(&h, 2, 2, self.meta.info.big_endian).unwrap_or(0);
            self.compressed_data =
                flags & 1 != 0 && self.meta.info.compression != Compression::None;
            for _ in 0..count.min(1 << 16) {
                let cpu = o.uint(4, &file, "a CPU id")? as u32;
                let offset = o.uint(8, &file, "a CPU's data offset")?;
                let size = o.uint(8, &file, "a CPU's data size")?;
                self.add_cpu(cpu, offset, size)?;
            }
        }
        Ok(())
    }

    /// The section at `offset`: its id and its (decompressed) content.
    fn section(&mut self, offset: u64, len: u64) -> Result<(u16, Vec<u8>), FormatError> {
        let file = self.meta.file.clone();
        let big = self.meta.info.big_endian;
        let mut h = [0u8; 16];
        read_exact_at(&mut self.inner, offset, &mut h, &file, "a section header")?;
        let id = read_uint(&h, 0, 2, big).unwrap_or(0) as u16;
        let flags = read_uint(&h, 2, 2, big).unwrap_or(0);
        let size = read_uint(&h, 8, 8, big).unwrap_or(0);
        if size > len.saturating_sub(offset + 16) || size > MAX_SECTION {
            return Err(BinaryError::new(
                &file,
                Some(format!("section {id}")),
                offset + 8,
                format!("section size {size} runs past the end of the file ({len} bytes)"),
            )
            .into());
        }
        let mut data = vec![0u8; size as usize];
        read_exact_at(&mut self.inner, offset + 16, &mut data, &file, "a section")?;
        if flags & 1 == 0 {
            return Ok((id, data));
        }
        let comp = self.meta.info.compression;
        let csize = read_uint(&data, 0, 4, big).unwrap_or(0) as usize;
        let usize_ = read_uint(&data, 4, 4, big).unwrap_or(0);
        let body = data.get(8..8 + csize).ok_or_else(|| {
            FormatError::from(BinaryError::new(
                &file,
                Some(format!("section {id}")),
                offset + 16,
                format!("compressed size {csize} runs past the section ({size} bytes)"),
            ))
        })?;
        if usize_ > MAX_SECTION {
            return Err(BinaryError::new(
                &file,
                Some(format!("section {id}")),
                offset + 20,
                format!("uncompressed size {usize_} is past the {MAX_SECTION}-byte limit"),
            )
            .into());
        }
        let out = comp.decompress(body, usize_ as usize).map_err(|e| {
            FormatError::from(BinaryError::new(
                &file,
                Some(format!("section {id}")),
                offset + 24,
                format!("cannot decompress ({:?}): {e}", comp),
            ))
        })?;
        Ok((id, out))
    }

    fn v7_section(&mut self, id: u16, data: &[u8]) -> Result<(), FormatError> {
        let file = self.meta.file.clone();
        let mut b = Bytes {
            data,
            at: 0,
            big: self.meta.info.big_endian,
            base: 0,
            section: match id {
                16 => "header info section",
                17 => "ftrace events section",
                18 => "event formats section",
                19 => "kallsyms section",
                20 => "printk section",
                _ => "cmdlines section",
            },
        };
        match id {
            16 => {
                for label in ["header_page", "header_event"] {
                    let name = b.cstr(&file, label)?;
                    if name != label.as_bytes() {
                        return Err(b.err(&file, format!("expected `{label}`")));
                    }
                    let text = b.sized(8, &file, label)?;
                    if label == "header_page" {
                        self.header_page(text);
                    }
                }
            }
            17 => {
                let n = b.uint(4, &file, "the number of ftrace event formats")?;
                for _ in 0..n {
                    let text = b.sized(8, &file, "an ftrace event format")?;
                    self.add_format("ftrace", text);
                }
            }
            18 => {
                let systems = b.uint(4, &file, "the number of event systems")?;
                for _ in 0..systems {
                    let system =
                        String::from_utf8_lossy(b.cstr(&file, "a system name")?).into_owned();
                    let n = b.uint(4, &file, "the number of events of a system")?;
                    for _ in 0..n {
                        let text = b.sized(8, &file, "an event format")?;
                        self.add_format(&system, text);
                    }
                }
            }
            19 => self.meta.kallsyms = Kallsyms::parse(b.sized(4, &file, "kallsyms")?),
            20 => self.meta.printk = parse_printk(b.sized(4, &file, "the printk formats")?),
            _ => {
                let c = b.sized(8, &file, "the saved cmdlines")?;
                self.parse_cmdlines(c);
            }
        }
        Ok(())
    }

    fn option(&mut self, id: u16, data: &[u8]) -> Result<(), FormatError> {
        let text = || String::from_utf8_lossy(until_nul(data)).trim().to_string();
        let big = self.meta.info.big_endian;
        match id {
            2 => self.meta.info.cpustat.push(text()),
            4 => {
                // `[local] global counter`: the selected clock is bracketed.
                let t = text();
                let clock = t
                    .split_whitespace()
                    .find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')))
                    .unwrap_or(t.as_str())
                    .to_string();
                self.meta.info.clock = Some(clock);
            }
            5 => self.meta.info.uname = Some(text()),
            7 => self.meta.ts_offset = text().parse().unwrap_or(0),
            8 => self.meta.info.cpus = read_uint(data, 0, 4, big).unwrap_or(0) as u32,
            9 => self.meta.info.tracer_version = Some(text()),
            14 => {
                let mult = read_uint(data, 0, 4, big).unwrap_or(0) as u32;
                let shift = read_uint(data, 4, 4, big).unwrap_or(0) as u32;
                let offset = read_uint(data, 8, 8, big).unwrap_or(0);
                if mult != 0 {
                    self.meta.tsc2nsec = Some((mult, shift, offset));
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn header_page(&mut self, text: &[u8]) {
        for line in String::from_utf8_lossy(text).lines() {
            let Some(f) = parse_field(line.trim().replacen("field: ", "field:", 1).as_str(), 8)
            else {
                continue;
            };
            match f.name.as_str() {
                "commit" => self.meta.commit = (f.offset as usize, f.size as usize),
                "data" => self.meta.data_offset = f.offset as usize,
                _ => {}
            }
        }
    }

    fn add_format(&mut self, system: &str, text: &[u8]) {
        let text = String::from_utf8_lossy(text);
        if let Some(f) = EventFormat::parse(system, &text, self.meta.info.long_size) {
            self.meta.formats.insert(f.id, f);
        }
    }

    fn parse_cmdlines(&mut self, text: &[u8]) {
        for line in String::from_utf8_lossy(text).lines() {
            if let Some((pid, comm)) = line.trim_start().split_once(' ')
                && let Ok(pid) = pid.parse::<i32>()
            {
                self.meta.cmdlines.insert(pid, comm.to_string());
            }
        }
    }

    fn add_cpu(&mut self, cpu: u32, offset: u64, size: u64) -> Result<(), FormatError> {
        if size == 0 {
            return Ok(());
        }
        // A CPU whose data lies past a cut file's end is kept: reading it reports the cut (file, CPU,
        // byte) as damage to that CPU, and the other CPUs' events are still read. An extent no file
        // can have (past `off_t`'s range) is a damaged CPU table, refused here so that no offset
        // arithmetic below can overflow.
        if offset
            .checked_add(size)
            .is_none_or(|end| end > i64::MAX as u64)
        {
            return Err(BinaryError::new(
                &self.meta.file,
                Some(format!("CPU {cpu}")),
                offset,
                format!("the CPU's data ({size} bytes at byte {offset}) lies past any file's end"),
            )
            .into());
        }
        self.meta.info.cpu_data.push((cpu, size));
        self.cpus.push(CpuStream {
            cpu,
            offset,
            size,
            pos: 0,
            chunks_left: 0,
            chunk: Vec::new(),
            chunk_pos: 0,
            chunk_offset: offset,
            page: vec![0; self.meta.info.page_size as usize],
            page_offset: offset,
            page_len: 0,
            next: 0,
            ts: 0,
            current: None,
            done: false,
            lost: 0,
            lost_pages: 0,
        });
        Ok(())
    }

    fn finish_meta(&mut self) {
        let m = &mut self.meta;
        m.info.event_formats = m.formats.len();
        for f in m.formats.values() {
            match (f.system.as_str(), f.name.as_str()) {
                ("sched", "sched_switch") => m.sched_switch = Some(f.id),
                ("sched", "sched_wakeup" | "sched_wakeup_new" | "sched_waking") => {
                    m.sched_wakeups.push(f.id);
                }
                _ => {}
            }
            if let Some(t) = f.field("common_type") {
                m.common_type = (t.offset as usize, t.size as usize);
            }
            if let Some(t) = f.field("common_pid") {
                m.common_pid = (t.offset as usize, t.size as usize);
            }
        }
        self.cpus.sort_by_key(|c| c.cpu);
        if self.compressed_data {
            // Chunk counts are read when each CPU starts.
            for c in &mut self.cpus {
                c.chunks_left = u32::MAX;
            }
        }
    }

    /// The formats and names.
    pub fn meta(&self) -> &DatMeta {
        &self.meta
    }

    /// The file's header and options.
    pub fn info(&self) -> &DatInfo {
        &self.meta.info
    }

    /// Bytes of ring-buffer data read so far.
    pub fn bytes(&self) -> u64 {
        self.bytes_read
    }

    /// Per CPU with data: (cpu, events the kernel said it lost, pages that said they followed a loss).
    pub fn lost(&self) -> Vec<(u32, u64, u64)> {
        self.cpus
            .iter()
            .map(|c| (c.cpu, c.lost, c.lost_pages))
            .collect()
    }

    /// The losses met since the last call (pages read ahead may have met them before the events
    /// returned so far).
    pub fn take_losses(&mut self) -> Vec<DatLoss> {
        std::mem::take(&mut self.losses)
    }

    /// The next event in time order (ties: the lower CPU first); `Err` for a CPU whose data is damaged
    /// (the events before the damage were returned; the other CPUs go on at the next call).
    pub fn next_event(&mut self) -> Result<Option<DatEvent<'_>>, FormatError> {
        if let Some(e) = self.pending_error.pop() {
            return Err(e);
        }
        // Fill every CPU's current record.
        for i in 0..self.cpus.len() {
            if self.cpus[i].current.is_none()
                && !self.cpus[i].done
                && let Err(e) = self.advance(i)
            {
                self.cpus[i].done = true;
                self.cpus[i].current = None;
                self.pending_error.push(e);
            }
        }
        if let Some(e) = self.pending_error.pop() {
            return Err(e);
        }
        let best = self
            .cpus
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.current.map(|(_, _, ts)| (ts, i)))
            .min();
        let Some((_, i)) = best else {
            return Ok(None);
        };
        let Some((start, end, ts)) = self.cpus[i].current.take() else {
            return Ok(None);
        };
        let big = self.meta.info.big_endian;
        let c = &self.cpus[i];
        let data = c.page.get(start..end).unwrap_or_default();
        let (to, ts_) = self.meta.common_type;
        let id = read_uint(data, to, ts_, big).unwrap_or(0) as u16;
        self.meta.learn_comms(id, data);
        let (po, ps) = self.meta.common_pid;
        let pid = sign_extend(read_uint(data, po, ps, big).unwrap_or(0), ps) as i32;
        Ok(Some(DatEvent {
            cpu: c.cpu,
            ts: self.meta.to_ns(ts),
            pid,
            id,
            data,
            meta: &self.meta,
        }))
    }

    /// Moves CPU `i` to its next data record (loading pages as needed).
    fn advance(&mut self, i: usize) -> Result<(), FormatError> {
        loop {
            if self.cpus[i].page_len == 0 || self.cpus[i].next >= self.cpus[i].page_len {
                if !self.load_page(i)? {
                    self.cpus[i].done = true;
                    return Ok(());
                }
                continue;
            }
            if let Some(found) = self.step(i)? {
                self.cpus[i].current = Some(found);
                return Ok(());
            }
        }
    }

    /// Decodes the record at the CPU's `next`: `Some` for a data record, `None` for the others.
    fn step(&mut self, i: usize) -> Result<Option<(usize, usize, u64)>, FormatError> {
        let big = self.meta.info.big_endian;
        let base = self.meta.data_offset;
        let file = &self.meta.file;
        let c = &mut self.cpus[i];
        let at = base + c.next;
        let damaged = |c: &CpuStream, what: String| -> FormatError {
            BinaryError::new(
                file,
                Some(format!("CPU {}", c.cpu)),
                c.page_offset + (base + c.next) as u64,
                what,
            )
            .into()
        };
        let limit = base + c.page_len;
        let Some(hdr) = read_uint(&c.page[..limit], at, 4, big) else {
            // Fewer than 4 bytes left: the page's end.
            c.next = c.page_len;
            return Ok(None);
        };
        let hdr = hdr as u32;
        let (type_len, delta) = if big {
            (hdr >> 27, u64::from(hdr & 0x07ff_ffff))
        } else {
            (hdr & 0x1f, u64::from(hdr >> 5))
        };
        let word = |c: &CpuStream| read_uint(&c.page[..limit], at + 4, 4, big);
        match type_len {
            29 => {
                // Padding: with no delta, the rest of the page; otherwise a discarded record.
                if delta == 0 {
                    c.next = c.page_len;
                    return Ok(None);
                }
                let Some(len) = word(c) else {
                    c.next = c.page_len;
                    return Ok(None);
                };
                c.ts = c.ts.wrapping_add(delta);
                c.next += 4 + len as usize;
                Ok(None)
            }
            30 => {
                let ext = word(c)
                    .ok_or_else(|| damaged(c, "a time extend cut by the page's end".into()))?;
                c.ts = c.ts.wrapping_add((ext << 27) + delta);
                c.next += 8;
                Ok(None)
            }
            31 => {
                let ext = word(c).ok_or_else(|| {
                    damaged(c, "an absolute time stamp cut by the page's end".into())
                })?;
                let abs = (ext << 27) | delta;
                const TOP: u64 = !((1 << 59) - 1);
                c.ts = (c.ts & TOP) | abs;
                c.next += 8;
                Ok(None)
            }
            0 => {
                let len = word(c)
                    .ok_or_else(|| damaged(c, "a record length cut by the page's end".into()))?;
                if len < 4 {
                    return Err(damaged(
                        c,
                        format!("a record length of {len} bytes (at least 4)"),
                    ));
                }
                let n = ((len as usize - 4) + 3) & !3;
                let start = at + 8;
                if start + n > limit {
                    return Err(damaged(
                        c,
                        format!(
                            "a record of {n} bytes runs past the page's data ({} bytes)",
                            c.page_len
                        ),
                    ));
                }
                c.ts = c.ts.wrapping_add(delta);
                c.next += 8 + n;
                Ok(Some((start, start + n, c.ts)))
            }
            n => {
                let n = n as usize * 4;
                let start = at + 4;
                if start + n > limit {
                    return Err(damaged(
                        c,
                        format!(
                            "a record of {n} bytes runs past the page's data ({} bytes)",
                            c.page_len
                        ),
                    ));
                }
                c.ts = c.ts.wrapping_add(delta);
                c.next += 4 + n;
                Ok(Some((start, start + n, c.ts)))
            }
        }
    }

    /// Loads CPU `i`'s next page; `false` at the end of its data.
    fn load_page(&mut self, i: usize) -> Result<bool, FormatError> {
        let page_size = self.meta.info.page_size as usize;
        let file = self.meta.file.clone();
        let big = self.meta.info.big_endian;
        if self.compressed_data {
            if !self.next_compressed_page(i)? {
                return Ok(false);
            }
        } else {
            let c = &mut self.cpus[i];
            if c.pos >= c.size {
                return Ok(false);
            }
            let n = (c.size - c.pos).min(page_size as u64) as usize;
            let at = c.offset + c.pos;
            c.page_offset = at;
            c.page.resize(page_size, 0);
            let got = read_some_at(&mut self.inner, at, &mut c.page[..n]).map_err(io(&file))?;
            c.pos += n as u64;
            self.bytes_read += got as u64;
            if got < n {
                c.page[got..].fill(0);
                return Err(BinaryError::new(
                    &file,
                    Some(format!("CPU {}", c.cpu)),
                    at + got as u64,
                    format!(
                        "the CPU's data is cut short: {} of its {} bytes are in the file",
                        c.pos - n as u64 + got as u64,
                        c.size
                    ),
                )
                .into());
            }
            if n < self.meta.data_offset {
                return Ok(false);
            }
        }
        let c = &mut self.cpus[i];
        let ts = read_uint(&c.page, 0, 8, big).unwrap_or(0);
        let (co, cs) = self.meta.commit;
        let commit = read_uint(&c.page, co, cs, big).unwrap_or(0);
        let missed_events = commit & (1 << 31) != 0;
        let missed_stored = commit & (1 << 30) != 0;
        let len = (commit & !(3u64 << 30) & 0xffff_ffff) as usize;
        let room = page_size.saturating_sub(self.meta.data_offset);
        if len > room {
            let at = c.page_offset + co as u64;
            c.page_len = 0;
            return Err(BinaryError::new(
                &file,
                Some(format!("CPU {}", c.cpu)),
                at,
                format!("a page that says it holds {len} bytes of records, more than its {room}"),
            )
            .into());
        }
        if missed_events {
            c.lost_pages += 1;
            let count = missed_stored.then(|| {
                let at = self.meta.data_offset + len;
                read_uint(&c.page, at, cs, big).unwrap_or(0)
            });
            c.lost += count.unwrap_or(0);
            self.losses.push(DatLoss {
                cpu: c.cpu,
                ts: self.meta.to_ns(ts),
                count,
            });
        }
        c.ts = ts;
        c.page_len = len;
        c.next = 0;
        Ok(true)
    }

    /// Decompresses (when needed) and copies CPU `i`'s next page; `false` at the end.
    fn next_compressed_page(&mut self, i: usize) -> Result<bool, FormatError> {
        let page_size = self.meta.info.page_size as usize;
        let file = self.meta.file.clone();
        let big = self.meta.info.big_endian;
        let comp = self.meta.info.compression;
        loop {
            let c = &mut self.cpus[i];
            if c.chunk_pos + page_size <= c.chunk.len() {
                c.page.clear();
                c.page
                    .extend_from_slice(&c.chunk[c.chunk_pos..c.chunk_pos + page_size]);
                c.page_offset = c.chunk_offset;
                c.chunk_pos += page_size;
                return Ok(true);
            }
            let place = Some(format!("CPU {}", c.cpu));
            if c.chunks_left == u32::MAX {
                let mut b = [0u8; 4];
                read_exact_at(&mut self.inner, c.offset, &mut b, &file, "the chunk count")?;
                c.chunks_left = read_uint(&b, 0, 4, big).unwrap_or(0) as u32;
                c.pos = 4;
            }
            if c.chunks_left == 0 || c.pos >= c.size {
                return Ok(false);
            }
            let at = c.offset + c.pos;
            let mut h = [0u8; 8];
            read_exact_at(&mut self.inner, at, &mut h, &file, "a chunk header")?;
            let csize = read_uint(&h, 0, 4, big).unwrap_or(0);
            let usize_ = read_uint(&h, 4, 4, big).unwrap_or(0);
            if csize > c.size - c.pos || usize_ > MAX_CHUNK {
                return Err(BinaryError::new(
                    &file,
                    place,
                    at,
                    format!(
                        "a compressed chunk of {csize} bytes ({usize_} uncompressed) runs past the \
                         CPU's data"
                    ),
                )
                .into());
            }
            let mut data = vec![0u8; csize as usize];
            read_exact_at(
                &mut self.inner,
                at + 8,
                &mut data,
                &file,
                "a compressed chunk",
            )?;
            self.bytes_read += 8 + csize;
            let c = &mut self.cpus[i];
            c.chunk = comp.decompress(&data, usize_ as usize).map_err(|e| {
                FormatError::from(BinaryError::new(
                    &file,
                    place.clone(),
                    at + 8,
                    format!("cannot decompress a chunk ({comp:?}): {e}"),
                ))
            })?;
            c.chunk_pos = 0;
            c.chunk_offset = at;
            c.chunks_left -= 1;
            c.pos += 8 + csize;
        }
    }
}

/// Reads exactly `buf.len()` bytes at `at`, or says what was cut.
fn read_exact_at<R: Read + Seek>(
    r: &mut R,
    at: u64,
    buf: &mut [u8],
    file: &str,
    what: &str,
) -> Result<(), FormatError> {
    let n = read_some_at(r, at, buf).map_err(io(file))?;
    if n < buf.len() {
        return Err(BinaryError::new(
            file,
            None,
            at + n as u64,
            format!(
                "expected {what} ({} bytes), found the end of the file after {n}",
                buf.len()
            ),
        )
        .into());
    }
    Ok(())
}

/// Reads up to `buf.len()` bytes at `at` (fewer at the end of the file).
fn read_some_at<R: Read + Seek>(r: &mut R, at: u64, buf: &mut [u8]) -> std::io::Result<usize> {
    r.seek(SeekFrom::Start(at))?;
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// One record of the ring buffer, with what decodes it.
#[derive(Clone, Copy)]
pub struct DatEvent<'a> {
    /// CPU.
    pub cpu: u32,
    /// Timestamp, nanoseconds (of the trace clock).
    pub ts: u64,
    /// `common_pid`.
    pub pid: i32,
    /// `common_type`: the event format's id.
    pub id: u16,
    /// The record's bytes.
    pub data: &'a [u8],
    meta: &'a DatMeta,
}

impl<'a> DatEvent<'a> {
    /// Its format, when the file has it.
    pub fn format(&self) -> Option<&'a EventFormat> {
        self.meta.formats.get(&self.id)
    }

    /// Its name (`unknown_event_N` when the file has no format for its id).
    pub fn name(&self) -> std::borrow::Cow<'a, str> {
        match self.format() {
            Some(f) => std::borrow::Cow::Borrowed(f.name.as_str()),
            None => std::borrow::Cow::Owned(format!("unknown_event_{}", self.id)),
        }
    }

    /// The name of its thread, as `trace-cmd report` prints it.
    pub fn comm(&self) -> &'a str {
        self.meta.comm(self.pid)
    }

    /// The value of field `name`.
    pub fn field(&self, name: &str) -> Option<FieldValue<'a>> {
        let f = self.format()?.field(name)?;
        field_value(self.data, f, self.meta.big())
    }

    /// The fields after the common ones, with their values.
    pub fn fields(&self) -> impl Iterator<Item = (&'a Field, Option<FieldValue<'a>>)> + use<'a> {
        let data = self.data;
        let big = self.meta.big();
        self.format()
            .map(EventFormat::own_fields)
            .unwrap_or_default()
            .iter()
            .map(move |f| (f, field_value(data, f, big)))
    }

    /// Appends what `trace-cmd report` prints after the event's name (its `print fmt` applied to its
    /// fields; `bprint` through the trace_printk format it points to). `false` when the print format
    /// could not be applied: the fields were written as `name=value` instead.
    pub fn render(&self, out: &mut String) -> bool {
        let Some(f) = self.format() else {
            out.push_str("[UNKNOWN TYPE]");
            return false;
        };
        let ctx = printfmt::Ctx {
            data: self.data,
            format: f,
            meta: self.meta,
        };
        if f.system == "ftrace" && f.name == "bprint" {
            return printfmt::bprint(&ctx, out) || {
                self.render_raw(out);
                false
            };
        }
        if f.system == "ftrace" && f.name == "kernel_stack" {
            printfmt::kernel_stack(&ctx, out);
            return true;
        }
        let start = out.len();
        if let Some(p) = &f.print
            && p.apply(&ctx, out)
        {
            // `trace-cmd report` drops the newline that ends a print's buffer.
            while out.len() > start && out.ends_with('\n') {
                out.pop();
            }
            return true;
        }
        out.truncate(start);
        self.render_raw(out);
        false
    }

    /// The return addresses of a `kernel_stack` record, innermost first.
    pub fn stack(&self) -> Vec<u64> {
        let ctx = match self.format() {
            Some(format) => printfmt::Ctx {
                data: self.data,
                format,
                meta: self.meta,
            },
            None => return Vec::new(),
        };
        printfmt::stack_addresses(&ctx)
    }

    /// The function containing `addr`, with the offset in it.
    pub fn symbol(&self, addr: u64) -> Option<(&'a str, u64)> {
        self.meta.kallsyms.lookup(addr)
    }

    /// Appends the fields as `name=value` (as `trace-cmd report -R` prints them).
    pub fn render_raw(&self, out: &mut String) {
        use std::fmt::Write;
        let mut first = true;
        for (f, v) in self.fields() {
            if !first {
                out.push(' ');
            }
            first = false;
            out.push_str(&f.name);
            out.push('=');
            match v {
                Some(FieldValue::Int(v)) => {
                    let _ = write!(out, "{v}");
                }
                Some(FieldValue::Uint(v)) if f.pointer => {
                    let _ = write!(out, "0x{v:x}");
                }
                Some(FieldValue::Uint(v)) => {
                    let _ = write!(out, "{v}");
                }
                Some(FieldValue::Str(s)) => out.push_str(&String::from_utf8_lossy(s)),
                Some(FieldValue::Array { bytes, elem, .. }) => {
                    out.push_str("ARRAY[");
                    for (k, b) in bytes.iter().enumerate() {
                        if k > 0 {
                            out.push_str(", ");
                        }
                        let _ = write!(out, "{b:02x}");
                    }
                    let _ = elem;
                    out.push(']');
                }
                None => out.push_str("[FAILED TO PARSE]"),
            }
        }
    }
}
