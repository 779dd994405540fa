//! The TraceViz view's model (TraceViz, IHM'16, §4-5), with no GUI: the actor tree (the producer hierarchy,
//! hidden actors, selection, the user's row order, named groups aggregated per pixel), the rows and
//! the stacked outline drawn from a [`Timeline`], the timeline's load on a loader thread, and the
//! clustering that proposes groups of similar actors.
//!
//! **Group similar actors** (the paper's future work): every actor's histogram is turned into a
//! distribution over time (divided by its sum), and the distance of two actors is the total
//! variation distance of their distributions, `½ Σ_i |a_i − b_i|`, in [0, 1]: 0 for actors active in
//! the same proportions at the same times, 1 for actors never active in the same pixel. Actors with
//! an empty histogram are at distance 0 of each other and 1 of the rest. Clusters are merged
//! bottom-up with average linkage (the mean distance between their members) while the closest pair is
//! within the threshold; every cluster of two actors or more is proposed as a group.
//!
//! Start here: [`ActorLayout`], [`TimelineState`], [`similar_groups`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use socscope_tracedb::{Filter, ProducerId, TimeRange, TraceReader};

use crate::live::{Growth, LiveLoad};
use crate::loader::{LoaderHandle, Progress, spawn_task};
use crate::traceviz::{self, GroupOp, Statistic, Timeline};

/// A row of the view: an actor, or a group of actors drawn as one histogram.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Row {
    Actor(ProducerId),
    Group(u32),
}

/// A named group of actors, aggregated bin by bin.
#[derive(Clone, Debug, PartialEq)]
pub struct ActorGroup {
    pub name: String,
    pub members: Vec<ProducerId>,
    pub op: GroupOp,
}

/// One actor of the tree.
#[derive(Clone, Debug, PartialEq)]
pub struct Actor {
    pub id: ProducerId,
    pub label: String,
    /// Depth in the producer hierarchy.
    pub depth: usize,
}

/// A row as the view lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct RowItem {
    pub row: Row,
    pub label: String,
    pub depth: usize,
    pub hidden: bool,
}

/// TraceViz's layout of actors: what is shown, in which order, grouped how, hidden and selected.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ActorLayout {
    actors: Vec<Actor>,
    /// The rows in display order (an actor in a group is not a row of its own).
    order: Vec<Row>,
    pub groups: BTreeMap<u32, ActorGroup>,
    next_group: u32,
    pub hidden: BTreeSet<Row>,
    pub selected: BTreeSet<Row>,
    /// The row a shift-click extends the selection from.
    anchor: Option<Row>,
}

impl ActorLayout {
    /// The producers in hierarchy order (parents before children), each with its depth.
    pub fn new(actors: Vec<Actor>) -> Self {
        let order = actors.iter().map(|a| Row::Actor(a.id)).collect();
        Self {
            actors,
            order,
            ..Self::default()
        }
    }

    /// Adds producers that appeared since (a live trace), after the rows there are.
    pub fn add_actors(&mut self, actors: &[Actor]) {
        for a in actors {
            if !self.actors.iter().any(|x| x.id == a.id) {
                self.actors.push(a.clone());
                self.order.push(Row::Actor(a.id));
            }
        }
    }

    /// The actors, in hierarchy order.
    pub fn actors(&self) -> &[Actor] {
        &self.actors
    }

    fn actor(&self, id: ProducerId) -> Option<&Actor> {
        self.actors.iter().find(|a| a.id == id)
    }

    /// The rows in display order.
    pub fn order(&self) -> &[Row] {
        &self.order
    }

    /// Every row with its label and state, in display order.
    pub fn rows(&self) -> Vec<RowItem> {
        self.order
            .iter()
            .map(|&row| RowItem {
                row,
                label: self.label(row),
                depth: match row {
                    Row::Actor(id) => self.actor(id).map_or(0, |a| a.depth),
                    Row::Group(_) => 0,
                },
                hidden: self.hidden.contains(&row),
            })
            .collect()
    }

    /// The rows drawn (not hidden), in display order.
    pub fn visible(&self) -> Vec<Row> {
        self.order
            .iter()
            .copied()
            .filter(|r| !self.hidden.contains(r))
            .collect()
    }

