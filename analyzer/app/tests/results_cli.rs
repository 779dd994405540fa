//! Saved analysis results end to end on real trace files: `--save` on `aggregate`, `compare`,
//! `timeline` and `stats` writes them into the SQLite trace, `socscope results` lists, shows and
//! deletes them, and what is stored is what was computed.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

use common::socscope;
use serde_json::Value;

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn ok(args: &[&str]) -> Value {
    let out = socscope(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    json_of(&out)
}

/// A capture with `extra` demo options, copied to its own directory (each test saves into its own file).
fn capture(extra: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![
        "demo",
        "--headless",
        "--json",
        "--duration",
        "4",
        "--seed",
        "3",
        "--dir",
    ];
    let d = dir.path().to_str().unwrap().to_owned();
    args.push(&d);
    args.extend_from_slice(extra);
    let v = ok(&args);
    let file = PathBuf::from(v["file"].as_str().unwrap());
    let file = if file.is_absolute() {
        file
    } else {
        dir.path().join(file.file_name().unwrap())
    };
    (dir, file)
}

/// The reference and the stressed run, made once; tests copy them before writing.
fn originals() -> &'static (tempfile::TempDir, PathBuf, tempfile::TempDir, PathBuf) {
    static T: OnceLock<(tempfile::TempDir, PathBuf, tempfile::TempDir, PathBuf)> = OnceLock::new();
    T.get_or_init(|| {
        let (a, r) = capture(&[]);
        let (b, x) = capture(&["--cpu-stress", "1.5:1"]);
        (a, r, b, x)
    })
}

fn copy_of(src: &Path) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let dst = dir.path().join("trace.db");
    std::fs::copy(src, &dst).unwrap();
    (dir, dst)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn list(trace: &Path) -> Vec<Value> {
    ok(&["results", s(trace), "--json"])["results"]
        .as_array()
        .unwrap()
        .clone()
}

/// Ids of the producers with these names, ascending.
fn producer_ids(trace: &Path, names: &[&str]) -> Vec<i64> {
    let rows = ok(&[
        "sql",
        s(trace),
        "SELECT id, name FROM producer ORDER BY id",
        "--json",
    ]);
    rows.as_array()
        .unwrap()
        .iter()
        .filter(|p| names.contains(&p["name"].as_str().unwrap()))
        .map(|p| p["id"].as_i64().unwrap())
        .collect()
}

fn show(trace: &Path, id: i64) -> Value {
    ok(&["results", s(trace), "--show", &id.to_string(), "--json"])
}

