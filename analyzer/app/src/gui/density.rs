//! The event density chart (RT-460 §3.4): a histogram of the loaded interval, wheel zoom and drag pan
//! inside it, and drag-select (shift or right button) to choose the interval to load.

use eframe::egui;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use egui::{Color32, Pos2, Rect, Sense, Stroke, Ui};
use socscope_analysis::density::{DensityConsumer, DensityHistogram, FINE_BINS};
use socscope_analysis::live::{Growth, LiveLoad, Step};
use socscope_analysis::loader::{self, LoadRequest, LoaderHandle, Progress, chunk_size};
use socscope_tracedb::units::{self, TimeAxis};
use socscope_tracedb::{Filter, TimeRange};

use super::readers::TraceNames;
use super::views::{DrawContext, GroupView, LoadContext, ViewAction};
use socscope_tracedb::Timestamp;
use std::sync::Arc;

pub struct DensityView {
    /// The histogram of the group's interval (reloaded as a live trace grows).
    pub live: LiveLoad<DensityHistogram>,
    pub hist: Option<DensityHistogram>,
    pub view: TimeRange,
    /// The trace and filter of the last load (a detail load of the zoomed view uses them).
    source: Option<(PathBuf, Filter)>,
    /// A finer histogram of part of the loaded interval, loaded once zooming stopped.
    pub detail: Option<DensityHistogram>,
    detail_loader: Option<LoaderHandle<DensityHistogram>>,
    last_move: Option<Instant>,
    /// The columns last drawn, so a frame that changes nothing costs nothing.
    columns: Option<(ColumnsKey, Vec<f64>)>,
    /// Intervals of an opened analysis result, drawn over the histogram.
    pub bands: Vec<socscope_analysis::results::Band>,
}

#[derive(Clone, Copy, PartialEq)]
struct ColumnsKey {
    hist: *const Vec<u64>,
    range: TimeRange,
    view: TimeRange,
    width: usize,
}

/// Zooming and panning redraw from the histogram in memory; a detail load starts only after the view
/// stayed still this long.
const DETAIL_DEBOUNCE: Duration = Duration::from_millis(300);

impl DensityView {
    pub fn new(range: TimeRange) -> Self {
        Self {
            live: LiveLoad::new(range, Growth::RELOAD_EACH_SECOND),
            hist: None,
            view: range,
            source: None,
            detail: None,
            detail_loader: None,
            last_move: None,
            columns: None,
            bands: Vec::new(),
        }
    }

    fn start(
        &mut self,
        trace: &Path,
        filter: &Filter,
    ) -> impl FnOnce(Step) -> LoaderHandle<DensityHistogram> + use<> {
        self.source = Some((trace.to_path_buf(), filter.clone()));
        self.detail = None;
        self.detail_loader = None;
        let (trace, filter) = (trace.to_path_buf(), filter.clone());
        move |step: Step| spawn(trace, step.range, filter)
    }

    pub fn load(&mut self, trace: &Path, range: TimeRange, filter: Filter) {
        self.hist = None;
        self.view = range;
        let start = self.start(trace, &filter);
        self.live.load(range, start);
    }

    /// A live trace grew: recount (at most once a second), keeping the old chart until the new one is
    /// done; a view that showed all that was loaded shows all of the new interval.
    pub fn extend(&mut self, trace: &Path, range: TimeRange, filter: Filter) {
        if self.busy() || range.end <= self.live.loaded().end {
            return;
        }
        let follow = self.view == self.live.loaded();
        let (t, f) = (trace.to_path_buf(), filter.clone());
        let started = self
            .live
            .extend(range.end, move |step| spawn(t, step.range, f));
        if let Some(step) = started {
            self.source = Some((trace.to_path_buf(), filter));
            self.detail = None;
            self.detail_loader = None;
            if follow {
                self.view = step.loaded;
            }
        }
    }

    /// Loading, or finished with a result not yet taken by `poll` (which also drops a finished
    /// detail load).
    pub fn busy(&self) -> bool {
        self.live.busy() || self.detail_loader.is_some()
    }

    pub fn progress(&self) -> Option<Progress> {
        self.live.progress()
    }

    pub fn stop(&mut self) {
        self.live.stop();
        self.detail_loader = None;
    }

    pub fn poll(&mut self) {
        if let Some(l) = &self.detail_loader {
            let p = l.progress();
            if p.finished {
                // A cancelled or failed detail load would show part of the view as empty: keep the coarse one.
                if !p.cancelled
                    && p.error.is_none()
                    && let Some(h) = l.snapshot()
                {
                    self.detail = Some(h);
                }
                self.detail_loader = None;
            }
        }
        if let Some(h) = self.live.poll() {
            self.hist = Some(h);
        }
    }

