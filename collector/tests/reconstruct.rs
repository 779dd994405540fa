//! State reconstruction on a small hand-written scenario: the real agent encodes it, the real decoder
//! decodes it, and every reconstructed event is checked against what a person works out on paper.

use std::cell::Cell;
use std::rc::Rc;

use socscope_agent::{Agent, Clock, Config, Transport, TransportError};
use socscope_collector::reconstruct::{
    ALLOCATED_TYPE, RUNNING_TYPE, Reconstructor, Sink, WAKEUP_TYPE,
};
use socscope_tracedb::{
    CPU_IDLE_TYPE, Event, EventKind, EventType, LossRecord, ON_CPU_TYPE, ParamValue, Producer,
    Result,
};
use socscope_wire::decode::{Frame, StreamDecoder};
use socscope_wire::dict::{Builtin, ProducerDef, ProducerKind};

#[derive(Clone, Default)]
struct SimClock(Rc<Cell<u64>>);
impl Clock for SimClock {
    fn now(&mut self) -> u64 {
        self.0.get()
    }
}

#[derive(Default)]
struct Bytes(Vec<u8>);
impl Transport for Bytes {
    fn write_frame(&mut self, f: &[u8]) -> Result<(), TransportError> {
        self.0.extend_from_slice(f);
        Ok(())
    }
}

#[derive(Default)]
struct Collected {
    producers: Vec<Producer>,
    types: Vec<EventType>,
    events: Vec<Event>,
    losses: Vec<LossRecord>,
}

impl Sink for Collected {
    fn producer(&mut self, p: &Producer) -> Result<()> {
        self.producers.retain(|q| q.id != p.id);
        self.producers.push(p.clone());
        Ok(())
    }
    fn event_type(&mut self, t: &EventType) -> Result<()> {
        self.types.retain(|q| q.id != t.id);
        self.types.push(t.clone());
        Ok(())
    }
    fn event(&mut self, e: &Event) -> Result<()> {
        self.events.push(e.clone());
        Ok(())
    }
    fn loss(&mut self, l: &LossRecord) -> Result<()> {
        self.losses.push(l.clone());
        Ok(())
    }
}

impl Collected {
    fn producer(&self, name: &str) -> u32 {
        self.producers
            .iter()
            .find(|p| p.name == name)
            .unwrap_or_else(|| panic!("no producer {name}: {:?}", self.producers))
            .id
    }
}

type TestAgent = Agent<SimClock, 2, 256, 4, { socscope_agent::frame_buffer_len(256) }, 8, 4>;

/// Runs `script` (time in µs, at 1 MHz) through agent → wire → decoder → reconstructor.
fn reconstruct(script: impl FnOnce(&mut TestAgent, &dyn Fn(u64))) -> (Collected, Reconstructor) {
    let clock = SimClock::default();
    let mut agent = Box::new(TestAgent::new(
        clock.clone(),
        Config {
            board: "paper",
            soc: "sim",
            os: "linux",
            application: "test",
            cpu_count: 2,
            tick_rate_hz: 1_000_000,
            session_id: 1,
            flush_latency_ticks: 1_000_000,
            heartbeat_ticks: 1_000_000,
            hello_every_ticks: 0,
            token: "",
        },
    ));
    let mut out = Bytes::default();
    agent.poll(&mut out).unwrap();
    let c2 = clock.clone();
    script(&mut agent, &move |t| c2.0.set(t));
    agent.finish(&mut out).unwrap();

    let mut decoder = StreamDecoder::default();
    decoder.feed(&out.0);
    let mut sink = Collected::default();
    let mut recon = None;
    while let Some(r) = decoder.next_frame() {
        match r.unwrap().frame {
            Frame::Hello(h) => {
                let mut rc = Reconstructor::new(h.tick_rate_hz, h.start_ticks, h.cpu_count);
                rc.start(decoder.dictionary(), &mut sink).unwrap();
                recon = Some(rc);
            }
            Frame::Events(b) => recon
                .as_mut()
                .unwrap()
                .batch(&b, decoder.dictionary(), &mut sink)
                .unwrap(),
            Frame::Dictionary(items) => recon
                .as_mut()
                .unwrap()
                .dictionary(&items, decoder.dictionary(), &mut sink)
                .unwrap(),
            Frame::Loss(l) => recon
                .as_mut()
                .unwrap()
                .loss(l.cpu, l.first_seq, l.count, &mut sink)
                .unwrap(),
            _ => {}
        }
    }
    let mut recon = recon.unwrap();
    recon.finish(&mut sink).unwrap();
    (sink, recon)
}

