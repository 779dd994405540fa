//! The Ocelotl view ("Ocelotl: Large Trace Overviews" §3-4.1, RR-8524 §4-5): settings, the aggregated overview at pixel
//! resolution (visual aggregation where producers outnumber pixels), the producer hierarchy beside the
//! spatiotemporal overview, hover details, gain/loss curves over p, and zoom by re-running the
//! pipeline on a selected interval. A shell over `socscope_analysis::overview`.

use eframe::egui;

use std::sync::Arc;

use egui::{Align2, Color32, FontId, Pos2, Rect, Sense, Shape, Stroke, Ui};
use socscope_analysis::micro::{Metric, TraceMicroscopicModel};
use socscope_analysis::ocelotl::DrawnKind;
use socscope_analysis::overview::{
    Aggregated, Aggregation, OcelotlState, Overview, Partition, Reuse, SpatialDrawing,
    TemporalDrawing,
};
use socscope_tracedb::units::{self, TimeAxis};
use socscope_tracedb::{TimeRange, Timestamp};

use super::readers::TraceNames;
use super::views::{DrawContext, GroupView, LoadContext, ViewAction};

/// Width of the type legend right of the overview.
const LEGEND_W: f32 = 170.0;
/// Width of the producer hierarchy beside the spatiotemporal overview.
const HIERARCHY_W: f32 = 190.0;
/// Children thinner than this many points are drawn as their parent (visual aggregation).
const MIN_AREA_PX: f64 = 4.0;

pub struct OcelotlView {
    pub state: OcelotlState,
    /// Whether the trace is being written (slices of fixed width, so the overview can grow).
    live_trace: bool,
    /// Where a drag selection started (points).
    drag_from: Option<f32>,
    /// The description the user typed for the next save (empty: one is written from the settings).
    pub save_description: String,
    /// A save button was clicked: the open trace saves the partition on screen this frame.
    pub save: Option<SavePartition>,
    /// The overview's image as last drawn, and what it shows.
    drawn: Option<(OverviewKey, egui::TextureHandle)>,
    /// How many times the overview's image was drawn (uploaded) so far.
    pub image_builds: u64,
}

/// What the overview's image shows: it is drawn again when any of this changes.
struct OverviewKey {
    micro: Arc<TraceMicroscopicModel>,
    aggregated: Arc<Aggregated>,
    partition: Arc<Partition>,
    temporal: TemporalDrawing,
    spatial: SpatialDrawing,
    /// Pixels.
    size: [usize; 2],
    dark: bool,
    /// Per type of the model.
    colours: Vec<Color32>,
}

impl PartialEq for OverviewKey {
    fn eq(&self, o: &Self) -> bool {
        Arc::ptr_eq(&self.micro, &o.micro)
            && Arc::ptr_eq(&self.aggregated, &o.aggregated)
            && (Arc::ptr_eq(&self.partition, &o.partition)
                || same_parts(&self.partition, &o.partition))
            && self.temporal == o.temporal
            && self.spatial == o.spatial
            && self.size == o.size
            && self.dark == o.dark
            && self.colours == o.colours
    }
}

/// Whether two partitions have the same parts (neighbouring p often share their partition).
fn same_parts(a: &Partition, b: &Partition) -> bool {
    match (a, b) {
        (Partition::Temporal(x), Partition::Temporal(y)) => x.ranges() == y.ranges(),
        (Partition::Spatiotemporal(x), Partition::Spatiotemporal(y)) => {
            x.aggregates() == y.aggregates()
        }
        _ => false,
    }
}

/// The theme's colours the overview is drawn with.
struct OverviewColours {
    background: Color32,
    /// Part boundaries (temporal).
    boundary: Color32,
    /// Area borders (spatiotemporal).
    border: Color32,
    /// Visual aggregation marks.
    mark: Color32,
    /// Areas drawn by amplitude.
    selection: Color32,
}

/// How the partition on screen is saved into the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SavePartition {
    /// Annotations: one interval per part or area, with its producers and value.
    Annotation,
    /// A processed trace: a new trace file of the aggregated intervals, linked from this one.
    ProcessedTrace,
}

/// Whether new Ocelotl views open in spatiotemporal mode (`socscope view --aggregation
/// spatiotemporal` sets it).
pub static OPEN_SPATIOTEMPORAL: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

impl OcelotlView {
    pub fn new(range: TimeRange) -> Self {
        let mut state = OcelotlState::new(range);
        if OPEN_SPATIOTEMPORAL.load(std::sync::atomic::Ordering::Relaxed) {
            state.settings.aggregation = Aggregation::Spatiotemporal;
        }
        Self {
            state,
            live_trace: false,
            drag_from: None,
            save_description: String::new(),
            save: None,
            drawn: None,
            image_builds: 0,
        }
    }

