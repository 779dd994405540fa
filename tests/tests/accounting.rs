//! Exact accounting at both ends of a CPU's stream and for sections seen twice (issue 10, rows 3 and 4):
//! the first or the last `Events` frame of a CPU lost on the link is counted as lost (the first against
//! sequence number 0, the last against the CPU's `CpuTotal`, or the `Bye` totals when that is lost too),
//! and a duplicated section of the stream is stored once, its records counted as duplicates. Real
//! captures, the real ingest.

mod support;

use std::collections::BTreeMap;
use std::path::Path;

use socscope_collector::session::Ingest;
use socscope_collector::{IngestConfig, SessionReport};
use socscope_sim::{SimConfig, SimSummary};
use socscope_tracedb::TraceReader;
use support::{
    FrameInfo, capture_file, expected_records_by_type, ingest_stats, inventory, records_by_type,
};

struct Capture {
    bytes: Vec<u8>,
    frames: Vec<FrameInfo>,
    summary: SimSummary,
    _dir: tempfile::TempDir,
}

fn capture() -> Capture {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("board.wire");
    let summary = capture_file(
        &SimConfig {
            seed: 21,
            duration_s: 1.0,
            board: "accounting-stb",
            ..SimConfig::default()
        },
        &path,
    );
    let bytes = std::fs::read(&path).unwrap();
    let frames = inventory(&bytes);
    assert_eq!(summary.dropped, 0);
    Capture {
        bytes,
        frames,
        summary,
        _dir: dir,
    }
}

/// The stream without the frame at `index`.
fn without(c: &Capture, index: usize) -> Vec<u8> {
    without_all(c, &[index])
}

/// The stream without the frames at `indices`.
fn without_all(c: &Capture, indices: &[usize]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(c.bytes.len());
    for (i, f) in c.frames.iter().enumerate() {
        if !indices.contains(&i) {
            bytes.extend_from_slice(&c.bytes[f.offset..f.offset + f.len]);
        }
    }
    bytes
}

/// The sequence number of the first record of the `Events` frame at `index`.
fn first_seq_of(c: &Capture, index: usize) -> u64 {
    let mut decoder = socscope_wire::decode::StreamDecoder::default();
    decoder.feed(&c.bytes[..c.frames[index].offset + c.frames[index].len]);
    let mut first = None;
    while let Some(next) = decoder.next_frame() {
        if let Ok(d) = next
            && d.offset as usize == c.frames[index].offset
            && let socscope_wire::decode::Frame::Events(b) = d.frame
        {
            first = Some(b.first_seq);
        }
    }
    first.expect("an Events frame at that index")
}

fn ingest_all(bytes: &[u8], dir: &Path) -> SessionReport {
    let mut ingest = Ingest::new(IngestConfig::new(dir), "accounting");
    for slice in bytes.chunks(4093) {
        ingest.feed(slice).unwrap();
    }
    let (mut reports, _) = ingest.finish().unwrap();
    assert_eq!(reports.len(), 1);
    reports.remove(0)
}

fn minus(a: &BTreeMap<String, u64>, frame: &FrameInfo) -> BTreeMap<String, u64> {
    let mut out = a.clone();
    for (id, n) in &frame.records {
        let name = socscope_wire::dict::BUILTINS
            .iter()
            .find(|b| b.id() == *id)
            .map(|b| b.def().name.to_string())
            .unwrap_or_else(|| format!("type{id}"));
        let v = out.get_mut(&name).unwrap();
        *v -= n;
        if *v == 0 {
            out.remove(&name);
        }
    }
    out
}

fn events_of_cpu(c: &Capture, cpu: u16) -> Vec<usize> {
    c.frames
        .iter()
        .enumerate()
        .filter(|(_, f)| f.kind == "Events" && f.cpu == Some(cpu))
        .map(|(i, _)| i)
        .collect()
}

#[test]
fn a_cpus_first_batch_lost_on_the_link_is_counted() {
    let c = capture();
    let first = events_of_cpu(&c, 1)[0];
    let lost = c.frames[first].record_count();
    assert!(lost > 0);
    let dir = tempfile::tempdir().unwrap();
    let r = ingest_all(&without(&c, first), dir.path());
    assert_eq!(r.records, c.summary.events - lost);
    assert_eq!(r.lost_in_transit, lost, "counted against sequence number 0");
    let reader = TraceReader::open(&r.path).unwrap();
    let stats = ingest_stats(&reader);
    assert_eq!(stats["records_lost_in_transit"] as u64, lost);
    assert_eq!(stats["records_lost_at_end"], 0);
    let losses = reader.losses().unwrap();
    assert_eq!(losses.len(), 1);
    assert_eq!(
        (losses[0].cpu, losses[0].seq_from, losses[0].count),
        (Some(1), Some(0), lost)
    );
    // Everything the board sent is accounted for: stored + lost.
    assert_eq!(
        stats["records"] as u64 + stats["records_lost_in_transit"] as u64,
        stats["board_records"] as u64
    );
}

