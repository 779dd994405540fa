//! View synchronisation (RT-460 §2.3): the views of one *group* share a time interval, type and producer
//! filters and a cursor; several groups can be open on the same trace, each synchronised only within
//! itself.
//!
//! Start here: [`ViewGroups`] (open, switch, per-group state), [`ViewGroup`], [`ViewFilter`].

use std::collections::BTreeSet;

use socscope_tracedb::{Filter, ProducerId, TimeRange, Timestamp, TypeId};

/// The analysis views a group synchronises: Framesoc's four (RT-460 §3), Ocelotl's overview and
/// TraceViz.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ViewKind {
    /// Event density histogram (§3.4).
    Density,
    /// Statistics pie and table (§3.3).
    Statistics,
    /// Gantt chart (§3.1).
    Gantt,
    /// Event table (§3.2).
    Table,
    /// Ocelotl's aggregated overview ("Ocelotl: Large Trace Overviews", RR-8524).
    Ocelotl,
    /// TraceViz's per-actor histograms and outline (TraceViz, IHM'16).
    TraceViz,
}

impl ViewKind {
    /// Every view, in toolbar order.
    pub const ALL: [ViewKind; 6] = [
        ViewKind::Density,
        ViewKind::Statistics,
        ViewKind::Gantt,
        ViewKind::Table,
        ViewKind::Ocelotl,
        ViewKind::TraceViz,
    ];

    /// The name on its toolbar button.
    pub const fn label(self) -> &'static str {
        match self {
            ViewKind::Density => "Density",
            ViewKind::Statistics => "Statistics",
            ViewKind::Gantt => "Gantt",
            ViewKind::Table => "Table",
            ViewKind::Ocelotl => "Ocelotl",
            ViewKind::TraceViz => "TraceViz",
        }
    }

    /// Parses a label or its lower-case form.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| {
            k.label().eq_ignore_ascii_case(name) || (name == "pie" && *k == Self::Statistics)
        })
    }
}

/// Which types and producers a group's views show: what is *hidden*, so types and producers that appear
/// later in a live trace are shown.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ViewFilter {
    /// Hidden event types.
    pub hidden_types: BTreeSet<TypeId>,
    /// Hidden producers.
    pub hidden_producers: BTreeSet<ProducerId>,
}

impl ViewFilter {
    /// Whether everything is shown.
    pub fn is_empty(&self) -> bool {
        self.hidden_types.is_empty() && self.hidden_producers.is_empty()
    }

    /// Whether an event of `type_id` from `producer` is shown.
    pub fn shows(&self, type_id: TypeId, producer: ProducerId) -> bool {
        !self.hidden_types.contains(&type_id) && !self.hidden_producers.contains(&producer)
    }

    /// The store filter for this view filter, given every type and producer of the trace (the store
    /// filters on what is *kept*).
    pub fn to_store_filter(
        &self,
        all_types: impl IntoIterator<Item = TypeId>,
        all_producers: impl IntoIterator<Item = ProducerId>,
    ) -> Filter {
        let mut f = Filter::all();
        if !self.hidden_types.is_empty() {
            f = f.types(
                all_types
                    .into_iter()
                    .filter(|t| !self.hidden_types.contains(t)),
            );
        }
        if !self.hidden_producers.is_empty() {
            f = f.producers(
                all_producers
                    .into_iter()
                    .filter(|p| !self.hidden_producers.contains(p)),
            );
        }
        f
    }
}

/// What the views of one group share.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ViewGroup {
    /// Number shown to the user (1, 2, ...), unique per trace.
    pub number: u32,
    /// The interval every view of the group loads.
    pub interval: TimeRange,
    /// The filters every view of the group applies.
    pub filter: ViewFilter,
    /// A time to mark in every view (set by clicking an event table row).
    pub cursor: Option<Timestamp>,
    /// The view on screen.
    pub active: ViewKind,
    /// Bumped whenever interval or filter change, so views know to reload.
    pub revision: u64,
}

impl ViewGroup {
    /// Switches to `view` keeping the interval and filters (the toolbar buttons of §2.3).
    pub fn switch_to(&mut self, view: ViewKind) {
        self.active = view;
    }

    /// Loads `interval` in every view of the group.
    pub fn set_interval(&mut self, interval: TimeRange) {
        if interval != self.interval {
            self.interval = interval;
            self.revision += 1;
        }
    }

    /// Applies `filter` in every view of the group.
    pub fn set_filter(&mut self, filter: ViewFilter) {
        if filter != self.filter {
            self.filter = filter;
            self.revision += 1;
        }
    }
}

/// The groups open on one trace.
#[derive(Clone, Debug, Default)]
pub struct ViewGroups {
    groups: Vec<ViewGroup>,
    next_number: u32,
}

impl ViewGroups {
    /// Opens a new group on `interval` showing `view`, and returns its index.
    pub fn open(&mut self, interval: TimeRange, view: ViewKind) -> usize {
        self.next_number += 1;
        self.groups.push(ViewGroup {
            number: self.next_number,
            interval,
            filter: ViewFilter::default(),
            cursor: None,
            active: view,
            revision: 0,
        });
        self.groups.len() - 1
    }

