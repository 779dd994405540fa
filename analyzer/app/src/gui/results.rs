//! The Results panel (RT-427 §3.1.3): the analysis results saved in a trace — by the CLI's `--save` or
//! from the pie and the table here — listed with kind, tool, date and description, opened into the
//! views (annotations as bands on the Gantt and the density, groups applied to the pie, a search applied
//! to the table) and deleted. Store access happens on the user's clicks only, never per frame.

use eframe::egui;
use egui::{Color32, Pos2, Rect, Stroke, Ui};
use socscope_analysis::results::{self as saved, Band};
use socscope_analysis::sync::ViewKind;
use socscope_tracedb::{
    AnalysisData, AnalysisKind, AnalysisResult, ResultStore, TimeRange, TraceReader, units,
};

use super::app::TraceSession;

/// What the panel shows and what the user asked of it.
#[derive(Default)]
pub struct ResultsPanel {
    pub open: bool,
    /// The trace's results, as last read.
    pub list: Vec<AnalysisResult>,
    /// The result whose bands or groups are applied.
    pub applied: Option<i64>,
    /// The last thing done or the last error, shown in the panel and the toolbar.
    pub status: Option<(bool, String)>,
    confirm_delete: Option<i64>,
}

enum Action {
    Refresh,
    Open(i64),
    Delete(i64),
    ClearBands,
}

/// The colour of annotation bands (amber: apart from the palette's type colours and the selection blue).
pub const BAND: Color32 = Color32::from_rgb(255, 170, 0);

impl ResultsPanel {
    fn say(&mut self, ok: bool, text: impl Into<String>) {
        self.status = Some((ok, text.into()));
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

/// Saves `data` into the session's trace as a result of the GUI; the id.
fn save(s: &mut TraceSession, description: String, data: AnalysisData) -> Option<i64> {
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

/// Saves what the pie or the table of group `gi` asked to save this frame.
pub fn take_saves(s: &mut TraceSession, gi: usize) {
    let Some(v) = s.views.get_mut(gi) else { return };
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

/// Opens result `id` into the views of the active group.
fn open_result(s: &mut TraceSession, id: i64) {
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
            // Bands outside the group's interval would show nothing: bring them in.
            if !bands
                .iter()
                .any(|b| b.end > g.interval.start && b.start < g.interval.end)
            {
                let start = bands.iter().map(|b| b.start).min().unwrap_or(whole.start);
                let end = bands.iter().map(|b| b.end).max().unwrap_or(whole.end);
                let r = TimeRange::new(start.max(whole.start), end.min(whole.end));
                if !r.is_empty() {
                    g.set_interval(r);
                }
            }
            if !matches!(g.active, ViewKind::Gantt | ViewKind::Density) {
                g.switch_to(ViewKind::Gantt);
            }
            let n = bands.len();
            v.gantt.bands = bands.clone();
            v.density.bands = bands;
            s.results.applied = Some(id);
            s.results.say(
                true,
                format!("result {id}: {n} intervals drawn on the Gantt and the density"),
            );
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
        AnalysisKind::ResultFile | AnalysisKind::ProcessedTrace => s.results.say(
            false,
            format!("result {id} points outside this trace (`socscope results --show {id}`)"),
        ),
    }
}

fn delete(s: &mut TraceSession, id: i64) {
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

fn clear_bands(s: &mut TraceSession) {
    for v in &mut s.views {
        v.gantt.bands.clear();
        v.density.bands.clear();
    }
    s.results.applied = None;
}

/// The panel, as a window over the views; acts on the session after drawing.
pub fn window(ui: &mut Ui, s: &mut TraceSession) {
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

/// Draws `bands` over a time chart: `chart` spans `view` across; each band a translucent column with its
/// label at the top, its edges marked; hovering its label tells its interval, producers and value. With
/// `rows` (the producer of each row of a Gantt, `row_h` high from the chart's top), the rows of the
/// band's producers are tinted more.
pub fn draw_bands(
    ui: &Ui,
    chart: Rect,
    view: TimeRange,
    bands: &[Band],
    rows: Option<(&[socscope_tracedb::ProducerId], f32)>,
) {
    if bands.is_empty() || view.is_empty() {
        return;
    }
    let p = ui.painter_at(chart);
    let x_of = |t: i64| {
        chart.left() + ((t - view.start) as f64 / view.len() as f64) as f32 * chart.width()
    };
    let hover = ui.ctx().pointer_hover_pos().filter(|h| chart.contains(*h));
    let mut tip = None;
    for b in bands
        .iter()
        .filter(|b| b.end > view.start && b.start < view.end)
    {
        let (x0, x1) = (
            x_of(b.start).max(chart.left()),
            x_of(b.end).min(chart.right()),
        );
        let col = Rect::from_x_y_ranges(x0..=x1.max(x0 + 1.0), chart.y_range());
        p.rect_filled(col, 0.0, BAND.gamma_multiply(0.12));
        if let Some((ids, row_h)) = rows {
            for (i, id) in ids.iter().enumerate() {
                if b.producers.contains(id) {
                    let y = chart.top() + i as f32 * row_h;
                    p.rect_filled(
                        Rect::from_x_y_ranges(col.x_range(), y..=y + row_h),
                        0.0,
                        BAND.gamma_multiply(0.25),
                    );
                }
            }
        }
        for x in [x0, x1] {
            p.line_segment(
                [Pos2::new(x, chart.top()), Pos2::new(x, chart.bottom())],
                Stroke::new(1.0, BAND),
            );
        }
        if x1 - x0 > 40.0 {
            p.text(
                Pos2::new(x0 + 3.0, chart.top() + 2.0),
                egui::Align2::LEFT_TOP,
                &b.label,
                egui::FontId::proportional(11.0),
                ui.visuals().text_color(),
            );
        }
        // Only over the label strip: lower down the chart's own tooltips (events) speak.
        if let Some(h) = hover
            && col.contains(h)
            && h.y < chart.top() + 16.0
        {
            tip = Some(format!(
                "{}\n{} – {} s ({})\nvalue {:.4}\n{}",
                b.label,
                units::timestamp(b.start),
                units::timestamp(b.end),
                units::duration(b.end - b.start),
                b.value,
                b.who
            ));
        }
    }
    if let Some(t) = tip {
        egui::Tooltip::always_open(
            ui.ctx().clone(),
            ui.layer_id(),
            ui.scope_id().with("band-tip"),
            egui::PopupAnchor::Pointer,
        )
        .show(|ui| {
            ui.label(t);
        });
    }
}
