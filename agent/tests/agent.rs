//! The agent end to end through the real decoder: what goes in comes out, and losses are counted exactly.

use proptest::prelude::*;
use socscope_agent::{
    Agent, AgentError, Clock, Config, Mode, Recorded, StaticDictionary, Transport, TransportError,
};
use socscope_wire::decode::{DecodeError, Frame, StreamDecoder};
use socscope_wire::dict::{
    Builtin, Category, EventTypeDef, ParamDef, ParamType, ProducerDef, ProducerKind,
};
use socscope_wire::frame::ParamValue;

mod common;
use common::{SharedClock, config};

/// Collects frames; refuses them while `blocked`.
#[derive(Default)]
struct Capture {
    bytes: Vec<u8>,
    blocked: bool,
}

impl Transport for Capture {
    fn write_frame(&mut self, frame: &[u8]) -> Result<(), TransportError> {
        if self.blocked {
            return Err(TransportError::WouldBlock);
        }
        self.bytes.extend_from_slice(frame);
        Ok(())
    }
}

type TestAgent = Agent<SharedClock, 2, 128, 4, { socscope_agent::frame_buffer_len(128) }, 8, 4>;

fn decode_all(bytes: &[u8]) -> Vec<Frame> {
    let mut d = StreamDecoder::default();
    d.feed(bytes);
    let mut frames = Vec::new();
    while let Some(r) = d.next_frame() {
        frames.push(r.expect("agent output decodes").frame);
    }
    assert!(d.finish().is_none());
    frames
}

#[test]
fn records_come_out_as_they_went_in() {
    let clock = SharedClock::default();
    let mut agent = Box::new(TestAgent::new(clock.clone(), config()));
    agent
        .register_producer(ProducerDef {
            id: 1,
            parent: None,
            kind: ProducerKind::Process,
            local_id: 300,
            name: "player",
        })
        .unwrap();
    const TEMP: &[ParamDef<'static>] = &[ParamDef {
        name: "celsius",
        ty: ParamType::Float,
    }];
    agent
        .register_type(EventTypeDef {
            id: 64,
            name: "temperature",
            category: Category::Variable,
            params: TEMP,
        })
        .unwrap();
    clock.0.set(100);
    agent.context_switch(0, 0, 300).unwrap();
    clock.0.set(150);
    agent
        .syscall_entry(0, 3, [5, 0xb6f0_1000, 4096, 0])
        .unwrap();
    clock.0.set(180);
    agent.irq_entry(1, 27).unwrap();
    clock.0.set(181);
    agent.record(1, 64, &[ParamValue::Float(41.5)]).unwrap();
    clock.0.set(190);
    agent.syscall_exit(0, 3, -11).unwrap();
    agent.marker(1, "frame decoded").unwrap();
    let mut out = Capture::default();
    agent.finish(&mut out).unwrap();

    let frames = decode_all(&out.bytes);
    let Frame::Hello(h) = &frames[0] else {
        panic!("Hello first, got {:?}", frames[0])
    };
    assert_eq!(
        (h.board.as_str(), h.cpu_count, h.tick_rate_hz, h.session_id),
        ("stb-test", 2, 1_000_000, 7)
    );
    assert!(matches!(&frames[1], Frame::Dictionary(d) if d.len() == 1));
    assert!(matches!(&frames[2], Frame::Dictionary(d) if d.len() == 1));
    let mut seen = Vec::new();
    for f in &frames {
        if let Frame::Events(b) = f {
            for r in b.iter() {
                seen.push((
                    b.cpu,
                    r.seq,
                    r.ticks(),
                    r.type_id(),
                    format!("{:?}", (0..5).map(|i| r.value(i)).collect::<Vec<_>>()),
                ));
            }
        }
    }
    seen.sort();
    let types: Vec<_> = seen.iter().map(|s| (s.0, s.1, s.2, s.3)).collect();
    assert_eq!(
        types,
        vec![
            (0, 0, 100, Builtin::ContextSwitch.id()),
            (0, 1, 150, Builtin::SyscallEntry.id()),
            (0, 2, 190, Builtin::SyscallExit.id()),
            (1, 0, 180, Builtin::IrqEntry.id()),
            (1, 1, 181, 64),
            (1, 2, 190, Builtin::Marker.id()),
        ]
    );
    assert!(seen[1].4.contains("Unsigned(3069186048)"), "{}", seen[1].4);
    assert!(seen[2].4.contains("Signed(-11)"));
    assert!(seen[4].4.contains("Float(41.5)"));
    assert!(seen[5].4.contains("frame decoded"));
    let Some(Frame::Bye(bye)) = frames.last() else {
        panic!("Bye last")
    };
    assert_eq!((bye.records, bye.dropped), (6, 0));
}

/// The session's origin is when the agent started, not its first poll: a board that records while
/// booting, before its link is up, gets no record before zero (the QEMU capture started at -2.7 ms).
#[test]
fn hello_origin_precedes_records_made_before_the_first_poll() {
    let clock = SharedClock::default();
    clock.0.set(1_000);
    let agent = Box::new(TestAgent::new(clock.clone(), config()));
    clock.0.set(1_200);
    agent.context_switch(0, 0, 5).unwrap();
    clock.0.set(4_000);
    let mut out = Capture::default();
    agent.finish(&mut out).unwrap();
    let frames = decode_all(&out.bytes);
    let Frame::Hello(h) = &frames[0] else {
        panic!("Hello first, got {:?}", frames[0])
    };
    assert_eq!(h.start_ticks, 1_000);
    let first = frames
        .iter()
        .find_map(|f| match f {
            Frame::Events(b) => b.iter().next().map(|r| r.ticks()),
            _ => None,
        })
        .expect("the switch is sent");
    assert_eq!(first, 1_200);
}

