//! Errors: "need more bytes" is not "malformed"; every malformed frame is dropped with its reason and stream
//! offset; dictionary and version errors; the end of the stream; oversized garbage.

mod common;

use common::{Events, Model, Rec, Val, decode_all, decode_split, encode};
use socscope_wire::decode::{
    DecodeError, DropReason, Frame, HelloInfo, OwnedDictEntry, OwnedEventTypeDef, OwnedParamDef,
    StreamDecoder,
};
use socscope_wire::dict::{Builtin, Category, ParamType};
use socscope_wire::encode::{EncodeError, encode_frame, max_encoded_len};
use socscope_wire::frame::{FrameKind, Heartbeat, Loss};
use socscope_wire::{FRAME_CRC, MAX_FRAME_LEN, WIRE_VERSION};

/// COBS-encodes `raw` (kind, body, CRC) and appends the delimiter, without checking anything.
fn cobs_frame(raw: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; max_encoded_len(raw.len())];
    let n = cobs::encode(raw, &mut out);
    out.truncate(n);
    out.push(0);
    out
}

/// A frame with a correct CRC around any kind byte and body.
fn crc_frame(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut raw = vec![kind];
    raw.extend_from_slice(body);
    raw.extend_from_slice(&FRAME_CRC.checksum(&raw).to_le_bytes());
    cobs_frame(&raw)
}

fn heartbeat(ticks: u64) -> Model {
    Model::Heartbeat(Heartbeat {
        ticks,
        records: 2,
        dropped: 0,
    })
}

fn hello(version: u16, board: &str) -> Model {
    Model::Hello(HelloInfo {
        wire_version: version,
        agent_version: "9.9.9".into(),
        board: board.into(),
        soc: "stm32h7".into(),
        os: "none".into(),
        application: "blinky".into(),
        cpu_count: 1,
        tick_rate_hz: 1000,
        session_id: 5,
        start_ticks: 0,
        token: String::new(),
    })
}

fn dropped(offset: usize, len: usize, reason: DropReason) -> DecodeError {
    DecodeError::Dropped {
        offset: offset as u64,
        len,
        reason,
    }
}

#[test]
fn a_frame_fed_byte_by_byte_needs_more_until_its_delimiter() {
    let bytes = encode(&heartbeat(77));
    let mut decoder = StreamDecoder::default();
    for (i, b) in bytes.iter().enumerate() {
        assert_eq!(decoder.next_frame(), None, "before byte {i}");
        decoder.feed(std::slice::from_ref(b));
        if i + 1 < bytes.len() {
            assert_eq!(decoder.next_frame(), None, "after byte {i}");
            assert_eq!(decoder.pending(), i + 1);
        }
    }
    let decoded = decoder.next_frame().unwrap().unwrap();
    assert_eq!((decoded.offset, decoded.len), (0, bytes.len()));
    assert_eq!(common::model_of(&decoded.frame), heartbeat(77));
    assert_eq!(decoder.next_frame(), None);
    assert_eq!(decoder.finish(), None);
    assert_eq!(decoder.offset(), bytes.len() as u64);
}

