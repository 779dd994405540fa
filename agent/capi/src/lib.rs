//! The agent for C programs: the functions `include/socscope_agent.h` declares, over a static library.
//!
//! The agent lives in memory the caller provides (`socscope_agent_init`), with rings for
//! [`CPUS`] CPUs of [`BLOCKS`] blocks of [`BLOCK`] bytes; it never allocates. Time comes from a clock
//! callback, frames go out through a write callback given to `socscope_poll`, `socscope_flush` and
//! `socscope_finish`. Every function returns a status (`SOCSCOPE_STORED`, `SOCSCOPE_DROPPED`, `SOCSCOPE_OK`
//! or a negative `SOCSCOPE_ERR_*`) instead of panicking; on `thumbv7em-none-eabihf` the panic handler
//! calls an undefined symbol, so linking the library fails if any panicking path is reachable
//! (`scripts/build-bare-metal.sh` links it with every exported function kept).
//!
//! Record and drain calls may come from any context: each record masks interrupts for that record only
//! (PRIMASK on an Arm microcontroller, provided here; a global mutex on a host), a drain only to claim a
//! finished block; a drain called while another runs returns `SOCSCOPE_ERR_WOULD_BLOCK`. Set-up calls
//! (`socscope_agent_init`, `socscope_register_*`, `socscope_set_mode`) come before any other. Strings handed to `socscope_agent_init`, `socscope_register_producer` and
//! `socscope_register_type` are not copied: they must outlive the agent (string literals do).
#![no_std]

#[cfg(not(target_os = "none"))]
extern crate std;

use core::ffi::{CStr, c_char, c_int, c_void};
use core::mem::{align_of, size_of};

use socscope_agent::{
    Agent, AgentError, AgentStats, Clock, Config, Mode, Recorded, Transport, TransportError,
    frame_buffer_len,
};
use socscope_wire::MAX_PARAMS;
use socscope_wire::dict::{Category, EventTypeDef, ParamDef, ParamType, ProducerDef, ProducerKind};
use socscope_wire::frame::ParamValue;

/// CPUs an agent records (`socscope_config.cpu_count` is clamped to it).
pub const CPUS: usize = 4;
/// Bytes per ring block (one `Events` frame).
pub const BLOCK: usize = 256;
/// Blocks per CPU ring.
pub const BLOCKS: usize = 8;
/// Producers an agent can declare.
pub const PRODUCERS: usize = 64;
/// Custom event types an agent can declare.
pub const TYPES: usize = 32;
/// `SOCSCOPE_AGENT_SIZE`: bytes of memory `socscope_agent_init` needs at most, on any target (the exact
/// figure for this build is `socscope_agent_size()`).
pub const AGENT_SIZE: usize = 32768;
/// `SOCSCOPE_AGENT_ALIGN`: the alignment that memory needs.
pub const AGENT_ALIGN: usize = 8;

