//! The performance targets: temporal T=1000 S=100 U=5 (≤ 2 s) and spatiotemporal
//! T=200 over a 4×4×4 hierarchy, U=4 (≤ 10 s), each qualities + full bisection + partitions.

use criterion::{Criterion, criterion_group, criterion_main};
use socscope_analysis::bench;

fn temporal(c: &mut Criterion) {
    let mut group = c.benchmark_group("ocelotl");
    group.sample_size(10);
    group.bench_function("temporal T1000 S100 U5", |b| {
        b.iter(|| bench::temporal(1000, 100, 5))
    });
    group.bench_function("spatiotemporal T200 4x4x4 U4", |b| {
        b.iter(|| bench::spatiotemporal(200, &[4, 4, 4], 4))
    });
    group.bench_function("spatiotemporal counts T200 4x4x4 U4", |b| {
        b.iter(|| bench::spatiotemporal_counts(200, &[4, 4, 4], 4))
    });
    group.finish();
}

criterion_group!(benches, temporal);
criterion_main!(benches);
