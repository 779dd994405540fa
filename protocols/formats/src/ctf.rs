//! CTF 1.8 traces (LTTng kernel and user space, perf's converter, barectf): a trace directory (its
//! `metadata` in TSDL, plain or packetized, and one file per stream), or a session directory of several
//! traces. Each stream is read packet by packet (one packet in memory per stream, whatever the trace's
//! size), its events decoded by the metadata's types (any integer size, alignment and byte order, enums,
//! strings, arrays, sequences, variants, structs; compact and large LTTng headers) and their clock
//! values rebuilt across wrap-arounds; the streams of every trace are merged in time order.
//!
//! Start here: [`CtfReader::open`], [`CtfReader::next_event`], [`CtfEvent`] and its [`Value`]s.

pub mod repeat;
pub mod tsdl;

use std::fmt;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use crate::{BinaryError, FormatError};
use tsdl::{ByteOrder, Clock, EventClass, Fields, IntType, Metadata, Type};

/// The registry's entry: a CTF trace is told by its metadata or packet magic.
pub const SPEC: crate::FormatSpec = crate::FormatSpec {
    name: "ctf",
    title: "CTF from LTTng or perf",
    help: "A CTF 1.8 trace directory (LTTng, perf), or an LTTng session directory of them",
    detection: crate::Detection::Binary { sniff },
};

/// Magic of a stream packet (`packet.header.magic`).
pub const PACKET_MAGIC: u32 = 0xC1FC_1FC1;

/// The most one packet may take in memory.
const MAX_PACKET: u64 = 256 << 20;

/// Whether `head` (a file's first bytes) is CTF: a metadata file (plain, starting `/* CTF 1.`, or
/// packetized) or a stream file.
pub fn sniff(head: &[u8]) -> bool {
    let m = |x: u32| head.starts_with(&x.to_le_bytes()) || head.starts_with(&x.to_be_bytes());
    head.starts_with(b"/* CTF 1.") || m(tsdl::METADATA_MAGIC) || m(PACKET_MAGIC)
}

/// A decoded value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// An unsigned integer, with its display base.
    Uint(u64, u8),
    /// A signed integer, with its display base.
    Int(i64, u8),
    /// A floating-point number.
    Float(f64),
    /// A string (or an array or sequence of text integers).
    Str(String),
    /// An enumeration's value and label.
    Enum(i128, Option<Rc<str>>),
    /// An array or a sequence.
    Array(Vec<Value>),
    /// A struct's fields.
    Struct(Vec<(Rc<str>, Value)>),
    /// A variant's selected option.
    Variant(Rc<str>, Box<Value>),
}

impl Value {
    /// The value as an integer, when it is one (enums give their value).
    pub fn as_i128(&self) -> Option<i128> {
        match self {
            Value::Uint(v, _) => Some(i128::from(*v)),
            Value::Int(v, _) => Some(i128::from(*v)),
            Value::Enum(v, _) => Some(*v),
            _ => None,
        }
    }

    /// The field `name` of a struct (or of a variant's struct).
    pub fn get(&self, name: &str) -> Option<&Value> {
        match self {
            Value::Struct(f) => f.iter().find(|(n, _)| &**n == name).map(|(_, v)| v),
            Value::Variant(_, v) => v.get(name),
            _ => None,
        }
    }

    /// The field `name` of a struct (or of a variant's struct), else its field `_name` (LTTng's
    /// metadata prefix). Compared in place: this runs several times per imported event, so it
    /// builds no `_name` string.
    pub fn get_lttng(&self, name: &str) -> Option<&Value> {
        self.get(name).or_else(|| self.get_lttng_prefixed(name))
    }

    /// The field `_name` of a struct (or of a variant's struct).
    fn get_lttng_prefixed(&self, name: &str) -> Option<&Value> {
        match self {
            Value::Struct(f) => f
                .iter()
                .find(|(n, _)| n.strip_prefix('_') == Some(name))
                .map(|(_, v)| v),
            Value::Variant(_, v) => v.get_lttng_prefixed(name),
            _ => None,
        }
    }
}

/// Field names without the leading `_` that LTTng's metadata gives them (as babeltrace prints them).
pub fn field_name(name: &str) -> &str {
    name.strip_prefix('_').unwrap_or(name)
}

/// As babeltrace2's text output prints values.
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Uint(v, 16) => write!(f, "0x{v:X}"),
            Value::Uint(v, 8) => write!(f, "0{v:o}"),
            Value::Uint(v, 2) => write!(f, "0b{v:b}"),
            Value::Uint(v, _) => write!(f, "{v}"),
            Value::Int(v, 16) => write!(f, "0x{:X}", *v as u64),
            Value::Int(v, _) => write!(f, "{v}"),
            Value::Float(v) => write!(f, "{v}"),
            Value::Str(s) => {
                f.write_str("\"")?;
                for c in s.chars() {
                    match c {
                        '"' => f.write_str("\\\"")?,
                        '\\' => f.write_str("\\\\")?,
                        '\n' => f.write_str("\\n")?,
                        '\t' => f.write_str("\\t")?,
                        '\r' => f.write_str("\\r")?,
                        c if c.is_control() => write!(f, "\\x{:02x}", c as u32)?,
                        c => write!(f, "{c}")?,
                    }
                }
                f.write_str("\"")
            }
            Value::Enum(v, label) => match label {
                Some(l) => write!(f, "( \"{l}\" : container = {v} )"),
                None => write!(f, "( <unknown> : container = {v} )"),
            },
            Value::Array(items) => {
                f.write_str("[")?;
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, " [{i}] = {v}")?;
                }
                f.write_str(" ]")
            }
            Value::Struct(fields) => {
                f.write_str("{")?;
                for (i, (n, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, " {} = {v}", field_name(n))?;
                }
                f.write_str(" }")
            }
            // babeltrace2 prints the selected option's value alone.
            Value::Variant(_, v) => write!(f, "{{ {v} }}"),
        }
    }
}

