//! Fleet scale: every trace of one or more catalog directories as one Hive-partitioned Parquet dataset
//! that real engines read (DataFusion in process, Spark, DuckDB, Trino), and the fleet reports' SQL.
//!
//! Start here: [`sync::sync`] (catalogs → dataset, incremental), [`Dataset`] (the directory and its
//! checks), [`Table`] (the five tables and their Arrow schemas, written down in `docs/FLEET.md`); with the
//! feature `fleet`, `query::Engine` (SQL over the dataset with Apache DataFusion), `report` and
//! `overview`.

mod error;
pub mod export;
#[cfg(feature = "fleet")]
mod implied;
pub mod layout;
#[cfg(feature = "fleet")]
pub mod overview;
#[cfg(feature = "fleet")]
pub mod query;
pub mod readback;
#[cfg(feature = "fleet")]
pub mod report;
pub mod schema;
pub mod sync;

pub use error::{FleetError, Result};
pub use layout::Dataset;
pub use schema::{DATASET_VERSION, PARTITION_COLUMNS, Table};
