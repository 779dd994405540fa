//! The TraceViz view (TraceViz, IHM'16, §4-5): the actor tree on the left, one histogram row per visible
//! actor or group at pixel resolution, the stacked outline on top with its Slick Graph shading, wheel
//! zoom and drag pan in step on both, and the groups of similar actors proposed by clustering. A shell
//! over `socscope_analysis::actors` and `socscope_analysis::traceviz`.

use eframe::egui;

use egui::{Align2, Color32, FontId, Pos2, Rect, Sense, Stroke, Ui};
use socscope_analysis::actors::{
    Actor, ActorLayout, REFINE_AFTER, Row, TimelineState, op_name, similar_groups,
};
use socscope_analysis::traceviz::{self, GroupOp, Statistic};
use socscope_tracedb::units::{self, TimeAxis};
use socscope_tracedb::{ProducerId, TimeRange, Timestamp};

use super::readers::TraceNames;
use super::views::{DrawContext, GroupView, LoadContext, ViewAction};

const TREE_W: f32 = 230.0;
const TREE_ROW_H: f32 = 18.0;

/// A change a click in the tree asks for, applied after drawing (the rows borrow the view).
type TreeAction = Box<dyn FnOnce(&mut TraceVizView)>;

pub struct TraceVizView {
    pub timeline: TimelineState,
    pub tree: ActorLayout,
    /// Slick Graph σ, in pixels.
    pub sigma: f64,
    /// How strongly the Slick Graph luminance shades the band (0: not at all).
    pub luminance: f32,
    /// The row under the pointer (its label and outline layer are highlighted).
    pub hovered: Option<Row>,
    group_name: String,
    group_op: GroupOp,
    pub similar_threshold: f64,
    /// Groups proposed by "group similar actors", waiting for the user.
    pub proposals: Vec<Vec<ProducerId>>,
    renaming: Option<(u32, String)>,
    dragging: Option<usize>,
    /// The first tree row on screen.
    row_offset: usize,
    /// The outline's and the rows' images as last drawn, and what they show.
    images: Option<(ImagesKey, egui::TextureHandle, egui::TextureHandle)>,
    /// How many times the images were drawn (uploaded) so far.
    pub image_builds: u64,
    /// "Save groups" was clicked: the open trace saves the groups as a grouping result this frame.
    pub save_groups: bool,
    /// The description the user typed for the next save (empty: the groups are listed).
    pub save_description: String,
    /// Groups of a saved result, applied once the tree knows the actors.
    pub pending_groups: Option<Vec<(String, GroupOp, Vec<ProducerId>)>>,
    /// Bands of an opened annotation result, drawn over the outline and the rows.
    pub bands: Vec<socscope_analysis::results::Band>,
}

/// What the outline's and the rows' images show: they are drawn again when any of this changes.
#[derive(PartialEq)]
struct ImagesKey {
    /// Of the timeline.
    revision: u64,
    bins: usize,
    /// Outline, Slick band, rows, one row (pixels).
    heights: [usize; 4],
    /// The outline's layers, bottom up, with their colours.
    layers: Vec<(Row, Color32)>,
    /// The rows on screen, top down, with their colours.
    shown: Vec<(Row, Color32)>,
    groups: Vec<(String, GroupOp, Vec<ProducerId>)>,
    sigma: u64,
    luminance: u32,
    background: Color32,
}

impl TraceVizView {
    pub fn new(range: TimeRange) -> Self {
        Self {
            timeline: TimelineState::new(range),
            tree: ActorLayout::default(),
            sigma: 3.0,
            luminance: 0.8,
            hovered: None,
            group_name: "group".into(),
            group_op: GroupOp::Max,
            similar_threshold: 0.3,
            proposals: Vec::new(),
            renaming: None,
            dragging: None,
            row_offset: 0,
            images: None,
            image_builds: 0,
            save_groups: false,
            save_description: String::new(),
            pending_groups: None,
            bands: Vec::new(),
        }
    }

    /// What saved groups are called: the user's text, else the groups listed.
    pub fn describe_groups(&self) -> String {
        let user = self.save_description.trim();
        if !user.is_empty() {
            return user.to_owned();
        }
        let groups: Vec<String> = self
            .tree
            .group_list()
            .iter()
            .map(|(n, op, m)| format!("{n} ({} of {})", op_name(*op), m.len()))
            .collect();
        format!("TraceViz groups: {}", groups.join(", "))
    }

    fn sync_tree(&mut self, names: &TraceNames) {
        let actors: Vec<Actor> = names
            .tree
            .nodes()
            .iter()
            .map(|n| Actor {
                id: n.id,
                label: n.label.clone(),
                depth: n.depth,
            })
            .collect();
        if self.tree.actors().is_empty() {
            self.tree = ActorLayout::new(actors);
        } else {
            self.tree.add_actors(&actors);
        }
    }

    fn row_colour(&self, names: &TraceNames, row: Row) -> Color32 {
        match row {
            Row::Actor(id) => names.producer_colour(id),
            Row::Group(g) => {
                let [r, gg, b] = socscope_analysis::palette::colour(&format!("actor group {g}"));
                Color32::from_rgb(r, gg, b)
            }
        }
    }

