//! A trace writer on a disk that fills up (issue 27, row 1): the first failed write rolls back what
//! was not committed and stops the writer, so the file keeps its last commit whole — every chunk
//! readable, no chunk naming a dictionary that the failed transaction held — however much room
//! comes back before the writer is dropped.
//!
//! The disk is a real tmpfs mounted for the test (root only; CI runs as root, elsewhere the test
//! says it is skipped).

mod common;

use std::path::Path;
use std::process::Command;

use common::*;
use socscope_tracedb::*;

/// A tmpfs of `size` mounted on a temporary directory (unmounted when dropped), or `None` outside
/// CI when this user cannot mount.
struct SmallDisk(tempfile::TempDir);

impl SmallDisk {
    fn mount(size: &str) -> Option<Self> {
        let dir = tempfile::tempdir().unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            assert!(
                std::env::var_os("CI").is_none(),
                "cannot mount a tmpfs: CI runs this test as root, it must not be skipped there"
            );
            eprintln!("skipped: cannot mount a tmpfs here (needs root)");
            return None;
        }
        Some(Self(dir))
    }

    fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

/// Events of every chunk, decoded one by one (an unreadable chunk is an error).
fn decode_everything(path: &Path) -> Result<u64> {
    let r = TraceReader::open(path)?;
    let mut n = 0;
    for e in r.events(TimeRange::all(), &Filter::all())? {
        e?;
        n += 1;
    }
    Ok(n)
}

