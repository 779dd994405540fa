//! `socscope import` and `socscope export` end to end: Pajé round trips with equal counts, Chrome JSON
//! that parses back with the fields Perfetto needs, one warning line per skipped line.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn socscope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_socscope"))
        .args(args)
        .output()
        .expect("socscope runs")
}

fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn real(rel: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/traces")
        .join(rel)
        .display()
        .to_string()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Rows of `category|count` and the producer count.
fn counts(db: &Path) -> (String, String) {
    let q = |sql: &str| String::from_utf8(socscope(&["sql", s(db), sql, "--json"]).stdout).unwrap();
    (
        q(
            "SELECT type, category, count(*) AS n FROM events GROUP BY type, category ORDER BY type, category",
        ),
        q("SELECT count(*) AS n FROM producer"),
    )
}

#[test]
fn paje_round_trips_with_equal_counts() {
    for rel in [
        "paje/pajeng-native_sample.trace",
        "paje/pajeng-categories.trace",
        "paje/pajeng-simgrid-fg126.trace",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.db");
        let p = dir.path().join("a.paje");
        let b = dir.path().join("b.db");
        ok(socscope(&["import", &real(rel), "-o", s(&a)]));
        ok(socscope(&[
            "export",
            s(&a),
            "--format",
            "paje",
            "-o",
            s(&p),
        ]));
        ok(socscope(&[
            "import",
            s(&p),
            "--format",
            "paje",
            "-o",
            s(&b),
            "--strict",
        ]));
        let (ca, cb) = (counts(&a), counts(&b));
        assert!(ca.0.len() > 10, "{rel}: {ca:?}");
        assert_eq!(ca, cb, "{rel}");
    }
}

#[test]
fn chrome_json_has_what_perfetto_needs() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.db");
    let j = dir.path().join("a.json");
    ok(socscope(&[
        "import",
        &real("ftrace/tci-trace-android-sched-irq.txt"),
        "-o",
        s(&a),
    ]));
    ok(socscope(&[
        "export",
        s(&a),
        "--format",
        "chrome-json",
        "-o",
        s(&j),
    ]));
    let doc: Value = serde_json::from_slice(&std::fs::read(&j).unwrap()).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    let mut by_ph = std::collections::HashMap::new();
    for e in events {
        let ph = e["ph"].as_str().unwrap();
        *by_ph.entry(ph.to_string()).or_insert(0) += 1;
        assert!(e["pid"].is_u64() && e["tid"].is_u64(), "{e}");
        if ph != "M" {
            assert!(e["ts"].is_number(), "{e}");
        }
        if ph == "X" {
            assert!(e["dur"].as_f64().unwrap() >= 0.0, "{e}");
        }
        if ph == "s" || ph == "f" {
            assert!(e["id"].is_u64(), "{e}");
        }
    }
    // The import's counts (collector/tests/import.rs): 77 states, 45 links, 9 punctual events.
    assert_eq!(
        (by_ph["X"], by_ph["s"], by_ph["f"], by_ph["i"]),
        (77, 45, 45, 9)
    );
}

#[test]
fn skipped_lines_warn_once_each_and_strict_fails() {
    let dir = tempfile::tempdir().unwrap();
    let f = real("gstreamer/gst-log-parser-corrupted-nocolor.log");
    let err = ok(socscope(&["import", &f, "--dir", s(dir.path())]));
    let warnings: Vec<&str> = err.lines().filter(|l| l.starts_with("warning: ")).collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(
        warnings[0].contains(":1:1: expected")
            && warnings[0].contains("Hello world")
            && warnings[0].contains("1 lines skipped in all"),
        "{err}"
    );
    let out = socscope(&["import", &f, "--dir", s(dir.path()), "--strict"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains(":1:1: expected"));
    let csv = dir.path().join("x.csv");
    let db = dir.path().join("gst-log-parser-corrupted-nocolor.db");
    ok(socscope(&[
        "export",
        s(&db),
        "--format",
        "csv",
        "--range",
        "..1s",
        "-o",
        s(&csv),
    ]));
    // Lines at 0:00:00.007 (INFO) and its level state start before 1 s after the start: 2 events.
    assert_eq!(
        std::fs::read_to_string(&csv).unwrap().lines().count(),
        1 + 2
    );
}
