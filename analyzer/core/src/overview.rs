//! The Ocelotl view's model ("Ocelotl: Large Trace Overviews" §3-4.1, RR-8524 §4-5), with no GUI: settings, the pipeline from
//! the trace to the aggregated overview on a loader thread (microscopic model a few slices at a time,
//! then the aggregation of what is read), the cache of microscopic models, the partition at any p, the
//! gain/loss curves, and what the view draws and tells on hover.
//!
//! The pipeline publishes an overview after each step of slices, so the first slices are on screen
//! while the rest is read; a live trace's model grows by fixed-width slices (the width chosen at the
//! first load), reading only the new ones; a filter that hides more than a cached model's is cut out
//! of it. The aggregation itself is the bit-exact engine of [`crate::ocelotl`].
//!
//! Start here: [`OcelotlState`] (what a view holds), [`OcelotlSettings`], [`Overview`],
//! [`Aggregated`], [`ModelCache`].

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use socscope_tracedb::{Filter, TimeRange, Timestamp, TraceReader};

use crate::live::{Growth, LiveLoad, StepKind};
use crate::loader::{LoaderHandle, Progress, spawn_task};
use crate::micro::{Metric, PartialModel, SliceGrid, SpatialNode, TraceMicroscopicModel};
use crate::ocelotl::{
    self, AreaMode, DrawnArea, MicroscopicModel, PList, SpatialHierarchy,
    SpatiotemporalAggregation, SpatiotemporalPartition, StackedProportions, TemporalAggregation,
    TemporalPartition,
};
use crate::sync::ViewFilter;

/// Temporal or spatiotemporal aggregation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Aggregation {
    /// Time cut into parts, all producers together.
    #[default]
    Temporal,
    /// Areas of (hierarchy node × time span).
    Spatiotemporal,
}

/// How a temporal partition is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TemporalDrawing {
    /// Each part as one rectangle in the colour of its mode type.
    Partition,
    /// Each part as the stacked proportions of its types (002 eq. 4).
    #[default]
    Stacked,
}

/// How a spatiotemporal partition is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SpatialDrawing {
    /// The areas' outlines, filled by the magnitude of their values (one colour).
    Areas,
    /// Each area in the colour of its mode type, opacity by its amplitude (002 eq. 5).
    #[default]
    Mode,
}

/// What the user sets in the view's settings panel (types and producers are the group's filters).
#[derive(Clone, Debug, PartialEq)]
pub struct OcelotlSettings {
    pub metric: Metric,
    pub aggregation: Aggregation,
    pub temporal: TemporalDrawing,
    pub spatial: SpatialDrawing,
    /// Time slices of the microscopic model.
    pub slices: usize,
    /// Ocelotl's "Normalize" (temporal only: the spatiotemporal path never normalises).
    pub normalize: bool,
    /// The bisection threshold over p.
    pub threshold: f32,
}

impl Default for OcelotlSettings {
    fn default() -> Self {
        Self {
            metric: Metric::Count,
            aggregation: Aggregation::Temporal,
            temporal: TemporalDrawing::default(),
            spatial: SpatialDrawing::default(),
            slices: 200,
            normalize: false,
            threshold: ocelotl::DEFAULT_THRESHOLD,
        }
    }
}

impl OcelotlSettings {
    /// Whether going from `self` to `other` needs the pipeline run again (drawing choices do not).
    pub fn needs_rerun(&self, other: &Self) -> bool {
        self.metric != other.metric
            || self.aggregation != other.aggregation
            || self.slices != other.slices
            || self.normalize != other.normalize
            || self.threshold != other.threshold
    }
}

/// Which microscopic model: what the cache is keyed by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelKey {
    pub trace: PathBuf,
    pub interval: TimeRange,
    pub slices: usize,
    pub metric: Metric,
    pub filter: ViewFilter,
}

impl ModelKey {
    fn grid(&self) -> Option<SliceGrid> {
        SliceGrid::new(self.interval, self.slices)
    }
}

/// How a run started from what was cached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reuse {
    /// Nothing usable: read from the trace.
    Fresh,
    /// The same model, complete: nothing read.
    Exact,
    /// A model of the same slices, partly read (a live trace's shorter grid, or a stopped run): its
    /// `slices` slices are kept, the rest read.
    Continued { slices: usize },
    /// A model of the same grid with wider filters, cut down to the new ones: nothing read.
    Narrowed,
}

/// Microscopic models by (trace, interval, slices, metric, filters), most recent first, shared with
/// the loader threads.
pub struct ModelCache {
    entries: Mutex<VecDeque<(ModelKey, PartialModel)>>,
    capacity: usize,
}

impl ModelCache {
    /// A cache of at most `capacity` models.
    pub fn new(capacity: usize) -> Arc<Self> {
        Arc::new(Self {
            entries: Mutex::new(VecDeque::new()),
            capacity: capacity.max(1),
        })
    }

