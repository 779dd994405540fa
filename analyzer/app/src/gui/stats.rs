//! The statistics pie and its table (RT-460 §3.3): operator choice, small-slice aggregation with its
//! tooltip, exclude / restore, create / undo groups with a name and colour.

use super::theme::ColourEdit;
use eframe::egui;
use std::collections::BTreeSet;
use std::f32::consts::TAU;

use egui::{Color32, Sense, Stroke, Ui, Vec2};
use socscope_analysis::live::{Growth, LiveLoad};
use socscope_analysis::loader::{self, LoadRequest, Progress, chunk_size};
use socscope_analysis::stats::{
    Operator, PieSettings, Slice, SliceKind, StatsConsumer, StatsSnapshot,
};
use socscope_tracedb::units;
use socscope_tracedb::{Filter, TimeRange};

use super::readers::TraceNames;
use super::views::{DrawContext, GroupView, LoadContext, ViewAction};
use socscope_tracedb::Timestamp;

fn spawn(
    trace: std::path::PathBuf,
    range: TimeRange,
    filter: Filter,
) -> loader::LoaderHandle<StatsSnapshot> {
    loader::spawn(
        LoadRequest {
            trace,
            range,
            filter,
            chunk_events: chunk_size::STATISTICS,
        },
        StatsConsumer::new(range),
    )
}

/// A change the table's buttons ask for, applied after drawing (the table borrows the view).
type Action = Box<dyn FnOnce(&mut StatsView)>;

pub struct StatsView {
    pub live: LiveLoad<StatsSnapshot>,
    pub stats: Option<StatsSnapshot>,
    pub settings: PieSettings,
    selected: BTreeSet<u32>,
    group_name: String,
    group_colour: Color32,
    /// "Save groups" was clicked: the open trace saves them as a grouping result.
    pub save_groups: bool,
}

impl StatsView {
    pub fn new(range: TimeRange) -> Self {
        Self {
            live: LiveLoad::new(range, Growth::RELOAD_EACH_SECOND),
            stats: None,
            settings: PieSettings::default(),
            selected: BTreeSet::new(),
            group_name: "group".into(),
            group_colour: Color32::from_rgb(220, 40, 40),
            save_groups: false,
        }
    }

    pub fn load(&mut self, trace: &std::path::Path, range: TimeRange, filter: Filter) {
        self.stats = None;
        let trace = trace.to_path_buf();
        self.live
            .load(range, |step| spawn(trace, step.range, filter));
    }

    pub fn extend(&mut self, trace: &std::path::Path, range: TimeRange, filter: Filter) {
        let trace = trace.to_path_buf();
        self.live
            .extend(range.end, |step| spawn(trace, step.range, filter));
    }

    pub fn busy(&self) -> bool {
        self.live.busy()
    }

    pub fn progress(&self) -> Option<Progress> {
        self.live.progress()
    }

    pub fn stop(&mut self) {
        self.live.stop();
    }

    pub fn poll(&mut self) {
        if let Some(s) = self.live.poll() {
            self.stats = Some(s);
        }
    }

    fn entity_name(&self, names: &TraceNames, id: u32) -> String {
        if self.settings.operator.per_syscall() {
            self.stats.as_ref().map_or_else(
                || format!("syscall {id}"),
                |s| s.name(self.settings.operator, id),
            )
        } else if self.settings.operator.by_producer() {
            names.tree.label(id)
        } else {
            names.type_name(id)
        }
    }

    fn entity_colour(&self, names: &TraceNames, id: u32) -> Color32 {
        if self.settings.operator.per_syscall() {
            // A syscall is coloured by its name, as a type of that name would be.
            names.colour_of_name(&self.entity_name(names, id))
        } else if self.settings.operator.by_producer() {
            names.producer_colour(id)
        } else {
            names.colour(id)
        }
    }

    fn value_text(&self, v: f64) -> String {
        if self.settings.operator.is_duration() {
            units::duration(v as i64)
        } else {
            format!("{v:.0}")
        }
    }

