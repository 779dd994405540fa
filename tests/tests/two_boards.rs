//! Two boards stream to one collector at the same time: two traces, each with exactly its own board's
//! records (nothing crosses over between connections).

mod support;

use socscope_sim::SimConfig;
use socscope_tracedb::{Catalog, TraceReader};
use support::{Collector, assert_exact_counts, ingest_stats, sim_over_tcp};

#[test]
fn two_boards_at_once_make_two_exact_traces() {
    let mut collector = Collector::start();
    let living_room = SimConfig {
        seed: 11,
        duration_s: 3.0,
        board: "living-room",
        ..SimConfig::default()
    };
    let bedroom = SimConfig {
        seed: 12,
        duration_s: 2.0,
        cpus: 1,
        zap_every_s: Some(0.5),
        board: "bedroom",
        ..SimConfig::default()
    };
    let a = sim_over_tcp(living_room, collector.address());
    let b = sim_over_tcp(bedroom, collector.address());
    let reports = collector.wait_sessions(2);
    let (a, b) = (a.join().unwrap(), b.join().unwrap());
    assert_ne!(
        a.events, b.events,
        "different boards send different streams"
    );

    let report_of = |board: &str| {
        let found: Vec<_> = reports.iter().filter(|r| r.board == board).collect();
        assert_eq!(found.len(), 1, "one session for {board}: {reports:#?}");
        found[0].clone()
    };
    let (ra, rb) = (report_of("living-room"), report_of("bedroom"));
    assert_ne!(ra.path, rb.path);
    assert_ne!(ra.source, rb.source, "two connections");
    for (r, summary) in [(&ra, &a), (&rb, &b)] {
        assert!(r.complete);
        assert_eq!(r.records, summary.events);
        assert_exact_counts(&r.path, summary);
        let reader = TraceReader::open(&r.path).unwrap();
        let info = reader.info().unwrap();
        assert_eq!(info.meta.board, r.board);
        assert_eq!(info.meta.cpus, u32::from(summary.cpus));
        assert_eq!(info.event_count, ingest_stats(&reader)["events"] as u64);
    }

    let catalog = Catalog::open(collector.dir()).unwrap();
    let mut boards: Vec<(String, u64, bool)> = catalog
        .traces()
        .unwrap()
        .into_iter()
        .map(|t| (t.info.meta.board, t.info.event_count, t.info.complete))
        .collect();
    boards.sort();
    assert_eq!(
        boards,
        vec![
            ("bedroom".to_string(), rb.events, true),
            ("living-room".to_string(), ra.events, true)
        ]
    );
    collector.stop();
}