    /// Models held.
    pub fn len(&self) -> usize {
        self.entries.lock().map_or(0, |e| e.len())
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keeps `model` as what is known of `key` (replacing what was).
    pub fn store(&self, key: ModelKey, model: PartialModel) {
        if let Ok(mut e) = self.entries.lock() {
            e.retain(|(k, _)| *k != key);
            e.push_front((key, model));
            e.truncate(self.capacity);
        }
    }

    /// Where a run for `key` starts: the same model if held (complete or not), else a held model of
    /// the same trace, metric and filters whose slices are the first of `key`'s, else one of the same
    /// grid whose filters show more (cut down), else nothing.
    pub fn start(&self, key: &ModelKey, filter: &Filter) -> Option<(PartialModel, Reuse)> {
        let grid = key.grid()?;
        let entries = self.entries.lock().ok();
        let found = entries.and_then(|e| {
            if let Some((_, m)) = e.iter().find(|(k, _)| k == key) {
                let reuse = if m.is_complete() {
                    Reuse::Exact
                } else {
                    Reuse::Continued { slices: m.done() }
                };
                return Some((m.clone(), reuse));
            }
            let same_source = |k: &ModelKey| k.trace == key.trace && k.metric == key.metric;
            let grown = e
                .iter()
                .filter(|(k, m)| same_source(k) && k.filter == key.filter && m.done() > 0)
                .filter_map(|(_, m)| m.extended(grid))
                .max_by_key(PartialModel::done);
            if let Some(m) = grown {
                let slices = m.done();
                return Some((m, Reuse::Continued { slices }));
            }
            e.iter()
                .filter(|(k, m)| {
                    same_source(k)
                        && k.interval == key.interval
                        && k.slices == key.slices
                        && m.is_complete()
                        && k.filter.hidden_types.is_subset(&key.filter.hidden_types)
                        && k.filter
                            .hidden_producers
                            .is_subset(&key.filter.hidden_producers)
                })
                .find_map(|(_, m)| {
                    m.restricted(filter, |p, t| key.filter.shows(t, p))
                        .map(|m| (m, Reuse::Narrowed))
                })
        });
        Some(found.unwrap_or_else(|| (PartialModel::new(grid, key.metric, filter), Reuse::Fresh)))
    }
}

/// A partition of the overview at one p.
#[derive(Clone, Debug)]
pub enum Partition {
    Temporal(TemporalPartition),
    Spatiotemporal(SpatiotemporalPartition),
}

impl Partition {
    /// Parts (temporal) or areas (spatiotemporal).
    pub fn len(&self) -> usize {
        match self {
            Partition::Temporal(t) => t.n_parts(),
            Partition::Spatiotemporal(s) => s.aggregates().len(),
        }
    }

    /// Whether there is no part.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The aggregation of one microscopic model. The aggregation is shared by the overviews
/// published while its bisection runs (each with the p list found so far) and the final one.
pub enum AggregationResult {
    Temporal {
        agg: Arc<TemporalAggregation>,
        plist: PList<TemporalPartition>,
    },
    Spatiotemporal {
        agg: Arc<SpatiotemporalAggregation>,
        plist: PList<SpatiotemporalPartition>,
    },
}

/// How far the bisection of an aggregation is, shared live with the view while it runs.
#[derive(Debug, Default)]
pub struct BisectionProgress {
    evaluations: AtomicUsize,
    /// Fraction of the current evaluation, as f64 bits.
    fraction: AtomicU64,
    done: AtomicBool,
}

impl BisectionProgress {
    /// p values evaluated so far.
    pub fn evaluations(&self) -> usize {
        self.evaluations.load(Ordering::Relaxed)
    }

    /// How far the evaluation under way is, 0 to 1.
    pub fn fraction(&self) -> f64 {
        f64::from_bits(self.fraction.load(Ordering::Relaxed))
    }

    /// The bisection finished: the p list is complete.
    pub fn done(&self) -> bool {
        self.done.load(Ordering::Relaxed)
    }
}

/// The engine's input and output for one overview.
pub struct Aggregated {
    pub model: MicroscopicModel,
    pub hierarchy: SpatialHierarchy,
    /// Names of the hierarchy's nodes.
    pub nodes: Vec<SpatialNode>,
    /// Per node, its first and last leaf (producers are in leaf order).
    pub spans: Vec<(usize, usize)>,
    pub result: AggregationResult,
    /// The bisection behind `result`, live.
    pub bisection: Arc<BisectionProgress>,
    /// Whether `result` holds the whole p list; `false` for the overviews published while the
    /// bisection runs, which list the p evaluated so far.
    pub complete: bool,
}

/// Sends the overviews of a running bisection: the first evaluated p at once (a coarse
/// overview), then at most one a second, each with the p list found so far.
struct Preliminary<'a, P> {
    progress: Arc<BisectionProgress>,
    cancelled: &'a (dyn Fn() -> bool + Sync),
    found: Mutex<(Vec<ocelotl::PEntry<P>>, Option<Instant>)>,
    publish: &'a (dyn Fn(Vec<ocelotl::PEntry<P>>) + Sync),
}

impl<P: Clone + Send> ocelotl::Observer<P> for Preliminary<'_, P> {
    fn evaluated(&self, p: f32, quality: ocelotl::Quality, partition: &P, evaluations: usize) {
        self.progress
            .evaluations
            .fetch_max(evaluations, Ordering::Relaxed);
        self.progress
            .fraction
            .store(0f64.to_bits(), Ordering::Relaxed);
        let Ok(mut found) = self.found.lock() else {
            return;
        };
        found.0.push(ocelotl::PEntry {
            p,
            quality,
            partition: partition.clone(),
        });
        // Published under the lock, and not once stopped: a stopped run says nothing more.
        let due = found
            .1
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(1));
        if due && !(self.cancelled)() {
            found.1 = Some(Instant::now());
            let mut entries = found.0.clone();
            entries.sort_by(|a, b| a.p.total_cmp(&b.p));
            (self.publish)(entries);
        }
    }
    fn working(&self, fraction: f64) {
        self.progress
            .fraction
            .store(fraction.to_bits(), Ordering::Relaxed);
    }
    fn cancelled(&self) -> bool {
        (self.cancelled)()
    }
}

