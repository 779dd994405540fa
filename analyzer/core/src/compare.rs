//! Comparing a run with a reference (for stress-reproduction rigs): where, in its own time, does
//! RUN behave differently from REFERENCE, and who is involved.
//!
//! Both traces are read on their own time axis (from their first event) over the same length,
//! cut into the same slices, as state-duration microscopic models keyed by names (producer, type),
//! so the two traces need not share ids. The Ocelotl temporal aggregation of the per-slice
//! absolute difference `|run − reference|` cuts the time axis into windows where the difference
//! is homogeneous. Each window is scored by the dissimilarity of its state proportions in the two
//! runs: `Σ_k |x_k − r_k| / Σ_k max(x_k, r_k)` over (producer, state type) keys (0: the same time
//! in every state for every producer, 1: nothing in common). A window whose score reaches the
//! threshold is a departure.
//!
//! Start here: [`compare`], [`CompareOptions`], [`Comparison`].

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use socscope_tracedb::{Filter, TimeRange, TraceReader};

use crate::micro::{self, Metric, SliceGrid};
use crate::ocelotl::{MicroscopicModel, TemporalAggregation};

/// How to compare.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareOptions {
    /// Slices of the common time axis.
    pub slices: usize,
    /// Score from which a window is a departure.
    pub threshold: f64,
    /// The p of the temporal aggregation of the differences (normalised qualities).
    pub p: f64,
    /// Producers and types listed per window.
    pub top: usize,
}

impl Default for CompareOptions {
    fn default() -> Self {
        Self {
            slices: 100,
            threshold: 0.25,
            p: 0.5,
            top: 5,
        }
    }
}

/// How much one producer or type differs in a window, as fractions of the window's time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Difference {
    pub name: String,
    pub reference: f64,
    pub run: f64,
    /// `run − reference`.
    pub delta: f64,
}

/// A window of the common time axis.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Window {
    /// Seconds from each trace's start.
    pub start_s: f64,
    pub end_s: f64,
    /// Inclusive slice range.
    pub slices: [usize; 2],
    /// Dissimilarity of the state proportions, 0 to 1.
    pub score: f64,
    /// The score reaches the threshold.
    pub departure: bool,
    /// The producers whose state time differs most (all state types together).
    pub producers: Vec<Difference>,
    /// The state types whose time differs most (all producers together).
    pub types: Vec<Difference>,
}

/// The result of [`compare`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// Trace lengths, seconds.
    pub reference_s: f64,
    pub run_s: f64,
    /// Slice length, seconds.
    pub slice_s: f64,
    pub p: f64,
    pub threshold: f64,
    /// Every window, in time order.
    pub windows: Vec<Window>,
    /// How many windows are departures.
    pub departures: usize,
}

/// Why a comparison could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error(transparent)]
    Store(#[from] socscope_tracedb::StoreError),
    #[error("{0}")]
    Invalid(String),
}

/// The score of a window: the dissimilarity of the state times of the same (producer, type) keys in
/// the reference and in the run, `Σ_k |x_k − r_k| / Σ_k max(x_k, r_k)` (0: the same, 1: nothing in
/// common; 0 when neither has any state time). Scale-free: proportions or sums give the same score.
pub fn dissimilarity(reference: &[f64], run: &[f64]) -> f64 {
    let (mut diff, mut both) = (0.0, 0.0);
    for (r, x) in reference.iter().zip(run) {
        diff += (x - r).abs();
        both += x.max(*r);
    }
    if both > 0.0 { diff / both } else { 0.0 }
}

/// A reference trace's state time per slice keyed by (producer name, type name), for comparing a run
/// with it as the run arrives ([`crate::online_compare`]).
pub struct ReferenceProfile {
    /// Slice length, ns.
    pub slice_ns: f64,
    /// The keys, sorted.
    pub keys: Vec<(String, String)>,
    /// State time per key (same order) per slice, ns.
    pub values: Vec<Vec<f64>>,
}

impl ReferenceProfile {
    /// The profile of `reference` cut into `slices` slices from its first event.
    pub fn load(reference: &TraceReader, slices: usize) -> Result<Self, CompareError> {
        let slices = slices.max(1);
        let range = micro::trace_range(reference)?;
        let len = range.len().max(slices as i64);
        let side = side(
            reference,
            TimeRange::new(range.start, range.start + len),
            slices,
        )?;
        let mut keys: Vec<(String, String)> = side.keys.keys().cloned().collect();
        keys.sort();
        let values = keys
            .iter()
            .map(|k| side.keys.get(k).cloned().unwrap_or_default())
            .collect();
        Ok(Self {
            slice_ns: len as f64 / slices as f64,
            keys,
            values,
        })
    }

    /// Slices in the profile.
    pub fn slices(&self) -> usize {
        self.values.first().map_or(0, Vec::len)
    }
}

