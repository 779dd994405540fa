//! The Gantt chart (RT-460 §3.1): draws [`GanttFrame`]s and turns the mouse into zoom, pan and selection.

use eframe::egui;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use egui::{Color32, Mesh, Pos2, Rect, Sense, Shape, Stroke, Ui, Vec2};
use rayon::prelude::*;
use socscope_analysis::gantt::{
    CpuTracks, FULL_COVERAGE, GanttConsumer, GanttFrame, GanttModel, GanttRow, GanttSnapshot,
    Lanes, LinkArrow, LossGap,
};
use socscope_analysis::live::{Growth, LiveLoad, Step, StepKind};
use socscope_analysis::loader::{self, LoadRequest, LoaderHandle, chunk_size};
use socscope_tracedb::units::{self, TimeAxis};
use socscope_tracedb::{Filter, ProducerId, TimeRange, TypeId};

use super::readers::{TraceMetadata, TraceNames};
use super::theme;
use super::theme::ColourEdit;
use super::views::{DrawContext, GroupView, LoadContext, ViewAction};
use socscope_analysis::loader::Progress;
use socscope_tracedb::Timestamp;

/// Whether new charts show their CPU tracks (`socscope view --no-cpu-tracks` clears it).
pub static CPU_TRACKS_SHOWN: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(true);

const ROW_H: f32 = 18.0;
const LABEL_W: f32 = 190.0;
/// Above this many events the Gantt stops loading and asks for a shorter interval.
const MAX_EVENTS: u64 = 30_000_000;

/// What the Gantt says where the CPU section would be for a trace recorded before the CPU tracks.
fn no_cpu_tracks_hint(trace: &std::path::Path) -> String {
    format!(
        "No CPU tracks in this trace (recorded before them) — run `socscope upgrade {}` to derive them",
        trace.display()
    )
}

/// Starts a load of the Gantt's events for a step of its [`LiveLoad`].
fn spawn(
    trace: &std::path::Path,
    filter: Filter,
    lanes: Arc<Lanes>,
) -> impl FnOnce(Step) -> LoaderHandle<GanttSnapshot> + use<> {
    let trace = trace.to_path_buf();
    move |step| {
        let consumer = match step.kind {
            StepKind::Append => GanttConsumer::appending_from(step.range.start),
            _ => GanttConsumer::new(),
        }
        .with_lanes(lanes);
        loader::spawn(
            LoadRequest {
                trace,
                range: step.range,
                filter,
                chunk_events: chunk_size::GANTT,
            },
            consumer,
        )
    }
}

pub struct GanttView {
    pub model: GanttModel,
    /// The events of the group's interval (new ones appended as a live trace grows).
    pub live: LiveLoad<GanttSnapshot>,
    /// The interval on screen (zoom and pan inside and around `loaded`).
    pub view: TimeRange,
    pub collapsed: BTreeSet<ProducerId>,
    /// The lanes of the trace's states (a producer's Pajé state types get a row each).
    pub lanes: Arc<Lanes>,
    pub follow: bool,
    /// Show the rows of producers without events too (off: they are left out).
    pub show_empty: bool,
    /// Show the CPU tracks (the CPU producers' rows, with the interrupts each CPU served).
    pub cpu_tracks: bool,
    tracks: CpuTracks,
    /// For a trace recorded before the CPU tracks existed: the line that says so where the CPU
    /// section would be, with the command that derives them.
    no_tracks_hint: Option<String>,
    row_offset: usize,
    cache: Option<(FrameKey, GanttFrame)>,
    /// The chart's shapes for the cached frame, drawn again as long as nothing they show changes.
    drawn: Option<(DrawKey, Vec<Shape>)>,
    /// The texture holding the chart's pixel-aligned part (see [`chart_drawing`]).
    texture: Option<egui::TextureHandle>,
    last_interaction: Option<Instant>,
    /// The view left the loaded interval: load it once the user stops moving.
    pub wants_load: Option<TimeRange>,
    /// Intervals of an opened analysis result, drawn over the chart.
    pub bands: Vec<socscope_analysis::results::Band>,
}

#[derive(Clone, PartialEq)]
struct FrameKey {
    view: TimeRange,
    width: u32,
    rows: Vec<GanttRow>,
    events: u64,
    losses: usize,
}

/// What the chart's shapes depend on besides the frame.
#[derive(Clone, PartialEq)]
struct DrawKey {
    frame: FrameKey,
    chart: Rect,
    pixels_per_point: f32,
    dark: bool,
    /// Types with a colour (a live trace can bring new ones).
    colours: u64,
}

impl GanttView {
    pub fn new(range: TimeRange) -> Self {
        Self {
            model: GanttModel::new(),
            live: LiveLoad::new(range, Growth::Append),
            view: range,
            collapsed: BTreeSet::new(),
            lanes: Arc::default(),
            follow: false,
            show_empty: false,
            cpu_tracks: CPU_TRACKS_SHOWN.load(std::sync::atomic::Ordering::Relaxed),
            tracks: CpuTracks::default(),
            no_tracks_hint: None,
            row_offset: 0,
            cache: None,
            drawn: None,
            texture: None,
            last_interaction: None,
            wants_load: None,
            bands: Vec::new(),
        }
    }

    pub fn load(
        &mut self,
        trace: &std::path::Path,
        range: TimeRange,
        filter: Filter,
        meta: &TraceMetadata,
    ) {
        self.model = GanttModel::new();
        self.model.set_losses(meta.losses.clone());
        self.tracks = CpuTracks::new(&meta.producers, &meta.types);
        self.model.set_cpu_tracks(self.tracks.clone());
        // The same test as `socscope stats` makes before pointing to `socscope upgrade`.
        self.no_tracks_hint = socscope_tracedb::recorded_before_cpu_tracks(&meta.types)
            .then(|| no_cpu_tracks_hint(trace));
        self.lanes = Arc::new(Lanes::new(&meta.types));
        self.view = range;
        self.cache = None;
        self.drawn = None;
        self.live
            .load(range, spawn(trace, filter, self.lanes.clone()));
    }

    /// The line shown where the CPU section would be when the trace was recorded before the CPU
    /// tracks existed (None for a trace that has them, or had no context switches to derive them from).
    pub fn no_cpu_tracks_hint(&self) -> Option<&str> {
        self.no_tracks_hint.as_deref()
    }

    /// The interval whose events are loaded (or loading).
    pub fn loaded(&self) -> TimeRange {
        self.live.loaded()
    }

    /// The load stopped at [`MAX_EVENTS`]: the rest of the interval is not on screen.
    pub fn truncated(&self) -> bool {
        self.live.truncated()
    }

    /// The trace grew: load what is new after the loaded interval.
    pub fn extend(
        &mut self,
        trace: &std::path::Path,
        end: i64,
        filter: Filter,
        meta: &TraceMetadata,
    ) {
        if self.busy() || end <= self.loaded().end || self.truncated() {
            return;
        }
        let from = self.loaded().end;
        let follow_view = self.view.end >= from;
        self.model.set_losses_if_more(meta.losses.clone());
        self.model.start_appending();
        let Some(step) = self
            .live
            .extend(end, spawn(trace, filter, self.lanes.clone()))
        else {
            return;
        };
        if self.follow {
            let len = self.view.len();
            self.view = TimeRange::new(end - len, end);
        } else if follow_view
            && self.view == TimeRange::new(self.view.start, from)
            && self.view.start == step.loaded.start
        {
            self.view = step.loaded;
        }
    }

    /// Loading, or finished with a result not yet taken by `poll`.
    pub fn busy(&self) -> bool {
        self.live.busy()
    }

    pub fn poll(&mut self) -> bool {
        let mut changed = false;
        // Progress read before the snapshot: the snapshot holds at least what the progress says.
        let reached = self.live.progress().map_or(0, |p| p.loaded_ns);
        if let Some(snap) = self.live.poll() {
            changed = self.model.absorb(&snap);
        }
        if self.model.events() > MAX_EVENTS && !self.truncated() {
            // What is loaded ends where the load stopped: zooming or panning past it loads from there.
            self.live.truncate(reached);
        }
        changed
    }

    pub fn stop(&mut self) {
        self.live.stop();
    }

    pub fn progress(&self) -> Option<socscope_analysis::loader::Progress> {
        self.live.progress()
    }

    fn mark(&mut self) {
        self.last_interaction = Some(Instant::now());
    }

    /// The view moved outside what is loaded and the user has stopped for a moment.
    pub fn settled_outside_loaded(&self) -> Option<TimeRange> {
        let idle = self
            .last_interaction
            .is_some_and(|t| t.elapsed() > Duration::from_millis(400));
        let loaded = self.loaded();
        let outside = self.view.start < loaded.start || self.view.end > loaded.end;
        (idle && outside && !self.follow).then_some(self.view)
    }

