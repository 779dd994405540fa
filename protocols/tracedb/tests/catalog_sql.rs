//! Catalog CRUD and the `events` virtual table.

mod common;

use common::*;
use socscope_tracedb::*;

/// The names of the files in `dir`, sorted.
fn file_names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// What a trace's sync returns when the disk refuses it.
fn failed_sync(path: &std::path::Path) -> Result<(), StoreError> {
    Err(StoreError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::other("sync failed"),
    })
}

#[test]
fn catalog_crud_and_searches() {
    let dir = tempfile::tempdir().unwrap();
    let cat = Catalog::open(dir.path()).unwrap();
    let info = write(
        &dir.path().join("a.db"),
        &mixed_events(200, 1),
        WriterConfig::default(),
    );
    let id_a = cat.register_file("a.db").unwrap();
    let rec_a = cat.trace(id_a).unwrap().unwrap();
    assert_eq!(rec_a.info.event_count, info.event_count);
    assert_eq!(rec_a.info.meta.board, "board-a");
    assert_eq!(rec_a.info.meta.params, meta().params);
    assert_eq!(cat.resolve(&rec_a), dir.path().join("a.db"));

    let mut b = CatalogEntry {
        id: 0,
        db_file: "b.db".into(),
        info: TraceInfo::default(),
    };
    b.info.meta = TraceHeader {
        trace_type: "paje".into(),
        board: "board-b".into(),
        os: "os21".into(),
        application: "zapper".into(),
        cpus: 4,
        start_unix_ns: 5,
        processed: true,
        description: "derived".into(),
        params: vec![("level".into(), ParamValue::Signed(3))],
        ..TraceHeader::default()
    };
    let id_b = cat.register(&b).unwrap();
    assert_ne!(id_a, id_b);
    // Registering the same file again updates it.
    b.info.event_count = 99;
    assert_eq!(cat.register(&b).unwrap(), id_b);
    assert_eq!(cat.trace(id_b).unwrap().unwrap().info.event_count, 99);
    assert_eq!(cat.traces().unwrap().len(), 2);

    let ids = |v: Vec<CatalogEntry>| v.into_iter().map(|r| r.id).collect::<Vec<_>>();
    assert_eq!(ids(cat.traces_by_board("board-b").unwrap()), vec![id_b]);
    assert_eq!(ids(cat.traces_by_os("linux").unwrap()), vec![id_a]);
    assert_eq!(
        ids(cat.traces_by_application("zapper").unwrap()),
        vec![id_b]
    );
    assert_eq!(ids(cat.traces_by_cpus(2).unwrap()), vec![id_a]);
    assert_eq!(
        ids(cat.traces_by_description("derived").unwrap()),
        vec![id_b]
    );
    assert_eq!(ids(cat.traces_by_type("test").unwrap()), vec![id_a]);
    assert_eq!(
        ids(cat.traces_by_types(&["test", "paje"]).unwrap()),
        vec![id_a, id_b]
    );
    assert_eq!(
        ids(cat
            .traces_by_type_params("paje", &[("level", "3")])
            .unwrap()),
        vec![id_b]
    );
    assert!(
        cat.traces_by_type_params("paje", &[("level", "4")])
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        ids(cat.traces_by_output_device("uart0").unwrap()),
        vec![id_a]
    );
    assert_eq!(ids(cat.traces_between_dates(0, 10).unwrap()), vec![id_b]);
    assert_eq!(ids(cat.raw_traces().unwrap()), vec![id_a]);
    assert_eq!(ids(cat.processed_traces().unwrap()), vec![id_b]);
    assert_eq!(cat.trace_by_db_file("a.db").unwrap().unwrap().id, id_a);

    let tool = Tool {
        id: 0,
        name: "kptrace-import".into(),
        kind: ToolKind::Import,
        command: "socscope import --format kptrace".into(),
        description: "KPTrace importer".into(),
    };
    let tid = cat.add_tool(&tool).unwrap();
    cat.add_tool(&Tool {
        name: "ocelotl".into(),
        kind: ToolKind::Analysis,
        ..tool.clone()
    })
    .unwrap();
    assert_eq!(
        cat.tool_by_name("kptrace-import").unwrap().unwrap(),
        Tool { id: tid, ..tool }
    );
    assert_eq!(cat.tools_by_kind(ToolKind::Analysis).unwrap().len(), 1);
    assert!(cat.delete_tool(tid).unwrap());
    assert_eq!(cat.tools().unwrap().len(), 1);

    // Delete, with the file.
    assert!(cat.delete_trace(id_a, true).unwrap());
    assert!(!dir.path().join("a.db").exists());
    assert!(!cat.delete_trace(id_a, true).unwrap());
    assert_eq!(ids(cat.traces().unwrap()), vec![id_b]);

    // Reopening keeps everything.
    drop(cat);
    let cat = Catalog::open(dir.path()).unwrap();
    assert_eq!(cat.traces().unwrap().len(), 1);
}

