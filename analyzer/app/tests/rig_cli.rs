//! `socscope rig run` end to end: the example scenario (the simulator over TCP, I/O stress in two of its
//! four runs) gives pass for the quiet runs and fail for the stressed ones, as JSON and JUnit XML with the
//! failing runs' traces kept (and no directory left for a passing run); a board that never connects is
//! an error; a scenario with an unknown key is refused with its line. Also the triggers from outside a
//! running `socscope collect` (`socscope trigger` over its control socket, with and without its token,
//! and SIGUSR1), and a `reference:` rule against a real reference trace.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

fn socscope() -> Command {
    Command::new(env!("CARGO_BIN_EXE_socscope"))
}

/// The simulator's binary beside `socscope` (the scenario names it without a path), built if this test
/// runs alone.
fn ensure_simulator() {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_socscope"));
    let sim = exe.with_file_name("socscope-sim");
    if !sim.is_file() {
        let status = Command::new(env!("CARGO"))
            .args(["build", "-p", "socscope-sim"])
            .status()
            .expect("cargo runs");
        assert!(status.success());
    }
    assert!(sim.is_file(), "{} was not built", sim.display());
}

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/rig/vsync-stress.toml")
}

#[test]
fn the_example_scenario_fails_exactly_its_stressed_runs() {
    ensure_simulator();
    let out = tempfile::tempdir().unwrap();
    let o = socscope()
        .args(["rig", "run"])
        .arg(example())
        .arg("--out")
        .arg(out.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(3),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.path().join("verdicts.json")).unwrap()).unwrap();
    assert_eq!(doc["runs"], 4);
    let verdicts = doc["verdicts"].as_array().unwrap();
    for v in verdicts {
        let run = v["run"].as_u64().unwrap();
        let traces = v["traces"].as_array().unwrap();
        if run % 2 == 0 {
            assert_eq!(v["verdict"], "fail", "{v}");
            let firings = v["firings"].as_array().unwrap();
            assert!(!firings.is_empty());
            for f in firings {
                assert_eq!(f["rule"], "gap:running@vsync-cb>25ms");
                // The stress runs from 1 s to 3 s of board time.
                let at = f["at_s"].as_f64().unwrap();
                assert!((0.9..3.2).contains(&at), "{f}");
            }
            // The failing run's full trace is kept, with its firings as annotations.
            assert_eq!(traces.len(), 1, "{v}");
            let trace = traces[0].as_str().unwrap();
            let results = socscope().args(["results", trace]).output().unwrap();
            let listed = String::from_utf8_lossy(&results.stdout);
            assert!(
                listed.contains(&format!("{} firing(s)", firings.len())),
                "{listed}"
            );
        } else {
            assert_eq!(v["verdict"], "pass", "{v}");
            assert!(traces.is_empty(), "passing runs keep no trace: {v}");
            assert_eq!(v["traces_deleted"], 1);
            // Nor a directory holding only an empty catalog.
            let run_dir = out.path().join(format!("run-{run:03}"));
            assert!(!run_dir.exists(), "{} is left", run_dir.display());
        }
    }
    let junit = std::fs::read_to_string(out.path().join("junit.xml")).unwrap();
    assert!(
        junit.contains("tests=\"4\" failures=\"2\" errors=\"0\""),
        "{junit}"
    );
    assert_eq!(junit.matches("<testcase ").count(), 4);
    assert_eq!(junit.matches("<failure ").count(), 2);
    assert!(
        stdout.contains("2 passed, 2 failed, 0 in error"),
        "{stdout}"
    );
}

