//! What several test files of the app need: the program run with arguments, a small real trace made by
//! the program itself, and (in [`gui`]) the GUI under a kittest harness.

// Each test binary compiles this module and uses only some of its helpers.
#![allow(dead_code)]

pub mod collect;
#[cfg(feature = "gui")]
pub mod gui;

use std::path::PathBuf;
use std::process::{Command, Output};

/// `socscope ARGS`, run to its end (without `RUST_BACKTRACE`, so that a failure's stderr is what a user
/// sees).
pub fn socscope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_socscope"))
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("socscope runs")
}

/// A `seconds`-long capture of the simulated board with `seed`, made by `socscope demo --headless`; the
/// directory lives as long as the returned guard.
pub fn demo_trace(seed: u64, seconds: u32) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_socscope"))
        .args(["demo", "--headless", "--json", "--duration"])
        .arg(seconds.to_string())
        .arg("--seed")
        .arg(seed.to_string())
        .arg("--dir")
        .arg(dir.path())
        .output()
        .expect("socscope runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let file = PathBuf::from(doc["file"].as_str().expect("the demo names its trace file"));
    (dir, file)
}

/// Width and RGB pixels of a PNG the program wrote.
pub fn decode_png(path: &std::path::Path) -> (usize, Vec<[u8; 3]>) {
    let mut r = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()))
        .read_info()
        .unwrap();
    let mut buf = vec![0; r.output_buffer_size().unwrap()];
    let info = r.next_frame(&mut buf).unwrap();
    let n = info.color_type.samples();
    let px = buf[..info.buffer_size()]
        .chunks(n)
        .map(|c| [c[0], c[1], c[2]])
        .collect();
    (info.width as usize, px)
}
