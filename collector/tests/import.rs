//! Imports of the real captures of `shared/data/traces/` and of the hand-written KPTrace grammar set
//! (`protocols/formats/tests/data/kptrace/`), with counts checked by hand.

mod common;

use std::path::{Path, PathBuf};

use common::real;
use socscope_collector::import::{ImportOptions, ImportReport, import};
use socscope_formats::Format;
use socscope_tracedb::{EventCategory, Filter, TimeRange, TraceReader};

fn kp(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../protocols/formats/tests/data/kptrace")
        .join(name)
}

fn run(
    files: &[PathBuf],
    format: Format,
    dir: &Path,
    strict: bool,
) -> socscope_collector::Result<(ImportReport, Vec<String>)> {
    let mut warnings = Vec::new();
    let mut on_skip = |e: &socscope_formats::ParseError, _n: u64| warnings.push(e.to_string());
    let mut on_progress = |_b: u64| {};
    let mut opts = ImportOptions {
        strict,
        on_skip: &mut on_skip,
        on_progress: &mut on_progress,
    };
    let out = dir.join("t.db");
    let r = import(files, format, &out, &mut opts)?;
    Ok((r, warnings))
}

/// Imports one of the real captures with `--strict`; it must succeed.
fn import_real(rel: &str, format: Format, dir: &Path) -> (ImportReport, Vec<String>) {
    run(&[real(rel)], format, dir, true).unwrap()
}

/// (punctual, state, link, variable) counts, producers.
fn counts(path: &Path) -> ([u64; 4], usize) {
    let r = TraceReader::open(path).unwrap();
    let mut c = [0u64; 4];
    for e in r.events(TimeRange::all(), &Filter::all()).unwrap() {
        let e = e.unwrap().event;
        c[match e.category() {
            EventCategory::Punctual => 0,
            EventCategory::State => 1,
            EventCategory::Link => 2,
            EventCategory::Variable => 3,
        }] += 1;
    }
    (c, r.producers().unwrap().len())
}

fn stat(path: &Path, name: &str) -> i64 {
    TraceReader::open(path)
        .unwrap()
        .ingest_stats()
        .unwrap()
        .into_iter()
        .find(|s| s.name == name)
        .map_or(-1, |s| s.value)
}

#[test]
fn ftrace_android_sched() {
    // 82 sched_switch on CPUs 0, 1, 2 (awk '{print $2}' | uniq -c): 82 running states closed by switches
    // and 3 still running at the end; 57 sched_wakeup → 57 links.
    let dir = tempfile::tempdir().unwrap();
    let (r, w) = import_real(
        "ftrace/tci-trace-android-sched.txt",
        Format::Ftrace,
        dir.path(),
    );
    assert!(w.is_empty());
    assert_eq!(r.records, 139);
    // Each running state is also a slice of its CPU's track.
    assert_eq!(counts(&r.path).0, [0, 170, 57, 0]);
    assert_eq!(stat(&r.path, "clipped_open_states"), 3);
}

#[test]
fn ftrace_android_sched_irq() {
    // One CPU ([000] on all 139 lines): 67 switches + 1 open running state + 9 softirq entry/exit pairs
    // = 77 states, and 67 slices of the CPU's track (one per running state but the empty one of the
    // first switch); 45 wakeups → links;
    // 9 softirq_raise → punctual events of their own type.
    let dir = tempfile::tempdir().unwrap();
    let (r, _) = import_real(
        "ftrace/tci-trace-android-sched-irq.txt",
        Format::Ftrace,
        dir.path(),
    );
    assert_eq!(counts(&r.path).0, [9, 144, 45, 0]);
    let reader = TraceReader::open(&r.path).unwrap();
    assert!(
        reader
            .producers()
            .unwrap()
            .iter()
            .any(|p| p.name == "TIMER")
    );
    assert!(
        reader
            .producers()
            .unwrap()
            .iter()
            .any(|p| p.name == "EventThread")
    );
}

