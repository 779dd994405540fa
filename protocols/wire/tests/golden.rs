//! Golden bytes for every frame kind: the encoder must write exactly the bytes pinned here (and in SPEC.md,
//! section "Golden examples"), and the decoder must read them back into the same value.

mod common;

use common::{
    Events, Model, Rec, Val, decode_split, encode, encode_events_section, encode_events_section_as,
    hex, unhex,
};
use socscope_wire::WIRE_VERSION;
use socscope_wire::decode::{
    HelloInfo, OwnedDictEntry, OwnedEventTypeDef, OwnedParamDef, ProducerInfo, StreamDecoder,
};
use socscope_wire::dict::{Builtin, Category, ParamType, ProducerKind};
use socscope_wire::frame::{
    Bye, CpuTotal, EVENTS_FLAG_ZSTD, EventsHeader, FrameKind, Heartbeat, Loss, Window,
};

const HELLO: &str = "36 01 03 05 30 2e 31 2e 30 06 69 6d 78 38 2d 61 06 69 2e 4d 58 38 4d 05 4c 69 6e 75 78 04 64 65 6d 6f 04 80 ec b8 0b b4 24 e8 07 06 73 33 63 72 65 74 aa d7 31 12 00";
const DICTIONARY: &str = "03 02 04 02 01 01 07 64 04 64 65 6d 6f 1a 02 01 01 01 65 06 77 6f 72 6b 65 72 01 40 05 66 72 61 6d 65 01 05 02 64 78 23 01 6e 01 04 67 61 69 6e 02 03 74 61 67 03 03 62 75 66 04 01 41 0a 66 72 61 6d 65 5f 65 78 69 74 02 40 05 7e e2 d8 46 00";
const EVENTS: &str = "02 03 22 01 0a e8 07 06 01 0a 64 65 0b 02 80 c0 80 80 01 0b 08 1f 09 05 06 68 c3 a9 6c 6c 6f 40 05 05 ac 02 01 01 01 01 01 0d f8 3f 02 6f 6b 20 0c 0a 5b b7 02 06 00";
const EVENTS_FLETCHER: &str = "02 0a 22 01 0a e8 07 06 01 0a 64 65 0b 02 80 c0 80 80 01 0b 08 1f 09 05 06 68 c3 a9 6c 6c 6f 40 05 05 ac 02 01 01 01 01 01 0d f8 3f 02 6f 6b 20 0c 0a 7a 5e 78 25 00";
const EVENTS_ZSTD_RAW: &str = "02 00 1b 03 07 02 5d 1b 03 07 02 5d 1b 03 07 02 5d 1b 03 07 02 5d 1b 03 07 02 5d 1b 03 07 02 5d 1b 03 07 02 5d 1b 03 07";
const EVENTS_ZSTD_SECTION: &str =
    "28 28 b5 2f fd 20 28 6d 00 00 38 02 00 1b 03 07 02 5d 01 00 18 8b 11";
const EVENTS_ZSTD: &str = "03 03 01 01 0c 88 27 10 28 28 b5 2f fd 20 28 6d 01 03 38 02 07 1b 03 07 02 5d 01 08 18 8b 11 32 31 03 58 00";
const LOSS: &str = "09 04 01 2a 07 f5 9c 14 87 00";
const HEARTBEAT: &str = "0b 05 c0 96 b1 02 d2 09 07 de fe 02 8a 00";
const BYE: &str = "0d 06 80 9b ee 02 d0 0f 07 2b 37 f2 e5 00";
const CPU_TOTAL: &str = "09 07 01 eb 07 46 b1 40 f2 00";
const REFUSAL: &str = "10 08 01 08 6e 6f 20 74 6f 6b 65 6e 8d b2 49 36 00";
const WINDOW: &str = "02 09 09 ba 22 ba 22 7e 6f af 93 00";