    /// A row's label: the actor's, or the group's name with its operator and size.
    pub fn label(&self, row: Row) -> String {
        match row {
            Row::Actor(id) => self
                .actor(id)
                .map_or_else(|| format!("producer {id}"), |a| a.label.clone()),
            Row::Group(g) => self.groups.get(&g).map_or_else(String::new, |g| {
                format!("{} ({} of {})", g.name, op_name(g.op), g.members.len())
            }),
        }
    }

    /// Hides or shows a row.
    pub fn toggle_hidden(&mut self, row: Row) {
        if !self.hidden.remove(&row) {
            self.hidden.insert(row);
        }
    }

    /// A click on a row: alone selects it; with `ctrl` toggles it; with `shift` selects every row from
    /// the last clicked one to it.
    pub fn click(&mut self, row: Row, shift: bool, ctrl: bool) {
        if shift && let Some(a) = self.anchor {
            let pos = |r: Row| self.order.iter().position(|x| *x == r);
            if let (Some(i), Some(j)) = (pos(a), pos(row)) {
                let (i, j) = (i.min(j), i.max(j));
                if !ctrl {
                    self.selected.clear();
                }
                self.selected.extend(self.order[i..=j].iter().copied());
                return;
            }
        }
        if ctrl {
            if !self.selected.remove(&row) {
                self.selected.insert(row);
            }
        } else {
            self.selected.clear();
            self.selected.insert(row);
        }
        self.anchor = Some(row);
    }

    /// Moves the row at display position `from` to position `to` (a drag in the tree; the outline's
    /// layers follow the order).
    pub fn move_row(&mut self, from: usize, to: usize) {
        if from >= self.order.len() {
            return;
        }
        let r = self.order.remove(from);
        self.order.insert(to.min(self.order.len()), r);
    }

    /// Makes a group of the selected actors (the members of selected groups included), named `name`,
    /// at the place of the first of them; returns its id, or `None` with fewer than two actors.
    pub fn group_selected(&mut self, name: &str, op: GroupOp) -> Option<u32> {
        let mut members: Vec<ProducerId> = Vec::new();
        for r in &self.order {
            if !self.selected.contains(r) {
                continue;
            }
            match *r {
                Row::Actor(id) => members.push(id),
                Row::Group(g) => members.extend(
                    self.groups
                        .get(&g)
                        .into_iter()
                        .flat_map(|g| g.members.clone()),
                ),
            }
        }
        self.make_group(name, members, op)
    }

    /// Makes a group of `members`, placed where the first of them is shown.
    pub fn make_group(&mut self, name: &str, members: Vec<ProducerId>, op: GroupOp) -> Option<u32> {
        if members.len() < 2 {
            return None;
        }
        let id = self.next_group;
        self.next_group += 1;
        // Groups that lose members to the new one shrink (and go when empty).
        let taken: BTreeSet<ProducerId> = members.iter().copied().collect();
        let at = self
            .order
            .iter()
            .position(|r| match *r {
                Row::Actor(a) => taken.contains(&a),
                Row::Group(g) => self
                    .groups
                    .get(&g)
                    .is_some_and(|g| g.members.iter().any(|m| taken.contains(m))),
            })
            .unwrap_or(self.order.len());
        let mut emptied = Vec::new();
        for (gid, g) in &mut self.groups {
            g.members.retain(|m| !taken.contains(m));
            if g.members.is_empty() {
                emptied.push(*gid);
            }
        }
        for g in emptied {
            self.groups.remove(&g);
        }
        let before = self.order[..at]
            .iter()
            .filter(|r| !self.row_goes(r, &taken))
            .count();
        self.order.retain(|r| match *r {
            Row::Actor(a) => !taken.contains(&a),
            Row::Group(g) => self.groups.contains_key(&g),
        });
        self.order
            .insert(before.min(self.order.len()), Row::Group(id));
        self.groups.insert(
            id,
            ActorGroup {
                name: name.to_string(),
                members,
                op,
            },
        );
        self.selected.clear();
        self.selected.insert(Row::Group(id));
        Some(id)
    }

    fn row_goes(&self, r: &Row, taken: &BTreeSet<ProducerId>) -> bool {
        match *r {
            Row::Actor(a) => taken.contains(&a),
            Row::Group(g) => !self.groups.contains_key(&g),
        }
    }

