//! Event density of an interval (Framesoc RT-460 §3.4): events per bin, per type, with type
//! and producer filters — from the summary at once ([`density`]), or progressively from the
//! events through the [loader](crate::loader) ([`DensityConsumer`], used by the CLI and the
//! GUI alike), then binned for display by pure steps on its snapshot
//! ([`DensityHistogram::columns`] resamples to pixel columns, [`DensityHistogram::density`]
//! gives the per-type [`Density`]).
//!
//! Start here: [`density`], [`DensityConsumer`], [`DensityHistogram`].

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use serde::Serialize;
use socscope_tracedb::{Filter, Result, StoredEvent, TimeRange, TraceReader, TypeId};

use crate::loader::{Consumer, LoadRequest, chunk_size};
use crate::micro::{self, Metric, SliceGrid};

/// One bin of the histogram.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DensityBin {
    pub start: i64,
    pub end: i64,
    /// Events starting in the bin.
    pub count: u64,
    /// Per type, in the order of [`Density::types`].
    pub per_type: Vec<u64>,
}

/// The density histogram.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Density {
    pub start: i64,
    pub end: i64,
    /// Type names, in id order.
    pub types: Vec<String>,
    pub bins: Vec<DensityBin>,
    /// Largest bin count.
    pub max: u64,
    /// All events.
    pub total: u64,
    /// Nanoseconds of the interval covered so far (a partial snapshot has less than the
    /// whole interval).
    pub loaded_until: i64,
}

fn assemble(grid: &SliceGrid, types: Vec<String>, counts: &[u64], loaded_until: i64) -> Density {
    let nu = types.len();
    let bins: Vec<DensityBin> = (0..grid.slices)
        .map(|i| {
            let per_type = counts[i * nu..(i + 1) * nu].to_vec();
            let s = grid.slice(i);
            DensityBin {
                start: s.start,
                end: s.end,
                count: per_type.iter().sum(),
                per_type,
            }
        })
        .collect();
    Density {
        start: grid.range.start,
        end: grid.range.end,
        types,
        max: bins.iter().map(|b| b.count).max().unwrap_or(0),
        total: bins.iter().map(|b| b.count).sum(),
        bins,
        loaded_until,
    }
}

/// The density of `range` in `bins` bins from the store summary (exact at bin edges); its cost
/// grows with the bins, not the events.
pub fn density(
    reader: &TraceReader,
    range: TimeRange,
    bins: usize,
    filter: &Filter,
) -> Result<Density> {
    let grid = SliceGrid::new(range, bins.max(1)).ok_or_else(|| {
        socscope_tracedb::StoreError::InvalidRequest(
            "a density needs a bounded, non-empty interval".into(),
        )
    })?;
    let m = micro::build(reader, grid, Metric::Count, filter)?;
    let nu = m.types.len();
    let mut counts = vec![0u64; grid.slices * nu];
    for t in 0..grid.slices {
        for p in 0..m.producers.len() {
            for u in 0..nu {
                counts[t * nu + u] += m.value(t, p, u) as u64;
            }
        }
    }
    Ok(assemble(
        &grid,
        m.types.iter().map(|t| t.name.clone()).collect(),
        &counts,
        range.end,
    ))
}

/// Fine bins per GUI load: enough to zoom a long way in the chart before reloading.
pub const FINE_BINS: usize = 16_384;

/// Counts per bin over the loaded interval (a [`DensityConsumer`] snapshot).
#[derive(Clone, Debug, PartialEq)]
pub struct DensityHistogram {
    /// The interval the bins cover (bin `i` is slice `i` of [`SliceGrid::new`]`(range, n)`).
    pub range: TimeRange,
    /// Events per bin (events starting in it).
    pub bins: Arc<Vec<u64>>,
    /// Per type id, events per bin (only from a consumer built [`DensityConsumer::with_types`]),
    /// in type id order.
    pub per_type: Arc<TypeColumns>,
    /// Type names (read by the loader).
    pub type_names: Arc<HashMap<TypeId, String>>,
    /// The latest event timestamp counted so far.
    pub loaded_until: i64,
}

impl DensityHistogram {
    /// An empty histogram over `range` with `n` bins.
    pub fn new(range: TimeRange, n: usize) -> Self {
        Self {
            range,
            bins: Arc::new(vec![0; n.max(1)]),
            per_type: Arc::default(),
            type_names: Arc::default(),
            loaded_until: range.start,
        }
    }

    /// Events counted.
    pub fn total(&self) -> u64 {
        self.bins.iter().sum()
    }

