//! Triggers: rules a rig expresses (`state:irq@vsync>2ms`, `gap:running@vsync-cb>30ms`, `marker:underflow`,
//! `loss`, `reference:ref.db>0.4`) checked online on the reconstructed events of a session, plus external
//! triggers (`socscope trigger`, SIGUSR1). Each firing is an annotation of the trace it happened in (see
//! [`firings_as_annotations`]) and, with a flight recorder, what makes a window of the stream be saved.
//!
//! The engine sits in the decoding path as a [`Sink`] wrapper ([`Observed`]): it sees every event the
//! reconstruction emits, with a few hash look-ups per event, so it costs the ingest little.
//!
//! `state:` and `gap:` rules do not wait for the closing state or the late event: a state still open
//! `limit` after its start (a hang) and a producer with no new start `limit` after its last one fire as
//! soon as the stream's time says so, at `start + limit`. The stream's time is the latest record (or
//! `Heartbeat`) of any CPU, less a lag covering how far one CPU's batches arrive behind another's (the
//! agent sends a quiet CPU's partly filled block only once it is old): twice the worst lateness seen in
//! the session, at least [`MIN_JUDGE_LAG`]. So a state or gap is judged open at most that lag after the
//! deadline, and a CPU whose records are still on the board is not taken for a hang. When the state closes
//! or the late event comes after all, the firing is completed (its extent, its figure), not repeated.
//!
//! Start here: [`TriggerRule`] (parsing, with the position of what is wrong), [`TriggerSet`] (what a
//! collector is given), [`TriggerEngine`] (one session's state), [`Firing`].

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rustc_hash::{FxHashMap, FxHashSet};
use socscope_tracedb::{
    AnalysisData, Annotation, AnnotationType, Event, EventCategory, EventKind, EventType,
    LossRecord, ParamDef, ParamType, ParamValue, Producer, ProducerId, Result, Timestamp, TypeId,
    units,
};

use crate::reconstruct::Sink;

/// A trigger rule as given on the command line (`--trigger RULE`).
#[derive(Clone, Debug)]
pub struct TriggerRule {
    /// The rule as written: what annotations and the catalog tag name.
    pub text: String,
    /// What it checks.
    pub kind: RuleKind,
}

/// What a rule checks.
#[derive(Clone, Debug)]
pub enum RuleKind {
    /// A state of type `ty` (on producer `producer`, if given) that lasts more than `limit` ns.
    State {
        /// Store type name (`irq`, `running`, `syscall`, a board's own state type).
        ty: String,
        /// Producer name (`vsync`, `vsync-cb`), any producer when `None`.
        producer: Option<String>,
        /// Longest acceptable duration, ns.
        limit: i64,
    },
    /// Consecutive starts of events of type `ty` (on one producer) more than `limit` ns apart.
    Gap {
        /// Store type name.
        ty: String,
        /// Producer name, each producer on its own when `None`.
        producer: Option<String>,
        /// Longest acceptable gap between two starts, ns.
        limit: i64,
    },
    /// A punctual event (marker, user event) whose type name or one of whose text parameters matches.
    Marker(regex::Regex),
    /// Records lost on the board or in transit.
    Loss,
    /// The run departs from a reference trace by at least `score` (the compare engine's dissimilarity,
    /// computed online by a [`ProbeFactory`] the program supplies).
    Reference {
        /// The reference trace.
        trace: PathBuf,
        /// Score from which a window is a departure (0 to 1).
        score: f64,
    },
}

/// A rule that cannot be parsed: where and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("trigger rule `{text}`, at character {position}: {message}")]
pub struct RuleError {
    /// The rule as given.
    pub text: String,
    /// 1-based character position of what is wrong.
    pub position: usize,
    /// What was expected.
    pub message: String,
}

const RULE_FORMS: &str = "expected state:TYPE[@PRODUCER]>DURATION, gap:TYPE[@PRODUCER]>DURATION, marker:REGEX, loss or reference:TRACE>SCORE";

impl FromStr for TriggerRule {
    type Err = RuleError;

    fn from_str(text: &str) -> std::result::Result<Self, RuleError> {
        let err = |byte: usize, message: String| RuleError {
            text: text.to_string(),
            position: text[..byte.min(text.len())].chars().count() + 1,
            message,
        };
        let (kind, rest) = match text.split_once(':') {
            Some((k, r)) => (k, r),
            None if text.trim() == "loss" => {
                return Ok(Self {
                    text: text.trim().to_string(),
                    kind: RuleKind::Loss,
                });
            }
            None => return Err(err(0, RULE_FORMS.into())),
        };
        let at = kind.len() + 1;
        let kind = match kind {
            "state" | "gap" => {
                let Some(gt) = rest.rfind('>') else {
                    return Err(err(
                        text.len(),
                        "expected `>DURATION` after the type (e.g. state:irq@vsync>2ms)".into(),
                    ));
                };
                let (who, limit_text) = (&rest[..gt], &rest[gt + 1..]);
                let (ty, producer) = match who.split_once('@') {
                    Some((t, p)) => (t, Some(p)),
                    None => (who, None),
                };
                if ty.trim().is_empty() {
                    return Err(err(at, "expected an event type name".into()));
                }
                if producer.is_some_and(|p| p.trim().is_empty()) {
                    return Err(err(
                        at + ty.len() + 1,
                        "expected a producer name after `@`".into(),
                    ));
                }
                let limit_at = at + gt + 1;
                let limit = units::parse_time(limit_text).map_err(|e| {
                    err(
                        limit_at,
                        format!("expected a duration such as 2ms or 1.5s: {e}"),
                    )
                })?;
                if limit <= 0 {
                    return Err(err(limit_at, "the duration must be above zero".into()));
                }
                let (ty, producer) = (
                    ty.trim().to_string(),
                    producer.map(|p| p.trim().to_string()),
                );
                if kind == "state" {
                    RuleKind::State {
                        ty,
                        producer,
                        limit,
                    }
                } else {
                    RuleKind::Gap {
                        ty,
                        producer,
                        limit,
                    }
                }
            }
            "marker" => {
                if rest.is_empty() {
                    return Err(err(at, "expected a regular expression".into()));
                }
                let re = regex::Regex::new(rest).map_err(|e| {
                    // The regex crate's message is a diagram over several lines: its last line says why.
                    let why = e.to_string();
                    let why = why.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("");
                    err(
                        at,
                        format!(
                            "not a regular expression: {}",
                            why.trim_start_matches("error: ")
                        ),
                    )
                })?;
                RuleKind::Marker(re)
            }
            "reference" => {
                let Some(gt) = rest.rfind('>') else {
                    return Err(err(
                        text.len(),
                        "expected `>SCORE` after the trace (e.g. reference:ref.db>0.4)".into(),
                    ));
                };
                let (trace, score_text) = (&rest[..gt], &rest[gt + 1..]);
                if trace.is_empty() {
                    return Err(err(at, "expected the reference trace's path".into()));
                }
                let score: f64 = score_text.trim().parse().map_err(|_| {
                    err(
                        at + gt + 1,
                        format!("expected a score between 0 and 1, got `{score_text}`"),
                    )
                })?;
                if !(score > 0.0 && score <= 1.0) {
                    return Err(err(
                        at + gt + 1,
                        format!("the score must be above 0 and at most 1, got {score}"),
                    ));
                }
                RuleKind::Reference {
                    trace: PathBuf::from(trace),
                    score,
                }
            }
            _ => return Err(err(0, RULE_FORMS.into())),
        };
        Ok(Self {
            text: text.to_string(),
            kind,
        })
    }
}

