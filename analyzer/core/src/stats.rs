//! Statistics of an interval (Framesoc RT-460 §3.3): event count per producer or per type,
//! state duration per type, link duration per type; filters on types, producers and the
//! interval; excluded entities; user groups with a name and a colour; the small values merged
//! into one "others" slice.
//!
//! Two steps, used alike by the CLI and the GUI:
//! - loading: [`StatsConsumer`] runs on a [loader](crate::loader) thread and accumulates the raw
//!   value of every entity for all four operators at once ([`StatsSnapshot`]); it reads the
//!   trace's names there, so building it needs no store access;
//! - presentation, pure and cheap, on a snapshot (no reload when the user edits the pie):
//!   [`PieSettings::slices`] (exclusions, groups, threshold/others) and [`present`] (labels and
//!   colours, the CLI's [`StatisticsSnapshot`]).
//!
//! Start here: [`StatsConsumer`], [`PieSettings`], [`statistics`] for a synchronous run.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

use serde::Serialize;
use socscope_tracedb::{
    EventCategory, EventKind, Filter, ProducerId, Result, StoredEvent, TimeRange, TraceReader,
    TypeId,
};

use crate::loader::{Consumer, LoadRequest, chunk_size};
use crate::palette::{self, Rgb};

/// What is measured, and per what.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Operator {
    /// Events starting in the interval, per producer.
    CountPerProducer,
    /// Events starting in the interval, per type.
    #[default]
    CountPerType,
    /// Nanoseconds of states inside the interval, per type.
    StateDurationPerType,
    /// Nanoseconds of the links starting in the interval (start to arrival), per type.
    LinkDurationPerType,
    /// Syscalls starting in the interval, per syscall name (`futex`, `read`).
    CountPerSyscall,
    /// Nanoseconds of syscalls inside the interval, per syscall name.
    SyscallDuration,
}

impl Operator {
    /// All, in menu order.
    pub const ALL: [Operator; 6] = [
        Operator::CountPerType,
        Operator::CountPerProducer,
        Operator::StateDurationPerType,
        Operator::LinkDurationPerType,
        Operator::CountPerSyscall,
        Operator::SyscallDuration,
    ];

    /// Menu label.
    pub const fn label(self) -> &'static str {
        match self {
            Operator::CountPerProducer => "Event producer instances",
            Operator::CountPerType => "Event type instances",
            Operator::LinkDurationPerType => "Link duration",
            Operator::StateDurationPerType => "State duration",
            Operator::CountPerSyscall => "Syscall instances",
            Operator::SyscallDuration => "Syscall duration",
        }
    }

    /// Whether slices are producers (else event types).
    pub const fn per_producer(self) -> bool {
        matches!(self, Operator::CountPerProducer)
    }

    /// Whether slices are syscalls, by the name their states carry (else types or producers).
    pub const fn per_syscall(self) -> bool {
        matches!(self, Operator::CountPerSyscall | Operator::SyscallDuration)
    }

    /// Same as [`Operator::per_producer`].
    pub const fn by_producer(self) -> bool {
        self.per_producer()
    }

    /// Whether values are nanoseconds (else counts).
    pub const fn is_duration(self) -> bool {
        matches!(
            self,
            Operator::LinkDurationPerType
                | Operator::StateDurationPerType
                | Operator::SyscallDuration
        )
    }

    /// The unit of the values.
    pub fn unit(self) -> &'static str {
        if self.is_duration() { "ns" } else { "events" }
    }

    /// The category the operator reads (`None`: all).
    pub fn category(self) -> Option<EventCategory> {
        match self {
            Operator::StateDurationPerType
            | Operator::CountPerSyscall
            | Operator::SyscallDuration => Some(EventCategory::State),
            Operator::LinkDurationPerType => Some(EventCategory::Link),
            _ => None,
        }
    }

    /// `filter` narrowed to what the operator reads (a load for this operator alone).
    pub fn filter(self, filter: &Filter) -> Filter {
        let mut f = filter.clone();
        if let Some(c) = self.category() {
            f.categories = Some(match &filter.categories {
                Some(cs) if cs.contains(&c) => vec![c],
                Some(_) => Vec::new(),
                None => vec![c],
            });
        }
        f
    }
}

