//! The producer hierarchy as the views show it: Gantt rows that fold and unfold, and the hierarchical check
//! boxes of the type and producer filter dialogs.
//!
//! Start here: [`ProducerTree`] (depth-first rows, collapsing) and [`CheckState`].

use std::collections::{BTreeSet, HashMap};

use socscope_tracedb::{EventCategory, EventType, Producer, ProducerId, TypeId};

/// One node of the tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeNode {
    /// The producer.
    pub id: ProducerId,
    /// Its name, with its local id for threads and processes (`"vsync (412)"`).
    pub label: String,
    /// Nesting level, 0 for roots.
    pub depth: usize,
    /// Its children, in display order.
    pub children: Vec<ProducerId>,
    /// Its parent in the tree.
    pub parent: Option<ProducerId>,
}

/// The producers of a trace as a forest, in display order (depth first, siblings by kind — CPUs,
/// processes (the kernel last), threads, IRQs, soft IRQs — then local id).
#[derive(Clone, Debug, Default)]
pub struct ProducerTree {
    nodes: Vec<TreeNode>,
    index: HashMap<ProducerId, usize>,
}

impl ProducerTree {
    /// Builds the forest; producers whose parent is unknown (or that form a cycle) become roots.
    pub fn new(producers: &[Producer]) -> Self {
        // The kernel (process 0) after the applications: a zap's pipeline threads come first.
        Self::with_sibling_order(producers, |p| {
            (
                kind_rank(p),
                p.kind == socscope_tracedb::ProducerKind::Process && p.local_id == 0,
                p.local_id,
                p.id,
            )
        })
    }

    /// [`ProducerTree::new`] with siblings sorted by `key` instead of by kind then local id (the
    /// microscopic model orders them by id: its leaf order is part of its aggregation results).
    pub fn with_sibling_order<K: Ord>(
        producers: &[Producer],
        key: impl Fn(&Producer) -> K,
    ) -> Self {
        let known: HashMap<ProducerId, &Producer> = producers.iter().map(|p| (p.id, p)).collect();
        let mut children: HashMap<Option<ProducerId>, Vec<&Producer>> = HashMap::new();
        for p in producers {
            let parent = p.parent.filter(|q| *q != p.id && known.contains_key(q));
            children.entry(parent).or_default().push(p);
        }
        for list in children.values_mut() {
            list.sort_by_key(|p| key(p));
        }
        let mut tree = ProducerTree::default();
        let mut stack: Vec<(&Producer, usize, Option<ProducerId>)> = children
            .get(&None)
            .map(|v| v.iter().rev().map(|p| (*p, 0, None)).collect())
            .unwrap_or_default();
        let mut visited = BTreeSet::new();
        while let Some((p, depth, parent)) = stack.pop() {
            if !visited.insert(p.id) {
                continue;
            }
            let kids: Vec<&Producer> = children.get(&Some(p.id)).cloned().unwrap_or_default();
            tree.index.insert(p.id, tree.nodes.len());
            tree.nodes.push(TreeNode {
                id: p.id,
                label: label(p),
                depth,
                children: kids.iter().map(|k| k.id).collect(),
                parent,
            });
            for k in kids.iter().rev() {
                stack.push((k, depth + 1, Some(p.id)));
            }
        }
        // Producers only reachable through a cycle: show them as roots rather than lose them.
        for p in producers {
            if !visited.contains(&p.id) {
                visited.insert(p.id);
                tree.index.insert(p.id, tree.nodes.len());
                tree.nodes.push(TreeNode {
                    id: p.id,
                    label: label(p),
                    depth: 0,
                    children: Vec::new(),
                    parent: None,
                });
            }
        }
        tree
    }

    /// Every node, depth first.
    pub fn nodes(&self) -> &[TreeNode] {
        &self.nodes
    }

    /// One node.
    pub fn node(&self, id: ProducerId) -> Option<&TreeNode> {
        self.index.get(&id).map(|&i| &self.nodes[i])
    }

    /// The root above `id` (`id` itself for a root or an unknown producer).
    pub fn root(&self, id: ProducerId) -> ProducerId {
        let mut cur = id;
        while let Some(p) = self.node(cur).and_then(|n| n.parent) {
            cur = p;
        }
        cur
    }

    /// How many ancestors `id` has (0 for a root or an unknown producer).
    pub fn depth(&self, id: ProducerId) -> usize {
        self.node(id).map_or(0, |n| n.depth)
    }

    /// The label of a producer (`"#id"` when unknown).
    pub fn label(&self, id: ProducerId) -> String {
        self.node(id)
            .map_or_else(|| format!("#{id}"), |n| n.label.clone())
    }