/// One firing of a rule in a session.
#[derive(Clone, Debug, PartialEq)]
pub struct Firing {
    /// The rule's text (`external` for `socscope trigger` and SIGUSR1).
    pub rule: String,
    /// When the rule became true, trace ns (the session's own clock): a state's start plus the limit,
    /// a late event's predecessor plus the limit, a marker's or a loss's time, a departing window's end,
    /// the stream's latest time for an external trigger.
    pub at: Timestamp,
    /// The incident's extent, trace ns: the state, the gap, the window (equal to `at` for a marker).
    pub start: Timestamp,
    /// End of the incident's extent.
    pub end: Timestamp,
    /// The producer concerned, if one.
    pub producer: Option<ProducerId>,
    /// Its name (or what fired, for an external trigger).
    pub who: String,
    /// A figure: the duration or gap in seconds, the lost records, the departure score.
    pub value: f64,
    /// One line for people.
    pub detail: String,
}

/// Tool name of the trigger annotations in a trace's analysis results.
pub const TRIGGER_TOOL: &str = "socscope collect";

/// Name of the annotation type of trigger firings.
pub const TRIGGER_ANNOTATION: &str = "trigger";

/// The trace parameter (and so catalog tag) naming the rules that fired: `trigger=<rule>`.
pub const TRIGGER_PARAM: &str = "trigger";

/// Firings as annotations of one type whose parameters (`start_ns`, `end_ns`, `producers`, `who`,
/// `value`, then `rule`, `at_ns`) make every view draw them as bands (the analysis crate's
/// `results::bands` convention).
pub fn firings_as_annotations(firings: &[Firing]) -> AnalysisData {
    let params = [
        ("start_ns", ParamType::Signed),
        ("end_ns", ParamType::Signed),
        ("producers", ParamType::String),
        ("who", ParamType::String),
        ("value", ParamType::Float),
        ("rule", ParamType::String),
        ("at_ns", ParamType::Signed),
    ];
    AnalysisData::Annotation {
        types: vec![AnnotationType {
            id: 1,
            name: TRIGGER_ANNOTATION.into(),
            params: params.iter().map(|(n, t)| ParamDef::new(*n, *t)).collect(),
        }],
        annotations: firings
            .iter()
            .enumerate()
            .map(|(i, f)| Annotation {
                id: i as i64 + 1,
                type_id: 1,
                name: f.detail.clone(),
                values: vec![
                    ParamValue::Signed(f.start),
                    ParamValue::Signed(f.end),
                    ParamValue::String(f.producer.map(|p| p.to_string()).unwrap_or_default()),
                    ParamValue::String(f.who.clone()),
                    ParamValue::Float(f.value),
                    ParamValue::String(f.rule.clone()),
                    ParamValue::Signed(f.at),
                ],
            })
            .collect(),
    }
}

/// The value of the `trigger` tag: the distinct rules that fired, in the order they first fired.
pub fn trigger_tag(firings: &[Firing]) -> String {
    let mut rules: Vec<&str> = Vec::new();
    for f in firings {
        if !rules.contains(&f.rule.as_str()) {
            rules.push(&f.rule);
        }
    }
    rules.join("; ")
}

/// A departure found by a [`Probe`].
#[derive(Clone, Debug, PartialEq)]
pub struct ProbeFiring {
    /// When it was known (the end of the departing window), trace ns.
    pub at: Timestamp,
    /// The departing window.
    pub start: Timestamp,
    /// End of the departing window.
    pub end: Timestamp,
    /// Its score.
    pub value: f64,
    /// Who differs most.
    pub who: String,
    /// One line for people.
    pub detail: String,
}

/// An online check the collector cannot compute itself (the `reference:` rule: the compare engine lives
/// in the analysis crate, which the collector may not depend on): the program composes it and hands the
/// collector a [`ProbeFactory`].
pub trait Probe: Send {
    /// A state closed (names resolved).
    fn state(&mut self, producer: &str, ty: &str, start: Timestamp, end: Timestamp);
    /// The stream reached `now`: the departures found since the last call.
    fn advance(&mut self, now: Timestamp) -> Vec<ProbeFiring>;
}

/// Makes one [`Probe`] per session for a rule.
pub trait ProbeFactory: Send + Sync {
    /// A probe for a new session.
    fn start(&self) -> Box<dyn Probe>;
}

/// External triggers shared by every session of a collector (`socscope trigger` over the control socket,
/// SIGUSR1): each session fires once per call, at its stream's latest time.
#[derive(Clone, Debug, Default)]
pub struct ExternalTriggers {
    generation: Arc<AtomicU64>,
    reasons: Arc<Mutex<Vec<String>>>,
}

impl ExternalTriggers {
    /// Fires every session with `reason`; returns how many external triggers there have been.
    pub fn fire(&self, reason: &str) -> u64 {
        let Ok(mut r) = self.reasons.lock() else {
            return 0;
        };
        // Bounded: a script calling in a loop keeps the last ones.
        if r.len() >= MAX_EXTERNAL_KEPT {
            r.remove(0);
        }
        r.push(reason.to_string());
        self.generation.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// How many external triggers there have been.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The reasons of triggers after generation `seen` (at most the last [`MAX_EXTERNAL_KEPT`]).
    fn since(&self, seen: u64) -> (u64, Vec<String>) {
        let Ok(r) = self.reasons.lock() else {
            return (seen, Vec::new());
        };
        let now = self.generation.load(Ordering::Acquire);
        let new = (now.saturating_sub(seen) as usize).min(r.len());
        (now, r[r.len() - new..].to_vec())
    }
}

/// External trigger reasons remembered for sessions that have not looked yet.
const MAX_EXTERNAL_KEPT: usize = 64;

/// Rule name of external triggers in annotations.
pub const EXTERNAL_RULE: &str = "external";

/// The triggers of a collector: its rules, the probes the program composed for `reference:` rules, and
/// the external trigger handle.
#[derive(Clone, Default)]
pub struct TriggerSet {
    rules: Arc<[TriggerRule]>,
    probes: Vec<(usize, Arc<dyn ProbeFactory>)>,
    /// External triggers (the control socket and SIGUSR1 fire them).
    pub external: ExternalTriggers,
}

impl fmt::Debug for TriggerSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TriggerSet")
            .field("rules", &self.rules)
            .field("probes", &self.probes.len())
            .finish()
    }
}

