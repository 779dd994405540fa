//! The parsers on the real captures of `shared/data/traces/` (see PROVENANCE.md there).
//!
//! Expected counts were taken by hand with grep: event lines are the lines not starting with `#`
//! (ftrace), `%`/`#`/blank (Pajé); GST logs have one record per line except the one foreign line.

use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;

use socscope_formats::{Format, FormatError, detect, ftrace, gst, paje};

fn data(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/traces")
        .join(rel)
}

fn open(rel: &str) -> BufReader<File> {
    BufReader::new(File::open(data(rel)).unwrap_or_else(|e| panic!("{rel}: {e}")))
}

fn ftrace_counts(rel: &str) -> (u64, u64) {
    let mut r = ftrace::FtraceReader::new(open(rel), rel);
    let (mut records, mut headers) = (0, 0);
    while let Some(l) = r.next_line().unwrap() {
        match l {
            ftrace::Line::Record(_) => records += 1,
            ftrace::Line::Header => headers += 1,
            // None of the shared ftrace files holds a `kernel_stack` event, so no frame line either.
            ftrace::Line::StackFrame(frame) => {
                panic!("{rel}: unexpected stack frame line {frame:?}")
            }
        }
    }
    (records, headers)
}

#[test]
fn ftrace_files_parse_every_line() {
    // grep -vc '^#': 139 event lines and 11 header lines in each Android file, 1052 events, no header.
    assert_eq!(
        ftrace_counts("ftrace/tci-trace-android-sched-irq.txt"),
        (139, 11)
    );
    assert_eq!(
        ftrace_counts("ftrace/tci-trace-android-sched.txt"),
        (139, 11)
    );
    assert_eq!(ftrace_counts("ftrace/tci-ftrace_syscalls.txt"), (1052, 0));
}

fn paje_kinds(rel: &str) -> std::collections::HashMap<paje::Kind, u64> {
    let mut r = paje::PajeReader::new(open(rel), rel);
    let mut counts = std::collections::HashMap::new();
    while let Some(rec) = r.next_record().unwrap() {
        *counts.entry(rec.def.kind).or_insert(0) += 1;
    }
    counts
}

#[test]
fn paje_files_decode_every_event_line() {
    // Lines that are not `%`, `#` or blank: 5060, 464, 39.
    for (rel, n) in [
        ("paje/pajeng-native_sample.trace", 5060),
        ("paje/pajeng-categories.trace", 464),
        ("paje/pajeng-simgrid-fg126.trace", 39),
    ] {
        assert_eq!(paje_kinds(rel).values().sum::<u64>(), n, "{rel}");
    }
    // native_sample: `awk '{print $1}' | sort | uniq -c` gives 2439 lines of id 10 and 220 of id 20, the
    // two definitions of PajeSetState; 659 PushState (11), 659 PopState (12), 880 SetVariable (13).
    let k = paje_kinds("paje/pajeng-native_sample.trace");
    assert_eq!(k[&paje::Kind::SetState], 2439 + 220);
    assert_eq!(k[&paje::Kind::PopState], 659);
    assert_eq!(k[&paje::Kind::SetVariable], 880);
    assert_eq!(k[&paje::Kind::PushState], 659);
}

fn gst_counts(rel: &str) -> (u64, Vec<(u64, usize)>) {
    let mut r = gst::GstReader::new(open(rel), rel);
    let mut ok = 0;
    let mut bad = Vec::new();
    loop {
        match r.next_record() {
            Ok(Some(_)) => ok += 1,
            Ok(None) => break,
            Err(FormatError::Parse(e)) => bad.push((e.line, e.column)),
            Err(e) => panic!("{e}"),
        }
    }
    (ok, bad)
}

#[test]
fn gst_logs_with_colours_and_a_foreign_line() {
    assert_eq!(
        gst_counts("gstreamer/gst-log-parser-nocolor.log"),
        (6, vec![])
    );
    assert_eq!(
        gst_counts("gstreamer/gst-log-parser-color.log"),
        (15, vec![])
    );
    // Line 1 of the corrupted log is "Hello world, I am here to fuzz".
    assert_eq!(
        gst_counts("gstreamer/gst-log-parser-corrupted-nocolor.log"),
        (6, vec![(1, 1)])
    );
}

#[test]
fn detection_by_content() {
    for (rel, f) in [
        ("ftrace/tci-trace-android-sched.txt", Format::Ftrace),
        ("ftrace/tci-ftrace_syscalls.txt", Format::Ftrace),
        ("paje/pajeng-simgrid-fg126.trace", Format::Paje),
        ("paje/pajeng-native_sample.trace", Format::Paje),
        ("gstreamer/gst-log-parser-color.log", Format::Gst),
        (
            "gstreamer/gst-log-parser-corrupted-nocolor.log",
            Format::Gst,
        ),
    ] {
        let head = std::fs::read(data(rel)).unwrap();
        assert_eq!(detect(&head[..head.len().min(8192)]), Some(f), "{rel}");
    }
    assert_eq!(
        detect(b"12.000001 5 C 0 5\n12.000002 5 W 7\n"),
        Some(Format::Kptrace)
    );
}
