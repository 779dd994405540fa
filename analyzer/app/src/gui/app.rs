//! The whole UI: the trace browser, open traces with their view groups, toolbars, time bars and dialogs.

use eframe::egui;
use std::path::{Path, PathBuf};

use egui::Ui;
use socscope_analysis::hierarchy::{CheckState, types_by_category};
use socscope_analysis::sync::ViewKind;
use socscope_analysis::timebar::TimeBar;
use socscope_tracedb::units;
use socscope_tracedb::{CatalogEntry, TimeRange};

use super::ocelotl::OcelotlAction;
use super::open_trace::{FIRST_OPEN_EVENTS, OpenTrace};
use super::readers::CatalogWatch;
use super::results;
use super::theme::{ColourEdit, Colours};
use super::timebar::{self, BarAction, BarEdit};

/// Trace browser state.
pub struct Browser {
    pub catalog: Option<CatalogWatch>,
    pub traces: Vec<(CatalogEntry, PathBuf)>,
    pub error: Option<String>,
    pub search: String,
    pub confirm_delete: Option<(i64, String)>,
}

/// The application: what `socscope view` shows.
pub struct GuiApp {
    pub browser: Browser,
    pub open_traces: Vec<OpenTrace>,
    /// `None`: the browser is on screen.
    pub active: Option<usize>,
    pub dark: bool,
    pub first_view: ViewKind,
    /// The window is cleared with the panel colour before each frame (the eframe shell does it; a test
    /// harness may not): panels are then not filled again, which saves a software renderer shading
    /// every pixel of the window twice per frame.
    pub window_cleared: bool,
    /// Colours of types and producers (the user's choices over the palette).
    pub colours: Colours,
}

impl GuiApp {
    pub fn new(dir: Option<&Path>, traces: &[PathBuf], first_view: ViewKind, dark: bool) -> Self {
        let mut app = Self {
            browser: Browser {
                catalog: dir.map(CatalogWatch::start),
                traces: Vec::new(),
                error: None,
                search: String::new(),
                confirm_delete: None,
            },
            open_traces: Vec::new(),
            active: None,
            dark,
            first_view,
            window_cleared: false,
            colours: Colours::default(),
        };
        for t in traces {
            app.open(t);
        }
        app
    }

    pub fn open(&mut self, path: &Path) {
        if let Some(i) = self.open_traces.iter().position(|s| s.path == path) {
            self.active = Some(i);
            return;
        }
        self.open_traces
            .push(OpenTrace::open(path, self.first_view));
        self.active = Some(self.open_traces.len() - 1);
    }

    /// Uses the colours chosen by the user, kept in `path` (read now, written at every change).
    pub fn with_user_colours(mut self, path: PathBuf) -> Self {
        self.colours = Colours::load(path);
        self
    }

    /// A colour picked for a type or a producer: every open trace redraws with it, and it is saved.
    pub fn set_colour(&mut self, edit: &ColourEdit) {
        self.colours.apply(edit);
        for s in &mut self.open_traces {
            s.update(&self.colours);
        }
    }

    /// Whether something is loading or growing (the UI then keeps repainting).
    pub fn busy(&self) -> bool {
        self.open_traces.iter().any(OpenTrace::busy)
    }

    /// Draws everything into `ui` (the whole window, or a test harness).
    pub fn ui(&mut self, ui: &mut Ui) {
        ui.ctx().set_theme(if self.dark {
            egui::Theme::Dark
        } else {
            egui::Theme::Light
        });
        if let Some(c) = &mut self.browser.catalog
            && let Some(list) = c.poll()
        {
            match list {
                Ok(l) => {
                    self.browser.traces = l;
                    self.browser.error = None;
                }
                Err(e) => self.browser.error = Some(e),
            }
        }
        for s in &mut self.open_traces {
            s.update(&self.colours);
        }
        let cleared = self.window_cleared;
        let frame = side_frame(ui, cleared);
        egui::Panel::top("tabs").frame(frame).show(ui, |ui| {
            ui.horizontal(|ui| {
                ui.strong("socscope");
                ui.separator();
                if ui
                    .selectable_label(self.active.is_none(), "Traces")
                    .clicked()
                {
                    self.active = None;
                }
                let mut close = None;
                for (i, s) in self.open_traces.iter().enumerate() {
                    let live = if s.live() { " (live)" } else { "" };
                    if ui
                        .selectable_label(self.active == Some(i), format!("{}{live}", s.title))
                        .clicked()
                    {
                        self.active = Some(i);
                    }
                    if self.active == Some(i)
                        && ui
                            .small_button("x")
                            .on_hover_text("Close this trace")
                            .clicked()
                    {
                        close = Some(i);
                    }
                }
                if let Some(i) = close {
                    self.open_traces.remove(i);
                    self.active = None;
                }
                ui.with_layout(egui::Layout::right_to_left(egui::Align::Center), |ui| {
                    let label = if self.dark {
                        "Light theme"
                    } else {
                        "Dark theme"
                    };
                    if ui.button(label).clicked() {
                        self.dark = !self.dark;
                        // The window is cleared with the new theme's colour from the next frame on.
                        ui.ctx().request_repaint();
                    }
                });
            });
        });
        match self.active {
            None => self.browser_ui(ui),
            Some(i) => {
                if let Some(edit) =
                    open_trace_ui(ui, &mut self.open_traces[i], cleared, &self.colours)
                {
                    self.set_colour(&edit);
                }
            }
        }
        if self.busy() {
            ui.ctx()
                .request_repaint_after(std::time::Duration::from_millis(50));
        }
    }

