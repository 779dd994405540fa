//! The streaming decoder (feature `decode`): bytes in arbitrary slices in, frames out, with "need more
//! bytes" kept apart from "malformed", resynchronisation at the next `0x00`, and every dropped frame
//! reported with its stream offset and reason.
//!
//! Start here: [`StreamDecoder`] (`feed`, then `next_frame` until it returns `None`, then `finish` at the end
//! of the stream) and [`Frame`].

use std::format;
use std::string::{String, ToString};
use std::vec::Vec;

use nom::IResult;
use nom::Parser;
use nom::error::{ErrorKind, ParseError};

use crate::dict::{Builtin, Category, FIRST_CUSTOM_TYPE, ParamType, ProducerKind};
use crate::frame::{
    Bye, CpuTotal, EVENTS_FLAG_ZSTD, FrameCheck, FrameKind, Heartbeat, Loss, Window,
};
use crate::varint::unzigzag;
use crate::{MAX_FRAME_LEN, MAX_PARAMS, WIRE_VERSION};

/// The most bytes a zstd-compressed records section may expand to.
pub const MAX_DECOMPRESSED_LEN: usize = 16 << 20;

/// Why a frame was dropped.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DropReason {
    /// The bytes between two delimiters are not valid COBS.
    #[error("invalid COBS encoding")]
    Cobs,
    /// Too short to hold a kind byte and a CRC.
    #[error("frame of {len} bytes is shorter than a kind byte and a CRC")]
    TooShort {
        /// Decoded length.
        len: usize,
    },
    /// The frame's check (CRC-32C; Fletcher-32 for kind `0A`) does not match the bytes.
    #[error("check mismatch: the frame carries {carried:#010x}, its bytes give {computed:#010x}")]
    Crc {
        /// The check at the end of the frame.
        carried: u32,
        /// The check of the frame's bytes.
        computed: u32,
    },
    /// The kind byte is not a known frame kind.
    #[error("unknown frame kind {0:#04x}")]
    UnknownKind(u8),
    /// The body does not follow the format of its kind.
    #[error("{kind} frame malformed at byte {at}: expected {expected}")]
    Malformed {
        /// The frame kind.
        kind: &'static str,
        /// Offset of the problem inside the decoded frame.
        at: usize,
        /// What the decoder expected there.
        expected: &'static str,
    },
    /// A record uses an event type that neither the built-in dictionary nor a `Dictionary` frame declared.
    #[error("record {record} uses event type {type_id}, which no dictionary declares")]
    UnknownEventType {
        /// Index of the record in its frame.
        record: usize,
        /// The undeclared type id.
        type_id: u64,
    },
    /// A `Dictionary` frame tries to redefine a built-in event type.
    #[error("event type id {0} is reserved for the built-in dictionary")]
    ReservedType(u16),
    /// Longer than [`MAX_FRAME_LEN`] once decoded, or no delimiter within `max` bytes (the longest encoding
    /// of such a frame); the rest of the frame, up to the next delimiter, is skipped without another report.
    #[error("frame longer than the wire format allows (no delimiter within {max} bytes)")]
    Oversized {
        /// The limit.
        max: usize,
    },
    /// The stream ended inside a frame.
    #[error("the stream ended in the middle of a frame")]
    Truncated,
    /// A compressed records section could not be decompressed.
    #[error("zstd-compressed records could not be decompressed: {0}")]
    Decompress(String),
    /// The session's `Hello` announced a wire version this decoder does not accept.
    #[error("the session speaks unsupported wire version {0}")]
    SessionRejected(u16),
}

/// What the decoder reports instead of a frame.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// Bytes that did not make a valid frame were dropped; decoding goes on at the next delimiter.
    #[error("dropped {len} bytes at stream offset {offset}: {reason}")]
    Dropped {
        /// Stream offset of the first dropped byte.
        offset: u64,
        /// How many bytes were dropped (delimiter excluded).
        len: usize,
        /// Why.
        reason: DropReason,
    },
    /// The board speaks a wire version this decoder does not accept; its frames are dropped until the next
    /// `Hello`.
    #[error("{}", version_advice(*.found, .accepted, .board))]
    UnsupportedVersion {
        /// Stream offset of the `Hello` frame.
        offset: u64,
        /// The version the board announced.
        found: u16,
        /// The versions this decoder accepts.
        accepted: Vec<u16>,
        /// The board's name, from the `Hello`.
        board: String,
    },
}

fn version_advice(found: u16, accepted: &[u16], board: &str) -> String {
    let newest = accepted.iter().copied().max().unwrap_or(WIRE_VERSION);
    if found > newest {
        format!(
            "board '{board}' speaks wire version {found}, but this collector accepts only {accepted:?}: \
             upgrade socscope on the host to a release that reads wire version {found}"
        )
    } else {
        format!(
            "board '{board}' speaks wire version {found}, but this collector accepts only {accepted:?}: \
             upgrade the agent firmware on '{board}' to wire version {newest}"
        )
    }
}

/// The opening frame of a session, owned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HelloInfo {
    /// Wire version the agent writes.
    pub wire_version: u16,
    /// The agent's version.
    pub agent_version: String,
    /// Board name.
    pub board: String,
    /// System on chip.
    pub soc: String,
    /// Operating system.
    pub os: String,
    /// Traced application.
    pub application: String,
    /// Number of CPUs.
    pub cpu_count: u16,
    /// Timestamp ticks per second.
    pub tick_rate_hz: u64,
    /// Session id.
    pub session_id: u64,
    /// Board clock at session start, in ticks.
    pub start_ticks: u64,
    /// The shared secret a collector may require (version 2; empty when the board has none, and for
    /// version 1).
    pub token: String,
}

