//! Saved analysis results (RT-427 §3.1.3): what the views and the commands keep in the trace they are
//! about, as the store's five kinds, and how a saved result is applied again.
//!
//! - the statistics pie's groups and the TraceViz actor groups: a *grouping* (a root group naming what
//!   was grouped, one child group per user group);
//! - an Ocelotl partition at a p and `compare`'s departing windows: *annotations* of one type whose
//!   parameters are `start_ns`, `end_ns` (trace time), `producers` (ids, comma-separated), `who`
//!   (their names) and `value`; any annotation with `start_ns` and `end_ns` is drawn as a [`Band`];
//! - the event table's filter: a *search* of events, its command a JSON object with the interval and
//!   the column expressions, its ids the events it found.
//!
//! Pure conversions, no store access: the caller saves and loads through
//! [`socscope_tracedb::ResultStore`].
//!
//! Start here: [`Band`], [`interval_annotations`], [`bands`], [`pie_grouping`], [`table_search`].

use std::collections::BTreeSet;

use serde_json::json;
use socscope_tracedb::{
    AnalysisData, Annotation, AnnotationType, EventId, Group, ParamDef, ParamType, ParamValue,
    ProducerId, TargetEntity, TimeRange, Timestamp,
};

use crate::compare::Comparison;
use crate::micro::TraceMicroscopicModel;
use crate::overview::Partition;
use crate::palette::{self, Rgb};
use crate::stats::{Operator, PieGroup};
use crate::table::{Column, ColumnFilters};
use crate::traceviz::GroupOp;

/// Tool name of the results the command line saves (`socscope aggregate`, ...) and the GUI saves
/// (`socscope view`).
pub fn tool_name(command: &str) -> String {
    format!("socscope {command}")
}

/// A marked interval of trace time, with the producers it concerns (none: all of them).
#[derive(Debug, Clone, PartialEq)]
pub struct Band {
    /// Start, trace ns.
    pub start: Timestamp,
    /// End (exclusive), trace ns.
    pub end: Timestamp,
    /// Short text (`part 3`, `departure 0.61`).
    pub label: String,
    /// The producers concerned.
    pub producers: Vec<ProducerId>,
    /// Their names, in the same order (for people: ids say which of two same-named producers).
    pub who: String,
    /// A value (the partition's mean rate, a departure's score).
    pub value: f64,
}

const INTERVAL_PARAMS: [(&str, ParamType); 5] = [
    ("start_ns", ParamType::Signed),
    ("end_ns", ParamType::Signed),
    ("producers", ParamType::String),
    ("who", ParamType::String),
    ("value", ParamType::Float),
];

/// Annotations of one type named `type_name`, one per band.
pub fn interval_annotations(type_name: &str, bands: &[Band]) -> AnalysisData {
    let types = vec![AnnotationType {
        id: 1,
        name: type_name.to_owned(),
        params: INTERVAL_PARAMS
            .iter()
            .map(|(n, t)| ParamDef::new(*n, *t))
            .collect(),
    }];
    let annotations = bands
        .iter()
        .enumerate()
        .map(|(i, b)| Annotation {
            id: i as i64 + 1,
            type_id: 1,
            name: b.label.clone(),
            values: vec![
                ParamValue::Signed(b.start),
                ParamValue::Signed(b.end),
                ParamValue::String(
                    b.producers
                        .iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(","),
                ),
                ParamValue::String(b.who.clone()),
                ParamValue::Float(b.value),
            ],
        })
        .collect();
    AnalysisData::Annotation { types, annotations }
}

/// The bands of a saved result: every annotation whose type has `start_ns` and `end_ns` (other
/// parameters optional, so annotations from other tools show too); nothing for other kinds.
pub fn bands(data: &AnalysisData) -> Vec<Band> {
    let AnalysisData::Annotation { types, annotations } = data else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for a in annotations {
        let Some(t) = types.iter().find(|t| t.id == a.type_id) else {
            continue;
        };
        let get = |name: &str| {
            t.params
                .iter()
                .position(|p| p.name == name)
                .and_then(|i| a.values.get(i))
        };
        let int = |name: &str| match get(name) {
            Some(ParamValue::Signed(v)) => Some(*v),
            Some(ParamValue::Unsigned(v)) => i64::try_from(*v).ok(),
            _ => None,
        };
        let (Some(start), Some(end)) = (int("start_ns"), int("end_ns")) else {
            continue;
        };
        let text = |name: &str| match get(name) {
            Some(ParamValue::String(s)) => s.clone(),
            _ => String::new(),
        };
        out.push(Band {
            start: start.min(end),
            end: end.max(start),
            label: a.name.clone(),
            producers: text("producers")
                .split(',')
                .filter_map(|s| s.trim().parse().ok())
                .collect(),
            who: text("who"),
            value: match get("value") {
                Some(ParamValue::Float(v)) => *v,
                Some(ParamValue::Signed(v)) => *v as f64,
                _ => 0.0,
            },
        });
    }
    out.sort_by_key(|b| (b.start, b.end));
    out
}

