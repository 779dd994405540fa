//! Pixel snapshots of each view (egui_kittest, rendered by wgpu in software) on a small deterministic
//! simulated trace, plus checks on the UI tree that do not depend on pixels.
#![cfg(feature = "gui")]

mod common;

use std::path::PathBuf;

use common::gui::{harness, settle_loaded as settle};
use egui_kittest::kittest::Queryable;
use socscope_analysis::sync::ViewKind;

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
