//! The Gantt's colour legend and the user's colours (issue 14, item 7): the legend lists the types on
//! screen, a colour picked for a type or a producer recolours every view and is kept in the user's file for
//! the next run. And the statistics pie per syscall name (item 6).
#![cfg(feature = "gui")]

mod common;

use std::path::Path;

use common::gui::{harness_of as harness, settle_idle as settle};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use socscope_analysis::palette::UserColours;
use socscope_analysis::sync::ViewKind;
use socscope_analyzer::gui::egui::Color32;
use socscope_analyzer::gui::{ColourEdit, GuiApp};

fn running_colour(h: &Harness<'_, GuiApp>) -> Color32 {
    let names = h.state().open_traces[0].names.as_ref().expect("names");
    let id = *names
        .type_names
        .iter()
        .find(|(_, n)| *n == "running")
        .expect("a running type")
        .0;
    names.colour(id)
}

fn open(trace: &Path, colours: &Path) -> Harness<'static, GuiApp> {
    let app = GuiApp::new(None, &[trace.to_path_buf()], ViewKind::Gantt, true)
        .with_user_colours(colours.to_path_buf());
    let mut h = harness(app);
    settle(&mut h);
    h
}

#[test]
fn the_legend_lists_the_types_shown_and_picked_colours_persist() {
    let (dir, trace) = common::demo_trace(6, 1);
    let file = dir.path().join("config").join("colours.json");
    let mut h = open(&trace, &file);
    // The legend names the types drawn.
    for t in ["running", "irq", "syscall"] {
        h.get_by_label(t);
    }
    let palette = running_colour(&h);
    assert_ne!(palette, Color32::from_rgb(200, 10, 20));
    // A colour picked for a type and one for a producer: the views use them, the file keeps them.
    h.state_mut().set_colour(&ColourEdit::Type(
        "running".into(),
        Color32::from_rgb(200, 10, 20),
    ));
    h.state_mut().set_colour(&ColourEdit::Producer(
        "vdec (319)".into(),
        Color32::from_rgb(1, 2, 3),
    ));
    settle(&mut h);
    assert_eq!(running_colour(&h), Color32::from_rgb(200, 10, 20));
    let saved = UserColours::load(&file).unwrap();
    assert_eq!(saved.types.get("running"), Some(&[200, 10, 20]));
    assert_eq!(saved.producers.get("vdec (319)"), Some(&[1, 2, 3]));
    drop(h);
    // The next run reads them back.
    let h = open(&trace, &file);
    assert_eq!(running_colour(&h), Color32::from_rgb(200, 10, 20));
    let names = h.state().open_traces[0].names.as_ref().unwrap();
    let vdec = names
        .tree
        .nodes()
        .iter()
        .find(|n| n.label == "vdec (319)")
        .expect("vdec")
        .id;
    assert_eq!(names.producer_colour(vdec), Color32::from_rgb(1, 2, 3));
}

#[test]
fn the_statistics_pie_shows_syscalls_by_name() {
    let (_dir, trace) = common::demo_trace(9, 1);
    let app = GuiApp::new(None, &[trace], ViewKind::Statistics, false);
    let mut h = harness(app);
    settle(&mut h);
    h.get_by_label("Metric").click();
    h.run_steps(2);
    h.get_by_label("Syscall instances").click();
    settle(&mut h);
    h.run_steps(2);
    for name in ["Syscall", "read", "futex", "ioctl"] {
        h.get_by_label(name);
    }
}

#[test]
fn no_two_types_of_a_trace_share_a_colour() {
    // `thread_exit` hashes to the green of `running`: the GUI moves it, as the PNGs do.
    let (dir, trace) = common::demo_trace(6, 1);
    let h = open(&trace, &dir.path().join("colours.json"));
    let s = &h.state().open_traces[0];
    let types = &s.meta.as_ref().expect("meta").types;
    assert!(types.iter().any(|t| t.name == "thread_exit"));
    let names = s.names.as_ref().expect("names");
    let colours: std::collections::BTreeSet<[u8; 4]> = types
        .iter()
        .map(|t| names.colour(t.id).to_array())
        .collect();
    assert_eq!(colours.len(), types.len());
    assert_eq!(running_colour(&h), Color32::from_rgb(0x2c, 0xa0, 0x2c));
}