#[test]
fn invalid_records_are_refused_not_numbered() {
    let clock = SharedClock::default();
    let mut agent = Box::new(TestAgent::new(clock, config()));
    assert_eq!(agent.irq_entry(2, 1), Err(AgentError::BadCpu));
    assert_eq!(agent.record(0, 99, &[]), Err(AgentError::UnknownType));
    assert_eq!(
        agent.record(0, Builtin::Wakeup.id(), &[ParamValue::Signed(3)]),
        Err(AgentError::ParamMismatch)
    );
    let long = "x".repeat(200);
    assert_eq!(agent.marker(0, &long), Err(AgentError::RecordTooLarge));
    assert_eq!(
        agent.record(0, Builtin::Wakeup.id(), &[ParamValue::Unsigned(3)]),
        Ok(Recorded::Stored)
    );
    let s = agent.stats();
    assert_eq!((s.records, s.rejected, s.dropped), (1, 4, 0));
    assert_eq!(
        agent.register_type(EventTypeDef {
            id: 5,
            name: "x",
            category: Category::Punctual,
            params: &[]
        }),
        Err(AgentError::ReservedTypeId)
    );
}

#[test]
fn partial_block_waits_for_the_flush_latency_then_heartbeat_when_idle() {
    let clock = SharedClock::default();
    let agent = Box::new(TestAgent::new(clock.clone(), config()));
    let mut out = Capture::default();
    clock.0.set(10);
    agent.wakeup(0, 12).unwrap();
    agent.poll(&mut out).unwrap();
    let count =
        |bytes: &[u8], f: fn(&Frame) -> bool| decode_all(bytes).iter().filter(|x| f(x)).count();
    assert_eq!(count(&out.bytes, |f| matches!(f, Frame::Events(_))), 0);
    clock.0.set(10 + 999);
    agent.poll(&mut out).unwrap();
    assert_eq!(count(&out.bytes, |f| matches!(f, Frame::Events(_))), 0);
    clock.0.set(10 + 1000);
    agent.poll(&mut out).unwrap();
    assert_eq!(count(&out.bytes, |f| matches!(f, Frame::Events(_))), 1);
    assert_eq!(count(&out.bytes, |f| matches!(f, Frame::Heartbeat(_))), 0);
    clock.0.set(10 + 1000 + 10_000);
    agent.poll(&mut out).unwrap();
    assert_eq!(count(&out.bytes, |f| matches!(f, Frame::Heartbeat(_))), 1);
    agent.poll(&mut out).unwrap();
    assert_eq!(
        count(&out.bytes, |f| matches!(f, Frame::Heartbeat(_))),
        1,
        "not again right away"
    );
}