    /// Events per pixel column for `view` drawn `width` columns wide, spreading each bin over
    /// the columns it overlaps (so the sum over the loaded interval is preserved).
    pub fn columns(&self, view: TimeRange, width: usize) -> Vec<f64> {
        let width = width.max(1);
        let mut out = vec![0.0; width];
        let Some(grid) = SliceGrid::new(self.range, self.bins.len()) else {
            return out;
        };
        if view.is_empty() {
            return out;
        }
        let n = self.bins.len();
        let bin_ns = self.range.len() as f64 / n as f64;
        let col_ns = view.len() as f64 / width as f64;
        let first = (((view.start - self.range.start) as f64 / bin_ns)
            .floor()
            .max(0.0) as usize)
            .saturating_sub(1);
        let last = ((((view.end - self.range.start) as f64 / bin_ns)
            .ceil()
            .max(0.0) as usize)
            + 1)
        .min(n);
        for b in first..last {
            let count = self.bins[b];
            if count == 0 {
                continue;
            }
            let s = grid.slice(b);
            let (b0, b1) = (s.start as f64, s.end as f64);
            let len = (b1 - b0).max(1.0);
            let c0 = ((b0 - view.start as f64) / col_ns).floor().max(0.0) as usize;
            let c1 = (((b1 - view.start as f64) / col_ns).ceil().max(0.0) as usize).min(width);
            for (c, slot) in out.iter_mut().enumerate().take(c1).skip(c0) {
                let x0 = view.start as f64 + c as f64 * col_ns;
                let overlap = (b1.min(x0 + col_ns) - b0.max(x0)).max(0.0);
                *slot += count as f64 * overlap / len;
            }
        }
        out
    }

    /// The per-type density (the types with events, in id order), as [`density`] gives it.
    pub fn density(&self) -> Density {
        let n = self.bins.len();
        let Some(grid) = SliceGrid::new(self.range, n) else {
            return assemble(
                &SliceGrid {
                    range: self.range,
                    slices: 0,
                },
                Vec::new(),
                &[],
                self.loaded_until,
            );
        };
        let keep: Vec<&(TypeId, Vec<u64>)> = self
            .per_type
            .iter()
            .filter(|(_, c)| c.iter().any(|&x| x > 0))
            .collect();
        let mut counts = Vec::with_capacity(n * keep.len());
        for i in 0..n {
            counts.extend(keep.iter().map(|(_, c)| c[i]));
        }
        let names = keep
            .iter()
            .map(|(id, _)| {
                self.type_names
                    .get(id)
                    .cloned()
                    .unwrap_or_else(|| format!("type {id}"))
            })
            .collect();
        assemble(&grid, names, &counts, self.loaded_until)
    }
}

/// Per type id, events per bin.
pub type TypeColumns = Vec<(TypeId, Vec<u64>)>;

/// Counts events into bins as chunks arrive, on a loader thread; built without a store.
#[derive(Debug, Clone)]
pub struct DensityConsumer {
    grid: Option<SliceGrid>,
    range: TimeRange,
    bins: Vec<u64>,
    /// Per type: `Some` when built [`DensityConsumer::with_types`].
    per_type: Option<(HashMap<TypeId, usize>, TypeColumns)>,
    type_names: Arc<HashMap<TypeId, String>>,
    loaded_until: i64,
}

impl DensityConsumer {
    /// `bins` bins over `range`, totals only (an empty or unbounded interval counts nothing).
    pub fn new(range: TimeRange, bins: usize) -> Self {
        let bins = bins.max(1);
        Self {
            grid: SliceGrid::new(range, bins),
            range,
            bins: vec![0; bins],
            per_type: None,
            type_names: Arc::default(),
            loaded_until: range.start,
        }
    }

    /// Also counts per type (the loader reads the type names).
    pub fn with_types(mut self) -> Self {
        self.per_type = Some((HashMap::new(), Vec::new()));
        self
    }

    /// The load request (RT-460's 1 M events per chunk).
    pub fn request(&self, trace: &Path, filter: &Filter) -> LoadRequest {
        LoadRequest {
            trace: trace.to_path_buf(),
            range: self.range,
            filter: filter.clone(),
            chunk_events: chunk_size::DENSITY,
        }
    }
}

impl Consumer for DensityConsumer {
    type Snapshot = DensityHistogram;

    fn prepare(&mut self, reader: &TraceReader) -> std::result::Result<(), String> {
        if self.per_type.is_some() {
            let types = reader.event_types().map_err(|e| e.to_string())?;
            self.type_names = Arc::new(types.into_iter().map(|t| (t.id, t.name)).collect());
        }
        Ok(())
    }

    fn consume(&mut self, events: &[StoredEvent]) {
        let Some(grid) = self.grid else { return };
        let n = self.bins.len();
        for e in events {
            let Some(i) = grid.slice_of(e.ts) else {
                continue;
            };
            self.bins[i] += 1;
            self.loaded_until = self.loaded_until.max(e.ts);
            if let Some((index, columns)) = &mut self.per_type {
                let u = *index.entry(e.type_id).or_insert_with(|| {
                    columns.push((e.type_id, vec![0; n]));
                    columns.len() - 1
                });
                columns[u].1[i] += 1;
            }
        }
    }

