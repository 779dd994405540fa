//! Triggers and the flight recorder on the command line: `collect --trigger … --flight-recorder …`
//! (parsed and composed here: the `reference:` rule's online comparison comes from the analysis crate and
//! is handed to the collector as a probe), and `socscope trigger` (an external trigger sent to a running
//! collector).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use serde_json::json;
use socscope_analysis::compare::ReferenceProfile;
use socscope_analysis::online_compare::{OnlineComparison, WINDOW_SLICES};
use socscope_collector::flight::{DEFAULT_FLIGHT_MEMORY, FlightConfig};
use socscope_collector::trigger::{
    Probe, ProbeFactory, ProbeFiring, RuleKind, TriggerRule, TriggerSet,
};
use socscope_tracedb::{Timestamp, units};

use crate::input::bad_argument;
use crate::out::outln;

/// Slices the reference of a `reference:` rule is cut into (as `socscope compare`'s default).
pub const REFERENCE_SLICES: usize = 100;

/// The trigger and flight-recorder options of `socscope collect`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TriggerArgs {
    /// A trigger rule, checked on every record as it arrives (repeatable): state:TYPE[@PRODUCER]>DURATION
    /// (a state lasting too long, fired while it is still open), gap:TYPE[@PRODUCER]>DURATION (a
    /// periodic event coming late, fired while it is still missing),
    /// marker:REGEX (a marker or user event whose text or type matches), loss (records lost), or
    /// reference:TRACE>SCORE (the run departs from a reference trace). Firings are stored as annotations.
    #[arg(long = "trigger", value_name = "RULE")]
    pub triggers: Vec<String>,
    /// Keep only the last SECONDS of each board's stream (compressed, in memory) and write a trace only
    /// when a trigger fires: the window from --pre before it to --post after it.
    #[arg(long, value_name = "SECONDS", value_parser = crate::input::positive_seconds)]
    pub flight_recorder: Option<f64>,
    /// The most memory one board's flight recorder may take, in bytes (oldest data goes first).
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_FLIGHT_MEMORY, requires = "flight_recorder")]
    pub flight_memory: usize,
    /// How much before a trigger a saved window starts (default: half the flight recorder, at most 10 s).
    #[arg(long, value_name = "SECONDS", value_parser = crate::input::seconds, requires = "flight_recorder")]
    pub pre: Option<f64>,
    /// How long after a trigger a saved window goes on (default 2 s); triggers within it join the window.
    #[arg(long, value_name = "SECONDS", value_parser = crate::input::seconds, requires = "flight_recorder")]
    pub post: Option<f64>,
    /// The most windows saved, all boards together (the others are counted, not saved).
    #[arg(long, value_name = "N", requires = "flight_recorder")]
    pub max_saves: Option<u64>,
    /// The control socket for `socscope trigger` (default DIR/.socscope-control; opened when there are
    /// triggers or a flight recorder).
    #[arg(long, value_name = "PATH")]
    pub control: Option<PathBuf>,
}

/// What `collect` was set up with.
pub struct Rig {
    pub triggers: Option<TriggerSet>,
    pub flight: Option<FlightConfig>,
    pub control: Option<PathBuf>,
}

fn ns(seconds: f64) -> Timestamp {
    (seconds * 1e9).round().min(i64::MAX as f64) as Timestamp
}

