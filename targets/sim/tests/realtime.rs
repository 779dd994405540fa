//! In real time the board cannot wait for its link: a slow link makes the rings fill, and every dropped
//! record is counted and reported in `Loss` frames.

mod support;

use std::time::Instant;

use socscope_agent::{Transport, TransportError};
use socscope_sim::{SimConfig, run};

/// A link that takes `bytes_per_s` of wall time, refusing frames beyond that.
struct SlowLink {
    started: Instant,
    bytes_per_s: f64,
    sent: Vec<u8>,
}

impl Transport for SlowLink {
    fn write_frame(&mut self, frame: &[u8]) -> Result<(), TransportError> {
        let allowed = 8192.0 + self.started.elapsed().as_secs_f64() * self.bytes_per_s;
        if (self.sent.len() + frame.len()) as f64 > allowed {
            return Err(TransportError::WouldBlock);
        }
        self.sent.extend_from_slice(frame);
        Ok(())
    }
}

#[test]
fn a_slow_link_in_real_time_drops_and_counts_exactly() {
    let config = SimConfig {
        duration_s: 0.5,
        rate: 1_000_000.0,
        realtime: true,
        ..SimConfig::default()
    };
    let mut link = SlowLink {
        started: Instant::now(),
        bytes_per_s: 400_000.0,
        sent: Vec::new(),
    };
    let started = Instant::now();
    let summary = run(&config, &mut link).unwrap();
    assert!(
        started.elapsed().as_secs_f64() >= 0.5,
        "paced to the wall clock"
    );
    assert!(summary.dropped > 0, "{summary:?}");
    assert_eq!(summary.bytes, link.sent.len() as u64);

    let cap = support::decode(&link.sent);
    assert_eq!(cap.records.len() as u64, summary.events);
    assert_eq!(cap.lost, summary.dropped);
    assert_eq!(cap.bye_dropped, Some(summary.dropped));
    // Per CPU, kept and lost records account for every sequence number.
    for cpu in 0..2u16 {
        let kept = cap.records.iter().filter(|r| r.cpu == cpu).count() as u64;
        let last = cap
            .records
            .iter()
            .filter(|r| r.cpu == cpu)
            .map(|r| r.seq)
            .max()
            .unwrap();
        let lost = cap.lost_per_cpu.get(&cpu).copied().unwrap_or(0);
        assert!(
            kept + lost > last,
            "cpu {cpu}: {kept} kept + {lost} lost < {}",
            last + 1
        );
    }
}

#[test]
fn off_real_time_a_slow_link_slows_the_simulation_instead() {
    let config = SimConfig {
        duration_s: 0.2,
        ..SimConfig::default()
    };
    let mut link = SlowLink {
        started: Instant::now(),
        bytes_per_s: 100_000.0,
        sent: Vec::new(),
    };
    let summary = run(&config, &mut link).unwrap();
    assert_eq!(summary.dropped, 0);
    assert_eq!(
        support::decode(&link.sent).records.len() as u64,
        summary.events
    );
}

#[test]
fn a_real_time_run_reports_its_progress_while_it_streams() {
    let config = SimConfig {
        duration_s: 0.6,
        realtime: true,
        ..SimConfig::default()
    };
    let mut reports = Vec::new();
    let mut out = socscope_sim::transport::WriterTransport::new(Vec::new());
    let summary = socscope_sim::run_with_progress(
        &config,
        &mut out,
        std::time::Duration::from_millis(100),
        &mut |p| reports.push(*p),
    )
    .unwrap();
    assert!(reports.len() >= 3, "{reports:?}");
    assert!(
        reports
            .windows(2)
            .all(|w| w[0].events <= w[1].events && w[0].simulated_s < w[1].simulated_s),
        "{reports:?}"
    );
    let last = reports.last().unwrap();
    assert!(last.events > 0 && last.events <= summary.events, "{last:?}");
    assert!(
        last.simulated_s <= 0.6 && last.duration_s == 0.6,
        "{last:?}"
    );
    assert!(last.to_string().contains("events sent"), "{last}");
    // The progress does not change the stream: the same bytes as a run without it.
    let mut plain = socscope_sim::transport::WriterTransport::new(Vec::new());
    run(&config, &mut plain).unwrap();
    assert_eq!(out.into_inner(), plain.into_inner());
}

#[test]
fn json_output_stays_quiet_while_a_real_time_run_streams() {
    let dir = tempfile::tempdir().unwrap();
    let wire = dir.path().join("x.wire");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_socscope-sim"))
        .args(["--duration", "0.6", "--realtime", "--json", "--out"])
        .arg(&wire)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc["events"].as_u64().unwrap() > 0);
}

#[test]
fn a_real_time_run_on_a_terminal_shows_its_progress() {
    // `script` (util-linux, on every Debian) gives the program a terminal and copies what it shows.
    let dir = tempfile::tempdir().unwrap();
    let wire = dir.path().join("x.wire");
    let command = format!(
        "{} --duration 1.2 --realtime --out {}",
        env!("CARGO_BIN_EXE_socscope-sim"),
        wire.display()
    );
    let out = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .output()
        .expect("script (util-linux) runs");
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{shown}");
    assert!(
        shown.contains("/1.2 s simulated: ") && shown.contains("events sent"),
        "{shown}"
    );
    // The summary line comes last, on a clean line.
    assert!(
        shown.contains("\x1b[K") && shown.contains("bytes/event"),
        "{shown}"
    );
}
