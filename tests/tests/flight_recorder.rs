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

/// The `producers` parameter of every trigger annotation.
fn trigger_producers(reader: &TraceReader) -> Vec<String> {
    let mut out = Vec::new();
    for r in reader.analysis_results(None, None).expect("the results") {
        if let Some(AnalysisData::Annotation { annotations, .. }) =
            reader.analysis_data(r.id).expect("a result's data")
        {
            for a in annotations {
                if let ParamValue::String(p) = &a.values[2] {
                    out.push(p.clone());
                }
            }
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
        // Each firing names its producer by the window's own ids (the watcher numbered them in its
        // reconstruction of the whole stream).
        let names: BTreeMap<u32, String> = reader
            .producers()
            .unwrap()
            .into_iter()
            .map(|p| (p.id, p.name))
            .collect();
        for producers in trigger_producers(&reader) {
            let id: u32 = producers.parse().expect("one producer id");
            assert_eq!(names.get(&id).map(String::as_str), Some("vsync-cb"));
        }
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

/// The stored dictionaries of a trace (stream, data).
fn stored_dictionaries(path: &Path) -> Vec<(i64, Vec<u8>)> {
    let reader = TraceReader::open(path).unwrap();
    let mut st = reader
        .connection()
        .prepare("SELECT stream, data FROM chunk_dict ORDER BY stream")
        .unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// The recorder's end-of-watch report among `notices`.
fn watch_report(notices: &[Notice]) -> socscope_collector::flight::WatchReport {
    notices
        .iter()
        .find_map(|n| match n {
            Notice::WatchEnded(r) => Some(r.clone()),
            _ => None,
        })
        .expect("the watch's end is said")
}

/// A window saved slowly: 20 s of the board, stress from 4 s to 7 s, a 10 s post window, and a
/// window's store committing every 2 ms, so the saver falls behind the stream by more than the
/// batches it may queue. The stream then waits for it (counted) and loses nothing: the window holds
/// exactly what the same window saved in the stream's own thread (the path taken when no thread can be
/// started) holds, and every event of a full capture within it. Later windows of a session take the
/// dictionaries its first window trained.
#[test]
fn a_saver_behind_the_stream_slows_it_and_a_window_saved_inline_is_the_same() {
    let tmp = tempfile::tempdir().unwrap();
    let wire = tmp.path().join("long.wire");
    let sim = SimConfig {
        duration_s: 20.0,
        io_stress: vec![Scenario {
            at: 4.0,
            duration: 3.0,
        }],
        ..SimConfig::default()
    };
    capture_file(&sim, &wire);
    let (full, _) = replay::replay_file(&wire, IngestConfig::new(tmp.path().join("full"))).unwrap();
    let save = |name: &str, saver_thread: bool| {
        let mut config = IngestConfig::new(tmp.path().join(name));
        config.commit_interval = std::time::Duration::from_millis(2);
        config.triggers = Some(triggers(&["gap:running@vsync-cb>25ms"]));
        let mut flight = FlightConfig::new(10 * S, S, 10 * S);
        flight.saver_thread = saver_thread;
        config.flight = Some(flight);
        let (saved, notices) = replay::replay_file(&wire, config).unwrap();
        assert_eq!(saved.len(), 1, "{notices:?}");
        assert!(saved[0].complete, "{:?}", saved[0]);
        (saved[0].path.clone(), watch_report(&notices))
    };
    let (threaded, watch) = save("threaded", true);
    assert!(
        watch.saver_waits > 0,
        "the stream waited for the saver: {watch:?}"
    );
    assert_eq!(watch.saved_inline, 0);
    let (inline, watch) = save("inline", false);
    assert_eq!(watch.saved_inline, 1, "{watch:?}");
    assert_eq!(watch.saver_waits, 0);

    let range = |path: &Path| {
        let stats = ingest_stats(&TraceReader::open(path).unwrap());
        assert_eq!(stats["window_cut_short"], 0);
        TimeRange::new(stats["window_start_ns"], stats["window_end_ns"])
    };
    let window = range(&threaded);
    assert_eq!(window, range(&inline));
    assert!(window.end - window.start > 10 * S, "{window:?}");
    let a = events_within(&threaded, window);
    assert!(a.len() > 100_000, "{}", a.len());
    assert!(
        compare_keys(&a) == compare_keys(&events_within(&inline, window)),
        "the same window, saved on a thread or inline"
    );
    // Every event of the full capture within it, by time, type and CPU.
    let loose = |m: &BTreeMap<Key, usize>| {
        let mut out: BTreeMap<(i64, String, Option<u16>), usize> = BTreeMap::new();
        for ((ts, _, ty, _, cpu, _), n) in m {
            *out.entry((*ts, ty.clone(), *cpu)).or_default() += n;
        }
        out
    };
    assert!(loose(&a) == loose(&events_within(&full[0].path, window)));
}

/// Windows of one session after the first take the dictionaries the first one trained (the same
/// bytes, stored in their own file) rather than training their own.
#[test]
fn later_windows_of_a_session_reuse_the_first_windows_dictionaries() {
    let tmp = tempfile::tempdir().unwrap();
    let wire = tmp.path().join("two.wire");
    // Two stressed spells far apart: two windows, each long enough to train dictionaries.
    let sim = SimConfig {
        duration_s: 24.0,
        io_stress: vec![
            Scenario {
                at: 4.0,
                duration: 2.0,
            },
            Scenario {
                at: 16.0,
                duration: 2.0,
            },
        ],
        ..SimConfig::default()
    };
    capture_file(&sim, &wire);
    let mut config = IngestConfig::new(tmp.path().join("flight"));
    config.triggers = Some(triggers(&["gap:running@vsync-cb>25ms"]));
    config.flight = Some(FlightConfig::new(10 * S, 3 * S, 2 * S));
    let (saved, notices) = replay::replay_file(&wire, config).unwrap();
    assert_eq!(saved.len(), 2, "{notices:?}");
    let first = stored_dictionaries(&saved[0].path);
    let second = stored_dictionaries(&saved[1].path);
    assert!(!first.is_empty(), "the first window trained dictionaries");
    // A stream the first window trained for has the very same dictionary in the second (a stream too
    // sparse to train in the first may train in the second, and then shares its own).
    let mut reused = 0;
    for (stream, data) in &second {
        if let Some((_, theirs)) = first.iter().find(|(s, _)| s == stream) {
            assert!(theirs == data, "stream {stream}: a dictionary of its own");
            reused += 1;
        }
    }
    assert!(
        reused > 0,
        "none of the second window's {} dictionaries is the first's ({} there)",
        second.len(),
        first.len()
    );
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

#[test]
fn a_replay_whose_triggers_never_fire_watches_the_session_and_saves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let wire = stressed_capture(tmp.path());
    let mut config = IngestConfig::new(tmp.path().join("flight"));
    // No marker of that name on this board: the rule never fires.
    config.triggers = Some(triggers(&["marker:never-on-this-board"]));
    config.flight = Some(FlightConfig::new(60 * S, S, S));
    let (saved, notices) = replay::replay_file(&wire, config)
        .expect("a watched session with no firing is not an unreadable input");
    assert!(saved.is_empty(), "{saved:?}");
    let stored: Vec<_> = std::fs::read_dir(tmp.path().join("flight"))
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "db") && !p.ends_with("catalog.db"))
                .collect()
        })
        .unwrap_or_default();
    assert!(stored.is_empty(), "{stored:?}");
    let watch = notices
        .iter()
        .find_map(|n| match n {
            Notice::WatchEnded(r) => Some(r.clone()),
            _ => None,
        })
        .expect("the watch's end is said");
    assert_eq!(watch.not_saved, 0, "{watch:?}");
    assert!(watch.records > 0 && watch.firings.is_empty(), "{watch:?}");

    // Random bytes under a flight recorder are still refused as no session at all.
    let junk = tmp.path().join("junk.wire");
    std::fs::write(
        &junk,
        (0..4096u32)
            .map(|i| (i * 37 % 251) as u8)
            .collect::<Vec<_>>(),
    )
    .unwrap();
    let mut config = IngestConfig::new(tmp.path().join("junk"));
    config.triggers = Some(triggers(&["loss"]));
    config.flight = Some(FlightConfig::new(60 * S, S, S));
    let err = replay::replay_file(&junk, config).unwrap_err().to_string();
    assert!(err.contains("no session found"), "{err}");
}

