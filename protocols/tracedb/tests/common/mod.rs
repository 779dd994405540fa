//! Helpers shared by the store tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use socscope_tracedb::*;

pub fn meta() -> TraceHeader {
    TraceHeader {
        trace_type: "test".into(),
        board: "board-a".into(),
        soc: "soc-x".into(),
        os: "linux".into(),
        application: "player".into(),
        cpus: 2,
        tick_rate_hz: 1_000_000_000,
        start_unix_ns: 1_700_000_000_000_000_000,
        description: "a test trace".into(),
        processed: false,
        params: vec![("output_device".into(), ParamValue::String("uart0".into()))],
    }
}

pub fn small_config() -> WriterConfig {
    WriterConfig {
        chunk_events: 16,
        summary_base_shift: 4,
        summary_levels: 6,
        ..WriterConfig::default()
    }
}

pub fn types() -> Vec<EventType> {
    vec![
        EventType {
            id: 1,
            name: "CS".into(),
            category: EventCategory::Punctual,
            params: vec![
                ParamDef::new("OLDPID", ParamType::Signed),
                ParamDef::new("NEWPID", ParamType::Unsigned),
            ],
        },
        EventType {
            id: 2,
            name: "running".into(),
            category: EventCategory::State,
            params: vec![],
        },
        EventType {
            id: 3,
            name: "wakeup".into(),
            category: EventCategory::Link,
            params: vec![],
        },
        EventType {
            id: 4,
            name: "freq".into(),
            category: EventCategory::Variable,
            params: vec![ParamDef::new("unit", ParamType::String)],
        },
        EventType {
            id: 5,
            name: "mem".into(),
            category: EventCategory::Punctual,
            params: vec![
                ParamDef::new("addr", ParamType::Address),
                ParamDef::new("ratio", ParamType::Float),
            ],
        },
    ]
}

pub fn producers() -> Vec<Producer> {
    vec![
        Producer {
            id: 1,
            parent: None,
            kind: ProducerKind::Process,
            local_id: 100,
            name: "player".into(),
        },
        Producer {
            id: 2,
            parent: Some(1),
            kind: ProducerKind::Thread,
            local_id: 101,
            name: "decoder".into(),
        },
        Producer {
            id: 3,
            parent: Some(1),
            kind: ProducerKind::Thread,
            local_id: 102,
            name: "render".into(),
        },
        Producer {
            id: 4,
            parent: None,
            kind: ProducerKind::Irq,
            local_id: 33,
            name: "vsync".into(),
        },
    ]
}

pub fn temp_trace(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

/// A writer of a new trace with the test types and producers declared.
pub fn new_writer(path: &Path, config: WriterConfig) -> TraceWriter {
    let mut w = TraceWriter::create_with(path, &meta(), config).unwrap();
    for t in types() {
        w.add_event_type(&t).unwrap();
    }
    for p in producers() {
        w.add_producer(&p).unwrap();
    }
    w
}

/// Writes `events` (in the given arrival order) into a new trace.
pub fn write(path: &Path, events: &[Event], config: WriterConfig) -> TraceInfo {
    let mut w = new_writer(path, config);
    for e in events {
        w.push(e).unwrap();
    }
    w.finish(true).unwrap()
}

pub fn read_all(r: &TraceReader, range: TimeRange, filter: &Filter) -> Vec<Event> {
    r.events(range, filter)
        .unwrap()
        .map(|e| e.unwrap().event)
        .collect()
}

/// A pseudo-random mixed trace; states arrive at their end, so out of start order.
pub fn mixed_events(n: usize, seed: u64) -> Vec<Event> {
    let mut rng = bench::SplitMix::new(seed);
    let mut out = Vec::new();
    let mut t = 0i64;
    // Pending states (start, end, producer, cpu, depth) emitted once time passes their end.
    let mut pending: Vec<(i64, i64, u32, u16, u16)> = Vec::new();
    while out.len() < n {
        t += rng.below(40) as i64 + 1;
        let cpu = rng.below(2) as u16;
        let producer = 1 + rng.below(4) as u32;
        pending.retain(|&(s, e, p, c, d)| {
            if e <= t {
                out.push(Event::state(s, e, d, 2, p, Some(c)));
                false
            } else {
                true
            }
        });
        match rng.below(10) {
            0 | 1 => {
                let len = if rng.below(20) == 0 {
                    rng.below(5_000) as i64
                } else {
                    rng.below(60) as i64
                };
                pending.push((t, t + len, producer, cpu, rng.below(3) as u16));
            }
            2 => out.push(Event {
                ts: t,
                type_id: 3,
                producer,
                cpu: Some(cpu),
                kind: EventKind::Link {
                    end: t + rng.below(30) as i64,
                    target: 1 + rng.below(4) as u32,
                },
                params: vec![],
            }),
            3 => out.push(Event {
                ts: t,
                type_id: 4,
                producer,
                cpu: None,
                kind: EventKind::Variable {
                    value: rng.below(1000) as f64 / 7.0,
                },
                params: vec![ParamValue::String(
                    if rng.below(2) == 0 { "MHz" } else { "kHz" }.into(),
                )],
            }),
            4 => out.push(Event::punctual(t, 5, producer, Some(cpu)).with_params(vec![
                ParamValue::Address(0x8000_0000 + rng.below(1 << 20)),
                ParamValue::Float(rng.below(100) as f64 / 10.0),
            ])),
            _ => out.push(Event::punctual(t, 1, producer, Some(cpu)).with_params(vec![
                ParamValue::Signed(rng.below(8) as i64 - 2),
                ParamValue::Unsigned(rng.below(8)),
            ])),
        }
    }
    for (s, e, p, c, d) in pending {
        out.push(Event::state(s, e, d, 2, p, Some(c)));
    }
    out
}

/// Sorted by start time, ties keep arrival order... except that the store breaks ties by
/// chunk, so tests compare multisets at equal timestamps through this key.
pub fn sort_key(e: &Event) -> (i64, u32, u32, i64, String) {
    (e.ts, e.type_id, e.producer, e.end(), format!("{:?}", e))
}

pub fn sorted(mut v: Vec<Event>) -> Vec<Event> {
    v.sort_by_key(sort_key);
    v
}
