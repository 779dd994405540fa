//! The whole `socscope aggregate` computation: load a model, aggregate it, and describe the
//! p list and the requested partitions with the reference vectors' field names.

use std::path::Path;

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use super::dichotomy::{Cancelled, Observer, Quality, Unobserved};
use super::model::{MicroscopicModel, ModelError, ModelFile};
use super::spatiotemporal::{
    AlgorithmChoice, Area, DEFAULT_MEMORY_BUDGET, MemoryPlan, SpatiotemporalAggregation,
    SpatiotemporalPartition,
};
use super::temporal::{TemporalAggregation, TemporalPartition};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AggregationMode {
    Temporal,
    Spatiotemporal,
}

/// What to compute for a model.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOptions {
    pub mode: AggregationMode,
    /// Ocelotl's "Normalize" setting; the spatiotemporal aggregation ignores it, as the
    /// original does (the report then says `normalized: false`).
    pub normalize: bool,
    /// The p values to report partitions for (`at_p`).
    pub ps: Vec<f64>,
    /// Overrides the model file's bisection threshold.
    pub threshold: Option<f32>,
}

/// Per node, the part id of every slice (-1 where split into children); serialised as the
/// vectors' `{"<node id>": [...]}` object, in node order.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeParts(pub Vec<Vec<i32>>);

impl Serialize for NodeParts {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (node, parts) in self.0.iter().enumerate() {
            map.serialize_entry(&node.to_string(), parts)?;
        }
        map.end()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TemporalEntry {
    pub p: f64,
    /// The p lpaggreg really used (`at_p` only): the float nearest to the requested one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p_used: Option<f64>,
    pub gain: f64,
    pub loss: f64,
    pub n_parts: usize,
    pub ranges: Vec<[usize; 2]>,
    pub parts: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpatiotemporalEntry {
    pub p: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p_used: Option<f64>,
    pub gain: f64,
    pub loss: f64,
    pub node_parts: NodeParts,
    /// `[node, start, end]`, sorted by (start, node).
    pub aggregates: Vec<[usize; 3]>,
    pub aggregates_canonical: Vec<[usize; 3]>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum PartitionEntry {
    Temporal(TemporalEntry),
    Spatiotemporal(SpatiotemporalEntry),
}

/// What `socscope aggregate --json` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AggregationReport {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub mode: AggregationMode,
    pub normalized: bool,
    pub threshold: f64,
    /// Quality of aggregating everything into one part.
    pub whole_gain: f64,
    pub whole_loss: f64,
    /// The significant p values, increasing, each with its partition.
    pub dichotomy: Vec<PartitionEntry>,
    /// The p Ocelotl would show first.
    pub ocelotl_default_p: f64,
    pub at_p: Vec<PartitionEntry>,
    /// How the engine ran: where the qualities lived and what memory it planned for.
    pub engine: EngineReport,
}

/// How a run used memory: the budget, the estimate, and for the spatiotemporal aggregation
/// whether the qualities were kept or recomputed at every p (the same numbers either way).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EngineReport {
    /// `"exact"` or `"scalable"` (the same arithmetic, so lpaggreg's bits, on a schedule
    /// that recomputes the qualities at every p, two leaves at a time, and a bisection that
    /// evaluates only the p its partitions' quality lines cannot answer); the temporal
    /// aggregation is always exact.
    pub algorithm: &'static str,
    /// `"stored"` or `"recomputed"`.
    pub qualities: &'static str,
    pub memory_budget_bytes: u64,
    pub memory_estimate_bytes: u64,
    /// DP evaluations the bisection ran.
    pub evaluations: usize,
}

/// What a caller can set beyond the computation itself: the memory budget, and an observer
/// for progress, the partitions as they are found, and cancellation.
pub struct RunControl<'a> {
    pub memory_budget: u64,
    pub observer: &'a dyn Observer<()>,
    /// The spatiotemporal algorithm: exact, scalable, or chosen by size.
    pub algorithm: AlgorithmChoice,
}

