//! Writer and reader tests on real SQLite files.

mod common;

use common::*;
use socscope_tracedb::*;

fn assert_time_ordered(v: &[Event]) {
    assert!(
        v.windows(2).all(|w| w[0].ts <= w[1].ts),
        "events are not in timestamp order"
    );
}

#[test]
fn round_trip_every_category_and_param_type() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let events = vec![
        Event::punctual(10, 1, 2, Some(0)).with_params(vec![
            ParamValue::Signed(-1205),
            ParamValue::Unsigned(u64::MAX),
        ]),
        Event::state(5, 50, 3, 2, 3, Some(1)),
        Event {
            ts: 20,
            type_id: 3,
            producer: 2,
            cpu: Some(0),
            kind: EventKind::Link { end: 25, target: 3 },
            params: vec![],
        },
        Event {
            ts: 30,
            type_id: 4,
            producer: 1,
            cpu: None,
            kind: EventKind::Variable { value: -2.5e300 },
            params: vec![ParamValue::String("MHz ✓".into())],
        },
        Event::punctual(40, 5, 4, Some(1)).with_params(vec![
            ParamValue::Address(0xdead_beef),
            ParamValue::Float(0.125),
        ]),
    ];
    let info = write(&path, &events, WriterConfig::default());
    assert_eq!(info.event_count, 5);
    assert_eq!((info.t_min, info.t_max), (5, 50));

    let r = TraceReader::open(&path).unwrap();
    let got = read_all(&r, TimeRange::all(), &Filter::all());
    assert_eq!(got, sorted(events.clone()));

    let info = r.info().unwrap();
    assert_eq!(info.meta, meta());
    assert!(info.complete && info.finished);
    assert_eq!(info.event_count, 5);
    assert_eq!(r.event_types().unwrap(), types());
    assert_eq!(r.producers().unwrap(), producers());
    // Ids point back at the same events.
    for e in r.events(TimeRange::all(), &Filter::all()).unwrap() {
        let e = e.unwrap();
        assert_eq!(r.event_by_id(e.id).unwrap().unwrap(), e);
    }
}

#[test]
fn losses_stats_and_files_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let mut w = TraceWriter::create(&path, &meta()).unwrap();
    let loss = LossRecord {
        cpu: Some(1),
        ts: 1234,
        count: 17,
        seq_from: Some(100),
        seq_to: Some(116),
        reason: "ring buffer full".into(),
    };
    w.add_loss(&loss).unwrap();
    let stat = IngestStat {
        name: "frames_bad_crc".into(),
        value: 3,
        description: "frames dropped for a bad CRC".into(),
    };
    w.set_ingest_stat(&stat).unwrap();
    w.set_ingest_stat(&IngestStat {
        value: 4,
        ..stat.clone()
    })
    .unwrap();
    let fid = w.add_file("/tmp/capture.bin", "raw capture").unwrap();
    w.finish(false).unwrap();
    let r = TraceReader::open(&path).unwrap();
    assert_eq!(r.losses().unwrap(), vec![loss]);
    assert_eq!(
        r.ingest_stats().unwrap(),
        vec![IngestStat { value: 4, ..stat }]
    );
    assert_eq!(
        r.files().unwrap(),
        vec![TraceFile {
            id: fid,
            path: "/tmp/capture.bin".into(),
            description: "raw capture".into()
        }]
    );
    assert!(!r.info().unwrap().complete);
}

/// Reading into one reused event gives what the iterator gives, event for event (the reused
/// parameter vector never leaks values from the previous event), with filters and conditions.
#[test]
fn next_into_reads_what_the_iterator_reads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let events = mixed_events(2_000, 3);
    write(&path, &events, small_config());
    let r = TraceReader::open(&path).unwrap();
    let filters = [
        Filter::all(),
        Filter::all().types([1, 4, 5]),
        Filter::all().condition(Condition::param(
            "OLDPID",
            CompareOp::Lt,
            ParamValue::Signed(2),
        )),
    ];
    for f in &filters {
        for range in [TimeRange::all(), TimeRange::new(500, 9_000)] {
            let want: Vec<StoredEvent> = r.events(range, f).unwrap().map(Result::unwrap).collect();
            assert!(!want.is_empty());
            let mut got = Vec::new();
            let mut it = r.events(range, f).unwrap();
            let mut e = StoredEvent::default();
            while it.next_into(&mut e).unwrap() {
                got.push(e.clone());
            }
            // Finished: stays finished.
            assert!(!it.next_into(&mut e).unwrap());
            assert_eq!(got, want, "{f:?} {range:?}");
        }
    }
}

