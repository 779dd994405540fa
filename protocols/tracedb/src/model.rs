//! The typed data model: traces, event types with parameter types, producers, events, losses.
//!
//! It follows the SoC-Trace data model (RT-427 §3.1): every element that varies by format
//! (traces, events, annotations) uses the self-defining pattern — a type lists named, typed
//! parameters and each instance carries one value per parameter.

/// Nanoseconds since the start of the trace.
pub type Timestamp = i64;

/// Identifier of an [`EventType`] inside one trace.
pub type TypeId = u32;

/// Identifier of a [`Producer`] inside one trace.
pub type ProducerId = u32;

/// Identifier of a CPU (core) of the traced board.
pub type Cpu = u16;

/// The state type of a CPU's scheduling (`on_cpu`): on a CPU producer, while a thread other than
/// the idle task runs on that CPU; its parameters are the thread's producer id (`thread`) and its id
/// on the board (`tid`). Written by the collector from the context switches (`SCHEMA.md`, CPU
/// tracks).
pub const ON_CPU_TYPE: TypeId = 100_004;

/// The state type of an idle CPU (`cpu_idle`): on a CPU producer, while its idle task (pid 0) runs.
pub const CPU_IDLE_TYPE: TypeId = 100_005;

/// The state type of a thread's time on a CPU (`running`): on the thread's producer, one per
/// stretch between the context switches that put it on and took it off that CPU. Written by the
/// collector's reconstruction; the CPU tracks are derived from it ([`cpu_track_slice`]).
pub const RUNNING_TYPE: TypeId = 100_001;

/// The CPU track's slice for one stretch a thread ran on a CPU (`SCHEMA.md`, CPU tracks): a state
/// on the CPU's producer `track` from `start` to `end`, `cpu_idle` for the idle task (`tid` 0),
/// else `on_cpu` naming the thread's producer and its id on the board.
///
/// The one rule for live ingest (the collector writes it beside each `running` state) and for
/// traces written before the CPU tracks existed (`upgrade_trace` derives it from their `running`
/// states). `out` is overwritten (its parameter vector reused); false, and `out` untouched, for an
/// empty stretch: it says nothing, and would share its start with the next slice at the same depth.
pub fn cpu_track_slice(
    out: &mut Event,
    track: ProducerId,
    cpu: Cpu,
    thread: ProducerId,
    tid: u64,
    start: Timestamp,
    end: Timestamp,
) -> bool {
    if end <= start {
        return false;
    }
    out.ts = start;
    out.producer = track;
    out.cpu = Some(cpu);
    out.kind = EventKind::State { end, depth: 0 };
    out.params.clear();
    if tid == 0 {
        out.type_id = CPU_IDLE_TYPE;
    } else {
        out.type_id = ON_CPU_TYPE;
        out.params.push(ParamValue::Unsigned(u64::from(thread)));
        out.params.push(ParamValue::Unsigned(tid));
    }
    true
}

/// Whether a trace declaring `types` was recorded before the CPU tracks existed: it has the
/// collector's `running` states (its context switches) but no `on_cpu` type, which the collector
/// declares in every trace since the tracks exist (and `upgrade_trace` with the tracks it derives).
/// What `socscope stats` and the GUI's Gantt check before pointing the user to `socscope upgrade`.
pub fn recorded_before_cpu_tracks(types: &[EventType]) -> bool {
    types
        .iter()
        .any(|t| t.id == RUNNING_TYPE && t.name == "running" && t.category == EventCategory::State)
        && !types.iter().any(|t| t.id == ON_CPU_TYPE)
}

/// The CPU-track types as the collector declares them (`SCHEMA.md`, CPU tracks).
pub fn cpu_track_types() -> [EventType; 2] {
    [
        EventType {
            id: ON_CPU_TYPE,
            name: "on_cpu".into(),
            category: EventCategory::State,
            params: vec![
                ParamDef::new("thread", ParamType::Unsigned),
                ParamDef::new("tid", ParamType::Unsigned),
            ],
        },
        EventType {
            id: CPU_IDLE_TYPE,
            name: "cpu_idle".into(),
            category: EventCategory::State,
            params: Vec::new(),
        },
    ]
}

/// Stable identifier of a stored event: `chunk_id * 4096 + index in chunk` (see `SCHEMA.md`).
pub type EventId = i64;

/// A half-open time interval `[start, end)` in trace nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TimeRange {
    /// First included nanosecond.
    pub start: Timestamp,
    /// First excluded nanosecond.
    pub end: Timestamp,
}

impl TimeRange {
    /// `[start, end)`.
    pub const fn new(start: Timestamp, end: Timestamp) -> Self {
        Self { start, end }
    }

    /// The whole time line.
    pub const fn all() -> Self {
        Self {
            start: i64::MIN,
            end: i64::MAX,
        }
    }

