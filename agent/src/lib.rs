//! The on-board recorder: it encodes KPTrace-like records into per-CPU rings of wire blocks without
//! allocating, blocking or panicking, counts exactly what it has to drop, and streams frames through any
//! transport.
//!
//! Start here: [`Agent`] (record with its typed methods or [`Agent::record`], then call [`Agent::poll`] from
//! an idle loop or a task), the [`Clock`] and [`Transport`] traits a port implements, and [`Config`].
//!
//! The agent is a plain `&mut self` object: on a multi-core or interrupt-driven board, wrap it in the
//! platform's critical section (per CPU rings make contention rare).
#![no_std]

use heapless::Vec;
use socscope_wire::dict::{Builtin, EventTypeDef, FIRST_CUSTOM_TYPE, ProducerDef};
use socscope_wire::encode::{self, RecordEncoder};
use socscope_wire::frame::{
    Bye, CpuTotal, DictEntry, EVENTS_FLAG_ZSTD, EventsHeader, Heartbeat, Hello, Loss, ParamValue,
};
use socscope_wire::{MAX_NAME_LEN, MAX_PARAMS, WIRE_VERSION};

/// The agent's version, sent in `Hello`.
pub const AGENT_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The longest `Events` header (kind byte, flags, CPU, sequence, base, count) plus the CRC.
pub const EVENTS_OVERHEAD: usize = 1 + 1 + 3 + 10 + 10 + 5 + 4;

/// The output buffer an agent with `block`-byte blocks needs.
pub const fn frame_buffer_len(block: usize) -> usize {
    encode::max_encoded_len(block + EVENTS_OVERHEAD + 16)
}

/// The board's time source.
pub trait Clock {
    /// The current time in ticks of the rate given in [`Config::tick_hz`]; should not go backwards.
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
    /// Not now: try again later. The frame stays queued.
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
}

/// What happened to one record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recorded {
    /// In a ring, waiting to be sent.
    Stored,
    /// Dropped because the CPU's ring is full; counted and reported in the next `Loss` frame.
    Dropped,
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
    pub tick_hz: u64,
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

/// Counters since the session started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AgentStats {
    /// Records accepted into the rings.
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
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct LossRange {
    first_seq: u64,
    count: u64,
}

impl LossRange {
    fn extend(range: &mut Option<LossRange>, seq: u64) {
        match range {
            Some(r) => r.count += 1,
            None => {
                *range = Some(LossRange {
                    first_seq: seq,
                    count: 1,
                })
            }
        }
    }
}

#[derive(Clone, Copy)]
struct Block<const N: usize> {
    bytes: [u8; N],
    len: usize,
    first_seq: u64,
    base_ticks: u64,
    count: u32,
    encoder: RecordEncoder,
    loss_before: Option<LossRange>,
}

impl<const N: usize> Block<N> {
    const EMPTY: Self = Self {
        bytes: [0; N],
        len: 0,
        first_seq: 0,
        base_ticks: 0,
        count: 0,
        encoder: RecordEncoder::new(0),
        loss_before: None,
    };
}

/// One CPU's ring of blocks: `ready` closed blocks from `head`, then possibly one open block being filled.
struct CpuRing<const N: usize, const B: usize> {
    blocks: [Block<N>; B],
    head: usize,
    ready: usize,
    open: bool,
    next_seq: u64,
    last_ticks: u64,
    pending_loss: Option<LossRange>,
}

impl<const N: usize, const B: usize> CpuRing<N, B> {
    const EMPTY: Self = Self {
        blocks: [Block::EMPTY; B],
        head: 0,
        ready: 0,
        open: false,
        next_seq: 0,
        last_ticks: 0,
        pending_loss: None,
    };

    fn open_index(&self) -> usize {
        (self.head + self.ready) % B
    }

    fn close_open(&mut self) {
        if self.open {
            self.open = false;
            self.ready += 1;
        }
    }
}

/// The recorder. `CPUS` rings of `BLOCKS` blocks of `BLOCK` bytes; `OUT` is the frame buffer (at least
/// [`frame_buffer_len`]`(BLOCK)`); up to `PRODUCERS` declared producers and `TYPES` custom event types.
///
/// On a host, put it in a `Box`: it holds all its buffers inline.
pub struct Agent<
    C: Clock,
    const CPUS: usize,
    const BLOCK: usize,
    const BLOCKS: usize,
    const OUT: usize,
    const PRODUCERS: usize,
    const TYPES: usize,