    /// Draws the view; returns a colour the user picked for a type or producer in the legend.
    fn draw(&mut self, ui: &mut Ui, names: &TraceNames) -> Option<ColourEdit> {
        ui.horizontal(|ui| self.settings_bar(ui));
        let mut group_name = std::mem::take(&mut self.group_name);
        let mut group_colour = self.group_colour;
        let Some(stats) = &self.stats else {
            self.group_name = group_name;
            ui.spinner();
            return None;
        };
        let mut colour_edit = None;
        let slices = self.settings.slices(stats);
        let mut action: Option<Action> = None;
        ui.horizontal_top(|ui| {
            self.pie(ui, names, &slices);
            // The table.
            ui.vertical(|ui| {
                egui::ScrollArea::vertical()
                    .max_height(ui.available_height() - 60.0)
                    .show(ui, |ui| {
                        self.slice_table(ui, names, &slices, &mut action, &mut colour_edit);
                    });
                ui.horizontal(|ui| {
                    self.selection_buttons(ui, &mut group_name, &mut group_colour, &mut action);
                });
                if !self.settings.excluded.is_empty() {
                    ui.horizontal_wrapped(|ui| self.excluded_list(ui, names, &mut action));
                }
            });
        });
        self.group_name = group_name;
        self.group_colour = group_colour;
        if let Some(a) = action {
            a(self);
        }
        colour_edit
    }

    /// The metric and the share below which slices are aggregated.
    fn settings_bar(&mut self, ui: &mut Ui) {
        let mut op = self.settings.operator;
        super::widgets::labelled_combo(ui, "Metric", op.label(), |ui| {
            for o in Operator::ALL {
                ui.selectable_value(&mut op, o, o.label());
            }
        });
        if op != self.settings.operator {
            self.settings.set_operator(op);
            self.selected.clear();
        }
        ui.label("Aggregate below");
        let mut pct = self.settings.threshold * 100.0;
        if ui
            .add(
                egui::DragValue::new(&mut pct)
                    .range(0.0..=50.0)
                    .suffix(" %")
                    .speed(0.1),
            )
            .changed()
        {
            self.settings.threshold = pct / 100.0;
        }
    }

    /// A slice's colour: its entity's, its group's, or the others'.
    fn slice_colour(&self, names: &TraceNames, k: &SliceKind) -> Color32 {
        match k {
            SliceKind::Entity(id) => self.entity_colour(names, *id),
            SliceKind::Group(g) => {
                let [r, gg, b] = self.settings.groups[*g].colour;
                Color32::from_rgb(r, gg, b)
            }
            SliceKind::Others(_) => {
                let [r, g, b] = socscope_analysis::palette::OTHERS;
                Color32::from_rgb(r, g, b)
            }
        }
    }

    /// A slice's name.
    fn slice_label(&self, names: &TraceNames, k: &SliceKind) -> String {
        match k {
            SliceKind::Entity(id) => self.entity_name(names, *id),
            SliceKind::Group(g) => self.settings.groups[*g].name.clone(),
            SliceKind::Others(l) => format!("others ({})", l.len()),
        }
    }