    pub fn zoom(&mut self, factor: f64, around: f64, whole: TimeRange) {
        let len = self.view.len() as f64;
        let new_len = (len * factor).clamp(100.0, whole.len().max(100) as f64 * 1.2);
        let pivot = self.view.start as f64 + len * around;
        let start = pivot - new_len * around;
        self.view = TimeRange::new(start as i64, (start + new_len) as i64);
        self.mark();
    }

    pub fn pan(&mut self, fraction: f64) {
        let by = (self.view.len() as f64 * fraction) as i64;
        self.view = TimeRange::new(self.view.start + by, self.view.end + by);
        self.mark();
    }

    pub fn frame(&mut self, rows: &[GanttRow], width: u32) -> &GanttFrame {
        let key = FrameKey {
            view: self.view,
            width,
            rows: rows.to_vec(),
            events: self.model.events(),
            losses: self.model.loss_count(),
        };
        if self.cache.as_ref().is_none_or(|(k, _)| *k != key) {
            let f = self.model.frame(rows, self.view, width);
            self.cache = Some((key, f));
        }
        &self.cache.as_ref().expect("just filled").1
    }

    /// The chart's shapes for `rows` in `chart` (cached with the frame), with the share of links drawn
    /// and the lost-event gaps (for their tooltips).
    fn chart_shapes(
        &mut self,
        ctx: &egui::Context,
        rows: &[GanttRow],
        chart: Rect,
        pixels_per_point: f32,
        dark: bool,
        names: &TraceNames,
    ) -> (&[Shape], String, Vec<LossGap>) {
        let width = chart.width().max(1.0) as u32;
        self.frame(rows, width);
        let (frame_key, frame) = self.cache.as_ref().expect("just filled");
        let key = DrawKey {
            frame: frame_key.clone(),
            chart,
            pixels_per_point,
            dark,
            colours: names.colour_generation,
        };
        if self.drawn.as_ref().is_none_or(|(k, _)| *k != key) {
            let colour = |t| names.colour(t);
            let drawing = chart_drawing(frame, chart, pixels_per_point, dark, &colour);
            let mut shapes = Vec::with_capacity(2);
            if let Some(image) = drawing.image {
                let size =
                    Vec2::new(image.width() as f32, image.height() as f32) / pixels_per_point;
                let options = egui::TextureOptions::NEAREST;
                let id = match &mut self.texture {
                    Some(t) => {
                        t.set(image, options);
                        t.id()
                    }
                    None => {
                        let t = ctx.load_texture("gantt-chart", image, options);
                        let id = t.id();
                        self.texture = Some(t);
                        id
                    }
                };
                shapes.push(Shape::image(
                    id,
                    Rect::from_min_size(chart.min, size),
                    Rect::from_min_max(Pos2::ZERO, Pos2::new(1.0, 1.0)),
                    Color32::WHITE,
                ));
            }
            shapes.push(Shape::mesh(drawing.over));
            self.drawn = Some((key, shapes));
        }
        let shapes = &self.drawn.as_ref().expect("just filled").1;
        let header = if frame.links_legible() {
            links_drawn_text(frame.links_drawn_percent())
        } else {
            format!(
                "{} links in view, too dense to draw over the states: zoom in",
                frame.links_total
            )
        };
        (shapes, header, frame.losses.clone())
    }

    /// The event types of the chart on screen (empty before its first frame).
    pub fn types_shown(&self) -> std::collections::BTreeSet<socscope_tracedb::TypeId> {
        self.cache
            .as_ref()
            .map(|(_, f)| f.types())
            .unwrap_or_default()
    }

    /// The event types loaded for the chart's interval, drawn at this zoom or not (the legend's).
    pub fn types_loaded(&self) -> std::collections::BTreeSet<socscope_tracedb::TypeId> {
        self.model.types_loaded()
    }