    /// Proposes groups of actors whose histograms are alike (see `socscope_analysis::actors`).
    pub fn propose_similar(&mut self) {
        let Some(t) = &self.timeline.timeline else {
            return;
        };
        let actors: Vec<(ProducerId, Vec<f64>)> = self
            .tree
            .order()
            .iter()
            .filter_map(|r| match r {
                Row::Actor(id) => Some((*id, self.tree.values(*r, t))),
                Row::Group(_) => None,
            })
            .filter(|(_, v)| v.iter().any(|x| *x != 0.0))
            .collect();
        let refs: Vec<(ProducerId, &[f64])> =
            actors.iter().map(|(id, v)| (*id, v.as_slice())).collect();
        self.proposals = similar_groups(&refs, self.similar_threshold);
    }

    fn toolbar(&mut self, ui: &mut Ui) {
        ui.horizontal_wrapped(|ui| {
            let mut st = self.timeline.statistic;
            super::widgets::labelled_combo(ui, "Statistic", statistic_label(st), |ui| {
                    for s in [Statistic::Density, Statistic::Activity, Statistic::Delay] {
                        ui.selectable_value(&mut st, s, statistic_label(s));
                    }
                });
            if st != self.timeline.statistic {
                self.timeline.statistic = st;
                self.timeline.reload();
            }
            // Each name stays on the line of its control when the toolbar wraps.
            ui.horizontal(|ui| {
                let l = ui.label("Slick sigma");
                ui.add(egui::Slider::new(&mut self.sigma, 0.0..=20.0).suffix(" px"))
                    .labelled_by(l.id);
            });
            ui.horizontal(|ui| {
                let l = ui.label("Luminance");
                ui.add(egui::Slider::new(&mut self.luminance, 0.0..=1.0))
                    .labelled_by(l.id);
            });
            ui.separator();
            ui.add(
                egui::TextEdit::singleline(&mut self.group_name)
                    .hint_text("group name")
                    .desired_width(80.0),
            );
            super::widgets::labelled_combo(ui, "Operator", op_name(self.group_op), |ui| {
                    for op in [GroupOp::Max, GroupOp::Min, GroupOp::Average, GroupOp::Median] {
                        ui.selectable_value(&mut self.group_op, op, op_name(op));
                    }
                });
            if ui
                .button("Group selected")
                .on_hover_text("One row for the selected actors (shift/ctrl-click to select several), aggregated per pixel")
                .clicked()
            {
                let name = if self.group_name.trim().is_empty() {
                    "group".to_string()
                } else {
                    self.group_name.trim().to_string()
                };
                self.tree.group_selected(&name, self.group_op);
            }
            ui.separator();
            if ui
                .button("Group similar actors")
                .on_hover_text(
                    "Cluster the actors by the shape of their histograms (total variation distance of their \
                     distributions over time, average linkage) and propose the groups",
                )
                .clicked()
            {
                self.propose_similar();
            }
            ui.horizontal(|ui| {
                let l = ui.label("distance ≤");
                ui.add(
                    egui::DragValue::new(&mut self.similar_threshold)
                        .range(0.0..=1.0)
                        .speed(0.01),
                )
                .labelled_by(l.id)
                .on_hover_text("Actors closer than this (0: same shape, 1: disjoint) are grouped");
            });
            ui.separator();
            ui.add(
                egui::TextEdit::singleline(&mut self.save_description)
                    .hint_text("description (optional)")
                    .desired_width(130.0),
            );
            if ui
                .add_enabled(!self.tree.groups.is_empty(), egui::Button::new("Save groups"))
                .on_hover_text("Keep the groups in the trace as a grouping (Results…)")
                .on_disabled_hover_text("Group actors first")
                .clicked()
            {
                self.save_groups = true;
            }
        });
    }

    fn proposals_ui(&mut self, ui: &mut Ui) {
        if self.proposals.is_empty() {
            return;
        }
        let mut open = true;
        let mut take: Option<usize> = None;
        let mut all = false;
        egui::Window::new("Similar actors")
            .open(&mut open)
            .vscroll(true)
            .show(ui.ctx(), |ui| {
                ui.label(format!(
                    "{} groups of actors with alike histograms (distance <= {:.2}):",
                    self.proposals.len(),
                    self.similar_threshold
                ));
                for (i, g) in self.proposals.iter().enumerate() {
                    ui.horizontal(|ui| {
                        if ui.button("Create").clicked() {
                            take = Some(i);
                        }
                        let names: Vec<String> =
                            g.iter().map(|p| self.tree.label(Row::Actor(*p))).collect();
                        ui.label(format!("{} actors: {}", g.len(), names.join(", ")));
                    });
                }
                if ui.button("Create all").clicked() {
                    all = true;
                }
            });
        let make = |tree: &mut ActorLayout, k: usize, members: Vec<ProducerId>, op| {
            tree.make_group(&format!("similar {}", k + 1), members, op);
        };
        if all {
            for (k, g) in std::mem::take(&mut self.proposals).into_iter().enumerate() {
                make(&mut self.tree, k, g, self.group_op);
            }
        } else if let Some(i) = take {
            let g = self.proposals.remove(i);
            make(&mut self.tree, i, g, self.group_op);
        }
        if !open {
            self.proposals.clear();
        }
    }

