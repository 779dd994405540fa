//! The window shell: frame-time log, screenshots, exit after N frames, and scripted interactions
//! (`--script pan-zoom`) that drive the app itself, for benchmarks and tests under Xvfb.

use crate::out::errln;
use eframe::egui;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context;
use socscope_analysis::sync::ViewKind;

use super::{GuiApp, ViewOptions};

/// A scripted interaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Script {
    /// Once the views have data: zoom and pan the Gantt chart, the density chart and TraceViz, and move p,
    /// zoom in and out on Ocelotl (each once it has loaded), then exit.
    PanZoom,
}

impl std::str::FromStr for Script {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "pan-zoom" => Ok(Script::PanZoom),
            _ => Err(format!("unknown script {s:?} (known: pan-zoom)")),
        }
    }
}

/// Frames per scripted phase.
const PHASE_FRAMES: u64 = 400;

pub struct Shell {
    /// Set by a signal (see `close_on_signals`): the window closes at its next frame.
    close: Arc<std::sync::atomic::AtomicBool>,
    app: GuiApp,
    frame: u64,
    last: Option<Instant>,
    log: Option<std::fs::File>,
    screenshot: Option<PathBuf>,
    exit_after: Option<u64>,
    script: Option<Script>,
    /// Frame at which the script started (once data arrived).
    script_start: Option<u64>,
    /// Index of the script step running, and the frame it started at.
    script_step: usize,
    step_start: Option<u64>,
    shot: Arc<Mutex<Option<anyhow::Result<()>>>>,
    shot_requested: bool,
    started: Instant,
}

impl Shell {
    pub fn new(mut app: GuiApp, o: &ViewOptions) -> anyhow::Result<Self> {
        // `clear_color` below clears the window with the panel colour.
        app.window_cleared = true;
        let log = match &o.frame_log {
            Some(p) => {
                let mut f = std::fs::File::create(p)
                    .with_context(|| format!("cannot create {}", p.display()))?;
                writeln!(f, "frame\tphase\tinterval_ms\tcpu_ms\tprocess_cpu_ms")?;
                Some(f)
            }
            None => None,
        };
        Ok(Self {
            app,
            frame: 0,
            last: None,
            log,
            screenshot: o.screenshot.clone(),
            exit_after: o.exit_after_frames,
            script: o.script,
            script_start: None,
            script_step: 0,
            step_start: None,
            shot: Arc::default(),
            shot_requested: false,
            started: Instant::now(),
            close: Arc::default(),
        })
    }

    /// The flag that closes the window at its next frame.
    pub fn close_requested(&self) -> Arc<std::sync::atomic::AtomicBool> {
        Arc::clone(&self.close)
    }

    fn settled(&self) -> bool {
        // Loaded, or waited long enough (a live trace never settles).
        !self.app.busy() || self.started.elapsed().as_secs() > 60
    }

    /// Runs the script for this frame; returns the phase to log the frame under.
    ///
    /// Each chart first loads on the group's interval (phase `<chart>-load`, not part of the pan-zoom
    /// figures), then is zoomed and panned for [`PHASE_FRAMES`] frames (phase `<chart>`).
    fn drive(&mut self) -> Option<&'static str> {
        let Script::PanZoom = self.script?;
        if self.script_start.is_none() {
            if !(self.app.active.is_some() && self.settled()) {
                return None;
            }
            self.script_start = Some(self.frame);
        }
        let settled = self.settled();
        let frame = self.frame;
        let first_view = self.app.first_view;
        let s = self
            .app
            .active
            .and_then(|a| self.app.open_traces.get_mut(a))?;
        let gi = s.active_group;
        let whole = s.whole();
        let group = s.groups.get_mut(gi)?;
        const STEPS: [(&str, ViewKind, bool); 8] = [
            ("gantt-load", ViewKind::Gantt, false),
            ("gantt", ViewKind::Gantt, true),
            ("density-load", ViewKind::Density, false),
            ("density", ViewKind::Density, true),
            ("traceviz-load", ViewKind::TraceViz, false),
            ("traceviz", ViewKind::TraceViz, true),
            ("ocelotl-load", ViewKind::Ocelotl, false),
            ("ocelotl", ViewKind::Ocelotl, true),
        ];
        // Opened on Ocelotl or TraceViz, the group is on the whole trace (their cost does not grow
        // with the events): only those two are driven, not a Gantt of the whole trace.
        let steps = if matches!(first_view, ViewKind::Ocelotl | ViewKind::TraceViz) {
            &STEPS[4..]
        } else {
            &STEPS[..]
        };
        let Some(&(phase, k, moving)) = steps.get(self.script_step) else {
            return Some("done");
        };
        group.switch_to(k);
        let i = frame - self.step_start.unwrap_or(frame);
        self.step_start.get_or_insert(frame);
        let next = if moving {
            i + 1 >= PHASE_FRAMES
        } else {
            // Loading starts the frame after the switch; wait for it to begin and end.
            i > 2 && settled
        };
        if next {
            self.script_step += 1;
            self.step_start = None;
        }
        if !moving {
            return Some(phase);
        }
        // 100 frames zooming in, 100 panning right, 100 panning left, 100 zooming out, each view as
        // it zooms and pans (Ocelotl by sweeping p and loading narrower and wider intervals).
        let interval = group.interval;
        if let Some(r) = s.views[gi].view_mut(k).scripted_move(i, whole, interval) {
            group.set_interval(r);
        }
        Some(phase)
    }
}

impl eframe::App for Shell {
    fn clear_color(&self, visuals: &egui::Visuals) -> [f32; 4] {
        visuals.panel_fill.to_normalized_gamma_f32()
    }

