//! Imports of traces that span hours with few events cost what their events cost, not what
//! their duration or their states' lengths would: the file sizes and summary shares of the real
//! captures with long states, and of a simulation whose states last the whole run.

mod common;

use std::path::{Path, PathBuf};

use common::real;
use socscope_collector::import::{ImportOptions, import};
use socscope_formats::Format;
use socscope_tracedb::TraceReader;

/// Imports `file`, returns the trace path (the writer has finished: the file is complete).
fn import_into(file: &Path, format: Format, dir: &Path) -> PathBuf {
    let mut on_skip = |_: &socscope_formats::ParseError, _n: u64| {};
    let mut on_progress = |_b: u64| {};
    let mut opts = ImportOptions {
        strict: true,
        on_skip: &mut on_skip,
        on_progress: &mut on_progress,
    };
    import(&[file.to_path_buf()], format, &dir.join("t.db"), &mut opts)
        .unwrap()
        .path
}

/// Bytes of the file and of its summary table (pages, from SQLite's `dbstat`).
fn sizes(trace: &Path) -> (u64, u64) {
    let file = std::fs::metadata(trace).unwrap().len();
    let r = TraceReader::open(trace).unwrap();
    let summary: i64 = r
        .connection()
        .query_row(
            "SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name = 'summary'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    (file, summary as u64)
}

#[test]
fn a_paje_trace_with_hour_long_states_stays_under_a_megabyte() {
    let dir = tempfile::tempdir().unwrap();
    let t = import_into(
        &real("paje/pajeng-native_sample.trace"),
        Format::Paje,
        dir.path(),
    );
    let (file, summary) = sizes(&t);
    assert!(file <= 1 << 20, "{file} bytes");
    assert!(
        summary * 100 <= file * 15,
        "summary {summary} of {file} bytes"
    );
}

#[test]
fn a_six_line_log_over_an_hour_and_a_half_stays_under_100_kb() {
    let dir = tempfile::tempdir().unwrap();
    let t = import_into(
        &real("gstreamer/gst-log-parser-nocolor.log"),
        Format::Gst,
        dir.path(),
    );
    let (file, _) = sizes(&t);
    assert!(file <= 100 << 10, "{file} bytes");
}

/// A Pajé simulation of a week: 50 containers whose state is set once at the start and lasts
/// to the end, and a few thousand short states and variable changes in between.
#[test]
fn a_week_long_paje_simulation_with_states_lasting_the_run_stays_small() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::from(
        "%EventDef PajeDefineContainerType 0\n% Alias string\n% Type string\n% Name string\n%EndEventDef\n\
         %EventDef PajeDefineStateType 1\n% Alias string\n% Type string\n% Name string\n%EndEventDef\n\
         %EventDef PajeDefineVariableType 2\n% Alias string\n% Type string\n% Name string\n%EndEventDef\n\
         %EventDef PajeCreateContainer 3\n% Time date\n% Alias string\n% Type string\n% Container string\n% Name string\n%EndEventDef\n\
         %EventDef PajeSetState 4\n% Time date\n% Type string\n% Container string\n% Value string\n%EndEventDef\n\
         %EventDef PajeSetVariable 5\n% Time date\n% Type string\n% Container string\n% Value double\n%EndEventDef\n\
         %EventDef PajeDestroyContainer 6\n% Time date\n% Type string\n% Name string\n%EndEventDef\n\
         0 HOST 0 \"Host\"\n1 STATE HOST \"State\"\n2 LOAD HOST \"Load\"\n",
    );
    let week = 7.0 * 86_400.0;
    for h in 0..50 {
        text += &format!("3 0 h{h} HOST 0 \"host {h}\"\n4 0 STATE h{h} \"on\"\n");
    }
    for k in 0..5_000u32 {
        let t = week * f64::from(k) / 5_000.0;
        let h = k % 50;
        text += &format!("5 {t:.6} LOAD h{h} {}\n", k % 7);
    }
    for h in 0..50 {
        text += &format!("6 {week:.6} HOST h{h}\n");
    }
    let src = dir.path().join("week.trace");
    std::fs::write(&src, text).unwrap();
    let t = import_into(&src, Format::Paje, dir.path());
    let (file, summary) = sizes(&t);
    assert!(file <= 1 << 20, "{file} bytes");
    assert!(
        summary * 100 <= file * 15,
        "summary {summary} of {file} bytes"
    );
    let r = TraceReader::open(&t).unwrap();
    assert!(r.info().unwrap().event_count >= 5_050);
}
