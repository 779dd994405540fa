//! The whole UI: the trace browser, open traces with their view groups, toolbars, time bars and dialogs.

use eframe::egui;
use std::path::{Path, PathBuf};

use egui::Ui;
use socscope_analysis::hierarchy::{CheckState, types_by_category};
use socscope_analysis::sync::{ViewGroup, ViewKind};
use socscope_analysis::timebar::TimeBar;
use socscope_tracedb::units;
use socscope_tracedb::{CatalogEntry, TimeRange, Timestamp, TypeId};

use super::open_trace::{FIRST_OPEN_EVENTS, OpenTrace};
use super::readers::CatalogWatch;
use super::results;
use super::theme::{ColourEdit, Colours};
use super::timebar::{self, BarAction, BarEdit};
use super::views::{DrawContext, GroupView, ViewAction};

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

/// What the user clicked in a group's toolbar this frame.
#[derive(Default)]
struct ToolbarClicks {
    new_group: bool,
    stop: bool,
    switch_to: Option<ViewKind>,
}

/// What the views of the group on screen asked for this frame, applied once they are all drawn (the
/// last request of a kind wins, in drawing order: time bar, the view's panels, the view).
#[derive(Default)]
struct GroupRequests {
    load: Option<TimeRange>,
    cursor: Option<Timestamp>,
    colour_edit: Option<ColourEdit>,
    legend_toggle: Option<TypeId>,
    gantt_on: Option<TimeRange>,
}

impl GroupRequests {
    fn take(&mut self, action: Option<ViewAction>) {
        match action {
            Some(ViewAction::Load(r)) => self.load = Some(r),
            Some(ViewAction::Cursor(t)) => self.cursor = Some(t),
            Some(ViewAction::Colour(e)) => self.colour_edit = Some(e),
            Some(ViewAction::ToggleType(t)) => self.legend_toggle = Some(t),
            Some(ViewAction::GanttOn(r)) => self.gantt_on = Some(r),
            None => {}
        }
    }
}

/// An open trace: its toolbar, time bar, the active group's view and dialogs; a colour the user picked.
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
    let gi = s.active_group.min(s.groups.len() - 1);
    let frame = side_frame(ui, cleared);
    let clicks = egui::Panel::top("toolbar")
        .frame(frame)
        .show(ui, |ui| group_toolbar(ui, s, gi))
        .inner;
    if clicks.new_group {
        let k = s.groups.get(gi).map_or(ViewKind::Gantt, |g| g.active);
        s.new_group(k);
        return None;
    }
    if let Some(k) = clicks.switch_to
        && let Some(g) = s.groups.get_mut(gi)
    {
        g.switch_to(k);
    }
    let kind = s.groups.get(gi).map_or(ViewKind::Gantt, |g| g.active);
    if clicks.stop {
        s.views[gi].view_mut(kind).stop();
    }
    filter_dialogs(ui, s, gi);
    results::window(ui, s);
    let requests = group_view_ui(ui, s, gi, kind, cleared, colours);
    results::take_saves(s, gi);
    apply_requests(s, gi, requests)
}

/// The group's toolbar: groups, views, dialogs, the view's own switches, and how its load goes.
fn group_toolbar(ui: &mut Ui, s: &mut OpenTrace, gi: usize) -> ToolbarClicks {
    let mut clicks = ToolbarClicks::default();
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
            clicks.new_group = true;
        }
        ui.separator();
        let active = s.groups.get(gi).map(|g| g.active);
        for k in ViewKind::ALL {
            if ui
                .selectable_label(active == Some(k), k.label())
                .on_hover_text("Show this view on the same interval and filters")
                .clicked()
            {
                clicks.switch_to = Some(k);
            }
        }
        ui.separator();
        dialog_buttons(ui, s);
        ui.separator();
        let v = s.views[gi].view_mut(active.unwrap_or(ViewKind::Gantt));
        v.toolbar_switches(ui);
        clicks.stop = load_status(ui, v);
        if s.meta.as_ref().is_some_and(|m| !m.info.finished) {
            ui.colored_label(egui::Color32::from_rgb(220, 60, 60), "LIVE");
        }
    });
    clicks
}