#[test]
fn ftrace_syscalls_without_header() {
    // 30 sched_waking → links, and the 30 sched_wakeup that follow them are the same wake-ups (stored as
    // punctual events, not links): 29 pair with a waking, 1 has none → 31 links.
    let dir = tempfile::tempdir().unwrap();
    let (r, _) = import_real("ftrace/tci-ftrace_syscalls.txt", Format::Ftrace, dir.path());
    assert_eq!(r.records, 1052);
    let (c, _) = counts(&r.path);
    assert_eq!(c[2], 31);
    // grep -c 'sys_.*(' : 423 syscall entries `sys_x(...)`.
    assert_eq!(stat(&r.path, "records.syscall"), 423);
    // The syscall tracer names the calls; their x86-64 numbers are kept beside the names.
    let reader = TraceReader::open(&r.path).unwrap();
    let ty = reader
        .event_types()
        .unwrap()
        .into_iter()
        .find(|t| t.name == "syscall")
        .unwrap();
    let at = |n: &str| ty.params.iter().position(|p| p.name == n).unwrap();
    let (nr, name) = (at("nr"), at("name"));
    let mut seen = 0;
    for e in reader
        .events(TimeRange::all(), &Filter::all().types([ty.id]))
        .unwrap()
    {
        let e = e.unwrap().event;
        let (n, v) = (e.params[name].to_string(), e.params[nr].to_string());
        match n.as_str() {
            "close" => assert_eq!(v, "3"),
            "rt_sigprocmask" => assert_eq!(v, "14"),
            "recvmsg" => assert_eq!(v, "47"),
            "clock_gettime" => assert_eq!(v, "228"),
            _ => continue,
        }
        seen += 1;
    }
    assert!(seen > 10, "{seen}");
}

#[test]
fn ftrace_raw_syscall_numbers_get_their_x86_64_names() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("raw.txt");
    std::fs::write(
        &file,
        "          a-1     [000] ....   1.000000: sys_enter: NR 202 (7f00, 81, 1, 0, 0, 0)\n\
                   a-1     [000] ....   1.000010: sys_exit: NR 202 = 0\n\
                   a-1     [000] ....   1.000020: sys_enter: NR 0 (3, 7ffe, 10, 0, 0, 0)\n\
                   a-1     [000] ....   1.000030: sys_exit: NR 0 = 10\n",
    )
    .unwrap();
    let (r, warnings) = run(&[file], Format::Ftrace, dir.path(), true).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let reader = TraceReader::open(&r.path).unwrap();
    let ty = reader
        .event_types()
        .unwrap()
        .into_iter()
        .find(|t| t.name == "syscall")
        .unwrap();
    let name = ty.params.iter().position(|p| p.name == "name").unwrap();
    let names: Vec<String> = reader
        .events(TimeRange::all(), &Filter::all().types([ty.id]))
        .unwrap()
        .map(|e| e.unwrap().event.params[name].to_string())
        .collect();
    assert_eq!(names, ["futex", "read"]);
}

/// The event lines of the real syscall capture, `copies` times over (more records than the importer
/// hands from its reading thread in one batch, and than it reports progress for), with bad lines after
/// the records counted in `bad_after` (0: first line).
fn many_ftrace_lines(copies: usize, bad_after: &[usize]) -> String {
    let sample = std::fs::read_to_string(real("ftrace/tci-ftrace_syscalls.txt")).unwrap();
    let events: Vec<&str> = sample
        .lines()
        .filter(|l| socscope_formats::ftrace::parse_line(l).is_ok())
        .collect();
    let mut out = String::new();
    let mut n = 0;
    for _ in 0..copies {
        for l in &events {
            for _ in bad_after.iter().filter(|&&b| b == n) {
                out.push_str(&format!("garbage line after record {n}\n"));
            }
            out.push_str(l);
            out.push('\n');
            n += 1;
        }
    }
    for _ in bad_after.iter().filter(|&&b| b == n) {
        out.push_str("bad-1 [00x] the last line\n");
    }
    out
}

