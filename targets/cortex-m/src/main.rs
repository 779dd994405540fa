//! A small "set-top box" firmware for QEMU's `mps2-an386` board (Cortex-M4F), traced by the real agent and
//! streamed over the board's UART.
//!
//! - A run-to-completion scheduler in thread mode: SysTick (1 kHz) wakes the `input` and `audio` tasks, the
//!   vsync interrupt (CMSDK timer 0, 60 Hz) pends a bottom half in PendSV that wakes `decoder` and `render`;
//!   `render` is the vsync job, whose deadline is the next vsync; `input` creates a short-lived `zapper`
//!   thread every two seconds. Every built-in record type appears, plus the board's own types.
//! - The agent is shared by thread mode and the interrupts through a critical section (it is a `&mut self`
//!   object with one ring per CPU); PendSV, the lowest priority, drains it into a byte queue that SysTick
//!   moves into the UART at a modelled baud rate (`baud=`; QEMU's UART itself has no speed).
//! - Timestamps: CMSDK timer 1, free-running at 25 MHz (40 ns), extended to 64 bits.
//! - Parameters come from QEMU's semihosting command line (`seconds=`, `baud=`, `mode=run|flood|bench`,
//!   `session=`; `bench` is the measurement harness, only in an image with the `bench` feature, which is
//!   on by default and off in an application image); at the end the firmware sends `Bye`, prints its own counters on the semihosting console
//!   and exits QEMU.
//!
//! The panic handler calls an undefined symbol: the image links only if no panicking path remains, in the
//! agent or here.
#![no_std]
#![no_main]

mod hw;

use core::cell::{Cell, UnsafeCell};
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering, compiler_fence};

use cortex_m::interrupt::InterruptNumber;
use cortex_m::peripheral::scb::SystemHandler;
use cortex_m::peripheral::syst::SystClkSource;
use cortex_m::peripheral::{NVIC, SCB};
use cortex_m_rt::{entry, exception};
use critical_section::Mutex;
use socscope_agent::{
    Agent, AgentError, AgentStats, Clock, Config, Mode, Recorded, StaticDictionary, Transport,
    TransportError,
};
use socscope_wire::dict::{Category, EventTypeDef, ParamDef, ParamType, ProducerDef, ProducerKind};
use socscope_wire::frame::ParamValue;

use hw::{Line, SYSCLK_HZ};

/// Bytes per ring block, blocks per ring.
const BLOCK: usize = 256;
const BLOCKS: usize = 8;
/// The control-frame buffer: the board's `Hello` and its longest declaration fit in it. None in the
/// probe build: the host frames what it reads.
#[cfg(not(feature = "probe"))]
const CONTROL: usize = 96;
#[cfg(feature = "probe")]
const CONTROL: usize = 0;
/// Producers registered at run time: the soft IRQ, whose handler address is only known then; in the
/// probe build it is in the dictionary image in flash, under a fixed id ([`SOFTIRQ_ID`]).
#[cfg(not(feature = "probe"))]
const RUN_TIME_PRODUCERS: usize = 1;
#[cfg(feature = "probe")]
const RUN_TIME_PRODUCERS: usize = 0;
/// One CPU; the board's threads and interrupts share its ring (each record masks interrupts for that
/// record only).
/// The dictionary's tables are in flash ([`PRODUCERS`], [`TYPES`], `Agent::declare_static`); room for
/// one producer registered at run time (the soft IRQ, whose handler address is only known then).
/// The configuration is in flash ([`board_config!`]): the agent references it (`StaticConfig`; in
/// the probe build `ProbeConfig`, which keeps the session's id and start in the control block).
type BoardAgent =
    Agent<BoardClock, 1, BLOCK, BLOCKS, CONTROL, RUN_TIME_PRODUCERS, 0, DRAIN, BoardConfig>;
#[cfg(not(feature = "probe"))]
type BoardConfig = socscope_agent::StaticConfig;
#[cfg(feature = "probe")]
type BoardConfig = socscope_agent::ProbeConfig<1>;
/// The drain's state on the board: none in the probe build (the host frames and sends).
#[cfg(not(feature = "probe"))]
const DRAIN: usize = 1;
#[cfg(feature = "probe")]
const DRAIN: usize = 0;

/// Thread ids (also their bit in `READY`; a lower id runs first).
const PID_IDLE: u32 = 0;
const PID_FIRMWARE: u32 = 1;
const PID_INPUT: u32 = 2;
const PID_DECODER: u32 = 3;
const PID_RENDER: u32 = 4;
const PID_AUDIO: u32 = 5;
const PID_ZAPPER: u32 = 6;

/// Interrupts as the `irq` parameter gives them: exception numbers (SysTick 15, NVIC line n is 16 + n).
const IRQ_SYSTICK: u32 = 15;
const IRQ_VSYNC: u32 = 16 + hw::TIMER0_IRQ as u32;

/// The board's own event types.
const T_VSYNC_JOB: u16 = 64;
const T_VSYNC_JOB_EXIT: u16 = 65;
const T_DEADLINE_MISS: u16 = 66;
const T_VSYNC_SLACK: u16 = 67;
const T_AUDIO_FILL: u16 = 68;
/// Counters are kept per type id below this.
const TYPE_SLOTS: usize = 72;

/// Ticks between vsync interrupts (60 Hz): also the vsync job's deadline.
const VSYNC_PERIOD: u32 = SYSCLK_HZ / 60;
const TICKS_PER_MS: u32 = SYSCLK_HZ / 1000;
const TICKS_PER_US: u64 = (SYSCLK_HZ / 1_000_000) as u64;

static FRAME_PARAMS: [ParamDef<'static>; 1] = [ParamDef {
    name: "frame",
    ty: ParamType::Unsigned,
}];
static MISS_PARAMS: [ParamDef<'static>; 2] = [
    ParamDef {
        name: "frame",
        ty: ParamType::Unsigned,
    },
    ParamDef {
        name: "late_us",
        ty: ParamType::Unsigned,
    },
];
static SLACK_PARAMS: [ParamDef<'static>; 1] = [ParamDef {
    name: "slack_us",
    ty: ParamType::Signed,
}];
static FILL_PARAMS: [ParamDef<'static>; 1] = [ParamDef {
    name: "samples",
    ty: ParamType::Unsigned,
}];
/// A producer of the board: its id in the session (threads and the process: pid + 1; interrupts:
/// 0x100 + their exception number).
const fn producer(
    local: u32,
    parent: Option<u32>,
    kind: ProducerKind,
    name: &'static str,
) -> ProducerDef<'static> {
    let id = match kind {
        ProducerKind::Irq => 0x100 + local,
        _ => local + 1,
    };
    let parent = match parent {
        Some(p) => Some(p + 1),
        None => None,
    };
    ProducerDef {
        id,
        parent,
        kind,
        local_id: local as u64,
        name,
    }
}

static PRODUCERS: [ProducerDef<'static>; 10] = [
    producer(PID_FIRMWARE, None, ProducerKind::Process, "firmware"),
    producer(PID_IDLE, Some(PID_FIRMWARE), ProducerKind::Thread, "idle"),
    producer(PID_INPUT, Some(PID_FIRMWARE), ProducerKind::Thread, "input"),
    producer(
        PID_DECODER,
        Some(PID_FIRMWARE),
        ProducerKind::Thread,
        "decoder",
    ),
    producer(
        PID_RENDER,
        Some(PID_FIRMWARE),
        ProducerKind::Thread,
        "render",
    ),
    producer(PID_AUDIO, Some(PID_FIRMWARE), ProducerKind::Thread, "audio"),
    producer(
        PID_ZAPPER,
        Some(PID_FIRMWARE),
        ProducerKind::Thread,
        "zapper",
    ),
    producer(IRQ_SYSTICK, None, ProducerKind::Irq, "SysTick"),
    producer(IRQ_VSYNC, None, ProducerKind::Irq, "vsync (TIMER0)"),
    ProducerDef {
        id: 0x300,
        parent: None,
        kind: ProducerKind::Cpu,
        local_id: 0,
        name: "cortex-m4f",
    },
];

