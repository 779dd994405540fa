//! An Ocelotl partition as a *processed trace* (RT-427 §3.1.3: "a trace produced after treating
//! another trace"): a new, ordinary trace file whose events are the partition's aggregated
//! intervals, flagged `processed`, and linked from the source trace by a `processed_trace` result.
//!
//! The processed trace has the source's producers (same ids, names and parents) and one state
//! type, [`PART_TYPE`]. Each part (temporal partition) or area (spatiotemporal partition) gives
//! one state per producer it covers, from the part's first slice start to its last slice end, with
//! the parameters:
//!
//! - `label` (string): `part 3`, `area 12` — the states of one part share it;
//! - `node` (string): the hierarchy node the area aggregates (`all` for a temporal part);
//! - `part_value` (float): the part's mean per slice and producer, all types (the value of its
//!   band);
//! - `value` (float): this producer's mean per slice in the part, all types;
//! - one float per type of the model, named after the type: this producer's mean per slice of
//!   that type in the part (`NAME #ID` where two types share a name).
//!
//! Opened in any view, the processed trace is a normal trace (a Gantt shows the parts as states);
//! [`partition_bands`] reads it back into the bands of its parts.
//!
//! Start here: [`write_partition_trace`], [`partition_bands`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use socscope_tracedb::{
    Event, EventCategory, EventType, Filter, ParamDef, ParamType, ParamValue, Producer, ProducerId,
    StoreError, StoredEvent, TraceHeader, TraceInfo, TraceReader, TraceWriter,
};

use crate::micro::TraceMicroscopicModel;
use crate::overview::Partition;
use crate::results::Band;

/// The name of the processed trace's state type.
pub const PART_TYPE: &str = "ocelotl part";

/// One aggregated interval: slices `first..=last` of the model over `producers` (model indices).
struct Cell {
    label: String,
    node: String,
    first: usize,
    last: usize,
    producers: Vec<usize>,
}

fn cells(model: &TraceMicroscopicModel, part: &Partition) -> Vec<Cell> {
    let slices = model.grid.slices;
    match part {
        Partition::Temporal(t) => t
            .ranges()
            .iter()
            .enumerate()
            .filter(|(_, (a, b))| a <= b && *b < slices)
            .map(|(i, &(a, b))| Cell {
                label: format!("part {}", i + 1),
                node: "all".into(),
                first: a,
                last: b,
                producers: (0..model.producers.len()).collect(),
            })
            .collect(),
        Partition::Spatiotemporal(s) => {
            let (h, nodes) = model.hierarchy();
            s.aggregates()
                .iter()
                .enumerate()
                .filter(|(_, a)| a.node < h.len() && a.start <= a.end && a.end < slices)
                .map(|(i, a)| {
                    let mut leaves = Vec::new();
                    let mut stack = vec![a.node];
                    while let Some(n) = stack.pop() {
                        if let Some(p) = h.leaf_producer(n) {
                            leaves.push(p);
                        }
                        stack.extend(h.children(n).iter().copied());
                    }
                    leaves.sort_unstable();
                    Cell {
                        label: format!("area {}", i + 1),
                        node: nodes
                            .get(a.node)
                            .map_or_else(|| format!("node {}", a.node), |n| n.name.clone()),
                        first: a.start,
                        last: a.end,
                        producers: leaves,
                    }
                })
                .collect()
        }
    }
}

/// The parameter names of the type columns: the type's name, `NAME #ID` where names repeat.
fn type_columns(model: &TraceMicroscopicModel) -> Vec<String> {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for t in &model.types {
        *seen.entry(t.name.as_str()).or_default() += 1;
    }
    model
        .types
        .iter()
        .map(|t| {
            if seen[t.name.as_str()] > 1
                || ["label", "node", "part_value", "value"].contains(&t.name.as_str())
            {
                format!("{} #{}", t.name, t.id)
            } else {
                t.name.clone()
            }
        })
        .collect()
}