/// What the ftrace reader alone makes of `path`: records, the errors' messages, and the bytes read
/// before every 65536th record (where the importer reports its progress).
fn read_ftrace(path: &Path) -> (u64, Vec<String>, Vec<u64>) {
    let f = std::io::BufReader::new(std::fs::File::open(path).unwrap());
    let mut r = socscope_formats::ftrace::FtraceReader::new(f, path.display().to_string());
    let (mut records, mut errors, mut progress) = (0u64, Vec::new(), Vec::new());
    loop {
        let bytes = r.bytes();
        match r.next_line() {
            Ok(Some(socscope_formats::ftrace::Line::Record(_))) => {
                records += 1;
                if records % 65_536 == 0 {
                    progress.push(bytes);
                }
            }
            Ok(Some(
                socscope_formats::ftrace::Line::Header
                | socscope_formats::ftrace::Line::StackFrame(_),
            )) => {}
            Ok(None) => break,
            Err(e) => errors.push(e.to_string()),
        }
    }
    (records, errors, progress)
}

#[test]
fn ftrace_read_ahead_keeps_order_counts_and_error_positions() {
    // The file is parsed on a thread of its own, in batches of 4096 records: bad lines at the start,
    // on both sides of batch boundaries and at the end must be reported as the reader finds them, in
    // order, with their line and column, and counted; the records and the progress must be those of
    // reading line by line.
    let dir = tempfile::tempdir().unwrap();
    let copies = 63; // 1052 records a copy: 66 276 records, one progress report
    let bad = [0, 4095, 4096, 4097, 8192, 30_000, 30_000, 1052 * copies];
    let dirty = dir.path().join("dirty.txt");
    std::fs::write(&dirty, many_ftrace_lines(copies, &bad)).unwrap();
    let clean = dir.path().join("clean.txt");
    std::fs::write(&clean, many_ftrace_lines(copies, &[])).unwrap();
    let (records, errors, progress) = read_ftrace(&dirty);
    assert_eq!(records, 1052 * copies as u64);
    assert_eq!(errors.len(), bad.len());
    assert!(errors[1].contains(":4097:1: expected"), "{}", errors[1]);

    let mut warnings = Vec::new();
    let mut skip_counts = Vec::new();
    let mut reported = Vec::new();
    let mut on_skip = |e: &socscope_formats::ParseError, n: u64| {
        warnings.push(e.to_string());
        skip_counts.push(n);
    };
    let mut on_progress = |b: u64| reported.push(b);
    let mut opts = ImportOptions {
        strict: false,
        on_skip: &mut on_skip,
        on_progress: &mut on_progress,
    };
    let r = import(
        std::slice::from_ref(&dirty),
        Format::Ftrace,
        &dir.path().join("d.db"),
        &mut opts,
    )
    .unwrap();
    assert_eq!(warnings, errors);
    assert_eq!(skip_counts, (1..=bad.len() as u64).collect::<Vec<_>>());
    assert_eq!(reported, progress);
    assert_eq!(r.records, records);
    assert_eq!(r.lines_skipped, bad.len() as u64);
    assert_eq!(r.bytes, std::fs::metadata(&dirty).unwrap().len());
    assert_eq!(stat(&r.path, "lines_skipped"), bad.len() as i64);

    // The bad lines change nothing else.
    let (c, _) = run(&[clean], Format::Ftrace, &dir.path().join("c"), true).unwrap();
    assert_eq!(c.records, r.records);
    assert_eq!(c.info.event_count, r.info.event_count);
    assert_eq!(counts(&c.path), counts(&r.path));

    // Strict: the first bad line stops the import, with the reader's message.
    let e = run(&[dirty], Format::Ftrace, &dir.path().join("s"), true).unwrap_err();
    assert_eq!(e.to_string(), errors[0]);
}