    fn snapshot(&self) -> DensityHistogram {
        let mut per_type = self
            .per_type
            .as_ref()
            .map(|(_, c)| c.clone())
            .unwrap_or_default();
        per_type.sort_by_key(|c| c.0);
        DensityHistogram {
            range: self.range,
            bins: Arc::new(self.bins.clone()),
            per_type: Arc::new(per_type),
            type_names: self.type_names.clone(),
            loaded_until: self.loaded_until,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loader;
    use crate::testutil::{self, Spec};

    #[test]
    fn summary_density_matches_the_progressive_one() {
        let (_dir, path) = testutil::write_spec(&Spec::small());
        let reader = TraceReader::open(&path).unwrap();
        let range = TimeRange::new(0, 1000);
        let d = density(&reader, range, 4, &Filter::all()).unwrap();
        assert_eq!(
            d.bins.iter().map(|b| b.count).collect::<Vec<_>>(),
            [3, 3, 3, 1]
        );
        assert_eq!(d.total, 10);
        assert_eq!(d.max, 3);
        assert_eq!(
            d.types,
            ["running", "marker", "wakeup", "allocated_bytes", "irq"]
        );
        let c = DensityConsumer::new(range, 4).with_types();
        let mut req = c.request(&path, &Filter::all());
        req.chunk_events = 2;
        let (snap, progress) = loader::spawn(req, c).wait();
        assert!(progress.chunks > 1);
        let hist = snap.unwrap();
        assert_eq!(hist.total(), 10);
        let mut snap = hist.density();
        snap.loaded_until = range.end;
        assert_eq!(snap, d);
    }

    #[test]
    fn filters_on_types_and_producers() {
        let (_dir, path) = testutil::write_spec(&Spec::small());
        let reader = TraceReader::open(&path).unwrap();
        let range = TimeRange::new(0, 1000);
        let d = density(&reader, range, 2, &Filter::all().types([2])).unwrap();
        assert_eq!(d.bins.iter().map(|b| b.count).collect::<Vec<_>>(), [1, 2]);
        let d = density(&reader, range, 2, &Filter::all().producers([20])).unwrap();
        assert_eq!(d.bins.iter().map(|b| b.count).collect::<Vec<_>>(), [0, 2]);
        assert_eq!(d.types, ["marker", "irq"]);
    }

    fn ev(ts: i64) -> StoredEvent {
        StoredEvent {
            id: ts,
            event: socscope_tracedb::Event::punctual(ts, 1, 1, None),
        }
    }

    #[test]
    fn counts_land_in_their_bins_and_events_outside_are_ignored() {
        let mut c = DensityConsumer::new(TimeRange::new(0, 100), 10);
        c.consume(&[ev(0), ev(9), ev(10), ev(99), ev(100), ev(-1)]);
        let h = c.snapshot();
        assert_eq!(*h.bins, vec![2, 1, 0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(h.total(), 4);
        // Totals only: no per-type columns.
        assert!(h.per_type.is_empty());
        assert!(h.density().types.is_empty());
    }

    #[test]
    fn resampling_preserves_counts_and_zooms() {
        let mut c = DensityConsumer::new(TimeRange::new(0, 100), 10);
        c.consume(&(0..100).map(ev).collect::<Vec<_>>());
        let h = c.snapshot();
        let cols = h.columns(TimeRange::new(0, 100), 4);
        assert_eq!(cols, vec![25.0, 25.0, 25.0, 25.0]);
        let cols = h.columns(TimeRange::new(0, 100), 20);
        assert!(cols.iter().all(|v| (*v - 5.0).abs() < 1e-9), "{cols:?}");
        // Zoomed on the first half: all of it in view.
        let cols = h.columns(TimeRange::new(0, 50), 5);
        assert_eq!(cols.iter().sum::<f64>(), 50.0);
        // Outside the loaded interval: nothing.
        assert_eq!(
            h.columns(TimeRange::new(200, 300), 5).iter().sum::<f64>(),
            0.0
        );
    }

    #[test]
    fn uneven_bins_follow_the_slice_grid() {
        // 3 bins over 10 ns: [0, 3), [3, 6), [6, 10), as the summary density cuts them.
        let mut c = DensityConsumer::new(TimeRange::new(0, 10), 3).with_types();
        c.consume(&(0..10).map(ev).collect::<Vec<_>>());
        let h = c.snapshot();
        assert_eq!(*h.bins, vec![3, 3, 4]);
        let d = h.density();
        assert_eq!(
            d.bins.iter().map(|b| b.count).collect::<Vec<_>>(),
            [3, 3, 4]
        );
        assert_eq!(d.types, ["type 1"]);
        let cols = h.columns(TimeRange::new(0, 10), 2);
        assert!(
            (cols[0] - 5.0).abs() < 1e-9 && (cols[1] - 5.0).abs() < 1e-9,
            "{cols:?}"
        );
    }
}
