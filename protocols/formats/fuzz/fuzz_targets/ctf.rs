#![no_main]
use libfuzzer_sys::fuzz_target;
use socscope_formats::ctf::CtfReader;

// An input is a metadata file and a stream, the metadata's length first (4 bytes, little-endian), as
// `socscope_collector::fuzz::ctf_input` writes them.
fuzz_target!(|data: &[u8]| {
    let Some(len) = data.get(..4) else { return };
    let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
    let (metadata, stream) = data[4..].split_at(len.min(data.len() - 4));
    let Ok(mut r) = CtfReader::from_memory(metadata, vec![("s_0".into(), stream.to_vec())]) else {
        return;
    };
    for _ in 0..100_000 {
        match r.next_event() {
            Ok(Some(e)) => {
                if let Some(f) = &e.fields {
                    let _ = f.to_string();
                }
            }
            Err(_) => {}
            Ok(None) => break,
        }
    }
});
