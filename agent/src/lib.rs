//! The on-board recorder: it encodes KPTrace-like records into per-CPU rings of wire blocks without
//! allocating, blocking or panicking, counts exactly what it has to drop (or, in post-mortem mode,
//! overwrite), and streams frames through any transport.
//!
//! Start here: [`Agent`] (record with its typed methods or [`Agent::record`], then call [`Agent::poll`] from
//! an idle loop or the lowest-priority interrupt, or [`Agent::dump`] in post-mortem mode), the [`Clock`]
//! and [`Transport`] traits a port implements, and [`Config`].
//!
//! Recording and draining take `&self`, so one agent in a `static` serves every context of a board: a
//! record masks interrupts (a `critical-section` of the platform) for that record only; a drain masks them
//! only to claim a finished block and to give it back, and frames it (header, CRC, COBS, in place in the
//! block; `Events` frames checked with Fletcher-32, wire version 3) with interrupts enabled. The platform provides the critical section (`cortex-m`'s
//! `critical-section-single-core`, an RTOS's, or the firmware's own); hosted builds use a global mutex.
#![no_std]

use core::cell::UnsafeCell;

use heapless::Vec;

pub mod probe;

use probe::{PROBE_STATE_FINISHED, PROBE_STATE_RECORDING, PROBE_VERSION, ProbeControl, ProbeRing};
use socscope_wire::dict::{BUILTINS, Builtin, EventTypeDef, FIRST_CUSTOM_TYPE, ProducerDef};
use socscope_wire::encode::{self, CRC_LEN, EVENTS_HEADER_MAX};
use socscope_wire::frame::{
    Bye, CpuTotal, DictEntry, EVENTS_FLAG_ZSTD, EventsHeader, FrameCheck, FrameKind, Heartbeat,
    Hello, Loss, ParamValue, Window,
};
use socscope_wire::{MAX_NAME_LEN, MAX_PARAMS, WIRE_VERSION};

/// The agent's version, sent in `Hello`.
pub const AGENT_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The longest `Events` header (kind byte, flags, CPU, sequence, base, count) plus the CRC.
pub const EVENTS_OVERHEAD: usize = EVENTS_HEADER_MAX + CRC_LEN;

/// A control-frame buffer that holds any frame a `block`-byte agent sends: more than needed (`Events`
/// frames are built in their ring block; the buffer holds `Hello`, dictionary entries, `Loss`,
/// `Heartbeat`, `Window`, `CpuTotal` and `Bye`), kept for the callers sized with it.
pub const fn frame_buffer_len(block: usize) -> usize {
    encode::max_encoded_len(block + EVENTS_OVERHEAD + 16)
}

/// The bytes at the head of every ring block kept for the `Events` header (and COBS's first code byte),
/// so the block is framed where it lies.
const HEAD: usize = EVENTS_HEADER_MAX + 1;

/// The bytes at the end of a `block`-byte ring block kept for the CRC, COBS's inserted code bytes (one
/// per 254) and the delimiter.
const fn tail(block: usize) -> usize {
    CRC_LEN + block / 254 + 2
}

/// The board's time source. The agent calls it only inside its critical section (on a single-core board:
/// with interrupts masked), so a clock that extends a hardware counter needs no lock of its own.
pub trait Clock {
    /// The current time in ticks of the rate given in [`Config::tick_rate_hz`]; should not go backwards.
    fn now(&mut self) -> u64;
}

/// Where frames go: a UART, a TCP socket, a file.
pub trait Transport {
    /// Sends one complete encoded frame (delimiter included), all of it or nothing.
    fn write_frame(&mut self, frame: &[u8]) -> Result<(), TransportError>;

    /// Compresses an `Events` records section for links where it pays (TCP). Returns the section to send
    /// (the varint length of `records` followed by their zstd compression), or `None` to send them as they
    /// are. The default never compresses.
    fn compress(&mut self, records: &[u8]) -> Option<&[u8]> {
        let _ = records;
        None
    }

    /// What the collector sent back on the link (it sends one frame, a `Refusal`, just before it
    /// closes a link whose session it will not store: wrong token, full disk…), read into `buf`
    /// without waiting long; returns the bytes read. A link that cannot be read (a UART the board only
    /// writes) keeps the default: nothing. Pass what it read to [`read_refusal`].
    fn read_back(&mut self, buf: &mut [u8]) -> usize {
        let _ = buf;
        0
    }
}

pub use socscope_wire::refusal::{Refusal, RefusalError, RefusalReason, decode_refusal};

/// Why the collector refused this board's session, if it said so before closing the link: reads the
/// link back ([`Transport::read_back`]) into `buf` and decodes the `Refusal` frame there (in place).
/// `None`: nothing came back, or it was not a whole, intact `Refusal`.
pub fn read_refusal<'b, T: Transport>(transport: &mut T, buf: &'b mut [u8]) -> Option<Refusal<'b>> {
    let n = transport.read_back(buf);
    let got = buf.get_mut(..n)?;
    decode_refusal(got).ok()
}

/// Why a transport could not take a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransportError {
    /// Not now: try again later. The frame stays queued. Also returned when another context is
    /// draining the same agent at that moment.
    WouldBlock,
    /// The link is gone.
    Closed,
}

/// Why a registration or record was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AgentError {
    /// No room left for another producer or event type.
    DictionaryFull,
    /// A name is longer than [`MAX_NAME_LEN`].
    NameTooLong,
    /// An event type declares more than [`MAX_PARAMS`] parameters.
    TooManyParams,
    /// Custom event types must use ids from [`FIRST_CUSTOM_TYPE`] on.
    ReservedTypeId,
    /// The event type id is declared twice.
    DuplicateType,
    /// The record's event type is not declared.
    UnknownType,
    /// The record's values do not match its type's parameters.
    ParamMismatch,
    /// The CPU number is not below [`Config::cpu_count`].
    BadCpu,
    /// The record is larger than a whole block.
    RecordTooLarge,
    /// The declaration's `Dictionary` frame does not fit the agent's control-frame buffer (`OUT`).
    DeclarationTooLarge,
}

/// What happened to one record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recorded {
    /// In a ring, waiting to be sent.
    Stored,
    /// Dropped because the CPU's ring is full (or, in post-mortem mode, its oldest block is being sent);
    /// counted and reported in a `Loss` frame.
    Dropped,
}

/// What the agent does when a CPU's ring is full.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Streaming: [`Agent::poll`] sends the rings as they fill; a record that finds its ring full is
    /// dropped and counted (a `Loss` frame says which).
    #[default]
    Stream,
    /// Post-mortem, for boards with no link or one too slow for the rate: nothing is sent until
    /// [`Agent::dump`]; a record that finds its ring full overwrites the ring's oldest block, and the
    /// records overwritten are counted. The dump sends what the rings hold as a session of its own
    /// whose records start with a `Window` frame per CPU.
    PostMortem,
}

/// The identity and timing of a board.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Board name.
    pub board: &'static str,
    /// System on chip.
    pub soc: &'static str,
    /// Operating system.
    pub os: &'static str,
    /// Traced application.
    pub application: &'static str,
    /// CPUs that record (at most the agent's `CPUS`).
    pub cpu_count: u16,
    /// Clock ticks per second.
    pub tick_rate_hz: u64,
    /// A number that tells this session from earlier ones (a boot counter, a random value).
    pub session_id: u64,
    /// A partly filled block is sent once its first record is this old, in ticks.
    pub flush_latency_ticks: u64,
    /// A `Heartbeat` is sent after this many ticks without any other frame.
    pub heartbeat_ticks: u64,
    /// `Hello` and the whole dictionary are sent again after this many ticks (0: only at the start and
    /// after [`Agent::restart_session`]), so that a collector that missed or could not read them (a
    /// flipped bit, a serial port opened late) resynchronises: wire version 2.
    pub hello_every_ticks: u64,
    /// The shared secret the collector requires (`socscope collect --token`), sent in `Hello`; empty
    /// for none.
    pub token: &'static str,
}

/// Where an agent keeps its [`Config`]: a copy inside the agent (`Config` itself, what
/// [`Agent::new`] makes), a reference to one in flash ([`StaticConfig`], [`Agent::new_static`]), or
/// a reference to one in flash with the session's numbers in a probe's control block
/// ([`ProbeConfig`], [`Agent::new_probe`]).
pub trait ConfigStore {
    /// What the agent keeps of the session's start: its ticks (`u64`), or nothing (`()`) when the
    /// store has them.
    type Start: Copy;
    /// The configuration.
    fn get(&self) -> &Config;
    /// CPUs that record (kept beside the reference: the record path checks it at every record).
    fn cpu_count(&self) -> u16;
    /// This session's id.
    fn session_id(&self) -> u64;
    /// What the agent keeps of the session's start, the clock reading `now` when it is created.
    fn keep_start(now: u64) -> Self::Start;
    /// The session's start in ticks, from what the agent kept.
    fn start_ticks(&self, kept: Self::Start) -> u64;
    /// Whether the session's id and start are already in the probe control block at `control`
    /// (where a [`ProbeConfig`] keeps them): [`Agent::attach_probe`] then leaves them as they are.
    fn session_in(&self, control: *const ()) -> bool {
        let _ = control;
        false
    }
}

impl ConfigStore for Config {
    type Start = u64;
    #[inline]
    fn get(&self) -> &Config {
        self
    }
    #[inline]
    fn cpu_count(&self) -> u16 {
        self.cpu_count
    }
    #[inline]
    fn session_id(&self) -> u64 {
        self.session_id
    }
    fn keep_start(now: u64) -> u64 {
        now
    }
    fn start_ticks(&self, kept: u64) -> u64 {
        kept
    }
}

/// A configuration in flash, referenced by the agent ([`Agent::new_static`]), with the two numbers the
/// agent reads apart from it: the CPU count (read at every record, here one load away) and the session
/// id (which changes from boot to boot, so it cannot be in flash).
#[derive(Clone, Copy, Debug)]
pub struct StaticConfig {
    config: &'static Config,
    cpu_count: u16,
    session_id: u64,
}

impl ConfigStore for StaticConfig {
    type Start = u64;
    fn keep_start(now: u64) -> u64 {
        now
    }
    fn start_ticks(&self, kept: u64) -> u64 {
        kept
    }
    #[inline]
    fn get(&self) -> &Config {
        self.config
    }
    #[inline]
    fn cpu_count(&self) -> u16 {
        self.cpu_count
    }
    #[inline]
    fn session_id(&self) -> u64 {
        self.session_id
    }
}

/// A configuration in flash for a probe-only agent ([`Agent::new_probe`]): the session's id and start
/// are in the probe's control block, written there when the agent is created, and read back from it
/// (so the agent keeps 16 bytes less than with a [`StaticConfig`]).
#[derive(Clone, Copy)]
pub struct ProbeConfig<const CPUS: usize> {
    config: &'static Config,
    control: &'static ProbeControl<CPUS>,
    cpu_count: u16,
}

impl<const CPUS: usize> ConfigStore for ProbeConfig<CPUS> {
    type Start = ();
    #[inline]
    fn get(&self) -> &Config {
        self.config
    }
    #[inline]
    fn cpu_count(&self) -> u16 {
        self.cpu_count
    }
    fn session_id(&self) -> u64 {
        self.control.session_id.get()
    }
    fn keep_start(_: u64) {}
    fn start_ticks(&self, (): ()) -> u64 {
        self.control.start_ticks.get()
    }
    fn session_in(&self, control: *const ()) -> bool {
        core::ptr::eq(
            (self.control as *const ProbeControl<CPUS>).cast::<()>(),
            control,
        )
    }
}

/// Counters since the session started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AgentStats {
    /// Records accepted into the rings (overwritten ones included).
    pub records: u64,
    /// Records dropped because a ring was full (all reported in `Loss` frames).
    pub dropped: u64,
    /// Records refused as invalid (unknown type, wrong values, bad CPU, too large); not numbered.
    pub rejected: u64,
    /// Records whose timestamp was earlier than the previous one on their CPU (sent with a zero delta).
    pub clock_regressions: u64,
    /// Frames written to the transport.
    pub frames: u64,
    /// Bytes written to the transport.
    pub bytes: u64,
    /// Records overwritten in post-mortem mode before any dump could send them (part of `records`).
    pub overwritten: u64,
}

/// Where a closed block's numbers are kept until it is framed: in the bytes reserved for its header (its
/// base time from when it opens, the others from when it closes).
mod block_meta {
    pub const FIRST_SEQ: usize = 0;
    pub const BASE_TICKS: usize = 8;
    pub const COUNT: usize = 16;
    pub const END: usize = 20;
}

/// A closed block's numbers, read back from its head.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct BlockMeta {
    first_seq: u64,
    base_ticks: u64,
    count: u32,
    /// Where its records end (they start at [`HEAD`]).
    end: u32,
}

