//! The `socscope` program as scripts and rigs use it: exit codes, JSON output, one-line errors.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::socscope;
use serde_json::Value;
use socscope_sim::SimConfig;
use socscope_tracedb::SCHEMA_VERSION;

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("UTF-8 on standard output")
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).expect("UTF-8 on standard error")
}

fn json(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "{:?} failed: {}",
        out.status,
        stderr(out)
    );
    serde_json::from_str(&stdout(out)).unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(out)))
}

/// Asserts a failure with `code` and exactly one line on standard error, no panic; returns the line.
fn one_line_failure(out: &Output, code: i32) -> String {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(code), "exit code; stderr: {err}");
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "{err}"
    );
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {err:?}");
    assert!(lines[0].starts_with("socscope: "), "{err:?}");
    lines[0].to_string()
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// A demo capture in a temporary catalog: its directory and the `demo --json` document.
fn demo() -> (tempfile::TempDir, Value) {
    let dir = tempfile::tempdir().unwrap();
    let doc = json(&socscope(&[
        "demo",
        "--headless",
        "--json",
        "--duration",
        "2",
        "--seed",
        "5",
        "--dir",
        path_str(dir.path()),
    ]));
    (dir, doc)
}

#[test]
fn demo_ls_info_and_sql_agree() {
    let (dir, doc) = demo();
    let events = doc["events"].as_u64().expect("events");
    assert!(events > 10_000, "{doc}");
    assert_eq!(doc["state"], "complete");
    assert_eq!(doc["complete"], true);
    assert_eq!(doc["board"], "demo-stb");
    let trace = PathBuf::from(doc["file"].as_str().expect("file"));
    assert!(trace.is_file());

    let ls = json(&socscope(&["ls", "--dir", path_str(dir.path()), "--json"]));
    let traces = ls["traces"].as_array().expect("traces");
    assert_eq!(traces.len(), 1, "{ls}");
    assert_eq!(PathBuf::from(traces[0]["file"].as_str().unwrap()), trace);
    assert_eq!(traces[0]["events"], events);
    assert_eq!(traces[0]["complete"], true);
    assert_eq!(traces[0]["board"], "demo-stb");

    let info = json(&socscope(&["info", path_str(&trace), "--json"]));
    assert_eq!(info["events"], events);
    assert_eq!(info["cpus"], 2);
    assert_eq!(info["state"], "complete");
    assert_eq!(info["tick_rate_hz"], 1_000_000);
    assert_eq!(info["losses"]["records"], 0);
    let duration = info["duration_ns"].as_i64().unwrap();
    assert!(
        duration > 1_900_000_000 && duration <= 2_000_000_000,
        "{duration}"
    );
    // Per-type counts add up to the total, and raw record counts to `records`.
    let types = info["types"].as_array().unwrap();
    let by_type: u64 = types.iter().map(|t| t["count"].as_u64().unwrap()).sum();
    assert_eq!(by_type, events);
    assert!(
        types
            .iter()
            .any(|t| t["name"] == "running" && t["category"] == "state")
    );
    let stats = info["ingest_stats"].as_object().unwrap();
    let per_type: i64 = stats
        .iter()
        .filter(|(k, _)| k.starts_with("records."))
        .map(|(_, v)| v.as_i64().unwrap())
        .sum();
    assert_eq!(stats["records"].as_i64(), Some(per_type));
    assert_eq!(stats["events"], events);
    assert_eq!(stats["frames_dropped"], 0);

    // `info` takes the ID and the FILE that `ls` prints, looked up in `--dir`'s catalog.
    let id = traces[0]["id"].as_i64().expect("id").to_string();
    let by_id = json(&socscope(&[
        "info",
        &id,
        "--dir",
        path_str(dir.path()),
        "--json",
    ]));
    assert_eq!(by_id, info);
    let ls_text = stdout(&socscope(&["ls", "--dir", path_str(dir.path())]));
    let file_name = trace.file_name().unwrap().to_str().unwrap();
    assert!(ls_text.contains(file_name), "{ls_text}");
    let by_name = json(&socscope(&[
        "info",
        file_name,
        "--dir",
        path_str(dir.path()),
        "--json",
    ]));
    assert_eq!(by_name, info);
    let line = one_line_failure(&socscope(&["info", "99", "--dir", path_str(dir.path())]), 1);
    assert!(
        line.contains("99: no such file, and no trace with that ID in the catalog in"),
        "{line}"
    );

    let rows = json(&socscope(&[
        "sql",
        path_str(&trace),
        "SELECT count(*) AS n FROM events",
        "--json",
    ]));
    assert_eq!(rows, serde_json::json!([{ "n": events }]));
    // The table form, with its row count on standard error.
    let out = socscope(&["sql", path_str(&trace), "SELECT count(*) AS n FROM events"]);
    assert!(out.status.success());
    let table = stdout(&out);
    let lines: Vec<&str> = table.lines().map(str::trim).collect();
    assert_eq!(lines, ["n", &events.to_string()]);
    assert_eq!(stderr(&out).trim(), "(1 row)");

    // The same trace, with a schema version this build does not read.
    let conn = rusqlite::Connection::open(&trace).unwrap();
    conn.pragma_update(None, "user_version", SCHEMA_VERSION + 98)
        .unwrap();
    drop(conn);
    let line = one_line_failure(&socscope(&["info", path_str(&trace)]), 1);
    let found = SCHEMA_VERSION + 98;
    assert!(
        line.contains(&format!(
            "has trace schema version {found}, this build reads version {SCHEMA_VERSION}"
        )) && line.contains("upgrade socscope"),
        "{line}"
    );
}

