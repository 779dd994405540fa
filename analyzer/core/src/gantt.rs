//! The Gantt chart's view model (RT-460 §3.1): events loaded chunk by chunk into per-producer rows, and
//! for a visible interval and a width in pixels, what to draw — at most one state per row and pixel
//! (the dominant type, with a marker when several states were aggregated), punctual events as ticks,
//! links thinned to at most one short link per pixel (with the share drawn), and the intervals where
//! events were lost.
//!
//! A frame costs O(rows × pixels × log n), whatever the number of events in view.
//!
//! Rows are producers, and a producer's states can be split into lanes: a state whose type has a
//! [`LANE_PARAM`] parameter (a Pajé state type, `PM` or `SERVICE`) goes into the lane of that value. A
//! producer with states in two lanes or more gets one sub-row per lane ([`GanttModel::lanes`]), so two
//! state types of one container are told apart; its own row keeps its punctual events (and the states
//! outside any lane). A producer with a single lane draws it in its own row, as before.
//!
//! Start here: [`GanttConsumer`] (loader side), [`GanttModel`] (absorbs snapshots, answers
//! [`GanttModel::frame`] and [`GanttModel::event_at`]), [`GanttRow`] (what a row shows).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};

use socscope_tracedb::{
    CPU_IDLE_TYPE, Cpu, EventCategory, EventId, EventKind, EventType, LossRecord, ON_CPU_TYPE,
    ParamValue, ProducerId, StoredEvent, TimeRange, Timestamp, TypeId,
};

use crate::loader::Consumer;

/// The minimum needed to draw one event (Framesoc's `ReducedEvent`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReducedEvent {
    /// Stable id in the store.
    pub id: EventId,
    /// Start.
    pub ts: Timestamp,
    /// End (the start for punctual events and variables).
    pub end: Timestamp,
    /// Type.
    pub type_id: TypeId,
    /// Producer (link source).
    pub producer: ProducerId,
    /// Link target (the producer otherwise).
    pub target: ProducerId,
    /// CPU it happened on.
    pub cpu: Option<Cpu>,
    /// Category.
    pub category: EventCategory,
    /// The lane of a state ([`NO_LANE`] outside any lane, and for other categories).
    pub lane: Lane,
}

/// A lane of a producer's states: an index into [`Lanes`]; [`NO_LANE`] for states outside any lane.
pub type Lane = u16;

/// The lane of states whose type has no [`LANE_PARAM`].
pub const NO_LANE: Lane = 0;

/// The parameter naming a state's lane: the Pajé state type the importer keeps on each state.
pub const LANE_PARAM: &str = "paje_type";

/// The lane of a CPU track holding the IRQs that CPU served (see [`CpuTracks`]).
pub const IRQ_LANE: Lane = Lane::MAX;

/// The lane of a CPU track holding the soft IRQs that CPU served.
pub const SOFTIRQ_LANE: Lane = Lane::MAX - 1;

/// In a frame, the "type" of a CPU track's `on_cpu` state is this bit with the thread's producer
/// id: such states are drawn, and aggregated per pixel, by thread (coloured by its process), not by
/// type. See [`thread_of_key`].
pub const THREAD_KEY: TypeId = 1 << 31;

/// The thread a CPU track's span ran ([`THREAD_KEY`]), or `None` for a plain type.
pub const fn thread_of_key(key: TypeId) -> Option<ProducerId> {
    if key & THREAD_KEY != 0 {
        Some(key & !THREAD_KEY)
    } else {
        None
    }
}

/// What makes the CPU section of a chart: the CPU producers (`cpu0`, `cpu1`...), whose `on_cpu`
/// states the collector wrote from the context switches, and the IRQ and soft IRQ state types, whose
/// states are also shown nested under the CPU they ran on ([`IRQ_LANE`], [`SOFTIRQ_LANE`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuTracks {
    /// `by_cpu[n]`: the producer of CPU `n`.
    by_cpu: Vec<Option<ProducerId>>,
    /// Interrupt state types and their lane.
    interrupts: Vec<(TypeId, Lane)>,
}

impl CpuTracks {
    /// The CPU tracks of a trace with these producers and types.
    pub fn new(producers: &[socscope_tracedb::Producer], types: &[EventType]) -> Self {
        let mut by_cpu = Vec::new();
        for p in producers
            .iter()
            .filter(|p| p.kind == socscope_tracedb::ProducerKind::Cpu)
        {
            let Ok(n) = usize::try_from(p.local_id) else {
                continue;
            };
            if n >= by_cpu.len() {
                by_cpu.resize(n + 1, None);
            }
            by_cpu[n] = Some(p.id);
        }
        let interrupts = types
            .iter()
            .filter(|t| t.category == EventCategory::State)
            .filter_map(|t| match t.name.as_str() {
                "irq" => Some((t.id, IRQ_LANE)),
                "softirq" => Some((t.id, SOFTIRQ_LANE)),
                _ => None,
            })
            .collect();
        Self { by_cpu, interrupts }
    }

    /// The producer of CPU `cpu`'s track.
    pub fn producer(&self, cpu: Cpu) -> Option<ProducerId> {
        self.by_cpu.get(usize::from(cpu)).copied().flatten()
    }

    /// Whether `p` is a CPU's track.
    pub fn is_track(&self, p: ProducerId) -> bool {
        self.by_cpu.contains(&Some(p))
    }

    fn interrupt_lane(&self, t: TypeId) -> Option<Lane> {
        self.interrupts
            .iter()
            .find(|(id, _)| *id == t)
            .map(|(_, l)| *l)
    }
}

/// The lanes of a trace: which parameter of a state type names its lane, and the lanes' names, shared by
/// the loaders of one chart (so that a lane keeps its index from one load to the next).
#[derive(Debug, Default)]
pub struct Lanes {
    /// State type → index of its [`LANE_PARAM`] parameter.
    param: HashMap<TypeId, usize>,
    names: Mutex<LaneNames>,
}

#[derive(Debug, Default)]
struct LaneNames {
    ids: HashMap<String, Lane>,
    /// `names[l - 1]` names lane `l`.
    names: Vec<String>,
}

impl Lanes {
    /// The lanes of a trace with these types (the state types with a [`LANE_PARAM`] parameter).
    pub fn new(types: &[EventType]) -> Self {
        let param = types
            .iter()
            .filter(|t| t.category == EventCategory::State)
            .filter_map(|t| Some((t.id, t.params.iter().position(|p| p.name == LANE_PARAM)?)))
            .collect();
        Self {
            param,
            names: Mutex::default(),
        }
    }

    /// The name of `lane` (its parameter value); empty for [`NO_LANE`] and unknown lanes.
    pub fn name(&self, lane: Lane) -> String {
        match lane {
            IRQ_LANE => return "IRQ".into(),
            SOFTIRQ_LANE => return "softirq".into(),
            _ => {}
        }
        let names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        usize::from(lane)
            .checked_sub(1)
            .and_then(|i| names.names.get(i).cloned())
            .unwrap_or_default()
    }

    /// Whether some state type has lanes.
    fn any(&self) -> bool {
        !self.param.is_empty()
    }

    fn lane_of(&self, names: &mut LaneNames, e: &StoredEvent) -> Lane {
        let Some(&i) = self.param.get(&e.type_id) else {
            return NO_LANE;
        };
        let Some(ParamValue::String(v)) = e.params.get(i) else {
            return NO_LANE;
        };
        if let Some(&l) = names.ids.get(v.as_str()) {
            return l;
        }
        // More lanes than a u16 holds, less the CPU tracks' (not a real trace): the rest share no lane.
        let Some(l) = Lane::try_from(names.names.len() + 1)
            .ok()
            .filter(|&l| l < SOFTIRQ_LANE)
        else {
            return NO_LANE;
        };
        names.names.push(v.clone());
        names.ids.insert(v.clone(), l);
        l
    }
}

/// A row of the chart: a producer's own row, or one lane of its states.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GanttRow {
    /// The producer.
    pub producer: ProducerId,
    /// `None`: the producer's row (its punctual events, and its states unless they are split into
    /// lanes); `Some(l)`: the states of lane `l`.
    pub lane: Option<Lane>,
}

impl GanttRow {
    /// The producer's own row.
    pub const fn producer(producer: ProducerId) -> Self {
        Self {
            producer,
            lane: None,
        }
    }

    /// Lane `lane` of `producer`.
    pub const fn lane(producer: ProducerId, lane: Lane) -> Self {
        Self {
            producer,
            lane: Some(lane),
        }
    }
}

impl From<ProducerId> for GanttRow {
    fn from(p: ProducerId) -> Self {
        Self::producer(p)
    }
}

impl ReducedEvent {
    /// Reduces a stored event (outside any lane: see [`GanttConsumer::with_lanes`]).
    pub fn of(e: &StoredEvent) -> Self {
        let target = match e.kind {
            EventKind::Link { target, .. } => target,
            // A CPU track's slice points at the thread that ran.
            _ if e.type_id == ON_CPU_TYPE => match e.params.first() {
                Some(ParamValue::Unsigned(t)) => ProducerId::try_from(*t).unwrap_or(e.producer),
                _ => e.producer,
            },
            _ => e.producer,
        };
        Self {
            id: e.id,
            ts: e.ts,
            end: e.end().max(e.ts),
            type_id: e.type_id,
            producer: e.producer,
            target,
            cpu: e.cpu,
            category: e.category(),
            lane: NO_LANE,
        }
    }
}

