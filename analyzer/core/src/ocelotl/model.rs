//! The microscopic model (slices × producers × types) and the producer hierarchy, plus loading
//! both from the reference-vector JSON format.

use std::path::Path;

use serde::Deserialize;

/// Why a model or hierarchy was rejected. Every message names where the data came from and
/// what was expected, because these surface verbatim in the CLI.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("cannot read model file {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{origin}: not a model document (expected the reference-vector input format): {source}"
    )]
    Json {
        origin: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("{origin}: {field}: expected {expected}, found {found}")]
    Shape {
        origin: String,
        field: String,
        expected: String,
        found: String,
    },
    #[error("{origin}: hierarchy: {reason}")]
    Hierarchy { origin: String, reason: String },
    #[error(
        "{origin}: the spatiotemporal aggregation needs a producer hierarchy (\"hierarchy\" object)"
    )]
    MissingHierarchy { origin: String },
    #[error("p = {p}: expected a number in [0, 1]")]
    BadP { p: f64 },
    #[error(
        "{origin}: the {mode} aggregation of T = {slices} slices needs about {needed_mib} MiB{how}, more than the memory budget of {budget_mib} MiB; raise the budget (--memory-budget) or use fewer slices"
    )]
    TooLarge {
        origin: String,
        mode: &'static str,
        slices: usize,
        /// How the estimate was made, e.g. " even with its qualities recomputed at every p".
        how: String,
        needed_mib: u64,
        budget_mib: u64,
    },
    #[error("the aggregation was cancelled")]
    Cancelled,
}

fn shape(
    origin: &str,
    field: impl Into<String>,
    expected: impl ToString,
    found: impl ToString,
) -> ModelError {
    ModelError::Shape {
        origin: origin.to_owned(),
        field: field.into(),
        expected: expected.to_string(),
        found: found.to_string(),
    }
}

/// The tree of event producers: internal nodes group producers (cores in a cluster, threads in
/// a process…), every leaf holds exactly one producer of the model.
///
/// Child order is significant: lpaggreg sums children in this order and numbers spatiotemporal
/// parts by walking them in this order, so exactness depends on it.
#[derive(Debug, Clone, PartialEq)]
pub struct SpatialHierarchy {
    root: usize,
    parent: Vec<Option<usize>>,
    children: Vec<Vec<usize>>,
    leaf_producer: Vec<Option<usize>>,
    leaf_count: Vec<usize>,
    /// Post-order, so quality and DP passes can run children before parents without recursion.
    post_order: Vec<usize>,
}

impl SpatialHierarchy {
    /// Builds a hierarchy from per-node child lists (in order) and, for leaves, the producer
    /// index they hold. `producers` is the number of producers of the model: each must be
    /// exactly one leaf.
    pub fn new(
        children: Vec<Vec<usize>>,
        leaf_producer: Vec<Option<usize>>,
        producers: usize,
    ) -> Result<Self, ModelError> {
        Self::build("hierarchy", children, leaf_producer, producers)
    }

