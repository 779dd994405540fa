//! Small traces for the tests: a fixed set of types and producers, random or hand-written
//! events, written with a fine summary (8 ns buckets) and tiny chunks so every path of the
//! store (summary levels, exact edges, chunk reads) is exercised.

use std::path::PathBuf;

use proptest::prelude::*;
use socscope_tracedb::{
    Event, EventCategory, EventKind, EventType, Producer, ProducerKind, TraceHeader, TraceWriter,
    WriterConfig,
};

/// `running` (state), `marker` (punctual), `wakeup` (link), `allocated_bytes` (variable),
/// `irq` (state).
pub fn types() -> Vec<EventType> {
    let t = |id, name: &str, category| EventType {
        id,
        name: name.into(),
        category,
        params: Vec::new(),
    };
    vec![
        t(1, "running", EventCategory::State),
        t(2, "marker", EventCategory::Punctual),
        t(3, "wakeup", EventCategory::Link),
        t(4, "allocated_bytes", EventCategory::Variable),
        t(5, "irq", EventCategory::State),
    ]
}

/// Process 10 with threads 11 and 12, IRQ line 20.
pub fn producers() -> Vec<Producer> {
    let p = |id, parent, kind, name: &str| Producer {
        id,
        parent,
        kind,
        local_id: i64::from(id),
        name: name.into(),
    };
    vec![
        p(10, None, ProducerKind::Process, "app"),
        p(11, Some(10), ProducerKind::Thread, "app/main"),
        p(12, Some(10), ProducerKind::Thread, "app/worker"),
        p(20, None, ProducerKind::Irq, "irq/7"),
    ]
}

/// A trace to write.
#[derive(Debug, Clone)]
pub struct Spec {
    pub events: Vec<Event>,
}

impl Spec {
    /// Last end time.
    pub fn span(&self) -> i64 {
        self.events.iter().map(|e| e.end()).max().unwrap_or(0) + 1
    }

    /// A hand-written trace over [0, 1000).
    pub fn small() -> Self {
        let mut events = vec![
            Event::state(100, 400, 0, 1, 11, Some(0)),
            Event::state(450, 900, 0, 1, 12, Some(1)),
            Event::state(500, 520, 0, 5, 20, Some(0)),
            Event::punctual(50, 2, 10, Some(0)),
            Event::punctual(600, 2, 11, Some(0)),
            Event {
                ts: 300,
                type_id: 3,
                producer: 11,
                cpu: Some(0),
                kind: EventKind::Link {
                    end: 340,
                    target: 12,
                },
                params: Vec::new(),
            },
        ];
        for (ts, v) in [(0, 10.0), (250, 30.0), (700, 20.0)] {
            events.push(Event {
                ts,
                type_id: 4,
                producer: 12,
                cpu: None,
                kind: EventKind::Variable { value: v },
                params: Vec::new(),
            });
        }
        events.push(Event::punctual(999, 2, 20, Some(1)));
        Self { events }
    }
}

fn event_strategy() -> impl Strategy<Value = Event> {
    let producer = prop::sample::select(vec![10u32, 11, 12, 20]);
    (0i64..2000, 0u8..5, producer, 0i64..300, -50i32..50).prop_map(|(ts, kind, p, len, v)| {
        let cpu = Some((ts % 2) as u16);
        match kind {
            0 => Event::state(ts, ts + len, 0, 1, p, cpu),
            1 => Event::punctual(ts, 2, p, cpu),
            2 => Event {
                ts,
                type_id: 3,
                producer: p,
                cpu,
                kind: EventKind::Link {
                    end: ts + len / 4,
                    target: 11,
                },
                params: Vec::new(),
            },
            3 => Event {
                ts,
                type_id: 4,
                producer: p,
                cpu: None,
                kind: EventKind::Variable {
                    value: f64::from(v) * 1.5,
                },
                params: Vec::new(),
            },
            _ => Event::state(ts, ts + len / 8, 1, 5, 20, cpu),
        }
    })
}

/// Random traces of 1 to 300 events over about 2 µs.
pub fn spec_strategy() -> impl Strategy<Value = Spec> {
    prop::collection::vec(event_strategy(), 1..300).prop_map(|events| Spec { events })
}

/// Writes `spec` into a new temporary directory; returns it (keep it alive) and the path.
pub fn write_spec(spec: &Spec) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    write_to(&path, spec);
    (dir, path)
}

/// Writes `spec` at `path`.
pub fn write_to(path: &std::path::Path, spec: &Spec) {
    let config = WriterConfig {
        chunk_events: 16,
        summary_base_shift: 3,
        summary_levels: 8,
        ..WriterConfig::default()
    };
    let mut w = TraceWriter::create_with(path, &TraceHeader::default(), config).unwrap();
    for t in types() {
        w.add_event_type(&t).unwrap();
    }
    for p in producers() {
        w.add_producer(&p).unwrap();
    }
    let mut events = spec.events.clone();
    events.sort_by_key(|e| e.ts);
    for e in &events {
        w.push(e).unwrap();
    }
    w.finish(true).unwrap();
}