/// A producer declaration, owned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerInfo {
    /// Board id.
    pub id: u32,
    /// Parent's board id.
    pub parent: Option<u32>,
    /// Kind.
    pub kind: ProducerKind,
    /// pid, tid, IRQ or CPU number.
    pub local_id: u64,
    /// Name.
    pub name: String,
}

/// A parameter declaration, owned: the decoder's copy of [`crate::dict::ParamDef`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnedParamDef {
    /// Name.
    pub name: String,
    /// Encoding.
    pub ty: ParamType,
}

/// An event type declaration, owned: the decoder's copy of [`crate::dict::EventTypeDef`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnedEventTypeDef {
    /// Id used by records.
    pub id: u16,
    /// Name.
    pub name: String,
    /// Category.
    pub category: Category,
    /// Parameters in record order.
    pub params: Vec<OwnedParamDef>,
}

impl OwnedEventTypeDef {
    fn from_builtin(b: Builtin) -> Self {
        let def = b.def();
        Self {
            id: def.id,
            name: def.name.to_string(),
            category: def.category,
            params: def
                .params
                .iter()
                .map(|p| OwnedParamDef {
                    name: p.name.to_string(),
                    ty: p.ty,
                })
                .collect(),
        }
    }
}

/// One entry of a `Dictionary` frame, owned: the decoder's copy of [`crate::frame::DictEntry`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OwnedDictEntry {
    /// A producer.
    Producer(ProducerInfo),
    /// An event type.
    EventType(OwnedEventTypeDef),
}

/// A decoded parameter value (the decoder's form of [`crate::frame::ParamValue`]); strings
/// point into [`EventBatch::text`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DecodedParamValue {
    /// Signed integer.
    Signed(i64),
    /// Unsigned integer.
    Unsigned(u64),
    /// Float.
    Float(f64),
    /// Text, as a byte range of the batch's text.
    Str {
        /// Start in [`EventBatch::text`].
        start: u32,
        /// Length in bytes.
        len: u32,
    },
    /// Absolute address (deltas already resolved).
    Address(u64),
}

/// The fixed part of one decoded record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHead {
    /// Absolute timestamp in ticks.
    pub ticks: u64,
    /// Event type id.
    pub type_id: u16,
    first_value: u32,
    value_count: u8,
}

/// A decoded `Events` frame: one CPU's consecutive records.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EventBatch {
    /// The recording CPU.
    pub cpu: u16,
    /// Sequence number of the first record.
    pub first_seq: u64,
    /// Timestamp base in ticks.
    pub base_ticks: u64,
    /// Whether the frame was zstd-compressed on the wire.
    pub compressed: bool,
    /// The records.
    pub records: Vec<RecordHead>,
    /// All records' parameter values, in order.
    pub values: Vec<DecodedParamValue>,
    /// All records' text values, concatenated.
    pub text: String,
}

impl EventBatch {
    /// Number of records.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether the batch holds no record.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The sequence number the record after this batch will carry.
    pub fn next_seq(&self) -> u64 {
        self.first_seq + self.records.len() as u64
    }

    /// The records, with their sequence numbers and values.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = RecordView<'_>> + '_ {
        self.records
            .iter()
            .enumerate()
            .map(move |(i, head)| RecordView {
                seq: self.first_seq + i as u64,
                head: *head,
                batch: self,
            })
    }
}

/// One record of an [`EventBatch`].
#[derive(Clone, Copy, Debug)]
pub struct RecordView<'a> {
    /// Sequence number (per CPU).
    pub seq: u64,
    head: RecordHead,
    batch: &'a EventBatch,
}

impl<'a> RecordView<'a> {
    /// Absolute timestamp in ticks.
    pub fn ticks(&self) -> u64 {
        self.head.ticks
    }

    /// Event type id.
    pub fn type_id(&self) -> u16 {
        self.head.type_id
    }

