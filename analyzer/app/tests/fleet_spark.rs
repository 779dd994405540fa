//! The same dataset on a distributed engine: `scripts/fleet/spark_report.py` run for real in Spark local
//! mode (`local[2]`) on a dataset synced from 12 simulated boards (several seeds, some under CPU or I/O
//! stress) must give `socscope fleet report`'s numbers, number for number. Needs Java and the virtual
//! environment with pyspark that `scripts/install-test-deps.sh` creates (`target/python-venv`, or the
//! Python named by `SOCSCOPE_PYSPARK_PYTHON`): it fails, never skips, without them.
#![cfg(feature = "fleet")]

mod fleet_support;

use std::path::PathBuf;
use std::process::Command;

use fleet_support::{boards, capture, ok, s, socscope, traces};
use serde_json::Value;

fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("SOCSCOPE_PYSPARK_PYTHON") {
        return PathBuf::from(p);
    }
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/python-venv/bin/python");
    assert!(
        p.exists(),
        "{} is missing: run scripts/install-test-deps.sh (it creates the virtual environment with pyspark)",
        p.display()
    );
    p
}

/// Equal JSON, floats within 1e-9 relative (Spark and the engine sum in other orders; the integers are
/// exact).
fn same(a: &Value, b: &Value, path: &str) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let kx: Vec<&String> = x.keys().collect();
            let ky: Vec<&String> = y.keys().collect();
            assert_eq!(kx, ky, "keys at {path}");
            for k in x.keys() {
                same(&x[k], &y[k], &format!("{path}.{k}"));
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            assert_eq!(x.len(), y.len(), "length at {path}");
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                same(u, v, &format!("{path}[{i}]"));
            }
        }
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            let (u, v) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            assert!(
                (u - v).abs() <= 1e-9 * u.abs().max(v.abs()).max(1e-300),
                "{path}: {u} vs {v}"
            );
        }
        _ => assert_eq!(a, b, "at {path}"),
    }
}

#[test]
fn spark_computes_the_same_report() {
    let py = python();
    let tmp = tempfile::tempdir().unwrap();
    let rig = tmp.path().join("rig");
    capture(&boards(12), 3.0, &rig);
    let out = tmp.path().join("fleet");
    ok(socscope(&["fleet", "sync", s(&rig), "--out", s(&out)]));
    let reference = traces(&rig)[0]
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let ours: Value = serde_json::from_str(&ok(socscope(&[
        "fleet",
        "report",
        s(&out),
        "--reference",
        &reference,
        "--json",
    ])))
    .unwrap();
    let theirs_file = tmp.path().join("spark.json");
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/fleet/spark_report.py");
    let o = Command::new(&py)
        .arg(&script)
        .arg(&out)
        .args(["--reference", &reference, "--master", "local[2]", "--json"])
        .arg(&theirs_file)
        .output()
        .expect("python runs");
    assert!(
        o.status.success(),
        "spark_report.py failed ({}): {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    let theirs: Value =
        serde_json::from_str(&std::fs::read_to_string(&theirs_file).unwrap()).unwrap();
    assert_eq!(ours["nights"].as_array().unwrap().len(), 12);
    assert_eq!(ours["departures"]["runs"].as_array().unwrap().len(), 11);
    assert!(
        ours["departures"]["runs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["departures"].as_u64() > Some(0)),
        "some stressed run departs: {ours}"
    );
    same(&ours, &theirs, "report");
}