    fn tree_ui(&mut self, ui: &mut Ui, rect: Rect, names: &TraceNames) {
        let p = ui.painter_at(rect);
        let visuals = ui.visuals().clone();
        let rows = self.tree.rows();
        // The tree lists every row (hidden ones greyed) from the scroll offset, each beside its
        // histogram.
        let mut y = rect.top();
        let mut actions: Vec<TreeAction> = Vec::new();
        let pointer = ui.input(|i| i.pointer.interact_pos());
        for (i, item) in rows.iter().enumerate().skip(self.row_offset) {
            if y + TREE_ROW_H > rect.bottom() + 1.0 {
                break;
            }
            let r = Rect::from_min_max(
                Pos2::new(rect.left(), y),
                Pos2::new(rect.right(), y + TREE_ROW_H),
            );
            let id = ui.scope_id().with(("tv-row", item.row));
            let resp = ui.interact(r, id, Sense::click_and_drag());
            let selected = self.tree.selected.contains(&item.row);
            let hovered = self.hovered == Some(item.row) || resp.hovered();
            if selected {
                p.rect_filled(r, 2.0, visuals.selection.bg_fill.gamma_multiply(0.6));
            } else if hovered {
                p.rect_filled(r, 2.0, visuals.widgets.hovered.bg_fill);
            }
            let eye = Rect::from_min_size(r.min, egui::vec2(18.0, TREE_ROW_H));
            let eye_resp = ui.interact(eye, id.with("eye"), Sense::click());
            // A filled dot in the row's colour when shown, a ring when hidden.
            if item.hidden {
                p.circle_stroke(
                    eye.center(),
                    4.0,
                    Stroke::new(1.0, visuals.weak_text_color()),
                );
            } else {
                p.circle_filled(eye.center(), 4.5, self.row_colour(names, item.row));
            }
            let eye_resp = eye_resp.on_hover_text("Hide or show this row");
            if eye_resp.clicked() {
                let row = item.row;
                actions.push(Box::new(move |s: &mut Self| s.tree.toggle_hidden(row)));
            }
            let indent = 20.0 + 12.0 * item.depth as f32;
            let colour = if item.hidden {
                visuals.weak_text_color()
            } else if hovered {
                visuals.strong_text_color()
            } else {
                visuals.text_color()
            };
            let label = if let Row::Group(_) = item.row {
                format!("group: {}", item.label)
            } else {
                item.label.clone()
            };
            p.text(
                Pos2::new(r.left() + indent, r.center().y),
                Align2::LEFT_CENTER,
                label,
                FontId::proportional(12.0),
                colour,
            );
            if resp.clicked() && !eye_resp.clicked() {
                let (shift, ctrl) =
                    ui.input(|i| (i.modifiers.shift, i.modifiers.command || i.modifiers.ctrl));
                let row = item.row;
                actions.push(Box::new(move |s: &mut Self| s.tree.click(row, shift, ctrl)));
            }
            if resp.drag_started() {
                self.dragging = Some(i);
            }
            if resp.hovered() {
                self.hovered = Some(item.row);
            }
            if let Row::Group(g) = item.row {
                resp.context_menu(|ui| {
                    if ui.button("Rename…").clicked() {
                        let name = self
                            .tree
                            .groups
                            .get(&g)
                            .map(|x| x.name.clone())
                            .unwrap_or_default();
                        self.renaming = Some((g, name));
                        ui.close();
                    }
                    for op in [
                        GroupOp::Max,
                        GroupOp::Min,
                        GroupOp::Average,
                        GroupOp::Median,
                    ] {
                        if ui.button(format!("Aggregate: {}", op_name(op))).clicked() {
                            if let Some(x) = self.tree.groups.get_mut(&g) {
                                x.op = op;
                            }
                            ui.close();
                        }
                    }
                    if ui.button("Delete group").clicked() {
                        self.tree.delete_group(g);
                        ui.close();
                    }
                });
            }
            y += TREE_ROW_H;
        }
        // Drag to reorder: a line where the row will go.
        if let Some(from) = self.dragging {
            let released = ui.input(|i| i.pointer.any_released());
            if let Some(pos) = pointer {
                let on_screen = ((pos.y - rect.top()) / TREE_ROW_H).round().max(0.0) as usize;
                let to = (on_screen + self.row_offset).min(rows.len());
                let ly = rect.top() + (to - self.row_offset) as f32 * TREE_ROW_H;
                p.line_segment(
                    [Pos2::new(rect.left(), ly), Pos2::new(rect.right(), ly)],
                    Stroke::new(2.0, visuals.selection.stroke.color),
                );
                if released {
                    let to = if to > from { to - 1 } else { to };
                    self.tree.move_row(from, to);
                    self.dragging = None;
                }
            }
            if released {
                self.dragging = None;
            }
        }
        for a in actions {
            a(self);
        }
        if let Some((g, mut name)) = self.renaming.take() {
            let mut open = true;
            let mut done = false;
            egui::Window::new("Rename group")
                .open(&mut open)
                .show(ui.ctx(), |ui| {
                    ui.text_edit_singleline(&mut name);
                    done = ui.button("OK").clicked();
                });
            if done {
                if let Some(x) = self.tree.groups.get_mut(&g) {
                    x.name = name;
                }
            } else if open {
                self.renaming = Some((g, name));
            }
        }
    }

