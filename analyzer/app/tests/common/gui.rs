//! The GUI under a kittest harness: an app on trace files, stepped until it has settled.

use std::path::Path;
use std::time::{Duration, Instant};

use egui_kittest::Harness;
use socscope_analysis::sync::ViewKind;
use socscope_analyzer::gui::{GuiApp, egui};

/// `app` in a 1100×640 window, at most 16 steps per `run`.
pub fn harness_of(app: GuiApp) -> Harness<'static, GuiApp> {
    Harness::builder()
        .with_size(egui::Vec2::new(1100.0, 640.0))
        .with_max_steps(16)
        .build_ui_state(|ui, app: &mut GuiApp| app.ui(ui), app)
}

/// The app on `trace`, opened on `view`, in the dark or light theme.
pub fn harness(trace: &Path, view: ViewKind, dark: bool) -> Harness<'static, GuiApp> {
    harness_of(GuiApp::new(None, &[trace.to_path_buf()], view, dark))
}

/// Steps the UI until the active trace's names are read and every loader and filter is done, then
/// once more so the last data is drawn.
pub fn settle_loaded(h: &mut Harness<'_, GuiApp>) {
    let t = Instant::now();
    loop {
        h.step();
        if h.state()
            .active
            .is_some_and(|a| h.state().open_traces[a].names.is_some())
            && !h.state().busy()
        {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(90),
            "the views never finished loading"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    h.run();
}

/// Steps until the trace is open and nothing loads for three frames in a row: a view that is switched
/// to starts loading in the frame *after* the click, so one idle frame right after a click proves
/// nothing.
pub fn settle_idle(h: &mut Harness<'_, GuiApp>) {
    let t = Instant::now();
    let mut idle = 0;
    while idle < 3 {
        h.step();
        let ready = h
            .state()
            .active
            .is_some_and(|a| !h.state().open_traces[a].groups.is_empty());
        idle = if ready && !h.state().busy() {
            idle + 1
        } else {
            0
        };
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the views never settled"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// [`settle_idle`], then frames until no repaint is asked for, so the settled state is drawn.
pub fn settle_idle_and_draw(h: &mut Harness<'_, GuiApp>) {
    settle_idle(h);
    h.run();
}
