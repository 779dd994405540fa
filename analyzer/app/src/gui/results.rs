//! The Results panel (RT-427 §3.1.3): the analysis results saved in a trace — by the CLI's `--save`, by
//! the collector's triggers, or from the views here (the pie's groups, the table's search, an Ocelotl
//! partition as bands or as a processed trace, TraceViz's actor groups) — listed with kind, tool, date and
//! description, opened into the views (annotations as bands on the Gantt, the density and TraceViz,
//! groups applied to the pie or to TraceViz, a search applied to the table) and deleted. Store access
//! happens on the user's clicks only, never per frame.

use eframe::egui;
use egui::Ui;
use socscope_analysis::results::{self as saved, Band};
use socscope_analysis::sync::ViewKind;
use socscope_tracedb::{
    AnalysisData, AnalysisKind, AnalysisResult, ResultStore, TimeRange, TraceReader, units,
};

use socscope_analysis::overview::Partition;
use socscope_analysis::processed;

use super::ocelotl::SavePartition;
use super::open_trace::{GroupViews, OpenTrace, ResultsPanel};

enum Action {
    Refresh,
    Open(i64),
    Delete(i64),
    ClearBands,
}

impl ResultsPanel {
    fn say(&mut self, ok: bool, text: impl Into<String>) {
        self.status = Some((ok, text.into()));
    }

    /// What the bands drawn now are (the applied result's description), for the toolbar.
    pub fn applied_description(&self) -> Option<&str> {
        let id = self.applied?;
        self.list
            .iter()
            .find(|r| r.id == id)
            .map(|r| r.description.as_str())
    }

    /// Reads the list again.
    pub fn refresh(&mut self, trace: &std::path::Path) {
        match TraceReader::open(trace).and_then(|r| r.analysis_results(None, None)) {
            Ok(l) => self.list = l,
            Err(e) => self.say(false, format!("cannot read the results: {e}")),
        }
    }
}

fn now_unix_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// Saves `data` into the open trace as a result of the GUI; the id.
fn save(s: &mut OpenTrace, description: String, data: AnalysisData) -> Option<i64> {
    let kind = data.kind().name();
    let header = AnalysisResult {
        id: 0,
        tool_id: None,
        tool_name: saved::tool_name("view"),
        kind: data.kind(),
        date_unix_ns: now_unix_ns(),
        description: description.clone(),
    };
    let r = ResultStore::open(&s.path).and_then(|st| st.save(&header, &data));
    let id = match r {
        Ok(id) => {
            s.results
                .say(true, format!("saved result {id} ({kind}): {description}"));
            Some(id)
        }
        Err(e) => {
            s.results.say(false, format!("cannot save: {e}"));
            None
        }
    };
    s.results.refresh(&s.path.clone());
    id
}