#[test]
fn ftrace_read_error_stops_the_import() {
    // A directory opens but does not read: the reading thread's I/O error ends the import, naming it.
    let dir = tempfile::tempdir().unwrap();
    let not_a_file = dir.path().join("capture.txt");
    std::fs::create_dir(&not_a_file).unwrap();
    let e = run(
        std::slice::from_ref(&not_a_file),
        Format::Ftrace,
        dir.path(),
        false,
    )
    .unwrap_err();
    assert!(
        matches!(&e, socscope_collector::CollectorError::Io { path, .. } if *path == not_a_file),
        "{e:?}"
    );
    assert!(
        e.to_string().starts_with(&not_a_file.display().to_string()),
        "{e}"
    );
}

#[test]
fn paje_native_sample() {
    // 2439 + 220 PajeSetState (ids 10 and 20) + 659 PajePushState = 3318 states; 880 PajeSetVariable;
    // 2 PajeNewEvent (id 9).
    let dir = tempfile::tempdir().unwrap();
    let (r, _) = import_real("paje/pajeng-native_sample.trace", Format::Paje, dir.path());
    assert_eq!(counts(&r.path).0, [2, 3318, 0, 880]);
}

#[test]
fn gst_logs() {
    // One punctual event per line and one level state per line (the last of each thread to the end).
    // The coloured log has two processes (17267 and, on its last line, 4394), one thread each: 4 producers.
    let dir = tempfile::tempdir().unwrap();
    let (r, w) = import_real(
        "gstreamer/gst-log-parser-color.log",
        Format::Gst,
        dir.path(),
    );
    assert!(w.is_empty());
    assert_eq!(counts(&r.path), ([15, 15, 0, 0], 4));
    let dir = tempfile::tempdir().unwrap();
    let (r, w) = run(
        &[real("gstreamer/gst-log-parser-corrupted-nocolor.log")],
        Format::Gst,
        dir.path(),
        false,
    )
    .unwrap();
    assert_eq!(r.lines_skipped, 1);
    assert_eq!(w.len(), 1);
    assert!(
        w[0].contains("gst-log-parser-corrupted-nocolor.log:1:1"),
        "{}",
        w[0]
    );
    assert!(w[0].contains("Hello world"), "{}", w[0]);
    assert_eq!(stat(&r.path, "lines_skipped"), 1);
    assert_eq!(counts(&r.path), ([6, 6, 0, 0], 2));
    let dir = tempfile::tempdir().unwrap();
    let e = run(
        &[real("gstreamer/gst-log-parser-corrupted-nocolor.log")],
        Format::Gst,
        dir.path(),
        true,
    )
    .unwrap_err();
    assert!(e.to_string().contains(":1:1: expected"), "{e}");
}

#[test]
fn kptrace_grammar_set() {
    // trace0 (a raw relay file: two sub-buffers with padding words), trace1 (plain), System.map.
    // States: CPU0 running(pid 0, clipped start), syscall, irq, running(10), running(11, open at the
    // end); CPU1 running(0), softirq, running(20, open) = 8, and the running states again as slices
    // of their CPU's track, but for the 2 empty ones (a switch at a CPU's first record) = 11. Links:
    // W 11 (time 0.000000) → 1.
    // Variables: MM, MF = 2. Punctual: Kc, the user-space line, ZL, K = 4.
    let dir = tempfile::tempdir().unwrap();
    let files = [kp("trace0"), kp("trace1"), kp("System.map")];
    let (r, w) = run(&files, Format::Kptrace, dir.path(), true).unwrap();
    assert!(w.is_empty(), "{w:?}");
    assert_eq!(counts(&r.path).0, [4, 11, 1, 2]);
    assert_eq!(stat(&r.path, "callstack_lines"), 1);
    assert_eq!(stat(&r.path, "blank_lines"), 1);
    assert_eq!(stat(&r.path, "neighbour_times"), 2);
    assert_eq!(stat(&r.path, "unknown_mnemonics"), 1);
    let reader = TraceReader::open(&r.path).unwrap();
    let producers = reader.producers().unwrap();
    // The soft IRQ takes its vector's name from its handler's symbol (run_timer_softirq).
    assert!(producers.iter().any(|p| p.name == "TIMER"));
    assert!(producers.iter().any(|p| p.name == "worker"));
    let link = reader
        .events(
            TimeRange::all(),
            &Filter::all().categories([EventCategory::Link]),
        )
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .event;
    assert_eq!(
        link.ts, 1_000_000_000,
        "the wake-up takes its neighbour's time"
    );
    let syscall = reader.event_type_by_name("syscall").unwrap().unwrap();
    let s = reader
        .events(TimeRange::all(), &Filter::all().types([syscall.id]))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .event;
    assert!(
        s.params.iter().any(|p| p.to_string() == "sys_read"),
        "{:?}",
        s.params
    );
}

