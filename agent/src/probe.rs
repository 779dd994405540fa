//! The probe mode's control block: where a debug probe (or an emulator's debug port) finds the agent's
//! rings in the board's memory, and how the host and the board share them without a lock.
//!
//! In probe mode ([`crate::Agent::attach_probe`]) the board records into its rings and never frames or
//! sends anything: the host reads the closed blocks out of RAM and builds the wire frames itself
//! (`socscope collect --probe`), as SEGGER's RTT leaves the transfer to the probe. The board writes
//! everything in this block except each ring's `released` word, which only the host writes; the board
//! reads it when a ring needs a free block. Blocks close in order and are written one after the other
//! (the `k`-th block a ring closes is its block `k mod blocks`), so two counters per ring are the whole
//! protocol: `closed` (the board's, advanced after the block's bytes are written) and `released` (the
//! host's, advanced after it has copied the block). A record that finds no free block is dropped and
//! numbered, as in streaming mode, so the host sees every loss as a gap in the sequence numbers.
//!
//! The layout is fixed (`repr(C)`, little-endian, SPEC.md §"Probe mode"): every address is a 64-bit
//! field whatever the board's pointer width, every counter a 32-bit word or a 64-bit pair of them.

use core::sync::atomic::{AtomicU32, Ordering};

use socscope_wire::MAX_NAME_LEN;

use crate::AGENT_VERSION;

/// The first 16 bytes of a control block: a host that does not know its address scans RAM for them.
pub const PROBE_MAGIC: [u8; 16] = *b"socscope-probe\0\0";
/// The layout version this agent writes: 2, the board's names as one image in flash (version 1 had six
/// name entries, 80 bytes more of RAM; `socscope collect --probe` reads both).
pub const PROBE_VERSION: u32 = 2;
/// `state`: the agent has not filled the block yet.
pub const PROBE_STATE_UNSET: u32 = 0;
/// `state`: recording.
pub const PROBE_STATE_RECORDING: u32 = 1;
/// `state`: the board finished its session ([`crate::Agent::probe_finish`]): every block is closed, and
/// the rings' `sequences` and `dropped` and the block's `end_ticks` are final.
pub const PROBE_STATE_FINISHED: u32 = 2;
/// The names a names image carries, in this order: board, SoC, OS, application, token, agent version.
pub const PROBE_NAMES: usize = 6;

/// A 64-bit value as two 32-bit words (low first), for boards without 64-bit atomics.
#[repr(C)]
pub struct ProbeU64 {
    lo: AtomicU32,
    hi: AtomicU32,
}

impl ProbeU64 {
    const fn zero() -> Self {
        Self {
            lo: AtomicU32::new(0),
            hi: AtomicU32::new(0),
        }
    }

    pub(crate) fn set(&self, v: u64) {
        self.lo.store(v as u32, Ordering::Relaxed);
        self.hi.store((v >> 32) as u32, Ordering::Relaxed);
    }

    /// The value (a host-side copy of the block reads it from memory instead).
    pub fn get(&self) -> u64 {
        u64::from(self.hi.load(Ordering::Relaxed)) << 32
            | u64::from(self.lo.load(Ordering::Relaxed))
    }
}

/// One ring (one CPU): 32 bytes.
#[repr(C)]
pub struct ProbeRing {
    /// The address of the ring's first block; block `i` is `block` bytes after block `i - 1`.
    pub(crate) blocks: ProbeU64,
    /// Blocks closed since the start (the board's; wraps at 2^32).
    pub(crate) closed: AtomicU32,
    /// Blocks the host has copied since the start (the host's; the board only reads it).
    pub(crate) released: AtomicU32,
    /// Once finished: the sequence numbers the CPU gave out (`CpuTotal`).
    pub(crate) sequences: ProbeU64,
    /// Once finished: the records the CPU dropped (every one is also a gap in the blocks' numbers).
    pub(crate) dropped: ProbeU64,
}

/// The control block of an agent with `CPUS` rings: 104 + 32 × `CPUS` bytes. Put it in a `static` and
/// hand it to [`crate::Agent::attach_probe`].
#[repr(C)]
pub struct ProbeControl<const CPUS: usize> {
    pub(crate) magic: [AtomicU32; 4],
    pub(crate) version: AtomicU32,
    pub(crate) cpus: AtomicU32,
    /// Bytes per block, blocks per ring.
    pub(crate) block: AtomicU32,
    pub(crate) blocks: AtomicU32,
    /// Where a block's records start; its numbers are in its first 24 bytes (SPEC.md).
    pub(crate) records_at: AtomicU32,
    pub(crate) state: AtomicU32,
    pub(crate) tick_rate_hz: ProbeU64,
    pub(crate) session_id: ProbeU64,
    /// The session's time origin (`Hello`'s `start_ticks`), and, once finished, the board's time then.
    pub(crate) start_ticks: ProbeU64,
    pub(crate) end_ticks: ProbeU64,
    /// The board's dictionary: the body of one `Dictionary` frame, in flash
    /// (`socscope_wire::dict::dictionary_image`).
    pub(crate) dictionary: ProbeU64,
    pub(crate) dictionary_len: AtomicU32,
    pub(crate) cpu_count: AtomicU32,
    /// The board's names image ([`names_image`], in flash): board, SoC, OS, application, token, agent
    /// version.
    pub(crate) names: ProbeU64,
    pub(crate) names_len: AtomicU32,
    _reserved: AtomicU32,
    pub(crate) rings: [ProbeRing; CPUS],
}