/// A board whose CPU 0 enters IRQ 7 at 10 ms and never leaves it (a hang), while CPU 1 goes on switching
/// threads every 5 ms for 3 s, with IRQ 9 every 10 ms up to 1 s (a periodic event that stops). The real
/// agent encodes it (1 MHz clock, blocks sent once 20 ms old); returns the stream and, after each step,
/// (board time in µs, stream bytes so far).
fn hanging_board() -> (Vec<u8>, Vec<(u64, usize)>) {
    use socscope_agent::{Clock, Config, SmallAgent, Transport, TransportError};
    use std::cell::Cell;
    use std::rc::Rc;

    #[derive(Clone, Default)]
    struct Time(Rc<Cell<u64>>);
    impl Clock for Time {
        fn now(&mut self) -> u64 {
            self.0.get()
        }
    }
    #[derive(Default)]
    struct Bytes(Vec<u8>);
    impl Transport for Bytes {
        fn write_frame(&mut self, f: &[u8]) -> Result<(), TransportError> {
            self.0.extend_from_slice(f);
            Ok(())
        }
    }

    let time = Time::default();
    let agent = Box::new(SmallAgent::new(
        time.clone(),
        Config {
            board: "hang",
            soc: "sim",
            os: "linux",
            application: "test",
            cpu_count: 2,
            tick_rate_hz: 1_000_000,
            session_id: 1,
            flush_latency_ticks: 20_000,
            heartbeat_ticks: 1_000_000,
            hello_every_ticks: 0,
            token: "",
        },
    ));
    let mut out = Bytes::default();
    let mut marks = Vec::new();
    agent.poll(&mut out).unwrap();
    agent.context_switch(0, 0, 100).unwrap();
    agent.context_switch(1, 0, 200).unwrap();
    for step in 1..=600u64 {
        let t = step * 5_000;
        time.0.set(t);
        if t == 10_000 {
            agent.irq_entry(0, 7).unwrap();
        }
        let (prev, next) = if step % 2 == 0 {
            (201, 200)
        } else {
            (200, 201)
        };
        agent.context_switch(1, prev, next).unwrap();
        if t % 10_000 == 0 && t <= 1_000_000 {
            agent.irq_entry(1, 9).unwrap();
            time.0.set(t + 1_000);
            agent.irq_exit(1).unwrap();
        }
        agent.poll(&mut out).unwrap();
        marks.push((t, out.0.len()));
    }
    agent.finish(&mut out).unwrap();
    (out.0, marks)
}

