//! State reconstruction: raw KPTrace-like records in, Framesoc events out.
//!
//! Per CPU the running thread comes from context switches; IRQ and soft-IRQ states nest on the CPU's
//! interrupt stack; syscall and user-function states nest on the thread's own stack (a thread blocked in
//! `read` keeps its syscall open across context switches); wake-ups become links from the waker to the
//! wakee's next switch-in; kmalloc/kfree become a per-producer allocated-bytes variable. Whatever starts or
//! ends outside the capture is clipped to the capture's edges and counted, never dropped.
//! Each CPU producer gets the CPU's scheduling from the same switches: `on_cpu` slices naming the thread
//! that ran, `cpu_idle` while the idle task did (the CPU tracks of `SCHEMA.md`).

use std::collections::HashMap;

use rustc_hash::FxHashMap;

use socscope_tracedb::{
    Event, EventCategory, EventKind, EventType, LossRecord, ParamDef, ParamType, ParamValue,
    Producer, ProducerId, ProducerKind, Result, Timestamp, TypeId, cpu_track_slice,
    cpu_track_types,
};
use socscope_wire::decode::{
    DecodedParamValue, Dictionary, OwnedEventTypeDef, ProducerInfo, RecordView,
};
use socscope_wire::dict::{self as wdict, Builtin, Category};

use crate::syscalls::SyscallAbi;

/// Store type id of the thread "running" state (the store's: the CPU tracks are derived from it).
pub use socscope_tracedb::RUNNING_TYPE;
/// Store type id of the wake-up link.
pub const WAKEUP_TYPE: TypeId = 100_002;
/// Store type id of the allocated-bytes variable.
pub const ALLOCATED_TYPE: TypeId = 100_003;

/// What the `closed_at_exit` ingest statistic counts (live captures and imports alike).
pub const CLOSED_AT_EXIT: &str =
    "states a thread still had open when it exited (thread_exit, sched_process_exit), closed then";

/// A raw record as the reconstructor reads it: a type id of the [`TypeTable`] and parameter values in
/// the type's order. Wire records and text importers' records both are.
pub trait RawRecord {
    /// The type id.
    fn type_id(&self) -> u16;
    /// How many parameter values the record carries.
    fn param_count(&self) -> usize;
    /// Parameter `i` as a store value.
    fn param(&self, i: usize) -> Option<ParamValue>;
    /// Parameter `i` as an unsigned integer (addresses and non-negative signed values too).
    fn unsigned(&self, i: usize) -> Option<u64>;
    /// Parameter `i` as text.
    fn text(&self, i: usize) -> Option<&str>;
    /// Replaces `out[at..]` by the record's parameters (those [`RawRecord::param`] gives), reusing the
    /// values already there (and their string buffers) where it can.
    fn write_params(&self, out: &mut Vec<ParamValue>, at: usize) {
        out.truncate(at);
        for i in 0..self.param_count() {
            if let Some(v) = self.param(i) {
                out.push(v);
            }
        }
    }
}

/// Replaces `out[at..]` by `src` (`at` clamped to `out.len()`), reusing the values already there and
/// the buffers of their strings: no allocation once the buffers are big enough.
pub fn assign_params(out: &mut Vec<ParamValue>, at: usize, src: &[ParamValue]) {
    let at = at.min(out.len());
    out.truncate(at + src.len());
    let reused = out.len() - at;
    for (dst, v) in out[at..].iter_mut().zip(src) {
        match (dst, v) {
            (ParamValue::String(d), ParamValue::String(s)) => d.clone_from(s),
            (d, v) => *d = v.clone(),
        }
    }
    out.extend(src[reused..].iter().cloned());
}

impl RawRecord for RecordView<'_> {
    fn type_id(&self) -> u16 {
        RecordView::type_id(self)
    }
    fn param_count(&self) -> usize {
        self.fields().len()
    }
    fn param(&self, i: usize) -> Option<ParamValue> {
        param_value(self, i)
    }
    fn unsigned(&self, i: usize) -> Option<u64> {
        RecordView::unsigned(self, i)
    }
    fn text(&self, i: usize) -> Option<&str> {
        RecordView::text(self, i)
    }
}

/// The event types records refer to (category and parameters per type id): the wire [`Dictionary`] of a
/// live session, or a table an importer builds.
pub trait TypeTable {
    /// The type with this id.
    fn get(&self, id: u16) -> Option<&OwnedEventTypeDef>;
    /// The exit type that closes states opened by `enter`, if any.
    fn exit_of(&self, enter: u16) -> Option<&OwnedEventTypeDef>;
}

impl TypeTable for Dictionary {
    fn get(&self, id: u16) -> Option<&OwnedEventTypeDef> {
        Dictionary::get(self, id)
    }
    fn exit_of(&self, enter: u16) -> Option<&OwnedEventTypeDef> {
        self.iter()
            .find(|x| x.category == Category::StateExit { enter })
    }
}

/// Where reconstructed data goes: the trace writer, or a vector in tests.
pub trait Sink {
    /// A new or renamed producer.
    fn producer(&mut self, producer: &Producer) -> Result<()>;
    /// A new event type.
    fn event_type(&mut self, ty: &EventType) -> Result<()>;
    /// An event.
    fn event(&mut self, event: &Event) -> Result<()>;
    /// A loss.
    fn loss(&mut self, loss: &LossRecord) -> Result<()>;
    /// A state opened on `cpu` at `start` (its event comes when it closes). For watchers that must
    /// judge states still open (a hang); stores ignore it.
    fn state_opened(&mut self, _start: Timestamp, _ty: TypeId, _producer: ProducerId, _cpu: u16) {}
    /// A batch of `cpu`'s records was reconstructed: its first and last record times. For watchers
    /// that judge the stream's time; stores ignore it.
    fn batch_done(&mut self, _cpu: u16, _first: Timestamp, _last: Timestamp) {}
}

impl Sink for socscope_tracedb::TraceWriter {
    fn producer(&mut self, producer: &Producer) -> Result<()> {
        self.add_producer(producer)
    }
    fn event_type(&mut self, ty: &EventType) -> Result<()> {
        self.add_event_type(ty)
    }
    fn event(&mut self, event: &Event) -> Result<()> {
        self.push(event)
    }
    fn loss(&mut self, loss: &LossRecord) -> Result<()> {
        self.add_loss(loss)
    }
}

/// Counters of the reconstruction, stored as `ingest_stat` rows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReconstructStats {
    /// Records seen, per wire type id.
    pub records_by_type: HashMap<u16, u64>,
    /// Events written.
    pub events: u64,
    /// States still open at the end, closed at the last timestamp.
    pub clipped_open_states: u64,
    /// Exits (and switch-outs) whose entry was before the capture, started at the capture's edge.
    pub clipped_exits: u64,
    /// Context switches whose previous thread was not the one running.
    pub switch_mismatches: u64,
    /// Wake-ups still pending at the end, ended at the last timestamp.
    pub clipped_wakeups: u64,
    /// kfree of a pointer no kmalloc announced.
    pub unknown_frees: u64,
    /// Records lost on the board (from `Loss` frames).
    pub lost_on_board: u64,
    /// Records missing from the sequence without a `Loss` frame (frames dropped on the link).
    pub lost_in_transit: u64,
    /// Batches that started before the expected sequence number (replayed or reordered).
    pub sequence_overlaps: u64,
    /// Records of those batches whose sequence number had been ingested already: dropped, not stored
    /// twice.
    pub duplicate_records: u64,
    /// Records the board's `Bye` totals say were sent whose sequence numbers never arrived after the last
    /// batch of their CPU (the end of a stream lost on the link); included in `lost_in_transit`.
    pub lost_at_end: u64,
    /// States a thread still had open when it exited (a `thread_exit` record, or a text capture's
    /// `sched_process_exit`), closed then.
    pub closed_at_exit: u64,
    /// Records a board in post-mortem mode overwrote before its dump (from `Window` frames): outside
    /// the window, not lost.
    pub overwritten_on_board: u64,
    /// `Window` frames: the session is a post-mortem dump.
    pub windows: u64,
}

#[derive(Clone, Debug)]
struct OpenState {
    type_id: TypeId,
    /// The wire type of the entry, to match exits.
    enter: u16,
    producer: ProducerId,
    start: Timestamp,
    cpu: u16,
    params: Vec<ParamValue>,
}

#[derive(Clone, Debug, Default)]
struct Cpu {
    running: Option<u64>,
    running_since: Timestamp,
    interrupts: Vec<OpenState>,
    first_ts: Option<Timestamp>,
    last_ts: Timestamp,
    expected_seq: Option<u64>,
}

#[derive(Clone, Debug)]
struct Thread {
    producer: ProducerId,
    parent: Option<ProducerId>,
    stack: Vec<OpenState>,
}

