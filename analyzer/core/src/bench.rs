//! The benchmark workloads of the aggregation engine, as library functions so that both the
//! criterion benches and `socscope bench aggregate` run the very same thing.

use std::time::{Duration, Instant};

use crate::ocelotl::{
    MicroscopicModel, SpatialHierarchy, SpatiotemporalAggregation, TemporalAggregation,
};

/// splitmix64: a few lines of deterministic noise, so synthetic models are identical across
/// runs and machines without a random-number dependency.
struct Noise(u64);

impl Noise {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A state-duration-like model: every (slice, producer) splits a 1000-unit slice among the
/// types, with three phases over time, a perturbation on a block of producers and slices, and
/// 5 % noise — the structure that makes the aggregation find a handful of partitions.
pub fn synthetic_model(
    slices: usize,
    producers: usize,
    types: usize,
    seed: u64,
) -> MicroscopicModel {
    let mut noise = Noise(seed);
    let mut values = Vec::with_capacity(slices * producers * types);
    let mut weights = vec![0.0; types];
    for t in 0..slices {
        let phase = 3 * t / slices.max(1);
        for s in 0..producers {
            let perturbed = (2 * slices / 5..2 * slices / 5 + slices / 20 + 1).contains(&t)
                && (producers / 4..producers / 4 + producers / 8 + 1).contains(&s);
            let dominant = if perturbed {
                types - 1
            } else {
                (phase + s % 2) % types
            };
            for (u, w) in weights.iter_mut().enumerate() {
                let base = if u == dominant { 6.0 } else { 1.0 };
                *w = base * (0.95 + 0.1 * noise.next());
            }
            let total: f64 = weights.iter().sum();
            values.extend(weights.iter().map(|w| 1000.0 * w / total));
        }
    }
    MicroscopicModel::new(slices, producers, types, values)
        .expect("the generator fills every cell")
        .with_rate_divisor(1000.0)
}

/// Event counts (small integers) whose phases drift from producer to producer: many exact
/// ties and many distinct optimal partitions, the hard case for the bisection.
pub fn synthetic_count_model(
    slices: usize,
    producers: usize,
    types: usize,
    seed: u64,
) -> MicroscopicModel {
    let mut noise = Noise(seed);
    let mut values = Vec::with_capacity(slices * producers * types);
    let phase_len = (slices / 4).max(1);
    for t in 0..slices {
        for s in 0..producers {
            let phase = (t + 7 * s) / phase_len % types;
            for u in 0..types {
                let mean = if u == phase { 6.0 } else { 1.0 };
                values.push(mean + (noise.next() * 3.0).floor());
            }
        }
    }
    MicroscopicModel::new(slices, producers, types, values).expect("the generator fills every cell")
}

/// [`synthetic_model`] over a complete hierarchy with the given fan-out per level.
pub fn synthetic_hierarchical_model(
    slices: usize,
    fan_out: &[usize],
    types: usize,
    seed: u64,
) -> MicroscopicModel {
    let hierarchy = SpatialHierarchy::balanced(fan_out);
    let producers = hierarchy.leaf_count(hierarchy.root());
    synthetic_model(slices, producers, types, seed)
        .with_hierarchy(hierarchy)
        .expect("a balanced hierarchy has one leaf per producer")
}

/// Wall times of one run of a workload.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BenchRun {
    pub qualities: Duration,
    /// The full bisection. It keeps the partition of every evaluated p, so this also covers
    /// "all partitions" (the original recomputes them afterwards, one DP per listed p).
    pub bisection: Duration,
    pub significant_ps: usize,
    /// Areas (spatiotemporal) or parts (temporal) summed over the listed partitions, so the
    /// partitions are observably produced.
    pub listed_parts: usize,
}

impl BenchRun {
    pub fn total(&self) -> Duration {
        self.qualities + self.bisection
    }
}

