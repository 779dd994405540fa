//! Fault injection on a real capture fed to the collector's ingest: corrupt frames, a stream cut inside a
//! frame, a frame cut short with the stream going on, and boards of another wire version. Each drop is
//! counted exactly in `ingest_stat`, said in one clear notice, and the session goes on or ends cleanly.
//! The expected numbers come from an inventory of the intact capture.

mod support;

use std::collections::BTreeMap;
use std::path::Path;

use socscope_collector::session::Ingest;
use socscope_collector::{IngestConfig, Notice, SessionReport};
use socscope_sim::{SimConfig, SimSummary};
use socscope_tracedb::TraceReader;
use socscope_wire::decode::Dictionary;
use socscope_wire::encode::encode_hello;
use socscope_wire::frame::Hello;
use support::{FrameInfo, capture_file, ingest_stats, inventory, records_by_type};

const BOARD: &str = "fault-stb";

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
            seed: 4,
            duration_s: 1.0,
            board: BOARD,
            ..SimConfig::default()
        },
        &path,
    );
    let bytes = std::fs::read(&path).unwrap();
    let frames = inventory(&bytes);
    assert_eq!(frames.first().map(|f| f.kind), Some("Hello"));
    assert_eq!(frames.last().map(|f| f.kind), Some("Bye"));
    Capture {
        bytes,
        frames,
        summary,
        _dir: dir,
    }
}

impl Capture {
    /// The `Events` frames, in stream order.
    fn events(&self) -> Vec<&FrameInfo> {
        self.frames.iter().filter(|f| f.kind == "Events").collect()
    }

    /// The `Events` frame at `fraction` of the way through the stream.
    fn events_at(&self, fraction: f64) -> FrameInfo {
        let events = self.events();
        events[(events.len() as f64 * fraction) as usize].clone()
    }
}

/// Feeds `bytes` in slices the size of a serial read, then ends the stream.
fn ingest(bytes: &[u8], dir: &Path) -> (Vec<SessionReport>, Vec<Notice>, u64) {
    let mut ingest = Ingest::new(IngestConfig::new(dir), "fault injection");
    let mut notices = Vec::new();
    for slice in bytes.chunks(4093) {
        ingest.feed(slice).expect("corruption is never fatal");
        notices.extend(ingest.take_notices());
    }
    let orphans = ingest.orphan_frames();
    let (reports, rest) = ingest.finish().expect("the stream ends cleanly");
    notices.extend(rest);
    (reports, notices, orphans)
}

fn warnings(notices: &[Notice]) -> Vec<String> {
    notices
        .iter()
        .filter_map(|n| match n {
            Notice::FrameDropped { message, .. } => Some(message.clone()),
            _ => None,
        })
        .collect()
}

/// Offsets of the COBS code bytes of an encoded frame (delimiter excluded): every other byte is data.
fn cobs_code_positions(encoded: &[u8]) -> Vec<usize> {
    let mut at = Vec::new();
    let mut i = 0;
    while i < encoded.len() {
        at.push(i);
        i += usize::from(encoded[i]);
    }
    at
}

/// Whether an encoded frame is valid COBS (its code bytes land exactly on its end).
fn is_valid_cobs(encoded: &[u8]) -> bool {
    let mut i = 0;
    while i < encoded.len() {
        if encoded[i] == 0 {
            return false;
        }
        i += usize::from(encoded[i]);
    }
    i == encoded.len()
}

/// The per-type record counts (by wire name) of a set of frames.
fn records_of(frames: &[&FrameInfo]) -> BTreeMap<String, u64> {
    let dict = Dictionary::default();
    let mut out = BTreeMap::new();
    for f in frames {
        for (ty, n) in &f.records {
            let name = dict.get(*ty).expect("a built-in type").name.clone();
            *out.entry(name).or_insert(0) += n;
        }
    }
    out
}

fn minus(a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    a.iter()
        .map(|(k, v)| (k.clone(), v - b.get(k).copied().unwrap_or(0)))
        .filter(|(_, v)| *v > 0)
        .collect()
}

