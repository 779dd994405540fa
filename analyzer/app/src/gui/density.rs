//! The event density chart (RT-460 §3.4): a histogram of the loaded interval, wheel zoom and drag pan
//! inside it, and drag-select (shift or right button) to choose the interval to load.

use eframe::egui;
use egui::{Pos2, Rect, Sense, Stroke, Ui};
use socscope_analysis::histogram::{DensityConsumer, DensityHistogram, FINE_BINS};
use socscope_analysis::loader::{self, LoadRequest, LoaderHandle, Progress, chunk_size};
use socscope_analysis::timebar::format_ns;
use socscope_tracedb::{Filter, TimeRange};

pub struct DensityView {
    loader: Option<LoaderHandle<DensityHistogram>>,
    seen: u64,
    pub hist: Option<DensityHistogram>,
    pub loaded: TimeRange,
    pub view: TimeRange,
    /// A reload for a grown live trace; the previous histogram stays on screen until it is done.
    refreshing: bool,
    last_refresh: Option<std::time::Instant>,
}

impl DensityView {
    pub fn new(range: TimeRange) -> Self {
        Self {
            loader: None,
            seen: 0,
            hist: None,
            loaded: range,
            view: range,
            refreshing: false,
            last_refresh: None,
        }
    }

    fn spawn(&mut self, trace: &std::path::Path, range: TimeRange, filter: Filter) {
        self.seen = 0;
        self.loaded = range;
        self.loader = Some(loader::spawn(
            LoadRequest {
                trace: trace.to_path_buf(),
                range,
                filter,
                chunk_events: chunk_size::DENSITY,
            },
            DensityConsumer::new(range, FINE_BINS),
        ));
    }

    pub fn load(&mut self, trace: &std::path::Path, range: TimeRange, filter: Filter) {
        self.hist = None;
        self.view = range;
        self.refreshing = false;
        self.spawn(trace, range, filter);
    }

    /// A live trace grew: recount, at most once a second, keeping the old chart until the new one is done.
    pub fn extend(&mut self, trace: &std::path::Path, range: TimeRange, filter: Filter) {
        if self.busy() || range.end <= self.loaded.end {
            return;
        }
        if self
            .last_refresh
            .is_some_and(|t| t.elapsed().as_millis() < 1000)
        {
            return;
        }
        self.last_refresh = Some(std::time::Instant::now());
        let follow = self.view == self.loaded;
        self.refreshing = true;
        self.spawn(trace, range, filter);
        if follow {
            self.view = range;
        }
    }

    pub fn busy(&self) -> bool {
        self.loader.as_ref().is_some_and(|l| !l.progress().finished)
    }

    pub fn progress(&self) -> Option<Progress> {
        self.loader.as_ref().map(|l| l.progress())
    }

    pub fn stop(&mut self) {
        if let Some(l) = &self.loader {
            l.cancel();
        }
    }

    pub fn poll(&mut self) {
        let Some(l) = &self.loader else { return };
        let finished = l.progress().finished;
        if self.refreshing && !finished {
            return;
        }
        if let Some((g, h)) = l.snapshot_if_newer(self.seen) {
            self.seen = g;
            self.hist = Some(h);
        }
        if finished {
            self.refreshing = false;
        }
    }

