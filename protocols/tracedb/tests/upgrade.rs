//! Trace files of schema version 1 (a capture written by the first release, kept in
//! `tests/data/v1-sim.db`) are refused with both versions and the way to convert them, and
//! `upgrade_trace` converts them in place with every event kept. Version 2 files (a capture
//! written by the release before chunk dictionaries, `tests/data/v2-sim.db`) are read as they
//! are, and upgraded by adding the dictionary table.

use socscope_tracedb::*;

fn copy_of(name: &str, dir: &std::path::Path) -> std::path::PathBuf {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    let dst = dir.join("old.db");
    std::fs::copy(src, &dst).unwrap();
    dst
}

fn v1_copy(dir: &std::path::Path) -> std::path::PathBuf {
    copy_of("v1-sim.db", dir)
}

/// Every event of a trace, overlapping its whole span.
fn all_events(r: &TraceReader) -> Vec<StoredEvent> {
    let info = r.info().unwrap();
    r.events_overlapping(TimeRange::new(info.t_min, info.t_max + 1), &Filter::all())
        .unwrap()
        .map(|e| e.unwrap())
        .collect()
}

/// Everything an upgrade may change, as text: the trace's tables and every chunk and summary row
/// byte for byte.
fn dump(path: &std::path::Path) -> String {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut out = String::new();
    for q in [
        "SELECT * FROM trace_info",
        "SELECT * FROM event_type ORDER BY id",
        "SELECT * FROM event_param_type ORDER BY id",
        "SELECT * FROM producer ORDER BY id",
        "SELECT * FROM stream ORDER BY id",
        "SELECT * FROM ingest_stat ORDER BY name",
        "SELECT id, stream, t_min, t_max, end_max, count, types, producers, hex(data) FROM chunk ORDER BY id",
        "SELECT level, bucket, hex(data) FROM summary ORDER BY level, bucket",
    ] {
        let mut st = conn.prepare(q).unwrap();
        let n = st.column_count();
        let mut rows = st.query([]).unwrap();
        out.push_str(q);
        out.push('\n');
        while let Some(r) = rows.next().unwrap() {
            for i in 0..n {
                let v: rusqlite::types::Value = r.get(i).unwrap();
                out.push_str(&format!("{v:?}|"));
            }
            out.push('\n');
        }
    }
    out.push_str(&format!(
        "user_version {}",
        conn.pragma_query_value(None, "user_version", |r| r.get::<_, i64>(0))
            .unwrap()
    ));
    out
}

/// The CPU-track slices a trace's `running` states call for, worked out from SCHEMA.md's
/// definition (not from the code that derives them): per `running` state of thread producer P on
/// CPU c that lasts, one state of `cpu{c}` over the same time, `cpu_idle` for the idle task
/// (local id 0), else `on_cpu` with P and P's local id.
fn expected_slices(events: &[Event], producers: &[Producer]) -> Vec<Event> {
    let mut want: Vec<Event> = events
        .iter()
        .filter(|e| e.type_id == RUNNING_TYPE && e.end() > e.ts)
        .map(|e| {
            let cpu = e.cpu.unwrap();
            let track = producers
                .iter()
                .find(|p| p.kind == ProducerKind::Cpu && p.local_id == i64::from(cpu))
                .unwrap()
                .id;
            let tid = producers
                .iter()
                .find(|p| p.id == e.producer)
                .unwrap()
                .local_id as u64;
            let slice = Event::state(e.ts, e.end(), 0, ON_CPU_TYPE, track, Some(cpu));
            if tid == 0 {
                Event {
                    type_id: CPU_IDLE_TYPE,
                    ..slice
                }
            } else {
                slice.with_params(vec![
                    ParamValue::Unsigned(u64::from(e.producer)),
                    ParamValue::Unsigned(tid),
                ])
            }
        })
        .collect();
    want.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    want
}

fn sorted(mut events: Vec<Event>) -> Vec<Event> {
    events.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    events
}