    /// `id` and everything below it.
    pub fn subtree(&self, id: ProducerId) -> Vec<ProducerId> {
        let mut out = Vec::new();
        let mut stack = vec![id];
        while let Some(p) = stack.pop() {
            if let Some(n) = self.node(p) {
                out.push(p);
                stack.extend(n.children.iter().rev());
            }
        }
        out
    }

    /// The rows a Gantt chart shows: every node not hidden and not under a collapsed node, depth first.
    /// A hidden parent still shows its visible children (at its place in the tree).
    pub fn visible_rows(
        &self,
        collapsed: &BTreeSet<ProducerId>,
        hidden: &BTreeSet<ProducerId>,
    ) -> Vec<&TreeNode> {
        let mut out = Vec::new();
        let mut skip_below: Option<usize> = None;
        for n in &self.nodes {
            if let Some(d) = skip_below {
                if n.depth > d {
                    continue;
                }
                skip_below = None;
            }
            if !hidden.contains(&n.id) {
                out.push(n);
            }
            if collapsed.contains(&n.id) {
                skip_below = Some(n.depth);
            }
        }
        out
    }

    /// The check state of a node of the producer filter dialog.
    pub fn check_state(&self, id: ProducerId, hidden: &BTreeSet<ProducerId>) -> CheckState {
        CheckState::of(self.subtree(id).iter().map(|p| !hidden.contains(p)))
    }

    /// Ticks or unticks a node and everything below it.
    pub fn set_checked(&self, id: ProducerId, checked: bool, hidden: &mut BTreeSet<ProducerId>) {
        for p in self.subtree(id) {
            if checked {
                hidden.remove(&p);
            } else {
                hidden.insert(p);
            }
        }
    }
}

fn kind_rank(p: &Producer) -> u8 {
    use socscope_tracedb::ProducerKind::*;
    match p.kind {
        // The CPU tracks first, then what runs on them, then the interrupts.
        Cpu => 0,
        Process => 1,
        Thread => 2,
        Irq => 3,
        SoftIrq => 4,
        Other => 5,
    }
}

/// The one name every output gives a producer of a trace: its name, or `NAME #ID` when another
/// producer of the trace has the same name (each zap's `demux` is `demux #39`, `demux #52`, ...).
/// Judged over the whole trace, not over the rows one output happens to show, so a producer has
/// the same label in `stats`, `timeline`, `results` and their PNGs, whatever their range or filter;
/// `--producers` and `--group` take the label back ([`producer_by_label`]).
pub fn producer_labels(all: &[Producer]) -> HashMap<ProducerId, String> {
    let labels = distinct_names(
        &all.iter()
            .map(|p| (p.id, p.name.as_str()))
            .collect::<Vec<_>>(),
    );
    all.iter().map(|p| p.id).zip(labels).collect()
}

/// The producer a `NAME #ID` label (as [`producer_labels`] writes it) stands for: the id, when
/// the trace has a producer of that id and that name.
pub fn producer_by_label(all: &[Producer], label: &str) -> Option<ProducerId> {
    let (name, id) = label.rsplit_once(" #")?;
    let id: ProducerId = id.parse().ok()?;
    all.iter()
        .find(|p| p.id == id && p.name == name)
        .map(|p| p.id)
}

/// Names for a chart's producers, told apart: a name two of them share gets the producer's id
/// (`cpu-burn #27`, `cpu-burn #28`), the others stay as they are.
pub fn distinct_names(producers: &[(ProducerId, &str)]) -> Vec<String> {
    let mut count: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for (_, n) in producers {
        *count.entry(n).or_insert(0) += 1;
    }
    producers
        .iter()
        .map(|(id, n)| {
            if count[n] > 1 {
                format!("{n} #{id}")
            } else {
                (*n).to_owned()
            }
        })
        .collect()
}

fn label(p: &Producer) -> String {
    use socscope_tracedb::ProducerKind::*;
    match p.kind {
        Process | Thread => format!("{} ({})", p.name, p.local_id),
        _ => p.name.clone(),
    }
}

/// A check box of a hierarchical filter dialog.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckState {
    /// Everything below is shown.
    Checked,
    /// Nothing below is shown.
    Unchecked,
    /// Some of it.
    Partial,
}

impl CheckState {
    /// The state of a group whose members are shown (`true`) or not.
    pub fn of(members: impl IntoIterator<Item = bool>) -> Self {
        let (mut any_on, mut any_off) = (false, false);
        for m in members {
            if m {
                any_on = true;
            } else {
                any_off = true;
            }
        }
        match (any_on, any_off) {
            (true, false) | (false, false) => CheckState::Checked,
            (false, true) => CheckState::Unchecked,
            (true, true) => CheckState::Partial,
        }
    }
}

