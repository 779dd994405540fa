//! A reader follows a trace while the collector writes it: every snapshot is a consistent prefix (its event
//! count, its summary count and its events agree, in time order), counts never go down, and the last
//! snapshot is the finished trace.

mod support;

use std::time::{Duration, Instant};

use socscope_sim::SimConfig;
use socscope_tracedb::{Filter, TimeRange, TraceReader};
use support::{Collector, SESSION_TIMEOUT, realtime_sim_over_tcp};

/// What one look at the growing trace saw.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Look {
    events: u64,
    t_max: i64,
    finished: bool,
}

fn look(reader: &TraceReader) -> Look {
    // One read transaction for the whole look, as a view drawing a frame would do.
    let _snapshot = reader.snapshot().unwrap();
    let info = reader.info().unwrap();
    let counted = reader.count(TimeRange::all(), &Filter::all()).unwrap();
    let mut iterated = 0u64;
    let mut last_ts = i64::MIN;
    for e in reader.events(TimeRange::all(), &Filter::all()).unwrap() {
        let e = e.unwrap().event;
        assert!(
            e.ts >= last_ts,
            "events in time order: {} after {last_ts}",
            e.ts
        );
        assert!(e.ts <= info.t_max, "no event after t_max");
        last_ts = e.ts;
        iterated += 1;
    }
    assert_eq!(counted, info.event_count, "summary count vs trace_info");
    assert_eq!(iterated, info.event_count, "iteration vs trace_info");
    assert!(!info.complete || info.finished);
    Look {
        events: info.event_count,
        t_max: info.t_max,
        finished: info.finished,
    }
}

#[test]
fn a_reader_follows_a_live_trace() {
    let mut collector = Collector::start();
    let config = SimConfig {
        seed: 21,
        duration_s: 2.5,
        realtime: true,
        board: "live-stb",
        ..SimConfig::default()
    };
    let board = realtime_sim_over_tcp(config, collector.address());
    let path = collector.wait_started(1);
    let reader = TraceReader::open(&path).expect("a trace opens as soon as its session starts");

    let mut looks = vec![look(&reader)];
    let deadline = Instant::now() + SESSION_TIMEOUT;
    while collector.reports().is_empty() {
        assert!(Instant::now() < deadline, "the session did not end");
        std::thread::sleep(Duration::from_millis(150));
        looks.push(look(&reader));
        collector.poll();
    }
    let summary = board.join().unwrap();
    let report = collector.reports()[0].clone();
    let last = look(&reader);
    looks.push(last);

    for pair in looks.windows(2) {
        assert!(
            pair[1].events >= pair[0].events && pair[1].t_max >= pair[0].t_max,
            "never backwards: {pair:?}"
        );
    }
    let live: Vec<&Look> = looks.iter().filter(|l| !l.finished).collect();
    let mut growing: Vec<u64> = live.iter().map(|l| l.events).filter(|&n| n > 0).collect();
    growing.dedup();
    assert!(
        growing.len() >= 3,
        "the trace grew in several committed steps while live: {looks:?}"
    );
    assert!(last.finished);
    assert_eq!(last.events, report.events);
    assert!(report.complete);
    assert_eq!(report.records, summary.events);
    assert_eq!(summary.dropped, 0);
    collector.stop();
}