    fn build(
        origin: &str,
        children: Vec<Vec<usize>>,
        leaf_producer: Vec<Option<usize>>,
        producers: usize,
    ) -> Result<Self, ModelError> {
        let err = |reason: String| ModelError::Hierarchy {
            origin: origin.to_owned(),
            reason,
        };
        let n = children.len();
        if n == 0 {
            return Err(err("expected at least one node".into()));
        }
        if leaf_producer.len() != n {
            return Err(err(format!(
                "leaf_resource has {} entries, expected one per node ({n})",
                leaf_producer.len()
            )));
        }
        let mut parent = vec![None; n];
        for (node, kids) in children.iter().enumerate() {
            for &kid in kids {
                if kid >= n {
                    return Err(err(format!(
                        "node {node} has child {kid}, but there are only {n} nodes"
                    )));
                }
                if let Some(other) = parent[kid] {
                    return Err(err(format!(
                        "node {kid} is a child of both {other} and {node}"
                    )));
                }
                parent[kid] = Some(node);
            }
        }
        let roots: Vec<usize> = (0..n).filter(|&v| parent[v].is_none()).collect();
        let [root] = roots[..] else {
            return Err(err(format!(
                "expected exactly one root, found {}: {roots:?}",
                roots.len()
            )));
        };
        let mut seen_producer = vec![None; producers];
        for node in 0..n {
            match (children[node].is_empty(), leaf_producer[node]) {
                (true, Some(s)) => {
                    if s >= producers {
                        return Err(err(format!(
                            "leaf {node} holds resource {s}, but the model has {producers} resources"
                        )));
                    }
                    if let Some(other) = seen_producer[s] {
                        return Err(err(format!(
                            "resource {s} is held by both leaves {other} and {node}"
                        )));
                    }
                    seen_producer[s] = Some(node);
                }
                (true, None) => {
                    return Err(err(format!("node {node} has no children and no resource")));
                }
                (false, Some(s)) => {
                    return Err(err(format!(
                        "internal node {node} also claims resource {s}"
                    )));
                }
                (false, None) => {}
            }
        }
        if let Some(s) = seen_producer.iter().position(Option::is_none) {
            return Err(err(format!("resource {s} is not held by any leaf")));
        }
        // Iterative DFS: reaches every node exactly once iff the child lists form a tree.
        let mut post_order = Vec::with_capacity(n);
        let mut stack = vec![(root, false)];
        while let Some((node, expanded)) = stack.pop() {
            if expanded {
                post_order.push(node);
            } else {
                stack.push((node, true));
                stack.extend(children[node].iter().rev().map(|&c| (c, false)));
            }
        }
        if post_order.len() != n {
            return Err(err(format!(
                "only {} of {n} nodes are reachable from root {root} (a cycle?)",
                post_order.len()
            )));
        }
        let mut leaf_count = vec![0; n];
        for &node in &post_order {
            leaf_count[node] = if children[node].is_empty() {
                1
            } else {
                children[node].iter().map(|&c| leaf_count[c]).sum()
            };
        }
        Ok(Self {
            root,
            parent,
            children,
            leaf_producer,
            leaf_count,
            post_order,
        })
    }

    /// A complete tree with the given fan-out per level (e.g. `[4, 4, 4]`: 85 nodes, 64 leaves),
    /// numbered in DFS preorder, leaves holding producers 0, 1, 2… left to right.
    pub fn balanced(fan_out: &[usize]) -> Self {
        fn grow(
            level: usize,
            fan_out: &[usize],
            children: &mut Vec<Vec<usize>>,
            leaf: &mut Vec<Option<usize>>,
            next_producer: &mut usize,
        ) -> usize {
            let id = children.len();
            children.push(Vec::new());
            leaf.push(None);
            if level == fan_out.len() || fan_out[level] == 0 {
                leaf[id] = Some(*next_producer);
                *next_producer += 1;
            } else {
                for _ in 0..fan_out[level] {
                    let kid = grow(level + 1, fan_out, children, leaf, next_producer);
                    children[id].push(kid);
                }
            }
            id
        }
        let (mut children, mut leaf, mut producers) = (Vec::new(), Vec::new(), 0);
        grow(0, fan_out, &mut children, &mut leaf, &mut producers);
        Self::new(children, leaf, producers)
            .expect("a generated complete tree is a valid hierarchy")
    }

    pub fn root(&self) -> usize {
        self.root
    }

    /// Number of nodes, leaves included.
    pub fn len(&self) -> usize {
        self.children.len()
    }

    pub fn is_empty(&self) -> bool {
        self.children.is_empty()
    }

    pub fn children(&self, node: usize) -> &[usize] {
        &self.children[node]
    }

    pub fn parent(&self, node: usize) -> Option<usize> {
        self.parent[node]
    }

    pub fn is_leaf(&self, node: usize) -> bool {
        self.children[node].is_empty()
    }

    /// The producer a leaf holds; `None` for internal nodes.
    pub fn leaf_producer(&self, node: usize) -> Option<usize> {
        self.leaf_producer[node]
    }

    /// `|N|`: how many leaves (producers) the node covers.
    pub fn leaf_count(&self, node: usize) -> usize {
        self.leaf_count[node]
    }

    /// Nodes with children before parents.
    pub fn post_order(&self) -> &[usize] {
        &self.post_order
    }