    /// The chart's rows, top to bottom: the visible producers, each followed by its lanes when its
    /// states fall into several (see [`GanttModel::lanes`]).
    /// Unless [`Self::show_empty`], rows without any event loaded (nor any below them) are left out.
    pub fn rows<'a>(&self, names: &'a TraceNames, hidden: &BTreeSet<ProducerId>) -> Vec<Line<'a>> {
        let mut out = Vec::new();
        let empty = if self.show_empty {
            BTreeSet::new()
        } else {
            self.empty_producers(names)
        };
        for node in names.tree.visible_rows(&self.collapsed, hidden) {
            if empty.contains(&node.id) || (!self.cpu_tracks && self.tracks.is_track(node.id)) {
                continue;
            }
            out.push(Line {
                row: GanttRow::producer(node.id),
                node,
            });
            out.extend(self.model.lanes(node.id).into_iter().map(|l| Line {
                row: GanttRow::lane(node.id, l),
                node,
            }));
        }
        out
    }

    /// The producers with no event loaded, themselves or below them in the tree.
    fn empty_producers(&self, names: &TraceNames) -> BTreeSet<ProducerId> {
        let with = self.model.producers_with_events();
        let nodes = names.tree.nodes();
        let mut used: std::collections::HashSet<ProducerId> = with.iter().copied().collect();
        // Depth first: every node comes after its parent, so walking back carries use upwards.
        for n in nodes.iter().rev() {
            if used.contains(&n.id)
                && let Some(p) = n.parent
            {
                used.insert(p);
            }
        }
        nodes
            .iter()
            .map(|n| n.id)
            .filter(|id| !used.contains(id))
            .collect()
    }

    /// The name of a row: its producer's label, or its lane's name.
    pub fn row_label(&self, line: &Line<'_>) -> String {
        match line.row.lane {
            Some(l) => self.lanes.name(l),
            None => line.node.label.clone(),
        }
    }

    /// Draws the chart (row labels, the rows' events, bands, header, time axis, losses, cursor) and
    /// turns the mouse over it into zoom, pan, scrolling and selection.
    fn draw(
        &mut self,
        ui: &mut Ui,
        names: &TraceNames,
        hidden: &BTreeSet<ProducerId>,
        whole: TimeRange,
        cursor: Option<i64>,
    ) {
        let dark = ui.visuals().dark_mode;
        let rows_all = self.rows(names, hidden);
        let avail = ui.available_size();
        let (outer, _) = ui.allocate_exact_size(avail, Sense::hover());
        let header_h = 18.0;
        // A trace recorded before the CPU tracks: one line above the rows, where the CPU section
        // would start, says why its CPUs show no threads and how to get them.
        let hint = self.no_tracks_hint.clone().filter(|_| self.cpu_tracks);
        let hint_h = if hint.is_some() { ROW_H } else { 0.0 };
        let fit = (((outer.height() - header_h - hint_h) / ROW_H)
            .floor()
            .max(1.0)) as usize;
        // When not every row fits, the last line holds the "rows a-b of n" hint rather than a row under it.
        let visible_rows = if rows_all.len() > fit {
            fit.saturating_sub(1).max(1)
        } else {
            fit
        };
        self.row_offset = self
            .row_offset
            .min(rows_all.len().saturating_sub(visible_rows));
        let shown =
            &rows_all[self.row_offset..(self.row_offset + visible_rows).min(rows_all.len())];
        let rows: Vec<GanttRow> = shown.iter().map(|r| r.row).collect();
        let ids: Vec<ProducerId> = rows.iter().map(|r| r.producer).collect();
        // The chart starts on a pixel boundary, so that pixel columns and rows are whole pixels.
        let ppp = ui.pixels_per_point();
        let snap = |v: f32| (v * ppp).round() / ppp;
        let chart = Rect::from_min_max(
            Pos2::new(
                snap(outer.left() + LABEL_W),
                snap(outer.top() + header_h + hint_h),
            ),
            outer.right_bottom(),
        );
        if let Some(hint) = hint {
            let strip = Rect::from_min_max(
                Pos2::new(outer.left() + 4.0, outer.top() + header_h),
                Pos2::new(outer.right(), chart.top()),
            );
            // Left-aligned over the row labels, where the eye starts reading the CPU section.
            let mut line = ui.new_child(
                egui::UiBuilder::new()
                    .max_rect(strip)
                    .layout(egui::Layout::left_to_right(egui::Align::Center)),
            );
            line.add(
                egui::Label::new(
                    egui::RichText::new(hint)
                        .size(12.0)
                        .color(ui.visuals().warn_fg_color),
                )
                .truncate(),
            )
            .on_hover_text(
                "The trace's context switches were recorded before the collector wrote \
                 CPU tracks; the upgrade derives them in place and keeps every event",
            );
        }
        let width = chart.width().max(1.0) as u32;
        let view = self.view;
        let painter = ui.painter_at(outer);
        label_stripes(&painter, shown.len(), outer, chart, ppp, dark);
        self.row_labels(ui, &painter, shown, outer, chart);
        let (shapes, links_header, losses) =
            self.chart_shapes(ui.ctx(), &rows, chart, ppp, dark, names);
        let cp = ui.painter_at(chart);
        cp.extend(shapes.iter().cloned());
        super::bands::draw_bands(ui, chart, view, &self.bands, Some((&ids, ROW_H)));
        let px_ns = view.len() as f64 / width as f64;
        // Header: the interval and the share of links drawn (top left, as in Framesoc).
        let header_rect = painter.text(
            Pos2::new(outer.left() + 4.0, outer.top() + 2.0),
            egui::Align2::LEFT_TOP,
            links_header,
            egui::FontId::proportional(12.0),
            ui.visuals().weak_text_color(),
        );
        time_axis(ui, &painter, outer, chart, view, header_rect);
        for g in &losses {
            let r = loss_rect(g, chart);
            let resp = ui.interact(r, ui.scope_id().with(("loss", g.x0)), Sense::hover());
            resp.on_hover_text(format!(
                "{} events lost on cpu {}",
                g.count,
                g.cpu.map_or("?".into(), |c| c.to_string())
            ));
        }
        if let Some(c) = cursor
            && view.contains(c)
        {
            let cx = chart.left() + ((c - view.start) as f64 / px_ns) as f32;
            cp.line_segment(
                [Pos2::new(cx, chart.top()), Pos2::new(cx, chart.bottom())],
                Stroke::new(1.5, theme::cursor()),
            );
        }
        // Input.
        let resp = ui.interact(
            chart,
            ui.scope_id().with("gantt-chart"),
            Sense::click_and_drag(),
        );
        if let Some(pos) = resp.hover_pos() {
            self.wheel(ui, pos, chart, whole);
            self.event_tip(&resp, pos, &rows, chart, view, names);
        }
        self.drag(ui, &resp, &cp, chart, view);
        if rows_all.len() > visible_rows {
            painter.text(
                Pos2::new(outer.left() + 4.0, outer.bottom() - 2.0),
                egui::Align2::LEFT_BOTTOM,
                format!(
                    "rows {}-{} of {} (shift+wheel)",
                    self.row_offset + 1,
                    self.row_offset + shown.len(),
                    rows_all.len()
                ),
                egui::FontId::proportional(11.0),
                ui.visuals().weak_text_color(),
            );
        }
    }

    /// Labels, with fold triangles; a lane's row is named after its lane, under its producer.
    fn row_labels(
        &mut self,
        ui: &Ui,
        painter: &egui::Painter,
        shown: &[Line<'_>],
        outer: Rect,
        chart: Rect,
    ) {
        for (i, line) in shown.iter().enumerate() {
            let (node, id) = (line.node, line.node.id);
            let y = chart.top() + i as f32 * ROW_H;
            let r = Rect::from_min_size(Pos2::new(outer.left(), y), Vec2::new(LABEL_W, ROW_H));
            let indent = 10.0 * (node.depth + usize::from(line.row.lane.is_some())) as f32;
            let resp = ui.interact(r, ui.scope_id().with(("row", line.row)), Sense::click());
            let label = self.row_label(line);
            resp.widget_info(|| egui::WidgetInfo::labeled(egui::Role::Row, true, &label));
            let text = if node.children.is_empty() || line.row.lane.is_some() {
                format!("  {label}")
            } else {
                let open = !self.collapsed.contains(&id);
                if resp.clicked() {
                    if open {
                        self.collapsed.insert(id);
                    } else {
                        self.collapsed.remove(&id);
                    }
                }
                format!("{} {label}", if open { "-" } else { "+" })
            };
            painter.text(
                Pos2::new(r.left() + 4.0 + indent, r.center().y),
                egui::Align2::LEFT_CENTER,
                text,
                egui::FontId::proportional(12.0),
                ui.visuals().text_color(),
            );
        }
    }

    /// The wheel over the chart: shift scrolls the rows, else it zooms around the pointer.
    fn wheel(&mut self, ui: &Ui, pos: Pos2, chart: Rect, whole: TimeRange) {
        let (scroll, shift) = ui.input(|i| (i.smooth_scroll_delta, i.modifiers.shift));
        if shift && scroll.y != 0.0 {
            let d = if scroll.y > 0.0 { -1i64 } else { 1 };
            self.row_offset = (self.row_offset as i64 + d).max(0) as usize;
        } else if scroll.y != 0.0 {
            let f = ((pos.x - chart.left()) / chart.width()) as f64;
            self.zoom((-scroll.y as f64 / 200.0).exp(), f, whole);
        }
    }

    /// The event under the pointer, in a tooltip (unless the chart is being dragged); `view` is the
    /// interval drawn this frame (the wheel may have zoomed since).
    fn event_tip(
        &self,
        resp: &egui::Response,
        pos: Pos2,
        rows: &[GanttRow],
        chart: Rect,
        view: TimeRange,
        names: &TraceNames,
    ) {
        let width = chart.width().max(1.0) as u32;
        let px_ns = view.len() as f64 / width as f64;
        let time_at = |px: f32| view.start + ((px - chart.left()) as f64 * px_ns) as i64;
        let row = ((pos.y - chart.top()) / ROW_H) as usize;
        if let Some(&r) = rows.get(row)
            && !resp.dragged()
            && let Some(h) = self.model.event_at(r, time_at(pos.x), view, width)
        {
            let e = h.event;
            let lane = r
                .lane
                .map_or(String::new(), |l| format!(" / {}", self.lanes.name(l)));
            // A CPU track's slice names the thread that ran.
            let thread = if e.target != e.producer {
                format!("\nthread: {}", names.tree.label(e.target))
            } else {
                String::new()
            };
            let text = format!(
                "{}  ({})\nproducer: {}{lane}{thread}\nstart: {}\nend: {}\nduration: {}{}",
                names.type_name(e.type_id),
                e.category.name(),
                names.tree.label(e.producer),
                units::timestamp(e.ts),
                units::timestamp(e.end),
                units::duration(e.end - e.ts),
                if h.in_pixel > 1 {
                    format!("\n{} events in this pixel: zoom in", h.in_pixel)
                } else {
                    String::new()
                }
            );
            resp.clone().on_hover_text_at_pointer(text);
        }
    }

    /// Dragging the chart: with shift or the secondary button it selects an interval to zoom into,
    /// else it pans; `view` is the interval drawn this frame.
    fn drag(
        &mut self,
        ui: &Ui,
        resp: &egui::Response,
        cp: &egui::Painter,
        chart: Rect,
        view: TimeRange,
    ) {
        let width = chart.width().max(1.0) as u32;
        let px_ns = view.len() as f64 / width as f64;
        let time_at = |px: f32| view.start + ((px - chart.left()) as f64 * px_ns) as i64;
        let selecting =
            ui.input(|i| i.modifiers.shift) || resp.dragged_by(egui::PointerButton::Secondary);
        let sel_id = ui.scope_id().with("gantt-select");
        if resp.drag_started()
            && selecting
            && let Some(p) = resp.interact_pointer_pos()
        {
            ui.ctx().data_mut(|d| d.insert_temp(sel_id, p.x));
        }
        let sel_start: Option<f32> = ui.ctx().data(|d| d.get_temp(sel_id));
        if resp.dragged() {
            if let (Some(x0), Some(p)) = (sel_start, resp.interact_pointer_pos()) {
                let r = Rect::from_x_y_ranges(x0.min(p.x)..=x0.max(p.x), chart.y_range());
                cp.rect_filled(r, 0.0, ui.visuals().selection.bg_fill.gamma_multiply(0.35));
            } else if resp.dragged_by(egui::PointerButton::Primary) {
                let dx = resp.drag_delta().x;
                self.pan(-(dx / chart.width()) as f64);
                self.follow = false;
            }
        }
        if resp.drag_stopped() {
            if let (Some(x0), Some(p)) = (sel_start, resp.interact_pointer_pos()) {
                let (a, b) = (time_at(x0.min(p.x)), time_at(x0.max(p.x)));
                if b > a {
                    self.view = TimeRange::new(a, b);
                    self.mark();
                }
            }
            ui.ctx().data_mut(|d| d.remove::<f32>(sel_id));
        }
    }
}

/// Alternate row backgrounds under the labels, in one mesh (the chart's image has them too).
fn label_stripes(
    painter: &egui::Painter,
    rows: usize,
    outer: Rect,
    chart: Rect,
    ppp: f32,
    dark: bool,
) {
    let snap = |v: f32| (v * ppp).round() / ppp;
    let mut stripes = Mesh::default();
    for i in (1..rows).step_by(2) {
        let y = chart.top() + i as f32 * ROW_H;
        stripes.add_colored_rect(
            Rect::from_min_max(
                Pos2::new(snap(outer.left()), snap(y)),
                Pos2::new(chart.left(), snap(y + ROW_H)),
            ),
            theme::stripe(dark),
        );
    }
    painter.add(Shape::mesh(stripes));
}