    /// The histogram `view` is drawn from: the detail one when it covers the view, else the loaded one.
    fn source_hist(&self, view: TimeRange) -> Option<&DensityHistogram> {
        match &self.detail {
            Some(d) if d.range.start <= view.start && view.end <= d.range.end => Some(d),
            _ => self.hist.as_ref(),
        }
    }

    /// Events per pixel column, recomputed only when the histogram, the view or the width changed.
    fn columns(&mut self, view: TimeRange, width: usize) -> Vec<f64> {
        let Some(h) = self.source_hist(view) else {
            return vec![0.0; width];
        };
        let key = ColumnsKey {
            hist: Arc::as_ptr(&h.bins),
            range: h.range,
            view,
            width,
        };
        if let Some((k, c)) = &self.columns
            && *k == key
        {
            return c.clone();
        }
        let c = h.columns(view, width);
        self.columns = Some((key, c.clone()));
        c
    }

    /// Once the view stopped moving and the bins it is drawn from are wider than a pixel, loads a finer
    /// histogram of the view in the background (the coarse one stays on screen, scaled, meanwhile).
    fn maybe_load_detail(&mut self, width: usize) {
        let Some(t) = self.last_move else { return };
        if t.elapsed() < DETAIL_DEBOUNCE || self.busy() {
            return;
        }
        self.last_move = None;
        let view = self.view;
        let px_ns = view.len() as f64 / width.max(1) as f64;
        let fine_enough = self
            .source_hist(view)
            .is_none_or(|h| h.range.len() as f64 / h.bins.len() as f64 <= px_ns.max(1.0));
        let Some((trace, filter)) = self.source.clone() else {
            return;
        };
        if fine_enough {
            return;
        }
        self.detail_loader = Some(spawn(trace, view, filter));
    }

    fn moved(&mut self) {
        self.last_move = Some(Instant::now());
        // A detail load of a view the user left is of no use.
        self.detail_loader = None;
    }

    /// Draws the chart; returns an interval the user selected to load.
    fn draw(&mut self, ui: &mut Ui, cursor: Option<i64>) -> Option<TimeRange> {
        let (rect, resp) = ui.allocate_exact_size(ui.available_size(), Sense::click_and_drag());
        let p = ui.painter_at(rect);
        let plot = Rect::from_min_max(
            Pos2::new(rect.left() + 70.0, rect.top() + 22.0),
            Pos2::new(rect.right() - 16.0, rect.bottom() - 34.0),
        );
        let visuals = ui.visuals().clone();
        p.rect_filled(plot, 0.0, visuals.extreme_bg_color);
        let width = plot.width().max(1.0) as usize;
        self.maybe_load_detail(width);
        if self.last_move.is_some() {
            ui.ctx().request_repaint_after(DETAIL_DEBOUNCE);
        }
        let view = self.view;
        let cols = self.columns(view, width);
        let max = nice_ceil(cols.iter().copied().fold(0.0, f64::max).max(1.0));
        let text = visuals.weak_text_color();
        value_grid(&p, plot, max, text);
        bars(&p, plot, &cols, max, visuals.selection.bg_fill);
        super::bands::draw_bands(ui, plot, view, &self.bands, None);
        if cols.iter().all(|v| *v <= 0.0) {
            let msg = if self.busy() || self.hist.is_none() {
                "loading…"
            } else {
                "no events in this interval (check the type and producer filters)"
            };
            p.text(
                plot.center(),
                egui::Align2::CENTER_CENTER,
                msg,
                egui::FontId::proportional(14.0),
                text,
            );
        }
        time_axis(&p, plot, view, text);
        let px_ns = view.len() as f64 / width as f64;
        p.text(
            Pos2::new(plot.left(), rect.top() + 2.0),
            egui::Align2::LEFT_TOP,
            format!(
                "events per {} (one pixel column){}",
                units::duration_compact(px_ns),
                if self.detail_loader.is_some() {
                    " · refining…"
                } else {
                    ""
                }
            ),
            egui::FontId::proportional(12.0),
            text,
        );
        p.text(
            Pos2::new(plot.center().x, rect.bottom() - 2.0),
            egui::Align2::CENTER_BOTTOM,
            "time · wheel: zoom · drag: pan · shift+drag or right-drag: select the interval to load",
            egui::FontId::proportional(11.0),
            text,
        );
        let ns_px = px_ns;
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
                        "{} s\n{v:.0} events in this pixel column",
                        units::timestamp(time_at(pos.x))
                    ));
                }
            }
        }
        self.drag(ui, &resp, &p, plot, view)
    }

    /// Dragging the chart: with shift or the secondary button it selects an interval to load (the
    /// one returned once the drag ends), else it pans; `view` is the interval drawn this frame.
    fn drag(
        &mut self,
        ui: &Ui,
        resp: &egui::Response,
        p: &egui::Painter,
        plot: Rect,
        view: TimeRange,
    ) -> Option<TimeRange> {
        let width = plot.width().max(1.0) as usize;
        let ns_px = view.len() as f64 / width as f64;
        let time_at = |x: f32| view.start + ((x - plot.left()) as f64 * ns_px) as i64;
        let bar = ui.visuals().selection.bg_fill;
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
        let new_len = (len * factor).clamp(1000.0, self.live.loaded().len().max(1000) as f64);
        let pivot = self.view.start as f64 + len * around;
        let start = (pivot - new_len * around).max(self.live.loaded().start as f64);
        let start = start.min(self.live.loaded().end as f64 - new_len);
        self.view = TimeRange::new(start as i64, (start + new_len) as i64);
        self.moved();
    }

    pub fn pan(&mut self, fraction: f64) {
        let len = self.view.len();
        let by = (len as f64 * fraction) as i64;
        let start = (self.view.start + by).clamp(
            self.live.loaded().start,
            (self.live.loaded().end - len).max(self.live.loaded().start),
        );
        self.view = TimeRange::new(start, start + len);
        self.moved();
    }
}

