//! What a flight recorder hands on (see `flight.rs`): how a collector keeps the last seconds of every
//! board ([`FlightConfig`]), what makes a trace a saved window ([`WindowSpec`]), the triggers' counters
//! and firings written into the trace that holds them, and what the recorder did with a board's session
//! ([`WatchReport`]). The ingest that stores a window needs these and nothing of the recorder itself.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use socscope_tracedb::{
    AnalysisKind, AnalysisResult, IngestStat, ParamValue, SharedDictionaries, Timestamp,
    TraceWriter,
};

use crate::trigger::{
    Firing, TRIGGER_PARAM, TRIGGER_TOOL, TriggerEngine, firings_as_annotations, trigger_tag,
};

/// Default of [`FlightConfig::memory`]: 16 MiB per board.
pub const DEFAULT_FLIGHT_MEMORY: usize = 16 << 20;

/// How a collector keeps the last seconds of every board's stream.
#[derive(Clone, Debug)]
pub struct FlightConfig {
    /// How much of the stream is kept, in trace ns (`--flight-recorder SECONDS`).
    pub window: Timestamp,
    /// The most bytes one board's ring may take (`--flight-memory`); older segments go first.
    pub memory: usize,
    /// How much before a trigger a saved window starts, trace ns (`--pre`).
    pub pre: Timestamp,
    /// How long after a trigger a saved window goes on, trace ns (`--post`).
    pub post: Timestamp,
    /// The most windows the collector saves, all boards together (`--max-saves`); `None`: no limit.
    pub max_saves: Option<u64>,
    /// Windows saved so far, shared by every board of the collector.
    pub saves: Arc<AtomicU64>,
    /// Save each window on a thread of its own (the default); `false`: in the stream's thread, as
    /// when no thread can be started (the watch then waits while the window is stored).
    pub saver_thread: bool,
}

impl FlightConfig {
    /// A recorder of `window` ns saving `pre` ns before and `post` ns after each trigger.
    pub fn new(window: Timestamp, pre: Timestamp, post: Timestamp) -> Self {
        Self {
            window,
            memory: DEFAULT_FLIGHT_MEMORY,
            pre,
            post,
            max_saves: None,
            saves: Arc::default(),
            saver_thread: true,
        }
    }

    /// Takes one save from the budget; `false` when it is spent.
    pub(crate) fn take_save(&self) -> bool {
        self.saves
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (self.max_saves.is_none_or(|max| n < max)).then_some(n + 1)
            })
            .is_ok()
    }
}

/// What makes a trace a saved window: its description and parameters, the firings it holds, and how
/// it ended.
#[derive(Clone, Debug, Default)]
pub struct WindowSpec {
    /// Wall-clock start of the session the window comes from (so its times and date match a full
    /// capture's).
    pub start_unix_ns: i64,
    /// The trace's description.
    pub description: String,
    /// Trace parameters added to the usual ones.
    pub params: Vec<(String, ParamValue)>,
    /// The firings it holds (stored as its annotations).
    pub firings: Vec<Firing>,
    /// The window asked for, trace ns: `pre` before the first trigger to `post` after the last.
    pub start: Timestamp,
    /// End of the window asked for.
    pub end: Timestamp,
    /// Time of the oldest record the ring still had when the window was saved (later than `start`
    /// when the ring held less than `pre`).
    pub first_kept: Option<Timestamp>,
    /// Why the window ended before its end (the board said `Bye`, the link died), if it did.
    pub cut_short: Option<String>,
    /// The zstd dictionaries of the board's earlier windows, shared by all the windows of one watched
    /// session: a window takes them instead of training its own (see
    /// [`socscope_tracedb::SharedDictionaries`]); `None`: the window trains its own.
    pub dictionaries: Option<SharedDictionaries>,
}