/// Time axis: round ticks, about one per 110 points, in a unit that fits the zoom; labels that would
/// run into the header at the top left (as long as the links' message is) are left out.
fn time_axis(
    ui: &Ui,
    painter: &egui::Painter,
    outer: Rect,
    chart: Rect,
    view: TimeRange,
    header_rect: Rect,
) {
    let width = chart.width().max(1.0) as u32;
    let px_ns = view.len() as f64 / width as f64;
    let weak = ui.visuals().weak_text_color();
    let axis = TimeAxis::new(
        view.start,
        view.end,
        (chart.width() / 110.0).max(2.0) as usize,
    );
    for t in axis.ticks(view.start, view.end) {
        let tx = chart.left() + ((t - view.start) as f64 / px_ns) as f32;
        let align = if chart.right() - tx < 30.0 {
            egui::Align2::RIGHT_TOP
        } else {
            egui::Align2::CENTER_TOP
        };
        let label = painter.layout_no_wrap(axis.label(t), egui::FontId::proportional(11.5), weak);
        let at = align.anchor_size(Pos2::new(tx, outer.top() + 2.0), label.size());
        if at.left() > header_rect.right() + 8.0 {
            painter.galley(at.min, label, weak);
        }
        painter.line_segment(
            [Pos2::new(tx, chart.top() - 3.0), Pos2::new(tx, chart.top())],
            Stroke::new(1.0, weak),
        );
    }
}

/// One row of the chart with the producer it belongs to.
pub struct Line<'a> {
    pub row: GanttRow,
    pub node: &'a socscope_analysis::hierarchy::TreeNode,
}

/// The chart's header: the share of the links in view that are drawn, with enough digits that a few
/// links drawn out of a million do not read "0%".
fn links_drawn_text(percent: f64) -> String {
    let share = if percent <= 0.0 || percent >= 1.0 || percent.is_nan() {
        format!("{percent:.0}%")
    } else if percent < 0.01 {
        "<0.01%".to_string()
    } else {
        format!("{percent:.2}%")
    };
    format!("{share} of links drawn")
}

/// Where a lost-event gap is drawn (at least 2 points wide).
fn loss_rect(g: &LossGap, chart: Rect) -> Rect {
    let (x0, x1) = (chart.left() + g.x0 as f32, chart.left() + g.x1 as f32);
    Rect::from_min_max(
        Pos2::new(x0, chart.top()),
        Pos2::new(x1.max(x0 + 2.0), chart.bottom()),
    )
}

/// What [`chart_drawing`] makes of a frame.
struct ChartDrawing {
    /// The pixel-aligned part, one texel per physical pixel from the chart's top left corner (none
    /// when the chart has no rows or no columns).
    image: Option<egui::ColorImage>,
    /// What falls anywhere, drawn over the image: long links, arrowheads, hatched lost-event gaps.
    over: Mesh,
}

/// Everything the chart shows for `frame` in `chart` (whose top left corner is on a pixel boundary):
/// the alternate rows' background, states (with a marker where several were aggregated), punctual
/// ticks, link arrows and hatched lost-event gaps.
///
/// What falls on pixel boundaries (backgrounds, states, markers, ticks, bands of short links) is
/// painted into an image, one texel per physical pixel, shown as one textured rectangle; only long
/// links, arrowheads and hatching, which fall anywhere, stay triangles (with a one-pixel anti-aliasing
/// ridge). Software renderers (Mesa llvmpipe) spend their time per triangle and per 4x4 block of
/// pixels each triangle touches: zoomed out on a busy trace a frame was some 15 000 triangles of one
/// or two columns each, touching every block of the chart two or three times, where painting the same
/// rectangles into memory is a few hundred microseconds and the texture one rectangle to shade.
///
/// A short link (shorter than a pixel: at most one per column, see `GanttModel::frame`) is a vertical
/// line in its pixel column, and neighbouring columns joining the same rows in one colour are one
/// band (see-through when wider than two columns) with one arrowhead.
fn chart_drawing(
    frame: &GanttFrame,
    chart: Rect,
    pixels_per_point: f32,
    dark: bool,
    colour: &(dyn Fn(TypeId) -> Color32 + Sync),
) -> ChartDrawing {
    let px = 1.0 / pixels_per_point;
    let snap = |v: f32| (v * pixels_per_point).round() * px;
    let x = |c: u32| chart.left() + c as f32;
    let mut raster = Raster::new(
        frame.width as f32,
        frame.rows.len() as f32 * ROW_H,
        pixels_per_point,
    );
    let row_y = |r: usize| r as f32 * ROW_H + ROW_H / 2.0;
    // Links never hide states: too many to read, none is drawn (the header says so).
    let no_links: &[LinkArrow] = &[];
    let links = if frame.links_legible() {
        frame.links.as_slice()
    } else {
        no_links
    };
    // A band of short links is see-through, so the states it crosses still show; a lone link is a line.
    let runs: Vec<(ShortLinkRun, Color32)> = short_link_runs(links)
        .into_iter()
        .map(|run| {
            let c = colour(run.type_id);
            let fill = if run.x1 - run.x0 > 2 {
                c.gamma_multiply(SHORT_LINK_BAND_ALPHA)
            } else {
                c
            };
            (run, fill)
        })
        .collect();
    // Each row's background, states, markers and ticks stay in its own lines: rows in parallel, each
    // with the pieces of the link bands crossing it painted over it while its lines are in the cache
    // (the whole image is some megabytes; a row's lines a hundred kilobytes).
    let bands = raster.rows(frame.rows.len(), ROW_H);
    bands
        .into_par_iter()
        .zip(&frame.rows)
        .enumerate()
        .for_each(|(i, (mut band, row))| {
            let y = i as f32 * ROW_H;
            if i % 2 == 1 {
                band.fill(0.0, frame.width as f32, y, y + ROW_H, theme::stripe(dark));
            }
            let (y0, y1) = (y + 2.0, y + ROW_H - 2.0);
            // A span as high as its pixels are busy, from the row's bottom: zoomed out, sparse short
            // states (interrupts) are low strokes, not a solid bar that reads as always busy.
            for q in 1..=FULL_COVERAGE {
                let top = y1 - (y1 - y0) * f32::from(q) / f32::from(FULL_COVERAGE);
                let spans = row.spans.iter().filter(|s| s.coverage == q);
                for (a, b, c) in colour_runs(spans.map(|s| (s.x0, s.x1, colour(s.type_id)))) {
                    band.fill(a as f32, b as f32, top, y1, c);
                }
            }
            // The aggregation marker on full spans only: over a low one it would float above the
            // bar, and a row of sparse interrupts would be a dotted line of markers.
            let marked = row.spans.iter().filter(|s| s.aggregated);
            for s in marked.filter(|s| s.coverage == FULL_COVERAGE) {
                let cx = (s.x0 + s.x1) as f32 / 2.0;
                band.fill(cx - 1.0, cx + 2.0, y0 + 1.0, y0 + 4.0, theme::marker(dark));
            }
            // Ticks: one pixel column each, reaching one point above and below the states.
            let ticks = row.ticks.iter().map(|t| (t.x, t.x + 1, colour(t.type_id)));
            for (a, b, c) in colour_runs(ticks) {
                band.fill(a as f32, b as f32, y0 - 1.0, y1 + 1.0, c);
            }
            // The band clips each link to its own lines (the last band also holds what is below the
            // last row, where no link reaches).
            for (run, fill) in &runs {
                if run.row0.min(run.row1) <= i && i <= run.row0.max(run.row1) {
                    let (ya, yb) = (row_y(run.row0), row_y(run.row1));
                    band.fill(run.x0 as f32, run.x1 as f32, ya.min(yb), ya.max(yb), *fill);
                }
            }
        });
    let mut over = Mesh::default();
    let arrowhead = |mesh: &mut Mesh, a: Pos2, b: Pos2, c: Color32| {
        let dir = (b - a).normalized();
        let n = Vec2::new(-dir.y, dir.x);
        triangle(
            mesh,
            [b, b - dir * 6.0 + n * 3.0, b - dir * 6.0 - n * 3.0],
            c,
        );
    };
    for l in links.iter().filter(|l| !is_short(l)) {
        let c = colour(l.type_id);
        let a = Pos2::new(chart.left() + l.x0, snap(chart.top() + row_y(l.row0)));
        let b = Pos2::new(chart.left() + l.x1, snap(chart.top() + row_y(l.row1)));
        // At its exact (fractional) x.
        ridge(&mut over, a, b, c, px);
        arrowhead(&mut over, a, b, c);
    }
    for (run, _) in &runs {
        let c = colour(run.type_id);
        let mid = (x(run.x0) + x(run.x1)) / 2.0;
        let (ya, yb) = (
            snap(chart.top() + row_y(run.row0)),
            snap(chart.top() + row_y(run.row1)),
        );
        arrowhead(&mut over, Pos2::new(mid, ya), Pos2::new(mid, yb), c);
    }
    for g in &frame.losses {
        hatch(&mut over, loss_rect(g, chart), theme::loss(dark), px);
    }
    ChartDrawing {
        image: raster.into_image(),
        over,
    }
}