    /// The highest ancestor reachable through single-child parents: a node with one child
    /// covers the same cells as that child, so both name the same block of the model.
    pub fn canonical(&self, mut node: usize) -> usize {
        while let Some(up) = self.parent[node] {
            if self.children[up].len() != 1 {
                break;
            }
            node = up;
        }
        node
    }
}

/// The microscopic model of Ocelotl: one value per (time slice, producer, event type), e.g.
/// the time a producer spent in a state type during a slice.
#[derive(Debug, Clone, PartialEq)]
pub struct MicroscopicModel {
    slices: usize,
    producers: usize,
    types: usize,
    /// `values[(t * producers + s) * types + u]`, the layout of the JSON `values[t][s][u]`.
    values: Vec<f64>,
    type_names: Vec<String>,
    /// See [`MicroscopicModel::rate_divisor`].
    rate_divisor: f64,
    hierarchy: Option<SpatialHierarchy>,
    name: Option<String>,
}

impl MicroscopicModel {
    /// `values` is slice-major, then producer, then type. Slice duration defaults to 1 and type
    /// names to `type0`, `type1`…
    pub fn new(
        slices: usize,
        producers: usize,
        types: usize,
        values: Vec<f64>,
    ) -> Result<Self, ModelError> {
        let origin = "model";
        if slices == 0 || producers == 0 || types == 0 {
            return Err(shape(
                origin,
                "dimensions",
                "at least one slice, producer and type",
                format!("T={slices}, S={producers}, U={types}"),
            ));
        }
        let cells = slices
            .checked_mul(producers)
            .and_then(|c| c.checked_mul(types))
            .ok_or_else(|| {
                shape(
                    origin,
                    "dimensions",
                    "T·S·U to fit in memory",
                    format!("T={slices}, S={producers}, U={types}"),
                )
            })?;
        if values.len() != cells {
            return Err(shape(
                origin,
                "values",
                format!("T·S·U = {cells} numbers"),
                values.len(),
            ));
        }
        Ok(Self {
            slices,
            producers,
            types,
            values,
            type_names: (0..types).map(|u| format!("type{u}")).collect(),
            rate_divisor: 1.0,
            hierarchy: None,
            name: None,
        })
    }

    /// Attaches the producer hierarchy the spatiotemporal aggregation works on.
    pub fn with_hierarchy(mut self, hierarchy: SpatialHierarchy) -> Result<Self, ModelError> {
        let leaves = hierarchy.leaf_count(hierarchy.root());
        if leaves != self.producers {
            return Err(shape(
                "model",
                "hierarchy",
                format!("{} leaves, one per producer", self.producers),
                leaves,
            ));
        }
        self.hierarchy = Some(hierarchy);
        Ok(self)
    }

    pub fn with_type_names(mut self, names: Vec<String>) -> Result<Self, ModelError> {
        if names.len() != self.types {
            return Err(shape(
                "model",
                "type_names",
                format!("{} names", self.types),
                names.len(),
            ));
        }
        self.type_names = names;
        Ok(self)
    }

    /// Sets [`Self::rate_divisor`].
    pub fn with_rate_divisor(mut self, divisor: f64) -> Self {
        self.rate_divisor = divisor;
        self
    }

    pub fn slices(&self) -> usize {
        self.slices
    }

    pub fn producers(&self) -> usize {
        self.producers
    }

    pub fn types(&self) -> usize {
        self.types
    }

    #[inline]
    pub fn value(&self, slice: usize, producer: usize, ty: usize) -> f64 {
        self.values[(slice * self.producers + producer) * self.types + ty]
    }

    pub fn type_names(&self) -> &[String] {
        &self.type_names
    }

    /// What one slice's value is divided by to show it as a rate in the views (Ocelotl's "slice
    /// duration", in the unit of the metric's rate): the slice's length in ns for state durations (a
    /// share of time), in seconds for event counts (events per second), 1 for means; 1 by default.
    pub fn rate_divisor(&self) -> f64 {
        self.rate_divisor
    }

    pub fn hierarchy(&self) -> Option<&SpatialHierarchy> {
        self.hierarchy.as_ref()
    }

    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }
}