/// `SOCSCOPE_OK`: done.
pub const OK: c_int = 0;
/// `SOCSCOPE_STORED`: the record is in a ring.
pub const STORED: c_int = 0;
/// `SOCSCOPE_DROPPED`: the CPU's ring was full; the record is counted as lost and reported.
pub const DROPPED: c_int = 1;
/// `SOCSCOPE_ERR_NULL`: a required pointer is NULL.
pub const ERR_NULL: c_int = -1;
/// `SOCSCOPE_ERR_NOT_INITIALISED`: the agent was not set up by `socscope_agent_init`.
pub const ERR_NOT_INITIALISED: c_int = -2;
/// `SOCSCOPE_ERR_MEMORY`: the memory given to `socscope_agent_init` is too small or misaligned.
pub const ERR_MEMORY: c_int = -3;
/// `SOCSCOPE_ERR_UTF8`: a string is not valid UTF-8.
pub const ERR_UTF8: c_int = -4;
/// `SOCSCOPE_ERR_DICTIONARY_FULL`: no room for another producer or event type.
pub const ERR_DICTIONARY_FULL: c_int = -5;
/// `SOCSCOPE_ERR_NAME_TOO_LONG`: a name is longer than 64 bytes.
pub const ERR_NAME_TOO_LONG: c_int = -6;
/// `SOCSCOPE_ERR_TOO_MANY_PARAMS`: more than 8 parameters.
pub const ERR_TOO_MANY_PARAMS: c_int = -7;
/// `SOCSCOPE_ERR_RESERVED_TYPE`: custom event types use ids 64 to 65535.
pub const ERR_RESERVED_TYPE: c_int = -8;
/// `SOCSCOPE_ERR_DUPLICATE_TYPE`: the event type id is declared already.
pub const ERR_DUPLICATE_TYPE: c_int = -9;
/// `SOCSCOPE_ERR_UNKNOWN_TYPE`: the record's event type is not declared.
pub const ERR_UNKNOWN_TYPE: c_int = -10;
/// `SOCSCOPE_ERR_PARAM_MISMATCH`: the values do not match the type's parameters.
pub const ERR_PARAM_MISMATCH: c_int = -11;
/// `SOCSCOPE_ERR_BAD_CPU`: the CPU number is not below the configured count.
pub const ERR_BAD_CPU: c_int = -12;
/// `SOCSCOPE_ERR_RECORD_TOO_LARGE`: the record does not fit in a block.
pub const ERR_RECORD_TOO_LARGE: c_int = -13;
/// `SOCSCOPE_ERR_BAD_ARGUMENT`: an enumeration value (kind, category, parameter type) is out of range.
pub const ERR_BAD_ARGUMENT: c_int = -14;
/// `SOCSCOPE_ERR_WOULD_BLOCK`: the transport took nothing now; the rest stays queued for the next call.
pub const ERR_WOULD_BLOCK: c_int = -15;
/// `SOCSCOPE_ERR_CLOSED`: the transport is closed.
pub const ERR_CLOSED: c_int = -16;
/// `SOCSCOPE_ERR_DECLARATION_TOO_LARGE`: the declaration's frame is larger than the agent's control-frame
/// buffer.
pub const ERR_DECLARATION_TOO_LARGE: c_int = -17;
/// `SOCSCOPE_ERR_NOT_A_REFUSAL`: the bytes read back from the link are not a whole, intact `Refusal`.
pub const ERR_NOT_A_REFUSAL: c_int = -18;

/// `SOCSCOPE_AGENT_API_VERSION`: 2 added post-mortem mode (`socscope_set_mode`, `socscope_agent_dump`,
/// `socscope_stats.overwritten`), and recording from any context without the caller's lock.
pub const API_VERSION: c_int = 2;

/// `SOCSCOPE_MODE_STREAM`: a full ring drops the newest records (counted, reported in `Loss` frames).
pub const MODE_STREAM: u32 = 0;
/// `SOCSCOPE_MODE_POST_MORTEM`: a full ring overwrites its oldest block (counted); nothing is sent until
/// `socscope_agent_dump`.
pub const MODE_POST_MORTEM: u32 = 1;

/// `socscope_write_fn` returns this when it sent the whole frame.
pub const WRITE_OK: c_int = 0;
/// `socscope_write_fn` returns this when it cannot take the frame now.
pub const WRITE_WOULD_BLOCK: c_int = 1;

const MAGIC: u32 = 0x5c05_c09e;

/// `socscope_clock_fn`: the board's time in ticks of `tick_rate_hz`.
pub type ClockFn = Option<unsafe extern "C" fn(user: *mut c_void) -> u64>;
/// `socscope_write_fn`: sends one whole frame; returns `SOCSCOPE_WRITE_OK`, `SOCSCOPE_WRITE_WOULD_BLOCK`
/// or anything else for a closed link.
pub type WriteFn =
    Option<unsafe extern "C" fn(user: *mut c_void, frame: *const u8, len: usize) -> c_int>;

/// `socscope_config`: the board's identity and timing (`Config` of the Rust agent).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CConfig {
    /// Board name.
    pub board: *const c_char,
    /// System on chip.
    pub soc: *const c_char,
    /// Operating system.
    pub os: *const c_char,
    /// Traced application.
    pub application: *const c_char,
    /// Shared secret the collector requires, or NULL / "" for none.
    pub token: *const c_char,
    /// CPUs that record (1 to 4).
    pub cpu_count: u16,
    /// Clock ticks per second.
    pub tick_rate_hz: u64,
    /// A number telling this session from earlier ones.
    pub session_id: u64,
    /// A partly filled block is sent once its first record is this old.
    pub flush_latency_ticks: u64,
    /// A heartbeat goes out after this long without any other frame.
    pub heartbeat_ticks: u64,
    /// Hello and the dictionary are sent again this often (0: only at the start).
    pub hello_every_ticks: u64,
}