/// One point of the gain/loss curves: a listed p and its partition's quality.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CurvePoint {
    pub p: f64,
    pub gain: f64,
    pub loss: f64,
}

impl Aggregated {
    /// Runs the engine on `micro` with `settings`.
    pub fn compute(
        micro: &TraceMicroscopicModel,
        settings: &OcelotlSettings,
    ) -> Result<Self, String> {
        Self::compute_observed(micro, settings, &|| false, &|_| {})
            .map(|a| a.expect("an uncancelled run finishes"))
    }

    /// [`Self::compute`] for the pipeline: `publish` gets the overviews of the bisection while
    /// it runs (the coarse one first), and `cancelled` stops it (`Ok(None)`).
    pub fn compute_observed(
        micro: &TraceMicroscopicModel,
        settings: &OcelotlSettings,
        cancelled: &(dyn Fn() -> bool + Sync),
        publish: &(dyn Fn(Aggregated) + Sync),
    ) -> Result<Option<Self>, String> {
        let model = micro.to_model().map_err(|e| e.to_string())?;
        let (hierarchy, nodes) = micro.hierarchy();
        let spans = node_spans(&hierarchy);
        let bisection = Arc::new(BisectionProgress::default());
        let shell = |result, complete| Aggregated {
            model: model.clone(),
            hierarchy: hierarchy.clone(),
            nodes: nodes.clone(),
            spans: spans.clone(),
            result,
            bisection: bisection.clone(),
            complete,
        };
        let result = match settings.aggregation {
            Aggregation::Temporal => {
                let agg = Arc::new(TemporalAggregation::new(&model, settings.normalize));
                let send = |entries| {
                    publish(shell(
                        AggregationResult::Temporal {
                            agg: agg.clone(),
                            plist: PList::from_entries(entries),
                        },
                        false,
                    ))
                };
                let observer = Preliminary {
                    progress: bisection.clone(),
                    cancelled,
                    found: Mutex::new((Vec::new(), None)),
                    publish: &send,
                };
                match agg.significant_ps_observed(settings.threshold, &observer) {
                    Ok(plist) => AggregationResult::Temporal { agg, plist },
                    Err(ocelotl::Cancelled) => return Ok(None),
                }
            }
            Aggregation::Spatiotemporal => {
                let agg = Arc::new(SpatiotemporalAggregation::new(&model, &hierarchy));
                let send = |entries| {
                    publish(shell(
                        AggregationResult::Spatiotemporal {
                            agg: agg.clone(),
                            plist: PList::from_entries(entries),
                        },
                        false,
                    ))
                };
                let observer = Preliminary {
                    progress: bisection.clone(),
                    cancelled,
                    found: Mutex::new((Vec::new(), None)),
                    publish: &send,
                };
                match agg.significant_ps_observed(settings.threshold, &observer) {
                    Ok(plist) => AggregationResult::Spatiotemporal { agg, plist },
                    Err(ocelotl::Cancelled) => return Ok(None),
                }
            }
        };
        bisection.done.store(true, Ordering::Relaxed);
        Ok(Some(shell(result, true)))
    }

    /// The significant p values, increasing.
    pub fn ps(&self) -> Vec<f64> {
        self.curve().iter().map(|c| c.p).collect()
    }

    /// Gain and loss of every listed p (each partition holds from its p to the next).
    pub fn curve(&self) -> Vec<CurvePoint> {
        fn points<P>(l: &PList<P>) -> Vec<CurvePoint> {
            l.entries()
                .iter()
                .map(|e| CurvePoint {
                    p: f64::from(e.p),
                    gain: e.quality.gain,
                    loss: e.quality.loss,
                })
                .collect()
        }
        match &self.result {
            AggregationResult::Temporal { plist, .. } => points(plist),
            AggregationResult::Spatiotemporal { plist, .. } => points(plist),
        }
    }

    /// The p Ocelotl shows first.
    pub fn default_p(&self) -> f64 {
        match &self.result {
            AggregationResult::Temporal { plist, .. } => plist.default_p(),
            AggregationResult::Spatiotemporal { plist, .. } => plist.default_p(),
        }
    }

