//! The real `socscope-sim` program streams in real time and is killed (SIGKILL) mid-stream: the collector
//! closes the session as incomplete and keeps every batch that arrived whole. A recording proxy between the
//! board and the collector holds the exact bytes the collector received, so "what arrived" is known.

mod support;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use socscope_collector::Notice;
use socscope_tracedb::TraceReader;
use support::{Collector, decodable_records, ingest_stats, only_trace};

/// The `socscope-sim` program of this build. Cargo builds only the library of a dependency, so the test
/// builds the binary into the same target directory (a no-op when it is fresh).
fn sim_program() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    // target/<profile>/deps/<test> → target/<profile>
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test runs from a cargo target directory");
    let target_dir = profile_dir.parent().expect("a target directory");
    let mut build = Command::new(env!("CARGO"));
    build
        .args([
            "build",
            "--quiet",
            "-p",
            "socscope-sim",
            "--bin",
            "socscope-sim",
        ])
        .env("CARGO_TARGET_DIR", target_dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        build.arg("--release");
    }
    let status = build.status().expect("cargo runs");
    assert!(status.success(), "building socscope-sim failed: {status}");
    let program = profile_dir.join("socscope-sim");
    assert!(program.is_file(), "{program:?} was built");
    program
}

/// Accepts one connection, forwards it to `upstream` and returns every byte forwarded once the board's side
/// closes (the collector then sees the same end of stream).
fn recording_proxy(upstream: String) -> (String, std::thread::JoinHandle<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let handle = std::thread::spawn(move || {
        let (mut board, _) = listener.accept().unwrap();
        let mut collector = TcpStream::connect(upstream).unwrap();
        let mut seen = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match board.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    collector.write_all(&buf[..n]).unwrap();
                    seen.extend_from_slice(&buf[..n]);
                }
            }
        }
        collector.shutdown(Shutdown::Write).unwrap();
        seen
    });
    (address, handle)
}

#[test]
fn a_board_killed_mid_stream_leaves_an_incomplete_trace_with_every_whole_batch() {
    let program = sim_program();
    let mut collector = Collector::start();
    let (proxy, recorded) = recording_proxy(collector.address());
    let mut board = Command::new(program)
        .args([
            "--realtime",
            "--duration",
            "30",
            "--seed",
            "7",
            "--board",
            "doomed",
            "--connect",
            &format!("tcp://{proxy}"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("socscope-sim starts");
    std::thread::sleep(Duration::from_millis(1500));
    board.kill().expect("SIGKILL");
    let status = board.wait().unwrap();
    assert_eq!(status.signal(), Some(9), "killed, not exited: {status}");

    let bytes = recorded.join().expect("the proxy");
    let reports = collector.wait_sessions(1);
    let r = &reports[0];
    assert_eq!(r.board, "doomed");
    assert!(!r.complete, "no Bye: incomplete");

    // Everything that arrived whole is stored; a frame cut by the kill is counted as truncated.
    let whole = decodable_records(&bytes);
    assert!(
        whole > 10_000,
        "about 1.5 s at 20 k records/s arrived: {whole}"
    );
    let tail = bytes.len() - bytes.iter().rposition(|&b| b == 0).map_or(0, |i| i + 1);
    let reader = TraceReader::open(&r.path).unwrap();
    let stats = ingest_stats(&reader);
    assert_eq!(stats["records"] as u64, whole);
    assert_eq!(r.records, whole);
    assert_eq!(stats["bytes"] as usize, bytes.len());
    assert_eq!(stats["records_lost_in_transit"], 0);
    assert_eq!(stats["records_lost_on_board"], 0, "loopback keeps up");
    let cut = i64::from(tail > 0);
    assert_eq!(stats["frames_dropped"], cut);
    assert_eq!(
        stats.get("frames_dropped.truncated").copied().unwrap_or(0),
        cut
    );
    assert_eq!(stats["bytes_dropped"] as usize, tail);
    assert!(!stats.contains_key("board_records") || stats["board_records"] as u64 <= whole);

    let info = reader.info().unwrap();
    assert!(!info.complete && info.finished, "closed, incomplete");
    assert_eq!(info.event_count, r.events);
    assert!(info.event_count > 5_000);
    assert!(
        info.duration() > 500_000_000 && info.duration() < 5_000_000_000,
        "board time covers the run: {} ns",
        info.duration()
    );
    assert_eq!(only_trace(collector.dir()), r.path);

    let notices = collector.stop();
    let warnings: Vec<&String> = notices
        .iter()
        .filter_map(|n| match n {
            Notice::FrameDropped { message, .. } => Some(message),
            _ => None,
        })
        .collect();
    if tail > 0 {
        assert_eq!(
            warnings,
            [&format!(
                "dropped {tail} bytes at stream offset {}: the stream ended in the middle of a frame (doomed)",
                bytes.len() - tail
            )]
        );
    } else {
        assert!(warnings.is_empty(), "{warnings:?}");
    }
}
