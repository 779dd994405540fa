//! The agent end to end through the real decoder: what goes in comes out, and losses are counted exactly.

use std::cell::Cell;
use std::rc::Rc;

use proptest::prelude::*;
use socscope_agent::{Agent, AgentError, Clock, Config, Recorded, Transport, TransportError};
use socscope_wire::decode::{DecodeError, Frame, StreamDecoder};
use socscope_wire::dict::{
    Builtin, Category, EventTypeDef, ParamDef, ParamType, ProducerDef, ProducerKind,
};
use socscope_wire::frame::ParamValue;

#[derive(Clone, Default)]
struct SharedClock(Rc<Cell<u64>>);

impl Clock for SharedClock {
    fn now(&mut self) -> u64 {
        self.0.get()
    }
}

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

fn config() -> Config {
    Config {
        board: "stb-test",
        soc: "sti7105",
        os: "linux",
        application: "player",
        cpu_count: 2,
        tick_hz: 1_000_000,
        session_id: 7,
        flush_latency_ticks: 1_000,
        heartbeat_ticks: 10_000,
        hello_every_ticks: 0,
        token: "",
    }
}

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
        (h.board.as_str(), h.cpu_count, h.tick_hz, h.session_id),
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
    let mut agent = Box::new(TestAgent::new(clock.clone(), config()));
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
    let mut agent = Box::new(TestAgent::new(clock.clone(), config()));
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
    let mut agent = Box::new(TestAgent::new(clock.clone(), config()));
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
        let mut agent = Box::new(TestAgent::new(clock.clone(), config()));
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
    let mut agent = Box::new(TestAgent::new(clock.clone(), config()));
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
