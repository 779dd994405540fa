//! The event table (RT-460 §3.2): a virtual table over [`TableModel`] (only the rows on screen are laid
//! out), with a filter row of regular expressions.

use eframe::egui;
use std::sync::Arc;

use egui::Ui;
use socscope_analysis::loader::{self, LoadRequest, LoaderHandle, chunk_size};
use socscope_analysis::table::{
    Column, ColumnFilters, TableConsumer, TableModel, TableNames, TableSnapshot,
};
use socscope_tracedb::{Filter, TimeRange, Timestamp};

/// Above this many rows the table stops loading and asks for a shorter interval.
const MAX_ROWS: u64 = 20_000_000;
const WIDTHS: [f32; 6] = [110.0, 44.0, 170.0, 90.0, 150.0, 0.0];

pub struct TableView {
    pub model: TableModel,
    loader: Option<LoaderHandle<TableSnapshot>>,
    seen: u64,
    pub loaded: TimeRange,
    pub edit: ColumnFilters,
    pub error: Option<String>,
    pub truncated: bool,
    /// Where the running load started (its progress counts from there).
    load_start: i64,
    scroll_to: Option<u64>,
    pub selected: Option<i64>,
    /// "Save filter" was clicked: the session saves the filter and its rows as a search result.
    pub save_filter: bool,
}

impl TableView {
    pub fn new(names: Arc<TableNames>, range: TimeRange) -> Self {
        Self {
            model: TableModel::new(names),
            loader: None,
            seen: 0,
            loaded: range,
            edit: ColumnFilters::default(),
            error: None,
            truncated: false,
            load_start: range.start,
            scroll_to: None,
            selected: None,
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
        self.loaded = range;
        self.load_start = range.start;
        self.seen = 0;
        self.truncated = false;
        self.loader = Some(loader::spawn(
            LoadRequest {
                trace: trace.to_path_buf(),
                range,
                filter,
                chunk_events: chunk_size::TABLE,
            },
            TableConsumer::new(names),
        ));
    }

    pub fn extend(
        &mut self,
        trace: &std::path::Path,
        end: Timestamp,
        filter: Filter,
        names: Arc<TableNames>,
    ) {
        if self.busy() || end <= self.loaded.end || self.truncated {
            return;
        }
        let from = self.loaded.end;
        self.load_start = from;
        self.model.start_appending();
        self.seen = 0;
        self.loaded = TimeRange::new(self.loaded.start, end);
        self.loader = Some(loader::spawn(
            LoadRequest {
                trace: trace.to_path_buf(),
                range: TimeRange::new(from, end),
                filter,
                chunk_events: chunk_size::TABLE,
            },
            TableConsumer::appending_from(names, from),
        ));
    }

    /// Loading, or finished with a result not yet taken by `poll`.
    pub fn busy(&self) -> bool {
        self.loader.as_ref().is_some_and(|l| !l.settled(self.seen))
    }

    pub fn progress(&self) -> Option<socscope_analysis::loader::Progress> {
        self.loader.as_ref().map(|l| l.progress())
    }

    pub fn stop(&mut self) {
        if let Some(l) = &self.loader {
            l.cancel();
        }
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
        let p = l.progress();
        if p.finished {
            self.model.set_loading_done(true);
        }
        if self.model.loaded_rows() > MAX_ROWS && !self.truncated {
            l.cancel();
            self.truncated = true;
            let end = (self.load_start + reached).clamp(self.loaded.start + 1, self.loaded.end);
            self.loaded = TimeRange::new(self.loaded.start, end);
        }
        changed
    }

    /// Scrolls to the first row at or after `t`.
    pub fn show_time(&mut self, t: Timestamp) {
        self.scroll_to = Some(self.model.rank_at_time(t));
    }

    /// Draws the table; returns the timestamp of a clicked row.
    pub fn ui(&mut self, ui: &mut Ui) -> Option<Timestamp> {
        let mut clicked = None;
        let last_w = (ui.available_width() - WIDTHS.iter().sum::<f32>() - 40.0).max(120.0);
        let w = |i: usize| if i == 5 { last_w } else { WIDTHS[i] };
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
            for i in 0..6 {
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
                            if ui
                                .add_sized(
                                    [w(i), row_h - 2.0],
                                    egui::Button::selectable(
                                        selected,
                                        egui::RichText::new(text).monospace().size(11.5),
                                    )
                                    .truncate(),
                                )
                                .clicked()
                            {
                                clicked = Some((row.id, row.ts));
                            }
                        }
                    });
                }
            },
        );
        if let Some((id, ts)) = clicked {
            self.selected = Some(id);
            return Some(ts);
        }
        None
    }
}