    fn browser_ui(&mut self, ui: &mut Ui) {
        let mut open = None;
        let panel =
            egui::CentralPanel::default_margins().frame(central_frame(ui, self.window_cleared));
        panel.show(ui, |ui| {
            ui.horizontal(|ui| {
                ui.heading("Traces");
                if let Some(c) = &self.browser.catalog {
                    ui.label(format!("in {}", c.dir.display()));
                }
            });
            ui.horizontal(|ui| {
                ui.label("Search:");
                ui.add(
                    egui::TextEdit::singleline(&mut self.browser.search)
                        .hint_text("name, board, application, date"),
                );
            });
            if let Some(e) = &self.browser.error {
                ui.colored_label(ui.visuals().error_fg_color, e);
            }
            let q = self.browser.search.to_lowercase();
            let rows: Vec<&(CatalogEntry, PathBuf)> = self
                .browser
                .traces
                .iter()
                .filter(|(r, _)| q.is_empty() || browser_text(r).to_lowercase().contains(&q))
                .collect();
            egui::ScrollArea::vertical().show(ui, |ui| {
                egui::Grid::new("traces")
                    .striped(true)
                    .num_columns(8)
                    .show(ui, |ui| {
                        for h in [
                            "Name",
                            "Board",
                            "Application",
                            "Date (UTC)",
                            "Duration",
                            "Events",
                            "State",
                            "",
                        ] {
                            ui.strong(h);
                        }
                        ui.end_row();
                        for (r, path) in rows {
                            let i = &r.info;
                            if ui.link(&r.db_file).on_hover_text("Open").clicked() {
                                open = Some(path.clone());
                            }
                            ui.label(&i.meta.board);
                            ui.label(&i.meta.application);
                            ui.label(units::utc_date_time(i.meta.start_unix_ns));
                            ui.label(units::duration(i.duration()));
                            ui.label(i.event_count.to_string());
                            ui.label(if !i.finished {
                                "live"
                            } else if i.complete {
                                "complete"
                            } else {
                                "incomplete"
                            });
                            if ui.small_button("Delete").clicked() {
                                self.browser.confirm_delete = Some((r.id, r.db_file.clone()));
                            }
                            ui.end_row();
                        }
                    });
            });
        });
        if let Some((id, name)) = self.browser.confirm_delete.clone() {
            egui::Window::new("Delete trace?")
                .collapsible(false)
                .resizable(false)
                .show(ui.ctx(), |ui| {
                    ui.label(format!(
                        "Delete {name} and its file? This cannot be undone."
                    ));
                    ui.horizontal(|ui| {
                        if ui.button("Delete").clicked() {
                            if let Some(c) = &self.browser.catalog {
                                c.delete(id);
                            }
                            self.browser.traces.retain(|(r, _)| r.id != id);
                            self.browser.confirm_delete = None;
                        }
                        if ui.button("Cancel").clicked() {
                            self.browser.confirm_delete = None;
                        }
                    });
                });
        }
        if let Some(p) = open {
            self.open(&p);
        }
    }
}

fn browser_text(r: &CatalogEntry) -> String {
    let i = &r.info;
    format!(
        "{} {} {} {} {}",
        r.db_file,
        i.meta.board,
        i.meta.application,
        units::utc_date_time(i.meta.start_unix_ns),
        i.meta.description
    )
}

