//! `socscope import` and `socscope export` end to end: Pajé round trips with equal counts, Chrome JSON
//! that parses back with the fields Perfetto needs, one warning line per skipped line.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::socscope;
use serde_json::Value;

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
    // The import's counts (collector/tests/import.rs): 77 states and 67 CPU track slices, 45 links,
    // 9 punctual events; the 9 soft IRQs are also slices of their CPU's track.
    assert_eq!(
        (by_ph["X"], by_ph["s"], by_ph["f"], by_ph["i"]),
        (144 + 9, 45, 45, 9)
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
            .filter(|e| e["args"]["name"] == "CPUs")
            .count(),
        1,
        "the CPU tracks are one process"
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

/// `pj_dump`'s entities of a Pajé file, sorted: states, events and links whole; containers by parent,
/// type and name (the export keeps the container types); variables by container, type, start and value
/// (not the end of their interval: the last one ends where the file ends, and a trace keeps no container
/// destruction times), the value to 6 significant digits apart (PajeNG adds `PajeAddVariable`s in single
/// precision, socscope in double).
fn pj_dump(file: &Path) -> (Vec<String>, Vec<(String, f64)>) {
    let out = Command::new("pj_dump")
        .arg(file)
        .output()
        .expect("pj_dump runs (Debian package pajeng, scripts/install-test-deps.sh)");
    assert!(
        out.status.success(),
        "pj_dump {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut rows: Vec<String> = Vec::new();
    let mut variables: Vec<(String, f64)> = Vec::new();
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = l.split(", ").collect();
        match f[0] {
            "Variable" => variables.push(([f[1], f[2], f[3]].join(", "), f[6].parse().unwrap())),
            "Container" => rows.push([f[0], f[1], f[2], f[6]].join(", ")),
            _ => rows.push(l.to_string()),
        }
    }
    rows.sort();
    variables.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    (rows, variables)
}

/// Two state types on one container (nested and overlapping each other), twenty link types sharing
/// one value: what a simulation writes.
const TWO_STATE_TYPES: &str = "\
%EventDef PajeDefineContainerType 0\n% Alias string\n% Type string\n% Name string\n%EndEventDef
%EventDef PajeDefineStateType 1\n% Alias string\n% Type string\n% Name string\n%EndEventDef
%EventDef PajeDefineLinkType 2\n% Alias string\n% Type string\n% StartContainerType string\n% EndContainerType string\n% Name string\n%EndEventDef
%EventDef PajeCreateContainer 3\n% Time date\n% Alias string\n% Type string\n% Container string\n% Name string\n%EndEventDef
%EventDef PajePushState 4\n% Time date\n% Type string\n% Container string\n% Value string\n%EndEventDef
%EventDef PajePopState 5\n% Time date\n% Type string\n% Container string\n%EndEventDef
%EventDef PajeSetState 6\n% Time date\n% Type string\n% Container string\n% Value string\n%EndEventDef
%EventDef PajeStartLink 7\n% Time date\n% Type string\n% Container string\n% StartContainer string\n% Value string\n% Key string\n%EndEventDef
%EventDef PajeEndLink 8\n% Time date\n% Type string\n% Container string\n% EndContainer string\n% Value string\n% Key string\n%EndEventDef
0 H 0 HOST
1 PM H PM
1 SERVICE H SERVICE
3 0 h1 H 0 node1
3 0 h2 H 0 node2
6 0.0 PM h1 on
4 1.0 SERVICE h1 compute
4 1.5 SERVICE h1 io
6 2.0 PM h1 sleep
5 3.0 SERVICE h1
5 4.0 SERVICE h1
6 5.0 PM h1 on
";

fn two_state_types_file(dir: &Path) -> PathBuf {
    let mut text = TWO_STATE_TYPES.to_string();
    for i in 0..20 {
        text.push_str(&format!("2 L{i} 0 H H route{i}\n"));
    }
    for i in 0..20 {
        let t = 5.0 + 0.1 * f64::from(i);
        text.push_str(&format!("7 {t:.1} L{i} 0 h1 msg k{i}\n"));
        text.push_str(&format!("8 {:.1} L{i} 0 h2 msg k{i}\n", t + 0.5));
    }
    let f = dir.join("two-state-types.trace");
    std::fs::write(&f, text).unwrap();
    f
}

/// A SimGrid platform as its Pajé output has it: zones holding hosts, routers and links (three container
/// types on one level), variables on hosts and links, and 240 links of four link types between typed
/// containers (host → link, link → router, router → link, link → host), each inside its zone.
fn simgrid_platform_file(dir: &Path) -> PathBuf {
    let mut t = String::from(
        "%EventDef PajeDefineContainerType 0\n% Alias string\n% Type string\n% Name string\n%EndEventDef
%EventDef PajeDefineVariableType 1\n% Alias string\n% Type string\n% Name string\n%EndEventDef
%EventDef PajeDefineStateType 2\n% Alias string\n% Type string\n% Name string\n%EndEventDef
%EventDef PajeDefineLinkType 3\n% Alias string\n% Type string\n% StartContainerType string\n% EndContainerType string\n% Name string\n%EndEventDef
%EventDef PajeCreateContainer 4\n% Time date\n% Alias string\n% Type string\n% Container string\n% Name string\n%EndEventDef
%EventDef PajeSetVariable 5\n% Time date\n% Type string\n% Container string\n% Value double\n%EndEventDef
%EventDef PajeSetState 6\n% Time date\n% Type string\n% Container string\n% Value string\n%EndEventDef
%EventDef PajeStartLink 7\n% Time date\n% Type string\n% Container string\n% StartContainer string\n% Value string\n% Key string\n%EndEventDef
%EventDef PajeEndLink 8\n% Time date\n% Type string\n% Container string\n% EndContainer string\n% Value string\n% Key string\n%EndEventDef
0 ZONE 0 Zone
0 HOST ZONE Host
0 ROUTER ZONE Router
0 LINK ZONE Link
1 power HOST power
1 bw LINK bandwidth
2 HS HOST HostState
3 HL ZONE HOST LINK host-link
3 LR ZONE LINK ROUTER link-router
3 RL ZONE ROUTER LINK router-link
3 LH ZONE LINK HOST link-host
",
    );
    for z in 0..2 {
        t.push_str(&format!("4 0 z{z} ZONE 0 zone{z}\n"));
        for h in 0..3 {
            t.push_str(&format!("4 0 h{z}_{h} HOST z{z} host{z}-{h}\n"));
            t.push_str(&format!("5 0 power h{z}_{h} {}\n", 1e9 * f64::from(h + 1)));
            t.push_str(&format!("6 0 HS h{z}_{h} idle\n"));
        }
        for r in 0..2 {
            t.push_str(&format!("4 0 r{z}_{r} ROUTER z{z} router{z}-{r}\n"));
        }
        for l in 0..4 {
            t.push_str(&format!("4 0 l{z}_{l} LINK z{z} link{z}-{l}\n"));
            t.push_str(&format!("5 0 bw l{z}_{l} 125000000\n"));
        }
    }
    for i in 0..240u32 {
        let z = i % 2;
        let (ty, from, to) = match i % 4 {
            0 => ("HL", format!("h{z}_{}", i % 3), format!("l{z}_{}", i % 4)),
            1 => ("LR", format!("l{z}_{}", i % 4), format!("r{z}_{}", i % 2)),
            2 => (
                "RL",
                format!("r{z}_{}", i % 2),
                format!("l{z}_{}", (i + 1) % 4),
            ),
            _ => (
                "LH",
                format!("l{z}_{}", (i + 2) % 4),
                format!("h{z}_{}", (i + 1) % 3),
            ),
        };
        let start = 1.0 + f64::from(i) * 0.01;
        t.push_str(&format!("7 {start:.3} {ty} z{z} {from} msg k{i}\n"));
        t.push_str(&format!("8 {:.3} {ty} z{z} {to} msg k{i}\n", start + 0.005));
        if i % 10 == 0 {
            t.push_str(&format!("6 {start:.3} HS h{z}_{} compute\n", i % 3));
        }
    }
    let f = dir.join("simgrid-platform.trace");
    std::fs::write(&f, t).unwrap();
    f
}

#[test]
fn paje_exports_read_back_by_pj_dump_as_their_source() {
    let dir = tempfile::tempdir().unwrap();
    let mut files: Vec<PathBuf> = [
        "paje/pajeng-native_sample.trace",
        "paje/pajeng-categories.trace",
        "paje/pajeng-simgrid-fg126.trace",
    ]
    .iter()
    .map(|r| PathBuf::from(real(r)))
    .collect();
    files.push(two_state_types_file(dir.path()));
    files.push(simgrid_platform_file(dir.path()));
    for (i, src) in files.iter().enumerate() {
        let db = dir.path().join(format!("{i}.db"));
        let p = dir.path().join(format!("{i}.paje"));
        ok(socscope(&[
            "import",
            s(src),
            "--format",
            "paje",
            "-o",
            s(&db),
        ]));
        ok(socscope(&[
            "export",
            s(&db),
            "--format",
            "paje",
            "-o",
            s(&p),
        ]));
        let ((a, va), (b, vb)) = (pj_dump(src), pj_dump(&p));
        assert!(a.len() + va.len() > 10, "{}: {a:?}", src.display());
        // By count per kind and type first (what is lost shows here), then entity by entity.
        let per_type = |rows: &[String]| {
            let mut m = std::collections::BTreeMap::<(String, String), usize>::new();
            for r in rows {
                let f: Vec<&str> = r.split(", ").collect();
                let ty = if f[0] == "Container" {
                    f[2]
                } else {
                    f.get(2).copied().unwrap_or("")
                };
                *m.entry((f[0].to_string(), ty.to_string())).or_default() += 1;
            }
            m
        };
        assert_eq!(
            per_type(&a),
            per_type(&b),
            "{}: entities per kind and type",
            src.display()
        );
        if src.ends_with("simgrid-platform.trace") {
            let links = a.iter().filter(|r| r.starts_with("Link")).count();
            assert_eq!(links, 240);
            let containers: std::collections::BTreeSet<String> = a
                .iter()
                .filter(|r| r.starts_with("Container"))
                .map(|r| r.split(", ").nth(2).unwrap().to_string())
                .collect();
            // Zone, Host, Router, Link, and pj_dump's root container `0`.
            assert_eq!(containers.len(), 5, "{containers:?}");
        }
        assert_eq!(va.len(), vb.len(), "{}: variables", src.display());
        for (x, y) in va.iter().zip(&vb) {
            let close = (x.1 - y.1).abs() <= 1e-6 * x.1.abs().max(y.1.abs()).max(1.0);
            assert!(x.0 == y.0 && close, "{}: {x:?} != {y:?}", src.display());
        }
        let only_a: Vec<&String> = a.iter().filter(|r| !b.contains(r)).take(5).collect();
        let only_b: Vec<&String> = b.iter().filter(|r| !a.contains(r)).take(5).collect();
        assert_eq!(
            a,
            b,
            "{}: only in the source {only_a:?}, only in the export {only_b:?}",
            src.display()
        );
    }
}

#[test]
fn paje_state_types_keep_their_own_nesting_and_link_types_stay_apart() {
    let dir = tempfile::tempdir().unwrap();
    let src = two_state_types_file(dir.path());
    let db = dir.path().join("a.db");
    ok(socscope(&["import", s(&src), "-o", s(&db)]));
    let q = |sql: &str| -> Vec<Value> {
        let out = socscope(&["sql", s(&db), sql, "--json"]);
        serde_json::from_slice::<Value>(&out.stdout)
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    };
    // SERVICE's `io` is inside `compute` (depth 1); PM's states are at depth 0 of their own stack.
    let states: Vec<String> = q(
        "SELECT type, ts, end_ts, depth, params FROM events WHERE category = 'state' ORDER BY ts, depth, type",
    )
    .iter()
    .map(|r| {
        format!(
            "{}|{}|{}|{}|{}",
            r["type"].as_str().unwrap(),
            r["ts"],
            r["end_ts"],
            r["depth"],
            r["params"].as_str().unwrap()
        )
    })
    .collect();
    assert_eq!(
        states,
        [
            "on|0|2000000000|0|paje_type=PM",
            "compute|1000000000|4000000000|0|paje_type=SERVICE",
            "io|1500000000|3000000000|1|paje_type=SERVICE",
            "sleep|2000000000|5000000000|0|paje_type=PM",
            "on|5000000000|7400000000|0|paje_type=PM",
        ]
    );
    let links = q(
        "SELECT count(DISTINCT type) AS types, count(*) AS n FROM events WHERE category = 'link'",
    );
    assert_eq!(
        (links[0]["types"].as_u64(), links[0]["n"].as_u64()),
        (Some(20), Some(20))
    );
}

fn fails(out: Output) -> String {
    assert!(
        !out.status.success(),
        "succeeded: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_time_that_is_no_number_warns_and_strict_fails_a_cut_header_fails() {
    let dir = tempfile::tempdir().unwrap();
    let head = "%EventDef PajeDefineContainerType 0\n% Alias string\n% Type string\n% Name string\n%EndEventDef\n\
                %EventDef PajeCreateContainer 1\n% Time date\n% Alias string\n% Type string\n% Container string\n% Name string\n%EndEventDef\n\
                %EventDef PajeNewEvent 2\n% Time date\n% Type string\n% Container string\n% Value string\n%EndEventDef\n";
    let f = dir.path().join("t.trace");
    std::fs::write(
        &f,
        format!("{head}0 C 0 C\n1 0 c C 0 c\n2 abc E c v\n2 1.0 E c v\n"),
    )
    .unwrap();
    let err = ok(socscope(&[
        "import",
        s(&f),
        "-o",
        s(&dir.path().join("a.db")),
    ]));
    assert!(
        err.contains(
            "t.trace:21:3: expected a time in seconds in the `Time` field, found `abc E c v`"
        ),
        "{err}"
    );
    let b = dir.path().join("b.db");
    let err = fails(socscope(&["import", s(&f), "-o", s(&b), "--strict"]));
    assert!(err.contains("t.trace:21:3: expected a time"), "{err}");
    assert!(!b.exists());
    // Cut inside its header: nothing kept, an error, no trace.
    let cut = dir.path().join("cut.trace");
    std::fs::write(&cut, &head[..head.len() - 30]).unwrap();
    let c = dir.path().join("c.db");
    let err = fails(socscope(&[
        "import",
        s(&cut),
        "--format",
        "paje",
        "-o",
        s(&c),
    ]));
    assert!(
        err.contains("cut inside its header") && err.contains("nothing to import"),
        "{err}"
    );
    assert!(!c.exists());
}

#[test]
fn imports_that_keep_nothing_fail_and_binary_input_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, Vec<u8>, &str, &str); 5] = [
        (
            "trace.dat",
            b"\x17\x08\x44tracing6\0\0\0\x08\0\0\0".to_vec(),
            "ftrace",
            "binary input, a trace-cmd .dat file, not ftrace text: import it with --format trace-cmd",
        ),
        (
            "stream_0",
            vec![0xc1, 0x1f, 0xfc, 0xc1, 0, 1, 2, 3],
            "auto",
            "a CTF stream",
        ),
        (
            "noise.bin",
            (0u8..=255).cycle().take(5000).collect(),
            "gst",
            "binary input, not gst text",
        ),
        (
            "empty.log",
            Vec::new(),
            "gst",
            "nothing to import (the file is empty)",
        ),
        (
            "words.txt",
            b"nothing here is a trace\nnor here \x1b[31m\x01\n".to_vec(),
            "ftrace",
            "nothing to import (0 records read, 2 lines skipped: is it ftrace text?)",
        ),
    ];
    for (name, bytes, format, expected) in cases {
        let f = dir.path().join(name);
        std::fs::write(&f, &bytes).unwrap();
        let out = dir.path().join(format!("{name}.db"));
        let err = fails(socscope(&[
            "import",
            s(&f),
            "--format",
            format,
            "-o",
            s(&out),
        ]));
        assert!(err.contains(expected), "{name}: {err}");
        assert!(!out.exists(), "{name}: a trace was left behind");
        // Every message escapes what the file holds: no control byte reaches the terminal.
        assert!(
            !err.bytes().any(|b| b < 0x20 && b != b'\n'),
            "{name}: {err:?}"
        );
    }
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().to_string_lossy().contains(".db"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn ftrace_details_syscall_names_systrace_html_and_board_fields() {
    let dir = tempfile::tempdir().unwrap();
    // A syscall exit without its entry keeps the name its exit line gives.
    let a = dir.path().join("a.db");
    ok(socscope(&[
        "import",
        &real("ftrace/tci-ftrace_syscalls.txt"),
        "-o",
        s(&a),
    ]));
    let q = |db: &Path, sql: &str| -> Vec<Value> {
        let out = socscope(&["sql", s(db), sql, "--json"]);
        serde_json::from_slice::<Value>(&out.stdout)
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    };
    let first = q(
        &a,
        "SELECT params FROM events WHERE type = 'syscall' ORDER BY ts LIMIT 1",
    );
    assert!(
        first[0]["params"]
            .as_str()
            .unwrap()
            .contains("name=rt_sigprocmask;"),
        "{first:?}"
    );
    let unnamed = q(
        &a,
        "SELECT count(*) AS n FROM events WHERE type = 'syscall' AND params LIKE '%;name=;%'",
    );
    assert_eq!(unnamed[0]["n"], 0);
    // Systrace HTML: told apart by --format auto.
    let text = std::fs::read_to_string(real("ftrace/tci-trace-android-sched.txt")).unwrap();
    let html = dir.path().join("systrace.html");
    std::fs::write(
        &html,
        format!(
            "<!DOCTYPE html>\n<html>\n<head><title>Android System Trace</title></head>\n<body>\n\
             <script class=\"trace-data\" type=\"application/text\">\n{text}</script>\n</body>\n</html>\n"
        ),
    )
    .unwrap();
    let h = dir.path().join("h.db");
    let out = socscope(&["import", s(&html), "-o", s(&h)]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    ok(out);
    assert!(stdout.contains("(ftrace)"), "{stdout}");
    // Board fields: what the file says (4 CPUs, tracer nop), nothing empty shown.
    let info = String::from_utf8(socscope(&["info", s(&h)]).stdout).unwrap();
    assert!(
        !info.contains("(, )") && !info.contains("board  "),
        "{info}"
    );
    assert!(info.contains("ftrace (tracer nop), 4 CPUs"), "{info}");
}

/// Every shared trace file, and the GStreamer tracer logs of the collector's tests.
fn every_trace_file() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for sub in ["ftrace", "gstreamer", "paje"] {
        let dir = PathBuf::from(real(sub));
        let mut these: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        these.sort();
        files.extend(these);
    }
    let gst = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../collector/tests/data/gst");
    files.push(gst.join("videotestsrc-tracers.log"));
    files.push(gst.join("audiotestsrc-queue-stats.log"));
    // Hand-written in gst-shark's record layout (interlatency links, proctime states).
    files.push(gst.join("gst-shark-handwritten.log"));
    files
}

/// Per type and category: count, total duration, first start, last end.
fn per_type(db: &Path) -> Vec<Value> {
    let out = socscope(&[
        "sql",
        s(db),
        "SELECT type, category, count(*) AS n, sum(end_ts - ts) AS total, min(ts) AS first, \
         max(end_ts) AS last FROM events GROUP BY type, category ORDER BY type, category",
        "--json",
    ]);
    serde_json::from_slice::<Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn every_trace_file_round_trips_through_paje_and_chrome_json() {
    let files = every_trace_file();
    assert!(files.len() >= 11, "{files:?}");
    for (i, src) in files.iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join(format!("{i}.db"));
        let p = dir.path().join(format!("{i}.paje"));
        let b = dir.path().join(format!("{i}-back.db"));
        let j = dir.path().join(format!("{i}.json"));
        ok(socscope(&["import", s(src), "-o", s(&a)]));
        // Pajé: same counts, total durations and time ranges per type.
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
            "--strict",
            "-o",
            s(&b),
        ]));
        let (ta, tb) = (per_type(&a), per_type(&b));
        assert!(!ta.is_empty(), "{}", src.display());
        assert_eq!(ta, tb, "{}: Pajé round trip", src.display());
        // Chrome JSON: every event, by category.
        ok(socscope(&[
            "export",
            s(&a),
            "--format",
            "chrome-json",
            "-o",
            s(&j),
        ]));
        let doc: Value = serde_json::from_slice(&std::fs::read(&j).unwrap()).unwrap();
        let mut by_ph: std::collections::HashMap<String, u64> = Default::default();
        for e in doc["traceEvents"].as_array().unwrap() {
            *by_ph
                .entry(e["ph"].as_str().unwrap().to_string())
                .or_insert(0) += 1;
        }
        let count = |cat: &str| -> u64 {
            ta.iter()
                .filter(|r| r["category"] == cat)
                .map(|r| r["n"].as_u64().unwrap())
                .sum()
        };
        let ph = |k: &str| by_ph.get(k).copied().unwrap_or(0);
        // With CPU tracks, an interrupt is also a slice of its CPU's track.
        let typed = |name: &str| -> u64 {
            ta.iter()
                .filter(|r| r["type"] == name)
                .map(|r| r["n"].as_u64().unwrap())
                .sum()
        };
        let on_tracks = if typed("on_cpu") + typed("cpu_idle") > 0 {
            typed("irq") + typed("softirq")
        } else {
            0
        };
        assert_eq!(
            (ph("X"), ph("i"), ph("s"), ph("f"), ph("C")),
            (
                count("state") + on_tracks,
                count("punctual"),
                count("link"),
                count("link"),
                count("variable")
            ),
            "{}: Chrome JSON",
            src.display()
        );
    }
}