/// Writes until the disk is full, frees room, drops the writer; the file must hold exactly its last
/// commit. `filler` bytes of the disk are taken by another file first (a different fill point).
fn fill_then_free(filler: usize, commit_every: usize) {
    let Some(disk) = SmallDisk::mount("2m") else {
        return;
    };
    let room = disk.path().join("room");
    std::fs::write(&room, vec![1u8; 256 << 10]).unwrap();
    std::fs::write(disk.path().join("filler"), vec![7u8; filler]).unwrap();
    let path = disk.path().join("t.db");
    let config = WriterConfig {
        commit_interval: std::time::Duration::from_secs(3600),
        // Dictionaries trained in the commit that completes their samples: a failed commit may hold
        // one, which is what left chunks naming a dictionary the file did not hold.
        train_in_background: false,
        ..WriterConfig::default()
    };
    let mut w = new_writer(&path, config);
    let mut committed = 0u64;
    let mut failure = None;
    'fill: for round in 0..200u64 {
        for e in mixed_events(commit_every, round) {
            if let Err(e) = w.push(&e) {
                failure = Some(e);
                break 'fill;
            }
        }
        match w.commit() {
            Ok(()) => committed = w.info().event_count,
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    let failure = failure.expect("the disk filled up");
    assert!(failure.is_disk_full(), "{failure}");
    assert!(committed > 0, "some commits went through before");
    // Every later write is refused, saying why, and still counts as a full disk.
    let again = w.push(&mixed_events(1, 1)[0]).unwrap_err();
    assert!(
        matches!(again, StoreError::WriterFailed { .. }) && again.is_disk_full(),
        "{again}"
    );
    assert!(w.failed().is_some());
    // Room comes back (the reserve freed) before the writer goes: dropping it writes nothing.
    std::fs::remove_file(&room).unwrap();
    drop(w);
    let info = TraceReader::open(&path).unwrap().info().unwrap();
    assert_eq!(info.event_count, committed, "the last commit, as it was");
    assert_eq!(
        decode_everything(&path).unwrap(),
        committed,
        "every committed event readable, nothing more"
    );
    match repair(&path, "full disk").unwrap() {
        RepairOutcome::Repaired(r) => {
            assert_eq!(r.events, committed);
            assert_eq!(r.unreadable_chunks, 0);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(decode_everything(&path).unwrap(), committed);
}

#[test]
fn a_writer_on_a_full_disk_keeps_its_last_commit_whole() {
    // Several fill points and commit sizes: the failure lands in a chunk write, a summary write,
    // a dictionary's row or the commit itself.
    for (filler, commit_every) in [
        (0, 20_000),
        (300 << 10, 7_000),
        (700 << 10, 30_000),
        (1000 << 10, 3_000),
    ] {
        fill_then_free(filler, commit_every);
    }
}

/// A trace that a writer of an earlier build left with chunks naming a dictionary it does not hold
/// (closed as interrupted on a full disk, or left live): `repair` removes those chunks, says how many
/// and what they held, records the loss, rebuilds the summary from what is left, and the trace reads
/// whole. It never says "already finished" about a trace it changed, nor about one it could not read.
#[test]
fn repair_removes_chunks_naming_a_missing_dictionary() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let config = WriterConfig {
        commit_interval: std::time::Duration::from_secs(3600),
        train_in_background: false,
        ..WriterConfig::default()
    };
    let mut w = new_writer(&path, config);
    for e in mixed_events(200_000, 3) {
        w.push(&e).unwrap();
    }
    w.finish(false).unwrap();
    let c = rusqlite::Connection::open(&path).unwrap();
    let dicts: i64 = c
        .query_row("SELECT count(*) FROM chunk_dict", [], |r| r.get(0))
        .unwrap();
    assert!(
        dicts > 0,
        "the test needs chunks compressed with a dictionary"
    );
    let last: i64 = c
        .query_row("SELECT max(id) FROM chunk_dict", [], |r| r.get(0))
        .unwrap();
    c.execute("DELETE FROM chunk_dict WHERE id = ?1", [last])
        .unwrap();
    drop(c);
    assert!(decode_everything(&path).is_err(), "the damage is real");
    let r = match repair(&path, "test").unwrap() {
        RepairOutcome::Repaired(r) => r,
        other => panic!("{other:?}"),
    };
    assert!(!r.was_live);
    assert!(r.unreadable_chunks > 0 && r.unreadable_events > 0);
    assert_eq!(r.events + r.unreadable_events, 200_000);
    let reader = TraceReader::open(&path).unwrap();
    let info = reader.info().unwrap();
    assert_eq!(info.event_count, r.events);
    assert_eq!(decode_everything(&path).unwrap(), r.events);
    assert_eq!(
        reader.count(TimeRange::all(), &Filter::all()).unwrap(),
        r.events,
        "the summary counts what the chunks hold"
    );
    let lost: u64 = reader.losses().unwrap().iter().map(|l| l.count).sum();
    assert_eq!(lost, r.unreadable_events);
    drop(reader);
    assert_eq!(
        repair(&path, "test").unwrap(),
        RepairOutcome::AlreadyFinished
    );
}

/// A finished trace with one chunk whose blocks were damaged on disk (its header intact): every read
/// fails naming the chunk and saying what to do, and `repair` decodes every block of a finished trace,
/// so it removes that chunk alone, records what it held as a loss, and the rest reads whole again.
#[test]
fn repair_removes_a_chunk_of_a_finished_trace_whose_blocks_are_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let mut w = new_writer(&path, WriterConfig::default());
    for e in mixed_events(50_000, 5) {
        w.push(&e).unwrap();
    }
    w.finish(true).unwrap();
    let c = rusqlite::Connection::open(&path).unwrap();
    let (id, held, mut data): (i64, i64, Vec<u8>) = c
        .query_row(
            "SELECT id, count, data FROM chunk ORDER BY id LIMIT 1 OFFSET 3",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    // Past the header, every 97th byte flipped: bit rot in the compressed blocks.
    for b in data.iter_mut().skip(40).step_by(97) {
        *b ^= 0x5a;
    }
    c.execute(
        "UPDATE chunk SET data = ?1 WHERE id = ?2",
        rusqlite::params![data, id],
    )
    .unwrap();
    drop(c);
    let damage = decode_everything(&path).unwrap_err().to_string();
    assert!(
        damage.contains(&format!("corrupt event chunk {id}")) && damage.contains("socscope repair"),
        "{damage}"
    );
    // What the collector and the demo run when they settle a trace reads only the chunks' headers.
    assert_eq!(
        repair(&path, "test").unwrap(),
        RepairOutcome::AlreadyFinished
    );
    assert!(decode_everything(&path).is_err());
    let r = match repair_checking_blocks(&path, "test").unwrap() {
        RepairOutcome::Repaired(r) => r,
        other => panic!("a damaged finished trace is not left as it is: {other:?}"),
    };
    assert!(!r.was_live);
    assert_eq!(r.unreadable_chunks, 1);
    assert_eq!(r.unreadable_events, held as u64);
    assert_eq!(r.events + r.unreadable_events, 50_000);
    assert_eq!(decode_everything(&path).unwrap(), r.events);
    let reader = TraceReader::open(&path).unwrap();
    let info = reader.info().unwrap();
    assert!(
        info.complete,
        "the trace keeps its state; the loss is recorded"
    );
    let lost: u64 = reader.losses().unwrap().iter().map(|l| l.count).sum();
    assert_eq!(lost, held as u64);
    drop(reader);
    assert_eq!(
        repair_checking_blocks(&path, "test").unwrap(),
        RepairOutcome::AlreadyFinished
    );
}
