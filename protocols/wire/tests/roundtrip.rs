//! Round trips: arbitrary sessions encoded into one stream and fed to the decoder in arbitrary slices decode to
//! exactly the frames that went in; COBS edge cases (long non-zero runs, zero-filled bodies) too.

mod common;

use common::{Events, Model, Rec, Val, decode_split, encode, encode_stream};
use proptest::prelude::*;
use socscope_wire::WIRE_VERSION;
use socscope_wire::decode::{
    HelloInfo, OwnedDictEntry, OwnedEventTypeDef, OwnedParamDef, ProducerInfo, StreamDecoder,
};
use socscope_wire::dict::{
    BUILTINS, Builtin, Category, FIRST_CUSTOM_TYPE, ParamType, ProducerKind,
};
use socscope_wire::encode::max_encoded_len;
use socscope_wire::frame::{Bye, Heartbeat, Loss};

/// Arbitrary text, empty and non-ASCII included.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[a-z_]{1,12}",
        any::<String>().prop_map(|s| s.chars().take(24).collect()),
    ]
}

fn param_type() -> impl Strategy<Value = ParamType> {
    (0u64..5).prop_map(|t| ParamType::from_tag(t).unwrap())
}

fn producer_kind() -> impl Strategy<Value = ProducerKind> {
    (0u64..5).prop_map(|t| ProducerKind::from_tag(t).unwrap())
}

fn category() -> impl Strategy<Value = Category> {
    prop_oneof![
        Just(Category::Punctual),
        Just(Category::StateEnter),
        any::<u16>().prop_map(|enter| Category::StateExit { enter }),
        Just(Category::Variable),
    ]
}

fn custom_types() -> impl Strategy<Value = Vec<OwnedEventTypeDef>> {
    prop::collection::btree_set(FIRST_CUSTOM_TYPE..=u16::MAX, 0..4).prop_flat_map(|ids| {
        ids.into_iter()
            .map(|id| {
                (
                    text(),
                    category(),
                    prop::collection::vec((text(), param_type()), 0..=8),
                )
                    .prop_map(move |(name, category, params)| OwnedEventTypeDef {
                        id,
                        name,
                        category,
                        params: params
                            .into_iter()
                            .map(|(name, ty)| OwnedParamDef { name, ty })
                            .collect(),
                    })
            })
            .collect::<Vec<_>>()
    })
}

fn producer() -> impl Strategy<Value = ProducerInfo> {
    (
        any::<u32>(),
        any::<Option<u32>>(),
        producer_kind(),
        any::<u64>(),
        text(),
    )
        .prop_map(|(id, parent, kind, local_id, name)| ProducerInfo {
            id,
            parent,
            kind,
            local_id,
            name,
        })
}

fn hello() -> impl Strategy<Value = HelloInfo> {
    (
        (text(), text(), text(), text(), text(), text()),
        (any::<u16>(), any::<u64>(), any::<u64>(), any::<u64>()),
    )
        .prop_map(
            |(
                (agent_version, board, soc, os, application, token),
                (cpu_count, tick_rate_hz, session_id, start_ticks),
            )| {
                HelloInfo {
                    wire_version: WIRE_VERSION,
                    agent_version,
                    board,
                    soc,
                    os,
                    application,
                    cpu_count,
                    tick_rate_hz,
                    session_id,
                    start_ticks,
                    token,
                }
            },
        )
}

fn value(ty: ParamType) -> BoxedStrategy<Val> {
    match ty {
        ParamType::Signed => any::<i64>().prop_map(Val::Signed).boxed(),
        ParamType::Unsigned => any::<u64>().prop_map(Val::Unsigned).boxed(),
        ParamType::Float => any::<f64>().prop_map(|f| Val::Float(f.to_bits())).boxed(),
        ParamType::String => text().prop_map(Val::Str).boxed(),
        ParamType::Address => prop_oneof![
            any::<u64>(),
            0x0800_0000u64..0x0800_1000,
            (u64::MAX - 0x1000)..=u64::MAX,
        ]
        .prop_map(Val::Address)
        .boxed(),
    }
}