    /// The outline (with its Slick Graph band below) and the rows' histograms, one pixel column
    /// per bin of `t`: each row scaled to its largest bin, the outline to its top.
    fn images(
        &self,
        t: &traceviz::Timeline,
        key: &ImagesKey,
        visible: &[Row],
    ) -> (egui::ColorImage, egui::ColorImage) {
        let w = key.bins.max(1);
        let [oh, band_h, rows_px_h, row_h] = key.heights;
        let bg = key.background;
        // Rows.
        let mut rows_img = egui::ColorImage::filled([w, rows_px_h], Color32::TRANSPARENT);
        let full_h = row_h.saturating_sub(2).max(1);
        for (k, &(row, colour)) in key.shown.iter().enumerate() {
            let vals = self.tree.values(row, t);
            let max = vals.iter().copied().fold(0.0, f64::max);
            if max <= 0.0 {
                continue;
            }
            let base = k * row_h + full_h;
            for (i, v) in vals.iter().enumerate().take(w) {
                if *v <= 0.0 {
                    continue;
                }
                let h = (((v / max) * full_h as f64).round() as usize).clamp(1, full_h);
                for y in base + 1 - h..=base.min(rows_px_h - 1) {
                    rows_img.pixels[y * w + i] = colour;
                }
            }
        }
        // Outline.
        let mut img = egui::ColorImage::filled([w, oh + 2 + band_h], Color32::TRANSPARENT);
        for px in &mut img.pixels[..w * oh] {
            *px = bg;
        }
        let mut acc = vec![0.0; w];
        let mut layers = Vec::with_capacity(visible.len());
        for &row in visible {
            for (a, v) in acc.iter_mut().zip(self.tree.values(row, t)) {
                *a += v;
            }
            layers.push(acc.clone());
        }
        let top = acc.iter().copied().fold(0.0, f64::max).max(1e-300);
        let level = |v: f64| (((v / top) * (oh - 2) as f64).round() as usize).min(oh - 1);
        let mut below = vec![0.0; w];
        for ((_, colour), layer) in key.layers.iter().zip(&layers) {
            for i in 0..w {
                let (a, b) = (level(below[i]), level(layer[i]));
                for l in a..b {
                    img.pixels[(oh - 1 - l) * w + i] = *colour;
                }
            }
            below.clone_from(layer);
        }
        let smoothed = traceviz::slick(&acc, self.sigma);
        let lum = traceviz::luminance(&acc, &smoothed);
        for (i, l) in lum.iter().enumerate().take(w) {
            let g = (l.clamp(0.0, 1.0) * 255.0) as u8;
            let c = lerp(bg, Color32::from_gray(g), self.luminance);
            for y in oh + 2..oh + 2 + band_h {
                img.pixels[y * w + i] = c;
            }
        }
        (img, rows_img)
    }