    /// The raw values.
    pub fn fields(&self) -> &'a [DecodedParamValue] {
        let start = self.head.first_value as usize;
        &self.batch.values[start..start + self.head.value_count as usize]
    }

    /// Parameter `i` as a wire value, strings resolved.
    pub fn value(&self, i: usize) -> Option<crate::frame::ParamValue<'a>> {
        use crate::frame::ParamValue;
        Some(match *self.fields().get(i)? {
            DecodedParamValue::Signed(v) => ParamValue::Signed(v),
            DecodedParamValue::Unsigned(v) => ParamValue::Unsigned(v),
            DecodedParamValue::Float(v) => ParamValue::Float(v),
            DecodedParamValue::Address(v) => ParamValue::Address(v),
            DecodedParamValue::Str { start, len } => {
                ParamValue::Str(&self.batch.text[start as usize..(start + len) as usize])
            }
        })
    }

    /// Parameter `i` as an unsigned integer (addresses and non-negative signed values too).
    pub fn unsigned(&self, i: usize) -> Option<u64> {
        match *self.fields().get(i)? {
            DecodedParamValue::Unsigned(v) | DecodedParamValue::Address(v) => Some(v),
            DecodedParamValue::Signed(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// Parameter `i` as a signed integer.
    pub fn signed(&self, i: usize) -> Option<i64> {
        match *self.fields().get(i)? {
            DecodedParamValue::Signed(v) => Some(v),
            DecodedParamValue::Unsigned(v) | DecodedParamValue::Address(v) => i64::try_from(v).ok(),
            _ => None,
        }
    }

    /// Parameter `i` as text.
    pub fn text(&self, i: usize) -> Option<&'a str> {
        match self.value(i)? {
            crate::frame::ParamValue::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// A decoded frame.
#[derive(Clone, Debug, PartialEq)]
pub enum Frame {
    /// Session start.
    Hello(HelloInfo),
    /// Declarations (already applied to the decoder's dictionary).
    Dictionary(Vec<OwnedDictEntry>),
    /// A batch of records.
    Events(EventBatch),
    /// Dropped records on the board.
    Loss(Loss),
    /// Liveness.
    Heartbeat(Heartbeat),
    /// Session end.
    Bye(Bye),
    /// One CPU's total of sequence numbers, before `Bye`.
    CpuTotal(CpuTotal),
    /// The start of one CPU's post-mortem window (a dump of the board's rings).
    Window(Window),
}

impl Frame {
    /// The frame's kind.
    pub fn kind(&self) -> FrameKind {
        match self {
            Self::Hello(_) => FrameKind::Hello,
            Self::Dictionary(_) => FrameKind::Dictionary,
            Self::Events(_) => FrameKind::Events,
            Self::Loss(_) => FrameKind::Loss,
            Self::Heartbeat(_) => FrameKind::Heartbeat,
            Self::Bye(_) => FrameKind::Bye,
            Self::CpuTotal(_) => FrameKind::CpuTotal,
            Self::Window(_) => FrameKind::Window,
        }
    }
}

/// A frame with its place in the stream.
#[derive(Clone, Debug, PartialEq)]
pub struct Decoded {
    /// Stream offset of the frame's first byte.
    pub offset: u64,
    /// Encoded length, delimiter included.
    pub len: usize,
    /// The frame.
    pub frame: Frame,
}

/// The event types known to a session: the built-in dictionary plus what `Dictionary` frames declared.
#[derive(Clone, Debug)]
pub struct Dictionary {
    types: Vec<Option<OwnedEventTypeDef>>,
    param_types: Vec<Vec<ParamType>>,
}

impl Default for Dictionary {
    fn default() -> Self {
        let mut d = Self {
            types: Vec::new(),
            param_types: Vec::new(),
        };
        for b in crate::dict::BUILTINS {
            d.insert(OwnedEventTypeDef::from_builtin(b));
        }
        d
    }
}

impl Dictionary {
    /// The type with this id, if declared.
    pub fn get(&self, id: u16) -> Option<&OwnedEventTypeDef> {
        self.types.get(usize::from(id))?.as_ref()
    }

    /// Every declared type, built-ins first.
    pub fn iter(&self) -> impl Iterator<Item = &OwnedEventTypeDef> {
        self.types.iter().flatten()
    }

    fn insert(&mut self, t: OwnedEventTypeDef) {
        let i = usize::from(t.id);
        if self.types.len() <= i {
            self.types.resize(i + 1, None);
            self.param_types.resize(i + 1, Vec::new());
        }
        self.param_types[i] = t.params.iter().map(|p| p.ty).collect();
        self.types[i] = Some(t);
    }

    fn params_of(&self, id: u64) -> Option<&[ParamType]> {
        let i = usize::try_from(id).ok()?;
        self.types.get(i)?.as_ref()?;
        Some(&self.param_types[i])
    }
}

/// Counters of what a decoder has seen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecoderStats {
    /// Bytes fed.
    pub bytes: u64,
    /// Frames decoded.
    pub frames: u64,
    /// Records decoded.
    pub records: u64,
    /// Frames dropped (each one reported).
    pub dropped_frames: u64,
    /// Bytes in dropped frames (delimiters excluded). Includes the tail of an oversized frame that arrived
    /// after its report, so it can exceed the sum of the reported lengths.
    pub dropped_bytes: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SessionVersion {
    Unknown,
    Accepted,
    Rejected(u16),
}

/// Decodes a byte stream into frames. Feed it any slices; pull frames until it answers `None` (it needs more
/// bytes). Corrupt frames come out as [`DecodeError::Dropped`], and decoding goes on after them.
#[derive(Debug)]
pub struct StreamDecoder {
    buf: Vec<u8>,
    pos: usize,
    buf_offset: u64,
    accepted: Vec<u16>,
    dict: Dictionary,
    version: SessionVersion,
    stats: DecoderStats,
    scratch: Vec<u8>,
    /// An oversized frame was reported before its end arrived: its remaining bytes, up to the next
    /// delimiter, are discarded without another report, as if it had arrived whole.
    skipping_oversized: bool,
    /// The most bytes a compressed records section may expand to (see [`StreamDecoder::set_max_decompressed`]).
    max_decompressed: usize,
}

impl Default for StreamDecoder {
    fn default() -> Self {
        Self::new(&[WIRE_VERSION])
    }
}

type BodyResult<'a, T> = IResult<&'a [u8], T, BodyError<'a>>;

/// A nom error that keeps what the decoder expected where it failed.
#[derive(Debug)]
struct BodyError<'a> {
    input: &'a [u8],
    expected: &'static str,
}

impl<'a> ParseError<&'a [u8]> for BodyError<'a> {
    fn from_error_kind(input: &'a [u8], kind: ErrorKind) -> Self {
        let expected = match kind {
            ErrorKind::Eof | ErrorKind::Complete => "more bytes",
            _ => "valid data",
        };
        Self { input, expected }
    }

    fn append(_: &'a [u8], _: ErrorKind, other: Self) -> Self {
        other
    }
}

impl<'a> nom::error::ContextError<&'a [u8]> for BodyError<'a> {
    fn add_context(_input: &'a [u8], ctx: &'static str, other: Self) -> Self {
        // Keep the innermost description: it is the most precise.
        if other.expected == "more bytes" || other.expected == "valid data" {
            Self {
                input: other.input,
                expected: ctx,
            }
        } else {
            other
        }
    }
}

fn fail<'a, T>(input: &'a [u8], expected: &'static str) -> BodyResult<'a, T> {
    Err(nom::Err::Error(BodyError { input, expected }))
}

/// An unsigned LEB128 varint of at most ten bytes that fits in 64 bits.
fn varint(input: &[u8]) -> BodyResult<'_, u64> {
    let mut value = 0u64;
    for (i, &b) in input.iter().enumerate().take(crate::varint::MAX_VARINT_LEN) {
        let bits = u64::from(b & 0x7f);
        if i == 9 && b > 1 {
            return fail(input, "a varint that fits in 64 bits");
        }
        value |= bits << (7 * i);
        if b & 0x80 == 0 {
            return Ok((&input[i + 1..], value));
        }
    }
    if input.len() < crate::varint::MAX_VARINT_LEN {
        fail(input, "the rest of a varint")
    } else {
        fail(input, "a varint of at most ten bytes")
    }
}

