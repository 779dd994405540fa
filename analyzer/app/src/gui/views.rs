//! What a view of a group is, behind one trait: the app loads, extends, polls, stops and draws each view
//! the same way, and turns what the user did in it into changes of the group, instead of matching on the
//! view kind (the load lifecycle itself is `socscope_analysis::live::LiveLoad`).

use std::path::Path;

use eframe::egui;
use egui::Ui;
use socscope_analysis::loader::Progress;
use socscope_analysis::results::Band;
use socscope_analysis::sync::ViewFilter;
use socscope_tracedb::{Filter, TimeRange, Timestamp, TypeId};

use super::readers::{TraceMetadata, TraceNames};
use super::theme::{ColourEdit, Colours};

/// What a view needs to load its group's interval.
pub struct LoadContext<'a> {
    pub trace: &'a Path,
    /// The group's interval.
    pub interval: TimeRange,
    /// The group's filters, as the store applies them.
    pub filter: Filter,
    /// The group's filters, as the user set them.
    pub view_filter: &'a ViewFilter,
    pub meta: &'a TraceMetadata,
    pub names: &'a TraceNames,
}

/// What a view draws with besides its own state: its trace and group as they are this frame.
pub struct DrawContext<'a> {
    pub names: &'a TraceNames,
    /// The whole trace.
    pub whole: TimeRange,
    /// The group's cursor.
    pub cursor: Option<Timestamp>,
    /// The group's filters, as the user set them.
    pub filter: &'a ViewFilter,
    pub colours: &'a Colours,
}

/// What the user asked of the group, or of the app, through a view this frame.
#[derive(Clone, Debug)]
pub enum ViewAction {
    /// The group's interval becomes this one (every view of the group follows).
    Load(TimeRange),
    /// The group's cursor moves here.
    Cursor(Timestamp),
    /// A new colour for a type or a producer (kept per user, in every trace).
    Colour(ColourEdit),
    /// Hide the type if shown, show it if hidden (the group's type filter, as the Types… dialog).
    ToggleType(TypeId),
    /// Open a Gantt chart on this interval, in a new group.
    GanttOn(TimeRange),
}

/// A view of a group, as the app drives and draws it. Adding a view is a type implementing this and
/// one line in `open_trace::GroupViews`.
pub trait GroupView {
    /// The view of a new group on `interval`.
    fn new(interval: TimeRange, names: &TraceNames) -> Self
    where
        Self: Sized;
    /// The view reads the store's summary, whose cost does not grow with the events: a new group on it
    /// opens on the whole trace, however many events it holds.
    fn reads_summary() -> bool
    where
        Self: Sized,
    {
        false
    }
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
    /// The view's own switches in the group's toolbar, when it is on screen.
    fn toolbar_switches(&mut self, _ui: &mut Ui) {}
    /// The interval on screen when it is not the loaded one (the time bar then shows it).
    fn displayed(&self) -> Option<TimeRange> {
        None
    }
    /// An interval the view on screen asks its group to load, before it is drawn this frame.
    fn wants_interval(&self) -> Option<TimeRange> {
        None
    }
    /// Panels of the view below it, over the time bar, drawn before the view (egui lays out side panels
    /// before the central one).
    fn bottom_panels(
        &mut self,
        _ui: &mut Ui,
        _frame: egui::Frame,
        _cx: &DrawContext<'_>,
    ) -> Option<ViewAction> {
        None
    }
    /// Draws the view in the central panel; what the user asked of the group there.
    fn ui(&mut self, ui: &mut Ui, cx: &DrawContext<'_>) -> Option<ViewAction>;
    /// The group's cursor moved to `t` (from another view or this one).
    fn cursor_moved(&mut self, _t: Timestamp) {}
    /// Frame `i` of the view's moving phase in the `pan-zoom` script (the frame-time benchmark):
    /// 100 frames zooming in, 100 panning right, 100 panning left, 100 zooming out, as the view
    /// zooms and pans; an interval for the group when the view zooms by loading one.
    fn scripted_move(
        &mut self,
        _i: u64,
        _whole: TimeRange,
        _interval: TimeRange,
    ) -> Option<TimeRange> {
        None
    }
    /// The saved result's bands the view draws over itself, if it draws them.
    fn bands_mut(&mut self) -> Option<&mut Vec<Band>> {
        None
    }
}
