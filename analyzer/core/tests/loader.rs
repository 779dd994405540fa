//! The pipelined loader on real trace files: every event once, chunks sized by local density, partial
//! snapshots, cancellation.

use socscope_analysis::loader::{self, Consumer, LoadRequest};
use socscope_tracedb::{
    Event, EventCategory, EventType, Filter, Producer, ProducerKind, StoredEvent, TimeRange,
    TraceHeader, TraceReader, TraceWriter,
};

#[derive(Default)]
struct Collect {
    ids: Vec<i64>,
    chunks_seen: usize,
}

impl Consumer for Collect {
    type Snapshot = usize;
    fn consume(&mut self, events: &[StoredEvent]) {
        self.chunks_seen += 1;
        self.ids.extend(events.iter().map(|e| e.id));
    }
    fn snapshot(&self) -> usize {
        self.ids.len()
    }
}

/// A bursty trace: 1 event per ms for 10 s, with a 1 s burst of 200 events per ms at t = 5 s, plus a state
/// that spans most of the trace.
fn bursty(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("bursty.db");
    let mut w = TraceWriter::create(&path, &TraceHeader::default()).unwrap();
    w.add_event_type(&EventType {
        id: 1,
        name: "tick".into(),
        category: EventCategory::Punctual,
        params: vec![],
    })
    .unwrap();
    w.add_event_type(&EventType {
        id: 2,
        name: "busy".into(),
        category: EventCategory::State,
        params: vec![],
    })
    .unwrap();
    w.add_producer(&Producer {
        id: 1,
        parent: None,
        kind: ProducerKind::Thread,
        local_id: 1,
        name: "t".into(),
    })
    .unwrap();
    let ms = 1_000_000i64;
    for i in 0..10_000i64 {
        let t = i * ms;
        let n = if (5_000..6_000).contains(&i) { 200 } else { 1 };
        for k in 0..n {
            w.push(&Event::punctual(t + k * 1000, 1, 1, Some(0)))
                .unwrap();
        }
    }
    w.push(&Event::state(100 * ms, 9_900 * ms, 0, 2, 1, Some(0)))
        .unwrap();
    w.finish(true).unwrap();
    path
}

#[test]
fn every_event_once_in_density_sized_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let path = bursty(dir.path());
    let reader = TraceReader::open(&path).unwrap();
    let ms = 1_000_000i64;
    let range = TimeRange::new(2_000 * ms, 8_000 * ms);
    let expected: Vec<i64> = reader
        .events_overlapping(range, &Filter::all())
        .unwrap()
        .map(|e| e.unwrap().id)
        .collect();
    // 5 000 quiet milliseconds + 200 000 burst events + the long state.
    assert_eq!(expected.len(), 5_000 + 200_000 + 1);

    let chunks = loader::plan_chunks(&reader, range, &Filter::all(), 20_000);
    assert_eq!(chunks.first().unwrap().start, range.start);
    assert_eq!(chunks.last().unwrap().end, range.end);
    for w in chunks.windows(2) {
        assert_eq!(w[0].end, w[1].start, "chunks tile the interval");
    }
    // Even chunks: every chunk but the last holds about 20 000 events (local density), so the burst is
    // cut into ~10 short chunks while the quiet part is one or two long ones.
    let counts: Vec<u64> = chunks
        .iter()
        .map(|c| reader.count(*c, &Filter::all()).unwrap())
        .collect();
    for c in &counts[..counts.len() - 1] {
        assert!(
            (15_000..=25_000).contains(c),
            "uneven chunk sizes: {counts:?}"
        );
    }
    assert!(
        (10..=13).contains(&chunks.len()),
        "{} chunks: {counts:?}",
        chunks.len()
    );

    let handle = loader::spawn(
        LoadRequest {
            trace: path.clone(),
            range,
            filter: Filter::all(),
            chunk_events: 20_000,
        },
        Collect::default(),
    );
    let (snapshot, progress) = handle.wait();
    assert!(
        progress.finished && !progress.cancelled && progress.error.is_none(),
        "{progress:?}"
    );
    assert_eq!(snapshot, Some(expected.len()));
    assert_eq!(progress.events, expected.len() as u64);
    assert_eq!(progress.chunks, chunks.len() as u64);
    assert!(progress.first_result_ms.is_some());
    assert_eq!(progress.fraction(), 1.0);
}

#[test]
fn delivered_ids_are_exactly_the_overlapping_events() {
    let dir = tempfile::tempdir().unwrap();
    let path = bursty(dir.path());
    struct Ids(Vec<i64>);
    impl Consumer for Ids {
        type Snapshot = Vec<i64>;
        fn consume(&mut self, events: &[StoredEvent]) {
            self.0.extend(events.iter().map(|e| e.id));
        }
        fn snapshot(&self) -> Vec<i64> {
            self.0.clone()
        }
    }
    let ms = 1_000_000i64;
    let range = TimeRange::new(4_990 * ms, 5_020 * ms);
    let reader = TraceReader::open(&path).unwrap();
    let mut expected: Vec<i64> = reader
        .events_overlapping(range, &Filter::all())
        .unwrap()
        .map(|e| e.unwrap().id)
        .collect();
    let (got, _) = loader::spawn(
        LoadRequest {
            trace: path,
            range,
            filter: Filter::all(),
            chunk_events: 1_000,
        },
        Ids(Vec::new()),
    )
    .wait();
    let mut got = got.unwrap();
    assert_eq!(got.len(), expected.len());
    got.sort_unstable();
    expected.sort_unstable();
    assert_eq!(got, expected, "each event exactly once");
}

#[test]
fn cancel_stops_early_and_keeps_the_partial_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let path = bursty(dir.path());
    struct Slow(u64);
    impl Consumer for Slow {
        type Snapshot = u64;
        fn consume(&mut self, events: &[StoredEvent]) {
            self.0 += events.len() as u64;
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        fn snapshot(&self) -> u64 {
            self.0
        }
    }
    let ms = 1_000_000i64;
    let handle = loader::spawn(
        LoadRequest {
            trace: path,
            range: TimeRange::new(0, 10_000 * ms),
            filter: Filter::all(),
            chunk_events: 5_000,
        },
        Slow(0),
    );
    while handle.snapshot().is_none() {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    handle.cancel();
    let (snapshot, progress) = handle.wait();
    assert!(progress.finished && progress.cancelled);
    let n = snapshot.unwrap();
    assert!(n > 0 && n < 210_001, "partial: {n}");
    assert!(progress.fraction() < 1.0);
}