fn hello() -> Model {
    Model::Hello(HelloInfo {
        wire_version: WIRE_VERSION,
        agent_version: "0.1.0".into(),
        board: "imx8-a".into(),
        soc: "i.MX8M".into(),
        os: "Linux".into(),
        application: "demo".into(),
        cpu_count: 4,
        tick_rate_hz: 24_000_000,
        session_id: 0x1234,
        start_ticks: 1000,
        token: "s3cret".into(),
    })
}

fn dictionary() -> Model {
    let param = |name: &str, ty| OwnedParamDef {
        name: name.into(),
        ty,
    };
    Model::Dictionary(vec![
        OwnedDictEntry::Producer(ProducerInfo {
            id: 1,
            parent: None,
            kind: ProducerKind::Process,
            local_id: 100,
            name: "demo".into(),
        }),
        OwnedDictEntry::Producer(ProducerInfo {
            id: 2,
            parent: Some(1),
            kind: ProducerKind::Thread,
            local_id: 101,
            name: "worker".into(),
        }),
        OwnedDictEntry::EventType(OwnedEventTypeDef {
            id: 64,
            name: "frame".into(),
            category: Category::StateEnter,
            params: vec![
                param("dx", ParamType::Signed),
                param("n", ParamType::Unsigned),
                param("gain", ParamType::Float),
                param("tag", ParamType::String),
                param("buf", ParamType::Address),
            ],
        }),
        OwnedDictEntry::EventType(OwnedEventTypeDef {
            id: 65,
            name: "frame_exit".into(),
            category: Category::StateExit { enter: 64 },
            params: vec![],
        }),
    ])
}

fn events() -> Events {
    let rec = |ticks, b: Builtin, values| Rec {
        ticks,
        type_id: b.id(),
        values,
    };
    Events {
        compressed: false,
        cpu: 1,
        first_seq: 10,
        base_ticks: 1000,
        records: vec![
            rec(
                1010,
                Builtin::ContextSwitch,
                vec![Val::Unsigned(100), Val::Unsigned(101)],
            ),
            rec(1012, Builtin::UserEntry, vec![Val::Address(0x0800_1000)]),
            rec(1020, Builtin::UserEntry, vec![Val::Address(0x0800_0ff0)]),
            rec(1025, Builtin::Marker, vec![Val::Str("héllo".into())]),
            Rec {
                ticks: 1030,
                type_id: 64,
                values: vec![
                    Val::Signed(-3),
                    Val::Unsigned(300),
                    Val::Float(1.5f64.to_bits()),
                    Val::Str("ok".into()),
                    Val::Address(0x0800_1000),
                ],
            },
            rec(1040, Builtin::UserExit, vec![]),
        ],
    }
}

fn events_zstd() -> Events {
    let irq = |ticks, b: Builtin, values| Rec {
        ticks,
        type_id: b.id(),
        values,
    };
    Events {
        compressed: true,
        cpu: 0,
        first_seq: 0,
        base_ticks: 5000,
        records: (0..8)
            .flat_map(|i| {
                [
                    irq(5000 + 100 * i, Builtin::IrqEntry, vec![Val::Unsigned(27)]),
                    irq(5000 + 100 * i + 7, Builtin::IrqExit, vec![]),
                ]
            })
            .collect(),
    }
}

fn loss() -> Model {
    Model::Loss(Loss {
        cpu: 1,
        first_seq: 42,
        count: 7,
    })
}

fn heartbeat() -> Model {
    Model::Heartbeat(Heartbeat {
        ticks: 5_000_000,
        records: 1234,
        dropped: 7,
    })
}

fn bye() -> Model {
    Model::Bye(Bye {
        ticks: 6_000_000,
        records: 2000,
        dropped: 7,
    })
}

fn cpu_total() -> Model {
    Model::CpuTotal(CpuTotal {
        cpu: 1,
        sequences: 1003,
    })
}

fn window() -> Model {
    Model::Window(Window {
        cpu: 0,
        first_seq: 4410,
        overwritten: 4410,
    })
}