#[test]
fn kptrace_post_processed_form() {
    // CS 0→21 and 21→0 on CPU 0: running(0) clipped, running(21), running(0) open = 3 states, and
    // cpu0's track's one non-empty slice (on_cpu 21; the two idle ones are empty) = 4; MK on the
    // CPU of its line (1) = 1 punctual event with its typed TEXT.
    let dir = tempfile::tempdir().unwrap();
    let (r, _) = run(
        &[kp("post.txt"), kp("kptrace.fmt")],
        Format::Kptrace,
        dir.path(),
        true,
    )
    .unwrap();
    assert_eq!(counts(&r.path).0, [1, 4, 0, 0]);
    let reader = TraceReader::open(&r.path).unwrap();
    let mk = reader.event_type_by_name("MK").unwrap().unwrap();
    let e = reader
        .events(TimeRange::all(), &Filter::all().types([mk.id]))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .event;
    assert_eq!(
        (e.cpu, e.params[0].to_string().as_str()),
        (Some(1), "hello there")
    );
}

/// Per record kind of a GStreamer log's text: tracer records by structure name, debug lines as `debug`.
fn gst_kinds_in_text(path: &Path) -> std::collections::BTreeMap<String, u64> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut kinds = std::collections::BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let clean = socscope_formats::gst::strip_ansi(line);
        let kind = match clean.split_once("GST_TRACER :0:: ") {
            Some((_, rest)) => rest.split(',').next().unwrap().to_string(),
            None => "debug".to_string(),
        };
        *kinds.entry(kind).or_insert(0) += 1;
    }
    kinds
}

