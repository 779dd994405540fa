//! View synchronisation through the real UI (RT-460 §2.3): a view button opens the other view on the
//! group's interval and filters, and two groups on one trace stay independent.
#![cfg(feature = "gui")]

mod common;

use std::path::PathBuf;

use common::gui::{harness, settle_idle as settle};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use socscope_analysis::sync::{ViewFilter, ViewKind};
use socscope_analyzer::gui::egui;
use socscope_analyzer::gui::{GuiApp, OpenTrace};

/// A 2-second capture of the simulated board.
fn trace() -> (tempfile::TempDir, PathBuf) {
    common::demo_trace(5, 2)
}

fn open_trace<'h>(h: &'h Harness<'_, GuiApp>) -> &'h OpenTrace {
    &h.state().open_traces[0]
}

/// Shift-drags across the middle of the chart (the density chart's interval selection).
fn select_in_chart(h: &mut Harness<'_, GuiApp>, x0: f32, x1: f32) {
    let y = 300.0;
    let shift = egui::Modifiers::SHIFT;
    h.event(egui::Event::ModifiersChanged(shift));
    h.event(egui::Event::PointerMoved(egui::pos2(x0, y)));
    h.event(egui::Event::PointerButton {
        pos: egui::pos2(x0, y),
        button: egui::PointerButton::Primary,
        pressed: true,
        modifiers: shift,
    });
    for i in 1..=10 {
        let x = x0 + (x1 - x0) * i as f32 / 10.0;
        h.event(egui::Event::PointerMoved(egui::pos2(x, y)));
    }
    h.event(egui::Event::PointerButton {
        pos: egui::pos2(x1, y),
        button: egui::PointerButton::Primary,
        pressed: false,
        modifiers: shift,
    });
    h.event(egui::Event::ModifiersChanged(egui::Modifiers::NONE));
    h.event(egui::Event::PointerGone);
    h.step();
}

#[test]
fn view_button_opens_the_table_on_the_density_selection_and_filters() {
    let (_dir, t) = trace();
    let mut h = harness(&t, ViewKind::Density, true);
    settle(&mut h);
    let first = open_trace(&h).groups.get(0).unwrap().interval;

    // Hide the most frequent type in the group (what the Types… dialog does).
    let hidden = {
        let s = &open_trace(&h).views[0].density;
        assert!(s.hist.as_ref().is_some_and(|h| h.total() > 0));
        let meta = open_trace(&h).meta.clone().unwrap();
        meta.types[0].id
    };
    let filter = ViewFilter {
        hidden_types: [hidden].into(),
        ..ViewFilter::default()
    };
    h.state_mut().open_traces[0]
        .groups
        .get_mut(0)
        .unwrap()
        .set_filter(filter.clone());
    settle(&mut h);

    select_in_chart(&mut h, 400.0, 700.0);
    settle(&mut h);
    let g = open_trace(&h).groups.get(0).unwrap().clone();
    assert!(
        g.interval.start > first.start && g.interval.end < first.end,
        "the selection {:?} is inside {first:?}",
        g.interval
    );
    assert_eq!(open_trace(&h).views[0].density.live.loaded(), g.interval);

    h.get_by_label("Table").click();
    settle(&mut h);
    let s = open_trace(&h);
    let g2 = s.groups.get(0).unwrap();
    assert_eq!(g2.active, ViewKind::Table);
    assert_eq!(g2.interval, g.interval, "switching keeps the interval");
    assert_eq!(g2.filter, filter, "switching keeps the filters");
    let table = &s.views[0].table;
    assert_eq!(table.loaded(), g.interval);
    let rows = table.model.row_count();
    assert!(rows > 0, "the table shows the interval's events");
    for r in table.model.rows(0..rows) {
        // Rows start in the interval, or before it for states still running at its start.
        assert!(
            r.ts < g.interval.end,
            "row at {} after {:?}",
            r.ts,
            g.interval
        );
        assert_ne!(r.type_id, hidden, "a hidden type is in the table");
    }
    // The time bar of the table shows the same interval.
    let (bar, _) = &s.views[0].bars[&ViewKind::Table];
    assert_eq!(bar.selection, g.interval);
}

#[test]
fn two_groups_on_one_trace_do_not_synchronise() {
    let (_dir, t) = trace();
    let mut h = harness(&t, ViewKind::Density, true);
    settle(&mut h);
    let first = open_trace(&h).groups.get(0).unwrap().interval;
    h.get_by_label("+ group").click();
    settle(&mut h);
    assert_eq!(open_trace(&h).groups.len(), 2);
    assert_eq!(open_trace(&h).active_group, 1);

    // Group 2: select an interval, hide a type, switch to the table.
    select_in_chart(&mut h, 300.0, 500.0);
    let hidden = open_trace(&h).meta.clone().unwrap().types[0].id;
    h.state_mut().open_traces[0]
        .groups
        .get_mut(1)
        .unwrap()
        .set_filter(ViewFilter {
            hidden_types: [hidden].into(),
            ..ViewFilter::default()
        });
    h.get_by_label("Table").click();
    settle(&mut h);
    let g2 = open_trace(&h).groups.get(1).unwrap().clone();
    assert_ne!(g2.interval, first, "group 2 selected an interval");
    assert_eq!(g2.active, ViewKind::Table);
    assert!(open_trace(&h).views[1].table.model.row_count() > 0);

    // Group 1 kept its interval, filters and view.
    let g1 = open_trace(&h).groups.get(0).unwrap().clone();
    assert_eq!(g1.interval, first);
    assert!(g1.filter.is_empty());
    assert_eq!(g1.active, ViewKind::Density);
    h.get_by_label("Group 1").click();
    settle(&mut h);
    let s = open_trace(&h);
    assert_eq!(s.active_group, 0);
    let d = &s.views[0].density;
    assert_eq!(d.live.loaded(), first);
    assert_eq!(d.view, first);
    assert!(d.hist.as_ref().is_some_and(|h| h.range == first));
    assert_eq!(s.groups.get(0).unwrap().interval, first);
    // Group 1's table was never asked for; group 2's stays on its interval.
    assert_eq!(s.views[1].table.loaded(), g2.interval);
    assert_eq!(s.groups.get(1).unwrap().interval, g2.interval);
}
