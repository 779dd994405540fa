//! The disk fills up under a capture (issue 10, row 8): the session that cannot write ends cleanly as
//! interrupted — its trace keeps what was committed, is closed and says why — the collector says so in
//! one clear message and goes on: once there is room again, the next board is stored completely.
//!
//! The catalog directory is a 3 MiB tmpfs mounted for the test. Mounting needs root (CI containers run
//! as root); elsewhere the test says it is skipped and passes.

mod support;

use std::path::Path;
use std::process::Command;

use socscope_sim::SimConfig;
use socscope_tracedb::{INTERRUPTED_PARAM, TraceReader};
use support::{Collector, assert_exact_counts, sim_over_tcp};

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
    let Some(disk) = small_disk("3m") else {
        eprintln!("skipped: cannot mount a tmpfs here (needs root)");
        return;
    };
    let mount = disk.path().to_path_buf();
    let _unmount = Unmount(mount.clone());
    // What the operator frees once the disk is full (another file on the same disk).
    let ballast = mount.join("ballast");
    std::fs::write(&ballast, vec![0u8; 256 << 10]).unwrap();
    let mut collector = Collector::start_in(disk);
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
    let mut info = TraceReader::open(&r.path).unwrap().info().unwrap();
    let mut events = r.events;
    if !info.finished {
        // So full that even closing it could not write (it depends on where the disk filled
        // up): the collector said so, and the trace is closed by a repair once there is room.
        assert!(why.contains("full"), "{why}");
        std::fs::remove_file(&ballast).unwrap();
        match socscope_tracedb::repair(&r.path, "closed after the disk was full").unwrap() {
            socscope_tracedb::RepairOutcome::Repaired(done) => events = done.events,
            other => panic!("not repaired: {other:?}"),
        }
        info = TraceReader::open(&r.path).unwrap().info().unwrap();
    }
    assert!(info.finished, "closed, not left live: {why}");
    assert!(!info.complete);
    assert!(info.event_count > 0, "what was committed is kept");
    assert_eq!(info.event_count, events);
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
    let small = sim_over_tcp(
        SimConfig {
            seed: 9,
            duration_s: 0.5,
            board: "after",
            ..SimConfig::default()
        },
        collector.address(),
    );
    let reports = collector.wait_sessions(2);
    let summary = small.join().unwrap();
    let after = &reports[1];
    assert!(after.complete, "{after:?}");
    assert_exact_counts(&after.path, &summary);
    collector.stop();
}
