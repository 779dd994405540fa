//! Per-stream zstd dictionaries (schema version 3): a stream whose closed chunks gave enough
//! samples gets one, its later chunks use it, and every read answers exactly what the same
//! trace written without dictionaries answers; a missing or damaged dictionary is an error
//! naming the chunk, never a panic.

mod common;

use common::*;
use socscope_tracedb::*;

/// The varint at `*p` of `blob` (moving past it).
fn varint(blob: &[u8], p: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let b = blob[*p];
        *p += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return v;
        }
        shift += 7;
    }
}

/// `(format, dictionary id)` of a stored chunk blob (format, count, category, CPU, dictionary).
fn format_and_dict(blob: &[u8]) -> (u8, u64) {
    let mut p = 1;
    let _n = varint(blob, &mut p);
    p += 1;
    let _cpu = varint(blob, &mut p);
    (blob[0], varint(blob, &mut p))
}

fn chunk_dicts(path: &std::path::Path) -> Vec<(i64, u8, u64)> {
    let c = rusqlite::Connection::open(path).unwrap();
    let mut st = c.prepare("SELECT id, data FROM chunk ORDER BY id").unwrap();
    st.query_map([], |r| {
        let blob: Vec<u8> = r.get(1)?;
        let (f, d) = format_and_dict(&blob);
        Ok((r.get(0)?, f, d))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

#[test]
fn busy_streams_get_a_dictionary_and_every_read_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let events = mixed_events(200_000, 9);
    let with = dir.path().join("with.db");
    let without = dir.path().join("without.db");
    // Both written with the same commits (chunk ids follow them); a reader opened before any
    // dictionary exists follows the trace as it grows.
    let mut early = None;
    // No commits by wall time: they would place chunk ids differently in the two traces.
    let steady = WriterConfig {
        commit_interval: std::time::Duration::from_secs(3_600),
        train_in_background: false,
        ..WriterConfig::default()
    };
    let steady_plain = WriterConfig {
        dictionaries: false,
        ..steady.clone()
    };
    for (path, config) in [(&with, steady), (&without, steady_plain)] {
        let mut w = new_writer(path, config);
        for e in &events[..1_000] {
            w.push(e).unwrap();
        }
        w.commit().unwrap();
        if early.is_none() {
            let r = TraceReader::open(path).unwrap();
            assert_eq!(r.info().unwrap().event_count, 1_000);
            early = Some(r);
        }
        for e in &events[1_000..] {
            w.push(e).unwrap();
        }
        w.finish(true).unwrap();
    }
    let early = early.unwrap();

    let chunks = chunk_dicts(&with);
    assert!(chunks.iter().all(|c| c.1 == CHUNK_FORMAT));
    let with_dict = chunks.iter().filter(|c| c.2 != 0).count();
    assert!(
        with_dict * 3 > chunks.len(),
        "{with_dict} of {} chunks use a dictionary",
        chunks.len()
    );
    assert!(chunk_dicts(&without).iter().all(|c| c.2 == 0));
    let a = TraceReader::open(&with).unwrap();
    let b = TraceReader::open(&without).unwrap();
    let dicts: i64 = a
        .connection()
        .query_row("SELECT count(*) FROM chunk_dict", [], |r| r.get(0))
        .unwrap();
    assert!(dicts >= 2, "{dicts} dictionaries");

    let info = b.info().unwrap();
    let all = TimeRange::new(info.t_min, info.t_max + 1);
    let ids = |r: &TraceReader, range: TimeRange| -> Vec<(i64, Event)> {
        r.events(range, &Filter::all())
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (e.id, e.event)
            })
            .collect()
    };
    // The first difference only (the lists are long).
    let same = |x: Vec<(i64, Event)>, y: &[(i64, Event)], what: &str| {
        assert_eq!(x.len(), y.len(), "{what}: lengths");
        if let Some(i) = (0..x.len()).find(|&i| x[i] != y[i]) {
            panic!("{what}: event {i} differs: {:?} against {:?}", x[i], y[i]);
        }
    };
    let everything = ids(&b, all);
    assert_eq!(everything.len(), events.len());
    same(ids(&a, all), &everything, "same events under the same ids");
    same(ids(&early, all), &everything, "the early reader");
    let mut rng = bench::SplitMix::new(4);
    let span = (info.t_max - info.t_min) as u64;
    let mut ranges = Vec::new();
    for _ in 0..60 {
        let start = info.t_min + rng.below(span) as i64;
        let range = TimeRange::new(start, start + 1 + rng.below(span / 20) as i64);
        ranges.push(range);
        same(ids(&a, range), &ids(&b, range), &format!("{range:?}"));
        let overlapping = |r: &TraceReader| -> Vec<i64> {
            r.events_overlapping(range, &Filter::all())
                .unwrap()
                .map(|e| e.unwrap().id)
                .collect()
        };
        assert_eq!(overlapping(&a), overlapping(&b), "{range:?}");
        assert_eq!(
            a.count(range, &Filter::all()).unwrap(),
            b.count(range, &Filter::all()).unwrap()
        );
    }
    assert_eq!(
        a.counts_in_ranges(&ranges, &Filter::all()).unwrap(),
        b.counts_in_ranges(&ranges, &Filter::all()).unwrap()
    );
}

/// Trained in the background, dictionaries still come (the writer takes them as they are
/// ready), and the trace reads back every event.
#[test]
fn dictionaries_trained_in_the_background_are_taken_up() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let events = mixed_events(200_000, 6);
    let mut w = new_writer(&path, WriterConfig::default());
    for (i, e) in events.iter().enumerate() {
        w.push(e).unwrap();
        if i == 100_000 {
            // Time for the first training to end, whatever the machine's load.
            std::thread::sleep(std::time::Duration::from_secs(2));
        }
    }
    w.finish(true).unwrap();
    assert!(chunk_dicts(&path).iter().any(|c| c.2 != 0));
    let r = TraceReader::open(&path).unwrap();
    assert_eq!(
        sorted(read_all(&r, TimeRange::all(), &Filter::all())),
        sorted(events)
    );
}

