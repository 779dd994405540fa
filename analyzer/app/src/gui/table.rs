//! The event table (RT-460 §3.2): a virtual table over [`TableModel`] (only the rows on screen are laid
//! out), with a filter row of regular expressions.

use eframe::egui;
use std::sync::Arc;

use egui::Ui;
use socscope_analysis::live::{Growth, LiveLoad, Step, StepKind};
use socscope_analysis::loader::{self, LoadRequest, LoaderHandle, chunk_size};
use socscope_analysis::table::{
    Column, ColumnFilters, TableConsumer, TableModel, TableNames, TableRow, TableSnapshot,
};
use socscope_tracedb::{Filter, TimeRange, Timestamp, units};

use super::readers::TraceNames;
use super::views::{DrawContext, GroupView, LoadContext, ViewAction};
use socscope_analysis::loader::Progress;

/// Above this many rows the table stops loading and asks for a shorter interval.
const MAX_ROWS: u64 = 20_000_000;
const WIDTHS: [f32; 7] = [110.0, 44.0, 170.0, 90.0, 150.0, 100.0, 0.0];

/// Starts a load of the table's rows for a step of its [`LiveLoad`].
fn spawn(
    trace: &std::path::Path,
    filter: Filter,
    names: Arc<TableNames>,
) -> impl FnOnce(Step) -> LoaderHandle<TableSnapshot> + use<> {
    let trace = trace.to_path_buf();
    move |step| {
        let consumer = match step.kind {
            StepKind::Append => TableConsumer::appending_from(names, step.range.start),
            _ => TableConsumer::new(names),
        };
        loader::spawn(
            LoadRequest {
                trace,
                range: step.range,
                filter,
                chunk_events: chunk_size::TABLE,
            },
            consumer,
        )
    }
}

pub struct TableView {
    pub model: TableModel,
    /// The rows of the group's interval (new ones appended as a live trace grows).
    pub live: LiveLoad<TableSnapshot>,
    pub edit: ColumnFilters,
    pub error: Option<String>,
    scroll_to: Option<u64>,
    pub selected: Option<i64>,
    /// The selected row as it was clicked, shown whole in the details pane under the table (its
    /// parameters are cut at the column's width in the table).
    selected_row: Option<TableRow>,
    /// "Save filter" was clicked: the open trace saves the filter and its rows as a search result.
    pub save_filter: bool,
}

impl TableView {
    pub fn new(names: Arc<TableNames>, range: TimeRange) -> Self {
        Self {
            model: TableModel::new(names),
            live: LiveLoad::new(range, Growth::Append),
            edit: ColumnFilters::default(),
            error: None,
            scroll_to: None,
            selected: None,
            selected_row: None,
            save_filter: false,
        }
    }

    pub fn load(
        &mut self,
        trace: &std::path::Path,
        range: TimeRange,
        filter: Filter,
        names: Arc<TableNames>,
    ) {
        let filters = self.model.filters().clone();
        self.model = TableModel::new(names.clone());
        let _ = self.model.set_filters(filters);
        self.live.load(range, spawn(trace, filter, names));
    }

    /// The interval whose rows are loaded (or loading).
    pub fn loaded(&self) -> TimeRange {
        self.live.loaded()
    }

    /// The load stopped at [`MAX_ROWS`]: the rest of the interval is not listed.
    pub fn truncated(&self) -> bool {
        self.live.truncated()
    }

    pub fn extend(
        &mut self,
        trace: &std::path::Path,
        end: Timestamp,
        filter: Filter,
        names: Arc<TableNames>,
    ) {
        if self.busy() || end <= self.loaded().end || self.truncated() {
            return;
        }
        self.model.start_appending();
        self.live.extend(end, spawn(trace, filter, names));
    }

    /// Loading, or finished with a result not yet taken by `poll`.
    pub fn busy(&self) -> bool {
        self.live.busy()
    }

    pub fn progress(&self) -> Option<socscope_analysis::loader::Progress> {
        self.live.progress()
    }

    pub fn stop(&mut self) {
        self.live.stop();
    }

    pub fn poll(&mut self) -> bool {
        let mut changed = false;
        // Progress read before the snapshot: the snapshot holds at least what the progress says.
        let reached = self.live.progress().map_or(0, |p| p.loaded_ns);
        if let Some(snap) = self.live.poll() {
            changed = self.model.absorb(&snap);
        }
        if self.live.progress().is_some_and(|p| p.finished) {
            self.model.set_loading_done(true);
        }
        if self.model.loaded_rows() > MAX_ROWS && !self.truncated() {
            self.live.truncate(reached);
        }
        changed
    }