/// The vsync bottom half: declared at run time (its handler's address), or in the probe build under this
/// fixed id (a `const` dictionary cannot hold a function's address).
const SOFTIRQ_NAME: &str = "vsync bottom half (PendSV)";
#[cfg(feature = "probe")]
const SOFTIRQ_ID: u64 = 1;

/// The probe build's producers: the board's and the soft IRQ.
#[cfg(feature = "probe")]
static PROBE_PRODUCERS: [ProducerDef<'static>; 11] = {
    let mut all = [ProducerDef {
        id: 0x200,
        parent: None,
        kind: ProducerKind::SoftIrq,
        local_id: SOFTIRQ_ID,
        name: SOFTIRQ_NAME,
    }; 11];
    let mut i = 0;
    while i < PRODUCERS.len() {
        all[i] = PRODUCERS[i];
        i += 1;
    }
    all
};

/// The probe build's dictionary, encoded at compile time (no encoder on the board): the host sends it.
#[cfg(feature = "probe")]
static DICTIONARY: [u8; socscope_wire::dict::dictionary_image_len(&PROBE_PRODUCERS, &TYPES)] =
    socscope_wire::dict::dictionary_image(&PROBE_PRODUCERS, &TYPES);

/// The board's names in `Hello`.
const BOARD: &str = "mps2-an386";
const SOC: &str = "cortex-m4f";
const OS: &str = "socscope-cortex-m";

/// The names image of the probe build for an application name (a `static` in flash: the control block
/// points to it); an empty slice in the other builds, which send their names in their own `Hello`.
macro_rules! names_image {
    ($application:literal) => {{
        #[cfg(feature = "probe")]
        {
            use socscope_agent::probe::{names_image, names_image_len};
            static IMAGE: [u8; names_image_len(BOARD, SOC, OS, $application, "")] =
                names_image(BOARD, SOC, OS, $application, "");
            &IMAGE
        }
        #[cfg(not(feature = "probe"))]
        {
            &[]
        }
    }};
}

/// The agent's configuration for an application name: a `static` in flash, which the agent references
/// instead of copying (the session id, given at boot, is kept apart: `Agent::new_static`).
macro_rules! board_config {
    ($application:literal) => {{
        static CONFIG: Config = Config {
            board: BOARD,
            soc: SOC,
            os: OS,
            application: $application,
            cpu_count: 1,
            tick_rate_hz: SYSCLK_HZ as u64,
            session_id: 0,
            flush_latency_ticks: (20 * TICKS_PER_MS) as u64,
            heartbeat_ticks: SYSCLK_HZ as u64,
            hello_every_ticks: 2 * SYSCLK_HZ as u64,
            token: "",
        };
        &CONFIG
    }};
}

/// The probe build's control block (SPEC.md, "Probe mode"): the host finds it by its magic bytes, or by
/// this symbol.
#[cfg(feature = "probe")]
#[unsafe(no_mangle)]
static SOCSCOPE_PROBE: socscope_agent::probe::ProbeControl<1> =
    socscope_agent::probe::ProbeControl::new();

/// The board's dictionary as the agent references it ([`PRODUCERS`], [`TYPES`]).
static DECLARATIONS: StaticDictionary = StaticDictionary {
    producers: &PRODUCERS,
    types: &TYPES,
};

static TYPES: [EventTypeDef<'static>; 5] = [
    EventTypeDef {
        id: T_VSYNC_JOB,
        name: "vsync_job",
        category: Category::StateEnter,
        params: &FRAME_PARAMS,
    },
    EventTypeDef {
        id: T_VSYNC_JOB_EXIT,
        name: "vsync_job_exit",
        category: Category::StateExit { enter: T_VSYNC_JOB },
        params: &[],
    },
    EventTypeDef {
        id: T_DEADLINE_MISS,
        name: "deadline_miss",
        category: Category::Punctual,
        params: &MISS_PARAMS,
    },
    EventTypeDef {
        id: T_VSYNC_SLACK,
        name: "vsync_slack_us",
        category: Category::Variable,
        params: &SLACK_PARAMS,
    },
    EventTypeDef {
        id: T_AUDIO_FILL,
        name: "audio_fill",
        category: Category::Variable,
        params: &FILL_PARAMS,
    },
];

// ---------------------------------------------------------------------------------------------------------
// The critical section (PRIMASK), which the agent and the firmware use: every outermost masked section is
// timed with the board clock, so the firmware reports the longest time interrupts waited.

/// The firmware's critical section: PRIMASK, each outermost masked section timed.
///
/// The timing is a property of the image, not a run-time switch: with the `timed-masking` feature
/// every outermost section is timed, in every mode (`bench` included: its record counts are then the
/// agent's plus the timing's). The token's bit 0 is PRIMASK as `acquire` found it (1: nested, interrupts
/// were already masked); its other bits carry the section's start, timer 1's raw (down-counting) value
/// read right after `cpsid`. The exit of an outermost section subtracts the timer's value from it and
/// keeps the longest, inline, with no call and no flag. Dropping the start's bit 0 rounds a section up
/// by at most one tick (40 ns).
///
/// Without the feature (the image `measure.sh` counts the agent's record path with) it is the plain
/// single-core PRIMASK section, the same instructions as the `cortex-m` crate's
/// `critical-section-single-core` implementation: the agent's cost on a board that does not time its
/// masked sections.
struct MeasuredPrimask;
critical_section::set_impl!(MeasuredPrimask);

/// The longest outermost masked section so far (clock ticks) and where it ended (a code address,
/// printed for `llvm-addr2line`/`llvm-objdump`: which section is the longest). One static, so that the
/// exit reaches both from one address. Touched only with interrupts masked.
#[repr(C)]
struct MaskedTimes {
    max_ticks: AtomicU32,
    max_at: AtomicU32,
}

static MASKED: MaskedTimes = MaskedTimes {
    max_ticks: AtomicU32::new(0),
    max_at: AtomicU32::new(0),
};

// SAFETY: `cpsid i` excludes every other context on this single-core board; `release` restores PRIMASK
// as `acquire` found it (token bit 0 clear: interrupts were enabled), so sections nest.
unsafe impl critical_section::Impl for MeasuredPrimask {
    #[inline(always)]
    unsafe fn acquire() -> critical_section::RawRestoreState {
        let primask: u32;
        // SAFETY: reads PRIMASK and masks interrupts; no memory is touched.
        unsafe {
            core::arch::asm!("mrs {}, PRIMASK", "cpsid i", out(reg) primask, options(nomem, nostack, preserves_flags));
        }
        // The asm touches no memory as the compiler sees it: without the fence it could move the
        // section's loads and stores before `cpsid` (the `cortex-m` crate's `interrupt::disable` has
        // the same fence).
        compiler_fence(Ordering::SeqCst);
        // Bit 0: PRIMASK as found (1: nested, interrupts were already masked).
        if cfg!(feature = "timed-masking") {
            let mut token = hw::clock_count_merged();
            // SAFETY: register arithmetic only. One `bfi`, opaque to the compiler: it then tests the
            // token's bit 0 where the section ends instead of keeping PRIMASK's bit in a second register
            // (spilled across the record path).
            unsafe {
                core::arch::asm!("bfi {t}, {p}, #0, #1", t = inout(reg) token, p = in(reg) primask,
                    options(pure, nomem, nostack, preserves_flags));
            }
            token
        } else {
            primask & 1
        }
    }

    #[inline(always)]
    unsafe fn release(token: critical_section::RawRestoreState) {
        // The section's loads and stores stay before `cpsie` (as in `cortex-m`'s `interrupt::enable`).
        compiler_fence(Ordering::SeqCst);
        if token & 1 == 0 {
            #[cfg(feature = "timed-masking")]
            masked_section_ends(token);
            // SAFETY: interrupts were enabled when the outermost section started.
            unsafe { core::arch::asm!("cpsie i", options(nomem, nostack, preserves_flags)) };
        }
    }
}

