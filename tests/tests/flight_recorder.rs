//! Triggers and the flight recorder end to end: a simulated board's stream (I/O stress delaying the vsync
//! callback) replayed through the collector, with the trigger firings checked in a full capture and the
//! saved windows checked against a full capture of the same stream, event for event.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use socscope_collector::flight::FlightConfig;
use socscope_collector::trigger::{TriggerRule, TriggerSet};
use socscope_collector::{IngestConfig, Notice, replay};
use socscope_sim::{Scenario, SimConfig};
use socscope_tracedb::{
    AnalysisData, Catalog, EventKind, Filter, ParamValue, TimeRange, TraceReader,
};
use support::{capture_file, ingest_stats};

const MS: i64 = 1_000_000;
const S: i64 = 1_000_000_000;

/// 10 s of the default board with I/O stress from 4 s to 7 s: the vsync callback's `running` then starts
/// up to ~29 ms after the previous one (20 ms otherwise).
fn stressed_capture(dir: &Path) -> PathBuf {
    let path = dir.join("run.wire");
    let config = SimConfig {
        duration_s: 10.0,
        io_stress: vec![Scenario {
            at: 4.0,
            duration: 3.0,
        }],
        ..SimConfig::default()
    };
    capture_file(&config, &path);
    path
}

fn triggers(rules: &[&str]) -> TriggerSet {
    TriggerSet::new(
        rules
            .iter()
            .map(|r| r.parse::<TriggerRule>().expect("the rule parses"))
            .collect(),
        Vec::new(),
    )
    .expect("the trigger set")
}

fn traces(dir: &Path) -> Vec<PathBuf> {
    let catalog = Catalog::open(dir).expect("the catalog opens");
    catalog
        .traces()
        .expect("the catalog lists")
        .iter()
        .map(|t| catalog.resolve(t))
        .collect()
}

fn trigger_annotations(reader: &TraceReader) -> Vec<(i64, i64, String)> {
    let results = reader.analysis_results(None, None).expect("the results");
    let mut out = Vec::new();
    for r in results {
        let Some(AnalysisData::Annotation { types, annotations }) =
            reader.analysis_data(r.id).expect("a result's data")
        else {
            continue;
        };
        assert_eq!(types[0].name, "trigger");
        for a in annotations {
            let (ParamValue::Signed(start), ParamValue::Signed(end), ParamValue::String(rule)) =
                (&a.values[0], &a.values[1], &a.values[5])
            else {
                panic!("{a:?}")
            };
            out.push((*start, *end, rule.clone()));
        }
    }
    out
}

#[test]
fn triggers_annotate_a_full_capture_at_the_stress() {
    let tmp = tempfile::tempdir().unwrap();
    let wire = stressed_capture(tmp.path());
    let mut config = IngestConfig::new(tmp.path().join("full"));
    config.triggers = Some(triggers(&[
        "gap:running@vsync-cb>25ms",
        "state:irq@vsync>1s",
        "marker:frame decoded",
        "loss",
    ]));
    let (reports, notices) = replay::replay_file(&wire, config).unwrap();
    assert_eq!(reports.len(), 1);
    let reader = TraceReader::open(&reports[0].path).unwrap();
    let marks = trigger_annotations(&reader);
    let gaps: Vec<_> = marks
        .iter()
        .filter(|m| m.2 == "gap:running@vsync-cb>25ms")
        .collect();
    // Every late start is inside the stress, and there are some.
    assert!(!gaps.is_empty(), "{marks:?}");
    for (start, end, _) in &gaps {
        assert!(end - start > 25 * MS, "{start} {end}");
        assert!(
            *start >= 4 * S - 30 * MS && *end <= 7 * S + 100 * MS,
            "{start} {end}"
        );
    }
    // 25 frames decoded a second: rate-limited to 10 recorded per second of trace, the rest counted.
    let markers = marks
        .iter()
        .filter(|m| m.2 == "marker:frame decoded")
        .count() as i64;
    let stats = ingest_stats(&reader);
    let suppressed = stats["triggers_suppressed.marker:frame decoded"];
    assert!(markers > 0 && suppressed > 0, "{markers} {suppressed}");
    assert_eq!(
        markers + suppressed,
        250,
        "the sim decodes 25 frames/s for 10 s"
    );
    assert_eq!(stats["triggers_fired"], marks.len() as i64);
    assert!(
        !marks
            .iter()
            .any(|m| m.2 == "loss" || m.2.starts_with("state:"))
    );
    // The catalog tags the trace with the rules that fired.
    let info = reader.info().unwrap();
    let tag = info
        .meta
        .params
        .iter()
        .find(|(n, _)| n == "trigger")
        .map(|(_, v)| v.to_string());
    assert_eq!(
        tag.as_deref(),
        Some("marker:frame decoded; gap:running@vsync-cb>25ms")
    );
    let catalog = Catalog::open(tmp.path().join("full")).unwrap();
    let listed = catalog.traces_by_type_params(
        "socscope-live",
        &[("trigger", "marker:frame decoded; gap:running@vsync-cb>25ms")],
    );
    assert_eq!(listed.map(|l| l.len()).unwrap_or(0), 1);
    // Each firing was also said as it happened.
    let said = notices
        .iter()
        .filter(|n| matches!(n, Notice::TriggerFired { .. }))
        .count();
    assert_eq!(said, marks.len());
}

