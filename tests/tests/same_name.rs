//! 32 boards of the same name (and the same session id) connect at the same instant (issue 10, row 1):
//! each session gets its own trace file — the store creates trace files exclusively and the collector
//! takes the next name when one is taken — and every trace holds exactly its board's records.

mod support;

use std::collections::BTreeSet;

use socscope_sim::SimConfig;
use socscope_tracedb::Catalog;
use support::{Collector, assert_exact_counts, sim_over_tcp};

const BOARDS: usize = 32;

#[test]
fn thirty_two_boards_of_one_name_make_thirty_two_exact_traces() {
    let mut collector = Collector::start();
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(BOARDS));
    let boards: Vec<_> = (0..BOARDS)
        .map(|_| {
            let (address, barrier) = (collector.address(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                sim_over_tcp(
                    SimConfig {
                        seed: 3,
                        duration_s: 0.3,
                        board: "twin",
                        ..SimConfig::default()
                    },
                    address,
                )
                .join()
                .expect("the board runs")
            })
        })
        .collect();
    let reports = collector.wait_sessions(BOARDS);
    let summaries: Vec<_> = boards.into_iter().map(|b| b.join().unwrap()).collect();
    let paths: BTreeSet<_> = reports.iter().map(|r| r.path.clone()).collect();
    assert_eq!(paths.len(), BOARDS, "one file per session: {reports:#?}");
    for r in &reports {
        assert!(r.complete, "{r:?}");
        assert_eq!(r.interrupted, None);
        assert_exact_counts(&r.path, &summaries[0]);
    }
    let catalog = Catalog::open(collector.dir()).unwrap();
    let traces = catalog.traces().unwrap();
    assert_eq!(traces.len(), BOARDS);
    assert!(
        traces
            .iter()
            .all(|t| t.info.complete && t.info.event_count == reports[0].events)
    );
    collector.stop();
}