impl TriggerSet {
    /// The rules; every `reference:` rule needs its probe (`probes`: rule index → factory).
    pub fn new(
        rules: Vec<TriggerRule>,
        probes: Vec<(usize, Arc<dyn ProbeFactory>)>,
    ) -> std::result::Result<Self, String> {
        for (i, r) in rules.iter().enumerate() {
            if matches!(r.kind, RuleKind::Reference { .. }) && !probes.iter().any(|(k, _)| *k == i)
            {
                return Err(format!(
                    "trigger rule `{}`: no reference comparison was set up for it",
                    r.text
                ));
            }
        }
        Ok(Self {
            rules: rules.into(),
            probes,
            external: ExternalTriggers::default(),
        })
    }

    /// The rules.
    pub fn rules(&self) -> &[TriggerRule] {
        &self.rules
    }

    /// The engine of a new session.
    pub fn engine(&self) -> TriggerEngine {
        TriggerEngine::new(self)
    }
}

/// Most firings one rule records per second of trace time; more are counted, not recorded (a rule that
/// fires a thousand times a second would bury the trace in annotations).
pub const MAX_FIRINGS_PER_SECOND: usize = 10;

/// Most firings a session records in all; more are counted.
pub const MAX_FIRINGS_PER_SESSION: usize = 10_000;

/// Least lag between the stream's latest record and the time at which open states and gaps are judged
/// (see the module's documentation), trace ns.
pub const MIN_JUDGE_LAG: Timestamp = 250_000_000;

/// A state being watched: (CPU, type, start) — what its closing event carries too (its producer may
/// change in between: states entered before a CPU's first switch go to the thread switched out).
type OpenKey = (u16, TypeId, Timestamp);

/// A deadline to judge: (deadline, start, producer, CPU, type).
type Deadline = (Timestamp, Timestamp, ProducerId, u16, TypeId);

/// Per-rule matching state.
struct RuleState {
    /// Type ids whose name the rule names.
    types: FxHashSet<TypeId>,
    /// Producer ids whose name the rule names (`None`: the rule names no producer).
    producers: Option<FxHashSet<ProducerId>>,
    /// Gap rules: the last start per producer.
    last_start: FxHashMap<ProducerId, Timestamp>,
    /// State rules: the matching states open now (identical keys counted).
    open: FxHashMap<OpenKey, u32>,
    /// Deadlines to judge, soonest first (state rules: start + limit of an open state; gap rules: last
    /// start + limit).
    deadlines: BinaryHeap<Reverse<Deadline>>,
    /// State rules: states that fired while open, with the index of their firing (`None`: not recorded,
    /// rate limit), so that their closing completes it instead of firing again.
    fired_open: FxHashMap<OpenKey, Option<usize>>,
    /// Gap rules: per producer, the start whose deadline fired and the index of its firing.
    fired_gap: FxHashMap<ProducerId, (Timestamp, Option<usize>)>,
    /// Marker rules: per type id, whether its name matches.
    marker_types: FxHashMap<TypeId, bool>,
    /// Times of the last recorded firings (rate limit).
    recent: VecDeque<Timestamp>,
    /// Firings not recorded because of the rate limit.
    suppressed: u64,
    fired: u64,
}

/// One session's trigger state.
pub struct TriggerEngine {
    rules: Arc<[TriggerRule]>,
    state: Vec<RuleState>,
    probes: Vec<(usize, Box<dyn Probe>)>,
    type_names: FxHashMap<TypeId, String>,
    producer_names: FxHashMap<ProducerId, String>,
    external: ExternalTriggers,
    external_seen: u64,
    /// The latest time seen in the stream, trace ns.
    head: Timestamp,
    /// The latest record or heartbeat time of any CPU (`i64::MIN` before the first).
    record_head: Timestamp,
    /// The most a batch's first record was behind `record_head` when it arrived.
    max_lateness: Timestamp,
    /// Whether a rule watches state openings (state and gap rules).
    watches_opens: bool,
    /// Per type id below [`DENSE_TYPE_IDS`]: whether a state or gap rule names the type or a marker
    /// rule matches its name. Most records are of types no rule names: one look-up here lets them by
    /// (every record of the stream goes through [`TriggerEngine::saw_event`]).
    watched_types: Vec<bool>,
    /// Whether a marker rule matches text: then punctual events with text are looked at whatever
    /// their type.
    has_marker_rules: bool,
    /// Indices of recorded firings completed since the last [`TriggerEngine::take_revised`].
    revised: Vec<usize>,
    /// Every firing recorded in this session.
    firings: Vec<Firing>,
    /// How many of them were handed out by [`TriggerEngine::take_new`].
    handed_out: usize,
    /// Firings beyond [`MAX_FIRINGS_PER_SESSION`].
    over_session_limit: u64,
    frames: u64,
    warnings: Vec<String>,
}

/// Type ids the engine keeps a flat table for (see `TriggerEngine::watched_types`); a board's ids are
/// small and dense, larger ones take the rules' own look-ups.
const DENSE_TYPE_IDS: usize = 1 << 16;

impl TriggerEngine {
    fn new(set: &TriggerSet) -> Self {
        Self {
            rules: set.rules.clone(),
            state: set
                .rules
                .iter()
                .map(|r| RuleState {
                    types: FxHashSet::default(),
                    producers: match &r.kind {
                        RuleKind::State { producer, .. } | RuleKind::Gap { producer, .. } => {
                            producer.as_ref().map(|_| FxHashSet::default())
                        }
                        _ => None,
                    },
                    last_start: FxHashMap::default(),
                    open: FxHashMap::default(),
                    deadlines: BinaryHeap::new(),
                    fired_open: FxHashMap::default(),
                    fired_gap: FxHashMap::default(),
                    marker_types: FxHashMap::default(),
                    recent: VecDeque::new(),
                    suppressed: 0,
                    fired: 0,
                })
                .collect(),
            probes: set.probes.iter().map(|(i, f)| (*i, f.start())).collect(),
            type_names: FxHashMap::default(),
            producer_names: FxHashMap::default(),
            // Triggers fired before the session started are not this session's.
            external_seen: set.external.generation(),
            external: set.external.clone(),
            head: 0,
            record_head: i64::MIN,
            max_lateness: 0,
            watches_opens: set
                .rules
                .iter()
                .any(|r| matches!(r.kind, RuleKind::State { .. } | RuleKind::Gap { .. })),
            watched_types: Vec::new(),
            has_marker_rules: set
                .rules
                .iter()
                .any(|r| matches!(r.kind, RuleKind::Marker(_))),
            revised: Vec::new(),
            firings: Vec::new(),
            handed_out: 0,
            over_session_limit: 0,
            frames: 0,
            warnings: Vec::new(),
        }
    }

    /// The latest time seen in the stream.
    pub fn head(&self) -> Timestamp {
        self.head
    }

    /// The id of the producer named `name` in this session (the lowest when several share it).
    pub fn producer_named(&self, name: &str) -> Option<ProducerId> {
        self.producer_names
            .iter()
            .filter(|(_, n)| *n == name)
            .map(|(id, _)| *id)
            .min()
    }

    /// Every firing recorded so far.
    pub fn firings(&self) -> &[Firing] {
        &self.firings
    }

    /// Firings recorded since the last call.
    pub fn take_new(&mut self) -> &[Firing] {
        let from = self.handed_out;
        self.handed_out = self.firings.len();
        &self.firings[from..]
    }

