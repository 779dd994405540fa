//! Two Pajé state types of one container in the Gantt (issue 11, item 2): each gets a row of its own,
//! named after the type, under the container's row; a container with one state type keeps one row.
#![cfg(feature = "gui")]

mod common;

use std::collections::{BTreeSet, HashSet};
use std::path::Path;
use std::time::{Duration, Instant};

use common::gui::settle_loaded as settle;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use socscope_analysis::sync::ViewKind;
use socscope_analyzer::gui::GuiApp;
use socscope_analyzer::gui::egui;

/// Container `node1` has `PM` states (`on`, `sleep`) and `SERVICE` states (`compute` with `io` nested)
/// overlapping them; `node2` has `PM` states only.
const TRACE: &str = "\
%EventDef PajeDefineContainerType 0\n% Alias string\n% Type string\n% Name string\n%EndEventDef
%EventDef PajeDefineStateType 1\n% Alias string\n% Type string\n% Name string\n%EndEventDef
%EventDef PajeCreateContainer 3\n% Time date\n% Alias string\n% Type string\n% Container string\n% Name string\n%EndEventDef
%EventDef PajePushState 4\n% Time date\n% Type string\n% Container string\n% Value string\n%EndEventDef
%EventDef PajePopState 5\n% Time date\n% Type string\n% Container string\n%EndEventDef
%EventDef PajeSetState 6\n% Time date\n% Type string\n% Container string\n% Value string\n%EndEventDef
0 H 0 HOST
1 PM H PM
1 SERVICE H SERVICE
3 0 h1 H 0 node1
3 0 h2 H 0 node2
6 0.0 PM h1 on
6 0.0 PM h2 on
4 1.0 SERVICE h1 compute
4 1.5 SERVICE h1 io
6 2.0 PM h1 sleep
5 3.0 SERVICE h1
5 4.0 SERVICE h1
6 5.0 PM h1 on
6 5.0 PM h2 sleep
6 6.0 PM h1 on
6 6.0 PM h2 on
";

fn import(dir: &Path) -> std::path::PathBuf {
    let src = dir.join("two-types.trace");
    std::fs::write(&src, TRACE).unwrap();
    let db = dir.join("two-types.db");
    succeeds(common::socscope(&[
        "import",
        "--format",
        "paje",
        src.to_str().unwrap(),
        "-o",
        db.to_str().unwrap(),
    ]));
    db
}