/// Times the outermost masked section that ends now, which started at timer count `start` (bit 0 clear),
/// and keeps the longest; interrupts are still masked, so plain loads and stores are enough.
#[cfg(feature = "timed-masking")]
#[inline(always)]
fn masked_section_ends(start: u32) {
    // The timer counts down.
    let ticks = start.wrapping_sub(hw::clock_count());
    if ticks > MASKED.max_ticks.load(Ordering::Relaxed) {
        let at: u32;
        // SAFETY: reads the program counter (this function is inlined where the section ends).
        unsafe {
            core::arch::asm!("mov {}, pc", out(reg) at, options(nomem, nostack, preserves_flags))
        };
        MASKED.max_ticks.store(ticks, Ordering::Relaxed);
        MASKED.max_at.store(at, Ordering::Relaxed);
    }
}

// ---------------------------------------------------------------------------------------------------------
// The clock: timer 1 extended to 64 bits (read at least every 171 s, which the firmware always does).

/// The clock's high word (bits 32..64) and last low word (bits 0..32), in one `u64` so that the record
/// path reads and writes them with one address. Touched only with interrupts masked.
struct ClockState(UnsafeCell<u64>);

// SAFETY: only `now_masked` touches it, and only with interrupts masked (single core).
unsafe impl Sync for ClockState {}

static CLOCK: ClockState = ClockState(UnsafeCell::new(0));

/// Board time in 25 MHz ticks; the caller has masked interrupts.
///
/// # Safety
/// Interrupts are masked (the caller is inside a critical section).
#[inline(always)]
unsafe fn now_masked() -> u64 {
    // SAFETY: interrupts are masked: no other context touches the state now.
    extend(unsafe { &mut *CLOCK.0.get() })
}

/// Timer 1's count extended to 64 bits with `state` (the last time read): its high word goes up when
/// the low word went down since.
#[inline(always)]
fn extend(state: &mut u64) -> u64 {
    extend_with(state, hw::clock_raw())
}

/// [`extend`] with the low word read.
#[inline(always)]
fn extend_with(state: &mut u64, low: u32) -> u64 {
    let mut high = (*state >> 32) as u32;
    if low < *state as u32 {
        high = high.wrapping_add(1);
    }
    let t = (u64::from(high) << 32) | u64::from(low);
    *state = t;
    t
}

/// Board time in 25 MHz ticks.
fn now() -> u64 {
    // SAFETY: inside the critical section.
    critical_section::with(|_| unsafe { now_masked() })
}

/// The agent's clock: timer 1 extended as [`now`] does it, with an extension state of its own kept
/// in the agent (its first field), so that the record path reaches it from the agent's address it
/// already holds instead of loading a second address (2 instructions per record). Both extensions
/// start at 0 with the timer and agree as long as each is read at least once per timer wrap (171 s):
/// the agent reads its clock at every record and every poll (PendSV, every 20 ms), the firmware its
/// own in every wait loop. The agent calls it only inside its own critical section (`Clock`'s
/// contract), so it does not mask interrupts again.
struct BoardClock {
    state: u64,
}

impl Clock for BoardClock {
    #[inline(always)]
    fn now(&mut self) -> u64 {
        // The timed image's critical section read the timer just before (the agent reads its clock
        // first thing in the section): the compiler takes that read for this one.
        let low = u32::MAX - hw::clock_count_merged();
        extend_with(&mut self.state, low)
    }
}

// ---------------------------------------------------------------------------------------------------------
// The UART: the agent's frames go into a lock-free byte queue (PendSV produces); SysTick moves bytes into
// the UART at the modelled rate. Neither end masks interrupts while it copies.

const TXQ_LEN: usize = 1024;

/// A single-producer single-consumer byte ring (indices run freely; `TXQ_LEN` is a power of two, so an
/// index is masked into the buffer). Not heapless's `spsc::Queue`: its 0.9 ends index modulo a capacity
/// known only at run time, a division-by-zero panic path the link-time proof refuses.
struct TxRing {
    buf: UnsafeCell<[u8; TXQ_LEN]>,
    /// Bytes taken out so far (the consumer's), and put in (the producer's).
    head: AtomicUsize,
    tail: AtomicUsize,
    /// Which context holds each end now.
    producing: AtomicBool,
    consuming: AtomicBool,
}

// SAFETY: the producer writes only the free bytes between `tail` and `head + TXQ_LEN` and publishes them
// by storing `tail` (Release); the consumer reads only bytes between `head` and `tail` (Acquire) and frees
// them by storing `head`; `producing` and `consuming` let one context at a time hold each end.
unsafe impl Sync for TxRing {}

const _: () = assert!(TXQ_LEN.is_power_of_two());

static TXQ: TxRing = TxRing {
    buf: UnsafeCell::new([0; TXQ_LEN]),
    head: AtomicUsize::new(0),
    tail: AtomicUsize::new(0),
    producing: AtomicBool::new(false),
    consuming: AtomicBool::new(false),
};

/// The producing end, held by one context.
struct TxProducer(&'static TxRing);

/// The consuming end, held by one context.
struct TxConsumer(&'static TxRing);

impl TxProducer {
    fn free(&self) -> usize {
        TXQ_LEN
            - self
                .0
                .tail
                .load(Ordering::Relaxed)
                .wrapping_sub(self.0.head.load(Ordering::Acquire))
    }

    /// Appends `bytes` whole, or nothing when they do not fit.
    fn push(&mut self, bytes: &[u8]) -> bool {
        if self.free() < bytes.len() {
            return false;
        }
        let tail = self.0.tail.load(Ordering::Relaxed);
        for (i, &b) in bytes.iter().enumerate() {
            // SAFETY: the byte is free (checked above) and only the producer writes free bytes.
            unsafe {
                (*self.0.buf.get())[tail.wrapping_add(i) & (TXQ_LEN - 1)] = b;
            }
        }
        self.0
            .tail
            .store(tail.wrapping_add(bytes.len()), Ordering::Release);
        true
    }
}

impl TxConsumer {
    fn len(&self) -> usize {
        self.0
            .tail
            .load(Ordering::Acquire)
            .wrapping_sub(self.0.head.load(Ordering::Relaxed))
    }

    fn peek(&self) -> Option<u8> {
        if self.len() == 0 {
            return None;
        }
        let head = self.0.head.load(Ordering::Relaxed);
        // SAFETY: the byte was published by the producer and is not freed until `pop`.
        Some(unsafe { (*self.0.buf.get())[head & (TXQ_LEN - 1)] })
    }

    fn pop(&mut self) {
        let head = self.0.head.load(Ordering::Relaxed);
        self.0.head.store(head.wrapping_add(1), Ordering::Release);
    }
}

/// Runs `f` with the producing end, unless another context holds it.
fn with_producer<R>(f: impl FnOnce(&mut TxProducer) -> R) -> Option<R> {
    if TXQ.producing.swap(true, Ordering::Acquire) {
        return None;
    }
    let r = f(&mut TxProducer(&TXQ));
    TXQ.producing.store(false, Ordering::Release);
    Some(r)
}

/// Runs `f` with the consuming end, unless another context holds it.
fn with_consumer<R>(f: impl FnOnce(&mut TxConsumer) -> R) -> Option<R> {
    if TXQ.consuming.swap(true, Ordering::Acquire) {
        return None;
    }
    let r = f(&mut TxConsumer(&TXQ));
    TXQ.consuming.store(false, Ordering::Release);
    Some(r)
}

/// Milliseconds in which the UART could not take a byte the firmware had credit and data for. QEMU's
/// UART has no speed of its own: its transmitter stays full only while the host end of the link (the
/// pty, the TCP connection) does not take bytes. So these are the host holding the board back — what
/// tells a board loss caused by a slow host reader from one the board causes itself.
static UART_HOST_STALLED_MS: AtomicU32 = AtomicU32::new(0);
/// Bytes written into the UART's data register: what the board sent, to compare with what the host
/// received (QEMU's log of the UART, the collector's byte count).
static UART_BYTES_SENT: AtomicU32 = AtomicU32::new(0);

/// Moves up to `budget` bytes into the UART; returns how many.
fn pump(queue: &mut TxConsumer, budget: u32) -> u32 {
    let mut sent = 0;
    while sent < budget {
        let Some(b) = queue.peek() else {
            break;
        };
        if hw::uart_busy() || !hw::uart_try_send(b) {
            break;
        }
        queue.pop();
        sent += 1;
    }
    UART_BYTES_SENT.store(
        UART_BYTES_SENT.load(Ordering::Relaxed).wrapping_add(sent),
        Ordering::Relaxed,
    );
    sent
}

/// Modelled UART speed in baud (10 bits per byte); 0: as fast as QEMU takes bytes.
static BAUD: AtomicU32 = AtomicU32::new(0);
/// Bits the UART may still send (SysTick adds `BAUD / 1000` per millisecond, capped at 4 ms worth).
static UART_CREDIT: AtomicU32 = AtomicU32::new(0);

/// One millisecond of UART time (from SysTick).
fn uart_tick() {
    let baud = BAUD.load(Ordering::Relaxed);
    with_consumer(|q| {
        let credit = UART_CREDIT
            .load(Ordering::Relaxed)
            .saturating_add(baud / 1000)
            .min(baud / 250);
        let budget = if baud == 0 { u32::MAX } else { credit / 10 };
        let sent = pump(q, budget);
        if baud != 0 {
            UART_CREDIT.store(credit - sent * 10, Ordering::Relaxed);
        }
        // `pump` stops early only on an empty queue or a full transmitter: the latter, in this
        // millisecond, is the host not taking bytes.
        if sent < budget && q.len() > 0 {
            UART_HOST_STALLED_MS.store(
                UART_HOST_STALLED_MS.load(Ordering::Relaxed).wrapping_add(1),
                Ordering::Relaxed,
            );
        }
    });
}

/// The agent's transport: whole frames into the UART queue, `WouldBlock` when one does not fit.
struct Uart<'a>(&'a mut TxProducer);

impl Transport for Uart<'_> {
    fn write_frame(&mut self, frame: &[u8]) -> Result<(), TransportError> {
        if self.0.push(frame) {
            Ok(())
        } else {
            Err(TransportError::WouldBlock)
        }
    }
}

