//! `socscope bench aggregate`: the analysis numbers of BENCHMARKS.md — microscopic model, first partial
//! statistics and density, and the Ocelotl qualities with their bisection.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Result, anyhow, bail};
use serde_json::json;
use socscope_analysis::density;
use socscope_analysis::loader;
use socscope_analysis::micro::{self, Metric, SliceGrid};
use socscope_analysis::stats::StatsConsumer;
use socscope_tracedb::Filter;

use crate::input::open_trace;
use crate::out::{errln, outln};

/// Milliseconds until the loader publishes its first snapshot (then the load is cancelled).
fn first_result_ms<S: Clone>(h: loader::LoaderHandle<S>) -> Result<f64> {
    let started = std::time::Instant::now();
    loop {
        let p = h.progress();
        if let Some(ms) = p.first_result_ms {
            h.cancel();
            return Ok(ms);
        }
        if let Some(e) = p.error {
            bail!("loading failed: {e}");
        }
        if p.finished || started.elapsed().as_secs() > 60 {
            bail!("the loader published no result");
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

/// `socscope bench aggregate`.
pub fn run(
    events: u64,
    trace: Option<PathBuf>,
    dir: Option<PathBuf>,
    json_out: bool,
) -> Result<ExitCode> {
    // One JSON document with or without --json: these numbers go to BENCHMARKS.md and to scripts;
    // --json only silences the progress note.
    let (dir, _guard) = super::scratch_dir(dir)?;
    let (path, written) = match trace {
        Some(t) => (t, None),
        None => {
            let p = dir.join(format!("socscope-bench-{events}.db"));
            if !p.exists() {
                if !json_out {
                    errln!(
                        "writing a synthetic trace of {events} events in {}",
                        dir.display()
                    );
                }
                let r = socscope_tracedb::bench::write_synthetic(&p, events)?;
                (p, Some(r.seconds))
            } else {
                (p, None)
            }
        }
    };
    let reader = open_trace(&path)?;
    let info = reader.info()?;
    let range = micro::trace_range(&reader)?;
    let grid = SliceGrid::new(range, 1000).ok_or_else(|| anyhow!("empty trace"))?;
    // Microscopic model T = 1000 over the whole trace: best of three (the first also warms
    // the page cache).
    let mut micro_ms = Vec::new();
    let mut shape = (0, 0);
    for metric in [Metric::Count, Metric::Duration] {
        let mut best = f64::INFINITY;
        for _ in 0..3 {
            let t = Instant::now();
            let m = micro::build(&reader, grid, metric, &Filter::all())?;
            best = best.min(t.elapsed().as_secs_f64() * 1e3);
            shape = (m.producers.len(), m.types.len());
        }
        micro_ms.push(best);
    }
    let stats_consumer = StatsConsumer::new(range);
    let req = stats_consumer.request(&path, &Filter::all());
    let stats_first = first_result_ms(loader::spawn(req, stats_consumer))?;
    let density_consumer = density::DensityConsumer::new(range, 1000).with_types();
    let req = density_consumer.request(&path, &Filter::all());
    let density_first = first_result_ms(loader::spawn(req, density_consumer))?;
    let t = Instant::now();
    let d = density::density(&reader, range, 1000, &Filter::all())?;
    let density_summary_ms = t.elapsed().as_secs_f64() * 1e3;
    let temporal = socscope_analysis::bench::temporal(1000, 100, 5);
    let spatio = socscope_analysis::bench::spatiotemporal(200, &[4, 4, 4], 4);
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    let v = json!({
        "trace": path,
        "events": info.event_count,
        "trace_s": range.len() as f64 * 1e-9,
        "write_s": written,
        "micro_t1000_count_ms": micro_ms[0],
        "micro_t1000_duration_ms": micro_ms[1],
        "micro_shape": {"slices": 1000, "producers": shape.0, "types": shape.1},
        "stats_first_result_ms": stats_first,
        "density_first_result_ms": density_first,
        "density_1000_bins_from_summary_ms": density_summary_ms,
        "density_total": d.total,
        "temporal_t1000_s100_u5": {
            "qualities_ms": ms(temporal.qualities),
            "bisection_ms": ms(temporal.bisection),
            "total_ms": ms(temporal.total()),
            "significant_ps": temporal.significant_ps,
        },
        "spatiotemporal_t200_4x4x4_u4": {
            "qualities_ms": ms(spatio.qualities),
            "bisection_ms": ms(spatio.bisection),
            "total_ms": ms(spatio.total()),
            "significant_ps": spatio.significant_ps,
        },
    });
    outln!("{}", serde_json::to_string_pretty(&v)?);
    Ok(ExitCode::SUCCESS)
}