fn us(t: i64) -> i64 {
    t * 1000
}

#[test]
fn hand_checked_scenario() {
    let (c, recon) = reconstruct(|a, at| {
        at(10);
        a.context_switch(0, 0, 100).unwrap();
        at(15);
        a.syscall_exit(1, 4, 0).unwrap();
        at(20);
        a.syscall_entry(0, 3, [5, 0xb000, 4096, 0]).unwrap();
        at(25);
        a.context_switch(1, 300, 0).unwrap();
        at(30);
        a.irq_entry(0, 27).unwrap();
        at(35);
        a.wakeup(0, 200).unwrap();
        at(40);
        a.irq_exit(0).unwrap();
        at(50);
        a.context_switch(0, 100, 200).unwrap();
        at(60);
        a.user_entry(0, 0x4000).unwrap();
        at(70);
        a.user_exit(0).unwrap();
        at(80);
        a.context_switch(0, 200, 100).unwrap();
        at(90);
        a.syscall_exit(0, 3, 4096).unwrap();
        at(100);
        a.marker(0, "frame decoded").unwrap();
        at(110);
        a.kmalloc(0, 64, 0x1000).unwrap();
        at(120);
        a.kfree(0, 0x1000).unwrap();
    });
    let t100 = c.producer("pid 100");
    let t200 = c.producer("pid 200");
    let t300 = c.producer("pid 300");
    let swapper = c.producer("swapper");
    let irq27 = c.producer("irq 27");
    let cpu1 = c.producer("cpu1");

    let running = |p: u32| {
        let mut v: Vec<(i64, i64, Option<u16>)> = c
            .events
            .iter()
            .filter(|e| e.type_id == RUNNING_TYPE && e.producer == p)
            .map(|e| (e.ts, e.end(), e.cpu))
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        running(t100),
        vec![(us(10), us(50), Some(0)), (us(80), us(120), Some(0))]
    );
    assert_eq!(running(t200), vec![(us(50), us(80), Some(0))]);
    assert_eq!(
        running(swapper),
        vec![(us(10), us(10), Some(0)), (us(25), us(120), Some(1))]
    );
    assert_eq!(running(t300), vec![(us(15), us(25), Some(1))]);

    let one = |type_id: u16, producer: u32| -> &Event {
        let v: Vec<&Event> = c
            .events
            .iter()
            .filter(|e| e.type_id == u32::from(type_id) && e.producer == producer)
            .collect();
        assert_eq!(v.len(), 1, "type {type_id} producer {producer}: {v:?}");
        v[0]
    };
    let irq = one(Builtin::IrqEntry.id(), irq27);
    assert_eq!(
        (irq.ts, irq.end(), irq.kind),
        (
            us(30),
            us(40),
            EventKind::State {
                end: us(40),
                depth: 0
            }
        )
    );
    assert_eq!(irq.params, vec![ParamValue::Unsigned(27)]);

    // The read() syscall spans the context switches while thread 100 was blocked.
    let read = one(Builtin::SyscallEntry.id(), t100);
    assert_eq!(
        (read.ts, read.kind),
        (
            us(20),
            EventKind::State {
                end: us(90),
                depth: 1
            }
        )
    );
    assert_eq!(
        read.params,
        vec![
            ParamValue::Unsigned(3),
            ParamValue::Unsigned(5),
            ParamValue::Unsigned(0xb000),
            ParamValue::Unsigned(4096),
            ParamValue::Unsigned(0),
            // The name beside the number (ARM EABI: 3 is read).
            ParamValue::String("read".into()),
            ParamValue::Unsigned(3),
            ParamValue::Signed(4096),
        ]
    );
    // An exit without its entry (before the capture) is clipped to the CPU's first timestamp.
    let clipped = one(Builtin::SyscallEntry.id(), cpu1);
    assert_eq!((clipped.ts, clipped.end()), (us(15), us(15)));
    // Its name comes from the exit's number (4: write).
    assert_eq!(
        clipped.params[5..],
        [
            ParamValue::String("write".into()),
            ParamValue::Unsigned(4),
            ParamValue::Signed(0)
        ]
    );

    let user = one(Builtin::UserEntry.id(), t200);
    assert_eq!(
        (user.ts, user.kind),
        (
            us(60),
            EventKind::State {
                end: us(70),
                depth: 1
            }
        )
    );
    assert_eq!(user.params, vec![ParamValue::Address(0x4000)]);

    // The IRQ woke thread 200, which ran at 50: a link from the IRQ line to the thread.
    let wake = c.events.iter().find(|e| e.type_id == WAKEUP_TYPE).unwrap();
    assert_eq!(
        (wake.ts, wake.producer, wake.kind),
        (
            us(35),
            irq27,
            EventKind::Link {
                end: us(50),
                target: t200
            }
        )
    );

    let marker = one(Builtin::Marker.id(), t100);
    assert_eq!(
        (marker.ts, &marker.params),
        (us(100), &vec![ParamValue::String("frame decoded".into())])
    );

    let alloc: Vec<(i64, EventKind)> = c
        .events
        .iter()
        .filter(|e| e.type_id == ALLOCATED_TYPE)
        .map(|e| (e.ts, e.kind))
        .collect();
    assert_eq!(
        alloc,
        vec![
            (us(110), EventKind::Variable { value: 64.0 }),
            (us(120), EventKind::Variable { value: 0.0 })
        ]
    );

    let st = recon.stats();
    assert_eq!(
        st.clipped_exits, 3,
        "cpu0's first switch, cpu1's exit and cpu1's first switch"
    );
    assert_eq!(
        st.clipped_open_states, 2,
        "thread 100 and swapper still running at the end"
    );
    assert_eq!(st.records_by_type.values().sum::<u64>(), 15);
    assert_eq!(
        c.events.len(),
        19,
        "6 running and the 5 of them that are not empty as CPU track slices, irq, read, clipped \
         syscall, user function, wake-up, marker, 2 allocations"
    );
    assert!(c.losses.is_empty());
}

