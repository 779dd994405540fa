//! How fast the simulated board writes a capture file, and how compact its stream is.
//!
//! `cargo bench -p socscope-sim` prints events per second of wall time writing to a file in a temporary
//! directory (default workload, and the benchmark rate of 5 M events per simulated second) and the bytes per
//! event of the default workload.

use std::time::Instant;

use socscope_sim::{Scenario, SimConfig, run, transport};

fn measure(name: &str, config: &SimConfig) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("bench.wire");
    let mut best = f64::MAX;
    let mut summary = None;
    for _ in 0..3 {
        let mut out = transport::file(&path).expect("the capture file");
        let started = Instant::now();
        let s = run(config, &mut out).expect("the simulation runs");
        out.finish().expect("the capture is written");
        best = best.min(started.elapsed().as_secs_f64());
        summary = Some(s);
    }
    let s = summary.expect("at least one run");
    let size = std::fs::metadata(&path).expect("the capture").len();
    assert_eq!(size, s.bytes);
    println!(
        "{name:<34} {:>11} events {:>6.2} B/event {:>7.2} M events/s to a file ({:.3} s)",
        s.events,
        s.bytes_per_event,
        s.events as f64 / best / 1e6,
        best
    );
}

fn main() {
    measure("default workload, 10 s", &SimConfig::default());
    measure(
        "default + zap/cpu/io stress, 10 s",
        &SimConfig {
            zap_every_s: Some(2.0),
            cpu_stress: vec![Scenario {
                at: 3.0,
                duration: 2.0,
            }],
            io_stress: vec![Scenario {
                at: 6.0,
                duration: 2.0,
            }],
            ..SimConfig::default()
        },
    );
    measure(
        "--rate 5000000, 10 s",
        &SimConfig {
            rate: 5e6,
            ..SimConfig::default()
        },
    );
}