impl FromStr for Operator {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "count-per-producer" => Ok(Operator::CountPerProducer),
            "count-per-type" => Ok(Operator::CountPerType),
            "state-duration-per-type" => Ok(Operator::StateDurationPerType),
            "link-duration-per-type" => Ok(Operator::LinkDurationPerType),
            "count-per-syscall" => Ok(Operator::CountPerSyscall),
            "syscall-duration" => Ok(Operator::SyscallDuration),
            _ => Err(format!(
                "unknown operator {s:?}: expected count-per-producer, count-per-type, \
                 state-duration-per-type, link-duration-per-type, count-per-syscall or \
                 syscall-duration"
            )),
        }
    }
}

/// Producer and type names of a trace.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EntityNames {
    pub producers: HashMap<ProducerId, String>,
    pub types: HashMap<TypeId, String>,
    /// The `syscall` state type and the index of its `name` parameter, when the trace has them.
    pub syscall: Option<(TypeId, usize)>,
}

impl EntityNames {
    /// The trace's names.
    pub fn of(reader: &TraceReader) -> Result<Self> {
        let types = reader.event_types()?;
        let syscall = types.iter().find_map(|t| {
            let i = t.params.iter().position(|p| p.name == "name")?;
            (t.name == "syscall").then_some((t.id, i))
        });
        Ok(Self {
            // Same-named producers told apart as every output tells them (`demux #39`).
            producers: crate::hierarchy::producer_labels(&reader.producers()?),
            types: types.into_iter().map(|t| (t.id, t.name)).collect(),
            syscall,
        })
    }

    /// The name of an entity of `op` (`producer ID` / `type ID` when unknown).
    pub fn name(&self, op: Operator, id: u32) -> String {
        let (map, kind) = if op.per_producer() {
            (&self.producers, "producer")
        } else {
            (&self.types, "type")
        };
        map.get(&id)
            .cloned()
            .unwrap_or_else(|| format!("{kind} {id}"))
    }
}

/// The raw value of every operator for every entity, so far.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StatsSnapshot {
    /// Events starting in the interval, per producer.
    pub producer_count: BTreeMap<ProducerId, u64>,
    /// Events starting in the interval, per type.
    pub type_count: BTreeMap<TypeId, u64>,
    /// Nanoseconds of the links starting in the interval, per type.
    pub link_ns: BTreeMap<TypeId, i64>,
    /// Nanoseconds of states inside the interval, per type.
    pub state_ns: BTreeMap<TypeId, i64>,
    /// Syscalls starting in the interval, per index into `syscall_names`.
    pub syscall_count: BTreeMap<u32, u64>,
    /// Nanoseconds of syscalls inside the interval, per index into `syscall_names`.
    pub syscall_ns: BTreeMap<u32, i64>,
    /// The syscall names met so far (their index is the entity id of the syscall operators).
    pub syscall_names: Vec<String>,
    /// The trace's names (read by the loader before the first chunk).
    pub names: Arc<EntityNames>,
}

impl StatsSnapshot {
    /// The chosen operator's values, keyed by entity id.
    pub fn values(&self, op: Operator) -> BTreeMap<u32, f64> {
        match op {
            Operator::CountPerProducer => self
                .producer_count
                .iter()
                .map(|(k, v)| (*k, *v as f64))
                .collect(),
            Operator::CountPerType => self
                .type_count
                .iter()
                .map(|(k, v)| (*k, *v as f64))
                .collect(),
            Operator::LinkDurationPerType => {
                self.link_ns.iter().map(|(k, v)| (*k, *v as f64)).collect()
            }
            Operator::StateDurationPerType => {
                self.state_ns.iter().map(|(k, v)| (*k, *v as f64)).collect()
            }
            Operator::CountPerSyscall => self
                .syscall_count
                .iter()
                .map(|(k, v)| (*k, *v as f64))
                .collect(),
            Operator::SyscallDuration => self
                .syscall_ns
                .iter()
                .map(|(k, v)| (*k, *v as f64))
                .collect(),
        }
    }

    /// The name of an entity of `op`: a producer's, a type's or a syscall's.
    pub fn name(&self, op: Operator, id: u32) -> String {
        if op.per_syscall() {
            self.syscall_names
                .get(id as usize)
                .cloned()
                .unwrap_or_else(|| format!("syscall {id}"))
        } else {
            self.names.name(op, id)
        }
    }
}