/// Decodes `prefix` frames then `golden`, and returns the model of the last frame.
fn decode_after(prefix: &[Model], golden: &[u8]) -> Model {
    let mut stream: Vec<u8> = prefix.iter().flat_map(encode).collect();
    stream.extend_from_slice(golden);
    let out = decode_split(&mut StreamDecoder::default(), &stream, &[]);
    assert_eq!(out.errors, vec![], "no drops");
    assert_eq!(out.frames.len(), prefix.len() + 1);
    let last = out.frames.last().unwrap();
    assert_eq!(last.offset, (stream.len() - golden.len()) as u64);
    assert_eq!(last.len, golden.len());
    common::model_of(&last.frame)
}

fn check(value: Model, prefix: &[Model], golden: &str) {
    let bytes = encode(&value);
    assert_eq!(hex(&bytes), golden, "encoding of {value:?}");
    assert_eq!(decode_after(prefix, &unhex(golden)), value);
}

#[test]
fn hello_golden() {
    check(hello(), &[], HELLO);
}

#[test]
fn dictionary_golden() {
    check(dictionary(), &[hello()], DICTIONARY);
}

#[test]
fn events_golden() {
    check(Model::Events(events()), &[hello(), dictionary()], EVENTS);
}

#[test]
fn loss_golden() {
    check(loss(), &[hello()], LOSS);
}

#[test]
fn heartbeat_golden() {
    check(heartbeat(), &[hello()], HEARTBEAT);
}

#[test]
fn bye_golden() {
    check(bye(), &[hello()], BYE);
}

#[test]
fn cpu_total_golden() {
    check(cpu_total(), &[hello()], CPU_TOTAL);
}

#[test]
fn window_golden() {
    check(window(), &[hello()], WINDOW);
}

/// The same batch as `events_golden`, as the agent writes it since wire version 3: kind 0A, Fletcher-32.
#[test]
fn events_fletcher_golden() {
    let value = events();
    let raw = common::raw_records(&value);
    let header = EventsHeader {
        flags: 0,
        cpu: value.cpu,
        first_seq: value.first_seq,
        base_ticks: value.base_ticks,
        count: value.records.len() as u32,
    };
    let bytes = encode_events_section_as(&header, &raw, FrameKind::EventsFletcher);
    assert_eq!(hex(&bytes), EVENTS_FLETCHER);
    assert_eq!(
        decode_after(&[hello(), dictionary()], &unhex(EVENTS_FLETCHER)),
        Model::Events(value)
    );
    // One bit flipped anywhere in the decoded frame (kind byte included) is caught by the check.
    let mut buf = [0u8; 256];
    let n = cobs::decode(&bytes[..bytes.len() - 1], &mut buf).unwrap();
    let decoded = &mut buf[..n.frame_size()];
    for bit in 0..decoded.len() * 8 {
        decoded[bit / 8] ^= 1 << (bit % 8);
        let mut wire = vec![0u8; 300];
        let m = cobs::encode(decoded, &mut wire);
        wire.truncate(m);
        wire.push(0);
        let mut stream: Vec<u8> = [hello(), dictionary()].iter().flat_map(encode).collect();
        let prefix = stream.len();
        stream.extend_from_slice(&wire);
        let out = decode_split(&mut StreamDecoder::default(), &stream, &[]);
        assert_eq!(out.errors.len(), 1, "bit {bit} flipped is dropped");
        assert!(out.frames.iter().all(|f| f.offset < prefix as u64));
        decoded[bit / 8] ^= 1 << (bit % 8);
    }
}

/// zstd's output is not pinned by the format (any valid zstd frame is fine), so the compressed section is
/// pinned as an input: the raw records it holds, the frame built around it, and the decoded value are checked.
#[test]
fn events_zstd_golden() {
    let value = events_zstd();
    let raw = common::raw_records(&value);
    assert_eq!(hex(&raw), EVENTS_ZSTD_RAW);
    let section = unhex(EVENTS_ZSTD_SECTION);
    let (len, compressed) = section.split_first().unwrap();
    assert_eq!(usize::from(*len), raw.len(), "one-byte varint length");
    assert_eq!(zstd::bulk::decompress(compressed, raw.len()).unwrap(), raw);
    let header = EventsHeader {
        flags: EVENTS_FLAG_ZSTD,
        cpu: 0,
        first_seq: 0,
        base_ticks: 5000,
        count: 16,
    };
    assert_eq!(hex(&encode_events_section(&header, &section)), EVENTS_ZSTD);
    assert_eq!(
        decode_after(&[hello()], &unhex(EVENTS_ZSTD)),
        Model::Events(value)
    );
}