#[test]
fn an_ocelotl_partition_is_saved_as_intervals_with_their_producers() {
    let (_d, trace) = copy_of(&originals().1);
    assert!(list(&trace).is_empty(), "a fresh trace has no results");
    let v = ok(&[
        "aggregate",
        s(&trace),
        "--slices",
        "40",
        "--p",
        "0.05",
        "--p",
        "0.3",
        "--json",
        "--save",
    ]);
    let ids: Vec<i64> = v["saved"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect();
    assert_eq!(ids.len(), 2, "one result per --p");
    let rows = list(&trace);
    assert_eq!(rows.len(), 2);
    for (row, at) in rows.iter().zip(v["report"]["at_p"].as_array().unwrap()) {
        assert_eq!(row["kind"], "annotation");
        assert_eq!(row["tool"], "socscope aggregate");
        let shown = show(&trace, row["id"].as_i64().unwrap());
        let bands = shown["data"]["bands"].as_array().unwrap();
        let ranges = at["ranges"].as_array().unwrap();
        assert_eq!(bands.len(), ranges.len(), "one band per part");
        // The parts tile the analysed interval, in order, without gap.
        let range = v["range_ns"].as_array().unwrap();
        assert_eq!(bands[0]["start_ns"], range[0]);
        for w in bands.windows(2) {
            assert_eq!(w[0]["end_ns"], w[1]["start_ns"]);
        }
        let slice_ns = v["slice_ns"].as_f64().unwrap();
        for (b, r) in bands.iter().zip(ranges) {
            let slices = r[1].as_i64().unwrap() - r[0].as_i64().unwrap() + 1;
            let len = (b["end_ns"].as_i64().unwrap() - b["start_ns"].as_i64().unwrap()) as f64;
            assert!((len - slices as f64 * slice_ns).abs() <= 1.0, "{b}");
            assert_eq!(
                b["producers"].as_array().unwrap().len(),
                v["producers"].as_array().unwrap().len(),
                "a temporal part covers every producer"
            );
        }
    }
    // A spatiotemporal partition: one band per area, over the producers under its node.
    let v = ok(&[
        "aggregate",
        s(&trace),
        "--mode",
        "spatiotemporal",
        "--slices",
        "10",
        "--p",
        "0.5",
        "--json",
        "--save",
    ]);
    let id = v["saved"][0].as_i64().unwrap();
    let shown = show(&trace, id);
    let bands = shown["data"]["bands"].as_array().unwrap();
    let areas = v["report"]["at_p"][0]["aggregates"].as_array().unwrap();
    assert_eq!(bands.len(), areas.len());
    assert!(
        bands
            .iter()
            .all(|b| !b["producers"].as_array().unwrap().is_empty())
    );
    // Text output names the kind and the saved id.
    let out = socscope(&["aggregate", s(&trace), "--slices", "20", "--save"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .last()
            .unwrap()
            .starts_with("saved result 4 (annotation) in "),
        "{text}"
    );
}

#[test]
fn compare_saves_the_departing_windows_on_the_run() {
    let (_a, reference) = copy_of(&originals().1);
    let (_b, run) = copy_of(&originals().3);
    let out = socscope(&["compare", s(&reference), s(&run), "--json", "--save"]);
    assert_eq!(out.status.code(), Some(3), "a departure");
    let v = json_of(&out);
    let id = v["saved"].as_i64().unwrap();
    assert!(
        list(&reference).is_empty(),
        "nothing saved on the reference"
    );
    let rows = list(&run);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["tool"], "socscope compare");
    let shown = show(&run, id);
    let bands = shown["data"]["bands"].as_array().unwrap();
    let departing: Vec<&Value> = v["windows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["departure"] == true)
        .collect();
    assert_eq!(bands.len(), departing.len());
    let t0 = ok(&["info", s(&run), "--json"])["t_min_ns"]
        .as_i64()
        .unwrap();
    for (b, w) in bands.iter().zip(&departing) {
        let start = t0 + (w["start_s"].as_f64().unwrap() * 1e9).round() as i64;
        assert_eq!(b["start_ns"].as_i64().unwrap(), start);
        assert_eq!(b["value"], w["score"]);
    }
    // The busy task is two producers called `cpu-burn`: both are kept, by id.
    let burn = producer_ids(&run, &["cpu-burn"]);
    assert_eq!(burn.len(), 2);
    let first = bands[0]["producers"].as_array().unwrap();
    for id in &burn {
        assert!(
            first.iter().any(|p| p.as_i64() == Some(*id)),
            "{id} in {first:?}"
        );
    }
}

#[test]
fn groups_are_saved_as_groupings_and_results_can_be_deleted() {
    let (_d, trace) = copy_of(&originals().1);
    let v = ok(&[
        "timeline",
        s(&trace),
        "--width",
        "50",
        "--group",
        "video=vdec,vsync:median",
        "--json",
        "--save",
        "--description",
        "video actors",
    ]);
    let tv = v["saved"].as_i64().unwrap();
    let v = ok(&[
        "stats",
        s(&trace),
        "--operator",
        "count-per-type",
        "--group",
        "irqs=irq,softirq:#123456",
        "--json",
        "--save",
    ]);
    let pie = v["saved"].as_i64().unwrap();

    let g = show(&trace, tv);
    assert_eq!(g["result"]["kind"], "grouping");
    assert_eq!(g["result"]["description"], "video actors");
    let groups = g["data"]["groups"].as_array().unwrap();
    assert_eq!(groups[0]["name"], "traceviz");
    assert_eq!(groups[1]["name"], "video:median");
    assert_eq!(groups[1]["target"], "producer");
    let mut members: Vec<i64> = groups[1]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_i64().unwrap())
        .collect();
    members.sort();
    assert_eq!(members, producer_ids(&trace, &["vdec", "vsync"]));
    let g = show(&trace, pie);
    let groups = g["data"]["groups"].as_array().unwrap();
    assert_eq!(groups[0]["name"], "pie count-per-type");
    assert_eq!(groups[1]["name"], "irqs #123456");
    assert_eq!(groups[1]["target"], "event_type");
    assert_eq!(
        groups[1]["member_names"],
        serde_json::json!(["irq", "softirq"])
    );

    // The rows are plain SQLite, for anyone with sqlite3.
    let conn = rusqlite::Connection::open(&trace).unwrap();
    let n: i64 = conn
        .query_row(
            "SELECT count(*) FROM analysis_result WHERE kind = 'grouping'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(n, 2);
    drop(conn);

    // Text list, delete, and the errors.
    let out = socscope(&["results", s(&trace)]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("ID  KIND"), "{text}");
    assert!(text.contains("socscope timeline") && text.contains("video actors"));
    let v = ok(&["results", s(&trace), "--delete", &tv.to_string(), "--json"]);
    assert_eq!(v["deleted"]["id"], tv);
    assert_eq!(list(&trace).len(), 1);
    for args in [
        vec!["results", s(&trace), "--show", "99"],
        vec!["results", s(&trace), "--delete", &tv.to_string()],
        vec!["stats", s(&trace), "--save"],
        vec!["timeline", s(&trace), "--save"],
        vec![
            "stats",
            s(&trace),
            "--operator",
            "syscall-duration",
            "--save",
            "--group",
            "x=a,b",
        ],
        vec!["aggregate", s(&trace), "--description", "x"],
        vec![
            "aggregate",
            "--model",
            "../core/tests/vectors/does-not-matter.json",
            "--save",
        ],
    ] {
        let out = socscope(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(out.stdout.len(), 0, "{args:?}");
        assert!(!out.stderr.is_empty());
    }
    let out = socscope(&["results", "/nonexistent/x.db"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "socscope: /nonexistent/x.db: no such file"
    );
}

#[test]
fn an_ocelotl_partition_is_saved_as_a_processed_trace() {
    let (dir, trace) = copy_of(&originals().3);
    // A catalog beside the trace: the processed trace is registered in it.
    socscope_tracedb::Catalog::open(dir.path())
        .unwrap()
        .register_file("trace.db")
        .unwrap();
    let v = ok(&[
        "aggregate",
        s(&trace),
        "--slices",
        "40",
        "--p",
        "0.3",
        "--json",
        "--save",
        "--processed-trace",
        "--description",
        "phases",
    ]);
    let id = v["saved"][0].as_i64().unwrap();
    let file = PathBuf::from(v["processed_traces"][0].as_str().unwrap());
    assert_eq!(file.parent(), trace.parent(), "beside the trace");
    assert_eq!(file.file_name().unwrap(), "trace.ocelotl-1.db");
    let rows = list(&trace);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["kind"], "processed_trace");
    assert_eq!(rows[0]["tool"], "socscope aggregate");
    assert_eq!(rows[0]["description"], "phases");
    // Shown: the file read back into one band per part, tiling the interval.
    let shown = show(&trace, id);
    assert_eq!(shown["data"]["trace_db"], "trace.ocelotl-1.db");
    assert_eq!(shown["data"]["processed"], true);
    let bands = shown["data"]["bands"].as_array().unwrap().clone();
    let ranges = v["report"]["at_p"][0]["ranges"].as_array().unwrap();
    assert_eq!(bands.len(), ranges.len(), "one band per part");
    let range = v["range_ns"].as_array().unwrap();
    assert_eq!(bands[0]["start_ns"], range[0]);
    for w in bands.windows(2) {
        assert_eq!(w[0]["end_ns"], w[1]["start_ns"]);
    }
    let producers = v["producers"].as_array().unwrap().len();
    assert_eq!(
        shown["data"]["event_count"].as_u64().unwrap() as usize,
        bands.len() * producers,
        "one state per part and producer"
    );
    // The same parts, producers and values as the partition saved as annotations.
    let a = ok(&[
        "aggregate",
        s(&trace),
        "--slices",
        "40",
        "--p",
        "0.3",
        "--json",
        "--save",
    ]);
    let annotated = show(&trace, a["saved"][0].as_i64().unwrap());
    let want = annotated["data"]["bands"].as_array().unwrap();
    assert_eq!(want.len(), bands.len());
    // (The processed trace lists a part's producers by id, the annotations in the model's order.)
    let sorted = |v: &Value| {
        let mut ids: Vec<i64> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_i64().unwrap())
            .collect();
        ids.sort_unstable();
        ids
    };
    let names = |v: &Value| {
        let mut n: Vec<String> = v.as_str().unwrap().split(", ").map(str::to_owned).collect();
        n.sort();
        n
    };
    for (b, w) in bands.iter().zip(want) {
        for k in ["label", "start_ns", "end_ns"] {
            assert_eq!(b[k], w[k], "{k}");
        }
        assert_eq!(sorted(&b["producers"]), sorted(&w["producers"]));
        assert_eq!(names(&b["who"]), names(&w["who"]));
        let (x, y) = (b["value"].as_f64().unwrap(), w["value"].as_f64().unwrap());
        assert!((x - y).abs() <= 1e-9 * y.abs().max(1.0), "{x} {y}");
    }
    // The processed trace is an ordinary trace, flagged processed, registered in the catalog.
    let n = ok(&[
        "sql",
        s(&file),
        "SELECT count(*) AS n FROM events",
        "--json",
    ]);
    assert_eq!(
        n[0]["n"].as_u64().unwrap() as usize,
        bands.len() * producers
    );
    let catalog = socscope_tracedb::Catalog::open(dir.path()).unwrap();
    let processed = catalog.processed_traces().unwrap();
    assert_eq!(processed.len(), 1);
    assert_eq!(processed[0].db_file, "trace.ocelotl-1.db");
    assert_eq!(catalog.raw_traces().unwrap().len(), 1);
    drop(catalog);
    // Text output names the kind, the id and the file.
    let out = socscope(&[
        "aggregate",
        s(&trace),
        "--slices",
        "20",
        "--save",
        "--processed-trace",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .last()
            .unwrap()
            .starts_with("saved result 3 (processed_trace) in ")
            && text.contains("trace.ocelotl-2.db"),
        "{text}"
    );
    // --processed-trace without --save is a misuse.
    let out = socscope(&["aggregate", s(&trace), "--processed-trace"]);
    assert_eq!(out.status.code(), Some(2));
    // A result whose file is gone is shown, says so, and fails.
    std::fs::remove_file(&file).unwrap();
    let out = socscope(&["results", s(&trace), "--show", &id.to_string()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("trace.ocelotl-1.db"), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("processed trace: trace.ocelotl-1.db"));
    // Deleting the result keeps the other processed trace's file (a trace of its own).
    let out = socscope(&["results", s(&trace), "--delete", "3"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("the processed trace itself is kept"));
    assert!(dir.path().join("trace.ocelotl-2.db").exists());
}
