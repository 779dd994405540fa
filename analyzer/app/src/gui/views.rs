//! What every view of a group does with its background load, behind one trait: the app loads, extends,
//! polls, stops and asks each view the same way instead of matching on the view kind (the lifecycle
//! itself is `socscope_analysis::live::LiveLoad`).

use std::path::Path;

use socscope_analysis::loader::Progress;
use socscope_analysis::sync::ViewFilter;
use socscope_tracedb::{Filter, TimeRange, Timestamp};

use super::session::{TraceDescription, TraceNames};

/// What a view needs to load its group's interval.
pub struct LoadContext<'a> {
    pub trace: &'a Path,
    /// The group's interval.
    pub interval: TimeRange,
    /// The group's filters, as the store applies them.
    pub filter: Filter,
    /// The group's filters, as the user set them.
    pub view_filter: &'a ViewFilter,
    pub meta: &'a TraceDescription,
    pub names: &'a TraceNames,
}

/// A view of a group, as the app drives it.
pub trait GroupView {
    /// Loads the group's interval afresh (new interval or filters).
    fn load(&mut self, cx: &LoadContext<'_>);
    /// The group's interval grew (a live trace): follow it as the view does.
    fn extend(&mut self, cx: &LoadContext<'_>);
    /// Takes what the background load published.
    fn poll(&mut self);
    /// Frames must go on (loading, or a result not yet shown).
    fn busy(&self) -> bool;
    /// The view has not yet loaded up to `end`, the end of its group's interval.
    fn catching_up(&self, end: Timestamp) -> bool;
    fn progress(&self) -> Option<Progress>;
    fn stop(&mut self);
    /// What a finished load brought, when it is not counted in events.
    fn summary(&self) -> Option<String> {
        None
    }
    /// Why part of the interval is not on screen (the view stopped at a cap), if it is not.
    fn capped(&self) -> Option<String> {
        None
    }
}

use super::{density::DensityView, gantt::GanttView, stats::StatsView, table::TableView};
use socscope_tracedb::units;

impl GroupView for GanttView {
    fn load(&mut self, cx: &LoadContext<'_>) {
        GanttView::load(self, cx.trace, cx.interval, cx.filter.clone(), cx.meta);
    }
    fn extend(&mut self, cx: &LoadContext<'_>) {
        GanttView::extend(self, cx.trace, cx.interval.end, cx.filter.clone(), cx.meta);
    }
    fn poll(&mut self) {
        GanttView::poll(self);
        if self.follow {
            let len = self.view.len();
            let end = self.loaded().end.max(self.view.start + 1);
            self.view = TimeRange::new(end - len, end);
        }
    }
    fn busy(&self) -> bool {
        GanttView::busy(self)
    }
    fn catching_up(&self, end: Timestamp) -> bool {
        self.live.catching_up(end)
    }
    fn progress(&self) -> Option<Progress> {
        GanttView::progress(self)
    }
    fn stop(&mut self) {
        GanttView::stop(self);
    }
    fn capped(&self) -> Option<String> {
        self.truncated().then(|| {
            format!(
                "showing the first {} events of the interval (up to {} s); zoom in to see the rest",
                self.model.events(),
                units::timestamp(self.loaded().end)
            )
        })
    }
}

impl GroupView for TableView {
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

impl GroupView for DensityView {
    fn load(&mut self, cx: &LoadContext<'_>) {
        DensityView::load(self, cx.trace, cx.interval, cx.filter.clone());
    }
    fn extend(&mut self, cx: &LoadContext<'_>) {
        DensityView::extend(self, cx.trace, cx.interval, cx.filter.clone());
    }
    fn poll(&mut self) {
        DensityView::poll(self);
    }
    fn busy(&self) -> bool {
        DensityView::busy(self)
    }
    fn catching_up(&self, end: Timestamp) -> bool {
        self.live.catching_up(end)
    }
    fn progress(&self) -> Option<Progress> {
        DensityView::progress(self)
    }
    fn stop(&mut self) {
        DensityView::stop(self);
    }
}

impl GroupView for StatsView {
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