/// One event.
#[derive(Debug, Clone)]
pub struct CtfEvent {
    /// The trace it belongs to (its index in [`CtfReader::traces`]).
    pub trace: usize,
    /// The stream file it was read from (its index in [`CtfReader::streams`]).
    pub stream: usize,
    /// Its name.
    pub name: Rc<str>,
    /// Clock value (cycles).
    pub cycles: u64,
    /// Time, nanoseconds since the epoch (or since the clock's origin when its offset is zero).
    pub ns: i64,
    /// The CPU: the packet context's `cpu_id`, else a `perf_cpu` field.
    pub cpu: Option<u32>,
    /// The stream's event context (LTTng: `vtid`, `vpid`, `procname`...).
    pub stream_context: Option<Value>,
    /// The event class's own context.
    pub context: Option<Value>,
    /// The payload.
    pub fields: Option<Value>,
}

impl CtfEvent {
    /// The payload field `name` (the LTTng `_` prefix may be left out).
    pub fn field(&self, name: &str) -> Option<&Value> {
        let f = self.fields.as_ref()?;
        f.get_lttng(name)
    }

    /// The context field `name` (the event's, else the stream's).
    pub fn context_field(&self, name: &str) -> Option<&Value> {
        [&self.context, &self.stream_context]
            .into_iter()
            .flatten()
            .find_map(|v| v.get_lttng(name))
    }
}

/// What a tracer lost on a stream between two packets: events it discarded (the packet context's
/// `events_discarded` grew), or whole packets (its `packet_seq_num` jumped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CtfLoss {
    /// The stream file.
    pub stream: usize,
    /// Its CPU, when the packets say.
    pub cpu: Option<u32>,
    /// Events discarded (0 for lost packets: how many events they held is not known).
    pub count: u64,
    /// Packets lost (0 for discarded events).
    pub packets: u64,
    /// The interval of the loss (ns), as babeltrace2 reports it: for discarded events, the previous
    /// packet's end to this packet's end; for lost packets, the previous packet's end to this
    /// packet's beginning.
    pub from_ns: i64,
    /// End of the interval.
    pub to_ns: i64,
}

/// A trace of the reader: its directory and metadata.
#[derive(Debug)]
pub struct CtfTrace {
    /// The directory.
    pub dir: PathBuf,
    /// Its metadata.
    pub metadata: Metadata,
    clock: Clock,
}

/// A stream file being read.
pub struct StreamFile {
    /// The file.
    pub path: PathBuf,
    /// Its name, for messages (`channel0_1`).
    pub name: String,
    /// Its trace.
    pub trace: usize,
    file: Box<dyn ReadSeek>,
    /// File offset of the current packet.
    packet_offset: u64,
    packet: Vec<u8>,
    /// Bits of content in the packet, and where the next event starts.
    content_bits: u64,
    pos: u64,
    stream_class: u64,
    cpu: Option<u32>,
    clock: u64,
    next_offset: u64,
    file_len: u64,
    discarded: Option<u64>,
    prev_end: Option<u64>,
    seq: Option<u64>,
    current: Option<CtfEvent>,
    done: bool,
    /// The packet being read is cut short by the end of the file: what to report once its events are
    /// read.
    cut: Option<FormatError>,
    /// Bytes of packets read.
    pub bytes: u64,
    /// Packets read.
    pub packets: u64,
    /// Packets the sequence numbers say are missing.
    pub missing_packets: u64,
    /// When recording ([`repeat`]): the packet context's integers, and the clock integers of the
    /// packet's events decoded so far.
    recorded: Option<Recorded>,
}

/// The integers [`repeat`] rewrites in a packet.
#[derive(Debug, Default)]
struct Recorded {
    context: Vec<IntAt>,
    event_clocks: Vec<IntAt>,
}

/// A stream's bytes: a file, or memory (the fuzzer's inputs).
pub trait ReadSeek: Read + std::io::Seek {}
impl<T: Read + std::io::Seek> ReadSeek for T {}

/// The reader of one or more CTF traces.
pub struct CtfReader {
    traces: Vec<CtfTrace>,
    streams: Vec<StreamFile>,
    pending: Vec<FormatError>,
    losses: Vec<CtfLoss>,
    /// Streams named by an index file but not there.
    pub missing_streams: Vec<String>,
    /// Struct vectors of events already used, for the next events' structs.
    spare: Spare,
}