#[derive(Clone, Copy, Debug)]
struct PendingWakeup {
    ts: Timestamp,
    waker: ProducerId,
    cpu: u16,
}

/// Linux's soft IRQ vectors by number, named as the kernel names them (`softirq_to_name`).
const SOFTIRQ_VECTORS: [&str; 10] = [
    "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU",
];

/// The vector a soft IRQ handler serves, from its symbol (each vector's `open_softirq` handler, old
/// and new names), or the vector itself when the name already is one (ftrace's `action=`).
fn softirq_vector_of(symbol: &str) -> Option<&'static str> {
    const ACTIONS: [(&str, &str); 12] = [
        ("tasklet_hi_action", "HI"),
        ("run_timer_softirq", "TIMER"),
        ("net_tx_action", "NET_TX"),
        ("net_rx_action", "NET_RX"),
        ("blk_done_softirq", "BLOCK"),
        ("irq_poll_softirq", "IRQ_POLL"),
        ("tasklet_action", "TASKLET"),
        ("run_rebalance_domains", "SCHED"),
        ("sched_balance_softirq", "SCHED"),
        ("hrtimer_run_softirq", "HRTIMER"),
        ("rcu_core_si", "RCU"),
        ("rcu_process_callbacks", "RCU"),
    ];
    SOFTIRQ_VECTORS
        .iter()
        .find(|v| **v == symbol)
        .copied()
        .or_else(|| ACTIONS.iter().find(|(s, _)| *s == symbol).map(|(_, v)| *v))
}

/// Most parameter vectors kept for reuse (more are only ever needed while states nest deeply).
const PARAM_POOL: usize = 64;

/// Turns one session's records into store events.
pub struct Reconstructor {
    tick_rate_hz: u64,
    origin_ticks: u64,
    cpus: Vec<Cpu>,
    threads: FxHashMap<u64, Thread>,
    processes: FxHashMap<u64, ProducerId>,
    irqs: FxHashMap<u64, ProducerId>,
    softirqs: FxHashMap<u64, ProducerId>,
    /// Soft IRQ producers by name (a vector's), so that every handler of a vector shares one.
    softirq_names: FxHashMap<String, ProducerId>,
    cpu_producers: Vec<ProducerId>,
    board_ids: FxHashMap<u32, ProducerId>,
    next_producer: ProducerId,
    wakeups: FxHashMap<u64, Vec<PendingWakeup>>,
    allocations: FxHashMap<u64, (u64, ProducerId)>,
    allocated: FxHashMap<ProducerId, i64>,
    last_ts: Timestamp,
    stats: ReconstructStats,
    /// The event being emitted (its parameter buffers reused from event to event).
    scratch: Event,
    /// The same for events without parameters (running states, links, variables of allocations).
    simple: Event,
    /// Records seen per type id (indexed by id; folded into [`ReconstructStats::records_by_type`]).
    type_counts: Vec<u64>,
    /// Parameter vectors of emitted states, reused by the next entries (with their string buffers).
    param_pool: Vec<Vec<ParamValue>>,
    name_hints: FxHashMap<(bool, u64), String>,
    /// How the board numbers its syscalls (names of syscall states).
    syscall_abi: SyscallAbi,
    /// The first sequence number of every CPU when known (a live session: the agent numbers each
    /// CPU's records from 0 after `Hello`), so a missing first batch counts as lost.
    first_seq: Option<u64>,
    /// Sequence numbers each CPU gave out, from the board's `CpuTotal` frames (sorted by CPU).
    cpu_totals: Vec<(u16, u64)>,
    /// The thread that emitted the record being ingested, when the record names it (a user-space
    /// tracer's event, see [`Reconstructor::record_by`]): it, not the CPU's running thread, owns it.
    emitter: Option<u64>,
}

fn param_type(t: wdict::ParamType) -> ParamType {
    match t {
        wdict::ParamType::Signed => ParamType::Signed,
        wdict::ParamType::Unsigned => ParamType::Unsigned,
        wdict::ParamType::Float => ParamType::Float,
        wdict::ParamType::String => ParamType::String,
        wdict::ParamType::Address => ParamType::Address,
    }
}

fn producer_kind(k: wdict::ProducerKind) -> ProducerKind {
    match k {
        wdict::ProducerKind::Process => ProducerKind::Process,
        wdict::ProducerKind::Thread => ProducerKind::Thread,
        wdict::ProducerKind::Irq => ProducerKind::Irq,
        wdict::ProducerKind::SoftIrq => ProducerKind::SoftIrq,
        wdict::ProducerKind::Cpu => ProducerKind::Cpu,
    }
}

fn param_value(record: &RecordView<'_>, i: usize) -> Option<ParamValue> {
    Some(match *record.fields().get(i)? {
        DecodedParamValue::Signed(v) => ParamValue::Signed(v),
        DecodedParamValue::Unsigned(v) => ParamValue::Unsigned(v),
        DecodedParamValue::Float(v) => ParamValue::Float(v),
        DecodedParamValue::Address(v) => ParamValue::Address(v),
        DecodedParamValue::Str { .. } => ParamValue::String(record.text(i)?.to_string()),
    })
}

/// Whether the syscall states of type `t` get a `name` parameter from the syscall table: those of the
/// built-in syscall entry, whose records carry only the number (importers that know names declare their own).
fn adds_syscall_name(t: &OwnedEventTypeDef) -> bool {
    t.id == Builtin::SyscallEntry.id() && !t.params.iter().any(|p| p.name == "name")
}

/// The store types of a wire type: its own (punctual, variable or state) representation.
fn store_type_of(t: &OwnedEventTypeDef, dict: &impl TypeTable) -> Option<EventType> {
    let params = |t: &OwnedEventTypeDef| -> Vec<ParamDef> {
        t.params
            .iter()
            .map(|p| ParamDef::new(p.name.clone(), param_type(p.ty)))
            .collect()
    };
    match t.category {
        Category::Punctual => Some(EventType {
            id: TypeId::from(t.id),
            name: t.name.clone(),
            category: EventCategory::Punctual,
            params: params(t),
        }),
        Category::Variable => Some(EventType {
            id: TypeId::from(t.id),
            name: t.name.clone(),
            category: EventCategory::Variable,
            params: params(t),
        }),
        Category::StateEnter => {
            // A state carries its entry's parameters, then its exit's (renamed where they clash).
            let mut p = params(t);
            if adds_syscall_name(t) {
                p.push(ParamDef::new("name", ParamType::String));
            }
            if let Some(exit) = dict.exit_of(t.id) {
                for q in &exit.params {
                    let name = if p.iter().any(|d| d.name == q.name) {
                        format!("exit_{}", q.name)
                    } else {
                        q.name.clone()
                    };
                    p.push(ParamDef::new(name, param_type(q.ty)));
                }
            }
            Some(EventType {
                id: TypeId::from(t.id),
                name: t.name.clone(),
                category: EventCategory::State,
                params: p,
            })
        }
        Category::StateExit { .. } => None,
        Category::Special => match Builtin::from_id(t.id)? {
            Builtin::ThreadCreate | Builtin::ThreadExit => Some(EventType {
                id: TypeId::from(t.id),
                name: t.name.clone(),
                category: EventCategory::Punctual,
                params: params(t),
            }),
            _ => None,
        },
    }
}

