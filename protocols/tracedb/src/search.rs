//! The predefined event requests of RT-427 §4.1.4, and analysis-result look-ups.
//!
//! Trace and tool requests are methods of [`crate::Catalog`]; producer and file requests are
//! methods of [`TraceReader`] (`producer_by_local_id`, `producers_by_kind`, `files`).

use crate::error::{Result, StoreError};
use crate::filter::{CompareOp, Condition, Filter};
use crate::model::{Cpu, ParamValue, ProducerId, StoredEvent, TimeRange, TypeId};
use crate::reader::TraceReader;
use crate::results::{self, AnalysisData, AnalysisKind, AnalysisResult};

/// One of the predefined event requests. Types are named as in `event_type.name`; parameter
/// values are given as text and parsed with the parameter's type.
#[derive(Debug, Clone, PartialEq)]
pub enum EventSearch {
    /// All events of a CPU.
    ByCpu(Cpu),
    /// All events of a type.
    ByType(String),
    /// All events whose type is among these.
    ByTypes(Vec<String>),
    /// All events of a producer.
    ByProducer(ProducerId),
    /// All events whose producer is among these.
    ByProducers(Vec<ProducerId>),
    /// All events whose timestamp is in the interval.
    InInterval(TimeRange),
    /// All events whose timestamp is in one of the intervals.
    InIntervals(Vec<TimeRange>),
    /// All events of a type whose parameters have these values.
    ByTypeParams {
        /// Type name.
        type_name: String,
        /// `(parameter name, value)` pairs, all required.
        params: Vec<(String, String)>,
    },
    /// Like `ByTypeParams`, restricted to intervals.
    ByTypeParamsInIntervals {
        /// Type name.
        type_name: String,
        /// `(parameter name, value)` pairs, all required.
        params: Vec<(String, String)>,
        /// Intervals.
        intervals: Vec<TimeRange>,
    },
    /// Events whose type is among `types`, timestamp in one of `intervals`, producer among
    /// `producers`.
    ByTypesIntervalsProducers {
        /// Type names.
        types: Vec<String>,
        /// Intervals.
        intervals: Vec<TimeRange>,
        /// Producers.
        producers: Vec<ProducerId>,
    },
}

impl TraceReader {
    fn type_ids(&self, names: &[String]) -> Result<Vec<TypeId>> {
        let types = self.event_types()?;
        Ok(types
            .iter()
            .filter(|t| names.contains(&t.name))
            .map(|t| t.id)
            .collect())
    }

    fn param_filter(&self, type_name: &str, params: &[(String, String)]) -> Result<Filter> {
        let Some(ty) = self.event_type_by_name(type_name)? else {
            return Ok(Filter::all().types([]));
        };
        let mut conds = Vec::new();
        for (name, text) in params {
            let def = ty.params.iter().find(|d| &d.name == name).ok_or_else(|| {
                StoreError::InvalidRequest(format!(
                    "event type {type_name} has no parameter {name}"
                ))
            })?;
            let value = ParamValue::parse(def.ty, text).ok_or_else(|| {
                StoreError::InvalidRequest(format!(
                    "{text:?} is not a valid {} for parameter {name}",
                    def.ty.name()
                ))
            })?;
            conds.push(Condition::param(name.clone(), CompareOp::Eq, value));
        }
        Ok(Filter::all()
            .types([ty.id])
            .condition(Condition::And(conds)))
    }

    /// Runs a predefined request; events come back in timestamp order.
    pub fn search(&self, request: &EventSearch) -> Result<Vec<StoredEvent>> {
        let all = [TimeRange::all()];
        let (filter, intervals): (Filter, &[TimeRange]) = match request {
            EventSearch::ByCpu(c) => (Filter::all().cpus([*c]), &all),
            EventSearch::ByType(t) => (
                Filter::all().types(self.type_ids(std::slice::from_ref(t))?),
                &all,
            ),
            EventSearch::ByTypes(t) => (Filter::all().types(self.type_ids(t)?), &all),
            EventSearch::ByProducer(p) => (Filter::all().producers([*p]), &all),
            EventSearch::ByProducers(p) => (Filter::all().producers(p.iter().copied()), &all),
            EventSearch::InInterval(r) => (Filter::all(), std::slice::from_ref(r)),
            EventSearch::InIntervals(r) => (Filter::all(), r.as_slice()),
            EventSearch::ByTypeParams { type_name, params } => {
                (self.param_filter(type_name, params)?, &all)
            }
            EventSearch::ByTypeParamsInIntervals {
                type_name,
                params,
                intervals,
            } => (self.param_filter(type_name, params)?, intervals.as_slice()),
            EventSearch::ByTypesIntervalsProducers {
                types,
                intervals,
                producers,
            } => (
                Filter::all()
                    .types(self.type_ids(types)?)
                    .producers(producers.iter().copied()),
                intervals.as_slice(),
            ),
        };
        self.events_in_intervals(intervals, &filter)
    }

    /// Analysis results, optionally of one tool and of one kind (RT-427 §4.1.4).
    pub fn analysis_results(
        &self,
        tool_name: Option<&str>,
        kind: Option<AnalysisKind>,
    ) -> Result<Vec<AnalysisResult>> {
        results::results(self.connection(), self.path(), tool_name, kind)
    }

    /// The data of an analysis result.
    pub fn analysis_data(&self, result_id: i64) -> Result<Option<AnalysisData>> {
        results::data(self.connection(), self.path(), result_id)
    }
}
