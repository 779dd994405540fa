//! Corruption: valid frames, then bytes flipped, inserted and removed anywhere (delimiters included), fed in
//! arbitrary slices. The decoder must never panic, never accept garbage, decode every frame the damage did
//! not reach, report every damaged frame, and keep its counters consistent.

mod common;

use common::{Events, Model, Rec, Val, decode_split, encode_stream};
use proptest::prelude::*;
use proptest::sample::Index;
use socscope_wire::WIRE_VERSION;
use socscope_wire::decode::{
    DecodeError, HelloInfo, OwnedDictEntry, OwnedEventTypeDef, OwnedParamDef, ProducerInfo,
    StreamDecoder,
};
use socscope_wire::dict::{BUILTINS, Category, ParamType, ProducerKind};
use socscope_wire::frame::{Bye, CpuTotal, Heartbeat, Loss, Window};

fn value(ty: ParamType) -> BoxedStrategy<Val> {
    match ty {
        ParamType::Signed => any::<i64>().prop_map(Val::Signed).boxed(),
        ParamType::Unsigned => prop_oneof![0u64..300, any::<u64>()]
            .prop_map(Val::Unsigned)
            .boxed(),
        ParamType::Float => any::<f64>().prop_map(|f| Val::Float(f.to_bits())).boxed(),
        ParamType::String => "\\PC{0,6}".prop_map(Val::Str).boxed(),
        ParamType::Address => (0x0800_0000u64..0x0801_0000).prop_map(Val::Address).boxed(),
    }
}

