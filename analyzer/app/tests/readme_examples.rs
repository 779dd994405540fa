//! Every `socscope` and `socscope-sim` command of the README's `sh` examples, run as the README
//! writes it (in a scratch directory holding the files it names), must succeed and show something:
//! text on stdout or the file it was asked to write. A README edit that breaks an example, or
//! turns it into one that prints nothing, fails here. The commands that cannot run in a test (a
//! server, a serial port, a remote board, minutes of benchmark) are listed in [`NOT_RUN`] with
//! why; each entry must still match a README command, so the list cannot go stale.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Commands (by prefix, after `cargo run ... --` is read as the program it runs) the test does
/// not run, and why.
const NOT_RUN: &[(&str, &str)] = &[
    (
        "socscope demo",
        "opens the GUI; the scratch traces are made with `demo --headless`",
    ),
    (
        "socscope collect --listen",
        "a server that runs until stopped (capture_tcp covers it)",
    ),
    (
        "socscope-sim --connect",
        "streams to a collector listening on a port",
    ),
    ("socscope collect --serial", "a board's serial port"),
    (
        "socscope collect --trigger",
        "a server that runs until stopped (trigger tests cover it)",
    ),
    (
        "socscope collect --flight-recorder",
        "a server that runs until stopped (flight_recorder covers it)",
    ),
    ("socscope trigger", "needs a running collector"),
    (
        "socscope rig run",
        "starts boards for minutes (rig_cli covers it)",
    ),
    ("socscope bench", "minutes of benchmark"),
    (
        "socscope fleet",
        "a dataset in /data and, for sql/report/overview, the `fleet` build (fleet_cli covers them)",
    ),
];

/// One README command: the program and its arguments, and the text it came from.
#[derive(Debug)]
struct Example {
    text: String,
    program: String,
    args: Vec<String>,
}

/// The `socscope` / `socscope-sim` commands of the README's `sh` blocks, in order.
fn examples(readme: &str) -> Vec<Example> {
    let mut out = Vec::new();
    let mut in_sh = false;
    let mut pending = String::new();
    for line in readme.lines() {
        if line.starts_with("```") {
            in_sh = !in_sh && line.trim() == "```sh";
            continue;
        }
        if !in_sh {
            continue;
        }
        // A command continued on the next line.
        if let Some(head) = line.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(line);
        let text = std::mem::take(&mut pending);
        let words = shlex::split(&text).unwrap_or_else(|| panic!("README: cannot split {text:?}"));
        let (program, args) = match words.first().map(String::as_str) {
            Some(p @ ("socscope" | "socscope-sim")) => (p.to_owned(), words[1..].to_vec()),
            // `cargo run --release -p CRATE -- ARGS` runs CRATE's program.
            Some("cargo") if words.get(1).is_some_and(|w| w == "run") => {
                let krate = words
                    .iter()
                    .position(|w| w == "-p")
                    .and_then(|i| words.get(i + 1))
                    .cloned()
                    .unwrap_or_default();
                let program = match krate.as_str() {
                    "socscope-analyzer" => "socscope",
                    "socscope-sim" => "socscope-sim",
                    _ => continue,
                };
                let rest = words
                    .iter()
                    .position(|w| w == "--")
                    .map_or(&[][..], |i| &words[i + 1..]);
                (program.to_owned(), rest.to_vec())
            }
            _ => continue,
        };
        out.push(Example {
            text: text.trim().to_owned(),
            program,
            args,
        });
    }
    out
}

fn command_line(e: &Example) -> String {
    std::iter::once(e.program.clone())
        .chain(e.args.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ")
}

fn not_run(e: &Example) -> Option<&'static str> {
    let line = command_line(e);
    NOT_RUN
        .iter()
        .find(|(prefix, _)| line == *prefix || line.starts_with(&format!("{prefix} ")))
        .map(|(_, why)| *why)
}

fn socscope(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_socscope"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("socscope runs")
}

/// The `socscope-sim` program of this build, built into the same target directory (cargo builds
/// only the library of a dependency; a no-op when it is fresh).
fn sim_program() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("a cargo target directory");
    let target_dir = profile_dir.parent().expect("a target directory");
    let mut build = Command::new(env!("CARGO"));
    build
        .args([
            "build",
            "--quiet",
            "-p",
            "socscope-sim",
            "--bin",
            "socscope-sim",
        ])
        .env("CARGO_TARGET_DIR", target_dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        build.arg("--release");
    }
    assert!(build.status().expect("cargo runs").success());
    profile_dir.join("socscope-sim")
}

