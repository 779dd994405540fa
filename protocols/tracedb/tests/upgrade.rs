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

#[test]
fn a_version_2_trace_is_read_as_it_is_and_upgraded_by_adding_the_dictionary_table() {
    let dir = tempfile::tempdir().unwrap();
    let path = copy_of("v2-sim.db", dir.path());
    let before = {
        let r = TraceReader::open(&path).unwrap();
        assert_eq!(r.info().unwrap().event_count, 1302);
        all_events(&r)
    };
    assert_eq!(before.len(), 1302);
    let report = upgrade_trace(&path).unwrap();
    assert_eq!(
        (report.from_version, report.to_version, report.events),
        (2, SCHEMA_VERSION, 1302)
    );
    assert_eq!(report.summary_rows, 0, "the summary is kept as it is");
    let r = TraceReader::open(&path).unwrap();
    let after = all_events(&r);
    assert_eq!(
        before.iter().map(|e| (e.id, &e.event)).collect::<Vec<_>>(),
        after.iter().map(|e| (e.id, &e.event)).collect::<Vec<_>>(),
        "the same events under the same ids"
    );
    let dicts: i64 = r
        .connection()
        .query_row("SELECT count(*) FROM chunk_dict", [], |row| row.get(0))
        .unwrap();
    assert_eq!(dicts, 0);
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
    assert_eq!(report.events, 1285);
    assert!(report.summary_rows > 0);
    // Again: nothing to do.
    let again = upgrade_trace(&path).unwrap();
    assert_eq!(
        (again.from_version, again.events, again.summary_rows),
        (SCHEMA_VERSION, 1285, 0)
    );
    let r = TraceReader::open(&path).unwrap();
    let info = r.info().unwrap();
    assert_eq!(info.event_count, 1285);
    let all = TimeRange::new(info.t_min, info.t_max + 1);
    let events: Vec<Event> = r
        .events_overlapping(all, &Filter::all())
        .unwrap()
        .map(|e| e.unwrap().event)
        .collect();
    assert_eq!(events.len(), 1285);
    // Counts per type as the first release stored them (`socscope info` before the upgrade).
    let count = |ty: u32| events.iter().filter(|e| e.type_id == ty).count();
    assert_eq!(
        (count(100001), count(2), count(6), count(100002)),
        (343, 197, 172, 169)
    );
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