/// Accumulates every operator on a loader thread; built without a store (the names are read
/// by [`Consumer::prepare`] on the loader thread).
#[derive(Debug, Clone)]
pub struct StatsConsumer {
    range: TimeRange,
    names: Arc<EntityNames>,
    producer_count: HashMap<ProducerId, u64>,
    type_count: HashMap<TypeId, u64>,
    link_ns: HashMap<TypeId, i64>,
    state_ns: HashMap<TypeId, i64>,
    syscall_count: HashMap<u32, u64>,
    syscall_ns: HashMap<u32, i64>,
    syscall_names: Vec<String>,
    syscall_ids: HashMap<String, u32>,
}

impl StatsConsumer {
    /// Statistics of the events of `range`.
    pub fn new(range: TimeRange) -> Self {
        Self {
            range,
            names: Arc::default(),
            producer_count: HashMap::new(),
            type_count: HashMap::new(),
            link_ns: HashMap::new(),
            state_ns: HashMap::new(),
            syscall_count: HashMap::new(),
            syscall_ns: HashMap::new(),
            syscall_names: Vec::new(),
            syscall_ids: HashMap::new(),
        }
    }

    /// The load request (RT-460's 100 k events per chunk) for the events `filter` selects.
    pub fn request(&self, trace: &Path, filter: &Filter) -> LoadRequest {
        LoadRequest {
            trace: trace.to_path_buf(),
            range: self.range,
            filter: filter.clone(),
            chunk_events: chunk_size::STATISTICS,
        }
    }
}

impl Consumer for StatsConsumer {
    type Snapshot = StatsSnapshot;

    fn prepare(&mut self, reader: &TraceReader) -> std::result::Result<(), String> {
        self.names = Arc::new(EntityNames::of(reader).map_err(|e| e.to_string())?);
        Ok(())
    }

    fn consume(&mut self, events: &[StoredEvent]) {
        let r = self.range;
        for e in events {
            if r.contains(e.ts) {
                *self.producer_count.entry(e.producer).or_default() += 1;
                *self.type_count.entry(e.type_id).or_default() += 1;
                if let EventKind::Link { end, .. } = e.kind {
                    *self.link_ns.entry(e.type_id).or_default() += (end - e.ts).max(0);
                }
            }
            if let EventKind::State { end, .. } = e.kind {
                let o = r.overlap(e.ts, end);
                if o > 0 {
                    *self.state_ns.entry(e.type_id).or_default() += o;
                }
                if let Some((ty, at)) = self.names.syscall
                    && e.type_id == ty
                    && let Some(name) = e.params.get(at)
                {
                    let name = name.to_string();
                    let id = match self.syscall_ids.get(&name) {
                        Some(id) => *id,
                        None => {
                            let id = self.syscall_names.len() as u32;
                            self.syscall_names.push(name.clone());
                            self.syscall_ids.insert(name, id);
                            id
                        }
                    };
                    if r.contains(e.ts) {
                        *self.syscall_count.entry(id).or_default() += 1;
                    }
                    if o > 0 {
                        *self.syscall_ns.entry(id).or_default() += o;
                    }
                }
            }
        }
    }

    fn snapshot(&self) -> StatsSnapshot {
        fn sorted<V: Copy>(m: &HashMap<u32, V>) -> BTreeMap<u32, V> {
            m.iter().map(|(k, v)| (*k, *v)).collect()
        }
        StatsSnapshot {
            producer_count: sorted(&self.producer_count),
            type_count: sorted(&self.type_count),
            link_ns: sorted(&self.link_ns),
            state_ns: sorted(&self.state_ns),
            syscall_count: sorted(&self.syscall_count),
            syscall_ns: sorted(&self.syscall_ns),
            syscall_names: self.syscall_names.clone(),
            names: self.names.clone(),
        }
    }
}

/// A user-defined group of entities shown as one slice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PieGroup {
    /// Its name.
    pub name: String,
    /// Its colour.
    pub colour: Rgb,
    /// The entities merged.
    pub members: BTreeSet<u32>,
}

/// What a slice stands for.
#[derive(Clone, Debug, PartialEq)]
pub enum SliceKind {
    /// One type or producer.
    Entity(u32),
    /// A user group (index into [`PieSettings::groups`]).
    Group(usize),
    /// The small values aggregated: each entity with its value.
    Others(Vec<(u32, f64)>),
}

