//! Resynchronisation (issue 10, row 2; wire version 2): the agent repeats its `Hello` and dictionary every
//! second, so one flipped bit in the first `Hello` no longer costs the session — the frames before the
//! first readable `Hello` are kept and stored in it — and a collector joining mid-stream stores what it
//! saw and counts the rest as lost.

mod support;

use socscope_collector::session::Ingest;
use socscope_collector::{IngestConfig, SessionReport};
use socscope_sim::{SimConfig, SimSummary};
use socscope_tracedb::TraceReader;
use support::{capture_file, expected_records_by_type, ingest_stats, inventory, records_by_type};

fn capture() -> (Vec<u8>, SimSummary, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("board.wire");
    let summary = capture_file(
        &SimConfig {
            seed: 13,
            duration_s: 2.5,
            board: "resync-stb",
            ..SimConfig::default()
        },
        &path,
    );
    (std::fs::read(&path).unwrap(), summary, dir)
}

fn ingest_all(bytes: &[u8], dir: &std::path::Path) -> Vec<SessionReport> {
    let mut ingest = Ingest::new(IngestConfig::new(dir), "resync");
    for slice in bytes.chunks(4093) {
        ingest.feed(slice).unwrap();
    }
    ingest.finish().unwrap().0
}

#[test]
fn the_agent_repeats_its_hello_and_the_collector_keeps_one_session() {
    let (bytes, summary, _d) = capture();
    let hellos = inventory(&bytes)
        .iter()
        .filter(|f| f.kind == "Hello")
        .count();
    assert!(hellos >= 3, "a Hello every second: {hellos}");
    let dir = tempfile::tempdir().unwrap();
    let reports = ingest_all(&bytes, dir.path());
    assert_eq!(reports.len(), 1, "one session, not {}", reports.len());
    let stats = ingest_stats(&TraceReader::open(&reports[0].path).unwrap());
    assert_eq!(stats["hellos_repeated"] as usize, hellos - 1);
    assert_eq!(stats["records"] as u64, summary.events);
    assert_eq!(records_by_type(&stats), expected_records_by_type(&summary));
}

#[test]
fn a_flipped_bit_in_the_hello_loses_nothing() {
    let (mut bytes, summary, _d) = capture();
    bytes[10] ^= 0x04;
    let dir = tempfile::tempdir().unwrap();
    let reports = ingest_all(&bytes, dir.path());
    assert_eq!(reports.len(), 1);
    let r = &reports[0];
    assert!(r.complete);
    assert_eq!(r.board, "resync-stb");
    assert_eq!(r.records, summary.events, "every record stored");
    let stats = ingest_stats(&TraceReader::open(&r.path).unwrap());
    assert!(stats["records_before_hello"] > 10_000, "{stats:?}");
    assert_eq!(stats["frames_dropped_before_hello"], 1, "the damaged Hello");
    assert_eq!(stats["records_lost_before_hello"], 0);
    assert_eq!(stats["records_lost_in_transit"], 0);
    assert_eq!(records_by_type(&stats), expected_records_by_type(&summary));
}

#[test]
fn joining_mid_stream_stores_what_arrived_and_counts_the_rest() {
    let (bytes, summary, _d) = capture();
    let frames = inventory(&bytes);
    // Join at the tenth Events frame after the start: the first Hello and its batches are never seen.
    let join = frames
        .iter()
        .filter(|f| f.kind == "Events")
        .nth(10)
        .unwrap()
        .offset;
    let missed: u64 = frames
        .iter()
        .filter(|f| f.offset < join)
        .map(|f| f.record_count())
        .sum();
    let dir = tempfile::tempdir().unwrap();
    let reports = ingest_all(&bytes[join..], dir.path());
    assert_eq!(reports.len(), 1);
    let r = &reports[0];
    assert_eq!(r.records, summary.events - missed);
    assert_eq!(r.lost_in_transit, missed, "the sequence gap from 0");
    let stats = ingest_stats(&TraceReader::open(&r.path).unwrap());
    assert!(stats["records_before_hello"] > 0);
    assert_eq!(
        stats["records"] as u64 + stats["records_lost_in_transit"] as u64,
        stats["board_records"] as u64
    );
}

#[test]
fn repeated_hellos_and_dictionaries_change_nothing_that_is_stored() {
    let (bytes, _summary, _d) = capture();
    // The same stream without its repeats: every Hello but the first, and the Dictionary frames right
    // after each of them.
    let frames = inventory(&bytes);
    let mut once = Vec::new();
    let mut in_repeat = false;
    for (i, f) in frames.iter().enumerate() {
        let repeat_hello = f.kind == "Hello" && i > 0;
        in_repeat = repeat_hello || (in_repeat && f.kind == "Dictionary");
        if !in_repeat {
            once.extend_from_slice(&bytes[f.offset..f.offset + f.len]);
        }
    }
    assert!(once.len() < bytes.len());
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let with = ingest_all(&bytes, a.path());
    let without = ingest_all(&once, b.path());
    let (ra, rb) = (
        TraceReader::open(&with[0].path).unwrap(),
        TraceReader::open(&without[0].path).unwrap(),
    );
    assert_eq!(ra.producers().unwrap(), rb.producers().unwrap());
    assert_eq!(ra.event_types().unwrap(), rb.event_types().unwrap());
    assert_eq!(
        ra.info().unwrap().event_count,
        rb.info().unwrap().event_count
    );
}

/// Issue 27, row 12: the same stream gives the same times whichever `Hello` was readable — the
/// repeats carry the session's own start, so a damaged first `Hello` moves no timestamp (it moved
/// every one by the second between the first `Hello` and its first repeat).
#[test]
fn times_do_not_depend_on_which_hello_was_readable() {
    let (bytes, _summary, _d) = capture();
    let mut damaged = bytes.clone();
    damaged[10] ^= 0x04;
    let events = |bytes: &[u8]| {
        let dir = tempfile::tempdir().unwrap();
        let reports = ingest_all(bytes, dir.path());
        assert_eq!(reports.len(), 1);
        let r = TraceReader::open(&reports[0].path).unwrap();
        let info = r.info().unwrap();
        let mut ts: Vec<(i64, u32)> = r
            .events(
                socscope_tracedb::TimeRange::all(),
                &socscope_tracedb::Filter::all(),
            )
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (e.event.ts, e.event.type_id)
            })
            .collect();
        ts.sort_unstable();
        (info.t_min, info.t_max, ts)
    };
    let (clean_min, clean_max, clean) = events(&bytes);
    let (min, max, got) = events(&damaged);
    assert_eq!((min, max), (clean_min, clean_max));
    assert_eq!(got.len(), clean.len());
    assert!(got == clean, "every event at the same time");
}