impl Default for RunControl<'_> {
    fn default() -> Self {
        Self {
            memory_budget: DEFAULT_MEMORY_BUDGET,
            algorithm: AlgorithmChoice::Auto,
            observer: &Unobserved,
        }
    }
}

/// Hands a run's observer the events of a bisection over any partition type.
struct Forward<'a>(&'a dyn Observer<()>);

impl<P> Observer<P> for Forward<'_> {
    fn evaluated(&self, p: f32, quality: Quality, _: &P, evaluations: usize) {
        self.0.evaluated(p, quality, &(), evaluations);
    }
    fn working(&self, fraction: f64) {
        self.0.working(fraction);
    }
    fn cancelled(&self) -> bool {
        self.0.cancelled()
    }
}

/// Counts evaluations for the report while forwarding.
struct Counting<'a> {
    inner: Forward<'a>,
    evaluations: std::sync::atomic::AtomicUsize,
}

impl<P> Observer<P> for Counting<'_> {
    fn evaluated(&self, p: f32, quality: Quality, part: &P, evaluations: usize) {
        self.evaluations
            .fetch_max(evaluations, std::sync::atomic::Ordering::Relaxed);
        self.inner.evaluated(p, quality, part, evaluations);
    }
    fn working(&self, fraction: f64) {
        Observer::<P>::working(&self.inner, fraction);
    }
    fn cancelled(&self) -> bool {
        Observer::<P>::cancelled(&self.inner)
    }
}

fn temporal_entry(p: f64, p_used: Option<f64>, part: &TemporalPartition) -> PartitionEntry {
    let q = part.quality();
    PartitionEntry::Temporal(TemporalEntry {
        p,
        p_used,
        gain: q.gain,
        loss: q.loss,
        n_parts: part.n_parts(),
        ranges: part.ranges().iter().map(|&(s, e)| [s, e]).collect(),
        parts: part.parts(),
    })
}

fn spatiotemporal_entry(
    p: f64,
    p_used: Option<f64>,
    part: &SpatiotemporalPartition,
) -> PartitionEntry {
    let q = part.quality();
    let triples = |areas: &[Area]| areas.iter().map(|a| [a.node, a.start, a.end]).collect();
    PartitionEntry::Spatiotemporal(SpatiotemporalEntry {
        p,
        p_used,
        gain: q.gain,
        loss: q.loss,
        node_parts: NodeParts(part.node_parts().to_vec()),
        aggregates: triples(part.aggregates()),
        aggregates_canonical: triples(part.canonical_aggregates()),
    })
}

fn mib(bytes: u64) -> u64 {
    bytes.div_ceil(1 << 20)
}

/// Peak bytes of the temporal tables: gain and loss of every interval, and the per-start rows
/// they are computed in before being packed.
fn temporal_bytes(model: &MicroscopicModel) -> u64 {
    let n = model.slices() as u64;
    n * (n + 1) / 2 * 32
}

fn too_large(
    model: &MicroscopicModel,
    mode: &'static str,
    how: &str,
    needed: u64,
    budget: u64,
) -> ModelError {
    ModelError::TooLarge {
        origin: model.name().unwrap_or("model").to_owned(),
        mode,
        slices: model.slices(),
        how: how.to_owned(),
        needed_mib: mib(needed),
        budget_mib: mib(budget),
    }
}

/// Loads a model file (reference-vector input format) and runs [`run_model`] on it.
pub fn run_model_file(path: &Path, options: &RunOptions) -> Result<AggregationReport, ModelError> {
    run_model_file_with(path, options, &RunControl::default())
}

/// [`run_model_file`] with a memory budget and an observer (see [`run_model_with`]).
pub fn run_model_file_with(
    path: &Path,
    options: &RunOptions,
    control: &RunControl,
) -> Result<AggregationReport, ModelError> {
    let file = ModelFile::load(path)?;
    run_model_with(&file, options, control).map_err(|e| match e {
        ModelError::MissingHierarchy { .. } => ModelError::MissingHierarchy {
            origin: path.display().to_string(),
        },
        other => other,
    })
}

