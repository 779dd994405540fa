//! The Ocelotl and TraceViz views in the app (issue 12): pixel snapshots (egui_kittest, wgpu in
//! software) on a small deterministic simulated trace, and what their controls do to the view models
//! and to the group (zoom re-runs the pipeline and sets the group's interval, p stepping, hover).
#![cfg(feature = "gui")]

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::gui::{harness, settle_loaded as settle};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use socscope_analysis::overview::{Aggregation, Partition};
use socscope_analysis::sync::ViewKind;
use socscope_analyzer::gui::egui;
use socscope_analyzer::gui::{GuiApp, OpenTrace};

/// A 2-second capture of the simulated board, seed 5, copied to a fixed name (the tab shows it).
fn trace() -> (tempfile::TempDir, PathBuf) {
    let (dir, file) = common::demo_trace(5, 2);
    let fixed = dir.path().join("demo.db");
    std::fs::copy(&file, &fixed).unwrap();
    (dir, fixed)
}

fn open_trace<'h>(h: &'h Harness<'_, GuiApp>) -> &'h OpenTrace {
    &h.state().open_traces[0]
}

#[test]
fn ocelotl_temporal_snapshot_and_controls() {
    let (_dir, t) = trace();
    let mut h = harness(&t, ViewKind::Ocelotl, false);
    settle(&mut h);
    for label in [
        "Ocelotl",
        "TraceViz",
        "Metric",
        "Aggregation",
        "Drawing",
        "Normalize",
        "Gantt of this interval",
        "Load",
    ] {
        h.get_by_label(label);
    }
    {
        let st = &open_trace(&h).views[0].ocelotl.state;
        let o = st.overview.as_ref().expect("an overview");
        assert!(o.complete());
        assert_eq!(o.micro.grid.slices, 200);
        let a = st.aggregated().expect("aggregated");
        // Ocelotl's first p is its default p, a listed one.
        assert_eq!(st.p, a.default_p());
        assert!(a.ps().len() >= 3);
    }
    h.snapshot("ocelotl_light");
    // The arrow keys step through the listed p.
    let (p0, ps) = {
        let st = &open_trace(&h).views[0].ocelotl.state;
        (st.p, st.aggregated().unwrap().ps())
    };
    h.key_press(egui::Key::ArrowRight);
    h.run();
    let p1 = open_trace(&h).views[0].ocelotl.state.p;
    let next = ps.iter().copied().find(|&x| x > p0).unwrap_or(p0);
    assert_eq!(p1, next);
    h.key_press(egui::Key::ArrowLeft);
    h.run();
    assert_eq!(open_trace(&h).views[0].ocelotl.state.p, p0);
}

#[test]
fn ocelotl_drag_zooms_the_group_and_the_gantt_follows() {
    let (_dir, t) = trace();
    let mut h = harness(&t, ViewKind::Ocelotl, true);
    settle(&mut h);
    let before = open_trace(&h).groups.get(0).unwrap().interval;
    // Drag across the middle of the overview.
    h.drag_at(egui::pos2(400.0, 250.0));
    h.step();
    h.hover_at(egui::pos2(600.0, 250.0));
    h.step();
    h.drop_at(egui::pos2(700.0, 250.0));
    h.step();
    settle(&mut h);
    let s = open_trace(&h);
    let g = s.groups.get(0).unwrap();
    assert!(
        g.interval.start > before.start && g.interval.end < before.end,
        "{:?} is not inside {before:?}",
        g.interval
    );
    assert_eq!(g.revision, 1);
    // The pipeline ran again on the selected interval.
    let st = &s.views[0].ocelotl.state;
    assert_eq!(st.live.loaded(), g.interval);
    let o = st.overview.as_ref().unwrap();
    assert_eq!(o.micro.grid.range, g.interval);
    let zoomed = g.interval;
    // The Gantt of the group shows the same interval.
    h.get_by_label("Gantt").click();
    settle(&mut h);
    assert_eq!(open_trace(&h).views[0].gantt.loaded(), zoomed);
    // "Gantt of this interval" opens a new group with a Gantt chart on it.
    h.get_by_label("Ocelotl").click();
    settle(&mut h);
    h.get_by_label("Gantt of this interval").click();
    settle(&mut h);
    let s = open_trace(&h);
    assert_eq!(s.groups.len(), 2);
    let g2 = s.groups.get(1).unwrap();
    assert_eq!((g2.active, g2.interval), (ViewKind::Gantt, zoomed));
}

