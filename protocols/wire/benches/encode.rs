//! Encoding cost per record (a realistic kernel mix through `RecordEncoder`), framing cost per byte
//! (`encode_events` of a 4 KiB records block) and, with feature `decode`, decoding throughput in records/s.
//!
//! `cargo bench -p socscope-wire --features decode --bench encode`
// criterion_group! generates undocumented public functions; a benchmark has no API to document.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use socscope_wire::dict::Builtin;
use socscope_wire::encode::{RecordEncoder, encode_events, max_encoded_len};
use socscope_wire::frame::{EventsHeader, ParamValue};

/// One round of the mix: a context switch, an interrupt, a system call with four arguments, a wake-up, and a
/// user function entry and exit. Timestamps advance by a few hundred ticks, addresses stay near each other.
const MIX_LEN: usize = 9;

fn encode_mix(enc: &mut RecordEncoder, out: &mut [u8], ticks: &mut u64, round: u64) -> usize {
    let mut at = 0;
    let mut put = |enc: &mut RecordEncoder, dt: u64, b: Builtin, params: &[ParamValue<'_>]| {
        *ticks += dt;
        at += enc
            .encode(&mut out[at..], *ticks, b.id(), params)
            .expect("the block has room for a round");
    };
    let pid = 100 + round % 7;
    put(
        enc,
        310,
        Builtin::ContextSwitch,
        &[ParamValue::Unsigned(pid), ParamValue::Unsigned(pid + 1)],
    );
    put(enc, 45, Builtin::IrqEntry, &[ParamValue::Unsigned(27)]);
    put(enc, 12, Builtin::IrqExit, &[]);
    put(
        enc,
        230,
        Builtin::SyscallEntry,
        &[
            ParamValue::Unsigned(63),
            ParamValue::Unsigned(3),
            ParamValue::Unsigned(0x7ff0_1000),
            ParamValue::Unsigned(4096),
            ParamValue::Unsigned(0),
        ],
    );
    put(
        enc,
        90,
        Builtin::SyscallExit,
        &[ParamValue::Unsigned(63), ParamValue::Signed(4096)],
    );
    put(enc, 20, Builtin::Wakeup, &[ParamValue::Unsigned(pid + 2)]);
    put(
        enc,
        140,
        Builtin::UserEntry,
        &[ParamValue::Address(0x0800_1000 + (round % 16) * 0x40)],
    );
    put(enc, 75, Builtin::UserExit, &[]);
    put(
        enc,
        5,
        Builtin::UserEntry,
        &[ParamValue::Address(0x0800_2000 + (round % 16) * 0x40)],
    );
    at
}

/// A records block of at most `limit` bytes, and how many records it holds.
fn records_block(base_ticks: u64, limit: usize) -> (Vec<u8>, u32) {
    let mut enc = RecordEncoder::new(base_ticks);
    let mut ticks = base_ticks;
    let mut block = vec![0u8; limit + 256];
    let mut len = 0;
    let mut count = 0;
    let mut round = 0;
    while len + 128 <= limit {
        len += encode_mix(&mut enc, &mut block[len..], &mut ticks, round);
        count += MIX_LEN as u32;
        round += 1;
    }
    block.truncate(len);
    (block, count)
}

fn bench_encode(c: &mut Criterion) {
    let mut group = c.benchmark_group("encode");
    group.throughput(Throughput::Elements(MIX_LEN as u64));
    let mut out = [0u8; 512];
    let mut round = 0u64;
    group.bench_function("record_mix", |b| {
        let mut enc = RecordEncoder::new(0);
        let mut ticks = 0;
        b.iter(|| {
            round += 1;
            let n = encode_mix(&mut enc, black_box(&mut out), &mut ticks, round);
            black_box(n)
        })
    });

    let (block, count) = records_block(1_000_000, 4096);
    let header = EventsHeader {
        flags: 0,
        cpu: 1,
        first_seq: 123_456,
        base_ticks: 1_000_000,
        count,
    };
    let mut frame = vec![0u8; max_encoded_len(block.len() + 64)];
    group.throughput(Throughput::Bytes(block.len() as u64));
    group.bench_function("events_frame_4k", |b| {
        b.iter(|| encode_events(black_box(&mut frame), black_box(&header), black_box(&block)))
    });
    group.finish();
}

#[cfg(feature = "decode")]
fn bench_decode(c: &mut Criterion) {
    use socscope_wire::decode::StreamDecoder;

    // 64 frames of about 4 KiB each, fed in 4 KiB slices as a socket would deliver them.
    let mut stream = Vec::new();
    let mut records = 0u64;
    let mut frame = vec![0u8; max_encoded_len(4096 + 64)];
    for i in 0..64u64 {
        let base = 1_000_000 + i * 1_000_000;
        let (block, count) = records_block(base, 4096);
        let header = EventsHeader {
            flags: 0,
            cpu: (i % 2) as u16,
            first_seq: u64::from(count) * i,
            base_ticks: base,
            count,
        };
        let n = encode_events(&mut frame, &header, &block).unwrap();
        stream.extend_from_slice(&frame[..n]);
        records += u64::from(count);
    }
    let mut group = c.benchmark_group("decode");
    group.throughput(Throughput::Elements(records));
    group.bench_function("stream_records", |b| {
        b.iter(|| {
            let mut decoder = StreamDecoder::default();
            let mut decoded = 0;
            for slice in stream.chunks(4096) {
                decoder.feed(slice);
                while let Some(frame) = decoder.next_frame() {
                    if let socscope_wire::decode::Frame::Events(batch) = frame.unwrap().frame {
                        decoded += batch.len();
                    }
                }
            }
            assert_eq!(decoded as u64, records);
            decoded
        })
    });
    group.finish();
}

#[cfg(not(feature = "decode"))]
fn bench_decode(_: &mut Criterion) {}

criterion_group!(benches, bench_encode, bench_decode);
criterion_main!(benches);
