//! Probe mode on the host: the control block's bytes are the ones SPEC.md pins, a host that reads it
//! finds every closed block with its numbers, a full ring drops (numbered) until the host releases
//! blocks, and the dictionary image is what the encoder writes.

use std::cell::Cell;
use std::rc::Rc;

use socscope_agent::probe::{ProbeControl, names_image, names_image_len};
use socscope_agent::{Agent, Recorded, StaticDictionary};
use socscope_wire::dict::{
    Category, EventTypeDef, ParamDef, ParamType, ProducerDef, ProducerKind, dictionary_image,
    dictionary_image_len,
};
use socscope_wire::encode;
use socscope_wire::frame::{DictEntry, FrameKind};

mod common;
use common::{SharedClock, config};

/// Two rings of four 256-byte blocks, no drain on the board (`OUT` = 0, no drain state: `DRAIN` = 0).
type ProbeAgent = Agent<SharedClock, 2, 256, 4, 0, 0, 0, 0>;
/// The same with the drain's state kept (the default), as a board that may also stream has it.
type ProbeAgentWithDrainState = Agent<SharedClock, 2, 256, 4, 0, 0, 0>;

const PRODUCERS: [ProducerDef<'static>; 2] = [
    ProducerDef {
        id: 1,
        parent: None,
        kind: ProducerKind::Process,
        local_id: 100,
        name: "demo",
    },
    ProducerDef {
        id: 2,
        parent: Some(1),
        kind: ProducerKind::Thread,
        local_id: 101,
        name: "worker",
    },
];
const FRAME_PARAMS: [ParamDef<'static>; 1] = [ParamDef {
    name: "n",
    ty: ParamType::Unsigned,
}];
const TYPES: [EventTypeDef<'static>; 2] = [
    EventTypeDef {
        id: 64,
        name: "frame",
        category: Category::StateEnter,
        params: &FRAME_PARAMS,
    },
    EventTypeDef {
        id: 65,
        name: "frame_exit",
        category: Category::StateExit { enter: 64 },
        params: &[],
    },
];
static DICTIONARY: [u8; dictionary_image_len(&PRODUCERS, &TYPES)] =
    dictionary_image(&PRODUCERS, &TYPES);
/// The names of `common::config()`, as the board keeps them in flash for the host's `Hello`.
static NAMES: [u8; names_image_len("stb-test", "sti7105", "linux", "player", "")] =
    names_image("stb-test", "sti7105", "linux", "player", "");

/// An agent where it stays (leaked), attached to a control block, and its clock.
fn attached() -> (&'static ProbeAgent, &'static ProbeControl<2>, Rc<Cell<u64>>) {
    let clock = SharedClock::default();
    clock.0.set(1000);
    let time = clock.0.clone();
    let agent: &'static mut ProbeAgent = Box::leak(Box::new(ProbeAgent::new(clock, config())));
    let control: &'static ProbeControl<2> = Box::leak(Box::new(ProbeControl::new()));
    agent.attach_probe(control, &DICTIONARY, &NAMES);
    (agent, control, time)
}