#[test]
fn corrupt_frames_are_dropped_counted_and_the_session_goes_on() {
    let c = capture();
    let victims: Vec<FrameInfo> = [0.25, 0.5, 0.75].map(|f| c.events_at(f)).to_vec();
    let mut bytes = c.bytes.clone();
    for v in &victims {
        // Change one data byte (not a COBS code byte) to another non-zero value: the frame keeps its length
        // and its place, only its CRC no longer matches.
        let body = v.body();
        let codes = cobs_code_positions(&c.bytes[body.clone()]);
        let at = (body.len() / 2..body.len())
            .find(|i| !codes.contains(i))
            .expect("a data byte");
        let b = &mut bytes[body.start + at];
        *b = if *b == 0xFF { 0xFE } else { *b + 1 };
    }
    let dir = tempfile::tempdir().unwrap();
    let (reports, notices, orphans) = ingest(&bytes, dir.path());
    assert_eq!(orphans, 0);
    assert_eq!(reports.len(), 1);
    let r = &reports[0];
    assert!(r.complete, "the session went on to its Bye");

    let lost: u64 = victims.iter().map(FrameInfo::record_count).sum();
    assert!(lost > 0);
    assert_eq!(r.records, c.summary.events - lost);
    assert_eq!((r.dropped_frames, r.lost_in_transit), (3, lost));

    let reader = TraceReader::open(&r.path).unwrap();
    let stats = ingest_stats(&reader);
    assert_eq!(stats["frames_dropped"], 3);
    assert_eq!(stats["frames_dropped.crc"], 3);
    assert_eq!(
        stats
            .keys()
            .filter(|k| k.starts_with("frames_dropped."))
            .count(),
        1,
        "one reason: {stats:?}"
    );
    let dropped_bytes: usize = victims.iter().map(|v| v.len - 1).sum();
    assert_eq!(stats["bytes_dropped"] as usize, dropped_bytes);
    assert_eq!(stats["records_lost_in_transit"] as u64, lost);
    assert_eq!(stats["records_lost_on_board"], 0);
    assert_eq!(
        stats["frames"] as usize,
        c.frames.len() - 1 - 3,
        "all but Hello and the victims"
    );
    let all: Vec<&FrameInfo> = c.frames.iter().collect();
    let victim_refs: Vec<&FrameInfo> = victims.iter().collect();
    assert_eq!(
        records_by_type(&stats),
        minus(&records_of(&all), &records_of(&victim_refs))
    );
    // The losses table says where: one entry per gap, on the victims' CPUs, for exactly their records.
    let losses = reader.losses().unwrap();
    assert!(
        losses
            .iter()
            .all(|l| l.reason == "frames dropped on the link")
    );
    assert_eq!(losses.iter().map(|l| l.count).sum::<u64>(), lost);
    let mut loss_cpus: Vec<u16> = losses.iter().filter_map(|l| l.cpu).collect();
    let mut victim_cpus: Vec<u16> = victims.iter().filter_map(|v| v.cpu).collect();
    loss_cpus.sort();
    victim_cpus.sort();
    victim_cpus.dedup();
    loss_cpus.dedup();
    assert_eq!(loss_cpus, victim_cpus);

    // One line per drop: where in the stream, how long, why, and which board.
    let w = warnings(&notices);
    assert_eq!(w.len(), 3, "{w:#?}");
    for (message, v) in w.iter().zip(&victims) {
        let head = format!(
            "dropped {} bytes at stream offset {}: check mismatch: the frame carries 0x",
            v.len - 1,
            v.offset
        );
        assert!(
            message.starts_with(&head),
            "{message:?} should start with {head:?}"
        );
        assert!(message.ends_with(&format!("({BOARD})")), "{message:?}");
    }
}

#[test]
fn a_stream_cut_inside_a_frame_keeps_every_whole_batch() {
    let c = capture();
    let victim = c.events_at(0.5);
    let cut = victim.offset + victim.len / 2;
    let dir = tempfile::tempdir().unwrap();
    let (reports, notices, _) = ingest(&c.bytes[..cut], dir.path());
    assert_eq!(reports.len(), 1);
    let r = &reports[0];
    assert!(!r.complete, "no Bye");

    let before: Vec<&FrameInfo> = c
        .frames
        .iter()
        .filter(|f| f.offset < victim.offset)
        .collect();
    let kept: u64 = before.iter().map(|f| f.record_count()).sum();
    assert_eq!(r.records, kept);
    let reader = TraceReader::open(&r.path).unwrap();
    let info = reader.info().unwrap();
    assert!(!info.complete && info.finished);
    let stats = ingest_stats(&reader);
    assert_eq!(stats["frames_dropped"], 1);
    assert_eq!(stats["frames_dropped.truncated"], 1);
    assert_eq!(stats["bytes_dropped"] as usize, cut - victim.offset);
    assert_eq!(stats["bytes"] as usize, cut);
    // The records of the frame cut off are counted lost, from its header (issue 27, row 11).
    assert_eq!(
        stats["records_lost_in_transit"] as u64,
        victim.record_count(),
        "the cut frame's records, nothing more"
    );
    assert_eq!(stats["records_cut_off"] as u64, victim.record_count());
    assert_eq!(records_by_type(&stats), records_of(&before));
    assert_eq!(
        warnings(&notices),
        [format!(
            "dropped {} bytes at stream offset {}: the stream ended in the middle of a frame ({BOARD})",
            cut - victim.offset,
            victim.offset
        )]
    );
}

