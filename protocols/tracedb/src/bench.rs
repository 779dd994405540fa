//! Store measurements as library functions, so that `socscope bench`, the criterion benches
//! and the tests measure the same thing.
//!
//! The synthetic trace looks like a busy 4-CPU set-top box at about 1 M events/s of trace
//! time: 64 threads switching every 0.2–2 ms (running states arriving at their end, with a
//! wake-up link each), IRQ states nested in them, a variable per CPU, and punctual events
//! (syscalls, markers) with one or two parameters.

use std::path::Path;
use std::time::Instant;

use crate::error::{Result, StoreError};
use crate::filter::Filter;
use crate::model::{
    Event, EventCategory, EventKind, EventType, ParamDef, ParamType, ParamValue, Producer,
    ProducerKind, TimeRange, TraceHeader,
};
use crate::reader::TraceReader;
use crate::writer::{TraceWriter, WriterConfig};

/// A small deterministic generator (splitmix64); no dependency, same stream everywhere.
#[derive(Debug, Clone)]
pub struct SplitMix(u64);

impl SplitMix {
    /// Seeded generator.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// Result of [`write_synthetic`].
#[derive(Debug, Clone, PartialEq)]
pub struct WriteReport {
    /// Events written.
    pub events: u64,
    /// Wall time of pushing and committing, in seconds (event generation excluded).
    pub seconds: f64,
    /// `events / seconds`.
    pub events_per_second: f64,
    /// Size of the file after `finish` (WAL checkpointed).
    pub file_bytes: u64,
    /// `file_bytes / events`.
    pub bytes_per_event: f64,
    /// Bytes of chunk blobs alone, per event.
    pub chunk_bytes_per_event: f64,
    /// Trace duration in nanoseconds.
    pub trace_ns: i64,
}

/// Latencies of a series of reads, microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Latency {
    /// Mean.
    pub mean_us: f64,
    /// Median.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// Worst.
    pub max_us: f64,
}

impl Latency {
    fn of(mut lat: Vec<f64>) -> Self {
        lat.sort_by(f64::total_cmp);
        let pct = |p: f64| {
            lat.get(((lat.len() as f64 - 1.0) * p) as usize)
                .copied()
                .unwrap_or(0.0)
        };
        Self {
            mean_us: lat.iter().sum::<f64>() / lat.len().max(1) as f64,
            p50_us: pct(0.5),
            p99_us: pct(0.99),
            max_us: lat.last().copied().unwrap_or(0.0),
        }
    }
}

/// Result of [`read_random`].
#[derive(Debug, Clone, PartialEq)]
pub struct ReadReport {
    /// Reads measured (each way).
    pub reads: usize,
    /// Events per read.
    pub events_per_read: usize,
    /// Reading with [`EventIter::next_into`](crate::EventIter::next_into): one event buffer
    /// reused for the whole read.
    pub reused: Latency,
    /// Reading with the iterator: a new [`StoredEvent`](crate::StoredEvent) (and parameter
    /// vector) per event.
    pub owned: Latency,
    /// Worst time to the first event of a random time-range query, milliseconds.
    pub max_first_event_ms: f64,
}

/// Result of [`scan_all`].
#[derive(Debug, Clone, PartialEq)]
pub struct ScanReport {
    /// Events read.
    pub events: u64,
    /// Seconds.
    pub seconds: f64,
    /// Events per second.
    pub events_per_second: f64,
}

const N_CPUS: u16 = 4;
const N_THREADS: u32 = 64;
const T_RUNNING: u32 = 10;
const T_IRQ: u32 = 11;
const T_FREQ: u32 = 20;
const T_WAKEUP: u32 = 30;

/// The event types of the synthetic trace.
pub fn synthetic_types() -> Vec<EventType> {
    let mut types: Vec<EventType> = (0..8)
        .map(|i| EventType {
            id: i,
            name: format!("syscall_{i}"),
            category: EventCategory::Punctual,
            params: if i % 2 == 0 {
                vec![ParamDef::new("nr", ParamType::Signed)]
            } else {
                vec![
                    ParamDef::new("fd", ParamType::Signed),
                    ParamDef::new("len", ParamType::Unsigned),
                ]
            },
        })
        .collect();
    types.push(EventType {
        id: T_RUNNING,
        name: "running".into(),
        category: EventCategory::State,
        params: Vec::new(),
    });
    types.push(EventType {
        id: T_IRQ,
        name: "irq".into(),
        category: EventCategory::State,
        params: vec![ParamDef::new("irq", ParamType::Unsigned)],
    });
    types.push(EventType {
        id: T_FREQ,
        name: "cpu_freq".into(),
        category: EventCategory::Variable,
        params: Vec::new(),
    });
    types.push(EventType {
        id: T_WAKEUP,
        name: "wakeup".into(),
        category: EventCategory::Link,
        params: Vec::new(),
    });
    types
}