    fn settings_ui(&mut self, ui: &mut Ui) {
        let mut s = self.state.settings.clone();
        ui.horizontal_wrapped(|ui| {
            super::widgets::labelled_combo(ui, "Metric", metric_label(s.metric), |ui| {
                for m in [Metric::Count, Metric::Duration, Metric::Mean] {
                    ui.selectable_value(&mut s.metric, m, metric_label(m));
                }
            });
            super::widgets::labelled_combo(
                ui,
                "Aggregation",
                match s.aggregation {
                    Aggregation::Temporal => "temporal",
                    Aggregation::Spatiotemporal => "spatiotemporal",
                },
                |ui| {
                    ui.selectable_value(&mut s.aggregation, Aggregation::Temporal, "temporal");
                    ui.selectable_value(
                        &mut s.aggregation,
                        Aggregation::Spatiotemporal,
                        "spatiotemporal",
                    );
                },
            );
            match s.aggregation {
                Aggregation::Temporal => {
                    super::widgets::labelled_combo(
                        ui,
                        "Drawing",
                        match s.temporal {
                            TemporalDrawing::Partition => "partition",
                            TemporalDrawing::Stacked => "stacked proportions",
                        },
                        |ui| {
                            ui.selectable_value(
                                &mut s.temporal,
                                TemporalDrawing::Partition,
                                "partition",
                            );
                            ui.selectable_value(
                                &mut s.temporal,
                                TemporalDrawing::Stacked,
                                "stacked proportions",
                            );
                        },
                    );
                    ui.checkbox(&mut s.normalize, "Normalize");
                }
                Aggregation::Spatiotemporal => {
                    super::widgets::labelled_combo(
                        ui,
                        "Drawing",
                        match s.spatial {
                            SpatialDrawing::Areas => "aggregated areas",
                            SpatialDrawing::Mode => "mode colour",
                        },
                        |ui| {
                            ui.selectable_value(
                                &mut s.spatial,
                                SpatialDrawing::Areas,
                                "aggregated areas",
                            );
                            ui.selectable_value(
                                &mut s.spatial,
                                SpatialDrawing::Mode,
                                "mode colour",
                            );
                        },
                    );
                }
            }
            ui.horizontal(|ui| {
                let l = ui.label("Slices");
                ui.add(
                    egui::DragValue::new(&mut s.slices)
                        .range(2..=2000)
                        .speed(1.0),
                )
                .labelled_by(l.id)
                .on_hover_text("Time slices the interval is cut into");
            });
            ui.horizontal(|ui| {
                let l = ui.label("Threshold");
                ui.add(
                    egui::DragValue::new(&mut s.threshold)
                        .range(0.0001..=0.1)
                        .speed(0.0001)
                        .max_decimals(4),
                )
                .labelled_by(l.id)
                .on_hover_text(
                    "The finest step in p of the bisection that finds the significant p values",
                );
            });
            ui.weak("types and producers: the group's filters (Types…, Producers…)");
        });
        if s != self.state.settings {
            let rerun = self.state.settings.needs_rerun(&s);
            self.state.settings = s;
            if rerun {
                self.state.rerun();
            }
        }
    }

    /// While the bisection over p runs, what is shown is the p list found so far (the first
    /// overview is the coarse p = 1): say so, and how far it is; Stop keeps what was found.
    fn bisection_ui(&self, ui: &mut Ui, a: &socscope_analysis::overview::Aggregated) {
        let b = &a.bisection;
        // Above the size where the exact qualities fit, the engine runs its scalable
        // algorithm (the same results, recomputed at every p): say why it takes longer.
        if let socscope_analysis::overview::AggregationResult::Spatiotemporal { agg, .. } =
            &a.result
            && agg.algorithm() == socscope_analysis::ocelotl::Algorithm::Scalable
        {
            ui.weak("scalable algorithm (qualities recomputed at every p, two leaves at a time; p evaluated only where the quality lines found so far cannot tell the partition): this tree × slice count is above the size where the qualities fit in memory; the results are the exact algorithm's");
        }
        if a.complete {
            return;
        }
        ui.horizontal(|ui| {
            if self.state.busy() {
                ui.spinner();
                ui.label(format!(
                    "bisection over p: {} p evaluated, {:.0}% of the next; the partitions found so far are shown",
                    b.evaluations(),
                    100.0 * b.fraction()
                ));
                ui.ctx()
                    .request_repaint_after(std::time::Duration::from_millis(200));
            } else {
                ui.weak(format!(
                    "bisection stopped after {} p: the p list is partial",
                    b.evaluations()
                ));
            }
        });
    }

    /// Draws the view; returns what the user asked of the group.
    fn draw(&mut self, ui: &mut Ui, names: &TraceNames) -> Option<ViewAction> {
        self.settings_ui(ui);
        let mut action = None;
        let Some(a) = self.state.aggregated().cloned() else {
            self.no_overview_note(ui);
            return None;
        };
        self.bisection_ui(ui, &a);
        let part = self.state.partition()?;
        let overview = self.state.overview.clone()?;
        let grid = overview.micro.grid;
        let full = ui.available_rect_before_wrap();
        let curves_h = 150.0_f32.min(full.height() * 0.35);
        let over_rect = Rect::from_min_max(
            full.min,
            Pos2::new(full.right(), full.bottom() - curves_h - 6.0),
        );
        let curves_rect =
            Rect::from_min_max(Pos2::new(full.left(), full.bottom() - curves_h), full.max);
        ui.allocate_rect(full, Sense::hover());
        // Overview.
        let spatial = matches!(*part, Partition::Spatiotemporal(_));
        let left = if spatial { HIERARCHY_W + 6.0 } else { 60.0 };
        let plot = Rect::from_min_max(
            Pos2::new(over_rect.left() + left, over_rect.top() + 18.0),
            Pos2::new(over_rect.right() - LEGEND_W, over_rect.bottom() - 30.0),
        );
        let resp = ui.interact(
            plot,
            ui.scope_id().with("ocelotl-overview"),
            Sense::click_and_drag(),
        );
        let p = ui.painter_at(over_rect);
        let visuals = ui.visuals().clone();
        let text = visuals.weak_text_color();
        self.refresh_overview_image(ui, &a, &part, &overview, plot.size(), names);
        if let Some((_, t)) = &self.drawn {
            p.image(
                t.id(),
                plot,
                Rect::from_min_max(Pos2::ZERO, Pos2::new(1.0, 1.0)),
                Color32::WHITE,
            );
        }
        if let Partition::Spatiotemporal(_) = &*part {
            let spatial_leaf_px = f64::from(plot.height()) / a.model.producers().max(1) as f64;
            hierarchy_ui(
                &p,
                &a,
                Rect::from_min_max(
                    Pos2::new(over_rect.left(), plot.top()),
                    Pos2::new(over_rect.left() + HIERARCHY_W, plot.bottom()),
                ),
                spatial_leaf_px,
                &visuals,
            );
        }
        type_legend(&p, plot, &overview.micro, names, &visuals);
        // The part of the interval not read yet (the pipeline runs) or not complete (live).
        if !overview.complete() {
            let done = overview.micro.grid.slices as f32 / overview.slices_total.max(1) as f32;
            let x = plot.left() + plot.width() * done.min(1.0);
            p.text(
                Pos2::new(x + 4.0, plot.center().y),
                Align2::LEFT_CENTER,
                format!(
                    "reading slices {} / {}…",
                    overview.micro.grid.slices, overview.slices_total
                ),
                FontId::proportional(12.0),
                text,
            );
        }
        let range = grid.range;
        time_axis(&p, plot, range, text);
        self.paint_title(&p, over_rect, plot, &overview, &part, text);
        // Hover.
        if let Some(pos) = resp.hover_pos()
            && plot.contains(pos)
            && self.drag_from.is_none()
        {
            let slices = grid.slices.max(1);
            let s = (((pos.x - plot.left()) / plot.width()) * slices as f32) as usize;
            let s = s.min(slices - 1);
            let leaf = ((pos.y - plot.top()) / plot.height() * a.model.producers() as f32) as usize;
            if let Some(tip) = hover_text(&a, &part, &overview.micro, s, leaf, plot, &self.state) {
                resp.clone().on_hover_text_at_pointer(tip);
            }
        }
        if let Some(zoom) = self.drag_to_zoom(&p, &resp, plot, range, &visuals) {
            action = Some(zoom);
        }
        // Curves, p slider and buttons.
        let mut child = ui.new_child(egui::UiBuilder::new().max_rect(curves_rect));
        if let Some(act) = self.curves_ui(&mut child, &a, range) {
            action = Some(act);
        }
        action
    }