    /// Replaces every group by `groups` (a saved grouping opened again): the current groups are
    /// deleted, then each saved one made, in order. Returns how many were made (a group of fewer
    /// than two actors is not).
    pub fn replace_groups(&mut self, groups: &[(String, GroupOp, Vec<ProducerId>)]) -> usize {
        for id in self.groups.keys().copied().collect::<Vec<_>>() {
            self.delete_group(id);
        }
        groups
            .iter()
            .filter(|(name, op, members)| self.make_group(name, members.clone(), *op).is_some())
            .count()
    }

    /// The groups as name, operator and members, in display order (what a saved grouping keeps).
    pub fn group_list(&self) -> Vec<(String, GroupOp, Vec<ProducerId>)> {
        self.order
            .iter()
            .filter_map(|r| match r {
                Row::Group(g) => self.groups.get(g),
                Row::Actor(_) => None,
            })
            .map(|g| (g.name.clone(), g.op, g.members.clone()))
            .collect()
    }

    /// Deletes a group: its members are rows again, where it was.
    pub fn delete_group(&mut self, id: u32) {
        let Some(g) = self.groups.remove(&id) else {
            return;
        };
        let at = self
            .order
            .iter()
            .position(|r| *r == Row::Group(id))
            .unwrap_or(self.order.len());
        self.order.retain(|r| *r != Row::Group(id));
        for (k, m) in g.members.into_iter().enumerate() {
            self.order
                .insert((at + k).min(self.order.len()), Row::Actor(m));
        }
        self.hidden.remove(&Row::Group(id));
        self.selected.remove(&Row::Group(id));
    }

    /// The histogram of a row: the actor's, or its group's aggregate; zeros for an actor without a
    /// value in the interval.
    pub fn values(&self, row: Row, t: &Timeline) -> Vec<f64> {
        let w = t.outline.len();
        let of = |id: ProducerId| -> Option<&[f64]> {
            t.actors
                .iter()
                .find(|a| a.producer == id)
                .map(|a| a.values.as_slice())
        };
        match row {
            Row::Actor(id) => of(id).map_or_else(|| vec![0.0; w], <[f64]>::to_vec),
            Row::Group(g) => {
                let Some(g) = self.groups.get(&g) else {
                    return vec![0.0; w];
                };
                let zeros = vec![0.0; w];
                let members: Vec<&[f64]> =
                    g.members.iter().map(|&m| of(m).unwrap_or(&zeros)).collect();
                let v = traceviz::group(&members, g.op);
                if v.is_empty() { zeros } else { v }
            }
        }
    }

    /// The stacked outline of the visible rows, in display order: layer `k` is the sum of the first
    /// `k + 1` rows' histograms, bin by bin (the last layer is the outline's top).
    pub fn outline(&self, t: &Timeline) -> Vec<(Row, Vec<f64>)> {
        let mut acc = vec![0.0; t.outline.len()];
        self.visible()
            .into_iter()
            .map(|r| {
                for (a, v) in acc.iter_mut().zip(self.values(r, t)) {
                    *a += v;
                }
                (r, acc.clone())
            })
            .collect()
    }
}

/// The name of a group operator, as the menu shows it.
pub fn op_name(op: GroupOp) -> &'static str {
    match op {
        GroupOp::Max => "max",
        GroupOp::Min => "min",
        GroupOp::Average => "average",
        GroupOp::Median => "median",
    }
}

/// The total variation distance of two histograms taken as distributions over time (see the module
/// documentation).
pub fn distance(a: &[f64], b: &[f64]) -> f64 {
    let (sa, sb): (f64, f64) = (a.iter().sum(), b.iter().sum());
    match (sa > 0.0, sb > 0.0) {
        (false, false) => 0.0,
        (false, true) | (true, false) => 1.0,
        (true, true) => {
            0.5 * a
                .iter()
                .zip(b)
                .map(|(x, y)| (x / sa - y / sb).abs())
                .sum::<f64>()
        }
    }
}