    /// Firings handed out earlier and completed since the last call (a state that fired while open has
    /// closed, a late event that fired at its deadline has come): same rule, `at`, `start` and producer,
    /// a new `end`, `value` and `detail`.
    pub fn take_revised(&mut self) -> Vec<Firing> {
        let handed_out = self.handed_out;
        let mut out = Vec::new();
        for i in std::mem::take(&mut self.revised) {
            if i < handed_out
                && let Some(f) = self.firings.get(i)
            {
                out.push(f.clone());
            }
        }
        out
    }

    /// How far behind the stream's latest record open states and gaps are judged (see the module's
    /// documentation).
    pub fn judge_lag(&self) -> Timestamp {
        self.max_lateness.saturating_mul(2).max(MIN_JUDGE_LAG)
    }

    /// The board said it was alive at `at` (a `Heartbeat`: it had nothing else to send), trace ns.
    pub fn heartbeat(&mut self, at: Timestamp) {
        self.record_head = self.record_head.max(at);
        self.head = self.head.max(at);
    }

    /// Warnings since the last call (a rule naming what the board never announced).
    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    /// Counters for `ingest_stat`: (name, value, description).
    pub fn stats(&self) -> Vec<(String, i64, String)> {
        let mut out = vec![
            (
                "triggers_fired".to_string(),
                self.firings.len() as i64,
                "trigger firings recorded (annotations of this trace)".to_string(),
            ),
            (
                "triggers_over_session_limit".to_string(),
                self.over_session_limit as i64,
                format!(
                    "trigger firings beyond {MAX_FIRINGS_PER_SESSION} in the session: counted, not recorded"
                ),
            ),
        ];
        for (r, s) in self.rules.iter().zip(&self.state) {
            out.push((
                format!("triggers_suppressed.{}", r.text),
                s.suppressed as i64,
                format!(
                    "firings of this rule beyond {MAX_FIRINGS_PER_SECOND} per second of trace time: counted, not recorded"
                ),
            ));
        }
        out
    }

    /// Records a firing of rule `i` (rate-limited); its index among the firings if it was recorded.
    fn fire(&mut self, i: usize, f: Firing) -> Option<usize> {
        let s = &mut self.state[i];
        s.fired += 1;
        if s.recent.len() >= MAX_FIRINGS_PER_SECOND {
            let oldest = s.recent.front().copied().unwrap_or(i64::MIN);
            if f.at.saturating_sub(oldest) < 1_000_000_000 {
                s.suppressed += 1;
                return None;
            }
            s.recent.pop_front();
        }
        s.recent.push_back(f.at);
        self.record(f)
    }

    fn record(&mut self, f: Firing) -> Option<usize> {
        if self.firings.len() >= MAX_FIRINGS_PER_SESSION {
            self.over_session_limit += 1;
            return None;
        }
        self.firings.push(f);
        Some(self.firings.len() - 1)
    }

    /// Completes firing `index` (fired while its state was open or its event late) now that the
    /// incident is over.
    fn revise(&mut self, index: Option<usize>, end: Timestamp, value: f64, detail: String) {
        let Some(f) = index.and_then(|i| self.firings.get_mut(i)) else {
            return;
        };
        f.end = end;
        f.value = value;
        f.detail = detail;
        if let Some(i) = index {
            self.revised.push(i);
        }
    }

    fn state_detail(&self, ty: TypeId, producer: ProducerId, lasted: i64, limit: i64) -> String {
        format!(
            "{} on {} lasted {}",
            self.type_names.get(&ty).map_or("state", |n| n),
            self.who(producer),
            over_limit(lasted, limit)
        )
    }

    fn gap_detail(&self, ty: TypeId, producer: ProducerId, gap: i64, limit: i64) -> String {
        format!(
            "{} on {} started {} after the previous one",
            self.type_names.get(&ty).map_or("event", |n| n),
            self.who(producer),
            over_limit(gap, limit)
        )
    }

    /// A start of a watched type on `producer` for gap rule `i`: a late one fires (or completes the
    /// firing its deadline made), and the next deadline is set.
    fn gap_start(&mut self, i: usize, ts: Timestamp, producer: ProducerId, ty: TypeId, limit: i64) {
        let s = &mut self.state[i];
        let prev = s.last_start.get(&producer).copied();
        if prev.is_some_and(|p| ts <= p) {
            // The same start again (a state's closing after its opening), or an older one arriving
            // late from another CPU: the latest start is kept.
            return;
        }
        s.last_start.insert(producer, ts);
        s.deadlines
            .push(Reverse((ts.saturating_add(limit), ts, producer, 0, ty)));
        let Some(prev) = prev else { return };
        if let Some((fired_for, index)) = s.fired_gap.get(&producer).copied()
            && fired_for == prev
        {
            s.fired_gap.remove(&producer);
            let detail = self.gap_detail(ty, producer, ts - prev, limit);
            self.revise(index, ts, (ts - prev) as f64 / 1e9, detail);
            return;
        }
        if ts - prev > limit {
            let f = Firing {
                rule: self.rules[i].text.clone(),
                at: prev + limit,
                start: prev,
                end: ts,
                producer: Some(producer),
                who: self.who(producer),
                value: (ts - prev) as f64 / 1e9,
                detail: self.gap_detail(ty, producer, ts - prev, limit),
            };
            self.fire(i, f);
        }
    }

    /// Fires the state and gap rules whose deadline is before `now` with the state still open or the
    /// next start still missing.
    fn judge(&mut self, now: Timestamp) {
        for i in 0..self.rules.len() {
            let limit = match self.rules[i].kind {
                RuleKind::State { limit, .. } | RuleKind::Gap { limit, .. } => limit,
                _ => continue,
            };
            let is_state = matches!(self.rules[i].kind, RuleKind::State { .. });
            while let Some(&Reverse((deadline, start, producer, cpu, ty))) =
                self.state[i].deadlines.peek()
            {
                if deadline >= now {
                    break;
                }
                self.state[i].deadlines.pop();
                let s = &mut self.state[i];
                if is_state {
                    let key = (cpu, ty, start);
                    match s.open.get_mut(&key) {
                        Some(n) if *n > 1 => *n -= 1,
                        Some(_) => {
                            s.open.remove(&key);
                        }
                        // Closed before its deadline was judged.
                        None => continue,
                    }
                    let detail = format!(
                        "{} on {} still open {} after it started",
                        self.type_names.get(&ty).map_or("state", |n| n),
                        self.who(producer),
                        over_limit(now - start, limit)
                    );
                    let f = self.deadline_firing(i, deadline, start, now, producer, detail);
                    let index = self.fire(i, f);
                    self.state[i].fired_open.insert(key, index);
                } else {
                    if s.last_start.get(&producer) != Some(&start)
                        || s.fired_gap.get(&producer).is_some_and(|f| f.0 == start)
                    {
                        // A later start came, or this one fired already.
                        continue;
                    }
                    let detail = format!(
                        "no {} on {} for {} after the previous one",
                        self.type_names.get(&ty).map_or("event", |n| n),
                        self.who(producer),
                        over_limit(now - start, limit)
                    );
                    let f = self.deadline_firing(i, deadline, start, now, producer, detail);
                    let index = self.fire(i, f);
                    self.state[i].fired_gap.insert(producer, (start, index));
                }
            }
        }
    }

