//! Hostile input bounded at ingest (issue 10): a board announcing itself with a name of 100 000
//! characters full of terminal escapes (row 12) keeps only the first `max_name_chars` characters
//! (counted in `names_truncated`, said in one warning) and the file name stays inside the directory;
//! a compressed frame declaring more than `max_decompressed` bytes (a "zstd bomb", row 10) is dropped
//! before anything is decompressed, and counted.

mod support;

use socscope_collector::session::Ingest;
use socscope_collector::{DEFAULT_MAX_DECOMPRESSED, DEFAULT_MAX_NAME_CHARS, IngestConfig, Notice};
use socscope_tracedb::TraceReader;
use socscope_wire::encode::encode_events;
use socscope_wire::frame::{EVENTS_FLAG_ZSTD, EventsHeader};
use support::{hello, ingest_stats};

#[test]
fn a_compressed_frame_declaring_more_than_the_limit_is_dropped_before_decompression() {
    // Declares 2 MiB of records; what follows is not even zstd: the length alone decides.
    let declared = 2u64 << 20;
    let mut section = Vec::new();
    let mut v = declared;
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            section.push(byte);
            break;
        }
        section.push(byte | 0x80);
    }
    section.extend_from_slice(b"not zstd at all");
    let mut frame = vec![0u8; 256];
    let n = encode_events(
        &mut frame,
        &EventsHeader {
            flags: EVENTS_FLAG_ZSTD,
            cpu: 0,
            first_seq: 0,
            base_ticks: 0,
            count: 2_000_000,
        },
        &section,
    )
    .unwrap();
    frame.truncate(n);
    let mut bytes = hello("bomb", "player", 1);
    bytes.extend_from_slice(&frame);
    let dir = tempfile::tempdir().unwrap();
    let mut ingest = Ingest::new(IngestConfig::new(dir.path()), "bomb");
    ingest.feed(&bytes).unwrap();
    let (reports, notices) = ingest.finish().unwrap();
    let reader = TraceReader::open(&reports[0].path).unwrap();
    let stats = ingest_stats(&reader);
    assert_eq!(stats["frames_dropped.decompress"], 1);
    assert_eq!(stats["records"], 0);
    let limit = format!("declared length {declared} exceeds {DEFAULT_MAX_DECOMPRESSED}");
    assert!(
        notices
            .iter()
            .any(|n| matches!(n, Notice::FrameDropped { message, .. } if message.contains(&limit))),
        "{notices:#?}"
    );
}

#[test]
fn a_huge_hostile_board_name_is_cut_and_counted() {
    let board = "\u{1b}]0;pwned\u{7}\r\n".repeat(10_000);
    assert!(board.chars().count() >= 100_000);
    let frame = hello(&board, "player", 1);
    let dir = tempfile::tempdir().unwrap();
    let mut ingest = Ingest::new(IngestConfig::new(dir.path()), "hostile");
    ingest.feed(&frame).unwrap();
    let (reports, notices) = ingest.finish().unwrap();
    assert_eq!(reports.len(), 1);
    let r = &reports[0];
    assert_eq!(r.board.chars().count(), DEFAULT_MAX_NAME_CHARS);
    assert!(r.path.starts_with(dir.path()));
    let reader = TraceReader::open(&r.path).unwrap();
    assert_eq!(
        reader.info().unwrap().meta.board.chars().count(),
        DEFAULT_MAX_NAME_CHARS
    );
    assert_eq!(ingest_stats(&reader)["names_truncated"], 1);
    let warnings = dropped_messages(&notices);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("board name has 120000 characters"),
        "{warnings:?}"
    );
}

/// A peer that sends no board's stream, only garbage: the first drops are said one by one, then the
/// whole stream once, with every byte the decoder dropped (the tail of a run without a delimiter
/// included), so nothing a source sent is dropped without being said.
#[test]
fn a_stream_without_any_session_is_said_whole() {
    let dir = tempfile::tempdir().unwrap();
    // 10 MiB without a delimiter, then a delimiter: one oversized drop whose tail the decoder skips.
    let mut ingest = Ingest::new(IngestConfig::new(dir.path()), "flood");
    let mut bytes = vec![0x01u8; 10 << 20];
    bytes.push(0);
    for chunk in bytes.chunks(64 << 10) {
        ingest.feed(chunk).unwrap();
    }
    let (reports, notices) = ingest.finish().unwrap();
    assert!(reports.is_empty());
    let messages = dropped_messages(&notices);
    let total = format!(
        "no session on this stream: {} bytes received, {} of them dropped in 1 frames or fragments",
        bytes.len(),
        bytes.len() - 1
    );
    assert!(messages.last().unwrap().contains(&total), "{messages:#?}");

    // Many damaged frames: 20 said, then their total.
    let mut ingest = Ingest::new(IngestConfig::new(dir.path()), "garbage");
    let garbage: Vec<u8> = (0..300u32)
        .flat_map(|i| [0x05, 1, 2, (i % 200) as u8 + 1, 0])
        .collect();
    ingest.feed(&garbage).unwrap();
    let (reports, notices) = ingest.finish().unwrap();
    assert!(reports.is_empty());
    let messages = dropped_messages(&notices);
    assert_eq!(messages.len(), 21, "{messages:#?}");
    assert!(
        messages[20].contains("in 300 frames or fragments, the first 20 said above"),
        "{messages:#?}"
    );
}

/// The messages of the `FrameDropped` notices, in order.
fn dropped_messages(notices: &[Notice]) -> Vec<&String> {
    notices
        .iter()
        .filter_map(|n| match n {
            Notice::FrameDropped { message, .. } => Some(message),
            _ => None,
        })
        .collect()
}