impl BlockMeta {
    fn write(&self, block: &mut [u8]) {
        put(block, block_meta::FIRST_SEQ, self.first_seq.to_le_bytes());
        put(block, block_meta::BASE_TICKS, self.base_ticks.to_le_bytes());
        put(block, block_meta::COUNT, self.count.to_le_bytes());
        put(block, block_meta::END, self.end.to_le_bytes());
    }

    fn read(block: &[u8]) -> Self {
        Self {
            first_seq: u64::from_le_bytes(get(block, block_meta::FIRST_SEQ)),
            base_ticks: u64::from_le_bytes(get(block, block_meta::BASE_TICKS)),
            count: u32::from_le_bytes(get(block, block_meta::COUNT)),
            end: u32::from_le_bytes(get(block, block_meta::END)),
        }
    }
}

fn put<const N: usize>(block: &mut [u8], at: usize, bytes: [u8; N]) {
    // A fixed-size copy: plain stores, no `memcpy` call (this runs with interrupts masked).
    if let Some(dst) = block
        .get_mut(at..at + N)
        .and_then(|s| <&mut [u8; N]>::try_from(s).ok())
    {
        *dst = bytes;
    }
}

fn get<const N: usize>(block: &[u8], at: usize) -> [u8; N] {
    block
        .get(at..at + N)
        .and_then(|s| s.try_into().ok())
        .unwrap_or([0; N])
}

/// One CPU's ring, as the record path and the drain's claims see it (always under the critical section).
///
/// Blocks `oldest .. oldest + closed` (modulo `BLOCKS`) are closed and wait to be sent, the oldest first;
/// the block after them is the open one when `limit` is not zero. Sequence numbers: the open block's
/// records are `next_seq .. next_seq + count` (`next_seq` moves when the block closes); with no block
/// open, `next_seq` is the next one given out. The open block's base time is in its head
/// ([`block_meta::BASE_TICKS`], written when it opens), not here: the state holds only what the record
/// path and the block switch need (RAM). The record path's fields come first.
#[derive(Clone, Copy, Debug)]
struct RingState {
    /// Where the next record goes: a byte offset from the ring's first block (the open block's
    /// `slot * BLOCK + HEAD + ` its records' bytes).
    wr: u32,
    /// The offset where the open block's records must end (its `slot * BLOCK + CAPACITY_END`), 0 when no
    /// block is open: a record fits when `wr + its longest encoding <= limit`, one comparison for "a
    /// block is open and has room". Zero here keeps the initial state all zeros, so an agent in a
    /// `static` needs no initial image in flash.
    limit: u32,
    count: u32,
    last_ticks: u64,
    last_address: u64,
    next_seq: u64,
    oldest: usize,
    closed: usize,
    /// The drain is sending the oldest closed block: it is not overwritten.
    in_flight: bool,
    /// A dump is sending this ring's window: no block is overwritten until it is out.
    dumping: bool,
    dropped: u64,
    /// Overwritten since the start (those since the last dump: this less the total the drain noted
    /// when it ended, [`DumpState::overwritten`]; 8 bytes of RAM per CPU less than keeping both).
    overwritten_total: u64,
}

impl RingState {
    const EMPTY: Self = Self {
        wr: 0,
        limit: 0,
        count: 0,
        last_ticks: 0,
        last_address: 0,
        next_seq: 0,
        oldest: 0,
        closed: 0,
        in_flight: false,
        dumping: false,
        dropped: 0,
        overwritten_total: 0,
    };

    /// Whether a block is open.
    fn open(&self) -> bool {
        self.limit != 0
    }

    /// Records of the blocks closed so far: every sequence number given out when a block closed or a
    /// record was dropped (not kept: 8 bytes of RAM per CPU).
    fn closed_records(&self) -> u64 {
        self.next_seq - self.dropped
    }

    /// The sequence number the next record gets.
    fn next(&self) -> u64 {
        if self.open() {
            self.next_seq + u64::from(self.count)
        } else {
            self.next_seq
        }
    }
}

/// The ring blocks of one CPU and its state. The state first (`repr(C)`): its fields are then a few
/// bytes from the agent's start, in reach of Thumb-2's short offsets (`ldrd`'s 1 020 bytes) whatever
/// the blocks' size.
#[repr(C)]
struct Ring<const BLOCK: usize, const BLOCKS: usize> {
    state: UnsafeCell<RingState>,
    blocks: [UnsafeCell<[u8; BLOCK]>; BLOCKS],
}

impl<const BLOCK: usize, const BLOCKS: usize> Ring<BLOCK, BLOCKS> {
    const fn new() -> Self {
        Self {
            blocks: [const { UnsafeCell::new([0; BLOCK]) }; BLOCKS],
            state: UnsafeCell::new(RingState::EMPTY),
        }
    }
}

/// What a record writes after its type: a writer over the open block's free bytes.
///
/// The record path checks, before it hands a cursor out, that the block has room for the record's
/// longest encoding; every writer below stays within it.
struct Cursor {
    at: *mut u8,
    #[cfg(debug_assertions)]
    left: usize,
}

impl Cursor {
    #[inline(always)]
    fn byte(&mut self, b: u8) {
        #[cfg(debug_assertions)]
        {
            assert!(self.left > 0, "a record wrote past its bound");
            self.left -= 1;
        }
        // SAFETY: the record path reserved the record's longest encoding from here in the open block,
        // and the record's writers stay within it (checked in debug builds above).
        unsafe {
            self.at.write(b);
            self.at = self.at.add(1);
        }
    }

    /// A varint of up to 32 bits: one or two bytes inline (timestamp deltas, ids, small numbers),
    /// longer ones out of line.
    #[inline(always)]
    fn u32(&mut self, v: u32) {
        if v < 0x80 {
            self.byte(v as u8);
        } else if v < 0x4000 {
            self.byte(v as u8 | 0x80);
            self.byte((v >> 7) as u8);
        } else {
            self.reserve(5);
            // SAFETY: as in `byte`: the record reserved the varint's longest encoding from here.
            self.at = unsafe { varint_u32_long(self.at, v) };
        }
    }

    /// A varint of up to 64 bits; the high half's test is the only cost when it is zero.
    #[inline(always)]
    fn u64(&mut self, v: u64) {
        if v >> 32 == 0 {
            self.u32(v as u32);
        } else {
            self.reserve(V64);
            // SAFETY: as in `u32`.
            self.at = unsafe { varint_u64_wide(self.at, v) };
        }
    }

    /// Checks, in debug builds, that `n` more bytes stay within the record's bound (counting what is
    /// left as if all were written; a varint may write fewer).
    #[inline(always)]
    fn reserve(&mut self, n: usize) {
        #[cfg(debug_assertions)]
        {
            assert!(self.left >= n, "a record wrote past its bound");
            self.left -= n;
        }
        let _ = n;
    }

    /// Copies `s`, four bytes at a time (a marker's text is copied with interrupts masked).
    #[inline(always)]
    fn bytes(&mut self, s: &[u8]) {
        #[cfg(debug_assertions)]
        {
            assert!(self.left >= s.len(), "a record wrote past its bound");
            self.left -= s.len();
        }
        let mut words = s.chunks_exact(4);
        for w in &mut words {
            // SAFETY: as in `byte`: the record reserved `s.len()` bytes from here.
            unsafe {
                self.at
                    .cast::<[u8; 4]>()
                    .write_unaligned(<[u8; 4]>::try_from(w).unwrap_or_default());
                self.at = self.at.add(4);
            }
        }
        for &b in words.remainder() {
            // SAFETY: as above.
            unsafe {
                self.at.write(b);
                self.at = self.at.add(1);
            }
        }
    }
}

/// Writes a varint of 2^14 or more (three to five bytes, no loop) at `at`; returns the byte after it.
///
/// # Safety
/// Five bytes from `at` are writable.
#[inline(never)]
unsafe fn varint_u32_long(at: *mut u8, v: u32) -> *mut u8 {
    // SAFETY: per the contract, five bytes from `at` are writable; at most five are written.
    unsafe {
        at.write(v as u8 | 0x80);
        at.add(1).write((v >> 7) as u8 | 0x80);
        let w = v >> 14;
        if w < 0x80 {
            at.add(2).write(w as u8);
            return at.add(3);
        }
        at.add(2).write(w as u8 | 0x80);
        let w = v >> 21;
        if w < 0x80 {
            at.add(3).write(w as u8);
            return at.add(4);
        }
        at.add(3).write(w as u8 | 0x80);
        at.add(4).write((v >> 28) as u8);
        at.add(5)
    }
}

/// Writes a varint of 2^32 or more at `at`; returns the byte after it.
///
/// # Safety
/// Ten bytes from `at` are writable.
#[inline(never)]
unsafe fn varint_u64_wide(mut at: *mut u8, mut v: u64) -> *mut u8 {
    // SAFETY: per the contract; a u64 varint is at most ten bytes.
    unsafe {
        while v >= 0x80 {
            at.write(v as u8 | 0x80);
            at = at.add(1);
            v >>= 7;
        }
        at.write(v as u8);
        at.add(1)
    }
}

/// Writes the zigzag of an address delta outside 32 bits signed (a rare case: out of line and cold,
/// so that the record path's registers are chosen for the usual one); returns the byte after it.
///
/// # Safety
/// Ten bytes from `at` are writable.
#[cold]
#[inline(never)]
unsafe fn address_wide(at: *mut u8, d: u64) -> *mut u8 {
    // SAFETY: per the contract.
    unsafe { varint_u64_wide(at, socscope_wire::varint::zigzag(d as i64)) }
}

/// The longest varint of a `u32`, a `u64`.
const V32: usize = 5;
const V64: usize = 10;
/// A record's type (one byte for the built-ins, up to three for a custom id) and its timestamp delta
/// (at most 32 bits: a longer gap opens a new block, whose base carries the time).
const RECORD_HEAD: usize = 3 + V32;

/// The first argument of the record paths ([`Agent::push_small`] and the others), in one register: the
/// record type (bits 0–6: built-in ids are below 128), the values' shape (bits 7–9: [`NO_VALUE`] and
/// the others; for [`Agent::push_values`], [`ONE_ADDRESS`] says the last value is an address), the
/// longest encoding of the values (bits 10–15) and the CPU (bits 16–31). All but the CPU are known
/// when the kind is compiled, and they fill the low half: at a call site with a constant CPU 0 (a
/// single-core board) the head is one 16-bit constant, one instruction (`movw`), where a CPU in the
/// low half took two (`movw`, `movt`). A path that knows its shape gets [`NO_VALUE`] here: its head
/// is then the type alone, an 8-bit constant.
const fn record_head(cpu: u16, ty: Builtin, shape: u8) -> u32 {
    (cpu as u32) << 16 | (ty.id() as u32 & 0x7f) | shape_bits(shape)
}

/// A shape and the longest encoding of a record of that shape (type, delta, values) in a
/// [`record_head`]'s bits 7–15; none for [`NO_VALUE`].
const fn shape_bits(shape: u8) -> u32 {
    let params_len = match shape {
        NO_VALUE => return 0,
        ONE_U32 => V32,
        ONE_U64 | ONE_ADDRESS => V64,
        TWO_U32 => 2 * V32,
        _ => 0,
    };
    (shape as u32) << 7 | ((RECORD_HEAD + params_len) as u32) << 10
}

/// The CPU, record type, shape and values' longest encoding of a [`record_head`].
#[inline(always)]
const fn head_cpu(head: u32) -> u16 {
    (head >> 16) as u16
}

#[inline(always)]
const fn head_type(head: u32) -> u16 {
    head as u16 & 0x7f
}

#[inline(always)]
const fn head_shape(head: u32) -> u8 {
    (head >> 7) as u8 & 7
}

#[inline(always)]
const fn head_params_len(head: u32) -> usize {
    ((head >> 10) as usize & 0x3f).wrapping_sub(RECORD_HEAD)
}

/// What [`Agent::push_small`] writes after a record's type and delta (the shape in its `head`): nothing,
/// one value of up to 32 bits (`lo`), one of up to 64 (`lo`, `hi`), an address delta (`lo`, `hi`: the
/// address), or two values of up to 32 bits (`lo`, then `hi`). One copy of the path for every shape.
const NO_VALUE: u8 = 0;
const ONE_U32: u8 = 1;
const ONE_U64: u8 = 2;
const ONE_ADDRESS: u8 = 3;
const TWO_U32: u8 = 4;
/// No value, on the shared [`Agent::push_small`] copy (which reads the record's length from its head).
const NO_VALUE_SHARED: u8 = 5;
/// The [`Agent::push_small`] copy of the shapes that have none of their own.
const SHARED: u8 = 7;

/// How the record path keeps other contexts out of a ring while it writes.
trait Exclusion {
    type Token: Copy;
    /// # Safety
    /// Paired with one [`Exclusion::leave`] with the token it returns.
    unsafe fn enter() -> Self::Token;
    /// # Safety
    /// `token` comes from the matching [`Exclusion::enter`].
    unsafe fn leave(token: Self::Token);
}

