//! The disk reserve: room set aside in the catalog directory so that traces can still be closed when
//! the disk fills up.
//!
//! Closing a trace writes (its final counts, the reason it was cut short, the catalog entry); on a disk
//! full to the last page even that fails and the trace would stay live until someone frees room. So the
//! collector keeps a file of [`DiskReserve::size`] bytes in the directory (named from [`RESERVE_PREFIX`],
//! one per collector: see below). The first
//! session whose write fails for lack of room deletes it ([`DiskReserve::release`]); that session and
//! every other one open on the directory then close their traces in the room freed (they see
//! [`DiskReserve::is_spent`] and stop writing new data). A new session sets the reserve aside again
//! first ([`DiskReserve::ensure`]); while that is impossible, sessions are refused, said and counted.
//!
//! The room freed must go to closing traces, not to more data: every write of a session happens
//! inside [`DiskReserve::enter`] (refused once the reserve is spent), and [`DiskReserve::release`]
//! deletes the file only after every write under way has ended, so no commit of another session
//! takes the room meant for the closes. A close costs at most [`CLOSE_COST`] per open trace plus
//! [`CATALOG_COST`] once; [`DiskReserve::needed`] says what a collector with so many traces open at
//! once must set aside.
//!
//! Waiting for a write to fail would cost each open trace its last batch: SQLite rolls a transaction
//! back when its commit finds no room, so what was decoded since the last commit (a whole commit
//! interval and more) would be lost. So the reserve also watches the room left outside it
//! ([`DiskReserve::enter`] samples the file system a few times per commit interval) and how fast the
//! disk fills: the largest drop of that room over two commit intervals, every writer of the disk
//! included (a session that fell behind catches up with a batch larger than one interval's). Once the
//! room left is below three times that fill (within [`MIN_HEADROOM`] and [`MAX_HEADROOM`]), the disk
//! counts as full *before* any write fails: the reserve is spent as above, and each open session first
//! commits what it holds into the room still left outside the reserve — only while that room covers
//! one more such fill ([`DiskReserve::last_batch_fits`]), so the reserve itself stays for the closes
//! and [`DiskReserve::needed`] holds unchanged — then closes its trace. A disk taken to its last byte
//! at once by another program gives no warning: there the open batches are still given up. While the
//! room stays under the reserve and that headroom, no reserve is set aside again
//! ([`DiskReserve::ensure`] fails), so no new trace starts in the room kept for the last batches.
//!
//! Each collector (each [`DiskReserve`]) has a reserve file of its own, `.socscope-reserve-PID-N`,
//! held under an exclusive `flock` for as long as it is set aside. A shared file would not do: a
//! second collector on the directory (a replay beside a listening one) would delete it when it ends,
//! leaving the first without room for its closes, and a file another process keeps open frees no
//! blocks when one of them deletes it. A reserve file nobody holds locked was left by a collector that
//! died (kill -9, power loss): the next one to set its reserve aside deletes it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// How the names of reserve files in a catalog directory start (hidden; not traces): each collector's is
/// `.socscope-reserve-PID-N`; an older socscope's was this prefix alone.
pub const RESERVE_PREFIX: &str = ".socscope-reserve";

/// The reserve files in `dir` (every collector's, and those left by collectors that died), sorted.
pub fn reserve_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(RESERVE_PREFIX))
        .map(|e| e.path())
        .collect();
    files.sort();
    files
}

/// Default of [`DiskReserve::size`]: enough to close every open trace (a close writes a few pages per
/// trace and its catalog entry; 64 boards need well under 4 MiB) with a wide margin, small next to any
/// disk that holds traces.
pub const DEFAULT_DISK_RESERVE: u64 = 16 << 20;