/// One slice (and one table row).
#[derive(Clone, Debug, PartialEq)]
pub struct Slice {
    /// What it is.
    pub kind: SliceKind,
    /// Its value.
    pub value: f64,
    /// Share of the total, 0 to 1.
    pub share: f64,
}

/// The user's manipulations of the pie (kept when the operator or the interval change).
#[derive(Clone, Debug, PartialEq)]
pub struct PieSettings {
    /// The operator shown.
    pub operator: Operator,
    /// Entities left out entirely (not in the total either).
    pub excluded: BTreeSet<u32>,
    /// User groups; an entity in several groups counts in the first.
    pub groups: Vec<PieGroup>,
    /// Entity slices below this share of the total are merged into one `others` slice (0:
    /// none; a single small slice stays itself; groups are never merged).
    pub threshold: f64,
}

impl Default for PieSettings {
    fn default() -> Self {
        Self {
            operator: Operator::CountPerType,
            excluded: BTreeSet::new(),
            groups: Vec::new(),
            threshold: 0.01,
        }
    }
}

impl PieSettings {
    /// Slices by decreasing value (ties in id order, groups after entities), "others" last.
    pub fn slices(&self, stats: &StatsSnapshot) -> Vec<Slice> {
        let values = stats.values(self.operator);
        let mut raw: Vec<(SliceKind, f64)> = Vec::new();
        let mut group_values = vec![0.0; self.groups.len()];
        for (id, v) in values {
            if self.excluded.contains(&id) || v <= 0.0 {
                continue;
            }
            match self.groups.iter().position(|g| g.members.contains(&id)) {
                Some(g) => group_values[g] += v,
                None => raw.push((SliceKind::Entity(id), v)),
            }
        }
        for (g, v) in group_values.into_iter().enumerate() {
            if v > 0.0 {
                raw.push((SliceKind::Group(g), v));
            }
        }
        let total: f64 = raw.iter().map(|(_, v)| v).sum();
        if total <= 0.0 {
            return Vec::new();
        }
        raw.sort_by(|a, b| b.1.total_cmp(&a.1));
        let mut out = Vec::new();
        let mut others = Vec::new();
        let mut others_v = 0.0;
        for (k, v) in raw {
            // Groups are the user's choice: never hidden in "others".
            match k {
                SliceKind::Entity(id) if v / total < self.threshold => {
                    others.push((id, v));
                    others_v += v;
                }
                k => out.push(Slice {
                    kind: k,
                    value: v,
                    share: v / total,
                }),
            }
        }
        if others.len() == 1 {
            let (id, v) = others[0];
            out.push(Slice {
                kind: SliceKind::Entity(id),
                value: v,
                share: v / total,
            });
        } else if !others.is_empty() {
            out.push(Slice {
                kind: SliceKind::Others(others),
                value: others_v,
                share: others_v / total,
            });
        }
        out
    }

    /// The members of group `g` that have a value in `stats` (and count in it).
    pub fn group_members(&self, g: usize, stats: &StatsSnapshot) -> Vec<u32> {
        stats
            .values(self.operator)
            .into_iter()
            .filter(|&(id, v)| {
                v > 0.0
                    && !self.excluded.contains(&id)
                    && self.groups.iter().position(|x| x.members.contains(&id)) == Some(g)
            })
            .map(|(id, _)| id)
            .collect()
    }

    /// Leaves `id` out of the computation.
    pub fn exclude(&mut self, id: u32) {
        self.excluded.insert(id);
    }

    /// Brings `id` back.
    pub fn restore(&mut self, id: u32) {
        self.excluded.remove(&id);
    }

    /// Merges `members` into a new group (taking them out of any other group); needs two or more.
    pub fn group(&mut self, name: &str, colour: Rgb, members: BTreeSet<u32>) -> bool {
        if members.len() < 2 {
            return false;
        }
        for g in &mut self.groups {
            g.members.retain(|m| !members.contains(m));
        }
        self.groups.retain(|g| !g.members.is_empty());
        self.groups.push(PieGroup {
            name: name.to_string(),
            colour,
            members,
        });
        true
    }

    /// Undoes group `index`.
    pub fn ungroup(&mut self, index: usize) {
        if index < self.groups.len() {
            self.groups.remove(index);
        }
    }