/// SPEC.md shows the same bytes: every `wire:` block of its golden examples, in order.
#[test]
fn spec_shows_the_pinned_bytes() {
    let spec = include_str!("../SPEC.md");
    let examples = &spec[spec.find("## 10. Golden examples").expect("golden section")..];
    let mut blocks: Vec<String> = Vec::new();
    let mut in_wire = false;
    for line in examples.lines() {
        if let Some(rest) = line.strip_prefix("wire:") {
            blocks.push(rest.trim().to_string());
            in_wire = true;
        } else if in_wire && line.starts_with("         ") {
            let last = blocks.last_mut().unwrap();
            last.push(' ');
            last.push_str(line.trim());
        } else {
            in_wire = false;
        }
    }
    assert_eq!(
        blocks,
        [
            HELLO,
            DICTIONARY,
            EVENTS,
            EVENTS_FLETCHER,
            EVENTS_ZSTD,
            LOSS,
            HEARTBEAT,
            CPU_TOTAL,
            WINDOW,
            BYE,
            REFUSAL
        ]
    );
    let compact = |s: &str| s.split_whitespace().collect::<String>();
    assert!(compact(examples).contains(&compact(EVENTS_ZSTD_RAW)));
}

/// Prints every golden example, for SPEC.md (`cargo test --features decode --test golden -- --ignored
/// --nocapture`).
#[test]
#[ignore]
fn print_golden() {
    let value = events_zstd();
    let raw = common::raw_records(&value);
    let section = common::zstd_section(&raw);
    for (name, bytes) in [
        ("HELLO", encode(&hello())),
        ("DICTIONARY", encode(&dictionary())),
        ("EVENTS", encode(&Model::Events(events()))),
        ("EVENTS_FLETCHER", {
            let v = events();
            let header = EventsHeader {
                flags: 0,
                cpu: v.cpu,
                first_seq: v.first_seq,
                base_ticks: v.base_ticks,
                count: v.records.len() as u32,
            };
            encode_events_section_as(&header, &common::raw_records(&v), FrameKind::EventsFletcher)
        }),
        ("EVENTS_ZSTD_RAW", raw.clone()),
        ("EVENTS_ZSTD_SECTION", section.clone()),
        ("EVENTS_ZSTD", encode(&Model::Events(value))),
        ("LOSS", encode(&loss())),
        ("CPU_TOTAL", encode(&cpu_total())),
        ("WINDOW", encode(&window())),
        ("HEARTBEAT", encode(&heartbeat())),
        ("BYE", encode(&bye())),
    ] {
        println!("{name} ({} bytes): {}", bytes.len(), hex(&bytes));
    }
}

/// Issue 27: the collector-to-board `Refusal` frame, as pinned in SPEC.md (section 10): encoded exactly so,
/// decoded back; the board-to-collector decoder drops it as an unknown kind.
#[test]
fn refusal_golden_bytes() {
    use socscope_wire::refusal::{Refusal, RefusalReason, decode_refusal, encode_refusal};
    let refusal = Refusal {
        reason: RefusalReason::Token,
        message: "no token",
    };
    let mut out = [0u8; 64];
    let n = encode_refusal(&mut out, &refusal).unwrap();
    assert_eq!(hex(&out[..n]), REFUSAL);
    let mut bytes = unhex(REFUSAL);
    assert_eq!(decode_refusal(&mut bytes).unwrap(), refusal);
    let mut decoder = StreamDecoder::new(&[WIRE_VERSION]);
    decoder.feed(&unhex(REFUSAL));
    assert!(matches!(decoder.next_frame(), Some(Err(_))));
    assert!(decoder.next_frame().is_none());
}
