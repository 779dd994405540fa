//! Statistics of an interval (Framesoc RT-460 §3.3): event count per producer or per type,
//! state duration per type, link duration per type; filters on types, producers and the
//! interval; excluded entities; user groups with a name and a colour; the small values merged
//! into one "others" slice; progressive snapshots through the [loader](crate::loader).
//!
//! Start here: [`StatisticsConfig`], [`StatisticsConsumer`] (feed it to
//! [`loader::spawn`](crate::loader::spawn) with [`StatisticsConsumer::request`]) and
//! [`StatisticsSnapshot`], or [`statistics`] for a synchronous run.

use std::collections::HashMap;
use std::path::Path;
use std::str::FromStr;

use serde::Serialize;
use socscope_tracedb::{
    EventCategory, EventKind, Filter, Result, StoredEvent, TimeRange, TraceReader,
};

use crate::loader::{Consumer, LoadRequest, chunk_size};
use crate::palette::{self, Rgb};

/// What is measured, and per what.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
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
}

impl Operator {
    /// Whether slices are producers (else event types).
    pub fn per_producer(self) -> bool {
        self == Operator::CountPerProducer
    }

    /// The unit of the values.
    pub fn unit(self) -> &'static str {
        match self {
            Operator::CountPerProducer | Operator::CountPerType => "events",
            _ => "ns",
        }
    }

    /// The category the operator reads (`None`: all).
    pub fn category(self) -> Option<EventCategory> {
        match self {
            Operator::StateDurationPerType => Some(EventCategory::State),
            Operator::LinkDurationPerType => Some(EventCategory::Link),
            _ => None,
        }
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
            _ => Err(format!(
                "unknown operator {s:?}: expected count-per-producer, count-per-type, \
                 state-duration-per-type or link-duration-per-type"
            )),
        }
    }
}

/// Entities shown as one slice.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Group {
    /// The slice label.
    pub name: String,
    /// Its colour; the palette colour of the name when `None`.
    pub colour: Option<Rgb>,
    /// Producer or type ids (as the operator counts them).
    pub members: Vec<u32>,
}

/// What to compute.
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

/// One slice of the pie or bar chart.
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

/// The statistics so far, slices by decreasing value (`others` last).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatisticsSnapshot {
    pub operator: Operator,
    /// `events` or `ns`.
    pub unit: &'static str,
    pub slices: Vec<StatSlice>,
    /// Sum of every slice.
    pub total: f64,
}

/// Accumulates statistics chunk after chunk.
#[derive(Debug, Clone)]
pub struct StatisticsConsumer {
    config: StatisticsConfig,
    names: HashMap<u32, String>,
    values: HashMap<u32, f64>,
}

impl StatisticsConsumer {
    /// A consumer; `names` labels the ids (producer names for
    /// [`Operator::CountPerProducer`], else type names).
    pub fn new(config: StatisticsConfig, names: HashMap<u32, String>) -> Self {
        Self {
            config,
            names,
            values: HashMap::new(),
        }
    }

    /// A consumer labelled with the trace's names.
    pub fn for_trace(reader: &TraceReader, config: StatisticsConfig) -> Result<Self> {
        let names = if config.operator.per_producer() {
            reader
                .producers()?
                .into_iter()
                .map(|p| (p.id, p.name))
                .collect()
        } else {
            reader
                .event_types()?
                .into_iter()
                .map(|t| (t.id, t.name))
                .collect()
        };
        Ok(Self::new(config, names))
    }

    /// `filter` narrowed to what the operator reads.
    pub fn filter(&self, filter: &Filter) -> Filter {
        let mut f = filter.clone();
        if let Some(c) = self.config.operator.category() {
            f.categories = Some(match &filter.categories {
                Some(cs) if cs.contains(&c) => vec![c],
                Some(_) => Vec::new(),
                None => vec![c],
            });
        }
        f
    }

    /// The load request for this consumer (RT-460's 100 k events per chunk).
    pub fn request(&self, trace: &Path, filter: &Filter) -> LoadRequest {
        LoadRequest {
            trace: trace.to_path_buf(),
            range: self.config.range,
            filter: self.filter(filter),
            chunk_events: chunk_size::STATISTICS,
        }
    }