#[test]
fn ocelotl_spatiotemporal_snapshot() {
    let (_dir, t) = trace();
    let mut h = harness(&t, ViewKind::Ocelotl, true);
    settle(&mut h);
    {
        let st = &mut h.state_mut().open_traces[0].views[0].ocelotl.state;
        st.settings.aggregation = Aggregation::Spatiotemporal;
        st.settings.slices = 60;
        st.rerun();
    }
    settle(&mut h);
    {
        let s = &mut h.state_mut().open_traces[0];
        let st = &mut s.views[0].ocelotl.state;
        let part = st.partition().expect("a partition");
        assert!(matches!(*part, Partition::Spatiotemporal(_)));
        assert!(!part.is_empty());
    }
    // The picture without the pointer (the README's shows it too).
    h.snapshot("ocelotl_spatiotemporal_dark");
    // Hovering the overview tells the area under the pointer.
    h.hover_at(egui::pos2(500.0, 250.0));
    h.run();
    assert!(
        h.query_all_by_label_contains("aggregate: ")
            .next()
            .is_some(),
        "no hover details"
    );
}

#[test]
fn traceviz_snapshot_and_hover() {
    let (_dir, t) = trace();
    let mut h = harness(&t, ViewKind::TraceViz, true);
    settle(&mut h);
    for label in [
        "Statistic",
        "Operator",
        "Group selected",
        "Group similar actors",
    ] {
        h.get_by_label(label);
    }
    {
        let v = &open_trace(&h).views[0].traceviz;
        let tl = v.timeline.timeline.as_ref().expect("a timeline");
        assert_eq!(tl.outline.len(), v.timeline.width);
        assert!(!tl.actors.is_empty());
        assert!(v.tree.visible().len() >= tl.actors.len());
    }
    h.snapshot("traceviz_dark");
    // The pointer over the first histogram row highlights that row.
    let rows_top = {
        let v = &open_trace(&h).views[0].traceviz;
        v.tree.visible()[0]
    };
    h.hover_at(egui::pos2(700.0, 330.0));
    h.run();
    let hovered = open_trace(&h).views[0].traceviz.hovered;
    assert!(
        hovered.is_some(),
        "no row under the pointer ({rows_top:?} is the first)"
    );
}

#[test]
fn traceviz_groups_and_zoom_keep_outline_and_rows_in_step() {
    use socscope_analysis::actors::Row;
    use socscope_analysis::traceviz::GroupOp;
    let (_dir, t) = trace();
    let mut h = harness(&t, ViewKind::TraceViz, false);
    settle(&mut h);
    {
        let v = &mut h.state_mut().open_traces[0].views[0].traceviz;
        let rows = v.tree.visible();
        v.tree.click(rows[1], false, false);
        v.tree.click(rows[2], false, true);
        let g = v.tree.group_selected("pair", GroupOp::Average).unwrap();
        assert!(v.tree.visible().contains(&Row::Group(g)));
        v.timeline.zoom(0.5, 0.5);
    }
    // The zoomed view gets its own timeline at pixel resolution once it stops moving.
    let zoomed = open_trace(&h).views[0].traceviz.timeline.view;
    let t0 = Instant::now();
    loop {
        h.step();
        let tl = &open_trace(&h).views[0].traceviz.timeline;
        if tl
            .timeline
            .as_ref()
            .is_some_and(|x| x.start == zoomed.start && x.end == zoomed.end)
        {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "never refined");
        std::thread::sleep(Duration::from_millis(30));
    }
    settle(&mut h);
    h.snapshot("traceviz_group_zoom_light");
}

#[test]
fn traceviz_similar_actors_and_drag_reorder_in_the_tree() {
    let (_dir, t) = trace();
    let mut h = harness(&t, ViewKind::TraceViz, false);
    settle(&mut h);
    // Within a distance of 1, every actor with values is alike: one proposal, created by the button.
    h.state_mut().open_traces[0].views[0]
        .traceviz
        .similar_threshold = 1.0;
    h.get_by_label("Group similar actors").click();
    h.run();
    let with_values = open_trace(&h).views[0]
        .traceviz
        .timeline
        .timeline
        .as_ref()
        .unwrap()
        .actors
        .len();
    {
        let v = &open_trace(&h).views[0].traceviz;
        assert_eq!(v.proposals.len(), 1);
        assert_eq!(v.proposals[0].len(), with_values);
    }
    h.get_by_label("Create all").click();
    h.run();
    {
        let v = &open_trace(&h).views[0].traceviz;
        assert!(v.proposals.is_empty());
        assert_eq!(v.tree.groups.len(), 1);
        let g = v.tree.groups.values().next().unwrap();
        assert_eq!(g.members.len(), with_values);
    }
    // Dragging the first tree row three rows down puts it after the next two.
    let before: Vec<_> = open_trace(&h).views[0].traceviz.tree.order().to_vec();
    let top = 293.0;
    h.drag_at(egui::pos2(100.0, top + 9.0));
    h.step();
    h.hover_at(egui::pos2(100.0, top + 30.0));
    h.step();
    h.hover_at(egui::pos2(100.0, top + 3.0 * 18.0));
    h.step();
    h.drop_at(egui::pos2(100.0, top + 3.0 * 18.0));
    h.run();
    let after = open_trace(&h).views[0].traceviz.tree.order().to_vec();
    assert_eq!(after[2], before[0], "{before:?} → {after:?}");
    assert_eq!(after[0], before[1]);
}