/// Events of built-in types only, so that a lost `Dictionary` cannot make later intact frames undecodable.
fn events() -> impl Strategy<Value = Events> {
    let record = (0..BUILTINS.len(), 0u64..500).prop_flat_map(|(i, delta)| {
        let b = BUILTINS[i];
        b.def()
            .params
            .iter()
            .map(|p| value(p.ty))
            .collect::<Vec<_>>()
            .prop_map(move |values| (delta, b.id(), values))
    });
    (
        any::<bool>(),
        0u16..4,
        0u64..10_000,
        any::<u32>(),
        prop::collection::vec(record, 0..10),
    )
        .prop_map(|(compressed, cpu, first_seq, base, records)| {
            let mut ticks = u64::from(base);
            Events {
                compressed,
                cpu,
                first_seq,
                base_ticks: u64::from(base),
                records: records
                    .into_iter()
                    .map(|(delta, type_id, values)| {
                        ticks += delta;
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

fn frame() -> impl Strategy<Value = Model> {
    prop_oneof![
        1 => ("\\PC{0,8}", any::<u64>()).prop_map(|(board, session_id)| Model::Hello(HelloInfo {
            wire_version: WIRE_VERSION,
            agent_version: "0.1.0".into(),
            board,
            soc: "sim".into(),
            os: "none".into(),
            application: "app".into(),
            cpu_count: 4,
            tick_rate_hz: 1_000_000,
            session_id,
            start_ticks: 0,
            token: String::new(),
        })),
        1 => (any::<u32>(), 64u16..80, "\\PC{0,8}").prop_map(|(id, type_id, name)| {
            Model::Dictionary(vec![
                OwnedDictEntry::Producer(ProducerInfo {
                    id,
                    parent: None,
                    kind: ProducerKind::Thread,
                    local_id: u64::from(id),
                    name: name.clone(),
                }),
                OwnedDictEntry::EventType(OwnedEventTypeDef {
                    id: type_id,
                    name,
                    category: Category::Punctual,
                    params: vec![OwnedParamDef {
                        name: "v".into(),
                        ty: ParamType::Unsigned,
                    }],
                }),
            ])
        }),
        5 => events().prop_map(Model::Events),
        1 => (0u16..4, any::<u64>(), 1u64..100)
            .prop_map(|(cpu, first_seq, count)| Model::Loss(Loss { cpu, first_seq, count })),
        1 => (any::<u64>(), 0u64..1000)
            .prop_map(|(ticks, records)| Model::Heartbeat(Heartbeat { ticks, records, dropped: 0 })),
        1 => (any::<u64>(), 0u64..1000)
            .prop_map(|(ticks, records)| Model::Bye(Bye { ticks, records, dropped: 3 })),
        1 => (0u16..4, any::<u64>())
            .prop_map(|(cpu, sequences)| Model::CpuTotal(CpuTotal { cpu, sequences })),
        1 => (0u16..4, any::<u64>(), any::<u64>()).prop_map(|(cpu, first_seq, overwritten)| {
            Model::Window(Window { cpu, first_seq, overwritten })
        }),
    ]
}

#[derive(Clone, Debug)]
enum Mutation {
    /// XOR the byte with a non-zero mask.
    Flip(Index, u8),
    /// Insert a byte before the byte at the index (or at the very end).
    Insert(Index, u8),
    Remove(Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<Index>(), 1u8..=255).prop_map(|(i, m)| Mutation::Flip(i, m)),
        (any::<Index>(), prop_oneof![Just(0u8), any::<u8>()])
            .prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<Index>().prop_map(Mutation::Remove),
    ]
}

/// The mutated stream and, for every original position `p` (and `p == len`), where it landed: the length of
/// the output written before the bytes inserted at `p`.
struct Mutated {
    bytes: Vec<u8>,
    landed: Vec<usize>,
    /// The original byte was flipped or removed.
    altered: Vec<bool>,
    /// Bytes were inserted before the original byte.
    inserted_before: Vec<bool>,
}

fn mutate(stream: &[u8], mutations: &[Mutation]) -> Mutated {
    let len = stream.len();
    let mut flip = vec![0u8; len];
    let mut removed = vec![false; len];
    let mut inserts: Vec<Vec<u8>> = vec![Vec::new(); len + 1];
    for m in mutations {
        match m {
            Mutation::Flip(i, mask) => flip[i.index(len)] ^= mask,
            Mutation::Insert(i, b) => inserts[i.index(len + 1)].push(*b),
            Mutation::Remove(i) => removed[i.index(len)] = true,
        }
    }
    let mut out = Mutated {
        bytes: Vec::new(),
        landed: Vec::new(),
        altered: Vec::new(),
        inserted_before: Vec::new(),
    };
    for p in 0..=len {
        out.landed.push(out.bytes.len());
        out.bytes.extend(&inserts[p]);
        out.inserted_before.push(!inserts[p].is_empty());
        if p < len {
            out.altered.push(removed[p] || flip[p] != 0);
            if !removed[p] {
                out.bytes.push(stream[p] ^ flip[p]);
            }
        }
    }
    out
}

fn overlaps(a: (usize, usize), b: (usize, usize)) -> bool {
    a.0 <= b.1 && b.0 <= a.1
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn damage_is_reported_and_contained(
        frames in prop::collection::vec(frame(), 1..8),
        mutations in prop::collection::vec(mutation(), 1..6),
        splits in prop::collection::vec(1usize..40, 0..8),
    ) {
        let (stream, ranges) = encode_stream(&frames);
        let m = mutate(&stream, &mutations);
        let mut decoder = StreamDecoder::default();
        let out = decode_split(&mut decoder, &m.bytes, &splits);

        // Where each original frame landed in the mutated stream: [lo, hi).
        let landing: Vec<(usize, usize)> =
            ranges.iter().map(|r| (m.landed[r.start], m.landed[r.end])).collect();
        let clean: Vec<bool> = ranges
            .iter()
            .map(|r| {
                r.clone().all(|p| !m.altered[p] && !m.inserted_before[p])
                    && (r.start == 0 || !m.altered[r.start - 1])
            })
            .collect();

        let mut drops = Vec::new();
        for e in &out.errors {
            match e {
                DecodeError::Dropped { offset, len, .. } => drops.push((*offset as usize, *len)),
                other => prop_assert!(false, "unexpected report {other}"),
            }
        }

        // Garbage is never accepted: every decoded frame is the original that landed where it was found.
        for d in &out.frames {
            let at = d.offset as usize;
            let j = landing.iter().position(|&(lo, hi)| lo <= at && at < hi);
            prop_assert!(j.is_some(), "frame decoded at {} outside every landing range", at);
            let j = j.unwrap();
            prop_assert_eq!(&common::model_of(&d.frame), &frames[j], "frame {} at {}", j, at);
            prop_assert_eq!(&m.bytes[at..at + d.len], &stream[ranges[j].clone()]);
        }

        for (i, &(lo, hi)) in landing.iter().enumerate() {
            let decoded_here = out
                .frames
                .iter()
                .any(|d| (lo..hi).contains(&(d.offset as usize)));
            if clean[i] {
                // Untouched frames behind an untouched delimiter are decoded, where they landed.
                prop_assert!(
                    out.frames.iter().any(|d| d.offset as usize == lo && d.len == hi - lo),
                    "clean frame {} at {} not decoded", i, lo
                );
                // And no report claims their bytes.
                for &(o, len) in &drops {
                    prop_assert!(o + len <= lo || o >= hi, "drop {:?} inside clean frame {}", (o, len), i);
                }
            } else if !decoded_here && m.bytes[lo..hi].iter().any(|&b| b != 0) {
                // Damaged frames whose bytes (some non-zero ones) survived are reported.
                prop_assert!(
                    drops.iter().any(|&(o, len)| overlaps((o, o + len), (lo, hi - 1))),
                    "damaged frame {} at {}..{} not covered by {:?}", i, lo, hi, drops
                );
            }
        }

        let stats = decoder.stats();
        prop_assert_eq!(stats.bytes, m.bytes.len() as u64);
        prop_assert_eq!(stats.frames, out.frames.len() as u64);
        prop_assert_eq!(stats.dropped_frames, drops.len() as u64);
        prop_assert_eq!(stats.dropped_bytes, drops.iter().map(|&(_, len)| len as u64).sum::<u64>());
        prop_assert_eq!(decoder.pending(), 0);
    }

    /// Random bytes alone: no panic, nothing accepted, every byte accounted for.
    #[test]
    fn random_bytes_are_never_accepted(
        bytes in prop::collection::vec(any::<u8>(), 0..2048),
        splits in prop::collection::vec(1usize..64, 0..8),
    ) {
        let mut decoder = StreamDecoder::default();
        let out = decode_split(&mut decoder, &bytes, &splits);
        prop_assert_eq!(out.frames.len(), 0);
        let stats = decoder.stats();
        prop_assert_eq!(stats.dropped_frames, out.errors.len() as u64);
        let zeros = bytes.iter().filter(|&&b| b == 0).count() as u64;
        prop_assert_eq!(stats.dropped_bytes + zeros, bytes.len() as u64);
    }
}
