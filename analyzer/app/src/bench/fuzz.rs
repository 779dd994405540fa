//! `socscope bench fuzz`: the stable mutation fuzzer of the test suite, for long runs — every decoder
//! that reads outside data (wire, each importer, the trace-cmd and CTF readers, the chunk decoder),
//! seeded from a simulated board's capture, the shared trace files, the KPTrace sample set and the
//! chunks of a real trace.

use crate::out::outln;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use serde_json::json;
use socscope_collector::fuzz::{self, Target};
use socscope_collector::{IngestConfig, session::Ingest};
use socscope_sim::SimConfig;
use socscope_tracedb::TraceReader;

/// The longest input for the text and wire targets (chunks are kept whole).
const MAX_LEN: usize = 1024;

/// `rel` found above the executable or above this crate's sources.
fn locate(rel: &str) -> Result<PathBuf> {
    super::find_above(rel, Path::is_dir)
        .with_context(|| format!("cannot find `{rel}` above the executable or the sources"))
}

fn sim_capture(rate: f64, duration_s: f64) -> Result<Vec<u8>> {
    let mut link = socscope_sim::transport::WriterTransport::new(Vec::new());
    socscope_sim::run(
        &SimConfig {
            seed: 3,
            duration_s,
            rate,
            ..SimConfig::default()
        },
        &mut link,
    )?;
    link.finish()?;
    Ok(link.into_inner())
}

fn chunk_seeds() -> Result<Vec<Vec<u8>>> {
    let dir = std::env::temp_dir().join(format!("socscope-fuzz-seeds-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut ingest = Ingest::new(IngestConfig::new(&dir), "fuzz seeds");
    ingest.feed(&sim_capture(20_000.0, 0.3)?)?;
    let (reports, _) = ingest.finish()?;
    let Some(report) = reports.first() else {
        bail!("the seed capture made no trace");
    };
    let blobs = {
        let reader = TraceReader::open(&report.path)?;
        let mut st = reader
            .connection()
            .prepare("SELECT data FROM chunk ORDER BY id")?;
        st.query_map([], |r| r.get::<usize, Vec<u8>>(0))?
            .collect::<rusqlite::Result<Vec<_>>>()?
    };
    let _ = std::fs::remove_dir_all(&dir);
    Ok(blobs)
}

fn seeds(target: Target) -> Result<Vec<Vec<u8>>> {
    Ok(match target {
        Target::Wire => fuzz::seed_windows(
            &[sim_capture(1_000.0, 2.0)?, sim_capture(20_000.0, 0.3)?],
            MAX_LEN,
        ),
        Target::Chunk => chunk_seeds()?,
        Target::Refusal => fuzz::refusal_seeds(),
        Target::Format(format) => fuzz::format_seeds(
            format,
            &|rel: &str| {
                locate(rel)
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::NotFound, e.to_string()))
            },
            MAX_LEN,
        )
        .with_context(|| format!("while reading the seeds of {}", format.name()))?,
    })
}

/// The targets' names, for `--target`'s help and its error.
pub fn target_names() -> String {
    Target::ALL.map(Target::name).join(", ")
}

pub fn run(inputs: u64, targets: &[String], seed: u64, json: bool) -> Result<ExitCode> {
    let chosen: Vec<Target> = if targets.is_empty() {
        Target::ALL.to_vec()
    } else {
        let mut out = Vec::new();
        for name in targets {
            let Some(t) = Target::ALL.into_iter().find(|t| t.name() == name) else {
                bail!("--target {name}: one of {}", target_names());
            };
            out.push(t);
        }
        out
    };
    let mut rows = Vec::new();
    let mut panics = 0;
    for target in chosen {
        let seeds = seeds(target)?;
        let max_len = seeds.iter().map(Vec::len).max().unwrap_or(0).max(MAX_LEN);
        let r = fuzz::run(target, &seeds, inputs, max_len, seed);
        panics += r.panics;
        let first = r.first_panic.as_ref().map(|(input, what)| {
            json!({"message": what, "input_hex": input.iter().map(|b| format!("{b:02x}")).collect::<String>()})
        });
        if !json {
            outln!(
                "{:8} {:>12} inputs  {:>12} accepted  {:>8.1} MB  {:>8.1} s  {:>10.0} inputs/s  {} panics",
                target.name(),
                r.inputs,
                r.accepted,
                r.bytes as f64 / 1e6,
                r.elapsed.as_secs_f64(),
                r.inputs as f64 / r.elapsed.as_secs_f64().max(1e-9),
                r.panics
            );
            if let Some((input, what)) = &r.first_panic {
                outln!(
                    "  first panic: {what}; input ({} bytes): {input:02x?}",
                    input.len()
                );
            }
        }
        rows.push(json!({
            "target": target.name(), "inputs": r.inputs, "accepted": r.accepted, "bytes": r.bytes,
            "seconds": r.elapsed.as_secs_f64(), "panics": r.panics, "first_panic": first,
            "seeds": seeds.len(),
        }));
    }
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&json!({"seed": seed, "targets": rows}))?
        );
    }
    Ok(if panics == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
