//! The event density chart's view model (RT-460 §3.4): events counted into fine time bins while they
//! load, resampled to whatever pixel width and visible interval the chart has.
//!
//! Start here: [`DensityConsumer`] and [`DensityHistogram::columns`].

use std::sync::Arc;

use socscope_tracedb::{StoredEvent, TimeRange};

use crate::loader::Consumer;

/// Fine bins per load: enough to zoom a long way in the chart before reloading.
pub const FINE_BINS: usize = 16_384;

/// Counts per fine bin over the loaded interval.
#[derive(Clone, Debug, PartialEq)]
pub struct DensityHistogram {
    /// The interval the bins cover.
    pub range: TimeRange,
    /// Events per bin (events starting in it).
    pub bins: Arc<Vec<u64>>,
}

impl DensityHistogram {
    /// An empty histogram over `range` with `n` bins.
    pub fn new(range: TimeRange, n: usize) -> Self {
        Self {
            range,
            bins: Arc::new(vec![0; n.max(1)]),
        }
    }

    /// Events counted.
    pub fn total(&self) -> u64 {
        self.bins.iter().sum()
    }

    fn bin_of(&self, t: i64) -> Option<usize> {
        if !self.range.contains(t) {
            return None;
        }
        let n = self.bins.len() as i128;
        Some((((t - self.range.start) as i128 * n) / self.range.len().max(1) as i128) as usize)
    }

    /// Events per pixel column for `view` drawn `width` columns wide, spreading each fine bin over the
    /// columns it overlaps (so the sum over the loaded interval is preserved).
    pub fn columns(&self, view: TimeRange, width: usize) -> Vec<f64> {
        let width = width.max(1);
        let mut out = vec![0.0; width];
        if view.is_empty() {
            return out;
        }
        let n = self.bins.len();
        let bin_ns = self.range.len() as f64 / n as f64;
        let col_ns = view.len() as f64 / width as f64;
        let first = (((view.start - self.range.start) as f64 / bin_ns)
            .floor()
            .max(0.0)) as usize;
        let last = (((view.end - self.range.start) as f64 / bin_ns)
            .ceil()
            .max(0.0) as usize)
            .min(n);
        for b in first..last {
            let count = self.bins[b];
            if count == 0 {
                continue;
            }
            let b0 = self.range.start as f64 + b as f64 * bin_ns;
            let b1 = b0 + bin_ns;
            let c0 = ((b0 - view.start as f64) / col_ns).floor().max(0.0) as usize;
            let c1 = (((b1 - view.start as f64) / col_ns).ceil().max(0.0) as usize).min(width);
            for (c, slot) in out.iter_mut().enumerate().take(c1).skip(c0) {
                let x0 = view.start as f64 + c as f64 * col_ns;
                let overlap = (b1.min(x0 + col_ns) - b0.max(x0)).max(0.0);
                *slot += count as f64 * overlap / bin_ns;
            }
        }
        out
    }
}

/// Counts events into a [`DensityHistogram`] on a loader thread.
#[derive(Debug)]
pub struct DensityConsumer {
    hist: DensityHistogram,
    bins: Vec<u64>,
}

impl DensityConsumer {
    /// Bins over `range`.
    pub fn new(range: TimeRange, bins: usize) -> Self {
        let hist = DensityHistogram::new(range, bins);
        let bins = vec![0; hist.bins.len()];
        Self { hist, bins }
    }
}

impl Consumer for DensityConsumer {
    type Snapshot = DensityHistogram;

    fn consume(&mut self, events: &[StoredEvent]) {
        for e in events {
            if let Some(b) = self.hist.bin_of(e.ts) {
                self.bins[b] += 1;
            }
        }
    }

    fn snapshot(&self) -> DensityHistogram {
        DensityHistogram {
            range: self.hist.range,
            bins: Arc::new(self.bins.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use socscope_tracedb::Event;

    fn ev(ts: i64) -> StoredEvent {
        StoredEvent {
            id: ts,
            event: Event::punctual(ts, 1, 1, None),
        }
    }

    #[test]
    fn counts_land_in_their_bins_and_events_outside_are_ignored() {
        let mut c = DensityConsumer::new(TimeRange::new(0, 100), 10);
        c.consume(&[ev(0), ev(9), ev(10), ev(99), ev(100), ev(-1)]);
        let h = c.snapshot();
        assert_eq!(*h.bins, vec![2, 1, 0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(h.total(), 4);
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
}