/// The overview and the TraceViz images are drawn (and uploaded) only when what they show changes:
/// hovering keeps them, panning TraceViz only moves them until the view's own timeline comes.
#[test]
fn images_are_drawn_again_only_when_what_they_show_changes() {
    let (_dir, t) = trace();
    let mut h = harness(&t, ViewKind::Ocelotl, false);
    settle(&mut h);
    let builds = |h: &Harness<'_, GuiApp>| open_trace(h).views[0].ocelotl.image_builds;
    let b0 = builds(&h);
    assert!(b0 >= 1);
    h.hover_at(egui::pos2(500.0, 250.0));
    h.run();
    h.hover_at(egui::pos2(520.0, 260.0));
    h.run();
    assert_eq!(builds(&h), b0, "hovering redraws nothing");
    h.key_press(egui::Key::ArrowRight);
    h.run();
    assert_eq!(builds(&h), b0 + 1, "another p, another picture");

    let mut h = harness(&t, ViewKind::TraceViz, false);
    settle(&mut h);
    h.state_mut().open_traces[0].views[0]
        .traceviz
        .timeline
        .zoom(0.5, 0.5);
    settle(&mut h);
    let tv = |h: &Harness<'_, GuiApp>| open_trace(h).views[0].traceviz.image_builds;
    let (b1, rev) = (tv(&h), open_trace(&h).views[0].traceviz.timeline.revision);
    let before = h.render().unwrap();
    h.state_mut().open_traces[0].views[0]
        .traceviz
        .timeline
        .pan(0.1);
    h.step();
    h.step();
    let after = h.render().unwrap();
    assert_eq!(open_trace(&h).views[0].traceviz.timeline.revision, rev);
    assert_eq!(tv(&h), b1, "panning moves the images, does not redraw them");
    assert_ne!(before.as_raw(), after.as_raw(), "the picture moved");
    // Once the view stops, its own timeline comes and the images are drawn from it.
    settle(&mut h);
    assert!(open_trace(&h).views[0].traceviz.timeline.revision > rev);
    assert!(tv(&h) > b1);
}

/// The gain and loss curves under the overview have a y axis (0 % to 100 % of each curve's
/// maximum), and the p shown is a blue line named `p = …` above it, off the axis, even when p is a
/// few thousandths (its x then is a few pixels from the axis and on a step of the curves).
#[test]
fn ocelotl_curves_have_a_y_axis_and_a_p_marker_one_can_see() {
    let (_dir, t) = trace();
    let mut h = harness(&t, ViewKind::Ocelotl, false);
    settle(&mut h);
    let p = open_trace(&h).views[0].ocelotl.state.p;
    let ys: Vec<f32> = ["100 %", "75 %", "50 %", "25 %", "0 %"]
        .iter()
        .map(|l| h.get_by_label(l).rect().center().y)
        .collect();
    assert!(ys.windows(2).all(|w| w[0] < w[1]), "{ys:?}");
    // The axis is right of its values.
    let axis_x = h.get_by_label("0 %").rect().right();
    let name_text = format!("p = {p:.4}");
    let name = h.get_by_label(&name_text).rect();
    let img = h.render().unwrap();
    let scale = img.width() as f32 / 1100.0;
    // A row of pixels inside the plot, under the marker's name.
    let y = ((ys[0] + ys[1]) * 0.5 * scale) as u32;
    let blue: Vec<f32> = (0..img.width())
        .filter(|&x| {
            let c = img.get_pixel(x, y);
            let (r, g, b) = (i32::from(c[0]), i32::from(c[1]), i32::from(c[2]));
            b > r + 80 && b > g + 40
        })
        .map(|x| x as f32 / scale)
        .collect();
    assert!(!blue.is_empty(), "no p marker at y = {y}");
    assert!(
        blue.iter()
            .all(|&x| x > axis_x + 4.0 && (x < name.left() || x > name.right())),
        "marker at {blue:?}, axis at {axis_x}, name at {name:?}"
    );
    assert!(
        blue.iter()
            .any(|&x| (x - name.left()).abs() < 14.0 || (x - name.right()).abs() < 14.0),
        "the name is beside its line: {blue:?} / {name:?}"
    );
}