/// What the Gantt loader publishes: the sealed batches so far, in time order (cheap to clone).
#[derive(Clone, Debug, Default)]
pub struct GanttSnapshot {
    /// Every batch, oldest first; a model absorbs those it has not seen.
    pub batches: Vec<Arc<Vec<ReducedEvent>>>,
}

/// Collects reduced events for the Gantt chart on a loader thread.
#[derive(Debug, Default)]
pub struct GanttConsumer {
    skip_before: Option<Timestamp>,
    lanes: Option<Arc<Lanes>>,
    // `snapshot` only borrows the consumer: it seals the pending events into a new batch through these.
    pending: RefCell<Vec<ReducedEvent>>,
    sealed: RefCell<GanttSnapshot>,
}

impl GanttConsumer {
    /// A consumer for a fresh load.
    pub fn new() -> Self {
        Self::default()
    }

    /// A consumer that appends to data already loaded up to `t`: events starting before `t` are already
    /// there and are skipped.
    pub fn appending_from(t: Timestamp) -> Self {
        Self {
            skip_before: Some(t),
            ..Self::default()
        }
    }

    /// Puts states in the lanes of `lanes` (shared with the chart's other loaders).
    pub fn with_lanes(mut self, lanes: Arc<Lanes>) -> Self {
        self.lanes = Some(lanes).filter(|l| l.any());
        self
    }
}

impl Consumer for GanttConsumer {
    type Snapshot = GanttSnapshot;

    fn consume(&mut self, events: &[StoredEvent]) {
        let skip = self.skip_before.unwrap_or(i64::MIN);
        let events = events.iter().filter(|e| e.ts >= skip);
        let pending = self.pending.get_mut();
        match &self.lanes {
            None => pending.extend(events.map(ReducedEvent::of)),
            Some(lanes) => {
                let mut names = lanes.names.lock().unwrap_or_else(|e| e.into_inner());
                pending.extend(events.map(|e| ReducedEvent {
                    lane: if e.category() == EventCategory::State {
                        lanes.lane_of(&mut names, e)
                    } else {
                        NO_LANE
                    },
                    ..ReducedEvent::of(e)
                }));
            }
        }
    }

    fn snapshot(&self) -> GanttSnapshot {
        let batch = std::mem::take(&mut *self.pending.borrow_mut());
        let mut sealed = self.sealed.borrow_mut();
        if !batch.is_empty() {
            sealed.batches.push(Arc::new(batch));
        }
        sealed.clone()
    }
}

/// One state of a row.
#[derive(Clone, Copy, Debug, PartialEq)]
struct StateItem {
    ts: Timestamp,
    end: Timestamp,
    type_id: TypeId,
    id: EventId,
}

#[derive(Clone, Debug, Default)]
struct RowData {
    states: Vec<StateItem>,
    /// `argmax_end[i]`: index of the state with the latest end among `states[..=i]`.
    argmax_end: Vec<u32>,
    /// `block_starts[b]`: the start of `states[b * BLOCK]`, for every whole block of [`BLOCK`] states:
    /// a frame finds where a pixel column ends in this compact array first, then in one block.
    block_starts: Vec<Timestamp>,
    /// `block_ends[b]`: the latest end of the states of block `b`.
    block_ends: Vec<Timestamp>,
    /// The time of each type among the states of block `b` (each state counting at least 1 ns, as
    /// in a pixel column) is `block_times[block_offsets[b]..block_offsets[b + 1]]`.
    block_offsets: Vec<u32>,
    block_times: Vec<(TypeId, i64)>,
    /// Punctual events and variable changes: (ts, type, id).
    ticks: Vec<(Timestamp, TypeId, EventId)>,
    unsorted: bool,
}

impl RowData {
    fn push_state(&mut self, s: StateItem) {
        if let Some(last) = self.states.last()
            && s.ts < last.ts
        {
            self.unsorted = true;
        }
        let i = self.states.len() as u32;
        let best = match self.argmax_end.last() {
            Some(&j) if self.states[j as usize].end >= s.end => j,
            _ => i,
        };
        self.states.push(s);
        self.argmax_end.push(best);
    }

    fn fix_order(&mut self) {
        if self.unsorted {
            self.states.sort_by_key(|s| (s.ts, s.id));
            self.ticks.sort_by_key(|t| (t.0, t.2));
            self.argmax_end.clear();
            for i in 0..self.states.len() {
                let best = match self.argmax_end.last() {
                    Some(&j) if self.states[j as usize].end >= self.states[i].end => j,
                    _ => i as u32,
                };
                self.argmax_end.push(best);
            }
            self.block_starts.clear();
            self.block_ends.clear();
            self.block_offsets.clear();
            self.block_times.clear();
            self.unsorted = false;
        }
        // The blocks completed since the last call.
        if self.block_offsets.is_empty() {
            self.block_offsets.push(0);
        }
        let mut acc = Vec::with_capacity(BLOCK);
        for b in self.block_starts.len()..self.states.len() / BLOCK {
            let block = &self.states[b * BLOCK..(b + 1) * BLOCK];
            acc.clear();
            for s in block {
                add_time(&mut acc, s.type_id, (s.end - s.ts).max(1));
            }
            self.block_starts.push(block[0].ts);
            self.block_ends
                .push(block.iter().map(|s| s.end).max().unwrap_or(i64::MIN));
            self.block_times.extend_from_slice(&acc);
            self.block_offsets.push(self.block_times.len() as u32);
        }
    }

    /// The first index from `lo` on whose state starts at or after `t` (`states` is sorted; `lo` is
    /// at most that index).
    fn first_start_from(&self, lo: usize, t: Timestamp) -> usize {
        let (len, blocks) = (self.states.len(), self.block_starts.len());
        // Whole blocks after `lo`'s that start before `t`: the index is in the last of them (or in
        // `lo`'s block), before the first block that does not.
        let after = (lo / BLOCK + 1).min(blocks);
        let k = gallop(&self.block_starts[after..], |&s| s < t);
        let from = if k > 0 { (after + k - 1) * BLOCK } else { lo };
        let to = if after + k < blocks {
            (after + k) * BLOCK
        } else {
            len
        };
        read_states(to - from);
        from + self.states[from..to].partition_point(|s| s.ts < t)
    }
}

/// States per block of [`RowData::block_starts`] and the blocks' times per type.
const BLOCK: usize = 16;

#[cfg(test)]
thread_local! {
    /// States a frame read one by one on this thread (tests check it does not grow with events).
    static STATES_READ: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Counts `n` states read one by one (in tests only).
#[inline(always)]
fn read_states(n: usize) {
    #[cfg(test)]
    STATES_READ.with(|c| c.set(c.get() + n));
    #[cfg(not(test))]
    let _ = n;
}

/// Adds `time` to `type_id`'s total in `acc` (a handful of types: a linear search).
fn add_time(acc: &mut Vec<(TypeId, i64)>, type_id: TypeId, time: i64) {
    match acc.iter_mut().find(|(t, _)| *t == type_id) {
        Some((_, v)) => *v += time,
        None => acc.push((type_id, time)),
    }
}

/// The type with the most time in `acc` (the smallest id among equals; 0 when empty).
fn top_type(acc: &[(TypeId, i64)]) -> TypeId {
    acc.iter()
        .max_by_key(|&&(t, v)| (v, std::cmp::Reverse(t)))
        .map_or(0, |&(t, _)| t)
}

/// A link between two rows.
#[derive(Clone, Copy, Debug, PartialEq)]
struct LinkItem {
    /// Order of arrival: links of equal start keep it, as one list sorted stably would.
    seq: u64,
    ts: Timestamp,
    end: Timestamp,
    from: ProducerId,
    to: ProducerId,
    type_id: TypeId,
}

/// A run of pixels of one row drawn as one state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateSpan {
    /// First pixel column.
    pub x0: u32,
    /// One past the last pixel column.
    pub x1: u32,
    /// The type drawn (the dominant one when aggregated).
    pub type_id: TypeId,
    /// Several states share these pixels: draw the marker dot.
    pub aggregated: bool,
    /// The state drawn, when it is a single one.
    pub event: Option<EventId>,
    /// How much of each pixel column the states cover, in quarters rounded up (1 to
    /// [`FULL_COVERAGE`]): zoomed out, a row of sparse short states (interrupts of a few µs in a
    /// pixel of a millisecond) is drawn as low as it is busy, not as a solid bar. Summed over the
    /// states in the column, so nested states can make it higher than the row's busy time.
    pub coverage: u8,
}

/// [`StateSpan::coverage`] of a column the states cover whole.
pub const FULL_COVERAGE: u8 = 4;

/// `covered` ns of a column `len` ns long, in quarters rounded up (at least 1: a state in the column
/// is never drawn as nothing).
fn coverage(covered: i64, len: i64) -> u8 {
    if len <= 0 {
        return FULL_COVERAGE;
    }
    let covered = covered.clamp(1, len) as u128;
    let quarters = (covered * u128::from(FULL_COVERAGE)).div_ceil(len as u128);
    quarters.clamp(1, u128::from(FULL_COVERAGE)) as u8
}