/// One run's state time per slice (ns), keyed by (producer name, state type name): what [`compare`]
/// compares, built here from a trace file or elsewhere (the fleet report builds it with SQL over its
/// dataset) and compared by [`compare_state_time`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StateTime {
    /// Time in each slice of the common axis, per (producer, type); producers of the same name add up.
    pub keys: HashMap<(String, String), Vec<f64>>,
}

/// The length of the common time axis of two runs of `reference_ns` and `run_ns` (each from its first
/// event to its last end), cut into `slices`: the longer of the two, and at least 1 ns per slice.
pub fn common_length(reference_ns: i64, run_ns: i64, slices: usize) -> i64 {
    reference_ns.max(run_ns).max(slices.max(1) as i64)
}

fn side(reader: &TraceReader, range: TimeRange, slices: usize) -> Result<StateTime, CompareError> {
    let grid = SliceGrid::new(range, slices)
        .ok_or_else(|| CompareError::Invalid("empty interval".into()))?;
    let m = micro::build(reader, grid, Metric::Duration, &Filter::all())?;
    let mut keys: HashMap<(String, String), Vec<f64>> = HashMap::new();
    for (p, prod) in m.producers.iter().enumerate() {
        for (u, ty) in m.types.iter().enumerate() {
            let v: Vec<f64> = (0..slices).map(|t| m.value(t, p, u)).collect();
            if v.iter().any(|x| *x != 0.0) {
                // Producers of the same name (e.g. two threads called "worker") add up.
                let e = keys
                    .entry((prod.name.clone(), ty.name.clone()))
                    .or_insert_with(|| vec![0.0; slices]);
                for (a, b) in e.iter_mut().zip(v) {
                    *a += b;
                }
            }
        }
    }
    Ok(StateTime { keys })
}

/// Compares `run` with `reference` (see the module documentation).
pub fn compare(
    reference: &TraceReader,
    run: &TraceReader,
    options: &CompareOptions,
) -> Result<Comparison, CompareError> {
    let slices = options.slices.max(1);
    let r_range = micro::trace_range(reference)?;
    let x_range = micro::trace_range(run)?;
    let len = common_length(r_range.len(), x_range.len(), slices);
    let r = side(
        reference,
        TimeRange::new(r_range.start, r_range.start + len),
        slices,
    )?;
    let x = side(
        run,
        TimeRange::new(x_range.start, x_range.start + len),
        slices,
    )?;
    compare_state_time(&r, &x, r_range.len(), x_range.len(), options)
}