/// Room one open trace needs to be closed on a full disk, with a margin: its closing transaction
/// (`trace_info` and the `interrupted` parameter: a few 4 KiB pages and their WAL frame headers)
/// and one more 32 KiB region of its WAL index (`-shm`) should the WAL cross a region boundary.
/// Nothing else is written: the writer that failed rolls back, the others give up what they had not
/// committed ([`socscope_tracedb::TraceWriter::abandon`]).
pub const CLOSE_COST: u64 = 64 << 10;

/// Room the catalog needs to record the closed traces (one at a time): its WAL and WAL index while a
/// registration runs, and the pages it may add.
pub const CATALOG_COST: u64 = 128 << 10;

/// The least room a last batch is committed in (a commit writes a few 4 KiB pages and their WAL frame
/// headers at least), whatever fill was measured.
pub const MIN_BATCH_ROOM: u64 = 16 << 10;

/// The least room kept free outside the reserve before the disk counts as full.
pub const MIN_HEADROOM: u64 = 4 * MIN_BATCH_ROOM;

/// The most room kept free outside the reserve, however fast the disk filled: a burst of another
/// program's writes (a large file copied) must not end captures on a disk with room to spare. A disk
/// filled faster than this within a commit interval is the case the reserve alone handles.
pub const MAX_HEADROOM: u64 = 64 << 20;

/// The commit interval assumed until a session says its own ([`DiskReserve::watch_commit_interval`];
/// every ingest does when it is made): the collector's default.
const UNSAID_COMMIT_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);

/// How long samples of the room left are kept: the fill rate is the largest drop within it.
const FILL_MEMORY: std::time::Duration = std::time::Duration::from_secs(2);

// Whether this thread is inside [`DiskReserve::enter`] (each session is handled on one thread).
thread_local! {
    static WRITING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A session's right to write (see [`DiskReserve::enter`]); given back when dropped.
#[must_use]
pub struct Writing<'a>(&'a DiskReserve);

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        self.0.leave();
    }
}

/// A directory's disk reserve, shared by every session of one collector (clones share it). The file is
/// removed when the last clone is dropped.
#[derive(Clone, Debug)]
pub struct DiskReserve(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    path: PathBuf,
    size: u64,
    state: Mutex<State>,
    /// Signalled when a writer ends, and when a release is done.
    changed: std::sync::Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// The file is on disk with its full size.
    held: bool,
    /// The file, open and locked while it is held (its lock tells other collectors it is in use).
    file: Option<std::fs::File>,
    /// Released since it was last set aside: the disk was found full.
    spent: bool,
    /// Times it was released.
    releases: u64,
    /// Sessions writing now (inside [`DiskReserve::enter`]).
    writers: usize,
    /// A release waits for the writers to end.
    releasing: bool,
    /// The shortest commit interval of the sessions writing here: the span of a batch.
    commit_interval: Option<std::time::Duration>,
    /// Room left outside the reserve, sampled: (when, bytes free, drop over the commit interval
    /// ending then).
    samples: std::collections::VecDeque<(std::time::Instant, u64, u64)>,
    /// Set when the disk was found nearly full: (bytes left, headroom wanted then).
    low_room: Option<(u64, u64)>,
}

impl DiskReserve {
    /// A reserve of `size` bytes in `dir` (0: none), not set aside yet.
    pub fn new(dir: &Path, size: u64) -> Self {
        static MADE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Self(Arc::new(Inner {
            path: dir.join(format!("{RESERVE_PREFIX}-{}-{n}", std::process::id())),
            size,
            state: Mutex::new(State::default()),
            changed: std::sync::Condvar::new(),
        }))
    }

    /// Its size in bytes.
    pub fn size(&self) -> u64 {
        self.0.size
    }

    /// The smallest reserve that closes `open_traces` traces open at once (the collector's connection
    /// limit, serial ports and replays): [`CLOSE_COST`] each and [`CATALOG_COST`].
    pub fn needed(open_traces: usize) -> u64 {
        CATALOG_COST + CLOSE_COST * open_traces as u64
    }