    /// Draws the view: its toolbar and proposals, then the outline and the rows beside the tree.
    fn draw(&mut self, ui: &mut Ui, names: &TraceNames, cursor: Option<Timestamp>) {
        self.sync_tree(names);
        if let Some(groups) = self.pending_groups.take() {
            self.tree.replace_groups(&groups);
        }
        self.toolbar(ui);
        self.proposals_ui(ui);
        let full = ui.available_rect_before_wrap();
        ui.allocate_rect(full, Sense::hover());
        let l = Layout::of(full);
        let all_rows = self.tree.rows();
        let fits = (l.rows.height() / TREE_ROW_H).max(1.0) as usize;
        self.scroll_tree(ui, l.tree, all_rows.len(), fits);
        let width = l.width();
        if width > 10 {
            self.timeline.set_width(width);
        }
        let visuals = ui.visuals().clone();
        let text = visuals.weak_text_color();
        let p = ui.painter_at(l.right);
        let Some(t) = self.timeline.timeline.clone() else {
            p.text(
                l.right.center(),
                Align2::CENTER_CENTER,
                if self.timeline.busy() {
                    "loading…"
                } else {
                    "no data"
                },
                FontId::proportional(14.0),
                text,
            );
            return;
        };
        let visible = self.tree.visible();
        let hover_pos = ui.input(|i| i.pointer.hover_pos());
        let outline = self.outline_layers(&t, &visible, width);
        // The rows on screen (their hover, value and highlight) and the images.
        let shown: Vec<Row> = all_rows
            .iter()
            .skip(self.row_offset)
            .take(fits)
            .map(|r| r.row)
            .collect();
        let rows_px_h = ((fits as f32 * TREE_ROW_H) as usize).max(1);
        let hovered_value =
            self.rows_on_screen(&p, &visuals, &l, &shown, &outline.columns, hover_pos);
        if all_rows.len() > fits {
            ui.painter().text(
                Pos2::new(full.left() + 4.0, l.rows.bottom() + 4.0),
                Align2::LEFT_TOP,
                format!(
                    "rows {}–{} of {} (wheel here to scroll)",
                    self.row_offset + 1,
                    (self.row_offset + fits).min(all_rows.len()),
                    all_rows.len()
                ),
                FontId::proportional(11.0),
                text,
            );
        }
        let heights = [
            (l.outline.height().max(2.0)) as usize,
            l.band.height().max(1.0) as usize,
            rows_px_h,
            TREE_ROW_H as usize,
        ];
        self.refresh_images(ui, names, &t, &visible, &shown, heights);
        self.paint_images(&p, &t, &l, width, rows_px_h);
        // Bands of an opened annotation result, over the outline and over the rows (the rows of
        // their producers tinted).
        if !self.bands.is_empty() {
            let view = self.timeline.view;
            super::bands::draw_bands(ui, l.outline, view, &self.bands, None);
            let ids: Vec<ProducerId> = all_rows
                .iter()
                .skip(self.row_offset)
                .take(fits)
                .map(|r| match r.row {
                    Row::Actor(id) => id,
                    // A group's row is no producer of a band.
                    Row::Group(_) => ProducerId::MAX,
                })
                .collect();
            super::bands::draw_bands(ui, l.rows, view, &self.bands, Some((&ids, TREE_ROW_H)));
        }
        self.paint_labels_and_axes(ui, &p, &l, &t, [visible.len(), all_rows.len()], text);
        self.paint_cursor(&p, &l, cursor);
        let resp = self.zoom_and_pan(ui, &l);
        let now_hovered = match hovered_value {
            Some(hovered) => Some(self.row_value_tip(&resp, &t, hovered)),
            None => self.outline_tip(&resp, &t, &visible, &l, &outline, hover_pos),
        };
        if hover_pos.is_some_and(|p| !l.tree.contains(p)) {
            self.hovered = now_hovered;
        }
        let mut child = ui.new_child(egui::UiBuilder::new().max_rect(l.tree));
        self.tree_ui(&mut child, l.tree, names);
    }

    /// The wheel over the tree scrolls the rows (over the charts it zooms).
    fn scroll_tree(&mut self, ui: &Ui, tree: Rect, rows: usize, fits: usize) {
        if let Some(pos) = ui.input(|i| i.pointer.hover_pos())
            && tree.contains(pos)
        {
            let scroll = ui.input(|i| i.smooth_scroll_delta.y);
            if scroll != 0.0 {
                let by = (-scroll / TREE_ROW_H).round() as isize;
                self.row_offset = (self.row_offset as isize + by).max(0) as usize;
            }
        }
        self.row_offset = self.row_offset.min(rows.saturating_sub(fits));
    }

    /// Outline layers: every shown row, in order, stacked; and each row's columns at `width` pixels.
    fn outline_layers(&self, t: &traceviz::Timeline, visible: &[Row], width: usize) -> Outline {
        let mut layers: Vec<(Row, Vec<f64>)> = Vec::new();
        let mut acc = vec![0.0; width];
        let mut columns: std::collections::HashMap<Row, Vec<f64>> =
            std::collections::HashMap::new();
        for &row in visible {
            let cols = self.timeline.columns(&self.tree.values(row, t), width);
            for (a, v) in acc.iter_mut().zip(&cols) {
                *a += v;
            }
            layers.push((row, acc.clone()));
            columns.insert(row, cols);
        }
        Outline {
            layers,
            acc,
            columns,
        }
    }

    /// Outlines the hovered row and finds the row, value and time under the pointer, if it is over
    /// the rows.
    fn rows_on_screen(
        &self,
        p: &egui::Painter,
        visuals: &egui::Visuals,
        l: &Layout,
        shown: &[Row],
        columns: &std::collections::HashMap<Row, Vec<f64>>,
        hover_pos: Option<Pos2>,
    ) -> Option<(Row, f64, Timestamp)> {
        let width = l.width();
        let row_h = TREE_ROW_H;
        let view = self.timeline.view;
        let mut hovered_value = None;
        for (k, &row) in shown.iter().enumerate() {
            let y0 = l.rows.top() + k as f32 * row_h;
            let y1 = y0 + row_h - 2.0;
            let Some(cols) = columns.get(&row) else {
                continue;
            };
            if self.hovered == Some(row) {
                p.rect_stroke(
                    Rect::from_min_max(Pos2::new(l.rows.left(), y0), Pos2::new(l.rows.right(), y1)),
                    0.0,
                    Stroke::new(1.0, visuals.strong_text_color()),
                    egui::StrokeKind::Outside,
                );
            }
            if let Some(pos) = hover_pos
                && pos.y >= y0
                && pos.y < y0 + row_h
                && l.rows.x_range().contains(pos.x)
            {
                let c = ((pos.x - l.rows.left()) as usize).min(width - 1);
                let at = view.start + ((c as f64 + 0.5) / width as f64 * view.len() as f64) as i64;
                hovered_value = Some((row, cols[c], at));
            }
        }
        hovered_value
    }