#[test]
fn events_virtual_table_with_push_down() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let events = mixed_events(2_000, 9);
    write(&path, &events, small_config());
    let conn = rusqlite::Connection::open_in_memory().unwrap();
    register_events_table(&conn, &path).unwrap();

    let (a, b) = (1_000i64, 5_000i64);
    let (n, min_ts, max_ts): (i64, i64, i64) = conn
        .query_row(
            "SELECT count(*), min(ts), max(ts) FROM events WHERE ts BETWEEN ?1 AND ?2",
            [a, b],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    let want: Vec<&Event> = events.iter().filter(|e| e.ts >= a && e.ts <= b).collect();
    assert_eq!(n as usize, want.len());
    assert_eq!(min_ts, want.iter().map(|e| e.ts).min().unwrap());
    assert_eq!(max_ts, want.iter().map(|e| e.ts).max().unwrap());

    // The time range and the type reach the table (push-down), not a full scan.
    let plan: String = conn
        .query_row(
            "EXPLAIN QUERY PLAN SELECT * FROM events WHERE ts >= 10 AND ts < 20 AND type_id = 1",
            [],
            |r| r.get(3),
        )
        .unwrap();
    assert!(plan.contains("VIRTUAL TABLE INDEX 0:"), "{plan}");
    let idx = plan.rsplit(':').next().unwrap();
    assert!(
        idx.contains('G') && idx.contains('l') && idx.contains('t'),
        "{plan}"
    );

    // Columns, in timestamp order, with parameter names and joins on the plain tables.
    conn.execute("ATTACH DATABASE ?1 AS trace", [path.to_str().unwrap()])
        .unwrap();
    let mut st = conn
        .prepare(
            "SELECT e.ts, e.category, e.type, p.name, e.params, e.end_ts, e.depth, e.target, e.value, e.cpu
             FROM events e JOIN trace.producer p ON p.id = e.producer_id
             WHERE e.ts > 100 AND e.ts <= 3000 AND e.type_id = 1 ORDER BY e.ts",
        )
        .unwrap();
    let rows: Vec<(i64, String, String, String, String)> = st
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    let want: Vec<&Event> = events
        .iter()
        .filter(|e| e.type_id == 1 && e.ts > 100 && e.ts <= 3000)
        .collect();
    assert_eq!(rows.len(), want.len());
    assert!(rows.windows(2).all(|w| w[0].0 <= w[1].0));
    assert!(rows.iter().all(|r| r.1 == "punctual" && r.2 == "CS"));
    assert!(
        rows[0].4.starts_with("OLDPID=") && rows[0].4.contains(";NEWPID="),
        "{}",
        rows[0].4
    );
    // States expose end and depth.
    let (end, depth): (i64, i64) = conn
        .query_row(
            "SELECT end_ts, depth FROM events WHERE category = 'state' AND ts >= 0 LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert!(end >= 0 && depth >= 0);
    // Empty and NULL bounds give nothing.
    let n: i64 = conn
        .query_row(
            "SELECT count(*) FROM events WHERE ts > 10 AND ts < 5",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(n, 0);
    let n: i64 = conn
        .query_row("SELECT count(*) FROM events WHERE ts >= NULL", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(n, 0);
    // A whole-table count matches.
    let n: i64 = conn
        .query_row("SELECT count(*) FROM events", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n as usize, events.len());
}

/// Several threads opening a catalog that does not exist yet all get the complete catalog
/// (none sees a half-created file), and what each registers is kept.
#[test]
fn concurrent_open_of_a_new_catalog() {
    for round in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join(format!("cat{round}"));
        let barrier = std::sync::Barrier::new(8);
        std::thread::scope(|s| {
            for i in 0..8 {
                let (sub, barrier) = (&sub, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    let cat = Catalog::open(sub).unwrap_or_else(|e| panic!("thread {i}: {e}"));
                    let mut rec = CatalogEntry {
                        db_file: format!("t{i}.db"),
                        ..CatalogEntry::default()
                    };
                    rec.info.meta.trace_type = "test".into();
                    cat.register(&rec).unwrap();
                });
            }
        });
        let cat = Catalog::open(&sub).unwrap();
        assert_eq!(cat.traces().unwrap().len(), 8);
        let leftovers: Vec<_> = file_names(&sub)
            .into_iter()
            .filter(|n| n.contains(".tmp-"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }
}

/// `Catalog::register_file_in`: a directory without a catalog gets one holding the trace from the
/// start (the same row `register_file` writes, in a complete WAL-mode catalog); a directory with
/// one gets the trace added to it.
#[test]
fn registering_a_file_in_a_directory_creates_its_catalog_with_the_trace_in_it() {
    let dir = tempfile::tempdir().unwrap();
    let info = write(
        &dir.path().join("a.db"),
        &mixed_events(200, 1),
        WriterConfig::default(),
    );
    assert!(!dir.path().join(CATALOG_FILE).exists());
    let id_a = Catalog::register_file_in(dir.path(), "a.db").unwrap();
    // Nothing left beside it but the catalog and the trace (no temporary file).
    let names = file_names(dir.path());
    assert_eq!(names, ["a.db", CATALOG_FILE]);
    let cat = Catalog::open(dir.path()).unwrap();
    let rec_a = cat.trace(id_a).unwrap().unwrap();
    assert_eq!(rec_a.info.event_count, info.event_count);
    assert_eq!(rec_a.info.meta.board, "board-a");
    assert_eq!(rec_a.info.meta.params, meta().params);
    let mode: String = rusqlite::Connection::open(dir.path().join(CATALOG_FILE))
        .unwrap()
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    // The same as registering through an opened catalog.
    let other = tempfile::tempdir().unwrap();
    std::fs::copy(dir.path().join("a.db"), other.path().join("a.db")).unwrap();
    let by_open = Catalog::open(other.path()).unwrap();
    let id = by_open.register_file("a.db").unwrap();
    let rec = by_open.trace(id).unwrap().unwrap();
    assert_eq!((rec.id, &rec.db_file), (rec_a.id, &rec_a.db_file));
    assert_eq!(format!("{:?}", rec.info), format!("{:?}", rec_a.info));
    drop(cat);

    // An existing catalog: the second trace is added to it.
    write(
        &dir.path().join("b.db"),
        &mixed_events(50, 2),
        WriterConfig::default(),
    );
    let id_b = Catalog::register_file_in(dir.path(), "b.db").unwrap();
    assert_ne!(id_a, id_b);
    let cat = Catalog::open(dir.path()).unwrap();
    assert_eq!(cat.traces().unwrap().len(), 2);
    // A missing trace file registers nothing and creates no catalog.
    let empty = tempfile::tempdir().unwrap();
    assert!(Catalog::register_file_in(empty.path(), "none.db").is_err());
    assert!(!empty.path().join(CATALOG_FILE).exists());
}

/// A trace written unsynced, with parameters out of order and one name given twice.
fn write_unsynced(path: &std::path::Path) -> (TraceInfo, UnsyncedTrace) {
    let mut header = meta();
    header.params = vec![
        ("zeta".into(), ParamValue::Signed(-3)),
        ("alpha".into(), ParamValue::Float(0.1)),
        ("zeta".into(), ParamValue::Unsigned(7)),
        ("mid".into(), ParamValue::String("x y".into())),
    ];
    let config = WriterConfig {
        sync_commits: false,
        ..WriterConfig::default()
    };
    let mut w = TraceWriter::create_with(path, &header, config).unwrap();
    for t in types() {
        w.add_event_type(&t).unwrap();
    }
    for p in producers() {
        w.add_producer(&p).unwrap();
    }
    for e in &mixed_events(120, 3) {
        w.push(e).unwrap();
    }
    w.finish_unsynced(true).unwrap()
}

#[test]
fn registering_a_trace_just_written_lists_what_its_file_holds_once_it_is_durable() {
    let dir = tempfile::tempdir().unwrap();
    let (info, unsynced) = write_unsynced(&dir.path().join("a.db"));
    let catalog = dir.path().join(CATALOG_FILE);
    let mut calls = 0;
    let id = Catalog::register_written_in(dir.path(), "a.db", &info, || {
        calls += 1;
        // The new catalog is built and synced aside, not yet linked in.
        assert!(!catalog.exists());
        unsynced.clone().sync()
    })
    .unwrap();
    assert_eq!(calls, 1);
    let names = file_names(dir.path());
    assert_eq!(names, ["a.db", CATALOG_FILE]);
    // The same row as registering by reading the file back.
    let other = tempfile::tempdir().unwrap();
    std::fs::copy(dir.path().join("a.db"), other.path().join("a.db")).unwrap();
    let by_reading = Catalog::register_file_in(other.path(), "a.db").unwrap();
    let read = Catalog::open(other.path())
        .unwrap()
        .trace(by_reading)
        .unwrap()
        .unwrap();
    let written = Catalog::open(dir.path())
        .unwrap()
        .trace(id)
        .unwrap()
        .unwrap();
    assert_eq!(format!("{written:?}"), format!("{read:?}"));
    let names: Vec<&str> = written
        .info
        .meta
        .params
        .iter()
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(names, ["alpha", "mid", "zeta"]);
    assert_eq!(written.info.meta.params[2].1, ParamValue::Unsigned(7));

    // An existing catalog: written only once the trace is durable.
    let (info_b, unsynced_b) = write_unsynced(&dir.path().join("b.db"));
    let mut listed_before = None;
    Catalog::register_written_in(dir.path(), "b.db", &info_b, || {
        listed_before = Some(Catalog::open(dir.path()).unwrap().traces().unwrap().len());
        unsynced_b.sync()
    })
    .unwrap();
    assert_eq!(listed_before, Some(1));
    assert_eq!(
        Catalog::open(dir.path()).unwrap().traces().unwrap().len(),
        2
    );

    // A trace that could not be made durable is not registered, and no catalog is left.
    let fresh = tempfile::tempdir().unwrap();
    let (info_c, _unsynced_c) = write_unsynced(&fresh.path().join("c.db"));
    let err = Catalog::register_written_in(fresh.path(), "c.db", &info_c, || {
        failed_sync(&fresh.path().join("c.db"))
    })
    .unwrap_err();
    assert!(err.to_string().contains("sync failed"), "{err}");
    assert_eq!(file_names(fresh.path()), ["c.db"]);
}

/// `sync_and_link` gives a synced trace its name and leaves the directory's sync to its caller
/// (an import overlaps it with the catalog's commit); a name that exists is refused and left as it
/// is, and the trace stays under the name it was written under.
#[test]
fn a_written_trace_is_linked_under_a_free_name_only() {
    let dir = tempfile::tempdir().unwrap();
    let building = dir.path().join(".a.db.importing-1");
    let (info, unsynced) = write_unsynced(&building);
    let taken = dir.path().join("taken.db");
    std::fs::write(&taken, b"someone else's").unwrap();
    let err = unsynced.clone().sync_and_link(&taken).unwrap_err();
    assert!(matches!(err, StoreError::AlreadyExists { .. }), "{err}");
    assert_eq!(std::fs::read(&taken).unwrap(), b"someone else's");
    assert!(building.exists());

    let name = unsynced.sync_and_link(&dir.path().join("a.db")).unwrap();
    assert!(!building.exists());
    let read = TraceReader::open(dir.path().join("a.db"))
        .unwrap()
        .info()
        .unwrap();
    assert_eq!(read.event_count, info.event_count);
    name.sync().unwrap();
}

/// An import's update of an existing catalog commits with one sync of the WAL and leaves the WAL
/// in place: the row is on disk (in the WAL) once the call returns, every later opener reads it,
/// the WAL stays bounded however many imports follow, and the next connection that closes
/// normally folds it into `catalog.db`.
#[test]
fn an_import_into_an_existing_catalog_leaves_a_durable_bounded_wal_that_later_openers_fold_in() {
    let dir = tempfile::tempdir().unwrap();
    let (info, unsynced) = write_unsynced(&dir.path().join("a.db"));
    Catalog::register_written_in(dir.path(), "a.db", &info, || unsynced.sync()).unwrap();
    let wal = dir.path().join(format!("{CATALOG_FILE}-wal"));
    assert!(
        !wal.exists(),
        "a new catalog is linked in whole, without a WAL"
    );

    let (info_b, unsynced_b) = write_unsynced(&dir.path().join("b.db"));
    let id_b =
        Catalog::register_written_in(dir.path(), "b.db", &info_b, || unsynced_b.sync()).unwrap();
    // Left in place with the row in it (the import's connection is closed).
    assert!(wal.metadata().unwrap().len() > 0);
    let raw = rusqlite::Connection::open_with_flags(
        dir.path().join(CATALOG_FILE),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let rows: i64 = raw
        .query_row("SELECT count(*) FROM trace", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 2, "a later opener reads the row from the WAL");
    drop(raw);

    // A trace that could not be made durable is not registered in an existing catalog either.
    let err = Catalog::register_written_in(dir.path(), "lost.db", &info_b, || {
        failed_sync(&dir.path().join("lost.db"))
    })
    .unwrap_err();
    assert!(err.to_string().contains("sync failed"), "{err}");

    // Many imports: the WAL is checkpointed by the imports themselves and stays bounded.
    let page = 4096 + 24;
    for i in 0..150 {
        Catalog::register_written_in(dir.path(), &format!("r{i}.db"), &info_b, || Ok(())).unwrap();
        let len = wal.metadata().unwrap().len();
        assert!(
            len < 256 * 1024 + 8 * page,
            "WAL of {len} bytes after {i} imports"
        );
    }

    // A normal connection closing folds the WAL in: `catalog.db` alone then holds every row.
    let catalog = Catalog::open(dir.path()).unwrap();
    assert_eq!(catalog.traces().unwrap().len(), 152);
    assert_eq!(
        catalog.trace(id_b).unwrap().unwrap().db_file,
        "b.db".to_string()
    );
    drop(catalog);
    assert!(
        !wal.exists(),
        "the last normal close checkpoints and removes the WAL"
    );
    let copy = tempfile::tempdir().unwrap();
    std::fs::copy(
        dir.path().join(CATALOG_FILE),
        copy.path().join(CATALOG_FILE),
    )
    .unwrap();
    assert_eq!(
        Catalog::open(copy.path()).unwrap().traces().unwrap().len(),
        152
    );
}