/// A 10 s headless demo capture into `dir`; its file.
fn capture(dir: &Path, extra: &[&str]) -> PathBuf {
    let d = dir.to_str().unwrap();
    let mut args = vec![
        "demo",
        "--headless",
        "--duration",
        "10",
        "--json",
        "--dir",
        d,
    ];
    args.extend_from_slice(extra);
    let out = socscope(dir.parent().unwrap(), &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    dir.join(Path::new(v["file"].as_str().unwrap()).file_name().unwrap())
}

/// The scratch directory: the files the README's examples name, made or copied.
struct Scratch {
    dir: tempfile::TempDir,
    /// The demo trace's file stem, for `<file>`.
    stem: String,
}

fn scratch() -> Scratch {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let trace = capture(&d.join("socscope-traces"), &[]);
    let stem = trace.file_stem().unwrap().to_string_lossy().into_owned();
    std::fs::copy(&trace, d.join("reference.db")).unwrap();
    let stressed = capture(&d.join("stressed"), &["--cpu-stress", "4:2"]);
    std::fs::copy(&stressed, d.join("run.db")).unwrap();
    // Another catalog directory (`--dir traces`), with the same trace in it.
    std::fs::create_dir_all(d.join("traces")).unwrap();
    std::fs::copy(&trace, d.join("traces").join(trace.file_name().unwrap())).unwrap();
    std::fs::copy(
        d.join("socscope-traces/catalog.db"),
        d.join("traces/catalog.db"),
    )
    .unwrap();
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let kptrace = manifest.join("../../protocols/formats/tests/data/kptrace");
    for f in ["trace0", "trace1", "System.map", "kptrace.fmt"] {
        std::fs::copy(kptrace.join(f), d.join(f)).unwrap();
    }
    std::fs::copy(
        manifest.join("../../protocols/tracedb/tests/data/v1-sim.db"),
        d.join("old-trace.db"),
    )
    .unwrap();
    let shared = manifest.join("../../../shared/data/traces");
    std::fs::copy(
        shared.join("trace-cmd/lisa-example_rtapp-v6.dat"),
        d.join("trace.dat"),
    )
    .unwrap();
    let session = d.join("lttng-traces/my-session");
    std::fs::create_dir_all(&session).unwrap();
    for f in ["metadata", "perf_stream_0"] {
        std::fs::copy(
            shared.join("ctf/perf-ctf-taskset2").join(f),
            session.join(f),
        )
        .unwrap();
    }
    Scratch { dir, stem }
}

/// The files a command was asked to write (`-o`, `--out`, `--png`).
fn written(args: &[String]) -> Vec<String> {
    args.windows(2)
        .filter(|w| ["-o", "--out", "--png", "--output"].contains(&w[0].as_str()))
        .map(|w| w[1].clone())
        .collect()
}

#[test]
fn every_readme_example_runs_and_shows_something() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .expect("README.md");
    let all = examples(&readme);
    assert!(all.len() > 20, "the README's examples: {all:?}");
    for (prefix, _) in NOT_RUN {
        assert!(
            all.iter().any(|e| {
                let l = command_line(e);
                l == *prefix || l.starts_with(&format!("{prefix} "))
            }),
            "NOT_RUN lists {prefix:?}, which no README example starts with any more"
        );
    }
    let s = scratch();
    let d = s.dir.path();
    let sim = sim_program();
    let mut ran = 0;
    for e in &all {
        if let Some(why) = not_run(e) {
            eprintln!("not run: {} ({why})", e.text);
            continue;
        }
        assert_ne!(
            e.args.last().map(String::as_str),
            Some("&"),
            "{}: a command left running in the background must be in NOT_RUN",
            e.text
        );
        let args: Vec<String> = e
            .args
            .iter()
            .map(|a| {
                a.replace("<file>", &s.stem).replace(
                    "~/lttng-traces",
                    &d.join("lttng-traces").display().to_string(),
                )
            })
            .collect();
        let program = if e.program == "socscope" {
            PathBuf::from(env!("CARGO_BIN_EXE_socscope"))
        } else {
            sim.clone()
        };
        let out = Command::new(&program)
            .args(&args)
            .current_dir(d)
            .output()
            .expect("the example runs");
        // `compare` exits 3 when a window departs (the README says so): a result, not a failure.
        let ok = out.status.success() || (args[0] == "compare" && out.status.code() == Some(3));
        assert!(
            ok,
            "README example failed: {}\n{}",
            e.text,
            String::from_utf8_lossy(&out.stderr)
        );
        let files = written(&args);
        let shown = !String::from_utf8_lossy(&out.stdout).trim().is_empty()
            || (!files.is_empty()
                && files
                    .iter()
                    .all(|f| std::fs::metadata(d.join(f)).is_ok_and(|m| m.len() > 0)));
        assert!(shown, "README example showed nothing: {}", e.text);
        what_it_is_for(e, &args, &String::from_utf8_lossy(&out.stdout), d);
        ran += 1;
    }
    assert!(ran >= 15, "{ran} examples run");
}

/// An example shows what its command is for: `export` exports events, and `aggregate --save`
/// saves more than one part (the README's examples exported 0 events and saved a single part).
fn what_it_is_for(e: &Example, args: &[String], stdout: &str, d: &Path) {
    if e.program != "socscope" {
        return;
    }
    let has = |a: &str| args.iter().any(|x| x == a);
    if args[0] == "export" && has("chrome-json") {
        let file = written(args).pop().expect("export -o FILE");
        let v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(d.join(&file)).unwrap()).unwrap();
        let events = v["traceEvents"].as_array().map_or(0, Vec::len);
        assert!(events > 10, "{}: {events} events exported", e.text);
    }
    if args[0] == "aggregate" && has("--save") && !has("--processed-trace") {
        let parts: usize = stdout
            .lines()
            .find_map(|l| {
                let at = l.strip_prefix("at p=")?;
                let words: Vec<&str> = at.split_whitespace().collect();
                let i = words.iter().position(|w| *w == "parts:" || *w == "part:")?;
                words.get(i - 1)?.parse().ok()
            })
            .unwrap_or_else(|| panic!("{}: no part count in\n{stdout}", e.text));
        assert!(parts > 1, "{}: {parts} part(s) saved\n{stdout}", e.text);
    }
}
