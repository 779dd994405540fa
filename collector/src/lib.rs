//! The host half of capture: TCP, serial and replay sources, nom decoding, per-session clock mapping, loss
//! accounting and state reconstruction, written incrementally into the trace store.
//!
//! Start here: [`intake::Intake`] (one byte stream → traces, stored whole by a [`session::Ingest`] or
//! watched by a [`flight::FlightRecorder`]; every source uses it), [`tcp::serve`] (many
//! boards at once over TCP), [`serial::capture`], [`probe::capture`] (a board's rings read through a debug
//! port) and [`replay::replay_file`], and
//! [`reconstruct::Reconstructor`] (records → states, links, variables), and [`import::import`] (text
//! captures: KPTrace, Pajé, ftrace, GST_DEBUG).

pub mod control;
pub mod flight;
pub mod fuzz;
pub mod import;
pub mod intake;
pub mod naming;
pub mod probe;
pub mod reconstruct;
pub mod replay;
pub mod reserve;
pub mod serial;
pub mod session;
pub mod syscalls;
pub mod tcp;
pub mod trigger;
pub mod window;

use std::path::PathBuf;

pub use reserve::{DEFAULT_DISK_RESERVE, DiskReserve};
pub use session::{
    DEFAULT_MAX_DECOMPRESSED, DEFAULT_MAX_NAME_CHARS, IngestConfig, Notice, SessionReport,
};

/// What can stop the collector.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CollectorError {
    /// The trace store failed (disk full, permissions, a file of another schema version).
    #[error(transparent)]
    Store(#[from] socscope_tracedb::StoreError),
    /// A file or directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// A network operation failed.
    #[error("{what}: {source}")]
    Net {
        /// What was being done, e.g. `listening on 127.0.0.1:7070`.
        what: String,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// A serial port could not be opened or read.
    #[error("serial port {path}: {message}")]
    Serial {
        /// The device path.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// A line of an imported file does not follow its format (fatal only with `--strict`).
    #[error(transparent)]
    Parse(#[from] socscope_formats::ParseError),
    /// Another session found the disk full: this one is closed while the freed reserve lasts.
    #[error(
        "the disk of {dir} is full (another session found no room left): closed in the room of the disk reserve"
    )]
    DiskFull {
        /// The catalog directory.
        dir: PathBuf,
    },
    /// The room left on the disk fell below what the next commits need (see [`reserve`]): the open
    /// traces are committed while that room lasts, then closed in the room of the disk reserve.
    #[error(
        "the disk of {dir} is full: {free} bytes were left outside the disk reserve, under the {headroom} bytes the next commits need; what was decoded is committed, and the trace closed in the room of the reserve"
    )]
    DiskNearlyFull {
        /// The catalog directory.
        dir: PathBuf,
        /// Bytes left outside the reserve when it was found.
        free: u64,
        /// The headroom wanted then (three commit intervals of the disk's fill).
        headroom: u64,
    },
    /// The disk reserve could not be set aside (see [`reserve`]): no trace is started.
    #[error(
        "no room to set aside the {size}-byte disk reserve that lets traces be closed on a full disk ({}: {source}); free room on the disk or lower --disk-reserve",
        path.display()
    )]
    NoRoomForReserve {
        /// The reserve file.
        path: PathBuf,
        /// Its size in bytes.
        size: u64,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// A command-line value could not be understood.
    #[error("{0}")]
    Invalid(String),
}

impl CollectorError {
    /// Whether the disk had no room left.
    pub fn is_disk_full(&self) -> bool {
        match self {
            CollectorError::Store(e) => e.is_disk_full(),
            CollectorError::Io { source, .. } => socscope_tracedb::io_is_disk_full(source),
            CollectorError::DiskFull { .. } | CollectorError::DiskNearlyFull { .. } => true,
            CollectorError::NoRoomForReserve { source, .. } => {
                socscope_tracedb::io_is_disk_full(source)
            }
            _ => false,
        }
    }
}

/// The collector's result type.
pub type Result<T, E = CollectorError> = std::result::Result<T, E>;
