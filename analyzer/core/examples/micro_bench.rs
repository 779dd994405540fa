//! Times the microscopic model of a whole trace, for profiling:
//! `cargo run --release -p socscope-analysis --example micro_bench -- TRACE [count|duration] [RUNS] [SLICES]`.

use std::time::Instant;

use socscope_analysis::micro::{self, Metric, SliceGrid};
use socscope_tracedb::{Filter, TraceReader};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let path = args
        .get(1)
        .ok_or("usage: micro_bench TRACE [METRIC] [RUNS] [SLICES]")?;
    let metric: Metric = args.get(2).map_or("count", String::as_str).parse()?;
    let runs: usize = args.get(3).map_or(Ok(5), |s| s.parse())?;
    let slices: usize = args.get(4).map_or(Ok(1000), |s| s.parse())?;
    let reader = TraceReader::open(path)?;
    let grid = SliceGrid::new(micro::trace_range(&reader)?, slices).ok_or("empty trace")?;
    for _ in 0..runs {
        let t = Instant::now();
        let m = micro::build(&reader, grid, metric, &Filter::all())?;
        let elapsed = t.elapsed();
        // FNV-1a over the values' bits: builds compared on the same trace must agree.
        let digest = m.values().iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, v| {
            (h ^ v.to_bits()).wrapping_mul(0x0100_0000_01b3)
        });
        println!(
            "{metric} T={slices}: {:.1} ms ({} producers, {} types, values {digest:016x})",
            elapsed.as_secs_f64() * 1e3,
            m.producers.len(),
            m.types.len()
        );
    }
    Ok(())
}