#[test]
fn out_of_order_states_come_back_in_start_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let events = mixed_events(3_000, 1);
    // Arrival order is not start order.
    assert!(events.windows(2).any(|w| w[0].ts > w[1].ts));
    write(&path, &events, small_config());
    let r = TraceReader::open(&path).unwrap();
    let got = read_all(&r, TimeRange::all(), &Filter::all());
    assert_time_ordered(&got);
    assert_eq!(sorted(got), sorted(events.clone()));
    // A sub-range gives exactly the events starting in it.
    for (a, b) in [(0, 100), (500, 9_000), (20_000, 20_001), (7_777, 30_000)] {
        let got = read_all(&r, TimeRange::new(a, b), &Filter::all());
        assert_time_ordered(&got);
        let want: Vec<Event> = events
            .iter()
            .filter(|e| e.ts >= a && e.ts < b)
            .cloned()
            .collect();
        assert_eq!(sorted(got), sorted(want), "range [{a}, {b})");
    }
}

#[test]
fn range_queries_catch_long_states() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let mut events = Vec::new();
    // Many short punctual events and short states ...
    for i in 0..20_000i64 {
        events.push(Event::punctual(i * 1_000, 1, 2, Some(0)));
        if i % 3 == 0 {
            events.push(Event::state(i * 1_000, i * 1_000 + 500, 0, 2, 2, Some(0)));
        }
    }
    // ... and a 20 s state that arrives last (the collector learns it at its end).
    let long = Event::state(1_000, 20_000_000_000, 0, 2, 3, Some(0));
    events.push(long.clone());
    write(&path, &events, WriterConfig::default());
    let r = TraceReader::open(&path).unwrap();
    for t in [5_000_000i64, 19_000_000, 1_000_000_000, 19_999_999_999] {
        let got: Vec<Event> = r
            .states_overlapping(TimeRange::new(t, t + 10), &Filter::all())
            .unwrap()
            .map(|e| e.unwrap().event)
            .collect();
        assert!(got.contains(&long), "long state missing at {t}");
        let want: Vec<Event> = events
            .iter()
            .filter(|e| e.category() == EventCategory::State && e.ts < t + 10 && e.end() > t)
            .cloned()
            .collect();
        assert_eq!(sorted(got), sorted(want));
    }
    // Only states come back.
    let got: Vec<Event> = r
        .states_overlapping(TimeRange::new(0, 3_000), &Filter::all())
        .unwrap()
        .map(|e| e.unwrap().event)
        .collect();
    assert!(got.iter().all(|e| e.category() == EventCategory::State));
    assert_eq!(got.len(), 2);
}

#[test]
fn filters_with_parameter_conditions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let events = mixed_events(2_000, 2);
    write(&path, &events, small_config());
    let r = TraceReader::open(&path).unwrap();
    let param = |e: &Event, i: usize| e.params.get(i).cloned();

    type Pred = Box<dyn Fn(&Event) -> bool>;
    let cases: Vec<(Filter, Pred)> = vec![
        (
            Filter::all().types([1, 3]),
            Box::new(|e: &Event| [1, 3].contains(&e.type_id)),
        ),
        (
            Filter::all().producers([2]),
            Box::new(|e: &Event| e.producer == 2),
        ),
        (
            Filter::all().cpus([1]),
            Box::new(|e: &Event| e.cpu == Some(1)),
        ),
        (
            Filter::all().categories([EventCategory::Link, EventCategory::Variable]),
            Box::new(|e: &Event| {
                matches!(e.category(), EventCategory::Link | EventCategory::Variable)
            }),
        ),
        (
            Filter::all().types([1]).condition(
                Condition::param("OLDPID", CompareOp::Eq, ParamValue::Signed(3)).and(
                    Condition::param("NEWPID", CompareOp::Ne, ParamValue::Unsigned(0)),
                ),
            ),
            Box::new(move |e: &Event| {
                e.type_id == 1
                    && param(e, 0) == Some(ParamValue::Signed(3))
                    && param(e, 1) != Some(ParamValue::Unsigned(0))
            }),
        ),
        (
            Filter::all().condition(
                Condition::param("OLDPID", CompareOp::Lt, ParamValue::Signed(0))
                    .or(Condition::param(
                        "unit",
                        CompareOp::Eq,
                        ParamValue::String("kHz".into()),
                    ))
                    .or(Condition::param(
                        "ratio",
                        CompareOp::Ge,
                        ParamValue::Float(9.0),
                    )),
            ),
            Box::new(move |e: &Event| match e.type_id {
                1 => matches!(param(e, 0), Some(ParamValue::Signed(v)) if v < 0),
                4 => param(e, 0) == Some(ParamValue::String("kHz".into())),
                5 => matches!(param(e, 1), Some(ParamValue::Float(v)) if v >= 9.0),
                _ => false,
            }),
        ),
        (
            Filter::all()
                .cpus([0])
                .producers([1, 4])
                .condition(Condition::param(
                    "NEWPID",
                    CompareOp::Gt,
                    ParamValue::Signed(4),
                )),
            Box::new(move |e: &Event| {
                e.cpu == Some(0)
                    && [1, 4].contains(&e.producer)
                    && e.type_id == 1
                    && matches!(param(e, 1), Some(ParamValue::Unsigned(v)) if v > 4)
            }),
        ),
    ];
    for (i, (filter, pred)) in cases.iter().enumerate() {
        let want: Vec<Event> = events.iter().filter(|e| pred(e)).cloned().collect();
        assert!(!want.is_empty(), "case {i} selects nothing: a useless test");
        let got = read_all(&r, TimeRange::all(), filter);
        assert_time_ordered(&got);
        assert_eq!(sorted(got), sorted(want.clone()), "case {i}");
        assert_eq!(
            r.count(TimeRange::all(), filter).unwrap(),
            want.len() as u64,
            "count case {i}"
        );
    }
}

