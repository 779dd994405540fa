//! The flight recorder: per board, only the last seconds of the stream, kept compressed in bounded
//! memory, and a trace written only when a trigger fires — the window from `pre` before the trigger to
//! `post` after it.
//!
//! What is kept is the stream itself: the wire frames as they arrived (COBS-encoded, as on the link),
//! appended to a segment of [`SEGMENT_BYTES`] that is zstd-compressed (level 1) when full, with each
//! frame's length and latest record time beside it. Segments older than the window, or beyond the
//! memory limit, are dropped oldest first. The session's `Hello` and every `Dictionary` frame that
//! declared something new are kept outside the ring, for the whole session.
//!
//! A save is a replay: a new [`Ingest`] (in window mode) is fed the `Hello`, the dictionaries, the ring's
//! frames from the window's start on, then the live frames until the stream passes the window's end. So
//! a saved window is exactly what a full capture of the same frames stores, on the session's own clock
//! (same `Hello`, same origin), with whatever crossed the window's start clipped at it and counted, as
//! at any capture's edges. Triggers that fire while a window is open extend it and are stored in it.
//!
//! Meanwhile the stream is decoded and reconstructed once, into no store, only for the triggers.
//!
//! The window's ingest runs on a thread of its own (one per window being saved, so at most one per
//! board): replaying the ring and storing the window costs as much per record as a plain capture, and
//! done in the stream's own thread it stalled the watch — the triggers and the ring — for as long.
//! The watch hands it, in stream order, the ring's frames, then the live frames in batches of
//! [`SAVE_BATCH_BYTES`], and what changes the window (a trigger joining it, a firing completed, the
//! stream ending early); at most [`SAVE_QUEUE`] batches wait for it, so memory stays bounded (those
//! batches, and the ring's frames of the window, decompressed, while the saver replays them) and a
//! saver that falls behind slows the stream rather than losing frames. The window closes when the
//! watch's own reconstruction has passed its end: the watch then waits for the saver to store what it
//! was handed and to close the trace. Should no thread be available, the window is saved in the
//! stream's thread. The times the stream waited for a saver, and the windows saved inline, are counted
//! in the session's [`WatchReport`].
//!
//! The windows of one session share their zstd dictionaries: the first window trains them (as any
//! trace does), the later ones take them from the session's shelf
//! ([`socscope_tracedb::SharedDictionaries`]) and store a copy in their own file, so that a night of
//! many windows trains once per board session rather than once per window.
//!
//! Start here: [`FlightConfig`], [`FlightRecorder`], [`WindowSpec`].

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use socscope_tracedb::{ParamValue, Timestamp, units};
use socscope_wire::decode::{DecodeError, Frame, HelloInfo, OwnedDictEntry, StreamDecoder};
use socscope_wire::refusal::RefusalReason;

pub use crate::window::{DEFAULT_FLIGHT_MEMORY, FlightConfig, WatchReport, WindowSpec};

use crate::reconstruct::Reconstructor;
use crate::session::{Ingest, IngestConfig, Notice, ResumeTable, SessionReport};
use crate::trigger::{Discard, Firing, Observed, TRIGGER_PARAM, TriggerEngine};

/// Raw bytes gathered before a segment is compressed: large enough for zstd to find the stream's
/// repetitions, small enough that the window's edge is dropped in fine steps.
pub const SEGMENT_BYTES: usize = 64 * 1024;

/// Live frames gathered before they are handed to the thread saving a window.
pub const SAVE_BATCH_BYTES: usize = 64 * 1024;

/// Batches that may wait for the thread saving a window before the stream waits for it.
pub const SAVE_QUEUE: usize = 8;

/// How far past a window's end the fastest CPU may be before the window closes without a CPU that has
/// sent nothing since.
pub const SILENT_CPU_GRACE: Timestamp = 1_000_000_000;

/// A frame in the ring: its encoded length and the latest trace time when it arrived.
#[derive(Clone, Copy, Debug)]
struct FrameMeta {
    len: u32,
    t: Timestamp,
}

/// Compressed frames.
struct Segment {
    data: Vec<u8>,
    raw_len: usize,
    frames: Vec<FrameMeta>,
}

impl Segment {
    fn last_t(&self) -> Timestamp {
        self.frames.last().map_or(i64::MIN, |f| f.t)
    }

    fn bytes(&self) -> usize {
        self.data.capacity() + self.frames.capacity() * std::mem::size_of::<FrameMeta>()
    }
}