/// Punctual events in one pixel column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tick {
    /// Pixel column.
    pub x: u32,
    /// Type of the first event in the column.
    pub type_id: TypeId,
    /// How many events fall in the column.
    pub count: u32,
}

/// One row's drawing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RowFrame {
    /// The producer.
    pub producer: ProducerId,
    /// The lane, for a lane's row.
    pub lane: Option<Lane>,
    /// States, left to right.
    pub spans: Vec<StateSpan>,
    /// Punctual events, left to right.
    pub ticks: Vec<Tick>,
}

/// A link to draw, as an arrow from (x0, row0) to (x1, row1); x in pixels (may fall outside the view).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkArrow {
    /// Start column.
    pub x0: f32,
    /// Source row index in the frame.
    pub row0: usize,
    /// End column.
    pub x1: f32,
    /// Target row index in the frame.
    pub row1: usize,
    /// Type.
    pub type_id: TypeId,
}

/// Where events were lost, in pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LossGap {
    /// First column.
    pub x0: u32,
    /// One past the last column.
    pub x1: u32,
    /// Events lost.
    pub count: u64,
    /// CPU whose events were lost.
    pub cpu: Option<Cpu>,
}

/// Everything to draw for one view of the chart.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GanttFrame {
    /// The interval shown.
    pub view: TimeRange,
    /// Width in pixel columns.
    pub width: u32,
    /// One per requested row, in order.
    pub rows: Vec<RowFrame>,
    /// The links drawn.
    pub links: Vec<LinkArrow>,
    /// Links between shown rows overlapping the view.
    pub links_total: u64,
    /// Lost-event intervals overlapping the view.
    pub losses: Vec<LossGap>,
}

/// The fewest columns per link drawn, on average, for links to stay legible
/// ([`GanttFrame::links_legible`]).
pub const LINK_SPACING_PX: u32 = 6;

impl GanttFrame {
    /// The event types drawn in this frame (states, ticks and links): what the legend lists (a CPU
    /// track's spans, drawn by thread, as `on_cpu`).
    pub fn types(&self) -> std::collections::BTreeSet<TypeId> {
        self.rows
            .iter()
            .flat_map(|r| {
                r.spans
                    .iter()
                    .map(|s| thread_of_key(s.type_id).map_or(s.type_id, |_| ON_CPU_TYPE))
                    .chain(r.ticks.iter().map(|t| t.type_id))
            })
            .chain(self.links.iter().map(|l| l.type_id))
            .collect()
    }

    /// Whether the links drawn stay legible: at most one per [`LINK_SPACING_PX`] columns on
    /// average. Past that they would cover whole blocks of rows (zoomed out on a busy trace) and hide
    /// the states: the chart leaves them out and says how many there are, until the user zooms in.
    pub fn links_legible(&self) -> bool {
        self.links.len() as u64 * u64::from(LINK_SPACING_PX) <= u64::from(self.width.max(1))
    }

    /// The share of links drawn, in percent (100 when there are none), as the chart's label shows it.
    pub fn links_drawn_percent(&self) -> f64 {
        if self.links_total == 0 {
            100.0
        } else {
            100.0 * self.links.len() as f64 / self.links_total as f64
        }
    }
}

/// An event under the pointer, for the tooltip.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HoveredEvent {
    /// The event.
    pub event: ReducedEvent,
    /// How many events share the pointer's pixel (more than one: aggregated).
    pub in_pixel: usize,
}

/// Up to this many states of one pixel are looked at one by one to find the dominant type; beyond,
/// whole blocks of [`BLOCK`] states count by their times per type.
const DOMINANT_SAMPLE: usize = 64;

/// The Gantt chart's data on the UI side: absorbs loader snapshots, draws frames.
#[derive(Clone, Debug, Default)]
pub struct GanttModel {
    /// Per producer and lane; punctual events are in the producer's [`NO_LANE`] entry.
    rows: FxHashMap<(ProducerId, Lane), RowData>,
    /// The lanes each producer has states in, in order of first appearance.
    lanes: FxHashMap<ProducerId, Vec<Lane>>,
    /// Links by duration class ([`link_class`]), each sorted by start: a frame looks back before
    /// its view only as far as each class's longest link, not as far as the longest link of all.
    link_classes: Vec<LinkClass>,
    links_seen: u64,
    seen_batches: usize,
    events: u64,
    losses: Vec<(LossRecord, Option<Timestamp>)>,
    /// Losses not closed yet, per CPU (indices into `losses`).
    open_losses: HashMap<Cpu, Vec<usize>>,
    cpu_tracks: CpuTracks,
    /// The types of the events absorbed (what the legend lists, nested states included).
    types_loaded: FxHashSet<TypeId>,
}

impl GanttModel {
    /// An empty model.
    pub fn new() -> Self {
        Self::default()
    }

    /// The producers with events loaded (states, punctual events, links from or to them).
    pub fn producers_with_events(&self) -> FxHashSet<ProducerId> {
        let mut out: FxHashSet<ProducerId> = self.rows.keys().map(|(p, _)| *p).collect();
        for class in &self.link_classes {
            out.extend(class.producers.iter().copied());
        }
        out
    }

    /// Shows the interrupts of `tracks`' CPUs under each CPU's track (set before loading).
    pub fn set_cpu_tracks(&mut self, tracks: CpuTracks) {
        self.cpu_tracks = tracks;
    }

    /// Events absorbed so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// The types of the events absorbed so far, in type order: every type of the loaded interval,
    /// those a frame draws ([`GanttFrame::types`]) and those it cannot at this zoom (states nested
    /// under others, punctual events behind a busier one).
    pub fn types_loaded(&self) -> std::collections::BTreeSet<TypeId> {
        self.types_loaded.iter().copied().collect()
    }

    /// Takes the batches of `snapshot` not seen yet. Returns whether anything changed.
    pub fn absorb(&mut self, snapshot: &GanttSnapshot) -> bool {
        if snapshot.batches.len() <= self.seen_batches {
            return false;
        }
        for batch in &snapshot.batches[self.seen_batches..] {
            for e in batch.iter() {
                self.add(e);
            }
        }
        self.seen_batches = snapshot.batches.len();
        for row in self.rows.values_mut() {
            row.fix_order();
        }
        for class in &mut self.link_classes {
            if class.unsorted {
                class.items.sort_by_key(|l| (l.ts, l.seq));
                class.unsorted = false;
            }
        }
        true
    }

    /// Forgets what the current loader published, so the next (appending) loader's batches are absorbed
    /// from its first one; keeps the events.
    pub fn start_appending(&mut self) {
        self.seen_batches = 0;
    }

    fn add(&mut self, e: &ReducedEvent) {
        self.events += 1;
        self.types_loaded.insert(e.type_id);
        if let Some(cpu) = e.cpu
            && let Some(open) = self.open_losses.get_mut(&cpu)
        {
            let losses = &mut self.losses;
            open.retain(|&i| {
                let (l, end) = &mut losses[i];
                if l.ts < e.ts {
                    *end = Some(e.ts);
                    false
                } else {
                    true
                }
            });
        }
        match e.category {
            EventCategory::State => {
                let type_id = if e.type_id == ON_CPU_TYPE && e.target != e.producer {
                    THREAD_KEY | e.target
                } else {
                    e.type_id
                };
                let item = StateItem {
                    ts: e.ts,
                    end: e.end,
                    type_id,
                    id: e.id,
                };
                self.push_state(e.producer, e.lane, item);
                // An interrupt is also shown under the CPU it ran on.
                if let Some(lane) = self.cpu_tracks.interrupt_lane(e.type_id)
                    && let Some(track) = e.cpu.and_then(|c| self.cpu_tracks.producer(c))
                {
                    self.push_state(track, lane, item);
                }
            }
            EventCategory::Link => {
                let len = e.end - e.ts;
                let k = link_class(len);
                if self.link_classes.len() <= k {
                    self.link_classes.resize_with(k + 1, LinkClass::default);
                }
                let class = &mut self.link_classes[k];
                if let Some(last) = class.items.last()
                    && e.ts < last.ts
                {
                    class.unsorted = true;
                }
                class.max_len = class.max_len.max(len);
                class.producers.insert(e.producer);
                class.producers.insert(e.target);
                self.links_seen += 1;
                class.items.push(LinkItem {
                    seq: self.links_seen,
                    ts: e.ts,
                    end: e.end,
                    from: e.producer,
                    to: e.target,
                    type_id: e.type_id,
                });
            }
            EventCategory::Punctual | EventCategory::Variable => {
                let row = self.rows.entry((e.producer, NO_LANE)).or_default();
                if let Some(last) = row.ticks.last()
                    && e.ts < last.0
                {
                    row.unsorted = true;
                }
                row.ticks.push((e.ts, e.type_id, e.id));
            }
        }
    }

    fn push_state(&mut self, producer: ProducerId, lane: Lane, item: StateItem) {
        let lanes = self.lanes.entry(producer).or_default();
        if !lanes.contains(&lane) {
            lanes.push(lane);
        }
        self.rows
            .entry((producer, lane))
            .or_default()
            .push_state(item);
    }