/// `socscope_param`: one parameter of a custom event type.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CParam {
    /// Its name.
    pub name: *const c_char,
    /// `SOCSCOPE_PARAM_*`.
    pub ty: u32,
}

/// `socscope_value`: one value of a record of a custom type; `ty` says which field is read.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CValue {
    /// `SOCSCOPE_PARAM_*`.
    pub ty: u32,
    /// `SOCSCOPE_PARAM_SIGNED`.
    pub i: i64,
    /// `SOCSCOPE_PARAM_UNSIGNED` and `SOCSCOPE_PARAM_ADDRESS`.
    pub u: u64,
    /// `SOCSCOPE_PARAM_FLOAT`.
    pub f: f64,
    /// `SOCSCOPE_PARAM_STRING`: NUL-terminated UTF-8.
    pub s: *const c_char,
}

/// `socscope_stats`: the agent's counters since the session started.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CStats {
    /// Records accepted into the rings.
    pub records: u64,
    /// Records dropped because a ring was full (all reported in `Loss` frames).
    pub dropped: u64,
    /// Records refused as invalid.
    pub rejected: u64,
    /// Records whose timestamp went backwards on their CPU.
    pub clock_regressions: u64,
    /// Frames written to the transport.
    pub frames: u64,
    /// Bytes written to the transport.
    pub bytes: u64,
    /// Records overwritten in post-mortem mode before a dump could send them (part of `records`).
    pub overwritten: u64,
}

struct CClock {
    now: ClockFn,
    user: *mut c_void,
}

impl Clock for CClock {
    fn now(&mut self) -> u64 {
        match self.now {
            // SAFETY: the caller gave this callback and its argument to socscope_agent_init.
            Some(f) => unsafe { f(self.user) },
            None => 0,
        }
    }
}

struct CTransport {
    write: WriteFn,
    user: *mut c_void,
}

impl Transport for CTransport {
    fn write_frame(&mut self, frame: &[u8]) -> Result<(), TransportError> {
        let Some(write) = self.write else {
            return Err(TransportError::Closed);
        };
        // SAFETY: the caller gave this callback and its argument; the frame is valid for the call.
        match unsafe { write(self.user, frame.as_ptr(), frame.len()) } {
            WRITE_OK => Ok(()),
            WRITE_WOULD_BLOCK => Err(TransportError::WouldBlock),
            _ => Err(TransportError::Closed),
        }
    }
}

type CAgent = Agent<CClock, CPUS, BLOCK, BLOCKS, { frame_buffer_len(BLOCK) }, PRODUCERS, TYPES>;

const NO_PARAM: ParamDef<'static> = ParamDef {
    name: "",
    ty: ParamType::Unsigned,
};