    /// The pie, with the hovered slice's value (and the entities of "others") in a tooltip.
    fn pie(&self, ui: &mut Ui, names: &TraceNames, slices: &[Slice]) {
        let side = (ui.available_height() - 10.0)
            .min(ui.available_width() * 0.5)
            .clamp(120.0, 420.0);
        let (rect, resp) = ui.allocate_exact_size(Vec2::splat(side), Sense::hover());
        let p = ui.painter_at(rect);
        let (c, r) = (rect.center(), side * 0.45);
        let mut a0 = -TAU / 4.0;
        let hover = resp.hover_pos();
        let mut hovered = None;
        for (i, s) in slices.iter().enumerate() {
            let a1 = a0 + TAU * s.share as f32;
            let steps = ((a1 - a0) / 0.05).ceil().max(1.0) as usize;
            let mut pts = vec![c];
            for k in 0..=steps {
                let a = a0 + (a1 - a0) * k as f32 / steps as f32;
                pts.push(c + Vec2::angled(a) * r);
            }
            // Fan of triangles: convex per slice only below half a turn, so draw as a mesh.
            let mut mesh = egui::Mesh::default();
            let col = self.slice_colour(names, &s.kind);
            for k in 1..pts.len() - 1 {
                let base = mesh.vertices.len() as u32;
                mesh.colored_vertex(pts[0], col);
                mesh.colored_vertex(pts[k], col);
                mesh.colored_vertex(pts[k + 1], col);
                mesh.add_triangle(base, base + 1, base + 2);
            }
            p.add(mesh);
            if let Some(h) = hover {
                let d = h - c;
                let mut ang = d.angle();
                while ang < -TAU / 4.0 {
                    ang += TAU;
                }
                if d.length() <= r && ang >= a0 && ang < a1 {
                    hovered = Some(i);
                }
            }
            a0 = a1;
        }
        p.circle_stroke(c, r, Stroke::new(1.0, ui.visuals().weak_text_color()));
        if let Some(i) = hovered {
            let s = &slices[i];
            let mut text = format!(
                "{}: {} ({:.1} %)",
                self.slice_label(names, &s.kind),
                self.value_text(s.value),
                s.share * 100.0
            );
            if let SliceKind::Others(list) = &s.kind {
                for (id, v) in list.iter().take(30) {
                    text.push_str(&format!(
                        "\n  {}: {}",
                        self.entity_name(names, *id),
                        self.value_text(*v)
                    ));
                }
            }
            resp.on_hover_text_at_pointer(text);
        }
    }

    /// The slices' table: select, ungroup, colour, name, value and share of each, and the entities
    /// of "others" under it.
    fn slice_table(
        &self,
        ui: &mut Ui,
        names: &TraceNames,
        slices: &[Slice],
        action: &mut Option<Action>,
        colour_edit: &mut Option<ColourEdit>,
    ) {
        egui::Grid::new("stats-table")
            .striped(true)
            .num_columns(4)
            .show(ui, |ui| {
                ui.strong("");
                ui.strong(if self.settings.operator.per_syscall() {
                    "Syscall"
                } else if self.settings.operator.by_producer() {
                    "Producer"
                } else {
                    "Type"
                });
                ui.strong("Value");
                ui.strong("%");
                ui.end_row();
                for s in slices {
                    let col = self.slice_colour(names, &s.kind);
                    match &s.kind {
                        SliceKind::Entity(id) => {
                            let mut on = self.selected.contains(id);
                            if ui.checkbox(&mut on, "select").changed() {
                                let id = *id;
                                *action = Some(Box::new(move |v: &mut Self| {
                                    if on {
                                        v.selected.insert(id);
                                    } else {
                                        v.selected.remove(&id);
                                    }
                                }));
                            }
                        }
                        SliceKind::Group(g) => {
                            if ui.small_button("ungroup").clicked() {
                                let g = *g;
                                *action = Some(Box::new(move |v: &mut Self| v.settings.ungroup(g)));
                            }
                        }
                        SliceKind::Others(_) => {
                            ui.label("");
                        }
                    }
                    if let SliceKind::Entity(id) = &s.kind {
                        ui.horizontal(|ui| {
                            let mut c = col;
                            let name = self.entity_name(names, *id);
                            if ui
                                .color_edit_button_srgba(&mut c)
                                .on_hover_text("Colour (saved for this user)")
                                .changed()
                            {
                                *colour_edit = Some(if self.settings.operator.by_producer() {
                                    ColourEdit::Producer(name.clone(), c)
                                } else {
                                    ColourEdit::Type(name.clone(), c)
                                });
                            }
                            ui.colored_label(col, self.slice_label(names, &s.kind));
                        });
                    } else {
                        ui.colored_label(col, self.slice_label(names, &s.kind));
                    }
                    ui.label(self.value_text(s.value));
                    ui.label(format!("{:.2}", s.share * 100.0));
                    ui.end_row();
                    if let SliceKind::Others(list) = &s.kind {
                        for (id, v) in list {
                            let mut on = self.selected.contains(id);
                            if ui.checkbox(&mut on, "select").changed() {
                                let id = *id;
                                *action = Some(Box::new(move |v: &mut Self| {
                                    if on {
                                        v.selected.insert(id);
                                    } else {
                                        v.selected.remove(&id);
                                    }
                                }));
                            }
                            ui.label(format!("    {}", self.entity_name(names, *id)));
                            ui.label(self.value_text(*v));
                            ui.label(format!(
                                "{:.2}",
                                v / slices.iter().map(|x| x.value).sum::<f64>() * 100.0
                            ));
                            ui.end_row();
                        }
                    }
                }
            });
    }