#[test]
fn gst_tracer_records_become_structured_events_and_none_is_lost() {
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/gst");
    for (file, elements) in [
        (
            "videotestsrc-tracers.log",
            &["videotestsrc0", "videoconvert0", "fakesink0"][..],
        ),
        (
            "audiotestsrc-queue-stats.log",
            &["audiotestsrc0", "audioconvert0", "queue0", "fakesink0"][..],
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = data.join(file);
        let (r, warnings) =
            run(std::slice::from_ref(&path), Format::Gst, dir.path(), true).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        let text = gst_kinds_in_text(&path);
        assert_eq!(r.records, text.values().sum::<u64>(), "{file}");
        let reader = TraceReader::open(&r.path).unwrap();
        let types: std::collections::HashMap<u32, String> = reader
            .event_types()
            .unwrap()
            .into_iter()
            .map(|t| (t.id, t.name))
            .collect();
        let producers = reader.producers().unwrap();
        let kind_of: std::collections::HashMap<u32, socscope_tracedb::ProducerKind> =
            producers.iter().map(|p| (p.id, p.kind)).collect();
        let mut stored: std::collections::BTreeMap<(String, &str), u64> = Default::default();
        for e in reader.events(TimeRange::all(), &Filter::all()).unwrap() {
            let e = e.unwrap().event;
            let on = match kind_of[&e.producer] {
                socscope_tracedb::ProducerKind::Thread => "thread",
                socscope_tracedb::ProducerKind::Process => "process",
                _ => "element",
            };
            *stored.entry((types[&e.type_id].clone(), on)).or_insert(0) += 1;
        }
        let got =
            |ty: &str, on: &'static str| stored.get(&(ty.to_string(), on)).copied().unwrap_or(0);
        let want = |k: &str| text.get(k).copied().unwrap_or(0);
        assert!(
            want("latency") > 0 && want("thread-rusage") > 0,
            "{file}: {text:?}"
        );
        // Each record kind is found in the trace as many times as in the text.
        let mut tracer_total = 0;
        for (kind, n) in &text {
            match kind.as_str() {
                "debug" => {
                    let debug: u64 = [
                        "ERROR", "WARN", "FIXME", "INFO", "DEBUG", "LOG", "TRACE", "MEMDUMP",
                    ]
                    .iter()
                    .map(|l| got(l, "thread"))
                    .sum();
                    assert_eq!(debug, *n, "{file}: debug lines");
                }
                "thread-rusage" | "proc-rusage" => {
                    let on = if kind == "thread-rusage" {
                        "thread"
                    } else {
                        "process"
                    };
                    for v in ["current-cpuload", "average-cpuload", "cpu-time"] {
                        assert_eq!(got(v, on), *n, "{file}: {kind} {v}");
                    }
                }
                other => assert_eq!(got(other, "element"), *n, "{file}: {other}"),
            }
            if kind != "debug" {
                assert_eq!(
                    stat(&r.path, &format!("tracer.{kind}")),
                    *n as i64,
                    "{file}"
                );
                tracer_total += n;
            }
        }
        assert!(
            tracer_total * 2 > r.records,
            "{file}: mostly tracer records"
        );
        assert_eq!(stat(&r.path, "tracer_unreadable"), 0);
        assert_eq!(stat(&r.path, "tracer_uninterpreted"), 0, "{file}");
        // Elements are producers named after the elements (ids resolved), under the process.
        for name in elements {
            assert!(
                producers.iter().any(|p| p.name == *name
                    && p.parent
                        .is_some_and(|q| kind_of[&q] == socscope_tracedb::ProducerKind::Process)),
                "{file}: no element {name}: {producers:?}"
            );
        }
    }
}

/// gst-shark's `interlatency` and `proctime` records (hand-written from its sources' record layout, not
/// captured: see `tests/data/gst/README.md`).
#[test]
fn gst_shark_interlatency_becomes_links_and_proctime_states_and_odd_records_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/gst/gst-shark-handwritten.log");
    let (r, warnings) = run(std::slice::from_ref(&path), Format::Gst, dir.path(), true).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let text = gst_kinds_in_text(&path);
    assert_eq!(r.records, text.values().sum::<u64>());
    let reader = TraceReader::open(&r.path).unwrap();
    let types: std::collections::HashMap<u32, socscope_tracedb::EventType> = reader
        .event_types()
        .unwrap()
        .into_iter()
        .map(|t| (t.id, t))
        .collect();
    let name_of: std::collections::HashMap<u32, String> = reader
        .producers()
        .unwrap()
        .into_iter()
        .map(|p| (p.id, p.name))
        .collect();
    let mut names: Vec<&String> = name_of.values().collect();
    names.sort();
    for e in [
        "videotestsrc0",
        "capsfilter0",
        "dec_out",
        "queue0",
        "fakesink0",
    ] {
        assert!(names.iter().any(|n| *n == e), "no element {e}: {names:?}");
    }
    assert!(
        !names.iter().any(|n| n.starts_with("dec_out_")),
        "{names:?}"
    );
    let param = |e: &socscope_tracedb::Event, k: &str| {
        let t = &types[&e.type_id];
        let i = t.params.iter().position(|p| p.name == k).unwrap();
        e.params[i].to_string()
    };
    let mut links: std::collections::BTreeMap<(String, String), Vec<i64>> = Default::default();
    let mut states: std::collections::BTreeMap<String, Vec<i64>> = Default::default();
    let mut kept_whole: std::collections::BTreeMap<String, u64> = Default::default();
    for e in reader.events(TimeRange::all(), &Filter::all()).unwrap() {
        let e = e.unwrap().event;
        let ty = &types[&e.type_id].name;
        match (ty.as_str(), e.kind) {
            ("interlatency", socscope_tracedb::EventKind::Link { end, target }) => {
                // The link spans the latency, which its `time` also carries.
                assert_eq!(param(&e, "time"), (end - e.ts).to_string());
                links
                    .entry((name_of[&e.producer].clone(), name_of[&target].clone()))
                    .or_default()
                    .push(end - e.ts);
            }
            ("proctime", socscope_tracedb::EventKind::State { end, .. }) => {
                assert_eq!(param(&e, "time"), (end - e.ts).to_string());
                states
                    .entry(name_of[&e.producer].clone())
                    .or_default()
                    .push(end - e.ts);
            }
            (t, _) if t.starts_with("tracer ") => {
                *kept_whole.entry(t.to_string()).or_default() += 1
            }
            _ => {}
        }
    }
    let src = "videotestsrc0".to_string();
    let want_links: std::collections::BTreeMap<(String, String), Vec<i64>> = [
        ("capsfilter0", 12_500),
        ("dec_out", 95_400),
        ("queue0", 96_000),
        ("fakesink0", 180_000),
    ]
    .into_iter()
    .map(|(to, ns)| ((src.clone(), to.to_string()), vec![ns; 3]))
    .collect();
    assert_eq!(links, want_links);
    let want_states: std::collections::BTreeMap<String, Vec<i64>> =
        [("capsfilter0", 4_657), ("dec_out", 80_250)]
            .into_iter()
            .map(|(e, ns)| (e.to_string(), vec![ns; 3]))
            .collect();
    assert_eq!(states, want_states);
    // What cannot be interpreted is kept whole and counted; another tracer's record is kept whole.
    assert_eq!(stat(&r.path, "tracer_uninterpreted"), 2);
    assert_eq!(stat(&r.path, "tracer.interlatency"), 13);
    assert_eq!(stat(&r.path, "tracer.proctime"), 7);
    assert_eq!(
        kept_whole,
        [
            ("tracer framerate".to_string(), 1),
            ("tracer interlatency".to_string(), 1),
            ("tracer proctime".to_string(), 1)
        ]
        .into_iter()
        .collect()
    );
}

