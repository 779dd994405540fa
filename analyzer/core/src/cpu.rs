//! CPU utilisation over an interval, per CPU and per thread, read from the CPU tracks the collector
//! writes at ingest (the `on_cpu` and `cpu_idle` states of the CPU producers, `SCHEMA.md`).
//!
//! Start here: [`cpu_utilisation`], [`CpuUtilisation`].

use std::collections::BTreeMap;

use serde::Serialize;
use socscope_tracedb::{
    CPU_IDLE_TYPE, EventKind, Filter, ON_CPU_TYPE, ParamValue, ProducerId, ProducerKind, Result,
    TimeRange, TraceReader,
};

/// One CPU's time over the interval.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CpuUse {
    /// The CPU's producer name (`cpu0`).
    pub cpu: String,
    /// Nanoseconds a thread other than the idle task ran.
    pub busy_ns: i64,
    /// Nanoseconds the idle task ran.
    pub idle_ns: i64,
    /// `busy_ns` as a share of the interval, in percent.
    pub busy_percent: f64,
}

/// One thread's CPU time over the interval, on every CPU.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ThreadUse {
    /// The thread's name.
    pub thread: String,
    /// Its process's name, when it has one.
    pub process: Option<String>,
    /// Nanoseconds it ran, all CPUs together.
    pub cpu_ns: i64,
    /// `cpu_ns` as a share of the interval (of one CPU: a thread on two CPUs at once counts 200).
    pub percent: f64,
}

/// What the CPUs did over an interval.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CpuUtilisation {
    /// The interval's length.
    pub interval_ns: i64,
    /// Per CPU, by CPU number; empty when the trace has no CPU tracks (no context switches, or
    /// written before them).
    pub cpus: Vec<CpuUse>,
    /// Per thread, by decreasing CPU time (the idle task left out).
    pub threads: Vec<ThreadUse>,
}

/// The utilisation of every CPU and thread over `range`.
pub fn cpu_utilisation(reader: &TraceReader, range: TimeRange) -> Result<CpuUtilisation> {
    let producers = reader.producers()?;
    let name = |id: ProducerId| producers.iter().find(|p| p.id == id);
    let mut cpus: Vec<(i64, ProducerId)> = producers
        .iter()
        .filter(|p| p.kind == ProducerKind::Cpu)
        .map(|p| (p.local_id, p.id))
        .collect();
    cpus.sort_unstable();
    let mut busy: BTreeMap<ProducerId, (i64, i64)> = BTreeMap::new();
    let mut threads: BTreeMap<ProducerId, i64> = BTreeMap::new();
    let filter = Filter::all()
        .types([ON_CPU_TYPE, CPU_IDLE_TYPE])
        .producers(cpus.iter().map(|c| c.1));
    for e in reader.states_overlapping(range, &filter)? {
        let e = e?.event;
        let EventKind::State { end, .. } = e.kind else {
            continue;
        };
        let t = range.overlap(e.ts, end);
        if t <= 0 {
            continue;
        }
        let slot = busy.entry(e.producer).or_default();
        if e.type_id == CPU_IDLE_TYPE {
            slot.1 += t;
        } else {
            slot.0 += t;
            if let Some(ParamValue::Unsigned(thread)) = e.params.first()
                && let Ok(thread) = ProducerId::try_from(*thread)
            {
                *threads.entry(thread).or_default() += t;
            }
        }
    }
    let len = range.len().max(1);
    let percent = |ns: i64| 100.0 * ns as f64 / len as f64;
    let cpus = cpus
        .iter()
        .map(|&(_, id)| {
            let (b, i) = busy.get(&id).copied().unwrap_or_default();
            CpuUse {
                cpu: name(id).map_or_else(|| format!("cpu {id}"), |p| p.name.clone()),
                busy_ns: b,
                idle_ns: i,
                busy_percent: percent(b),
            }
        })
        .collect();
    // Threads of one name (each zap's `demux`) told apart as every view tells them (`demux #39`).
    let labels = crate::hierarchy::distinct_names(
        &threads
            .keys()
            .map(|&id| (id, name(id).map_or("", |p| p.name.as_str())))
            .collect::<Vec<_>>(),
    );
    let mut threads: Vec<ThreadUse> = threads
        .into_iter()
        .zip(labels)
        .map(|((id, ns), label)| {
            let p = name(id);
            ThreadUse {
                thread: if p.is_some() {
                    label
                } else {
                    format!("thread {id}")
                },
                process: p
                    .and_then(|p| p.parent)
                    .and_then(name)
                    .map(|q| q.name.clone()),
                cpu_ns: ns,
                percent: percent(ns),
            }
        })
        .collect();
    threads.sort_by(|a, b| {
        b.cpu_ns
            .cmp(&a.cpu_ns)
            .then_with(|| a.thread.cmp(&b.thread))
    });
    Ok(CpuUtilisation {
        interval_ns: range.len(),
        cpus,
        threads,
    })
}
