//! One connection's ingest: bytes in, sessions out. Decoding, the session life cycle (a trace per `Hello`,
//! complete at `Bye`, incomplete on disconnect), drop and loss accounting, and the catalog entry.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use socscope_tracedb::{Catalog, IngestStat, ParamValue, TraceHeader, TraceWriter};
use socscope_wire::decode::{DecodeError, Dictionary, Frame, HelloInfo, StreamDecoder};
use socscope_wire::refusal::RefusalReason;

use crate::naming::trace_file_name;
use crate::reconstruct::Reconstructor;
use crate::reserve::DiskReserve;
use crate::trigger::Observed;
use crate::{CollectorError, Result};

/// Where and how sessions are stored.
#[derive(Clone, Debug)]
pub struct IngestConfig {
    /// The catalog directory; trace files are created in it.
    pub dir: PathBuf,
    /// Wire versions accepted.
    pub accepted_versions: Vec<u16>,
    /// Longest board, SoC, OS, application and agent-version name kept from a `Hello`, in characters;
    /// longer ones are cut (and counted in `names_truncated`).
    pub max_name_chars: usize,
    /// The most bytes one compressed `Events` records section may expand to; a frame declaring more is
    /// dropped (`frames_dropped.decompress`) before it is decompressed.
    pub max_decompressed: usize,
    /// The shared secret a board's `Hello` must carry (`--token`); `None`: any board is accepted.
    pub token: Option<String>,
    /// How often a live trace is committed: readers see new events within it, and a crash of the
    /// collector loses at most what arrived since the last commit.
    pub commit_interval: std::time::Duration,
    /// Where sessions cut off before `Bye` stopped, shared by every clone of this configuration (the
    /// TCP listener's connections): a board that reconnects and announces the same session again
    /// continues its sequence numbers instead of counting them as lost.
    pub resume: ResumeTable,
    /// Room set aside in `dir` so that traces can be closed on a full disk (see [`crate::reserve`]);
    /// shared by every clone of this configuration.
    pub disk_reserve: DiskReserve,
    /// Trigger rules checked on every session (`--trigger`): their firings annotate the trace; `None`:
    /// no triggers.
    pub triggers: Option<crate::trigger::TriggerSet>,
    /// Keep only the last seconds of each board's stream and save windows of it when a trigger fires
    /// (`--flight-recorder`); `None`: every session is stored whole. Read by [`crate::intake::Intake`],
    /// which hands such a stream to a flight recorder; an [`Ingest`] always stores what it is fed.
    pub flight: Option<crate::window::FlightConfig>,
}

/// Session starts of every connection of one collector within the last minute, shared by them: a
/// bound on the trace files that a flood of short connections can create, where the per-connection
/// limit ([`Ingest::limit_sessions`]) bounds only what one connection starts.
#[derive(Clone, Debug)]
pub struct SessionWindow {
    per_minute: usize,
    starts: std::sync::Arc<Mutex<std::collections::VecDeque<Instant>>>,
}

impl SessionWindow {
    /// At most `per_minute` session starts in any minute, over every connection sharing it.
    pub fn new(per_minute: usize) -> Self {
        Self {
            per_minute,
            starts: std::sync::Arc::default(),
        }
    }

    /// The limit.
    pub fn per_minute(&self) -> usize {
        self.per_minute
    }

    /// Whether one more session may start now (and if so, counts it).
    fn try_start(&self) -> bool {
        let Ok(mut starts) = self.starts.lock() else {
            return false;
        };
        let now = Instant::now();
        while starts
            .front()
            .is_some_and(|t| now.duration_since(*t) >= std::time::Duration::from_secs(60))
        {
            starts.pop_front();
        }
        if starts.len() >= self.per_minute {
            return false;
        }
        starts.push_back(now);
        true
    }
}

/// Why a `Hello` was refused by a session rate limit.
enum RateRefusal {
    Connection,
    Collector,
}

/// Sessions whose link dropped before `Bye`, by board name and session id: the next sequence number
/// of each CPU. Bounded: the oldest entries are forgotten first.
#[derive(Clone, Debug, Default)]
pub struct ResumeTable(std::sync::Arc<Mutex<Vec<ResumePoint>>>);

type ResumePoint = ((String, u64), Vec<Option<u64>>);

/// Most cut-off sessions a [`ResumeTable`] remembers.
pub const MAX_RESUMABLE_SESSIONS: usize = 256;

impl ResumeTable {
    fn remember(&self, board: &str, session_id: u64, next: Vec<Option<u64>>) {
        let Ok(mut t) = self.0.lock() else { return };
        t.retain(|(k, _)| k.0 != board || k.1 != session_id);
        if t.len() >= MAX_RESUMABLE_SESSIONS {
            t.remove(0);
        }
        t.push(((board.to_string(), session_id), next));
    }

    fn take(&self, board: &str, session_id: u64) -> Option<Vec<Option<u64>>> {
        let mut t = self.0.lock().ok()?;
        let i = t
            .iter()
            .position(|(k, _)| k.0 == board && k.1 == session_id)?;
        Some(t.remove(i).1)
    }
}

/// Default of [`IngestConfig::commit_interval`]: 100 ms, so that a `kill -9` at full speed loses
/// less than 250 ms of data (a commit rewrites only the new blocks of each stream's tail chunk).
pub const DEFAULT_COMMIT_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);

/// Default of [`IngestConfig::max_decompressed`]: the longest uncompressed frame (1 MiB); an agent's
/// blocks are a few KiB.
pub const DEFAULT_MAX_DECOMPRESSED: usize = socscope_wire::MAX_FRAME_LEN;

/// Default of [`IngestConfig::max_name_chars`]: far above any real board name, far below a name that
/// floods a terminal or a catalog.
pub const DEFAULT_MAX_NAME_CHARS: usize = 256;

impl IngestConfig {
    /// Stores in `dir`, accepting this build's wire version.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        Self {
            disk_reserve: DiskReserve::new(&dir, crate::reserve::DEFAULT_DISK_RESERVE),
            dir,
            accepted_versions: socscope_wire::READ_WIRE_VERSIONS.to_vec(),
            max_name_chars: DEFAULT_MAX_NAME_CHARS,
            max_decompressed: DEFAULT_MAX_DECOMPRESSED,
            token: None,
            commit_interval: DEFAULT_COMMIT_INTERVAL,
            resume: ResumeTable::default(),
            triggers: None,
            flight: None,
        }
    }
}

/// Compares secrets in time independent of where they differ.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Cuts `name` to `max` characters; returns whether it was longer.
fn cut_name(name: &mut String, max: usize) -> bool {
    match name.char_indices().nth(max) {
        Some((at, _)) => {
            name.truncate(at);
            true
        }
        None => false,
    }
}

