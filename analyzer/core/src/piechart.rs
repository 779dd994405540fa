//! The statistics pie's view model (RT-460 §3.3): the four operators computed together while the
//! interval loads, then, for the chosen one, slices after excluding entities and merging user groups,
//! with the small ones aggregated into "others".
//!
//! Start here: [`StatsConsumer`], [`PieSettings::slices`], [`Operator`].

use std::collections::{BTreeMap, BTreeSet};

use socscope_tracedb::{EventKind, ProducerId, StoredEvent, TimeRange, TypeId};

use crate::loader::Consumer;

/// The four statistical operators of Framesoc.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operator {
    /// Number of events per producer.
    ProducerInstances,
    /// Number of events per type.
    TypeInstances,
    /// Total link duration per link type.
    LinkDuration,
    /// Total state duration per state type (clipped to the interval).
    StateDuration,
}

impl Operator {
    /// All, in menu order.
    pub const ALL: [Operator; 4] = [
        Operator::TypeInstances,
        Operator::ProducerInstances,
        Operator::StateDuration,
        Operator::LinkDuration,
    ];

    /// Menu label.
    pub const fn label(self) -> &'static str {
        match self {
            Operator::ProducerInstances => "Event producer instances",
            Operator::TypeInstances => "Event type instances",
            Operator::LinkDuration => "Link duration",
            Operator::StateDuration => "State duration",
        }
    }

    /// Whether entities are producers (else types).
    pub const fn by_producer(self) -> bool {
        matches!(self, Operator::ProducerInstances)
    }

    /// Whether values are nanoseconds (else counts).
    pub const fn is_duration(self) -> bool {
        matches!(self, Operator::LinkDuration | Operator::StateDuration)
    }
}

/// The value of every operator for every entity, so far.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StatsSnapshot {
    /// Events per producer.
    pub producer_count: BTreeMap<ProducerId, u64>,
    /// Events per type.
    pub type_count: BTreeMap<TypeId, u64>,
    /// Link nanoseconds per type.
    pub link_ns: BTreeMap<TypeId, i64>,
    /// State nanoseconds per type, inside the interval.
    pub state_ns: BTreeMap<TypeId, i64>,
}

impl StatsSnapshot {
    /// The chosen operator's values, keyed by entity id.
    pub fn values(&self, op: Operator) -> BTreeMap<u32, f64> {
        match op {
            Operator::ProducerInstances => self
                .producer_count
                .iter()
                .map(|(k, v)| (*k, *v as f64))
                .collect(),
            Operator::TypeInstances => self
                .type_count
                .iter()
                .map(|(k, v)| (*k, *v as f64))
                .collect(),
            Operator::LinkDuration => self.link_ns.iter().map(|(k, v)| (*k, *v as f64)).collect(),
            Operator::StateDuration => self.state_ns.iter().map(|(k, v)| (*k, *v as f64)).collect(),
        }
    }
}

/// Computes every operator on a loader thread.
#[derive(Debug)]
pub struct StatsConsumer {
    range: TimeRange,
    stats: StatsSnapshot,
}

impl StatsConsumer {
    /// Statistics of the events of `range`.
    pub fn new(range: TimeRange) -> Self {
        Self {
            range,
            stats: StatsSnapshot::default(),
        }
    }
}

impl Consumer for StatsConsumer {
    type Snapshot = StatsSnapshot;

    fn consume(&mut self, events: &[StoredEvent]) {
        let s = &mut self.stats;
        for e in events {
            *s.producer_count.entry(e.producer).or_default() += 1;
            *s.type_count.entry(e.type_id).or_default() += 1;
            match e.kind {
                EventKind::State { end, .. } => {
                    *s.state_ns.entry(e.type_id).or_default() += self.range.overlap(e.ts, end);
                }
                EventKind::Link { end, .. } => {
                    *s.link_ns.entry(e.type_id).or_default() += (end - e.ts).max(0);
                }
                _ => {}
            }
        }
    }

    fn snapshot(&self) -> StatsSnapshot {
        self.stats.clone()
    }
}

/// A user-defined group of entities shown as one slice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PieGroup {
    /// Its name.
    pub name: String,
    /// Its colour.
    pub colour: [u8; 3],
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
    /// Entities left out of the computation.
    pub excluded: BTreeSet<u32>,
    /// User groups.
    pub groups: Vec<PieGroup>,
    /// Slices below this share go to "others".
    pub threshold: f64,
}

impl Default for PieSettings {
    fn default() -> Self {
        Self {
            operator: Operator::TypeInstances,
            excluded: BTreeSet::new(),
            groups: Vec::new(),
            threshold: 0.01,
        }
    }
}

impl PieSettings {
    /// Slices, largest first, "others" last.
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
            if v / total < self.threshold && matches!(k, SliceKind::Entity(_)) {
                if let SliceKind::Entity(id) = k {
                    others.push((id, v));
                }
                others_v += v;
            } else {
                out.push(Slice {
                    kind: k,
                    value: v,
                    share: v / total,
                });
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

    /// Leaves `id` out of the computation.
    pub fn exclude(&mut self, id: u32) {
        self.excluded.insert(id);
    }

    /// Brings `id` back.
    pub fn restore(&mut self, id: u32) {
        self.excluded.remove(&id);
    }

    /// Merges `members` into a new group (taking them out of any other group); needs two or more.
    pub fn group(&mut self, name: &str, colour: [u8; 3], members: BTreeSet<u32>) -> bool {
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
        if op.by_producer() != self.operator.by_producer() {
            self.excluded.clear();
            self.groups.clear();
        }
        self.operator = op;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use socscope_tracedb::Event;

    fn stats() -> StatsSnapshot {
        let mut c = StatsConsumer::new(TimeRange::new(0, 100));
        let mut evs = vec![
            StoredEvent {
                id: 1,
                event: Event::state(-50, 50, 0, 1, 10, None),
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
            s.values(Operator::StateDuration),
            BTreeMap::from([(1, 50.0), (2, 50.0)])
        );
        assert_eq!(
            s.values(Operator::LinkDuration),
            BTreeMap::from([(3, 30.0)])
        );
        assert_eq!(s.values(Operator::TypeInstances)[&4], 96.0);
        assert_eq!(
            s.values(Operator::ProducerInstances),
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
        p.set_operator(Operator::ProducerInstances);
        assert!(p.groups.is_empty() && p.excluded.is_empty());
    }
}