#[test]
fn clock_regressions_are_counted_and_sent_as_zero_delta() {
    let clock = SharedClock::default();
    let agent = Box::new(TestAgent::new(clock.clone(), config()));
    clock.0.set(500);
    agent.mark(0, 1).unwrap();
    clock.0.set(400);
    agent.mark(0, 2).unwrap();
    assert_eq!(agent.stats().clock_regressions, 1);
    let mut out = Capture::default();
    agent.finish(&mut out).unwrap();
    let ticks: Vec<u64> = decode_all(&out.bytes)
        .iter()
        .filter_map(|f| match f {
            Frame::Events(b) => Some(b.iter().map(|r| r.ticks()).collect::<Vec<_>>()),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(ticks, vec![500, 500]);
}

#[test]
fn a_clock_behind_across_a_block_switch_counts_each_record_once() {
    // The record path opens the next block in a masked section of its own and records again: a record
    // whose clock is behind is counted once, when it is written, even when its first try found no room.
    let clock = SharedClock::default();
    let agent = Box::new(TestAgent::new(clock.clone(), config()));
    clock.0.set(500);
    agent.mark(0, 1).unwrap();
    clock.0.set(400);
    for id in 0..60 {
        assert_eq!(agent.mark(0, id), Ok(Recorded::Stored));
    }
    assert_eq!(agent.stats().clock_regressions, 60);
    let mut out = Capture::default();
    agent.finish(&mut out).unwrap();
    let blocks: Vec<Vec<u64>> = decode_all(&out.bytes)
        .iter()
        .filter_map(|f| match f {
            Frame::Events(b) => Some(b.iter().map(|r| r.ticks()).collect()),
            _ => None,
        })
        .collect();
    assert!(blocks.len() > 1, "the records span a block switch");
    assert!(blocks.iter().flatten().all(|&t| t == 500));
    assert_eq!(blocks.iter().flatten().count(), 61);
}

#[derive(Clone, Debug)]
enum Op {
    Record { cpu: u16, kind: u8, arg: u32 },
    Advance(u16),
    Poll,
    Block(bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        20 => (0u16..2, 0u8..6, any::<u32>()).prop_map(|(cpu, kind, arg)| Op::Record { cpu, kind, arg }),
        3 => any::<u16>().prop_map(Op::Advance),
        2 => Just(Op::Poll),
        1 => any::<bool>().prop_map(Op::Block),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Under any overload pattern, every record is either delivered or inside exactly one reported loss
    /// range, per CPU, and the totals match the agent's and the `Bye` counters.
    #[test]
    fn loss_accounting_is_exact(ops in proptest::collection::vec(op(), 1..3000)) {
        let clock = SharedClock::default();
        let agent = Box::new(TestAgent::new(clock.clone(), config()));
        let mut out = Capture::default();
        let mut attempted = [0u64; 2];
        let mut dropped_calls = 0u64;
        for op in ops {
            match op {
                Op::Record { cpu, kind, arg } => {
                    let r = match kind {
                        0 => agent.context_switch(cpu, arg, arg.rotate_left(7)),
                        1 => agent.irq_entry(cpu, arg % 64),
                        2 => agent.irq_exit(cpu),
                        3 => agent.syscall_entry(cpu, arg % 400, [u64::from(arg), 1, 2, 3]),
                        4 => agent.user_entry(cpu, 0x4000_0000 + u64::from(arg % 4096)),
                        _ => agent.marker(cpu, "m"),
                    };
                    attempted[cpu as usize] += 1;
                    if r.unwrap() == Recorded::Dropped { dropped_calls += 1; }
                }
                Op::Advance(t) => clock.0.set(clock.0.get() + u64::from(t)),
                Op::Poll => { let _ = agent.poll(&mut out); }
                Op::Block(b) => out.blocked = b,
            }
        }
        out.blocked = false;
        agent.finish(&mut out).unwrap();
        let stats = agent.stats();
        prop_assert_eq!(stats.dropped, dropped_calls);
        prop_assert_eq!(stats.records + stats.dropped, attempted[0] + attempted[1]);

        let mut d = StreamDecoder::default();
        d.feed(&out.bytes);
        let mut covered: [Vec<(u64, u64)>; 2] = [Vec::new(), Vec::new()];
        let mut lost = 0u64;
        let mut bye = None;
        while let Some(r) = d.next_frame() {
            let r: Result<_, DecodeError> = r;
            match r.unwrap().frame {
                Frame::Events(b) => covered[b.cpu as usize].push((b.first_seq, b.len() as u64)),
                Frame::Loss(l) => { lost += l.count; covered[l.cpu as usize].push((l.first_seq, l.count)); }
                Frame::Bye(b) => bye = Some(b),
                _ => {}
            }
        }
        prop_assert_eq!(lost, stats.dropped);
        let bye = bye.unwrap();
        prop_assert_eq!((bye.records, bye.dropped), (stats.records, stats.dropped));
        for cpu in 0..2 {
            // The ranges come out in sequence order and tile 0..attempted without gap or overlap.
            let mut next = 0;
            for &(first, count) in &covered[cpu] {
                prop_assert_eq!(first, next, "cpu {} ranges {:?}", cpu, covered[cpu]);
                next = first + count;
            }
            prop_assert_eq!(next, attempted[cpu]);
        }
    }
}

/// Takes one frame per call, as a board's drain that encodes one frame per critical section.
struct OneFrame<'a> {
    bytes: &'a mut Vec<u8>,
    sent: bool,
}

impl Transport for OneFrame<'_> {
    fn write_frame(&mut self, frame: &[u8]) -> Result<(), TransportError> {
        if self.sent {
            return Err(TransportError::WouldBlock);
        }
        self.sent = true;
        self.bytes.extend_from_slice(frame);
        Ok(())
    }
}

#[test]
fn finish_goes_on_where_a_one_frame_transport_stopped_it() {
    let clock = SharedClock::default();
    let agent = Box::new(TestAgent::new(clock.clone(), config()));
    for i in 0..5u64 {
        clock.0.set(100 + i);
        agent.mark(0, i).unwrap();
        agent.mark(1, i).unwrap();
    }
    agent.mark(1, 9).unwrap();
    let mut bytes = Vec::new();
    let mut calls = 0;
    loop {
        calls += 1;
        assert!(calls < 100, "finish never completes");
        let mut link = OneFrame {
            bytes: &mut bytes,
            sent: false,
        };
        match agent.finish(&mut link) {
            Ok(()) => break,
            Err(TransportError::WouldBlock) => continue,
            Err(e) => panic!("{e:?}"),
        }
    }
    let frames = decode_all(&bytes);
    let totals: Vec<(u16, u64)> = frames
        .iter()
        .filter_map(|f| match f {
            Frame::CpuTotal(t) => Some((t.cpu, t.sequences)),
            _ => None,
        })
        .collect();
    assert_eq!(totals, vec![(0, 5), (1, 6)], "each CPU's total once");
    assert!(matches!(frames.last(), Some(Frame::Bye(b)) if b.records == 11));
}

/// Runs `dump` to completion through a one-frame transport.
fn dump_all(agent: &TestAgent) -> Vec<u8> {
    let mut bytes = Vec::new();
    for _ in 0..1000 {
        let mut link = OneFrame {
            bytes: &mut bytes,
            sent: false,
        };
        match agent.dump(&mut link) {
            Ok(()) => return bytes,
            Err(TransportError::WouldBlock) => continue,
            Err(e) => panic!("{e:?}"),
        }
    }
    panic!("dump never completes");
}

/// The records of the `Events` frames of `frames`, per CPU: (sequence number, ticks, mark id).
fn marks(frames: &[Frame]) -> [Vec<(u64, u64, u64)>; 2] {
    let mut out = [Vec::new(), Vec::new()];
    for f in frames {
        if let Frame::Events(b) = f {
            for r in b.iter() {
                let id = match r.value(0) {
                    Some(ParamValue::Unsigned(v)) => v,
                    other => panic!("a mark, got {other:?}"),
                };
                out[usize::from(b.cpu)].push((r.seq, r.ticks(), id));
            }
        }
    }
    out
}

#[test]
fn post_mortem_mode_overwrites_the_oldest_and_dumps_the_last_records() {
    let clock = SharedClock::default();
    let mut agent = Box::new(TestAgent::new(clock.clone(), config()));
    agent.set_mode(Mode::PostMortem);
    let mut out = Capture::default();
    // Far more than the rings hold (4 blocks of 128 bytes per CPU), on CPU 0 only; nothing streams.
    for i in 0..2000u64 {
        clock.0.set(1000 + 10 * i);
        assert_eq!(agent.mark(0, i).unwrap(), Recorded::Stored);
        agent.poll(&mut out).unwrap();
    }
    assert!(
        out.bytes.is_empty(),
        "post-mortem mode sends nothing until a dump"
    );
    let stats = agent.stats();
    assert_eq!(stats.records, 2000);
    assert_eq!(stats.dropped, 0);
    assert!(stats.overwritten > 1500, "{stats:?}");

    let frames = decode_all(&dump_all(&agent));
    let Frame::Hello(hello) = &frames[0] else {
        panic!("the dump starts a session: {:?}", frames[0])
    };
    let windows: Vec<_> = frames
        .iter()
        .filter_map(|f| match f {
            Frame::Window(w) => Some(*w),
            _ => None,
        })
        .collect();
    assert_eq!(windows.len(), 2, "one window per CPU: {windows:?}");
    let w0 = windows[0];
    assert_eq!(w0.cpu, 0);
    assert_eq!(w0.overwritten, stats.overwritten);
    assert_eq!(
        w0.first_seq, stats.overwritten,
        "the window starts after the overwritten records"
    );
    assert_eq!((windows[1].first_seq, windows[1].overwritten), (0, 0));
    let got = marks(&frames);
    // The window is the last records recorded, in order, each with its time and value.
    let expected: Vec<(u64, u64, u64)> = (w0.first_seq..2000)
        .map(|i| (i, 1000 + 10 * i, i))
        .collect();
    assert_eq!(got[0], expected);
    assert!(got[1].is_empty());
    assert_eq!(
        hello.start_ticks,
        1000 + 10 * w0.first_seq,
        "the trace starts with the window"
    );
    assert!(!frames.iter().any(|f| matches!(f, Frame::Loss(_))));
    let totals: Vec<(u16, u64)> = frames
        .iter()
        .filter_map(|f| match f {
            Frame::CpuTotal(t) => Some((t.cpu, t.sequences)),
            _ => None,
        })
        .collect();
    assert_eq!(totals, vec![(0, 2000), (1, 0)]);
    assert!(matches!(frames.last(), Some(Frame::Bye(b)) if b.records == 2000 && b.dropped == 0));

    // Recording goes on; the next dump is a session of its own with only the new records.
    for i in 2000..2010u64 {
        clock.0.set(1000 + 10 * i);
        agent.mark(0, i).unwrap();
    }
    let frames = decode_all(&dump_all(&agent));
    assert!(matches!(frames[0], Frame::Hello(_)));
    let got = marks(&frames);
    assert_eq!(
        got[0].iter().map(|r| r.0).collect::<Vec<_>>(),
        (2000..2010).collect::<Vec<_>>()
    );
    let w = frames.iter().find_map(|f| match f {
        Frame::Window(w) if w.cpu == 0 => Some(*w),
        _ => None,
    });
    assert_eq!(w.map(|w| (w.first_seq, w.overwritten)), Some((2000, 0)));
}

#[test]
fn records_made_during_a_dump_wait_for_the_next() {
    let clock = SharedClock::default();
    let mut agent = Box::new(TestAgent::new(clock.clone(), config()));
    agent.set_mode(Mode::PostMortem);
    for i in 0..30u64 {
        clock.0.set(i);
        agent.mark(0, i).unwrap();
    }
    let mut bytes = Vec::new();
    let mut during = 30u64;
    loop {
        let mut link = OneFrame {
            bytes: &mut bytes,
            sent: false,
        };
        let r = agent.dump(&mut link);
        // A record between two steps of the dump: not part of this window.
        clock.0.set(during);
        agent.mark(0, during).unwrap();
        during += 1;
        match r {
            Ok(()) => break,
            Err(TransportError::WouldBlock) => continue,
            Err(e) => panic!("{e:?}"),
        }
    }
    let frames = decode_all(&bytes);
    assert_eq!(
        marks(&frames)[0].iter().map(|r| r.2).collect::<Vec<_>>(),
        (0..30).collect::<Vec<_>>()
    );
    let frames = decode_all(&dump_all(&agent));
    assert_eq!(
        marks(&frames)[0].iter().map(|r| r.2).collect::<Vec<_>>(),
        (30..during).collect::<Vec<_>>()
    );
}

#[test]
fn a_declaration_larger_than_the_control_buffer_is_refused() {
    type Tiny = Agent<SharedClock, 1, 128, 2, 64, 4, 4>;
    let mut agent = Box::new(Tiny::new(SharedClock::default(), config()));
    const MANY: &[ParamDef<'static>] = &[
        ParamDef {
            name: "a_rather_long_parameter_name",
            ty: ParamType::Unsigned,
        },
        ParamDef {
            name: "another_rather_long_parameter_name",
            ty: ParamType::Unsigned,
        },
    ];
    assert_eq!(
        agent.register_type(EventTypeDef {
            id: 64,
            name: "big",
            category: Category::Punctual,
            params: MANY,
        }),
        Err(AgentError::DeclarationTooLarge)
    );
    // The Hello's names were cut to fit: the session still starts.
    let mut out = Capture::default();
    agent.poll(&mut out).unwrap();
    assert!(matches!(decode_all(&out.bytes)[0], Frame::Hello(_)));
}

/// A clock several threads can read.
#[derive(Clone, Default)]
struct AtomicClock(std::sync::Arc<std::sync::atomic::AtomicU64>);

impl Clock for AtomicClock {
    fn now(&mut self) -> u64 {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }
}

/// Recording from two threads while a third drains, as interrupts and a drain task do on a board: every
/// record is delivered once, in order, or counted in a loss range.
#[test]
fn records_from_several_contexts_while_another_drains() {
    type SharedAgent = Agent<AtomicClock, 2, 128, 4, 160, 4, 4>;
    let agent = std::sync::Arc::new(SharedAgent::new(AtomicClock::default(), config()));
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let drain = {
        let (agent, done) = (agent.clone(), done.clone());
        std::thread::spawn(move || {
            let mut out = Capture::default();
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                let _ = agent.poll(&mut out);
            }
            agent.finish(&mut out).unwrap();
            out.bytes
        })
    };
    let recorders: Vec<_> = (0..2u16)
        .map(|cpu| {
            let agent = agent.clone();
            std::thread::spawn(move || {
                for i in 0..20_000u64 {
                    let _ = agent.mark(cpu, i).unwrap();
                }
            })
        })
        .collect();
    for r in recorders {
        r.join().unwrap();
    }
    done.store(true, std::sync::atomic::Ordering::Release);
    let frames = decode_all(&drain.join().unwrap());
    let stats = agent.stats();
    assert_eq!(stats.records + stats.dropped, 40_000);
    let got = marks(&frames);
    let mut lost = [Vec::new(), Vec::new()];
    for f in &frames {
        if let Frame::Loss(l) = f {
            lost[usize::from(l.cpu)].extend(l.first_seq..l.first_seq + l.count);
        }
    }
    for cpu in 0..2 {
        let mut seqs: Vec<u64> = got[cpu].iter().map(|r| r.0).collect();
        // A record's value is its sequence number: recorded in order on its CPU.
        assert!(got[cpu].iter().all(|r| r.0 == r.2));
        seqs.extend(&lost[cpu]);
        seqs.sort_unstable();
        assert_eq!(seqs, (0..20_000).collect::<Vec<_>>(), "cpu {cpu}");
    }
}

