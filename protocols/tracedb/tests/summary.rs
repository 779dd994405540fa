//! The summary and the counts equal a direct computation over the events.

mod common;

use common::*;
use proptest::prelude::*;
use socscope_tracedb::*;

fn direct(
    events: &[Event],
    range: TimeRange,
    width: i64,
    keep: &dyn Fn(&Event) -> bool,
) -> Vec<SummaryBucket> {
    let mut edges = vec![range.start];
    let mut t = (range.start.div_euclid(width) + 1) * width;
    while t < range.end {
        edges.push(t);
        t += width;
    }
    edges.push(range.end);
    edges
        .windows(2)
        .map(|w| {
            let r = TimeRange::new(w[0], w[1]);
            let mut cells: Vec<SummaryCell> = Vec::new();
            for e in events.iter().filter(|e| keep(e)) {
                let count = u64::from(r.contains(e.ts));
                let state_ns = if e.category() == EventCategory::State {
                    r.overlap(e.ts, e.end())
                } else {
                    0
                };
                if count == 0 && state_ns == 0 {
                    continue;
                }
                match cells
                    .iter_mut()
                    .find(|c| c.producer == e.producer && c.type_id == e.type_id)
                {
                    Some(c) => {
                        c.count += count;
                        c.state_ns += state_ns;
                    }
                    None => cells.push(SummaryCell {
                        producer: e.producer,
                        type_id: e.type_id,
                        count,
                        state_ns,
                    }),
                }
            }
            cells.sort_by_key(|c| (c.producer, c.type_id));
            SummaryBucket { range: r, cells }
        })
        .collect()
}

fn check(events: &[Event], r: &TraceReader, range: TimeRange, shift: u32) {
    let width = 1i64 << shift;
    type Keep = Box<dyn Fn(&Event) -> bool>;
    let filters: Vec<(Filter, Keep)> = vec![
        (Filter::all(), Box::new(|_: &Event| true)),
        (
            Filter::all().types([2]),
            Box::new(|e: &Event| e.type_id == 2),
        ),
        (
            Filter::all()
                .producers([1, 3])
                .categories([EventCategory::State, EventCategory::Punctual]),
            Box::new(|e: &Event| {
                [1, 3].contains(&e.producer)
                    && matches!(e.category(), EventCategory::State | EventCategory::Punctual)
            }),
        ),
        (
            Filter::all().cpus([1]),
            Box::new(|e: &Event| e.cpu == Some(1)),
        ),
    ];
    for (i, (f, keep)) in filters.iter().enumerate() {
        let got = r.summary(range, Resolution::BucketWidth(width), f).unwrap();
        assert_eq!(got.bucket_width, width);
        let want = direct(events, range, width, keep);
        assert_eq!(
            got.buckets, want,
            "filter {i}, range {range:?}, width {width}"
        );
        let n = events
            .iter()
            .filter(|e| keep(e) && range.contains(e.ts))
            .count() as u64;
        assert_eq!(r.count(range, f).unwrap(), n, "count, filter {i}");
    }
}

#[test]
fn summary_matches_direct_computation_on_a_fixed_trace() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let events = mixed_events(3_000, 11);
    write(&path, &events, small_config());
    let r = TraceReader::open(&path).unwrap();
    let end = events.iter().map(|e| e.end()).max().unwrap() + 10;
    // Aligned, unaligned, inside one bucket, finer than the summary, coarser than its top level.
    for (a, b) in [(0, end), (3, end - 7), (17, 30), (1_000, 9_999), (-50, 100)] {
        for shift in [0, 3, 4, 5, 7, 9, 11] {
            if (b - a) >> shift > 300 {
                continue; // the direct computation is quadratic
            }
            check(&events, &r, TimeRange::new(a, b), shift);
        }
    }
    // A bucket count picks the width.
    let s = r
        .summary(
            TimeRange::new(0, 1_000),
            Resolution::MaxBuckets(10),
            &Filter::all(),
        )
        .unwrap();
    assert_eq!(s.bucket_width, 128);
    assert_eq!(s.buckets.len(), 8);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn summary_matches_direct_computation(
        seed in 0u64..1_000,
        n in 1usize..600,
        a in -100i64..8_000,
        len in 1i64..3_000,
        shift in 2u32..12,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let events = mixed_events(n, seed);
        write(&path, &events, small_config());
        let r = TraceReader::open(&path).unwrap();
        check(&events, &r, TimeRange::new(a, a + len), shift);
    }
}