/// `socscope_agent`: what `socscope_agent_init` builds in the caller's memory.
pub struct Instance {
    magic: u32,
    agent: CAgent,
    /// Parameter lists of the declared types (the dictionary refers to them).
    params: [[ParamDef<'static>; MAX_PARAMS]; TYPES],
    types: usize,
}

const _: () = assert!(size_of::<Instance>() <= AGENT_SIZE);
const _: () = assert!(align_of::<Instance>() <= AGENT_ALIGN);

fn status(e: AgentError) -> c_int {
    match e {
        AgentError::DictionaryFull => ERR_DICTIONARY_FULL,
        AgentError::NameTooLong => ERR_NAME_TOO_LONG,
        AgentError::TooManyParams => ERR_TOO_MANY_PARAMS,
        AgentError::ReservedTypeId => ERR_RESERVED_TYPE,
        AgentError::DuplicateType => ERR_DUPLICATE_TYPE,
        AgentError::UnknownType => ERR_UNKNOWN_TYPE,
        AgentError::ParamMismatch => ERR_PARAM_MISMATCH,
        AgentError::BadCpu => ERR_BAD_CPU,
        AgentError::RecordTooLarge => ERR_RECORD_TOO_LARGE,
        AgentError::DeclarationTooLarge => ERR_DECLARATION_TOO_LARGE,
        _ => ERR_BAD_ARGUMENT,
    }
}

fn recorded(r: Result<Recorded, AgentError>) -> c_int {
    match r {
        Ok(Recorded::Stored) => STORED,
        Ok(Recorded::Dropped) => DROPPED,
        Err(e) => status(e),
    }
}

fn sent(r: Result<(), TransportError>) -> c_int {
    match r {
        Ok(()) => OK,
        Err(TransportError::WouldBlock) => ERR_WOULD_BLOCK,
        Err(_) => ERR_CLOSED,
    }
}

/// A C string the caller keeps alive for the agent's lifetime (documented contract).
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that outlives the agent.
unsafe fn static_str(p: *const c_char) -> Result<&'static str, c_int> {
    if p.is_null() {
        return Err(ERR_NULL);
    }
    // SAFETY: per the function's contract.
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str().map_err(|_| ERR_UTF8)
}

/// A C string valid for the call only.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string.
unsafe fn call_str<'a>(p: *const c_char) -> Result<&'a str, c_int> {
    if p.is_null() {
        return Err(ERR_NULL);
    }
    // SAFETY: per the function's contract.
    unsafe { CStr::from_ptr(p) }.to_str().map_err(|_| ERR_UTF8)
}

fn param_type(t: u32) -> Option<ParamType> {
    Some(match t {
        0 => ParamType::Signed,
        1 => ParamType::Unsigned,
        2 => ParamType::Float,
        3 => ParamType::String,
        4 => ParamType::Address,
        _ => return None,
    })
}

/// The initialised agent behind `a`.
///
/// # Safety
/// `a` is NULL or points to memory given to `socscope_agent_init` (initialised or not).
unsafe fn instance<'a>(a: *mut Instance) -> Result<&'a mut Instance, c_int> {
    if a.is_null() {
        return Err(ERR_NULL);
    }
    // SAFETY: per the function's contract, the memory is at least an Instance's size; the magic number
    // tells an initialised one.
    let inst = unsafe { &mut *a };
    if inst.magic != MAGIC {
        return Err(ERR_NOT_INITIALISED);
    }
    Ok(inst)
}

/// The initialised agent behind a handle, or the function returns the error status.
macro_rules! agent {
    ($a:expr) => {
        // SAFETY: the exported functions' contract: the handle comes from socscope_agent_init.
        match unsafe { instance($a) } {
            Ok(inst) => inst,
            Err(e) => return e,
        }
    };
}

/// Bytes `socscope_agent_init` needs for this build (at most `SOCSCOPE_AGENT_SIZE`).
#[unsafe(no_mangle)]
pub extern "C" fn socscope_agent_size() -> usize {
    size_of::<Instance>()
}

/// Sets up an agent in `memory` (`size` bytes, aligned to `SOCSCOPE_AGENT_ALIGN`) and stores its handle in
/// `*agent`. Nothing is sent until `socscope_poll`.
///
/// # Safety
/// `memory` points to `size` writable bytes that stay in place while the agent is used; `config` and
/// `agent` are valid pointers; the strings of `config` outlive the agent; `clock` may be called with
/// `clock_user` whenever the agent is used.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn socscope_agent_init(
    memory: *mut c_void,
    size: usize,
    config: *const CConfig,
    clock: ClockFn,
    clock_user: *mut c_void,
    agent: *mut *mut Instance,
) -> c_int {
    if memory.is_null() || config.is_null() || agent.is_null() || clock.is_none() {
        return ERR_NULL;
    }
    if size < size_of::<Instance>() || !memory.cast::<Instance>().is_aligned() {
        return ERR_MEMORY;
    }
    // SAFETY: checked non-NULL; the caller passes a valid config.
    let c = unsafe { *config };
    // SAFETY: the strings outlive the agent (contract).
    let names = unsafe {
        (
            static_str(c.board),
            static_str(c.soc),
            static_str(c.os),
            static_str(c.application),
            if c.token.is_null() {
                Ok("")
            } else {
                static_str(c.token)
            },
        )
    };
    let (Ok(board), Ok(soc), Ok(os), Ok(application), Ok(token)) = names else {
        let (a, b, d, e, f) = names;
        return [a.err(), b.err(), d.err(), e.err(), f.err()]
            .into_iter()
            .flatten()
            .next()
            .unwrap_or(ERR_BAD_ARGUMENT);
    };
    let inst = memory.cast::<Instance>();
    // SAFETY: `memory` is large enough and aligned (checked above) and the caller's to write.
    unsafe {
        inst.write(Instance {
            magic: MAGIC,
            agent: CAgent::new(
                CClock {
                    now: clock,
                    user: clock_user,
                },
                Config {
                    board,
                    soc,
                    os,
                    application,
                    cpu_count: c.cpu_count,
                    tick_rate_hz: c.tick_rate_hz,
                    session_id: c.session_id,
                    flush_latency_ticks: c.flush_latency_ticks,
                    heartbeat_ticks: c.heartbeat_ticks,
                    hello_every_ticks: c.hello_every_ticks,
                    token,
                },
            ),
            params: [[NO_PARAM; MAX_PARAMS]; TYPES],
            types: 0,
        });
        *agent = inst;
    }
    OK
}