/// The lock-free path for one owning context (`Agent::exclusive`) writes the same bytes as the shared
/// one, through every case of the record path: every kind, custom records, full blocks (drops), a clock
/// that goes back, gaps of 2^32 ticks and more (a new block carries the time), a CPU past `cpu_count`.
#[test]
fn the_exclusive_path_writes_the_same_stream_as_the_shared_one() {
    static PARAMS: [ParamDef<'static>; 2] = [
        ParamDef {
            name: "n",
            ty: ParamType::Unsigned,
        },
        ParamDef {
            name: "at",
            ty: ParamType::Address,
        },
    ];
    let custom = EventTypeDef {
        id: 200,
        name: "custom",
        category: Category::Punctual,
        params: &PARAMS,
    };
    let run = |exclusive: bool| {
        let clock = SharedClock::default();
        let mut agent = Box::new(TestAgent::new(
            clock.clone(),
            Config {
                cpu_count: 1,
                ..config()
            },
        ));
        agent.register_type(custom).unwrap();
        let mut out = Capture::default();
        let mut outcomes = Vec::new();
        let mut times = Vec::new();
        let mut t = 0u64;
        for i in 0..400u64 {
            t = match i % 97 {
                13 => t.saturating_sub(50),
                50 => t + (1 << 32) + 5,
                51 => t + (1 << 33),
                _ => t + 1 + i % 300,
            };
            clock.0.set(t);
            let cpu = if i % 89 == 7 { 1 } else { 0 };
            let v = i as u32;
            macro_rules! each {
                ($r:expr) => {
                    match i % 18 {
                        0 => $r.context_switch(cpu, v, v + 1),
                        1 => $r.irq_entry(cpu, v % 64),
                        2 => $r.irq_exit(cpu),
                        3 => $r.softirq_entry(cpu, 0x8000_0000 + i * 16),
                        4 => $r.softirq_exit(cpu),
                        5 => $r.syscall_entry(cpu, v, [i, u64::MAX - i, 1 << 40, 0]),
                        6 => $r.syscall_exit(cpu, v, -(i as i64)),
                        7 => $r.wakeup(cpu, v),
                        8 => $r.marker(cpu, "a marker"),
                        9 => $r.mark(cpu, i << 35),
                        10 => $r.user_entry(cpu, 0x0800_0000 + (i % 7) * 4),
                        11 => $r.user_exit(cpu),
                        12 => $r.thread_create(cpu, v, "worker"),
                        13 => $r.thread_exit(cpu, v),
                        14 => $r.kmalloc(cpu, i * 64, 0x2000_0000 - i * 64),
                        15 => $r.kfree(cpu, 0x2000_0000 - i * 64),
                        16 => $r.record(
                            cpu,
                            200,
                            &[ParamValue::Unsigned(i), ParamValue::Address(i * 8)],
                        ),
                        _ => $r.marker(cpu, &"x".repeat(200)),
                    }
                };
            }
            let r = if exclusive {
                let mut rec = agent.exclusive();
                each!(rec)
            } else {
                each!(agent)
            };
            if cpu == 0 && r == Ok(Recorded::Stored) {
                // A clock that went back records the previous time.
                let last = times.last().copied().unwrap_or(0);
                times.push(t.max(last));
            }
            outcomes.push(r);
            if i % 40 == 39 {
                agent.poll(&mut out).unwrap();
            }
        }
        agent.finish(&mut out).unwrap();
        (outcomes, agent.stats(), out.bytes, times)
    };
    let shared = run(false);
    let exclusive = run(true);
    assert!(
        shared.0.contains(&Ok(Recorded::Dropped)),
        "some records find the ring full"
    );
    assert!(shared.0.contains(&Err(AgentError::BadCpu)));
    assert!(shared.0.contains(&Err(AgentError::RecordTooLarge)));
    assert!(shared.1.clock_regressions > 0);
    assert_eq!(shared.0, exclusive.0);
    assert_eq!(shared.1, exclusive.1);
    assert_eq!(shared.2, exclusive.2);
    // And the stream decodes: every record's time is what the clock said (gaps of 2^32 ticks included).
    let frames = decode_all(&shared.2);
    let decoded: Vec<u64> = frames
        .iter()
        .filter_map(|f| match f {
            Frame::Events(b) if b.cpu == 0 => {
                Some(b.records.iter().map(|r| r.ticks).collect::<Vec<_>>())
            }
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(decoded, shared.3);
}

/// A board's dictionary from tables in flash (`Agent::declare_static`): sent like registered entries
/// (the tables first), checked the same way, and all or nothing.
#[test]
fn a_static_dictionary_is_sent_and_checked_like_registered_entries() {
    static PRODUCERS: [ProducerDef<'static>; 2] = [
        ProducerDef {
            id: 1,
            parent: None,
            kind: ProducerKind::Process,
            local_id: 300,
            name: "player",
        },
        ProducerDef {
            id: 2,
            parent: Some(1),
            kind: ProducerKind::Thread,
            local_id: 301,
            name: "decoder",
        },
    ];
    static PARAMS: [ParamDef<'static>; 1] = [ParamDef {
        name: "n",
        ty: ParamType::Unsigned,
    }];
    static TYPES: [EventTypeDef<'static>; 1] = [EventTypeDef {
        id: 70,
        name: "frame",
        category: Category::Punctual,
        params: &PARAMS,
    }];
    static DUPLICATES: [EventTypeDef<'static>; 2] = [TYPES[0], TYPES[0]];
    static RESERVED: [EventTypeDef<'static>; 1] = [EventTypeDef {
        id: 5,
        name: "mine",
        category: Category::Punctual,
        params: &[],
    }];
    static WITH_DUPLICATES: StaticDictionary = StaticDictionary {
        producers: &PRODUCERS,
        types: &DUPLICATES,
    };
    static WITH_RESERVED: StaticDictionary = StaticDictionary {
        producers: &PRODUCERS,
        types: &RESERVED,
    };
    static DICTIONARY: StaticDictionary = StaticDictionary {
        producers: &PRODUCERS,
        types: &TYPES,
    };
    // No dictionary storage of its own: PRODUCERS and TYPES of 0 still take the static tables.
    type Lean = Agent<SharedClock, 1, 128, 4, { socscope_agent::frame_buffer_len(128) }, 0, 0>;
    let clock = SharedClock::default();
    let mut agent = Box::new(Lean::new(
        clock.clone(),
        Config {
            cpu_count: 1,
            ..config()
        },
    ));
    assert_eq!(
        agent.declare_static(&WITH_DUPLICATES),
        Err(AgentError::DuplicateType)
    );
    assert_eq!(
        agent.declare_static(&WITH_RESERVED),
        Err(AgentError::ReservedTypeId)
    );
    assert_eq!(
        agent.record(0, 70, &[ParamValue::Unsigned(1)]),
        Err(AgentError::UnknownType),
        "nothing declared by a refused call"
    );
    agent.declare_static(&DICTIONARY).unwrap();
    assert_eq!(
        agent.register_producer(PRODUCERS[0]),
        Err(AgentError::DictionaryFull),
        "no room for copies"
    );
    assert_eq!(
        agent.register_type(TYPES[0]),
        Err(AgentError::DuplicateType)
    );
    clock.0.set(10);
    agent.record(0, 70, &[ParamValue::Unsigned(7)]).unwrap();
    let mut out = Capture::default();
    agent.finish(&mut out).unwrap();
    let frames = decode_all(&out.bytes);
    let mut producers = Vec::new();
    let mut types = Vec::new();
    let mut records = 0;
    for f in &frames {
        match f {
            Frame::Dictionary(entries) => {
                for e in entries {
                    match e {
                        socscope_wire::decode::OwnedDictEntry::Producer(p) => {
                            producers.push(p.name.clone())
                        }
                        socscope_wire::decode::OwnedDictEntry::EventType(t) => {
                            types.push(t.name.clone())
                        }
                    }
                }
            }
            Frame::Events(b) => records += b.len(),
            _ => {}
        }
    }
    assert_eq!(producers, ["player", "decoder"]);
    assert_eq!(types, ["frame"]);
    assert_eq!(records, 1);
}