/// Event types grouped by category, for the type filter dialog (category → its types, by name).
pub fn types_by_category(types: &[EventType]) -> Vec<(EventCategory, Vec<(TypeId, String)>)> {
    EventCategory::ALL
        .into_iter()
        .filter_map(|c| {
            let mut list: Vec<(TypeId, String)> = types
                .iter()
                .filter(|t| t.category == c)
                .map(|t| (t.id, t.name.clone()))
                .collect();
            list.sort_by(|a, b| a.1.cmp(&b.1));
            (!list.is_empty()).then_some((c, list))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use socscope_tracedb::ProducerKind;

    fn p(id: u32, parent: Option<u32>, kind: ProducerKind, name: &str) -> Producer {
        Producer {
            id,
            parent,
            kind,
            local_id: id as i64 * 10,
            name: name.into(),
        }
    }

    fn tree() -> ProducerTree {
        ProducerTree::new(&[
            p(5, Some(1), ProducerKind::Thread, "t2"),
            p(1, None, ProducerKind::Process, "app"),
            p(2, Some(1), ProducerKind::Thread, "t1"),
            p(3, None, ProducerKind::Cpu, "cpu0"),
            p(4, Some(99), ProducerKind::Irq, "irq9"),
        ])
    }

    #[test]
    fn the_kernel_comes_after_the_applications() {
        let kernel = Producer {
            local_id: 0,
            ..p(1, None, ProducerKind::Process, "kernel")
        };
        let t = ProducerTree::new(&[kernel, p(2, None, ProducerKind::Process, "player")]);
        let ids: Vec<u32> = t.nodes().iter().map(|n| n.id).collect();
        assert_eq!(ids, [2, 1]);
    }

    #[test]
    fn a_trace_wide_label_does_not_depend_on_the_rows_shown() {
        let all = [
            p(39, None, ProducerKind::Thread, "demux"),
            p(52, None, ProducerKind::Thread, "demux"),
            p(3, None, ProducerKind::Thread, "vdec"),
        ];
        let labels = producer_labels(&all);
        assert_eq!(labels[&39], "demux #39");
        assert_eq!(labels[&52], "demux #52");
        assert_eq!(labels[&3], "vdec");
        // A list showing only one `demux` would name it `demux`; the trace-wide label does not.
        assert_eq!(distinct_names(&[(39, "demux")]), ["demux"]);
        assert_eq!(producer_by_label(&all, "demux #52"), Some(52));
        assert_eq!(producer_by_label(&all, "vdec #39"), None);
        assert_eq!(producer_by_label(&all, "demux"), None);
    }

    #[test]
    fn shared_names_get_their_ids() {
        assert_eq!(
            distinct_names(&[(27, "cpu-burn"), (3, "vdec"), (28, "cpu-burn")]),
            ["cpu-burn #27", "vdec", "cpu-burn #28"]
        );
        assert!(distinct_names(&[]).is_empty());
    }

    #[test]
    fn depth_first_with_kinds_first_and_orphans_as_roots() {
        let t = tree();
        let order: Vec<(u32, usize)> = t.nodes().iter().map(|n| (n.id, n.depth)).collect();
        // CPUs, then the processes and their threads, then the interrupts.
        assert_eq!(order, vec![(3, 0), (1, 0), (2, 1), (5, 1), (4, 0)]);
        assert_eq!(t.node(1).unwrap().label, "app (10)");
        assert_eq!(t.subtree(1), vec![1, 2, 5]);
        assert_eq!((t.root(5), t.depth(5)), (1, 1));
        assert_eq!((t.root(1), t.depth(1)), (1, 0));
        assert_eq!((t.root(99), t.depth(99)), (99, 0), "unknown");
    }

    #[test]
    fn collapsing_and_hiding_rows() {
        let t = tree();
        let ids = |rows: Vec<&TreeNode>| rows.iter().map(|n| n.id).collect::<Vec<_>>();
        let none = BTreeSet::new();
        assert_eq!(ids(t.visible_rows(&none, &none)), vec![3, 1, 2, 5, 4]);
        let collapsed: BTreeSet<u32> = [1].into();
        assert_eq!(ids(t.visible_rows(&collapsed, &none)), vec![3, 1, 4]);
        let hidden: BTreeSet<u32> = [1, 4].into();
        assert_eq!(ids(t.visible_rows(&none, &hidden)), vec![3, 2, 5]);
    }

    #[test]
    fn check_boxes_are_hierarchical() {
        let t = tree();
        let mut hidden = BTreeSet::new();
        assert_eq!(t.check_state(1, &hidden), CheckState::Checked);
        t.set_checked(5, false, &mut hidden);
        assert_eq!(t.check_state(1, &hidden), CheckState::Partial);
        t.set_checked(1, false, &mut hidden);
        assert_eq!(t.check_state(1, &hidden), CheckState::Unchecked);
        assert_eq!(hidden, [1, 2, 5].into());
        t.set_checked(1, true, &mut hidden);
        assert!(hidden.is_empty());
    }
}