/// An image of `width` x `height` points at `pixels_per_point`, painted with pixel-aligned
/// rectangles; colours are premultiplied, as egui's, and translucent ones are blended over what is
/// there as egui blends them.
struct Raster {
    width: usize,
    height: usize,
    pixels_per_point: f32,
    pixels: Vec<Color32>,
}

impl Raster {
    fn new(width: f32, height: f32, pixels_per_point: f32) -> Self {
        let width = (width * pixels_per_point).round().max(0.0) as usize;
        let height = (height * pixels_per_point).round().max(0.0) as usize;
        Self {
            width,
            height,
            pixels_per_point,
            pixels: vec![Color32::TRANSPARENT; width * height],
        }
    }

    /// The whole image as one band.
    #[cfg(test)]
    fn band(&mut self) -> Band<'_> {
        Band {
            pixels: &mut self.pixels,
            width: self.width,
            top: 0,
            height: self.height,
            pixels_per_point: self.pixels_per_point,
        }
    }

    /// Fills the rectangle from `(x0, y0)` to `(x1, y1)` points (each edge rounded to the nearest
    /// pixel edge, clipped to the image).
    #[cfg(test)]
    fn fill(&mut self, x0: f32, x1: f32, y0: f32, y1: f32, c: Color32) {
        self.band().fill(x0, x1, y0, y1, c);
    }

    /// The image cut into `rows` bands `row_h` points high, top to bottom (the last one taking
    /// what is left), to paint in parallel.
    fn rows(&mut self, rows: usize, row_h: f32) -> Vec<Band<'_>> {
        let (width, ppp, height) = (self.width, self.pixels_per_point, self.height);
        let mut bands = Vec::with_capacity(rows);
        let mut rest: &mut [Color32] = &mut self.pixels;
        let mut top = 0;
        for i in 0..rows {
            let bottom = if i + 1 == rows {
                height
            } else {
                (((i + 1) as f32 * row_h * ppp).round().max(0.0) as usize).clamp(top, height)
            };
            let (band, tail) = rest.split_at_mut((bottom - top) * width);
            bands.push(Band {
                pixels: band,
                width,
                top,
                height: bottom - top,
                pixels_per_point: ppp,
            });
            rest = tail;
            top = bottom;
        }
        bands
    }

    fn into_image(self) -> Option<egui::ColorImage> {
        (self.width > 0 && self.height > 0)
            .then(|| egui::ColorImage::new([self.width, self.height], self.pixels))
    }
}

/// Lines `top..top + height` of a [`Raster`]; rectangles are given in the image's points and clipped
/// to the band.
struct Band<'a> {
    pixels: &'a mut [Color32],
    width: usize,
    top: usize,
    height: usize,
    pixels_per_point: f32,
}

impl Band<'_> {
    /// The pixel edge nearest to `v` points, within `lo..=hi`.
    fn edge(&self, v: f32, lo: usize, hi: usize) -> usize {
        ((v * self.pixels_per_point).round().max(0.0) as usize).clamp(lo, hi)
    }

    fn fill(&mut self, x0: f32, x1: f32, y0: f32, y1: f32, c: Color32) {
        let (xa, xb) = (self.edge(x0, 0, self.width), self.edge(x1, 0, self.width));
        let bottom = self.top + self.height;
        let (ya, yb) = (
            self.edge(y0, self.top, bottom),
            self.edge(y1, self.top, bottom),
        );
        if xa >= xb {
            return;
        }
        let mut blend = None;
        for y in ya - self.top..yb.max(ya) - self.top {
            let line = &mut self.pixels[y * self.width + xa..y * self.width + xb];
            if c.is_opaque() {
                line.fill(c);
            } else {
                blend.get_or_insert_with(|| Blend::new(c)).over_all(line);
            }
        }
    }
}

/// Painting one translucent premultiplied colour over pixels as egui blends (`src + dst * (1 - src
/// alpha)`, rounded as egui's `Color32::blend`, which gives the same pixels) in integer arithmetic that
/// the compiler turns into vector instructions, sixteen bytes at a time: zoomed out on the 2 h capture,
/// bands of short links cover much of the chart, and blending them pixel by pixel (through egui's blend
/// or a table of products) was a sixth of the Gantt frame's UI thread.
struct Blend {
    /// The source colour's bytes, once per pixel of a group of four.
    src: [u8; 16],
    /// `255 - source alpha`.
    left: u16,
}

impl Blend {
    fn new(src: Color32) -> Self {
        let c = src.to_array();
        Self {
            src: std::array::from_fn(|i| c[i % 4]),
            left: 255 - u16::from(src.a()),
        }
    }

    #[cfg(test)]
    fn over(&self, dst: Color32) -> Color32 {
        let d = dst.to_array();
        let mix = |k: usize| self.src[k].saturating_add(keep(d[k], self.left));
        Color32::from_rgba_premultiplied(mix(0), mix(1), mix(2), mix(3))
    }

    fn over_all(&self, pixels: &mut [Color32]) {
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(pixels);
        let mut groups = bytes.chunks_exact_mut(16);
        for g in &mut groups {
            for (d, &s) in g.iter_mut().zip(&self.src) {
                *d = s.saturating_add(keep(*d, self.left));
            }
        }
        for (d, &s) in groups.into_remainder().iter_mut().zip(&self.src) {
            *d = s.saturating_add(keep(*d, self.left));
        }
    }
}

/// `d * left / 255`, rounded to nearest, without a division: for `x` below 65 535, `x / 255` is
/// `(x + 1 + x / 256) / 256`.
#[inline(always)]
fn keep(d: u8, left: u16) -> u8 {
    let x = u16::from(d) * left + 127;
    ((x + 1 + (x >> 8)) >> 8) as u8
}

/// Opacity of a band of short links wider than two columns.
const SHORT_LINK_BAND_ALPHA: f32 = 0.35;

/// A link shorter than a pixel column, drawn as a vertical line in its column.
fn is_short(l: &LinkArrow) -> bool {
    (l.x1 - l.x0).abs() < 1.0 && l.row0 != l.row1
}

/// A run of neighbouring pixel columns, each with a short link joining the same two rows in one type.
#[derive(Clone, Copy, Debug, PartialEq)]
struct ShortLinkRun {
    /// First column.
    x0: u32,
    /// One past the last column.
    x1: u32,
    row0: usize,
    row1: usize,
    type_id: TypeId,
}

/// The short links of `links` ([`is_short`]) as runs of neighbouring columns, left to right (the
/// frame gives at most one short link per column, in time order).
fn short_link_runs(links: &[LinkArrow]) -> Vec<ShortLinkRun> {
    let mut runs: Vec<ShortLinkRun> = Vec::new();
    for l in links.iter().filter(|l| is_short(l)) {
        let c = l.x0.floor().max(0.0) as u32;
        match runs.last_mut() {
            Some(r) if r.x1 == c && (r.row0, r.row1, r.type_id) == (l.row0, l.row1, l.type_id) => {
                r.x1 = c + 1
            }
            // A second short link in a column already drawn (the frame keeps one per column, but
            // its column and the floor of its x may differ by rounding): the column shows one.
            Some(r) if r.x1 > c => {}
            _ => runs.push(ShortLinkRun {
                x0: c,
                x1: c + 1,
                row0: l.row0,
                row1: l.row1,
                type_id: l.type_id,
            }),
        }
    }
    runs
}

/// Column ranges `(x0, x1, colour)`, left to right, with adjacent ranges of one colour merged.
fn colour_runs(ranges: impl Iterator<Item = (u32, u32, Color32)>) -> Vec<(u32, u32, Color32)> {
    let mut runs: Vec<(u32, u32, Color32)> = Vec::new();
    for (x0, x1, c) in ranges {
        match runs.last_mut() {
            Some((_, end, rc)) if *end == x0 && *rc == c => *end = x1,
            _ => runs.push((x0, x1, c)),
        }
    }
    runs
}

fn triangle(mesh: &mut Mesh, p: [Pos2; 3], c: Color32) {
    let i = mesh.vertices.len() as u32;
    for q in p {
        mesh.colored_vertex(q, c);
    }
    mesh.add_triangle(i, i + 1, i + 2);
}