#[test]
fn a_board_that_never_connects_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("silent.toml");
    std::fs::write(
        &scenario,
        "name = \"silent\"\ncommand = [\"sleep\", \"5\"]\nduration = \"10s\"\nconnect_timeout = \"500ms\"\ntriggers = [\"loss\"]\n",
    )
    .unwrap();
    let o = socscope()
        .args(["rig", "run"])
        .arg(&scenario)
        .arg("--out")
        .arg(dir.path().join("out"))
        .arg("--json")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["errors"], 1);
    let v = &doc["verdicts"][0];
    assert_eq!(v["verdict"], "error");
    assert!(
        v["reason"].as_str().unwrap().contains("never connected"),
        "{v}"
    );
    let junit = std::fs::read_to_string(dir.path().join("out/junit.xml")).unwrap();
    assert!(
        junit.contains("<error message=\"the board never connected"),
        "{junit}"
    );
}

#[test]
fn a_scenario_with_an_unknown_key_is_refused_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("typo.toml");
    std::fs::write(
        &scenario,
        "name = \"typo\"\ncommand = [\"true\"]\nduration = \"1s\"\n\n[[run]]\nruns = [1]\nextra_arg = [\"x\"]\n",
    )
    .unwrap();
    let o = socscope()
        .args(["rig", "run"])
        .arg(&scenario)
        .arg("--out")
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("typo.toml:7:1"), "{err}");
    assert!(err.contains("extra_arg"), "{err}");
    assert!(!dir.path().join("out").exists(), "nothing is created");
    // A bad trigger rule is refused with its position, before any run.
    std::fs::write(
        &scenario,
        "name = \"typo\"\ncommand = [\"true\"]\nduration = \"1s\"\ntriggers = [\"gap:running>soon\"]\n",
    )
    .unwrap();
    let o = socscope()
        .args(["rig", "run"])
        .arg(&scenario)
        .arg("--out")
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("at character 13"), "{err}");
}

/// The next JSON line of a running command's output (panics when it ends).
fn next_json(lines: &mut impl BufRead) -> serde_json::Value {
    loop {
        let mut line = String::new();
        let n = lines.read_line(&mut line).unwrap();
        assert!(n > 0, "the output ended");
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) {
            return v;
        }
    }
}

fn wait_for(
    lines: &mut impl BufRead,
    what: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    loop {
        let v = next_json(lines);
        if what(&v) {
            return v;
        }
    }
}

/// Kills a child however the test ends.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn simulator() -> Command {
    Command::new(PathBuf::from(env!("CARGO_BIN_EXE_socscope")).with_file_name("socscope-sim"))
}

