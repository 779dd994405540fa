//! Post-mortem mode end to end on the host: an agent whose rings overwrite their oldest blocks dumps them
//! (twice), the collector stores each dump as a trace marked as the window of a post-mortem ring, with the
//! window's records, its start at the oldest one, and no loss for what the ring overwrote.

use std::cell::Cell;
use std::rc::Rc;

use socscope_agent::{Agent, Clock, Config, Mode, Transport, TransportError};
use socscope_collector::IngestConfig;
use socscope_collector::session::Ingest;
use socscope_tracedb::{
    CAPTURE_WINDOW_PARAM, Catalog, Filter, POST_MORTEM_RING, ParamValue, TimeRange, TraceReader,
};

#[derive(Clone, Default)]
struct Ticks(Rc<Cell<u64>>);
impl Clock for Ticks {
    fn now(&mut self) -> u64 {
        self.0.get()
    }
}

#[derive(Default)]
struct Bytes(Vec<u8>);
impl Transport for Bytes {
    fn write_frame(&mut self, f: &[u8]) -> Result<(), TransportError> {
        self.0.extend_from_slice(f);
        Ok(())
    }
}

type Board = Agent<Ticks, 2, 256, 4, 160, 8, 4>;

#[test]
fn each_dump_is_a_trace_marked_as_a_post_mortem_window() {
    let clock = Ticks::default();
    let mut agent = Box::new(Board::new(
        clock.clone(),
        Config {
            board: "pm-board",
            soc: "sim",
            os: "none",
            application: "post-mortem",
            cpu_count: 2,
            tick_rate_hz: 1_000_000,
            session_id: 9,
            flush_latency_ticks: 1000,
            heartbeat_ticks: 1_000_000,
            hello_every_ticks: 1_000_000,
            token: "",
        },
    ));
    agent.set_mode(Mode::PostMortem);
    let mut out = Bytes::default();
    // Interrupts on both CPUs, far more than the rings hold: each irq and its exit, 10 µs apart.
    let mut t = 0;
    let mut record = |n: u64| {
        for i in 0..n {
            for cpu in 0..2 {
                t += 10;
                clock.0.set(t);
                agent.irq_entry(cpu, 27 + u32::from(cpu)).unwrap();
                t += 3;
                clock.0.set(t);
                agent.irq_exit(cpu).unwrap();
            }
            if i % 100 == 0 {
                agent.poll(&mut out).unwrap();
            }
        }
    };
    record(5000);
    assert!(out.0.is_empty(), "nothing streams in post-mortem mode");
    let first = agent.stats();
    agent.dump(&mut out).unwrap();
    let first_dump_end = out.0.len();
    let mut record = |n: u64| {
        for _ in 0..n {
            t += 10;
            clock.0.set(t);
            agent.irq_entry(0, 27).unwrap();
            t += 3;
            clock.0.set(t);
            agent.irq_exit(0).unwrap();
        }
    };
    record(40);
    agent.dump(&mut out).unwrap();
    let second = agent.stats();
    assert!(first.overwritten > 15_000, "{first:?}");
    assert_eq!(
        second.overwritten, first.overwritten,
        "the second window fits its ring"
    );

    let dir = tempfile::tempdir().unwrap();
    let mut ingest = Ingest::new(IngestConfig::new(dir.path()), "post-mortem");
    for slice in out.0.chunks(97) {
        ingest.feed(slice).unwrap();
    }
    let (reports, _) = ingest.finish().unwrap();
    assert_eq!(reports.len(), 2, "one trace per dump: {reports:?}");
    for r in &reports {
        assert!(r.complete, "{r:?}");
        assert_eq!((r.lost_on_board, r.lost_in_transit), (0, 0), "{r:?}");
    }
    let catalog = Catalog::open(dir.path()).unwrap();
    let records = catalog.traces().unwrap();
    assert_eq!(records.len(), 2);
    let held = first.records - first.overwritten;
    assert_eq!(
        reports[0].records, held,
        "the first window: what the rings held"
    );
    assert_eq!(
        reports[1].records, 80,
        "the second: only what came after the first dump"
    );
    let mut windows = Vec::new();
    for report in &reports {
        let reader = TraceReader::open(&report.path).unwrap();
        let info = reader.info().unwrap();
        assert!(
            info.meta
                .params
                .iter()
                .any(|(n, v)| n == CAPTURE_WINDOW_PARAM
                    && *v == ParamValue::String(POST_MORTEM_RING.into())),
            "{:?}",
            info.meta.params
        );
        assert!(reader.losses().unwrap().is_empty());
        let stats: std::collections::BTreeMap<String, i64> = reader
            .ingest_stats()
            .unwrap()
            .into_iter()
            .map(|s| (s.name, s.value))
            .collect();
        windows.push(stats["records_overwritten_on_board"]);
        assert_eq!(stats["records_lost_in_transit"], 0);
        // The trace starts with the window: its first event at (or right after) its origin.
        let events: Vec<_> = reader
            .events(TimeRange::all(), &Filter::all())
            .unwrap()
            .map(|e| e.unwrap())
            .collect();
        assert!(!events.is_empty());
        assert!(
            events[0].ts >= 0 && events[0].ts < 20_000,
            "{:?}",
            events[0]
        );
    }
    assert_eq!(windows, vec![first.overwritten as i64, 0]);
    assert!(first_dump_end < out.0.len());
}