/// Whether the drain discards frames (the `bench` mode's loaded run).
#[cfg(feature = "bench")]
static DRAIN_DISCARDS: AtomicBool = AtomicBool::new(false);

/// Sends what the agent has due into the UART queue (PendSV, the lowest priority), with interrupts
/// enabled: the agent masks them only to claim a finished block and to give it back.
#[cfg(not(feature = "probe"))]
fn drain() {
    let Some(agent) = agent() else {
        return;
    };
    #[cfg(feature = "bench")]
    if DRAIN_DISCARDS.load(Ordering::Relaxed) {
        let _ = agent.poll(&mut Discard);
        return;
    }
    with_producer(|p| {
        // WouldBlock with the queue full: the rest goes at the next call.
        let _ = agent.poll(&mut Uart(p));
    });
}

// ---------------------------------------------------------------------------------------------------------
// The agent and the firmware's own counters of what it recorded.

/// The agent, set once at start and then shared by every context. Not an `Option`: `None` of an
/// `Option<Agent>` is not all zeros, which would put the agent in `.data` and its initial image in
/// flash; this slot is zeros, in `.bss`.
struct AgentSlot {
    ready: AtomicBool,
    agent: UnsafeCell<MaybeUninit<BoardAgent>>,
}

// SAFETY: the agent is written once, before `ready` is set (and before any interrupt that reads it is
// enabled), and only read (shared) after; the agent itself is `Sync`.
unsafe impl Sync for AgentSlot {}

static AGENT: AgentSlot = AgentSlot {
    ready: AtomicBool::new(false),
    agent: UnsafeCell::new(MaybeUninit::uninit()),
};

/// Installs the agent (once, from `main`); `names` is the probe build's names image (unused otherwise).
fn install(
    agent: BoardAgent,
    #[cfg_attr(not(feature = "probe"), allow(unused))] names: &'static [u8],
) {
    if AGENT.ready.load(Ordering::Acquire) {
        return;
    }
    // SAFETY: not ready yet: nothing else reads the slot.
    let _agent = unsafe { (*AGENT.agent.get()).write(agent) };
    // The rings' addresses are final now: the control block can give them to the host.
    #[cfg(feature = "probe")]
    _agent.attach_probe(&SOCSCOPE_PROBE, &DICTIONARY, names);
    AGENT.ready.store(true, Ordering::Release);
}

/// The shared agent, once installed.
fn agent() -> Option<&'static BoardAgent> {
    // SAFETY: `ready` is set only once the agent was written; it is never written again.
    AGENT
        .ready
        .load(Ordering::Acquire)
        .then(|| unsafe { (*AGENT.agent.get()).assume_init_ref() })
}

/// Records stored and dropped, per type, as the firmware counts them; records refused; and every
/// record given a sequence number (stored or dropped), the board having one CPU.
static STORED: [AtomicU32; TYPE_SLOTS] = [const { AtomicU32::new(0) }; TYPE_SLOTS];
static DROPPED: [AtomicU32; TYPE_SLOTS] = [const { AtomicU32::new(0) }; TYPE_SLOTS];
static REJECTED: AtomicU32 = AtomicU32::new(0);
static NUMBERED: AtomicU32 = AtomicU32::new(0);

