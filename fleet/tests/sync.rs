//! `sync` on hand-written traces: the round trip (counts per type, producer and CPU, first and last
//! timestamps, every event with all its parameters), a trace with losses, incremental re-syncs,
//! live traces, pruning, and the bad inputs of the issue.

use std::path::{Path, PathBuf};

use socscope_fleet::readback::{dataset_digest, normalise, store_digest};
use socscope_fleet::sync::{SyncOptions, SyncSummary, sync};
use socscope_fleet::{Dataset, FleetError, Table};
use socscope_tracedb::{Catalog, TraceReader};

mod common;
use common::{DAY, NIGHT, write_trace};

fn run(catalogs: &[&Path], out: &Path, options: SyncOptions) -> SyncSummary {
    let dirs: Vec<PathBuf> = catalogs.iter().map(|p| p.to_path_buf()).collect();
    let s = sync(&dirs, out, options, &mut |_| {}).unwrap();
    assert!(s.failures.is_empty(), "{:?}", s.failures);
    s
}

#[test]
fn every_event_round_trips_with_all_its_parameters() {
    let tmp = tempfile::tempdir().unwrap();
    let cat = tmp.path().join("rig");
    std::fs::create_dir_all(&cat).unwrap();
    write_trace(&cat, "a", "stb-1", NIGHT, 3_000, true, true);
    write_trace(&cat, "b", "stb/2", NIGHT + DAY, 500, false, true);
    let out = tmp.path().join("ds");
    let s = run(&[&cat], &out, SyncOptions::default());
    assert_eq!(s.traces_written, 2);
    assert_eq!(s.events, 3_000 * 2 + 600 * 2 + 500 * 2 + 100 * 2);
    let ds = Dataset::open(&out).unwrap();
    let contents = ds.contents().unwrap();
    for (id, board, date) in [("a", "stb-1", "2026-03-02"), ("b", "stb%2F2", "2026-03-03")] {
        for t in Table::ALL {
            let f = out
                .join(t.name())
                .join(format!("board={board}"))
                .join(format!("date={date}"))
                .join(format!("{id}.parquet"));
            assert!(f.is_file(), "{}", f.display());
        }
        let store = normalise(
            store_digest(&TraceReader::open(cat.join(format!("{id}.db"))).unwrap(), 1).unwrap(),
        );
        let back = dataset_digest(&contents, id, 1).unwrap();
        assert_eq!(back.events, store.events);
        assert_eq!(back.per_type, store.per_type);
        assert_eq!(back.per_producer, store.per_producer);
        assert_eq!(back.per_cpu, store.per_cpu);
        assert_eq!(
            (back.first_ts, back.last_ts),
            (store.first_ts, store.last_ts)
        );
        assert_eq!(back.sample.len(), store.sample.len());
        for (x, y) in back.sample.iter().zip(&store.sample) {
            assert_eq!(x, y);
        }
    }
}

#[test]
fn a_second_sync_writes_only_what_changed_and_live_traces_wait() {
    let tmp = tempfile::tempdir().unwrap();
    let cat = tmp.path().join("rig");
    std::fs::create_dir_all(&cat).unwrap();
    write_trace(&cat, "a", "stb-1", NIGHT, 100, false, true);
    let live = write_trace(&cat, "live", "stb-2", NIGHT, 100, false, false).unwrap();
    let out = tmp.path().join("ds");
    let s = run(&[&cat], &out, SyncOptions::default());
    assert_eq!((s.traces_written, s.traces_live_skipped), (1, 1));
    let a_file = out.join("events/board=stb-1/date=2026-03-02/a.parquet");
    let before = std::fs::metadata(&a_file).unwrap().modified().unwrap();

    let s = run(&[&cat], &out, SyncOptions::default());
    assert_eq!(
        (s.traces_written, s.traces_unchanged, s.traces_live_skipped),
        (0, 1, 1)
    );
    assert_eq!(
        std::fs::metadata(&a_file).unwrap().modified().unwrap(),
        before
    );

    // --include-live exports the committed part; once the trace ends it is written again.
    let s = run(
        &[&cat],
        &out,
        SyncOptions {
            include_live: true,
            ..SyncOptions::default()
        },
    );
    assert_eq!(s.traces_written, 1);
    live.finish(true).unwrap();
    Catalog::open(&cat)
        .unwrap()
        .register_file("live.db")
        .unwrap();
    let s = run(&[&cat], &out, SyncOptions::default());
    assert_eq!((s.traces_written, s.traces_unchanged), (1, 1));

    // A trace deleted from the catalog keeps its files unless --prune.
    let catalog = Catalog::open(&cat).unwrap();
    let rec = catalog.trace_by_db_file("a.db").unwrap().unwrap();
    catalog.delete_trace(rec.id, true).unwrap();
    let s = run(&[&cat], &out, SyncOptions::default());
    assert_eq!((s.traces_not_in_catalog, s.traces_pruned), (1, 0));
    assert!(a_file.is_file());
    let s = run(
        &[&cat],
        &out,
        SyncOptions {
            prune: true,
            ..SyncOptions::default()
        },
    );
    assert_eq!(s.traces_pruned, 1);
    assert!(!a_file.exists());
    assert!(!out.join("events/board=stb-1").exists());

    // A trace file removed by hand while its catalog still lists it is deleted too, not a failure.
    let b_file = out.join("traces/board=stb-2/date=2026-03-02/live.parquet");
    assert!(b_file.is_file());
    std::fs::remove_file(cat.join("live.db")).unwrap();
    let s = run(&[&cat], &out, SyncOptions::default());
    assert!(s.failures.is_empty(), "{:?}", s.failures);
    assert_eq!((s.traces_not_in_catalog, s.traces_pruned), (1, 0));
    assert!(b_file.is_file());
    let s = run(
        &[&cat],
        &out,
        SyncOptions {
            prune: true,
            ..SyncOptions::default()
        },
    );
    assert_eq!(s.traces_pruned, 1);
    assert!(!b_file.exists());
}