/// Aggregates a loaded model: qualities, the full bisection with its partitions, Ocelotl's
/// default p, and the partition at every requested p.
pub fn run_model(file: &ModelFile, options: &RunOptions) -> Result<AggregationReport, ModelError> {
    run_model_with(file, options, &RunControl::default())
}

/// [`run_model`] within a memory budget, observed: refuses before computing anything when the
/// estimate exceeds the budget, and stops with [`ModelError::Cancelled`] when the observer
/// asks.
pub fn run_model_with(
    file: &ModelFile,
    options: &RunOptions,
    control: &RunControl,
) -> Result<AggregationReport, ModelError> {
    if let Some(&p) = options.ps.iter().find(|p| !(0.0..=1.0).contains(*p)) {
        return Err(ModelError::BadP { p });
    }
    let threshold = options.threshold.unwrap_or(file.threshold);
    let model = &file.model;
    let budget = control.memory_budget;
    let observer = Counting {
        inner: Forward(control.observer),
        evaluations: std::sync::atomic::AtomicUsize::new(0),
    };
    let cancelled = |_: Cancelled| ModelError::Cancelled;
    let (normalized, whole, dichotomy, default_p, at_p, plan) = match options.mode {
        AggregationMode::Temporal => {
            let needed = temporal_bytes(model);
            if needed > budget {
                return Err(too_large(model, "temporal", "", needed, budget));
            }
            let agg = TemporalAggregation::new(model, options.normalize);
            let list = agg
                .significant_ps_observed(threshold, &observer)
                .map_err(cancelled)?;
            let dichotomy = list
                .entries()
                .iter()
                .map(|e| temporal_entry(f64::from(e.p), None, &e.partition))
                .collect();
            let at_p = options
                .ps
                .iter()
                .map(|&p| temporal_entry(p, Some(f64::from(p as f32)), &agg.best_partition(p)))
                .collect();
            let whole = agg.qualities().quality(0, model.slices() - 1);
            let plan = ("exact", "stored", needed);
            (
                options.normalize,
                whole,
                dichotomy,
                list.default_p(),
                at_p,
                plan,
            )
        }
        AggregationMode::Spatiotemporal => {
            let hierarchy = model
                .hierarchy()
                .ok_or_else(|| ModelError::MissingHierarchy {
                    origin: model.name().unwrap_or("model").to_owned(),
                })?;
            let (agg, plan): (_, MemoryPlan) =
                SpatiotemporalAggregation::within(model, hierarchy, budget, control.algorithm)
                    .map_err(|plan| {
                        too_large(
                            model,
                            "spatiotemporal",
                            &format!(
                                " over {} hierarchy nodes with the {} algorithm{} (the exact one would need {} MiB with its qualities kept, {} MiB recomputing them at every p; the scalable one {} MiB)",
                                hierarchy.len(),
                                plan.algorithm.name(),
                                if plan.algorithm == crate::ocelotl::Algorithm::Exact {
                                    " and its qualities recomputed at every p"
                                } else {
                                    ""
                                },
                                mib(plan.stored_bytes),
                                mib(plan.recomputed_bytes),
                                mib(plan.scalable_bytes)
                            ),
                            plan.bytes,
                            budget,
                        )
                    })?;
            let list = agg
                .significant_ps_observed(threshold, &observer)
                .map_err(cancelled)?;
            let dichotomy = list
                .entries()
                .iter()
                .map(|e| spatiotemporal_entry(f64::from(e.p), None, &e.partition))
                .collect();
            let at_p = options
                .ps
                .iter()
                .map(|&p| spatiotemporal_entry(p, Some(p), &agg.best_partition(p)))
                .collect();
            let whole: Quality = agg
                .qualities()
                .quality(hierarchy.root(), 0, model.slices() - 1);
            let plan = (plan.algorithm.name(), plan.store.name(), plan.bytes);
            (false, whole, dichotomy, list.default_p(), at_p, plan)
        }
    };
    Ok(AggregationReport {
        name: model.name().map(str::to_owned),
        mode: options.mode,
        normalized,
        threshold: f64::from(threshold),
        whole_gain: whole.gain,
        whole_loss: whole.loss,
        dichotomy,
        ocelotl_default_p: default_p,
        at_p,
        engine: EngineReport {
            algorithm: plan.0,
            qualities: plan.1,
            memory_budget_bytes: budget,
            memory_estimate_bytes: plan.2,
            evaluations: observer
                .evaluations
                .load(std::sync::atomic::Ordering::Relaxed),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn file(with_hierarchy: bool) -> ModelFile {
        let mut doc = json!({
            "name": "tiny", "T": 4, "S": 2, "U": 1,
            "values": [[[1.0], [1.0]], [[1.0], [1.0]], [[5.0], [1.0]], [[5.0], [1.0]]],
        });
        if with_hierarchy {
            doc["hierarchy"] = json!({"parent": [-1, 0, 0], "leaf_resource": [-1, 0, 1], "children": [[1, 2], [], []]});
        }
        ModelFile::from_value(&doc, "tiny.json").unwrap()
    }

    fn options(mode: AggregationMode, ps: Vec<f64>) -> RunOptions {
        RunOptions {
            mode,
            normalize: false,
            ps,
            threshold: None,
        }
    }

    #[test]
    fn temporal_report_uses_the_vector_field_names() {
        let report =
            run_model(&file(false), &options(AggregationMode::Temporal, vec![0.1])).unwrap();
        let v = serde_json::to_value(&report).unwrap();
        assert_eq!(v["mode"], "temporal");
        let at = &v["at_p"][0];
        assert_eq!(at["p"], 0.1);
        assert_eq!(at["p_used"], f64::from(0.1f32));
        assert_eq!(at["ranges"], json!([[0, 1], [2, 3]]));
        assert_eq!(at["parts"], json!([0, 0, 1, 1]));
        assert_eq!(at["n_parts"], 2);
        let first = &v["dichotomy"][0];
        assert_eq!(first["p"], 0.0);
        assert!(first.get("p_used").is_none());
        assert!(v["dichotomy"].as_array().unwrap().len() >= 2);
    }

    #[test]
    fn spatiotemporal_report_lists_areas_and_node_parts() {
        let report = run_model(
            &file(true),
            &options(AggregationMode::Spatiotemporal, vec![1.0]),
        )
        .unwrap();
        let v = serde_json::to_value(&report).unwrap();
        let at = &v["at_p"][0];
        assert_eq!(at["aggregates"], json!([[0, 0, 3]]));
        assert_eq!(at["node_parts"]["2"], json!([0, 0, 0, 0]));
        assert_eq!(v["normalized"], false);
    }

    #[test]
    fn spatiotemporal_without_hierarchy_and_bad_p_are_errors() {
        let e = run_model(
            &file(false),
            &options(AggregationMode::Spatiotemporal, vec![]),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "tiny: the spatiotemporal aggregation needs a producer hierarchy (\"hierarchy\" object)"
        );
        let e =
            run_model(&file(false), &options(AggregationMode::Temporal, vec![1.5])).unwrap_err();
        assert_eq!(e.to_string(), "p = 1.5: expected a number in [0, 1]");
    }

    #[test]
    fn quadratic_tables_that_cannot_fit_are_refused() {
        let model = crate::ocelotl::MicroscopicModel::new(40_000, 1, 1, vec![0.0; 40_000]).unwrap();
        let big = ModelFile {
            model,
            threshold: 0.001,
            p_values: Vec::new(),
        };
        let e = run_model(&big, &options(AggregationMode::Temporal, vec![])).unwrap_err();
        assert!(
            matches!(e, ModelError::TooLarge { slices: 40_000, .. }),
            "{e}"
        );
    }
}