/// What became of one session.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionReport {
    /// The source, e.g. `tcp 127.0.0.1:50312` or `serial /dev/ttyUSB0`.
    pub source: String,
    /// Board name from `Hello`.
    pub board: String,
    /// The trace file.
    pub path: PathBuf,
    /// Whether the board said `Bye`.
    pub complete: bool,
    /// Raw records decoded.
    pub records: u64,
    /// Events stored.
    pub events: u64,
    /// Records the board reported lost.
    pub lost_on_board: u64,
    /// Records missing from the sequence (frames dropped on the link).
    pub lost_in_transit: u64,
    /// Frames dropped by the decoder.
    pub dropped_frames: u64,
    /// Wall-clock seconds from `Hello` to the end.
    pub wall_seconds: f64,
    /// Trace duration in seconds (board time).
    pub trace_seconds: f64,
    /// Board time of the latest record decoded, in seconds since the session started: set against the
    /// trace's last committed time, what decoding got to and the trace did not keep (a full disk).
    pub decoded_until_seconds: f64,
    /// Why the session was cut short by the collector's side (the store failed, e.g. a full disk):
    /// the trace keeps what was committed and is marked interrupted. `None` for a normal end.
    pub interrupted: Option<String>,
}

impl SessionReport {
    /// Records per wall-clock second.
    pub fn records_per_second(&self) -> f64 {
        if self.wall_seconds > 0.0 {
            self.records as f64 / self.wall_seconds
        } else {
            0.0
        }
    }
}

/// Something the ingest wants the operator to know.
#[derive(Clone, Debug, PartialEq)]
pub enum Notice {
    /// A session began.
    SessionStarted {
        /// Source.
        source: String,
        /// Board.
        board: String,
        /// Trace file.
        path: PathBuf,
    },
    /// A session ended.
    SessionEnded(SessionReport),
    /// A frame was dropped (only the first few per session are reported; all are counted).
    FrameDropped {
        /// Source.
        source: String,
        /// What the decoder said.
        message: String,
    },
    /// A trigger rule fired in a session.
    TriggerFired {
        /// Source.
        source: String,
        /// Board.
        board: String,
        /// The trace it annotates (with a flight recorder: the stream's, not yet a file).
        path: PathBuf,
        /// What fired.
        firing: crate::trigger::Firing,
    },
    /// Something about the triggers the operator should know (a rule naming a type the board never
    /// announced, a window saved, saves exhausted).
    TriggerNote {
        /// Source.
        source: String,
        /// What happened.
        message: String,
    },
    /// A flight recorder stopped watching a board's session (see [`crate::flight`]).
    WatchEnded(crate::window::WatchReport),
    /// A board speaks a wire version this collector does not accept.
    VersionRejected {
        /// Source.
        source: String,
        /// The decoder's message: both versions and what to upgrade.
        message: String,
    },
}

/// How many dropped frames per session are reported one by one (all are counted in `ingest_stat`).
const REPORTED_DROPS: u64 = 20;

struct ActiveSession {
    hello: HelloInfo,
    /// The session continues one cut off before `Bye` (its sequence numbers went on from there).
    resumed: bool,
    writer: TraceWriter,
    recon: Reconstructor,
    path: PathBuf,
    db_file: String,
    started: Instant,
    drops: BTreeMap<&'static str, u64>,
    dropped_frames: u64,
    dropped_bytes: u64,
    /// The decoder's dropped-byte count when the session started: it also counts the tail of an
    /// oversized frame that arrives after the frame was reported (e.g. 256 MB without a delimiter).
    decoder_dropped_at_start: u64,
    frames: u64,
    bytes_at_start: u64,
    board_totals: Option<(u64, u64)>,
    names_truncated: u64,
    /// Producers (`false`, board id) and event types (`true`, id) declared so far: a repeated dictionary
    /// (wire version 2) declares nothing twice, so what is stored does not depend on how often the
    /// board repeated itself.
    declared: std::collections::HashSet<(bool, u32)>,
    hellos_repeated: u64,
    records_before_hello: u64,
    records_lost_before_hello: u64,
    frames_dropped_before_hello: u64,
    /// Records of the last frame, cut off by the end of the stream (from its header).
    records_cut_off: u64,
    /// Whether records arrived (the first batch is when the triggers' names are checked).
    records_seen: bool,
    /// The session's triggers ([`IngestConfig::triggers`]).
    triggers: Option<crate::trigger::TriggerEngine>,
    /// Firings to store with the trace that were found elsewhere (a flight recorder's window).
    window: Option<crate::window::WindowSpec>,
}

/// Decodes one byte stream (a TCP connection, a serial port, a capture file) into traces.
pub struct Ingest {
    config: IngestConfig,
    source: String,
    decoder: StreamDecoder,
    session: Option<ActiveSession>,
    orphan_frames: u64,
    notices: Vec<Notice>,
    reports: Vec<SessionReport>,
    /// Stream offset of the frame being handled: where a session's bytes start (its `Hello`) and where the
    /// previous session's end when a new `Hello` comes.
    frame_offset: u64,
    /// At most this many sessions start in any minute (`None`: no limit, e.g. a replayed file).
    sessions_per_minute: Option<usize>,
    /// When the sessions of the last minute started.
    session_starts: std::collections::VecDeque<Instant>,
    /// This stream is a window of another one, saved by a flight recorder (see [`Ingest::window`]).
    window: Option<crate::window::WindowSpec>,
    /// The collector-wide session rate limit, when one is shared with other connections.
    shared_sessions: Option<SessionWindow>,
    /// `Hello`s refused by the session rate limit.
    sessions_refused: u64,
    /// Frames decoded while no session was open, kept for the session whose `Hello` comes next (its
    /// first `Hello` was damaged, or the link was joined mid-session): wire version 2 repeats `Hello`.
    pending: Vec<Frame>,
    /// Records in `pending`.
    pending_records: u64,
    /// Approximate bytes `pending` holds (see [`MAX_PENDING_BYTES`]).
    pending_bytes: usize,
    /// The decoder's dictionary after the last `Dictionary` frame of `pending` (a `Hello` resets the
    /// decoder's, and the pending frames must be read with the one they were decoded with).
    pending_dict: Option<Dictionary>,
    /// A `Dictionary` frame was kept since `pending_dict` was copied.
    pending_dict_stale: bool,
    /// Records that arrived while no session was open and could not be kept (the bound was reached, or
    /// their session ended before any `Hello` of it arrived): lost, reported with the next session.
    orphan_records: u64,
    /// Frames dropped by the decoder while no session was open (a damaged `Hello`, say).
    orphan_drops: u64,
    /// `Hello`s refused for a missing or wrong token.
    sessions_unauthorised: u64,
    /// The latest refusal not yet taken by the source ([`Ingest::take_refusal`]): a TCP link sends
    /// it to the board as a `Refusal` frame and closes.
    refusal: Option<(RefusalReason, String)>,
    /// A flight recorder's window whose session the store cut short (a full disk): no `Hello` follows
    /// in a window, so what is still fed is dropped rather than kept for a session that will not come
    /// (the window's note says it was not saved whole).
    window_cut_short: bool,
}

/// The most records kept while waiting for a `Hello` (a few MB decoded); the agent repeats its `Hello`
/// every second, i.e. every ~20 k records at a typical rate.
pub const MAX_PENDING_RECORDS: u64 = 1 << 16;

/// The most memory (approximately) the frames kept while waiting for a `Hello` may hold, whatever they
/// are (a peer sending only dictionaries must not grow it either).
pub const MAX_PENDING_BYTES: usize = 8 << 20;

/// The most frames kept while waiting for a `Hello`.
pub const MAX_PENDING_FRAMES: usize = 4096;