fn varint_u16(input: &[u8]) -> BodyResult<'_, u16> {
    let (rest, v) = varint(input)?;
    match u16::try_from(v) {
        Ok(v) => Ok((rest, v)),
        Err(_) => fail(input, "a 16-bit value"),
    }
}

fn varint_u32(input: &[u8]) -> BodyResult<'_, u32> {
    let (rest, v) = varint(input)?;
    match u32::try_from(v) {
        Ok(v) => Ok((rest, v)),
        Err(_) => fail(input, "a 32-bit value"),
    }
}

fn text(input: &[u8]) -> BodyResult<'_, &str> {
    let (rest, len) = varint(input)?;
    let len = match usize::try_from(len) {
        Ok(l) if l <= rest.len() => l,
        _ => return fail(input, "a string length within the frame"),
    };
    match std::str::from_utf8(&rest[..len]) {
        Ok(s) => Ok((&rest[len..], s)),
        Err(_) => fail(rest, "UTF-8 text"),
    }
}

fn owned_text(input: &[u8]) -> BodyResult<'_, String> {
    text(input).map(|(r, s)| (r, s.to_string()))
}

fn byte(input: &[u8]) -> BodyResult<'_, u8> {
    match input.split_first() {
        Some((b, rest)) => Ok((rest, *b)),
        None => fail(input, "one more byte"),
    }
}

fn hello(input: &[u8]) -> BodyResult<'_, HelloInfo> {
    use nom::error::context;
    let (input, wire_version) = context("the wire version", varint_u16).parse(input)?;
    let (input, agent_version) = context("the agent version", owned_text).parse(input)?;
    let (input, board) = context("the board name", owned_text).parse(input)?;
    let (input, soc) = context("the SoC name", owned_text).parse(input)?;
    let (input, os) = context("the OS name", owned_text).parse(input)?;
    let (input, application) = context("the application name", owned_text).parse(input)?;
    let (input, cpu_count) = context("the CPU count", varint_u16).parse(input)?;
    let (input, tick_rate_hz) = context("the tick rate", varint).parse(input)?;
    let (input, session_id) = context("the session id", varint).parse(input)?;
    let (input, start_ticks) = context("the start timestamp", varint).parse(input)?;
    // Version 2 added the token; a board of a version this decoder does not know is refused on its
    // version alone, whatever follows.
    let (input, token) = if (2..=WIRE_VERSION).contains(&wire_version) {
        context("the token", owned_text).parse(input)?
    } else {
        (input, String::new())
    };
    Ok((
        input,
        HelloInfo {
            wire_version,
            agent_version,
            board,
            soc,
            os,
            application,
            cpu_count,
            tick_rate_hz,
            session_id,
            start_ticks,
            token,
        },
    ))
}

fn option_u32(input: &[u8]) -> BodyResult<'_, Option<u32>> {
    let (rest, tag) = byte(input)?;
    match tag {
        0 => Ok((rest, None)),
        1 => varint_u32(rest).map(|(r, v)| (r, Some(v))),
        _ => fail(input, "an option tag 0 or 1"),
    }
}

fn producer(input: &[u8]) -> BodyResult<'_, ProducerInfo> {
    use nom::error::context;
    let (input, id) = context("a producer id", varint_u32).parse(input)?;
    let (input, parent) = context("a parent producer", option_u32).parse(input)?;
    let (rest, kind_tag) = context("a producer kind", varint).parse(input)?;
    let Some(kind) = ProducerKind::from_tag(kind_tag) else {
        return fail(input, "a producer kind 0..=4");
    };
    let (input, local_id) = context("a local id", varint).parse(rest)?;
    let (input, name) = context("a producer name", owned_text).parse(input)?;
    Ok((
        input,
        ProducerInfo {
            id,
            parent,
            kind,
            local_id,
            name,
        },
    ))
}

fn category(input: &[u8]) -> BodyResult<'_, Category> {
    let (rest, tag) = varint(input)?;
    match tag {
        0 => Ok((rest, Category::Punctual)),
        1 => Ok((rest, Category::StateEnter)),
        2 => varint_u16(rest).map(|(r, enter)| (r, Category::StateExit { enter })),
        3 => Ok((rest, Category::Variable)),
        _ => fail(input, "a category 0..=3 (Special is built-in only)"),
    }
}

fn event_type(input: &[u8]) -> BodyResult<'_, OwnedEventTypeDef> {
    use nom::error::context;
    let (input, id) = context("an event type id", varint_u16).parse(input)?;
    let (input, name) = context("an event type name", owned_text).parse(input)?;
    let (input, category) = context("an event category", category).parse(input)?;
    let (mut input, count) = context("a parameter count", varint).parse(input)?;
    if count > MAX_PARAMS as u64 {
        return fail(input, "at most 8 parameters");
    }
    let mut params = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let (rest, name) = context("a parameter name", owned_text).parse(input)?;
        let (rest2, tag) = context("a parameter type", varint).parse(rest)?;
        let Some(ty) = ParamType::from_tag(tag) else {
            return fail(rest, "a parameter type 0..=4");
        };
        params.push(OwnedParamDef { name, ty });
        input = rest2;
    }
    Ok((
        input,
        OwnedEventTypeDef {
            id,
            name,
            category,
            params,
        },
    ))
}