/// egui's frame of the central panel, unfilled when the window is cleared with the panel colour.
fn central_frame(ui: &Ui, cleared: bool) -> egui::Frame {
    let f = egui::Frame::central_panel(ui.style());
    if cleared {
        f.fill(egui::Color32::TRANSPARENT)
    } else {
        f
    }
}

/// egui's frame of a top or bottom panel, unfilled when the window is cleared with the panel colour.
fn side_frame(ui: &Ui, cleared: bool) -> egui::Frame {
    let f = egui::Frame::side_top_panel(ui.style());
    if cleared {
        f.fill(egui::Color32::TRANSPARENT)
    } else {
        f
    }
}

fn open_trace_ui(
    ui: &mut Ui,
    s: &mut OpenTrace,
    cleared: bool,
    colours: &Colours,
) -> Option<ColourEdit> {
    if let Some(e) = &s.error {
        let panel = egui::CentralPanel::default_margins().frame(central_frame(ui, cleared));
        panel.show(ui, |ui| {
            ui.colored_label(ui.visuals().error_fg_color, e);
        });
        return None;
    }
    if s.names.is_none() || s.groups.is_empty() {
        let panel = egui::CentralPanel::default_margins().frame(central_frame(ui, cleared));
        panel.show(ui, |ui| {
            ui.horizontal(|ui| {
                ui.spinner();
                ui.label(format!("opening {}", s.path.display()));
            });
        });
        return None;
    }
    results::show_trigger_firings_once(s);
    let whole = s.whole();
    let gi = s.active_group.min(s.groups.len() - 1);
    let mut new_group = false;
    let mut stop = false;
    let mut switch_to = None;
    let frame = side_frame(ui, cleared);
    egui::Panel::top("toolbar").frame(frame).show(ui, |ui| {
        ui.horizontal_wrapped(|ui| {
            for (i, g) in s.groups.groups().iter().enumerate() {
                if ui
                    .selectable_label(i == gi, format!("Group {}", g.number))
                    .clicked()
                {
                    s.active_group = i;
                }
            }
            if ui
                .small_button("+ group")
                .on_hover_text("Open another group of views on this trace")
                .clicked()
            {
                new_group = true;
            }
            ui.separator();
            let active = s.groups.get(gi).map(|g| g.active);
            for k in ViewKind::ALL {
                if ui
                    .selectable_label(active == Some(k), k.label())
                    .on_hover_text("Show this view on the same interval and filters")
                    .clicked()
                {
                    switch_to = Some(k);
                }
            }
            ui.separator();
            if ui.button("Types…").clicked() {
                s.types_dialog = !s.types_dialog;
            }
            if ui.button("Producers…").clicked() {
                s.producers_dialog = !s.producers_dialog;
            }
            if ui
                .button("Results…")
                .on_hover_text("Analysis results saved in this trace")
                .clicked()
            {
                s.results.open = !s.results.open;
                if s.results.open {
                    s.results.refresh(&s.path);
                }
            }
            if let Some(d) = s.results.applied_description() {
                let short: String = d.chars().take(36).collect();
                let more = if short.len() < d.len() { "…" } else { "" };
                ui.colored_label(super::bands::BAND, format!("bands: {short}{more}"))
                    .on_hover_text(format!("{d}\nResults… → Clear bands removes them"));
            }
            ui.separator();
            let v = &mut s.views[gi];
            let kind = active.unwrap_or(ViewKind::Gantt);
            if kind == ViewKind::Gantt {
                ui.toggle_value(&mut v.gantt.follow, "Follow")
                    .on_hover_text("Keep the newest data in view");
                ui.toggle_value(&mut v.gantt.cpu_tracks, "CPUs")
                    .on_hover_text(
                        "The CPU tracks: which thread ran on each CPU, and its interrupts",
                    );
                ui.toggle_value(&mut v.gantt.show_empty, "Empty rows")
                    .on_hover_text("Also show the producers without events in the loaded interval");
            }
            let p = v.view(kind).progress();
            // A view that stopped at its cap says so (the rest of the interval is not on screen).
            let capped = v.view(kind).capped();
            if let Some(note) = capped {
                ui.colored_label(ui.visuals().warn_fg_color, note);
            } else if let Some(p) = p {
                if !p.finished {
                    ui.add(
                        egui::ProgressBar::new(p.fraction() as f32)
                            .desired_width(120.0)
                            .text(format!("{} events", p.events)),
                    );
                    if ui.button("Stop").clicked() {
                        stop = true;
                    }
                } else if let Some(e) = &p.error {
                    ui.colored_label(ui.visuals().error_fg_color, e);
                } else {
                    let what = v
                        .view(kind)
                        .summary()
                        .unwrap_or_else(|| format!("{} events", p.events));
                    // Whole on the next line of the toolbar when it does not fit on this one.
                    ui.add(
                        egui::Label::new(format!(
                            "{what}{}",
                            if p.cancelled { " (stopped)" } else { "" }
                        ))
                        .extend(),
                    );
                }
            }
            if s.meta.as_ref().is_some_and(|m| !m.info.finished) {
                ui.colored_label(egui::Color32::from_rgb(220, 60, 60), "LIVE");
            }
        });
    });
    if new_group {
        let k = s.groups.get(gi).map_or(ViewKind::Gantt, |g| g.active);
        s.new_group(k);
        return None;
    }
    if let Some(k) = switch_to
        && let Some(g) = s.groups.get_mut(gi)
    {
        g.switch_to(k);
    }
    let kind = s.groups.get(gi).map_or(ViewKind::Gantt, |g| g.active);
    if stop {
        s.views[gi].view_mut(kind).stop();
    }
    filter_dialogs(ui, s, gi);
    results::window(ui, s);
    let group = s.groups.get(gi).expect("index in range").clone();
    let v = &mut s.views[gi];
    let (bar, edit) = v
        .bars
        .entry(kind)
        .or_insert_with(|| (TimeBar::new(whole), BarEdit::default()));
    if kind == ViewKind::Gantt {
        // The Gantt's bar shows what is on screen.
        bar.displayed = v.gantt.view;
    }
    let mut load = None;
    let count = s.meta.as_ref().map_or(0, |m| m.info.event_count);
    let first_open = group.revision == 0 && group.interval != whole;
    let frame = side_frame(ui, cleared);
    egui::Panel::bottom("timebar").frame(frame).show(ui, |ui| {
        if timebar::show(ui, bar, edit, group.cursor) == BarAction::Load {
            load = Some(bar.selection);
        }
        ui.horizontal(|ui| {
            let share = 100.0 * bar.displayed.len() as f64 / whole.len().max(1) as f64;
            ui.weak(format!(
                "shown {} – {} s ({share:.1} % of the trace, {} – {} s)",
                units::timestamp(bar.displayed.start),
                units::timestamp(bar.displayed.end),
                units::timestamp(whole.start),
                units::timestamp(whole.end),
            ));
            if first_open {
                ui.colored_label(
                    ui.visuals().warn_fg_color,
                    format!(
                        "opened on the first {FIRST_OPEN_EVENTS} of {count} events: \
                         widen or move the selection and press Load to see more"
                    ),
                );
            }
        });
    });
    // Only the Gantt on screen may ask for its view to be loaded: a Gantt left zoomed out in the
    // background must not keep resetting the interval another view of the group selected.
    if kind == ViewKind::Gantt
        && let Some(t) = v.gantt.settled_outside_loaded()
    {
        load = Some(TimeRange::new(
            t.start.max(whole.start),
            t.end.min(whole.end).max(t.start.max(whole.start) + 1),
        ));
    }
    let names = s.names.as_ref().expect("checked above");
    let mut colour_edit = None;
    let mut legend_toggle = None;
    if kind == ViewKind::Gantt {
        let loaded = v.gantt.types_loaded();
        let frame = side_frame(ui, cleared);
        egui::Panel::bottom("legend").frame(frame).show(ui, |ui| {
            match super::gantt::legend(ui, names, &loaded, &group.filter.hidden_types) {
                Some(super::gantt::LegendAction::Colour(e)) => colour_edit = Some(e),
                Some(super::gantt::LegendAction::Toggle(t)) => legend_toggle = Some(t),
                None => {}
            }
            if let Some(e) = &colours.error {
                ui.colored_label(ui.visuals().warn_fg_color, format!("colours: {e}"));
            }
        });
    }
    let mut cursor = None;
    let mut gantt_on = None;
    let panel = egui::CentralPanel::default_margins().frame(central_frame(ui, cleared));
    panel.show(ui, |ui| match kind {
        ViewKind::Gantt => v.gantt.ui(
            ui,
            names,
            &group.filter.hidden_producers,
            whole,
            group.cursor,
        ),
        ViewKind::Table => {
            if let Some(t) = v.table.ui(ui) {
                cursor = Some(t);
            }
        }
        ViewKind::Density => {
            if let Some(r) = v.density.ui(ui, group.cursor) {
                load = Some(r);
            }
        }
        ViewKind::Statistics => {
            if let Some(e) = v.stats.ui(ui, names) {
                colour_edit = Some(e);
            }
        }
        ViewKind::Ocelotl => match v.ocelotl.ui(ui, names) {
            Some(OcelotlAction::Zoom(r)) => load = Some(r),
            Some(OcelotlAction::GanttOn(r)) => gantt_on = Some(r),
            None => {}
        },
        ViewKind::TraceViz => v.traceviz.ui(ui, names, group.cursor),
    });
    results::take_saves(s, gi);
    if let Some(r) = gantt_on {
        s.new_group(ViewKind::Gantt);
        if let Some(g) = s.groups.get_mut(s.active_group) {
            g.set_interval(r);
        }
        return colour_edit;
    }
    if let Some(g) = s.groups.get_mut(gi) {
        if let Some(r) = load {
            g.set_interval(r);
        }
        if let Some(t) = legend_toggle {
            let mut filter = g.filter.clone();
            if !filter.hidden_types.remove(&t) {
                filter.hidden_types.insert(t);
            }
            g.set_filter(filter);
        }
        if let Some(t) = cursor {
            g.cursor = Some(t);
            // The Gantt of the group brings the clicked time into view.
            let gv = &mut s.views[gi].gantt;
            if !gv.view.contains(t) {
                let half = gv.view.len() / 2;
                gv.view = TimeRange::new(t - half, t + half);
            }
        }
    }
    colour_edit
}