/// Struct field vectors given back by events already used ([`CtfReader::recycle`]) and the
/// decoder's stack of structs: each event's structs take their vectors from here instead of
/// allocating (an LTTng kernel event is three to four structs).
#[derive(Default)]
struct Spare {
    fields: Vec<Vec<(Rc<str>, Value)>>,
    stack: Vec<Vec<(Rc<str>, Value)>>,
}

/// Most field vectors kept for reuse (an event's worth many times over).
const MAX_SPARE: usize = 256;

/// Gives `v`'s struct vectors (its own and those inside it) back to `spare`, emptied.
fn give_back(v: Value, spare: &mut Vec<Vec<(Rc<str>, Value)>>) {
    match v {
        Value::Struct(mut fields) => {
            // Only the nested containers are taken out; the scalars (most fields) are dropped in
            // place by `clear`, not moved out one by one.
            for (_, x) in &mut fields {
                if matches!(x, Value::Struct(_) | Value::Array(_) | Value::Variant(..)) {
                    give_back(std::mem::replace(x, Value::Uint(0, 10)), spare);
                }
            }
            fields.clear();
            if spare.len() < MAX_SPARE {
                spare.push(fields);
            }
        }
        Value::Array(mut items) => {
            for x in &mut items {
                if matches!(x, Value::Struct(_) | Value::Array(_) | Value::Variant(..)) {
                    give_back(std::mem::replace(x, Value::Uint(0, 10)), spare);
                }
            }
        }
        Value::Variant(_, x) => give_back(*x, spare),
        _ => {}
    }
}

/// The metadata file `bytes` (called `path` in errors), parsed; and the clock its headers map to.
fn parse_metadata(bytes: &[u8], path: &Path) -> Result<(Metadata, Clock), FormatError> {
    let text = tsdl::metadata_text(bytes).map_err(|(at, what)| {
        FormatError::from(BinaryError::new(
            &path.display().to_string(),
            None,
            at,
            what,
        ))
    })?;
    let metadata = tsdl::parse(&text).map_err(|mut e| {
        e.file = path.display().to_string();
        FormatError::from(e)
    })?;
    // The clock the event headers map to (the only one, in practice).
    let clock = metadata.clocks.first().cloned().unwrap_or(Clock {
        name: String::new(),
        freq: 1_000_000_000,
        offset_s: 0,
        offset: 0,
    });
    Ok((metadata, clock))
}

