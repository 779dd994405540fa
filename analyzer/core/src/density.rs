//! Event density of an interval (Framesoc RT-460 §3.4): events per bin, per type, with type
//! and producer filters — from the summary at once ([`density`]), or progressively from the
//! events through the [loader](crate::loader) ([`DensityConsumer`]).

use std::collections::HashMap;
use std::path::Path;

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

/// Counts events into bins as chunks arrive.
#[derive(Debug, Clone)]
pub struct DensityConsumer {
    grid: SliceGrid,
    type_index: HashMap<TypeId, usize>,
    types: Vec<String>,
    counts: Vec<u64>,
    loaded_until: i64,
}

impl DensityConsumer {
    /// A consumer of `bins` bins over `range`, for the trace's types (`None` if the interval is
    /// empty or unbounded).
    pub fn new(reader: &TraceReader, range: TimeRange, bins: usize) -> Result<Option<Self>> {
        let Some(grid) = SliceGrid::new(range, bins.max(1)) else {
            return Ok(None);
        };
        let mut types = reader.event_types()?;
        types.sort_by_key(|t| t.id);
        let nu = types.len();
        Ok(Some(Self {
            grid,
            type_index: types.iter().enumerate().map(|(i, t)| (t.id, i)).collect(),
            types: types.into_iter().map(|t| t.name).collect(),
            counts: vec![0; grid.slices * nu],
            loaded_until: range.start,
        }))
    }

    /// The load request (RT-460's 1 M events per chunk).
    pub fn request(&self, trace: &Path, filter: &Filter) -> LoadRequest {
        LoadRequest {
            trace: trace.to_path_buf(),
            range: self.grid.range,
            filter: filter.clone(),
            chunk_events: chunk_size::DENSITY,
        }
    }
}

impl Consumer for DensityConsumer {
    type Snapshot = Density;

    fn consume(&mut self, events: &[StoredEvent]) {
        let nu = self.types.len();
        for e in events {
            if let (Some(i), Some(&u)) = (self.grid.slice_of(e.ts), self.type_index.get(&e.type_id))
            {
                self.counts[i * nu + u] += 1;
            }
            self.loaded_until = self.loaded_until.max(e.ts);
        }
    }

    fn snapshot(&self) -> Density {
        // Keep the types that have events so the partial and the summary results agree.
        let nu = self.types.len();
        let keep: Vec<usize> = (0..nu)
            .filter(|&u| (0..self.grid.slices).any(|i| self.counts[i * nu + u] > 0))
            .collect();
        let mut counts = Vec::with_capacity(self.grid.slices * keep.len());
        for i in 0..self.grid.slices {
            counts.extend(keep.iter().map(|&u| self.counts[i * nu + u]));
        }
        assemble(
            &self.grid,
            keep.iter().map(|&u| self.types[u].clone()).collect(),
            &counts,
            self.loaded_until,
        )
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
        let c = DensityConsumer::new(&reader, range, 4).unwrap().unwrap();
        let mut req = c.request(&path, &Filter::all());
        req.chunk_events = 2;
        let (snap, progress) = loader::spawn(req, c).wait();
        assert!(progress.chunks > 1);
        let mut snap = snap.unwrap();
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
}