/// Event types usable by records: the built-ins and the session's declared ones.
fn usable_types(custom: &[OwnedEventTypeDef]) -> Vec<(u16, Vec<ParamType>)> {
    BUILTINS
        .iter()
        .map(|b| (b.id(), b.def().params.iter().map(|p| p.ty).collect()))
        .chain(
            custom
                .iter()
                .map(|t| (t.id, t.params.iter().map(|p| p.ty).collect())),
        )
        .collect()
}

fn events(types: Vec<(u16, Vec<ParamType>)>) -> impl Strategy<Value = Events> {
    let record =
        (0..types.len(), any::<u64>(), 0u64..1000).prop_flat_map(move |(i, big, small)| {
            let (type_id, params) = types[i].clone();
            let delta = if big % 8 == 0 { big } else { small };
            params
                .into_iter()
                .map(value)
                .collect::<Vec<_>>()
                .prop_map(move |values| (delta, type_id, values))
        });
    (
        any::<bool>(),
        any::<u16>(),
        any::<u64>(),
        any::<u64>(),
        prop::collection::vec(record, 0..24),
    )
        .prop_map(|(compressed, cpu, first_seq, base_ticks, records)| {
            let mut ticks = base_ticks;
            Events {
                compressed,
                cpu,
                first_seq,
                base_ticks,
                records: records
                    .into_iter()
                    .map(|(delta, type_id, values)| {
                        ticks = ticks.saturating_add(delta);
                        Rec {
                            ticks,
                            type_id,
                            values,
                        }
                    })
                    .collect(),
            }
        })
}

fn counters() -> impl Strategy<Value = (u64, u64, u64)> {
    (any::<u64>(), any::<u64>(), any::<u64>())
}

/// A session: `Hello`, a `Dictionary` declaring its types, then any frames using them.
fn session() -> impl Strategy<Value = Vec<Model>> {
    (hello(), custom_types(), prop::collection::vec(producer(), 0..4)).prop_flat_map(
        |(hello, custom, producers)| {
            let types = usable_types(&custom);
            let mut declared: Vec<OwnedDictEntry> =
                producers.into_iter().map(OwnedDictEntry::Producer).collect();
            declared.extend(custom.into_iter().map(OwnedDictEntry::EventType));
            let frame = prop_oneof![
                4 => events(types.clone()).prop_map(Model::Events),
                1 => prop::collection::vec(producer(), 0..3)
                    .prop_map(|p| Model::Dictionary(p.into_iter().map(OwnedDictEntry::Producer).collect())),
                1 => (any::<u16>(), any::<u64>(), any::<u64>())
                    .prop_map(|(cpu, first_seq, count)| Model::Loss(Loss { cpu, first_seq, count })),
                1 => counters().prop_map(|(ticks, records, dropped)| {
                    Model::Heartbeat(Heartbeat { ticks, records, dropped })
                }),
                1 => counters().prop_map(|(ticks, records, dropped)| Model::Bye(Bye { ticks, records, dropped })),
            ];
            prop::collection::vec(frame, 0..8).prop_map(move |tail| {
                let mut frames = vec![
                    Model::Hello(hello.clone()),
                    Model::Dictionary(declared.clone()),
                ];
                frames.extend(tail);
                frames
            })
        },
    )
}