/// Saves what the pie, the table, Ocelotl or TraceViz of group `gi` asked to save this frame.
pub fn take_saves(s: &mut OpenTrace, gi: usize) {
    let Some(v) = s.views.get_mut(gi) else { return };
    if let Some(how) = v.ocelotl.save.take() {
        let o = &mut v.ocelotl;
        let (Some(part), Some(overview), Some(description)) = (
            o.state.partition(),
            o.state.overview.clone(),
            o.describe_partition(),
        ) else {
            s.results
                .say(false, "no partition on screen: nothing to save");
            return;
        };
        if !overview.complete() {
            s.results.say(
                false,
                "the overview is still being read: save once every slice is in",
            );
            return;
        }
        o.save_description.clear();
        match how {
            SavePartition::Annotation => {
                let bands = saved::partition_bands(&overview.micro, &part);
                let what = match *part {
                    Partition::Temporal(_) => "temporal",
                    Partition::Spatiotemporal(_) => "spatiotemporal",
                };
                let data = saved::interval_annotations(&format!("ocelotl {what} part"), &bands);
                save(s, description, data);
            }
            SavePartition::ProcessedTrace => {
                let r = processed::save_partition_trace(
                    &s.path,
                    &overview.micro,
                    &part,
                    &saved::tool_name("view"),
                    now_unix_ns(),
                    &description,
                );
                match r {
                    Ok((file, id)) => s.results.say(
                        true,
                        format!(
                            "saved result {id} (processed_trace): {description}, in {}",
                            file.display()
                        ),
                    ),
                    Err(e) => s
                        .results
                        .say(false, format!("cannot save the processed trace: {e}")),
                }
                s.results.refresh(&s.path.clone());
            }
        }
        return;
    }
    if std::mem::take(&mut v.traceviz.save_groups) {
        let groups = v.traceviz.tree.group_list();
        if groups.is_empty() {
            s.results.say(false, "no TraceViz group: nothing to save");
            return;
        }
        let description = v.traceviz.describe_groups();
        v.traceviz.save_description.clear();
        save(s, description, saved::actor_grouping(&groups));
        return;
    }
    if std::mem::take(&mut v.stats.save_groups) {
        let settings = &v.stats.settings;
        let op = settings.operator;
        let names: Vec<String> = settings.groups.iter().map(|g| g.name.clone()).collect();
        match saved::pie_grouping(op, &settings.groups) {
            Some(data) => {
                let description = format!(
                    "pie groups ({}): {}",
                    op.label().to_lowercase(),
                    names.join(", ")
                );
                save(s, description, data);
            }
            None => s.results.say(
                false,
                "syscall slices are names, not trace entities: nothing to save",
            ),
        }
        return;
    }
    if std::mem::take(&mut v.table.save_filter) {
        let Some(g) = s.groups.get(gi) else { return };
        let interval = g.interval;
        let v = &s.views[gi];
        let filters = v.table.model.filters().clone();
        let n = v.table.model.row_count();
        let ids: Vec<i64> = v.table.model.rows(0..n).iter().map(|r| r.id).collect();
        let shown: Vec<String> = socscope_analysis::table::Column::ALL
            .iter()
            .zip(&filters.patterns)
            .filter(|(_, p)| !p.trim().is_empty())
            .map(|(c, p)| format!("{}~{p}", c.title()))
            .collect();
        let description = format!(
            "table filter {} over {} – {} s: {} events",
            shown.join(", "),
            units::timestamp(interval.start),
            units::timestamp(interval.end),
            ids.len()
        );
        let data = saved::table_search(&saved::TableSearch { interval, filters }, ids);
        save(s, description, data);
    }
}

/// A trace the collector's triggers annotated (a flight-recorder window, a capture with `--trigger`)
/// opens with its firings drawn as bands, at them: they are why the trace is being looked at. Once per
/// trace, when its first group is ready (a live trace has none yet: they are stored when it closes).
pub fn show_trigger_firings_once(s: &mut OpenTrace) {
    if !s.first_look_for_triggers() || s.live() {
        return;
    }
    let Ok(list) = TraceReader::open(&s.path).and_then(|r| r.analysis_results(None, None)) else {
        return;
    };
    let firings = list.iter().rev().find(|r| {
        r.kind == AnalysisKind::Annotation
            && r.tool_name == socscope_collector::trigger::TRIGGER_TOOL
    });
    if let Some((id, description)) = firings.map(|r| (r.id, r.description.clone())) {
        s.results.list = list;
        open_result(s, id);
        if s.results.applied == Some(id) {
            s.results.say(
                true,
                format!("{description}: drawn as bands (Results… to clear them)"),
            );
        }
    }
}

