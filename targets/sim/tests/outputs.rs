//! The sim's outputs besides files: TCP (plain and zstd) to a listener, serial through a pty pair; and its
//! answer to bad input: one line on standard error and a failing exit code.

mod support;

use std::io::Read;
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use support::{assert_success, decode, sim};

fn over_tcp(extra: &[&str]) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let reader = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut bytes = Vec::new();
        stream.read_to_end(&mut bytes).unwrap();
        bytes
    });
    let out = sim()
        .args([
            "--duration",
            "2",
            "--json",
            "--connect",
            &format!("tcp://127.0.0.1:{port}"),
        ])
        .args(extra)
        .output()
        .unwrap();
    assert_success(&out);
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let bytes = reader.join().unwrap();
    assert_eq!(bytes.len() as u64, summary["bytes"].as_u64().unwrap());
    let cap = decode(&bytes);
    assert_eq!(
        cap.records.len() as u64,
        summary["events"].as_u64().unwrap()
    );
    assert!(cap.records.len() > 30_000);
    assert_eq!(cap.lost, 0);
}

#[test]
fn streams_over_tcp() {
    over_tcp(&[]);
}

#[test]
fn streams_over_tcp_with_zstd_and_is_smaller() {
    over_tcp(&["--zstd"]);
    let dir = tempfile::tempdir().unwrap();
    let (plain, _) = support::run_to_file(dir.path(), "p.wire", &["--duration", "2"]);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let reader = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut bytes = Vec::new();
        stream.read_to_end(&mut bytes).unwrap();
        bytes.len()
    });
    let out = sim()
        .args([
            "--duration",
            "2",
            "--json",
            "--zstd",
            "--connect",
            &format!("tcp://127.0.0.1:{port}"),
        ])
        .output()
        .unwrap();
    assert_success(&out);
    let compressed = reader.join().unwrap() as u64;
    assert!(
        compressed < plain["bytes"].as_u64().unwrap(),
        "{compressed} vs {}",
        plain["bytes"]
    );
}

#[test]
fn streams_over_a_serial_pty() {
    use serialport::SerialPort;
    let (mut master, slave) = serialport::TTYPort::pair().expect("a pty pair");
    let path = slave.name().expect("the pty has a path");
    master.set_timeout(Duration::from_millis(200)).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let mut buf = [0u8; 8192];
            loop {
                match master.read(&mut buf) {
                    Ok(n) => bytes.extend_from_slice(&buf[..n]),
                    Err(_) if !done.load(Ordering::SeqCst) => {}
                    Err(_) => break,
                }
            }
            bytes
        })
    };
    let out = sim()
        .args([
            "--duration",
            "0.5",
            "--json",
            "--serial",
            &format!("{path}:921600"),
        ])
        .output()
        .unwrap();
    done.store(true, Ordering::SeqCst);
    assert_success(&out);
    let bytes = reader.join().unwrap();
    drop(slave);
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(bytes.len() as u64, summary["bytes"].as_u64().unwrap());
    let cap = decode(&bytes);
    assert_eq!(
        cap.records.len() as u64,
        summary["events"].as_u64().unwrap()
    );
    assert!(cap.bye_records.is_some(), "the session ended with Bye");
}

fn fails_with_one_line(args: &[&str], expected: &str) {
    let out = sim().args(args).output().unwrap();
    assert!(!out.status.success(), "{args:?} succeeded");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr:?}");
    assert!(stderr.starts_with("socscope-sim: "), "{stderr:?}");
    assert!(
        stderr.contains(expected),
        "{args:?}: {stderr:?} lacks {expected:?}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn bad_input_gives_one_line_and_a_failing_exit() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.wire");
    let out = out.to_str().unwrap();
    fails_with_one_line(&["--frobnicate", "--out", out], "--frobnicate");
    fails_with_one_line(&["--duration", "1"], "--connect");
    fails_with_one_line(
        &["--connect", "tcp://127.0.0.1:1"],
        "cannot connect to tcp://127.0.0.1:1",
    );
    fails_with_one_line(&["--connect", "127.0.0.1:7000"], "tcp://HOST:PORT");
    fails_with_one_line(
        &["--serial", "/nonexistent/tty"],
        "cannot open serial port /nonexistent/tty",
    );
    fails_with_one_line(
        &["--out", "/nonexistent/dir/x.wire"],
        "cannot create /nonexistent/dir/x.wire",
    );
    fails_with_one_line(&["--cpu-stress", "soon", "--out", out], "AT:DURATION");
    fails_with_one_line(&["--duration", "-1", "--out", out], "duration");
    fails_with_one_line(&["--cpus", "9", "--out", out], "cpus");
    fails_with_one_line(&["--zstd", "--out", out], "--zstd");
}

#[test]
fn help_shows_examples() {
    let out = sim().arg("--help").output().unwrap();
    assert_success(&out);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Examples:") && text.contains("--zap-every"));
}

#[test]
fn realtime_paces_to_the_wall_clock() {
    let dir = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let (summary, bytes) =
        support::run_to_file(dir.path(), "rt.wire", &["--duration", "0.4", "--realtime"]);
    assert!(started.elapsed().as_secs_f64() >= 0.4);
    assert_eq!(summary["dropped"].as_u64(), Some(0));
    assert_eq!(
        decode(&bytes).records.len() as u64,
        summary["events"].as_u64().unwrap()
    );
}

/// Issue 27, row 6: a collector that refuses the session says why before closing the link; the sim
/// stops, prints its summary with the refusal and what was sent, and exits with status 1 saying why.
#[test]
fn a_refusal_from_the_collector_ends_the_run_with_an_error_and_a_summary() {
    use std::io::Write;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let collector = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut first = [0u8; 256];
        let _ = stream.read(&mut first).unwrap();
        let mut frame = [0u8; 128];
        let n = socscope_wire::refusal::encode_refusal(
            &mut frame,
            &socscope_wire::refusal::Refusal {
                reason: socscope_wire::refusal::RefusalReason::Store,
                message: "the disk is full",
            },
        )
        .unwrap();
        stream.write_all(&frame[..n]).unwrap();
        stream.shutdown(std::net::Shutdown::Write).unwrap();
        // Read (and drop) what the board still sends, as the collector does, until it goes.
        let mut rest = Vec::new();
        let _ = stream.read_to_end(&mut rest);
    });
    let out = sim()
        .args([
            "--duration",
            "600",
            "--realtime",
            "--json",
            "--connect",
            &format!("tcp://127.0.0.1:{port}"),
        ])
        .output()
        .unwrap();
    collector.join().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("refused the session (store): the disk is full"),
        "{stderr}"
    );
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["link"]["refused"]["reason"], "store");
    assert_eq!(summary["link"]["refused"]["message"], "the disk is full");
    assert!(summary["events"].as_u64().is_some());
}

/// The collector going away mid-run is an error too (status 1), and the summary still says what was
/// sent and how much of it was never acknowledged.
#[test]
fn a_collector_that_goes_away_mid_run_is_an_error_with_a_summary() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let collector = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut some = [0u8; 4096];
        let _ = stream.read(&mut some).unwrap();
        drop(stream);
    });
    let out = sim()
        .args([
            "--duration",
            "600",
            "--json",
            "--connect",
            &format!("tcp://127.0.0.1:{port}"),
        ])
        .output()
        .unwrap();
    collector.join().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert!(summary["error"].as_str().is_some(), "{summary}");
    assert!(summary["link"]["bytes_sent"].as_u64().unwrap() > 0);
    assert!(summary["link"]["closed_by_collector"].as_bool().unwrap());
}
