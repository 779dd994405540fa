//! TraceViz (IHM'16, "TraceViz visualization principles"): one histogram of W bins (W = the
//! pixels of the view) per actor for a statistic — event density, activity time or delay between
//! events —, the outline (the actors' histograms summed per bin), actor groups aggregated per bin
//! (max, min, average, median), and Slick Graphs: the outline smoothed by a Gaussian kernel of
//! width σ cut at ±3σ (eq. 1), shaded by the luminance of eq. 2.
//!
//! Start here: [`timeline`], [`group`], [`slick`] and [`luminance`].

use std::collections::HashMap;
use std::str::FromStr;

use serde::Serialize;
use socscope_tracedb::{Filter, ProducerId, Result, StoreError, TimeRange, Timestamp, TraceReader};

use crate::micro::{self, Metric, SliceGrid};

/// What a histogram bin holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Statistic {
    /// Events of the actor starting in the bin.
    #[default]
    Density,
    /// Nanoseconds the actor spent in states inside the bin.
    Activity,
    /// The longest delay, in nanoseconds, between an event of the actor starting in the bin
    /// and the actor's previous event in the interval.
    Delay,
}

impl FromStr for Statistic {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "density" => Ok(Statistic::Density),
            "activity" => Ok(Statistic::Activity),
            "delay" => Ok(Statistic::Delay),
            _ => Err(format!(
                "unknown statistic {s:?}: expected density, activity or delay"
            )),
        }
    }
}

/// The histogram of one actor.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ActorHist {
    pub producer: ProducerId,
    pub name: String,
    pub values: Vec<f64>,
}

/// The TraceViz timeline and outline of an interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Timeline {
    pub start: Timestamp,
    pub end: Timestamp,
    pub statistic: Statistic,
    /// Actors with a non-zero bin, in producer-tree order.
    pub actors: Vec<ActorHist>,
    /// Per bin, the sum over actors.
    pub outline: Vec<f64>,
}

/// The per-actor histograms of `range` at `width` bins. Density and activity come from the
/// store summary; delays need the event times and read the events of the interval.
pub fn timeline(
    reader: &TraceReader,
    range: TimeRange,
    width: usize,
    statistic: Statistic,
    filter: &Filter,
) -> Result<Timeline> {
    let grid = SliceGrid::new(range, width.max(1)).ok_or_else(|| {
        StoreError::InvalidRequest("a timeline needs a bounded, non-empty interval".into())
    })?;
    let w = grid.slices;
    let mut actors = match statistic {
        Statistic::Density | Statistic::Activity => {
            let metric = if statistic == Statistic::Density {
                Metric::Count
            } else {
                Metric::Duration
            };
            let m = micro::build(reader, grid, metric, filter)?;
            m.producers
                .iter()
                .enumerate()
                .map(|(p, prod)| ActorHist {
                    producer: prod.id,
                    name: prod.name.clone(),
                    values: (0..w)
                        .map(|t| (0..m.types.len()).map(|u| m.value(t, p, u)).sum())
                        .collect(),
                })
                .collect::<Vec<_>>()
        }
        Statistic::Delay => {
            let names: HashMap<ProducerId, String> = reader
                .producers()?
                .into_iter()
                .map(|p| (p.id, p.name))
                .collect();
            let mut last: HashMap<ProducerId, Timestamp> = HashMap::new();
            let mut hist: HashMap<ProducerId, Vec<f64>> = HashMap::new();
            for e in reader.events(range, filter)? {
                let e = e?;
                if let Some(prev) = last.insert(e.producer, e.ts)
                    && let Some(i) = grid.slice_of(e.ts)
                {
                    let v = &mut hist.entry(e.producer).or_insert_with(|| vec![0.0; w])[i];
                    *v = v.max((e.ts - prev) as f64);
                }
            }
            let mut a: Vec<ActorHist> = hist
                .into_iter()
                .filter(|(_, v)| v.iter().any(|x| *x != 0.0))
                .map(|(p, values)| ActorHist {
                    producer: p,
                    name: names
                        .get(&p)
                        .cloned()
                        .unwrap_or_else(|| format!("producer {p}")),
                    values,
                })
                .collect();
            a.sort_by_key(|x| x.producer);
            a
        }
    };
    actors.retain(|a| a.values.iter().any(|v| *v != 0.0));
    let mut outline = vec![0.0; w];
    for a in &actors {
        for (o, v) in outline.iter_mut().zip(&a.values) {
            *o += v;
        }
    }
    Ok(Timeline {
        start: range.start,
        end: range.end,
        statistic,
        actors,
        outline,
    })
}

