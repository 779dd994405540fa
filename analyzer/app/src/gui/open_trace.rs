//! An open trace in the GUI: its description and names as read so far, its view groups with their views,
//! and the state of its results window; following the trace as it grows and keeping each group's views
//! loaded ([`OpenTrace::update`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use socscope_analysis::sync::{ViewFilter, ViewGroups, ViewKind};
use socscope_analysis::timebar::TimeBar;
use socscope_tracedb::AnalysisResult;
use socscope_tracedb::{Filter, TimeRange};

use super::density::DensityView;
use super::gantt::GanttView;
use super::ocelotl::OcelotlView;
use super::readers::{TraceMetadata, TraceNames, TraceWatch};
use super::stats::StatsView;
use super::table::TableView;
use super::theme::Colours;
use super::timebar::BarEdit;
use super::traceviz::TraceVizView;
use super::views::{GroupView, LoadContext};

/// Above this many events a new group opens on the first part of the trace rather than all of it.
pub(super) const FIRST_OPEN_EVENTS: u64 = 5_000_000;

/// Declares [`GroupViews`] from one line per view (its kind, its field, its type), and with it the
/// lookups by kind: the only place that lists the views.
macro_rules! group_views {
    ($($kind:ident => $field:ident: $view:ty),* $(,)?) => {
        /// One view group's views (the group's shared state lives in [`ViewGroups`]).
        pub struct GroupViews {
            $(pub $field: $view,)*
            pub bars: HashMap<ViewKind, (TimeBar, BarEdit)>,
            /// The group revision each view last loaded.
            pub loaded: HashMap<ViewKind, u64>,
        }

        impl GroupViews {
            /// The views of a new group on `interval`.
            fn new(interval: TimeRange, names: &TraceNames) -> Self {
                Self {
                    $($field: <$view as GroupView>::new(interval, names),)*
                    bars: HashMap::new(),
                    loaded: HashMap::new(),
                }
            }

            /// Whether the view of kind `k` reads the store's summary (see [`GroupView::reads_summary`]).
            fn reads_summary(k: ViewKind) -> bool {
                match k {
                    $(ViewKind::$kind => <$view as GroupView>::reads_summary(),)*
                }
            }

            /// The view of kind `k`.
            pub fn view(&self, k: ViewKind) -> &dyn GroupView {
                match k {
                    $(ViewKind::$kind => &self.$field,)*
                }
            }

            /// The view of kind `k`, to drive it.
            pub fn view_mut(&mut self, k: ViewKind) -> &mut dyn GroupView {
                match k {
                    $(ViewKind::$kind => &mut self.$field,)*
                }
            }
        }
    };
}

group_views! {
    Gantt => gantt: GanttView,
    Table => table: TableView,
    Density => density: DensityView,
    Statistics => stats: StatsView,
    Ocelotl => ocelotl: OcelotlView,
    TraceViz => traceviz: TraceVizView,
}

/// An open trace.
pub struct OpenTrace {
    pub path: PathBuf,
    pub title: String,
    watch: TraceWatch,
    pub meta: Option<TraceMetadata>,
    pub names: Option<TraceNames>,
    pub error: Option<String>,
    pub groups: ViewGroups,
    pub views: Vec<GroupViews>,
    pub active_group: usize,
    pub first_view: ViewKind,
    pub(super) types_dialog: bool,
    pub(super) producers_dialog: bool,
    pub results: ResultsPanel,
    /// Whether the trace's trigger firings were looked for (once, when it opens).
    triggers_checked: bool,
}

impl OpenTrace {
    pub fn open(path: &Path, first_view: ViewKind) -> Self {
        Self {
            path: path.to_path_buf(),
            title: path.file_stem().map_or_else(
                || path.display().to_string(),
                |s| s.to_string_lossy().into_owned(),
            ),
            watch: TraceWatch::start(path),
            meta: None,
            names: None,
            error: None,
            groups: ViewGroups::default(),
            views: Vec::new(),
            active_group: 0,
            first_view,
            types_dialog: false,
            producers_dialog: false,
            results: ResultsPanel::default(),
            triggers_checked: false,
        }
    }

    /// Marks the trace's trigger firings as looked for; whether they were not yet.
    pub fn first_look_for_triggers(&mut self) -> bool {
        !std::mem::replace(&mut self.triggers_checked, true)
    }

    /// The whole trace: up to and including its last event.
    pub fn whole(&self) -> TimeRange {
        self.meta
            .as_ref()
            .map_or(TimeRange::new(0, 1), |m| m.info.range())
    }

    pub fn live(&self) -> bool {
        self.meta.as_ref().is_some_and(|m| !m.info.finished)
    }