#[test]
fn predefined_searches() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let events = mixed_events(1_000, 3);
    write(&path, &events, small_config());
    let r = TraceReader::open(&path).unwrap();
    let get = |s: EventSearch| -> Vec<Event> {
        sorted(r.search(&s).unwrap().into_iter().map(|e| e.event).collect())
    };
    let want = |f: &dyn Fn(&Event) -> bool| -> Vec<Event> {
        sorted(events.iter().filter(|e| f(e)).cloned().collect())
    };
    assert_eq!(get(EventSearch::ByCpu(1)), want(&|e| e.cpu == Some(1)));
    assert_eq!(
        get(EventSearch::ByType("wakeup".into())),
        want(&|e| e.type_id == 3)
    );
    assert_eq!(
        get(EventSearch::ByTypes(vec!["wakeup".into(), "freq".into()])),
        want(&|e| [3, 4].contains(&e.type_id))
    );
    assert_eq!(get(EventSearch::ByProducer(4)), want(&|e| e.producer == 4));
    assert_eq!(
        get(EventSearch::ByProducers(vec![1, 2])),
        want(&|e| e.producer <= 2)
    );
    assert_eq!(
        get(EventSearch::InInterval(TimeRange::new(100, 2_000))),
        want(&|e| (100..2_000).contains(&e.ts))
    );
    let ivs = vec![
        TimeRange::new(100, 2_000),
        TimeRange::new(1_500, 3_000),
        TimeRange::new(9_000, 9_500),
    ];
    let in_ivs = |t: i64| (100..3_000).contains(&t) || (9_000..9_500).contains(&t);
    assert_eq!(
        get(EventSearch::InIntervals(ivs.clone())),
        want(&|e| in_ivs(e.ts))
    );
    let p = vec![
        ("OLDPID".to_string(), "3".to_string()),
        ("NEWPID".to_string(), "5".to_string()),
    ];
    let pm = |e: &Event| {
        e.type_id == 1 && e.params == vec![ParamValue::Signed(3), ParamValue::Unsigned(5)]
    };
    assert!(!want(&pm).is_empty());
    assert_eq!(
        get(EventSearch::ByTypeParams {
            type_name: "CS".into(),
            params: p.clone()
        }),
        want(&pm)
    );
    assert_eq!(
        get(EventSearch::ByTypeParamsInIntervals {
            type_name: "CS".into(),
            params: p,
            intervals: ivs.clone()
        }),
        want(&|e| pm(e) && in_ivs(e.ts))
    );
    assert_eq!(
        get(EventSearch::ByTypesIntervalsProducers {
            types: vec!["CS".into(), "running".into()],
            intervals: ivs,
            producers: vec![2, 3]
        }),
        want(&|e| [1, 2].contains(&e.type_id) && in_ivs(e.ts) && [2, 3].contains(&e.producer))
    );
    assert!(matches!(
        r.search(&EventSearch::ByTypeParams {
            type_name: "CS".into(),
            params: vec![("NOPE".into(), "1".into())]
        }),
        Err(StoreError::InvalidRequest(_))
    ));
    assert_eq!(
        r.producer_by_local_id(ProducerKind::Irq, 33)
            .unwrap()
            .unwrap()
            .id,
        4
    );
    assert_eq!(r.producers_by_kind(ProducerKind::Thread).unwrap().len(), 2);
}