/// The processed trace's events: one state per cell and producer, with its values.
pub fn partition_events(
    model: &TraceMicroscopicModel,
    part: &Partition,
) -> (EventType, Vec<Event>) {
    let mut params = vec![
        ParamDef::new("label", ParamType::String),
        ParamDef::new("node", ParamType::String),
        ParamDef::new("part_value", ParamType::Float),
        ParamDef::new("value", ParamType::Float),
    ];
    params.extend(
        type_columns(model)
            .into_iter()
            .map(|n| ParamDef::new(n, ParamType::Float)),
    );
    let ty = EventType {
        id: 1,
        name: PART_TYPE.into(),
        category: EventCategory::State,
        params,
    };
    let types = model.types.len();
    let mut events = Vec::new();
    for c in cells(model, part) {
        let n = (c.last + 1 - c.first) as f64;
        let (start, end) = (model.grid.edge(c.first), model.grid.edge(c.last + 1));
        // Per producer and type: the mean per slice.
        let per: Vec<Vec<f64>> = c
            .producers
            .iter()
            .map(|&p| {
                (0..types)
                    .map(|u| {
                        (c.first..=c.last)
                            .map(|t| model.value(t, p, u))
                            .sum::<f64>()
                            / n
                    })
                    .collect()
            })
            .collect();
        let part_value = per.iter().flatten().sum::<f64>() / c.producers.len().max(1) as f64;
        for (k, &p) in c.producers.iter().enumerate() {
            let mut values = vec![
                ParamValue::String(c.label.clone()),
                ParamValue::String(c.node.clone()),
                ParamValue::Float(part_value),
                ParamValue::Float(per[k].iter().sum()),
            ];
            values.extend(per[k].iter().map(|v| ParamValue::Float(*v)));
            events.push(
                Event::state(start, end, 0, 1, model.producers[p].id, None).with_params(values),
            );
        }
    }
    (ty, events)
}

/// A free file name beside `source` for a processed trace: `STEM.ocelotl-N.db`.
pub fn processed_path(source: &Path) -> PathBuf {
    let dir = source.parent().unwrap_or(Path::new("."));
    let stem = source
        .file_stem()
        .map_or_else(|| "trace".into(), |s| s.to_string_lossy().into_owned());
    (1..)
        .map(|n| dir.join(format!("{stem}.ocelotl-{n}.db")))
        .find(|p| !p.exists())
        .expect("an unused name")
}

/// Writes the partition `part` of `model` (read from `source`) as a processed trace at `path`
/// (which must not exist), with `description`. Returns what was written.
pub fn write_partition_trace(
    source: &TraceReader,
    model: &TraceMicroscopicModel,
    part: &Partition,
    path: &Path,
    description: &str,
) -> Result<TraceInfo, StoreError> {
    let info = source.info()?;
    let meta = TraceHeader {
        description: description.to_owned(),
        processed: true,
        ..info.meta
    };
    let producers: Vec<Producer> = source.producers()?;
    let (ty, events) = partition_events(model, part);
    let mut w = TraceWriter::create(path, &meta)?;
    // Parents first: a producer's parent is known when it is added.
    let mut added: BTreeSet<ProducerId> = BTreeSet::new();
    let mut pending: Vec<&Producer> = producers.iter().collect();
    while !pending.is_empty() {
        let before = pending.len();
        let mut rest = Vec::new();
        for p in pending {
            if p.parent
                .is_none_or(|q| added.contains(&q) || !producers.iter().any(|x| x.id == q))
            {
                w.add_producer(p)?;
                added.insert(p.id);
            } else {
                rest.push(p);
            }
        }
        if rest.len() == before {
            // A cycle of parents: add them as they are (the store does not forbid it).
            for p in &rest {
                w.add_producer(p)?;
            }
            break;
        }
        pending = rest;
    }
    w.add_event_type(&ty)?;
    for e in &events {
        w.push(e)?;
    }
    w.finish(true)
}