/// `import -o FILE` writes FILE alone: no `catalog.db` appears in the working directory unless
/// `--register` asks for one, or the directory is a catalog directory already.
#[test]
fn import_o_writes_no_catalog_unless_asked() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_socscope"))
            .args(args)
            .current_dir(dir.path())
            .output()
            .expect("socscope runs");
        ok(out)
    };
    let sample = real("paje/pajeng-native_sample.trace");
    run(&["import", &sample, "-o", "stb.db"]);
    assert!(dir.path().join("stb.db").is_file());
    assert!(!dir.path().join("catalog.db").exists(), "created unasked");
    // Asked: the trace is registered, and `ls` lists it.
    run(&["import", &sample, "-o", "stb2.db", "--register"]);
    assert!(dir.path().join("catalog.db").is_file());
    // A catalog directory already: the next one is registered without asking.
    run(&["import", &sample, "-o", "stb3.db"]);
    let out = Command::new(env!("CARGO_BIN_EXE_socscope"))
        .args(["ls", "--dir", s(dir.path()), "--json"])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        listed.contains("stb2.db") && listed.contains("stb3.db") && !listed.contains("stb.db\""),
        "{listed}"
    );
    // --register means nothing without -o (the --dir catalog always registers).
    let out = socscope(&["import", &sample, "--register"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}