/// An anti-aliased line one pixel wide as egui draws it, without end caps: full colour on the segment,
/// fading to transparent one pixel either side (four triangles).
fn ridge(mesh: &mut Mesh, a: Pos2, b: Pos2, c: Color32, px: f32) {
    let n = (b - a).normalized().rot90() * px;
    let i = mesh.vertices.len() as u32;
    for p in [a, b] {
        mesh.colored_vertex(p + n, Color32::TRANSPARENT);
        mesh.colored_vertex(p, c);
        mesh.colored_vertex(p - n, Color32::TRANSPARENT);
    }
    for k in 0..2 {
        mesh.add_triangle(i + k, i + k + 1, i + k + 3);
        mesh.add_triangle(i + k + 1, i + k + 3, i + k + 4);
    }
}

/// A lost-event gap: a translucent fill with diagonal lines every 8 points, clipped to `r`.
fn hatch(mesh: &mut Mesh, r: Rect, c: Color32, px: f32) {
    mesh.add_colored_rect(r, c.gamma_multiply(0.15));
    let step = 8.0;
    let h = r.height();
    let mut x = r.left() - h;
    while x < r.right() {
        // The line from (x, bottom) to (x + h, top), cut to the rect's columns.
        let (xa, xb) = (x.max(r.left()), (x + h).min(r.right()));
        if xb > xa {
            ridge(
                mesh,
                Pos2::new(xa, r.bottom() - (xa - x)),
                Pos2::new(xb, r.bottom() - (xb - x)),
                c,
                px,
            );
        }
        x += step;
    }
}

/// What a click in the Gantt's legend asks for.
#[derive(Clone, Debug, PartialEq)]
pub enum LegendAction {
    /// A new colour for a type (kept per user, in every trace).
    Colour(ColourEdit),
    /// Hide the type if shown, show it if hidden (the group's type filter, as the Types… dialog).
    Toggle(socscope_tracedb::TypeId),
}

/// The legend under the chart: a swatch and the name of every type loaded for the view, then the types
/// the group's filter hides (struck through), wrapped over as many lines as they need. A click on a
/// swatch picks another colour for that type; a click on a name hides or shows the type.
pub fn legend(
    ui: &mut Ui,
    names: &TraceNames,
    loaded: &BTreeSet<socscope_tracedb::TypeId>,
    hidden: &BTreeSet<socscope_tracedb::TypeId>,
) -> Option<LegendAction> {
    let mut action = None;
    ui.horizontal_wrapped(|ui| {
        ui.weak("Types:").on_hover_text(
            "The types of the events loaded for this interval; click a name to hide or show it",
        );
        if loaded.is_empty() && hidden.is_empty() {
            ui.weak("none loaded");
        }
        let listed = loaded.iter().filter(|t| !hidden.contains(t));
        for (t, is_hidden) in listed
            .map(|t| (*t, false))
            .chain(hidden.iter().map(|t| (*t, true)))
        {
            let name = names.type_name(t);
            let text = if is_hidden {
                egui::RichText::new(&name).strikethrough().weak()
            } else {
                egui::RichText::new(&name)
            };
            // An entry (swatch and name) never splits over two lines, nor does a name wrap: an entry
            // that does not fit starts the next line.
            let galley = egui::WidgetText::from(text).into_galley(
                ui,
                Some(egui::TextWrapMode::Extend),
                f32::INFINITY,
                egui::TextStyle::Body,
            );
            let spacing = ui.spacing().item_spacing.x;
            let need = ui.spacing().interact_size.x + spacing + galley.size().x;
            if ui.available_size_before_wrap().x < need
                && ui.cursor().left() > ui.max_rect().left() + spacing
            {
                ui.end_row();
            }
            let mut c = names.colour(t);
            let resp = ui
                .color_edit_button_srgba(&mut c)
                .on_hover_text(format!("Colour of {name} (saved for this user)"));
            if resp.changed() {
                action = Some(LegendAction::Colour(ColourEdit::Type(name.clone(), c)));
            }
            let hint = if is_hidden {
                format!("{name} is hidden: click to show it")
            } else {
                format!("Click to hide {name} (the Types… dialog shows it again)")
            };
            if ui
                .add(egui::Label::new(galley).sense(egui::Sense::click()))
                .on_hover_text(hint)
                .clicked()
            {
                action = Some(LegendAction::Toggle(t));
            }
            ui.add_space(6.0);
        }
    });
    action
}