    /// Why there is no overview yet (aggregating, an error, nothing of the metric).
    fn no_overview_note(&self, ui: &mut Ui) {
        let msg = match &self.state.overview {
            Some(o) if o.error.is_some() => o.error.clone().unwrap_or_default(),
            Some(_) => {
                "no value of this metric in the interval (check the metric and the filters)".into()
            }
            None => "aggregating…".into(),
        };
        ui.add_space(20.0);
        ui.vertical_centered(|ui| {
            if self.state.busy() {
                ui.spinner();
            }
            ui.weak(msg);
        });
    }

    /// The overview is drawn into an image of the plot's pixels, shown as one textured quad and
    /// drawn again only when what it shows changes (not on every frame: a software renderer
    /// would otherwise shade the plot twice and thousands of triangles each frame).
    fn refresh_overview_image(
        &mut self,
        ui: &Ui,
        a: &Arc<Aggregated>,
        part: &Arc<Partition>,
        overview: &Overview,
        plot: egui::Vec2,
        names: &TraceNames,
    ) {
        let visuals = ui.visuals();
        let text = visuals.weak_text_color();
        let ppp = ui.ctx().pixels_per_point();
        let size = [
            ((plot.x * ppp).round() as usize).max(1),
            ((plot.y * ppp).round() as usize).max(1),
        ];
        let key = OverviewKey {
            micro: overview.micro.clone(),
            aggregated: a.clone(),
            partition: part.clone(),
            temporal: self.state.settings.temporal,
            spatial: self.state.settings.spatial,
            size,
            dark: visuals.dark_mode,
            colours: (0..overview.micro.types.len())
                .map(|u| type_colour(&overview.micro, names, u))
                .collect(),
        };
        if self.drawn.as_ref().is_none_or(|(k, _)| *k != key) {
            let image = overview_image(
                a,
                part,
                &key,
                &OverviewColours {
                    background: visuals.extreme_bg_color,
                    boundary: text.gamma_multiply(0.6),
                    border: visuals.panel_fill,
                    mark: visuals.strong_text_color(),
                    selection: visuals.selection.bg_fill,
                },
                ppp,
            );
            let texture = match self.drawn.take() {
                Some((_, mut t)) => {
                    t.set(image, egui::TextureOptions::NEAREST);
                    t
                }
                None => {
                    ui.ctx()
                        .load_texture("ocelotl-overview", image, egui::TextureOptions::NEAREST)
                }
            };
            self.drawn = Some((key, texture));
            self.image_builds += 1;
        }
    }

    /// The line above the overview: aggregation, metric, slices, parts at p, cache reuse.
    fn paint_title(
        &self,
        p: &egui::Painter,
        over_rect: Rect,
        plot: Rect,
        overview: &Overview,
        part: &Partition,
        text: Color32,
    ) {
        let grid = overview.micro.grid;
        let spatial = matches!(part, Partition::Spatiotemporal(_));
        let reuse = match overview.reuse {
            Reuse::Fresh => "",
            Reuse::Exact => " · model from the cache",
            Reuse::Continued { .. } => " · model continued from the cache",
            Reuse::Narrowed => " · model cut from a cached one",
        };
        p.text(
            Pos2::new(plot.left(), over_rect.top() + 2.0),
            Align2::LEFT_TOP,
            format!(
                "{} {} · {} slices of {} · {} {} at p = {:.4}{reuse} · drag: zoom into an interval",
                match self.state.settings.aggregation {
                    Aggregation::Temporal => "temporal",
                    Aggregation::Spatiotemporal => "spatiotemporal",
                },
                metric_label(self.state.settings.metric),
                grid.slices,
                units::duration_compact(grid.slice_ns()),
                part.len(),
                if spatial { "areas" } else { "parts" },
                self.state.p
            ),
            FontId::proportional(12.0),
            text,
        );
    }