    /// The outline (layers stacked in row order, each in its row's colour, with the Slick Graph
    /// band: 003 eq. 1-2, grey level = luminance) and the rows' histograms are two images of the
    /// timeline's bins, drawn again only when the timeline or what they show changes. Zooming
    /// and panning only move the part of them on screen (the bins keep their heights until
    /// the view's own timeline comes, REFINE_AFTER later, at the view's pixels).
    fn refresh_images(
        &mut self,
        ui: &Ui,
        names: &TraceNames,
        t: &traceviz::Timeline,
        visible: &[Row],
        shown: &[Row],
        heights: [usize; 4],
    ) {
        let key = ImagesKey {
            revision: self.timeline.revision,
            bins: t.outline.len(),
            heights,
            layers: visible
                .iter()
                .map(|&r| {
                    let mut c = self.row_colour(names, r);
                    if self.hovered.is_some() && self.hovered != Some(r) {
                        c = c.gamma_multiply(0.35);
                    }
                    (r, c)
                })
                .collect(),
            shown: shown
                .iter()
                .map(|&r| (r, self.row_colour(names, r)))
                .collect(),
            groups: self.tree.group_list(),
            sigma: self.sigma.to_bits(),
            luminance: self.luminance.to_bits(),
            background: ui.visuals().extreme_bg_color,
        };
        if self.images.as_ref().is_none_or(|(k, _, _)| *k != key) {
            let (outline_img, rows_img) = self.images(t, &key, visible);
            let (o, r) = match self.images.take() {
                Some((_, mut o, mut r)) => {
                    o.set(outline_img, egui::TextureOptions::NEAREST);
                    r.set(rows_img, egui::TextureOptions::NEAREST);
                    (o, r)
                }
                None => (
                    ui.ctx().load_texture(
                        "traceviz-outline",
                        outline_img,
                        egui::TextureOptions::NEAREST,
                    ),
                    ui.ctx()
                        .load_texture("traceviz-rows", rows_img, egui::TextureOptions::NEAREST),
                ),
            };
            self.images = Some((key, o, r));
            self.image_builds += 1;
        }
    }

    /// The part of the view the timeline covers, from the images, where its bins are on screen.
    fn paint_images(
        &self,
        p: &egui::Painter,
        t: &traceviz::Timeline,
        l: &Layout,
        width: usize,
        rows_px_h: usize,
    ) {
        let view = self.timeline.view;
        let (ts, te) = (t.start.max(view.start), t.end.min(view.end));
        if let Some((_, outline_tex, rows_tex)) = &self.images
            && te > ts
            && t.end > t.start
        {
            let x = |v: i64| {
                l.outline.left()
                    + ((v - view.start) as f64 / view.len() as f64) as f32 * width as f32
            };
            let u = |v: i64| ((v - t.start) as f64 / (t.end - t.start) as f64) as f32;
            let (x0, x1, u0, u1) = (x(ts), x(te), u(ts), u(te));
            p.image(
                outline_tex.id(),
                Rect::from_min_max(
                    Pos2::new(x0, l.outline.top()),
                    Pos2::new(x1, l.band.bottom()),
                ),
                Rect::from_min_max(Pos2::new(u0, 0.0), Pos2::new(u1, 1.0)),
                Color32::WHITE,
            );
            p.image(
                rows_tex.id(),
                Rect::from_min_max(
                    Pos2::new(x0, l.rows.top()),
                    Pos2::new(x1, l.rows.top() + rows_px_h as f32),
                ),
                Rect::from_min_max(Pos2::new(u0, 0.0), Pos2::new(u1, 1.0)),
                Color32::WHITE,
            );
        }
    }

    /// The outline's scale is the images': the top of the timeline's outline of the shown rows.
    fn outline_top(&self, t: &traceviz::Timeline, visible: &[Row]) -> f64 {
        let mut sum = vec![0.0; t.outline.len()];
        for &r in visible {
            for (a, v) in sum.iter_mut().zip(self.tree.values(r, t)) {
                *a += v;
            }
        }
        sum.into_iter().fold(0.0, f64::max).max(1e-300)
    }

