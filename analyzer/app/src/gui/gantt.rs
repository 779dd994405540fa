//! The Gantt chart (RT-460 §3.1): draws [`GanttFrame`]s and turns the mouse into zoom, pan and selection.

use eframe::egui;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use egui::{Color32, CornerRadius, Pos2, Rect, Sense, Stroke, Ui, Vec2};
use socscope_analysis::gantt::{GanttConsumer, GanttFrame, GanttModel, GanttSnapshot};
use socscope_analysis::loader::{self, LoadRequest, LoaderHandle, chunk_size};
use socscope_analysis::timebar::format_ns;
use socscope_tracedb::{Filter, ProducerId, TimeRange};

use super::session::{TraceMeta, TraceNames};
use super::theme;

const ROW_H: f32 = 18.0;
const LABEL_W: f32 = 190.0;
/// Above this many events the Gantt stops loading and asks for a shorter interval.
const MAX_EVENTS: u64 = 30_000_000;

pub struct GanttView {
    pub model: GanttModel,
    loader: Option<LoaderHandle<GanttSnapshot>>,
    seen: u64,
    /// The interval whose events are loaded (or loading).
    pub loaded: TimeRange,
    /// The interval on screen (zoom and pan inside and around `loaded`).
    pub view: TimeRange,
    pub collapsed: BTreeSet<ProducerId>,
    pub follow: bool,
    pub truncated: bool,
    /// Where the running load started (its progress counts from there).
    load_start: i64,
    row_offset: usize,
    cache: Option<(FrameKey, GanttFrame)>,
    last_interaction: Option<Instant>,
    /// The view left the loaded interval: load it once the user stops moving.
    pub wants_load: Option<TimeRange>,
}

#[derive(Clone, PartialEq)]
struct FrameKey {
    view: TimeRange,
    width: u32,
    rows: Vec<ProducerId>,
    events: u64,
    losses: usize,
}

impl GanttView {
    pub fn new(range: TimeRange) -> Self {
        Self {
            model: GanttModel::new(),
            loader: None,
            seen: 0,
            loaded: range,
            view: range,
            collapsed: BTreeSet::new(),
            follow: false,
            truncated: false,
            load_start: range.start,
            row_offset: 0,
            cache: None,
            last_interaction: None,
            wants_load: None,
        }
    }

    pub fn load(
        &mut self,
        trace: &std::path::Path,
        range: TimeRange,
        filter: Filter,
        meta: &TraceMeta,
    ) {
        self.model = GanttModel::new();
        self.model.set_losses(meta.losses.clone());
        self.truncated = false;
        self.loaded = range;
        self.load_start = range.start;
        self.view = range;
        self.seen = 0;
        self.cache = None;
        self.loader = Some(loader::spawn(
            LoadRequest {
                trace: trace.to_path_buf(),
                range,
                filter,
                chunk_events: chunk_size::GANTT,
            },
            GanttConsumer::new(),
        ));
    }

    /// The trace grew: load what is new after the loaded interval.
    pub fn extend(&mut self, trace: &std::path::Path, end: i64, filter: Filter, meta: &TraceMeta) {
        if self.busy() || end <= self.loaded.end || self.truncated {
            return;
        }
        let from = self.loaded.end;
        self.load_start = from;
        self.model.set_losses_if_more(meta.losses.clone());
        self.model.start_appending();
        self.seen = 0;
        let follow_view = self.view.end >= self.loaded.end;
        self.loaded = TimeRange::new(self.loaded.start, end);
        if self.follow {
            let len = self.view.len();
            self.view = TimeRange::new(end - len, end);
        } else if follow_view
            && self.view == TimeRange::new(self.view.start, from)
            && self.view.start == self.loaded.start
        {
            self.view = self.loaded;
        }
        self.loader = Some(loader::spawn(
            LoadRequest {
                trace: trace.to_path_buf(),
                range: TimeRange::new(from, end),
                filter,
                chunk_events: chunk_size::GANTT,
            },
            GanttConsumer::appending_from(from),
        ));
    }

    pub fn busy(&self) -> bool {
        self.loader.as_ref().is_some_and(|l| !l.progress().finished)
    }

    pub fn poll(&mut self) -> bool {
        let Some(l) = &self.loader else { return false };
        let mut changed = false;
        // Progress read before the snapshot: the snapshot holds at least what the progress says.
        let reached = l.progress().loaded_ns;
        if let Some((g, snap)) = l.snapshot_if_newer(self.seen) {
            self.seen = g;
            changed = self.model.absorb(&snap);
        }
        if self.model.events() > MAX_EVENTS && !self.truncated {
            l.cancel();
            self.truncated = true;
            // What is loaded ends where the load stopped: zooming or panning past it loads from there.
            let end = (self.load_start + reached).clamp(self.loaded.start + 1, self.loaded.end);
            self.loaded = TimeRange::new(self.loaded.start, end);
        }
        changed
    }