    /// Everything from `start` on.
    pub const fn from(start: Timestamp) -> Self {
        Self {
            start,
            end: i64::MAX,
        }
    }

    /// Whether `t` is inside.
    pub const fn contains(&self, t: Timestamp) -> bool {
        t >= self.start && t < self.end
    }

    /// Whether the interval holds no nanosecond.
    pub const fn is_empty(&self) -> bool {
        self.end <= self.start
    }

    /// Length in nanoseconds (saturating).
    pub const fn len(&self) -> i64 {
        if self.end <= self.start {
            0
        } else {
            self.end.saturating_sub(self.start)
        }
    }

    /// How many nanoseconds of `[a, b)` fall inside.
    pub fn overlap(&self, a: Timestamp, b: Timestamp) -> i64 {
        let lo = a.max(self.start);
        let hi = b.min(self.end);
        if hi > lo { hi.saturating_sub(lo) } else { 0 }
    }
}

/// The Framesoc event categories.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum EventCategory {
    /// Something that happened at one instant.
    Punctual = 0,
    /// A producer was in a state from `ts` to `end` (e.g. a thread running, an IRQ handler).
    State = 1,
    /// A relation from one producer to another between `ts` and `end` (e.g. a wake-up).
    Link = 2,
    /// A numeric value of a producer changed at `ts`.
    Variable = 3,
}

impl EventCategory {
    /// All categories, in code order.
    pub const ALL: [EventCategory; 4] = [
        EventCategory::Punctual,
        EventCategory::State,
        EventCategory::Link,
        EventCategory::Variable,
    ];

    /// The code stored in files.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// The category of a stored code.
    pub const fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(EventCategory::Punctual),
            1 => Some(EventCategory::State),
            2 => Some(EventCategory::Link),
            3 => Some(EventCategory::Variable),
            _ => None,
        }
    }

    /// Lower-case name, as shown by the `events` virtual table.
    pub const fn name(self) -> &'static str {
        match self {
            EventCategory::Punctual => "punctual",
            EventCategory::State => "state",
            EventCategory::Link => "link",
            EventCategory::Variable => "variable",
        }
    }
}

/// The type of a parameter value (the `TYPE` column of RT-427's `EVENT_PARAM_TYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ParamType {
    /// Signed 64-bit integer.
    Signed = 0,
    /// Unsigned 64-bit integer.
    Unsigned = 1,
    /// 64-bit float.
    Float = 2,
    /// UTF-8 text.
    String = 3,
    /// A memory address (unsigned, shown in hex).
    Address = 4,
}

impl ParamType {
    /// The name stored in the `param_type.type` column.
    pub const fn name(self) -> &'static str {
        match self {
            ParamType::Signed => "signed",
            ParamType::Unsigned => "unsigned",
            ParamType::Float => "float",
            ParamType::String => "string",
            ParamType::Address => "address",
        }
    }

    /// The type named `name` (as stored).
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "signed" => ParamType::Signed,
            "unsigned" => ParamType::Unsigned,
            "float" => ParamType::Float,
            "string" => ParamType::String,
            "address" => ParamType::Address,
            _ => return None,
        })
    }
}

/// One parameter value of an event (or of a trace, or of an annotation).
#[derive(Debug, Clone, PartialEq)]
pub enum ParamValue {
    /// A signed integer.
    Signed(i64),
    /// An unsigned integer.
    Unsigned(u64),
    /// A float.
    Float(f64),
    /// Text.
    String(String),
    /// A memory address.
    Address(u64),
}

impl ParamValue {
    /// The type of this value.
    pub const fn param_type(&self) -> ParamType {
        match self {
            ParamValue::Signed(_) => ParamType::Signed,
            ParamValue::Unsigned(_) => ParamType::Unsigned,
            ParamValue::Float(_) => ParamType::Float,
            ParamValue::String(_) => ParamType::String,
            ParamValue::Address(_) => ParamType::Address,
        }
    }

    /// The value as a number, if it is one.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            ParamValue::Signed(v) => Some(v as f64),
            ParamValue::Unsigned(v) | ParamValue::Address(v) => Some(v as f64),
            ParamValue::Float(v) => Some(v),
            ParamValue::String(_) => None,
        }
    }

    /// Parses `text` as a value of type `ty` (addresses accept a `0x` prefix).
    pub fn parse(ty: ParamType, text: &str) -> Option<Self> {
        let t = text.trim();
        Some(match ty {
            ParamType::Signed => ParamValue::Signed(t.parse().ok()?),
            ParamType::Unsigned => ParamValue::Unsigned(t.parse().ok()?),
            ParamType::Float => ParamValue::Float(t.parse().ok()?),
            ParamType::String => ParamValue::String(text.to_string()),
            ParamType::Address => {
                let v = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                    Some(hex) => u64::from_str_radix(hex, 16).ok()?,
                    None => t.parse().ok()?,
                };
                ParamValue::Address(v)
            }
        })
    }
}

