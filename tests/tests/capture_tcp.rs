//! Sim → TCP → collector → trace: the trace holds exactly the records the board sent, and the reconstructed
//! states, links and variables account for every raw record.

mod support;

use socscope_collector::Notice;
use socscope_collector::reconstruct::{ALLOCATED_TYPE, RUNNING_TYPE, WAKEUP_TYPE};
use socscope_sim::{Scenario, SimConfig};
use socscope_tracedb::{
    CPU_IDLE_TYPE, Catalog, EventKind, Filter, ON_CPU_TYPE, TimeRange, TraceReader,
};
use socscope_wire::dict::Builtin;
use support::{Collector, assert_exact_counts, count_type, ingest_stats, sim_over_tcp, store_type};

#[test]
fn a_stressed_board_is_captured_exactly_and_reconstructed_consistently() {
    let mut collector = Collector::start();
    let config = SimConfig {
        seed: 3,
        duration_s: 5.0,
        zap_every_s: Some(1.5),
        cpu_stress: vec![Scenario {
            at: 1.0,
            duration: 1.5,
        }],
        io_stress: vec![Scenario {
            at: 3.0,
            duration: 1.0,
        }],
        board: "e2e-tcp",
        ..SimConfig::default()
    };
    let board = sim_over_tcp(config.clone(), collector.address());
    let reports = collector.wait_sessions(1);
    let summary = board.join().expect("the board thread");
    assert!(summary.events > 50_000, "a busy board: {summary}");
    assert!(summary.zaps >= 3, "zapping happened: {}", summary.zaps);

    // The session as the collector reported it.
    let r = &reports[0];
    assert!(r.complete, "the board said Bye");
    assert_eq!(r.board, "e2e-tcp");
    assert_eq!(r.records, summary.events);
    assert_eq!(
        (r.lost_on_board, r.lost_in_transit, r.dropped_frames),
        (0, 0, 0)
    );
    assert!(
        collector.notices().iter().all(|n| !matches!(
            n,
            Notice::FrameDropped { .. } | Notice::VersionRejected { .. }
        )),
        "no warnings: {:#?}",
        collector.notices()
    );

    // The raw counts, type by type.
    assert_exact_counts(&r.path, &summary);

    // The catalog lists it, complete, with the trace's own numbers.
    let catalog = Catalog::open(collector.dir()).unwrap();
    let traces = catalog.traces().unwrap();
    assert_eq!(traces.len(), 1);
    assert_eq!(catalog.resolve(&traces[0]), r.path);
    let listed = &traces[0].info;
    assert!(listed.complete && listed.finished);
    assert_eq!(listed.meta.board, "e2e-tcp");
    assert_eq!(listed.meta.cpus, 2);
    assert_eq!(listed.event_count, r.events);

    let reader = TraceReader::open(&r.path).unwrap();
    let info = reader.info().unwrap();
    assert!(info.complete && info.finished);
    assert_eq!(info.event_count, r.events);
    assert_eq!(info.meta.tick_rate_hz, summary.tick_rate_hz);
    // Board time: the trace spans the simulated seconds (the last record lands just before the end).
    assert!(
        info.duration() > 4_900_000_000 && info.duration() <= 5_000_000_000,
        "duration {} ns",
        info.duration()
    );
    let stats = ingest_stats(&reader);
    assert_eq!(stats["events"] as u64, info.event_count);

    // Reconstruction against raw counts. The capture starts with the board, so the only exits without an
    // entry are the first context switch of each CPU (its outgoing thread started before the capture).
    let cpus = i64::from(summary.cpus);
    assert_eq!(stats["clipped_exits"], cpus);
    assert_eq!(stats["switch_mismatches"], 0);
    assert_eq!(stats["sequence_overlaps"], 0);
    let raw = |b: Builtin| summary.per_type[b.def().name];
    // A running state per context switch, plus the one still running on each CPU at the end.
    assert_eq!(
        count_type(&reader, RUNNING_TYPE),
        raw(Builtin::ContextSwitch) + summary.cpus as u64
    );
    // A state per entry (IRQ, soft IRQ, syscall, user function); entries without their exit are clipped.
    let pairs = [
        (Builtin::IrqEntry, Builtin::IrqExit),
        (Builtin::SoftIrqEntry, Builtin::SoftIrqExit),
        (Builtin::SyscallEntry, Builtin::SyscallExit),
        (Builtin::UserEntry, Builtin::UserExit),
    ];
    let mut open_at_end = 0;
    for (entry, exit) in pairs {
        assert!(raw(entry) > 0, "{entry:?} recorded");
        assert_eq!(
            count_type(&reader, store_type(entry)),
            raw(entry),
            "{entry:?} states"
        );
        assert!(raw(exit) <= raw(entry), "{exit:?} after {entry:?}");
        open_at_end += raw(entry) - raw(exit);
        assert_eq!(
            count_type(&reader, store_type(exit)),
            0,
            "exits are not events"
        );
    }
    // What a thread still had open when it exited is closed at its exit; the rest at the capture's end.
    assert_eq!(
        stats["clipped_open_states"] + stats["closed_at_exit"],
        open_at_end as i64 + cpus
    );
    // A link per wake-up; a variable change per kmalloc and per kfree of a known pointer.
    assert_eq!(count_type(&reader, WAKEUP_TYPE), raw(Builtin::Wakeup));
    assert_eq!(
        count_type(&reader, ALLOCATED_TYPE),
        raw(Builtin::Kmalloc) + raw(Builtin::Kfree) - stats["unknown_frees"] as u64
    );
    // Punctual types are stored one for one.
    for b in [
        Builtin::Marker,
        Builtin::Mark,
        Builtin::ThreadCreate,
        Builtin::ThreadExit,
    ] {
        assert_eq!(count_type(&reader, store_type(b)), raw(b), "{b:?}");
    }
    // And nothing else: the stored total is the sum of the above.
    let derived = raw(Builtin::ContextSwitch)
        + summary.cpus as u64
        + pairs.iter().map(|(e, _)| raw(*e)).sum::<u64>()
        + raw(Builtin::Wakeup)
        + raw(Builtin::Kmalloc)
        + raw(Builtin::Kfree)
        - stats["unknown_frees"] as u64
        + raw(Builtin::Marker)
        + raw(Builtin::Mark)
        + raw(Builtin::ThreadCreate)
        + raw(Builtin::ThreadExit);
    // The CPU tracks: a slice per running state that lasts (an empty one is not written), `cpu_idle` for
    // the idle task, `on_cpu` for the others.
    let lasting_running = reader
        .events(TimeRange::all(), &Filter::all().types([RUNNING_TYPE]))
        .unwrap()
        .filter(|e| matches!(e.as_ref().unwrap().event.kind, EventKind::State { end, .. } if end > e.as_ref().unwrap().event.ts))
        .count() as u64;
    let cpu_slices = count_type(&reader, ON_CPU_TYPE) + count_type(&reader, CPU_IDLE_TYPE);
    assert_eq!(cpu_slices, lasting_running);
    assert_eq!(info.event_count, derived + cpu_slices);

    // Shapes: running states do not overlap on a CPU and IRQs sit on the interrupt stack, syscalls and
    // user functions on the thread's (depth 1 and more).
    for cpu in 0..summary.cpus {
        let mut last_end = i64::MIN;
        let mut n = 0u64;
        for e in reader
            .events(
                TimeRange::all(),
                &Filter::all().types([RUNNING_TYPE]).cpus([cpu]),
            )
            .unwrap()
        {
            let e = e.unwrap().event;
            let EventKind::State { end, depth } = e.kind else {
                panic!("running is a state: {e:?}")
            };
            assert_eq!(depth, 0);
            assert!(e.ts >= last_end, "running states overlap on cpu {cpu}");
            assert!(end >= e.ts);
            last_end = end;
            n += 1;
        }
        assert!(n > 100, "cpu {cpu} switched");
    }
    for e in reader
        .events(
            TimeRange::all(),
            &Filter::all().types([
                store_type(Builtin::IrqEntry),
                store_type(Builtin::SyscallEntry),
            ]),
        )
        .unwrap()
    {
        let e = e.unwrap().event;
        let EventKind::State { depth, .. } = e.kind else {
            panic!("a state: {e:?}")
        };
        if e.type_id == store_type(Builtin::IrqEntry) {
            assert_eq!(depth, 0, "the sim's IRQs do not nest");
        } else {
            assert!(depth >= 1, "syscalls sit on their thread's stack");
        }
    }
    collector.stop();
}