    /// The trace's recorded losses; each becomes a gap from its timestamp (the last event seen on its
    /// CPU before the loss) to the next event of that CPU absorbed after this call (so set them before
    /// loading).
    pub fn set_losses(&mut self, losses: Vec<LossRecord>) {
        self.open_losses.clear();
        for (i, l) in losses.iter().enumerate() {
            if let Some(cpu) = l.cpu {
                self.open_losses.entry(cpu).or_default().push(i);
            }
        }
        self.losses = losses.into_iter().map(|l| (l, None)).collect();
    }

    /// Adds the losses recorded since the last call (a live trace), keeping the gaps already closed.
    pub fn set_losses_if_more(&mut self, losses: Vec<LossRecord>) {
        for l in losses.into_iter().skip(self.losses.len()) {
            if let Some(cpu) = l.cpu {
                self.open_losses
                    .entry(cpu)
                    .or_default()
                    .push(self.losses.len());
            }
            self.losses.push((l, None));
        }
    }

    /// How many losses the model knows.
    pub fn loss_count(&self) -> usize {
        self.losses.len()
    }

    /// The lanes of `producer` drawn as sub-rows under its row, in order of first appearance: those
    /// other than [`NO_LANE`] when its states fall into two lanes or more, else none (its row draws
    /// them).
    pub fn lanes(&self, producer: ProducerId) -> Vec<Lane> {
        match self.lanes.get(&producer) {
            Some(l) if l.len() > 1 => l.iter().copied().filter(|&l| l != NO_LANE).collect(),
            _ => Vec::new(),
        }
    }

    /// The states and the punctual events `row` shows.
    fn row_data(&self, row: GanttRow) -> (Option<&RowData>, Option<&RowData>) {
        let own = self.rows.get(&(row.producer, NO_LANE));
        let states = match row.lane {
            Some(l) => self.rows.get(&(row.producer, l)),
            None => match self.lanes.get(&row.producer).map(Vec::as_slice) {
                Some(&[only]) => self.rows.get(&(row.producer, only)),
                _ => own,
            },
        };
        let ticks = if row.lane.is_none() { own } else { None };
        (states, ticks)
    }

    /// What to draw for `rows` (top to bottom) over `view`, `width` pixel columns wide.
    pub fn frame(&self, rows: &[GanttRow], view: TimeRange, width: u32) -> GanttFrame {
        let width = width.max(1);
        let view = if view.is_empty() {
            TimeRange::new(view.start, view.start + 1)
        } else {
            view
        };
        let px = Pixels::new(view, width);
        let empty = RowData::default();
        let mut frame = GanttFrame {
            view,
            width,
            ..GanttFrame::default()
        };
        // Rows on the thread pool, links beside them: a frame of a busy trace is bound by the
        // memory reads of its rows' searches, and the UI thread would otherwise wait alone.
        let row_frame = |&r: &GanttRow| {
            let (states, ticks_of) = self.row_data(r);
            RowFrame {
                producer: r.producer,
                lane: r.lane,
                spans: state_spans(states.unwrap_or(&empty), &px),
                ticks: ticks(ticks_of.unwrap_or(&empty), &px),
            }
        };
        let (row_frames, ()) = rayon::join(
            || rows.par_iter().map(row_frame).collect(),
            || self.link_arrows(rows, &px, &mut frame),
        );
        frame.rows = row_frames;
        for (l, end) in &self.losses {
            let end = end.unwrap_or(l.ts + px.ns_per_px().ceil() as i64);
            if end <= view.start || l.ts >= view.end {
                continue;
            }
            let x0 = px.column(l.ts.max(view.start));
            let x1 = (px.column((end - 1).min(view.end - 1)) + 1).max(x0 + 1);
            frame.losses.push(LossGap {
                x0,
                x1,
                count: l.count,
                cpu: l.cpu,
            });
        }
        frame
    }

    fn link_arrows(&self, rows: &[GanttRow], px: &Pixels, frame: &mut GanttFrame) {
        // Links join producers' own rows.
        let row_of: FxHashMap<ProducerId, usize> = rows
            .iter()
            .enumerate()
            .filter(|(_, r)| r.lane.is_none())
            .map(|(i, r)| (r.producer, i))
            .collect();
        let view = px.view;
        let pixel_ns = px.ns_per_px();
        // Each duration class on its own, from the first link that can reach the view: every
        // long link, and the first short link of each column (the frame draws at most one short
        // link per column, the first one in start order). A class whose links are all short and
        // all join drawn rows is crossed column by column: the links of a column after its first
        // are counted by position, not visited.
        let mut picked: Vec<(LinkItem, usize, usize)> = Vec::new();
        for c in &self.link_classes {
            let from = c
                .items
                .partition_point(|l| l.ts < view.start.saturating_sub(c.max_len));
            let items = &c.items[from..];
            let items = &items[..items.partition_point(|l| l.ts < view.end)];
            let by_column =
                c.max_len as f64 <= pixel_ns && c.producers.iter().all(|p| row_of.contains_key(p));
            let mut last_column: Option<u32> = None;
            let mut i = 0;
            while i < items.len() {
                let l = items[i];
                i += 1;
                if l.end < view.start {
                    continue;
                }
                let (Some(&r0), Some(&r1)) = (row_of.get(&l.from), row_of.get(&l.to)) else {
                    continue;
                };
                frame.links_total += 1;
                if (l.end - l.ts) as f64 > pixel_ns {
                    picked.push((l, r0, r1));
                    continue;
                }
                let col = px.column(l.ts.clamp(view.start, view.end - 1));
                if last_column != Some(col) {
                    last_column = Some(col);
                    picked.push((l, r0, r1));
                }
                if by_column && l.ts >= view.start {
                    // The rest of the column: short, in view, between drawn rows.
                    let rest = gallop(&items[i..], |x| px.column(x.ts) == col);
                    frame.links_total += rest as u64;
                    i += rest;
                }
            }
        }
        // In start order across the classes, as one sorted list gives them.
        picked.sort_unstable_by_key(|(l, ..)| (l.ts, l.seq));
        let mut last_short_column: Option<u32> = None;
        for (l, r0, r1) in picked {
            if (l.end - l.ts) as f64 <= pixel_ns {
                let c = px.column(l.ts.clamp(view.start, view.end - 1));
                if last_short_column == Some(c) {
                    continue;
                }
                last_short_column = Some(c);
            }
            frame.links.push(LinkArrow {
                x0: px.x(l.ts),
                row0: r0,
                x1: px.x(l.end),
                row1: r1,
                type_id: l.type_id,
            });
        }
    }

    /// The event of `row` at time `t` for a pointer on a `view` `width` pixels wide: the state under it
    /// (the innermost when nested) or a punctual event in its pixel.
    pub fn event_at(
        &self,
        row: impl Into<GanttRow>,
        t: Timestamp,
        view: TimeRange,
        width: u32,
    ) -> Option<HoveredEvent> {
        let row = row.into();
        let producer = row.producer;
        let (states, ticks_of) = self.row_data(row);
        let px = Pixels::new(view, width.max(1));
        let c = px.column(t.clamp(view.start, view.end - 1));
        let (t0, t1) = (px.time(c), px.time(c + 1));
        // Punctual events in the pixel win over the state under them: they are drawn on top.
        let no_ticks: &[(Timestamp, TypeId, EventId)] = &[];
        let ticks = ticks_of.map_or(no_ticks, |d| d.ticks.as_slice());
        let a = ticks.partition_point(|x| x.0 < t0);
        let b = ticks.partition_point(|x| x.0 < t1);
        if b > a {
            let (ts, type_id, id) = ticks[a];
            return Some(HoveredEvent {
                event: ReducedEvent {
                    id,
                    ts,
                    end: ts,
                    type_id,
                    producer,
                    target: producer,
                    cpu: None,
                    category: EventCategory::Punctual,
                    lane: NO_LANE,
                },
                in_pixel: b - a,
            });
        }
        let data = states?;
        let lo = data.states.partition_point(|s| s.ts < t0);
        let hi = data.states.partition_point(|s| s.ts < t1);
        let carry = carry(data, lo, t0);
        let in_pixel = (hi - lo) + usize::from(carry.is_some());
        // The latest-starting state covering t, else the first starting in the pixel.
        let end = data.states.partition_point(|s| s.ts <= t);
        let covering = (end.saturating_sub(DOMINANT_SAMPLE)..end)
            .rev()
            .find(|&i| data.states[i].end > t)
            .or_else(|| carry.filter(|&j| data.states[j].end > t));
        let i = covering.or((hi > lo).then_some(lo))?;
        let s = data.states[i];
        let (type_id, target) = match thread_of_key(s.type_id) {
            Some(thread) => (ON_CPU_TYPE, thread),
            None => (s.type_id, producer),
        };
        Some(HoveredEvent {
            event: ReducedEvent {
                id: s.id,
                ts: s.ts,
                end: s.end,
                type_id,
                producer,
                target,
                cpu: None,
                category: EventCategory::State,
                lane: row.lane.unwrap_or(NO_LANE),
            },
            in_pixel,
        })
    }
}

/// The state started before `t0` that reaches furthest, if it reaches past `t0`.
fn carry(data: &RowData, lo: usize, t0: Timestamp) -> Option<usize> {
    (lo > 0)
        .then(|| data.argmax_end[lo - 1] as usize)
        .filter(|&j| data.states[j].end > t0)
}

