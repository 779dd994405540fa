//! Frame kinds and the bodies of the control frames.
//!
//! Control-frame bodies (`Hello`, `Dictionary`, `Loss`, `Heartbeat`, `Bye`) are postcard-encoded structs:
//! fields in declaration order, integers as LEB128 varints (signed ones zigzagged), strings as a varint
//! length and UTF-8 bytes, `Option` as a `0`/`1` byte then the value, enums as a varint variant index.
//! `Events` bodies are hand-packed for size and speed (see [`crate::encode::RecordEncoder`]).

use serde::Serialize;

use crate::dict::{EventTypeDef, ProducerDef};

/// The first byte of every frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FrameKind {
    /// Opens a session: versions, board identity, clock rate.
    Hello = 1,
    /// Declares producers and event types.
    Dictionary = 2,
    /// A batch of records of one CPU.
    Events = 3,
    /// Records dropped on the board.
    Loss = 4,
    /// Liveness and clock mapping.
    Heartbeat = 5,
    /// Closes a session.
    Bye = 6,
    /// How many sequence numbers one CPU gave out, sent before `Bye`.
    CpuTotal = 7,
    /// The records of one CPU that follow are the window a post-mortem ring held (kind 8 is the
    /// collector's `Refusal`).
    Window = 9,
    /// An `Events` frame whose check is Fletcher-32 instead of CRC-32C (wire version 3): what an agent
    /// frames on its board at a few instructions per byte. Same body as [`FrameKind::Events`].
    EventsFletcher = 10,
}

impl FrameKind {
    /// The frame kind for a first byte, if it is one.
    pub const fn from_byte(b: u8) -> Option<Self> {
        Some(match b {
            1 => Self::Hello,
            2 => Self::Dictionary,
            3 => Self::Events,
            4 => Self::Loss,
            5 => Self::Heartbeat,
            6 => Self::Bye,
            7 => Self::CpuTotal,
            9 => Self::Window,
            10 => Self::EventsFletcher,
            _ => return None,
        })
    }

    /// The check that ends a frame of this kind.
    pub const fn check(self) -> FrameCheck {
        match self {
            Self::EventsFletcher => FrameCheck::Fletcher32,
            _ => FrameCheck::Crc32c,
        }
    }

    /// The kind's name, as in the spec.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Hello => "Hello",
            Self::Dictionary => "Dictionary",
            Self::Events => "Events",
            Self::Loss => "Loss",
            Self::Heartbeat => "Heartbeat",
            Self::Bye => "Bye",
            Self::CpuTotal => "CpuTotal",
            Self::Window => "Window",
            Self::EventsFletcher => "Events",
        }
    }
}

/// The check at the end of a frame (SPEC.md §4): over its kind byte and body, 4 bytes little-endian.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameCheck {
    /// CRC-32C (Castagnoli): every kind but [`FrameKind::EventsFletcher`].
    Crc32c,
    /// Fletcher-32 ([`crate::check::fletcher32`]): [`FrameKind::EventsFletcher`].
    Fletcher32,
}

impl FrameCheck {
    /// The check of `data` (a frame's kind byte and body).
    pub fn compute(self, data: &[u8]) -> u32 {
        match self {
            Self::Crc32c => crate::FRAME_CRC.checksum(data),
            Self::Fletcher32 => crate::check::fletcher32(data),
        }
    }
}

/// The first frame of a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Hello<'a> {
    /// [`crate::WIRE_VERSION`] of the agent that wrote the stream.
    pub wire_version: u16,
    /// The agent's own version, e.g. `0.1.0`.
    pub agent_version: &'a str,
    /// The board's name; the collector names the trace file after it.
    pub board: &'a str,
    /// The system on chip.
    pub soc: &'a str,
    /// The operating system.
    pub os: &'a str,
    /// The traced application.
    pub application: &'a str,
    /// How many CPUs record events (numbered from 0).
    pub cpu_count: u16,
    /// Timestamp ticks per second.
    pub tick_rate_hz: u64,
    /// A number the board picks per session, so reconnections can be told apart.
    pub session_id: u64,
    /// The board clock, in ticks, when the session started.
    pub start_ticks: u64,
    /// A shared secret the collector may require (`socscope collect --token`); empty for none. Sent in
    /// clear: it keeps unauthorised boards out of a collector, it does not hide the stream (version 2).
    pub token: &'a str,
}