fn bytes_of(control: &ProbeControl<2>) -> &[u8] {
    // SAFETY: a plain `repr(C)` block of atomics, read as bytes while nothing writes it.
    unsafe {
        std::slice::from_raw_parts(
            (control as *const ProbeControl<2>).cast::<u8>(),
            ProbeControl::<2>::size(),
        )
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// SPEC.md's "Probe mode" golden example: the control block of this test's agent after three records on
/// CPU 0, one `probe_close_blocks` and `probe_finish` at tick 1300, with the address fields (written
/// `<address>` in SPEC.md) set to zero here and checked against the real addresses apart.
const GOLDEN: &str = "
73 6f 63 73 63 6f 70 65 2d 70 72 6f 62 65 00 00
02 00 00 00 02 00 00 00 00 01 00 00 04 00 00 00
1f 00 00 00 02 00 00 00 40 42 0f 00 00 00 00 00
07 00 00 00 00 00 00 00 e8 03 00 00 00 00 00 00
14 05 00 00 00 00 00 00 00 00 00 00 00 00 00 00
35 00 00 00 02 00 00 00 00 00 00 00 00 00 00 00
25 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
01 00 00 00 00 00 00 00 03 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00
";

/// Where the rings' entries start (layout version 2).
const RINGS_AT: usize = 104;

fn hex(s: &str) -> Vec<u8> {
    s.split_whitespace()
        .map(|h| u8::from_str_radix(h, 16).unwrap())
        .collect()
}

#[test]
fn the_control_block_is_the_golden_one() {
    let (agent, control, time) = attached();
    assert_eq!(ProbeControl::<2>::size(), 104 + 2 * 32);
    time.set(1010);
    assert_eq!(agent.context_switch(0, 1, 2), Ok(Recorded::Stored));
    time.set(1020);
    assert_eq!(agent.irq_entry(0, 33), Ok(Recorded::Stored));
    time.set(1200);
    assert_eq!(agent.irq_exit(0), Ok(Recorded::Stored));
    agent.probe_close_blocks();
    assert_eq!(
        control.counters(0),
        Some((1, 0)),
        "one block closed on CPU 0"
    );
    assert_eq!(control.counters(1), Some((0, 0)));
    assert!(!control.finished());
    time.set(1300);
    agent.probe_finish();
    assert!(control.finished());

    let b = bytes_of(control).to_vec();
    let dict_addr = DICTIONARY.as_ptr() as u64;
    assert_eq!(u64_at(&b, 72), dict_addr, "the dictionary image's address");
    assert_eq!(u32_at(&b, 80) as usize, DICTIONARY.len());
    assert_eq!(
        u64_at(&b, 88),
        NAMES.as_ptr() as u64,
        "the names image's address"
    );
    assert_eq!(u32_at(&b, 96) as usize, NAMES.len());
    // The image: each name a length byte and its bytes, the agent's version last.
    let mut image = Vec::new();
    for name in [
        "stb-test",
        "sti7105",
        "linux",
        "player",
        "",
        socscope_agent::AGENT_VERSION,
    ] {
        image.push(name.len() as u8);
        image.extend_from_slice(name.as_bytes());
    }
    assert_eq!(NAMES[..], image[..]);
    let ring0 = u64_at(&b, RINGS_AT);
    let ring1 = u64_at(&b, RINGS_AT + 32);
    assert!(ring0 != 0 && ring1 > ring0, "the rings' blocks, in order");

    // The golden bytes, address fields zeroed.
    let mut masked = b.clone();
    for at in [72usize, 88, RINGS_AT, RINGS_AT + 32] {
        masked[at..at + 8].fill(0);
    }
    assert_eq!(
        masked,
        hex(GOLDEN),
        "the control block:\n{}",
        masked
            .chunks(16)
            .map(|c| c
                .iter()
                .map(|x| format!("{x:02x}"))
                .collect::<Vec<_>>()
                .join(" "))
            .collect::<Vec<_>>()
            .join("\n")
    );
    // SPEC.md shows the same bytes.
    let spec = include_str!("../../protocols/wire/SPEC.md");
    let squeeze = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        squeeze(spec).contains(&squeeze(GOLDEN)),
        "SPEC.md's probe-mode example holds the golden bytes"
    );

    // The block the host reads: its numbers in its first 24 bytes, its records from byte 31.
    // SAFETY: ring 0's first block, closed and not released: the board no longer writes it.
    let block = unsafe { std::slice::from_raw_parts(ring0 as *const u8, 256) };
    assert_eq!(u64_at(block, 0), 0, "first_seq");
    assert_eq!(
        u64_at(block, 8),
        1010,
        "base_ticks: the first record's time"
    );
    assert_eq!(u32_at(block, 16), 3, "count");
    let end = u32_at(block, 20) as usize;
    // `C` 1 2 at delta 0, `I` 33 at delta 10, `i` at delta 180 (two-byte varint).
    assert_eq!(&block[31..end], &[1, 0, 1, 2, 2, 10, 33, 3, 0xb4, 0x01]);
}

#[test]
fn a_full_ring_drops_until_the_host_releases_blocks() {
    let (agent, control, time) = attached();
    let mut stored = 0u64;
    let mut dropped = 0u64;
    // Four blocks of about 220 bytes of records, 4 bytes a context switch: the ring fills, then drops.
    for i in 0..400u32 {
        time.set(2000 + u64::from(i));
        match agent.context_switch(0, i % 8, (i + 1) % 8) {
            Ok(Recorded::Stored) => stored += 1,
            Ok(Recorded::Dropped) => dropped += 1,
            Err(e) => panic!("{e:?}"),
        }
    }
    assert!(dropped > 0, "no host: the ring fills");
    assert_eq!(
        control.counters(0),
        Some((4, 0)),
        "every block waits for the host"
    );
    // The host takes two blocks: the record path reuses them.
    control.release(0, 2);
    time.set(3000);
    assert_eq!(agent.context_switch(0, 1, 2), Ok(Recorded::Stored));
    stored += 1;
    agent.probe_finish();
    let b = bytes_of(control).to_vec();
    let (closed, released) = control.counters(0).unwrap();
    assert_eq!(released, 2);
    assert_eq!(
        closed, 5,
        "the block opened after the release, closed at the finish"
    );
    assert_eq!(
        u64_at(&b, RINGS_AT + 16),
        stored + dropped,
        "sequence numbers given out"
    );
    assert_eq!(u64_at(&b, RINGS_AT + 24), dropped, "dropped");
    let stats = agent.stats();
    assert_eq!((stats.records, stats.dropped), (stored, dropped));
    // The fifth block (slot 0 again) starts after the dropped ones: the host sees the gap.
    let ring0 = u64_at(&b, RINGS_AT);
    // SAFETY: slot 0 holds the fifth closed block, not released.
    let block = unsafe { std::slice::from_raw_parts(ring0 as *const u8, 256) };
    assert_eq!(
        u64_at(block, 0),
        stored - 1 + dropped,
        "first_seq after the gap"
    );
    assert_eq!(u32_at(block, 16), 1);
}

#[test]
fn the_dictionary_image_is_what_the_encoder_writes() {
    let entries: Vec<DictEntry<'_>> = PRODUCERS
        .iter()
        .map(|p| DictEntry::Producer(*p))
        .chain(TYPES.iter().map(|t| DictEntry::EventType(*t)))
        .collect();
    let mut expected = vec![0u8; 512];
    let n = encode::encode_dictionary(&mut expected, &entries).unwrap();
    let mut framed = vec![0u8; 512];
    let m =
        encode::encode_frame(&mut framed, FrameKind::Dictionary, |f| f.push(&DICTIONARY)).unwrap();
    assert_eq!(framed[..m], expected[..n]);
}

#[test]
fn the_drain_is_refused_on_a_probe_agent() {
    let (agent, _, _) = attached();
    struct Sink;
    impl socscope_agent::Transport for Sink {
        fn write_frame(&mut self, _: &[u8]) -> Result<(), socscope_agent::TransportError> {
            panic!("nothing is sent from a probe agent");
        }
    }
    assert_eq!(
        agent.poll(&mut Sink),
        Err(socscope_agent::TransportError::Closed)
    );
    assert_eq!(
        agent.finish(&mut Sink),
        Err(socscope_agent::TransportError::Closed)
    );
}

#[test]
fn a_probe_only_agent_holds_no_drain_state_and_behaves_the_same() {
    // The drain's state (sent sequence numbers, claims, dump progress, counters) is the difference.
    let without = ProbeAgent::state_bytes();
    let with = ProbeAgentWithDrainState::state_bytes();
    assert!(
        without + 150 <= with,
        "probe-only agent {without} bytes besides its rings, with the drain state {with}"
    );
    // The agent that keeps the drain state writes the same control block and refuses the drain too.
    let clock = SharedClock::default();
    clock.0.set(1000);
    let full: &'static mut ProbeAgentWithDrainState =
        Box::leak(Box::new(ProbeAgentWithDrainState::new(clock, config())));
    let control: &'static ProbeControl<2> = Box::leak(Box::new(ProbeControl::new()));
    full.attach_probe(control, &DICTIONARY, &NAMES);
    let (lean, lean_control, _) = attached();
    assert_eq!(bytes_of(control).len(), bytes_of(lean_control).len());
    // Same header fields (the rings' addresses differ: two agents).
    assert_eq!(bytes_of(control)[..64], bytes_of(lean_control)[..64]);
    struct Sink;
    impl socscope_agent::Transport for Sink {
        fn write_frame(&mut self, _: &[u8]) -> Result<(), socscope_agent::TransportError> {
            panic!("nothing is sent from a probe agent");
        }
    }
    assert_eq!(
        full.poll(&mut Sink),
        Err(socscope_agent::TransportError::Closed)
    );
    assert_eq!(
        lean.dump(&mut Sink),
        Err(socscope_agent::TransportError::Closed)
    );
    assert_eq!(lean.stats().frames, 0);
}

#[test]
fn a_probe_agent_that_references_its_configuration_writes_the_same_control_block() {
    type StaticProbeAgent = Agent<SharedClock, 2, 256, 4, 0, 0, 0, 0, socscope_agent::StaticConfig>;
    static FLASH_CONFIG: socscope_agent::Config = common::FLASH_CONFIG;
    assert_eq!(
        ProbeAgent::state_bytes() - StaticProbeAgent::state_bytes(),
        std::mem::size_of::<socscope_agent::Config>()
            - std::mem::size_of::<socscope_agent::StaticConfig>()
    );
    let clock = SharedClock::default();
    clock.0.set(1000);
    let agent: &'static mut StaticProbeAgent = Box::leak(Box::new(
        StaticProbeAgent::new_static(clock, &FLASH_CONFIG, 7).unwrap(),
    ));
    let control: &'static ProbeControl<2> = Box::leak(Box::new(ProbeControl::new()));
    agent.attach_probe(control, &DICTIONARY, &NAMES);
    let (_, copied_control, _) = attached();
    // Same header (session id 7, CPU count, tick rate, start, names image); the rings' addresses differ.
    assert_eq!(bytes_of(control)[..64], bytes_of(copied_control)[..64]);
    assert_eq!(
        agent.context_switch(1, 1, 2),
        Ok(socscope_agent::Recorded::Stored)
    );
    assert_eq!(
        agent.context_switch(2, 1, 2),
        Err(socscope_agent::AgentError::BadCpu)
    );
}