/// Counts the events of `range` into a histogram of [`FINE_BINS`] bins, on a loader thread.
fn spawn(trace: PathBuf, range: TimeRange, filter: Filter) -> LoaderHandle<DensityHistogram> {
    loader::spawn(
        LoadRequest {
            trace,
            range,
            filter,
            chunk_events: chunk_size::DENSITY,
        },
        DensityConsumer::new(range, FINE_BINS),
    )
}

/// Columns of bars are drawn this many at a time below their lowest bar.
const BAR_BLOCK: usize = 16;

/// The rectangles `(x0, x1, y0, y1)` (columns `x0..x1`, heights `y0..y1` above the axis) that cover
/// exactly the bars of `heights` (one per pixel column, 0 for none): for each block of
/// [`BAR_BLOCK`] columns, one wide rectangle up to the block's lowest bar, then each bar's part above
/// it. Software renderers (llvmpipe) shade every 4x4 pixel block a triangle touches, so a bar one
/// pixel wide costs as much as one four pixels wide: drawn whole, the bars cost the plot four times
/// over. The pieces meet on shared edges, so the pixels drawn are those of the whole bars.
fn bar_rects(heights: &[f32]) -> Vec<(usize, usize, f32, f32)> {
    let mut rects = Vec::new();
    for (b, block) in heights.chunks(BAR_BLOCK).enumerate() {
        let x = b * BAR_BLOCK;
        let floor = block.iter().copied().fold(f32::INFINITY, f32::min);
        if floor > 0.0 {
            rects.push((x, x + block.len(), 0.0, floor));
        }
        let floor = floor.max(0.0);
        for (i, &h) in block.iter().enumerate() {
            if h > floor {
                rects.push((x + i, x + i + 1, floor, h));
            }
        }
    }
    rects
}

/// The smallest 1, 2 or 5 times a power of ten at or above `v`, so the axis reads round numbers.
fn nice_ceil(v: f64) -> f64 {
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|c| *c >= v)
        .unwrap_or(10.0 * p)
}

/// Horizontal grid lines with their counts.
fn value_grid(p: &egui::Painter, plot: Rect, max: f64, text: Color32) {
    let grid = text.gamma_multiply(0.25);
    let font = egui::FontId::proportional(12.0);
    for i in 0..=4 {
        let f = i as f32 / 4.0;
        let y = plot.bottom() - f * plot.height();
        p.line_segment(
            [Pos2::new(plot.left(), y), Pos2::new(plot.right(), y)],
            Stroke::new(1.0, grid),
        );
        p.text(
            Pos2::new(plot.left() - 6.0, y),
            egui::Align2::RIGHT_CENTER,
            units::count_compact(max * f as f64),
            font.clone(),
            text,
        );
    }
}