fn assert_round_trip(frames: &[Model], splits: &[usize]) {
    let (stream, ranges) = encode_stream(frames);
    let mut decoder = StreamDecoder::default();
    let out = decode_split(&mut decoder, &stream, splits);
    assert_eq!(out.errors, vec![]);
    assert_eq!(out.models(), frames);
    let offsets: Vec<(u64, usize)> = out.frames.iter().map(|d| (d.offset, d.len)).collect();
    let expected: Vec<(u64, usize)> = ranges.iter().map(|r| (r.start as u64, r.len())).collect();
    assert_eq!(offsets, expected);
    let stats = decoder.stats();
    assert_eq!(stats.bytes, stream.len() as u64);
    assert_eq!(stats.frames, frames.len() as u64);
    assert_eq!(stats.dropped_frames, 0);
    assert_eq!(stats.dropped_bytes, 0);
    let records: usize = frames
        .iter()
        .map(|f| match f {
            Model::Events(e) => e.records.len(),
            _ => 0,
        })
        .sum();
    assert_eq!(stats.records, records as u64);
    assert_eq!(decoder.pending(), 0);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn sessions_round_trip_in_any_slices(
        sessions in prop::collection::vec(session(), 1..4),
        splits in prop::collection::vec(1usize..80, 0..16),
        filler in 0usize..3,
    ) {
        let frames: Vec<Model> = sessions.into_iter().flatten().collect();
        assert_round_trip(&frames, &splits);

        // Idle filler (extra delimiters) between frames changes nothing but the offsets.
        let mut stream = Vec::new();
        for f in &frames {
            stream.extend(std::iter::repeat_n(0u8, filler));
            stream.extend(encode(f));
        }
        let out = decode_split(&mut StreamDecoder::default(), &stream, &splits);
        prop_assert_eq!(&out.errors, &vec![]);
        prop_assert_eq!(out.models(), frames);
    }

    #[test]
    fn every_encoding_fits_its_bound_and_has_one_zero(frames in session()) {
        for f in &frames {
            let bytes = encode(f);
            prop_assert_eq!(bytes.iter().position(|&b| b == 0), Some(bytes.len() - 1));
        }
    }
}

fn marker(text: String) -> Model {
    Model::Events(Events {
        compressed: false,
        cpu: 3,
        first_seq: 1,
        base_ticks: 7,
        records: vec![Rec {
            ticks: 7,
            type_id: Builtin::Marker.id(),
            values: vec![Val::Str(text)],
        }],
    })
}

/// The decoded frame (kind, body, CRC) of an encoded frame.
fn cobs_decoded(encoded: &[u8]) -> Vec<u8> {
    let mut frame = encoded[..encoded.len() - 1].to_vec();
    let n = cobs::decode_in_place(&mut frame).unwrap();
    frame.truncate(n);
    frame
}

/// The longest run of non-zero bytes in a decoded frame.
fn longest_nonzero_run(frame: &[u8]) -> usize {
    frame.split(|&b| b == 0).map(<[u8]>::len).max().unwrap_or(0)
}

/// COBS splits non-zero runs into blocks of 254 bytes: runs just under, at and over one and two blocks are
/// the classic implementation bugs. Markers of every length around them cover each run length, wherever the
/// CRC's own bytes fall.
#[test]
fn cobs_block_boundaries() {
    let mut runs_seen = std::collections::BTreeSet::new();
    let frames: Vec<Model> = (230..=530).map(|n| marker("x".repeat(n))).collect();
    for f in &frames {
        let bytes = encode(f);
        let decoded = cobs_decoded(&bytes);
        assert!(
            bytes.len() <= max_encoded_len(decoded.len()),
            "{}",
            bytes.len()
        );
        runs_seen.insert(longest_nonzero_run(&decoded));
    }
    for run in [253, 254, 255, 508] {
        assert!(
            runs_seen.contains(&run),
            "no frame has a non-zero run of {run}"
        );
    }
    assert_round_trip(&frames, &[]);
    assert_round_trip(&frames, &[1]);
    assert_round_trip(&frames, &[253, 254, 255, 508, 509]);
}

/// Zero bytes are where COBS does its work: a body made of zeros encodes every one as a code byte.
#[test]
fn zero_filled_bodies() {
    let zeros = |n| marker("\0".repeat(n));
    let mut frames: Vec<Model> = [0, 1, 2, 253, 254, 255, 508, 1000]
        .into_iter()
        .map(zeros)
        .collect();
    frames.push(Model::Loss(Loss {
        cpu: 0,
        first_seq: 0,
        count: 0,
    }));
    frames.push(Model::Heartbeat(Heartbeat {
        ticks: 0,
        records: 0,
        dropped: 0,
    }));
    frames.push(Model::Events(Events {
        compressed: false,
        cpu: 0,
        first_seq: 0,
        base_ticks: 0,
        records: vec![],
    }));
    // Every zero of a body costs exactly one byte more than nothing: the code byte that replaces it.
    assert_eq!(encode(&frames[6]).len(), encode(&frames[4]).len() + 254);
    assert_round_trip(&frames, &[]);
    assert_round_trip(&frames, &[1, 2, 3]);
}