/// The producers of the synthetic trace: 4 processes, 64 threads, 4 IRQ lines.
pub fn synthetic_producers() -> Vec<Producer> {
    let mut out = Vec::new();
    for p in 0..4 {
        out.push(Producer {
            id: 1000 + p,
            parent: None,
            kind: ProducerKind::Process,
            local_id: i64::from(100 + p),
            name: format!("proc{p}"),
        });
    }
    for t in 0..N_THREADS {
        out.push(Producer {
            id: t,
            parent: Some(1000 + t % 4),
            kind: ProducerKind::Thread,
            local_id: i64::from(200 + t),
            name: format!("thread{t}"),
        });
    }
    for i in 0..4 {
        out.push(Producer {
            id: 500 + i,
            parent: None,
            kind: ProducerKind::Irq,
            local_id: i64::from(i),
            name: format!("irq{i}"),
        });
    }
    out
}

/// Calls `sink` with `n` synthetic events in arrival order (states at their end).
pub fn synthetic_events(
    n: u64,
    seed: u64,
    mut sink: impl FnMut(&Event) -> Result<()>,
) -> Result<i64> {
    let mut rng = SplitMix::new(seed);
    struct CpuState {
        thread: u32,
        run_start: i64,
        next_switch: i64,
    }
    let mut cpus: Vec<CpuState> = (0..N_CPUS)
        .map(|c| CpuState {
            thread: u32::from(c),
            run_start: 0,
            next_switch: 200_000 + i64::from(c) * 50_000,
        })
        .collect();
    let mut ev = Event::punctual(0, 0, 0, None);
    let mut t: i64 = 0;
    let mut emitted = 0u64;
    while emitted < n {
        t += rng.below(2_000) as i64 + 1;
        let c = rng.below(u64::from(N_CPUS)) as usize;
        let cpu = Some(c as u16);
        let r = rng.below(1000);
        ev.cpu = cpu;
        ev.ts = t;
        ev.params.clear();
        let st = &mut cpus[c];
        if t >= st.next_switch {
            let prev = st.thread;
            ev.ts = st.run_start;
            ev.type_id = T_RUNNING;
            ev.producer = prev;
            ev.kind = EventKind::State { end: t, depth: 0 };
            sink(&ev)?;
            st.thread = rng.below(u64::from(N_THREADS)) as u32;
            st.run_start = t;
            st.next_switch = t + 200_000 + rng.below(1_800_000) as i64;
            emitted += 1;
            if emitted < n {
                ev.ts = t - 1 - rng.below(5_000) as i64;
                ev.type_id = T_WAKEUP;
                ev.producer = prev;
                ev.kind = EventKind::Link {
                    end: t,
                    target: st.thread,
                };
                sink(&ev)?;
                emitted += 1;
            }
            continue;
        }
        if r < 20 {
            let irq = rng.below(4) as u32;
            ev.type_id = T_IRQ;
            ev.producer = 500 + irq;
            ev.kind = EventKind::State {
                end: t + 1_000 + rng.below(9_000) as i64,
                depth: 1,
            };
            ev.params.push(ParamValue::Unsigned(u64::from(irq) + 16));
        } else if r < 40 {
            ev.type_id = T_FREQ;
            ev.producer = st.thread;
            ev.kind = EventKind::Variable {
                value: 400.0 + (rng.below(8) * 100) as f64,
            };
        } else {
            let ty = (r % 8) as u32;
            ev.type_id = ty;
            ev.producer = st.thread;
            ev.kind = EventKind::Punctual;
            if ty.is_multiple_of(2) {
                ev.params.push(ParamValue::Signed((r % 64) as i64));
            } else {
                ev.params.push(ParamValue::Signed(3 + (r % 5) as i64));
                ev.params.push(ParamValue::Unsigned(rng.below(4096)));
            }
        }
        sink(&ev)?;
        emitted += 1;
    }
    Ok(t)
}

fn file_size(path: &Path) -> u64 {
    let mut total = 0;
    for suffix in ["", "-wal"] {
        let mut s = path.as_os_str().to_owned();
        s.push(suffix);
        total += std::fs::metadata(&s).map(|m| m.len()).unwrap_or(0);
    }
    total
}

/// Writes `n_events` synthetic events to a new trace at `path` and measures it.
pub fn write_synthetic(path: &Path, n_events: u64) -> Result<WriteReport> {
    write_synthetic_with(path, n_events, WriterConfig::default())
}