/// A reference-vector input document: the model plus the run parameters stored beside it.
#[derive(Debug, Clone)]
pub struct ModelFile {
    pub model: MicroscopicModel,
    /// Bisection threshold; lpaggreg uses it as a C float.
    pub threshold: f32,
    /// The p values the vector's `at_p` section was computed for.
    pub p_values: Vec<f64>,
}

#[derive(Deserialize)]
#[allow(non_snake_case)]
struct RawModel {
    name: Option<String>,
    T: usize,
    S: usize,
    U: usize,
    type_names: Option<Vec<String>>,
    /// The reference vectors' name for [`MicroscopicModel::rate_divisor`].
    slice_duration: Option<f64>,
    values: Vec<Vec<Vec<f64>>>,
    hierarchy: Option<RawHierarchy>,
    threshold: Option<f64>,
    p_values: Option<Vec<f64>>,
}

#[derive(Deserialize)]
struct RawHierarchy {
    parent: Vec<i64>,
    leaf_resource: Vec<i64>,
    children: Vec<Vec<usize>>,
}

impl ModelFile {
    /// Reads a `*.input.json` reference vector (or anything in that format).
    pub fn load(path: &Path) -> Result<Self, ModelError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ModelError::Read {
            path: origin.clone(),
            source,
        })?;
        let raw: RawModel = serde_json::from_str(&text).map_err(|source| ModelError::Json {
            origin: origin.clone(),
            source,
        })?;
        Self::from_raw(raw, &origin)
    }

    /// Same as [`ModelFile::load`] for an already parsed document; `origin` names it in errors.
    pub fn from_value(value: &serde_json::Value, origin: &str) -> Result<Self, ModelError> {
        let raw = RawModel::deserialize(value).map_err(|source| ModelError::Json {
            origin: origin.to_owned(),
            source,
        })?;
        Self::from_raw(raw, origin)
    }

    fn from_raw(raw: RawModel, origin: &str) -> Result<Self, ModelError> {
        let (t, s, u) = (raw.T, raw.S, raw.U);
        if t == 0 || s == 0 || u == 0 {
            return Err(shape(
                origin,
                "T, S, U",
                "positive dimensions",
                format!("T={t}, S={s}, U={u}"),
            ));
        }
        if raw.values.len() != t {
            return Err(shape(
                origin,
                "values",
                format!("T = {t} slices"),
                raw.values.len(),
            ));
        }
        let mut values = Vec::with_capacity(t * s * u);
        for (ti, slice) in raw.values.iter().enumerate() {
            if slice.len() != s {
                return Err(shape(
                    origin,
                    format!("values[{ti}]"),
                    format!("S = {s} resources"),
                    slice.len(),
                ));
            }
            for (si, cell) in slice.iter().enumerate() {
                if cell.len() != u {
                    return Err(shape(
                        origin,
                        format!("values[{ti}][{si}]"),
                        format!("U = {u} types"),
                        cell.len(),
                    ));
                }
                values.extend_from_slice(cell);
            }
        }
        let mut model = MicroscopicModel::new(t, s, u, values)?;
        model.name = raw.name;
        if let Some(names) = raw.type_names {
            if names.len() != u {
                return Err(shape(
                    origin,
                    "type_names",
                    format!("U = {u} names"),
                    names.len(),
                ));
            }
            model.type_names = names;
        }
        if let Some(d) = raw.slice_duration {
            model.rate_divisor = d;
        }
        if let Some(h) = raw.hierarchy {
            model.hierarchy = Some(hierarchy_from_raw(h, s, origin)?);
        }
        let threshold = raw.threshold.unwrap_or(0.001);
        if !(threshold.is_finite() && threshold > 0.0) {
            return Err(shape(origin, "threshold", "a positive number", threshold));
        }
        Ok(Self {
            model,
            threshold: threshold as f32,
            p_values: raw.p_values.unwrap_or_default(),
        })
    }
}

