//! `socscope bench upgrade`: `socscope upgrade` deriving the CPU tracks of a trace recorded before
//! them, against ingesting the same capture through the collector, in the same run (alternated).
//!
//! The capture is the simulated box at 20 k events/s with a zap every 5 s, written as a `.wire`
//! file; the anchor replays it into a fresh trace (`collect --replay`); the old trace is that
//! trace copied without its CPU tracks (as the collector wrote traces before them), then upgraded.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};
use socscope_sim::SimConfig;
use socscope_tracedb::{
    CPU_IDLE_TYPE, CpuTracks, Filter, ON_CPU_TYPE, TimeRange, TraceReader, TraceWriter,
    upgrade_trace,
};

use super::scratch_dir;
use crate::out::outln;

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Replays `wire` into a new trace in `dir`: (trace, seconds, events stored).
fn ingest(wire: &Path, dir: &Path) -> Result<(PathBuf, f64, u64)> {
    let (sessions, _, secs) = super::replay_wire(wire, dir)?;
    match sessions.as_slice() {
        [s] => Ok((s.path.clone(), secs, s.events)),
        _ => bail!(
            "{} sessions in {}, expected one",
            sessions.len(),
            wire.display()
        ),
    }
}

/// `fresh` as the collector wrote traces before the CPU tracks: the same types, producers and
/// events, without `on_cpu`/`cpu_idle`. Returns the events written.
fn without_cpu_tracks(fresh: &Path, old: &Path) -> Result<u64> {
    let is_track = |t: u32| t == ON_CPU_TYPE || t == CPU_IDLE_TYPE;
    let r = TraceReader::open(fresh)?;
    let mut w = TraceWriter::create(old, &r.info()?.meta)?;
    for t in r.event_types()?.iter().filter(|t| !is_track(t.id)) {
        w.add_event_type(t)?;
    }
    for p in r.producers()? {
        w.add_producer(&p)?;
    }
    let mut n = 0u64;
    for e in r.events_overlapping(TimeRange::all(), &Filter::all())? {
        let e = e?;
        if !is_track(e.type_id) {
            w.push(&e.event)?;
            n += 1;
        }
    }
    w.finish(true)?;
    Ok(n)
}

/// Times `socscope upgrade` of a copy of `old`: (seconds, slices derived).
fn upgrade(old: &Path, copy: &Path) -> Result<(f64, u64)> {
    std::fs::copy(old, copy).with_context(|| format!("cannot copy {}", old.display()))?;
    let started = Instant::now();
    let r = upgrade_trace(copy)?;
    let secs = started.elapsed().as_secs_f64();
    match r.cpu_tracks {
        CpuTracks::Derived { slices, .. } => Ok((secs, slices)),
        other => Err(anyhow!("the old trace was not upgraded: {other:?}")),
    }
}

/// Runs the benchmark: `seconds` of capture, `rounds` rounds.
pub fn run(seconds: f64, rounds: usize, dir: Option<PathBuf>, json_out: bool) -> Result<ExitCode> {
    let (dir, _tmp) = scratch_dir(dir)?;
    let wire = dir.join("capture.wire");
    let config = SimConfig {
        duration_s: seconds,
        rate: 20_000.0,
        zap_every_s: Some(5.0),
        board: "bench-stb",
        ..SimConfig::default()
    };
    let sim = super::record_sim(&config, &wire)?;
    // The old trace, once (not timed).
    let (fresh, _, _) = ingest(&wire, &dir.join("first"))?;
    let old = dir.join("old.db");
    let old_events = without_cpu_tracks(&fresh, &old)?;
    std::fs::remove_dir_all(dir.join("first")).ok();
    let mut rows: Vec<Value> = Vec::new();
    for round in 0..rounds.max(1) {
        let load_before = loadavg();
        let round_dir = dir.join(format!("round{round}"));
        let copy = dir.join(format!("old-{round}.db"));
        // Alternated: even rounds ingest first, odd rounds upgrade first.
        let (ingested, upgraded) = if round % 2 == 0 {
            let i = ingest(&wire, &round_dir)?;
            (i, upgrade(&old, &copy)?)
        } else {
            let u = upgrade(&old, &copy)?;
            (ingest(&wire, &round_dir)?, u)
        };
        let (_, ingest_s, stored) = ingested;
        let (upgrade_s, slices) = upgraded;
        let row = json!({
            "round": round,
            "ingest_s": ingest_s,
            "upgrade_s": upgrade_s,
            "upgrade_over_ingest": upgrade_s / ingest_s.max(1e-9),
            "stored_events": stored,
            "slices": slices,
            "load_before": load_before,
            "load_after": loadavg(),
        });
        if !json_out {
            outln!(
                "round {round}: ingest {ingest_s:.2} s, upgrade {upgrade_s:.2} s ({:.2}x of ingest), \
                 {slices} slices; load {} -> {}",
                upgrade_s / ingest_s.max(1e-9),
                row["load_before"].as_str().unwrap_or_default(),
                row["load_after"].as_str().unwrap_or_default()
            );
        }
        rows.push(row);
        std::fs::remove_dir_all(&round_dir).ok();
        std::fs::remove_file(&copy).ok();
    }
    let ratios: Vec<f64> = rows
        .iter()
        .filter_map(|r| r["upgrade_over_ingest"].as_f64())
        .collect();
    let lo = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = ratios.iter().copied().fold(0.0, f64::max);
    let doc = json!({
        "records": sim.events,
        "seconds": seconds,
        "old_trace_events": old_events,
        "old_trace_bytes": std::fs::metadata(&old).map(|m| m.len()).unwrap_or(0),
        "rounds": rows,
        "upgrade_over_ingest_min": lo,
        "upgrade_over_ingest_max": hi,
    });
    if json_out {
        outln!("{doc}");
    } else {
        outln!(
            "{} records ({seconds} s at 20 k events/s), old trace {old_events} events: upgrade \
             {lo:.2}-{hi:.2}x of the ingest's time",
            sim.events
        );
    }
    Ok(ExitCode::SUCCESS)
}