    /// Scrolls to the first row at or after `t`.
    pub fn show_time(&mut self, t: Timestamp) {
        self.scroll_to = Some(self.model.rank_at_time(t));
    }

    /// Draws the table; returns the timestamp of a clicked row.
    fn draw(&mut self, ui: &mut Ui) -> Option<Timestamp> {
        let mut clicked = None;
        let last_w = (ui.available_width() - WIDTHS.iter().sum::<f32>() - 40.0).max(120.0);
        let w = |i: usize| {
            if i == WIDTHS.len() - 1 {
                last_w
            } else {
                WIDTHS[i]
            }
        };
        ui.horizontal(|ui| {
            for (i, c) in Column::ALL.iter().enumerate() {
                ui.add_sized(
                    [w(i), 18.0],
                    egui::Label::new(egui::RichText::new(c.title()).strong()),
                );
            }
        });
        let mut changed = false;
        ui.horizontal(|ui| {
            for i in 0..WIDTHS.len() {
                let r = ui.add_sized(
                    [w(i), 18.0],
                    egui::TextEdit::singleline(&mut self.edit.patterns[i]).hint_text("<filter>"),
                );
                changed |= r.changed();
            }
        });
        if changed {
            match self.model.set_filters(self.edit.clone()) {
                Ok(()) => self.error = None,
                Err(e) => self.error = Some(e),
            }
        }
        if let Some(e) = &self.error {
            ui.colored_label(ui.visuals().error_fg_color, e);
        }
        let savable = !self.model.filters().is_empty()
            && !self.model.filtering()
            && !self.busy()
            && self.error.is_none();
        if ui
            .add_enabled(savable, egui::Button::new("Save filter"))
            .on_hover_text("Keep the filter and the events it found in the trace (Results…)")
            .on_disabled_hover_text("Type a filter and let it finish first")
            .clicked()
        {
            self.save_filter = true;
        }
        let row_h = 18.0;
        let total = self.model.row_count();
        if total == 0 {
            ui.weak(if self.busy() || self.model.filtering() {
                "loading…"
            } else if self.model.loaded_rows() > 0 {
                "no row matches the column filters"
            } else {
                "no events in this interval (check the type and producer filters)"
            });
        }
        let mut area = egui::ScrollArea::vertical().auto_shrink([false, false]);
        if let Some(rank) = self.scroll_to.take() {
            area = area.vertical_scroll_offset(rank as f32 * row_h);
        }
        let names = self.model.names();
        // egui lays out only the rows in view: millions of rows cost nothing until scrolled to.
        area.show_rows(
            ui,
            row_h,
            total.min(u32::MAX as u64) as usize,
            |ui, range| {
                for row in self.model.rows(range.start as u64..range.end as u64) {
                    let selected = self.selected == Some(row.id);
                    ui.horizontal(|ui| {
                        for (i, c) in Column::ALL.iter().enumerate() {
                            let text = names.cell(row, *c);
                            let empty = text.is_empty();
                            let rich = egui::RichText::new(text.as_str()).monospace().size(11.5);
                            let mut cell = if *c == Column::Parameters {
                                // Read from the left, as text is; cut at the column's edge, whole
                                // in the tooltip and in the details pane of the selected row.
                                ui.add_sized(
                                    [w(i), row_h - 2.0],
                                    egui::Button::selectable(selected, (rich, egui::Atom::grow()))
                                        .truncate(),
                                )
                            } else {
                                ui.add_sized(
                                    [w(i), row_h - 2.0],
                                    egui::Button::selectable(selected, rich).truncate(),
                                )
                            };
                            if *c == Column::Parameters && !empty {
                                cell = cell.on_hover_ui(|ui| {
                                    ui.set_max_width(560.0);
                                    ui.add(egui::Label::new(parameter_lines(&text)).wrap());
                                });
                            }
                            if empty {
                                // A screen reader still hears which cell it is on (a punctual event
                                // has no duration).
                                cell.widget_info(|| {
                                    egui::WidgetInfo::labeled(
                                        egui::Role::Button,
                                        true,
                                        format!("{}: none", c.title()),
                                    )
                                });
                            }
                            if cell.clicked() {
                                clicked = Some(row.clone());
                            }
                        }
                    });
                }
            },
        );
        if let Some(row) = clicked {
            let ts = row.ts;
            self.selected = Some(row.id);
            self.selected_row = Some(row);
            return Some(ts);
        }
        None
    }