/// [`Agent::record`] (any declared type, values checked against a table of the built-ins' parameter
/// types) writes the same bytes as each built-in kind's own record path, for every kind and for values
/// of every size, and refuses a built-in with one value of the wrong type or count.
#[test]
fn the_generic_record_writes_what_each_kind_writes() {
    let kinds: Vec<(Builtin, Vec<ParamValue<'static>>)> = {
        let mut v = Vec::new();
        for (i, big) in [(1u64, 5u64), (300, 1 << 20), (70_000, u64::MAX - 3)] {
            let u = |x: u64| ParamValue::Unsigned(x);
            v.extend([
                (Builtin::ContextSwitch, vec![u(i), u(big & 0xffff_ffff)]),
                (Builtin::IrqEntry, vec![u(i & 63)]),
                (Builtin::IrqExit, vec![]),
                (Builtin::SoftIrqEntry, vec![ParamValue::Address(big)]),
                (Builtin::SoftIrqExit, vec![]),
                (
                    Builtin::SyscallEntry,
                    vec![u(i), u(big), u(0), u(i.wrapping_mul(big)), u(7)],
                ),
                (
                    Builtin::SyscallExit,
                    vec![u(i), ParamValue::Signed(-(big as i64) / 2)],
                ),
                (Builtin::Wakeup, vec![u(i)]),
                (Builtin::Marker, vec![ParamValue::Str("frame decoded")]),
                (Builtin::Mark, vec![u(big)]),
                (Builtin::UserEntry, vec![ParamValue::Address(i * 4)]),
                (Builtin::UserExit, vec![]),
                (Builtin::ThreadCreate, vec![u(i), ParamValue::Str("worker")]),
                (Builtin::ThreadExit, vec![u(i)]),
                (Builtin::Kmalloc, vec![u(big), ParamValue::Address(big / 3)]),
                (Builtin::Kfree, vec![ParamValue::Address(i)]),
            ]);
        }
        v
    };
    let run = |generic: bool| {
        let clock = SharedClock::default();
        let agent = Box::new(TestAgent::new(clock.clone(), config()));
        let mut out = Capture::default();
        for (n, (kind, values)) in kinds.iter().enumerate() {
            clock.0.set(10 + n as u64 * 3);
            let r = if generic {
                agent.record(0, kind.id(), values)
            } else {
                let (u, a, s, t) = (
                    |k: usize| match values[k] {
                        ParamValue::Unsigned(x) => x,
                        _ => unreachable!(),
                    },
                    |k: usize| match values[k] {
                        ParamValue::Address(x) => x,
                        _ => unreachable!(),
                    },
                    |k: usize| match values[k] {
                        ParamValue::Str(x) => x,
                        _ => unreachable!(),
                    },
                    |k: usize| match values[k] {
                        ParamValue::Signed(x) => x,
                        _ => unreachable!(),
                    },
                );
                match kind {
                    Builtin::ContextSwitch => agent.context_switch(0, u(0) as u32, u(1) as u32),
                    Builtin::IrqEntry => agent.irq_entry(0, u(0) as u32),
                    Builtin::IrqExit => agent.irq_exit(0),
                    Builtin::SoftIrqEntry => agent.softirq_entry(0, a(0)),
                    Builtin::SoftIrqExit => agent.softirq_exit(0),
                    Builtin::SyscallEntry => {
                        agent.syscall_entry(0, u(0) as u32, [u(1), u(2), u(3), u(4)])
                    }
                    Builtin::SyscallExit => agent.syscall_exit(0, u(0) as u32, t(1)),
                    Builtin::Wakeup => agent.wakeup(0, u(0) as u32),
                    Builtin::Marker => agent.marker(0, s(0)),
                    Builtin::Mark => agent.mark(0, u(0)),
                    Builtin::UserEntry => agent.user_entry(0, a(0)),
                    Builtin::UserExit => agent.user_exit(0),
                    Builtin::ThreadCreate => agent.thread_create(0, u(0) as u32, s(1)),
                    Builtin::ThreadExit => agent.thread_exit(0, u(0) as u32),
                    Builtin::Kmalloc => agent.kmalloc(0, u(0), a(1)),
                    Builtin::Kfree => agent.kfree(0, a(0)),
                }
            };
            assert_eq!(r, Ok(Recorded::Stored), "{kind:?} generic={generic}");
            agent.flush(&mut out).unwrap();
        }
        agent.finish(&mut out).unwrap();
        (out.bytes, agent.stats())
    };
    let (dedicated, generic) = (run(false), run(true));
    assert_eq!(dedicated.1.records, kinds.len() as u64);
    assert_eq!(generic, dedicated);

    let agent = Box::new(TestAgent::new(SharedClock::default(), config()));
    for (kind, values) in &kinds {
        let mut fewer = values.clone();
        if fewer.pop().is_some() {
            assert_eq!(
                agent.record(0, kind.id(), &fewer),
                Err(AgentError::ParamMismatch),
                "{kind:?} with a value missing"
            );
        }
        let mut more = values.clone();
        more.push(ParamValue::Unsigned(1));
        assert_eq!(
            agent.record(0, kind.id(), &more),
            Err(AgentError::ParamMismatch),
            "{kind:?} with a value too many"
        );
        for k in 0..values.len() {
            let mut wrong = values.clone();
            wrong[k] = match wrong[k] {
                ParamValue::Float(_) => ParamValue::Str("x"),
                _ => ParamValue::Float(1.0),
            };
            assert_eq!(
                agent.record(0, kind.id(), &wrong),
                Err(AgentError::ParamMismatch),
                "{kind:?} with value {k} of the wrong type"
            );
        }
    }
    assert_eq!(agent.record(0, 0, &[]), Err(AgentError::UnknownType));
    assert_eq!(agent.record(0, 17, &[]), Err(AgentError::UnknownType));
}