    /// Fires an external trigger now (at the stream's latest time).
    pub fn fire_external(&mut self, reason: &str) {
        let at = self.head;
        self.record(Firing {
            rule: EXTERNAL_RULE.into(),
            at,
            start: at,
            end: at,
            producer: None,
            who: reason.to_string(),
            value: 0.0,
            detail: format!("external trigger ({reason})"),
        });
    }

    /// After each frame: external triggers, probes, and once, the names the rules use that the board
    /// has not announced.
    pub fn frame_done(&mut self) {
        self.frames += 1;
        if self.watches_opens && self.record_head != i64::MIN {
            self.judge(self.record_head.saturating_sub(self.judge_lag()));
        }
        if self.external.generation() != self.external_seen {
            let (now, reasons) = self.external.since(self.external_seen);
            self.external_seen = now;
            for r in reasons {
                self.fire_external(&r);
            }
        }
        for k in 0..self.probes.len() {
            let (i, found) = {
                let (i, p) = &mut self.probes[k];
                (*i, p.advance(self.head))
            };
            for p in found {
                let f = Firing {
                    rule: self.rules[i].text.clone(),
                    at: p.at,
                    start: p.start,
                    end: p.end,
                    producer: None,
                    who: p.who,
                    value: p.value,
                    detail: p.detail,
                };
                self.fire(i, f);
            }
        }
    }

    /// Says once, when the session's first records arrive (its dictionary is in by then), which rules
    /// name a type or producer the board did not announce.
    pub fn check_names(&mut self) {
        let rules = self.rules.clone();
        for r in rules.iter() {
            let (ty, producer) = match &r.kind {
                RuleKind::State { ty, producer, .. } | RuleKind::Gap { ty, producer, .. } => {
                    (ty, producer)
                }
                _ => continue,
            };
            if !self.type_names.values().any(|n| n == ty) {
                let mut known: Vec<&str> = self.type_names.values().map(String::as_str).collect();
                known.sort_unstable();
                known.dedup();
                self.warnings.push(format!(
                    "trigger rule `{}`: the board announced no event type named `{ty}` (it has: {})",
                    r.text,
                    known.join(", ")
                ));
            }
            if let Some(p) = producer
                && !self.producer_names.values().any(|n| n == p)
            {
                self.warnings.push(format!(
                    "trigger rule `{}`: the board announced no producer named `{p}` (yet: threads named later still count)",
                    r.text
                ));
            }
        }
    }

    fn saw_producer(&mut self, p: &Producer) {
        self.producer_names.insert(p.id, p.name.clone());
        for (r, s) in self.rules.iter().zip(&mut self.state) {
            if let (
                RuleKind::State {
                    producer: Some(name),
                    ..
                }
                | RuleKind::Gap {
                    producer: Some(name),
                    ..
                },
                Some(ids),
            ) = (&r.kind, &mut s.producers)
            {
                // A renamed producer (a thread named after its creation) may stop matching.
                if *name == p.name {
                    ids.insert(p.id);
                } else {
                    ids.remove(&p.id);
                }
            }
        }
    }

    fn saw_type(&mut self, t: &EventType) {
        self.type_names.insert(t.id, t.name.clone());
        for (r, s) in self.rules.iter().zip(&mut self.state) {
            match &r.kind {
                RuleKind::State { ty, .. } | RuleKind::Gap { ty, .. } => {
                    if *ty == t.name {
                        s.types.insert(t.id);
                    } else {
                        s.types.remove(&t.id);
                    }
                }
                RuleKind::Marker(re) => {
                    s.marker_types.insert(
                        t.id,
                        t.category == EventCategory::Punctual && re.is_match(&t.name),
                    );
                }
                _ => {}
            }
        }
        let watched = self.state.iter().any(|s| {
            s.types.contains(&t.id) || s.marker_types.get(&t.id).copied().unwrap_or(false)
        });
        if let Ok(id) = usize::try_from(t.id)
            && id < DENSE_TYPE_IDS
        {
            if self.watched_types.len() <= id {
                self.watched_types.resize(id + 1, false);
            }
            self.watched_types[id] = watched;
        }
    }

    /// Whether a rule may care about records of type `ty` (by name): false only when none does.
    #[inline]
    fn type_watched(&self, ty: TypeId) -> bool {
        match usize::try_from(ty) {
            Ok(id) if id < DENSE_TYPE_IDS => self.watched_types.get(id).copied().unwrap_or(false),
            _ => true,
        }
    }

    /// The firing of rule `i` judged at its deadline: the state (or the wait for the next start) began at
    /// `start` and was still open at `now`.
    fn deadline_firing(
        &self,
        i: usize,
        deadline: Timestamp,
        start: Timestamp,
        now: Timestamp,
        producer: ProducerId,
        detail: String,
    ) -> Firing {
        Firing {
            rule: self.rules[i].text.clone(),
            at: deadline,
            start,
            end: now,
            producer: Some(producer),
            who: self.who(producer),
            value: (now - start) as f64 / 1e9,
            detail,
        }
    }

    fn who(&self, p: ProducerId) -> String {
        self.producer_names
            .get(&p)
            .cloned()
            .unwrap_or_else(|| format!("producer {p}"))
    }

    /// Every record of the stream comes here: kept small enough to inline into the reconstruction's
    /// sink, the rules' work is behind it.
    #[inline]
    fn saw_event(&mut self, e: &Event) {
        let end = e.end();
        if end > self.head {
            self.head = end;
        }
        // Most records: of a type no rule names, no text for a marker rule, no reference to follow.
        if self.probes.is_empty()
            && !self.type_watched(e.type_id)
            && !(self.has_marker_rules
                && matches!(e.kind, EventKind::Punctual)
                && e.params.iter().any(|v| matches!(v, ParamValue::String(_))))
        {
            return;
        }
        self.judge_event(e);
    }