    /// The best partition at any p (not only the listed ones). A listed p's partition is the
    /// one the bisection found there (the same DP at the same p), so it is not recomputed.
    pub fn partition(&self, p: f64) -> Partition {
        fn listed<P: Clone>(l: &PList<P>, p: f64) -> Option<P> {
            l.entries()
                .iter()
                .find(|e| f64::from(e.p) == p)
                .map(|e| e.partition.clone())
        }
        match &self.result {
            AggregationResult::Temporal { agg, plist } => {
                Partition::Temporal(listed(plist, p).unwrap_or_else(|| agg.best_partition(p)))
            }
            AggregationResult::Spatiotemporal { agg, plist } => {
                Partition::Spatiotemporal(listed(plist, p).unwrap_or_else(|| agg.best_partition(p)))
            }
        }
    }

    /// The stacked proportions of a temporal partition's parts.
    pub fn stacked(&self, part: &TemporalPartition) -> StackedProportions {
        ocelotl::stacked_proportions(&self.model, part.ranges())
    }

    /// What to draw of a spatiotemporal partition when a leaf is `leaf_px` pixels high: areas, or
    /// nodes standing for children thinner than `min_px` (the visual aggregation of 002 §3.5.1),
    /// each with its mode.
    pub fn drawn(
        &self,
        part: &SpatiotemporalPartition,
        leaf_px: f64,
        min_px: f64,
    ) -> Vec<(DrawnArea, AreaMode)> {
        let drawn = ocelotl::visual_aggregation(&self.hierarchy, part, leaf_px, min_px);
        let areas: Vec<ocelotl::Area> = drawn
            .iter()
            .map(|d| ocelotl::Area {
                node: d.node,
                start: d.start,
                end: d.end,
            })
            .collect();
        let modes = ocelotl::spatiotemporal_modes(&self.model, &self.hierarchy, &areas);
        drawn.into_iter().zip(modes).collect()
    }

    /// The sum of each type's values over `node`'s leaves and slices `start..=end` (events, state
    /// nanoseconds or the sum of slice means, per the metric), types in model order.
    pub fn values(&self, node: usize, start: usize, end: usize) -> Vec<f64> {
        let (a, b) = self.spans.get(node).copied().unwrap_or((0, 0));
        let mut out = vec![0.0; self.model.types()];
        if a > b {
            return out;
        }
        for t in start..=end.min(self.model.slices().saturating_sub(1)) {
            for s in a..=b {
                for (u, o) in out.iter_mut().enumerate() {
                    *o += self.model.value(t, s, u);
                }
            }
        }
        out
    }
}

/// Per node, its first and last leaf; `(usize::MAX, 0)` for a node without leaves.
pub fn node_spans(h: &SpatialHierarchy) -> Vec<(usize, usize)> {
    let mut span = vec![(usize::MAX, 0usize); h.len()];
    for &node in h.post_order() {
        span[node] = match h.leaf_producer(node) {
            Some(p) => (p, p),
            None => h.children(node).iter().fold((usize::MAX, 0), |acc, &c| {
                (acc.0.min(span[c].0), acc.1.max(span[c].1))
            }),
        };
    }
    span
}

/// What the pipeline publishes: the model of the slices read so far and its aggregation.
#[derive(Clone)]
pub struct Overview {
    pub micro: Arc<TraceMicroscopicModel>,
    /// Slices the run will have read when done.
    pub slices_total: usize,
    /// `None` when the model has no value (nothing to aggregate).
    pub aggregated: Option<Arc<Aggregated>>,
    /// How the run started from the cache.
    pub reuse: Reuse,
    /// Why the engine could not run, if it could not.
    pub error: Option<String>,
}

impl Overview {
    /// Whether every slice of the run is in.
    pub fn complete(&self) -> bool {
        self.micro.grid.slices >= self.slices_total
    }
}

/// One run of the pipeline.
#[derive(Clone, Debug)]
pub struct OcelotlRequest {
    pub key: ModelKey,
    /// The store filter of `key.filter`.
    pub filter: Filter,
    pub settings: OcelotlSettings,
}

/// Slices read before the first overview is published, and per later step.
fn step_slices(total: usize, done: usize) -> usize {
    if done == 0 {
        (total / 16).clamp(4, 32)
    } else {
        (total / 8).max(8)
    }
}