    pub fn stop(&mut self) {
        if let Some(l) = &self.loader {
            l.cancel();
        }
    }

    pub fn progress(&self) -> Option<socscope_analysis::loader::Progress> {
        self.loader.as_ref().map(|l| l.progress())
    }

    fn mark(&mut self) {
        self.last_interaction = Some(Instant::now());
    }

    /// The view moved outside what is loaded and the user has stopped for a moment.
    pub fn settled_outside_loaded(&self) -> Option<TimeRange> {
        let idle = self
            .last_interaction
            .is_some_and(|t| t.elapsed() > Duration::from_millis(400));
        let outside = self.view.start < self.loaded.start || self.view.end > self.loaded.end;
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

    pub fn frame(&mut self, rows: &[ProducerId], width: u32) -> &GanttFrame {
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

    pub fn ui(
        &mut self,
        ui: &mut Ui,
        names: &TraceNames,
        hidden: &BTreeSet<ProducerId>,
        whole: TimeRange,
        cursor: Option<i64>,
    ) {
        let dark = ui.visuals().dark_mode;
        let rows_all: Vec<(ProducerId, String, usize, bool)> = names
            .tree
            .visible_rows(&self.collapsed, hidden)
            .into_iter()
            .map(|n| (n.id, n.label.clone(), n.depth, !n.children.is_empty()))
            .collect();
        let avail = ui.available_size();
        let (outer, _) = ui.allocate_exact_size(avail, Sense::hover());
        let header_h = 18.0;
        let visible_rows = (((outer.height() - header_h) / ROW_H).floor().max(1.0)) as usize;
        self.row_offset = self
            .row_offset
            .min(rows_all.len().saturating_sub(visible_rows));
        let shown =
            &rows_all[self.row_offset..(self.row_offset + visible_rows).min(rows_all.len())];
        let ids: Vec<ProducerId> = shown.iter().map(|r| r.0).collect();
        let chart = Rect::from_min_max(
            Pos2::new(outer.left() + LABEL_W, outer.top() + header_h),
            outer.right_bottom(),
        );
        let width = chart.width().max(1.0) as u32;
        let view = self.view;
        let painter = ui.painter_at(outer);
        // Labels, with fold triangles.
        for (i, (id, label, depth, has_children)) in shown.iter().enumerate() {
            let y = chart.top() + i as f32 * ROW_H;
            let r = Rect::from_min_size(Pos2::new(outer.left(), y), Vec2::new(LABEL_W, ROW_H));
            if i % 2 == 1 {
                painter.rect_filled(
                    Rect::from_min_max(r.min, Pos2::new(chart.right(), r.bottom())),
                    0.0,
                    theme::stripe(dark),
                );
            }
            let indent = 10.0 * *depth as f32;
            let resp = ui.interact(r, ui.scope_id().with(("row", *id)), Sense::click());
            let text = if *has_children {
                let open = !self.collapsed.contains(id);
                if resp.clicked() {
                    if open {
                        self.collapsed.insert(*id);
                    } else {
                        self.collapsed.remove(id);
                    }
                }
                format!("{} {label}", if open { "-" } else { "+" })
            } else {
                format!("  {label}")
            };
            painter.text(
                Pos2::new(r.left() + 4.0 + indent, r.center().y),
                egui::Align2::LEFT_CENTER,
                text,
                egui::FontId::proportional(12.0),
                ui.visuals().text_color(),
            );
        }
        let frame = self.frame(&ids, width).clone();
        let px_ns = view.len() as f64 / width as f64;
        // Header: the interval and the share of links drawn (top left, as in Framesoc).
        painter.text(
            Pos2::new(outer.left() + 4.0, outer.top() + 2.0),
            egui::Align2::LEFT_TOP,
            format!("{:.0}% of links drawn", frame.links_drawn_percent()),
            egui::FontId::proportional(12.0),
            ui.visuals().weak_text_color(),
        );
        // Time axis: the ends and the quarters, in seconds.
        let weak = ui.visuals().weak_text_color();
        for i in 0..=4 {
            let f = i as f32 / 4.0;
            let tx = chart.left() + f * chart.width();
            let t = view.start + (view.len() as f64 * f as f64) as i64;
            let (align, dx) = match i {
                0 => (egui::Align2::LEFT_TOP, 2.0),
                4 => (egui::Align2::RIGHT_TOP, -2.0),
                _ => (egui::Align2::CENTER_TOP, 0.0),
            };
            painter.text(
                Pos2::new(tx + dx, outer.top() + 2.0),
                align,
                format!("{} s", format_ns(t)),
                egui::FontId::proportional(11.5),
                weak,
            );
            painter.line_segment(
                [Pos2::new(tx, chart.top() - 3.0), Pos2::new(tx, chart.top())],
                Stroke::new(1.0, weak),
            );
        }
        let cp = ui.painter_at(chart);
        let x = |c: f32| chart.left() + c;
        for (i, row) in frame.rows.iter().enumerate() {
            let y0 = chart.top() + i as f32 * ROW_H + 2.0;
            for s in &row.spans {
                let r = Rect::from_min_max(
                    Pos2::new(x(s.x0 as f32), y0),
                    Pos2::new(x(s.x1 as f32), y0 + ROW_H - 4.0),
                );
                cp.rect_filled(r, CornerRadius::ZERO, names.colour(s.type_id));
                if s.aggregated {
                    cp.circle_filled(Pos2::new(r.center().x, y0 + 2.5), 1.8, theme::marker(dark));
                }
            }
            for t in &row.ticks {
                let cx = x(t.x as f32 + 0.5);
                cp.line_segment(
                    [Pos2::new(cx, y0 - 1.0), Pos2::new(cx, y0 + ROW_H - 3.0)],
                    Stroke::new(1.5, names.colour(t.type_id)),
                );
            }
        }
        for l in &frame.links {
            let a = Pos2::new(x(l.x0), chart.top() + l.row0 as f32 * ROW_H + ROW_H / 2.0);
            let b = Pos2::new(x(l.x1), chart.top() + l.row1 as f32 * ROW_H + ROW_H / 2.0);
            let c = names.colour(l.type_id);
            cp.line_segment([a, b], Stroke::new(1.0, c));
            let dir = (b - a).normalized();
            let n = Vec2::new(-dir.y, dir.x);
            cp.add(egui::Shape::convex_polygon(
                vec![b, b - dir * 6.0 + n * 3.0, b - dir * 6.0 - n * 3.0],
                c,
                Stroke::NONE,
            ));
        }
        for g in &frame.losses {
            let r = Rect::from_min_max(
                Pos2::new(x(g.x0 as f32), chart.top()),
                Pos2::new(x(g.x1 as f32).max(x(g.x0 as f32) + 2.0), chart.bottom()),
            );
            hatch(&cp, r, theme::loss(dark));
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
        let time_at = |px: f32| view.start + ((px - chart.left()) as f64 * px_ns) as i64;
        if let Some(pos) = resp.hover_pos() {
            let (scroll, shift) = ui.input(|i| (i.smooth_scroll_delta, i.modifiers.shift));
            if shift && scroll.y != 0.0 {
                let d = if scroll.y > 0.0 { -1i64 } else { 1 };
                self.row_offset = (self.row_offset as i64 + d).max(0) as usize;
            } else if scroll.y != 0.0 {
                let f = ((pos.x - chart.left()) / chart.width()) as f64;
                self.zoom((-scroll.y as f64 / 200.0).exp(), f, whole);
            }
            let row = ((pos.y - chart.top()) / ROW_H) as usize;
            if let Some(&p) = ids.get(row)
                && !resp.dragged()
                && let Some(h) = self.model.event_at(p, time_at(pos.x), view, width)
            {
                let e = h.event;
                let text = format!(
                    "{}  ({})\nproducer: {}\nstart: {}\nend: {}\nduration: {} ns{}",
                    names.type_name(e.type_id),
                    e.category.name(),
                    names.tree.label(e.producer),
                    format_ns(e.ts),
                    format_ns(e.end),
                    e.end - e.ts,
                    if h.in_pixel > 1 {
                        format!("\n{} events in this pixel: zoom in", h.in_pixel)
                    } else {
                        String::new()
                    }
                );
                resp.clone().on_hover_text_at_pointer(text);
            }
        }
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
}

fn hatch(p: &egui::Painter, r: Rect, c: Color32) {
    p.rect_filled(r, 0.0, c.gamma_multiply(0.15));
    let p = p.with_clip_rect(r.intersect(p.clip_rect()));
    let step = 8.0;
    let mut x = r.left() - r.height();
    while x < r.right() {
        p.line_segment(
            [Pos2::new(x, r.bottom()), Pos2::new(x + r.height(), r.top())],
            Stroke::new(1.0, c),
        );
        x += step;
    }
}