/// The trace directories under `dir` (itself, or the directories below it holding a `metadata`).
pub fn trace_dirs(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    if dir.join("metadata").is_file() {
        out.push(dir.to_path_buf());
        return Ok(out);
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    entries.sort();
    for e in entries {
        out.extend(trace_dirs(&e)?);
    }
    Ok(out)
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> FormatError + '_ {
    move |source| FormatError::Io {
        file: path.display().to_string(),
        source,
    }
}

impl CtfReader {
    /// Opens the CTF trace at `dir`, or every trace below it (an LTTng session: `kernel/`, `ust/...`).
    pub fn open(dir: &Path) -> Result<Self, FormatError> {
        let dirs = trace_dirs(dir).map_err(io_err(dir))?;
        if dirs.is_empty() {
            return Err(BinaryError::new(
                &dir.display().to_string(),
                None,
                0,
                "no CTF trace here: expected a directory with a `metadata` file (or directories of \
                 them)",
            )
            .into());
        }
        let mut r = Self {
            traces: Vec::new(),
            streams: Vec::new(),
            pending: Vec::new(),
            losses: Vec::new(),
            missing_streams: Vec::new(),
            spare: Spare::default(),
        };
        for d in dirs {
            r.add_trace(&d)?;
        }
        Ok(r)
    }

    /// A trace held in memory: its metadata file's bytes and its streams (name, bytes).
    pub fn from_memory(
        metadata: &[u8],
        streams: Vec<(String, Vec<u8>)>,
    ) -> Result<Self, FormatError> {
        let mut r = Self {
            traces: Vec::new(),
            streams: Vec::new(),
            pending: Vec::new(),
            losses: Vec::new(),
            missing_streams: Vec::new(),
            spare: Spare::default(),
        };
        let (metadata, clock) = parse_metadata(metadata, Path::new("metadata"))?;
        for (name, bytes) in streams {
            let len = bytes.len() as u64;
            r.push_stream(
                PathBuf::from(&name),
                0,
                Box::new(std::io::Cursor::new(bytes)),
                len,
            );
        }
        r.traces.push(CtfTrace {
            dir: PathBuf::new(),
            metadata,
            clock,
        });
        Ok(r)
    }

    fn push_stream(&mut self, path: PathBuf, trace: usize, file: Box<dyn ReadSeek>, file_len: u64) {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.streams.push(StreamFile {
            path,
            name,
            trace,
            file,
            packet_offset: 0,
            packet: Vec::new(),
            content_bits: 0,
            pos: 0,
            stream_class: 0,
            cpu: None,
            clock: 0,
            next_offset: 0,
            file_len,
            discarded: None,
            prev_end: None,
            seq: None,
            current: None,
            done: false,
            cut: None,
            bytes: 0,
            packets: 0,
            missing_packets: 0,
            recorded: None,
        });
    }

    fn add_trace(&mut self, dir: &Path) -> Result<(), FormatError> {
        let meta_path = dir.join("metadata");
        let bytes = std::fs::read(&meta_path).map_err(io_err(&meta_path))?;
        let (metadata, clock) = parse_metadata(&bytes, &meta_path)?;
        let trace = self.traces.len();
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(io_err(dir))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.is_file()
                    && p.file_name().is_some_and(|n| {
                        let n = n.to_string_lossy();
                        n != "metadata" && !n.starts_with('.')
                    })
            })
            .collect();
        files.sort();
        // LTTng's index names every stream: one missing is said so.
        if let Ok(idx) = std::fs::read_dir(dir.join("index")) {
            let mut named: Vec<String> = idx
                .filter_map(|e| e.ok())
                .filter_map(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .strip_suffix(".idx")
                        .map(str::to_string)
                })
                .collect();
            named.sort();
            for n in named {
                if !dir.join(&n).is_file() {
                    self.missing_streams
                        .push(dir.join(&n).display().to_string());
                }
            }
        }
        for path in files {
            let f = File::open(&path).map_err(io_err(&path))?;
            let file_len = f.metadata().map_err(io_err(&path))?.len();
            let file = Box::new(BufReader::with_capacity(64 * 1024, f));
            self.push_stream(path, trace, file, file_len);
        }
        self.traces.push(CtfTrace {
            dir: dir.to_path_buf(),
            metadata,
            clock,
        });
        Ok(())
    }

    /// The traces read.
    pub fn traces(&self) -> &[CtfTrace] {
        &self.traces
    }

    /// The stream files read.
    pub fn streams(&self) -> &[StreamFile] {
        &self.streams
    }

    /// Bytes of stream packets read so far.
    pub fn bytes(&self) -> u64 {
        self.streams.iter().map(|s| s.bytes).sum()
    }

    /// The losses met since the last call.
    pub fn take_losses(&mut self) -> Vec<CtfLoss> {
        std::mem::take(&mut self.losses)
    }

    /// Gives back an event the caller is done with: the next events reuse its memory.
    pub fn recycle(&mut self, e: CtfEvent) {
        // One by one: an array of the three would be copied whole (144 bytes) for each event.
        let spare = &mut self.spare.fields;
        if let Some(v) = e.fields {
            give_back(v, spare);
        }
        if let Some(v) = e.context {
            give_back(v, spare);
        }
        if let Some(v) = e.stream_context {
            give_back(v, spare);
        }
    }

    /// The next event in time order (ties: the stream listed first); `Err` for a stream whose data is
    /// damaged (the events before the damage were returned; the other streams go on at the next call).
    pub fn next_event(&mut self) -> Result<Option<CtfEvent>, FormatError> {
        if let Some(e) = self.pending.pop() {
            return Err(e);
        }
        for i in 0..self.streams.len() {
            if self.streams[i].current.is_none()
                && !self.streams[i].done
                && let Err(e) = self.advance(i)
            {
                self.streams[i].done = true;
                self.pending.push(e);
            }
        }
        if let Some(e) = self.pending.pop() {
            return Err(e);
        }
        let best = self
            .streams
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.current.as_ref().map(|e| (e.ns, i)))
            .min();
        Ok(best.and_then(|(_, i)| self.streams[i].current.take()))
    }

    fn advance(&mut self, i: usize) -> Result<(), FormatError> {
        loop {
            let s = &mut self.streams[i];
            if s.pos >= s.content_bits {
                if let Some(e) = s.cut.take() {
                    return Err(e);
                }
                if !self.load_packet(i)? {
                    self.streams[i].done = true;
                    return Ok(());
                }
                continue;
            }
            let trace = &self.traces[s.trace];
            let s = &mut self.streams[i];
            match decode_event(trace, s, i, &mut self.spare) {
                Ok(ev) => {
                    s.current = Some(ev);
                    return Ok(());
                }
                Err(e) => {
                    // The rest of the packet cannot be framed: read on from the next packet (a
                    // packet cut by the end of the file says so instead).
                    s.pos = s.content_bits;
                    match s.cut.take() {
                        Some(cut) => return Err(cut),
                        None => self.pending.push(e),
                    }
                }
            }
        }
    }

    /// Reads stream `i`'s next packet; `false` at the end of the file.
    fn load_packet(&mut self, i: usize) -> Result<bool, FormatError> {
        let s = &mut self.streams[i];
        let trace = &self.traces[s.trace];
        if s.next_offset >= s.file_len {
            return Ok(false);
        }
        let at = s.next_offset;
        let file_name = s.path.display().to_string();
        let place = Some(format!("stream {}", s.name));
        let damaged = |offset: u64, what: String| -> FormatError {
            BinaryError::new(&file_name, place.clone(), offset, what).into()
        };
        // The header and context first (a few hundred bytes at most), then the whole packet.
        let head_len = (s.file_len - at).min(4096) as usize;
        s.packet.clear();
        s.packet.resize(head_len, 0);
        std::io::Seek::seek(&mut s.file, std::io::SeekFrom::Start(at)).map_err(io_err(&s.path))?;
        s.file.read_exact(&mut s.packet).map_err(io_err(&s.path))?;
        let mut d = Decoder::new(&s.packet, head_len as u64 * 8, trace.metadata.big_endian);
        let header = match &trace.metadata.packet_header {
            Some(t) => Some(
                d.value(t, &mut Scopes::default())
                    .map_err(|e| damaged(at + e / 8, "a packet header cut short".into()))?,
            ),
            None => None,
        };
        if let Some(m) = header
            .as_ref()
            .and_then(|h| h.get("magic"))
            .and_then(Value::as_i128)
            && m != i128::from(PACKET_MAGIC)
        {
            return Err(damaged(
                at,
                format!("expected a packet's magic 0xC1FC1FC1, found 0x{m:X}"),
            ));
        }
        let sid = header
            .as_ref()
            .and_then(|h| h.get("stream_id"))
            .and_then(Value::as_i128)
            .unwrap_or(0) as u64;
        let Some(sc) = trace.metadata.streams.get(&sid) else {
            return Err(damaged(
                at,
                format!("a packet of stream class {sid}, which the metadata does not declare"),
            ));
        };
        let mut scopes = Scopes {
            packet_header: header,
            ints: s.recorded.as_ref().map(|_| Vec::new()),
            ..Scopes::default()
        };
        let ctx = match &sc.packet_context {
            Some(t) => Some(
                d.value(t, &mut scopes)
                    .map_err(|e| damaged(at + e / 8, "a packet context cut short".into()))?,
            ),
            None => None,
        };
        if let (Some(r), Some(ints)) = (s.recorded.as_mut(), scopes.ints.take()) {
            r.context = ints;
            r.event_clocks.clear();
        }
        let ctx_int = |n: &str| {
            ctx.as_ref()
                .and_then(|c| c.get(n))
                .and_then(Value::as_i128)
                .map(|v| v as u64)
        };
        let remaining_bits = (s.file_len - at) * 8;
        let packet_bits = ctx_int("packet_size").unwrap_or(remaining_bits);
        let content_bits = ctx_int("content_size").unwrap_or(packet_bits);
        if packet_bits == 0 || content_bits > packet_bits || packet_bits / 8 > MAX_PACKET {
            return Err(damaged(
                at,
                format!(
                    "a packet of content {content_bits} bits and size {packet_bits} bits (content \
                     must fit in the packet, and the packet in {MAX_PACKET} bytes)"
                ),
            ));
        }
        let header_end = d.pos;
        let mut packet_len = packet_bits.div_ceil(8);
        let mut content_bits = content_bits;
        if packet_len > s.file_len - at {
            // Read what is there: the events up to the end of the file are kept, then this is said.
            s.cut = Some(damaged(
                s.file_len,
                format!(
                    "a packet of {packet_len} bytes cut short: the file ends {} bytes into it",
                    s.file_len - at
                ),
            ));
            packet_len = s.file_len - at;
            content_bits = content_bits.min(packet_len * 8);
        }
        s.packet.resize(packet_len as usize, 0);
        if packet_len as usize > head_len {
            s.file
                .read_exact(&mut s.packet[head_len..])
                .map_err(io_err(&s.path))?;
        }
        s.packets += 1;
        s.bytes += packet_len;
        s.packet_offset = at;
        s.next_offset = at + packet_len;
        s.content_bits = content_bits;
        s.pos = header_end;
        s.stream_class = sid;
        s.cpu = ctx_int("cpu_id").map(|c| c as u32);
        if let Some(b) = ctx_int("timestamp_begin") {
            s.clock = b;
        }
        let end = ctx_int("timestamp_end");
        if let Some(seq) = ctx_int("packet_seq_num") {
            if let Some(prev) = s.seq
                && seq > prev.saturating_add(1)
            {
                let lost = seq - prev - 1;
                s.missing_packets += lost;
                let from = s.prev_end.unwrap_or(s.clock);
                let to = ctx_int("timestamp_begin").unwrap_or(from);
                self.losses.push(CtfLoss {
                    stream: i,
                    cpu: s.cpu,
                    count: 0,
                    packets: lost,
                    from_ns: trace.clock.ns(from),
                    to_ns: trace.clock.ns(to),
                });
            }
            s.seq = Some(seq);
        }
        if let Some(total) = ctx_int("events_discarded") {
            let before = s.discarded.unwrap_or(0);
            if total > before {
                let from = s.prev_end.or(ctx_int("timestamp_begin")).unwrap_or(0);
                let to = end.unwrap_or(s.clock);
                self.losses.push(CtfLoss {
                    stream: i,
                    cpu: s.cpu,
                    count: total - before,
                    packets: 0,
                    from_ns: trace.clock.ns(from),
                    to_ns: trace.clock.ns(to),
                });
            }
            s.discarded = Some(total);
        }
        s.prev_end = end;
        Ok(true)
    }
}