#[test]
fn a_version_2_trace_is_read_as_it_is_and_upgraded_with_its_cpu_tracks_every_event_keeping_its_id()
{
    let dir = tempfile::tempdir().unwrap();
    let path = copy_of("v2-sim.db", dir.path());
    let (before, producers) = {
        let r = TraceReader::open(&path).unwrap();
        assert_eq!(r.info().unwrap().event_count, 1302);
        (all_events(&r), r.producers().unwrap())
    };
    assert_eq!(before.len(), 1302);
    let olds: Vec<Event> = before.iter().map(|e| e.event.clone()).collect();
    assert!(
        !olds
            .iter()
            .any(|e| [ON_CPU_TYPE, CPU_IDLE_TYPE].contains(&e.type_id)),
        "recorded before the CPU tracks"
    );
    let want = expected_slices(&olds, &producers);
    assert!(want.len() > 300, "{} running stretches", want.len());
    assert!(want.iter().any(|e| e.type_id == CPU_IDLE_TYPE));
    let report = upgrade_trace(&path).unwrap();
    assert_eq!(
        (report.from_version, report.to_version),
        (2, SCHEMA_VERSION)
    );
    assert_eq!(
        report.cpu_tracks,
        CpuTracks::Derived {
            slices: want.len() as u64,
            cpus: 2
        }
    );
    assert_eq!(report.events, 1302 + want.len() as u64);
    assert!(report.summary_rows > 0, "the summary counts the slices");
    let r = TraceReader::open(&path).unwrap();
    assert_eq!(r.info().unwrap().event_count, report.events);
    let after = all_events(&r);
    assert_eq!(after.len() as u64, report.events);
    // Every event of before under its id (also read one by one, as a saved result names them).
    let by_id: std::collections::HashMap<EventId, &Event> =
        after.iter().map(|e| (e.id, &e.event)).collect();
    for e in &before {
        assert_eq!(by_id.get(&e.id), Some(&&e.event), "event {}", e.id);
        assert_eq!(
            r.event_by_id(e.id).unwrap().as_ref().map(|s| &s.event),
            Some(&e.event)
        );
    }
    let max_old = before.iter().map(|e| e.id).max().unwrap();
    let new: Vec<&StoredEvent> = after
        .iter()
        .filter(|e| !before.iter().any(|b| b.id == e.id))
        .collect();
    assert!(
        new.iter().all(|e| e.id > max_old),
        "new events come after every old one"
    );
    assert_eq!(
        sorted(new.iter().map(|e| e.event.clone()).collect()),
        want,
        "one slice per running stretch"
    );
    // Streams, types and the statistic agree with the events.
    let streams: i64 = r.streams().unwrap().iter().map(|s| s.event_count).sum();
    assert_eq!(streams as u64, report.events);
    let types = r.event_types().unwrap();
    assert!(
        types
            .iter()
            .any(|t| t.id == ON_CPU_TYPE && t.params.len() == 2)
    );
    assert!(types.iter().any(|t| t.id == CPU_IDLE_TYPE));
    assert!(
        r.ingest_stats()
            .unwrap()
            .iter()
            .any(|s| s.name == DERIVED_CPU_SLICES_STAT && s.value == want.len() as i64)
    );
    let dicts: i64 = r
        .connection()
        .query_row("SELECT count(*) FROM chunk_dict", [], |row| row.get(0))
        .unwrap();
    assert_eq!(dicts, 0);
}

#[test]
fn a_second_upgrade_changes_nothing_and_says_the_tracks_are_there() {
    let dir = tempfile::tempdir().unwrap();
    let path = copy_of("v2-sim.db", dir.path());
    let first = upgrade_trace(&path).unwrap();
    let dumped = dump(&path);
    let again = upgrade_trace(&path).unwrap();
    assert_eq!(
        (
            again.from_version,
            again.cpu_tracks,
            again.events,
            again.summary_rows
        ),
        (SCHEMA_VERSION, CpuTracks::Present, first.events, 0)
    );
    assert_eq!(dump(&path), dumped, "nothing written");
}

#[test]
fn an_upgrade_that_fails_midway_leaves_the_trace_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let path = copy_of("v2-sim.db", dir.path());
    // The failure comes once the slices' chunks are stored and the summary deleted, as the new
    // summary is written: the last step before the counts.
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TRIGGER injected_failure BEFORE INSERT ON summary
             BEGIN SELECT RAISE(ABORT, 'injected failure'); END;",
        )
        .unwrap();
    }
    let before = dump(&path);
    let err = upgrade_trace(&path).unwrap_err();
    assert!(err.to_string().contains("injected failure"), "{err}");
    assert_eq!(dump(&path), before, "rolled back whole");
    let r = TraceReader::open(&path).unwrap();
    assert_eq!(all_events(&r).len(), 1302);
    drop(r);
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("DROP TRIGGER injected_failure").unwrap();
    }
    // And the next upgrade does it all.
    let report = upgrade_trace(&path).unwrap();
    assert!(matches!(report.cpu_tracks, CpuTracks::Derived { slices, .. } if slices > 300));
}