/// The pipeline, on the calling thread: model (from the cache where it can), aggregation after each
/// step (at most every 100 ms, and at the end), published through `publish`; what was read goes to the
/// cache, also when stopped.
pub fn run(
    request: &OcelotlRequest,
    cache: &ModelCache,
    cancelled: &(dyn Fn() -> bool + Sync),
    publish: &mut (dyn FnMut(Overview, usize) -> Result<(), String> + Send),
) -> Result<(), String> {
    let reader = TraceReader::open(&request.key.trace).map_err(|e| e.to_string())?;
    let Some((mut pm, reuse)) = cache.start(&request.key, &request.filter) else {
        return Err("the interval is empty".into());
    };
    let total = pm.grid().slices;
    let mut last = None::<Instant>;
    loop {
        let complete = pm.is_complete();
        if !complete {
            if cancelled() {
                break;
            }
            let n = step_slices(total, pm.done());
            pm.step(&reader, n).map_err(|e| e.to_string())?;
        }
        let complete = pm.is_complete();
        let due = last.is_none_or(|t| t.elapsed() >= Duration::from_millis(100));
        if complete || due {
            let micro = pm.model(&reader).map_err(|e| e.to_string())?;
            let micro = Arc::new(micro);
            let done = pm.done();
            // Overviews of the bisection under way go out as they come (the coarse one
            // first); a failure to publish them only loses a preliminary picture.
            let preliminary = Mutex::new(&mut *publish);
            let send = |a: Aggregated| {
                if let Ok(mut guard) = preliminary.lock() {
                    let publish: &mut (dyn FnMut(Overview, usize) -> Result<(), String> + Send) =
                        &mut **guard;
                    let _ = publish(
                        Overview {
                            micro: micro.clone(),
                            slices_total: total,
                            aggregated: Some(Arc::new(a)),
                            reuse,
                            error: None,
                        },
                        done,
                    );
                }
            };
            let (aggregated, error) = if micro.is_empty() {
                (None, None)
            } else {
                match Aggregated::compute_observed(&micro, &request.settings, cancelled, &send) {
                    Ok(Some(a)) => (Some(Arc::new(a)), None),
                    // Stopped: what was read is cached, the last overview stays on screen.
                    Ok(None) => break,
                    Err(e) => (None, Some(e)),
                }
            };
            let publish = preliminary
                .into_inner()
                .map_err(|_| "the pipeline's publisher was poisoned".to_string())?;
            publish(
                Overview {
                    micro,
                    slices_total: total,
                    aggregated,
                    reuse,
                    error,
                },
                done,
            )?;
            last = Some(Instant::now());
        }
        if complete {
            break;
        }
    }
    cache.store(request.key.clone(), pm);
    Ok(())
}

/// Starts [`run`] on a loader thread.
pub fn spawn(request: OcelotlRequest, cache: Arc<ModelCache>) -> LoaderHandle<Overview> {
    let range = request.key.interval;
    let slices = request.key.slices.max(1);
    spawn_task(range.len(), move |p| {
        let mut publish = |o: Overview, done: usize| {
            let ns = (range.len() as i128 * done as i128 / slices as i128) as i64;
            p.publish(o, ns, 0, done as u64)
        };
        run(&request, &cache, &|| p.cancelled(), &mut publish)
    })
}

/// The grid of a load: `interval` in `slices` slices; on a live trace, slices of a fixed `width` from
/// the interval's start, as many as are complete (so a grown trace adds slices and keeps the others).
pub fn grid_of(interval: TimeRange, slices: usize, width: Option<i64>) -> Option<SliceGrid> {
    match width {
        Some(w) if w > 0 => {
            let k = (interval.len() / w).max(1);
            SliceGrid::new(
                TimeRange::new(interval.start, interval.start + k * w),
                k as usize,
            )
        }
        _ => SliceGrid::new(interval, slices),
    }
}

/// The next listed p after `p` (`dir` > 0) or before it (`dir` < 0); `p` if there is none.
pub fn step_p(ps: &[f64], p: f64, dir: i32) -> f64 {
    if dir > 0 {
        ps.iter().copied().find(|&x| x > p + 1e-12).unwrap_or(p)
    } else {
        ps.iter()
            .rev()
            .copied()
            .find(|&x| x < p - 1e-12)
            .unwrap_or(p)
    }
}

/// What the Ocelotl view of a group holds: settings, the live load of overviews, the p shown and the
/// partition at it.
pub struct OcelotlState {
    pub settings: OcelotlSettings,
    pub live: LiveLoad<Overview>,
    pub overview: Option<Overview>,
    /// The p shown.
    pub p: f64,
    /// The user chose `p` (else the default p of each new overview is shown).
    pub p_chosen: bool,
    partition: Option<(f64, usize, Arc<Partition>)>,
    pub cache: Arc<ModelCache>,
    /// Slice width on a live trace, fixed at the first load of an interval.
    width: Option<i64>,
    source: Option<(PathBuf, Filter, ViewFilter)>,
    /// Overviews taken so far (identifies the one a partition was computed on).
    generation: usize,
}

impl OcelotlState {
    pub fn new(range: TimeRange) -> Self {
        Self {
            settings: OcelotlSettings::default(),
            live: LiveLoad::new(range, Growth::RELOAD_EACH_SECOND),
            overview: None,
            p: 0.0,
            p_chosen: false,
            partition: None,
            cache: ModelCache::new(8),
            width: None,
            source: None,
            generation: 0,
        }
    }

    fn request(&self, interval: TimeRange) -> Option<OcelotlRequest> {
        let (trace, filter, view_filter) = self.source.clone()?;
        let grid = grid_of(interval, self.settings.slices, self.width)?;
        Some(OcelotlRequest {
            key: ModelKey {
                trace,
                interval: grid.range,
                slices: grid.slices,
                metric: self.settings.metric,
                filter: view_filter,
            },
            filter,
            settings: self.settings.clone(),
        })
    }