/// Opens result `id` into the views of the active group.
fn open_result(s: &mut OpenTrace, id: i64) {
    let data = match TraceReader::open(&s.path).and_then(|r| r.analysis_data(id)) {
        Ok(Some(d)) => d,
        Ok(None) => {
            s.results.say(false, format!("result {id} is gone"));
            s.results.refresh(&s.path.clone());
            return;
        }
        Err(e) => {
            s.results
                .say(false, format!("cannot read result {id}: {e}"));
            return;
        }
    };
    let gi = s.active_group.min(s.groups.len().saturating_sub(1));
    let whole = s.whole();
    let (Some(g), Some(v)) = (s.groups.get_mut(gi), s.views.get_mut(gi)) else {
        return;
    };
    match data.kind() {
        AnalysisKind::Annotation => {
            let bands = saved::bands(&data);
            if bands.is_empty() {
                s.results
                    .say(false, format!("result {id} has no time interval to show"));
                return;
            }
            bring_into_view(g, whole, &bands);
            let n = bands.len();
            show_bands(g, v, bands);
            s.results.applied = Some(id);
            s.results.say(
                true,
                format!("result {id}: {n} intervals drawn on the Gantt, the density and TraceViz"),
            );
        }
        AnalysisKind::Grouping if saved::actor_groups(&data).is_some() => {
            let groups = saved::actor_groups(&data).unwrap_or_default();
            let n = groups.len();
            v.traceviz.pending_groups = Some(groups);
            g.switch_to(ViewKind::TraceViz);
            s.results.applied = Some(id);
            s.results
                .say(true, format!("result {id}: {n} groups applied to TraceViz"));
        }
        AnalysisKind::Grouping => match saved::pie_groups(&data) {
            Some((op, groups)) => {
                if let Some(op) = op {
                    v.stats.settings.set_operator(op);
                }
                let n = groups.len();
                v.stats.settings.groups = groups;
                g.switch_to(ViewKind::Statistics);
                s.results.applied = Some(id);
                s.results
                    .say(true, format!("result {id}: {n} groups applied to the pie"));
            }
            None => s.results.say(
                false,
                format!(
                    "result {id} groups events or parameter types: the pie has no slice for them"
                ),
            ),
        },
        AnalysisKind::Search => match saved::parse_table_search(&data) {
            Some(search) => {
                v.table.edit = search.filters.clone();
                match v.table.model.set_filters(search.filters) {
                    Ok(()) => v.table.error = None,
                    Err(e) => v.table.error = Some(e),
                }
                let r = TimeRange::new(
                    search.interval.start.max(whole.start),
                    search.interval.end.min(whole.end),
                );
                if !r.is_empty() && r != g.interval {
                    g.set_interval(r);
                }
                g.switch_to(ViewKind::Table);
                s.results.applied = Some(id);
                s.results
                    .say(true, format!("result {id}: filter applied to the table"));
            }
            None => s.results.say(
                false,
                format!("result {id} is a search of another tool: not a table filter"),
            ),
        },
        AnalysisKind::ProcessedTrace => {
            let AnalysisData::ProcessedTrace { trace_db } = &data else {
                return;
            };
            let file = processed::resolve(&s.path, trace_db);
            let bands = TraceReader::open(&file)
                .and_then(|r| processed::partition_bands(&r))
                .map_err(|e| e.to_string())
                .and_then(|b| {
                    if b.is_empty() {
                        Err(format!("{} has no part", file.display()))
                    } else {
                        Ok(b)
                    }
                });
            match bands {
                Ok(bands) => {
                    let n = bands.len();
                    bring_into_view(g, whole, &bands);
                    show_bands(g, v, bands);
                    s.results.applied = Some(id);
                    s.results.say(
                        true,
                        format!(
                            "result {id}: the {n} parts of processed trace {} drawn on the \
                             Gantt, the density and TraceViz (open the file itself for its states)",
                            file.display()
                        ),
                    );
                }
                Err(e) => s.results.say(
                    false,
                    format!("cannot open result {id}'s processed trace: {e}"),
                ),
            }
        }
        AnalysisKind::ResultFile => s.results.say(
            false,
            format!("result {id} points outside this trace (`socscope results --show {id}`)"),
        ),
    }
}

fn delete(s: &mut OpenTrace, id: i64) {
    match ResultStore::open(&s.path).and_then(|st| st.delete(id)) {
        Ok(_) => {
            s.results.say(true, format!("deleted result {id}"));
            if s.results.applied == Some(id) {
                clear_bands(s);
            }
        }
        Err(e) => s
            .results
            .say(false, format!("cannot delete result {id}: {e}")),
    }
    s.results.refresh(&s.path.clone());
}