#[test]
fn a_missing_or_damaged_dictionary_is_an_error_naming_the_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let config = WriterConfig {
        train_in_background: false,
        ..WriterConfig::default()
    };
    write(&path, &mixed_events(200_000, 5), config);
    let with_dict: Vec<i64> = chunk_dicts(&path)
        .into_iter()
        .filter(|c| c.2 != 0)
        .map(|c| c.0)
        .collect();
    assert!(!with_dict.is_empty(), "a chunk with a dictionary");
    let read_all_events = |p: &std::path::Path| -> Vec<StoreError> {
        let r = TraceReader::open(p).unwrap();
        r.events(TimeRange::all(), &Filter::all())
            .unwrap()
            .filter_map(|e| e.err())
            .collect()
    };
    for (name, change) in [
        (
            "damaged",
            // The dictionary magic with garbage after it: zstd refuses the tables.
            "UPDATE chunk_dict SET data = x'37a430ec0000000001020304ffffffffffffffff'",
        ),
        ("missing", "DELETE FROM chunk_dict"),
    ] {
        let p = dir.path().join(format!("{name}.db"));
        std::fs::copy(&path, &p).unwrap();
        rusqlite::Connection::open(&p)
            .unwrap()
            .execute(change, [])
            .unwrap();
        let errors = read_all_events(&p);
        assert_eq!(
            errors.len(),
            1,
            "{name}: the iterator stops at the first error"
        );
        match &errors[0] {
            StoreError::CorruptChunk {
                chunk_id, detail, ..
            } => {
                assert!(with_dict.contains(chunk_id), "{name}: chunk {chunk_id}");
                assert!(detail.contains("dictionary"), "{name}: {detail}");
            }
            other => panic!("{name}: {other}"),
        }
    }
}

/// The dictionaries (stream id → data) stored in a trace.
fn stored_dictionaries(path: &std::path::Path) -> Vec<(i64, Vec<u8>)> {
    let c = rusqlite::Connection::open(path).unwrap();
    let mut st = c
        .prepare("SELECT stream, data FROM chunk_dict ORDER BY stream")
        .unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// A writer that shares a shelf puts the dictionaries it trains on it; a later writer of the same
/// source takes them from its first chunks on (too few events to train any of its own), stores them
/// in its own file, and reads back every event; without the shelf the same events get none.
#[test]
fn dictionaries_shared_between_writers_of_one_source() {
    let dir = tempfile::tempdir().unwrap();
    let inline = WriterConfig {
        train_in_background: false,
        ..WriterConfig::default()
    };
    let shelf = SharedDictionaries::new();
    let first = dir.path().join("first.db");
    let mut w = new_writer(&first, inline.clone());
    w.share_dictionaries(shelf.clone());
    write_all(w, &mixed_events(200_000, 9));
    let trained = stored_dictionaries(&first);
    assert!(trained.len() >= 2, "{} dictionaries", trained.len());
    assert_eq!(shelf.len(), trained.len(), "every trained one is shared");

    // A short piece of the same kind of stream: not enough samples to train.
    let piece = mixed_events(12_000, 10);
    let alone = dir.path().join("alone.db");
    write(&alone, &piece, inline.clone());
    assert!(stored_dictionaries(&alone).is_empty(), "too short to train");
    assert!(chunk_dicts(&alone).iter().all(|c| c.2 == 0));

    let second = dir.path().join("second.db");
    let mut w = new_writer(&second, inline.clone());
    w.share_dictionaries(shelf.clone());
    write_all(w, &piece);
    let taken = stored_dictionaries(&second);
    assert!(!taken.is_empty(), "the shelf's dictionaries are taken");
    for (stream, data) in &taken {
        let theirs = trained.iter().find(|(s, _)| s == stream);
        assert_eq!(
            theirs.map(|t| &t.1),
            Some(data),
            "stream {stream}: the first writer's dictionary"
        );
    }
    assert_eq!(shelf.len(), trained.len(), "nothing new trained");
    // Every chunk of a stream the shelf had a dictionary for uses it, from the stream's first chunk;
    // the others (streams too sparse to have trained one) use none.
    let c = rusqlite::Connection::open(&second).unwrap();
    let mut st = c
        .prepare("SELECT stream, data FROM chunk ORDER BY id")
        .unwrap();
    let chunks: Vec<(i64, u64)> = st
        .query_map([], |r| {
            let blob: Vec<u8> = r.get(1)?;
            Ok((r.get(0)?, format_and_dict(&blob).1))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(chunks.iter().any(|c| c.1 != 0), "{chunks:?}");
    for (stream, dict) in &chunks {
        let shared = trained.iter().any(|(s, _)| s == stream);
        assert_eq!(*dict != 0, shared, "stream {stream}: {chunks:?}");
    }
    let r = TraceReader::open(&second).unwrap();
    assert_eq!(
        sorted(read_all(&r, TimeRange::all(), &Filter::all())),
        sorted(piece.clone())
    );

    // Dictionaries turned off: the shelf is not used.
    let off = dir.path().join("off.db");
    let mut w = new_writer(
        &off,
        WriterConfig {
            dictionaries: false,
            ..inline
        },
    );
    w.share_dictionaries(shelf);
    write_all(w, &piece);
    assert!(stored_dictionaries(&off).is_empty());
}

fn write_all(mut w: TraceWriter, events: &[Event]) {
    for e in events {
        w.push(e).unwrap();
    }
    w.finish(true).unwrap();
}