    /// Runs the pipeline on `interval` (a new interval or filters); `live`: the trace is still written
    /// (slices of fixed width, so that it can grow).
    pub fn load(
        &mut self,
        trace: &Path,
        interval: TimeRange,
        filter: Filter,
        view_filter: ViewFilter,
        live: bool,
    ) {
        self.source = Some((trace.to_path_buf(), filter, view_filter));
        self.width = live.then(|| (interval.len() / self.settings.slices.max(1) as i64).max(1));
        self.overview = None;
        self.partition = None;
        self.p_chosen = false;
        let Some(request) = self.request(interval) else {
            return;
        };
        let cache = self.cache.clone();
        self.live.load(interval, move |_| spawn(request, cache));
    }

    /// Runs the pipeline again on the loaded interval (settings changed).
    pub fn rerun(&mut self) {
        let Some((trace, filter, vf)) = self.source.clone() else {
            return;
        };
        let interval = self.live.loaded();
        let live = self.width.is_some();
        self.load(&trace, interval, filter, vf, live);
    }

    /// A live trace grew: the overview grows by the slices completed since (at most once a second).
    pub fn extend(&mut self, end: Timestamp) {
        let cache = self.cache.clone();
        let Some(request) = self.request(TimeRange::new(self.live.loaded().start, end)) else {
            return;
        };
        self.live.extend(end, move |step| {
            debug_assert_eq!(step.kind, StepKind::Reload);
            spawn(request, cache)
        });
    }

    /// Takes a new overview; the default p of each is shown unless the user chose one.
    pub fn poll(&mut self) -> bool {
        let Some(o) = self.live.poll() else {
            return false;
        };
        if !self.p_chosen
            && let Some(a) = &o.aggregated
        {
            self.p = a.default_p();
        }
        self.overview = Some(o);
        self.generation += 1;
        true
    }

    pub fn busy(&self) -> bool {
        self.live.busy()
    }

    pub fn progress(&self) -> Option<Progress> {
        self.live.progress()
    }

    pub fn stop(&mut self) {
        self.live.stop();
    }

    /// Shows the partition at `p` (any p in [0, 1]).
    pub fn set_p(&mut self, p: f64) {
        self.p = p.clamp(0.0, 1.0);
        self.p_chosen = true;
    }

    /// Steps to the next (`dir` > 0) or previous listed p.
    pub fn step_p(&mut self, dir: i32) {
        if let Some(a) = self.aggregated() {
            let p = step_p(&a.ps(), self.p, dir);
            self.set_p(p);
        }
    }

    /// The aggregation on screen.
    pub fn aggregated(&self) -> Option<&Arc<Aggregated>> {
        self.overview.as_ref().and_then(|o| o.aggregated.as_ref())
    }

    /// The partition at the p shown (computed once per p and overview).
    pub fn partition(&mut self) -> Option<Arc<Partition>> {
        let a = self.aggregated()?.clone();
        match &self.partition {
            Some((p, g, part)) if *p == self.p && *g == self.generation => Some(part.clone()),
            _ => {
                let part = Arc::new(a.partition(self.p));
                self.partition = Some((self.p, self.generation, part.clone()));
                Some(part)
            }
        }
    }