/// Writes the partition as a processed trace beside `source_path` ([`processed_path`]), registers
/// it in the directory's catalog when there is one (`processed` = 1), and links it from the source
/// by a `processed_trace` result of `tool_name`. Returns the new file and the result's id.
pub fn save_partition_trace(
    source_path: &Path,
    model: &TraceMicroscopicModel,
    part: &Partition,
    tool_name: &str,
    date_unix_ns: i64,
    description: &str,
) -> Result<(PathBuf, i64), StoreError> {
    let out = processed_path(source_path);
    {
        let source = TraceReader::open(source_path)?;
        let what = format!(
            "{description} (processed from {})",
            source_path
                .file_name()
                .map_or_else(String::new, |f| f.to_string_lossy().into_owned())
        );
        write_partition_trace(&source, model, part, &out, &what)?;
    }
    let file_name = out
        .file_name()
        .map_or_else(String::new, |f| f.to_string_lossy().into_owned());
    let dir = source_path.parent().unwrap_or(Path::new("."));
    if dir.join(socscope_tracedb::CATALOG_FILE).exists() {
        socscope_tracedb::Catalog::open(dir)?.register_file(&file_name)?;
    }
    let header = socscope_tracedb::AnalysisResult {
        id: 0,
        tool_id: None,
        tool_name: tool_name.to_owned(),
        kind: socscope_tracedb::AnalysisKind::ProcessedTrace,
        date_unix_ns,
        description: description.to_owned(),
    };
    let id = socscope_tracedb::ResultStore::open(source_path)?.save(
        &header,
        &socscope_tracedb::AnalysisData::ProcessedTrace {
            trace_db: file_name,
        },
    )?;
    Ok((out, id))
}

/// Where the processed trace `trace_db` of a result of `source_path` is: relative names are
/// relative to the source's directory (the catalog's).
pub fn resolve(source_path: &Path, trace_db: &str) -> PathBuf {
    let p = Path::new(trace_db);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        source_path.parent().unwrap_or(Path::new(".")).join(p)
    }
}