/// One declaration in a `Dictionary` frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum DictEntry<'a> {
    /// A producer (variant index 0).
    Producer(ProducerDef<'a>),
    /// An event type (variant index 1).
    EventType(EventTypeDef<'a>),
}

/// Records the board dropped because its ring for `cpu` was full.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Loss {
    /// The CPU whose records were dropped.
    pub cpu: u16,
    /// The sequence number of the first dropped record.
    pub first_seq: u64,
    /// How many consecutive records were dropped (sequence numbers `first_seq..first_seq + count`).
    pub count: u64,
}

/// Sent when the board has nothing else to send for a while; maps the board clock and proves liveness.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Heartbeat {
    /// The board clock, in ticks.
    pub ticks: u64,
    /// Records accepted into the rings since the session started.
    pub records: u64,
    /// Records dropped since the session started.
    pub dropped: u64,
}

/// One CPU's share of the `Bye` totals, sent just before `Bye` for every CPU: the receiver
/// attributes records lost at the end of a CPU's stream (its last batches) to that CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct CpuTotal {
    /// The CPU.
    pub cpu: u16,
    /// Sequence numbers the CPU gave out during the session (`0..sequences`): its records,
    /// kept or dropped.
    pub sequences: u64,
}

/// Sent by an agent in post-mortem mode when it dumps its rings ([`FrameKind::Window`]), once per CPU
/// before that CPU's records: they are the window the ring held when the dump was asked for, and the
/// sequence numbers before `first_seq` are outside the window (overwritten in the ring, or sent by an
/// earlier dump), not lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Window {
    /// The CPU.
    pub cpu: u16,
    /// The sequence number of the first record of the window (the next one the CPU gives out when its
    /// ring is empty).
    pub first_seq: u64,
    /// Records the ring overwrote (oldest first) since the previous dump, or since the session started.
    pub overwritten: u64,
}

/// The last frame of a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Bye {
    /// The board clock, in ticks.
    pub ticks: u64,
    /// Records accepted into the rings during the session.
    pub records: u64,
    /// Records dropped during the session.
    pub dropped: u64,
}

/// The fixed part of an `Events` frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventsHeader {
    /// Bit 0: the records section is zstd-compressed (TCP only). Other bits are zero.
    pub flags: u8,
    /// The CPU that recorded every record of the batch.
    pub cpu: u16,
    /// The sequence number of the first record; records are numbered per CPU from 0, dropped ones too.
    pub first_seq: u64,
    /// The timestamp, in ticks, the first record's delta is taken from.
    pub base_ticks: u64,
    /// How many records follow.
    pub count: u32,
}

/// [`EventsHeader::flags`] bit: the records section is zstd-compressed.
pub const EVENTS_FLAG_ZSTD: u8 = 0x01;

/// A parameter value handed to the encoder.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ParamValue<'a> {
    /// For [`crate::dict::ParamType::Signed`].
    Signed(i64),
    /// For [`crate::dict::ParamType::Unsigned`].
    Unsigned(u64),
    /// For [`crate::dict::ParamType::Float`].
    Float(f64),
    /// For [`crate::dict::ParamType::String`].
    Str(&'a str),
    /// For [`crate::dict::ParamType::Address`].
    Address(u64),
}

impl ParamValue<'_> {
    /// The parameter type this value encodes as.
    pub const fn param_type(&self) -> crate::dict::ParamType {
        use crate::dict::ParamType;
        match self {
            Self::Signed(_) => ParamType::Signed,
            Self::Unsigned(_) => ParamType::Unsigned,
            Self::Float(_) => ParamType::Float,
            Self::Str(_) => ParamType::String,
            Self::Address(_) => ParamType::Address,
        }
    }
}
