//! The disk reserve: room set aside in the catalog directory so that traces can still be closed when
//! the disk fills up.
//!
//! Closing a trace writes (its final counts, the reason it was cut short, the catalog entry); on a disk
//! full to the last page even that fails and the trace would stay live until someone frees room. So the
//! collector keeps a file of [`DiskReserve::size`] bytes, [`RESERVE_FILE`], in the directory. The first
//! session whose write fails for lack of room deletes it ([`DiskReserve::release`]); that session and
//! every other one open on the directory then close their traces in the room freed (they see
//! [`DiskReserve::is_spent`] and stop writing new data). A new session sets the reserve aside again
//! first ([`DiskReserve::ensure`]); while that is impossible, sessions are refused, said and counted.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The reserve's file name in the catalog directory (hidden; not a trace).
pub const RESERVE_FILE: &str = ".socscope-reserve";

/// Default of [`DiskReserve::size`]: enough to close every open trace (a close writes a few pages per
/// trace and its catalog entry; 64 boards need well under 4 MiB) with a wide margin, small next to any
/// disk that holds traces.
pub const DEFAULT_DISK_RESERVE: u64 = 16 << 20;

/// A directory's disk reserve, shared by every session of one collector (clones share it). The file is
/// removed when the last clone is dropped.
#[derive(Clone, Debug)]
pub struct DiskReserve(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    path: PathBuf,
    size: u64,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// The file is on disk with its full size.
    held: bool,
    /// Released since it was last set aside: the disk was found full.
    spent: bool,
    /// Times it was released.
    releases: u64,
}

impl DiskReserve {
    /// A reserve of `size` bytes in `dir` (0: none), not set aside yet.
    pub fn new(dir: &Path, size: u64) -> Self {
        Self(Arc::new(Inner {
            path: dir.join(RESERVE_FILE),
            size,
            state: Mutex::new(State::default()),
        }))
    }

    /// Its size in bytes.
    pub fn size(&self) -> u64 {
        self.0.size
    }

    /// The reserve file.
    pub fn path(&self) -> &Path {
        &self.0.path
    }

    /// Sets the reserve aside unless it is already: writes the file with its full size (real blocks,
    /// not a sparse file). On failure (no room) nothing is left behind and the reserve counts as spent.
    pub fn ensure(&self) -> std::io::Result<()> {
        if self.0.size == 0 {
            return Ok(());
        }
        let mut state = self.lock();
        if state.held {
            return Ok(());
        }
        match self.write_file() {
            Ok(()) => {
                state.held = true;
                state.spent = false;
                Ok(())
            }
            Err(e) => {
                let _ = std::fs::remove_file(&self.0.path);
                state.spent = true;
                Err(e)
            }
        }
    }

    fn write_file(&self) -> std::io::Result<()> {
        let mut file = std::fs::File::create(&self.0.path)?;
        let block = [0u8; 64 << 10];
        let mut left = self.0.size;
        while left > 0 {
            let n = left.min(block.len() as u64) as usize;
            file.write_all(&block[..n])?;
            left -= n as u64;
        }
        file.sync_all()
    }

    /// The disk is full: deletes the reserve so that open traces can be closed in its room. Returns
    /// whether this call freed it (false: already freed, or there is none).
    pub fn release(&self) -> bool {
        let mut state = self.lock();
        let freed = state.held;
        if freed {
            let _ = std::fs::remove_file(&self.0.path);
            state.held = false;
            state.releases += 1;
        }
        if self.0.size > 0 {
            state.spent = true;
        }
        freed
    }

    /// Whether the disk was found full since the reserve was last set aside: open sessions should
    /// close now, while the freed room lasts.
    pub fn is_spent(&self) -> bool {
        self.0.size > 0 && self.lock().spent
    }

    /// Times the reserve was freed because the disk was full.
    pub fn releases(&self) -> u64 {
        self.lock().releases
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock leaves a consistent state (plain flags).
        self.0.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let held = self.state.get_mut().map(|s| s.held).unwrap_or(true);
        if held {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_aside_released_and_set_aside_again() {
        let dir = tempfile::tempdir().unwrap();
        let reserve = DiskReserve::new(dir.path(), 100_000);
        assert!(!reserve.is_spent());
        reserve.ensure().unwrap();
        let file = dir.path().join(RESERVE_FILE);
        assert_eq!(std::fs::metadata(&file).unwrap().len(), 100_000);
        assert!(reserve.clone().release(), "the first release frees it");
        assert!(!file.exists());
        assert!(reserve.is_spent());
        assert!(!reserve.release(), "nothing left to free");
        assert_eq!(reserve.releases(), 1);
        reserve.ensure().unwrap();
        assert!(!reserve.is_spent());
        assert!(file.exists());
        drop(reserve);
        assert!(!file.exists(), "removed with the last clone");
    }

    #[test]
    fn a_zero_reserve_is_never_spent() {
        let dir = tempfile::tempdir().unwrap();
        let reserve = DiskReserve::new(dir.path(), 0);
        reserve.ensure().unwrap();
        assert!(!reserve.release());
        assert!(!reserve.is_spent());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