/// The bands of a processed trace written by [`write_partition_trace`]: one per part or area
/// (its interval, the producers of its states, its `part_value`). An error when the trace has no
/// [`PART_TYPE`] states.
pub fn partition_bands(processed: &TraceReader) -> Result<Vec<Band>, StoreError> {
    let not_ours = || StoreError::InvalidValue {
        path: processed.path().to_path_buf(),
        detail: format!("no {PART_TYPE:?} state type: not an Ocelotl processed trace"),
    };
    let ty = processed
        .event_type_by_name(PART_TYPE)?
        .ok_or_else(not_ours)?;
    let at = |name: &str| ty.params.iter().position(|p| p.name == name);
    let (Some(label_at), Some(value_at)) = (at("label"), at("part_value")) else {
        return Err(not_ours());
    };
    let names: BTreeMap<ProducerId, String> = processed
        .producers()?
        .into_iter()
        .map(|p| (p.id, p.name))
        .collect();
    let info = processed.info()?;
    let filter = Filter {
        types: Some(vec![ty.id]),
        ..Filter::default()
    };
    let mut parts: BTreeMap<String, Band> = BTreeMap::new();
    let mut it = processed.events_overlapping(info.range(), &filter)?;
    let mut e = StoredEvent::default();
    while it.next_into(&mut e)? {
        let label = match e.params.get(label_at) {
            Some(ParamValue::String(s)) => s.clone(),
            _ => continue,
        };
        let value = e
            .params
            .get(value_at)
            .and_then(ParamValue::as_f64)
            .unwrap_or(0.0);
        let b = parts.entry(label.clone()).or_insert_with(|| Band {
            start: e.ts,
            end: e.end(),
            label,
            producers: Vec::new(),
            who: String::new(),
            value,
        });
        b.start = b.start.min(e.ts);
        b.end = b.end.max(e.end());
        if !b.producers.contains(&e.producer) {
            b.producers.push(e.producer);
        }
    }
    let mut out: Vec<Band> = parts.into_values().collect();
    for b in &mut out {
        b.producers.sort_unstable();
        b.who = b
            .producers
            .iter()
            .map(|id| format!("{} #{id}", names.get(id).map_or("?", String::as_str)))
            .collect::<Vec<_>>()
            .join(", ");
    }
    out.sort_by(|a, b| (a.start, a.end, &a.label).cmp(&(b.start, b.end, &b.label)));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::micro::{self, Metric, SliceGrid};
    use crate::ocelotl::{SpatiotemporalAggregation, TemporalAggregation};
    use crate::testutil::{self, Spec};

    fn model(path: &Path) -> TraceMicroscopicModel {
        let r = TraceReader::open(path).unwrap();
        let grid = SliceGrid::new(r.info().unwrap().range(), 40).unwrap();
        micro::build(&r, grid, Metric::Count, &Filter::default()).unwrap()
    }

    fn close(a: &[Band], b: &[Band]) {
        assert_eq!(a.len(), b.len());
        let mut b = b.to_vec();
        b.sort_by(|x, y| (x.start, x.end, &x.label).cmp(&(y.start, y.end, &y.label)));
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(
                (x.start, x.end, &x.label, &x.producers, &x.who),
                (y.start, y.end, &y.label, &y.producers, &y.who)
            );
            assert!(
                (x.value - y.value).abs() <= 1e-9 * x.value.abs().max(1.0),
                "{x:?} {y:?}"
            );
        }
    }

    #[test]
    fn a_partition_round_trips_through_a_processed_trace() {
        let (dir, path) = testutil::write_spec(&Spec::small());
        let m = model(&path);
        let mm = m.to_model().unwrap();
        let source = TraceReader::open(&path).unwrap();
        // Temporal: one state per part and producer; the bands read back equal the saved ones.
        let tp = TemporalAggregation::new(&mm, false).best_partition(0.3);
        let part = Partition::Temporal(tp.clone());
        let out = processed_path(&path);
        assert_eq!(out.parent(), path.parent());
        let info = write_partition_trace(&source, &m, &part, &out, "test").unwrap();
        assert!(info.meta.processed && info.complete);
        assert_eq!(info.event_count as usize, tp.n_parts() * m.producers.len());
        let r = TraceReader::open(&out).unwrap();
        assert_eq!(r.producers().unwrap(), source.producers().unwrap());
        close(
            &partition_bands(&r).unwrap(),
            &crate::results::partition_bands(&m, &part),
        );
        // Each state's type columns are its producer's means per slice, and sum to its value.
        let ty = r.event_type_by_name(PART_TYPE).unwrap().unwrap();
        assert_eq!(ty.params.len(), 4 + m.types.len());
        let mut it = r
            .events_overlapping(r.info().unwrap().range(), &Filter::default())
            .unwrap();
        let mut e = StoredEvent::default();
        let mut n = 0;
        while it.next_into(&mut e).unwrap() {
            let f: Vec<f64> = e.params[3..].iter().map(|v| v.as_f64().unwrap()).collect();
            let sum: f64 = f[1..].iter().sum();
            assert!((sum - f[0]).abs() <= 1e-9 * f[0].abs().max(1.0));
            n += 1;
        }
        assert_eq!(n, info.event_count);
        // A second save takes the next free name.
        assert_ne!(processed_path(&path), out);
        // Spatiotemporal: the areas' producers are the leaves under their nodes.
        let (h, _) = m.hierarchy();
        let sp = SpatiotemporalAggregation::new(&mm, &h).best_partition(0.5);
        let part = Partition::Spatiotemporal(sp);
        let out2 = processed_path(&path);
        write_partition_trace(&source, &m, &part, &out2, "test").unwrap();
        close(
            &partition_bands(&TraceReader::open(&out2).unwrap()).unwrap(),
            &crate::results::partition_bands(&m, &part),
        );
        // Saved and linked from the source, as the GUI and `aggregate --save-processed` do.
        let (file, id) =
            save_partition_trace(&path, &m, &part, "socscope view", 7, "areas").unwrap();
        let data = TraceReader::open(&path)
            .unwrap()
            .analysis_data(id)
            .unwrap()
            .unwrap();
        let socscope_tracedb::AnalysisData::ProcessedTrace { trace_db } = data else {
            panic!("{data:?}")
        };
        assert_eq!(resolve(&path, &trace_db), file);
        assert_eq!(
            TraceReader::open(&file)
                .unwrap()
                .info()
                .unwrap()
                .meta
                .description,
            format!(
                "areas (processed from {})",
                path.file_name().unwrap().to_string_lossy()
            )
        );
        // The source is no processed trace.
        assert!(matches!(
            partition_bands(&source),
            Err(StoreError::InvalidValue { .. })
        ));
        drop(dir);
    }
}