/// Compares two runs' state time, sliced over their common length ([`common_length`] of
/// `reference_ns` and `run_ns` into `options.slices`), as [`compare`] does for two trace files.
pub fn compare_state_time(
    r: &StateTime,
    x: &StateTime,
    reference_ns: i64,
    run_ns: i64,
    options: &CompareOptions,
) -> Result<Comparison, CompareError> {
    let slices = options.slices.max(1);
    let len = common_length(reference_ns, run_ns, slices);
    if let Some(((p, t), v)) = r
        .keys
        .iter()
        .chain(&x.keys)
        .find(|(_, v)| v.len() != slices)
    {
        return Err(CompareError::Invalid(format!(
            "the state time of {p}/{t} has {} slices, expected {slices}",
            v.len()
        )));
    }
    let zero = vec![0.0; slices];
    let mut names: Vec<(String, String)> = r.keys.keys().chain(x.keys.keys()).cloned().collect();
    names.sort();
    names.dedup();
    let get = |s: &'_ StateTime, k: &(String, String)| -> Vec<f64> {
        s.keys.get(k).cloned().unwrap_or_else(|| zero.clone())
    };
    let rv: Vec<Vec<f64>> = names.iter().map(|k| get(r, k)).collect();
    let xv: Vec<Vec<f64>> = names.iter().map(|k| get(x, k)).collect();
    let slice_ns = len as f64 / slices as f64;

    // The windows: temporal aggregation of |run − reference|, one producer per key and one
    // type (the keys already separate types).
    let ranges: Vec<(usize, usize)> = if names.is_empty() {
        vec![(0, slices - 1)]
    } else {
        let mut values = Vec::with_capacity(slices * names.len());
        for t in 0..slices {
            for k in 0..names.len() {
                values.push((xv[k][t] - rv[k][t]).abs());
            }
        }
        let model = MicroscopicModel::new(slices, names.len(), 1, values)
            .map_err(|e| CompareError::Invalid(e.to_string()))?;
        let agg = TemporalAggregation::new(&model, true);
        agg.best_partition(options.p).ranges().to_vec()
    };

    let mut windows = Vec::with_capacity(ranges.len());
    for &(a, b) in &ranges {
        let n = (b - a + 1) as f64;
        let span = slice_ns * n;
        let sums = |v: &[Vec<f64>]| -> Vec<f64> {
            v.iter()
                .map(|s| s[a..=b].iter().sum::<f64>() / span)
                .collect()
        };
        let (rs, xs) = (sums(&rv), sums(&xv));
        let score = dissimilarity(&rs, &xs);
        let mut by_producer: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
        let mut by_type: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
        for (k, (p, ty)) in names.iter().enumerate() {
            for m in [
                by_producer.entry(p).or_default(),
                by_type.entry(ty).or_default(),
            ] {
                m.0 += rs[k];
                m.1 += xs[k];
            }
        }
        let top = |m: BTreeMap<&str, (f64, f64)>| -> Vec<Difference> {
            let mut d: Vec<Difference> = m
                .into_iter()
                .map(|(name, (r, x))| Difference {
                    name: name.to_owned(),
                    reference: r,
                    run: x,
                    delta: x - r,
                })
                .filter(|d| d.delta != 0.0)
                .collect();
            d.sort_by(|a, b| {
                b.delta
                    .abs()
                    .total_cmp(&a.delta.abs())
                    .then_with(|| a.name.cmp(&b.name))
            });
            d.truncate(options.top);
            d
        };
        windows.push(Window {
            start_s: a as f64 * slice_ns * 1e-9,
            end_s: (b + 1) as f64 * slice_ns * 1e-9,
            slices: [a, b],
            score,
            departure: score >= options.threshold,
            producers: top(by_producer),
            types: top(by_type),
        });
    }
    // Windows where the two runs agree exactly carry no information apart: merge neighbours.
    let mut merged: Vec<Window> = Vec::with_capacity(windows.len());
    for w in windows {
        match merged.last_mut() {
            Some(l)
                if l.score == 0.0
                    && w.score == 0.0
                    && l.producers.is_empty()
                    && w.producers.is_empty() =>
            {
                l.end_s = w.end_s;
                l.slices[1] = w.slices[1];
            }
            _ => merged.push(w),
        }
    }
    let windows = merged;
    Ok(Comparison {
        reference_s: reference_ns as f64 * 1e-9,
        run_s: run_ns as f64 * 1e-9,
        slice_s: slice_ns * 1e-9,
        p: options.p,
        threshold: options.threshold,
        departures: windows.iter().filter(|w| w.departure).count(),
        windows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{self, Spec};
    use socscope_tracedb::Event;

    /// Two threads alternating `running` every 100 ns for 10 µs; `extra` adds a third thread
    /// running through [4000, 6000).
    fn trace(extra: bool) -> Spec {
        let mut events = Vec::new();
        for i in 0..100 {
            let p = if i % 2 == 0 { 11 } else { 12 };
            events.push(Event::state(i * 100, i * 100 + 100, 0, 1, p, Some(0)));
        }
        // The traces end at 9999 whatever their states' ends: both are 10 µs long.
        events.push(Event::punctual(9999, 2, 11, Some(0)));
        if extra {
            for i in 0..20 {
                events.push(Event::state(
                    4000 + i * 100,
                    4100 + i * 100,
                    0,
                    1,
                    10,
                    Some(1),
                ));
            }
        }
        Spec { events }
    }

    #[test]
    fn identical_traces_have_no_departure() {
        let (_a, pa) = testutil::write_spec(&trace(false));
        let (_b, pb) = testutil::write_spec(&trace(false));
        let c = compare(
            &TraceReader::open(&pa).unwrap(),
            &TraceReader::open(&pb).unwrap(),
            &CompareOptions {
                slices: 50,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(c.departures, 0);
        assert_eq!(c.windows.len(), 1);
        assert_eq!(c.windows[0].slices, [0, 49]);
        assert_eq!(c.windows[0].score, 0.0);
    }

    #[test]
    fn the_extra_activity_window_is_the_only_departure() {
        let (_a, pa) = testutil::write_spec(&trace(false));
        let (_b, pb) = testutil::write_spec(&trace(true));
        let c = compare(
            &TraceReader::open(&pa).unwrap(),
            &TraceReader::open(&pb).unwrap(),
            &CompareOptions {
                slices: 50,
                ..Default::default()
            },
        )
        .unwrap();
        let flagged: Vec<&Window> = c.windows.iter().filter(|w| w.departure).collect();
        assert_eq!(c.departures, 1, "{:#?}", c.windows);
        let w = flagged[0];
        assert_eq!(w.slices, [20, 29]);
        assert!((w.start_s - 4000e-9).abs() < 2e-9 && (w.end_s - 6000e-9).abs() < 2e-9);
        assert_eq!(w.producers[0].name, "app");
        assert!((w.producers[0].delta - 1.0).abs() < 1e-3);
        assert_eq!(w.types[0].name, "running");
        assert!((w.score - 0.5).abs() < 1e-12, "{}", w.score);
    }
}