    fn raw_input_hook(&mut self, _ctx: &egui::Context, raw_input: &mut egui::RawInput) {
        if self.screenshot.is_some() {
            without_pointer(raw_input);
        }
    }

    fn ui(&mut self, ui: &mut egui::Ui, frame: &mut eframe::Frame) {
        let now = Instant::now();
        let interval = self.last.map(|l| (now - l).as_secs_f64() * 1e3);
        self.last = Some(now);
        let phase = self.drive();
        if phase == Some("done") || self.close.load(std::sync::atomic::Ordering::SeqCst) {
            ui.ctx().send_viewport_cmd(egui::ViewportCommand::Close);
        }
        self.app.ui(ui);
        self.frame += 1;
        if let (Some(f), Some(phase), Some(iv)) = (&mut self.log, phase, interval) {
            let cpu = frame
                .info()
                .cpu_usage
                .map_or(f64::NAN, |c| f64::from(c) * 1e3);
            let all = process_cpu_ms().unwrap_or(f64::NAN);
            let _ = writeln!(f, "{}\t{phase}\t{iv:.3}\t{cpu:.3}\t{all:.3}", self.frame);
        }
        if self.script.is_some() || self.screenshot.is_some() || self.exit_after.is_some() {
            ui.ctx().request_repaint();
        }
        if let Some(n) = self.exit_after
            && self.frame >= n
            && (self.settled() || self.frame >= n * 20)
        {
            match &self.screenshot {
                Some(path) if !self.shot_requested => {
                    self.shot_requested = true;
                    let (slot, path) = (self.shot.clone(), path.clone());
                    ui.ctx().request_screenshot(move |image| {
                        let r = save_png(&path, &image);
                        if let Ok(mut s) = slot.lock() {
                            *s = Some(r);
                        }
                    });
                }
                Some(_) => {
                    let done = self.shot.lock().ok().and_then(|mut s| s.take());
                    if let Some(r) = done {
                        if let Err(e) = r {
                            errln!("socscope: screenshot: {e:#}");
                        }
                        ui.ctx().send_viewport_cmd(egui::ViewportCommand::Close);
                    }
                }
                None => ui.ctx().send_viewport_cmd(egui::ViewportCommand::Close),
            }
        }
    }
}

/// Takes the pointer out of the window for a screenshot: wherever the X server's pointer happens to be
/// (Xvfb puts it at the screen's centre, often inside the window), the picture shows no hovered
/// widget, tooltip or crosshair.
fn without_pointer(raw_input: &mut egui::RawInput) {
    raw_input.events.retain(|e| {
        !matches!(
            e,
            egui::Event::PointerMoved(_)
                | egui::Event::MouseMoved(_)
                | egui::Event::PointerButton { .. }
                | egui::Event::MouseWheel { .. }
                | egui::Event::Touch { .. }
        )
    });
    raw_input.events.push(egui::Event::PointerGone);
}

/// CPU time used so far by every thread of this process (the UI, the loaders, and a software
/// renderer's rasterizer threads), in ms, from Linux's per-thread scheduler statistics; `None` where
/// they cannot be read. The frame log's last column: its growth over a phase divided by the frames is
/// the work per frame, which wall-clock intervals hide under the machine's other load. A thread that
/// ends while it is read (a loader finishing) is left out rather than spoiling the whole figure.
fn process_cpu_ms() -> Option<f64> {
    let ns: u64 = std::fs::read_dir("/proc/self/task")
        .ok()?
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    Some(ns as f64 / 1e6)
}

fn save_png(path: &std::path::Path, image: &egui::ColorImage) -> anyhow::Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut enc = png::Encoder::new(
        std::io::BufWriter::new(file),
        image.size[0] as u32,
        image.size[1] as u32,
    );
    enc.set_color(png::ColorType::Rgba);
    enc.set_depth(png::BitDepth::Eight);
    let mut w = enc.write_header()?;
    let bytes: Vec<u8> = image.pixels.iter().flat_map(|c| c.to_array()).collect();
    w.write_image_data(&bytes)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{process_cpu_ms, without_pointer};
    use eframe::egui;

    #[test]
    fn a_screenshot_sees_no_pointer() {
        let mut raw = egui::RawInput::default();
        let key = egui::Event::Text("a".into());
        raw.events = vec![
            egui::Event::PointerMoved(egui::pos2(300.0, 200.0)),
            key.clone(),
            egui::Event::PointerButton {
                pos: egui::pos2(300.0, 200.0),
                button: egui::PointerButton::Primary,
                pressed: true,
                modifiers: egui::Modifiers::NONE,
            },
        ];
        without_pointer(&mut raw);
        assert_eq!(raw.events, [key, egui::Event::PointerGone]);
        // Through egui: nothing is hovered after the hook, even after a move into the window.
        let ctx = egui::Context::default();
        let mut raw = egui::RawInput::default();
        raw.events
            .push(egui::Event::PointerMoved(egui::pos2(10.0, 10.0)));
        without_pointer(&mut raw);
        let mut out = ctx.run_ui(raw, |_| {});
        // Nothing renders this frame's font atlas.
        out.textures_delta.clear();
        assert!(ctx.input(|i| i.pointer.hover_pos()).is_none());
    }

    #[test]
    fn process_cpu_time_counts_the_other_threads() {
        let before = process_cpu_ms().expect("Linux has /proc/self/task");
        let stop = std::sync::atomic::AtomicBool::new(false);
        let during = std::thread::scope(|s| {
            // Another thread busy while this one sleeps: only its time can make the figure grow.
            s.spawn(|| {
                let mut x = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            });
            std::thread::sleep(std::time::Duration::from_millis(200));
            let during = process_cpu_ms();
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            during
        });
        let during = during.expect("readable");
        assert!(during >= before + 20.0, "{before} ms, then {during} ms");
    }
}