#[test]
fn a_cpus_last_batch_lost_on_the_link_is_counted_against_the_bye_totals() {
    let c = capture();
    let last = *events_of_cpu(&c, 0).last().unwrap();
    let lost = c.frames[last].record_count();
    assert!(lost > 0);
    let dir = tempfile::tempdir().unwrap();
    let r = ingest_all(&without(&c, last), dir.path());
    assert!(r.complete);
    assert_eq!(r.records, c.summary.events - lost);
    assert_eq!(r.lost_in_transit, lost);
    let reader = TraceReader::open(&r.path).unwrap();
    let stats = ingest_stats(&reader);
    assert_eq!(stats["records_lost_at_end"] as u64, lost);
    assert_eq!(stats["records_lost_in_transit"] as u64, lost);
    assert_eq!(
        stats["records"] as u64 + stats["records_lost_in_transit"] as u64,
        stats["board_records"] as u64
    );
    // The board's CpuTotal for CPU 0 names the CPU and the sequence numbers that never came.
    let losses = reader.losses().unwrap();
    assert_eq!(losses.len(), 1, "{losses:?}");
    let from = first_seq_of(&c, last);
    assert_eq!(
        (
            losses[0].cpu,
            losses[0].seq_from,
            losses[0].seq_to,
            losses[0].count
        ),
        (Some(0), Some(from), Some(from + lost - 1), lost)
    );
    assert!(losses[0].reason.contains("Bye"), "{}", losses[0].reason);
    assert_eq!(
        records_by_type(&stats),
        minus(&expected_records_by_type(&c.summary), &c.frames[last])
    );
}

#[test]
fn without_the_cpus_total_the_bye_totals_still_count_the_lost_end() {
    let c = capture();
    let last = *events_of_cpu(&c, 0).last().unwrap();
    let lost = c.frames[last].record_count();
    let totals: Vec<usize> = c
        .frames
        .iter()
        .enumerate()
        .filter(|(_, f)| f.kind == "CpuTotal")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(totals.len(), 2, "one CpuTotal per CPU before Bye");
    let cpu0_total = totals
        .iter()
        .copied()
        .find(|&i| c.frames[i].cpu == Some(0))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let r = ingest_all(&without_all(&c, &[last, cpu0_total]), dir.path());
    assert!(r.complete);
    assert_eq!(r.lost_in_transit, lost);
    let reader = TraceReader::open(&r.path).unwrap();
    let losses = reader.losses().unwrap();
    assert_eq!(losses.len(), 1, "{losses:?}");
    assert_eq!((losses[0].cpu, losses[0].count), (None, lost));
}

#[test]
fn a_duplicated_section_is_stored_once_and_counted() {
    let c = capture();
    // Six consecutive Events frames from the middle, sent again right after themselves.
    let events: Vec<usize> = c
        .frames
        .iter()
        .enumerate()
        .filter(|(_, f)| f.kind == "Events")
        .map(|(i, _)| i)
        .collect();
    let mid = events.len() / 2;
    let start = (mid..events.len() - 6)
        .find(|&k| events[k + 5] == events[k] + 5)
        .expect("six consecutive Events frames");
    let (a, b) = (events[start], events[start] + 5);
    let section = c.frames[a].offset..c.frames[b].offset + c.frames[b].len;
    let twice: u64 = (a..=b).map(|i| c.frames[i].record_count()).sum();
    let mut bytes = c.bytes[..section.end].to_vec();
    bytes.extend_from_slice(&c.bytes[section.clone()]);
    bytes.extend_from_slice(&c.bytes[section.end..]);

    let dir = tempfile::tempdir().unwrap();
    let r = ingest_all(&bytes, dir.path());
    assert!(r.complete);
    assert_eq!(r.records, c.summary.events, "each record stored once");
    assert_eq!((r.lost_in_transit, r.lost_on_board), (0, 0));
    let reader = TraceReader::open(&r.path).unwrap();
    let stats = ingest_stats(&reader);
    assert_eq!(stats["duplicate_records"] as u64, twice);
    assert_eq!(stats["sequence_overlaps"], 6);
    assert_eq!(
        records_by_type(&stats),
        expected_records_by_type(&c.summary)
    );
    assert!(reader.losses().unwrap().is_empty());

    // The same events as the clean capture, not one more.
    let clean_dir = tempfile::tempdir().unwrap();
    let clean = ingest_all(&c.bytes, clean_dir.path());
    assert_eq!(r.events, clean.events);
}

/// Issue 27, row 11: a stream whose end is cut off inside its last `Events` frame. The records of that
/// frame (from its header) are counted lost in transit, with a loss row on its CPU; when even the
/// header is cut, a loss row of unknown count says so. Nothing goes uncounted.
#[test]
fn the_records_of_a_last_frame_cut_off_are_counted_lost() {
    let c = capture();
    let last = c
        .frames
        .iter()
        .rposition(|f| f.kind == "Events")
        .expect("an Events frame");
    let frame = &c.frames[last];
    assert!(
        c.frames[last + 1..].iter().all(|f| f.record_count() == 0),
        "only frames without records after it"
    );
    // Its header readable (20 bytes in), then cut a few bytes in.
    for (keep, header_readable) in [(20, true), (2, false)] {
        let bytes = &c.bytes[..frame.offset + keep];
        let dir = tempfile::tempdir().unwrap();
        let r = ingest_all(bytes, dir.path());
        assert!(!r.complete);
        let reader = TraceReader::open(&r.path).unwrap();
        let stats = ingest_stats(&reader);
        let losses = reader.losses().unwrap();
        if header_readable {
            assert_eq!(stats["records_cut_off"] as u64, frame.record_count());
            assert_eq!(
                r.records + stats["records_lost_in_transit"] as u64,
                c.summary.events,
                "every record stored or counted lost: {stats:?}"
            );
            assert!(
                losses
                    .iter()
                    .any(|l| l.cpu == frame.cpu && l.count == frame.record_count()),
                "{losses:?}"
            );
        } else {
            assert_eq!(stats["records_cut_off"], 0);
            assert!(
                losses
                    .iter()
                    .any(|l| l.count == 0 && l.reason.contains("unknown number")),
                "{losses:?}"
            );
        }
    }
}
