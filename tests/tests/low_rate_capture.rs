//! A slow board for an hour (the simulated box at 200 records/s), captured through the real
//! collector: every cost of its trace follows its events, not its duration — full chunks, a
//! summary well under its bound, a few bytes per event.

use std::io::BufWriter;

use socscope_collector::{IngestConfig, replay};
use socscope_sim::SimConfig;
use socscope_sim::transport::WriterTransport;
use socscope_tracedb::TraceReader;

#[test]
fn an_hour_at_200_records_per_second_keeps_its_summary_and_chunks_in_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let wire = dir.path().join("slow.wire");
    let config = SimConfig {
        duration_s: 3_600.0,
        rate: 200.0,
        board: "slow-stb",
        ..SimConfig::default()
    };
    let mut t = WriterTransport::new(BufWriter::new(std::fs::File::create(&wire).unwrap()));
    let sim = socscope_sim::run(&config, &mut t).unwrap();
    t.finish().unwrap();
    let (sessions, _) = replay::replay_file(&wire, IngestConfig::new(dir.path())).unwrap();
    let [s] = sessions.as_slice() else {
        panic!("{} sessions", sessions.len())
    };
    assert_eq!(s.records, sim.events);
    let file = std::fs::metadata(&s.path).unwrap().len();
    let r = TraceReader::open(&s.path).unwrap();
    let q = |sql: &str| -> i64 { r.connection().query_row(sql, [], |row| row.get(0)).unwrap() };
    let summary = q("SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name = 'summary'") as u64;
    let chunks = q("SELECT count(*) FROM chunk") as u64;
    let events = r.info().unwrap().event_count;
    assert_eq!(events, s.events);
    assert!(
        summary * 100 <= file * 15,
        "summary {summary} bytes of {file}"
    );
    assert!(
        file as f64 / events as f64 <= 8.0,
        "{file} bytes for {events} events"
    );
    // Streams send a few events a second: their chunks still hold hundreds of events.
    assert!(events / chunks >= 300, "{events} events in {chunks} chunks");
}