/// The last seconds of one stream, compressed.
struct Ring {
    segments: VecDeque<Segment>,
    open: Vec<u8>,
    open_frames: Vec<FrameMeta>,
    /// Bytes held by the sealed segments.
    sealed_bytes: usize,
    window: Timestamp,
    memory: usize,
    /// Frames dropped from the ring (older than the window or beyond the memory).
    evicted_frames: u64,
    /// Most bytes held at once.
    peak_bytes: usize,
}

impl Ring {
    fn new(window: Timestamp, memory: usize) -> Self {
        Self {
            segments: VecDeque::new(),
            open: Vec::with_capacity(SEGMENT_BYTES + 4096),
            open_frames: Vec::new(),
            sealed_bytes: 0,
            window,
            memory,
            evicted_frames: 0,
            peak_bytes: 0,
        }
    }

    /// Bytes held now (segments, frame index, the open segment).
    fn bytes(&self) -> usize {
        self.sealed_bytes
            + self.open.capacity()
            + self.open_frames.capacity() * std::mem::size_of::<FrameMeta>()
    }

    fn push(&mut self, raw: &[u8], t: Timestamp, head: Timestamp) {
        self.open.extend_from_slice(raw);
        self.open_frames.push(FrameMeta {
            len: raw.len() as u32,
            t,
        });
        if self.open.len() >= SEGMENT_BYTES {
            self.seal();
        }
        while let Some(oldest) = self.segments.front() {
            let too_old = oldest.last_t() < head.saturating_sub(self.window);
            if !too_old && self.bytes() <= self.memory {
                break;
            }
            self.drop_oldest();
        }
        self.peak_bytes = self.peak_bytes.max(self.bytes());
    }

    fn drop_oldest(&mut self) {
        if let Some(s) = self.segments.pop_front() {
            self.sealed_bytes -= s.bytes();
            self.evicted_frames += s.frames.len() as u64;
        }
    }

    fn seal(&mut self) {
        if self.open_frames.is_empty() {
            return;
        }
        // zstd cannot fail on a buffer in memory short of running out of it; then the segment is kept
        // uncompressed rather than lost.
        let data = zstd::bulk::compress(&self.open, 1).unwrap_or_else(|_| self.open.clone());
        let mut data = data;
        data.shrink_to_fit();
        let segment = Segment {
            raw_len: self.open.len(),
            data,
            frames: std::mem::take(&mut self.open_frames),
        };
        self.sealed_bytes += segment.bytes();
        self.segments.push_back(segment);
        self.open.clear();
    }

    /// The frames whose time is at or after `from`, oldest first, and the time of the oldest frame
    /// held (to say how much of the window was no longer there).
    fn frames_from(&self, from: Timestamp, mut each: impl FnMut(&[u8])) -> Option<Timestamp> {
        let oldest = self
            .segments
            .front()
            .and_then(|s| s.frames.first())
            .or(self.open_frames.first())
            .map(|f| f.t);
        let mut walk = |raw: &[u8], frames: &[FrameMeta]| {
            let mut at = 0usize;
            for f in frames {
                let end = at + f.len as usize;
                if f.t >= from
                    && let Some(bytes) = raw.get(at..end)
                {
                    each(bytes);
                }
                at = end;
            }
        };
        for s in &self.segments {
            if s.last_t() < from {
                continue;
            }
            let raw = if s.raw_len == s.data.len() {
                // Kept uncompressed (see `seal`), or zstd gave no gain: try as it is first.
                zstd::bulk::decompress(&s.data, s.raw_len).unwrap_or_else(|_| s.data.clone())
            } else {
                match zstd::bulk::decompress(&s.data, s.raw_len) {
                    Ok(raw) => raw,
                    Err(_) => continue,
                }
            };
            walk(&raw, &s.frames);
        }
        walk(&self.open, &self.open_frames);
        oldest
    }
}

/// Frames, concatenated, with their lengths.
#[derive(Default)]
struct FrameBatch {
    bytes: Vec<u8>,
    lens: Vec<u32>,
}

impl FrameBatch {
    fn push(&mut self, raw: &[u8]) {
        self.bytes.extend_from_slice(raw);
        self.lens.push(raw.len() as u32);
    }

    fn is_empty(&self) -> bool {
        self.lens.is_empty()
    }

    fn frames(&self) -> impl Iterator<Item = &[u8]> {
        let mut at = 0usize;
        self.lens.iter().filter_map(move |&len| {
            let end = at + len as usize;
            let raw = self.bytes.get(at..end);
            at = end;
            raw
        })
    }
}

