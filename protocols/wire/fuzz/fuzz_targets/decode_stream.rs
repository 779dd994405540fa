//! Arbitrary bytes, cut at arbitrary points, through `StreamDecoder`: it must never panic, and its counters
//! must account for every report.
#![no_main]

use libfuzzer_sys::fuzz_target;
use socscope_wire::decode::{DecodeError, StreamDecoder};

fuzz_target!(|data: &[u8]| {
    // The first byte seeds the slice sizes, so that the same stream is tried in many cuttings.
    let Some((&seed, stream)) = data.split_first() else {
        return;
    };
    let mut decoder = StreamDecoder::new(&[1, 2]);
    let mut frames = 0u64;
    let mut drops = 0u64;
    let mut count = |r: Result<_, DecodeError>| match r {
        Ok(_) => frames += 1,
        Err(_) => drops += 1,
    };
    let mut at = 0;
    let mut size = usize::from(seed % 61) + 1;
    while at < stream.len() {
        let end = (at + size).min(stream.len());
        decoder.feed(&stream[at..end]);
        while let Some(r) = decoder.next_frame() {
            count(r);
        }
        at = end;
        size = (size * 7 + usize::from(seed)) % 97 + 1;
    }
    if let Some(e) = decoder.finish() {
        count(Err(e));
    }
    assert_eq!(decoder.next_frame(), None);
    assert_eq!(decoder.finish(), None);
    let stats = decoder.stats();
    assert_eq!(stats.frames, frames);
    assert_eq!(stats.dropped_frames, drops);
    assert_eq!(stats.bytes, stream.len() as u64);
    assert_eq!(decoder.pending(), 0);
});
