//! The CLI's pictures on a real capture (a stressed run, where two producers are called `cpu-burn` and
//! the trace has both `running` and `thread_exit`): producers of one name told apart, every type of a
//! chart in its own colour.

mod common;

use std::process::Command;

use serde_json::Value;

fn socscope(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_socscope"))
        .args(args)
        .output()
        .expect("socscope runs");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn charts_tell_producers_and_types_apart() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let v = socscope(&[
        "demo",
        "--headless",
        "--json",
        "--duration",
        "3",
        "--seed",
        "3",
        "--cpu-stress",
        "1:1",
        "--dir",
        d,
    ]);
    let trace = v["file"].as_str().unwrap().to_owned();
    // Statistics per producer: the two `cpu-burn` threads are two labels, with their ids.
    let png = dir.path().join("stats.png");
    let s = socscope(&[
        "stats",
        &trace,
        "--operator",
        "count-per-producer",
        "--json",
        "--png",
        png.to_str().unwrap(),
    ]);
    let burn: Vec<&str> = s["slices"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|x| x["label"].as_str())
        .filter(|l| l.starts_with("cpu-burn"))
        .collect();
    assert_eq!(burn.len(), 2, "{burn:?}");
    assert_ne!(burn[0], burn[1]);
    assert!(burn.iter().all(|l| l.starts_with("cpu-burn #")), "{burn:?}");
    // Density: the legend (boxes from (840, 50), one every 18 px) has one colour per type.
    let png = dir.path().join("density.png");
    let d = socscope(&["density", &trace, "--json", "--png", png.to_str().unwrap()]);
    let types: Vec<&str> = d["types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(types.contains(&"running") && types.contains(&"thread_exit"));
    let (w, px) = common::decode_png(&png);
    let boxes: Vec<[u8; 3]> = (0..types.len())
        .map(|i| px[(56 + 18 * i) * w + 846])
        .collect();
    let distinct: std::collections::BTreeSet<[u8; 3]> = boxes.iter().copied().collect();
    assert_eq!(distinct.len(), types.len(), "{types:?}: {boxes:?}");
}