fn who(model: &TraceMicroscopicModel, producers: &[ProducerId]) -> String {
    producers
        .iter()
        .map(|id| {
            model
                .producers
                .iter()
                .find(|p| p.id == *id)
                .map_or_else(|| format!("#{id}"), |p| format!("{} #{id}", p.name))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Mean of the model's values over slices `a..=b` and producer indices `ps`, all types.
fn mean(model: &TraceMicroscopicModel, a: usize, b: usize, ps: &[usize]) -> f64 {
    let mut sum = 0.0;
    for t in a..=b {
        for &p in ps {
            for u in 0..model.types.len() {
                sum += model.value(t, p, u);
            }
        }
    }
    let n = ((b + 1 - a) * ps.len().max(1)) as f64;
    sum / n
}

/// The parts of a temporal partition (inclusive slice ranges) as bands over every producer of the
/// model; the value is the mean per slice and producer.
pub fn temporal_partition_bands(
    model: &TraceMicroscopicModel,
    ranges: &[(usize, usize)],
) -> Vec<Band> {
    let ids: Vec<ProducerId> = model.producers.iter().map(|p| p.id).collect();
    let all: Vec<usize> = (0..ids.len()).collect();
    ranges
        .iter()
        .enumerate()
        .filter(|(_, (a, b))| a <= b && *b < model.grid.slices)
        .map(|(i, &(a, b))| Band {
            start: model.grid.edge(a),
            end: model.grid.edge(b + 1),
            label: format!("part {}", i + 1),
            producers: ids.clone(),
            who: who(model, &ids),
            value: mean(model, a, b, &all),
        })
        .collect()
}

/// The areas of a spatiotemporal partition (`[node, first slice, last slice]`, nodes of
/// [`TraceMicroscopicModel::hierarchy`]) as bands over the producers under their node.
pub fn spatiotemporal_partition_bands(
    model: &TraceMicroscopicModel,
    aggregates: &[[usize; 3]],
) -> Vec<Band> {
    let (h, _) = model.hierarchy();
    let leaves = |node: usize| -> Vec<usize> {
        let mut out = Vec::new();
        let mut stack = vec![node];
        while let Some(n) = stack.pop() {
            if let Some(p) = h.leaf_producer(n) {
                out.push(p);
            }
            stack.extend(h.children(n).iter().copied());
        }
        out.sort_unstable();
        out
    };
    aggregates
        .iter()
        .enumerate()
        .filter(|(_, [n, a, b])| *n < h.len() && a <= b && *b < model.grid.slices)
        .map(|(i, &[node, a, b])| {
            let ps = leaves(node);
            let ids: Vec<ProducerId> = ps.iter().map(|&p| model.producers[p].id).collect();
            Band {
                start: model.grid.edge(a),
                end: model.grid.edge(b + 1),
                label: format!("area {}", i + 1),
                who: who(model, &ids),
                producers: ids,
                value: mean(model, a, b, &ps),
            }
        })
        .collect()
}

/// The departing windows of a comparison as bands on the run, whose first event is at
/// `run_start`; `producer_ids` gives the run's producers of a name (every one of them: a
/// comparison keys producers by name).
pub fn departure_bands(
    c: &Comparison,
    run_start: Timestamp,
    producer_ids: impl Fn(&str) -> Vec<ProducerId>,
) -> Vec<Band> {
    c.windows
        .iter()
        .filter(|w| w.departure)
        .map(|w| {
            let mut producers = Vec::new();
            let mut names = Vec::new();
            for d in &w.producers {
                producers.extend(producer_ids(&d.name));
                names.push(format!("{} {:+.2}", d.name, d.delta));
            }
            Band {
                start: run_start + (w.start_s * 1e9).round() as i64,
                end: run_start + (w.end_s * 1e9).round() as i64,
                label: format!("departure {:.2}", w.score),
                producers,
                who: names.join(", "),
                value: w.score,
            }
        })
        .collect()
}

fn op_name(op: GroupOp) -> &'static str {
    match op {
        GroupOp::Max => "max",
        GroupOp::Min => "min",
        GroupOp::Average => "average",
        GroupOp::Median => "median",
    }
}

/// A grouping: a root group named `what` over `target`, one child per `(name, members)`.
fn grouping(what: &str, target: TargetEntity, groups: Vec<(String, Vec<i64>)>) -> AnalysisData {
    let mut out = vec![Group {
        id: 0,
        parent: None,
        name: what.to_owned(),
        target,
        and: false,
        ordered: false,
        sequence: 0,
        members: Vec::new(),
    }];
    for (i, (name, members)) in groups.into_iter().enumerate() {
        out.push(Group {
            id: i as i64 + 1,
            parent: Some(0),
            name,
            target,
            and: false,
            ordered: false,
            sequence: i as i64,
            members,
        });
    }
    AnalysisData::Grouping { groups: out }
}

/// The pie's groups as a grouping (root `pie OPERATOR`, each group named `NAME #rrggbb`); `None`
/// for the syscall operators, whose slices are syscall names, not entities of the store.
pub fn pie_grouping(operator: Operator, groups: &[PieGroup]) -> Option<AnalysisData> {
    if operator.per_syscall() {
        return None;
    }
    let target = if operator.per_producer() {
        TargetEntity::Producer
    } else {
        TargetEntity::EventType
    };
    let op = serde_json::to_value(operator)
        .ok()?
        .as_str()
        .unwrap_or_default()
        .to_owned();
    Some(grouping(
        &format!("pie {op}"),
        target,
        groups
            .iter()
            .map(|g| {
                (
                    format!("{} {}", g.name, palette::hex(g.colour)),
                    g.members.iter().map(|&m| i64::from(m)).collect(),
                )
            })
            .collect(),
    ))
}

/// A grouping saved by the pie, by TraceViz or by another tool, as pie groups: the operator it
/// was saved with (when the root says), the groups with their colour (`NAME #rrggbb`, else a
/// palette colour). Groups of events or parameter types have no slice: `None`.
pub fn pie_groups(data: &AnalysisData) -> Option<(Option<Operator>, Vec<PieGroup>)> {
    let AnalysisData::Grouping { groups } = data else {
        return None;
    };
    let operator = groups
        .iter()
        .find(|g| g.parent.is_none())
        .and_then(|g| g.name.strip_prefix("pie "))
        .and_then(|op| op.parse::<Operator>().ok());
    let mut out = Vec::new();
    for g in groups.iter().filter(|g| !g.members.is_empty()) {
        if !matches!(g.target, TargetEntity::Producer | TargetEntity::EventType) {
            return None;
        }
        let (name, colour) = split_colour(&g.name);
        let name = name
            .rsplit_once(':')
            .filter(|(_, op)| op.parse::<GroupOp>().is_ok())
            .map_or(name, |(n, _)| n);
        out.push(PieGroup {
            name: name.to_owned(),
            colour: colour.unwrap_or_else(|| palette::colour(name)),
            members: g
                .members
                .iter()
                .filter_map(|&m| u32::try_from(m).ok())
                .collect::<BTreeSet<_>>(),
        });
    }
    let operator = operator.or_else(|| {
        let producers = groups.iter().any(|g| g.target == TargetEntity::Producer);
        Some(if producers {
            Operator::CountPerProducer
        } else {
            Operator::CountPerType
        })
    });
    Some((operator, out))
}

fn split_colour(name: &str) -> (&str, Option<Rgb>) {
    if let Some((n, hex)) = name.rsplit_once(' ')
        && let Some(c) = palette::parse_hex(hex)
    {
        return (n, Some(c));
    }
    (name, None)
}

/// TraceViz actor groups (`timeline --group`) as a grouping of producers (root `traceviz`, each
/// group named `NAME:OP`).
pub fn actor_grouping(groups: &[(String, GroupOp, Vec<ProducerId>)]) -> AnalysisData {
    grouping(
        "traceviz",
        TargetEntity::Producer,
        groups
            .iter()
            .map(|(n, op, m)| {
                (
                    format!("{n}:{}", op_name(*op)),
                    m.iter().map(|&x| i64::from(x)).collect(),
                )
            })
            .collect(),
    )
}

/// The TraceViz groups of a grouping saved by [`actor_grouping`] (root `traceviz`, each group
/// `NAME:OP`): name, operator and members; `None` for another grouping (the pie's, another tool's).
pub fn actor_groups(data: &AnalysisData) -> Option<Vec<(String, GroupOp, Vec<ProducerId>)>> {
    let AnalysisData::Grouping { groups } = data else {
        return None;
    };
    let root = groups.iter().find(|g| g.parent.is_none())?;
    if root.name != "traceviz" {
        return None;
    }
    let mut out = Vec::new();
    for g in groups.iter().filter(|g| g.parent == Some(root.id)) {
        if g.target != TargetEntity::Producer {
            return None;
        }
        let (name, op) = g
            .name
            .rsplit_once(':')
            .and_then(|(n, op)| Some((n, op.parse::<GroupOp>().ok()?)))
            .unwrap_or((g.name.as_str(), GroupOp::Max));
        out.push((
            name.to_owned(),
            op,
            g.members
                .iter()
                .filter_map(|&m| u32::try_from(m).ok())
                .collect(),
        ));
    }
    Some(out)
}

/// The parts (temporal) or areas (spatiotemporal) of an Ocelotl partition of `model` as bands.
pub fn partition_bands(model: &TraceMicroscopicModel, part: &Partition) -> Vec<Band> {
    match part {
        Partition::Temporal(t) => temporal_partition_bands(model, t.ranges()),
        Partition::Spatiotemporal(s) => {
            let areas: Vec<[usize; 3]> = s
                .aggregates()
                .iter()
                .map(|a| [a.node, a.start, a.end])
                .collect();
            spatiotemporal_partition_bands(model, &areas)
        }
    }
}

/// What the event table's filter was: the interval it ran on and its column expressions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSearch {
    /// The group's interval.
    pub interval: TimeRange,
    /// The expressions.
    pub filters: ColumnFilters,
}

/// The table's filter and the events it found as a search result.
pub fn table_search(search: &TableSearch, found: Vec<EventId>) -> AnalysisData {
    let columns: serde_json::Map<String, serde_json::Value> = Column::ALL
        .into_iter()
        .zip(&search.filters.patterns)
        .filter(|(_, p)| !p.trim().is_empty())
        .map(|(c, p)| (c.title().to_owned(), json!(p)))
        .collect();
    AnalysisData::Search {
        command: json!({
            "table_filter": columns,
            "interval_ns": [search.interval.start, search.interval.end],
        })
        .to_string(),
        target: TargetEntity::Event,
        ids: found,
    }
}

/// The table filter of a search saved by [`table_search`]; `None` for other searches.
pub fn parse_table_search(data: &AnalysisData) -> Option<TableSearch> {
    let AnalysisData::Search {
        command,
        target: TargetEntity::Event,
        ..
    } = data
    else {
        return None;
    };
    let v: serde_json::Value = serde_json::from_str(command).ok()?;
    let cols = v.get("table_filter")?.as_object()?;
    let mut filters = ColumnFilters::default();
    for (i, c) in Column::ALL.into_iter().enumerate() {
        if let Some(p) = cols.get(c.title()).and_then(|p| p.as_str()) {
            filters.patterns[i] = p.to_owned();
        }
    }
    let iv = v.get("interval_ns")?.as_array()?;
    let (a, b) = (iv.first()?.as_i64()?, iv.get(1)?.as_i64()?);
    Some(TableSearch {
        interval: TimeRange::new(a.min(b), a.max(b)),
        filters,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::{Difference, Window};

    fn band(start: i64, end: i64, producers: Vec<u32>) -> Band {
        Band {
            start,
            end,
            label: format!("b{start}"),
            producers,
            who: "x #1".into(),
            value: 0.5,
        }
    }

    #[test]
    fn bands_round_trip_through_annotations() {
        let bs = vec![band(10, 20, vec![1, 2]), band(-5, 0, vec![])];
        let data = interval_annotations("ocelotl part", &bs);
        let mut back = bands(&data);
        back.sort_by_key(|b| b.start);
        let mut want = bs.clone();
        want.sort_by_key(|b| b.start);
        assert_eq!(back, want);
        // Other kinds and annotations without an interval give no band.
        assert!(bands(&AnalysisData::ResultFiles { paths: vec![] }).is_empty());
        let other = AnalysisData::Annotation {
            types: vec![AnnotationType {
                id: 1,
                name: "memory".into(),
                params: vec![ParamDef::new("used", ParamType::Unsigned)],
            }],
            annotations: vec![Annotation {
                id: 1,
                type_id: 1,
                name: "cpu0".into(),
                values: vec![ParamValue::Unsigned(3)],
            }],
        };
        assert!(bands(&other).is_empty());
    }

    #[test]
    fn departures_land_on_the_run_time_axis() {
        let w = |a: f64, b: f64, score: f64| Window {
            start_s: a,
            end_s: b,
            slices: [0, 0],
            score,
            departure: score >= 0.25,
            producers: vec![Difference {
                name: "vdec".into(),
                reference: 0.1,
                run: 0.6,
                delta: 0.5,
            }],
            types: vec![],
        };
        let c = Comparison {
            reference_s: 10.0,
            run_s: 10.0,
            slice_s: 0.1,
            p: 0.5,
            threshold: 0.25,
            windows: vec![w(0.0, 1.0, 0.1), w(1.0, 1.5, 0.7)],
            departures: 1,
        };
        let bs = departure_bands(&c, 1_000, |n| if n == "vdec" { vec![4, 9] } else { vec![] });
        assert_eq!(bs.len(), 1);
        assert_eq!((bs[0].start, bs[0].end), (1_000_001_000, 1_500_001_000));
        assert_eq!(bs[0].producers, [4, 9]);
        assert_eq!(bs[0].who, "vdec +0.50");
        assert_eq!(bs[0].value, 0.7);
    }

    #[test]
    fn pie_groups_round_trip_with_colour_and_operator() {
        let groups = vec![
            PieGroup {
                name: "video".into(),
                colour: [0xd6, 0x27, 0x28],
                members: [3, 5].into(),
            },
            PieGroup {
                name: "a #b".into(),
                colour: [1, 2, 3],
                members: [7].into(),
            },
        ];
        let data = pie_grouping(Operator::CountPerProducer, &groups).unwrap();
        let AnalysisData::Grouping { groups: stored } = &data else {
            panic!("not a grouping")
        };
        assert_eq!(stored[0].name, "pie count-per-producer");
        assert_eq!(stored[1].name, "video #d62728");
        assert!(stored.iter().all(|g| g.target == TargetEntity::Producer));
        let (op, back) = pie_groups(&data).unwrap();
        assert_eq!(op, Some(Operator::CountPerProducer));
        assert_eq!(back, groups);
        assert!(pie_grouping(Operator::SyscallDuration, &groups).is_none());
        // TraceViz groups open in the pie as producer groups, their operator dropped.
        let tv = actor_grouping(&[("video".into(), GroupOp::Median, vec![3, 5])]);
        let (op, back) = pie_groups(&tv).unwrap();
        assert_eq!(op, Some(Operator::CountPerProducer));
        assert_eq!(back[0].name, "video");
        assert_eq!(back[0].members, [3, 5].into());
    }

    #[test]
    fn table_searches_round_trip() {
        let mut filters = ColumnFilters::default();
        filters.patterns[2] = "vdec|vsync".into();
        filters.patterns[6] = r#"end=\d+"#.into();
        let s = TableSearch {
            interval: TimeRange::new(5, 900),
            filters,
        };
        let data = table_search(&s, vec![1, 4, 9]);
        let AnalysisData::Search { ids, target, .. } = &data else {
            panic!("not a search")
        };
        assert_eq!(
            (ids.as_slice(), *target),
            (&[1, 4, 9][..], TargetEntity::Event)
        );
        assert_eq!(parse_table_search(&data), Some(s));
        let foreign = AnalysisData::Search {
            command: "grep irq".into(),
            target: TargetEntity::Event,
            ids: vec![],
        };
        assert_eq!(parse_table_search(&foreign), None);
    }
}