/// `common::FLASH_CONFIG` in a `static`, as a board keeps it in flash.
static FLASH_CONFIG: Config = common::FLASH_CONFIG;

#[test]
fn an_agent_that_references_its_configuration_writes_the_same_stream() {
    type StaticAgent = Agent<
        SharedClock,
        2,
        128,
        4,
        { socscope_agent::frame_buffer_len(128) },
        8,
        4,
        1,
        socscope_agent::StaticConfig,
    >;
    // Smaller by the copy it does not hold.
    assert_eq!(
        TestAgent::state_bytes() - StaticAgent::state_bytes(),
        std::mem::size_of::<Config>() - std::mem::size_of::<socscope_agent::StaticConfig>()
    );
    let copied_clock = SharedClock::default();
    let copied = Box::new(TestAgent::new(copied_clock.clone(), config()));
    let referenced_clock = SharedClock::default();
    let referenced =
        Box::new(StaticAgent::new_static(referenced_clock.clone(), &FLASH_CONFIG, 7).unwrap());
    assert_eq!(referenced.config().board, "stb-test");
    let mut outs = [Capture::default(), Capture::default()];
    for t in 1..200u64 {
        copied_clock.0.set(t * 10);
        referenced_clock.0.set(t * 10);
        let cpu = (t % 2) as u16;
        assert_eq!(
            copied.context_switch(cpu, t as u32, 1),
            referenced.context_switch(cpu, t as u32, 1)
        );
        assert_eq!(copied.marker(cpu, "tick"), referenced.marker(cpu, "tick"));
        if t % 50 == 0 {
            copied.poll(&mut outs[0]).unwrap();
            referenced.poll(&mut outs[1]).unwrap();
        }
    }
    copied.finish(&mut outs[0]).unwrap();
    referenced.finish(&mut outs[1]).unwrap();
    assert_eq!(
        decode_all(&outs[0].bytes),
        decode_all(&outs[1].bytes),
        "same frames, session id 7 in both Hellos"
    );
    // A record for a CPU the configuration does not have is refused, as with a copy.
    assert_eq!(referenced.irq_entry(2, 1), Err(AgentError::BadCpu));
    assert_eq!(copied.irq_entry(2, 1), Err(AgentError::BadCpu));
}