/// A reader opened early must follow the writer when a growing trace outgrows its finest summary buckets
/// (the writer coarsens them and rewrites the rows): its summaries stay equal to a fresh reader's.
#[test]
fn an_early_reader_follows_a_coarsened_summary() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("grow.db");
    let config = WriterConfig {
        summary_base_shift: 10,
        summary_max_buckets: 64,
        ..WriterConfig::default()
    };
    let mut w = TraceWriter::create_with(&path, &TraceHeader::default(), config).unwrap();
    w.add_event_type(&EventType {
        id: 1,
        name: "tick".into(),
        category: EventCategory::Punctual,
        params: vec![],
    })
    .unwrap();
    w.add_producer(&Producer {
        id: 1,
        parent: None,
        kind: ProducerKind::Thread,
        local_id: 1,
        name: "t".into(),
    })
    .unwrap();
    for i in 0..20i64 {
        w.push(&Event::punctual(i * 1_000, 1, 1, Some(0))).unwrap();
    }
    w.commit().unwrap();
    let early = TraceReader::open(&path).unwrap();
    let (base_before, _) = early.summary_levels();
    let before = early
        .summary(
            TimeRange::new(0, 20_000),
            Resolution::BucketWidth(1 << 10),
            &Filter::all(),
        )
        .unwrap();
    assert_eq!(before.buckets.iter().map(|b| b.count()).sum::<u64>(), 20);
    // Grow the span a thousandfold: far more than 64 finest buckets.
    for i in 0..200i64 {
        w.push(&Event::punctual(20_000 + i * 100_000, 1, 1, Some(0)))
            .unwrap();
    }
    w.commit().unwrap();
    let range = TimeRange::new(0, 20_000_000);
    let fresh = TraceReader::open(&path).unwrap();
    assert!(
        fresh.summary_levels().0 > base_before,
        "the writer coarsened the summary"
    );
    for res in [
        Resolution::MaxBuckets(16),
        Resolution::MaxBuckets(1000),
        Resolution::BucketWidth(1 << 20),
    ] {
        let a = early.summary(range, res, &Filter::all()).unwrap();
        let b = fresh.summary(range, res, &Filter::all()).unwrap();
        assert_eq!(a, b, "{res:?}");
        assert_eq!(a.buckets.iter().map(|b| b.count()).sum::<u64>(), 220);
    }
    assert_eq!(early.summary_levels(), fresh.summary_levels());
    w.finish(true).unwrap();
}

/// The counts of many ranges at once, and their cells with the state time, equal counting each
/// range's events and adding up its states directly, whatever the ranges (overlapping, unaligned,
/// inside one bucket, empty) and the filter.
fn check_counts_in_ranges(events: &[Event], r: &TraceReader, ranges: &[TimeRange]) {
    type Keep = Box<dyn Fn(&Event) -> bool>;
    let filters: Vec<(Filter, Keep)> = vec![
        (Filter::all(), Box::new(|_: &Event| true)),
        (
            Filter::all().types([1, 2]),
            Box::new(|e: &Event| [1, 2].contains(&e.type_id)),
        ),
        (
            Filter::all()
                .producers([2, 4])
                .categories([EventCategory::State, EventCategory::Link]),
            Box::new(|e: &Event| {
                [2, 4].contains(&e.producer)
                    && matches!(e.category(), EventCategory::State | EventCategory::Link)
            }),
        ),
        (
            Filter::all().cpus([0]),
            Box::new(|e: &Event| e.cpu == Some(0)),
        ),
        (
            Filter::all().condition(Condition::param(
                "NEWPID",
                CompareOp::Ge,
                ParamValue::Unsigned(4),
            )),
            Box::new(|e: &Event| {
                e.type_id == 1
                    && matches!(e.params.get(1), Some(ParamValue::Unsigned(v)) if *v >= 4)
            }),
        ),
    ];
    for (i, (f, keep)) in filters.iter().enumerate() {
        let counts = r.counts_in_ranges(ranges, f).unwrap();
        let cells = r.cells_in_ranges(ranges, f).unwrap();
        assert_eq!((counts.len(), cells.len()), (ranges.len(), ranges.len()));
        for (k, range) in ranges.iter().enumerate() {
            let mut want: Vec<SummaryCell> = Vec::new();
            for e in events.iter().filter(|e| keep(e)) {
                let count = u64::from(range.contains(e.ts));
                let state_ns = if e.category() == EventCategory::State {
                    range.overlap(e.ts, e.end())
                } else {
                    0
                };
                if count == 0 && state_ns == 0 {
                    continue;
                }
                match want
                    .iter_mut()
                    .find(|c| c.producer == e.producer && c.type_id == e.type_id)
                {
                    Some(c) => {
                        c.count += count;
                        c.state_ns += state_ns;
                    }
                    None => want.push(SummaryCell {
                        producer: e.producer,
                        type_id: e.type_id,
                        count,
                        state_ns,
                    }),
                }
            }
            want.sort_by_key(|c| (c.producer, c.type_id));
            assert_eq!(cells[k], want, "cells, filter {i}, range {k} {range:?}");
            let want_counts: Vec<SummaryCell> = want
                .into_iter()
                .filter(|c| c.count != 0)
                .map(|c| SummaryCell { state_ns: 0, ..c })
                .collect();
            assert_eq!(
                counts[k], want_counts,
                "counts, filter {i}, range {k} {range:?}"
            );
        }
    }
}

