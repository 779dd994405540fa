//! The writer's advisory lock (`flock`) on its trace file: held for as long as a writer writes, and
//! dropped by the kernel when the writing process dies, so a trace being written is told apart from
//! one left behind (by repair, and by an upgrade that must not append to a live trace).

use std::fs::{File, TryLockError};
use std::path::Path;

use crate::error::{Result, StoreError};

/// The writer's lock on its trace file (released when dropped, or by the kernel when the process
/// dies).
#[derive(Debug)]
pub(crate) struct WriterLock {
    _file: File,
}

/// Takes the writer's lock on a trace file just created.
pub(crate) fn lock_for_writing(path: &Path) -> Result<WriterLock> {
    let io = |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(io)?;
    match file.try_lock() {
        Ok(()) => Ok(WriterLock { _file: file }),
        Err(TryLockError::WouldBlock) => Err(StoreError::InvalidRequest(format!(
            "{} is being written by another writer",
            path.display()
        ))),
        // A file system without advisory locks (some network ones): capture anyway; repair then
        // cannot tell a live trace from one left behind, and says so.
        Err(TryLockError::Error(_)) => Ok(WriterLock { _file: file }),
    }
}

/// Whether a writer (of this process or another) holds `path` now.
pub fn is_being_written(path: &Path) -> Result<bool> {
    let file = File::open(path).map_err(|source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    match file.try_lock_shared() {
        Ok(()) => Ok(false),
        Err(TryLockError::WouldBlock) => Ok(true),
        Err(TryLockError::Error(source)) => Err(StoreError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}