/// The platform's critical section: records come from any context ([`Agent`]'s methods).
struct Masked;

impl Exclusion for Masked {
    type Token = critical_section::RestoreState;

    #[inline(always)]
    unsafe fn enter() -> Self::Token {
        // SAFETY: per the trait's contract, released once by `leave`.
        unsafe { critical_section::acquire() }
    }

    #[inline(always)]
    unsafe fn leave(token: Self::Token) {
        // SAFETY: per the trait's contract.
        unsafe { critical_section::release(token) }
    }
}

/// Nothing to do: the caller borrows the agent mutably ([`Exclusive`]), so no other context can touch
/// it.
struct Borrowed;

impl Exclusion for Borrowed {
    type Token = ();

    #[inline(always)]
    unsafe fn enter() {}

    #[inline(always)]
    unsafe fn leave(_: ()) {}
}

/// The drain's own state: only the context that holds the drain (see [`Shared::draining`]) touches it.
struct Link<const CPUS: usize, const OUT: usize> {
    hello_sent: bool,
    producers_sent: usize,
    types_sent: usize,
    last_frame_ticks: u64,
    last_hello_ticks: u64,
    /// `CpuTotal` frames [`Agent::finish`] has written so far (a transport that takes one frame per
    /// call finishes over several calls).
    totals_sent: usize,
    /// Per CPU: the next sequence number the collector expects (what the frames sent so far cover).
    sent_seq: [u64; CPUS],
    /// Per CPU: the block claimed and not yet taken by the transport (framed in place once).
    claimed: [Option<Claim>; CPUS],
    dump: DumpState<CPUS>,
    frames: u64,
    bytes: u64,
    _out: core::marker::PhantomData<[u8; OUT]>,
}

/// Where a dump stands (a transport that takes one frame per call dumps over several calls).
#[derive(Clone, Copy)]
struct DumpState<const CPUS: usize> {
    active: bool,
    /// Per CPU: the window's end (the next sequence number when the dump started) and whether its
    /// `Window` frame is out.
    until: [u64; CPUS],
    /// Per CPU: the window's first sequence number.
    first: [u64; CPUS],
    window_sent: [bool; CPUS],
    /// Per CPU, between dumps: the ring's `overwritten_total` when the last dump ended; while a dump
    /// runs: the records overwritten since then, which its window reports (no block is overwritten
    /// while a dump runs, so the total holds still from the dump's start to its end). One array for
    /// both: 8 bytes per CPU.
    overwritten: [u64; CPUS],
    oldest_ticks: u64,
    records: u64,
    dropped: u64,
    bye_ticks: u64,
}

/// The producers an agent that drains declares in its `Dictionary` frames.
struct Producers<const PRODUCERS: usize> {
    /// Given at once by the board ([`Agent::declare_static`]): referenced, not copied.
    in_flash: &'static [ProducerDef<'static>],
    /// Registered one by one (copied: up to `PRODUCERS`).
    registered: Vec<ProducerDef<'static>, PRODUCERS>,
}

/// What the record path and the drain share besides the rings (under the critical section).
struct Shared<const CPUS: usize> {
    rejected: u64,
    clock_regressions: u64,
    /// A context is draining (poll, flush, finish or dump): another gets `WouldBlock`.
    draining: bool,
    /// [`Agent::restart_session`] was called: the drain sends `Hello` and the dictionary again.
    restart: bool,
    /// What happens when a ring is full. Set only through `&mut self` (so read without the critical
    /// section); here, beside the flags, it costs no RAM.
    mode: Mode,
    /// Probe mode ([`Agent::attach_probe`]): the host drains the rings through this control block. Set
    /// only through `&mut self` (so read without the critical section); here, in the padding after the
    /// flags, it costs no RAM.
    probe: Option<&'static ProbeControl<CPUS>>,
}

/// The recorder. `CPUS` rings of `BLOCKS` blocks of `BLOCK` bytes; `OUT` is the control-frame buffer
/// (`Hello`, one dictionary entry, loss reports, totals; [`frame_buffer_len`]`(BLOCK)` is always enough,
/// 128 bytes is for a small board's names; 0 for an agent with no drain on the board, whose rings a
/// probe reads: [`Agent::attach_probe`]); up to `PRODUCERS` declared producers and `TYPES` custom
/// event types. `DRAIN` is 1 (the default) for an agent that frames and sends on the board; 0 for one
/// that only records for a probe (with `OUT` 0): it then holds none of the drain's state (its sent
/// sequence numbers, claims, dump progress, counters: ≈ 170 bytes on a 32-bit board with one CPU).
///
/// On a host, put it in a `Box`: it holds all its buffers inline.
#[repr(C)]
pub struct Agent<
    C: Clock,
    const CPUS: usize,
    const BLOCK: usize,
    const BLOCKS: usize,
    const OUT: usize,
    const PRODUCERS: usize,
    const TYPES: usize,
    const DRAIN: usize = 1,
    S: ConfigStore = Config,
> {
    clock: UnsafeCell<C>,
    shared: UnsafeCell<Shared<CPUS>>,
    /// The configuration: a copy ([`Config`], the default), or a reference to one in flash
    /// ([`StaticConfig`]: 16 bytes instead of 88 on a 32-bit board; [`ProbeConfig`]: 12).
    config: S,
    /// When the agent was created: the session's time origin that `Hello` announces (streamed, or in
    /// the probe's control block), so that every record (even one recorded before the first poll) is at
    /// or after zero.
    session_start_ticks: S::Start,
    /// Event types given at once by the board ([`Agent::declare_static`]): referenced, not copied.
    static_types: &'static [EventTypeDef<'static>],
    /// Event types registered one by one (copied: up to `TYPES`).
    types: Vec<EventTypeDef<'static>, TYPES>,
    /// The producers declared, which only the drain reads (to send them): none kept by a probe-only
    /// agent (`DRAIN` 0), whose host reads them from the dictionary image in flash.
    producers: [Producers<PRODUCERS>; DRAIN],
    /// The drain's state: one, or none when nothing drains on the board (`DRAIN` 0). After the
    /// fields of 4-byte alignment: an empty array of this 8-byte aligned type would still pad them.
    link: UnsafeCell<[Link<CPUS, OUT>; DRAIN]>,
    /// Last (`repr(C)`): the other fields and the first ring's state stay at short offsets from the
    /// agent's start, where the record path and the drain reach them in one instruction.
    rings: [Ring<BLOCK, BLOCKS>; CPUS],
}

// SAFETY: the clock, the ring states and `shared` are only touched inside the platform's critical section
// (which excludes every other context and core); a ring block's bytes are written by the record path only
// while it is the ring's open block, and read or framed by the drain only while it is claimed (`in_flight`,
// never the open block, never overwritten); `link` is only touched by the one context that set
// `Shared::draining`. Configuration and dictionary change only through `&mut self`.
unsafe impl<
    C: Clock + Send,
    const CPUS: usize,
    const BLOCK: usize,
    const BLOCKS: usize,
    const OUT: usize,
    const PRODUCERS: usize,
    const TYPES: usize,
    const DRAIN: usize,
    S: ConfigStore + Sync,
> Sync for Agent<C, CPUS, BLOCK, BLOCKS, OUT, PRODUCERS, TYPES, DRAIN, S>
{
}

/// An agent sized for a small microcontroller: 2 CPUs × 4 blocks × 256 bytes.
pub type SmallAgent<C> = Agent<C, 2, 256, 4, { frame_buffer_len(256) }, 16, 8>;

impl<
    C: Clock,
    const CPUS: usize,
    const BLOCK: usize,
    const BLOCKS: usize,
    const OUT: usize,
    const PRODUCERS: usize,
    const TYPES: usize,
    const DRAIN: usize,
> Agent<C, CPUS, BLOCK, BLOCKS, OUT, PRODUCERS, TYPES, DRAIN, Config>
{
    /// A new agent, streaming ([`Mode::Stream`]), holding a copy of its configuration. Nothing is sent
    /// until [`Agent::poll`]. Names longer than [`MAX_NAME_LEN`] are cut, and cut further if the `Hello`
    /// would not fit the control-frame buffer; `cpu_count` is clamped to `1..=CPUS`.
    pub fn new(clock: C, config: Config) -> Self {
        let mut config = config;
        config.board = truncate_name(config.board, MAX_NAME_LEN);
        config.soc = truncate_name(config.soc, MAX_NAME_LEN);
        config.os = truncate_name(config.os, MAX_NAME_LEN);
        config.application = truncate_name(config.application, MAX_NAME_LEN);
        config.token = truncate_name(config.token, MAX_NAME_LEN);
        config.cpu_count = config
            .cpu_count
            .clamp(1, CPUS.min(u16::MAX as usize) as u16);
        let mut agent = Self::with_config(clock, config);
        agent.fit_hello();
        agent
    }

    /// Cuts the longest name until the `Hello` fits the control-frame buffer.
    fn fit_hello(&mut self) {
        if OUT == 0 {
            // No drain on the board: the host builds `Hello` (probe mode), with no buffer to fit.
            return;
        }
        loop {
            let hello = self.hello(u64::MAX);
            let mut out = [0u8; OUT];
            if encode::encode_hello(&mut out, &hello).is_ok() {
                return;
            }
            let c = &mut self.config;
            let longest = [c.board, c.soc, c.os, c.application, c.token]
                .iter()
                .map(|s| s.len())
                .max()
                .unwrap_or(0);
            if longest == 0 {
                return;
            }
            let keep = longest.saturating_sub(8);
            for name in [
                &mut c.board,
                &mut c.soc,
                &mut c.os,
                &mut c.application,
                &mut c.token,
            ] {
                if name.len() == longest {
                    *name = truncate_name(name, keep);
                    break;
                }
            }
        }
    }
}

impl<
    C: Clock,
    const CPUS: usize,
    const BLOCK: usize,
    const BLOCKS: usize,
    const OUT: usize,
    const PRODUCERS: usize,
    const TYPES: usize,
    const DRAIN: usize,
> Agent<C, CPUS, BLOCK, BLOCKS, OUT, PRODUCERS, TYPES, DRAIN, StaticConfig>
{
    /// A new agent, streaming ([`Mode::Stream`]), that references its configuration in flash instead
    /// of copying it (72 bytes less RAM on a 32-bit board); `session_id` (which changes from boot to
    /// boot) is given apart, and the configuration's own `session_id` is not used. Nothing is cut: a
    /// `cpu_count` outside `1..=CPUS` is refused ([`AgentError::BadCpu`]), and so is a name longer than
    /// [`MAX_NAME_LEN`], or names whose `Hello` does not fit the control-frame buffer `OUT`
    /// ([`AgentError::NameTooLong`]).
    pub fn new_static(
        clock: C,
        config: &'static Config,
        session_id: u64,
    ) -> Result<Self, AgentError> {
        Self::check_static_config(config)?;
        let agent = Self::with_config(
            clock,
            StaticConfig {
                config,
                cpu_count: config.cpu_count,
                session_id,
            },
        );
        if OUT > 0 {
            let mut out = [0u8; OUT];
            if encode::encode_hello(&mut out, &agent.hello(u64::MAX)).is_err() {
                return Err(AgentError::NameTooLong);
            }
        }
        Ok(agent)
    }
}

impl<
    C: Clock,
    const CPUS: usize,
    const BLOCK: usize,
    const BLOCKS: usize,
    const PRODUCERS: usize,
    const TYPES: usize,
> Agent<C, CPUS, BLOCK, BLOCKS, 0, PRODUCERS, TYPES, 0, ProbeConfig<CPUS>>
{
    /// A new probe-only agent (`OUT` and `DRAIN` 0) that references its configuration in flash and
    /// keeps the session's id and start in the probe's control block `control`, where it writes them
    /// now (the agent keeps 16 bytes less than with [`Agent::new_static`]). Attach it to the same
    /// block once it is where it stays ([`Agent::attach_probe`]; another block gets the numbers copied
    /// from this one). The configuration is checked as [`Agent::new_static`] checks it.
    pub fn new_probe(
        mut clock: C,
        config: &'static Config,
        session_id: u64,
        control: &'static ProbeControl<CPUS>,
    ) -> Result<Self, AgentError> {
        Self::check_static_config(config)?;
        // Before the agent takes its clock: the start is at or before every record's time.
        control.start_ticks.set(clock.now());
        control.session_id.set(session_id);
        Ok(Self::with_config(
            clock,
            ProbeConfig {
                config,
                control,
                cpu_count: config.cpu_count,
            },
        ))
    }
}

/// Releases the drain when dropped.
struct DrainGuard<'a, const CPUS: usize>(&'a UnsafeCell<Shared<CPUS>>);