    /// The time interval of slices `start..=end` of the overview on screen.
    pub fn slice_range(&self, start: usize, end: usize) -> Option<TimeRange> {
        let g = self.overview.as_ref()?.micro.grid;
        Some(TimeRange::new(g.edge(start), g.edge(end + 1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ocelotl::DrawnKind;
    use crate::testutil::{self, Spec};

    fn key(path: &Path, interval: TimeRange, slices: usize, filter: ViewFilter) -> ModelKey {
        ModelKey {
            trace: path.to_path_buf(),
            interval,
            slices,
            metric: Metric::Count,
            filter,
        }
    }

    fn run_all(request: &OcelotlRequest, cache: &ModelCache) -> Vec<Overview> {
        let mut out = Vec::new();
        run(request, cache, &|| false, &mut |o, _| {
            out.push(o);
            Ok(())
        })
        .unwrap();
        out
    }

    #[test]
    fn the_pipeline_publishes_the_first_slices_then_the_whole_and_caches_it() {
        let (_dir, path) = testutil::write_spec(&Spec::small());
        let cache = ModelCache::new(4);
        let interval = TimeRange::new(0, 1000);
        let request = OcelotlRequest {
            key: key(&path, interval, 100, ViewFilter::default()),
            filter: Filter::all(),
            settings: OcelotlSettings {
                slices: 100,
                ..OcelotlSettings::default()
            },
        };
        let out = run_all(&request, &cache);
        let first = out.first().unwrap();
        assert!(
            first.micro.grid.slices < 100,
            "the first overview is partial"
        );
        let last = out.last().unwrap();
        assert!(last.complete());
        assert_eq!(last.reuse, Reuse::Fresh);
        // The same as the engine on the whole model at once.
        let reader = TraceReader::open(&path).unwrap();
        let grid = SliceGrid::new(interval, 100).unwrap();
        let whole = crate::micro::build(&reader, grid, Metric::Count, &Filter::all()).unwrap();
        let direct = Aggregated::compute(&whole, &request.settings).unwrap();
        let a = last.aggregated.as_ref().unwrap();
        assert_eq!(a.curve(), direct.curve());
        assert_eq!(a.default_p(), direct.default_p());
        // Again: from the cache, nothing read; the bisection's first overview comes before
        // the finished one.
        let again = run_all(&request, &cache);
        let (done, running): (Vec<&Overview>, Vec<&Overview>) = again
            .iter()
            .partition(|o| o.aggregated.as_ref().is_some_and(|a| a.complete));
        assert_eq!(done.len(), 1);
        assert!(!running.is_empty());
        assert!(again.iter().all(|o| o.reuse == Reuse::Exact));
        assert!(again.last().unwrap().aggregated.as_ref().unwrap().complete);
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn a_long_bisection_shows_the_coarse_partition_first_and_can_be_stopped() {
        let (_dir, path) = testutil::write_spec(&Spec::small());
        let request = OcelotlRequest {
            key: key(&path, TimeRange::new(0, 1000), 40, ViewFilter::default()),
            filter: Filter::all(),
            settings: OcelotlSettings {
                slices: 40,
                aggregation: Aggregation::Spatiotemporal,
                ..OcelotlSettings::default()
            },
        };
        let micro = {
            let reader = TraceReader::open(&path).unwrap();
            let grid = SliceGrid::new(TimeRange::new(0, 1000), 40).unwrap();
            crate::micro::build(&reader, grid, Metric::Count, &Filter::all()).unwrap()
        };
        // The first overview a spatiotemporal bisection publishes is p = 1 alone, the coarsest.
        let first = Mutex::new(None::<Aggregated>);
        let finished = Aggregated::compute_observed(&micro, &request.settings, &|| false, &|a| {
            let mut f = first.lock().unwrap();
            if f.is_none() {
                *f = Some(a);
            }
        })
        .unwrap()
        .unwrap();
        let first = first.into_inner().unwrap().expect("a preliminary overview");
        assert_eq!(first.ps(), vec![1.0]);
        assert!(!first.complete && finished.complete);
        assert!(finished.bisection.done());
        assert!(finished.bisection.evaluations() >= 2);
        let areas = |a: &Aggregated| match a.partition(1.0) {
            Partition::Spatiotemporal(s) => s.aggregates().to_vec(),
            Partition::Temporal(_) => panic!("a spatiotemporal run"),
        };
        assert_eq!(areas(&first), areas(&finished));
        // Stopped at its first evaluated p: no result, and the pipeline keeps the model read.
        let stop = AtomicBool::new(false);
        let stopped = Aggregated::compute_observed(
            &micro,
            &request.settings,
            &|| stop.load(Ordering::Relaxed),
            &|_| stop.store(true, Ordering::Relaxed),
        )
        .unwrap();
        assert!(stopped.is_none());
    }

    #[test]
    fn a_narrower_filter_and_a_grown_live_grid_reuse_the_cache() {
        let (_dir, path) = testutil::write_spec(&Spec::small());
        let cache = ModelCache::new(4);
        let settings = OcelotlSettings {
            slices: 10,
            ..OcelotlSettings::default()
        };
        // A live trace at 500 ns, slices of 50 ns.
        let short = grid_of(TimeRange::new(0, 500), 10, Some(50)).unwrap();
        let r = OcelotlRequest {
            key: key(&path, short.range, short.slices, ViewFilter::default()),
            filter: Filter::all(),
            settings: settings.clone(),
        };
        run_all(&r, &cache);
        // It grew to 1000: the first 10 slices are kept, 10 more read.
        let long = grid_of(TimeRange::new(0, 1000), 10, Some(50)).unwrap();
        assert_eq!(long.slices, 20);
        let r2 = OcelotlRequest {
            key: key(&path, long.range, long.slices, ViewFilter::default()),
            ..r.clone()
        };
        let out = run_all(&r2, &cache);
        let last = out.last().unwrap();
        assert_eq!(last.reuse, Reuse::Continued { slices: 10 });
        let reader = TraceReader::open(&path).unwrap();
        let whole = crate::micro::build(&reader, long, Metric::Count, &Filter::all()).unwrap();
        assert_eq!(last.micro.values(), whole.values());
        // Hiding a producer: cut out of the cached model.
        let mut hide = ViewFilter::default();
        hide.hidden_producers.insert(20);
        let narrow = hide.to_store_filter(
            testutil::types().iter().map(|t| t.id),
            testutil::producers().iter().map(|p| p.id),
        );
        let r3 = OcelotlRequest {
            key: key(&path, long.range, long.slices, hide),
            filter: narrow.clone(),
            ..r2.clone()
        };
        let out = run_all(&r3, &cache);
        assert_eq!(out[0].reuse, Reuse::Narrowed);
        let read = crate::micro::build(&reader, long, Metric::Count, &narrow).unwrap();
        assert_eq!(out[0].micro.values(), read.values());
        assert!(out[0].micro.producers.iter().all(|p| p.id != 20));
    }

    #[test]
    fn partitions_at_any_p_and_listed_p_stepping() {
        let (_dir, path) = testutil::write_spec(&Spec::small());
        let reader = TraceReader::open(&path).unwrap();
        let grid = SliceGrid::new(TimeRange::new(0, 1000), 20).unwrap();
        let micro = crate::micro::build(&reader, grid, Metric::Count, &Filter::all()).unwrap();
        let a = Aggregated::compute(&micro, &OcelotlSettings::default()).unwrap();
        let ps = a.ps();
        assert!(ps.len() >= 2 && ps.windows(2).all(|w| w[0] < w[1]));
        // p = 0 keeps every slice apart; more p, fewer parts.
        let n = |p| a.partition(p).len();
        assert_eq!(n(0.0), 20);
        assert!(n(1.0) < n(ps[1]) && n(ps[1]) <= n(0.0));
        // Between two listed p the partition is the lower one's.
        let mid = (ps[0] + ps[1]) / 2.0;
        assert_eq!(n(mid), n(ps[0]));
        assert_eq!(step_p(&ps, ps[0], 1), ps[1]);
        assert_eq!(step_p(&ps, mid, -1), ps[0]);
        assert_eq!(step_p(&ps, ps[ps.len() - 1], 1), ps[ps.len() - 1]);
        // Values of the whole root over everything: the model's total per type.
        let total: f64 = a.values(a.hierarchy.root(), 0, 19).iter().sum();
        assert_eq!(total, micro.values().iter().sum::<f64>());
    }

    #[test]
    fn spatiotemporal_drawing_covers_every_cell_once_or_aggregates_visually() {
        let (_dir, path) = testutil::write_spec(&Spec::small());
        let reader = TraceReader::open(&path).unwrap();
        let grid = SliceGrid::new(TimeRange::new(0, 1000), 10).unwrap();
        let micro = crate::micro::build(&reader, grid, Metric::Count, &Filter::all()).unwrap();
        let settings = OcelotlSettings {
            aggregation: Aggregation::Spatiotemporal,
            ..OcelotlSettings::default()
        };
        let a = Aggregated::compute(&micro, &settings).unwrap();
        let Partition::Spatiotemporal(part) = a.partition(0.0) else {
            panic!("spatiotemporal");
        };
        let leaves = a.model.producers();
        let tall = a.drawn(&part, 40.0, 4.0);
        let cells: usize = tall
            .iter()
            .map(|(d, _)| {
                let (x, y) = a.spans[d.node];
                (y - x + 1) * (d.end - d.start + 1)
            })
            .sum();
        assert_eq!(cells, leaves * 10);
        // Leaves of a tenth of a pixel: drawn at the nodes whose children are too thin.
        let flat = a.drawn(&part, 0.1, 4.0);
        assert!(
            flat.iter()
                .any(|(d, _)| matches!(d.kind, DrawnKind::Visual { .. }))
        );
    }

    #[test]
    fn a_stopped_run_keeps_what_it_read_and_the_next_run_continues() {
        let (_dir, path) = testutil::write_spec(&Spec::small());
        let cache = ModelCache::new(4);
        let request = OcelotlRequest {
            key: key(&path, TimeRange::new(0, 1000), 100, ViewFilter::default()),
            filter: Filter::all(),
            settings: OcelotlSettings {
                slices: 100,
                ..OcelotlSettings::default()
            },
        };
        // Stop after the first published overview.
        let mut published = 0;
        let stop = AtomicBool::new(false);
        run(
            &request,
            &cache,
            &|| stop.load(Ordering::Relaxed),
            &mut |_, _| {
                published += 1;
                stop.store(true, Ordering::Relaxed);
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(published, 1);
        let out = run_all(&request, &cache);
        let last = out.last().unwrap();
        let Reuse::Continued { slices } = last.reuse else {
            panic!("{:?}", last.reuse);
        };
        assert!(slices > 0 && slices < 100);
        assert!(last.complete());
        let reader = TraceReader::open(&path).unwrap();
        let grid = SliceGrid::new(TimeRange::new(0, 1000), 100).unwrap();
        let whole = crate::micro::build(&reader, grid, Metric::Count, &Filter::all()).unwrap();
        assert_eq!(last.micro.values(), whole.values());
    }

    #[test]
    fn live_grids_have_fixed_slices() {
        let g = grid_of(TimeRange::new(100, 1100), 10, Some(100)).unwrap();
        assert_eq!((g.range, g.slices), (TimeRange::new(100, 1100), 10));
        let g = grid_of(TimeRange::new(100, 1250), 10, Some(100)).unwrap();
        assert_eq!((g.range, g.slices), (TimeRange::new(100, 1200), 11));
        assert_eq!(g.edge(3), 400);
        let g = grid_of(TimeRange::new(0, 1000), 7, None).unwrap();
        assert_eq!(g.slices, 7);
    }
}