    /// Drag: select an interval to zoom into; the zoom, once the drag ends on a wide enough one.
    fn drag_to_zoom(
        &mut self,
        p: &egui::Painter,
        resp: &egui::Response,
        plot: Rect,
        range: TimeRange,
        visuals: &egui::Visuals,
    ) -> Option<ViewAction> {
        let mut action = None;
        if resp.drag_started()
            && let Some(pos) = resp.interact_pointer_pos()
        {
            self.drag_from = Some(pos.x.clamp(plot.left(), plot.right()));
        }
        let time_at = |x: f32| {
            range.start + (((x - plot.left()) / plot.width()) as f64 * range.len() as f64) as i64
        };
        if let (Some(x0), Some(pos)) = (self.drag_from, resp.interact_pointer_pos()) {
            let x1 = pos.x.clamp(plot.left(), plot.right());
            p.rect_filled(
                Rect::from_x_y_ranges(x0.min(x1)..=x0.max(x1), plot.y_range()),
                0.0,
                visuals.selection.bg_fill.gamma_multiply(0.35),
            );
            if resp.drag_stopped() {
                let (a, b) = (time_at(x0.min(x1)), time_at(x0.max(x1)));
                if b > a && x0.max(x1) - x0.min(x1) >= 3.0 {
                    action = Some(ViewAction::Load(TimeRange::new(a, b)));
                }
                self.drag_from = None;
            }
        }
        if !resp.dragged() && !resp.drag_stopped() {
            self.drag_from = None;
        }
        action
    }