/// The scopes decoded before the one being decoded (dynamic scope paths refer to them).
#[derive(Default)]
struct Scopes {
    packet_header: Option<Value>,
    packet_context: Option<Value>,
    event_header: Option<Value>,
    stream_context: Option<Value>,
    event_context: Option<Value>,
    /// Structs being decoded, outermost first, with their fields so far.
    stack: Vec<Vec<(Rc<str>, Value)>>,
    /// Which scope the stack's root is.
    root: &'static str,
    /// Whether clock-mapped integers update the stream's clock (in event headers).
    clock_bits: Option<(u64, u32)>,
    /// Where each integer decoded lies, in decoding order, when asked ([`repeat`] rewrites them).
    ints: Option<Vec<IntAt>>,
    /// Emptied struct vectors to decode into.
    spare: Vec<Vec<(Rc<str>, Value)>>,
}

/// An integer of a packet: its bit position, size, byte order (as decoded), and whether it holds a
/// clock value.
#[derive(Debug, Clone, Copy)]
struct IntAt {
    pos: u64,
    size: u32,
    big: bool,
    clock: bool,
}

impl Scopes {
    /// The value at `path`: relative to the structs being decoded, else absolute (`stream.event.
    /// context.x`), else searched in the scopes decoded before.
    fn lookup(&self, path: &[String]) -> Option<&Value> {
        let (scope, rest): (Option<&str>, &[String]) = match path {
            [a, b, c, rest @ ..] if a == "trace" && b == "packet" && c == "header" => {
                (Some("trace.packet.header"), rest)
            }
            [a, b, c, rest @ ..] if a == "stream" && b == "packet" && c == "context" => {
                (Some("stream.packet.context"), rest)
            }
            [a, b, c, rest @ ..] if a == "stream" && b == "event" && c == "header" => {
                (Some("stream.event.header"), rest)
            }
            [a, b, c, rest @ ..] if a == "stream" && b == "event" && c == "context" => {
                (Some("stream.event.context"), rest)
            }
            [a, b, rest @ ..] if a == "event" && b == "context" => (Some("event.context"), rest),
            [a, b, rest @ ..] if a == "event" && b == "fields" => (Some("event.fields"), rest),
            _ => (None, path),
        };
        let (first, tail) = rest.split_first()?;
        fn find_in<'v>(fields: &'v [(Rc<str>, Value)], first: &str) -> Option<&'v Value> {
            fields
                .iter()
                .rev()
                .find(|(n, _)| &**n == first)
                .map(|(_, v)| v)
        }
        let done = |s: &str| -> Option<&Value> {
            match s {
                "trace.packet.header" => self.packet_header.as_ref(),
                "stream.packet.context" => self.packet_context.as_ref(),
                "stream.event.header" => self.event_header.as_ref(),
                "stream.event.context" => self.stream_context.as_ref(),
                "event.context" => self.event_context.as_ref(),
                _ => None,
            }
        };
        let mut found = None;
        match scope {
            Some(s) if s == self.root => {
                found = self.stack.first().and_then(|f| find_in(f, first));
            }
            Some(s) => {
                found = done(s).and_then(|v| v.get(first));
            }
            None => {
                for fields in self.stack.iter().rev() {
                    if let Some(v) = find_in(fields, first) {
                        found = Some(v);
                        break;
                    }
                }
                if found.is_none() {
                    for s in [
                        "event.context",
                        "stream.event.context",
                        "stream.event.header",
                        "stream.packet.context",
                        "trace.packet.header",
                    ] {
                        if let Some(v) = done(s).and_then(|v| v.get(first)) {
                            found = Some(v);
                            break;
                        }
                    }
                }
            }
        }
        let mut v = found?;
        for p in tail {
            v = v.get(p)?;
        }
        Some(v)
    }
}