/// Groups of similar actors: average-linkage clustering under [`distance`], merging while the closest
/// clusters are within `threshold`; the clusters of two or more, each in the order of `actors`.
pub fn similar_groups(actors: &[(ProducerId, &[f64])], threshold: f64) -> Vec<Vec<ProducerId>> {
    let n = actors.len();
    let d: Vec<Vec<f64>> = (0..n)
        .map(|i| (0..n).map(|j| distance(actors[i].1, actors[j].1)).collect())
        .collect();
    let mut clusters: Vec<Vec<usize>> = (0..n).map(|i| vec![i]).collect();
    let link = |a: &[usize], b: &[usize]| -> f64 {
        let s: f64 = a
            .iter()
            .flat_map(|&i| b.iter().map(move |&j| (i, j)))
            .map(|(i, j)| d[i][j])
            .sum();
        s / (a.len() * b.len()) as f64
    };
    loop {
        let mut best: Option<(f64, usize, usize)> = None;
        for i in 0..clusters.len() {
            for j in i + 1..clusters.len() {
                let l = link(&clusters[i], &clusters[j]);
                if best.is_none_or(|(b, _, _)| l < b) {
                    best = Some((l, i, j));
                }
            }
        }
        match best {
            Some((l, i, j)) if l <= threshold => {
                let b = clusters.remove(j);
                clusters[i].extend(b);
            }
            _ => break,
        }
    }
    let mut out: Vec<Vec<ProducerId>> = clusters
        .into_iter()
        .filter(|c| c.len() >= 2)
        .map(|mut c| {
            c.sort_unstable();
            c.into_iter().map(|i| actors[i].0).collect()
        })
        .collect();
    out.sort();
    out
}

/// The timeline a view loads: the histograms of `range` at `width` pixels.
#[derive(Clone, Debug, PartialEq)]
pub struct TimelineRequest {
    pub trace: PathBuf,
    pub range: TimeRange,
    pub width: usize,
    pub statistic: Statistic,
    pub filter: Filter,
}

/// Computes the timeline on a loader thread.
pub fn spawn_timeline(r: TimelineRequest) -> LoaderHandle<Timeline> {
    spawn_task(r.range.len(), move |p| {
        let reader = TraceReader::open(&r.trace).map_err(|e| e.to_string())?;
        let t = traceviz::timeline(&reader, r.range, r.width, r.statistic, &r.filter)
            .map_err(|e| e.to_string())?;
        p.publish(t, r.range.len(), 0, 1)
    })
}

/// What the TraceViz view of a group holds besides its tree: the live load of the group's interval at
/// pixel resolution and the zoomed view's timeline.
pub struct TimelineState {
    pub statistic: Statistic,
    /// The group's interval (follows a growing trace by reloading, at most once a second).
    pub live: LiveLoad<Timeline>,
    /// The interval on screen (wheel zoom, drag pan inside the group's interval).
    pub view: TimeRange,
    /// The timeline on screen (of the group's interval or of the view).
    pub timeline: Option<Timeline>,
    /// Counts the changes of `timeline` (a view redraws its images when it changes).
    pub revision: u64,
    /// A timeline of the zoomed view at pixel resolution, being computed.
    detail: Option<LoaderHandle<Timeline>>,
    source: Option<(PathBuf, Filter)>,
    pub width: usize,
    /// When the view last moved (its own timeline loads once it has not moved for [`REFINE_AFTER`]).
    moved_at: Option<Instant>,
    /// The width changed since the timeline on screen was asked for.
    resized: bool,
}

/// After the view stopped moving this long, its timeline is computed at pixel resolution.
pub const REFINE_AFTER: Duration = Duration::from_millis(250);

impl TimelineState {
    pub fn new(range: TimeRange) -> Self {
        Self {
            statistic: Statistic::Density,
            live: LiveLoad::new(range, Growth::RELOAD_EACH_SECOND),
            view: range,
            timeline: None,
            revision: 0,
            detail: None,
            source: None,
            width: 800,
            moved_at: None,
            resized: false,
        }
    }

    fn request(&self, range: TimeRange) -> Option<TimelineRequest> {
        let (trace, filter) = self.source.clone()?;
        Some(TimelineRequest {
            trace,
            range,
            width: self.width.max(1),
            statistic: self.statistic,
            filter,
        })
    }

    /// Loads the group's interval.
    pub fn load(&mut self, trace: &Path, range: TimeRange, filter: Filter) {
        self.source = Some((trace.to_path_buf(), filter));
        self.view = range;
        self.timeline = None;
        self.revision += 1;
        self.detail = None;
        if let Some(r) = self.request(range) {
            self.live.load(range, move |_| spawn_timeline(r));
        }
    }

    /// Loads again (statistic or width changed), keeping the view.
    pub fn reload(&mut self) {
        let view = self.view;
        let Some((trace, filter)) = self.source.clone() else {
            return;
        };
        self.load(&trace, self.live.loaded(), filter);
        self.view = view;
        self.refine();
    }