fn dictionary(input: &[u8]) -> BodyResult<'_, Vec<OwnedDictEntry>> {
    let (mut input, count) = nom::error::context("an entry count", varint).parse(input)?;
    // Each entry is at least 5 bytes: refuse counts the frame cannot hold before allocating.
    if count > input.len() as u64 {
        return fail(input, "an entry count that fits the frame");
    }
    let mut items = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let (rest, tag) = varint(input)?;
        let (rest, item) = match tag {
            0 => producer(rest).map(|(r, p)| (r, OwnedDictEntry::Producer(p)))?,
            1 => event_type(rest).map(|(r, t)| (r, OwnedDictEntry::EventType(t)))?,
            _ => return fail(input, "an entry tag 0 (producer) or 1 (event type)"),
        };
        items.push(item);
        input = rest;
    }
    Ok((input, items))
}

fn loss(input: &[u8]) -> BodyResult<'_, Loss> {
    use nom::error::context;
    let (input, cpu) = context("a CPU number", varint_u16).parse(input)?;
    let (input, first_seq) = context("the first lost sequence number", varint).parse(input)?;
    let (input, count) = context("the lost record count", varint).parse(input)?;
    Ok((
        input,
        Loss {
            cpu,
            first_seq,
            count,
        },
    ))
}

fn cpu_total(input: &[u8]) -> BodyResult<'_, CpuTotal> {
    use nom::error::context;
    let (input, cpu) = context("a CPU number", varint_u16).parse(input)?;
    let (input, sequences) = context("a sequence-number total", varint).parse(input)?;
    Ok((input, CpuTotal { cpu, sequences }))
}

fn window(input: &[u8]) -> BodyResult<'_, Window> {
    use nom::error::context;
    let (input, cpu) = context("a CPU number", varint_u16).parse(input)?;
    let (input, first_seq) = context("the window's first sequence number", varint).parse(input)?;
    let (input, overwritten) = context("the overwritten record count", varint).parse(input)?;
    Ok((
        input,
        Window {
            cpu,
            first_seq,
            overwritten,
        },
    ))
}

fn counters(input: &[u8]) -> BodyResult<'_, (u64, u64, u64)> {
    use nom::error::context;
    let (input, ticks) = context("a timestamp", varint).parse(input)?;
    let (input, records) = context("a record count", varint).parse(input)?;
    let (input, dropped) = context("a dropped-record count", varint).parse(input)?;
    Ok((input, (ticks, records, dropped)))
}

/// The header of an `Events` frame cut off by the end of the stream
/// ([`StreamDecoder::truncated_events`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TruncatedEvents {
    /// The CPU.
    pub cpu: u16,
    /// Sequence number of its first record.
    pub first_seq: u64,
    /// Records the frame held.
    pub count: u32,
}

struct EventsPrefix {
    flags: u8,
    cpu: u16,
    first_seq: u64,
    base_ticks: u64,
    count: u32,
}

fn events_prefix(input: &[u8]) -> BodyResult<'_, EventsPrefix> {
    use nom::error::context;
    let (rest, flags) = context("the flags byte", byte).parse(input)?;
    if flags & !EVENTS_FLAG_ZSTD != 0 {
        return fail(input, "flags with only bit 0 (zstd) defined");
    }
    let (rest, cpu) = context("a CPU number", varint_u16).parse(rest)?;
    let (rest, first_seq) = context("the first sequence number", varint).parse(rest)?;
    let (rest, base_ticks) = context("the base timestamp", varint).parse(rest)?;
    let (rest, count) = context("the record count", varint_u32).parse(rest)?;
    Ok((
        rest,
        EventsPrefix {
            flags,
            cpu,
            first_seq,
            base_ticks,
            count,
        },
    ))
}

enum RecordsError<'a> {
    Body(BodyError<'a>),
    UnknownType { record: usize, type_id: u64 },
}

impl<'a> From<nom::Err<BodyError<'a>>> for RecordsError<'a> {
    fn from(e: nom::Err<BodyError<'a>>) -> Self {
        match e {
            nom::Err::Error(e) | nom::Err::Failure(e) => Self::Body(e),
            nom::Err::Incomplete(_) => Self::Body(BodyError {
                input: &[],
                expected: "more bytes",
            }),
        }
    }
}