impl<const CPUS: usize> Drop for DrainGuard<'_, CPUS> {
    fn drop(&mut self) {
        // SAFETY: `shared` is only touched inside the critical section.
        critical_section::with(|_| unsafe { (*self.0.get()).draining = false });
    }
}

/// A claimed block: the oldest closed block of a ring, which the drain frames and sends.
#[derive(Clone, Copy)]
struct Claim {
    slot: usize,
    meta: BlockMeta,
    /// Where its frame starts and ends once framed in place (its head then holds the header, no
    /// longer its numbers).
    frame: Option<(usize, usize)>,
}

impl<
    C: Clock,
    const CPUS: usize,
    const BLOCK: usize,
    const BLOCKS: usize,
    const OUT: usize,
    const PRODUCERS: usize,
    const TYPES: usize,
    const DRAIN: usize,
    S: ConfigStore,
> Agent<C, CPUS, BLOCK, BLOCKS, OUT, PRODUCERS, TYPES, DRAIN, S>
{
    const SIZES_OK: () = {
        assert!(CPUS > 0 && BLOCKS > 0);
        assert!(
            BLOCK >= HEAD + tail(BLOCK) + 32,
            "blocks of at least 72 bytes"
        );
        assert!(BLOCK <= u32::MAX as usize);
        assert!(
            OUT == 0 || OUT >= 48,
            "a control-frame buffer of at least 48 bytes (0: no drain on the board, probe mode only)"
        );
        assert!(
            DRAIN == 1 || (DRAIN == 0 && OUT == 0),
            "DRAIN is 1, or 0 for a probe-only agent (OUT 0)"
        );
    };

    /// The bytes of records one block holds.
    const CAPACITY_END: usize = BLOCK - tail(BLOCK);

    /// Checks a configuration the agent references (it cannot cut or clamp it): `cpu_count` in
    /// `1..=CPUS`, names at most [`MAX_NAME_LEN`] bytes.
    fn check_static_config(config: &Config) -> Result<(), AgentError> {
        if config.cpu_count == 0 || usize::from(config.cpu_count) > CPUS {
            return Err(AgentError::BadCpu);
        }
        // Field by field (an array of the five names would be copied to the stack first: flash for
        // a check that runs once).
        let too_long = |name: &str| name.len() > MAX_NAME_LEN;
        if too_long(config.board)
            || too_long(config.soc)
            || too_long(config.os)
            || too_long(config.application)
            || too_long(config.token)
        {
            return Err(AgentError::NameTooLong);
        }
        Ok(())
    }

    /// An agent around its configuration store, before any name is cut.
    fn with_config(mut clock: C, config: S) -> Self {
        let () = Self::SIZES_OK;
        let session_start_ticks = S::keep_start(clock.now());
        Self {
            clock: UnsafeCell::new(clock),
            config,
            rings: [const { Ring::new() }; CPUS],
            shared: UnsafeCell::new(Shared {
                rejected: 0,
                clock_regressions: 0,
                draining: false,
                restart: false,
                mode: Mode::Stream,
                probe: None,
            }),
            link: UnsafeCell::new([const { Link::NEW }; DRAIN]),
            session_start_ticks,
            static_types: &[],
            types: Vec::new(),
            producers: [const {
                Producers {
                    in_flash: &[],
                    registered: Vec::new(),
                }
            }; DRAIN],
        }
    }

    /// The configuration in force: a copy's `cpu_count` clamped to `CPUS` and names cut to fit
    /// ([`Agent::new`]); a referenced one as it is, whose `session_id` is not the one in use (the
    /// session id given to [`Agent::new_static`] is).
    pub fn config(&self) -> &Config {
        self.config.get()
    }

    /// Chooses what happens when a ring is full (before the agent is shared).
    pub fn set_mode(&mut self, mode: Mode) {
        self.shared.get_mut().mode = mode;
    }

    /// What happens when a ring is full.
    pub fn mode(&self) -> Mode {
        // SAFETY: written only through `&mut self`.
        unsafe { (*self.shared.get()).mode }
    }

    /// Counters since the start.
    pub fn stats(&self) -> AgentStats {
        critical_section::with(|_| {
            let mut s = AgentStats::default();
            for ring in &self.rings {
                // SAFETY: ring states are only touched inside the critical section.
                let r = unsafe { &*ring.state.get() };
                s.records += r.closed_records() + u64::from(if r.open() { r.count } else { 0 });
                s.dropped += r.dropped;
                s.overwritten += r.overwritten_total;
            }
            // SAFETY: as above.
            let shared = unsafe { &*self.shared.get() };
            s.rejected = shared.rejected;
            s.clock_regressions = shared.clock_regressions;
            // The drain's counters: only its holder writes them, and only the drain's own `u64`s.
            if !shared.draining {
                // SAFETY: no drain is running (checked under the critical section, which a drain must
                // take to start).
                if let Some(link) = unsafe { &*self.link.get() }.first() {
                    s.frames = link.frames;
                    s.bytes = link.bytes;
                }
            }
            s
        })
    }

    /// The clock, e.g. for a simulator that drives it.
    pub fn clock_mut(&mut self) -> &mut C {
        self.clock.get_mut()
    }

    /// The size of the agent's state besides its ring blocks, in bytes (for footprint reports).
    pub const fn state_bytes() -> usize {
        core::mem::size_of::<Self>() - CPUS * BLOCKS * BLOCK
    }

    /// Declares a producer; it goes out in the next `Dictionary` frame. A probe-only agent (`DRAIN` 0)
    /// keeps none ([`AgentError::DictionaryFull`]): its host reads the producers from the dictionary
    /// image in flash ([`Agent::attach_probe`]).
    pub fn register_producer(&mut self, def: ProducerDef<'static>) -> Result<(), AgentError> {
        self.check_producer(&def)?;
        self.producers
            .first_mut()
            .ok_or(AgentError::DictionaryFull)?
            .registered
            .push(def)
            .map_err(|_| AgentError::DictionaryFull)
    }

    /// Declares a custom event type (id ≥ [`FIRST_CUSTOM_TYPE`]); it goes out in the next `Dictionary` frame.
    pub fn register_type(&mut self, def: EventTypeDef<'static>) -> Result<(), AgentError> {
        self.check_type(&def)?;
        self.types.push(def).map_err(|_| AgentError::DictionaryFull)
    }

    /// Declares a board's whole dictionary at once, from tables in flash: the agent keeps references to
    /// them, not copies, so they cost it no RAM (an agent with `PRODUCERS` and `TYPES` of 0 holds no
    /// dictionary storage at all). Checked like [`Agent::register_producer`] and
    /// [`Agent::register_type`], entry by entry; on an error nothing is declared. Replaces the tables of
    /// an earlier call; entries registered one by one stay, sent after these.
    pub fn declare_static(
        &mut self,
        producers: &'static [ProducerDef<'static>],
        types: &'static [EventTypeDef<'static>],
    ) -> Result<(), AgentError> {
        for p in producers {
            self.check_producer(p)?;
        }
        // Checked against the types registered one by one and those before it in `types`.
        let previous = core::mem::take(&mut self.static_types);
        let checked = types.iter().enumerate().try_for_each(|(i, t)| {
            self.check_type(t)?;
            match types
                .get(..i)
                .is_some_and(|before| before.iter().any(|b| b.id == t.id))
            {
                true => Err(AgentError::DuplicateType),
                false => Ok(()),
            }
        });
        if let Err(e) = checked {
            self.static_types = previous;
            return Err(e);
        }
        // Checked, but kept only by an agent that sends them (a probe's host reads them from flash).
        if let Some(kept) = self.producers.first_mut() {
            kept.in_flash = producers;
        }
        self.static_types = types;
        Ok(())
    }

    /// Every custom event type declared: the static tables', then those registered one by one.
    fn custom_types(&self) -> impl Iterator<Item = &EventTypeDef<'static>> {
        // An agent with no room for types registered one by one (`TYPES` 0) has none: no loop over
        // them in the code (the compiler cannot know that the vector's length stays 0).
        let registered: &[EventTypeDef<'static>] = if TYPES == 0 { &[] } else { &self.types };
        self.static_types.iter().chain(registered)
    }

    fn check_producer(&mut self, def: &ProducerDef<'static>) -> Result<(), AgentError> {
        if def.name.len() > MAX_NAME_LEN {
            return Err(AgentError::NameTooLong);
        }
        if OUT > 0 {
            let mut out = [0u8; OUT];
            encode::encode_dictionary(&mut out, &[DictEntry::Producer(*def)])
                .map_err(|_| AgentError::DeclarationTooLarge)?;
        }
        Ok(())
    }

    /// Checks a custom type against the rules and the types declared so far.
    fn check_type(&mut self, def: &EventTypeDef<'static>) -> Result<(), AgentError> {
        if def.id < FIRST_CUSTOM_TYPE {
            return Err(AgentError::ReservedTypeId);
        }
        if def.params.len() > MAX_PARAMS {
            return Err(AgentError::TooManyParams);
        }
        if def.name.len() > MAX_NAME_LEN || def.params.iter().any(|p| p.name.len() > MAX_NAME_LEN) {
            return Err(AgentError::NameTooLong);
        }
        if self.custom_types().any(|t| t.id == def.id) {
            return Err(AgentError::DuplicateType);
        }
        if OUT > 0 {
            let mut out = [0u8; OUT];
            encode::encode_dictionary(&mut out, &[DictEntry::EventType(*def)])
                .map_err(|_| AgentError::DeclarationTooLarge)?;
        }
        Ok(())
    }

    /// Records an event of any declared type, checking the values against the type's parameters.
    pub fn record(
        &self,
        cpu: u16,
        type_id: u16,
        values: &[ParamValue<'_>],
    ) -> Result<Recorded, AgentError> {
        self.record_via::<Masked>(cpu, type_id, values)
    }

    fn record_via<X: Exclusion>(
        &self,
        cpu: u16,
        type_id: u16,
        values: &[ParamValue<'_>],
    ) -> Result<Recorded, AgentError> {
        let builtin = usize::from(type_id).wrapping_sub(1);
        let matches = match BUILTIN_PARAMS.get(builtin) {
            Some(&packed) => {
                packed & 7 == values.len() as u32
                    && values
                        .iter()
                        .enumerate()
                        .all(|(i, v)| (packed >> (3 + 3 * i)) & 7 == v.param_type() as u32)
            }
            None => match self.custom_types().find(|t| t.id == type_id) {
                Some(t) => {
                    t.params.len() == values.len()
                        && t.params
                            .iter()
                            .zip(values)
                            .all(|(p, v)| p.ty == v.param_type())
                }
                None => return Err(self.reject(AgentError::UnknownType)),
            },
        };
        if !matches {
            return Err(self.reject(AgentError::ParamMismatch));
        }
        // Same bytes as the wire crate's `RecordEncoder`, written field by field into the block.
        let mut max_len = 0;
        for v in values {
            max_len += match v {
                ParamValue::Float(_) => 8,
                ParamValue::Str(s) => V32 + s.len(),
                _ => V64,
            };
        }
        let stored = self.push_with::<X>(cpu, type_id, max_len, |c, ring| {
            for v in values {
                write_value(c, ring, v);
            }
        });
        match stored {
            Ok(outcome) => outcome,
            Err(now) => match self.make_room::<X>(cpu, max_len, now) {
                Ok(()) => self.record_via::<X>(cpu, type_id, values),
                Err(outcome) => outcome,
            },
        }
    }

    /// Records through `&mut self`, with no critical section: for a single context that owns the agent
    /// (a simulator, a host program, a board that records from one context only), the borrow already
    /// keeps every other context out.
    pub fn exclusive(
        &mut self,
    ) -> Exclusive<'_, C, CPUS, BLOCK, BLOCKS, OUT, PRODUCERS, TYPES, DRAIN, S> {
        Exclusive { agent: self }
    }

    /// Counts a refused record.
    #[cold]
    #[inline(never)]
    fn reject(&self, e: AgentError) -> AgentError {
        // SAFETY: `shared` is only touched inside the critical section.
        critical_section::with(|_| unsafe { (*self.shared.get()).rejected += 1 });
        e
    }

    /// The record path of the built-in kinds without a string, shared by all of them (one copy in
    /// flash): `head` is [`record_head`], `values` the parameters as varints (signed ones zigzagged by
    /// the kind), the last one an address delta when `head` says so.
    #[inline(never)]
    fn push_values<X: Exclusion>(&self, head: u32, values: &[u64]) -> Result<Recorded, AgentError> {
        let address_last = head_shape(head) == ONE_ADDRESS;
        let stored = self.push_with::<X>(
            head_cpu(head),
            head_type(head),
            values.len() * V64,
            |c, ring| {
                if let Some((&last, rest)) = values.split_last() {
                    for &v in rest {
                        c.u64(v);
                    }
                    if address_last {
                        address(c, ring, last);
                    } else {
                        c.u64(last);
                    }
                }
            },
        );
        match stored {
            Ok(outcome) => outcome,
            Err(now) => match self.make_room::<X>(head_cpu(head), values.len() * V64, now) {
                Ok(()) => self.push_values::<X>(head, values),
                Err(outcome) => outcome,
            },
        }
    }

    /// The record path of the built-in kinds with at most two values (the common kinds: `irq_entry`,
    /// `context_switch`, `wakeup`, `mark`, the exits…): `head` is [`record_head`], whose shape says
    /// what `lo` and `hi` hold; the values come in registers and are written with no loop. `COPY`:
    /// [`SHARED`], one copy for the kinds with no value, one value of up to 64 bits or two of up to 32
    /// (the shape tested when the record is written: one copy in flash for all of them), or a copy of
    /// its own for [`ONE_ADDRESS`] (the functions: `user_entry` is near the bound of 100 instructions,
    /// where the shape test of the shared copy would add to it: see BENCHMARKS.md).
    #[inline(never)]
    fn push_small<X: Exclusion, const COPY: u8>(
        &self,
        head: u32,
        lo: u32,
        hi: u32,
    ) -> Result<Recorded, AgentError> {
        let params_len = match COPY {
            SHARED => head_params_len(head),
            _ => head_params_len(shape_bits(COPY)),
        };
        let stored =
            self.push_with::<X>(
                head_cpu(head),
                head_type(head),
                params_len,
                |c, ring| match COPY {
                    ONE_ADDRESS => address(c, ring, u64::from(hi) << 32 | u64::from(lo)),
                    _ => match head_shape(head) {
                        NO_VALUE_SHARED => {}
                        TWO_U32 => {
                            c.u32(lo);
                            c.u32(hi);
                        }
                        // One value: a `ONE_U32` kind passes `hi` 0, so this is its `u32`.
                        _ => c.u64(u64::from(hi) << 32 | u64::from(lo)),
                    },
                },
            );
        match stored {
            Ok(outcome) => outcome,
            Err(now) => match self.make_room::<X>(head_cpu(head), params_len, now) {
                Ok(()) => self.push_small::<X, COPY>(head, lo, hi),
                Err(outcome) => outcome,
            },
        }
    }

    /// The record path of `syscall_entry`: the call's number and its four arguments, read where the
    /// caller keeps them (no copy), each written with no loop around it.
    #[inline(never)]
    fn push_syscall<X: Exclusion>(
        &self,
        head: u32,
        nr: u32,
        args: &[u64; 4],
    ) -> Result<Recorded, AgentError> {
        let stored = self.push_with::<X>(head_cpu(head), head_type(head), V32 + 4 * V64, |c, _| {
            c.u32(nr);
            // Each read just before it is written: one register for the arguments' address instead of
            // eight for their values (which pushed the section's token onto the stack).
            let [a0, a1, a2, a3] = args;
            c.u64(*a0);
            c.u64(*a1);
            c.u64(*a2);
            c.u64(*a3);
        });
        match stored {
            Ok(outcome) => outcome,
            Err(now) => match self.make_room::<X>(head_cpu(head), V32 + 4 * V64, now) {
                Ok(()) => self.push_syscall::<X>(head, nr, args),
                Err(outcome) => outcome,
            },
        }
    }

    /// The record path of the built-in kinds with a string (`marker`, `thread_create`): an optional
    /// number, then the string.
    #[inline(never)]
    fn push_string<X: Exclusion>(
        &self,
        head: u32,
        number: Option<u32>,
        text: &str,
    ) -> Result<Recorded, AgentError> {
        let stored = self.push_with::<X>(
            head_cpu(head),
            head_type(head),
            2 * V32 + text.len(),
            |c, _| {
                if let Some(n) = number {
                    c.u32(n);
                }
                c.u32(text.len() as u32);
                c.bytes(text.as_bytes());
            },
        );
        match stored {
            Ok(outcome) => outcome,
            Err(now) => match self.make_room::<X>(head_cpu(head), 2 * V32 + text.len(), now) {
                Ok(()) => self.push_string::<X>(head, number, text),
                Err(outcome) => outcome,
            },
        }
    }

    /// The record path: excludes other contexts, reads the clock, and when the CPU's open block has room
    /// for the record's longest encoding (`params_len` after its type and delta), writes the type and
    /// delta, lets `write` write the parameters and counts the record, all in one masked section. When
    /// it has no room (or no block is open, or the time jumped by 2^32 ticks or more), it leaves that
    /// section, opens the next block in a masked section of its own (out of line) and tries again
    /// (`Err` with the time read: the caller calls [`Agent::make_room`], then its own record path
    /// again, out of line): a
    /// record masks interrupts for the record alone, a block switch for the switch alone.
    #[inline(always)]
    fn push_with<X: Exclusion>(
        &self,
        cpu: u16,
        ty: u16,
        params_len: usize,
        write: impl FnOnce(&mut Cursor, &mut RingState),
    ) -> Result<Result<Recorded, AgentError>, u64> {
        // A CPU past `CPUS` or at or past `cpu_count` is refused where a block would be opened
        // (`make_room`): its ring never has one, so its records always get there.
        let Some(ring) = self.rings.get(usize::from(cpu)) else {
            return Err(0);
        };
        let max_len = RECORD_HEAD + params_len;
        {
            // SAFETY: left below on every path.
            let token = unsafe { X::enter() };
            // SAFETY: the clock and the ring's state are only touched inside the exclusion; the open
            // block's bytes only by the record path, inside it too (the drain never claims the open
            // block).
            let (clock, state) = unsafe { (&mut *self.clock.get(), &mut *ring.state.get()) };
            let mut now = clock.now();
            let mut delta = now.wrapping_sub(state.last_ticks);
            if delta >> 32 != 0 && now < state.last_ticks {
                // A clock that went back: the record takes the previous time.
                (now, delta) = (self.clock_went_back(state, max_len), 0);
            }
            // One test for the common case: a block is open, has room, and the time went forward by
            // less than 2^32 ticks.
            if delta >> 32 == 0 && state.wr as usize + max_len <= state.limit as usize {
                // Stored now rather than after the record: fewer values live across the encoding.
                state.last_ticks = now;
                // SAFETY: `wr + max_len <= limit <= BLOCKS * BLOCK`: the record's bytes are in the
                // open block.
                let base = UnsafeCell::raw_get(ring.blocks.as_ptr()).cast::<u8>();
                let start = unsafe { base.add(state.wr as usize) };
                let mut c = Cursor {
                    at: start,
                    #[cfg(debug_assertions)]
                    left: max_len,
                };
                if ty < 0x80 {
                    c.byte(ty as u8);
                } else {
                    c.u32(u32::from(ty));
                }
                c.u32(delta as u32);
                write(&mut c, state);
                // SAFETY: the cursor moved forward from `base` within the block.
                state.wr = unsafe { c.at.offset_from(base) } as u32;
                state.count += 1;
                // SAFETY: entered above.
                unsafe { X::leave(token) };
                return Ok(Ok(Recorded::Stored));
            }
            // SAFETY: entered above.
            unsafe { X::leave(token) };
            Err(now)
        }
    }

    /// A record whose clock reading was earlier than its CPU's previous record's (inside the record
    /// path's exclusion): it takes the previous record's time (returned), and is counted if it is
    /// written now, that is, if the open block has room for it (else it is counted when it is written,
    /// after the block switch).
    #[cold]
    #[inline(never)]
    fn clock_went_back(&self, state: &RingState, max_len: usize) -> u64 {
        if state.wr as usize + max_len <= state.limit as usize {
            // SAFETY: inside the record path's exclusion; the rejected and regression counters are
            // only touched there or inside the critical section, which the record path also holds
            // or (`Exclusive`) makes unnecessary by the borrow.
            unsafe { (*self.shared.get()).clock_regressions += 1 };
        }
        state.last_ticks
    }

    /// The record path's slow case, in a masked section of its own: no open block, no room in it, or a
    /// gap of 2^32 ticks or more since the CPU's last record: opens the next block at the current time
    /// (unless another context did so meanwhile), or drops the record (counted) when the ring is full
    /// in streaming mode. Refuses a record larger than a block or for a CPU past `cpu_count`. `Ok`:
    /// record again; `Err`: the record's outcome.
    #[cold]
    #[inline(never)]
    fn make_room<X: Exclusion>(
        &self,
        cpu: u16,
        params_len: usize,
        now: u64,
    ) -> Result<(), Result<Recorded, AgentError>> {
        let max_len = RECORD_HEAD + params_len;
        let Some(ring) = self.rings.get(usize::from(cpu)) else {
            return Err(Err(self.reject(AgentError::BadCpu)));
        };
        if cpu >= self.config.cpu_count() {
            return Err(Err(self.reject(AgentError::BadCpu)));
        }
        if HEAD + max_len > Self::CAPACITY_END {
            return Err(Err(self.reject(AgentError::RecordTooLarge)));
        }
        // SAFETY: left below.
        let token = unsafe { X::enter() };
        // SAFETY: as in the record path.
        let state = unsafe { &mut *ring.state.get() };
        // The time the record path read (no second clock read): a new block starts there, or at the
        // last record's time if a context recorded later meanwhile or the clock went back (counted by
        // the record that takes it).
        let now = now.max(state.last_ticks);
        let fits = (now - state.last_ticks) >> 32 == 0
            && state.wr as usize + max_len <= state.limit as usize;
        let outcome = if fits {
            Recorded::Stored
        } else {
            self.next_block(usize::from(cpu), ring, state, now)
        };
        // SAFETY: entered above.
        unsafe { X::leave(token) };
        match outcome {
            // A context that interrupted this one between the sections may have filled the new block
            // already: then this happens again (the ring's room is finite: at worst the record is
            // dropped).
            Recorded::Stored => Ok(()),
            Recorded::Dropped => Err(Ok(Recorded::Dropped)),
        }
    }

    /// Closes the open block (if any) and opens the next one at `now`; in post-mortem mode the oldest
    /// closed block makes room when the ring is full; otherwise the record is dropped and counted.
    fn next_block(
        &self,
        cpu: usize,
        ring: &Ring<BLOCK, BLOCKS>,
        state: &mut RingState,
        now: u64,
    ) -> Recorded {
        let probe = self.probe().and_then(|p| p.rings.get(cpu));
        match probe {
            Some(p) => probe_settle::<BLOCK, BLOCKS>(ring, state, p, false),
            None => close_open::<BLOCK, BLOCKS>(ring, state),
        }
        if state.closed >= BLOCKS {
            let may_overwrite = self.mode() == Mode::PostMortem
                && !state.in_flight
                && !state.dumping
                && self.probe().is_none();
            let oldest = ring.blocks.get(state.oldest);
            match oldest {
                Some(block) if may_overwrite => {
                    // SAFETY: the oldest block is closed and not claimed by a drain: only the record
                    // path (inside the critical section) may touch it.
                    let meta = BlockMeta::read(unsafe { &*block.get() });
                    state.overwritten_total += u64::from(meta.count);
                    state.oldest = (state.oldest + 1) % BLOCKS;
                    state.closed -= 1;
                }
                _ => {
                    state.next_seq += 1;
                    state.dropped += 1;
                    return Recorded::Dropped;
                }
            }
        }
        let slot = (state.oldest + state.closed) % BLOCKS;
        state.wr = (slot * BLOCK + HEAD) as u32;
        state.limit = (slot * BLOCK + Self::CAPACITY_END) as u32;
        state.count = 0;
        if let Some(block) = ring.blocks.get(slot) {
            // SAFETY: the new open block is the record path's, inside its exclusion (this runs there);
            // its head is not written again until it closes.
            put(
                unsafe { &mut *block.get() },
                block_meta::BASE_TICKS,
                now.to_le_bytes(),
            );
        }
        state.last_ticks = now;
        state.last_address = 0;
        Recorded::Stored
    }

    /// Probe mode: a debug probe or the host reads the rings through `control` and frames them itself
    /// (`socscope collect --probe`); the board only records ([`Agent::poll`], [`Agent::flush`],
    /// [`Agent::finish`] and [`Agent::dump`] then return [`TransportError::Closed`]). `dictionary` is
    /// the board's dictionary as the body of one `Dictionary` frame
    /// (`socscope_wire::dict::dictionary_image`, in flash), which the host sends for it; `names` the
    /// board's names for the host's `Hello` ([`probe::names_image`], in flash; the host takes the
    /// names from it, the numbers from the configuration). Call it once the
    /// agent is where it stays (a `static`): the control block gives the host the rings' addresses. A
    /// full ring drops records (streaming mode's rule, whatever [`Agent::set_mode`] said).
    pub fn attach_probe(
        &mut self,
        control: &'static ProbeControl<CPUS>,
        dictionary: &'static [u8],
        names: &'static [u8],
    ) {
        use core::sync::atomic::Ordering::Relaxed;
        let c = control;
        c.version.store(PROBE_VERSION, Relaxed);
        c.cpus.store(CPUS as u32, Relaxed);
        c.block.store(BLOCK as u32, Relaxed);
        c.blocks.store(BLOCKS as u32, Relaxed);
        c.records_at.store(HEAD as u32, Relaxed);
        c.cpu_count
            .store(u32::from(self.config.cpu_count()), Relaxed);
        c.tick_rate_hz.set(self.config.get().tick_rate_hz);
        // A probe agent attached to its own block: the numbers are there already.
        if !self
            .config
            .session_in((control as *const ProbeControl<CPUS>).cast::<()>())
        {
            c.session_id.set(self.config.session_id());
            c.start_ticks
                .set(self.config.start_ticks(self.session_start_ticks));
        }
        c.dictionary.set(dictionary.as_ptr() as usize as u64);
        c.dictionary_len.store(dictionary.len() as u32, Relaxed);
        c.names.set(names.as_ptr() as usize as u64);
        c.names_len.store(names.len() as u32, Relaxed);
        for (slot, ring) in c.rings.iter().zip(&self.rings) {
            slot.blocks
                .set(UnsafeCell::raw_get(ring.blocks.as_ptr()) as usize as u64);
        }
        let shared = self.shared.get_mut();
        shared.mode = Mode::Stream;
        shared.probe = Some(control);
        c.state.store(PROBE_STATE_RECORDING, Relaxed);
        probe::store_magic(&c.magic);
    }

    /// The control block in probe mode.
    #[inline(always)]
    fn probe(&self) -> Option<&'static ProbeControl<CPUS>> {
        // SAFETY: `probe` is written only through `&mut self` (`attach_probe`): no write can run
        // alongside this read.
        unsafe { (*self.shared.get()).probe }
    }

    /// Probe mode: closes every ring's open block that holds records, so that the host can read it (a
    /// board calls it periodically, e.g. every flush latency, to bound how long records wait in an open
    /// block). A ring whose blocks are all waiting for the host keeps its open block. Nothing in
    /// streaming mode (the drain closes blocks itself).
    pub fn probe_close_blocks(&self) {
        let Some(control) = self.probe() else {
            return;
        };
        for (cpu, p) in control.rings.iter().enumerate() {
            self.with_ring(cpu, |ring, s| {
                probe_settle::<BLOCK, BLOCKS>(ring, s, p, true)
            });
        }
    }

    /// Probe mode: ends the session: closes every open block and publishes the final counters (the
    /// sequence numbers given out and the records dropped per CPU, the time), which the host sends as
    /// `CpuTotal` and `Bye` once it has read every block.
    pub fn probe_finish(&self) {
        let Some(control) = self.probe() else {
            return;
        };
        for (cpu, p) in control.rings.iter().enumerate() {
            self.with_ring(cpu, |ring, s| {
                probe_settle::<BLOCK, BLOCKS>(ring, s, p, false);
                // No block is open now: the next sequence number is `next_seq` (`s.next()`
                // would test that again).
                p.sequences.set(s.next_seq);
                p.dropped.set(s.dropped);
            });
        }
        control.end_ticks.set(self.now());
        control
            .state
            .store(PROBE_STATE_FINISHED, core::sync::atomic::Ordering::Release);
    }

    /// Sends what is due: `Hello` first, new dictionary entries, full blocks, blocks older than the flush
    /// latency, loss reports, and a `Heartbeat` when idle. Returns `Ok` when everything due was sent;
    /// on `WouldBlock` the rest stays queued for the next call. In post-mortem mode it sends nothing:
    /// see [`Agent::dump`].
    pub fn poll<T: Transport>(&self, transport: &mut T) -> Result<(), TransportError> {
        let _drain = self.begin_drain()?;
        self.send_due(transport, false)
    }

    /// Sends everything queued, partly filled blocks included (nothing in post-mortem mode).
    pub fn flush<T: Transport>(&self, transport: &mut T) -> Result<(), TransportError> {
        let _drain = self.begin_drain()?;
        self.send_due(transport, true)
    }

    /// Flushes everything and ends the session with one `CpuTotal` per CPU the `Hello` announced,
    /// then `Bye`. On `WouldBlock`, call it again: it goes on where it stopped (each `CpuTotal` is
    /// written once). In post-mortem mode, it dumps the rings ([`Agent::dump`]), which ends the same way.
    pub fn finish<T: Transport>(&self, transport: &mut T) -> Result<(), TransportError> {
        if self.mode() == Mode::PostMortem {
            return self.dump(transport);
        }
        let _drain = self.begin_drain()?;
        self.send_due(transport, true)?;
        // SAFETY: this context holds the drain.
        let link = unsafe { self.link() }?;
        let cpus = CPUS.min(usize::from(self.config.cpu_count()));
        while link.totals_sent < cpus {
            let cpu = link.totals_sent;
            let sequences = self.with_ring(cpu, |_, s| s.next()).unwrap_or(0);
            let total = CpuTotal {
                cpu: cpu as u16,
                sequences,
            };
            let mut out = [0u8; OUT];
            let n =
                encode::encode_cpu_total(&mut out, &total).map_err(|_| TransportError::Closed)?;
            self.write_out(link, transport, &out, n)?;
            link.totals_sent += 1;
        }
        let stats = self.stats_unlocked();
        let bye = Bye {
            ticks: self.now(),
            records: stats.0,
            dropped: stats.1,
        };
        let mut out = [0u8; OUT];
        let n = encode::encode_bye(&mut out, &bye).map_err(|_| TransportError::Closed)?;
        self.write_out(link, transport, &out, n)
    }

    /// Post-mortem mode: sends what the rings hold now, as a session of its own — `Hello` (whose
    /// `start_ticks` is the oldest record's time), the dictionary, then per CPU a `Window` frame and
    /// the CPU's blocks, then `CpuTotal`s and `Bye` — from a watchdog, a fault handler or a deadline
    /// check. Records made while the dump runs stay in the rings for the next dump. On `WouldBlock`, call
    /// it again: it goes on where it stopped. In streaming mode, the same as [`Agent::flush`].
    ///
    /// A dump that interrupts a drain of the same agent (another context in `poll` or `dump`) gets
    /// `WouldBlock`: call it from the drain's context (or a lower priority) when a drain may be running.
    pub fn dump<T: Transport>(&self, transport: &mut T) -> Result<(), TransportError> {
        let _drain = self.begin_drain()?;
        if self.mode() == Mode::Stream {
            return self.send_due(transport, true);
        }
        // SAFETY: this context holds the drain.
        let link = unsafe { self.link() }?;
        if !link.dump.active {
            self.start_dump(link);
        }
        if !link.hello_sent {
            let hello = self.hello(link.dump.oldest_ticks);
            let mut out = [0u8; OUT];
            let n = encode::encode_hello(&mut out, &hello).map_err(|_| TransportError::Closed)?;
            self.write_out(link, transport, &out, n)?;
            link.hello_sent = true;
        }
        self.send_dictionary(link, transport)?;
        for cpu in 0..CPUS.min(usize::from(self.config.cpu_count())) {
            let (Some(&sent), Some(&until)) = (link.window_sent(cpu), link.dump.until.get(cpu))
            else {
                continue;
            };
            if !sent {
                let first_seq = link.dump.first.get(cpu).copied().unwrap_or(until);
                let window = Window {
                    cpu: cpu as u16,
                    first_seq,
                    overwritten: link.dump.overwritten.get(cpu).copied().unwrap_or(0),
                };
                let mut out = [0u8; OUT];
                let n =
                    encode::encode_window(&mut out, &window).map_err(|_| TransportError::Closed)?;
                self.write_out(link, transport, &out, n)?;
                if let Some(s) = link.sent_seq.get_mut(cpu) {
                    *s = first_seq;
                }
                if let Some(w) = link.dump.window_sent.get_mut(cpu) {
                    *w = true;
                }
            }
            self.send_ring(link, transport, cpu, 0, false, Some(until))?;
        }
        while link.totals_sent < CPUS.min(usize::from(self.config.cpu_count())) {
            let cpu = link.totals_sent;
            let total = CpuTotal {
                cpu: cpu as u16,
                sequences: link.dump.until.get(cpu).copied().unwrap_or(0),
            };
            let mut out = [0u8; OUT];
            let n =
                encode::encode_cpu_total(&mut out, &total).map_err(|_| TransportError::Closed)?;
            self.write_out(link, transport, &out, n)?;
            link.totals_sent += 1;
        }
        let bye = Bye {
            ticks: link.dump.bye_ticks,
            records: link.dump.records,
            dropped: link.dump.dropped,
        };
        let mut out = [0u8; OUT];
        let n = encode::encode_bye(&mut out, &bye).map_err(|_| TransportError::Closed)?;
        self.write_out(link, transport, &out, n)?;
        // The next dump is a session of its own: Hello and dictionary again.
        let totals = &mut link.dump.overwritten;
        critical_section::with(|_| {
            for (ring, noted) in self.rings.iter().zip(totals.iter_mut()) {
                // SAFETY: ring states are only touched inside the critical section.
                let s = unsafe { &mut *ring.state.get() };
                s.dumping = false;
                // Between dumps the array holds the total again (unchanged since the dump started).
                *noted = s.overwritten_total;
            }
        });
        link.dump.active = false;
        link.hello_sent = false;
        link.producers_sent = 0;
        link.types_sent = 0;
        link.totals_sent = 0;
        Ok(())
    }

    /// Takes the dump's snapshot: closes every open block, notes where each window ends and the
    /// session's totals at that moment.
    #[inline(never)]
    fn start_dump(&self, link: &mut Link<CPUS, OUT>) {
        let now = self.now();
        let mut oldest_ticks = u64::MAX;
        let mut totals = (0, 0);
        let mut dump = link.dump;
        critical_section::with(|_| {
            for (cpu, ring) in self.rings.iter().enumerate() {
                // SAFETY: ring states are only touched inside the critical section.
                let s = unsafe { &mut *ring.state.get() };
                close_open::<BLOCK, BLOCKS>(ring, s);
                s.dumping = true;
                // The window starts at the oldest block the ring holds (or is empty).
                let claimed = link.claimed.get(cpu).copied().flatten();
                let oldest = match (claimed, ring.blocks.get(s.oldest)) {
                    (_, _) if s.closed == 0 => None,
                    (Some(c), _) => Some(c.meta),
                    // SAFETY: an unclaimed closed block's head holds its numbers, written when it
                    // closed.
                    (None, Some(b)) => Some(BlockMeta::read(unsafe { &*b.get() })),
                    (None, None) => None,
                };
                if let Some(m) = oldest {
                    oldest_ticks = oldest_ticks.min(m.base_ticks);
                }
                if let (Some(u), Some(f)) = (dump.until.get_mut(cpu), dump.first.get_mut(cpu)) {
                    *u = s.next_seq;
                    *f = oldest.map_or(s.next_seq, |m| m.first_seq);
                }
                // The total when the last dump ended becomes the count since then.
                if let Some(o) = dump.overwritten.get_mut(cpu) {
                    *o = s.overwritten_total.saturating_sub(*o);
                }
                totals.0 += s.closed_records();
                totals.1 += s.dropped;
            }
        });
        dump.active = true;
        dump.window_sent = [false; CPUS];
        dump.oldest_ticks = if oldest_ticks == u64::MAX {
            now
        } else {
            oldest_ticks
        };
        dump.records = totals.0;
        dump.dropped = totals.1;
        dump.bye_ticks = now;
        link.dump = dump;
        link.hello_sent = false;
        link.producers_sent = 0;
        link.types_sent = 0;
        link.totals_sent = 0;
    }

    /// Re-sends `Hello` and the whole dictionary on the next poll (after the link was re-established).
    pub fn restart_session(&self) {
        // SAFETY: `shared` is only touched inside the critical section.
        critical_section::with(|_| unsafe { (*self.shared.get()).restart = true });
    }

    /// Takes the drain for this context, or `WouldBlock` if another context holds it.
    fn begin_drain(&self) -> Result<DrainGuard<'_, CPUS>, TransportError> {
        if OUT == 0 || DRAIN == 0 || self.probe().is_some() {
            // The host drains the rings (probe mode): a drain on the board would take its blocks.
            return Err(TransportError::Closed);
        }
        critical_section::with(|_| {
            // SAFETY: `shared` is only touched inside the critical section.
            let shared = unsafe { &mut *self.shared.get() };
            if shared.draining {
                return Err(TransportError::WouldBlock);
            }
            shared.draining = true;
            Ok(DrainGuard(&self.shared))
        })
    }

    /// The drain's state (`Closed` for an agent with none: nothing drains on the board).
    ///
    /// # Safety
    /// The caller holds the drain ([`Agent::begin_drain`]).
    #[allow(clippy::mut_from_ref)]
    unsafe fn link(&self) -> Result<&mut Link<CPUS, OUT>, TransportError> {
        // SAFETY: per the contract, only this context touches the drain's state.
        unsafe { &mut *self.link.get() }
            .first_mut()
            .ok_or(TransportError::Closed)
    }

    /// The board's time, read under the critical section (the record path owns the clock).
    fn now(&self) -> u64 {
        // SAFETY: the clock is only touched inside the critical section.
        critical_section::with(|_| unsafe { (*self.clock.get()).now() })
    }

    /// Runs `f` on a CPU's ring state under the critical section.
    fn with_ring<R>(
        &self,
        cpu: usize,
        f: impl FnOnce(&Ring<BLOCK, BLOCKS>, &mut RingState) -> R,
    ) -> Option<R> {
        let ring = self.rings.get(cpu)?;
        // SAFETY: ring states are only touched inside the critical section.
        Some(critical_section::with(|_| {
            f(ring, unsafe { &mut *ring.state.get() })
        }))
    }

    /// Records accepted and dropped so far, all CPUs.
    fn stats_unlocked(&self) -> (u64, u64) {
        let s = self.stats();
        (s.records, s.dropped)
    }

    fn hello(&self, start_ticks: u64) -> Hello<'static> {
        Hello {
            wire_version: WIRE_VERSION,
            agent_version: AGENT_VERSION,
            board: self.config.get().board,
            soc: self.config.get().soc,
            os: self.config.get().os,
            application: self.config.get().application,
            cpu_count: self.config.cpu_count(),
            tick_rate_hz: self.config.get().tick_rate_hz,
            session_id: self.config.session_id(),
            start_ticks,
            token: self.config.get().token,
        }
    }

    /// Writes the first `n` bytes of a control frame built in `out` (on the drain's stack).
    fn write_out<T: Transport>(
        &self,
        link: &mut Link<CPUS, OUT>,
        transport: &mut T,
        out: &[u8],
        n: usize,
    ) -> Result<(), TransportError> {
        let frame = out.get(..n).ok_or(TransportError::Closed)?;
        transport.write_frame(frame)?;
        link.frames += 1;
        link.bytes += n as u64;
        Ok(())
    }

    #[inline(never)]
    fn send_due<T: Transport>(&self, transport: &mut T, all: bool) -> Result<(), TransportError> {
        if self.mode() == Mode::PostMortem {
            return Ok(());
        }
        // SAFETY: this context holds the drain.
        let link = unsafe { self.link() }?;
        let now = self.now();
        let frames_before = link.frames;
        let restart = critical_section::with(|_| {
            // SAFETY: `shared` is only touched inside the critical section.
            let shared = unsafe { &mut *self.shared.get() };
            core::mem::replace(&mut shared.restart, false)
        });
        if restart
            || (link.hello_sent
                && self.config.get().hello_every_ticks > 0
                && now.saturating_sub(link.last_hello_ticks) >= self.config.get().hello_every_ticks)
        {
            // The same session announced again (same id), with its whole dictionary.
            link.hello_sent = false;
            link.producers_sent = 0;
            link.types_sent = 0;
        }
        if !link.hello_sent {
            let mut out = [0u8; OUT];
            let n = encode::encode_hello(
                &mut out,
                &self.hello(self.config.start_ticks(self.session_start_ticks)),
            )
            .map_err(|_| TransportError::Closed)?;
            self.write_out(link, transport, &out, n)?;
            link.hello_sent = true;
            link.last_hello_ticks = now;
            link.last_frame_ticks = now;
        }
        self.send_dictionary(link, transport)?;
        let sent = (0..usize::from(self.config.cpu_count()).min(CPUS))
            .try_for_each(|cpu| self.send_ring(link, transport, cpu, now, all, None));
        if link.frames != frames_before {
            // The time of this poll stands for its frames' (the clock is read once per poll).
            link.last_frame_ticks = now;
        }
        sent?;
        if link.frames == frames_before
            && now.saturating_sub(link.last_frame_ticks) >= self.config.get().heartbeat_ticks
        {
            let (records, dropped) = self.stats_unlocked();
            let hb = Heartbeat {
                ticks: now,
                records,
                dropped,
            };
            let mut out = [0u8; OUT];
            let n = encode::encode_heartbeat(&mut out, &hb).map_err(|_| TransportError::Closed)?;
            self.write_out(link, transport, &out, n)?;
            link.last_frame_ticks = now;
        }
        Ok(())
    }

    #[inline(never)]
    fn send_dictionary<T: Transport>(
        &self,
        link: &mut Link<CPUS, OUT>,
        transport: &mut T,
    ) -> Result<(), TransportError> {
        // One entry per frame keeps the buffer bound simple; dictionaries are small and sent once.
        let (in_flash, registered): (&[ProducerDef<'static>], &[ProducerDef<'static>]) =
            match self.producers.first() {
                Some(p) => (p.in_flash, &p.registered),
                None => (&[], &[]),
            };
        let static_types = self.static_types.len();
        while let Some(p) = link
            .producers_sent
            .checked_sub(in_flash.len())
            .map_or(in_flash.get(link.producers_sent), |i| registered.get(i))
        {
            let mut out = [0u8; OUT];
            let n = encode::encode_dictionary(&mut out, &[DictEntry::Producer(*p)])
                .map_err(|_| TransportError::Closed)?;
            self.write_out(link, transport, &out, n)?;
            link.producers_sent += 1;
        }
        while let Some(t) = link
            .types_sent
            .checked_sub(static_types)
            .map_or(self.static_types.get(link.types_sent), |i| {
                self.types.get(i)
            })
        {
            let mut out = [0u8; OUT];
            let n = encode::encode_dictionary(&mut out, &[DictEntry::EventType(*t)])
                .map_err(|_| TransportError::Closed)?;
            self.write_out(link, transport, &out, n)?;
            link.types_sent += 1;
        }
        Ok(())
    }

    /// Sends a CPU's closed blocks, oldest first (and the open one when it is due: older than the flush
    /// latency, or `all`), each after the `Loss` frame of the records dropped before it. With `until`
    /// (a dump), only blocks of records before that sequence number, and no `Loss` for what precedes the
    /// window.
    #[inline(never)]
    fn send_ring<T: Transport>(
        &self,
        link: &mut Link<CPUS, OUT>,
        transport: &mut T,
        cpu: usize,
        now: u64,
        all: bool,
        until: Option<u64>,
    ) -> Result<(), TransportError> {
        let Some(ring) = self.rings.get(cpu) else {
            return Ok(());
        };
        loop {
            let latency = self.config.get().flush_latency_ticks;
            let pending = link.claimed.get(cpu).copied().flatten();
            let claim = match pending {
                Some(c) => Ok(c),
                None => critical_section::with(|_| {
                    // SAFETY: ring states are only touched inside the critical section.
                    let s = unsafe { &mut *ring.state.get() };
                    if until.is_none()
                        && s.closed == 0
                        && s.open()
                        && (all || now.saturating_sub(open_base_ticks(ring, s)) >= latency)
                    {
                        close_open::<BLOCK, BLOCKS>(ring, s);
                    }
                    if s.closed == 0 {
                        return Err((s.open(), s.next()));
                    }
                    let slot = s.oldest;
                    // SAFETY: an unclaimed closed block's head holds its numbers, written when it
                    // closed.
                    let meta = ring
                        .blocks
                        .get(slot)
                        .map(|b| BlockMeta::read(unsafe { &*b.get() }))
                        .unwrap_or_default();
                    if until.is_some_and(|u| meta.first_seq >= u) {
                        return Err((true, meta.first_seq));
                    }
                    s.in_flight = true;
                    Ok(Claim {
                        slot,
                        meta,
                        frame: None,
                    })
                }),
            };
            let sent = link.sent_seq.get(cpu).copied().unwrap_or(0);
            let claim = match claim {
                Ok(c) => c,
                Err((open, next)) => {
                    // Records dropped after the last block sent and before the next block (none yet,
                    // or past a dump's window): a loss, once no open block can still hold them.
                    let end = until.unwrap_or(next);
                    if (!open || until.is_some()) && end > sent {
                        self.send_loss(link, transport, cpu, sent, end - sent)?;
                        if let Some(s) = link.sent_seq.get_mut(cpu) {
                            *s = end;
                        }
                    }
                    return Ok(());
                }
            };
            if let Some(c) = link.claimed.get_mut(cpu) {
                *c = Some(claim);
            }
            if claim.meta.first_seq > sent {
                self.send_loss(link, transport, cpu, sent, claim.meta.first_seq - sent)?;
                if let Some(s) = link.sent_seq.get_mut(cpu) {
                    *s = claim.meta.first_seq;
                }
            }
            self.send_block(link, transport, cpu, ring)?;
            critical_section::with(|_| {
                // SAFETY: ring states are only touched inside the critical section.
                let s = unsafe { &mut *ring.state.get() };
                s.in_flight = false;
                s.oldest = (s.oldest + 1) % BLOCKS;
                s.closed -= 1;
            });
            if let Some(c) = link.claimed.get_mut(cpu) {
                *c = None;
            }
            if let Some(s) = link.sent_seq.get_mut(cpu) {
                *s = claim.meta.first_seq + u64::from(claim.meta.count);
            }
        }
    }

    fn send_loss<T: Transport>(
        &self,
        link: &mut Link<CPUS, OUT>,
        transport: &mut T,
        cpu: usize,
        first_seq: u64,
        count: u64,
    ) -> Result<(), TransportError> {
        let frame = Loss {
            cpu: cpu as u16,
            first_seq,
            count,
        };
        let mut out = [0u8; OUT];
        let n = encode::encode_loss(&mut out, &frame).map_err(|_| TransportError::Closed)?;
        self.write_out(link, transport, &out, n)
    }

    /// Frames the CPU's claimed block where it lies (once: a frame the transport refused stays framed)
    /// and writes it.
    #[inline(never)]
    fn send_block<T: Transport>(
        &self,
        link: &mut Link<CPUS, OUT>,
        transport: &mut T,
        cpu: usize,
        ring: &Ring<BLOCK, BLOCKS>,
    ) -> Result<(), TransportError> {
        let Some(Some(claim)) = link.claimed.get_mut(cpu) else {
            return Ok(());
        };
        let Some(cell) = ring.blocks.get(claim.slot) else {
            return Ok(());
        };
        // SAFETY: the block is claimed (`in_flight`): the record path neither writes nor overwrites it
        // until the drain gives it back, and only this context holds the drain.
        let block = unsafe { &mut *cell.get() };
        let (start, end) = match claim.frame {
            Some(range) => range,
            None => {
                let range = frame_block(block, cpu, &claim.meta, transport)
                    .map_err(|_| TransportError::Closed)?;
                claim.frame = Some(range);
                range
            }
        };
        let frame = block.get(start..end).ok_or(TransportError::Closed)?;
        transport.write_frame(frame)?;
        link.frames += 1;
        link.bytes += (end - start) as u64;
        Ok(())
    }
}

