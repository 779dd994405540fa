#![no_main]
use libfuzzer_sys::fuzz_target;
use socscope_formats::tracecmd::DatReader;

fuzz_target!(|data: &[u8]| {
    let Ok(mut r) = DatReader::new(std::io::Cursor::new(data), "fuzz") else {
        return;
    };
    let mut text = String::new();
    for _ in 0..100_000 {
        match r.next_event() {
            Ok(Some(e)) => {
                text.clear();
                e.render(&mut text);
                let _ = (e.stack(), e.fields().count());
            }
            Err(_) => {}
            Ok(None) => break,
        }
    }
});
