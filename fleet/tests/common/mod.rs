//! Hand-written traces in a catalog, shared by the dataset's tests.

use std::path::Path;

use socscope_tracedb::{
    Catalog, Event, EventCategory, EventKind, EventType, LossRecord, ParamDef, ParamType,
    ParamValue, Producer, ProducerKind, TraceHeader, TraceWriter,
};

pub const DAY: i64 = 86_400_000_000_000;
/// 2026-03-02T22:00:00Z
pub const NIGHT: i64 = 20_514 * DAY + 22 * 3_600_000_000_000;

pub fn types() -> Vec<EventType> {
    vec![
        EventType {
            id: 1,
            name: "running".into(),
            category: EventCategory::State,
            params: vec![ParamDef::new("prio", ParamType::Signed)],
        },
        EventType {
            id: 2,
            name: "irq".into(),
            category: EventCategory::Punctual,
            params: vec![
                ParamDef::new("line", ParamType::Unsigned),
                ParamDef::new("handler", ParamType::Address),
                ParamDef::new("name", ParamType::String),
                ParamDef::new("load", ParamType::Float),
            ],
        },
        EventType {
            id: 3,
            name: "wakeup".into(),
            category: EventCategory::Link,
            params: vec![],
        },
        EventType {
            id: 4,
            name: "fill".into(),
            category: EventCategory::Variable,
            params: vec![],
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
            name: "video".into(),
        },
        Producer {
            id: 3,
            parent: None,
            kind: ProducerKind::Irq,
            local_id: 7,
            name: "vsync".into(),
        },
    ]
}

/// A trace of `n` rounds on board `board`, registered in the catalog of `dir`; `finish` false leaves it
/// live (its writer is returned to keep it so).
pub fn write_trace(
    dir: &Path,
    name: &str,
    board: &str,
    start: i64,
    n: i64,
    with_losses: bool,
    finish: bool,
) -> Option<TraceWriter> {
    let path = dir.join(format!("{name}.db"));
    let meta = TraceHeader {
        trace_type: "socscope-live".into(),
        board: board.into(),
        soc: "stb7100".into(),
        os: "linux".into(),
        application: "player".into(),
        cpus: 2,
        tick_rate_hz: 1_000_000,
        start_unix_ns: start,
        params: vec![("agent_version".into(), ParamValue::String("4.2.0".into()))],
        ..TraceHeader::default()
    };
    let mut w = TraceWriter::create(&path, &meta).unwrap();
    for t in types() {
        w.add_event_type(&t).unwrap();
    }
    for p in producers() {
        w.add_producer(&p).unwrap();
    }
    for i in 0..n {
        let t = i * 1000;
        let cpu = Some((i % 2) as u16);
        w.push(&Event::state(t, t + 600, 0, 1, 2, cpu).with_params(vec![ParamValue::Signed(-i)]))
            .unwrap();
        w.push(&Event::punctual(t + 10, 2, 3, cpu).with_params(vec![
            ParamValue::Unsigned(i as u64),
            ParamValue::Address(0xdead_0000 + i as u64),
            ParamValue::String(format!("vsync-{}", i % 3)),
            ParamValue::Float(i as f64 / 7.0),
        ]))
        .unwrap();
        if i % 5 == 0 {
            w.push(&Event {
                ts: t + 20,
                type_id: 3,
                producer: 3,
                cpu: None,
                kind: EventKind::Link {
                    end: t + 90,
                    target: 2,
                },
                params: vec![],
            })
            .unwrap();
            w.push(&Event {
                ts: t + 30,
                type_id: 4,
                producer: 2,
                cpu,
                kind: EventKind::Variable {
                    value: i as f64 * 0.5,
                },
                params: vec![],
            })
            .unwrap();
        }
    }
    if with_losses {
        w.add_loss(&LossRecord {
            cpu: Some(1),
            ts: 5_000,
            count: 42,
            seq_from: Some(10),
            seq_to: Some(51),
            reason: "ring buffer full".into(),
        })
        .unwrap();
    }
    if finish {
        w.finish(with_losses).unwrap();
        Catalog::open(dir)
            .unwrap()
            .register_file(&format!("{name}.db"))
            .unwrap();
        None
    } else {
        w.commit().unwrap();
        Catalog::open(dir)
            .unwrap()
            .register_file(&format!("{name}.db"))
            .unwrap();
        Some(w)
    }
}