/// Bits of a packet, read field by field.
struct Decoder<'a> {
    data: &'a [u8],
    pos: u64,
    end: u64,
    big: bool,
}

/// Decoding stopped at this bit (the data ended).
type Cut = u64;

impl<'a> Decoder<'a> {
    fn new(data: &'a [u8], end: u64, big: bool) -> Self {
        Self {
            data,
            pos: 0,
            end: end.min(data.len() as u64 * 8),
            big,
        }
    }

    fn align(&mut self, bits: u32) {
        let a = u64::from(bits.max(1));
        self.pos = self.pos.div_ceil(a) * a;
    }

    fn is_big(&self, order: ByteOrder) -> bool {
        match order {
            ByteOrder::Native => self.big,
            ByteOrder::Little => false,
            ByteOrder::Big => true,
        }
    }

    #[inline]
    fn bits(&mut self, size: u32, order: ByteOrder) -> Result<u64, Cut> {
        let big = self.is_big(order);
        let size64 = u64::from(size);
        if self.pos + size64 > self.end {
            return Err(self.pos);
        }
        let start = (self.pos / 8) as usize;
        let shift = (self.pos % 8) as u32;
        let v = if shift == 0 && size.is_multiple_of(8) {
            let n = (size / 8) as usize;
            let b = &self.data[start..start + n];
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
            v
        } else {
            let n = (shift + size).div_ceil(8) as usize;
            let b = &self.data[start..start + n];
            let mut w: u128 = 0;
            if big {
                for &x in b {
                    w = (w << 8) | u128::from(x);
                }
                let total = n as u32 * 8;
                w >>= total - shift - size;
            } else {
                for &x in b.iter().rev() {
                    w = (w << 8) | u128::from(x);
                }
                w >>= shift;
            }
            let mask = if size == 64 {
                u128::from(u64::MAX)
            } else {
                (1u128 << size) - 1
            };
            (w & mask) as u64
        };
        self.pos += size64;
        Ok(v)
    }