fn hierarchy_from_raw(
    raw: RawHierarchy,
    producers: usize,
    origin: &str,
) -> Result<SpatialHierarchy, ModelError> {
    let n = raw.children.len();
    if raw.parent.len() != n || raw.leaf_resource.len() != n {
        return Err(ModelError::Hierarchy {
            origin: origin.to_owned(),
            reason: format!(
                "parent, leaf_resource and children must have one entry per node, found {}, {} and {n}",
                raw.parent.len(),
                raw.leaf_resource.len()
            ),
        });
    }
    let leaf_producer = raw
        .leaf_resource
        .iter()
        .map(|&r| usize::try_from(r).ok())
        .collect();
    let hierarchy = SpatialHierarchy::build(origin, raw.children, leaf_producer, producers)?;
    // The parent list is redundant with the child lists; a disagreement means a corrupt file.
    for (node, &p) in raw.parent.iter().enumerate() {
        let declared = usize::try_from(p).ok();
        if declared != hierarchy.parent(node) {
            return Err(ModelError::Hierarchy {
                origin: origin.to_owned(),
                reason: format!(
                    "parent[{node}] = {p} disagrees with the children lists ({})",
                    hierarchy
                        .parent(node)
                        .map_or("root".to_owned(), |q| q.to_string())
                ),
            });
        }
    }
    Ok(hierarchy)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc() -> serde_json::Value {
        json!({
            "T": 2, "S": 2, "U": 1,
            "values": [[[1.0], [2.0]], [[3.0], [4.0]]],
            "hierarchy": {"parent": [-1, 0, 0], "leaf_resource": [-1, 1, 0], "children": [[1, 2], [], []]}
        })
    }

    #[test]
    fn loads_values_in_slice_producer_type_order() {
        let file = ModelFile::from_value(&doc(), "doc").unwrap();
        let m = &file.model;
        assert_eq!((m.slices(), m.producers(), m.types()), (2, 2, 1));
        assert_eq!(m.value(1, 0, 0), 3.0);
        assert_eq!(m.value(0, 1, 0), 2.0);
        let h = m.hierarchy().unwrap();
        assert_eq!(h.leaf_producer(1), Some(1));
        assert_eq!(h.leaf_count(0), 2);
        assert_eq!(file.threshold, 0.001f32);
    }

    #[test]
    fn wrong_inner_length_names_the_cell() {
        let mut d = doc();
        d["values"][1][0] = json!([1.0, 2.0]);
        let e = ModelFile::from_value(&d, "doc").unwrap_err().to_string();
        assert_eq!(e, "doc: values[1][0]: expected U = 1 types, found 2");
    }

    #[test]
    fn a_resource_without_leaf_is_rejected() {
        let mut d = doc();
        d["hierarchy"]["leaf_resource"] = json!([-1, 1, 1]);
        let e = ModelFile::from_value(&d, "doc").unwrap_err().to_string();
        assert!(
            e.contains("resource 1 is held by both leaves 1 and 2"),
            "{e}"
        );
    }

    #[test]
    fn parent_list_must_agree_with_children() {
        let mut d = doc();
        d["hierarchy"]["parent"] = json!([-1, 0, 1]);
        let e = ModelFile::from_value(&d, "doc").unwrap_err().to_string();
        assert!(e.contains("parent[2] = 1 disagrees"), "{e}");
    }

    #[test]
    fn missing_file_and_bad_json_are_errors() {
        let e = ModelFile::load(Path::new("/nonexistent/x.json")).unwrap_err();
        assert!(matches!(e, ModelError::Read { .. }));
        let e = ModelFile::from_value(&json!({"T": 1}), "doc").unwrap_err();
        assert!(matches!(e, ModelError::Json { .. }), "{e}");
    }

    #[test]
    fn balanced_tree_counts_and_canonical_nodes() {
        let h = SpatialHierarchy::balanced(&[4, 4, 4]);
        assert_eq!(h.len(), 85);
        assert_eq!(h.leaf_count(h.root()), 64);
        assert_eq!(*h.post_order().last().unwrap(), 0);
        let chain = SpatialHierarchy::new(vec![vec![1], vec![]], vec![None, Some(0)], 1).unwrap();
        assert_eq!(chain.canonical(1), 0);
        assert_eq!(h.canonical(5), 5);
    }
}