#[test]
fn malformed_frames_are_dropped_with_reason_and_offset() {
    let good = encode(&heartbeat(1));
    // Bad CRC: a valid Loss body whose CRC lost one bit.
    let mut raw = vec![FrameKind::Loss as u8, 1, 2, 3];
    let crc = FRAME_CRC.checksum(&raw);
    raw.extend_from_slice(&(crc ^ 0x10).to_le_bytes());
    let bad_crc = cobs_frame(&raw);
    // Bad COBS: the code byte promises 5 bytes, 1 follows.
    let bad_cobs = vec![0x05, 0x01, 0x00];
    let unknown_kind = crc_frame(0x7f, &[1, 2, 3]);
    let too_short = cobs_frame(&[1, 2, 3]);
    // A Heartbeat cut after two of its three counters (CRC recomputed, so only the body is wrong).
    let truncated_body = crc_frame(FrameKind::Heartbeat as u8, &[1, 2]);
    let trailing = crc_frame(FrameKind::Loss as u8, &[1, 2, 3, 4]);
    let bad_flags = crc_frame(FrameKind::Events as u8, &[0x02, 0, 0, 0, 0]);

    let pieces = [
        &good,
        &bad_crc,
        &good,
        &bad_cobs,
        &unknown_kind,
        &too_short,
        &truncated_body,
        &trailing,
        &bad_flags,
        &good,
    ];
    let mut stream = Vec::new();
    let mut at = Vec::new();
    for p in pieces {
        at.push(stream.len());
        stream.extend_from_slice(p);
    }
    let expected = vec![
        Ok(heartbeat(1)),
        Err(dropped(
            at[1],
            bad_crc.len() - 1,
            DropReason::Crc {
                carried: crc ^ 0x10,
                computed: crc,
            },
        )),
        Ok(heartbeat(1)),
        Err(dropped(at[3], 2, DropReason::Cobs)),
        Err(dropped(
            at[4],
            unknown_kind.len() - 1,
            DropReason::UnknownKind(0x7f),
        )),
        Err(dropped(at[5], 4, DropReason::TooShort { len: 3 })),
        Err(dropped(
            at[6],
            truncated_body.len() - 1,
            DropReason::Malformed {
                kind: "Heartbeat",
                at: 3,
                expected: "the rest of a varint",
            },
        )),
        Err(dropped(
            at[7],
            trailing.len() - 1,
            DropReason::Malformed {
                kind: "Loss",
                at: 4,
                expected: "the end of the frame",
            },
        )),
        Err(dropped(
            at[8],
            bad_flags.len() - 1,
            DropReason::Malformed {
                kind: "Events",
                at: 1,
                expected: "flags with only bit 0 (zstd) defined",
            },
        )),
        Ok(heartbeat(1)),
    ];
    for splits in [&[][..], &[1], &[3, 7]] {
        let mut decoder = StreamDecoder::default();
        let out = decode_split(&mut decoder, &stream, splits);
        let got: Vec<Result<Model, DecodeError>> = out
            .all
            .iter()
            .map(|r| {
                r.as_ref()
                    .map(|d| common::model_of(&d.frame))
                    .map_err(Clone::clone)
            })
            .collect();
        assert_eq!(got, expected, "splits {splits:?}");
        let stats = decoder.stats();
        assert_eq!(stats.frames, 3);
        assert_eq!(stats.dropped_frames, 7);
        assert_eq!(
            stats.dropped_bytes,
            (stream.len() - 3 * good.len() - 7) as u64
        );
    }
    assert_eq!(
        expected[1].clone().unwrap_err().to_string(),
        format!(
            "dropped {} bytes at stream offset {}: check mismatch: the frame carries {:#010x}, its bytes give {:#010x}",
            bad_crc.len() - 1,
            at[1],
            crc ^ 0x10,
            crc
        )
    );
}

fn custom_type(id: u16) -> OwnedDictEntry {
    OwnedDictEntry::EventType(OwnedEventTypeDef {
        id,
        name: "adc".into(),
        category: Category::Variable,
        params: vec![OwnedParamDef {
            name: "mv".into(),
            ty: ParamType::Unsigned,
        }],
    })
}

fn events_with(type_id: u16) -> Model {
    Model::Events(Events {
        compressed: false,
        cpu: 0,
        first_seq: 0,
        base_ticks: 0,
        records: vec![
            Rec {
                ticks: 1,
                type_id: Builtin::Mark.id(),
                values: vec![Val::Unsigned(1)],
            },
            Rec {
                ticks: 2,
                type_id,
                values: vec![Val::Unsigned(3300)],
            },
        ],
    })
}

#[test]
fn records_of_undeclared_types_are_dropped() {
    let before = encode(&events_with(70));
    let dict = encode(&Model::Dictionary(vec![custom_type(70)]));
    let stream = [before.clone(), dict.clone(), before.clone()].concat();
    let out = decode_all(&stream);
    assert_eq!(
        out.errors,
        vec![dropped(
            0,
            before.len() - 1,
            DropReason::UnknownEventType {
                record: 1,
                type_id: 70
            }
        )]
    );
    assert_eq!(
        out.models(),
        vec![Model::Dictionary(vec![custom_type(70)]), events_with(70)]
    );
    assert_eq!(out.frames[1].offset, (before.len() + dict.len()) as u64);
}

