//! Fuzzing on stable (issue 10, row 14): the mutation runner of `socscope_collector::fuzz`, seeded from
//! real captures (a simulated board's stream, the version-1 sample capture), the shared trace files
//! (`shared/data/traces/`: text captures, trace-cmd `.dat`, CTF), the KPTrace sample set and the chunks of
//! a real trace, drives 100 000 inputs
//! through each decoder that reads outside data: no input may panic. `socscope bench fuzz --inputs N`
//! runs the same for long runs.

mod support;

use std::path::{Path, PathBuf};

use socscope_collector::IngestConfig;
use socscope_collector::fuzz::{self, Format, Target};
use socscope_collector::session::Ingest;
use socscope_sim::SimConfig;
use socscope_tracedb::TraceReader;
use support::capture_file;

const INPUTS: u64 = 100_000;
const MAX_LEN: usize = 1024;

fn read(path: PathBuf) -> Vec<u8> {
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel)
}

fn shared(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/data/traces")
        .join(rel)
}

/// A simulated board's stream; at a low rate its `Events` frames are a few hundred bytes, so that
/// small inputs hold whole frames.
fn sim_capture(dir: &Path, rate: f64) -> Vec<u8> {
    let path = dir.join(format!("seed-{rate}.wire"));
    capture_file(
        &SimConfig {
            seed: 3,
            duration_s: if rate < 5_000.0 { 2.0 } else { 0.3 },
            rate,
            ..SimConfig::default()
        },
        &path,
    );
    read(path)
}

fn seeds(target: Target) -> Vec<Vec<u8>> {
    let dir = tempfile::tempdir().unwrap();
    let whole = match target {
        Target::Wire => vec![
            sim_capture(dir.path(), 1_000.0),
            sim_capture(dir.path(), 20_000.0),
            read(repo("protocols/wire/tests/data/v1-sim.wire")),
        ],
        Target::Refusal => fuzz::refusal_seeds(),
        Target::Chunk => {
            // The chunks of a real trace, as stored.
            let capture = sim_capture(dir.path(), 20_000.0);
            let mut ingest = Ingest::new(IngestConfig::new(dir.path()), "seed");
            ingest.feed(&capture).unwrap();
            let (reports, _) = ingest.finish().unwrap();
            let reader = TraceReader::open(&reports[0].path).unwrap();
            let mut st = reader
                .connection()
                .prepare("SELECT data FROM chunk ORDER BY id")
                .unwrap();
            let blobs: Vec<Vec<u8>> = st
                .query_map([], |r| r.get::<usize, Vec<u8>>(0))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            assert!(!blobs.is_empty());
            // Chunks are small; keep them whole.
            return blobs;
        }
        Target::Format(format) => {
            // Paths from the repository's root; the shared collection is beside the repository.
            let find = |rel: &str| -> std::io::Result<PathBuf> {
                Ok(match rel.strip_prefix("shared/data/traces/") {
                    Some(shared_rel) => shared(shared_rel),
                    None => repo(rel),
                })
            };
            return fuzz::format_seeds(format, &find, MAX_LEN).unwrap();
        }
    };
    fuzz::seed_windows(&whole, MAX_LEN)
}

fn no_panic(target: Target) {
    no_panic_n(target, INPUTS);
}

/// The binary readers' inputs are whole small files (kilobytes: a header, formats, a page or a packet),
/// each read whole: fewer of them keep the run's time that of the others (`socscope bench fuzz` runs
/// millions).
const BINARY_INPUTS: u64 = 30_000;

fn no_panic_n(target: Target, inputs: u64) {
    let seeds = seeds(target);
    let max_len = seeds.iter().map(Vec::len).max().unwrap_or(0).max(MAX_LEN);
    let report = fuzz::run(target, &seeds, inputs, max_len, 0x5eed_0010);
    assert_eq!(report.inputs, inputs);
    if let Some((input, message)) = &report.first_panic {
        panic!(
            "{}: {} of {inputs} inputs panicked; the first said: {message} ({} bytes: {input:02x?})",
            target.name(),
            report.panics,
            input.len()
        );
    }
    assert!(
        report.accepted > 0,
        "{}: no input was even partly accepted: the seeds are not reaching the decoder",
        target.name()
    );
    eprintln!(
        "{}: {} inputs ({} accepted, {} bytes) in {:?}, 0 panics",
        target.name(),
        report.inputs,
        report.accepted,
        report.bytes,
        report.elapsed
    );
}

#[test]
fn wire_decoder_survives_100k_mutated_captures() {
    no_panic(Target::Wire);
}

#[test]
fn kptrace_importer_survives_100k_mutated_inputs() {
    no_panic(Target::Format(Format::Kptrace));
}

#[test]
fn paje_importer_survives_100k_mutated_inputs() {
    no_panic(Target::Format(Format::Paje));
}

#[test]
fn ftrace_importer_survives_100k_mutated_inputs() {
    no_panic(Target::Format(Format::Ftrace));
}

#[test]
fn gst_importer_survives_100k_mutated_inputs() {
    no_panic(Target::Format(Format::Gst));
}

#[test]
fn chunk_decoder_survives_100k_mutated_chunks() {
    no_panic(Target::Chunk);
}

/// Issue 27: the collector-to-board `Refusal` frame, as the agent decodes it.
#[test]
fn the_refusal_decoder_never_panics() {
    no_panic(Target::Refusal);
}

#[test]
fn trace_cmd_reader_survives_30k_mutated_inputs() {
    no_panic_n(Target::Format(Format::TraceCmd), BINARY_INPUTS);
}

#[test]
fn ctf_reader_survives_30k_mutated_inputs() {
    no_panic_n(Target::Format(Format::Ctf), BINARY_INPUTS);
}