#[test]
fn a_probe_only_agent_checks_its_producers_but_keeps_none() {
    // Its host reads the producers from the dictionary image: the agent has nowhere to keep them.
    type Lean = Agent<SharedClock, 1, 256, 2, 0, 4, 0, 0>;
    let mut agent = Box::new(Lean::new(SharedClock::default(), config()));
    assert_eq!(
        agent.register_producer(PRODUCERS[0]),
        Err(socscope_agent::AgentError::DictionaryFull)
    );
    // The static tables are still checked entry by entry (the types kept: custom records use them).
    static LONG: [ProducerDef<'static>; 1] = [ProducerDef {
        id: 9,
        parent: None,
        kind: ProducerKind::Process,
        local_id: 9,
        name: "a producer name that is far longer than the sixty-four bytes a name may have",
    }];
    static WITH_LONG: StaticDictionary = StaticDictionary {
        producers: &LONG,
        types: &TYPES,
    };
    static DICTIONARY: StaticDictionary = StaticDictionary {
        producers: &PRODUCERS,
        types: &TYPES,
    };
    assert_eq!(
        agent.declare_static(&WITH_LONG),
        Err(socscope_agent::AgentError::NameTooLong)
    );
    assert_eq!(agent.declare_static(&DICTIONARY), Ok(()));
    assert_eq!(
        agent.record(
            0,
            TYPES[0].id,
            &[socscope_wire::frame::ParamValue::Unsigned(3)]
        ),
        Ok(Recorded::Stored)
    );
}

