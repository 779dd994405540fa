//! The conventions every command keeps, as a newcomer's first hour tries them (issue 14): a closed pipe
//! ends a command quietly, bad arguments exit 2 and missing files 1 with one wording, nothing is created
//! before the arguments are checked, one default catalog directory, and no display is no raw error.

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};

fn socscope_in(cwd: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_socscope"));
    c.args(args)
        .current_dir(cwd)
        .env_remove("RUST_BACKTRACE")
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY");
    c
}

fn run(args: &[&str]) -> Output {
    socscope_in(Path::new("."), args)
        .output()
        .expect("socscope runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts a failure with `code` and one line on standard error, no panic; returns the line.
fn one_line_failure(out: &Output, code: i32) -> String {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(code), "exit code; stderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {err:?}");
    assert!(lines[0].starts_with("socscope: "), "{err:?}");
    lines[0].to_string()
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// Runs `args` with standard output a pipe whose reader is gone (`| head -0`): the command must end
/// with status 0 and say nothing.
fn into_closed_pipe(args: &[&str]) {
    let mut child = socscope_in(Path::new("."), args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("socscope runs");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("socscope ends");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
    assert!(
        !err.contains("panicked") && !err.contains("Broken pipe"),
        "{args:?}: {err}"
    );
}

#[test]
fn every_command_ends_quietly_on_a_closed_pipe() {
    let (dir, trace) = common::demo_trace(3, 1);
    let t = s(&trace);
    let out = dir.path().join("out.csv");
    for args in [
        &["sql", t, "SELECT * FROM events"][..],
        &["sql", t, "SELECT * FROM events", "--json"],
        &["info", t],
        &["info", t, "--json"],
        &["ls", "--dir", s(dir.path())],
        &["stats", t],
        &["density", t, "--bins", "2000"],
        &["timeline", t, "--json"],
        &["aggregate", t, "--plist"],
        &["compare", t, t],
        &["export", t, "--format", "csv", "-o", s(&out)],
        &["--help"],
    ] {
        into_closed_pipe(args);
    }
}

#[test]
fn bad_arguments_exit_2_and_missing_files_1_in_one_wording() {
    let (_dir, trace) = common::demo_trace(4, 1);
    let t = s(&trace);
    // A limit of 0 connections or sessions would refuse every board: a bad argument, not a collector
    // that runs and stores nothing (the replay is there so that a build accepting it ends at once).
    let empty = tempfile::NamedTempFile::new().unwrap();
    let empty = s(empty.path()).to_string();
    for limit in [
        "--max-connections",
        "--max-pending-per-address",
        "--max-sessions-per-minute",
        "--max-new-sessions-per-minute",
    ] {
        let line = one_line_failure(
            &run(&[
                "collect",
                "--no-listen",
                "--replay",
                &empty,
                limit,
                "0",
                "--dir",
                "/tmp/never-made",
            ]),
            2,
        );
        assert!(line.contains("0 would refuse every board"), "{line}");
    }
    for args in [
        &["stats", t, "--range", "3..1"][..],
        &["stats", t, "--range", "abc"],
        &["density", t, "--range", "100s.."],
        &[
            "export", t, "--format", "csv", "--range", "1x..", "-o", "/tmp/x",
        ],
        &["aggregate", t, "--slices", "0"],
        &["stats", t, "--types", "no-such-type"],
        &["timeline", t, "--width", "0"],
        &["compare", t, t, "--p", "2"],
        &[
            "collect",
            "--no-listen",
            "--commit-interval",
            "0",
            "--dir",
            "/tmp/x",
        ],
    ] {
        one_line_failure(&run(args), 2);
    }
    let missing = "/nonexistent/trace.db";
    let expected = format!("socscope: {missing}: no such file");
    for args in [
        &["info", missing][..],
        &["sql", missing, "SELECT 1"],
        &["stats", missing],
        &["density", missing],
        &["aggregate", missing],
        &["aggregate", "--model", missing],
        &["timeline", missing],
        &["compare", missing, t],
        &["compare", t, missing],
        &["export", missing, "--format", "csv", "-o", "/tmp/x"],
        &["import", missing],
        &[
            "collect",
            "--replay",
            missing,
            "--no-listen",
            "--dir",
            "/tmp/never-made",
        ],
    ] {
        assert_eq!(one_line_failure(&run(args), 1), expected, "{args:?}");
    }
    // A picture that cannot be written: the file and the system's reason, before anything is drawn.
    let png = "/nonexistent/dir/x.png";
    for args in [
        &["stats", t, "--png", png][..],
        &["gantt", t, "--range", "1..2", "--png", png],
    ] {
        let line = one_line_failure(&run(args), 1);
        assert_eq!(
            line,
            format!("socscope: cannot draw {png}: No such file or directory (os error 2)"),
            "{args:?}"
        );
    }
}

#[test]
fn a_bad_listen_address_creates_nothing() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("t");
    let line = one_line_failure(
        &run(&["collect", "--listen", "127.0.0.1:99999", "--dir", s(&dir)]),
        2,
    );
    assert!(line.contains("99999"), "{line}");
    assert!(!dir.exists(), "{} was created", dir.display());
    let missing = work.path().join("missing.wire");
    one_line_failure(
        &run(&[
            "collect",
            "--replay",
            s(&missing),
            "--no-listen",
            "--dir",
            s(&dir),
        ]),
        1,
    );
    assert!(!dir.exists(), "{} was created", dir.display());
    // A port already taken fails before anything is created too.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let line = one_line_failure(&run(&["collect", "--listen", &addr, "--dir", s(&dir)]), 1);
    assert!(line.contains(&addr), "{line}");
    assert!(!dir.exists(), "{} was created", dir.display());
}

#[test]
fn a_sql_error_quotes_the_query_once() {
    let (_dir, trace) = common::demo_trace(5, 1);
    let line = one_line_failure(
        &run(&["sql", s(&trace), "SELECT nosuchcolumn FROM event_type"]),
        1,
    );
    assert_eq!(line.matches("FROM event_type").count(), 1, "{line}");
    assert!(line.contains("no such column"), "{line}");
}

#[test]
fn demo_ls_and_view_share_one_default_directory_and_no_display_is_one_line() {
    let work = tempfile::tempdir().unwrap();
    // A display variable that points at nothing: the demo runs headless, with a note, and its trace is whole.
    let out = socscope_in(work.path(), &["demo", "--duration", "1", "--seed", "2"])
        .env("DISPLAY", ":64999")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("no display answers at DISPLAY=:64999") && err.contains("headless"),
        "{err}"
    );
    assert!(!err.contains(".cargo") && !err.contains("winit"), "{err}");
    // `ls` and `view` find the demo's trace without being told where.
    let out = socscope_in(work.path(), &["ls", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let ls: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let traces = ls["traces"].as_array().expect("traces");
    assert_eq!(traces.len(), 1, "{ls}");
    assert!(traces[0]["events"].as_u64().unwrap() > 1000, "{ls}");
    assert_eq!(traces[0]["complete"], true);
    for display in [None, Some(":64999")] {
        let mut view = socscope_in(work.path(), &["view"]);
        if let Some(d) = display {
            view.env("DISPLAY", d);
        }
        let line = one_line_failure(&view.output().unwrap(), 1);
        assert!(
            line.contains("cannot open a window")
                && line.contains("xvfb-run")
                && line.contains("--screenshot"),
            "{line}"
        );
    }
}

#[test]
fn syscalls_carry_their_names_beside_their_numbers() {
    let (dir, trace) = common::demo_trace(7, 1);
    let t = s(&trace);
    // SQL and CSV: the `name` parameter beside `nr` (ARM EABI: 240 is futex, 3 is read).
    let out = run(&[
        "sql",
        t,
        "SELECT params FROM events WHERE type = 'syscall'",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let params: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["params"].as_str().unwrap())
        .collect();
    assert!(!params.is_empty());
    assert!(params.iter().all(|p| p.contains(";name=")), "{params:?}");
    assert!(
        params
            .iter()
            .any(|p| p.starts_with("nr=3;") && p.contains(";name=read;")),
        "{params:?}"
    );
    // The statistics per syscall: slices named by the calls, counts and time.
    for op in ["count-per-syscall", "syscall-duration"] {
        let out = run(&["stats", t, "--operator", op, "--json"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let labels: Vec<&str> = doc["slices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|sl| sl["label"].as_str().unwrap())
            .collect();
        assert!(
            labels.contains(&"read") && labels.contains(&"futex"),
            "{op}: {labels:?}"
        );
        assert!(
            labels.iter().all(|l| !l.starts_with("syscall ")),
            "{labels:?}"
        );
    }
    // Chrome JSON: a syscall slice is called by its name, its type and number in the arguments.
    let json = dir.path().join("x.json");
    let out = run(&["export", t, "--format", "chrome-json", "-o", s(&json)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let reads: Vec<&serde_json::Value> = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["args"]["type"] == "syscall" && e["name"] == "read")
        .collect();
    assert!(!reads.is_empty());
    assert!(reads.iter().all(|e| e["args"]["nr"] == 3), "{:?}", reads[0]);
}

#[test]
fn pictures_and_json_use_the_colours_the_user_picked() {
    let (dir, trace) = common::demo_trace(8, 1);
    let colours = dir.path().join("colours.json");
    std::fs::write(
        &colours,
        r##"{"types": {"running": "#ff00ff"}, "producers": {}}"##,
    )
    .unwrap();
    let png = dir.path().join("stats.png");
    let out = socscope_in(
        Path::new("."),
        &["stats", s(&trace), "--json", "--png", s(&png)],
    )
    .env("SOCSCOPE_COLOURS", &colours)
    .output()
    .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let running = doc["slices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|sl| sl["label"] == "running")
        .expect("a running slice");
    assert_eq!(running["colour"], serde_json::json!([255, 0, 255]));
    // The picture has the colour too.
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&png).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let step = info.color_type.samples();
    let magenta = buf[..info.buffer_size()]
        .chunks(step)
        .filter(|p| p[0] == 255 && p[1] == 0 && p[2] == 255)
        .count();
    assert!(magenta > 1000, "{magenta} magenta pixels");
}

/// Runs `args` with standard error a pipe whose reader is gone (`2>&1 | head -0` on a shell that kept only
/// stderr): what the command says there is lost, but its exit status must be the one it would have had,
/// not a panic's 101.
fn with_closed_stderr(args: &[&str]) -> Option<i32> {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let out = socscope_in(Path::new("."), args)
        .stdout(Stdio::piped())
        .stderr(writer)
        .output()
        .expect("socscope runs");
    out.status.code()
}

#[test]
fn messages_to_a_closed_stderr_do_not_panic() {
    let (_dir, trace) = common::demo_trace(3, 1);
    let t = s(&trace);
    // A note after the result (`(1 rows)`), an error message, clap's usage message.
    assert_eq!(with_closed_stderr(&["sql", t, "SELECT 1"]), Some(0));
    assert_eq!(
        with_closed_stderr(&["info", "/nonexistent/trace.db"]),
        Some(1)
    );
    assert_eq!(with_closed_stderr(&["stats", "--no-such-flag"]), Some(2));
    // The same commands with standard error open, for comparison.
    assert_eq!(run(&["sql", t, "SELECT 1"]).status.code(), Some(0));
    assert_eq!(
        run(&["info", "/nonexistent/trace.db"]).status.code(),
        Some(1)
    );
}

/// A trace that starts 14.2 ms after its session (as the QEMU board's capture does), with a mark
/// every millisecond from its start and a 10 ms state every 10 ms from 5 ms in: events fall on
/// the edges of the ranges below.
fn offset_trace(dir: &Path) -> std::path::PathBuf {
    use socscope_tracedb::{
        Event, EventCategory, EventType, Producer, ProducerKind, TraceHeader, TraceWriter,
    };
    let path = dir.join("offset.db");
    let mut w = TraceWriter::create(&path, &TraceHeader::default()).unwrap();
    for (id, name, category) in [
        (1, "mark", EventCategory::Punctual),
        (2, "busy", EventCategory::State),
    ] {
        w.add_event_type(&EventType {
            id,
            name: name.into(),
            category,
            params: Vec::new(),
        })
        .unwrap();
    }
    w.add_producer(&Producer {
        id: 1,
        parent: None,
        kind: ProducerKind::Thread,
        local_id: 7,
        name: "worker".into(),
    })
    .unwrap();
    const T0: i64 = 14_200_000;
    for k in 0..3000 {
        w.push(&Event::punctual(T0 + k * 1_000_000, 1, 1, Some(0)))
            .unwrap();
    }
    for k in 0..300 {
        let start = T0 + 5_000_000 + k * 10_000_000;
        w.push(&Event::state(start, start + 10_000_000, 0, 2, 1, Some(0)))
            .unwrap();
    }
    w.finish(true).unwrap();
    path
}

#[test]
fn export_stats_and_density_take_one_range_as_the_same_events() {
    let dir = tempfile::tempdir().unwrap();
    let trace = offset_trace(dir.path());
    let t = s(&trace);
    let json = |args: &[&str]| -> serde_json::Value {
        let out = run(args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    // (range, marks, states) worked out by hand: offsets count from the first event (14.2 ms), a
    // range holds the events that start in it, its start included and its end excluded.
    for (range, marks, busy) in [
        ("1s..2s", 1000, 100),
        ("0..5ms", 5, 0),
        ("5ms..15ms", 10, 1),
        ("2.9s..", 100, 10),
        ("..1ms", 1, 0),
    ] {
        let csv = dir.path().join("range.csv");
        let out = run(&[
            "export",
            t,
            "--format",
            "csv",
            "--range",
            range,
            "-o",
            s(&csv),
        ]);
        assert!(out.status.success(), "{range}: {}", stderr(&out));
        let text = std::fs::read_to_string(&csv).unwrap();
        let rows: Vec<&str> = text.lines().skip(1).collect();
        let of = |name: &str| {
            rows.iter()
                .filter(|r| r.split(',').nth(3) == Some(name))
                .count()
        };
        assert_eq!((of("mark"), of("busy")), (marks, busy), "export {range}");

        let stats = json(&["stats", t, "--range", range, "--json"]);
        let count = |name: &str| {
            stats["slices"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["label"] == name)
                .map_or(0, |s| s["value"].as_f64().unwrap() as usize)
        };
        assert_eq!(
            (count("mark"), count("busy")),
            (marks, busy),
            "stats {range}"
        );

        let density = json(&["density", t, "--range", range, "--json", "--bins", "7"]);
        let types: Vec<&str> = density["types"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let per_type = |name: &str| -> usize {
            let Some(i) = types.iter().position(|t| *t == name) else {
                return 0;
            };
            density["bins"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b["per_type"][i].as_u64().unwrap() as usize)
                .sum()
        };
        assert_eq!(
            (per_type("mark"), per_type("busy")),
            (marks, busy),
            "density {range}"
        );
    }
}
