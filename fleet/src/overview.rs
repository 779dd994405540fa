//! `fleet overview`: Ocelotl's spatiotemporal aggregation over a fleet, with the boards as the producer
//! hierarchy (hardware → firmware version → board → CPU). The microscopic model is one SQL GROUP BY
//! (board, CPU, type, time slice) on the engine; the existing Ocelotl code aggregates it: which boards
//! behave alike over the night, and when they split.
//!
//! Time is each run's own, from its first event, so runs started at different hours line up; a board with
//! several selected runs adds them up.

use std::collections::BTreeMap;

use socscope_analysis::micro::{Metric, SliceGrid, TraceMicroscopicModel};
use socscope_tracedb::{EventCategory, EventType, Producer, ProducerKind, TimeRange};

use crate::error::{FleetError, Result};
use crate::query::Engine;
use crate::report::quote;

/// What the overview aggregates.
#[derive(Debug, Clone, PartialEq)]
pub struct OverviewOptions {
    /// A condition on the `traces` table choosing the runs; all when `None`.
    pub where_sql: Option<String>,
    /// Event count per type, or state time per state type.
    pub metric: Metric,
    /// Slices of the time axis.
    pub slices: usize,
    /// The trace tag naming the firmware version (the hierarchy's second level).
    pub firmware_tag: String,
}

impl Default for OverviewOptions {
    fn default() -> Self {
        Self {
            where_sql: None,
            metric: Metric::Count,
            slices: 100,
            firmware_tag: "agent_version".into(),
        }
    }
}

/// The SQL of the microscopic model (DataFusion's dialect).
pub fn model_sql(options: &OverviewOptions) -> Result<String> {
    let sel = match &options.where_sql {
        Some(w) => format!("sel AS (SELECT * FROM traces WHERE ({w}))"),
        None => "sel AS (SELECT * FROM traces)".into(),
    };
    let n = options.slices.max(1);
    let tag = quote(&options.firmware_tag);
    let head = format!(
        "WITH {sel},
axis AS (SELECT max(t_max_ns + 1 - t_min_ns) AS len FROM sel),
runs AS (SELECT trace_id, t_min_ns AS lo, soc, coalesce(tags[{tag}], 'unknown') AS firmware FROM sel)"
    );
    Ok(match options.metric {
        Metric::Count => format!(
            "{head}
SELECT r.soc, r.firmware, e.board, e.cpu, CAST(e.type AS VARCHAR) AS type,
       ({n} * (e.ts_ns - r.lo + 1) - 1) / axis.len AS slice, CAST(count(*) AS DOUBLE) AS v
FROM events e JOIN runs r ON e.trace_id = r.trace_id CROSS JOIN axis
GROUP BY r.soc, r.firmware, e.board, e.cpu, e.type, slice"
        ),
        Metric::Duration => format!(
            "{head},
clipped AS (SELECT r.soc, r.firmware, e.board, e.cpu, e.type, r.lo, axis.len,
                   greatest(e.ts_ns, r.lo) AS a, least(e.ts_ns + e.duration_ns, r.lo + axis.len) AS b
            FROM events e JOIN runs r ON e.trace_id = r.trace_id CROSS JOIN axis
            WHERE e.category = 'state'),
cut AS (SELECT soc, firmware, board, cpu, type, lo, len, a, b,
               unnest(range(({n} * (a - lo + 1) - 1) / len, ({n} * (b - lo) - 1) / len + 1)) AS slice
        FROM clipped WHERE b > a)
SELECT soc, firmware, board, cpu, CAST(type AS VARCHAR) AS type, slice,
       CAST(sum(least(b, lo + len * (slice + 1) / {n}) - greatest(a, lo + len * slice / {n})) AS DOUBLE) AS v
FROM cut GROUP BY soc, firmware, board, cpu, type, slice"
        ),
        Metric::Mean => {
            return Err(FleetError::Query(
                "--metric mean is not offered for fleets: choose count or duration".into(),
            ));
        }
    })
}

