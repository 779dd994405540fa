//! Store benchmarks: raw chunk-write rate, write with summary, and reading 10 k consecutive
//! events at a random time. `bytes/event` is printed once per run (criterion measures time only).
// criterion_group! generates undocumented public functions; a benchmark has no API to document.
#![allow(missing_docs)]

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use socscope_tracedb::{Filter, TimeRange, TraceReader, WriterConfig, bench};

const WRITE_EVENTS: u64 = 200_000;
const READ_TRACE_EVENTS: u64 = 2_000_000;

fn write(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let mut g = c.benchmark_group("write");
    g.throughput(Throughput::Elements(WRITE_EVENTS));
    g.sample_size(10);
    for (name, summary) in [("raw_chunks", false), ("with_summary", true)] {
        let mut n = 0;
        g.bench_function(name, |b| {
            b.iter_batched(
                || {
                    n += 1;
                    dir.path().join(format!("{name}-{n}.db"))
                },
                |path| {
                    let report = bench::write_synthetic_with(
                        &path,
                        WRITE_EVENTS,
                        WriterConfig {
                            summary,
                            ..WriterConfig::default()
                        },
                    )
                    .unwrap();
                    let _ = std::fs::remove_file(&path);
                    report
                },
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
    let report = bench::write_synthetic(&dir.path().join("size.db"), WRITE_EVENTS).unwrap();
    println!(
        "write/bytes_per_event: {:.2} B/event on disk ({:.2} B/event in chunk blobs)",
        report.bytes_per_event, report.chunk_bytes_per_event
    );
}

fn read(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("read.db");
    bench::write_synthetic(&path, READ_TRACE_EVENTS).unwrap();
    let reader = TraceReader::open(&path).unwrap();
    let info = reader.info().unwrap();
    let mut rng = bench::SplitMix::new(1);
    let mut g = c.benchmark_group("read");
    g.throughput(Throughput::Elements(10_000));
    g.bench_function("10k_consecutive_at_random_time", |b| {
        b.iter(|| {
            let t = info.t_min + rng.below((info.t_max - info.t_min) as u64) as i64;
            reader
                .events(TimeRange::from(t), &Filter::all())
                .unwrap()
                .take(10_000)
                .map(|e| e.unwrap().ts)
                .fold(0i64, i64::wrapping_add)
        })
    });
    g.finish();
}

criterion_group!(benches, write, read);
criterion_main!(benches);