    fn curves_ui(&mut self, ui: &mut Ui, a: &Aggregated, range: TimeRange) -> Option<ViewAction> {
        let mut action = None;
        let curve = a.curve();
        ui.horizontal(|ui| {
            let mut p = self.state.p;
            let l = ui.label("p");
            let r = ui
                .add(egui::Slider::new(&mut p, 0.0..=1.0).max_decimals(4))
                .labelled_by(l.id);
            // Only a user's change: the slider may adjust a value it only shows.
            if r.changed() && (r.dragged() || r.clicked() || r.has_focus() || r.lost_focus()) {
                self.state.set_p(p);
            }
            if ui
                .button("<")
                .on_hover_text("Previous listed p (left arrow key)")
                .clicked()
            {
                self.state.step_p(-1);
            }
            if ui
                .button(">")
                .on_hover_text("Next listed p (right arrow key)")
                .clicked()
            {
                self.state.step_p(1);
            }
            ui.weak(format!("{} listed p", curve.len()));
            ui.separator();
            if ui
                .button("Gantt of this interval")
                .on_hover_text(
                    "Open a Gantt chart on the interval of this overview, in a new group",
                )
                .clicked()
            {
                action = Some(ViewAction::GanttOn(range));
            }
            ui.separator();
            ui.add(
                egui::TextEdit::singleline(&mut self.save_description)
                    .hint_text("description (optional)")
                    .desired_width(150.0),
            );
            if ui
                .button("Save partition")
                .on_hover_text(
                    "Keep the parts (areas) at this p in the trace as annotations: their intervals, \
                     producers and values (Results…)",
                )
                .clicked()
            {
                self.save = Some(SavePartition::Annotation);
            }
            if ui
                .button("Save as processed trace")
                .on_hover_text(
                    "Write the partition at this p as a new trace of aggregated intervals (one state \
                     per part and producer, with its values), linked from this trace (Results…)",
                )
                .clicked()
            {
                self.save = Some(SavePartition::ProcessedTrace);
            }
        });
        // Arrow keys step through the listed p (unless a text field has the keyboard).
        let typing = ui.ctx().memory(|m| m.focused().is_some());
        if !typing {
            let (l, r) = ui.input(|i| {
                (
                    i.key_pressed(egui::Key::ArrowLeft),
                    i.key_pressed(egui::Key::ArrowRight),
                )
            });
            if l {
                self.state.step_p(-1);
            }
            if r {
                self.state.step_p(1);
            }
        }
        let rect = ui.available_rect_before_wrap();
        // Left: the y axis (its title and values); top: a line for the legend and the p marker's
        // name; bottom: the p axis.
        let plot = Rect::from_min_max(
            Pos2::new(rect.left() + 62.0, rect.top() + 18.0),
            Pos2::new(rect.right() - 10.0, rect.bottom() - 16.0),
        );
        if plot.height() < 30.0 {
            return action;
        }
        let resp = ui.allocate_rect(rect, Sense::click_and_drag());
        // Texts a reader (and the tests) can find are labels put in a child of the area: placing
        // them moves no cursor.
        let mut labels = ui.new_child(egui::UiBuilder::new().max_rect(rect));
        let p = ui.painter_at(rect);
        let visuals = ui.visuals();
        let text = visuals.weak_text_color();
        let strong = visuals.text_color();
        p.rect_filled(plot, 0.0, visuals.extreme_bg_color);
        let gmax = curve
            .iter()
            .map(|c| c.gain.abs())
            .fold(0.0, f64::max)
            .max(1e-300);
        let lmax = curve
            .iter()
            .map(|c| c.loss.abs())
            .fold(0.0, f64::max)
            .max(1e-300);
        let x_of = |p: f64| plot.left() + p as f32 * plot.width();
        let y_of = |v: f64| plot.bottom() - (v.clamp(-0.05, 1.0) as f32) * plot.height() * 0.95;
        let gain = Color32::from_rgb(0x2c, 0xa0, 0x2c);
        let loss = Color32::from_rgb(0xd6, 0x27, 0x28);
        let marker = p_marker_colour(visuals.dark_mode);
        // The p shown, as a band under the curves (it often sits on a step of them) and a line
        // over them, kept off the axes where it would be lost.
        let marker_x = (x_of(self.state.p)).clamp(plot.left() + 3.0, plot.right() - 3.0);
        p.rect_filled(
            Rect::from_x_y_ranges(marker_x - 5.0..=marker_x + 5.0, plot.y_range()),
            0.0,
            marker.gamma_multiply(0.18),
        );
        // The y axis: each curve relative to its largest value.
        let y_ticks: &[f64] = if plot.height() >= 90.0 {
            &[0.0, 0.25, 0.5, 0.75, 1.0]
        } else {
            &[0.0, 0.5, 1.0]
        };
        for &v in y_ticks {
            let y = y_of(v);
            p.line_segment(
                [Pos2::new(plot.left(), y), Pos2::new(plot.right(), y)],
                Stroke::new(1.0, text.gamma_multiply(0.25)),
            );
            p.line_segment(
                [Pos2::new(plot.left() - 4.0, y), Pos2::new(plot.left(), y)],
                Stroke::new(1.0, text),
            );
            labels.put(
                Rect::from_min_max(
                    Pos2::new(rect.left() + 16.0, y - 7.0),
                    Pos2::new(plot.left() - 6.0, y + 7.0),
                ),
                egui::Label::new(
                    egui::RichText::new(format!("{:.0} %", v * 100.0))
                        .size(10.0)
                        .color(text),
                )
                .selectable(false),
            );
        }
        let title = p.layout_no_wrap(
            "of its maximum".to_owned(),
            FontId::proportional(10.0),
            text,
        );
        let title_w = title.size().x;
        p.add(
            egui::epaint::TextShape::new(
                Pos2::new(rect.left() + 2.0, plot.center().y + title_w * 0.5),
                title,
                text,
            )
            .with_angle(-std::f32::consts::FRAC_PI_2),
        );
        p.line_segment(
            [plot.left_top(), plot.left_bottom()],
            Stroke::new(1.0, text),
        );
        for (col, f) in [
            (
                gain,
                Box::new(|c: &socscope_analysis::overview::CurvePoint| c.gain / gmax)
                    as Box<dyn Fn(&_) -> f64>,
            ),
            (
                loss,
                Box::new(|c: &socscope_analysis::overview::CurvePoint| c.loss / lmax),
            ),
        ] {
            let mut pts = Vec::new();
            for (i, c) in curve.iter().enumerate() {
                let next = curve.get(i + 1).map_or(1.0, |n| n.p);
                pts.push(Pos2::new(x_of(c.p), y_of(f(c))));
                pts.push(Pos2::new(x_of(next), y_of(f(c))));
            }
            p.add(Shape::line(pts, Stroke::new(2.0, col)));
        }
        // The bisection's p values.
        for c in &curve {
            let x = x_of(c.p);
            p.line_segment(
                [
                    Pos2::new(x, plot.bottom()),
                    Pos2::new(x, plot.bottom() + 5.0),
                ],
                Stroke::new(1.0, text),
            );
        }
        p.line_segment(
            [
                Pos2::new(marker_x, plot.top()),
                Pos2::new(marker_x, plot.bottom()),
            ],
            Stroke::new(2.0, marker),
        );
        p.add(Shape::convex_polygon(
            vec![
                Pos2::new(marker_x - 5.0, plot.top() - 6.0),
                Pos2::new(marker_x + 5.0, plot.top() - 6.0),
                Pos2::new(marker_x, plot.top()),
            ],
            marker,
            Stroke::NONE,
        ));
        // The legend, right of the top line.
        let mut x = plot.right();
        for (name, col) in [("loss", loss), ("gain", gain)] {
            let g = p.layout_no_wrap(name.to_owned(), FontId::proportional(11.0), strong);
            x -= g.size().x;
            p.galley(Pos2::new(x, rect.top() + 1.0), g, strong);
            x -= 20.0;
            p.line_segment(
                [
                    Pos2::new(x + 2.0, rect.top() + 8.0),
                    Pos2::new(x + 16.0, rect.top() + 8.0),
                ],
                Stroke::new(2.0, col),
            );
            x -= 12.0;
        }
        let legend_left = x;
        // The p marker's name on the top line: right of it, or left where the legend is.
        let name = format!("p = {:.4}", self.state.p);
        let name_w = p
            .layout_no_wrap(name.clone(), FontId::proportional(11.0), marker)
            .size()
            .x
            + 4.0;
        let name_x = if marker_x + 8.0 + name_w < legend_left {
            marker_x + 8.0
        } else {
            (marker_x - 8.0 - name_w).max(plot.left())
        };
        labels.put(
            Rect::from_min_size(Pos2::new(name_x, rect.top()), egui::vec2(name_w, 16.0)),
            egui::Label::new(egui::RichText::new(name).size(11.0).color(marker).strong())
                .selectable(false),
        );
        for (v, label) in [(0.0, "0"), (0.5, "0.5"), (1.0, "p = 1")] {
            p.text(
                Pos2::new(x_of(v), plot.bottom() + 4.0),
                if v == 0.0 {
                    Align2::LEFT_TOP
                } else if v == 1.0 {
                    Align2::RIGHT_TOP
                } else {
                    Align2::CENTER_TOP
                },
                label,
                FontId::proportional(10.0),
                text,
            );
        }
        // Clicking or dragging on the curves recomputes the partition at that p.
        if (resp.clicked() || resp.dragged())
            && let Some(pos) = resp.interact_pointer_pos()
        {
            self.state
                .set_p(((pos.x - plot.left()) / plot.width()).clamp(0.0, 1.0) as f64);
        }
        if let Some(pos) = resp.hover_pos() {
            let hp = ((pos.x - plot.left()) / plot.width()).clamp(0.0, 1.0) as f64;
            if let Some(c) = curve.iter().rev().find(|c| c.p <= hp + 1e-12) {
                resp.on_hover_text_at_pointer(format!(
                    "p = {hp:.4} (partition of listed p = {:.4})\ngain {:.4e}\nloss {:.4e}\nclick: show the partition at this p",
                    c.p, c.gain, c.loss
                ));
            }
        }
        action
    }
}