#[test]
fn nested_interrupts_and_a_lost_exit() {
    let (c, recon) = reconstruct(|a, at| {
        at(1);
        a.context_switch(0, 0, 7).unwrap();
        at(2);
        a.irq_entry(0, 1).unwrap();
        at(3);
        a.softirq_entry(0, 0xc0de).unwrap();
        at(4);
        a.irq_entry(0, 2).unwrap();
        at(5);
        a.irq_exit(0).unwrap();
        at(6);
        // The soft IRQ's exit is missing: the IRQ 1 exit closes both.
        a.irq_exit(0).unwrap();
    });
    let depth_of = |name: &str| {
        let p = c.producer(name);
        let e = c
            .events
            .iter()
            .find(|e| e.producer == p && e.type_id != RUNNING_TYPE)
            .unwrap();
        (e.ts, e.kind)
    };
    assert_eq!(
        depth_of("irq 1"),
        (
            us(2),
            EventKind::State {
                end: us(6),
                depth: 0
            }
        )
    );
    assert_eq!(
        depth_of("softirq 0xc0de"),
        (
            us(3),
            EventKind::State {
                end: us(6),
                depth: 1
            }
        )
    );
    assert_eq!(
        depth_of("irq 2"),
        (
            us(4),
            EventKind::State {
                end: us(5),
                depth: 2
            }
        )
    );
    assert_eq!(
        recon.stats().clipped_open_states,
        1 + 1,
        "the soft IRQ, and thread 7 at the end"
    );
}

#[test]
fn a_thread_exit_closes_what_the_thread_had_open() {
    // vdec (7) is in two user functions when it exits at 5 µs: both end there (not at the capture's
    // end, 20 µs), innermost first; its running state ends when it is switched out at 6 µs.
    let (c, recon) = reconstruct(|a, at| {
        at(1);
        a.context_switch(0, 0, 7).unwrap();
        at(2);
        a.user_entry(0, 0x8000).unwrap();
        at(3);
        a.user_entry(0, 0x8100).unwrap();
        at(5);
        a.thread_exit(0, 7).unwrap();
        at(6);
        a.context_switch(0, 7, 0).unwrap();
        at(20);
        a.marker(0, "end").unwrap();
    });
    let vdec = c.producer("pid 7");
    let mut states: Vec<(i64, EventKind)> = c
        .events
        .iter()
        .filter(|e| e.producer == vdec && e.type_id == u32::from(Builtin::UserEntry.id()))
        .map(|e| (e.ts, e.kind))
        .collect();
    states.sort_by_key(|s| s.0);
    assert_eq!(
        states,
        [
            (
                us(2),
                EventKind::State {
                    end: us(5),
                    depth: 1
                }
            ),
            (
                us(3),
                EventKind::State {
                    end: us(5),
                    depth: 2
                }
            ),
        ]
    );
    let running = c
        .events
        .iter()
        .find(|e| e.producer == vdec && e.type_id == RUNNING_TYPE)
        .unwrap();
    assert_eq!((running.ts, running.end()), (us(1), us(6)));
    let st = recon.stats();
    assert_eq!((st.closed_at_exit, st.clipped_open_states), (2, 1));
    // cpu0's track: vdec (named by its producer and pid) from its switch-in at the capture's first
    // record, then idle to the end (the empty idle slice before it is not written).
    let cpu0 = c.producer("cpu0");
    let mut track: Vec<(u32, i64, i64, Vec<ParamValue>)> = c
        .events
        .iter()
        .filter(|e| e.producer == cpu0 && matches!(e.kind, EventKind::State { .. }))
        .map(|e| (e.type_id, e.ts, e.end(), e.params.clone()))
        .collect();
    track.sort_by_key(|t| t.1);
    assert_eq!(
        track,
        [
            (
                ON_CPU_TYPE,
                us(1),
                us(6),
                vec![
                    ParamValue::Unsigned(u64::from(vdec)),
                    ParamValue::Unsigned(7)
                ]
            ),
            (CPU_IDLE_TYPE, us(6), us(20), vec![]),
        ]
    );
}