#[test]
fn external_triggers_reach_a_running_collector_by_its_control_socket_with_its_token_and_by_sigusr1()
{
    ensure_simulator();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("traces");
    let token = tmp.path().join("token");
    std::fs::write(&token, "s3cret\n").unwrap();
    let mut collect = Reaped(
        socscope()
            .args([
                "collect",
                "--listen",
                "127.0.0.1:0",
                "--json",
                "--sessions",
                "1",
            ])
            .arg("--token-file")
            .arg(&token)
            .args(["--trigger", "loss", "--dir"])
            .arg(&dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut lines = BufReader::new(collect.0.stdout.take().unwrap());
    let control = wait_for(&mut lines, |v| v["event"] == "control");
    assert_eq!(
        Path::new(control["socket"].as_str().unwrap()),
        dir.join(".socscope-control")
    );
    let listening = wait_for(&mut lines, |v| v["event"] == "listening");
    let address = listening["address"].as_str().unwrap().to_string();
    let board = Reaped(
        simulator()
            .args(["--realtime", "--duration", "60", "--connect"])
            .arg(format!("tcp://{address}"))
            .arg("--token-file")
            .arg(&token)
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let started = wait_for(&mut lines, |v| v["event"] == "session_started");

    // Without the collector's token, or with a wrong one: refused, and said why.
    let o = socscope()
        .args(["trigger", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("this collector has a token"), "{err}");
    let o = socscope()
        .args(["trigger", "--token", "guess", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("wrong token"), "{err}");
    // With it: fired in the board's session.
    let o = socscope()
        .args([
            "trigger",
            "--json",
            "--reason",
            "picture froze",
            "--token-file",
        ])
        .arg(&token)
        .arg("--dir")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let sent: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(sent["external_triggers"], 1);
    let fired = wait_for(&mut lines, |v| v["event"] == "trigger_fired");
    assert_eq!(
        (fired["rule"].as_str(), fired["who"].as_str()),
        (Some("external"), Some("picture froze"))
    );
    assert_eq!(fired["file"], started["file"]);
    // SIGUSR1 does the same.
    let status = Command::new("kill")
        .args(["-USR1", &collect.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let fired = wait_for(&mut lines, |v| v["event"] == "trigger_fired");
    assert_eq!(
        (fired["rule"].as_str(), fired["who"].as_str()),
        (Some("external"), Some("SIGUSR1"))
    );
    assert!(fired["at_ns"].as_i64().unwrap() > 0);

    // The board goes away: its trace holds both firings as annotations.
    drop(board);
    let ended = wait_for(&mut lines, |v| v["event"] == "session_ended");
    let trace = ended["file"].as_str().unwrap().to_string();
    assert_eq!(collect.0.wait().unwrap().code(), Some(0));
    let o = socscope()
        .args(["results", &trace, "--json"])
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let id = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["tool"] == "socscope collect")
        .unwrap_or_else(|| panic!("{doc}"))["id"]
        .to_string();
    let o = socscope()
        .args(["results", &trace, "--json", "--show", &id])
        .output()
        .unwrap();
    let shown: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let bands = shown["data"]["bands"].as_array().unwrap();
    let who: Vec<&str> = bands.iter().map(|b| b["who"].as_str().unwrap()).collect();
    assert_eq!(who, ["picture froze", "SIGUSR1"], "{shown}");
}

/// `socscope collect --replay FILE --trigger reference:REF>SCORE --json`: the trigger_fired lines.
fn reference_firings(wire: &Path, reference: &str, dir: &Path) -> Vec<serde_json::Value> {
    let o = socscope()
        .args(["collect", "--no-listen", "--json", "--replay"])
        .arg(wire)
        .arg("--dir")
        .arg(dir)
        .arg("--trigger")
        .arg(format!("reference:{reference}>0.04"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["event"] == "trigger_fired")
        .collect()
}

#[test]
fn a_reference_rule_fires_on_a_stressed_run_and_not_on_a_quiet_one() {
    ensure_simulator();
    let tmp = tempfile::tempdir().unwrap();
    let sim = |name: &str, seed: &str, extra: &[&str]| {
        let path = tmp.path().join(name);
        let status = simulator()
            .args(["--duration", "10", "--seed", seed])
            .args(extra)
            .arg("--out")
            .arg(&path)
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
        path
    };
    // The reference: a quiet run of the board, captured.
    let reference_wire = sim("reference.wire", "1", &[]);
    let o = socscope()
        .args(["collect", "--no-listen", "--json", "--replay"])
        .arg(&reference_wire)
        .arg("--dir")
        .arg(tmp.path().join("reference"))
        .output()
        .unwrap();
    let reference = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["event"] == "session_ended")
        .expect("the reference is captured")["file"]
        .as_str()
        .unwrap()
        .to_string();
    // Another quiet run (another seed) does not depart; the same with a CPU hog from 4 s to 7 s does,
    // once, within the hog (plus the comparison's lag of 11 slices of 0.1 s).
    let quiet = reference_firings(
        &sim("quiet.wire", "2", &[]),
        &reference,
        &tmp.path().join("q"),
    );
    assert!(quiet.is_empty(), "{quiet:?}");
    let stressed = reference_firings(
        &sim("stressed.wire", "2", &["--cpu-stress", "4:3"]),
        &reference,
        &tmp.path().join("s"),
    );
    assert!(!stressed.is_empty());
    for f in &stressed {
        assert!(f["rule"].as_str().unwrap().starts_with("reference:"), "{f}");
        let at = f["at_ns"].as_f64().unwrap() / 1e9;
        assert!((4.0..8.2).contains(&at), "{f}");
        assert!(f["value"].as_f64().unwrap() >= 0.04, "{f}");
    }
}
