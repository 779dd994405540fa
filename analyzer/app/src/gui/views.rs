//! What every view of a group does with its background load, behind one trait: the app loads, extends,
//! polls, stops and asks each view the same way instead of matching on the view kind (the lifecycle
//! itself is `socscope_analysis::live::LiveLoad`).

use std::path::Path;

use socscope_analysis::loader::Progress;
use socscope_analysis::sync::ViewFilter;
use socscope_tracedb::{Filter, TimeRange, Timestamp};

use super::readers::{TraceMetadata, TraceNames};

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