fn records<'a>(
    mut input: &'a [u8],
    prefix: &EventsPrefix,
    dict: &Dictionary,
) -> Result<EventBatch, RecordsError<'a>> {
    // A record is at least two bytes: refuse counts the frame cannot hold before allocating.
    if prefix.count as usize > input.len() / 2 + 1 {
        return Err(RecordsError::Body(BodyError {
            input,
            expected: "a record count that fits the frame",
        }));
    }
    let mut batch = EventBatch {
        cpu: prefix.cpu,
        first_seq: prefix.first_seq,
        base_ticks: prefix.base_ticks,
        compressed: prefix.flags & EVENTS_FLAG_ZSTD != 0,
        records: Vec::with_capacity(prefix.count as usize),
        values: Vec::with_capacity(prefix.count as usize * 2),
        text: String::new(),
    };
    let mut ticks = prefix.base_ticks;
    let mut address = 0u64;
    for record in 0..prefix.count as usize {
        let (rest, type_id) = varint(input)?;
        let Some(params) = dict.params_of(type_id) else {
            return Err(RecordsError::UnknownType { record, type_id });
        };
        let (rest, delta) = varint(rest)?;
        ticks = match ticks.checked_add(delta) {
            Some(t) => t,
            None => {
                return Err(fail::<()>(input, "a timestamp delta that fits in 64 bits")
                    .unwrap_err()
                    .into());
            }
        };
        let first_value = batch.values.len() as u32;
        input = rest;
        for ty in params {
            let (rest, value) = match ty {
                ParamType::Unsigned => {
                    varint(input).map(|(r, v)| (r, DecodedParamValue::Unsigned(v)))?
                }
                ParamType::Signed => {
                    varint(input).map(|(r, v)| (r, DecodedParamValue::Signed(unzigzag(v))))?
                }
                ParamType::Address => {
                    let (r, v) = varint(input)?;
                    address = address.wrapping_add(unzigzag(v) as u64);
                    (r, DecodedParamValue::Address(address))
                }
                ParamType::Float => match input.split_first_chunk::<8>() {
                    Some((b, r)) => (r, DecodedParamValue::Float(f64::from_le_bytes(*b))),
                    None => {
                        return Err(RecordsError::Body(BodyError {
                            input,
                            expected: "an 8-byte float",
                        }));
                    }
                },
                ParamType::String => {
                    let (r, s) = text(input)?;
                    let start = batch.text.len() as u32;
                    batch.text.push_str(s);
                    (
                        r,
                        DecodedParamValue::Str {
                            start,
                            len: s.len() as u32,
                        },
                    )
                }
            };
            batch.values.push(value);
            input = rest;
        }
        batch.records.push(RecordHead {
            ticks,
            type_id: type_id as u16,
            first_value,
            value_count: params.len() as u8,
        });
    }
    if !input.is_empty() {
        return Err(RecordsError::Body(BodyError {
            input,
            expected: "the end of the frame after the declared record count",
        }));
    }
    Ok(batch)
}

impl StreamDecoder {
    /// A decoder that accepts sessions of the given wire versions.
    pub fn new(accepted_versions: &[u16]) -> Self {
        Self {
            buf: Vec::new(),
            pos: 0,
            buf_offset: 0,
            accepted: accepted_versions.to_vec(),
            dict: Dictionary::default(),
            version: SessionVersion::Unknown,
            stats: DecoderStats::default(),
            scratch: Vec::new(),
            skipping_oversized: false,
            max_decompressed: MAX_DECOMPRESSED_LEN,
        }
    }

    /// Lowers the most bytes a zstd-compressed records section may expand to (at most
    /// [`MAX_DECOMPRESSED_LEN`], the format's own bound): a frame declaring more is dropped
    /// (`Decompress`) before anything is decompressed. A collector facing untrusted links sets it near
    /// what its boards send, so a few bytes of "zstd bomb" cannot make it hold millions of records.
    pub fn set_max_decompressed(&mut self, len: usize) {
        self.max_decompressed = len.min(MAX_DECOMPRESSED_LEN);
    }

    /// The session's dictionary: built-in types plus the declared ones.
    pub fn dictionary(&self) -> &Dictionary {
        &self.dict
    }

    /// What the decoder has seen so far.
    pub fn stats(&self) -> DecoderStats {
        self.stats
    }

    /// The stream offset of the next byte to decode.
    pub fn offset(&self) -> u64 {
        self.buf_offset + self.pos as u64
    }

    /// Bytes fed but not yet decoded (a partial frame).
    pub fn pending(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// When the bytes not yet decoded are the start of an `Events` frame (the stream was cut off
    /// inside it): its CPU, first sequence number and record count, read from its header. Unchecked
    /// (the frame's CRC is in the part that never came): the caller checks it against what it knows.
    /// What a collector counts as lost when the last frame of a stream is cut off.
    pub fn truncated_events(&self) -> Option<TruncatedEvents> {
        if self.skipping_oversized {
            return None;
        }
        // COBS, block by block, for the first bytes only (the header is a few varints).
        let mut raw = Vec::with_capacity(48);
        let mut rest = self.buf.get(self.pos..)?;
        while raw.len() < 48 {
            let (&code, after) = rest.split_first()?;
            if code == 0 {
                return None;
            }
            let n = usize::from(code) - 1;
            let take = n.min(after.len());
            raw.extend_from_slice(&after[..take]);
            if take < n {
                break;
            }
            rest = &after[n..];
            if code != 0xFF && !rest.is_empty() {
                raw.push(0);
            }
        }
        let (&kind, body) = raw.split_first()?;
        // Both `Events` kinds (CRC-32C, and Fletcher-32 since wire v3) share the same header.
        if kind != FrameKind::Events as u8 && kind != FrameKind::EventsFletcher as u8 {
            return None;
        }
        let (_, prefix) = events_prefix(body).ok()?;
        Some(TruncatedEvents {
            cpu: prefix.cpu,
            first_seq: prefix.first_seq,
            count: prefix.count,
        })
    }

    /// Appends bytes from the stream.
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.pos > 0 && self.pos >= self.buf.len() / 2 {
            self.buf.drain(..self.pos);
            self.buf_offset += self.pos as u64;
            self.pos = 0;
        }
        self.buf.extend_from_slice(bytes);
        self.stats.bytes += bytes.len() as u64;
    }