/// Declares a producer (`SOCSCOPE_PRODUCER_*` kind); `parent` is a producer id or -1 for none.
///
/// # Safety
/// `agent` comes from `socscope_agent_init`; `name` is a NUL-terminated string that outlives the agent.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn socscope_register_producer(
    agent: *mut Instance,
    id: u32,
    parent: i64,
    kind: u32,
    local_id: u64,
    name: *const c_char,
) -> c_int {
    let kind = match kind {
        0 => ProducerKind::Process,
        1 => ProducerKind::Thread,
        2 => ProducerKind::Irq,
        3 => ProducerKind::SoftIrq,
        4 => ProducerKind::Cpu,
        _ => return ERR_BAD_ARGUMENT,
    };
    let parent = match parent {
        -1 => None,
        p => match u32::try_from(p) {
            Ok(p) => Some(p),
            Err(_) => return ERR_BAD_ARGUMENT,
        },
    };
    // SAFETY: per the function's contract.
    let name = match unsafe { static_str(name) } {
        Ok(n) => n,
        Err(e) => return e,
    };
    let inst = agent!(agent);
    match inst.agent.register_producer(ProducerDef {
        id,
        parent,
        kind,
        local_id,
        name,
    }) {
        Ok(()) => OK,
        Err(e) => status(e),
    }
}

/// Declares a custom event type: `id` ≥ 64, `category` a `SOCSCOPE_CATEGORY_*` (`enter`: the entry type
/// a `SOCSCOPE_CATEGORY_STATE_EXIT` closes), `count` parameters.
///
/// # Safety
/// `agent` comes from `socscope_agent_init`; `name` and the parameters' names are NUL-terminated strings
/// that outlive the agent; `params` points to `count` parameters (or is NULL when `count` is 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn socscope_register_type(
    agent: *mut Instance,
    id: u16,
    name: *const c_char,
    category: u32,
    enter: u16,
    params: *const CParam,
    count: usize,
) -> c_int {
    let category = match category {
        0 => Category::Punctual,
        1 => Category::StateEnter,
        2 => Category::StateExit { enter },
        3 => Category::Variable,
        _ => return ERR_BAD_ARGUMENT,
    };
    if count > MAX_PARAMS {
        return ERR_TOO_MANY_PARAMS;
    }
    if count > 0 && params.is_null() {
        return ERR_NULL;
    }
    // SAFETY: per the function's contract.
    let name = match unsafe { static_str(name) } {
        Ok(n) => n,
        Err(e) => return e,
    };
    let inst = agent!(agent);
    let Some(slot) = inst.params.get_mut(inst.types) else {
        return ERR_DICTIONARY_FULL;
    };
    for i in 0..count {
        // SAFETY: `params` holds `count` entries (contract).
        let p = unsafe { *params.add(i) };
        let Some(ty) = param_type(p.ty) else {
            return ERR_BAD_ARGUMENT;
        };
        // SAFETY: the name outlives the agent (contract).
        let pname = match unsafe { static_str(p.name) } {
            Ok(n) => n,
            Err(e) => return e,
        };
        if let Some(d) = slot.get_mut(i) {
            *d = ParamDef { name: pname, ty };
        }
    }
    let list = slot.get(..count).unwrap_or_default();
    // SAFETY: the list lives in the agent's own memory, which stays in place for the agent's
    // lifetime (contract of socscope_agent_init), and is never written again for this type.
    let list: &'static [ParamDef<'static>] =
        unsafe { core::slice::from_raw_parts(list.as_ptr(), list.len()) };
    match inst.agent.register_type(EventTypeDef {
        id,
        name,
        category,
        params: list,
    }) {
        Ok(()) => {
            inst.types += 1;
            OK
        }
        Err(e) => status(e),
    }
}