#[test]
fn a_referenced_configuration_is_refused_where_a_copy_would_be_cut() {
    type StaticAgent = Agent<SharedClock, 2, 128, 2, 96, 0, 0, 1, socscope_agent::StaticConfig>;
    static NO_CPU: Config = Config {
        cpu_count: 0,
        ..FLASH_CONFIG
    };
    static THREE_CPUS: Config = Config {
        cpu_count: 3,
        ..FLASH_CONFIG
    };
    static LONG_NAME: Config = Config {
        board: "a board name that is far longer than the sixty-three bytes a name may have on the wire",
        ..FLASH_CONFIG
    };
    // Each name fits alone (at most 63 bytes); together their `Hello` does not fit 96 bytes.
    static TOO_MUCH_FOR_THE_BUFFER: Config = Config {
        board: "a-board-name-of-fifty-bytes-------------------------",
        os: "an-operating-system-name-of-fifty-bytes------------",
        ..FLASH_CONFIG
    };
    let clock = SharedClock::default;
    assert_eq!(
        StaticAgent::new_static(clock(), &NO_CPU, 1).err(),
        Some(AgentError::BadCpu)
    );
    assert_eq!(
        StaticAgent::new_static(clock(), &THREE_CPUS, 1).err(),
        Some(AgentError::BadCpu)
    );
    assert_eq!(
        StaticAgent::new_static(clock(), &LONG_NAME, 1).err(),
        Some(AgentError::NameTooLong)
    );
    assert_eq!(
        StaticAgent::new_static(clock(), &TOO_MUCH_FOR_THE_BUFFER, 1).err(),
        Some(AgentError::NameTooLong)
    );
    // The same configurations copied are cut or clamped instead, and the session starts.
    let copied = Box::new(Agent::<SharedClock, 2, 128, 2, 96, 0, 0>::new(
        clock(),
        TOO_MUCH_FOR_THE_BUFFER,
    ));
    let mut out = Capture::default();
    copied.poll(&mut out).unwrap();
    assert!(matches!(decode_all(&out.bytes)[0], Frame::Hello(_)));
    // And the configuration that fits is taken.
    assert!(StaticAgent::new_static(clock(), &FLASH_CONFIG, 1).is_ok());
}

