//! A simulated set-top box that runs the real socscope agent on the host: a deterministic discrete-event
//! model of a two-CPU board playing a stream (demux, video and audio decoders, sinks, a 50 Hz vsync
//! callback, timer and network interrupts) with injectable zapping, CPU stress and I/O stress.
//!
//! Start here: [`SimConfig`] (what to simulate), [`run`] (simulate and stream through any
//! [`socscope_agent::Transport`]), [`SimSummary`] (what was sent), and the transports in [`transport`].
//!
//! Simulated time is decoupled from wall time: the model is written in microseconds of "workload time",
//! and `--rate` compresses that time scale (a faster board) while the announced tick rate grows with it,
//! so the stream looks the same in ticks and only its density per simulated second changes.

mod model;
pub mod transport;

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::Serialize;
use socscope_agent::Transport;

pub use model::MAX_CPUS;

/// The event rate of the default workload, in events per simulated second.
pub const BASE_RATE: f64 = 20_000.0;

/// The tick rate of the default workload: microseconds, as KPTrace.
pub const BASE_TICK_HZ: u64 = 1_000_000;

/// A perturbation window: it starts `at` seconds into the run and lasts `duration` seconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Scenario {
    /// Start, in simulated seconds.
    pub at: f64,
    /// Length, in simulated seconds.
    pub duration: f64,
}

impl Scenario {
    /// Whether simulated second `s` falls inside the window.
    pub fn contains(&self, s: f64) -> bool {
        s >= self.at && s < self.at + self.duration
    }
}

/// Why a scenario string is not `AT:DURATION`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("expected AT:DURATION in seconds (e.g. 20:5), got {0:?}")]
pub struct ScenarioParseError(String);

impl FromStr for Scenario {
    type Err = ScenarioParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || ScenarioParseError(s.to_owned());
        let (at, duration) = s.split_once(':').ok_or_else(bad)?;
        let at: f64 = at.trim().parse().map_err(|_| bad())?;
        let duration: f64 = duration.trim().parse().map_err(|_| bad())?;
        if !(at.is_finite() && duration.is_finite() && at >= 0.0 && duration > 0.0) {
            return Err(bad());
        }
        Ok(Self { at, duration })
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.at, self.duration)
    }
}

/// What to simulate.
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    /// The seed of every random choice: the same seed gives the same stream, byte for byte.
    pub seed: u64,
    /// Simulated seconds to run.
    pub duration_s: f64,
    /// CPUs of the board (1 to [`MAX_CPUS`]).
    pub cpus: u16,
    /// Target event rate in events per simulated second; [`BASE_RATE`] is the realistic default.
    pub rate: f64,
    /// Zap to another channel every this many simulated seconds.
    pub zap_every_s: Option<f64>,
    /// Windows during which a CPU-busy task preempts the pipeline.
    pub cpu_stress: Vec<Scenario>,
    /// Windows during which a dd-like writer and the journal thread delay the vsync callback.
    pub io_stress: Vec<Scenario>,
    /// Pace the simulation to the wall clock (live demos).
    pub realtime: bool,
    /// The board name sent in `Hello`.
    pub board: &'static str,
    /// The session id sent in `Hello`; 0 derives it from the seed.
    pub session_id: u64,
    /// The shared secret sent in `Hello` for a collector that requires one (`socscope collect
    /// --token`); empty for none.
    pub token: &'static str,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            seed: 1,
            duration_s: 10.0,
            cpus: 2,
            rate: BASE_RATE,
            zap_every_s: None,
            cpu_stress: Vec::new(),
            io_stress: Vec::new(),
            realtime: false,
            board: "sim-stb",
            session_id: 0,
            token: "",
        }
    }
}

impl SimConfig {
    /// The tick rate announced in `Hello`: 1 MHz at the base rate, scaled with `rate` so that consecutive
    /// records on a CPU stay as many ticks apart as in the default workload.
    pub fn tick_rate_hz(&self) -> u64 {
        let scale = (self.rate / BASE_RATE).max(1e-3);
        ((BASE_TICK_HZ as f64) * scale).round().max(1_000.0) as u64
    }

    /// Checks the values a user can get wrong.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(self.duration_s.is_finite() && self.duration_s > 0.0) {
            return Err(ConfigError::Duration(self.duration_s));
        }
        if self.cpus == 0 || usize::from(self.cpus) > MAX_CPUS {
            return Err(ConfigError::Cpus(self.cpus));
        }
        if !(self.rate.is_finite() && self.rate >= 100.0 && self.rate <= 1e9) {
            return Err(ConfigError::Rate(self.rate));
        }
        if let Some(z) = self.zap_every_s
            && !(z.is_finite() && z >= 0.2)
        {
            return Err(ConfigError::ZapEvery(z));
        }
        Ok(())
    }
}

/// A configuration the simulator refuses.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// The duration must be a positive number of seconds.
    #[error("duration must be a positive number of seconds, got {0}")]
    Duration(f64),
    /// The CPU count is out of range.
    #[error("cpus must be between 1 and {MAX_CPUS}, got {0}")]
    Cpus(u16),
    /// The rate is out of range.
    #[error("rate must be between 100 and 1e9 events per second, got {0}")]
    Rate(f64),
    /// Zapping more often than every 0.2 s leaves no time to tune.
    #[error("zap interval must be at least 0.2 seconds, got {0}")]
    ZapEvery(f64),
}

/// Why a run stopped early.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The transport refused a frame for good.
    #[error("the output was closed after {bytes} bytes")]
    Closed {
        /// Bytes sent before the failure.
        bytes: u64,
        /// What was sent up to then.
        summary: Box<SimSummary>,
    },
}