    /// The details pane: the selected event whole, every column, its parameters one per line and
    /// selectable (to copy).
    fn details(&self, ui: &mut Ui) {
        let Some(row) = &self.selected_row else {
            ui.weak("Click a row to see the whole event here");
            return;
        };
        let names = self.model.names();
        ui.strong("Selected event");
        egui::ScrollArea::vertical()
            .id_salt("table-details")
            .max_height(180.0)
            .auto_shrink([false, true])
            .show(ui, |ui| {
                egui::Grid::new("table-details-grid")
                    .num_columns(2)
                    .spacing([12.0, 2.0])
                    .show(ui, |ui| {
                        for c in Column::ALL {
                            let text = names.cell(row, c);
                            ui.label(c.title());
                            let shown = match c {
                                Column::Parameters => parameter_lines(&text),
                                _ if text.is_empty() => "none".to_owned(),
                                _ => text,
                            };
                            ui.add(
                                egui::Label::new(egui::RichText::new(shown).monospace())
                                    .wrap()
                                    .selectable(true),
                            );
                            ui.end_row();
                        }
                    });
            });
    }
}

/// The parameters column's `a=1, b=x, c=3` as one `name=value` per line. A comma is a separator only
/// when a `name=` follows it, so a value holding `, ` stays on its line.
fn parameter_lines(params: &str) -> String {
    let mut out = String::with_capacity(params.len());
    let mut rest = params;
    while let Some(i) = rest.find(", ") {
        let after = &rest[i + 2..];
        let next_is_param = after
            .split_once('=')
            .is_some_and(|(name, _)| !name.is_empty() && !name.contains([' ', ',']));
        out.push_str(&rest[..i]);
        out.push_str(if next_is_param { "\n" } else { ", " });
        rest = after;
    }
    out.push_str(rest);
    out
}

impl GroupView for TableView {
    fn new(interval: TimeRange, names: &TraceNames) -> Self {
        TableView::new(names.table.clone(), interval)
    }
    fn ui(&mut self, ui: &mut Ui, _cx: &DrawContext<'_>) -> Option<ViewAction> {
        self.draw(ui).map(ViewAction::Cursor)
    }
    fn bottom_panels(
        &mut self,
        ui: &mut Ui,
        frame: egui::Frame,
        _cx: &DrawContext<'_>,
    ) -> Option<ViewAction> {
        egui::Panel::bottom("table-details")
            .frame(frame)
            .resizable(true)
            .show(ui, |ui| self.details(ui));
        None
    }
    fn load(&mut self, cx: &LoadContext<'_>) {
        TableView::load(
            self,
            cx.trace,
            cx.interval,
            cx.filter.clone(),
            cx.names.table.clone(),
        );
    }
    fn extend(&mut self, cx: &LoadContext<'_>) {
        TableView::extend(
            self,
            cx.trace,
            cx.interval.end,
            cx.filter.clone(),
            cx.names.table.clone(),
        );
    }
    fn poll(&mut self) {
        TableView::poll(self);
    }
    fn busy(&self) -> bool {
        TableView::busy(self) || self.model.filtering()
    }
    fn catching_up(&self, end: Timestamp) -> bool {
        self.live.catching_up(end)
    }
    fn progress(&self) -> Option<Progress> {
        TableView::progress(self)
    }
    fn stop(&mut self) {
        TableView::stop(self);
    }
    fn capped(&self) -> Option<String> {
        self.truncated().then(|| {
            format!(
                "showing the first {} events of the interval (up to {} s); select a shorter interval to see the rest",
                self.model.loaded_rows(),
                units::timestamp(self.loaded().end)
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::parameter_lines;

    #[test]
    fn parameters_go_one_per_line_and_values_with_commas_stay_whole() {
        assert_eq!(
            parameter_lines("name=futex, end=0.024007000, depth=1, nr=240"),
            "name=futex\nend=0.024007000\ndepth=1\nnr=240"
        );
        assert_eq!(
            parameter_lines("msg=a, b and c, level=2"),
            "msg=a, b and c\nlevel=2"
        );
        assert_eq!(parameter_lines(""), "");
        assert_eq!(parameter_lines("value=3"), "value=3");
    }
}
