//! The collector↔analyzer contract: one SQLite file per trace holding compressed event chunks,
//! a multi-resolution summary and the SoC-Trace tables, plus a catalog of traces.
//!
//! Start here: [`TraceWriter`] (the collector writes a trace incrementally), [`TraceReader`]
//! (the analyzer reads it, also while it grows) and [`Catalog`] (the list of traces and tools).
//! `SCHEMA.md` beside this crate documents every table and the chunk encoding byte by byte.

pub mod bench;
mod catalog;
mod codec;
mod dict_train;
mod error;
mod filter;
mod fuzzing;
mod lock;
mod model;
mod reader;
mod recovery;
mod results;
mod schema;
mod search;
mod summary;
pub mod units;
mod upgrade;
mod vtab;
mod writer;

pub use catalog::{CATALOG_FILE, Catalog, CatalogEntry, Tool, ToolKind};
pub use codec::{
    CHUNK_FORMAT, DURATION_CLASSES, MAX_CHUNK_EVENTS, duration_class, split_stream, stream_id,
};
pub use error::{Result, StoreError, io_is_disk_full};
pub use filter::{CompareOp, Condition, Filter, compare_values};
pub use fuzzing::ChunkFuzzer;
pub use model::*;
pub use reader::{ChunkInfo, EventIter, Snapshot, StreamInfo, TraceReader};
pub use recovery::{
    INTERRUPTED_PARAM, RepairOutcome, Repaired, is_being_written, left_live, left_with_wal, repair,
    repair_checking_blocks, repair_on_full_disk, wal_path,
};
pub use results::*;
pub use schema::{
    CATALOG_APPLICATION_ID, CATALOG_SCHEMA_VERSION, SCHEMA_VERSION, TRACE_APPLICATION_ID,
};
pub use search::EventSearch;
pub use summary::SUMMARY_EVENTS_PER_CELL;
pub use summary::{
    DEFAULT_BASE_SHIFT, DEFAULT_LEVELS, Resolution, Summary, SummaryBucket, SummaryCell,
};
pub use upgrade::{CpuTracks, DERIVED_CPU_SLICES_STAT, UpgradeReport, upgrade_trace};
pub use vtab::register_events_table;
pub use writer::{
    DEFAULT_MAX_CHUNK_SPAN, DICT_BYTES, DICT_SAMPLE_BYTES, MAX_TRAININGS, SharedDictionaries,
    TraceWriter, UnsyncedName, UnsyncedTrace, WriterConfig,
};