impl<const CPUS: usize> ProbeControl<CPUS> {
    /// An empty control block (all zeros: it costs no flash in a `static`).
    pub const fn new() -> Self {
        Self {
            magic: [const { AtomicU32::new(0) }; 4],
            version: AtomicU32::new(0),
            cpus: AtomicU32::new(0),
            block: AtomicU32::new(0),
            blocks: AtomicU32::new(0),
            records_at: AtomicU32::new(0),
            state: AtomicU32::new(PROBE_STATE_UNSET),
            tick_rate_hz: ProbeU64::zero(),
            session_id: ProbeU64::zero(),
            start_ticks: ProbeU64::zero(),
            end_ticks: ProbeU64::zero(),
            dictionary: ProbeU64::zero(),
            dictionary_len: AtomicU32::new(0),
            cpu_count: AtomicU32::new(0),
            names: ProbeU64::zero(),
            names_len: AtomicU32::new(0),
            _reserved: AtomicU32::new(0),
            rings: [const {
                ProbeRing {
                    blocks: ProbeU64::zero(),
                    closed: AtomicU32::new(0),
                    released: AtomicU32::new(0),
                    sequences: ProbeU64::zero(),
                    dropped: ProbeU64::zero(),
                }
            }; CPUS],
        }
    }

    /// Whether the board has finished its session.
    pub fn finished(&self) -> bool {
        self.state.load(Ordering::Acquire) == PROBE_STATE_FINISHED
    }

    /// Blocks ring `cpu` has closed, and blocks the host has released (what a host reads).
    pub fn counters(&self, cpu: usize) -> Option<(u32, u32)> {
        let r = self.rings.get(cpu)?;
        Some((
            r.closed.load(Ordering::Acquire),
            r.released.load(Ordering::Acquire),
        ))
    }

    /// Gives blocks of ring `cpu` back to the board: what a host does once it has copied them (exposed
    /// for a host that runs in the same address space, such as the tests).
    pub fn release(&self, cpu: usize, blocks: u32) {
        if let Some(r) = self.rings.get(cpu) {
            r.released.fetch_add_relaxed(blocks);
        }
    }

    /// The bytes of the block as a host reads them (its whole size in memory).
    pub const fn size() -> usize {
        core::mem::size_of::<Self>()
    }
}

impl<const CPUS: usize> Default for ProbeControl<CPUS> {
    fn default() -> Self {
        Self::new()
    }
}

/// `fetch_add` without a compare-and-swap loop (thumbv6m has none): only one side writes the word.
trait SingleWriterAdd {
    fn fetch_add_relaxed(&self, n: u32);
}

impl SingleWriterAdd for AtomicU32 {
    fn fetch_add_relaxed(&self, n: u32) {
        self.store(
            self.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Release,
        );
    }
}

/// The length of [`names_image`]`(board, soc, os, application, token)`.
pub const fn names_image_len(
    board: &str,
    soc: &str,
    os: &str,
    application: &str,
    token: &str,
) -> usize {
    write_names_image([board, soc, os, application, token, AGENT_VERSION], &mut [])
}

/// The board's names as a probe-mode control block points to them (SPEC.md §12): board, SoC, OS,
/// application, token and this agent's version, each a length byte and its UTF-8 bytes. Built at
/// compile time into a `static` (in flash), so that the control block in RAM holds one address and
/// one length instead of six of each. `N` must be [`names_image_len`] of the same names; a name longer
/// than [`MAX_NAME_LEN`] (the wire's bound) does not compile.
///
/// ```
/// use socscope_agent::probe::{names_image, names_image_len};
/// static NAMES: [u8; names_image_len("board", "soc", "os", "app", "")] =
///     names_image("board", "soc", "os", "app", "");
/// assert_eq!(&NAMES[..6], b"\x05board");
/// ```
pub const fn names_image<const N: usize>(
    board: &str,
    soc: &str,
    os: &str,
    application: &str,
    token: &str,
) -> [u8; N] {
    let mut out = [0u8; N];
    let len = write_names_image(
        [board, soc, os, application, token, AGENT_VERSION],
        &mut out,
    );
    assert!(len == N, "N must be names_image_len of the same names");
    out
}

/// Writes the image into `out` as far as it reaches and returns its whole length.
const fn write_names_image(names: [&str; PROBE_NAMES], out: &mut [u8]) -> usize {
    let mut at = 0;
    let mut i = 0;
    while i < PROBE_NAMES {
        let name = names[i].as_bytes();
        assert!(
            name.len() <= MAX_NAME_LEN,
            "a name longer than MAX_NAME_LEN"
        );
        if at < out.len() {
            out[at] = name.len() as u8;
        }
        at += 1;
        let mut j = 0;
        while j < name.len() {
            if at < out.len() {
                out[at] = name[j];
            }
            at += 1;
            j += 1;
        }
        i += 1;
    }
    at
}

pub(crate) fn store_magic(words: &[AtomicU32; 4]) {
    for (w, chunk) in words.iter().zip(PROBE_MAGIC.chunks_exact(4)) {
        let b = <[u8; 4]>::try_from(chunk).unwrap_or_default();
        w.store(u32::from_le_bytes(b), Ordering::Release);
    }
}

impl ProbeRing {
    /// Blocks closed and not yet released by the host.
    pub(crate) fn waiting(&self) -> u32 {
        self.closed
            .load(Ordering::Relaxed)
            .wrapping_sub(self.released.load(Ordering::Acquire))
    }

    /// One more block closed: its bytes are written (release order for a host on another core).
    pub(crate) fn publish_closed(&self) {
        self.closed.fetch_add_relaxed(1);
    }
}
