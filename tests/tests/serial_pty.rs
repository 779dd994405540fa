//! Serial capture through a real pty pair: the sim writes to the slave end through its serial transport,
//! the collector's `serial::capture` reads the master end.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serialport::SerialPort;
use socscope_collector::serial::{self, SerialSpec};
use socscope_collector::{IngestConfig, Notice};
use socscope_sim::SimConfig;
use socscope_sim::transport::WriterTransport;
use support::{SESSION_TIMEOUT, assert_exact_counts, only_trace};

#[test]
fn a_board_on_a_pty_is_captured_exactly() {
    let (master, slave) = serialport::TTYPort::pair().expect("a pty pair");
    let slave_path = slave.name().expect("the slave has a path");
    let dir = tempfile::tempdir().unwrap();
    let spec = SerialSpec {
        path: "pty-master".into(),
        baud: 921_600,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let (notice_tx, notices) = std::sync::mpsc::channel::<Notice>();
    let collector = {
        let (config, stop) = (IngestConfig::new(dir.path()), Arc::clone(&stop));
        std::thread::spawn(move || {
            serial::capture(Box::new(master), &spec, config, stop, |n| {
                let _ = notice_tx.send(n);
            })
        })
    };

    let config = SimConfig {
        seed: 5,
        duration_s: 1.5,
        board: "uart-stb",
        ..SimConfig::default()
    };
    let port = socscope_sim::transport::serial(&slave_path, 921_600).expect("the slave opens");
    let mut link = WriterTransport::new(port);
    let summary = socscope_sim::run(&config, &mut link).expect("the simulation runs");
    link.finish().expect("the port flushes");

    // The board said Bye: the session ends while the port is still open.
    let deadline = Instant::now() + SESSION_TIMEOUT;
    let mut seen = Vec::new();
    let report = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match notices.recv_timeout(left.max(Duration::from_millis(1))) {
            Ok(Notice::SessionEnded(r)) => break r,
            Ok(other) => seen.push(other),
            Err(e) => panic!("no session ended ({e}); notices: {seen:#?}"),
        }
    };
    stop.store(true, Ordering::Relaxed);
    let reports = collector
        .join()
        .expect("the capture thread")
        .expect("the capture ends cleanly");
    drop(slave);

    assert_eq!(reports, vec![report.clone()]);
    assert!(
        matches!(&seen[..], [Notice::SessionStarted { board, .. }] if board == "uart-stb"),
        "only the start was announced: {seen:#?}"
    );
    assert!(report.complete);
    assert_eq!(report.source, "serial pty-master");
    assert_eq!(report.records, summary.events);
    assert_eq!(only_trace(dir.path()), report.path);
    assert_exact_counts(&report.path, &summary);
}