#[test]
fn counts_in_ranges_match_direct_counting_on_a_fixed_trace() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let events = mixed_events(3_000, 5);
    write(&path, &events, small_config());
    let r = TraceReader::open(&path).unwrap();
    let end = events.iter().map(|e| e.ts).max().unwrap() + 1;
    // Slice edges of a 100-slice grid (the micro model's use), then harder shapes: the whole
    // trace, overlapping and nested ranges, one inside a finest bucket, empty, before the start.
    let mut ranges: Vec<TimeRange> = (0..100)
        .map(|k| TimeRange::new(k * end / 100 + 3, (k + 1) * end / 100 + 3))
        .collect();
    ranges.extend([
        TimeRange::new(0, end),
        TimeRange::new(5, 4_000),
        TimeRange::new(100, 3_000),
        TimeRange::new(33, 38),
        TimeRange::new(50, 50),
        TimeRange::new(-500, -10),
        TimeRange::new(i64::MIN, 700),
    ]);
    check_counts_in_ranges(&events, &r, &ranges);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn counts_in_ranges_match_direct_counting(
        seed in 0u64..1_000,
        n in 1usize..800,
        ranges in proptest::collection::vec((-100i64..12_000, 0i64..4_000), 0..40),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let events = mixed_events(n, seed);
        write(&path, &events, small_config());
        let r = TraceReader::open(&path).unwrap();
        let ranges: Vec<TimeRange> =
            ranges.into_iter().map(|(a, l)| TimeRange::new(a, a + l)).collect();
        check_counts_in_ranges(&events, &r, &ranges);
    }
}

/// Writes `events` committing every `every` pushes (a capture's commits), the long states
/// pushed last, as a capture closes them when it ends.
fn write_committing(path: &std::path::Path, events: &[Event], config: WriterConfig, every: usize) {
    let mut w = new_writer(path, config);
    for (i, e) in events.iter().enumerate() {
        w.push(e).unwrap();
        if (i + 1) % every.max(1) == 0 {
            w.commit().unwrap();
        }
    }
    w.finish(true).unwrap();
}