/// Writes the triggers' counters and the `trigger` tag into a session's trace (not yet committed).
pub(crate) fn store_trigger_stats(
    writer: &mut TraceWriter,
    engine: Option<&TriggerEngine>,
    window: Option<&WindowSpec>,
) -> socscope_tracedb::Result<()> {
    let firings: Vec<Firing> = match (window, engine) {
        // The watcher numbered producers in its own reconstruction of the whole stream: the window's
        // are found by name.
        (Some(w), _) => w
            .firings
            .iter()
            .map(|f| Firing {
                producer: f
                    .producer
                    .and_then(|_| engine.and_then(|e| e.producer_named(&f.who))),
                ..f.clone()
            })
            .collect(),
        (None, Some(e)) => e.firings().to_vec(),
        (None, None) => return Ok(()),
    };
    let firings = firings.as_slice();
    // A window's engine has no rules (see `Ingest::window`): its counters are not the watcher's.
    let mut stats: Vec<(String, i64, String)> = match window {
        Some(_) => Vec::new(),
        None => engine.map(TriggerEngine::stats).unwrap_or_default(),
    };
    if let Some(w) = window {
        stats.push((
            "window_start_ns".into(),
            w.start,
            "start of the saved window asked for (trace ns): pre before the first trigger".into(),
        ));
        stats.push((
            "window_end_ns".into(),
            w.end,
            "end of the saved window asked for (trace ns): post after the last trigger".into(),
        ));
        stats.push((
            "window_triggers".into(),
            w.firings.len() as i64,
            "trigger firings in the window (annotations of this trace)".into(),
        ));
        stats.push((
            "window_pre_missing_ns".into(),
            w.first_kept.map_or(0, |t| (t - w.start).max(0)),
            "how much of the pre window the flight recorder no longer held (--flight-recorder or --flight-memory too small)".into(),
        ));
        stats.push((
            "window_cut_short".into(),
            i64::from(w.cut_short.is_some()),
            w.cut_short
                .clone()
                .unwrap_or_else(|| "1: the stream ended before the window's end".into()),
        ));
    }
    for (name, value, description) in stats {
        writer.set_ingest_stat(&IngestStat {
            name,
            value,
            description,
        })?;
    }
    if !firings.is_empty() {
        writer.set_param(TRIGGER_PARAM, &ParamValue::String(trigger_tag(firings)))?;
        save_firings(writer, firings)?;
    }
    Ok(())
}

/// Stores `firings` as one annotation result of the trace being written.
fn save_firings(writer: &mut TraceWriter, firings: &[Firing]) -> socscope_tracedb::Result<()> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos().min(i64::MAX as u128) as i64);
    writer.save_result(
        &AnalysisResult {
            id: 0,
            tool_id: None,
            tool_name: TRIGGER_TOOL.into(),
            kind: AnalysisKind::Annotation,
            date_unix_ns: now,
            description: format!(
                "triggers: {} firing(s) of {}",
                firings.len(),
                trigger_tag(firings)
            ),
        },
        &firings_as_annotations(firings),
    )?;
    Ok(())
}

/// What the flight recorder did with one board's session.
#[derive(Clone, Debug, PartialEq)]
pub struct WatchReport {
    /// Source.
    pub source: String,
    /// Board.
    pub board: String,
    /// Whether the board said `Bye`.
    pub complete: bool,
    /// Raw records decoded.
    pub records: u64,
    /// Records lost on the board.
    pub lost_on_board: u64,
    /// Records lost in transit.
    pub lost_in_transit: u64,
    /// Trigger firings (recorded, after rate limiting).
    pub firings: Vec<Firing>,
    /// The windows saved.
    pub saved: Vec<PathBuf>,
    /// Firings that found the save budget spent (`--max-saves`).
    pub not_saved: u64,
    /// Most bytes the ring held at once.
    pub peak_ring_bytes: usize,
    /// Times the stream waited for a window's saver, which had [`crate::flight::SAVE_QUEUE`] batches
    /// not yet stored (back-pressure: the stream slows, nothing is dropped).
    pub saver_waits: u64,
    /// Windows saved in the stream's own thread (no thread could be started for them, or
    /// [`FlightConfig::saver_thread`] is off).
    pub saved_inline: u64,
    /// Latest trace time seen.
    pub trace_seconds: f64,
}
