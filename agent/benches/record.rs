//! The agent's cost per event as the traced code sees it, framing and transport hand-off included: a
//! realistic mix of records into the rings, polled into a transport that only counts bytes.
// criterion_group! generates undocumented public functions; a benchmark has no API to document.
#![allow(missing_docs)]

use std::cell::Cell;
use std::rc::Rc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use socscope_agent::{Agent, Clock, Config, Transport, TransportError};

#[derive(Clone, Default)]
struct Ticks(Rc<Cell<u64>>);
impl Clock for Ticks {
    fn now(&mut self) -> u64 {
        self.0.get()
    }
}

#[derive(Default)]
struct CountingLink(u64);
impl Transport for CountingLink {
    fn write_frame(&mut self, frame: &[u8]) -> Result<(), TransportError> {
        self.0 += frame.len() as u64;
        Ok(())
    }
}

type HostAgent = Agent<Ticks, 2, 4096, 16, { socscope_agent::frame_buffer_len(4096) }, 64, 16>;

fn new_agent(clock: Ticks) -> Box<HostAgent> {
    Box::new(HostAgent::new(
        clock,
        Config {
            board: "bench",
            soc: "x86",
            os: "linux",
            application: "bench",
            cpu_count: 2,
            tick_rate_hz: 1_000_000,
            session_id: 1,
            flush_latency_ticks: 10_000,
            heartbeat_ticks: 1_000_000,
            hello_every_ticks: 0,
            token: "",
        },
    ))
}

/// The mix of records: ten kinds, two CPUs, a poll every 256 records.
macro_rules! record_mix {
    ($rec:expr, $agent:expr, $clock:expr, $link:expr, $t:expr) => {
        for i in 0..EVENTS {
            $t += 37 + (i & 63);
            $clock.0.set($t);
            let cpu = (i & 1) as u16;
            let pid = 300 + (i % 11) as u32;
            let _ = match i % 10 {
                0 => $rec.context_switch(cpu, pid, pid + 1),
                1 => $rec.irq_entry(cpu, 27),
                2 => $rec.irq_exit(cpu),
                3 => $rec.syscall_entry(cpu, 3, [5, 0xb6f0_1000 + (i & 0xff0), 4096, 0]),
                4 => $rec.syscall_exit(cpu, 3, 4096),
                5 => $rec.wakeup(cpu, pid + 2),
                6 => $rec.user_entry(cpu, 0x4000_1000 + (i & 0xf0)),
                7 => $rec.user_exit(cpu),
                8 => $rec.softirq_entry(cpu, 0xc001_0000),
                _ => $rec.softirq_exit(cpu),
            };
            if i % 256 == 0 {
                let _ = $agent.poll(&mut $link);
            }
        }
        let _ = $agent.poll(&mut $link);
    };
}

const EVENTS: u64 = 10_000;

fn record_path(c: &mut Criterion) {
    let mut g = c.benchmark_group("agent");
    g.throughput(Throughput::Elements(EVENTS));
    // The shared agent (`&self`): every record takes the platform's critical section, on a host the
    // `critical-section` crate's global mutex.
    g.bench_function("record_and_frame_mix", |b| {
        let clock = Ticks::default();
        let agent = new_agent(clock.clone());
        let mut link = CountingLink::default();
        let mut t = 0u64;
        b.iter(|| {
            record_mix!(agent, agent, clock, link, t);
        });
        assert_eq!(
            agent.stats().dropped,
            0,
            "the benchmark must not overflow the rings"
        );
    });
    // One context owning the agent (`Agent::exclusive`, as the simulator records): no lock.
    g.bench_function("record_and_frame_mix_exclusive", |b| {
        let clock = Ticks::default();
        let mut agent = new_agent(clock.clone());
        let mut link = CountingLink::default();
        let mut t = 0u64;
        b.iter(|| {
            record_mix!(agent.exclusive(), agent, clock, link, t);
        });
        assert_eq!(
            agent.stats().dropped,
            0,
            "the benchmark must not overflow the rings"
        );
    });
    g.finish();
}

criterion_group!(benches, record_path);
criterion_main!(benches);