    /// Operator changes keep exclusions and groups only where they make sense (types vs producers).
    pub fn set_operator(&mut self, op: Operator) {
        if op.by_producer() != self.operator.by_producer()
            || op.per_syscall() != self.operator.per_syscall()
        {
            self.excluded.clear();
            self.groups.clear();
        }
        self.operator = op;
    }
}

/// Entities shown as one slice (the CLI's description of a [`PieGroup`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Group {
    /// The slice label.
    pub name: String,
    /// Its colour; the palette colour of the name when `None`.
    pub colour: Option<Rgb>,
    /// Producer or type ids (as the operator counts them).
    pub members: Vec<u32>,
}

/// What to compute (the CLI's description of [`PieSettings`] and the interval).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StatisticsConfig {
    /// The measure.
    pub operator: Operator,
    /// The interval.
    pub range: TimeRange,
    /// Producer or type ids left out entirely (not in the total either).
    pub exclude: Vec<u32>,
    /// User groups; an entity in several groups counts in the first.
    pub groups: Vec<Group>,
    /// Slices below this fraction of the total are merged into one `others` slice (0: none).
    pub threshold: f64,
}

impl StatisticsConfig {
    /// The pie settings this configuration describes.
    pub fn settings(&self) -> PieSettings {
        PieSettings {
            operator: self.operator,
            excluded: self.exclude.iter().copied().collect(),
            groups: self
                .groups
                .iter()
                .map(|g| PieGroup {
                    name: g.name.clone(),
                    colour: g.colour.unwrap_or_else(|| palette::colour(&g.name)),
                    members: g.members.iter().copied().collect(),
                })
                .collect(),
            threshold: self.threshold,
        }
    }
}

/// One slice of the pie or bar chart, labelled and coloured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatSlice {
    /// Entity, group name or `others`.
    pub label: String,
    /// Count or nanoseconds.
    pub value: f64,
    /// The name the colour comes from (type or producer name, group name, `others`).
    pub colour_key: String,
    /// The colour.
    pub colour: Rgb,
    /// The ids inside the slice.
    pub members: Vec<u32>,
}

/// The statistics so far, slices by decreasing value (ties by label, `others` last).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatisticsSnapshot {
    pub operator: Operator,
    /// `events` or `ns`.
    pub unit: &'static str,
    pub slices: Vec<StatSlice>,
    /// Sum of every slice.
    pub total: f64,
}

/// The slices of `settings` on `stats`, labelled with the trace's names and coloured with the
/// palette (pure: an edit of the settings needs no reload).
pub fn present(settings: &PieSettings, stats: &StatsSnapshot) -> StatisticsSnapshot {
    let op = settings.operator;
    let mut slices: Vec<StatSlice> = Vec::new();
    let mut others = None;
    let mut entities = Vec::new();
    for s in settings.slices(stats) {
        match s.kind {
            SliceKind::Entity(id) => {
                let n = stats.name(op, id);
                entities.push(slices.len());
                slices.push(StatSlice {
                    label: n.clone(),
                    value: s.value,
                    colour: palette::colour(&n),
                    colour_key: n,
                    members: vec![id],
                });
            }
            SliceKind::Group(g) => {
                let group = &settings.groups[g];
                slices.push(StatSlice {
                    label: group.name.clone(),
                    value: s.value,
                    colour_key: group.name.clone(),
                    colour: group.colour,
                    members: settings.group_members(g, stats),
                });
            }
            SliceKind::Others(list) => {
                others = Some(StatSlice {
                    label: "others".into(),
                    value: s.value,
                    colour_key: "others".into(),
                    colour: palette::OTHERS,
                    members: {
                        let mut m: Vec<u32> = list.iter().map(|o| o.0).collect();
                        m.sort_unstable();
                        m
                    },
                });
            }
        }
    }
    // Two producers of one name (threads called `worker`) are two slices: told apart by id.
    if op.per_producer() {
        let ids: Vec<(ProducerId, &str)> = entities
            .iter()
            .map(|&i| (slices[i].members[0], slices[i].label.as_str()))
            .collect();
        let labels = crate::hierarchy::distinct_names(&ids);
        for (i, l) in entities.into_iter().zip(labels) {
            slices[i].label = l;
        }
    }
    slices.sort_by(|a, b| {
        b.value
            .total_cmp(&a.value)
            .then_with(|| a.label.cmp(&b.label))
    });
    slices.extend(others);
    StatisticsSnapshot {
        operator: op,
        unit: op.unit(),
        total: slices.iter().map(|s| s.value).sum(),
        slices,
    }
}