    fn first_interval(&self, view: ViewKind) -> TimeRange {
        let whole = self.whole();
        // Ocelotl and TraceViz read the store's summary, whose cost does not grow with the events.
        let summarised = GroupViews::reads_summary(view);
        match &self.meta {
            Some(m) if m.info.event_count > FIRST_OPEN_EVENTS && !summarised => {
                let len = (whole.len() as f64 * FIRST_OPEN_EVENTS as f64
                    / m.info.event_count as f64) as i64;
                TimeRange::new(whole.start, whole.start + len.max(1))
            }
            _ => whole,
        }
    }

    pub fn new_group(&mut self, view: ViewKind) {
        let Some(names) = &self.names else { return };
        let interval = self.first_interval(view);
        let i = self.groups.open(interval, view);
        self.views.push(GroupViews::new(interval, names));
        self.active_group = i;
    }

    fn store_filter(&self, f: &ViewFilter) -> Filter {
        let Some(m) = &self.meta else {
            return Filter::all();
        };
        f.to_store_filter(
            m.types.iter().map(|t| t.id),
            m.producers.iter().map(|p| p.id),
        )
    }

    /// Reads what the background threads published and keeps the views loading; no store access here.
    pub fn update(&mut self, colours: &Colours) {
        if let Some(names) = &mut self.names
            && names.colour_generation != colours.generation
            && let Some(meta) = &self.meta
        {
            *names = TraceNames::new(meta, colours);
        }
        if let Some(m) = self.watch.poll() {
            match m {
                Ok(m) => {
                    let old_whole = self.meta.as_ref().map(|_| self.whole());
                    let structure_changed = self.meta.as_ref().is_none_or(|o| {
                        o.producers.len() != m.producers.len() || o.types.len() != m.types.len()
                    });
                    self.meta = Some(m);
                    if structure_changed {
                        let names = TraceNames::new(self.meta.as_ref().expect("just set"), colours);
                        self.names = Some(names);
                    }
                    if self.groups.is_empty() {
                        self.new_group(self.first_view);
                    }
                    let whole = self.whole();
                    if let Some(old) = old_whole {
                        // The groups, time bars and selections that showed the end follow it.
                        self.groups.trace_grew(old, whole);
                        for v in &mut self.views {
                            for (bar, _) in v.bars.values_mut() {
                                bar.trace_grew(old, whole);
                            }
                        }
                    }
                }
                Err(e) => self.error = Some(e),
            }
        }
        let (Some(meta), Some(names)) = (self.meta.clone(), self.names.as_ref()) else {
            return;
        };
        let whole = self.whole();
        for gi in 0..self.groups.len() {
            let g = self.groups.get(gi).expect("index in range").clone();
            let cx = LoadContext {
                trace: &self.path,
                interval: g.interval,
                filter: self.store_filter(&g.filter),
                view_filter: &g.filter,
                meta: &meta,
                names,
            };
            let v = &mut self.views[gi];
            // Only the view on screen loads (others load when switched to, on the group's interval).
            if gi == self.active_group {
                let k = g.active;
                let bar = &mut v
                    .bars
                    .entry(k)
                    .or_insert_with(|| (TimeBar::new(whole), BarEdit::default()))
                    .0;
                if v.loaded.get(&k) != Some(&g.revision) {
                    v.loaded.insert(k, g.revision);
                    bar.set_whole(whole);
                    bar.select(g.interval.start, g.interval.end);
                    bar.load();
                    v.view_mut(k).load(&cx);
                } else if g.interval.end > g.interval.start {
                    v.view_mut(k).extend(&cx);
                }
            }
            for k in ViewKind::ALL {
                v.view_mut(k).poll();
            }
        }
    }

    /// Whether the view on screen has not yet loaded up to its group's end: a grown trace that
    /// it will extend to on a later frame (extensions are throttled), so frames must go on.
    fn catching_up(&self) -> bool {
        let (Some(g), Some(v)) = (
            self.groups.get(self.active_group),
            self.views.get(self.active_group),
        ) else {
            return false;
        };
        v.view(g.active).catching_up(g.interval.end)
    }

    pub fn busy(&self) -> bool {
        self.live()
            || self.catching_up()
            || self
                .views
                .iter()
                .any(|v| ViewKind::ALL.iter().any(|&k| v.view(k).busy()))
    }
}

/// What the trace's results window shows and what the user asked of it (its behaviour: `results.rs`).
#[derive(Default)]
pub struct ResultsPanel {
    pub open: bool,
    /// The trace's results, as last read.
    pub list: Vec<AnalysisResult>,
    /// The result whose bands or groups are applied.
    pub applied: Option<i64>,
    /// The last thing done or the last error, shown in the panel and the toolbar.
    pub status: Option<(bool, String)>,
    pub(super) confirm_delete: Option<i64>,
}
