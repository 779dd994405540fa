//! The disk fills up under a capture (issue 10, row 8): the session that cannot write ends cleanly as
//! interrupted — its trace keeps what was committed, is closed and says why — the collector says so in
//! one clear message and goes on: once there is room again, the next board is stored completely.
//! Closing a trace writes too: the collector keeps a disk reserve (`.socscope-reserve-PID-N`, see
//! `socscope_collector::reserve`) that it frees when the disk is full, so that every open trace is
//! closed even on a disk filled to the last byte by someone else.
//!
//! The catalog directory is a small tmpfs (3 or 4 MiB) mounted for the test. Mounting needs root (CI containers run
//! as root); elsewhere the test says it is skipped and passes.

mod support;

use std::path::Path;
use std::process::Command;

use socscope_collector::Notice;
use socscope_sim::SimConfig;
use socscope_tracedb::{INTERRUPTED_PARAM, TraceReader};
use support::{Collector, assert_exact_counts, realtime_sim_over_tcp, sim_over_tcp};

/// A temporary directory with a tmpfs of `size` mounted on it, or `None` when this user cannot mount.
fn small_disk(size: &str) -> Option<tempfile::TempDir> {
    let dir = tempfile::tempdir().unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(dir.path())
        .status()
        .is_ok_and(|s| s.success());
    mounted.then_some(dir)
}

/// [`small_disk`] with its unmounting guard; `None` (the test is skipped, and says so) only outside CI:
/// CI runs the tests as root, where a tmpfs can always be mounted.
fn small_disk_or_skip(size: &str) -> Option<(tempfile::TempDir, Unmount)> {
    let Some(disk) = small_disk(size) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "cannot mount a tmpfs: CI runs this test as root, it must not be skipped there"
        );
        eprintln!("skipped: cannot mount a tmpfs here (needs root)");
        return None;
    };
    let guard = Unmount(disk.path().to_path_buf());
    Some((disk, guard))
}

fn unmount(dir: &Path) {
    let _ = Command::new("umount").arg(dir).status();
}

/// Unmounts the small disk however the test ends (a failed assertion included).
struct Unmount(std::path::PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        unmount(&self.0);
    }
}