fn filter_dialogs(ui: &mut Ui, s: &mut OpenTrace, gi: usize) {
    let (Some(meta), Some(names)) = (&s.meta, &s.names) else {
        return;
    };
    let Some(group) = s.groups.get_mut(gi) else {
        return;
    };
    let mut filter = group.filter.clone();
    let mut open = s.types_dialog;
    egui::Window::new("Event types")
        .open(&mut open)
        .vscroll(true)
        .show(ui.ctx(), |ui| {
            ui.horizontal(|ui| {
                if ui.button("All").clicked() {
                    filter.hidden_types.clear();
                }
                if ui.button("None").clicked() {
                    filter.hidden_types = meta.types.iter().map(|t| t.id).collect();
                }
            });
            for (cat, types) in types_by_category(&meta.types) {
                let state = CheckState::of(
                    types
                        .iter()
                        .map(|(id, _)| !filter.hidden_types.contains(id)),
                );
                let mut on = state != CheckState::Unchecked;
                if ui
                    .add(
                        egui::Checkbox::new(&mut on, egui::RichText::new(cat.name()).strong())
                            .indeterminate(state == CheckState::Partial),
                    )
                    .changed()
                {
                    for (id, _) in &types {
                        if on {
                            filter.hidden_types.remove(id);
                        } else {
                            filter.hidden_types.insert(*id);
                        }
                    }
                }
                ui.indent(cat.name(), |ui| {
                    for (id, name) in &types {
                        let mut on = !filter.hidden_types.contains(id);
                        let text = egui::RichText::new(name).color(names.colour(*id));
                        if ui.checkbox(&mut on, text).changed() {
                            if on {
                                filter.hidden_types.remove(id);
                            } else {
                                filter.hidden_types.insert(*id);
                            }
                        }
                    }
                });
            }
        });
    s.types_dialog = open;
    let mut open = s.producers_dialog;
    egui::Window::new("Event producers")
        .open(&mut open)
        .vscroll(true)
        .show(ui.ctx(), |ui| {
            ui.horizontal(|ui| {
                if ui.button("All").clicked() {
                    filter.hidden_producers.clear();
                }
                if ui.button("None").clicked() {
                    filter.hidden_producers = meta.producers.iter().map(|p| p.id).collect();
                }
            });
            for n in names.tree.nodes() {
                let state = names.tree.check_state(n.id, &filter.hidden_producers);
                let mut on = state != CheckState::Unchecked;
                ui.horizontal(|ui| {
                    ui.add_space(14.0 * n.depth as f32);
                    if ui
                        .add(
                            egui::Checkbox::new(&mut on, &n.label)
                                .indeterminate(state == CheckState::Partial),
                        )
                        .changed()
                    {
                        names
                            .tree
                            .set_checked(n.id, on, &mut filter.hidden_producers);
                    }
                });
            }
        });
    s.producers_dialog = open;
    group.set_filter(filter);
}