/// Starts a dump at `at` on a link that refuses its `Hello` (blocked): the dump is under way, its
/// `Hello` not sent.
fn start_a_dump_whose_hello_waits(agent: &TestAgent, clock: &SharedClock, at: u64) {
    clock.0.set(at);
    let mut refused = Capture {
        blocked: true,
        ..Capture::default()
    };
    assert_eq!(agent.dump(&mut refused), Err(TransportError::WouldBlock));
}

/// A dump whose `Hello` waits (the link refused it) while records keep coming, on a CPU whose ring
/// was empty when the dump started too: the `Hello` still announces the window's first block's time
/// (the agent reads it from the rings when it sends the `Hello`, it does not keep it), and `Bye` the
/// counts of the dump's start.
#[test]
fn a_dump_whose_hello_waits_announces_the_windows_it_started_with() {
    let clock = SharedClock::default();
    let mut agent = Box::new(TestAgent::new(clock.clone(), config()));
    agent.set_mode(Mode::PostMortem);
    for i in 0..3u64 {
        clock.0.set(100 + i);
        agent.mark(0, i).unwrap();
    }
    start_a_dump_whose_hello_waits(&agent, &clock, 500);
    // After the dump started: blocks closed on both CPUs (CPU 1 had none), and more than the rings
    // hold on CPU 1 (dropped: nothing is overwritten while a dump runs).
    for i in 0..200u64 {
        clock.0.set(1000 + i);
        let _ = agent.mark(0, 100 + i);
        let _ = agent.mark(1, 100 + i);
    }
    assert!(agent.stats().dropped > 0, "{:?}", agent.stats());
    let frames = decode_all(&dump_all(&agent));
    let Frame::Hello(hello) = &frames[0] else {
        panic!("the dump starts a session: {:?}", frames[0])
    };
    assert_eq!(hello.start_ticks, 100, "the window's first block's time");
    let got = marks(&frames);
    assert_eq!(
        got[0],
        vec![(0, 100, 0), (1, 101, 1), (2, 102, 2)],
        "CPU 0's window: what it held at the dump's start"
    );
    assert!(got[1].is_empty(), "CPU 1's window is empty: {:?}", got[1]);
    let Some(Frame::Bye(bye)) = frames.last() else {
        panic!("Bye last")
    };
    assert_eq!((bye.ticks, bye.records, bye.dropped), (500, 3, 0));
}

/// The same with every window empty: the `Hello` announces the dump's own time, not the blocks that
/// closed after it started.
#[test]
fn a_dump_of_empty_rings_whose_hello_waits_announces_its_own_time() {
    let clock = SharedClock::default();
    let mut agent = Box::new(TestAgent::new(clock.clone(), config()));
    agent.set_mode(Mode::PostMortem);
    start_a_dump_whose_hello_waits(&agent, &clock, 500);
    for i in 0..200u64 {
        clock.0.set(1000 + i);
        let _ = agent.mark(0, i);
    }
    let frames = decode_all(&dump_all(&agent));
    let Frame::Hello(hello) = &frames[0] else {
        panic!("the dump starts a session: {:?}", frames[0])
    };
    assert_eq!(hello.start_ticks, 500);
    assert!(marks(&frames).iter().all(Vec::is_empty));
    let Some(Frame::Bye(bye)) = frames.last() else {
        panic!("Bye last")
    };
    assert_eq!((bye.ticks, bye.records, bye.dropped), (500, 0, 0));
}