    /// Draws the chart; returns an interval the user selected to load.
    pub fn ui(&mut self, ui: &mut Ui, cursor: Option<i64>) -> Option<TimeRange> {
        let (rect, resp) = ui.allocate_exact_size(ui.available_size(), Sense::click_and_drag());
        let p = ui.painter_at(rect);
        let plot = Rect::from_min_max(
            Pos2::new(rect.left() + 60.0, rect.top() + 10.0),
            Pos2::new(rect.right() - 10.0, rect.bottom() - 20.0),
        );
        let visuals = ui.visuals().clone();
        p.rect_filled(plot, 0.0, visuals.extreme_bg_color);
        let width = plot.width().max(1.0) as usize;
        let view = self.view;
        let cols = self
            .hist
            .as_ref()
            .map(|h| h.columns(view, width))
            .unwrap_or_default();
        let max = cols.iter().copied().fold(0.0, f64::max).max(1.0);
        let bar = visuals.selection.bg_fill;
        for (i, v) in cols.iter().enumerate() {
            if *v <= 0.0 {
                continue;
            }
            let h = (*v / max) as f32 * plot.height();
            let x = plot.left() + i as f32;
            p.rect_filled(
                Rect::from_min_max(
                    Pos2::new(x, plot.bottom() - h),
                    Pos2::new(x + 1.0, plot.bottom()),
                ),
                0.0,
                bar,
            );
        }
        let text = visuals.weak_text_color();
        let font = egui::FontId::monospace(11.0);
        p.text(
            Pos2::new(plot.left() - 4.0, plot.top()),
            egui::Align2::RIGHT_TOP,
            format!("{max:.0}"),
            font.clone(),
            text,
        );
        p.text(
            Pos2::new(plot.left() - 4.0, plot.bottom()),
            egui::Align2::RIGHT_BOTTOM,
            "0",
            font.clone(),
            text,
        );
        p.text(
            Pos2::new(plot.left(), plot.bottom() + 2.0),
            egui::Align2::LEFT_TOP,
            format_ns(view.start),
            font.clone(),
            text,
        );
        p.text(
            Pos2::new(plot.right(), plot.bottom() + 2.0),
            egui::Align2::RIGHT_TOP,
            format_ns(view.end),
            font.clone(),
            text,
        );
        p.text(
            Pos2::new(plot.center().x, plot.bottom() + 2.0),
            egui::Align2::CENTER_TOP,
            "events per pixel",
            font,
            text,
        );
        let ns_px = view.len() as f64 / width as f64;
        if let Some(c) = cursor
            && view.contains(c)
        {
            let x = plot.left() + ((c - view.start) as f64 / ns_px) as f32;
            p.line_segment(
                [Pos2::new(x, plot.top()), Pos2::new(x, plot.bottom())],
                Stroke::new(1.5, super::theme::cursor()),
            );
        }
        let time_at = |x: f32| view.start + ((x - plot.left()) as f64 * ns_px) as i64;
        if let Some(pos) = resp.hover_pos() {
            let scroll = ui.input(|i| i.smooth_scroll_delta.y);
            if scroll != 0.0 {
                self.zoom(
                    (-scroll as f64 / 200.0).exp(),
                    ((pos.x - plot.left()) / plot.width()) as f64,
                );
            }
            if plot.contains(pos) {
                let c = ((pos.x - plot.left()) as usize).min(cols.len().saturating_sub(1));
                if let Some(v) = cols.get(c) {
                    resp.clone().on_hover_text_at_pointer(format!(
                        "{}\n{v:.0} events",
                        format_ns(time_at(pos.x))
                    ));
                }
            }
        }
        let selecting =
            ui.input(|i| i.modifiers.shift) || resp.dragged_by(egui::PointerButton::Secondary);
        let id = ui.scope_id().with("density-select");
        if resp.drag_started()
            && selecting
            && let Some(pos) = resp.interact_pointer_pos()
        {
            ui.ctx().data_mut(|d| d.insert_temp(id, pos.x));
        }
        let start: Option<f32> = ui.ctx().data(|d| d.get_temp(id));
        let mut out = None;
        if resp.dragged() {
            if let (Some(x0), Some(pos)) = (start, resp.interact_pointer_pos()) {
                p.rect_filled(
                    Rect::from_x_y_ranges(x0.min(pos.x)..=x0.max(pos.x), plot.y_range()),
                    0.0,
                    bar.gamma_multiply(0.4),
                );
            } else {
                self.pan(-(resp.drag_delta().x / plot.width()) as f64);
            }
        }
        if resp.drag_stopped() {
            if let (Some(x0), Some(pos)) = (start, resp.interact_pointer_pos()) {
                let (a, b) = (time_at(x0.min(pos.x)), time_at(x0.max(pos.x)));
                if b > a {
                    out = Some(TimeRange::new(a, b));
                }
            }
            ui.ctx().data_mut(|d| d.remove::<f32>(id));
        }
        out
    }

    pub fn zoom(&mut self, factor: f64, around: f64) {
        let len = self.view.len() as f64;
        let new_len = (len * factor).clamp(1000.0, self.loaded.len().max(1000) as f64);
        let pivot = self.view.start as f64 + len * around;
        let start = (pivot - new_len * around).max(self.loaded.start as f64);
        let start = start.min(self.loaded.end as f64 - new_len);
        self.view = TimeRange::new(start as i64, (start + new_len) as i64);
    }

    pub fn pan(&mut self, fraction: f64) {
        let len = self.view.len();
        let by = (len as f64 * fraction) as i64;
        let start = (self.view.start + by).clamp(
            self.loaded.start,
            (self.loaded.end - len).max(self.loaded.start),
        );
        self.view = TimeRange::new(start, start + len);
    }
}