/// What the watch tells the saver of a window, in stream order.
enum ToSaver {
    /// Frames as received.
    Frames(FrameBatch),
    /// A trigger joined the window, whose end is now `end`.
    Fired { firing: Firing, end: Timestamp },
    /// Firings completed since they fired (their final extent).
    Revised(Vec<Firing>),
    /// The stream ended before the window's end; `replace`: over a reason already given.
    CutShort { why: String, replace: bool },
}

/// What a saver shares with the watch while it runs.
#[derive(Default)]
struct SaverShared {
    notices: Mutex<Vec<Notice>>,
    /// The store ended the window's session (a full disk): what comes next has nowhere to go.
    closed: AtomicBool,
}

impl SaverShared {
    fn take_notices(&self) -> Vec<Notice> {
        std::mem::take(&mut *self.notices.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// The window's own ingest, fed what the watch hands it.
struct WindowSave {
    ingest: Ingest,
    shared: Arc<SaverShared>,
}

type Saved = crate::Result<(Vec<SessionReport>, Vec<Notice>)>;

impl WindowSave {
    fn handle(&mut self, message: ToSaver) {
        match message {
            ToSaver::Frames(batch) => {
                for raw in batch.frames() {
                    // Frame by frame: should the store close the window's session (a full disk), what
                    // follows has nowhere to go and is not fed (it would count as records without a
                    // Hello).
                    if self.ingest.session_path().is_none() {
                        break;
                    }
                    let _ = self.ingest.feed(raw);
                }
                self.shared_state();
            }
            ToSaver::Fired { firing, end } => {
                if let Some(spec) = self.ingest.window_spec_mut() {
                    spec.firings.push(firing);
                    spec.end = end;
                }
            }
            ToSaver::Revised(revised) => {
                let Some(spec) = self.ingest.window_spec_mut() else {
                    return;
                };
                for r in revised {
                    if let Some(f) = spec.firings.iter_mut().find(|f| {
                        f.rule == r.rule
                            && f.at == r.at
                            && f.start == r.start
                            && f.producer == r.producer
                    }) {
                        *f = r;
                    }
                }
            }
            ToSaver::CutShort { why, replace } => {
                if let Some(spec) = self.ingest.window_spec_mut()
                    && (replace || spec.cut_short.is_none())
                {
                    spec.cut_short = Some(why);
                }
            }
        }
    }

    /// Commits what is due while nothing arrives.
    fn tick(&mut self) {
        let _ = self.ingest.tick();
        self.shared_state();
    }

    fn shared_state(&mut self) {
        if self.ingest.session_path().is_none() {
            self.shared.closed.store(true, Ordering::Release);
        }
        let notices = self.ingest.take_notices();
        if !notices.is_empty() {
            self.shared
                .notices
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .extend(notices);
        }
    }

    /// The saver's thread: what the watch hands it until the watch lets go, then the trace closed.
    fn run(mut self, from: Receiver<ToSaver>, idle: Duration) -> Saved {
        loop {
            match from.recv_timeout(idle) {
                Ok(message) => self.handle(message),
                Err(RecvTimeoutError::Timeout) => self.tick(),
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        self.ingest.finish()
    }
}

/// Where a window's saver runs.
enum Saver {
    Thread {
        to: SyncSender<ToSaver>,
        thread: std::thread::JoinHandle<Option<Saved>>,
    },
    /// No thread could be started: saved in the stream's thread.
    Inline(Box<WindowSave>),
}

/// A window being saved.
struct OpenSave {
    saver: Saver,
    shared: Arc<SaverShared>,
    /// Live frames not yet handed to the saver.
    pending: FrameBatch,
    /// The window's trace.
    path: PathBuf,
    /// The window's end so far (post after the last trigger), trace ns.
    end: Timestamp,
    /// Times a batch found the saver's queue full and the stream waited for it.
    waits: u64,
}

impl OpenSave {
    /// Starts saving the window that `ingest` (fed its `Hello` and dictionaries) stores: `ring`, the
    /// ring's frames from the window's start, go first. `own_thread` false: saved in the stream's
    /// thread.
    fn start(
        ingest: Ingest,
        ring: FrameBatch,
        end: Timestamp,
        idle: Duration,
        own_thread: bool,
    ) -> Self {
        let shared = Arc::new(SaverShared::default());
        let path = ingest
            .session_path()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let save = WindowSave {
            ingest,
            shared: Arc::clone(&shared),
        };
        let saver = if own_thread {
            let (to, from) = sync_channel(SAVE_QUEUE);
            // The save is handed over once the thread runs, so that it stays here should none start.
            let (give, take) = sync_channel::<WindowSave>(1);
            let spawned = std::thread::Builder::new()
                .name("socscope-window".into())
                .spawn(move || take.recv().ok().map(|save| save.run(from, idle)));
            match spawned {
                Ok(thread) => match give.send(save) {
                    Ok(()) => Saver::Thread { to, thread },
                    Err(back) => Saver::Inline(Box::new(back.0)),
                },
                Err(_) => Saver::Inline(Box::new(save)),
            }
        } else {
            Saver::Inline(Box::new(save))
        };
        let mut open = Self {
            saver,
            shared,
            pending: FrameBatch::default(),
            path,
            end,
            waits: 0,
        };
        open.send(ToSaver::Frames(ring));
        open
    }

    /// A live frame for the window.
    fn frame(&mut self, raw: &[u8]) {
        self.pending.push(raw);
        if self.pending.bytes.len() >= SAVE_BATCH_BYTES {
            self.flush();
        }
    }

    /// Hands over the live frames gathered.
    fn flush(&mut self) {
        if !self.pending.is_empty() {
            let batch = std::mem::take(&mut self.pending);
            self.deliver(ToSaver::Frames(batch));
        }
    }

    /// A change to the window, after the frames before it.
    fn send(&mut self, message: ToSaver) {
        self.flush();
        self.deliver(message);
    }

    fn deliver(&mut self, message: ToSaver) {
        match &mut self.saver {
            // A saver gone (it panicked) is found and said at `finish`.
            Saver::Thread { to, .. } => match to.try_send(message) {
                Ok(()) | Err(TrySendError::Disconnected(_)) => {}
                Err(TrySendError::Full(message)) => {
                    // The saver is behind: the stream waits for it rather than drop or hoard frames.
                    self.waits += 1;
                    let _ = to.send(message);
                }
            },
            Saver::Inline(save) => save.handle(message),
        }
    }

    /// Whether the window is saved in the stream's own thread.
    fn inline(&self) -> bool {
        matches!(self.saver, Saver::Inline(_))
    }

    /// The store ended the window's session.
    fn closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
    }

    /// Waits for the saver to store everything it was handed and to close the trace.
    fn finish(mut self) -> (Saved, Vec<Notice>) {
        self.flush();
        let saved = match self.saver {
            Saver::Thread { to, thread } => {
                drop(to);
                match thread.join() {
                    Ok(Some(saved)) => saved,
                    Ok(None) | Err(_) => Err(crate::CollectorError::Invalid(
                        "the thread saving the window stopped before closing it".into(),
                    )),
                }
            }
            Saver::Inline(save) => save.ingest.finish(),
        };
        (saved, self.shared.take_notices())
    }
}

/// One board's session as the flight recorder watches it.
struct Watch {
    hello: HelloInfo,
    hello_frame: Vec<u8>,
    dictionaries: Vec<u8>,
    declared: std::collections::HashSet<(bool, u32)>,
    recon: Reconstructor,
    triggers: TriggerEngine,
    ring: Ring,
    start_unix_ns: i64,
    save: Option<OpenSave>,
    saved: Vec<PathBuf>,
    records_seen: bool,
    not_saved: u64,
    /// The latest record time of each CPU seen (a window ends when every CPU has passed its end: CPUs
    /// send their batches independently).
    cpu_heads: Vec<Option<Timestamp>>,
    /// The zstd dictionaries the session's first windows trained, lent to its later ones: every
    /// window is a piece of the same stream, and training them again for each was CPU time a plain
    /// capture spends once.
    dictionaries_shelf: socscope_tracedb::SharedDictionaries,
    /// Times the stream waited for a saver (see [`WatchReport::saver_waits`]).
    saver_waits: u64,
    /// Windows saved in the stream's thread.
    saved_inline: u64,
}

impl Watch {
    /// The time every CPU's stream has reached (the slowest CPU's latest record).
    fn all_cpus_at(&self) -> Timestamp {
        self.cpu_heads
            .iter()
            .flatten()
            .copied()
            .min()
            .unwrap_or(i64::MIN)
    }
}

/// The flight recorder of one byte stream (one board's connection, serial port or replayed file).
pub struct FlightRecorder {
    config: IngestConfig,
    flight: FlightConfig,
    source: String,
    decoder: StreamDecoder,
    /// Bytes fed and not yet decoded, from stream offset `staged_at`.
    staged: Vec<u8>,
    staged_at: u64,
    watch: Option<Watch>,
    notices: Vec<Notice>,
    reports: Vec<SessionReport>,
    had_session: bool,
    /// Frames that came with no session to belong to, or were dropped by the decoder.
    orphan_frames: u64,
    unauthorised: u64,
    /// The latest refusal not yet taken by the source ([`FlightRecorder::take_refusal`]): a TCP link
    /// sends it to the board as a `Refusal` frame and closes, as for a capture stored whole.
    refusal: Option<(RefusalReason, String)>,
}

impl FlightRecorder {
    /// A recorder for the stream from `source`; `config.flight` must be set.
    pub fn new(config: IngestConfig, source: impl Into<String>) -> Option<Self> {
        let flight = config.flight.clone()?;
        let mut decoder = StreamDecoder::new(&config.accepted_versions);
        decoder.set_max_decompressed(config.max_decompressed);
        Some(Self {
            config,
            flight,
            source: source.into(),
            decoder,
            staged: Vec::new(),
            staged_at: 0,
            watch: None,
            notices: Vec::new(),
            reports: Vec::new(),
            had_session: false,
            orphan_frames: 0,
            unauthorised: 0,
            refusal: None,
        })
    }

    /// Why the recorder will not watch this stream's session, if it refused one since the last call:
    /// a `Hello` without the collector's token, or a wire version it cannot read — the reasons plain
    /// `collect` refuses for, but the limits on new sessions (a recorder starts no trace per session)
    /// and store failures (a window that cannot be saved does not end the watch). A source that can
    /// answer the board (TCP) sends it as a `Refusal` frame and closes.
    pub fn take_refusal(&mut self) -> Option<(RefusalReason, String)> {
        self.refusal.take()
    }

    /// Frames that belonged to no session (no readable `Hello` before them, or a refused one).
    pub fn orphan_frames(&self) -> u64 {
        self.orphan_frames
    }

    /// Whether a session started on the stream.
    pub fn has_had_session(&self) -> bool {
        self.had_session
    }

    /// Notices since the last call.
    pub fn take_notices(&mut self) -> Vec<Notice> {
        std::mem::take(&mut self.notices)
    }

    /// Bytes the ring of the open session holds now.
    pub fn ring_bytes(&self) -> usize {
        self.watch.as_ref().map_or(0, |w| w.ring.bytes())
    }

    /// Feeds bytes from the stream.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.decoder.feed(bytes);
        self.staged.extend_from_slice(bytes);
        // Taken out while frames are handled, so that each frame's bytes are lent, not copied.
        let staged = std::mem::take(&mut self.staged);
        while let Some(result) = self.decoder.next_frame() {
            match result {
                Ok(decoded) => {
                    let from = (decoded.offset.saturating_sub(self.staged_at)) as usize;
                    let raw = staged.get(from..from + decoded.len).unwrap_or_default();
                    self.frame(decoded.frame, raw);
                }
                Err(e) => {
                    self.orphan_frames += 1;
                    if matches!(e, DecodeError::UnsupportedVersion { .. }) {
                        // The board's session cannot be read: the open watch ends, the board is told.
                        self.end_watch(false, "the board started a session of a wire version this collector cannot read");
                        self.refusal
                            .get_or_insert((RefusalReason::Version, e.to_string()));
                    }
                    if self.orphan_frames <= 20 {
                        self.notices.push(Notice::FrameDropped {
                            source: self.source.clone(),
                            message: e.to_string(),
                        });
                    }
                }
            }
        }
        self.staged = staged;
        // Keep only what the decoder has not consumed.
        let consumed = (self.decoder.offset() - self.staged_at) as usize;
        if consumed > 0 {
            self.staged.drain(..consumed.min(self.staged.len()));
            self.staged_at = self.decoder.offset();
        }
        self.tick();
    }

    /// Hands the window being saved, if any, the frames gathered for it (its saver commits them when
    /// its interval has passed), and passes on its notices.
    pub fn tick(&mut self) {
        if let Some(save) = self.watch.as_mut().and_then(|w| w.save.as_mut()) {
            save.flush();
            self.notices.extend(save.shared.take_notices());
        }
    }

    /// The stream ended: a window being saved is closed with what arrived (and says so).
    pub fn finish(mut self) -> (Vec<SessionReport>, Vec<Notice>) {
        self.end_watch(
            false,
            "the link ended (disconnect, shutdown or end of file)",
        );
        (self.reports, self.notices)
    }

    fn frame(&mut self, frame: Frame, raw: &[u8]) {
        if let Frame::Hello(hello) = frame {
            if let Some(w) = &self.watch
                && w.hello.board == hello.board
                && w.hello.session_id == hello.session_id
                && w.hello.tick_rate_hz == hello.tick_rate_hz
            {
                // The session's periodic Hello (wire version 2): the same session goes on.
                return;
            }
            self.end_watch(false, "the board started a new session");
            if let Some(token) = &self.config.token
                && !same_secret(token.as_bytes(), hello.token.as_bytes())
            {
                self.unauthorised += 1;
                self.refusal.get_or_insert((
                    RefusalReason::Token,
                    format!(
                        "{} token in the Hello: this collector requires its --token",
                        if hello.token.is_empty() {
                            "no"
                        } else {
                            "a wrong"
                        }
                    ),
                ));
                if self.unauthorised <= 20 {
                    self.notices.push(Notice::FrameDropped {
                        source: self.source.clone(),
                        message: format!(
                            "Hello of board '{}' refused: {} token (--token); its frames are dropped",
                            crate::naming::printable(&hello.board),
                            if hello.token.is_empty() { "no" } else { "a wrong" },
                        ),
                    });
                }
                return;
            }
            self.start_watch(hello, raw);
            return;
        }
        let Some(w) = self.watch.as_mut() else {
            self.orphan_frames += 1;
            return;
        };
        let dict = self.decoder.dictionary();
        let mut sink = Discard;
        let mut keep = true;
        let mut bye = false;
        // The recorder's reconstruction stores nothing: a store error cannot happen.
        match &frame {
            Frame::Dictionary(items) => {
                let new: Vec<OwnedDictEntry> = items
                    .iter()
                    .filter(|item| {
                        w.declared.insert(match item {
                            OwnedDictEntry::Producer(p) => (false, p.id),
                            OwnedDictEntry::EventType(t) => (true, u32::from(t.id)),
                        })
                    })
                    .cloned()
                    .collect();
                if !new.is_empty() {
                    w.dictionaries.extend_from_slice(raw);
                    let _ = w.recon.dictionary(
                        &new,
                        dict,
                        &mut Observed::new(&mut sink, Some(&mut w.triggers)),
                    );
                }
                // Declarations are replayed from `dictionaries`, before the window's frames.
                keep = false;
            }
            Frame::Events(batch) => {
                let _ = w.recon.batch(
                    batch,
                    dict,
                    &mut Observed::new(&mut sink, Some(&mut w.triggers)),
                );
                if !std::mem::replace(&mut w.records_seen, true) {
                    w.triggers.check_names();
                }
                if let Some(last) = batch.records.last() {
                    let cpu = usize::from(batch.cpu);
                    if w.cpu_heads.len() <= cpu {
                        w.cpu_heads.resize(cpu + 1, None);
                    }
                    let t = w.recon.ticks_to_ns(last.ticks);
                    w.cpu_heads[cpu] = Some(w.cpu_heads[cpu].map_or(t, |h| h.max(t)));
                }
            }
            Frame::Loss(l) => {
                let _ = w.recon.loss(
                    l.cpu,
                    l.first_seq,
                    l.count,
                    &mut Observed::new(&mut sink, Some(&mut w.triggers)),
                );
            }
            Frame::CpuTotal(t) => w.recon.cpu_total(t.cpu, t.sequences),
            // A board's post-mortem dump: kept (and replayed into a saved window) like a `Loss`.
            Frame::Window(win) => {
                w.recon.window(win.cpu, win.first_seq, win.overwritten);
            }
            Frame::Heartbeat(h) => {
                w.triggers.heartbeat(w.recon.ticks_to_ns(h.ticks));
                keep = false;
            }
            Frame::Bye(_) => bye = true,
            Frame::Hello(_) => keep = false,
        }
        let head = w.recon.last_ts();
        if keep && !bye {
            w.ring.push(raw, head, head);
        }
        if let Some(save) = w.save.as_mut() {
            if bye && head < save.end {
                let why = format!(
                    "the board ended its session (Bye) at {} s, before the window's end at {} s",
                    units::timestamp(head),
                    units::timestamp(save.end)
                );
                save.send(ToSaver::CutShort { why, replace: true });
            }
            if (keep || bye) && !save.closed() {
                save.frame(raw);
            }
        }
        w.triggers.frame_done();
        for message in w.triggers.take_warnings() {
            self.notices.push(Notice::TriggerNote {
                source: self.source.clone(),
                message,
            });
        }
        let new: Vec<Firing> = w.triggers.take_new().to_vec();
        for f in new {
            self.fired(f);
        }
        self.revised();
        if bye {
            self.end_watch(true, "");
            return;
        }
        self.close_save_if_done();
    }

    fn start_watch(&mut self, hello: HelloInfo, raw: &[u8]) {
        let mut recon = Reconstructor::new(hello.tick_rate_hz, hello.start_ticks, hello.cpu_count);
        recon.set_syscall_abi(crate::syscalls::SyscallAbi::for_board(
            &hello.soc, &hello.os,
        ));
        recon.sequences_start_at(0);
        let mut triggers = match &self.config.triggers {
            Some(t) => t.engine(),
            None => crate::trigger::TriggerSet::default().engine(),
        };
        let _ = recon.start(
            self.decoder.dictionary(),
            &mut Observed::new(&mut Discard, Some(&mut triggers)),
        );
        let start_unix_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos().min(i64::MAX as u128) as i64);
        self.notices.push(Notice::TriggerNote {
            source: self.source.clone(),
            message: format!(
                "flight recorder: watching board '{}' (session {}), keeping its last {} in at most {}",
                crate::naming::printable(&hello.board),
                hello.session_id,
                units::duration(self.flight.window),
                units::bytes(self.flight.memory as u64)
            ),
        });
        self.had_session = true;
        self.watch = Some(Watch {
            hello,
            hello_frame: raw.to_vec(),
            dictionaries: Vec::new(),
            declared: std::collections::HashSet::new(),
            recon,
            triggers,
            ring: Ring::new(self.flight.window, self.flight.memory),
            start_unix_ns,
            save: None,
            saved: Vec::new(),
            records_seen: false,
            not_saved: 0,
            cpu_heads: Vec::new(),
            dictionaries_shelf: socscope_tracedb::SharedDictionaries::new(),
            saver_waits: 0,
            saved_inline: 0,
        });
    }

    /// Firings completed since they fired (a state that fired while open has closed): the window
    /// holding them gets their final extent.
    fn revised(&mut self) {
        let Some(w) = self.watch.as_mut() else { return };
        let revised = w.triggers.take_revised();
        if let Some(save) = w.save.as_mut()
            && !revised.is_empty()
        {
            save.send(ToSaver::Revised(revised));
        }
    }

    /// A trigger fired: it joins the window being saved, or starts one.
    fn fired(&mut self, f: Firing) {
        let Some(w) = self.watch.as_mut() else { return };
        let source = self.source.clone();
        let post_end = f.at.saturating_add(self.flight.post);
        if let Some(save) = w.save.as_mut() {
            save.end = save.end.max(post_end);
            let end = save.end;
            save.send(ToSaver::Fired {
                firing: f.clone(),
                end,
            });
            self.notices.push(Notice::TriggerFired {
                source,
                board: w.hello.board.clone(),
                path: save.path.clone(),
                firing: f,
            });
            return;
        }
        if !self.flight.take_save() {
            w.not_saved += 1;
            if w.not_saved == 1 {
                self.notices.push(Notice::TriggerNote {
                    source: source.clone(),
                    message: format!(
                        "flight recorder: trigger `{}` fired but {} windows were saved already (--max-saves): not saved; later ones are counted",
                        f.rule,
                        self.flight.saves.load(Ordering::Acquire)
                    ),
                });
            }
            self.notices.push(Notice::TriggerFired {
                source,
                board: w.hello.board.clone(),
                path: PathBuf::new(),
                firing: f,
            });
            return;
        }
        let start = f.at.saturating_sub(self.flight.pre);
        let spec = WindowSpec {
            start_unix_ns: w.start_unix_ns,
            description: format!(
                "flight-recorder window of {} (from {} before trigger `{}` to {} after the last trigger)",
                source,
                units::duration(self.flight.pre),
                f.rule,
                units::duration(self.flight.post)
            ),
            params: vec![
                (
                    "window_of".into(),
                    ParamValue::String("flight recorder".into()),
                ),
                (TRIGGER_PARAM.into(), ParamValue::String(f.rule.clone())),
            ],
            firings: vec![f.clone()],
            start,
            end: post_end,
            first_kept: None,
            cut_short: None,
            dictionaries: Some(w.dictionaries_shelf.clone()),
        };
        let mut config = self.config.clone();
        config.flight = None;
        config.triggers = None;
        // The window's session must not resume the stream's, nor leave a resume point behind.
        config.resume = ResumeTable::default();
        // Committed on an idle link at the collector's interval (a little more often at the least,
        // so that the saver does not spin should the interval be zero).
        let idle = config.commit_interval.max(Duration::from_millis(10));
        let mut ingest = Ingest::window(config, source.clone(), spec);
        let _ = ingest.feed(&w.hello_frame);
        let _ = ingest.feed(&w.dictionaries);
        let mut ring = FrameBatch::default();
        let first_kept = w.ring.frames_from(start, |raw| ring.push(raw));
        if let Some(spec) = ingest.window_spec_mut() {
            spec.first_kept = first_kept;
        }
        self.notices.extend(ingest.take_notices());
        let save = OpenSave::start(ingest, ring, post_end, idle, self.flight.saver_thread);
        self.notices.push(Notice::TriggerFired {
            source,
            board: w.hello.board.clone(),
            path: save.path.clone(),
            firing: f,
        });
        w.save = Some(save);
    }

    fn close_save_if_done(&mut self) {
        let Some(w) = self.watch.as_mut() else { return };
        // Every CPU past the end; or, should one CPU fall silent, the others a while past it; or the
        // store ended the window's session (a full disk: it was closed as interrupted, and what comes
        // next has nowhere to go).
        let done = w.save.as_ref().is_some_and(|s| {
            w.all_cpus_at() >= s.end
                || w.recon.last_ts() >= s.end.saturating_add(SILENT_CPU_GRACE)
                || s.closed()
        });
        if done && let Some(save) = w.save.take() {
            self.finish_save(save);
        }
    }

    fn finish_save(&mut self, save: OpenSave) {
        if let Some(w) = self.watch.as_mut() {
            w.saver_waits += save.waits;
            w.saved_inline += u64::from(save.inline());
        }
        let (saved, notices) = save.finish();
        self.notices.extend(notices);
        match saved {
            Ok((reports, notices)) => {
                self.notices.extend(notices);
                for r in &reports {
                    if let Some(w) = self.watch.as_mut() {
                        w.saved.push(r.path.clone());
                    }
                    let message = match &r.interrupted {
                        Some(why) => format!(
                            "flight recorder: window not saved whole: {} ({} events): {why}",
                            r.path.display(),
                            r.events,
                        ),
                        None => format!(
                            "flight recorder: window saved: {} ({} events{})",
                            r.path.display(),
                            r.events,
                            if r.complete {
                                ""
                            } else {
                                ", cut short: see window_cut_short"
                            }
                        ),
                    };
                    self.notices.push(Notice::TriggerNote {
                        source: self.source.clone(),
                        message,
                    });
                }
                self.reports.extend(reports);
            }
            Err(e) => self.notices.push(Notice::TriggerNote {
                source: self.source.clone(),
                message: format!("flight recorder: the window could not be saved: {e}"),
            }),
        }
    }

    /// Ends the watched session (the board's `Bye`, a new session, the end of the stream).
    fn end_watch(&mut self, complete: bool, why_cut: &str) {
        let Some(mut w) = self.watch.take() else {
            return;
        };
        if let Some(save) = w.save.take() {
            let mut save = save;
            if !complete {
                let head = w.recon.last_ts();
                let why = format!(
                    "{why_cut} at {} s, before the window's end at {} s: saved with what arrived",
                    units::timestamp(head),
                    units::timestamp(save.end)
                );
                save.send(ToSaver::CutShort {
                    why,
                    replace: false,
                });
            }
            // Put the watch back while the save is finished, so its path is recorded in it.
            let saved_before = w.saved.len();
            self.watch = Some(w);
            self.finish_save(save);
            w = match self.watch.take() {
                Some(w) => w,
                None => return,
            };
            debug_assert!(w.saved.len() >= saved_before);
        }
        let _ = w
            .recon
            .finish(&mut Observed::new(&mut Discard, Some(&mut w.triggers)));
        let st = w.recon.stats();
        let report = WatchReport {
            source: self.source.clone(),
            board: w.hello.board.clone(),
            complete,
            records: st.records_by_type.values().sum(),
            lost_on_board: st.lost_on_board,
            lost_in_transit: st.lost_in_transit,
            firings: w.triggers.firings().to_vec(),
            saved: w.saved,
            not_saved: w.not_saved,
            peak_ring_bytes: w.ring.peak_bytes,
            saver_waits: w.saver_waits,
            saved_inline: w.saved_inline,
            trace_seconds: w.recon.last_ts() as f64 / 1e9,
        };
        self.notices.push(Notice::WatchEnded(report));
    }
}

/// Compares secrets in time independent of where they differ.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