/// Roughly the memory a decoded frame holds.
fn approx_size(frame: &Frame) -> usize {
    use socscope_wire::decode::OwnedDictEntry;
    match frame {
        Frame::Events(b) => {
            64 + std::mem::size_of_val(&b.records[..])
                + std::mem::size_of_val(&b.values[..])
                + b.text.len()
        }
        Frame::Dictionary(items) => items
            .iter()
            .map(|i| match i {
                OwnedDictEntry::Producer(p) => 64 + p.name.len(),
                OwnedDictEntry::EventType(t) => {
                    64 + t.name.len() + t.params.iter().map(|p| 32 + p.name.len()).sum::<usize>()
                }
            })
            .sum(),
        _ => 64,
    }
}

fn drop_reason_key(e: &DecodeError) -> &'static str {
    use socscope_wire::decode::DropReason as R;
    match e {
        DecodeError::Dropped { reason, .. } => match reason {
            R::Cobs => "cobs",
            R::TooShort { .. } => "too_short",
            R::Crc { .. } => "crc",
            R::UnknownKind(_) => "unknown_kind",
            R::Malformed { .. } => "malformed",
            R::UnknownEventType { .. } => "unknown_event_type",
            R::ReservedType(_) => "reserved_type",
            R::Oversized { .. } => "oversized",
            R::Truncated => "truncated",
            R::Decompress(_) => "decompress",
            R::SessionRejected(_) => "session_rejected",
            _ => "other",
        },
        DecodeError::UnsupportedVersion { .. } => "unsupported_version",
        _ => "other",
    }
}

impl Ingest {
    /// A new ingest for the stream from `source`.
    pub fn new(config: IngestConfig, source: impl Into<String>) -> Self {
        let mut decoder = StreamDecoder::new(&config.accepted_versions);
        decoder.set_max_decompressed(config.max_decompressed);
        let source = source.into();
        config
            .disk_reserve
            .watch_commit_interval(config.commit_interval);
        Self {
            config,
            source,
            decoder,
            session: None,
            orphan_frames: 0,
            notices: Vec::new(),
            reports: Vec::new(),
            frame_offset: 0,
            sessions_per_minute: None,
            session_starts: std::collections::VecDeque::new(),
            shared_sessions: None,
            sessions_refused: 0,
            pending: Vec::new(),
            pending_records: 0,
            pending_bytes: 0,
            pending_dict: None,
            pending_dict_stale: false,
            orphan_records: 0,
            orphan_drops: 0,
            sessions_unauthorised: 0,
            refusal: None,
            window_cut_short: false,
            window: None,
        }
    }

    /// An ingest of a window of another stream (a flight recorder's save): its session keeps the
    /// description, parameters and wall-clock start of `spec`, does not count the sequence numbers before
    /// its first records as lost (the window starts mid-stream), does not reconcile the board's totals,
    /// and stores `spec`'s firings as its annotations.
    pub fn window(
        config: IngestConfig,
        source: impl Into<String>,
        spec: crate::window::WindowSpec,
    ) -> Self {
        let mut ingest = Self::new(config, source);
        ingest.window = Some(spec);
        ingest
    }

    /// The window's specification, to add firings or say how it ended before [`Ingest::finish`].
    pub fn window_spec_mut(&mut self) -> Option<&mut crate::window::WindowSpec> {
        match self.session.as_mut() {
            Some(s) => s.window.as_mut(),
            None => self.window.as_mut(),
        }
    }

    /// The open session's trace file.
    pub fn session_path(&self) -> Option<&Path> {
        self.session.as_ref().map(|s| s.path.as_path())
    }

    /// After each frame: the triggers' new firings and warnings become notices.
    fn triggers_after_frame(&mut self) {
        let Some(s) = self.session.as_mut() else {
            return;
        };
        let Some(t) = s.triggers.as_mut() else {
            return;
        };
        t.frame_done();
        for message in t.take_warnings() {
            self.notices.push(Notice::TriggerNote {
                source: self.source.clone(),
                message,
            });
        }
        for f in t.take_new() {
            self.notices.push(Notice::TriggerFired {
                source: self.source.clone(),
                board: s.hello.board.clone(),
                path: s.path.clone(),
                firing: f.clone(),
            });
        }
    }

    /// Why the collector refused the board's session (or stopped storing it) since the last call, if
    /// it did: a source that can answer the board (TCP) sends it as a `Refusal` frame and closes.
    pub fn take_refusal(&mut self) -> Option<(RefusalReason, String)> {
        self.refusal.take()
    }

    fn refuse(&mut self, reason: RefusalReason, message: String) {
        self.refusal.get_or_insert((reason, message));
    }

    /// Starts at most `per_minute` sessions in any minute: a link announcing new sessions faster (a
    /// flood of `Hello`s, each of which would be a trace file) has the extra ones refused — counted,
    /// said in a notice, their frames dropped up to the next accepted `Hello`.
    pub fn limit_sessions(&mut self, per_minute: usize) {
        self.sessions_per_minute = Some(per_minute);
    }

    /// Also starts a session only when `window`, shared with the collector's other connections,
    /// has room for it: refused ones are counted and said as for [`Ingest::limit_sessions`].
    pub fn limit_sessions_shared(&mut self, window: SessionWindow) {
        self.shared_sessions = Some(window);
    }

    /// `Hello`s refused by [`Ingest::limit_sessions`] or [`Ingest::limit_sessions_shared`].
    pub fn sessions_refused(&self) -> u64 {
        self.sessions_refused
    }

    /// Whether a session has started on this stream (one is open, or one ended).
    pub fn has_had_session(&self) -> bool {
        self.session.is_some() || !self.reports.is_empty()
    }

    /// `Hello`s refused for a missing or wrong token ([`IngestConfig::token`]).
    pub fn sessions_unauthorised(&self) -> u64 {
        self.sessions_unauthorised
    }

    /// Whether the session rate limits let one more session start now (and if so, counts it in
    /// both), or which one refuses it.
    fn may_start_session(&mut self) -> std::result::Result<(), RateRefusal> {
        let now = Instant::now();
        if let Some(limit) = self.sessions_per_minute {
            while self
                .session_starts
                .front()
                .is_some_and(|t| now.duration_since(*t) >= std::time::Duration::from_secs(60))
            {
                self.session_starts.pop_front();
            }
            if self.session_starts.len() >= limit {
                return Err(RateRefusal::Connection);
            }
        }
        if let Some(window) = &self.shared_sessions
            && !window.try_start()
        {
            return Err(RateRefusal::Collector);
        }
        if self.sessions_per_minute.is_some() {
            self.session_starts.push_back(now);
        }
        Ok(())
    }

    /// Notices since the last call.
    pub fn take_notices(&mut self) -> Vec<Notice> {
        std::mem::take(&mut self.notices)
    }

    /// Reports of the sessions ended so far.
    pub fn reports(&self) -> &[SessionReport] {
        &self.reports
    }

    /// Frames decoded or dropped while no session was open (before the first `Hello`).
    pub fn orphan_frames(&self) -> u64 {
        self.orphan_frames
    }

