//! `fleet report`: what a rig owner reads every morning, computed by SQL over the dataset: per board and
//! night, runs, events and losses; the state durations per type (p50/p99/max, nearest rank); the gaps of a
//! periodic event (vsync intervals beyond a bound); and, against a reference run, each run's departure
//! score from the `compare` engine (its state-time model built by one SQL GROUP BY).
//!
//! `scripts/fleet/spark_report.py` computes the same report on Spark from the same SQL (in Spark's
//! dialect); a test checks the two agree number for number.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use socscope_analysis::compare::{CompareOptions, StateTime, compare_state_time};

use crate::error::{FleetError, Result};
use crate::query::{Engine, Rows};

/// What the report covers and how.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportOptions {
    /// A condition on the `traces` table (with `board` and `date`) choosing the runs; all when `None`.
    pub where_sql: Option<String>,
    /// The trace id of the reference run; no departure section when `None`.
    pub reference: Option<String>,
    /// The periodic event: the states and punctual events whose producer or type has this name (a vsync
    /// IRQ's handler states, not the wake-ups it sends).
    pub periodic: String,
    /// An interval of the periodic event longer than this (ns) is a gap.
    pub gap_bound_ns: i64,
    /// The comparison's slices, threshold and p (as `socscope compare`).
    pub compare: CompareOptions,
}

impl Default for ReportOptions {
    fn default() -> Self {
        Self {
            where_sql: None,
            reference: None,
            periodic: "vsync".into(),
            gap_bound_ns: 25_000_000,
            compare: CompareOptions::default(),
        }
    }
}

/// One board's night.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Night {
    /// Board.
    pub board: String,
    /// `YYYY-MM-DD` (UTC day of the runs' starts).
    pub date: String,
    /// Runs (traces).
    pub runs: i64,
    /// Events.
    pub events: i64,
    /// Records lost.
    pub lost_records: i64,
    /// Loss records.
    pub loss_records: i64,
    /// Sum of the runs' durations, ns.
    pub duration_ns: i64,
}

/// State durations of one type on one board's night.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StateDurations {
    /// Board.
    pub board: String,
    /// Night.
    pub date: String,
    /// State type.
    #[serde(rename = "type")]
    pub type_name: String,
    /// States.
    pub states: i64,
    /// Median duration, ns (nearest rank).
    pub p50_ns: i64,
    /// 99th percentile, ns (nearest rank).
    pub p99_ns: i64,
    /// Longest, ns.
    pub max_ns: i64,
}

/// The periodic event's intervals on one board's night.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Gaps {
    /// Board.
    pub board: String,
    /// Night.
    pub date: String,
    /// Intervals between consecutive occurrences (within a run).
    pub intervals: i64,
    /// Intervals longer than the bound.
    pub beyond_bound: i64,
    /// The longest interval, ns.
    pub max_interval_ns: i64,
}

/// One run against the reference.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunScore {
    /// The run's trace id.
    pub trace_id: String,
    /// Board.
    pub board: String,
    /// Night.
    pub date: String,
    /// Windows of the comparison.
    pub windows: usize,
    /// Windows whose score reaches the threshold.
    pub departures: usize,
    /// The highest window score (0 to 1).
    pub max_score: f64,
}

/// The departure section.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Departures {
    /// The reference's trace id.
    pub reference: String,
    /// Slices of the common time axis.
    pub slices: usize,
    /// Threshold of a departure.
    pub threshold: f64,
    /// p of the temporal aggregation of the differences.
    pub p: f64,
    /// Every selected run but the reference, by trace id.
    pub runs: Vec<RunScore>,
}

/// The report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// The selection (`--where`), if any.
    #[serde(rename = "where")]
    pub where_sql: Option<String>,
    /// Per board and night.
    pub nights: Vec<Night>,
    /// State durations per board, night and type.
    pub states: Vec<StateDurations>,
    /// The periodic event's name and bound.
    pub periodic: String,
    /// The bound, ns.
    pub gap_bound_ns: i64,
    /// Its gaps per board and night.
    pub gaps: Vec<Gaps>,
    /// Runs against the reference.
    pub departures: Option<Departures>,
}

/// A SQL string literal.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// The selected runs: a CTE named `sel` over `traces`.
fn selection(options: &ReportOptions) -> String {
    match &options.where_sql {
        Some(w) => format!("sel AS (SELECT * FROM traces WHERE ({w}))"),
        None => "sel AS (SELECT * FROM traces)".into(),
    }
}

