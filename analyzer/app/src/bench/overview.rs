//! `socscope bench overview`: how fast the Ocelotl and TraceViz views get their first picture — the
//! Ocelotl pipeline (microscopic model a few slices at a time, then the temporal aggregation with its
//! bisection) until its first published overview and until the whole one, on a cold model cache, and
//! the TraceViz timeline of the whole trace at one value per pixel.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow, bail};
use serde_json::json;
use socscope_analysis::actors::{TimelineRequest, spawn_timeline};
use socscope_analysis::micro;
use socscope_analysis::overview::{self, ModelCache, ModelKey, OcelotlRequest, OcelotlSettings};
use socscope_analysis::sync::ViewFilter;
use socscope_analysis::traceviz::Statistic;
use socscope_tracedb::Filter;

use crate::input::open_trace;
use crate::out::{errln, outln};

/// (first result ms, all done ms) of a load, waiting at most a minute.
fn timings<S: Clone>(h: &socscope_analysis::loader::LoaderHandle<S>) -> Result<(f64, f64)> {
    let started = Instant::now();
    loop {
        let p = h.progress();
        if let Some(e) = p.error {
            bail!("loading failed: {e}");
        }
        if p.finished {
            let first = p
                .first_result_ms
                .ok_or_else(|| anyhow!("the loader published no result"))?;
            return Ok((first, started.elapsed().as_secs_f64() * 1e3));
        }
        if started.elapsed() > Duration::from_secs(120) {
            bail!("the load did not finish within two minutes");
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn summary(mut v: Vec<f64>) -> serde_json::Value {
    v.sort_by(f64::total_cmp);
    let median = v[v.len() / 2];
    json!({"min": v[0], "median": median, "max": v[v.len() - 1], "runs": v})
}

/// `socscope bench overview`.
pub fn run(
    events: u64,
    trace: Option<PathBuf>,
    dir: Option<PathBuf>,
    runs: usize,
    slices: usize,
    width: usize,
    json_out: bool,
) -> Result<ExitCode> {
    let (dir, _guard) = super::scratch_dir(dir)?;
    let path = match trace {
        Some(t) => t,
        None => {
            // The same synthetic trace as `bench read` (found there when already written).
            let p = dir.join(format!("read-{events}.db"));
            if !p.exists() {
                if !json_out {
                    errln!(
                        "writing a synthetic trace of {events} events in {}",
                        dir.display()
                    );
                }
                socscope_tracedb::bench::write_synthetic(&p, events)?;
            }
            p
        }
    };
    let reader = open_trace(&path)?;
    let info = reader.info()?;
    let range = micro::trace_range(&reader)?;
    drop(reader);
    let runs = runs.max(1);
    let (mut first, mut whole) = (Vec::new(), Vec::new());
    let mut shape = (0, 0, 0);
    for _ in 0..runs {
        // A new cache each run: the model is read from the trace every time.
        let cache = ModelCache::new(2);
        let request = OcelotlRequest {
            key: ModelKey {
                trace: path.clone(),
                interval: range,
                slices,
                metric: micro::Metric::Count,
                filter: ViewFilter::default(),
            },
            filter: Filter::all(),
            settings: OcelotlSettings {
                slices,
                ..OcelotlSettings::default()
            },
        };
        let h = overview::spawn(request, cache);
        let (f, w) = timings(&h)?;
        first.push(f);
        whole.push(w);
        if let Some(o) = h.snapshot() {
            shape = (
                o.micro.producers.len(),
                o.micro.types.len(),
                o.aggregated.as_ref().map_or(0, |a| a.ps().len()),
            );
        }
    }
    let mut timeline = Vec::new();
    for _ in 0..runs {
        let h = spawn_timeline(TimelineRequest {
            trace: path.clone(),
            range,
            width,
            statistic: Statistic::Density,
            filter: Filter::all(),
        });
        timeline.push(timings(&h)?.1);
    }
    let v = json!({
        "trace": path.display().to_string(),
        "events": info.event_count,
        "producers": shape.0,
        "types": shape.1,
        "slices": slices,
        "listed_p": shape.2,
        "ocelotl_first_overview_ms": summary(first),
        "ocelotl_whole_overview_ms": summary(whole),
        "traceviz_width": width,
        "traceviz_timeline_ms": summary(timeline),
    });
    outln!("{}", serde_json::to_string_pretty(&v)?);
    Ok(ExitCode::SUCCESS)
}
