#![no_main]
use libfuzzer_sys::fuzz_target;
use socscope_formats::paje::PajeReader;

fuzz_target!(|data: &[u8]| {
    let mut r = PajeReader::new(data, "fuzz");
    for _ in 0..100_000 {
        match r.next_record() {
            Ok(Some(rec)) => {
                let _ = (rec.time_ns(), rec.get("Value"), rec.extra_fields(&["Time"]).count());
            }
            Err(_) => {}
            Ok(None) => break,
        }
    }
});