    #[inline]
    fn int(&mut self, t: &IntType, scopes: &mut Scopes) -> Result<(u64, i64), Cut> {
        self.align(t.align);
        let pos = self.pos;
        let v = self.bits(t.size, t.order)?;
        if let Some(ints) = scopes.ints.as_mut() {
            ints.push(IntAt {
                pos,
                size: t.size,
                big: self.is_big(t.order),
                clock: t.clock.is_some(),
            });
        }
        let s = if t.signed && t.size < 64 {
            let sh = 64 - t.size;
            ((v << sh) as i64) >> sh
        } else {
            v as i64
        };
        if t.clock.is_some()
            && let Some((clock, _)) = scopes.clock_bits.as_mut()
        {
            // A clock value of `size` bits is the low bits of the clock: it wrapped when it went back.
            if t.size >= 64 {
                *clock = v;
            } else {
                let mask = (1u64 << t.size) - 1;
                let mut new = (*clock & !mask) | v;
                if new < *clock {
                    new = new.wrapping_add(1u64 << t.size);
                }
                *clock = new;
            }
        }
        Ok((v, s))
    }

    /// [`Self::value`], with integers (most fields) decoded here: inlined into the struct and array
    /// loops, their values are built where they are stored, not returned through memory by the
    /// recursive call and copied twice (those copies stalled on the stores that had just written
    /// them: a fifth of the decoder's time on an LTTng kernel trace).
    #[inline(always)]
    fn field_value(&mut self, t: &Type, scopes: &mut Scopes) -> Result<Value, Cut> {
        match t {
            Type::Int(i) => {
                let (u, s) = self.int(i, scopes)?;
                Ok(if i.signed {
                    Value::Int(s, i.base)
                } else {
                    Value::Uint(u, i.base)
                })
            }
            _ => self.value(t, scopes),
        }
    }

    fn value(&mut self, t: &Type, scopes: &mut Scopes) -> Result<Value, Cut> {
        Ok(match t {
            Type::Int(i) => {
                let (u, s) = self.int(i, scopes)?;
                if i.signed {
                    Value::Int(s, i.base)
                } else {
                    Value::Uint(u, i.base)
                }
            }
            Type::Float {
                exp,
                mant,
                align,
                order,
            } => {
                self.align(*align);
                let size = exp + mant;
                let v = self.bits(size, *order)?;
                Value::Float(if size == 32 {
                    f64::from(f32::from_bits(v as u32))
                } else {
                    f64::from_bits(v)
                })
            }
            Type::Str => {
                self.align(8);
                let start = (self.pos / 8) as usize;
                let end = (self.end / 8) as usize;
                let rest = self.data.get(start..end).unwrap_or_default();
                let Some(n) = rest.iter().position(|&b| b == 0) else {
                    return Err(self.end);
                };
                self.pos += (n as u64 + 1) * 8;
                Value::Str(String::from_utf8_lossy(&rest[..n]).into_owned())
            }
            Type::Enum(e) => {
                let (u, s) = self.int(&e.int, scopes)?;
                let v = if e.int.signed {
                    i128::from(s)
                } else {
                    i128::from(u)
                };
                let label = e
                    .labels
                    .iter()
                    .find(|(_, lo, hi)| *lo <= v && v <= *hi)
                    .map(|(l, _, _)| l.clone());
                Value::Enum(v, label)
            }
            Type::Struct(fields) => self.structure(fields, scopes)?,
            Type::Variant { tag, options } => {
                let tag = tag.as_ref().ok_or(self.pos)?;
                let label = match scopes.lookup(tag) {
                    Some(Value::Enum(_, Some(l))) => l.clone(),
                    _ => return Err(self.pos),
                };
                let (name, t) = options
                    .fields
                    .iter()
                    .find(|(n, _)| **n == *label)
                    .ok_or(self.pos)?;
                Value::Variant(name.clone(), Box::new(self.value(t, scopes)?))
            }
            Type::Array(t, n) => self.elements(t, *n, scopes)?,
            Type::Sequence(t, path) => {
                let n = scopes
                    .lookup(path)
                    .and_then(Value::as_i128)
                    .ok_or(self.pos)?;
                let n = usize::try_from(n).map_err(|_| self.pos)?;
                self.elements(t, n, scopes)?
            }
        })
    }

    fn elements(&mut self, t: &Type, n: usize, scopes: &mut Scopes) -> Result<Value, Cut> {
        // Text: an array or sequence of 8-bit text integers is a string (up to its first NUL).
        if let Type::Int(i) = t
            && i.text
            && i.size == 8
        {
            self.align(i.align);
            let start = (self.pos / 8) as usize;
            let bytes = self.data.get(start..start + n).ok_or(self.pos)?;
            if self.pos + n as u64 * 8 > self.end {
                return Err(self.pos);
            }
            self.pos += n as u64 * 8;
            let s = bytes.split(|&b| b == 0).next().unwrap_or_default();
            return Ok(Value::Str(String::from_utf8_lossy(s).into_owned()));
        }
        // Each element takes at least a bit: a count past the data is damage, not an allocation.
        if n as u64 > self.end.saturating_sub(self.pos) {
            return Err(self.pos);
        }
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            items.push(self.field_value(t, scopes)?);
        }
        Ok(Value::Array(items))
    }

    fn structure(&mut self, s: &Fields, scopes: &mut Scopes) -> Result<Value, Cut> {
        self.align(s.align);
        let mut fields = scopes.spare.pop().unwrap_or_default();
        fields.reserve(s.fields.len());
        scopes.stack.push(fields);
        for (name, t) in &s.fields {
            let v = match self.field_value(t, scopes) {
                Ok(v) => v,
                Err(e) => {
                    scopes.stack.pop();
                    return Err(e);
                }
            };
            if let Some(top) = scopes.stack.last_mut() {
                top.push((name.clone(), v));
            }
        }
        Ok(Value::Struct(scopes.stack.pop().unwrap_or_default()))
    }

    /// Decodes a scope's root type.
    fn scope(
        &mut self,
        t: &Option<Type>,
        root: &'static str,
        scopes: &mut Scopes,
    ) -> Result<Option<Value>, Cut> {
        let Some(t) = t else { return Ok(None) };
        scopes.root = root;
        scopes.stack.clear();
        self.value(t, scopes).map(Some)
    }
}