    /// A session writing here commits at least every `interval`: the room kept free outside the
    /// reserve is measured over the shortest such interval (100 ms until a session says).
    pub fn watch_commit_interval(&self, interval: std::time::Duration) {
        let mut state = self.lock();
        let shortest = state.commit_interval.map_or(interval, |d| d.min(interval));
        state.commit_interval = Some(shortest.max(std::time::Duration::from_millis(1)));
    }

    /// A session is about to write (a frame, a commit, a close): `None` once the reserve is spent —
    /// the session must close its trace instead — else the right to write until the guard is
    /// dropped. [`Self::release`] waits for every such write to end before it frees the room.
    ///
    /// It also samples the room left outside the reserve: when that is below the headroom the disk's
    /// fill asks for, the reserve counts as spent now (see the module's text), while the open
    /// sessions can still commit what they hold.
    pub fn enter(&self) -> Option<Writing<'_>> {
        if self.0.size == 0 {
            return Some(Writing(self));
        }
        let mut state = self.lock();
        if state.spent || state.releasing {
            return None;
        }
        if state.held
            && let Some(low) = self.sample_room(&mut state)
        {
            state.low_room = Some(low);
            state.spent = true;
            return None;
        }
        state.writers += 1;
        WRITING.with(|w| w.set(true));
        Some(Writing(self))
    }

    /// Samples the room left at most four times per commit interval; `Some((free, headroom))` when it
    /// is below the headroom wanted.
    fn sample_room(&self, state: &mut State) -> Option<(u64, u64)> {
        let interval = state.commit_interval.unwrap_or(UNSAID_COMMIT_INTERVAL);
        let now = std::time::Instant::now();
        if state
            .samples
            .back()
            .is_some_and(|(t, _, _)| now.duration_since(*t) < interval / 4)
        {
            return None;
        }
        let free = free_room(&self.0.path)?;
        while state
            .samples
            .front()
            .is_some_and(|(t, _, _)| now.duration_since(*t) > FILL_MEMORY)
        {
            state.samples.pop_front();
        }
        // The fill of the last two commit intervals: a commit lands between two samples, and a session
        // that fell behind (a loaded machine) catches up with a larger batch than one interval's.
        let span = 2 * interval;
        let fill_now = state
            .samples
            .iter()
            .filter(|(t, _, _)| now.duration_since(*t) <= span)
            .map(|(_, before, _)| before.saturating_sub(free))
            .max()
            .unwrap_or(0);
        state.samples.push_back((now, free, fill_now));
        let headroom = Self::headroom(state);
        (free < headroom).then_some((free, headroom))
    }

    /// The largest fill of one commit interval lately: what one more batch of every session takes.
    fn fill(state: &State) -> u64 {
        state.samples.iter().map(|s| s.2).max().unwrap_or(0)
    }

    /// The room wanted outside the reserve: three batches' fill (the batch open when the room is
    /// sampled, one committed before the next sample, and a margin), within [`MIN_HEADROOM`] and
    /// [`MAX_HEADROOM`].
    fn headroom(state: &State) -> u64 {
        Self::fill(state)
            .saturating_mul(3)
            .clamp(MIN_HEADROOM, MAX_HEADROOM)
    }

    /// Whether the disk was found nearly full (rather than full) when the reserve was last spent:
    /// the bytes that were left outside the reserve and the headroom wanted then.
    pub fn low_room(&self) -> Option<(u64, u64)> {
        self.lock().low_room
    }

    /// Once the reserve is spent: whether a session may still commit what it holds before closing its
    /// trace — the room left, the freed reserve not counted, covers another commit interval's fill
    /// (at least [`MIN_BATCH_ROOM`]). The reserve itself stays for the closes.
    pub fn last_batch_fits(&self) -> bool {
        if self.0.size == 0 {
            return false;
        }
        let state = self.lock();
        let wanted = Self::fill(&state).max(MIN_BATCH_ROOM);
        let reserved = if state.held { 0 } else { self.0.size };
        free_room(&self.0.path).is_some_and(|free| free >= reserved.saturating_add(wanted))
    }

    fn leave(&self) {
        if self.0.size == 0 || !WRITING.with(|w| w.replace(false)) {
            return;
        }
        let mut state = self.lock();
        state.writers = state.writers.saturating_sub(1);
        self.0.changed.notify_all();
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
        if state.releasing {
            return Err(std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                "the reserve is being freed to close the open traces",
            ));
        }
        // A disk found nearly full stays full for new sessions until room comes back: a trace started
        // in the headroom kept for the last batches would only be cut again at once. The fill measured
        // then is forgotten after a while (no session samples the room while the reserve is spent).
        let now = std::time::Instant::now();
        state
            .samples
            .retain(|(t, _, _)| now.duration_since(*t) <= FILL_MEMORY);
        let headroom = Self::headroom(&state);
        if let Some(free) = free_room(&self.0.path)
            && free < self.0.size.saturating_add(headroom)
        {
            state.spent = true;
            return Err(std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                format!(
                    "the disk is nearly full: {free} bytes left, under the reserve and the {headroom} bytes kept for the next commits"
                ),
            ));
        }
        self.remove_abandoned();
        match self.write_file() {
            Ok(file) => {
                state.file = Some(file);
                state.held = true;
                state.spent = false;
                state.low_room = None;
                // Writing the reserve is no fill of the traces: the room sampled before it is counted
                // as if the reserve had been there.
                let size = self.0.size;
                for sample in state.samples.iter_mut() {
                    sample.1 = sample.1.saturating_sub(size);
                }
                Ok(())
            }
            Err(e) => {
                let _ = std::fs::remove_file(&self.0.path);
                state.file = None;
                state.spent = true;
                Err(e)
            }
        }
    }

    /// Creates the file, locked, with its full size (real blocks, synced).
    fn write_file(&self) -> std::io::Result<std::fs::File> {
        let mut file = self.create_locked()?;
        let block = [0u8; 64 << 10];
        let mut left = self.0.size;
        while left > 0 {
            let n = left.min(block.len() as u64) as usize;
            file.write_all(&block[..n])?;
            left -= n as u64;
        }
        file.sync_all()?;
        Ok(file)
    }

    /// Creates the file and takes its lock. Another collector removing abandoned reserves may take
    /// the lock of a file just created and not yet locked, and delete it: the file locked is then
    /// checked to be the one under the name, or created again.
    fn create_locked(&self) -> std::io::Result<std::fs::File> {
        for _ in 0..3 {
            let file = std::fs::File::create(&self.0.path)?;
            file.try_lock().map_err(std::io::Error::from)?;
            if same_file(&file, &self.0.path) {
                return Ok(file);
            }
        }
        Err(std::io::Error::other(format!(
            "{}: the reserve file was removed as soon as it was created, three times",
            self.0.path.display()
        )))
    }

    /// Deletes the reserve files of collectors that died (nobody holds their lock).
    fn remove_abandoned(&self) {
        let Some(dir) = self.0.path.parent() else {
            return;
        };
        for path in reserve_files(dir) {
            if path == self.0.path {
                continue;
            }
            let Ok(file) = std::fs::File::open(&path) else {
                continue;
            };
            if file.try_lock().is_ok() {
                let _ = std::fs::remove_file(&path);
            }
        }
    }

    /// The disk is full: deletes the reserve so that open traces can be closed in its room. Returns
    /// whether this call freed it (false: already freed, or there is none).
    pub fn release(&self) -> bool {
        if self.0.size == 0 {
            return false;
        }
        // This thread writes no more; the others finish the write under way (one frame at most) and
        // see the reserve spent at their next one. Only then is the room freed, for the closes alone.
        self.leave();
        let mut state = self.lock();
        state.spent = true;
        state.releasing = true;
        while state.writers > 0 {
            state = match self
                .0
                .changed
                .wait_timeout(state, std::time::Duration::from_secs(10))
            {
                Ok((s, timeout)) if !timeout.timed_out() => s,
                // A writer stuck for 10 s (a disk that hangs): free the room anyway.
                Ok((mut s, _)) => {
                    s.writers = 0;
                    s
                }
                Err(p) => p.into_inner().0,
            };
        }
        state.releasing = false;
        let freed = state.held;
        if freed {
            // Its blocks are freed once the name is gone and the file closed.
            let _ = std::fs::remove_file(&self.0.path);
            state.file = None;
            state.held = false;
            state.releases += 1;
        }
        self.0.changed.notify_all();
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

/// Bytes that can still be written in the file system holding `path` (its directory): the blocks free
/// to this process (root may use the blocks kept for it). `None` where that cannot be read.
#[cfg(unix)]
fn free_room(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let dir = path.parent()?;
    let c_path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c_path` is a NUL-terminated path and `st` points to writable memory for one
    // `statvfs`, which the call fills when it returns 0.
    let r = unsafe { libc::statvfs(c_path.as_ptr(), st.as_mut_ptr()) };
    if r != 0 {
        return None;
    }
    // SAFETY: the call succeeded, so it filled `st`.
    let st = unsafe { st.assume_init() };
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let blocks = if root { st.f_bfree } else { st.f_bavail };
    // Both are 64-bit on the targets the collector runs on; the conversions keep 32-bit ones building.
    #[allow(clippy::useless_conversion)]
    let room = u64::from(blocks).saturating_mul(u64::from(st.f_frsize));
    Some(room)
}

#[cfg(not(unix))]
fn free_room(_path: &Path) -> Option<u64> {
    None
}

/// Whether `file` is the file named `path` now.
#[cfg(unix)]
fn same_file(file: &std::fs::File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(not(unix))]
fn same_file(_file: &std::fs::File, path: &Path) -> bool {
    path.exists()
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
        let file = reserve.path().to_path_buf();
        assert_eq!(reserve_files(dir.path()), std::slice::from_ref(&file));
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

    /// Two collectors on one directory (a replay beside a listening one): each has its own reserve,
    /// and the one that ends first leaves the other's in place.
    #[test]
    fn a_collector_ending_leaves_another_ones_reserve() {
        let dir = tempfile::tempdir().unwrap();
        let listening = DiskReserve::new(dir.path(), 50_000);
        let replay = DiskReserve::new(dir.path(), 50_000);
        listening.ensure().unwrap();
        replay.ensure().unwrap();
        assert_ne!(listening.path(), replay.path());
        assert_eq!(reserve_files(dir.path()).len(), 2);
        drop(replay);
        assert_eq!(reserve_files(dir.path()), [listening.path().to_path_buf()]);
        assert_eq!(std::fs::metadata(listening.path()).unwrap().len(), 50_000);
        // Releasing one frees its own file only.
        let other = DiskReserve::new(dir.path(), 50_000);
        other.ensure().unwrap();
        assert!(other.release());
        assert_eq!(reserve_files(dir.path()), [listening.path().to_path_buf()]);
    }

    /// A reserve left by a collector that died (no lock held on it: here an older socscope's name and
    /// a file of a process long gone) is deleted by the next collector setting its reserve aside; a
    /// live collector's is not.
    #[test]
    fn reserves_left_by_dead_collectors_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join(RESERVE_PREFIX);
        let dead = dir.path().join(format!("{RESERVE_PREFIX}-4194999-0"));
        std::fs::write(&old, vec![0u8; 1000]).unwrap();
        std::fs::write(&dead, vec![0u8; 1000]).unwrap();
        let live = DiskReserve::new(dir.path(), 10_000);
        live.ensure().unwrap();
        assert_eq!(reserve_files(dir.path()), [live.path().to_path_buf()]);
        let next = DiskReserve::new(dir.path(), 10_000);
        next.ensure().unwrap();
        assert_eq!(reserve_files(dir.path()).len(), 2, "the live one is kept");
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
