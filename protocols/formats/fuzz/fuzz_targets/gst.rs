#![no_main]
use libfuzzer_sys::fuzz_target;
use socscope_formats::gst::GstReader;

fuzz_target!(|data: &[u8]| {
    let mut r = GstReader::new(data, "fuzz");
    for _ in 0..100_000 {
        match r.next_record() {
            Ok(Some(_)) | Err(_) => {}
            Ok(None) => break,
        }
    }
});
