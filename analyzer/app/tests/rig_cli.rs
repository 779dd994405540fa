//! `socscope rig run` end to end: the example scenario (the simulator over TCP, I/O stress in two of its
//! four runs) gives pass for the quiet runs and fail for the stressed ones, as JSON and JUnit XML with the
//! failing runs' traces kept; a board that never connects is an error; a scenario with an unknown key is
//! refused with its line.

use std::path::{Path, PathBuf};
use std::process::Command;

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