/// An event as both traces can name it (producer ids are given in order of appearance).
type Key = (i64, i64, String, String, Option<u16>, String);

fn events_within(path: &Path, range: TimeRange) -> BTreeMap<Key, usize> {
    let reader = TraceReader::open(path).unwrap();
    let names: BTreeMap<u32, String> = reader
        .producers()
        .unwrap()
        .into_iter()
        .map(|p| (p.id, p.name))
        .collect();
    let types: BTreeMap<u32, String> = reader
        .event_types()
        .unwrap()
        .into_iter()
        .map(|t| (t.id, t.name))
        .collect();
    let mut out = BTreeMap::new();
    for e in reader.events(range, &Filter::all()).unwrap() {
        let e = e.unwrap();
        let ty = &types[&e.type_id];
        // Allocated bytes are a running sum from the capture's start: a window starts it again.
        if ty == "allocated_bytes" || e.end() > range.end || e.ts < range.start {
            continue;
        }
        // A wake-up's arrival is the wakee's next switch-in, which, near the window's start, can depend
        // on what another CPU ran before it: links are compared by their start, waker and target.
        let (extra, end) = match e.kind {
            EventKind::Link { target, .. } => (names[&target].clone(), e.ts),
            _ => (format!("{:?}", e.params), e.end()),
        };
        let key = (
            e.ts,
            end,
            ty.clone(),
            names[&e.producer].clone(),
            e.cpu,
            extra,
        );
        *out.entry(key).or_default() += 1;
    }
    out
}

/// Keys as strings, so that the two kinds of key compare the same way.
fn compare_keys<K: std::fmt::Debug>(m: &BTreeMap<K, usize>) -> BTreeMap<String, usize> {
    m.iter().map(|(k, n)| (format!("{k:?}"), *n)).collect()
}

/// When every CPU of a window had its first context switch: from then on the running threads are known.
fn settle_time(path: &Path) -> i64 {
    let reader = TraceReader::open(path).unwrap();
    let running = reader.event_type_by_name("running").unwrap().unwrap().id;
    let mut first_switch: BTreeMap<u16, i64> = BTreeMap::new();
    let all = TimeRange::new(i64::MIN / 2, i64::MAX / 2);
    for e in reader.events(all, &Filter::all()).unwrap() {
        let e = e.unwrap();
        if e.type_id == running
            && let Some(cpu) = e.cpu
        {
            let t = first_switch.entry(cpu).or_insert(i64::MAX);
            *t = (*t).min(e.end());
        }
    }
    first_switch.values().copied().max().unwrap_or(i64::MAX)
}