    /// Feeds bytes from the stream and ingests every complete frame.
    ///
    /// A store failure (a full disk, a file that cannot be created) ends the open session as interrupted
    /// (see [`SessionReport::interrupted`]) and the stream goes on: frames up to the next `Hello` are
    /// counted as dropped, and a later `Hello` starts a new trace if the store works again. So this never
    /// fails; the `Result` is kept for the sources' sake.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<()> {
        self.decoder.feed(bytes);
        let reserve = self.config.disk_reserve.clone();
        while let Some(result) = self.decoder.next_frame() {
            if self.window_cut_short {
                continue;
            }
            // Every write happens with the right to write; once the reserve is spent, the open
            // session is closed first (outside it: the close is what the freed room is for).
            let mut writing = reserve.enter();
            if writing.is_none() {
                self.close_if_disk_full();
                if self.window_cut_short {
                    // A saved window closed now: this frame and the rest are not fed to it.
                    continue;
                }
                writing = reserve.enter();
            }
            let handled = match result {
                Ok(decoded) => {
                    self.frame_offset = decoded.offset;
                    let handled = self.frame(decoded.frame);
                    self.triggers_after_frame();
                    handled
                }
                Err(e) => {
                    self.frame_offset = match &e {
                        DecodeError::Dropped { offset, .. }
                        | DecodeError::UnsupportedVersion { offset, .. } => *offset,
                        _ => self.decoder.offset(),
                    };
                    self.dropped(e)
                }
            };
            drop(writing);
            self.guard(handled);
        }
        self.tick()
    }

    /// Commits what is buffered if the commit interval has passed (call it when the link is idle).
    pub fn tick(&mut self) -> Result<()> {
        let reserve = self.config.disk_reserve.clone();
        let Some(writing) = reserve.enter() else {
            self.close_if_disk_full();
            return Ok(());
        };
        let committed = match self.session.as_mut() {
            Some(s) => s.writer.maybe_commit().map(|_| ()).map_err(Into::into),
            None => Ok(()),
        };
        drop(writing);
        self.guard(committed);
        Ok(())
    }

    /// The stream ended (EOF, disconnect, shutdown): a partial frame is counted, an open session is closed
    /// as incomplete. Returns every session report of the stream.
    pub fn finish(mut self) -> Result<(Vec<SessionReport>, Vec<Notice>)> {
        let cut = self
            .decoder
            .truncated_events()
            .map(|h| (h.cpu, h.first_seq, h.count));
        if let Some(e) = self.decoder.finish() {
            let truncated = matches!(
                e,
                DecodeError::Dropped {
                    reason: socscope_wire::decode::DropReason::Truncated,
                    ..
                }
            );
            let dropped = self.dropped(e);
            self.guard(dropped);
            // The records of a last frame cut off are counted lost, not only its bytes.
            if truncated && let Some(s) = self.session.as_mut() {
                let counted = s.recon.cut_off(cut, &mut s.writer);
                match counted {
                    Ok(n) => s.records_cut_off = n,
                    Err(e) => self.guard(Err(e.into())),
                }
            }
        }
        let reserve = self.config.disk_reserve.clone();
        let writing = reserve.enter();
        if writing.is_none() {
            self.close_if_disk_full();
        }
        let ended = self.end_session(false, self.decoder.offset());
        drop(writing);
        self.guard(ended);
        let unattributed = self.pending_records + self.orphan_records;
        if unattributed > 0 {
            self.notices.push(Notice::FrameDropped {
                source: self.source.clone(),
                message: format!(
                    "{unattributed} records arrived without a readable Hello of their session: not stored"
                ),
            });
        }
        // Drops while no session was open are said one by one up to REPORTED_DROPS, and no trace counts
        // those after the last session: their total is said once. A stream that held no session at all
        // (garbage, a peer that is no board) gets its bytes said too, as the decoder counted them: one
        // notice per oversized run says only the bytes up to the limit, not the tail it skipped.
        let drops = self.orphan_drops;
        if drops > 0 && (drops > REPORTED_DROPS || !self.has_had_session()) {
            let stats = self.decoder.stats();
            let said = if drops > REPORTED_DROPS {
                format!(", the first {REPORTED_DROPS} said above")
            } else {
                String::new()
            };
            let message = if self.has_had_session() {
                format!("{drops} frames or fragments dropped while no session was open{said}")
            } else {
                format!(
                    "no session on this stream: {} bytes received, {} of them dropped in {drops} frames or fragments{said}; not a socscope board?",
                    stats.bytes, stats.dropped_bytes
                )
            };
            self.notices.push(Notice::FrameDropped {
                source: self.source.clone(),
                message,
            });
        }
        Ok((self.reports, self.notices))
    }

    /// Another session found the disk full and freed the reserve: the open session stops writing and is
    /// closed now, in the room freed, before the disk fills up again.
    fn close_if_disk_full(&mut self) {
        if self.session.is_some() && self.config.disk_reserve.is_spent() {
            let dir = self.config.dir.clone();
            let error = match self.config.disk_reserve.low_room() {
                Some((free, headroom)) => CollectorError::DiskNearlyFull {
                    dir,
                    free,
                    headroom,
                },
                None => CollectorError::DiskFull { dir },
            };
            self.interrupt_session(&error);
        }
    }

    /// Ends the open session as interrupted when handling a frame failed in the store.
    fn guard(&mut self, result: Result<()>) {
        if let Err(e) = result {
            self.interrupt_session(&e);
        }
    }

    /// The store failed under the open session (or while starting one): the trace keeps what it
    /// committed, is closed as interrupted, and the operator is told what happened and what was lost.
    fn interrupt_session(&mut self, error: &CollectorError) {
        let full = self.disk_is_full(error);
        self.refuse(
            RefusalReason::Store,
            format!("the collector cannot store the session: {error}"),
        );
        let Some(mut s) = self.session.take() else {
            if self.window_cut_short {
                return;
            }
            self.orphan_frames += 1;
            self.notices.push(Notice::FrameDropped {
                source: self.source.clone(),
                message: format!(
                    "no trace could be started: {error}; the session's frames are dropped"
                ),
            });
            return;
        };
        self.window_cut_short |= s.window.is_some();
        // The disk was found (nearly) full while this writer still works: what it holds — the batch
        // since its last commit, the states still open — is committed first, while the room left
        // outside the freed reserve covers it (the reserve stays for the closes). Else it is given
        // up below, and the last commit is what the trace keeps.
        if full && s.writer.failed().is_none() && self.config.disk_reserve.last_batch_fits() {
            let _ = s.writer.keep_wal_on_close();
            let last = self
                .final_stats(&mut s, self.frame_offset)
                .and_then(|()| s.writer.commit().map_err(Into::into));
            if let Err(e) = last {
                tracing::warn!(
                    trace = %s.path.display(),
                    "the last batch could not be committed on the full disk: {e}"
                );
            }
        }
        let st = s.recon.stats();
        let end = SessionEnd {
            records: st.records_by_type.values().sum(),
            lost_on_board: st.lost_on_board,
            lost_in_transit: st.lost_in_transit,
            decoded_until: s.recon.last_ts(),
            hello: s.hello,
            path: s.path,
            db_file: s.db_file,
            started: s.started,
            dropped_frames: s.dropped_frames,
        };
        // On a full disk the writer gives up what it had not committed (at most one commit interval)
        // and leaves its WAL as it is: the room freed is for closing the traces, and folding the WAL
        // in would take it. Otherwise dropping it commits what it can. A writer whose own write
        // failed has rolled back already and writes nothing more either way.
        if full {
            let _ = s.writer.keep_wal_on_close();
            s.writer.abandon();
        } else {
            drop(s.writer);
        }
        self.report_interrupted(end, error);
    }

    /// Whether `error` (or another session before it) found the disk full; if so, the disk reserve is
    /// freed (once) so that the open traces can be closed.
    fn disk_is_full(&self, error: &CollectorError) -> bool {
        let full = error.is_disk_full() || self.config.disk_reserve.is_spent();
        if full && self.config.disk_reserve.release() {
            tracing::warn!(
                dir = %self.config.dir.display(),
                bytes = self.config.disk_reserve.size(),
                "the disk is full: the disk reserve is freed to close the open traces"
            );
        }
        full
    }

    /// Closes a trace whose writer is gone as interrupted, registers it and reports the session.
    fn report_interrupted(&mut self, end: SessionEnd, error: &CollectorError) {
        let SessionEnd {
            hello,
            path,
            db_file,
            started,
            dropped_frames,
            records,
            lost_on_board,
            lost_in_transit,
            decoded_until,
        } = end;
        let reason = format!("the collector could not write the trace: {error}");
        let full = self.disk_is_full(error);
        let repaired = if full {
            socscope_tracedb::repair_on_full_disk(&path, &reason)
        } else {
            socscope_tracedb::repair(&path, &reason)
        };
        let (events, detail) = match repaired {
            Ok(socscope_tracedb::RepairOutcome::Repaired(r)) => (
                r.events,
                format!(
                    "closed as interrupted with its {} committed events",
                    r.events
                ),
            ),
            Ok(other) => (0, format!("left as found ({other:?})")),
            Err(e) => (
                0,
                format!(
                    "still marked live ({e}); the next `socscope collect` on the directory or `socscope repair` closes it"
                ),
            ),
        };
        let _ = register(&self.config.dir, &db_file);
        let message = format!(
            "{reason}; {records} records decoded, the trace {detail}; frames up to the next Hello are dropped"
        );
        let report = SessionReport {
            source: self.source.clone(),
            board: hello.board.clone(),
            path,
            complete: false,
            records,
            events,
            lost_on_board,
            lost_in_transit,
            dropped_frames,
            wall_seconds: started.elapsed().as_secs_f64(),
            trace_seconds: 0.0,
            decoded_until_seconds: decoded_until as f64 / 1e9,
            interrupted: Some(message),
        };
        self.notices.push(Notice::SessionEnded(report.clone()));
        self.reports.push(report);
    }

    fn dropped(&mut self, e: DecodeError) -> Result<()> {
        let key = drop_reason_key(&e);
        let (len, version) = match &e {
            DecodeError::Dropped { len, .. } => (*len as u64, false),
            DecodeError::UnsupportedVersion { .. } => (0, true),
            _ => (0, false),
        };
        if version {
            // The board's session cannot be read: close the current trace and say what to upgrade.
            self.end_session(false, self.frame_offset)?;
            self.orphan_frames += 1;
            self.refuse(RefusalReason::Version, e.to_string());
            self.notices.push(Notice::VersionRejected {
                source: self.source.clone(),
                message: e.to_string(),
            });
            return Ok(());
        }
        match self.session.as_mut() {
            Some(s) => {
                *s.drops.entry(key).or_insert(0) += 1;
                s.dropped_frames += 1;
                s.dropped_bytes += len;
                if s.dropped_frames <= REPORTED_DROPS {
                    self.notices.push(Notice::FrameDropped {
                        source: self.source.clone(),
                        message: format!("{} ({})", e, s.hello.board),
                    });
                }
            }
            None => {
                self.orphan_frames += 1;
                self.orphan_drops += 1;
                if self.orphan_frames <= REPORTED_DROPS {
                    // Frames of a rejected session were explained by its `VersionRejected` notice.
                    let context = if key == "session_rejected" {
                        "rejected session"
                    } else {
                        "before any Hello"
                    };
                    self.notices.push(Notice::FrameDropped {
                        source: self.source.clone(),
                        message: format!("{e} ({context})"),
                    });
                }
            }
        }
        Ok(())
    }

    fn frame(&mut self, frame: Frame) -> Result<()> {
        if let Frame::Hello(mut hello) = frame {
            let names_truncated = self.cut_names(&mut hello);
            if let Some(s) = self.session.as_mut()
                && s.hello.board == hello.board
                && s.hello.session_id == hello.session_id
                && s.hello.tick_rate_hz == hello.tick_rate_hz
                && s.hello.cpu_count == hello.cpu_count
            {
                // Wire version 2 repeats the open session's Hello (and then its dictionary) now and then:
                // the same session goes on, on its first Hello's clock.
                s.frames += 1;
                s.hellos_repeated += 1;
                return Ok(());
            }
            let ended = self.end_session(false, self.frame_offset);
            self.guard(ended);
            if let Some(token) = &self.config.token
                && !same_secret(token.as_bytes(), hello.token.as_bytes())
            {
                self.sessions_unauthorised += 1;
                self.orphan_frames += 1;
                // What was kept for this session is not stored either.
                self.orphan_records += std::mem::take(&mut self.pending_records);
                self.pending.clear();
                self.pending_bytes = 0;
                self.pending_dict = None;
                self.pending_dict_stale = false;
                self.refuse(
                    RefusalReason::Token,
                    format!(
                        "{} token in the Hello: this collector requires its --token",
                        if hello.token.is_empty() {
                            "no"
                        } else {
                            "a wrong"
                        }
                    ),
                );
                if self.sessions_unauthorised <= REPORTED_DROPS {
                    self.notices.push(Notice::FrameDropped {
                        source: self.source.clone(),
                        message: format!(
                            "Hello of board '{}' refused: {} token (the board's --token-file or --token); {} refused so far, their frames are dropped",
                            crate::naming::printable(&hello.board),
                            if hello.token.is_empty() { "no" } else { "a wrong" },
                            self.sessions_unauthorised
                        ),
                    });
                }
                return Ok(());
            }
            if let Err(why) = self.may_start_session() {
                self.sessions_refused += 1;
                self.orphan_frames += 1;
                self.refuse(
                    RefusalReason::SessionLimit,
                    match why {
                        RateRefusal::Connection => {
                            "too many sessions on this connection within a minute"
                        }
                        RateRefusal::Collector => "too many new sessions within a minute",
                    }
                    .to_string(),
                );
                if self.sessions_refused <= REPORTED_DROPS {
                    let limit = match why {
                        RateRefusal::Connection => format!(
                            "more than {} sessions started on this connection within a minute (--max-sessions-per-minute)",
                            self.sessions_per_minute.unwrap_or(0)
                        ),
                        RateRefusal::Collector => format!(
                            "more than {} sessions started by all connections within a minute (--max-new-sessions-per-minute)",
                            self.shared_sessions
                                .as_ref()
                                .map_or(0, SessionWindow::per_minute)
                        ),
                    };
                    self.notices.push(Notice::FrameDropped {
                        source: self.source.clone(),
                        message: format!(
                            "Hello refused: {limit}; {} refused so far, their frames are dropped",
                            self.sessions_refused
                        ),
                    });
                }
                return Ok(());
            }
            self.start_session(hello, names_truncated)?;
            return self.replay_pending();
        }
        let Some(s) = self.session.as_mut() else {
            self.keep_pending(frame);
            return Ok(());
        };
        s.frames += 1;
        let dict = self.decoder.dictionary();
        match frame {
            Frame::Hello(_) => {}
            Frame::Dictionary(items) => {
                let items = s.new_declarations(items);
                let mut sink = Observed::new(&mut s.writer, s.triggers.as_mut());
                s.recon.dictionary(&items, dict, &mut sink)?
            }
            Frame::Events(batch) => {
                let mut sink = Observed::new(&mut s.writer, s.triggers.as_mut());
                s.recon.batch(&batch, dict, &mut sink)?;
                if let Some(t) = s.triggers.as_mut()
                    && !std::mem::replace(&mut s.records_seen, true)
                {
                    t.check_names();
                }
            }
            Frame::Loss(l) => {
                let mut sink = Observed::new(&mut s.writer, s.triggers.as_mut());
                s.recon.loss(l.cpu, l.first_seq, l.count, &mut sink)?
            }
            Frame::Heartbeat(h) => {
                s.board_totals = Some((h.records, h.dropped));
                if let Some(t) = s.triggers.as_mut() {
                    t.heartbeat(s.recon.ticks_to_ns(h.ticks));
                }
            }
            Frame::CpuTotal(t) => s.recon.cpu_total(t.cpu, t.sequences),
            Frame::Window(w) => {
                if s.recon.window(w.cpu, w.first_seq, w.overwritten) {
                    s.writer.set_param(
                        socscope_tracedb::CAPTURE_WINDOW_PARAM,
                        &ParamValue::String(socscope_tracedb::POST_MORTEM_RING.into()),
                    )?;
                }
            }
            Frame::Bye(b) => {
                s.board_totals = Some((b.records, b.dropped));
                // A window of the stream cannot account for the whole session's totals.
                if s.window.is_none() {
                    let mut sink = Observed::new(&mut s.writer, s.triggers.as_mut());
                    s.recon.reconcile_totals(b.records, b.dropped, &mut sink)?;
                }
                self.triggers_after_frame();
                // The session's bytes end with this frame.
                let end = self.decoder.offset();
                self.end_session(true, end)?;
            }
        }
        Ok(())
    }

    /// A frame while no session is open: kept (bounded) for the session whose `Hello` comes next, or
    /// counted as lost.
    fn keep_pending(&mut self, frame: Frame) {
        self.orphan_frames += 1;
        let size = approx_size(&frame);
        if self.pending_bytes + size > MAX_PENDING_BYTES || self.pending.len() >= MAX_PENDING_FRAMES
        {
            if let Frame::Events(batch) = &frame {
                self.orphan_records += batch.len() as u64;
            }
            return;
        }
        if matches!(
            frame,
            Frame::Events(_) | Frame::Dictionary(_) | Frame::Loss(_)
        ) {
            self.pending_bytes += size;
        }
        match frame {
            Frame::Events(batch)
                if self.pending_records + batch.len() as u64 <= MAX_PENDING_RECORDS =>
            {
                self.pending_records += batch.len() as u64;
                if self.pending_dict_stale {
                    // The dictionary these records were decoded with (copied once per run of
                    // declarations, not per declaration).
                    self.pending_dict = Some(self.decoder.dictionary().clone());
                    self.pending_dict_stale = false;
                }
                self.pending.push(Frame::Events(batch));
            }
            Frame::Events(batch) => self.orphan_records += batch.len() as u64,
            Frame::Dictionary(items) => {
                self.pending_dict_stale = true;
                self.pending.push(Frame::Dictionary(items));
            }
            Frame::Loss(l) => self.pending.push(Frame::Loss(l)),
            Frame::Window(w) => self.pending.push(Frame::Window(w)),
            Frame::Bye(_) => {
                // A session ended whose Hello never arrived: what was kept for it belongs to no trace.
                self.orphan_records += self.pending_records;
                self.pending.clear();
                self.pending_records = 0;
                self.pending_bytes = 0;
                self.pending_dict = None;
                self.pending_dict_stale = false;
            }
            Frame::Hello(_) | Frame::Heartbeat(_) | Frame::CpuTotal(_) => {}
        }
    }

    /// Ingests the frames kept before the session's `Hello` into it, on the dictionary they were decoded
    /// with.
    fn replay_pending(&mut self) -> Result<()> {
        let pending = std::mem::take(&mut self.pending);
        let records = std::mem::take(&mut self.pending_records);
        self.pending_bytes = 0;
        // Declarations kept after the last kept batch are not in this copy (the Hello reset the
        // decoder's), but no kept record needs them, and the repeated dictionary declares them again.
        self.pending_dict_stale = false;
        let dict = self.pending_dict.take();
        let (lost, drops) = (
            std::mem::take(&mut self.orphan_records),
            std::mem::take(&mut self.orphan_drops),
        );
        let Some(s) = self.session.as_mut() else {
            // No trace could be started: what was kept is lost with the session.
            self.orphan_records += records + lost;
            return Ok(());
        };
        s.records_before_hello = records;
        s.records_lost_before_hello = lost;
        s.frames_dropped_before_hello = drops;
        let builtins = Dictionary::default();
        let dict = dict.as_ref().unwrap_or(&builtins);
        for frame in pending {
            s.frames += 1;
            match frame {
                Frame::Dictionary(items) => {
                    let items = s.new_declarations(items);
                    let mut sink = Observed::new(&mut s.writer, s.triggers.as_mut());
                    s.recon.dictionary(&items, dict, &mut sink)?
                }
                Frame::Events(batch) => {
                    let mut sink = Observed::new(&mut s.writer, s.triggers.as_mut());
                    s.recon.batch(&batch, dict, &mut sink)?
                }
                Frame::Loss(l) => {
                    let mut sink = Observed::new(&mut s.writer, s.triggers.as_mut());
                    s.recon.loss(l.cpu, l.first_seq, l.count, &mut sink)?
                }
                Frame::Window(w) => {
                    if s.recon.window(w.cpu, w.first_seq, w.overwritten) {
                        s.writer.set_param(
                            socscope_tracedb::CAPTURE_WINDOW_PARAM,
                            &ParamValue::String(socscope_tracedb::POST_MORTEM_RING.into()),
                        )?;
                    }
                }
                Frame::Hello(_) | Frame::Heartbeat(_) | Frame::Bye(_) | Frame::CpuTotal(_) => {}
            }
        }
        Ok(())
    }

    /// Cuts the `Hello`'s names to the configured length; returns how many were cut (each said once).
    fn cut_names(&mut self, hello: &mut HelloInfo) -> u64 {
        let max = self.config.max_name_chars;
        let mut names_truncated = 0u64;
        for (what, name) in [
            ("board", &mut hello.board),
            ("SoC", &mut hello.soc),
            ("OS", &mut hello.os),
            ("application", &mut hello.application),
            ("agent version", &mut hello.agent_version),
        ] {
            let chars = name.chars().count();
            if cut_name(name, max) {
                names_truncated += 1;
                self.notices.push(Notice::FrameDropped {
                    source: self.source.clone(),
                    message: format!(
                        "the Hello's {what} name has {chars} characters: cut to the first {max} (--max-name-chars)"
                    ),
                });
            }
        }
        names_truncated
    }

    fn start_session(&mut self, hello: HelloInfo, names_truncated: u64) -> Result<()> {
        std::fs::create_dir_all(&self.config.dir).map_err(|e| CollectorError::Io {
            path: self.config.dir.clone(),
            source: e,
        })?;
        let now = SystemTime::now();
        let window = self.window.take();
        let unix_ns = window.as_ref().map_or_else(
            || {
                now.duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos().min(i64::MAX as u128) as i64)
            },
            |w| w.start_unix_ns,
        );
        let mut meta = TraceHeader {
            trace_type: "socscope-live".into(),
            board: hello.board.clone(),
            soc: hello.soc.clone(),
            os: hello.os.clone(),
            application: hello.application.clone(),
            cpus: u32::from(hello.cpu_count),
            tick_rate_hz: hello.tick_rate_hz,
            start_unix_ns: unix_ns,
            description: format!("captured from {}", self.source),
            processed: false,
            params: vec![
                (
                    "agent_version".into(),
                    ParamValue::String(hello.agent_version.clone()),
                ),
                (
                    "wire_version".into(),
                    ParamValue::Unsigned(u64::from(hello.wire_version)),
                ),
                ("session_id".into(), ParamValue::Unsigned(hello.session_id)),
                ("source".into(), ParamValue::String(self.source.clone())),
            ],
        };
        if let Some(w) = &window {
            meta.description = w.description.clone();
            meta.params.extend(w.params.iter().cloned());
        }
        // Room to close this trace even if the disk fills up under it; none: no trace is started.
        self.config
            .disk_reserve
            .ensure()
            .map_err(|source| CollectorError::NoRoomForReserve {
                path: self.config.disk_reserve.path().to_path_buf(),
                size: self.config.disk_reserve.size(),
                source,
            })?;
        let (db_file, path, mut writer) = create_trace(
            &self.config.dir,
            &trace_file_name(&hello.board, hello.session_id, unix_ns),
            &meta,
            self.config.commit_interval,
        )?;
        if let Some(shelf) = window.as_ref().and_then(|w| w.dictionaries.clone()) {
            writer.share_dictionaries(shelf);
        }
        let mut recon = Reconstructor::new(hello.tick_rate_hz, hello.start_ticks, hello.cpu_count);
        recon.set_syscall_abi(crate::syscalls::SyscallAbi::for_board(
            &hello.soc, &hello.os,
        ));
        if window.is_none() {
            recon.sequences_start_at(0);
        }
        // The same session again after its link dropped: its sequence numbers go on from there.
        let resumed = self.config.resume.take(&hello.board, hello.session_id);
        if let Some(next) = &resumed {
            recon.resume_sequences(next);
        }
        // A saved window has no rules of its own, but an engine with none learns its producers' ids,
        // which its firings (found by the watcher's reconstruction, numbered differently) are given.
        let mut triggers = match (&self.config.triggers, &window) {
            (Some(t), _) => Some(t.engine()),
            (None, Some(_)) => Some(crate::trigger::TriggerSet::default().engine()),
            (None, None) => None,
        };
        let started = recon
            .start(
                self.decoder.dictionary(),
                &mut Observed::new(&mut writer, triggers.as_mut()),
            )
            .and_then(|()| writer.commit())
            .map_err(CollectorError::from)
            .and_then(|()| register(&self.config.dir, &db_file));
        if let Err(e) = started {
            // Not left live behind us: closed as interrupted (or by the next repair if even that fails).
            let reason = format!("the collector could not start the trace: {e}");
            if self.disk_is_full(&e) {
                let _ = writer.keep_wal_on_close();
                drop(writer);
                let _ = socscope_tracedb::repair_on_full_disk(&path, &reason);
            } else {
                drop(writer);
                let _ = socscope_tracedb::repair(&path, &reason);
            }
            let _ = register(&self.config.dir, &db_file);
            return Err(e);
        }
        self.notices.push(Notice::SessionStarted {
            source: self.source.clone(),
            board: hello.board.clone(),
            path: path.clone(),
        });
        self.session = Some(ActiveSession {
            resumed: resumed.is_some(),
            hello,
            writer,
            recon,
            path,
            db_file,
            started: Instant::now(),
            drops: BTreeMap::new(),
            dropped_frames: 0,
            dropped_bytes: 0,
            decoder_dropped_at_start: self.decoder.stats().dropped_bytes,
            frames: 0,
            bytes_at_start: self.frame_offset,
            board_totals: None,
            names_truncated,
            declared: std::collections::HashSet::new(),
            hellos_repeated: 0,
            records_before_hello: 0,
            records_lost_before_hello: 0,
            frames_dropped_before_hello: 0,
            records_cut_off: 0,
            records_seen: false,
            triggers,
            window,
        });
        Ok(())
    }

    /// Closes the open session, if any, whose bytes end at stream offset `end`.
    fn end_session(&mut self, complete: bool, end: u64) -> Result<()> {
        let Some(mut s) = self.session.take() else {
            return Ok(());
        };
        if !complete {
            self.config.resume.remember(
                &s.hello.board,
                s.hello.session_id,
                s.recon.next_sequences(),
            );
        }
        // Everything fallible that can be retried as an interruption happens before `finish`, which
        // consumes the writer.
        if let Err(e) = self
            .final_stats(&mut s, end)
            .and_then(|()| s.writer.commit().map_err(Into::into))
        {
            self.session = Some(s);
            return Err(e);
        }
        let st = s.recon.stats();
        let records: u64 = st.records_by_type.values().sum();
        // A saved window is complete when all of it arrived, whatever became of the board's session.
        let complete = s
            .window
            .as_ref()
            .map_or(complete, |w| w.cut_short.is_none());
        let info = match s.writer.finish(complete) {
            Ok(info) => info,
            Err(e) => {
                self.report_interrupted(
                    SessionEnd {
                        hello: s.hello,
                        path: s.path,
                        db_file: s.db_file,
                        started: s.started,
                        dropped_frames: s.dropped_frames,
                        records,
                        lost_on_board: st.lost_on_board,
                        lost_in_transit: st.lost_in_transit,
                        decoded_until: s.recon.last_ts(),
                    },
                    &e.into(),
                );
                return Ok(());
            }
        };
        register(&self.config.dir, &s.db_file)?;
        let report = SessionReport {
            source: self.source.clone(),
            board: s.hello.board.clone(),
            path: s.path,
            complete,
            records,
            events: info.event_count,
            lost_on_board: st.lost_on_board,
            lost_in_transit: st.lost_in_transit,
            dropped_frames: s.dropped_frames,
            wall_seconds: s.started.elapsed().as_secs_f64(),
            trace_seconds: info.duration() as f64 / 1e9,
            decoded_until_seconds: s.recon.last_ts() as f64 / 1e9,
            interrupted: None,
        };
        self.notices.push(Notice::SessionEnded(report.clone()));
        self.reports.push(report);
        Ok(())
    }

    /// Closes the reconstruction and writes the session's ingest statistics (not yet committed).
    fn final_stats(&self, s: &mut ActiveSession, end: u64) -> Result<()> {
        s.recon
            .finish(&mut Observed::new(&mut s.writer, s.triggers.as_mut()))?;
        crate::window::store_trigger_stats(&mut s.writer, s.triggers.as_ref(), s.window.as_ref())?;
        let st = s.recon.stats();
        let records: u64 = st.records_by_type.values().sum();
        let mut stats = vec![
            (
                "bytes",
                end.saturating_sub(s.bytes_at_start) as i64,
                "bytes received in this session",
            ),
            ("frames", s.frames as i64, "frames decoded"),
            (
                "resumed_session",
                i64::from(s.resumed),
                "1: the board reconnected and continued a session cut off before Bye (another trace holds its start)",
            ),
            ("records", records as i64, "raw records decoded"),
            (
                "events",
                st.events as i64,
                "events stored after state reconstruction",
            ),
            (
                "frames_dropped",
                s.dropped_frames as i64,
                "frames dropped by the decoder (all reasons)",
            ),
            (
                "bytes_dropped",
                s.dropped_bytes.max(
                    self.decoder
                        .stats()
                        .dropped_bytes
                        .saturating_sub(s.decoder_dropped_at_start),
                ) as i64,
                "bytes in dropped frames (the tail of an oversized frame included)",
            ),
            (
                "records_lost_on_board",
                st.lost_on_board as i64,
                "records the agent dropped (Loss frames)",
            ),
            (
                "records_lost_in_transit",
                st.lost_in_transit as i64,
                "sequence numbers never received (frames lost on the link)",
            ),
            (
                "sequence_overlaps",
                st.sequence_overlaps as i64,
                "batches starting before the expected sequence number",
            ),
            (
                "hellos_repeated",
                s.hellos_repeated as i64,
                "Hellos repeating the open session's (wire version 2 resynchronisation), not new sessions",
            ),
            (
                "records_before_hello",
                s.records_before_hello as i64,
                "records that arrived before the session's first readable Hello, kept and stored in it",
            ),
            (
                "records_lost_before_hello",
                s.records_lost_before_hello as i64,
                "records that arrived while no session was open and could not be kept (bound reached, or their session ended unseen)",
            ),
            (
                "frames_dropped_before_hello",
                s.frames_dropped_before_hello as i64,
                "frames the decoder dropped while no session was open (a damaged Hello, say)",
            ),
            (
                "names_truncated",
                s.names_truncated as i64,
                "names of the Hello cut to the longest kept (--max-name-chars)",
            ),
            (
                "duplicate_records",
                st.duplicate_records as i64,
                "records whose sequence number had arrived already (a section of the stream seen twice): dropped, stored once",
            ),
            (
                "records_cut_off",
                s.records_cut_off as i64,
                "records of the last frame, cut off by the end of the stream (from its header; part of records_lost_in_transit)",
            ),
            (
                "records_lost_at_end",
                st.lost_at_end as i64,
                "records the board's Bye totals count that never arrived after a CPU's last batch (part of records_lost_in_transit)",
            ),
            (
                "clipped_open_states",
                st.clipped_open_states as i64,
                "states still open at the end or missing their exit, closed at the capture edge",
            ),
            (
                "clipped_exits",
                st.clipped_exits as i64,
                "exits or switch-outs whose entry preceded the capture, started at the capture edge",
            ),
            (
                "clipped_wakeups",
                st.clipped_wakeups as i64,
                "wake-ups whose target never ran, ended at the capture edge",
            ),
            (
                "switch_mismatches",
                st.switch_mismatches as i64,
                "context switches whose previous thread was not the running one",
            ),
            (
                "unknown_frees",
                st.unknown_frees as i64,
                "kfree of pointers no kmalloc announced",
            ),
            (
                "closed_at_exit",
                st.closed_at_exit as i64,
                crate::reconstruct::CLOSED_AT_EXIT,
            ),
        ];
        if st.windows > 0 {
            stats.push((
                "records_overwritten_on_board",
                st.overwritten_on_board as i64,
                "records the board's post-mortem ring overwrote before its dump: outside the window, not lost",
            ));
        }
        if let Some((board_records, board_dropped)) = s.board_totals {
            stats.push((
                "board_records",
                board_records as i64,
                "records the agent accepted (last Heartbeat or Bye)",
            ));
            stats.push((
                "board_dropped",
                board_dropped as i64,
                "records the agent dropped (last Heartbeat or Bye)",
            ));
        }
        for (name, value, description) in stats {
            s.writer.set_ingest_stat(&IngestStat {
                name: name.into(),
                value,
                description: description.into(),
            })?;
        }
        for (reason, count) in &s.drops {
            s.writer.set_ingest_stat(&IngestStat {
                name: format!("frames_dropped.{reason}"),
                value: *count as i64,
                description: format!("frames dropped by the decoder: {reason}"),
            })?;
        }
        let dict = self.decoder.dictionary();
        let mut by_type: Vec<(u16, u64)> =
            st.records_by_type.iter().map(|(k, v)| (*k, *v)).collect();
        by_type.sort_unstable();
        for (type_id, count) in by_type {
            let name = dict
                .get(type_id)
                .map_or_else(|| format!("type{type_id}"), |t| t.name.clone());
            s.writer.set_ingest_stat(&IngestStat {
                name: format!("records.{name}"),
                value: count as i64,
                description: format!("raw records of wire type {type_id}"),
            })?;
        }
        Ok(())
    }
}