/// Parses the rules (a bad one is refused with its position, exit status 2), loads the references and
/// checks the flight recorder's numbers, before anything is created.
pub fn setup(args: &TriggerArgs, dir: &Path) -> Result<Rig> {
    let mut rules = Vec::new();
    for text in &args.triggers {
        let rule: TriggerRule = text
            .parse()
            .map_err(|e: socscope_collector::trigger::RuleError| bad_argument!("--trigger: {e}"))?;
        rules.push(rule);
    }
    let mut probes: Vec<(usize, Arc<dyn ProbeFactory>)> = Vec::new();
    for (i, r) in rules.iter().enumerate() {
        if let RuleKind::Reference { trace, score } = &r.kind {
            let reader = crate::input::open_trace(trace)
                .with_context(|| format!("--trigger {}: the reference trace", r.text))?;
            let profile = ReferenceProfile::load(&reader, REFERENCE_SLICES).map_err(|e| {
                anyhow::anyhow!("--trigger {}: cannot read the reference: {e}", r.text)
            })?;
            probes.push((
                i,
                Arc::new(ReferenceProbeFactory {
                    profile: Arc::new(profile),
                    threshold: *score,
                }),
            ));
        }
    }
    let flight = match args.flight_recorder {
        None => None,
        Some(window) => {
            let pre = args.pre.unwrap_or((window / 2.0).min(10.0));
            if pre > window {
                return Err(bad_argument!(
                    "--pre {pre} s is longer than the --flight-recorder window of {window} s: the recorder would not hold it"
                ));
            }
            if args.flight_memory < socscope_collector::flight::SEGMENT_BYTES * 2 {
                return Err(bad_argument!(
                    "--flight-memory {} is below the least a recorder needs ({} bytes)",
                    args.flight_memory,
                    socscope_collector::flight::SEGMENT_BYTES * 2
                ));
            }
            let mut f = FlightConfig::new(ns(window), ns(pre), ns(args.post.unwrap_or(2.0)));
            f.memory = args.flight_memory;
            f.max_saves = args.max_saves;
            Some(f)
        }
    };
    let wanted = !rules.is_empty() || flight.is_some() || args.control.is_some();
    let triggers = if wanted {
        Some(TriggerSet::new(rules, probes).map_err(|e| anyhow::anyhow!(e))?)
    } else {
        None
    };
    let control = wanted.then(|| {
        args.control
            .clone()
            .unwrap_or_else(|| socscope_collector::control::control_path(dir))
    });
    Ok(Rig {
        triggers,
        flight,
        control,
    })
}

/// Makes the online comparison of a `reference:` rule for each session.
struct ReferenceProbeFactory {
    profile: Arc<ReferenceProfile>,
    threshold: f64,
}

impl ProbeFactory for ReferenceProbeFactory {
    fn start(&self) -> Box<dyn Probe> {
        Box::new(ReferenceProbe(OnlineComparison::new(
            self.profile.clone(),
            self.threshold,
        )))
    }
}

struct ReferenceProbe(OnlineComparison);

impl Probe for ReferenceProbe {
    fn state(&mut self, producer: &str, ty: &str, start: Timestamp, end: Timestamp) {
        self.0.state(producer, ty, start, end);
    }

    fn advance(&mut self, now: Timestamp) -> Vec<ProbeFiring> {
        self.0
            .advance(now)
            .into_iter()
            .map(|d| ProbeFiring {
                at: d.end,
                start: d.start,
                end: d.end,
                value: d.score,
                detail: format!(
                    "departs from the reference: score {:.2} over the {} slices up to {} s (most: {})",
                    d.score,
                    WINDOW_SLICES,
                    units::timestamp(d.end),
                    d.who
                ),
                who: d.who,
            })
            .collect()
    }
}

/// `socscope trigger`.
#[derive(clap::Args, Debug)]
pub struct TriggerCmdArgs {
    /// The catalog directory of the running collector (its control socket is DIR/.socscope-control).
    #[arg(long, default_value = crate::DEFAULT_DIR)]
    pub dir: PathBuf,
    /// The collector's control socket, if it was given one (--control).
    #[arg(long, value_name = "PATH")]
    pub control: Option<PathBuf>,
    /// Why: stored with the annotation.
    #[arg(long, default_value = "socscope trigger")]
    pub reason: String,
    /// The collector's token (--token), if it has one.
    #[arg(long, value_name = "SECRET")]
    pub token: Option<String>,
    /// The same, read from FILE (its first line).
    #[arg(long, value_name = "FILE", conflicts_with = "token")]
    pub token_file: Option<PathBuf>,
    /// One JSON line instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run_trigger(args: TriggerCmdArgs) -> Result<ExitCode> {
    let path = args
        .control
        .clone()
        .unwrap_or_else(|| socscope_collector::control::control_path(&args.dir));
    let token = match (&args.token, &args.token_file) {
        (Some(t), _) => Some(t.clone()),
        (None, Some(file)) => Some(
            std::fs::read_to_string(file)
                .with_context(|| format!("cannot read the token file {}", file.display()))?
                .lines()
                .next()
                .unwrap_or_default()
                .trim()
                .to_string(),
        ),
        (None, None) => None,
    };
    let n = socscope_collector::control::send_trigger(&path, token.as_deref(), &args.reason)?;
    if args.json {
        outln!(
            "{}",
            json!({"event": "trigger_sent", "socket": path, "reason": args.reason, "external_triggers": n})
        );
    } else {
        outln!(
            "external trigger {n} sent to the collector on {} ({})",
            path.display(),
            args.reason
        );
    }
    Ok(ExitCode::SUCCESS)
}