/// How a group of actors becomes one histogram, bin by bin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum GroupOp {
    #[default]
    Max,
    Min,
    Average,
    /// The middle value (the mean of the two middle ones for an even count).
    Median,
}

impl FromStr for GroupOp {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "max" => Ok(GroupOp::Max),
            "min" => Ok(GroupOp::Min),
            "average" | "mean" => Ok(GroupOp::Average),
            "median" => Ok(GroupOp::Median),
            _ => Err(format!(
                "unknown group operator {s:?}: expected max, min, average or median"
            )),
        }
    }
}

/// The histogram of a group: `op` over the members' values in each bin (empty if no member).
pub fn group(members: &[&[f64]], op: GroupOp) -> Vec<f64> {
    let Some(w) = members.iter().map(|m| m.len()).min() else {
        return Vec::new();
    };
    let mut column = Vec::with_capacity(members.len());
    (0..w)
        .map(|i| {
            column.clear();
            column.extend(members.iter().map(|m| m[i]));
            match op {
                GroupOp::Max => column.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                GroupOp::Min => column.iter().copied().fold(f64::INFINITY, f64::min),
                GroupOp::Average => column.iter().sum::<f64>() / column.len() as f64,
                GroupOp::Median => {
                    column.sort_by(f64::total_cmp);
                    let n = column.len();
                    if n % 2 == 1 {
                        column[n / 2]
                    } else {
                        (column[n / 2 - 1] + column[n / 2]) / 2.0
                    }
                }
            }
        })
        .collect()
}

/// The sampled Gaussian `G(n) = e^(−n²/2σ²) / (√(2π)·σ)` for `n` in `−⌊3σ⌋..=⌊3σ⌋` (index 0
/// is `n = −⌊3σ⌋`); `[1]` when σ ≤ 0.
pub fn gaussian_kernel(sigma: f64) -> Vec<f64> {
    if sigma.is_nan() || sigma <= 0.0 {
        return vec![1.0];
    }
    let r = (3.0 * sigma).floor() as i64;
    let norm = 1.0 / ((2.0 * std::f64::consts::PI).sqrt() * sigma);
    (-r..=r)
        .map(|n| norm * (-((n * n) as f64) / (2.0 * sigma * sigma)).exp())
        .collect()
}

/// Slick Graph smoothing (eq. 1): `SLG(i) = Σ_{n=−⌊3σ⌋}^{⌊3σ⌋} H(i − n)·G(n)`, bins outside the
/// histogram counting as 0.
pub fn slick(hist: &[f64], sigma: f64) -> Vec<f64> {
    let k = gaussian_kernel(sigma);
    let r = (k.len() / 2) as i64;
    (0..hist.len() as i64)
        .map(|i| {
            k.iter()
                .enumerate()
                .map(|(j, g)| {
                    let n = j as i64 - r;
                    let at = i - n;
                    if at >= 0 && (at as usize) < hist.len() {
                        hist[at as usize] * g
                    } else {
                        0.0
                    }
                })
                .sum()
        })
        .collect()
}