/// The colour of the p marker on the gain and loss curves: a blue neither curve has, lighter on a
/// dark background.
pub fn p_marker_colour(dark: bool) -> Color32 {
    if dark {
        Color32::from_rgb(0x5a, 0xaf, 0xf0)
    } else {
        Color32::from_rgb(0x1f, 0x6f, 0xd0)
    }
}

/// `src` (premultiplied) over the opaque `dst`.
fn over(dst: Color32, src: Color32) -> Color32 {
    let keep = 255 - u32::from(src.a());
    let mix = |s: u8, d: u8| (u32::from(s) + (u32::from(d) * keep + 127) / 255).min(255) as u8;
    Color32::from_rgb(
        mix(src.r(), dst.r()),
        mix(src.g(), dst.g()),
        mix(src.b(), dst.b()),
    )
}

/// The colour of type `u` of the model (the trace's colour of that type).
fn type_colour(micro: &TraceMicroscopicModel, names: &TraceNames, u: usize) -> Color32 {
    micro
        .types
        .get(u)
        .map_or(Color32::GRAY, |t| names.colour(t.id))
}

/// Legend: the types of the model, top down as they are stacked (the first type at the bottom).
fn type_legend(
    p: &egui::Painter,
    plot: Rect,
    micro: &TraceMicroscopicModel,
    names: &TraceNames,
    visuals: &egui::Visuals,
) {
    let text = visuals.weak_text_color();
    let mut ly = plot.top();
    for (shown, (u, t)) in micro.types.iter().enumerate().rev().enumerate() {
        if ly + 14.0 > plot.bottom() {
            p.text(
                Pos2::new(plot.right() + 10.0, ly),
                Align2::LEFT_TOP,
                format!("… {} more", micro.types.len() - shown),
                FontId::proportional(11.0),
                text,
            );
            break;
        }
        p.rect_filled(
            Rect::from_min_size(
                Pos2::new(plot.right() + 10.0, ly + 2.0),
                egui::vec2(10.0, 10.0),
            ),
            1.0,
            type_colour(micro, names, u),
        );
        let name: String = t.name.chars().take(22).collect();
        p.text(
            Pos2::new(plot.right() + 24.0, ly),
            Align2::LEFT_TOP,
            name,
            FontId::proportional(11.0),
            visuals.text_color(),
        );
        ly += 15.0;
    }
}

/// The time axis under the overview.
fn time_axis(p: &egui::Painter, plot: Rect, range: TimeRange, text: Color32) {
    let axis = TimeAxis::new(
        range.start,
        range.end,
        (plot.width() / 110.0).max(2.0) as usize,
    );
    let time_x = |t: Timestamp| {
        plot.left() + ((t - range.start) as f64 / range.len().max(1) as f64) as f32 * plot.width()
    };
    for t in axis.ticks(range.start, range.end) {
        let x = time_x(t);
        p.line_segment(
            [
                Pos2::new(x, plot.bottom()),
                Pos2::new(x, plot.bottom() + 4.0),
            ],
            Stroke::new(1.0, text),
        );
        p.text(
            Pos2::new(x, plot.bottom() + 5.0),
            Align2::CENTER_TOP,
            axis.label(t),
            FontId::proportional(11.0),
            text,
        );
    }
}

/// An opaque image of the overview's pixels (`key.size`): the partition's parts (temporal: one
/// colour per part or the stacked proportions of its types, with its left boundary) or areas
/// (spatiotemporal: filled, bordered, visual aggregation marked), over the background.
fn overview_image(
    a: &Aggregated,
    part: &Partition,
    key: &OverviewKey,
    c: &OverviewColours,
    ppp: f32,
) -> egui::ColorImage {
    let [w, h] = key.size;
    let mut img = egui::ColorImage::filled([w, h], c.background);
    let colour = |u: usize| key.colours.get(u).copied().unwrap_or(Color32::GRAY);
    let slices = a.model.slices().max(1);
    let x_of = |s: usize| ((s as f64 / slices as f64) * w as f64).round() as usize;
    let fill = |img: &mut egui::ColorImage, x0: usize, x1: usize, y0: usize, y1: usize, col| {
        for y in y0.min(h)..y1.min(h) {
            let row = &mut img.pixels[y * w..(y + 1) * w];
            for px in &mut row[x0.min(w)..x1.min(w)] {
                *px = over(*px, col);
            }
        }
    };
    match part {
        Partition::Temporal(tp) => {
            let stacked = a.stacked(tp);
            let max = stacked.max_total.max(1e-300);
            for sp in &stacked.parts {
                let (x0, x1) = (x_of(sp.range.0), x_of(sp.range.1 + 1));
                match key.temporal {
                    TemporalDrawing::Stacked => {
                        let mut below = 0.0;
                        for (u, v) in sp.values.iter().enumerate() {
                            if *v <= 0.0 {
                                continue;
                            }
                            let y =
                                |t: f64| h - ((t / max) * h as f64).round().min(h as f64) as usize;
                            fill(&mut img, x0, x1, y(below + v), y(below), colour(u));
                            below += v;
                        }
                    }
                    TemporalDrawing::Partition => {
                        if let Some(u) = sp.mode {
                            let col = colour(u)
                                .gamma_multiply((0.15 + 0.85 * sp.mode_amplitude.min(1.0)) as f32);
                            fill(&mut img, x0, x1, 0, h, col);
                        }
                    }
                }
                fill(&mut img, x0, x0 + 1, 0, h, c.boundary);
            }
        }
        Partition::Spatiotemporal(sp) => {
            // Visual aggregation in points (as the hover finds the areas), drawn in pixels.
            let leaves = a.model.producers().max(1);
            let leaf_px = h as f64 / leaves as f64;
            let drawn = a.drawn(sp, leaf_px / f64::from(ppp), MIN_AREA_PX);
            let max_amp = drawn
                .iter()
                .map(|(_, m)| m.amplitude)
                .fold(0.0, f64::max)
                .max(1e-300);
            let y_of = |leaf: usize| ((leaf as f64 * leaf_px).round() as usize).min(h);
            for (d, m) in &drawn {
                let (l0, l1) = a.spans[d.node];
                if l0 == usize::MAX {
                    continue;
                }
                let (x0, x1, y0, y1) = (x_of(d.start), x_of(d.end + 1), y_of(l0), y_of(l1 + 1));
                let col = match key.spatial {
                    SpatialDrawing::Mode => m.mode.map_or(Color32::TRANSPARENT, |u| {
                        colour(u).gamma_multiply(f32::from(m.alpha) / 255.0)
                    }),
                    SpatialDrawing::Areas => c
                        .selection
                        .gamma_multiply((0.1 + 0.9 * m.amplitude / max_amp) as f32),
                };
                fill(&mut img, x0, x1, y0, y1, col);
                // A one-pixel border inside the area.
                if x1 > x0 && y1 > y0 {
                    fill(&mut img, x0, x1, y0, y0 + 1, c.border);
                    fill(&mut img, x0, x1, y1 - 1, y1, c.border);
                    fill(&mut img, x0, x0 + 1, y0, y1, c.border);
                    fill(&mut img, x1 - 1, x1, y0, y1, c.border);
                }
                if let DrawnKind::Visual {
                    same_partition_below,
                } = d.kind
                {
                    // 002 §3.5.1: a diagonal where the children share their cuts, a cross where not.
                    line(
                        &mut img,
                        (x0, y1.saturating_sub(1)),
                        (x1.saturating_sub(1), y0),
                        c.mark,
                    );
                    if !same_partition_below {
                        line(
                            &mut img,
                            (x0, y0),
                            (x1.saturating_sub(1), y1.saturating_sub(1)),
                            c.mark,
                        );
                    }
                }
            }
        }
    }
    img
}