#[test]
fn a_probe_agent_that_keeps_its_session_in_the_control_block_writes_the_same_block() {
    type StaticProbeAgent = Agent<SharedClock, 2, 256, 4, 0, 0, 0, 0, socscope_agent::StaticConfig>;
    type LeanestProbeAgent =
        Agent<SharedClock, 2, 256, 4, 0, 0, 0, 0, socscope_agent::ProbeConfig<2>>;
    static FLASH_CONFIG: socscope_agent::Config = common::FLASH_CONFIG;
    // Neither the session id nor the start is kept in the agent.
    assert!(
        LeanestProbeAgent::state_bytes() + 8 <= StaticProbeAgent::state_bytes(),
        "{} against {}",
        LeanestProbeAgent::state_bytes(),
        StaticProbeAgent::state_bytes()
    );
    let clock = SharedClock::default();
    clock.0.set(1000);
    let control: &'static ProbeControl<2> = Box::leak(Box::new(ProbeControl::new()));
    let agent: &'static mut LeanestProbeAgent = Box::leak(Box::new(
        LeanestProbeAgent::new_probe(clock.clone(), &FLASH_CONFIG, 7, control).unwrap(),
    ));
    // The clock moves before the agent is attached: the start stays the creation's.
    clock.0.set(1500);
    agent.attach_probe(control, &DICTIONARY, &NAMES);
    let (_, copied_control, _) = attached();
    assert_eq!(bytes_of(control)[..64], bytes_of(copied_control)[..64]);
    assert_eq!(agent.context_switch(1, 1, 2), Ok(Recorded::Stored));
    assert_eq!(
        agent.context_switch(2, 1, 2),
        Err(socscope_agent::AgentError::BadCpu)
    );
    // Attached to another block, the numbers are copied there from the first.
    let other: &'static ProbeControl<2> = Box::leak(Box::new(ProbeControl::new()));
    agent.attach_probe(other, &DICTIONARY, &NAMES);
    assert_eq!(bytes_of(other)[..64], bytes_of(copied_control)[..64]);
    // A configuration it cannot take is refused, and the block keeps no session.
    static NO_CPU: socscope_agent::Config = socscope_agent::Config {
        cpu_count: 0,
        ..FLASH_CONFIG
    };
    let untouched: &'static ProbeControl<2> = Box::leak(Box::new(ProbeControl::new()));
    assert_eq!(
        LeanestProbeAgent::new_probe(clock, &NO_CPU, 7, untouched).err(),
        Some(socscope_agent::AgentError::BadCpu)
    );
    assert!(bytes_of(untouched).iter().all(|&b| b == 0));
}