    /// A record some rule may care about.
    #[inline(never)]
    fn judge_event(&mut self, e: &Event) {
        for i in 0..self.rules.len() {
            let s = &self.state[i];
            let matches = |s: &RuleState| {
                s.types.contains(&e.type_id)
                    && s.producers
                        .as_ref()
                        .is_none_or(|ids| ids.contains(&e.producer))
            };
            match &self.rules[i].kind {
                RuleKind::State { limit, .. } => {
                    let EventKind::State { end, .. } = e.kind else {
                        continue;
                    };
                    if !s.types.contains(&e.type_id) {
                        continue;
                    }
                    let limit = *limit;
                    let matched = matches(s);
                    let key = (e.cpu.unwrap_or(0), e.type_id, e.ts);
                    let s = &mut self.state[i];
                    if !s.fired_open.is_empty()
                        && let Some(index) = s.fired_open.remove(&key)
                    {
                        // It fired while open: its closing completes that firing.
                        let detail = self.state_detail(e.type_id, e.producer, end - e.ts, limit);
                        self.revise(index, end, (end - e.ts) as f64 / 1e9, detail);
                        continue;
                    }
                    match s.open.get_mut(&key) {
                        Some(n) if *n > 1 => *n -= 1,
                        Some(_) => {
                            s.open.remove(&key);
                        }
                        None => {}
                    }
                    if matched && end - e.ts > limit {
                        let f = Firing {
                            rule: self.rules[i].text.clone(),
                            at: e.ts + limit,
                            start: e.ts,
                            end,
                            producer: Some(e.producer),
                            who: self.who(e.producer),
                            value: (end - e.ts) as f64 / 1e9,
                            detail: self.state_detail(e.type_id, e.producer, end - e.ts, limit),
                        };
                        self.fire(i, f);
                    }
                }
                RuleKind::Gap { limit, .. } => {
                    if matches(s) {
                        let limit = *limit;
                        self.gap_start(i, e.ts, e.producer, e.type_id, limit);
                    }
                }
                RuleKind::Marker(re) => {
                    if !matches!(e.kind, EventKind::Punctual) {
                        continue;
                    }
                    let by_name = s.marker_types.get(&e.type_id).copied().unwrap_or(false);
                    let text = e.params.iter().find_map(|v| match v {
                        ParamValue::String(t) if re.is_match(t) => Some(t.as_str()),
                        _ => None,
                    });
                    if by_name || text.is_some() {
                        let name = self.type_names.get(&e.type_id).map_or("event", |n| n);
                        let f = Firing {
                            rule: self.rules[i].text.clone(),
                            at: e.ts,
                            start: e.ts,
                            end: e.ts,
                            producer: Some(e.producer),
                            who: self.who(e.producer),
                            value: 0.0,
                            detail: match text {
                                Some(t) => format!("{name} \"{t}\" on {}", self.who(e.producer)),
                                None => format!("{name} on {}", self.who(e.producer)),
                            },
                        };
                        self.fire(i, f);
                    }
                }
                RuleKind::Loss | RuleKind::Reference { .. } => {}
            }
        }
        if !self.probes.is_empty()
            && let EventKind::State { end, .. } = e.kind
        {
            let (Some(p), Some(t)) = (
                self.producer_names.get(&e.producer),
                self.type_names.get(&e.type_id),
            ) else {
                return;
            };
            for (_, probe) in &mut self.probes {
                probe.state(p, t, e.ts, end);
            }
        }
    }

    fn saw_open(&mut self, start: Timestamp, ty: TypeId, producer: ProducerId, cpu: u16) {
        if !self.watches_opens || !self.type_watched(ty) {
            return;
        }
        for i in 0..self.rules.len() {
            let s = &mut self.state[i];
            if !s.types.contains(&ty)
                || !s
                    .producers
                    .as_ref()
                    .is_none_or(|ids| ids.contains(&producer))
            {
                continue;
            }
            match self.rules[i].kind {
                RuleKind::State { limit, .. } => {
                    *s.open.entry((cpu, ty, start)).or_insert(0) += 1;
                    s.deadlines.push(Reverse((
                        start.saturating_add(limit),
                        start,
                        producer,
                        cpu,
                        ty,
                    )));
                }
                RuleKind::Gap { limit, .. } => self.gap_start(i, start, producer, ty, limit),
                _ => {}
            }
        }
    }

    fn saw_batch(&mut self, first: Timestamp, last: Timestamp) {
        if self.record_head != i64::MIN && self.record_head > first {
            self.max_lateness = self.max_lateness.max(self.record_head - first);
        }
        self.record_head = self.record_head.max(last);
        self.head = self.head.max(last);
    }

    fn saw_loss(&mut self, l: &LossRecord) {
        for i in 0..self.rules.len() {
            if matches!(self.rules[i].kind, RuleKind::Loss) {
                let f = Firing {
                    rule: self.rules[i].text.clone(),
                    at: l.ts,
                    start: l.ts,
                    end: l.ts,
                    producer: None,
                    who: l.cpu.map_or_else(String::new, |c| format!("cpu{c}")),
                    value: l.count as f64,
                    detail: format!("{} records lost ({})", l.count, l.reason),
                };
                self.fire(i, f);
            }
        }
    }

    /// Notes the frames seen (the first Events frame triggers [`Self::check_names`]).
    pub fn frames(&self) -> u64 {
        self.frames
    }
}

/// A sink that also shows everything to a session's triggers (if it has any).
pub struct Observed<'a, S> {
    sink: &'a mut S,
    engine: Option<&'a mut TriggerEngine>,
}

impl<'a, S> Observed<'a, S> {
    /// `sink`, watched by `engine`.
    pub fn new(sink: &'a mut S, engine: Option<&'a mut TriggerEngine>) -> Self {
        Self { sink, engine }
    }
}

impl<S: Sink> Sink for Observed<'_, S> {
    fn producer(&mut self, producer: &Producer) -> Result<()> {
        if let Some(e) = self.engine.as_deref_mut() {
            e.saw_producer(producer);
        }
        self.sink.producer(producer)
    }
    fn event_type(&mut self, ty: &EventType) -> Result<()> {
        if let Some(e) = self.engine.as_deref_mut() {
            e.saw_type(ty);
        }
        self.sink.event_type(ty)
    }
    fn event(&mut self, event: &Event) -> Result<()> {
        if let Some(e) = self.engine.as_deref_mut() {
            e.saw_event(event);
        }
        self.sink.event(event)
    }
    fn loss(&mut self, loss: &LossRecord) -> Result<()> {
        if let Some(e) = self.engine.as_deref_mut() {
            e.saw_loss(loss);
        }
        self.sink.loss(loss)
    }
    fn state_opened(&mut self, start: Timestamp, ty: TypeId, producer: ProducerId, cpu: u16) {
        if let Some(e) = self.engine.as_deref_mut() {
            e.saw_open(start, ty, producer, cpu);
        }
        self.sink.state_opened(start, ty, producer, cpu);
    }
    fn batch_done(&mut self, cpu: u16, first: Timestamp, last: Timestamp) {
        if let Some(e) = self.engine.as_deref_mut() {
            e.saw_batch(first, last);
        }
        self.sink.batch_done(cpu, first, last);
    }
}

/// A sink that keeps nothing: the flight recorder reconstructs a session only for its triggers.
#[derive(Debug, Default)]
pub struct Discard;

impl Sink for Discard {
    fn producer(&mut self, _: &Producer) -> Result<()> {
        Ok(())
    }
    fn event_type(&mut self, _: &EventType) -> Result<()> {
        Ok(())
    }
    fn event(&mut self, _: &Event) -> Result<()> {
        Ok(())
    }
    fn loss(&mut self, _: &LossRecord) -> Result<()> {
        Ok(())
    }
}

