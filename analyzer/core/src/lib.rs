//! Everything the views compute, with no GUI: loading (also of a trace still being written), view
//! groups and the time bar, the Gantt, table, statistics and density models, microscopic models, the
//! Ocelotl aggregation engine (temporal and spatiotemporal, bit-exact with the original lpaggreg
//! library) and its view model, TraceViz, comparison, palette and saved results.
//!
//! Start here: [`sync::ViewGroups`] (what the views of a group share), [`live::LiveLoad`] (a view's
//! background load, written once), [`ocelotl::MicroscopicModel`] (the slices × producers × types input),
//! [`ocelotl::TemporalAggregation`] and [`ocelotl::SpatiotemporalAggregation`] (qualities, best
//! partition for a p, list of significant p), and [`ocelotl::run_model_file`], the whole engine
//! behind `socscope aggregate`.

pub mod actors;
pub mod bench;
pub mod compare;
pub mod cpu;
pub mod density;
pub mod gantt;
pub mod hierarchy;
pub mod live;
pub mod loader;
pub mod micro;
pub mod ocelotl;
pub mod online_compare;
pub mod overview;
pub mod palette;
pub mod processed;
pub mod results;
pub mod stats;
pub mod sync;
pub mod table;
#[cfg(test)]
mod testutil;
pub mod timebar;
pub mod traceviz;