/// A one-pixel line between two pixels (both drawn), clipped to the image.
fn line(img: &mut egui::ColorImage, from: (usize, usize), to: (usize, usize), col: Color32) {
    let [w, h] = img.size;
    let (x0, y0, x1, y1) = (from.0 as i64, from.1 as i64, to.0 as i64, to.1 as i64);
    let steps = (x1 - x0).abs().max((y1 - y0).abs()).max(1);
    for i in 0..=steps {
        let x = x0 + (x1 - x0) * i / steps;
        let y = y0 + (y1 - y0) * i / steps;
        if (0..w as i64).contains(&x) && (0..h as i64).contains(&y) {
            let px = &mut img.pixels[y as usize * w + x as usize];
            *px = over(*px, col);
        }
    }
}

/// The producer hierarchy beside the spatiotemporal overview: one column per depth, each node a box
/// over its leaves' rows, named where it is tall enough.
fn hierarchy_ui(
    p: &egui::Painter,
    a: &Aggregated,
    rect: Rect,
    leaf_px: f64,
    visuals: &egui::Visuals,
) {
    let h = &a.hierarchy;
    let mut depth = vec![0usize; h.len()];
    let mut order: Vec<usize> = h.post_order().to_vec();
    order.reverse();
    for &n in &order {
        for &c in h.children(n) {
            depth[c] = depth[n] + 1;
        }
    }
    let max_depth = depth.iter().copied().max().unwrap_or(0);
    // The root column is not drawn: it is the whole overview.
    let cols = max_depth.max(1) as f32;
    let col_w = rect.width() / cols;
    let text = visuals.text_color();
    for n in order {
        if depth[n] == 0 {
            continue;
        }
        let (l0, l1) = a.spans[n];
        if l0 == usize::MAX {
            continue;
        }
        let y0 = rect.top() + (l0 as f64 * leaf_px) as f32;
        let y1 = rect.top() + ((l1 + 1) as f64 * leaf_px) as f32;
        let x0 = rect.left() + (depth[n] - 1) as f32 * col_w;
        // Leaves take the rest of the width.
        let x1 = if h.is_leaf(n) {
            rect.right()
        } else {
            x0 + col_w
        };
        let r = Rect::from_min_max(Pos2::new(x0, y0), Pos2::new(x1, y1));
        p.rect_stroke(
            r,
            0.0,
            Stroke::new(1.0, visuals.weak_text_color().gamma_multiply(0.5)),
            egui::StrokeKind::Inside,
        );
        if r.height() >= 11.0 {
            let name = a.nodes.get(n).map_or("", |x| x.name.as_str());
            let max_chars = ((r.width() - 4.0) / 6.0).max(1.0) as usize;
            let label: String = if name.chars().count() > max_chars {
                name.chars()
                    .take(max_chars.saturating_sub(1))
                    .chain(std::iter::once('…'))
                    .collect()
            } else {
                name.to_string()
            };
            p.text(
                Pos2::new(r.left() + 3.0, r.center().y),
                Align2::LEFT_CENTER,
                label,
                FontId::proportional(10.5),
                text,
            );
        }
    }
}

