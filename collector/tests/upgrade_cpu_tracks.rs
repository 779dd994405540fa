//! A trace recorded before the CPU tracks existed, upgraded, has the CPU tracks a fresh ingest of
//! the same capture writes (`socscope upgrade` and live ingest share one rule), and every event it
//! had keeps its id.
//!
//! The old trace is made with the current writer: a fresh import of a real capture copied without
//! its `on_cpu`/`cpu_idle` types and events, as the collector wrote traces before the tracks.

mod common;

use std::collections::HashMap;
use std::path::Path;

use common::{import_file, real};
use socscope_formats::Format;
use socscope_tracedb::{
    CPU_IDLE_TYPE, CpuTracks, Event, EventId, Filter, ON_CPU_TYPE, TimeRange, TraceReader,
    TraceWriter, upgrade_trace,
};

fn is_track(type_id: u32) -> bool {
    type_id == ON_CPU_TYPE || type_id == CPU_IDLE_TYPE
}

/// Every event of a trace with its id, in id order.
fn events_by_id(path: &Path) -> Vec<(EventId, Event)> {
    let r = TraceReader::open(path).unwrap();
    let mut all: Vec<(EventId, Event)> = r
        .events_overlapping(TimeRange::all(), &Filter::all())
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.id, e.event)
        })
        .collect();
    all.sort_by_key(|(id, _)| *id);
    all
}

/// The trace at `fresh` as the collector wrote it before the CPU tracks: same producers, types
/// and events, without the tracks.
fn without_cpu_tracks(fresh: &Path, old: &Path) {
    let r = TraceReader::open(fresh).unwrap();
    let info = r.info().unwrap();
    let mut w = TraceWriter::create(old, &info.meta).unwrap();
    for t in r.event_types().unwrap().iter().filter(|t| !is_track(t.id)) {
        w.add_event_type(t).unwrap();
    }
    for p in r.producers().unwrap() {
        w.add_producer(&p).unwrap();
    }
    for (_, e) in events_by_id(fresh) {
        if !is_track(e.type_id) {
            w.push(&e).unwrap();
        }
    }
    w.finish(true).unwrap();
}

/// Events as comparable text, sorted.
fn sorted(events: impl Iterator<Item = Event>) -> Vec<String> {
    let mut v: Vec<String> = events.map(|e| format!("{e:?}")).collect();
    v.sort();
    v
}

/// Imports `capture`, upgrades a copy without tracks, and compares. Returns the slices derived.
fn upgraded_equals_fresh(capture: &str, format: Format) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let fresh = dir.path().join("fresh.db");
    import_file(&real(capture), format, &fresh, false).unwrap();
    let old = dir.path().join("old.db");
    without_cpu_tracks(&fresh, &old);
    let before = events_by_id(&old);
    assert!(!before.iter().any(|(_, e)| is_track(e.type_id)));

    let report = upgrade_trace(&old).unwrap();
    let CpuTracks::Derived { slices, cpus } = report.cpu_tracks else {
        panic!("{capture}: {:?}", report.cpu_tracks)
    };
    let after = events_by_id(&old);
    assert_eq!(report.events, after.len() as u64);
    assert_eq!(
        TraceReader::open(&old).unwrap().info().unwrap().event_count,
        after.len() as u64
    );

    // Every event of the old trace under its id.
    let by_id: HashMap<EventId, &Event> = after.iter().map(|(id, e)| (*id, e)).collect();
    for (id, e) in &before {
        assert_eq!(by_id.get(id), Some(&e), "{capture}: event {id}");
    }
    // The tracks a fresh ingest writes, no more, no fewer.
    let want = sorted(
        events_by_id(&fresh)
            .into_iter()
            .map(|(_, e)| e)
            .filter(|e| is_track(e.type_id)),
    );
    let got = sorted(
        after
            .into_iter()
            .map(|(_, e)| e)
            .filter(|e| is_track(e.type_id)),
    );
    assert_eq!(got.len() as u64, slices);
    assert!(slices > 0 && cpus > 0);
    assert_eq!(got, want, "{capture}");
    // Whole views agree too: the CPU utilisation the summary gives per CPU and type.
    let summary = |p: &Path| {
        let r = TraceReader::open(p).unwrap();
        let info = r.info().unwrap();
        let mut cells: std::collections::BTreeMap<(u32, u32), (u64, i64)> = Default::default();
        for b in r
            .summary(
                TimeRange::new(info.t_min, info.t_max + 1),
                socscope_tracedb::Resolution::MaxBuckets(4),
                &Filter::all().types([ON_CPU_TYPE, CPU_IDLE_TYPE]),
            )
            .unwrap()
            .buckets
        {
            for c in b.cells {
                let t = cells.entry((c.producer, c.type_id)).or_default();
                t.0 += c.count;
                t.1 += c.state_ns;
            }
        }
        cells
    };
    assert_eq!(summary(&old), summary(&fresh), "{capture}: summary");

    // A second upgrade finds them and leaves the trace alone.
    let again = upgrade_trace(&old).unwrap();
    assert_eq!(
        (again.cpu_tracks, again.events),
        (CpuTracks::Present, report.events)
    );
    // And a fresh trace already has them.
    assert_eq!(
        upgrade_trace(&fresh).unwrap().cpu_tracks,
        CpuTracks::Present
    );
    slices
}

#[test]
fn an_ftrace_capture_upgraded_has_the_cpu_track_of_a_fresh_import() {
    // 67 slices on its one CPU (see import.rs).
    assert_eq!(
        upgraded_equals_fresh("ftrace/tci-trace-android-sched-irq.txt", Format::Ftrace),
        67
    );
}

#[test]
fn a_trace_cmd_capture_upgraded_has_the_cpu_tracks_of_a_fresh_import() {
    // 1 553 slices (see import_tracecmd.rs).
    assert_eq!(
        upgraded_equals_fresh("trace-cmd/lisa-example_rtapp-v6.dat", Format::TraceCmd),
        1553
    );
}
