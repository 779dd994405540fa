//! Pixel snapshots of each view (egui_kittest, rendered by wgpu in software) on a small deterministic
//! simulated trace, plus checks on the UI tree that do not depend on pixels.
#![cfg(feature = "gui")]

mod common;

use std::path::PathBuf;

use common::gui::{harness, settle_loaded as settle};
use egui_kittest::kittest::Queryable;
use socscope_analysis::sync::ViewKind;
use socscope_analyzer::gui::egui;

/// A 2-second capture of the simulated board, seed 5, copied to a fixed name (the tab shows it).
fn trace() -> (tempfile::TempDir, PathBuf) {
    let (dir, file) = common::demo_trace(5, 2);
    let fixed = dir.path().join("demo.db");
    std::fs::copy(&file, &fixed).unwrap();
    (dir, fixed)
}

fn snapshot_view(view: ViewKind, name: &str, dark: bool) {
    let (_dir, t) = trace();
    let mut h = harness(&t, view, dark);
    settle(&mut h);
    // Every view has the buttons that open the others (RT-460 §2.3) and the time bar.
    for label in [
        "Density",
        "Statistics",
        "Gantt",
        "Table",
        "Whole",
        "Resync",
        "Load",
        "Types…",
        "Producers…",
    ] {
        h.get_by_label(label);
    }
    h.snapshot(name);
}

#[test]
fn gantt_snapshot() {
    snapshot_view(ViewKind::Gantt, "gantt_dark", true);
}

#[test]
fn the_table_has_a_duration_column_with_a_filter() {
    let (_dir, t) = trace();
    let mut h = harness(&t, ViewKind::Table, false);
    settle(&mut h);
    // The header, above its filter box.
    h.get_by_label("Duration");
}

/// The parameters column is cut at its width, so each cell shows its parameters whole in a tooltip,
/// and a click shows the event whole (every column, one parameter per line) in the pane under the
/// table.
#[test]
fn the_table_shows_a_rows_parameters_whole_on_hover_and_when_selected() {
    use egui_kittest::kittest::NodeT;
    let (_dir, t) = trace();
    let mut h = harness(&t, ViewKind::Table, false);
    settle(&mut h);
    h.get_by_label("Click a row to see the whole event here");
    // A syscall's cell: the longest parameters the demo writes (`name=…, end=…, depth=…, nr=…, a0=…`).
    let cell = |h: &egui_kittest::Harness<'_, socscope_analyzer::gui::GuiApp>| {
        h.query_all_by_label_contains("exit_nr=")
            .filter_map(|n| Some((n.accesskit_node().label()?, n.rect())))
            .find(|(l, _)| !l.contains('\n'))
            .expect("a syscall row")
    };
    let (full, at) = cell(&h);
    assert!(full.len() > 80, "{full}");
    let one_per_line = full.replace(", ", "\n");
    h.hover_at(at.center());
    h.run();
    h.get_by_label(&one_per_line);
    h.get_by_label_contains(&full).click();
    h.run();
    h.get_by_label("Selected event");
    // The pane holds the event whole (the tooltip may have gone with the click).
    assert!(h.query_all_by_label(&one_per_line).count() >= 1);
}

/// The pie names each slice beside it with its share (`running 26.3 %`), on a leader line; no two
/// names overlap.
#[test]
fn the_pie_names_its_slices_with_their_shares_and_no_two_names_overlap() {
    use egui_kittest::kittest::NodeT;
    let (_dir, t) = trace();
    let mut h = harness(&t, ViewKind::Statistics, false);
    settle(&mut h);
    let shares: Vec<String> = {
        let v = &h.state().open_traces[0].views[0].stats;
        v.settings
            .slices(v.stats.as_ref().expect("statistics"))
            .iter()
            .map(|s| format!(" {:.1} %", s.share * 100.0))
            .collect()
    };
    assert!(shares.len() >= 5, "{shares:?}");
    let names: Vec<(String, egui::Rect)> = h
        .query_all_by_label_contains(" %")
        // A label's text is its accessible value.
        .filter_map(|n| {
            let a = n.accesskit_node();
            Some((a.label().or_else(|| a.value())?, n.rect()))
        })
        .filter(|(l, _)| {
            shares
                .iter()
                .any(|s| l.ends_with(s.as_str()) && l.len() > s.len())
        })
        .collect();
    for s in &shares {
        assert!(
            names.iter().any(|(l, _)| l.ends_with(s.as_str())),
            "no name for the slice of{s}: {names:?}"
        );
    }
    assert!(
        names.iter().any(|(l, _)| l.starts_with("running ")),
        "{names:?}"
    );
    for (i, (a, ra)) in names.iter().enumerate() {
        for (b, rb) in &names[i + 1..] {
            assert!(
                !ra.shrink(0.5).intersects(rb.shrink(0.5)),
                "{a} overlaps {b}"
            );
        }
    }
}

#[test]
fn table_snapshot() {
    snapshot_view(ViewKind::Table, "table_light", false);
}

#[test]
fn density_snapshot() {
    snapshot_view(ViewKind::Density, "density_dark", true);
}

#[test]
fn statistics_snapshot() {
    snapshot_view(ViewKind::Statistics, "statistics_light", false);
}
