//! Where a source's byte stream goes: stored whole by an [`Ingest`], or, with a flight recorder configured
//! ([`IngestConfig::flight`]), watched by a [`FlightRecorder`] that stores only the windows its triggers
//! ask for. Every source (TCP, serial, replayed file) feeds an [`Intake`] and does not need to know which.
//!
//! This is the one place that knows both: the recorder saves its windows through an [`Ingest`] of its own,
//! so the ingest cannot also own the recorder.

use crate::Result;
use crate::flight::FlightRecorder;
use crate::session::{Ingest, IngestConfig, Notice, SessionReport, SessionWindow};
use socscope_wire::refusal::RefusalReason;

/// One byte stream's way into the store.
pub enum Intake {
    /// Every session stored whole.
    Whole(Box<Ingest>),
    /// Only the windows around triggers stored (`--flight-recorder`).
    Flight(Box<FlightRecorder>),
}

impl Intake {
    /// The intake for the stream from `source`: a flight recorder when `config.flight` is set.
    pub fn new(config: IngestConfig, source: impl Into<String>) -> Self {
        let source = source.into();
        if config.flight.is_some()
            && let Some(recorder) = FlightRecorder::new(config.clone(), source.clone())
        {
            return Self::Flight(Box::new(recorder));
        }
        Self::Whole(Box::new(Ingest::new(config, source)))
    }

    /// Starts at most `per_minute` sessions a minute on this stream (see [`Ingest::limit_sessions`]).
    /// A flight recorder starts no trace per session (only per saved window), so it is not limited.
    pub fn limit_sessions(&mut self, per_minute: usize) {
        if let Self::Whole(ingest) = self {
            ingest.limit_sessions(per_minute);
        }
    }

    /// Shares a session-rate window with the collector's other connections (see
    /// [`Ingest::limit_sessions_shared`]); not applied to a flight recorder, as [`Self::limit_sessions`].
    pub fn limit_sessions_shared(&mut self, window: SessionWindow) {
        if let Self::Whole(ingest) = self {
            ingest.limit_sessions_shared(window);
        }
    }

    /// Feeds bytes from the stream (see [`Ingest::feed`]).
    pub fn feed(&mut self, bytes: &[u8]) -> Result<()> {
        match self {
            Self::Whole(ingest) => ingest.feed(bytes),
            Self::Flight(recorder) => {
                recorder.feed(bytes);
                Ok(())
            }
        }
    }

    /// Commits or saves what is due while the link is idle (see [`Ingest::tick`]).
    pub fn tick(&mut self) -> Result<()> {
        match self {
            Self::Whole(ingest) => ingest.tick(),
            Self::Flight(recorder) => {
                recorder.tick();
                Ok(())
            }
        }
    }

    /// Notices since the last call.
    pub fn take_notices(&mut self) -> Vec<Notice> {
        match self {
            Self::Whole(ingest) => ingest.take_notices(),
            Self::Flight(recorder) => recorder.take_notices(),
        }
    }

    /// Whether a session has started on this stream.
    pub fn has_had_session(&self) -> bool {
        match self {
            Self::Whole(ingest) => ingest.has_had_session(),
            Self::Flight(recorder) => recorder.has_had_session(),
        }
    }

    /// Why the collector will not store (or watch) this stream's session, said to the board before the
    /// link closes (see [`Ingest::take_refusal`] and [`FlightRecorder::take_refusal`]).
    pub fn take_refusal(&mut self) -> Option<(RefusalReason, String)> {
        match self {
            Self::Whole(ingest) => ingest.take_refusal(),
            Self::Flight(recorder) => recorder.take_refusal(),
        }
    }

    /// Frames that belonged to no session (see [`Ingest::orphan_frames`]).
    pub fn orphan_frames(&self) -> u64 {
        match self {
            Self::Whole(ingest) => ingest.orphan_frames(),
            Self::Flight(recorder) => recorder.orphan_frames(),
        }
    }

    /// The stream ended: closes what is open; returns every session report and the last notices.
    pub fn finish(self) -> Result<(Vec<SessionReport>, Vec<Notice>)> {
        match self {
            Self::Whole(ingest) => ingest.finish(),
            Self::Flight(recorder) => Ok(recorder.finish()),
        }
    }
}