/// The links of one duration class ([`link_class`]).
#[derive(Clone, Debug, Default)]
struct LinkClass {
    items: Vec<LinkItem>,
    /// The longest link of the class.
    max_len: i64,
    /// Every producer a link of the class starts or ends at.
    producers: FxHashSet<ProducerId>,
    unsorted: bool,
}

/// Duration class of a link: classes grow sixteen-fold, so a class's longest link is at most
/// sixteen times its shortest and a frame's look-back stays proportionate.
fn link_class(len: i64) -> usize {
    ((64 - (len.max(0) as u64).leading_zeros()) / 4) as usize
}

/// The mapping between time and pixel columns of one frame.
struct Pixels {
    view: TimeRange,
    width: u32,
}

impl Pixels {
    fn new(view: TimeRange, width: u32) -> Self {
        Self { view, width }
    }
    fn ns_per_px(&self) -> f64 {
        self.view.len() as f64 / self.width as f64
    }
    /// Start of column `c`. (64-bit arithmetic where the product fits, which is every view up to
    /// 2^63 / width ns, about 83 days at 1 280 pixels; 128-bit beyond. A 128-bit division is a
    /// library call several times slower, and these run for every column of every row.)
    fn time(&self, c: u32) -> Timestamp {
        let len = self.view.len();
        let off = match len.checked_mul(i64::from(c)) {
            Some(p) => p / i64::from(self.width),
            None => ((len as i128 * c as i128) / self.width as i128) as i64,
        };
        self.view.start + off
    }
    /// Column of `t` (inside the view).
    fn column(&self, t: Timestamp) -> u32 {
        let d = t - self.view.start;
        let len = self.view.len().max(1);
        let c = match d.checked_mul(i64::from(self.width)) {
            Some(p) => i128::from(p / len),
            None => (d as i128 * self.width as i128) / len as i128,
        };
        c.clamp(0, self.width as i128 - 1) as u32
    }
    /// Fractional x of `t`, anywhere.
    fn x(&self, t: Timestamp) -> f32 {
        ((t - self.view.start) as f64 / self.ns_per_px()) as f32
    }
}

fn state_spans(data: &RowData, px: &Pixels) -> Vec<StateSpan> {
    let mut spans: Vec<StateSpan> = Vec::new();
    if data.states.is_empty() {
        return spans;
    }
    let states = &data.states;
    let mut lo = states.partition_point(|s| s.ts < px.view.start);
    let mut acc = Vec::with_capacity(8);
    let mut c = 0u32;
    while c < px.width {
        let t0 = px.time(c);
        let carried = carry(data, lo, t0);
        if carried.is_none() && (lo >= states.len() || states[lo].ts >= px.view.end) {
            break;
        }
        if carried.is_none() {
            // Nothing here: jump to the column of the next state.
            let next = px.column(states[lo].ts);
            if next > c {
                c = next;
                continue;
            }
        }
        let t1 = px.time(c + 1);
        let hi = data.first_start_from(lo, t1);
        let count = (hi - lo) + usize::from(carried.is_some());
        let (type_id, aggregated, event, covered) = if count == 1 {
            let s = states[carried.unwrap_or(lo)];
            (s.type_id, false, Some(s.id), s.end.min(t1) - s.ts.max(t0))
        } else {
            let (type_id, covered) = dominant(data, carried, lo, hi, t0, t1, &mut acc);
            (type_id, true, None, covered)
        };
        let coverage = coverage(covered, t1 - t0);
        match spans.last_mut() {
            Some(last)
                if last.x1 == c
                    && last.type_id == type_id
                    && last.aggregated == aggregated
                    && last.event == event
                    && last.coverage == coverage =>
            {
                last.x1 = c + 1
            }
            _ => spans.push(StateSpan {
                x0: c,
                x1: c + 1,
                type_id,
                aggregated,
                event,
                coverage,
            }),
        }
        // A single long state: skip straight to the column where it ends.
        if count == 1
            && let Some(j) = carried
        {
            let end = states[j].end;
            let next_start = states.get(hi).map_or(i64::MAX, |s| s.ts);
            let until = end.min(next_start).min(px.view.end);
            let last_col = px.column(until.saturating_sub(1));
            if last_col > c + 1 {
                // The state began before column `c` and runs past it, so it covers `c` and every
                // column up to `last_col` whole: the span pushed or extended above is full.
                if let Some(s) = spans.last_mut() {
                    debug_assert_eq!(s.coverage, FULL_COVERAGE);
                    s.x1 = last_col;
                }
                c = last_col;
                lo = hi;
                continue;
            }
        }
        lo = hi;
        c += 1;
    }
    spans
}

/// `items.partition_point(pred)` for a point expected near the start: probes 1, 2, 4, ... then bisects
/// the last stride, so the cost is O(log distance) and stays in cache, where a bisection of the whole
/// tail of a long row misses the cache at each step (this search runs once per pixel column and row).
fn gallop<T>(items: &[T], mut pred: impl FnMut(&T) -> bool) -> usize {
    let mut lo = 0;
    let mut step = 1;
    while lo + step <= items.len() && pred(&items[lo + step - 1]) {
        lo += step;
        step *= 2;
    }
    let hi = (lo + step).min(items.len());
    lo + items[lo..hi].partition_point(pred)
}

/// The type covering most of `[t0, t1)` among the carried state and those starting in it (each
/// counting at least 1 ns; the smallest type id among equals), and the time of all of them.
/// On a CPU track, the idle task's time counts as free time when a thread ran too: zoomed out, a
/// CPU busy a fifth of the time is drawn as a fifth-high bar of its busiest thread, not as idle. When they are many (over
/// [`DOMINANT_SAMPLE`]), the whole blocks in between the partial ones at both ends count by their
/// times per type ([`RowData::block_times`]; a block with a state running past the column counts
/// state by state): the same sums, from a compact summary rather than the states.
fn dominant(
    data: &RowData,
    carried: Option<usize>,
    lo: usize,
    hi: usize,
    t0: Timestamp,
    t1: Timestamp,
    acc: &mut Vec<(TypeId, i64)>,
) -> (TypeId, i64) {
    let states = &data.states;
    acc.clear();
    let add = |acc: &mut Vec<(TypeId, i64)>, s: &StateItem| {
        read_states(1);
        add_time(acc, s.type_id, (s.end.min(t1) - s.ts.max(t0)).max(1))
    };
    if let Some(j) = carried {
        add(acc, &states[j]);
    }
    // Whole blocks inside `lo..hi`.
    let (b0, b1) = (lo.div_ceil(BLOCK), (hi / BLOCK).min(data.block_ends.len()));
    if hi - lo <= DOMINANT_SAMPLE || b0 >= b1 {
        for s in &states[lo..hi] {
            add(acc, s);
        }
    } else {
        for s in &states[lo..b0 * BLOCK] {
            add(acc, s);
        }
        for b in b0..b1 {
            if data.block_ends[b] <= t1 {
                let (i, j) = (data.block_offsets[b], data.block_offsets[b + 1]);
                for &(t, time) in &data.block_times[i as usize..j as usize] {
                    add_time(acc, t, time);
                }
            } else {
                // A state of the block runs past the column: its time is cut at the column's end.
                for s in &states[b * BLOCK..(b + 1) * BLOCK] {
                    add(acc, s);
                }
            }
        }
        for s in &states[b1 * BLOCK..hi] {
            add(acc, s);
        }
    }
    if acc.len() > 1
        && let Some(idle) = acc.iter().position(|&(t, _)| t == CPU_IDLE_TYPE)
    {
        acc.swap_remove(idle);
    }
    (top_type(acc), acc.iter().map(|&(_, time)| time).sum())
}

