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
    let all_labels = crate::hierarchy::producer_labels(&producers);
    let labels: Vec<String> = threads
        .keys()
        .map(|id| all_labels.get(id).cloned().unwrap_or_default())
        .collect();
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

#[cfg(test)]
mod tests {
    use super::*;
    use socscope_tracedb::{Event, Producer, TraceHeader, TraceWriter};

    /// Two CPUs over [0, 400): cpu0 runs demux (21) 0–150, idles 150–250, runs vdec (23) 250–400;
    /// cpu1 runs the other demux (22) 50–120, vdec 120–180, then idles 180–400.
    fn two_cpus() -> (tempfile::TempDir, TraceReader) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cpu.db");
        let mut w = TraceWriter::create(&path, &TraceHeader::default()).unwrap();
        // The types as the collector declares them.
        let [on_cpu, idle] = socscope_tracedb::cpu_track_types();
        w.add_event_type(&on_cpu).unwrap();
        w.add_event_type(&idle).unwrap();
        let p = |id, parent, kind, local_id, name: &str| Producer {
            id,
            parent,
            kind,
            local_id,
            name: name.into(),
        };
        for producer in [
            p(1, None, ProducerKind::Cpu, 0, "cpu0"),
            p(2, None, ProducerKind::Cpu, 1, "cpu1"),
            p(10, None, ProducerKind::Process, 300, "player"),
            p(21, Some(10), ProducerKind::Thread, 318, "demux"),
            p(22, Some(10), ProducerKind::Thread, 330, "demux"),
            p(23, Some(10), ProducerKind::Thread, 319, "vdec"),
        ] {
            w.add_producer(&producer).unwrap();
        }
        let ran = |ts, end, cpu: u32, thread: u64| {
            Event::state(ts, end, 0, ON_CPU_TYPE, cpu, None)
                .with_params(vec![ParamValue::Unsigned(thread), ParamValue::Unsigned(0)])
        };
        let idled = |ts, end, cpu| Event::state(ts, end, 0, CPU_IDLE_TYPE, cpu, None);
        for e in [
            ran(0, 150, 1, 21),
            ran(50, 120, 2, 22),
            ran(120, 180, 2, 23),
            idled(150, 250, 1),
            idled(180, 400, 2),
            ran(250, 400, 1, 23),
        ] {
            w.push(&e).unwrap();
        }
        w.finish(true).unwrap();
        let reader = TraceReader::open(&path).unwrap();
        (dir, reader)
    }

    #[test]
    fn cpu_and_thread_time_over_an_interval_are_counted_by_hand() {
        let (_dir, reader) = two_cpus();
        // Over [100, 300): cpu0 runs demux 100–150 and vdec 250–300 (100 ns), idles 150–250 (100 ns);
        // cpu1 runs demux 100–120 and vdec 120–180 (80 ns), idles 180–300 (120 ns).
        let u = cpu_utilisation(&reader, TimeRange::new(100, 300)).unwrap();
        assert_eq!(u.interval_ns, 200);
        assert_eq!(
            u.cpus,
            [
                CpuUse {
                    cpu: "cpu0".into(),
                    busy_ns: 100,
                    idle_ns: 100,
                    busy_percent: 50.0,
                },
                CpuUse {
                    cpu: "cpu1".into(),
                    busy_ns: 80,
                    idle_ns: 120,
                    busy_percent: 40.0,
                },
            ]
        );
        // vdec: 50 ns on cpu0 and 60 on cpu1; the two demux threads told apart by id.
        let threads: Vec<_> = u
            .threads
            .iter()
            .map(|t| (t.thread.as_str(), t.process.as_deref(), t.cpu_ns, t.percent))
            .collect();
        assert_eq!(
            threads,
            [
                ("vdec", Some("player"), 110, 55.0),
                ("demux #21", Some("player"), 50, 25.0),
                ("demux #22", Some("player"), 20, 10.0),
            ]
        );
        // Over the whole trace every CPU's time is accounted for, busy or idle.
        let all = cpu_utilisation(&reader, TimeRange::new(0, 400)).unwrap();
        assert_eq!(
            all.cpus
                .iter()
                .map(|c| (c.busy_ns, c.idle_ns))
                .collect::<Vec<_>>(),
            [(300, 100), (130, 220)]
        );
        // An interval where only one demux ran still labels it as every output does: the trace
        // has two, so `stats` and `timeline` over any interval match it by the same label.
        let early = cpu_utilisation(&reader, TimeRange::new(0, 50)).unwrap();
        assert_eq!(early.threads.len(), 1);
        assert_eq!(
            (early.threads[0].thread.as_str(), early.threads[0].cpu_ns),
            ("demux #21", 50)
        );
        assert_eq!(early.cpus[1].busy_ns + early.cpus[1].idle_ns, 0);
    }
}