impl ActiveSession {
    /// The items of a `Dictionary` frame not declared before in this session.
    fn new_declarations(
        &mut self,
        mut items: Vec<socscope_wire::decode::OwnedDictEntry>,
    ) -> Vec<socscope_wire::decode::OwnedDictEntry> {
        use socscope_wire::decode::OwnedDictEntry;
        items.retain(|item| {
            self.declared.insert(match item {
                OwnedDictEntry::Producer(p) => (false, p.id),
                OwnedDictEntry::EventType(t) => (true, u32::from(t.id)),
            })
        });
        items
    }
}

/// What is left of a session whose trace could not be finished normally.
struct SessionEnd {
    hello: HelloInfo,
    path: PathBuf,
    db_file: String,
    started: Instant,
    dropped_frames: u64,
    records: u64,
    lost_on_board: u64,
    lost_in_transit: u64,
    decoded_until: socscope_tracedb::Timestamp,
}

/// Registers (or refreshes) a trace file in the catalog of `dir`.
///
/// Serialised across the process: the catalog is created on first use, and two sessions starting together
/// (two boards on TCP, serial ports and replays) must not both try to create it, or one sees the other's
/// half-initialised file.
fn register(dir: &Path, db_file: &str) -> Result<()> {
    static CATALOG: Mutex<()> = Mutex::new(());
    let _one_at_a_time = CATALOG
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    Catalog::open(dir)?.register_file(db_file)?;
    Ok(())
}

/// How many names a new trace tries (`base.db`, `base-2.db`, …) before giving up.
const NAME_ATTEMPTS: u32 = 10_000;

/// Creates a new trace `base.db` in `dir`, or `base-2.db`, `base-3.db`… when the name is taken — also
/// by another session creating it at the same instant (the store creates files exclusively); returns
/// (file name, full path, writer).
fn create_trace(
    dir: &Path,
    base: &str,
    meta: &TraceHeader,
    commit_interval: std::time::Duration,
) -> Result<(String, PathBuf, TraceWriter)> {
    for n in 1..=NAME_ATTEMPTS {
        let name = if n == 1 {
            format!("{base}.db")
        } else {
            format!("{base}-{n}.db")
        };
        let path = dir.join(&name);
        let config = socscope_tracedb::WriterConfig {
            commit_interval,
            ..socscope_tracedb::WriterConfig::default()
        };
        match TraceWriter::create_with(&path, meta, config) {
            Ok(writer) => return Ok((name, path, writer)),
            Err(socscope_tracedb::StoreError::AlreadyExists { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(CollectorError::Invalid(format!(
        "{}: {NAME_ATTEMPTS} trace files named {base}*.db exist already",
        dir.display()
    )))
}