> {
    clock: C,
    config: Config,
    rings: [CpuRing<BLOCK, BLOCKS>; CPUS],
    producers: Vec<ProducerDef<'static>, PRODUCERS>,
    types: Vec<EventTypeDef<'static>, TYPES>,
    hello_sent: bool,
    producers_sent: usize,
    types_sent: usize,
    last_frame_ticks: u64,
    last_hello_ticks: u64,
    /// The board clock when the session's first `Hello` went out: every repeat of it says the same, so
    /// a collector that reads only a later one puts every record at the same time (issue 27, row 12).
    session_start_ticks: Option<u64>,
    /// `CpuTotal` frames [`Agent::finish`] has written so far (a transport that takes one frame per
    /// call finishes over several calls).
    totals_sent: usize,
    stats: AgentStats,
    out: [u8; OUT],
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
> Agent<C, CPUS, BLOCK, BLOCKS, OUT, PRODUCERS, TYPES>
{
    const SIZES_OK: () = {
        assert!(CPUS > 0 && BLOCKS > 0 && BLOCK >= 32);
        assert!(OUT >= frame_buffer_len(BLOCK));
        assert!(BLOCK <= u32::MAX as usize);
    };

    /// A new agent. Nothing is sent until [`Agent::poll`].
    pub fn new(clock: C, config: Config) -> Self {
        let () = Self::SIZES_OK;
        let mut config = config;
        config.board = truncate_name(config.board);
        config.soc = truncate_name(config.soc);
        config.os = truncate_name(config.os);
        config.application = truncate_name(config.application);
        config.token = truncate_name(config.token);
        config.cpu_count = config
            .cpu_count
            .clamp(1, CPUS.min(u16::MAX as usize) as u16);
        Self {
            clock,
            config,
            rings: [const { CpuRing::EMPTY }; CPUS],
            producers: Vec::new(),
            types: Vec::new(),
            hello_sent: false,
            producers_sent: 0,
            types_sent: 0,
            last_frame_ticks: 0,
            last_hello_ticks: 0,
            session_start_ticks: None,
            totals_sent: 0,
            stats: AgentStats::default(),
            out: [0; OUT],
        }
    }

    /// The configuration in force (with `cpu_count` clamped to `CPUS`).
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Counters since the start.
    pub fn stats(&self) -> AgentStats {
        self.stats
    }

    /// The clock, e.g. for a simulator that drives it.
    pub fn clock_mut(&mut self) -> &mut C {
        &mut self.clock
    }

    /// Declares a producer; it goes out in the next `Dictionary` frame.
    pub fn register_producer(&mut self, def: ProducerDef<'static>) -> Result<(), AgentError> {
        if def.name.len() > MAX_NAME_LEN {
            return Err(AgentError::NameTooLong);
        }
        self.producers
            .push(def)
            .map_err(|_| AgentError::DictionaryFull)
    }

    /// Declares a custom event type (id ≥ [`FIRST_CUSTOM_TYPE`]); it goes out in the next `Dictionary` frame.
    pub fn register_type(&mut self, def: EventTypeDef<'static>) -> Result<(), AgentError> {
        if def.id < FIRST_CUSTOM_TYPE {
            return Err(AgentError::ReservedTypeId);
        }
        if def.params.len() > MAX_PARAMS {
            return Err(AgentError::TooManyParams);
        }
        if def.name.len() > MAX_NAME_LEN || def.params.iter().any(|p| p.name.len() > MAX_NAME_LEN) {
            return Err(AgentError::NameTooLong);
        }
        if self.types.iter().any(|t| t.id == def.id) {
            return Err(AgentError::DuplicateType);
        }
        self.types.push(def).map_err(|_| AgentError::DictionaryFull)
    }

    /// Records an event of any declared type, checking the values against the type's parameters.
    pub fn record(
        &mut self,
        cpu: u16,
        type_id: u16,
        values: &[ParamValue<'_>],
    ) -> Result<Recorded, AgentError> {
        let params = match Builtin::from_id(type_id) {
            Some(b) => b.def().params,
            None => match self.types.iter().find(|t| t.id == type_id) {
                Some(t) => t.params,
                None => {
                    self.stats.rejected += 1;
                    return Err(AgentError::UnknownType);
                }
            },
        };
        let matches = params.len() == values.len()
            && params
                .iter()
                .zip(values)
                .all(|(p, v)| p.ty == v.param_type());
        if !matches {
            self.stats.rejected += 1;
            return Err(AgentError::ParamMismatch);
        }
        self.push(cpu, type_id, values)
    }

    /// `C`: the running thread on `cpu` changes from `prev` to `next`.
    #[inline]
    pub fn context_switch(
        &mut self,
        cpu: u16,
        prev: u32,
        next: u32,
    ) -> Result<Recorded, AgentError> {
        self.push(
            cpu,
            Builtin::ContextSwitch.id(),
            &[
                ParamValue::Unsigned(prev.into()),
                ParamValue::Unsigned(next.into()),
            ],
        )
    }

    /// `I`: interrupt `irq` starts.
    #[inline]
    pub fn irq_entry(&mut self, cpu: u16, irq: u32) -> Result<Recorded, AgentError> {
        self.push(
            cpu,
            Builtin::IrqEntry.id(),
            &[ParamValue::Unsigned(irq.into())],
        )
    }

    /// `i`: the current interrupt ends.
    #[inline]
    pub fn irq_exit(&mut self, cpu: u16) -> Result<Recorded, AgentError> {
        self.push(cpu, Builtin::IrqExit.id(), &[])
    }

    /// `S`: a soft IRQ handler starts.
    #[inline]
    pub fn softirq_entry(&mut self, cpu: u16, handler: u64) -> Result<Recorded, AgentError> {
        self.push(
            cpu,
            Builtin::SoftIrqEntry.id(),
            &[ParamValue::Address(handler)],
        )
    }

    /// `s`: the current soft IRQ ends.
    #[inline]
    pub fn softirq_exit(&mut self, cpu: u16) -> Result<Recorded, AgentError> {
        self.push(cpu, Builtin::SoftIrqExit.id(), &[])
    }

    /// `E`: system call `nr` starts with arguments `args`.
    #[inline]
    pub fn syscall_entry(
        &mut self,
        cpu: u16,
        nr: u32,
        args: [u64; 4],
    ) -> Result<Recorded, AgentError> {
        self.push(
            cpu,
            Builtin::SyscallEntry.id(),
            &[
                ParamValue::Unsigned(nr.into()),
                ParamValue::Unsigned(args[0]),
                ParamValue::Unsigned(args[1]),
                ParamValue::Unsigned(args[2]),
                ParamValue::Unsigned(args[3]),
            ],
        )
    }

    /// `X`: system call `nr` returns `ret`.
    #[inline]
    pub fn syscall_exit(&mut self, cpu: u16, nr: u32, ret: i64) -> Result<Recorded, AgentError> {
        self.push(
            cpu,
            Builtin::SyscallExit.id(),
            &[ParamValue::Unsigned(nr.into()), ParamValue::Signed(ret)],
        )
    }

    /// `W`: the running thread wakes thread `pid`.
    #[inline]
    pub fn wakeup(&mut self, cpu: u16, pid: u32) -> Result<Recorded, AgentError> {
        self.push(
            cpu,
            Builtin::Wakeup.id(),
            &[ParamValue::Unsigned(pid.into())],
        )
    }

    /// `K`: a text marker.
    #[inline]
    pub fn marker(&mut self, cpu: u16, text: &str) -> Result<Recorded, AgentError> {
        self.push(cpu, Builtin::Marker.id(), &[ParamValue::Str(text)])
    }

    /// `KM`: a numbered mark.
    #[inline]
    pub fn mark(&mut self, cpu: u16, id: u64) -> Result<Recorded, AgentError> {
        self.push(cpu, Builtin::Mark.id(), &[ParamValue::Unsigned(id)])
    }

    /// `U`: a user function at `address` starts.
    #[inline]
    pub fn user_entry(&mut self, cpu: u16, address: u64) -> Result<Recorded, AgentError> {
        self.push(
            cpu,
            Builtin::UserEntry.id(),
            &[ParamValue::Address(address)],
        )
    }

    /// `u`: the current user function returns.
    #[inline]
    pub fn user_exit(&mut self, cpu: u16) -> Result<Recorded, AgentError> {
        self.push(cpu, Builtin::UserExit.id(), &[])
    }

    /// `Kc`: thread `pid` named `name` is created.
    #[inline]
    pub fn thread_create(
        &mut self,
        cpu: u16,
        pid: u32,
        name: &str,
    ) -> Result<Recorded, AgentError> {
        self.push(
            cpu,
            Builtin::ThreadCreate.id(),
            &[ParamValue::Unsigned(pid.into()), ParamValue::Str(name)],
        )
    }

    /// `KX`: thread `pid` exits.
    #[inline]
    pub fn thread_exit(&mut self, cpu: u16, pid: u32) -> Result<Recorded, AgentError> {
        self.push(
            cpu,
            Builtin::ThreadExit.id(),
            &[ParamValue::Unsigned(pid.into())],
        )
    }

    /// `MM`: `size` bytes allocated at `ptr`.
    #[inline]
    pub fn kmalloc(&mut self, cpu: u16, size: u64, ptr: u64) -> Result<Recorded, AgentError> {
        self.push(
            cpu,
            Builtin::Kmalloc.id(),
            &[ParamValue::Unsigned(size), ParamValue::Address(ptr)],
        )
    }

    /// `MF`: the allocation at `ptr` is freed.
    #[inline]
    pub fn kfree(&mut self, cpu: u16, ptr: u64) -> Result<Recorded, AgentError> {
        self.push(cpu, Builtin::Kfree.id(), &[ParamValue::Address(ptr)])
    }

    /// The record path: encode into the CPU's open block, or open the next free one, or drop and count.
    #[inline]
    fn push(
        &mut self,
        cpu: u16,
        type_id: u16,
        values: &[ParamValue<'_>],
    ) -> Result<Recorded, AgentError> {
        if cpu >= self.config.cpu_count {
            self.stats.rejected += 1;
            return Err(AgentError::BadCpu);
        }
        let now = self.clock.now();
        let Some(ring) = self.rings.get_mut(usize::from(cpu)) else {
            self.stats.rejected += 1;
            return Err(AgentError::BadCpu);
        };
        if now < ring.last_ticks {
            self.stats.clock_regressions += 1;
        }
        let ticks = now.max(ring.last_ticks);
        let seq = ring.next_seq;
        if ring.open {
            let i = ring.open_index();
            if let Some(block) = ring.blocks.get_mut(i) {
                let free = block.bytes.get_mut(block.len..).unwrap_or_default();
                if let Ok(n) = block.encoder.encode(free, ticks, type_id, values) {
                    block.len += n;
                    block.count += 1;
                    ring.next_seq = seq.wrapping_add(1);
                    ring.last_ticks = ticks;
                    self.stats.records += 1;
                    return Ok(Recorded::Stored);
                }
            }
            ring.close_open();
        }
        if ring.ready >= BLOCKS {
            LossRange::extend(&mut ring.pending_loss, seq);
            ring.next_seq = seq.wrapping_add(1);
            self.stats.dropped += 1;
            return Ok(Recorded::Dropped);
        }
        let i = ring.open_index();
        let Some(block) = ring.blocks.get_mut(i) else {
            self.stats.rejected += 1;
            return Err(AgentError::RecordTooLarge);
        };
        let mut encoder = RecordEncoder::new(ticks);
        match encoder.encode(&mut block.bytes, ticks, type_id, values) {
            Ok(n) => {
                block.len = n;
                block.count = 1;
                block.first_seq = seq;
                block.base_ticks = ticks;
                block.encoder = encoder;
                block.loss_before = ring.pending_loss.take();
                ring.open = true;
                ring.next_seq = seq.wrapping_add(1);
                ring.last_ticks = ticks;
                self.stats.records += 1;
                Ok(Recorded::Stored)
            }
            Err(_) => {
                self.stats.rejected += 1;
                Err(AgentError::RecordTooLarge)
            }
        }
    }

    /// Sends what is due: `Hello` first, new dictionary entries, full blocks, blocks older than the flush
    /// latency, loss reports, and a `Heartbeat` when idle. Returns `Ok` when everything due was sent;
    /// on `WouldBlock` the rest stays queued for the next call.
    pub fn poll<T: Transport>(&mut self, transport: &mut T) -> Result<(), TransportError> {
        self.send_due(transport, false)
    }

    /// Sends everything queued, partly filled blocks included.
    pub fn flush<T: Transport>(&mut self, transport: &mut T) -> Result<(), TransportError> {
        self.send_due(transport, true)
    }

    /// Flushes everything and ends the session with one `CpuTotal` per CPU the `Hello` announced,
    /// then `Bye`. On `WouldBlock`, call it again: it goes on where it stopped (each `CpuTotal` is
    /// written once).
    pub fn finish<T: Transport>(&mut self, transport: &mut T) -> Result<(), TransportError> {
        self.send_due(transport, true)?;
        let cpus = CPUS.min(usize::from(self.config.cpu_count));
        while self.totals_sent < cpus {
            let cpu = self.totals_sent;
            let (Ok(cpu_id), Some(ring)) = (u16::try_from(cpu), self.rings.get(cpu)) else {
                break;
            };
            let total = CpuTotal {
                cpu: cpu_id,
                sequences: ring.next_seq,
            };
            let n = encode::encode_cpu_total(&mut self.out, &total)
                .map_err(|_| TransportError::Closed)?;
            self.write(transport, n)?;
            self.totals_sent += 1;
        }
        let bye = Bye {
            ticks: self.clock.now(),
            records: self.stats.records,
            dropped: self.stats.dropped,
        };
        let n = encode::encode_bye(&mut self.out, &bye).map_err(|_| TransportError::Closed)?;
        self.write(transport, n)
    }

    /// Re-sends `Hello` and the whole dictionary on the next poll (after the link was re-established).
    pub fn restart_session(&mut self) {
        self.hello_sent = false;
        self.producers_sent = 0;
        self.types_sent = 0;
    }

    fn write<T: Transport>(&mut self, transport: &mut T, n: usize) -> Result<(), TransportError> {
        let frame = self.out.get(..n).ok_or(TransportError::Closed)?;
        transport.write_frame(frame)?;
        self.stats.frames += 1;
        self.stats.bytes += n as u64;
        self.last_frame_ticks = self.clock.now();
        Ok(())
    }

    fn send_due<T: Transport>(
        &mut self,
        transport: &mut T,
        all: bool,
    ) -> Result<(), TransportError> {
        let now = self.clock.now();
        let frames_before = self.stats.frames;
        if self.hello_sent
            && self.config.hello_every_ticks > 0
            && now.saturating_sub(self.last_hello_ticks) >= self.config.hello_every_ticks
        {
            // The same session announced again (same id), with its whole dictionary.
            self.restart_session();
        }
        if !self.hello_sent {
            let hello = Hello {
                wire_version: WIRE_VERSION,
                agent_version: AGENT_VERSION,
                board: self.config.board,
                soc: self.config.soc,
                os: self.config.os,
                application: self.config.application,
                cpu_count: self.config.cpu_count,
                tick_hz: self.config.tick_hz,
                session_id: self.config.session_id,
                start_ticks: *self.session_start_ticks.get_or_insert(now),
                token: self.config.token,
            };
            let n =
                encode::encode_hello(&mut self.out, &hello).map_err(|_| TransportError::Closed)?;
            self.write(transport, n)?;
            self.hello_sent = true;
            self.last_hello_ticks = now;
        }
        self.send_dictionary(transport)?;
        for cpu in 0..usize::from(self.config.cpu_count).min(CPUS) {
            self.send_ring(transport, cpu, now, all)?;
        }
        if self.stats.frames == frames_before
            && now.saturating_sub(self.last_frame_ticks) >= self.config.heartbeat_ticks
        {
            let hb = Heartbeat {
                ticks: now,
                records: self.stats.records,
                dropped: self.stats.dropped,
            };
            let n =
                encode::encode_heartbeat(&mut self.out, &hb).map_err(|_| TransportError::Closed)?;
            self.write(transport, n)?;
        }
        Ok(())
    }

    fn send_dictionary<T: Transport>(&mut self, transport: &mut T) -> Result<(), TransportError> {
        // One entry per frame keeps the buffer bound simple; dictionaries are small and sent once.
        while self.producers_sent < self.producers.len() {
            let Some(p) = self.producers.get(self.producers_sent) else {
                break;
            };
            let n = encode::encode_dictionary(&mut self.out, &[DictEntry::Producer(*p)])
                .map_err(|_| TransportError::Closed)?;
            self.write(transport, n)?;
            self.producers_sent += 1;
        }
        while self.types_sent < self.types.len() {
            let Some(t) = self.types.get(self.types_sent) else {
                break;
            };
            let n = encode::encode_dictionary(&mut self.out, &[DictEntry::EventType(*t)])
                .map_err(|_| TransportError::Closed)?;
            self.write(transport, n)?;
            self.types_sent += 1;
        }
        Ok(())
    }

    fn send_ring<T: Transport>(
        &mut self,
        transport: &mut T,
        cpu: usize,
        now: u64,
        all: bool,
    ) -> Result<(), TransportError> {
        loop {
            let Some(ring) = self.rings.get_mut(cpu) else {
                return Ok(());
            };
            if ring.ready == 0 && ring.open {
                let i = ring.open_index();
                let age = ring
                    .blocks
                    .get(i)
                    .map_or(0, |b| now.saturating_sub(b.base_ticks));
                if all || age >= self.config.flush_latency_ticks {
                    ring.close_open();
                }
            }
            if ring.ready == 0 {
                if !ring.open
                    && let Some(loss) = ring.pending_loss
                {
                    self.send_loss(transport, cpu, loss)?;
                    if let Some(ring) = self.rings.get_mut(cpu) {
                        ring.pending_loss = None;
                    }
                }
                return Ok(());
            }
            let head = ring.head;
            let Some(block) = ring.blocks.get(head) else {
                return Ok(());
            };
            if let Some(loss) = block.loss_before {
                self.send_loss(transport, cpu, loss)?;
                if let Some(b) = self.rings.get_mut(cpu).and_then(|r| r.blocks.get_mut(head)) {
                    b.loss_before = None;
                }
            }
            self.send_block(transport, cpu, head)?;
            if let Some(ring) = self.rings.get_mut(cpu) {
                ring.head = (ring.head + 1) % BLOCKS;
                ring.ready -= 1;
            }
        }
    }

    fn send_loss<T: Transport>(
        &mut self,
        transport: &mut T,
        cpu: usize,
        loss: LossRange,
    ) -> Result<(), TransportError> {
        let frame = Loss {
            cpu: cpu as u16,
            first_seq: loss.first_seq,
            count: loss.count,
        };
        let n = encode::encode_loss(&mut self.out, &frame).map_err(|_| TransportError::Closed)?;
        self.write(transport, n)
    }

    fn send_block<T: Transport>(
        &mut self,
        transport: &mut T,
        cpu: usize,
        index: usize,
    ) -> Result<(), TransportError> {
        let Some(block) = self.rings.get(cpu).and_then(|r| r.blocks.get(index)) else {
            return Ok(());
        };
        let records = block.bytes.get(..block.len).unwrap_or_default();
        let mut header = EventsHeader {
            flags: 0,
            cpu: cpu as u16,
            first_seq: block.first_seq,
            base_ticks: block.base_ticks,
            count: block.count,
        };
        let n = match transport.compress(records) {
            // Incompressible data would only grow: send it as it is.
            Some(section) if section.len() < records.len() => {
                header.flags = EVENTS_FLAG_ZSTD;
                encode::encode_events(&mut self.out, &header, section)
            }
            _ => encode::encode_events(&mut self.out, &header, records),
        }
        .map_err(|_| TransportError::Closed)?;
        self.write(transport, n)
    }
}

/// Cuts a name to [`MAX_NAME_LEN`] bytes at a character boundary, so a `Hello` always fits the frame buffer.
fn truncate_name(name: &'static str) -> &'static str {
    let mut end = name.len().min(MAX_NAME_LEN);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    name.get(..end).unwrap_or_default()
}