/// Closes a ring's open block: its numbers go into its head, it joins the closed blocks.
fn close_open<const BLOCK: usize, const BLOCKS: usize>(
    ring: &Ring<BLOCK, BLOCKS>,
    s: &mut RingState,
) {
    if !s.open() {
        return;
    }
    let slot = (s.oldest + s.closed) % BLOCKS;
    if let Some(b) = ring.blocks.get(slot) {
        let meta = BlockMeta {
            first_seq: s.next_seq,
            base_ticks: open_base_ticks(ring, s),
            count: s.count,
            // `wr` is within the open block: `slot * BLOCK + HEAD ..= slot * BLOCK + CAPACITY_END`.
            end: (s.wr as usize).saturating_sub(slot * BLOCK).max(HEAD) as u32,
        };
        // SAFETY: the open block is the record path's, inside the critical section (this runs there).
        meta.write(unsafe { &mut *b.get() });
    }
    s.wr = 0;
    s.limit = 0;
    s.closed += 1;
    s.next_seq += u64::from(s.count);
}

/// The open block's base time, from its head (inside the critical section).
fn open_base_ticks<const BLOCK: usize, const BLOCKS: usize>(
    ring: &Ring<BLOCK, BLOCKS>,
    s: &RingState,
) -> u64 {
    let slot = (s.oldest + s.closed) % BLOCKS;
    ring.blocks.get(slot).map_or(0, |b| {
        // SAFETY: the open block's head is written only by the block switch, inside the critical
        // section, where this runs too; the record path writes after the head.
        u64::from_le_bytes(get(unsafe { &*b.get() }, block_meta::BASE_TICKS))
    })
}