#[test]
fn dictionaries_cannot_redefine_builtins() {
    let dict = encode(&Model::Dictionary(vec![custom_type(64), custom_type(2)]));
    let events = encode(&events_with(64));
    let stream = [dict.clone(), events.clone()].concat();
    let out = decode_all(&stream);
    // The whole frame is refused: type 64, declared beside the reserved id, stays unknown.
    assert_eq!(
        out.errors,
        vec![
            dropped(0, dict.len() - 1, DropReason::ReservedType(2)),
            dropped(
                dict.len(),
                events.len() - 1,
                DropReason::UnknownEventType {
                    record: 1,
                    type_id: 64
                }
            ),
        ]
    );
    assert_eq!(
        out.errors[0].to_string(),
        format!(
            "dropped {} bytes at stream offset 0: event type id 2 is reserved for the built-in dictionary",
            dict.len() - 1
        )
    );
    assert!(out.frames.is_empty());
}

#[test]
fn a_newer_board_is_refused_until_a_supported_hello() {
    let newer = encode(&hello(WIRE_VERSION + 1, "cam-7"));
    let hb = encode(&heartbeat(9));
    let ok = encode(&hello(WIRE_VERSION, "cam-7"));
    let stream = [
        hb.clone(),
        newer.clone(),
        hb.clone(),
        hb.clone(),
        ok.clone(),
        hb.clone(),
    ]
    .concat();
    let mut decoder = StreamDecoder::default();
    let out = decode_split(&mut decoder, &stream, &[5]);
    let rejected = DecodeError::UnsupportedVersion {
        offset: hb.len() as u64,
        found: WIRE_VERSION + 1,
        accepted: vec![WIRE_VERSION],
        board: "cam-7".into(),
    };
    assert_eq!(
        rejected.to_string(),
        "board 'cam-7' speaks wire version 4, but this collector accepts only [3]: upgrade socscope on \
         the host to a release that reads wire version 4"
    );
    let at_hb = |n: usize| hb.len() + newer.len() + n * hb.len();
    let got: Vec<Result<Frame, DecodeError>> =
        out.all.into_iter().map(|r| r.map(|d| d.frame)).collect();
    let Model::Hello(ok_hello) = hello(WIRE_VERSION, "cam-7") else {
        unreachable!()
    };
    let beat = Frame::Heartbeat(Heartbeat {
        ticks: 9,
        records: 2,
        dropped: 0,
    });
    assert_eq!(
        got,
        vec![
            Ok(beat.clone()),
            Err(rejected),
            Err(dropped(
                at_hb(0),
                hb.len() - 1,
                DropReason::SessionRejected(WIRE_VERSION + 1)
            )),
            Err(dropped(
                at_hb(1),
                hb.len() - 1,
                DropReason::SessionRejected(WIRE_VERSION + 1)
            )),
            Ok(Frame::Hello(ok_hello)),
            Ok(beat),
        ]
    );
    let stats = decoder.stats();
    assert_eq!(stats.frames, 3);
    assert_eq!(stats.dropped_frames, 3);
    assert_eq!(
        stats.dropped_bytes,
        (newer.len() - 1 + 2 * (hb.len() - 1)) as u64
    );
}

#[test]
fn an_older_board_is_told_to_upgrade_its_agent() {
    let mut decoder = StreamDecoder::new(&[2, 3]);
    let stream = [encode(&hello(1, "gw-1")), encode(&heartbeat(1))].concat();
    let out = decode_split(&mut decoder, &stream, &[]);
    assert_eq!(out.errors.len(), 2);
    assert_eq!(
        out.errors[0].to_string(),
        "board 'gw-1' speaks wire version 1, but this collector accepts only [2, 3]: upgrade the agent \
         firmware on 'gw-1' to wire version 3"
    );
    assert!(matches!(
        out.errors[1],
        DecodeError::Dropped {
            reason: DropReason::SessionRejected(1),
            ..
        }
    ));
}

#[test]
fn finish_reports_a_partial_frame_once() {
    let whole = encode(&heartbeat(1));
    let partial = encode(&Model::Loss(Loss {
        cpu: 0,
        first_seq: 1000,
        count: 3,
    }));
    let mut decoder = StreamDecoder::default();
    decoder.feed(&whole);
    decoder.feed(&partial[..5]);
    assert!(matches!(decoder.next_frame(), Some(Ok(_))));
    assert_eq!(decoder.next_frame(), None);
    assert_eq!(
        decoder.finish(),
        Some(dropped(whole.len(), 5, DropReason::Truncated))
    );
    assert_eq!(decoder.finish(), None);
    assert_eq!(decoder.stats().dropped_frames, 1);
    assert_eq!(decoder.stats().dropped_bytes, 5);
}