/// Temporal qualities + full bisection (with every listed partition) on a synthetic model.
pub fn temporal(slices: usize, producers: usize, types: usize) -> BenchRun {
    let model = synthetic_model(slices, producers, types, 1);
    let started = Instant::now();
    let agg = TemporalAggregation::new(&model, false);
    let qualities = started.elapsed();
    let started = Instant::now();
    let list = agg.significant_ps(crate::ocelotl::DEFAULT_THRESHOLD);
    BenchRun {
        qualities,
        bisection: started.elapsed(),
        significant_ps: list.len(),
        listed_parts: list.entries().iter().map(|e| e.partition.n_parts()).sum(),
    }
}

/// Which temporal quality kernel [`temporal_with`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TemporalKernel {
    /// What [`TemporalAggregation::new`] uses: the vector logarithm where it reproduces this
    /// host's `log`, else the scalar loop.
    Default,
    /// The scalar loop, one `log` call per interval and series (the kernel before issue 29).
    Scalar,
}

/// [`temporal`] on a given model with a given kernel, returning the list too, so that two
/// kernels' results can be compared.
pub fn temporal_with(
    model: &MicroscopicModel,
    kernel: TemporalKernel,
) -> (
    BenchRun,
    crate::ocelotl::PList<crate::ocelotl::TemporalPartition>,
) {
    let started = Instant::now();
    let agg = match kernel {
        TemporalKernel::Default => TemporalAggregation::new(model, false),
        TemporalKernel::Scalar => TemporalAggregation::new_scalar(model, false),
    };
    let qualities = started.elapsed();
    let started = Instant::now();
    let list = agg.significant_ps(crate::ocelotl::DEFAULT_THRESHOLD);
    let run = BenchRun {
        qualities,
        bisection: started.elapsed(),
        significant_ps: list.len(),
        listed_parts: list.entries().iter().map(|e| e.partition.n_parts()).sum(),
    };
    (run, list)
}

/// Whether [`TemporalKernel::Default`] runs the vector kernel on this host.
pub fn temporal_vector_kernel_in_use() -> bool {
    crate::ocelotl::temporal_vector_kernel_in_use()
}

/// Spatiotemporal qualities + full bisection (with every listed partition) on a synthetic model
/// over a complete hierarchy (`[4, 4, 4]`: 85 nodes).
pub fn spatiotemporal(slices: usize, fan_out: &[usize], types: usize) -> BenchRun {
    spatiotemporal_run(&synthetic_hierarchical_model(slices, fan_out, types, 2))
}

/// Same as [`spatiotemporal`] on [`synthetic_count_model`] data: several times more
/// significant p values, so several times more DP evaluations.
pub fn spatiotemporal_counts(slices: usize, fan_out: &[usize], types: usize) -> BenchRun {
    let hierarchy = SpatialHierarchy::balanced(fan_out);
    let producers = hierarchy.leaf_count(hierarchy.root());
    let model = synthetic_count_model(slices, producers, types, 3)
        .with_hierarchy(hierarchy)
        .expect("a balanced hierarchy has one leaf per producer");
    spatiotemporal_run(&model)
}

fn spatiotemporal_run(model: &MicroscopicModel) -> BenchRun {
    let hierarchy = model.hierarchy().expect("built with a hierarchy");
    let started = Instant::now();
    let agg = SpatiotemporalAggregation::new(model, hierarchy);
    let qualities = started.elapsed();
    let started = Instant::now();
    let list = agg.significant_ps(crate::ocelotl::DEFAULT_THRESHOLD);
    BenchRun {
        qualities,
        bisection: started.elapsed(),
        significant_ps: list.len(),
        listed_parts: list
            .entries()
            .iter()
            .map(|e| e.partition.aggregates().len())
            .sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_slices_sum_to_the_rate_divisor() {
        let m = synthetic_model(10, 8, 3, 7);
        for t in 0..10 {
            for s in 0..8 {
                let sum: f64 = (0..3).map(|u| m.value(t, s, u)).sum();
                assert!((sum - 1000.0).abs() < 1e-9);
            }
        }
        assert_eq!(m, synthetic_model(10, 8, 3, 7));
    }

    #[test]
    fn tiny_workloads_run() {
        assert!(temporal(20, 4, 2).significant_ps >= 2);
        assert!(spatiotemporal(8, &[2, 2], 2).significant_ps >= 1);
    }
}
