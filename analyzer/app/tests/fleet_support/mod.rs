//! What the fleet tests share: a rig of simulated boards captured into a catalog directory, and the
//! `socscope` program.
#![allow(dead_code)]

use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use socscope_sim::transport::WriterTransport;
use socscope_sim::{Scenario, SimConfig};

/// Runs `socscope` with `args`.
pub fn socscope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_socscope"))
        .args(args)
        .output()
        .expect("socscope runs")
}

/// Its standard output, after checking it succeeded.
pub fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "status {}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// One simulated board of a rig.
#[derive(Debug, Clone)]
pub struct Board {
    pub name: String,
    pub seed: u64,
    pub cpu_stress: bool,
    pub io_stress: bool,
}

/// `n` boards `sim-stb-0`... with seeds 1..=n; every third under CPU stress, every fourth under I/O stress.
pub fn boards(n: usize) -> Vec<Board> {
    (0..n)
        .map(|i| Board {
            name: format!("sim-stb-{i:02}"),
            seed: i as u64 + 1,
            cpu_stress: i % 3 == 2,
            io_stress: i % 4 == 3,
        })
        .collect()
}

/// Captures each board for `seconds` of simulated time (as `.wire` files replayed by `socscope collect`)
/// into the catalog directory `dir`.
pub fn capture(boards: &[Board], seconds: f64, dir: &Path) {
    let wires = dir.with_extension("wires");
    std::fs::create_dir_all(&wires).unwrap();
    let mut args: Vec<String> = vec!["collect".into(), "--no-listen".into()];
    for b in boards {
        let wire = wires.join(format!("{}.wire", b.name));
        let stress = |on: bool| {
            if on {
                vec![Scenario {
                    at: seconds * 0.3,
                    duration: seconds * 0.4,
                }]
            } else {
                Vec::new()
            }
        };
        let config = SimConfig {
            seed: b.seed,
            duration_s: seconds,
            board: Box::leak(b.name.clone().into_boxed_str()),
            cpu_stress: stress(b.cpu_stress),
            io_stress: stress(b.io_stress),
            zap_every_s: Some(seconds / 3.0),
            ..SimConfig::default()
        };
        let file = std::fs::File::create(&wire).unwrap();
        let mut t = WriterTransport::new(BufWriter::new(file));
        socscope_sim::run(&config, &mut t).unwrap();
        t.finish().unwrap();
        args.push("--replay".into());
        args.push(wire.display().to_string());
    }
    args.push("--dir".into());
    args.push(dir.display().to_string());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(socscope(&args));
    std::fs::remove_dir_all(&wires).unwrap();
}

/// The trace files of a catalog directory.
pub fn traces(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "db") && !p.ends_with("catalog.db"))
        .collect();
    v.sort();
    v
}