    fn add(&mut self, e: &StoredEvent) {
        let r = self.config.range;
        let (key, v) = match (self.config.operator, e.kind) {
            (Operator::CountPerProducer, _) if r.contains(e.ts) => (e.producer, 1.0),
            (Operator::CountPerType, _) if r.contains(e.ts) => (e.type_id, 1.0),
            (Operator::StateDurationPerType, EventKind::State { end, .. }) => {
                (e.type_id, r.overlap(e.ts, end) as f64)
            }
            (Operator::LinkDurationPerType, EventKind::Link { end, .. }) if r.contains(e.ts) => {
                (e.type_id, (end - e.ts) as f64)
            }
            _ => return,
        };
        *self.values.entry(key).or_insert(0.0) += v;
    }
}

impl Consumer for StatisticsConsumer {
    type Snapshot = StatisticsSnapshot;

    fn consume(&mut self, events: &[StoredEvent]) {
        for e in events {
            self.add(e);
        }
    }

    fn snapshot(&self) -> StatisticsSnapshot {
        let c = &self.config;
        let name = |id: u32| {
            self.names.get(&id).cloned().unwrap_or_else(|| {
                if c.operator.per_producer() {
                    format!("producer {id}")
                } else {
                    format!("type {id}")
                }
            })
        };
        let mut grouped: Vec<StatSlice> = c
            .groups
            .iter()
            .map(|g| StatSlice {
                label: g.name.clone(),
                value: 0.0,
                colour_key: g.name.clone(),
                colour: g.colour.unwrap_or_else(|| palette::colour(&g.name)),
                members: Vec::new(),
            })
            .collect();
        let mut singles = Vec::new();
        let mut ids: Vec<(&u32, &f64)> = self.values.iter().collect();
        ids.sort_by_key(|(id, _)| **id);
        for (&id, &v) in ids {
            if c.exclude.contains(&id) {
                continue;
            }
            match c.groups.iter().position(|g| g.members.contains(&id)) {
                Some(g) => {
                    grouped[g].value += v;
                    grouped[g].members.push(id);
                }
                None => {
                    let n = name(id);
                    singles.push(StatSlice {
                        label: n.clone(),
                        value: v,
                        colour: palette::colour(&n),
                        colour_key: n,
                        members: vec![id],
                    });
                }
            }
        }
        let mut slices: Vec<StatSlice> = grouped
            .into_iter()
            .filter(|g| !g.members.is_empty())
            .chain(singles)
            .collect();
        let total: f64 = slices.iter().map(|s| s.value).sum();
        let by_value = |a: &StatSlice, b: &StatSlice| {
            b.value
                .total_cmp(&a.value)
                .then_with(|| a.label.cmp(&b.label))
        };
        slices.sort_by(by_value);
        if c.threshold > 0.0 && total > 0.0 {
            let (big, small): (Vec<_>, Vec<_>) = slices
                .into_iter()
                .partition(|s| s.value >= c.threshold * total);
            slices = big;
            if small.len() == 1 {
                slices.extend(small);
            } else if !small.is_empty() {
                let mut members: Vec<u32> = small.iter().flat_map(|s| s.members.clone()).collect();
                members.sort_unstable();
                slices.push(StatSlice {
                    label: "others".into(),
                    value: small.iter().map(|s| s.value).sum(),
                    colour_key: "others".into(),
                    colour: palette::OTHERS,
                    members,
                });
            }
        }
        StatisticsSnapshot {
            operator: c.operator,
            unit: c.operator.unit(),
            slices,
            total,
        }
    }
}

/// The statistics of `config` for the events `filter` selects, computed at once.
pub fn statistics(
    reader: &TraceReader,
    config: StatisticsConfig,
    filter: &Filter,
) -> Result<StatisticsSnapshot> {
    let mut c = StatisticsConsumer::for_trace(reader, config)?;
    let f = c.filter(filter);
    let mut batch = Vec::with_capacity(4096);
    for e in reader.events_overlapping(c.config.range, &f)? {
        batch.push(e?);
        if batch.len() == 4096 {
            c.consume(&batch);
            batch.clear();
        }
    }
    c.consume(&batch);
    Ok(c.snapshot())
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
        let c = StatisticsConsumer::for_trace(&reader, config).unwrap();
        let mut req = c.request(&path, &Filter::all());
        req.chunk_events = 1;
        let (snap, progress) = loader::spawn(req, c).wait();
        assert!(progress.chunks > 1, "{progress:?}");
        assert_eq!(snap.unwrap(), want);
    }
}