/// All bars in one mesh: one shape per frame whatever the width.
fn bars(p: &egui::Painter, plot: Rect, cols: &[f64], max: f64, bar: Color32) {
    let heights: Vec<f32> = cols
        .iter()
        .map(|v| {
            if *v <= 0.0 {
                0.0
            } else {
                ((*v / max) as f32 * plot.height()).max(1.0)
            }
        })
        .collect();
    let mut mesh = egui::Mesh::default();
    for (x0, x1, y0, y1) in bar_rects(&heights) {
        mesh.add_colored_rect(
            Rect::from_min_max(
                Pos2::new(plot.left() + x0 as f32, plot.bottom() - y1),
                Pos2::new(plot.left() + x1 as f32, plot.bottom() - y0),
            ),
            bar,
        );
    }
    p.add(egui::Shape::mesh(mesh));
}

/// Time axis: round ticks, about one per 110 points, in a unit that fits the zoom.
fn time_axis(p: &egui::Painter, plot: Rect, view: TimeRange, text: Color32) {
    let font = egui::FontId::proportional(12.0);
    let axis = TimeAxis::new(
        view.start,
        view.end,
        (plot.width() / 110.0).max(2.0) as usize,
    );
    for t in axis.ticks(view.start, view.end) {
        let x = plot.left()
            + ((t - view.start) as f64 / view.len().max(1) as f64) as f32 * plot.width();
        p.line_segment(
            [
                Pos2::new(x, plot.bottom()),
                Pos2::new(x, plot.bottom() + 4.0),
            ],
            Stroke::new(1.0, text),
        );
        // Labels at the very ends stay inside the plot.
        let align = if x - plot.left() < 30.0 {
            egui::Align2::LEFT_TOP
        } else if plot.right() - x < 30.0 {
            egui::Align2::RIGHT_TOP
        } else {
            egui::Align2::CENTER_TOP
        };
        p.text(
            Pos2::new(x, plot.bottom() + 5.0),
            align,
            axis.label(t),
            font.clone(),
            text,
        );
    }
}

impl GroupView for DensityView {
    fn new(interval: TimeRange, _names: &TraceNames) -> Self {
        DensityView::new(interval)
    }
    fn ui(&mut self, ui: &mut Ui, cx: &DrawContext<'_>) -> Option<ViewAction> {
        self.draw(ui, cx.cursor).map(ViewAction::Load)
    }
    fn scripted_move(&mut self, i: u64, _: TimeRange, _: TimeRange) -> Option<TimeRange> {
        match i / 100 {
            0 => self.zoom(0.97, 0.5),
            1 => self.pan(0.01),
            2 => self.pan(-0.01),
            _ => self.zoom(1.0 / 0.97, 0.5),
        }
        None
    }
    fn bands_mut(&mut self) -> Option<&mut Vec<socscope_analysis::results::Band>> {
        Some(&mut self.bands)
    }
    fn load(&mut self, cx: &LoadContext<'_>) {
        DensityView::load(self, cx.trace, cx.interval, cx.filter.clone());
    }
    fn extend(&mut self, cx: &LoadContext<'_>) {
        DensityView::extend(self, cx.trace, cx.interval, cx.filter.clone());
    }
    fn poll(&mut self) {
        DensityView::poll(self);
    }
    fn busy(&self) -> bool {
        DensityView::busy(self)
    }
    fn catching_up(&self, end: Timestamp) -> bool {
        self.live.catching_up(end)
    }
    fn progress(&self) -> Option<Progress> {
        DensityView::progress(self)
    }
    fn stop(&mut self) {
        DensityView::stop(self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bar_rectangles_cover_each_bar_exactly_once() {
        let heights: Vec<f32> = (0..40)
            .map(|i| match i {
                3 | 20 => 0.0,
                _ => 10.0 + ((i * 7) % 11) as f32 * 0.75,
            })
            .collect();
        let rects = bar_rects(&heights);
        // Every column is covered from the axis to its height, with no overlap and no gap.
        for (c, &h) in heights.iter().enumerate() {
            let mut spans: Vec<(f32, f32)> = rects
                .iter()
                .filter(|r| r.0 <= c && c < r.1)
                .map(|r| (r.2, r.3))
                .collect();
            spans.sort_by(|a, b| a.0.total_cmp(&b.0));
            let mut top = 0.0;
            for (y0, y1) in spans {
                assert_eq!(y0, top, "column {c}");
                top = y1;
            }
            assert_eq!(top, h, "column {c}");
        }
        // A block without an empty column is one wide rectangle and its bars' tops.
        let wide = rects.iter().filter(|r| r.1 - r.0 > 1).count();
        assert_eq!(wide, 1, "{rects:?}");
    }

    #[test]
    fn axis_numbers_are_round_and_readable() {
        assert_eq!(nice_ceil(1.0), 1.0);
        assert_eq!(nice_ceil(1.2), 2.0);
        assert_eq!(nice_ceil(37.0), 50.0);
        assert_eq!(nice_ceil(700.0), 1000.0);
    }
}