/// Records an event of any declared type (built-in or custom) with `count` values.
///
/// # Safety
/// `agent` comes from `socscope_agent_init`; `values` points to `count` values (or is NULL when `count` is
/// 0), whose strings are NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn socscope_record(
    agent: *mut Instance,
    cpu: u16,
    type_id: u16,
    values: *const CValue,
    count: usize,
) -> c_int {
    if count > MAX_PARAMS {
        return ERR_PARAM_MISMATCH;
    }
    if count > 0 && values.is_null() {
        return ERR_NULL;
    }
    let mut converted = [ParamValue::Unsigned(0); MAX_PARAMS];
    for i in 0..count {
        // SAFETY: `values` holds `count` entries (contract).
        let v = unsafe { *values.add(i) };
        let value = match v.ty {
            0 => ParamValue::Signed(v.i),
            1 => ParamValue::Unsigned(v.u),
            2 => ParamValue::Float(v.f),
            // SAFETY: the string is NUL-terminated (contract) and only read during this call.
            3 => match unsafe { call_str(v.s) } {
                Ok(s) => ParamValue::Str(s),
                Err(e) => return e,
            },
            4 => ParamValue::Address(v.u),
            _ => return ERR_BAD_ARGUMENT,
        };
        if let Some(slot) = converted.get_mut(i) {
            *slot = value;
        }
    }
    let values = converted.get(..count).unwrap_or_default();
    let inst = agent!(agent);
    recorded(inst.agent.record(cpu, type_id, values))
}

macro_rules! record_fn {
    ($(#[$doc:meta])* $name:ident ( $($arg:ident : $ty:ty),* ) => |$a:ident| $body:expr) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// `agent` comes from `socscope_agent_init`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(agent: *mut Instance, cpu: u16 $(, $arg: $ty)*) -> c_int {
            let $a = &mut agent!(agent).agent;
            recorded($body(cpu))
        }
    };
}

record_fn!(
    /// `C`: the running thread on `cpu` changes from `prev` to `next`.
    socscope_context_switch(prev: u32, next: u32) => |a| |cpu| a.context_switch(cpu, prev, next));
record_fn!(
    /// `I`: interrupt `irq` starts.
    socscope_irq_entry(irq: u32) => |a| |cpu| a.irq_entry(cpu, irq));
record_fn!(
    /// `i`: the current interrupt ends.
    socscope_irq_exit() => |a| |cpu| a.irq_exit(cpu));
record_fn!(
    /// `S`: a soft IRQ handler at address `handler` starts.
    socscope_softirq_entry(handler: u64) => |a| |cpu| a.softirq_entry(cpu, handler));
record_fn!(
    /// `s`: the current soft IRQ ends.
    socscope_softirq_exit() => |a| |cpu| a.softirq_exit(cpu));
record_fn!(
    /// `E`: system call `nr` starts with arguments `a0` to `a3`.
    socscope_syscall_entry(nr: u32, a0: u64, a1: u64, a2: u64, a3: u64) =>
        |a| |cpu| a.syscall_entry(cpu, nr, [a0, a1, a2, a3]));
record_fn!(
    /// `X`: system call `nr` returns `ret`.
    socscope_syscall_exit(nr: u32, ret: i64) => |a| |cpu| a.syscall_exit(cpu, nr, ret));
record_fn!(
    /// `W`: the running thread wakes thread `pid`.
    socscope_wakeup(pid: u32) => |a| |cpu| a.wakeup(cpu, pid));
record_fn!(
    /// `KM`: a numbered mark.
    socscope_mark(id: u64) => |a| |cpu| a.mark(cpu, id));
record_fn!(
    /// `U`: the user function at `address` starts.
    socscope_user_entry(address: u64) => |a| |cpu| a.user_entry(cpu, address));
record_fn!(
    /// `u`: the current user function returns.
    socscope_user_exit() => |a| |cpu| a.user_exit(cpu));