    /// Exclude, group (with a name and a colour) the selected slices; save the groups.
    fn selection_buttons(
        &self,
        ui: &mut Ui,
        group_name: &mut String,
        group_colour: &mut Color32,
        action: &mut Option<Action>,
    ) {
        let n = self.selected.len();
        if ui
            .add_enabled(n > 0, egui::Button::new(format!("Exclude {n}")))
            .clicked()
        {
            *action = Some(Box::new(|v: &mut Self| {
                for id in std::mem::take(&mut v.selected) {
                    v.settings.exclude(id);
                }
            }));
        }
        ui.add(
            egui::TextEdit::singleline(group_name)
                .hint_text("group name")
                .desired_width(80.0),
        );
        ui.color_edit_button_srgba(group_colour);
        if ui
            .add_enabled(n >= 2, egui::Button::new(format!("Group {n}")))
            .clicked()
        {
            let (name, c) = (group_name.clone(), *group_colour);
            *action = Some(Box::new(move |v: &mut Self| {
                let members = std::mem::take(&mut v.selected);
                v.settings.group(&name, [c.r(), c.g(), c.b()], members);
            }));
        }
        let savable = !self.settings.groups.is_empty() && !self.settings.operator.per_syscall();
        if ui
            .add_enabled(savable, egui::Button::new("Save groups"))
            .on_hover_text("Keep the groups in the trace (Results…)")
            .on_disabled_hover_text(
                "Group slices first (syscall slices are names and cannot be saved)",
            )
            .clicked()
        {
            *action = Some(Box::new(|v: &mut Self| v.save_groups = true));
        }
    }

    /// The excluded entities, each with a button that restores it.
    fn excluded_list(&self, ui: &mut Ui, names: &TraceNames, action: &mut Option<Action>) {
        ui.label("Excluded:");
        for id in self.settings.excluded.clone() {
            if ui
                .small_button(format!("restore {}", self.entity_name(names, id)))
                .on_hover_text("Restore")
                .clicked()
            {
                *action = Some(Box::new(move |v: &mut Self| v.settings.restore(id)));
            }
        }
    }
}

impl GroupView for StatsView {
    fn new(interval: TimeRange, _names: &TraceNames) -> Self {
        StatsView::new(interval)
    }
    fn ui(&mut self, ui: &mut Ui, cx: &DrawContext<'_>) -> Option<ViewAction> {
        self.draw(ui, cx.names).map(ViewAction::Colour)
    }
    fn load(&mut self, cx: &LoadContext<'_>) {
        StatsView::load(self, cx.trace, cx.interval, cx.filter.clone());
    }
    fn extend(&mut self, cx: &LoadContext<'_>) {
        StatsView::extend(self, cx.trace, cx.interval, cx.filter.clone());
    }
    fn poll(&mut self) {
        StatsView::poll(self);
    }
    fn busy(&self) -> bool {
        StatsView::busy(self)
    }
    fn catching_up(&self, end: Timestamp) -> bool {
        self.live.catching_up(end)
    }
    fn progress(&self) -> Option<Progress> {
        StatsView::progress(self)
    }
    fn stop(&mut self) {
        StatsView::stop(self);
    }
}