#[test]
fn a_full_disk_ends_the_session_as_interrupted_and_the_collector_goes_on() {
    let Some((disk, _unmount)) = small_disk_or_skip("3m") else {
        return;
    };
    let mount = disk.path().to_path_buf();
    let mut config = socscope_collector::IngestConfig::new(&mount);
    // The default reserve (16 MiB) does not fit this disk.
    config.disk_reserve = socscope_collector::DiskReserve::new(&mount, 256 << 10);
    let mut collector = Collector::start_configured(
        disk,
        config,
        socscope_collector::tcp::ServeLimits::default(),
    );
    // About 800 k records: far more than 3 MiB of trace.
    let big = sim_over_tcp(
        SimConfig {
            seed: 8,
            duration_s: 40.0,
            board: "filler",
            ..SimConfig::default()
        },
        collector.address(),
    );
    let reports = collector.wait_sessions(1);
    let _ = big.join();
    let r = &reports[0];
    assert!(!r.complete);
    let why = r
        .interrupted
        .as_deref()
        .expect("interrupted, with a reason");
    assert!(
        why.contains("full"),
        "the message says the disk is full: {why}"
    );
    // However the disk filled up, the reserve leaves room to close the trace.
    assert!(why.contains("closed as interrupted"), "{why}");
    let info = TraceReader::open(&r.path).unwrap().info().unwrap();
    assert!(info.finished, "closed, not left live: {why}");
    assert!(!info.complete);
    assert!(info.event_count > 0, "what was committed is kept");
    assert_eq!(info.event_count, r.events);
    assert!(info.meta.params.iter().any(|(n, _)| n == INTERRUPTED_PARAM));

    // Room again (the operator deletes the trace, with the WAL that a full disk may have kept beside
    // it): the next board is stored completely by the same collector.
    for entry in std::fs::read_dir(&mount).unwrap().flatten() {
        eprintln!(
            "{:?} {} bytes",
            entry.file_name(),
            entry.metadata().unwrap().len()
        );
    }
    for suffix in ["", "-wal", "-shm"] {
        let mut p = r.path.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
    a_later_board_is_stored_completely(&mut collector, 9, 2);
    collector.stop();
}

/// A short board connecting now is stored completely; `sessions` sessions at least have ended by
/// then. (A board refused while the disk was full may still be draining: once there is room again,
/// what it still sends is stored in a session of its own, which may end before or after this one.)
fn a_later_board_is_stored_completely(collector: &mut Collector, seed: u64, sessions: usize) {
    let small = sim_over_tcp(
        SimConfig {
            seed,
            duration_s: 0.5,
            board: "after",
            ..SimConfig::default()
        },
        collector.address(),
    );
    let mut n = sessions;
    let after = loop {
        let reports = collector.wait_sessions(n);
        if let Some(r) = reports.iter().find(|r| r.board == "after") {
            break r.clone();
        }
        n = reports.len() + 1;
    };
    let summary = small.join().unwrap();
    assert!(after.complete, "{after:?}");
    assert_exact_counts(&after.path, &summary);
}

/// Writes a file on `dir`'s disk until the disk refuses one more byte; returns its size.
/// Takes every byte left on the disk, as another program would (appending to `path`). With
/// `until_released`, none of the room the collector's reserve frees: the collector may find the disk
/// full while the smaller writes below still run, and a hog that went on would take the very room the
/// collector closes its traces in (it did, about once in ten runs); it stops as soon as that file is gone.
fn fill_to_the_last_byte(path: &Path, until_released: Option<&Path>) -> u64 {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    let block = vec![0x5au8; 64 << 10];
    let mut written = 0u64;
    for step in [block.len(), 4096, 1] {
        loop {
            if until_released.is_some_and(|reserve| !reserve.exists()) {
                return written;
            }
            match file.write(&block[..step]) {
                Ok(0) => break,
                Ok(n) => written += n as u64,
                Err(e) => {
                    assert_eq!(e.raw_os_error(), Some(28), "ENOSPC, not {e}");
                    break;
                }
            }
        }
    }
    written
}

#[test]
fn on_a_disk_full_to_the_last_byte_every_open_trace_is_still_closed() {
    let Some((disk, _unmount)) = small_disk_or_skip("4m") else {
        return;
    };
    let mount = disk.path().to_path_buf();
    let mut config = socscope_collector::IngestConfig::new(&mount);
    config.disk_reserve = socscope_collector::DiskReserve::new(&mount, 512 << 10);
    let reserve_file = config.disk_reserve.path().to_path_buf();
    let mut collector = Collector::start_configured(
        disk,
        config,
        socscope_collector::tcp::ServeLimits::default(),
    );
    // Two boards streaming in real time; once both traces are being written, another program
    // takes every byte left on the disk.
    let board = |seed: u64, name: &'static str| {
        realtime_sim_over_tcp(
            SimConfig {
                seed,
                duration_s: 4.0,
                realtime: true,
                board: name,
                ..SimConfig::default()
            },
            collector.address(),
        )
    };
    let boards = [board(21, "kitchen"), board(22, "garage")];
    collector.wait_started(2);
    std::thread::sleep(std::time::Duration::from_millis(700));
    let hog = mount.join("hog");
    assert!(
        reserve_file.exists(),
        "the reserve is set aside while the boards stream"
    );
    let taken = fill_to_the_last_byte(&hog, Some(&reserve_file));
    eprintln!("the hog took the last {taken} bytes");
    let reports = collector.wait_sessions(2);
    for b in boards {
        b.join().unwrap();
    }
    // The other program goes on: it takes what the closes left of the freed reserve too.
    let more = fill_to_the_last_byte(&hog, None);
    eprintln!("then {more} bytes more");
    for r in &reports {
        assert!(!r.complete);
        let why = r
            .interrupted
            .as_deref()
            .expect("interrupted, with a reason");
        assert!(
            why.contains("full"),
            "the message says the disk is full: {why}"
        );
        assert!(
            why.contains("closed as interrupted"),
            "closed by the collector itself, not left for a later repair: {why}"
        );
        // Read while the disk is still full: nothing else was freed.
        let info = TraceReader::open(&r.path).unwrap().info().unwrap();
        assert!(info.finished, "closed, not left live: {why}");
        assert!(!info.complete);
        assert!(info.event_count > 0, "what was committed is kept");
        assert_eq!(info.event_count, r.events, "{why}");
        assert!(info.meta.params.iter().any(|(n, _)| n == INTERRUPTED_PARAM));
    }
    // While the disk stays full, a new board gets no trace (it could not be closed): refused, said.
    let refused = sim_over_tcp(
        SimConfig {
            seed: 24,
            duration_s: 0.3,
            board: "too-early",
            ..SimConfig::default()
        },
        collector.address(),
    );
    refused.join().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let said = loop {
        collector.poll();
        let said = collector.notices().iter().find_map(|n| match n {
            Notice::FrameDropped { message, .. }
                if message.contains("no room to set aside the 524288-byte disk reserve") =>
            {
                Some(message.clone())
            }
            _ => None,
        });
        if let Some(m) = said {
            break m;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{:#?}",
            collector.notices()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(said.contains("frames are dropped"), "{said}");
    assert_eq!(
        collector.reports().len(),
        2,
        "no trace for the refused board"
    );
    // The operator frees the disk: the collector sets its reserve aside again and stores the next
    // board completely.
    std::fs::remove_file(&hog).unwrap();
    a_later_board_is_stored_completely(&mut collector, 23, 3);
    assert_eq!(
        socscope_collector::reserve::reserve_files(&mount).len(),
        1,
        "the reserve is set aside again"
    );
    collector.stop();
}

/// A flight-recorder window far larger than the disk: its trace fills it while being saved. The
/// collector's reserve rules apply as for any capture: the window's trace is closed as interrupted,
/// readable, with what was committed, the firing that made it said in it; the recorder goes on watching
/// the board; once there is room again, the next board is stored completely.
#[test]
fn a_full_disk_while_saving_a_flight_recorder_window_closes_it_readable_and_the_watch_goes_on() {
    use socscope_collector::flight::FlightConfig;
    use socscope_collector::trigger::TriggerSet;
    let Some((disk, _unmount)) = small_disk_or_skip("3m") else {
        return;
    };
    let mount = disk.path().to_path_buf();
    let mut config = socscope_collector::IngestConfig::new(&mount);
    config.disk_reserve = socscope_collector::DiskReserve::new(&mount, 256 << 10);
    config.triggers = Some(
        TriggerSet::new(
            vec!["gap:running@vsync-cb>25ms".parse().unwrap()],
            Vec::new(),
        )
        .unwrap(),
    );
    const S: i64 = 1_000_000_000;
    // 2 s before the first late start of the vsync callback to 60 s after it: about 30 s of a
    // 20 k events/s board, several times the disk.
    config.flight = Some(FlightConfig::new(10 * S, 2 * S, 60 * S));
    let mut collector = Collector::start_configured(
        disk,
        config,
        socscope_collector::tcp::ServeLimits::default(),
    );
    let board = sim_over_tcp(
        SimConfig {
            seed: 8,
            duration_s: 40.0,
            board: "stressed",
            io_stress: vec![socscope_sim::Scenario {
                at: 4.0,
                duration: 3.0,
            }],
            ..SimConfig::default()
        },
        collector.address(),
    );
    let reports = collector.wait_sessions(1);
    let _ = board.join();
    let r = &reports[0];
    assert!(!r.complete);
    let why = r
        .interrupted
        .as_deref()
        .expect("interrupted, with a reason");
    assert!(why.contains("full"), "{why}");
    assert!(why.contains("closed as interrupted"), "{why}");
    let info = TraceReader::open(&r.path).unwrap().info().unwrap();
    assert!(info.finished, "closed, not left live: {why}");
    assert!(!info.complete);
    assert!(info.event_count > 0, "what was committed is kept");
    assert_eq!(info.event_count, r.events);
    assert!(info.meta.params.iter().any(|(n, _)| n == INTERRUPTED_PARAM));
    assert!(
        info.meta
            .params
            .iter()
            .any(|(n, v)| n == "trigger" && v.to_string() == "gap:running@vsync-cb>25ms"),
        "the window says which trigger it was saved for: {:?}",
        info.meta.params
    );
    // The recorder watched the board to its end.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let watch = loop {
        collector.poll();
        if let Some(w) = collector.notices().iter().find_map(|n| match n {
            Notice::WatchEnded(w) => Some(w.clone()),
            _ => None,
        }) {
            break w;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{:#?}",
            collector.notices()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(watch.complete, "{watch:?}");
    assert!(!watch.firings.is_empty());
    // The window closed when its trace did: what came after was not fed to a session that was gone.
    for n in collector.notices() {
        if let Notice::FrameDropped { message, .. } = n {
            assert!(!message.contains("without a readable Hello"), "{message}");
        }
    }
    assert!(
        collector.notices().iter().any(|n| matches!(n,
            Notice::TriggerNote { message, .. } if message.contains("window not saved whole") && message.contains("full"))),
        "{:#?}",
        collector.notices()
    );
    // Room again (the operator deletes the window): the next window is saved whole.
    for suffix in ["", "-wal", "-shm"] {
        let mut p = r.path.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
    let board = sim_over_tcp(
        SimConfig {
            seed: 9,
            duration_s: 3.0,
            rate: 5_000.0,
            board: "after",
            io_stress: vec![socscope_sim::Scenario {
                at: 1.0,
                duration: 1.0,
            }],
            ..SimConfig::default()
        },
        collector.address(),
    );
    let reports = collector.wait_sessions(2);
    let _ = board.join();
    let after = &reports[1];
    assert_eq!(after.board, "after");
    assert!(after.interrupted.is_none(), "{after:?}");
    let info = TraceReader::open(&after.path).unwrap().info().unwrap();
    assert!(info.finished && info.event_count > 0, "{info:?}");
    collector.stop();
}

/// Issue 27, row 1's bound: a board filling the disk by itself loses at most one commit interval of
/// board time, at every fill point, with the smallest reserve `collect` accepts for one connection.
/// What is lost is what the session decoded (its `records`, at the board's record rate) beyond the
/// trace's last committed time: the batch open when the disk filled. Before the collector watched the
/// room left, that batch (a whole commit interval, plus what arrived while the failing commit ran) was
/// given up.
#[test]
fn a_board_filling_the_disk_loses_at_most_one_commit_interval() {
    let interval = std::time::Duration::from_millis(100);
    let rate = 50_000.0;
    let mut lost_ms = Vec::new();
    for (run, filler) in [(1u64, 2_600u64 << 10), (2, 2_900 << 10), (3, 3_150 << 10)] {
        let Some((disk, _unmount)) = small_disk_or_skip("4m") else {
            return;
        };
        let mount = disk.path().to_path_buf();
        std::fs::write(mount.join("filler"), vec![7u8; filler as usize]).unwrap();
        let mut config = socscope_collector::IngestConfig::new(&mount);
        config.commit_interval = interval;
        config.disk_reserve = socscope_collector::DiskReserve::new(
            &mount,
            socscope_collector::DiskReserve::needed(1),
        );
        let mut collector = Collector::start_configured(
            disk,
            config,
            socscope_collector::tcp::ServeLimits::default(),
        );
        let address = collector.address();
        let config = SimConfig {
            seed: 40 + run,
            duration_s: 8.0,
            rate,
            realtime: true,
            board: "filler",
            ..SimConfig::default()
        };
        // The board is cut off (told why) once its trace is closed: its summary comes with the error.
        let board_config = config.clone();
        let board = std::thread::spawn(move || {
            let config = board_config;
            let stream = socscope_sim::transport::tcp(&address).expect("the board connects");
            let mut link = socscope_sim::transport::QueuedTransport::spawn(stream, 256 << 10);
            match socscope_sim::run(&config, &mut link) {
                Ok(summary) => summary,
                Err(socscope_sim::SimError::Closed { summary, .. }) => *summary,
                Err(e) => panic!("the simulation fails: {e}"),
            }
        });
        let r = collector.wait_sessions(1)[0].clone();
        board.join().unwrap();
        let why = r.interrupted.as_deref().expect("the disk filled up");
        assert!(why.contains("full"), "{why}");
        let info = TraceReader::open(&r.path).unwrap().info().unwrap();
        assert!(info.finished, "closed: {why}");
        assert_eq!(info.event_count, r.events, "{why}");
        let decoded_s = board_time_of_first_records(&config, r.records);
        let committed_s = info.t_max as f64 / 1e9;
        assert!(
            (r.decoded_until_seconds - decoded_s).abs() < 0.05,
            "the report says how far decoding got: {} s, the stream {decoded_s} s",
            r.decoded_until_seconds
        );
        let lost = (decoded_s - committed_s) * 1e3;
        eprintln!(
            "fill point {filler} B: {} records decoded, {} events committed up to {committed_s:.3} s, \
             {lost:.1} ms of board time lost",
            r.records, r.events
        );
        lost_ms.push(lost);
        collector.stop();
    }
    let worst = lost_ms.iter().cloned().fold(f64::MIN, f64::max);
    assert!(
        worst <= interval.as_secs_f64() * 1e3,
        "at most one commit interval ({interval:?}) of board time lost at every fill point: {lost_ms:?}"
    );
}

/// The board time (seconds since its session started) of the latest of the first `n` records of the
/// stream `config` makes, in stream order — the order a collector decodes them in. The same seed makes
/// the same records whether the board runs in real time or not.
fn board_time_of_first_records(config: &SimConfig, n: u64) -> f64 {
    use socscope_wire::decode::{Frame, StreamDecoder};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("board.wire");
    let mut offline = config.clone();
    offline.realtime = false;
    support::capture_file(&offline, &path);
    let mut decoder = StreamDecoder::new(&[socscope_wire::WIRE_VERSION]);
    decoder.feed(&std::fs::read(&path).unwrap());
    let (mut start, mut rate, mut seen, mut latest) = (0u64, 1u64, 0u64, 0u64);
    while let Some(next) = decoder.next_frame() {
        match next.expect("the capture decodes cleanly").frame {
            Frame::Hello(h) => (start, rate) = (h.start_ticks, h.tick_rate_hz),
            Frame::Events(batch) => {
                for record in batch.iter() {
                    if seen == n {
                        return latest.saturating_sub(start) as f64 / rate as f64;
                    }
                    seen += 1;
                    latest = latest.max(record.ticks());
                }
            }
            _ => {}
        }
    }
    latest.saturating_sub(start) as f64 / rate as f64
}
