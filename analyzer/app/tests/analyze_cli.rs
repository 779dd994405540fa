//! The analysis commands end to end: real sim captures (`socscope demo --headless`), JSON
//! shapes, PNG files, bad arguments, and `compare` finding exactly the stress windows.

mod common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::socscope;
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
        text.lines()
            .any(|l| l.starts_with("engine: qualities stored,")
                && l.contains("of a 1024 MiB budget")),
        "{text}"
    );
}