/// How long something took against its limit, for a firing's detail: `26.1 ms (limit 25.0 ms)`. When
/// the two would read the same at that precision (a gap of 25.04 ms over a 25 ms limit), both are given
/// in nanoseconds, so the detail never says a value equal to its limit went over it.
fn over_limit(value: i64, limit: i64) -> String {
    let (v, l) = (units::duration(value), units::duration(limit));
    if v == l && value != limit {
        format!("{value} ns (limit {limit} ns)")
    } else {
        format!("{v} (limit {l})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use socscope_tracedb::ProducerKind;

    #[test]
    fn a_value_just_over_its_limit_does_not_read_as_equal_to_it() {
        assert_eq!(
            over_limit(26_100_000, 25_000_000),
            "26.1 ms (limit 25.0 ms)"
        );
        assert_eq!(
            over_limit(25_041_237, 25_000_000),
            "25041237 ns (limit 25000000 ns)"
        );
    }

    fn rule(s: &str) -> TriggerRule {
        s.parse().unwrap()
    }

    #[test]
    fn rules_parse_and_bad_ones_say_where() {
        match rule("state:irq@vsync>2ms").kind {
            RuleKind::State {
                ty,
                producer,
                limit,
            } => {
                assert_eq!((ty.as_str(), producer.as_deref()), ("irq", Some("vsync")));
                assert_eq!(limit, 2_000_000);
            }
            k => panic!("{k:?}"),
        }
        assert!(matches!(
            rule("gap:running>30ms").kind,
            RuleKind::Gap {
                producer: None,
                limit: 30_000_000,
                ..
            }
        ));
        assert!(matches!(rule("loss").kind, RuleKind::Loss));
        assert!(matches!(
            rule("marker:under.*flow").kind,
            RuleKind::Marker(_)
        ));
        assert!(
            matches!(rule("reference:runs/ref.db>0.4").kind, RuleKind::Reference { score, .. } if score == 0.4)
        );
        let e = "state:irq@vsync>2 parsecs"
            .parse::<TriggerRule>()
            .unwrap_err();
        assert_eq!(e.position, 17, "{e}");
        let e = "stat:irq>2ms".parse::<TriggerRule>().unwrap_err();
        assert_eq!(e.position, 1, "{e}");
        assert!(e.to_string().contains("expected state:"), "{e}");
        let e = "state:irq@>2ms".parse::<TriggerRule>().unwrap_err();
        assert_eq!(e.position, 11, "{e}");
        let e = "state:irq".parse::<TriggerRule>().unwrap_err();
        assert_eq!(e.position, 10, "{e}");
        let e = "marker:(unclosed".parse::<TriggerRule>().unwrap_err();
        assert_eq!(e.position, 8, "{e}");
        assert!(e.message.contains("regular expression"), "{e}");
        let e = "reference:ref.db>1.5".parse::<TriggerRule>().unwrap_err();
        assert_eq!(e.position, 18, "{e}");
        let e = "gap:running>0ms".parse::<TriggerRule>().unwrap_err();
        assert!(e.message.contains("above zero"), "{e}");
    }

    fn engine(rules: &[&str]) -> TriggerEngine {
        TriggerSet::new(rules.iter().map(|r| rule(r)).collect(), Vec::new())
            .unwrap()
            .engine()
    }

    fn declare(e: &mut TriggerEngine) {
        let mut d = Discard;
        let mut o = Observed::new(&mut d, Some(e));
        for (id, name, category) in [
            (1, "irq", EventCategory::State),
            (2, "marker", EventCategory::Punctual),
            (3, "running", EventCategory::State),
        ] {
            o.event_type(&EventType {
                id,
                name: name.into(),
                category,
                params: Vec::new(),
            })
            .unwrap();
        }
        for (id, name) in [(10, "vsync"), (11, "eth0"), (12, "vsync-cb")] {
            o.producer(&Producer {
                id,
                parent: None,
                kind: ProducerKind::Irq,
                local_id: id.into(),
                name: name.into(),
            })
            .unwrap();
        }
    }

    fn state(ty: TypeId, producer: ProducerId, start: i64, end: i64) -> Event {
        Event {
            ts: start,
            type_id: ty,
            producer,
            cpu: Some(0),
            kind: EventKind::State { end, depth: 0 },
            params: Vec::new(),
        }
    }

    fn feed(e: &mut TriggerEngine, events: &[Event]) {
        let mut d = Discard;
        let mut o = Observed::new(&mut d, Some(e));
        for ev in events {
            o.event(ev).unwrap();
        }
    }

    #[test]
    fn a_state_too_long_fires_at_start_plus_limit_on_its_producer_only() {
        let mut e = engine(&["state:irq@vsync>2ms"]);
        declare(&mut e);
        feed(
            &mut e,
            &[
                state(1, 10, 0, 1_000_000),
                state(1, 11, 5_000_000, 9_000_000),
                state(1, 10, 10_000_000, 12_500_000),
            ],
        );
        let f = e.firings();
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(
            (f[0].at, f[0].start, f[0].end),
            (12_000_000, 10_000_000, 12_500_000)
        );
        assert_eq!(f[0].who, "vsync");
        assert!(f[0].detail.contains("lasted 2.5 ms"), "{}", f[0].detail);
    }

    #[test]
    fn a_late_periodic_start_fires_a_gap() {
        let mut e = engine(&["gap:running@vsync-cb>30ms"]);
        declare(&mut e);
        let ms = 1_000_000;
        feed(
            &mut e,
            &[
                state(3, 12, 0, ms),
                state(3, 12, 20 * ms, 21 * ms),
                state(3, 11, 30 * ms, 90 * ms),
                state(3, 12, 65 * ms, 66 * ms),
                state(3, 12, 85 * ms, 86 * ms),
            ],
        );
        let f = e.firings();
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!((f[0].at, f[0].start, f[0].end), (50 * ms, 20 * ms, 65 * ms));
    }

    #[test]
    fn markers_match_text_or_type_and_a_flood_is_rate_limited() {
        let mut e = engine(&["marker:under"]);
        declare(&mut e);
        let mut events = Vec::new();
        for i in 0..1000 {
            events.push(Event {
                ts: i * 1_000_000,
                type_id: 2,
                producer: 10,
                cpu: Some(0),
                kind: EventKind::Punctual,
                params: vec![ParamValue::String(if i % 2 == 0 {
                    "audio underflow".into()
                } else {
                    "frame decoded".into()
                })],
            });
        }
        feed(&mut e, &events);
        // 500 matches over one second: 10 recorded, the rest counted.
        assert_eq!(e.firings().len(), MAX_FIRINGS_PER_SECOND);
        let suppressed = e
            .stats()
            .into_iter()
            .find(|s| s.0 == "triggers_suppressed.marker:under")
            .unwrap();
        assert_eq!(suppressed.1, 490);
    }

    #[test]
    fn unknown_names_are_said_once_and_external_triggers_fire_at_the_head() {
        let set = TriggerSet::new(
            vec![rule("state:irq@nosuch>1ms"), rule("gap:nosuchtype>1s")],
            Vec::new(),
        )
        .unwrap();
        let mut e = set.engine();
        declare(&mut e);
        e.check_names();
        let w = e.take_warnings();
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("no producer named `nosuch`"), "{w:?}");
        assert!(w[1].contains("no event type named `nosuchtype`"), "{w:?}");
        feed(&mut e, &[state(1, 10, 0, 7_000)]);
        set.external.fire("SIGUSR1");
        e.frame_done();
        e.frame_done();
        let f = e.firings();
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].rule.as_str(), f[0].at), (EXTERNAL_RULE, 7_000));
    }

    /// Drives an engine as the reconstruction does: states opening, batches done, states closing.
    enum Step {
        Open(TypeId, ProducerId, u16, i64),
        Batch(u16, i64, i64),
        Close(Event),
        Heartbeat(i64),
    }

    fn drive(e: &mut TriggerEngine, steps: Vec<Step>) {
        for step in steps {
            let mut d = Discard;
            match step {
                Step::Open(ty, p, cpu, t) => {
                    Observed::new(&mut d, Some(&mut *e)).state_opened(t, ty, p, cpu)
                }
                Step::Batch(cpu, first, last) => {
                    Observed::new(&mut d, Some(&mut *e)).batch_done(cpu, first, last)
                }
                Step::Close(ev) => Observed::new(&mut d, Some(&mut *e)).event(&ev).unwrap(),
                Step::Heartbeat(t) => e.heartbeat(t),
            }
            e.frame_done();
        }
    }

    const MS: i64 = 1_000_000;

    #[test]
    fn a_state_still_open_fires_once_the_stream_passes_its_deadline_and_its_closing_completes_it() {
        let mut e = engine(&["state:irq@vsync>2ms"]);
        declare(&mut e);
        let lag = MIN_JUDGE_LAG;
        drive(
            &mut e,
            vec![
                Step::Open(1, 10, 0, 10 * MS),
                Step::Batch(0, 9 * MS, 10 * MS),
                // The other CPU goes on; the deadline (12 ms) is not judged before `lag` past it.
                Step::Batch(1, 10 * MS, 12 * MS + lag),
            ],
        );
        assert!(e.firings().is_empty(), "{:?}", e.firings());
        drive(&mut e, vec![Step::Batch(1, 12 * MS + lag, 13 * MS + lag)]);
        let f = e.take_new().to_vec();
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!((f[0].at, f[0].start, f[0].end), (12 * MS, 10 * MS, 13 * MS));
        assert_eq!(f[0].who, "vsync");
        assert!(f[0].detail.contains("still open 3.0 ms"), "{}", f[0].detail);
        // Judged again later: nothing more.
        drive(&mut e, vec![Step::Batch(1, 13 * MS + lag, 900 * MS)]);
        assert!(e.take_new().is_empty());
        // The state closes at last: the firing is completed, not repeated.
        drive(&mut e, vec![Step::Close(state(1, 10, 10 * MS, 950 * MS))]);
        assert!(e.take_new().is_empty());
        let revised = e.take_revised();
        assert_eq!(revised.len(), 1, "{revised:?}");
        assert_eq!(
            (revised[0].at, revised[0].start, revised[0].end),
            (12 * MS, 10 * MS, 950 * MS)
        );
        assert!(
            revised[0].detail.contains("lasted 940"),
            "{}",
            revised[0].detail
        );
        assert_eq!(e.firings().len(), 1);
        assert_eq!(e.firings()[0].end, 950 * MS);
    }

    #[test]
    fn a_long_state_closing_before_its_deadline_is_judged_fires_once_at_its_closing() {
        let mut e = engine(&["state:irq>2ms"]);
        declare(&mut e);
        drive(
            &mut e,
            vec![
                Step::Open(1, 10, 0, 10 * MS),
                Step::Batch(0, 10 * MS, 10 * MS),
                Step::Close(state(1, 10, 10 * MS, 15 * MS)),
                Step::Batch(0, 15 * MS, 15 * MS),
                // Short states, opened and closed, never fire.
                Step::Open(1, 11, 0, 20 * MS),
                Step::Close(state(1, 11, 20 * MS, 21 * MS)),
                Step::Batch(1, 20 * MS, 21 * MS),
                Step::Batch(0, 15 * MS, 2_000 * MS),
            ],
        );
        let f = e.firings();
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!((f[0].at, f[0].end), (12 * MS, 15 * MS));
        assert!(e.take_revised().is_empty());
    }

    #[test]
    fn a_cpu_whose_batches_come_late_is_not_taken_for_a_hang() {
        let mut e = engine(&["state:irq@vsync>2ms"]);
        declare(&mut e);
        // CPU 1's batches arrive 400 ms behind CPU 0's: the judging lag becomes 800 ms.
        drive(
            &mut e,
            vec![
                Step::Batch(0, 0, 500 * MS),
                Step::Batch(1, 100 * MS, 110 * MS),
                Step::Open(1, 10, 1, 105 * MS),
            ],
        );
        assert_eq!(e.judge_lag(), 800 * MS);
        drive(&mut e, vec![Step::Batch(0, 500 * MS, 900 * MS)]);
        assert!(e.firings().is_empty(), "{:?}", e.firings());
        // CPU 1's next batch closes it in time.
        drive(
            &mut e,
            vec![
                Step::Close(Event {
                    cpu: Some(1),
                    ..state(1, 10, 105 * MS, 106 * MS)
                }),
                Step::Batch(1, 106 * MS, 120 * MS),
                Step::Batch(0, 900 * MS, 3_000 * MS),
            ],
        );
        assert!(e.firings().is_empty(), "{:?}", e.firings());
    }

    #[test]
    fn a_missing_periodic_start_fires_at_its_deadline_and_the_late_start_completes_it() {
        let mut e = engine(&["gap:running@vsync-cb>30ms"]);
        declare(&mut e);
        let lag = MIN_JUDGE_LAG;
        drive(
            &mut e,
            vec![
                Step::Open(3, 12, 0, 0),
                Step::Close(state(3, 12, 0, MS)),
                Step::Open(3, 12, 1, 20 * MS),
                Step::Close(state(3, 12, 20 * MS, 21 * MS)),
                Step::Batch(1, 0, 21 * MS),
                // Other producers' starts do not count.
                Step::Open(3, 11, 0, 30 * MS),
                Step::Batch(0, 30 * MS, 50 * MS + lag),
            ],
        );
        assert!(e.firings().is_empty(), "{:?}", e.firings());
        // Only heartbeats now: the board is idle, the callback never ran again.
        drive(&mut e, vec![Step::Heartbeat(60 * MS + lag)]);
        let f = e.take_new().to_vec();
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!((f[0].at, f[0].start, f[0].end), (50 * MS, 20 * MS, 60 * MS));
        assert!(
            f[0].detail.contains("no running on vsync-cb for 40.0 ms"),
            "{}",
            f[0].detail
        );
        drive(
            &mut e,
            vec![
                Step::Heartbeat(2_000 * MS),
                // It comes back at last: completed, not fired again; the next gap is fine.
                Step::Open(3, 12, 0, 2_010 * MS),
                Step::Close(state(3, 12, 2_010 * MS, 2_011 * MS)),
                Step::Open(3, 12, 0, 2_030 * MS),
                Step::Batch(0, 2_010 * MS, 2_030 * MS),
            ],
        );
        assert!(e.take_new().is_empty(), "{:?}", e.firings());
        let revised = e.take_revised();
        assert_eq!(revised.len(), 1);
        assert_eq!((revised[0].start, revised[0].end), (20 * MS, 2_010 * MS));
        assert!(
            revised[0].detail.contains("started 1.99"),
            "{}",
            revised[0].detail
        );
        assert_eq!(e.firings().len(), 1);
    }
}