/// `n` mixed events plus `longs` states lasting from the trace start to past its end.
fn with_long_states(n: usize, seed: u64, longs: usize) -> Vec<Event> {
    let mut events = mixed_events(n, seed);
    let end = events.iter().map(|e| e.end()).max().unwrap_or(0);
    for k in 0..longs as i64 {
        events.push(Event::state(
            k * 3,
            end + 1 + k * 1_000,
            0,
            2,
            1 + (k % 4) as u32,
            Some(0),
        ));
    }
    events
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    /// States spanning the whole trace, and a trace committed in many small steps (rows merged
    /// commit after commit, tail chunks rewritten): every summary still equals the events'.
    #[test]
    fn summary_with_whole_trace_states_and_many_commits_matches_direct_computation(
        seed in 0u64..1_000,
        n in 1usize..500,
        longs in 0usize..4,
        every in 1usize..120,
        a in -100i64..8_000,
        len in 1i64..3_000,
        shift in 2u32..12,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let events = with_long_states(n, seed, longs);
        write_committing(&path, &events, small_config(), every);
        let r = TraceReader::open(&path).unwrap();
        check(&events, &r, TimeRange::new(a, a + len), shift);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    /// The same for many ranges at once (a slice grid and loose ranges): counts and state time
    /// with states spanning the whole trace, written in many commits.
    #[test]
    fn cells_in_ranges_with_whole_trace_states_and_many_commits_match_direct_computation(
        seed in 0u64..1_000,
        n in 1usize..500,
        longs in 0usize..4,
        every in 1usize..120,
        slices in 1i64..60,
        loose in proptest::collection::vec((-100i64..12_000, 0i64..4_000), 0..12),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let events = with_long_states(n, seed, longs);
        write_committing(&path, &events, small_config(), every);
        let r = TraceReader::open(&path).unwrap();
        let end = events.iter().map(|e| e.end()).max().unwrap() + 1;
        let mut ranges: Vec<TimeRange> = (0..slices)
            .map(|k| TimeRange::new(k * end / slices + 1, (k + 1) * end / slices + 1))
            .collect();
        ranges.extend(loose.into_iter().map(|(a, l)| TimeRange::new(a, a + l)));
        check_counts_in_ranges(&events, &r, &ranges);
    }
}

/// A reader that follows a growing trace commit by commit sees, after each commit, the summary
/// of exactly the events committed so far (long states arrive late, when they end).
#[test]
fn a_following_reader_sees_each_commits_summary() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.db");
    let events = with_long_states(1_500, 5, 3);
    let mut w = TraceWriter::create_with(&path, &meta(), small_config()).unwrap();
    for t in types() {
        w.add_event_type(&t).unwrap();
    }
    for p in producers() {
        w.add_producer(&p).unwrap();
    }
    w.commit().unwrap();
    let r = TraceReader::open(&path).unwrap();
    for (i, part) in events.chunks(211).enumerate() {
        for e in part {
            w.push(e).unwrap();
        }
        w.commit().unwrap();
        let seen = &events[..((i + 1) * 211).min(events.len())];
        let end = seen.iter().map(|e| e.end()).max().unwrap() + 1;
        let shift = r.summary_levels().0 + 1;
        if end >> shift < 300 {
            check(seen, &r, TimeRange::new(0, end), shift);
        }
        check(seen, &r, TimeRange::new(5, 3_333), 6);
    }
    w.finish(true).unwrap();
}

/// A dense trace makes the writer widen the finest buckets until they hold many events per
/// cell; answers stay exact at every width, finer ones included.
#[test]
fn a_dense_trace_widens_the_finest_buckets_and_stays_exact() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dense.db");
    let events = with_long_states(20_000, 9, 2);
    write_committing(&path, &events, small_config(), 997);
    let r = TraceReader::open(&path).unwrap();
    let (base, levels) = r.summary_levels();
    assert!(base > 4, "the finest width grew from 2^4 to 2^{base}");
    let level0: i64 = r
        .connection()
        .query_row("SELECT count(*) FROM summary WHERE level = 0", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert!(level0 * 16 <= 20_002 * 2, "{level0} finest rows");
    let end = events.iter().map(|e| e.end()).max().unwrap() + 1;
    for shift in [base - 2, base, base + 1, base + levels] {
        let width = 1i64 << shift;
        let (a, b) = (end / 3 + 7, (end / 3 + 7 + 250 * width).min(end));
        check(&events, &r, TimeRange::new(a, b), shift);
    }
}

/// Slice grids over chunks of many 512-event blocks: consecutive ranges walk on through a
/// chunk, loading its further blocks as they go, and count exactly what the events say.
#[test]
fn counts_of_slice_grids_over_multi_block_chunks_match_direct_counting() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("blocks.db");
    let events = mixed_events(9_000, 21);
    let config = WriterConfig {
        summary_base_shift: 6,
        summary_levels: 8,
        ..WriterConfig::default()
    };
    write(&path, &events, config);
    let r = TraceReader::open(&path).unwrap();
    let blocks: i64 = r
        .connection()
        .query_row("SELECT max(count) FROM chunk", [], |row| row.get(0))
        .unwrap();
    assert!(blocks > 1024, "chunks of several blocks ({blocks} events)");
    let end = events.iter().map(|e| e.ts).max().unwrap() + 1;
    for slices in [7i64, 50, 333, 1_000] {
        let ranges: Vec<TimeRange> = (0..slices)
            .map(|i| TimeRange::new(i * end / slices, (i + 1) * end / slices))
            .collect();
        check_counts_in_ranges(&events, &r, &ranges);
    }
}