const HANG_RULES: [&str; 2] = ["state:irq@irq 7>100ms", "gap:irq@irq 9>50ms"];

#[test]
fn a_hang_and_a_periodic_event_that_stops_fire_while_the_stream_goes_on_once_each() {
    let tmp = tempfile::tempdir().unwrap();
    let (bytes, marks) = hanging_board();
    let upto = |us: u64| marks.iter().find(|m| m.0 >= us).unwrap().1;
    let fired = |notices: &[Notice]| -> Vec<(String, i64, i64)> {
        notices
            .iter()
            .filter_map(|n| match n {
                Notice::TriggerFired { firing, .. } => {
                    Some((firing.rule.clone(), firing.at, firing.start))
                }
                _ => None,
            })
            .collect()
    };

    // A full capture: the stream fed as it arrives.
    let mut config = IngestConfig::new(tmp.path().join("full"));
    config.triggers = Some(triggers(&HANG_RULES));
    let mut ingest = socscope_collector::intake::Intake::new(config, "hang");
    // 0.3 s in: the state is open 290 ms (past its 100 ms limit), but the stream's time is judged
    // 250 ms behind its latest record: not yet.
    ingest.feed(&bytes[..upto(300_000)]).unwrap();
    assert_eq!(fired(&ingest.take_notices()), vec![]);
    // 0.5 s in: the hang fires, at its start plus the limit, while the IRQ is still open.
    ingest.feed(&bytes[upto(300_000)..upto(500_000)]).unwrap();
    assert_eq!(
        fired(&ingest.take_notices()),
        vec![(HANG_RULES[0].to_string(), 110 * MS, 10 * MS)]
    );
    // 1.5 s in: IRQ 9 stopped after 1 s: its deadline passed.
    ingest.feed(&bytes[upto(500_000)..upto(1_500_000)]).unwrap();
    assert_eq!(
        fired(&ingest.take_notices()),
        vec![(HANG_RULES[1].to_string(), 1_050 * MS, 1_000 * MS)]
    );
    // The rest of the stream, the session's end (which closes the IRQ at the capture's end): nothing
    // fires twice.
    ingest.feed(&bytes[upto(1_500_000)..]).unwrap();
    let (reports, rest) = ingest.finish().unwrap();
    let mut notices = rest;
    assert_eq!(fired(&notices), vec![]);
    assert_eq!(reports.len(), 1);
    let reader = TraceReader::open(&reports[0].path).unwrap();
    let mut marks = trigger_annotations(&reader);
    marks.sort();
    // The hang's annotation spans the state as the capture ends it; the gap's, until it was judged.
    assert_eq!(marks.len(), 2, "{marks:?}");
    assert_eq!(marks[0].2, HANG_RULES[0]);
    assert_eq!((marks[0].0, marks[0].1), (10 * MS, 3_000 * MS));
    assert_eq!(marks[1].2, HANG_RULES[1]);
    assert_eq!(marks[1].0, 1_000 * MS);
    assert!(marks[1].1 > 1_050 * MS, "{marks:?}");
    assert_eq!(ingest_stats(&reader)["triggers_fired"], 2);
    notices.clear();

    // The flight recorder saves each window while the board goes on.
    let mut config = IngestConfig::new(tmp.path().join("flight"));
    config.triggers = Some(triggers(&HANG_RULES));
    // The pre window longer than the state limit: the hung IRQ's entry is in the window.
    config.flight = Some(FlightConfig::new(3 * S, 200 * MS, 200 * MS));
    let mut ingest = socscope_collector::intake::Intake::new(config, "hang");
    ingest.feed(&bytes[..upto(2_000_000)]).unwrap();
    notices.extend(ingest.take_notices());
    assert_eq!(fired(&notices).len(), 2, "{notices:?}");
    ingest.feed(&bytes[upto(2_000_000)..]).unwrap();
    let (saved, rest) = ingest.finish().unwrap();
    notices.extend(rest);
    // CPU 0 is silent after the hang: the first window waits for it up to a second past its end, so
    // the gap's firing may join it. Either way, each firing is in the saved windows once.
    assert!(!saved.is_empty());
    let mut rules = Vec::new();
    for w in &saved {
        let reader = TraceReader::open(&w.path).unwrap();
        let marks = trigger_annotations(&reader);
        // Each names its IRQ by the window's own producer ids (IRQs get theirs as they first appear:
        // the watcher, which saw the whole stream, numbered them otherwise).
        let names: BTreeMap<u32, String> = reader
            .producers()
            .unwrap()
            .into_iter()
            .map(|p| (p.id, p.name))
            .collect();
        for (m, producers) in marks.iter().zip(trigger_producers(&reader)) {
            let irq = if m.2 == HANG_RULES[0] {
                "irq 7"
            } else {
                "irq 9"
            };
            let id: u32 = producers.parse().expect("one producer id");
            assert_eq!(names.get(&id).map(String::as_str), Some(irq), "{names:?}");
        }
        rules.extend(marks.into_iter().map(|m| m.2));
    }
    rules.sort();
    assert_eq!(rules, vec![HANG_RULES[1], HANG_RULES[0]]);
}