record_fn!(
    /// `KX`: thread `pid` exits.
    socscope_thread_exit(pid: u32) => |a| |cpu| a.thread_exit(cpu, pid));
record_fn!(
    /// `MM`: `size` bytes allocated at `ptr`.
    socscope_kmalloc(size: u64, ptr: u64) => |a| |cpu| a.kmalloc(cpu, size, ptr));
record_fn!(
    /// `MF`: the allocation at `ptr` is freed.
    socscope_kfree(ptr: u64) => |a| |cpu| a.kfree(cpu, ptr));

/// `K`: a text marker (NUL-terminated UTF-8, copied into the record).
///
/// # Safety
/// `agent` comes from `socscope_agent_init`; `text` is a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn socscope_marker(
    agent: *mut Instance,
    cpu: u16,
    text: *const c_char,
) -> c_int {
    // SAFETY: per the function's contract.
    let text = match unsafe { call_str(text) } {
        Ok(t) => t,
        Err(e) => return e,
    };
    let inst = agent!(agent);
    recorded(inst.agent.marker(cpu, text))
}

/// `Kc`: thread `pid` named `name` (NUL-terminated UTF-8, copied into the record) is created.
///
/// # Safety
/// `agent` comes from `socscope_agent_init`; `name` is a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn socscope_thread_create(
    agent: *mut Instance,
    cpu: u16,
    pid: u32,
    name: *const c_char,
) -> c_int {
    // SAFETY: per the function's contract.
    let name = match unsafe { call_str(name) } {
        Ok(t) => t,
        Err(e) => return e,
    };
    let inst = agent!(agent);
    recorded(inst.agent.thread_create(cpu, pid, name))
}

/// Sends what is due through `write`: Hello, new dictionary entries, full or old blocks, loss reports, a
/// heartbeat when idle. Returns `SOCSCOPE_OK`, or `SOCSCOPE_ERR_WOULD_BLOCK` (the rest stays queued).
///
/// # Safety
/// `agent` comes from `socscope_agent_init`; `write` may be called with `user` during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn socscope_poll(
    agent: *mut Instance,
    write: WriteFn,
    user: *mut c_void,
) -> c_int {
    let inst = agent!(agent);
    sent(inst.agent.poll(&mut CTransport { write, user }))
}

/// Sends everything queued, partly filled blocks included.
///
/// # Safety
/// As `socscope_poll`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn socscope_flush(
    agent: *mut Instance,
    write: WriteFn,
    user: *mut c_void,
) -> c_int {
    let inst = agent!(agent);
    sent(inst.agent.flush(&mut CTransport { write, user }))
}

/// Sends everything and ends the session with `Bye` (which carries the record and drop totals).
///
/// # Safety
/// As `socscope_poll`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn socscope_finish(
    agent: *mut Instance,
    write: WriteFn,
    user: *mut c_void,
) -> c_int {
    let inst = agent!(agent);
    sent(inst.agent.finish(&mut CTransport { write, user }))
}

/// Chooses what a full ring does (before recording starts): `SOCSCOPE_MODE_STREAM` (drop the newest,
/// counted) or `SOCSCOPE_MODE_POST_MORTEM` (overwrite the oldest, counted; nothing is sent until
/// `socscope_agent_dump`).
///
/// # Safety
/// `agent` comes from `socscope_agent_init`, and no other call on it runs at the same time.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn socscope_set_mode(agent: *mut Instance, mode: u32) -> c_int {
    let mode = match mode {
        MODE_STREAM => Mode::Stream,
        MODE_POST_MORTEM => Mode::PostMortem,
        _ => return ERR_BAD_ARGUMENT,
    };
    let inst = agent!(agent);
    inst.agent.set_mode(mode);
    OK
}

/// Post-mortem mode: sends what the rings hold now through `write`, as a session of its own (Hello, the
/// dictionary, a Window frame and the records per CPU, the totals and Bye), e.g. from a watchdog, a
/// fault handler or a deadline check. Returns `SOCSCOPE_OK` when all of it is out, or
/// `SOCSCOPE_ERR_WOULD_BLOCK`: call it again, it goes on where it stopped. In streaming mode, the same as
/// `socscope_flush`.
///
/// # Safety
/// As `socscope_poll`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn socscope_agent_dump(
    agent: *mut Instance,
    write: WriteFn,
    user: *mut c_void,
) -> c_int {
    let inst = agent!(agent);
    sent(inst.agent.dump(&mut CTransport { write, user }))
}