    /// The group's interval grew: reload it (at most once a second); a view that showed all of it
    /// shows all of the grown one.
    pub fn extend(&mut self, end: i64) {
        let follow = self.view == self.live.loaded();
        let Some(r) = self.request(TimeRange::new(self.live.loaded().start, end)) else {
            return;
        };
        if let Some(step) = self.live.extend(end, move |_| spawn_timeline(r))
            && follow
        {
            self.view = step.loaded;
        }
    }

    /// Whether the view moved and has not yet loaded its own timeline.
    pub fn moving(&self) -> bool {
        self.moved_at.is_some()
    }

    /// Takes new timelines, and loads the view's own once it stopped moving; returns whether the
    /// picture changed.
    pub fn poll(&mut self) -> bool {
        if self.moved_at.is_some_and(|t| t.elapsed() >= REFINE_AFTER) {
            self.moved_at = None;
            self.refine();
        }
        // The view's width changed since the timeline on screen was asked for: ask again.
        if self.resized && self.timeline.is_some() && !self.live.busy() && self.detail.is_none() {
            self.resized = false;
            self.refine();
        }
        let mut changed = false;
        if let Some(t) = self.live.poll() {
            // The group's timeline is shown while the view is all of it.
            if self.view == self.live.loaded() || self.timeline.is_none() {
                self.timeline = Some(t);
                self.revision += 1;
                changed = true;
            }
        }
        if let Some(d) = &self.detail {
            let p = d.progress();
            if p.finished {
                if let Some(t) = d.snapshot()
                    && p.error.is_none()
                    && !p.cancelled
                {
                    self.timeline = Some(t);
                    self.revision += 1;
                    changed = true;
                }
                self.detail = None;
            }
        }
        changed
    }

    pub fn busy(&self) -> bool {
        self.live.busy()
            || self.detail.is_some()
            || self.moved_at.is_some()
            || (self.resized && self.timeline.is_some())
    }

    /// The view is `width` pixels wide: its timeline is loaded again at that resolution if it was not.
    pub fn set_width(&mut self, width: usize) {
        if width != self.width && width > 0 {
            self.width = width;
            self.resized = true;
        }
    }

    pub fn progress(&self) -> Option<Progress> {
        self.live.progress()
    }

    pub fn stop(&mut self) {
        self.live.stop();
        self.detail = None;
    }

    /// Zooms by `factor` (< 1: in) around `around`, a fraction of the view.
    pub fn zoom(&mut self, factor: f64, around: f64) {
        let bounds = self.live.loaded();
        let len = self.view.len() as f64;
        let new_len =
            (len * factor).clamp((self.width as f64).max(10.0), bounds.len().max(1) as f64);
        let pivot = self.view.start as f64 + len * around;
        let start = (pivot - new_len * around)
            .max(bounds.start as f64)
            .min(bounds.end as f64 - new_len);
        self.view = TimeRange::new(start as i64, (start + new_len) as i64);
        self.moved_at = Some(Instant::now());
    }

    /// Pans by `fraction` of the view (> 0: later).
    pub fn pan(&mut self, fraction: f64) {
        let bounds = self.live.loaded();
        let len = self.view.len();
        let by = (len as f64 * fraction) as i64;
        let start =
            (self.view.start + by).clamp(bounds.start, (bounds.end - len).max(bounds.start));
        self.view = TimeRange::new(start, start + len);
        self.moved_at = Some(Instant::now());
    }

    /// The view stopped moving: computes its timeline at pixel resolution (the group's is shown,
    /// resampled, meanwhile).
    pub fn refine(&mut self) {
        if self.timeline.as_ref().is_some_and(|t| {
            TimeRange::new(t.start, t.end) == self.view && t.outline.len() == self.width
        }) {
            return;
        }
        if let Some(r) = self.request(self.view) {
            self.detail = Some(spawn_timeline(r));
        }
    }

