//! The one error type of the fleet dataset: every message names the file or directory at fault.

use std::path::PathBuf;

/// What can go wrong while writing or reading a fleet dataset.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FleetError {
    /// The trace store refused a trace file (not a trace, an older schema, a corrupt chunk...).
    #[error(transparent)]
    Store(#[from] socscope_tracedb::StoreError),
    /// A file-system operation failed.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Writing or reading a Parquet file failed.
    #[error("Parquet error on {path}: {source}")]
    Parquet {
        /// The file.
        path: PathBuf,
        /// What the parquet crate said.
        #[source]
        source: parquet::errors::ParquetError,
    },
    /// Building an Arrow batch failed (a bug, or a value no column can hold).
    #[error("Arrow error on {path}: {source}")]
    Arrow {
        /// The file being written or read.
        path: PathBuf,
        /// What the arrow crate said.
        #[source]
        source: arrow_schema::ArrowError,
    },
    /// A directory is not a catalog directory.
    #[error("{path} is not a socscope catalog directory: it has no catalog.db")]
    NotACatalog {
        /// The directory.
        path: PathBuf,
    },
    /// The dataset directory holds something a socscope dataset does not.
    #[error(
        "{path} is not a socscope fleet dataset: {detail}; give an empty or new directory, or one `socscope fleet sync` wrote"
    )]
    NotADataset {
        /// The dataset directory.
        path: PathBuf,
        /// What was found.
        detail: String,
    },
    /// The dataset was written by another version of socscope.
    #[error(
        "{path} is a fleet dataset of version {found}, this build writes version {expected}: sync it into a new directory"
    )]
    DatasetVersion {
        /// The dataset directory.
        path: PathBuf,
        /// The version found in `socscope-fleet.json`.
        found: u64,
        /// [`crate::DATASET_VERSION`].
        expected: u32,
    },
    /// Another process is syncing into the same dataset.
    #[error("{path} is being synced by another process (lock held on {lock})")]
    Busy {
        /// The dataset directory.
        path: PathBuf,
        /// The lock file.
        lock: PathBuf,
    },
    /// Two different traces would have the same id in the dataset.
    #[error(
        "trace id {trace_id} names two different traces, {first} and {second}: rename one of the files"
    )]
    DuplicateTraceId {
        /// The id (the trace file's name without `.db`).
        trace_id: String,
        /// The first file.
        first: PathBuf,
        /// The second file.
        second: PathBuf,
    },
    /// A stored value the dataset cannot hold.
    #[error("{path}: {detail}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        detail: String,
    },
    /// The embedded engine refused a query or failed to run it.
    #[cfg(feature = "fleet")]
    #[error("{0}")]
    Query(String),
}

impl FleetError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> FleetError {
        let path = path.into();
        move |source| FleetError::Io { path, source }
    }

    pub(crate) fn parquet(
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(parquet::errors::ParquetError) -> FleetError {
        let path = path.into();
        move |source| FleetError::Parquet { path, source }
    }

    pub(crate) fn arrow(
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(arrow_schema::ArrowError) -> FleetError {
        let path = path.into();
        move |source| FleetError::Arrow { path, source }
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = FleetError> = std::result::Result<T, E>;
