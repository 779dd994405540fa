//! `socscope fleet sql`, `report` and `overview` with the embedded engine (feature `fleet`), on a dataset
//! synced from simulated boards: results, output formats, the report's departure scores against the
//! `compare` engine run on the trace files themselves, and the errors that name a column or table.
#![cfg(feature = "fleet")]

mod fleet_support;

use std::path::{Path, PathBuf};

use fleet_support::{Board, capture, ok, s, socscope, traces};
use serde_json::Value;

/// Four boards (one under CPU stress, one under I/O stress) synced into a dataset.
fn fleet() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let rig = tmp.path().join("rig");
    let boards: Vec<Board> = (0..4)
        .map(|i| Board {
            name: format!("stb-{i}"),
            seed: 10 + i as u64,
            cpu_stress: i == 2,
            io_stress: i == 3,
        })
        .collect();
    capture(&boards, 3.0, &rig);
    let out = tmp.path().join("fleet");
    ok(socscope(&["fleet", "sync", s(&rig), "--out", s(&out)]));
    (tmp, rig, out)
}

fn json(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[test]
fn sql_answers_in_three_formats_and_names_what_is_missing() {
    let (_tmp, rig, out) = fleet();
    let ds = s(&out);
    let rows = json(&ok(socscope(&[
        "fleet",
        "sql",
        ds,
        "SELECT board, count(*) AS n FROM events GROUP BY board ORDER BY board",
        "--json",
    ])));
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 4);
    // The counts are the stores'.
    let mut total = 0;
    for (row, file) in rows.iter().zip(traces(&rig)) {
        let info = socscope_tracedb::TraceReader::open(&file)
            .unwrap()
            .info()
            .unwrap();
        assert_eq!(row["board"], info.meta.board.as_str());
        assert_eq!(row["n"].as_u64(), Some(info.event_count));
        total += info.event_count;
    }
    let n = json(&ok(socscope(&[
        "fleet",
        "sql",
        ds,
        "SELECT sum(events) AS n FROM traces",
        "--json",
    ])));
    assert_eq!(n[0]["n"].as_u64(), Some(total));
    // Partition filters, typed parameters without a JSON parser, and the aligned table.
    let text = ok(socscope(&[
        "fleet",
        "sql",
        ds,
        "SELECT type, count(*) AS n FROM events WHERE board = 'stb-1' AND params_text['name'] IS NOT NULL GROUP BY type ORDER BY type",
    ]));
    assert!(text.starts_with("type"), "{text}");
    assert!(text.trim_end().ends_with("rows)"), "{text}");
    let csv = ok(socscope(&[
        "fleet",
        "sql",
        ds,
        "SELECT trace_id, board, date, events FROM traces ORDER BY board",
        "--csv",
    ]));
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], "trace_id,board,date,events");
    assert_eq!(lines.len(), 5, "{csv}");
    // Errors: one line naming the column or the table, exit status 1, nothing on standard output.
    for (query, needle) in [
        ("SELECT no_such_column FROM events", "no_such_column"),
        ("SELECT * FROM no_such_table", "no_such_table"),
    ] {
        let o = socscope(&["fleet", "sql", ds, query]);
        assert_eq!(o.status.code(), Some(1), "{query}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{err}");
        assert!(o.stdout.is_empty());
    }
}

/// `socscope compare REF RUN --json`'s departing windows and highest score.
fn compare(reference: &Path, run: &Path) -> (usize, usize, f64) {
    let o = socscope(&["compare", s(reference), s(run), "--json"]);
    assert!(
        matches!(o.status.code(), Some(0) | Some(3)),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v = json(&String::from_utf8(o.stdout).unwrap());
    let windows = v["windows"].as_array().unwrap();
    let max = windows
        .iter()
        .map(|w| w["score"].as_f64().unwrap())
        .fold(0.0, f64::max);
    (
        windows.len(),
        v["departures"].as_u64().unwrap() as usize,
        max,
    )
}

#[test]
fn the_report_scores_each_run_as_compare_does() {
    let (tmp, rig, out) = fleet();
    let files = traces(&rig);
    let reference = files[0].file_stem().unwrap().to_str().unwrap().to_owned();
    let png = tmp.path().join("nights.png");
    let r = json(&ok(socscope(&[
        "fleet",
        "report",
        s(&out),
        "--reference",
        &reference,
        "--json",
        "--png",
        s(&png),
        "--metric",
        "max-score",
    ])));
    assert_eq!(r["nights"].as_array().unwrap().len(), 4);
    for n in r["nights"].as_array().unwrap() {
        assert_eq!(n["runs"], 1);
        assert!(n["events"].as_u64().unwrap() > 10_000);
    }
    let states = r["states"].as_array().unwrap();
    assert!(!states.is_empty());
    for st in states {
        let (p50, p99, max) = (
            st["p50_ns"].as_i64().unwrap(),
            st["p99_ns"].as_i64().unwrap(),
            st["max_ns"].as_i64().unwrap(),
        );
        assert!(p50 <= p99 && p99 <= max, "{st}");
    }
    let gaps = r["gaps"].as_array().unwrap();
    assert_eq!(gaps.len(), 4, "{r}");
    for g in gaps {
        // vsync at 50 Hz for 3 s: about 150 intervals.
        assert!(g["intervals"].as_i64().unwrap() > 100, "{g}");
    }
    let runs = r["departures"]["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    for run in runs {
        let file = files
            .iter()
            .find(|f| f.file_stem().unwrap() == run["trace_id"].as_str().unwrap())
            .unwrap();
        let (windows, departures, max) = compare(&files[0], file);
        assert_eq!(run["windows"].as_u64(), Some(windows as u64), "{run}");
        assert_eq!(run["departures"].as_u64(), Some(departures as u64), "{run}");
        let got = run["max_score"].as_f64().unwrap();
        assert!(
            (got - max).abs() <= 1e-9 * max.max(1.0),
            "{run}: compare says {max}"
        );
    }
    assert_eq!(&std::fs::read(&png).unwrap()[1..4], b"PNG");
    // The table form.
    let text = ok(socscope(&[
        "fleet",
        "report",
        s(&out),
        "--where",
        "board <> 'stb-0'",
    ]));
    assert!(text.contains("Nights (3 boards"), "{text}");
    // A reference that is not there is a bad argument.
    let o = socscope(&["fleet", "report", s(&out), "--reference", "nope"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--reference nope"));
}

#[test]
fn the_overview_aggregates_boards_as_a_hierarchy() {
    let (tmp, _rig, out) = fleet();
    let png = tmp.path().join("overview.png");
    let v = json(&ok(socscope(&[
        "fleet",
        "overview",
        s(&out),
        "--metric",
        "duration",
        "--slices",
        "40",
        "--json",
        "--png",
        s(&png),
    ])));
    let names: Vec<&str> = v["hierarchy"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert_eq!(names[0], "all");
    for b in [
        "stb-0",
        "stb-1",
        "stb-2",
        "stb-3",
        "stb-0 cpu0",
        "stb-3 cpu1",
    ] {
        assert!(names.contains(&b), "{b} in {names:?}");
    }
    assert!(!v["dichotomy"].as_array().unwrap().is_empty());
    assert_eq!(&std::fs::read(&png).unwrap()[1..4], b"PNG");
    let text = ok(socscope(&["fleet", "overview", s(&out), "--slices", "20"]));
    assert!(text.contains("areas"), "{text}");
}