#[test]
fn a_trace_without_context_switches_has_nothing_to_derive_and_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("marks.db");
    let mut w = TraceWriter::create(&path, &TraceHeader::default()).unwrap();
    w.add_event_type(&EventType {
        id: 9,
        name: "marker".into(),
        category: EventCategory::Punctual,
        params: Vec::new(),
    })
    .unwrap();
    w.add_producer(&Producer {
        id: 1,
        parent: None,
        kind: ProducerKind::Cpu,
        local_id: 0,
        name: "cpu0".into(),
    })
    .unwrap();
    for t in 0..100 {
        w.push(&Event::punctual(t * 1000, 9, 1, Some(0))).unwrap();
    }
    w.finish(true).unwrap();
    let before = dump(&path);
    let report = upgrade_trace(&path).unwrap();
    assert_eq!(
        (report.cpu_tracks, report.events),
        (CpuTracks::NoSchedule, 100)
    );
    assert_eq!(dump(&path), before);
}

#[test]
fn a_version_1_trace_is_refused_with_the_way_to_convert_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = v1_copy(dir.path());
    let err = TraceReader::open(&path).unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(
            err,
            StoreError::SchemaVersion {
                found: 1,
                expected: SCHEMA_VERSION,
                ..
            }
        ),
        "{text}"
    );
    assert!(
        text.contains("version 1") && text.contains(&format!("version {SCHEMA_VERSION}")),
        "{text}"
    );
    assert!(text.contains("socscope upgrade"), "{text}");
}

#[test]
fn upgrading_keeps_every_event_and_rebuilds_an_exact_summary() {
    let dir = tempfile::tempdir().unwrap();
    let path = v1_copy(dir.path());
    let report = upgrade_trace(&path).unwrap();
    assert_eq!(
        (report.from_version, report.to_version),
        (1, SCHEMA_VERSION)
    );
    // The first release wrote no CPU tracks: one slice per running stretch is added.
    let CpuTracks::Derived { slices, cpus: 2 } = report.cpu_tracks else {
        panic!("{:?}", report.cpu_tracks)
    };
    assert!((300..=343).contains(&slices), "{slices}");
    assert_eq!(report.events, 1285 + slices);
    assert!(report.summary_rows > 0);
    // Again: nothing to do.
    let again = upgrade_trace(&path).unwrap();
    assert_eq!(
        (
            again.from_version,
            again.events,
            again.summary_rows,
            again.cpu_tracks
        ),
        (SCHEMA_VERSION, 1285 + slices, 0, CpuTracks::Present)
    );
    let r = TraceReader::open(&path).unwrap();
    let info = r.info().unwrap();
    assert_eq!(info.event_count, 1285 + slices);
    let all = TimeRange::new(info.t_min, info.t_max + 1);
    let events: Vec<Event> = r
        .events_overlapping(all, &Filter::all())
        .unwrap()
        .map(|e| e.unwrap().event)
        .collect();
    assert_eq!(events.len() as u64, 1285 + slices);
    // Counts per type as the first release stored them (`socscope info` before the upgrade).
    let count = |ty: u32| events.iter().filter(|e| e.type_id == ty).count();
    assert_eq!(
        (count(100001), count(2), count(6), count(100002)),
        (343, 197, 172, 169)
    );
    assert_eq!((count(ON_CPU_TYPE) + count(CPU_IDLE_TYPE)) as u64, slices);
    // The rebuilt summary equals the events, at the finest width and coarser.
    let (base, _) = r.summary_levels();
    for shift in [base, base + 2] {
        let width = 1i64 << shift;
        let got = r
            .summary(all, Resolution::BucketWidth(width), &Filter::all())
            .unwrap();
        for b in &got.buckets {
            let mut want: std::collections::BTreeMap<(u32, u32), (u64, i64)> = Default::default();
            for e in &events {
                let c = want.entry((e.producer, e.type_id)).or_default();
                c.0 += u64::from(b.range.contains(e.ts));
                if e.category() == EventCategory::State {
                    c.1 += b.range.overlap(e.ts, e.end());
                }
            }
            want.retain(|_, v| *v != (0, 0));
            let got: std::collections::BTreeMap<(u32, u32), (u64, i64)> = b
                .cells
                .iter()
                .map(|c| ((c.producer, c.type_id), (c.count, c.state_ns)))
                .collect();
            assert_eq!(got, want, "bucket {:?}", b.range);
        }
    }
}

#[test]
fn upgrading_what_is_not_a_trace_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none.db");
    assert!(
        upgrade_trace(&missing)
            .unwrap_err()
            .to_string()
            .contains("none.db")
    );
    let junk = dir.path().join("junk.db");
    std::fs::write(&junk, b"not a database at all, just text").unwrap();
    assert!(upgrade_trace(&junk).is_err());
}