    /// The help beside the tree, the time axes under the outline and the rows (in the same units),
    /// and the outline's title, for `visible` rows of `all`.
    fn paint_labels_and_axes(
        &self,
        ui: &Ui,
        p: &egui::Painter,
        l: &Layout,
        t: &traceviz::Timeline,
        [visible, all]: [usize; 2],
        text: Color32,
    ) {
        let view = self.timeline.view;
        let width = l.width();
        ui.painter().text(
            Pos2::new(l.full.left() + 4.0, l.outline.top()),
            Align2::LEFT_TOP,
            format!(
                "Actors: {visible} rows shown of {all}\nclick, shift/ctrl-click: select\ndrag: reorder · dot: hide/show\nright-click a group: rename, operator, delete",
            ),
            FontId::proportional(11.0),
            text,
        );
        time_axis(p, view, l.outline.left(), l.outline.right(), l.axis, text);
        time_axis(
            p,
            view,
            l.rows.left(),
            l.rows.right(),
            l.rows.bottom() + 2.0,
            text,
        );
        p.text(
            Pos2::new(l.outline.left(), l.right.top() + 1.0),
            Align2::LEFT_TOP,
            format!(
                "outline of {visible} rows · {} per pixel · {} · wheel: zoom · drag: pan",
                units::duration_compact(view.len() as f64 / width as f64),
                statistic_label(t.statistic)
            ),
            FontId::proportional(12.0),
            text,
        );
    }

    /// The group's cursor across the outline and the rows.
    fn paint_cursor(&self, p: &egui::Painter, l: &Layout, cursor: Option<Timestamp>) {
        let view = self.timeline.view;
        if let Some(c) = cursor
            && view.contains(c)
        {
            let x = l.outline.left()
                + ((c - view.start) as f64 / view.len() as f64) as f32 * l.outline.width();
            for r in [l.outline, l.rows] {
                p.line_segment(
                    [Pos2::new(x, r.top()), Pos2::new(x, r.bottom())],
                    Stroke::new(1.5, super::theme::cursor()),
                );
            }
        }
    }

    /// Zoom and pan on both the outline and the rows, in step.
    fn zoom_and_pan(&mut self, ui: &Ui, l: &Layout) -> egui::Response {
        let interact = l.outline.union(l.rows);
        let resp = ui.interact(interact, ui.scope_id().with("tv-plot"), Sense::drag());
        if let Some(pos) = resp.hover_pos() {
            let scroll = ui.input(|i| i.smooth_scroll_delta.y);
            if scroll != 0.0 {
                self.timeline.zoom(
                    (-scroll as f64 / 200.0).exp(),
                    ((pos.x - l.outline.left()) / l.outline.width()) as f64,
                );
            }
        }
        if resp.dragged() {
            self.timeline
                .pan(-(resp.drag_delta().x / l.outline.width()) as f64);
        }
        if self.timeline.moving() {
            ui.ctx().request_repaint_after(REFINE_AFTER);
        }
        resp
    }

    /// Hover over the rows: the row's label, time and value; the row, to highlight.
    fn row_value_tip(
        &self,
        resp: &egui::Response,
        t: &traceviz::Timeline,
        (row, v, at): (Row, f64, Timestamp),
    ) -> Row {
        resp.clone().on_hover_text_at_pointer(format!(
            "{}\n{} s\n{}",
            self.tree.label(row),
            units::timestamp(at),
            value_text(t.statistic, v)
        ));
        row
    }

    /// Hover over the outline: the time, the outline's value and the layer under the pointer; that
    /// layer's row, to highlight.
    fn outline_tip(
        &self,
        resp: &egui::Response,
        t: &traceviz::Timeline,
        visible: &[Row],
        l: &Layout,
        outline: &Outline,
        hover_pos: Option<Pos2>,
    ) -> Option<Row> {
        let width = l.width();
        let pos = hover_pos.filter(|pos| l.outline.contains(*pos))?;
        let view = self.timeline.view;
        let top = self.outline_top(t, visible);
        let oy = |v: f64| l.outline.bottom() - (v / top) as f32 * (l.outline.height() - 2.0);
        let c = ((pos.x - l.outline.left()) as usize).min(width - 1);
        let v = outline.acc[c];
        let layers = &outline.layers;
        let layer = layers
            .iter()
            .zip(std::iter::once(0.0).chain(layers.iter().map(|l| l.1[c])))
            .find(|((_, l), b)| {
                let (yt, yb) = (oy(l[c]), oy(*b));
                pos.y >= yt && pos.y <= yb
            })
            .map(|((r, _), _)| *r);
        let at = view.start + ((c as f64 + 0.5) / width as f64 * view.len() as f64) as i64;
        let mut s = format!(
            "{} s\noutline: {}",
            units::timestamp(at),
            value_text(t.statistic, v)
        );
        if let Some(r) = layer {
            s.push_str(&format!("\n{}", self.tree.label(r)));
        }
        resp.clone().on_hover_text_at_pointer(s);
        layer
    }
}

/// Where TraceViz draws its parts in the space it has.
struct Layout {
    full: Rect,
    /// Everything right of the tree.
    right: Rect,
    outline: Rect,
    /// The Slick Graph band under the outline.
    band: Rect,
    /// The top of the time axis under the band.
    axis: f32,
    rows: Rect,
    /// The tree's rows are the histograms' rows, at the same heights.
    tree: Rect,
}