fn ticks(data: &RowData, px: &Pixels) -> Vec<Tick> {
    let mut out = Vec::new();
    let t = &data.ticks;
    let mut i = t.partition_point(|x| x.0 < px.view.start);
    while i < t.len() && t[i].0 < px.view.end {
        let c = px.column(t[i].0);
        let next = px.time(c + 1);
        let j = i + gallop(&t[i..], |x| x.0 < next);
        let j = j.max(i + 1);
        out.push(Tick {
            x: c,
            type_id: t[i].1,
            count: (j - i) as u32,
        });
        i = j;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use socscope_tracedb::Event;

    fn rows(ps: &[ProducerId]) -> Vec<GanttRow> {
        ps.iter().copied().map(GanttRow::producer).collect()
    }

    fn stored(id: i64, e: Event) -> StoredEvent {
        StoredEvent { id, event: e }
    }

    fn link(id: i64, ts: i64, end: i64, from: u32, to: u32) -> StoredEvent {
        stored(
            id,
            Event {
                ts,
                type_id: 9,
                producer: from,
                cpu: Some(0),
                kind: EventKind::Link { end, target: to },
                params: vec![],
            },
        )
    }

    fn model(events: Vec<StoredEvent>) -> GanttModel {
        let mut c = GanttConsumer::new();
        c.consume(&events);
        let snap = c.snapshot();
        let mut m = GanttModel::new();
        // No event, no batch: nothing to absorb (the link property test generates that case).
        assert_eq!(m.absorb(&snap), !events.is_empty());
        assert!(!m.absorb(&snap), "a snapshot is absorbed once");
        m
    }

    /// Two Pajé state types of container 7 (`PM` type 1, `SERVICE` types 2 and 3), a punctual event on
    /// it, and container 8 with one state type.
    fn two_state_types() -> (Vec<StoredEvent>, Vec<EventType>) {
        use socscope_tracedb::{ParamDef, ParamType};
        let ty = |id: TypeId, name: &str, category| EventType {
            id,
            name: name.into(),
            category,
            params: vec![ParamDef::new(LANE_PARAM, ParamType::String)],
        };
        let types = vec![
            ty(1, "on", EventCategory::State),
            ty(2, "compute", EventCategory::State),
            ty(3, "io", EventCategory::State),
            ty(4, "mark", EventCategory::Punctual),
        ];
        let state = |id, ts, end, depth, type_id, producer, lane: &str| {
            stored(
                id,
                Event::state(ts, end, depth, type_id, producer, None)
                    .with_params(vec![ParamValue::String(lane.into())]),
            )
        };
        let mut mark = Event::punctual(50, 4, 7, None);
        mark.params = vec![ParamValue::String("EV".into())];
        let events = vec![
            state(1, 0, 100, 0, 1, 7, "PM"),
            state(2, 10, 40, 0, 2, 7, "SERVICE"),
            state(3, 15, 30, 1, 3, 7, "SERVICE"),
            stored(4, mark),
            state(5, 0, 100, 0, 1, 8, "PM"),
        ];
        (events, types)
    }

    #[test]
    fn two_state_types_of_a_producer_get_a_row_each_and_one_type_keeps_its_row() {
        let (events, types) = two_state_types();
        let lanes = Arc::new(Lanes::new(&types));
        let mut c = GanttConsumer::new().with_lanes(lanes.clone());
        c.consume(&events);
        let mut m = GanttModel::new();
        m.absorb(&c.snapshot());
        let sub = m.lanes(7);
        assert_eq!(
            sub.iter().map(|&l| lanes.name(l)).collect::<Vec<_>>(),
            ["PM", "SERVICE"]
        );
        assert!(m.lanes(8).is_empty(), "one state type: no sub-rows");
        let rows = [
            GanttRow::producer(7),
            GanttRow::lane(7, sub[0]),
            GanttRow::lane(7, sub[1]),
            GanttRow::producer(8),
        ];
        let f = m.frame(&rows, TimeRange::new(0, 100), 100);
        // The container's own row keeps its punctual event and no state.
        assert!(f.rows[0].spans.is_empty());
        assert_eq!(f.rows[0].ticks.len(), 1);
        // PM: one state over the whole view, alone in its row.
        assert_eq!(
            f.rows[1].spans,
            [StateSpan {
                x0: 0,
                x1: 100,
                type_id: 1,
                aggregated: false,
                event: Some(1),
                coverage: FULL_COVERAGE
            }]
        );
        assert!(f.rows[1].ticks.is_empty());
        // SERVICE: only its own states, the nested one drawn over its parent.
        let service: Vec<_> = f.rows[2].spans.iter().map(|s| s.type_id).collect();
        assert!(!service.is_empty() && service.iter().all(|&t| t == 2 || t == 3));
        assert_eq!(
            (f.rows[2].spans[0].x0, f.rows[2].spans.last().unwrap().x1),
            (10, 40)
        );
        // Container 8's single state type stays in its row.
        assert_eq!(f.rows[3].spans.len(), 1);
        assert_eq!(f.rows[3].spans[0].event, Some(5));
        // Hovering: each row answers with its own lane's state.
        assert_eq!(m.event_at(rows[1], 20, f.view, 100).unwrap().event.id, 1);
        assert_eq!(m.event_at(rows[2], 20, f.view, 100).unwrap().event.id, 3);
        assert_eq!(m.event_at(rows[0], 50, f.view, 100).unwrap().event.id, 4);
        // A second loader shares the lanes: the same lane for the same type.
        let mut again = GanttConsumer::new().with_lanes(lanes.clone());
        again.consume(&events[1..2]);
        assert_eq!(again.snapshot().batches[0][0].lane, sub[1]);
        // Without lanes (a trace without the parameter), everything stays in the producer's row.
        let plain = model(events);
        assert!(plain.lanes(7).is_empty());
        assert_eq!(
            plain.frame(&rows[..1], TimeRange::new(0, 100), 100).rows[0].spans[0].event,
            Some(1)
        );
    }

    /// Two CPUs (producers 1 and 2), a thread 20 (tid 200) and the idle task 10, IRQ 30 and soft IRQ 31:
    /// the CPU tracks the collector writes, and the interrupts each CPU served.
    fn cpu_track_trace() -> (Vec<StoredEvent>, CpuTracks) {
        use socscope_tracedb::{CPU_IDLE_TYPE, ParamDef, ParamType, Producer, ProducerKind};
        let producer = |id, kind, local_id, name: &str| Producer {
            id,
            parent: None,
            kind,
            local_id,
            name: name.into(),
        };
        let producers = [
            producer(1, ProducerKind::Cpu, 0, "cpu0"),
            producer(2, ProducerKind::Cpu, 1, "cpu1"),
            producer(10, ProducerKind::Thread, 0, "swapper"),
            producer(20, ProducerKind::Thread, 200, "demux"),
            producer(30, ProducerKind::Irq, 42, "eth0"),
            producer(31, ProducerKind::SoftIrq, 3, "NET_RX"),
        ];
        let ty = |id, name: &str, category| EventType {
            id,
            name: name.into(),
            category,
            params: vec![],
        };
        let mut on_cpu = ty(ON_CPU_TYPE, "on_cpu", EventCategory::State);
        on_cpu.params = vec![
            ParamDef::new("thread", ParamType::Unsigned),
            ParamDef::new("tid", ParamType::Unsigned),
        ];
        let types = [
            on_cpu,
            ty(CPU_IDLE_TYPE, "cpu_idle", EventCategory::State),
            ty(2, "irq", EventCategory::State),
            ty(4, "softirq", EventCategory::State),
            ty(5, "running", EventCategory::State),
        ];
        let ran = |id, ts, end, cpu_producer, thread: u32, tid| {
            stored(
                id,
                Event::state(ts, end, 0, ON_CPU_TYPE, cpu_producer, None).with_params(vec![
                    ParamValue::Unsigned(u64::from(thread)),
                    ParamValue::Unsigned(tid),
                ]),
            )
        };
        let events = vec![
            // cpu0: demux 0-40, idle 40-100; an IRQ at 10-12 and its soft IRQ at 12-20.
            ran(1, 0, 40, 1, 20, 200),
            stored(2, Event::state(0, 40, 0, 5, 20, Some(0))),
            stored(3, Event::state(10, 12, 0, 2, 30, Some(0))),
            stored(4, Event::state(12, 20, 0, 4, 31, Some(0))),
            stored(5, Event::state(40, 100, 0, CPU_IDLE_TYPE, 1, None)),
            // cpu1: demux 50-100 and an IRQ at 60-61.
            ran(6, 50, 100, 2, 20, 200),
            stored(7, Event::state(60, 61, 0, 2, 30, Some(1))),
        ];
        (events, CpuTracks::new(&producers, &types))
    }

    #[test]
    fn a_cpu_track_draws_its_threads_and_nests_the_interrupts_it_served() {
        let (events, tracks) = cpu_track_trace();
        assert_eq!((tracks.producer(0), tracks.producer(1)), (Some(1), Some(2)));
        assert!(tracks.is_track(2) && !tracks.is_track(20));
        let mut c = GanttConsumer::new();
        c.consume(&events);
        let mut m = GanttModel::new();
        m.set_cpu_tracks(tracks);
        m.absorb(&c.snapshot());
        // cpu0 served an IRQ and a soft IRQ, cpu1 an IRQ only.
        assert_eq!(m.lanes(1), [IRQ_LANE, SOFTIRQ_LANE]);
        assert_eq!(m.lanes(2), [IRQ_LANE]);
        let lanes = Lanes::default();
        assert_eq!(
            (lanes.name(IRQ_LANE), lanes.name(SOFTIRQ_LANE)),
            ("IRQ".to_string(), "softirq".to_string())
        );
        let rows = [
            GanttRow::producer(1),
            GanttRow::lane(1, IRQ_LANE),
            GanttRow::lane(1, SOFTIRQ_LANE),
            GanttRow::producer(2),
            GanttRow::lane(2, IRQ_LANE),
            GanttRow::producer(30),
        ];
        let f = m.frame(&rows, TimeRange::new(0, 100), 100);
        let spans = |r: usize| {
            f.rows[r]
                .spans
                .iter()
                .map(|s| (s.x0, s.x1, s.type_id, s.event))
                .collect::<Vec<_>>()
        };
        // A CPU's row: the thread that ran (by thread, not by type: coloured by its process), then idle.
        let demux = THREAD_KEY | 20;
        assert_eq!(thread_of_key(demux), Some(20));
        assert_eq!(thread_of_key(ON_CPU_TYPE), None);
        assert_eq!(
            spans(0),
            [
                (0, 40, demux, Some(1)),
                (40, 100, socscope_tracedb::CPU_IDLE_TYPE, Some(5))
            ]
        );
        // Zoomed out to one pixel, cpu0 (demux 40 ns, idle 60 ns) is demux, as high as it was busy;
        // cpu1 (idle 0-50 is not written: no state) is demux for half the pixel.
        let whole = m.frame(&rows, TimeRange::new(0, 100), 1);
        let top = |r: usize| {
            let s = &whole.rows[r].spans[0];
            (s.type_id, s.coverage)
        };
        assert_eq!((top(0), top(3)), ((demux, 2), (demux, 2)));
        // Its lanes: the interrupts it served, each also still in its own producer's row.
        assert_eq!(spans(1), [(10, 12, 2, Some(3))]);
        assert_eq!(spans(2), [(12, 20, 4, Some(4))]);
        assert_eq!(spans(3), [(50, 100, demux, Some(6))]);
        assert_eq!(spans(4), [(60, 61, 2, Some(7))]);
        assert_eq!(spans(5), [(10, 12, 2, Some(3)), (60, 61, 2, Some(7))]);
        // The legend lists the slices as `on_cpu`, not as one type per thread.
        assert!(f.types().contains(&ON_CPU_TYPE));
        assert!(!f.types().iter().any(|&t| thread_of_key(t).is_some()));
        // Hovering a slice names the thread that ran.
        let hovered = m.event_at(rows[0], 20, f.view, 100).unwrap().event;
        assert_eq!(
            (
                hovered.id,
                hovered.type_id,
                hovered.producer,
                hovered.target
            ),
            (1, ON_CPU_TYPE, 1, 20)
        );
        // Every type loaded is listed, whether drawn or not.
        assert_eq!(
            m.types_loaded().into_iter().collect::<Vec<_>>(),
            [2, 4, 5, ON_CPU_TYPE, socscope_tracedb::CPU_IDLE_TYPE]
        );
        // Without the CPU tracks set, the interrupts stay in their own rows only.
        let plain = model(events);
        assert!(plain.lanes(1).is_empty());
    }

    #[test]
    fn one_state_per_pixel_is_drawn_exactly() {
        // 100 ns over 10 px: 10 ns per pixel; states of 20 and 30 ns.
        let m = model(vec![
            stored(1, Event::state(0, 20, 0, 1, 7, Some(0))),
            stored(2, Event::state(20, 50, 0, 2, 7, Some(0))),
        ]);
        let f = m.frame(&rows(&[7]), TimeRange::new(0, 100), 10);
        assert_eq!(
            f.rows[0].spans,
            vec![
                StateSpan {
                    x0: 0,
                    x1: 2,
                    type_id: 1,
                    aggregated: false,
                    event: Some(1),
                    coverage: FULL_COVERAGE
                },
                StateSpan {
                    x0: 2,
                    x1: 5,
                    type_id: 2,
                    aggregated: false,
                    event: Some(2),
                    coverage: FULL_COVERAGE
                },
            ]
        );
    }

    #[test]
    fn several_states_in_a_pixel_aggregate_to_the_dominant_type_with_a_marker() {
        // Pixel 0 = [0, 10): type 1 for 2 ns, type 2 for 8 ns.
        let m = model(vec![
            stored(1, Event::state(0, 2, 0, 1, 7, Some(0))),
            stored(2, Event::state(2, 10, 0, 2, 7, Some(0))),
            stored(3, Event::state(10, 20, 0, 1, 7, Some(0))),
        ]);
        let f = m.frame(&rows(&[7]), TimeRange::new(0, 100), 10);
        assert_eq!(
            f.rows[0].spans,
            vec![
                StateSpan {
                    x0: 0,
                    x1: 1,
                    type_id: 2,
                    aggregated: true,
                    event: None,
                    coverage: FULL_COVERAGE
                },
                StateSpan {
                    x0: 1,
                    x1: 2,
                    type_id: 1,
                    aggregated: false,
                    event: Some(3),
                    coverage: FULL_COVERAGE
                },
            ]
        );
        // Zoomed in, nothing is aggregated.
        let f = m.frame(&rows(&[7]), TimeRange::new(0, 20), 20);
        assert!(f.rows[0].spans.iter().all(|s| !s.aggregated));
        assert_eq!(f.rows[0].spans.len(), 3);
    }

    #[test]
    fn sparse_short_states_are_drawn_as_low_as_their_pixels_are_busy() {
        // 10 ns per pixel. An interrupt of 1 ns in each of the first three pixels, one of 5 ns in
        // the fourth, then a state from 40 to 65: pixels 4 and 5 whole, pixel 6 half.
        let mut events: Vec<_> = (0..3)
            .map(|k| {
                stored(
                    k + 1,
                    Event::state(k * 10 + 2, k * 10 + 3, 0, 1, 7, Some(0)),
                )
            })
            .collect();
        events.push(stored(4, Event::state(31, 36, 0, 1, 7, Some(0))));
        events.push(stored(5, Event::state(40, 65, 0, 2, 7, Some(0))));
        let m = model(events);
        let f = m.frame(&rows(&[7]), TimeRange::new(0, 100), 10);
        let got: Vec<_> = f.rows[0]
            .spans
            .iter()
            .map(|s| (s.x0, s.x1, s.type_id, s.coverage))
            .collect();
        assert_eq!(
            got,
            [
                (0, 1, 1, 1),
                (1, 2, 1, 1),
                (2, 3, 1, 1),
                (3, 4, 1, 2),
                (4, 6, 2, 4),
                (6, 7, 2, 2)
            ]
        );
        // Several states in a pixel: their times add up (8 of 10 ns: four quarters rounded up).
        let m = model(vec![
            stored(1, Event::state(0, 3, 0, 1, 7, Some(0))),
            stored(2, Event::state(4, 9, 0, 2, 7, Some(0))),
        ]);
        let f = m.frame(&rows(&[7]), TimeRange::new(0, 100), 10);
        assert_eq!(
            f.rows[0].spans,
            [StateSpan {
                x0: 0,
                x1: 1,
                type_id: 2,
                aggregated: true,
                event: None,
                coverage: FULL_COVERAGE,
            }]
        );
        let f = m.frame(&rows(&[7]), TimeRange::new(0, 200), 10);
        assert_eq!(f.rows[0].spans[0].coverage, 2);
    }

    #[test]
    fn a_long_state_from_before_the_view_covers_it() {
        let m = model(vec![stored(
            1,
            Event::state(-1000, 10_000, 0, 4, 7, Some(0)),
        )]);
        let f = m.frame(&rows(&[7]), TimeRange::new(0, 1000), 100);
        assert_eq!(
            f.rows[0].spans,
            vec![StateSpan {
                x0: 0,
                x1: 100,
                type_id: 4,
                aggregated: false,
                event: Some(1),
                coverage: FULL_COVERAGE
            }]
        );
    }

    #[test]
    fn punctual_events_become_one_tick_per_pixel_with_a_count() {
        let m = model(vec![
            stored(1, Event::punctual(1, 3, 7, None)),
            stored(2, Event::punctual(5, 3, 7, None)),
            stored(3, Event::punctual(55, 4, 7, None)),
        ]);
        let f = m.frame(&rows(&[7]), TimeRange::new(0, 100), 10);
        assert_eq!(
            f.rows[0].ticks,
            vec![
                Tick {
                    x: 0,
                    type_id: 3,
                    count: 2
                },
                Tick {
                    x: 5,
                    type_id: 4,
                    count: 1
                }
            ]
        );
    }

    #[test]
    fn short_links_are_thinned_to_one_per_pixel_and_long_ones_always_drawn() {
        // 10 ns per pixel: three short links in pixel 0, one in pixel 3, one long link.
        let m = model(vec![
            link(1, 0, 1, 7, 8),
            link(2, 2, 3, 8, 7),
            link(3, 4, 5, 7, 8),
            link(4, 30, 31, 7, 8),
            link(5, 5, 80, 7, 8),
        ]);
        let f = m.frame(&rows(&[7, 8]), TimeRange::new(0, 100), 10);
        assert_eq!(f.links_total, 5);
        assert_eq!(f.links.len(), 3);
        assert!((f.links_drawn_percent() - 60.0).abs() < 1e-9);
        // A link to a row not shown is neither drawn nor counted.
        let f = m.frame(&rows(&[7]), TimeRange::new(0, 100), 10);
        assert_eq!((f.links_total, f.links.len()), (0, 0));
        // Zoomed in enough, every link is drawn.
        let f = m.frame(&rows(&[7, 8]), TimeRange::new(0, 100), 1000);
        assert_eq!(f.links.len(), 5);
    }

    /// The links a frame draws, computed the plain way: every link in one list sorted by start
    /// (arrival order for equal starts), then the same thinning.
    fn links_by_one_list(
        events: &[StoredEvent],
        rows: &[u32],
        view: TimeRange,
        width: u32,
    ) -> (usize, Vec<LinkArrow>) {
        let px = Pixels::new(view, width);
        let mut all: Vec<&StoredEvent> = events.iter().collect();
        all.sort_by_key(|e| e.event.ts);
        let (mut total, mut out, mut last) = (0, Vec::new(), None);
        for e in all {
            let EventKind::Link { end, target } = e.event.kind else {
                continue;
            };
            if e.event.ts >= view.end || end < view.start {
                continue;
            }
            let row = |p: u32| rows.iter().position(|&r| r == p);
            let (Some(r0), Some(r1)) = (row(e.event.producer), row(target)) else {
                continue;
            };
            total += 1;
            if (end - e.event.ts) as f64 <= px.ns_per_px() {
                let c = px.column(e.event.ts.clamp(view.start, view.end - 1));
                if last == Some(c) {
                    continue;
                }
                last = Some(c);
            }
            out.push(LinkArrow {
                x0: px.x(e.event.ts),
                row0: r0,
                x1: px.x(end),
                row1: r1,
                type_id: 9,
            });
        }
        (total, out)
    }

    proptest::proptest! {
        /// Columns and their start times are those of the 128-bit formulas, for views short and
        /// long enough that the 64-bit products overflow.
        #[test]
        fn pixel_columns_match_the_wide_arithmetic(
            start in -(1i64 << 61)..(1i64 << 61),
            len_bits in 0u32..61,
            len_low in 1i64..1_000_000,
            width in 1u32..5_000,
            at in 0.0f64..1.0,
            c in 0u32..5_000,
        ) {
            let len = (1i64 << len_bits).max(len_low);
            let px = Pixels::new(TimeRange::new(start, start + len), width);
            let t = start + (len as f64 * at) as i64;
            let want_col = (((t - start) as i128 * width as i128) / len as i128)
                .clamp(0, width as i128 - 1) as u32;
            proptest::prop_assert_eq!(px.column(t), want_col);
            let c = c.min(width);
            let want_time = start + ((len as i128 * c as i128) / width as i128) as i64;
            proptest::prop_assert_eq!(px.time(c), want_time);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..Default::default() })]
        /// Links kept by duration class give the frames one sorted list gives, whatever their
        /// lengths (from 0 to far longer than the view), order of arrival, rows and view.
        #[test]
        fn links_by_duration_class_draw_what_one_sorted_list_draws(
            links in proptest::collection::vec((0i64..10_000, 0u32..40, 7u32..10, 7u32..10), 0..300),
            view in (0i64..12_000, 1i64..12_000),
            width in 1u32..300,
            rows in proptest::sample::subsequence(vec![7u32, 8, 9], 0..=3),
        ) {
            let events: Vec<StoredEvent> = links
                .iter()
                .enumerate()
                .map(|(i, &(ts, bits, from, to))| {
                    // Lengths spread over many classes: 0, a few ns, up to about 2^39 ns.
                    let len = if bits == 0 { 0 } else { (1i64 << bits) / 3 + i64::from(bits) };
                    link(i as i64, ts, ts + len, from, to)
                })
                .collect();
            let m = model(events.clone());
            let view = TimeRange::new(view.0, view.0 + view.1);
            let f = m.frame(&rows.iter().copied().map(GanttRow::producer).collect::<Vec<_>>(), view, width);
            let (total, want) = links_by_one_list(&events, &rows, view, width);
            proptest::prop_assert_eq!(f.links_total, total as u64);
            proptest::prop_assert_eq!(f.links, want);
        }
    }

    #[test]
    fn losses_become_gaps_up_to_the_next_event_of_their_cpu() {
        let mut m = GanttModel::new();
        m.set_losses(vec![LossRecord {
            cpu: Some(0),
            ts: 20,
            count: 5,
            seq_from: None,
            seq_to: None,
            reason: "test".into(),
        }]);
        let mut c = GanttConsumer::new();
        c.consume(&[
            stored(1, Event::state(0, 20, 0, 1, 7, Some(0))),
            stored(2, Event::state(60, 70, 0, 1, 7, Some(0))),
        ]);
        m.absorb(&c.snapshot());
        let f = m.frame(&rows(&[7]), TimeRange::new(0, 100), 10);
        assert_eq!(
            f.losses,
            vec![LossGap {
                x0: 2,
                x1: 6,
                count: 5,
                cpu: Some(0)
            }]
        );
    }

    #[test]
    fn appending_loads_skip_what_is_already_there_and_snapshots_are_incremental() {
        let mut c = GanttConsumer::new();
        c.consume(&[stored(1, Event::state(0, 50, 0, 1, 7, Some(0)))]);
        let s1 = c.snapshot();
        c.consume(&[stored(2, Event::punctual(60, 3, 7, None))]);
        let s2 = c.snapshot();
        assert_eq!((s1.batches.len(), s2.batches.len()), (1, 2));
        let mut m = GanttModel::new();
        m.absorb(&s1);
        m.absorb(&s2);
        assert_eq!(m.events(), 2);
        m.start_appending();
        let mut c = GanttConsumer::appending_from(100);
        // The overlapping first chunk repeats the state that began before 100: skipped.
        c.consume(&[
            stored(1, Event::state(0, 150, 0, 1, 7, Some(0))),
            stored(3, Event::punctual(120, 3, 7, None)),
        ]);
        m.absorb(&c.snapshot());
        assert_eq!(m.events(), 3);
    }

    #[test]
    fn hovering_finds_the_state_or_the_tick_under_the_pointer() {
        let m = model(vec![
            stored(1, Event::state(0, 50, 0, 1, 7, Some(0))),
            stored(2, Event::state(10, 20, 1, 2, 7, Some(0))),
            stored(3, Event::punctual(80, 3, 7, None)),
        ]);
        let view = TimeRange::new(0, 100);
        let h = m.event_at(7, 15, view, 100).unwrap();
        assert_eq!(h.event.id, 2, "the nested state is the innermost");
        assert_eq!(m.event_at(7, 30, view, 100).unwrap().event.id, 1);
        assert_eq!(m.event_at(7, 80, view, 100).unwrap().event.id, 3);
        assert!(m.event_at(7, 95, view, 100).is_none());
        assert!(m.event_at(8, 30, view, 100).is_none());
    }

    #[test]
    fn galloping_finds_the_same_partition_point_as_bisection() {
        let v: Vec<i64> = (0..200).map(|i| i / 3).collect();
        for len in [0, 1, 2, 7, 64, 200] {
            for x in -1..70 {
                let s = &v[..len];
                assert_eq!(gallop(s, |&e| e < x), s.partition_point(|&e| e < x));
            }
        }
    }

    #[test]
    fn frame_cost_does_not_grow_with_events_in_view() {
        // 2 M states in one row, 1000 columns: a frame visits columns and blocks, not states (each
        // column reads at most the partial blocks at its ends one by one).
        let events: Vec<StoredEvent> = (0..2_000_000)
            .map(|i| {
                stored(
                    i,
                    Event::state(i * 10, i * 10 + 7, 0, (i % 3) as u32, 7, Some(0)),
                )
            })
            .collect();
        let m = model(events);
        // On a pool of one thread, whose counter is then read.
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let (f, read) = pool.install(|| {
            STATES_READ.with(|c| c.set(0));
            let f = m.frame(&rows(&[7]), TimeRange::new(0, 20_000_000), 1000);
            (f, STATES_READ.with(|c| c.get()))
        });
        assert!(
            (1000..=1000 * 4 * BLOCK).contains(&read),
            "{read} states read"
        );
        assert_eq!(
            f.rows[0].spans.iter().map(|s| s.x1 - s.x0).sum::<u32>(),
            1000
        );
        assert!(f.rows[0].spans.iter().all(|s| s.aggregated));
    }

    /// A row of `states` (start, duration, type), in any order, indexed as a frame reads it.
    fn row_data(states: &[(i64, i64, u32)]) -> RowData {
        let mut d = RowData::default();
        for (i, &(ts, len, type_id)) in states.iter().enumerate() {
            d.push_state(StateItem {
                ts,
                end: ts + len,
                type_id,
                id: i as i64,
            });
        }
        d.fix_order();
        d
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 256, ..Default::default() })]
        /// The dominant type of a column, with whole blocks counted by their times per type, is the
        /// type with the most time in the column counted state by state; the search for the column's
        /// end agrees with a bisection of the whole row.
        #[test]
        fn dominant_types_and_column_ends_match_the_direct_computation(
            states in proptest::collection::vec((0i64..5_000, 0i64..400, 0u32..4), 0..700),
            more in proptest::collection::vec((0i64..5_000, 0i64..400, 0u32..4), 0..40),
            t0 in -100i64..5_000,
            width in 1i64..3_000,
        ) {
            let mut d = row_data(&states);
            // A later load appending states out of order: the blocks are built again.
            for (i, &(ts, len, type_id)) in more.iter().enumerate() {
                d.push_state(StateItem { ts, end: ts + len, type_id, id: 10_000 + i as i64 });
            }
            d.fix_order();
            let t1 = t0 + width;
            let lo = d.states.partition_point(|s| s.ts < t0);
            let hi = d.states.partition_point(|s| s.ts < t1);
            for from in [0, lo / 2, lo] {
                proptest::prop_assert_eq!(d.first_start_from(from.min(lo), t1), hi);
            }
            let carried = carry(&d, lo, t0);
            let mut want: Vec<(TypeId, i64)> = Vec::new();
            for s in carried.map(|j| &d.states[j]).into_iter().chain(&d.states[lo..hi]) {
                add_time(&mut want, s.type_id, (s.end.min(t1) - s.ts.max(t0)).max(1));
            }
            if !want.is_empty() {
                let got = dominant(&d, carried, lo, hi, t0, t1, &mut Vec::new());
                proptest::prop_assert_eq!(got.0, top_type(&want));
                proptest::prop_assert_eq!(got.1, want.iter().map(|&(_, time)| time).sum::<i64>());
            }
        }
    }
}