/// Slick Graph shading (eq. 2): `L = 1 / (1 + SLG / H)` where `H ≠ 0`, else 0 — 0.5 where the
/// smoothed value equals the real one, towards 1 (white) at local minima of the smoothed curve
/// relative to the data, towards 0 (black) at local maxima.
pub fn luminance(hist: &[f64], smoothed: &[f64]) -> Vec<f64> {
    hist.iter()
        .zip(smoothed)
        .map(|(&h, &s)| if h != 0.0 { 1.0 / (1.0 + s / h) } else { 0.0 })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{self, Spec};

    #[test]
    fn per_actor_histograms_and_outline() {
        let (_dir, path) = testutil::write_spec(&Spec::small());
        let reader = TraceReader::open(&path).unwrap();
        let range = TimeRange::new(0, 1000);
        let t = timeline(&reader, range, 4, Statistic::Density, &Filter::all()).unwrap();
        let by: HashMap<&str, &[f64]> = t
            .actors
            .iter()
            .map(|a| (a.name.as_str(), a.values.as_slice()))
            .collect();
        assert_eq!(by["app"], &[1.0, 0.0, 0.0, 0.0]);
        assert_eq!(by["app/main"], &[1.0, 1.0, 1.0, 0.0]);
        assert_eq!(by["app/worker"], &[1.0, 2.0, 1.0, 0.0]);
        assert_eq!(by["irq/7"], &[0.0, 0.0, 1.0, 1.0]);
        assert_eq!(t.outline, [3.0, 3.0, 3.0, 1.0]);
        let t = timeline(&reader, range, 4, Statistic::Activity, &Filter::all()).unwrap();
        let main = t.actors.iter().find(|a| a.name == "app/main").unwrap();
        assert_eq!(main.values, [150.0, 150.0, 0.0, 0.0]);
        assert_eq!(t.outline, [150.0, 150.0 + 50.0, 250.0 + 20.0, 150.0]);
        let t = timeline(&reader, range, 4, Statistic::Delay, &Filter::all()).unwrap();
        // app/worker: events at 0, 250, 450, 700 → delays 250 (bin 1), 200 (bin 1), 250 (bin 2).
        let worker = t.actors.iter().find(|a| a.name == "app/worker").unwrap();
        assert_eq!(worker.values, [0.0, 250.0, 250.0, 0.0]);
    }

    #[test]
    fn group_operators() {
        let a = [1.0, 5.0, 3.0];
        let b = [2.0, 1.0, 3.0];
        let c = [9.0, 0.0, 3.0];
        let m: [&[f64]; 3] = [&a, &b, &c];
        assert_eq!(group(&m, GroupOp::Max), [9.0, 5.0, 3.0]);
        assert_eq!(group(&m, GroupOp::Min), [1.0, 0.0, 3.0]);
        assert_eq!(group(&m, GroupOp::Average), [4.0, 2.0, 3.0]);
        assert_eq!(group(&m, GroupOp::Median), [2.0, 1.0, 3.0]);
        assert_eq!(group(&m[..2], GroupOp::Median), [1.5, 3.0, 3.0]);
        assert!(group(&[], GroupOp::Max).is_empty());
    }

    #[test]
    fn gaussian_smoothing_and_luminance() {
        let k = gaussian_kernel(1.0);
        assert_eq!(k.len(), 7);
        assert!((k[3] - 1.0 / (2.0 * std::f64::consts::PI).sqrt()).abs() < 1e-15);
        assert!((k.iter().sum::<f64>() - 0.99973).abs() < 1e-5);
        assert_eq!(gaussian_kernel(0.0), [1.0]);
        assert_eq!(gaussian_kernel(0.3).len(), 1);
        // σ = 0 is the identity.
        let h = [0.0, 4.0, 0.0, 0.0, 2.0];
        assert_eq!(slick(&h, 0.0), h);
        // A spike spreads symmetrically and keeps its mass (away from the edges).
        let mut spike = vec![0.0; 21];
        spike[10] = 1.0;
        let s = slick(&spike, 2.0);
        assert!((s[8] - s[12]).abs() < 1e-15 && s[10] > s[9] && s[9] > s[8]);
        assert_eq!(s[3], 0.0); // beyond ±⌊3σ⌋ = 6
        assert!(s[4] > 0.0);
        let l = luminance(&[2.0, 0.0, 1.0, 4.0], &[2.0, 5.0, 3.0, 0.0]);
        assert_eq!(l, [0.5, 0.0, 0.25, 1.0]);
    }
}