/// The fleet's microscopic model, ready for the Ocelotl engine (and its PNG renderings).
pub fn model(engine: &Engine, options: &OverviewOptions) -> Result<TraceMicroscopicModel> {
    let n = options.slices.max(1);
    let len_rows = engine.rows(&format!(
        "SELECT max(t_max_ns + 1 - t_min_ns) AS len FROM traces{}",
        options
            .where_sql
            .as_ref()
            .map_or(String::new(), |w| format!(" WHERE ({w})"))
    ))?;
    let len = len_rows
        .rows
        .first()
        .and_then(|r| r[0].as_i64())
        .ok_or_else(|| FleetError::Query("no trace is selected: nothing to aggregate".into()))?
        .max(n as i64);
    let rows = engine.rows(&model_sql(options)?)?;
    let (c_soc, c_fw, c_board, c_cpu, c_type, c_slice, c_v) = (
        rows.col("soc")?,
        rows.col("firmware")?,
        rows.col("board")?,
        rows.col("cpu")?,
        rows.col("type")?,
        rows.col("slice")?,
        rows.col("v")?,
    );
    let s = |v: &serde_json::Value| v.as_str().map_or_else(|| v.to_string(), str::to_owned);
    // The tree: soc → firmware → board → CPU, each level sorted by name.
    type Leaf = (String, String, String, Option<i64>);
    let mut cells: BTreeMap<(Leaf, String), Vec<f64>> = BTreeMap::new();
    for r in &rows.rows {
        let leaf = (s(&r[c_soc]), s(&r[c_fw]), s(&r[c_board]), r[c_cpu].as_i64());
        let slice = r[c_slice].as_u64().unwrap_or(u64::MAX) as usize;
        if slice >= n {
            return Err(FleetError::Query(format!("slice {slice} out of 0..{n}")));
        }
        let v = r[c_v].as_f64().unwrap_or(0.0);
        cells
            .entry((leaf, s(&r[c_type])))
            .or_insert_with(|| vec![0.0; n])[slice] += v;
    }
    if cells.is_empty() {
        return Err(FleetError::Query(format!(
            "nothing to aggregate: the selected runs have no {}",
            if options.metric == Metric::Duration {
                "states"
            } else {
                "events"
            }
        )));
    }
    let mut leaves: Vec<Leaf> = cells.keys().map(|(l, _)| l.clone()).collect();
    leaves.dedup();
    let mut type_names: Vec<String> = cells.keys().map(|(_, t)| t.clone()).collect();
    type_names.sort();
    type_names.dedup();
    // Producers numbered depth first, so that "siblings by id" is the order of the sorted leaves.
    let mut all: Vec<Producer> = Vec::new();
    let mut leaf_producers: Vec<Producer> = Vec::new();
    let mut last: (Option<u32>, Option<u32>, Option<u32>) = (None, None, None);
    let mut prev: Option<&Leaf> = None;
    let mut next_id = 1u32;
    let mut add = |all: &mut Vec<Producer>, parent, kind, name: String| {
        let id = next_id;
        next_id += 1;
        all.push(Producer {
            id,
            parent,
            kind,
            local_id: i64::from(id),
            name,
        });
        id
    };
    for leaf in &leaves {
        let (soc, fw, board, cpu) = leaf;
        let new_soc = prev.is_none_or(|p| p.0 != *soc);
        let new_fw = new_soc || prev.is_none_or(|p| p.1 != *fw);
        let new_board = new_fw || prev.is_none_or(|p| p.2 != *board);
        if new_soc {
            last.0 = Some(add(&mut all, None, ProducerKind::Other, soc.clone()));
        }
        if new_fw {
            last.1 = Some(add(&mut all, last.0, ProducerKind::Other, fw.clone()));
        }
        if new_board {
            last.2 = Some(add(&mut all, last.1, ProducerKind::Other, board.clone()));
        }
        let name = match cpu {
            Some(c) => format!("{board} cpu{c}"),
            None => format!("{board} (no cpu)"),
        };
        let id = add(&mut all, last.2, ProducerKind::Cpu, name);
        if let Some(p) = all.last() {
            leaf_producers.push(p.clone());
        }
        debug_assert_eq!(leaf_producers.last().map(|p| p.id), Some(id));
        prev = Some(leaf);
    }
    let (np, nt) = (leaves.len(), type_names.len());
    let mut values = vec![0.0; n * np * nt];
    for ((leaf, ty), series) in &cells {
        let p = leaves.binary_search(leaf).unwrap_or(0);
        let u = type_names.binary_search(ty).unwrap_or(0);
        for (t, v) in series.iter().enumerate() {
            values[(t * np + p) * nt + u] = *v;
        }
    }
    let category = if options.metric == Metric::Duration {
        EventCategory::State
    } else {
        EventCategory::Punctual
    };
    let types: Vec<EventType> = type_names
        .into_iter()
        .enumerate()
        .map(|(i, name)| EventType {
            id: i as u32,
            name,
            category,
            params: Vec::new(),
        })
        .collect();
    let grid = SliceGrid::new(TimeRange::new(0, len), n)
        .ok_or_else(|| FleetError::Query("empty time axis".into()))?;
    TraceMicroscopicModel::from_parts(grid, options.metric, leaf_producers, types, all, values)
        .map_err(FleetError::Query)
}