    /// The next frame, a report of dropped bytes, or `None` when more bytes are needed.
    pub fn next_frame(&mut self) -> Option<Result<Decoded, DecodeError>> {
        loop {
            let pending = &self.buf[self.pos..];
            let found: IResult<&[u8], &[u8], ()> =
                nom::bytes::streaming::take_till(|b| b == 0).parse(pending);
            let max = crate::encode::max_encoded_len(MAX_FRAME_LEN);
            let encoded_len = match found {
                Ok((_, frame)) => frame.len(),
                Err(_) if self.skipping_oversized => {
                    self.stats.dropped_bytes += pending.len() as u64;
                    self.pos = self.buf.len();
                    return None;
                }
                Err(_) => {
                    if pending.len() > max {
                        let offset = self.offset();
                        let len = pending.len();
                        self.pos = self.buf.len();
                        self.skipping_oversized = true;
                        return Some(Err(self.dropped(
                            offset,
                            len,
                            DropReason::Oversized { max },
                        )));
                    }
                    return None;
                }
            };
            let offset = self.offset();
            let start = self.pos;
            self.pos += encoded_len + 1;
            if std::mem::take(&mut self.skipping_oversized) {
                self.stats.dropped_bytes += encoded_len as u64;
                continue;
            }
            if encoded_len == 0 {
                // Back-to-back delimiters: idle filler or a resynchronisation point, not a frame.
                continue;
            }
            if encoded_len > max {
                // Refused whether it arrived whole or in slices (see the no-delimiter case above).
                return Some(Err(self.dropped(
                    offset,
                    encoded_len,
                    DropReason::Oversized { max },
                )));
            }
            return Some(self.decode_frame(start, encoded_len, offset));
        }
    }

    /// Ends the stream: reports a partial frame left at the end, if any.
    pub fn finish(&mut self) -> Option<DecodeError> {
        let len = self.pending();
        if std::mem::take(&mut self.skipping_oversized) {
            // The tail of a frame already reported as oversized.
            self.stats.dropped_bytes += len as u64;
            self.pos = self.buf.len();
            return None;
        }
        if len == 0 {
            return None;
        }
        let offset = self.offset();
        self.pos = self.buf.len();
        Some(self.dropped(offset, len, DropReason::Truncated))
    }

    fn dropped(&mut self, offset: u64, len: usize, reason: DropReason) -> DecodeError {
        self.stats.dropped_frames += 1;
        self.stats.dropped_bytes += len as u64;
        DecodeError::Dropped {
            offset,
            len,
            reason,
        }
    }

    fn decode_frame(
        &mut self,
        start: usize,
        encoded_len: usize,
        offset: u64,
    ) -> Result<Decoded, DecodeError> {
        self.scratch.clear();
        self.scratch
            .extend_from_slice(&self.buf[start..start + encoded_len]);
        let decoded_len = match cobs::decode_in_place(&mut self.scratch) {
            Ok(n) => n,
            Err(_) => return Err(self.dropped(offset, encoded_len, DropReason::Cobs)),
        };
        if decoded_len > MAX_FRAME_LEN {
            let max = crate::encode::max_encoded_len(MAX_FRAME_LEN);
            return Err(self.dropped(offset, encoded_len, DropReason::Oversized { max }));
        }
        let scratch = std::mem::take(&mut self.scratch);
        let result = self.parse_frame(&scratch[..decoded_len], offset, encoded_len);
        self.scratch = scratch;
        result
    }