impl Reconstructor {
    /// A reconstructor for a session announced by `Hello` with `tick_rate_hz`, `start_ticks` and `cpu_count`.
    pub fn new(tick_rate_hz: u64, start_ticks: u64, cpu_count: u16) -> Self {
        Self {
            tick_rate_hz: tick_rate_hz.max(1),
            origin_ticks: start_ticks,
            cpus: vec![Cpu::default(); usize::from(cpu_count.max(1))],
            threads: FxHashMap::default(),
            processes: FxHashMap::default(),
            irqs: FxHashMap::default(),
            softirqs: FxHashMap::default(),
            softirq_names: FxHashMap::default(),
            cpu_producers: Vec::new(),
            board_ids: FxHashMap::default(),
            next_producer: 1,
            wakeups: FxHashMap::default(),
            allocations: FxHashMap::default(),
            allocated: FxHashMap::default(),
            last_ts: 0,
            stats: ReconstructStats::default(),
            scratch: Event::punctual(0, 0, 0, None),
            simple: Event::punctual(0, 0, 0, None),
            type_counts: Vec::new(),
            param_pool: Vec::new(),
            name_hints: FxHashMap::default(),
            syscall_abi: SyscallAbi::ArmEabi,
            first_seq: None,
            cpu_totals: Vec::new(),
            emitter: None,
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> ReconstructStats {
        let mut st = self.stats.clone();
        st.records_by_type = self
            .type_counts
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(id, n)| (id as u16, *n))
            .collect();
        st
    }

    /// The latest timestamp seen, in ns from the session start.
    pub fn last_ts(&self) -> Timestamp {
        self.last_ts
    }

    /// Board ticks to store nanoseconds since the session start.
    pub fn ticks_to_ns(&self, ticks: u64) -> Timestamp {
        let d = i128::from(ticks) - i128::from(self.origin_ticks);
        let ns = d * 1_000_000_000 / i128::from(self.tick_rate_hz);
        ns.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
    }

    /// Declares the built-in types, the derived types and the CPU producers.
    pub fn start(&mut self, dict: &impl TypeTable, sink: &mut impl Sink) -> Result<()> {
        sink.event_type(&EventType {
            id: RUNNING_TYPE,
            name: "running".into(),
            category: EventCategory::State,
            params: Vec::new(),
        })?;
        sink.event_type(&EventType {
            id: WAKEUP_TYPE,
            name: "wakeup".into(),
            category: EventCategory::Link,
            params: Vec::new(),
        })?;
        for ty in cpu_track_types() {
            sink.event_type(&ty)?;
        }
        sink.event_type(&EventType {
            id: ALLOCATED_TYPE,
            name: "allocated_bytes".into(),
            category: EventCategory::Variable,
            params: Vec::new(),
        })?;
        for b in wdict::BUILTINS {
            self.declare_type(b.id(), dict, sink)?;
        }
        for cpu in 0..self.cpus.len() {
            let id = self.alloc_producer();
            self.cpu_producers.push(id);
            sink.producer(&Producer {
                id,
                parent: None,
                kind: ProducerKind::Cpu,
                local_id: cpu as i64,
                name: format!("cpu{cpu}"),
            })?;
        }
        Ok(())
    }

    /// How the board numbers its syscalls (ARM EABI unless told).
    pub fn set_syscall_abi(&mut self, abi: SyscallAbi) {
        self.syscall_abi = abi;
    }

    /// Declares the store type of type `id` (a type an importer added to its table after [`Self::start`]).
    pub fn declare_type(
        &mut self,
        id: u16,
        dict: &impl TypeTable,
        sink: &mut impl Sink,
    ) -> Result<()> {
        if let Some(t) = dict.get(id)
            && let Some(st) = store_type_of(t, dict)
        {
            sink.event_type(&st)?;
        }
        Ok(())
    }

    /// Applies a `Dictionary` frame's declarations (types must already be in `dict`).
    pub fn dictionary(
        &mut self,
        items: &[socscope_wire::decode::OwnedDictEntry],
        dict: &Dictionary,
        sink: &mut impl Sink,
    ) -> Result<()> {
        use socscope_wire::decode::OwnedDictEntry;
        for item in items {
            match item {
                OwnedDictEntry::EventType(t) => {
                    self.declare_type(t.id, dict, sink)?;
                    if let Category::StateExit { enter } = t.category {
                        // The state's parameter list grows with its exit's.
                        self.declare_type(enter, dict, sink)?;
                    }
                }
                OwnedDictEntry::Producer(p) => self.declare_producer(p, sink)?,
            }
        }
        Ok(())
    }

    fn alloc_producer(&mut self) -> ProducerId {
        let id = self.next_producer;
        self.next_producer += 1;
        id
    }

    fn declare_producer(&mut self, p: &ProducerInfo, sink: &mut impl Sink) -> Result<()> {
        let parent = p.parent.and_then(|b| self.board_ids.get(&b).copied());
        let existing = match p.kind {
            wdict::ProducerKind::Thread => self.threads.get(&p.local_id).map(|t| t.producer),
            wdict::ProducerKind::Process => self.processes.get(&p.local_id).copied(),
            wdict::ProducerKind::Irq => self.irqs.get(&p.local_id).copied(),
            wdict::ProducerKind::SoftIrq => self.softirqs.get(&p.local_id).copied(),
            wdict::ProducerKind::Cpu => usize::try_from(p.local_id)
                .ok()
                .and_then(|c| self.cpu_producers.get(c).copied()),
        };
        let id = match existing {
            Some(id) => id,
            None => self.alloc_producer(),
        };
        match p.kind {
            wdict::ProducerKind::Thread => {
                let t = self.threads.entry(p.local_id).or_insert(Thread {
                    producer: id,
                    parent,
                    stack: Vec::new(),
                });
                t.parent = parent;
            }
            wdict::ProducerKind::Process => {
                self.processes.insert(p.local_id, id);
            }
            wdict::ProducerKind::Irq => {
                self.irqs.insert(p.local_id, id);
            }
            wdict::ProducerKind::SoftIrq => {
                self.softirqs.insert(p.local_id, id);
                self.softirq_names.insert(p.name.clone(), id);
            }
            wdict::ProducerKind::Cpu => {}
        }
        self.board_ids.insert(p.id, id);
        sink.producer(&Producer {
            id,
            parent,
            kind: producer_kind(p.kind),
            local_id: p.local_id as i64,
            name: p.name.clone(),
        })
    }

    fn thread(&mut self, pid: u64, sink: &mut impl Sink) -> Result<ProducerId> {
        if let Some(t) = self.threads.get(&pid) {
            return Ok(t.producer);
        }
        let id = self.alloc_producer();
        self.threads.insert(
            pid,
            Thread {
                producer: id,
                parent: None,
                stack: Vec::new(),
            },
        );
        let name = if pid == 0 {
            "swapper".to_string()
        } else {
            format!("pid {pid}")
        };
        sink.producer(&Producer {
            id,
            parent: None,
            kind: ProducerKind::Thread,
            local_id: pid as i64,
            name,
        })?;
        Ok(id)
    }

    fn named(
        map_kind: ProducerKind,
        map: &mut FxHashMap<u64, ProducerId>,
        next: &mut ProducerId,
        key: u64,
        name: impl FnOnce() -> String,
        sink: &mut impl Sink,
    ) -> Result<ProducerId> {
        if let Some(&id) = map.get(&key) {
            return Ok(id);
        }
        let id = *next;
        *next += 1;
        map.insert(key, id);
        sink.producer(&Producer {
            id,
            parent: None,
            kind: map_kind,
            local_id: key as i64,
            name: name(),
        })?;
        Ok(id)
    }

    /// The producer events on `cpu` belong to: the innermost interrupt, else the running thread, else the CPU.
    fn context_producer(&mut self, cpu: usize, sink: &mut impl Sink) -> Result<ProducerId> {
        // User space does not run inside an interrupt: a record of a named thread is that thread's.
        if let Some(pid) = self.emitter {
            return self.thread(pid, sink);
        }
        if let Some(top) = self.cpus[cpu].interrupts.last() {
            return Ok(top.producer);
        }
        self.thread_producer(cpu, sink)
    }

    fn thread_producer(&mut self, cpu: usize, sink: &mut impl Sink) -> Result<ProducerId> {
        match self.emitter.or(self.cpus[cpu].running) {
            Some(pid) => self.thread(pid, sink),
            None => Ok(self.cpu_producers[cpu]),
        }
    }

    /// Emits a closed state; its parameter vector goes back to the pool for the next entries.
    fn emit_state(
        &mut self,
        mut s: OpenState,
        end: Timestamp,
        depth: usize,
        sink: &mut impl Sink,
    ) -> Result<()> {
        // A state of a CPU's own context (before any thread is known on it) nests inside the CPU
        // track's slice, which is at depth 0.
        let depth = if self.cpu_producers.contains(&s.producer) {
            depth + 1
        } else {
            depth
        };
        self.scratch.ts = s.start;
        self.scratch.type_id = s.type_id;
        self.scratch.producer = s.producer;
        self.scratch.cpu = Some(s.cpu);
        self.scratch.kind = EventKind::State {
            end: end.max(s.start),
            depth: depth.min(u16::MAX as usize) as u16,
        };
        std::mem::swap(&mut self.scratch.params, &mut s.params);
        self.stats.events += 1;
        let result = sink.event(&self.scratch);
        std::mem::swap(&mut self.scratch.params, &mut s.params);
        if self.param_pool.len() < PARAM_POOL {
            self.param_pool.push(s.params);
        }
        result
    }

    fn emit_simple(
        &mut self,
        ts: Timestamp,
        type_id: TypeId,
        producer: ProducerId,
        cpu: u16,
        kind: EventKind,
        sink: &mut impl Sink,
    ) -> Result<()> {
        self.simple.ts = ts;
        self.simple.type_id = type_id;
        self.simple.producer = producer;
        self.simple.cpu = Some(cpu);
        self.simple.kind = kind;
        self.stats.events += 1;
        sink.event(&self.simple)
    }

    /// The CPU track's slice for a thread's time on `cpu` (see `SCHEMA.md`, CPU tracks), by the rule
    /// `upgrade_trace` also derives old traces' tracks with ([`cpu_track_slice`]).
    fn emit_cpu_slice(
        &mut self,
        cpu: usize,
        pid: u64,
        thread: ProducerId,
        start: Timestamp,
        end: Timestamp,
        sink: &mut impl Sink,
    ) -> Result<()> {
        let Some(&track) = self.cpu_producers.get(cpu) else {
            return Ok(());
        };
        if !cpu_track_slice(&mut self.simple, track, cpu as u16, thread, pid, start, end) {
            return Ok(());
        }
        self.stats.events += 1;
        let result = sink.event(&self.simple);
        self.simple.params.clear();
        result
    }

    /// Every CPU's records are numbered from `first` (0 for a live session after its `Hello`): a first
    /// batch that never arrives is counted as lost instead of going unnoticed.
    pub fn sequences_start_at(&mut self, first: u64) {
        self.first_seq = Some(first);
    }

    /// The next sequence number expected on each CPU (`None` where none was seen).
    pub fn next_sequences(&self) -> Vec<Option<u64>> {
        self.cpus.iter().map(|c| c.expected_seq).collect()
    }

    /// Continues the sequence numbers of a session cut off earlier ([`Self::next_sequences`] of its
    /// first part): records from there on are neither lost nor duplicates.
    pub fn resume_sequences(&mut self, next: &[Option<u64>]) {
        for (c, n) in self.cpus.iter_mut().zip(next) {
            if n.is_some() {
                c.expected_seq = *n;
            }
        }
    }

    /// Notes how many sequence numbers a CPU gave out (its `CpuTotal` frame, sent before `Bye`).
    pub fn cpu_total(&mut self, cpu: u16, sequences: u64) {
        match self.cpu_totals.binary_search_by_key(&cpu, |t| t.0) {
            Ok(k) => self.cpu_totals[k].1 = sequences,
            Err(k) => self.cpu_totals.insert(k, (cpu, sequences)),
        }
    }

    /// Reconciles the board's totals at `Bye` with the sequence numbers seen. A CPU whose
    /// `CpuTotal` arrived and exceeds what was seen on it lost the end of its stream on the link
    /// (its last batches): a loss row on that CPU with the missing sequence numbers. What the
    /// `Bye` totals (records accepted plus dropped: every sequence number given out, all CPUs)
    /// still exceed after that is counted as lost too, on no CPU (a `CpuTotal` itself was lost,
    /// or the board sends none).
    pub fn reconcile_totals(
        &mut self,
        board_records: u64,
        board_dropped: u64,
        sink: &mut impl Sink,
    ) -> Result<()> {
        let seen_on = |cpus: &[Cpu], first: Option<u64>, c: usize| {
            cpus.get(c)
                .and_then(|c| c.expected_seq)
                .or(first)
                .unwrap_or(0)
        };
        let mut accounted: u64 = 0;
        for c in 0..self.cpus.len() {
            let known = self
                .cpu_totals
                .binary_search_by_key(&c, |t| usize::from(t.0))
                .is_ok();
            if !known {
                accounted = accounted.saturating_add(seen_on(&self.cpus, self.first_seq, c));
            }
        }
        for k in 0..self.cpu_totals.len() {
            let (cpu, total) = self.cpu_totals[k];
            let seen = seen_on(&self.cpus, self.first_seq, usize::from(cpu));
            accounted = accounted.saturating_add(total.max(seen));
            if total <= seen {
                continue;
            }
            let missing = total - seen;
            self.stats.lost_in_transit += missing;
            self.stats.lost_at_end += missing;
            let ts = self
                .cpus
                .get(usize::from(cpu))
                .filter(|c| c.first_ts.is_some())
                .map_or(self.last_ts, |c| c.last_ts);
            sink.loss(&LossRecord {
                cpu: Some(cpu),
                ts,
                count: missing,
                seq_from: Some(seen),
                seq_to: Some(total - 1),
                reason: "sent before Bye but never arrived (the CPU's last batches)".into(),
            })?;
        }
        let given_out = board_records.saturating_add(board_dropped);
        if given_out > accounted {
            let missing = given_out - accounted;
            self.stats.lost_in_transit += missing;
            self.stats.lost_at_end += missing;
            sink.loss(&LossRecord {
                cpu: None,
                ts: self.last_ts,
                count: missing,
                seq_from: None,
                seq_to: None,
                reason: "sent before Bye but never arrived (the last batches of a CPU)".into(),
            })?;
        }
        Ok(())
    }

    /// The stream ended inside an `Events` frame whose header said `count` records from `first_seq` on
    /// `cpu`: those not seen are lost in transit (a loss row on that CPU). `None` (no readable header):
    /// a loss row of unknown count says that records may be missing. Returns the records counted lost.
    /// A header that does not fit what was seen (a CPU the session does not have, a sequence number
    /// before the expected one, more records than a frame holds) counts as unreadable.
    pub fn cut_off(
        &mut self,
        header: Option<(u16, u64, u32)>,
        sink: &mut impl Sink,
    ) -> Result<u64> {
        let fits = header.filter(|&(cpu, first, count)| {
            let expected = self
                .cpus
                .get(usize::from(cpu))
                .map(|c| c.expected_seq.or(self.first_seq).unwrap_or(0));
            expected.is_some_and(|e| first >= e)
                && count > 0
                && count as usize <= socscope_wire::MAX_FRAME_LEN
        });
        let Some((cpu, first, count)) = fits else {
            sink.loss(&LossRecord {
                cpu: None,
                ts: self.last_ts,
                count: 0,
                seq_from: None,
                seq_to: None,
                reason: "the stream ended inside a frame whose header could not be read: an unknown number of records lost".into(),
            })?;
            return Ok(0);
        };
        let seen = self
            .cpus
            .get(usize::from(cpu))
            .and_then(|c| c.expected_seq)
            .or(self.first_seq)
            .unwrap_or(0);
        let end = first + u64::from(count);
        if end <= seen {
            return Ok(0);
        }
        let missing = end - seen;
        self.stats.lost_in_transit += missing;
        let ts = self
            .cpus
            .get(usize::from(cpu))
            .filter(|c| c.first_ts.is_some())
            .map_or(self.last_ts, |c| c.last_ts);
        sink.loss(&LossRecord {
            cpu: Some(cpu),
            ts,
            count: missing,
            seq_from: Some(seen),
            seq_to: Some(end - 1),
            reason: "in the frame cut off by the end of the stream".into(),
        })?;
        // Those sequence numbers are accounted for: the Bye totals (if any came) must not count them again.
        if let Some(c) = self.cpus.get_mut(usize::from(cpu)) {
            c.expected_seq = Some(end);
        }
        Ok(missing)
    }

    /// Records a `Window` frame (a post-mortem dump): the CPU's records start at `first_seq`; those
    /// before were overwritten in the board's ring or sent by an earlier dump, and are not a loss.
    /// Returns whether it is the session's first.
    pub fn window(&mut self, cpu: u16, first_seq: u64, overwritten: u64) -> bool {
        self.stats.overwritten_on_board += overwritten;
        self.stats.windows += 1;
        if let Some(c) = self.cpus.get_mut(usize::from(cpu)) {
            c.expected_seq = Some(c.expected_seq.map_or(first_seq, |e| e.max(first_seq)));
        }
        self.stats.windows == 1
    }

    /// Records a `Loss` frame.
    pub fn loss(
        &mut self,
        cpu: u16,
        first_seq: u64,
        count: u64,
        sink: &mut impl Sink,
    ) -> Result<()> {
        self.stats.lost_on_board += count;
        let ts = self
            .cpus
            .get(usize::from(cpu))
            .map_or(self.last_ts, |c| c.last_ts);
        if let Some(c) = self.cpus.get_mut(usize::from(cpu)) {
            let end = first_seq.saturating_add(count);
            c.expected_seq = Some(c.expected_seq.map_or(end, |e| e.max(end)));
        }
        sink.loss(&LossRecord {
            cpu: Some(cpu),
            ts,
            count,
            seq_from: Some(first_seq),
            seq_to: Some(first_seq.saturating_add(count).saturating_sub(1)),
            reason: "agent ring buffer full".into(),
        })
    }

    /// Ingests one `Events` batch.
    pub fn batch(
        &mut self,
        batch: &socscope_wire::decode::EventBatch,
        dict: &impl TypeTable,
        sink: &mut impl Sink,
    ) -> Result<()> {
        let cpu = usize::from(batch.cpu);
        self.ensure_cpu(cpu, sink)?;
        let expected = self.cpus[cpu].expected_seq.or(self.first_seq);
        let mut skip = 0usize;
        match expected {
            Some(e) if batch.first_seq > e => {
                let gap = batch.first_seq - e;
                self.stats.lost_in_transit += gap;
                let ts = self.cpus[cpu].last_ts;
                sink.loss(&LossRecord {
                    cpu: Some(batch.cpu),
                    ts,
                    count: gap,
                    seq_from: Some(e),
                    seq_to: Some(batch.first_seq - 1),
                    reason: "frames dropped on the link".into(),
                })?;
            }
            Some(e) if batch.first_seq < e => {
                self.stats.sequence_overlaps += 1;
                // A section of the stream seen twice (a replayed or duplicated frame): each sequence
                // number is stored once.
                let seen = (e - batch.first_seq).min(batch.len() as u64);
                self.stats.duplicate_records += seen;
                skip = seen as usize;
            }
            _ => {}
        }
        self.cpus[cpu].expected_seq = Some(batch.next_seq().max(expected.unwrap_or(0)));
        let mut first = None;
        for record in batch.iter().skip(skip) {
            first.get_or_insert(record.ticks());
            self.record(cpu, record.ticks(), &record, dict, sink)?;
        }
        if let Some(first) = first {
            sink.batch_done(batch.cpu, self.ticks_to_ns(first), self.cpus[cpu].last_ts);
        }
        Ok(())
    }

    fn ensure_cpu(&mut self, cpu: usize, sink: &mut impl Sink) -> Result<()> {
        if cpu >= self.cpus.len() {
            // A CPU the Hello did not announce: grow rather than drop.
            let from = self.cpus.len();
            self.cpus.resize(cpu + 1, Cpu::default());
            for c in from..=cpu {
                let id = self.alloc_producer();
                self.cpu_producers.push(id);
                sink.producer(&Producer {
                    id,
                    parent: None,
                    kind: ProducerKind::Cpu,
                    local_id: c as i64,
                    name: format!("cpu{c}"),
                })?;
            }
        }
        Ok(())
    }

    /// Ingests one record of an importer: on `cpu`, at `ticks` (records of a CPU in time order).
    pub fn record_at(
        &mut self,
        cpu: u16,
        ticks: u64,
        r: &impl RawRecord,
        dict: &impl TypeTable,
        sink: &mut impl Sink,
    ) -> Result<()> {
        let cpu = usize::from(cpu);
        self.ensure_cpu(cpu, sink)?;
        self.record(cpu, ticks, r, dict, sink)
    }

    /// Ingests one record that names the thread which emitted it (a user-space tracer's event carries
    /// its thread id): its punctual events, variables and states belong to thread `pid`, whatever
    /// thread the kernel side says runs on `cpu` (a user-space-only trace never says).
    pub fn record_by(
        &mut self,
        cpu: u16,
        ticks: u64,
        pid: u64,
        r: &impl RawRecord,
        dict: &impl TypeTable,
        sink: &mut impl Sink,
    ) -> Result<()> {
        let cpu = usize::from(cpu);
        self.ensure_cpu(cpu, sink)?;
        self.emitter = Some(pid);
        let done = self.record(cpu, ticks, r, dict, sink);
        self.emitter = None;
        done
    }

    /// Names a thread (and, with `process`, attaches it to that process), as a trace's thread names and
    /// thread groups become known.
    pub fn name_thread(
        &mut self,
        pid: u64,
        name: &str,
        process: Option<u64>,
        sink: &mut impl Sink,
    ) -> Result<()> {
        let id = self.thread(pid, sink)?;
        let parent = match process {
            Some(tgid) if tgid != pid => Some(Self::named(
                ProducerKind::Process,
                &mut self.processes,
                &mut self.next_producer,
                tgid,
                || format!("process {tgid}"),
                sink,
            )?),
            _ => self.threads.get(&pid).and_then(|t| t.parent),
        };
        if let Some(t) = self.threads.get_mut(&pid) {
            t.parent = parent;
        }
        sink.producer(&Producer {
            id,
            parent,
            kind: ProducerKind::Thread,
            local_id: pid as i64,
            name: name.to_string(),
        })
    }

    /// The name the IRQ line or soft-IRQ vector `key` gets when first seen (e.g. from a `System.map` or
    /// an ftrace `action=` field) instead of its number.
    pub fn name_hint(&mut self, softirq: bool, key: u64, name: impl Into<String>) {
        self.name_hints.insert((softirq, key), name.into());
    }

    fn record(
        &mut self,
        cpu: usize,
        ticks: u64,
        r: &impl RawRecord,
        dict: &impl TypeTable,
        sink: &mut impl Sink,
    ) -> Result<()> {
        let ts = self.ticks_to_ns(ticks);
        let c = &mut self.cpus[cpu];
        if c.first_ts.is_none() {
            c.first_ts = Some(ts);
            c.running_since = ts;
        }
        c.last_ts = ts;
        self.last_ts = self.last_ts.max(ts);
        let t = usize::from(r.type_id());
        if t >= self.type_counts.len() {
            self.type_counts.resize(t + 1, 0);
        }
        self.type_counts[t] += 1;
        let cpu16 = cpu as u16;
        match Builtin::from_id(r.type_id()) {
            Some(Builtin::ContextSwitch) => {
                let prev = r.unsigned(0).unwrap_or(0);
                let next = r.unsigned(1).unwrap_or(0);
                self.context_switch(cpu, ts, prev, next, sink)
            }
            Some(Builtin::Wakeup) => {
                let pid = r.unsigned(0).unwrap_or(0);
                let waker = self.context_producer(cpu, sink)?;
                self.thread(pid, sink)?;
                let running_elsewhere = self.cpus.iter().any(|c| c.running == Some(pid));
                if running_elsewhere {
                    let target = self.thread(pid, sink)?;
                    self.emit_simple(
                        ts,
                        WAKEUP_TYPE,
                        waker,
                        cpu16,
                        EventKind::Link { end: ts, target },
                        sink,
                    )
                } else {
                    self.wakeups.entry(pid).or_default().push(PendingWakeup {
                        ts,
                        waker,
                        cpu: cpu16,
                    });
                    Ok(())
                }
            }
            Some(Builtin::ThreadCreate) => {
                let pid = r.unsigned(0).unwrap_or(0);
                let name = r.text(1).unwrap_or("").to_string();
                // The process a thread belongs to: the one the board's dictionary gave it, else its
                // creator's (a thread created before any switch, whose creator is unknown, keeps the
                // dictionary's process instead of losing it).
                let declared = self.threads.get(&pid).and_then(|t| t.parent);
                let creator = self.cpus[cpu].running;
                let parent = declared.or_else(|| {
                    creator
                        .and_then(|p| self.threads.get(&p))
                        .and_then(|t| t.parent.or(Some(t.producer)))
                });
                let id = self.thread(pid, sink)?;
                if let Some(t) = self.threads.get_mut(&pid) {
                    t.parent = parent;
                }
                sink.producer(&Producer {
                    id,
                    parent,
                    kind: ProducerKind::Thread,
                    local_id: pid as i64,
                    name,
                })?;
                self.punctual(cpu, ts, r, sink)
            }
            Some(Builtin::ThreadExit) => {
                self.punctual(cpu, ts, r, sink)?;
                let pid = r.unsigned(0).or(self.cpus[cpu].running).unwrap_or(0);
                self.close_at_exit(pid, ts, sink)
            }
            Some(Builtin::Kmalloc) => {
                let size = r.unsigned(0).unwrap_or(0);
                let ptr = r.unsigned(1).unwrap_or(0);
                let producer = self.thread_producer(cpu, sink)?;
                if let Some((old, owner)) = self.allocations.insert(ptr, (size, producer)) {
                    // A pointer allocated twice without a free: the first allocation is gone.
                    *self.allocated.entry(owner).or_insert(0) -= old as i64;
                }
                let total = self.allocated.entry(producer).or_insert(0);
                *total += size as i64;
                let value = *total as f64;
                self.emit_simple(
                    ts,
                    ALLOCATED_TYPE,
                    producer,
                    cpu16,
                    EventKind::Variable { value },
                    sink,
                )
            }
            Some(Builtin::Kfree) => {
                let ptr = r.unsigned(0).unwrap_or(0);
                match self.allocations.remove(&ptr) {
                    Some((size, owner)) => {
                        let total = self.allocated.entry(owner).or_insert(0);
                        *total -= size as i64;
                        let value = *total as f64;
                        self.emit_simple(
                            ts,
                            ALLOCATED_TYPE,
                            owner,
                            cpu16,
                            EventKind::Variable { value },
                            sink,
                        )
                    }
                    None => {
                        self.stats.unknown_frees += 1;
                        Ok(())
                    }
                }
            }
            _ => {
                let Some(t) = dict.get(r.type_id()) else {
                    return Ok(());
                };
                match t.category {
                    Category::Punctual | Category::Special => self.punctual(cpu, ts, r, sink),
                    Category::Variable => {
                        let producer = self.context_producer(cpu, sink)?;
                        let value = match r.param(0) {
                            Some(v) => v.as_f64().unwrap_or(0.0),
                            None => 0.0,
                        };
                        self.emit_variable(
                            ts,
                            TypeId::from(r.type_id()),
                            producer,
                            cpu16,
                            value,
                            r,
                            sink,
                        )
                    }
                    Category::StateEnter => self.enter(cpu, ts, r, sink),
                    Category::StateExit { enter } => self.exit(cpu, ts, enter, r, dict, sink),
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn emit_variable(
        &mut self,
        ts: Timestamp,
        type_id: TypeId,
        producer: ProducerId,
        cpu: u16,
        value: f64,
        r: &impl RawRecord,
        sink: &mut impl Sink,
    ) -> Result<()> {
        self.scratch.ts = ts;
        self.scratch.type_id = type_id;
        self.scratch.producer = producer;
        self.scratch.cpu = Some(cpu);
        self.scratch.kind = EventKind::Variable { value };
        r.write_params(&mut self.scratch.params, 0);
        self.stats.events += 1;
        sink.event(&self.scratch)
    }

    fn punctual(
        &mut self,
        cpu: usize,
        ts: Timestamp,
        r: &impl RawRecord,
        sink: &mut impl Sink,
    ) -> Result<()> {
        let producer = self.context_producer(cpu, sink)?;
        self.scratch.ts = ts;
        self.scratch.type_id = TypeId::from(r.type_id());
        self.scratch.producer = producer;
        self.scratch.cpu = Some(cpu as u16);
        self.scratch.kind = EventKind::Punctual;
        r.write_params(&mut self.scratch.params, 0);
        self.stats.events += 1;
        sink.event(&self.scratch)
    }

    fn is_interrupt(type_id: u16) -> bool {
        type_id == Builtin::IrqEntry.id() || type_id == Builtin::SoftIrqEntry.id()
    }

    fn enter(
        &mut self,
        cpu: usize,
        ts: Timestamp,
        r: &impl RawRecord,
        sink: &mut impl Sink,
    ) -> Result<()> {
        let type_id = r.type_id();
        let mut params = self.param_pool.pop().unwrap_or_default();
        r.write_params(&mut params, 0);
        // The built-in syscall entry carries the number only: its state gets the name (see
        // `adds_syscall_name`), the number kept.
        if type_id == Builtin::SyscallEntry.id()
            && r.param_count() == Builtin::SyscallEntry.def().params.len()
        {
            let nr = r.unsigned(0).unwrap_or(0);
            params.push(ParamValue::String(self.syscall_abi.label(nr)));
        }
        if Self::is_interrupt(type_id) {
            let key = r.unsigned(0).unwrap_or(0);
            let producer = if type_id == Builtin::IrqEntry.id() {
                Self::named(
                    ProducerKind::Irq,
                    &mut self.irqs,
                    &mut self.next_producer,
                    key,
                    || {
                        self.name_hints
                            .get(&(false, key))
                            .cloned()
                            .unwrap_or_else(|| format!("irq {key}"))
                    },
                    sink,
                )?
            } else {
                self.softirq_producer(key, sink)?
            };
            sink.state_opened(ts, TypeId::from(type_id), producer, cpu as u16);
            self.cpus[cpu].interrupts.push(OpenState {
                type_id: TypeId::from(type_id),
                enter: type_id,
                producer,
                start: ts,
                cpu: cpu as u16,
                params,
            });
            return Ok(());
        }
        let pid = self.emitter.or(self.cpus[cpu].running);
        let producer = self.thread_producer(cpu, sink)?;
        let state = OpenState {
            type_id: TypeId::from(type_id),
            enter: type_id,
            producer,
            start: ts,
            cpu: cpu as u16,
            params,
        };
        sink.state_opened(ts, state.type_id, producer, cpu as u16);
        match pid.and_then(|p| self.threads.get_mut(&p)) {
            Some(t) => t.stack.push(state),
            // No thread known yet on this CPU: the state belongs to the CPU's context.
            None => self.cpus[cpu].interrupts.push(state),
        }
        Ok(())
    }

    /// The producer of soft IRQ `key` (the `handler` of its entry): the one the board declared with
    /// that local id, else the vector's, found by the handler's symbol (`run_timer_softirq` is
    /// `TIMER`) or, for small keys, as a vector number (ftrace's `vec=`). Handlers of one vector share
    /// its producer; the handler stays a parameter of each state.
    fn softirq_producer(&mut self, key: u64, sink: &mut impl Sink) -> Result<ProducerId> {
        if let Some(&id) = self.softirqs.get(&key) {
            return Ok(id);
        }
        let hint = self.name_hints.get(&(true, key));
        let name = match hint {
            Some(h) => softirq_vector_of(h).map_or_else(|| h.clone(), str::to_string),
            None => usize::try_from(key)
                .ok()
                .and_then(|k| SOFTIRQ_VECTORS.get(k))
                .map_or_else(|| format!("softirq {key:#x}"), |v| (*v).to_string()),
        };
        if let Some(&id) = self.softirq_names.get(&name) {
            self.softirqs.insert(key, id);
            return Ok(id);
        }
        let id = self.alloc_producer();
        self.softirqs.insert(key, id);
        self.softirq_names.insert(name.clone(), id);
        sink.producer(&Producer {
            id,
            parent: None,
            kind: ProducerKind::SoftIrq,
            local_id: key as i64,
            name,
        })?;
        Ok(id)
    }

    fn exit(
        &mut self,
        cpu: usize,
        ts: Timestamp,
        enter: u16,
        r: &impl RawRecord,
        dict: &impl TypeTable,
        sink: &mut impl Sink,
    ) -> Result<()> {
        // Where the entry lives: the interrupt stack for IRQs, else the running thread's stack (or the CPU's
        // context when no thread is known).
        let running = self.emitter.or(self.cpus[cpu].running);
        let on_thread = !Self::is_interrupt(enter) && running.is_some();
        let (stack_len, position) = {
            let stack = if on_thread {
                self.threads
                    .get(&running.unwrap_or(0))
                    .map(|t| t.stack.as_slice())
            } else {
                Some(self.cpus[cpu].interrupts.as_slice())
            };
            stack.map_or((0, None), |s| {
                (s.len(), s.iter().rposition(|o| o.enter == enter))
            })
        };
        let exit_has_params = dict.exit_of(enter).is_some_and(|x| !x.params.is_empty());
        match position {
            Some(pos) => {
                // Close what was opened inside it and never closed (a lost exit), innermost first, then it.
                for depth in (pos..stack_len).rev() {
                    let popped = if on_thread {
                        match self.threads.get_mut(&running.unwrap_or(0)) {
                            Some(t) => t.stack.pop(),
                            None => return Ok(()),
                        }
                    } else {
                        self.cpus[cpu].interrupts.pop()
                    };
                    let Some(mut s) = popped else { break };
                    if depth == pos {
                        if exit_has_params {
                            let at = s.params.len();
                            r.write_params(&mut s.params, at);
                        }
                    } else {
                        self.stats.clipped_open_states += 1;
                    }
                    let depth = if on_thread { depth + 1 } else { depth };
                    self.emit_state(s, ts, depth, sink)?;
                }
                Ok(())
            }
            None => {
                // The entry happened before the capture (or was lost): clip the state to the capture's edge.
                self.stats.clipped_exits += 1;
                let start = if on_thread {
                    self.cpus[cpu].running_since
                } else {
                    self.cpus[cpu].first_ts.unwrap_or(ts)
                };
                let producer = if Self::is_interrupt(enter) {
                    self.context_producer(cpu, sink)?
                } else {
                    self.thread_producer(cpu, sink)?
                };
                let mut params: Vec<ParamValue> = Vec::new();
                if exit_has_params {
                    // Unknown entry parameters: fill the entry's slots with zeros so positions stay right.
                    if let Some(t) = dict.get(enter) {
                        for p in &t.params {
                            params.push(match p.ty {
                                wdict::ParamType::Signed => ParamValue::Signed(0),
                                wdict::ParamType::Float => ParamValue::Float(0.0),
                                wdict::ParamType::String => ParamValue::String(String::new()),
                                wdict::ParamType::Address => ParamValue::Address(0),
                                wdict::ParamType::Unsigned => ParamValue::Unsigned(0),
                            });
                        }
                        if adds_syscall_name(t) {
                            // The exit knows the number: the entry's name slot is named from it.
                            let nr = r.unsigned(0).unwrap_or(0);
                            params.push(ParamValue::String(self.syscall_abi.label(nr)));
                        }
                        // An exit that names its call (text captures: `sys_read -> 0x24`) names the
                        // state its missing entry would have.
                        if let Some(i) = t.params.iter().position(|p| p.name == "name")
                            && let Some(x) = dict.exit_of(enter)
                            && let Some(j) = x.params.iter().position(|p| p.name == "exit_name")
                            && let Some(n) = r.text(j).filter(|n| !n.is_empty())
                            && let Some(slot) = params.get_mut(i)
                        {
                            *slot = ParamValue::String(n.to_string());
                            // And its number, which such an exit carries first, as the entry does.
                            if let Some(k) = t.params.iter().position(|p| p.name == "nr")
                                && let Some(nr) = r.unsigned(0)
                                && let Some(slot) = params.get_mut(k)
                            {
                                *slot = ParamValue::Unsigned(nr);
                            }
                        }
                    }
                    let at = params.len();
                    r.write_params(&mut params, at);
                }
                let s = OpenState {
                    type_id: TypeId::from(enter),
                    enter,
                    producer,
                    start,
                    cpu: cpu as u16,
                    params,
                };
                let depth = if on_thread { stack_len + 1 } else { stack_len };
                self.emit_state(s, ts, depth, sink)
            }
        }
    }

    fn context_switch(
        &mut self,
        cpu: usize,
        ts: Timestamp,
        prev: u64,
        next: u64,
        sink: &mut impl Sink,
    ) -> Result<()> {
        let current = self.cpus[cpu].running;
        if current.is_some() && current != Some(prev) {
            self.stats.switch_mismatches += 1;
        }
        // Close the running state of whoever was running (the previous thread if nobody was known: clipped).
        let outgoing = current.unwrap_or_else(|| {
            self.stats.clipped_exits += 1;
            prev
        });
        let producer = self.thread(outgoing, sink)?;
        if current.is_none() {
            // States entered before the CPU's first switch (a capture that starts mid-stream) were
            // entered by the thread now switched out: they go on its stack, where their exits look
            // for them, instead of staying on the CPU's context for the rest of the capture.
            let c = &mut self.cpus[cpu];
            if c.interrupts.iter().any(|s| !Self::is_interrupt(s.enter)) {
                let (moved, kept): (Vec<OpenState>, Vec<OpenState>) =
                    std::mem::take(&mut c.interrupts)
                        .into_iter()
                        .partition(|s| !Self::is_interrupt(s.enter));
                c.interrupts = kept;
                if let Some(t) = self.threads.get_mut(&outgoing) {
                    t.stack.extend(moved.into_iter().map(|mut s| {
                        s.producer = producer;
                        s
                    }));
                }
            }
        }
        let since = self.cpus[cpu].running_since;
        self.emit_simple(
            since,
            RUNNING_TYPE,
            producer,
            cpu as u16,
            EventKind::State { end: ts, depth: 0 },
            sink,
        )?;
        self.emit_cpu_slice(cpu, outgoing, producer, since, ts, sink)?;
        // The incoming thread runs from now on; its pending wake-ups end here.
        let incoming = self.thread(next, sink)?;
        self.cpus[cpu].running = Some(next);
        self.cpus[cpu].running_since = ts;
        sink.state_opened(ts, RUNNING_TYPE, incoming, cpu as u16);
        if let Some(mut pending) = self.wakeups.remove(&next) {
            // A wake-up later than this switch-in (another CPU's batch that arrived first, at a
            // capture's start) is for a later switch-in: it stays pending, so no link ends before it
            // starts.
            let later: Vec<PendingWakeup> = pending.iter().filter(|w| w.ts > ts).copied().collect();
            pending.retain(|w| w.ts <= ts);
            if !later.is_empty() {
                self.wakeups.insert(next, later);
            }
            for w in pending {
                self.emit_simple(
                    w.ts,
                    WAKEUP_TYPE,
                    w.waker,
                    w.cpu,
                    EventKind::Link {
                        end: ts,
                        target: incoming,
                    },
                    sink,
                )?;
            }
        }
        Ok(())
    }

    /// Thread `pid` exited at `ticks` (ftrace's `sched_process_exit`; a board's `thread_exit` record
    /// does the same through [`Self::record_at`]): the states it still had open (syscalls, functions,
    /// user states: the exit path does not return from them) end there, innermost first. Its running
    /// state goes on until it is switched out, as the kernel still runs it.
    pub fn thread_exited(&mut self, pid: u64, ticks: u64, sink: &mut impl Sink) -> Result<()> {
        let ts = self.ticks_to_ns(ticks);
        self.close_at_exit(pid, ts, sink)
    }

    /// The one rule for a thread's exit, for live captures and every importer: see
    /// [`Self::thread_exited`]; each state closed is counted in `closed_at_exit`.
    fn close_at_exit(&mut self, pid: u64, ts: Timestamp, sink: &mut impl Sink) -> Result<()> {
        let Some(t) = self.threads.get_mut(&pid) else {
            return Ok(());
        };
        let stack = std::mem::take(&mut t.stack);
        for (depth, s) in stack.into_iter().enumerate().rev() {
            self.stats.closed_at_exit += 1;
            let end = ts.max(s.start);
            self.emit_state(s, end, depth + 1, sink)?;
        }
        Ok(())
    }

    /// Closes everything still open at the last timestamp seen (counted as clipped).
    pub fn finish(&mut self, sink: &mut impl Sink) -> Result<()> {
        let end = self.last_ts;
        for cpu in 0..self.cpus.len() {
            let interrupts = std::mem::take(&mut self.cpus[cpu].interrupts);
            for (depth, s) in interrupts.into_iter().enumerate().rev() {
                self.stats.clipped_open_states += 1;
                self.emit_state(s, end, depth, sink)?;
            }
            if let Some(pid) = self.cpus[cpu].running.take() {
                let producer = self.thread(pid, sink)?;
                let since = self.cpus[cpu].running_since;
                self.stats.clipped_open_states += 1;
                self.emit_simple(
                    since,
                    RUNNING_TYPE,
                    producer,
                    cpu as u16,
                    EventKind::State { end, depth: 0 },
                    sink,
                )?;
                self.emit_cpu_slice(cpu, pid, producer, since, end, sink)?;
            }
        }
        let mut pids: Vec<u64> = self.threads.keys().copied().collect();
        pids.sort_unstable();
        let mut open: Vec<(OpenState, usize)> = Vec::new();
        for pid in pids {
            if let Some(t) = self.threads.get_mut(&pid) {
                let stack = std::mem::take(&mut t.stack);
                open.extend(
                    stack
                        .into_iter()
                        .enumerate()
                        .rev()
                        .map(|(depth, s)| (s, depth + 1)),
                );
            }
        }
        // Latest start first (ties in thread order, innermost first). These states all end at the
        // capture's end, so a thread that stayed in a syscall since the start spans the whole trace: in
        // this order, what the store summarises between two of its commits covers the time from the
        // latest start written on, not the whole capture at every commit.
        open.sort_by_key(|(s, _)| std::cmp::Reverse(s.start));
        for (s, depth) in open {
            self.stats.clipped_open_states += 1;
            self.emit_state(s, end, depth, sink)?;
        }
        let mut pending: Vec<(u64, Vec<PendingWakeup>)> = self.wakeups.drain().collect();
        pending.sort_unstable_by_key(|(pid, _)| *pid);
        for (pid, ws) in pending {
            let target = self.thread(pid, sink)?;
            for w in ws {
                self.stats.clipped_wakeups += 1;
                self.emit_simple(
                    w.ts,
                    WAKEUP_TYPE,
                    w.waker,
                    w.cpu,
                    EventKind::Link { end, target },
                    sink,
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::ImportTypes;

    /// A record of the built-in dictionary: type and parameters.
    struct Raw(u16, Vec<ParamValue>);

    impl RawRecord for Raw {
        fn type_id(&self) -> u16 {
            self.0
        }
        fn param_count(&self) -> usize {
            self.1.len()
        }
        fn param(&self, i: usize) -> Option<ParamValue> {
            self.1.get(i).cloned()
        }
        fn unsigned(&self, i: usize) -> Option<u64> {
            match *self.1.get(i)? {
                ParamValue::Unsigned(v) => Some(v),
                _ => None,
            }
        }
        fn text(&self, _: usize) -> Option<&str> {
            None
        }
    }

    #[derive(Default)]
    struct Events(Vec<Event>);

    impl Sink for Events {
        fn producer(&mut self, _: &Producer) -> Result<()> {
            Ok(())
        }
        fn event_type(&mut self, _: &EventType) -> Result<()> {
            Ok(())
        }
        fn event(&mut self, e: &Event) -> Result<()> {
            self.0.push(e.clone());
            Ok(())
        }
        fn loss(&mut self, _: &LossRecord) -> Result<()> {
            Ok(())
        }
    }

    /// Every event type declared and event emitted.
    #[derive(Default)]
    struct Declared(Vec<EventType>, Vec<Event>);

    impl Sink for Declared {
        fn producer(&mut self, _: &Producer) -> Result<()> {
            Ok(())
        }
        fn event_type(&mut self, t: &EventType) -> Result<()> {
            self.0.push(t.clone());
            Ok(())
        }
        fn event(&mut self, e: &Event) -> Result<()> {
            self.1.push(e.clone());
            Ok(())
        }
        fn loss(&mut self, _: &LossRecord) -> Result<()> {
            Ok(())
        }
    }

    #[test]
    fn syscall_states_of_a_board_carry_the_name_beside_the_number() {
        let dict = Dictionary::default();
        let mut sink = Declared::default();
        let mut r = Reconstructor::new(1_000_000_000, 0, 1);
        r.start(&dict, &mut sink).unwrap();
        let ty = sink
            .0
            .iter()
            .find(|t| t.id == TypeId::from(Builtin::SyscallEntry.id()))
            .expect("the syscall state type");
        let names: Vec<String> = ty.params.iter().map(|p| p.name.clone()).collect();
        assert_eq!(
            names,
            ["nr", "a0", "a1", "a2", "a3", "name", "exit_nr", "ret"]
        );
        let u = ParamValue::Unsigned;
        let switch = Raw(Builtin::ContextSwitch.id(), vec![u(0), u(7)]);
        let enter = Raw(
            Builtin::SyscallEntry.id(),
            vec![u(240), u(1), u(2), u(3), u(4)],
        );
        let exit = |nr| {
            Raw(
                Builtin::SyscallExit.id(),
                vec![u(nr), ParamValue::Signed(0)],
            )
        };
        r.record_at(0, 10, &switch, &dict, &mut sink).unwrap();
        // An exit whose entry came before the capture: named from the exit's number.
        r.record_at(0, 15, &exit(3), &dict, &mut sink).unwrap();
        r.record_at(0, 20, &enter, &dict, &mut sink).unwrap();
        r.record_at(0, 30, &exit(240), &dict, &mut sink).unwrap();
        let syscalls: Vec<&Event> = sink
            .1
            .iter()
            .filter(|e| e.type_id == TypeId::from(Builtin::SyscallEntry.id()))
            .collect();
        assert_eq!(syscalls.len(), 2);
        for (e, nr, name) in [(syscalls[0], 0, "read"), (syscalls[1], 240, "futex")] {
            assert_eq!(e.params.len(), names.len(), "{e:?}");
            assert_eq!(e.params[5], ParamValue::String(name.into()), "{e:?}");
            if nr != 0 {
                assert_eq!(e.params[0], u(nr), "{e:?}");
            }
        }
        // An x86-64 board: the same number is another call.
        let mut r = Reconstructor::new(1_000_000_000, 0, 1);
        r.set_syscall_abi(SyscallAbi::X86_64);
        let mut sink = Declared::default();
        r.start(&dict, &mut sink).unwrap();
        r.record_at(0, 10, &switch, &dict, &mut sink).unwrap();
        let enter = Raw(
            Builtin::SyscallEntry.id(),
            vec![u(202), u(0), u(0), u(0), u(0)],
        );
        r.record_at(0, 20, &enter, &dict, &mut sink).unwrap();
        r.record_at(0, 30, &exit(202), &dict, &mut sink).unwrap();
        let e = sink
            .1
            .iter()
            .find(|e| e.type_id == TypeId::from(Builtin::SyscallEntry.id()))
            .unwrap();
        assert_eq!(e.params[5], ParamValue::String("futex".into()));
    }

    #[test]
    fn states_open_at_the_end_are_clipped_latest_start_first() {
        let types = ImportTypes::new();
        let mut sink = Events::default();
        let mut r = Reconstructor::new(1_000_000_000, 0, 2);
        r.start(&types, &mut sink).unwrap();
        let u = ParamValue::Unsigned;
        let switch = |next| Raw(Builtin::ContextSwitch.id(), vec![u(0), u(next)]);
        let enter = |nr| {
            Raw(
                Builtin::SyscallEntry.id(),
                vec![u(nr), u(0), u(0), u(0), u(0)],
            )
        };
        let exit = Raw(Builtin::SyscallExit.id(), vec![u(0), ParamValue::Signed(0)]);
        r.record_at(0, 10, &switch(7), &types, &mut sink).unwrap();
        r.record_at(1, 10, &switch(3), &types, &mut sink).unwrap();
        r.record_at(0, 20, &enter(1), &types, &mut sink).unwrap();
        r.record_at(1, 30, &enter(2), &types, &mut sink).unwrap();
        r.record_at(1, 40, &enter(3), &types, &mut sink).unwrap();
        r.record_at(1, 45, &enter(4), &types, &mut sink).unwrap();
        r.record_at(1, 50, &exit, &types, &mut sink).unwrap();
        r.record_at(0, 60, &enter(5), &types, &mut sink).unwrap();
        sink.0.clear();
        r.finish(&mut sink).unwrap();
        let syscalls: Vec<(i64, Option<u16>, EventKind)> = sink
            .0
            .iter()
            .filter(|e| e.type_id == TypeId::from(Builtin::SyscallEntry.id()))
            .map(|e| (e.ts, e.cpu, e.kind))
            .collect();
        let state = |depth| EventKind::State { end: 60, depth };
        assert_eq!(
            syscalls,
            [
                (60, Some(0), state(2)),
                (40, Some(1), state(2)),
                (30, Some(1), state(1)),
                (20, Some(0), state(1)),
            ]
        );
        assert_eq!(r.stats().clipped_open_states, 4 + 2);
    }

    #[test]
    fn soft_irq_handlers_are_known_by_their_vector() {
        assert_eq!(softirq_vector_of("run_timer_softirq"), Some("TIMER"));
        assert_eq!(softirq_vector_of("net_rx_action"), Some("NET_RX"));
        assert_eq!(softirq_vector_of("NET_RX"), Some("NET_RX"));
        assert_eq!(softirq_vector_of("my_bottom_half"), None);
        let mut r = Reconstructor::new(1_000_000_000, 0, 1);
        let mut sink = Names::default();
        r.name_hint(true, 0xc001, "run_timer_softirq");
        r.name_hint(true, 0xc002, "run_timer_softirq");
        let a = r.softirq_producer(0xc001, &mut sink).unwrap();
        let b = r.softirq_producer(0xc002, &mut sink).unwrap();
        let v = r.softirq_producer(3, &mut sink).unwrap();
        assert_eq!(a, b, "two handlers of one vector share its row");
        assert_eq!(
            sink.0,
            [(a, "TIMER".to_string()), (v, "NET_RX".to_string())]
        );
    }

    /// The producers declared, in order.
    #[derive(Default)]
    struct Names(Vec<(ProducerId, String)>);

    impl Sink for Names {
        fn producer(&mut self, p: &Producer) -> Result<()> {
            self.0.push((p.id, p.name.clone()));
            Ok(())
        }
        fn event_type(&mut self, _: &EventType) -> Result<()> {
            Ok(())
        }
        fn event(&mut self, _: &Event) -> Result<()> {
            Ok(())
        }
        fn loss(&mut self, _: &LossRecord) -> Result<()> {
            Ok(())
        }
    }

    #[test]
    fn assign_params_replaces_the_tail_and_reuses_string_buffers() {
        let mut out = vec![
            ParamValue::Unsigned(1),
            ParamValue::String(String::with_capacity(64)),
            ParamValue::Signed(-1),
        ];
        let buffer = match &out[1] {
            ParamValue::String(s) => s.as_ptr(),
            _ => unreachable!(),
        };
        let src = [ParamValue::Address(7), ParamValue::String("read".into())];
        assign_params(&mut out, 0, &src);
        assert_eq!(out, src);
        // Same position, same type: the buffer was kept.
        assert!(matches!(&out[1], ParamValue::String(s) if s.as_ptr() == buffer));
        // Appending after the first values, then shrinking the tail.
        assign_params(
            &mut out,
            2,
            &[ParamValue::Unsigned(0), ParamValue::Signed(36)],
        );
        assert_eq!(out.len(), 4);
        assert_eq!(out[3], ParamValue::Signed(36));
        assign_params(&mut out, 1, &[ParamValue::Float(0.5)]);
        assert_eq!(out, [ParamValue::Address(7), ParamValue::Float(0.5)]);
        // `at` beyond the end appends.
        assign_params(&mut out, 9, &[ParamValue::Unsigned(3)]);
        assert_eq!(out.len(), 3);
    }
}
