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
