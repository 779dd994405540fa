//! A board whose link drops before `Bye` reconnects and announces the same session again (the agent's
//! `restart_session`: `Hello` and the dictionary repeated, sequence numbers going on): the collector
//! stores the rest in a second trace whose records are neither lost nor duplicates, because the
//! connections share where the cut-off session stopped (issue 10, resynchronisation after a reconnect).
//! Real captures, the real ingest, two connections' worth of bytes.

mod support;

use socscope_collector::session::Ingest;
use socscope_collector::{IngestConfig, SessionReport};
use socscope_sim::SimConfig;
use socscope_tracedb::TraceReader;
use support::{FrameInfo, capture_file, ingest_stats, inventory};

/// The two halves of a capture cut after frame `cut`: the first as sent before the link dropped, the
/// second as the board sends it after reconnecting (its `Hello` and dictionary first).
fn halves(bytes: &[u8], frames: &[FrameInfo], cut: usize) -> (Vec<u8>, Vec<u8>) {
    let first = bytes[..frames[cut].offset + frames[cut].len].to_vec();
    let mut second = Vec::new();
    for f in frames
        .iter()
        .filter(|f| f.kind == "Hello" || f.kind == "Dictionary")
    {
        if f.offset < frames[cut].offset {
            second.extend_from_slice(&bytes[f.offset..f.offset + f.len]);
        }
    }
    second.extend_from_slice(&bytes[frames[cut].offset + frames[cut].len..]);
    (first, second)
}

fn ingest(config: &IngestConfig, bytes: &[u8], source: &str) -> SessionReport {
    let mut ingest = Ingest::new(config.clone(), source);
    for slice in bytes.chunks(4093) {
        ingest.feed(slice).unwrap();
    }
    let (mut reports, _) = ingest.finish().unwrap();
    assert_eq!(reports.len(), 1);
    reports.remove(0)
}

#[test]
fn a_reconnected_session_goes_on_without_loss() {
    let dir = tempfile::tempdir().unwrap();
    let wire = dir.path().join("board.wire");
    let summary = capture_file(
        &SimConfig {
            seed: 5,
            duration_s: 1.0,
            board: "reconnect-stb",
            ..SimConfig::default()
        },
        &wire,
    );
    let bytes = std::fs::read(&wire).unwrap();
    let frames = inventory(&bytes);
    let events: Vec<usize> = (0..frames.len())
        .filter(|&i| frames[i].kind == "Events")
        .collect();
    let cut = events[events.len() / 2];
    let (first, second) = halves(&bytes, &frames, cut);

    // One collector: the connections share its configuration.
    let config = IngestConfig::new(dir.path().join("traces"));
    let a = ingest(&config, &first, "tcp first");
    let b = ingest(&config, &second, "tcp second");
    assert!(!a.complete, "cut off before Bye");
    assert!(b.complete);
    assert_eq!(a.lost_in_transit, 0);
    assert_eq!(
        b.lost_in_transit, 0,
        "the second part continues the sequences"
    );
    assert_eq!(a.records + b.records, summary.events);
    let stats = ingest_stats(&TraceReader::open(&b.path).unwrap());
    assert_eq!(stats["resumed_session"], 1);
    assert_eq!(stats["duplicate_records"], 0);
    assert_eq!(
        ingest_stats(&TraceReader::open(&a.path).unwrap())["resumed_session"],
        0
    );

    // Two collectors that know nothing of each other: the second part's sequences do not start at 0,
    // and the records before them are counted as lost — what the shared table avoids.
    let other = IngestConfig::new(dir.path().join("elsewhere"));
    let c = ingest(&other, &second, "tcp elsewhere");
    assert!(c.lost_in_transit > 0);
}