/// The buttons that open the trace's dialogs, and which result's bands are drawn.
fn dialog_buttons(ui: &mut Ui, s: &mut OpenTrace) {
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
}

/// How the view's load goes (progress and a Stop button, its cap, its error or what it brought);
/// whether Stop was clicked.
fn load_status(ui: &mut Ui, v: &dyn GroupView) -> bool {
    let mut stop = false;
    let p = v.progress();
    // A view that stopped at its cap says so (the rest of the interval is not on screen).
    let capped = v.capped();
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
    stop
}

/// The active view of group `gi` with its time bar and its own panels; what they asked of the group.
fn group_view_ui(
    ui: &mut Ui,
    s: &mut OpenTrace,
    gi: usize,
    kind: ViewKind,
    cleared: bool,
    colours: &Colours,
) -> GroupRequests {
    let whole = s.whole();
    let count = s.meta.as_ref().map_or(0, |m| m.info.event_count);
    let group = s.groups.get(gi).expect("index in range").clone();
    let v = &mut s.views[gi];
    let displayed = v.view(kind).displayed();
    let wants = v.view(kind).wants_interval();
    let (bar, edit) = v
        .bars
        .entry(kind)
        .or_insert_with(|| (TimeBar::new(whole), BarEdit::default()));
    if let Some(displayed) = displayed {
        bar.displayed = displayed;
    }
    let mut requests = GroupRequests {
        load: time_bar_panel(ui, bar, edit, &group, whole, count, cleared),
        ..GroupRequests::default()
    };
    if let Some(t) = wants {
        requests.load = Some(TimeRange::new(
            t.start.max(whole.start),
            t.end.min(whole.end).max(t.start.max(whole.start) + 1),
        ));
    }
    let cx = DrawContext {
        names: s.names.as_ref().expect("checked above"),
        whole,
        cursor: group.cursor,
        filter: &group.filter,
        colours,
    };
    let view = v.view_mut(kind);
    let frame = side_frame(ui, cleared);
    requests.take(view.bottom_panels(ui, frame, &cx));
    let panel = egui::CentralPanel::default_margins().frame(central_frame(ui, cleared));
    requests.take(panel.show(ui, |ui| view.ui(ui, &cx)).inner);
    requests
}

/// The time bar under the views, with what it shows; the interval to load when the user asks.
fn time_bar_panel(
    ui: &mut Ui,
    bar: &mut TimeBar,
    edit: &mut BarEdit,
    group: &ViewGroup,
    whole: TimeRange,
    count: u64,
    cleared: bool,
) -> Option<TimeRange> {
    let mut load = None;
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
    load
}

/// Applies what the views of group `gi` asked for; a colour the user picked, for the app.
fn apply_requests(s: &mut OpenTrace, gi: usize, r: GroupRequests) -> Option<ColourEdit> {
    if let Some(interval) = r.gantt_on {
        s.new_group(ViewKind::Gantt);
        if let Some(g) = s.groups.get_mut(s.active_group) {
            g.set_interval(interval);
        }
        return r.colour_edit;
    }
    if let Some(g) = s.groups.get_mut(gi) {
        if let Some(interval) = r.load {
            g.set_interval(interval);
        }
        if let Some(t) = r.legend_toggle {
            let mut filter = g.filter.clone();
            if !filter.hidden_types.remove(&t) {
                filter.hidden_types.insert(t);
            }
            g.set_filter(filter);
        }
        if let Some(t) = r.cursor {
            g.cursor = Some(t);
            for k in ViewKind::ALL {
                s.views[gi].view_mut(k).cursor_moved(t);
            }
        }
    }
    r.colour_edit
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