/// Records one event of type `type_id` with `f`, from any context, and counts the outcome.
#[inline(never)]
fn rec(type_id: u16, f: impl FnOnce(&BoardAgent) -> Result<Recorded, AgentError>) {
    let Some(agent) = agent() else {
        return;
    };
    let slot = usize::from(type_id);
    let counter = match f(agent) {
        Ok(Recorded::Stored) => STORED.get(slot),
        Ok(Recorded::Dropped) => DROPPED.get(slot),
        Err(_) => None,
    };
    match counter {
        Some(n) => {
            n.fetch_add(1, Ordering::Relaxed);
            NUMBERED.fetch_add(1, Ordering::Relaxed);
        }
        None => {
            REJECTED.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn switch(prev: u32, next: u32) {
    rec(1, |a| a.context_switch(0, prev, next));
}
fn irq_entry(irq: u32) {
    rec(2, |a| a.irq_entry(0, irq));
}
fn irq_exit() {
    rec(3, |a| a.irq_exit(0));
}
fn softirq_entry(handler: usize) {
    rec(4, |a| a.softirq_entry(0, handler as u64));
}
fn softirq_exit() {
    rec(5, |a| a.softirq_exit(0));
}
fn syscall_entry(nr: u32, args: [u64; 4]) {
    rec(6, |a| a.syscall_entry(0, nr, args));
}
fn syscall_exit(nr: u32, ret: i64) {
    rec(7, |a| a.syscall_exit(0, nr, ret));
}
fn marker(text: &'static str) {
    rec(9, |a| a.marker(0, text));
}
fn user_entry(function: usize) {
    rec(11, |a| a.user_entry(0, function as u64));
}
fn user_exit() {
    rec(12, |a| a.user_exit(0));
}
fn custom(type_id: u16, values: &[ParamValue<'_>]) {
    rec(type_id, |a| a.record(0, type_id, values));
}

// ---------------------------------------------------------------------------------------------------------
// Scheduler state shared with the interrupts.

/// Threads ready to run, one bit per thread id.
static READY: AtomicU32 = AtomicU32::new(0);
/// Milliseconds since the scheduler started (SysTick).
static MS: AtomicU32 = AtomicU32::new(0);
/// Vsync interrupts so far.
static FRAME: AtomicU32 = AtomicU32::new(0);
/// When the last vsync came.
static VSYNC_AT: Mutex<Cell<u64>> = Mutex::new(Cell::new(0));
/// The vsync bottom half is due (PendSV).
static BOTTOM_HALF: AtomicBool = AtomicBool::new(false);

/// `W`: makes `pid` ready.
fn wake(pid: u32) {
    rec(8, |a| a.wakeup(0, pid));
    READY.fetch_or(1 << pid, Ordering::Release);
}

#[derive(Clone, Copy)]
struct Irq(u16);

// SAFETY: the numbers are NVIC lines that exist on the board.
unsafe impl InterruptNumber for Irq {
    fn number(self) -> u16 {
        self.0
    }
}

#[exception]
fn SysTick() {
    irq_entry(IRQ_SYSTICK);
    SYSTICKS.fetch_add(1, Ordering::Relaxed);
    // Milliseconds come from the clock, not from counting interrupts: a tick that comes while the last
    // one is still pending is lost (QEMU loses some when the host is busy), so catch up here.
    let start = critical_section::with(|cs| STARTED_AT.borrow(cs).get());
    let target = (now().saturating_sub(start) / u64::from(TICKS_PER_MS)).min(u64::from(u32::MAX));
    let mut ms = MS.load(Ordering::Relaxed);
    while u64::from(ms) < target {
        ms = ms.wrapping_add(1);
        MS.store(ms, Ordering::Relaxed);
        if RUNNING.load(Ordering::Relaxed) {
            if ms % 10 == 0 {
                wake(PID_INPUT);
            }
            if ms % 4 == 0 {
                wake(PID_AUDIO);
            }
        }
        uart_tick();
    }
    SCB::set_pendsv();
    irq_exit();
}

/// SysTick interrupts taken.
static SYSTICKS: AtomicU32 = AtomicU32::new(0);
/// When the scheduler started.
static STARTED_AT: Mutex<Cell<u64>> = Mutex::new(Cell::new(0));

/// The vsync timer's period in ticks, and the longest its interrupt waited to start.
static VSYNC_TICKS: AtomicU32 = AtomicU32::new(VSYNC_PERIOD);
static IRQ_LATENCY_MAX: AtomicU32 = AtomicU32::new(0);

/// Only the vsync timer is enabled in the NVIC.
#[exception]
unsafe fn DefaultHandler(irqn: i16) {
    if irqn != hw::TIMER0_IRQ as i16 {
        return;
    }
    // How long after the timer expired this handler started: the interrupt's latency.
    let latency = VSYNC_TICKS
        .load(Ordering::Relaxed)
        .wrapping_sub(hw::vsync_timer_value());
    if latency > IRQ_LATENCY_MAX.load(Ordering::Relaxed) {
        IRQ_LATENCY_MAX.store(latency, Ordering::Relaxed);
    }
    irq_entry(IRQ_VSYNC);
    hw::vsync_timer_clear();
    let frame = FRAME.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
    let t = now();
    critical_section::with(|cs| VSYNC_AT.borrow(cs).set(t));
    rec(10, |a| a.mark(0, u64::from(frame)));
    BOTTOM_HALF.store(true, Ordering::Release);
    SCB::set_pendsv();
    irq_exit();
}

#[exception]
fn PendSV() {
    if BOTTOM_HALF.swap(false, Ordering::Acquire) {
        vsync_bottom_half();
    }
    drain();
}

/// Probe build: the host reads closed blocks; the open one is closed once its records are a flush
/// latency (20 ms) old, as the streaming drain would send it.
#[cfg(feature = "probe")]
fn drain() {
    static LAST_CLOSE_MS: AtomicU32 = AtomicU32::new(0);
    let ms = MS.load(Ordering::Relaxed);
    if ms.wrapping_sub(LAST_CLOSE_MS.load(Ordering::Relaxed)) >= 20 {
        LAST_CLOSE_MS.store(ms, Ordering::Relaxed);
        if let Some(agent) = agent() {
            agent.probe_close_blocks();
        }
    }
}

/// The vsync "soft IRQ": hands the new frame to the decoder and the renderer.
#[inline(never)]
fn vsync_bottom_half() {
    #[cfg(not(feature = "probe"))]
    softirq_entry(vsync_bottom_half as *const () as usize);
    #[cfg(feature = "probe")]
    softirq_entry(SOFTIRQ_ID as usize);
    wake(PID_DECODER);
    wake(PID_RENDER);
    softirq_exit();
}

/// Set while the scheduler runs (SysTick wakes tasks only then).
static RUNNING: AtomicBool = AtomicBool::new(false);

// ---------------------------------------------------------------------------------------------------------
// Tasks.

struct Tasks {
    current: u32,
    rng: u32,
    /// The decoded frame buffer waiting for `render` to show and free it.
    frame_buffer: Option<(u64, u64)>,
    /// Allocation pointer of the frame buffer pool (a bump allocator over a fake region).
    next_buffer: u64,
    zaps: u32,
}

impl Tasks {
    fn random(&mut self, below: u32) -> u32 {
        // xorshift32
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 17;
        self.rng ^= self.rng << 5;
        if below == 0 { 0 } else { self.rng % below }
    }

    fn switch_to(&mut self, next: u32) {
        if self.current != next {
            switch(self.current, next);
            self.current = next;
        }
    }

    fn run(&mut self, pid: u32) {
        match pid {
            PID_INPUT => self.input(),
            PID_DECODER => self.decoder(),
            PID_RENDER => self.render(),
            PID_AUDIO => self.audio(),
            PID_ZAPPER => self.zapper(),
            _ => {}
        }
    }

    /// Polls the remote control; every two seconds a key starts a zap.
    #[inline(never)]
    fn input(&mut self) {
        user_entry(Tasks::input as *const () as usize);
        syscall_entry(63, [0, 0x2000_8000, 16, 0]);
        let key = MS.load(Ordering::Relaxed) % 2000 < 10;
        syscall_exit(63, if key { 4 } else { 0 });
        if key {
            marker("key: channel up");
            rec(13, |a| a.thread_create(0, PID_ZAPPER, "zapper"));
            wake(PID_ZAPPER);
        }
        user_exit();
    }

    /// Decodes the next frame into a buffer it allocates.
    #[inline(never)]
    fn decoder(&mut self) {
        user_entry(Tasks::decoder as *const () as usize);
        let size = 4096 + u64::from(self.random(8)) * 512;
        syscall_entry(222, [0, size, 3, 0]);
        let ptr = self.next_buffer;
        self.next_buffer = 0x6000_0000 + (self.next_buffer + 0x2_0000) % 0x10_0000;
        rec(15, |a| a.kmalloc(0, size, ptr));
        syscall_exit(222, ptr as i64);
        busy(u64::from(TICKS_PER_MS + self.random(2 * TICKS_PER_MS)));
        self.frame_buffer = Some((ptr, size));
        user_exit();
    }

    /// The vsync job: composes the frame before the next vsync, its deadline.
    #[inline(never)]
    fn render(&mut self) {
        let frame = FRAME.load(Ordering::Relaxed);
        let vsync = critical_section::with(|cs| VSYNC_AT.borrow(cs).get());
        let deadline = vsync + u64::from(VSYNC_PERIOD);
        custom(T_VSYNC_JOB, &[ParamValue::Unsigned(u64::from(frame))]);
        // Usually 3 to 9 ms; one frame in 40 takes 18 ms and misses its deadline.
        let work = if frame % 40 == 39 {
            18 * TICKS_PER_MS
        } else {
            3 * TICKS_PER_MS + self.random(6 * TICKS_PER_MS)
        };
        busy(u64::from(work));
        custom(T_VSYNC_JOB_EXIT, &[]);
        let done = now();
        let slack = (deadline as i64).wrapping_sub(done as i64) / TICKS_PER_US as i64;
        custom(T_VSYNC_SLACK, &[ParamValue::Signed(slack)]);
        if done > deadline {
            custom(
                T_DEADLINE_MISS,
                &[
                    ParamValue::Unsigned(u64::from(frame)),
                    ParamValue::Unsigned((done - deadline) / TICKS_PER_US),
                ],
            );
            marker("vsync deadline missed");
            if POST_MORTEM.load(Ordering::Relaxed)
                && MS.load(Ordering::Relaxed) >= DUMP_AFTER_MS.load(Ordering::Relaxed)
                && !DUMPED.load(Ordering::Relaxed)
            {
                dump_now();
            }
        }
        if let Some((ptr, size)) = self.frame_buffer.take() {
            syscall_entry(215, [ptr, size, 0, 0]);
            rec(16, |a| a.kfree(0, ptr));
            syscall_exit(215, 0);
        }
    }

    /// Mixes a block of audio.
    #[inline(never)]
    fn audio(&mut self) {
        user_entry(Tasks::audio as *const () as usize);
        let fill = 256 + u64::from(self.random(768));
        custom(T_AUDIO_FILL, &[ParamValue::Unsigned(fill)]);
        busy(u64::from(TICKS_PER_MS / 4));
        user_exit();
    }

    /// A short-lived thread: tunes to the next channel and exits.
    #[inline(never)]
    fn zapper(&mut self) {
        self.zaps += 1;
        marker("zap: tuning");
        busy(u64::from(TICKS_PER_MS));
        rec(14, |a| a.thread_exit(0, PID_ZAPPER));
    }
}

/// Spins for `ticks` of board time (interrupts keep coming).
fn busy(ticks: u64) {
    let start = now();
    while now().wrapping_sub(start) < ticks {}
}

// ---------------------------------------------------------------------------------------------------------
// Start, modes, end.

#[entry]
fn main() -> ! {
    let mut cmd = [0u8; 160];
    let cmdline = hw::command_line(&mut cmd);
    let number = |key, default| {
        hw::arg(cmdline, key)
            .and_then(hw::parse_u64)
            .unwrap_or(default)
    };
    let seconds = number("seconds", 5);
    let baud = number("baud", 921_600);
    let session = number("session", 1);
    let linger = number("linger", 0) != 0;
    let mode = hw::arg(cmdline, "mode").unwrap_or(b"run");
    let dump_after = number("dump_after", 2);
    BAUD.store(baud.min(u64::from(u32::MAX)) as u32, Ordering::Relaxed);
    DUMP_AFTER_MS.store(
        (dump_after * 1000).min(u64::from(u32::MAX)) as u32,
        Ordering::Relaxed,
    );

    hw::clock_init();
    hw::uart_init();
    // The configuration in flash, and the probe build's names image, per application (the host's
    // `Hello` takes its names from the image).
    let (application, config, names): (&str, &'static Config, &'static [u8]) = match mode {
        #[cfg(feature = "bench")]
        b"bench" => ("bench", board_config!("bench"), names_image!("bench")),
        #[cfg(not(feature = "bench"))]
        b"bench" => {
            // An application image: the measurement harness is not in it (feature `bench`).
            Line::new()
                .text("socscope-board: mode bench not in this image")
                .print();
            hw::exit(false);
        }
        b"flood" => ("flood", board_config!("flood"), names_image!("flood")),
        b"postmortem" => (
            "player-post-mortem",
            board_config!("player-post-mortem"),
            names_image!("player-post-mortem"),
        ),
        _ => ("player", board_config!("player"), names_image!("player")),
    };
    #[cfg(not(feature = "probe"))]
    let agent = BoardAgent::new_static(BoardClock { state: 0 }, config, session);
    #[cfg(feature = "probe")]
    let agent = BoardAgent::new_probe(BoardClock { state: 0 }, config, session, &SOCSCOPE_PROBE);
    let Ok(mut agent) = agent else {
        Line::new()
            .text("socscope-board: configuration refused")
            .print();
        hw::exit(false);
    };
    // The board's dictionary is in flash: the agent references these tables instead of copying them
    // (RAM). Only the soft IRQ's handler address is known at run time: registered (copied) alone.
    #[cfg_attr(feature = "probe", allow(unused_mut))]
    let mut ok = agent.declare_static(&DECLARATIONS).is_ok();
    #[cfg(not(feature = "probe"))]
    {
        ok &= agent
            .register_producer(ProducerDef {
                id: 0x200,
                parent: None,
                kind: ProducerKind::SoftIrq,
                local_id: vsync_bottom_half as *const () as usize as u64,
                name: SOFTIRQ_NAME,
            })
            .is_ok();
    }
    // `postmortem=1` with `mode=bench`: the record path's cost in post-mortem mode (full rings overwrite
    // their oldest block), against the same bench in streaming mode.
    if mode == b"postmortem" || number("postmortem", 0) == 1 {
        agent.set_mode(Mode::PostMortem);
        POST_MORTEM.store(true, Ordering::Relaxed);
    }
    install(agent, names);
    if !ok {
        Line::new()
            .text("socscope-board: dictionary refused")
            .print();
        hw::exit(false);
    }

    let seconds = match mode {
        #[cfg(feature = "bench")]
        b"bench" => {
            bench();
            seconds
        }
        b"flood" => {
            scheduled(seconds, true);
            seconds
        }
        // Post-mortem: the run ends at its dump (the first missed deadline after `dump_after` s).
        b"postmortem" => {
            scheduled(seconds.max(dump_after + 2), false);
            u64::from(MS.load(Ordering::Relaxed)) / 1000
        }
        _ => {
            scheduled(seconds, false);
            seconds
        }
    };
    let ok = finish(application, seconds, baud);
    if linger {
        // The host stops QEMU once its collector has read everything: QEMU exiting at once could close a
        // pty before the collector has read the last frames (the kernel discards them).
        loop {
            cortex_m::asm::wfi();
        }
    }
    hw::exit(ok);
}

/// Runs the scheduler for `seconds` of board time; `flood`: thread mode records as fast as it can
/// instead of running the tasks (the UART's sustained rate).
fn scheduled(seconds: u64, flood: bool) {
    // SAFETY: the firmware owns the core peripherals; nothing else takes them.
    let mut core = unsafe { cortex_m::Peripherals::steal() };
    // SAFETY: priorities are set before the interrupts are enabled. Lower is more urgent: vsync, then
    // SysTick, then PendSV.
    unsafe {
        core.SCB.set_priority(SystemHandler::SysTick, 0x40);
        core.SCB.set_priority(SystemHandler::PendSV, 0xf0);
        core.NVIC.set_priority(Irq(hw::TIMER0_IRQ), 0x20);
    }
    let start = now();
    let end = start + seconds * u64::from(SYSCLK_HZ);
    critical_section::with(|cs| STARTED_AT.borrow(cs).set(start));
    let mut tasks = Tasks {
        current: PID_IDLE,
        rng: 0x2545_f491,
        frame_buffer: None,
        next_buffer: 0x6000_0000,
        zaps: 0,
    };
    for (pid, name) in [
        (PID_INPUT, "input"),
        (PID_DECODER, "decoder"),
        (PID_RENDER, "render"),
        (PID_AUDIO, "audio"),
    ] {
        rec(13, |a| a.thread_create(0, pid, name));
    }
    marker("scheduler started");
    RUNNING.store(!flood, Ordering::Relaxed);
    core.SYST.set_clock_source(SystClkSource::Core);
    core.SYST.set_reload(TICKS_PER_MS - 1);
    core.SYST.clear_current();
    core.SYST.enable_interrupt();
    core.SYST.enable_counter();
    // In flood mode the timer interrupts 997 times a second (a prime, so it drifts across SysTick): its
    // latency is measured while thread mode records and PendSV drains as fast as they can.
    let period = if flood { SYSCLK_HZ / 997 } else { VSYNC_PERIOD };
    VSYNC_TICKS.store(period, Ordering::Relaxed);
    hw::vsync_timer_start(period);
    // SAFETY: the vsync handler is ready (DefaultHandler).
    unsafe { NVIC::unmask(Irq(hw::TIMER0_IRQ)) };
    let mut n: u64 = 0;
    while now() < end && !DUMPED.load(Ordering::Relaxed) {
        if flood {
            tasks.switch_to(PID_AUDIO);
            user_entry(scheduled as *const () as usize);
            rec(10, |a| a.mark(0, n));
            user_exit();
            n += 1;
            continue;
        }
        let ready = READY.load(Ordering::Acquire);
        if ready == 0 {
            // The idle thread spins: QEMU's WFI (7.2) sleeps through every other SysTick.
            tasks.switch_to(PID_IDLE);
            continue;
        }
        let pid = ready.trailing_zeros();
        READY.fetch_and(!(1 << pid), Ordering::AcqRel);
        tasks.switch_to(pid);
        tasks.run(pid);
    }
    RUNNING.store(false, Ordering::Relaxed);
    NVIC::mask(Irq(hw::TIMER0_IRQ));
    hw::vsync_timer_stop();
    core.SYST.disable_interrupt();
    core.SYST.disable_counter();
    tasks.switch_to(PID_IDLE);
    marker("scheduler stopped");
}

/// Post-mortem mode: the run dumps once, at its first missed deadline after this many milliseconds.
static POST_MORTEM: AtomicBool = AtomicBool::new(false);
static DUMP_AFTER_MS: AtomicU32 = AtomicU32::new(2000);
static DUMPED: AtomicBool = AtomicBool::new(false);
/// The sequence number of the marker recorded just before the dump (the firmware's own count).
static DUMP_MARKER_SEQ: AtomicU32 = AtomicU32::new(0);
/// The board time the dump took, in clock ticks.
static DUMP_TICKS: AtomicU32 = AtomicU32::new(0);

/// The deadline check's dump: a marker (numbered by the firmware's own count, in the same masked
/// section, so no interrupt record comes between), then the agent's rings through the UART, from thread
/// mode while the interrupts go on.
fn dump_now() {
    let Some(agent) = agent() else {
        return;
    };
    DUMPED.store(true, Ordering::Relaxed);
    critical_section::with(|_| {
        DUMP_MARKER_SEQ.store(NUMBERED.load(Ordering::Relaxed), Ordering::Relaxed);
        marker("deadline missed: post-mortem dump");
    });
    let start = hw::clock_raw();
    loop {
        match with_producer(|p| agent.dump(&mut Uart(p))) {
            Some(Ok(())) => break,
            Some(Err(TransportError::Closed)) => break,
            // The queue is full (SysTick empties it) or the drain holds the agent: try again.
            _ => {}
        }
    }
    DUMP_TICKS.store(hw::clock_raw().wrapping_sub(start), Ordering::Relaxed);
}

/// Sends everything and `Bye` (in post-mortem mode the dump did), then prints the firmware's own
/// counters on the semihosting console.
fn finish(application: &str, seconds: u64, baud: u64) -> bool {
    let Some(agent) = agent() else {
        return false;
    };
    // Probe build: the last blocks and the final counters go into the control block; the host sends
    // them, with `Bye`.
    #[cfg(feature = "probe")]
    {
        agent.probe_finish();
        Line::new()
            .text("socscope-board: probe-control ")
            .num(&SOCSCOPE_PROBE as *const _ as usize as u64)
            .text(" bytes ")
            .num(core::mem::size_of_val(&SOCSCOPE_PROBE) as u64)
            .print();
    }
    #[cfg(not(feature = "probe"))]
    if !POST_MORTEM.load(Ordering::Relaxed) {
        // Until Bye is out, the UART queue emptied in between.
        loop {
            match with_producer(|p| agent.finish(&mut Uart(p))) {
                Some(Ok(())) | Some(Err(TransportError::Closed)) => break,
                _ => {
                    with_consumer(|q| pump(q, u32::MAX));
                }
            }
        }
    }
    let stats: AgentStats = agent.stats();
    // The rest of the queue, then the UART's own byte.
    loop {
        let left = with_consumer(|q| {
            pump(q, u32::MAX);
            q.len()
        })
        .unwrap_or(0);
        if left == 0 && !hw::uart_busy() {
            break;
        }
    }
    let count = |c: &AtomicU32| u64::from(c.load(Ordering::Relaxed));
    let stored: u64 = STORED.iter().map(count).sum();
    let dropped: u64 = DROPPED.iter().map(count).sum();
    let rejected = count(&REJECTED);
    for (type_id, (s, d)) in STORED.iter().zip(DROPPED.iter()).enumerate() {
        let (s, d) = (count(s), count(d));
        if s > 0 || d > 0 {
            Line::new()
                .text("socscope-board: type ")
                .num(type_id as u64)
                .text(" stored ")
                .num(s)
                .text(" dropped ")
                .num(d)
                .print();
        }
    }
    // The bench records straight into the agent, past the firmware's counters: nothing to compare.
    let agrees = application == "bench"
        || (stored == stats.records && dropped == stats.dropped && rejected == 0);
    Line::new()
        .text("socscope-board: mode ")
        .text(application)
        .text(" seconds ")
        .num(seconds)
        .text(" baud ")
        .num(baud)
        .text(" records ")
        .num(stored)
        .text(" dropped ")
        .num(dropped)
        .text(" rejected ")
        .num(rejected)
        .text(" overwritten ")
        .num(stats.overwritten)
        .text(" frames ")
        .num(stats.frames)
        .text(" bytes ")
        .num(stats.bytes)
        .text(" ms ")
        .num(u64::from(MS.load(Ordering::Relaxed)))
        .text(" masked-max-ticks ")
        .num(count(&MASKED.max_ticks))
        .text(" irq-latency-max-ticks ")
        .num(count(&IRQ_LATENCY_MAX))
        .text(if application == "bench" {
            " not-compared"
        } else if agrees {
            " agent-agrees"
        } else {
            " agent-disagrees"
        })
        .print();
    Line::new()
        .text("socscope-board: systicks ")
        .num(count(&SYSTICKS))
        .text(" agent-ram ")
        .num(core::mem::size_of::<BoardAgent>() as u64)
        .text(" agent-state ")
        .num(BoardAgent::state_bytes() as u64)
        .text(" masked-max-at ")
        .num(count(&MASKED.max_at))
        .text(" uart-host-stalled-ms ")
        .num(count(&UART_HOST_STALLED_MS))
        .text(" uart-bytes ")
        .num(count(&UART_BYTES_SENT))
        .print();
    if DUMPED.load(Ordering::Relaxed) {
        Line::new()
            .text("socscope-board: dump marker-seq ")
            .num(count(&DUMP_MARKER_SEQ))
            .text(" numbered ")
            .num(count(&NUMBERED))
            .text(" dump-ticks ")
            .num(count(&DUMP_TICKS))
            .print();
    }
    agrees
}

// ---------------------------------------------------------------------------------------------------------
// bench: the cost of recording, in timer ticks (QEMU -icount makes them instructions).

/// A transport that takes every frame and forgets it.
#[cfg(feature = "bench")]
struct Discard;

#[cfg(feature = "bench")]
impl Transport for Discard {
    fn write_frame(&mut self, _frame: &[u8]) -> Result<(), TransportError> {
        Ok(())
    }
}

#[cfg(feature = "bench")]
const BENCH_ROUNDS: u32 = 64;
#[cfg(feature = "bench")]
const BENCH_BATCH: u32 = 32;

#[cfg(feature = "bench")]
type RecordFn = fn(&BoardAgent, u32) -> Result<Recorded, AgentError>;

/// Prints `bench <what> events N ticks T` for each record kind: the agent's record path alone (its own
/// masked section included, and that section's timing in the `timed-masking` image); `firmware` is the path the
/// firmware uses (its per-type counters too); `drain` is the cost of framing the blocks (header, CRC,
/// COBS in place) per record, into a transport that discards them; `loaded` is thread mode recording while
/// SysTick and a 10 kHz timer interrupt record too and PendSV drains (everything included, per event).
#[cfg(feature = "bench")]
fn bench() {
    let Some(agent) = agent() else {
        return;
    };
    let kinds: [(&str, RecordFn); 18] = [
        ("context_switch", |a, i| {
            a.context_switch(0, i & 7, (i + 1) & 7)
        }),
        ("irq", |a, _| a.irq_entry(0, IRQ_VSYNC)),
        ("irq_exit", |a, _| a.irq_exit(0)),
        ("softirq", |a, _| a.softirq_entry(0, 0x0000_1234)),
        ("softirq_exit", |a, _| a.softirq_exit(0)),
        ("syscall", |a, i| {
            a.syscall_entry(0, 63, [0, 0x2000_8000, u64::from(i), 0])
        }),
        ("syscall_exit", |a, i| a.syscall_exit(0, 63, i64::from(i))),
        ("wakeup", |a, i| a.wakeup(0, i & 7)),
        ("marker", |a, _| a.marker(0, "key: channel up")),
        ("mark", |a, i| a.mark(0, u64::from(i))),
        ("user_function", |a, i| {
            a.user_entry(0, 0x0000_0400 + u64::from(i & 15) * 64)
        }),
        ("user_function_exit", |a, _| a.user_exit(0)),
        ("thread_create", |a, _| {
            a.thread_create(0, PID_ZAPPER, "zapper")
        }),
        ("thread_exit", |a, _| a.thread_exit(0, PID_ZAPPER)),
        ("kmalloc", |a, i| {
            a.kmalloc(0, 4096, 0x6000_0000 + u64::from(i) * 4096)
        }),
        ("kfree", |a, i| {
            a.kfree(0, 0x6000_0000 + u64::from(i) * 4096)
        }),
        ("vsync_slack_us", |a, i| {
            a.record(0, T_VSYNC_SLACK, &[ParamValue::Signed(i64::from(i) - 16)])
        }),
        ("deadline_miss", |a, i| {
            a.record(
                0,
                T_DEADLINE_MISS,
                &[
                    ParamValue::Unsigned(u64::from(i)),
                    ParamValue::Unsigned(1200),
                ],
            )
        }),
    ];
    // The measuring loop with nothing in it: subtracted from every batch.
    let mut empty: u64 = 0;
    for _ in 0..BENCH_ROUNDS {
        let t0 = hw::clock_raw();
        for i in 0..BENCH_BATCH {
            core::hint::black_box(i);
        }
        empty += u64::from(hw::clock_raw().wrapping_sub(t0));
    }
    Line::new()
        .text("bench empty-loop events ")
        .num(u64::from(BENCH_ROUNDS * BENCH_BATCH))
        .text(" ticks ")
        .num(empty)
        .print();
    let mut drain_ticks: u64 = 0;
    let mut drained: u64 = 0;
    for (name, f) in kinds {
        let mut ticks: u64 = 0;
        let mut stored: u64 = 0;
        for _ in 0..BENCH_ROUNDS {
            let before = agent.stats().records;
            let t0 = hw::clock_raw();
            for i in 0..BENCH_BATCH {
                let _ = f(core::hint::black_box(agent), i);
            }
            ticks += u64::from(hw::clock_raw().wrapping_sub(t0));
            stored += agent.stats().records - before;
            let t1 = hw::clock_raw();
            let _ = agent.flush(&mut Discard);
            drain_ticks += u64::from(hw::clock_raw().wrapping_sub(t1));
            drained += agent.stats().records - before;
        }
        Line::new()
            .text("bench record ")
            .text(name)
            .text(" events ")
            .num(stored)
            .text(" ticks ")
            .num(ticks)
            .print();
    }
    Line::new()
        .text("bench drain all events ")
        .num(drained)
        .text(" ticks ")
        .num(drain_ticks)
        .print();
    // The firmware's own path: its counters around each record.
    let mut ticks: u64 = 0;
    let mut events: u64 = 0;
    for round in 0..BENCH_ROUNDS {
        let t0 = hw::clock_raw();
        for i in 0..BENCH_BATCH {
            if i % 2 == 0 {
                user_entry(0x0000_0400 + (round as usize & 15) * 64);
            } else {
                user_exit();
            }
        }
        ticks += u64::from(hw::clock_raw().wrapping_sub(t0));
        events += u64::from(BENCH_BATCH);
        let _ = agent.flush(&mut Discard);
    }
    Line::new()
        .text("bench firmware user_function+exit events ")
        .num(events)
        .text(" ticks ")
        .num(ticks)
        .print();
    // The drain as a streaming board at a high rate runs it: on full blocks. The ring is filled to
    // about six of its eight blocks with the firmware's mix (context switches, interrupts, user
    // functions), then drained.
    let mut ticks: u64 = 0;
    let mut events: u64 = 0;
    for round in 0..8u32 {
        let before = agent.stats().records;
        for i in 0..100u32 {
            let _ = agent.context_switch(0, i & 7, (i + 1) & 7);
            let _ = agent.irq_entry(0, IRQ_VSYNC);
            let _ = agent.user_entry(0, 0x0000_0400 + u64::from((i + round) & 15) * 64);
            let _ = agent.user_exit(0);
            let _ = agent.irq_exit(0);
        }
        let t0 = hw::clock_raw();
        let _ = agent.flush(&mut Discard);
        ticks += u64::from(hw::clock_raw().wrapping_sub(t0));
        events += agent.stats().records - before;
    }
    Line::new()
        .text("bench drain-full events ")
        .num(events)
        .text(" ticks ")
        .num(ticks)
        .print();
    bench_loaded(agent);
}

/// Thread mode records user-function entries and exits while SysTick (1 kHz) and the timer (10 kHz)
/// interrupt and record, and PendSV drains into a discarding transport: the board's cost per event
/// with everything running.
#[cfg(feature = "bench")]
fn bench_loaded(agent: &BoardAgent) {
    // SAFETY: the firmware owns the core peripherals; nothing else takes them.
    let mut core = unsafe { cortex_m::Peripherals::steal() };
    // SAFETY: priorities are set before the interrupts are enabled.
    unsafe {
        core.SCB.set_priority(SystemHandler::SysTick, 0x40);
        core.SCB.set_priority(SystemHandler::PendSV, 0xf0);
        core.NVIC.set_priority(Irq(hw::TIMER0_IRQ), 0x20);
    }
    DRAIN_DISCARDS.store(true, Ordering::Relaxed);
    let _ = agent.flush(&mut Discard);
    let before = agent.stats();
    let start = now();
    critical_section::with(|cs| STARTED_AT.borrow(cs).set(start));
    core.SYST.set_clock_source(SystClkSource::Core);
    core.SYST.set_reload(TICKS_PER_MS - 1);
    core.SYST.clear_current();
    core.SYST.enable_interrupt();
    core.SYST.enable_counter();
    VSYNC_TICKS.store(SYSCLK_HZ / 10_000, Ordering::Relaxed);
    hw::vsync_timer_start(SYSCLK_HZ / 10_000);
    // SAFETY: the vsync handler is ready (DefaultHandler).
    unsafe { NVIC::unmask(Irq(hw::TIMER0_IRQ)) };
    let t0 = hw::clock_raw();
    let mut thread_events: u64 = 0;
    for round in 0..BENCH_ROUNDS * 16 {
        for i in 0..BENCH_BATCH {
            if i % 2 == 0 {
                user_entry(0x0000_0400 + (round as usize & 15) * 64);
            } else {
                user_exit();
            }
        }
        thread_events += u64::from(BENCH_BATCH);
    }
    let ticks = hw::clock_raw().wrapping_sub(t0);
    NVIC::mask(Irq(hw::TIMER0_IRQ));
    hw::vsync_timer_stop();
    core.SYST.disable_interrupt();
    core.SYST.disable_counter();
    let after = agent.stats();
    let events = (after.records + after.dropped) - (before.records + before.dropped);
    Line::new()
        .text("bench loaded events ")
        .num(events)
        .text(" ticks ")
        .num(u64::from(ticks))
        .text(" thread-events ")
        .num(thread_events)
        .text(" dropped ")
        .num(after.dropped - before.dropped)
        .print();
    DRAIN_DISCARDS.store(false, Ordering::Relaxed);
}

unsafe extern "C" {
    /// Deliberately undefined: referenced only from the panic handler.
    fn socscope_firmware_must_not_panic() -> !;
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    // SAFETY: never linked; a reference to it that survives optimisation fails the build, which is the point.
    unsafe { socscope_firmware_must_not_panic() }
}
