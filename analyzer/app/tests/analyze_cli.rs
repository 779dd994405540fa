//! The analysis commands end to end: real sim captures (`socscope demo --headless`), JSON
//! shapes, PNG files, bad arguments, and `compare` finding exactly the stress windows.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::{decode_png, socscope};
use serde_json::Value;

/// A 10 s capture of the simulated board (seed 1), with the given stress options.
fn capture(dir: &Path, extra: &[&str]) -> PathBuf {
    let mut args = vec!["demo", "--headless", "--duration", "10", "--json", "--dir"];
    let d = dir.to_str().unwrap();
    args.push(d);
    args.extend_from_slice(extra);
    let out = socscope(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let file = v["file"].as_str().unwrap();
    let p = PathBuf::from(file);
    if p.is_absolute() {
        p
    } else {
        dir.join(p.file_name().unwrap())
    }
}

struct Traces {
    _dir: tempfile::TempDir,
    reference: PathBuf,
    cpu: PathBuf,
    io: PathBuf,
}

fn traces() -> &'static Traces {
    static T: OnceLock<Traces> = OnceLock::new();
    T.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let reference = capture(&dir.path().join("ref"), &[]);
        let cpu = capture(&dir.path().join("cpu"), &["--cpu-stress", "4:2"]);
        let io = capture(&dir.path().join("io"), &["--io-stress", "4:2"]);
        Traces {
            _dir: dir,
            reference,
            cpu,
            io,
        }
    })
}

