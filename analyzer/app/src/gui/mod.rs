//! The eframe/egui GUI: a thin shell over the view models of `socscope-analysis` (trace browser, time
//! bar, density, statistics, Gantt, event table, Ocelotl and TraceViz, view groups, live traces).
//!
//! Start here: [`run`] (the window), [`GuiApp`] (the UI, drawable into any `Ui` — the snapshot tests use
//! it), [`ViewOptions`].

mod app;
mod bands;
mod density;
pub mod display;
mod gantt;
mod results;

mod ocelotl;
mod open_trace;
mod readers;
mod script;
mod stats;
mod table;
mod theme;
mod timebar;
mod traceviz;
mod views;
mod widgets;

use std::path::PathBuf;

pub use app::GuiApp;
pub use open_trace::OpenTrace;
pub use script::Script;
use socscope_analysis::sync::ViewKind;
pub use theme::{ColourEdit, Colours};

/// How to open the window.
#[derive(Clone, Debug)]
pub struct ViewOptions {
    /// Catalog directory shown in the trace browser.
    pub dir: Option<PathBuf>,
    /// Traces opened at start.
    pub traces: Vec<PathBuf>,
    /// The view a new group shows first.
    pub first_view: ViewKind,
    /// Dark theme (else light).
    pub dark: bool,
    /// Window size in points.
    pub size: [f32; 2],
    /// Save a PNG of the window to this file...
    pub screenshot: Option<PathBuf>,
    /// ...after this many frames (and once loading settled), then exit; also exits without a screenshot.
    pub exit_after_frames: Option<u64>,
    /// Append one line per frame (frame number, ms since the previous frame, CPU ms of the frame).
    pub frame_log: Option<PathBuf>,
    /// A scripted interaction driven by the app itself.
    pub script: Option<Script>,
    /// Gantt charts open with their CPU tracks shown.
    pub cpu_tracks: bool,
    /// Ocelotl views open in spatiotemporal mode (else temporal).
    pub spatiotemporal: bool,
}

/// Opens the window and runs until it is closed. Without a display it fails at once with one line saying
/// what to do.
pub fn run(options: ViewOptions) -> anyhow::Result<()> {
    if let Some(why) = display::unavailable() {
        anyhow::bail!("cannot open a window: {why}; {}", display::HINT);
    }
    gantt::CPU_TRACKS_SHOWN.store(options.cpu_tracks, std::sync::atomic::Ordering::Relaxed);
    ocelotl::OPEN_SPATIOTEMPORAL
        .store(options.spatiotemporal, std::sync::atomic::Ordering::Relaxed);
    let mut native = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default()
            .with_title("socscope")
            .with_inner_size(options.size),
        renderer: eframe::Renderer::Glow,
        // Dithering only hides banding in gradients, which the views do not draw (flat colours and
        // images of their own pixels); without it the fragment shader does less per pixel, which a
        // software renderer (Mesa llvmpipe) pays on every pixel of every frame.
        dithering: false,
        ..Default::default()
    };
    // Frame times must measure our work, not the display's refresh.
    native.glow_options.vsync = options.frame_log.is_none();
    let mut app = GuiApp::new(
        options.dir.as_deref(),
        &options.traces,
        options.first_view,
        options.dark,
    );
    // The colours a user picked in a legend, kept between runs.
    if let Some(path) = socscope_analysis::palette::UserColours::default_path() {
        app = app.with_user_colours(path);
    }
    let shell = script::Shell::new(app, &options)?;
    let close = shell.close_requested();
    eframe::run_native(
        "socscope",
        native,
        Box::new(move |cc| {
            close_on_signals(cc.egui_ctx.clone(), close);
            Ok(Box::new(shell))
        }),
    )
    .map_err(|e| {
        match e {
            // winit's errors name its own source files; the user needs to know what to do.
            eframe::Error::Winit(_) | eframe::Error::WinitEventLoop(_) => anyhow::anyhow!(
                "cannot open a window: {}; {}",
                display::unavailable()
                    .unwrap_or_else(|| display::without_source_location(&e.to_string())),
                display::HINT
            ),
            e => anyhow::anyhow!("the window failed: {e}"),
        }
    })
}

/// Ctrl-C and SIGTERM (a terminal, `timeout`, a service manager) close the window as its close
/// button does, so the traces' readers close and leave no `-wal`/`-shm` file beside them; a second
/// signal exits at once (status 130), for a window that does not close.
fn close_on_signals(ctx: egui::Context, close: std::sync::Arc<std::sync::atomic::AtomicBool>) {
    use tokio::signal::unix::{SignalKind, signal};
    let watch = move || -> std::io::Result<()> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(async {
            let mut term = signal(SignalKind::terminate())?;
            let mut int = signal(SignalKind::interrupt())?;
            loop {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
                if close.swap(true, std::sync::atomic::Ordering::SeqCst) {
                    std::process::exit(130);
                }
                ctx.request_repaint();
            }
        })
    };
    let spawned = std::thread::Builder::new()
        .name("socscope-signals".into())
        .spawn(move || {
            if let Err(e) = watch() {
                crate::out::errln!("note: cannot watch for Ctrl-C and SIGTERM: {e}");
            }
        });
    if let Err(e) = spawned {
        crate::out::errln!("note: cannot watch for Ctrl-C and SIGTERM: {e}");
    }
}

pub use eframe::egui;