/// The last field named `name` in `v`, depth first (the extended id of an LTTng header comes after the
/// compact one).
fn last_named<'v>(v: &'v Value, name: &str) -> Option<&'v Value> {
    match v {
        Value::Struct(fields) => fields
            .iter()
            .rev()
            .find_map(|(n, v)| last_named(v, name).or_else(|| (&**n == name).then_some(v))),
        Value::Variant(_, v) => last_named(v, name),
        _ => None,
    }
}

fn decode_event(
    trace: &CtfTrace,
    s: &mut StreamFile,
    index: usize,
    spare: &mut Spare,
) -> Result<CtfEvent, FormatError> {
    let meta = &trace.metadata;
    let Some(sc) = meta.streams.get(&s.stream_class) else {
        return Err(stream_damage(
            s,
            s.pos,
            "a stream class the metadata does not declare".into(),
        ));
    };
    let mut d = Decoder::new(&s.packet, s.content_bits, meta.big_endian);
    d.pos = s.pos;
    // (An event that fails to decode keeps the vectors it took: the next ones allocate anew.)
    let mut scopes = Scopes {
        clock_bits: Some((s.clock, 64)),
        ints: s.recorded.as_ref().map(|_| Vec::new()),
        stack: std::mem::take(&mut spare.stack),
        spare: std::mem::take(&mut spare.fields),
        ..Scopes::default()
    };
    let start = d.pos;
    let header = d
        .scope(&sc.event_header, "stream.event.header", &mut scopes)
        .map_err(|at| stream_damage(s, at, "an event header cut by the packet's end".into()))?;
    if let Some((c, _)) = scopes.clock_bits {
        s.clock = c;
    }
    scopes.clock_bits = None;
    scopes.event_header = header;
    let id = scopes
        .event_header
        .as_ref()
        .and_then(|h| last_named(h, "id"))
        .and_then(Value::as_i128)
        .map(|v| v as u64);
    let class: &EventClass = match id {
        Some(id) => sc.events.get(&id),
        None if sc.events.len() == 1 => sc.events.values().next(),
        None => None,
    }
    .ok_or_else(|| {
        stream_damage(
            s,
            start,
            format!(
                "an event of id {} that stream class {} does not declare",
                id.map_or("(none)".into(), |i| i.to_string()),
                sc.id
            ),
        )
    })?;
    let cut = |s: &StreamFile, at: u64, name: &str| {
        stream_damage(s, at, format!("a `{name}` event cut by the packet's end"))
    };
    let stream_context = d
        .scope(&sc.event_context, "stream.event.context", &mut scopes)
        .map_err(|at| cut(s, at, &class.name))?;
    scopes.stream_context = stream_context;
    let context = d
        .scope(&class.context, "event.context", &mut scopes)
        .map_err(|at| cut(s, at, &class.name))?;
    scopes.event_context = context;
    let fields = d
        .scope(&class.fields, "event.fields", &mut scopes)
        .map_err(|at| cut(s, at, &class.name))?;
    if d.pos == start {
        return Err(stream_damage(
            s,
            start,
            "an event of no bits (a loop)".into(),
        ));
    }
    s.pos = d.pos;
    if let (Some(r), Some(ints)) = (s.recorded.as_mut(), scopes.ints.take()) {
        r.event_clocks.extend(ints.into_iter().filter(|i| i.clock));
    }
    let cpu = s.cpu.or_else(|| {
        fields
            .as_ref()
            .and_then(|f| f.get("perf_cpu"))
            .and_then(Value::as_i128)
            .map(|c| c as u32)
    });
    // The header served to find the class and the clock: its vectors go back for the next event.
    if let Some(h) = scopes.event_header.take() {
        give_back(h, &mut scopes.spare);
    }
    scopes.stack.clear();
    spare.stack = std::mem::take(&mut scopes.stack);
    spare.fields = std::mem::take(&mut scopes.spare);
    Ok(CtfEvent {
        trace: s.trace,
        stream: index,
        name: class.name.clone(),
        cycles: s.clock,
        ns: trace.clock.ns(s.clock),
        cpu,
        stream_context: scopes.stream_context,
        context: scopes.event_context,
        fields,
    })
}

fn stream_damage(s: &StreamFile, bit: u64, what: String) -> FormatError {
    BinaryError::new(
        &s.path.display().to_string(),
        Some(format!("stream {}", s.name)),
        s.packet_offset + bit / 8,
        what,
    )
    .into()
}