#[test]
fn a_frame_cut_short_is_dropped_and_the_next_one_decodes() {
    let c = capture();
    let victim = c.events_at(0.5);
    let body = victim.body();
    let keep = body.start + body.len() / 2;
    // The first half of the frame, then its delimiter and the rest of the stream.
    let mut bytes = c.bytes[..keep].to_vec();
    bytes.extend_from_slice(&c.bytes[body.end..]);
    let short = &c.bytes[body.start..keep];
    let reason = if is_valid_cobs(short) { "crc" } else { "cobs" };

    let dir = tempfile::tempdir().unwrap();
    let (reports, notices, _) = ingest(&bytes, dir.path());
    assert_eq!(reports.len(), 1);
    let r = &reports[0];
    assert!(r.complete);
    assert_eq!(r.records, c.summary.events - victim.record_count());
    assert_eq!(r.lost_in_transit, victim.record_count());
    let reader = TraceReader::open(&r.path).unwrap();
    let stats = ingest_stats(&reader);
    assert_eq!(stats["frames_dropped"], 1);
    assert_eq!(stats[&format!("frames_dropped.{reason}")], 1);
    assert_eq!(stats["bytes_dropped"] as usize, short.len());
    assert_eq!(stats["bytes"] as usize, bytes.len());
    let w = warnings(&notices);
    assert_eq!(w.len(), 1);
    assert!(
        w[0].starts_with(&format!(
            "dropped {} bytes at stream offset {}: ",
            short.len(),
            victim.offset
        )),
        "{w:?}"
    );
}

fn hello_frame(version: u16, board: &str) -> Vec<u8> {
    let mut out = vec![0u8; 512];
    let n = encode_hello(
        &mut out,
        &Hello {
            wire_version: version,
            agent_version: "9.9.9",
            board,
            soc: "future-soc",
            os: "linux",
            application: "player",
            cpu_count: 2,
            tick_rate_hz: 1_000_000,
            session_id: 99,
            start_ticks: 0,
            token: "",
        },
    )
    .unwrap();
    out.truncate(n);
    out
}

/// The capture's frames but its `Hello`s (the first and the repeated ones), and how many.
fn frames_but_hellos(c: &Capture) -> (Vec<u8>, usize) {
    let kept: Vec<&FrameInfo> = c.frames.iter().filter(|f| f.kind != "Hello").collect();
    let bytes = kept
        .iter()
        .flat_map(|f| c.bytes[f.offset..f.offset + f.len].iter().copied())
        .collect();
    (bytes, kept.len())
}

#[test]
fn a_board_of_another_wire_version_is_refused_with_advice_and_the_next_session_is_read() {
    let c = capture();
    // A newer board's session (its Hello, then frames it would send: the capture's, without its repeated
    // Hellos), then a current board's whole session.
    let mut bytes = hello_frame(99, "new-stb");
    let rest = frames_but_hellos(&c);
    bytes.extend_from_slice(&rest.0);
    bytes.extend_from_slice(&c.bytes);
    let dir = tempfile::tempdir().unwrap();
    let (reports, notices, orphans) = ingest(&bytes, dir.path());

    assert_eq!(
        notices.first(),
        Some(&Notice::VersionRejected {
            source: "fault injection".into(),
            message:
                "board 'new-stb' speaks wire version 99, but this collector accepts only [1, 2, 3]: \
                      upgrade socscope on the host to a release that reads wire version 99"
                    .into()
        })
    );
    let rejected_frames = rest.1;
    assert_eq!(
        orphans as usize,
        1 + rejected_frames,
        "the Hello and every frame after it"
    );
    // The first 20 frames without a session are reported one by one (the rejected Hello among them, in
    // its own notice), as belonging to the rejected session.
    let w = warnings(&notices);
    assert_eq!(w.len(), 19.min(rejected_frames));
    assert!(
        w.iter()
            .all(|m| m
                .ends_with("the session speaks unsupported wire version 99 (rejected session)"))
    );
    // The current board that follows is read in full, its own trace exact.
    assert_eq!(reports.len(), 1);
    let r = &reports[0];
    assert_eq!(r.board, BOARD);
    assert!(r.complete);
    assert_eq!(r.records, c.summary.events);
    support::assert_exact_counts(&r.path, &c.summary);
    let stats = ingest_stats(&TraceReader::open(&r.path).unwrap());
    assert_eq!(
        stats["bytes"] as usize,
        c.bytes.len(),
        "the session's own bytes"
    );
}

#[test]
fn an_old_board_alone_ends_cleanly_without_a_trace() {
    let c = capture();
    let mut bytes = hello_frame(0, "old-stb");
    bytes.extend_from_slice(&frames_but_hellos(&c).0);
    let dir = tempfile::tempdir().unwrap();
    let (reports, notices, _) = ingest(&bytes, dir.path());
    assert!(reports.is_empty());
    let Some(Notice::VersionRejected { message, .. }) = notices.first() else {
        panic!("a version notice first: {notices:#?}")
    };
    assert_eq!(
        message,
        "board 'old-stb' speaks wire version 0, but this collector accepts only [1, 2, 3]: \
         upgrade the agent firmware on 'old-stb' to wire version 3"
    );
    assert!(
        !notices
            .iter()
            .any(|n| matches!(n, Notice::SessionStarted { .. } | Notice::SessionEnded(_))),
        "no session"
    );
    let files: Vec<_> = std::fs::read_dir(dir.path())
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        files
            .iter()
            .all(|f| !f.to_string_lossy().ends_with(".db") || f == "catalog.db"),
        "no trace file: {files:?}"
    );
}