#[test]
fn wrong_schema_version_names_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    write(&path, &[], WriterConfig::default());
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.pragma_update(None, "user_version", 99).unwrap();
    }
    let err = TraceReader::open(&path).unwrap_err();
    match &err {
        StoreError::SchemaVersion {
            found, expected, ..
        } => {
            assert_eq!((*found, *expected), (99, SCHEMA_VERSION));
        }
        other => panic!("unexpected error {other}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains("99") && msg.contains(&SCHEMA_VERSION.to_string()),
        "{msg}"
    );
    assert!(msg.contains("upgrade"), "{msg}");
}

#[test]
fn corrupt_files_give_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    // Garbage.
    let garbage = dir.path().join("garbage.db");
    std::fs::write(&garbage, vec![0x5Au8; 10_000]).unwrap();
    assert!(TraceReader::open(&garbage).is_err());
    // Another SQLite file.
    let other = dir.path().join("other.db");
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE x(a)")
        .unwrap();
    assert!(matches!(
        TraceReader::open(&other),
        Err(StoreError::NotAStore { .. })
    ));
    // Missing.
    assert!(TraceReader::open(dir.path().join("missing.db")).is_err());

    // A real trace, truncated at many lengths.
    let path = dir.path().join("t.db");
    write(&path, &mixed_events(5_000, 4), WriterConfig::default());
    let bytes = std::fs::read(&path).unwrap();
    for cut in [
        0,
        50,
        100,
        4096,
        8192,
        bytes.len() / 3,
        bytes.len() / 2,
        bytes.len() - 100,
    ] {
        let p = dir.path().join(format!("cut{cut}.db"));
        std::fs::write(&p, &bytes[..cut]).unwrap();
        if let Ok(r) = TraceReader::open(&p) {
            // Reading may fail; it must not panic.
            if let Ok(it) = r.events(TimeRange::all(), &Filter::all()) {
                for e in it {
                    if e.is_err() {
                        break;
                    }
                }
            }
            let _ = r.summary(
                TimeRange::new(0, 100_000),
                Resolution::MaxBuckets(10),
                &Filter::all(),
            );
        }
    }

    // Corrupt chunk blobs: an error naming the chunk.
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute("UPDATE chunk SET data = x'01ff00ab' WHERE id = 2", [])
            .unwrap();
        c.execute(
            "UPDATE chunk SET data = substr(data, 1, 20) WHERE id = 3",
            [],
        )
        .unwrap();
    }
    let r = TraceReader::open(&path).unwrap();
    let errors: Vec<StoreError> = r
        .events(TimeRange::all(), &Filter::all())
        .unwrap()
        .filter_map(|e| e.err())
        .collect();
    assert_eq!(errors.len(), 1, "the iterator stops at the first error");
    assert!(
        matches!(errors[0], StoreError::CorruptChunk { .. }),
        "{}",
        errors[0]
    );
}

#[test]
fn reader_sees_a_consistent_growing_prefix_while_writing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.db");
    let total = 60_000i64;
    let mut w = TraceWriter::create_with(
        &path,
        &meta(),
        WriterConfig {
            commit_interval: std::time::Duration::from_millis(5),
            ..WriterConfig::default()
        },
    )
    .unwrap();
    for t in types() {
        w.add_event_type(&t).unwrap();
    }
    w.commit().unwrap();
    let writer = std::thread::spawn(move || {
        for i in 0..total {
            // Three CPUs round robin, in time order; every 7th event a short state that ends now.
            let cpu = (i % 3) as u16;
            if i % 7 == 0 && i > 0 {
                w.push(&Event::state(i - 1, i, 0, 2, 2, Some(cpu))).unwrap();
            } else {
                w.push(&Event::punctual(i, 1, 2, Some(cpu))).unwrap();
            }
            if i % 5_000 == 0 {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        }
        w.finish(true).unwrap()
    });
    let r = TraceReader::open(&path).unwrap();
    let mut last = 0u64;
    let mut observations = 0;
    loop {
        let done = writer.is_finished();
        let snap = r.snapshot().unwrap();
        let info = r.info().unwrap();
        let evs: Vec<StoredEvent> = r
            .events(TimeRange::all(), &Filter::all())
            .unwrap()
            .map(|e| e.unwrap())
            .collect();
        drop(snap);
        assert_eq!(
            evs.len() as u64,
            info.event_count,
            "events and info disagree"
        );
        assert!(info.event_count >= last, "the trace shrank");
        last = info.event_count;
        // Everything pushed before a commit is visible: timestamps form a prefix.
        let mut ts: Vec<i64> = evs.iter().map(|e| e.ts).collect();
        ts.sort_unstable();
        let expect_prefix =
            |n: usize| (0..n as i64).map(|i| if i % 7 == 0 && i > 0 { i - 1 } else { i });
        let mut want: Vec<i64> = expect_prefix(ts.len()).collect();
        want.sort_unstable();
        assert_eq!(ts, want, "not a prefix");
        observations += 1;
        if done {
            break;
        }
    }
    let info = writer.join().unwrap();
    assert_eq!(info.event_count, total as u64);
    assert_eq!(r.info().unwrap().event_count, total as u64);
    assert!(observations >= 2);
}

