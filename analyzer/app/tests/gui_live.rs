//! A trace being written while the GUI shows it: the time bar, the density chart and the statistics grow
//! without user action, and the Gantt chart with Follow on keeps the newest data in view.
#![cfg(feature = "gui")]

use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use egui_kittest::Harness;
use socscope_analysis::sync::ViewKind;
use socscope_analyzer::gui::GuiApp;
use socscope_analyzer::gui::egui;

/// Kills the writer if the test fails early.
struct Writer(Child);

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a simulated board capture of `secs` seconds into a temporary catalog and returns the trace file
/// as soon as it exists.
fn live_trace(secs: u32) -> (tempfile::TempDir, Writer, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_socscope"))
        .args(["demo", "--headless", "--duration", &secs.to_string()])
        .args(["--seed", "5", "--dir"])
        .arg(dir.path())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("socscope runs");
    let writer = Writer(child);
    let t = Instant::now();
    loop {
        let trace = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| {
                p.extension().is_some_and(|e| e == "db")
                    && p.file_name().is_some_and(|n| n != "catalog.db")
            });
        if let Some(p) = trace {
            return (dir, writer, p);
        }
        assert!(t.elapsed() < Duration::from_secs(30), "no trace appeared");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Steps the UI for `d` of wall-clock time.
fn run_for(h: &mut Harness<'_, GuiApp>, d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        h.step();
        std::thread::sleep(Duration::from_millis(20));
    }
}

struct Seen {
    end: i64,
    density: u64,
    stats: u64,
}

fn seen(h: &Harness<'_, GuiApp>) -> Seen {
    let s = &h.state().sessions[0];
    let v = &s.views[0];
    Seen {
        end: s.whole().end,
        density: v.density.hist.as_ref().map_or(0, |h| h.total()),
        stats: v
            .stats
            .stats
            .as_ref()
            .map_or(0, |s| s.type_count.values().sum()),
    }
}

#[test]
fn a_growing_trace_grows_the_views_and_follow_keeps_the_gantt_on_the_newest_data() {
    let (_dir, _writer, trace) = live_trace(12);
    let app = GuiApp::new(None, &[trace], ViewKind::Density, true);
    let mut h = Harness::builder()
        .with_size(egui::Vec2::new(1100.0, 640.0))
        .build_ui_state(|ui, app: &mut GuiApp| app.ui(ui), app);
    run_for(&mut h, Duration::from_secs(3));
    assert!(h.state().sessions[0].live(), "the trace is still written");
    let a = seen(&h);
    // The statistics view loads when shown; show it once so it has a first result too.
    h.state_mut().sessions[0]
        .groups
        .get_mut(0)
        .unwrap()
        .switch_to(ViewKind::Statistics);
    run_for(&mut h, Duration::from_secs(1));
    let a_stats = seen(&h).stats;
    h.state_mut().sessions[0]
        .groups
        .get_mut(0)
        .unwrap()
        .switch_to(ViewKind::Density);
    run_for(&mut h, Duration::from_secs(3));
    let b = seen(&h);
    assert!(b.end > a.end, "the trace end moved: {} -> {}", a.end, b.end);
    assert!(
        b.density > a.density,
        "the density chart counted more events: {} -> {}",
        a.density,
        b.density
    );
    let s = &h.state().sessions[0];
    assert_eq!(
        s.views[0].density.loaded.end,
        s.groups.get(0).unwrap().interval.end,
        "the density chart shows up to the group's (growing) end"
    );
    let bar = &s.views[0].bars[&ViewKind::Density].0;
    assert_eq!(bar.whole, s.whole(), "the time bar follows the trace");
    assert_eq!(
        bar.selection, bar.displayed,
        "growth alone does not ask the user to press Load"
    );

    h.state_mut().sessions[0]
        .groups
        .get_mut(0)
        .unwrap()
        .switch_to(ViewKind::Statistics);
    run_for(&mut h, Duration::from_secs(2));
    let c_stats = seen(&h).stats;
    assert!(
        c_stats > a_stats,
        "the statistics counted more events: {a_stats} -> {c_stats}"
    );

    // The Gantt with Follow on ends at the newest loaded data, frame after frame.
    h.state_mut().sessions[0]
        .groups
        .get_mut(0)
        .unwrap()
        .switch_to(ViewKind::Gantt);
    h.state_mut().sessions[0].views[0].gantt.follow = true;
    run_for(&mut h, Duration::from_secs(1));
    let g0 = h.state().sessions[0].views[0].gantt.view;
    run_for(&mut h, Duration::from_secs(2));
    let s = &h.state().sessions[0];
    let g = &s.views[0].gantt;
    assert!(g.view.end > g0.end, "the Gantt moved with the data");
    assert_eq!(g.view.end, g.loaded.end.max(g.view.start + 1));
    assert_eq!(g.view.len(), g0.len(), "following keeps the zoom");
    assert!(g.model.events() > 0);
}