/// Moves the group's interval over `bands` when none of them is in it (they would show nothing).
fn bring_into_view(g: &mut socscope_analysis::sync::ViewGroup, whole: TimeRange, bands: &[Band]) {
    if bands
        .iter()
        .any(|b| b.end > g.interval.start && b.start < g.interval.end)
    {
        return;
    }
    let start = bands.iter().map(|b| b.start).min().unwrap_or(whole.start);
    let end = bands.iter().map(|b| b.end).max().unwrap_or(whole.end);
    let r = TimeRange::new(start.max(whole.start), end.min(whole.end));
    if !r.is_empty() {
        g.set_interval(r);
    }
}

/// Draws `bands` on the group's views that draw bands (the Gantt, the density, TraceViz); a view
/// showing none comes to the Gantt.
fn show_bands(g: &mut socscope_analysis::sync::ViewGroup, v: &mut GroupViews, bands: Vec<Band>) {
    if v.view_mut(g.active).bands_mut().is_none() {
        g.switch_to(ViewKind::Gantt);
    }
    for k in ViewKind::ALL {
        if let Some(b) = v.view_mut(k).bands_mut() {
            *b = bands.clone();
        }
    }
}

fn clear_bands(s: &mut OpenTrace) {
    for v in &mut s.views {
        for k in ViewKind::ALL {
            if let Some(b) = v.view_mut(k).bands_mut() {
                b.clear();
            }
        }
    }
    s.results.applied = None;
}

/// The panel, as a window over the views; acts on the open trace after drawing.
pub fn window(ui: &mut Ui, s: &mut OpenTrace) {
    if !s.results.open {
        return;
    }
    let mut open = true;
    let mut action = None;
    let panel = &mut s.results;
    egui::Window::new("Results")
        .open(&mut open)
        .default_width(620.0)
        .default_height(200.0)
        .vscroll(true)
        .show(ui.ctx(), |ui| {
            ui.horizontal(|ui| {
                if ui.button("Refresh").clicked() {
                    action = Some(Action::Refresh);
                }
                if panel.applied.is_some() && ui.button("Clear bands").clicked() {
                    action = Some(Action::ClearBands);
                }
            });
            if let Some((ok, text)) = &panel.status {
                let c = if *ok {
                    ui.visuals().text_color()
                } else {
                    ui.visuals().error_fg_color
                };
                ui.colored_label(c, text);
            }
            if panel.list.is_empty() {
                ui.weak(
                    "No saved results. Save the pie's groups or the table's filter here, or use \
                     --save on socscope aggregate, compare, timeline or stats.",
                );
                return;
            }
            egui::Grid::new("results")
                .striped(true)
                .num_columns(6)
                .show(ui, |ui| {
                    for h in ["Kind", "Tool", "Date (UTC)", "Description", "", ""] {
                        ui.strong(h);
                    }
                    ui.end_row();
                    for r in &panel.list {
                        let applied = panel.applied == Some(r.id);
                        ui.label(r.kind.name());
                        ui.label(&r.tool_name);
                        ui.label(units::utc_date_time(r.date_unix_ns));
                        let d = egui::RichText::new(&r.description);
                        ui.label(if applied { d.strong() } else { d });
                        if ui.small_button("Open").clicked() {
                            action = Some(Action::Open(r.id));
                        }
                        if panel.confirm_delete == Some(r.id) {
                            if ui.small_button("Really delete").clicked() {
                                action = Some(Action::Delete(r.id));
                            }
                        } else if ui.small_button("Delete").clicked() {
                            panel.confirm_delete = Some(r.id);
                        }
                        ui.end_row();
                    }
                });
        });
    s.results.open = open;
    match action {
        Some(Action::Refresh) => s.results.refresh(&s.path.clone()),
        Some(Action::Open(id)) => open_result(s, id),
        Some(Action::Delete(id)) => {
            s.results.confirm_delete = None;
            delete(s, id);
        }
        Some(Action::ClearBands) => clear_bands(s),
        None => {}
    }
}