    fn parse_frame(
        &mut self,
        frame: &[u8],
        offset: u64,
        encoded_len: usize,
    ) -> Result<Decoded, DecodeError> {
        let Some((body, crc)) = frame.split_last_chunk::<4>() else {
            return Err(self.dropped(
                offset,
                encoded_len,
                DropReason::TooShort { len: frame.len() },
            ));
        };
        let carried = u32::from_le_bytes(*crc);
        let Some(&kind_byte) = body.first() else {
            return Err(self.dropped(offset, encoded_len, DropReason::TooShort { len: 4 }));
        };
        // The kind byte says which check the frame carries (Fletcher-32 for kind 0A, CRC-32C for every
        // other); a damaged kind byte picks the wrong one, which fails like a damaged body.
        let check = FrameKind::from_byte(kind_byte).map_or(FrameCheck::Crc32c, FrameKind::check);
        let computed = check.compute(body);
        if carried != computed {
            return Err(self.dropped(offset, encoded_len, DropReason::Crc { carried, computed }));
        }
        let body = body.get(1..).unwrap_or_default();
        let Some(kind) = FrameKind::from_byte(kind_byte) else {
            return Err(self.dropped(offset, encoded_len, DropReason::UnknownKind(kind_byte)));
        };
        if let SessionVersion::Rejected(v) = self.version
            && kind != FrameKind::Hello
        {
            return Err(self.dropped(offset, encoded_len, DropReason::SessionRejected(v)));
        }
        let malformed = |e: BodyError<'_>| DropReason::Malformed {
            kind: kind.name(),
            at: 1 + body.len() - e.input.len().min(body.len()),
            expected: e.expected,
        };
        let frame = match kind {
            FrameKind::Hello => match hello(body) {
                Ok((rest, h)) if !rest.is_empty() && self.accepted.contains(&h.wire_version) => {
                    return Err(self.dropped(
                        offset,
                        encoded_len,
                        malformed(BodyError {
                            input: rest,
                            expected: "the end of the frame",
                        }),
                    ));
                }
                Ok((_, h)) => {
                    self.dict = Dictionary::default();
                    if !self.accepted.contains(&h.wire_version) {
                        self.version = SessionVersion::Rejected(h.wire_version);
                        self.stats.dropped_frames += 1;
                        self.stats.dropped_bytes += encoded_len as u64;
                        return Err(DecodeError::UnsupportedVersion {
                            offset,
                            found: h.wire_version,
                            accepted: self.accepted.clone(),
                            board: h.board,
                        });
                    }
                    self.version = SessionVersion::Accepted;
                    Frame::Hello(h)
                }
                Err(nom::Err::Error(e) | nom::Err::Failure(e)) => {
                    return Err(self.dropped(offset, encoded_len, malformed(e)));
                }
                Err(nom::Err::Incomplete(_)) => {
                    return Err(self.dropped(
                        offset,
                        encoded_len,
                        malformed(BodyError {
                            input: &[],
                            expected: "more bytes",
                        }),
                    ));
                }
            },
            FrameKind::Dictionary => match complete(dictionary(body)) {
                Ok(items) => {
                    let reserved = items.iter().find_map(|item| match item {
                        OwnedDictEntry::EventType(t) if t.id < FIRST_CUSTOM_TYPE => Some(t.id),
                        _ => None,
                    });
                    if let Some(id) = reserved {
                        return Err(self.dropped(
                            offset,
                            encoded_len,
                            DropReason::ReservedType(id),
                        ));
                    }
                    for item in &items {
                        if let OwnedDictEntry::EventType(t) = item {
                            self.dict.insert(t.clone());
                        }
                    }
                    Frame::Dictionary(items)
                }
                Err(e) => return Err(self.dropped(offset, encoded_len, malformed(e))),
            },
            FrameKind::Loss => match complete(loss(body)) {
                Ok(l) => Frame::Loss(l),
                Err(e) => return Err(self.dropped(offset, encoded_len, malformed(e))),
            },
            FrameKind::Heartbeat => match complete(counters(body)) {
                Ok((ticks, records, dropped)) => Frame::Heartbeat(Heartbeat {
                    ticks,
                    records,
                    dropped,
                }),
                Err(e) => return Err(self.dropped(offset, encoded_len, malformed(e))),
            },
            FrameKind::CpuTotal => match complete(cpu_total(body)) {
                Ok(t) => Frame::CpuTotal(t),
                Err(e) => return Err(self.dropped(offset, encoded_len, malformed(e))),
            },
            FrameKind::Window => match complete(window(body)) {
                Ok(w) => Frame::Window(w),
                Err(e) => return Err(self.dropped(offset, encoded_len, malformed(e))),
            },
            FrameKind::Bye => match complete(counters(body)) {
                Ok((ticks, records, dropped)) => Frame::Bye(Bye {
                    ticks,
                    records,
                    dropped,
                }),
                Err(e) => return Err(self.dropped(offset, encoded_len, malformed(e))),
            },
            FrameKind::Events | FrameKind::EventsFletcher => {
                let (rest, prefix) = match events_prefix(body) {
                    Ok(v) => v,
                    Err(nom::Err::Error(e) | nom::Err::Failure(e)) => {
                        return Err(self.dropped(offset, encoded_len, malformed(e)));
                    }
                    Err(nom::Err::Incomplete(_)) => {
                        return Err(self.dropped(
                            offset,
                            encoded_len,
                            DropReason::Malformed {
                                kind: kind.name(),
                                at: 1,
                                expected: "a complete header",
                            },
                        ));
                    }
                };
                let decompressed;
                let section: &[u8] = if prefix.flags & EVENTS_FLAG_ZSTD != 0 {
                    match decompress(rest, self.max_decompressed) {
                        Ok(d) => {
                            decompressed = d;
                            &decompressed
                        }
                        Err(reason) => return Err(self.dropped(offset, encoded_len, reason)),
                    }
                } else {
                    rest
                };
                match records(section, &prefix, &self.dict) {
                    Ok(batch) => {
                        self.stats.records += batch.len() as u64;
                        Frame::Events(batch)
                    }
                    Err(RecordsError::UnknownType { record, type_id }) => {
                        return Err(self.dropped(
                            offset,
                            encoded_len,
                            DropReason::UnknownEventType { record, type_id },
                        ));
                    }
                    Err(RecordsError::Body(e)) => {
                        let at = if std::ptr::eq(section, rest) {
                            1 + body.len() - e.input.len().min(body.len())
                        } else {
                            // Inside the decompressed section: report its offset there.
                            section.len() - e.input.len().min(section.len())
                        };
                        return Err(self.dropped(
                            offset,
                            encoded_len,
                            DropReason::Malformed {
                                kind: kind.name(),
                                at,
                                expected: e.expected,
                            },
                        ));
                    }
                }
            }
        };
        self.stats.frames += 1;
        Ok(Decoded {
            offset,
            len: encoded_len + 1,
            frame,
        })
    }
}

fn complete<T>(r: BodyResult<'_, T>) -> Result<T, BodyError<'_>> {
    match r {
        Ok(([], v)) => Ok(v),
        Ok((rest, _)) => Err(BodyError {
            input: rest,
            expected: "the end of the frame",
        }),
        Err(nom::Err::Error(e) | nom::Err::Failure(e)) => Err(e),
        Err(nom::Err::Incomplete(_)) => Err(BodyError {
            input: &[],
            expected: "more bytes",
        }),
    }
}

fn decompress(section: &[u8], max: usize) -> Result<Vec<u8>, DropReason> {
    let (data, raw_len) = varint(section).map_err(|_| DropReason::Malformed {
        kind: "Events",
        at: 0,
        expected: "the decompressed length of the records",
    })?;
    let raw_len =
        usize::try_from(raw_len)
            .ok()
            .filter(|&l| l <= max)
            .ok_or(DropReason::Decompress(format!(
                "declared length {raw_len} exceeds {max}"
            )))?;
    let out =
        zstd::bulk::decompress(data, raw_len).map_err(|e| DropReason::Decompress(e.to_string()))?;
    if out.len() != raw_len {
        return Err(DropReason::Decompress(format!(
            "declared {raw_len} bytes, got {}",
            out.len()
        )));
    }
    Ok(out)
}