impl std::fmt::Display for ParamValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParamValue::Signed(v) => write!(f, "{v}"),
            ParamValue::Unsigned(v) => write!(f, "{v}"),
            ParamValue::Float(v) => write!(f, "{v}"),
            ParamValue::String(v) => f.write_str(v),
            ParamValue::Address(v) => write!(f, "{v:#x}"),
        }
    }
}

/// A named, typed parameter of an event type (or trace type, or annotation type).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ParamDef {
    /// Parameter name, unique within its type (e.g. `OLDPID`).
    pub name: String,
    /// Value type.
    pub ty: ParamType,
}

impl ParamDef {
    /// A parameter named `name` of type `ty`.
    pub fn new(name: impl Into<String>, ty: ParamType) -> Self {
        Self {
            name: name.into(),
            ty,
        }
    }
}

/// An event type: its category and its parameter list (self-defining pattern).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventType {
    /// Identifier chosen by the writer, unique in the trace.
    pub id: TypeId,
    /// Name or mnemonic (e.g. `CS`, `irq_entry`).
    pub name: String,
    /// Category of its events.
    pub category: EventCategory,
    /// Parameters, in the order events carry their values.
    pub params: Vec<ParamDef>,
}

/// What kind of active entity a producer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProducerKind {
    /// A process (address space).
    Process,
    /// A thread or task.
    Thread,
    /// A hardware interrupt line.
    Irq,
    /// A soft interrupt / bottom half.
    SoftIrq,
    /// A CPU core.
    Cpu,
    /// Anything else (a hardware block, a GStreamer element, ...).
    Other,
}

impl ProducerKind {
    /// The name stored in `producer.kind`.
    pub const fn name(self) -> &'static str {
        match self {
            ProducerKind::Process => "process",
            ProducerKind::Thread => "thread",
            ProducerKind::Irq => "irq",
            ProducerKind::SoftIrq => "softirq",
            ProducerKind::Cpu => "cpu",
            ProducerKind::Other => "other",
        }
    }

    /// The kind named `name`; unknown names read as [`ProducerKind::Other`].
    pub fn from_name(name: &str) -> Self {
        match name {
            "process" => ProducerKind::Process,
            "thread" => ProducerKind::Thread,
            "irq" => ProducerKind::Irq,
            "softirq" => ProducerKind::SoftIrq,
            "cpu" => ProducerKind::Cpu,
            _ => ProducerKind::Other,
        }
    }
}

/// An event producer: a node of the producer hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Producer {
    /// Identifier chosen by the writer, unique in the trace.
    pub id: ProducerId,
    /// The enclosing producer (a thread's process), if any.
    pub parent: Option<ProducerId>,
    /// What it is.
    pub kind: ProducerKind,
    /// Identifier on the board (PID, TID, IRQ number, ...).
    pub local_id: i64,
    /// Human name.
    pub name: String,
}

/// Category-specific part of an event.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum EventKind {
    /// A punctual event.
    #[default]
    Punctual,
    /// A state from the event timestamp to `end`, at nesting `depth` (0 = outermost).
    State {
        /// End of the state (≥ start).
        end: Timestamp,
        /// Nesting level.
        depth: u16,
    },
    /// A link from the event's producer to `target`, from the event timestamp to `end`.
    Link {
        /// Arrival time (≥ start).
        end: Timestamp,
        /// Target producer.
        target: ProducerId,
    },
    /// A new value of a variable.
    Variable {
        /// The value.
        value: f64,
    },
}

impl EventKind {
    /// The category.
    pub const fn category(&self) -> EventCategory {
        match self {
            EventKind::Punctual => EventCategory::Punctual,
            EventKind::State { .. } => EventCategory::State,
            EventKind::Link { .. } => EventCategory::Link,
            EventKind::Variable { .. } => EventCategory::Variable,
        }
    }
}

/// One event, as written by the collector and read by the analyzer.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Event {
    /// Start time.
    pub ts: Timestamp,
    /// Its type.
    pub type_id: TypeId,
    /// Who caused it.
    pub producer: ProducerId,
    /// The CPU it happened on, if known.
    pub cpu: Option<Cpu>,
    /// Category and category-specific fields.
    pub kind: EventKind,
    /// Parameter values, in the order of the type's parameter list.
    pub params: Vec<ParamValue>,
}

impl Event {
    /// The event category.
    pub const fn category(&self) -> EventCategory {
        self.kind.category()
    }

    /// End time: the state or link end, else the timestamp.
    pub const fn end(&self) -> Timestamp {
        match self.kind {
            EventKind::State { end, .. } | EventKind::Link { end, .. } => end,
            _ => self.ts,
        }
    }