impl GroupView for GanttView {
    fn new(interval: TimeRange, _names: &TraceNames) -> Self {
        GanttView::new(interval)
    }
    fn load(&mut self, cx: &LoadContext<'_>) {
        GanttView::load(self, cx.trace, cx.interval, cx.filter.clone(), cx.meta);
    }
    fn extend(&mut self, cx: &LoadContext<'_>) {
        GanttView::extend(self, cx.trace, cx.interval.end, cx.filter.clone(), cx.meta);
    }
    fn poll(&mut self) {
        GanttView::poll(self);
        if self.follow {
            let len = self.view.len();
            let end = self.loaded().end.max(self.view.start + 1);
            self.view = TimeRange::new(end - len, end);
        }
    }
    fn busy(&self) -> bool {
        GanttView::busy(self)
    }
    fn catching_up(&self, end: Timestamp) -> bool {
        self.live.catching_up(end)
    }
    fn progress(&self) -> Option<Progress> {
        GanttView::progress(self)
    }
    fn stop(&mut self) {
        GanttView::stop(self);
    }
    /// A trace recorded before the CPU tracks: the status line says so too.
    fn summary(&self) -> Option<String> {
        self.no_tracks_hint.as_ref()?;
        let events = GanttView::progress(self).map_or(0, |p| p.events);
        Some(format!(
            "{events} events · no CPU tracks (recorded before them): `socscope upgrade` derives them"
        ))
    }
    fn capped(&self) -> Option<String> {
        self.truncated().then(|| {
            format!(
                "showing the first {} events of the interval (up to {} s); zoom in to see the rest",
                self.model.events(),
                units::timestamp(self.loaded().end)
            )
        })
    }
    fn toolbar_switches(&mut self, ui: &mut Ui) {
        ui.toggle_value(&mut self.follow, "Follow")
            .on_hover_text("Keep the newest data in view");
        ui.toggle_value(&mut self.cpu_tracks, "CPUs")
            .on_hover_text("The CPU tracks: which thread ran on each CPU, and its interrupts");
        ui.toggle_value(&mut self.show_empty, "Empty rows")
            .on_hover_text("Also show the producers without events in the loaded interval");
    }
    /// The time bar shows what is on screen.
    fn displayed(&self) -> Option<TimeRange> {
        Some(self.view)
    }
    /// Only the Gantt on screen asks for this: a Gantt left zoomed out in the background must not keep
    /// resetting the interval another view of the group selected.
    fn wants_interval(&self) -> Option<TimeRange> {
        self.settled_outside_loaded()
    }
    fn bottom_panels(
        &mut self,
        ui: &mut Ui,
        frame: egui::Frame,
        cx: &DrawContext<'_>,
    ) -> Option<ViewAction> {
        let loaded = self.types_loaded();
        let mut action = None;
        egui::Panel::bottom("legend").frame(frame).show(ui, |ui| {
            action = match legend(ui, cx.names, &loaded, &cx.filter.hidden_types) {
                Some(LegendAction::Colour(e)) => Some(ViewAction::Colour(e)),
                Some(LegendAction::Toggle(t)) => Some(ViewAction::ToggleType(t)),
                None => None,
            };
            if let Some(e) = &cx.colours.error {
                ui.colored_label(ui.visuals().warn_fg_color, format!("colours: {e}"));
            }
        });
        action
    }
    fn ui(&mut self, ui: &mut Ui, cx: &DrawContext<'_>) -> Option<ViewAction> {
        self.draw(
            ui,
            cx.names,
            &cx.filter.hidden_producers,
            cx.whole,
            cx.cursor,
        );
        None
    }
    fn scripted_move(&mut self, i: u64, whole: TimeRange, _: TimeRange) -> Option<TimeRange> {
        match i / 100 {
            0 => self.zoom(0.97, 0.5, whole),
            1 => self.pan(0.01),
            2 => self.pan(-0.01),
            _ => self.zoom(1.0 / 0.97, 0.5, whole),
        }
        None
    }
    /// The chart brings the group's new cursor into view.
    fn cursor_moved(&mut self, t: Timestamp) {
        if !self.view.contains(t) {
            let half = self.view.len() / 2;
            self.view = TimeRange::new(t - half, t + half);
        }
    }
    fn bands_mut(&mut self) -> Option<&mut Vec<socscope_analysis::results::Band>> {
        Some(&mut self.bands)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adjacent_ranges_of_one_colour_become_one_rectangle() {
        let (r, g) = (Color32::RED, Color32::GREEN);
        let runs = colour_runs(
            [
                (0, 2, r),
                (2, 3, r),
                (3, 4, g),
                (6, 7, g),
                (7, 9, g),
                (9, 10, r),
            ]
            .into_iter(),
        );
        assert_eq!(runs, vec![(0, 3, r), (3, 4, g), (6, 9, g), (9, 10, r)]);
        assert!(colour_runs(std::iter::empty()).is_empty());
    }

    #[test]
    fn short_links_in_neighbouring_columns_joining_the_same_rows_become_one_band() {
        let link = |x0: f32, x1: f32, row0: usize, row1: usize, type_id: TypeId| LinkArrow {
            x0,
            row0,
            x1,
            row1,
            type_id,
        };
        let links = [
            link(10.2, 10.6, 1, 4, 7),
            link(11.0, 11.9, 1, 4, 7),
            link(11.5, 40.0, 0, 2, 7), // long: drawn as a line, not in a run
            link(12.3, 12.3, 1, 4, 7),
            link(13.1, 13.2, 4, 1, 7), // the other way round: a run of its own
            link(14.0, 14.5, 4, 1, 8), // another type
            link(16.0, 16.1, 4, 1, 8), // not next to the previous column
            link(17.0, 17.0, 3, 3, 8), // within one row: nothing to draw
        ];
        let run = |x0: u32, x1: u32, row0: usize, row1: usize, type_id: TypeId| ShortLinkRun {
            x0,
            x1,
            row0,
            row1,
            type_id,
        };
        assert_eq!(
            short_link_runs(&links),
            vec![
                run(10, 13, 1, 4, 7),
                run(13, 14, 4, 1, 7),
                run(14, 15, 4, 1, 8),
                run(16, 17, 4, 1, 8),
            ]
        );
        assert!(!is_short(&links[2]) && !is_short(&links[7]));
    }

    #[test]
    fn blending_matches_egui_premultiplied_over() {
        // Against the formula in floating point, for every alpha and a spread of colours.
        for a in 0..=255u8 {
            for (s, d) in [(0u8, 255u8), (a / 2, 17), (a, 200), (a / 3, 0)] {
                let src = Color32::from_rgba_premultiplied(s, a / 4, a, a);
                let dst = Color32::from_rgba_premultiplied(d, 255 - d, d / 2, 255);
                let got = Blend::new(src).over(dst);
                let want = |s: u8, d: u8| {
                    (f32::from(s) + f32::from(d) * (255.0 - f32::from(a)) / 255.0).round() as i32
                };
                for (k, (s, d)) in src.to_array().into_iter().zip(dst.to_array()).enumerate() {
                    let g = i32::from(got.to_array()[k]);
                    assert!((g - want(s, d)).abs() <= 1, "{src:?} over {dst:?}: {got:?}");
                }
            }
        }
        let c = Color32::from_rgb(10, 20, 30);
        assert_eq!(Blend::new(Color32::TRANSPARENT).over(c), c);
        // And exactly egui's own blending, for every alpha over every grey.
        for a in 0..=255u8 {
            let src = Color32::from_rgba_premultiplied(a / 3, a / 2, a, a);
            let blend = Blend::new(src);
            for d in 0..=255u8 {
                let dst = Color32::from_rgba_premultiplied(d, d, d, d);
                assert_eq!(blend.over(dst), dst.blend(src), "{src:?} over {dst:?}");
            }
        }
    }

    #[test]
    fn rectangles_land_on_the_nearest_pixel_edges_inside_the_image() {
        for ppp in [1.0f32, 1.5, 2.0] {
            let mut r = Raster::new(10.0, 6.0, ppp);
            let (w, h) = (r.width, r.height);
            assert_eq!(
                (w, h),
                ((10.0 * ppp).round() as usize, (6.0 * ppp).round() as usize)
            );
            // Partly outside on every side: clipped.
            r.fill(-3.0, 2.0, -1.0, 1.0, Color32::RED);
            r.fill(8.0, 14.0, 5.0, 9.0, Color32::BLUE);
            // Empty and reversed rectangles draw nothing.
            r.fill(4.0, 4.0, 0.0, 6.0, Color32::GREEN);
            r.fill(6.0, 5.0, 0.0, 6.0, Color32::GREEN);
            let edge = |v: f32| (v * ppp).round() as usize;
            for y in 0..h {
                for x in 0..w {
                    let want = if x < edge(2.0) && y < edge(1.0) {
                        Color32::RED
                    } else if x >= edge(8.0) && y >= edge(5.0) {
                        Color32::BLUE
                    } else {
                        Color32::TRANSPARENT
                    };
                    assert_eq!(r.pixels[y * w + x], want, "({x}, {y}) at {ppp} px/pt");
                }
            }
        }
        assert!(Raster::new(0.0, 5.0, 1.0).into_image().is_none());
        assert!(Raster::new(5.0, 0.0, 1.0).into_image().is_none());
    }

    #[test]
    fn row_bands_cover_the_image_once_and_paint_as_the_whole_image_does() {
        for ppp in [1.0f32, 1.25, 1.5, 2.0] {
            let (rows, row_h) = (7, 18.0);
            let mut whole = Raster::new(50.0, rows as f32 * row_h, ppp);
            let mut banded = Raster::new(50.0, rows as f32 * row_h, ppp);
            let height = banded.height;
            let mut top = 0;
            for (i, mut band) in banded.rows(rows, row_h).into_iter().enumerate() {
                assert_eq!(band.top, top, "row {i} at {ppp} px/pt");
                top += band.height;
                // Inside the row, and reaching past it on both sides (clipped to the band).
                let y = i as f32 * row_h;
                band.fill(3.0, 20.0, y + 1.0, y + row_h - 1.0, Color32::RED);
                band.fill(30.0, 40.0, y - 5.0, y + row_h + 5.0, Color32::BLUE);
            }
            assert_eq!(top, height);
            for i in 0..rows {
                let y = i as f32 * row_h;
                whole.fill(3.0, 20.0, y + 1.0, y + row_h - 1.0, Color32::RED);
                whole.fill(30.0, 40.0, y, y + row_h, Color32::BLUE);
            }
            assert!(whole.pixels == banded.pixels, "at {ppp} px/pt");
        }
    }

    #[test]
    fn the_chart_image_holds_states_markers_ticks_and_link_bands() {
        use socscope_analysis::gantt::{RowFrame, StateSpan, Tick};
        let colour = |t: TypeId| match t {
            1 => Color32::RED,
            2 => Color32::GREEN,
            _ => Color32::BLUE,
        };
        let span = |x0, x1, type_id, aggregated| StateSpan {
            x0,
            x1,
            type_id,
            aggregated,
            event: None,
            coverage: FULL_COVERAGE,
        };
        let link = |x0: f32, x1: f32, row0, row1| LinkArrow {
            x0,
            row0,
            x1,
            row1,
            type_id: 3,
        };
        let frame = GanttFrame {
            view: socscope_tracedb::TimeRange::new(0, 100),
            width: 100,
            rows: vec![
                RowFrame {
                    spans: vec![
                        span(0, 10, 1, false),
                        span(10, 40, 2, true),
                        // Busy a quarter of each pixel at most (sparse interrupts zoomed out).
                        StateSpan {
                            coverage: 1,
                            ..span(45, 50, 1, false)
                        },
                        StateSpan {
                            coverage: 3,
                            ..span(52, 57, 1, true)
                        },
                    ],
                    ticks: vec![Tick {
                        x: 60,
                        type_id: 1,
                        count: 3,
                    }],
                    ..Default::default()
                },
                RowFrame {
                    spans: vec![span(5, 90, 1, false)],
                    ..Default::default()
                },
            ],
            // A band of short links over columns 70-74, a lone short one at 80, a long one.
            links: (70..75)
                .map(|c| link(c as f32 + 0.2, c as f32 + 0.5, 0, 1))
                .chain([link(80.1, 80.3, 1, 0), link(20.0, 50.0, 0, 1)])
                .collect(),
            links_total: 7,
            losses: vec![],
        };
        let chart = Rect::from_min_size(Pos2::new(200.0, 30.0), Vec2::new(100.0, 36.0));
        let d = chart_drawing(&frame, chart, 1.0, true, &colour);
        let image = d.image.expect("rows and columns");
        assert_eq!(image.size, [100, 2 * ROW_H as usize]);
        let at = |x: usize, y: f32| image.pixels[y as usize * 100 + x];
        let (row0, row1) = (ROW_H / 2.0, ROW_H * 1.5);
        assert_eq!(at(3, row0), Color32::RED);
        assert_eq!(at(30, row0), Color32::GREEN);
        // A span that covers a quarter of its pixels is a quarter of the row's height, from its bottom.
        let (y0, y1) = (2.0, ROW_H - 2.0);
        assert_eq!(at(47, y1 - 1.0), Color32::RED);
        assert_eq!(at(47, y1 - (y1 - y0) / 4.0 + 0.5), Color32::RED);
        assert_eq!(at(47, y1 - (y1 - y0) / 4.0 - 1.0), Color32::TRANSPARENT);
        assert_eq!(at(47, row0), Color32::TRANSPARENT);
        // No aggregation marker over a low span.
        assert_eq!(at(54, 3.0), Color32::TRANSPARENT);
        // The aggregation marker: a small square at the top of the span's middle column.
        assert_eq!(at(25, 3.0), theme::marker(true));
        // The tick reaches one point above the states; nothing else is drawn at the row's edge.
        assert_eq!(at(60, 1.0), Color32::RED);
        assert_eq!(at(59, 1.0), Color32::TRANSPARENT);
        // The second row's stripe background shows where it has no state.
        assert_eq!(at(95, row1), theme::stripe(true));
        assert_eq!(at(50, row1), Color32::RED);
        // The band is see-through over the states it crosses; the lone short link is opaque.
        let band = Blend::new(Color32::BLUE.gamma_multiply(SHORT_LINK_BAND_ALPHA));
        assert_eq!(at(72, row1 - 4.0), band.over(Color32::RED));
        assert_eq!(at(80, row1 - 4.0), Color32::BLUE);
        // The long link and the arrowheads are triangles over the image.
        assert!(d.over.is_valid() && !d.over.vertices.is_empty());
        let empty = GanttFrame {
            rows: vec![],
            ..frame
        };
        assert!(
            chart_drawing(&empty, chart, 1.0, true, &colour)
                .image
                .is_none()
        );
    }

    #[test]
    fn link_bands_painted_row_by_row_equal_bands_painted_over_the_whole_image() {
        use socscope_analysis::gantt::{RowFrame, StateSpan};
        let colour = |t: TypeId| match t {
            1 => Color32::RED,
            2 => Color32::GREEN,
            3 => Color32::BLUE,
            _ => Color32::YELLOW,
        };
        let rows: Vec<RowFrame> = (0..6u32)
            .map(|r| RowFrame {
                spans: (0..8u32)
                    .map(|k| StateSpan {
                        x0: k * 15 + r,
                        x1: k * 15 + r + 9,
                        type_id: TypeId::from(k % 3 + 1),
                        aggregated: false,
                        event: None,
                        coverage: FULL_COVERAGE,
                    })
                    .collect(),
                ..Default::default()
            })
            .collect();
        // Bands up and down over one to five rows, side by side, some of one column (a frame keeps one
        // short link per column).
        let mut links = Vec::new();
        for (c0, c1, row0, row1, type_id) in [
            (3, 20, 0, 4, 3),
            (20, 30, 5, 1, 4),
            (31, 32, 2, 3, 3),
            (40, 44, 0, 5, 4),
            (44, 60, 4, 2, 3),
            (70, 71, 1, 0, 4),
            (75, 119, 3, 5, 3),
        ] {
            links.extend((c0..c1).map(|c| LinkArrow {
                x0: c as f32 + 0.25,
                row0,
                x1: c as f32 + 0.5,
                row1,
                type_id,
            }));
        }
        links.sort_by(|a, b| a.x0.total_cmp(&b.x0));
        // The bands sit in the chart's first 120 columns, dense there, on a chart wide enough for the
        // frame's links to be legible on average (denser, none is drawn: see the check below).
        let width = links.len() as u32 * socscope_analysis::gantt::LINK_SPACING_PX;
        let frame = GanttFrame {
            view: socscope_tracedb::TimeRange::new(0, i64::from(width)),
            width,
            links_total: links.len() as u64,
            links,
            rows,
            losses: vec![],
        };
        assert!(frame.links_legible());
        let runs = short_link_runs(&frame.links);
        assert_eq!(runs.len(), 7, "{runs:?}");
        for ppp in [1.0f32, 1.25, 1.5, 2.0] {
            let chart = Rect::from_min_size(Pos2::ZERO, Vec2::new(width as f32, 6.0 * ROW_H));
            let got = chart_drawing(&frame, chart, ppp, false, &colour)
                .image
                .expect("an image");
            // The bands painted, in order, over the image of the rows alone.
            let rows_only = GanttFrame {
                links: vec![],
                ..frame.clone()
            };
            let image = chart_drawing(&rows_only, chart, ppp, false, &colour)
                .image
                .expect("an image");
            let mut want = Raster {
                width: image.size[0],
                height: image.size[1],
                pixels_per_point: ppp,
                pixels: image.pixels,
            };
            let row_y = |r: usize| r as f32 * ROW_H + ROW_H / 2.0;
            for run in &runs {
                let c = colour(run.type_id);
                let fill = if run.x1 - run.x0 > 2 {
                    c.gamma_multiply(SHORT_LINK_BAND_ALPHA)
                } else {
                    c
                };
                let (ya, yb) = (row_y(run.row0), row_y(run.row1));
                want.fill(run.x0 as f32, run.x1 as f32, ya.min(yb), ya.max(yb), fill);
            }
            assert_eq!(got.pixels, want.pixels, "at {ppp} pixels per point");
            // The same links on a chart one column narrower are too dense to read: the chart is
            // the rows alone, no band hides their states.
            let narrow = GanttFrame {
                width: width - 1,
                ..frame.clone()
            };
            assert!(!narrow.links_legible());
            let chart = Rect::from_min_size(Pos2::ZERO, Vec2::new((width - 1) as f32, 6.0 * ROW_H));
            let drawn = |f: &GanttFrame| {
                chart_drawing(f, chart, ppp, false, &colour)
                    .image
                    .expect("an image")
                    .pixels
            };
            let narrow_rows_only = GanttFrame {
                links: vec![],
                ..narrow.clone()
            };
            assert_eq!(
                drawn(&narrow),
                drawn(&narrow_rows_only),
                "at {ppp} pixels per point"
            );
        }
    }

    #[test]
    fn the_header_shows_a_small_share_of_links_drawn_as_more_than_nothing() {
        assert_eq!(links_drawn_text(100.0), "100% of links drawn");
        assert_eq!(links_drawn_text(37.4), "37% of links drawn");
        assert_eq!(links_drawn_text(1.0), "1% of links drawn");
        assert_eq!(links_drawn_text(0.0612), "0.06% of links drawn");
        assert_eq!(links_drawn_text(0.004), "<0.01% of links drawn");
        assert_eq!(links_drawn_text(0.0), "0% of links drawn");
    }

    #[test]
    fn blending_a_line_equals_blending_each_pixel() {
        // Lengths around the sixteen-byte groups, over pixels of every kind.
        let mut seed = 0x9e37_79b9_u32;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed
        };
        for len in [0usize, 1, 3, 4, 5, 8, 17, 64, 131] {
            for alpha in [0u8, 1, 89, 128, 254, 255] {
                let src = Color32::from_rgba_unmultiplied(200, 40, 90, alpha);
                let blend = Blend::new(src);
                let pixels: Vec<Color32> = (0..len)
                    .map(|_| {
                        let [r, g, b, a] = next().to_le_bytes();
                        Color32::from_rgba_premultiplied(r.min(a), g.min(a), b.min(a), a)
                    })
                    .collect();
                let mut line = pixels.clone();
                blend.over_all(&mut line);
                let each: Vec<Color32> = pixels.iter().map(|&p| blend.over(p)).collect();
                assert_eq!(line, each, "{len} pixels, alpha {alpha}");
            }
        }
    }

    #[test]
    fn hatching_stays_inside_its_gap_and_lines_are_ridges() {
        let r = Rect::from_min_max(Pos2::new(100.0, 10.0), Pos2::new(130.0, 90.0));
        let mut mesh = Mesh::default();
        hatch(&mut mesh, r, Color32::RED, 1.0);
        assert!(mesh.is_valid());
        // The fill, then one ridge (6 vertices, 4 triangles) per line crossing the gap.
        let lines = (mesh.vertices.len() - 4) / 6;
        assert_eq!(mesh.vertices.len(), 4 + 6 * lines);
        assert_eq!(mesh.indices.len(), 6 + 12 * lines);
        assert!(lines >= 10, "{lines}");
        for v in &mesh.vertices[4..] {
            if v.color != Color32::TRANSPARENT {
                // The line itself (the ridge's middle) is inside the gap.
                assert!(r.expand(1e-3).contains(v.pos), "{:?} outside {r:?}", v.pos);
            }
        }
    }
}