/// What the overview tells under the pointer: interval, producer or node, value per type, the
/// aggregate's extent.
#[allow(clippy::too_many_arguments)]
fn hover_text(
    a: &Aggregated,
    part: &Partition,
    micro: &socscope_analysis::micro::TraceMicroscopicModel,
    slice: usize,
    leaf: usize,
    plot: Rect,
    state: &OcelotlState,
) -> Option<String> {
    let (node, start, end) = match part {
        Partition::Temporal(tp) => {
            let &(s, e) = tp
                .ranges()
                .iter()
                .find(|(s, e)| *s <= slice && slice <= *e)?;
            (a.hierarchy.root(), s, e)
        }
        Partition::Spatiotemporal(sp) => {
            let leaf_px = f64::from(plot.height()) / a.model.producers().max(1) as f64;
            let drawn = a.drawn(sp, leaf_px, MIN_AREA_PX);
            let (d, _) = drawn.iter().find(|(d, _)| {
                let (l0, l1) = a.spans[d.node];
                l0 <= leaf && leaf <= l1 && d.start <= slice && slice <= d.end
            })?;
            (d.node, d.start, d.end)
        }
    };
    let interval = state.slice_range(start, end)?;
    let (l0, l1) = a.spans[node];
    let who = if node == a.hierarchy.root() {
        format!("all {} producers", a.model.producers())
    } else {
        let name = a.nodes.get(node).map_or("?", |n| n.name.as_str());
        if l0 == l1 {
            format!("producer {name}")
        } else {
            format!("{name} ({} producers)", l1 - l0 + 1)
        }
    };
    let mut s = format!(
        "{} – {} s ({})\n{who}\naggregate: {} slice{} × {} producer{}",
        units::timestamp(interval.start),
        units::timestamp(interval.end),
        units::duration_compact(interval.len() as f64),
        end - start + 1,
        if end > start { "s" } else { "" },
        l1 - l0 + 1,
        if l1 > l0 { "s" } else { "" },
    );
    let values = a.values(node, start, end);
    let mut by_type: Vec<(usize, f64)> = values
        .into_iter()
        .enumerate()
        .filter(|(_, v)| *v != 0.0)
        .collect();
    by_type.sort_by(|x, y| y.1.total_cmp(&x.1));
    for (u, v) in by_type.iter().take(12) {
        let t = &micro.types[*u];
        s.push_str(&format!("\n  {}: {}", t.name, value_text(micro.metric, *v)));
    }
    if by_type.len() > 12 {
        s.push_str(&format!("\n  … {} more types", by_type.len() - 12));
    }
    if by_type.is_empty() {
        s.push_str("\n  (no value: void)");
    }
    Some(s)
}

impl OcelotlView {
    /// What a saved partition at the p on screen is called: the user's text, else its settings.
    pub fn describe_partition(&mut self) -> Option<String> {
        let user = self.save_description.trim().to_owned();
        if !user.is_empty() {
            return Some(user);
        }
        let part = self.state.partition()?;
        let grid = self.state.overview.as_ref()?.micro.grid;
        let (what, unit) = match *part {
            Partition::Temporal(_) => ("temporal", "part"),
            Partition::Spatiotemporal(_) => ("spatiotemporal", "area"),
        };
        let n = part.len();
        Some(format!(
            "Ocelotl {what} partition at p={:.4}: {n} {unit}{} ({}, {} slices of {})",
            self.state.p,
            if n == 1 { "" } else { "s" },
            metric_label(self.state.settings.metric),
            grid.slices,
            units::duration(grid.slice_ns() as i64)
        ))
    }
}

fn value_text(metric: Metric, v: f64) -> String {
    match metric {
        Metric::Count => format!("{v:.0} events"),
        Metric::Duration => format!("{} in states", units::duration_compact(v)),
        Metric::Mean => format!("{v:.4} (sum of slice means)"),
    }
}

fn metric_label(m: Metric) -> &'static str {
    match m {
        Metric::Count => "event count",
        Metric::Duration => "state duration",
        Metric::Mean => "variable mean",
    }
}

impl GroupView for OcelotlView {
    fn new(interval: TimeRange, _names: &TraceNames) -> Self {
        OcelotlView::new(interval)
    }
    fn reads_summary() -> bool {
        true
    }
    fn ui(&mut self, ui: &mut Ui, cx: &DrawContext<'_>) -> Option<ViewAction> {
        self.draw(ui, cx.names)
    }
    /// Ocelotl's zoom is not graphical (it re-runs the pipeline on the selected interval, on the
    /// loader thread): its frames sweep p up and down (the partition is recomputed and drawn at
    /// each), then zoom into the middle half of the interval and back out.
    fn scripted_move(
        &mut self,
        i: u64,
        whole: TimeRange,
        interval: TimeRange,
    ) -> Option<TimeRange> {
        match i / 100 {
            0 => self.state.set_p((i % 100) as f64 / 100.0),
            1 => self.state.set_p(1.0 - (i % 100) as f64 / 100.0),
            2 if i.is_multiple_of(100) => {
                let q = interval.len() / 4;
                return Some(TimeRange::new(interval.start + q, interval.end - q));
            }
            3 if i.is_multiple_of(100) => {
                let h = interval.len() / 2;
                return Some(TimeRange::new(
                    (interval.start - h).max(whole.start),
                    (interval.end + h).min(whole.end),
                ));
            }
            _ => {}
        }
        None
    }
    fn load(&mut self, cx: &LoadContext<'_>) {
        self.live_trace = !cx.meta.info.finished;
        self.state.load(
            cx.trace,
            cx.interval,
            cx.filter.clone(),
            cx.view_filter.clone(),
            self.live_trace,
        );
    }
    fn extend(&mut self, cx: &LoadContext<'_>) {
        self.state.extend(cx.interval.end);
    }
    fn poll(&mut self) {
        self.state.poll();
    }
    fn busy(&self) -> bool {
        self.state.busy()
    }
    fn catching_up(&self, end: Timestamp) -> bool {
        self.state.live.catching_up(end)
    }
    fn progress(&self) -> Option<socscope_analysis::loader::Progress> {
        self.state.progress()
    }
    fn stop(&mut self) {
        self.state.stop();
    }
    fn summary(&self) -> Option<String> {
        let o = self.state.overview.as_ref()?;
        Some(format!(
            "{} of {} slices, {} producers, {} types",
            o.micro.grid.slices,
            o.slices_total,
            o.micro.producers.len(),
            o.micro.types.len()
        ))
    }
}