#[test]
fn ftrace_function_graph_nests_and_an_exiting_thread_closes_its_states() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("fg.txt");
    std::fs::write(
        &f,
        "# tracer: function_graph\n\
         cpus=2\n\
         \x20  <idle>-0     [001]    99.999990: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=bash next_pid=10 next_prio=120\n\
         \x20    bash-10    [001]   100.000000: funcgraph_entry:                   |  do_sys_open() {\n\
         \x20    bash-10    [001]   100.000001: funcgraph_entry:        0.500 us   |    getname();\n\
         \x20    bash-10    [001]   100.000002: funcgraph_entry:                   |    do_filp_open() {\n\
         \x20    bash-10    [001]   100.000003: funcgraph_entry:        1.000 us   |      path_init();\n\
         \x20    bash-10    [001]   100.000005: funcgraph_exit:         2.000 us   |    }\n\
         \x20    bash-10    [001]   100.000006: funcgraph_exit:         6.000 us   |  }\n\
         \x20    bash-10    [001]   100.000010: funcgraph_entry: func=0xffffffff81234567 depth=0\n\
         \x20    bash-10    [001]   100.000011: funcgraph_exit: func=0xffffffff81234567 calltime=1 rettime=2 overrun=0 depth=0\n\
         \x20    bash-10    [001]   100.000020: sys_exit_group(error_code: 0)\n\
         \x20    bash-10    [001]   100.000021: funcgraph_entry:                   |  do_exit() {\n\
         \x20    bash-10    [001]   100.000030: sched_process_exit: comm=bash pid=10 prio=120\n\
         \x20    bash-10    [001]   100.000040: sched_switch: prev_comm=bash prev_pid=10 prev_prio=120 prev_state=X ==> next_comm=swapper/1 next_pid=0 next_prio=120\n\
         \x20  <idle>-0     [001]   100.000050: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=sh next_pid=11 next_prio=120\n",
    )
    .unwrap();
    let (r, warnings) = run(&[f], Format::Ftrace, dir.path(), true).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let reader = TraceReader::open(&r.path).unwrap();
    assert_eq!(reader.info().unwrap().meta.cpus, 2);
    let types: std::collections::HashMap<u32, socscope_tracedb::EventType> = reader
        .event_types()
        .unwrap()
        .into_iter()
        .map(|t| (t.id, t))
        .collect();
    let mut states: Vec<(String, i64, i64, u16)> = Vec::new();
    for e in reader.events(TimeRange::all(), &Filter::all()).unwrap() {
        let e = e.unwrap().event;
        if let socscope_tracedb::EventKind::State { end, depth } = e.kind {
            let t = &types[&e.type_id];
            let name = t
                .params
                .iter()
                .position(|p| p.name == "name")
                .map_or(String::new(), |i| e.params[i].to_string());
            states.push((
                format!("{} {name}", t.name),
                e.ts - 100_000_000_000,
                end - 100_000_000_000,
                depth,
            ));
        }
    }
    states.sort_by_key(|s| (s.1, s.3));
    let want = [
        ("function do_sys_open", 0, 6_000, 1),
        ("function getname", 1_000, 1_500, 2),
        ("function do_filp_open", 2_000, 5_000, 2),
        ("function path_init", 3_000, 4_000, 3),
        ("function 0xffffffff81234567", 10_000, 11_000, 1),
        // exit_group never returns, nor does do_exit: both end when the thread exits.
        ("syscall exit_group", 20_000, 30_000, 1),
        ("function do_exit", 21_000, 30_000, 2),
    ];
    for (name, start, end, depth) in want {
        assert!(
            states
                .iter()
                .any(|s| s.0 == name && s.1 == start && s.2 == end && s.3 == depth),
            "{name} {start}..{end} at {depth} not in {states:?}"
        );
    }
    // The thread's running state goes on until it is switched out.
    assert!(
        states
            .iter()
            .any(|s| s.0.starts_with("running") && s.2 == 40_000),
        "{states:?}"
    );
    assert_eq!(stat(&r.path, "closed_at_exit"), 2);
}