/// Probe mode, inside the critical section: frees the blocks the host released
/// ([`take_released`]), then closes the open block (unless `keep_empty` and it holds no record) and
/// publishes it to the host (its `closed` count advanced after the block's numbers are in its head).
/// One copy out of line for the block switch, [`Agent::probe_close_blocks`] and
/// [`Agent::probe_finish`].
#[inline(never)]
fn probe_settle<const BLOCK: usize, const BLOCKS: usize>(
    ring: &Ring<BLOCK, BLOCKS>,
    s: &mut RingState,
    p: &ProbeRing,
    keep_empty: bool,
) {
    take_released::<BLOCKS>(p, s);
    if s.open() && !(keep_empty && s.count == 0) {
        close_open::<BLOCK, BLOCKS>(ring, s);
        p.publish_closed();
    }
}

/// Probe mode: the blocks the host has released since are free again (the oldest closed ones).
fn take_released<const BLOCKS: usize>(p: &ProbeRing, s: &mut RingState) {
    let waiting = p.waiting() as usize;
    // A host can only release blocks the board closed: any other value is ignored.
    if waiting < s.closed {
        let freed = s.closed - waiting;
        s.oldest = (s.oldest + freed) % BLOCKS;
        s.closed = waiting;
    }
}

/// Builds a block's `Events` frame in place: the header just before its records, then the CRC and COBS.
/// Returns where the frame starts and ends in the block.
#[inline(never)]
fn frame_block<T: Transport>(
    block: &mut [u8],
    cpu: usize,
    meta: &BlockMeta,
    transport: &mut T,
) -> Result<(usize, usize), encode::EncodeError> {
    let mut end = (meta.end as usize).min(block.len()).max(HEAD);
    let mut flags = 0;
    let records = block.get(HEAD..end).unwrap_or_default();
    if let Some(section) = transport.compress(records)
        && section.len() < records.len()
        && let Some(dst) = block.get_mut(HEAD..HEAD + section.len())
    {
        // Incompressible data would only grow: only a smaller section replaces the records.
        dst.copy_from_slice(section);
        end = HEAD + section.len();
        flags = EVENTS_FLAG_ZSTD;
    }
    let header = EventsHeader {
        flags,
        cpu: cpu as u16,
        first_seq: meta.first_seq,
        base_ticks: meta.base_ticks,
        count: meta.count,
    };
    // The header goes right before the records, written in place (no copy). Kind 0A: checked with
    // Fletcher-32, a few instructions per byte on the board (SPEC.md §4).
    let n = encode::events_header_len(&header).min(HEAD - 1);
    let start = HEAD - n - 1;
    encode::events_header_for(
        block
            .get_mut(HEAD - n..HEAD)
            .ok_or(encode::EncodeError::BufferTooSmall)?,
        &header,
        FrameKind::EventsFletcher,
    )?;
    let frame = block
        .get_mut(start..)
        .ok_or(encode::EncodeError::BufferTooSmall)?;
    let len = encode::seal_in_place_with(frame, end - start - 1, FrameCheck::Fletcher32)?;
    Ok((start, start + len))
}