    /// Closes the group at `index`.
    pub fn close(&mut self, index: usize) {
        if index < self.groups.len() {
            self.groups.remove(index);
        }
    }

    /// The groups, in opening order.
    pub fn groups(&self) -> &[ViewGroup] {
        &self.groups
    }

    /// One group.
    pub fn get(&self, index: usize) -> Option<&ViewGroup> {
        self.groups.get(index)
    }

    /// One group, to change it.
    pub fn get_mut(&mut self, index: usize) -> Option<&mut ViewGroup> {
        self.groups.get_mut(index)
    }

    /// A live trace grew from `old` to `new` (the whole trace before and after): a group whose interval
    /// reached the old end follows the end (its views extend what they loaded: no revision bump, which
    /// would reload them from scratch); a group on an earlier part of the trace stays where it is.
    /// Returns the indices of the groups that followed.
    pub fn trace_grew(&mut self, old: TimeRange, new: TimeRange) -> Vec<usize> {
        let mut followed = Vec::new();
        for (i, g) in self.groups.iter_mut().enumerate() {
            if g.interval.end >= old.end && new.end > g.interval.end {
                g.interval = TimeRange::new(g.interval.start, new.end);
                followed.push(i);
            }
        }
        followed
    }

    /// How many groups are open.
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    /// Whether no group is open.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_synchronise_only_within_themselves() {
        let mut g = ViewGroups::default();
        let a = g.open(TimeRange::new(0, 100), ViewKind::Density);
        let b = g.open(TimeRange::new(0, 100), ViewKind::Gantt);
        g.get_mut(a).unwrap().set_interval(TimeRange::new(10, 20));
        g.get_mut(a).unwrap().switch_to(ViewKind::Table);
        let ga = g.get(a).unwrap();
        assert_eq!(
            (ga.interval, ga.active, ga.revision),
            (TimeRange::new(10, 20), ViewKind::Table, 1)
        );
        let gb = g.get(b).unwrap();
        assert_eq!((gb.interval, gb.revision), (TimeRange::new(0, 100), 0));
        assert_eq!((ga.number, gb.number), (1, 2));
    }

    #[test]
    fn same_interval_or_filter_does_not_reload() {
        let mut g = ViewGroups::default();
        let a = g.open(TimeRange::new(0, 100), ViewKind::Density);
        let group = g.get_mut(a).unwrap();
        group.set_interval(TimeRange::new(0, 100));
        group.set_filter(ViewFilter::default());
        assert_eq!(group.revision, 0);
        let mut f = ViewFilter::default();
        f.hidden_types.insert(3);
        group.set_filter(f);
        assert_eq!(group.revision, 1);
    }

    #[test]
    fn store_filter_keeps_what_is_not_hidden() {
        let mut f = ViewFilter::default();
        assert_eq!(f.to_store_filter([1, 2, 3], [7, 8]), Filter::all());
        f.hidden_types.insert(2);
        f.hidden_producers.insert(7);
        let s = f.to_store_filter([1, 2, 3], [7, 8]);
        assert_eq!(s.types, Some(vec![1, 3]));
        assert_eq!(s.producers, Some(vec![8]));
        assert!(f.shows(1, 8) && !f.shows(2, 8) && !f.shows(1, 7));
    }

    #[test]
    fn groups_at_the_end_follow_a_growing_trace() {
        let mut g = ViewGroups::default();
        let end = g.open(TimeRange::new(0, 100), ViewKind::Density);
        let past = g.open(TimeRange::new(10, 50), ViewKind::Gantt);
        let tail = g.open(TimeRange::new(80, 100), ViewKind::Table);
        let followed = g.trace_grew(TimeRange::new(0, 100), TimeRange::new(0, 150));
        assert_eq!(followed, vec![end, tail]);
        assert_eq!(g.get(end).unwrap().interval, TimeRange::new(0, 150));
        assert_eq!(g.get(tail).unwrap().interval, TimeRange::new(80, 150));
        assert_eq!(g.get(past).unwrap().interval, TimeRange::new(10, 50));
        // Following is not a new interval: views extend rather than reload.
        assert!(g.groups().iter().all(|x| x.revision == 0));
        // Nothing new, nothing moves.
        assert!(
            g.trace_grew(TimeRange::new(0, 150), TimeRange::new(0, 150))
                .is_empty()
        );
    }

    #[test]
    fn view_names_parse() {
        assert_eq!(ViewKind::from_name("gantt"), Some(ViewKind::Gantt));
        assert_eq!(ViewKind::from_name("pie"), Some(ViewKind::Statistics));
        assert_eq!(ViewKind::from_name("ocelotl"), Some(ViewKind::Ocelotl));
        assert_eq!(ViewKind::from_name("traceviz"), Some(ViewKind::TraceViz));
        assert_eq!(ViewKind::from_name("nope"), None);
    }
}
