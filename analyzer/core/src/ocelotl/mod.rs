//! Ocelotl's data aggregation (Dosimont et al., RR-8524 and "Ocelotl: large trace overviews"):
//! partitions of a microscopic model that trade information loss against data reduction,
//! controlled by a parameter p in [0, 1].
//!
//! The arithmetic follows lpaggreg `c652bfe` (the library Ocelotl links) operation by
//! operation, including its tie rules and its use of C floats for p, because the point of the
//! list of significant p is to reproduce what the original tool shows: rounding residues of
//! ±1e-15 decide some partitions, and reassociating a sum would change them.
//!
//! Work is spread over threads only where it is independent (interval starts, the rows of a
//! node's DP, the two halves of a temporal bisection interval); no sum is ever split or
//! reordered, so results are the same bits whatever the thread count.
//!
//! Memory is bounded by a budget ([`DEFAULT_MEMORY_BUDGET`] unless the caller sets one): the
//! spatiotemporal qualities are kept when they fit and recomputed at every evaluated p when
//! they do not (same arithmetic, same bits), and a run that cannot fit either way is refused
//! before it starts.

mod complexity;
mod dichotomy;
mod fastlog;
mod model;
mod report;
mod spatiotemporal;
mod temporal;
mod view;

/// The tests' pseudo-random values (xorshift64): one step of `state`, never zero if the seed
/// is not.
#[cfg(test)]
fn xorshift(state: &mut u64) {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
}

pub use dichotomy::{Cancelled, InitialP, Observer, PEntry, PList, Quality, Unobserved};
pub use model::{MicroscopicModel, ModelError, ModelFile, SpatialHierarchy};
pub use report::{
    AggregationMode, AggregationReport, EngineReport, NodeParts, PartitionEntry, RunControl,
    RunOptions, SpatiotemporalEntry, TemporalEntry, run_model, run_model_file, run_model_file_with,
    run_model_with,
};
pub use spatiotemporal::{
    Algorithm, AlgorithmChoice, AlgorithmComparison, Area, DEFAULT_MEMORY_BUDGET, MemoryPlan,
    QualityStore, SpatiotemporalAggregation, SpatiotemporalPartition, SpatiotemporalQualities,
    compare_algorithms,
};
pub use temporal::{TemporalAggregation, TemporalPartition, TemporalQualities};
pub use view::{
    AreaMode, DrawnArea, DrawnKind, StackedPart, StackedProportions, spatiotemporal_modes,
    stacked_proportions, visual_aggregation,
};

/// Whether the temporal qualities use the vector logarithm on this host (it reproduces the
/// host's `log` bit for bit, or it is not used).
pub fn temporal_vector_kernel_in_use() -> bool {
    fastlog::available()
}

/// The bisection threshold Ocelotl uses by default.
pub const DEFAULT_THRESHOLD: f32 = 0.001;