#[test]
fn kptrace_thread_exit_closes_the_states_the_thread_had_open() {
    // Thread 21 enters two user functions and exits (KX) inside them: both end at the exit, as
    // ftrace's sched_process_exit ends them, not at the capture's end; its running state goes on to
    // the switch-out.
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace0");
    std::fs::write(
        &trace,
        "1.000000 0 C 0 21\n1.000100 21 U 8000\n1.000200 21 U 8100\n1.000300 21 KX 21\n\
         1.000400 21 C 21 0\n1.002000 0 C 0 22\n",
    )
    .unwrap();
    let (r, w) = run(&[trace], Format::Kptrace, dir.path(), true).unwrap();
    assert!(w.is_empty(), "{w:?}");
    assert_eq!(stat(&r.path, "closed_at_exit"), 2);
    let reader = TraceReader::open(&r.path).unwrap();
    let user = reader.event_type_by_name("user_function").unwrap().unwrap();
    let mut ends: Vec<(i64, i64)> = reader
        .events(TimeRange::all(), &Filter::all().types([user.id]))
        .unwrap()
        .map(|e| {
            let e = e.unwrap().event;
            (e.ts, e.end())
        })
        .collect();
    ends.sort();
    let t0 = ends[0].0 - 100_000;
    let rel: Vec<(i64, i64)> = ends.iter().map(|(a, b)| (a - t0, b - t0)).collect();
    assert_eq!(rel, [(100_000, 300_000), (200_000, 300_000)]);
}