#[test]
fn bad_input_fails_with_one_line() {
    let line = one_line_failure(&socscope(&["collect", "--bogus"]), 2);
    assert!(line.contains("--bogus"), "{line}");
    let line = one_line_failure(&socscope(&["info"]), 2);
    assert!(line.contains("<TRACE>"), "{line}");
    let line = one_line_failure(&socscope(&["info", "/nonexistent.db"]), 1);
    assert_eq!(line, "socscope: /nonexistent.db: no such file");
    let line = one_line_failure(&socscope(&["ls", "--dir", "/nonexistent-catalog"]), 1);
    assert!(
        line.contains("/nonexistent-catalog: no catalog here"),
        "{line}"
    );

    // SQL errors name the query; the trace is left as it was.
    let (_dir, doc) = demo();
    let trace = doc["file"].as_str().unwrap();
    let line = one_line_failure(&socscope(&["sql", trace, "SELEC"]), 1);
    assert!(
        line.contains("in query \"SELEC\"") && line.contains("syntax error"),
        "{line}"
    );
    let info = json(&socscope(&["info", trace, "--json"]));
    assert_eq!(info["events"], doc["events"]);
}

#[test]
fn collect_replays_a_capture_and_exits() {
    let work = tempfile::tempdir().unwrap();
    let capture = work.path().join("board.wire");
    let mut file = socscope_sim::transport::file(&capture).unwrap();
    let summary = socscope_sim::run(
        &SimConfig {
            seed: 8,
            duration_s: 1.0,
            board: "replayed-stb",
            ..SimConfig::default()
        },
        &mut file,
    )
    .unwrap();
    file.finish().unwrap();

    let dir = work.path().join("traces");
    let out = socscope(&[
        "collect",
        "--replay",
        path_str(&capture),
        "--no-listen",
        "--dir",
        path_str(&dir),
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let lines: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    let ended: Vec<&Value> = lines
        .iter()
        .filter(|l| l["event"] == "session_ended")
        .collect();
    assert_eq!(ended.len(), 1, "{lines:?}");
    assert_eq!(ended[0]["board"], "replayed-stb");
    assert_eq!(ended[0]["complete"], true);
    assert_eq!(ended[0]["records"], summary.events);
    assert_eq!(ended[0]["dropped_frames"], 0);

    let ls = json(&socscope(&["ls", "--dir", path_str(&dir), "--json"]));
    assert_eq!(ls["traces"].as_array().map(Vec::len), Some(1));
    assert_eq!(ls["traces"][0]["events"], ended[0]["events"]);
}

#[test]
fn upgrade_gives_an_old_capture_its_cpu_tracks_and_tells_its_catalog() {
    // A capture of the release before the CPU tracks (schema version 2), in a catalog.
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("old.db");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../protocols/tracedb/tests/data/v2-sim.db"),
        &trace,
    )
    .unwrap();
    socscope_tracedb::Catalog::open(dir.path())
        .unwrap()
        .register_file("old.db")
        .unwrap();
    let cpu_rows = |v: &Value| {
        v["types"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["name"] == "on_cpu" || t["name"] == "cpu_idle")
            .map(|t| t["count"].as_u64().unwrap())
            .sum::<u64>()
    };
    // `stats` says what to do.
    let stats = stdout(&socscope(&["stats", path_str(&trace)]));
    assert!(
        stats.contains(&format!(
            "no CPU tracks in this trace (recorded before them; `socscope upgrade {}` derives them",
            trace.display()
        )),
        "{stats}"
    );
    let before = json(&socscope(&["info", path_str(&trace), "--json"]));
    assert_eq!(
        (before["events"].as_u64(), cpu_rows(&before)),
        (Some(1302), 0)
    );

    let out = socscope(&["upgrade", path_str(&trace)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("schema version 2 -> ")
            && text.contains("CPU tracks derived from the context switches: 345 slices on 2 CPUs")
            && text.contains("1647 events now"),
        "{text}"
    );
    let after = json(&socscope(&["info", path_str(&trace), "--json"]));
    assert_eq!(
        (after["events"].as_u64(), cpu_rows(&after)),
        (Some(1647), 345)
    );
    let ls = json(&socscope(&["ls", "--dir", path_str(dir.path()), "--json"]));
    assert_eq!(ls["traces"][0]["events"], 1647, "{ls}");
    // `stats` now has the per-CPU utilisation the tracks give.
    let stats = socscope(&["stats", path_str(&trace)]);
    let text = stdout(&stats);
    assert!(
        text.contains("CPU utilisation over") && text.contains("cpu0") && text.contains("cpu1"),
        "{text}"
    );

    // Again: nothing to do, and it says so.
    let again = socscope(&["upgrade", path_str(&trace), "--json"]);
    let doc = json(&again);
    assert_eq!(doc["cpu_tracks"], "present", "{doc}");
    assert_eq!(doc["events"], 1647);
    let text = stdout(&socscope(&["upgrade", path_str(&trace)]));
    assert!(
        text.contains("with its CPU tracks: nothing to do"),
        "{text}"
    );
}

/// A demo capture's trace copied without its CPU tracks (as traces were written before them).
fn demo_without_cpu_tracks(dir: &Path, seconds: &str) -> PathBuf {
    use socscope_tracedb::{
        CPU_IDLE_TYPE, Filter, ON_CPU_TYPE, TimeRange, TraceReader, TraceWriter,
    };
    let doc = json(&socscope(&[
        "demo",
        "--headless",
        "--json",
        "--duration",
        seconds,
        "--seed",
        "3",
        "--dir",
        path_str(&dir.join("demo")),
    ]));
    let fresh = PathBuf::from(doc["file"].as_str().unwrap());
    let old = dir.join("old.db");
    let is_track = |t: u32| t == ON_CPU_TYPE || t == CPU_IDLE_TYPE;
    let r = TraceReader::open(&fresh).unwrap();
    let mut w = TraceWriter::create(&old, &r.info().unwrap().meta).unwrap();
    for t in r.event_types().unwrap().iter().filter(|t| !is_track(t.id)) {
        w.add_event_type(t).unwrap();
    }
    for p in r.producers().unwrap() {
        w.add_producer(&p).unwrap();
    }
    for e in r.events(TimeRange::all(), &Filter::all()).unwrap() {
        let e = e.unwrap();
        if !is_track(e.type_id) {
            w.push(&e.event).unwrap();
        }
    }
    w.finish(true).unwrap();
    old
}

#[test]
fn an_upgrade_killed_midway_leaves_the_trace_as_it_was_or_upgraded_never_between() {
    let dir = tempfile::tempdir().unwrap();
    let old = demo_without_cpu_tracks(dir.path(), "20");
    let info = |p: &Path| json(&socscope(&["info", path_str(p), "--json"]));
    let before = info(&old);
    let events = before["events"].as_u64().unwrap();
    let tracks = |v: &Value| {
        v["types"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["name"] == "on_cpu" || t["name"] == "cpu_idle")
            .map(|t| t["count"].as_u64().unwrap())
            .sum::<u64>()
    };
    assert_eq!(tracks(&before), 0);
    // Killed (SIGKILL: no clean-up of any kind) at several points of its work.
    let mut killed_before_the_end = 0;
    for delay_ms in [50, 150, 300, 600] {
        let copy = dir.path().join(format!("kill-{delay_ms}.db"));
        std::fs::copy(&old, &copy).unwrap();
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_socscope"))
            .args(["upgrade", path_str(&copy)])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let finished = child.try_wait().unwrap().is_some();
        child.kill().ok();
        child.wait().unwrap();
        killed_before_the_end += usize::from(!finished);
        // Either as it was, or whole: the event count and the events agree, never a part.
        let now = info(&copy);
        let n = now["events"].as_u64().unwrap();
        let by_type: u64 = now["types"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["count"].as_u64().unwrap())
            .sum();
        assert_eq!(by_type, n, "killed after {delay_ms} ms: {now}");
        let slices = tracks(&now);
        assert!(
            (n, slices) == (events, 0) || (slices > 0 && n == events + slices),
            "killed after {delay_ms} ms: {n} events, {slices} slices"
        );
        // And an upgrade then completes it (or finds it done).
        let out = socscope(&["upgrade", path_str(&copy), "--json"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let after = info(&copy);
        assert!(tracks(&after) > 0);
        assert_eq!(after["events"].as_u64(), Some(events + tracks(&after)));
    }
    assert!(
        killed_before_the_end > 0,
        "no upgrade was still running when killed"
    );
}