/// Sends Hello and the whole dictionary again at the next poll (after a reconnection).
///
/// # Safety
/// `agent` comes from `socscope_agent_init`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn socscope_restart_session(agent: *mut Instance) -> c_int {
    let inst = agent!(agent);
    inst.agent.restart_session();
    OK
}

/// Copies the agent's counters (records stored, dropped, rejected...) into `*stats`.
///
/// # Safety
/// `agent` comes from `socscope_agent_init`; `stats` is a valid pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn socscope_get_stats(agent: *mut Instance, stats: *mut CStats) -> c_int {
    if stats.is_null() {
        return ERR_NULL;
    }
    let inst = agent!(agent);
    let s: AgentStats = inst.agent.stats();
    // SAFETY: checked non-NULL; the caller's to write.
    unsafe {
        *stats = CStats {
            records: s.records,
            dropped: s.dropped,
            rejected: s.rejected,
            clock_regressions: s.clock_regressions,
            frames: s.frames,
            bytes: s.bytes,
            overwritten: s.overwritten,
        };
    }
    OK
}

/// Reads the `Refusal` frame a collector sent before closing the link (the bytes the caller read back
/// from its socket), decoding it in place: `*reason` gets its code (1 token, 2 session limit, 3 store,
/// 4 wire version, 5 connection limit; others: a newer collector's), `*message` and `*message_len` the
/// collector's words (UTF-8, not NUL-terminated, inside `bytes`). Returns `SOCSCOPE_OK` or
/// `SOCSCOPE_ERR_NOT_A_REFUSAL`.
///
/// # Safety
/// `bytes` points to `len` writable bytes; `reason`, `message` and `message_len` are valid pointers.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn socscope_decode_refusal(
    bytes: *mut u8,
    len: usize,
    reason: *mut u8,
    message: *mut *const u8,
    message_len: *mut usize,
) -> c_int {
    if bytes.is_null() || reason.is_null() || message.is_null() || message_len.is_null() {
        return ERR_NULL;
    }
    // SAFETY: the caller gives `len` writable bytes at `bytes`.
    let buf = unsafe { core::slice::from_raw_parts_mut(bytes, len) };
    match socscope_agent::decode_refusal(buf) {
        Ok(r) => {
            // SAFETY: checked non-NULL; the caller's to write.
            unsafe {
                *reason = r.reason.code();
                *message = r.message.as_ptr();
                *message_len = r.message.len();
            }
            OK
        }
        Err(_) => ERR_NOT_A_REFUSAL,
    }
}

/// On an Arm microcontroller the library masks interrupts itself (PRIMASK) for the agent's short critical
/// sections: one record, or a drain's claim of a block. Other bare-metal targets provide the
/// `critical-section` crate's `_critical_section_1_0_acquire`/`_release` symbols.
#[cfg(all(target_os = "none", target_arch = "arm"))]
mod primask {
    struct Primask;
    critical_section::set_impl!(Primask);

    // SAFETY: masking interrupts with `cpsid i` excludes every other context on a single-core
    // Cortex-M, and `release` restores PRIMASK as `acquire` found it, so sections nest.
    unsafe impl critical_section::Impl for Primask {
        unsafe fn acquire() -> critical_section::RawRestoreState {
            let primask: u32;
            // SAFETY: reads PRIMASK and masks interrupts; no memory is touched.
            unsafe {
                core::arch::asm!("mrs {}, PRIMASK", "cpsid i", out(reg) primask, options(nomem, nostack, preserves_flags));
            }
            primask & 1 == 0
        }

        unsafe fn release(was_active: critical_section::RawRestoreState) {
            if was_active {
                // SAFETY: unmasks interrupts that were unmasked when the section started.
                unsafe { core::arch::asm!("cpsie i", options(nomem, nostack, preserves_flags)) };
            }
        }
    }
}

#[cfg(target_os = "none")]
unsafe extern "C" {
    /// Deliberately undefined: referenced only from the panic handler.
    fn socscope_agent_must_not_panic() -> !;
}

#[cfg(target_os = "none")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    // SAFETY: never defined; a reference to it that survives in a linked image fails the link.
    unsafe { socscope_agent_must_not_panic() }
}
