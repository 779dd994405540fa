//! Chrome trace-event JSON (opens in ui.perfetto.dev and chrome://tracing): producers as processes (the
//! roots of the hierarchy) and threads, states as complete events, punctual events as instants, links as
//! flow events, variables as counters. The CPUs are the threads of one process, `CPUs`, listed first:
//! each is the CPU's track, a slice per thread that ran on it (named after the thread), with the IRQs
//! and soft IRQs it served nested inside.

use std::io::Write;

use serde_json::{Map, Value as Json, json};

use super::{EventView, ExportError, Index, Kind, Time, TraceView, Value};

fn us(ns: Time) -> f64 {
    ns as f64 / 1000.0
}

fn json_value(v: &Value) -> Json {
    match v {
        Value::Signed(x) => json!(x),
        Value::Unsigned(x) => json!(x),
        Value::Float(x) => json!(x),
        Value::String(s) => json!(s),
        Value::Address(a) => json!(format!("{a:#x}")),
    }
}

fn json_err(e: serde_json::Error) -> ExportError {
    ExportError::Write(std::io::Error::other(e))
}

/// Writes `view` to `out`; the number of events written.
pub fn write(view: &dyn TraceView, out: &mut dyn Write) -> Result<u64, ExportError> {
    let index = Index::new(view);
    out.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")?;
    let mut first = true;
    let mut emit = |out: &mut dyn Write, v: Json| -> Result<(), ExportError> {
        if !first {
            out.write_all(b",\n")?;
        }
        first = false;
        serde_json::to_writer(&mut *out, &v).map_err(json_err)?;
        Ok(())
    };
    let mut producers: Vec<_> = view.producers().iter().collect();
    producers.sort_by_key(|p| p.id);
    // The CPU tracks: one process holding a thread per CPU, by CPU number.
    let mut cpu_tracks: Vec<(u32, u32)> = producers
        .iter()
        .filter_map(|p| Some((p.cpu?, p.id)))
        .collect();
    cpu_tracks.sort_unstable();
    let cpus_pid = cpu_tracks.iter().map(|c| c.1).min();
    let track_of_cpu = |cpu: u16| {
        cpu_tracks
            .iter()
            .find(|c| c.0 == u32::from(cpu))
            .map(|c| c.1)
    };
    if let Some(pid) = cpus_pid {
        emit(
            out,
            json!({"ph": "M", "name": "process_name", "pid": pid, "tid": pid, "args": {"name": "CPUs"}}),
        )?;
        emit(
            out,
            json!({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": pid, "args": {"sort_index": -1}}),
        )?;
    }
    let interrupt = |type_id: u32| matches!(index.type_name(type_id).as_str(), "irq" | "softirq");
    for p in &producers {
        if let (Some(cpu), Some(pid)) = (p.cpu, cpus_pid) {
            emit(
                out,
                json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": p.id, "args": {"name": p.name}}),
            )?;
            emit(
                out,
                json!({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": p.id, "args": {"sort_index": cpu}}),
            )?;
            continue;
        }
        let pid = index.root(p.id);
        if pid == p.id {
            emit(
                out,
                json!({"ph": "M", "name": "process_name", "pid": pid, "tid": p.id, "args": {"name": p.name}}),
            )?;
        }
        emit(
            out,
            json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": p.id, "args": {"name": p.name}}),
        )?;
    }
    let mut flow_id = 0u64;
    let n = view.for_each_event(&mut |e: &EventView| {
        let mut name = index.type_name(e.type_id);
        let on_track = cpus_pid.filter(|_| index.producer(e.producer).is_some_and(|p| p.cpu.is_some()));
        let pid = on_track.unwrap_or_else(|| index.root(e.producer));
        let mut args = Map::new();
        for (k, v) in index.param_names(e.type_id).iter().zip(&e.params) {
            // A state named by a parameter (a syscall's `futex`, a user function's label) shows as that
            // name in Perfetto, its type kept in the arguments.
            if k == "name"
                && let Value::String(n) = v
                && !n.is_empty()
                && matches!(e.kind, Kind::State { .. })
            {
                args.insert("type".into(), json!(name));
                name = n.clone();
            }
            args.insert(k.clone(), json_value(v));
        }
        if let Some(cpu) = e.cpu {
            args.insert("cpu".into(), json!(cpu));
        }
        // A CPU track's slice is named after the thread that ran (the idle task's: "idle").
        if on_track.is_some() {
            match name.as_str() {
                "on_cpu" => {
                    if let Some(Value::Unsigned(t)) = e.params.first() {
                        name = u32::try_from(*t).map_or(name, |t| index.producer_name(t));
                    }
                }
                "cpu_idle" => name = "idle".into(),
                _ => {}
            }
        }
        match e.kind {
            Kind::State { end, depth } => {
                args.insert("depth".into(), json!(depth));
                // An interrupt also shows on the track of the CPU that served it.
                if interrupt(e.type_id)
                    && let (Some(cpus), Some(track)) = (cpus_pid, e.cpu.and_then(track_of_cpu))
                {
                    let mut a = args.clone();
                    a.insert("producer".into(), json!(index.producer_name(e.producer)));
                    emit(out, json!({"ph": "X", "name": index.producer_name(e.producer), "cat": "cpu", "ts": us(e.ts), "dur": us(end - e.ts), "pid": cpus, "tid": track, "args": a}))?;
                }
                emit(out, json!({"ph": "X", "name": name, "cat": "state", "ts": us(e.ts), "dur": us(end - e.ts), "pid": pid, "tid": e.producer, "args": args}))
            }
            Kind::Punctual => emit(out, json!({"ph": "i", "s": "t", "name": name, "cat": "event", "ts": us(e.ts), "pid": pid, "tid": e.producer, "args": args})),
            Kind::Link { end, target } => {
                flow_id += 1;
                emit(out, json!({"ph": "s", "name": name, "cat": "link", "id": flow_id, "ts": us(e.ts), "pid": pid, "tid": e.producer, "args": args}))?;
                emit(out, json!({"ph": "f", "bp": "e", "name": name, "cat": "link", "id": flow_id, "ts": us(end), "pid": index.root(target), "tid": target}))
            }
            Kind::Variable { value } => {
                let series = index.producer_name(e.producer);
                emit(out, json!({"ph": "C", "name": name, "cat": "variable", "ts": us(e.ts), "pid": pid, "tid": e.producer, "args": {series: value}}))
            }
        }
    })?;
    out.write_all(b"\n]}\n")?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::{Category, EventView, Kind, ProducerView, TypeView};

    /// Two CPUs; process `player` (10) with thread `demux` (20); the idle task (11); IRQ `eth0` (30).
    struct TwoCpus {
        types: Vec<TypeView>,
        producers: Vec<ProducerView>,
        events: Vec<EventView>,
    }

    impl TraceView for TwoCpus {
        fn source(&self) -> String {
            "two cpus".into()
        }
        fn t_min(&self) -> Time {
            0
        }
        fn types(&self) -> &[TypeView] {
            &self.types
        }
        fn producers(&self) -> &[ProducerView] {
            &self.producers
        }
        fn for_each_event(
            &self,
            each: &mut dyn FnMut(&EventView) -> Result<(), ExportError>,
        ) -> Result<u64, ExportError> {
            for e in &self.events {
                each(e)?;
            }
            Ok(self.events.len() as u64)
        }
    }

    fn two_cpus() -> TwoCpus {
        let ty = |id, name: &str, params: &[&str]| TypeView {
            id,
            name: name.into(),
            category: Category::State,
            params: params.iter().map(|p| (*p).into()).collect(),
        };
        let p = |id, parent, name: &str, cpu| ProducerView {
            id,
            parent,
            name: name.into(),
            cpu,
        };
        let state = |ts, end, type_id, producer, cpu, params| EventView {
            ts,
            type_id,
            producer,
            cpu,
            kind: Kind::State { end, depth: 0 },
            params,
        };
        TwoCpus {
            types: vec![
                ty(1, "running", &[]),
                ty(2, "irq", &[]),
                ty(4, "on_cpu", &["thread", "tid"]),
                ty(5, "cpu_idle", &[]),
            ],
            producers: vec![
                p(3, None, "cpu0", Some(0)),
                p(4, None, "cpu1", Some(1)),
                p(10, None, "player", None),
                p(11, None, "swapper", None),
                p(20, Some(10), "demux", None),
                p(30, None, "eth0", None),
            ],
            events: vec![
                state(0, 40_000, 1, 20, Some(1), vec![]),
                state(
                    0,
                    40_000,
                    4,
                    4,
                    Some(1),
                    vec![Value::Unsigned(20), Value::Unsigned(318)],
                ),
                state(10_000, 12_000, 2, 30, Some(1), vec![]),
                state(40_000, 100_000, 5, 4, Some(1), vec![]),
            ],
        }
    }

    #[test]
    fn the_cpus_are_one_process_with_a_track_per_cpu_naming_the_thread_that_ran() {
        let mut out = Vec::new();
        assert_eq!(write(&two_cpus(), &mut out).unwrap(), 4);
        let doc: Json = serde_json::from_slice(&out).unwrap();
        let events = doc["traceEvents"].as_array().unwrap();
        let find = |f: &dyn Fn(&Json) -> bool| events.iter().filter(|e| f(e)).collect::<Vec<_>>();
        // One `CPUs` process (its pid the first CPU's producer), sorted before the others, holding a
        // thread per CPU in CPU order.
        let cpus = find(&|e| e["name"] == "process_name" && e["args"]["name"] == "CPUs");
        assert_eq!(cpus.len(), 1);
        assert_eq!(cpus[0]["pid"], 3);
        assert_eq!(
            find(&|e| e["name"] == "process_sort_index" && e["pid"] == 3)[0]["args"]["sort_index"],
            -1
        );
        let tracks: Vec<_> = find(&|e| e["name"] == "thread_name" && e["pid"] == 3)
            .iter()
            .map(|e| (e["tid"].as_u64().unwrap(), e["args"]["name"].clone()))
            .collect();
        assert_eq!(tracks, [(3, json!("cpu0")), (4, json!("cpu1"))]);
        let order: Vec<_> = find(&|e| e["name"] == "thread_sort_index" && e["pid"] == 3)
            .iter()
            .map(|e| e["args"]["sort_index"].as_u64().unwrap())
            .collect();
        assert_eq!(order, [0, 1]);
        // A CPU is not a process of its own.
        assert!(find(&|e| e["name"] == "process_name" && e["args"]["name"] == "cpu1").is_empty());
        // cpu1's track: `demux` ran, then the idle task; the IRQ it served nested in demux's slice.
        let on_cpu1: Vec<_> = find(&|e| e["ph"] == "X" && e["pid"] == 3 && e["tid"] == 4)
            .iter()
            .map(|e| {
                (
                    e["name"].as_str().unwrap().to_owned(),
                    e["ts"].as_f64().unwrap(),
                    e["dur"].as_f64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            on_cpu1,
            [
                ("demux".to_owned(), 0.0, 40.0),
                ("eth0".to_owned(), 10.0, 2.0),
                ("idle".to_owned(), 40.0, 60.0),
            ]
        );
        // The thread's own slice stays under its process, the IRQ's under its own producer.
        assert_eq!(
            find(&|e| e["ph"] == "X" && e["name"] == "running")[0]["pid"],
            10
        );
        let irq = find(&|e| e["ph"] == "X" && e["name"] == "irq");
        assert_eq!(
            (irq.len(), &irq[0]["pid"], &irq[0]["tid"]),
            (1, &json!(30), &json!(30))
        );
        assert!(find(&|e| e["pid"] == 3 && e["tid"] == 3 && e["ph"] == "X").is_empty());
    }
}