/// What a run sent: the numbers printed at the end, and the JSON object of `--json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SimSummary {
    /// Records the agent accepted (every one is in the stream).
    pub events: u64,
    /// Bytes written to the transport, all frames included.
    pub bytes: u64,
    /// `bytes / events`.
    pub bytes_per_event: f64,
    /// Records the agent dropped because a ring was full (each reported in a `Loss` frame).
    pub dropped: u64,
    /// Simulated seconds.
    pub duration_s: f64,
    /// Frames written.
    pub frames: u64,
    /// The seed.
    pub seed: u64,
    /// CPUs simulated.
    pub cpus: u16,
    /// The tick rate announced in `Hello`.
    pub tick_rate_hz: u64,
    /// Records per simulated second.
    pub events_per_s: f64,
    /// Wall-clock seconds the run took.
    pub wall_s: f64,
    /// Video frames decoded ("frame decoded" markers).
    pub frames_decoded: u64,
    /// Frames pushed to the display by the vsync callback (`KM` marks).
    pub frames_pushed: u64,
    /// Zaps done.
    pub zaps: u64,
    /// Records per type, by the name the collector gives them (`context_switch`, not `C`).
    pub per_type: BTreeMap<&'static str, u64>,
}

impl fmt::Display for SimSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} events, {} bytes, {:.2} bytes/event, {} dropped in {} simulated s ({:.0} events/s of wall time)",
            self.events,
            self.bytes,
            self.bytes_per_event,
            self.dropped,
            self.duration_s,
            self.events as f64 / self.wall_s.max(1e-9),
        )
    }
}

/// How far a run has gone, for a progress line while a real-time board streams.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SimProgress {
    /// Simulated seconds done.
    pub simulated_s: f64,
    /// Simulated seconds of the whole run.
    pub duration_s: f64,
    /// Records the agent accepted so far.
    pub events: u64,
    /// Records dropped so far because a ring was full.
    pub dropped: u64,
    /// Bytes written to the transport so far.
    pub bytes: u64,
    /// Wall-clock seconds since the run started.
    pub wall_s: f64,
}

impl fmt::Display for SimProgress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:.1}/{} s simulated: {} events sent ({:.0} events/s), {} dropped",
            self.simulated_s,
            self.duration_s,
            self.events,
            self.events as f64 / self.wall_s.max(1e-9),
            self.dropped,
        )
    }
}

/// Runs the simulation described by `config`, streaming through `transport`, and ends the session with
/// `Bye`. Deterministic: the bytes written depend only on `config` (with `realtime` off or on).
pub fn run<T: Transport>(config: &SimConfig, transport: &mut T) -> Result<SimSummary, SimError> {
    config.validate()?;
    model::Board::new(config).run(transport, None)
}

/// [`run`], calling `on_progress` about every `every` of wall time while it runs (the stream is the same).
pub fn run_with_progress<T: Transport>(
    config: &SimConfig,
    transport: &mut T,
    every: std::time::Duration,
    on_progress: &mut dyn FnMut(&SimProgress),
) -> Result<SimSummary, SimError> {
    config.validate()?;
    model::Board::new(config).run(transport, Some((every, on_progress)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenarios_parse_from_at_colon_duration() {
        assert_eq!(
            "20:5".parse(),
            Ok(Scenario {
                at: 20.0,
                duration: 5.0
            })
        );
        assert_eq!(
            "0.5:0.25".parse(),
            Ok(Scenario {
                at: 0.5,
                duration: 0.25
            })
        );
        for bad in ["", "20", "20:", ":5", "a:b", "-1:5", "3:0", "3:-2", "inf:1"] {
            assert!(bad.parse::<Scenario>().is_err(), "{bad:?}");
        }
        let s: Scenario = "3:2".parse().unwrap();
        assert!(s.contains(3.0) && s.contains(4.99) && !s.contains(5.0) && !s.contains(2.9));
        assert_eq!(s.to_string(), "3:2");
    }

    #[test]
    fn tick_rate_follows_the_event_rate() {
        let at = |rate| {
            SimConfig {
                rate,
                ..SimConfig::default()
            }
            .tick_rate_hz()
        };
        assert_eq!(at(BASE_RATE), 1_000_000);
        assert_eq!(at(5e6), 250_000_000);
        assert_eq!(at(2_000.0), 100_000);
    }

    #[test]
    fn bad_configs_are_refused() {
        let ok = SimConfig::default();
        assert_eq!(ok.validate(), Ok(()));
        assert!(
            SimConfig {
                cpus: 0,
                ..ok.clone()
            }
            .validate()
            .is_err()
        );
        assert!(
            SimConfig {
                cpus: 9,
                ..ok.clone()
            }
            .validate()
            .is_err()
        );
        assert!(
            SimConfig {
                duration_s: 0.0,
                ..ok.clone()
            }
            .validate()
            .is_err()
        );
        assert!(
            SimConfig {
                rate: f64::NAN,
                ..ok.clone()
            }
            .validate()
            .is_err()
        );
        assert!(
            SimConfig {
                zap_every_s: Some(0.01),
                ..ok
            }
            .validate()
            .is_err()
        );
    }

    #[test]
    fn runs_in_process_on_one_and_four_cpus() {
        for cpus in [1, 4] {
            let mut out = transport::WriterTransport::new(Vec::new());
            let config = SimConfig {
                cpus,
                duration_s: 1.0,
                zap_every_s: Some(0.5),
                ..SimConfig::default()
            };
            let s = run(&config, &mut out).unwrap();
            assert_eq!(s.bytes, out.into_inner().len() as u64);
            assert!(s.frames_decoded > 10, "{cpus} cpus: {s:?}");
            assert_eq!(s.dropped, 0);
        }
    }
}