/// [`write_synthetic`] with explicit writer tuning.
pub fn write_synthetic_with(
    path: &Path,
    n_events: u64,
    config: WriterConfig,
) -> Result<WriteReport> {
    let meta = TraceHeader {
        trace_type: "synthetic".into(),
        board: "sim-stb".into(),
        soc: "sim".into(),
        os: "linux".into(),
        application: "bench".into(),
        cpus: u32::from(N_CPUS),
        tick_rate_hz: 1_000_000_000,
        ..TraceHeader::default()
    };
    let mut w = TraceWriter::create_with(path, &meta, config)?;
    for t in synthetic_types() {
        w.add_event_type(&t)?;
    }
    for p in synthetic_producers() {
        w.add_producer(&p)?;
    }
    let start = Instant::now();
    let trace_ns = synthetic_events(n_events, 42, |e| w.push(e))?;
    let info = w.finish(true)?;
    let seconds = start.elapsed().as_secs_f64();
    let file_bytes = file_size(path);
    let reader = TraceReader::open(path)?;
    let blob: i64 = reader
        .connection()
        .query_row(
            "SELECT coalesce(sum(length(data)), 0) FROM chunk",
            [],
            |r| r.get(0),
        )
        .map_err(|source| StoreError::Sqlite {
            path: path.to_path_buf(),
            source,
        })?;
    let events = info.event_count;
    Ok(WriteReport {
        events,
        seconds,
        events_per_second: events as f64 / seconds.max(1e-9),
        file_bytes,
        bytes_per_event: file_bytes as f64 / events.max(1) as f64,
        chunk_bytes_per_event: blob as f64 / events.max(1) as f64,
        trace_ns,
    })
}

/// Reads `k` consecutive events (all categories, time order, every field and parameter) from
/// `reads` random times of the trace at `path`, after a few warm-up reads, both into one
/// reused event and as owned events, and measures the latency of each read. Also measures the
/// time to the first event of `reads` random 10 ms range queries.
pub fn read_random(path: &Path, reads: usize, k: usize) -> Result<ReadReport> {
    let reader = TraceReader::open(path)?;
    let info = reader.info()?;
    let span = (info.t_max - info.t_min).max(1) as u64;
    let mut rng = SplitMix::new(7);
    let all = Filter::all();
    let owned = |t: i64| -> Result<f64> {
        let start = Instant::now();
        let mut n = 0;
        for e in reader.events(TimeRange::from(t), &all)? {
            e?;
            n += 1;
            if n == k {
                break;
            }
        }
        Ok(start.elapsed().as_secs_f64() * 1e6)
    };
    let mut buf = crate::StoredEvent::default();
    let mut reused = |t: i64| -> Result<f64> {
        let start = Instant::now();
        let mut it = reader.events(TimeRange::from(t), &all)?;
        let mut n = 0;
        while n < k && it.next_into(&mut buf)? {
            n += 1;
        }
        Ok(start.elapsed().as_secs_f64() * 1e6)
    };
    for _ in 0..reads.min(20) {
        let t = info.t_min + rng.below(span) as i64;
        owned(t)?;
        reused(t)?;
    }
    // Both ways at the same random times, alternating, so both see the same machine.
    let (mut lat_owned, mut lat_reused) = (Vec::with_capacity(reads), Vec::with_capacity(reads));
    for i in 0..reads {
        let t = info.t_min + rng.below(span) as i64;
        if i % 2 == 0 {
            lat_owned.push(owned(t)?);
            lat_reused.push(reused(t)?);
        } else {
            lat_reused.push(reused(t)?);
            lat_owned.push(owned(t)?);
        }
    }
    let mut max_first = 0f64;
    for _ in 0..reads {
        let t = info.t_min + rng.below(span) as i64;
        let start = Instant::now();
        let mut it = reader.events(TimeRange::new(t, t + 10_000_000), &all)?;
        if let Some(e) = it.next() {
            e?;
        }
        max_first = max_first.max(start.elapsed().as_secs_f64() * 1e3);
    }
    Ok(ReadReport {
        reads,
        events_per_read: k,
        reused: Latency::of(lat_reused),
        owned: Latency::of(lat_owned),
        max_first_event_ms: max_first,
    })
}

/// Reads every event of the trace in time order.
pub fn scan_all(path: &Path) -> Result<ScanReport> {
    let reader = TraceReader::open(path)?;
    let start = Instant::now();
    let mut events = 0u64;
    for e in reader.events(TimeRange::all(), &Filter::all())? {
        e?;
        events += 1;
    }
    let seconds = start.elapsed().as_secs_f64();
    Ok(ScanReport {
        events,
        seconds,
        events_per_second: events as f64 / seconds.max(1e-9),
    })
}
