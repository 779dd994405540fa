//! The one error type of the store.

use std::path::PathBuf;

/// Everything that can go wrong while writing or reading a trace store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// SQLite refused an operation on a file.
    #[error("SQLite error on {path}: {source}")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },
    /// The file was written by another version of the schema.
    #[error(
        "{path} has trace schema version {found}, this build reads version {expected}: \
         {}",
        version_advice(*found, *expected)
    )]
    SchemaVersion {
        /// The database file.
        path: PathBuf,
        /// The version stored in the file (`PRAGMA user_version`).
        found: i64,
        /// The version this build reads and writes ([`crate::SCHEMA_VERSION`]).
        expected: i64,
    },
    /// The file is not a socscope store (no such table, not a database, wrong kind).
    #[error("{path} is not a socscope {expected_kind} file: {detail}")]
    NotAStore {
        /// The file.
        path: PathBuf,
        /// `trace` or `catalog`.
        expected_kind: &'static str,
        /// Why it was rejected.
        detail: String,
    },
    /// An event chunk could not be decoded.
    #[error(
        "corrupt event chunk {chunk_id} in {path}: {detail} (`socscope repair` removes a damaged chunk from a finished trace, its events counted lost)"
    )]
    CorruptChunk {
        /// The database file.
        path: PathBuf,
        /// `chunks.id` of the bad chunk.
        chunk_id: i64,
        /// What was wrong.
        detail: String,
    },
    /// A stored row holds a value this build does not know (e.g. an unknown category code).
    #[error("invalid value in {path}: {detail}")]
    InvalidValue {
        /// The database file.
        path: PathBuf,
        /// What was wrong.
        detail: String,
    },
    /// A file-system operation failed.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A new store file was to be created where a file already is (another writer may have
    /// taken the name a moment before: choose another one).
    #[error("{path} already exists; remove it or choose another file name")]
    AlreadyExists {
        /// The file.
        path: PathBuf,
    },
    /// The caller asked for something impossible (e.g. an empty interval, an unknown trace id).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// A write of this trace writer failed earlier: what it had not committed was rolled back, and
    /// it writes nothing more (the file holds its last commit, whole).
    #[error(
        "{path}: the writer stopped after an earlier failure ({first}); the file holds its last commit"
    )]
    WriterFailed {
        /// The trace file.
        path: PathBuf,
        /// The failure that stopped the writer.
        first: String,
        /// Whether that failure was a full disk.
        disk_full: bool,
    },
}

impl StoreError {
    /// Whether the file system had no room left (SQLite's `SQLITE_FULL`, or `ENOSPC`/`EDQUOT` from
    /// the OS): what a disk reserve is for.
    pub fn is_disk_full(&self) -> bool {
        match self {
            StoreError::Sqlite { source, .. } => {
                source.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull)
            }
            StoreError::Io { source, .. } => io_is_disk_full(source),
            StoreError::WriterFailed { disk_full, .. } => *disk_full,
            _ => false,
        }
    }
}

/// Whether an OS error says the disk (or the user's quota) is full.
pub fn io_is_disk_full(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    )
}

fn version_advice(found: i64, expected: i64) -> &'static str {
    if found > expected {
        "the file is newer than this program; upgrade socscope to read it"
    } else if found >= 1 && expected == crate::SCHEMA_VERSION {
        "the file is older than this program; convert it in place with `socscope upgrade FILE` \
         (events, ids and results are kept; the summary is rebuilt)"
    } else {
        "the file is older than this program; re-import or re-capture the trace, or read it with the socscope release that wrote it"
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Attaches a path to SQLite errors.
pub(crate) trait SqlContext<T> {
    fn ctx(self, path: &std::path::Path) -> Result<T>;
}

impl<T> SqlContext<T> for std::result::Result<T, rusqlite::Error> {
    fn ctx(self, path: &std::path::Path) -> Result<T> {
        self.map_err(|source| StoreError::Sqlite {
            path: path.to_path_buf(),
            source,
        })
    }
}