    /// A punctual event with no parameters.
    pub fn punctual(
        ts: Timestamp,
        type_id: TypeId,
        producer: ProducerId,
        cpu: Option<Cpu>,
    ) -> Self {
        Self {
            ts,
            type_id,
            producer,
            cpu,
            kind: EventKind::Punctual,
            params: Vec::new(),
        }
    }

    /// A state with no parameters.
    pub fn state(
        ts: Timestamp,
        end: Timestamp,
        depth: u16,
        type_id: TypeId,
        producer: ProducerId,
        cpu: Option<Cpu>,
    ) -> Self {
        Self {
            ts,
            type_id,
            producer,
            cpu,
            kind: EventKind::State { end, depth },
            params: Vec::new(),
        }
    }

    /// Adds parameter values.
    pub fn with_params(mut self, params: Vec<ParamValue>) -> Self {
        self.params = params;
        self
    }
}

/// An event as read back, with its stable identifier.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StoredEvent {
    /// See [`EventId`].
    pub id: EventId,
    /// The event.
    pub event: Event,
}

impl std::ops::Deref for StoredEvent {
    type Target = Event;
    fn deref(&self) -> &Event {
        &self.event
    }
}

/// Records lost on the board or on the link, as counted by the agent and the collector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LossRecord {
    /// CPU whose buffer overflowed, if known.
    pub cpu: Option<Cpu>,
    /// Trace time where the gap is (approximately).
    pub ts: Timestamp,
    /// How many records were lost.
    pub count: u64,
    /// First missing sequence number, if known.
    pub seq_from: Option<u64>,
    /// Last missing sequence number, if known.
    pub seq_to: Option<u64>,
    /// Why (e.g. `ring buffer full`, `bad CRC`).
    pub reason: String,
}

/// A counter kept by the ingest (frames dropped, bytes read, ...): parse failures go here
/// instead of aborting the capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngestStat {
    /// Counter name (unique).
    pub name: String,
    /// Value.
    pub value: i64,
    /// What it counts.
    pub description: String,
}

/// A file related to a trace (configuration, raw capture, hardware description, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceFile {
    /// Identifier (assigned by the store).
    pub id: i64,
    /// Path.
    pub path: String,
    /// Free text.
    pub description: String,
}

/// Everything known about a trace before it is written: the common attributes and the
/// trace type with its parameters (self-defining pattern, RT-427 §3.1.3).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TraceHeader {
    /// Trace type (e.g. `socscope-live`, `kptrace`, `paje`).
    pub trace_type: String,
    /// Board name.
    pub board: String,
    /// SoC name.
    pub soc: String,
    /// Operating system.
    pub os: String,
    /// Traced application.
    pub application: String,
    /// Number of CPUs.
    pub cpus: u32,
    /// Board timestamp ticks per second (timestamps in the store are always nanoseconds).
    pub tick_rate_hz: u64,
    /// Wall-clock start, nanoseconds since the Unix epoch.
    pub start_unix_ns: i64,
    /// Free text.
    pub description: String,
    /// Whether this trace was produced by processing another one.
    pub processed: bool,
    /// Type-specific parameters (e.g. `output_device`, `agent_version`).
    pub params: Vec<(String, ParamValue)>,
}

/// The trace parameter that says which part of a board's run a capture holds (see `SCHEMA.md`).
pub const CAPTURE_WINDOW_PARAM: &str = "capture_window";
/// [`CAPTURE_WINDOW_PARAM`]'s value for the window of a post-mortem ring: what the board's rings held
/// when it dumped them; what came before is outside the window, not lost.
pub const POST_MORTEM_RING: &str = "post-mortem ring";

/// A trace's header plus what the writer learnt while writing (what `socscope info` shows).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TraceInfo {
    /// As given to the writer.
    pub meta: TraceHeader,
    /// First event timestamp (0 when empty).
    pub t_min: Timestamp,
    /// Last event end (0 when empty).
    pub t_max: Timestamp,
    /// Events committed so far.
    pub event_count: u64,
    /// Whether the writer finished and declared the trace complete.
    pub complete: bool,
    /// Whether the writer called `finish` at all (false while capturing or after a crash).
    pub finished: bool,
}

impl TraceInfo {
    /// `t_max - t_min`.
    pub fn duration(&self) -> i64 {
        self.t_max.saturating_sub(self.t_min)
    }

    /// The whole trace as a range, up to and including its last event: `[t_min, t_max + 1)`
    /// (never empty).
    pub fn range(&self) -> TimeRange {
        TimeRange::new(
            self.t_min,
            self.t_max
                .saturating_add(1)
                .max(self.t_min.saturating_add(1)),
        )
    }
}