/// Asserts that a run of the program succeeded, showing its stderr otherwise.
fn succeeds(out: std::process::Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn two_state_types_of_one_container_get_a_gantt_row_each_named_after_the_type() {
    let dir = tempfile::tempdir().unwrap();
    let db = import(dir.path());
    let app = GuiApp::new(None, &[db], ViewKind::Gantt, false);
    let mut h = Harness::builder()
        .with_size(egui::Vec2::new(1100.0, 640.0))
        .with_max_steps(16)
        .build_ui_state(|ui, app: &mut GuiApp| app.ui(ui), app);
    settle(&mut h);
    // The rows a user reads: the lanes are named after their Pajé type, once (node2 has one type).
    for label in ["node1", "node2", "PM", "SERVICE"] {
        h.get_by_label(label);
    }
    let app = h.state_mut();
    let open_trace = &mut app.open_traces[0];
    let names = open_trace.names.as_ref().expect("names");
    let gantt = &mut open_trace.views[0].gantt;
    let lines = gantt.rows(names, &BTreeSet::new());
    let labels: Vec<String> = lines.iter().map(|l| gantt.row_label(l)).collect();
    let at = |s: &str| labels.iter().position(|l| l == s).unwrap();
    assert_eq!(
        labels[at("node1")..at("node1") + 4],
        ["node1", "PM", "SERVICE", "node2"],
        "rows: {labels:?}"
    );
    let rows: Vec<_> = lines.iter().map(|l| l.row).collect();
    let type_names = names.type_names.clone();
    let name = |t| type_names[&t].clone();
    let f = gantt.frame(&rows, 1000).clone();
    let types_of =
        |i: usize| -> HashSet<String> { f.rows[i].spans.iter().map(|s| name(s.type_id)).collect() };
    let node1 = at("node1");
    // node1's own row has no state left; each lane draws only its own type's states (a row draws the
    // outer of nested states, `io` shows under the pointer).
    assert!(f.rows[node1].spans.is_empty());
    assert_eq!(
        types_of(node1 + 1),
        HashSet::from(["on".to_string(), "sleep".to_string()])
    );
    assert_eq!(types_of(node1 + 2), HashSet::from(["compute".to_string()]));
    let hovered = |i: usize, t: i64| {
        let e = gantt
            .model
            .event_at(rows[i], t, f.view, 1000)
            .unwrap()
            .event;
        name(e.type_id)
    };
    assert_eq!(hovered(node1 + 1, 2_500_000_000), "sleep");
    assert_eq!(hovered(node1 + 2, 2_500_000_000), "io");
    assert_eq!(hovered(node1 + 2, 3_500_000_000), "compute");
    // node2's PM states stay in its own row.
    assert_eq!(
        types_of(node1 + 3),
        HashSet::from(["on".to_string(), "sleep".to_string()])
    );
}

#[test]
fn the_legend_lists_every_type_loaded_and_a_click_on_a_name_hides_or_shows_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = import(dir.path());
    let app = GuiApp::new(None, &[db], ViewKind::Gantt, false);
    let mut h = Harness::builder()
        .with_size(egui::Vec2::new(1100.0, 640.0))
        .with_max_steps(16)
        .build_ui_state(|ui, app: &mut GuiApp| app.ui(ui), app);
    settle(&mut h);
    let hidden = |h: &Harness<'_, GuiApp>| -> Vec<String> {
        let s = &h.state().open_traces[0];
        let names = s.names.as_ref().unwrap();
        s.groups.groups()[0]
            .filter
            .hidden_types
            .iter()
            .map(|t| names.type_name(*t))
            .collect()
    };
    // `io` is only ever nested under `compute`: no frame draws it, the legend still lists it.
    for t in ["on", "sleep", "compute", "io"] {
        h.get_by_label(t);
    }
    assert!(hidden(&h).is_empty());
    h.get_by_label("compute").click();
    settle(&mut h);
    assert_eq!(hidden(&h), ["compute"]);
    settle(&mut h);
    // Reloaded without it, and still in the legend (struck through) to be shown again.
    let s = &h.state().open_traces[0];
    let compute = s
        .names
        .as_ref()
        .unwrap()
        .type_names
        .iter()
        .find(|(_, n)| *n == "compute");
    let compute = *compute.unwrap().0;
    assert!(!s.views[0].gantt.types_loaded().contains(&compute));
    h.get_by_label("compute").click();
    settle(&mut h);
    assert!(hidden(&h).is_empty());
    // The reload the filter's change starts may begin a frame after the click: wait for it.
    let t = Instant::now();
    while !h.state().open_traces[0].views[0]
        .gantt
        .types_loaded()
        .contains(&compute)
    {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "compute never reloaded"
        );
        h.step();
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn at_1900_px_the_legend_names_every_type_of_a_capture_with_many_inside_the_window() {
    // A real ftrace capture with events of 16 types (the QEMU board's capture has 16; this one
    // declares 24): the legend of the whole trace wraps instead of cutting types off, and stays
    // inside the window.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("syscalls.db");
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/traces/ftrace/tci-ftrace_syscalls.txt");
    succeeds(common::socscope(&[
        "import",
        "--format",
        "ftrace",
        src.to_str().unwrap(),
        "-o",
        db.to_str().unwrap(),
    ]));
    let reader = socscope_tracedb::TraceReader::open(&db).unwrap();
    // The time origin: no event before zero, so the time bar starts at 0 or after.
    assert!(reader.info().unwrap().t_min >= 0);
    let types: Vec<String> = reader
        .event_types()
        .unwrap()
        .into_iter()
        .filter(|t| {
            let only = socscope_tracedb::Filter::all().types([t.id]);
            reader
                .count(socscope_tracedb::TimeRange::all(), &only)
                .unwrap()
                > 0
        })
        .map(|t| t.name)
        .collect();
    assert!(types.len() >= 15, "{types:?}");
    drop(reader);

    let size = egui::Vec2::new(1900.0, 900.0);
    let app = GuiApp::new(None, &[db], ViewKind::Gantt, false);
    let mut h = Harness::builder()
        .with_size(size)
        .with_max_steps(16)
        .build_ui_state(|ui, app: &mut GuiApp| app.ui(ui), app);
    settle(&mut h);
    let window = egui::Rect::from_min_size(egui::Pos2::ZERO, size);
    let missing: Vec<&String> = types
        .iter()
        .filter(|t| {
            !h.query_all_by_label(t)
                .any(|n| window.contains_rect(n.rect()))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "not in the legend: {missing:?} of {types:?}"
    );
}

/// What the Gantt of `trace` shows for its CPU section: whether a line there says the trace has no
/// CPU tracks (`Some(true)` when it is exactly the hint for `trace`), and whether the status line says it.
fn cpu_section_hints(trace: &Path) -> (Option<bool>, bool) {
    let app = GuiApp::new(None, &[trace.to_path_buf()], ViewKind::Gantt, false);
    let mut h = Harness::builder()
        .with_size(egui::Vec2::new(1400.0, 700.0))
        .with_max_steps(16)
        .build_ui_state(|ui, app: &mut GuiApp| app.ui(ui), app);
    settle(&mut h);
    let hint = format!(
        "No CPU tracks in this trace (recorded before them) — run `socscope upgrade {}` to derive \
         them",
        trace.display()
    );
    let line = h
        .query_by_label_contains("No CPU tracks in this trace")
        .map(|_| h.query_by_label(&hint).is_some());
    let status = h
        .query_by_label_contains("no CPU tracks (recorded before them): `socscope upgrade`")
        .is_some();
    (line, status)
}

#[test]
fn a_trace_recorded_before_the_cpu_tracks_says_so_in_the_gantt_and_not_once_upgraded() {
    // A capture of the release before the CPU tracks (context switches, no `on_cpu`), as the
    // upgrade tests use it.
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old.db");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../protocols/tracedb/tests/data/v2-sim.db"),
        &old,
    )
    .unwrap();
    assert_eq!(cpu_section_hints(&old), (Some(true), true));
    // Upgraded, the same trace has its tracks: no hint.
    succeeds(common::socscope(&["upgrade", old.to_str().unwrap()]));
    assert_eq!(cpu_section_hints(&old), (None, false));

    // A fresh capture (written with its tracks) has none either.
    let (_demo, fresh) = common::demo_trace(5, 2);
    assert_eq!(cpu_section_hints(&fresh), (None, false));
}