#[test]
fn garbage_without_delimiter_is_oversized_and_memory_stays_bounded() {
    let max = max_encoded_len(MAX_FRAME_LEN);
    let chunk = vec![0xAAu8; 64 * 1024];
    let mut decoder = StreamDecoder::default();
    let mut reports = Vec::new();
    let mut fed = 0usize;
    while fed < 5 * max {
        decoder.feed(&chunk);
        fed += chunk.len();
        while let Some(r) = decoder.next_frame() {
            reports.push(r.unwrap_err());
        }
        assert!(
            decoder.pending() <= max,
            "pending {} after {fed}",
            decoder.pending()
        );
    }
    let first_len = max.div_ceil(chunk.len()) * chunk.len();
    assert_eq!(
        reports[0],
        dropped(0, first_len, DropReason::Oversized { max })
    );
    // The rest of the same oversized frame is skipped without further reports.
    assert_eq!(reports.len(), 1, "{reports:?}");
    // A frame after the next delimiter is decoded again.
    let good = encode(&heartbeat(3));
    decoder.feed(&[0]);
    decoder.feed(&good);
    let decoded = decoder.next_frame().unwrap().unwrap();
    assert_eq!(decoded.offset, fed as u64 + 1);
    assert_eq!(decoder.next_frame(), None);
    assert_eq!(decoder.finish(), None);
    let stats = decoder.stats();
    assert_eq!(stats.dropped_frames, 1);
    assert_eq!(stats.dropped_bytes, fed as u64);
}

/// The largest frame the format allows decodes whatever the slices; one byte more is refused by the encoder,
/// and by the decoder whatever the slices.
#[test]
fn frame_size_limit_is_the_same_for_encoder_and_decoder() {
    // kind, flags, cpu, first_seq, base, count, type, delta: 8 bytes; a 3-byte length; the CRC.
    let text = "x".repeat(MAX_FRAME_LEN - 8 - 3 - 4);
    let largest = Model::Events(Events {
        compressed: false,
        cpu: 0,
        first_seq: 0,
        base_ticks: 0,
        records: vec![Rec {
            ticks: 0,
            type_id: Builtin::Marker.id(),
            values: vec![Val::Str(text)],
        }],
    });
    let bytes = encode(&largest);
    for splits in [&[][..], &[4096], &[100_000, 1]] {
        let out = decode_split(&mut StreamDecoder::default(), &bytes, splits);
        assert_eq!(out.errors, vec![], "splits {splits:?}");
        assert_eq!(out.models(), vec![largest.clone()]);
    }

    let mut out = vec![0u8; max_encoded_len(MAX_FRAME_LEN + 1)];
    let body = vec![0x55u8; MAX_FRAME_LEN - 1 - 4];
    assert!(encode_frame(&mut out, FrameKind::Heartbeat, |f| f.push(&body)).is_ok());
    let body = vec![0x55u8; MAX_FRAME_LEN - 1 - 4 + 1];
    assert_eq!(
        encode_frame(&mut out, FrameKind::Heartbeat, |f| f.push(&body)),
        Err(EncodeError::FrameTooLong)
    );

    let too_long = crc_frame(FrameKind::Heartbeat as u8, &body);
    let max = max_encoded_len(MAX_FRAME_LEN);
    for splits in [&[][..], &[4096]] {
        let mut decoder = StreamDecoder::default();
        let out = decode_split(&mut decoder, &too_long, splits);
        assert_eq!(out.frames.len(), 0);
        assert_eq!(out.errors.len(), 1, "splits {splits:?}: {:?}", out.errors);
        assert!(
            matches!(
                out.errors[0],
                DecodeError::Dropped {
                    offset: 0,
                    reason: DropReason::Oversized { max: m },
                    ..
                } if m == max
            ),
            "splits {splits:?}: {:?}",
            out.errors
        );
        assert_eq!(decoder.stats().dropped_bytes, too_long.len() as u64 - 1);
    }
}
