//! Wire versions: version-1 and version-2 sample captures (written by those agents before each bump) still
//! decode, and an older collector refuses a newer board with the message SPEC.md promises.

use socscope_wire::decode::{DecodeError, Frame, StreamDecoder};
use socscope_wire::encode::encode_hello;
use socscope_wire::frame::Hello;
use socscope_wire::{READ_WIRE_VERSIONS, WIRE_VERSION};

#[test]
fn a_version_1_capture_still_decodes() {
    let bytes = include_bytes!("data/v1-sim.wire");
    let mut decoder = StreamDecoder::new(READ_WIRE_VERSIONS);
    decoder.feed(bytes);
    let (mut hellos, mut records) = (0, 0u64);
    while let Some(frame) = decoder.next_frame() {
        match frame.expect("every frame decodes").frame {
            Frame::Hello(h) => {
                assert_eq!((h.wire_version, h.board.as_str()), (1, "v1-board"));
                hellos += 1;
            }
            Frame::Events(b) => records += b.len() as u64,
            _ => {}
        }
    }
    assert!(decoder.finish().is_none());
    assert_eq!(
        (hellos, records),
        (1, 4055),
        "socscope-sim --duration 0.2 --seed 1"
    );
}

/// `socscope-sim --duration 0.2 --seed 1 --out v2-sim.wire`, built from commit c612609 (wire version 2:
/// `Events` frames of kind 03 with CRC-32C).
#[test]
fn a_version_2_capture_still_decodes() {
    let bytes = include_bytes!("data/v2-sim.wire");
    let mut decoder = StreamDecoder::new(READ_WIRE_VERSIONS);
    decoder.feed(bytes);
    let (mut hellos, mut records) = (0, 0u64);
    while let Some(frame) = decoder.next_frame() {
        match frame.expect("every frame decodes").frame {
            Frame::Hello(h) => {
                assert_eq!(h.wire_version, 2);
                hellos += 1;
            }
            Frame::Events(b) => records += b.len() as u64,
            _ => {}
        }
    }
    assert!(decoder.finish().is_none());
    assert!(hellos >= 1);
    assert_eq!(records, 4055, "socscope-sim --duration 0.2 --seed 1");
}

#[test]
fn a_version_2_collector_refuses_a_version_3_board_with_the_promised_message() {
    assert_eq!(WIRE_VERSION, 3);
    let mut frame = vec![0u8; 256];
    let n = encode_hello(
        &mut frame,
        &Hello {
            wire_version: WIRE_VERSION,
            agent_version: "0.1.0",
            board: "cam-7",
            soc: "soc",
            os: "linux",
            application: "app",
            cpu_count: 1,
            tick_rate_hz: 1_000_000,
            session_id: 1,
            start_ticks: 0,
            token: "",
        },
    )
    .unwrap();
    let mut old = StreamDecoder::new(&[1, 2]);
    old.feed(&frame[..n]);
    let Some(Err(e @ DecodeError::UnsupportedVersion { .. })) = old.next_frame() else {
        panic!("refused");
    };
    assert_eq!(
        e.to_string(),
        "board 'cam-7' speaks wire version 3, but this collector accepts only [1, 2]: upgrade socscope on the host to a release that reads wire version 3"
    );
    let spec = include_str!("../SPEC.md")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(spec.contains(&e.to_string()), "SPEC.md shows this message");
}