fn json(args: &[&str]) -> Value {
    let out = socscope(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A PNG file with a valid signature and more than a blank picture's worth of bytes.
fn assert_png(p: &Path) {
    let bytes = std::fs::read(p).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{}", p.display());
    assert!(
        bytes.len() > 8_000,
        "{}: {} bytes",
        p.display(),
        bytes.len()
    );
}

#[test]
fn compare_finds_the_cpu_stress_window_and_nothing_else() {
    let t = traces();
    let out = socscope(&["compare", s(&t.reference), s(&t.cpu), "--json"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let flagged: Vec<&Value> = v["windows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["departure"] == true)
        .collect();
    assert_eq!(flagged.len(), 1, "{v:#}");
    let w = flagged[0];
    let (a, b) = (w["start_s"].as_f64().unwrap(), w["end_s"].as_f64().unwrap());
    // The stress runs over [4, 6); one 100 ms slice of slack for the catch-up after it.
    assert!(
        (3.9..=4.05).contains(&a) && (5.95..=6.15).contains(&b),
        "{a}..{b}"
    );
    assert_eq!(w["producers"][0]["name"], "cpu-burn");
    assert!(w["score"].as_f64().unwrap() >= 0.25);
}

#[test]
fn compare_finds_the_io_stress_window_and_nothing_else() {
    let t = traces();
    let out = socscope(&["compare", s(&t.reference), s(&t.io), "--json"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let flagged: Vec<&Value> = v["windows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["departure"] == true)
        .collect();
    assert_eq!(flagged.len(), 1, "{v:#}");
    let (a, b) = (
        flagged[0]["start_s"].as_f64().unwrap(),
        flagged[0]["end_s"].as_f64().unwrap(),
    );
    assert!(
        (3.9..=4.05).contains(&a) && (5.95..=6.15).contains(&b),
        "{a}..{b}"
    );
    assert_eq!(flagged[0]["producers"][0]["name"], "dd");
}

#[test]
fn compare_of_a_trace_with_itself_exits_0_with_one_window() {
    let t = traces();
    let out = socscope(&["compare", s(&t.reference), s(&t.reference)]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("1 windows, 0 departing"), "{text}");
}

#[test]
fn stats_density_timeline_json_and_png() {
    let t = traces();
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("stats.png");
    let v = json(&[
        "stats",
        s(&t.cpu),
        "--operator",
        "state-duration-per-type",
        "--range",
        "4..6",
        "--threshold",
        "0.01",
        "--json",
        "--png",
        s(&png),
    ]);
    assert_eq!(v["operator"], "state-duration-per-type");
    assert_eq!(v["unit"], "ns");
    let slices = v["slices"].as_array().unwrap();
    assert!(slices.iter().any(|x| x["label"] == "running"));
    let total: f64 = slices.iter().map(|x| x["value"].as_f64().unwrap()).sum();
    assert!((total - v["total"].as_f64().unwrap()).abs() < 1e-6);
    // Two CPUs always run something (the idle task included): 2 × 2 s of `running`.
    let running = slices.iter().find(|x| x["label"] == "running").unwrap();
    assert!(
        (running["value"].as_f64().unwrap() - 4e9).abs() < 1e7,
        "{running}"
    );
    // The CPU tracks over the same 2 s: each CPU busy or idle the whole time, the CPU stress
    // (4 s to 6 s) keeping both busy, and the threads' CPU time adding up to the CPUs' busy time.
    let cpu = &v["cpu_utilisation"];
    assert_eq!(cpu["interval_ns"], 2_000_000_000i64);
    let cpus = cpu["cpus"].as_array().unwrap();
    assert_eq!(cpus.len(), 2, "{cpu}");
    let ns = |x: &Value, k: &str| x[k].as_i64().unwrap();
    for c in cpus {
        assert!(
            (ns(c, "busy_ns") + ns(c, "idle_ns") - 2_000_000_000).abs() < 10_000_000,
            "{c}"
        );
        assert!(c["busy_percent"].as_f64().unwrap() > 90.0, "stressed: {c}");
    }
    let threads = cpu["threads"].as_array().unwrap();
    let thread_ns: i64 = threads.iter().map(|t| ns(t, "cpu_ns")).sum();
    let busy_ns: i64 = cpus.iter().map(|c| ns(c, "busy_ns")).sum();
    assert_eq!(thread_ns, busy_ns);
    assert!(
        threads[0]["thread"]
            .as_str()
            .unwrap()
            .starts_with("cpu-burn"),
        "{}",
        threads[0]
    );
    assert!(v["first_result_ms"].as_f64().is_some());
    assert_png(&png);

    let png = dir.path().join("density.png");
    let v = json(&[
        "density",
        s(&t.reference),
        "--bins",
        "50",
        "--json",
        "--png",
        s(&png),
    ]);
    let bins = v["bins"].as_array().unwrap();
    assert_eq!(bins.len(), 50);
    let sum: u64 = bins.iter().map(|b| b["count"].as_u64().unwrap()).sum();
    assert_eq!(sum, v["total"].as_u64().unwrap());
    let info = json(&["info", s(&t.reference), "--json"]);
    assert_eq!(sum, info["events"].as_u64().unwrap());
    assert_png(&png);

    // `--range 4..6` is labelled in trace time (4 s to 6 s), not from 0, in the text and the PNG.
    let out = socscope(&[
        "density",
        s(&t.reference),
        "--range",
        "4..6",
        "--bins",
        "4",
        "--png",
        s(&png),
    ]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let starts: Vec<f64> = text
        .lines()
        .skip(1)
        .take(4)
        .map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(words[1], "s", "bins labelled in seconds: {text}");
            words[0].parse().unwrap()
        })
        .collect();
    assert_eq!(starts, [4.0, 4.5, 5.0, 5.5], "{text}");
    assert_png(&png);

    let png = dir.path().join("timeline.png");
    let v = json(&[
        "timeline",
        s(&t.cpu),
        "--width",
        "200",
        "--statistic",
        "activity",
        "--group",
        "video=vdec,vsync-cb:max",
        "--json",
        "--png",
        s(&png),
    ]);
    assert_eq!(v["outline"].as_array().unwrap().len(), 200);
    assert_eq!(v["luminance"].as_array().unwrap().len(), 200);
    assert_eq!(v["groups"][0]["op"], "max");
    assert!(
        v["actors"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["name"] == "cpu-burn")
    );
    assert_png(&png);
}

#[test]
fn aggregate_trace_temporal_and_spatiotemporal() {
    let t = traces();
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("temporal.png");
    let v = json(&[
        "aggregate",
        s(&t.cpu),
        "--slices",
        "40",
        "--metric",
        "duration",
        "--p",
        "0.3",
        "--json",
        "--png",
        s(&png),
    ]);
    assert_eq!(v["slices"], 40);
    assert_eq!(v["metric"], "duration");
    let report = &v["report"];
    assert_eq!(report["mode"], "temporal");
    assert!(!report["dichotomy"].as_array().unwrap().is_empty());
    let at = &report["at_p"][0];
    // The partition covers the 40 slices exactly.
    let ranges = at["ranges"].as_array().unwrap();
    assert_eq!(ranges[0][0], 0);
    assert_eq!(ranges.last().unwrap()[1], 39);
    assert_png(&png);

    let png = dir.path().join("st.png");
    let v = json(&[
        "aggregate",
        s(&t.io),
        "--mode",
        "spatiotemporal",
        "--slices",
        "20",
        "--metric",
        "duration",
        "--json",
        "--png",
        s(&png),
    ]);
    assert_eq!(v["report"]["mode"], "spatiotemporal");
    assert_eq!(v["nodes"][0]["name"], "all");
    let aggs = v["report"]["dichotomy"][0]["aggregates"]
        .as_array()
        .unwrap();
    assert!(!aggs.is_empty() && aggs[0].as_array().unwrap().len() == 3);
    assert_png(&png);
}

#[test]
fn bad_arguments_give_one_line_and_a_non_zero_status() {
    let t = traces();
    for (args, code) in [
        (vec!["stats", s(&t.reference), "--operator", "nope"], 2),
        (vec!["density", s(&t.reference), "--bins", "0"], 2),
        (vec!["aggregate", s(&t.reference), "--metric", "median"], 2),
        (vec!["aggregate", s(&t.reference), "--range", "5..2"], 2),
        (
            vec!["timeline", s(&t.reference), "--types", "no_such_type"],
            2,
        ),
        (vec!["compare", s(&t.reference)], 2),
        (vec!["compare", s(&t.reference), "/nonexistent/x.db"], 1),
    ] {
        let out = socscope(&args);
        assert_eq!(out.status.code(), Some(code), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("socscope: "), "{err}");
        assert!(out.stdout.is_empty());
    }
}

/// `aggregate --memory-budget`: a run that cannot fit is refused at once with what it needs;
/// a size that is not one is a usage error; the text report names how the engine ran.
#[test]
fn aggregate_memory_budget_refuses_before_it_starts() {
    let model = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/ocelotl/v04_perturbation.input.json");
    let m = s(&model);
    let started = std::time::Instant::now();
    let out = socscope(&[
        "aggregate",
        "--model",
        m,
        "--mode",
        "spatiotemporal",
        "--memory-budget",
        "64KiB",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("needs about") && err.contains("more than the memory budget of 1 MiB"),
        "{err}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    let out = socscope(&["aggregate", "--model", m, "--memory-budget", "12parsecs"]);
    assert_eq!(out.status.code(), Some(2));
    let out = socscope(&["aggregate", "--model", m, "--mode", "spatiotemporal"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines().any(
            |l| l.starts_with("engine: exact algorithm, qualities stored,")
                && l.contains("of a 1024 MiB budget")
        ),
        "{text}"
    );
    // The scalable algorithm can be asked for, and says so; a bad name is a usage error.
    let out = socscope(&[
        "aggregate",
        "--model",
        m,
        "--mode",
        "spatiotemporal",
        "--algorithm",
        "scalable",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("engine: scalable algorithm, qualities recomputed,")),
        "{text}"
    );
    let out = socscope(&["aggregate", "--model", m, "--algorithm", "fastest"]);
    assert_eq!(out.status.code(), Some(2));
}

fn text(args: &[&str]) -> String {
    let out = socscope(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The value columns of `timeline`'s text rows (after its two header lines): the last two
/// cells, each a number and its unit.
fn timeline_rows(out: &str) -> Vec<(String, String, String)> {
    out.lines()
        .skip(2)
        .take_while(|l| l.starts_with("  "))
        .map(|l| {
            let cells: Vec<&str> = l
                .trim()
                .split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect();
            assert_eq!(cells.len(), 3, "{l:?}");
            (cells[0].into(), cells[1].into(), cells[2].into())
        })
        .collect()
}

#[test]
fn timeline_text_says_its_units_lists_its_groups_and_names_actors_as_stats_does() {
    let t = traces();
    // Activity: time in states, in time units (it printed `29.95 G`, a count of ns).
    let out = text(&[
        "timeline",
        s(&t.cpu),
        "--width",
        "100",
        "--statistic",
        "activity",
        "--group",
        "video=vdec,vsync-cb:max",
    ]);
    assert!(out.lines().next().unwrap().contains(" bins of "), "{out}");
    let header = out.lines().nth(1).unwrap();
    assert!(
        header.contains("time in states") && header.contains("most in a bin"),
        "{out}"
    );
    let rows = timeline_rows(&out);
    assert!(rows.len() > 5, "{out}");
    // The group's row comes first, with its operator and members.
    assert_eq!(rows[0].0, "video = max(vdec, vsync-cb)", "{out}");
    let is_time = |v: &str| {
        let (n, u) = v.split_once(' ').unwrap_or((v, ""));
        n.parse::<f64>().is_ok() && ["ns", "µs", "ms", "s"].contains(&u)
    };
    for (name, sum, max) in &rows {
        assert!(
            is_time(sum) && is_time(max),
            "{name}: {sum:?} {max:?} in\n{out}"
        );
    }
    // Density: events.
    let out = text(&["timeline", s(&t.cpu), "--width", "100"]);
    let rows = timeline_rows(&out);
    assert!(
        rows.iter()
            .all(|(_, a, b)| a.ends_with(" events") && b.ends_with(" events")),
        "{out}"
    );

    // Same-named producers: the two `cpu-burn` threads are `cpu-burn #ID` in `timeline` as in
    // `stats`, and keep that label when shown alone (a range or filter leaving one of them).
    let burns: Vec<String> = rows
        .iter()
        .map(|r| r.0.clone())
        .filter(|n| n.starts_with("cpu-burn"))
        .collect();
    assert_eq!(burns.len(), 2, "{out}");
    assert!(
        burns.iter().all(|b| b.starts_with("cpu-burn #")),
        "{burns:?}"
    );
    assert_ne!(burns[0], burns[1]);
    let stats = json(&[
        "stats",
        s(&t.cpu),
        "--operator",
        "count-per-producer",
        "--json",
    ]);
    let labels: Vec<&str> = stats["slices"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|x| x["label"].as_str())
        .collect();
    for b in &burns {
        assert!(labels.contains(&b.as_str()), "{b} in {labels:?}");
    }
    // The label selects that one producer, and it keeps its label alone in both commands.
    let one = &burns[1];
    let stats = json(&[
        "stats",
        s(&t.cpu),
        "--operator",
        "count-per-producer",
        "--producers",
        one,
        "--json",
    ]);
    assert_eq!(stats["slices"][0]["label"], one.as_str(), "{stats}");
    assert_eq!(stats["slices"].as_array().unwrap().len(), 1, "{stats}");
    let out = text(&["timeline", s(&t.cpu), "--width", "10", "--producers", one]);
    let rows = timeline_rows(&out);
    assert_eq!(rows.len(), 1, "{out}");
    assert_eq!(&rows[0].0, one, "{out}");
}

/// What a command writes to a real terminal (`script` gives it a pty), the shell line `line` run
/// there with `$SOCSCOPE` set to this build's program.
fn on_a_terminal(line: &str, dir: &Path) -> String {
    let out = Command::new("script")
        .args(["-qec", line, "/dev/null"])
        .env("SOCSCOPE", env!("CARGO_BIN_EXE_socscope"))
        .env("TERM", "xterm")
        .env("COLUMNS", "120")
        .current_dir(dir)
        .output()
        .expect("script (util-linux) runs");
    assert!(out.status.success(), "{line}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Progress shows on a terminal, and only there: not under `--json`, and not when standard output
/// goes to a file or a pipe even though standard error is a terminal.
#[test]
fn progress_is_drawn_on_a_terminal_only() {
    let t = traces();
    let dir = tempfile::tempdir().unwrap();
    let trace = s(&t.cpu);
    let aggregate = format!("\"$SOCSCOPE\" aggregate '{trace}' --slices 200 --metric duration");
    // On a terminal: the bar (its message names the p evaluated).
    let seen = on_a_terminal(&aggregate, dir.path());
    assert!(
        seen.contains("p evaluated") || seen.contains("aggregating"),
        "{seen}"
    );
    // Under --json, or with stdout in a file: nothing but the command's own output.
    for line in [
        format!("{aggregate} --json > out.json"),
        format!("{aggregate} > out.txt"),
        format!("{aggregate} | cat > out2.txt"),
    ] {
        let seen = on_a_terminal(&line, dir.path());
        assert!(seen.trim().is_empty(), "{line}: {seen:?}");
    }
    // The same for export (it drew nothing before) and import (it drew whenever stderr was a
    // terminal).
    let export =
        format!("\"$SOCSCOPE\" export '{trace}' --range 4..5 --format csv -o x.csv > /dev/null");
    assert!(on_a_terminal(&export, dir.path()).trim().is_empty());
    let paje = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/traces/paje/pajeng-simgrid-fg126.trace");
    let import = format!(
        "\"$SOCSCOPE\" import '{}' -o imported.db > /dev/null",
        paje.display()
    );
    assert!(on_a_terminal(&import, dir.path()).trim().is_empty());
    let piped = socscope(&[
        "export",
        trace,
        "--range",
        "4..5",
        "--format",
        "csv",
        "-o",
        s(&dir.path().join("y.csv")),
    ]);
    assert!(piped.status.success());
    assert!(piped.stderr.is_empty(), "{piped:?}");
}

/// `gantt --png`: the CPU section first. Over the CPU stress (4 s to 6 s) cpu0's row is a thread's
/// colour nearly everywhere; over the quiet capture the idle task's dimmed grey shows.
#[test]
fn the_gantt_png_draws_a_cpu_section_of_the_threads_that_ran() {
    let t = traces();
    let dir = tempfile::tempdir().unwrap();
    // Layout of `render::gantt` at 1400 px: plot from x = 230, 960 px wide; the CPU section's
    // heading from y = 40, its first row (cpu0) from y = 60, 16 px high, bars from its bottom (y = 74).
    let (left, plot_w, cpu0_bottom) = (230usize, 960usize, 73usize);
    const WHITE: [u8; 3] = [255, 255, 255];
    const IDLE: [u8; 3] = [222, 222, 222];
    let cpu0_row = |trace: &Path, range: &str, name: &str| {
        let png = dir.path().join(name);
        let out = text(&[
            "gantt",
            s(trace),
            "--range",
            range,
            "--width",
            "1400",
            "--png",
            s(&png),
        ]);
        assert!(out.contains("in the CPU section"), "{out}");
        let cpu_rows: usize = out
            .split(" in the CPU section")
            .next()
            .and_then(|h| h.rsplit('(').next())
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0);
        assert!(cpu_rows >= 2, "{out}");
        let (w, px) = decode_png(&png);
        (left..left + plot_w)
            .map(|x| px[cpu0_bottom * w + x])
            .collect::<Vec<_>>()
    };
    let busy = cpu0_row(&t.cpu, "4.1..5.9", "stress.png");
    let ran = busy.iter().filter(|c| **c != WHITE && **c != IDLE).count();
    assert!(
        ran * 10 >= plot_w * 9,
        "{ran} of {plot_w} columns show a thread"
    );
    // Zoomed in to 50 ms of the quiet capture, the idle task's stretches are wider than a pixel.
    let zoomed = cpu0_row(&t.reference, "1..1.05", "zoomed.png");
    let idle = zoomed.iter().filter(|c| **c == IDLE).count();
    assert!(
        idle * 4 > plot_w,
        "the idle task is drawn dimmed: {idle} columns"
    );
    let quiet = cpu0_row(&t.reference, "0..10", "quiet.png");
    // Not one colour: the quiet capture's cpu0 ran threads of several processes.
    let colours: std::collections::BTreeSet<[u8; 3]> = quiet
        .iter()
        .copied()
        .filter(|c| *c != WHITE && *c != IDLE)
        .collect();
    assert!(colours.len() >= 2, "{colours:?}");
}

/// `aggregate --mode spatiotemporal --png`: the producer hierarchy stands left of the map, as in
/// Ocelotl — a box per process over its threads' rows, whose left edges make one line from the
/// first row to the last, and a column of thread boxes right of it.
#[test]
fn the_spatiotemporal_png_draws_the_producer_hierarchy() {
    let t = traces();
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("st.png");
    let v = json(&[
        "aggregate",
        s(&t.reference),
        "--mode",
        "spatiotemporal",
        "--slices",
        "20",
        "--json",
        "--png",
        s(&png),
    ]);
    // Processes with threads under them: a hierarchy of two levels below `all`.
    let nodes = v["nodes"].as_array().unwrap();
    assert!(nodes.len() > 4, "{nodes:?}");
    let (w, px) = decode_png(&png);
    let h = px.len() / w;
    let line = [150u8, 150, 150];
    let column = |x: usize| (0..h).filter(|&y| px[y * w + x] == line).count();
    // The top-level boxes' left edges at x = 14 run down every producer's row: at least the
    // height the picture gives its rows (the height minus the 160 px of caption and axis).
    let first = column(14);
    assert!(
        first >= h - 160,
        "{first} px of hierarchy line at x = 14 of {h}"
    );
    // A second level: thread boxes start right of the processes' column (its left edge lies
    // somewhere in 40..120 px and runs down part of the rows).
    let second = (40..120).map(column).max().unwrap();
    assert!(second >= 30, "no second hierarchy column ({second} px)");
}