/// The statistics of `config` for the events `filter` selects, computed at once.
pub fn statistics(
    reader: &TraceReader,
    config: StatisticsConfig,
    filter: &Filter,
) -> Result<StatisticsSnapshot> {
    let mut c = StatsConsumer::new(config.range);
    c.names = Arc::new(EntityNames::of(reader)?);
    let f = config.operator.filter(filter);
    let mut batch = Vec::with_capacity(4096);
    for e in reader.events_overlapping(config.range, &f)? {
        batch.push(e?);
        if batch.len() == 4096 {
            c.consume(&batch);
            batch.clear();
        }
    }
    c.consume(&batch);
    Ok(present(&config.settings(), &c.snapshot()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loader;
    use crate::testutil::{self, Spec};

    fn run(config: StatisticsConfig) -> StatisticsSnapshot {
        let (_dir, path) = testutil::write_spec(&Spec::small());
        let reader = TraceReader::open(&path).unwrap();
        statistics(&reader, config, &Filter::all()).unwrap()
    }

    fn pairs(s: &StatisticsSnapshot) -> Vec<(String, f64)> {
        s.slices
            .iter()
            .map(|x| (x.label.clone(), x.value))
            .collect()
    }

    #[test]
    fn count_per_type_and_producer() {
        let all = TimeRange::new(0, 1000);
        let s = run(StatisticsConfig {
            range: all,
            ..Default::default()
        });
        assert_eq!(
            pairs(&s),
            [
                ("allocated_bytes".into(), 3.0),
                ("marker".into(), 3.0),
                ("running".into(), 2.0),
                ("irq".into(), 1.0),
                ("wakeup".into(), 1.0)
            ]
        );
        assert_eq!(s.total, 10.0);
        assert_eq!(s.slices[2].colour, palette::colour("running"));
        let s = run(StatisticsConfig {
            operator: Operator::CountPerProducer,
            range: TimeRange::new(200, 1000),
            ..Default::default()
        });
        // Starting in [200, 1000): app/worker 450, 250 (var), 700 (var); app/main 300, 600;
        // irq/7 500, 999.
        assert_eq!(
            pairs(&s),
            [
                ("app/worker".into(), 3.0),
                ("app/main".into(), 2.0),
                ("irq/7".into(), 2.0)
            ]
        );
    }

    #[test]
    fn durations_clip_states_to_the_interval_links_whole() {
        let s = run(StatisticsConfig {
            operator: Operator::StateDurationPerType,
            range: TimeRange::new(200, 600),
            ..Default::default()
        });
        // running: [200,400) 200 + [450,600) 150; irq: 20.
        assert_eq!(pairs(&s), [("running".into(), 350.0), ("irq".into(), 20.0)]);
        let s = run(StatisticsConfig {
            operator: Operator::LinkDurationPerType,
            range: TimeRange::new(0, 1000),
            ..Default::default()
        });
        assert_eq!(pairs(&s), [("wakeup".into(), 40.0)]);
    }

    #[test]
    fn exclusions_groups_and_others() {
        let s = run(StatisticsConfig {
            range: TimeRange::new(0, 1000),
            exclude: vec![4],
            groups: vec![Group {
                name: "cpu".into(),
                colour: Some([1, 2, 3]),
                members: vec![1, 5],
            }],
            threshold: 0.3,
            ..Default::default()
        });
        // Without allocated_bytes: total 7; cpu group 3, marker 3, wakeup 1 (alone below the
        // threshold, so kept as itself).
        assert_eq!(s.total, 7.0);
        assert_eq!(
            pairs(&s),
            [
                ("cpu".into(), 3.0),
                ("marker".into(), 3.0),
                ("wakeup".into(), 1.0)
            ]
        );
        assert_eq!(s.slices[0].colour, [1, 2, 3]);
        assert_eq!(s.slices[0].members, [1, 5]);
        let s = run(StatisticsConfig {
            range: TimeRange::new(0, 1000),
            threshold: 0.25,
            ..Default::default()
        });
        assert_eq!(
            pairs(&s),
            [
                ("allocated_bytes".into(), 3.0),
                ("marker".into(), 3.0),
                ("others".into(), 4.0)
            ]
        );
        assert_eq!(s.slices[2].members, [1, 3, 5]);
    }

    #[test]
    fn progressive_snapshots_through_the_loader_end_at_the_full_result() {
        let (_dir, path) = testutil::write_spec(&Spec::small());
        let reader = TraceReader::open(&path).unwrap();
        let config = StatisticsConfig {
            operator: Operator::StateDurationPerType,
            range: TimeRange::new(0, 1000),
            ..Default::default()
        };
        let want = statistics(&reader, config.clone(), &Filter::all()).unwrap();
        let c = StatsConsumer::new(config.range);
        let mut req = c.request(&path, &config.operator.filter(&Filter::all()));
        req.chunk_events = 1;
        let (snap, progress) = loader::spawn(req, c).wait();
        assert!(progress.chunks > 1, "{progress:?}");
        let snap = snap.unwrap();
        // The names were read on the loader thread.
        assert_eq!(snap.names.types[&1], "running");
        assert_eq!(present(&config.settings(), &snap), want);
        // Another presentation of the same snapshot needs no reload.
        let mut settings = config.settings();
        settings.exclude(1);
        assert_eq!(
            present(&settings, &snap).slices.len(),
            want.slices.len() - 1
        );
    }

    use socscope_tracedb::Event;

    fn stats() -> StatsSnapshot {
        let mut c = StatsConsumer::new(TimeRange::new(0, 100));
        let mut evs = vec![
            StoredEvent {
                id: 1,
                event: Event::state(0, 50, 0, 1, 10, None),
            },
            StoredEvent {
                id: 2,
                event: Event::state(50, 200, 0, 2, 11, None),
            },
            StoredEvent {
                id: 3,
                event: Event {
                    ts: 10,
                    type_id: 3,
                    producer: 10,
                    cpu: None,
                    kind: EventKind::Link {
                        end: 40,
                        target: 11,
                    },
                    params: vec![],
                },
            },
        ];
        for i in 0..96 {
            evs.push(StoredEvent {
                id: 10 + i,
                event: Event::punctual(i, 4, 10, None),
            });
        }
        evs.push(StoredEvent {
            id: 200,
            event: Event::punctual(5, 5, 12, None),
        });
        c.consume(&evs);
        c.snapshot()
    }

    #[test]
    fn the_four_operators() {
        let s = stats();
        assert_eq!(
            s.values(Operator::StateDurationPerType),
            BTreeMap::from([(1, 50.0), (2, 50.0)])
        );
        assert_eq!(
            s.values(Operator::LinkDurationPerType),
            BTreeMap::from([(3, 30.0)])
        );
        assert_eq!(s.values(Operator::CountPerType)[&4], 96.0);
        assert_eq!(
            s.values(Operator::CountPerProducer),
            BTreeMap::from([(10, 98.0), (11, 1.0), (12, 1.0)])
        );
    }

    #[test]
    fn small_slices_aggregate_into_others() {
        let s = stats();
        let p = PieSettings {
            threshold: 0.05,
            ..PieSettings::default()
        };
        let slices = p.slices(&s);
        // 100 events: type 4 is 96 %, types 1, 2, 3, 5 are 1 % each.
        assert_eq!(slices[0].kind, SliceKind::Entity(4));
        match &slices[1].kind {
            SliceKind::Others(list) => assert_eq!(list.len(), 4),
            k => panic!("{k:?}"),
        }
        assert!((slices.iter().map(|s| s.share).sum::<f64>() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn exclude_restore_group_and_ungroup() {
        let s = stats();
        let mut p = PieSettings {
            threshold: 0.0,
            ..PieSettings::default()
        };
        p.exclude(4);
        let slices = p.slices(&s);
        assert_eq!(slices.len(), 4);
        assert!(slices.iter().all(|x| (x.share - 0.25).abs() < 1e-12));
        assert!(!p.group("one", [1, 2, 3], BTreeSet::from([1])));
        assert!(p.group("states", [255, 0, 0], BTreeSet::from([1, 2])));
        let slices = p.slices(&s);
        assert_eq!(slices[0].kind, SliceKind::Group(0));
        assert!((slices[0].share - 0.5).abs() < 1e-12);
        p.ungroup(0);
        p.restore(4);
        assert_eq!(p.slices(&s).len(), 5);
        p.set_operator(Operator::CountPerProducer);
        assert!(p.groups.is_empty() && p.excluded.is_empty());
    }
}
