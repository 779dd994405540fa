//! `socscope fleet sync` and `collect --dataset` end to end, in the default build: simulated boards and the
//! shared real traces (after import) round-trip through the dataset; bad input gets one line and a
//! non-zero exit.

mod fleet_support;

use std::path::PathBuf;

use fleet_support::{boards, capture, ok, s, socscope, traces};
use serde_json::Value;
use socscope_fleet::Dataset;
use socscope_fleet::readback::{dataset_digest, normalise, store_digest};
use socscope_tracedb::TraceReader;

/// Every trace of `dir` reads back from the dataset `out` with the store's counts per type, producer and
/// CPU, its first and last timestamps, and every 97th event with all its parameters.
fn assert_round_trip(dir: &std::path::Path, out: &std::path::Path) {
    let contents = Dataset::open(out).unwrap().contents().unwrap();
    let files = traces(dir);
    assert!(!files.is_empty());
    for f in files {
        let id = f.file_stem().unwrap().to_str().unwrap();
        let store = normalise(store_digest(&TraceReader::open(&f).unwrap(), 97).unwrap());
        let back = dataset_digest(&contents, id, 97).unwrap();
        assert!(store.events > 0, "{id}");
        assert_eq!(back.events, store.events, "{id}");
        assert_eq!(back.per_type, store.per_type, "{id}");
        assert_eq!(back.per_producer, store.per_producer, "{id}");
        assert_eq!(back.per_cpu, store.per_cpu, "{id}");
        assert_eq!(
            (back.first_ts, back.last_ts),
            (store.first_ts, store.last_ts),
            "{id}"
        );
        assert_eq!(back.sample, store.sample, "{id}");
    }
}

#[test]
fn simulated_boards_sync_and_round_trip() {
    let tmp = tempfile::tempdir().unwrap();
    let rig = tmp.path().join("rig");
    capture(&boards(3), 4.0, &rig);
    let out = tmp.path().join("fleet");
    let doc: Value = serde_json::from_str(&ok(socscope(&[
        "fleet",
        "sync",
        s(&rig),
        "--out",
        s(&out),
        "--json",
    ])))
    .unwrap();
    assert_eq!(doc["traces_written"], 3, "{doc}");
    assert!(doc["events"].as_u64().unwrap() > 100_000, "{doc}");
    assert!(doc["bytes"].as_u64().unwrap() > 0);
    assert_round_trip(&rig, &out);
    // Nothing changed: nothing written.
    let doc: Value = serde_json::from_str(&ok(socscope(&[
        "fleet",
        "sync",
        s(&rig),
        "--out",
        s(&out),
        "--json",
    ])))
    .unwrap();
    assert_eq!(
        (
            doc["traces_written"].as_u64(),
            doc["traces_unchanged"].as_u64()
        ),
        (Some(0), Some(3))
    );
    // The text summary.
    let text = ok(socscope(&["fleet", "sync", s(&rig), "--out", s(&out)]));
    assert!(
        text.contains("0 traces written") && text.contains("3 unchanged"),
        "{text}"
    );
}

fn real(rel: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/traces")
        .join(rel)
        .display()
        .to_string()
}

#[test]
fn the_shared_real_traces_round_trip_after_import() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("imports");
    for rel in [
        "paje/pajeng-native_sample.trace",
        "ftrace/tci-trace-android-sched-irq.txt",
        "ftrace/tci-ftrace_syscalls.txt",
        "gstreamer/gst-log-parser-color.log",
    ] {
        ok(socscope(&["import", &real(rel), "--dir", s(&dir)]));
    }
    let out = tmp.path().join("fleet");
    let doc: Value = serde_json::from_str(&ok(socscope(&[
        "fleet",
        "sync",
        s(&dir),
        "--out",
        s(&out),
        "--json",
    ])))
    .unwrap();
    assert_eq!(doc["traces_written"], 4, "{doc}");
    assert_round_trip(&dir, &out);
}

#[test]
fn collect_exports_each_trace_as_it_ends() {
    let tmp = tempfile::tempdir().unwrap();
    let rig = tmp.path().join("rig");
    let out = tmp.path().join("fleet");
    let wires = tmp.path().join("w");
    std::fs::create_dir_all(&wires).unwrap();
    // Two boards replayed by one collector that writes the dataset as their sessions end.
    let mut args = vec!["collect".to_owned(), "--no-listen".into()];
    for b in boards(2) {
        let wire = wires.join(format!("{}.wire", b.name));
        let cfg = socscope_sim::SimConfig {
            seed: b.seed,
            duration_s: 2.0,
            board: Box::leak(b.name.clone().into_boxed_str()),
            ..socscope_sim::SimConfig::default()
        };
        let mut t = socscope_sim::transport::WriterTransport::new(std::io::BufWriter::new(
            std::fs::File::create(&wire).unwrap(),
        ));
        socscope_sim::run(&cfg, &mut t).unwrap();
        t.finish().unwrap();
        args.push("--replay".into());
        args.push(wire.display().to_string());
    }
    args.extend([
        "--dir".into(),
        rig.display().to_string(),
        "--dataset".into(),
        out.display().to_string(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let text = ok(socscope(&args));
    assert_eq!(text.matches("exported:").count(), 2, "{text}");
    assert_round_trip(&rig, &out);
}

#[test]
fn bad_input_gets_one_line_and_a_non_zero_exit() {
    let tmp = tempfile::tempdir().unwrap();
    let rig = tmp.path().join("rig");
    capture(&boards(1), 1.0, &rig);
    // A directory of other files is not taken over.
    let other = tmp.path().join("photos");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("cat.jpg"), b"jpeg").unwrap();
    let out = socscope(&["fleet", "sync", s(&rig), "--out", s(&other)]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("not a socscope fleet dataset") && err.contains("cat.jpg"),
        "{err}"
    );
    assert_eq!(std::fs::read(other.join("cat.jpg")).unwrap(), b"jpeg");
    // A directory that is not a catalog.
    let out = socscope(&[
        "fleet",
        "sync",
        s(&other),
        "--out",
        s(&tmp.path().join("ds")),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no catalog.db"));
    // A file in the catalog that is not a trace: the others are exported, the bad one named, exit 1.
    let bad = rig.join("broken.db");
    std::fs::write(&bad, b"not a trace at all").unwrap();
    rusqlite_register(&rig, "broken.db");
    let ds = tmp.path().join("ds");
    let out = socscope(&["fleet", "sync", s(&rig), "--out", s(&ds)]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("broken.db") && err.contains("not a"), "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("1 traces written"), "{text}");
    // Without the engine, or with it, sql on a directory that is not a dataset says so.
    let out = socscope(&["fleet", "sql", s(&other), "SELECT 1"]);
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// Lists `file` in the catalog of `dir` as if a trace had been registered under that name.
fn rusqlite_register(dir: &std::path::Path, file: &str) {
    let catalog = socscope_tracedb::Catalog::open(dir).unwrap();
    let mut rec = catalog.traces().unwrap().remove(0);
    rec.id = 0;
    rec.db_file = file.to_owned();
    catalog.register(&rec).unwrap();
}

#[cfg(not(feature = "fleet"))]
#[test]
fn without_the_engine_the_query_commands_say_how_to_build_it() {
    let out = socscope(&["fleet", "sql", ".", "SELECT 1"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--features fleet"), "{err}");
}