#[test]
fn half_written_files_are_replaced_and_other_files_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let cat = tmp.path().join("rig");
    std::fs::create_dir_all(&cat).unwrap();
    write_trace(&cat, "a", "stb-1", NIGHT, 100, false, true);
    let out = tmp.path().join("ds");
    run(&[&cat], &out, SyncOptions::default());
    // What a sync killed while writing leaves: a temporary, and a trace whose `traces` file is missing.
    let part = out.join("events/board=stb-1/date=2026-03-02");
    std::fs::write(part.join(".a.parquet.tmp"), b"PAR1 half").unwrap();
    std::fs::remove_file(out.join("traces/board=stb-1/date=2026-03-02/a.parquet")).unwrap();
    let s = run(&[&cat], &out, SyncOptions::default());
    assert_eq!((s.temporaries_removed, s.traces_written), (1, 1));
    assert!(!part.join(".a.parquet.tmp").exists());

    // A directory of other files is never taken over.
    let other = tmp.path().join("photos");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("cat.jpg"), b"jpeg").unwrap();
    let e = sync(
        std::slice::from_ref(&cat),
        &other,
        SyncOptions::default(),
        &mut |_| {},
    )
    .unwrap_err();
    assert!(matches!(e, FleetError::NotADataset { .. }), "{e}");
    assert!(e.to_string().contains("cat.jpg"), "{e}");
    assert_eq!(std::fs::read(other.join("cat.jpg")).unwrap(), b"jpeg");
    // ... nor a stray file inside a dataset.
    std::fs::write(part.join("notes.txt"), b"x").unwrap();
    let e = sync(
        std::slice::from_ref(&cat),
        &out,
        SyncOptions::default(),
        &mut |_| {},
    )
    .unwrap_err();
    assert!(e.to_string().contains("notes.txt"), "{e}");
    std::fs::remove_file(part.join("notes.txt")).unwrap();

    // A directory that is not a catalog.
    let e = sync(
        std::slice::from_ref(&other),
        &out,
        SyncOptions::default(),
        &mut |_| {},
    )
    .unwrap_err();
    assert!(e.to_string().contains("no catalog.db"), "{e}");
}

#[test]
fn a_file_that_is_not_a_trace_fails_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let cat = tmp.path().join("rig");
    std::fs::create_dir_all(&cat).unwrap();
    write_trace(&cat, "a", "stb-1", NIGHT, 100, false, true);
    write_trace(&cat, "bad", "stb-1", NIGHT, 10, false, true);
    std::fs::write(cat.join("bad.db"), b"this is not a trace").unwrap();
    let out = tmp.path().join("ds");
    let s = sync(
        std::slice::from_ref(&cat),
        &out,
        SyncOptions::default(),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(s.traces_written, 1);
    assert_eq!(s.failures.len(), 1, "{:?}", s.failures);
    assert!(s.failures[0].trace.ends_with("bad.db"));
    assert!(s.failures[0].error.contains("bad.db"), "{:?}", s.failures);
}

#[test]
fn traces_synced_on_several_threads_equal_those_synced_one_by_one() {
    let tmp = tempfile::tempdir().unwrap();
    let cat = tmp.path().join("rig");
    std::fs::create_dir_all(&cat).unwrap();
    for (i, n) in [900, 40, 2_500, 1, 700].into_iter().enumerate() {
        write_trace(
            &cat,
            &format!("t{i}"),
            &format!("stb-{}", i % 3),
            NIGHT + i as i64 * DAY,
            n,
            i % 2 == 0,
            true,
        );
    }
    // A file the catalog lists that is not a trace: its failure is reported once, whichever thread met it.
    write_trace(&cat, "t5", "stb-1", NIGHT, 10, false, true);
    std::fs::write(cat.join("t5.db"), b"not a trace").unwrap();
    let sync_with = |jobs: usize, out: &Path| {
        let dirs = [cat.clone()];
        let mut shown = Vec::new();
        let s = sync(
            &dirs,
            out,
            SyncOptions {
                jobs,
                ..SyncOptions::default()
            },
            &mut |p| shown.push((p.traces_done, p.events_written)),
        )
        .unwrap();
        // The bar never goes back, and ends on every trace and event.
        assert!(
            shown
                .windows(2)
                .all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1)
        );
        assert_eq!(shown.last().copied(), Some((6, s.events)));
        s
    };
    let one = tmp.path().join("one");
    let three = tmp.path().join("three");
    let a = sync_with(1, &one);
    let b = sync_with(3, &three);
    assert_eq!(a.traces_written, 5);
    assert_eq!(
        (a.traces_written, a.events, a.bytes),
        (b.traces_written, b.events, b.bytes)
    );
    assert_eq!(a.failures.len(), 1, "{:?}", a.failures);
    assert_eq!(a.failures.len(), b.failures.len());
    assert_eq!(a.failures[0].trace, b.failures[0].trace);
    let (ca, cb) = (
        Dataset::open(&one).unwrap().contents().unwrap(),
        Dataset::open(&three).unwrap().contents().unwrap(),
    );
    for i in 0..5 {
        let id = format!("t{i}");
        assert_eq!(
            normalise(dataset_digest(&ca, &id, 1).unwrap()),
            normalise(dataset_digest(&cb, &id, 1).unwrap()),
            "{id}"
        );
    }
}