#[test]
fn a_thread_belongs_to_its_declared_process_from_its_first_record() {
    // The board declares player (process 312) and its thread vdec (313), then records vdec's creation
    // before any switch (no creator known): vdec stays in player, not at the top level.
    let (c, _) = reconstruct(|a, at| {
        a.register_producer(ProducerDef {
            id: 1,
            parent: None,
            kind: ProducerKind::Process,
            local_id: 312,
            name: "player",
        })
        .unwrap();
        a.register_producer(ProducerDef {
            id: 2,
            parent: Some(1),
            kind: ProducerKind::Thread,
            local_id: 313,
            name: "vdec",
        })
        .unwrap();
        at(1);
        a.thread_create(0, 313, "vdec").unwrap();
        at(2);
        a.context_switch(0, 0, 313).unwrap();
    });
    let player = c.producer("player");
    let vdec = c.producers.iter().find(|p| p.name == "vdec").unwrap();
    assert_eq!(vdec.parent, Some(player));
}

#[test]
fn soft_irqs_are_named_by_their_vector() {
    // The board declares NET_RX by the handler its records carry: its states go to that row, with the
    // handler kept as a parameter; an undeclared handler gets a row named by its address.
    let (c, _) = reconstruct(|a, at| {
        a.register_producer(ProducerDef {
            id: 9,
            parent: None,
            kind: ProducerKind::SoftIrq,
            local_id: 0xc03b_6a10,
            name: "NET_RX",
        })
        .unwrap();
        at(1);
        a.context_switch(0, 0, 7).unwrap();
        at(2);
        a.softirq_entry(0, 0xc03b_6a10).unwrap();
        at(3);
        a.softirq_exit(0).unwrap();
        at(4);
        a.softirq_entry(0, 0xbeef).unwrap();
        at(5);
        a.softirq_exit(0).unwrap();
    });
    let net_rx = c.producer("NET_RX");
    let s = c
        .events
        .iter()
        .find(|e| e.producer == net_rx)
        .expect("the NET_RX row holds its state");
    assert_eq!((s.ts, s.end()), (us(2), us(3)));
    assert_eq!(s.params, [ParamValue::Address(0xc03b_6a10)]);
    assert!(
        c.events
            .iter()
            .any(|e| e.producer == c.producer("softirq 0xbeef"))
    );
}

#[test]
fn a_state_entered_before_the_first_switch_belongs_to_the_thread_switched_out() {
    // A capture that starts mid-stream (a flight-recorder window): thread 5 is in a function when the
    // first record arrives; it is switched out, runs again, leaves the function and records a marker.
    let (c, _) = reconstruct(|a, at| {
        at(1);
        a.user_entry(0, 0x1000).unwrap();
        at(2);
        a.context_switch(0, 5, 6).unwrap();
        at(3);
        a.context_switch(0, 6, 5).unwrap();
        at(4);
        a.user_exit(0).unwrap();
        at(5);
        a.marker(0, "after").unwrap();
    });
    let five = c.producer("pid 5");
    let function = c
        .events
        .iter()
        .find(|e| e.type_id == u32::from(Builtin::UserEntry.id()))
        .unwrap();
    assert_eq!(function.producer, five);
    assert_eq!(
        (function.ts, function.kind),
        (
            us(1),
            EventKind::State {
                end: us(4),
                depth: 1
            }
        )
    );
    // Nothing was left open on the CPU: the marker is the running thread's.
    let marker = c
        .events
        .iter()
        .find(|e| e.type_id == u32::from(Builtin::Marker.id()))
        .unwrap();
    assert_eq!(marker.producer, five);
}
