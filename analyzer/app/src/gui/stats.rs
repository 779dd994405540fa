//! The statistics pie and its table (RT-460 §3.3): operator choice, small-slice aggregation with its
//! tooltip, exclude / restore, create / undo groups with a name and colour.

use super::theme::ColourEdit;
use eframe::egui;
use std::collections::BTreeSet;
use std::f32::consts::TAU;

use egui::{Color32, FontId, Pos2, Rect, Sense, Stroke, Ui, Vec2};
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

    /// The pie, each slice named outside it with its share (`running 26.3 %`) on a leader line,
    /// and the hovered slice's value (and the entities of "others") in a tooltip.
    fn pie(&self, ui: &mut Ui, names: &TraceNames, slices: &[Slice]) {
        let font = FontId::proportional(12.5);
        let text_colour = ui.visuals().text_color();
        let labels: Vec<(String, f32)> = slices
            .iter()
            .map(|s| {
                let text = slice_share_label(&self.slice_label(names, &s.kind), s.share);
                let w = ui
                    .painter()
                    .layout_no_wrap(text.clone(), font.clone(), text_colour)
                    .size()
                    .x;
                (text, w)
            })
            .collect();
        // Room for the widest label on both sides; the table beside keeps at least 360 px.
        let label_w = labels.iter().map(|l| l.1).fold(0.0f32, f32::max).min(220.0) + LEADER;
        let height = (ui.available_height() - 10.0).clamp(160.0, 460.0);
        let width =
            (ui.available_width() - 360.0).clamp(2.0 * label_w + 120.0, 2.0 * label_w + 440.0);
        let (rect, resp) = ui.allocate_exact_size(Vec2::new(width, height), Sense::hover());
        let p = ui.painter_at(rect);
        let r = ((width - 2.0 * label_w) * 0.5)
            .min(height * 0.5 - 14.0)
            .max(50.0)
            - 4.0;
        let c = rect.center();
        let mut a0 = -TAU / 4.0;
        let hover = resp.hover_pos();
        let mut hovered = None;
        let mut mids = Vec::with_capacity(slices.len());
        for (i, s) in slices.iter().enumerate() {
            let a1 = a0 + TAU * s.share as f32;
            mids.push((a0 + a1) * 0.5);
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
        let wanted: Vec<PieLabel> = labels
            .iter()
            .zip(&mids)
            .zip(slices)
            .map(|(((text, w), &mid), s)| PieLabel {
                text: text.clone(),
                width: *w,
                mid,
                share: s.share,
            })
            .collect();
        let leader = Stroke::new(1.0, ui.visuals().weak_text_color());
        // Labels in a child of the pie's rectangle: placing them moves no cursor of the row.
        let mut label_ui = ui.new_child(egui::UiBuilder::new().max_rect(rect));
        for placed in layout_pie_labels(&wanted, c, r, rect, LINE_H)
            .into_iter()
            .flatten()
        {
            p.line_segment([placed.on_pie, placed.elbow], leader);
            p.line_segment([placed.elbow, placed.end], leader);
            // A widget, not painted text: a screen reader (and the GUI tests) read it.
            label_ui.put(
                placed.rect,
                egui::Label::new(
                    egui::RichText::new(placed.text)
                        .font(font.clone())
                        .color(text_colour),
                )
                .selectable(false),
            );
        }
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

/// Height of one pie label's line.
const LINE_H: f32 = 16.0;
/// Horizontal room between the pie and its labels, for the leader lines.
const LEADER: f32 = 26.0;

/// A slice's label: its name and share, `running 26.3 %`.
fn slice_share_label(name: &str, share: f64) -> String {
    format!("{name} {:.1} %", share * 100.0)
}

/// A pie label to place: its text and width, the angle of its slice's middle, the slice's share.
struct PieLabel {
    text: String,
    width: f32,
    mid: f32,
    share: f64,
}

/// Where a pie label goes, with its leader line (on the pie's edge, bent once, to the text).
#[derive(Debug, PartialEq)]
struct PlacedLabel {
    text: String,
    rect: Rect,
    on_pie: Pos2,
    elbow: Pos2,
    end: Pos2,
}

/// Places the labels of a pie at `c` of radius `r` in `area`: each on the side of its slice's
/// middle (right or left), as near its slice's height as the others allow, `line_h` apart so none
/// overlaps another, inside `area`. When a side holds more labels than lines, its smallest slices
/// go unlabelled (`None`): their share stays in the table and the tooltip.
fn layout_pie_labels(
    labels: &[PieLabel],
    c: Pos2,
    r: f32,
    area: Rect,
    line_h: f32,
) -> Vec<Option<PlacedLabel>> {
    let mut out: Vec<Option<PlacedLabel>> = labels.iter().map(|_| None).collect();
    let lines = ((area.height() / line_h).floor() as usize).max(1);
    for right in [true, false] {
        let mut side: Vec<usize> = (0..labels.len())
            .filter(|&i| (labels[i].mid.cos() >= 0.0) == right)
            .collect();
        // The largest slices keep their labels when there are more than lines.
        side.sort_by(|&a, &b| labels[b].share.total_cmp(&labels[a].share));
        side.truncate(lines);
        let wanted_y = |i: usize| c.y + labels[i].mid.sin() * (r + 12.0);
        side.sort_by(|&a, &b| wanted_y(a).total_cmp(&wanted_y(b)));
        // Centres of the lines: top down, each at least a line below the previous, then bottom up
        // so the last fits in the area (there are at most `lines` of them, so the first still does).
        let top = area.top() + line_h * 0.5;
        let bottom = area.bottom() - line_h * 0.5;
        let mut ys: Vec<f32> = Vec::with_capacity(side.len());
        for &i in &side {
            let y = wanted_y(i).max(top);
            ys.push(ys.last().map_or(y, |&prev: &f32| y.max(prev + line_h)));
        }
        let mut next = bottom + line_h;
        for y in ys.iter_mut().rev() {
            *y = y.min(next - line_h);
            next = *y;
        }
        for (&i, y) in side.iter().zip(ys) {
            let l = &labels[i];
            let dir = Vec2::angled(l.mid);
            let on_pie = c + dir * r;
            let elbow = c + dir * (r + 8.0);
            let x_edge = if right {
                c.x + r + LEADER
            } else {
                c.x - r - LEADER
            };
            let width = l.width.min(area.width() * 0.5);
            let rect = if right {
                Rect::from_min_size(
                    Pos2::new(x_edge, y - line_h * 0.5),
                    Vec2::new(width, line_h),
                )
            } else {
                Rect::from_min_size(
                    Pos2::new(x_edge - width, y - line_h * 0.5),
                    Vec2::new(width, line_h),
                )
            };
            let end = Pos2::new(if right { x_edge - 3.0 } else { x_edge + 3.0 }, y);
            out[i] = Some(PlacedLabel {
                text: l.text.clone(),
                rect,
                on_pie,
                elbow,
                end,
            });
        }
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    fn label(text: &str, share: f64, start: f64) -> PieLabel {
        // The slice's middle, as the pie draws it: from the top, clockwise on screen.
        let mid = -TAU / 4.0 + TAU * (start + share / 2.0) as f32;
        PieLabel {
            text: text.into(),
            width: 7.0 * text.len() as f32,
            mid,
            share,
        }
    }

    fn pie_of(shares: &[f64]) -> Vec<PieLabel> {
        let mut start = 0.0;
        shares
            .iter()
            .enumerate()
            .map(|(i, &s)| {
                let l = label(&slice_share_label(&format!("type{i}"), s), s, start);
                start += s;
                l
            })
            .collect()
    }

    #[test]
    fn a_label_says_the_slice_and_its_share() {
        assert_eq!(slice_share_label("running", 0.26249), "running 26.2 %");
        assert_eq!(slice_share_label("others (3)", 0.0059), "others (3) 0.6 %");
    }

    #[test]
    fn labels_sit_outside_the_pie_on_their_slices_side_and_never_overlap() {
        let area = Rect::from_min_size(Pos2::new(0.0, 0.0), Vec2::new(700.0, 400.0));
        let (c, r) = (area.center(), 150.0);
        // Many thin slices at the end of the turn crowd the top left, as the small types do.
        let mut shares = vec![0.26, 0.15, 0.15, 0.14, 0.13, 0.13, 0.02];
        shares.extend([
            0.004, 0.004, 0.002, 0.002, 0.001, 0.001, 0.001, 0.001, 0.001,
        ]);
        let labels = pie_of(&shares);
        let placed: Vec<PlacedLabel> = layout_pie_labels(&labels, c, r, area, 16.0)
            .into_iter()
            .flatten()
            .collect();
        assert_eq!(placed.len(), labels.len(), "room for every label here");
        for (i, a) in placed.iter().enumerate() {
            assert!(area.contains_rect(a.rect), "{} leaves the area", a.text);
            // Outside the circle: the label's nearest edge is beyond the radius.
            assert!(
                a.rect.left() >= c.x + r || a.rect.right() <= c.x - r,
                "{} over the pie",
                a.text
            );
            for b in &placed[i + 1..] {
                assert!(
                    !a.rect.shrink(0.5).intersects(b.rect.shrink(0.5)),
                    "{} overlaps {}",
                    a.text,
                    b.text
                );
            }
        }
        // The largest slice starts at the top and turns right: its label is on the right.
        let first = placed
            .iter()
            .find(|p| p.text.starts_with("type0 "))
            .unwrap();
        assert!(first.rect.left() > c.x);
    }

    #[test]
    fn a_crowded_side_drops_the_labels_of_its_smallest_slices() {
        let area = Rect::from_min_size(Pos2::new(0.0, 0.0), Vec2::new(500.0, 100.0));
        // Six lines fit; eight tiny slices after a half on the right sit on the left.
        let mut shares = vec![0.5];
        shares.extend([0.1, 0.09, 0.08, 0.07, 0.06, 0.05, 0.03, 0.02]);
        let labels = pie_of(&shares);
        let placed = layout_pie_labels(&labels, area.center(), 40.0, area, 16.0);
        let left: Vec<&PlacedLabel> = placed
            .iter()
            .flatten()
            .filter(|p| p.rect.right() < area.center().x)
            .collect();
        assert_eq!(left.len(), 6);
        assert!(
            placed[8].is_none() && placed[7].is_none(),
            "the two smallest go"
        );
        assert!(placed[1].is_some());
    }
}