#[test]
fn time_based_commit_makes_events_visible() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let mut w = TraceWriter::create_with(
        &path,
        &meta(),
        WriterConfig {
            commit_interval: std::time::Duration::from_millis(20),
            ..WriterConfig::default()
        },
    )
    .unwrap();
    w.push(&Event::punctual(1, 1, 1, Some(0))).unwrap();
    let r = TraceReader::open(&path).unwrap();
    assert_eq!(r.count(TimeRange::all(), &Filter::all()).unwrap(), 0);
    std::thread::sleep(std::time::Duration::from_millis(30));
    assert!(w.maybe_commit().unwrap());
    assert_eq!(r.count(TimeRange::all(), &Filter::all()).unwrap(), 1);
    drop(w);
}

#[test]
fn analysis_results_of_every_kind_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    write(&path, &mixed_events(100, 5), WriterConfig::default());
    let store = ResultStore::open(&path).unwrap();
    let header = |tool: &str| AnalysisResult {
        id: 0,
        tool_id: Some(7),
        tool_name: tool.into(),
        kind: AnalysisKind::Search,
        date_unix_ns: 42,
        description: "d".into(),
    };
    let datas = vec![
        AnalysisData::Search {
            command: "type = CS".into(),
            target: TargetEntity::Event,
            ids: vec![4097, 4098],
        },
        AnalysisData::Grouping {
            groups: vec![
                Group {
                    id: 1,
                    parent: None,
                    name: "pattern".into(),
                    target: TargetEntity::EventType,
                    and: true,
                    ordered: true,
                    sequence: 0,
                    members: vec![],
                },
                Group {
                    id: 2,
                    parent: Some(1),
                    name: "leaf".into(),
                    target: TargetEntity::EventType,
                    and: false,
                    ordered: false,
                    sequence: 1,
                    members: vec![1, 3],
                },
            ],
        },
        AnalysisData::Annotation {
            types: vec![AnnotationType {
                id: 1,
                name: "memory statistic".into(),
                params: vec![
                    ParamDef::new("used_x", ParamType::Unsigned),
                    ParamDef::new("label", ParamType::String),
                ],
            }],
            annotations: vec![Annotation {
                id: 1,
                type_id: 1,
                name: "cpu0".into(),
                values: vec![ParamValue::Unsigned(4096), ParamValue::String("a;b".into())],
            }],
        },
        AnalysisData::ResultFiles {
            paths: vec!["/tmp/a.png".into(), "/tmp/b.csv".into()],
        },
        AnalysisData::ProcessedTrace {
            trace_db: "filtered.db".into(),
        },
    ];
    let mut ids = Vec::new();
    for (i, d) in datas.iter().enumerate() {
        ids.push(
            store
                .save(&header(if i % 2 == 0 { "ocelotl" } else { "stats" }), d)
                .unwrap(),
        );
    }
    let r = TraceReader::open(&path).unwrap();
    for (id, d) in ids.iter().zip(&datas) {
        assert_eq!(r.analysis_data(*id).unwrap().as_ref(), Some(d));
    }
    assert_eq!(r.analysis_results(Some("ocelotl"), None).unwrap().len(), 3);
    let g = r
        .analysis_results(Some("stats"), Some(AnalysisKind::Grouping))
        .unwrap();
    assert_eq!(g.len(), 1);
    assert_eq!(g[0].kind, AnalysisKind::Grouping);
    assert!(store.delete(ids[0]).unwrap());
    assert_eq!(r.analysis_data(ids[0]).unwrap(), None);
}