/// The parameter types of every built-in type, by id − 1, packed for [`Agent::record`]: the count in
/// bits 0–2, then each parameter's `ParamType` in 3 bits. A table of 64 bytes in flash, where a
/// `match` over the types' definitions took code and their names.
static BUILTIN_PARAMS: [u32; BUILTINS.len()] = {
    let mut packed = [0; BUILTINS.len()];
    let mut i = 0;
    while i < BUILTINS.len() {
        let params = BUILTINS[i].def().params;
        assert!(params.len() <= 7 && 3 + 3 * params.len() <= 32);
        let mut word = params.len() as u32;
        let mut j = 0;
        while j < params.len() {
            word |= (params[j].ty as u32) << (3 + 3 * j);
            j += 1;
        }
        packed[i] = word;
        i += 1;
    }
    packed
};

/// One value of a record of any declared type ([`Agent::record`]): the integers and the address delta
/// share one copy of the varint's fast cases (flash), inlined in the record's masked section (no call
/// there: the longest masked section is a custom record's).
#[inline(always)]
fn write_value(c: &mut Cursor, ring: &mut RingState, v: &ParamValue<'_>) {
    let number = match *v {
        ParamValue::Unsigned(x) => x,
        ParamValue::Signed(x) => socscope_wire::varint::zigzag(x),
        ParamValue::Address(a) => {
            // The same bytes as `address` writes.
            let d = a.wrapping_sub(ring.last_address);
            ring.last_address = a;
            socscope_wire::varint::zigzag(d as i64)
        }
        ParamValue::Float(x) => return c.bytes(&x.to_le_bytes()),
        ParamValue::Str(s) => {
            c.u32(s.len() as u32);
            return c.bytes(s.as_bytes());
        }
    };
    // One copy of the fast cases (it runs with interrupts masked).
    c.u64(number);
}