/// The SQL of each section (DataFusion's dialect), so that they can be shown and compared with Spark's.
pub fn nights_sql(options: &ReportOptions) -> String {
    format!(
        "WITH {sel}
SELECT board, date, count(*) AS runs, sum(events) AS events, sum(lost_records) AS lost_records,
       sum(loss_records) AS loss_records, sum(duration_ns) AS duration_ns
FROM sel GROUP BY board, date ORDER BY board, date",
        sel = selection(options)
    )
}

/// State duration quantiles by nearest rank, from the (duration, count) histogram of each type: the
/// memory it takes grows with distinct durations, not with states.
pub fn states_sql(options: &ReportOptions) -> String {
    format!(
        "WITH {sel},
hist AS (SELECT e.board, e.date, e.type, e.duration_ns AS d, count(*) AS n
         FROM events e JOIN sel s ON e.trace_id = s.trace_id
         WHERE e.category = 'state' GROUP BY e.board, e.date, e.type, e.duration_ns),
cum AS (SELECT board, date, type, d, n,
               sum(n) OVER (PARTITION BY board, date, type ORDER BY d ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS c,
               sum(n) OVER (PARTITION BY board, date, type) AS total
        FROM hist)
SELECT board, date, type, max(total) AS states,
       min(CASE WHEN c * 100 >= total * 50 THEN d END) AS p50_ns,
       min(CASE WHEN c * 100 >= total * 99 THEN d END) AS p99_ns,
       max(d) AS max_ns
FROM cum GROUP BY board, date, type ORDER BY board, date, type",
        sel = selection(options)
    )
}

/// Intervals between consecutive occurrences of the periodic event within each run.
pub fn gaps_sql(options: &ReportOptions) -> String {
    let name = quote(&options.periodic);
    format!(
        "WITH {sel},
occ AS (SELECT e.board, e.date, e.trace_id, e.ts_ns FROM events e JOIN sel s ON e.trace_id = s.trace_id
        WHERE (e.producer = {name} OR e.type = {name}) AND e.category IN ('state', 'punctual')),
iv AS (SELECT board, date, ts_ns - lag(ts_ns) OVER (PARTITION BY trace_id ORDER BY ts_ns) AS gap FROM occ)
SELECT board, date, count(gap) AS intervals,
       sum(CASE WHEN gap > {bound} THEN 1 ELSE 0 END) AS beyond_bound,
       max(gap) AS max_interval_ns
FROM iv GROUP BY board, date ORDER BY board, date",
        sel = selection(options),
        bound = options.gap_bound_ns,
    )
}

/// The runs compared with the reference, with their lengths and the common length of each pair.
pub fn runs_sql(options: &ReportOptions, reference: &str) -> String {
    format!(
        "WITH {sel},
ref AS (SELECT trace_id, t_min_ns, t_max_ns FROM traces WHERE trace_id = {r})
SELECT s.trace_id, s.board, s.date,
       s.t_max_ns + 1 - s.t_min_ns AS run_ns, ref.t_max_ns + 1 - ref.t_min_ns AS ref_ns
FROM sel s CROSS JOIN ref WHERE s.trace_id <> ref.trace_id ORDER BY s.trace_id",
        sel = selection(options),
        r = quote(reference),
    )
}

/// The state time per (run, side, producer, type, slice): each run on its own axis
/// `[t_min, t_min + len)` and the reference on the same length from its own start, `len` the longer of
/// the two (at least one ns per slice); slice edges `lo + len·i / S` in integers, as `SliceGrid` cuts them.
pub fn state_time_sql(options: &ReportOptions, reference: &str) -> String {
    format!(
        "WITH {sel},
ref AS (SELECT trace_id, t_min_ns, t_max_ns FROM traces WHERE trace_id = {r}),
grids AS (SELECT s.trace_id AS run, s.t_min_ns AS run_lo, ref.t_min_ns AS ref_lo,
                 greatest(s.t_max_ns + 1 - s.t_min_ns, ref.t_max_ns + 1 - ref.t_min_ns, {n}) AS len
          FROM sel s CROSS JOIN ref WHERE s.trace_id <> ref.trace_id),
spans AS (SELECT g.run, 'run' AS side, e.producer, e.type, e.ts_ns, e.ts_ns + e.duration_ns AS end_ns, g.run_lo AS lo, g.len
          FROM events e JOIN grids g ON e.trace_id = g.run WHERE e.category = 'state'
          UNION ALL
          SELECT g.run, 'ref' AS side, e.producer, e.type, e.ts_ns, e.ts_ns + e.duration_ns AS end_ns, g.ref_lo AS lo, g.len
          FROM events e CROSS JOIN grids g WHERE e.trace_id = {r} AND e.category = 'state'),
clipped AS (SELECT run, side, producer, type, lo, len,
                   greatest(ts_ns, lo) AS a, least(end_ns, lo + len) AS b FROM spans),
cut AS (SELECT run, side, producer, type, lo, len, a, b,
               unnest(range(({n} * (a - lo + 1) - 1) / len, ({n} * (b - lo) - 1) / len + 1)) AS slice
        FROM clipped WHERE b > a)
SELECT run, side, CAST(producer AS VARCHAR) AS producer, CAST(type AS VARCHAR) AS type, slice,
       sum(least(b, lo + len * (slice + 1) / {n}) - greatest(a, lo + len * slice / {n})) AS ns
FROM cut GROUP BY run, side, producer, type, slice",
        sel = selection(options),
        r = quote(reference),
        n = options.compare.slices.max(1),
    )
}

fn int(rows: &Rows, row: &[serde_json::Value], col: &str) -> Result<i64> {
    let v = &row[rows.col(col)?];
    if v.is_null() {
        return Ok(0);
    }
    v.as_i64()
        .or_else(|| v.as_f64().map(|f| f as i64))
        .ok_or_else(|| FleetError::Query(format!("column {col} is not a number: {v}")))
}

fn text(rows: &Rows, row: &[serde_json::Value], col: &str) -> Result<String> {
    let v = &row[rows.col(col)?];
    Ok(v.as_str().map_or_else(|| v.to_string(), str::to_owned))
}

/// Runs the report's queries on `engine`.
pub fn report(engine: &Engine, options: &ReportOptions) -> Result<Report> {
    let rows = engine.rows(&nights_sql(options))?;
    let nights = rows
        .rows
        .iter()
        .map(|r| {
            Ok(Night {
                board: text(&rows, r, "board")?,
                date: text(&rows, r, "date")?,
                runs: int(&rows, r, "runs")?,
                events: int(&rows, r, "events")?,
                lost_records: int(&rows, r, "lost_records")?,
                loss_records: int(&rows, r, "loss_records")?,
                duration_ns: int(&rows, r, "duration_ns")?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let rows = engine.rows(&states_sql(options))?;
    let states = rows
        .rows
        .iter()
        .map(|r| {
            Ok(StateDurations {
                board: text(&rows, r, "board")?,
                date: text(&rows, r, "date")?,
                type_name: text(&rows, r, "type")?,
                states: int(&rows, r, "states")?,
                p50_ns: int(&rows, r, "p50_ns")?,
                p99_ns: int(&rows, r, "p99_ns")?,
                max_ns: int(&rows, r, "max_ns")?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let rows = engine.rows(&gaps_sql(options))?;
    let gaps = rows
        .rows
        .iter()
        .map(|r| {
            Ok(Gaps {
                board: text(&rows, r, "board")?,
                date: text(&rows, r, "date")?,
                intervals: int(&rows, r, "intervals")?,
                beyond_bound: int(&rows, r, "beyond_bound")?,
                max_interval_ns: int(&rows, r, "max_interval_ns")?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let departures = match &options.reference {
        Some(reference) => Some(departures(engine, options, reference)?),
        None => None,
    };
    Ok(Report {
        where_sql: options.where_sql.clone(),
        nights,
        states,
        periodic: options.periodic.clone(),
        gap_bound_ns: options.gap_bound_ns,
        gaps,
        departures,
    })
}

/// Why a report cannot be made: the reference is not in the dataset.
#[derive(Debug)]
pub struct UnknownReference(pub String);

impl std::fmt::Display for UnknownReference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "--reference {}: no such trace in the dataset (trace ids are the trace files' names without .db; `socscope fleet sql DATASET \"SELECT trace_id FROM traces\"` lists them)",
            self.0
        )
    }
}

fn departures(engine: &Engine, options: &ReportOptions, reference: &str) -> Result<Departures> {
    let known = engine.rows(&format!(
        "SELECT count(*) AS n FROM traces WHERE trace_id = {}",
        quote(reference)
    ))?;
    if known.rows.first().and_then(|r| r[0].as_i64()) != Some(1) {
        return Err(FleetError::Query(
            UnknownReference(reference.to_owned()).to_string(),
        ));
    }
    let slices = options.compare.slices.max(1);
    let runs = engine.rows(&runs_sql(options, reference))?;
    let cells = engine.rows(&state_time_sql(options, reference))?;
    let (c_run, c_side, c_prod, c_type, c_slice, c_ns) = (
        cells.col("run")?,
        cells.col("side")?,
        cells.col("producer")?,
        cells.col("type")?,
        cells.col("slice")?,
        cells.col("ns")?,
    );
    // (run, is_reference) → its state time.
    let mut models: HashMap<(String, bool), StateTime> = HashMap::new();
    for r in &cells.rows {
        let key = (
            r[c_run].as_str().unwrap_or_default().to_owned(),
            r[c_side] == "ref",
        );
        let slice = r[c_slice].as_u64().unwrap_or(u64::MAX) as usize;
        if slice >= slices {
            return Err(FleetError::Query(format!(
                "slice {slice} out of 0..{slices} for run {}",
                key.0
            )));
        }
        let ns = r[c_ns].as_i64().unwrap_or(0) as f64;
        let series = models
            .entry(key)
            .or_default()
            .keys
            .entry((
                r[c_prod].as_str().unwrap_or_default().to_owned(),
                r[c_type].as_str().unwrap_or_default().to_owned(),
            ))
            .or_insert_with(|| vec![0.0; slices]);
        series[slice] += ns;
    }
    // Series with no state time at all drop out, as `compare` drops them.
    for m in models.values_mut() {
        m.keys.retain(|_, v| v.iter().any(|x| *x != 0.0));
    }
    let empty = StateTime::default();
    let mut out = Vec::new();
    for r in &runs.rows {
        let trace_id = text(&runs, r, "trace_id")?;
        let run_ns = int(&runs, r, "run_ns")?.max(1);
        let ref_ns = int(&runs, r, "ref_ns")?.max(1);
        let x = models.get(&(trace_id.clone(), false)).unwrap_or(&empty);
        let rf = models.get(&(trace_id.clone(), true)).unwrap_or(&empty);
        let c = compare_state_time(rf, x, ref_ns, run_ns, &options.compare)
            .map_err(|e| FleetError::Query(format!("comparing {trace_id}: {e}")))?;
        out.push(RunScore {
            board: text(&runs, r, "board")?,
            date: text(&runs, r, "date")?,
            windows: c.windows.len(),
            departures: c.departures,
            max_score: c.windows.iter().map(|w| w.score).fold(0.0, f64::max),
            trace_id,
        });
    }
    Ok(Departures {
        reference: reference.to_owned(),
        slices,
        threshold: options.compare.threshold,
        p: options.compare.p,
        runs: out,
    })
}

/// A metric of the heat map (boards × nights), by name.
pub const HEATMAP_METRICS: [&str; 5] = ["events", "lost", "gaps", "departures", "max-score"];

/// The boards × nights grid of `metric` (`None`: no value for that board and night).
pub fn heatmap(report: &Report, metric: &str) -> Result<HeatMap> {
    let mut cells: BTreeMap<(String, String), f64> = BTreeMap::new();
    match metric {
        "events" => {
            for n in &report.nights {
                cells.insert((n.board.clone(), n.date.clone()), n.events as f64);
            }
        }
        "lost" => {
            for n in &report.nights {
                cells.insert((n.board.clone(), n.date.clone()), n.lost_records as f64);
            }
        }
        "gaps" => {
            for g in &report.gaps {
                cells.insert((g.board.clone(), g.date.clone()), g.beyond_bound as f64);
            }
        }
        "departures" | "max-score" => {
            let d = report.departures.as_ref().ok_or_else(|| {
                FleetError::Query(format!("--metric {metric} needs --reference TRACE_ID"))
            })?;
            for r in &d.runs {
                let v = if metric == "departures" {
                    r.departures as f64
                } else {
                    r.max_score
                };
                let e = cells
                    .entry((r.board.clone(), r.date.clone()))
                    .or_insert(0.0);
                *e = if metric == "departures" {
                    *e + v
                } else {
                    e.max(v)
                };
            }
        }
        other => {
            return Err(FleetError::Query(format!(
                "unknown heat-map metric {other:?}; choose among {}",
                HEATMAP_METRICS.join(", ")
            )));
        }
    }
    let mut boards: Vec<String> = report.nights.iter().map(|n| n.board.clone()).collect();
    boards.sort();
    boards.dedup();
    let mut dates: Vec<String> = report.nights.iter().map(|n| n.date.clone()).collect();
    dates.sort();
    dates.dedup();
    let values = boards
        .iter()
        .map(|b| {
            dates
                .iter()
                .map(|d| cells.get(&(b.clone(), d.clone())).copied())
                .collect()
        })
        .collect();
    Ok(HeatMap {
        metric: metric.to_owned(),
        boards,
        dates,
        values,
    })
}

/// A boards × nights grid of one metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HeatMap {
    /// The metric's name.
    pub metric: String,
    /// Rows.
    pub boards: Vec<String>,
    /// Columns.
    pub dates: Vec<String>,
    /// `values[board][date]`.
    pub values: Vec<Vec<Option<f64>>>,
}