impl Layout {
    fn of(full: Rect) -> Self {
        let right = Rect::from_min_max(Pos2::new(full.left() + TREE_W + 8.0, full.top()), full.max);
        let outline_h = (right.height() * 0.28).clamp(60.0, 170.0);
        let outline = Rect::from_min_max(
            Pos2::new(right.left(), right.top() + 16.0),
            Pos2::new(right.right() - 8.0, right.top() + 16.0 + outline_h),
        );
        let band = Rect::from_min_max(
            Pos2::new(outline.left(), outline.bottom() + 2.0),
            Pos2::new(outline.right(), outline.bottom() + 12.0),
        );
        let axis = band.bottom() + 2.0;
        let rows = Rect::from_min_max(
            Pos2::new(outline.left(), axis + 22.0),
            Pos2::new(outline.right(), right.bottom() - 22.0),
        );
        let tree = Rect::from_min_max(
            Pos2::new(full.left(), rows.top()),
            Pos2::new(full.left() + TREE_W, rows.bottom()),
        );
        Self {
            full,
            right,
            outline,
            band,
            axis,
            rows,
            tree,
        }
    }

    /// The outline's width in pixels, which is also the rows' (one column per pixel).
    fn width(&self) -> usize {
        self.outline.width().max(1.0) as usize
    }
}

/// The outline's layers at the view's pixels: each shown row's columns, and their running sums.
struct Outline {
    /// Each row with the sum of its and the previous rows' columns (its layer's top).
    layers: Vec<(Row, Vec<f64>)>,
    /// The sum of every row's columns (the outline's top).
    acc: Vec<f64>,
    columns: std::collections::HashMap<Row, Vec<f64>>,
}

fn lerp(a: Color32, b: Color32, t: f32) -> Color32 {
    let m = |x: u8, y: u8| (f32::from(x) + (f32::from(y) - f32::from(x)) * t.clamp(0.0, 1.0)) as u8;
    Color32::from_rgb(m(a.r(), b.r()), m(a.g(), b.g()), m(a.b(), b.b()))
}

fn time_axis(p: &egui::Painter, view: TimeRange, left: f32, right: f32, y: f32, colour: Color32) {
    let w = right - left;
    let axis = TimeAxis::new(view.start, view.end, (w / 110.0).max(2.0) as usize);
    for t in axis.ticks(view.start, view.end) {
        let x = left + ((t - view.start) as f64 / view.len().max(1) as f64) as f32 * w;
        p.line_segment(
            [Pos2::new(x, y), Pos2::new(x, y + 4.0)],
            Stroke::new(1.0, colour),
        );
        let align = if x - left < 30.0 {
            Align2::LEFT_TOP
        } else if right - x < 30.0 {
            Align2::RIGHT_TOP
        } else {
            Align2::CENTER_TOP
        };
        p.text(
            Pos2::new(x, y + 5.0),
            align,
            axis.label(t),
            FontId::proportional(11.0),
            colour,
        );
    }
}

fn statistic_label(s: Statistic) -> &'static str {
    match s {
        Statistic::Density => "event density",
        Statistic::Activity => "activity time",
        Statistic::Delay => "delay between events",
    }
}

fn value_text(s: Statistic, v: f64) -> String {
    match s {
        Statistic::Density => format!("{v:.0} events in this pixel"),
        Statistic::Activity => format!("{} in states in this pixel", units::duration_compact(v)),
        Statistic::Delay => format!("longest delay {}", units::duration_compact(v)),
    }
}

impl GroupView for TraceVizView {
    fn new(interval: TimeRange, _names: &TraceNames) -> Self {
        TraceVizView::new(interval)
    }
    fn reads_summary() -> bool {
        true
    }
    fn ui(&mut self, ui: &mut Ui, cx: &DrawContext<'_>) -> Option<ViewAction> {
        self.draw(ui, cx.names, cx.cursor);
        None
    }
    fn scripted_move(&mut self, i: u64, _: TimeRange, _: TimeRange) -> Option<TimeRange> {
        match i / 100 {
            0 => self.timeline.zoom(0.97, 0.5),
            1 => self.timeline.pan(0.01),
            2 => self.timeline.pan(-0.01),
            _ => self.timeline.zoom(1.0 / 0.97, 0.5),
        }
        None
    }
    fn bands_mut(&mut self) -> Option<&mut Vec<socscope_analysis::results::Band>> {
        Some(&mut self.bands)
    }
    fn load(&mut self, cx: &LoadContext<'_>) {
        self.timeline.load(cx.trace, cx.interval, cx.filter.clone());
    }
    fn extend(&mut self, cx: &LoadContext<'_>) {
        self.timeline.extend(cx.interval.end);
    }
    fn poll(&mut self) {
        self.timeline.poll();
    }
    fn busy(&self) -> bool {
        self.timeline.busy()
    }
    fn catching_up(&self, end: Timestamp) -> bool {
        self.timeline.live.catching_up(end)
    }
    fn progress(&self) -> Option<socscope_analysis::loader::Progress> {
        self.timeline.progress()
    }
    fn stop(&mut self) {
        self.timeline.stop();
    }
    fn summary(&self) -> Option<String> {
        let t = self.timeline.timeline.as_ref()?;
        Some(format!(
            "{} actors with values, {} pixels",
            t.actors.len(),
            t.outline.len()
        ))
    }
}