/// An address parameter: the zigzagged difference from the previous address of the block.
#[inline(always)]
fn address(c: &mut Cursor, ring: &mut RingState, a: u64) {
    let d = a.wrapping_sub(ring.last_address);
    ring.last_address = a;
    let (lo, hi) = (d as u32, (d >> 32) as u32);
    let sign = ((lo as i32) >> 31) as u32;
    if hi == sign {
        // The delta fits 32 bits signed (the usual case): its zigzag in 32-bit arithmetic.
        c.u32((lo << 1) ^ sign);
    } else {
        // Outside 32 bits signed, the zigzag is 2^32 or more: the wide varint, with no test of its
        // high half (`Cursor::u64` would inline the short cases once more, which never apply).
        c.reserve(V64);
        // SAFETY: as in `Cursor::u64`: the record reserved the varint's longest encoding from here.
        c.at = unsafe { address_wide(c.at, d) };
    }
}

/// The built-in record kinds, once for the shared agent (`&self`, any context, each record under the
/// platform's critical section) and once for [`Exclusive`] (`&mut`, no critical section). Each kind
/// hands its values to the shared record path; on the shared agent each kind is a few instructions (not
/// inlined into its callers, so flash grows with the kinds used, not with the call sites).
macro_rules! record_kinds {
    ($( $(#[$doc:meta])* $name:ident ( $($arg:ident : $t:ty),* ) =>
        $path:ident $([$copy:ident])? ($kind:ident, $shape:ident $(, $v:expr)*); )*) => {
        impl<
            C: Clock,
            const CPUS: usize,
            const BLOCK: usize,
            const BLOCKS: usize,
            const OUT: usize,
            const PRODUCERS: usize,
            const TYPES: usize,
            const DRAIN: usize,
            S: ConfigStore,
        > Agent<C, CPUS, BLOCK, BLOCKS, OUT, PRODUCERS, TYPES, DRAIN, S>
        {
            $(
                $(#[$doc])*
                #[inline]
                pub fn $name(&self, cpu: u16 $(, $arg: $t)*) -> Result<Recorded, AgentError> {
                    self.$path::<Masked $(, $copy)?>(record_head(cpu, Builtin::$kind, $shape) $(, $v)*)
                }
            )*
        }

        impl<
            C: Clock,
            const CPUS: usize,
            const BLOCK: usize,
            const BLOCKS: usize,
            const OUT: usize,
            const PRODUCERS: usize,
            const TYPES: usize,
            const DRAIN: usize,
            S: ConfigStore,
        > Exclusive<'_, C, CPUS, BLOCK, BLOCKS, OUT, PRODUCERS, TYPES, DRAIN, S>
        {
            $(
                $(#[$doc])*
                #[inline]
                pub fn $name(&mut self, cpu: u16 $(, $arg: $t)*) -> Result<Recorded, AgentError> {
                    self.agent.$path::<Borrowed $(, $copy)?>(record_head(cpu, Builtin::$kind, $shape) $(, $v)*)
                }
            )*
        }
    };
}

record_kinds! {
    /// `C`: the running thread on `cpu` changes from `prev` to `next`.
    context_switch(prev: u32, next: u32) =>
        push_small[SHARED](ContextSwitch, TWO_U32, prev, next);
    /// `I`: interrupt `irq` starts.
    irq_entry(irq: u32) => push_small[SHARED](IrqEntry, ONE_U32, irq, 0);
    /// `i`: the current interrupt ends.
    irq_exit() => push_small[SHARED](IrqExit, NO_VALUE_SHARED, 0, 0);
    /// `S`: a soft IRQ handler starts.
    softirq_entry(handler: u64) => push_small[ONE_ADDRESS](SoftIrqEntry, NO_VALUE, handler as u32, (handler >> 32) as u32);
    /// `s`: the current soft IRQ ends.
    softirq_exit() => push_small[SHARED](SoftIrqExit, NO_VALUE_SHARED, 0, 0);
    /// `E`: system call `nr` starts with arguments `args`.
    syscall_entry(nr: u32, args: [u64; 4]) =>
        push_syscall(SyscallEntry, NO_VALUE, nr, &args);
    /// `X`: system call `nr` returns `ret`.
    syscall_exit(nr: u32, ret: i64) =>
        push_values(SyscallExit, NO_VALUE, &[u64::from(nr), socscope_wire::varint::zigzag(ret)]);
    /// `W`: the running thread wakes thread `pid`.
    wakeup(pid: u32) => push_small[SHARED](Wakeup, ONE_U32, pid, 0);
    /// `K`: a text marker.
    marker(text: &str) => push_string(Marker, NO_VALUE, None, text);
    /// `KM`: a numbered mark.
    mark(id: u64) => push_small[SHARED](Mark, ONE_U64, id as u32, (id >> 32) as u32);
    /// `U`: a user function at `address` starts.
    user_entry(address: u64) => push_small[ONE_ADDRESS](UserEntry, NO_VALUE, address as u32, (address >> 32) as u32);
    /// `u`: the current user function returns.
    user_exit() => push_small[SHARED](UserExit, NO_VALUE_SHARED, 0, 0);
    /// `Kc`: thread `pid` named `name` is created.
    thread_create(pid: u32, name: &str) => push_string(ThreadCreate, NO_VALUE, Some(pid), name);
    /// `KX`: thread `pid` exits.
    thread_exit(pid: u32) => push_small[SHARED](ThreadExit, ONE_U32, pid, 0);
    /// `MM`: `size` bytes allocated at `ptr`.
    kmalloc(size: u64, ptr: u64) => push_values(Kmalloc, ONE_ADDRESS, &[size, ptr]);
    /// `MF`: the allocation at `ptr` is freed.
    kfree(ptr: u64) => push_small[ONE_ADDRESS](Kfree, NO_VALUE, ptr as u32, (ptr >> 32) as u32);
}

/// The agent borrowed by one context ([`Agent::exclusive`]): the same record methods with no critical
/// section, since the mutable borrow keeps every other context out. A host program or simulator that
/// owns its agent records through it at the cost of the encoding alone.
pub struct Exclusive<
    'a,
    C: Clock,
    const CPUS: usize,
    const BLOCK: usize,
    const BLOCKS: usize,
    const OUT: usize,
    const PRODUCERS: usize,
    const TYPES: usize,
    const DRAIN: usize = 1,
    S: ConfigStore = Config,
> {
    agent: &'a mut Agent<C, CPUS, BLOCK, BLOCKS, OUT, PRODUCERS, TYPES, DRAIN, S>,
}

impl<
    C: Clock,
    const CPUS: usize,
    const BLOCK: usize,
    const BLOCKS: usize,
    const OUT: usize,
    const PRODUCERS: usize,
    const TYPES: usize,
    const DRAIN: usize,
    S: ConfigStore,
> Exclusive<'_, C, CPUS, BLOCK, BLOCKS, OUT, PRODUCERS, TYPES, DRAIN, S>
{
    /// Records an event of any declared type, checking the values against the type's parameters.
    pub fn record(
        &mut self,
        cpu: u16,
        type_id: u16,
        values: &[ParamValue<'_>],
    ) -> Result<Recorded, AgentError> {
        self.agent.record_via::<Borrowed>(cpu, type_id, values)
    }
}

impl<const CPUS: usize, const OUT: usize> Link<CPUS, OUT> {
    /// Nothing sent yet.
    const NEW: Self = Self {
        hello_sent: false,
        producers_sent: 0,
        types_sent: 0,
        last_frame_ticks: 0,
        last_hello_ticks: 0,
        totals_sent: 0,
        sent_seq: [0; CPUS],
        claimed: [None; CPUS],
        dump: DumpState {
            active: false,
            until: [0; CPUS],
            first: [0; CPUS],
            window_sent: [false; CPUS],
            overwritten: [0; CPUS],
            oldest_ticks: 0,
            records: 0,
            dropped: 0,
            bye_ticks: 0,
        },
        frames: 0,
        bytes: 0,
        _out: core::marker::PhantomData,
    };

    fn window_sent(&self, cpu: usize) -> Option<&bool> {
        self.dump.window_sent.get(cpu)
    }
}

/// Cuts a name to `max` bytes at a character boundary.
fn truncate_name(name: &'static str, max: usize) -> &'static str {
    let mut end = name.len().min(max);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    name.get(..end).unwrap_or_default()
}