    /// The histogram `values` (of the timeline on screen) resampled to the view at `width` columns:
    /// each column takes the bin under its centre (exact when the timeline is the view's own).
    pub fn columns(&self, values: &[f64], width: usize) -> Vec<f64> {
        let Some(t) = &self.timeline else {
            return vec![0.0; width];
        };
        let (ts, te) = (t.start as f64, t.end as f64);
        let n = values.len();
        if n == 0 || te <= ts {
            return vec![0.0; width];
        }
        if t.start == self.view.start && t.end == self.view.end && n == width {
            return values.to_vec();
        }
        let (vs, vl) = (self.view.start as f64, self.view.len() as f64);
        (0..width)
            .map(|c| {
                let x = vs + (c as f64 + 0.5) / width as f64 * vl;
                let i = ((x - ts) / (te - ts) * n as f64).floor();
                if i < 0.0 || i >= n as f64 {
                    0.0
                } else {
                    values[i as usize]
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traceviz::ActorHist;

    fn tree() -> ActorLayout {
        ActorLayout::new(
            [
                (10, "app", 0),
                (11, "app/main", 1),
                (12, "app/worker", 1),
                (20, "irq/7", 0),
            ]
            .into_iter()
            .map(|(id, l, depth)| Actor {
                id,
                label: l.into(),
                depth,
            })
            .collect(),
        )
    }

    fn timeline() -> Timeline {
        let a = |p, v: [f64; 4]| ActorHist {
            producer: p,
            name: String::new(),
            values: v.to_vec(),
        };
        Timeline {
            start: 0,
            end: 4,
            statistic: Statistic::Density,
            actors: vec![
                a(10, [1.0, 0.0, 0.0, 0.0]),
                a(11, [1.0, 1.0, 1.0, 0.0]),
                a(12, [1.0, 2.0, 1.0, 0.0]),
                a(20, [0.0, 0.0, 1.0, 1.0]),
            ],
            outline: vec![3.0, 3.0, 3.0, 1.0],
        }
    }

    #[test]
    fn outline_layers_follow_order_and_hiding() {
        let mut t = tree();
        let tl = timeline();
        let o = t.outline(&tl);
        assert_eq!(o.last().unwrap().1, tl.outline);
        assert_eq!(o[0], (Row::Actor(10), vec![1.0, 0.0, 0.0, 0.0]));
        // Dragging irq/7 first makes it the bottom layer.
        t.move_row(3, 0);
        let o = t.outline(&tl);
        assert_eq!(o[0], (Row::Actor(20), vec![0.0, 0.0, 1.0, 1.0]));
        assert_eq!(o.last().unwrap().1, tl.outline);
        // Hidden rows leave the outline.
        t.toggle_hidden(Row::Actor(20));
        assert_eq!(t.outline(&tl).last().unwrap().1, vec![3.0, 3.0, 2.0, 0.0]);
        assert_eq!(t.visible().len(), 3);
    }

    #[test]
    fn selection_with_shift_and_ctrl() {
        let mut t = tree();
        t.click(Row::Actor(11), false, false);
        t.click(Row::Actor(20), true, false);
        assert_eq!(
            t.selected,
            [Row::Actor(11), Row::Actor(12), Row::Actor(20)].into()
        );
        t.click(Row::Actor(12), false, true);
        assert_eq!(t.selected, [Row::Actor(11), Row::Actor(20)].into());
        t.click(Row::Actor(10), false, false);
        assert_eq!(t.selected, [Row::Actor(10)].into());
    }

    #[test]
    fn groups_aggregate_their_members_and_delete_back_into_rows() {
        let mut t = tree();
        let tl = timeline();
        t.click(Row::Actor(11), false, false);
        t.click(Row::Actor(12), false, true);
        let g = t.group_selected("threads", GroupOp::Max).unwrap();
        assert_eq!(t.order(), &[Row::Actor(10), Row::Group(g), Row::Actor(20)]);
        assert_eq!(t.values(Row::Group(g), &tl), vec![1.0, 2.0, 1.0, 0.0]);
        assert_eq!(t.label(Row::Group(g)), "threads (max of 2)");
        t.groups.get_mut(&g).unwrap().op = GroupOp::Average;
        assert_eq!(t.values(Row::Group(g), &tl), vec![1.0, 1.5, 1.0, 0.0]);
        t.toggle_hidden(Row::Group(g));
        assert_eq!(t.visible(), vec![Row::Actor(10), Row::Actor(20)]);
        t.delete_group(g);
        assert_eq!(
            t.order(),
            &[
                Row::Actor(10),
                Row::Actor(11),
                Row::Actor(12),
                Row::Actor(20)
            ]
        );
        assert!(t.hidden.is_empty());
        // One actor is not a group.
        t.click(Row::Actor(10), false, false);
        assert_eq!(t.group_selected("x", GroupOp::Max), None);
    }

    #[test]
    fn saved_groups_replace_the_current_ones_and_round_trip() {
        let mut t = tree();
        t.make_group("old", vec![10, 20], GroupOp::Min).unwrap();
        t.make_group("pair", vec![11, 12], GroupOp::Median).unwrap();
        let saved = t.group_list();
        assert_eq!(
            saved,
            vec![
                ("old".to_string(), GroupOp::Min, vec![10, 20]),
                ("pair".to_string(), GroupOp::Median, vec![11, 12])
            ]
        );
        // Through the store's grouping and back.
        let data = crate::results::actor_grouping(&saved);
        let back = crate::results::actor_groups(&data).unwrap();
        assert_eq!(back, saved);
        let mut fresh = tree();
        fresh
            .make_group("other", vec![10, 11], GroupOp::Max)
            .unwrap();
        assert_eq!(fresh.replace_groups(&back), 2);
        assert_eq!(fresh.group_list(), saved);
        // The group made before is gone, its actors rows again or in the new groups.
        assert!(fresh.groups.values().all(|g| g.name != "other"));
        assert_eq!(fresh.order().len(), 2);
        // A one-actor group is not made.
        assert_eq!(
            fresh.replace_groups(&[("solo".into(), GroupOp::Max, vec![10])]),
            0
        );
        assert_eq!(fresh.order().len(), 4);
    }

    #[test]
    fn similar_actors_cluster_by_the_shape_of_their_histograms() {
        let a = [1.0, 1.0, 0.0, 0.0];
        let b = [2.0, 2.0, 0.0, 0.0]; // same shape, twice as many
        let c = [0.0, 0.0, 3.0, 1.0];
        let d = [0.0, 0.0, 2.0, 1.0];
        let e = [0.0, 0.0, 0.0, 0.0];
        assert_eq!(distance(&a, &b), 0.0);
        assert_eq!(distance(&a, &c), 1.0);
        assert!((distance(&c, &d) - (0.75f64 - 2.0 / 3.0)).abs() < 1e-12);
        assert_eq!(distance(&e, &e), 0.0);
        assert_eq!(distance(&e, &a), 1.0);
        let actors: Vec<(ProducerId, &[f64])> = vec![(1, &a), (2, &c), (3, &b), (4, &d), (5, &e)];
        assert_eq!(similar_groups(&actors, 0.2), vec![vec![1, 3], vec![2, 4]]);
        // A threshold of 1 puts everyone together; 0 only identical shapes.
        assert_eq!(similar_groups(&actors, 1.0), vec![vec![1, 2, 3, 4, 5]]);
        assert_eq!(similar_groups(&actors, 0.0), vec![vec![1, 3]]);
    }

    #[test]
    fn zoom_and_pan_stay_in_the_interval_and_columns_resample() {
        let mut s = TimelineState::new(TimeRange::new(0, 1000));
        s.width = 4;
        s.timeline = Some(timeline());
        s.live = LiveLoad::new(TimeRange::new(0, 1000), Growth::Append);
        s.view = TimeRange::new(0, 1000);
        s.zoom(0.5, 0.5);
        assert_eq!(s.view, TimeRange::new(250, 750));
        s.pan(1.0);
        assert_eq!(s.view, TimeRange::new(500, 1000));
        s.zoom(10.0, 0.0);
        assert_eq!(s.view, TimeRange::new(0, 1000));
        // A timeline of [0, 4) seen through a view of [0, 4) at 2 columns: the bins under the column centres, 1 and 3.
        s.view = TimeRange::new(0, 4);
        assert_eq!(s.columns(&[1.0, 2.0, 3.0, 4.0], 2), vec![2.0, 4.0]);
        assert_eq!(
            s.columns(&[1.0, 2.0, 3.0, 4.0], 4),
            vec![1.0, 2.0, 3.0, 4.0]
        );
    }

    #[test]
    fn a_timeline_loads_on_a_loader_thread() {
        let (_dir, path) = crate::testutil::write_spec(&crate::testutil::Spec::small());
        let mut s = TimelineState::new(TimeRange::new(0, 1000));
        s.width = 4;
        s.load(&path, TimeRange::new(0, 1000), Filter::all());
        let t0 = std::time::Instant::now();
        while s.busy() {
            s.poll();
            assert!(t0.elapsed().as_secs() < 20);
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let t = s.timeline.as_ref().unwrap();
        assert_eq!(t.outline, [3.0, 3.0, 3.0, 1.0]);
    }
}