#[test]
fn a_saved_window_holds_every_event_of_a_full_capture_within_it_on_the_same_clock() {
    let tmp = tempfile::tempdir().unwrap();
    let wire = stressed_capture(tmp.path());
    let (full, _) = replay::replay_file(&wire, IngestConfig::new(tmp.path().join("full"))).unwrap();
    let mut config = IngestConfig::new(tmp.path().join("flight"));
    config.triggers = Some(triggers(&["gap:running@vsync-cb>25ms"]));
    config.flight = Some(FlightConfig::new(3 * S, S, S / 2));
    let (saved, notices) = replay::replay_file(&wire, config).unwrap();
    // The stress's late starts are less than 0.5 s apart at times, more at others: one window per run of
    // overlapping triggers, each complete.
    assert!(!saved.is_empty(), "{notices:?}");
    let watch = notices
        .iter()
        .find_map(|n| match n {
            Notice::WatchEnded(r) => Some(r.clone()),
            _ => None,
        })
        .expect("the watch ended");
    assert_eq!(watch.saved.len(), saved.len());
    assert!(watch.complete && watch.peak_ring_bytes > 0);
    let mut firings_in_windows = 0;
    for w in &saved {
        assert!(w.complete, "{w:?}");
        let reader = TraceReader::open(&w.path).unwrap();
        let stats = ingest_stats(&reader);
        let range = TimeRange::new(stats["window_start_ns"], stats["window_end_ns"]);
        assert_eq!(stats["window_cut_short"], 0);
        assert_eq!(stats["window_pre_missing_ns"], 0);
        assert_eq!(
            stats["records_lost_in_transit"], 0,
            "a window starts mid-stream without loss"
        );
        let marks = trigger_annotations(&reader);
        firings_in_windows += marks.len();
        for m in &marks {
            assert!(m.0 >= range.start && m.1 <= range.end, "{m:?} in {range:?}");
        }
        // Every event of the full capture inside the window is in the window, at the same time, of the
        // same type, on the same CPU. Until a CPU's first context switch in the window, the thread it
        // runs is unknown (as at the start of any capture): those events are the CPU's, and a wake-up's
        // arrival is not known; after it, every event is the same in both, producer included.
        let a = events_within(&full[0].path, range);
        let b = events_within(&w.path, range);
        let settled = settle_time(&w.path);
        assert!(settled < range.start + 100 * MS, "{settled} {range:?}");
        let loose = |m: &BTreeMap<Key, usize>| {
            let mut out: BTreeMap<(i64, String, Option<u16>), usize> = BTreeMap::new();
            for ((ts, _, ty, _, cpu, _), n) in m {
                *out.entry((*ts, ty.clone(), *cpu)).or_default() += n;
            }
            compare_keys(&out)
        };
        let exact = |m: &BTreeMap<Key, usize>| {
            let kept: BTreeMap<Key, usize> = m
                .iter()
                .filter(|(k, _)| k.0 >= settled)
                .map(|(k, n)| (k.clone(), *n))
                .collect();
            compare_keys(&kept)
        };
        for (what, x, y) in [
            ("every event", loose(&a), loose(&b)),
            ("after the first switches", exact(&a), exact(&b)),
        ] {
            let missing: Vec<_> = x
                .iter()
                .filter(|(k, n)| y.get(*k) != Some(*n))
                .take(5)
                .collect();
            let extra: Vec<_> = y
                .iter()
                .filter(|(k, n)| x.get(*k) != Some(*n))
                .take(5)
                .collect();
            assert!(
                missing.is_empty() && extra.is_empty(),
                "window {range:?}, {what}: {} in the full capture, {} in the window; missing {missing:?}, extra {extra:?}",
                x.len(),
                y.len()
            );
        }
        assert!(a.len() > 10_000, "{}", a.len());
        assert!(
            stats["clipped_exits"] > 0,
            "states crossing the window's start are clipped and counted"
        );
    }
    assert_eq!(firings_in_windows, watch.firings.len());
    assert_eq!(traces(&tmp.path().join("flight")).len(), saved.len());
}

#[test]
fn saves_are_bounded_and_a_stream_ending_inside_a_window_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let wire = stressed_capture(tmp.path());
    // The stream cut 4.6 s in: the board "disconnects" inside the first window's post part.
    let bytes = std::fs::read(&wire).unwrap();
    let inventory = support::inventory(&bytes);
    let cut_at = inventory[inventory.len() * 46 / 100].offset;
    let cut = tmp.path().join("cut.wire");
    std::fs::write(&cut, &bytes[..cut_at]).unwrap();
    let mut config = IngestConfig::new(tmp.path().join("flight"));
    config.triggers = Some(triggers(&["gap:running@vsync-cb>25ms"]));
    let mut flight = FlightConfig::new(3 * S, S, 2 * S);
    flight.max_saves = Some(1);
    config.flight = Some(flight);
    let (saved, notices) = replay::replay_file(&cut, config).unwrap();
    assert_eq!(saved.len(), 1, "{notices:?}");
    assert!(!saved[0].complete);
    let reader = TraceReader::open(&saved[0].path).unwrap();
    let stats = ingest_stats(&reader);
    assert_eq!(stats["window_cut_short"], 1);
    let why = reader
        .ingest_stats()
        .unwrap()
        .into_iter()
        .find(|s| s.name == "window_cut_short")
        .unwrap()
        .description;
    assert!(why.contains("the link ended"), "{why}");

    // The whole stream with one save allowed and a short post: later triggers are counted, not saved.
    let mut config = IngestConfig::new(tmp.path().join("bounded"));
    config.triggers = Some(triggers(&["gap:running@vsync-cb>25ms"]));
    let mut flight = FlightConfig::new(3 * S, S, 10 * MS);
    flight.max_saves = Some(1);
    config.flight = Some(flight);
    let (saved, notices) = replay::replay_file(&wire, config).unwrap();
    assert_eq!(saved.len(), 1);
    let watch = notices
        .iter()
        .find_map(|n| match n {
            Notice::WatchEnded(r) => Some(r.clone()),
            _ => None,
        })
        .unwrap();
    assert!(watch.not_saved > 0, "{watch:?}");
    assert!(notices.iter().any(
        |n| matches!(n, Notice::TriggerNote { message, .. } if message.contains("--max-saves"))
    ));
}
